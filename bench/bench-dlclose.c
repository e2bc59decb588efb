/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-dlclose.c - bench-dlclose LIB N: N rounds of dlopen(LIB) and dlclose of it, each
 * round timed (CLOCK_MONOTONIC); prints the median and the 90th percentile in microseconds.
 * bench/dlclose.sh runs it bare, with the agent preloaded idle and under `pipeprof record`, where
 * the agent rescans its module list before and after each dlclose (host/dl.c).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"

static int
bench_cmp(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;

    return *x < *y ? -1 : *x > *y;
}

int
main(int argc, char **argv)
{
    int n = argc > 2 ? atoi(argv[2]) : 200;
    uint64_t *t;

    if (argc < 2 || n <= 0 || (t = calloc((size_t)n, sizeof(*t))) == NULL) {
        fprintf(stderr, "usage: bench-dlclose LIB N\n");
        return 2;
    }
    for (int i = 0; i < n; i++) {
        uint64_t t0 = pp_clock_ns(CLOCK_MONOTONIC);
        void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);

        if (h == NULL || dlclose(h) != 0) {
            fprintf(stderr, "bench-dlclose: %s\n", dlerror());
            free(t);
            return 1;
        }
        t[i] = pp_clock_ns(CLOCK_MONOTONIC) - t0;
    }
    qsort(t, (size_t)n, sizeof(*t), bench_cmp);
    printf("median_us %.1f p90_us %.1f\n", (double)t[n / 2] / 1000.0,
           (double)t[n * 9 / 10] / 1000.0);
    free(t);
    return 0;
}
