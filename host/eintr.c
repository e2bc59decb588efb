/* SPDX-License-Identifier: MIT */
/*
 * host/eintr.c - blocking calls the kernel never restarts, beyond blocking.c's first set.
 *
 *   pselect sigtimedwait sigwaitinfo sem_wait sem_timedwait sem_clockwait epoll_pwait2
 *   recvmsg pause sigsuspend
 *                    interposed because in wall mode the sampling signal interrupted them and
 *                    they failed with EINTR, which bare they never do: pselect 3 to 7 times per
 *                    run at 100 Hz and 34 to 58 at 1000 Hz, sem_timedwait, sigtimedwait (CPU
 *                    mode and bare: 0). As blocking.c does, on entry the agent records the
 *                    thread's stack (the wall sampler then reports the thread without a
 *                    signal), and an EINTR that one of the agent's signals caused is retried,
 *                    with the time left for a relative timeout (an absolute one is passed again
 *                    as it was). read, recv and recvfrom of blocking.c retry the same way: on a
 *                    socket with SO_RCVTIMEO the kernel does not restart them.
 *
 * What the host may rely on: results, errno and out-parameters are libc's; an EINTR from a
 * signal of the host's own reaches it (unless one of the agent's arrived in the same call, as in
 * blocking.c); a wait with a timeout lasts its timeout. recv with SO_RCVTIMEO, retried, waits
 * its timeout again from the retry (the socket's option cannot be shortened from here). Not
 * covered (they can still see the agent's EINTR in wall mode): semtimedop, msgrcv,
 * mq_timedreceive, io_getevents, futex waits made with syscall() (pthread_mutex_timedlock and
 * pthread_cond_clockwait inside libc are restarted by the kernel or by libc itself), connect and
 * send on sockets with SO_SNDTIMEO, and any raw system call. Without the agent's hooks, or on the
 * agent's own threads, every call goes straight to libc.
 *
 * Held by: host-contract-eintr (tests/hosts/eintr.c: pselect, sem_timedwait, sem_wait,
 * sigtimedwait and recv with SO_RCVTIMEO in a loop while sampled at 1000 Hz in wall mode, each
 * with its count of EINTR, bare against sampled).
 */
#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "host/internal.h"

HOST_ANCHOR(eintr);

/* A relative timeout carried across retries: what is left of it, from CLOCK_MONOTONIC. */
struct host_timeout {
    struct timespec left;
    uint64_t deadline;
    int set;
};

static uint64_t
host_eintr_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const struct timespec *
host_timeout_start(struct host_timeout *t, const struct timespec *tmo)
{
    t->set = tmo != NULL;
    if (tmo == NULL) {
        return NULL;
    }
    t->left = *tmo;
    t->deadline = host_eintr_now() + (uint64_t)tmo->tv_sec * 1000000000u + (uint64_t)tmo->tv_nsec;
    return &t->left;
}

static void
host_timeout_next(struct host_timeout *t)
{
    uint64_t now = host_eintr_now(), d;

    if (!t->set) {
        return;
    }
    d = now >= t->deadline ? 0 : t->deadline - now;
    t->left.tv_sec = (time_t)(d / 1000000000u);
    t->left.tv_nsec = (long)(d % 1000000000u);
}

/*
 * The body every interposer here shares: passes straight through without the agent (pass);
 * else records the stack and makes call until it returns something other than an EINTR the
 * agent caused, running next between tries. call fails with -1 and errno.
 */
#define HOST_EINTR_RETRY(type, pass, call, next)                                   \
    do {                                                                           \
        const struct host_agent_hooks *h_ = host_agent_active();                   \
        void *tok_;                                                                \
        uint32_t sig0_;                                                            \
        type rc_;                                                                  \
        int err_;                                                                  \
                                                                                   \
        if (h_ == NULL) {                                                          \
            return pass;                                                           \
        }                                                                          \
        tok_ = h_->blocking_enter(HOST_FA);                                        \
        for (;;) {                                                                 \
            sig0_ = h_->signals_handled();                                         \
            rc_ = call;                                                            \
            err_ = errno;                                                          \
            if (!(rc_ == -1 && err_ == EINTR && h_->signals_handled() != sig0_)) { \
                break;                                                             \
            }                                                                      \
            h_->eintr_absorbed();                                                  \
            next;                                                                  \
        }                                                                          \
        h_->blocking_leave(tok_);                                                  \
        errno = err_;                                                              \
        return rc_;                                                                \
    } while (0)

/* The real function, ret (*real) params, or -1 and ENOSYS. */
#define HOST_EINTR_REAL(ret, params, name)                        \
    static _Atomic(void *) real_p;                                \
    ret(*real) params = (ret(*) params)host_real(&real_p, #name); \
                                                                  \
    if (real == NULL) {                                           \
        errno = ENOSYS;                                           \
        return -1;                                                \
    }

HOST_EXPORT int
pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *tmo, const sigset_t *mask)
{
    HOST_EINTR_REAL(int,
                    (int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *),
                    pselect)
    struct host_timeout t;
    const struct timespec *left = host_timeout_start(&t, tmo);

    /* Linux leaves the sets untouched on EINTR. */
    HOST_EINTR_RETRY(int, real(n, r, w, e, tmo, mask), real(n, r, w, e, left, mask),
                     host_timeout_next(&t));
}

HOST_EXPORT int
sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *tmo)
{
    HOST_EINTR_REAL(int, (const sigset_t *, siginfo_t *, const struct timespec *), sigtimedwait)
    struct host_timeout t;
    const struct timespec *left = host_timeout_start(&t, tmo);

    HOST_EINTR_RETRY(int, real(set, info, tmo), real(set, info, left), host_timeout_next(&t));
}

HOST_EXPORT int
sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
    HOST_EINTR_REAL(int, (const sigset_t *, siginfo_t *), sigwaitinfo)

    HOST_EINTR_RETRY(int, real(set, info), real(set, info), (void)0);
}

HOST_EXPORT int
sem_wait(sem_t *sem)
{
    HOST_EINTR_REAL(int, (sem_t *), sem_wait)

    HOST_EINTR_RETRY(int, real(sem), real(sem), (void)0);
}

HOST_EXPORT int
sem_timedwait(sem_t *sem, const struct timespec *abstime)
{
    HOST_EINTR_REAL(int, (sem_t *, const struct timespec *), sem_timedwait)

    HOST_EINTR_RETRY(int, real(sem, abstime), real(sem, abstime), (void)0);
}

int sem_clockwait(sem_t *sem, clockid_t clk, const struct timespec *abstime);

HOST_EXPORT int
sem_clockwait(sem_t *sem, clockid_t clk, const struct timespec *abstime)
{
    HOST_EINTR_REAL(int, (sem_t *, clockid_t, const struct timespec *), sem_clockwait)

    HOST_EINTR_RETRY(int, real(sem, clk, abstime), real(sem, clk, abstime), (void)0);
}

int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *tmo,
                 const sigset_t *mask);

HOST_EXPORT int
epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *tmo,
             const sigset_t *mask)
{
    HOST_EINTR_REAL(int,
                    (int, struct epoll_event *, int, const struct timespec *, const sigset_t *),
                    epoll_pwait2)
    struct host_timeout t;
    const struct timespec *left = host_timeout_start(&t, tmo);

    HOST_EINTR_RETRY(int, real(epfd, ev, max, tmo, mask), real(epfd, ev, max, left, mask),
                     host_timeout_next(&t));
}

HOST_EXPORT ssize_t
recvmsg(int fd, struct msghdr *msg, int flags)
{
    HOST_EINTR_REAL(ssize_t, (int, struct msghdr *, int), recvmsg)

    HOST_EINTR_RETRY(ssize_t, real(fd, msg, flags), real(fd, msg, flags), (void)0);
}

HOST_EXPORT int
pause(void)
{
    HOST_EINTR_REAL(int, (void), pause)

    HOST_EINTR_RETRY(int, real(), real(), (void)0);
}

HOST_EXPORT int
sigsuspend(const sigset_t *mask)
{
    HOST_EINTR_REAL(int, (const sigset_t *), sigsuspend)

    HOST_EINTR_RETRY(int, real(mask), real(mask), (void)0);
}
