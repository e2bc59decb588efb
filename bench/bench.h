/* SPDX-License-Identifier: MIT */
/*
 * bench/bench.h - small helpers the benchmarks share (header only): a monotonic clock in ns and
 * the comparison that sorts doubles for a median.
 */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

#include <stdint.h>
#include <time.h>

#include "common/clock.h"

static inline uint64_t
bench_now_ns(void)
{
    return pp_clock_ns(CLOCK_MONOTONIC);
}

/* For qsort of doubles, ascending. */
static inline int
bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

#endif /* BENCH_BENCH_H */
