/* SPDX-License-Identifier: MIT */
/*
 * bench/tick-shadow.c - a thread that runs across every scheduler tick of its CPU, so that the
 * tick finds it running and never the threads it preempts: their CPU-time timers
 * (timer_create(CLOCK_THREAD_CPUTIME_ID), the timer engine's) then never expire, however much
 * CPU they burn, since the kernel looks at a thread's CPU timers only at a tick that finds that
 * thread running (docs/architecture.md, "CPU engines"). It sleeps until 0.7 ms before the next
 * tick (the ticks are CLOCK_MONOTONIC_COARSE's steps), spins until the step and 150 us after.
 *
 * usage: tick-shadow SECONDS [ON_MS OFF_MS]
 *   shadows the ticks for SECONDS, or in windows of ON_MS every ON_MS + OFF_MS. Pin it to the
 *   CPU of the threads to starve and give it a real-time priority, e.g.
 *   taskset -c 1 chrt -f 1 build/bench/tick-shadow 60 200 300 &
 *   taskset -c 1 build/tests/test-agent-sampling
 * a_late_tick_sample_gives_what_the_tick_missed_to_not_sampled usage: tick-shadow measure [SECONDS]
 *   (root or CAP_SYS_NICE) on the CPU it starts on: a busy thread under a bare 100 Hz CPU-time
 *   timer for SECONDS (3) with the shadow at SCHED_FIFO beside it, then SECONDS without; prints
 *   the busy thread's CPU and signals in each.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

static volatile int ts_stop, ts_signals;
static volatile pid_t ts_tid;
static volatile uint64_t ts_sink;

/* Spins until CLOCK_MONOTONIC_COARSE steps (a tick) and returns CLOCK_MONOTONIC then. */
static uint64_t
ts_wait_tick(void)
{
    uint64_t c0 = pp_clock_ns(CLOCK_MONOTONIC_COARSE);

    while (pp_clock_ns(CLOCK_MONOTONIC_COARSE) == c0) {
    }
    return pp_clock_ns(CLOCK_MONOTONIC);
}

static void
ts_sleep_until(uint64_t when)
{
    struct timespec ts = { (time_t)(when / 1000000000u), (long)(when % 1000000000u) };

    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

/* Shadows the ticks until end (CLOCK_MONOTONIC), in windows of on_ms every on_ms + off_ms when
 * on_ms is not 0. */
static void
ts_shadow(uint64_t end, uint64_t on_ms, uint64_t off_ms)
{
    struct timespec res;
    uint64_t tick, t, first;

    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    tick = (uint64_t)res.tv_nsec;
    t = first = ts_wait_tick();
    while (t < end && !ts_stop) {
        if (on_ms != 0 && ((t - first) / 1000000u) % (on_ms + off_ms) >= on_ms) {
            t += tick; /* off: the ticks find whoever runs */
            ts_sleep_until(t);
            continue;
        }
        ts_sleep_until(t + tick - 700000u);
        t = ts_wait_tick();
        while (pp_clock_ns(CLOCK_MONOTONIC) < t + 150000u) {
        }
    }
}

static void
ts_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    ts_signals++;
}

static void *
ts_busy(void *arg)
{
    uint64_t x = 1;

    (void)arg;
    ts_tid = (pid_t)syscall(SYS_gettid);
    while (!ts_stop) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        ts_sink = x;
    }
    return NULL;
}

static void *
ts_shadow_main(void *arg)
{
    ts_shadow(*(uint64_t *)arg, 0, 0);
    return NULL;
}

/* One round: the busy thread on cpu under a 100 Hz CPU-time timer for secs, the shadow beside
 * it if shadowed. Returns 0, or -1 where the shadow cannot get SCHED_FIFO. */
static int
ts_round(int cpu, unsigned secs, int shadowed)
{
    struct sched_param sp = { .sched_priority = 1 };
    struct itimerspec its = { { 0, 10000000 }, { 0, 10000000 } };
    struct sigevent sev;
    pthread_attr_t attr;
    pthread_t busy, shadow;
    cpu_set_t set;
    timer_t timer;
    uint64_t end, cpu_ns;
    struct timespec ts;

    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    ts_stop = 0;
    ts_signals = 0;
    ts_tid = 0;
    pthread_create(&busy, NULL, ts_busy, NULL);
    pthread_setaffinity_np(busy, sizeof(set), &set);
    while (ts_tid == 0) {
        pp_sleep_ns(100000u);
    }
    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev._sigev_un._tid = ts_tid;
    timer_create((clockid_t)((~(unsigned)ts_tid << 3) | 6u), &sev, &timer);
    timer_settime(timer, 0, &its, NULL);
    end = pp_clock_ns(CLOCK_MONOTONIC) + (uint64_t)secs * 1000000000u;
    if (shadowed) {
        pthread_attr_init(&attr);
        pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
        pthread_attr_setschedparam(&attr, &sp);
        pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
        if (pthread_create(&shadow, &attr, ts_shadow_main, &end) != 0) {
            ts_stop = 1;
            pthread_join(busy, NULL);
            timer_delete(timer);
            return -1;
        }
        pthread_join(shadow, NULL);
    } else {
        ts_sleep_until(end);
    }
    clock_gettime((clockid_t)((~(unsigned)ts_tid << 3) | 6u), &ts);
    cpu_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    timer_delete(timer);
    ts_stop = 1;
    pthread_join(busy, NULL);
    printf("%s: busy thread %.0f ms of CPU in %u s, %d signals of its 100 Hz CPU-time timer "
           "(%.0f intervals)\n",
           shadowed ? "ticks shadowed" : "no shadow", (double)cpu_ns / 1e6, secs, ts_signals,
           (double)cpu_ns / 1e7);
    return 0;
}

int
main(int argc, char **argv)
{
    struct sigaction sa;
    int cpu = sched_getcpu();

    if (argc >= 2 && strcmp(argv[1], "measure") == 0) {
        unsigned secs = argc >= 3 ? (unsigned)atoi(argv[2]) : 3u;

        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = ts_handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigaction(SIGPROF, &sa, NULL);
        if (ts_round(cpu, secs, 1) != 0) {
            fprintf(stderr, "tick-shadow: no SCHED_FIFO here (root or CAP_SYS_NICE)\n");
            return 77;
        }
        return ts_round(cpu, secs, 0) == 0 ? 0 : 1;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: tick-shadow SECONDS [ON_MS OFF_MS] | tick-shadow measure [S]\n");
        return 2;
    }
    ts_shadow(pp_clock_ns(CLOCK_MONOTONIC) + (uint64_t)(atof(argv[1]) * 1e9),
              argc >= 4 ? (uint64_t)atol(argv[2]) : 0u, argc >= 4 ? (uint64_t)atol(argv[3]) : 0u);
    return 0;
}
