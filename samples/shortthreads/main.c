/* SPDX-License-Identifier: MIT */
/*
 * samples/shortthreads/main.c - a workload of short-lived threads that measures itself: one
 * thread always busy in st_steady, and one after another (a 3 ms pause between) threads that each
 * burn a known CPU amount in st_short and exit: 0.275 to 2.225 sampling intervals in steps of
 * 0.05, so that most of a thread's CPU comes after its last sample or with none before it (its
 * final sample). A third thread, st_masked, burns 3.6 intervals at a time with every signal
 * blocked by a raw system call (as a runtime's critical section does; no interposer sees it), so
 * that each of its samples stands for several intervals, then sleeps 2 ms. At the end, each
 * function's CPU time by the threads' own clocks
 * (CLOCK_THREAD_CPUTIME_ID). A profile is right when each function's share of the samples equals
 * its share of that CPU time: rounding each thread's CPU to whole intervals is even over the
 * ladder (a uniform spread of a whole number of intervals rounds to its mean).
 *
 * usage: pp-sample-shortthreads SECONDS INTERVAL_MS [OUT.json [SERIES]] (the JSON goes to
 * OUT.json or stdout): {"st_steady": ns, "st_short": ns, "st_masked": ns}; the number of short
 * threads goes to stderr. SERIES gets the CPU so far as each short thread ends, "REALTIME_NS
 * STEADY_NS SHORT_NS MASKED_NS" per line, so that a recording of part of the run can be held to
 * the CPU burned meanwhile.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

#define ST_NOINLINE __attribute__((noinline, used))

/* Written by every burning thread: relaxed atomics, so the threads share it without a data
 * race (ThreadSanitizer reported the plain volatile one); on x86-64 and aarch64 the same loads
 * and stores as before. */
static _Atomic uint64_t st_sink;
static _Atomic uint64_t st_short_ns, st_steady_ns, st_masked_ns;

/* Burns ns nanoseconds of this thread's CPU in user space (its clock read every ~20 us). */
static void
st_burn(uint64_t ns)
{
    uint64_t end = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) + ns,
             x = atomic_load_explicit(&st_sink, memory_order_relaxed);
    int i;

    do {
        for (i = 0; i < 20000; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
        }
    } while (pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) < end);
    atomic_store_explicit(&st_sink, x, memory_order_relaxed);
}

/* The busy thread's start routine: burns until `*arg` (CLOCK_MONOTONIC), then stores its CPU time
 * there. */
ST_NOINLINE static void *
st_steady(void *arg)
{
    uint64_t *io = arg, c0 = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);

    while (pp_clock_ns(CLOCK_MONOTONIC) < *io) {
        st_burn(1000000);
        atomic_store(&st_steady_ns, pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0);
    }
    *io = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    return NULL;
}

/* The masked thread's start routine: until `*arg` (CLOCK_MONOTONIC), 3.6 intervals (arg[1] ns)
 * of CPU with every signal blocked, then 2 ms asleep; its CPU time so far in st_masked_ns. */
ST_NOINLINE static void *
st_masked(void *arg)
{
    const uint64_t *a = arg;
    uint64_t c0 = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    sigset_t all, old;

    sigfillset(&all);
    while (pp_clock_ns(CLOCK_MONOTONIC) < a[0]) {
        syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, 8);
        st_burn(a[1] * 36 / 10);
        syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
        atomic_store(&st_masked_ns, pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0);
        pp_sleep_ns(2000000);
    }
    return NULL;
}

/* A short thread's start routine: burns `*arg` ns of CPU and adds what it burned to st_short_ns.
 * (A thread that had no sample before its final one has its start routine for a stack.) */
ST_NOINLINE static void *
st_short(void *arg)
{
    uint64_t c0 = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);

    st_burn(*(const uint64_t *)arg);
    atomic_fetch_add(&st_short_ns, pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0);
    return NULL;
}

int
main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 3.0, interval_ms = argc > 2 ? atof(argv[2]) : 10.0;
    uint64_t interval = (uint64_t)(interval_ms * 1e6), steady, burn, masked[2];
    uint64_t end = pp_clock_ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9);
    FILE *out = stdout, *series = NULL;
    pthread_t steady_th, masked_th, th;
    unsigned n = 0;

    if (argc > 3 && (out = fopen(argv[3], "w")) == NULL) {
        perror(argv[3]);
        return 1;
    }
    if (argc > 4 && (series = fopen(argv[4], "w")) == NULL) {
        perror(argv[4]);
        return 1;
    }
    steady = end;
    masked[0] = end;
    masked[1] = interval;
    if (pthread_create(&steady_th, NULL, st_steady, &steady) != 0 ||
        pthread_create(&masked_th, NULL, st_masked, masked) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
    }
    while (pp_clock_ns(CLOCK_MONOTONIC) < end) {
        burn = interval * (275 + 50 * (n % 40)) / 1000;
        if (pthread_create(&th, NULL, st_short, &burn) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
        pthread_join(th, NULL);
        n++;
        if (series != NULL) {
            fprintf(series, "%llu %llu %llu %llu\n",
                    (unsigned long long)pp_clock_ns(CLOCK_REALTIME),
                    (unsigned long long)atomic_load(&st_steady_ns),
                    (unsigned long long)atomic_load(&st_short_ns),
                    (unsigned long long)atomic_load(&st_masked_ns));
        }
        pp_sleep_ns(3000000);
    }
    pthread_join(steady_th, NULL);
    pthread_join(masked_th, NULL);
    fprintf(stderr, "pp-sample-shortthreads: %u short threads\n", n);
    fprintf(out, "{\"st_steady\": %llu, \"st_short\": %llu, \"st_masked\": %llu}\n",
            (unsigned long long)steady, (unsigned long long)atomic_load(&st_short_ns),
            (unsigned long long)atomic_load(&st_masked_ns));
    if (out != stdout) {
        fclose(out);
    }
    if (series != NULL) {
        fclose(series);
    }
    return 0;
}
