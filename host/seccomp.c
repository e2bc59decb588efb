/* SPDX-License-Identifier: MIT */
/*
 * host/seccomp.c - seccomp filters and strict mode.
 *
 *   prctl            interposed for PR_SET_SECCOMP (SECCOMP_MODE_STRICT, SECCOMP_MODE_FILTER);
 *                    every other option passes straight through to libc. syscall()'s
 *                    SYS_seccomp (glibc has no seccomp() wrapper: programs and libseccomp make
 *                    it so) comes here from fds.c's syscall() interposer (host_seccomp_before).
 *                    A filter installed with SECCOMP_FILTER_FLAG_TSYNC applies to every thread
 *                    of the process, the library's too: a host whose filter answered EPERM to
 *                    what libuv's loop needs died of SIGSEGV (libuv aborted, abort() filtered),
 *                    preloaded and under record; a KILL-default filter kills it by SIGSYS. A
 *                    filter without TSYNC (and strict mode) applies to the calling thread, where
 *                    the agent's signal handler runs (its rt_sigreturn, its futex). So before a
 *                    call that installs one the server's seccomp_before hook stops the library
 *                    for good, as a credential change stops it (sessions end with rundown, the
 *                    agent stops sampling, every thread of the library ends) but without the
 *                    restart: no later start in this process or its fork()ed children (they
 *                    would create threads under the filter). One line on stderr says so.
 *
 * A call that cannot install anything passes without a stop: seccomp's other operations
 * (SECCOMP_GET_ACTION_AVAIL, SECCOMP_GET_NOTIF_SIZES, an unknown one), strict mode with flags or
 * arguments or under a filter already (EINVAL), a filter of a NULL program (EFAULT), and a filter
 * of a thread with neither no_new_privs nor CAP_SYS_ADMIN (EACCES): prctl(PR_GET_SECCOMP),
 * prctl(PR_GET_NO_NEW_PRIVS) and capget tell, three system calls. Other failures the kernel finds
 * (a flag it does not know, a program it rejects, a bad pointer other than NULL) still stop the
 * library first. What the host may rely on: libc's result and errno, as bare. Without the
 * server's hooks the call goes straight to libc.
 *
 * Held by: host-contract-seccomp-* (tests/hosts/seccomp.c: filters with and without TSYNC, an
 * EPERM-default and a KILL-default one, strict mode, a fork()ed child, bare vs preloaded vs
 * record vs listen mode).
 */
#include <errno.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "host/internal.h"

HOST_ANCHOR(seccomp);

typedef int (*host_prctl_fn)(int, unsigned long, unsigned long, unsigned long, unsigned long);

static _Atomic(void *) host_real_prctl_slot;

static int
host_prctl_real(int option, unsigned long a, unsigned long b, unsigned long c, unsigned long d)
{
    host_prctl_fn real = (host_prctl_fn)host_real(&host_real_prctl_slot, "prctl");

    if (real == NULL) {
        return (int)host_raw_syscall(SYS_prctl, option, (long)a, (long)b, (long)c, (long)d, 0);
    }
    return real(option, a, b, c, d);
}

/* 1 when the calling thread holds CAP_SYS_ADMIN in its user namespace (effective). */
static int
host_seccomp_admin(void)
{
    struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

    if (host_raw_syscall(SYS_capget, (long)&hdr, (long)data, 0, 0, 0, 0) != 0) {
        return 1; /* cannot tell: count it as a call that installs */
    }
    return (data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN)) != 0;
}

/* 1 when seccomp(op, flags, args) may install a filter or strict mode (the kernel's own checks
 * that can be made cheaply said nothing against it). */
static int
host_seccomp_installs(long op, unsigned long flags, const void *args)
{
    switch (op) {
    case SECCOMP_SET_MODE_STRICT:
        return flags == 0 && args == NULL &&
               host_prctl_real(PR_GET_SECCOMP, 0, 0, 0, 0) != SECCOMP_MODE_FILTER;
    case SECCOMP_SET_MODE_FILTER:
        return args != NULL &&
               (host_prctl_real(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 || host_seccomp_admin());
    default:
        return 0;
    }
}

void
host_seccomp_before(long op, unsigned long flags, const void *args)
{
    const struct host_server_hooks *h = host_server();
    int saved_errno = errno;

    if (h != NULL && host_seccomp_installs(op, flags, args)) {
        h->seccomp_before();
        atomic_store(&host_seccomp_sealed, 1);
    }
    errno = saved_errno;
}

/* Four arguments are read whatever the option takes, as libc's prctl() passes them on (fds.c's
 * syscall() says why AddressSanitizer is told not to look). */
HOST_EXPORT __attribute__((no_sanitize_address)) int
prctl(int option, ...)
{
    unsigned long a[4];
    va_list ap;

    va_start(ap, option);
    for (int i = 0; i < 4; i++) {
        a[i] = va_arg(ap, unsigned long);
    }
    va_end(ap);
    if (option == PR_SET_SECCOMP) {
        if (a[0] == SECCOMP_MODE_STRICT) {
            host_seccomp_before(SECCOMP_SET_MODE_STRICT, 0, NULL); /* the kernel ignores a[1] */
        } else if (a[0] == SECCOMP_MODE_FILTER) {
            host_seccomp_before(SECCOMP_SET_MODE_FILTER, 0, (const void *)a[1]);
        }
    }
    return host_prctl_real(option, a[0], a[1], a[2], a[3]);
}
