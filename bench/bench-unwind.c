/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-unwind.c - nanoseconds per frame of DWARF unwinding: the agent's compact CFI
 * step (ag_sig_cfi_step over tables built by ag_modules_refresh) against libgcc's
 * _Unwind_Backtrace, on the same stack of cfi_chain_recurse frames (-O2 -fomit-frame-pointer),
 * in interleaved batches of the same run. Prints the median ns/frame of each and the ratio.
 * Context: a standalone program, run by hand; not part of ctest.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unwind.h>

#include "agent/cfi.h"
#include "agent/symbols-internal.h"
#include "bench/bench.h"
#include "common/clock.h"
#include "tests/fixtures/agent-cfi-chain.h"

#define BENCH_MAX_FRAMES 1024
#define BENCH_REPS       200 /* unwinds per batch */

struct bench_stack {
    uint64_t lo, hi;
};

struct bench_ctx {
    struct bench_stack stack;
    int batches;
    double *ours_ns, *ub_ns; /* per batch, ns per frame */
    int frames_ours, frames_ub;
    uint64_t sink;
};

static int
bench_read(void *ctx, uint64_t addr, uint64_t *out)
{
    const struct bench_stack *s = ctx;

    if (addr < s->lo || addr > s->hi - 8) {
        return -EFAULT;
    }
    memcpy(out, (const void *)(uintptr_t)addr, 8);
    return 0;
}

__attribute__((noinline)) static int
bench_ours(struct bench_ctx *b, uint64_t *pcs)
{
    uint64_t r[3];
    struct ag_cfi_regs regs;
    int n = 0;

    cfi_capture_regs(r);
    regs = (struct ag_cfi_regs){ r[0], r[1], r[2], 0 };
    pcs[n++] = regs.pc;
    while (n < BENCH_MAX_FRAMES && ag_sig_cfi_step(&regs, 1, bench_read, &b->stack) == 0) {
        pcs[n++] = regs.pc;
    }
    return n;
}

struct bench_ub {
    uint64_t *pcs;
    int n;
};

static _Unwind_Reason_Code
bench_ub_frame(struct _Unwind_Context *uc, void *arg)
{
    struct bench_ub *u = arg;
    uint64_t ip = (uint64_t)_Unwind_GetIP(uc);

    if (ip == 0 || u->n == BENCH_MAX_FRAMES) {
        return _URC_END_OF_STACK;
    }
    u->pcs[u->n++] = ip;
    return _URC_NO_REASON;
}

__attribute__((noinline)) static int
bench_libgcc(uint64_t *pcs)
{
    struct bench_ub u = { pcs, 0 };

    _Unwind_Backtrace(bench_ub_frame, &u);
    return u.n;
}

static int
bench_leaf(void *arg)
{
    struct bench_ctx *b = arg;
    static uint64_t pcs[BENCH_MAX_FRAMES];

    for (int i = 0; i < b->batches; i++) {
        uint64_t t0 = pp_clock_ns(CLOCK_MONOTONIC);
        int n = 0;

        for (int k = 0; k < BENCH_REPS; k++) {
            n = bench_ours(b, pcs);
            b->sink += pcs[n - 1];
        }
        b->ours_ns[i] = (double)(pp_clock_ns(CLOCK_MONOTONIC) - t0) / BENCH_REPS / n;
        b->frames_ours = n;
        t0 = pp_clock_ns(CLOCK_MONOTONIC);
        for (int k = 0; k < BENCH_REPS; k++) {
            n = bench_libgcc(pcs);
            b->sink += pcs[n - 1];
        }
        b->ub_ns[i] = (double)(pp_clock_ns(CLOCK_MONOTONIC) - t0) / BENCH_REPS / n;
        b->frames_ub = n;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    int depth = argc > 1 ? atoi(argv[1]) : 64;
    struct bench_ctx b = { 0 };
    pthread_attr_t attr;
    void *addr;
    size_t size;
    double ours, ub;
    int err;

    b.batches = argc > 2 ? atoi(argv[2]) : 51;
    if (depth < 1 || depth > BENCH_MAX_FRAMES - 32 || b.batches < 1) {
        fprintf(stderr, "usage: bench-unwind [depth 1..%d] [batches]\n", BENCH_MAX_FRAMES - 32);
        return 2;
    }
    b.ours_ns = calloc((size_t)b.batches, sizeof(double));
    b.ub_ns = calloc((size_t)b.batches, sizeof(double));
    if (b.ours_ns == NULL || b.ub_ns == NULL) {
        return 1;
    }
    if (pthread_getattr_np(pthread_self(), &attr) != 0 ||
        pthread_attr_getstack(&attr, &addr, &size) != 0) {
        return 1;
    }
    pthread_attr_destroy(&attr);
    b.stack.lo = (uint64_t)(uintptr_t)addr;
    b.stack.hi = b.stack.lo + size;
    err = ag_modules_refresh();
    if (err < 0) {
        fprintf(stderr, "ag_modules_refresh: %s\n", strerror(-err));
        return 1;
    }
    (void)cfi_chain_recurse(depth, bench_leaf, &b);
    ours = bench_median_of(b.ours_ns, b.batches);
    ub = bench_median_of(b.ub_ns, b.batches);
    printf("unwind depth %d: frames ours %d, libgcc %d (%d batches x %d unwinds)\n", depth,
           b.frames_ours, b.frames_ub, b.batches, BENCH_REPS);
    printf("median ns/frame: ours (compact CFI) %.1f, libgcc _Unwind_Backtrace %.1f, "
           "ratio %.1fx\n",
           ours, ub, ub / ours);
    ag_modules_fini();
    free(b.ours_ns);
    free(b.ub_ns);
    return b.frames_ours > 0 && b.frames_ours == b.frames_ub ? 0 : 1;
}
