/* SPDX-License-Identifier: MIT */
/*
 * host/exec.c - replacing the image.
 *
 *   execve execv execvp execvpe execl execlp execle posix_spawn posix_spawnp system
 *                    interposed because the image is replaced, and with it the agent: the
 *                    server's sessions_end hook ends every session first, rundown included (as
 *                    for _exit), so a recording holds this image's samples with their names, and
 *                    the new image's agent starts the next one. After an exec that failed, the
 *                    exec_failed hook makes the image serve and sample again.
 *
 *                    The agent's exec_prepare hook, after that stop, takes the thread out of
 *                    sampling and drains the signal's instances pending for it: the new image
 *                    gets SIG_DFL from the kernel, and one of the agent's that went through the
 *                    exec ended it by SIGPROF (agent/host-hooks.c); exec_back undoes it when the
 *                    exec failed.
 *
 *                    All of them (posix_spawn, posix_spawnp and system for this alone) keep a
 *                    SIG_IGN the host has for the library's signal (inherited from a nohup-style
 *                    parent, or set with signal()) for the program they start: the library's
 *                    handler would reach it as SIG_DFL, and a child that sends itself SIGPROF
 *                    would die where bare it lives (host/signals.c, host_signals_spawn_begin).
 *
 * What the host may rely on: the program, arguments and environment libc's call would get; on
 * failure libc's result and errno (E2BIG for an execl* list of more than 4096 arguments, ENOSYS
 * when libc has no such call). execl and execlp become execv and execvp; execle becomes
 * execve. A vfork child, which shares its parent's memory, stops and starts nothing. Without the
 * server's hooks the call goes straight to libc.
 *
 * Held by: host-contract-sigign (tests/hosts/sigign.c: a SIGPROF-ignoring parent's children
 * through posix_spawn, system and fork+exec send themselves SIGPROF and live), cli-record-commands
 * (env, nice, sh -c 'exec ...', a chain of three execs, a script that execs: each image's samples
 * are in the recording; failexec: after a failed execv the image is recorded again), agent-torture
 * (fork + exec under the agent), host-contract-signals-execblocked and -execwhile (tests/hosts/
 * signals.c: execs with SIGPROF blocked, and while the agent samples, of a program without it),
 * host-contract-execfail-loop, -child and -child-quickstop (tests/hosts/execfail.c: 1000 failed
 * execve() calls, each errno and the next fd as bare under RLIMIT_NOFILE 1024, nothing on stderr:
 * the stopped server is waited for and freed before the restart).
 */
#include <errno.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#include "host/internal.h"

HOST_ANCHOR(exec);

typedef int (*host_execve_fn)(const char *, char *const[], char *const[]);
typedef int (*host_execv_fn)(const char *, char *const[]);

/* envp NULL: the execv form (execv, execvp), which takes no environment. */
static int
host_exec(_Atomic(void *) *slot, const char *name, const char *path, char *const argv[],
          char *const envp[])
{
    const struct host_server_hooks *h = host_server();
    const struct host_agent_hooks *a = host_agent();
    void *fn = host_real(slot, name);
    int stopped, ignored, rc, err, left = -1;

    stopped = h != NULL ? h->sessions_end() : 0;
    if (fn == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (a != NULL) {
        left = a->exec_prepare(); /* no signal of the agent's goes through the exec */
    }
    ignored = host_signals_spawn_begin(); /* the host's SIG_IGN, not the handler's SIG_DFL */
    if (envp == NULL) {
        rc = ((host_execv_fn)fn)(path, argv);
    } else {
        rc = ((host_execve_fn)fn)(path, argv, envp);
    }
    /* Here the exec failed and this image runs on. Not in a vfork child (stopped is 0 there),
     * which shares its parent's memory and threads. */
    err = errno;
    host_signals_spawn_end(ignored);
    if (a != NULL) {
        a->exec_back(left);
    }
    if (stopped) {
        h->exec_failed();
    }
    errno = err;
    return rc;
}

HOST_EXPORT int
execve(const char *path, char *const argv[], char *const envp[])
{
    static _Atomic(void *) real;

    return host_exec(&real, "execve", path, argv, envp);
}

HOST_EXPORT int
execv(const char *path, char *const argv[])
{
    static _Atomic(void *) real;

    return host_exec(&real, "execv", path, argv, NULL);
}

HOST_EXPORT int
execvp(const char *file, char *const argv[])
{
    static _Atomic(void *) real;

    return host_exec(&real, "execvp", file, argv, NULL);
}

HOST_EXPORT int
execvpe(const char *file, char *const argv[], char *const envp[])
{
    static _Atomic(void *) real;

    return host_exec(&real, "execvpe", file, argv, envp);
}

#define HOST_EXECL_MAX 4096 /* arguments of an execl* call (the kernel's limit is on bytes) */

/* Collects the NULL-terminated variadic arguments after arg0 into argv; -1 when too many. */
static int
host_execl_args(const char *arg0, va_list ap, char **argv)
{
    int n = 0;

    argv[n++] = (char *)arg0;
    while (arg0 != NULL && (argv[n] = va_arg(ap, char *)) != NULL) {
        if (++n == HOST_EXECL_MAX) {
            return -1;
        }
    }
    return n;
}

/* execl and execlp: the list becomes an argv for execv or execvp (interposed above). */
static int
host_execl_to_v(host_execv_fn execv_fn, const char *path, const char *arg0, va_list ap)
{
    char *argv[HOST_EXECL_MAX + 1];

    if (host_execl_args(arg0, ap, argv) < 0) {
        errno = E2BIG;
        return -1;
    }
    return execv_fn(path, argv);
}

HOST_EXPORT int
execl(const char *path, const char *arg0, ...)
{
    va_list ap;
    int rc;

    va_start(ap, arg0);
    rc = host_execl_to_v(execv, path, arg0, ap);
    va_end(ap);
    return rc;
}

HOST_EXPORT int
execlp(const char *file, const char *arg0, ...)
{
    va_list ap;
    int rc;

    va_start(ap, arg0);
    rc = host_execl_to_v(execvp, file, arg0, ap);
    va_end(ap);
    return rc;
}

HOST_EXPORT int
execle(const char *path, const char *arg0, ...)
{
    char *argv[HOST_EXECL_MAX + 1];
    char *const *envp;
    va_list ap;
    int n;

    va_start(ap, arg0);
    n = host_execl_args(arg0, ap, argv);
    envp = n < 0 ? NULL : va_arg(ap, char *const *);
    va_end(ap);
    if (n < 0) {
        errno = E2BIG;
        return -1;
    }
    return execve(path, argv, envp);
}

typedef int (*host_spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                             const posix_spawnattr_t *, char *const[], char *const[]);

static int
host_spawn(_Atomic(void *) *slot, const char *name, pid_t *pid, const char *path,
           const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr, char *const argv[],
           char *const envp[])
{
    host_spawn_fn real = (host_spawn_fn)host_real(slot, name);
    int ignored, rc;

    if (real == NULL) {
        return ENOSYS;
    }
    ignored = host_signals_spawn_begin();
    rc = real(pid, path, fa, attr, argv, envp);
    host_signals_spawn_end(ignored);
    return rc;
}

HOST_EXPORT int
posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
            const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    static _Atomic(void *) real;

    return host_spawn(&real, "posix_spawn", pid, path, fa, attr, argv, envp);
}

HOST_EXPORT int
posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
             const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    static _Atomic(void *) real;

    return host_spawn(&real, "posix_spawnp", pid, file, fa, attr, argv, envp);
}

HOST_EXPORT int
system(const char *command)
{
    static _Atomic(void *) real_p;
    int (*real)(const char *) = (int (*)(const char *))host_real(&real_p, "system");
    int ignored, rc;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    ignored = host_signals_spawn_begin();
    rc = real(command);
    host_signals_spawn_end(ignored);
    return rc;
}
