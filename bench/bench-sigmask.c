/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-sigmask.c - what the agent's pthread_sigmask interposer costs a host that masks
 * signals, 16 frames deep, in pairs of block + unblock:
 *   libc          the real pthread_sigmask (host_sigmask_raw), no interposer;
 *   agent-off     the interposer with the agent stopped (a pass-through);
 *   other-signal  the agent sampling in CPU mode at 100 Hz, the pair masking SIGUSR1 (the
 *                 interposer looks and passes through);
 *   sampling-sig  the same pair masking SIGPROF, the agent's signal: each block walks the
 *                 caller's stack, records it and claims the CPU since the last sample; each
 *                 unblock reads the mask and claims the unseen span (docs/architecture.md, "CPU
 *                 with the sampling signal blocked").
 * Configurations rotate within each round; prints per configuration the median ns per pair and
 * its ratio to libc. usage: bench-sigmask [ROUNDS [PAIRS]] (11, 20000).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "agent/agent.h"
#include "agent/internal.h"
#include "bench/bench.h"

#define BENCH_CONFIGS 4

static const char *const bench_names[BENCH_CONFIGS] = { "libc", "agent-off", "other-signal",
                                                        "sampling-sig" };
static volatile uint64_t bench_sink;

/* pairs block + unblock of sig, depth frames down; returns the ns they took. */
__attribute__((noinline)) static uint64_t
bench_pairs(int depth, int k, int sig, unsigned pairs)
{
    sigset_t set;
    uint64_t t0, r;
    unsigned i;

    if (depth > 0) {
        r = bench_pairs(depth - 1, k, sig, pairs);
        bench_sink += r & 1; /* not a tail call */
        return r;
    }
    sigemptyset(&set);
    sigaddset(&set, sig);
    t0 = bench_now_ns();
    for (i = 0; i < pairs; i++) {
        if (k == 0) {
            host_sigmask_raw(SIG_BLOCK, &set, NULL);
            host_sigmask_raw(SIG_UNBLOCK, &set, NULL);
        } else {
            pthread_sigmask(SIG_BLOCK, &set, NULL);
            pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        }
    }
    return bench_now_ns() - t0;
}

int
main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 11, r, i;
    unsigned pairs = argc > 2 ? (unsigned)atoi(argv[2]) : 20000;
    double ns[BENCH_CONFIGS][64], med[BENCH_CONFIGS];
    struct ag_config cfg;

    if (rounds < 1 || rounds > 64 || pairs == 0) {
        fprintf(stderr, "usage: bench-sigmask [ROUNDS 1..64 [PAIRS]]\n");
        return 2;
    }
    for (r = 0; r < rounds; r++) {
        for (i = 0; i < BENCH_CONFIGS; i++) {
            int k = (i + r) % BENCH_CONFIGS;

            if (k >= 2) {
                ag_config_init(&cfg);
                if (ag_start(&cfg) != 0 || ag_sampling_acquire(AG_MODE_CPU, 100) != 0) {
                    fprintf(stderr, "bench-sigmask: agent did not start\n");
                    return 1;
                }
            }
            ns[k][r] = (double)bench_pairs(16, k, k == 3 ? SIGPROF : SIGUSR1, pairs) / pairs;
            if (k >= 2) {
                if (ag_sampling_release(AG_MODE_CPU, 100) != 0) {
                    fprintf(stderr, "bench-sigmask: release failed\n");
                }
                ag_stop();
            }
        }
    }
    printf("bench-sigmask: %u block+unblock pairs x %d rounds, 16 frames deep; median ns per "
           "pair\n",
           pairs, rounds);
    for (i = 0; i < BENCH_CONFIGS; i++) {
        qsort(ns[i], (size_t)rounds, sizeof(double), bench_cmp_double);
        med[i] = ns[i][rounds / 2];
        printf("  %-13s %8.0f ns  [%.0f .. %.0f]  %.2fx libc\n", bench_names[i], med[i],
               ns[i][rounds / 4], ns[i][rounds - 1 - rounds / 4], med[0] > 0 ? med[i] / med[0] : 0);
    }
    return 0;
}
