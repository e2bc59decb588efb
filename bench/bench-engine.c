/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-engine.c - what a CPU-mode sample costs the sampled thread, per engine, against the
 * bare signal round trip of the same engine. A thread burns fixed work units at a known stack
 * depth (32 frames) and measures its own CPU time per unit, in interleaved rounds:
 *   bare        no signals;
 *   perf-empty  a perf_event cpu-clock overflow signal at RATE with an empty handler (what the
 *               kernel's overflow and signal delivery cost: the floor of any perf-based sampler);
 *   agent-perf  the agent in CPU mode at RATE with the perf engine (sample, clocks, CFI unwind);
 *   agent-timer the agent with CPU-time timers.
 * Cost per signal = (CPU per unit - bare CPU per unit) x units / signals. Prints medians of the
 * rounds and the ratio agent-perf / perf-empty. usage: bench-engine [RATE [ROUNDS]] (1000, 5).
 */
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
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"

static volatile uint64_t bench_sink;
static _Atomic unsigned bench_signals;

static uint64_t
bench_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void
bench_unit(void)
{
    uint64_t x = bench_sink;
    int i;

    for (i = 0; i < 20000; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
    }
    bench_sink = x;
}

/* Burns `units` units 32 frames deep; returns the thread CPU ns it took. */
__attribute__((noinline)) static uint64_t
bench_deep(int depth, unsigned units)
{
    uint64_t t0, r;
    unsigned i;

    if (depth > 0) {
        r = bench_deep(depth - 1, units);
        bench_sink += r & 1; /* not a tail call */
        return r;
    }
    t0 = bench_cpu_ns();
    for (i = 0; i < units; i++) {
        bench_unit();
    }
    return bench_cpu_ns() - t0;
}

static void
bench_empty(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    atomic_fetch_add_explicit(&bench_signals, 1, memory_order_relaxed);
}

static int
bench_perf_open(unsigned hz)
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
    a.disabled = 1;
    a.wakeup_events = 1;
    fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0 || fcntl(fd, F_SETOWN_EX, &o) != 0 || fcntl(fd, F_SETSIG, SIGPROF) != 0 ||
        fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0) {
        return -1;
    }
    return fd;
}

static int
bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double
bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), bench_cmp);
    return v[n / 2];
}

int
main(int argc, char **argv)
{
    unsigned hz = argc > 1 ? (unsigned)atoi(argv[1]) : 1000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5, r, k;
    const unsigned units = 20000;
    double per_unit[4][32], per_sig[4][32];
    const char *names[4] = { "bare", "perf-empty", "agent-perf", "agent-timer" };
    struct sigaction sa;

    if (rounds < 1 || rounds > 32 || hz == 0 || hz > 1000) {
        fprintf(stderr, "usage: bench-engine [RATE 1..1000 [ROUNDS 1..32]]\n");
        return 2;
    }
    for (r = 0; r < rounds; r++) {
        for (k = 0; k < 4; k++) {
            struct ag_config cfg;
            struct ag_stats st;
            uint64_t ns;
            unsigned sigs = 0;
            int fd = -1;

            memset(&sa, 0, sizeof(sa));
            if (k == 1) {
                sa.sa_sigaction = bench_empty;
                sa.sa_flags = SA_SIGINFO | SA_RESTART;
                sigaction(SIGPROF, &sa, NULL);
                atomic_store(&bench_signals, 0);
                fd = bench_perf_open(hz);
                if (fd < 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
                    fprintf(stderr, "bench-engine: perf_event_open refused\n");
                    return 1;
                }
            } else if (k >= 2) {
                ag_config_init(&cfg);
                cfg.cpu_engine = k == 2 ? AG_CPU_ENGINE_PERF : AG_CPU_ENGINE_TIMER;
                cfg.ring_slots = 65536;
                if (ag_start(&cfg) != 0 || ag_sampling_acquire(AG_MODE_CPU, hz) != 0) {
                    fprintf(stderr, "bench-engine: agent did not start\n");
                    return 1;
                }
            }
            ns = bench_deep(32, units);
            if (k == 1) {
                ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
                close(fd);
                sigs = atomic_load(&bench_signals);
                sa.sa_handler = SIG_DFL;
                sa.sa_flags = 0;
                sigaction(SIGPROF, &sa, NULL);
            } else if (k >= 2) {
                ag_stats_get(&st);
                sigs = (unsigned)st.samples_cpu;
                if (ag_sampling_release(AG_MODE_CPU, hz) != 0) {
                    fprintf(stderr, "bench-engine: release failed\n");
                }
                ag_stop();
            }
            per_unit[k][r] = (double)ns / units;
            per_sig[k][r] = sigs;
        }
    }
    printf("bench-engine: %u units x %d rounds per configuration, %u Hz, 32 frames deep\n", units,
           rounds, hz);
    {
        double bare = 0, cost[4] = { 0 };
        double u[32];

        for (k = 0; k < 4; k++) {
            double c[32];

            for (r = 0; r < rounds; r++) {
                u[r] = per_unit[k][r];
                /* against the bare run of the same round: rounds are interleaved */
                c[r] = per_sig[k][r] > 0 ? (per_unit[k][r] - per_unit[0][r]) * units / per_sig[k][r]
                                         : 0;
            }
            if (k == 0) {
                bare = bench_median(u, rounds);
            }
            cost[k] = k > 0 ? bench_median(c, rounds) : 0;
            printf("  %-11s %8.1f ns/unit  %+6.2f%%", names[k], bench_median(u, rounds),
                   100.0 * (bench_median(u, rounds) - bare) / bare);
            if (k > 0) {
                printf("  %7.0f ns per signal", cost[k]);
            }
            printf("\n");
        }
        printf("  ratio agent-perf / perf-empty per signal: %.2f\n",
               cost[1] > 0 ? cost[2] / cost[1] : 0.0);
    }
    return 0;
}
