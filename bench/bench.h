/* SPDX-License-Identifier: MIT */
/*
 * bench/bench.h - small helpers the benchmarks share (header only): a monotonic clock in ns and
 * the comparison that sorts doubles for a median.
 */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

#include <stdint.h>
#include <time.h>

static inline uint64_t
bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* For qsort of doubles, ascending. */
static inline int
bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

#endif /* BENCH_BENCH_H */
