/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-wall-threads.c - what wall mode costs a host with many threads: THREADS threads
 * asleep (usleep loops, as idle workers), the agent started, one wall session at HZ for SECONDS
 * drained every 50 ms (as the bridge does), then released. Prints the process's fds, the fds
 * it can still open (RLIMIT_NOFILE), its resident memory before, during and after the session
 * (per thread), the wall samples per thread-second and what was counted lost. Run it under
 * `ulimit -n 1024` to see a host near its fd limit.
 * usage: bench-wall-threads [THREADS [HZ [SECONDS]]] (defaults 1000, 100, 5)
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/clock.h"

static _Atomic int bench_stop;
static uint64_t bench_samples, bench_lost;

static void *
bench_sleeper(void *arg)
{
    (void)arg;
    while (!atomic_load(&bench_stop)) {
        usleep(50000);
    }
    return NULL;
}

/* The fds in use: the limit less what can still be opened. */
static unsigned
bench_fds(unsigned openable)
{
    struct rlimit rl;

    return getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > openable
                   ? (unsigned)(rl.rlim_cur - openable)
                   : 0;
}

/* How many more files the process can open now. */
static unsigned
bench_openable(void)
{
    static int fds[1 << 16];
    unsigned n = 0, i;

    while (n < sizeof(fds) / sizeof(fds[0]) && (fds[n] = open("/dev/null", O_RDONLY)) >= 0) {
        n++;
    }
    for (i = 0; i < n; i++) {
        close(fds[i]);
    }
    return n;
}

static double
bench_rss_mb(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f != NULL) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2) {
            resident = 0;
        }
        fclose(f);
    }
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

static int
bench_record(const struct ag_record *rec, void *ctx)
{
    (void)ctx;
    if (rec->kind == AG_RECORD_SAMPLE && rec->u.sample->mode == AG_MODE_WALL) {
        bench_samples++;
    } else if (rec->kind == AG_RECORD_LOST) {
        bench_lost += rec->u.lost;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    unsigned threads = argc > 1 ? (unsigned)atoi(argv[1]) : 1000;
    unsigned hz = argc > 2 ? (unsigned)atoi(argv[2]) : 100;
    unsigned seconds = argc > 3 ? (unsigned)atoi(argv[3]) : 5;
    pthread_t *th = calloc(threads, sizeof(*th));
    pthread_attr_t attr;
    struct ag_config cfg;
    double rss0, rss1, rss2;
    unsigned fds0, fds1, fds2, open0, open1, open2, i, started = 0;
    uint64_t t0, t1;
    struct ag_stats st;

    if (th == NULL) {
        return 2;
    }
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (i = 0; i < threads; i++) {
        if (pthread_create(&th[i], &attr, bench_sleeper, NULL) != 0) {
            break;
        }
        started++;
    }
    ag_config_init(&cfg);
    cfg.max_threads = threads + 64 < 8192 ? threads + 64 : 8192;
    if (ag_start(&cfg) != 0) {
        fprintf(stderr, "bench-wall-threads: ag_start failed\n");
        return 1;
    }
    usleep(300000); /* every thread registered by the scan */
    rss0 = bench_rss_mb();
    open0 = bench_openable();
    fds0 = bench_fds(open0);
    t0 = pp_clock_ns(CLOCK_MONOTONIC);
    if (ag_sampling_acquire(AG_MODE_WALL, hz) != 0) {
        fprintf(stderr, "bench-wall-threads: no wall sampling\n");
        return 1;
    }
    while (pp_clock_ns(CLOCK_MONOTONIC) - t0 < (uint64_t)seconds * 1000000000u) {
        usleep(50000);
        (void)!ag_drain(bench_record, NULL);
    }
    rss1 = bench_rss_mb();
    open1 = bench_openable();
    fds1 = bench_fds(open1);
    (void)!ag_sampling_release(AG_MODE_WALL, hz);
    t1 = pp_clock_ns(CLOCK_MONOTONIC);
    (void)!ag_drain(bench_record, NULL);
    usleep(300000);
    (void)!ag_drain(bench_record, NULL);
    rss2 = bench_rss_mb();
    open2 = bench_openable();
    fds2 = bench_fds(open2);
    ag_stats_get(&st);
    printf("threads %u, wall %u Hz for %.1f s\n", started, hz, (double)(t1 - t0) / 1e9);
    printf("fds       before %5u  during %5u  after %5u\n", fds0, fds1, fds2);
    printf("openable  before %5u  during %5u  after %5u\n", open0, open1, open2);
    printf("rss MB    before %7.1f  during %7.1f  after %7.1f  (during-before %.1f KB/thread, "
           "after-before %.1f KB/thread)\n",
           rss0, rss1, rss2, (rss1 - rss0) * 1024.0 / started, (rss2 - rss0) * 1024.0 / started);
    printf("samples   %.1f per thread-second of %u; lost %.1f per thread-second (stats lost "
           "%llu); accounted %.1f%%\n",
           (double)bench_samples / started / ((double)(t1 - t0) / 1e9), hz,
           (double)bench_lost / started / ((double)(t1 - t0) / 1e9), (unsigned long long)st.lost,
           100.0 * (double)(bench_samples + bench_lost) /
                   ((double)started * hz * (double)(t1 - t0) / 1e9));
    atomic_store(&bench_stop, 1);
    for (i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
    }
    ag_stop();
    free(th);
    return 0;
}
