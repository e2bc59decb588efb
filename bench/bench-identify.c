/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-identify.c - what identifying the loaded modules' files costs the consumer thread
 * (ag_modules_identify: one read of /proc/self/maps and a stat of each module's path, at the
 * first announcement of new modules), against the module scan that comes before it in the same
 * drain (ag_modules_refresh of a fresh list: dl_iterate_phdr, build-ids, CFI tables), paired in
 * each round: the list is dropped (ag_modules_fini), scanned, identified. LIBS extra libraries
 * (dlopened from the paths given) make the list longer. Prints the medians in us, per module,
 * and the ratio identify / scan.
 * usage: bench-identify [ROUNDS [LIB...]] (default 200 rounds, no extra library)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/agent.h"
#include "bench/bench.h"

static int
bench_count_module(const struct ag_module_info *m, void *ctx)
{
    (void)m;
    ++*(int *)ctx;
    return 0;
}

int
main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 200, modules = 0, identified = 0;
    struct ag_module_info info;
    double *scan, *ident, ms, mi;

    if (rounds <= 0) {
        fprintf(stderr, "usage: bench-identify [ROUNDS [LIB...]]\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        if (dlopen(argv[i], RTLD_NOW | RTLD_LOCAL) == NULL) {
            fprintf(stderr, "bench-identify: %s\n", dlerror());
            return 2;
        }
    }
    scan = calloc((size_t)rounds, sizeof(*scan));
    ident = calloc((size_t)rounds, sizeof(*ident));
    if (scan == NULL || ident == NULL) {
        return 1;
    }
    for (int r = 0; r < rounds; r++) {
        uint64_t t0, t1, t2;

        ag_modules_fini();
        t0 = bench_now_ns();
        if (ag_modules_refresh() < 0) {
            fprintf(stderr, "bench-identify: the module scan failed\n");
            return 1;
        }
        t1 = bench_now_ns();
        if (ag_modules_identify() != 0) {
            fprintf(stderr, "bench-identify: identify failed\n");
            return 1;
        }
        t2 = bench_now_ns();
        scan[r] = (double)(t1 - t0) / 1e3;
        ident[r] = (double)(t2 - t1) / 1e3;
    }
    if (ag_module_foreach(bench_count_module, &modules) != 0 || modules == 0) {
        return 1;
    }
    /* the executable's module, as a check that identify did identify */
    if (ag_module_find((uint64_t)(uintptr_t)main, &info) == 0) {
        identified = info.file.state == AG_FILE_LOADED;
    }
    ms = bench_median_of(scan, rounds);
    mi = bench_median_of(ident, rounds);

    printf("modules: %d (the executable's file identified: %s)\n", modules,
           identified ? "yes" : "NO");
    printf("scan     median %9.1f us  (%.2f us a module)\n", ms, ms / modules);
    printf("identify median %9.1f us  (%.2f us a module)\n", mi, mi / modules);
    printf("identify / scan: %.3f\n", mi / ms);
    ag_modules_fini();
    free(scan);
    free(ident);
    return identified ? 0 : 1;
}
