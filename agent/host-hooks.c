/* SPDX-License-Identifier: MIT */
/*
 * agent/host-hooks.c - the agent's side of the host contract (host/host.h): the hooks that the
 * interposers of host/threads.c, host/blocking.c and host/signals.c call on host threads, and
 * their installation. Here the agent registers a thread pthread_create started, records the
 * stack of a thread that enters a blocking call (read by the wall sampler, agent/wall.c; in CPU
 * mode only the interposer's frame, from which the drain walks it for a stop marker), and
 * keeps the note of a thread that blocks the sampling signal: the CPU it burns meanwhile is
 * claimed as it unblocks, as an AG_SOURCE_UNSEEN sample under the stack of the call that
 * blocked it. Context: host threads, in any state the host calls the interposers from; the hooks
 * stay cheap, never allocate, and leave errno as the real call left it.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/internal.h"
#include "common/platform.h"
#include "host/host.h"

/* Walks the stack of an interposer's caller into frames; fa is the interposer's frame address.
 * -EFAULT when its frame record cannot be read. */
static int
ag_host_walk_caller(struct ag_thread *t, uint64_t fa, uint64_t *frames, uint32_t max,
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

/* The stack a wall sample of a thread blocked in the call stands for, and in CPU mode the stop
 * marker of a thread the drain finds in the call (ag_thread_wait_stack): leaf (the libc function
 * the interposer calls, entered: looked up as is) over the caller's, whose return addresses are
 * looked up at - 1 as any caller's. Without leaf the caller's return address is the leaf. */
static void *
ag_host_blocking_enter(uint64_t fa, uint64_t leaf)
{
    uint64_t frames[AG_MAX_FRAMES];
    struct ag_unwind_result res;
    struct ag_thread *t;
    unsigned wall = atomic_load_explicit(&ag.hz_wall, memory_order_relaxed);
    uint32_t at, seq;

    if (wall == 0 && atomic_load_explicit(&ag.hz_cpu, memory_order_relaxed) == 0) {
        return NULL;
    }
    t = ag_sig_thread_self();
    if (t == NULL || t->blk.frames == NULL) {
        return NULL;
    }
    if (wall == 0) {
        /* CPU mode: a stop marker needs the stack only if the drain finds the thread here; it
         * walks it from fa then. Stored as ag_seqstack_put stores (internal.h). */
        seq = atomic_load_explicit(&t->blk.seq, memory_order_relaxed);
        atomic_store_explicit(&t->blk.seq, seq + 1, memory_order_relaxed);
        atomic_store_explicit(&t->blk_fa, fa, memory_order_release);
        atomic_store_explicit(&t->blk_leaf, leaf, memory_order_release);
        atomic_store_explicit(&t->blk.seq, seq + 2, memory_order_release);
        atomic_store_explicit(&t->blocked, AG_BLOCKED_FRAME, memory_order_release);
        return t;
    }
    at = leaf != 0 && ag.cfg.max_frames > 1; /* the config is read as the walk's, once t is known */
    if (ag_host_walk_caller(t, fa, frames + at, ag.cfg.max_frames - at, &res) != 0) {
        return NULL;
    }
    if (at) {
        frames[0] = leaf;
        res.depth++;
    }
    ag_seqstack_put(&t->blk, frames, &res);
    atomic_store_explicit(&t->blocked, AG_BLOCKED_STACK, memory_order_release);
    return t;
}

static void
ag_host_blocking_leave(void *token)
{
    struct ag_thread *t = token;

    if (t != NULL) {
        atomic_store_explicit(&t->blocked, AG_BLOCKED_NONE, memory_order_release);
    }
}

/* The agent runs and the caller is a host thread. */
static int
ag_host_active(void)
{
    return atomic_load_explicit(&ag.running, memory_order_relaxed) && !ag_tls_excluded;
}

/*
 * Claims the CPU thread t burned since its last sample as a sample of its own ring, while the
 * sampling signal is blocked (this thread is the ring's only producer then). frames/res: a stack
 * walked from an interposer's caller (its leaf a return address, which symbolizes to the caller,
 * as a pc just after the call would). unseen: AG_SOURCE_UNSEEN, the marker over that stack; else
 * AG_SOURCE_TAIL, what a sample at the moment would have stood for. Spans under half an interval
 * are left to the next sample or claim.
 */
static void
ag_host_claim(struct ag_thread *t, uint64_t cpu, int unseen, const uint64_t *frames,
              const struct ag_unwind_result *res)
{
    unsigned hz = atomic_load_explicit(&ag.hz_cpu, memory_order_relaxed);
    uint32_t depth = res->depth, skip = unseen ? 1 : 0;
    uint64_t delta, weight;
    struct ag_sample *s;

    if (hz == 0 || atomic_load_explicit(&t->last_cpu_ns, memory_order_relaxed) == 0 ||
        atomic_load_explicit(&t->has_ring, memory_order_relaxed)) {
        return; /* not sampled in CPU mode, or by perf-ring, which needs no signal */
    }
    weight = ag_sig_cpu_weigh(t, cpu, 1000000000u / hz, AG_WEIGH_CLAIM, &delta);
    if (weight == 0) {
        return;
    }
    s = ag_ring_reserve(&t->ring);
    if (s == NULL) {
        ag_sig_count_lost(t, delta); /* its span weighed: in no sample */
        return;
    }
    atomic_fetch_add_explicit(&ag.n_cpu_weight, weight, memory_order_relaxed);
    atomic_fetch_add_explicit(&ag.cpu_sampled_ns, delta, memory_order_relaxed);
    atomic_fetch_add_explicit(unseen ? &ag.cpu_unseen_ns : &ag.n_cpu_tails, unseen ? delta : 1,
                              memory_order_relaxed);
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
ag_host_sigmask(host_sigmask_fn real, int how, const sigset_t *set, sigset_t *old, uint64_t fa)
{
    uint64_t frames[AG_MAX_FRAMES], since, half;
    struct ag_unwind_result res = { 0, 0, 0, 0, 0 };
    unsigned hz;
    struct ag_thread *t;
    sigset_t prev, now;
    int rc, signo, in_set, unblocks, blocks;

    /* Kept while CPU sampling is off too, so that a note is never stale when it starts. */
    if (set == NULL || !ag_host_active() ||
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
                ag_host_walk_caller(t, fa, frames, ag.cfg.max_frames, &res) != 0) {
                res.depth = 0;
            }
            ag_host_claim(t, ag_sig_now_ns(CLOCK_THREAD_CPUTIME_ID), 1, frames, &res);
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

            if (ag_host_walk_caller(t, fa, frames, ag.cfg.max_frames, &res) != 0) {
                res.depth = 0;
            }
            /* The CPU up to here ran with the signal open, and a sample now would have seen
             * this stack: it is claimed as such (when it may reach half an interval), so that
             * only what follows is unseen. Later claims show the unseen time under this call,
             * the one that hid it. */
            if (wall - atomic_load_explicit(&t->last_claim_ns, memory_order_relaxed) >= half) {
                ag_host_claim(t, ag_sig_now_ns(CLOCK_THREAD_CPUTIME_ID), 0, frames, &res);
                atomic_store_explicit(&t->last_claim_ns, wall, memory_order_relaxed);
            }
            ag_seqstack_put(&t->sigblk, frames, &res);
            atomic_store_explicit(&t->sigblk_ns, wall != 0 ? wall : 1, memory_order_relaxed);
        }
    }
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
        struct ag_unwind_result none = { 0, 0, 0, 0, 0 };

        ag_seqstack_put(&t->sigblk, NULL, &none); /* no call hid it: its start routine shows */
        atomic_store_explicit(&t->sigblk_ns, wall != 0 ? wall : 1, memory_order_relaxed);
    }
}

static uint32_t
ag_host_signals_handled(void)
{
    return atomic_load_explicit(&ag_tls_signals, memory_order_relaxed);
}

static void
ag_host_eintr_absorbed(void)
{
    atomic_fetch_add_explicit(&ag.n_eintr_absorbed, 1, memory_order_relaxed);
}

/* A host thread's send of the signal to thread tid (host.h): marks its slot for its handler
 * (ag_sig_host_sends). The mark is stored before the real send, a system call, is made. */
static void *
ag_host_send_begin(int32_t tid, int code, const union sigval *value)
{
    struct ag_thread *t = ag_sig_thread_of(tid);
    uint64_t v = 0;

    if (t == NULL) {
        return NULL;
    }
    if (value != NULL) {
        memcpy(&v, value, sizeof(*value) < sizeof(v) ? sizeof(*value) : sizeof(v));
    }
    atomic_store_explicit(&t->host_send_code, code, memory_order_relaxed);
    atomic_store_explicit(&t->host_send_value, v, memory_order_relaxed);
    atomic_store_explicit(&t->host_send, AG_HOST_SENDING, memory_order_seq_cst);
    return t;
}

/* After the real send: SENT, for the handler of an instance taken from now on. One of the
 * agent's taken meanwhile (SEEN) may have been the one the kernel merged the send into, or come
 * before it: which, the handler could not tell; a nudge, a signal of the agent's own that takes
 * no sample, has a handler look again now that the send is made. A host instance taken
 * meanwhile cleared the mark: nothing is owed. */
static void
ag_host_send_end(void *token, int32_t tid, int sent)
{
    struct ag_thread *t = token;
    int st = AG_HOST_SENDING, saved = errno;

    if (t == NULL) {
        return;
    }
    if (!sent) {
        if (!atomic_compare_exchange_strong_explicit(&t->host_send, &st, 0, memory_order_acq_rel,
                                                     memory_order_relaxed) &&
            st == AG_HOST_SEEN) {
            atomic_compare_exchange_strong_explicit(&t->host_send, &st, 0, memory_order_acq_rel,
                                                    memory_order_relaxed);
        }
        return;
    }
    if (atomic_compare_exchange_strong_explicit(&t->host_send, &st, AG_HOST_SENT,
                                                memory_order_acq_rel, memory_order_relaxed) ||
        st != AG_HOST_SEEN ||
        !atomic_compare_exchange_strong_explicit(&t->host_send, &st, AG_HOST_SENT,
                                                 memory_order_acq_rel, memory_order_relaxed)) {
        return;
    }
    ag_signal_thread(tid, AG_NUDGE_SIVAL);
    errno = saved;
}

/*
 * An exec replaces the image, and the kernel resets the sampling signal's disposition to SIG_DFL
 * for the new one (which, without the agent, keeps it: a setuid program, a cleared LD_PRELOAD,
 * `record --no-children`). A signal pending for the exec'ing thread goes through execve() and is
 * taken there, by that SIG_DFL: the new program dies of SIGPROF, at once or when it opens the
 * signal. The kernel drops a POSIX timer's own signal at an exec, not a wall pass's
 * (rt_tgsigqueueinfo) nor a perf event's (F_SETSIG). Two ways it happened:
 *  - the thread blocked the signal (the agent's instance pends while it is blocked) and exec'd:
 *    every run of host-contract-signals-execblocked under record, CPU (perf) and wall mode;
 *  - the sessions' stop before the exec (host/exec.c, sessions_end) outlasted its bound, so the
 *    wall thread still signalled the thread while it was in execve(): 1 run in 6 of
 *    `signals execwhile` with PIPEPROF_TEST_QUICK_STOP_MS=0 (the stop gives up at once).
 * So before the exec (after the stop) the thread leaves sampling and takes what is pending: its
 * slot is excluded (a wall pass re-reads that after it marks its send, and this waits for a send
 * under way), its timer and perf event go, and the signal's instances pending for it are taken
 * with the signal blocked; the agent's are dropped, the host's go back as they came (one of its
 * own timer's only if the exec fails: bare, the exec drops that one too). Not kept: a host send
 * from another thread that merged into a drained instance of the agent's (its nudge is dropped).
 */
#define AG_EXEC_HOST_KEPT  8
#define AG_EXEC_TIMER_KEPT 2
#define AG_EXEC_WAIT_NS    1000000000ull /* CLOCK_MONOTONIC: a bound, for a loaded machine */

static __thread siginfo_t ag_exec_timer_kept[AG_EXEC_TIMER_KEPT] AG_TLS;
static __thread unsigned ag_exec_timer_kept_n AG_TLS;

/* Whether si is an instance the agent sent (as ag_sig_handler tells them). */
static int
ag_exec_instance_is_agents(const siginfo_t *si)
{
    return si->si_code == POLL_IN ||
           (si->si_code == SI_TIMER && si->si_value.sival_int == AG_TIMER_SIVAL) ||
           (si->si_code == SI_QUEUE && si->si_pid == ag.pid &&
            (si->si_value.sival_int == AG_WALL_SIVAL || si->si_value.sival_int == AG_NUDGE_SIVAL));
}

/* Puts the host's instance si of signo back: to this thread when it was sent to a thread (a
 * tgkill, a timer's), else to the process. */
static void
ag_exec_requeue(int signo, siginfo_t *si)
{
    if (si->si_code == SI_TKILL || si->si_code == SI_TIMER) {
        (void)syscall(SYS_rt_tgsigqueueinfo, (long)getpid(), (long)syscall(SYS_gettid), (long)signo,
                      si);
    } else {
        (void)syscall(SYS_rt_sigqueueinfo, (long)getpid(), (long)signo, si);
    }
}

/* Takes every instance of signo pending for this thread (the kernel dequeues the thread's own
 * before the process's) with signo blocked; the agent's are dropped, the host's put back. */
static void
ag_exec_drain(int signo)
{
    struct timespec zero = { 0, 0 };
    siginfo_t host[AG_EXEC_HOST_KEPT], si;
    unsigned n = 0, i;
    sigset_t set, old;

    sigemptyset(&set);
    sigaddset(&set, signo);
    if (host_sigmask_raw(SIG_BLOCK, &set, &old) != 0) {
        return;
    }
    ag_exec_timer_kept_n = 0;
    for (i = 0; i < 64; i++) { /* (a timer's instances queue: one each) */
        if (syscall(SYS_rt_sigtimedwait, &set, &si, &zero, (long)(_NSIG / 8)) != signo) {
            break;
        }
        if (ag_exec_instance_is_agents(&si)) {
            continue;
        }
        if (si.si_code == SI_TIMER) {
            if (ag_exec_timer_kept_n < AG_EXEC_TIMER_KEPT) {
                ag_exec_timer_kept[ag_exec_timer_kept_n++] = si; /* (exec_back's) */
            }
        } else if (n < AG_EXEC_HOST_KEPT) {
            host[n++] = si;
        }
    }
    for (i = 0; i < n; i++) {
        ag_exec_requeue(signo, &host[i]);
    }
    host_sigmask_raw(SIG_SETMASK, &old, NULL);
}

/* host/exec.c, before the real exec: returns exec_back's token. */
static int
ag_host_exec_prepare(void)
{
    int signo = ag.signo, saved = errno, was = -1;
    int32_t tid = (int32_t)syscall(SYS_gettid);
    struct ag_thread *t;

    /* A vfork()ed child shares this memory and its thread-local cache but is not the thread
     * its slot names (nor this process), and a fork()ed child before its agent's start began
     * with nothing pending and has no slots: neither has a sender of the agent's. */
    if (signo == 0 || ag.pid != getpid()) {
        errno = saved;
        return -1;
    }
    t = ag_sig_thread_of(tid);
    if (t != NULL) {
        uint64_t until = ag_now_ns() + AG_EXEC_WAIT_NS;
        int locked;

        was = atomic_exchange_explicit(&t->excluded, 1, memory_order_seq_cst);
        /* A wall pass that marked its send before it saw the exclusion sends it: waited for
         * (the pass re-reads excluded after its mark, both sequentially consistent). */
        while ((atomic_load_explicit(&t->wall_signalled, memory_order_seq_cst) &
                AG_WALL_STATE_MASK) == AG_WALL_SENDING &&
               ag_now_ns() < until) {
            sched_yield();
        }
        /* Tried, not waited for: an exec from a host's signal handler may have cut this
         * thread's own registration short, with the lock held (execve is async-signal-safe). */
        for (;;) {
            locked = pthread_mutex_trylock(&ag.reg_lock) == 0;
            if (locked || ag_now_ns() >= until) {
                break;
            }
            sched_yield();
        }
        if (locked) {
            if (atomic_load_explicit(&t->tid, memory_order_relaxed) == tid &&
                atomic_load_explicit(&t->state, memory_order_relaxed) == AG_SLOT_ACTIVE) {
                ag_timer_delete_locked(t); /* (excluded: no sync arms them again) */
            }
            pthread_mutex_unlock(&ag.reg_lock);
        }
    }
    ag_exec_drain(signo);
    errno = saved;
    return was;
}

/* host/exec.c: the exec failed; this image runs on and is sampled again (its next arming). */
static void
ag_host_exec_back(int token)
{
    int saved = errno, signo = ag.signo;
    struct ag_thread *t;
    unsigned i;

    for (i = 0; i < ag_exec_timer_kept_n && signo != 0; i++) {
        ag_exec_requeue(signo, &ag_exec_timer_kept[i]);
    }
    ag_exec_timer_kept_n = 0;
    if (token >= 0 && ag.threads != NULL &&
        (t = ag_sig_thread_of((int32_t)syscall(SYS_gettid))) != NULL) {
        atomic_store_explicit(&t->excluded, token, memory_order_seq_cst);
    }
    errno = saved;
}

static const struct host_agent_hooks ag_host_hooks = {
    .active = ag_host_active,
    .thread_started = ag_thread_attach_started,
    .blocking_enter = ag_host_blocking_enter,
    .blocking_leave = ag_host_blocking_leave,
    .signals_handled = ag_host_signals_handled,
    .eintr_absorbed = ag_host_eintr_absorbed,
    .change_mask = ag_host_sigmask,
    .send_begin = ag_host_send_begin,
    .send_end = ag_host_send_end,
    .dlclosed = ag_modules_note_dlclose,
    .exec_prepare = ag_host_exec_prepare,
    .exec_back = ag_host_exec_back,
};

/*
 * Called by ag_start(), and at load (below). The call from ag_start() is what links this file,
 * and through host_set_agent_hooks() the interposers of host/, into whatever starts the agent: a
 * static archive's member is linked only when something references it (host/internal.h). At
 * load, so that threads the host creates before the agent's first start are wrapped as they
 * were when the interposers lived in the agent: each learns its stack bounds at its start. Also
 * resolves the real pthread_create before the agent creates its first thread.
 */
void
ag_interpose_init(void)
{
    host_set_agent_hooks(&ag_host_hooks);
    (void)host_real_pthread_create();
}

static void
ag_host_hooks_load(void)
{
    host_set_agent_hooks(&ag_host_hooks);
}

PP_LOAD_HOOK(ag_host_hooks_load);
