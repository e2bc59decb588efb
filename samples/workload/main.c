/* SPDX-License-Identifier: MIT */
/*
 * samples/workload/main.c - a workload with a known split of CPU time, to check a profiler's
 * attribution: thread "worker-a" spends 75% of its CPU in pp_workload_fn_a and 25% in
 * pp_workload_fn_b (each work unit, all of the same cost, goes to fn_a with probability 3/4;
 * the output gives the units actually done), thread
 * "worker-b" spends all of its CPU in pp_workload_fn_c, and the main thread sleeps in
 * pp_workload_wait. Usage: pp-sample-workload [SECONDS [--until FILE] [--cpu CPU_SECONDS]]
 * (default 5 s). SECONDS is the wall time of the run, or its upper bound with either option:
 * --until ends the run as soon as FILE exists (a test that records until enough CPU time was
 * sampled), --cpu once each worker has used CPU_SECONDS of its own CPU time (a recording of the
 * whole run holds the same number of CPU-mode samples however loaded the machine is). Prints the
 * CPU seconds of each worker and the units done. Context: any; must not depend on pipeprof.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PP_WORKLOAD_FN __attribute__((noinline, visibility("default")))

PP_WORKLOAD_FN uint64_t pp_workload_fn_a(uint64_t x);
PP_WORKLOAD_FN uint64_t pp_workload_fn_b(uint64_t x);
PP_WORKLOAD_FN uint64_t pp_workload_fn_c(uint64_t x);
PP_WORKLOAD_FN void pp_workload_wait(double seconds, const char *until);

static _Atomic int pp_workload_stop;
/* --cpu: each worker's CPU time budget (0: none), and how many workers have used theirs. */
static double pp_workload_cpu_budget;
static _Atomic int pp_workload_workers_done;
#define PP_WORKLOAD_WORKERS 2

/* One work unit: the same instruction count in every fn, so units measure CPU share. */
static uint64_t
pp_workload_unit(uint64_t x, uint64_t mul)
{
    int i;

    for (i = 0; i < 200000; i++) {
        x = x * mul + 1442695040888963407u;
        x ^= x >> 29;
    }
    return x;
}

PP_WORKLOAD_FN uint64_t
pp_workload_fn_a(uint64_t x)
{
    return pp_workload_unit(x, 6364136223846793005u);
}

PP_WORKLOAD_FN uint64_t
pp_workload_fn_b(uint64_t x)
{
    return pp_workload_unit(x, 2862933555777941757u);
}

PP_WORKLOAD_FN uint64_t
pp_workload_fn_c(uint64_t x)
{
    return pp_workload_unit(x, 3935559000370003845u);
}

/* Sleeps seconds; with until, or with a CPU budget, ends sooner once that file exists or every
 * worker has used its budget (looked at every 20 ms). */
PP_WORKLOAD_FN void
pp_workload_wait(double seconds, const char *until)
{
    struct timespec ts = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
    struct timespec step = { 0, 20000000 }, left;
    long steps;

    if (until == NULL && pp_workload_cpu_budget <= 0) {
        while (nanosleep(&ts, &ts) != 0) {
        }
        return;
    }
    for (steps = (long)(seconds * 50.0); steps > 0; steps--) {
        if ((until != NULL && access(until, F_OK) == 0) ||
            atomic_load(&pp_workload_workers_done) == PP_WORKLOAD_WORKERS) {
            return;
        }
        left = step;
        while (nanosleep(&left, &left) != 0) {
        }
    }
}

static double
pp_workload_cpu_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Whether this worker is done: asked to stop, or its CPU budget used (then counted, once: the
 * worker leaves its loop). */
static int
pp_workload_worker_done(void)
{
    if (atomic_load(&pp_workload_stop)) {
        return 1;
    }
    if (pp_workload_cpu_budget > 0 && pp_workload_cpu_seconds() >= pp_workload_cpu_budget) {
        atomic_fetch_add(&pp_workload_workers_done, 1);
        return 1;
    }
    return 0;
}

struct pp_workload_result {
    double cpu;
    unsigned long units_a, units_b, units_c;
    uint64_t checksum;
};

static void *
pp_workload_thread_a(void *arg)
{
    struct pp_workload_result *r = arg;
    uint64_t x = 1, pick = 0x9e3779b97f4a7c15u;

    pthread_setname_np(pthread_self(), "worker-a");
    while (!pp_workload_worker_done()) {
        /* Each unit goes to fn_a with probability 3/4, chosen at random: a fixed a-a-a-b
         * pattern could alias with the sampling period and bias the measured split. */
        pick ^= pick << 13;
        pick ^= pick >> 7;
        pick ^= pick << 17;
        if ((pick & 3) != 0) {
            x = pp_workload_fn_a(x);
            r->units_a++;
        } else {
            x = pp_workload_fn_b(x);
            r->units_b++;
        }
    }
    r->cpu = pp_workload_cpu_seconds();
    r->checksum = x;
    return NULL;
}

static void *
pp_workload_thread_b(void *arg)
{
    struct pp_workload_result *r = arg;
    uint64_t x = 2;

    pthread_setname_np(pthread_self(), "worker-b");
    while (!pp_workload_worker_done()) {
        x = pp_workload_fn_c(x);
        r->units_c += 1;
    }
    r->cpu = pp_workload_cpu_seconds();
    r->checksum = x;
    return NULL;
}

int
main(int argc, char **argv)
{
    struct pp_workload_result ra = { 0 }, rb = { 0 };
    double seconds = 5.0;
    const char *until = NULL;
    pthread_t ta, tb;

    if (argc > 1) {
        char *end;
        int i;

        seconds = strtod(argv[1], &end);
        if (*end != '\0' || seconds <= 0 || seconds > 3600) {
            goto usage;
        }
        for (i = 2; i < argc; i += 2) {
            if (i + 1 < argc && strcmp(argv[i], "--until") == 0) {
                until = argv[i + 1];
            } else if (i + 1 < argc && strcmp(argv[i], "--cpu") == 0) {
                pp_workload_cpu_budget = strtod(argv[i + 1], &end);
                if (*end != '\0' || !(pp_workload_cpu_budget > 0)) {
                    goto usage;
                }
            } else {
                goto usage;
            }
        }
    }
    if (pthread_create(&ta, NULL, pp_workload_thread_a, &ra) != 0 ||
        pthread_create(&tb, NULL, pp_workload_thread_b, &rb) != 0) {
        fprintf(stderr, "pp-sample-workload: pthread_create failed\n");
        return 1;
    }
    pp_workload_wait(seconds, until);
    atomic_store(&pp_workload_stop, 1);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    printf("worker-a cpu %.3f s units fn_a %lu fn_b %lu; worker-b cpu %.3f s units fn_c %lu; "
           "checksum %llx\n",
           ra.cpu, ra.units_a, ra.units_b, rb.cpu, rb.units_c,
           (unsigned long long)(ra.checksum ^ rb.checksum));
    return 0;
usage:
    fprintf(stderr, "usage: %s [SECONDS (0..3600] [--until FILE] [--cpu CPU_SECONDS]]\n", argv[0]);
    return 2;
}
