/* SPDX-License-Identifier: MIT */
/*
 * ipc/env.c - what a preloaded library's server takes from the environment (docs/ipc.md): the
 * listen path, the connect ports, the .NET host's way of serving, the suspend wait, and the file
 * PIPEPROF_OUTPUT names. The shim calls it from its constructor; nothing here keeps state.
 *
 *   PIPEPROF_DIAGNOSTIC_PORT=PATH       listen on PATH instead of the runtime's default name
 *   DOTNET_DiagnosticPorts=...          connect ports (advertise, suspend/nosuspend); also COMPlus_
 *   PIPEPROF_SUSPEND_TIMEOUT_MS=N       how long a suspend port holds start-up (default 30000;
 *                                       -1 waits forever, 0 does not wait)
 *   PIPEPROF_DOTNET_HOST=0|1            override the .NET-host detection (ipc/dotnet-host.c)
 *   PIPEPROF_DOTNET_MERGE=0             in a .NET host, step aside (a second socket, key+1)
 *                                       instead of serving the runtime's commands and merging
 *                                       its events (docs/dotnet-hosts.md)
 *   PIPEPROF_OUTPUT=PATH                record from the start to the exit into a nettrace file:
 *                                       "%p" the pid, "%%" a percent sign; any other '%' is
 *                                       refused. The first image of a process tree
 *                                       (PIPEPROF_OUTPUT_ROOT not set) writes PATH, replacing a
 *                                       file of an earlier run, as gperftools' CPUPROFILE does
 *                                       (only a regular file of this user's with one link,
 *                                       never through a symbolic link: the file is 0600);
 *                                       every later image (an exec'd or forked child, the same
 *                                       process after an exec) never replaces a file: a PATH
 *                                       without "%p" gets ".PID", and a name that exists gets
 *                                       ".2", ".3", ... (before a ".nettrace" extension, as
 *                                       `pipeprof record` names its children's traces)
 *   PIPEPROF_RECORD_LAZY=PID:PROVIDERS  set by `pipeprof record` for its tree (with
 *                                       PIPEPROF_RESUME_AT_SESSION=1): every image of a process
 *                                       other than PID (CMD's own) starts a session with
 *                                       PROVIDERS by itself, held in memory, and connects to the
 *                                       recording only once it has a sample; it is not held at
 *                                       its start (ipc_server_options.lazy_providers); in CPU
 *                                       mode an exec'd image starts that session, and its
 *                                       agent, only IPC_LAZY_START_MS after its constructor
 *                                       (ipc_server_options.lazy_start_ms)
 *   PIPEPROF_RECORD_TALLY=PATH          with it: an image that ends without a sample appends
 *                                       its pid and start time to PATH, for the recording's
 *                                       summary
 *   PIPEPROF_LAZY_START_MS=N            for tests: that deferred start after N ms (0: before
 *                                       main, as in wall mode); default IPC_LAZY_START_MS
 *   PIPEPROF_LISTEN_DEFER_MS=N          for tests: a lazy child binds its default socket N ms
 *                                       after its start (0: at once); default 50
 * Context: the constructor, or the thread that starts a fork()ed child's agent.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipc/ipc.h"

#define IPC_SUSPEND_TIMEOUT_MS 30000

/*
 * How long after its constructor a `record` child in CPU mode starts its session and agent
 * (ipc_server_options.lazy_start_ms). Most children of a build or a script have ended by then
 * (a /bin/true: well under a millisecond after its constructor) and never start them; a child
 * that lives on loses no CPU time to the wait: its first sample stands for the CPU time since
 * its constructor (ag_cpu_origin_set()). Kept under a sampling interval (10 ms at the default
 * 100 Hz). Wall mode starts at once: a wall pass that the wait skipped would be lost.
 */
#define IPC_LAZY_START_MS 5

static int
ipc_env_is(const char *name, const char *value)
{
    const char *v = getenv(name);

    return v != NULL && strcmp(v, value) == 0;
}

/*
 * An exec keeps the pid, and the new image's library starts again. A process whose start-up was
 * already held for a suspend port must not be held a second time (a recording resumes it once):
 * the first image leaves its pid in PIPEPROF_RESUMED_PID, which exec passes on.
 */
static int
ipc_env_resumed_before(void)
{
    const char *v = getenv("PIPEPROF_RESUMED_PID");

    return v != NULL && v[0] != '\0' && strtol(v, NULL, 10) == (long)getpid();
}

/* The number in variable name, lo..hi, or dflt when it is unset, or when it is no such number
 * (then with one line on stderr that says what was expected). */
static long
ipc_env_number(const char *name, long lo, long hi, long dflt, const char *expected)
{
    const char *env = getenv(name);
    char *end;
    long v;

    if (env == NULL || env[0] == '\0') {
        return dflt;
    }
    errno = 0;
    v = strtol(env, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "pipeprof: %s=%s: expected %s; the default, %ld ms, holds\n", name, env,
                expected, dflt);
        return dflt;
    }
    return v;
}

/* PIPEPROF_SUSPEND_TIMEOUT_MS, or its default. */
static int
ipc_env_suspend_timeout(void)
{
    return (int)ipc_env_number("PIPEPROF_SUSPEND_TIMEOUT_MS", -1, INT_MAX, IPC_SUSPEND_TIMEOUT_MS,
                               "-1 (forever) or a number of ms");
}

/* A test's knob of 0..60000 ms, or dflt. */
static unsigned
ipc_env_ms(const char *name, unsigned dflt)
{
    return (unsigned)ipc_env_number(name, 0, 60000, (long)dflt, "0 to 60000 ms");
}

/* Whether a lazy session with providers samples in wall mode: mode=wall in their filter data
 * (`record` names the mode there), or no mode named and PIPEPROF_MODE=wall. */
static int
ipc_env_lazy_wall(const char *providers)
{
    const char *mode = strstr(providers, "mode=");

    if (mode == NULL) {
        return ipc_env_is("PIPEPROF_MODE", "wall");
    }
    return strncmp(mode + 5, "wall", 4) == 0 &&
           (mode[9] == '\0' || mode[9] == ';' || mode[9] == ',' || mode[9] == '"');
}

/* The providers of PIPEPROF_RECORD_LAZY=PID:PROVIDERS when this process is not PID, else NULL.
 * CMD's own images (PID) connect at their start, as `record` needs CMD's trace even without a
 * sample. */
static const char *
ipc_env_lazy_providers(void)
{
    const char *v = getenv("PIPEPROF_RECORD_LAZY");
    char *end;
    long pid;

    if (v == NULL || v[0] == '\0') {
        return NULL;
    }
    errno = 0;
    pid = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != ':' || end[1] == '\0') {
        fprintf(stderr,
                "pipeprof: PIPEPROF_RECORD_LAZY=%s: expected PID:PROVIDERS (set by pipeprof "
                "record); this process connects at its start instead\n",
                v);
        return NULL;
    }
    return pid == (long)getpid() ? NULL : end + 1;
}

int
ipc_server_options_from_env(struct ipc_server_options *opts, int running)
{
    int dotnet_host = ipc_dotnet_host_detect();

    opts->listen_path = getenv("PIPEPROF_DIAGNOSTIC_PORT");
    if (opts->listen_path != NULL && opts->listen_path[0] == '\0') {
        opts->listen_path = NULL;
    }
    opts->diagnostic_ports = getenv("DOTNET_DiagnosticPorts");
    if (opts->diagnostic_ports == NULL) {
        opts->diagnostic_ports = getenv("COMPlus_DiagnosticPorts");
    }
    if (dotnet_host && ipc_env_is("PIPEPROF_DOTNET_MERGE", "0")) {
        /* Stepping aside: the runtime serves the default name and acts on
         * DOTNET_DiagnosticPorts itself. We take the same name with key+1: `ps` lists the pid,
         * `-p` picks the runtime's newer file, and PIPEPROF_DIAGNOSTIC_PORT reaches pipeprof. */
        opts->key_override = ipc_process_start_key(getpid()) + 1;
        opts->diagnostic_ports = NULL;
    } else if (dotnet_host) {
        /* The runtime's own server moves to a private name when it binds (host/sockets.c); this
         * server answers under the public one, forwards what only the runtime can answer and merges
         * its events into every session (docs/dotnet-hosts.md). The runtime holds its start-up for
         * suspend ports itself, so the constructor does not. */
        opts->dotnet_host = 1;
        return 0;
    }
    opts->resume_at_session = ipc_env_is("PIPEPROF_RESUME_AT_SESSION", "1");
    opts->lazy_providers = opts->resume_at_session ? ipc_env_lazy_providers() : NULL;
    opts->lazy_tally = opts->lazy_providers != NULL ? getenv("PIPEPROF_RECORD_TALLY") : NULL;
    /* An exec'd image only: a fork()ed child's start already waited (shim.c), as did the host. */
    opts->lazy_start_ms =
            opts->lazy_providers != NULL && !running && !ipc_env_lazy_wall(opts->lazy_providers)
                    ? ipc_env_ms("PIPEPROF_LAZY_START_MS", IPC_LAZY_START_MS)
                    : 0;
    opts->listen_defer_ms = ipc_env_ms("PIPEPROF_LISTEN_DEFER_MS", IPC_LISTEN_DEFER_MS);
    return running || ipc_env_resumed_before() || opts->lazy_providers != NULL
                   ? 0
                   : ipc_env_suspend_timeout();
}

#define IPC_OUTPUT_TRIES 100 /* names a later image tries before it gives up */
#define IPC_OUTPUT_EXT   ".nettrace"

/* Expands %p and %%. Returns 1 when the pid was named, 0 when not, -EINVAL or -ENAMETOOLONG. */
static int
ipc_output_expand(const char *tmpl, char *out, size_t cap)
{
    size_t o = 0;
    int named = 0, n;

    for (; *tmpl != '\0'; tmpl++) {
        if (*tmpl != '%') {
            n = snprintf(out + o, cap - o, "%c", *tmpl);
        } else if (tmpl[1] == 'p') {
            n = snprintf(out + o, cap - o, "%ld", (long)getpid());
            named = 1;
            tmpl++;
        } else if (tmpl[1] == '%') {
            n = snprintf(out + o, cap - o, "%%");
            tmpl++;
        } else {
            return -EINVAL;
        }
        if (n < 0 || (size_t)n >= cap - o) {
            return -ENAMETOOLONG;
        }
        o += (size_t)n;
    }
    return named;
}

/* path with ".SUFFIX" before its ".nettrace" extension (or at its end) into out. */
static int
ipc_output_suffix(const char *path, const char *suffix, char *out, size_t cap)
{
    size_t len = strlen(path), ext = strlen(IPC_OUTPUT_EXT);
    size_t stem = len > ext && strcmp(path + len - ext, IPC_OUTPUT_EXT) == 0 ? len - ext : len;
    int n = snprintf(out, cap, "%.*s.%s%s", (int)stem, path, suffix, path + stem);

    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/*
 * The first image's file: PATH is created, or replaced when it is a regular file of this user's
 * with one link (an earlier run's). Never through a symbolic link, and never another user's file,
 * a second name of a file (a hard link) or something that is not a regular file: a service run as
 * root with PIPEPROF_OUTPUT in a shared directory must not truncate or write a file another local
 * user put at that name (the pid %p stands for is easy to guess), nor wait on a FIFO put there.
 * The file is left 0600: it holds the process's command line and its functions' names. Returns
 * the descriptor, or -1 with errno and *why (a reason for the one line on stderr, or NULL for
 * strerror's).
 */
static int
ipc_output_open_first(const char *path, const char **why)
{
    struct stat st;
    int fd, err;

    *why = NULL;
    fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd < 0) {
        err = errno;
        *why = err == ELOOP   ? "a symbolic link (never followed)"
               : err == ENXIO ? "not a regular file"
                              : NULL;
        errno = err;
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        err = errno;
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        *why = "not a regular file";
        err = EPERM;
        goto fail;
    }
    if (st.st_uid != geteuid()) {
        *why = "another user's file";
        err = EPERM;
        goto fail;
    }
    if (st.st_nlink != 1) {
        *why = "a file with more than one name (a hard link)";
        err = EPERM;
        goto fail;
    }
    if (fcntl(fd, F_SETFL, 0) != 0 || ftruncate(fd, 0) != 0 || fchmod(fd, 0600) != 0) {
        err = errno;
        goto fail;
    }
    return fd;
fail:
    close(fd);
    errno = err;
    return -1;
}

int
ipc_output_file_open(int running)
{
    const char *tmpl = getenv("PIPEPROF_OUTPUT"), *root = getenv("PIPEPROF_OUTPUT_ROOT");
    char base[4096], path[4096 + 32], num[24];
    int first = root == NULL || root[0] == '\0', named, fd = -1, tries, err;
    const char *why = NULL;

    if (tmpl == NULL || tmpl[0] == '\0') {
        return -1;
    }
    named = ipc_output_expand(tmpl, base, sizeof(base));
    if (named == -EINVAL) {
        fprintf(stderr,
                "pipeprof: PIPEPROF_OUTPUT=%s: '%%' must be followed by p or %%; not "
                "recording\n",
                tmpl);
        return -1;
    }
    if (named == 0 && !first) {
        snprintf(num, sizeof(num), "%ld", (long)getpid());
        named = ipc_output_suffix(base, num, path, sizeof(base));
        if (named == 0) {
            memcpy(base, path, strlen(path) + 1);
        }
    }
    if (named < 0) {
        fprintf(stderr, "pipeprof: PIPEPROF_OUTPUT=%s: %s; not recording\n", tmpl,
                strerror(-named));
        return -1;
    }
    snprintf(path, sizeof(path), "%s", base);
    if (first) {
        fd = ipc_output_open_first(path, &why);
    }
    for (tries = 1; !first && fd < 0 && tries <= IPC_OUTPUT_TRIES; tries++) {
        if (tries > 1) {
            snprintf(num, sizeof(num), "%d", tries);
            if (ipc_output_suffix(base, num, path, sizeof(path)) < 0) {
                errno = ENAMETOOLONG;
                break;
            }
        }
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) {
            break;
        }
    }
    if (fd < 0) {
        err = errno;
        fprintf(stderr, "pipeprof: PIPEPROF_OUTPUT: %s: %s; not recording\n", path,
                why != NULL     ? why
                : err == EEXIST ? "every name taken"
                                : strerror(err));
        return -1;
    }
    if (first && !running) {
        snprintf(num, sizeof(num), "%ld", (long)getpid());
        setenv("PIPEPROF_OUTPUT_ROOT", num, 1); /* before main: no other thread reads environ */
    }
    return fd;
}
