/* SPDX-License-Identifier: MIT */
/*
 * agent/wall.c - wall-clock sampling without EINTR. The wall thread wakes at the wall rate and,
 * for every registered thread, reads /proc/self/task/TID/stat (a cached fd, re-read with pread):
 * a running thread gets the sampling signal (its handler records the stack); a blocked thread
 * is never signalled, so its syscall is not interrupted: its sample is the stack it recorded on
 * entry to an interposed blocking call, else the pc/sp of /proc/self/task/TID/syscall walked
 * with non-faulting reads. The interposers of host/blocking.c record that stack (only while
 * wall sampling is on) and retry the sleeps and polls that one of our signals interrupted anyway
 * (a thread that entered the call between the state check and the delivery), counting both.
 * Context: the wall thread.
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
#include "host/host.h"

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
    return host_fd_take(open(path, O_RDONLY | O_CLOEXEC)); /* high, and the host's close cannot
                                                                take it (host/fds.c) */
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
    uint32_t depth;
    int err = ag_seqstack_get(&t->blk, s->frames, ag.cfg.max_frames, &depth, &s->unwinder, &s->end);

    if (err == 0) {
        s->depth = depth;
    }
    return err;
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

uint32_t
ag_thread_wait_stack(int32_t tid, uint64_t *frames, uint32_t max)
{
    struct ag_wall_fd f = { tid, -1, -1 };
    struct ag_unwind_result res;
    struct ag_unwind_ctx c;
    unsigned long long v[9];
    char buf[256], state;
    uint32_t i, depth = 0;
    ssize_t n;

    if (max == 0 || (f.stat_fd = ag_wall_open(tid, "stat")) < 0) {
        return 0;
    }
    state = ag_wall_state(&f);
    if (state != 'S' && state != 'D') {
        goto out; /* running, runnable or gone: nothing waits */
    }
    f.sys_fd = ag_wall_open(tid, "syscall");
    n = f.sys_fd >= 0 ? pread(f.sys_fd, buf, sizeof(buf) - 1, 0) : -1;
    if (n <= 0) {
        goto out;
    }
    buf[n] = '\0';
    if (sscanf(buf, "%lld %llx %llx %llx %llx %llx %llx %llx %llx", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7], &v[8]) != 9) {
        goto out;
    }
    ag_sig_unwind_ctx_init(&c, v[7], 0, 0); /* the stack moves under us: remote reads only */
    if (!c.remote_ok) {
        goto out;
    }
    ag_sig_unwind(&c, v[8], v[7], 0, 0, frames, max, &res);
    /* As the drain does: the walk stops at the first frame outside executable code. */
    for (i = 0; i < res.depth; i++) {
        uint64_t pc = frames[i] - (i > 0 && frames[i] != 0);

        if (pc < 4096 || !ag_codemap_contains(pc)) {
            break;
        }
    }
    depth = i;
out:
    ag_wall_fd_close(&f);
    return depth;
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
        s->engine = 0;
        s->weight = 1;
        s->cpu_delta_ns = 0;
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
