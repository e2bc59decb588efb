/* SPDX-License-Identifier: MIT */
/*
 * cli/profile.h - a sampled profile loaded from a nettrace file: the ThreadSample events of
 * Microsoft-DotNETCore-SampleProfiler, their stacks, and the names the trace's rundown and
 * method-load events give to code addresses (native functions from pipeprof, managed methods
 * from the .NET runtime). `report` and `convert` read profiles through this API.
 * Context: the CLI's single thread. Memory grows with the number of distinct stacks, not with
 * the number of samples.
 */
#ifndef PP_PROFILE_H
#define PP_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

/* A distinct (thread, call stack) pair and how often it was sampled. */
struct pp_profile_stack {
    uint64_t thread_id;
    uint64_t samples;         /* all samples with this stack */
    uint64_t running_samples; /* those whose type was "running" (Managed/CPU) */
    uint32_t depth;
    const uint32_t *names; /* depth indices into the name table, leaf first */
};

struct pp_profile_thread {
    uint64_t thread_id;
    const char *name; /* from pipeprof's ThreadStart events, or NULL */
    uint64_t samples;
    uint64_t running_samples;
};

struct pp_profile {
    /* Distinct stacks, in first-seen order. */
    struct pp_profile_stack *stacks;
    size_t stack_count;
    /* Function names ("module!function" or "module!0x1234" when unresolved). */
    char **names;
    size_t name_count;
    struct pp_profile_thread *threads;
    size_t thread_count;
    uint64_t samples;
    uint64_t running_samples;
    uint64_t lost_events;
    uint64_t first_ts, last_ts; /* ticks, of the samples */
    uint64_t ticks_per_second;
    uint32_t process_id;
    uint32_t sampling_interval_ns; /* the Trace object's expected rate */
    uint64_t resolved_frames, unresolved_frames;
    void *priv; /* internal state, owned by the profile */
};

/* Filters applied while loading. A zeroed struct keeps everything. */
struct pp_profile_filter {
    uint64_t thread_id;  /* 0: all threads */
    double start_ms;     /* keep samples at or after this time since the trace start */
    double end_ms;       /* 0: no end */
    const char *fold_re; /* POSIX extended regex: frames whose name matches are dropped */
};

/*
 * Loads path ("-" for standard input). Returns 0 and stores the profile in *out, or a negative
 * errno with a message in err. Ownership: caller owns *out, release with pp_profile_free().
 */
PP_MUST_USE int pp_profile_load(const char *path, const struct pp_profile_filter *filter,
                                struct pp_profile **out, char *err, size_t errlen);

void pp_profile_free(struct pp_profile *p);

/* The display label of a thread: "name (tid)" or "Thread (tid)". Static buffer per call. */
const char *pp_profile_thread_label(const struct pp_profile *p, uint64_t thread_id);

#endif /* PP_PROFILE_H */
