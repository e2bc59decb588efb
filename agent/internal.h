/* SPDX-License-Identifier: MIT */
/*
 * agent/internal.h - private state of the sampler (agent/agent.c, config.c, threads.c, timer.c,
 * ring.c, drain.c, wall.c, sig-handler.c, sig-unwind.c): the thread registry, the per-thread SPSC
 * rings, initial-exec TLS, and the unwinder's signal-safe entry points. Context: the structures
 * are shared between signal handlers (producers), the manager and wall threads, and the consumer
 * in ag_drain(); every field says who writes it. Must not include uv.h or nettrace headers.
 */
#ifndef AG_INTERNAL_H
#define AG_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "agent/agent.h"
#include "common/compiler.h"
#include "host/host.h"

/* uint64_t is long or long long depending on the ABI; both must be lock-free. */
_Static_assert(ATOMIC_LONG_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2, "lock-free u64");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "lock-free int");

#define AG_TLS __attribute__((tls_model("initial-exec")))

/* si_value of the wall sampler's rt_tgsigqueueinfo(): tells the handler it is a wall sample. */
#define AG_WALL_SIVAL  0x70707770
/* si_value of the agent's CPU-time timers: a timer of the host's with the same signal is not. */
#define AG_TIMER_SIVAL 0x70707771

/*
 * Per-thread single-producer/single-consumer ring of fixed-size sample slots.
 *
 *   producer (signal handler or wall thread)   consumer (ag_drain)
 *   h = head            (relaxed)              h = load(head)       (acquire, C)
 *   t = load(tail)      (acquire, A)           read slots [tail, h)
 *   if h - t > mask: count a drop              store(tail, t + 1)   (release, D)
 *   fill slot[h & mask]
 *   store(head, h + 1)  (release, B)
 *
 *   B pairs with C: the consumer never sees a slot before its contents.
 *   D pairs with A: the producer never reuses a slot that is still being read.
 */
struct ag_ring {
    _Alignas(64) _Atomic uint64_t head; /* written by the producer only */
    _Alignas(64) _Atomic uint64_t tail; /* written by the consumer only */
    uint64_t mask;                      /* slot count - 1; a power of two */
    size_t slot_size;                   /* bytes: struct ag_sample + max_frames words */
    unsigned char *slots;               /* mmap'ed by ag_ring_init(); NULL when unset */
    size_t map_len;
};

/* Maps the slots of an empty ring (outside signal context). Returns 0 or -ENOMEM. */
PP_MUST_USE int ag_ring_init(struct ag_ring *r, unsigned slots, unsigned max_frames);
/* Unmaps; accepts a zeroed ring. Only when no producer can run any more. */
void ag_ring_fini(struct ag_ring *r);

/* Returns the next free slot, or NULL when the ring is full. Producer only. */
PP_SIGSAFE static inline struct ag_sample *
ag_ring_reserve(struct ag_ring *r)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire); /* A */

    if (r->slots == NULL || head - tail > r->mask) {
        return NULL;
    }
    return (struct ag_sample *)(void *)(r->slots + (head & r->mask) * r->slot_size);
}

/* Publishes the slot returned by ag_ring_reserve(). Producer only. */
PP_SIGSAFE static inline void
ag_ring_commit(struct ag_ring *r)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);

    atomic_store_explicit(&r->head, head + 1, memory_order_release); /* B */
}

/* Returns the oldest unread slot, or NULL when empty. Consumer only. */
static inline const struct ag_sample *
ag_ring_peek(struct ag_ring *r)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire); /* C */
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);

    if (r->slots == NULL || head == tail) {
        return NULL;
    }
    return (const struct ag_sample *)(const void *)(r->slots + (tail & r->mask) * r->slot_size);
}

/* Frees the slot returned by ag_ring_peek(). Consumer only. */
static inline void
ag_ring_release(struct ag_ring *r)
{
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);

    atomic_store_explicit(&r->tail, tail + 1, memory_order_release); /* D */
}

enum ag_slot_state {
    AG_SLOT_FREE = 0,
    AG_SLOT_ACTIVE = 1,
    AG_SLOT_EXITING = 2, /* the thread is gone or going; the consumer drains and frees */
};

/*
 * A stack a thread publishes for other threads to copy: a seqlock (odd while written) that only
 * the owning thread writes (ag_seqstack_put) and readers copy with ag_seqstack_get, which retries
 * on a change. Without fences, so TSan can check it: every word is a release store after the odd
 * seq, paired with the reader's acquire loads.
 */
struct ag_seqstack {
    _Atomic uint32_t seq;
    _Atomic uint32_t info;    /* depth | unwinder << 16 | end << 24 */
    _Atomic uint64_t *frames; /* AG_MAX_FRAMES words in the thread's mapping, set at registration */
};

/*
 * One registered thread. Slots live in one array that is never freed while the agent runs, so a
 * signal handler holding a stale pointer reads valid memory; it checks state and tid first.
 * Writers: "reg" = under ag.reg_lock; "self" = the thread itself (handler or interposer);
 * "wall" = the wall thread; "drain" = the consumer.
 */
struct ag_thread {
    _Atomic int state;         /* reg; enum ag_slot_state */
    _Atomic int32_t tid;       /* reg */
    _Atomic int excluded;      /* reg or self: an agent or consumer thread, never sampled */
    _Atomic uint64_t stack_lo; /* reg: stack bounds, 0 while unknown */
    _Atomic uint64_t stack_hi;
    _Atomic uint64_t last_sp; /* self: sp of the last signal, to find unknown bounds */
    /* CPU-mode accounting (ag_sig_cpu_weigh): the handler and a tail claim (the exiting thread,
     * or ag_cpu_flush() on another thread) each take their span with an exchange. */
    _Atomic uint64_t last_cpu_ns; /* self or claim: CPU time at the last sample or claim */
    _Atomic int64_t cpu_carry_ns; /* self or claim: CPU time not yet in weights (may be < 0) */
    _Atomic uint64_t dropped;     /* self and wall: samples lost to a full ring */
    uint64_t dropped_reported;    /* drain */
    int has_timer;                /* reg */
    timer_t timer;                /* reg */
    unsigned timer_hz;            /* reg: rate the timer or the perf event is armed at */
    int has_perf;                 /* reg: perf_fd is this thread's cpu-clock perf event */
    _Atomic int perf_fd;          /* reg; read by the handler to recognise its signal */
    int scan_seen;                /* reg: manager scratch */
    int exit_hooked;              /* reg: its key destructor will claim its final sample */
    int perf_promoted; /* reg: auto moved it from the timers to perf (ag_cpu_engine_check_locked) */
    _Atomic uint32_t timer_samples, timer_weight; /* self: timer-engine samples, their weights */
    uint32_t scan_samples, scan_weight;           /* reg: those at the previous scan */
    uint64_t scan_cpu_ns;       /* reg: CPU time at the last scan (threads not exit_hooked) */
    unsigned name_gen;          /* reg: bumped when name changes */
    unsigned name_gen_reported; /* drain */
    int announced;              /* drain: THREAD_START sent */
    char name[AG_NAME_MAX];     /* reg */
    /* The stack recorded by an interposed blocking call, read by the wall thread. */
    struct ag_seqstack blk;
    _Atomic int blocked; /* self: inside an interposed blocking call */
    /* A final sample pending (reg): the CPU the thread burned after its last sample, claimed at
     * its exit or by ag_cpu_flush(); ag_drain() delivers it (weight 0: none). */
    uint64_t tail_ts, tail_cpu_time_ns, tail_cpu_ns;
    uint32_t tail_weight;
    uint8_t tail_engine;
    uint8_t tail_unseen; /* reg: the final sample's span ran with the signal blocked */
    /* self (written by the sigmask interposers and at thread start, read by tail claims): when
     * (CLOCK_MONOTONIC) the thread blocked the sampling signal, 0 while it does not, and the
     * stack of the call that blocked it (depth 0: it started blocked), read by the drain. Wall
     * time, not the thread's CPU clock: a pair of mask calls reads no clock that costs a system
     * call unless the span may matter (half an interval of wall time at least). */
    _Atomic uint64_t sigblk_ns;
    struct ag_seqstack sigblk;
    _Atomic uint64_t last_claim_ns; /* self: CLOCK_MONOTONIC of its last CPU sample or own claim */
    _Atomic int sigblk_claimed;     /* self: an unblocking claimed the span the pending signal
                                       would have taken: the handler skips that signal */
    /* drain: the stack of the thread's last CPU sample, which its final sample carries (at
     * registration: the start routine under its callers, or none). */
    uint64_t *last_frames; /* AG_MAX_FRAMES words, in the same mapping as blk.frames */
    uint32_t last_depth;
    uint8_t last_unwinder, last_end;
    uint32_t root_depth; /* reg: frames of its start routine under its callers (0: unknown), the
                            outermost frames every stack of the thread that reaches its root
                            shares: all an unseen final sample may claim of its stack */
    /* self (the handler): resolved CFI rows (agent/cfi.h), in the same mapping; set at
     * registration. */
    struct ag_cfi_cache *cfi_cache;
    struct ag_ring ring;  /* producer: the thread's signal handler */
    struct ag_ring wring; /* producer: the wall thread (waiting samples) */
};

/* Global agent state; one instance, `ag`. Lock order: life_lock, then reg_lock. */
struct ag_agent {
    pthread_mutex_t life_lock; /* start/stop/acquire/release */
    pthread_mutex_t reg_lock;  /* the registry: slot state transitions, timers, names */
    pthread_mutex_t drain_lock;
    struct ag_config cfg; /* copied at start; immutable while running */
    _Atomic int running;  /* 1 between a successful ag_start() and ag_stop() */
    _Atomic int stopping; /* tells the agent threads to leave */
    _Atomic int inflight; /* handlers between entry and exit; ag_stop() waits for 0 */
    _Atomic unsigned gen; /* bumped per start: invalidates TLS slot caches of an old registry */
    struct ag_thread *threads; /* threads_cap slots, mmap'ed at the first start, never freed */
    unsigned threads_cap;
    _Atomic unsigned high; /* slots [0, high) have been used */
    int signo;
    pid_t pid;
    int remote_read_ok; /* process_vm_readv on self works (no seccomp block) */
    pthread_t manager;
    int manager_started;
    pthread_t wall;
    int wall_started;
    pthread_mutex_t wake_lock; /* manager/wall sleep: lets stop and acquire wake them */
    pthread_cond_t wake_cond;
    int manager_fd;    /* eventfd the manager sleeps on (-1: none, it sleeps on wake_cond): written
                          by ag_wake_all() and by a handler that met unknown code */
    unsigned wake_seq; /* wake_lock: bumped by every wake, so a sleeper tells it from a spurious
                          return of the condition wait */
    /* Sampling requests (life_lock). */
    unsigned req_n;
    struct {
        enum ag_mode mode;
        unsigned hz;
    } req[64];
    _Atomic unsigned hz_cpu; /* 0 = CPU sampling off */
    _Atomic unsigned hz_wall;
    /* Counters (relaxed atomics). */
    _Atomic uint64_t n_samples, n_cpu, n_wall, n_waiting, n_lost, n_overruns;
    _Atomic uint64_t n_threads, n_threads_dropped, n_eintr_seen, n_offstack, n_eintr_absorbed,
            n_cfi_steps;
    _Atomic uint64_t n_not_code; /* stacks cut at a frame outside every executable mapping */
    _Atomic uint64_t cpu_sampled_ns, cpu_sampled_n, n_cpu_weight, n_perf_refused, n_cpu_tails;
    _Atomic uint64_t cpu_unseen_ns; /* CPU burned with the sampling signal blocked */
    _Atomic uint64_t n_perf_promoted;
    int perf_unavailable; /* reg: perf_event_open was refused for a reason that will not pass */
    unsigned tick_hz;     /* the kernel's scheduler tick rate (ag_kernel_tick_hz()), 0 unknown */
    _Atomic uint64_t wall_passes, wall_start_ns, wall_active_ns;
};

extern struct ag_agent ag;

/* Initial-exec TLS: the handler never enters __tls_get_addr. */
extern __thread struct ag_thread *ag_tls_thread AG_TLS; /* slot cache, checked against tid */
extern __thread int32_t ag_tls_tid AG_TLS;              /* 0 until known */
extern __thread unsigned ag_tls_gen AG_TLS;             /* ag.gen when ag_tls_thread was set */
extern __thread uint64_t ag_tls_stack_lo AG_TLS;        /* set by the pthread_create wrapper */
extern __thread uint64_t ag_tls_stack_hi AG_TLS;
extern __thread int ag_tls_excluded AG_TLS;             /* agent thread: interposers pass through */
extern __thread _Atomic uint32_t ag_tls_signals AG_TLS; /* agent signals handled (for EINTR) */

/* Unwinding (agent/sig-unwind.c). */
struct ag_cfi_cache; /* agent/cfi.h */

struct ag_unwind_ctx {
    uint64_t lo, hi; /* direct reads allowed in [lo, hi): part of the current stack */
    int remote_ok;   /* other reads go through process_vm_readv */
    pid_t pid;
    struct ag_cfi_cache *cache; /* the sampled thread's CFI row cache (its handler only), or NULL */
};

struct ag_unwind_result {
    uint32_t depth;
    uint8_t unwinder; /* enum ag_unwinder of the last step */
    uint8_t end;      /* enum ag_unwind_end */
    uint32_t cfi_steps;
};

/* Reads one aligned word: 0, or -EFAULT when not safely readable. Async-signal-safe. */
PP_SIGSAFE PP_MUST_USE int ag_sig_read(void *ctx, uint64_t addr, uint64_t *out);

/*
 * Walks a stack from {pc, sp, fp} into frames (leaf first, frames[0] = pc). pc_is_ra says pc is
 * a return address (a recorded caller, not an interrupted instruction). Frame pointers first,
 * with DWARF CFI (agent/sig-cfi.c) for the interrupted leaf and whenever frame pointers give up.
 * Every read goes through ag_sig_read(c). Async-signal-safe; no allocation, no locks, no errno.
 */
PP_SIGSAFE void ag_sig_unwind(struct ag_unwind_ctx *c, uint64_t pc, uint64_t sp, uint64_t fp,
                              int pc_is_ra, uint64_t *frames, uint32_t max,
                              struct ag_unwind_result *out);

/* Sets c's direct-read window from sp and the slot's (or TLS) stack bounds. Async-signal-safe. */
PP_SIGSAFE void ag_sig_unwind_ctx_init(struct ag_unwind_ctx *c, uint64_t sp, uint64_t lo,
                                       uint64_t hi);

/* The handler (agent/sig-handler.c). */
void ag_sig_handler(int signo, siginfo_t *info, void *uctx);
/*
 * CPU-mode weight of the span of t's CPU time that ends at cpu (its thread CPU clock now): the
 * time since the previous sample or claim (exchanged in t->last_cpu_ns; *delta_out gets it, 0
 * when t had no baseline) plus t's carried remainder, in intervals of period ns, rounded; the
 * remainder is carried to the next one. A sample counts at least once (at_least_one: a span
 * without a baseline counts as one interval); a tail claim may weigh 0. Async-signal-safe and
 * lock-free: concurrent callers on t (its handler, a claim on another thread) each take a
 * disjoint span, and the carry is moved with atomic exchanges, so weights add up.
 */
PP_SIGSAFE uint64_t ag_sig_cpu_weigh(struct ag_thread *t, uint64_t cpu, uint64_t period,
                                     int at_least_one, uint64_t *delta_out);
/* Finds the calling thread's slot (TLS cache, else by tid). Async-signal-safe. */
PP_SIGSAFE struct ag_thread *ag_sig_thread_self(void);
PP_SIGSAFE uint64_t ag_sig_now_ns(clockid_t clk);

/* Threads (agent/threads.c). */
PP_MUST_USE int ag_threads_start(void); /* allocate the registry, register the caller + scan */
void ag_threads_stop(void);             /* delete timers, free rings; slots stay mapped */
void ag_threads_scan(void);             /* manager: /proc/self/task, names, bounds */
/* Registers the calling thread with its stack bounds (pthread_getattr_np); a no-op while the
 * agent is stopped or for an excluded thread. Not in signal context. */
void ag_thread_attach_self(void);
/* ag_thread_attach_self() of a thread that the pthread_create interposer started: fn is its
 * start routine and fa the trampoline's frame address; fn under the trampoline's callers is the
 * stack its CPU belongs to until it has a sample (a final sample's stack, drain.c). */
void ag_thread_attach_started(void *(*fn)(void *), uint64_t fa);
struct ag_thread *ag_thread_register_locked(int32_t tid, int self);
void ag_thread_release_locked(struct ag_thread *t); /* EXITING -> FREE (drain) */
int32_t ag_gettid(void);
/* The owner publishes a stack (res: its walk's result); another thread copies it into frames (up
 * to max), 0, or -EAGAIN when it is empty or kept changing (threads.c). */
void ag_seqstack_put(struct ag_seqstack *st, const uint64_t *frames,
                     const struct ag_unwind_result *res);
int ag_seqstack_get(struct ag_seqstack *st, uint64_t *frames, uint32_t max, uint32_t *depth,
                    uint8_t *unwinder, uint8_t *end);
/* At a thread's registration: notes that it starts with the sampling signal blocked
 * (host-hooks.c, where the sigmask hook keeps t->sigblk_ns). */
void ag_thread_sigmask_started(struct ag_thread *t);

/* Installs the agent's hooks in the host contract (host/host.h) and links its interposers into
 * whatever starts the agent; see agent/host-hooks.c. */
void ag_interpose_init(void);
/* Creates an agent thread (host/host.h: the real pthread_create, all signals blocked). 0 or
 * -errno. */
PP_MUST_USE static inline int
ag_thread_spawn(pthread_t *th, void *(*fn)(void *), void *arg)
{
    return host_thread_spawn(th, NULL, fn, arg);
}
/* fork() child: forget the calling thread's cached identity (threads.c; called by agent.c's
 * atfork handler, which then turns the agent off there). */
void ag_threads_forked_child(void);

/* Timers and the signal (agent/timer.c). */
PP_MUST_USE int ag_signal_install(int signo);
void ag_signal_restore(void);
void ag_timers_update_locked(void); /* arm/re-arm/delete CPU timers to match ag.hz_cpu */
void ag_timer_delete_locked(struct ag_thread *t);
/* The kernel's tick rate: the resolution of CLOCK_MONOTONIC_COARSE is one jiffy. 0 if unknown. */
unsigned ag_kernel_tick_hz(void);
/* The engine that times CPU sampling at rate hz (AG_CPU_ENGINE_PERF or _TIMER) when configured
 * is the setting and the kernel ticks tick_hz times a second (0: unknown). Auto takes the
 * CPU-time timers up to the tick's rate and perf_event above it. Pure, for tests. */
enum ag_cpu_engine ag_cpu_engine_for_rate(enum ag_cpu_engine configured, unsigned hz,
                                          unsigned tick_hz);
/* Claims the CPU t burned since its last sample as its pending final sample (t->tail_*), when
 * t is sampled in CPU mode. cpu_clock: the clock to read (CLOCK_THREAD_CPUTIME_ID on the thread
 * itself, else its per-thread clock). reg_lock held. */
void ag_cpu_claim_tail_locked(struct ag_thread *t, clockid_t cpu_clock);
/* Auto's check, each scan, of a thread on the timers: one the tick does not sample as it should
 * moves to perf (timer.c says why). */
void ag_cpu_engine_check_locked(struct ag_thread *t);
/* The same with the thread's CPU time cpu read earlier (a thread that has exited since). */
void ag_cpu_claim_tail_at_locked(struct ag_thread *t, uint64_t cpu);
/* A thread's CPU clock from its tid (the kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)). */
clockid_t ag_thread_cpu_clock(int32_t tid);
/* fork() child: closes the inherited perf_event fds (the events belong to the parent). */
void ag_timers_forked_child(void);

/* Executable mappings (agent/codemap.c): consumer thread only. */
void ag_codemap_begin_drain(void);
int ag_codemap_contains(uint64_t pc); /* 1 when pc lies in an executable mapping */
void ag_codemap_fini(void);

/* Wall sampler (agent/wall.c). */
PP_MUST_USE int ag_wall_start(void);
void ag_wall_stop(void);

/* Logging (agent/config.c). */
void ag_log(enum ag_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sleeps up to ms on ag.wake_cond, until stopping or a wake (a new sampling request); returns
 * nonzero when stopping. */
int ag_wait_ms(unsigned ms);

static inline uint64_t
ag_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif /* AG_INTERNAL_H */
