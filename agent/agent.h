/* SPDX-License-Identifier: MIT */
/*
 * agent/agent.h - public API of the sampling agent (pp_agent): configuration, lifecycle,
 * refcounted sampling, and the drain that hands samples and thread events to one consumer
 * thread. The agent samples every thread of the process except its own, from a signal handler
 * that writes into preallocated per-thread rings; it never allocates or locks in that handler.
 * Context: the functions below run on ordinary threads (never in a signal handler); each says
 * which locks it takes. The agent depends on libc, pthread, libelf and host/ only.
 *
 * The file names the owner of each section: agent/agent.c, config.c, threads.c, timer.c,
 * ring.c, drain.c, wall.c and the sig-*.c files for the sampler above; agent/modules.c and
 * agent/symtab.c for "modules and symbols" at the end.
 *
 * Interposition: the libc calls the agent needs to see (pthread_create, the blocking calls, the
 * signal mask) are defined in host/ (host/host.h), which calls back into the agent through the
 * hooks of agent/host-hooks.c. They take effect for the whole process when they are inside an
 * LD_PRELOADed library that exports them (its version script must list them), and, when pp_agent
 * (which links them) is linked into an executable, for that executable's own calls. Elsewhere
 * threads are still found by scanning /proc/self/task, and blocked threads fall back to
 * /proc/self/task/TID/syscall.
 */
#ifndef AG_AGENT_H
#define AG_AGENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

/* Upper bounds of the configurable limits. */
#define AG_MAX_FRAMES  256  /* deepest stack a sample can hold */
#define AG_HZ_MAX      1000 /* per-thread sampling rate cap (see docs: VM timer cost) */
#define AG_NAME_MAX    16   /* thread name, with its NUL (the kernel's TASK_COMM_LEN) */
#define AG_MAX_THREADS 8192 /* PIPEPROF_MAX_THREADS cap */

/* What triggers samples. Values are part of the record format. */
enum ag_mode {
    AG_MODE_CPU = 1,  /* per-thread CPU sampling (enum ag_cpu_engine): running threads only */
    AG_MODE_WALL = 2, /* a sampler thread: every thread, running or waiting */
};

/*
 * How CPU mode is timed (PIPEPROF_CPU_ENGINE). Either way a sample carries the thread CPU time
 * it stands for (cpu_delta_ns) and its weight, so totals match the threads' own CPU time.
 */
enum ag_cpu_engine {
    AG_CPU_ENGINE_AUTO = 0,  /* timers up to the kernel's tick rate; above it perf_event where
                                the kernel allows it, else timers, per thread (timer.c says why) */
    AG_CPU_ENGINE_PERF = 1,  /* perf_event_open(cpu-clock, this thread, user space only): timed by
                                high-resolution timers, so any rate up to AG_HZ_MAX is kept;
                                allowed without privilege at perf_event_paranoid <= 2 */
    AG_CPU_ENGINE_TIMER = 2, /* timer_create(thread CPU clock): expiries are seen at the
                                scheduler tick, merged ones come back as weight */
    AG_CPU_ENGINE_PERF_RING = 3, /* prototype, opt-in only: perf's cpu-clock event writing each
                                    sample (registers, a copy of the user stack) into a ring
                                    buffer per thread, read and unwound by an agent thread: no
                                    signal (agent/perf-ring.c); user time only */
};

enum ag_log_level {
    AG_LOG_ERROR = 0,
    AG_LOG_WARN = 1,
    AG_LOG_INFO = 2,
    AG_LOG_DEBUG = 3,
};

/* Configuration; fill with ag_config_init() then ag_config_from_env(). Caller's storage. */
#define AG_CFI_CACHE_DIR_MAX 256 /* PIPEPROF_CFI_CACHE's length, NUL included */

struct ag_config {
    int disabled;         /* PIPEPROF_DISABLE=1: ag_start() does nothing */
    enum ag_mode mode;    /* PIPEPROF_MODE=cpu|wall (default cpu): the default session mode */
    int mode_set;         /* PIPEPROF_MODE was given: it also holds for sessions of other tools
                             that ask for thread time (bridge/agent-source.c) */
    unsigned hz;          /* PIPEPROF_HZ=1..AG_HZ_MAX (default 99): the default session rate */
    int signo;            /* PIPEPROF_SIGNAL=SIGPROF|PROF|27|SIGRTMIN+3 (default SIGPROF) */
    unsigned ring_slots;  /* PIPEPROF_RING_SLOTS: samples per thread ring, power of two,
                             16..65536 (default 256) */
    unsigned max_frames;  /* PIPEPROF_MAX_FRAMES=4..AG_MAX_FRAMES (default 128) */
    unsigned max_threads; /* PIPEPROF_MAX_THREADS=1..AG_MAX_THREADS (default 1024) */
    unsigned scan_ms;     /* PIPEPROF_SCAN_MS=10..10000: /proc/self/task rescan (default 100) */
    /* tests only, PIPEPROF_TEST_CFI_DELAY_MS=0..60000: the manager builds no CFI table until
     * that long after it started */
    unsigned test_cfi_delay_ms;
    /* tests only, PIPEPROF_TEST_RING_HOLD_MS=0..1000: perf-ring's rings are sized to hold that
     * long of samples at the rate (0: the default, 25 ms); PIPEPROF_TEST_RING_READ_MS=0..10000:
     * the manager reads them that often (0: half of what they hold) */
    unsigned test_ring_hold_ms;
    unsigned test_ring_read_ms;
    unsigned test_fixed_phase;     /* PIPEPROF_TEST_FIXED_PHASE=1: first expiry a full interval */
    enum ag_cpu_engine cpu_engine; /* PIPEPROF_CPU_ENGINE=auto|perf|timer|perf-ring (default
                                      auto); perf does not fall back: a thread it cannot open is
                                      counted in threads_dropped; perf-ring falls back to perf's
                                      signal for a thread whose ring cannot be mapped */
    enum ag_log_level log_level; /* PIPEPROF_LOG_LEVEL=error|warn|info|debug|0..3 (default warn) */
    char cfi_cache[AG_CFI_CACHE_DIR_MAX]; /* PIPEPROF_CFI_CACHE=DIR (default ""): a directory
                                             whose unwind tables this process shares with the
                                             others of a recording (agent/cfi.h) */
};

/* Fills cfg with the defaults above. */
void ag_config_init(struct ag_config *cfg);

/*
 * Reads the PIPEPROF_* variables above into cfg (unset variables keep cfg's values).
 * Returns 0, or -EINVAL with a one-line reason naming the variable and the accepted values in
 * err (NUL-terminated, truncated to errlen; err may be NULL when errlen is 0). On error cfg may
 * be partly updated. Context: any thread; reads the environment (not thread-safe vs setenv).
 */
PP_MUST_USE int ag_config_from_env(struct ag_config *cfg, char *err, size_t errlen);

/*
 * Starts the agent: installs the signal handler (SA_SIGINFO|SA_RESTART), registers the calling
 * thread and every thread in /proc/self/task, and starts the manager thread (thread discovery,
 * timer arming, wall sampling); when the recording's CFI cache (PIPEPROF_CFI_CACHE) holds every
 * loaded module's table, the manager starts later, at ag_manager_start_due(). No sample is taken
 * until ag_sampling_acquire(). cfg is copied. Returns 0 (also when already started or
 * cfg->disabled), -EBUSY when cfg->signo already has a handler installed by someone else, or a
 * negative errno. Context: any ordinary thread. Locking: takes the agent lifecycle lock; must not
 * be called from a sampled signal handler.
 */
PP_MUST_USE int ag_start(const struct ag_config *cfg);

/*
 * Registers the agent's fork() handlers (once; ag_start() does it too): the prepare handler takes
 * the module lock, the child's resets the agent's locks and state. A library whose own child
 * handler starts a thread that may call ag_start() registers them first, since child handlers run
 * in the order they were registered.
 */
void ag_fork_handlers_register(void);

/*
 * The agent's own fork() handlers registered again, whatever was registered before (not the fd
 * gate's and the loader's, which ag_fork_handlers_register() registers first: the caller
 * registers those again before it): after a vfork()ed child's exit() unregistered every handler
 * of the library (shim/shim.c, shim_vfork_parent).
 */
void ag_fork_handlers_register_again(void);

/*
 * Stops sampling, joins the agent's threads, deletes every timer and restores the previous
 * handler of the signal. Undrained records are discarded. Idempotent. Call ag_stop() before
 * ag_modules_fini(). Context: any ordinary thread but the consumer inside ag_drain()'s callback.
 */
void ag_stop(void);

/*
 * Starts the manager thread that ag_start() left for later once it is due: its first thread scan
 * (PIPEPROF_SCAN_MS after the start), or a handler's wake before that. A short-lived process,
 * whose first scan never comes, then creates no thread for it. The consumer calls this at each
 * drain. Cheap when nothing is due; never waits for a lock. Context: any ordinary thread.
 */
void ag_manager_start_due(void);

/*
 * Enables sampling in mode at hz for one consumer (a session). Requests are refcounted: the
 * agent samples in CPU mode while at least one CPU request is held and in wall mode while at
 * least one wall request is held (both at once when sessions differ); each mode runs at the
 * highest hz among its requests, so a session may receive more samples than it asked for and
 * should use timestamps, not counts, for rates. Samples carry their trigger mode.
 * Returns 0, -EINVAL (bad mode, hz 0 or above AG_HZ_MAX), -ENOSPC (too many requests) or
 * -ESRCH (agent not started). Context: any ordinary thread. Locking: lifecycle lock.
 */
PP_MUST_USE int ag_sampling_acquire(enum ag_mode mode, unsigned hz);

/*
 * Where the CPU time of the next first arming starts (a start that sampling was deferred for: a
 * `record` child whose session begins on the loop thread a few ms after its constructor): thread
 * tid's first sample stands for its CPU time since cpu_ns (its clock at the constructor), every
 * other thread's for its whole CPU time, so that no CPU time the deferral spent unsampled goes
 * unweighed. Used by the next ag_sampling_acquire() only (and dropped by it and by ag_stop()).
 * Context: any ordinary thread, before that acquire.
 */
void ag_cpu_origin_set(int32_t tid, uint64_t cpu_ns);

/* Releases one request made with the same mode and hz. Returns 0 or -ENOENT. */
PP_MUST_USE int ag_sampling_release(enum ag_mode mode, unsigned hz);

/*
 * Waits until the wall sampler has, since since_ns (CLOCK_MONOTONIC), a sample of every thread
 * it samples in a ring (or found nothing to take: a stopped thread, a full ring, counted): a
 * running thread's is taken by its signal handler when the thread next runs, which on a loaded
 * machine can be tens of ms after the pass. The next ag_drain() then holds every thread: a stack
 * snapshot stopped at once after the agent started still has all of them. Returns 0, -ESRCH
 * when no wall sampling runs, or -ETIMEDOUT after timeout_ms (0: only looks). Context: the
 * consumer thread; polls every 0.5 ms.
 */
PP_MUST_USE int ag_wall_settle(uint64_t since_ns, unsigned timeout_ms);

/*
 * The stack thread tid waits in now: the one its interposed blocking call noted at its entry (the
 * call's libc function over the caller's stack, as a wall sample of the thread has it), whatever
 * its state; else, if it waits (state S or D), walked from its registers in
 * /proc/self/task/TID/syscall with non-faulting reads, as the wall sampler walks a blocked
 * thread, frames outside executable code ending it. Returns the depth, 0 when the thread runs, is
 * runnable outside such a call or is gone. Context: the agent's consumer (ag_drain's thread); a
 * copy, or tens of microseconds.
 */
uint32_t ag_thread_wait_stack(int32_t tid, uint64_t *frames, uint32_t max);

/* Why a stack ends. Values are part of the record format. */
enum ag_unwind_end {
    AG_UNWIND_END_ROOT = 0,        /* reached the outermost frame (fp 0 or ra 0, CFI end) */
    AG_UNWIND_END_FP_INVALID = 1,  /* fp misaligned, not moving up, or outside the stack, and no
                                      CFI row covers pc */
    AG_UNWIND_END_CFI_FAILED = 2,  /* a CFI row exists but its rule is unsupported or the result
                                      does not move up the stack */
    AG_UNWIND_END_READ_FAULT = 3,  /* a needed word was not safely readable */
    AG_UNWIND_END_DEPTH_LIMIT = 4, /* max_frames reached */
    AG_UNWIND_END_LEAF_ONLY = 5,   /* only a pc was known (blocked thread seen via /proc) */
    AG_UNWIND_END_NOT_CODE = 6,    /* the next frame lies outside every executable mapping (a
                                      corrupt or foreign stack): the stack is cut there */
    /* the walk met a module whose unwind table was still being built and stopped short of a CFI
     * root: the stack is cut, and ag_tables_pending_pc() + 1 stands as its root */
    AG_UNWIND_END_TABLES_PENDING = 7,
};

/* Which unwinder produced the last frame. */
enum ag_unwinder {
    AG_UNWINDER_NONE = 0, /* leaf pc only */
    AG_UNWINDER_FP = 1,
    AG_UNWINDER_CFI = 2,
};

enum ag_thread_state {
    AG_STATE_RUNNING = 1,
    AG_STATE_WAITING = 2, /* blocked (S/D) when a wall sample was taken */
};

/* Where the frames of a sample come from. */
enum ag_sample_source {
    AG_SOURCE_SIGNAL = 1,  /* the thread's own signal handler (CPU timer or wall signal) */
    AG_SOURCE_BLOCKED = 2, /* the stack recorded when the thread entered an interposed call:
                              its leaf the entry of the libc function called, then the caller's
                              return addresses */
    AG_SOURCE_PROC = 3,    /* /proc/self/task/TID/syscall: pc and sp of a blocked thread */
    AG_SOURCE_TAIL = 4,    /* CPU mode: the CPU a thread burned after its last sample, claimed
                              when it exited or by ag_cpu_flush(); its frames are those of the
                              thread's last CPU sample, else (a thread started by pthread_create
                              that had none) its start routine under start_thread. Also claimed
                              as a thread blocks the sampling signal (pthread_sigmask,
                              sigprocmask): then its frames are that call's stack, its leaf the
                              call's return address. A perf thread's comes with its kernel time
                              split off first (AG_SOURCE_KERNEL); one auto's move claims, and
                              what an auto timer sample or final sample stands for beyond its
                              own interval when the thread looks late (split off by the handler,
                              by the claim), has ag_not_sampled_pc() over the thread's root */
    AG_SOURCE_UNSEEN = 5,  /* CPU mode: CPU the thread burned while it blocked the sampling
                              signal, so no sample saw where: claimed as it opens the signal
                              again, at each ag_drain() while it stays blocked, and at its exit
                              or a flush. frames[0] is ag_unseen_pc() (the marker function
                              pipeprof_cpu_while_signal_blocked), then the stack of the call
                              that blocked the signal (a thread that started with it blocked:
                              of the call that opens it, else its start routine under its
                              callers, else nothing). Counted, never given to a stack it did
                              not run. */
    AG_SOURCE_KERNEL =
            6, /* CPU mode: CPU time the thread spent in the kernel, split off a
                  perf_event sample (an unprivileged event skips the overflows that
                  fall in the kernel, so a sample's weight beyond one interval is
                  kernel time: timer.c). frames[0] is ag_kernel_pc() (named
                  "[kernel]"), then the stack of a system call the thread's kernel
                  locator (a CPU-time timer, whose signal arrives as the call returns)
                  saw: the split is shared among the calls seen since the thread's
                  previous sample, else the latest within 200 ms of its CPU; when none is,
                  ag_kernel_unplaced_pc() over the stack of the perf sample it was
                  split from (at the thread's end: over its start routine): kernel
                  time not placed, counted in ag_stats.cpu_kernel_unplaced_ns. (Timer-engine samples
                  taken as a system call returns are AG_SOURCE_SIGNAL with the same leaf.) */
};

/* One sample. Frames are instruction addresses, leaf first; frames[0] is the interrupted pc (of
 * a signal sample and of a final sample, AG_SOURCE_TAIL) and the others are return addresses
 * (subtract 1 before symbolizing). */
struct ag_sample {
    uint64_t timestamp_ns; /* CLOCK_MONOTONIC */
    uint64_t cpu_time_ns;  /* the thread's CPU time (CLOCK_THREAD_CPUTIME_ID) at the sample */
    int32_t tid;
    uint8_t mode;          /* enum ag_mode that triggered it */
    uint8_t state;         /* enum ag_thread_state */
    uint8_t source;        /* enum ag_sample_source */
    uint8_t unwinder;      /* enum ag_unwinder of the last step */
    uint8_t end;           /* enum ag_unwind_end */
    uint8_t engine;        /* CPU mode: enum ag_cpu_engine that timed it (PERF or TIMER) */
    uint16_t weight;       /* CPU mode: sampling intervals it stands for, >= 1 (cpu_delta_ns divided
                              by the interval, rounded); wall mode: 1, and a running thread's
                              signal sample also the passes that found the signal pending while
                              the thread waited for a core (its stack unchanged; at most
                              one second of intervals) */
    uint64_t cpu_delta_ns; /* CPU mode: the thread's CPU time since its previous sample (or since
                              sampling was armed): what this sample stands for; wall mode: 0 */
    uint32_t depth;        /* frames used */
    uint64_t frames[];
};

enum ag_record_kind {
    AG_RECORD_SAMPLE = 1,
    AG_RECORD_THREAD_START = 2, /* first record of a thread; also when its name changed */
    AG_RECORD_THREAD_STOP = 3,
    AG_RECORD_LOST = 4, /* samples dropped (ring full) and wall intervals missed since the last
                           LOST record (struct ag_record's unsampled tells them apart) */
};

/* One drained record. Borrowed: valid only during the callback. */
struct ag_record {
    enum ag_record_kind kind;
    int32_t tid;
    union {
        const struct ag_sample *sample; /* AG_RECORD_SAMPLE */
        const char *name;               /* AG_RECORD_THREAD_START: NUL-terminated */
        uint64_t lost;                  /* AG_RECORD_LOST */
    } u;
    /*
     * AG_RECORD_LOST: how many of u.lost are wall intervals the thread went without a sample
     * because the wall pass came late. No sample was taken, so none was dropped: a consumer
     * that reports dropped events (a nettrace's sequence gaps) leaves them out; one that counts
     * a sample per interval counts them. Else 0.
     */
    uint64_t unsampled;
};

/* Drain callback: returns 0 to continue, nonzero to stop (ag_drain returns it). */
typedef int (*ag_record_fn)(const struct ag_record *rec, void *ctx);

/*
 * Hands every pending record to fn, thread by thread: a thread's START precedes its samples,
 * which precede its STOP; records of different threads are not time-ordered (sort by
 * timestamp_ns if needed). Those of exited threads whose slots a registration reclaimed since
 * the last drain (threads.c) come first. Returns the number of records delivered, fn's nonzero
 * value, or -ESRCH when the agent is not started. A record is consumed once: there is one consumer,
 * and fan-out to several sessions is the consumer's job. Context: one consumer thread (the IPC
 * loop); fn must not call ag_stop(). Locking: takes the drain lock and briefly the registry lock.
 */
PP_MUST_USE int ag_drain(ag_record_fn fn, void *ctx);

/*
 * The earliest time (CLOCK_MONOTONIC ns) that a record the last ag_drain() held back for a later
 * drain reaches back to (the start of the span of CPU a [not sampled] claim stands for, which
 * waits for its thread's first stack that reaches the thread's root: docs/architecture.md), or
 * UINT64_MAX when it held none. A consumer that writes events in time order writes none after it
 * yet. Context: ag_drain()'s thread, after it.
 */
uint64_t ag_drain_held_from(void);

/* Counters since ag_start(); read with ag_stats_get(). */
struct ag_stats {
    uint64_t samples;           /* records produced (all modes) */
    uint64_t samples_cpu;       /* produced by CPU timers */
    uint64_t samples_wall;      /* produced by the wall sampler, running + waiting */
    uint64_t samples_waiting;   /* wall samples of blocked threads */
    uint64_t lost;              /* dropped because a ring was full, and wall_unsampled */
    uint64_t wall_unsampled;    /* wall intervals a thread went without a sample: the wall pass
                                   came late (many threads at a high rate); in lost too and in
                                   the LOST records of the thread */
    uint64_t wall_held;         /* wall intervals a running thread waited for a core with its
                                   sampling signal pending: carried by that signal's sample as
                                   weight beyond its own interval */
    uint64_t offstack;          /* samples skipped because the interrupted code ran on an
                                   alternate signal stack (not the thread's, maybe too small to
                                   walk); in lost too and in the LOST records of the thread */
    uint64_t timer_overruns;    /* CPU-timer expiries the kernel merged (si_overrun) */
    uint64_t cpu_weight;        /* sum of CPU samples' weights (>= samples_cpu) */
    uint64_t threads_perf;      /* threads sampled by the perf_event engine now */
    uint64_t threads_timer;     /* threads sampled by CPU-time timers now */
    uint64_t threads_ring;      /* threads sampled by the perf-ring engine now (no signal), and
                                   auto's on probation for a ring (perf's signal until then) */
    uint64_t ring_fallbacks;    /* perf-ring threads whose ring could not be mapped (locked
                                   memory): sampled by perf's signal instead */
    uint64_t ring_deep;         /* auto's threads kept on or moved to perf's signal: their stacks
                                   are deeper than a ring's copy (timer.c's probation and
                                   ag_pring_deep_check_locked) */
    uint64_t ring_lost;         /* samples the kernel could not write to a full perf ring
                                   (PERF_RECORD_LOST; in lost too) */
    uint64_t perf_early;        /* perf samples that came under half an interval of the thread's
                                   CPU clock after its previous one (the carry counted: perf's
                                   cpu-clock counts stolen time): not samples, their CPU went
                                   to the thread's next sample or final sample */
    uint64_t perf_refused;      /* perf_event_open failures that fell back to a timer */
    uint64_t perf_promoted;     /* threads auto moved from the timers to perf: the tick missed
                                   their runs (a bursty thread in step with the tick) */
    uint64_t dlclose_unscanned; /* the host's dlcloses whose rescans (host/dl.c) were skipped: the
                                   module lock was held, or over 16 dlcloses in 100 ms; a module
                                   they unloaded is dated by the next scan (agent/modules.c) */
    uint64_t threads_seen;      /* threads registered */
    uint64_t threads_dropped;   /* threads refused a slot (registry full of live threads) or an
                                   engine (perf, perf-ring, timer_create failures), each once
                                   until it registers (ag_thread_dropped_locked) */
    uint64_t eintr_seen;        /* agent signals that made a syscall return EINTR */
    uint64_t eintr_absorbed;    /* of those, retried by an interposer (the host never saw it) */
    uint64_t unwind_cfi_steps;  /* frames recovered by the CFI unwinder */
    uint64_t unwind_not_code;   /* stacks cut at a frame outside every executable mapping */
    uint64_t unwind_pending;    /* stacks cut where an unwind table was not built yet */
    uint64_t cpu_sampled_ns;    /* CPU time covered by CPU-mode samples (sum of deltas) */
    uint64_t cpu_tails;         /* final samples (AG_SOURCE_TAIL) claimed at exits and flushes */
    uint64_t cpu_unseen_ns;     /* CPU time burned with the sampling signal blocked (in
                                   AG_SOURCE_UNSEEN samples: where it went is not known) */
    uint64_t cpu_kernel_ns;     /* CPU time sampled in the kernel (under a [kernel] leaf frame) */
    uint64_t cpu_kernel_unplaced_ns; /* of it, time no system call's stack could be given to
                                        (perf engine: no call seen near it; under [kernel, not
                                        placed]) */
    uint64_t cpu_not_sampled_ns; /* CPU time no sample saw: under [not sampled] over the thread's
                                    start routine (auto's timers: what a tick sample or a
                                    final sample stands for beyond its own interval while the
                                    thread looks late, and what they missed before auto moved
                                    the thread to perf: timer.c) */
    uint64_t not_sampled_alone;  /* [not sampled] samples that stand alone under their thread: no
                                    root found (no stack of the thread reached it by the claim's
                                    bound: its end, a flush, 100 ms, a ring half full) */
    uint64_t not_sampled_held;   /* drains that held a thread's [not sampled] claim back for its
                                    root (with the thread's later records) */
    uint64_t cpu_rest_ns;   /* CPU time threads burned after their last sample that their end left
                               to no sample: under half an interval, the carry counted (the
                               weights' rounding covers it; a final sample takes any more) */
    uint64_t cpu_chance_ns; /* CPU time threads burned before their first sample, in the
                               timers' first-sample lottery (timer.c): its winners' samples stand
                               for it, in expectation */
    uint64_t cpu_lost_ns;   /* CPU time of the CPU samples in lost (a full ring, the kernel's
                               LOST records of a perf ring): weighed where they were dropped and
                               counted here, in no sample, not left to the thread's next */
    uint64_t memory_bytes;  /* mapped by the agent: the thread registry and every ring */
    unsigned requested_hz_cpu; /* current CPU rate (max over requests), 0 when off */
    unsigned requested_hz_wall;
    double effective_hz_cpu;  /* CPU samples per CPU-second of sampled threads (timers: about
                                 the kernel tick at most; weights make up the rest) */
    double effective_hz_wall; /* wall passes per second actually achieved */
    unsigned tick_hz;         /* the kernel's scheduler tick (ag_kernel_tick_hz), 0 unknown */
};

/*
 * The address AG_SOURCE_UNSEEN samples carry as their leaf frame: the entry of a function of the
 * agent's named pipeprof_cpu_while_signal_blocked, which never runs, so that every consumer
 * (TraceEvent through the rundown, pipeprof's own formats) shows that name where the time went
 * unseen. Consumers that hide the agent's own frames keep this one.
 */
uint64_t ag_unseen_pc(void);

/*
 * The leaf frame of CPU time spent in the kernel: the entry of an agent function that never runs
 * (pipeprof_cpu_in_kernel), which ag_symbolize() names "[kernel]" in the module AG_KERNEL_MODULE,
 * over the user stack that made the system call. Consumers that hide the agent's own frames keep
 * this one.
 */
uint64_t ag_kernel_pc(void);
/* The leaf of kernel time that no system call's stack could be given to (named "[kernel, not
 * placed]"), over the stack the thread ran on in, or its start routine: shown and counted. */
uint64_t ag_kernel_unplaced_pc(void);
/* The leaf of CPU time no sample saw, whose place is not known, only whose (named "[not
 * sampled]"), over the frames every stack of its thread shares: shown and counted. */
uint64_t ag_not_sampled_pc(void);

/* The root frame of a stack cut short because a module's unwind table was still being built
 * (AG_UNWIND_END_TABLES_PENDING), stored as this + 1 as a return address is: named
 * "[unwind tables not ready]" in module AG_UNKNOWN_MODULE. */
uint64_t ag_tables_pending_pc(void);

/*
 * Ends every thread's CPU accounting at now, without stopping sampling: the CPU each thread
 * sampled in CPU mode burned since its last sample becomes a final sample (AG_SOURCE_TAIL, with
 * the stack of the thread's last CPU sample) that the next ag_drain() delivers. A consumer calls
 * it just before its last drain, so that a recording holds all of its threads' CPU time (a
 * thread that exits gets its own at its exit). Context: any ordinary thread. Locking: takes the
 * registry lock; reads each thread's CPU clock (one system call per thread).
 */
void ag_cpu_flush(void);

/*
 * Marks the calling thread as part of the profiler (the IPC loop, say): it is never sampled and
 * interposed calls pass straight through. Works before and after ag_start(). Context: the thread.
 */
void ag_thread_exclude_self(void);

/*
 * Marks (on != 0) or unmarks the calling thread as running the profiler's own code on the host's
 * thread for a while: the constructor's wait for ResumeRuntime, the exit handler's and exec's
 * wait for the sessions' end. Wall mode takes no sample of it meanwhile (its stack there is the
 * profiler's, not the host's: a short-lived child of `pipeprof record --mode wall` got a trace
 * of those alone). CPU mode is not changed: CPU the thread burns there is the process's. Works
 * before ag_start() and across a restart; calls nest; at most 8 marks at a time are held, more
 * are sampled as before. Context: the thread; lock-free (async-signal-safe: the exit path may
 * run in a signal handler).
 */
void ag_thread_own_code(int on);

/* Copies the current counters. Context: any ordinary thread; lock-free reads. */
void ag_stats_get(struct ag_stats *out);

/*
 * Replaces the log sink (default: one line on stderr, prefixed "pipeprof: "). fn gets the level
 * and a formatted line without newline; NULL restores the default. Context: any thread.
 */
typedef void (*ag_log_fn)(enum ag_log_level level, const char *line);
void ag_log_set(ag_log_fn fn);

/* --- modules and symbols (agent/modules.c, agent/symtab.c) --- */
/*
 * Which file a module was loaded from, so that a reader of the trace can tell, without a
 * build-id, whether the file at its path now is that file (cli/names.c). The mapping's inode
 * (/proc/self/maps) is the truth; its size and times come from a stat of the path, taken only
 * when that names the same inode (a process cannot stat the mapping itself:
 * /proc/self/map_files/ is followed only with CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE).
 */
enum ag_file_state {
    AG_FILE_UNKNOWN = 0, /* not identified (yet), or no mapping of a file holds the module */
    AG_FILE_LOADED = 1,  /* the path named the mapped inode: every field is its stat's */
    AG_FILE_OTHER = 2,   /* the path named another file, or none: ino is the mapping's only */
};
struct ag_file_ident {
    enum ag_file_state state;
    uint64_t dev, ino, size; /* st_dev, st_ino, st_size */
    uint64_t mtime_ns, ctime_ns;
};

/*
 * A loaded module (executable, shared library, vdso) as ag_module_foreach() and
 * ag_module_find() report it. Strings and the build-id point into the agent's module list and
 * stay valid until ag_modules_fini(), also after the module is dlclose'd.
 */
struct ag_module_info {
    uint32_t id;                   /* 1, 2, ... in discovery order; never reused */
    const char *path;              /* file path; the executable's is resolved via /proc/self/exe */
    uint64_t base;                 /* load bias: runtime address - ELF virtual address */
    uint64_t start, end;           /* span of all PT_LOAD segments, runtime addresses */
    uint64_t text_start, text_end; /* span of the executable PT_LOAD segments */
    const uint8_t *build_id;       /* NT_GNU_BUILD_ID bytes, or NULL */
    size_t build_id_len;
    size_t cfi_rows;           /* rows of the compact DWARF CFI table; 0 when none */
    struct ag_file_ident file; /* the file it was loaded from, once ag_modules_identify() ran */
};

/*
 * Rescans the loaded modules when dlopen/dlclose changed them since the last call (compares
 * dl_iterate_phdr's dlpi_adds/dlpi_subs), builds the CFI tables of new modules and publishes a
 * new signal-safe lookup snapshot. Returns 1 when the list changed, 0 when not, or a negative
 * errno. Context: any thread but a signal handler; takes the module lock and, while it builds
 * tables, the loader lock (inside dl_iterate_phdr).
 */
PP_MUST_USE int ag_modules_refresh(void);

/* The directory of PIPEPROF_CFI_CACHE (agent/cfi.h's ag_cfi_cache_load), or "" for none, for the
 * tables built or mapped from now on. dir is copied. Context: any thread but a signal handler. */
void ag_modules_set_cfi_cache(const char *dir);

/*
 * Identifies the files of the live modules not identified yet (struct ag_file_ident): one read
 * of /proc/self/maps and a stat of each one's path. Returns 0 or a negative errno (the modules
 * stay unknown). Context: the consumer thread, as agent/codemap.c's read of the map; takes the
 * module lock, but not while it reads.
 */
PP_MUST_USE int ag_modules_identify(void);

/*
 * Calls fn for every live module, in load order, until fn returns nonzero (which is returned).
 * Returns 0 after the last module. Locking: fn runs under the module lock and must not call
 * other ag_module* or ag_symbolize functions.
 */
PP_MUST_USE int ag_module_foreach(int (*fn)(const struct ag_module_info *m, void *ctx), void *ctx);

/* Finds the live module whose executable ranges contain pc. Returns 0 or -ENOENT. */
PP_MUST_USE int ag_module_find(uint64_t pc, struct ag_module_info *out);

/* A resolved code address. Strings stay valid until ag_modules_fini(). */
struct ag_symbol {
    uint32_t module_id;
    const char *module_path;
    uint64_t module_base; /* load bias */
    const char *name;     /* demangled when possible, else the raw symbol name */
    const char *raw_name; /* as in the symbol table */
    uint64_t start;       /* runtime address of the function */
    uint64_t size;        /* from the symbol table, or up to the next symbol when it had none */
    uint64_t offset;      /* pc - start */
    int mapped_file;      /* a mapping of a file the loader does not know (a PE image the .NET
                           * runtime mapped): module fields only, module_base its first byte */
};

/* The module of the [kernel] markers, as perf shows kernel frames in a module of their own:
 * "[kernel]![kernel]" in pipeprof's outputs, "[kernel]!.[kernel]" in TraceEvent's (which puts
 * a dot before every name of a method event), never the agent's library, time a user would take
 * for the profiler's own. No module of the agent's has its id (they count up from 1). */
#define AG_KERNEL_MODULE    "[kernel]"
#define AG_KERNEL_MODULE_ID UINT32_MAX

/* The module of the [not sampled] marker (CPU no sample saw, whose code is not known), as perf
 * names a frame of no known module: "[unknown]![not sampled]", never the agent's library. */
#define AG_UNKNOWN_MODULE    "[unknown]"
#define AG_UNKNOWN_MODULE_ID (UINT32_MAX - 1)

/*
 * Resolves pc to module and function. Symbols of a module are loaded from its file (.symtab,
 * separate debug file by build-id or .gnu_debuglink, else .dynsym) on its first lookup and
 * cached. Returns 0; -ESRCH when pc lies in a module but no symbol covers it (module fields
 * are filled, name is NULL; start, size and offset too when the module's .eh_frame_hdr knows
 * the function, else 0); -ENOENT when pc is in no module. Code the loader does not know but
 * a file backs (ReadyToRun code in a PE image the .NET runtime mapped) is a module once the
 * consumer's map of code has seen it (agent/codemap.c): -ESRCH with mapped_file set. Context: not
 * signal-safe (drain or IPC thread); takes the module lock; the first lookup in a module reads its
 * file.
 */
PP_MUST_USE int ag_symbolize(uint64_t pc, struct ag_symbol *out);

/*
 * ag_symbolize() of a pc that a sample taken at ts (CLOCK_MONOTONIC ns) held: by the module that
 * was mapped there at ts, when several have been (a library unloaded and another one loaded at
 * its address): of the modules whose executable ranges hold pc, the one that went first after
 * ts (a live one goes never), else the one that went last. ag_symbolize() is ag_symbolize_at()
 * of now. A module's going is known by the scan that first misses it, or exactly by the host's
 * dlclose (host/dl.c), whose interposer scans as the call returns. Context: as ag_symbolize().
 */
PP_MUST_USE int ag_symbolize_at(uint64_t pc, uint64_t ts, struct ag_symbol *out);

/*
 * 1 when a module that has gone since ts held pc (its code was mapped at ts, as far as the list
 * knows: the drain's check of frames against the current map of code keeps such a frame).
 * Context: any thread but a signal handler; takes the module lock.
 */
int ag_module_held_at(uint64_t pc, uint64_t ts);

/* A module that went (dlclose'd, or a mapped file unmapped), as ag_module_gone_foreach() gives
 * it. path stays valid until ag_modules_fini(). */
struct ag_module_gone {
    uint32_t id;
    const char *path;
    uint64_t text_start, text_end; /* span of its executable ranges */
    uint64_t gone_ns;              /* CLOCK_MONOTONIC when it was known gone */
    uint64_t seq;                  /* 1, 2, ... in the order modules went */
    int mapped_file;               /* a file mapped by other code than the loader */
};

/*
 * Calls fn for every module that went with a seq above after, in that order, until fn returns
 * nonzero (which is returned). Locking: fn runs under the module lock and must not call other
 * ag_module* or ag_symbolize functions. Context: any thread but a signal handler.
 */
PP_MUST_USE int ag_module_gone_foreach(uint64_t after,
                                       int (*fn)(const struct ag_module_gone *g, void *ctx),
                                       void *ctx);

/*
 * After the host's dlclose returned (host/dl.c): rescans the module list, when its lock is free,
 * so that a module it unloaded is known gone from this time on, before another library can be
 * loaded at its address (new modules' tables are left to the manager). Context: the host's
 * thread, outside the loader's lock; never a signal handler.
 */
void ag_modules_note_dlclose(void);

/*
 * Frees the module list, symbol caches, CFI tables and retired snapshots. Context: only after
 * the sampler has stopped (no signal handler can be running ag_sig_cfi_step any more).
 */
void ag_modules_fini(void);

#endif /* AG_AGENT_H */
