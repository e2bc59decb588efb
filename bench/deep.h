/* SPDX-License-Identifier: MIT */
/*
 * bench/deep.h - the deep-recursion workload of the CPU-engine benchmarks (bench-engine.c,
 * bench-perfring.c), header only: a burn `depth` frames down, so that every sample unwinds as
 * many frames, each bench supplying the unit of work.
 */
#ifndef BENCH_DEEP_H
#define BENCH_DEEP_H

#include <stdint.h>
#include <time.h>

#include "common/clock.h"

/* Runs unit(0) .. unit(units - 1) depth frames below the caller (no frame a tail call: each adds
 * to *sink); returns the thread CPU ns the units took. */
__attribute__((noinline, unused)) static uint64_t
bench_deep_run(int depth, unsigned units, void (*unit)(unsigned k), volatile uint64_t *sink)
{
    uint64_t t0, r;
    unsigned k;

    if (depth > 0) {
        r = bench_deep_run(depth - 1, units, unit, sink);
        *sink += r & 1; /* not a tail call */
        return r;
    }
    t0 = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (k = 0; k < units; k++) {
        unit(k);
    }
    return pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
}

#endif
