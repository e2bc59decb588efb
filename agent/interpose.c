/* SPDX-License-Identifier: MIT */
/*
 * agent/interpose.c - every libc function the agent interposes. shim/shim.c interposes three
 * more families, because they end or restart the diagnostic server: _exit and _Exit (sessions
 * end with rundown), the exec family (execve, execv, execvp, execvpe, execl, execlp, execle:
 * sessions end with rundown before the image is replaced) and the credential calls (setuid,
 * setgid, seteuid, setegid, setreuid, setregid, setresuid, setresgid, setgroups: the agent stops
 * and starts again around them, so its threads carry the new credentials). Each one here finds
 * the real function with dlsym(RTLD_NEXT) and adds only what the agent needs:
 *
 *   pthread_create            the new thread registers itself (stack bounds, CPU timer) before
 *                             its start routine runs, so its first instructions can be sampled
 *   nanosleep clock_nanosleep usleep sleep
 *   poll ppoll select epoll_wait epoll_pwait
 *   read recv recvfrom accept accept4
 *   pthread_cond_wait pthread_cond_timedwait pthread_join
 *                             blocking calls: while wall sampling is on, the thread's stack is
 *                             recorded on entry (the wall sampler reports it without a signal,
 *                             agent/wall.c), and an EINTR caused by one of the agent's signals
 *                             is retried with the time left, so the host never sees it
 *   pthread_sigmask sigprocmask
 *                             a thread that blocks the sampling signal gets no samples while
 *                             it does, and the pending one would land where it unblocks: the
 *                             CPU burned meanwhile is claimed as it unblocks, as an
 *                             AG_SOURCE_UNSEEN sample under the unblocking call's stack
 *
 * Context: host threads, in any state the host calls these from. The interposers must stay
 * cheap, must not allocate (pthread_create's wrapper allocates its argument, falling back to
 * the unwrapped call), and pass errno through unchanged.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/internal.h"

/*
 * Called by ag_start(). Nothing else in the agent calls into this file (the dynamic linker finds
 * the interposers, not a call), and a static archive's member is linked only when something
 * references it: without this call a program linked with pp_agent, or libpipeprof.so built
 * against a sanitizer runtime that defines read() itself, would silently lose every interposer.
 * Also resolves the real pthread_create before the agent creates its first thread.
 */
void
ag_interpose_init(void)
{
    (void)ag_real_pthread_create();
}

/* ---- thread creation ---- */

struct ag_ip_start_arg {
    void *(*fn)(void *);
    void *arg;
};

static void *
ag_ip_trampoline(void *p)
{
    struct ag_ip_start_arg a = *(struct ag_ip_start_arg *)p;

    free(p);
    ag_thread_attach_started(a.fn, (uint64_t)(uintptr_t)__builtin_frame_address(0));
    return a.fn(a.arg);
}

/* Interposed: wraps the start routine so that the new thread registers itself first. */
__attribute__((visibility("default"))) int
pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    ag_pthread_create_fn real = ag_real_pthread_create();
    struct ag_ip_start_arg *a;
    int rc;

    if (real == NULL) {
        return EAGAIN;
    }
    a = malloc(sizeof(*a));
    if (a == NULL) {
        return real(th, attr, fn, arg); /* unregistered: the /proc scan still finds it */
    }
    a->fn = fn;
    a->arg = arg;
    rc = real(th, attr, ag_ip_trampoline, a);
    if (rc != 0) {
        free(a);
    }
    return rc;
}

/* ---- blocking calls ---- */

/* Walks the stack of an interposer's caller into frames; fa is the interposer's frame address.
 * -EFAULT when its frame record cannot be read. */
static int
ag_ip_walk_caller(struct ag_thread *t, uint64_t fa, uint64_t *frames, uint32_t max,
                  struct ag_unwind_result *res)
{
    struct ag_unwind_ctx c;
    uint64_t lo, hi;

    lo = atomic_load_explicit(&t->stack_lo, memory_order_acquire);
    hi = atomic_load_explicit(&t->stack_hi, memory_order_acquire);
    if (hi == 0) {
        lo = ag_tls_stack_lo;
        hi = ag_tls_stack_hi;
    }
    ag_sig_unwind_ctx_init(&c, fa, lo, hi);
    ag_sig_unwind_caller(&c, fa, frames, max, res); /* from the interposer's frame */
    return res->depth != 0 ? 0 : -EFAULT;
}

struct ag_thread *
ag_thread_blocking_enter(uint64_t fa)
{
    uint64_t frames[AG_MAX_FRAMES];
    struct ag_unwind_result res;
    struct ag_thread *t;

    if (atomic_load_explicit(&ag.hz_wall, memory_order_relaxed) == 0) {
        return NULL;
    }
    t = ag_sig_thread_self();
    if (t == NULL || t->blk.frames == NULL ||
        ag_ip_walk_caller(t, fa, frames, ag.cfg.max_frames, &res) != 0) {
        return NULL;
    }
    ag_seqstack_put(&t->blk, frames, &res);
    atomic_store_explicit(&t->blocked, 1, memory_order_release);
    return t;
}

void
ag_thread_blocking_leave(struct ag_thread *t)
{
    if (t != NULL) {
        atomic_store_explicit(&t->blocked, 0, memory_order_release);
    }
}

void *
ag_interpose_real(_Atomic(void *) *slot, const char *name)
{
    void *p = atomic_load_explicit(slot, memory_order_acquire);

    if (p == NULL) {
        p = dlsym(RTLD_NEXT, name);
        atomic_store_explicit(slot, p, memory_order_release);
    }
    return p;
}

/* The agent runs and the caller is a host thread. */
static int
ag_ip_active(void)
{
    return atomic_load_explicit(&ag.running, memory_order_relaxed) && !ag_tls_excluded;
}

static uint32_t
ag_ip_signals(void)
{
    return atomic_load_explicit(&ag_tls_signals, memory_order_relaxed);
}

/* An EINTR with one of our signals handled during the call: retry it. XXX(S): a host signal
 * delivered in the very same call would be swallowed too; both would have to coincide. */
static int
ag_ip_absorb(int rc, int err, uint32_t sig0)
{
    if (rc == -1 && err == EINTR && ag_ip_signals() != sig0) {
        atomic_fetch_add_explicit(&ag.n_eintr_absorbed, 1, memory_order_relaxed);
        return 1;
    }
    return 0;
}

static uint64_t
ag_ip_deadline(int timeout_ms)
{
    return timeout_ms < 0 ? 0 : ag_now_ns() + (uint64_t)timeout_ms * 1000000u;
}

static int
ag_ip_left_ms(uint64_t deadline)
{
    uint64_t now = ag_now_ns();

    if (deadline == 0) {
        return -1;
    }
    return now >= deadline ? 0 : (int)((deadline - now + 999999u) / 1000000u);
}

#define AG_EXPORT         __attribute__((visibility("default")))
#define AG_FA             ((uint64_t)(uintptr_t)__builtin_frame_address(0))
/* Keeps the interposer's frame (whose address was passed down as fa) alive during the call. */
#define AG_NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

/* The body of nanosleep, usleep and sleep; fa is the interposer's own frame, so the recorded
 * stack starts at the host's call site. */
static int
ag_ip_nanosleep(const struct timespec *req, struct timespec *rem, uint64_t fa)
{
    static _Atomic(void *) real_p;
    int (*real)(const struct timespec *, struct timespec *) =
            (int (*)(const struct timespec *, struct timespec *))ag_interpose_real(&real_p,
                                                                                   "nanosleep");
    struct timespec left, r2 = { 0, 0 };
    struct ag_thread *t;
    uint32_t sig0;
    int rc, err;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(req, rem) : (errno = ENOSYS, -1);
    }
    t = ag_thread_blocking_enter(fa);
    left = *req;
    do {
        sig0 = ag_ip_signals();
        rc = real(&left, &r2);
        err = errno;
        left = r2;
    } while (ag_ip_absorb(rc, err, sig0));
    ag_thread_blocking_leave(t);
    if (rc == -1 && err == EINTR && rem != NULL) {
        *rem = r2;
    }
    errno = err;
    return rc;
}

AG_EXPORT int
nanosleep(const struct timespec *req, struct timespec *rem)
{
    int rc = ag_ip_nanosleep(req, rem, AG_FA);

    AG_NO_TAIL_CALL();
    return rc;
}

AG_EXPORT int
clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem)
{
    static _Atomic(void *) real_p;
    int (*real)(clockid_t, int, const struct timespec *, struct timespec *) =
            (int (*)(clockid_t, int, const struct timespec *, struct timespec *))ag_interpose_real(
                    &real_p, "clock_nanosleep");
    struct timespec left, r2;
    struct ag_thread *t;
    uint32_t sig0;
    int rc;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(clk, flags, req, rem) : ENOSYS;
    }
    t = ag_thread_blocking_enter(AG_FA);
    left = *req;
    for (;;) {
        sig0 = ag_ip_signals();
        rc = real(clk, flags, &left, &r2); /* returns the error number, not -1 */
        if (!ag_ip_absorb(rc == EINTR ? -1 : 0, EINTR, sig0)) {
            break;
        }
        if (!(flags & TIMER_ABSTIME)) {
            left = r2;
        }
    }
    ag_thread_blocking_leave(t);
    if (rc == EINTR && rem != NULL && !(flags & TIMER_ABSTIME)) {
        *rem = r2;
    }
    return rc;
}

AG_EXPORT int
usleep(useconds_t us)
{
    struct timespec ts = { (time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L };

    int rc = ag_ip_nanosleep(&ts, NULL, AG_FA);

    AG_NO_TAIL_CALL();
    return rc;
}

AG_EXPORT unsigned int
sleep(unsigned int s)
{
    struct timespec ts = { (time_t)s, 0 }, rem = { 0, 0 };

    if (ag_ip_nanosleep(&ts, &rem, AG_FA) == 0) {
        return 0;
    }
    return (unsigned)rem.tv_sec + (rem.tv_nsec > 0 ? 1u : 0u);
}

AG_EXPORT int
poll(struct pollfd *fds, nfds_t n, int timeout)
{
    static _Atomic(void *) real_p;
    int (*real)(struct pollfd *, nfds_t, int) =
            (int (*)(struct pollfd *, nfds_t, int))ag_interpose_real(&real_p, "poll");
    uint64_t deadline;
    struct ag_thread *t;
    uint32_t sig0;
    int rc, err, left = timeout;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(fds, n, timeout) : (errno = ENOSYS, -1);
    }
    deadline = ag_ip_deadline(timeout);
    t = ag_thread_blocking_enter(AG_FA);
    for (;;) {
        sig0 = ag_ip_signals();
        rc = real(fds, n, left);
        err = errno;
        if (!ag_ip_absorb(rc, err, sig0)) {
            break;
        }
        left = ag_ip_left_ms(deadline);
    }
    ag_thread_blocking_leave(t);
    errno = err;
    return rc;
}

AG_EXPORT int
ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
    static _Atomic(void *) real_p;
    int (*real)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *) =
            (int (*)(struct pollfd *, nfds_t, const struct timespec *,
                     const sigset_t *))ag_interpose_real(&real_p, "ppoll");
    struct timespec left;
    uint64_t deadline = 0;
    struct ag_thread *t;
    uint32_t sig0;
    int rc, err;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(fds, n, tmo, mask) : (errno = ENOSYS, -1);
    }
    if (tmo != NULL) {
        deadline = ag_now_ns() + (uint64_t)tmo->tv_sec * 1000000000u + (uint64_t)tmo->tv_nsec;
        left = *tmo;
    }
    t = ag_thread_blocking_enter(AG_FA);
    for (;;) {
        sig0 = ag_ip_signals();
        rc = real(fds, n, tmo != NULL ? &left : NULL, mask);
        err = errno;
        if (!ag_ip_absorb(rc, err, sig0)) {
            break;
        }
        if (tmo != NULL) {
            uint64_t now = ag_now_ns(), d = now >= deadline ? 0 : deadline - now;

            left.tv_sec = (time_t)(d / 1000000000u);
            left.tv_nsec = (long)(d % 1000000000u);
        }
    }
    ag_thread_blocking_leave(t);
    errno = err;
    return rc;
}

AG_EXPORT int
select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
    static _Atomic(void *) real_p;
    int (*real)(int, fd_set *, fd_set *, fd_set *, struct timeval *) =
            (int (*)(int, fd_set *, fd_set *, fd_set *, struct timeval *))ag_interpose_real(
                    &real_p, "select");
    struct ag_thread *t;
    uint32_t sig0;
    int rc, err;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(nfds, r, w, e, tv) : (errno = ENOSYS, -1);
    }
    t = ag_thread_blocking_enter(AG_FA);
    do {
        /* Linux leaves the sets untouched on EINTR and updates tv to the time left. */
        sig0 = ag_ip_signals();
        rc = real(nfds, r, w, e, tv);
        err = errno;
    } while (ag_ip_absorb(rc, err, sig0));
    ag_thread_blocking_leave(t);
    errno = err;
    return rc;
}

AG_EXPORT int
epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
    static _Atomic(void *) real_p;
    int (*real)(int, struct epoll_event *, int, int) =
            (int (*)(int, struct epoll_event *, int, int))ag_interpose_real(&real_p, "epoll_wait");
    uint64_t deadline;
    struct ag_thread *t;
    uint32_t sig0;
    int rc, err, left = timeout;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(epfd, ev, max, timeout) : (errno = ENOSYS, -1);
    }
    deadline = ag_ip_deadline(timeout);
    t = ag_thread_blocking_enter(AG_FA);
    for (;;) {
        sig0 = ag_ip_signals();
        rc = real(epfd, ev, max, left);
        err = errno;
        if (!ag_ip_absorb(rc, err, sig0)) {
            break;
        }
        left = ag_ip_left_ms(deadline);
    }
    ag_thread_blocking_leave(t);
    errno = err;
    return rc;
}

AG_EXPORT int
epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout, const sigset_t *mask)
{
    static _Atomic(void *) real_p;
    int (*real)(int, struct epoll_event *, int, int, const sigset_t *) =
            (int (*)(int, struct epoll_event *, int, int, const sigset_t *))ag_interpose_real(
                    &real_p, "epoll_pwait");
    uint64_t deadline;
    struct ag_thread *t;
    uint32_t sig0;
    int rc, err, left = timeout;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(epfd, ev, max, timeout, mask) : (errno = ENOSYS, -1);
    }
    deadline = ag_ip_deadline(timeout);
    t = ag_thread_blocking_enter(AG_FA);
    for (;;) {
        sig0 = ag_ip_signals();
        rc = real(epfd, ev, max, left, mask);
        err = errno;
        if (!ag_ip_absorb(rc, err, sig0)) {
            break;
        }
        left = ag_ip_left_ms(deadline);
    }
    ag_thread_blocking_leave(t);
    errno = err;
    return rc;
}

/* Calls restarted by SA_RESTART: only the stack is recorded. */
AG_EXPORT ssize_t
read(int fd, void *buf, size_t len)
{
    static _Atomic(void *) real_p;
    ssize_t (*real)(int, void *, size_t) =
            (ssize_t(*)(int, void *, size_t))ag_interpose_real(&real_p, "read");
    struct ag_thread *t;
    ssize_t rc;
    int err;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(fd, buf, len) : (errno = ENOSYS, -1);
    }
    t = ag_thread_blocking_enter(AG_FA);
    rc = real(fd, buf, len);
    err = errno;
    ag_thread_blocking_leave(t);
    errno = err;
    return rc;
}

AG_EXPORT ssize_t
recv(int fd, void *buf, size_t len, int flags)
{
    static _Atomic(void *) real_p;
    ssize_t (*real)(int, void *, size_t, int) =
            (ssize_t(*)(int, void *, size_t, int))ag_interpose_real(&real_p, "recv");
    struct ag_thread *t;
    ssize_t rc;
    int err;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(fd, buf, len, flags) : (errno = ENOSYS, -1);
    }
    t = ag_thread_blocking_enter(AG_FA);
    rc = real(fd, buf, len, flags);
    err = errno;
    ag_thread_blocking_leave(t);
    errno = err;
    return rc;
}

AG_EXPORT ssize_t
recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *sa, socklen_t *salen)
{
    static _Atomic(void *) real_p;
    ssize_t (*real)(int, void *, size_t, int, struct sockaddr *, socklen_t *) =
            (ssize_t(*)(int, void *, size_t, int, struct sockaddr *, socklen_t *))ag_interpose_real(
                    &real_p, "recvfrom");
    struct ag_thread *t;
    ssize_t rc;
    int err;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(fd, buf, len, flags, sa, salen) : (errno = ENOSYS, -1);
    }
    t = ag_thread_blocking_enter(AG_FA);
    rc = real(fd, buf, len, flags, sa, salen);
    err = errno;
    ag_thread_blocking_leave(t);
    errno = err;
    return rc;
}

AG_EXPORT int
accept(int fd, struct sockaddr *sa, socklen_t *salen)
{
    static _Atomic(void *) real_p;
    int (*real)(int, struct sockaddr *, socklen_t *) =
            (int (*)(int, struct sockaddr *, socklen_t *))ag_interpose_real(&real_p, "accept");
    struct ag_thread *t;
    int rc, err;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(fd, sa, salen) : (errno = ENOSYS, -1);
    }
    t = ag_thread_blocking_enter(AG_FA);
    rc = real(fd, sa, salen);
    err = errno;
    ag_thread_blocking_leave(t);
    errno = err;
    return rc;
}

AG_EXPORT int
accept4(int fd, struct sockaddr *sa, socklen_t *salen, int flags)
{
    static _Atomic(void *) real_p;
    int (*real)(int, struct sockaddr *, socklen_t *, int) =
            (int (*)(int, struct sockaddr *, socklen_t *, int))ag_interpose_real(&real_p,
                                                                                 "accept4");
    struct ag_thread *t;
    int rc, err;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(fd, sa, salen, flags) : (errno = ENOSYS, -1);
    }
    t = ag_thread_blocking_enter(AG_FA);
    rc = real(fd, sa, salen, flags);
    err = errno;
    ag_thread_blocking_leave(t);
    errno = err;
    return rc;
}

AG_EXPORT int
pthread_cond_wait(pthread_cond_t *cond, pthread_mutex_t *mutex)
{
    static _Atomic(void *) real_p;
    int (*real)(pthread_cond_t *, pthread_mutex_t *) =
            (int (*)(pthread_cond_t *, pthread_mutex_t *))ag_interpose_real(&real_p,
                                                                            "pthread_cond_wait");
    struct ag_thread *t;
    int rc;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(cond, mutex) : ENOSYS;
    }
    t = ag_thread_blocking_enter(AG_FA);
    rc = real(cond, mutex);
    ag_thread_blocking_leave(t);
    return rc;
}

AG_EXPORT int
pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *ts)
{
    static _Atomic(void *) real_p;
    int (*real)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *) =
            (int (*)(pthread_cond_t *, pthread_mutex_t *,
                     const struct timespec *))ag_interpose_real(&real_p, "pthread_cond_timedwait");
    struct ag_thread *t;
    int rc;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(cond, mutex, ts) : ENOSYS;
    }
    t = ag_thread_blocking_enter(AG_FA);
    rc = real(cond, mutex, ts);
    ag_thread_blocking_leave(t);
    return rc;
}

AG_EXPORT int
pthread_join(pthread_t th, void **ret)
{
    static _Atomic(void *) real_p;
    int (*real)(pthread_t, void **) =
            (int (*)(pthread_t, void **))ag_interpose_real(&real_p, "pthread_join");
    struct ag_thread *t;
    int rc;

    if (real == NULL || !ag_ip_active()) {
        return real != NULL ? real(th, ret) : ENOSYS;
    }
    t = ag_thread_blocking_enter(AG_FA);
    rc = real(th, ret);
    ag_thread_blocking_leave(t);
    return rc;
}

/* ---- the signal mask ---- */

static _Atomic(void *) ag_ip_real_pthread_sigmask, ag_ip_real_sigprocmask;

typedef int (*ag_ip_sigmask_fn)(int, const sigset_t *, sigset_t *);

/*
 * Claims the CPU thread t burned since its last sample as a sample of its own ring, while the
 * sampling signal is blocked (this thread is the ring's only producer then). frames/res: a stack
 * walked from an interposer's caller (its leaf a return address, which symbolizes to the caller,
 * as a pc just after the call would). unseen: AG_SOURCE_UNSEEN, the marker over that stack; else
 * AG_SOURCE_TAIL, what a sample at the moment would have stood for. Spans under half an interval
 * are left to the next sample or claim.
 */
static void
ag_ip_claim(struct ag_thread *t, uint64_t cpu, int unseen, const uint64_t *frames,
            const struct ag_unwind_result *res)
{
    unsigned hz = atomic_load_explicit(&ag.hz_cpu, memory_order_relaxed);
    uint32_t depth = res->depth, skip = unseen ? 1 : 0;
    uint64_t delta, weight;
    struct ag_sample *s;

    if (hz == 0 || atomic_load_explicit(&t->last_cpu_ns, memory_order_relaxed) == 0) {
        return; /* not sampled in CPU mode */
    }
    weight = ag_sig_cpu_weigh(t, cpu, 1000000000u / hz, 0, &delta);
    if (weight == 0) {
        return;
    }
    atomic_fetch_add_explicit(&ag.n_cpu_weight, weight, memory_order_relaxed);
    atomic_fetch_add_explicit(&ag.cpu_sampled_ns, delta, memory_order_relaxed);
    atomic_fetch_add_explicit(unseen ? &ag.cpu_unseen_ns : &ag.n_cpu_tails, unseen ? delta : 1,
                              memory_order_relaxed);
    s = ag_ring_reserve(&t->ring);
    if (s == NULL) {
        atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&ag.n_lost, 1, memory_order_relaxed);
        return;
    }
    s->timestamp_ns = ag_sig_now_ns(CLOCK_MONOTONIC);
    s->cpu_time_ns = cpu;
    s->tid = ag_tls_tid;
    s->mode = AG_MODE_CPU;
    s->state = AG_STATE_RUNNING;
    s->source = unseen ? AG_SOURCE_UNSEEN : AG_SOURCE_TAIL;
    s->engine = atomic_load_explicit(&t->perf_fd, memory_order_relaxed) >= 0 ? AG_CPU_ENGINE_PERF
                                                                             : AG_CPU_ENGINE_TIMER;
    s->weight = (uint16_t)weight;
    s->cpu_delta_ns = delta;
    s->frames[0] = ag_unseen_pc();
    depth = depth < ag.cfg.max_frames - skip ? depth : ag.cfg.max_frames - skip;
    memcpy(s->frames + skip, frames, depth * sizeof(uint64_t));
    s->depth = depth + skip;
    s->unwinder = res->unwinder;
    s->end = res->end;
    ag_ring_commit(&t->ring);
}

/* Both interposers: real's result and errno, as they are. */
static int
ag_ip_sigmask(ag_ip_sigmask_fn real, int how, const sigset_t *set, sigset_t *old, uint64_t fa)
{
    uint64_t frames[AG_MAX_FRAMES], since, half;
    struct ag_unwind_result res = { 0, 0, 0, 0 };
    unsigned hz;
    struct ag_thread *t;
    sigset_t prev, now;
    int rc, signo, in_set, unblocks, blocks;

    /* Kept while CPU sampling is off too, so that a note is never stale when it starts. */
    if (set == NULL || !ag_ip_active() ||
        (how != SIG_BLOCK && how != SIG_UNBLOCK && how != SIG_SETMASK) ||
        (t = ag_sig_thread_self()) == NULL) {
        return real(how, set, old);
    }
    signo = ag.signo;
    in_set = sigismember(set, signo) == 1;
    unblocks = in_set ? how == SIG_UNBLOCK : how == SIG_SETMASK;
    blocks = in_set && how != SIG_UNBLOCK;
    since = atomic_load_explicit(&t->sigblk_ns, memory_order_relaxed);
    hz = atomic_load_explicit(&ag.hz_cpu, memory_order_relaxed);
    half = hz != 0 ? 500000000u / hz : UINT64_MAX;
    if (unblocks && since != 0) {
        /* A span under half an interval of wall time is under half an interval of CPU: left to
         * the next sample, without a system call. Else, only while the signal is blocked indeed
         * (a raw system call may have opened it) is this thread the ring's only producer. The
         * span goes under the call that blocked the signal (or, when the thread started with it
         * blocked, the one that opens it). */
        if (ag_sig_now_ns(CLOCK_MONOTONIC) - since >= half && real(SIG_BLOCK, NULL, &now) == 0 &&
            sigismember(&now, signo) == 1) {
            if (ag_seqstack_get(&t->sigblk, frames, ag.cfg.max_frames, &res.depth, &res.unwinder,
                                &res.end) != 0 &&
                ag_ip_walk_caller(t, fa, frames, ag.cfg.max_frames, &res) != 0) {
                res.depth = 0;
            }
            ag_ip_claim(t, ag_sig_now_ns(CLOCK_THREAD_CPUTIME_ID), 1, frames, &res);
            atomic_store_explicit(&t->sigblk_claimed, 1, memory_order_relaxed);
        }
        atomic_store_explicit(&t->sigblk_ns, 0, memory_order_relaxed);
    }
    rc = real(how, set, &prev);
    if (rc == 0) {
        if (old != NULL) {
            *old = prev;
        }
        if (blocks && sigismember(&prev, signo) == 0) {
            uint64_t wall = ag_sig_now_ns(CLOCK_MONOTONIC);

            if (ag_ip_walk_caller(t, fa, frames, ag.cfg.max_frames, &res) != 0) {
                res.depth = 0;
            }
            /* The CPU up to here ran with the signal open, and a sample now would have seen
             * this stack: it is claimed as such (when it may reach half an interval), so that
             * only what follows is unseen. Later claims show the unseen time under this call,
             * the one that hid it. */
            if (wall - atomic_load_explicit(&t->last_claim_ns, memory_order_relaxed) >= half) {
                ag_ip_claim(t, ag_sig_now_ns(CLOCK_THREAD_CPUTIME_ID), 0, frames, &res);
                atomic_store_explicit(&t->last_claim_ns, wall, memory_order_relaxed);
            }
            ag_seqstack_put(&t->sigblk, frames, &res);
            atomic_store_explicit(&t->sigblk_ns, wall != 0 ? wall : 1, memory_order_relaxed);
        }
    }
    return rc;
}

int
ag_sigmask_raw(int how, const sigset_t *set, sigset_t *old)
{
    ag_ip_sigmask_fn real =
            (ag_ip_sigmask_fn)ag_interpose_real(&ag_ip_real_pthread_sigmask, "pthread_sigmask");

    return real != NULL ? real(how, set, old) : ENOSYS;
}

AG_EXPORT int
pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    ag_ip_sigmask_fn real =
            (ag_ip_sigmask_fn)ag_interpose_real(&ag_ip_real_pthread_sigmask, "pthread_sigmask");
    int rc;

    if (real == NULL) {
        return ENOSYS;
    }
    rc = ag_ip_sigmask(real, how, set, old, AG_FA);
    AG_NO_TAIL_CALL();
    return rc;
}

AG_EXPORT int
sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    ag_ip_sigmask_fn real =
            (ag_ip_sigmask_fn)ag_interpose_real(&ag_ip_real_sigprocmask, "sigprocmask");
    int rc;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    rc = ag_ip_sigmask(real, how, set, old, AG_FA);
    AG_NO_TAIL_CALL();
    return rc;
}

void
ag_thread_sigmask_started(struct ag_thread *t)
{
    sigset_t now;

    /* A thread inherits its creator's mask: one created with the signal blocked (a server that
     * keeps signals for a sigwait thread) burns unseen CPU from its first instruction. */
    if (t != NULL && pthread_sigmask(SIG_BLOCK, NULL, &now) == 0 &&
        sigismember(&now, ag.signo) == 1) {
        uint64_t wall = ag_sig_now_ns(CLOCK_MONOTONIC);
        struct ag_unwind_result none = { 0, 0, 0, 0 };

        ag_seqstack_put(&t->sigblk, NULL, &none); /* no call hid it: its start routine shows */
        atomic_store_explicit(&t->sigblk_ns, wall != 0 ? wall : 1, memory_order_relaxed);
    }
}
