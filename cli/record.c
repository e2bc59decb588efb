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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/diag.h"
#include "cli/names.h"
#include "cli/output.h"
#include "cli/profile.h"
#include "common/grow.h"
#include "common/proc-start.h"
#include "nettrace/format.h"
#include "nettrace/nettrace.h"

#define PP_RECORD_CONNECT_MS   10000 /* CMD's agent must connect within this */
#define PP_RECORD_STOP_WAIT_MS 30000 /* for the streams' ends after a stop or CMD's exit */
#define PP_RECORD_REQUEST_MS   5000  /* an agent answers a command within this */
#define PP_RECORD_MAX_THREADS  65536 /* distinct thread ids counted for the live line */
#define PP_RECORD_MAX_IMAGES   4096  /* images recorded; later processes are only resumed */

static volatile sig_atomic_t pp_record_signal;

static void
pp_record_on_signal(int sig)
{
    pp_record_signal = sig;
}

/*
 * One agent instance: an image of a process (exec keeps the pid and starts a new image with a
 * new advertise cookie). Its stream is read by a thread of its own into a segment file; the
 * main thread owns everything else. Written by the stream thread: the counters, done, cut and
 * why (read by the main thread after done is seen, or after the join).
 */
struct pp_image {
    uint64_t pid;
    uint64_t start; /* the process's start time (common/proc-start.h) as it connected; 0: unknown */
    uint8_t cookie[16];
    uint64_t session;
    int stream_fd; /* the session's connection, read by the thread */
    int file_fd;   /* the segment file, written by the thread; -1 while it is pending */
    int has_file;  /* the segment file exists (path) */
    char *pending; /* what arrived before the segment file: a child's stream is kept in
                      memory until its first sample, and a child that had none never gets
                      a file (creating and removing one was 0.3 ms of the recorder's CPU per
                      short child) */
    size_t pending_len, pending_cap;
    int idle_fd;     /* an advertised connection kept for StopTracing, or -1 */
    int stop_fd;     /* StopTracing was sent on it, or -1 */
    int need_resume; /* ResumeRuntime not sent yet: the image may be held at its start */
    int root;        /* the first image of CMD's pid: it streams into the output itself */
    char path[PATH_MAX];
    pthread_t thread;
    int thread_started;
    _Atomic int done;
    int cut;
    char why[256];
    _Atomic uint64_t samples, lost, bytes;
    _Atomic int agent;   /* the stream holds pipeprof's events (record enables its provider);
                            without them it came from a .NET runtime's own EventPipe */
    _Atomic int runtime; /* the stream holds the .NET runtime's events: with the agent, a
                            .NET host whose runtime's session pipeprof merged with its own */
};

struct pp_record {
    /* options */
    const char *mode;
    unsigned hz;
    double duration;
    const char *output;
    enum pp_profile_format format;
    int nettrace; /* the output is the trace itself */
    int quiet;
    int verbose;  /* -v: the full summary, each process's trouble on its own line (else one line) */
    int children; /* follow the process tree (default), or CMD's pid only */
    char **cmd;
    /* state */
    char dir[160]; /* a socket path must fit sockaddr_un's 108 bytes anyway */
    char sock[PATH_MAX];
    char cfi_cache[PATH_MAX];  /* dir/cfi: unwind tables the children share, or "" */
    char tally[PATH_MAX];      /* dir/tally: pids of children that ended without a sample (and
                                  never connected: PIPEPROF_RECORD_TALLY), or "" */
    char token[48];            /* PIPEPROF_RECORD_TOKEN=<32 hex digits>: in every environment
                                  of the tree (pp_record_has_token) */
    char trace[PATH_MAX];      /* CMD's own trace: root_out's file, or a file in dir to convert */
    struct pp_output root_out; /* nettrace: the output, renamed into place at the end */
    int listen_fd;
    struct ipc_sockfile sock_file;
    pid_t child;
    int child_fd; /* a pidfd of CMD, readable once it exits (it wakes the loop), or -1 */
    int child_status, child_done;
    int killed_said; /* a line named the signal that ended CMD (pp_record_exit_code) */
    /* The child's end of a close-on-exec pipe: it writes its execvp errno there. The parent's
     * read of the other end says whether CMD ran at all (EOF: the exec succeeded). */
    int exec_err_fd;
    int exec_failed; /* CMD could not be run: the child said why, nothing more to say */
    uint64_t start_ms, stopping_ms, exited_ms;
    int stopping;      /* a signal, the duration or CMD's exit: no new sessions */
    _Atomic int abort; /* the stream threads give up */
    struct pp_image **images;
    size_t image_count, image_cap;
    uint64_t skipped;    /* processes resumed but not recorded (stopping, or too many) */
    uint64_t refused;    /* connections from outside the tree */
    uint64_t failed;     /* processes whose session or resume failed while they lived */
    uint64_t incomplete; /* processes other than CMD whose trace was cut */
    uint64_t names_frames, names_named; /* cut traces' frames to name, and named from files */
    struct rlimit nofile;               /* the fd limit CMD inherits (ours is raised) */
    pthread_mutex_t tid_lock;
    uint64_t *tids; /* open-addressing set of thread ids seen (0 = empty) */
    size_t tid_count;
    uint64_t last_progress;
    int tty;
};

#define PP_RECORD_MAX_SEGMENTS 64

/*
 * The agent numbers its modules from 1 in every image, and its rundown (ModuleDCEnd,
 * MethodDCEndVerbose) says those numbers: in a process's trace joined from several images, image
 * 2's module 1 was image 1's too, and TraceEvent labelled image 2's functions with image 1's
 * module (bash!pp_workload_fn_c for the exec'd program's function). The join makes them unique:
 * segment k's agent ids (below 2^32) get k in the bits from 48 up, above any user-space address.
 * The runtime's module ids (the addresses of its Module objects, which its other events carry
 * too) are left alone.
 */
#define PP_RECORD_IMAGE_MODULE_SHIFT 48

/* The ModuleID's offset in a rundown event the agent writes, or -1 for any other event. */
static int
pp_record_module_id_at(const struct nt_event *ev)
{
    if (strcmp(ev->desc->provider, NT_PROVIDER_RUNDOWN) != 0) {
        return -1;
    }
    if (ev->desc->event_id == 154 && ev->payload_size >= 8) { /* ModuleDCEnd: ModuleID first */
        return 0;
    }
    if (ev->desc->event_id == 144 && ev->payload_size >= 16) { /* MethodDCEndVerbose: second */
        return 8;
    }
    return -1;
}

/* Segment k's copy of ev's payload in buf with its agent module id made the trace's own
 * (PP_RECORD_IMAGE_MODULE_SHIFT); ev is left as it is when there is none to change. */
static void
pp_record_image_module_id(struct nt_event *ev, int k, uint8_t *buf)
{
    int at = k > 0 ? pp_record_module_id_at(ev) : -1;
    uint64_t id = 0;
    int b;

    if (at < 0 || ev->payload_size > NT_MAX_PAYLOAD) {
        return;
    }
    for (b = 7; b >= 0; b--) {
        id = id << 8 | ev->payload[at + b];
    }
    if (id > UINT32_MAX) {
        return; /* the runtime's */
    }
    id |= (uint64_t)k << PP_RECORD_IMAGE_MODULE_SHIFT;
    memcpy(buf, ev->payload, ev->payload_size);
    for (b = 0; b < 8; b++) {
        buf[at + b] = (uint8_t)(id >> (8 * b));
    }
    ev->payload = buf;
}

/*
 * Joins the segment traces of one process (an image per exec) into `out`: every event of each,
 * in order, through the nettrace reader and writer, with the first segment's header. Timestamps
 * are the agent's monotonic clock in every segment, so they stay comparable. A segment that ends
 * early (cut) contributes what it holds. names (NULL: none) takes every event: a cut trace's
 * process never wrote its rundown, so the frames it left unnamed are named from its modules'
 * files at the end (cli/names.h), what that did in *st. Returns 0 or a negative errno.
 */
static int
pp_record_join(const char *const *in, int n, int ofd, struct pp_names *names,
               struct pp_names_stats *st)
{
    struct nt_writer *w = NULL;
    struct nt_sink sink;
    uint8_t *payload = n > 1 ? malloc(NT_MAX_PAYLOAD) : NULL;
    int err = n > 1 && payload == NULL ? -ENOMEM : 0, i;

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

            nt_writer_options_from_info(&o, info);
            err = nt_writer_new(&o, &sink, &w);
            if (names != NULL) {
                pp_names_set_start(names, info);
            }
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
                pp_record_image_module_id(&ev, i, payload);
                err = nt_writer_write(w, &ev);
            }
            if (err == 0 && names != NULL) {
                err = pp_names_event(names, &ev);
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
    if (err == 0 && w != NULL && names != NULL && pp_names_wanted(names)) {
        err = pp_names_resolve(names, st);
        err = err > 0 ? pp_names_write(names, st, w) : err;
    }
    if (err == 0 && w != NULL) {
        err = nt_writer_finish(w);
    }
    nt_writer_free(w);
    free(payload);
    return err;
}

/* Joins in[0, n) into path through a file beside it, renamed into place when complete. names and
 * st: pp_record_join()'s. */
static int
pp_record_join_into(const char *const *in, int n, const char *path, struct pp_names *names,
                    struct pp_names_stats *st)
{
    struct pp_output o;
    char why[PATH_MAX + 64];
    int err = pp_output_open(&o, path, NULL, 0, why, sizeof(why));

    if (err == 0) {
        err = pp_record_join(in, n, o.fd, names, st);
    }
    if (err == 0) {
        err = pp_output_commit(&o, why, sizeof(why));
    }
    pp_output_abort(&o);
    return err;
}

static void
pp_record_usage(FILE *out)
{
    fprintf(out, "usage: pipeprof record [--mode cpu|wall] [--hz N] [--duration S] [-o FILE]\n"
                 "                       [--format F] [--no-children] [-q] [-v] -- CMD [ARGS...]\n"
                 "\n"
                 "Runs CMD with the pipeprof agent preloaded and records its native call stacks,\n"
                 "and those of every process it starts, from their first instruction until CMD\n"
                 "exits, Ctrl-C, or the duration ends. CMD's standard input, output and error are\n"
                 "its own; pipeprof writes only to stderr. At the end it prints the samples,\n"
                 "effective rate, losses and top 10 functions of all processes together.\n"
                 "\n"
                 "options:\n"
                 "  --mode cpu|wall    cpu: CPU time of each thread (default); wall: every thread\n"
                 "                     at the interval, running or waiting\n"
                 "  --hz N             samples per second and thread, 1-1000 (default 100; up to\n"
                 "                     the kernel's tick rate CPU-time timers take them, above it\n"
                 "                     perf_event, where the kernel allows it)\n"
                 "  --duration S       stop recording after S seconds (CMD runs on to its end)\n"
                 "  -o, --output FILE  default pipeprof.nettrace, or pipeprof.<format extension>\n"
                 "  --format F         nettrace (default), or a `pipeprof convert` format:\n"
                 "                     folded, perf, speedscope, pprof, chromium\n"
                 "  --no-children      record CMD's process only (through its execs)\n"
                 "  -q, --quiet        no live line and no summary\n"
                 "  -v, --verbose      the full summary and the top functions, a line for each\n"
                 "                     process's file and each process that could not be\n"
                 "                     recorded (else one summary line that counts them)\n"
                 "  -h, --help         this text\n"
                 "\n"
                 "What is followed: CMD's process through exec (env, nice, sh -c 'exec ...',\n"
                 "version-manager shims: one trace covers every image it runs), and every process\n"
                 "CMD's tree starts, by exec or by fork (a forked child that does not exec within\n"
                 "a few milliseconds is recorded from then on). nettrace holds one process:\n"
                 "-o X.nettrace is CMD's trace, and each other process with samples gets\n"
                 "X.<pid>.nettrace beside it (X.<pid>-2.nettrace, -3, ... for later processes\n"
                 "of the recording that got a pid already used; processes without samples\n"
                 "leave no file; the summary counts them, but not one that changed to another\n"
                 "uid). Other formats hold every process in the one output file. The recording\n"
                 "ends when CMD exits; processes it left running are no longer recorded and run\n"
                 "on.\n"
                 "\n"
                 "exit status: always CMD's (128+N when a signal N ended it; a problem with the\n"
                 "trace is said on stderr); 1 when CMD could not be started; 2 for a usage error.\n"
                 "\n"
                 "environment: PIPEPROF_LIBRARY overrides the agent library (default: lib/\n"
                 "libpipeprof.so next to the directory of this program).\n");
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

#if defined(__SANITIZE_THREAD__)
#define PP_RECORD_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PP_RECORD_TSAN 1
#endif
#endif

#ifdef PP_RECORD_TSAN
static int
pp_record_find_tsan(struct dl_phdr_info *info, size_t size, void *data)
{
    char *out = data;

    (void)size;
    if (strstr(info->dlpi_name, "/libtsan.so") == NULL) {
        return 0;
    }
    snprintf(out, PATH_MAX, "%s", info->dlpi_name);
    return 1;
}
#endif

/*
 * A ThreadSanitizer build: the agent (instrumented, it needs libtsan) runs in an uninstrumented
 * CMD only if the runtime comes right after it in LD_PRELOAD. Preloaded alone, libtsan comes
 * after libc, so libc's functions are found before its interceptors (it never learns of the
 * agent's threads), and it resolves its own sigaction to the agent's interposer (host/signals.c),
 * which, instrumented, it calls during its initialisation: SIGSEGV in __tsan_func_entry. Before
 * the agent, the runtime's lookups of the next definition find the agent's interposers: the same.
 * After it, the order is that of an instrumented program (the agent, libtsan, libc). Appends
 * ":runtime" to lib (cap bytes); 0 or -ENAMETOOLONG. Other builds: 0, lib unchanged.
 */
static int
pp_record_add_sanitizer(char *lib, size_t cap)
{
#ifdef PP_RECORD_TSAN
    char tsan[PATH_MAX] = "";
    size_t used = strlen(lib);

    if (dl_iterate_phdr(pp_record_find_tsan, tsan) == 0) {
        return 0; /* linked statically: nothing to add */
    }
    if ((size_t)snprintf(lib + used, cap - used, ":%s", tsan) >= cap - used) {
        lib[used] = '\0';
        return -ENAMETOOLONG;
    }
#else
    (void)lib;
    (void)cap;
#endif
    return 0;
}

/* The providers every image's session gets: SampleProfiler at the mode and rate asked for, and
 * pipeprof's own events. */
static void
pp_record_providers(const struct pp_record *rc, char *out, size_t cap)
{
    snprintf(out, cap, "Microsoft-DotNETCore-SampleProfiler:0:4:mode=%s;hz=%u,pipeprof:0:4",
             rc->mode, rc->hz);
}

static void
pp_record_spawn_child(struct pp_record *rc, const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    char port[PATH_MAX + 32], pid[32], lazy[320], *preload;
    size_t need;
    int err;

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
    /* The whole tree connects (each exec'd or forked process is a recording of its own), or
     * with --no-children only this pid, through every exec. */
    if (rc->children) {
        unsetenv("PIPEPROF_TARGET_PID");
        setenv("PIPEPROF_FOLLOW_FORKS", "1", 1);
    } else {
        setenv("PIPEPROF_TARGET_PID", pid, 1);
        unsetenv("PIPEPROF_FOLLOW_FORKS");
    }
    /* Every process but CMD's own starts its session by itself and connects only once it has a
     * sample (IPC_ADVERTISE_STREAM_FOLLOWS): most children of a build or a shell script take
     * none, and made two connections and a session for a trace that was dropped. */
    snprintf(lazy, sizeof(lazy), "%s:", pid);
    pp_record_providers(rc, lazy + strlen(lazy), sizeof(lazy) - strlen(lazy));
    setenv("PIPEPROF_RECORD_LAZY", lazy, 1);
    if (rc->tally[0] != '\0') {
        setenv("PIPEPROF_RECORD_TALLY", rc->tally, 1);
    } else {
        unsetenv("PIPEPROF_RECORD_TALLY"); /* an enclosing recording's */
    }
    /* This recording's, in place of an enclosing one's: what proves a daemon that a double fork
     * took out of the tree's ancestry (pp_record_has_token). */
    putenv(rc->token);
    unsetenv("PIPEPROF_RESUMED_PID"); /* one of an enclosing recording */
    /* A process's start is held until its session runs, not until a ResumeRuntime. */
    setenv("PIPEPROF_RESUME_AT_SESSION", "1", 1);
    /* The listen socket is private to this recording; CMD needs only the connect port. */
    setenv("PIPEPROF_DIAGNOSTIC_PORT", "", 1);
    if (rc->cfi_cache[0] != '\0') {
        setenv("PIPEPROF_CFI_CACHE", rc->cfi_cache, 1);
    } else {
        unsetenv("PIPEPROF_CFI_CACHE"); /* an enclosing recording's */
    }
    execvp(rc->cmd[0], rc->cmd);
    err = errno;
    fprintf(stderr, "pipeprof record: cannot run %s: %s\n", rc->cmd[0], strerror(err));
    if (rc->exec_err_fd >= 0) {
        (void)!write(rc->exec_err_fd, &err, sizeof(err));
    }
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

/* The processes recorded so far: distinct pids among the images. */
static size_t
pp_record_process_count(const struct pp_record *rc)
{
    size_t i, j, n = 0;

    for (i = 0; i < rc->image_count; i++) {
        for (j = 0; j < i && rc->images[j]->pid != rc->images[i]->pid; j++) {
        }
        n += j == i;
    }
    return n;
}

static void
pp_record_progress(struct pp_record *rc, int final)
{
    uint64_t now = ipc_client_ms(), s, samples = 0, lost = 0, bytes = 0;
    size_t i, threads;

    if (!rc->tty || rc->quiet || (!final && now - rc->last_progress < 250)) {
        return;
    }
    rc->last_progress = now;
    for (i = 0; i < rc->image_count; i++) {
        samples += atomic_load(&rc->images[i]->samples);
        lost += atomic_load(&rc->images[i]->lost);
        bytes += atomic_load(&rc->images[i]->bytes);
    }
    pthread_mutex_lock(&rc->tid_lock);
    threads = rc->tid_count;
    pthread_mutex_unlock(&rc->tid_lock);
    s = (now - rc->start_ms) / 1000;
    fprintf(stderr,
            "\r[%02llu:%02llu:%02llu] processes %zu  samples %llu  threads %zu  lost %llu  "
            "%.2f MB   %s",
            (unsigned long long)(s / 3600), (unsigned long long)(s / 60 % 60),
            (unsigned long long)(s % 60), pp_record_process_count(rc), (unsigned long long)samples,
            threads, (unsigned long long)lost, (double)bytes / 1e6, final ? "\n" : "");
}

static void
pp_record_count_thread(struct pp_record *rc, uint64_t tid)
{
    size_t i;

    pthread_mutex_lock(&rc->tid_lock);
    if (rc->tids == NULL || tid == 0 || rc->tid_count * 2 >= PP_RECORD_MAX_THREADS) {
        goto out;
    }
    for (i = (size_t)(tid * 0x9E3779B97F4A7C15ULL) & (PP_RECORD_MAX_THREADS - 1); rc->tids[i] != 0;
         i = (i + 1) & (PP_RECORD_MAX_THREADS - 1)) {
        if (rc->tids[i] == tid) {
            goto out;
        }
    }
    rc->tids[i] = tid;
    rc->tid_count++;
out:
    pthread_mutex_unlock(&rc->tid_lock);
}

struct pp_stream_ctx {
    struct pp_record *rc;
    struct pp_image *img;
};

#define PP_RECORD_PENDING_MAX (1u << 20) /* a stream this long gets its file anyway */

/* Creates the image's segment file and writes what was pending into it. Returns 0 or -errno. */
static int
pp_record_segment_open(struct pp_image *img)
{
    int err = 0;

    img->file_fd = open(img->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (img->file_fd < 0) {
        return -errno;
    }
    img->has_file = 1;
    if (img->pending_len > 0 &&
        write(img->file_fd, img->pending, img->pending_len) != (ssize_t)img->pending_len) {
        err = -EIO;
    }
    free(img->pending);
    img->pending = NULL;
    img->pending_len = img->pending_cap = 0;
    return err;
}

/* Keeps n bytes of the stream: in the segment file, or pending until the image's first sample.
 * Returns 0 or -errno. */
static int
pp_record_keep(struct pp_image *img, const void *buf, size_t n)
{
    if (img->file_fd < 0) {
        if (pp_grow_array((void **)&img->pending, &img->pending_cap, img->pending_len + n, 1) !=
            0) {
            return -ENOMEM;
        }
        memcpy(img->pending + img->pending_len, buf, n);
        img->pending_len += n;
        if (atomic_load(&img->samples) == 0 && img->pending_len < PP_RECORD_PENDING_MAX) {
            return 0;
        }
        return pp_record_segment_open(img);
    }
    return write(img->file_fd, buf, n) == (ssize_t)n ? 0 : -EIO;
}

/* The reader's source: copies the stream into the segment file as the reader pulls it. */
static ssize_t
pp_record_read(void *ctx, void *buf, size_t len)
{
    struct pp_stream_ctx *sc = ctx;
    struct pp_image *img = sc->img;

    for (;;) {
        struct pollfd pfd = { img->stream_fd, POLLIN, 0 };
        ssize_t n;
        int r;

        if (atomic_load(&sc->rc->abort)) {
            return -ETIMEDOUT;
        }
        r = poll(&pfd, 1, 100);
        if (r <= 0) {
            continue; /* a timeout, or EINTR (the main thread's signals) */
        }
        n = read(img->stream_fd, buf, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -errno;
        }
        if (n > 0 && pp_record_keep(img, buf, (size_t)n) != 0) {
            return -EIO;
        }
        atomic_fetch_add(&img->bytes, (uint64_t)n);
        return n;
    }
}

/*
 * An event only the .NET runtime writes: pipeprof's own rundown uses the runtime's rundown
 * provider too, for ModuleDCEnd (154), MethodDCEndVerbose (144) and the rundown's bounds (146,
 * 148), so those say nothing.
 */
static int
pp_record_is_runtime_event(const struct nt_event_desc *d)
{
    if (strcmp(d->provider, "Microsoft-Windows-DotNETRuntime") == 0) {
        return 1;
    }
    return strcmp(d->provider, "Microsoft-Windows-DotNETRuntimeRundown") == 0 &&
           d->event_id != 144 && d->event_id != 146 && d->event_id != 148 && d->event_id != 154;
}

/*
 * A stream thread: reads one image's session to its end tag, counting samples, threads and
 * losses for the live line. The end tag ends it, not the socket's end: a fork()ed child may
 * hold a copy of its parent's connection.
 */
static void *
pp_record_stream_main(void *arg)
{
    struct pp_stream_ctx *sc = arg;
    struct pp_image *img = sc->img;
    struct nt_source src = { pp_record_read, sc };
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
            /* CPU mode's markers (stackless, or tagged with the stack a thread waited in) are
             * not samples. */
            if (ev.stack_depth != 0 &&
                !(ev.payload_size >= 8 && ev.payload[4] == (NT_SAMPLE_WAIT_TAG & 0xff) &&
                  ev.payload[5] == (NT_SAMPLE_WAIT_TAG >> 8 & 0xff))) {
                atomic_fetch_add(&img->samples, 1);
                pp_record_count_thread(sc->rc, ev.thread_id);
            }
        } else if (strcmp(ev.desc->provider, "pipeprof") == 0) {
            atomic_store(&img->agent, 1); /* pipeprof's agent answered, not a .NET runtime */
        } else if (pp_record_is_runtime_event(ev.desc)) {
            atomic_store(&img->runtime, 1);
        }
        if (strcmp(ev.desc->provider, "pipeprof") == 0 && ev.payload_size >= 16 &&
            strcmp(ev.desc->name, "LostSamples") == 0) {
            uint64_t lost = 0;
            int i;

            for (i = 7; i >= 0; i--) {
                lost = lost << 8 | ev.payload[8 + i];
            }
            atomic_fetch_add(&img->lost, lost);
        }
    }
    if (r != NULL) {
        nt_reader_get_stats(r, &stats);
        atomic_fetch_add(&img->lost, stats.lost_events);
    }
    if (err < 0) {
        img->cut = 1;
        if (err == -EBADMSG && r != NULL) {
            nt_reader_get_error(r, &rerr);
            snprintf(img->why, sizeof(img->why), "offset %llu: %s", (unsigned long long)rerr.offset,
                     rerr.reason != NULL ? rerr.reason : "malformed trace");
        } else if (err == -ETIMEDOUT) {
            snprintf(img->why, sizeof(img->why), "the stream did not end within %d s",
                     PP_RECORD_STOP_WAIT_MS / 1000);
        } else {
            snprintf(img->why, sizeof(img->why), "%s", strerror(-err));
        }
    }
    /* A child's image without samples leaves no file (the files below leave it out anyway);
     * CMD's own images are all kept, for its exec chain's trace. */
    if (img->file_fd < 0 &&
        (atomic_load(&img->samples) > 0 || img->pid == (uint64_t)sc->rc->child)) {
        err = pp_record_segment_open(img);
        if (err != 0 && !img->cut) {
            img->cut = 1;
            snprintf(img->why, sizeof(img->why), "its segment file: %s", strerror(-err));
        }
    }
    free(img->pending);
    img->pending = NULL;
    nt_reader_free(r);
    free(sc);
    atomic_store(&img->done, 1);
    return NULL;
}

static int
pp_record_has_pid(const struct pp_record *rc, uint64_t pid)
{
    size_t i;

    for (i = 0; i < rc->image_count; i++) {
        if (rc->images[i]->pid == pid) {
            return 1;
        }
    }
    return 0;
}

static struct pp_image *
pp_record_find_image(struct pp_record *rc, uint64_t pid, const uint8_t cookie[16])
{
    size_t i;

    for (i = rc->image_count; i > 0; i--) {
        struct pp_image *img = rc->images[i - 1];

        if (img->pid == pid && memcmp(img->cookie, cookie, 16) == 0) {
            return img;
        }
    }
    return NULL;
}

/*
 * Whether a failed request is worth a word: not when the process is exiting or gone (a fork()ed
 * child that ended just as its agent connected), only when a live process did not answer.
 */
static int
pp_record_worth_saying(uint64_t pid)
{
    char buf[256];
    const char *after = ipc_process_stat((int)pid, buf, sizeof(buf));
    char state = '?';

    return after != NULL && sscanf(after + 1, " %c", &state) == 1 && state != 'Z' && state != 'X';
}

/*
 * A request to process pid failed (err: negative errno, or positive with the HRESULT in r):
 * counted when the process still lives, and said on its own line only with -v. The host's
 * stderr is shared with CMD: a shell's hundreds of short children must not fill it.
 */
static void
pp_record_failed(struct pp_record *rc, const char *what, uint64_t pid, int err,
                 const struct ipc_response *r)
{
    if (err < 0 && !pp_record_worth_saying(pid)) {
        return; /* it exited as it started: nothing was lost */
    }
    rc->failed++;
    if (rc->verbose) {
        fprintf(stderr, "pipeprof record: %s of process %llu failed: %s\n", what,
                (unsigned long long)pid, err > 0 ? pp_diag_hr_name(r->hresult) : strerror(-err));
    }
}

/* Sends a request that is answered and then closes fd. Returns 0 or -EPROTO (counted). */
static int
pp_record_command(struct pp_record *rc, int fd, const uint8_t *msg, size_t len, const char *what,
                  uint64_t pid)
{
    static uint8_t buf[IPC_MAX_MESSAGE + 1];
    struct ipc_response r;
    int err = pp_diag_request(fd, msg, len, &r, buf, sizeof(buf), PP_RECORD_REQUEST_MS);

    close(fd);
    if (err != 0) {
        pp_record_failed(rc, what, pid, err, &r);
        return -EPROTO;
    }
    return 0;
}

static void
pp_record_resume(struct pp_record *rc, int fd, uint64_t pid)
{
    uint8_t msg[IPC_HEADER_SIZE];

    ipc_header_encode(msg, IPC_HEADER_SIZE, IPC_SET_PROCESS, IPC_PROC_RESUME_RUNTIME);
    (void)pp_record_command(rc, fd, msg, sizeof(msg), "ResumeRuntime", pid);
}

/* StopTracing on fd; the answer comes after the stream's end and is not awaited. */
static void
pp_record_send_stop(struct pp_image *img, int fd)
{
    uint8_t msg[28];

    ipc_stop_encode(msg, img->session);
    if (ipc_client_send(fd, msg, sizeof(msg)) < 0) {
        close(fd); /* the process is gone or exec'd: its stream ends by itself */
        fd = -1;
    }
    img->stop_fd = fd;
}

/*
 * A new image connected: starts its session on this connection and its stream thread. The
 * image stays held (suspend port) until ResumeRuntime on its next connection. One whose
 * advertise says its stream follows (IPC_ADVERTISE_STREAM_FOLLOWS) started its session by
 * itself: its answer is read as a CollectTracing's, with no request sent.
 */
static int
pp_record_start_image(struct pp_record *rc, struct pp_image *img, int fd, uint16_t flags)
{
    static uint8_t buf[IPC_MAX_MESSAGE + 1];
    struct ipc_collect req;
    struct ipc_response r;
    struct pp_stream_ctx *sc = NULL;
    char spec[256];
    const char *why = NULL;
    int err, n;

    if (flags & IPC_ADVERTISE_STREAM_FOLLOWS) {
        err = pp_diag_response(fd, &r, buf, sizeof(buf), PP_RECORD_REQUEST_MS);
        goto answered;
    }
    pp_record_providers(rc, spec, sizeof(spec));
    err = pp_diag_collect_init(&req, spec, &why);
    if (err < 0) {
        fprintf(stderr, "pipeprof record: %s\n", why != NULL ? why : strerror(-err));
        close(fd);
        return err;
    }
    n = ipc_collect_encode(&req, buf, sizeof(buf));
    err = n < 0 ? n
                : pp_diag_request(fd, buf, (size_t)n, &r, buf, sizeof(buf), PP_RECORD_REQUEST_MS);
    ipc_collect_fini(&req);
answered:
    if (err != 0) {
        pp_record_failed(rc, "CollectTracing", img->pid, err, &r);
        close(fd);
        return -EPROTO;
    }
    img->session = r.value;
    img->stream_fd = fd;
    if (img->root) {
        snprintf(img->path, sizeof(img->path), "%s", rc->trace);
    } else {
        snprintf(img->path, sizeof(img->path), "%s/segment-%zu.nettrace", rc->dir, rc->image_count);
    }
    /* A child's segment file waits for its first sample (pp_record_keep). */
    err = img->pid == (uint64_t)rc->child ? pp_record_segment_open(img) : 0;
    sc = malloc(sizeof(*sc));
    if (err != 0 || sc == NULL) {
        err = err != 0 ? err : -ENOMEM;
        fprintf(stderr, "pipeprof record: %s: %s\n", img->path, strerror(-err));
        goto fail;
    }
    sc->rc = rc;
    sc->img = img;
    err = -pthread_create(&img->thread, NULL, pp_record_stream_main, sc);
    if (err != 0) {
        fprintf(stderr, "pipeprof record: no thread for process %llu: %s\n",
                (unsigned long long)img->pid, strerror(-err));
        goto fail;
    }
    img->thread_started = 1;
    return 0;
fail:
    free(sc);
    close(fd);
    img->stream_fd = -1;
    return err;
}

/*
 * Whether pid belongs to the recorded tree: CMD's process group, or a descendant of ours (the
 * chain of parents through /proc): 1, 0, or -1 when the process is gone. The socket is open to
 * every uid, because the tree may change credentials (setpriv, su, daemons dropping privileges);
 * this is what keeps others out.
 */
static int
pp_record_in_tree(const struct pp_record *rc, pid_t pid)
{
    int depth;

    for (depth = 0; depth < 256 && pid > 1; depth++) {
        char buf[512];
        const char *after_comm;
        long ppid = 0, pgrp = 0;
        char state = '?';

        if (pid == getpid()) {
            return 1;
        }
        after_comm = ipc_process_stat(pid, buf, sizeof(buf));
        if (after_comm == NULL && depth == 0) {
            return -1; /* the process is gone already (a short fork()ed child) */
        }
        if (after_comm == NULL ||
            sscanf(after_comm + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3) {
            return 0;
        }
        if ((state == 'X' || state == 'Z') && depth == 0) {
            return -1; /* exiting: its parent and group may already read as 0 and -1 */
        }
        if (pgrp == (long)rc->child) {
            return 1;
        }
        pid = (pid_t)ppid;
    }
    return 0;
}

/*
 * Whether process pid's initial environment (/proc/PID/environ: what it was exec'd with, or its
 * parent's at a fork) holds this recording's token: 1, or 0 (not there, unreadable, gone).
 * The proof of a daemon that left the tree's ancestry: a double fork's middle parent exits, its
 * child is reparented to init or a subreaper and in a session of its own, and neither its
 * parents nor its process group lead back to CMD any more. Only a peer of record's own uid is
 * asked: such a process could ptrace one of the tree's and connect from it anyway (reading the
 * token takes the same access), and another uid's must still descend from record.
 */
static int
pp_record_has_token(const struct pp_record *rc, pid_t pid)
{
    char path[64], buf[8192];
    size_t len = strlen(rc->token), have = 0, i;
    int fd, found = 0;

    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    /* Variables are NUL-terminated: a window of whole ones, the last partial one carried over. */
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof(buf) - have);
        size_t start = 0;

        if (n <= 0) {
            break;
        }
        have += (size_t)n;
        for (i = 0; i < have && !found; i++) {
            if (buf[i] == '\0') {
                found = i - start == len && memcmp(buf + start, rc->token, len) == 0;
                start = i + 1;
            }
        }
        if (found) {
            break;
        }
        if (start == 0 && have == sizeof(buf)) {
            have = 0; /* a variable longer than the window: not the token */
            continue;
        }
        memmove(buf, buf + start, have - start);
        have -= start;
    }
    close(fd);
    return found;
}

/*
 * Every advertised connection comes here: the first of an image starts its session, the next
 * resumes it, later ones are kept for StopTracing (the agent connects again after each one it
 * used, so an image has at most one waiting). An image whose advertise says it resumes itself
 * once its session runs (IPC_ADVERTISE_RESUMES_AT_SESSION: pipeprof's agent, not a .NET
 * runtime's own server) gets no ResumeRuntime after a session that started: one connection
 * fewer per process.
 */
static void
pp_record_on_connection(struct pp_record *rc, int fd, uint64_t pid, const uint8_t cookie[16],
                        uint16_t flags)
{
    struct pp_image *img = pp_record_find_image(rc, pid, cookie);
    int streams = (flags & IPC_ADVERTISE_STREAM_FOLLOWS) != 0;

    if (streams && img != NULL) {
        close(fd); /* one stream per image: a second is a confused or hostile peer */
        return;
    }
    if (img == NULL) {
        /* A stream that follows is taken after the stop too: the process ran, and sampled,
         * while the recording did (it is stopped as soon as its spare connection comes). */
        if ((rc->stopping && !streams) || rc->image_count >= PP_RECORD_MAX_IMAGES ||
            pp_grow_array((void **)&rc->images, &rc->image_cap, rc->image_count + 1,
                          sizeof(*rc->images)) != 0 ||
            (img = calloc(1, sizeof(*img))) == NULL) {
            rc->skipped++;
            if (streams) {
                close(fd); /* it ends its session and goes on: it was never held */
            } else {
                pp_record_resume(rc, fd, pid); /* never left waiting */
            }
            return;
        }
        img->pid = pid;
        img->start = pp_proc_start_ticks((long)pid);
        memcpy(img->cookie, cookie, 16);
        img->stream_fd = img->file_fd = img->idle_fd = img->stop_fd = -1;
        img->root = pid == (uint64_t)rc->child && !pp_record_has_pid(rc, pid);
        rc->images[rc->image_count++] = img;
        img->need_resume = !streams; /* a lazy image was never held */
        if (pp_record_start_image(rc, img, fd, flags) != 0) {
            atomic_store(&img->done, 1); /* nothing recorded; the next connection resumes it */
        } else if (flags & IPC_ADVERTISE_RESUMES_AT_SESSION) {
            img->need_resume = 0;
        }
        return;
    }
    if (img->need_resume) {
        img->need_resume = 0;
        pp_record_resume(rc, fd, pid);
    } else if (rc->stopping && img->stop_fd < 0 && !atomic_load(&img->done)) {
        pp_record_send_stop(img, fd);
    } else {
        /* Kept, also for an ended session: a closed connection makes the agent connect again
         * at once, and it waits quietly on an open one. */
        if (img->idle_fd >= 0) {
            close(img->idle_fd);
        }
        img->idle_fd = fd;
    }
}

/* No new sessions from now on; every running one is asked to stop. */
static void
pp_record_stop_all(struct pp_record *rc)
{
    size_t i;

    if (rc->stopping) {
        return;
    }
    rc->stopping = 1;
    rc->stopping_ms = ipc_client_ms();
    for (i = 0; i < rc->image_count; i++) {
        struct pp_image *img = rc->images[i];

        if (!atomic_load(&img->done) && img->idle_fd >= 0 && img->stop_fd < 0 &&
            img->thread_started) {
            pp_record_send_stop(img, img->idle_fd);
            img->idle_fd = -1;
        }
    }
}

/* Releases what an image no longer needs once its stream has ended: the stream thread (joined),
 * its socket and segment file, and the kept connection once its process has gone (the peer hung
 * up). A build's thousands of short processes must not hold a thread and three fds each. */
static void
pp_record_sweep(struct pp_record *rc)
{
    size_t i;

    for (i = 0; i < rc->image_count; i++) {
        struct pp_image *img = rc->images[i];
        struct pollfd pfd = { img->idle_fd, POLLIN, 0 };

        if (!atomic_load(&img->done)) {
            continue;
        }
        if (img->thread_started == 1) {
            pthread_join(img->thread, NULL);
            img->thread_started = 2; /* joined; its segment stays for the files */
        }
        if (img->file_fd >= 0) {
            close(img->file_fd);
            img->file_fd = -1;
        }
        if (img->stream_fd >= 0) {
            close(img->stream_fd);
            img->stream_fd = -1;
        }
        if (img->idle_fd >= 0 && poll(&pfd, 1, 0) > 0) {
            close(img->idle_fd);
            img->idle_fd = -1;
        }
    }
}

static int
pp_record_all_done(const struct pp_record *rc)
{
    size_t i;

    for (i = 0; i < rc->image_count; i++) {
        if (!atomic_load(&rc->images[i]->done)) {
            return 0;
        }
    }
    return 1;
}

/*
 * The recording: accepts every process's connections until CMD has exited (or the recording
 * is stopped) and every stream has ended. Returns 0, or -ENOENT when CMD never connected.
 */
static int
pp_record_run(struct pp_record *rc)
{
    uint64_t deadline = ipc_client_ms() + PP_RECORD_CONNECT_MS, last_sweep = 0;

    for (;;) {
        struct pollfd pfd[2] = { { rc->listen_fd, POLLIN, 0 },
                                 { rc->child_done ? -1 : rc->child_fd, POLLIN, 0 } };
        uint64_t now, pid;
        uint8_t cookie[16];
        uint16_t flags;
        int fd;

        if (poll(pfd, 2, 50) > 0 && (pfd[0].revents & POLLIN) &&
            ipc_client_accept_advertise_flags(rc->listen_fd, 50, 0, &fd, cookie, &pid, &flags) ==
                    0) {
            struct ucred peer;
            socklen_t len = sizeof(peer);

            int in = 0; /* a peer that is not the pid it advertises is refused too */

            /* An image's later connections (ResumeRuntime's, the one kept for StopTracing) skip
             * the /proc walk: its first one passed it, and only that process knows the cookie
             * (16 random bytes of its agent; a fork()ed copy that knows it has another pid). */
            if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 &&
                (uint64_t)peer.pid == pid) {
                in = pp_record_find_image(rc, pid, cookie) != NULL
                             ? 1
                             : pp_record_in_tree(rc, peer.pid);
                /* A child's stream that follows is often sent at its exit, its first sample in
                 * its last drain: the process may be gone before its /proc entry is read. One of
                 * this user's is taken (it could do as much to this process anyway); another
                 * user's cannot be placed in the tree any more. */
                if (in == -1 && (flags & IPC_ADVERTISE_STREAM_FOLLOWS) && peer.uid == geteuid()) {
                    in = 1;
                }
                if (in == 0 && peer.uid == geteuid() && pp_record_has_token(rc, peer.pid)) {
                    in = 1;
                }
            }
            if (in != 1) {
                if (in == 0 && rc->refused++ == 0) {
                    char stat[512];
                    const char *what = ipc_process_stat((int)pid, stat, sizeof(stat));

                    fprintf(stderr,
                            "pipeprof record: refused a connection from process %llu, which is "
                            "not in the recorded tree (peer %ld; stat%s)\n",
                            (unsigned long long)pid, (long)peer.pid,
                            what != NULL ? what + 1 : " gone");
                }
                close(fd);
            } else {
                pp_record_on_connection(rc, fd, pid, cookie, flags);
            }
        }
        pp_record_reap(rc, 0);
        pp_record_progress(rc, 0);
        now = ipc_client_ms();
        if (now - last_sweep >= 100) {
            pp_record_sweep(rc); /* a long tree of short processes must not run out of fds */
            last_sweep = now;
        }
        if (rc->image_count == 0 && (rc->child_done || now >= deadline || pp_record_signal)) {
            char killed[64];

            if (rc->exec_failed) {
                /* the child said "cannot run": not a program that kept the agent out */
            } else if (pp_record_signal != 0) {
                fprintf(stderr, "pipeprof record: interrupted before %s connected\n", rc->cmd[0]);
            } else if (rc->child_done && WIFSIGNALED(rc->child_status)) {
                fprintf(stderr,
                        "pipeprof record: %s did not load the agent (it was %s first): is it "
                        "statically linked, setuid, or did it clear LD_PRELOAD? Nothing was "
                        "recorded.\n",
                        rc->cmd[0], pp_diag_killed_text(rc->child_status, killed, sizeof(killed)));
                rc->killed_said = 1;
            } else {
                fprintf(stderr,
                        "pipeprof record: %s did not load the agent (%s): is it statically "
                        "linked, setuid, or did it clear LD_PRELOAD? Nothing was recorded.\n",
                        rc->cmd[0], rc->child_done ? "it exited first" : "no connection");
            }
            return -ENOENT;
        }
        /* CMD's exit ends the recording: processes it left running are stopped being
         * recorded, and run on. */
        if (pp_record_signal != 0 || rc->child_done ||
            (rc->duration > 0 && now - rc->start_ms >= (uint64_t)(rc->duration * 1000))) {
            pp_record_stop_all(rc);
        }
        if (rc->stopping && pp_record_all_done(rc)) {
            return 0;
        }
        if (rc->stopping && now - rc->stopping_ms > PP_RECORD_STOP_WAIT_MS) {
            atomic_store(&rc->abort, 1); /* the threads end within one poll */
            while (!pp_record_all_done(rc)) {
                struct timespec ms = { 0, 10000000 };

                nanosleep(&ms, NULL);
            }
            return 0;
        }
    }
}

/*
 * The trace file of a process other than CMD's: X.<pid>.nettrace beside X.nettrace (X is the
 * output without a .nettrace suffix) for the first process of the recording that pid named, and
 * X.<pid>-<nth>.nettrace for the nth (a reused pid: pp_record_process_of). Without nettrace
 * output, process-<pid>[-<nth>].nettrace in the recording's directory, converted at the end.
 */
static void
pp_record_child_path(const struct pp_record *rc, uint64_t pid, unsigned nth, char *out, size_t cap)
{
    const char *base = rc->nettrace ? rc->output : rc->dir;
    char seq[16] = "";
    size_t len = strlen(base);

    if (nth > 1) {
        snprintf(seq, sizeof(seq), "-%u", nth);
    }
    if (!rc->nettrace) {
        snprintf(out, cap, "%s/process-%llu%s.nettrace", base, (unsigned long long)pid, seq);
        return;
    }
    if (len > 9 && strcmp(base + len - 9, ".nettrace") == 0) {
        len -= 9;
    }
    snprintf(out, cap, "%.*s.%llu%s.nettrace", (int)len, base, (unsigned long long)pid, seq);
}

/*
 * The first image of image i's process. An image is of the process of the latest earlier image
 * of its pid (an exec keeps the pid and the start time), unless both start times are known and
 * differ: then the pid was reused, by a process that started after that one ended (thread ids
 * share the pid space, which a program that creates threads fast wraps in seconds). An image
 * whose start could not be read as it connected (0: it was gone already, or /proc is not
 * mounted) is joined by its pid alone, as all were before start times were read. first[j] for
 * j < i is filled already.
 */
static size_t
pp_record_process_of(const struct pp_record *rc, const size_t *first, size_t i)
{
    const struct pp_image *img = rc->images[i];
    size_t j;

    for (j = i; j > 0; j--) {
        const struct pp_image *o = rc->images[j - 1];

        if (o->pid == img->pid) {
            return o->start != 0 && img->start != 0 && o->start != img->start ? i : first[j - 1];
        }
    }
    return i;
}

/* A process's trace file: its images' segments in order, joined. */
struct pp_record_file {
    uint64_t pid;
    uint64_t samples;
    unsigned nth; /* 1 + the files of processes before it that the same pid named (not CMD's) */
    int by_pid;   /* images joined although one's start time was unknown (by the pid alone) */
    char path[PATH_MAX];
};

/* A process of the tally: its pid and start time (0: not known). */
struct pp_record_tallied {
    uint64_t pid, start;
};

static int
pp_record_tallied_cmp(const void *a, const void *b)
{
    const struct pp_record_tallied *x = a, *y = b;

    if (x->pid != y->pid) {
        return x->pid < y->pid ? -1 : 1;
    }
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Whether an image of the recording is process pid started at start (either unknown: the pid
 * decides). */
static int
pp_record_has_process(const struct pp_record *rc, uint64_t pid, uint64_t start)
{
    size_t i;

    for (i = 0; i < rc->image_count; i++) {
        const struct pp_image *img = rc->images[i];

        if (img->pid == pid && (img->start == 0 || start == 0 || img->start == start)) {
            return 1;
        }
    }
    return 0;
}

/*
 * The processes that took no sample and therefore never connected (PIPEPROF_RECORD_LAZY): the
 * distinct processes of the tally, a pid and a start time each, that no image is (an exec chain
 * appends once per image, and a process whose other image sampled is counted with its file). By
 * the pid alone, two children a reused pid named counted once: 994 for 1000 children of a shell
 * loop beside a program that created threads fast (tids wrap the pid space, 32768 here), and 989
 * in a fresh-clone CI run's cli-record-commands.
 */
static size_t
pp_record_tally_count(const struct pp_record *rc)
{
    struct pp_record_tallied *seen = NULL;
    size_t n = 0, cap = 0, i, count = 0;
    FILE *f = rc->tally[0] != '\0' ? fopen(rc->tally, "re") : NULL;
    unsigned long long pid, start;
    char line[64];

    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        int got = sscanf(line, "%llu %llu", &pid, &start);

        if (got < 1) {
            continue;
        }
        start = got == 2 ? start : 0;
        if (pp_record_has_process(rc, pid, start) ||
            pp_grow_array((void **)&seen, &cap, n + 1, sizeof(*seen)) != 0) {
            continue;
        }
        seen[n].pid = pid;
        seen[n].start = start;
        n++;
    }
    fclose(f);
    if (n > 1) {
        qsort(seen, n, sizeof(*seen), pp_record_tallied_cmp);
    }
    for (i = 0; i < n; i++) {
        count += i == 0 || pp_record_tallied_cmp(&seen[i], &seen[i - 1]) != 0;
    }
    free(seen);
    return count;
}

/*
 * Says what naming a cut trace's frames from its modules' files did: for CMD's unless -q, for
 * another process's with -v, and counts them all for the summary (pp_record_process_counts).
 */
static void
pp_record_said_names(struct pp_record *rc, uint64_t pid, int root, const struct pp_names_stats *st)
{
    char line[1024];

    rc->names_frames += st->frames;
    rc->names_named += st->named;
    if ((root && !rc->quiet) || rc->verbose) {
        pp_names_describe(st, line, sizeof(line));
        fprintf(stderr, "pipeprof record: process %llu ended before its rundown: %s\n",
                (unsigned long long)pid, line);
    }
}

/*
 * Writes one trace per process: CMD's (its first image streamed into it already) and every
 * other process that has samples, each of its images' segments joined in order. Processes
 * without samples (a shell's short children) leave no file. Returns the number of files in
 * files[], or a negative errno.
 */
static int
pp_record_write_files(struct pp_record *rc, struct pp_record_file *files, size_t cap,
                      size_t *no_samples)
{
    const char **in = calloc(rc->image_count + 1, sizeof(*in));
    size_t *first = calloc(rc->image_count + 1, sizeof(*first));
    size_t i, j, n = 0;
    int err = 0;

    *no_samples = pp_record_tally_count(rc);
    if (in == NULL || first == NULL) {
        err = -ENOMEM;
        goto out;
    }
    for (i = 0; i < rc->image_count; i++) {
        first[i] = pp_record_process_of(rc, first, i);
    }
    for (i = 0; i < rc->image_count; i++) {
        struct pp_image *img = rc->images[i];
        uint64_t samples = 0;
        int images = 0, segs = 0, cut = 0, root = 0, unknown = 0;

        if (first[i] != i) {
            continue; /* this process was written with its first image */
        }
        for (j = i; j < rc->image_count; j++) {
            struct pp_image *o = rc->images[j];

            if (first[j] == i && o->thread_started) {
                if (o->has_file) {
                    in[segs++] = o->path;
                }
                images++;
                unknown |= o->start == 0;
                samples += atomic_load(&o->samples);
                cut |= o->cut;
                root |= o->root;
            }
        }
        if (images == 0) {
            continue;
        }
        if (!root && samples == 0) {
            (*no_samples)++;
            for (j = 0; j < (size_t)segs; j++) {
                unlink(in[j]);
            }
            continue;
        }
        if (segs == 0) {
            continue; /* its segment file could not be made: said at the stream's end */
        }
        if (n == cap) {
            err = -ENOSPC;
            goto out;
        }
        files[n].pid = img->pid;
        files[n].samples = samples;
        files[n].nth = 0;
        files[n].by_pid = images > 1 && unknown;
        if (root) {
            snprintf(files[n].path, sizeof(files[n].path), "%s", rc->trace);
        } else {
            files[n].nth = 1;
            for (j = 0; j < n; j++) {
                files[n].nth += files[j].pid == img->pid && files[j].nth > 0;
            }
            pp_record_child_path(rc, img->pid, files[n].nth, files[n].path, sizeof(files[n].path));
        }
        /* Several images are joined into one trace, and a stream that was cut (a process
         * killed) is rewritten the same way, so that every file ends with its end tag. */
        if (segs == 1 && !cut && !root && rename(in[0], files[n].path) == 0) {
            n++;
            continue;
        }
        if (segs > 1 || cut || !root) {
            struct pp_names *names = NULL;
            struct pp_names_stats st;

            memset(&st, 0, sizeof(st));
            if (cut && pp_names_new(&names) != 0) {
                names = NULL; /* out of memory: the trace is kept, its frames unnamed */
            }
            err = pp_record_join_into(in, segs, files[n].path, names, &st);
            pp_names_free(names);
            if (err == 0 && st.frames > 0) {
                pp_record_said_names(rc, img->pid, root, &st);
            }
            if (err != 0) {
                fprintf(stderr, "pipeprof record: cannot write the trace of process %llu: %s\n",
                        (unsigned long long)img->pid, strerror(-err));
                goto out;
            }
        }
        for (j = 0; j < (size_t)segs; j++) {
            if (strcmp(in[j], rc->trace) != 0) {
                unlink(in[j]);
            }
        }
        n++;
    }
out:
    free(first);
    free(in);
    return err < 0 ? err : (int)n;
}

/*
 * Counts the processes of the tree that are not one trace file each: without samples (no file),
 * started too late, refused a request, or cut short. Prints nothing when there are none.
 */
static void
pp_record_process_counts(const struct pp_record *rc, size_t no_samples)
{
    if (no_samples > 0) {
        fprintf(stderr, ", %zu without samples (no file written)", no_samples);
    }
    if (rc->skipped > 0) {
        fprintf(stderr, ", %llu started after the recording ended (not recorded)",
                (unsigned long long)rc->skipped);
    }
    if (rc->failed > 0) {
        fprintf(stderr, ", %llu not recorded (a request failed)", (unsigned long long)rc->failed);
    }
    if (rc->incomplete > 0) {
        fprintf(stderr, ", %llu with an incomplete trace (kept)",
                (unsigned long long)rc->incomplete);
    }
    if (rc->names_frames > 0) {
        fprintf(stderr, ", %llu of %llu frames of cut traces named from files",
                (unsigned long long)rc->names_named, (unsigned long long)rc->names_frames);
    }
}

/*
 * The summary without -v: one line, since the host's stderr is shared with the recorded
 * program. It still carries the output, what was sampled, the rate reached, every loss and
 * every process without a file of its own; a second one, when the trace holds any, says what
 * no stack of the program's own shows (CPU in the kernel, not placed, not sampled) and counts
 * the waiting samples and not-running markers. -v gives the full summary and the top functions.
 */
static void
pp_record_summary_line(const struct pp_record *rc, const struct pp_profile *p, size_t n,
                       size_t no_samples, double secs, int sampled, double busiest)
{
    size_t i, apps = 0, runtimes = 0;

    fprintf(stderr,
            "pipeprof: %s written (%s format): %llu samples in %.2f s from %d thread%s, "
            "%.1f Hz effective on the busiest thread (%s mode, %u Hz requested), ",
            rc->output, rc->nettrace ? "nettrace" : pp_profile_format_name(rc->format),
            (unsigned long long)p->samples, secs, sampled, sampled == 1 ? "" : "s", busiest,
            rc->mode, rc->hz);
    if (p->lost_samples > 0 || p->lost_events > 0) {
        fprintf(stderr, "lost %llu samples dropped by the agent and %llu events in the trace",
                (unsigned long long)p->lost_samples, (unsigned long long)p->lost_events);
    } else if (p->threads_dropped == 0) {
        fprintf(stderr, "nothing lost");
    }
    if (p->threads_dropped != 0) {
        fprintf(stderr,
                "%s%llu threads refused by the agent (its thread table full or their "
                "engine failed)",
                p->lost_samples > 0 || p->lost_events > 0 ? ", " : "",
                (unsigned long long)p->threads_dropped);
    }
    fprintf(stderr, "; %zu process%s recorded", n, n == 1 ? "" : "es");
    pp_record_process_counts(rc, no_samples);
    for (i = 0; i < rc->image_count; i++) {
        struct pp_image *img = rc->images[i];

        if (img->thread_started && atomic_load(&img->runtime)) {
            apps += atomic_load(&img->agent) != 0;
        }
        if (img->thread_started && !atomic_load(&img->agent) && atomic_load(&img->samples) > 0) {
            runtimes++;
        }
    }
    if (apps > 0) {
        fprintf(stderr, ", %zu .NET app%s (native and managed frames merged)", apps,
                apps == 1 ? "" : "s");
    }
    if (runtimes > 0) {
        fprintf(stderr, ", %zu .NET runtime%s sampling itself (--mode and --hz do not apply)",
                runtimes, runtimes == 1 ? "" : "s");
    }
    fprintf(stderr, "%s\n",
            n > 1 || rc->failed > 0 || rc->incomplete > 0 || apps > 0 || runtimes > 0
                    ? "; -v for each"
                    : "");
    pp_report_time_brief(p, "pipeprof: ", stderr);
}

/* Converts the traces if asked, and prints the summary. */
static int
pp_record_finish(struct pp_record *rc, const struct pp_record_file *files, size_t n,
                 size_t no_samples)
{
    struct pp_profile *p = NULL;
    const char **paths = calloc(n + 1, sizeof(*paths));
    struct pp_output o = { .fd = -1 };
    FILE *out;
    char err[PATH_MAX + 512];
    int rcode = -1, sampled = 0, busiest_by_recording;
    double secs, busiest = 0;
    size_t i;

    if (paths == NULL) {
        goto out;
    }
    for (i = 0; i < n; i++) {
        paths[i] = files[i].path;
    }
    if (pp_load_profiles(paths, n, NULL, &p, err, sizeof(err)) != 0) {
        fprintf(stderr, "pipeprof record: reading the trace: %s\n", err);
        goto out;
    }
    if (!rc->nettrace) {
        if (pp_output_open(&o, rc->output, NULL, 0, err, sizeof(err)) != 0) {
            fprintf(stderr, "pipeprof record: %s\n", err);
            goto out;
        }
        out = pp_output_file(&o);
        if (out == NULL || pp_profile_write(p, rc->format, out, err, sizeof(err)) != 0) {
            fprintf(stderr, "pipeprof record: writing %s: %s\n", rc->output,
                    out == NULL ? strerror(ENOMEM) : err);
            goto out;
        }
        if (pp_output_commit(&o, err, sizeof(err)) != 0) {
            fprintf(stderr, "pipeprof record: %s\n", err);
            goto out;
        }
    }
    rcode = 0;
    if (rc->quiet) {
        goto out;
    }
    secs = p->last_ts > p->first_ts
                   ? (double)(p->last_ts - p->first_ts) / (double)p->ticks_per_second
                   : 0.0;
    /* over each thread's own life: a tree of short processes has no thread as long as the
     * recording (a build's compiler runs, each sampled at the rate asked, read 3.6 Hz at 100) */
    busiest = pp_profile_busiest_rate(p);
    busiest_by_recording = busiest == 0; /* no thread had the samples to tell */
    for (i = 0; i < p->thread_count; i++) {
        sampled += p->threads[i].samples != 0;
        if (busiest_by_recording && secs > 0 && (double)p->threads[i].samples / secs > busiest) {
            busiest = (double)p->threads[i].samples / secs;
        }
    }
    if (!rc->verbose) {
        pp_record_summary_line(rc, p, n, no_samples, secs, sampled, busiest);
        goto out;
    }
    fprintf(stderr, "pipeprof: %s written (%s format)\n", rc->output,
            rc->nettrace ? "nettrace" : pp_profile_format_name(rc->format));
    if (n > 1 || no_samples > 0 || rc->skipped > 0 || rc->failed > 0 || rc->incomplete > 0) {
        /* one line for the whole tree; -v names each process */
        fprintf(stderr, "pipeprof: %zu process%s recorded", n, n == 1 ? "" : "es");
        pp_record_process_counts(rc, no_samples);
        fputc('\n', stderr);
        for (i = 0; i < n && rc->nettrace; i++) {
            fprintf(stderr, "pipeprof:   %s: pid %llu%s%s, %llu samples\n", files[i].path,
                    (unsigned long long)files[i].pid,
                    files[i].nth > 1 ? " (reused: another process of the recording had it)" : "",
                    files[i].by_pid ? " (images joined by the pid: a start time was unknown)" : "",
                    (unsigned long long)files[i].samples);
        }
    }
    fprintf(stderr,
            "pipeprof: %llu samples in %.2f s from %d threads, %s mode at %u Hz requested\n"
            "pipeprof: effective rate %.1f Hz on the busiest thread%s%s\n"
            "pipeprof: lost: %llu samples dropped by the agent, %llu events lost in the trace",
            (unsigned long long)p->samples, secs, sampled, rc->mode, rc->hz, busiest,
            p->engine != NULL ? ", cpu engine " : "", p->engine != NULL ? p->engine : "",
            (unsigned long long)p->lost_samples, (unsigned long long)p->lost_events);
    if (p->threads_dropped != 0) {
        fprintf(stderr, ", %llu threads refused by the agent",
                (unsigned long long)p->threads_dropped);
    }
    fputc('\n', stderr);
    for (i = 0; i < rc->image_count; i++) {
        if (rc->images[i]->thread_started && atomic_load(&rc->images[i]->agent) &&
            atomic_load(&rc->images[i]->runtime)) {
            fprintf(stderr,
                    "pipeprof: process %llu is a .NET app: pipeprof's samples hold its native "
                    "and managed\n"
                    "pipeprof:   frames in one stack; the runtime's events and rundown (which "
                    "names the\n"
                    "pipeprof:   managed frames) are merged into its trace "
                    "(docs/dotnet-hosts.md)\n",
                    (unsigned long long)rc->images[i]->pid);
        }
        if (rc->images[i]->thread_started && !atomic_load(&rc->images[i]->agent) &&
            atomic_load(&rc->images[i]->samples) > 0) {
            fprintf(stderr,
                    "pipeprof: process %llu is a .NET runtime: its samples are the runtime's own\n"
                    "pipeprof:   SampleProfiler's (managed frames, about 1 kHz, named by the "
                    "runtime's\n"
                    "pipeprof:   rundown), not pipeprof's native CPU samples; --mode and --hz do "
                    "not apply\n",
                    (unsigned long long)rc->images[i]->pid);
        }
    }
    if (p->samples > 0) {
        (void)pp_report_brief(p, 10, stderr);
    }
out:
    pp_output_abort(&o); /* after a failure: an earlier file at the output is left as it was */
    free(paths);
    pp_profile_free(p);
    return rcode;
}

/*
 * Says, whatever -q, when PIPEPROF_CPU_ENGINE=timer is asked above the kernel's tick: CPU-time
 * timers expire only at a tick that finds the thread running, so the samples come at the tick's
 * rate, each weighed for the intervals since the last, and where a tick found the thread (a
 * thread that waits for a core is scheduled in at a tick: docs/architecture.md, "The tick's
 * bias"). auto takes perf_event there. The tick is CLOCK_MONOTONIC_COARSE's resolution, as the
 * agent takes it.
 */
static void
pp_record_warn_tick(const struct pp_record *rc)
{
    const char *engine = getenv("PIPEPROF_CPU_ENGINE");
    struct timespec res;
    unsigned tick;

    if (engine == NULL || strcmp(engine, "timer") != 0 || strcmp(rc->mode, "cpu") != 0 ||
        clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0 || res.tv_sec != 0 || res.tv_nsec <= 0) {
        return;
    }
    tick = (unsigned)((1000000000L + res.tv_nsec / 2) / res.tv_nsec);
    if (rc->hz > tick) {
        fprintf(stderr,
                "pipeprof record: PIPEPROF_CPU_ENGINE=timer at %u Hz is above the kernel's tick "
                "(%u Hz): the timers sample at the tick, each sample standing for about %.1f "
                "intervals, where a tick found the thread (the default engine takes perf_event "
                "above the tick)\n",
                rc->hz, tick, (double)rc->hz / (double)tick);
    }
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
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            rc->verbose = 1;
        } else if (strcmp(a, "--no-children") == 0) {
            rc->children = 0;
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
    pp_record_warn_tick(rc);
    return -1;
}

/*
 * Renames CMD's trace into place as the output when it holds anything (also after an error:
 * what was recorded is kept), else removes it. Returns 0 when the output was written.
 */
static int
pp_record_keep_root(struct pp_record *rc)
{
    struct stat st;
    char why[PATH_MAX + 64];

    if (rc->root_out.fd < 0 && rc->root_out.tmp[0] == '\0') {
        return -EALREADY;
    }
    if (stat(rc->trace, &st) != 0 || st.st_size == 0) {
        pp_output_abort(&rc->root_out);
        return -ENODATA;
    }
    if (pp_output_commit(&rc->root_out, why, sizeof(why)) != 0) {
        fprintf(stderr, "pipeprof record: %s\n", why);
        return -EIO;
    }
    return 0;
}

static int
pp_record_exit_code(const struct pp_record *rc, int recorded)
{
    char killed[64];
    int code = 1;

    if (rc->child_done && WIFEXITED(rc->child_status)) {
        code = WEXITSTATUS(rc->child_status);
    } else if (rc->child_done && WIFSIGNALED(rc->child_status)) {
        code = 128 + WTERMSIG(rc->child_status);
        if (!rc->killed_said) { /* (its trace complete, or no trace of CMD's own) */
            fprintf(stderr, "pipeprof record: %s was %s\n", rc->cmd[0],
                    pp_diag_killed_text(rc->child_status, killed, sizeof(killed)));
        }
    }
    (void)recorded; /* a problem with the trace was said on stderr; the status stays CMD's */
    return code;
}

/* Makes the private directory the socket lives in (rc->dir, rc->sock). Returns 0, or 1 (said). */
static int
pp_record_make_dir(struct pp_record *rc)
{
    const char *tmp = getenv("TMPDIR");
    int fd;

    if (tmp == NULL || tmp[0] == '\0' || strlen(tmp) > 80) {
        tmp = "/tmp"; /* a longer directory would not leave room for the socket's name */
    }
    snprintf(rc->dir, sizeof(rc->dir), "%s/pipeprof-record-XXXXXX", tmp);
    if (mkdtemp(rc->dir) == NULL) {
        fprintf(stderr, "pipeprof record: cannot create a directory in %s: %s\n", tmp,
                strerror(errno));
        return 1;
    }
    /* Processes of the tree that change their uid still reach the socket: the directory can be
     * passed but not listed, and each connection's process is checked (pp_record_in_tree). */
    chmod(rc->dir, 0711);
    {
        uint8_t raw[16];
        size_t i, used;

        if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
            fprintf(stderr, "pipeprof record: no random bytes: %s\n", strerror(errno));
            rmdir(rc->dir);
            return 1;
        }
        used = (size_t)snprintf(rc->token, sizeof(rc->token), "PIPEPROF_RECORD_TOKEN=");
        for (i = 0; i < sizeof(raw); i++) {
            used += (size_t)snprintf(rc->token + used, sizeof(rc->token) - used, "%02x", raw[i]);
        }
    }
    snprintf(rc->sock, sizeof(rc->sock), "%s/port.sock", rc->dir);
    /* The children's unwind tables, built by the first process that loads a library and mapped
     * by the others (agent/cfi.h): most of a short child's CPU under record was building libc's
     * again. Private to this user: a child of another uid builds its own. */
    snprintf(rc->cfi_cache, sizeof(rc->cfi_cache), "%s/cfi", rc->dir);
    if (mkdir(rc->cfi_cache, 0700) != 0) {
        rc->cfi_cache[0] = '\0';
    }
    /* Appended to by this user's children only: one of another uid is not counted. */
    snprintf(rc->tally, sizeof(rc->tally), "%s/tally", rc->dir);
    fd = open(rc->tally, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc->tally[0] = '\0';
    } else {
        close(fd);
    }
    return 0;
}

/* Removes the children's unwind tables and their directory. */
static void
pp_record_cfi_cache_remove(struct pp_record *rc)
{
    DIR *d = rc->cfi_cache[0] != '\0' ? opendir(rc->cfi_cache) : NULL;
    struct dirent *e;

    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            unlinkat(dirfd(d), e->d_name, 0);
        }
    }
    closedir(d);
    rmdir(rc->cfi_cache);
}

/* Opens where CMD's trace streams (rc->trace). Returns 0, or 1 (said; rc->dir removed). */
static int
pp_record_open_trace(struct pp_record *rc)
{
    rc->root_out.fd = -1;
    if (rc->nettrace) {
        char why[PATH_MAX + 64];

        /* CMD's trace streams into a file beside the output, renamed into place at the end:
         * an earlier recording there stays whole until this one is */
        if (pp_output_open(&rc->root_out, rc->output, NULL, 0, why, sizeof(why)) != 0) {
            fprintf(stderr, "pipeprof record: %s\n", why);
            pp_record_cfi_cache_remove(rc);
            rmdir(rc->dir);
            return 1;
        }
        snprintf(rc->trace, sizeof(rc->trace), "%s",
                 rc->root_out.tmp[0] != '\0' ? rc->root_out.tmp : rc->output);
    } else {
        snprintf(rc->trace, sizeof(rc->trace), "%s/trace.nettrace", rc->dir);
    }
    return 0;
}

/*
 * Every process of the tree holds a few of our fds while its session runs: take the hard limit
 * (CMD gets the soft one, rc->nofile, back before it starts).
 */
static void
pp_record_raise_nofile(struct pp_record *rc)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rc->nofile = rl;
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The dispositions of SIGINT, SIGTERM and SIGHUP record replaces while it runs. */
struct pp_record_sigs {
    struct sigaction old_int, old_term, old_hup;
};

static void
pp_record_sigs_catch(struct pp_record_sigs *old)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = pp_record_on_signal; /* no SA_RESTART: poll and accept return EINTR */
    sigaction(SIGINT, &sa, &old->old_int);
    sigaction(SIGTERM, &sa, &old->old_term);
    sigaction(SIGHUP, &sa, &old->old_hup);
}

static void
pp_record_sigs_restore(const struct pp_record_sigs *old)
{
    sigaction(SIGINT, &old->old_int, NULL);
    sigaction(SIGTERM, &old->old_term, NULL);
    sigaction(SIGHUP, &old->old_hup, NULL);
}

/*
 * Listens on rc->sock and forks CMD (with lib preloaded) in its own process group. Returns 0,
 * or -1 (said). In the child, never returns.
 */
static int
pp_record_start_child(struct pp_record *rc, const char *lib, const struct pp_record_sigs *old)
{
    int err = ipc_client_listen(rc->sock, &rc->listen_fd, &rc->sock_file);
    int exec_err[2], child_errno = 0;
    ssize_t n;

    if (err < 0) {
        fprintf(stderr, "pipeprof record: cannot listen on %s: %s\n", rc->sock, strerror(-err));
        return -1;
    }
    chmod(rc->sock, 0777);
    fflush(NULL);
    if (pipe2(exec_err, O_CLOEXEC) < 0) {
        exec_err[0] = exec_err[1] = -1; /* then a failed exec is told by CMD's absence alone */
    }
    rc->exec_err_fd = exec_err[1];
    rc->child = fork();
    if (rc->child < 0) {
        fprintf(stderr, "pipeprof record: fork: %s\n", strerror(errno));
        if (exec_err[0] >= 0) {
            close(exec_err[0]);
            close(exec_err[1]);
        }
        return -1;
    }
#ifdef SYS_pidfd_open
    /* The loop learns of CMD's exit at once, not at its next 50 ms poll: children that take no
     * sample never connect, so no connection wakes it any more (0.5 ms a child in a batch of a
     * hundred short ones). Without pidfds (Linux < 5.3) the poll's timeout still bounds it. */
    if (rc->child > 0) {
        rc->child_fd = (int)syscall(SYS_pidfd_open, rc->child, 0);
    }
#endif
    if (rc->child == 0) {
        if (exec_err[0] >= 0) {
            close(exec_err[0]);
        }
        if (rc->nofile.rlim_cur != 0) {
            (void)setrlimit(RLIMIT_NOFILE, &rc->nofile);
        }
        pp_record_sigs_restore(old);
        signal(SIGPIPE, SIG_DFL);
        pp_record_spawn_child(rc, lib);
    }
    setpgid(rc->child, rc->child); /* also here, so that no signal races the child's own call */
    if (exec_err[1] >= 0) {
        /* EOF once the exec succeeded (close-on-exec) or the child is gone; the errno when it
         * failed. Held as posix_spawn holds its caller: until CMD runs or cannot. */
        close(exec_err[1]);
        rc->exec_err_fd = -1;
        do {
            n = read(exec_err[0], &child_errno, sizeof(child_errno));
        } while (n < 0 && errno == EINTR);
        rc->exec_failed = n == (ssize_t)sizeof(child_errno);
        close(exec_err[0]);
    }
    rc->start_ms = ipc_client_ms();
    return 0;
}

/* Once the sessions have ended: joins the stream threads and says which traces are cut. */
static void
pp_record_join_images(struct pp_record *rc)
{
    size_t i;

    for (i = 0; i < rc->image_count; i++) {
        struct pp_image *img = rc->images[i];

        if (img->thread_started == 1) {
            pthread_join(img->thread, NULL);
            img->thread_started = 2; /* joined; its segment stays for the files below */
        }
        if (img->file_fd >= 0) {
            close(img->file_fd);
            img->file_fd = -1;
        }
        rc->incomplete += img->cut && !img->root; /* a child killed with CMD, usually */
        if (img->cut && (img->root || rc->verbose)) {
            char killed[128] = "", what[64];

            if (img->root && rc->child_done && WIFSIGNALED(rc->child_status)) {
                snprintf(killed, sizeof(killed), " (CMD was %s before it could end the session)",
                         pp_diag_killed_text(rc->child_status, what, sizeof(what)));
                rc->killed_said = 1;
            }
            fprintf(stderr,
                    "pipeprof record: the trace of process %llu is incomplete: %s%s; what "
                    "arrived is kept, closed properly\n",
                    (unsigned long long)img->pid, img->why, killed);
        }
    }
}

/*
 * Writes the output files from the images' segments (*files: calloc'ed, the caller's to free)
 * and prints the summary. Returns 1 when something was recorded, else 0.
 */
static int
pp_record_write_outputs(struct pp_record *rc, struct pp_record_file **files)
{
    size_t i, no_samples = 0;
    int nfiles, recorded = 0;

    *files = calloc(rc->image_count + 1, sizeof(**files));
    nfiles = *files == NULL ? -ENOMEM
                            : pp_record_write_files(rc, *files, rc->image_count + 1, &no_samples);
    for (i = 0; rc->nettrace && nfiles > 0 && i < (size_t)nfiles; i++) {
        if (strcmp((*files)[i].path, rc->trace) == 0 && pp_record_keep_root(rc) == 0) {
            snprintf((*files)[i].path, sizeof((*files)[i].path), "%s", rc->output);
        }
    }
    if (nfiles > 0) {
        recorded = pp_record_finish(rc, *files, (size_t)nfiles, no_samples) == 0;
    }
    for (i = 0; !rc->nettrace && nfiles > 0 && i < (size_t)nfiles; i++) {
        unlink((*files)[i].path); /* converted: the process-<pid>.nettrace files in rc->dir */
    }
    if (nfiles == 0) {
        fprintf(stderr, "pipeprof record: no session of %s started; nothing was recorded\n",
                rc->cmd[0]);
    }
    return recorded;
}

/*
 * Everything record holds, given back whatever the step it stopped at: stream threads, fds,
 * segments, the socket and directory, CMD's trace (kept when it holds anything), and CMD itself
 * (passed the signal that stopped record, then reaped).
 */
static void
pp_record_cleanup(struct pp_record *rc)
{
    size_t i;

    for (i = 0; i < rc->image_count; i++) {
        struct pp_image *img = rc->images[i];

        if (img->thread_started == 1) {
            atomic_store(&rc->abort, 1);
            pthread_join(img->thread, NULL);
        }
        if (img->stream_fd >= 0) {
            close(img->stream_fd);
        }
        if (img->file_fd >= 0) {
            close(img->file_fd);
        }
        if (img->idle_fd >= 0) {
            close(img->idle_fd);
        }
        if (img->stop_fd >= 0) {
            close(img->stop_fd);
        }
        if (!img->root) {
            unlink(img->path); /* a segment left over after an error */
        }
        free(img->pending);
        free(img);
    }
    free(rc->images);
    if (rc->listen_fd >= 0) {
        close(rc->listen_fd);
    }
    if (rc->child_fd >= 0) {
        close(rc->child_fd);
    }
    ipc_sockfile_remove(rc->sock, &rc->sock_file);
    if (rc->nettrace) {
        (void)pp_record_keep_root(rc); /* what CMD's stream brought is kept, also on errors */
    }
    if (!rc->nettrace) {
        unlink(rc->trace);
    }
    if (rc->child > 0) {
        /* Ctrl-C or a termination request: pass it on once the session has ended. */
        if (pp_record_signal != 0 && !rc->child_done) {
            kill(-rc->child, pp_record_signal);
        }
        pp_record_reap(rc, 1);
    }
    /* After the reap: a child still alive may add an unwind table to cfi/ after it was read */
    pp_record_cfi_cache_remove(rc);
    if (rc->tally[0] != '\0') {
        unlink(rc->tally);
    }
    rmdir(rc->dir);
    free(rc->tids);
    pthread_mutex_destroy(&rc->tid_lock);
}

int
pp_cmd_record(int argc, char **argv)
{
    struct pp_record rc;
    struct pp_record_sigs old;
    struct pp_record_file *files = NULL;
    char lib[2 * PATH_MAX]; /* the agent, and a sanitizer runtime after it */
    int err, recorded = 0, rcode;

    memset(&rc, 0, sizeof(rc));
    rc.mode = "cpu";
    rc.hz = 100;
    rc.children = 1;
    rc.listen_fd = -1;
    rc.child_fd = -1;
    rc.exec_err_fd = -1;
    pthread_mutex_init(&rc.tid_lock, NULL);
    rcode = pp_record_parse(&rc, argc, argv);
    if (rcode >= 0) {
        return rcode;
    }
    err = pp_record_find_library(lib, sizeof(lib));
    if (err == 0) {
        err = pp_record_add_sanitizer(lib, sizeof(lib));
    }
    if (err < 0) {
        fprintf(stderr,
                "pipeprof record: the agent library was not found (%s); set PIPEPROF_LIBRARY "
                "to libpipeprof.so\n",
                strerror(-err));
        return 1;
    }
    if (pp_record_make_dir(&rc) != 0 || pp_record_open_trace(&rc) != 0) {
        return 1;
    }
    rc.tids = calloc(PP_RECORD_MAX_THREADS, sizeof(*rc.tids));
    rc.tty = isatty(2);
    pp_record_raise_nofile(&rc);
    pp_record_sigs_catch(&old);
    signal(SIGPIPE, SIG_IGN);
    if (pp_record_start_child(&rc, lib, &old) == 0 && pp_record_run(&rc) == 0) {
        pp_record_progress(&rc, 1);
        pp_record_join_images(&rc);
        recorded = pp_record_write_outputs(&rc, &files);
    }
    pp_record_cleanup(&rc);
    free(files);
    pp_record_sigs_restore(&old);
    return rc.child > 0 ? pp_record_exit_code(&rc, recorded) : 1;
}
