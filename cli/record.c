/* SPDX-License-Identifier: MIT */
/*
 * cli/record.c - `pipeprof record [OPTIONS] -- CMD ARGS...`: runs CMD with the agent preloaded
 * and records it from its first instruction. CMD connects to a private socket (connect mode
 * with suspend), so its start-up waits until the session is running; the trace streams into a
 * file while a live line counts samples, and ends when CMD exits (the agent's exit handler runs
 * rundown and closes the stream), at Ctrl-C, or when the duration ends. Then the trace is
 * converted if asked and summarised on stderr, and CMD's exit status becomes ours.
 *
 * CMD runs in its own process group: Ctrl-C reaches pipeprof alone, which ends the session
 * first (so the trace keeps its rundown) and then passes the signal on to CMD.
 * Context: the CLI's single thread; SIGINT/SIGTERM/SIGHUP only set a flag.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/diag.h"
#include "cli/profile.h"
#include "nettrace/nettrace.h"

#define PP_RECORD_CONNECT_MS   10000 /* CMD's agent must connect within this */
#define PP_RECORD_STOP_WAIT_MS 30000 /* for the stream's end after StopTracing or CMD's exit */
#define PP_RECORD_MAX_THREADS  65536 /* distinct thread ids counted for the live line */

static volatile sig_atomic_t pp_record_signal;

static void
pp_record_on_signal(int sig)
{
    pp_record_signal = sig;
}

struct pp_record {
    /* options */
    const char *mode;
    unsigned hz;
    double duration;
    const char *output;
    enum pp_profile_format format;
    int nettrace; /* the output is the trace itself */
    int quiet;
    char **cmd;
    /* state */
    char dir[160]; /* a socket path must fit sockaddr_un's 108 bytes anyway */
    char sock[PATH_MAX];
    char trace[PATH_MAX];
    int listen_fd, stream, trace_fd;
    pid_t child;
    int child_status, child_done;
    uint64_t session;
    uint64_t start_ms, stop_sent_ms, exited_ms;
    int stop_sent, eof, stop_fd;
    uint64_t bytes, samples, lost;
    uint64_t *tids; /* open-addressing set of thread ids seen (0 = empty) */
    size_t tid_count;
    uint64_t last_progress;
    int tty;
    int segments; /* streams recorded: one per image CMD's pid ran (exec keeps the pid) */
    int next_fd;  /* the next image's advertised connection, or -1 */
    int resumed;  /* CMD's start-up was resumed: later images do not wait (PIPEPROF_RESUMED_PID) */
    int cut;      /* the last stream ended without its end tag */
    uint8_t cookie[16], last_cookie[16]; /* the advertising agent's instance cookie */
};

#define PP_RECORD_MAX_SEGMENTS 64

/*
 * Joins the segment traces of one process (an image per exec) into `out`: every event of each,
 * in order, through the nettrace reader and writer, with the first segment's header. Timestamps
 * are the agent's monotonic clock in every segment, so they stay comparable. A segment that ends
 * early (cut) contributes what it holds. Returns 0 or a negative errno.
 */
static int
pp_record_join(const char *const *in, int n, const char *out)
{
    struct nt_writer *w = NULL;
    struct nt_sink sink;
    int ofd, err = 0, i;

    ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (ofd < 0) {
        return -errno;
    }
    nt_sink_fd(&sink, &ofd);
    for (i = 0; i < n && err == 0; i++) {
        struct nt_reader *r = NULL;
        struct nt_source src;
        struct nt_event ev;
        int fd = open(in[i], O_RDONLY | O_CLOEXEC);

        if (fd < 0) {
            err = -errno;
            break;
        }
        nt_source_fd(&src, &fd);
        err = nt_reader_new(&src, NULL, &r);
        if (err == 0 && w == NULL) {
            const struct nt_trace_info *info = nt_reader_info(r);
            struct nt_writer_options o;

            memset(&o, 0, sizeof(o));
            o.process_id = info->process_id;
            o.number_of_processors = info->number_of_processors;
            o.sampling_interval_ns = info->expected_cpu_sampling_rate;
            o.sync_time_ticks = info->sync_time_ticks;
            err = nt_writer_new(&o, &sink, &w);
        }
        while (err == 0 && (err = nt_reader_next(r, &ev)) == 1) {
            uint32_t meta;

            err = 0;
            if (ev.desc == NULL) {
                continue;
            }
            err = nt_writer_define(w, ev.desc, &meta);
            if (err == 0) {
                ev.metadata_id = meta;
                err = nt_writer_write(w, &ev);
            }
        }
        if (err == -EBADMSG && r != NULL) {
            struct nt_reader_error re;

            nt_reader_get_error(r, &re);
            err = re.truncated ? 0 : err; /* a cut segment: what it holds is used */
        }
        nt_reader_free(r);
        close(fd);
    }
    if (err == 0 && w != NULL) {
        err = nt_writer_finish(w);
    }
    nt_writer_free(w);
    if (close(ofd) != 0 && err == 0) {
        err = -errno;
    }
    return err;
}

static void
pp_record_usage(FILE *out)
{
    fprintf(out,
            "usage: pipeprof record [--mode cpu|wall] [--hz N] [--duration S] [-o FILE]\n"
            "                       [--format F] [-q] -- CMD [ARGS...]\n"
            "\n"
            "Runs CMD with the pipeprof agent preloaded and records its native call stacks\n"
            "from its first instruction until it exits, Ctrl-C, or the duration ends. CMD's\n"
            "standard input, output and error are its own; pipeprof writes only to stderr.\n"
            "At the end it prints the samples, effective rate, losses and top 10 functions.\n"
            "\n"
            "options:\n"
            "  --mode cpu|wall    cpu: CPU time of each thread (default); wall: every thread\n"
            "                     at the interval, running or waiting\n"
            "  --hz N             samples per second and thread, 1-1000 (default 100; CPU\n"
            "                     timers, the fallback engine, are bounded by the kernel tick)\n"
            "  --duration S       stop recording after S seconds (CMD runs on to its end)\n"
            "  -o, --output FILE  default pipeprof.nettrace, or pipeprof.<format extension>\n"
            "  --format F         nettrace (default), or a `pipeprof convert` format:\n"
            "                     folded, perf, speedscope, pprof, chromium\n"
            "  -q, --quiet        no live line and no summary\n"
            "  -h, --help         this text\n"
            "\n"
            "exit status: always CMD's (128+N when a signal N ended it; a problem with the\n"
            "trace is said on stderr); 1 when CMD could not be started; 2 for a usage error.\n"
            "\n"
            "CMD's process is followed through exec (env, nice, sh -c 'exec ...', version\n"
            "manager shims): one trace covers every image it runs.\n"
            "\n"
            "environment: PIPEPROF_LIBRARY overrides the agent library (default: lib/\n"
            "libpipeprof.so next to the directory of this program). CMD and its exec'd\n"
            "children get LD_PRELOAD; only CMD itself is profiled (PIPEPROF_TARGET_PID).\n");
}

static const char *
pp_record_default_output(enum pp_profile_format fmt, int nettrace)
{
    if (nettrace) {
        return "pipeprof.nettrace";
    }
    switch (fmt) {
    case PP_PROFILE_FOLDED:
        return "pipeprof.folded";
    case PP_PROFILE_PERF:
        return "pipeprof.perf.txt";
    case PP_PROFILE_SPEEDSCOPE:
        return "pipeprof.speedscope.json";
    case PP_PROFILE_PPROF:
        return "pipeprof.pb.gz";
    case PP_PROFILE_CHROMIUM:
        return "pipeprof.chromium.json";
    }
    return "pipeprof.out";
}

/* The agent library: $PIPEPROF_LIBRARY, else ../lib/libpipeprof.so beside this executable. */
static int
pp_record_find_library(char *out, size_t cap)
{
    const char *env = getenv("PIPEPROF_LIBRARY");
    char exe[PATH_MAX];
    ssize_t n;
    char *slash;

    if (env != NULL && env[0] != '\0') {
        if (realpath(env, out) == NULL || strlen(out) >= cap) {
            return -errno;
        }
        return access(out, R_OK) == 0 ? 0 : -errno;
    }
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        return -ENOENT;
    }
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (slash == NULL) {
        return -ENOENT;
    }
    *slash = '\0';
    if ((size_t)snprintf(out, cap, "%s/../lib/libpipeprof.so", exe) >= cap) {
        return -ENAMETOOLONG;
    }
    return access(out, R_OK) == 0 ? 0 : -errno;
}

static void
pp_record_spawn_child(struct pp_record *rc, const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    char port[PATH_MAX + 32], pid[32], *preload;
    size_t need;

    /* Own process group: the terminal's Ctrl-C goes to pipeprof, which stops the session
     * before it passes the signal on. */
    setpgid(0, 0);
    /* After what is preloaded already: a sanitizer runtime must stay first. */
    need = strlen(lib) + (old != NULL ? strlen(old) + 1 : 0) + 1;
    preload = malloc(need);
    if (preload == NULL) {
        _exit(127);
    }
    snprintf(preload, need, "%s%s%s", old != NULL ? old : "",
             old != NULL && old[0] != '\0' ? ":" : "", lib);
    snprintf(port, sizeof(port), "%s,connect,suspend", rc->sock);
    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    setenv("LD_PRELOAD", preload, 1);
    setenv("DOTNET_DiagnosticPorts", port, 1);
    setenv("PIPEPROF_TARGET_PID", pid, 1);
    /* The listen socket is private to this recording; CMD needs only the connect port. */
    setenv("PIPEPROF_DIAGNOSTIC_PORT", "", 1);
    execvp(rc->cmd[0], rc->cmd);
    fprintf(stderr, "pipeprof record: cannot run %s: %s\n", rc->cmd[0], strerror(errno));
    _exit(127);
}

static void
pp_record_reap(struct pp_record *rc, int block)
{
    int status;
    pid_t r;

    if (rc->child <= 0 || rc->child_done) {
        return;
    }
    do {
        r = waitpid(rc->child, &status, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR && block);
    if (r == rc->child) {
        rc->child_status = status;
        rc->child_done = 1;
        rc->exited_ms = ipc_client_ms();
    }
}

static void
pp_record_progress(struct pp_record *rc, int final)
{
    uint64_t now = ipc_client_ms(), s;

    if (!rc->tty || rc->quiet || (!final && now - rc->last_progress < 250)) {
        return;
    }
    rc->last_progress = now;
    s = (now - rc->start_ms) / 1000;
    fprintf(stderr, "\r[%02llu:%02llu:%02llu] samples %llu  threads %zu  lost %llu  %.2f MB   %s",
            (unsigned long long)(s / 3600), (unsigned long long)(s / 60 % 60),
            (unsigned long long)(s % 60), (unsigned long long)rc->samples, rc->tid_count,
            (unsigned long long)rc->lost, (double)rc->bytes / 1e6, final ? "\n" : "");
}

/* The next connection CMD's agent advertises. */
static int
pp_record_accept(struct pp_record *rc, int timeout_ms, int *fd)
{
    uint64_t pid;

    return ipc_client_accept_advertise(rc->listen_fd, timeout_ms, (uint64_t)rc->child, fd,
                                       rc->last_cookie, &pid);
}

/* Sends StopTracing on a fresh advertised connection; the answer is read after the stream. */
static void
pp_record_send_stop(struct pp_record *rc)
{
    uint8_t msg[28];
    int err;

    rc->stop_sent = 1;
    rc->stop_sent_ms = ipc_client_ms();
    if (rc->child_done) {
        return; /* CMD is gone: its exit handler ends the stream */
    }
    ipc_stop_encode(msg, rc->session);
    err = pp_record_accept(rc, 5000, &rc->stop_fd);
    if (err == 0) {
        err = ipc_client_send(rc->stop_fd, msg, sizeof(msg));
    }
    if (err < 0) {
        fprintf(stderr, "pipeprof record: cannot send StopTracing: %s\n", strerror(-err));
    }
}

/*
 * The reader's source: copies the stream into the trace file as the reader pulls it, and in
 * between polls drives everything else (CMD's exit, Ctrl-C, the duration, the live line).
 */
static ssize_t
pp_record_read(void *ctx, void *buf, size_t len)
{
    struct pp_record *rc = ctx;

    for (;;) {
        struct pollfd pfd = { rc->stream, POLLIN, 0 };
        uint64_t now;
        ssize_t n;
        int r;

        if (rc->eof) {
            return 0;
        }
        r = poll(&pfd, 1, 100);
        if (r > 0) {
            n = read(rc->stream, buf, len);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                rc->eof = 1;
                return n < 0 ? -errno : 0;
            }
            if (write(rc->trace_fd, buf, (size_t)n) != n) {
                return -EIO;
            }
            rc->bytes += (uint64_t)n;
            return n;
        }
        pp_record_reap(rc, 0);
        pp_record_progress(rc, 0);
        now = ipc_client_ms();
        if (!rc->stop_sent &&
            (pp_record_signal != 0 ||
             (rc->duration > 0 && now - rc->start_ms >= (uint64_t)(rc->duration * 1000)))) {
            pp_record_send_stop(rc);
        }
        /* CMD exited or the stop was sent, and the stream still has not ended. */
        if ((rc->child_done && now - rc->exited_ms > PP_RECORD_STOP_WAIT_MS) ||
            (rc->stop_sent && now - rc->stop_sent_ms > PP_RECORD_STOP_WAIT_MS)) {
            rc->eof = 1;
            return -ETIMEDOUT;
        }
    }
}

static void
pp_record_count_thread(struct pp_record *rc, uint64_t tid)
{
    size_t i;

    if (rc->tids == NULL || tid == 0 || rc->tid_count * 2 >= PP_RECORD_MAX_THREADS) {
        return;
    }
    for (i = (size_t)(tid * 0x9E3779B97F4A7C15ULL) & (PP_RECORD_MAX_THREADS - 1); rc->tids[i] != 0;
         i = (i + 1) & (PP_RECORD_MAX_THREADS - 1)) {
        if (rc->tids[i] == tid) {
            return;
        }
    }
    rc->tids[i] = tid;
    rc->tid_count++;
}

/* Reads the stream to its end, counting samples, threads and losses for the live line. */
static int
pp_record_stream(struct pp_record *rc, char *why, size_t whylen)
{
    struct nt_source src = { pp_record_read, rc };
    struct nt_reader *r = NULL;
    struct nt_reader_stats stats;
    struct nt_reader_error rerr;
    struct nt_event ev;
    int err;

    err = nt_reader_new(&src, NULL, &r);
    while (err == 0 && (err = nt_reader_next(r, &ev)) == 1) {
        err = 0;
        if (ev.desc == NULL) {
            continue;
        }
        if (ev.desc->event_id == 0 &&
            strcmp(ev.desc->provider, "Microsoft-DotNETCore-SampleProfiler") == 0) {
            rc->samples++;
            pp_record_count_thread(rc, ev.thread_id);
        } else if (strcmp(ev.desc->provider, "pipeprof") == 0 && ev.payload_size >= 16 &&
                   strcmp(ev.desc->name, "LostSamples") == 0) {
            uint64_t lost = 0;
            int i;

            for (i = 7; i >= 0; i--) {
                lost = lost << 8 | ev.payload[8 + i];
            }
            rc->lost += lost;
        }
    }
    if (r != NULL) {
        nt_reader_get_stats(r, &stats);
        rc->lost += stats.lost_events;
    }
    if (err < 0) {
        if (err == -EBADMSG && r != NULL) {
            nt_reader_get_error(r, &rerr);
            snprintf(why, whylen, "offset %llu: %s", (unsigned long long)rerr.offset,
                     rerr.reason != NULL ? rerr.reason : "malformed trace");
        } else if (err == -ETIMEDOUT) {
            snprintf(why, whylen, "the stream did not end within %d s",
                     PP_RECORD_STOP_WAIT_MS / 1000);
        } else {
            snprintf(why, whylen, "%s", strerror(-err));
        }
    }
    nt_reader_free(r);
    /* Keep copying whatever follows, so the file holds every byte CMD sent. */
    while (!rc->eof) {
        char buf[65536];

        if (pp_record_read(rc, buf, sizeof(buf)) <= 0) {
            break;
        }
    }
    return err < 0 ? err : 0;
}

/* Starts the session on CMD's first advertised connection and resumes CMD. */
static int
pp_record_start_session(struct pp_record *rc)
{
    static uint8_t buf[IPC_MAX_MESSAGE + 1];
    struct ipc_collect req;
    struct ipc_response r;
    char spec[256];
    const char *why = NULL;
    uint8_t msg[IPC_HEADER_SIZE];
    uint64_t deadline = ipc_client_ms() + PP_RECORD_CONNECT_MS;
    int fd = -1, err, n;

    snprintf(spec, sizeof(spec),
             "Microsoft-DotNETCore-SampleProfiler:0:4:mode=%s;hz=%u,pipeprof:0:4", rc->mode,
             rc->hz);
    err = pp_diag_collect_init(&req, spec, &why);
    if (err < 0) {
        fprintf(stderr, "pipeprof record: %s\n", why != NULL ? why : strerror(-err));
        goto out;
    }
    /* Short accept slices, so that a CMD that dies (or never loads the agent) is noticed. */
    if (rc->next_fd >= 0) {
        rc->stream = rc->next_fd; /* the exec'd image's, accepted already */
        rc->next_fd = -1;
        memcpy(rc->cookie, rc->last_cookie, sizeof(rc->cookie));
        err = 0;
    } else {
        do {
            err = pp_record_accept(rc, 200, &rc->stream);
            pp_record_reap(rc, 0);
        } while ((err == -ETIMEDOUT || err == -EINTR) && !rc->child_done && pp_record_signal == 0 &&
                 ipc_client_ms() < deadline);
        memcpy(rc->cookie, rc->last_cookie, sizeof(rc->cookie));
    }
    if (err < 0 && pp_record_signal != 0) {
        fprintf(stderr, "pipeprof record: interrupted before %s connected\n", rc->cmd[0]);
        goto out;
    }
    if (err < 0) {
        fprintf(stderr,
                "pipeprof record: %s did not load the agent (%s): is it statically linked, "
                "setuid, or did it clear LD_PRELOAD? Nothing was recorded.\n",
                rc->cmd[0], rc->child_done ? "it exited first" : strerror(-err));
        goto out;
    }
    n = ipc_collect_encode(&req, buf, sizeof(buf));
    err = n < 0 ? n : pp_diag_request(rc->stream, buf, (size_t)n, &r, buf, sizeof(buf), 30000);
    if (err < 0 && (err == -EPIPE || err == -ECONNRESET) && rc->segments > 0 && !rc->child_done) {
        goto out; /* a connection the previous image left behind: the caller takes the next */
    }
    if (err != 0) {
        fprintf(stderr, "pipeprof record: CollectTracing failed: %s\n",
                err > 0 ? pp_diag_hr_name(r.hresult) : strerror(-err));
        err = -EPROTO;
        goto out;
    }
    rc->session = r.value;
    if (rc->resumed) {
        goto out; /* an exec'd image: it was not held, and its predecessor may hold a connection */
    }
    ipc_header_encode(msg, IPC_HEADER_SIZE, IPC_SET_PROCESS, IPC_PROC_RESUME_RUNTIME);
    err = pp_record_accept(rc, PP_RECORD_CONNECT_MS, &fd);
    if (err == 0) {
        err = pp_diag_request(fd, msg, IPC_HEADER_SIZE, &r, buf, sizeof(buf), 30000);
    }
    if (err != 0) {
        fprintf(stderr, "pipeprof record: ResumeRuntime failed: %s\n",
                err > 0 ? pp_diag_hr_name(r.hresult) : strerror(-err));
        err = -EPROTO;
    } else {
        rc->resumed = 1;
    }
out:
    if (fd >= 0) {
        close(fd);
    }
    ipc_collect_fini(&req);
    return err;
}

/* Converts the trace if asked, and prints the summary. */
static int
pp_record_finish(struct pp_record *rc)
{
    struct pp_profile *p = NULL;
    FILE *out = NULL;
    char err[512];
    int rcode = -1, sampled = 0;
    double secs, busiest = 0;
    size_t i;

    if (pp_profile_load(rc->trace, NULL, &p, err, sizeof(err)) != 0) {
        fprintf(stderr, "pipeprof record: reading the trace: %s\n", err);
        goto out;
    }
    if (!rc->nettrace) {
        out = fopen(rc->output, "w");
        if (out == NULL) {
            fprintf(stderr, "pipeprof record: %s: %s\n", rc->output, strerror(errno));
            goto out;
        }
        if (pp_profile_write(p, rc->format, out, err, sizeof(err)) != 0) {
            fprintf(stderr, "pipeprof record: writing %s: %s\n", rc->output, err);
            goto out;
        }
        if (fclose(out) != 0) {
            out = NULL;
            fprintf(stderr, "pipeprof record: %s: %s\n", rc->output, strerror(errno));
            goto out;
        }
        out = NULL;
    }
    rcode = 0;
    if (rc->quiet) {
        goto out;
    }
    secs = p->last_ts > p->first_ts
                   ? (double)(p->last_ts - p->first_ts) / (double)p->ticks_per_second
                   : 0.0;
    for (i = 0; i < p->thread_count; i++) {
        sampled += p->threads[i].samples != 0;
        if (secs > 0 && (double)p->threads[i].samples / secs > busiest) {
            busiest = (double)p->threads[i].samples / secs;
        }
    }
    fprintf(stderr,
            "pipeprof: %s written (%s format)\n"
            "pipeprof: %llu samples in %.2f s from %d threads, %s mode at %u Hz requested\n"
            "pipeprof: effective rate %.1f Hz on the busiest thread%s%s\n"
            "pipeprof: lost: %llu samples dropped by the agent, %llu events lost in the trace\n",
            rc->output, rc->nettrace ? "nettrace" : pp_profile_format_name(rc->format),
            (unsigned long long)p->samples, secs, sampled, rc->mode, rc->hz, busiest,
            p->engine != NULL ? ", cpu engine " : "", p->engine != NULL ? p->engine : "",
            (unsigned long long)p->lost_samples, (unsigned long long)p->lost_events);
    if (p->samples > 0) {
        (void)pp_report_brief(p, 10, stderr);
    }
out:
    if (out != NULL) {
        fclose(out);
    }
    pp_profile_free(p);
    return rcode;
}

static int
pp_record_parse(struct pp_record *rc, int argc, char **argv)
{
    const char *format = NULL;
    char *end;
    int i;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "--") == 0) {
            rc->cmd = argv + i + 1;
            break;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            pp_record_usage(stdout);
            return 0;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            rc->quiet = 1;
        } else if (i + 1 >= argc) {
            fprintf(stderr, "pipeprof record: '%s' needs a value or is unknown\n", a);
            return 2;
        } else if (strcmp(a, "--mode") == 0) {
            rc->mode = argv[++i];
            if (strcmp(rc->mode, "cpu") != 0 && strcmp(rc->mode, "wall") != 0) {
                fprintf(stderr, "pipeprof record: --mode is cpu or wall, not '%s'\n", rc->mode);
                return 2;
            }
        } else if (strcmp(a, "--hz") == 0) {
            unsigned long hz = strtoul(argv[++i], &end, 10);

            if (*end != '\0' || hz < 1 || hz > 1000) {
                fprintf(stderr, "pipeprof record: --hz is 1-1000, not '%s'\n", argv[i]);
                return 2;
            }
            rc->hz = (unsigned)hz;
        } else if (strcmp(a, "--duration") == 0) {
            rc->duration = strtod(argv[++i], &end);
            if (*end != '\0' || !(rc->duration > 0)) {
                fprintf(stderr, "pipeprof record: --duration needs seconds > 0\n");
                return 2;
            }
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            rc->output = argv[++i];
        } else if (strcmp(a, "--format") == 0 || strcmp(a, "-f") == 0) {
            format = argv[++i];
        } else {
            fprintf(stderr, "pipeprof record: unknown option '%s'\n", a);
            return 2;
        }
    }
    if (rc->cmd == NULL || rc->cmd[0] == NULL) {
        fprintf(stderr, "pipeprof record: no command (pipeprof record [OPTIONS] -- CMD ...)\n");
        return 2;
    }
    rc->nettrace = format == NULL || strcmp(format, "nettrace") == 0;
    if (!rc->nettrace && pp_profile_format_parse(format, &rc->format) != 0) {
        fprintf(stderr,
                "pipeprof record: unknown format '%s' (nettrace, folded, perf, speedscope, "
                "pprof, chromium)\n",
                format);
        return 2;
    }
    if (rc->output == NULL) {
        rc->output = pp_record_default_output(rc->format, rc->nettrace);
    }
    return -1;
}

/*
 * After a session ended: whether CMD's pid runs on and its agent connected again (an exec). Waits
 * in short slices while CMD lives, unless the recording is being stopped.
 */
static int
pp_record_next_image(struct pp_record *rc)
{
    struct pollfd pfd = { rc->listen_fd, POLLIN, 0 };

    while (!rc->child_done && !rc->stop_sent && pp_record_signal == 0) {
        /* A connection the previous image left in the backlog is closed, and skipped. */
        if (poll(&pfd, 1, 100) > 0 && pp_record_accept(rc, 300, &rc->next_fd) == 0) {
            if (memcmp(rc->last_cookie, rc->cookie, sizeof(rc->cookie)) != 0) {
                return 1; /* another agent instance in the same pid: a new image */
            }
            close(rc->next_fd); /* the ended image's agent reconnecting */
            rc->next_fd = -1;
        }
        pp_record_reap(rc, 0);
    }
    return 0;
}

/* Joins segment 0 (the trace file) and the later images' segments into the trace file. */
static int
pp_record_join_segments(struct pp_record *rc)
{
    char paths[PP_RECORD_MAX_SEGMENTS][PATH_MAX], joined[PATH_MAX];
    const char *in[PP_RECORD_MAX_SEGMENTS];
    int i, err;

    snprintf(paths[0], sizeof(paths[0]), "%s", rc->trace);
    for (i = 1; i < rc->segments; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/segment-%d.nettrace", rc->dir, i);
    }
    for (i = 0; i < rc->segments; i++) {
        in[i] = paths[i];
    }
    snprintf(joined, sizeof(joined), "%s/joined.nettrace", rc->dir);
    err = pp_record_join(in, rc->segments, joined);
    if (err == 0 && rename(joined, rc->trace) != 0) {
        err = -errno;
    }
    for (i = 1; i < rc->segments; i++) {
        unlink(paths[i]);
    }
    unlink(joined);
    if (err != 0) {
        fprintf(stderr, "pipeprof record: cannot join the %d images' traces: %s\n", rc->segments,
                strerror(-err));
    }
    return err;
}

static int
pp_record_exit_code(const struct pp_record *rc, int recorded)
{
    int code = 1;

    if (rc->child_done && WIFEXITED(rc->child_status)) {
        code = WEXITSTATUS(rc->child_status);
    } else if (rc->child_done && WIFSIGNALED(rc->child_status)) {
        code = 128 + WTERMSIG(rc->child_status);
    }
    (void)recorded; /* a problem with the trace was said on stderr; the status stays CMD's */
    return code;
}

int
pp_cmd_record(int argc, char **argv)
{
    struct pp_record rc;
    struct sigaction sa, old_int, old_term, old_hup;
    char lib[PATH_MAX], why[512];
    const char *tmp = getenv("TMPDIR");
    int err, recorded = 0, rcode;

    memset(&rc, 0, sizeof(rc));
    rc.mode = "cpu";
    rc.hz = 100;
    rc.listen_fd = rc.stream = rc.trace_fd = rc.stop_fd = rc.next_fd = -1;
    rc.segments = 1;
    rcode = pp_record_parse(&rc, argc, argv);
    if (rcode >= 0) {
        return rcode;
    }
    err = pp_record_find_library(lib, sizeof(lib));
    if (err < 0) {
        fprintf(stderr,
                "pipeprof record: the agent library was not found (%s); set PIPEPROF_LIBRARY "
                "to libpipeprof.so\n",
                strerror(-err));
        return 1;
    }
    if (tmp == NULL || tmp[0] == '\0' || strlen(tmp) > 80) {
        tmp = "/tmp"; /* a longer directory would not leave room for the socket's name */
    }
    snprintf(rc.dir, sizeof(rc.dir), "%s/pipeprof-record-XXXXXX", tmp);
    if (mkdtemp(rc.dir) == NULL) {
        fprintf(stderr, "pipeprof record: cannot create a directory in %s: %s\n", tmp,
                strerror(errno));
        return 1;
    }
    snprintf(rc.sock, sizeof(rc.sock), "%s/port.sock", rc.dir);
    if (rc.nettrace) {
        snprintf(rc.trace, sizeof(rc.trace), "%s", rc.output);
    } else {
        snprintf(rc.trace, sizeof(rc.trace), "%s/trace.nettrace", rc.dir);
    }
    rc.tids = calloc(PP_RECORD_MAX_THREADS, sizeof(*rc.tids));
    rc.tty = isatty(2);

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = pp_record_on_signal; /* no SA_RESTART: poll and accept return EINTR */
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);
    signal(SIGPIPE, SIG_IGN);

    err = ipc_client_listen(rc.sock, &rc.listen_fd);
    if (err < 0) {
        fprintf(stderr, "pipeprof record: cannot listen on %s: %s\n", rc.sock, strerror(-err));
        goto out;
    }
    rc.trace_fd = open(rc.trace, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (rc.trace_fd < 0) {
        fprintf(stderr, "pipeprof record: cannot create %s: %s\n", rc.trace, strerror(errno));
        goto out;
    }
    fflush(NULL);
    rc.child = fork();
    if (rc.child < 0) {
        fprintf(stderr, "pipeprof record: fork: %s\n", strerror(errno));
        goto out;
    }
    if (rc.child == 0) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        sigaction(SIGHUP, &old_hup, NULL);
        signal(SIGPIPE, SIG_DFL);
        pp_record_spawn_child(&rc, lib);
    }
    setpgid(rc.child, rc.child); /* also here, so that no signal races the child's own call */
    rc.start_ms = ipc_client_ms();
    if (pp_record_start_session(&rc) != 0) {
        goto out;
    }
    for (;;) {
        char seg[PATH_MAX];

        int serr = pp_record_stream(&rc, why, sizeof(why)), tries;
        /* CMD's pid runs on after its session ended: it exec'd, and the new image's agent
         * connects again. Its session goes to the next segment. */
        int next = pp_record_next_image(&rc);

        if (serr != 0 && !next) {
            fprintf(stderr,
                    "\npipeprof record: the trace is incomplete: %s%s; the file holds what "
                    "arrived, closed properly\n",
                    why,
                    rc.child_done && WIFSIGNALED(rc.child_status)
                            ? " (CMD was killed before it could end the session)"
                            : "");
            rc.cut = 1;
        }
        if (!next || rc.segments >= PP_RECORD_MAX_SEGMENTS) {
            break;
        }
        close(rc.stream);
        rc.stream = -1;
        close(rc.trace_fd);
        snprintf(seg, sizeof(seg), "%s/segment-%d.nettrace", rc.dir, rc.segments);
        rc.trace_fd = open(seg, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (rc.trace_fd < 0) {
            fprintf(stderr, "pipeprof record: cannot create %s: %s\n", seg, strerror(errno));
            break;
        }
        rc.eof = 0;
        for (tries = 0; tries < 16; tries++) {
            serr = pp_record_start_session(&rc);
            if (serr != -EPIPE && serr != -ECONNRESET) {
                break;
            }
            close(rc.stream);
            rc.stream = -1;
        }
        if (serr != 0) {
            break;
        }
        rc.segments++;
    }
    pp_record_progress(&rc, 1);
    if (rc.stop_fd >= 0) {
        static uint8_t buf[IPC_MAX_MESSAGE + 1];
        struct ipc_response r;
        int n = ipc_client_read_response(rc.stop_fd, buf, sizeof(buf), 5000);

        if (n < 0 || ipc_response_decode(buf, (size_t)n, &r) < 0 || r.status != IPC_RESPONSE_OK) {
            fprintf(stderr, "pipeprof record: StopTracing was not acknowledged\n");
        }
    }
    close(rc.trace_fd);
    rc.trace_fd = -1;
    /* Several images are joined into one trace; a stream that was cut (CMD killed) is rewritten
     * the same way, so the file always ends with its end tag. */
    if ((rc.segments > 1 || rc.cut) && pp_record_join_segments(&rc) != 0) {
        goto out;
    }
    recorded = pp_record_finish(&rc) == 0;
out:
    if (rc.next_fd >= 0) {
        close(rc.next_fd);
    }
    if (rc.stop_fd >= 0) {
        close(rc.stop_fd);
    }
    if (rc.stream >= 0) {
        close(rc.stream);
    }
    if (rc.trace_fd >= 0) {
        close(rc.trace_fd);
    }
    if (rc.listen_fd >= 0) {
        close(rc.listen_fd);
    }
    unlink(rc.sock);
    if (!rc.nettrace) {
        unlink(rc.trace);
    }
    rmdir(rc.dir);
    if (rc.child > 0) {
        /* Ctrl-C or a termination request: pass it on once the session has ended. */
        if (pp_record_signal != 0 && !rc.child_done) {
            kill(-rc.child, pp_record_signal);
        }
        pp_record_reap(&rc, 1);
    }
    free(rc.tids);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    return rc.child > 0 ? pp_record_exit_code(&rc, recorded) : 1;
}
