/* SPDX-License-Identifier: MIT */
/*
 * samples/threads/main.c - a host with many threads that each run a little: N threads (default
 * 250) that all start, then for SECONDS (default 2) burn about 0.2 ms of CPU and sleep 40 ms in
 * turn, then wait for each other before they exit, so that all N live at once for the whole run
 * (a profiler's per-thread resources, such as perf-ring's locked rings, are held by all of them
 * together). Prints "threads N cpu_ms MS" at the end. Usage: pp-sample-threads [N [SECONDS]].
 * Context: any; it must not depend on pipeprof.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_barrier_t pp_threads_start, pp_threads_end;
static double pp_threads_secs = 2.0;
static volatile unsigned long pp_threads_sink;

static double
pp_threads_clock(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *
pp_threads_main(void *arg)
{
    struct timespec nap = { 0, 40 * 1000000 };
    double *cpu = arg, end;
    unsigned long x = 1;

    pthread_barrier_wait(&pp_threads_start);
    end = pp_threads_clock(CLOCK_MONOTONIC) + pp_threads_secs;
    while (pp_threads_clock(CLOCK_MONOTONIC) < end) {
        double until = pp_threads_clock(CLOCK_THREAD_CPUTIME_ID) + 0.0002;

        while (pp_threads_clock(CLOCK_THREAD_CPUTIME_ID) < until) {
            x = x * 6364136223846793005ul + 1442695040888963407ul;
        }
        nanosleep(&nap, NULL);
    }
    pp_threads_sink += x;
    *cpu = pp_threads_clock(CLOCK_THREAD_CPUTIME_ID);
    pthread_barrier_wait(&pp_threads_end);
    return NULL;
}

int
main(int argc, char **argv)
{
    unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 250u, i, made = 0;
    pthread_t *th;
    double *cpu, total = 0;

    if (argc > 2) {
        pp_threads_secs = strtod(argv[2], NULL);
    }
    th = calloc(n ? n : 1, sizeof(*th));
    cpu = calloc(n ? n : 1, sizeof(*cpu));
    if (n == 0 || th == NULL || cpu == NULL || pthread_barrier_init(&pp_threads_start, NULL, n) ||
        pthread_barrier_init(&pp_threads_end, NULL, n)) {
        fprintf(stderr, "usage: pp-sample-threads [N>0 [SECONDS]]\n");
        return 2;
    }
    for (i = 0; i < n; i++) {
        if (pthread_create(&th[i], NULL, pp_threads_main, &cpu[i]) != 0) {
            fprintf(stderr, "pthread_create %u failed\n", i);
            return 1; /* (the exit ends the threads waiting at the barrier) */
        }
        made++;
    }
    for (i = 0; i < made; i++) {
        pthread_join(th[i], NULL);
        total += cpu[i];
    }
    printf("threads %u cpu_ms %.1f\n", made, total * 1e3);
    free(th);
    free(cpu);
    return 0;
}
