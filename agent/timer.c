/* SPDX-License-Identifier: MIT */
/*
 * agent/timer.c - the sampling signal's disposition and the per-thread CPU sampling engines
 * (enum ag_cpu_engine). The perf_event engine opens a cpu-clock software event on each thread
 * (user space only, which perf_event_paranoid 2 allows without privilege), owned by that thread
 * (F_SETOWN_EX) and signalling it (F_SETSIG) on each overflow: hrtimer-timed, so the rate is
 * kept above the kernel's HZ. The timer engine uses timer_create on the thread's CPU clock with
 * SIGEV_THREAD_ID; its expiries are seen at the scheduler tick. Either way the handler weighs a
 * sample by the thread CPU time since its previous one (sig-handler.c), and arming a thread
 * records its CPU time as the baseline. The automatic choice (ag_cpu_engine_for_rate) takes the
 * timers up to the kernel's tick rate, where they deliver every interval and cost a third of
 * perf's hrtimer interrupt, and perf_event above it, the rates only perf can keep.
 * Context: ordinary threads under ag.reg_lock (engines) or ag.life_lock (the signal).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/internal.h"
#include "host/host.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

int
ag_signal_install(int signo)
{
    /* A disposition the host has (its handler, SIG_IGN, SIG_DFL) stays the host's: host/ records
     * it, reports it to the host's sigaction, and the handler passes it every instance of the
     * signal the agent did not send (host_signal_chain). The handler stays after a stop (host.h):
     * ag_sig_handler drops the agent's own then, as running is 0. */
    int err = host_signal_claim(signo, ag_sig_handler);

    if (err == 0 && ag.signo != signo) {
        ag.signo = signo; /* interposers read it unlocked, across a stop and a start too */
    }
    return err;
}

void
ag_timer_delete_locked(struct ag_thread *t)
{
    if (t->has_locator) {
        atomic_store_explicit(&t->kern_locating, 0, memory_order_relaxed);
        timer_delete(t->locator);
        t->has_locator = 0;
    }
    if (t->has_timer) {
        timer_delete(t->timer);
        t->has_timer = 0;
        t->timer_hz = 0;
        atomic_store_explicit(&t->lottery, AG_LOTTERY_NONE, memory_order_relaxed);
    }
    atomic_store_explicit(&t->tick_unseen, 0, memory_order_relaxed);
    atomic_store_explicit(&t->ring_probe, 0, memory_order_relaxed);
    ag_pring_close_locked(t); /* its samples read first */
    if (t->has_perf) {
        int fd = atomic_load_explicit(&t->perf_fd, memory_order_relaxed);

        /* Disabled first: closing the event withdraws it only with the last copy of its fd, and
         * a host thread's close_range(CLOSE_RANGE_UNSHARE) keeps one in the fd table it gets
         * (host/fds.c), which went on signalling after the agent's handler was gone (the host
         * died of SIGPROF at exit, 1 run in 10 of host-contract-fds-sysrange-unshare in CPU
         * mode, 5 in 10 under ASan). A signal already queued is recognised by the handler as
         * stale (perf_fd no longer matches) and ignored. */
        (void)ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
        atomic_store_explicit(&t->perf_fd, -1, memory_order_release);
        close(fd);
        atomic_store_explicit(&t->kern_retired, 0, memory_order_relaxed); /* perf's alone */
        t->has_perf = 0;
        t->timer_hz = 0;
    }
}

/*
 * The lottery. A thread's timer used to expire first one full interval I of its CPU after its
 * baseline, so a thread that burned x < I had no sample, and its end claimed a final sample (one
 * interval, under its start routine: no stack known) when x >= I/2 and nothing below: the same
 * cut for every short thread, a systematic loss (a thread-per-request server: 71 % of its CPU in
 * no sample, issue 19). A random first expiry e in (0, I] (a sample with probability x/I, as
 * planned first) is not enough on the timers: an expiry is seen only at a scheduler tick that
 * finds the thread running, every T = 1/HZ, and a thread of 2 ms ends before the tick after e
 * more often than not (pp-sample-shortlot at 100 and 250 Hz, HZ 250: sl_short 9 and 12 % of the
 * profile against 56 and 63 % measured, the rest in final samples over the start routine).
 *
 * So the tick draws. Until its first sample a thread's timer is armed to expire at once and then
 * every T: each tick that finds the thread running sends the signal, and the handler takes it as
 * the thread's first sample, of one interval, with probability T/I (ag_sig_lottery; 1 + its
 * overruns ticks when the signal was held). Ticks find a thread x/T times in x of its CPU, in
 * expectation, so it has x/I samples in expectation, whatever x, each at the stack the tick
 * found: unbiased, and placed. The CPU before the first sample is the lottery's: a claim takes
 * none of it (ag_sig_cpu_weigh), and it is counted in cpu_chance_ns (at the win, or at the
 * thread's end). After the win the manager re-arms the timer at I (until then the handler drops
 * the signals of less than about an interval); from there samples are weighed by CPU time as
 * before, the carry starting uniform in (-I/2, I/2]: the rest of a short winner (under I/2 after
 * its win, mostly) is then rounded up as often as its size says, where a carry of 0 rounded it
 * all down (81 % of pp-sample-shortlot's CPU in its samples, 60 ms of 1.4 s in no sample). The
 * limit is the tick's: fewer ticks land on a short thread that waits for a core than its CPU says
 * (sl_short at 100 Hz: 54 samples for 67.6 intervals), and no draw counts what no tick saw. The
 * cost: a thread takes signals at the tick's rate until its first sample (T/I of them win; 2.5
 * signals on average at 100 Hz, HZ 250), one atomic add each; none when the interval is the tick's
 * (p = 1).
 *
 * The draws are a Weyl sequence, not independent: the n-th draw of the process compares the
 * fraction s + n (golden ratio - 1) modulo 1 with T/I, s random (the clock and the pid). Each
 * draw wins with probability T/I (s is uniform), and the wins of many draws come out within a
 * few of T/I of them, where independent draws scatter by the square root: a thread-per-request
 * server's 500 threads of 0.7 ms at 100 Hz have 35 samples in expectation, +- 5.7 if drawn
 * independently. No lock, no fd, no malloc on the thread start path or in the handler.
 * PIPEPROF_TEST_FIXED_PHASE=1 turns the lottery off (a full first interval, as before).
 */
/* Arms timer to expire first after first ns of its thread's CPU, then every interval ns. */
static int
ag_timer_arm_ns(timer_t timer, uint64_t first, uint64_t interval)
{
    struct itimerspec its;

    its.it_interval.tv_sec = (time_t)(interval / 1000000000u);
    its.it_interval.tv_nsec = (long)(interval % 1000000000u);
    its.it_value.tv_sec = (time_t)(first / 1000000000u);
    its.it_value.tv_nsec = (long)(first % 1000000000u);
    return timer_settime(timer, 0, &its, NULL) == 0 ? 0 : -errno;
}

/* t leaves the lottery: its timer at the interval again, its next expiry an interval after its
 * last sample (cpu: its CPU time now). reg_lock. */
static void
ag_lottery_leave_locked(struct ag_thread *t, uint64_t cpu)
{
    uint64_t period, last = atomic_load_explicit(&t->last_cpu_ns, memory_order_relaxed);

    if (atomic_exchange_explicit(&t->lottery, AG_LOTTERY_NONE, memory_order_relaxed) ==
                AG_LOTTERY_NONE ||
        !t->has_timer || t->timer_hz == 0) {
        return;
    }
    period = 1000000000u / t->timer_hz;
    (void)ag_timer_arm_ns(t->timer, cpu >= last && cpu - last < period ? period - (cpu - last) : 1,
                          period);
}

void
ag_lottery_rearm_locked(void)
{
    unsigned i, high = atomic_load_explicit(&ag.high, memory_order_relaxed);
    struct timespec ts;

    for (i = 0; ag.threads != NULL && i < high; i++) {
        struct ag_thread *t = &ag.threads[i];

        if (atomic_load_explicit(&t->lottery, memory_order_relaxed) == AG_LOTTERY_WON &&
            atomic_load_explicit(&t->state, memory_order_relaxed) == AG_SLOT_ACTIVE &&
            clock_gettime(ag_thread_cpu_clock(atomic_load_explicit(&t->tid, memory_order_relaxed)),
                          &ts) == 0) {
            ag_lottery_leave_locked(t, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
        }
    }
}

void
ag_timers_forked_child(void)
{
    unsigned i, high;

    atomic_store(&ag.lottery_state, 0); /* the child's draws are its own (seeded by its pid) */
    atomic_store(&ag.lottery_mix, 0);
    if (ag.threads == NULL) {
        return;
    }
    high = atomic_load_explicit(&ag.high, memory_order_relaxed);
    for (i = 0; i < high; i++) {
        struct ag_thread *t = &ag.threads[i];

        ag_pring_forked_child(t);
        if (t->has_perf) {
            close(atomic_load_explicit(&t->perf_fd, memory_order_relaxed));
            atomic_store_explicit(&t->perf_fd, -1, memory_order_relaxed);
            t->has_perf = 0;
        }
        t->has_timer = 0; /* POSIX timers are not inherited by a child */
        atomic_store_explicit(&t->lottery, AG_LOTTERY_NONE, memory_order_relaxed);
        t->has_locator = 0;
        atomic_store_explicit(&t->kern_locating, 0, memory_order_relaxed);
    }
}

/* A CPU-time timer on thread tid's clock that signals that thread (the timer engine's, or a
 * kernel locator). 0 or -errno: EINVAL when the thread is gone. */
static int
ag_cpu_timer_create(int32_t tid, timer_t *out)
{
    struct sigevent sev;

    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = ag.signo;
    sev.sigev_notify_thread_id = tid;
    sev.sigev_value.sival_int = AG_TIMER_SIVAL; /* the agent's, told from a host timer's */
    return timer_create(ag_thread_cpu_clock(tid), &sev, out) == 0 ? 0 : -errno;
}

/* Arms timer every 1/hz of CPU time; the first expiry comes after the interval less elapsed
 * (CPU time its thread spent since the baseline before this arming: ag_timer_baseline()). */
static int
ag_timer_arm(timer_t timer, unsigned hz, uint64_t elapsed)
{
    struct itimerspec its;
    long ns = 1000000000L / (long)hz;
    long first = elapsed < (uint64_t)ns ? ns - (long)elapsed : 1;

    its.it_interval.tv_sec = ns / 1000000000L;
    its.it_interval.tv_nsec = ns % 1000000000L;
    its.it_value.tv_sec = first / 1000000000L;
    its.it_value.tv_nsec = first % 1000000000L;
    return timer_settime(timer, 0, &its, NULL) == 0 ? 0 : -errno;
}

clockid_t
ag_thread_cpu_clock(int32_t tid)
{
    return (clockid_t)((~(unsigned)tid << 3) | 6u);
}

/* ag_cpu_origin_set()'s thread (0: none) and its CPU time then: written before the acquire that
 * reads them, under no lock (the caller starts that acquire after it). */
static _Atomic int32_t ag_origin_tid;
static _Atomic uint64_t ag_origin_ns;

void
ag_cpu_origin_set(int32_t tid, uint64_t cpu_ns)
{
    atomic_store(&ag_origin_ns, cpu_ns);
    atomic_store(&ag_origin_tid, tid);
}

void
ag_cpu_origin_clear(void)
{
    atomic_store(&ag_origin_tid, 0);
}

/* Starts a thread's CPU-time baseline: its first sample stands for the CPU time since now, or,
 * in the first arming after a deferred start, since the origin (ag_cpu_origin_set()). Returns
 * the CPU time the thread spent since the baseline (0 but after such a start). */
uint64_t
ag_timer_baseline(struct ag_thread *t, int32_t tid)
{
    uint64_t elapsed = 0;
    struct timespec ts;
    int32_t origin_tid = atomic_load(&ag_origin_tid);

    atomic_store_explicit(&t->cpu_carry_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&t->perf_early, 0, memory_order_relaxed);
    atomic_store_explicit(&t->lottery, AG_LOTTERY_NONE, memory_order_relaxed); /* (timers') */
    t->chance_end_ns = 0;
    if (clock_gettime(ag_thread_cpu_clock(tid), &ts) == 0) {
        uint64_t cpu = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;

        if (origin_tid == tid && atomic_load(&ag_origin_ns) < cpu) {
            elapsed = cpu - atomic_load(&ag_origin_ns); /* the constructor's thread: since then */
        } else if (origin_tid != 0 && origin_tid != tid) {
            elapsed = cpu; /* started after the constructor: its whole CPU time */
        }
        cpu -= elapsed;

        /* 0 means "no baseline": a thread that has not run yet (the scan found it as it was
         * created) reads 0, and 1 ns stands for that. */
        atomic_store_explicit(&t->last_cpu_ns, cpu != 0 ? cpu : 1, memory_order_relaxed);
    }
    return elapsed;
}

uint64_t
ag_cpu_claim_tail_locked(struct ag_thread *t, clockid_t cpu_clock)
{
    struct timespec ts;

    if (clock_gettime(cpu_clock, &ts) != 0) {
        return 0; /* already gone */
    }
    return ag_cpu_claim_tail_at_locked(t, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
}

void
ag_cpu_end_rest(struct ag_thread *t, uint64_t rest)
{
    if (rest != 0) {
        atomic_fetch_add_explicit(&ag.cpu_rest_ns, rest, memory_order_relaxed);
    }
    if (t->chance_end_ns != 0) {
        atomic_fetch_add_explicit(&ag.cpu_chance_ns, t->chance_end_ns, memory_order_relaxed);
        t->chance_end_ns = 0;
    }
}

/*
 * The page faults in the span a final sample of t claims (AG_FAULTS_UNKNOWN: some, not counted),
 * whose bound's part of its kernel time is then not placed, as a perf sample's span that took
 * them (sig-handler.c, perf-ring.c). A thread that
 * faults much and runs little user code has few perf samples (the faulter of test-agent-sampling:
 * one every 10 to 60 intervals), so its final sample carried up to 90 intervals of fault time,
 * and once a call had been seen it all went under that call. perf-ring reads the event's
 * page-fault counter (the count at its last sample read is t->ring_faults); the signal perf
 * engine reads getrusage when the claim runs on the thread itself (its exit hook), a span with
 * no count before it counting as one that took faults, as the handler's. Elsewhere (a flush, a
 * change of rate, a thread gone without its exit hook) the signal engine cannot read the
 * thread's count: 0, placed as before. reg_lock.
 */
static uint64_t
ag_cpu_tail_faults(struct ag_thread *t, int ring)
{
    uint64_t faults, prev;

    if (ring) {
        if (t->ring_faults_fd < 0 ||
            read(t->ring_faults_fd, &faults, sizeof(faults)) != (ssize_t)sizeof(faults)) {
            return 0; /* no counter: placed, as a ring sample's span then is */
        }
        prev = t->ring_faults;
        t->ring_faults = faults;
        return faults > prev ? faults - prev : 0;
    }
    if (atomic_load_explicit(&t->tid, memory_order_relaxed) != ag_gettid()) {
        return 0;
    }
    faults = ag_sig_faults();
    prev = atomic_exchange_explicit(&t->kern_faults, faults, memory_order_relaxed);
    if (faults == 0 || prev == 0) {
        return AG_FAULTS_UNKNOWN; /* no count before the span, or none now: as the handler */
    }
    return faults > prev ? faults - prev : 0;
}

/* Part b, claimed after part a, into a: at b's time, the CPU of both. */
static void
ag_tail_merge(struct ag_tail_part *a, const struct ag_tail_part *b)
{
    a->ts = b->ts;
    a->cpu_time_ns = b->cpu_time_ns;
    a->engine = b->engine;
    a->weight += b->weight;
    a->cpu_ns += b->cpu_ns;
    a->kern_w += b->kern_w;
    a->kern_ns += b->kern_ns;
    a->kern_faults = ag_faults_add(a->kern_faults, b->kern_faults);
}

void
ag_tails_push(struct ag_tails *tl, const struct ag_tail_part *p)
{
    struct ag_tail_part all[AG_TAIL_PARTS + 1];
    uint32_t n = tl->n, i, j, k, best_j = 0, best_k = 0;

    if (n != 0 && tl->part[n - 1].kind == p->kind) {
        ag_tail_merge(&tl->part[n - 1], p);
        return;
    }
    if (p->weight == 0) {
        return; /* (a claim capped at a sample's weight: no sample to draw) */
    }
    if (n < AG_TAIL_PARTS) {
        tl->part[tl->n++] = *p;
        return;
    }
    /* Full: of the parts and p (five, of three kinds: some two of one kind), the closest two of
     * one kind merge, the earliest such pair: the earlier into the later, which keeps its time,
     * so the parts stay in time order. The two that come together where the earlier was are of
     * two kinds: were they of one, they would have been a pair as close or closer, and earlier. */
    memcpy(all, tl->part, sizeof(tl->part));
    all[n++] = *p;
    for (j = 0; j < n; j++) {
        for (k = j + 1; k < n && all[k].kind != all[j].kind; k++) {
        }
        if (k < n && (best_k == 0 || k - j < best_k - best_j)) {
            best_j = j;
            best_k = k;
        }
    }
    ag_tail_merge(&all[best_j], &all[best_k]);
    all[best_k] = all[best_j];
    tl->n = 0;
    for (i = 0; i < n; i++) {
        if (i != best_j) {
            tl->part[tl->n++] = all[i];
        }
    }
}

/* ag_cpu_claim_tail_at_locked() as a part of kind (AG_TAIL_UNSEEN when t ran with the signal
 * blocked). */
static uint64_t
ag_cpu_claim_kind_locked(struct ag_thread *t, uint64_t cpu, enum ag_tail_kind kind)
{
    uint64_t last, period, delta, weight, since, kern_ns = 0, kern_faults = 0;
    uint32_t kern_w = 0, base = 0;
    int ring = atomic_load_explicit(&t->has_ring, memory_order_relaxed);
    struct ag_tail_part part;

    if (ring) {
        ag_pring_read_locked(t); /* the samples before the claim are weighed first */
    }
    if ((!t->has_timer && !t->has_perf && !ring) || t->timer_hz == 0 ||
        atomic_load_explicit(&t->excluded, memory_order_relaxed)) {
        return 0; /* not sampled in CPU mode */
    }
    period = 1000000000u / t->timer_hz;
    last = atomic_load_explicit(&t->last_cpu_ns, memory_order_relaxed);
    if (last == 0 || cpu <= last) {
        return 0;
    }
    if (atomic_load_explicit(&t->lottery, memory_order_relaxed) == AG_LOTTERY_DRAW) {
        if (ring || atomic_load_explicit(&t->sigblk_ns, memory_order_relaxed) == 0) {
            /* No sample yet: the lottery's (above), counted if the thread ends so. */
            t->chance_end_ns = cpu - last;
            return 0;
        }
        /* The signal blocked (an interposer saw it): no tick can draw for it now, so it
         * leaves the lottery and its span is claimed as before. */
        ag_lottery_leave_locked(t, cpu);
    }
    if (atomic_load_explicit(&t->cpu_carry_ns, memory_order_relaxed) + (int64_t)(cpu - last) <=
        (int64_t)(period / 2)) {
        return cpu - last; /* under half an interval: a live thread's next sample takes it */
    }
    weight = ag_sig_cpu_weigh(t, cpu, period, AG_WEIGH_CLAIM, &delta);
    if (weight == 0) {
        return delta; /* a sample came in between: the carry keeps the rest */
    }
    /* (perf-ring sends no signal: a thread blocking it misses nothing) */
    since = ring ? 0 : atomic_load_explicit(&t->sigblk_ns, memory_order_relaxed);
    if (since != 0 && ag_now_ns() >= since + period / 2) {
        /* It ends with the signal blocked: no sample saw that span (host-hooks.c). */
        kind = AG_TAIL_UNSEEN;
        atomic_fetch_add_explicit(&ag.cpu_unseen_ns, delta, memory_order_relaxed);
    } else if (kind == AG_TAIL_NOT_SAMPLED) {
        atomic_fetch_add_explicit(&ag.cpu_not_sampled_ns, delta, memory_order_relaxed);
    }
    if (t->tail.n != 0 && t->tail.part[t->tail.n - 1].kind == kind) {
        base = t->tail.part[t->tail.n - 1].weight; /* it adds up with that part (ag_tails_push) */
    }
    if (base + weight > UINT16_MAX) {
        weight = UINT16_MAX - base;
    }
    if (weight > 1 && (t->has_perf || ring) && !t->has_timer && since == 0) {
        /* A span perf sampled without a sample: each interval it passed was an overflow skipped
         * in the kernel, as in a perf sample that stands for several (sig-handler.c). All but
         * the last, unsampled, interval is kernel time, which the drain places as it places a
         * sample's split. Left whole under the thread's last stack (the I/O-like thread's last
         * perf sample: its parser, perf's user-mode samples being there), it moved 0.6 points
         * of a loaded pool's profile from the write calls to the parser (docs/performance.md). */
        kern_ns = delta / weight * (weight - 1u);
        kern_w = (uint32_t)weight - 1u;
        kern_faults = ag_cpu_tail_faults(t, ring);
        atomic_fetch_add_explicit(&t->kern_w, kern_w, memory_order_relaxed);
        atomic_fetch_add_explicit(&ag.cpu_kernel_ns, kern_ns, memory_order_relaxed);
    }
    part.ts = ag_now_ns();
    part.cpu_time_ns = cpu;
    part.cpu_ns = delta;
    part.kern_ns = kern_ns;
    part.kern_faults = kern_faults;
    part.weight = (uint32_t)weight;
    part.kern_w = kern_w;
    part.engine = ring          ? AG_CPU_ENGINE_PERF_RING
                  : t->has_perf ? AG_CPU_ENGINE_PERF
                                : AG_CPU_ENGINE_TIMER;
    part.kind = (uint8_t)kind;
    if (kind == AG_TAIL_OWN && weight > 1 && part.engine == AG_CPU_ENGINE_TIMER &&
        atomic_load_explicit(&t->tick_unseen, memory_order_relaxed) &&
        ag_timer_late(atomic_load_explicit(&t->timer_samples, memory_order_relaxed) + 1u -
                              atomic_load_explicit(&t->scan_samples, memory_order_relaxed),
                      atomic_load_explicit(&t->timer_weight, memory_order_relaxed) +
                              (uint32_t)weight -
                              atomic_load_explicit(&t->scan_weight, memory_order_relaxed))) {
        /* Auto's timers, and the thread's samples since the last scan, this claim counted as
         * one, look late: the handler's test of a tick sample (sig-handler.c), and its rule.
         * The tick missed the thread's runs since its last sample, and that stack saw only
         * where the span began: all but one interval of it is [not sampled], a part of its own
         * after the one that keeps the last stack (the interval next to where it was taken).
         * Given whole to that stack, a thread that exits (or a flush) before the scan moves
         * it to perf gave the CPU the tick missed to the code it ran before (tickgap, exitgap,
         * test-agent-sampling's an_exit_after_the_tick_missed_its_runs_...). */
        struct ag_tail_part miss = part;

        miss.weight = (uint32_t)weight - 1u;
        miss.cpu_ns = delta / weight * miss.weight;
        miss.kind = AG_TAIL_NOT_SAMPLED;
        part.weight = 1;
        part.cpu_ns = delta - miss.cpu_ns;
        part.ts -= miss.cpu_ns; /* (wall time since the last sample is at least its CPU) */
        part.cpu_time_ns -= miss.cpu_ns;
        ag_tails_push(&t->tail, &part);
        part = miss;
        atomic_fetch_add_explicit(&ag.cpu_not_sampled_ns, miss.cpu_ns, memory_order_relaxed);
    }
    ag_tails_push(&t->tail, &part);
    atomic_fetch_add_explicit(&ag.n_cpu_weight, weight, memory_order_relaxed);
    atomic_fetch_add_explicit(&ag.cpu_sampled_ns, delta, memory_order_relaxed);
    atomic_fetch_add_explicit(&ag.n_cpu_tails, 1, memory_order_relaxed);
    return 0;
}

uint64_t
ag_cpu_claim_tail_at_locked(struct ag_thread *t, uint64_t cpu)
{
    return ag_cpu_claim_kind_locked(t, cpu, AG_TAIL_OWN);
}

void
ag_cpu_flush(void)
{
    unsigned i, high;

    if (!atomic_load(&ag.running)) {
        return;
    }
    pthread_mutex_lock(&ag.reg_lock);
    high = atomic_load_explicit(&ag.high, memory_order_relaxed);
    for (i = 0; ag.threads != NULL && i < high; i++) {
        struct ag_thread *t = &ag.threads[i];

        if (atomic_load_explicit(&t->state, memory_order_relaxed) == AG_SLOT_ACTIVE) {
            t->kern_flush = 1; /* kernel time still waiting for a stack ends now too */
            ag_cpu_claim_tail_locked(
                    t, ag_thread_cpu_clock(atomic_load_explicit(&t->tid, memory_order_relaxed)));
        }
    }
    pthread_mutex_unlock(&ag.reg_lock);
}

unsigned
ag_kernel_tick_hz(void)
{
    struct timespec res;

    if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0 || res.tv_sec != 0 || res.tv_nsec <= 0) {
        return 0;
    }
    return (unsigned)((1000000000L + res.tv_nsec / 2) / res.tv_nsec);
}

/*
 * Why auto is not perf at every rate: a cpu-clock overflow is a high-resolution timer interrupt
 * of its own, on top of the scheduler tick that interrupts a running thread anyway, and under
 * virtualisation that interrupt is dear (bench-engine: 24.7 us per sample on a 2-vCPU KVM guest
 * against about 6 us for the timer engine; docs/performance.md). A thread CPU-time timer's
 * expiry is noticed at that tick, so up to the tick's rate it fires every interval, and the
 * weights (CPU time since the previous sample) and final samples make its totals exact
 * (tests/agent-groundtruth.sh holds both engines to 1 point). Above the tick's rate the timers
 * would take one sample per tick and weigh it several intervals; perf keeps the rate asked for.
 * There auto takes perf-ring, perf's samples without a signal (perf-ring.c: no irq_work, no
 * delivery, no handler on the sampled thread; about half the signal's price per sample, ringauto
 * in docs/performance.md), and perf's signal for a thread whose ring cannot be mapped (locked
 * memory) or whose stack outgrows the ring's copy (ag_pring_deep_check_locked). The timers stay
 * below: a tick-bound sample costs less than either (no interrupt of its own).
 */
enum ag_cpu_engine
ag_cpu_engine_for_rate(enum ag_cpu_engine configured, unsigned hz, unsigned tick_hz)
{
    if (configured != AG_CPU_ENGINE_AUTO) {
        return configured;
    }
    return tick_hz != 0 && hz <= tick_hz ? AG_CPU_ENGINE_TIMER : AG_CPU_ENGINE_PERF_RING;
}

/* Errors of perf_event_open that say the kernel or policy refuses it for every thread. */
static int
ag_perf_refused_for_good(int err)
{
    return err == EACCES || err == EPERM || err == ENOSYS || err == ENOENT || err == EOPNOTSUPP ||
           err == EINVAL || err == E2BIG;
}

int
ag_perf_event_open(struct perf_event_attr *attr, int32_t tid, int group_fd, int *fd_out)
{
    struct rlimit rl;
    int fd, err;

    if (host_filter_refuses(SYS_perf_event_open)) {
        return -EACCES; /* under an inherited seccomp filter (host/host.c): as refused */
    }
    host_fds_hold(); /* high before a host's close can take its number (host/fds.c) */
    fd = (int)syscall(SYS_perf_event_open, attr, (pid_t)tid, -1, group_fd, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        err = -errno;
        host_fds_release();
        return err;
    }
    fd = host_fd_take(fd);
    host_fds_release();
    /* Placed in the host's range (host/fds.c, host_fds_base: soft == hard, or no number free
     * above the soft limit) and within 64 of its top: given back. At or above the soft limit it
     * takes no number of the host's. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)fd < rl.rlim_cur && (rlim_t)fd + 64 > rl.rlim_cur) {
        close(fd);
        return -EMFILE;
    }
    *fd_out = fd;
    return 0;
}

void
ag_perf_attr_init(struct perf_event_attr *attr, unsigned hz)
{
    memset(attr, 0, sizeof(*attr));
    attr->size = sizeof(*attr);
    attr->type = PERF_TYPE_SOFTWARE;
    attr->config = PERF_COUNT_SW_CPU_CLOCK;
    attr->sample_period = 1000000000u / hz;
    attr->exclude_kernel = 1; /* what paranoid 2 allows; kernel time comes back as weight */
    attr->exclude_hv = 1;
    attr->disabled = 1;
}

/*
 * Opens and arms the cpu-clock perf event of thread tid. Returns 0 with *fd_out, or -errno. An
 * fd in the host's range close to RLIMIT_NOFILE is given back (-EMFILE): the host's descriptors
 * come first (one at or above the soft limit, where host/fds.c places them when the hard limit
 * allows, is kept).
 */
static int
ag_perf_open(int32_t tid, unsigned hz, int *fd_out)
{
    struct perf_event_attr attr;
    struct f_owner_ex owner;
    int fd, err;

    ag_perf_attr_init(&attr, hz);
    attr.wakeup_events = 1;
    err = ag_perf_event_open(&attr, tid, -1, &fd);
    if (err != 0) {
        return err;
    }
    owner.type = F_OWNER_TID;
    owner.pid = tid;
    if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, ag.signo) != 0 ||
        fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
        err = -errno;
        goto fail;
    }
    *fd_out = fd;
    return 0;
fail:
    close(fd);
    return err;
}

/* Arms thread t with the perf engine, its CPU-time baseline restarted unless keep_baseline (a
 * thread moved from the timers: the claim of what they missed has just set it). 0, or -errno and
 * t unchanged. */
static int
ag_perf_sync_locked(struct ag_thread *t, int32_t tid, unsigned hz, int keep_baseline)
{
    uint64_t period = 1000000000u / hz;
    int fd, err;

    if (t->has_perf) {
        fd = atomic_load_explicit(&t->perf_fd, memory_order_relaxed);
        if (ioctl(fd, PERF_EVENT_IOC_PERIOD, &period) != 0) {
            return -errno;
        }
        t->timer_hz = hz;
        return 0;
    }
    err = ag_perf_open(tid, hz, &fd);
    if (err != 0) {
        return err;
    }
    atomic_store_explicit(&t->lottery, AG_LOTTERY_NONE, memory_order_relaxed); /* perf's */
    if (!keep_baseline) {
        (void)ag_timer_baseline(t, tid); /* perf's first overflow: a full period from now */
    }
    atomic_store_explicit(&t->perf_fd, fd, memory_order_release);
    t->has_perf = 1;
    t->timer_hz = hz;
    return 0;
}

/* A refusal of perf_event_open that will not pass turns perf off for the rest of the run. */
static void
ag_perf_note_refusal(int err)
{
    if (ag_perf_refused_for_good(-err) && !ag.perf_unavailable) {
        ag.perf_unavailable = 1;
        ag_log(AG_LOG_INFO, "cpu engine: perf_event_open refused (%s): CPU-time timers",
               strerror(-err));
    }
}

/*
 * The timers' weak spot: an expiry is noticed only at a tick that finds the thread running, so a
 * thread whose short bursts fall between ticks (a periodic thread in step with the tick) gets its
 * samples late or never. Its CPU still comes back as weight, but on the stack of whatever sample
 * comes, or of its final sample (its start routine when it had none): one run in 28 of the
 * ground-truth test gave the 0.6-in-6 ms thread's 4.9 % to its start routine. Each scan therefore
 * looks at the thread's timer samples since the previous scan: when they stand for half again as
 * many intervals as there were samples (the tick is missing its runs), or when there were none
 * though it burned two intervals, auto moves the thread to perf, whose hrtimer follows its own
 * CPU time. That costs little: a perf thread pays per interval of its own CPU, and these threads
 * burn little; steady threads, the expensive ones, stay on the tick. The CPU the timers missed
 * since their last sample is claimed as the move is made, as [not sampled].
 */
/*
 * Kernel time on perf_event. An unprivileged event excludes the kernel (perf_event_paranoid 2):
 * its hrtimer still fires every interval of the thread's CPU time, but an overflow that falls in
 * the kernel (a system call, a page fault) is skipped, so the next user-mode sample, up to an
 * interval later and in whatever code runs then, would carry that time as weight (a thread
 * alternating write(2) calls and arithmetic, 50/50, read 17/83). The count is still right: a
 * perf sample that stands for k intervals saw k - 1 overflows skipped in the kernel. So the
 * handler keeps one interval for the sample's own stack and splits the rest off as kernel time
 * (AG_SOURCE_KERNEL), and the question left is where. A CPU-time timer answers it: its expiry is
 * seen at the tick and its signal is sent as the thread goes back to user space, from the system
 * call it was in when the tick found it in the kernel, so that signal's stack is the call's
 * (ag_sig_in_syscall). A thread whose perf samples split off kernel time gets such a timer as its
 * kernel locator, at the rate up to the tick's: its signals that come from a system call record
 * the call's stack, the others are dropped at once; the drain shares each split among the
 * calls seen since the thread's previous CPU sample, by how often each was seen; with none, it
 * takes the latest call seen within 200 ms of the thread's CPU, else the first one seen within
 * 200 ms after (drain.c). The locator is armed at the thread's first split: its handler wakes the
 * manager (ag_locators_arm_asked_locked), and a scan arms one for a thread that split off two
 * intervals since the previous scan and still has none. Armed by the scan alone, a starved
 * thread's first call was seen 30 to 60 ms of its CPU after its first kernel time (100 to 800 ms
 * of wall time at a load of 12 on 2 cores), 10 to 15 % of the CPU such a thread got in a 4 s run,
 * and that kernel time went over its compute function. A thread moved from the timers keeps its
 * timer as the locator. The locator's tick misses a bursty thread's calls as it misses its runs;
 * a perf sample taken at a call's return (an overflow due in the call's exit path) is a call seen
 * too (sig-handler.c, drain.c). The amount is perf's (exact), the place the tick's (a sample of
 * where kernel time goes); kernel time with no call seen near it (preemption, page faults, a thread
 * that makes no calls) goes as [kernel, not placed] over the stack of the sample it was split
 * from, or of the sample that ended its wait, counted. On the timer engine a sample taken as a
 * call returns is the call's already, and gets the [kernel] leaf.
 */
/*
 * A locator goes when its thread stops needing it: AG_LOCATOR_IDLE_SCANS scans (1 s at the
 * default 100 ms, on a thread that runs) in which it saw no system call and the thread's kernel
 * time was not what would arm a retired thread's locator again (ag_locator_wanted), and in which
 * the thread ran long enough for its locator to fire many times (AG_LOCATOR_IDLE_PERIODS); a scan
 * in which the thread had no sample (a loaded machine kept it off its core) counts neither way.
 * Each locator signal is a full delivery to the thread, and a thread that makes no calls gets a
 * locator too at its first split (an overflow skipped in an interrupt's softirq or in a signal's
 * delivery), then paid about one more signal per perf sample for the rest of its life to place
 * nothing (docs/performance.md, issue 22). Once retired, its splits no longer ask for a locator
 * from the handler; the scan arms one again. One that keeps calling or spending a quarter of its
 * CPU in the kernel keeps its locator: an earlier drop after 24 signals without a call, whatever
 * the splits, took them from the system-call ground truth's threads under load (8170b44).
 */
#define AG_LOCATOR_IDLE_SCANS 10u

/*
 * And the thread ran at least this many of the locator's periods of CPU in those scans: a locator
 * is timed by the thread's CPU, so a thread that waited for a core through the scans gave it no
 * chance to see a call. Counted in scans alone, a thread that calls getppid() back to back lost
 * its locator at a load of about 20 on 2 cores (scans 20 ms apart, 10 of them with no call seen:
 * test-agent-sampling's an_idle_kernel_locator_goes_and_a_calling_thread_keeps_its, in a CI run).
 */
#define AG_LOCATOR_IDLE_PERIODS 20u

/* t's locator (t->locator, armed) starts: idle is counted from here. */
static void
ag_locator_start_locked(struct ag_thread *t)
{
    t->scan_kern_sites = atomic_load_explicit(&t->kern_sites, memory_order_relaxed);
    t->locator_idle = 0;
    t->locator_idle_cpu = 0;
    t->has_locator = 1;
    atomic_store_explicit(&t->kern_retired, 0, memory_order_relaxed);
    atomic_store_explicit(&t->kern_locating, 1, memory_order_relaxed);
}

/* Retires t's locator. A signal of it still queued finds kern_locating clear and the thread on
 * perf, and is dropped (sig-handler.c). Its page faults are read afresh at its next perf sample,
 * and after that only at its splits: the handler reads them at every sample of a thread that
 * spends kernel time, which a retired one no longer does. */
static void
ag_locator_retire_locked(struct ag_thread *t, int32_t tid)
{
    atomic_store_explicit(&t->kern_retired, 1, memory_order_relaxed);
    atomic_store_explicit(&t->kern_locating, 0, memory_order_relaxed);
    timer_delete(t->locator);
    t->has_locator = 0;
    atomic_store_explicit(&t->kern_faults, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&ag.n_locators_retired, 1, memory_order_relaxed);
    ag_log(AG_LOG_DEBUG, "cpu engine: thread %d's kernel locator goes (idle)", (int)tid);
}

/* The slots of a perf-ring thread's own ring that its locator's arming faults in (above). */
#define AG_LOCATOR_POPULATE 64u

/* The rate of t's kernel locator: the thread's, up to the tick's. */
static unsigned
ag_locator_hz(const struct ag_thread *t)
{
    return ag.tick_hz != 0 && t->timer_hz > ag.tick_hz ? ag.tick_hz : t->timer_hz;
}

static uint64_t
ag_locator_period_ns(const struct ag_thread *t)
{
    return 1000000000u / ag_locator_hz(t);
}

/* Arms t's kernel locator: a CPU-time timer on the thread at its rate, up to the tick's. */
static void
ag_locator_arm_locked(struct ag_thread *t, int32_t tid)
{
    unsigned hz = ag_locator_hz(t);

    if (ag_cpu_timer_create(tid, &t->locator) != 0) {
        return; /* gone, or out of signal queue entries: its kernel time stays unplaced */
    }
    if (ag_timer_arm(t->locator, hz, 0) != 0) {
        timer_delete(t->locator);
        return;
    }
    if (atomic_load_explicit(&t->has_ring, memory_order_relaxed)) {
        /* Its records are the only writes to the thread's own ring under perf-ring, and a slot
         * written on the ring's first lap takes a page fault, which the event's fault counter
         * counts in the perf span around it: that span's kernel time was then not placed (all
         * 10 intervals of test-agent-sampling's perf_ring_kernel_time_is_shared_among_the_calls_
         * seen_in_its_span in 4 runs of 4). The signal perf engine reads its faults afresh after
         * such a write (sig-handler.c); here the manager faults in the slots a locator's backlog
         * uses (about 25 records per 100 ms at the tick's rate, drained every 100 ms or so). */
        ag_ring_populate(&t->ring, AG_LOCATOR_POPULATE);
    }
    ag_locator_start_locked(t);
    ag_log(AG_LOG_DEBUG, "cpu engine: thread %d gets a kernel locator", (int)tid);
}

/*
 * Whether the scan arms a locator for a perf thread that has none. Two intervals split off in a
 * scan do, as before, unless the thread's locator went idle already: then they must be a quarter
 * of the CPU it ran in the scan, or come with a call seen (a perf sample at a call's return). A
 * thread that makes no calls splits off a few per cent of its CPU as kernel time on a loaded
 * machine (2.4 % system time for a pp-sample-workload worker under the perf engine at 250 Hz
 * against 0.4 % under the timers: its own signals' delivery, interrupts' softirqs), enough for
 * two intervals in some scan every second or so, and the locator armed for it is a signal at each
 * tick that adds kernel time of its own. A thread whose calls come back shows either: long calls
 * take a large share, short ones are seen at their return.
 */
int
ag_locator_wanted(int retired, uint32_t kern_intervals, uint32_t calls_seen, uint64_t cpu_ns,
                  uint64_t period_ns)
{
    if (kern_intervals < 2) {
        return 0;
    }
    return !retired || calls_seen != 0 || 4u * (uint64_t)kern_intervals * period_ns >= cpu_ns;
}

/*
 * A perf-ring thread gets a locator when a ring sample shows it at a call's return (a call seen:
 * perf-ring.c, and the scan below), so that a thread that makes no calls pays no signal. That
 * alone left threads whose calls are in the kernel most of their time without one: an overflow is
 * taken at a call's return only when it came due in the call's exit path, and a bursty thread on
 * a loaded machine gets few samples (pp-sample-syscalls' I/O-like thread, 0.6 ms of write(2)
 * calls and 0.4 ms of parsing every 4 ms, about 30 samples in a 4 s recording at 250 Hz beside
 * two busy loops, load 18-22): in 9 recordings of 16 it got no locator, and in 7 of those its
 * kernel time went as not placed over its parser's stack (sc_io_write 1.7 to 8.1 % of the profile
 * for 9.5 to 12.2 % measured; within 2.9 points in the 7 with one). So the scan also keeps a
 * window of the thread's split-off
 * kernel time and CPU: one that holds AG_RING_LOCATOR_W intervals of kernel time in five times
 * that CPU or less (a fifth or more of it) arms a locator. A thread that makes no calls splits off
 * a few per cent (its interrupts', its switches'), and its window of 8 intervals spans some 100 or
 * more: judged so over many scans, not one (a starved worker's single scan showed a quarter of
 * its little CPU). A quarter missed one recording of 16 (9 intervals in 37, the I/O-like
 * thread's window, read 24 %).
 */
#define AG_RING_LOCATOR_W 8u

int
ag_ring_locator_wanted(uint32_t *w, uint64_t *cpu, uint32_t dk, uint64_t dcpu, uint64_t period_ns)
{
    int want;

    *w += dk;
    *cpu += dcpu;
    if (*w < AG_RING_LOCATOR_W) {
        return 0;
    }
    want = 5u * (uint64_t)*w * period_ns >= *cpu;
    *w = 0;
    *cpu = 0;
    return want;
}

/* The scan's look: a perf thread that split off kernel time since the previous scan and has no
 * locator (its first split's request failed, or came before the manager ran, or its locator
 * retired) gets one as ag_locator_wanted says; one idle for AG_LOCATOR_IDLE_SCANS scans goes. */
static void
ag_locator_check_locked(struct ag_thread *t, int32_t tid)
{
    uint32_t kw = atomic_load_explicit(&t->kern_w, memory_order_relaxed);
    uint32_t sites = atomic_load_explicit(&t->kern_sites, memory_order_relaxed);
    uint32_t dk = kw - t->scan_kern_w, ds = sites - t->scan_kern_sites;
    uint64_t cpu = atomic_load_explicit(&t->last_cpu_ns, memory_order_relaxed);
    uint64_t dcpu = cpu - t->scan_last_cpu;
    int ring = atomic_load_explicit(&t->has_ring, memory_order_relaxed);
    int perf = t->has_perf || ring; /* samples by perf: its kernel time is split off */

    t->scan_kern_w = kw;
    t->scan_kern_sites = sites;
    t->scan_last_cpu = cpu;
    if (t->has_locator && perf && t->timer_hz != 0) {
        if (ag_locator_wanted(1, dk, ds, dcpu, 1000000000u / t->timer_hz) || ds != 0) {
            t->locator_idle = 0;
            t->locator_idle_cpu = 0;
        } else if (dcpu != 0) { /* a scan it had no sample in shows nothing: it did not run */
            t->locator_idle++;
            t->locator_idle_cpu += dcpu;
        }
        if (t->locator_idle >= AG_LOCATOR_IDLE_SCANS &&
            t->locator_idle_cpu >= AG_LOCATOR_IDLE_PERIODS * ag_locator_period_ns(t)) {
            ag_locator_retire_locked(t, tid);
        }
        return;
    }
    /* A perf-ring thread needs a call seen (a ring sample at a call's return), as its reader
     * asks (perf-ring.c), or a window of 8 intervals of kernel time, a fifth of its CPU or more
     * (ag_ring_locator_wanted, above): a thread that makes no calls gets no locator, also when a
     * scan finds it starved with a quarter of its little CPU split off (a pp-sample-workload
     * worker at a load of 16 to 20 got one so, 18 signals before it retired). */
    if (!perf || t->has_locator || t->timer_hz == 0) {
        return;
    }
    if (ring ? !(dk >= 2 && ds != 0) && !ag_ring_locator_wanted(&t->ring_loc_w, &t->ring_loc_cpu,
                                                                dk, dcpu, 1000000000u / t->timer_hz)
             : !ag_locator_wanted(atomic_load_explicit(&t->kern_retired, memory_order_relaxed), dk,
                                  ds, dcpu, 1000000000u / t->timer_hz)) {
        return;
    }
    t->ring_loc_w = 0;
    t->ring_loc_cpu = 0;
    ag_locator_arm_locked(t, tid);
}

void
ag_locators_arm_asked_locked(void)
{
    unsigned i, high = atomic_load_explicit(&ag.high, memory_order_relaxed);

    for (i = 0; ag.threads != NULL && i < high; i++) {
        struct ag_thread *t = &ag.threads[i];

        if (atomic_load_explicit(&t->state, memory_order_relaxed) == AG_SLOT_ACTIVE &&
            atomic_load_explicit(&t->kern_asked, memory_order_relaxed) &&
            (t->has_perf || atomic_load_explicit(&t->has_ring, memory_order_relaxed)) &&
            !t->has_locator && t->timer_hz != 0 &&
            !atomic_load_explicit(&t->excluded, memory_order_relaxed)) {
            ag_locator_arm_locked(t, atomic_load_explicit(&t->tid, memory_order_relaxed));
        }
    }
}

_Atomic unsigned ag_test_move_pause_us;

/*
 * Auto's move claims what the timers missed since their last sample as [not sampled] over the
 * thread's start routine: no sample saw that CPU (the last timer sample saw where the thread was
 * before it), so it is shown and counted, given to no code. It used to be carried, unsplit, into
 * the thread's first perf sample, whose stack perf puts in user code: at a load of 21 to 25
 * (pools of 8, debug-logged drains) 13 to 16 intervals went so to pp-sample-syscalls' parser
 * (0.6 points of the profile), 5 to 7 to the write loop's user code, of CPU that was 60 %
 * write(2) calls. Then it went to the last timer sample's stack, a tick's sample, which the tick's
 * bias places unevenly over a thread that waits for a core (docs/architecture.md, "The tick's
 * bias"): 43 intervals of a pool of 8 beside two busy loops (load 11-12), 11 of them on user
 * stacks. The handler does the same with what a timer sample stands for beyond its own interval
 * (tick_unseen): a thread auto moves has such samples before its move (106 intervals of that pool).
 */
static void
ag_cpu_claim_move_locked(struct ag_thread *t, int32_t tid)
{
    struct timespec ts;

    /* A part of its own (ag_tails_push): a final sample claimed after it while it waits for the
     * thread's root keeps its stack, and its time. */
    if (clock_gettime(ag_thread_cpu_clock(tid), &ts) == 0) {
        (void)ag_cpu_claim_kind_locked(t, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                                       AG_TAIL_NOT_SAMPLED);
    }
}

static void ag_pring_deep_check_locked(struct ag_thread *t, int32_t tid);
static void ag_pring_probe_check_locked(struct ag_thread *t, int32_t tid);

void
ag_cpu_engine_check_locked(struct ag_thread *t)
{
    uint32_t n = atomic_load_explicit(&t->timer_samples, memory_order_relaxed);
    uint32_t w = atomic_load_explicit(&t->timer_weight, memory_order_relaxed);
    uint32_t dn = n - atomic_load_explicit(&t->scan_samples, memory_order_relaxed);
    uint32_t dw = w - atomic_load_explicit(&t->scan_weight, memory_order_relaxed);
    int32_t tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
    uint64_t period, last;
    struct timespec ts;
    int late, err;

    atomic_store_explicit(&t->scan_samples, n, memory_order_relaxed);
    atomic_store_explicit(&t->scan_weight, w, memory_order_relaxed);
    ag_pring_probe_check_locked(t, tid);
    ag_pring_deep_check_locked(t, tid);
    ag_locator_check_locked(t, tid);
    if (ag.perf_unavailable) {
        /* The timers are all there is now (as with PIPEPROF_CPU_ENGINE=timer): their samples
         * keep their weights. */
        atomic_store_explicit(&t->tick_unseen, 0, memory_order_relaxed);
    }
    if (!t->has_timer || t->timer_hz == 0 || ag.cfg.cpu_engine != AG_CPU_ENGINE_AUTO ||
        ag.perf_unavailable || atomic_load_explicit(&t->excluded, memory_order_relaxed) ||
        atomic_load_explicit(&t->sigblk_ns, memory_order_relaxed) != 0) {
        return; /* (a thread that blocks the signal misses its samples on perf as well) */
    }
    period = 1000000000u / t->timer_hz;
    if (atomic_load_explicit(&t->lottery, memory_order_relaxed) != AG_LOTTERY_NONE) {
        /* Drawing: no sample is no sign of a tick that misses it, but for a thread that ran 2
         * intervals and never won (7.8 % of steady threads at 100 Hz, HZ 250: 5 draws of 0.4),
         * or that the tick does not see: what it ran goes to the lottery (its draws stood for
         * it), and it is weighed afresh from here, moved to perf if the tick misses it. */
        last = atomic_load_explicit(&t->last_cpu_ns, memory_order_relaxed);
        if (atomic_load_explicit(&t->lottery, memory_order_relaxed) == AG_LOTTERY_DRAW &&
            last != 0 && clock_gettime(ag_thread_cpu_clock(tid), &ts) == 0 &&
            (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec >= last + 2 * period) {
            uint64_t cpu = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;

            atomic_fetch_add_explicit(&ag.cpu_chance_ns, cpu - last, memory_order_relaxed);
            atomic_store_explicit(&t->cpu_carry_ns, 0, memory_order_relaxed);
            atomic_store_explicit(&t->last_cpu_ns, cpu, memory_order_relaxed);
            ag_lottery_leave_locked(t, cpu);
        }
        return;
    }
    if (dn != 0) {
        late = ag_timer_late(dn, dw);
    } else {
        last = atomic_load_explicit(&t->last_cpu_ns, memory_order_relaxed);
        late = last != 0 && clock_gettime(ag_thread_cpu_clock(tid), &ts) == 0 &&
               (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec >= last + 2 * period;
    }
    if (!late) {
        return;
    }
    /* What the timers missed since their last sample is claimed now, as a final sample's span
     * is, as [not sampled] (above); the perf samples after it stand for their own span, their
     * kernel time split off. Carried into the first perf sample instead (unsplit), it all went to
     * that sample's stack, which perf puts in user code only: the I/O-like thread's parser and
     * the write/compute thread's sc_compute got a starved thread's 2 to 21 intervals
     * (docs/architecture.md). */
    ag_cpu_claim_move_locked(t, tid);
    if (atomic_load_explicit(&ag_test_move_pause_us, memory_order_relaxed) != 0) {
        usleep(atomic_load_explicit(&ag_test_move_pause_us, memory_order_relaxed));
    }
    err = ag_perf_sync_locked(t, tid, t->timer_hz, 1);
    if (err != 0) {
        ag_perf_note_refusal(err); /* it stays on the timers; a passing error is tried again */
        return;
    }
    /* And what it ran while the event was being opened (this thread may be preempted there on a
     * loaded machine): perf counts only from its opening, so its first sample would stand for
     * that span too and split it off as kernel time, over the next sample's stack
     * (test-agent-sampling's move test lost 2.2 of busy_a's 16.2 intervals to busy_b so in a
     * fresh-clone CI run; with a 30 ms sleep here, 3 of 18.5 in each of 5 runs). */
    ag_cpu_claim_move_locked(t, tid);
    /* Its timer stays as the kernel locator (above): a bursty thread's system calls. */
    t->locator = t->timer;
    ag_locator_start_locked(t);
    t->has_timer = 0;
    t->perf_promoted = 1;
    atomic_fetch_add_explicit(&ag.n_perf_promoted, 1, memory_order_relaxed);
    ag_log(AG_LOG_DEBUG, "cpu engine: thread %d to perf_event (the tick missed its runs)",
           (int)tid);
}

/*
 * Thread t on a perf ring at hz (agent/perf-ring.c), or, when its ring cannot be mapped (locked
 * memory), on perf's signal, logged once and counted: PIPEPROF_CPU_ENGINE=perf-ring, and auto
 * above the tick. A new rate opens a new ring (its size follows the rate). 0, or -errno
 * (perf_event_open refused, or -ESRCH: the thread exited under us).
 */
static int
ag_pring_arm_locked(struct ag_thread *t, int32_t tid, unsigned hz)
{
    static int warned;
    int err;

    if (t->has_perf) {
        return ag_perf_sync_locked(t, tid, hz, 0);
    }
    if (atomic_load_explicit(&t->has_ring, memory_order_relaxed)) {
        /* A new rate: a new ring, sized for it. What the thread ran since its last sample is
         * claimed first (a final sample's span), or the new baseline would drop it. */
        ag_cpu_claim_tail_locked(t, ag_thread_cpu_clock(tid));
    }
    ag_timer_delete_locked(t);
    err = ag_pring_open_locked(t, tid, hz);
    if (err == 1) {
        atomic_fetch_add_explicit(&ag.n_ring_fallbacks, 1, memory_order_relaxed);
        /* (a warning when perf-ring was asked for; under auto perf's signal is as good a
         * sample, only a dearer one) */
        ag_log(warned                                    ? AG_LOG_DEBUG
               : ag.cfg.cpu_engine == AG_CPU_ENGINE_AUTO ? AG_LOG_INFO
                                                         : AG_LOG_WARN,
               "cpu engine perf-ring: thread %d's ring cannot be mapped (locked memory): "
               "sampled by perf's signal%s",
               (int)tid, warned ? "" : " (logged once; counted in ring_fallbacks)");
        warned = 1;
        err = ag_perf_sync_locked(t, tid, hz, 0);
    }
    return err;
}

/* PIPEPROF_CPU_ENGINE=perf-ring: a ring (ag_pring_arm_locked); refused, the thread is not
 * sampled, as under the perf engine. */
static void
ag_pring_sync_locked(struct ag_thread *t, int32_t tid, unsigned hz)
{
    int err;

    if ((atomic_load_explicit(&t->has_ring, memory_order_relaxed) || t->has_perf) &&
        t->timer_hz == hz) {
        return;
    }
    if (ag.perf_unavailable) {
        return; /* refused for good: nothing samples (as under the perf engine) */
    }
    err = ag_pring_arm_locked(t, tid, hz);
    if (err == 0 || err == -ESRCH) {
        return; /* armed, or the thread exited under us */
    }
    ag_timer_delete_locked(t);
    ag_perf_note_refusal(err);
    ag_thread_dropped_locked(tid);
    ag_log(AG_LOG_WARN, "cpu engine perf-ring: thread %d not sampled: %s", (int)tid,
           strerror(-err));
}

/*
 * Auto's probation: a thread above the tick starts on perf's signal, and its handler counts the
 * walks that reached the thread's root within a ring's stack copy (AG_PRING_STACK_FITS) and those
 * that did not (or stopped at the depth limit). At a scan, a thread with AG_PRING_CUT_MOVE walks
 * too deep stays on perf's signal for good (ring_deep); one with AG_PRING_PROBE_N that fit and
 * fewer too deep gets a ring. So a thread deep from its start (python3's interpreter: agent-stacks
 * read 98.6 % of its samples reaching the entry when every thread started on a ring and moved
 * after two cut samples, a scan later) loses no stack, and a thread that goes deep later is moved
 * when its ring samples are cut (ag_pring_deep_check_locked). Two, not a share: a rule that let a
 * thread keep its ring while under an eighth of its walks were too deep cut 1.5 % of the C++
 * program's stacks in agent-stacks (its exceptions' unwinding is deep), under its 99 %. What it
 * ran since its last perf sample is claimed before the ring opens, as at a new rate's ring.
 */
#define AG_PRING_PROBE_N  8u
#define AG_PRING_CUT_MOVE 2u

static void ag_timer_sync_locked(struct ag_thread *t, unsigned hz);

static void
ag_pring_probe_check_locked(struct ag_thread *t, int32_t tid)
{
    uint32_t fit = atomic_load_explicit(&t->ring_probe_n, memory_order_relaxed);
    uint32_t deep = atomic_load_explicit(&t->ring_probe_deep, memory_order_relaxed);
    unsigned hz = t->timer_hz;
    int err;

    if (!atomic_load_explicit(&t->ring_probe, memory_order_relaxed) || !t->has_perf || hz == 0 ||
        ag.cfg.cpu_engine != AG_CPU_ENGINE_AUTO) {
        return;
    }
    if (deep >= AG_PRING_CUT_MOVE) {
        atomic_store_explicit(&t->ring_probe, 0, memory_order_relaxed);
        t->ring_deep = 1;
        atomic_fetch_add_explicit(&ag.n_ring_deep, 1, memory_order_relaxed);
        ag_log(AG_LOG_DEBUG,
               "cpu engine: thread %d stays on perf's signal (%u of %u stacks deeper than a "
               "ring's copy)",
               (int)tid, deep, fit + deep);
        return;
    }
    if (fit < AG_PRING_PROBE_N) {
        return;
    }
    atomic_store_explicit(&t->ring_probe, 0, memory_order_relaxed);
    ag_cpu_claim_tail_locked(t, ag_thread_cpu_clock(tid));
    ag_timer_delete_locked(t); /* perf's signal, and its locator: the ring's own comes if asked */
    t->ring_cut = 0;
    err = ag_pring_arm_locked(t, tid, hz);
    if (err != 0 && err != -ESRCH) {
        ag_perf_note_refusal(err);
        t->ring_deep = 1; /* (not for its depth: it stays on perf's signal, or the timers) */
        ag_timer_sync_locked(t, hz);
    }
}

/*
 * Auto's ring threads whose stacks outgrow the ring's copy: a ring sample's walk ends where the
 * copy does (4 KiB above the sampled SP), and perf's signal handler walks the live stack to
 * max_frames. A thread with AG_PRING_CUT_MOVE such samples moves to perf's signal for the rest of
 * its life (ag_stats.ring_deep): a deep stack is the profile's point, the signal's price (about
 * twice the ring's, docs/performance.md) the lesser loss. The samples cut before the move (a
 * scan's worth at most) keep their leaf frames. What it ran since its last ring sample is
 * claimed first, as at a new rate's ring. Forced perf-ring keeps its rings (asked for).
 */
static void
ag_pring_deep_check_locked(struct ag_thread *t, int32_t tid)
{
    unsigned hz = t->timer_hz;
    int err;

    if (ag.cfg.cpu_engine != AG_CPU_ENGINE_AUTO ||
        !atomic_load_explicit(&t->has_ring, memory_order_relaxed) || hz == 0) {
        return;
    }
    if (t->ring_cut < AG_PRING_CUT_MOVE) {
        return;
    }
    ag_cpu_claim_tail_locked(t, ag_thread_cpu_clock(tid));
    ag_timer_delete_locked(t);
    t->ring_deep = 1;
    atomic_fetch_add_explicit(&ag.n_ring_deep, 1, memory_order_relaxed);
    err = ag_perf_sync_locked(t, tid, hz, 1);
    if (err == 0) {
        /* and what it ran while the event was opened (as auto's move from the timers) */
        ag_cpu_claim_move_locked(t, tid);
    }
    ag_log(AG_LOG_DEBUG,
           "cpu engine: thread %d to perf's signal (%u ring samples deeper than the copy)%s",
           (int)tid, t->ring_cut, err == 0 ? "" : ": perf refused, its timers");
    if (err != 0 && err != -ESRCH) {
        ag_perf_note_refusal(err);
        ag_timer_sync_locked(t, hz); /* auto's fallback: its timers */
    }
}

static void
ag_timer_sync_locked(struct ag_thread *t, unsigned hz)
{
    int32_t tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
    enum ag_cpu_engine engine;
    uint64_t elapsed = 0;
    int err, lottery = 0;

    if (hz == 0 || atomic_load_explicit(&t->excluded, memory_order_relaxed) ||
        atomic_load_explicit(&t->state, memory_order_relaxed) != AG_SLOT_ACTIVE) {
        ag_timer_delete_locked(t);
        return;
    }
    if (ag.cfg.cpu_engine == AG_CPU_ENGINE_PERF_RING) {
        ag_pring_sync_locked(t, tid, hz);
        return;
    }
    engine = ag_cpu_engine_for_rate(ag.cfg.cpu_engine, hz, ag.tick_hz);
    if (engine == AG_CPU_ENGINE_PERF_RING && t->ring_deep) {
        engine = AG_CPU_ENGINE_PERF; /* its stacks outgrew the ring's copy: it stays on perf */
    }
    if (t->perf_promoted) {
        engine = AG_CPU_ENGINE_PERF; /* the tick missed its runs: it stays on perf */
    }
    /* A new rate on the other side of the tick's changes auto's engine: the old one goes. (At
     * the same rate a thread that perf refused keeps its fallback timer.) */
    if (t->timer_hz != hz &&
        ((engine != AG_CPU_ENGINE_TIMER && t->has_timer) ||
         (engine == AG_CPU_ENGINE_TIMER &&
          (t->has_perf || atomic_load_explicit(&t->has_ring, memory_order_relaxed))))) {
        ag_timer_delete_locked(t);
    }
    if ((t->has_timer || t->has_perf || atomic_load_explicit(&t->has_ring, memory_order_relaxed)) &&
        t->timer_hz == hz) {
        return;
    }
    if (!t->has_timer && engine == AG_CPU_ENGINE_PERF_RING && !ag.perf_unavailable) {
        /* Auto above the tick: perf's signal first, on probation, then a ring at a scan when
         * its stacks fit in the ring's copy (ag_pring_probe_check_locked); a new rate keeps what
         * the thread has (a new ring for a ring). Refused, the timers below. */
        if (atomic_load_explicit(&t->has_ring, memory_order_relaxed) || t->has_perf) {
            err = ag_pring_arm_locked(t, tid, hz);
        } else {
            err = ag_perf_sync_locked(t, tid, hz, 0);
            if (err == 0) {
                atomic_store_explicit(&t->ring_probe_n, 0, memory_order_relaxed);
                atomic_store_explicit(&t->ring_probe_deep, 0, memory_order_relaxed);
                atomic_store_explicit(&t->ring_probe, 1, memory_order_relaxed);
            }
        }
        if (err == 0 || err == -ESRCH) {
            return;
        }
        ag_timer_delete_locked(t);
        ag_perf_note_refusal(err);
        atomic_fetch_add_explicit(&ag.n_perf_refused, 1, memory_order_relaxed);
    } else if (!t->has_timer && engine == AG_CPU_ENGINE_PERF && !ag.perf_unavailable) {
        err = ag_perf_sync_locked(t, tid, hz, 0);
        if (err == 0) {
            return;
        }
        ag_timer_delete_locked(t);
        if (err == -ESRCH) {
            return; /* the thread exited under us */
        }
        ag_perf_note_refusal(err);
        if (ag.cfg.cpu_engine == AG_CPU_ENGINE_PERF) {
            ag_thread_dropped_locked(tid);
            ag_log(AG_LOG_WARN, "cpu engine perf: thread %d not sampled: %s", (int)tid,
                   strerror(-err));
            return;
        }
        atomic_fetch_add_explicit(&ag.n_perf_refused, 1, memory_order_relaxed);
    }
    if (ag.cfg.cpu_engine == AG_CPU_ENGINE_PERF) {
        return;
    }
    if (!t->has_timer) {
        err = ag_cpu_timer_create(tid, &t->timer);
        if (err != 0) {
            /* The thread exited under us (EINVAL), or RLIMIT_SIGPENDING is exhausted. */
            if (err != -EINVAL) {
                ag_thread_dropped_locked(tid);
                ag_log(AG_LOG_WARN, "timer: timer_create for thread %d: %s", (int)tid,
                       strerror(-err));
            }
            return;
        }
        t->has_timer = 1;
        elapsed = ag_timer_baseline(t, tid);
        /* The lottery (above), below the tick's rate, for a thread whose CPU begins now. */
        lottery = elapsed == 0 && !ag.cfg.test_fixed_phase && ag.tick_hz != 0 && hz <= ag.tick_hz &&
                  atomic_load_explicit(&t->last_cpu_ns, memory_order_relaxed);
    }
    /* (A new rate re-arms a full interval from now, out of the lottery: weighed as before.) */
    atomic_store_explicit(&t->lottery, lottery ? AG_LOTTERY_DRAW : AG_LOTTERY_NONE,
                          memory_order_relaxed);
    if ((lottery ? ag_timer_arm_ns(t->timer, 1, 1000000000u / ag.tick_hz)
                 : ag_timer_arm(t->timer, hz, elapsed)) != 0) {
        ag_timer_delete_locked(t);
        return;
    }
    t->timer_hz = hz;
    /* Auto's timers at or below the tick: what the tick did not see goes to [not sampled]
     * (ag_cpu_engine_check_locked says why), as long as a thread it misses can move to perf. */
    atomic_store_explicit(&t->tick_unseen,
                          ag.cfg.cpu_engine == AG_CPU_ENGINE_AUTO &&
                                  engine == AG_CPU_ENGINE_TIMER && !ag.perf_unavailable,
                          memory_order_relaxed);
}

void
ag_timers_update_locked(void)
{
    unsigned i, high = atomic_load_explicit(&ag.high, memory_order_relaxed);
    unsigned hz = atomic_load_explicit(&ag.hz_cpu, memory_order_relaxed);

    for (i = 0; ag.threads != NULL && i < high; i++) {
        ag_timer_sync_locked(&ag.threads[i], hz);
    }
}

void
ag_timer_update_locked(struct ag_thread *t)
{
    ag_timer_sync_locked(t, atomic_load_explicit(&ag.hz_cpu, memory_order_relaxed));
}
