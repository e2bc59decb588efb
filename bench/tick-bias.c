/* SPDX-License-Identifier: MIT */
/*
 * bench/tick-bias.c - where a thread CPU-time timer's samples land, without pipeprof: the
 * kernel's own mechanism under the timer engine (docs/architecture.md, "The tick's bias").
 * A bursty thread (pp-sample-syscalls' I/O-like thread: about 0.6 ms of write(2) calls to
 * /dev/null, 0.4 ms of arithmetic, 3 ms asleep, each jittered from half to one and a half times)
 * measures its CPU per phase, and a timer_create(CLOCK_THREAD_CPUTIME_ID) timer at HZ signals
 * it; the handler notes the phase it interrupted and the CPU since the previous signal. Per
 * round it prints the write phase's share of the CPU (truth), of the signals (count) and of the
 * signals weighted by their CPU (what the timer engine shows), and the share of the signals in
 * the first 200 us of a burst against that span's share of the burst CPU. BUSY busy loops run
 * beside it (the test's "two busy loops"). With "steady" as the fifth argument the thread is
 * pp-sample-syscalls' write/compute thread instead (about 1.1 ms of write(2) calls, 1.1 ms of
 * arithmetic, each jittered from half to one and a half times, never asleep): the tick's bias on
 * a thread that only ever waits for a core (docs/architecture.md, "The tick's bias"). The phases
 * are timed by a task-clock counter read with read(2) ("counter", the default), or by
 * clock_gettime(CLOCK_THREAD_CPUTIME_ID) ("clock" as the sixth argument), whose reads of the
 * thread's own clock are points where the scheduler switches out a thread whose slice is used up:
 * runs that begin and end at the phase boundaries, which the ticks then see unevenly.
 * usage: tick-bias [SECONDS [HZ [ROUNDS [BUSY [bursty|steady [counter|clock]]]]]]
 * (4, 250, 3, 2, bursty, counter)
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

#define TB_MAX 200000

static volatile int tb_phase; /* 1 write, 2 arithmetic, 0 between */
static volatile uint64_t tb_burst_cpu, tb_sink, tb_last;
static volatile int tb_n, tb_stop;
static struct {
    uint8_t phase, early;
    uint64_t cpu;
} tb_sig[TB_MAX];
static int tb_null, tb_task_clock = -1, tb_use_clock;

static uint64_t
tb_now(clockid_t clk)
{
    struct timespec ts;

    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The measured thread's CPU time for its phases: the counter's, or the clock's (see above). */
static uint64_t
tb_cpu(void)
{
    return pp_task_clock_ns(tb_task_clock);
}

static void
tb_handler(int signo, siginfo_t *si, void *uc)
{
    uint64_t cpu = tb_now(CLOCK_THREAD_CPUTIME_ID);
    int i = tb_n;

    (void)signo, (void)si, (void)uc;
    if (i < TB_MAX) {
        tb_sig[i].phase = (uint8_t)tb_phase;
        tb_sig[i].early = cpu - tb_burst_cpu < 200000;
        tb_sig[i].cpu = cpu - tb_last;
        tb_n = i + 1;
    }
    tb_last = cpu;
}

static void *
tb_busy(void *arg)
{
    (void)arg;
    while (!tb_stop) {
        tb_sink++;
    }
    return NULL;
}

struct tb_round {
    double seconds;
    unsigned hz;
    int steady;
    double truth, count, weighted, early_sig, early_cpu;
};

static void *
tb_bursty(void *arg)
{
    struct tb_round *r = arg;
    static const char buf[512];
    uint64_t cpu[3] = { 0, 0, 0 }, early_cpu = 0, until, burst = 0;
    double n[3] = { 0, 0, 0 }, w[3] = { 0, 0, 0 }, early = 0;
    unsigned seed = 7;
    struct sigevent sev;
    struct itimerspec its;
    timer_t timer;

    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &timer) != 0) {
        perror("timer_create");
        exit(1);
    }
    its.it_interval.tv_sec = 0;
    its.it_interval.tv_nsec = 1000000000L / (long)r->hz;
    its.it_value = its.it_interval;
    if (!tb_use_clock && (tb_task_clock = pp_task_clock_open()) < 0) {
        perror("tick-bias: no task-clock counter, the phases are timed by the clock");
    }
    tb_n = 0;
    tb_last = tb_now(CLOCK_THREAD_CPUTIME_ID);
    timer_settime(timer, 0, &its, NULL);
    until = tb_now(CLOCK_MONOTONIC) + (uint64_t)(r->seconds * 1e9);
    while (tb_now(CLOCK_MONOTONIC) < until) {
        uint64_t writes = r->steady ? 5000 : 2700, steps = r->steady ? 1000000 : 360000;
        uint64_t c0 = tb_cpu(), c1, c2;
        uint64_t k = writes / 2 + rand_r(&seed) % writes, x = tb_sink;
        struct timespec nap = { 0, 1500000 + rand_r(&seed) % 3000000 };

        tb_burst_cpu = c0;
        tb_phase = 1;
        for (uint64_t i = 0; i < k; i++) {
            if (write(tb_null, buf, sizeof(buf)) < 0) {
                abort();
            }
        }
        tb_phase = 0;
        c1 = tb_cpu();
        tb_phase = 2;
        for (uint64_t i = steps / 2 + rand_r(&seed) % steps; i > 0; i--) {
            x = x * 6364136223846793005u + 1442695040888963407u;
        }
        tb_sink = x;
        tb_phase = 0;
        c2 = tb_cpu();
        cpu[1] += c1 - c0;
        cpu[2] += c2 - c1;
        early_cpu += c2 - c0 < 200000 ? c2 - c0 : 200000;
        burst += c2 - c0;
        if (!r->steady) {
            nanosleep(&nap, NULL);
        }
    }
    timer_delete(timer);
    if (tb_task_clock >= 0) {
        close(tb_task_clock);
        tb_task_clock = -1;
    }
    for (int i = 0; i < tb_n; i++) {
        n[tb_sig[i].phase]++;
        w[tb_sig[i].phase] += (double)tb_sig[i].cpu;
        early += tb_sig[i].early && tb_sig[i].phase != 0;
    }
    r->truth = 100.0 * (double)cpu[1] / (double)(cpu[1] + cpu[2]);
    r->count = 100.0 * n[1] / (n[1] + n[2]);
    r->weighted = 100.0 * w[1] / (w[1] + w[2]);
    r->early_sig = 100.0 * early / (n[1] + n[2]);
    r->early_cpu = 100.0 * (double)early_cpu / (double)burst;
    printf("  write share: truth %5.1f%%, signals %5.1f%%, CPU-weighted %5.1f%% (%+.1f); signals "
           "in a burst's first 200 us %4.1f%% against %4.1f%% of its CPU; %d signals, %.2f CPU-s\n",
           r->truth, r->count, r->weighted, r->weighted - r->truth, r->early_sig, r->early_cpu,
           tb_n, (double)(cpu[1] + cpu[2]) / 1e9);
    return NULL;
}

static int
tb_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
    struct tb_round r;
    int rounds = argc > 3 ? atoi(argv[3]) : 3, busy = argc > 4 ? atoi(argv[4]) : 2;
    double err[64];
    pthread_t busy_th[16], th;
    struct sigaction sa;

    memset(&r, 0, sizeof(r));
    r.seconds = argc > 1 ? atof(argv[1]) : 4.0;
    r.hz = argc > 2 ? (unsigned)atoi(argv[2]) : 250;
    r.steady = argc > 5 && strcmp(argv[5], "steady") == 0;
    tb_use_clock = argc > 6 && strcmp(argv[6], "clock") == 0;
    if (rounds < 1 || rounds > 64 || busy < 0 || busy > 16 || r.hz == 0 ||
        (argc > 5 && !r.steady && strcmp(argv[5], "bursty") != 0) ||
        (argc > 6 && !tb_use_clock && strcmp(argv[6], "counter") != 0)) {
        fprintf(stderr, "usage: tick-bias [SECONDS [HZ [ROUNDS(1-64) [BUSY(0-16) [bursty|steady "
                        "[counter|clock]]]]]]\n");
        return 2;
    }
    tb_null = open("/dev/null", O_WRONLY);
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = tb_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    for (int i = 0; i < busy; i++) {
        pthread_create(&busy_th[i], NULL, tb_busy, NULL);
    }
    printf("tick-bias: %.1f s rounds at %u Hz, %s thread, %d busy loops beside, phases timed by "
           "the "
           "%s\n",
           r.seconds, r.hz, r.steady ? "steady" : "bursty", busy,
           tb_use_clock ? "clock" : "counter");
    for (int i = 0; i < rounds; i++) {
        pthread_create(&th, NULL, tb_bursty, &r);
        pthread_join(th, NULL);
        err[i] = r.weighted - r.truth;
    }
    tb_stop = 1;
    for (int i = 0; i < busy; i++) {
        pthread_join(busy_th[i], NULL);
    }
    qsort(err, (size_t)rounds, sizeof(err[0]), tb_cmp);
    printf("median error of the write share (CPU-weighted signals - truth): %+.1f points\n",
           err[rounds / 2]);
    return 0;
}
