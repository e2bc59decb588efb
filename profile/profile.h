/* SPDX-License-Identifier: MIT */
/*
 * profile/profile.h - pp_profile, an in-memory sampled profile, and the writers of the formats
 * that viewers read (folded stacks, perf script, speedscope, pprof, Chrome trace events).
 *
 * A profile is built in two steps: raw samples (thread, timestamp, instruction pointers) are
 * added as they arrive, then every distinct address is named once by a caller-supplied namer.
 * The CLI builds profiles from nettrace files (cli/profile.c); the agent's HTTP endpoints build
 * them from drained samples (shim/). Writers only read a named profile.
 *
 * Memory: grows with the distinct stacks and names, plus 16 bytes per sample for the timeline
 * (the perf and chromium formats are per-sample).
 * Context: any ordinary thread; a profile is not shared between threads without a lock.
 * Dependencies: libc, zlib (pprof's gzip), cJSON (speedscope, chromium).
 */
#ifndef PP_PROFILE_PROFILE_H
#define PP_PROFILE_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/compiler.h"

/* A distinct (thread, call stack) pair and how often it was sampled. */
struct pp_profile_stack {
    uint64_t thread_id;
    uint64_t samples;         /* all samples with this stack */
    uint64_t running_samples; /* those taken while the thread ran (CPU, or wall "running") */
    uint32_t depth;           /* frames kept after folding */
    const uint32_t *names;    /* depth indices into pp_profile.names, leaf first; NULL before
                                 pp_profile_name_frames() */
    const uint64_t *ips;      /* depth code addresses parallel to names, leaf first */
};

struct pp_profile_thread {
    uint64_t thread_id;
    const char *name; /* or NULL when the trace never named the thread */
    uint64_t samples;
    uint64_t running_samples;
    uint32_t process_id;       /* its process (pp_profile.processes); 0: the profile's process_id */
    uint32_t process_instance; /* which process of that pid (pp_profile_process.instance) */
    uint64_t first_ts, last_ts; /* ticks, of its samples (0 and 0 before its first) */
};

/* Traces merged whose processes had one pid (a recording's pid reused: thread ids wrap the pid
 * space) keep their threads apart: a later one's thread ids carry its instance less one above
 * bit 32 (the kernel's tids fit in 32 bits). pp_profile_tid() is the id as the trace said it. */
#define PP_PROFILE_INSTANCE_SHIFT 32
static inline uint64_t
pp_profile_tid(uint64_t thread_id)
{
    return thread_id & ((UINT64_C(1) << PP_PROFILE_INSTANCE_SHIFT) - 1u);
}

/* A process of a profile merged from several traces (one trace holds one process). */
struct pp_profile_process {
    uint32_t process_id;
    uint32_t instance; /* 1, or 2, 3, ... for later traces whose process had the same pid */
    char *name;        /* or NULL; owned */
    uint64_t samples;  /* filled by whoever merges the traces */
};

/* One sample of the timeline, in the order samples were added. */
struct pp_profile_sample {
    uint64_t timestamp; /* ticks (pp_profile.ticks_per_second) */
    uint32_t stack;     /* index into pp_profile.stacks */
    uint32_t running;   /* 1 when the thread ran, 0 when it waited */
};

struct pp_profile {
    struct pp_profile_stack *stacks; /* distinct stacks, in first-seen order */
    size_t stack_count;
    char **names; /* frame names: "module!function", or "module!0x1234" when unresolved */
    size_t name_count;
    struct pp_profile_thread *threads; /* in first-seen order */
    size_t thread_count;
    struct pp_profile_sample *timeline;
    size_t timeline_count;

    uint64_t samples;
    uint64_t running_samples;
    uint64_t lost_events;       /* events the trace lost (sequence-number gaps) */
    uint64_t lost_samples;      /* samples the agent dropped (pipeprof LostSamples events) */
    uint64_t threads_dropped;   /* threads the agent never sampled, its thread table full, and */
    uint64_t cpu_rest_ns;       /* CPU threads burned after their last sample that no sample
                                   holds (both: pipeprof AgentLosses events) */
    uint64_t markers;           /* loaders: not-running ThreadSamples a CPU-mode trace holds for
                                   TraceEvent's thread-time view, which are not samples */
    uint64_t wait_markers;      /* of those, with the stack the thread waited in */
    uint64_t first_ts, last_ts; /* ticks, of the samples */
    uint64_t ticks_per_second;  /* the builder sets 1e9 (nanoseconds); a loader may change it */
    uint64_t start_ts;          /* ticks: the trace's start, 0 when unknown */
    uint32_t process_id;
    uint32_t sampling_interval_ns; /* expected interval between samples of a thread, 0 unknown */
    uint64_t resolved_frames, unresolved_frames; /* frames weighted by samples */
    char *process_name;                          /* or NULL; owned */
    int truncated; /* the source ended early (the writer died): the samples are a prefix */
    /* Several processes (traces merged): writers put each thread under its process. Empty for
     * a profile of one process. */
    struct pp_profile_process *processes;
    size_t process_count;
    char *mode;          /* "cpu", "wall", "mixed" (sessions of both) or NULL: CPU mode guessed, the
                            trace naming no mode and holding no waiting sample; owned */
    char *engine;        /* CPU mode's engine as the trace says ("perf_event", "timer", "mixed") or
                            NULL; owned */
    unsigned tick_hz;    /* the recorded machine's scheduler tick as the trace says (0: unknown):
                            the timer engine's samples come at it */
    uint64_t perf_early; /* perf samples the agent left out as early by their thread's CPU clock
                            (perf's cpu-clock counts stolen time; their CPU went to each
                            thread's next sample): pipeprof AgentLosses events' PerfEarly */
    uint64_t cpu_chance_ns; /* CPU threads burned before their first sample, in the timers'
                               first-sample lottery: no sample is at it, its winners' samples
                               stand for it in expectation (AgentLosses' CpuChanceNs) */
    uint64_t cpu_lost_ns;   /* CPU time of the samples the agent dropped (lost_samples): in no
                               sample (AgentLosses' CpuLostNs) */
    /* Traces whose process ended before its rundown (killed), their frames named afterwards from
     * the files of its modules (cli/names.c, by `record` or the loader): how many traces, their
     * frames left to name, of those named by a symbol, and the first one's description (why the
     * rest were not; owned, or NULL). */
    unsigned names_traces;
    uint64_t names_frames, names_named;
    char *names_note;
    void *priv; /* builder state, owned by the profile */
};

/*
 * Creates an empty profile. fold_re (or NULL) is a POSIX extended regex: frames whose name
 * matches are dropped when naming, as pprof-rs's frame post-processor does. Returns 0, -EINVAL
 * for a bad regex (reason in err), or -ENOMEM. Ownership: caller owns *out (pp_profile_free).
 */
PP_MUST_USE int pp_profile_new(const char *fold_re, struct pp_profile **out, char *err,
                               size_t errlen);

/*
 * Adds one sample: ips holds depth code addresses, leaf first (the leaf is the interrupted PC,
 * the others return addresses). Identical (thread, ips) pairs share one stack. Returns 0 or
 * -ENOMEM (the profile stays consistent). Must precede pp_profile_name_frames().
 */
PP_MUST_USE int pp_profile_add_sample(struct pp_profile *p, uint64_t thread_id, uint64_t timestamp,
                                      int running, const uint64_t *ips, uint32_t depth);

/* Names a thread (copied; a later name replaces an earlier). Returns 0 or -ENOMEM. */
PP_MUST_USE int pp_profile_set_thread_name(struct pp_profile *p, uint64_t thread_id,
                                           const char *name);

/*
 * Names one code address into buf ("module!function" or "module!0x1234"). caller is nonzero
 * for return addresses (look up ip - 1: the call precedes the address). Sets *resolved to 1 when
 * a function was found. Returns 0, or a negative errno that aborts naming.
 */
typedef int (*pp_profile_namer_fn)(void *ctx, uint64_t ip, int caller, char *buf, size_t len,
                                   int *resolved);

/*
 * Names every frame of every stack once (fills names, stacks[].names and stacks[].ips, and the
 * resolved/unresolved counts), dropping frames that match the fold regex. Call once, after the
 * last sample. Returns 0 or a negative errno.
 */
PP_MUST_USE int pp_profile_name_frames(struct pp_profile *p, pp_profile_namer_fn namer, void *ctx);

void pp_profile_free(struct pp_profile *p);

/*
 * Adds a process (pid and name copied; a known pid and instance gets the name if it had none):
 * instance 1, or 2, 3, ... for the later processes of a merge that had the same pid. Threads are
 * put under it with pp_profile_set_thread_process(). Returns 0 or -ENOMEM.
 */
PP_MUST_USE int pp_profile_add_process(struct pp_profile *p, uint32_t process_id, uint32_t instance,
                                       const char *name);

/* Puts a thread under a process added with pp_profile_add_process(). Returns 0 or -ENOMEM. */
PP_MUST_USE int pp_profile_set_thread_process(struct pp_profile *p, uint64_t thread_id,
                                              uint32_t process_id, uint32_t instance);

/* The process of a thread: its own process_id, else the profile's. */
uint32_t pp_profile_thread_pid(const struct pp_profile *p, uint64_t thread_id);

/* Samples a thread needs for pp_profile_busiest_rate() to weigh its rate. */
#define PP_PROFILE_RATE_MIN_SAMPLES 10

/*
 * The rate the busiest thread was sampled at while it lived: the highest, over the threads with
 * at least PP_PROFILE_RATE_MIN_SAMPLES samples, of a thread's intervals between samples per
 * second from its first sample to its last. A process tree's short processes (a build's compiler
 * runs) are each sampled at the rate asked while they run, which samples over the whole
 * recording hide. 0 when no thread has that many samples.
 */
double pp_profile_busiest_rate(const struct pp_profile *p);

/*
 * The display label of a process, "name (pid)" or "Process (pid)" ("name (pid #2)" for a later
 * process of the same pid), written to buf; buf[0] is '\0' when the profile holds one process
 * (writers then show threads at the top, as before). Returns buf.
 */
const char *pp_profile_process_label(const struct pp_profile *p, uint32_t process_id,
                                     uint32_t instance, char *buf, size_t len);

/* pp_profile_process_label() of the process a thread is under. */
const char *pp_profile_thread_process_label(const struct pp_profile *p, uint64_t thread_id,
                                            char *buf, size_t len);

/* The display label of a thread, "name (tid)" or "Thread (tid)", written to buf (the tid as the
 * trace said it, pp_profile_tid). Returns buf. */
const char *pp_profile_thread_label(const struct pp_profile *p, uint64_t thread_id, char *buf,
                                    size_t len);

/* ------------------------------------------------------------------------------------------ */
/* Writers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

enum pp_profile_format {
    PP_PROFILE_FOLDED = 0, /* collapsed stacks: "thread;root;...;leaf count" */
    PP_PROFILE_PERF,       /* `perf script` text */
    PP_PROFILE_SPEEDSCOPE, /* speedscope's JSON file format */
    PP_PROFILE_PPROF,      /* gzipped pprof protobuf (profile.proto) */
    PP_PROFILE_CHROMIUM,   /* Chrome trace-event JSON */
};

/* Parses a format name ("folded" or "collapsed", "perf", "speedscope", "pprof", "chromium").
 * Returns 0 or -EINVAL. */
PP_MUST_USE int pp_profile_format_parse(const char *name, enum pp_profile_format *out);

/* The canonical name of a format. */
const char *pp_profile_format_name(enum pp_profile_format fmt);

/* The MIME type an HTTP server sends a format with. */
const char *pp_profile_format_mime(enum pp_profile_format fmt);

/*
 * Writes a named profile to out in fmt. Returns 0, or a negative errno with a message in err
 * (-EIO when out failed). out is not closed.
 */
PP_MUST_USE int pp_profile_write(const struct pp_profile *p, enum pp_profile_format fmt, FILE *out,
                                 char *err, size_t errlen);

#endif /* PP_PROFILE_PROFILE_H */
