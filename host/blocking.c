/* SPDX-License-Identifier: MIT */
/*
 * host/blocking.c - blocking calls.
 *
 *   nanosleep clock_nanosleep usleep sleep
 *   poll ppoll select epoll_wait epoll_pwait
 *                        interposed for wall-clock sampling: on entry the agent records the
 *                        thread's stack (the wall sampler reports a blocked thread from it,
 *                        without a signal, agent/wall.c), and an EINTR that one of the agent's
 *                        signals caused is retried with the time left, so the host never sees it
 *   read recv recvfrom   interposed for the recorded stack; restarted by SA_RESTART (the agent's
 *                        handler has it) except on a socket with SO_RCVTIMEO, where an EINTR
 *                        the agent caused is retried (the timeout then starts again)
 *   accept accept4
 *   pthread_cond_wait pthread_cond_timedwait pthread_join
 *                        interposed for the recorded stack only: these are restarted by
 *                        SA_RESTART or never fail with EINTR (an fd accept or accept4 gives the
 *                        library moves high, fds.c)
 *   (eintr.c has the calls the kernel never restarts beyond these)
 *
 * What the host may rely on: results, errno and out-parameters (rem, the fd sets, revents) are
 * libc's; a sleep or wait takes its full time however often the agent samples (timeouts are
 * recomputed from CLOCK_MONOTONIC across a retry); sleep() cut short returns glibc's whole
 * seconds left (truncated, host-contract-signals-sleep); an EINTR from a signal of the host's own
 * reaches it, unless one of the agent's arrived during the same call (XXX below). Without the
 * agent's hooks, or on the agent's own threads, every call goes straight to libc.
 *
 * Held by: test-agent-sampling (wall_mode_sleeps_are_complete_and_sampled_waiting: usleep at
 * 1000 Hz wall sampling returns no early EINTR and its stack is recorded from the interposer),
 * agent-torture (usleep, nanosleep and poll wait their full time and read blocks until data
 * arrives in a preloaded host sampled at 1000 Hz in wall mode). No test holds clock_nanosleep,
 * ppoll, select, epoll_wait, epoll_pwait, recv, recvfrom, accept, accept4 or the condition and
 * join waits one by one.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "host/internal.h"

HOST_ANCHOR(blocking);

static uint64_t
host_now_ns(void)
{
    struct timespec ts;

    return clock_gettime(CLOCK_MONOTONIC, &ts) == 0
                   ? (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec
                   : 0;
}

/* An EINTR with one of the agent's signals handled during the call: retry it. XXX(S): a host
 * signal delivered in the very same call would be swallowed too; both would have to coincide. */
static int
host_absorb(const struct host_agent_hooks *h, int rc, int err, uint32_t sig0)
{
    if (rc == -1 && err == EINTR && h->signals_handled() != sig0) {
        h->eintr_absorbed();
        return 1;
    }
    return 0;
}

static uint64_t
host_deadline(int timeout_ms)
{
    return timeout_ms < 0 ? 0 : host_now_ns() + (uint64_t)timeout_ms * 1000000u;
}

static int
host_left_ms(uint64_t deadline)
{
    uint64_t now = host_now_ns();

    if (deadline == 0) {
        return -1;
    }
    return now >= deadline ? 0 : (int)((deadline - now + 999999u) / 1000000u);
}

/* The body of nanosleep, usleep and sleep; fa is the interposer's own frame, so the recorded
 * stack starts at the host's call site. */
static int
host_nanosleep(const struct timespec *req, struct timespec *rem, uint64_t fa)
{
    static _Atomic(void *) real_p;
    int (*real)(const struct timespec *, struct timespec *) =
            (int (*)(const struct timespec *, struct timespec *))host_real(&real_p, "nanosleep");
    struct timespec left, r2 = { 0, 0 };
    const struct host_agent_hooks *h;
    void *t;
    uint32_t sig0;
    int rc, err;

    if (real == NULL || (h = host_agent_active()) == NULL) {
        return real != NULL ? real(req, rem) : (errno = ENOSYS, -1);
    }
    t = h->blocking_enter(fa);
    left = *req;
    do {
        sig0 = h->signals_handled();
        rc = real(&left, &r2);
        err = errno;
        left = r2;
    } while (host_absorb(h, rc, err, sig0));
    h->blocking_leave(t);
    if (rc == -1 && err == EINTR && rem != NULL) {
        *rem = r2;
    }
    errno = err;
    return rc;
}

HOST_EXPORT int
nanosleep(const struct timespec *req, struct timespec *rem)
{
    int rc = host_nanosleep(req, rem, HOST_FA);

    HOST_NO_TAIL_CALL();
    return rc;
}

HOST_EXPORT int
clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem)
{
    static _Atomic(void *) real_p;
    int (*real)(clockid_t, int, const struct timespec *, struct timespec *) =
            (int (*)(clockid_t, int, const struct timespec *, struct timespec *))host_real(
                    &real_p, "clock_nanosleep");
    struct timespec left, r2;
    const struct host_agent_hooks *h;
    void *t;
    uint32_t sig0;
    int rc;

    if (real == NULL || (h = host_agent_active()) == NULL) {
        return real != NULL ? real(clk, flags, req, rem) : ENOSYS;
    }
    t = h->blocking_enter(HOST_FA);
    left = *req;
    for (;;) {
        sig0 = h->signals_handled();
        rc = real(clk, flags, &left, &r2); /* returns the error number, not -1 */
        if (!host_absorb(h, rc == EINTR ? -1 : 0, EINTR, sig0)) {
            break;
        }
        if (!(flags & TIMER_ABSTIME)) {
            left = r2;
        }
    }
    h->blocking_leave(t);
    if (rc == EINTR && rem != NULL && !(flags & TIMER_ABSTIME)) {
        *rem = r2;
    }
    return rc;
}

HOST_EXPORT int
usleep(useconds_t us)
{
    struct timespec ts = { (time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L };

    int rc = host_nanosleep(&ts, NULL, HOST_FA);

    HOST_NO_TAIL_CALL();
    return rc;
}

HOST_EXPORT unsigned int
sleep(unsigned int s)
{
    struct timespec ts = { (time_t)s, 0 }, rem = { 0, 0 };

    if (host_nanosleep(&ts, &rem, HOST_FA) == 0) {
        return 0;
    }
    /* glibc returns the whole seconds left (truncated): interrupted 0.3 s into sleep(3), 2. */
    return (unsigned)rem.tv_sec;
}

/*
 * poll, epoll_wait and epoll_pwait: a wait whose timeout is in milliseconds (negative: forever).
 * once() makes the real call with the arguments kept here; after an EINTR the agent caused it is
 * made again with what is left of the first timeout.
 */
struct host_ms_wait {
    void *real;
    int (*once)(const struct host_ms_wait *w, int timeout_ms);
    void *items;          /* poll: the fds; epoll_*: the events */
    nfds_t nfds;          /* poll */
    int epfd, max;        /* epoll_*: the epoll fd, maxevents */
    const sigset_t *mask; /* epoll_pwait */
};

/* fa: the interposer's frame, so that the recorded stack starts at the host's call site. */
static int
host_wait_ms(const struct host_ms_wait *w, int timeout, uint64_t fa)
{
    const struct host_agent_hooks *h;
    uint64_t deadline;
    void *t;
    uint32_t sig0;
    int rc, err, left = timeout;

    if (w->real == NULL || (h = host_agent_active()) == NULL) {
        return w->real != NULL ? w->once(w, timeout) : (errno = ENOSYS, -1);
    }
    deadline = host_deadline(timeout);
    t = h->blocking_enter(fa);
    for (;;) {
        sig0 = h->signals_handled();
        rc = w->once(w, left);
        err = errno;
        if (!host_absorb(h, rc, err, sig0)) {
            break;
        }
        left = host_left_ms(deadline);
    }
    h->blocking_leave(t);
    errno = err;
    return rc;
}

static int
host_poll_once(const struct host_ms_wait *w, int timeout_ms)
{
    return ((int (*)(struct pollfd *, nfds_t, int))w->real)(w->items, w->nfds, timeout_ms);
}

HOST_EXPORT int
poll(struct pollfd *fds, nfds_t n, int timeout)
{
    static _Atomic(void *) real_p;
    struct host_ms_wait w = {
        .real = host_real(&real_p, "poll"), .once = host_poll_once, .items = fds, .nfds = n
    };
    int rc = host_wait_ms(&w, timeout, HOST_FA);

    HOST_NO_TAIL_CALL();
    return rc;
}

HOST_EXPORT int
ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
    static _Atomic(void *) real_p;
    int (*real)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *) =
            (int (*)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *))host_real(
                    &real_p, "ppoll");
    struct timespec left;
    uint64_t deadline = 0;
    const struct host_agent_hooks *h;
    void *t;
    uint32_t sig0;
    int rc, err;

    if (real == NULL || (h = host_agent_active()) == NULL) {
        return real != NULL ? real(fds, n, tmo, mask) : (errno = ENOSYS, -1);
    }
    if (tmo != NULL) {
        deadline = host_now_ns() + (uint64_t)tmo->tv_sec * 1000000000u + (uint64_t)tmo->tv_nsec;
        left = *tmo;
    }
    t = h->blocking_enter(HOST_FA);
    for (;;) {
        sig0 = h->signals_handled();
        rc = real(fds, n, tmo != NULL ? &left : NULL, mask);
        err = errno;
        if (!host_absorb(h, rc, err, sig0)) {
            break;
        }
        if (tmo != NULL) {
            uint64_t now = host_now_ns(), d = now >= deadline ? 0 : deadline - now;

            left.tv_sec = (time_t)(d / 1000000000u);
            left.tv_nsec = (long)(d % 1000000000u);
        }
    }
    h->blocking_leave(t);
    errno = err;
    return rc;
}

HOST_EXPORT int
select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
    static _Atomic(void *) real_p;
    int (*real)(int, fd_set *, fd_set *, fd_set *, struct timeval *) =
            (int (*)(int, fd_set *, fd_set *, fd_set *, struct timeval *))host_real(&real_p,
                                                                                    "select");
    const struct host_agent_hooks *h;
    void *t;
    uint32_t sig0;
    int rc, err;

    if (real == NULL || (h = host_agent_active()) == NULL) {
        return real != NULL ? real(nfds, r, w, e, tv) : (errno = ENOSYS, -1);
    }
    t = h->blocking_enter(HOST_FA);
    do {
        /* Linux leaves the sets untouched on EINTR and updates tv to the time left. */
        sig0 = h->signals_handled();
        rc = real(nfds, r, w, e, tv);
        err = errno;
    } while (host_absorb(h, rc, err, sig0));
    h->blocking_leave(t);
    errno = err;
    return rc;
}

static int
host_epoll_wait_once(const struct host_ms_wait *w, int timeout_ms)
{
    return ((int (*)(int, struct epoll_event *, int, int))w->real)(w->epfd, w->items, w->max,
                                                                   timeout_ms);
}

HOST_EXPORT int
epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
    static _Atomic(void *) real_p;
    struct host_ms_wait w = { .real = host_real(&real_p, "epoll_wait"),
                              .once = host_epoll_wait_once,
                              .items = ev,
                              .epfd = epfd,
                              .max = max };
    int rc = host_wait_ms(&w, timeout, HOST_FA);

    HOST_NO_TAIL_CALL();
    return rc;
}

static int
host_epoll_pwait_once(const struct host_ms_wait *w, int timeout_ms)
{
    return ((int (*)(int, struct epoll_event *, int, int, const sigset_t *))w->real)(
            w->epfd, w->items, w->max, timeout_ms, w->mask);
}

HOST_EXPORT int
epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout, const sigset_t *mask)
{
    static _Atomic(void *) real_p;
    struct host_ms_wait w = { .real = host_real(&real_p, "epoll_pwait"),
                              .once = host_epoll_pwait_once,
                              .items = ev,
                              .epfd = epfd,
                              .max = max,
                              .mask = mask };
    int rc = host_wait_ms(&w, timeout, HOST_FA);

    HOST_NO_TAIL_CALL();
    return rc;
}

/* Calls restarted by SA_RESTART: only the stack is recorded. */
HOST_EXPORT ssize_t
read(int fd, void *buf, size_t len)
{
    static _Atomic(void *) real_p;
    ssize_t (*real)(int, void *, size_t) =
            (ssize_t(*)(int, void *, size_t))host_real(&real_p, "read");
    const struct host_agent_hooks *h;
    void *t;
    ssize_t rc;
    uint32_t sig0;
    int err;

    if (real == NULL || (h = host_agent_active()) == NULL) {
        return real != NULL ? real(fd, buf, len) : (errno = ENOSYS, -1);
    }
    t = h->blocking_enter(HOST_FA);
    do { /* restarted by SA_RESTART, unless the socket has SO_RCVTIMEO */
        sig0 = h->signals_handled();
        rc = real(fd, buf, len);
        err = errno;
    } while (host_absorb(h, (int)rc, err, sig0));
    h->blocking_leave(t);
    errno = err;
    return rc;
}

HOST_EXPORT ssize_t
recv(int fd, void *buf, size_t len, int flags)
{
    static _Atomic(void *) real_p;
    ssize_t (*real)(int, void *, size_t, int) =
            (ssize_t(*)(int, void *, size_t, int))host_real(&real_p, "recv");
    const struct host_agent_hooks *h;
    void *t;
    ssize_t rc;
    uint32_t sig0;
    int err;

    if (real == NULL || (h = host_agent_active()) == NULL) {
        return real != NULL ? real(fd, buf, len, flags) : (errno = ENOSYS, -1);
    }
    t = h->blocking_enter(HOST_FA);
    do { /* restarted by SA_RESTART, unless the socket has SO_RCVTIMEO */
        sig0 = h->signals_handled();
        rc = real(fd, buf, len, flags);
        err = errno;
    } while (host_absorb(h, (int)rc, err, sig0));
    h->blocking_leave(t);
    errno = err;
    return rc;
}

HOST_EXPORT ssize_t
recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *sa, socklen_t *salen)
{
    static _Atomic(void *) real_p;
    ssize_t (*real)(int, void *, size_t, int, struct sockaddr *, socklen_t *) =
            (ssize_t(*)(int, void *, size_t, int, struct sockaddr *, socklen_t *))host_real(
                    &real_p, "recvfrom");
    const struct host_agent_hooks *h;
    void *t;
    ssize_t rc;
    uint32_t sig0;
    int err;

    if (real == NULL || (h = host_agent_active()) == NULL) {
        return real != NULL ? real(fd, buf, len, flags, sa, salen) : (errno = ENOSYS, -1);
    }
    t = h->blocking_enter(HOST_FA);
    do { /* restarted by SA_RESTART, unless the socket has SO_RCVTIMEO */
        sig0 = h->signals_handled();
        rc = real(fd, buf, len, flags, sa, salen);
        err = errno;
    } while (host_absorb(h, (int)rc, err, sig0));
    h->blocking_leave(t);
    errno = err;
    return rc;
}

HOST_EXPORT int
accept(int fd, struct sockaddr *sa, socklen_t *salen)
{
    static _Atomic(void *) real_p;
    int (*real)(int, struct sockaddr *, socklen_t *) =
            (int (*)(int, struct sockaddr *, socklen_t *))host_real(&real_p, "accept");
    const struct host_agent_hooks *h;
    void *t;
    int rc, err;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if ((h = host_agent_active()) == NULL) {
        return host_fds_created(real(fd, sa, salen), __builtin_return_address(0));
    }
    t = h->blocking_enter(HOST_FA);
    rc = real(fd, sa, salen);
    err = errno;
    h->blocking_leave(t);
    errno = err;
    return host_fds_created(rc, __builtin_return_address(0));
}

HOST_EXPORT int
accept4(int fd, struct sockaddr *sa, socklen_t *salen, int flags)
{
    static _Atomic(void *) real_p;
    int (*real)(int, struct sockaddr *, socklen_t *, int) =
            (int (*)(int, struct sockaddr *, socklen_t *, int))host_real(&real_p, "accept4");
    const struct host_agent_hooks *h;
    void *t;
    int rc, err;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if ((h = host_agent_active()) == NULL) {
        return host_fds_created(real(fd, sa, salen, flags), __builtin_return_address(0));
    }
    t = h->blocking_enter(HOST_FA);
    rc = real(fd, sa, salen, flags);
    err = errno;
    h->blocking_leave(t);
    errno = err;
    return host_fds_created(rc, __builtin_return_address(0));
}

HOST_EXPORT int
pthread_cond_wait(pthread_cond_t *cond, pthread_mutex_t *mutex)
{
    static _Atomic(void *) real_p;
    int (*real)(pthread_cond_t *, pthread_mutex_t *) =
            (int (*)(pthread_cond_t *, pthread_mutex_t *))host_real(&real_p, "pthread_cond_wait");
    const struct host_agent_hooks *h;
    void *t;
    int rc;

    if (real == NULL || (h = host_agent_active()) == NULL) {
        return real != NULL ? real(cond, mutex) : ENOSYS;
    }
    t = h->blocking_enter(HOST_FA);
    rc = real(cond, mutex);
    h->blocking_leave(t);
    return rc;
}

HOST_EXPORT int
pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *ts)
{
    static _Atomic(void *) real_p;
    int (*real)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *) =
            (int (*)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *))host_real(
                    &real_p, "pthread_cond_timedwait");
    const struct host_agent_hooks *h;
    void *t;
    int rc;

    if (real == NULL || (h = host_agent_active()) == NULL) {
        return real != NULL ? real(cond, mutex, ts) : ENOSYS;
    }
    t = h->blocking_enter(HOST_FA);
    rc = real(cond, mutex, ts);
    h->blocking_leave(t);
    return rc;
}

HOST_EXPORT int
pthread_join(pthread_t th, void **ret)
{
    static _Atomic(void *) real_p;
    int (*real)(pthread_t, void **) =
            (int (*)(pthread_t, void **))host_real(&real_p, "pthread_join");
    const struct host_agent_hooks *h;
    void *t;
    int rc;

    if (real == NULL || (h = host_agent_active()) == NULL) {
        return real != NULL ? real(th, ret) : ENOSYS;
    }
    t = h->blocking_enter(HOST_FA);
    rc = real(th, ret);
    h->blocking_leave(t);
    return rc;
}
