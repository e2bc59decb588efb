/* SPDX-License-Identifier: MIT */
/*
 * samples/shortlot/main.c - a thread-per-request workload that measures itself: one thread
 * always busy in sl_steady while, meanwhile, many short threads (a few at a time) each burn a
 * known CPU amount of 0.5 to 4 ms in sl_short and exit: under one sampling interval at 100 and
 * 250 Hz, so that most of them end before a timer's first full interval would have come (issue
 * 19: such threads' CPU fell in no sample). At the end, each function's CPU time by the threads'
 * own clocks (CLOCK_THREAD_CPUTIME_ID). A profile is right when each function's share of the
 * samples equals its share of that CPU time.
 *
 * usage: pp-sample-shortlot [SECONDS [OUT.json [THREADS [AT_ONCE]]]] (defaults 3 s, 300 short
 * threads, 3 at once; the JSON goes to OUT.json or stdout): {"sl_steady": ns, "sl_short": ns,
 * "_outside": ns}. The short threads start when the steady one has, and the steady one burns
 * until they have all ended and SECONDS have passed. The k-th short thread burns 0.5 + 0.1 *
 * ((k * 7) % 36) ms, so every burn of the ladder comes as often. "_outside" is the short threads'
 * CPU in their start routine outside sl_short, which the profile's samples under neither function
 * stand against (a final sample of a thread with no stack known is over its start routine,
 * sl_thread: not in sl_short).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/clock.h"

#define SL_NOINLINE __attribute__((noinline, used))

static _Atomic uint64_t sl_sink;
static _Atomic uint64_t sl_short_ns, sl_outside_ns;
static _Atomic int sl_done; /* the short threads have all ended */

/* Burns ns nanoseconds of this thread's CPU in user space (its clock read every ~20 us). */
static void
sl_burn(uint64_t ns)
{
    uint64_t end = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) + ns,
             x = atomic_load_explicit(&sl_sink, memory_order_relaxed);
    int i;

    do {
        for (i = 0; i < 2000; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
        }
    } while (pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) < end);
    atomic_store_explicit(&sl_sink, x, memory_order_relaxed);
}

/* The steady thread: burns until the short threads are done and `*arg` (CLOCK_MONOTONIC) has
 * passed, then stores its CPU time there. */
SL_NOINLINE static void *
sl_steady(void *arg)
{
    uint64_t *io = arg, c0 = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);

    while (!atomic_load(&sl_done) || pp_clock_ns(CLOCK_MONOTONIC) < *io) {
        sl_burn(1000000);
    }
    *io = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    return NULL;
}

/* A short thread's work: burns ns of CPU. Returns the CPU it burned, added to sl_short_ns. */
SL_NOINLINE static uint64_t
sl_short(uint64_t ns)
{
    uint64_t c0 = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID), d;

    sl_burn(ns);
    d = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    atomic_fetch_add(&sl_short_ns, d);
    return d;
}

/* A short thread's start routine (a request's handler): its work in sl_short, so that a final
 * sample with no stack known (over the start routine) is not taken for a sample of sl_short. */
SL_NOINLINE static void *
sl_thread(void *arg)
{
    uint64_t c0 = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID), d;

    d = sl_short((uint64_t)(uintptr_t)arg);
    atomic_fetch_add(&sl_outside_ns, pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0 - d);
    return NULL;
}

int
main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 3.0;
    unsigned threads = argc > 3 ? (unsigned)atoi(argv[3]) : 300;
    unsigned at_once = argc > 4 ? (unsigned)atoi(argv[4]) : 3, k, i;
    uint64_t steady = pp_clock_ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9);
    pthread_t steady_th, th[16];
    FILE *out = stdout;

    if (argc > 2 && (out = fopen(argv[2], "w")) == NULL) {
        perror(argv[2]);
        return 1;
    }
    if (at_once == 0 || at_once > 16) {
        fprintf(stderr, "pp-sample-shortlot: AT_ONCE is 1 to 16\n");
        return 2;
    }
    if (pthread_create(&steady_th, NULL, sl_steady, &steady) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
    }
    for (k = 0; k < threads; k += at_once) {
        for (i = 0; i < at_once && k + i < threads; i++) {
            uint64_t ns = 500000u + 100000u * (((k + i) * 7u) % 36u);

            if (pthread_create(&th[i], NULL, sl_thread, (void *)(uintptr_t)ns) != 0) {
                fprintf(stderr, "pthread_create failed\n");
                return 1;
            }
        }
        for (i = 0; i < at_once && k + i < threads; i++) {
            pthread_join(th[i], NULL);
        }
    }
    atomic_store(&sl_done, 1);
    pthread_join(steady_th, NULL);
    fprintf(out, "{\"sl_steady\": %llu, \"sl_short\": %llu, \"_outside\": %llu}\n",
            (unsigned long long)steady, (unsigned long long)atomic_load(&sl_short_ns),
            (unsigned long long)atomic_load(&sl_outside_ns));
    return out != stdout && fclose(out) != 0;
}
