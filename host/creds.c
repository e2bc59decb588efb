/* SPDX-License-Identifier: MIT */
/*
 * host/creds.c - credential changes.
 *
 *   setuid setgid seteuid setegid setreuid setregid setresuid setresgid setgroups
 *                    interposed because glibc applies them to every thread of the process (a
 *                    signal to each, then the system call there) and aborts the process when one
 *                    thread fails. The agent's threads do not share what the caller prepared on
 *                    its own thread alone (prctl(PR_SET_KEEPCAPS), capset(): setpriv does both),
 *                    so after a first change they may lack the capability the next one needs,
 *                    and the host died in glibc's setxid_error. The server's creds_before hook
 *                    stops the agent and its server (sessions end with rundown) before the change
 *                    and creds_after starts them again after it: the new threads are created by
 *                    the caller with its new credentials, and the diagnostic socket is created
 *                    again, owned by the new uid (the old one is removed while still privileged).
 *
 * What the host may rely on: libc's result and errno (-1 and ENOSYS when libc has no such call);
 * the change applies to every thread of the host as libc's does. Without the server's hooks the
 * call goes straight to libc.
 *
 * Held by: agent-credentials (setpriv --reuid/--regid/--clear-groups, and a program that drops to
 * nobody itself with setgroups, setgid and setuid: the host runs to its end and serves a
 * diagnostic socket owned by the new uid; skipped, loudly, without root or setpriv). No test
 * holds seteuid, setegid, setreuid, setregid or setresgid one by one.
 */
#include <errno.h>
#include <grp.h>
#include <unistd.h>

#include "host/internal.h"

HOST_ANCHOR(creds);

int
host_creds_before(void)
{
    const struct host_server_hooks *h = host_server();

    return h != NULL && h->creds_before();
}

void
host_creds_after(int restart, int saved_errno)
{
    if (restart) {
        host_server()->creds_after();
    }
    errno = saved_errno;
}

#define HOST_CREDS_CALL(name, type, call)                         \
    HOST_EXPORT int name type                                     \
    {                                                             \
        static _Atomic(void *) real_p;                            \
        int(*real) type = (int(*) type)host_real(&real_p, #name); \
        int restart, rc, err;                                     \
                                                                  \
        if (real == NULL) {                                       \
            errno = ENOSYS;                                       \
            return -1;                                            \
        }                                                         \
        restart = host_creds_before();                            \
        rc = real call;                                           \
        err = errno;                                              \
        host_creds_after(restart, err);                           \
        return rc;                                                \
    }

HOST_CREDS_CALL(setuid, (uid_t u), (u))
HOST_CREDS_CALL(setgid, (gid_t g), (g))
HOST_CREDS_CALL(seteuid, (uid_t u), (u))
HOST_CREDS_CALL(setegid, (gid_t g), (g))
HOST_CREDS_CALL(setreuid, (uid_t r, uid_t e), (r, e))
HOST_CREDS_CALL(setregid, (gid_t r, gid_t e), (r, e))
HOST_CREDS_CALL(setresuid, (uid_t r, uid_t e, uid_t s), (r, e, s))
HOST_CREDS_CALL(setresgid, (gid_t r, gid_t e, gid_t s), (r, e, s))
HOST_CREDS_CALL(setgroups, (size_t n, const gid_t *list), (n, list))
