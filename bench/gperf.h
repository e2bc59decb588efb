/* SPDX-License-Identifier: MIT */
/*
 * bench/gperf.h - gperftools' CPU profiler loaded at run time (header only), for the benchmarks
 * that run it beside pipeprof's engines in the same rotation (bench-engine, bench-perfring):
 * libprofiler.so.0 by dlopen, so that they build and run, skipping it, where it is not installed.
 */
#ifndef BENCH_GPERF_H
#define BENCH_GPERF_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* gperftools' profiler.h's ProfilerState, declared here so that the benchmarks build without it. */
struct bench_gperf_state {
    int enabled;
    time_t start_time;
    char profile_name[1024];
    int samples_gathered;
};

struct bench_gperf_api {
    int (*start)(const char *fname);
    void (*stop)(void);
    void (*state)(struct bench_gperf_state *st);
};

/* Loads the library once with CPUPROFILE_FREQUENCY=hz (read at its first start: one rate per
 * process). 0, or 1 when it is not installed (said on stderr, prefixed by who). */
static inline int
bench_gperf_load(struct bench_gperf_api *api, unsigned hz, const char *who)
{
    char rate[16];
    void *lib;

    if (api->start != NULL) {
        return 0;
    }
    snprintf(rate, sizeof(rate), "%u", hz);
    setenv("CPUPROFILE_FREQUENCY", rate, 1);
    lib = dlopen("libprofiler.so.0", RTLD_NOW);
    if (lib == NULL) {
        fprintf(stderr, "%s: gperftools: %s\n", who, dlerror());
        return 1;
    }
    *(void **)&api->start = dlsym(lib, "ProfilerStart");
    *(void **)&api->stop = dlsym(lib, "ProfilerStop");
    *(void **)&api->state = dlsym(lib, "ProfilerGetCurrentState");
    if (api->start == NULL || api->stop == NULL || api->state == NULL) {
        fprintf(stderr,
                "%s: gperftools: libprofiler.so.0 lacks ProfilerStart/Stop/GetCurrentState\n", who);
        api->start = NULL;
        return 1;
    }
    return 0;
}

#endif /* BENCH_GPERF_H */
