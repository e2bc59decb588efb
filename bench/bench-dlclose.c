/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-dlclose.c - bench-dlclose LIB N: N rounds of dlopen(LIB) and dlclose of it, each
 * round timed (CLOCK_MONOTONIC); prints the median and the 90th percentile in microseconds.
 * bench/dlclose.sh runs it bare, with the agent preloaded idle and under `pipeprof record`, where
 * the agent rescans its module list before and after each dlclose (host/dl.c).
 * bench-dlclose -w N: N rounds of 1000 dl_iterate_phdr calls that stop at the first object (an
 * unwinder's kind of lookup), each round timed; prints the per-call median and 90th percentile in
 * nanoseconds (the dl_iterate_phdr interposer's cost, host/dl.c; bench/dlclose.sh with WALK=1).
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

static int
bench_cmp(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;

    return *x < *y ? -1 : *x > *y;
}

static int
bench_first_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(uintptr_t *)arg += info->dlpi_addr;
    return 1;
}

int
main(int argc, char **argv)
{
    int n = argc > 2 ? atoi(argv[2]) : 200, walk = argc > 1 && strcmp(argv[1], "-w") == 0;
    uintptr_t sink = 0;
    uint64_t *t;

    if (argc < 2 || n <= 0 || (t = calloc((size_t)n, sizeof(*t))) == NULL) {
        fprintf(stderr, "usage: bench-dlclose LIB N | -w N\n");
        return 2;
    }
    for (int i = 0; walk && i < n; i++) {
        uint64_t t0 = pp_clock_ns(CLOCK_MONOTONIC);

        for (int k = 0; k < 1000; k++) {
            dl_iterate_phdr(bench_first_object, &sink);
        }
        t[i] = pp_clock_ns(CLOCK_MONOTONIC) - t0;
    }
    if (walk) {
        qsort(t, (size_t)n, sizeof(*t), bench_cmp);
        printf("median_ns %.1f p90_ns %.1f (%d)\n", (double)t[n / 2] / 1000.0,
               (double)t[n * 9 / 10] / 1000.0, (int)(sink & 1));
        free(t);
        return 0;
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
