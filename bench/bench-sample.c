/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-sample.c - what one sample costs. Sends the sampling signal to the calling thread
 * at a known stack depth and times the round trip: (1) with an empty SA_SIGINFO handler, (2)
 * with the agent's handler (ring slot, clocks, guarded unwind). Then times ag_sig_unwind() alone
 * at depths 4 and 36 for the per-frame cost. Numbers are per signal / per frame, median of 5
 * batches. Context: a standalone program; not part of ctest.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/internal.h"

static unsigned bench_iters = 20000;

static uint64_t
bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
bench_empty_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
}

static void
bench_send(int signo, int magic)
{
    siginfo_t si;

    memset(&si, 0, sizeof(si));
    si.si_signo = signo;
    si.si_code = SI_QUEUE;
    si.si_pid = getpid();
    si.si_uid = getuid();
    si.si_value.sival_int = magic ? AG_WALL_SIVAL : 0;
    syscall(SYS_rt_tgsigqueueinfo, (long)getpid(), (long)syscall(SYS_gettid), (long)signo, &si);
}

static int
bench_drop(const struct ag_record *rec, void *ctx)
{
    (void)rec;
    (void)ctx;
    return 0;
}

static void
bench_drain(void)
{
    if (ag_drain(bench_drop, NULL) < 0) {
        fprintf(stderr, "bench-sample: ag_drain failed\n");
        exit(1);
    }
}

static int
bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* Median over 5 batches of ns per signal. */
static double
bench_signals(int magic)
{
    double r[5];
    int b;

    for (b = 0; b < 5; b++) {
        uint64_t t0 = bench_now();
        unsigned i;

        for (i = 0; i < bench_iters; i++) {
            bench_send(SIGPROF, magic);
            if (magic && (i & 1023) == 1023) {
                bench_drain(); /* keep the ring from filling */
            }
        }
        r[b] = (double)(bench_now() - t0) / bench_iters;
        if (magic) {
            bench_drain();
        }
    }
    qsort(r, 5, sizeof(r[0]), bench_cmp);
    return r[2];
}

static double
bench_unwind(void)
{
    uint64_t frames[AG_MAX_FRAMES];
    struct ag_unwind_result res = { 0 };
    struct ag_unwind_ctx c;
    uint64_t fp = (uint64_t)(uintptr_t)__builtin_frame_address(0);
    uint64_t sp = fp;
    double r[5];
    int b;

    pthread_attr_t attr;
    void *lo = NULL;
    size_t size = 0;

    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        (void)pthread_attr_getstack(&attr, &lo, &size);
        pthread_attr_destroy(&attr);
    }
    ag_sig_unwind_ctx_init(&c, sp, (uint64_t)(uintptr_t)lo, (uint64_t)(uintptr_t)lo + size);
    for (b = 0; b < 5; b++) {
        uint64_t t0 = bench_now();
        unsigned i;

        for (i = 0; i < bench_iters * 10; i++) {
            ag_sig_unwind(&c, (uint64_t)(uintptr_t)bench_unwind, sp, fp, 1, frames, 128, &res);
        }
        r[b] = (double)(bench_now() - t0) / (bench_iters * 10);
    }
    qsort(r, 5, sizeof(r[0]), bench_cmp);
    printf("  ag_sig_unwind of %u frames (end %u, last unwinder %u): %.1f ns\n", res.depth, res.end,
           res.unwinder, r[2]);
    return r[2];
}

struct bench_out {
    double empty, agent, unwind_shallow, unwind_deep;
    unsigned depth;
};

/* Recurses to depth, then measures: every measurement runs under the same frames. */
__attribute__((noinline)) static void
bench_at_depth(int depth, struct bench_out *o, int which)
{
    if (depth > 0) {
        bench_at_depth(depth - 1, o, which);
        __asm__ volatile("" ::: "memory");
        return;
    }
    switch (which) {
    case 0:
        o->empty = bench_signals(0);
        break;
    case 1:
        o->agent = bench_signals(1);
        break;
    case 2:
        o->unwind_shallow = bench_unwind();
        break;
    default:
        o->unwind_deep = bench_unwind();
        break;
    }
}

int
main(int argc, char **argv)
{
    struct sigaction sa;
    struct ag_config cfg;
    struct bench_out o = { 0 };
    struct ag_stats st;

    if (argc > 1) {
        bench_iters = (unsigned)strtoul(argv[1], NULL, 10);
        if (bench_iters == 0) {
            bench_iters = 20000;
        }
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = bench_empty_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    bench_at_depth(32, &o, 0);
    sa.sa_handler = SIG_DFL;
    sa.sa_flags = 0;
    sigaction(SIGPROF, &sa, NULL);

    ag_config_init(&cfg);
    cfg.ring_slots = 4096;
    if (ag_start(&cfg) != 0 || ag_sampling_acquire(AG_MODE_WALL, 1) != 0) {
        fprintf(stderr, "bench-sample: agent did not start\n");
        return 1;
    }
    bench_at_depth(32, &o, 1);
    ag_stats_get(&st);
    printf("bench-sample: %u signals per batch, median of 5 batches, stack 32+ frames deep\n",
           bench_iters);
    printf("  empty SA_SIGINFO handler round trip: %.0f ns/signal\n", o.empty);
    printf("  agent handler (sample + unwind)    : %.0f ns/signal (+%.0f ns); %llu samples, "
           "%llu lost\n",
           o.agent, o.agent - o.empty, (unsigned long long)st.samples, (unsigned long long)st.lost);
    bench_at_depth(2, &o, 2);
    bench_at_depth(34, &o, 3);
    printf("  frame-pointer walk: %.1f ns/frame (difference of the two walks / 32 frames)\n",
           (o.unwind_deep - o.unwind_shallow) / 32.0);
    ag_stop();
    return 0;
}
