/* SPDX-License-Identifier: MIT */
/*
 * host/ns.c - namespace changes that need a process of one thread.
 *
 *   unshare setns    interposed because the kernel refuses some of them in a process of more
 *                    than one thread, with EINVAL: unshare with CLONE_NEWUSER, CLONE_THREAD,
 *                    CLONE_SIGHAND or CLONE_VM, setns into a user namespace, and setns into a
 *                    mount namespace (its fs_struct is shared by the threads). A single-threaded
 *                    host's call succeeds bare, and failed with the library's threads there
 *                    (`unshare -U true`, `unshare -r id`, `nsenter -t PID -m`: status 1, "Invalid
 *                    argument", preloaded or under `record`). For such a call of a host that has
 *                    no thread of its own but the caller, the server's creds_before hook stops
 *                    the agent and its server (sessions end with rundown), the call is made once
 *                    the library's threads are gone from the kernel's thread group, and
 *                    creds_after starts them again: in a new user namespace they run with its
 *                    credentials, as after a credential change (host/creds.c). A host with
 *                    threads of its own gets EINVAL bare too: its call passes through, its
 *                    sessions go on. Every other call (another namespace type, unshare's
 *                    CLONE_NEWNS or CLONE_FILES, which the kernel makes per thread) passes
 *                    through; CLONE_FILES gives the caller a private copy of the fd table,
 *                    whose copies of the library's fds fds.c records (host_fds_unshare_files,
 *                    as for close_range's CLOSE_RANGE_UNSHARE). syscall(SYS_unshare) and
 * syscall(SYS_setns) come here from fds.c's syscall() (host_ns_syscall_installed, set by server.c).
 *
 * What the host may rely on: libc's result and errno (-1 and ENOSYS when libc has no such call),
 * and the call's effect bare's; setns() of a library fd's number fails with EBADF, as bare (the
 * number is free there). The library's threads are counted from the tids they registered
 * (threads.c, host_thread_library_live), the process's from /proc/self/status. Without the
 * server's hooks the call goes straight to libc.
 *
 * Held by: host-contract-ns-user (unshare(CLONE_NEWUSER) by libc and syscall(), its uid_map
 * written, getuid() printed; then work that the record must sample), host-contract-ns-mount
 * (setns() into a mount namespace of a child's by libc and syscall(), with nstype 0 and
 * CLONE_NEWNS), host-contract-ns-threads (the same calls with a host thread running: EINVAL as
 * bare, sessions undisturbed). Skipped, loudly, where bare cannot make them.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "host/internal.h"

HOST_ANCHOR(ns);

/* unshare's flags the kernel refuses in a process of more than one thread (CLONE_NEWUSER implies
 * CLONE_THREAD), and the namespace types setns refuses so. */
#define HOST_NS_UNSHARE_ALONE (CLONE_NEWUSER | CLONE_THREAD | CLONE_SIGHAND | CLONE_VM)
#define HOST_NS_SETNS_ALONE   (CLONE_NEWUSER | CLONE_NEWNS)

/* How long the call waits for the library's stopped threads to leave the thread group, and how
 * long apart it looks. */
#define HOST_NS_GONE_MS  1000
#define HOST_NS_RECHECKS 10

static void
host_ns_sleep_ms(long ms)
{
    struct timespec ts = { 0, ms * 1000000L };

    host_raw_syscall(SYS_nanosleep, (long)&ts, 0, 0, 0, 0, 0);
}

/* The process's thread count (/proc/self/status), or -1. Raw system calls: the host's fds and
 * errno are not touched (the caller keeps errno). */
static int
host_ns_threads(void)
{
    char buf[2048];
    const char *p;
    long fd, n;

    fd = host_raw_syscall(SYS_openat, AT_FDCWD, (long)"/proc/self/status", O_RDONLY | O_CLOEXEC, 0,
                          0, 0);
    if (fd < 0) {
        return -1;
    }
    n = host_raw_syscall(SYS_read, fd, (long)buf, sizeof(buf) - 1, 0, 0, 0);
    host_raw_syscall(SYS_close, fd, 0, 0, 0, 0, 0);
    if (n <= 0) {
        return -1;
    }
    buf[n] = '\0';
    p = strstr(buf, "\nThreads:");
    return p != NULL ? atoi(p + strlen("\nThreads:")) : -1;
}

/* 1 when the process's threads are the caller and the library's, at least one: a host thread
 * would make the call fail bare too, and a process of one thread has nothing to stop (a vfork()ed
 * child, which shares its parent's memory, finds none of the library's threads in its process and
 * must not stop its parent's). Looked at again a few ms apart when it seems not: a library thread
 * whose clone did not come through this library's pthread_create (under ASan libuv's call goes to
 * the runtime's interceptor) is counted only once it registered itself (host/fds.c,
 * host_thread_mark_library); a restart's IPC loop thread had not yet when a host's second setns()
 * came at once (host-contract-ns-mount under ASan, 2 of 2 runs). */
static int
host_ns_host_alone(void)
{
    for (int i = 0;; i++) {
        int n = host_ns_threads(), library = host_thread_library_live();

        if (n < 0 || n == 1 || i == HOST_NS_RECHECKS) {
            return 0;
        }
        if (library > 0 && n - library <= 1) {
            return 1;
        }
        host_ns_sleep_ms(2);
    }
}

/*
 * Before a call that needs the process to itself: 1 when the library was stopped for it (then
 * host_creds_after() starts it again). pthread_join() of a stopped thread returns once the
 * thread's clear_child_tid futex is woken, from its exit's release of its memory, before the
 * kernel takes it off the thread group (exit_notify): the kernel would still count it and refuse
 * the call. So the call waits, bounded, until the process has one thread; past the bound it is
 * made anyway (and fails as it did before this file).
 */
static int
host_ns_before(int err)
{
    int stopped = 0;

    if (host_server() == NULL || !host_ns_host_alone()) {
        goto out;
    }
    stopped = host_creds_before();
    for (int ms = 0; stopped && ms < HOST_NS_GONE_MS && host_ns_threads() > 1; ms++) {
        host_ns_sleep_ms(1);
    }
out:
    errno = err;
    return stopped;
}

/* After the library's start again: until every thread but the caller is a registered library
 * thread (bounded as host_ns_before's wait), so that the host's next such call, at once, finds the
 * new threads counted (the restart's IPC loop thread registers itself in its first instructions;
 * under ASan its clone does not come through this library's pthread_create). */
static void
host_ns_after(int err)
{
    for (int ms = 0; ms < HOST_NS_GONE_MS && host_ns_threads() - host_thread_library_live() > 1;
         ms++) {
        host_ns_sleep_ms(1);
    }
    errno = err;
}

/* setns(fd, nstype) needs the process to itself: nstype names a user or mount namespace (a
 * pidfd's flags too), or is 0 and fd is such a namespace's. */
static int
host_ns_setns_alone(int fd, int nstype)
{
    long type;

    if (nstype != 0) {
        return (nstype & HOST_NS_SETNS_ALONE) != 0;
    }
    type = host_raw_syscall(SYS_ioctl, fd, NS_GET_NSTYPE, 0, 0, 0, 0);
    return type > 0 && (type & HOST_NS_SETNS_ALONE) != 0;
}

/* The host's call of n (SYS_unshare or SYS_setns) with arguments a, through call (libc's function
 * or its syscall()), with the library stopped around it when it needs that; ra: the caller. */
static long
host_ns_call(long (*call)(void *, long, const long[6]), void *real, long n, const long a[6],
             const void *ra)
{
    int alone, stopped, err = errno;
    long rc;

    if (n == SYS_setns) {
        if (host_fd_data_refused_by((int)a[0], ra)) {
            return -1; /* EBADF: the number is free bare */
        }
        alone = (int)a[0] >= 0 && host_ns_setns_alone((int)a[0], (int)a[1]);
    } else {
        alone = (a[0] & HOST_NS_UNSHARE_ALONE) != 0;
    }
    stopped = alone ? host_ns_before(err) : 0;
    /* a private fd table: fds.c records the copies of the library's fds it holds */
    rc = n == SYS_unshare && (a[0] & CLONE_FILES) ? host_fds_unshare_files(call, real, n, a, ra)
                                                  : call(real, n, a);
    err = errno;
    host_creds_after(stopped, err);
    if (stopped) {
        host_ns_after(err);
    }
    return rc;
}

static long
host_ns_libc(void *real, long n, const long a[6])
{
    return n == SYS_setns ? ((int (*)(int, int))real)((int)a[0], (int)a[1])
                          : ((int (*)(int))real)((int)a[0]);
}

static long
host_ns_raw(void *real, long n, const long a[6])
{
    return ((host_syscall_fn)real)(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

long
host_ns_syscall(host_syscall_fn real, long n, const long a[6], const void *ra)
{
    return host_ns_call(host_ns_raw, (void *)real, n, a, ra);
}

HOST_EXPORT int
unshare(int flags)
{
    HOST_REAL_OR_ENOSYS(int, (int), unshare);
    const long a[6] = { flags };

    return (int)host_ns_call(host_ns_libc, (void *)real, SYS_unshare, a,
                             __builtin_return_address(0));
}

HOST_EXPORT int
setns(int fd, int nstype)
{
    HOST_REAL_OR_ENOSYS(int, (int, int), setns);
    const long a[6] = { fd, nstype };

    return (int)host_ns_call(host_ns_libc, (void *)real, SYS_setns, a, __builtin_return_address(0));
}
