/* SPDX-License-Identifier: MIT */
/*
 * cli/profile.h - loads a sampled profile (profile/profile.h) from a nettrace file: the
 * ThreadSample events of Microsoft-DotNETCore-SampleProfiler, their stacks, and the names the
 * trace's rundown and method-load events give to code addresses (native functions from
 * pipeprof, managed methods from the .NET runtime). `report` and `convert` read profiles
 * through this API. Context: the CLI's single thread.
 */
#ifndef PP_CLI_PROFILE_H
#define PP_CLI_PROFILE_H

#include "common/compiler.h"
#include "profile/profile.h"

/* Filters applied while loading. A zeroed struct keeps everything. */
struct pp_load_filter {
    uint64_t thread_id;  /* 0: all threads */
    double start_ms;     /* keep samples at or after this time since the trace start */
    double end_ms;       /* 0: no end */
    const char *fold_re; /* POSIX extended regex: frames whose name matches are dropped */
};

/*
 * Loads path ("-" for standard input). Returns 0 and stores the profile in *out, or a negative
 * errno with a message in err. Ownership: caller owns *out, release with pp_profile_free().
 */
PP_MUST_USE int pp_load_profile(const char *path, const struct pp_load_filter *filter,
                                struct pp_profile **out, char *err, size_t errlen);

/*
 * Loads several traces, one process each (a multi-process recording), into one profile: each
 * trace's frames are named by its own rundown, and each thread is put under its process
 * (pp_profile.processes). Timestamps keep the first trace's clock (pipeprof's traces share the
 * monotonic clock); the filter's times count from each trace's own start. n == 1 is
 * pp_load_profile(). Returns 0 or a negative errno with a message in err.
 */
PP_MUST_USE int pp_load_profiles(const char *const *paths, size_t n,
                                 const struct pp_load_filter *filter, struct pp_profile **out,
                                 char *err, size_t errlen);

#endif /* PP_CLI_PROFILE_H */
