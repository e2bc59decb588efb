/* SPDX-License-Identifier: MIT */
/*
 * agent/sig-handler.c - SIGNAL CONTEXT: the sampling signal handler. It runs on the sampled
 * thread (a perf_event overflow, a CPU-time timer expiry, or the wall thread's
 * rt_tgsigqueueinfo), finds the thread's slot
 * through initial-exec TLS (or by tid, lock-free), walks the interrupted stack into a free slot
 * of the thread's preallocated ring and publishes it. A full ring counts a drop. It ignores
 * instances of its signal it did not send to the host's disposition (host_signal_chain, which
 * host/sig-chain.c keeps async-signal-safe). Must not allocate, lock, log, or leave errno changed.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "agent/arch.h"
#include "agent/internal.h"
#include "agent/symbols-internal.h"
#include "host/host.h"

uint64_t
ag_sig_now_ns(clockid_t clk)
{
    struct timespec ts;

    if (clock_gettime(clk, &ts) != 0) {
        return 0;
    }
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct ag_thread *
ag_sig_thread_of(int32_t tid)
{
    struct ag_thread *all = __atomic_load_n(&ag.threads, __ATOMIC_ACQUIRE); /* ag_threads_start */
    unsigned i, high = atomic_load_explicit(&ag.high, memory_order_acquire);

    for (i = 0; all != NULL && i < high; i++) {
        if (atomic_load_explicit(&all[i].state, memory_order_acquire) == AG_SLOT_ACTIVE &&
            atomic_load_explicit(&all[i].tid, memory_order_acquire) == tid) {
            return &all[i];
        }
    }
    return NULL;
}

struct ag_thread *
ag_sig_thread_self(void)
{
    struct ag_thread *t = ag_tls_thread;
    int32_t tid = ag_tls_tid;

    if (tid == 0) {
        tid = (int32_t)syscall(SYS_gettid); /* cannot fail, so errno is untouched */
        ag_tls_tid = tid;
    }
    /* The registry's publication (threads.c): a slot's plain fields (its rings, its CFI cache,
     * its stack mapping) are written under reg_lock before the release store of state =
     * ACTIVE; the acquire load of state here makes them visible before the handler uses them,
     * on weakly ordered processors too. ag.high is published the same way, and ag.threads, a
     * plain pointer, is set before ag_start() stores running = 1 (seq_cst), which the handler
     * has read already. */
    if (t != NULL && ag_tls_gen == atomic_load_explicit(&ag.gen, memory_order_relaxed) &&
        atomic_load_explicit(&t->tid, memory_order_acquire) == tid &&
        atomic_load_explicit(&t->state, memory_order_acquire) == AG_SLOT_ACTIVE) {
        return t;
    }
    t = ag_sig_thread_of(tid);
    if (t != NULL) {
        ag_tls_thread = t;
        ag_tls_gen = atomic_load_explicit(&ag.gen, memory_order_relaxed);
    }
    return t;
}

int
ag_sig_in_syscall(uint64_t pc)
{
    return ag_arch_at_syscall(pc);
}

/*
 * Whether a signal at pc shows a system call of the thread (a call seen, for its kernel time):
 * at a call's return, but not at a signal mask's. A signal that came while the thread had it
 * blocked is delivered as the mask opens, at the return of that rt_sigprocmask, whatever the
 * thread did while it was pending: that stack is no sample of where its calls are. ThreadSanitizer
 * runs every handler so (it holds the signal, then runs the handler later between two
 * pthread_sigmask calls that block all signals and restore the mask): a busy thread that makes no
 * calls, with a core of its own, had its locator's signals (at the tick) come in that window of
 * its perf handler, in step, 1 to 3 a scan, each one a call seen, and its locator never went
 * (test-agent-sampling's a_scan_without_a_sample_does_not_retire_a_locator: 58 such calls seen
 * in 0.8 s). A host thread that blocks the signal around its work had the same at each opening.
 */
int
ag_sig_call_seen(uint64_t pc)
{
    return ag_arch_at_syscall(pc) && !ag_arch_at_sigmask_return(pc);
}

uint64_t
ag_sig_cpu_weigh(struct ag_thread *t, uint64_t cpu, uint64_t period, int rule, uint64_t *delta_out)
{
    uint64_t last = atomic_load_explicit(&t->last_cpu_ns, memory_order_relaxed);
    uint64_t delta, weight;
    int64_t carry;

    /* An early span is left as it is (nothing exchanged): a claim that moves last_cpu_ns in the
     * meantime makes the exchange fail, and the span is looked at again. */
    do {
        /* A claim before the thread's first sample takes nothing: that CPU is the lottery's,
         * which its winners' samples stand for (timer.c, "The lottery"). */
        if (rule == AG_WEIGH_CLAIM &&
            atomic_load_explicit(&t->lottery, memory_order_relaxed) == AG_LOTTERY_DRAW) {
            *delta_out = 0;
            return 0;
        }
        if (rule == AG_WEIGH_EARLY && last != 0 &&
            (cpu <= last ||
             atomic_load_explicit(&t->cpu_carry_ns, memory_order_relaxed) + (int64_t)(cpu - last) <=
                     (int64_t)(period / 2))) {
            *delta_out = 0;
            return 0;
        }
    } while (!atomic_compare_exchange_weak_explicit(&t->last_cpu_ns, &last, cpu,
                                                    memory_order_relaxed, memory_order_relaxed));
    delta = last != 0 && cpu > last ? cpu - last : 0;
    *delta_out = delta;
    if (delta == 0 && rule != AG_WEIGH_CLAIM) {
        delta = period; /* no baseline: the sample stands for one interval */
    }
    /* Taken out and put back with atomic operations: a claim on another thread that runs
     * between the two moves the carry with its own span, and none of it is lost. */
    carry = atomic_exchange_explicit(&t->cpu_carry_ns, 0, memory_order_relaxed) + (int64_t)delta;
    if (carry > (int64_t)(period / 2)) {
        weight = ((uint64_t)carry + period / 2) / period;
    } else {
        /* (an early perf span is taken only when a claim moved the carry since it was looked at) */
        weight = rule != AG_WEIGH_CLAIM ? 1 : 0;
    }
    weight = weight > UINT16_MAX ? UINT16_MAX : weight;
    carry -= (int64_t)(weight * period);
    if (carry < -(int64_t)period) {
        carry = -(int64_t)period; /* the at-least-once rule may not pile up a debt */
    }
    atomic_fetch_add_explicit(&t->cpu_carry_ns, carry, memory_order_relaxed);
    return weight;
}

/*
 * Whether sp is on the alternate signal stack the thread had registered when the signal came.
 * The signal frame's uc_stack is that registration (since Linux 4.7 its ss_flags are the
 * registration's flags, never SS_ONSTACK), so the range is compared here, as the kernel's
 * on_sig_stack() does.
 */
static int
ag_sig_on_altstack(const void *uctx, uint64_t sp)
{
    const stack_t *ss = &((const ucontext_t *)uctx)->uc_stack;
    uint64_t lo = (uint64_t)(uintptr_t)ss->ss_sp;

    if (ss->ss_flags & SS_ONSTACK) {
        return 1;
    }
    return !(ss->ss_flags & SS_DISABLE) && ss->ss_size != 0 && sp > lo && sp - lo <= ss->ss_size;
}

/* The page faults the calling thread has taken (1 + the count, so that 0 means unknown).
 * getrusage(RUSAGE_THREAD) through syscall(), a system call with no lock (1.4 to 1.7 us on the
 * loaded 2-vCPU VM of docs/performance.md). */
uint64_t
ag_sig_faults(void)
{
    struct rusage ru;

    if (syscall(SYS_getrusage, RUSAGE_THREAD, &ru) != 0) {
        return 0;
    }
    return 1u + (uint64_t)ru.ru_minflt + (uint64_t)ru.ru_majflt;
}

uint32_t
ag_fault_unplaced_w(uint64_t faults, uint32_t w, uint64_t cpu_ns)
{
    uint64_t bound;

    if (faults == 0) {
        return 0;
    }
    if (faults == AG_FAULTS_UNKNOWN || faults > UINT64_MAX / AG_FAULT_BOUND_NS || w < 2) {
        return w;
    }
    bound = faults * AG_FAULT_BOUND_NS;
    if (bound >= cpu_ns || w > UINT16_MAX) {
        return w;
    }
    /* (bound * w cannot overflow: bound < cpu_ns, w < 2^16) */
    bound = (bound * w + cpu_ns - 1u) / cpu_ns;
    return bound < w ? (uint32_t)bound : w;
}

void
ag_sig_split_faulted(struct ag_sample *split, uint64_t faults)
{
    uint32_t unplaced = ag_fault_unplaced_w(faults, split->weight, split->cpu_delta_ns);

    split->frames[0] = (uint64_t)(uintptr_t)pipeprof_cpu_in_kernel_unplaced;
    split->depth = 1;
    if (unplaced < split->weight) {
        split->frames[1] = unplaced;
        split->depth = 2;
    }
}

/* Wakes the manager thread (ag_manager_wake: an atomic store and a futex wake, async-signal-safe;
 * the handler restores errno). */
static void
ag_sig_wake_manager(void)
{
    ag_manager_wake();
}

/* Counts n intervals of thread t that got no wall sample (the wall thread's passes, and the
 * handler for a wall signal merged into a CPU one: async-signal-safe, atomics only). */
void
ag_sig_count_unsampled(struct ag_thread *t, uint64_t n)
{
    /* unsampled before dropped, released with it: a drain that reads the new dropped (acquire)
     * reads these intervals in unsampled too. The other order let a drain report them as lost
     * but not as unsampled, and nothing reported them later when dropped did not change again
     * (a thread's last intervals: 19 to 39 of about 200000 in a TSan run). */
    atomic_fetch_add_explicit(&t->unsampled, n, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->dropped, n, memory_order_release);
    atomic_fetch_add_explicit(&ag.n_lost, n, memory_order_relaxed);
    atomic_fetch_add_explicit(&ag.n_wall_unsampled, n, memory_order_relaxed);
}

void
ag_sig_count_lost(struct ag_thread *t, uint64_t cpu_ns)
{
    atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ag.n_lost, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ag.cpu_lost_ns, cpu_ns, memory_order_relaxed);
}

/* Whether signo is pending for the calling thread (or its process), as it is while a handler of
 * it runs (the kernel blocks it there) when one was sent after the running one was taken. */
static int
ag_sig_pending(int signo)
{
    uint64_t set = 0;

    return syscall(SYS_rt_sigpending, &set, sizeof(set)) == 0 && signo > 0 && signo <= 64 &&
           ((set >> (unsigned)(signo - 1)) & 1u);
}

/* The sampling signal was taken on thread t (its handler runs; mode is AG_MODE_WALL for a wall
 * pass's signal, AG_MODE_CPU for a CPU engine's, and 0 for the host's own instance): no sampling
 * signal is pending for it now, so the next wall pass may signal it again (wall.c holds the next
 * back while one is). A wall signal sent while another instance was pending merged into it: that
 * pass's interval got no wall sample, and is counted lost. One still being sent (the pass has not
 * sent it yet), or sent after this instance was taken (pending now), comes on its own and is not
 * counted. Before, a wall signal merged into the host's instance was never counted or cleared:
 * the thread went without wall samples for the rest of the session. The passes held for the wall
 * signal (wall.c, ag_wall_hold) are claimed by the same exchange: returned for a wall signal's
 * sample to carry, else counted lost (no sample of that signal's will carry them). */
static uint32_t
ag_sig_wall_taken(struct ag_thread *t, int mode, int signo)
{
    uint32_t w = atomic_exchange_explicit(&t->wall_signalled, 0, memory_order_acq_rel);
    uint32_t held = w / AG_WALL_HELD_ONE;

    if (mode == AG_MODE_WALL) {
        return held;
    }
    if ((w & AG_WALL_STATE_MASK) == AG_WALL_SENT && !ag_sig_pending(signo)) {
        held++;
    }
    if (held != 0) {
        ag_sig_count_unsampled(t, held);
    }
    return 0;
}

/*
 * A host thread's send of the signal to this thread (host/signals.c, through agent/host-hooks.c:
 * t->host_send). The host's own instance taken (host_instance) is that send's, or one it merged
 * into: the mark goes. One of the agent's taken while the send is being made leaves it to the
 * sender (AG_HOST_SEEN: the sender nudges once its send returned). One taken after the send
 * returned, with no instance of the signal pending now, is the one the kernel merged the host's
 * into (standard signals do not queue), since the host's would otherwise be pending or taken
 * already: returns 1, and *host_info is what the host's handler is to get (its code, value, pid
 * and uid). With one pending, that one comes next and looks again. Async-signal-safe.
 */
static int
ag_sig_host_sends(int signo, int host_instance, siginfo_t *host_info)
{
    struct ag_thread *t = ag_sig_thread_self();
    uint64_t value;
    int st;

    if (t == NULL || (st = atomic_load_explicit(&t->host_send, memory_order_acquire)) == 0) {
        return 0;
    }
    if (host_instance) {
        atomic_store_explicit(&t->host_send, 0, memory_order_release);
        return 0;
    }
    if (st == AG_HOST_SENDING) {
        atomic_compare_exchange_strong_explicit(&t->host_send, &st, AG_HOST_SEEN,
                                                memory_order_acq_rel, memory_order_relaxed);
        return 0;
    }
    if (st != AG_HOST_SENT || ag_sig_pending(signo) ||
        !atomic_compare_exchange_strong_explicit(&t->host_send, &st, 0, memory_order_acq_rel,
                                                 memory_order_relaxed)) {
        return 0;
    }
    value = atomic_load_explicit(&t->host_send_value, memory_order_relaxed);
    memset(host_info, 0, sizeof(*host_info));
    host_info->si_signo = signo;
    host_info->si_code = atomic_load_explicit(&t->host_send_code, memory_order_relaxed);
    host_info->si_pid = ag.pid;
    host_info->si_uid = (uid_t)syscall(SYS_getuid);
    memcpy(&host_info->si_value, &value, sizeof(host_info->si_value));
    return 1;
}

/* The lottery's numbers (timer.c, "The lottery" says why a Weyl sequence): here, as the handler
 * draws them. */
#define AG_LOTTERY_STEP 0x9e3779b97f4a7c15u /* 2^64 (golden ratio - 1), odd */

int
ag_lottery_draw(uint64_t num, uint64_t den)
{
    uint64_t z = atomic_load_explicit(&ag.lottery_state, memory_order_relaxed);
    struct timespec ts;

    if (num >= den) {
        return 1;
    }
    if (z == 0 && clock_gettime(CLOCK_MONOTONIC, &ts) == 0) {
        /* s: the clock and the pid, mixed (splitmix64's finaliser) */
        uint64_t s = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
                     ((uint64_t)getpid() << 32);

        s = (s ^ (s >> 30)) * 0xbf58476d1ce4e5b9u;
        s = (s ^ (s >> 27)) * 0x94d049bb133111ebu;
        /* (another thread's seed, if it came first, is as good) */
        (void)atomic_compare_exchange_strong(&ag.lottery_state, &z, (s ^ (s >> 31)) | 1u);
        atomic_store_explicit(&ag.lottery_mix, s, memory_order_relaxed);
    }
    z = atomic_fetch_add_explicit(&ag.lottery_state, AG_LOTTERY_STEP, memory_order_relaxed) +
        AG_LOTTERY_STEP;
    /* (den < 2^32: an interval of at most 1 s) */
    return (((z >> 32) * den) >> 32) < num;
}

int64_t
ag_lottery_carry(uint64_t period)
{
    uint64_t z = atomic_fetch_add_explicit(&ag.lottery_mix, AG_LOTTERY_STEP, memory_order_relaxed) +
                 AG_LOTTERY_STEP;

    /* splitmix64 over its own counter: independent of the draw that won (the next number of
     * the draws' sequence is that draw's fraction + 0.618, which a win keeps below T/I) */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    return (int64_t)(((z >> 32) * period) >> 32) + 1 - (int64_t)(period / 2);
}

/*
 * A timer signal of thread t in the first-sample lottery (timer.c, "The lottery"), its CPU time
 * cpu, at hz. Returns 1 when it is dropped. Drawing (no sample yet), the signal stands for the
 * ticks that saw the thread's timer expire (1 + its overruns): it is the thread's first sample,
 * of one interval, with probability those ticks / the interval, the CPU before it the lottery's;
 * a signal that stands for more than an interval leaves the lottery and weighs its span. Won, the
 * timer ticks at the tick's rate until the manager re-arms it: a signal before about an interval
 * since the last sample is dropped, its CPU left to the next one.
 */
int
ag_sig_lottery(struct ag_thread *t, const siginfo_t *info, uint64_t cpu, unsigned hz)
{
    uint64_t period = 1000000000u / hz,
             last = atomic_load_explicit(&t->last_cpu_ns, memory_order_relaxed);
    uint64_t tick = ag.tick_hz != 0 ? 1000000000u / ag.tick_hz : period, ticks = 1;
    int expected = AG_LOTTERY_DRAW;

    if (atomic_load_explicit(&t->lottery, memory_order_relaxed) == AG_LOTTERY_WON) {
        return cpu < last + period - tick / 2;
    }
    if (info->si_code == SI_TIMER && info->si_overrun > 0) {
        ticks += (uint64_t)info->si_overrun;
    }
    if (ticks * tick > period) {
        /* (more than an interval: no lottery, its span weighed as any sample's) */
        (void)atomic_compare_exchange_strong_explicit(&t->lottery, &expected, AG_LOTTERY_WON,
                                                      memory_order_relaxed, memory_order_relaxed);
    } else if (!ag_lottery_draw(ticks * tick, period)) {
        return 1;
    } else if (atomic_compare_exchange_strong_explicit(&t->lottery, &expected, AG_LOTTERY_WON,
                                                       memory_order_relaxed,
                                                       memory_order_relaxed)) {
        /* Won: one interval from here (ag_sig_cpu_weigh: no span, one interval), the carry
         * random (timer.c says why). */
        atomic_fetch_add_explicit(&ag.cpu_chance_ns, cpu > last ? cpu - last : 0,
                                  memory_order_relaxed);
        atomic_store_explicit(&t->cpu_carry_ns, ag_lottery_carry(period), memory_order_relaxed);
        atomic_store_explicit(&t->last_cpu_ns, cpu, memory_order_relaxed);
    }
    atomic_store_explicit(&ag.lottery_asked, 1, memory_order_release);
    ag_sig_wake_manager();
    return 0;
}

void
ag_sig_handler(int signo, siginfo_t *info, void *uctx)
{
    int saved_errno = errno;
    struct ag_unwind_result res;
    struct ag_unwind_ctx c;
    struct ag_thread *t;
    struct ag_sample *s;
    struct ag_arch_regs regs;
    uint64_t lo, hi, cpu, delta, period, kernel_ns = 0;
    uint8_t mode, engine = 0;
    unsigned hz;
    int eintr, in_kernel = 0, site = 0, faulted = 0, faults_read = 0, owed, offstack;
    uint64_t fault_n = AG_FAULTS_UNKNOWN;
    uint32_t skip = 0, kernel_w = 0, held = 0; /* held: wall passes this sample would carry */
    uint32_t early = 0;    /* perf: early overflows whose CPU this sample takes (AG_WEIGH_EARLY) */
    uint64_t split_pc = 0; /* the split-off record's marker: none (kernel time), not sampled */
    siginfo_t host_info;

    /* Dekker's pattern with ag_stop(): it stores running = 0 and then reads inflight, the handler
     * increments inflight and then reads running, all sequentially consistent, so on any
     * processor at least one of the two sees the other's write: ag_stop() waits for this
     * handler, or this handler sees running == 0 and touches nothing. (Acquire/release would
     * not do: each side's load could be satisfied before its own store is visible to the other,
     * as store buffers allow on x86 too.) The decrement at out: is a release, paired with
     * ag_stop()'s loads of inflight, so the slot written here is complete before it is freed. */
    atomic_fetch_add_explicit(&ag.inflight, 1, memory_order_seq_cst);
    if (info->si_code == POLL_IN) {
        mode = AG_MODE_CPU; /* a perf_event overflow (F_SETSIG); si_fd is checked below */
        engine = AG_CPU_ENGINE_PERF;
    } else if (info->si_code == SI_TIMER && info->si_value.sival_int == AG_TIMER_SIVAL) {
        mode = AG_MODE_CPU;
        engine = AG_CPU_ENGINE_TIMER;
        if (info->si_overrun > 0) {
            atomic_fetch_add_explicit(&ag.n_overruns, (uint64_t)info->si_overrun,
                                      memory_order_relaxed);
        }
    } else if (info->si_code == SI_QUEUE && info->si_value.sival_int == AG_WALL_SIVAL &&
               info->si_pid == ag.pid) {
        mode = AG_MODE_WALL;
    } else if (info->si_code == SI_QUEUE && info->si_value.sival_int == AG_NUDGE_SIVAL &&
               info->si_pid == ag.pid) {
        /* A host sender's nudge: no sample, a look at its send (at out) */
        atomic_fetch_add_explicit(&ag_tls_signals, 1, memory_order_relaxed);
        t = ag_sig_thread_self();
        if (t != NULL) {
            ag_sig_wall_taken(t, 0, signo);
        }
        goto out;
    } else {
        /* Not ours: the host's (kill, raise, its timer, setitimer): its disposition decides. */
        t = ag_sig_thread_self();
        if (t != NULL) {
            ag_sig_wall_taken(t, 0, signo);
        }
        (void)ag_sig_host_sends(signo,
                                (info->si_code == SI_TKILL || info->si_code == SI_QUEUE) &&
                                        info->si_pid == ag.pid,
                                &host_info);
        atomic_fetch_sub_explicit(&ag.inflight, 1, memory_order_release);
        errno = saved_errno;
        host_signal_chain(signo, info, uctx);
        return;
    }
    /* Counted before anything else: whatever this handler does with it, the signal may have cut
     * a host's blocking call short, which host/ retries by this count (also when a session's end
     * cleared running, or the thread runs on an alternate stack). */
    atomic_fetch_add_explicit(&ag_tls_signals, 1, memory_order_relaxed);
    if (!atomic_load_explicit(&ag.running, memory_order_seq_cst)) {
        goto out;
    }
    /* Registers of the interrupted context, and whether it was a syscall about to return
     * EINTR (agent/arch.h). */
    eintr = ag_arch_sig_regs(uctx, &regs);
    if (eintr) {
        atomic_fetch_add_explicit(&ag.n_eintr_seen, 1, memory_order_relaxed);
    }
    /* The interrupted code runs on the thread's alternate signal stack (a host handler installed
     * where host/ could not add the signal to its mask, or code the host runs there): maybe too
     * small a stack to walk from, and not the thread's. No sample: dropped as at a full ring
     * below (weighed, its CPU counted lost, the thread's LOST record), once it is known to be
     * one (a perf fd's, a timer's that is no locator's). Dropped here before it was weighed, a
     * coroutine's 300 ms on its sigaltstack (tests/hosts' signals offstack, 100 Hz) came back in
     * the thread's next sample: 10 intervals of [kernel, not placed] and 10 of [not sampled]. */
    offstack = ag_sig_on_altstack(uctx, regs.sp);
    t = ag_sig_thread_self();
    if (t != NULL) {
        held = ag_sig_wall_taken(t, mode, signo);
    }
    if (t == NULL || atomic_load_explicit(&t->excluded, memory_order_relaxed) ||
        (mode == AG_MODE_WALL &&
         ag_in_own_code(atomic_load_explicit(&t->tid, memory_order_relaxed)))) {
        goto out; /* the profiler's threads; a wall signal sent just before own code began */
    }
    if (engine == AG_CPU_ENGINE_PERF &&
        atomic_load_explicit(&t->perf_fd, memory_order_acquire) != info->si_fd) {
        goto out; /* another fd's SIGIO-style signal, or an event closed since */
    }
    if (atomic_load_explicit(&t->sigblk_ns, memory_order_relaxed) != 0) {
        /* The signal is open, though no interposer saw it opened (a sigreturn restored the
         * mask, or a raw system call): its span goes to this sample, as it always did. */
        atomic_store_explicit(&t->sigblk_ns, 0, memory_order_relaxed);
    }
    hz = mode == AG_MODE_CPU ? atomic_load_explicit(&ag.hz_cpu, memory_order_relaxed)
                             : atomic_load_explicit(&ag.hz_wall, memory_order_relaxed);
    if (hz == 0) {
        goto out; /* a signal still in flight after the mode was switched off */
    }
    if (engine == AG_CPU_ENGINE_PERF) {
        /* An overflow the event counts in user mode at a system call's return was due in the
         * call's exit path, where interrupts are off until the return: its interval ended in the
         * kernel, and its stack is the call's, a call seen for the thread's kernel time (drain.c).
         * (pp-sample-syscalls' write loop: 60 % of its user-mode overflows, bench-less probe.)
         * Not at a signal mask's opening, where a pending one comes (ag_sig_call_seen). */
        in_kernel = ag_sig_call_seen(regs.pc);
        if (in_kernel) {
            atomic_fetch_add_explicit(&t->kern_sites, 1, memory_order_relaxed);
        }
    } else if (engine == AG_CPU_ENGINE_TIMER) {
        /* A CPU-time timer's expiry is seen at a tick and its signal sent as the thread returns
         * to user space: from a system call when the tick found it in the kernel. */
        in_kernel = ag_sig_in_syscall(regs.pc);
        if (atomic_load_explicit(&t->kern_locating, memory_order_relaxed)) {
            /* The kernel locator of a perf thread: only where its system calls are (timer.c). */
            atomic_fetch_add_explicit(&ag_tls_locator_signals, 1, memory_order_relaxed);
            if (!in_kernel || ag_arch_at_sigmask_return(regs.pc)) { /* (ag_sig_call_seen) */
                goto out;
            }
            site = 1;
            atomic_fetch_add_explicit(&t->kern_sites, 1, memory_order_relaxed);
        } else if (atomic_load_explicit(&t->kern_retired, memory_order_relaxed)) {
            goto out; /* a retired locator's last signal: the thread samples on perf */
        }
    }
    cpu = ag_sig_now_ns(CLOCK_THREAD_CPUTIME_ID);
    if (mode == AG_MODE_CPU && !site &&
        atomic_load_explicit(&t->sigblk_claimed, memory_order_relaxed)) {
        /* The signal left pending while the thread blocked it, delivered as the mask opened,
         * after the interposer claimed its span: a sample of it would count an interval that
         * ran nowhere near this stack. The little since goes to the next sample. */
        atomic_store_explicit(&t->sigblk_claimed, 0, memory_order_relaxed);
        if (cpu - atomic_load_explicit(&t->last_cpu_ns, memory_order_relaxed) < 500000000u / hz) {
            goto out;
        }
    }
    if (mode == AG_MODE_CPU && engine == AG_CPU_ENGINE_TIMER && !site &&
        atomic_load_explicit(&t->lottery, memory_order_relaxed) != AG_LOTTERY_NONE &&
        ag_sig_lottery(t, info, cpu, hz)) {
        goto out;
    }
    s = offstack ? NULL : ag_ring_reserve(&t->ring);
    if (s == NULL) {
        delta = 0;
        if (offstack) {
            atomic_fetch_add_explicit(&ag.n_offstack, 1, memory_order_relaxed);
        }
        if (mode == AG_MODE_CPU && !site) {
            /* The ring is full (its drain held off). The span is weighed as the sample's would
             * have been and counted lost with it: left to the next sample, it went under that
             * sample's stack, and on perf as kernel time (its weight beyond one interval), to a
             * call seen or [kernel, not placed] (issue 19). */
            period = 1000000000u / hz;
            if (ag_sig_cpu_weigh(t, cpu, period,
                                 engine == AG_CPU_ENGINE_PERF ? AG_WEIGH_EARLY : AG_WEIGH_ONE,
                                 &delta) == 0) {
                /* early: no sample, as below, and nothing lost */
                atomic_fetch_add_explicit(&t->perf_early, 1, memory_order_relaxed);
                atomic_fetch_add_explicit(&ag.n_perf_early, 1, memory_order_relaxed);
                goto out;
            }
            /* (the early overflows' CPU was in this span: lost with it) */
            (void)atomic_exchange_explicit(&t->perf_early, 0, memory_order_relaxed);
            delta = delta != 0 ? delta : period;
        }
        ag_sig_count_lost(t, delta);
        goto out;
    }
    s->timestamp_ns = ag_sig_now_ns(CLOCK_MONOTONIC);
    s->cpu_time_ns = cpu;
    s->tid = ag_tls_tid;
    s->mode = mode;
    s->engine = engine;
    s->weight = 1;
    s->cpu_delta_ns = 0;
    s->source = AG_SOURCE_SIGNAL;
    if (held != 0) {
        /* The intervals the thread waited for a core with this signal pending: its stack has
         * not changed since the first (wall.c caps them below UINT16_MAX). */
        s->weight = (uint16_t)(1u + held);
        atomic_fetch_add_explicit(&ag.n_wall_held, held, memory_order_relaxed);
        held = 0;
    }
    if (site) {
        s->weight = 0; /* a stack for the kernel time of the thread's perf samples (drain.c) */
        s->source = AG_SOURCE_KERNEL;
    } else if (mode == AG_MODE_CPU) {
        /* The sample stands for the thread's CPU time since its previous one (the baseline set
         * when it was armed): merged timer expiries, ticks that found the thread in the kernel
         * (the perf event counts user space only) and coalesced signals all come back here. */
        period = 1000000000u / hz;
        /* Rounded, with the remainder carried to the thread's next sample, so the weights add
         * up to the thread's CPU time in intervals (every sample counts at least once). */
        s->weight = (uint16_t)ag_sig_cpu_weigh(
                t, cpu, period, engine == AG_CPU_ENGINE_PERF ? AG_WEIGH_EARLY : AG_WEIGH_ONE,
                &delta);
        if (s->weight == 0) {
            /* An overflow early by the thread's clock (perf's counts stolen time): no sample
             * (the slot is not committed); its CPU goes to the thread's next. */
            atomic_fetch_add_explicit(&t->perf_early, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&ag.n_perf_early, 1, memory_order_relaxed);
            goto out;
        }
        early = engine == AG_CPU_ENGINE_PERF
                        ? atomic_exchange_explicit(&t->perf_early, 0, memory_order_relaxed)
                        : 0;
        s->cpu_delta_ns = delta != 0 ? delta : period;
        if (engine == AG_CPU_ENGINE_PERF &&
            (s->weight > 1 || atomic_load_explicit(&t->kern_faults, memory_order_relaxed) == 0 ||
             (atomic_load_explicit(&t->kern_w, memory_order_relaxed) != 0 &&
              !atomic_load_explicit(&t->kern_retired, memory_order_relaxed)) ||
             atomic_load_explicit(&t->kern_locating, memory_order_relaxed))) {
            /* Page faults are kernel time outside any system call, spent by the code that
             * touched the memory: a span that took some is not given to the calls seen but
             * for what is left above the faults' bound (ag_sig_split_faulted)
             * (a thread that made one madvise(2) call and then faulted its pages back in had 62
             * to 89 % of its CPU under the call, 12 % being the call's). The count is read at every
             * perf sample of a thread that spends kernel time, so each span has its own, and at the
             * thread's first perf sample: a span with no count before it (a thread's first
             * since it was armed, or since that first sample if it only now spends kernel
             * time) counts as one that took faults: whether it did is not known. */
            uint64_t faults = ag_sig_faults();
            uint64_t prev = atomic_exchange_explicit(&t->kern_faults, faults, memory_order_relaxed);

            faulted = faults != prev || faults == 0;
            fault_n = faults == 0 || prev == 0 ? AG_FAULTS_UNKNOWN : faults - prev;
            faults_read = 1;
        }
        if (engine == AG_CPU_ENGINE_PERF && s->weight > 1u + early) {
            /* The overflows the event skipped in the kernel: all but this sample's own interval
             * is kernel time, split off below (timer.c says why), but for the early overflows
             * whose CPU this sample took: those came in user mode. */
            kernel_w = s->weight - 1u - early;
            kernel_ns = s->cpu_delta_ns / s->weight * kernel_w;
            delta = s->cpu_delta_ns;
            atomic_fetch_add_explicit(&t->kern_w, kernel_w, memory_order_relaxed);
            if (!atomic_load_explicit(&t->kern_locating, memory_order_relaxed) &&
                !atomic_load_explicit(&t->kern_retired, memory_order_relaxed) &&
                !atomic_exchange_explicit(&t->kern_asked, 1, memory_order_relaxed)) {
                /* Its first kernel time and no locator yet: the manager arms one now, not at
                 * its next scan (timer.c). Once per thread; the wake is async-signal-safe. */
                atomic_store_explicit(&ag.kern_asked, 1, memory_order_release);
                ag_sig_wake_manager();
            }
        }
        if (engine == AG_CPU_ENGINE_TIMER && s->weight > 1 &&
            atomic_load_explicit(&t->tick_unseen, memory_order_relaxed) &&
            ag_timer_late(atomic_load_explicit(&t->timer_samples, memory_order_relaxed) + 1u -
                                  atomic_load_explicit(&t->scan_samples, memory_order_relaxed),
                          atomic_load_explicit(&t->timer_weight, memory_order_relaxed) + s->weight -
                                  atomic_load_explicit(&t->scan_weight, memory_order_relaxed))) {
            /* Auto's timers, on a thread whose samples since the last scan look late (the scan
             * moves it to perf): a tick sample that stands for more than its own interval stands
             * for CPU the tick did not see (its expiry was noticed late: the thread ran between
             * ticks), and the tick sees a thread that waits for a core unevenly over its runs.
             * Given to this stack, it was the tick's bias (timer.c, "Auto's move"): all but the
             * sample's own interval is [not sampled], split off below as kernel time is. A
             * thread the tick sees steadily keeps its weights (one sample in ten stands for two
             * intervals beside two busy loops, and on a thread that stays on the timers they
             * are the tick's unbiased sample of it: 10 to 17 % of such a thread's CPU went to
             * [not sampled] otherwise). */
            kernel_w = s->weight - 1u;
            kernel_ns = s->cpu_delta_ns / s->weight * kernel_w;
            delta = s->cpu_delta_ns;
            split_pc = (uint64_t)(uintptr_t)pipeprof_cpu_not_sampled;
            atomic_fetch_add_explicit(&ag.cpu_not_sampled_ns, kernel_ns, memory_order_relaxed);
        }
        /* (at a call's return, the sample's own interval is kernel time too) */
        atomic_fetch_add_explicit(&ag.cpu_kernel_ns,
                                  split_pc != 0 ? (in_kernel ? s->cpu_delta_ns - kernel_ns : 0)
                                  : in_kernel   ? s->cpu_delta_ns
                                                : kernel_ns,
                                  memory_order_relaxed);
        atomic_store_explicit(&t->last_claim_ns, s->timestamp_ns, memory_order_relaxed);
        atomic_fetch_add_explicit(&ag.n_cpu_weight, s->weight, memory_order_relaxed);
        if (engine == AG_CPU_ENGINE_TIMER) { /* what auto's check reads (timer.c) */
            atomic_fetch_add_explicit(&t->timer_samples, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&t->timer_weight, s->weight, memory_order_relaxed);
        }
        if (delta != 0) {
            atomic_fetch_add_explicit(&ag.cpu_sampled_ns, delta, memory_order_relaxed);
            atomic_fetch_add_explicit(&ag.cpu_sampled_n, 1, memory_order_relaxed);
        }
    }
    s->state = AG_STATE_RUNNING;
    if (kernel_w != 0) {
        /* The kernel time (or what the tick did not see) goes first, ending where this sample's
         * own interval begins; the drain gives kernel time the stack of the thread's latest
         * system call, or this sample's, and [not sampled] the thread's root. */
        struct ag_sample *u;
        uint64_t ts = s->timestamp_ns, own = delta - kernel_ns;

        s->source = split_pc != 0 ? AG_SOURCE_TAIL : AG_SOURCE_KERNEL;
        s->weight = (uint16_t)kernel_w;
        s->cpu_delta_ns = kernel_ns;
        s->timestamp_ns = ts - own;
        s->cpu_time_ns = cpu - own;
        s->depth = 0; /* the drain gives it a stack */
        if (split_pc != 0) {
            /* [not sampled]: the drain puts the marker over the thread's root */
            s->frames[0] = split_pc;
            s->depth = 1;
        } else if (faulted) {
            /* Not to be placed under a call, up to the faults' bound: the drain puts that over
             * the next sample's stack. */
            ag_sig_split_faulted(s, fault_n);
        }
        s->unwinder = AG_UNWINDER_NONE;
        s->end = AG_UNWIND_END_LEAF_ONLY;
        ag_ring_commit(&t->ring);
        u = ag_ring_reserve(&t->ring);
        if (u == NULL) {
            ag_sig_count_lost(t, own); /* (weighed already: no later sample takes it) */
            goto out;
        }
        u->timestamp_ns = ts;
        u->cpu_time_ns = cpu;
        u->tid = ag_tls_tid;
        u->mode = mode;
        u->engine = engine;
        u->weight = 1;
        u->cpu_delta_ns = own;
        u->state = AG_STATE_RUNNING;
        u->source = AG_SOURCE_SIGNAL;
        s = u;
    }
    if (in_kernel) {
        s->frames[0] = (uint64_t)(uintptr_t)pipeprof_cpu_in_kernel; /* the [kernel] leaf */
        skip = 1;
    }
    /* hi first: its release store (threads.c) comes after lo's, so an acquire load of a nonzero
     * hi makes the lo stored with it visible. Loaded the other way round (as before), a weakly
     * ordered processor, or a store landing between the two loads on any, could pair a new hi
     * with the old lo of 0; harmless only because the window starts at sp anyway. */
    hi = atomic_load_explicit(&t->stack_hi, memory_order_acquire);
    lo = atomic_load_explicit(&t->stack_lo, memory_order_relaxed);
    if (hi == 0 && ag_tls_stack_hi != 0) {
        lo = ag_tls_stack_lo;
        hi = ag_tls_stack_hi;
    }
    if (hi == 0) {
        atomic_store_explicit(&t->last_sp, regs.sp, memory_order_relaxed); /* for the manager */
    }
    ag_sig_unwind_ctx_init(&c, regs.sp, lo, hi);
    c.cache = t->cfi_cache; /* this thread's: the handler does not nest */
    c.lr = regs.lr;
    ag_sig_unwind(&c, regs.pc, regs.sp, regs.fp, 0, s->frames + skip, ag.cfg.max_frames - skip,
                  &res);
    s->depth = res.depth + skip;
    s->unwinder = res.unwinder;
    s->end = res.end;
    ag_ring_commit(&t->ring);
    if (engine == AG_CPU_ENGINE_PERF && !site &&
        atomic_load_explicit(&t->ring_probe, memory_order_relaxed)) {
        /* Auto's probation for a ring (timer.c): would this walk have fitted in its copy? */
        if (res.end == AG_UNWIND_END_DEPTH_LIMIT ||
            (res.end == AG_UNWIND_END_ROOT && res.sp_end - regs.sp > AG_PRING_STACK_FITS)) {
            atomic_fetch_add_explicit(&t->ring_probe_deep, 1, memory_order_relaxed);
        } else if (res.end == AG_UNWIND_END_ROOT) {
            atomic_fetch_add_explicit(&t->ring_probe_n, 1, memory_order_relaxed);
        }
    }
    if ((faults_read ||
         (site && atomic_load_explicit(&t->kern_faults, memory_order_relaxed) != 0)) &&
        t->ring.reserved - t->ring.trimmed_at <= t->ring.mask + 1u) {
        /* The ring's first lap: writing the sample may have faulted its page in. That fault is
         * the handler's, not the span's that follows: counted from here. A locator's record too:
         * uncounted, its fault marked the span of the perf sample after it as one that took page
         * faults, whose kernel time then went as not placed over that sample's stack (a fresh
         * thread's first 256 records, most of a loaded 4 s run's; test-agent-sampling's
         * kernel_time_is_shared_among_the_calls_seen_in_its_span: all 10 intervals). The lap
         * counts from the last time the ring's memory went back (ag_stop's ag_ring_discard,
         * before a later session's thread takes the slot's ring as it is). */
        atomic_store_explicit(&t->kern_faults, ag_sig_faults(), memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&ag.n_samples, 1, memory_order_relaxed);
    if (atomic_load_explicit(&ag_sig_unknown_code, memory_order_relaxed) == 1) {
        int seen = 1;

        /* Code outside every known module: wake the manager to look for a new one, once until
         * it has looked (the wake is async-signal-safe; errno is restored below). */
        if (atomic_compare_exchange_strong(&ag_sig_unknown_code, &seen, 2)) {
            ag_sig_wake_manager();
        }
    }
    if (res.cfi_steps != 0) {
        atomic_fetch_add_explicit(&ag.n_cfi_steps, res.cfi_steps, memory_order_relaxed);
    }
    if (mode == AG_MODE_CPU) {
        atomic_fetch_add_explicit(&ag.n_cpu, 1, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&ag.n_wall, 1, memory_order_relaxed);
        /* Release, after the commit: ag_wall_settle() then drains a ring that holds it. */
        atomic_store_explicit(&t->wall_seen_ns, s->timestamp_ns, memory_order_release);
    }
out:
    if (held != 0) {
        ag_sig_count_unsampled(t, held); /* no sample carries them */
    }
    owed = ag_sig_host_sends(signo, 0, &host_info);
    atomic_fetch_sub_explicit(&ag.inflight, 1, memory_order_release);
    errno = saved_errno;
    if (owed) {
        host_signal_chain(signo, &host_info, uctx); /* the host's send the kernel merged */
    }
}
