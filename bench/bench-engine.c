/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-engine.c - what a CPU-mode sample costs the sampled thread, per engine, against the
 * bare signal round trip of the same engine. A thread burns fixed work units at a known stack
 * depth (32 frames) and measures its own CPU time per unit, in interleaved rounds:
 *   bare        no signals;
 *   perf-empty  a perf_event cpu-clock overflow signal at RATE with an empty handler (what the
 *               kernel's overflow and signal delivery cost: the floor of any perf-based sampler);
 *   agent-perf  the agent in CPU mode at RATE with the perf engine (sample, clocks, CFI unwind
 *               through the thread's row cache);
 *   agent-nocache the same with the thread's CFI row cache turned off (white-box: the slot's
 *               cache pointer), the handler as it was before the cache;
 *   agent-timer the agent with CPU-time timers.
 * and, to show where a sample's price comes from (docs/performance.md, "CPU engines"):
 *   perf-nosig  the same perf_event overflows with no signal at all (the hrtimer interrupt alone;
 *               "signals" here is the overflows the CPU time implies);
 *   perf-sigtrap the overflows delivered as the event's own SIGTRAP (attr.sigtrap, Linux 5.13+:
 *               task work instead of F_SETSIG's irq_work self-interrupt), empty handler;
 *   timer-empty a CPU-time timer (timer_create, the timer engine's clock) with an empty handler;
 *   itimer-empty ITIMER_PROF with an empty handler: gperftools' CPU profiler's clock;
 *   hrtimer-bare the same cpu-clock event counting neither user nor kernel mode: its
 *               high-resolution timer still fires at RATE while the thread runs, but no overflow
 *               is taken, so this is the timer interrupt alone, what any sampler that beats the
 *               tick pays per sample ("signals" here is the expiries the run's CPU time implies);
 *   gperftools  gperftools' CPU profiler itself (libprofiler.so.0, loaded at run time:
 *               ProfilerStart at CPUPROFILE_FREQUENCY=RATE, ITIMER_PROF, its handler walks the
 *               stack with libunwind into its hash table; "signals" is its samples_gathered),
 *               skipped when the library is not installed;
 *   timer-clock timer-empty whose handler reads the two clocks the agent's handler reads (the
 *               thread CPU clock, a system call the vDSO does not serve, and CLOCK_MONOTONIC).
 * BENCH_ENGINE_ONLY=NAME,NAME,... runs only those configurations (bare always runs).
 * BENCH_ENGINE_BUDDY=1 keeps a second thread busy beside the measured one for the whole run (no
 * stack, no clock reads): the agent samples it too, so the measured thread's handler finds the
 * agent's shared state (ag's counters) written by the other CPU's handler since its last
 * signal, as a host with two busy threads on two CPUs has it (pp-sample-workload).
 * Cost per signal = (CPU per unit - bare CPU per unit of the same round) x units / signals.
 * Configurations run in rotating order within a round. Prints, per configuration, the median
 * and the quartiles over the rounds, and the ratio agent-perf / perf-empty both of the medians
 * and as the median of the per-round ratios. usage: bench-engine [RATE [ROUNDS [UNITS]]] (1000,
 * 11, 20000: about 0.45 s per run; at lower rates more units give each run more signals).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/internal.h"
#include "bench.h"
#include "deep.h"
#include "gperf.h"

static volatile uint64_t bench_sink;
static int bench_depth = 32; /* BENCH_ENGINE_DEPTH */
static _Atomic unsigned bench_signals;

static uint64_t
bench_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Each signal's whole price in the thread's CPU time: the unit loop reads the thread CPU clock
 * every 256 multiplications, and a handler counts that its signal came; the CPU time between
 * the two reads around a signal is the normal step plus the interrupt that carried it, the
 * kernel's delivery, the handler and sigreturn (interrupts are charged to the interrupted
 * thread: no CONFIG_IRQ_TIME_ACCOUNTING here). Time the thread spent off the CPU does not count,
 * and the median of those steps does not move with the machine's load or speed as the CPU time
 * per unit does, so it resolves a microsecond where the CPU time needs thousands of signals.
 * Steps without a signal give the normal step (their median) and, above it by 1 us or more, the
 * interrupts that sent none (the tick; the hrtimer of perf-nosig and hrtimer-bare). */
#define BENCH_STEPS (1u << 21)
#define BENCH_GAPS  4096
static uint64_t bench_prev_ns, bench_in_ns, bench_out_ns; /* the handler's entry and exit */
static volatile sig_atomic_t bench_marks;
static unsigned bench_seen_marks;
static float *bench_steps, bench_sig_gap[BENCH_GAPS], bench_hnd_gap[BENCH_GAPS];
static unsigned bench_n_steps, bench_n_sig_gap;
static void (*bench_inner)(int, siginfo_t *, void *); /* what bench_wrap runs */

/* The k-th unit of bench_deep_run()'s burn; the first starts the gap and step counts. */
__attribute__((noinline)) static void
bench_unit(unsigned k)
{
    uint64_t x = bench_sink, now;
    int i, j;

    if (k == 0) {
        bench_n_sig_gap = 0;
        bench_n_steps = 0;
        bench_seen_marks = (unsigned)bench_marks;
        bench_prev_ns = bench_cpu_ns();
    }
    for (i = 0; i < 20000; i += 256) {
        unsigned m1, m2;

        for (j = 0; j < 256; j++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
        }
        m1 = (unsigned)bench_marks;
        now = bench_cpu_ns();
        m2 = (unsigned)bench_marks;
        if (m1 != m2) {
            bench_seen_marks = m2; /* a signal around the read: its step is not whole */
        } else if (m1 != bench_seen_marks) {
            unsigned n = m1 - bench_seen_marks; /* one signal in the step, or more */

            bench_seen_marks = m1;
            if (n == 1 && bench_n_sig_gap < BENCH_GAPS) {
                bench_hnd_gap[bench_n_sig_gap] =
                        bench_out_ns > bench_in_ns ? (float)(bench_out_ns - bench_in_ns) : 0;
                bench_sig_gap[bench_n_sig_gap++] = (float)(now - bench_prev_ns);
            }
        } else if (bench_steps != NULL && bench_n_steps < BENCH_STEPS) {
            bench_steps[bench_n_steps++] = (float)(now - bench_prev_ns);
        }
        bench_prev_ns = now;
    }
    bench_sink = x;
}

static int
bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* Runs the handler a profiler installed for SIGPROF, marking the gap and timing the handler. */
static void
bench_wrap(int sig, siginfo_t *si, void *uc)
{
    bench_in_ns = bench_now_ns();
    bench_inner(sig, si, uc);
    bench_out_ns = bench_now_ns();
    bench_marks = bench_marks + 1;
}

/* Puts bench_wrap around the SIGPROF handler in place, through libc's sigaction: the agent's
 * library interposes sigaction (host/signals.c) and would keep the agent's handler. */
static void
bench_wrap_install(void)
{
    int (*real)(int, const struct sigaction *, struct sigaction *);
    struct sigaction sa;

    *(void **)&real = dlsym(RTLD_NEXT, "sigaction");
    if (real == NULL) {
        real = sigaction;
    }
    real(SIGPROF, NULL, &sa);
    if ((sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction != bench_wrap) {
        bench_inner = sa.sa_sigaction;
        sa.sa_sigaction = bench_wrap;
        real(SIGPROF, &sa, NULL);
    }
}

/* The q-quantile of v[0..n) (sorts v), 0 when empty. */
static int
bench_cmpf(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;

    return x < y ? -1 : x > y;
}

static double
bench_quantile(float *v, unsigned n, double q)
{
    if (n == 0) {
        return 0;
    }
    qsort(v, n, sizeof(*v), bench_cmpf);
    return v[(unsigned)(q * (n - 1))];
}

static void
bench_empty(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    bench_in_ns = 0;
    bench_out_ns = 0;
    bench_marks = bench_marks + 1;
    atomic_fetch_add_explicit(&bench_signals, 1, memory_order_relaxed);
}

enum bench_delivery {
    BENCH_FASYNC = 0,  /* F_SETSIG SIGPROF to the thread, as the perf engine does */
    BENCH_NOSIG = 1,   /* no signal: the overflow alone */
    BENCH_SIGTRAP = 2, /* attr.sigtrap */
    BENCH_NOMODE = 3,  /* user mode excluded too: the hrtimer fires, never overflows */
};

/* The thread's cpu-clock event at hz, disabled; -1 with errno when refused. */
static int
bench_perf_open(unsigned hz, enum bench_delivery how)
{
    struct perf_event_attr a;
    struct f_owner_ex o = { F_OWNER_TID, (pid_t)syscall(SYS_gettid) };
    int fd;

    memset(&a, 0, sizeof(a));
    a.size = sizeof(a);
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.sample_period = 1000000000u / hz;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.exclude_user = how == BENCH_NOMODE;
    a.disabled = 1;
    a.wakeup_events = 1;
    if (how == BENCH_SIGTRAP) {
#ifdef PERF_ATTR_SIZE_VER7
        a.sigtrap = 1;
        a.remove_on_exec = 1; /* the kernel requires it with sigtrap */
#else
        errno = EINVAL;
        return -1;
#endif
    }
    fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    if (how == BENCH_FASYNC &&
        (fcntl(fd, F_SETOWN_EX, &o) != 0 || fcntl(fd, F_SETSIG, SIGPROF) != 0 ||
         fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* timer-clock's handler: the empty one and the two clock reads of the agent's handler (the
 * thread CPU clock, a system call; CLOCK_MONOTONIC, the vDSO). */
static void
bench_clock_handler(int sig, siginfo_t *si, void *uc)
{
    uint64_t t0 = bench_now_ns();
    volatile uint64_t cpu = bench_cpu_ns();
    uint64_t t1 = bench_now_ns();

    (void)cpu;
    bench_empty(sig, si, uc);
    bench_in_ns = t0; /* the handler time shown is the CPU clock's read */
    bench_out_ns = t1;
}

/* Starts configuration k's bare clock (5..9, 11) with bench_empty on its signal. 0, 1 to skip the
 * configuration (the kernel refuses it), -1 on error. */
static int
bench_clock_start(int k, unsigned hz, int *fd, timer_t *timer)
{
    struct sigaction sa;
    struct sigevent sev;
    struct itimerspec its;
    struct itimerval itv;
    long ns = 1000000000L / (long)hz;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = k == 11 ? bench_clock_handler : bench_empty;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    sigaction(SIGTRAP, &sa, NULL);
    atomic_store(&bench_signals, 0);
    switch (k) {
    case 5:
    case 6:
    case 9:
        *fd = bench_perf_open(hz, k == 5 ? BENCH_NOSIG : k == 6 ? BENCH_SIGTRAP : BENCH_NOMODE);
        if (*fd < 0) {
            return k == 6 ? 1 : -1;
        }
        return ioctl(*fd, PERF_EVENT_IOC_ENABLE, 0) == 0 ? 0 : -1;
    case 7:
    case 11:
        memset(&sev, 0, sizeof(sev));
        sev.sigev_notify = SIGEV_THREAD_ID;
        sev.sigev_signo = SIGPROF;
        sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
        its.it_interval.tv_sec = 0;
        its.it_interval.tv_nsec = ns;
        its.it_value = its.it_interval;
        if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, timer) != 0 ||
            timer_settime(*timer, 0, &its, NULL) != 0) {
            return -1;
        }
        return 0;
    default:
        itv.it_interval.tv_sec = 0;
        itv.it_interval.tv_usec = ns / 1000;
        itv.it_value = itv.it_interval;
        return setitimer(ITIMER_PROF, &itv, NULL) == 0 ? 0 : -1;
    }
}

/* Stops configuration k's bare clock; *sigs gets its signals (perf-nosig, hrtimer-bare: the
 * expiries that burning ns of CPU implies). */
static void
bench_clock_stop(int k, unsigned hz, int fd, timer_t timer, uint64_t ns, unsigned *sigs)
{
    struct sigaction sa;
    struct itimerval zero;

    if (k == 5 || k == 6 || k == 9) {
        ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
        close(fd);
    } else if (k == 7 || k == 11) {
        timer_delete(timer);
    } else {
        memset(&zero, 0, sizeof(zero));
        setitimer(ITIMER_PROF, &zero, NULL);
    }
    *sigs = k == 5 || k == 9 ? (unsigned)(ns * hz / 1000000000u) : atomic_load(&bench_signals);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN; /* discards a signal still pending */
    sigaction(SIGPROF, &sa, NULL);
    sigaction(SIGTRAP, &sa, NULL);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGPROF, &sa, NULL);
    sigaction(SIGTRAP, &sa, NULL);
}

static double
bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), bench_cmp);
    return v[n / 2];
}

#define BENCH_CONFIGS    12
#define BENCH_GPERFTOOLS 10

static const char *const bench_names[BENCH_CONFIGS] = {
    "bare",         "perf-empty",  "agent-perf",   "agent-nocache", "agent-timer", "perf-nosig",
    "perf-sigtrap", "timer-empty", "itimer-empty", "hrtimer-bare",  "gperftools",  "timer-clock",
};

static struct {
    struct bench_gperf_api api;
    struct sigaction act; /* its SIGPROF handler, put back before each start */
    int have_act;
} bench_gperf;

/* Runs the units under gperftools' CPU profiler at hz. 0, 1 to skip (not installed), -1. */
static int
bench_gperf_run(unsigned hz, unsigned units, uint64_t *ns, unsigned *sigs)
{
    char path[64];
    struct bench_gperf_state st;

    if (bench_gperf_load(&bench_gperf.api, hz, "bench-engine") != 0) {
        return 1;
    }
    /* the other configurations leave SIGPROF at SIG_DFL: its handler goes back first */
    if (bench_gperf.have_act) {
        sigaction(SIGPROF, &bench_gperf.act, NULL);
    }
    snprintf(path, sizeof(path), "/tmp/bench-engine-gperf.%d", (int)getpid());
    if (!bench_gperf.api.start(path)) {
        fprintf(stderr, "bench-engine: gperftools' ProfilerStart failed\n");
        return -1;
    }
    if (!bench_gperf.have_act) {
        sigaction(SIGPROF, NULL, &bench_gperf.act);
        bench_gperf.have_act = 1;
    }
    bench_wrap_install();
    *ns = bench_deep_run(bench_depth, units, bench_unit, &bench_sink);
    bench_gperf.api.state(&st);
    bench_gperf.api.stop();
    unlink(path);
    *sigs = st.samples_gathered > 0 ? (unsigned)st.samples_gathered : 0;
    return 0;
}

/* One run of configuration k: burns the units and returns the CPU ns; *sigs gets the signals. */
static int
bench_run(int k, unsigned hz, unsigned units, uint64_t *ns, unsigned *sigs)
{
    struct sigaction sa;
    struct ag_config cfg;
    struct ag_stats st;
    timer_t timer;
    int fd = -1, err;

    *sigs = 0;
    memset(&sa, 0, sizeof(sa));
    if (k == BENCH_GPERFTOOLS) {
        return bench_gperf_run(hz, units, ns, sigs);
    }
    if (k >= 5) {
        err = bench_clock_start(k, hz, &fd, &timer);
        if (err != 0) {
            if (err < 0) {
                fprintf(stderr, "bench-engine: %s: %s\n", bench_names[k], strerror(errno));
            }
            return err;
        }
        *ns = bench_deep_run(bench_depth, units, bench_unit, &bench_sink);
        bench_clock_stop(k, hz, fd, timer, *ns, sigs);
        return 0;
    }
    if (k == 1) {
        fd = bench_perf_open(hz, BENCH_FASYNC);
        sa.sa_sigaction = bench_empty;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigaction(SIGPROF, &sa, NULL);
        atomic_store(&bench_signals, 0);
        if (fd < 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
            fprintf(stderr, "bench-engine: perf_event_open refused\n");
            return -1;
        }
    } else if (k >= 2) {
        ag_config_init(&cfg);
        cfg.cpu_engine = k == 4 ? AG_CPU_ENGINE_TIMER : AG_CPU_ENGINE_PERF;
        cfg.ring_slots = 65536;
        if (ag_start(&cfg) != 0 || ag_sampling_acquire(AG_MODE_CPU, hz) != 0) {
            fprintf(stderr, "bench-engine: agent did not start\n");
            return -1;
        }
        if (k == 3) {
            struct ag_thread *t = ag_sig_thread_self();

            if (t == NULL) {
                fprintf(stderr, "bench-engine: this thread has no slot\n");
                return -1;
            }
            t->cfi_cache = NULL;
        }
        bench_wrap_install();
    }
    *ns = bench_deep_run(bench_depth, units, bench_unit, &bench_sink);
    if (k == 1) {
        ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
        close(fd);
        *sigs = atomic_load(&bench_signals);
        sa.sa_handler = SIG_DFL;
        sa.sa_flags = 0;
        sigaction(SIGPROF, &sa, NULL);
    } else if (k >= 2) {
        ag_stats_get(&st);
        *sigs = (unsigned)st.samples_cpu;
        if (ag_sampling_release(AG_MODE_CPU, hz) != 0) {
            fprintf(stderr, "bench-engine: release failed\n");
        }
        ag_stop();
    }
    return 0;
}

static _Atomic int bench_buddy_stop;

/* BENCH_ENGINE_BUDDY's thread: burns until told to stop. */
static void *
bench_buddy(void *arg)
{
    uint64_t x = (uint64_t)(uintptr_t)arg;
    int i;

    pthread_setname_np(pthread_self(), "bench-buddy");
    while (!atomic_load_explicit(&bench_buddy_stop, memory_order_relaxed)) {
        for (i = 0; i < 4096; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
        }
    }
    bench_sink = x;
    return NULL;
}

int
main(int argc, char **argv)
{
    unsigned hz = argc > 1 ? (unsigned)atoi(argv[1]) : 1000;
    int rounds = argc > 2 ? atoi(argv[2]) : 11, r, k, i;
    const unsigned units = argc > 3 ? (unsigned)atoi(argv[3]) : 20000;
    double per_unit[BENCH_CONFIGS][64], cost[BENCH_CONFIGS][64], sigs[BENCH_CONFIGS][64];
    double sig_gap[BENCH_CONFIGS][64], irq_gap[BENCH_CONFIGS][64], hnd_gap[BENCH_CONFIGS][64];
    double ratio[64], med_cost[BENCH_CONFIGS], med_gap[BENCH_CONFIGS];
    int skipped[BENCH_CONFIGS] = { 0 };
    const char *only = getenv("BENCH_ENGINE_ONLY");
    const char *depth = getenv("BENCH_ENGINE_DEPTH");
    const char *buddy = getenv("BENCH_ENGINE_BUDDY");
    pthread_t buddy_thread;

    if (rounds < 1 || rounds > 64 || hz == 0 || hz > 1000 || units == 0) {
        fprintf(stderr, "usage: bench-engine [RATE 1..1000 [ROUNDS 1..64 [UNITS]]]\n");
        return 2;
    }
    bench_steps = malloc(BENCH_STEPS * sizeof(*bench_steps));
    if (depth != NULL) {
        bench_depth = atoi(depth);
        if (bench_depth < 0 || bench_depth > 200) {
            fprintf(stderr, "bench-engine: BENCH_ENGINE_DEPTH is 0..200\n");
            return 2;
        }
    }
    for (k = 1; only != NULL && k < BENCH_CONFIGS; k++) {
        skipped[k] = bench_list_has(only, bench_names[k]) ? 0 : 2;
    }
    if (buddy != NULL && atoi(buddy) == 1 &&
        pthread_create(&buddy_thread, NULL, bench_buddy, (void *)(uintptr_t)1) != 0) {
        fprintf(stderr, "bench-engine: no buddy thread\n");
        return 1;
    }
    for (r = 0; r < rounds; r++) {
        for (i = 0; i < BENCH_CONFIGS; i++) {
            uint64_t ns;
            unsigned n;
            int err;

            k = (i + r) % BENCH_CONFIGS; /* rotating order: drift spreads evenly */
            if (skipped[k]) {
                ns = 0;
                n = 0;
            } else if ((err = bench_run(k, hz, units, &ns, &n)) < 0) {
                return 1;
            } else if (err > 0) {
                fprintf(stderr,
                        "bench-engine: %s refused by this kernel or not installed: skipped\n",
                        bench_names[k]);
                skipped[k] = 1;
                ns = 0;
                n = 0;
            }
            per_unit[k][r] = (double)ns / units;
            sigs[k][r] = n;
            if (ns != 0) {
                double step = bench_quantile(bench_steps, bench_n_steps, 0.5);
                unsigned lo = 0;

                /* steps sorted: the ones 1 us or more above the median are interrupts */
                while (lo < bench_n_steps && bench_steps[lo] < step + 1000) {
                    lo++;
                }
                irq_gap[k][r] =
                        lo < bench_n_steps
                                ? bench_quantile(bench_steps + lo, bench_n_steps - lo, 0.5) - step
                                : 0;
                sig_gap[k][r] = bench_n_sig_gap > 0
                                        ? bench_quantile(bench_sig_gap, bench_n_sig_gap, 0.5) - step
                                        : 0;
                hnd_gap[k][r] = bench_quantile(bench_hnd_gap, bench_n_sig_gap, 0.5);
            } else {
                sig_gap[k][r] = irq_gap[k][r] = hnd_gap[k][r] = 0;
            }
        }
        for (k = 1; k < BENCH_CONFIGS; k++) {
            /* against the bare run of the same round */
            cost[k][r] =
                    sigs[k][r] > 0 ? (per_unit[k][r] - per_unit[0][r]) * units / sigs[k][r] : 0;
        }
        ratio[r] = cost[1][r] != 0 ? cost[2][r] / cost[1][r] : 0;
    }
    printf("bench-engine: %u units x %d rounds per configuration, %u Hz, %d frames deep; "
           "medians [quartiles] over the rounds; per signal from the CPU time per unit; irq: the "
           "median interruption without a signal; gap: the median step of the unit loop that "
           "took a signal (interrupt, delivery, handler, sigreturn), both above the normal step, "
           "in the thread's CPU time; handler: the median time in the handler%s\n",
           units, rounds, hz, bench_depth,
           buddy != NULL && atoi(buddy) == 1 ? "; a busy buddy thread beside" : "");
    for (k = 0; k < BENCH_CONFIGS; k++) {
        double u[64], c[64], n[64], g[64], q[64], h[64];

        for (r = 0; r < rounds; r++) {
            u[r] = per_unit[k][r];
            c[r] = cost[k][r];
            n[r] = sigs[k][r];
            g[r] = sig_gap[k][r];
            q[r] = irq_gap[k][r];
            h[r] = hnd_gap[k][r];
        }
        if (skipped[k]) {
            if (skipped[k] == 1) {
                printf("  %-13s refused by this kernel or not installed\n", bench_names[k]);
            }
            med_cost[k] = 0;
            med_gap[k] = 0;
            continue;
        }
        printf("  %-13s %8.1f ns/unit", bench_names[k], bench_median(u, rounds));
        printf("  irq %5.0f ns", bench_median(q, rounds));
        if (k > 0) {
            med_cost[k] = bench_median(c, rounds); /* sorts c */
            printf("  %6.0f signals  %7.0f ns per signal [%.0f .. %.0f]", bench_median(n, rounds),
                   med_cost[k], c[rounds / 4], c[rounds - 1 - rounds / 4]);
            med_gap[k] = bench_median(g, rounds);
            if (med_gap[k] > 0) {
                printf("  gap %6.0f ns [%.0f .. %.0f] handler %5.0f ns", med_gap[k], g[rounds / 4],
                       g[rounds - 1 - rounds / 4], bench_median(h, rounds));
            }
        }
        printf("\n");
    }
    printf("  agent-perf / perf-empty per signal: %.2f (of the medians), %.2f (median of the "
           "per-round ratios)\n",
           med_cost[1] > 0 ? med_cost[2] / med_cost[1] : 0.0, bench_median(ratio, rounds));
    printf("  agent-nocache / perf-empty: %.2f; agent-timer signals are the tick-bound ones\n",
           med_cost[1] > 0 ? med_cost[3] / med_cost[1] : 0.0);
    printf("  of a perf-empty sample: the overflow alone %.0f ns, the F_SETSIG delivery %.0f ns;"
           " perf-sigtrap / perf-empty %.2f; timer-empty / itimer-empty %.2f\n",
           med_cost[5], med_cost[1] - med_cost[5],
           med_cost[1] > 0 ? med_cost[6] / med_cost[1] : 0.0,
           med_cost[8] > 0 ? med_cost[7] / med_cost[8] : 0.0);
    printf("  the timer interrupt alone (hrtimer-bare) %.0f ns: %.2f %% of a CPU at %u Hz before "
           "any sample is taken\n",
           med_cost[9], med_cost[9] * hz / 1e7, hz);
    printf("  per sample against gperftools (of the medians), CPU time: agent-timer %.2f, "
           "agent-perf %.2f; gap: agent-timer %.2f, agent-perf %.2f\n",
           med_cost[10] > 0 ? med_cost[4] / med_cost[10] : 0.0,
           med_cost[10] > 0 ? med_cost[2] / med_cost[10] : 0.0,
           med_gap[10] > 0 ? med_gap[4] / med_gap[10] : 0.0,
           med_gap[10] > 0 ? med_gap[2] / med_gap[10] : 0.0);
    if (buddy != NULL && atoi(buddy) == 1) {
        atomic_store(&bench_buddy_stop, 1);
        pthread_join(buddy_thread, NULL);
    }
    return 0;
}
