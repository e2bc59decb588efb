/* SPDX-License-Identifier: MIT */
/*
 * samples/groundtruth/main.c - a workload that measures itself: threads with known CPU patterns
 * (always busy, and bursts of CPU between sleeps: 1.5 ms on / 2.5 ms off, 7 ms on / 1 ms off,
 * 0.6 ms every 6 ms), each burning in a function of its own, and at the end each thread's CPU
 * time by its own clock (CLOCK_THREAD_CPUTIME_ID). A profile of it is right when each
 * function's share of the samples equals its share of that CPU time.
 *
 * usage: pp-sample-groundtruth [SECONDS [OUT.json [MIN_CPU]]] (default 3 s; the JSON goes to
 * OUT.json or stdout): {"gt_steady": ns, "gt_burst_short": ns, ...}. The burn loop is user-space
 * arithmetic and reads only CLOCK_MONOTONIC (vDSO), so almost all CPU time is in the named
 * functions. MIN_CPU (seconds): the threads go on past SECONDS until the process has used that
 * much CPU time (at most 10 x SECONDS of wall time), read by the main thread every 20 ms: on a
 * loaded machine 3 s of wall time gave the four threads 0.07 CPU-s (18 samples at 250 Hz), too
 * few for a share to be measured to a point.
 * Built with -fno-omit-frame-pointer or without (the CMake file builds both).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/clock.h"

#define GT_NOINLINE __attribute__((noinline, used))

/* Written by every burning thread: relaxed atomics, so the threads share it without a data
 * race (ThreadSanitizer reported the plain volatile one); on x86-64 and aarch64 the same loads
 * and stores as before. */
static _Atomic uint64_t gt_sink;
static double gt_seconds = 3.0, gt_min_cpu = 0.0;
static _Atomic int gt_stop; /* with MIN_CPU, set by the main thread: the threads end */

/* Whether a thread goes on: until `until` (CLOCK_MONOTONIC), or with MIN_CPU until told. */
static int
gt_running(uint64_t until)
{
    if (gt_min_cpu > 0) {
        return !atomic_load_explicit(&gt_stop, memory_order_relaxed);
    }
    return pp_clock_ns(CLOCK_MONOTONIC) < until;
}

/* Burns CPU for about ns nanoseconds of wall time in user space. */
static void
gt_burn(uint64_t ns)
{
    uint64_t end = pp_clock_ns(CLOCK_MONOTONIC) + ns,
             x = atomic_load_explicit(&gt_sink, memory_order_relaxed);
    int i;

    do {
        for (i = 0; i < 2000; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
        }
    } while (pp_clock_ns(CLOCK_MONOTONIC) < end);
    atomic_store_explicit(&gt_sink, x, memory_order_relaxed);
}

struct gt_thread {
    const char *name;
    void (*fn)(uint64_t until);
    uint64_t cpu_ns;
};

GT_NOINLINE static void
gt_steady(uint64_t until)
{
    while (gt_running(until)) {
        gt_burn(1000000);
    }
}

GT_NOINLINE static void
gt_burst_short(uint64_t until)
{
    while (gt_running(until)) {
        gt_burn(1500000);
        pp_sleep_ns(2500000);
    }
}

GT_NOINLINE static void
gt_burst_long(uint64_t until)
{
    while (gt_running(until)) {
        gt_burn(7000000);
        pp_sleep_ns(1000000);
    }
}

GT_NOINLINE static void
gt_burst_tiny(uint64_t until)
{
    while (gt_running(until)) {
        gt_burn(600000);
        pp_sleep_ns(5400000);
    }
}

static void *
gt_main(void *p)
{
    struct gt_thread *t = p;
    uint64_t c0 = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);

    t->fn(pp_clock_ns(CLOCK_MONOTONIC) + (uint64_t)(gt_seconds * 1e9));
    t->cpu_ns = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    return NULL;
}

int
main(int argc, char **argv)
{
    struct gt_thread threads[] = {
        { "gt_steady", gt_steady, 0 },
        { "gt_burst_short", gt_burst_short, 0 },
        { "gt_burst_long", gt_burst_long, 0 },
        { "gt_burst_tiny", gt_burst_tiny, 0 },
    };
    pthread_t th[4];
    FILE *out = stdout;
    uint64_t t0;
    size_t i;

    if (argc > 1) {
        gt_seconds = atof(argv[1]);
    }
    if (argc > 2 && (out = fopen(argv[2], "w")) == NULL) {
        perror(argv[2]);
        return 1;
    }
    if (argc > 3) {
        gt_min_cpu = atof(argv[3]);
    }
    t0 = pp_clock_ns(CLOCK_MONOTONIC);
    for (i = 0; i < 4; i++) {
        if (pthread_create(&th[i], NULL, gt_main, &threads[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    if (gt_min_cpu > 0) {
        pp_sleep_ns((uint64_t)(gt_seconds * 1e9));
        while ((double)pp_clock_ns(CLOCK_PROCESS_CPUTIME_ID) < gt_min_cpu * 1e9 &&
               (double)(pp_clock_ns(CLOCK_MONOTONIC) - t0) < 10.0 * gt_seconds * 1e9) {
            pp_sleep_ns(20000000);
        }
        atomic_store(&gt_stop, 1);
    }
    for (i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
    }
    fprintf(out, "{");
    for (i = 0; i < 4; i++) {
        fprintf(out, "%s\"%s\": %llu", i ? ", " : "", threads[i].name,
                (unsigned long long)threads[i].cpu_ns);
    }
    fprintf(out, "}\n");
    if (out != stdout) {
        fclose(out);
    }
    return 0;
}
