/* SPDX-License-Identifier: MIT */
/*
 * ipc/upstream.c - the runtime behind the server in a .NET host (docs/dotnet-hosts.md).
 *
 * The runtime's own diagnostic server is moved out of the way: its bind of the public name is
 * redirected to a private path by host/sockets.c's bind (ipc_redirect_path(), redirect.c; the
 * paths are chosen here, in ipc_upstream_init()), so every client
 * finds this server, once per process. What only the runtime can answer (ProcessInfo, resume,
 * environment, dumps, profiler commands...) is forwarded to it and its answer relayed byte for
 * byte. A CollectTracing starts the same session in the runtime, without the SampleProfiler
 * (the agent's samples replace it, and hold the runtime's frames and more), and a reader thread
 * (merge.c) turns the runtime's stream into events that session.c writes into the client's
 * stream beside the agent's (ipc_merge_pump()).
 *
 * Connect ports (DOTNET_DiagnosticPorts): the runtime's connects to such an address are
 * redirected to a private listener here. Once the runtime has advertised on it, this server
 * advertises on the real address with the runtime's cookie; a ResumeRuntime that arrives there
 * goes to the runtime through that port's own connection, so the runtime's suspend works as
 * without pipeprof.
 *
 * Until the runtime's server answers (it starts tens of milliseconds after the process), commands
 * wait for it, up to runtime_wait_ms; a process whose runtime never comes is served natively.
 *
 * Context: the loop thread. The redirect table is read on any thread (redirect.c) and the
 * runtime's streams are read by threads of their own (merge.c): ipc/upstream-internal.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ipc/upstream-internal.h"

#define IPC_RUNTIME_WAIT_MS      10000
#define IPC_UP_RETRY_MS          20   /* the runtime's server is not up yet: try again */
#define IPC_UP_PORT_WAIT_MS      2000 /* a port's own runtime connection comes back soon */
#define IPC_UP_ADVERTISE_MS      5000 /* the runtime advertises right after it connects */
#define IPC_UP_ANSWER_MAX        (64u << 20)
#define IPC_RUNTIME_RUNDOWN_ONLY "Pipeprof-Runtime-Rundown"

int
ipc_upstream_active(struct ipc_server *s)
{
    if (s->dotnet) {
        return 1;
    }
    if (s->rt_path == NULL || !atomic_load(&ipc_redirects.runtime_bound)) {
        return 0;
    }
    /* A runtime started in a process not taken for a .NET host (a host of its own, an
     * executable the detection missed): its server was moved aside all the same, so it keeps
     * one, and what it answers is forwarded from now on. */
    s->dotnet = 1;
    ipc_log(s, "a .NET runtime started in this process: its commands are forwarded to it from "
               "now on (PIPEPROF_DOTNET_HOST=1 does it from the start)");
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Connections to the runtime                                                                 */
/* ------------------------------------------------------------------------------------------ */

enum ipc_up_kind {
    IPC_UP_RUNTIME_PORT, /* the runtime's own connection on a connect port: advertise, idle */
    IPC_UP_FORWARD,      /* a client's command: the runtime's whole answer is relayed */
    IPC_UP_COLLECT,      /* a client's CollectTracing: the runtime's answer, then its stream */
    IPC_UP_STOP,         /* StopTracing of the runtime's session behind a merged one */
};

enum ipc_up_state {
    IPC_UP_NEW,         /* not connected: waiting for the runtime, or about to connect */
    IPC_UP_ADVERTISING, /* runtime port: reading its ADVR_V1 */
    IPC_UP_IDLE,        /* runtime port: advertised, waiting to carry a command */
    IPC_UP_ASKING,      /* the request is sent; reading the answer */
    IPC_UP_CLOSING,
};

/* What a connection carries to the runtime; moved to another connection when one is taken. */
struct ipc_up_request {
    enum ipc_up_kind kind;
    struct ipc_conn *client;     /* FORWARD, COLLECT: who asked (NULL once it is gone) */
    struct ipc_session *session; /* STOP: the merged session */
    struct ipc_port *via;        /* the port the client came through, or NULL */
    int needs_port;              /* only via's own runtime connection will do (ResumeRuntime) */
    uint8_t *bytes;              /* the request as sent to the runtime */
    size_t len;
    struct ipc_collect coll; /* COLLECT: the client's request, for our session */
    uint64_t first_try_ms;
    int waited; /* it waited for the runtime (counted once: stats.runtime_waits) */
    /* COLLECT: both clocks when the request went to the runtime, which starts its session (and
     * stamps its first events) before this server's session exists: the merged stream's sync
     * time must precede all of them, or TraceEvent misplaces them. */
    uint64_t sent_ticks;
    int64_t sent_unix_ns;
};

struct ipc_upstream {
    uv_pipe_t pipe;
    uv_timer_t timer; /* retries; the runtime's advertise deadline */
    int handles;      /* open uv handles; freed at 0 */
    struct ipc_server *srv;
    enum ipc_up_state state;
    struct ipc_port *rt_port; /* RUNTIME_PORT: the port it came in on */
    struct ipc_up_request rq;
    uint8_t resp[64]; /* ADVR_V1, or a response (header + payload) */
    size_t got;
    uint8_t *answer; /* FORWARD: everything the runtime sent */
    size_t answer_len, answer_cap;
    struct ipc_upstream *prev, *next;
};

static void ipc_up_begin(struct ipc_upstream *up);

static void
ipc_up_handle_closed(uv_handle_t *h)
{
    struct ipc_upstream *up = h->data;

    if (--up->handles > 0) {
        return;
    }
    free(up->rq.bytes);
    ipc_collect_fini(&up->rq.coll);
    free(up->answer);
    free(up);
}

static void
ipc_up_close(struct ipc_upstream *up)
{
    struct ipc_server *s = up->srv;

    if (up->state == IPC_UP_CLOSING) {
        return;
    }
    up->state = IPC_UP_CLOSING;
    if (up->prev != NULL) {
        up->prev->next = up->next;
    } else {
        s->ups = up->next;
    }
    if (up->next != NULL) {
        up->next->prev = up->prev;
    }
    up->prev = up->next = NULL;
    if (up->rt_port != NULL && up->rt_port->rt_idle == up) {
        up->rt_port->rt_idle = NULL;
    }
    if (up->rq.client != NULL && up->rq.client->up == up) {
        up->rq.client->up = NULL;
    }
    uv_close((uv_handle_t *)&up->timer, ipc_up_handle_closed);
    uv_close((uv_handle_t *)&up->pipe, ipc_up_handle_closed);
}

static struct ipc_upstream *
ipc_up_new(struct ipc_server *s)
{
    struct ipc_upstream *up = calloc(1, sizeof(*up));

    if (up == NULL) {
        return NULL;
    }
    up->srv = s;
    if (uv_pipe_init(&s->loop, &up->pipe, 0) < 0) {
        free(up);
        return NULL;
    }
    up->pipe.data = up;
    up->handles = 1;
    if (uv_timer_init(&s->loop, &up->timer) < 0) {
        uv_close((uv_handle_t *)&up->pipe, ipc_up_handle_closed);
        return NULL;
    }
    up->timer.data = up;
    up->handles = 2;
    up->next = s->ups;
    if (s->ups != NULL) {
        s->ups->prev = up;
    }
    s->ups = up;
    return up;
}

/* Commands still wait for a runtime that has not answered yet, until the deadline. */
static int
ipc_up_may_wait(const struct ipc_server *s)
{
    return !s->rt_seen && ipc_client_ms() < s->rt_deadline_ms && !s->stopping;
}

/* No runtime to ask: the request is answered as a native process would answer it. */
static void
ipc_up_fallback(struct ipc_upstream *up)
{
    struct ipc_conn *c = up->rq.client;
    struct ipc_collect coll;

    up->rq.client = NULL;
    if (c != NULL) {
        c->up = NULL;
    }
    switch (up->rq.kind) {
    case IPC_UP_FORWARD:
        if (c != NULL) {
            ipc_conn_dispatch_native(c);
        }
        break;
    case IPC_UP_COLLECT:
        coll = up->rq.coll;
        memset(&up->rq.coll, 0, sizeof(up->rq.coll));
        if (c != NULL) {
            ipc_session_collect(c, &coll, NULL, 0);
        } else {
            ipc_collect_fini(&coll);
        }
        break;
    case IPC_UP_STOP:
        /* The runtime cannot be asked. At the process's exit its server is gone already, and
         * its stream ends by itself as it shuts down (the stop's grace bounds the wait). A live
         * process's runtime that does not answer: what was read is written, and leaving its
         * stream ends its session there. */
        if (up->rq.session != NULL && !up->srv->stopping) {
            ipc_session_merge_ended(up->rq.session);
        }
        break;
    case IPC_UP_RUNTIME_PORT:
        break;
    }
    ipc_up_close(up);
}

static void
ipc_up_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct ipc_upstream *up = h->data;
    size_t need;

    (void)suggested;
    if (up->state == IPC_UP_ADVERTISING) {
        *buf = uv_buf_init((char *)up->resp + up->got, (unsigned)(IPC_ADVERTISE_SIZE - up->got));
    } else if (up->state == IPC_UP_ASKING && up->rq.kind == IPC_UP_FORWARD) {
        if (up->answer_cap - up->answer_len < 16384 && up->answer_cap < IPC_UP_ANSWER_MAX) {
            size_t cap = up->answer_cap ? up->answer_cap * 2 : 65536;
            uint8_t *grown = realloc(up->answer, cap);

            if (grown != NULL) {
                up->answer = grown;
                up->answer_cap = cap;
            }
        }
        *buf = uv_buf_init((char *)up->answer + up->answer_len,
                           (unsigned)(up->answer_cap - up->answer_len));
    } else if (up->state == IPC_UP_ASKING) {
        /* exactly the response: its stream (COLLECT) must stay in the socket for the reader */
        if (up->got < IPC_HEADER_SIZE) {
            need = IPC_HEADER_SIZE - up->got;
        } else {
            uint16_t size = (uint16_t)(up->resp[14] | (up->resp[15] << 8));

            need = size > up->got && size <= sizeof(up->resp) ? size - up->got : 0;
        }
        *buf = uv_buf_init((char *)up->resp + up->got, (unsigned)need);
    } else {
        *buf = uv_buf_init((char *)up->resp, sizeof(up->resp)); /* idle: only EOF matters */
    }
}

/* FORWARD: the runtime closed the connection; its answer goes to the client as it came. */
static void
ipc_up_forward_done(struct ipc_upstream *up)
{
    struct ipc_conn *c = up->rq.client;

    up->rq.client = NULL;
    if (c != NULL) {
        c->up = NULL;
        if (up->answer_len > 0) {
            ipc_conn_respond(c, up->answer, up->answer_len);
        } else {
            ipc_conn_close(c); /* the runtime closed without an answer: so do we */
        }
    }
    ipc_up_close(up);
}

/* The runtime's session behind a merged one: its stream is read by a thread from here on. */
static void
ipc_up_collect_done(struct ipc_upstream *up, const struct ipc_response *r)
{
    struct ipc_server *s = up->srv;
    struct ipc_conn *c = up->rq.client;
    struct ipc_collect coll = up->rq.coll;
    struct ipc_merge *merge = NULL;
    uv_os_fd_t fd;
    int dup_fd = -1;

    memset(&up->rq.coll, 0, sizeof(up->rq.coll));
    up->rq.client = NULL;
    if (c != NULL) {
        c->up = NULL;
    }
    if (r->status != IPC_RESPONSE_OK || r->payload_len < 8 || c == NULL) {
        /* the runtime's refusal is the answer, byte for byte */
        if (c != NULL) {
            ipc_conn_respond(c, up->resp, up->got);
        }
        ipc_collect_fini(&coll);
        ipc_up_close(up);
        return;
    }
    if (uv_fileno((uv_handle_t *)&up->pipe, &fd) == 0) {
        dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    }
    if (dup_fd >= 0) {
        int fl = fcntl(dup_fd, F_GETFL);

        if (fl >= 0) {
            fcntl(dup_fd, F_SETFL, fl & ~O_NONBLOCK); /* the reader thread blocks on it */
        }
        if (ipc_merge_new(s, dup_fd, &merge) < 0) {
            merge = NULL; /* closed dup_fd */
        } else {
            ipc_merge_set_sync(merge, up->rq.sent_ticks, up->rq.sent_unix_ns);
        }
    }
    ipc_up_close(up); /* the runtime keeps streaming into the duplicate */
    if (merge == NULL) {
        ipc_log(s, "cannot read the runtime's stream: tracing without its events");
    }
    ipc_session_collect(c, &coll, merge, merge != NULL ? r->value : 0);
}

/* A runtime connection on a port advertised: the runtime is up; the port can advertise too. */
static void
ipc_up_advertised(struct ipc_upstream *up)
{
    struct ipc_server *s = up->srv;
    struct ipc_port *port = up->rt_port;
    uint8_t cookie[16];
    uint64_t pid;

    uv_timer_stop(&up->timer);
    if (ipc_advertise_decode(up->resp, IPC_ADVERTISE_SIZE, cookie, &pid) < 0 ||
        pid != (uint64_t)getpid()) {
        ipc_up_close(up);
        return;
    }
    if (!s->rt_seen) {
        /* ProcessInfo is the runtime's from now on: the ports advertise its cookie too */
        memcpy(s->cookie, cookie, 16);
        memcpy(s->info.cookie, cookie, 16);
    }
    s->rt_seen = 1;
    if (port->rt_idle != NULL && port->rt_idle != up) {
        ipc_up_close(port->rt_idle); /* the runtime keeps one; an older one is stale */
    }
    port->rt_idle = up;
    up->state = IPC_UP_IDLE;
    if (port->waits_for_runtime) {
        port->waits_for_runtime = 0;
        ipc_port_start(port);
    }
}

static void
ipc_up_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct ipc_upstream *up = stream->data;
    struct ipc_response r;

    (void)buf;
    if (up->state == IPC_UP_CLOSING) {
        return;
    }
    if (nread < 0) {
        if (up->state == IPC_UP_ASKING && up->rq.kind == IPC_UP_FORWARD) {
            ipc_up_forward_done(up);
        } else if (up->state == IPC_UP_ASKING && up->rq.kind == IPC_UP_COLLECT) {
            ipc_up_fallback(up); /* the runtime went away before it answered */
        } else if (up->state == IPC_UP_ASKING && up->rq.kind == IPC_UP_STOP) {
            ipc_up_fallback(up);
        } else {
            ipc_up_close(up);
        }
        return;
    }
    if (nread == 0) {
        return;
    }
    switch (up->state) {
    case IPC_UP_ADVERTISING:
        up->got += (size_t)nread;
        if (up->got == IPC_ADVERTISE_SIZE) {
            ipc_up_advertised(up);
        }
        return;
    case IPC_UP_ASKING:
        if (up->rq.kind == IPC_UP_FORWARD) {
            up->answer_len += (size_t)nread;
            if (up->answer_len >= IPC_UP_ANSWER_MAX) {
                ipc_log(up->srv, "the runtime's answer exceeds %u bytes: dropped",
                        IPC_UP_ANSWER_MAX);
                if (up->rq.client != NULL) {
                    ipc_conn_close(up->rq.client);
                }
                ipc_up_close(up);
            }
            return;
        }
        up->got += (size_t)nread;
        if (up->got < IPC_HEADER_SIZE ||
            up->got < (size_t)(uint16_t)(up->resp[14] | (up->resp[15] << 8))) {
            if (up->got == sizeof(up->resp)) {
                ipc_up_fallback(up); /* an answer no runtime sends */
            }
            return;
        }
        uv_read_stop(stream);
        if (ipc_response_decode(up->resp, up->got, &r) < 0) {
            ipc_up_fallback(up);
        } else if (up->rq.kind == IPC_UP_COLLECT) {
            ipc_up_collect_done(up, &r);
        } else {
            ipc_up_close(up); /* STOP: the runtime ends its stream; the reader sees the end */
        }
        return;
    default:
        ipc_up_close(up); /* the runtime never writes on an idle connection */
        return;
    }
}

static void
ipc_up_sent(uv_write_t *req, int status)
{
    struct ipc_upstream *up = req->data;

    free(req);
    if (status < 0 && up->state == IPC_UP_ASKING) {
        ipc_up_fallback(up);
    }
}

/* up is connected (or is a runtime port's connection): send the request, read the answer. */
static void
ipc_up_send(struct ipc_upstream *up)
{
    uv_write_t *wr = malloc(sizeof(*wr));
    uv_buf_t b;

    up->state = IPC_UP_ASKING;
    up->got = 0;
    uv_timer_stop(&up->timer);
    if (up->rq.kind == IPC_UP_COLLECT) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        up->rq.sent_ticks = nt_clock_now();
        up->rq.sent_unix_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    }
    if (wr == NULL) {
        ipc_up_fallback(up);
        return;
    }
    wr->data = up;
    b = uv_buf_init((char *)up->rq.bytes, (unsigned)up->rq.len);
    if (uv_write(wr, (uv_stream_t *)&up->pipe, &b, 1, ipc_up_sent) < 0) {
        free(wr);
        ipc_up_fallback(up);
        return;
    }
    /* a runtime port's connection was already read while idle, for its end */
    uv_read_stop((uv_stream_t *)&up->pipe);
    if (uv_read_start((uv_stream_t *)&up->pipe, ipc_up_alloc, ipc_up_read) < 0) {
        ipc_up_fallback(up);
    }
}

/* Connects to the runtime's listen socket without blocking (a Unix socket connects at once). */
static int
ipc_up_connect(struct ipc_upstream *up)
{
    struct ipc_server *s = up->srv;
    struct sockaddr_un addr;
    struct ipc_peer peer;
    int fd, err;

    if (s->rt_path == NULL || strlen(s->rt_path) >= sizeof(addr.sun_path)) {
        return -ENOENT;
    }
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, s->rt_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return -errno;
    }
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 && errno != EINPROGRESS) {
        err = -errno;
        close(fd);
        return err;
    }
    /* The runtime's private name lies in a shared directory: only this very process (the
     * runtime's server is one of its threads) may answer on it, never a socket planted there. */
    if (ipc_client_peer(fd, &peer) == 0 && peer.pid != (long)getpid()) {
        if (!s->rt_impostor_said) {
            s->rt_impostor_said = 1;
            ipc_log(s, "%s is served by process %ld of uid %ld, not by this process: not used",
                    s->rt_path, peer.pid, peer.uid);
        }
        close(fd);
        return -EPERM;
    }
    err = uv_pipe_open(&up->pipe, fd);
    if (err < 0) {
        close(fd);
        return err;
    }
    s->rt_seen = 1;
    return 0;
}

static void
ipc_up_retry_cb(uv_timer_t *t)
{
    ipc_up_begin(t->data);
}

/* up's request waits for the runtime: asked again in ms. */
static void
ipc_up_wait(struct ipc_upstream *up, uint64_t ms)
{
    if (!up->rq.waited) {
        up->rq.waited = 1;
        IPC_STAT(up->srv, runtime_waits, 1);
    }
    uv_timer_start(&up->timer, ipc_up_retry_cb, ms, 0);
}

/* Finds the way to the runtime for up's request: the port's own runtime connection, the
 * runtime's listen socket, a wait for either, or no runtime at all. */
static void
ipc_up_begin(struct ipc_upstream *up)
{
    struct ipc_server *s = up->srv;
    struct ipc_port *via = up->rq.via;
    uint64_t now = ipc_client_ms();

    if (up->state == IPC_UP_CLOSING) {
        return;
    }
    if (up->rq.first_try_ms == 0) {
        up->rq.first_try_ms = now;
    }
    if (via != NULL && via->rt_idle != NULL && via->rt_idle != up) {
        struct ipc_upstream *carrier = via->rt_idle;

        via->rt_idle = NULL;
        carrier->rt_port = NULL; /* no longer the port's idle connection */
        carrier->rq = up->rq;
        memset(&up->rq, 0, sizeof(up->rq));
        if (carrier->rq.client != NULL) {
            carrier->rq.client->up = carrier;
        }
        ipc_up_close(up);
        ipc_up_send(carrier);
        return;
    }
    if (up->rq.needs_port && via != NULL &&
        (ipc_up_may_wait(s) || now - up->rq.first_try_ms < IPC_UP_PORT_WAIT_MS)) {
        ipc_up_wait(up, IPC_UP_RETRY_MS / 2);
        return;
    }
    if (ipc_up_connect(up) == 0) {
        ipc_up_send(up);
        return;
    }
    if (ipc_up_may_wait(s)) {
        ipc_up_wait(up, IPC_UP_RETRY_MS);
        return;
    }
    if (up->rq.waited) {
        IPC_STAT(s, runtime_wait_timeouts, 1); /* the wait ended (deadline, stop): no runtime */
    }
    ipc_up_fallback(up);
}

/* The request c read (header and payload), as bytes to send on. */
static uint8_t *
ipc_up_request_bytes(const struct ipc_conn *c, size_t *len)
{
    uint8_t *b = malloc(c->h.size);

    if (b != NULL) {
        memcpy(b, c->hdr, IPC_HEADER_SIZE);
        if (c->h.size > IPC_HEADER_SIZE) {
            memcpy(b + IPC_HEADER_SIZE, c->payload, c->h.size - IPC_HEADER_SIZE);
        }
        *len = c->h.size;
    }
    return b;
}

void
ipc_upstream_forward(struct ipc_conn *c)
{
    struct ipc_upstream *up = ipc_up_new(c->srv);

    if (up == NULL || (up->rq.bytes = ipc_up_request_bytes(c, &up->rq.len)) == NULL) {
        if (up != NULL) {
            ipc_up_close(up);
        }
        ipc_conn_respond_error(c, IPC_HR_FAIL);
        return;
    }
    up->rq.kind = IPC_UP_FORWARD;
    up->rq.client = c;
    up->rq.via = c->port;
    up->rq.needs_port = c->port != NULL && c->h.command_set == IPC_SET_PROCESS &&
                        c->h.command_id == IPC_PROC_RESUME_RUNTIME;
    c->up = up;
    ipc_up_begin(up);
}

/*
 * The request the runtime gets for a client's CollectTracing: the same, without the providers
 * the agent serves itself (the runtime's SampleProfiler stops every managed thread 1000 times a
 * second to walk its managed frames; the agent's samples hold those frames and the native ones).
 * When nothing is left, a provider no one defines keeps the session valid, so that the runtime
 * still writes its rundown, which names the managed frames of the agent's stacks.
 */
static int
ipc_up_collect_request(const struct ipc_server *s, const struct ipc_collect *c, uint8_t **out,
                       size_t *len)
{
    struct ipc_collect f = *c;
    struct ipc_provider *ps = calloc((size_t)c->provider_count + 1, sizeof(*ps));
    uint8_t *buf = malloc(IPC_MAX_MESSAGE);
    uint32_t i, n = 0;
    int size = -ENOMEM;

    if (ps == NULL || buf == NULL) {
        goto out;
    }
    for (i = 0; i < c->provider_count; i++) {
        const char *name = c->providers[i].name;

        if (s->source != NULL && (strcasecmp(name, NT_PROVIDER_SAMPLE_PROFILER) == 0 ||
                                  strcasecmp(name, "pipeprof") == 0)) {
            continue;
        }
        ps[n++] = c->providers[i];
    }
    if (n == 0) {
        ps[0].name = (char *)IPC_RUNTIME_RUNDOWN_ONLY;
        ps[0].level = 1;
        n = 1;
    }
    f.providers = ps;
    f.provider_count = n;
    size = ipc_collect_encode(&f, buf, IPC_MAX_MESSAGE);
out:
    free(ps); /* a shallow copy: the names belong to c */
    if (size < 0) {
        free(buf);
        return size;
    }
    *out = buf;
    *len = (size_t)size;
    return 0;
}

void
ipc_upstream_collect(struct ipc_conn *c, struct ipc_collect *req)
{
    struct ipc_upstream *up = ipc_up_new(c->srv);

    if (up == NULL || ipc_up_collect_request(c->srv, req, &up->rq.bytes, &up->rq.len) < 0) {
        if (up != NULL) {
            ipc_up_close(up);
        }
        ipc_session_collect(c, req, NULL, 0); /* at least the agent's own session */
        return;
    }
    up->rq.kind = IPC_UP_COLLECT;
    up->rq.client = c;
    up->rq.via = c->port;
    up->rq.coll = *req;
    memset(req, 0, sizeof(*req));
    c->up = up;
    ipc_up_begin(up);
}

void
ipc_upstream_stop_session(struct ipc_session *ss)
{
    struct ipc_upstream *up = ipc_up_new(ss->srv);
    uint8_t msg[28];

    if (up == NULL || (up->rq.bytes = malloc(sizeof(msg))) == NULL) {
        if (up != NULL) {
            ipc_up_close(up);
        }
        ipc_session_merge_ended(ss); /* the runtime ends its session when its reader leaves */
        return;
    }
    up->rq.len = ipc_stop_encode(up->rq.bytes, ss->runtime_session_id);
    up->rq.kind = IPC_UP_STOP;
    up->rq.session = ss;
    ipc_up_begin(up);
}

void
ipc_upstream_conn_closed(struct ipc_conn *c)
{
    struct ipc_upstream *up = c->up;

    c->up = NULL;
    up->rq.client = NULL;
    if (up->state != IPC_UP_IDLE) {
        ipc_up_close(up); /* the runtime ends whatever it had started for this client */
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The runtime's connect-port connections                                                     */
/* ------------------------------------------------------------------------------------------ */

static void
ipc_up_advertise_timeout(uv_timer_t *t)
{
    ipc_up_close(t->data);
}

static void
ipc_up_runtime_accept(uv_stream_t *server, int status)
{
    struct ipc_port *port = server->data;
    struct ipc_server *s = port->srv;
    struct ipc_upstream *up;

    if (status < 0 || s->stopping || (up = ipc_up_new(s)) == NULL) {
        return;
    }
    if (uv_accept(server, (uv_stream_t *)&up->pipe) < 0) {
        ipc_up_close(up);
        return;
    }
    up->rq.kind = IPC_UP_RUNTIME_PORT;
    up->rt_port = port;
    up->state = IPC_UP_ADVERTISING;
    uv_timer_start(&up->timer, ipc_up_advertise_timeout, IPC_UP_ADVERTISE_MS, 0);
    if (uv_read_start((uv_stream_t *)&up->pipe, ipc_up_alloc, ipc_up_read) < 0) {
        ipc_up_close(up);
    }
}

/* The private listener the runtime's connects to port->path are redirected to. */
static int
ipc_up_port_listen(struct ipc_server *s, struct ipc_port *port)
{
    struct sockaddr_un addr;
    long owner;
    int fd, err;

    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    if (strlen(port->rt_path) >= sizeof(addr.sun_path)) {
        return -ENAMETOOLONG;
    }
    strcpy(addr.sun_path, port->rt_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return -errno;
    }
    /* a predictable name in a shared directory: only a stale socket of ours is replaced */
    err = ipc_sockfile_make_room(port->rt_path, &owner);
    if (err == 0 &&
        (fchmod(fd, 0600) < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)) {
        err = -errno;
    }
    if (err == 0 && listen(fd, 16) < 0) {
        err = -errno;
        unlink(port->rt_path);
    }
    if (err < 0) {
        close(fd);
        return err;
    }
    err = uv_pipe_init(&s->loop, &port->rt_listen, 0);
    if (err < 0) {
        close(fd);
        unlink(port->rt_path);
        return err;
    }
    port->rt_open = 1;
    port->rt_listen.data = port;
    err = uv_pipe_open(&port->rt_listen, fd);
    if (err == 0) {
        err = uv_listen((uv_stream_t *)&port->rt_listen, 16, ipc_up_runtime_accept);
    } else {
        close(fd);
    }
    if (err < 0) {
        unlink(port->rt_path);
    }
    return err;
}

static void
ipc_up_deadline(uv_timer_t *t)
{
    struct ipc_server *s = t->data;
    size_t i;

    /* No runtime advertised on these ports: they advertise pipeprof itself. */
    for (i = 0; i < s->port_count; i++) {
        if (s->ports[i].waits_for_runtime) {
            s->ports[i].waits_for_runtime = 0;
            ipc_log(s, "no .NET runtime connected to %s: serving it natively", s->ports[i].path);
            ipc_port_start(&s->ports[i]);
        }
    }
}

/*
 * A killed .NET host leaves its private sockets behind (no shutdown unlinked them); the next
 * host of this user removes them (ipc_sockfile_remove_stale(): names of ours, of a process gone,
 * sockets this user owns that refuse a connection). They carry no mark: no client globs them.
 */
unsigned
ipc_upstream_remove_stale(const char *dir)
{
    static const char *const prefixes[] = { "pipeprof-port-", "pipeprof-runtime-" };

    return ipc_sockfile_remove_stale(dir, prefixes, sizeof(prefixes) / sizeof(prefixes[0]), 0);
}

int
ipc_upstream_init(struct ipc_server *s, const struct ipc_server_options *o)
{
    char pub[IPC_PATH_MAX], path[2 * IPC_PATH_MAX];
    const char *base;
    size_t i, dlen;
    int err, n;

    if (!o->dotnet_host && (o->listen_path != NULL || o->key_override != 0)) {
        /* Not the default name (another path, or key + 1 beside a runtime left alone,
         * PIPEPROF_DOTNET_MERGE=0): nothing of the runtime's to move aside. */
        return 0;
    }
    err = ipc_default_socket_path(pub, sizeof(pub), 0);
    if (err < 0) {
        return o->dotnet_host ? err : 0; /* the safety net only: the server runs without it */
    }
    atomic_store(&ipc_redirects.ready, 0);
    ipc_redirects.pid = (long)getpid();
    ipc_redirects.ports = 0;
    ipc_redirects.runtime[0] = '\0';
    base = strrchr(pub, '/');
    dlen = ipc_dir_len(pub, base);
    memcpy(ipc_redirects.dir, pub, dlen);
    ipc_redirects.dir[dlen] = '\0';
    if (o->dotnet_host) {
        (void)ipc_upstream_remove_stale(ipc_redirects.dir); /* a killed host's, before ours */
    }
    if (o->listen_path == NULL) {
        /* this server takes the default name; the runtime's server goes to a private one */
        n = snprintf(path, sizeof(path), "%s/pipeprof-runtime-%ld-%llu-socket", ipc_redirects.dir,
                     (long)getpid(), (unsigned long long)ipc_process_start_key(getpid()));
        if (n < 0 || (size_t)n >= IPC_PATH_MAX) {
            return o->dotnet_host ? -ENAMETOOLONG : 0;
        }
        memcpy(ipc_redirects.runtime, path, (size_t)n + 1);
        s->rt_path = strdup(path);
    } else {
        s->rt_path = strdup(pub); /* the runtime keeps its name; this server listens elsewhere */
    }
    if (s->rt_path == NULL) {
        return -ENOMEM;
    }
    atomic_store(&ipc_redirects.runtime_bound, 0);
    s->redirects = 1;
    if (!o->dotnet_host) {
        /* Not taken for a .NET host: should a runtime start all the same, its bind of the
         * default name (which this server holds) still goes aside, and ipc_upstream_active()
         * turns forwarding on. Connect ports stay this server's own. */
        atomic_store_explicit(&ipc_redirects.ready, 1, memory_order_release);
        return 0;
    }
    s->dotnet = 1;
    s->rt_deadline_ms =
            ipc_client_ms() + (o->runtime_wait_ms ? o->runtime_wait_ms : IPC_RUNTIME_WAIT_MS);
    for (i = 0; i < s->port_count; i++) {
        struct ipc_port *port = &s->ports[i];

        if (i >= IPC_REDIRECT_PORTS) {
            ipc_log(s, "%s: more than %d connect ports: the runtime connects to it directly",
                    port->path, IPC_REDIRECT_PORTS);
            continue;
        }
        n = snprintf(path, sizeof(path), "%s/pipeprof-port-%ld-%zu-socket", ipc_redirects.dir,
                     (long)getpid(), i);
        if (n < 0 || (size_t)n >= IPC_PATH_MAX) {
            return -ENAMETOOLONG;
        }
        port->rt_path = strdup(path);
        if (port->rt_path == NULL) {
            return -ENOMEM;
        }
        err = ipc_up_port_listen(s, port);
        if (err < 0) {
            ipc_log(s, "%s: cannot listen for the runtime (%s): the runtime connects directly",
                    path, strerror(-err));
            free(port->rt_path);
            port->rt_path = NULL;
            continue;
        }
        port->waits_for_runtime = 1;
        if (strlen(port->path) < IPC_PATH_MAX) { /* a longer one cannot be connected to anyway */
            memcpy(ipc_redirects.port_path[ipc_redirects.ports], port->path,
                   strlen(port->path) + 1);
            memcpy(ipc_redirects.port_private[ipc_redirects.ports], path, (size_t)n + 1);
            ipc_redirects.ports++;
        }
    }
    uv_timer_init(&s->loop, &s->rt_timer);
    s->rt_timer_open = 1;
    s->rt_timer.data = s;
    uv_timer_start(&s->rt_timer, ipc_up_deadline,
                   o->runtime_wait_ms ? o->runtime_wait_ms : IPC_RUNTIME_WAIT_MS, 0);
    atomic_store_explicit(&ipc_redirects.ready, 1, memory_order_release);
    return 0;
}

void
ipc_upstream_shutdown(struct ipc_server *s, int all)
{
    struct ipc_upstream *up, *next;
    size_t i;

    if (s->redirects && s->owner_pid == getpid()) {
        atomic_store(&ipc_redirects.ready, 0);
    }
    for (i = 0; i < s->port_count; i++) {
        if (s->ports[i].rt_open && !uv_is_closing((uv_handle_t *)&s->ports[i].rt_listen)) {
            uv_close((uv_handle_t *)&s->ports[i].rt_listen, NULL);
            if (s->owner_pid == getpid()) {
                unlink(s->ports[i].rt_path);
            }
        }
    }
    if (s->rt_timer_open && !uv_is_closing((uv_handle_t *)&s->rt_timer)) {
        uv_close((uv_handle_t *)&s->rt_timer, NULL);
    }
    for (up = s->ups; up != NULL; up = next) {
        next = up->next;
        if (!all && up->rq.kind == IPC_UP_STOP && up->state != IPC_UP_CLOSING) {
            continue; /* a merged session waits for the runtime's end (shutdown_all) */
        }
        if (up->rq.client != NULL) {
            up->rq.client->up = NULL;
            up->rq.client = NULL;
        }
        up->rq.session = NULL;
        ipc_up_close(up);
    }
}

void
ipc_upstream_free(struct ipc_server *s)
{
    size_t i;

    for (i = 0; i < s->port_count; i++) {
        free(s->ports[i].rt_path);
    }
    free(s->rt_path);
}
