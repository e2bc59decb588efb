/* SPDX-License-Identifier: MIT */
/*
 * agent/wall.c - wall-clock sampling without EINTR. The wall thread wakes at the wall rate and,
 * for every registered thread, reads /proc/self/task/TID/stat (a cached fd, re-read with pread):
 * a running thread gets the sampling signal (its handler records the stack); a blocked thread
 * is never signalled, so its syscall is not interrupted: its sample is the stack it recorded on
 * entry to an interposed blocking call, else the pc/sp of /proc/self/task/TID/syscall walked
 * with non-faulting reads. The interposers defined here record that stack (only while wall
 * sampling is on) and retry the sleeps and polls that one of our signals interrupted anyway
 * (a thread that entered the call between the state check and the delivery), counting both.
 * Context: the wall thread, and host threads inside interposed calls. The interposers must stay
 * cheap and must not allocate.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/internal.h"

struct ag_wall_fd {
    int32_t tid; /* the thread the fds belong to; 0 = none */
    int stat_fd;
    int sys_fd;
};

static struct ag_wall_fd *ag_wall_fds; /* wall thread; one per registry slot */

static void
ag_wall_fd_close(struct ag_wall_fd *f)
{
    if (f->stat_fd >= 0) {
        close(f->stat_fd);
    }
    if (f->sys_fd >= 0) {
        close(f->sys_fd);
    }
    f->tid = 0;
    f->stat_fd = -1;
    f->sys_fd = -1;
}

static int
ag_wall_open(int32_t tid, const char *what)
{
    char path[64];

    snprintf(path, sizeof(path), "/proc/self/task/%d/%s", (int)tid, what);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* The one-letter state of /proc/.../stat, or 0 when the thread is gone. */
static char
ag_wall_state(struct ag_wall_fd *f)
{
    char buf[256];
    ssize_t n = pread(f->stat_fd, buf, sizeof(buf) - 1, 0);
    char *p;

    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* comm may contain spaces and parentheses */
    return p != NULL && p[1] == ' ' ? p[2] : 0;
}

/* Copies the stack a thread recorded on entry to an interposed call. Returns 0 or -EAGAIN. */
static int
ag_wall_copy_blocked(struct ag_thread *t, struct ag_sample *s)
{
    int tries;

    for (tries = 0; tries < 4; tries++) {
        uint32_t seq = atomic_load_explicit(&t->blk_seq, memory_order_acquire);
        uint32_t info, depth, i;

        if (seq & 1) {
            continue;
        }
        info = atomic_load_explicit(&t->blk_info, memory_order_acquire);
        depth = info & 0xffff;
        if (depth > ag.cfg.max_frames) {
            depth = ag.cfg.max_frames;
        }
        for (i = 0; i < depth; i++) {
            /* Acquire: seeing a word stored after the odd seq makes the re-read below see
             * that seq (or a later one), so a torn copy is never accepted. */
            s->frames[i] = atomic_load_explicit(&t->blk_frames[i], memory_order_acquire);
        }
        if (atomic_load_explicit(&t->blk_seq, memory_order_relaxed) == seq) {
            s->depth = depth;
            s->unwinder = (uint8_t)(info >> 16);
            s->end = (uint8_t)(info >> 24);
            return depth > 0 ? 0 : -EAGAIN;
        }
    }
    return -EAGAIN;
}

/* pc and sp of a thread blocked in a syscall, walked with non-faulting reads. */
static int
ag_wall_from_proc(struct ag_wall_fd *f, int32_t tid, struct ag_sample *s)
{
    unsigned long long v[9];
    struct ag_unwind_result res;
    struct ag_unwind_ctx c;
    char buf[256];
    ssize_t n;

    if (f->sys_fd < 0) {
        f->sys_fd = ag_wall_open(tid, "syscall");
        if (f->sys_fd < 0) {
            return -errno;
        }
    }
    n = pread(f->sys_fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0) {
        return -ESRCH;
    }
    buf[n] = '\0';
    /* "nr a1 a2 a3 a4 a5 a6 sp pc"; "running" or "-1 sp pc" otherwise. */
    if (sscanf(buf, "%lld %llx %llx %llx %llx %llx %llx %llx %llx", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7], &v[8]) != 9) {
        return -EAGAIN;
    }
    ag_sig_unwind_ctx_init(&c, v[7], 0, 0); /* the stack moves under us: remote reads only */
    if (c.remote_ok) {
        ag_sig_unwind(&c, v[8], v[7], 0, 0, s->frames, ag.cfg.max_frames, &res);
    } else {
        s->frames[0] = v[8];
        res.depth = 1;
        res.unwinder = AG_UNWINDER_NONE;
        res.end = AG_UNWIND_END_LEAF_ONLY;
    }
    s->depth = res.depth;
    s->unwinder = res.unwinder;
    s->end = res.depth == 1 ? AG_UNWIND_END_LEAF_ONLY : res.end;
    return 0;
}

static void
ag_wall_signal(int32_t tid)
{
    siginfo_t si;

    memset(&si, 0, sizeof(si));
    si.si_signo = ag.signo;
    si.si_code = SI_QUEUE;
    si.si_pid = ag.pid;
    si.si_uid = getuid();
    si.si_value.sival_int = AG_WALL_SIVAL;
    syscall(SYS_rt_tgsigqueueinfo, (long)ag.pid, (long)tid, (long)ag.signo, &si);
}

static void
ag_wall_pass(void)
{
    unsigned i, high = atomic_load_explicit(&ag.high, memory_order_acquire);

    for (i = 0; i < high && i < ag.cfg.max_threads; i++) {
        struct ag_thread *t = &ag.threads[i];
        struct ag_wall_fd *f = &ag_wall_fds[i];
        struct ag_sample *s;
        int32_t tid;
        char st;
        int blocked, err;

        if (atomic_load_explicit(&t->state, memory_order_acquire) != AG_SLOT_ACTIVE ||
            atomic_load_explicit(&t->excluded, memory_order_relaxed)) {
            continue;
        }
        tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
        if (f->tid != tid) {
            ag_wall_fd_close(f);
            f->stat_fd = ag_wall_open(tid, "stat");
            if (f->stat_fd < 0) {
                continue;
            }
            f->tid = tid;
        }
        st = ag_wall_state(f);
        blocked = atomic_load_explicit(&t->blocked, memory_order_acquire);
        if (st == 'R' && !blocked) {
            ag_wall_signal(tid);
            continue;
        }
        if (st != 'R' && st != 'S' && st != 'D') {
            continue; /* stopped, traced, zombie or gone */
        }
        s = ag_ring_reserve(&t->wring);
        if (s == NULL) {
            atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&ag.n_lost, 1, memory_order_relaxed);
            continue;
        }
        s->timestamp_ns = ag_now_ns();
        s->cpu_time_ns = 0;
        {
            struct timespec ts;
            clockid_t clk = (clockid_t)((~(unsigned)tid << 3) | 6u);

            if (clock_gettime(clk, &ts) == 0) {
                s->cpu_time_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
            }
        }
        s->tid = tid;
        s->mode = AG_MODE_WALL;
        s->state = st == 'R' ? AG_STATE_RUNNING : AG_STATE_WAITING;
        if (blocked && ag_wall_copy_blocked(t, s) == 0) {
            s->source = AG_SOURCE_BLOCKED;
            err = 0;
        } else {
            s->source = AG_SOURCE_PROC;
            err = ag_wall_from_proc(f, tid, s);
        }
        if (err != 0 || atomic_load_explicit(&t->tid, memory_order_acquire) != tid) {
            continue; /* woke up, or the slot changed hands: the slot is not committed */
        }
        ag_ring_commit(&t->wring);
        atomic_fetch_add_explicit(&ag.n_samples, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&ag.n_wall, 1, memory_order_relaxed);
        if (s->state == AG_STATE_WAITING) {
            atomic_fetch_add_explicit(&ag.n_waiting, 1, memory_order_relaxed);
        }
    }
}

/* Sleeps until the absolute CLOCK_MONOTONIC time `until`, or a wake-up. */
static void
ag_wall_sleep_until(uint64_t until)
{
    struct timespec ts = { (time_t)(until / 1000000000u), (long)(until % 1000000000u) };

    pthread_mutex_lock(&ag.wake_lock);
    if (!atomic_load(&ag.stopping)) {
        pthread_cond_timedwait(&ag.wake_cond, &ag.wake_lock, &ts);
    }
    pthread_mutex_unlock(&ag.wake_lock);
}

static void *
ag_wall_main(void *arg)
{
    uint64_t next = ag_now_ns(), prev = 0;

    (void)arg;
    ag_thread_exclude_self();
    pthread_setname_np(pthread_self(), "pipeprof-wall");
    while (!atomic_load(&ag.stopping)) {
        unsigned hz = atomic_load(&ag.hz_wall);
        uint64_t now = ag_now_ns(), interval;

        if (hz == 0) {
            prev = 0;
            (void)ag_wait_ms(100);
            next = ag_now_ns();
            continue;
        }
        if (prev != 0) {
            atomic_fetch_add(&ag.wall_active_ns, now - prev);
        }
        prev = now;
        interval = 1000000000u / hz;
        if (now >= next) {
            ag_wall_pass();
            atomic_fetch_add(&ag.wall_passes, 1);
            next += interval;
            if (next < now) {
                next = now + interval; /* fell behind: skip, do not burst */
            }
        }
        ag_wall_sleep_until(next);
    }
    return NULL;
}

int
ag_wall_start(void)
{
    unsigned i;
    int err;

    if (ag.wall_started) {
        return 0;
    }
    ag_wall_fds = calloc(ag.cfg.max_threads, sizeof(*ag_wall_fds));
    if (ag_wall_fds == NULL) {
        return -ENOMEM;
    }
    for (i = 0; i < ag.cfg.max_threads; i++) {
        ag_wall_fds[i].stat_fd = -1;
        ag_wall_fds[i].sys_fd = -1;
    }
    err = ag_thread_spawn(&ag.wall, ag_wall_main, NULL);
    if (err != 0) {
        free(ag_wall_fds);
        ag_wall_fds = NULL;
        return err;
    }
    ag.wall_started = 1;
    return 0;
}

/* Called by ag_stop() with ag.stopping set. */
void
ag_wall_stop(void)
{
    unsigned i;

    if (!ag.wall_started) {
        return;
    }
    pthread_join(ag.wall, NULL);
    ag.wall_started = 0;
    for (i = 0; i < ag.cfg.max_threads; i++) {
        ag_wall_fd_close(&ag_wall_fds[i]);
    }
    free(ag_wall_fds);
    ag_wall_fds = NULL;
}

/* ---- interposed blocking calls ---- */

struct ag_thread *
ag_thread_blocking_enter(uint64_t fa)
{
    uint64_t frames[AG_MAX_FRAMES];
    struct ag_unwind_result res;
    struct ag_unwind_ctx c;
    struct ag_thread *t;
    uint64_t lo, hi, fp, ra;
    uint32_t seq, i;

    if (atomic_load_explicit(&ag.hz_wall, memory_order_relaxed) == 0) {
        return NULL;
    }
    t = ag_sig_thread_self();
    if (t == NULL || t->blk_frames == NULL) {
        return NULL;
    }
    lo = atomic_load_explicit(&t->stack_lo, memory_order_acquire);
    hi = atomic_load_explicit(&t->stack_hi, memory_order_acquire);
    if (hi == 0) {
        lo = ag_tls_stack_lo;
        hi = ag_tls_stack_hi;
    }
    ag_sig_unwind_ctx_init(&c, fa, lo, hi);
    /* The interposer's frame record: [fa] = the caller's fp, [fa + 8] = return address. */
    if (ag_sig_read(&c, fa, &fp) != 0 || ag_sig_read(&c, fa + 8, &ra) != 0) {
        return NULL;
    }
    ag_sig_unwind(&c, ra, fa + 16, fp, 1, frames, ag.cfg.max_frames, &res);
    seq = atomic_load_explicit(&t->blk_seq, memory_order_relaxed);
    /* Seqlock without fences (TSan-checkable): every word is a release store after the odd
     * seq, paired with the reader's acquire loads in ag_wall_copy_blocked(). */
    atomic_store_explicit(&t->blk_seq, seq + 1, memory_order_relaxed);
    for (i = 0; i < res.depth; i++) {
        atomic_store_explicit(&t->blk_frames[i], frames[i], memory_order_release);
    }
    atomic_store_explicit(&t->blk_info,
                          res.depth | (uint32_t)res.unwinder << 16 | (uint32_t)res.end << 24,
                          memory_order_release);
    atomic_store_explicit(&t->blk_seq, seq + 2, memory_order_release);
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

static void *
ag_wall_resolve(_Atomic(void *) *slot, const char *name)
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
ag_wall_active(void)
{
    return atomic_load_explicit(&ag.running, memory_order_relaxed) && !ag_tls_excluded;
}

static uint32_t
ag_wall_signals(void)
{
    return atomic_load_explicit(&ag_tls_signals, memory_order_relaxed);
}

/* An EINTR with one of our signals handled during the call: retry it. XXX(S): a host signal
 * delivered in the very same call would be swallowed too; both would have to coincide. */
static int
ag_wall_absorb(int rc, int err, uint32_t sig0)
{
    if (rc == -1 && err == EINTR && ag_wall_signals() != sig0) {
        atomic_fetch_add_explicit(&ag.n_eintr_absorbed, 1, memory_order_relaxed);
        return 1;
    }
    return 0;
}

static uint64_t
ag_wall_deadline(int timeout_ms)
{
    return timeout_ms < 0 ? 0 : ag_now_ns() + (uint64_t)timeout_ms * 1000000u;
}

static int
ag_wall_left_ms(uint64_t deadline)
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
ag_wall_nanosleep(const struct timespec *req, struct timespec *rem, uint64_t fa)
{
    static _Atomic(void *) real_p;
    int (*real)(const struct timespec *, struct timespec *) =
            (int (*)(const struct timespec *, struct timespec *))ag_wall_resolve(&real_p,
                                                                                 "nanosleep");
    struct timespec left, r2 = { 0, 0 };
    struct ag_thread *t;
    uint32_t sig0;
    int rc, err;

    if (real == NULL || !ag_wall_active()) {
        return real != NULL ? real(req, rem) : (errno = ENOSYS, -1);
    }
    t = ag_thread_blocking_enter(fa);
    left = *req;
    do {
        sig0 = ag_wall_signals();
        rc = real(&left, &r2);
        err = errno;
        left = r2;
    } while (ag_wall_absorb(rc, err, sig0));
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
    int rc = ag_wall_nanosleep(req, rem, AG_FA);

    AG_NO_TAIL_CALL();
    return rc;
}

AG_EXPORT int
clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem)
{
    static _Atomic(void *) real_p;
    int (*real)(clockid_t, int, const struct timespec *, struct timespec *) =
            (int (*)(clockid_t, int, const struct timespec *, struct timespec *))ag_wall_resolve(
                    &real_p, "clock_nanosleep");
    struct timespec left, r2;
    struct ag_thread *t;
    uint32_t sig0;
    int rc;

    if (real == NULL || !ag_wall_active()) {
        return real != NULL ? real(clk, flags, req, rem) : ENOSYS;
    }
    t = ag_thread_blocking_enter(AG_FA);
    left = *req;
    for (;;) {
        sig0 = ag_wall_signals();
        rc = real(clk, flags, &left, &r2); /* returns the error number, not -1 */
        if (!ag_wall_absorb(rc == EINTR ? -1 : 0, EINTR, sig0)) {
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

    int rc = ag_wall_nanosleep(&ts, NULL, AG_FA);

    AG_NO_TAIL_CALL();
    return rc;
}

AG_EXPORT unsigned int
sleep(unsigned int s)
{
    struct timespec ts = { (time_t)s, 0 }, rem = { 0, 0 };

    if (ag_wall_nanosleep(&ts, &rem, AG_FA) == 0) {
        return 0;
    }
    return (unsigned)rem.tv_sec + (rem.tv_nsec > 0 ? 1u : 0u);
}

AG_EXPORT int
poll(struct pollfd *fds, nfds_t n, int timeout)
{
    static _Atomic(void *) real_p;
    int (*real)(struct pollfd *, nfds_t, int) =
            (int (*)(struct pollfd *, nfds_t, int))ag_wall_resolve(&real_p, "poll");
    uint64_t deadline;
    struct ag_thread *t;
    uint32_t sig0;
    int rc, err, left = timeout;

    if (real == NULL || !ag_wall_active()) {
        return real != NULL ? real(fds, n, timeout) : (errno = ENOSYS, -1);
    }
    deadline = ag_wall_deadline(timeout);
    t = ag_thread_blocking_enter(AG_FA);
    for (;;) {
        sig0 = ag_wall_signals();
        rc = real(fds, n, left);
        err = errno;
        if (!ag_wall_absorb(rc, err, sig0)) {
            break;
        }
        left = ag_wall_left_ms(deadline);
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
                     const sigset_t *))ag_wall_resolve(&real_p, "ppoll");
    struct timespec left;
    uint64_t deadline = 0;
    struct ag_thread *t;
    uint32_t sig0;
    int rc, err;

    if (real == NULL || !ag_wall_active()) {
        return real != NULL ? real(fds, n, tmo, mask) : (errno = ENOSYS, -1);
    }
    if (tmo != NULL) {
        deadline = ag_now_ns() + (uint64_t)tmo->tv_sec * 1000000000u + (uint64_t)tmo->tv_nsec;
        left = *tmo;
    }
    t = ag_thread_blocking_enter(AG_FA);
    for (;;) {
        sig0 = ag_wall_signals();
        rc = real(fds, n, tmo != NULL ? &left : NULL, mask);
        err = errno;
        if (!ag_wall_absorb(rc, err, sig0)) {
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
            (int (*)(int, fd_set *, fd_set *, fd_set *, struct timeval *))ag_wall_resolve(&real_p,
                                                                                          "select");
    struct ag_thread *t;
    uint32_t sig0;
    int rc, err;

    if (real == NULL || !ag_wall_active()) {
        return real != NULL ? real(nfds, r, w, e, tv) : (errno = ENOSYS, -1);
    }
    t = ag_thread_blocking_enter(AG_FA);
    do {
        /* Linux leaves the sets untouched on EINTR and updates tv to the time left. */
        sig0 = ag_wall_signals();
        rc = real(nfds, r, w, e, tv);
        err = errno;
    } while (ag_wall_absorb(rc, err, sig0));
    ag_thread_blocking_leave(t);
    errno = err;
    return rc;
}

AG_EXPORT int
epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
    static _Atomic(void *) real_p;
    int (*real)(int, struct epoll_event *, int, int) =
            (int (*)(int, struct epoll_event *, int, int))ag_wall_resolve(&real_p, "epoll_wait");
    uint64_t deadline;
    struct ag_thread *t;
    uint32_t sig0;
    int rc, err, left = timeout;

    if (real == NULL || !ag_wall_active()) {
        return real != NULL ? real(epfd, ev, max, timeout) : (errno = ENOSYS, -1);
    }
    deadline = ag_wall_deadline(timeout);
    t = ag_thread_blocking_enter(AG_FA);
    for (;;) {
        sig0 = ag_wall_signals();
        rc = real(epfd, ev, max, left);
        err = errno;
        if (!ag_wall_absorb(rc, err, sig0)) {
            break;
        }
        left = ag_wall_left_ms(deadline);
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
            (int (*)(int, struct epoll_event *, int, int, const sigset_t *))ag_wall_resolve(
                    &real_p, "epoll_pwait");
    uint64_t deadline;
    struct ag_thread *t;
    uint32_t sig0;
    int rc, err, left = timeout;

    if (real == NULL || !ag_wall_active()) {
        return real != NULL ? real(epfd, ev, max, timeout, mask) : (errno = ENOSYS, -1);
    }
    deadline = ag_wall_deadline(timeout);
    t = ag_thread_blocking_enter(AG_FA);
    for (;;) {
        sig0 = ag_wall_signals();
        rc = real(epfd, ev, max, left, mask);
        err = errno;
        if (!ag_wall_absorb(rc, err, sig0)) {
            break;
        }
        left = ag_wall_left_ms(deadline);
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
            (ssize_t(*)(int, void *, size_t))ag_wall_resolve(&real_p, "read");
    struct ag_thread *t;
    ssize_t rc;
    int err;

    if (real == NULL || !ag_wall_active()) {
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
            (ssize_t(*)(int, void *, size_t, int))ag_wall_resolve(&real_p, "recv");
    struct ag_thread *t;
    ssize_t rc;
    int err;

    if (real == NULL || !ag_wall_active()) {
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
            (ssize_t(*)(int, void *, size_t, int, struct sockaddr *, socklen_t *))ag_wall_resolve(
                    &real_p, "recvfrom");
    struct ag_thread *t;
    ssize_t rc;
    int err;

    if (real == NULL || !ag_wall_active()) {
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
            (int (*)(int, struct sockaddr *, socklen_t *))ag_wall_resolve(&real_p, "accept");
    struct ag_thread *t;
    int rc, err;

    if (real == NULL || !ag_wall_active()) {
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
            (int (*)(int, struct sockaddr *, socklen_t *, int))ag_wall_resolve(&real_p, "accept4");
    struct ag_thread *t;
    int rc, err;

    if (real == NULL || !ag_wall_active()) {
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
            (int (*)(pthread_cond_t *, pthread_mutex_t *))ag_wall_resolve(&real_p,
                                                                          "pthread_cond_wait");
    struct ag_thread *t;
    int rc;

    if (real == NULL || !ag_wall_active()) {
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
            (int (*)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *))ag_wall_resolve(
                    &real_p, "pthread_cond_timedwait");
    struct ag_thread *t;
    int rc;

    if (real == NULL || !ag_wall_active()) {
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
            (int (*)(pthread_t, void **))ag_wall_resolve(&real_p, "pthread_join");
    struct ag_thread *t;
    int rc;

    if (real == NULL || !ag_wall_active()) {
        return real != NULL ? real(th, ret) : ENOSYS;
    }
    t = ag_thread_blocking_enter(AG_FA);
    rc = real(th, ret);
    ag_thread_blocking_leave(t);
    return rc;
}
