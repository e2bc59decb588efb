/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-entry.c - what the unwinder's entry step (agent/sig-unwind.c,
 * ag_sig_unwind_entry_step: x86-64, a leaf without a CFI row) costs a walk, in interleaved
 * batches of the same run. Stacks of 8 frame records in a buffer the walk reads directly, code
 * without CFI (tests/fixtures/agent-entry-stubs.c), the module snapshot of ag_modules_refresh:
 *   mid     the leaf past its prologue, a non-code word at sp (a Go function's body, the common
 *           case): the step reads that word, finds it in no module and gives up;
 *   entry   the leaf at its push %rbp, a return address at sp: the step reads the code too (one
 *           process_vm_readv) and takes the return address;
 * each with the step (remote reads allowed) and without it (remote reads off: the step is not
 * tried, and every read of these walks is a direct one either way);
 *   remote mid  the mid walk's first step (its leaf's caller; two reads) on a stack outside the
 *           thread's known bounds (a goroutine's: every read a process_vm_readv), through a row
 *           cache, where the code at pc, read once, is
 *           marked as no entry and not read again, and without a cache (read at every walk):
 *           the difference is the read the mark saves;
 *   readv   one process_vm_readv of 8 bytes.
 * Prints per configuration the median ns per walk (per call for readv) and the medians of the
 * per-batch differences. usage: bench-entry [BATCHES [REPS]] (31, 2000; the remote walks REPS/10).
 * Context: a standalone program, run by hand; not part of ctest. x86-64 only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/internal.h"
#include "agent/symbols-internal.h"
#include "bench/bench.h"
#include "tests/fixtures/agent-entry-stubs.h"

#if defined(__x86_64__)
#define BENCH_DEPTH 8

static _Alignas(16) uint64_t bench_stack[8 + 4 * BENCH_DEPTH + 8];
static uint64_t bench_sink;

/* Records at bench_stack[8 + 4k]: {next record, a return address into code without CFI}. */
static void
bench_stack_build(int at_entry)
{
    uint64_t ra = (uint64_t)(uintptr_t)entry_caller + 2;
    int k;

    memset(bench_stack, 0, sizeof(bench_stack));
    for (k = 0; k < BENCH_DEPTH; k++) {
        bench_stack[8 + 4 * k] =
                k + 1 < BENCH_DEPTH ? (uint64_t)(uintptr_t)&bench_stack[8 + 4 * (k + 1)] : 0;
        bench_stack[8 + 4 * k + 1] = ra;
    }
    /* At the entry the word at sp is the return address; past the prologue the leaf's record
     * {caller's rbp, return address} is at sp and rbp points to it. */
    bench_stack[0] = at_entry ? ra : (uint64_t)(uintptr_t)&bench_stack[8];
    bench_stack[1] = ra;
}

static struct ag_cfi_cache bench_cache;

/* ns per walk over reps walks. remote: the stack outside the window (every read remote),
 * through bench_cache when cached. */
static double
bench_walks(int at_entry, int step, int remote, int cached, int reps)
{
    uint64_t frames[32], t0, sp = (uint64_t)(uintptr_t)bench_stack;
    uint64_t pc = (uint64_t)(uintptr_t)entry_push + (at_entry ? 0 : 4);
    uint64_t fp = at_entry ? (uint64_t)(uintptr_t)&bench_stack[8] : sp;
    struct ag_unwind_result res;
    struct ag_unwind_ctx c;
    int i;

    bench_stack_build(at_entry);
    if (remote) {
        ag_sig_unwind_ctx_init(&c, sp, 0, 0);
    } else {
        ag_sig_unwind_ctx_init(&c, sp, sp,
                               (uint64_t)(uintptr_t)(bench_stack + 8 + 4 * BENCH_DEPTH));
    }
    c.remote_ok = step;
    c.pid = getpid();
    c.cache = cached ? &bench_cache : NULL;
    t0 = bench_now_ns();
    for (i = 0; i < reps; i++) {
        /* A remote walk stops after the leaf's step (two reads): the read the step adds is not
         * lost among those of eight frames. */
        ag_sig_unwind(&c, pc, sp, fp, 0, frames, remote ? 2 : 32, &res);
        bench_sink += res.depth;
    }
    return (double)(bench_now_ns() - t0) / reps;
}

static double
bench_readv(int reps)
{
    uint64_t word = 7, got = 0, t0;
    struct iovec l = { &got, 8 }, r = { &word, 8 };
    int i;

    t0 = bench_now_ns();
    for (i = 0; i < reps; i++) {
        bench_sink += (uint64_t)syscall(SYS_process_vm_readv, (long)getpid(), &l, 1L, &r, 1L, 0L);
    }
    return (double)(bench_now_ns() - t0) / reps;
}

int
main(int argc, char **argv)
{
    int batches = argc > 1 ? atoi(argv[1]) : 31, reps = argc > 2 ? atoi(argv[2]) : 2000;
    static const char *names[7] = { "mid, with the step",   "mid, without",
                                    "entry, with the step", "entry, without",
                                    "remote mid, cached",   "remote mid, no cache",
                                    "readv (8 bytes)" };
    double *v[7], *d[3];
    uint64_t frames[32];
    struct ag_unwind_result res;
    struct ag_unwind_ctx c;
    int b, k;

    if (batches < 1 || reps < 10 || ag_modules_refresh() < 0) {
        fprintf(stderr, "usage: bench-entry [BATCHES [REPS >= 10]] (and a module list)\n");
        return 2;
    }
    /* The walks must be the ones described: the entry one a frame longer with the step. */
    bench_stack_build(1);
    ag_sig_unwind_ctx_init(&c, (uint64_t)(uintptr_t)bench_stack, (uint64_t)(uintptr_t)bench_stack,
                           (uint64_t)(uintptr_t)(bench_stack + 8 + 4 * BENCH_DEPTH));
    c.pid = getpid();
    c.remote_ok = 1;
    ag_sig_unwind(&c, (uint64_t)(uintptr_t)entry_push, (uint64_t)(uintptr_t)bench_stack,
                  (uint64_t)(uintptr_t)&bench_stack[8], 0, frames, 32, &res);
    if (res.depth != BENCH_DEPTH + 2) {
        fprintf(stderr, "bench-entry: the entry walk has %u frames, not %d (no remote reads?)\n",
                res.depth, BENCH_DEPTH + 2);
        return 1;
    }
    for (k = 0; k < 7; k++) {
        v[k] = calloc((size_t)batches, sizeof(double));
    }
    for (k = 0; k < 3; k++) {
        d[k] = calloc((size_t)batches, sizeof(double));
    }
    for (b = 0; b < batches; b++) {
        for (k = 0; k < 7; k++) {
            int which = (k + b) % 7; /* rotating order */

            if (which == 6) {
                v[which][b] = bench_readv(reps);
            } else if (which >= 4) {
                v[which][b] = bench_walks(0, 1, 1, which == 4, reps / 10);
            } else {
                v[which][b] = bench_walks(which >= 2, which % 2 == 0, 0, 0, reps);
            }
        }
        d[0][b] = v[0][b] - v[1][b];
        d[1][b] = v[2][b] - v[3][b];
        d[2][b] = v[5][b] - v[4][b];
    }
    for (k = 0; k < 7; k++) {
        printf("%-22s %9.1f ns\n", names[k], bench_median_of(v[k], batches));
    }
    printf("medians of the per-batch differences: the step at mid %.1f ns, at entry %.1f ns; "
           "the mark saves %.1f ns a remote step (%d batches of %d walks, %d frames)\n",
           bench_median_of(d[0], batches), bench_median_of(d[1], batches),
           bench_median_of(d[2], batches), batches, reps, BENCH_DEPTH + 1);
    return bench_sink == 0 ? 1 : 0;
}
#else
int
main(void)
{
    printf("bench-entry: the entry step is x86-64's (aarch64 takes x30)\n");
    return 0;
}
#endif
