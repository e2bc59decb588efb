/* SPDX-License-Identifier: MIT */
/*
 * shim/shim.c - libpipeprof.so's entry: one constructor in .init_array that reads the
 * environment and starts the diagnostic server (ipc/), and one destructor that ends every
 * session cleanly at exit. Context: the host's main thread, before main() (constructor) and at
 * exit() (destructor). It must never abort, exit or print to stdout in the host; every failure
 * becomes one line on stderr and the host runs on untouched. The library exports the public API
 * (shim/api.c, include/pipeprof.h), the libc calls of the host contract (host/: this file installs
 * the server's hooks they call back) and three marker names (tests/check-host-exports.sh).
 *
 * Environment (docs/ipc.md; what the server takes from it is ipc/env.c's):
 *   PIPEPROF_DISABLE=1                  do nothing
 *   DOTNET_EnableDiagnostics=0          do nothing (also COMPlus_, and _IPC=0), as the runtime
 *   PIPEPROF_SAMPLING_SERVER_URL=...    the HTTP pull endpoints (bridge/http-source.h)
 *   PIPEPROF_TARGET_PID=N               only process N starts; its exec'd children, which
 *                                       inherit the environment, stay untouched (set by
 *                                       `pipeprof record --no-children`)
 *   PIPEPROF_FOLLOW_FORKS=1             a fork()ed child that does not exec soon starts an
 *                                       agent and server of its own (set by `pipeprof record`,
 *                                       which follows the process tree; PIPEPROF_OUTPUT too)
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "agent/agent.h"
#include "bridge/agent-source.h"
#include "common/platform.h"
#include "host/host.h"
#include "ipc/ipc.h"
#ifdef PP_HAVE_HTTP
#include "bridge/http-source.h"
#endif

static struct ipc_server *shim_server;

/*
 * The server an exec's stop ended (shim_quick_stop): its loop over (or ending), its thread not
 * joined, its loop's fds (epoll, eventfd, signal pipe, spare) open and its memory held. An exec
 * that succeeds drops it with the image; one that fails joins and frees it before the image
 * serves again (shim_exec_failed). Before, each failed exec left all of that behind: 5 fds and a
 * thread's stack each, and a host failing execve() in a loop under `record` or preloaded with
 * RLIMIT_NOFILE 1024 got "pipeprof: diagnostic server not started: Too many open files" on its
 * stderr after about 50 (1519 fds open after 300; host-contract-execfail).
 */
static struct ipc_server *shim_exec_stopped;

/* shim_exit_tls's state (before shim_exit, below, says what each is). */
static int shim_exit_used;
static unsigned shim_exit_finalized, shim_atfork_again; /* shim_atfork_register_again() */
static __thread int shim_exit_tls_armed;
static pid_t shim_exit_tls_pid;

/*
 * On a host thread, the library's own time and code: the agent does not sample it as the host's,
 * and the fds that libuv's code (and libelf's) makes or closes there are the library's
 * (host_fds_library_span). Outside such a span libuv's code on a host thread is the host's own
 * libuv (a host linked against the same libuv.so.1, or Node's exported copy).
 */
static void
shim_own_code(int on)
{
    ag_thread_own_code(on);
    host_fds_library_span(on);
}

/* 1 once the host installed a seccomp filter (shim_seccomp_before): the library never starts
 * again in this process or its fork()ed children, which inherit the flag. */
static int shim_sealed;
/* 1 while the load hook runs (the constructor, before main), not at a later start. */
static int shim_loading;

/*
 * 1 on the server's own threads (ipc_server_options.thread_init) and while this thread starts or
 * stops the server: the socket interposers (host/sockets.c, through shim_socket_redirect) leave
 * its calls alone.
 */
static __thread int shim_tls_internal;

static void
shim_thread_init(void)
{
    shim_tls_internal = 1;
    ag_thread_exclude_self();
}

/*
 * The sampler. eager: a session comes at once (a connect port: `record`, `collect -- CMD`; or
 * PIPEPROF_OUTPUT), or the host is a .NET runtime's (whose own start-up dwarfs the agent's, and
 * whose sessions merge with the runtime's from their first event), and the agent starts here,
 * before the server, with the host's threads registered as they start. Otherwise it starts when the
 * first session or HTTP recording asks for samples (bridge_agent_start()): a process preloaded
 * everywhere and never profiled binds its socket and waits, without the agent's /proc scans, module
 * list and manager thread (about 4.5 ms of CPU per process; bench/idle-preload.sh). An invalid
 * PIPEPROF_* setting is one line on stderr; the server then runs without samples (every trace still
 * names its process), and the host runs on.
 */
static struct ipc_event_source shim_source;

static const struct ipc_event_source *
shim_event_source_get(int eager)
{
    struct ag_config cfg;
    char why[256];
    int err;

    ag_config_init(&cfg);
    if (ag_config_from_env(&cfg, why, sizeof(why)) != 0) {
        fprintf(stderr, "pipeprof: sampling disabled: %s\n", why);
        return NULL;
    }
    if (cfg.disabled) {
        return NULL;
    }
    err = eager ? ag_start(&cfg) : 0;
    if (err != 0) {
        fprintf(stderr, "pipeprof: sampling disabled: agent not started: %s\n", strerror(-err));
        return NULL;
    }
    bridge_agent_source_init(&shim_source, &cfg);
    return &shim_source;
}

/* The calling thread's CPU time now: where its first sample's time starts when the session
 * that samples it starts later (ag_cpu_origin_set()). */
static void
shim_cpu_origin(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
        ag_cpu_origin_set((int32_t)syscall(SYS_gettid),
                          (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
    }
}

static int
shim_env_is(const char *name, const char *value)
{
    const char *v = getenv(name);

    return v != NULL && strcmp(v, value) == 0;
}

/* PIPEPROF_TARGET_PID, when set, names the only process that profiles itself. */
static int
shim_is_target(void)
{
    const char *v = getenv("PIPEPROF_TARGET_PID");
    char *end;
    long pid;

    if (v == NULL || v[0] == '\0') {
        return 1;
    }
    pid = strtol(v, &end, 10);
    return *end == '\0' && pid == (long)getpid();
}

#define SHIM_FORK_START_DELAY_MS 5 /* a child that execs sooner costs one thread, no session */

/* Set while a fork()ed child's start thread (shim_forked_start_main) has yet to start its server:
 * a child that forks again in that time (a daemon's setsid() and second fork at once) is a child
 * of a profiled process too, though its parent's server is not there yet. */
static int shim_forked_start_pending;

/*
 * Where the fork()ed child's start thread is, against an exec or an _exit of the child's
 * (shim_quick_stop): it sleeps (PENDING), starts the agent and the server (STARTING), or is done
 * or was never made (NONE); an exec while it sleeps cancels it (CANCELLED: it starts nothing),
 * one while it starts waits for the start's end and stops what it started. Before, an exec in the
 * start found no server to stop (it is published at the end of its start, its sampling running
 * already) and went ahead while the new agent's wall thread sent the exec'ing thread its
 * SIGPROF: a signal sent to a thread pends through its execve(), whose new image takes it with
 * the disposition exec reset, SIG_DFL, before its first instruction (bash's `( sleep 0.01 ) &`
 * under record --mode wall: "Profiling timer expired sleep 0.01", 1 run of real-hosts in 3).
 * shim_forked_start_pid is the child's whose start thread it is: a vfork()ed child, which shares
 * this memory, has another pid and leaves it alone.
 */
enum { SHIM_START_NONE, SHIM_START_PENDING, SHIM_START_STARTING, SHIM_START_CANCELLED };
static int shim_forked_start_phase;
static pid_t shim_forked_start_pid;

static void shim_start_process(int running);
static int shim_start_process_try(int running, int quiet_again);
static void shim_atfork_child(void);
static void shim_atfork_child_reset(void);
static void shim_stop(void);

static void
shim_atfork_register_resets(void)
{
    /* The agent's fork handlers before any thread of the agent can take its locks. Registered
     * only by a lazily started agent's ag_start() on the loop thread, they came too late for a
     * fork whose prepare handlers had run: glibc runs in the child only the handlers that were
     * registered by then, so the child kept the module lock as the loop thread held it, and the
     * forked start thread (shim_atfork_child) waited for it in ag_start() for good, the life lock
     * held, and the child's exit() after it (a subshell of a bash script under `record`, once in
     * about 25 runs at load 5 to 18; gdb: the lock's owner the parent's loop thread, the agent's
     * handlers third in the list after this file's). This file's reset comes first of all: the
     * agent's child handler closes the parent's scan files through the close interposer, which
     * takes the mark lock (with the agent's first, a forked child of pp-sample-torture spun on it
     * for good, 4 runs of agent-torture in 20). */
    host_fds_atfork_register(shim_atfork_child_reset);
    ag_fork_handlers_register();
}

/* 1 once shim_atfork_child() is registered, after libuv's child handler: the span that
 * shim_atfork_child_reset() opens around libuv's handler has its end. */
static int shim_atfork_child_registered;

static void
shim_atfork_register(void)
{
    if (pthread_atfork(NULL, NULL, shim_atfork_child) == 0) {
        __atomic_store_n(&shim_atfork_child_registered, 1, __ATOMIC_RELEASE);
    }
}

/*
 * A thread created while another thread of the process is in execve() fails with EAGAIN (the
 * kernel refuses CLONE_FS while the exec holds the process's fs_struct: copy_fs, fs->in_exec),
 * from the exec's start to its end, also for an exec that fails once its file is open (ENOEXEC,
 * a missing interpreter). A shell's child that takes longer than SHIM_FORK_START_DELAY_MS to exec
 * (a loaded machine) met that at its start, and its start thread said "pipeprof: diagnostic server
 * not started: Resource temporarily unavailable" on the host's stderr where bare says nothing (bash
 * scripts of pipelines in command substitutions, under record: several lines a run). So a start
 * that fails with EAGAIN is tried again, quietly, after a pause: an exec that succeeds ends this
 * thread meanwhile, one that failed is over (an exec's window lasted past 30 ms on a loaded
 * machine: tried for up to 1 s of CLOCK_MONOTONIC). Only a try after that says why it failed.
 */
#define SHIM_FORK_START_AGAIN_MS 10
#define SHIM_FORK_START_AGAIN_NS (1000000000LL) /* by CLOCK_MONOTONIC: then it is said */

static long long
shim_monotonic_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The deferred start of a fork()ed child's agent (PIPEPROF_FOLLOW_FORKS). */
static void *
shim_forked_start_main(void *arg)
{
    struct timespec delay = { 0, SHIM_FORK_START_DELAY_MS * 1000000L };
    struct timespec again = { 0, SHIM_FORK_START_AGAIN_MS * 1000000L };
    long long until;

    int phase = SHIM_START_PENDING;

    (void)arg;
    /* The raw system call: the library's own nanosleep is an interposer. */
    syscall(SYS_nanosleep, &delay, NULL);
    if (!__atomic_compare_exchange_n(&shim_forked_start_phase, &phase, SHIM_START_STARTING, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&shim_forked_start_pending, 0, __ATOMIC_RELEASE);
        return NULL; /* an exec or an _exit came first (shim_quick_stop) */
    }
    ag_thread_exclude_self(); /* this thread only starts the agent; it is not the host's */
    until = shim_monotonic_ns() + SHIM_FORK_START_AGAIN_NS;
    while (shim_start_process_try(1, shim_monotonic_ns() < until) == -EAGAIN &&
           shim_monotonic_ns() < until) {
        syscall(SYS_nanosleep, &again, NULL);
    }
    __atomic_store_n(&shim_forked_start_pending, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&shim_forked_start_phase, SHIM_START_NONE, __ATOMIC_RELEASE);
    return NULL;
}

#define SHIM_START_WAIT_MS 10000 /* an exec's wait for a start under way, by CLOCK_MONOTONIC */

/* For an exec or an _exit of this process (not a vfork()ed child's): 1 when a fork()ed child's
 * start was cancelled before it began (an exec that fails starts it again: exec_failed), after
 * a start under way has ended (its server is then there to stop). */
static int
shim_forked_start_settle(void)
{
    struct timespec poll = { 0, 1000000L };
    int phase = SHIM_START_PENDING;
    long long until;

    if (__atomic_load_n(&shim_forked_start_phase, __ATOMIC_ACQUIRE) == SHIM_START_NONE ||
        __atomic_load_n(&shim_forked_start_pid, __ATOMIC_RELAXED) != getpid()) {
        return 0;
    }
    if (__atomic_compare_exchange_n(&shim_forked_start_phase, &phase, SHIM_START_CANCELLED, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        return 1;
    }
    until = shim_monotonic_ns() + SHIM_START_WAIT_MS * 1000000LL;
    while (__atomic_load_n(&shim_forked_start_phase, __ATOMIC_ACQUIRE) == SHIM_START_STARTING &&
           shim_monotonic_ns() < until) {
        syscall(SYS_nanosleep, &poll, NULL);
    }
    return 0;
}

static int shim_follow_forks;

static int shim_forked_was_running; /* the fork()ed child's, by shim_atfork_child_reset() */

/* The child's first handler of this file's (shim_atfork_register_resets()): the locks and state
 * of the parent's threads, reset before any later handler (libuv's) runs into them. */
static void
shim_atfork_child_reset(void)
{
    /* libuv's child handler, next, closes and makes again its signal lock pipe: the library's
     * (its loop made it first), up to shim_atfork_child() */
    if (__atomic_load_n(&shim_atfork_child_registered, __ATOMIC_ACQUIRE)) {
        host_fds_library_span(1);
    }
    shim_forked_was_running = __atomic_load_n(&shim_server, __ATOMIC_ACQUIRE) != NULL ||
                              __atomic_load_n(&shim_forked_start_pending, __ATOMIC_ACQUIRE);
    /* The parent's start thread is not the child's: shim_atfork_child() makes it its own. */
    __atomic_store_n(&shim_forked_start_pending, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&shim_forked_start_phase, SHIM_START_NONE, __ATOMIC_RELEASE);
    /* The child has no loop thread; the parent owns the socket. Exec'd children get their own
     * server through LD_PRELOAD. */
    shim_server = NULL;
    shim_exec_stopped = NULL; /* the parent's, stopped by an exec of its under way at the fork */
    host_fds_forked_child();
    bridge_agent_source_forked_child();
}

/* The child's last handler of this file's (shim_atfork_register(), after libuv's, whose reinit
 * of its signal pipe the start thread's loop would otherwise race). */
static void
shim_atfork_child(void)
{
    pthread_attr_t attr;
    pthread_t thread;

    host_fds_library_span(0); /* libuv's child handler has run (shim_atfork_child_reset()) */
    /* The parent's server's fds: this child never runs that server (its own agent, below, makes
     * its own); bare it has none of them. After libuv's handler, which closes its signal lock
     * pipe and makes another. */
    host_fds_inherited_close();
    if (!shim_forked_was_running || !shim_follow_forks ||
        __atomic_load_n(&shim_sealed, __ATOMIC_ACQUIRE)) {
        return;
    }
    /* Forked inside the host's dl_iterate_phdr, on this thread or another (or while a library
     * dlopen waited past its bound for the forking thread's dlopen: host/dl.c): the loader's
     * list lock stays held in this child, or may, and the agent's start, which walks the loaded
     * objects, waited for it for good, its life lock held, and the child's exit() after it
     * (host-contract-dlfork-walk, -walkother; bare, it exits). A child that execs is profiled
     * in its new image, whose loader is new. */
    if (host_loader_list_lost()) {
        /* Said by one raw write: a fork's child handler must not take stdio's lock, which a
         * thread of the parent may have held at the fork (errno kept: the host's child runs on). */
        static const char why[] = "pipeprof: a child forked during a loader call, whose lock it "
                                  "may keep, is not profiled\n";
        int saved = errno;

        (void)syscall(SYS_write, 2, why, sizeof(why) - 1);
        errno = saved;
        return;
    }
    /* Most children of a shell exec at once, and their new image starts its own agent; a
     * child that is still this image a few milliseconds later is a worker, and starts one
     * here, on a thread that blocks every signal, as the agent's threads do. */
    if (pthread_attr_init(&attr) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        __atomic_store_n(&shim_forked_start_pending, 1, __ATOMIC_RELEASE);
        __atomic_store_n(&shim_forked_start_pid, getpid(), __ATOMIC_RELAXED);
        __atomic_store_n(&shim_forked_start_phase, SHIM_START_PENDING, __ATOMIC_RELEASE);
        if (host_thread_spawn(&thread, &attr, shim_forked_start_main, NULL) != 0) {
            __atomic_store_n(&shim_forked_start_phase, SHIM_START_NONE, __ATOMIC_RELEASE);
            __atomic_store_n(&shim_forked_start_pending, 0, __ATOMIC_RELEASE);
            fprintf(stderr, "pipeprof: the forked child %ld is not profiled: no thread\n",
                    (long)getpid());
        }
        pthread_attr_destroy(&attr);
    }
}

/*
 * Starts the agent and the server of this process. running: the host runs already (a fork()ed
 * child, where a thread of our own calls this, or an exec that failed): it is never held for a
 * suspend port, and the environment, which the host's threads may be reading, is left alone.
 */
static void
shim_start_process(int running)
{
    (void)shim_start_process_try(running, 0);
}

/* shim_start_process(), which returns 0 or the server's start error; quiet_again: an -EAGAIN
 * goes unsaid (the caller tries again). */
static int
shim_start_process_try(int running, int quiet_again)
{
    struct ipc_server_options opts;
    struct ipc_output_options output;
    int timeout_ms, err;

    if (__atomic_load_n(&shim_sealed, __ATOMIC_ACQUIRE) || shim_env_is("PIPEPROF_DISABLE", "1") ||
        shim_env_is("DOTNET_EnableDiagnostics", "0") ||
        shim_env_is("COMPlus_EnableDiagnostics", "0") ||
        shim_env_is("DOTNET_EnableDiagnostics_IPC", "0") || !shim_is_target()) {
        return 0;
    }
    if (!running) {
        static pthread_once_t resets_once = PTHREAD_ONCE_INIT;

        /* Before the server's start, whose uv_loop_init() registers libuv's own child handler:
         * child handlers run in the order they were registered, and libuv's closes its signal
         * pipe's fds through syscall(SYS_close), the library's marked fds there, which takes the
         * mark lock; host_fds_forked_child() frees that lock, which a library thread of the
         * parent may have held at the fork. Registered after, a forked child of
         * pp-sample-torture spun on the lock for good (agent-torture timed out in a fresh-clone
         * CI run, and in 2 of 10 and 1 of 15 runs by hand). */
        pthread_once(&resets_once, shim_atfork_register_resets);
    }
    memset(&opts, 0, sizeof(opts));
    timeout_ms = ipc_server_options_from_env(&opts, running);
    opts.thread_init = shim_thread_init;
    output.fd = ipc_output_file_open(running);
    output.providers = IPC_OUTPUT_PROVIDERS;
    opts.output = output.fd >= 0 ? &output : NULL;
    /* A `record` child whose session is deferred (lazy_start_ms) starts its agent with it, on
     * the loop thread, if it lives that long; its first samples count its CPU time from here.
     * Only from the constructor: another start (after a credential change) runs with the host's
     * threads, whose CPU time so far is not the session's. */
    if (opts.lazy_start_ms != 0 && opts.output == NULL && shim_loading) {
        shim_cpu_origin();
    } else {
        opts.lazy_start_ms = 0;
    }
    opts.source = shim_event_source_get(opts.lazy_start_ms == 0 &&
                                        (opts.diagnostic_ports != NULL || opts.output != NULL ||
                                         opts.dotnet_host || opts.key_override != 0));
#ifdef PP_HAVE_HTTP
    (void)bridge_http_configure(&opts, opts.source != NULL);
#endif
    shim_tls_internal++;
    err = ipc_server_start(&opts, &shim_server);
    shim_tls_internal--;
    if (err < 0) {
        if (err != -EAGAIN || !quiet_again) {
            fprintf(stderr, "pipeprof: diagnostic server not started: %s\n", strerror(-err));
        }
        return err;
    }
    shim_follow_forks = shim_env_is("PIPEPROF_FOLLOW_FORKS", "1") || opts.output != NULL;
    if (!running) {
        static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

        pthread_once(&atfork_once, shim_atfork_register);
    }
    if (timeout_ms != 0 && ipc_server_wait_resume(shim_server, timeout_ms) == -ETIMEDOUT) {
        fprintf(stderr,
                "pipeprof: no ResumeRuntime after %d ms (PIPEPROF_SUSPEND_TIMEOUT_MS); "
                "continuing\n",
                timeout_ms);
    }
    if (!running) {
        char pid[24];

        snprintf(pid, sizeof(pid), "%ld", (long)getpid());
        setenv("PIPEPROF_RESUMED_PID", pid, 1); /* before main: no other thread reads environ */
    }
    return 0;
}

static const struct host_server_hooks shim_host_hooks;

/* The load hook; also the restart after a credential change. The host contract's interposers
 * call back into this file from the start (_exit, exec and the rest pass through while no
 * server runs). */
/* host/fds.c: the host dup2()s onto one of the library's fds, which cannot move: the library
 * gives the number up, as the host asked, and stops. */
static void
shim_fd_taken(int fd)
{
    if (__atomic_load_n(&shim_server, __ATOMIC_ACQUIRE) == NULL) {
        return;
    }
    fprintf(stderr,
            "pipeprof: the program takes fd %d, which the profiler holds: profiling stops\n", fd);
    shim_stop();
}

/* The start at load (shim_start) and again after a credential change (creds_after). */
static void
shim_start_again(void)
{
    int saved_errno = errno; /* main() sees the errno it would see bare (0 from the loader) */

    /* libuv's fds are the library's where the library runs it (its threads, shim_own_code()):
     * its calls move them high and its closes forget them. uv_version binds to the first
     * definition: the host's own, where the executable exports libuv (nodesource's node). */
    host_fds_trust((const void *)uv_version);
    host_fds_set_taken(shim_fd_taken);
    host_set_server_hooks(&shim_host_hooks);
    /* The start-up, and its wait for ResumeRuntime, is the profiler's time on the host's thread:
     * a wall session that begins meanwhile samples it not. */
    shim_own_code(1);
    shim_start_process(0);
    shim_own_code(0);
    errno = saved_errno;
}

#define SHIM_QUICK_EXIT_MS 3000 /* how long _exit() waits for the sessions to end */

/* PIPEPROF_TEST_QUICK_STOP_MS=N, tests only: that wait's bound (0: it gives up at once, as one
 * that outlasted its bound on a loaded machine: the exec goes ahead while the agent samples). */
static int shim_quick_stop_ms = SHIM_QUICK_EXIT_MS;

/*
 * host/exit.c and host/exec.c: every session gets its rundown and end tag before an _exit or an
 * exec, within a bounded wait (a lock held by the exiting thread cannot hang the exit). Returns 1
 * when this process's own server was stopped; a fork()ed or vfork()ed child finds none here.
 */
static int
shim_quick_stop(void)
{
    int cancelled = shim_forked_start_settle(); /* a fork()ed child's start first */
    struct ipc_server *s = __atomic_exchange_n(&shim_server, NULL, __ATOMIC_ACQ_REL);
    int here = 0, err = 0;

    if (s != NULL) {
        shim_own_code(1); /* the wait for the sessions' end is not the host's time */
        here = host_fds_library_here(ipc_server_wake_fd(s));
        err = here < 0 ? 0 : ipc_server_stop_quick(s, shim_quick_stop_ms);
        shim_own_code(0);
    }
    if (err == -ESRCH || here < 0) {
        /* A vfork child's: not ours. Or a server this thread cannot wake (its wake fd's number
         * holds the host's file in this thread's private table): not stopped, it serves on, and
         * an exec that fails starts no other beside it. Before, it was dropped running and each
         * failed exec started another: "socket is taken (another server accepts on it)" and
         * "another recording of this process is draining the agent" (fds unsharekeep). */
        __atomic_store_n(&shim_server, s, __ATOMIC_RELEASE);
        return 0;
    }
    if (s != NULL) {
        /* woken: freed after an exec that fails */
        __atomic_store_n(&shim_exec_stopped, s, __ATOMIC_RELEASE);
    }
    return s != NULL || cancelled;
}

static void
shim_stop(void)
{
    struct ipc_server *s = __atomic_exchange_n(&shim_server, NULL, __ATOMIC_ACQ_REL);

    shim_own_code(1); /* the sessions' end and rundown are not the host's time */
    shim_tls_internal++;
    ipc_server_stop(s); /* sessions end (and release sampling) before the agent stops */
    shim_tls_internal--;
    ag_stop();
    shim_own_code(0); /* a restart (creds_after) samples this thread again */
}

#define SHIM_IDLE_EXIT_MS     2000  /* how long exit() waits for a server with no session */
#define SHIM_SESSIONS_EXIT_MS 10000 /* and for one whose sessions get their rundown */

/*
 * At exit() (the unload hook): every session gets its rundown and end tag within
 * SHIM_SESSIONS_EXIT_MS (a large trace's rundown on a loaded machine takes seconds), and a server
 * with no session gets SHIM_IDLE_EXIT_MS to end its loop (it needs about a millisecond; the
 * bound is for a loaded machine, where a woken thread can wait hundreds of ms for a CPU). A loop
 * that has not ended by then is stuck (in a callback, on a handle that does not close) and is left
 * to the process's end, with the agent: one line on stderr, no join, nothing freed. Before, the
 * join waited as long as the loop did (an idle .NET app once took 12 s to exit after SIGTERM).
 */
static void
shim_exit(void)
{
    struct ipc_server *s = __atomic_load_n(&shim_server, __ATOMIC_ACQUIRE);
    struct ipc_server_stats st;
    int bound, here, err, saved_errno = errno; /* the host's later destructors see its own errno */

    shim_own_code(1); /* the wait for the sessions' end is not the host's time */
    if (s != NULL) {
        ipc_server_get_stats(s, &st);
        bound = st.active_sessions > 0 ? SHIM_SESSIONS_EXIT_MS : SHIM_IDLE_EXIT_MS;
        /* the wake's eventfd is no file of the library's in this thread's table (host/fds.c):
         * the loop is not woken, and nothing is waited for */
        here = host_fds_library_here(ipc_server_wake_fd(s));
        err = here < 0 ? here : ipc_server_stop_quick(s, bound);
        if ((here < 0 || err == -ETIMEDOUT) &&
            __atomic_compare_exchange_n(&shim_server, &s, NULL, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            /* Each cause its own words: before, a refused wake said "did not stop within
             * 10000 ms" at once (real-hosts, bash under record --mode wall). */
            if (here < 0) {
                fprintf(stderr,
                        "pipeprof: the diagnostic server was not stopped at exit: its wake fd %d "
                        "is not the library's in this thread's fd table (%s): left to the "
                        "process's end\n",
                        ipc_server_wake_fd(s), strerror(-here));
            } else {
                fprintf(stderr,
                        "pipeprof: the diagnostic server did not stop within %d ms at exit: left "
                        "to the process's end\n",
                        bound);
            }
            goto out;
        }
        if (err == -ESRCH) {
            /* Another process's server: a vfork()ed child's exit() (its parent's memory, whose
             * server and agent shim_stop() would take away) or a child forked without the fork
             * handlers (a raw clone): nothing of it is this process's to stop. The vfork()ed
             * child has used up its parent's exit handlers, this one among them: the parent
             * registers its end again (shim_vfork_parent). */
            __atomic_store_n(&shim_exit_used, 1, __ATOMIC_RELEASE);
            __atomic_add_fetch(&shim_exit_finalized, 1, __ATOMIC_RELEASE);
            goto out;
        }
    }
    shim_stop(); /* the loop has ended: the join returns at once (a fork()ed child's: none) */
out:
    shim_own_code(0);
    errno = saved_errno;
}

/*
 * A vfork()ed child's exit() (not _exit(): after its exec failed) runs its parent's exit handlers
 * in the parent's memory, _dl_fini and with it shim_exit among them, and glibc marks them run
 * there: the parent's own exit(), and its return from main(), then run none, and its sessions got
 * no rundown and no end tag (`record`: "the trace of process N is incomplete"). atexit() and
 * __cxa_atexit() cannot put shim_exit back: once its list is done glibc refuses them (-1). What
 * exit() still runs is the exiting thread's thread-local destructors, first of all: shim_exit_tls
 * is registered there (__cxa_thread_atexit_impl, a glibc export since 2.18) on the main thread,
 * back in the parent after each such child (host/exit.c calls shim_vfork_parent after vfork()
 * returned). Only the main thread: its thread-local destructors run only in the process's exit
 * (the main thread's pthread_exit() runs none), where another thread's run at that thread's end
 * too. Each later child's exit() runs the main thread's destructors too, in the child: this one
 * then stops nothing (another pid) and is registered again once the parent runs on. It runs
 * before the host's handlers would, but the child used those up: no host code is left to run
 * after it but its stdio flush and the thread-local destructors the main thread registered
 * before it.
 *
 * shim_exit_used: 1 once such a child ran shim_exit (its server not its own: -ESRCH).
 * shim_exit_tls_armed: 1 while shim_exit_tls is registered on this thread; it clears it when it
 * runs, in the parent or in a child. shim_exit_tls_pid: the process that registered it, whose
 * exit it ends. All of it lives in the memory the parent shares with its vfork()ed children
 * (declared at the top). A fork()ed child of the parent's main thread inherits the registration
 * but not as its own (another pid): that child's fork handlers, this file's among them, were
 * unregistered by the same vfork()ed child's exit() (__cxa_finalize of every library), so it
 * runs no agent of its own either.
 */
extern int __cxa_thread_atexit_impl(void (*fn)(void *), void *obj, void *dso) __attribute__((weak));
extern void *__dso_handle;

static void
shim_exit_tls(void *unused)
{
    (void)unused;
    __atomic_store_n(&shim_exit_tls_armed, 0, __ATOMIC_RELEASE);
    if (getpid() == __atomic_load_n(&shim_exit_tls_pid, __ATOMIC_RELAXED)) {
        shim_exit(); /* the parent's exit: every session ends here, with its rundown */
    }
}

/*
 * The same child's exit() ran __cxa_finalize() of the library's object (_dl_fini runs it beside
 * shim_exit), which unregisters every fork handler the library registered (glibc's
 * __unregister_atfork of its DSO), in the memory the parent shares: the parent's next fork() ran
 * none of them. Its child then kept the fd gate's mark lock or the loader lock held when a
 * library thread had them at the fork (a close() or dlopen() of the child's waited for good), the
 * parent's server fds stayed open in it, and under `record` it was not recorded. They are
 * registered again, in their first order: the fd gate's with this file's reset, the loader's, the
 * agent's, this file's child handler. libuv's child handler (its own object's, used up by the same
 * exit()) cannot be: it re-makes the signal lock pipe that only libuv's signal and process
 * handles use, which the server has none of. shim_exit_finalized: how many such exits ran (each
 * child's exit() runs _dl_fini at most once in the process's life: glibc marks it run), and
 * shim_atfork_again how many the parent registered again after.
 */
static void
shim_atfork_register_again(void)
{
    unsigned done = __atomic_load_n(&shim_exit_finalized, __ATOMIC_ACQUIRE);
    unsigned seen = __atomic_load_n(&shim_atfork_again, __ATOMIC_ACQUIRE);

    /* one thread registers them (two threads' vfork()s may return at once: handlers registered
     * twice would take the fd gate's lock twice in a fork's prepare) */
    if (done == seen || !__atomic_compare_exchange_n(&shim_atfork_again, &seen, done, 0,
                                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        return;
    }
    host_fds_atfork_register_again(shim_atfork_child_reset);
    host_loader_atfork_register_again();
    ag_fork_handlers_register_again();
    if (__atomic_load_n(&shim_atfork_child_registered, __ATOMIC_ACQUIRE)) {
        (void)pthread_atfork(NULL, NULL, shim_atfork_child);
    }
}

/* host/exit.c: vfork() returned in the parent (errno kept there). */
static void
shim_vfork_parent(void)
{
    pid_t pid;

    shim_atfork_register_again();
    if (!__atomic_load_n(&shim_exit_used, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&shim_exit_tls_armed, __ATOMIC_ACQUIRE) ||
        __cxa_thread_atexit_impl == NULL) {
        return;
    }
    pid = getpid();
    if ((pid_t)syscall(SYS_gettid) != pid) {
        return; /* not the main thread: see above */
    }
    if (__cxa_thread_atexit_impl(shim_exit_tls, NULL, &__dso_handle) == 0) {
        __atomic_store_n(&shim_exit_tls_pid, pid, __ATOMIC_RELAXED);
        __atomic_store_n(&shim_exit_tls_armed, 1, __ATOMIC_RELEASE);
    }
}

/* host/sockets.c: a .NET runtime's socket names (ipc_redirect_path()); the server's own calls
 * pass through. */
static int
shim_socket_redirect(enum host_socket_op op, const char *path, char *out, size_t size)
{
    static const enum ipc_redirect_op ops[] = {
        [HOST_SOCKET_BIND] = IPC_REDIRECT_BIND,
        [HOST_SOCKET_CONNECT] = IPC_REDIRECT_CONNECT,
        [HOST_SOCKET_UNLINK] = IPC_REDIRECT_UNLINK,
    };

    return !shim_tls_internal && ipc_redirect_path(ops[op], path, out, size);
}

/* host/exec.c: an exec failed and this image runs on: it serves and samples again (a new agent
 * instance to its clients, so `pipeprof record` takes it as the next image). */
static void
shim_exec_failed(void)
{
    struct ipc_server *old = __atomic_exchange_n(&shim_exec_stopped, NULL, __ATOMIC_ACQ_REL);

    shim_own_code(1);
    /*
     * The stopped server's loop has ended (the exec's stop waited for it): joined at once, its
     * fds closed, freed. One whose stop outlasted its bound (a loaded machine; a rundown) is
     * waited for again here, SHIM_QUICK_EXIT_MS whatever PIPEPROF_TEST_QUICK_STOP_MS says, before
     * the image serves again: its loop thread still held the agent's records and its sessions,
     * and every session of the new server was refused ("session N: sampling not started: another
     * recording of this process is draining the agent", "event source: session start failed:
     * Device or resource busy") and its socket name was "taken (another server accepts on it)",
     * until it ended (a record child's tight loop of failed execs; with the exec's wait given up at
     * once, 327 refusals in 300 failed execs of 2 children). A loop still running after that is
     * left as before (it may be stuck: no unbounded join).
     */
    if (old != NULL && ipc_server_stop_quick(old, SHIM_QUICK_EXIT_MS) == 0) {
        shim_tls_internal++;
        ipc_server_stop(old);
        shim_tls_internal--;
    }
    shim_start_process(1);
    shim_own_code(0);
}

/* host/creds.c: the agent and the server stop before a credential change and start again after
 * it, with threads and a socket of the new credentials (host/creds.c says why). */
static int
shim_creds_before(void)
{
    if (__atomic_load_n(&shim_server, __ATOMIC_ACQUIRE) == NULL) {
        return 0;
    }
    shim_stop();
    return 1;
}

/* host/seccomp.c: the host is about to install a seccomp filter (or strict mode), which may
 * apply to the library's threads (SECCOMP_FILTER_FLAG_TSYNC) and does apply to the calling
 * thread, where the agent's signal handler runs: the library stops for good, and no later start
 * (creds_after, exec_failed, a fork()ed child's) creates threads under the filter. */
static void
shim_seccomp_before(void)
{
    if (__atomic_exchange_n(&shim_sealed, 1, __ATOMIC_ACQ_REL)) {
        return;
    }
    if (__atomic_load_n(&shim_server, __ATOMIC_ACQUIRE) != NULL) {
        fprintf(stderr, "pipeprof: the program installs a seccomp filter: profiling stops\n");
    }
    shim_stop(); /* also an agent that runs without a server */
}

/* What the host contract's interposers call back (host/host.h). */
static const struct host_server_hooks shim_host_hooks = {
    .sessions_end = shim_quick_stop,
    .exec_failed = shim_exec_failed,
    .creds_before = shim_creds_before,
    .creds_after = shim_start_again,
    .seccomp_before = shim_seccomp_before,
    .socket_redirect = shim_socket_redirect,
    .vfork_parent = shim_vfork_parent,
};

/* .init_array / .fini_array on Linux, __mod_init_func / __mod_term_func on macOS. */
/* The load hook (the constructor): the process's first start. */
static void
shim_start(void)
{
    const char *killed;

    host_filter_note_start(); /* before the server's first call (host/host.c) */
    killed = host_filter_killed();
    if (killed != NULL) {
        /* an inherited seccomp filter kills a call the library cannot do without: it stays
         * out of this process and of its children (host/host.c) */
        __atomic_store_n(&shim_sealed, 1, __ATOMIC_RELEASE);
        fprintf(stderr,
                "pipeprof: the program runs under a seccomp filter that kills %s(2), which "
                "profiling needs: profiling is off in this process\n",
                killed);
        return;
    }
    if (getenv("PIPEPROF_TEST_QUICK_STOP_MS") != NULL) {
        shim_quick_stop_ms = atoi(getenv("PIPEPROF_TEST_QUICK_STOP_MS"));
    }
    shim_loading = 1;
    shim_start_again();
    shim_loading = 0;
}

PP_LOAD_HOOK(shim_start);
PP_UNLOAD_HOOK(shim_exit);
