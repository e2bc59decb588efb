/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-thread-create.c - what a host thread's creation costs: pthread_create + pthread_join
 * of a thread that does nothing ("none") and of one that burns a fixed amount of CPU ("work",
 * WORK_ITERS rounds of a multiply-add chain, about 20 us on the development VM), N of each per
 * batch, the two kinds alternating over BATCHES batches. Per creation and kind it prints the
 * median over the batches of the wall time and of the process's CPU time (getrusage
 * RUSAGE_SELF, user + system: every thread's, the agent's own included), in ns:
 *   "none-wall NS none-cpu NS work-wall NS work-cpu NS"
 * Run bare, preloaded or under `pipeprof record` by bench/thread-create.sh. It first sleeps
 * SETTLE_MS (a session's start: the module list and its tables, built on the agent's threads)
 * and runs one batch of each kind uncounted, so that a batch measures the steady state. GAP_US
 * (default 0) sleeps that long after each join to hold the rate of creations down (a session's
 * thread slots are freed by its drain, every 50 ms): the wall time includes the sleeps, the CPU
 * time leaves out the creating thread's own in them (about 35 us a sleep here) but keeps the
 * other threads' (the agent's).
 * Usage: bench-thread-create [N [BATCHES [WORK_ITERS [SETTLE_MS [GAP_US]]]]]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "bench/bench.h"

#define BENCH_MAX_BATCHES 1000

static long bench_work_iters;
static struct timespec bench_gap;
static uint64_t bench_gap_cpu; /* the creating thread's CPU ns in its gaps' sleeps */
static volatile uint64_t bench_sink;

static void *
bench_thread_none(void *arg)
{
    return arg;
}

/* A dependent chain the compiler cannot fold: CPU time proportional to the iterations. */
static void *
bench_thread_work(void *arg)
{
    uint64_t x = (uint64_t)(uintptr_t)arg | 1;

    for (long i = 0; i < bench_work_iters; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
    }
    bench_sink = x;
    return arg;
}

static uint64_t
bench_cpu_ns(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

/* n creations + joins of fn; the wall and CPU ns per creation. 0, or -1 when one fails. */
static int
bench_batch(void *(*fn)(void *), long n, double *wall, double *cpu)
{
    uint64_t t0 = bench_now_ns(), c0 = bench_cpu_ns(), g0 = bench_gap_cpu;

    for (long i = 0; i < n; i++) {
        pthread_t th;

        if (pthread_create(&th, NULL, fn, (void *)(uintptr_t)i) != 0 ||
            pthread_join(th, NULL) != 0) {
            return -1;
        }
        if (bench_gap.tv_nsec != 0 || bench_gap.tv_sec != 0) {
            uint64_t c = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);

            nanosleep(&bench_gap, NULL);
            bench_gap_cpu += pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c;
        }
    }
    *wall = (double)(bench_now_ns() - t0) / (double)n;
    *cpu = (double)(bench_cpu_ns() - c0 - (bench_gap_cpu - g0)) / (double)n;
    return 0;
}

int
main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000, settle_ms = argc > 4 ? atol(argv[4]) : 200;
    long gap_us = argc > 5 ? atol(argv[5]) : 0;
    int batches = argc > 2 ? atoi(argv[2]) : 5;
    static double v[4][BENCH_MAX_BATCHES];
    void *(*fns[2])(void *) = { bench_thread_none, bench_thread_work };
    struct timespec settle = { settle_ms / 1000, settle_ms % 1000 * 1000000 };
    double scratch[2];

    bench_work_iters = argc > 3 ? atol(argv[3]) : 13000;
    if (n <= 0 || batches <= 0 || batches > BENCH_MAX_BATCHES || bench_work_iters < 0 ||
        settle_ms < 0 || gap_us < 0) {
        fprintf(stderr,
                "usage: bench-thread-create [N [BATCHES(1-%d) [WORK_ITERS [SETTLE_MS "
                "[GAP_US]]]]]\n",
                BENCH_MAX_BATCHES);
        return 2;
    }
    bench_gap.tv_sec = gap_us / 1000000;
    bench_gap.tv_nsec = gap_us % 1000000 * 1000;
    nanosleep(&settle, NULL);
    for (int b = -1; b < batches; b++) {
        for (int k = 0; k < 2; k++) {
            double *wall = b < 0 ? &scratch[0] : &v[2 * k][b];
            double *cpu = b < 0 ? &scratch[1] : &v[2 * k + 1][b];

            if (bench_batch(fns[k], n, wall, cpu) != 0) {
                fprintf(stderr, "bench-thread-create: pthread_create or pthread_join failed\n");
                return 1;
            }
        }
    }
    printf("none-wall %.0f none-cpu %.0f work-wall %.0f work-cpu %.0f\n",
           bench_median_of(v[0], batches), bench_median_of(v[1], batches),
           bench_median_of(v[2], batches), bench_median_of(v[3], batches));
    return 0;
}
