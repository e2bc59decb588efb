/* SPDX-License-Identifier: MIT */
/*
 * agent/wall.c - wall-clock sampling without EINTR. The wall thread wakes at the wall rate and,
 * for every registered thread, reads /proc/TID/task/TID/stat (opened, read and closed each time:
 * no fd is held per thread, the host keeps its RLIMIT_NOFILE; a thread still inside the blocking
 * call it was in at the last pass is known to sleep and not read): a running thread gets the
 * sampling signal (its handler records the stack); a blocked thread is never signalled, so its
 * syscall is not interrupted: its sample is the stack it recorded on entry to an interposed
 * blocking call, else the pc/sp of its syscall file walked with non-faulting reads. The
 * interposers of host/blocking.c record that stack (only while wall sampling is on) and retry
 * the sleeps and polls that one of our signals interrupted anyway (a thread that entered the
 * call between the state check and the delivery), counting both. Passes the thread could not
 * make in time (a thousand threads at 100 Hz) are counted per thread as lost, so the trace says
 * so.
 *
 * The path: not /proc/self/task/TID/..., whose dentries stay under the process's own
 * /proc/PID/task and cost the parent that reaps the process (release_task ->
 * proc_invalidate_siblings_dcache -> d_walk: 2-5 ms per child here, 20-55 ms on a loaded
 * machine, against 20 us bare; bench/bench-reap.c); nor /proc/TID/stat, the process-wide view,
 * which sums the CPU time of every thread (O(threads) a read). /proc/TID/task/TID lives under
 * the thread's own entry, flushed at the thread's exit. A thread id reused by another process
 * would read that process's state: the wall thread signals only with rt_tgsigqueueinfo, which
 * checks the process, and walks stacks with checked reads.
 *
 * The wall thread runs while a wall request is held (ag_wall_start/ag_wall_stop follow the
 * requests) and gives back the memory of the rings it filled when it ends. Context: the wall
 * thread.
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
#include "agent/symbols-internal.h"
#include "host/host.h"

/*
 * A few stat files stay open (the wall thread's only, direct-mapped by tid, closed when it ends):
 * every new fd is born at the lowest free number before host/fds.c moves it high, and a pass that
 * opened one per thread 1000 times a second kept a low number busy for a moment again and again,
 * where a host's close loop or dup2 over its low fds would meet it. A host with up to this many
 * threads opens nothing per pass; more threads share the entries (still at most
 * AG_WALL_STAT_CACHE fds, agent/internal.h).
 */
static struct {
    int32_t tid;
    int fd;
} ag_wall_stat_cache[2][AG_WALL_STAT_CACHE]; /* stat, syscall */

static int
ag_wall_open(int32_t tid, const char *what)
{
    char path[64];

    snprintf(path, sizeof(path), "/proc/%d/task/%d/%s", (int)tid, (int)tid, what);
    return open(path, O_RDONLY | O_CLOEXEC); /* high and the library's: host/fds.c */
}

static void
ag_wall_stat_cache_close(void)
{
    unsigned i, k;

    for (k = 0; k < 2; k++) {
        for (i = 0; i < AG_WALL_STAT_CACHE; i++) {
            if (ag_wall_stat_cache[k][i].tid != 0) {
                close(ag_wall_stat_cache[k][i].fd);
                ag_wall_stat_cache[k][i].tid = 0;
            }
        }
    }
}

/* Reads /proc/TID/task/TID/what ("stat" or "syscall") into buf (NUL-terminated): bytes read, or
 * -errno. */
static ssize_t
ag_wall_read(int32_t tid, const char *what, char *buf, size_t size)
{
    unsigned slot = (unsigned)tid % AG_WALL_STAT_CACHE;
    int kind = strcmp(what, "stat") == 0 ? 0 : 1;
    ssize_t n;
    int fd;

    if (ag_wall_stat_cache[kind][slot].tid == tid) {
        n = pread(ag_wall_stat_cache[kind][slot].fd, buf, size - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            return n;
        }
        /* gone (ESRCH), or its tid taken by a new thread: open it again */
    }
    fd = ag_wall_open(tid, what);
    if (fd < 0) {
        return -errno;
    }
    n = read(fd, buf, size - 1);
    n = n < 0 ? -errno : n;
    if (n > 0) {
        buf[n] = '\0';
        if (ag_wall_stat_cache[kind][slot].tid != 0) {
            close(ag_wall_stat_cache[kind][slot].fd);
        }
        ag_wall_stat_cache[kind][slot].tid = tid;
        ag_wall_stat_cache[kind][slot].fd = fd;
    } else {
        if (n == 0) {
            buf[0] = '\0';
        }
        close(fd);
    }
    return n;
}

/* The one-letter state of the thread's stat, or 0 when the thread is gone. */
static char
ag_wall_state(int32_t tid)
{
    char buf[256], *p;

    if (ag_wall_read(tid, "stat", buf, sizeof(buf)) <= 0) {
        return 0;
    }
    p = strrchr(buf, ')'); /* comm may contain spaces and parentheses */
    return p != NULL && p[1] == ' ' ? p[2] : 0;
}

/* The sp and pc of the thread's syscall file ("nr a1 a2 a3 a4 a5 a6 sp pc"; "running" or "-1 sp pc"
 * otherwise): 0, or -EAGAIN. */
static int
ag_wall_syscall_regs(int32_t tid, uint64_t *sp, uint64_t *pc)
{
    unsigned long long v[9];
    char buf[256];

    if (ag_wall_read(tid, "syscall", buf, sizeof(buf)) <= 0 ||
        sscanf(buf, "%lld %llx %llx %llx %llx %llx %llx %llx %llx", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7], &v[8]) != 9) {
        return -EAGAIN;
    }
    *sp = v[7];
    *pc = v[8];
    return 0;
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

_Atomic int32_t ag_wall_test_woke_tid;
_Atomic unsigned ag_wall_test_woke_reads;

/* Whether the test seam takes this read of tid's registers (internal.h). */
static int
ag_wall_test_woke(int32_t tid)
{
    unsigned n;

    if (atomic_load_explicit(&ag_wall_test_woke_tid, memory_order_relaxed) != tid || tid == 0) {
        return 0;
    }
    n = atomic_load_explicit(&ag_wall_test_woke_reads, memory_order_relaxed);
    while (n != 0 &&
           !atomic_compare_exchange_weak_explicit(&ag_wall_test_woke_reads, &n, n - 1,
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
    return n != 0;
}

/* pc and sp of a thread blocked in a syscall, walked with non-faulting reads. */
static int
ag_wall_from_proc(int32_t tid, struct ag_sample *s)
{
    struct ag_unwind_result res;
    struct ag_unwind_ctx c;
    uint64_t sp, pc;

    if (ag_wall_syscall_regs(tid, &sp, &pc) != 0) {
        return -EAGAIN;
    }
    /* Under an emulator (qemu-user) the file shows the emulator's own registers, not the
     * program's: a pc in none of the program's modules, while they are known, is not its. */
    if (atomic_load_explicit(&ag_sig_modules, memory_order_acquire) != NULL &&
        ag_sig_module_find(pc) == NULL) {
        return -ENOEXEC;
    }
    ag_sig_unwind_ctx_init(&c, sp, 0, 0); /* the stack moves under us: remote reads only */
    if (c.remote_ok) {
        ag_sig_unwind(&c, pc, sp, 0, 0, s->frames, ag.cfg.max_frames, &res);
    } else {
        s->frames[0] = pc;
        res.depth = 1;
        res.unwinder = AG_UNWINDER_NONE;
        res.end = AG_UNWIND_END_LEAF_ONLY;
    }
    s->depth = res.depth;
    s->unwinder = res.unwinder;
    s->end = res.depth == 1 ? AG_UNWIND_END_LEAF_ONLY : res.end;
    return 0;
}

/* Frames of a walk up to the first outside executable code (as the drain cuts a sample's). */
static uint32_t
ag_wall_code_depth(const uint64_t *frames, uint32_t depth)
{
    uint32_t i;

    for (i = 0; i < depth; i++) {
        uint64_t f = frames[i] - (i > 0 && frames[i] != 0);

        if (f < 4096 || !ag_codemap_contains(f)) {
            break;
        }
    }
    return i;
}

/* The stack of thread t, inside an interposed call entered in CPU mode (AG_BLOCKED_FRAME) whose
 * note blk.seq was seq at: the call's libc function over the caller's stack, walked from the
 * interposer's frame record with non-faulting reads (the thread may return meanwhile: the caller
 * checks that it did not). 0 or -EAGAIN. */
static int
ag_wall_walk_noted(struct ag_thread *t, uint32_t seq, uint64_t *frames, uint32_t max,
                   uint32_t *depth)
{
    uint64_t fa = atomic_load_explicit(&t->blk_fa, memory_order_acquire);
    uint64_t leaf = atomic_load_explicit(&t->blk_leaf, memory_order_acquire);
    uint32_t at = leaf != 0 && max > 1;
    struct ag_unwind_result res;
    struct ag_unwind_ctx c;

    if ((seq & 1) != 0 || atomic_load_explicit(&t->blk.seq, memory_order_relaxed) != seq) {
        return -EAGAIN; /* fa and leaf were being written */
    }
    ag_sig_unwind_ctx_init(&c, fa, 0, 0); /* another thread's stack: remote reads only */
    if (!c.remote_ok) {
        return -EAGAIN;
    }
    ag_sig_unwind_record(&c, fa, frames + at, max - at, &res);
    if (res.depth == 0) {
        return -EAGAIN;
    }
    frames[0] = at ? leaf : frames[0];
    *depth = ag_wall_code_depth(frames, res.depth + at);
    return *depth > 0 ? 0 : -EAGAIN;
}

/* The stack thread tid's interposed blocking call noted (ag_host_blocking_enter), if the thread
 * sits in such a call: copied as the wall pass copies it, or walked from the interposer's frame
 * (a call entered in CPU mode); else 0. The slot is found without the registry's lock, as the
 * wall pass walks it: a slot that changed hands, or a call that ended (or another began) while
 * it was read, gives nothing. */
static uint32_t
ag_thread_blocked_stack(int32_t tid, uint64_t *frames, uint32_t max)
{
    struct ag_thread *threads = __atomic_load_n(&ag.threads, __ATOMIC_ACQUIRE);
    unsigned i, high = atomic_load_explicit(&ag.high, memory_order_acquire);

    for (i = 0; threads != NULL && i < high && i < ag.cfg.max_threads; i++) {
        struct ag_thread *t = &threads[i];
        uint32_t depth = 0, seq;
        uint8_t unwinder, end;
        int blocked, err;

        if (atomic_load_explicit(&t->state, memory_order_acquire) != AG_SLOT_ACTIVE ||
            atomic_load_explicit(&t->tid, memory_order_relaxed) != tid) {
            continue;
        }
        blocked = atomic_load_explicit(&t->blocked, memory_order_acquire);
        if (blocked == AG_BLOCKED_NONE) {
            return 0;
        }
        seq = atomic_load_explicit(&t->blk.seq, memory_order_acquire);
        err = blocked == AG_BLOCKED_STACK
                      ? ag_seqstack_get(&t->blk, frames, max, &depth, &unwinder, &end)
                      : ag_wall_walk_noted(t, seq, frames, max, &depth);
        if (err != 0 || atomic_load_explicit(&t->tid, memory_order_acquire) != tid ||
            atomic_load_explicit(&t->blocked, memory_order_acquire) != blocked ||
            atomic_load_explicit(&t->blk.seq, memory_order_acquire) != seq) {
            return 0; /* it left the call, or the slot went to another thread */
        }
        return depth;
    }
    return 0;
}

uint32_t
ag_thread_wait_stack(int32_t tid, uint64_t *frames, uint32_t max)
{
    struct ag_unwind_result res;
    struct ag_unwind_ctx c;
    uint64_t sp, pc;
    uint32_t i;
    char state;

    if (max == 0) {
        return 0;
    }
    i = ag_thread_blocked_stack(tid, frames, max);
    if (i > 0) {
        return i;
    }
    state = ag_wall_state(tid);
    if ((state != 'S' && state != 'D') || ag_wall_syscall_regs(tid, &sp, &pc) != 0) {
        return 0; /* running, runnable or gone: nothing waits */
    }
    ag_sig_unwind_ctx_init(&c, sp, 0, 0); /* the stack moves under us: remote reads only */
    if (!c.remote_ok) {
        return 0;
    }
    ag_sig_unwind(&c, pc, sp, 0, 0, frames, max, &res);
    return ag_wall_code_depth(frames, res.depth); /* as the drain cuts a sample's */
}

void
ag_signal_thread(int32_t tid, int sival)
{
    siginfo_t si;

    memset(&si, 0, sizeof(si));
    si.si_signo = ag.signo;
    si.si_code = SI_QUEUE;
    si.si_pid = ag.pid;
    si.si_uid = getuid();
    si.si_value.sival_int = sival;
    syscall(SYS_rt_tgsigqueueinfo, (long)ag.pid, (long)tid, (long)ag.signo, &si);
}

/* The wall thread's note of when it last visited a registry slot, to count the passes a thread
 * missed (one calloc per wall session, 16 bytes a slot, freed when the session ends). */
struct ag_wall_visit {
    int32_t tid;      /* 0: not visited since the rate was set */
    uint32_t blk_seq; /* the thread's blk.seq then, when it sat in a blocking call; else 0 */
    uint64_t ns;      /* when (CLOCK_MONOTONIC) */
    /* Passes held for the thread's pending signal (ag_wall_hold): AG_WALL_HOLD_* since the
     * signal was sent, and its CPU time at the first held pass. */
    int hold;
    uint64_t held_cpu_ns;
};

enum {
    AG_WALL_HOLD_NONE, /* no pass found the signal pending yet */
    AG_WALL_HOLD_WAIT, /* it waits for a core: passes are held for its sample */
    AG_WALL_HOLD_RAN,  /* it had CPU with the signal pending: passes are counted lost */
};

static struct ag_wall_visit *ag_wall_visits; /* wall thread */
static _Atomic int ag_wall_quit;             /* ag_wall_stop(): the last wall request went */
/* Whether a wall thread may produce: a wall ring's memory goes back only while none does. */
static pthread_mutex_t ag_wall_trim_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int ag_wall_producing; /* written under ag_wall_trim_lock */

/* Notes a visit to thread t of slot i by the pass for the interval that began at slot (on the
 * pass grid: ag_wall_main), and counts the intervals since its last visit that it went without a
 * wall sample (the pass came late or not at all: a thousand threads take longer than an
 * interval). Counted in the grid's intervals, not by the visits' times: one pass per interval
 * and each interval counted once, however late the passes (by the visits' times, rounded, passes
 * 1.4 intervals apart counted 1 each and 1.6 apart 2 each, and a late pass and the next on time
 * fell into one: 90 to 110 % of a thread's intervals accounted for at load 15-20). blk_seq: its
 * blk.seq when it sits in an interposed blocking call, else 0. Returns 1 when it sat in that same
 * call at the last visit too: asleep in it (a call that returns at once, in a loop, records a new
 * stack each time). */
static int
ag_wall_visit(unsigned i, struct ag_thread *t, int32_t tid, uint64_t slot, uint64_t interval,
              uint32_t blk_seq)
{
    struct ag_wall_visit *v = &ag_wall_visits[i];
    int same_call = v->tid == tid && blk_seq != 0 && v->blk_seq == blk_seq;

    uint64_t gaps = v->tid == tid && slot > v->ns ? (slot - v->ns + interval / 2) / interval : 0;

    if (gaps > 1) {
        ag_sig_count_unsampled(t, gaps - 1);
    }
    v->tid = tid;
    v->ns = slot;
    v->blk_seq = blk_seq;
    return same_call;
}

/* Counts lost the passes held for thread t's pending signal, if any, from w (its wall_signalled,
 * reloaded on a lost race with the handler that takes them), and holds no more for it. */
static void
ag_wall_unhold(struct ag_thread *t, struct ag_wall_visit *v, uint32_t w)
{
    while (w >= AG_WALL_HELD_ONE) {
        if (atomic_compare_exchange_weak_explicit(&t->wall_signalled, &w, w & AG_WALL_STATE_MASK,
                                                  memory_order_acq_rel, memory_order_acquire)) {
            ag_sig_count_unsampled(t, w / AG_WALL_HELD_ONE);
            break;
        }
    }
    v->hold = w != 0 ? AG_WALL_HOLD_RAN : AG_WALL_HOLD_NONE;
}

/*
 * The pass found thread t's last wall signal not taken yet (w, its wall_signalled, not 0): a
 * second one would merge into it (or come after its handler began, and be taken twice), so none
 * is sent. A running thread takes a pending signal as soon as it next runs in user mode: while it
 * has had no CPU since the first pass that found the signal pending, it waits for a core (a
 * loaded machine) with the stack the signal will find, so this interval is held for that
 * signal's sample: the pass adds it to wall_signalled, and the handler takes the held passes
 * into the sample's weight with the exchange that clears the mark. A thread that had CPU
 * meanwhile ran with the signal blocked (or in a long system call): where it was is not known,
 * and this interval and those held are counted lost, as are passes beyond AG_WALL_HELD_MAX_NS of
 * held ones. The CPU time is read from the first pass that holds, not at the send (a clock read
 * for every send would add a system call per running thread and interval): a thread that blocked
 * the signal as it came holds one interval, until the next pass sees the CPU it had. Returns 0
 * when the handler took the signal meanwhile (w is reloaded, 0): the caller signals again.
 */
static int
ag_wall_hold(struct ag_thread *t, struct ag_wall_visit *v, int32_t tid, uint32_t *w,
             uint64_t interval)
{
    uint64_t cap = AG_WALL_HELD_MAX_NS / interval, cpu = 0;
    struct timespec ts;
    uint32_t want;

    if (v->hold != AG_WALL_HOLD_RAN) {
        if (clock_gettime(ag_thread_cpu_clock(tid), &ts) != 0) {
            v->hold = AG_WALL_HOLD_RAN; /* gone: nothing more to hold */
        } else {
            cpu = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
            if (v->hold == AG_WALL_HOLD_NONE) {
                v->hold = AG_WALL_HOLD_WAIT;
                v->held_cpu_ns = cpu;
            } else if (cpu - v->held_cpu_ns > interval / 4) {
                v->hold = AG_WALL_HOLD_RAN;
            }
        }
    }
    cap = cap < UINT16_MAX ? cap : UINT16_MAX;
    if (v->hold == AG_WALL_HOLD_RAN) {
        ag_wall_unhold(t, v, *w);
        *w = atomic_load_explicit(&t->wall_signalled, memory_order_acquire);
        if (*w == 0) {
            v->hold = AG_WALL_HOLD_NONE;
            return 0; /* taken meanwhile */
        }
        ag_sig_count_unsampled(t, 1);
        return 1;
    }
    if (*w / AG_WALL_HELD_ONE + 1u >= cap) {
        ag_sig_count_unsampled(t, 1); /* held as long as one sample may stand for */
        return 1;
    }
    want = *w + AG_WALL_HELD_ONE;
    if (atomic_compare_exchange_strong_explicit(&t->wall_signalled, w, want, memory_order_acq_rel,
                                                memory_order_acquire)) {
        return 1;
    }
    /* Only the handler changes it besides the passes, to 0 */
    v->hold = AG_WALL_HOLD_NONE;
    return 0;
}

/* One pass over the registry, at now, for the interval of interval ns that began at slot. */
static void
ag_wall_pass(uint64_t now, uint64_t slot, uint64_t interval)
{
    unsigned i, high = atomic_load_explicit(&ag.high, memory_order_acquire);

    for (i = 0; i < high && i < ag.cfg.max_threads; i++) {
        struct ag_thread *t = &ag.threads[i];
        struct ag_sample *s;
        int32_t tid;
        uint32_t sent, w;
        char st;
        int blocked, err;

        if (atomic_load_explicit(&t->state, memory_order_acquire) != AG_SLOT_ACTIVE ||
            atomic_load_explicit(&t->excluded, memory_order_relaxed)) {
            continue;
        }
        tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
        if (ag_in_own_code(tid)) {
            /* The profiler's own wait on the host's thread: no sample, and none missed */
            (void)ag_wall_visit(i, t, tid, slot, interval, 0);
            continue;
        }
        /* A call entered in CPU mode noted no stack: read from /proc as any wait */
        blocked = atomic_load_explicit(&t->blocked, memory_order_acquire) == AG_BLOCKED_STACK;
        /* A thread still in the blocking call it was in at the last pass sleeps there: its
         * state is not read (three system calls a thread: 1000 idle threads made 15 of 100
         * passes a second instead of 55). */
        st = ag_wall_visit(i, t, tid, slot, interval,
                           blocked ? atomic_load_explicit(&t->blk.seq, memory_order_acquire) : 0)
                     ? 'S'
                     : ag_wall_state(tid);
        w = atomic_load_explicit(&t->wall_signalled, memory_order_acquire);
        if (st == 'R' && !blocked) {
            while (w != 0 ? ag_wall_hold(t, &ag_wall_visits[i], tid, &w, interval) == 0
                          : !atomic_compare_exchange_weak_explicit(
                                    &t->wall_signalled, &w, AG_WALL_SENDING, memory_order_seq_cst,
                                    memory_order_acquire)) {
            }
            if (w != 0) {
                continue; /* held or counted */
            }
            if (atomic_load_explicit(&t->excluded, memory_order_seq_cst)) {
                /* Excluded since the look above: a thread about to exec, which waits while
                 * this mark says a send is under way (agent/host-hooks.c), then takes what is
                 * pending. No signal: one sent now could go through its exec. */
                sent = AG_WALL_SENDING;
                atomic_compare_exchange_strong_explicit(&t->wall_signalled, &sent, 0,
                                                        memory_order_acq_rel, memory_order_relaxed);
                continue;
            }
            ag_wall_visits[i].hold = AG_WALL_HOLD_NONE;
            ag_signal_thread(tid, AG_WALL_SIVAL);
            /* Unless a handler took it already (no pass adds to it between the two) */
            sent = AG_WALL_SENDING;
            atomic_compare_exchange_strong_explicit(&t->wall_signalled, &sent, AG_WALL_SENT,
                                                    memory_order_acq_rel, memory_order_relaxed);
            continue;
        }
        if (w >= AG_WALL_HELD_ONE && st != 'T' && st != 't') {
            /* Asleep, or in a blocking call, with passes held for its signal: it ran to get
             * there without taking the signal (blocked), so where it waited is not known. A
             * stopped thread keeps them: stopped while it waited for a core, its signal still
             * pending, it takes them where it waited when continued. */
            ag_wall_unhold(t, &ag_wall_visits[i], w);
        }
        if (st != 'R' && st != 'S' && st != 'D') {
            atomic_store_explicit(&t->wall_seen_ns, now, memory_order_release);
            continue; /* stopped, traced, zombie or gone: nothing to take */
        }
        s = ag_ring_reserve(&t->wring);
        if (s == NULL) {
            atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&ag.n_lost, 1, memory_order_relaxed);
            atomic_store_explicit(&t->wall_seen_ns, now, memory_order_release); /* counted */
            continue;
        }
        s->timestamp_ns = ag_now_ns();
        s->cpu_time_ns = 0;
        {
            struct timespec ts;

            if (clock_gettime(ag_thread_cpu_clock(tid), &ts) == 0) {
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
            err = ag_wall_test_woke(tid) ? -EAGAIN : ag_wall_from_proc(tid, s);
        }
        if (atomic_load_explicit(&t->tid, memory_order_acquire) != tid || ag_in_own_code(tid)) {
            /* the slot changed hands, or own code began while /proc was read (its wait is what
             * was read): the slot is not committed, and the interval is not this thread's */
            continue;
        }
        if (err != 0) {
            /* Its registers cannot be known (ENOEXEC), or it woke while they were read (EAGAIN:
             * not in a system call any more; this pass sent it no signal): no sample for this
             * interval, a sample lost and counted. Left uncounted, a thread that wakes often
             * lost 1 to 7 intervals a run without a trace saying so. A thread that woke is not
             * seen: it runs, and the next pass signals it. Counted as seen, it let a stack
             * snapshot settle without it, and a thread with too little CPU in the session for
             * a CPU sample was missing from dotnet-stack's threads (CI, once under ASan). */
            atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&ag.n_lost, 1, memory_order_relaxed);
            if (err != -EAGAIN) {
                atomic_store_explicit(&t->wall_seen_ns, now, memory_order_release);
            }
            continue;
        }
        ag_ring_commit(&t->wring);
        atomic_store_explicit(&t->wall_seen_ns, now, memory_order_release);
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
    if (!atomic_load(&ag.stopping) && !atomic_load(&ag_wall_quit)) {
        pthread_cond_timedwait(&ag.wake_cond, &ag.wake_lock, &ts);
    }
    pthread_mutex_unlock(&ag.wake_lock);
}

static void *
ag_wall_main(void *arg)
{
    uint64_t next = ag_now_ns(), prev = 0;
    unsigned epoch_hz = 0;

    (void)arg;
    ag_thread_exclude_self();
    pthread_setname_np(pthread_self(), "pipeprof-wall");
    while (!atomic_load(&ag.stopping) && !atomic_load(&ag_wall_quit)) {
        unsigned hz = atomic_load(&ag.hz_wall);
        uint64_t now = ag_now_ns(), interval;

        if (hz == 0) {
            prev = 0;
            epoch_hz = 0;
            (void)ag_wait_ms(100);
            next = ag_now_ns();
            continue;
        }
        if (prev != 0) {
            atomic_fetch_add(&ag.wall_active_ns, now - prev);
        }
        prev = now;
        interval = 1000000000u / hz;
        if (hz != epoch_hz) {
            /* A new rate: missed passes are counted in its intervals from here, and a signal
             * of an earlier session's that no handler took (the session ended first) holds no
             * thread's signals back. */
            memset(ag_wall_visits, 0, ag.cfg.max_threads * sizeof(*ag_wall_visits));
            for (unsigned i = 0; i < atomic_load(&ag.high) && i < ag.cfg.max_threads; i++) {
                uint32_t w = atomic_exchange_explicit(&ag.threads[i].wall_signalled, 0,
                                                      memory_order_acq_rel);

                if (w >= AG_WALL_HELD_ONE) { /* passes of the old rate no sample will carry */
                    ag_sig_count_unsampled(&ag.threads[i], w / AG_WALL_HELD_ONE);
                }
            }
            epoch_hz = hz;
        }
        if (now >= next) {
            /* The pass is for the last interval on the grid that began by now: fell behind, the
             * ones skipped are not made up (no burst) and are counted as missed. */
            uint64_t slot = next + (now - next) / interval * interval, none = 0;

            atomic_compare_exchange_strong(&ag.wall_first_ns, &none, slot);
            atomic_store(&ag.wall_last_ns, slot);
            ag_wall_pass(now, slot, interval);
            atomic_fetch_add(&ag.wall_passes, 1);
            next = slot + interval;
        }
        ag_wall_sleep_until(next);
    }
    ag_wall_stat_cache_close(); /* the session's fds go with it */
    return NULL;
}

int
ag_wall_start(void)
{
    int err;

    if (ag.wall_started) {
        return 0;
    }
    ag_wall_visits = calloc(ag.cfg.max_threads, sizeof(*ag_wall_visits));
    if (ag_wall_visits == NULL) {
        return -ENOMEM;
    }
    atomic_store(&ag_wall_quit, 0);
    pthread_mutex_lock(&ag_wall_trim_lock);
    atomic_store(&ag_wall_producing, 1);
    pthread_mutex_unlock(&ag_wall_trim_lock);
    err = ag_thread_spawn(&ag.wall, ag_wall_main, NULL);
    if (err != 0) {
        atomic_store(&ag_wall_producing, 0);
        free(ag_wall_visits);
        ag_wall_visits = NULL;
        return err;
    }
    ag.wall_started = 1;
    return 0;
}

/*
 * Ends the wall thread: by ag_stop() with ag.stopping set, or when the last wall request went
 * (life_lock held either way). The memory of the wall rings it filled goes back to the kernel
 * as they are drained (now, or at the drain that empties them: ag_wall_trim_drained): with no
 * producer left, an empty ring's slots are read by nobody (the consumer looks at its indices).
 */
void
ag_wall_stop(void)
{
    unsigned i, high;

    if (!ag.wall_started) {
        return;
    }
    pthread_mutex_lock(&ag.wake_lock);
    atomic_store(&ag_wall_quit, 1);
    ag.wake_seq++; /* ends an idle ag_wait_ms() too */
    pthread_cond_broadcast(&ag.wake_cond);
    pthread_mutex_unlock(&ag.wake_lock);
    pthread_join(ag.wall, NULL);
    ag.wall_started = 0;
    free(ag_wall_visits);
    ag_wall_visits = NULL;
    pthread_mutex_lock(&ag_wall_trim_lock);
    atomic_store(&ag_wall_producing, 0);
    high = atomic_load(&ag.high);
    for (i = 0; ag.threads != NULL && i < high; i++) {
        (void)ag_ring_trim(&ag.threads[i].wring);
    }
    pthread_mutex_unlock(&ag_wall_trim_lock);
}

/* 1 when every sampled thread's wall_seen_ns is since_ns or later. */
static int
ag_wall_all_seen(uint64_t since_ns)
{
    unsigned i, high = atomic_load_explicit(&ag.high, memory_order_acquire);

    for (i = 0; i < high && i < ag.cfg.max_threads; i++) {
        struct ag_thread *t = &ag.threads[i];

        if (atomic_load_explicit(&t->state, memory_order_acquire) == AG_SLOT_ACTIVE &&
            !atomic_load_explicit(&t->excluded, memory_order_relaxed) &&
            atomic_load_explicit(&t->wall_seen_ns, memory_order_acquire) < since_ns) {
            return 0;
        }
    }
    return 1;
}

int
ag_wall_settle(uint64_t since_ns, unsigned timeout_ms)
{
    uint64_t deadline = ag_now_ns() + (uint64_t)timeout_ms * 1000000u;
    struct timespec step = { 0, 500000 };

    for (;;) {
        if (!atomic_load(&ag.running) || atomic_load(&ag.hz_wall) == 0) {
            return -ESRCH;
        }
        if (ag_wall_all_seen(since_ns)) {
            return 0;
        }
        if (timeout_ms == 0 || ag_now_ns() >= deadline) {
            return -ETIMEDOUT;
        }
        /* The caller is the consumer, excluded from sampling: the host's nanosleep, straight. */
        nanosleep(&step, NULL);
    }
}

void
ag_wall_trim_drained(struct ag_thread *t)
{
    if (atomic_load_explicit(&ag_wall_producing, memory_order_relaxed)) {
        return;
    }
    pthread_mutex_lock(&ag_wall_trim_lock);
    if (!atomic_load_explicit(&ag_wall_producing, memory_order_relaxed)) {
        (void)ag_ring_trim(&t->wring);
    }
    pthread_mutex_unlock(&ag_wall_trim_lock);
}

void
ag_wall_files_close(void)
{
    ag_wall_stat_cache_close();
}

/* fork() child: the wall thread is gone; a lock a parent's drain held is free again. */
void
ag_wall_forked_child(void)
{
    pthread_mutex_init(&ag_wall_trim_lock, NULL);
    atomic_store(&ag_wall_producing, 0);
    ag_wall_visits = NULL;      /* the parent's, not freed: its thread may have been using it */
    ag_wall_stat_cache_close(); /* the parent's threads' files */
}
