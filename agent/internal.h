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

#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/compiler.h"
#include "host/host.h"

/* uint64_t is long or long long depending on the ABI; both must be lock-free. */
_Static_assert(ATOMIC_LONG_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2, "lock-free u64");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "lock-free int");

#define AG_TLS __attribute__((tls_model("initial-exec")))

/* si_value of the wall sampler's rt_tgsigqueueinfo(): tells the handler it is a wall sample. */
#define AG_WALL_SIVAL       0x70707770
/* struct ag_thread's wall_signalled, between a wall pass and the handler that takes its signal:
 * the state in the low two bits, the passes held for the signal's sample above them. */
#define AG_WALL_SENDING     1u
#define AG_WALL_SENT        2u
#define AG_WALL_STATE_MASK  3u
#define AG_WALL_HELD_ONE    4u
/* The most a wall sample stands for by the passes held for it, in time (wall.c says why). */
#define AG_WALL_HELD_MAX_NS 1000000000u
/* struct ag_thread's host_send, between a host thread's send of the signal to this thread and
 * the handler that takes it (agent/sig-handler.c, ag_sig_host_sends) */
#define AG_HOST_SENDING     1
#define AG_HOST_SENT        2
#define AG_HOST_SEEN        3 /* one of the agent's instances was taken while SENDING */
/* si_value of a sender's nudge (agent/host-hooks.c): no sample, only a look at host_send */
#define AG_NUDGE_SIVAL      0x70707772
/* si_value of the agent's CPU-time timers: a timer of the host's with the same signal is not. */
/* How many /proc stat files, and as many syscall files, the wall thread keeps open at most
 * (agent/wall.c says why). */
#define AG_WALL_STAT_CACHE  32
#define AG_TIMER_SIVAL      0x70707771
/* How many threads' comm files the thread scan keeps open at most, by tid (threads.c) */
#define AG_NAME_CACHE       32

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
 *
 * A consumer that finds the ring empty away from its first slot moves both indices to the next
 * lap's first slot (E: a compare-and-swap of head, which fails if a sample came in meanwhile:
 * the consumer reads that one first; then tail). So a ring drained as fast as it fills keeps
 * reusing its first slots: the memory it touches is its largest backlog, not every slot in turn
 * (256 slots of 1 KB, all touched within seconds at wall mode's rate, were 278 KB of every thread's
 * memory). The producer publishes with a compare-and-swap (B); one that fails found its slot moved
 * by E while it filled it: the ring is empty, and it copies the sample to the new first slot and
 * publishes that.
 *
 * The mapping outlives the agent's sessions (ag_ring_discard gives the memory back and keeps the
 * addresses): a producer that read the ring just before a stop (an interposer paused in a claim,
 * one re-entered from a host's signal handler) writes into mapped memory.
 */
struct ag_ring {
    _Alignas(64) _Atomic uint64_t head; /* the producer; the consumer's lap move of an empty ring */
    uint64_t reserved;                  /* producer: the index ag_ring_reserve() returned */
    _Alignas(64) _Atomic uint64_t tail; /* written by the consumer only */
    uint64_t mask;                      /* slot count - 1; a power of two */
    size_t slot_size;                   /* bytes: struct ag_sample + max_frames words */
    unsigned char *slots;               /* mmap'ed by ag_ring_init(); NULL when unset */
    size_t map_len;
    uint64_t trimmed_at; /* ag_ring_trim()'s caller: head when the memory last went back */
};

/* Makes r an empty ring of slots samples (outside signal context), in its current mapping when
 * that is large enough, else in a new one (the old one stays mapped: a producer may hold it).
 * Only while no producer uses r. Returns 0, -EINVAL or -ENOMEM. */
PP_MUST_USE int ag_ring_init(struct ag_ring *r, unsigned slots, unsigned max_frames);
/* 1 when r is a ring of slots samples of max_frames frames (ag_ring_init() would not change it). */
int ag_ring_fits(const struct ag_ring *r, unsigned slots, unsigned max_frames);
/* Empties r (as its consumer: no other consumer may run meanwhile) and gives its memory back to
 * the kernel; its addresses stay mapped, so a stale producer writes harmlessly. Accepts a
 * zeroed ring. */
void ag_ring_discard(struct ag_ring *r);
/* Gives the memory of an empty ring's slots back to the kernel (none are read: the consumer may
 * run meanwhile, no producer may), once per use. Returns 1 when it did. Callers serialise. */
int ag_ring_trim(struct ag_ring *r);
/* Unmaps; accepts a zeroed ring. Only when no producer can ever touch it again (tests). */
void ag_ring_fini(struct ag_ring *r);
/* Faults in the memory of up to n slots from the producer's next one and from the ring's first
 * (MADV_POPULATE_WRITE: contents unchanged, so a producer may run meanwhile; nothing before Linux
 * 5.14), so that the producer's first lap takes no page fault there. */
void ag_ring_populate(struct ag_ring *r, unsigned n);

/* Returns the next free slot, or NULL when the ring is full. Producer only. */
PP_SIGSAFE static inline struct ag_sample *
ag_ring_reserve(struct ag_ring *r)
{
    /* Acquire: after E, the consumer's reads of the slots before the lap came first. */
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire); /* A */

    if (r->slots == NULL || head - tail > r->mask) {
        return NULL;
    }
    r->reserved = head;
    return (struct ag_sample *)(void *)(r->slots + (head & r->mask) * r->slot_size);
}

/* Publishes the slot returned by ag_ring_reserve(). Producer only. */
PP_SIGSAFE static inline void
ag_ring_commit(struct ag_ring *r)
{
    uint64_t head = r->reserved;

    while (!atomic_compare_exchange_strong_explicit(&r->head, &head, head + 1,
                                                    memory_order_release, /* B */
                                                    memory_order_acquire)) {
        /* E moved the empty ring on while the slot was filled: the sample goes to the new
         * first slot (at most once: E moves only a ring away from its first slot). */
        const struct ag_sample *from =
                (const void *)(r->slots + (r->reserved & r->mask) * r->slot_size);

        __builtin_memcpy(r->slots + (head & r->mask) * r->slot_size, from,
                         sizeof(*from) + from->depth * sizeof(uint64_t));
        r->reserved = head;
    }
}

/* The consumer's look at r's mapping: NULL while no ag_ring_init() published one (acquire: the
 * ring's geometry, written before, is read after). */
static inline unsigned char *
ag_ring_slots(const struct ag_ring *r)
{
    return __atomic_load_n(&r->slots, __ATOMIC_ACQUIRE);
}

/* Returns the oldest unread slot, or NULL when empty. Consumer only. */
static inline const struct ag_sample *
ag_ring_peek(struct ag_ring *r)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire); /* C */
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);

    if (ag_ring_slots(r) == NULL) {
        return NULL;
    }
    if (head == tail) {
        uint64_t lap = (tail | r->mask) + 1;

        if ((tail & r->mask) == 0) {
            return NULL;
        }
        if (atomic_compare_exchange_strong_explicit(&r->head, &head, lap, memory_order_release,
                                                    memory_order_acquire)) { /* E */
            atomic_store_explicit(&r->tail, lap, memory_order_release);
            return NULL;
        }
        /* A sample came in since head was read (acquire, as C): it is read now and the move
         * tried again after it. Left for the next drain, the ring's next backlog would pile up
         * behind this one and touch slots past its largest. */
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

/* What a thread inside an interposed blocking call noted at its entry (ag_thread.blocked). */
enum ag_blocked {
    AG_BLOCKED_NONE = 0,  /* not inside such a call */
    AG_BLOCKED_STACK = 1, /* its stack, in blk (wall sampling runs) */
    AG_BLOCKED_FRAME = 2, /* only blk_fa and blk_leaf (CPU mode) */
};

enum ag_slot_state {
    AG_SLOT_FREE = 0,
    AG_SLOT_ACTIVE = 1,
    AG_SLOT_EXITING = 2, /* the thread is gone or going; the consumer drains and frees */
};

/*
 * A stack a thread publishes for other threads to copy: a seqlock (odd while written) that only
 * the owning thread writes (ag_seqstack_put) and readers copy with ag_seqstack_get, which retries
 * on a change. Without fences, so TSan can check it: every word is a release store after the odd
 * seq, paired with the reader's acquire loads. Why that holds on a weakly ordered processor
 * (aarch64), where x86's ordering hides nothing: a reader that loads a word of a write in
 * progress synchronizes with that word's release store, which comes after the odd seq, so its
 * final load of seq (after its acquire loads, which later loads cannot pass) sees the odd seq or
 * a later one and the copy is retried; a reader whose first (acquire) load sees an even seq sees
 * every word stored before it. A relaxed data store behind a release fence would do as well,
 * but TSan does not model fences.
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
/* Distinct system calls a thread's kernel time between two CPU samples is shared among
 * (drain.c, ag_drain_kernel_split). */
#define AG_KERN_SEEN 4

/* The outermost frames of a stack a thread's root was found in that the drain keeps to know it
 * again (ag_drain_root): the C library's under the start routine (clone3, start_thread; _start,
 * __libc_start_main, __libc_start_call_main). */
#define AG_ROOT_KEY 4

/*
 * A thread's pending final sample, in parts (reg_lock; timer.c claims them, drain.c delivers
 * them). Each part is drawn as one sample at its own time: under the thread's last stack at that
 * time, the unseen marker over the call that blocked the signal, or [not sampled] over the
 * thread's root. Claims of one kind in a row add up in one part; a claim of another kind opens
 * a new one. Merged into one, as they were, a [not sampled] move claim that waited for its root
 * drew the final sample claimed after it (the thread's end, a flush) as [not sampled] too, its
 * stack lost, and an unseen claim drew it all as unseen over the blocking call (issue 19,
 * test-agent-sampling's a_held_not_sampled_claim_keeps_apart_from_the_final_samples_after_it).
 */
enum ag_tail_kind {
    AG_TAIL_OWN,         /* under the thread's last stack (AG_SOURCE_TAIL) */
    AG_TAIL_UNSEEN,      /* ran with the signal blocked (AG_SOURCE_UNSEEN) */
    AG_TAIL_NOT_SAMPLED, /* no sample saw it, and no stack is known: auto's move, and what a
                            final claim of auto's timers stands for beyond one interval while
                            the thread looks late (timer.c) */
};

struct ag_tail_part {
    uint64_t ts, cpu_time_ns, cpu_ns;
    uint64_t kern_ns;
    /* page faults in kern_w's span (AG_FAULTS_UNKNOWN: some, count not known); their bound's
     * part of it is not placed (timer.c, drain.c) */
    uint64_t kern_faults;
    uint32_t weight;
    uint32_t kern_w; /* of weight, intervals perf skipped in the kernel (timer.c) */
    uint8_t engine;
    uint8_t kind; /* enum ag_tail_kind */
};

/* Four hold a held move claim and the ordinary and unseen parts that may alternate after it while
 * it waits (a drain's claims of a thread that blocks the signal and opens it again); past that,
 * ag_tails_push() merges the closest two parts of one kind, the earlier into the later: each
 * part keeps its marker or stack, and only CPU moves later in time. */
#define AG_TAIL_PARTS 4

struct ag_tails {
    struct ag_tail_part part[AG_TAIL_PARTS]; /* in time order, no two in a row of one kind */
    uint32_t n;
};

struct ag_thread {
    _Atomic int state;         /* reg; enum ag_slot_state */
    _Atomic int32_t tid;       /* reg */
    _Atomic int excluded;      /* reg or self: an agent or consumer thread, never sampled */
    _Atomic uint64_t stack_lo; /* reg: stack bounds, 0 while unknown */
    _Atomic uint64_t stack_hi;
    _Atomic uint64_t last_sp; /* self: sp of the last signal, to find unknown bounds */
    /* wall or self: when (CLOCK_MONOTONIC) the wall sampler last had this thread's sample in a
     * ring (a running thread's, taken by its handler on the wall thread's signal) or found
     * nothing it could take (stopped, gone, a full ring, registers that cannot be known); not
     * when it found the thread awake after reading it asleep: the next pass signals it.
     * ag_wall_settle() reads it */
    _Atomic uint64_t wall_seen_ns;
    /* wall and self: AG_WALL_SENDING from a wall pass's decision to signal this thread,
     * AG_WALL_SENT once the signal went out, 0 again when a handler takes it (any sampling
     * signal's handler: one pending stands for all; also the host's instance of the signal, into
     * which the kernel merged one sent while it was pending). A pass that finds it set sends
     * none: the sampling signal is a standard one, and the kernel would merge a second one sent
     * while the first is pending. While the thread has had no CPU since, it waits for a core
     * with its stack unchanged: the pass adds AG_WALL_HELD_ONE, and the handler of the wall
     * signal takes those held passes into its sample's weight with the same exchange that
     * clears the state (so no pass falls between the two). Otherwise (it ran with the signal
     * blocked) the pass counts its interval and the held ones lost; so does a handler of
     * another instance of the signal (wall.c, ag_wall_hold). */
    _Atomic uint32_t wall_signalled;
    /* host thread and self: AG_HOST_SENDING from a host thread's send of the signal to this one
     * (pthread_kill, pthread_sigqueue, tgkill: host/signals.c) until the send returned, then
     * AG_HOST_SENT; AG_HOST_SEEN when one of the agent's instances was taken meanwhile (the
     * sender then nudges); 0 again when the host's instance is taken, or when one of the
     * agent's is taken with nothing pending after the send, into which the kernel merged the
     * host's: then the handler runs the host's disposition itself, with host_send_code and
     * host_send_value (the last sender's) */
    _Atomic int host_send;
    _Atomic int host_send_code;
    _Atomic uint64_t host_send_value;
    /* CPU-mode accounting (ag_sig_cpu_weigh): the handler and a tail claim (the exiting thread,
     * or ag_cpu_flush() on another thread) each take their span with an exchange. */
    _Atomic uint64_t last_cpu_ns; /* self or claim: CPU time at the last sample or claim */
    _Atomic int64_t cpu_carry_ns; /* self or claim: CPU time not yet in weights (may be < 0) */
    _Atomic uint32_t perf_early;  /* self (perf-ring: reg): early perf samples since its last */
    _Atomic uint64_t dropped;     /* self and wall: samples lost to a full ring, and unsampled */
    _Atomic uint64_t unsampled;   /* wall: intervals a late pass missed (also in dropped) */
    uint64_t dropped_reported;    /* drain */
    uint64_t unsampled_reported;  /* drain */
    int has_timer;                /* reg */
    timer_t timer;                /* reg */
    unsigned timer_hz;            /* reg: rate the timer or the perf event is armed at */
    int has_perf;                 /* reg: perf_fd is this thread's cpu-clock perf event */
    _Atomic int perf_fd;          /* reg; read by the handler to recognise its signal */
    int scan_seen;                /* reg: manager scratch */
    int exit_hooked;              /* reg: its key destructor will claim its final sample */

    /* The first-sample lottery (timer.c, "The lottery"): enum ag_lottery. Set by reg, moved by
     * self (its handler's draw won) and reg (the re-arm). */
    _Atomic int lottery;
    /* reg: what a claim left to the lottery (ag_cpu_end_rest counts it) */
    uint64_t chance_end_ns;

    int perf_promoted; /* reg: auto moved it from the timers to perf (ag_cpu_engine_check_locked) */
    _Atomic uint32_t timer_samples, timer_weight; /* self: timer-engine samples, their weights */
    _Atomic int tick_unseen; /* reg: auto's timers, which move a thread the tick misses to perf:
                                the handler gives a timer sample's weight beyond its own interval
                                to [not sampled] (timer.c, "Auto's move") */
    /* reg writes them at each scan, the handler reads them (ag_timer_late) */
    _Atomic uint32_t scan_samples, scan_weight; /* those at the previous scan */
    uint64_t scan_cpu_ns;       /* reg: CPU time at the last scan (threads not exit_hooked) */
    unsigned name_gen;          /* reg: bumped when name changes */
    unsigned name_gen_reported; /* drain */
    int announced;              /* drain: THREAD_START sent */
    char name[AG_NAME_MAX];     /* reg */
    /* The stack recorded by an interposed blocking call, read by the wall thread and the drain
     * (ag_thread_wait_stack). Without wall sampling (CPU mode) the call notes only its libc
     * function and the interposer's frame address, under blk.seq's protocol: a walk at every
     * call cost 120 to 630 ns a read() or poll(); the drain walks the caller's stack from that
     * frame with non-faulting reads when it finds the thread in the call (a stop marker). */
    struct ag_seqstack blk;
    _Atomic uint64_t blk_fa, blk_leaf; /* self: AG_BLOCKED_FRAME's note */
    _Atomic int blocked;               /* self: enum ag_blocked */
    /* A final sample pending (reg): the CPU the thread burned after its last sample, claimed at
     * its exit or by ag_cpu_flush(), in parts kept apart by kind (struct ag_tails); ag_drain()
     * delivers them. */
    struct ag_tails tail;
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
    uint8_t has_start;   /* reg: registered by the pthread_create interposer, root_depth from its
                            start routine (0 when that walk did not reach the root): the drain
                            looks for no other root (ag_drain_root) */
    /* drain: the root of a thread registered without its start routine (the /proc scan's, the
     * thread that started the agent), found in its last CPU stack (ag_drain_root): root_found
     * outermost frames; root_key, the outermost root_key_n frames of the stack it was looked for
     * in (the C library's frames of that root), finds it again without a module lookup while the
     * last stack has them (root_key_n 0: not looked for yet). */
    uint64_t root_key[AG_ROOT_KEY];
    uint32_t root_key_n, root_found;
    /* drain: the running drain is the thread's last or a flush's (a [not sampled] claim waits for
     * its root no longer: ag_drain_claim_root), and the start of the earliest span of a claim
     * that waits (0: none) */
    uint8_t claim_last;
    uint64_t claim_wait_from;
    /* Kernel time on the perf engine (timer.c says why): the intervals a perf sample stands for
     * beyond its own are kernel time, split off as an AG_SOURCE_KERNEL sample, and a CPU-time
     * timer, the kernel locator, finds where: its signal arrives as a system call returns. */
    int has_locator;           /* reg: locator is armed */
    timer_t locator;           /* reg */
    _Atomic int kern_locating; /* reg: the handler takes a timer signal as the locator's */
    _Atomic uint32_t kern_w;   /* self: intervals split off as kernel time */
    _Atomic int kern_asked;    /* self sets it at its first split without a locator (then wakes the
                                  manager, which arms one: ag_locators_arm_asked_locked); reg
                                  clears it at registration */
    _Atomic uint64_t kern_faults; /* self: 1 + the thread's page faults (getrusage) at its
                                     perf sample that last read them (its first, then each one
                                     once it spends kernel time); 0: none read yet */
    uint32_t scan_kern_w;         /* reg: kern_w at the previous scan */
    _Atomic uint32_t kern_sites;  /* self: signals that came from a system call (its locator's,
                                     and perf's due in the call's exit path) */
    uint32_t scan_kern_sites;     /* reg: kern_sites at the previous scan (or the arming) */
    uint32_t locator_idle;        /* reg: scans in a row without a split or a call seen */
    uint64_t locator_idle_cpu;    /* reg: the thread's CPU time (ns) in those scans */
    uint64_t scan_last_cpu;       /* reg: last_cpu_ns at the previous scan */
    /* reg: a perf-ring thread without a locator, its kernel time split off and its CPU since its
     * window began (ag_ring_locator_wanted) */
    uint32_t ring_loc_w;
    uint64_t ring_loc_cpu;
    _Atomic int kern_retired; /* reg: its locator went idle while on perf (timer.c); self
                                 then drops a timer signal, asks for no new locator and reads
                                 page faults only at splits */
    int kern_flush; /* reg: ag_cpu_flush() asks the drain to deliver kernel time waiting for a
                       stack now, as not placed */
    /* drain: the stack of the latest system call a locator saw (in the same mapping), and
     * kernel time waiting for a call seen after it (drain.c, ag_drain_kernel) */
    uint64_t *kern_frames;
    uint32_t kern_depth;
    uint8_t kern_unwinder, kern_end;
    uint64_t kern_cpu; /* the thread's CPU time at that call */
    /* drain: the distinct calls seen since the thread's last CPU sample (kern_seen_n of them,
     * AG_MAX_FRAMES words each in kern_seen_frames, in the same mapping) and how often each was
     * seen: the kernel time split off the next sample is shared among them (drain.c) */
    uint64_t *kern_seen_frames;
    uint32_t kern_seen_n;
    uint32_t kern_seen_depth[AG_KERN_SEEN], kern_seen_count[AG_KERN_SEEN];
    uint8_t kern_seen_unwinder[AG_KERN_SEEN], kern_seen_end[AG_KERN_SEEN];
    uint64_t kern_pend_ns, kern_pend_ts, kern_pend_cpu_time;
    uint64_t kern_pend_first_cpu; /* the CPU time of the first split that waits */
    uint32_t kern_pend_w;
    /* drain: kernel time of a span that took page faults (the handler's split marked
     * [kernel, not placed]), delivered over the stack of the sample it was split from */
    uint64_t kern_unpl_ns, kern_unpl_ts, kern_unpl_cpu_time;
    uint32_t kern_unpl_w;
    /* self (the handler): resolved CFI rows (agent/cfi.h), in the same mapping; set at
     * registration. */
    struct ag_cfi_cache *cfi_cache;
    struct ag_ring ring;  /* producer: the thread's signal handler */
    struct ag_ring wring; /* producer: the wall thread (waiting samples) */
    /* The perf-ring engine (agent/perf-ring.c): the thread's cpu-clock event with its kernel
     * ring buffer (reg), and the samples read from it and unwound (producer: whoever holds
     * reg_lock and reads the kernel's ring: the manager, a flush, the drain, the exit hook). */
    _Atomic int has_ring; /* reg (read by the thread's interposers) */
    int ring_fd;          /* reg */
    void *ring_base;      /* reg: the event's mapping, its first page the control page */
    size_t ring_map_len;  /* reg */
    /* reg: the thread's CPU clock and the event's count together, at its enable (0 then) and at
     * the last read of its ring (ag_pring_cpu maps a sample's count between them) */
    uint64_t ring_cpu_base, ring_count_base;
    uint64_t ring_cpu_to, ring_count_to; /* reg: the same at the read under way (0: unknown) */
    int ring_faults_fd;   /* reg: the event's page-fault counter (its group's member), or -1 */
    uint64_t ring_faults; /* reg: that count at the last sample read */
    /* reg: samples the kernel could not write to the full ring (PERF_RECORD_LOST) since the last
     * sample read: overflows in user mode whose CPU is in the next sample's span (perf-ring.c) */
    uint64_t ring_lost_w;
    /* reg: ring samples whose unwind needed the stack above the copy (the copy full, the walk
     * ended reading past it), and whether auto moved the thread to perf's signal for them: its
     * stacks are deeper than the copy, so it keeps perf's signal (timer.c) */
    uint32_t ring_cut;
    int ring_deep;
    /* Auto's probation (timer.c): a thread above the tick starts on perf's signal, whose handler
     * notes whether its walks fit in a ring's stack copy; the scan then gives it a ring, or keeps
     * it on the signal for good (ring_deep). Set by reg; the counts by self. */
    _Atomic int ring_probe;
    _Atomic uint32_t ring_probe_n;    /* self: perf samples whose walk reached the root and fit */
    _Atomic uint32_t ring_probe_deep; /* self: those that reached past it, or the depth limit */
    struct ag_ring pring;             /* producer: the perf-ring reader, under reg_lock */
    /* The drain delivers the thread's own ring (its locator's records) up to here only (CLOCK_
     * MONOTONIC; UINT64_MAX: all), so that they meet the perf samples in time order: a record
     * written after the last read of the kernel's ring may come after a sample not yet read
     * (release by the reader after its writes to pring; drain.c). */
    _Atomic uint64_t pring_horizon;
};

#define AG_OWN_CODE_MAX 8

/*
 * Global agent state; one instance, `ag`. Lock order: life_lock, then drain_lock, then reg_lock;
 * wake_lock, ag_modules_mutex and ag_wall_trim_lock are leaves (held while taking no other).
 * The library's whole order, and where each pair nests: docs/architecture.md, "Locks and their
 * order".
 */
struct ag_agent {
    pthread_mutex_t life_lock; /* start/stop/acquire/release */
    pthread_mutex_t reg_lock;  /* the registry: slot state transitions, timers, names */
    pthread_mutex_t drain_lock;
    struct ag_config cfg; /* copied at start; immutable while running */
    _Atomic int running;  /* 1 between a successful ag_start() and ag_stop() */
    _Atomic int stopping; /* tells the agent threads to leave */
    _Atomic int inflight; /* handlers between entry and exit; ag_stop() waits for 0 */
    _Atomic unsigned gen; /* bumped per start: invalidates TLS slot caches of an old registry */
    /* Tids of the threads inside ag_thread_own_code(1), 0 in a free entry (a thread in twice
     * holds two). Lock-free: the exit path may run in a signal handler that interrupted a holder
     * of reg_lock. Read by the wall thread and the signal handler (ag_in_own_code). */
    _Atomic int32_t own_code_tids[AG_OWN_CODE_MAX];
    struct ag_thread *threads; /* threads_cap slots, mmap'ed at the first start, never freed */
    unsigned threads_cap;
    _Atomic unsigned high; /* slots [0, high) have been used */
    int signo;
    pid_t pid;
    int remote_read_ok; /* process_vm_readv on self works (no seccomp block) */
    pthread_t manager;
    int manager_started;
    /* Nonzero: the manager was not started (all CFI tables were cached) and starts at this
     * ag_now_ns(), its first scan, or at a wake before it (ag_manager_start_due). */
    _Atomic uint64_t manager_due_ns;
    pthread_t wall;
    int wall_started;
    pthread_mutex_t wake_lock; /* manager/wall sleep: lets stop and acquire wake them */
    pthread_cond_t wake_cond;
    /* The word the manager sleeps on (a futex; ag_manager_wake): set to 1 and woken by
       ag_wake_all() and by a handler that met unknown code or split off a thread's first kernel
       time. It was an eventfd: a handler on a thread whose fd table a close_range with
       CLOSE_RANGE_UNSHARE made its own wrote to the number that table held, which after a later
       session started could be another of the library's files copied at the unshare. */
    _Atomic uint32_t manager_word;
    /* The manager's periodic scans in this session (not ag_start's): a test tells a wake's work
     * from a scan's by it. */
    _Atomic uint64_t manager_scans;
    _Atomic int kern_asked; /* a handler set a thread's kern_asked: the manager clears it and arms
                               those threads' locators */
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
    _Atomic uint64_t n_not_code;       /* stacks cut at a frame outside every executable mapping */
    _Atomic uint64_t n_tables_pending; /* stacks cut where a module's unwind table was pending */
    _Atomic uint64_t n_wall_unsampled; /* wall intervals a thread missed (also in n_lost) */
    _Atomic uint64_t n_wall_held;      /* wall intervals in samples' weights beyond their own */
    _Atomic uint64_t cpu_sampled_ns, cpu_sampled_n, n_cpu_weight, n_perf_refused, n_cpu_tails;
    _Atomic uint64_t cpu_unseen_ns; /* CPU burned with the sampling signal blocked */
    _Atomic uint64_t cpu_kernel_ns, cpu_kernel_unplaced_ns;   /* CPU time under [kernel] frames */
    _Atomic uint64_t cpu_not_sampled_ns;                      /* under [not sampled] */
    _Atomic uint64_t n_not_sampled_alone, n_not_sampled_held; /* drain.c: claims alone, waits */
    _Atomic uint64_t drain_held_from;                         /* drain: ag_drain_held_from() */
    _Atomic uint64_t cpu_rest_ns;   /* CPU threads' ends left to no sample (ag_cpu_end_rest) */
    _Atomic uint64_t cpu_chance_ns; /* CPU before threads' first samples: the lottery's */
    _Atomic uint64_t cpu_lost_ns;   /* CPU of samples dropped (ag_sig_count_lost): in none */
    _Atomic int lottery_asked;      /* a handler's draw won: the manager re-arms (timer.c) */
    _Atomic uint64_t lottery_state; /* the draws' sequence (timer.c) */
    _Atomic uint64_t lottery_mix;   /* the winners' carries (timer.c) */
    _Atomic uint64_t n_perf_promoted;
    _Atomic uint64_t n_locators_retired; /* kernel locators that went idle (timer.c) */
    _Atomic uint64_t n_ring_fallbacks;   /* perf-ring threads sampled by perf's signal instead */
    _Atomic uint64_t n_ring_deep;        /* auto's ring threads moved to perf's signal (deep) */
    _Atomic uint64_t n_ring_lost;        /* PERF_RECORD_LOST counts (also in n_lost) */
    _Atomic uint64_t n_perf_early;       /* perf samples that weighed 0 (AG_WEIGH_EARLY) */
    uint64_t ring_read_ns;               /* manager: when it last read the perf rings */
    int perf_unavailable; /* reg: perf_event_open was refused for a reason that will not pass */
    unsigned tick_hz;     /* the kernel's scheduler tick rate (ag_kernel_tick_hz()), 0 unknown */
    _Atomic uint64_t wall_passes, wall_start_ns, wall_active_ns;
    /* The grid slots of the wall sampler's first and latest passes since wall_start_ns, 0
     * before: its intervals begin at the first (the wall thread starts after the request, late
     * on a loaded machine) and end an interval after the latest */
    _Atomic uint64_t wall_first_ns, wall_last_ns;
};

extern struct ag_agent ag;

/* Whether thread tid runs the profiler's own code (async-signal-safe). */
static inline int
ag_in_own_code(int32_t tid)
{
    unsigned i;

    for (i = 0; i < AG_OWN_CODE_MAX; i++) {
        if (atomic_load_explicit(&ag.own_code_tids[i], memory_order_relaxed) == tid) {
            return 1;
        }
    }
    return 0;
}

/* Initial-exec TLS: the handler never enters __tls_get_addr. */
extern __thread struct ag_thread *ag_tls_thread AG_TLS; /* slot cache, checked against tid */
extern __thread int32_t ag_tls_tid AG_TLS;              /* 0 until known */
extern __thread unsigned ag_tls_gen AG_TLS;             /* ag.gen when ag_tls_thread was set */
extern __thread uint64_t ag_tls_stack_lo AG_TLS;        /* set by the pthread_create wrapper */
extern __thread uint64_t ag_tls_stack_hi AG_TLS;
extern __thread int ag_tls_excluded AG_TLS;             /* agent thread: interposers pass through */
extern __thread _Atomic uint32_t ag_tls_signals AG_TLS; /* agent signals handled (for EINTR) */
/* Of them, its kernel locator's (a perf thread's CPU-time timer: timer.c), so a test can tell
 * them from sampling signals. */
extern __thread _Atomic uint32_t ag_tls_locator_signals AG_TLS;

/* Unwinding (agent/sig-unwind.c). */
struct ag_cfi_cache; /* agent/cfi.h */

struct ag_unwind_ctx {
    uint64_t lo, hi; /* direct reads allowed in [lo, hi): part of the current stack */
    int remote_ok;   /* other reads go through process_vm_readv */
    pid_t pid;
    struct ag_cfi_cache *cache; /* the sampled thread's CFI row cache (its handler only), or NULL */
    uint64_t lr; /* the interrupted context's link register (aarch64 x30), for its first step
                    only; 0 when unknown or not a signal's (set 0 by ag_sig_unwind_ctx_init) */
    /* A copy of the stack from copy_sp on, copy_len bytes (a perf-ring sample's): when set,
     * every read is of the copy, and one outside it fails (NULL from ag_sig_unwind_ctx_init) */
    const unsigned char *copy;
    uint64_t copy_sp, copy_len;
};

struct ag_unwind_result {
    uint32_t depth;
    uint8_t unwinder; /* enum ag_unwinder of the last step */
    uint8_t end;      /* enum ag_unwind_end */
    uint32_t cfi_steps;
    uint64_t sp_end; /* the last frame's sp: the stack the walk needed reaches about there */
};

/* The user stack a perf-ring sample copies (perf-ring.c): 4 KiB reached 35 of a 32-deep stack's
 * 36 frames in bench-perfring, at 2-8 us a sample less than 16 KiB (docs/performance.md). A walk
 * whose root lies within AG_PRING_STACK_FITS of the sampled sp fits in it (timer.c's probation). */
#ifndef AG_PRING_STACK
#define AG_PRING_STACK 4096u
#endif
#define AG_PRING_STACK_FITS (AG_PRING_STACK - 512u)

/* Reads one aligned word: 0, or -EFAULT when not safely readable. Async-signal-safe. */
PP_SIGSAFE PP_MUST_USE int ag_sig_read(void *ctx, uint64_t addr, uint64_t *out);
/* Copies n bytes at addr of process pid (this one: the agent's cached pid, or getpid()) with
 * process_vm_readv, which fails instead of faulting: 0, or -EFAULT where they are not all readable
 * (unmapped; the call refused). errno is kept. For code that may be gone (a perf-ring sample's pc,
 * read after an unload) or is not known to be mapped (a leaf's entry, sig-unwind.c).
 * Async-signal-safe. */
PP_SIGSAFE PP_MUST_USE int ag_sig_copy(pid_t pid, void *out, uint64_t addr, size_t n);

/*
 * Walks a stack from {pc, sp, fp} into frames (leaf first, frames[0] = pc). pc_is_ra says pc is
 * a return address (a recorded caller, not an interrupted instruction). Frame pointers first,
 * with DWARF CFI (agent/sig-cfi.c) for the interrupted leaf and whenever frame pointers give up.
 * Every read goes through ag_sig_read(c). Async-signal-safe; no allocation, no locks, no errno.
 */
PP_SIGSAFE void ag_sig_unwind(struct ag_unwind_ctx *c, uint64_t pc, uint64_t sp, uint64_t fp,
                              int pc_is_ra, uint64_t *frames, uint32_t max,
                              struct ag_unwind_result *out);

/*
 * Walks the stack of the caller of the function whose frame address (__builtin_frame_address(0))
 * is fa, from a call made below that frame (an interposer's helpers): frames[0] is the return
 * address into fa's caller. On x86-64 from fa's frame record (fa + 16 is the caller's sp);
 * where a record may lie anywhere in its frame (aarch64) from here, through the frames in
 * between by their CFI, so that the caller's sp is exact and its CFI applies; the record if
 * that fails. c: initialised with ag_sig_unwind_ctx_init(c, fa, ...). out->depth 0 with
 * AG_UNWIND_END_READ_FAULT when the record cannot be read. Async-signal-safe.
 */
PP_SIGSAFE void ag_sig_unwind_caller(struct ag_unwind_ctx *c, uint64_t fa, uint64_t *frames,
                                     uint32_t max, struct ag_unwind_result *out);

/* The same from fa's frame record alone (fa + 16 as the caller's sp), as ag_sig_unwind_caller
 * does where it does not start from its own frame: what another thread can do, reading the
 * stack of a thread that sits in a call below fa (ag_thread_wait_stack). Async-signal-safe. */
PP_SIGSAFE void ag_sig_unwind_record(struct ag_unwind_ctx *c, uint64_t fa, uint64_t *frames,
                                     uint32_t max, struct ag_unwind_result *out);

/* Sets c's direct-read window from sp and the slot's (or TLS) stack bounds. Async-signal-safe. */
PP_SIGSAFE void ag_sig_unwind_ctx_init(struct ag_unwind_ctx *c, uint64_t sp, uint64_t lo,
                                       uint64_t hi);

/* The [kernel] markers (agent.c, ag_kernel_pc(), ag_kernel_unplaced_pc()): never called; the
 * handler takes the first one's address. */
void pipeprof_cpu_in_kernel(void);
void pipeprof_cpu_in_kernel_unplaced(void);
void pipeprof_cpu_not_sampled(void);
void pipeprof_unwind_tables_pending(void);

/* Sends the sampling signal to thread tid of this process with si_value sival (AG_WALL_SIVAL,
 * AG_NUDGE_SIVAL), as SI_QUEUE from this process (agent/wall.c). */
void ag_signal_thread(int32_t tid, int sival);

/* The handler (agent/sig-handler.c). */
void ag_sig_handler(int signo, siginfo_t *info, void *uctx);
void ag_sig_count_unsampled(struct ag_thread *t, uint64_t n);
/* Counts a CPU sample of thread t that no ring slot took (its ring full: t's LOST records) and
 * cpu_ns, the CPU its span stood for, as CPU no sample placed (ag_stats.cpu_lost_ns). Whoever
 * drops a CPU sample weighs it first (ag_sig_cpu_weigh), so that the thread's next sample stands
 * for its own span only. Async-signal-safe. */
PP_SIGSAFE void ag_sig_count_lost(struct ag_thread *t, uint64_t cpu_ns);
/*
 * Whether a thread's timer samples look late to auto: dn samples standing for dw intervals, at
 * least 3 in all and half again as many as there were samples (the tick misses its runs). The
 * scan moves such a thread to perf (ag_cpu_engine_check_locked, over the samples since the
 * previous scan); the handler gives a late sample's weight beyond its own interval to [not
 * sampled] while they do (tick_unseen). Async-signal-safe.
 */
static inline int
ag_timer_late(uint32_t dn, uint32_t dw)
{
    return dw >= 3 && 2 * (uint64_t)dw >= 3 * (uint64_t)dn;
}

/* The first-sample lottery of a thread on the timer engine (timer.c, "The lottery"). */
enum ag_lottery {
    AG_LOTTERY_NONE = 0, /* samples by the interval, weighed by CPU time */
    AG_LOTTERY_DRAW = 1, /* no sample yet: each tick's signal draws, p = the tick / interval */
    AG_LOTTERY_WON = 2,  /* drawn: signals before an interval since are dropped until re-armed */
};

/* A draw of the lottery (async-signal-safe): 1 with probability num / den (1 when num >= den). */
int ag_lottery_draw(uint64_t num, uint64_t den);

/* A winner's carry (async-signal-safe): uniform in (-period/2, period/2]. */
int64_t ag_lottery_carry(uint64_t period);

/* The handler's take of a timer signal of thread t, drawing or won, its CPU time cpu, at hz
 * (sig-handler.c says how): 1 when the signal is dropped. Async-signal-safe; not static for
 * test-agent-sampling's lottery case. */
PP_SIGSAFE int ag_sig_lottery(struct ag_thread *t, const siginfo_t *info, uint64_t cpu,
                              unsigned hz);

/* Re-arms at the interval the timers of threads whose draw won (ag.lottery_asked). reg_lock. */
void ag_lottery_rearm_locked(void);

/* How ag_sig_cpu_weigh() treats a span of under half an interval (the carry counted). */
enum ag_weigh_rule {
    AG_WEIGH_CLAIM = 0, /* a claim: it may weigh 0, its span carried */
    AG_WEIGH_ONE = 1,   /* a timer sample: at least one interval, its debt at most one */
    /* A perf sample: perf's cpu-clock counts stolen time and the thread's clock does not, so an
     * overflow can come early by the thread's clock. Such a span weighs 0 and nothing is taken
     * (last_cpu_ns and the carry stay): the thread's next sample or claim takes it. */
    AG_WEIGH_EARLY = 2,
};

/*
 * CPU-mode weight of the span of t's CPU time that ends at cpu (its thread CPU clock now): the
 * time since the previous sample or claim (exchanged in t->last_cpu_ns; *delta_out gets it, 0
 * when t had no baseline or nothing was taken) plus t's carried remainder, in intervals of period
 * ns, rounded; the remainder is carried to the next one. rule (enum ag_weigh_rule) says what a
 * span of under half an interval weighs; a span without a baseline counts as one interval but
 * for a claim. Async-signal-safe and lock-free: concurrent callers on t (its handler, a claim on
 * another thread) each take a disjoint span, and the carry is moved with atomic exchanges, so
 * weights add up.
 */
PP_SIGSAFE uint64_t ag_sig_cpu_weigh(struct ag_thread *t, uint64_t cpu, uint64_t period, int rule,
                                     uint64_t *delta_out);
/* Finds the calling thread's slot (TLS cache, else by tid). Async-signal-safe. */
PP_SIGSAFE struct ag_thread *ag_sig_thread_self(void);
/* The active slot of thread tid, or NULL; lock-free. Async-signal-safe. */
PP_SIGSAFE struct ag_thread *ag_sig_thread_of(int32_t tid);
/* 1 when pc, the interrupted pc of a signal, says it came as a system call returned (just after
 * the system call instruction) or as one is restarted (on it): the thread was in the kernel when
 * the signal was sent. Async-signal-safe. */
PP_SIGSAFE int ag_sig_in_syscall(uint64_t pc);
/* 1 when pc is a system call's return that shows a call of the thread: ag_sig_in_syscall's, but
 * not at an rt_sigprocmask's return, where a signal pending while blocked comes as the mask opens
 * (sig-handler.c). Async-signal-safe. */
PP_SIGSAFE int ag_sig_call_seen(uint64_t pc);
/* The calling thread's page faults (getrusage(RUSAGE_THREAD)), 1 + the count; 0: unknown.
 * Async-signal-safe. */
PP_SIGSAFE uint64_t ag_sig_faults(void);
/* The kernel time split off a perf sample (kernel_w intervals, kernel_ns) whose span took
 * page faults: marks split, its record, with how many of those intervals are not placed. Page
 * faults are kernel time outside any system call, and their own cost is not known, only their
 * count: each is taken to cost at most AG_FAULT_BOUND_NS, and that much of the span (rounded up
 * to whole intervals, all of it where the bound covers it, or where faults is AG_FAULTS_UNKNOWN)
 * is not placed; the rest is shared among the calls seen as a span without faults is. The
 * record: depth 1 and the not-placed marker when all of it is not placed; depth 2, the marker and
 * the intervals not placed in frames[1], when a part is (the drain reads it, drain.c). Before,
 * one fault in a span of 80 ms of read(2) calls put all 8 intervals under [kernel, not placed].
 * Async-signal-safe. */
#define AG_FAULT_BOUND_NS 2000000u
#define AG_FAULTS_UNKNOWN UINT64_MAX
PP_SIGSAFE void ag_sig_split_faulted(struct ag_sample *split, uint64_t faults);
/* Of w intervals of kernel time (cpu_ns) whose span took faults page faults (AG_FAULTS_UNKNOWN:
 * some), how many are not placed: their bound rounded up to whole intervals, all w where it
 * covers the span, where faults is unknown or where w < 2 (one interval cannot be split). 0 for
 * no faults. Async-signal-safe (arithmetic only). */
PP_SIGSAFE uint32_t ag_fault_unplaced_w(uint64_t faults, uint32_t w, uint64_t cpu_ns);
/* a + b page faults, AG_FAULTS_UNKNOWN if either is or the sum does not fit. */
static inline uint64_t
ag_faults_add(uint64_t a, uint64_t b)
{
    return a == AG_FAULTS_UNKNOWN || b == AG_FAULTS_UNKNOWN || a > AG_FAULTS_UNKNOWN - 1u - b
                   ? AG_FAULTS_UNKNOWN
                   : a + b;
}
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
 * stack its CPU belongs to until it has a sample (a final sample's stack, drain.c); stack_size
 * the size it was created with (0: not known), which bounds its stack without an allocation. */
void ag_thread_attach_started(void *(*fn)(void *), uint64_t fa, uint64_t stack_size);
/* Registers thread tid (self: the calling thread) in a free slot, or returns its own. NULL when
 * none is free (counted in threads_dropped; with full non-NULL, not counted and *full set when
 * the registry is full: the caller may reclaim the exited threads' slots, ag_drain_reclaim). */
struct ag_thread *ag_thread_register_locked(int32_t tid, int self, int *full);
/* Counts tid in threads_dropped (the registry or its engine refused it), once until it registers;
 * reg_lock held. ag_thread_dropped_reset(): every tid counts anew (ag_start). */
void ag_thread_dropped_locked(int32_t tid);
void ag_thread_dropped_reset(void);
void ag_thread_release_locked(struct ag_thread *t); /* EXITING -> FREE (drain) */
int32_t ag_gettid(void);
/* The main thread's stack bounds as pthread_getattr_np() has them, computed without reading
 * /proc/self/maps; 0, or -1 when they cannot be (threads.c says when). */
int ag_main_stack_bounds(uint64_t *lo, uint64_t *hi);
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
void ag_timers_update_locked(void); /* arm/re-arm/delete CPU timers to match ag.hz_cpu */
/* The same for t alone: a thread's registration changes no other slot's timer (the rate's
 * changes and the manager's scans update them all). */
void ag_timer_update_locked(struct ag_thread *t);
void ag_cpu_origin_clear(void); /* ag_cpu_origin_set()'s origin is used up (timer.c) */
void ag_timer_delete_locked(struct ag_thread *t);
/* The kernel's tick rate: the resolution of CLOCK_MONOTONIC_COARSE is one jiffy. 0 if unknown. */
unsigned ag_kernel_tick_hz(void);
/* The engine that times CPU sampling at rate hz (AG_CPU_ENGINE_PERF or _TIMER) when configured
 * is the setting and the kernel ticks tick_hz times a second (0: unknown). Auto takes the
 * CPU-time timers up to the tick's rate and perf_event above it. Pure, for tests. */
enum ag_cpu_engine ag_cpu_engine_for_rate(enum ag_cpu_engine configured, unsigned hz,
                                          unsigned tick_hz);
/* Claims the CPU t burned since its last sample as a part of its pending final sample (t->tail),
 * when t is sampled in CPU mode. cpu_clock: the clock to read (CLOCK_THREAD_CPUTIME_ID on the
 * thread itself, else its per-thread clock). Returns the span it left to the thread's next sample
 * (under half an interval, the carry counted), 0 when it claimed it or t is not sampled: at a
 * thread's end the caller counts it (ag_cpu_end_rest). reg_lock held. */
uint64_t ag_cpu_claim_tail_locked(struct ag_thread *t, clockid_t cpu_clock);
/* Auto's check, each scan, of a thread on the timers: one the tick does not sample as it should
 * moves to perf (timer.c says why). */
void ag_cpu_engine_check_locked(struct ag_thread *t);
/* For tests only (0 otherwise): microseconds the move above sleeps between its claim and the
 * opening of the perf event, as a preempted manager does on a loaded machine. */
extern _Atomic unsigned ag_test_move_pause_us;
/* Arms the kernel locator of every perf thread that asked for one (kern_asked) and has none. */
void ag_locators_arm_asked_locked(void);
/* The scan's choice for a perf thread without a locator that split off kern_intervals of kernel
 * time and was seen at calls calls_seen times since the previous scan, in which it ran cpu_ns of
 * CPU at period_ns a sample; retired: its locator went idle before (timer.c). Pure, for tests. */
int ag_locator_wanted(int retired, uint32_t kern_intervals, uint32_t calls_seen, uint64_t cpu_ns,
                      uint64_t period_ns);
/* The scan's choice for a perf-ring thread without a locator that no ring sample showed at a
 * call's return: its split-off kernel time dk intervals and its CPU dcpu since the previous scan
 * are added to its window (*w, *cpu); a window that holds AG_RING_LOCATOR_W intervals is judged
 * (a fifth of its CPU or more: 1) and begins again. Pure, for tests. */
int ag_ring_locator_wanted(uint32_t *w, uint64_t *cpu, uint32_t dk, uint64_t dcpu,
                           uint64_t period_ns);
/* The same with the thread's CPU time cpu read earlier (a thread that has exited since). */
uint64_t ag_cpu_claim_tail_at_locked(struct ag_thread *t, uint64_t cpu);
/* Adds part p, claimed after every part of tl, to tl: into its last part when of the same kind,
 * else as a new one (none of weight 0). reg_lock, or tl the caller's own. */
void ag_tails_push(struct ag_tails *tl, const struct ag_tail_part *p);
/* At a thread's end (its exit hook, the scan that finds it gone): counts the span its final
 * claim left (ag_cpu_claim_tail_locked's value) in cpu_rest_ns, as no sample will take it, and
 * the CPU that claim left to the lottery (t had no sample yet) in cpu_chance_ns.
 * reg_lock. */
void ag_cpu_end_rest(struct ag_thread *t, uint64_t rest);
/* A thread's CPU clock from its tid (the kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)). */
clockid_t ag_thread_cpu_clock(int32_t tid);
/* fork() child: closes the inherited perf_event fds (the events belong to the parent). */
void ag_timers_forked_child(void);

/* perf_event_attr of the engines' cpu-clock event at hz, user space only, disabled (timer.c). */
struct perf_event_attr;
void ag_perf_attr_init(struct perf_event_attr *attr, unsigned hz);
/* perf_event_open of attr on thread tid (in group_fd's group, or -1), its fd taken high
 * (host/fds.c); one in the host's range close to RLIMIT_NOFILE is given back (-EMFILE), one at
 * or above the soft limit kept. 0 with *fd_out, or -errno (timer.c). */
PP_MUST_USE int ag_perf_event_open(struct perf_event_attr *attr, int32_t tid, int group_fd,
                                   int *fd_out);
/* Sets the thread's CPU-time baseline as an engine's arming does (timer.c); returns the CPU time
 * it spent since (0 but after a deferred start). */
uint64_t ag_timer_baseline(struct ag_thread *t, int32_t tid);

/* The perf-ring engine (agent/perf-ring.c), a prototype behind PIPEPROF_CPU_ENGINE=perf-ring. */
/* Opens thread tid's cpu-clock event at hz with a ring buffer, no signal; its CPU-time baseline
 * starts now. 0; 1 when the ring could not be mapped (locked memory: EPERM, ENOMEM), the event
 * closed again (the caller falls back to perf's signal); or -errno of perf_event_open. reg. */
PP_MUST_USE int ag_pring_open_locked(struct ag_thread *t, int32_t tid, unsigned hz);
/* Reads every record the kernel wrote to t's ring since the last read into t->pring: each sample
 * unwound from its stack copy, weighed by the thread's CPU time it carries; PERF_RECORD_LOST's
 * counts go to t->dropped. reg_lock held. */
void ag_pring_read_locked(struct ag_thread *t);
/* Thread t's CPU clock at a perf-ring sample whose event count was count: mapped in proportion
 * between the (count, clock) pair read at the last ring read and the one read at this read
 * (ring_count_to, ring_cpu_to; perf's cpu-clock counts stolen time, the thread's clock does not),
 * one to one from the last pair where none is read or the clock ran ahead. reg_lock held. */
uint64_t ag_pring_cpu(const struct ag_thread *t, uint64_t count);
/* At a ring read's end: this read's pair, when read, is the next read's origin. reg_lock held. */
void ag_pring_pair_next(struct ag_thread *t);
/* Reads t's ring a last time, then unmaps and closes it. reg_lock held. */
void ag_pring_close_locked(struct ag_thread *t);
/* The longest the manager leaves the perf rings unread (ms). */
#define AG_PRING_READ_MS 100u
/* How often the manager reads the perf rings at hz (ns): half of what a ring holds at the rate,
 * AG_PRING_READ_MS at most. */
uint64_t ag_pring_read_period_ns(unsigned hz);
/* ag_pring_read_locked() on every thread that has a ring (takes reg_lock). */
void ag_pring_read_all(void);
/* fork() child: the parent's rings are unmapped and their fds closed. */
void ag_pring_forked_child(struct ag_thread *t);

/* Executable mappings (agent/codemap.c): consumer thread only. */
void ag_codemap_begin_drain(void);
int ag_codemap_contains(uint64_t pc); /* 1 when pc lies in an executable mapping */
/* Cuts s's stack at its first frame outside executable code, counting it (ag.n_not_code), or,
 * where the walk met a pending unwind table, roots it at the [unwind tables not ready] marker
 * (ag.n_tables_pending). The drain's; s is the consumer's until released. */
void ag_drain_check_frames(struct ag_sample *s);
/* For a registration that found no free slot (threads.c): drains the slots of exited threads
 * into records kept for the next ag_drain, which hands them on first, and frees them. Returns
 * the slots freed. No lock held (takes drain_lock, then reg_lock per slot). */
unsigned ag_drain_reclaim(void);
/* Forgets the records ag_drain_reclaim kept (a session's end: drain_lock held; a fork's child). */
void ag_drain_parked_discard(void);
void ag_codemap_fini(void);

/* Wall sampler (agent/wall.c): the wall thread runs from ag_wall_start() (a wall request) to
 * ag_wall_stop() (the last one released, or ag_stop()); life_lock held. */
PP_MUST_USE int ag_wall_start(void);
void ag_wall_stop(void);
/* The drain, after it emptied t's wall ring: while no wall thread runs, its memory goes back. */
void ag_wall_trim_drained(struct ag_thread *t);
/* fork() child (agent.c's atfork handler). */
void ag_wall_forked_child(void);
/* ag_stop(), once the server and the agent's threads are gone: the /proc files of threads the
 * wall thread and ag_thread_wait_stack() (the IPC thread's, after the wall thread ended) keep
 * open. Left open, a fork()ed child's handler closed them, a system call a host's seccomp filter
 * installed after the stop refuses or kills (host/seccomp.c). */
void ag_wall_files_close(void);
/* Test seam (unit tests only; 0 in a host): the bound a [not sampled] claim waits for its
 * thread's root in place of the drain's AG_DRAIN_CLAIM_WAIT_NS (UINT64_MAX: no bound), for a case
 * that holds a claim across drains it makes: a loaded machine can preempt it for longer than the
 * real bound between its claim and its drain (agent/drain.c, ag_drain_claim_root). */
extern _Atomic uint64_t ag_test_claim_wait_ns;
/* Test seam (unit tests only; 0 in a host): the next this-many reads of thread
 * ag_wall_test_woke_tid's registers from /proc report that it woke meanwhile (-EAGAIN), the
 * race a thread leaving a short sleep makes with a pass. */
extern _Atomic int32_t ag_wall_test_woke_tid;
extern _Atomic unsigned ag_wall_test_woke_reads;

/* Logging (agent/config.c). */
void ag_log(enum ag_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sleeps up to ms on ag.wake_cond, until stopping or a wake (a new sampling request); returns
 * nonzero when stopping. */
int ag_wait_ms(unsigned ms);
/* Ends the manager's sleep (ag.manager_word): an atomic store and a futex wake, async-signal-safe
 * (inline: the signal handler's imports stay syscall and ag, tools/check-sigsafe.sh). */
static inline void
ag_manager_wake(void)
{
    atomic_store(&ag.manager_word, 1);
    (void)syscall(SYS_futex, &ag.manager_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static inline uint64_t
ag_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif /* AG_INTERNAL_H */
