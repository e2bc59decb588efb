/* SPDX-License-Identifier: MIT */
/*
 * bench/bench.h - small helpers the benchmarks share (header only): a monotonic clock in ns, the
 * comparison that sorts doubles and the median of n doubles, and the test of a name in a
 * NAME,NAME,... list.
 */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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

/* The median of v[0..n) (of an even n the mean of the middle two), n > 0; sorts v. */
static inline double
bench_median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(v[0]), bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Whether name is a whole item of the comma-separated list (perf-empty is not agent-perf's tail).
 */
static inline int
bench_list_has(const char *list, const char *name)
{
    const char *p = strstr(list, name);
    size_t len = strlen(name);

    while (p != NULL && ((p != list && p[-1] != ',') || (p[len] != '\0' && p[len] != ','))) {
        p = strstr(p + 1, name);
    }
    return p != NULL;
}

#endif /* BENCH_BENCH_H */
