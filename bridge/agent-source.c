/* SPDX-License-Identifier: MIT */
/*
 * bridge/agent-source.c - feeds the agent's samples into every tracing session of the diagnostic
 * server. Each drain takes every pending record from the agent once, sorts the samples by time
 * (records of different threads arrive thread by thread) and writes them into each session that
 * enables them: a ThreadSample of Microsoft-DotNETCore-SampleProfiler per sample (type 2 when
 * the thread was running, 1 when it was waiting, so TraceEvent's thread-time computer charges
 * CPU and waiting time correctly), and pipeprof's own events for threads, modules, per-sample CPU
 * time and lost samples. A congested session gets no events; its losses become sequence gaps.
 * At StopTracing the rundown names every function a stack of that session referenced.
 * Context: one thread at a time, the source's owner: the IPC loop thread, or the drain thread of
 * a public-API recording (shim/api.c). The owner is claimed with a compare-and-swap while it has
 * sessions or taps; another thread's start is refused (-EBUSY) and its drains do nothing, so the
 * state below needs no lock. Never a signal handler.
 */
#include "bridge/agent-source.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bridge/counters.h"
#include "common/grow.h"
#include "host/host.h"
#include "nettrace/format.h"
#include "nettrace/nettrace.h"

/*
 * The stack snapshot of a CPU-mode session that asks for SampleProfiler alone: the wall sampler
 * runs at this rate until it has one sample of every thread (ag_wall_settle: a few ms, more for
 * a running thread a loaded machine does not schedule at once).
 */
#define BRIDGE_SNAPSHOT_HZ        1000 /* the first pass within about 1 ms */
/* The longest a snapshot's last drain waits for it: a session stopped at once (dotnet-stack's,
 * 10 ms) after the agent started with it (a late start takes tens of ms) must still hold it. */
#define BRIDGE_SNAPSHOT_SETTLE_MS 2000

/* A pending ThreadSample type of our own: a "stopped running" marker with the stack the thread
 * waits in (NT_SAMPLE_WAIT_TAG). */
#define BRIDGE_SAMPLE_WAIT 0x100u

/* The level at which pipeprof's per-sample CpuSample event is written (Verbose). */
#define BRIDGE_LEVEL_VERBOSE 5

enum bridge_pipeprof_event {
    BRIDGE_EV_THREAD_START = 1,
    BRIDGE_EV_THREAD_STOP = 2,
    BRIDGE_EV_MODULE_LOAD = 3,
    BRIDGE_EV_CPU_SAMPLE = 4,
    BRIDGE_EV_LOST_SAMPLES = 5,
    BRIDGE_EV_SAMPLING = 6,
    /* 7 and 8 are the EventCounters' (bridge/counters.c) */
    BRIDGE_EV_AGENT_LOSSES = 9,
    /* 10 is `record`'s NamesFromFiles, after the rundown it writes for a killed process
     * (cli/names.c) */
};

static const struct nt_field bridge_thread_start_fields[] = {
    { "ThreadId", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Name", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
};
static const struct nt_field bridge_thread_stop_fields[] = {
    { "ThreadId", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
};
static const struct nt_field bridge_module_fields[] = {
    { "Path", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Base", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Size", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "BuildId", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    /* The file it was loaded from (struct ag_file_ident, since fileident): 0 not known, 1 the
     * file at Path was the one mapped when the agent looked (the rest its stat), 2 another (or
     * none) was there (FileIno the mapped one's). A reader tells by them whether the file at
     * Path now is the one loaded, without a build-id (cli/names.c). At the end, so that a
     * reader of the four fields before reads them as it did. */
    { "FileState", NT_TYPE_UINT32, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "FileDev", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "FileIno", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "FileSize", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "FileMtimeNs", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 }, /* since 1970, UTC */
    { "FileCtimeNs", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
};
static const struct nt_field bridge_cpu_sample_fields[] = {
    { "ThreadId", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "CpuTimeNs", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "State", NT_TYPE_UINT32, NT_TYPE_EMPTY, NULL, 0, 0 },     /* 1 running, 2 waiting */
    { "Mode", NT_TYPE_UINT32, NT_TYPE_EMPTY, NULL, 0, 0 },      /* 1 cpu, 2 wall */
    { "Unwinder", NT_TYPE_UINT32, NT_TYPE_EMPTY, NULL, 0, 0 },  /* enum ag_unwinder */
    { "UnwindEnd", NT_TYPE_UINT32, NT_TYPE_EMPTY, NULL, 0, 0 }, /* enum ag_unwind_end */
    { "Depth", NT_TYPE_UINT32, NT_TYPE_EMPTY, NULL, 0, 0 },
};
static const struct nt_field bridge_sampling_fields[] = {
    { "Mode", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 }, /* cpu or wall */
    { "Hz", NT_TYPE_UINT32, NT_TYPE_EMPTY, NULL, 0, 0 },   /* the session's rate */
    { "Engine", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0,
      0 }, /* perf_event, timer, perf_ring, mixed, wall */
    { "PerfThreads", NT_TYPE_UINT32, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "TimerThreads", NT_TYPE_UINT32, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "TickHz", NT_TYPE_UINT32, NT_TYPE_EMPTY, NULL, 0, 0 }, /* the kernel's tick, 0 unknown */
};
/* What the agent could not put in any sample, since the previous such event (increments; a reader
 * adds them up): threads it never sampled because its thread table was full, and CPU time
 * threads burned after their last sample that no final sample took; and what is in samples only
 * in expectation or later (PerfEarly, CpuChanceNs). */
static const struct nt_field bridge_agent_losses_fields[] = {
    { "ThreadsDropped", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "CpuRestNs", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    /* perf samples left out as early by their thread's CPU clock (agent/sig-handler.c,
     * AG_WEIGH_EARLY): their CPU is in the thread's next sample, none is lost */
    { "PerfEarly", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    /* CPU time threads burned before their first sample, in the timers' first-sample lottery
     * (agent/timer.c, ag_stats.cpu_chance_ns): no sample is at it, its winners' samples stand
     * for it in expectation (a profile of short threads rests on it; since exitgap) */
    { "CpuChanceNs", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    /* CPU time of the CPU samples the agent dropped (a full ring; LostSamples counts them):
     * weighed where they were dropped, in no sample, not in the thread's next (since ringdrop) */
    { "CpuLostNs", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
};
static const struct nt_field bridge_lost_fields[] = {
    { "ThreadId", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Count", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },     /* dropped + unsampled */
    { "Unsampled", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 }, /* wall intervals missed */
};

/* Stack-less EventSource events, written from the agent's own thread (the subject thread is in
 * the payload): PerfView's thread-time view would take an EventSource event on a sampled thread
 * for the end of its CPU interval. */
static const struct nt_event_desc bridge_pipeprof_events[] = {
    { BRIDGE_PROVIDER_PIPEPROF, BRIDGE_EV_THREAD_START, "ThreadStart", 0, 1, 4, 0,
      bridge_thread_start_fields, 2, 0 },
    { BRIDGE_PROVIDER_PIPEPROF, BRIDGE_EV_THREAD_STOP, "ThreadStop", 0, 1, 4, 0,
      bridge_thread_stop_fields, 1, 0 },
    { BRIDGE_PROVIDER_PIPEPROF, BRIDGE_EV_MODULE_LOAD, "ModuleLoad", 0, 1, 4, 0,
      bridge_module_fields, PP_ARRAY_SIZE(bridge_module_fields), 0 },
    { BRIDGE_PROVIDER_PIPEPROF, BRIDGE_EV_CPU_SAMPLE, "CpuSample", 0, 1, BRIDGE_LEVEL_VERBOSE, 0,
      bridge_cpu_sample_fields, 7, 0 },
    { BRIDGE_PROVIDER_PIPEPROF, BRIDGE_EV_LOST_SAMPLES, "LostSamples", 0, 1, 4, 0,
      bridge_lost_fields, 3, 0 },
    { BRIDGE_PROVIDER_PIPEPROF, BRIDGE_EV_SAMPLING, "Sampling", 0, 1, 4, 0, bridge_sampling_fields,
      6, 0 },
};
/* Apart from the table above, which is indexed by id - 1. */
static const struct nt_event_desc bridge_agent_losses_event = { BRIDGE_PROVIDER_PIPEPROF,
                                                                BRIDGE_EV_AGENT_LOSSES,
                                                                "AgentLosses",
                                                                0,
                                                                1,
                                                                4,
                                                                0,
                                                                bridge_agent_losses_fields,
                                                                PP_ARRAY_SIZE(
                                                                        bridge_agent_losses_fields),
                                                                0 };

/* An open-addressing set of code addresses (0 is the empty slot; address 0 is never stored),
 * each with the time of the latest sample that held it: the module mapped then names it. */
struct bridge_addr_set {
    uint64_t *slots;
    uint64_t *ts; /* CLOCK_MONOTONIC ns, per slot */
    size_t cap;   /* power of two */
    size_t count;
};

/* A module that went during a session whose frames may be in it: its addresses are named, and
 * taken out of the session's set, at the time it went, before any frame of a library loaded at
 * its address later (bridge_flush_gone). */
struct bridge_gone {
    uint32_t id;
    uint64_t lo, hi; /* its executable span */
    uint64_t gone_ns;
};

/*
 * A thread's open CPU interval in a CPU-mode session: its last running sample charged TraceEvent's
 * thread-time computer until end_ns, and nothing has said yet that the thread stopped running.
 * An open-addressing table keyed by tid (0 = empty slot).
 */
struct bridge_cpu_run {
    int32_t tid;
    int open;
    int snapshot;         /* 1: the session's stack snapshot holds this thread; 2: it ran since */
    uint64_t snapshot_ns; /* when the snapshot's sample of it stands */
    uint64_t end_ns;
    uint64_t batch; /* the drain that last saw a sample of the thread */
};

struct bridge_cpu_runs {
    struct bridge_cpu_run *slots;
    size_t cap, count;
};

/*
 * An event of a CPU-mode session held back until no later drain can produce an earlier one: its
 * samples are written back-dated over the CPU time they stand for, and the writer keeps the
 * stream's timestamps in order (bridge_release_pending()).
 */
struct bridge_pending {
    uint64_t ts;
    uint64_t seq; /* insertion order, for equal timestamps */
    int32_t tid;
    uint32_t type;  /* ThreadSample: NT_SAMPLE_*; 0 for a CpuSample payload */
    uint32_t depth; /* frames, owned */
    uint64_t *frames;
    uint32_t payload_len;
    uint8_t payload[40]; /* CpuSample */
};

struct bridge_session {
    uint64_t id;
    int active;
    int samples;     /* SampleProfiler's ThreadSample is enabled */
    int pipeprof;    /* pipeprof's Informational events are enabled */
    int cpu_samples; /* pipeprof's Verbose CpuSample is enabled */
    int acquired;    /* holds an ag_sampling_acquire() request */
    enum ag_mode mode;
    unsigned hz;
    uint64_t start_ns;            /* samples older than the session are not its own */
    uint32_t modules_announced;   /* highest module id written as ModuleLoad */
    struct bridge_addr_set addrs; /* addresses of this session's frames, for the rundown */
    struct bridge_addr_set named; /* those already named by bridge_names() */
    struct bridge_gone *gone;     /* modules gone since the session started, not named yet */
    size_t gone_count, gone_cap;
    uint64_t gone_after;         /* the last ag_module_gone seq taken into gone */
    uint64_t gone_last_ns;       /* the latest gone_ns taken: no span of a later sample reaches back
                                    past it (a frame of a library loaded there must not come first) */
    struct bridge_cpu_runs runs; /* CPU mode: each thread's open interval */
    struct bridge_pending *pending; /* CPU mode: events held back, unsorted */
    size_t pending_count, pending_cap;
    uint64_t pending_seq;
    uint64_t released_ns;     /* CPU mode: events up to here are written */
    uint64_t horizon_ns;      /* CPU mode: the last batch's time, what it released up to */
    uint64_t wall_written_ns; /* wall mode: the latest ThreadSample written */
    uint64_t batches;         /* drains written */
    int sampled;     /* a drain brought a sample of its own: a stack in its mode (running, in CPU
                        mode), as `record` counts them (ipc_event_source's sampled) */
    char engine[16]; /* the engine last written in a Sampling event */
    /* The agent's loss counters (ag_stats' threads_dropped, cpu_rest_ns) as last taken: an
     * AgentLosses event carries what they grew by since (bridge_write_losses). */
    uint64_t losses_threads, losses_rest_ns, losses_early; /* (and ag_stats.perf_early) */
    uint64_t losses_chance_ns;                             /* (ag_stats.cpu_chance_ns) */
    uint64_t losses_lost_ns;                               /* (ag_stats.cpu_lost_ns) */
    struct bridge_counters counters;                       /* EventCounters (bridge/counters.h) */
    /* A stack snapshot (CPU mode, SampleProfiler alone: dotnet-stack's session): the first pass
     * of a wall sampler started for it gives every thread one waiting-type sample with its stack,
     * running or blocked. 0 none (or taken), 1 taking it. */
    int snapshot;
    int snapshot_session; /* 1 for the life of a session that took (or takes) a snapshot */
    int snapshot_settled; /* every thread's sample is in the rings now (ag_wall_settle) */
    /* Rounds of one sample of every thread still to wait for, each since snapshot_since: two in
     * wall mode, where TraceEvent's thread time charges a thread from one sample to its next
     * (CPU mode's snapshot sample gets its next from the session's end). */
    int snapshot_rounds;
    uint64_t snapshot_since;
    uint64_t snapshot_deadline_ns; /* the wall sampling started plus the bound: when to give up */
};

/* One drained sample, copied so that samples of all threads can be sorted by time. */
struct bridge_sample {
    uint64_t timestamp_ns;
    uint64_t cpu_time_ns;
    uint64_t cpu_delta_ns; /* CPU mode: the CPU time it stands for */
    int32_t tid;
    uint8_t state, mode, unwinder, end;
    uint16_t weight;
    uint32_t depth;
    size_t frames; /* offset into bridge_source.frames */
};

struct bridge_thread_event {
    enum ag_record_kind kind;
    int32_t tid;
    uint64_t lost;
    uint64_t unsampled; /* of lost: wall intervals missed, no sample dropped (ag_record) */
    char name[AG_NAME_MAX];
};

struct bridge_source {
    struct ag_config defaults;
    struct bridge_session sessions[IPC_MAX_SESSIONS];
    /* Per-drain scratch, reused across drains. */
    struct bridge_sample *samples;
    size_t sample_count, sample_cap;
    uint64_t *frames;
    size_t frame_count, frame_cap;
    struct bridge_thread_event *threads;
    size_t thread_count, thread_cap;
    uint64_t capture_tid; /* the owner: the thread that writes, and is never sampled */
    /*
     * The agent has one consumer (ag_drain). Sessions are served by one thread at a time: the
     * IPC loop, or the drain thread of a pipeprof_start() recording. A session that starts on
     * another thread while the owner has sessions is refused with -EBUSY, and drain calls from
     * a thread that is not the owner do nothing.
     */
    _Atomic int64_t owner;
    unsigned active_sessions; /* written by the owner only */
    struct bridge_tap *taps;  /* other consumers on the owner thread (bridge/agent-source.h) */
};

static struct bridge_source bridge_source;

static uint64_t
bridge_hash(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ULL;
    x ^= x >> 27;
    return x;
}

/* Rebuilds s with ncap slots, without the addresses drop says (NULL: none). */
static int
bridge_addr_set_rehash(struct bridge_addr_set *s, size_t ncap,
                       int (*drop)(uint64_t addr, uint64_t ts, void *ctx), void *ctx)
{
    uint64_t *n = calloc(ncap, sizeof(*n)), *nts = calloc(ncap, sizeof(*nts));
    size_t i, j, count = 0;

    if (n == NULL || nts == NULL) {
        free(n);
        free(nts);
        return -ENOMEM;
    }
    for (j = 0; j < s->cap; j++) {
        if (s->slots[j] != 0 && (drop == NULL || !drop(s->slots[j], s->ts[j], ctx))) {
            for (i = bridge_hash(s->slots[j]) & (ncap - 1); n[i] != 0; i = (i + 1) & (ncap - 1)) {
            }
            n[i] = s->slots[j];
            nts[i] = s->ts[j];
            count++;
        }
    }
    free(s->slots);
    free(s->ts);
    s->slots = n;
    s->ts = nts;
    s->cap = ncap;
    s->count = count;
    return 0;
}

/* Adds addr, seen by a sample at ts (the latest such time is kept). */
static int
bridge_addr_set_add(struct bridge_addr_set *s, uint64_t addr, uint64_t ts)
{
    size_t i;
    int err;

    if (addr == 0) {
        return 0;
    }
    if ((s->count + 1) * 2 > s->cap &&
        (err = bridge_addr_set_rehash(s, s->cap != 0 ? s->cap * 2 : 4096, NULL, NULL)) != 0) {
        return err;
    }
    for (i = bridge_hash(addr) & (s->cap - 1); s->slots[i] != 0; i = (i + 1) & (s->cap - 1)) {
        if (s->slots[i] == addr) {
            s->ts[i] = ts > s->ts[i] ? ts : s->ts[i];
            return 0;
        }
    }
    s->slots[i] = addr;
    s->ts[i] = ts;
    s->count++;
    return 0;
}

static int
bridge_addr_set_has(const struct bridge_addr_set *s, uint64_t addr)
{
    size_t i;

    for (i = s->cap != 0 ? bridge_hash(addr) & (s->cap - 1) : 0; s->cap != 0 && s->slots[i] != 0;
         i = (i + 1) & (s->cap - 1)) {
        if (s->slots[i] == addr) {
            return 1;
        }
    }
    return 0;
}

static void
bridge_addr_set_fini(struct bridge_addr_set *s)
{
    free(s->slots);
    free(s->ts);
    memset(s, 0, sizeof(*s));
}

int
bridge_filter_parse(const char *args, enum ag_mode *mode, unsigned *hz, const char **why)
{
    const char *p = args;

    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ';');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        char item[64];
        char *eq, *val, *num_end;
        unsigned long n;

        if (len >= sizeof(item)) {
            len = sizeof(item) - 1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        p = end != NULL ? end + 1 : NULL;
        eq = strchr(item, '=');
        if (eq == NULL) {
            continue;
        }
        *eq = '\0';
        val = eq + 1;
        if (*val == '"') { /* dotnet-trace allows quoted values */
            size_t vl = strlen(++val);

            if (vl > 0 && val[vl - 1] == '"') {
                val[vl - 1] = '\0';
            }
        }
        if (strcasecmp(item, "mode") == 0) {
            if (strcasecmp(val, "cpu") == 0) {
                *mode = AG_MODE_CPU;
            } else if (strcasecmp(val, "wall") == 0) {
                *mode = AG_MODE_WALL;
            } else {
                *why = "mode must be cpu or wall";
                return -EINVAL;
            }
        } else if (strcasecmp(item, "hz") == 0) {
            errno = 0;
            n = strtoul(val, &num_end, 10);
            if (errno != 0 || *num_end != '\0' || n == 0 || n > AG_HZ_MAX) {
                *why = "hz must be a number from 1 to 1000";
                return -EINVAL;
            }
            *hz = (unsigned)n;
        }
    }
    return 0;
}

static void
bridge_log_session(uint64_t id, const char *what, const char *why)
{
    fprintf(stderr, "pipeprof: session %llu: %s: %s\n", (unsigned long long)id, what, why);
}

static struct bridge_session *
bridge_session_find(uint64_t id)
{
    size_t i;

    for (i = 0; i < IPC_MAX_SESSIONS; i++) {
        if (bridge_source.sessions[i].active && bridge_source.sessions[i].id == id) {
            return &bridge_source.sessions[i];
        }
    }
    return NULL;
}

/* Gives up the agent's records when nobody on this thread consumes them any more. */
static void
bridge_owner_release_if_idle(struct bridge_source *src)
{
    if (src->active_sessions == 0 && src->taps == NULL) {
        atomic_store(&src->owner, 0);
    }
}

/* Makes the calling thread the consumer of the agent's records, or fails with -EBUSY. */
static int
bridge_owner_claim(struct bridge_source *src)
{
    int64_t self = gettid(), expected = 0;

    if (!atomic_compare_exchange_strong(&src->owner, &expected, self) && expected != self) {
        return -EBUSY;
    }
    if (src->capture_tid != (uint64_t)self) {
        ag_thread_exclude_self(); /* the consuming thread is the profiler's, never a sample */
        src->capture_tid = (uint64_t)self;
    }
    return 0;
}

/*
 * The session's mode and rate: the defaults, or the filter data of either provider. A session of
 * another tool that asks for the SampleProfiler (dotnet-trace's default profile, a runtime
 * sampler's semantics: every thread's state and stack every interval, running, runnable or
 * blocked, which TraceEvent's thread-time view charges) gets wall mode, its thread time: CPU mode
 * left a runnable thread's time without a stack (88 % on a bare "Threads" node with 6 busy
 * threads on 2 cores). pipeprof's own clients name their mode (the pipeprof provider), and
 * PIPEPROF_MODE, when set, or mode= in the filter data hold for every session.
 */
static void
bridge_session_rate(const struct bridge_source *src, const struct ipc_session_config *cfg,
                    enum ag_mode *mode, unsigned *hz, int log)
{
    const char *why = NULL;
    enum ag_mode asked = (enum ag_mode)0;
    uint32_t i;

    *hz = src->defaults.hz;
    for (i = 0; i < cfg->provider_count; i++) {
        const struct ipc_provider *p = &cfg->providers[i];

        if (p->args != NULL && (strcmp(p->name, NT_PROVIDER_SAMPLE_PROFILER) == 0 ||
                                strcmp(p->name, BRIDGE_PROVIDER_PIPEPROF) == 0)) {
            if (bridge_filter_parse(p->args, &asked, hz, &why) != 0) {
                if (log) {
                    bridge_log_session(cfg->session_id, "filter data ignored", why);
                }
                asked = 0;
                *hz = src->defaults.hz;
            }
        }
    }
    *mode = asked != 0 ? asked : src->defaults.mode;
    if (asked == 0 && !src->defaults.mode_set &&
        ipc_session_config_enables(cfg, NT_PROVIDER_SAMPLE_PROFILER, 0, 4) &&
        !ipc_session_config_enables(cfg, BRIDGE_PROVIDER_PIPEPROF, 0, 4)) {
        *mode = AG_MODE_WALL; /* thread time */
    }
}

static uint32_t
bridge_session_interval(void *ctx, const struct ipc_session_config *cfg)
{
    enum ag_mode mode;
    unsigned hz;

    bridge_session_rate(ctx, cfg, &mode, &hz, 0);
    return hz != 0 ? 1000000000u / hz : 0;
}

/*
 * The agent's start and a sampling request create threads (the manager, the wall sampler). A
 * thread created while another thread of the process is in execve() fails with EAGAIN (the
 * kernel refuses CLONE_FS during an exec, copy_fs's fs->in_exec), also for an exec that fails
 * once its file is open (ENOEXEC, a missing interpreter). A `record` child's deferred session
 * starts 5 ms into the image: one that execs about then (git running its helpers, a shell's `exec`)
 * said "pipeprof: session N: sampling not started: Resource temporarily unavailable" on the host's
 * stderr where bare says nothing (git's gc under record in wall mode). So EAGAIN is tried again
 * after a pause, on the loop thread, for up to 1 s: an exec that succeeds ends the process
 * meanwhile, one that failed is over.
 */
#define BRIDGE_START_AGAIN_MS    10
/* How long a CPU session's counters may stand at the time of its last event released before they
 * move on with the batches' time (bridge_drain). */
#define BRIDGE_COUNTERS_STILL_NS 1000000000ull
#define BRIDGE_START_AGAIN_NS    1000000000ull /* nt_clock_now()'s: then the failure is said */

/* 1 after a pause when an EAGAIN (err) may be tried again until `until`. */
static int
bridge_start_again(int err, uint64_t until)
{
    struct timespec again = { 0, BRIDGE_START_AGAIN_MS * 1000000L };

    if (err != -EAGAIN || nt_clock_now() >= until) {
        return 0;
    }
    syscall(SYS_nanosleep, &again, NULL); /* raw: the library's nanosleep is an interposer */
    return 1;
}

static int
bridge_agent_start_again(void)
{
    uint64_t until = nt_clock_now() + BRIDGE_START_AGAIN_NS;
    int err;

    while (bridge_start_again(err = bridge_agent_start(), until)) {
    }
    return err;
}

static int
bridge_sampling_acquire_again(enum ag_mode mode, unsigned hz)
{
    uint64_t until = nt_clock_now() + BRIDGE_START_AGAIN_NS;
    int err;

    while (bridge_start_again(err = ag_sampling_acquire(mode, hz), until)) {
    }
    return err;
}

static int
bridge_session_start(void *ctx, const struct ipc_session_config *cfg)
{
    struct bridge_source *src = ctx;
    struct bridge_session *s = NULL;
    uint32_t i;
    int err;

    if (bridge_owner_claim(src) != 0) {
        bridge_log_session(cfg->session_id, "sampling not started",
                           "another recording of this process is draining the agent");
        return -EBUSY;
    }
    for (i = 0; i < IPC_MAX_SESSIONS && s == NULL; i++) {
        if (!src->sessions[i].active) {
            s = &src->sessions[i];
        }
    }
    if (s == NULL) {
        bridge_owner_release_if_idle(src);
        return -ENOSPC;
    }
    memset(s, 0, sizeof(*s));
    src->active_sessions++;
    s->id = cfg->session_id;
    s->active = 1;
    s->start_ns = nt_clock_now();
    s->mode = src->defaults.mode;
    s->hz = src->defaults.hz;
    s->samples = ipc_session_config_enables(cfg, NT_PROVIDER_SAMPLE_PROFILER, 0, 4);
    s->pipeprof = ipc_session_config_enables(cfg, BRIDGE_PROVIDER_PIPEPROF, 0, 4);
    s->cpu_samples =
            ipc_session_config_enables(cfg, BRIDGE_PROVIDER_PIPEPROF, 0, BRIDGE_LEVEL_VERBOSE);
    bridge_session_rate(src, cfg, &s->mode, &s->hz, 1);
    {
        const char *why = NULL;

        if (bridge_counters_start(&s->counters, cfg, s->start_ns, &why) != 0) {
            bridge_log_session(s->id, "counters not started", why);
        }
    }
    err = s->samples || s->pipeprof ? bridge_agent_start_again() : 0;
    if (err == 0) {
        struct ag_stats st;

        ag_stats_get(&st); /* this session's losses count from here */
        s->losses_threads = st.threads_dropped;
        s->losses_rest_ns = st.cpu_rest_ns;
        s->losses_early = st.perf_early;
        s->losses_chance_ns = st.cpu_chance_ns;
        s->losses_lost_ns = st.cpu_lost_ns;
    }
    if (err == 0 && s->samples && cfg->provider_count == 1 &&
        ag_sampling_acquire(AG_MODE_WALL, BRIDGE_SNAPSHOT_HZ) == 0) {
        s->snapshot = 1;
        s->snapshot_session = 1;
        s->snapshot_rounds = s->mode == AG_MODE_WALL ? 2 : 1;
        s->snapshot_since = s->start_ns;
        /* From here, not from the session's start: a late agent start (the CFI tables of every
         * module, under ASan about 2 s) is no time the sampler had. */
        s->snapshot_deadline_ns = nt_clock_now() + BRIDGE_SNAPSHOT_SETTLE_MS * 1000000ull;
    }
    if (s->samples || s->pipeprof) {
        err = err != 0 ? err : bridge_sampling_acquire_again(s->mode, s->hz);
        if (err != 0) {
            bridge_log_session(s->id, "sampling not started", strerror(-err));
            memset(s, 0, sizeof(*s));
            src->active_sessions--;
            bridge_owner_release_if_idle(src);
            return err;
        }
        s->acquired = 1;
    }
    return 0;
}

static void
bridge_session_stop(void *ctx, const struct ipc_session_config *cfg)
{
    struct bridge_source *src = ctx;
    struct bridge_session *s;

    if (atomic_load(&src->owner) != (int64_t)gettid()) {
        return; /* a session this source refused */
    }
    s = bridge_session_find(cfg->session_id);
    if (s == NULL) {
        return;
    }
    if (s->acquired && ag_sampling_release(s->mode, s->hz) != 0) {
        bridge_log_session(s->id, "release", "no such sampling request");
    }
    if (s->snapshot != 0 && ag_sampling_release(AG_MODE_WALL, BRIDGE_SNAPSHOT_HZ) != 0) {
        bridge_log_session(s->id, "release", "no snapshot sampling request");
    }
    bridge_addr_set_fini(&s->addrs);
    bridge_addr_set_fini(&s->named);
    free(s->gone);
    s->gone = NULL;
    s->gone_count = s->gone_cap = 0;
    free(s->runs.slots);
    for (size_t i = 0; i < s->pending_count; i++) {
        free(s->pending[i].frames);
    }
    free(s->pending);
    memset(s, 0, sizeof(*s));
    src->active_sessions--;
    bridge_owner_release_if_idle(src);
}

/*
 * The executable ranges of libpipeprof.so itself. Its frames (the interposers of blocking calls
 * and of pthread_create's start routine) are the profiler's, not the host's: a stack reads as if
 * the host called libc directly. Nothing is hidden when this code is linked into the program
 * (the unit tests, or a host that links pipeprof statically).
 */
struct bridge_self_text {
    int known;
    size_t count;
    uint64_t lo[4], hi[4];
};

static struct bridge_self_text bridge_self;

static int
bridge_self_phdr(struct dl_phdr_info *info, size_t size, void *ctx)
{
    uintptr_t me = (uintptr_t)(void *)bridge_self_phdr;
    int i, mine = 0;

    (void)size;
    (void)ctx;
    if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0') {
        return 0; /* the main program: never hidden */
    }
    for (i = 0; i < info->dlpi_phnum && !mine; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

        mine = ph->p_type == PT_LOAD && me >= info->dlpi_addr + ph->p_vaddr &&
               me - (info->dlpi_addr + ph->p_vaddr) < ph->p_memsz;
    }
    for (i = 0; mine && i < info->dlpi_phnum && bridge_self.count < 4; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            bridge_self.lo[bridge_self.count] = info->dlpi_addr + ph->p_vaddr;
            bridge_self.hi[bridge_self.count] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
            bridge_self.count++;
        }
    }
    return mine;
}

static int
bridge_is_self(uint64_t pc)
{
    size_t i;

    if (!bridge_self.known) {
        host_loader_iterate(bridge_self_phdr, NULL);
        bridge_self.known = 1;
    }
    for (i = 0; i < bridge_self.count; i++) {
        if (pc >= bridge_self.lo[i] && pc < bridge_self.hi[i]) {
            return 1;
        }
    }
    return 0;
}

/* ag_drain callback: copies each record into the per-drain scratch arrays. */
static int
bridge_collect_record(const struct ag_record *rec, void *ctx)
{
    struct bridge_source *src = ctx;
    struct bridge_thread_event *te;
    struct bridge_sample *s;
    const struct ag_sample *as;
    uint32_t i;

    if (rec->kind != AG_RECORD_SAMPLE) {
        if (pp_grow_array((void **)&src->threads, &src->thread_cap, src->thread_count + 1,
                          sizeof(*src->threads)) != 0) {
            return -ENOMEM;
        }
        te = &src->threads[src->thread_count++];
        memset(te, 0, sizeof(*te));
        te->kind = rec->kind;
        te->tid = rec->tid;
        if (rec->kind == AG_RECORD_THREAD_START && rec->u.name != NULL) {
            snprintf(te->name, sizeof(te->name), "%s", rec->u.name);
        } else if (rec->kind == AG_RECORD_LOST) {
            te->lost = rec->u.lost;
            te->unsampled = rec->unsampled;
        }
        return 0;
    }
    as = rec->u.sample;
    if (pp_grow_array((void **)&src->samples, &src->sample_cap, src->sample_count + 1,
                      sizeof(*src->samples)) != 0 ||
        pp_grow_array((void **)&src->frames, &src->frame_cap, src->frame_count + as->depth,
                      sizeof(*src->frames)) != 0) {
        return -ENOMEM;
    }
    s = &src->samples[src->sample_count++];
    s->timestamp_ns = as->timestamp_ns;
    s->cpu_time_ns = as->cpu_time_ns;
    s->cpu_delta_ns = as->cpu_delta_ns;
    s->weight = as->weight != 0 ? as->weight : 1;
    s->tid = as->tid;
    s->state = as->state;
    s->mode = as->mode;
    s->unwinder = as->unwinder;
    s->end = as->end;
    s->frames = src->frame_count;
    s->depth = 0;
    for (i = 0; i < as->depth; i++) {
        /* The agent's own frames are hidden, but for the markers of unseen, kernel and not
         * sampled time, and the root of a stack cut where an unwind table was pending. */
        if ((i == 0 &&
             (as->frames[0] == ag_unseen_pc() || as->frames[0] == ag_kernel_pc() ||
              as->frames[0] == ag_kernel_unplaced_pc() || as->frames[0] == ag_not_sampled_pc())) ||
            (i > 0 && as->frames[i] == ag_tables_pending_pc() + 1u) ||
            !bridge_is_self(i == 0 ? as->frames[i] : as->frames[i] - 1)) {
            src->frames[src->frame_count + s->depth++] = as->frames[i];
        }
    }
    src->frame_count += s->depth;
    return 0;
}

static int
bridge_sample_cmp(const void *a, const void *b)
{
    const struct bridge_sample *x = a, *y = b;

    if (x->timestamp_ns != y->timestamp_ns) {
        return x->timestamp_ns < y->timestamp_ns ? -1 : 1;
    }
    return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int
bridge_write_payload(struct nt_writer *w, const struct nt_event_desc *desc, uint64_t tid,
                     uint64_t ts, const struct nt_payload *p)
{
    return nt_writer_write_payload(w, desc, tid, bridge_source.capture_tid, ts, p);
}

struct bridge_module_ctx {
    struct nt_writer *w;
    struct bridge_session *s;
    uint64_t ts;
    uint32_t highest;
    int err;
};

static int
bridge_announce_module(const struct ag_module_info *m, void *ctx)
{
    struct bridge_module_ctx *mc = ctx;
    char build_id[2 * 64 + 1] = "";
    uint8_t buf[4608];
    struct nt_payload p;
    size_t i;

    if (m->id <= mc->s->modules_announced) {
        return 0;
    }
    for (i = 0; i < m->build_id_len && i < 64; i++) {
        snprintf(build_id + 2 * i, 3, "%02x", m->build_id[i]);
    }
    nt_payload_init(&p, buf, sizeof(buf));
    nt_payload_string(&p, m->path);
    nt_payload_u64(&p, m->start);
    nt_payload_u64(&p, m->end - m->start);
    nt_payload_string(&p, build_id);
    nt_payload_u32(&p, (uint32_t)m->file.state);
    nt_payload_u64(&p, m->file.dev);
    nt_payload_u64(&p, m->file.ino);
    nt_payload_u64(&p, m->file.size);
    nt_payload_u64(&p, m->file.mtime_ns);
    nt_payload_u64(&p, m->file.ctime_ns);
    mc->err = bridge_write_payload(mc->w, &bridge_pipeprof_events[BRIDGE_EV_MODULE_LOAD - 1],
                                   BRIDGE_NO_THREAD, mc->ts, &p);
    if (m->id > mc->highest) {
        mc->highest = m->id;
    }
    return mc->err;
}

static int bridge_flush_gone(struct bridge_session *s, struct nt_writer *w, uint64_t upto,
                             uint64_t at_least);

static int
bridge_note_gone_cb(const struct ag_module_gone *g, void *ctx)
{
    struct bridge_session *s = ctx;
    int err;

    s->gone_after = g->seq;
    if (g->mapped_file || g->gone_ns < s->start_ns || g->text_end <= g->text_start) {
        /* A ReadyToRun image's code is named at the rundown only (bridge_write_names), after
         * the runtime's names; a module gone before the session has no frame in it. */
        return 0;
    }
    err = pp_grow_array((void **)&s->gone, &s->gone_cap, s->gone_count + 1, sizeof(*s->gone));
    if (err != 0) {
        return err;
    }
    s->gone[s->gone_count++] =
            (struct bridge_gone){ g->id, g->text_start, g->text_end, g->gone_ns };
    if (g->gone_ns > s->gone_last_ns) {
        s->gone_last_ns = g->gone_ns;
    }
    return 0;
}

/* Takes the modules gone since the last call into the session's list (bridge_flush_gone). */
static int
bridge_note_gone(struct bridge_session *s)
{
    return s->samples ? ag_module_gone_foreach(s->gone_after, bridge_note_gone_cb, s) : 0;
}

/* The run of thread tid, created closed when absent; NULL when out of memory. */
static struct bridge_cpu_run *
bridge_cpu_run_get(struct bridge_cpu_runs *r, int32_t tid)
{
    size_t i;

    if ((r->count + 1) * 2 > r->cap) {
        size_t ncap = r->cap != 0 ? r->cap * 2 : 64, j;
        struct bridge_cpu_run *n = calloc(ncap, sizeof(*n));

        if (n == NULL) {
            return NULL;
        }
        for (j = 0; j < r->cap; j++) {
            if (r->slots[j].tid != 0) {
                for (i = bridge_hash((uint64_t)(uint32_t)r->slots[j].tid) & (ncap - 1);
                     n[i].tid != 0; i = (i + 1) & (ncap - 1)) {
                }
                n[i] = r->slots[j];
            }
        }
        free(r->slots);
        r->slots = n;
        r->cap = ncap;
    }
    for (i = bridge_hash((uint64_t)(uint32_t)tid) & (r->cap - 1); r->slots[i].tid != 0;
         i = (i + 1) & (r->cap - 1)) {
        if (r->slots[i].tid == tid) {
            return &r->slots[i];
        }
    }
    r->slots[i].tid = tid;
    r->count++;
    return &r->slots[i];
}

/* Holds back a ThreadSample (type NT_SAMPLE_*, frames copied) or, with type 0, a CpuSample. */
static int
bridge_pending_push(struct bridge_session *s, uint64_t ts, int32_t tid, uint32_t type,
                    const uint64_t *frames, uint32_t depth, const struct nt_payload *cpu_sample)
{
    struct bridge_pending *e;

    if (pp_grow_array((void **)&s->pending, &s->pending_cap, s->pending_count + 1,
                      sizeof(*s->pending)) != 0) {
        return -ENOMEM;
    }
    e = &s->pending[s->pending_count];
    memset(e, 0, sizeof(*e));
    e->ts = ts < s->released_ns ? s->released_ns : ts; /* later than the holdback: rare */
    e->seq = s->pending_seq++;
    e->tid = tid;
    e->type = type;
    if (depth > 0) {
        e->frames = malloc(depth * sizeof(*frames));
        if (e->frames == NULL) {
            return -ENOMEM;
        }
        memcpy(e->frames, frames, depth * sizeof(*frames));
        e->depth = depth;
    }
    if (cpu_sample != NULL) {
        if (cpu_sample->err != 0 || cpu_sample->len > sizeof(e->payload)) {
            free(e->frames);
            return cpu_sample->err != 0 ? cpu_sample->err : -EOVERFLOW;
        }
        memcpy(e->payload, cpu_sample->buf, cpu_sample->len);
        e->payload_len = (uint32_t)cpu_sample->len;
    }
    s->pending_count++;
    return 0;
}

static int
bridge_pending_cmp(const void *a, const void *b)
{
    const struct bridge_pending *x = a, *y = b;

    if (x->ts != y->ts) {
        return x->ts < y->ts ? -1 : 1;
    }
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* One ThreadSample: type Managed (running) or External (not running), with a stack or none. */
static int
bridge_write_thread_sample(struct nt_writer *w, uint32_t meta, int32_t tid, uint64_t ts,
                           uint32_t type, const uint64_t *frames, uint32_t depth)
{
    uint8_t payload[8];
    struct nt_payload p;
    struct nt_event ev;

    nt_payload_init(&p, payload, sizeof(payload));
    if (type == BRIDGE_SAMPLE_WAIT) {
        nt_payload_u32(&p, NT_SAMPLE_EXTERNAL);
        nt_payload_u32(&p, NT_SAMPLE_WAIT_TAG);
    } else {
        nt_payload_u32(&p, type);
    }
    memset(&ev, 0, sizeof(ev));
    ev.metadata_id = meta;
    ev.thread_id = (uint64_t)tid;
    ev.capture_thread_id = bridge_source.capture_tid;
    ev.processor = 0xFFFFFFFFu;
    ev.timestamp = ts;
    ev.stack = depth > 0 ? frames : NULL;
    ev.stack_depth = depth < NT_MAX_STACK_DEPTH ? depth : NT_MAX_STACK_DEPTH;
    ev.payload = payload;
    ev.payload_size = (uint32_t)p.len;
    return nt_writer_write(w, &ev);
}

/*
 * A CPU-mode sample as TraceEvent's thread-time computer (dotnet-trace convert, PerfView's
 * Thread Time) reads it: a running ThreadSample charges its stack the time until the thread's
 * next ThreadSample, and a not-running one (External, no stack) ends that time. So a sample that
 * stands for cpu_delta_ns of CPU ending at its timestamp t is written as `weight` running samples
 * spread over [t - cpu_delta_ns, t), and the thread's interval is left open at t: the next
 * sample continues it when it starts there (a thread that kept running: one event per sample),
 * else a not-running sample closes it at t first. Counting tools see `weight` samples.
 *
 * The span is cpu_delta_ns long wherever it starts: where it cannot start at t - cpu_delta_ns
 * (the thread's previous span ends later, or its start was released already: a perf sample that
 * carries a long stretch of kernel time reaches back further than the holdback), it starts
 * there and ends after t. Squeezed into what is left before t, the time would be lost to every
 * thread-time view (a thread in system calls lost 15 % of its CPU_TIME that way). The thread's
 * later spans follow it, so the shift lasts until the thread next stops running.
 * docs/architecture.md, "CPU samples in the trace".
 */
static int
bridge_write_cpu_sample(struct bridge_session *s, const struct bridge_sample *sm,
                        const uint64_t *frames)
{
    uint64_t period = s->hz != 0 ? 1000000000u / s->hz : 10000000u;
    uint64_t eps = period / 20 < 20000u ? period / 20 : 20000u;
    uint64_t delta = sm->cpu_delta_ns != 0 ? sm->cpu_delta_ns : period;
    uint64_t start = sm->timestamp_ns > delta ? sm->timestamp_ns - delta : 0;
    uint64_t first = s->start_ns + 2000u; /* the session holds only its own time */
    struct bridge_cpu_run *run = bridge_cpu_run_get(&s->runs, sm->tid);
    uint32_t i, k = sm->weight != 0 ? sm->weight : 1;
    int err = 0;

    if (run == NULL) {
        return -ENOMEM;
    }
    if (start < first) {
        delta -= first - start < delta ? first - start : delta;
        start = first;
    }
    if (run->open && start <= run->end_ns + eps) {
        start = run->end_ns; /* it kept running */
        if (start < s->released_ns) {
            /* Its previous span's last event was released and runs on to the next event:
             * that much of this span is charged there already. */
            delta -= s->released_ns - start < delta ? s->released_ns - start : delta;
            start = s->released_ns;
        }
    } else {
        if (start < s->released_ns + 1000u) {
            start = s->released_ns + 1000u; /* back-dated beyond what was written */
        }
        if (!run->open && start < run->end_ns + 1000u) {
            start = run->end_ns + 1000u; /* its previous span ended late (above) */
        }
        if (run->snapshot == 1 && start < run->snapshot_ns + 1000u) {
            /* Its first span after its snapshot's sample, not before it: TraceEvent takes a
             * thread's first running sample for its first stack (dotnet-stack printed a final
             * sample's span that reached back past a late snapshot: CPU_TIME, no frame). */
            start = run->snapshot_ns + 1000u;
        }
        if (run->open) {
            err = bridge_pending_push(s, run->end_ns, sm->tid, NT_SAMPLE_EXTERNAL, NULL, 0, NULL);
        } else if (run->snapshot == 0 && s->snapshot_session) {
            /* A snapshot the wall sampler has not brought this thread into (its CPU sample came
             * first: an idle agent's wall thread starts with the session, 25-45 ms before its
             * first pass; or the snapshot settled without it: a thread born after, or one a pass
             * could not take): this sample's stack is the thread's first, said as the waiting
             * sample just before the span (1 us of time off the CPU). Stackless, TraceEvent's
             * first stack of the thread was UNMANAGED_CODE_TIME with no frame (dotnet-stack;
             * test-bridge-source's late-snapshot case in a fresh-clone CI run's ASan stage, with
             * the snapshot already over when the thread's first CPU sample came). */
            err = bridge_pending_push(s, start - 1000u, sm->tid, NT_SAMPLE_EXTERNAL, frames,
                                      sm->depth, NULL);
            run->snapshot = 2;
        } else if (run->snapshot != 1) {
            /* TraceEvent charges nothing to a thread whose state it has not seen: say the
             * thread was not running just before. (A snapshot's sample said so already, with
             * its stack, which a stackless one would replace.) */
            err = bridge_pending_push(s, start - 1000u, sm->tid, NT_SAMPLE_EXTERNAL, NULL, 0, NULL);
        }
    }
    if (sm->timestamp_ns > s->gone_last_ns && start <= s->gone_last_ns) {
        /* Not back past a module's going: its names come there, and this stack may hold a
         * frame of a library loaded at its address since (bridge_flush_gone). */
        uint64_t end = start + delta;

        start = s->gone_last_ns + 1u;
        delta = end > start ? end - start : 0;
    }
    for (i = 0; i < k && err == 0; i++) {
        err = bridge_pending_push(s, start + delta * i / k, sm->tid, NT_SAMPLE_MANAGED, frames,
                                  sm->depth, NULL);
    }
    if (run->snapshot == 1) {
        run->snapshot = 2; /* it ran after its snapshot */
    }
    run->open = 1;
    run->end_ns = start + delta;
    run->batch = s->batches;
    return err;
}

/*
 * A wall sample as ThreadSample events: one, or k for a running thread's sample of weight k > 1
 * (it carries the intervals its thread waited for a core with its signal pending, its stack
 * unchanged: agent/wall.c), spread evenly back over those intervals at the session's rate, not
 * before the latest event written (an agent sampling faster for another session took them
 * closer together). TraceEvent's thread-time computer charges each running event's stack the
 * time until the thread's next event, so the wait goes to this stack and not to the previous
 * sample's; counting tools see k samples, as the session's rate would have given.
 */
static int
bridge_write_wall_sample(struct nt_writer *w, struct bridge_session *s, uint32_t meta,
                         const struct bridge_sample *sm, const uint64_t *frames)
{
    uint64_t period = s->hz != 0 ? 1000000000u / s->hz : 10000000u;
    uint32_t i, k = sm->state == AG_STATE_RUNNING && sm->weight > 1 ? sm->weight : 1;
    uint64_t t = sm->timestamp_ns, back = (uint64_t)(k - 1u) * period, first;
    int err = 0;

    first = t > back ? t - back : 0;
    first = first > s->wall_written_ns ? first : s->wall_written_ns;
    first = first > s->start_ns ? first : s->start_ns;
    if (t > s->gone_last_ns && first <= s->gone_last_ns) {
        first = s->gone_last_ns + 1u; /* as bridge_write_cpu_sample */
    }
    first = first < t ? first : t;
    for (i = 0; i < k && err == 0; i++) {
        err = bridge_write_thread_sample(
                w, meta, sm->tid, k > 1 ? first + (t - first) * i / (k - 1u) : t,
                sm->state == AG_STATE_RUNNING ? NT_SAMPLE_MANAGED : NT_SAMPLE_EXTERNAL, frames,
                sm->depth);
    }
    s->wall_written_ns = t > s->wall_written_ns ? t : s->wall_written_ns;
    return err;
}

/*
 * A wall sample in a session that takes a stack snapshot, until the wall sampler has one of
 * every thread: every thread's stack once (its first), as a waiting-type sample (TraceEvent's
 * thread-time computer charges it as time not on the CPU, until the thread's next sample),
 * unless the thread is already in an open CPU interval.
 */
static int
bridge_take_snapshot(struct bridge_session *s, const struct bridge_sample *sm,
                     const uint64_t *frames)
{
    struct bridge_cpu_run *run;

    if (sm->depth == 0) {
        return 0;
    }
    run = bridge_cpu_run_get(&s->runs, sm->tid);
    if (run == NULL) {
        return -ENOMEM;
    }
    if (run->snapshot || run->open) {
        return 0;
    }
    run->snapshot = 1;
    run->snapshot_ns = sm->timestamp_ns > s->released_ns ? sm->timestamp_ns : s->released_ns;
    return bridge_pending_push(s, sm->timestamp_ns, sm->tid, NT_SAMPLE_EXTERNAL, frames, sm->depth,
                               NULL);
}

/* Closes the open intervals of threads that had no sample in this drain (or of all, at the end):
 * they stopped running at their last sample's time. */
static int
bridge_close_cpu_runs(struct bridge_session *s, int all)
{
    size_t i;
    int err = 0;

    for (i = 0; i < s->runs.cap && err == 0; i++) {
        struct bridge_cpu_run *run = &s->runs.slots[i];

        if (run->tid != 0 && run->open && (all || run->batch != s->batches)) {
            uint64_t frames[AG_MAX_FRAMES];
            uint32_t depth = 0, d;

            /* The stack the thread waits in now, so that a thread-time view (dotnet-trace
             * report, PerfView; of pipeprof record's traces too) charges the time off the CPU to
             * a place; the walk is a few /proc reads, once per stop. */
            if (!all) {
                uint32_t n = ag_thread_wait_stack(run->tid, frames, AG_MAX_FRAMES);

                for (d = 0; d < n; d++) { /* the agent's own interposers are not the host's */
                    if (!bridge_is_self(d == 0 ? frames[d] : frames[d] - 1)) {
                        frames[depth++] = frames[d];
                    }
                }
            }
            err = bridge_pending_push(s, run->end_ns, run->tid,
                                      depth > 0 ? BRIDGE_SAMPLE_WAIT : NT_SAMPLE_EXTERNAL, frames,
                                      depth, NULL);
            run->open = 0;
        } else if (run->tid != 0 && all && run->snapshot == 1) {
            /* A thread that never ran after its snapshot waited there to the end. TraceEvent
             * charges a sample when the thread's next one comes: this is that one. */
            err = bridge_pending_push(s, nt_clock_now(), run->tid, NT_SAMPLE_EXTERNAL, NULL, 0,
                                      NULL);
            run->snapshot = 2;
        }
    }
    return err;
}

/*
 * Writes the held-back events up to `until` (all of them when `until` is UINT64_MAX) in time
 * order. A later drain seldom makes an earlier event: its samples' CPU time mostly reaches back
 * less than the holdback (bridge_holdback_ns), and a span that would start earlier starts after
 * what was released (bridge_write_cpu_sample); a lone event is clamped to it.
 */
static int
bridge_release_pending(struct bridge_session *s, struct nt_writer *w, uint64_t until)
{
    const struct nt_event_desc *cpu_desc = &bridge_pipeprof_events[BRIDGE_EV_CPU_SAMPLE - 1];
    uint32_t meta = 0, d;
    size_t i, n = 0;
    int err = 0;

    if (s->pending_count == 0) {
        return s->gone_count > 0 ? bridge_flush_gone(s, w, until, s->released_ns) : 0;
    }
    qsort(s->pending, s->pending_count, sizeof(*s->pending), bridge_pending_cmp);
    while (n < s->pending_count && s->pending[n].ts <= until) {
        n++;
    }
    if (n > 0) {
        err = nt_writer_define(w, nt_known_event_desc(NT_KNOWN_THREAD_SAMPLE), &meta);
    }
    for (i = 0; i < n && err == 0; i++) {
        const struct bridge_pending *e = &s->pending[i];

        if (s->gone_count > 0 && s->gone[0].gone_ns <= e->ts) {
            err = bridge_flush_gone(s, w, e->ts, s->released_ns);
            if (err != 0) {
                break;
            }
        }
        if (e->type != 0) {
            err = bridge_write_thread_sample(w, meta, e->tid, e->ts, e->type, e->frames, e->depth);
            for (d = 0; d < e->depth && err == 0; d++) { /* for the names (bridge_write_names) */
                err = bridge_addr_set_add(&s->addrs, d == 0 ? e->frames[d] : e->frames[d] - 1,
                                          e->ts);
            }
        } else {
            struct nt_payload p;

            nt_payload_init(&p, (void *)e->payload, sizeof(e->payload));
            p.len = e->payload_len;
            err = bridge_write_payload(w, cpu_desc, BRIDGE_NO_THREAD, e->ts, &p);
        }
        if (e->ts > s->released_ns) {
            s->released_ns = e->ts;
        }
    }
    for (i = 0; i < n; i++) {
        free(s->pending[i].frames);
    }
    memmove(s->pending, s->pending + n, (s->pending_count - n) * sizeof(*s->pending));
    s->pending_count -= n;
    if (err == 0 && s->gone_count > 0) {
        err = bridge_flush_gone(s, w, until, s->released_ns);
    }
    return err;
}

/* How far back a CPU sample's events can reach: a few intervals, and a drain or two of lag. */
static uint64_t
bridge_holdback_ns(const struct bridge_session *s)
{
    uint64_t period = s->hz != 0 ? 1000000000u / s->hz : 10000000u;

    return 3 * period + 30000000u;
}

/* The earliest time a batch writes at: thread events go first, so no thread's events go back. */
static uint64_t
bridge_batch_time(const struct bridge_source *src, const struct bridge_session *s)
{
    uint64_t t = src->sample_count > 0 ? src->samples[0].timestamp_ns : nt_clock_now();
    uint64_t held = ag_drain_held_from();
    size_t i;

    for (i = 0; i < src->sample_count; i++) {
        const struct bridge_sample *sm = &src->samples[i];

        if (sm->mode == AG_MODE_CPU && sm->timestamp_ns - sm->cpu_delta_ns < t &&
            sm->cpu_delta_ns < sm->timestamp_ns) {
            t = sm->timestamp_ns - sm->cpu_delta_ns;
        }
    }
    for (i = 0; i < s->runs.cap; i++) {
        if (s->runs.slots[i].tid != 0 && s->runs.slots[i].open && s->runs.slots[i].end_ns < t) {
            t = s->runs.slots[i].end_ns;
        }
    }
    /* Nor, in CPU mode, past a claim the agent holds back for its thread's root (its span starts
     * there: written later, it would be shifted after what was released). */
    return s->mode == AG_MODE_CPU && held < t ? held : t;
}

/* Tells which CPU engine sampled (or wall), when it changed: report and dump show it. */
static int
bridge_write_sampling(struct bridge_session *s, struct nt_writer *w, uint64_t ts)
{
    const char *engine = "wall";
    struct ag_stats st;
    uint8_t buf[128];
    struct nt_payload p;

    ag_stats_get(&st);
    if (s->mode == AG_MODE_CPU) {
        unsigned kinds = (st.threads_perf != 0) + (st.threads_timer != 0) + (st.threads_ring != 0);

        engine = kinds > 1               ? "mixed"
                 : st.threads_perf != 0  ? "perf_event"
                 : st.threads_timer != 0 ? "timer"
                 : st.threads_ring != 0  ? "perf_ring"
                                         : "none";
    }
    if (strcmp(engine, s->engine) == 0 || (strcmp(engine, "none") == 0 && s->engine[0] != '\0')) {
        return 0;
    }
    snprintf(s->engine, sizeof(s->engine), "%s", engine);
    nt_payload_init(&p, buf, sizeof(buf));
    nt_payload_string(&p, s->mode == AG_MODE_CPU ? "cpu" : "wall");
    nt_payload_u32(&p, s->hz);
    nt_payload_string(&p, engine);
    nt_payload_u32(&p, (uint32_t)st.threads_perf);
    nt_payload_u32(&p, (uint32_t)st.threads_timer);
    nt_payload_u32(&p, st.tick_hz); /* the timers' samples come at it (report says so above it) */
    return bridge_write_payload(w, &bridge_pipeprof_events[BRIDGE_EV_SAMPLING - 1],
                                BRIDGE_NO_THREAD, ts, &p);
}

/* What counter now grew by since *last (all of it when below: a new start of the agent reset
 * it); *last becomes now. */
static uint64_t
bridge_growth(uint64_t now, uint64_t *last)
{
    uint64_t d = now >= *last ? now - *last : now;

    *last = now;
    return d;
}

/* Says what the agent could not put in any sample since the last such event, when anything, the
 * perf samples it left out as early by their thread's clock (their CPU is in later samples) and
 * the CPU before threads' first samples, the lottery's (its winners' samples stand for it).
 * A counter below its last value was reset by a new start of the agent: all of it is new. */
static int
bridge_write_losses(struct bridge_session *s, struct nt_writer *w, uint64_t ts)
{
    struct ag_stats st;
    uint8_t buf[40];
    struct nt_payload p;
    uint64_t threads, rest, early, chance, lost;

    ag_stats_get(&st);
    threads = bridge_growth(st.threads_dropped, &s->losses_threads);
    rest = bridge_growth(st.cpu_rest_ns, &s->losses_rest_ns);
    early = bridge_growth(st.perf_early, &s->losses_early);
    chance = bridge_growth(st.cpu_chance_ns, &s->losses_chance_ns);
    lost = bridge_growth(st.cpu_lost_ns, &s->losses_lost_ns);
    if (threads == 0 && rest == 0 && early == 0 && chance == 0 && lost == 0) {
        return 0;
    }
    nt_payload_init(&p, buf, sizeof(buf));
    nt_payload_u64(&p, threads);
    nt_payload_u64(&p, rest);
    nt_payload_u64(&p, early);
    nt_payload_u64(&p, chance);
    nt_payload_u64(&p, lost);
    return bridge_write_payload(w, &bridge_agent_losses_event, BRIDGE_NO_THREAD, ts, &p);
}

/*
 * Wall mode: thread, loss and module events first (at the batch's earliest time), then the
 * samples. CPU mode: the samples' events are held back (bridge_release_pending); those up to the
 * batch's time are written first, then the other events at the time up to which they were
 * released.
 */
static int
bridge_write_session(struct bridge_source *src, struct bridge_session *s, struct nt_writer *w,
                     int congested, int modules_changed, int final)
{
    const struct nt_event_desc *sample_desc = nt_known_event_desc(NT_KNOWN_THREAD_SAMPLE);
    int cpu = s->mode == AG_MODE_CPU;
    uint64_t batch_ts = bridge_batch_time(src, s), ev_ts;
    uint8_t buf[256];
    struct nt_payload p;
    uint32_t sample_meta = 0;
    size_t i, d;
    int err = 0;

    if (cpu) {
        uint64_t now = nt_clock_now(), hold = bridge_holdback_ns(s);

        /* Not past the end of a thread's open interval either: the drain that finds the thread
         * stopped writes its not-running sample there (a late drain sees samples older than the
         * holdback; clamped later, the interval would take in the time after). */
        if (batch_ts > now - (now > hold ? hold : now)) {
            batch_ts = now - (now > hold ? hold : now);
        }
        if (batch_ts < s->released_ns) {
            batch_ts = s->released_ns;
        }
    }
    if (batch_ts < s->start_ns) {
        batch_ts = s->start_ns;
    }
    ev_ts = batch_ts; /* the time of the batch's other events (CPU mode: below) */
    s->batches++;
    err = bridge_note_gone(s);
    if (err != 0) {
        return err;
    }
    if (congested) {
        uint64_t dropped = 0;

        for (i = 0; i < src->sample_count; i++) {
            dropped += src->samples[i].timestamp_ns >= s->start_ns;
        }
        s->sampled |= dropped > 0;
        while (dropped > 0 && err == 0) {
            uint32_t n = dropped > UINT32_MAX ? UINT32_MAX : (uint32_t)dropped;

            err = nt_writer_note_lost(w, src->capture_tid, n);
            dropped -= n;
        }
        return err;
    }
    if (cpu) {
        /*
         * The writer clamps an event older than the latest written to that time. This batch's
         * module, loss and thread events were written at batch_ts before the events held back
         * up to it: those all stood at that one instant, and TraceEvent's thread-time computer,
         * which charges a sample the time to its thread's next, charged them nothing (a drain's
         * worth of CPU at each such event: agent-module-reuse's liba 76.6 ms for 298 samples in
         * a CI run, 0 to 185 ms in 26 runs with a thread started every 5 ms). So the held
         * events up to batch_ts go first, and the others at the time written up to then, never
         * past it: a later sample's span reaching back before batch_ts (a late drain) would
         * have been clamped there too (test-bridge-source's
         * cpu_samples_keep_their_time_beside_thread_events).
         */
        err = bridge_release_pending(s, w, batch_ts);
        if (err != 0) {
            return err;
        }
        s->horizon_ns = batch_ts;
        ev_ts = s->released_ns > s->start_ns ? s->released_ns : s->start_ns;
    }
    if (s->pipeprof && (modules_changed || s->modules_announced == 0)) {
        struct bridge_module_ctx mc = { w, s, ev_ts, s->modules_announced, 0 };

        /* The new modules' files, as the process mapped them: a failure leaves them unknown,
         * and a reader checks them as before (by build-id, load span and times). */
        (void)!ag_modules_identify();
        err = ag_module_foreach(bridge_announce_module, &mc);
        if (err == 0) {
            err = mc.err;
        }
        if (err != 0) {
            return err;
        }
        s->modules_announced = mc.highest != 0 ? mc.highest : 1;
    }
    if (s->pipeprof) {
        err = bridge_write_sampling(s, w, ev_ts);
        if (err == 0) {
            err = bridge_write_losses(s, w, ev_ts);
        }
        if (err != 0) {
            return err;
        }
    }
    for (i = 0; i < src->thread_count && err == 0; i++) {
        const struct bridge_thread_event *te = &src->threads[i];

        if (te->kind == AG_RECORD_LOST && te->lost > te->unsampled) {
            /*
             * Samples lost in a full ring never reached us: a gap every reader reports. An
             * interval a late wall pass missed is no event dropped (the runtime's sampler, late,
             * counts nothing; TraceEvent charges the gap to the next sample): no gap, or every
             * loaded machine's trace would read "events lost". LostSamples below tells both.
             */
            uint64_t dropped = te->lost - te->unsampled;

            err = nt_writer_note_lost(w, src->capture_tid,
                                      dropped > UINT32_MAX ? UINT32_MAX : (uint32_t)dropped);
        }
        if (err != 0 || !s->pipeprof) {
            continue;
        }
        nt_payload_init(&p, buf, sizeof(buf));
        nt_payload_u64(&p, (uint64_t)te->tid);
        if (te->kind == AG_RECORD_THREAD_START) {
            nt_payload_string(&p, te->name);
            err = bridge_write_payload(w, &bridge_pipeprof_events[BRIDGE_EV_THREAD_START - 1],
                                       BRIDGE_NO_THREAD, ev_ts, &p);
        } else if (te->kind == AG_RECORD_THREAD_STOP) {
            err = bridge_write_payload(w, &bridge_pipeprof_events[BRIDGE_EV_THREAD_STOP - 1],
                                       BRIDGE_NO_THREAD, ev_ts, &p);
        } else {
            nt_payload_u64(&p, te->lost);
            nt_payload_u64(&p, te->unsampled);
            err = bridge_write_payload(w, &bridge_pipeprof_events[BRIDGE_EV_LOST_SAMPLES - 1],
                                       BRIDGE_NO_THREAD, ev_ts, &p);
        }
    }
    if (err == 0 && s->samples) {
        err = nt_writer_define(w, sample_desc, &sample_meta);
    }
    for (i = 0; i < src->sample_count && err == 0; i++) {
        const struct bridge_sample *sm = &src->samples[i];
        const uint64_t *frames = src->frames + sm->frames;

        if (s->snapshot != 0 && cpu && sm->mode == AG_MODE_WALL &&
            sm->timestamp_ns >= s->start_ns) {
            err = bridge_take_snapshot(s, sm, frames);
            continue;
        }
        /* (Wall mode: the fast passes are the session's own samples.) */
        /* Only the session's own mode: another session's CPU samples would read as this wall
         * session's (and the reverse), and the two encodings differ. */
        if (sm->timestamp_ns < s->start_ns || sm->mode != s->mode) {
            continue;
        }
        s->sampled |= sm->depth > 0 && (!cpu || sm->state == AG_STATE_RUNNING);
        if (!cpu && s->gone_count > 0 && s->gone[0].gone_ns <= sm->timestamp_ns) {
            err = bridge_flush_gone(s, w, sm->timestamp_ns, s->wall_written_ns);
            if (err != 0) {
                break;
            }
        }
        if (s->samples && cpu && sm->state == AG_STATE_RUNNING) {
            err = bridge_write_cpu_sample(s, sm, frames);
        } else if (s->samples) {
            err = bridge_write_wall_sample(w, s, sample_meta, sm, frames);
        }
        if (err == 0 && s->cpu_samples) {
            nt_payload_init(&p, buf, sizeof(buf));
            nt_payload_u64(&p, (uint64_t)sm->tid);
            nt_payload_u64(&p, sm->cpu_time_ns);
            nt_payload_u32(&p, sm->state);
            nt_payload_u32(&p, sm->mode);
            nt_payload_u32(&p, sm->unwinder);
            nt_payload_u32(&p, sm->end);
            nt_payload_u32(&p, sm->depth);
            err = cpu ? bridge_pending_push(s, sm->timestamp_ns, sm->tid, 0, NULL, 0, &p)
                      : bridge_write_payload(w, &bridge_pipeprof_events[BRIDGE_EV_CPU_SAMPLE - 1],
                                             BRIDGE_NO_THREAD, sm->timestamp_ns, &p);
        }
        /* Return addresses point after their call: name the call (address - 1). A stack held
         * back is taken in when it is written (bridge_release_pending), at its time there. */
        for (d = 0;
             d < sm->depth && err == 0 && !(cpu && s->samples && sm->state == AG_STATE_RUNNING);
             d++) {
            err = bridge_addr_set_add(&s->addrs, d == 0 ? frames[d] : frames[d] - 1,
                                      sm->timestamp_ns);
        }
    }
    if (s->snapshot != 0 && (final || s->snapshot_settled)) {
        if (ag_sampling_release(AG_MODE_WALL, BRIDGE_SNAPSHOT_HZ) != 0) { /* every thread's in */
            bridge_log_session(s->id, "release", "no snapshot sampling request");
        }
        s->snapshot = 0;
    }
    if (err == 0 && cpu && s->samples) {
        err = bridge_close_cpu_runs(s, final);
    }
    if (err == 0 && cpu) {
        err = bridge_release_pending(s, w, final ? UINT64_MAX : batch_ts);
    }
    return err;
}

/*
 * Drains the agent into the scratch arrays, sorted by time, and hands every sample to the taps.
 * Stores in *modules_changed whether the module list changed. Returns 0 or a negative errno.
 */
static int
bridge_drain_records(struct bridge_source *src, int *modules_changed)
{
    struct bridge_tap *t;
    size_t i;
    int err;

    src->sample_count = 0;
    src->frame_count = 0;
    src->thread_count = 0;
    ag_manager_start_due();
    *modules_changed = ag_modules_refresh() > 0;
    err = ag_drain(bridge_collect_record, src);
    if (src->sample_count > 1) {
        qsort(src->samples, src->sample_count, sizeof(*src->samples), bridge_sample_cmp);
    }
    for (t = src->taps; t != NULL; t = t->next) {
        for (i = 0; i < src->thread_count; i++) {
            if (src->threads[i].kind == AG_RECORD_LOST) {
                t->lost += src->threads[i].lost;
            }
        }
        for (i = 0; i < src->sample_count; i++) {
            const struct bridge_sample *sm = &src->samples[i];
            struct bridge_tap_sample ts = { sm->tid,
                                            (enum ag_mode)sm->mode,
                                            sm->timestamp_ns,
                                            sm->state == AG_STATE_RUNNING,
                                            sm->weight,
                                            sm->cpu_delta_ns,
                                            src->frames + sm->frames,
                                            sm->depth };

            t->on_sample(t->ctx, &ts);
        }
    }
    return err < 0 && err != -ESRCH ? err : 0;
}

int
bridge_tap_add(struct bridge_tap *t)
{
    struct bridge_source *src = &bridge_source;
    int err = bridge_owner_claim(src);

    if (err != 0) {
        return err;
    }
    t->lost = 0;
    t->next = src->taps;
    src->taps = t;
    return 0;
}

void
bridge_tap_remove(struct bridge_tap *t)
{
    struct bridge_source *src = &bridge_source;
    struct bridge_tap **pp;

    for (pp = &src->taps; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == t) {
            *pp = t->next;
            t->next = NULL;
            break;
        }
    }
    bridge_owner_release_if_idle(src);
}

int
bridge_tap_pump(void)
{
    struct bridge_source *src = &bridge_source;
    int modules_changed;

    if (atomic_load(&src->owner) != (int64_t)gettid() || src->taps == NULL) {
        return -EBUSY;
    }
    /* With sessions running, the diagnostic server's drain timer feeds the taps. */
    if (src->active_sessions > 0) {
        return 0;
    }
    return bridge_drain_records(src, &modules_changed);
}

/*
 * Before a drain of a session taking a stack snapshot: whether the wall sampler has one sample
 * of every thread since the session started (two in wall mode), so that this drain completes the
 * snapshot. Its last drain waits for that (bounded): the agent and the wall thread may have
 * started with the session, which a client stops 10 ms later (dotnet-stack), and a running
 * thread's sample comes when the machine schedules it. Giving up is one line on stderr, with a
 * count.
 */
static void
bridge_snapshot_settle(struct bridge_session *s, int final)
{
    static unsigned late; /* the consumer's thread only */
    char why[160];
    int err;

    for (;;) {
        err = ag_wall_settle(s->snapshot_since, final ? BRIDGE_SNAPSHOT_SETTLE_MS : 0);
        if (err == -ETIMEDOUT || s->snapshot_rounds <= 1) {
            break;
        }
        s->snapshot_rounds--;
        s->snapshot_since = nt_clock_now(); /* the next round: samples after this one's */
        if (!final) {
            err = -ETIMEDOUT; /* looked at again at the next drain */
            break;
        }
    }

    /* A thread that never answers (it keeps the signal blocked) ends it at the bound too, so
     * that the fast wall passes do not run for the whole session. */
    s->snapshot_settled = err != -ETIMEDOUT || nt_clock_now() > s->snapshot_deadline_ns;
    if (err == -ETIMEDOUT && (final || s->snapshot_settled)) {
        snprintf(why, sizeof(why),
                 "not every thread's stack came within %d ms: threads may be missing "
                 "(%u such snapshots in this process)",
                 BRIDGE_SNAPSHOT_SETTLE_MS, ++late);
        bridge_log_session(s->id, "stack snapshot", why);
    }
}

/* Whether the drained batch holds a sample that makes s sampled (as bridge_write_session
 * counts it: a stack of the session's mode since its start, running in CPU mode). */
static int
bridge_batch_samples(const struct bridge_source *src, const struct bridge_session *s)
{
    size_t i;

    for (i = 0; i < src->sample_count; i++) {
        const struct bridge_sample *sm = &src->samples[i];

        if (sm->timestamp_ns >= s->start_ns && sm->mode == s->mode && sm->depth > 0 &&
            (s->mode != AG_MODE_CPU || sm->state == AG_STATE_RUNNING)) {
            return 1;
        }
    }
    return 0;
}

static int
bridge_drain(void *ctx, const struct ipc_session_view *views, size_t n)
{
    struct bridge_source *src = ctx;
    int modules_changed, err, first_err = 0;
    size_t i;

    if (atomic_load(&src->owner) != (int64_t)gettid()) {
        return 0; /* not the owner: the records are another recording's */
    }
    for (i = 0; i < n; i++) {
        struct bridge_session *s = bridge_session_find(views[i].config->session_id);

        if (s != NULL && s->snapshot != 0) {
            bridge_snapshot_settle(s, views[i].final);
        }
    }
    for (i = 0; i < n; i++) {
        if (views[i].final) {
            /* A session's last drain: the CPU every thread burned since its last sample comes
             * in as a final sample, so the session holds all of its threads' CPU time. */
            ag_cpu_flush();
            break;
        }
    }
    first_err = bridge_drain_records(src, &modules_changed);
    for (i = 0; i < n; i++) {
        struct bridge_session *s = bridge_session_find(views[i].config->session_id);
        uint64_t counters_ts, now;

        if (s == NULL) {
            continue;
        }
        if ((s->samples || s->pipeprof) &&
            !(views[i].final && views[i].unsampled && !views[i].congested && !s->sampled &&
              !bridge_batch_samples(src, s))) { /* (a lazy session that ends without a
                                                   sample: nothing of it is sent) */
            err = bridge_write_session(src, s, views[i].writer, views[i].congested, modules_changed,
                                       views[i].final);
            if (err != 0 && first_err == 0) {
                first_err = err;
            }
        }
        if (s->counters.interval_ns == 0 || views[i].congested) {
            continue;
        }
        /*
         * The counters after the session's samples, and in CPU mode stamped where the session's
         * other events are: the writer clamps an event older than the latest written to that
         * time, so counters written first at the present squeezed the samples held back to that
         * instant, where TraceEvent's thread time gives them nothing (a CPU session with
         * EventCounterIntervalSec=0.1 gave agent-module-reuse's liba 100 ms and libb 28.6 for
         * 599 and 601 samples; test-bridge-source's cpu_samples_keep_their_time_beside_counters).
         * At the time of the last event released, as the thread events: not the batch's time,
         * which is later, and a sample whose span reaches back before it (its time is its
         * span's start; on a loaded machine a span of CPU time stretches over much more wall
         * time) came in a later drain and was clamped there: 13 samples at one instant, that
         * case charged 116 to 160 ms of 180 in 4 runs of 10 at load 21. The released time
         * stands still while no sample comes (an idle host, a session of counters alone:
         * dotnet-counters read no interval from counters that stood at the session's start,
         * tests/dotnet-counters.sh): the batch's time then, which moves with the present, once
         * the released time is BRIDGE_COUNTERS_STILL_NS behind it (a starved drain that brought
         * nothing is no idle host). Their intervals are measured at the present all the same
         * (the CPU they divide is read now).
         */
        now = nt_clock_now();
        counters_ts = now;
        if ((s->samples || s->pipeprof) && s->mode == AG_MODE_CPU && s->horizon_ns != 0) {
            counters_ts = s->samples && s->released_ns != 0 &&
                                          s->released_ns + BRIDGE_COUNTERS_STILL_NS > s->horizon_ns
                                  ? s->released_ns
                                  : s->horizon_ns;
            counters_ts = counters_ts < now ? counters_ts : now;
        }
        err = bridge_counters_drain(&s->counters, views[i].writer, src->capture_tid, now,
                                    counters_ts);
        if (err != 0 && first_err == 0) {
            first_err = err;
        }
    }
    return first_err;
}

static int
bridge_sampled(void *ctx, const struct ipc_session_config *cfg)
{
    const struct bridge_session *s = bridge_session_find(cfg->session_id);

    (void)ctx;
    return s != NULL && s->sampled;
}

/* A function or module named by the rundown. */
struct bridge_rundown_fn {
    uint64_t start;
    uint64_t size;
    uint64_t ts; /* when a sample last held an address of it: the module mapped then names it */
    uint32_t module_id;
    const char *module_path; /* unnamed: valid until ag_modules_fini() */
    uint64_t module_base;    /* unnamed: the module's load bias */
    int unnamed;             /* an address in a module whose symbols do not cover it */
};

static int
bridge_rundown_fn_cmp(const void *a, const void *b)
{
    const struct bridge_rundown_fn *x = a, *y = b;

    return x->start < y->start ? -1 : x->start > y->start;
}

/* bridge_write_names()'s selection of a gone module's addresses (gone set). */
static int
bridge_gone_holds(const struct bridge_gone *gone, uint64_t addr, uint64_t ts)
{
    struct ag_symbol sym;
    int rc;

    if (addr < gone->lo || addr >= gone->hi) {
        return 0;
    }
    rc = ag_symbolize_at(addr, ts, &sym);
    return (rc == 0 || rc == -ESRCH) && sym.module_id == gone->id;
}

static int
bridge_gone_drop(uint64_t addr, uint64_t ts, void *ctx)
{
    return bridge_gone_holds(ctx, addr, ts);
}

static int
bridge_named_stale(uint64_t addr, uint64_t ts, void *ctx)
{
    (void)ts;
    return !bridge_addr_set_has(ctx, addr);
}

/*
 * ModuleDCEnd for each module and MethodDCEndVerbose for each function that a stack of this
 * session referenced: TraceEvent then names those frames module!function. The namespace is
 * empty: TraceEvent always joins namespace and name with a dot, so frames read
 * "libc.so.6!.clone3" there (the module is no longer repeated), and pipeprof's own readers show
 * "libc.so.6!clone3". Each address is named by the module mapped when a sample last held it
 * (ag_symbolize_at). named and gone NULL: the rundown at the session's end, every address,
 * between the runtime's bounds; named: only the addresses not in named, which are added to it;
 * gone: the addresses of that module, between the bounds too, which are then taken out of the
 * session's set (a library loaded at its address later gets its own names at the rundown).
 */
static int
bridge_write_names(struct bridge_session *s, struct nt_writer *w, uint64_t ts,
                   struct bridge_addr_set *named, const struct bridge_gone *gone)
{
    int bracket = named == NULL;
    struct bridge_rundown_fn *fns = NULL;
    uint32_t *modules_done = NULL;
    size_t fn_count = 0, i, mod_count = 0;
    uint8_t *buf = NULL;
    struct nt_payload p;
    int err = 0;

    if (s->addrs.count == 0) {
        return 0;
    }
    /* Names only from the files the process mapped (ag_symbolize): a session without
     * pipeprof's events announced no module, and identified none. */
    (void)!ag_modules_identify();
    for (i = 0; gone != NULL && i < s->addrs.cap; i++) {
        if (s->addrs.slots[i] != 0 && bridge_gone_holds(gone, s->addrs.slots[i], s->addrs.ts[i])) {
            break;
        }
    }
    if (gone != NULL && i == s->addrs.cap) {
        return 0; /* no frame in it */
    }
    /* The runtime opens its rundown with MethodDCEndInit and closes it with MethodDCEndComplete:
     * TraceEvent's readers take the pair as the rundown's bounds. */
    if (bracket) {
        uint8_t init[8];

        nt_payload_init(&p, init, sizeof(init));
        nt_payload_rundown_complete(&p);
        err = bridge_write_payload(w, nt_known_event_desc(NT_KNOWN_RUNDOWN_DC_END_INIT),
                                   bridge_source.capture_tid, ts, &p);
        if (err != 0) {
            return err;
        }
    }
    fns = calloc(s->addrs.count, sizeof(*fns));
    modules_done = calloc(s->addrs.count, sizeof(*modules_done));
    buf = malloc(NT_MAX_PAYLOAD);
    if (fns == NULL || modules_done == NULL || buf == NULL) {
        err = -ENOMEM;
        goto out;
    }
    for (i = 0; i < s->addrs.cap; i++) {
        struct ag_symbol sym;
        int rc;

        if (s->addrs.slots[i] == 0 ||
            (named != NULL && bridge_addr_set_has(named, s->addrs.slots[i])) ||
            (gone != NULL && !bridge_gone_holds(gone, s->addrs.slots[i], s->addrs.ts[i]))) {
            continue;
        }
        if (named != NULL && (err = bridge_addr_set_add(named, s->addrs.slots[i], 0)) != 0) {
            goto out;
        }
        rc = ag_symbolize_at(s->addrs.slots[i], s->addrs.ts[i], &sym);
        if (rc == -ESRCH && sym.mapped_file && named != NULL) {
            /* Code in a file the runtime mapped (ReadyToRun) is named at the rundown only:
             * TraceEvent names an address by the first method event that covers it, and the
             * runtime's rundown, which names the image's methods, comes just before ours. */
            continue;
        }
        if (rc == -ESRCH) {
            /* A stripped library's internal function (libcoreclr's, Debian's libraries without
             * debug symbols): named by its module and its address in the ELF file, which
             * addr2line and a debug file resolve later, instead of nothing at all. The same
             * for code in a file the runtime mapped itself (a ReadyToRun image): by the file
             * and the offset, where the runtime's rundown did not name a method (its stubs,
             * or no rundown at all); pipeprof's readers also take the first name of an
             * address. An address in no module (JIT code) is left to the runtime's rundown. */
            fns[fn_count].start = sym.start != 0 ? sym.start : s->addrs.slots[i];
            /* its function from the unwind tables (a row per function, lib.so!0x912b0), else
             * two bytes: the address kept is a return address - 1 (the call), and TraceEvent
             * looks the return address itself up */
            fns[fn_count].size = sym.start != 0 ? sym.size : 2;
            fns[fn_count].ts = s->addrs.ts[i];
            fns[fn_count].module_id = sym.module_id;
            fns[fn_count].module_path = sym.module_path;
            fns[fn_count].module_base = sym.module_base;
            fns[fn_count].unnamed = 1;
            fn_count++;
            continue;
        }
        if (rc != 0) {
            continue;
        }
        fns[fn_count].start = sym.start;
        fns[fn_count].size = sym.size != 0 ? sym.size : 1;
        fns[fn_count].ts = s->addrs.ts[i];
        fns[fn_count].module_id = sym.module_id;
        fn_count++;
    }
    if (fn_count > 1) {
        qsort(fns, fn_count, sizeof(*fns), bridge_rundown_fn_cmp);
    }
    for (i = 0; i < fn_count && err == 0; i++) {
        struct ag_symbol sym;
        char unnamed[32];
        size_t m;

        if (i > 0 && fns[i].start == fns[i - 1].start) {
            continue; /* several addresses in one function */
        }
        if (fns[i].unnamed) {
            snprintf(unnamed, sizeof(unnamed), "0x%llx",
                     (unsigned long long)(fns[i].start - fns[i].module_base));
            memset(&sym, 0, sizeof(sym));
            sym.module_id = fns[i].module_id;
            sym.module_path = fns[i].module_path;
            sym.name = unnamed;
        } else if (ag_symbolize_at(fns[i].start, fns[i].ts, &sym) != 0 || sym.name == NULL) {
            continue;
        }
        for (m = 0; m < mod_count && modules_done[m] != sym.module_id; m++) {
        }
        if (m == mod_count) {
            modules_done[mod_count++] = sym.module_id;
            nt_payload_init(&p, buf, NT_MAX_PAYLOAD);
            nt_payload_module_dc_end(&p, sym.module_id, sym.module_path);
            err = bridge_write_payload(w, nt_known_event_desc(NT_KNOWN_MODULE_DC_END),
                                       bridge_source.capture_tid, ts, &p);
            if (err != 0) {
                break;
            }
        }
        nt_payload_init(&p, buf, NT_MAX_PAYLOAD);
        nt_payload_method_dc_end(&p, sym.module_id, fns[i].start,
                                 fns[i].size > UINT32_MAX ? UINT32_MAX : (uint32_t)fns[i].size, "",
                                 sym.name, "");
        if (p.err == -ENOSPC) { /* a name longer than an event can hold: skip it */
            continue;
        }
        err = bridge_write_payload(w, nt_known_event_desc(NT_KNOWN_METHOD_DC_END),
                                   bridge_source.capture_tid, ts, &p);
    }
    if (err == 0 && gone != NULL) { /* named: later frames at these addresses are another's */
        err = bridge_addr_set_rehash(&s->addrs, s->addrs.cap, bridge_gone_drop, (void *)gone);
        if (err == 0 && s->named.cap != 0) {
            err = bridge_addr_set_rehash(&s->named, s->named.cap, bridge_named_stale, &s->addrs);
        }
    }
    if (err == 0 && bracket) {
        nt_payload_init(&p, buf, NT_MAX_PAYLOAD);
        nt_payload_rundown_complete(&p);
        err = bridge_write_payload(w, nt_known_event_desc(NT_KNOWN_RUNDOWN_DC_END_COMPLETE),
                                   bridge_source.capture_tid, ts, &p);
    }
out:
    free(buf);
    free(modules_done);
    free(fns);
    return err;
}

/*
 * Names the addresses of each module gone by upto (its going, in the order they went), at its
 * going's time or at_least, whichever is later: after every sample that held it, before any of
 * a library loaded at its address later. TraceEvent names the addresses a method event covers
 * among those seen since their last naming, and pipeprof's reader does as TraceEvent does
 * (cli/profile.c), so the two libraries' frames keep their own names in both.
 */
static int
bridge_flush_gone(struct bridge_session *s, struct nt_writer *w, uint64_t upto, uint64_t at_least)
{
    size_t n = 0;
    int err = 0;

    while (n < s->gone_count && s->gone[n].gone_ns <= upto && err == 0) {
        uint64_t ts = s->gone[n].gone_ns > at_least ? s->gone[n].gone_ns : at_least;

        err = bridge_write_names(s, w, ts, NULL, &s->gone[n]);
        if (s->mode == AG_MODE_CPU && ts > s->released_ns) {
            s->released_ns = ts; /* nothing held back goes before it */
        } else if (s->mode != AG_MODE_CPU && ts > s->wall_written_ns) {
            s->wall_written_ns = ts;
        }
        n++;
    }
    if (n > 0) {
        memmove(s->gone, s->gone + n, (s->gone_count - n) * sizeof(*s->gone));
        s->gone_count -= n;
    }
    return err;
}

/* The session's end: every event held back is written, then every address is named. */
static int
bridge_rundown(void *ctx, const struct ipc_session_config *cfg, struct nt_writer *w)
{
    struct bridge_session *s = bridge_session_find(cfg->session_id);
    uint64_t ts = nt_clock_now();
    int err;

    if (atomic_load(&((struct bridge_source *)ctx)->owner) != (int64_t)gettid() || s == NULL) {
        return 0;
    }
    if (s->mode == AG_MODE_CPU) { /* the threads' last CPU intervals end, all is written */
        err = s->samples ? bridge_close_cpu_runs(s, 1) : 0;
        if (err == 0) {
            err = bridge_release_pending(s, w, UINT64_MAX);
        }
        if (err != 0) {
            return err;
        }
    }
    err = bridge_flush_gone(s, w, UINT64_MAX, ts);
    return err != 0 ? err : bridge_write_names(s, w, ts, NULL, NULL);
}

/*
 * ipc_event_source's names: the addresses referenced since the last call, named now, so that a
 * file cut short by the process's death names its frames. Stamped with the time up to which a
 * CPU-mode session's events are written (the writer keeps the stream in time order).
 */
static int
bridge_names(void *ctx, const struct ipc_session_config *cfg, struct nt_writer *w)
{
    struct bridge_session *s = bridge_session_find(cfg->session_id);
    uint64_t ts;

    if (atomic_load(&((struct bridge_source *)ctx)->owner) != (int64_t)gettid() || s == NULL ||
        s->named.count == s->addrs.count) {
        return 0; /* every address is named (named only ever holds addresses of addrs) */
    }
    ts = s->mode == AG_MODE_CPU && s->released_ns != 0 ? s->released_ns : nt_clock_now();
    return bridge_write_names(s, w, ts, &s->named, NULL);
}

void
bridge_agent_source_forked_child(void)
{
    size_t i;

    for (i = 0; i < IPC_MAX_SESSIONS; i++) {
        bridge_source.sessions[i].active = 0;
        bridge_source.sessions[i].acquired = 0;
    }
    bridge_source.active_sessions = 0;
    bridge_source.taps = NULL;
    atomic_store(&bridge_source.owner, 0);
}

int
bridge_agent_start(void)
{
    /* A first start takes the module list with every CFI table built here, not left to the
     * manager thread (ag_start's way, for a constructor that must not wait): the first pass
     * of a stack snapshot walks threads blocked since before the agent ran through libc's
     * frames, which frame pointers do not cross. Cheap once the list is taken (each drain
     * calls it too). */
    int err;

    /* The recording's stored tables (PIPEPROF_CFI_CACHE) before the list is taken: a `record`
     * child whose start was deferred maps them instead of building every table again. */
    ag_modules_set_cfi_cache(bridge_source.defaults.cfi_cache);
    err = ag_modules_refresh();

    if (err < 0) {
        fprintf(stderr, "pipeprof: modules: %s; unwinding uses frame pointers only\n",
                strerror(-err));
    }
    return ag_start(&bridge_source.defaults);
}

void
bridge_agent_source_init(struct ipc_event_source *out, const struct ag_config *defaults)
{
    bridge_source.defaults = *defaults;
    out->session_start = bridge_session_start;
    out->drain = bridge_drain;
    out->rundown = bridge_rundown;
    out->session_stop = bridge_session_stop;
    out->sampling_interval_ns = bridge_session_interval;
    out->ctx = &bridge_source;
    out->names = bridge_names;
    out->sampled = bridge_sampled;
}
