/* SPDX-License-Identifier: MIT */
/*
 * tests/test-ipc-upstream.c - the server in a .NET host (ipc/upstream.c, docs/dotnet-hosts.md),
 * against a fake runtime in a thread of this test: the runtime's socket names are redirected,
 * its commands forwarded and answered byte for byte, a CollectTracing starts the fake runtime's
 * session without the SampleProfiler and merges its stream with the event source's, a stop
 * ends the runtime's session first, a client that leaves ends it too, a runtime's refusal
 * reaches the client as it was, a process whose runtime never comes is served natively, and a
 * connect port advertises the runtime's cookie and carries ResumeRuntime through the runtime's
 * own connection. A host's start removes the private sockets a killed host left behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ipc/internal.h"
#include "ipc/ipc.h"
#include "nettrace/nettrace.h"
#include "tests/test.h"

#define FAKE_SESSION_ID 0x1234u
#define FAKE_DUMP_ERROR 0x8013FACEu

static char dir[64];
static char public_path[256];
static struct ipc_server *srv;
static uint8_t resp[IPC_MAX_MESSAGE + 1];

/* ----- the event source: one "Test-Source/Tick" per drain --------------------------------- */

static atomic_int drains;

static const struct nt_event_desc tick_desc = { "Test-Source", 7, "Tick", 0, 0, 4, 0, NULL, 0, 0 };

static int
source_drain(void *ctx, const struct ipc_session_view *v, size_t n)
{
    uint8_t payload[4] = { 1, 2, 3, 4 };
    size_t i;

    (void)ctx;
    drains++;
    for (i = 0; i < n; i++) {
        struct nt_event ev;
        uint32_t id;

        if (nt_writer_define(v[i].writer, &tick_desc, &id) < 0) {
            return -EIO;
        }
        memset(&ev, 0, sizeof(ev));
        ev.metadata_id = id;
        ev.thread_id = 11;
        ev.capture_thread_id = 11;
        ev.processor = 0xFFFFFFFFu;
        ev.timestamp = nt_clock_now();
        ev.payload = payload;
        ev.payload_size = sizeof(payload);
        if (nt_writer_write(v[i].writer, &ev) < 0) {
            return -EIO;
        }
    }
    return 0;
}

static const struct ipc_event_source source = { .drain = source_drain };

/* ----- the fake runtime ------------------------------------------------------------------- */

struct fake {
    pthread_t thread;
    int listen_fd;
    char path[256];
    atomic_int stop;         /* the test ends */
    atomic_int stop_accept;  /* the listener goes; streams stay */
    atomic_int stop_tracing; /* StopTracing arrived for FAKE_SESSION_ID */
    atomic_int stream_ended; /* the streaming connection was finished or lost */
    atomic_int client_left;  /* writing the stream failed: its reader went away */
    atomic_int resumes;      /* ResumeRuntime received on the listen socket */
    atomic_int collects;
    char providers[512]; /* the last CollectTracing's providers, comma separated */
    int reject;          /* answer CollectTracing with an error */
    uint8_t cookie[16];
    /* How the stream lags (fake_flush_due()): */
    uint64_t lag_ns;          /* flush once the oldest event held is this old (0: every 40) */
    uint64_t stall_after_ns;  /* this long after the stream's start, stop flushing... */
    atomic_ullong stall_ns;   /* ...from this time (0: not yet), until */
    atomic_int stall_release; /* this is set, or 20 s have passed: */
    atomic_int stall_timed_out;
    atomic_int written; /* its Work events written (sent at a flush or at the stream's end) */
    atomic_int flushes; /* its flushes while the session ran */
};
static struct fake fk;

static int
read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;

    while (got < len) {
        ssize_t k = read(fd, (uint8_t *)buf + got, len - got);

        if (k <= 0) {
            return -1;
        }
        got += (size_t)k;
    }
    return 0;
}

/* Reads one request; returns its header and a malloc'd payload, or -1. */
static int
fake_read_request(int fd, struct ipc_header *h, uint8_t **payload)
{
    uint8_t hdr[IPC_HEADER_SIZE];

    *payload = NULL;
    if (read_full(fd, hdr, sizeof(hdr)) < 0 || ipc_header_decode(hdr, sizeof(hdr), h) < 0) {
        return -1;
    }
    *payload = malloc(h->size - IPC_HEADER_SIZE + 1);
    if (*payload == NULL || read_full(fd, *payload, h->size - IPC_HEADER_SIZE) < 0) {
        free(*payload);
        *payload = NULL;
        return -1;
    }
    return 0;
}

static int
fake_sink_write(void *ctx, const void *buf, size_t len)
{
    int fd = *(int *)ctx;

    if (send(fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len) {
        fk.client_left = 1;
        return -EPIPE;
    }
    return 0;
}

/* Whether the fake runtime sends what it wrote since its last flush (at oldest) now. */
static int
fake_flush_due(int i, uint64_t now, uint64_t start, uint64_t oldest)
{
    if (fk.stall_after_ns != 0 && fk.stall_ns == 0 && now - start >= fk.stall_after_ns) {
        fk.stall_ns = now; /* the event just written and all after it are held */
    }
    if (fk.stall_ns != 0 && !fk.stall_release && !fk.stall_timed_out) {
        fk.stall_timed_out = now - fk.stall_ns >= 20000000000ull;
        return fk.stall_timed_out;
    }
    if (fk.lag_ns != 0) {
        return now - oldest >= fk.lag_ns;
    }
    /* like the runtime, it flushes its buffers about every 200 ms: its events reach the server
     * well after the source's events of the same time */
    return i % 40 == 39;
}

/* The runtime's side of a session: its events every 5 ms until StopTracing, then a rundown
 * event, its ProcessInfo, the end tag. */
static void
fake_stream(int fd)
{
    static const struct nt_event_desc rt_desc = {
        "Fake-Runtime", 9, "Work", 0, 0, 4, 0, NULL, 0, 0
    };
    struct nt_sink sink = { fake_sink_write, &fd };
    struct nt_writer *w = NULL;
    struct nt_payload p;
    struct nt_event ev;
    uint8_t buf[512];
    uint32_t work, pinfo;
    uint64_t start = nt_clock_now(), oldest = 0;
    int i = 0;

    if (nt_writer_new(NULL, &sink, &w) < 0 || nt_writer_define(w, &rt_desc, &work) < 0 ||
        nt_writer_define(w, nt_known_event_desc(NT_KNOWN_PROCESS_INFO), &pinfo) < 0) {
        goto out;
    }
    memset(&ev, 0, sizeof(ev));
    ev.thread_id = 22;
    ev.capture_thread_id = 22;
    ev.processor = 0xFFFFFFFFu;
    while (!fk.stop_tracing && !fk.stop && !fk.client_left) {
        uint64_t stack[2] = { 0x1000 + (uint64_t)i, 0x2000 };

        ev.metadata_id = work;
        ev.timestamp = nt_clock_now();
        ev.payload = (const uint8_t *)&ev.timestamp; /* its own time, to check it arrives */
        ev.payload_size = 8;
        ev.stack = stack;
        ev.stack_depth = 2;
        oldest = oldest != 0 ? oldest : ev.timestamp;
        if (nt_writer_write(w, &ev) < 0) {
            goto out;
        }
        fk.written++;
        if (fake_flush_due(i, nt_clock_now(), start, oldest)) {
            if (nt_writer_flush(w) < 0) {
                goto out;
            }
            fk.flushes++;
            oldest = 0;
        }
        i++;
        usleep(5000);
    }
    nt_payload_init(&p, buf, sizeof(buf));
    nt_payload_process_info(&p, "fake-runtime --app", "Linux", "x64");
    ev.metadata_id = pinfo;
    ev.timestamp = nt_clock_now();
    ev.payload = buf;
    ev.payload_size = (uint32_t)p.len;
    ev.stack = NULL;
    ev.stack_depth = 0;
    if (nt_writer_write(w, &ev) == 0 && nt_writer_finish(w) < 0) {
        fk.client_left = 1;
    }
out:
    nt_writer_free(w);
    fk.stream_ended = 1;
}

static void
fake_providers(const uint8_t *payload, size_t len, uint8_t id)
{
    struct ipc_collect c;
    size_t o = 0;
    uint32_t i;

    fk.providers[0] = '\0';
    if (ipc_collect_decode(id, payload, len, &c) == 0) {
        for (i = 0; i < c.provider_count; i++) {
            o += (size_t)snprintf(fk.providers + o, sizeof(fk.providers) - o, "%s%s", i ? "," : "",
                                  c.providers[i].name);
        }
        fk.reject = c.provider_count > 0 && strcmp(c.providers[0].name, "Reject") == 0;
    }
    ipc_collect_fini(&c);
}

/* Answers one command on fd (a CollectTracing streams on it until StopTracing), closes it. */
static void
fake_serve(int fd)
{
    struct ipc_process_info pi;
    struct ipc_header h;
    uint8_t *payload, msg[1024];
    int n;

    if (fake_read_request(fd, &h, &payload) < 0) {
        close(fd);
        return;
    }
    if (h.command_set == IPC_SET_PROCESS && h.command_id == IPC_PROC_INFO) {
        memset(&pi, 0, sizeof(pi));
        pi.pid = (uint64_t)getpid();
        memcpy(pi.cookie, fk.cookie, 16);
        pi.command_line = "fake-runtime --app";
        pi.os = "Linux";
        pi.arch = "x64";
        n = ipc_process_info_encode(&pi, 1, msg, sizeof(msg));
        if (n > 0) {
            (void)send(fd, msg, (size_t)n, MSG_NOSIGNAL);
        }
    } else if (h.command_set == IPC_SET_PROCESS && h.command_id == IPC_PROC_RESUME_RUNTIME) {
        fk.resumes++;
        (void)send(fd, msg, ipc_ok_i32_encode(msg, 0), MSG_NOSIGNAL);
    } else if (h.command_set == IPC_SET_EVENTPIPE && h.command_id == IPC_EP_COLLECT_TRACING2) {
        fk.collects++;
        fake_providers(payload, h.size - IPC_HEADER_SIZE, h.command_id);
        if (fk.reject) {
            (void)send(fd, msg, ipc_error_encode(msg, IPC_HR_BAD_ENCODING), MSG_NOSIGNAL);
        } else if (strcmp(fk.providers, "Garbage") == 0) {
            static const char junk[] = "Nettrace\x14\0\0\0!FastSerialization.1 and then nonsense";

            (void)send(fd, msg, ipc_ok_u64_encode(msg, FAKE_SESSION_ID), MSG_NOSIGNAL);
            (void)send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
            while (!fk.stop_tracing && !fk.stop) { /* keeps the connection, as a hung runtime */
                usleep(5000);
            }
            fk.stream_ended = 1;
        } else {
            (void)send(fd, msg, ipc_ok_u64_encode(msg, FAKE_SESSION_ID), MSG_NOSIGNAL);
            fake_stream(fd);
        }
    } else if (h.command_set == IPC_SET_EVENTPIPE && h.command_id == IPC_EP_STOP_TRACING) {
        uint64_t id = 0;

        if (ipc_stop_decode(payload, h.size - IPC_HEADER_SIZE, &id) == 0 && id == FAKE_SESSION_ID) {
            fk.stop_tracing = 1;
        }
        (void)send(fd, msg, ipc_ok_u64_encode(msg, id), MSG_NOSIGNAL);
    } else {
        (void)send(fd, msg, ipc_error_encode(msg, FAKE_DUMP_ERROR), MSG_NOSIGNAL);
    }
    free(payload);
    close(fd);
}

static void *
fake_conn_main(void *arg)
{
    fake_serve((int)(intptr_t)arg);
    return NULL;
}

static void *
fake_main(void *arg)
{
    (void)arg;
    while (!fk.stop && !fk.stop_accept) {
        struct pollfd p = { fk.listen_fd, POLLIN, 0 };
        pthread_t t;
        int fd;

        if (poll(&p, 1, 50) <= 0) {
            continue;
        }
        fd = accept(fk.listen_fd, NULL, NULL);
        if (fd < 0) {
            continue;
        }
        /* a thread per connection: a stream and its StopTracing are served at once */
        if (pthread_create(&t, NULL, fake_conn_main, (void *)(intptr_t)fd) == 0) {
            pthread_detach(t);
        } else {
            close(fd);
        }
    }
    return NULL;
}

/* Listens at fk.path as the fake runtime (its thread serves the connections). */
static void
fake_listen(void)
{
    struct sockaddr_un a;

    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    strcpy(a.sun_path, fk.path);
    fk.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_TRUE(fk.listen_fd >= 0);
    ASSERT_OK(bind(fk.listen_fd, (struct sockaddr *)&a, sizeof(a)));
    ASSERT_OK(listen(fk.listen_fd, 16));
    memset(fk.cookie, 0xAB, sizeof(fk.cookie));
    ASSERT_OK(pthread_create(&fk.thread, NULL, fake_main, NULL));
}

/* Binds where the runtime's bind of its default name is redirected, as libcoreclr would. */
static void
fake_start(void)
{
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_BIND, public_path, fk.path, sizeof(fk.path)), 1);
    ASSERT_TRUE(strcmp(fk.path, public_path) != 0);
    fake_listen();
}

static void
fake_stop(void)
{
    fk.stop = 1;
    pthread_join(fk.thread, NULL);
    close(fk.listen_fd);
    unlink(fk.path);
}

/* ----- helpers ---------------------------------------------------------------------------- */

static atomic_int late_reported;     /* the server logged a session's late events */
static atomic_llong late_count = -1; /* how many it said */
static atomic_llong late_silences;   /* and how often it stopped waiting for a silent runtime */

static void
quiet_log(void *ctx, const char *line)
{
    long long n = -1;

    (void)ctx;
    if (strstr(line, "events written late") != NULL) {
        late_reported = 1;
        late_count = sscanf(line, "session %*x: %lld events", &n) == 1 ? n : -2;
        {
            const char *u = strstr(line, "went unwaited for ");
            long long k = 0;

            late_silences = u != NULL && sscanf(u, "went unwaited for %lld", &k) == 1 ? k : 0;
        }
        printf("# %s\n", line);
    }
}

static int dir_ready = 0;         /* the next server_start_opts() uses dir as it is */
static int dotnet_host = 1;       /* what the next server_start_opts() tells the server */
static uint64_t key_override = 0; /* likewise */

static void
server_start_opts(const char *ports, uint32_t wait_ms)
{
    struct ipc_server_options o;

    if (!dir_ready) {
        snprintf(dir, sizeof(dir), "/tmp/pp-up-XXXXXX");
        ASSERT_TRUE(mkdtemp(dir) != NULL);
    }
    dir_ready = 0;
    setenv("TMPDIR", dir, 1);
    ASSERT_OK(ipc_default_socket_path(public_path, sizeof(public_path), 0));
    memset(&o, 0, sizeof(o));
    o.source = &source;
    o.dotnet_host = dotnet_host;
    o.key_override = key_override;
    o.runtime_wait_ms = wait_ms;
    o.diagnostic_ports = ports;
    o.log = quiet_log;
    ASSERT_OK(ipc_server_start(&o, &srv));
    ASSERT_TRUE(key_override != 0 || strcmp(ipc_server_listen_path(srv), public_path) == 0);
}

static void
server_stop(void)
{
    ipc_server_stop(srv);
    srv = NULL;
    rmdir(dir);
}

static struct ipc_response
roundtrip_fd(int fd, const void *req, size_t len, int *n_out)
{
    struct ipc_response r;
    int n;

    ASSERT_OK(ipc_client_send(fd, req, len));
    n = ipc_client_read_response(fd, resp, sizeof(resp), 60000); /* a hang guard */
    if (n < 20) {
        test_fail(__FILE__, __LINE__, "no response: %d", n);
    }
    ASSERT_OK(ipc_response_decode(resp, (size_t)n, &r));
    if (n_out != NULL) {
        *n_out = n;
    }
    return r;
}

static struct ipc_response
roundtrip(const void *req, size_t len)
{
    int fd;
    struct ipc_response r;

    ASSERT_OK(ipc_client_connect(public_path, &fd));
    r = roundtrip_fd(fd, req, len, NULL);
    close(fd);
    return r;
}

static struct ipc_response
simple(uint8_t set, uint8_t id)
{
    uint8_t h[20];

    ipc_header_encode(h, 20, set, id);
    return roundtrip(h, 20);
}

/* CollectTracing2 with the SampleProfiler and first_provider; returns the stream's fd. */
static int
collect(const char *first_provider, struct ipc_response *r)
{
    struct ipc_provider p[2] = { { 0, 5, (char *)first_provider, NULL, 0, NULL, 0 },
                                 { 0, 4, (char *)NT_PROVIDER_SAMPLE_PROFILER, NULL, 0, NULL, 0 } };
    struct ipc_collect c;
    uint8_t m[512];
    int fd, n;

    memset(&c, 0, sizeof(c));
    c.command_id = IPC_EP_COLLECT_TRACING2;
    c.buffer_mb = 16;
    c.format = 1;
    c.request_rundown = 1;
    c.rundown_keyword = IPC_DEFAULT_RUNDOWN_KEYWORD;
    c.providers = p;
    c.provider_count = 2;
    n = ipc_collect_encode(&c, m, sizeof(m));
    ASSERT_TRUE(n > 0);
    ASSERT_OK(ipc_client_connect(public_path, &fd));
    *r = roundtrip_fd(fd, m, (size_t)n, NULL);
    return fd;
}

struct stream_counts {
    int ticks, work, process_info, fake_process_info, stacks_ok, out_of_order, times_kept;
    int late; /* events later than the merge's reorder window: out of order by design */
    int late_within_window; /* of those, how many lie less than a window behind the last one */
    int before_sync; /* events stamped before the trace's sync time (TraceEvent misplaces them) */
};

static void
count_stream(const uint8_t *bytes, size_t len, struct stream_counts *c)
{
    char path[128];
    struct nt_source src;
    struct nt_reader *r = NULL;
    struct nt_event ev;
    uint64_t last = 0;
    double window;
    int fd, rc;

    memset(c, 0, sizeof(*c));
    snprintf(path, sizeof(path), "/tmp/pp-up-stream-XXXXXX"); /* the server's dir may be gone */
    fd = mkstemp(path);
    ASSERT_TRUE(fd >= 0);
    ASSERT_EQ(write(fd, bytes, len), (ssize_t)len);
    lseek(fd, 0, SEEK_SET);
    nt_source_fd(&src, &fd);
    ASSERT_OK(nt_reader_new(&src, NULL, &r));
    window = (double)IPC_MERGE_REORDER_NS * (double)nt_reader_info(r)->ticks_per_second / 1e9;
    while ((rc = nt_reader_next(r, &ev)) == 1) {
        if (ev.desc == NULL) {
            continue;
        }
        c->before_sync += ev.timestamp < nt_reader_info(r)->sync_time_ticks;
        /* The merge sorts what arrives within its window; an event held up longer (a thread
         * of either side not scheduled for half a second on a loaded machine) is written late,
         * by design, and is no disorder of the merge's. Such an event is written unsorted (the
         * IsSorted flag clear, so TraceEvent places it). Its distance to the last event written
         * does not tell it apart: what was written had been released because the newest
         * arrival was a window past it, so a late event may lie just behind it (a fresh-clone
         * CI run at load 15-20 counted 8 such events as disorder). */
        if (ev.timestamp < last && ev.is_sorted) {
            c->out_of_order++;
        } else if (ev.timestamp < last) {
            c->late++;
            c->late_within_window += (double)(last - ev.timestamp) < window;
        }
        last = ev.timestamp > last ? ev.timestamp : last;
        if (strcmp(ev.desc->provider, "Test-Source") == 0) {
            c->ticks++;
        } else if (strcmp(ev.desc->provider, "Fake-Runtime") == 0) {
            uint64_t t;

            c->work++;
            c->stacks_ok += ev.stack_depth == 2 && ev.stack[1] == 0x2000;
            memcpy(&t, ev.payload, sizeof(t));
            c->times_kept += ev.payload_size == 8 && t == ev.timestamp;
        } else if (strcmp(ev.desc->provider, NT_PROVIDER_EVENTPIPE) == 0 &&
                   ev.desc->event_id == 1) {
            char cmd[64];

            c->process_info++;
            nt_utf16_to_utf8(ev.payload, ev.payload_size, cmd, sizeof(cmd));
            c->fake_process_info += strcmp(cmd, "fake-runtime --app") == 0;
        }
    }
    ASSERT_EQ(rc, 0); /* complete, end tag included */
    nt_reader_free(r);
    close(fd);
    unlink(path);
}

/* Waits until the counter *v reaches want, ms at most; a failure names the counter. */
static void
wait_for_at(atomic_int *v, int want, int ms, const char *name, int line)
{
    uint64_t end = test_ms_now() + (uint64_t)ms;

    while (*v < want && test_ms_now() < end) {
        usleep(5000);
    }
    if (*v < want) {
        test_fail(__FILE__, line, "%s is %d, not %d, after %d ms", name, (int)*v, want, ms);
    }
}
#define wait_for(v, want, ms) wait_for_at((v), (want), (ms), #v, __LINE__)

/* StopTracing of session id on a connection of its own; the answer must be OK(id). */
static void
stop_session(uint64_t id)
{
    struct ipc_response r;
    uint8_t stop[28];
    int s;

    ASSERT_OK(ipc_client_connect(public_path, &s));
    r = roundtrip_fd(s, stop, ipc_stop_encode(stop, id), NULL);
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    ASSERT_U64_EQ(r.value, id);
    close(s);
}

/* Reads the stream on fd a to its end (a complete one), closes it and counts its events. */
static void
read_counts(int a, struct stream_counts *c)
{
    size_t len;
    uint8_t *bytes = test_read_to_eof(a, &len, 60000); /* a hang guard */

    close(a);
    count_stream(bytes, len, c);
    free(bytes);
}

/* ----- cases ------------------------------------------------------------------------------ */

TEST(redirects_only_the_runtime_default_name_and_ports)
{
    char out[256], other[300];

    server_start_opts("/tmp/pp-up-port-a.sock,connect,nosuspend", 0);
    /* the default name and its unlink go to one private path outside ps's pattern */
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_BIND, public_path, out, sizeof(out)), 1);
    ASSERT_TRUE(strstr(out, "dotnet-diagnostic-") == NULL);
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_UNLINK, public_path, out, sizeof(out)), 1);
    /* another key of this pid (the runtime computes its own) is the runtime's name too */
    snprintf(other, sizeof(other), "%s/dotnet-diagnostic-%d-1-socket", dir, (int)getpid());
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_BIND, other, out, sizeof(out)), 1);
    /* another pid's, another directory's, or another shape of name is left alone */
    snprintf(other, sizeof(other), "%s/dotnet-diagnostic-%d-1-socket", dir, (int)getpid() + 1);
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_BIND, other, out, sizeof(out)), 0);
    snprintf(other, sizeof(other), "/var/dotnet-diagnostic-%d-1-socket", (int)getpid());
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_BIND, other, out, sizeof(out)), 0);
    snprintf(other, sizeof(other), "%s/dotnet-diagnostic-%d-x-socket", dir, (int)getpid());
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_BIND, other, out, sizeof(out)), 0);
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_CONNECT, public_path, out, sizeof(out)), 0);
    /* a connect port's address goes to a private listener */
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_CONNECT, "/tmp/pp-up-port-a.sock", out, sizeof(out)),
              1);
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_CONNECT, "/tmp/pp-up-port-b.sock", out, sizeof(out)),
              0);
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_BIND, public_path, out, 8), 0); /* too small */
    server_stop();
    /* a stopped server redirects nothing */
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_BIND, public_path, out, sizeof(out)), 0);
}

TEST(commands_are_answered_by_the_runtime)
{
    struct ipc_process_info pi;
    struct ipc_response r;

    server_start_opts(NULL, 0);
    fake_start();
    r = simple(IPC_SET_PROCESS, IPC_PROC_INFO);
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    ASSERT_OK(ipc_process_info_decode(r.payload, r.payload_len, 1, &pi));
    ASSERT_TRUE(strcmp(pi.command_line, "fake-runtime --app") == 0);
    ASSERT_EQ(pi.cookie[0], 0xAB);
    ipc_process_info_fini(&pi);
    /* what the server would refuse itself is the runtime's to answer */
    r = simple(IPC_SET_DUMP, 0x01);
    ASSERT_EQ(r.status, IPC_RESPONSE_ERROR);
    ASSERT_U64_EQ(r.hresult, FAKE_DUMP_ERROR);
    r = simple(IPC_SET_PROCESS, IPC_PROC_RESUME_RUNTIME);
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    ASSERT_EQ(fk.resumes, 1);
    fake_stop();
    server_stop();
}

TEST(collect_merges_the_runtime_session_and_stop_ends_it_first)
{
    struct stream_counts c;
    struct ipc_response r;
    uint64_t id;
    int a;

    server_start_opts(NULL, 0);
    fake_start();
    a = collect("Fake-Runtime", &r);
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    id = r.value;
    ASSERT_TRUE(id != 0 && id != FAKE_SESSION_ID); /* the client's id is the server's */
    ASSERT_EQ(fk.collects, 1);
    /* the runtime is not asked for the samples the agent takes itself */
    ASSERT_TRUE(strcmp(fk.providers, "Fake-Runtime") == 0);
    wait_for(&drains, 20, 90000);
    wait_for(&fk.written, 6, 90000); /* (c.work > 5: all reach the client by the stream's end) */
    wait_for(&fk.flushes, 1, 90000); /* some of them while the session ran */
    stop_session(id);
    ASSERT_EQ(fk.stop_tracing, 1); /* the runtime was stopped before the answer */
    ASSERT_EQ(fk.stream_ended, 1);
    read_counts(a, &c); /* a complete stream */
    ASSERT_TRUE(c.ticks > 5);
    ASSERT_TRUE(c.work > 5);
    ASSERT_EQ(c.stacks_ok, c.work);
    ASSERT_EQ(c.times_kept, c.work); /* the runtime's times, not the time they arrived */
    /* one ProcessInfo, the runtime's; the events in time order */
    ASSERT_EQ(c.process_info, 1);
    ASSERT_EQ(c.fake_process_info, 1);
    ASSERT_EQ(c.out_of_order, 0);
    printf("# %d runtime events, %d ticks, %d late, %d of them less than a "
           "window behind the last event written\n",
           c.work, c.ticks, c.late, c.late_within_window);
    ASSERT_EQ(c.before_sync, 0); /* the runtime's first events precede the server's session */
    fake_stop();
    server_stop();
}

/*
 * The runtime's stream lags by more than the merge's reorder window (it sends its events only
 * once the oldest is 800 ms old; a loaded machine's runtime or reader thread can lag so): the
 * merge waits for it, by what it promised (its sorted events) instead of releasing the
 * source's events a window behind the newest arrival, so none of its events is written late.
 * The old rule wrote nearly all of them late.
 */
TEST(a_runtime_lagging_past_the_window_has_no_event_written_late)
{
    struct stream_counts c;
    struct ipc_response r;
    int a;

    fk.lag_ns = 800ull * 1000000;
    server_start_opts(NULL, 0);
    fake_start();
    a = collect("Fake-Runtime", &r);
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    wait_for(&drains, 20, 90000);
    /* the runtime lagged past the window more than once (a flush 800 ms after its oldest), and
     * wrote enough */
    wait_for(&fk.flushes, 3, 90000);
    wait_for(&fk.written, 51, 90000);
    stop_session(r.value);
    read_counts(a, &c);
    printf("# %d runtime events, %d ticks, %d late\n", c.work, c.ticks, c.late);
    ASSERT_TRUE(c.work > 50); /* 179 to 690 seen at loads 8 to 36 */
    ASSERT_TRUE(c.ticks > 10);
    ASSERT_EQ(c.times_kept, c.work);
    ASSERT_EQ(c.out_of_order, 0);
    if (c.late != 0 && atomic_load(&late_silences) > 0) {
        /* The fake sends every 800 ms; the merge heard nothing from it for 2 s (the
         * runtime's bound, IPC_MERGE_SILENT_NS), so it stopped waiting, as it must for a runtime
         * that stops, and what came after was late: the machine starved the fake or the loop
         * (a TSan run at load 25: 53 late, 2 silences). The rule under test did not apply. */
        printf("# NOTE (loud): not judged: the merge stopped waiting for the runtime %lld times "
               "(silent for 2 s on this loaded machine), and its late events are the ones it "
               "reports\n",
               (long long)atomic_load(&late_silences));
        ASSERT_EQ(late_reported, 1);
    } else {
        ASSERT_EQ(c.late, 0);
        ASSERT_EQ(late_reported, 0);
    }
    fake_stop();
    server_stop();
}

struct tee {
    int fd;
    uint8_t *bytes;
    size_t len, cap;
};

/* Reads the client's stream as it comes and keeps a copy of every byte. */
static ssize_t
tee_read(void *ctx, void *buf, size_t len)
{
    struct tee *t = ctx;
    ssize_t k = read(t->fd, buf, len);

    if (k > 0) {
        if (t->len + (size_t)k > t->cap) {
            t->cap = (t->len + (size_t)k) * 2;
            t->bytes = realloc(t->bytes, t->cap);
            ASSERT_TRUE(t->bytes != NULL);
        }
        memcpy(t->bytes + t->len, buf, (size_t)k);
        t->len += (size_t)k;
    }
    return k < 0 ? -errno : k;
}

/*
 * A runtime that sends nothing for longer than the merge waits (IPC_MERGE_SILENT_NS) holds
 * neither the stream nor memory: the source's events of that time reach the client while it
 * is silent (the fake holds its events until then, or 20 s). Its events of that time come
 * after newer ones were written: late, by design, written unsorted, counted and reported.
 */
TEST(a_silent_runtime_is_not_waited_for_and_its_late_events_are_counted)
{
    struct stream_counts c;
    struct ipc_response r;
    struct nt_source src;
    struct nt_reader *rd = NULL;
    struct nt_event ev;
    struct tee t = { -1, NULL, 0, 0 };
    uint8_t *rest;
    size_t rest_len;
    int released_by_client = 0;

    fk.stall_after_ns = 300ull * 1000000;
    server_start_opts(NULL, 0);
    fake_start();
    t.fd = collect("Fake-Runtime", &r);
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    src.read = tee_read;
    src.ctx = &t;
    ASSERT_OK(nt_reader_new(&src, NULL, &rd));
    while (nt_reader_next(rd, &ev) == 1 && !fk.stall_release) {
        uint64_t stalled = fk.stall_ns;

        /* a tick 100 ms into the runtime's silence: the stream was not held for it */
        if (stalled != 0 && ev.desc != NULL && strcmp(ev.desc->provider, "Test-Source") == 0 &&
            ev.timestamp > stalled + 100000000u) {
            released_by_client = 1;
            fk.stall_release = 1;
        }
    }
    nt_reader_free(rd);
    ASSERT_EQ(fk.stall_timed_out, 0); /* the tick came while the runtime was silent */
    ASSERT_EQ(released_by_client, 1);
    /* the events held while it was silent sent, before the session's end (none during the
     * stall: fake_flush_due) */
    wait_for(&fk.flushes, fk.flushes + 1, 90000);
    stop_session(r.value);
    rest = test_read_to_eof(t.fd, &rest_len, 60000);
    close(t.fd);
    t.bytes = realloc(t.bytes, t.len + rest_len + 1);
    ASSERT_TRUE(t.bytes != NULL);
    memcpy(t.bytes + t.len, rest, rest_len);
    count_stream(t.bytes, t.len + rest_len, &c);
    printf("# %d runtime events, %d ticks, %d late\n", c.work, c.ticks, c.late);
    ASSERT_EQ(c.times_kept, c.work);
    ASSERT_EQ(c.out_of_order, 0);
    ASSERT_TRUE(c.late > 0);
    ASSERT_EQ(late_reported, 1);
    /* every late event counted: the report comes once the writer has written them all, not at
     * the runtime's end, when those it held still went uncounted (a loaded machine's reader
     * heard again after the silence makes the merge wait from the runtime's old promise, which
     * holds them: 244 reported of 283 late, or none and no report) */
    ASSERT_EQ(late_count, c.late);
    free(rest);
    free(t.bytes);
    fake_stop();
    server_stop();
}

/* The host exits while a merged session runs: the runtime's end of stream (its rundown, written
 * as it shuts down) still reaches the client before the end tag. */
TEST(exit_waits_for_the_runtime_stream_to_end)
{
    struct stream_counts c;
    struct ipc_response r;
    int a;

    server_start_opts(NULL, 0);
    fake_start();
    a = collect("Fake-Runtime", &r);
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    wait_for(&drains, 10, 90000);
    server_stop();
    ASSERT_EQ(fk.stop_tracing, 1);
    read_counts(a, &c); /* a complete stream */
    ASSERT_TRUE(c.work > 0);
    ASSERT_EQ(c.fake_process_info, 1); /* the runtime's last event made it */
    ASSERT_EQ(c.process_info, 1);
    fake_stop();
}

/* The runtime ends its stream once the server's stop has begun (its listening socket's file is
 * removed just before the sessions are ended), not 200 ms after the thread's start, which a
 * loaded machine's stop may not have reached: the stream's end must come while the stop waits. */
static void *
runtime_shuts_down(void *arg)
{
    uint64_t end = test_ms_now() + 90000;

    (void)arg;
    while (access(public_path, F_OK) == 0 && test_ms_now() < end) {
        usleep(5000);
    }
    fk.stop_tracing = 1; /* its shutdown ends the session: rundown, ProcessInfo, end tag */
    return NULL;
}

/* As a real runtime at exit: its server is gone before the agent stops (StopTracing cannot
 * reach it), and it ends its session's stream on its own a little later. */
TEST(exit_waits_for_a_runtime_whose_server_is_gone)
{
    struct stream_counts c;
    struct ipc_response r;
    pthread_t t;
    int a;

    server_start_opts(NULL, 0);
    fake_start();
    a = collect("Fake-Runtime", &r);
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    wait_for(&drains, 10, 90000);
    fk.stop_accept = 1; /* the listener goes, the stream stays */
    pthread_join(fk.thread, NULL);
    close(fk.listen_fd);
    unlink(fk.path);
    ASSERT_EQ(fk.stream_ended, 0);
    ASSERT_OK(pthread_create(&t, NULL, runtime_shuts_down, NULL));
    server_stop();
    pthread_join(t, NULL);
    read_counts(a, &c); /* a complete stream */
    ASSERT_TRUE(c.work > 0);
    ASSERT_EQ(c.fake_process_info, 1);
}

/* A runtime stream that is not nettrace: the session goes on with the source's events, and its
 * stop still ends with a complete stream (the reader's failure is logged, not fatal). */
TEST(a_malformed_runtime_stream_leaves_the_session_whole)
{
    struct stream_counts c;
    struct ipc_response r;
    int a;

    server_start_opts(NULL, 0);
    fake_start();
    a = collect("Garbage", &r);
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    wait_for(&drains, 20, 90000);
    stop_session(r.value);
    read_counts(a, &c); /* a complete stream */
    ASSERT_TRUE(c.ticks > 5);
    ASSERT_EQ(c.work, 0);
    ASSERT_EQ(c.process_info, 1); /* the server's own, the runtime's never came */
    fake_stop();
    server_stop();
}

TEST(runtime_refusal_reaches_the_client_as_it_was)
{
    struct ipc_response r;
    int a;

    server_start_opts(NULL, 0);
    fake_start();
    a = collect("Reject", &r);
    ASSERT_EQ(r.status, IPC_RESPONSE_ERROR);
    ASSERT_U64_EQ(r.hresult, IPC_HR_BAD_ENCODING);
    close(a);
    fake_stop();
    server_stop();
}

TEST(client_leaving_ends_the_runtime_session)
{
    struct ipc_response r;
    int a;

    server_start_opts(NULL, 0);
    fake_start();
    a = collect("Fake-Runtime", &r);
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    wait_for(&drains, 5, 90000);
    close(a);
    wait_for(&fk.stream_ended, 1, 90000);
    ASSERT_EQ(fk.client_left, 1);
    ASSERT_EQ(fk.stop_tracing, 0);
    fake_stop();
    server_stop();
}

/* The wait is told by the server's counts, not by the client's clock (a loaded machine's server
 * thread may answer late without having waited): the ProcessInfo waited once and its wait ended
 * at the deadline; the collect after it did not wait at all. The only clock check is a lower
 * bound, which a slow machine can only exceed: the deadline runs from the server's start. */
TEST(no_runtime_means_native_answers_after_the_wait)
{
    struct ipc_server_stats st;
    struct ipc_process_info pi;
    struct ipc_response r;
    uint64_t t0 = test_ms_now(), waited, waits;
    struct stream_counts c;
    int a;

    server_start_opts(NULL, 300);
    r = simple(IPC_SET_PROCESS, IPC_PROC_INFO);
    waited = test_ms_now() - t0;
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    ASSERT_OK(ipc_process_info_decode(r.payload, r.payload_len, 1, &pi));
    ASSERT_TRUE(strstr(pi.command_line, "fake-runtime") == NULL);
    ipc_process_info_fini(&pi);
    ASSERT_TRUE(waited >= 250); /* not answered before the runtime's 300 ms */
    ipc_server_get_stats(srv, &st);
    /* it waited, and the deadline ended the wait (boundedly); a request that a loaded machine
     * (TSan) brought after the deadline has nothing to wait for, and says so */
    if (st.runtime_waits == 0) {
        printf("# NOTE (loud): the ProcessInfo came after the 300 ms: no wait to see\n");
    }
    ASSERT_TRUE(st.runtime_waits <= 1);
    ASSERT_U64_EQ(st.runtime_wait_timeouts, st.runtime_waits);
    /* once the wait is over, no more waiting; a session is the agent's alone */
    a = collect("Fake-Runtime", &r);
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    waits = st.runtime_waits;
    ipc_server_get_stats(srv, &st);
    ASSERT_U64_EQ(st.runtime_waits, waits);
    ASSERT_U64_EQ(st.runtime_wait_timeouts, waits);
    wait_for(&drains, 5, 90000);
    stop_session(r.value);
    read_counts(a, &c); /* a complete stream */
    ASSERT_TRUE(c.ticks > 0);
    ASSERT_EQ(c.work, 0);
    ASSERT_EQ(c.process_info, 1); /* the server's own */
    ASSERT_EQ(c.fake_process_info, 0);
    server_stop();
}

/* The runtime's private name lies in the shared TMPDIR: another process listening there (an
 * impostor, which SO_PEERCRED shows) is never forwarded to; the server answers natively. */
TEST(a_stranger_at_the_runtime_name_is_not_forwarded_to)
{
    struct ipc_process_info pi;
    struct ipc_response r;
    int status, path_pipe[2], ready_pipe[2];
    char ready = 0;
    pid_t child;

    /* forked before the server has threads (TSan cannot follow a multi-threaded fork); it
     * learns the name through a pipe and says through another that it listens */
    ASSERT_OK(pipe(path_pipe));
    ASSERT_OK(pipe(ready_pipe));
    child = fork();
    ASSERT_TRUE(child >= 0);
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a failed case */
        close(path_pipe[1]);
        close(ready_pipe[0]);
        if (read(path_pipe[0], fk.path, sizeof(fk.path)) == (ssize_t)sizeof(fk.path)) {
            fake_listen(); /* in another process: a stranger */
            if (write(ready_pipe[1], "L", 1) == 1) {
                sleep(600); /* until killed */
            }
        }
        _exit(0);
    }
    close(path_pipe[0]);
    close(ready_pipe[1]);
    server_start_opts(NULL, 300);
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_BIND, public_path, fk.path, sizeof(fk.path)), 1);
    ASSERT_EQ(write(path_pipe[1], fk.path, sizeof(fk.path)), (ssize_t)sizeof(fk.path));
    close(path_pipe[1]);
    /* it listens: a forward would reach it (queued, then served by its thread) */
    ASSERT_EQ(read(ready_pipe[0], &ready, 1), 1);
    ASSERT_EQ(ready, 'L');
    close(ready_pipe[0]);
    r = simple(IPC_SET_PROCESS, IPC_PROC_INFO);
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    ASSERT_OK(ipc_process_info_decode(r.payload, r.payload_len, 1, &pi));
    ASSERT_TRUE(strstr(pi.command_line, "fake-runtime") == NULL);
    ipc_process_info_fini(&pi);
    kill(child, SIGKILL);
    ASSERT_EQ(waitpid(child, &status, 0), child);
    server_stop();
}

/* A process not taken for a .NET host starts a runtime all the same: its bind still goes
 * aside (it keeps a server), and from then on its commands are forwarded to it. */
TEST(a_runtime_in_an_undetected_host_is_found_when_it_binds)
{
    struct ipc_process_info pi;
    struct ipc_response r;

    dotnet_host = 0;
    server_start_opts(NULL, 0);
    r = simple(IPC_SET_PROCESS, IPC_PROC_INFO); /* before: the server's own answer */
    ASSERT_OK(ipc_process_info_decode(r.payload, r.payload_len, 1, &pi));
    ASSERT_TRUE(strstr(pi.command_line, "fake-runtime") == NULL);
    ipc_process_info_fini(&pi);
    fake_start(); /* its bind is redirected (ipc_redirect_path) */
    r = simple(IPC_SET_PROCESS, IPC_PROC_INFO);
    ASSERT_OK(ipc_process_info_decode(r.payload, r.payload_len, 1, &pi));
    ASSERT_TRUE(strcmp(pi.command_line, "fake-runtime --app") == 0);
    ipc_process_info_fini(&pi);
    fake_stop();
    server_stop();
}

/* Stepping aside (PIPEPROF_DOTNET_MERGE=0: the server listens with key + 1): the runtime keeps
 * its default name, nothing is redirected, and commands are the server's own. */
TEST(stepping_aside_leaves_the_runtime_alone)
{
    char out[256];

    dotnet_host = 0;
    key_override = ipc_process_start_key(getpid()) + 1;
    server_start_opts(NULL, 0);
    ASSERT_TRUE(strcmp(ipc_server_listen_path(srv), public_path) != 0);
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_BIND, public_path, out, sizeof(out)), 0);
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_UNLINK, public_path, out, sizeof(out)), 0);
    server_stop();
}

/* The runtime connects to a DOTNET_DiagnosticPorts address: its connect is redirected to the
 * server, which then advertises on the real address with the runtime's cookie; ResumeRuntime
 * from the tool goes through the runtime's own port connection. */
TEST(connect_port_advertises_the_runtime_and_resumes_through_it)
{
    char tool[128], rt[256];
    uint8_t cookie[16], adv[IPC_ADVERTISE_SIZE], h[20];
    struct sockaddr_un a;
    struct ipc_response r;
    struct ipc_sockfile tool_file;
    uint64_t pid;
    int lfd, tfd, rfd;

    snprintf(tool, sizeof(tool), "/tmp/pp-up-tool-%d.sock", (int)getpid());
    ASSERT_OK(ipc_client_listen(tool, &lfd, &tool_file));
    {
        char ports[160];

        snprintf(ports, sizeof(ports), "%s,connect,suspend", tool);
        server_start_opts(ports, 0);
    }
    fake_start();
    /* nothing is advertised to the tool before the runtime is up */
    ASSERT_EQ(ipc_client_accept_advertise(lfd, 300, 0, &tfd, cookie, &pid), -ETIMEDOUT);
    /* the runtime connects "to the tool" and lands at the server's private listener */
    ASSERT_EQ(ipc_redirect_path(IPC_REDIRECT_CONNECT, tool, rt, sizeof(rt)), 1);
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    strcpy(a.sun_path, rt);
    rfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_OK(connect(rfd, (struct sockaddr *)&a, sizeof(a)));
    ipc_advertise_encode(adv, fk.cookie, (uint64_t)getpid());
    ASSERT_EQ(write(rfd, adv, sizeof(adv)), (ssize_t)sizeof(adv));
    /* now the server advertises the runtime's cookie */
    ASSERT_OK(ipc_client_accept_advertise(lfd, 3000, 0, &tfd, cookie, &pid));
    ASSERT_EQ(cookie[0], 0xAB);
    ASSERT_U64_EQ(pid, (uint64_t)getpid());
    /* ResumeRuntime on the advertised connection arrives on the runtime's port connection */
    ipc_header_encode(h, 20, IPC_SET_PROCESS, IPC_PROC_RESUME_RUNTIME);
    ASSERT_OK(ipc_client_send(tfd, h, sizeof(h)));
    {
        struct ipc_header got;
        uint8_t *payload, ok[24];

        ASSERT_OK(fake_read_request(rfd, &got, &payload));
        free(payload);
        ASSERT_EQ(got.command_id, IPC_PROC_RESUME_RUNTIME);
        ASSERT_EQ(write(rfd, ok, ipc_ok_i32_encode(ok, 0)), 24);
        close(rfd);
    }
    ASSERT_EQ(ipc_client_read_response(tfd, resp, sizeof(resp), 60000), 24);
    ASSERT_OK(ipc_response_decode(resp, 24, &r));
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    ASSERT_EQ(fk.resumes, 0); /* not through the runtime's listen socket */
    close(tfd);
    fake_stop();
    server_stop();
    close(lfd);
    unlink(tool);
}

/* A socket file at dir/name: bound, then listening (returns the fd) or closed (returns -1). */
static int
stale_socket(const char *name, int listening)
{
    struct sockaddr_un sa;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, name);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        (listening && listen(fd, 1) != 0)) {
        abort();
    }
    if (!listening) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* A killed .NET host leaves pipeprof-port-PID-N-socket and pipeprof-runtime-PID-KEY-socket
 * behind; the next host's start removes them: only ours, of a process gone, sockets nobody
 * listens on. */
TEST(a_killed_hosts_sockets_are_removed_at_the_next_start)
{
    char names[8][96];
    pid_t dead = fork();
    int listening, fd, i;

    if (dead == 0) {
        _exit(0);
    }
    ASSERT_TRUE(dead > 0 && waitpid(dead, NULL, 0) == dead);
    snprintf(dir, sizeof(dir), "/tmp/pp-up-XXXXXX");
    ASSERT_TRUE(mkdtemp(dir) != NULL);
    snprintf(names[0], sizeof(names[0]), "pipeprof-port-%d-0-socket", (int)dead);      /* goes */
    snprintf(names[1], sizeof(names[1]), "pipeprof-runtime-%d-77-socket", (int)dead);  /* goes */
    snprintf(names[2], sizeof(names[2]), "pipeprof-port-%d-1-socket", (int)dead);      /* listens */
    snprintf(names[3], sizeof(names[3]), "pipeprof-port-%d-0-socket", (int)getppid()); /* alive */
    snprintf(names[4], sizeof(names[4]), "pipeprof-port-%d-2-socket", (int)dead);      /* a file */
    snprintf(names[5], sizeof(names[5]), "dotnet-diagnostic-%d-9-socket", (int)dead); /* not ours */
    snprintf(names[6], sizeof(names[6]), "pipeprof-port-%d-socket", (int)dead); /* other shape */
    stale_socket(names[0], 0);
    stale_socket(names[1], 0);
    listening = stale_socket(names[2], 1);
    stale_socket(names[3], 0);
    {
        char path[300];

        snprintf(path, sizeof(path), "%s/%s", dir, names[4]);
        fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        close(fd);
    }
    stale_socket(names[5], 0);
    stale_socket(names[6], 0);
    dir_ready = 1;
    server_start_opts(NULL, 0);
    ASSERT_TRUE(!test_file_in(dir, names[0]));
    ASSERT_TRUE(!test_file_in(dir, names[1]));
    for (i = 2; i < 7; i++) {
        ASSERT_TRUE(test_file_in(dir, names[i]));
    }
    close(listening);
    for (i = 2; i < 7; i++) {
        char path[300];

        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    server_stop();
}

static const struct test_case cases[] = {
    TEST_CASE(redirects_only_the_runtime_default_name_and_ports),
    TEST_CASE(commands_are_answered_by_the_runtime),
    TEST_CASE(collect_merges_the_runtime_session_and_stop_ends_it_first),
    TEST_CASE(a_runtime_lagging_past_the_window_has_no_event_written_late),
    TEST_CASE(a_silent_runtime_is_not_waited_for_and_its_late_events_are_counted),
    TEST_CASE(exit_waits_for_the_runtime_stream_to_end),
    TEST_CASE(exit_waits_for_a_runtime_whose_server_is_gone),
    TEST_CASE(a_malformed_runtime_stream_leaves_the_session_whole),
    TEST_CASE(runtime_refusal_reaches_the_client_as_it_was),
    TEST_CASE(client_leaving_ends_the_runtime_session),
    TEST_CASE(no_runtime_means_native_answers_after_the_wait),
    TEST_CASE(a_stranger_at_the_runtime_name_is_not_forwarded_to),
    TEST_CASE(a_runtime_in_an_undetected_host_is_found_when_it_binds),
    TEST_CASE(stepping_aside_leaves_the_runtime_alone),
    TEST_CASE(connect_port_advertises_the_runtime_and_resumes_through_it),
    TEST_CASE(a_killed_hosts_sockets_are_removed_at_the_next_start),
};
TEST_MAIN(cases)
