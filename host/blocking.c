/* SPDX-License-Identifier: MIT */
/*
 * host/blocking.c - blocking calls.
 *
 *   nanosleep clock_nanosleep usleep sleep
 *   poll ppoll select epoll_wait epoll_pwait
 *                        interposed for wall-clock sampling: on entry the agent records the
 *                        thread's stack under the libc function called (real) as its leaf (the
 *                        wall sampler reports a blocked thread from it, without a signal,
 *                        agent/wall.c), and an EINTR that one of the agent's signals caused is
 *                        retried with the time left, so the host never sees it. The host's
 *                        epoll_wait and epoll_pwait on a library fd fail with EBADF, as bare (one
 *                        may take an edge-triggered event from libuv's epoll: fds.c's header)
 *   read recv recvfrom   interposed for the recorded stack; restarted by SA_RESTART (the agent's
 *                        handler has it) except on a socket with SO_RCVTIMEO, where an EINTR
 *                        the agent caused is retried (the timeout then starts again); recv and
 *                        recvfrom with MSG_WAITALL that one of the agent's signals ended short
 *                        go on for the rest (writes.c's host_recv_waitall). The host's on a
 *                        library fd fail with EBADF, as bare (fds.c's header, the data calls)
 *   accept accept4
 *   pthread_cond_wait pthread_cond_timedwait pthread_join
 *                        interposed for the recorded stack only: these are restarted by
 *                        SA_RESTART or never fail with EINTR (an fd accept or accept4 gives the
 *                        library moves high, fds.c). The host's accept and accept4 on a library
 *                        fd fail with EBADF, as bare: one took a connection meant for the
 *                        library's listener (fds.c's header)
 *   (eintr.c has the calls the kernel never restarts beyond these)
 *
 * Every retry here and in eintr.c goes through one helper (host_wait_begin, host_wait_again,
 * host_wait_end and HOST_WAIT_RETRY, declared in internal.h, defined here with the timeouts'
 * arithmetic host_timeout_start and host_timeout_next).
 *
 * What the host may rely on: results, errno and out-parameters (rem, the fd sets, revents) are
 * libc's; a sleep or wait takes its full time however often the agent samples (timeouts are
 * recomputed from CLOCK_MONOTONIC across a retry; the caller's timeout goes to the first try as it
 * is and is read here only after the kernel read it, so that an unreadable one fails with EFAULT,
 * as bare, where reading it first killed the host: host-contract-eintr-badtimeout); sleep() cut
 * short returns glibc's whole seconds left (truncated, host-contract-signals-sleep); an EINTR from
 * a signal of the host's own reaches it, unless one of the agent's arrived during the same call
 * (XXX below). Without the agent's hooks, or on the agent's own threads, every call goes straight
 * to libc.
 *
 * Held by: test-agent-sampling (wall_mode_sleeps_are_complete_and_sampled_waiting: usleep at
 * 1000 Hz wall sampling returns no early EINTR and its stack is recorded from the interposer),
 * agent-torture (usleep, nanosleep and poll wait their full time and read blocks until data
 * arrives in a preloaded host sampled at 1000 Hz in wall mode), host-contract-eintr (recv, read
 * and recvfrom on a socket with SO_RCVTIMEO). No test holds clock_nanosleep, ppoll, select,
 * epoll_wait, epoll_pwait, accept, accept4 or the condition and join waits one by one.
 */
#include <errno.h>
#include <fcntl.h>
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

uint64_t
host_now_ns(void)
{
    struct timespec ts;

    return clock_gettime(CLOCK_MONOTONIC, &ts) == 0
                   ? (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec
                   : 0;
}

int
host_wait_begin(struct host_wait *w, uint64_t fa, const void *callee)
{
    /* While the agent is installed, whether it runs or not: a call made before a session
     * started, or as one ends, may meet one of its signals all the same. */
    w->h = host_agent();
    if (w->h == NULL) {
        return 0;
    }
    w->token = w->h->active() ? w->h->blocking_enter(fa, (uint64_t)(uintptr_t)callee) : NULL;
    w->sig0 = w->h->signals_handled();
    return 1;
}

int
host_wait_again(struct host_wait *w, long rc, int err)
{
    uint32_t now = w->h->signals_handled();

    if (rc != -1 || err != EINTR || now == w->sig0) {
        return 0;
    }
    w->h->eintr_absorbed();
    w->sig0 = now;
    return 1;
}

void
host_wait_end(const struct host_wait *w, int err)
{
    w->h->blocking_leave(w->token);
    errno = err;
}

void
host_timeout_start(struct host_timeout *t, const struct timespec *tmo)
{
    t->set = tmo != NULL;
    t->tmo = tmo;
    t->cur = tmo;
    t->start = tmo != NULL ? host_now_ns() : 0;
    t->deadline = 0;
}

void
host_timeout_next(struct host_timeout *t)
{
    uint64_t now = host_now_ns(), d;

    if (!t->set) {
        return;
    }
    if (t->cur == t->tmo) {
        /* the first retry: the kernel read the caller's timeout, which is read here now */
        t->deadline = t->start + (uint64_t)t->tmo->tv_sec * 1000000000u + (uint64_t)t->tmo->tv_nsec;
        t->cur = &t->left;
    }
    d = now >= t->deadline ? 0 : t->deadline - now;
    t->left.tv_sec = (time_t)(d / 1000000000u);
    t->left.tv_nsec = (long)(d % 1000000000u);
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
    const struct timespec *arg = req;
    struct host_wait w;
    int rc, err;

    if (real == NULL || !host_wait_begin(&w, fa, (void *)real)) {
        return real != NULL ? real(req, rem) : (errno = ENOSYS, -1);
    }
    do {
        rc = real(arg, &r2); /* the caller's first: the kernel's to read (EFAULT) */
        err = errno;
        left = r2;
        arg = &left;
    } while (host_wait_again(&w, rc, err));
    host_wait_end(&w, err);
    if (rc == -1 && err == EINTR && rem != NULL) {
        *rem = r2;
    }
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
    const struct timespec *arg = req;
    struct host_wait w;
    int rc;

    if (real == NULL || !host_wait_begin(&w, HOST_FA, (void *)real)) {
        return real != NULL ? real(clk, flags, req, rem) : ENOSYS;
    }
    for (;;) {
        rc = real(clk, flags, arg, &r2); /* returns the error number, not -1 */
        if (!host_wait_again(&w, rc == EINTR ? -1 : 0, EINTR)) {
            break;
        }
        /* (the caller's request is read only once the kernel read it: an EINTR) */
        left = flags & TIMER_ABSTIME ? *req : r2;
        arg = &left;
    }
    host_wait_end(&w, errno);
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
host_wait_ms(const struct host_ms_wait *mw, int timeout, uint64_t fa)
{
    struct host_wait w;
    uint64_t deadline;
    int rc, err, left = timeout;

    if (mw->real == NULL || !host_wait_begin(&w, fa, mw->real)) {
        return mw->real != NULL ? mw->once(mw, timeout) : (errno = ENOSYS, -1);
    }
    deadline = host_deadline(timeout);
    for (;;) {
        rc = mw->once(mw, left);
        err = errno;
        if (!host_wait_again(&w, rc, err)) {
            break;
        }
        left = host_left_ms(deadline);
    }
    host_wait_end(&w, err);
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
    HOST_REAL_OR_ENOSYS(int, (struct pollfd *, nfds_t, const struct timespec *, const sigset_t *),
                        ppoll)
    struct host_timeout t;

    host_timeout_start(&t, tmo);
    HOST_WAIT_RETRY(int, real(fds, n, tmo, mask), real(fds, n, t.cur, mask), host_timeout_next(&t));
}

HOST_EXPORT int
select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
    HOST_REAL_OR_ENOSYS(int, (int, fd_set *, fd_set *, fd_set *, struct timeval *), select)

    /* Linux leaves the sets untouched on EINTR and updates tv to the time left. */
    HOST_WAIT_RETRY(int, real(nfds, r, w, e, tv), real(nfds, r, w, e, tv), (void)0);
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
    if (HOST_FD_DATA_REFUSED(epfd)) {
        return -1;
    }
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
    if (HOST_FD_DATA_REFUSED(epfd)) {
        epfd = HOST_FD_NEVER; /* bare's errno: the mask is read before the fd (EFAULT) */
    }
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

/* Restarted by SA_RESTART, unless the fd is a socket with SO_RCVTIMEO: then retried. */
HOST_EXPORT ssize_t
read(int fd, void *buf, size_t len)
{
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1;
    }
    HOST_REAL_OR_ENOSYS(ssize_t, (int, void *, size_t), read)

    HOST_WAIT_RETRY(ssize_t, real(fd, buf, len), real(fd, buf, len), (void)0);
}

HOST_EXPORT ssize_t
recv(int fd, void *buf, size_t len, int flags)
{
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1;
    }
    HOST_REAL_OR_ENOSYS(ssize_t, (int, void *, size_t, int), recv)

    if (flags & MSG_WAITALL) {
        HOST_WAIT_RETRY(ssize_t, real(fd, buf, len, flags),
                        host_recv_waitall(real, fd, buf, len, flags), (void)0);
    }
    HOST_WAIT_RETRY(ssize_t, real(fd, buf, len, flags), real(fd, buf, len, flags), (void)0);
}

HOST_EXPORT ssize_t
recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *sa, socklen_t *salen)
{
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1;
    }
    HOST_REAL_OR_ENOSYS(ssize_t, (int, void *, size_t, int, struct sockaddr *, socklen_t *),
                        recvfrom)

    if (flags & MSG_WAITALL) {
        HOST_WAIT_RETRY(ssize_t, real(fd, buf, len, flags, sa, salen),
                        host_recvfrom_waitall(real, fd, buf, len, flags, sa, salen), (void)0);
    }
    HOST_WAIT_RETRY(ssize_t, real(fd, buf, len, flags, sa, salen),
                    real(fd, buf, len, flags, sa, salen), (void)0);
}

/* The fd is the library's when its code accepted it (fds.c moves it high). A library's accept on
 * a non-blocking socket (libuv's) holds the gate of fds.c meanwhile; a blocking one does not (the
 * host's closes would wait for a connection), and keeps the moment of the move. */
static int
host_fds_accept_held(int fd, const void *ra)
{
    int fl;

    if (!host_fds_create_begin(ra)) {
        return 0;
    }
    fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK)) {
        return 1;
    }
    (void)host_fds_create_end(1, -1); /* leaves the gate */
    return 0;
}

HOST_EXPORT int
accept(int fd, struct sockaddr *sa, socklen_t *salen)
{
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1;
    }
    HOST_REAL_OR_ENOSYS(int, (int, struct sockaddr *, socklen_t *), accept)
    struct host_wait w;
    unsigned entries;
    int rc;

    if (host_fds_accept_held(fd, __builtin_return_address(0))) {
        return host_fds_create_end(1, real(fd, sa, salen));
    }
    entries = host_fds_accepting(__builtin_return_address(0));
    if (!host_wait_begin(&w, HOST_FA, (void *)real)) {
        return host_fds_accepted(real(fd, sa, salen), __builtin_return_address(0), entries);
    }
    rc = real(fd, sa, salen);
    host_wait_end(&w, errno);
    return host_fds_accepted(rc, __builtin_return_address(0), entries);
}

HOST_EXPORT int
accept4(int fd, struct sockaddr *sa, socklen_t *salen, int flags)
{
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1;
    }
    HOST_REAL_OR_ENOSYS(int, (int, struct sockaddr *, socklen_t *, int), accept4)
    struct host_wait w;
    unsigned entries;
    int rc;

    if (host_fds_accept_held(fd, __builtin_return_address(0))) {
        return host_fds_create_end(1, real(fd, sa, salen, flags));
    }
    entries = host_fds_accepting(__builtin_return_address(0));
    if (!host_wait_begin(&w, HOST_FA, (void *)real)) {
        return host_fds_accepted(real(fd, sa, salen, flags), __builtin_return_address(0), entries);
    }
    rc = real(fd, sa, salen, flags);
    host_wait_end(&w, errno);
    return host_fds_accepted(rc, __builtin_return_address(0), entries);
}

/* The real function ret (*real) params, or ENOSYS returned (the pthread calls' way). */
#define HOST_REAL_OR_ENOSYS_RC(ret, params, name)                 \
    static _Atomic(void *) real_p;                                \
    ret(*real) params = (ret(*) params)host_real(&real_p, #name); \
                                                                  \
    if (real == NULL) {                                           \
        return ENOSYS;                                            \
    }

/* These return an error number and are never cut short by a handler: only the stack is kept. */
#define HOST_WAIT_RECORD(call)                              \
    do {                                                    \
        struct host_wait w_;                                \
        int rc_;                                            \
                                                            \
        if (!host_wait_begin(&w_, HOST_FA, (void *)real)) { \
            return call;                                    \
        }                                                   \
        rc_ = call;                                         \
        host_wait_end(&w_, errno);                          \
        return rc_;                                         \
    } while (0)

HOST_EXPORT int
pthread_cond_wait(pthread_cond_t *cond, pthread_mutex_t *mutex)
{
    HOST_REAL_OR_ENOSYS_RC(int, (pthread_cond_t *, pthread_mutex_t *), pthread_cond_wait)

    HOST_WAIT_RECORD(real(cond, mutex));
}

HOST_EXPORT int
pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *ts)
{
    HOST_REAL_OR_ENOSYS_RC(int, (pthread_cond_t *, pthread_mutex_t *, const struct timespec *),
                           pthread_cond_timedwait)

    HOST_WAIT_RECORD(real(cond, mutex, ts));
}

HOST_EXPORT int
pthread_join(pthread_t th, void **ret)
{
    HOST_REAL_OR_ENOSYS_RC(int, (pthread_t, void **), pthread_join)

    HOST_WAIT_RECORD(real(th, ret));
}
