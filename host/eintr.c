/* SPDX-License-Identifier: MIT */
/*
 * host/eintr.c - blocking calls the kernel never restarts, beyond blocking.c's first set.
 *
 *   pselect sigtimedwait sigwaitinfo sem_wait sem_timedwait sem_clockwait epoll_pwait2
 *   recvmsg recvmmsg pause sigsuspend
 *                    interposed because in wall mode the sampling signal interrupted them and
 *                    they failed with EINTR, which bare they never do: pselect 3 to 7 times per
 *                    run at 100 Hz and 34 to 58 at 1000 Hz, sem_timedwait, sigtimedwait (CPU
 *                    mode and bare: 0). As blocking.c does, on entry the agent records the
 *                    thread's stack (the wall sampler then reports the thread without a
 *                    signal), and an EINTR that one of the agent's signals caused is retried,
 *                    with the time left for a relative timeout (an absolute one is passed again
 *                    as it was). read, recv and recvfrom of blocking.c retry the same way: on a
 *                    socket with SO_RCVTIMEO the kernel does not restart them. recvmsg with
 *                    MSG_WAITALL cut short by the agent's signal goes on for the rest, without
 *                    a control buffer (writes.c's host_recvmsg_waitall). The fds an SCM_RIGHTS
 *                    message brings take the lowest free numbers: the host's call waits for a
 *                    library fd's low moment, as accept does (fds.c, host_fds_received), and
 *                    so does recvmmsg's (retried as recvmsg; its timeout, which the kernel
 *                    checks only after a message, is passed again as it was). The host's
 *                    recvmsg and epoll_pwait2 on a library fd fail with EBADF, as bare (fds.c's
 *                    header, the data calls; an epoll wait may take libuv's edge-triggered event).
 *   semop semtimedop msgrcv msgsnd
 *                    System V semaphores and message queues: never restarted after a handler,
 *                    SA_RESTART or not (signal(7)); the same retry.
 *   (syscall)        fds.c's syscall() hands over the waits other libraries make with it
 *                    (host_syscall_is_wait): futex FUTEX_WAIT and FUTEX_WAIT_BITSET with a
 *                    timeout (the kernel ends them with EINTR when a handler runs; Rust's std
 *                    and other lock libraries call them so), io_getevents and io_pgetevents
 *                    (libaio calls them through syscall(): 26 to 37 EINTR of 40 waits per run in
 *                    wall mode at 1000 Hz before), semop, semtimedop, msgrcv and msgsnd.
 *
 * Each retry goes through the one helper of internal.h (host_wait_begin, host_wait_again,
 * host_wait_end, HOST_WAIT_RETRY), as blocking.c's do. The count that says "the agent caused
 * it" is the agent's signals handled by the thread, kept while the agent is installed even when
 * no session runs: a wait begun before a session started, or as it ends, is covered too.
 *
 * What the host may rely on: results, errno and out-parameters are libc's; an EINTR from a
 * signal of the host's own reaches it (unless one of the agent's arrived in the same call, as in
 * blocking.c; sigsuspend and pause block the agent's signal instead and are never retried, so
 * theirs always does, host_suspend below); a wait with a timeout lasts its timeout. recv with
 * SO_RCVTIMEO, retried, waits its timeout again from the retry (the socket's option cannot be
 * shortened from here). POSIX message queues (mq_receive, mq_timedreceive, mq_send, mq_timedsend)
 * and futex waits without a timeout need nothing: the kernel restarts them under the agent's
 * SA_RESTART (held by the host's mq_timedreceive case). Not covered (they can still see the agent's
 * EINTR in wall mode): FUTEX_WAIT_REQUEUE_PI, connect and send on sockets with SO_SNDTIMEO, and
 * system calls made without libc's functions (inline assembly, the Go runtime). Without the agent's
 * hooks, or on the agent's own threads, every call goes straight to libc.
 *
 * Held by: host-contract-eintr (tests/hosts/eintr.c: pselect, sem_timedwait, sem_wait,
 * sem_clockwait, sigtimedwait, recv, recvmsg, read and recvfrom with SO_RCVTIMEO, epoll_pwait2,
 * semop, semtimedop, msgrcv, mq_timedreceive, through syscall() io_getevents and both futex
 * waits, and sigwaitinfo, pause and sigsuspend ended by the host's own signal, each in a loop of
 * 40 waits while sampled at 1000 Hz in wall mode, with its count of EINTR, bare against
 * sampled; recvmmsg in 20000 short waits fed one datagram at a time, where 1 to 9 EINTR came
 * through per wall run without its retry); host-contract-suspend (sigsuspend ended by the one
 * SIGUSR1 the host raised, 4000 times while sampled at 1000 Hz: 1 or 2 swallowed per run, CPU and
 * wall mode, before).
 */
#include <errno.h>
#include <linux/futex.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/msg.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "host/internal.h"

HOST_ANCHOR(eintr);

HOST_EXPORT int
pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *tmo, const sigset_t *mask)
{
    HOST_REAL_OR_ENOSYS(
            int, (int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *),
            pselect)
    struct host_timeout t;

    host_timeout_start(&t, tmo);
    /* Linux leaves the sets untouched on EINTR. */
    HOST_WAIT_RETRY(int, real(n, r, w, e, tmo, mask), real(n, r, w, e, t.cur, mask),
                    host_timeout_next(&t));
}

HOST_EXPORT int
sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *tmo)
{
    HOST_REAL_OR_ENOSYS(int, (const sigset_t *, siginfo_t *, const struct timespec *), sigtimedwait)
    struct host_timeout t;

    host_timeout_start(&t, tmo);
    HOST_WAIT_RETRY(int, real(set, info, tmo), real(set, info, t.cur), host_timeout_next(&t));
}

HOST_EXPORT int
sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
    HOST_REAL_OR_ENOSYS(int, (const sigset_t *, siginfo_t *), sigwaitinfo)

    HOST_WAIT_RETRY(int, real(set, info), real(set, info), (void)0);
}

HOST_EXPORT int
sem_wait(sem_t *sem)
{
    HOST_REAL_OR_ENOSYS(int, (sem_t *), sem_wait)

    HOST_WAIT_RETRY(int, real(sem), real(sem), (void)0);
}

HOST_EXPORT int
sem_timedwait(sem_t *sem, const struct timespec *abstime)
{
    HOST_REAL_OR_ENOSYS(int, (sem_t *, const struct timespec *), sem_timedwait)

    HOST_WAIT_RETRY(int, real(sem, abstime), real(sem, abstime), (void)0);
}

int sem_clockwait(sem_t *sem, clockid_t clk, const struct timespec *abstime);

HOST_EXPORT int
sem_clockwait(sem_t *sem, clockid_t clk, const struct timespec *abstime)
{
    HOST_REAL_OR_ENOSYS(int, (sem_t *, clockid_t, const struct timespec *), sem_clockwait)

    HOST_WAIT_RETRY(int, real(sem, clk, abstime), real(sem, clk, abstime), (void)0);
}

int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *tmo,
                 const sigset_t *mask);

HOST_EXPORT int
epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *tmo,
             const sigset_t *mask)
{
    if (HOST_FD_DATA_REFUSED(epfd)) {
        epfd = HOST_FD_NEVER; /* bare's errno: the timeout and mask are read before the fd */
    }
    HOST_REAL_OR_ENOSYS(int,
                        (int, struct epoll_event *, int, const struct timespec *, const sigset_t *),
                        epoll_pwait2)
    struct host_timeout t;

    host_timeout_start(&t, tmo);
    HOST_WAIT_RETRY(int, real(epfd, ev, max, tmo, mask), real(epfd, ev, max, t.cur, mask),
                    host_timeout_next(&t));
}

/* The fds an SCM_RIGHTS message brings take the lowest free numbers: the host's wait for a
 * library fd's low moment and move down as accept's do (fds.c, host_fds_received). */
#define HOST_RECEIVED(rc) host_fds_received((rc), msg, __builtin_return_address(0), entries)

HOST_EXPORT ssize_t
recvmsg(int fd, struct msghdr *msg, int flags)
{
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1;
    }
    HOST_REAL_OR_ENOSYS(ssize_t, (int, struct msghdr *, int), recvmsg)
    unsigned entries = host_fds_accepting(__builtin_return_address(0));

    if (flags & MSG_WAITALL) {
        HOST_WAIT_RETRY(ssize_t, HOST_RECEIVED(real(fd, msg, flags)),
                        HOST_RECEIVED(host_recvmsg_waitall(real, fd, msg, flags)), (void)0);
    }
    HOST_WAIT_RETRY(ssize_t, HOST_RECEIVED(real(fd, msg, flags)),
                    HOST_RECEIVED(real(fd, msg, flags)), (void)0);
}

/* recvmmsg: the fds each message's SCM_RIGHTS brings, as recvmsg's (one wait before the call for
 * all of them); retried after the agent's EINTR, its timeout passed again as it was. */
HOST_EXPORT int
recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags, struct timespec *timeout)
{
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1;
    }
    HOST_REAL_OR_ENOSYS(int, (int, struct mmsghdr *, unsigned, int, struct timespec *), recvmmsg)
    const void *ra = __builtin_return_address(0);
    unsigned entries = host_fds_accepting(ra);

    HOST_WAIT_RETRY(
            int, host_fds_received_many(real(fd, vec, vlen, flags, timeout), vec, ra, entries),
            host_fds_received_many(real(fd, vec, vlen, flags, timeout), vec, ra, entries), (void)0);
}

/*
 * sigsuspend and pause end by a signal only. Retried after one of the agent's signals, as the
 * other waits are, a wait whose host signal came in the same call (host/internal.h's XXX) would
 * wait for a next one that may never come: a host that raised its one SIGUSR1 and waited for it
 * in sigsuspend hung (host-contract-suspend, CPU and wall mode at 1000 Hz). So the library's
 * signal is blocked for the wait and the call is made once: an EINTR is the host's. The agent's
 * signals wait until it returns; the wall sampler reports the thread from the stack recorded on
 * entry, and a suspended thread runs no CPU to sample. Not when the host has a handler of its own
 * for that signal, which may be what it waits for: then the retry, and the XXX, stay. The cost:
 * with SIG_DFL, a SIGPROF sent to the waiting thread (or to a process whose other threads block
 * it) ends the process when the wait ends, not at once. Returns the mask to wait with (buf, the
 * library's signal added), or NULL for the retry.
 */
static const sigset_t *
host_suspend_mask(const sigset_t *mask, sigset_t *buf)
{
    int signo = atomic_load_explicit(&host_sig.signo, memory_order_acquire);
    struct sigaction host;

    if (signo == 0) {
        return NULL;
    }
    host_sig_current(&host);
    if (host.sa_handler != SIG_DFL && host.sa_handler != SIG_IGN) {
        return NULL;
    }
    *buf = *mask;
    sigaddset(buf, signo);
    return buf;
}

/* sigsuspend(mask) for the host: once with the library's signal blocked, else retried. */
static int
host_suspend(int (*real)(const sigset_t *), const sigset_t *mask, uint64_t fa)
{
    struct host_wait w;
    sigset_t buf;
    const sigset_t *blocked;
    int rc, err;

    if (!host_wait_begin(&w, fa, (void *)real)) {
        return real(mask);
    }
    blocked = host_suspend_mask(mask, &buf);
    for (;;) {
        rc = real(blocked != NULL ? blocked : mask);
        err = errno;
        if (blocked != NULL || !host_wait_again(&w, rc, err)) {
            break;
        }
    }
    host_wait_end(&w, err);
    return rc;
}

HOST_EXPORT int
pause(void)
{
    HOST_REAL_OR_ENOSYS(int, (const sigset_t *), sigsuspend)
    sigset_t cur;

    /* pause() is sigsuspend() with the mask the thread has */
    if (host_sigmask_raw(SIG_BLOCK, NULL, &cur) != 0) {
        errno = ENOSYS;
        return -1;
    }
    return host_suspend(real, &cur, HOST_FA);
}

HOST_EXPORT int
sigsuspend(const sigset_t *mask)
{
    HOST_REAL_OR_ENOSYS(int, (const sigset_t *), sigsuspend)

    return host_suspend(real, mask, HOST_FA);
}

/* System V IPC: never restarted after a handler, SA_RESTART or not (signal(7)). */
HOST_EXPORT int
semop(int id, struct sembuf *ops, size_t n)
{
    HOST_REAL_OR_ENOSYS(int, (int, struct sembuf *, size_t), semop)

    HOST_WAIT_RETRY(int, real(id, ops, n), real(id, ops, n), (void)0);
}

HOST_EXPORT int
semtimedop(int id, struct sembuf *ops, size_t n, const struct timespec *tmo)
{
    HOST_REAL_OR_ENOSYS(int, (int, struct sembuf *, size_t, const struct timespec *), semtimedop)
    struct host_timeout t;

    host_timeout_start(&t, tmo);
    HOST_WAIT_RETRY(int, real(id, ops, n, tmo), real(id, ops, n, t.cur), host_timeout_next(&t));
}

HOST_EXPORT ssize_t
msgrcv(int id, void *msg, size_t size, long type, int flags)
{
    HOST_REAL_OR_ENOSYS(ssize_t, (int, void *, size_t, long, int), msgrcv)

    HOST_WAIT_RETRY(ssize_t, real(id, msg, size, type, flags), real(id, msg, size, type, flags),
                    (void)0);
}

HOST_EXPORT int
msgsnd(int id, const void *msg, size_t size, int flags)
{
    HOST_REAL_OR_ENOSYS(int, (int, const void *, size_t, int), msgsnd)

    HOST_WAIT_RETRY(int, real(id, msg, size, flags), real(id, msg, size, flags), (void)0);
}

/*
 * Waits made with syscall(): which argument holds a relative timeout (-1: none, or an absolute
 * one passed again as it was), or -2 when the call is no wait of this kind. futex(2)'s FUTEX_WAIT
 * and FUTEX_WAIT_BITSET with a timeout are ended by a handler with EINTR (the kernel's restart
 * block applies only when no handler runs); without one they are restarted by SA_RESTART and
 * pass through. io_getevents and io_pgetevents (libaio calls them through syscall()) and System V
 * IPC are never restarted.
 */
static int
host_syscall_timeout_arg(long n, const long a[6])
{
    switch (n) {
    case SYS_futex:
        if (a[3] == 0) {
            return -2;
        }
        switch ((int)a[1] & FUTEX_CMD_MASK) {
        case FUTEX_WAIT:
            return 3;
        case FUTEX_WAIT_BITSET:
            return -1;
        default:
            return -2;
        }
    case SYS_io_getevents:
#ifdef SYS_io_pgetevents
    case SYS_io_pgetevents:
#endif
        return 4;
#ifdef SYS_semtimedop
    case SYS_semtimedop:
        return 3;
#endif
#ifdef SYS_semop
    case SYS_semop:
#endif
#ifdef SYS_msgrcv
    case SYS_msgrcv:
    case SYS_msgsnd:
#endif
        return -1;
    default:
        return -2;
    }
}

int
host_syscall_is_wait(long n, const long a[6])
{
    return host_syscall_timeout_arg(n, a) != -2;
}

long
host_syscall_wait(host_syscall_fn real, long n, const long a[6], uint64_t fa)
{
    int at = host_syscall_timeout_arg(n, a);
    struct host_timeout t;
    struct host_wait w;
    long args[6], rc;
    int i, err;

    if (!host_wait_begin(&w, fa, (void *)real)) {
        return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
    }
    for (i = 0; i < 6; i++) {
        args[i] = a[i];
    }
    if (at >= 0) {
        host_timeout_start(&t, (const struct timespec *)a[at]);
    }
    for (;;) {
        rc = real(n, args[0], args[1], args[2], args[3], args[4], args[5]);
        err = errno;
        if (!host_wait_again(&w, rc, err)) {
            break;
        }
        if (at >= 0) {
            host_timeout_next(&t);
            args[at] = (long)(uintptr_t)t.cur;
        }
    }
    host_wait_end(&w, err);
    return rc;
}
