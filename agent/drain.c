/* SPDX-License-Identifier: MIT */
/*
 * agent/drain.c - the consumer side of the per-thread rings: ag_drain() walks the registry and
 * hands each thread's START (and renames), its pending samples from both rings, its final
 * sample (the CPU it burned after its last one, claimed at its exit, by ag_cpu_flush() or, for a
 * thread with the sampling signal blocked, by the drain itself, given the stack of its last CPU
 * sample), its lost count and, for a thread that exited, its STOP to
 * the callback, then frees the slot. ag_drain_reclaim() does the same for the slots of exited
 * threads on a registration that found none free, into records the next ag_drain() hands on
 * first. Context: one consumer thread (the IPC loop), and registering threads in
 * ag_drain_reclaim(); ag.drain_lock makes them take turns. The rings are read lock-free;
 * ag.reg_lock is held only while a slot's name, state or pending final sample is examined.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "agent/internal.h"
#include "agent/symbols-internal.h"

/*
 * Cuts the stack at its first frame outside every executable mapping (or a library's that was
 * mapped at the sample's time, unloaded since): the unwinder's checks are
 * bounds and progress, and a word read from a corrupt stack can pass them. A return address is
 * checked at address - 1 (its call instruction); the leaf of a signal sample is the pc itself.
 * The consumer owns the slot until it releases it, so the sample is changed in place.
 */
/* Set while ag_drain_reclaim runs (drain_lock): the checks wait for the parked records'
 * delivery (ag_drain_parked). */
static int ag_drain_deferred;

void
ag_drain_check_frames(struct ag_sample *s)
{
    uint32_t i;

    if (ag_drain_deferred) {
        return;
    }
    for (i = 0; i < s->depth; i++) {
        uint64_t pc = s->frames[i];

        if (i > 0 || (s->source != AG_SOURCE_SIGNAL && s->source != AG_SOURCE_TAIL &&
                      s->source != AG_SOURCE_UNSEEN && s->source != AG_SOURCE_KERNEL)) {
            pc -= pc != 0;
        }
        /* (code unmapped since the sample, a library dlclose'd: kept; its module names it) */
        if (pc < 4096 || (!ag_codemap_contains(pc) && !ag_module_held_at(pc, s->timestamp_ns))) {
            s->depth = i;
            if (s->end != AG_UNWIND_END_TABLES_PENDING) {
                s->end = AG_UNWIND_END_NOT_CODE;
                atomic_fetch_add_explicit(&ag.n_not_code, 1, memory_order_relaxed);
                return;
            }
            break; /* a frame-pointer guess where the table was pending: cut, and marked */
        }
    }
    if (s->end == AG_UNWIND_END_TABLES_PENDING) {
        /* A stack cut where a module's table was still being built, early in a process (the
         * manager builds the tables after the start; 80 ms for python3 at load 17, where its
         * first samples held one or two frames): its own root says so, so that no consumer
         * takes the cut stack for a whole one, and `report` counts them. A stack cut at its
         * first frame is the marker alone, not an empty stack no one counts. */
        uint32_t at = s->depth < ag.cfg.max_frames ? s->depth : ag.cfg.max_frames - 1u;

        s->frames[at] = ag_tables_pending_pc() + 1u; /* a return address: named at - 1 */
        s->depth = at + 1u;
        atomic_fetch_add_explicit(&ag.n_tables_pending, 1, memory_order_relaxed);
    }
}

/* The final sample being delivered (drain_lock): a sample with room for any stack. */
static union {
    struct ag_sample s;
    unsigned char bytes[sizeof(struct ag_sample) + AG_MAX_FRAMES * sizeof(uint64_t)];
} ag_drain_tail_buf;

/* How much of a thread's CPU time the stack of a system call stands for its kernel time, before
 * and after the call: the locator sees a call every few ms of CPU in a thread that makes many (its
 * expiry every tick, in the kernel one time in k), but perf samples at a call's return, the only
 * calls seen by a thread whose calls the tick misses, come 20 to 105 ms of CPU apart in a write(2)
 * loop: at 50 ms, 0 to 32 % of such a thread's kernel time was not placed (test-agent-sampling,
 * 30 runs), at 200 ms 0 to 5 %. Kernel time further from any seen call is not placed there (a
 * thread that made a call long ago and is now preempted in its own code); of a span that took
 * page faults only what is above their bound goes under a call (ag_sig_split_faulted), so what
 * a wider window could give a call
 * wrongly is interrupts' and preemption's time, which in a compute thread that writes 0.5 ms
 * every 50 ms moved its split by under 0.6 points (docs/performance.md). A build may set another
 * window to measure. */
#ifndef AG_KERNEL_SITE_CPU_NS
#define AG_KERNEL_SITE_CPU_NS 200000000u
#endif

/* Kernel time split off a perf sample, or waiting for a stack (drain.c's own). */
struct ag_drain_kernel {
    uint64_t ts, cpu_time_ns, cpu_ns;
    uint32_t weight;
};

/* A stack: the thread's last CPU stack, the one a marker's root is found in, the one kernel time
 * not placed goes over (the sample it was split from, or the last one). */
struct ag_drain_stack {
    const uint64_t *frames;
    uint32_t depth;
    uint8_t unwinder, end;
};

/* Whether pc lies in the C library or the loader, whose frames stand outside every thread's
 * own code (clone3 and start_thread, __libc_start_main, _dl_start_user), by the name of its
 * module in the signal handler's snapshot (no lock, no file). */
static int
ag_drain_pc_in_libc(uint64_t pc)
{
    static const char *const names[] = { "libc.so", "libc-", "libc.musl", "libpthread", "ld-" };
    const struct ag_module_span *span = ag_sig_module_find(pc);
    const char *base;
    size_t i;

    if (span == NULL || span->mod == NULL || span->mod->name == NULL) {
        return 0;
    }
    base = strrchr(span->mod->name, '/');
    base = base != NULL ? base + 1 : span->mod->name;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strncmp(base, names[i], strlen(names[i])) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The outermost frames of stack f (n frames, leaf first, walked to its root) that every stack of
 * its thread shares: counted from the outermost, the C library's and the loader's and the first
 * frame outside them that one of theirs called (the start routine under clone3 and start_thread,
 * main under __libc_start_main; the executable's _start outermost is passed over). A [kernel]
 * leaf is no frame of the thread's. 0: no such frame (a static executable, code under no C
 * library, a stack of the C library's frames alone). */
static uint32_t
ag_drain_root_of(const uint64_t *f, uint32_t n)
{
    uint32_t i, lo = n != 0 && f[0] == ag_kernel_pc() ? 1u : 0u;
    int outer_libc = 0;

    for (i = n; i-- > lo;) {
        int libc = ag_drain_pc_in_libc(f[i] - (i > 0)); /* a return address: its call's */

        if (!libc && outer_libc) {
            return n - i;
        }
        outer_libc = libc;
    }
    return 0;
}

/*
 * How many outermost frames of stack st (t's last CPU stack, or the sample a marker was split
 * from) every stack of t shares (0: not known). A thread the pthread_create interposer registered
 * has its start routine's (root_depth, from its registration). One the /proc scan found (every
 * thread of an HTTP recording and of an idle preload's first session, the main thread) or the
 * thread that started the agent has none from there: its root is found in st once that walk
 * reached the root, by the C library's frames (ag_drain_root_of), and kept with those frames as
 * its key: the next stack that has them outermost has the same root without a lookup. Looked for
 * again only when a stack's outermost frames differ (a main thread sampled in a constructor, then
 * in main; a ucontext stack), so about once a thread, at its first marker, never per sample. A
 * thread with no stack known (never sampled) has none: its markers stand alone.
 */
static uint32_t
ag_drain_root(struct ag_thread *t, const struct ag_drain_stack *st)
{
    uint32_t n = st->depth, found, key;

    if (t->has_start || t->root_depth != 0) {
        return t->root_depth;
    }
    if (n == 0 || st->end != AG_UNWIND_END_ROOT) {
        return 0;
    }
    if (t->root_key_n != 0 && n >= t->root_key_n + (t->root_found != 0) &&
        memcmp(st->frames + n - t->root_key_n, t->root_key, t->root_key_n * sizeof(uint64_t)) ==
                0) {
        return t->root_found;
    }
    found = ag_drain_root_of(st->frames, n);
    key = found != 0 ? found - 1u : n; /* a root's C library frames, else the stack's outermost */
    key = key < AG_ROOT_KEY ? key : AG_ROOT_KEY;
    memcpy(t->root_key, st->frames + n - key, key * sizeof(uint64_t));
    t->root_key_n = key;
    t->root_found = found;
    return found;
}

/* Puts marker over the frames every stack of t shares (its start routine under its callers, when
 * the walk of st reached them) into s: where a thread's time went is not known, only whose. */
static void
ag_drain_marker_over(struct ag_thread *t, struct ag_sample *s, uint64_t marker,
                     const struct ag_drain_stack *st)
{
    uint32_t keep = ag_drain_root(t, st), from;

    if (keep > st->depth || keep >= ag.cfg.max_frames || st->end != AG_UNWIND_END_ROOT) {
        keep = 0;
    }
    from = st->depth - keep;
    s->frames[0] = marker;
    memcpy(s->frames + 1, st->frames + from, keep * sizeof(uint64_t));
    /* A leaf (interrupted pc, start routine entry) becoming a caller is looked up at address
     * - 1 by consumers: + 1 keeps it in its function. */
    s->frames[1] += keep != 0 && from == 0;
    s->depth = keep + 1;
}

/* ag_drain_marker_over() of t's last CPU stack. */
static void
ag_drain_marker_over_root(struct ag_thread *t, struct ag_sample *s, uint64_t marker)
{
    struct ag_drain_stack last = { t->last_frames, t->last_depth, t->last_unwinder, t->last_end };

    ag_drain_marker_over(t, s, marker, &last);
}

/* [not sampled] over the frames every stack of t shares (found in st), in s: CPU no sample saw. */
static void
ag_drain_not_sampled_over(struct ag_thread *t, struct ag_sample *s, const struct ag_drain_stack *st)
{
    ag_drain_marker_over(t, s, ag_not_sampled_pc(), st);
    s->unwinder = s->depth > 1 ? st->unwinder : AG_UNWINDER_NONE;
    s->end = s->depth > 1 ? AG_UNWIND_END_ROOT : AG_UNWIND_END_LEAF_ONLY;
    if (s->depth == 1) {
        atomic_fetch_add_explicit(&ag.n_not_sampled_alone, 1, memory_order_relaxed);
    }
}

/* The drain's own sample (a final sample, kernel time) in ag_drain_tail_buf: a running CPU
 * sample of thread tid at ts, standing for cpu_ns in weight intervals, without frames yet. */
static struct ag_sample *
ag_drain_own_sample(int32_t tid, uint64_t ts, uint64_t cpu_time_ns, uint8_t source, uint8_t engine,
                    uint32_t weight, uint64_t cpu_ns)
{
    struct ag_sample *s = &ag_drain_tail_buf.s;

    memset(s, 0, sizeof(*s));
    s->timestamp_ns = ts;
    s->cpu_time_ns = cpu_time_ns;
    s->tid = tid;
    s->mode = AG_MODE_CPU;
    s->state = AG_STATE_RUNNING;
    s->source = source;
    s->engine = engine;
    s->weight = (uint16_t)(weight < UINT16_MAX ? weight : UINT16_MAX);
    s->cpu_delta_ns = cpu_ns;
    return s;
}

/* Hands the drain's own sample s to fn. Returns fn's value. */
static int
ag_drain_own_deliver(const struct ag_sample *s, ag_record_fn fn, void *ctx, int *n)
{
    struct ag_record rec;

    memset(&rec, 0, sizeof(rec));
    rec.kind = AG_RECORD_SAMPLE;
    rec.tid = s->tid;
    rec.u.sample = s;
    (*n)++;
    return fn(&rec, ctx);
}

/* How kernel time is delivered: under the stack of the latest system call, or (not placed)
 * over the stack of the sample it was split from (the thread's last one at its end), or over
 * the thread's start routine when it had none. */
enum ag_drain_kernel_place {
    AG_KERNEL_AT_CALL,
    AG_KERNEL_OVER_STACK,
    AG_KERNEL_OVER_ROOT,
};

/* Delivers kernel time k of t (over: the stack for AG_KERNEL_OVER_STACK, or the call's for
 * AG_KERNEL_AT_CALL, NULL: the latest call seen). Returns fn's value. */
static int
ag_drain_kernel_deliver(struct ag_thread *t, int32_t tid, const struct ag_drain_kernel *k,
                        enum ag_drain_kernel_place place, const struct ag_drain_stack *over,
                        ag_record_fn fn, void *ctx, int *n)
{
    struct ag_sample *s = ag_drain_own_sample(tid, k->ts, k->cpu_time_ns, AG_SOURCE_KERNEL,
                                              AG_CPU_ENGINE_PERF, k->weight, k->cpu_ns);

    if (place == AG_KERNEL_AT_CALL && over != NULL) {
        memcpy(s->frames, over->frames, over->depth * sizeof(uint64_t));
        s->depth = over->depth;
        s->unwinder = over->unwinder;
        s->end = over->end;
    } else if (place == AG_KERNEL_AT_CALL) {
        memcpy(s->frames, t->kern_frames, t->kern_depth * sizeof(uint64_t));
        s->depth = t->kern_depth;
        s->unwinder = t->kern_unwinder;
        s->end = t->kern_end;
    } else if (place == AG_KERNEL_OVER_STACK) {
        uint32_t depth = over->depth < ag.cfg.max_frames ? over->depth : ag.cfg.max_frames - 1u;

        s->frames[0] = ag_kernel_unplaced_pc();
        memcpy(s->frames + 1, over->frames, depth * sizeof(uint64_t));
        s->frames[1] += depth != 0; /* an interrupted pc becomes a caller: looked up at - 1 */
        s->depth = depth + 1;
        s->unwinder = over->unwinder;
        s->end = over->end;
    } else {
        ag_drain_marker_over_root(t, s, ag_kernel_unplaced_pc());
        s->unwinder = s->depth > 1 ? t->last_unwinder : AG_UNWINDER_NONE;
        s->end = s->depth > 1 ? AG_UNWIND_END_ROOT : AG_UNWIND_END_LEAF_ONLY;
    }
    if (place != AG_KERNEL_AT_CALL) {
        atomic_fetch_add_explicit(&ag.cpu_kernel_unplaced_ns, k->cpu_ns, memory_order_relaxed);
    }
    if (place != AG_KERNEL_OVER_ROOT && s->end == AG_UNWIND_END_NOT_CODE) {
        atomic_fetch_add_explicit(&ag.n_not_code, 1, memory_order_relaxed); /* delivered cut */
    }
    return ag_drain_own_deliver(s, fn, ctx, n);
}

/* Delivers the kernel time of t that waits for a place (t->kern_pend_*), if any. Returns fn's
 * value. */
static int
ag_drain_kernel_waiting(struct ag_thread *t, int32_t tid, enum ag_drain_kernel_place place,
                        const struct ag_drain_stack *over, ag_record_fn fn, void *ctx, int *n)
{
    struct ag_drain_kernel k = { t->kern_pend_ts, t->kern_pend_cpu_time, t->kern_pend_ns,
                                 t->kern_pend_w };

    if (k.weight == 0) {
        return 0;
    }
    t->kern_pend_w = 0;
    t->kern_pend_ns = 0;
    return ag_drain_kernel_deliver(t, tid, &k, place, over, fn, ctx, n);
}

/* Delivers the kernel time of t that waited for a call in vain, once the thread's CPU time (a
 * record's at cpu; UINT64_MAX: the wait ends now) is AG_KERNEL_SITE_CPU_NS past the first split
 * that waits: not placed, over the stack of that record when it has one (over), else the stack of
 * the thread's last CPU sample, else its start routine. Returns fn's value. */
static int
ag_drain_kernel_expired(struct ag_thread *t, int32_t tid, uint64_t cpu,
                        const struct ag_drain_stack *over, ag_record_fn fn, void *ctx, int *n)
{
    struct ag_drain_stack last = { t->last_frames, t->last_depth, t->last_unwinder, t->last_end };

    if (t->kern_pend_w == 0 ||
        (cpu != UINT64_MAX && cpu < t->kern_pend_first_cpu + AG_KERNEL_SITE_CPU_NS)) {
        return 0;
    }
    if (over == NULL || over->depth == 0) {
        over = &last;
    }
    return ag_drain_kernel_waiting(t, tid,
                                   over->depth != 0 ? AG_KERNEL_OVER_STACK : AG_KERNEL_OVER_ROOT,
                                   over, fn, ctx, n);
}

/*
 * An AG_SOURCE_KERNEL record of t's ring: a locator's (weight 0) records the stack of the latest
 * system call; a split-off one (which the handler writes just before the perf sample it came
 * from) goes under that stack when the call was seen within AG_KERNEL_SITE_CPU_NS of the thread's
 * CPU time before it, else waits for a call seen within that much after the first split that
 * waits (ag_drain_kernel_expired delivers what waited in vain, as not placed; timer.c, "Kernel
 * time on perf_event"). The wait is for a thread's first calls: its locator is armed only after
 * its first kernel time, and on a loaded machine its first call was seen 30 to 60 ms of the
 * thread's CPU after that, kernel time that went over the stack of the sample it was split from
 * (the compute function beside the calls). Returns fn's value.
 */
/* Counts the call just seen (t->kern_frames) among those seen since t's last CPU sample: a new
 * one takes a free entry (none left: it is not counted), one seen before counts again. A call
 * with no stack is not counted (its kernel time has nowhere to go). */
static void
ag_drain_kernel_seen(struct ag_thread *t)
{
    uint32_t i;

    if (t->kern_depth == 0) {
        return;
    }
    for (i = 0; i < t->kern_seen_n; i++) {
        if (t->kern_seen_depth[i] == t->kern_depth &&
            memcmp(t->kern_seen_frames + (size_t)i * AG_MAX_FRAMES, t->kern_frames,
                   t->kern_depth * sizeof(uint64_t)) == 0) {
            t->kern_seen_count[i]++;
            return;
        }
    }
    if (i < AG_KERN_SEEN) {
        memcpy(t->kern_seen_frames + (size_t)i * AG_MAX_FRAMES, t->kern_frames,
               t->kern_depth * sizeof(uint64_t));
        t->kern_seen_depth[i] = t->kern_depth;
        t->kern_seen_unwinder[i] = t->kern_unwinder;
        t->kern_seen_end[i] = t->kern_end;
        t->kern_seen_count[i] = 1;
        t->kern_seen_n = i + 1;
    }
}

/* A system call seen at s (a locator's record, or a sample taken as a call returned: its
 * [kernel] leaf over the call's stack): its stack stands for the kernel time near it, and what
 * waited for one goes under it. Returns fn's value. */
static int
ag_drain_kernel_site(struct ag_thread *t, int32_t tid, const struct ag_sample *s, ag_record_fn fn,
                     void *ctx, int *n)
{
    int rc = ag_drain_kernel_expired(t, tid, s->cpu_time_ns, NULL, fn, ctx, n);

    t->kern_depth = s->depth < AG_MAX_FRAMES ? s->depth : AG_MAX_FRAMES;
    memcpy(t->kern_frames, s->frames, t->kern_depth * sizeof(uint64_t));
    t->kern_unwinder = s->unwinder;
    t->kern_end = s->end;
    t->kern_cpu = s->cpu_time_ns;
    ag_drain_kernel_seen(t);
    return rc != 0 || t->kern_depth == 0
                   ? rc
                   : ag_drain_kernel_waiting(t, tid, AG_KERNEL_AT_CALL, NULL, fn, ctx, n);
}

/* Delivers t's kernel time of spans that took page faults (t->kern_unpl_*), if any: not placed,
 * over the stack of the sample it was split from (over; a [kernel] leaf of a sample taken as a
 * call returned left out), else the thread's last CPU stack, else its start routine. Returns
 * fn's value. */
static int
ag_drain_kernel_faulted(struct ag_thread *t, int32_t tid, const struct ag_drain_stack *over,
                        ag_record_fn fn, void *ctx, int *n)
{
    struct ag_drain_kernel k = { t->kern_unpl_ts, t->kern_unpl_cpu_time, t->kern_unpl_ns,
                                 t->kern_unpl_w };
    struct ag_drain_stack last = { t->last_frames, t->last_depth, t->last_unwinder, t->last_end };
    struct ag_drain_stack below;

    if (k.weight == 0) {
        return 0;
    }
    t->kern_unpl_w = 0;
    t->kern_unpl_ns = 0;
    if (over == NULL || over->depth == 0) {
        over = &last;
    }
    if (over->depth > 1 && over->frames[0] == ag_kernel_pc()) {
        below = *over;
        below.frames++;
        below.depth--;
        over = &below;
    }
    return ag_drain_kernel_deliver(t, tid, &k,
                                   over->depth != 0 ? AG_KERNEL_OVER_STACK : AG_KERNEL_OVER_ROOT,
                                   over, fn, ctx, n);
}

/* Kernel time k of t waits for a call seen after it (ag_drain_kernel_site), or in vain. */
static void
ag_drain_kernel_wait(struct ag_thread *t, const struct ag_drain_kernel *k)
{
    if (t->kern_pend_w == 0) {
        t->kern_pend_first_cpu = k->cpu_time_ns;
    }
    t->kern_pend_w += k->weight;
    t->kern_pend_ns += k->cpu_ns;
    t->kern_pend_ts = k->ts;
    t->kern_pend_cpu_time = k->cpu_time_ns;
}

/*
 * Kernel time k split off a perf sample (or a perf thread's final sample): shared among the
 * calls seen since the thread's previous CPU sample, by how often each was seen (the locator's
 * signals are the tick's samples of where the thread's kernel time goes; perf gives the amount),
 * else under the latest call seen when it is near, else it waits for one. Under the latest call
 * alone, a span of many calls went to whichever was seen last: on a loaded machine a starved
 * thread's span is long (pp-sample-syscalls' sc_zero: 60 ms of read(2) calls between two perf
 * samples), and a call at its end took it all (the close(2) at the thread's end, which the host's
 * fd interposer gates with sched_yield(2) spins: 26 to 89 intervals, 0.7 to 1.7 % of a pool of
 * 8 at a load of 13 to 17; the phase boundary's read(2) of the workload's CPU counter: 24).
 * Returns fn's value.
 */
static int
ag_drain_kernel_split(struct ag_thread *t, int32_t tid, const struct ag_drain_kernel *k,
                      ag_record_fn fn, void *ctx, int *n)
{
    if (t->kern_pend_w == 0 && t->kern_seen_n != 0) {
        uint32_t i, seen = 0, w_left = k->weight;
        uint64_t ns_left = k->cpu_ns;
        int rc = 0;

        for (i = 0; i < t->kern_seen_n; i++) {
            seen += t->kern_seen_count[i];
        }
        for (i = 0; i < t->kern_seen_n && rc == 0 && w_left != 0; i++) {
            struct ag_drain_stack at = { t->kern_seen_frames + (size_t)i * AG_MAX_FRAMES,
                                         t->kern_seen_depth[i], t->kern_seen_unwinder[i],
                                         t->kern_seen_end[i] };
            struct ag_drain_kernel part = *k;

            seen -= t->kern_seen_count[i];
            /* rounded, what is left to the last: weights add up to the split's */
            part.weight = seen == 0 ? w_left
                                    : (uint32_t)(((uint64_t)w_left * t->kern_seen_count[i] +
                                                  (seen + t->kern_seen_count[i]) / 2) /
                                                 (seen + t->kern_seen_count[i]));
            if (part.weight == 0) {
                continue;
            }
            part.cpu_ns = part.weight == w_left ? ns_left : ns_left / w_left * part.weight;
            w_left -= part.weight;
            ns_left -= part.cpu_ns;
            rc = ag_drain_kernel_deliver(t, tid, &part, AG_KERNEL_AT_CALL, &at, fn, ctx, n);
        }
        return rc;
    }
    if (t->kern_pend_w == 0 && t->kern_depth != 0 &&
        k->cpu_time_ns < t->kern_cpu + AG_KERNEL_SITE_CPU_NS) {
        return ag_drain_kernel_deliver(t, tid, k, AG_KERNEL_AT_CALL, NULL, fn, ctx, n);
    }
    ag_drain_kernel_wait(t, k);
    return 0;
}

static int
ag_drain_kernel(struct ag_thread *t, int32_t tid, const struct ag_sample *s, ag_record_fn fn,
                void *ctx, int *n)
{
    struct ag_drain_kernel k = { s->timestamp_ns, s->cpu_time_ns, s->cpu_delta_ns, s->weight };

    if (s->weight == 0) {
        return ag_drain_kernel_site(t, tid, s, fn, ctx, n);
    }
    if ((s->depth == 1 || s->depth == 2) && s->frames[0] == ag_kernel_unplaced_pc()) {
        /* A span that took page faults (the handler marks it, ag_sig_split_faulted): their
         * bound's part is no call's, whatever was seen near it, and goes over the stack of the
         * sample that follows it in the ring; the rest (depth 2) is shared as any span's. */
        uint32_t w = s->depth == 2 && s->frames[1] < s->weight ? (uint32_t)s->frames[1] : s->weight;
        uint64_t ns = w == s->weight ? s->cpu_delta_ns : s->cpu_delta_ns / s->weight * w;

        t->kern_unpl_w += w;
        t->kern_unpl_ns += ns;
        t->kern_unpl_ts = s->timestamp_ns;
        t->kern_unpl_cpu_time = s->cpu_time_ns;
        if (w == s->weight) {
            return 0;
        }
        k.weight -= w;
        k.cpu_ns -= ns;
    }
    return ag_drain_kernel_split(t, tid, &k, fn, ctx, n);
}

/* The slot after the oldest unread one of r (a perf-ring split's sample), or NULL. Consumer. */
static const struct ag_sample *
ag_drain_peek_second(struct ag_ring *r)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire); /* C */
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);

    if (ag_ring_slots(r) == NULL || head - tail < 2) {
        return NULL;
    }
    return (const struct ag_sample *)(const void *)(r->slots +
                                                    ((tail + 1) & r->mask) * r->slot_size);
}

/* How far past a marker the drain looks in a ring for a stack that reached its root. */
#define AG_DRAIN_ROOT_AHEAD 64u

/* How long (CLOCK_MONOTONIC, from the start of the span of CPU it stands for) a [not sampled] claim
 * of a thread with no root known waits at most for the thread's first stack that reaches it
 * (ag_drain_claim_root): consumers that write in time order hold their output back meanwhile
 * (ag_drain_held_from), and one that merges the stream with the runtime's waits 500 ms for
 * stragglers (ipc/internal.h, IPC_MERGE_REORDER_NS), so 300 ms, a drain interval (50 ms) and the
 * bridge's holdback (42 ms at 250 Hz) stay within it. On a loaded machine (http-final-samples
 * beside two busy loops, load 12) the claims that waited found their root 15 to 58 ms after
 * their claim. A build may set another bound to measure. */
#ifndef AG_DRAIN_CLAIM_WAIT_NS
#define AG_DRAIN_CLAIM_WAIT_NS 300000000u
#endif

_Atomic uint64_t ag_test_claim_wait_ns;

/* CLOCK_MONOTONIC at the start of the running drain, and the start of the earliest span of a
 * claim it held back (UINT64_MAX: none; ag_drain_held_from) (drain_lock). */
static uint64_t ag_drain_now, ag_drain_held = UINT64_MAX;

/* The first CPU stack of tid among the AG_DRAIN_ROOT_AHEAD records of r from its skip-th oldest
 * (0: the oldest) whose walk reached its root, a sample's or a kernel locator's (a system call's
 * stack: a thread that runs with the signal blocked gets few samples, and its calls are seen),
 * or NULL (none written yet). Consumer. */
static struct ag_sample *
ag_drain_root_ahead(struct ag_ring *r, int32_t tid, uint64_t skip)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire); /* C */
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed), k;

    for (k = skip; ag_ring_slots(r) != NULL && k < head - tail && k < skip + AG_DRAIN_ROOT_AHEAD;
         k++) {
        struct ag_sample *s =
                (struct ag_sample *)(void *)(r->slots + ((tail + k) & r->mask) * r->slot_size);

        if (s->tid == tid && s->mode == AG_MODE_CPU &&
            (s->source == AG_SOURCE_SIGNAL || (s->source == AG_SOURCE_KERNEL && s->weight == 0)) &&
            s->end == AG_UNWIND_END_ROOT) {
            return s;
        }
    }
    return NULL;
}

/* Whether r holds half its slots or more: what waits in it for a claim's root waits no longer. */
static int
ag_drain_ring_half_full(struct ag_ring *r)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);

    return ag_ring_slots(r) != NULL &&
           head - atomic_load_explicit(&r->tail, memory_order_relaxed) > r->mask / 2u;
}

/* AG_DRAIN_CLAIM_WAIT_NS, or a unit test's own bound (ag_test_claim_wait_ns). */
static uint64_t
ag_drain_claim_wait_ns(void)
{
    uint64_t ns = atomic_load_explicit(&ag_test_claim_wait_ns, memory_order_relaxed);

    return ns != 0 ? ns : AG_DRAIN_CLAIM_WAIT_NS;
}

/* Where a [not sampled] claim goes (ag_drain_claim_root). */
enum ag_drain_claim {
    AG_CLAIM_OVER,  /* over the root found in *st */
    AG_CLAIM_WAIT,  /* for the thread's first stack that reaches its root, in a later drain */
    AG_CLAIM_ALONE, /* at its bound: over *st, the thread's last stack, where no root is found */
};

/*
 * Where a [not sampled] claim of t whose span starts at `from` goes: the oldest record of
 * claim_ring (a late tick's split), or t's final sample (NULL: auto's move), the records before
 * it delivered. Its root is found in t's last CPU stack when
 * that walk reached it, else in the stack of the latest system call seen, else in the first of
 * t's stacks after the claim in its CPU rings whose walk did, up to AG_DRAIN_ROOT_AHEAD records on
 * (*st: the stack to find it in). With none, the claim came before the thread's first such stack
 * was written (a thread the scan found, claimed before the drain saw a sample of it, on a loaded
 * machine: http-final-samples' busy and masked threads, 3 to 11 of their 11 to 17 claims in a
 * pool of two recordings beside two busy loops stood alone so): it waits for one (may_wait; the
 * caller leaves it and every later record of the thread for a later drain), up to a bound: the
 * thread's end or a flush (t->claim_last), AG_DRAIN_CLAIM_WAIT_NS, a ring half full; then it
 * stands alone (ag.n_not_sampled_alone). A thread the pthread_create interposer registered does
 * not wait (its root is its start routine's, or none). Consumer.
 */
static enum ag_drain_claim
ag_drain_claim_root(struct ag_thread *t, int32_t tid, uint64_t from, struct ag_ring *claim_ring,
                    int may_wait, struct ag_drain_stack *st)
{
    struct ag_sample *next = NULL;

    *st = (struct ag_drain_stack){ t->last_frames, t->last_depth, t->last_unwinder, t->last_end };
    if (t->last_depth != 0 && t->last_end == AG_UNWIND_END_ROOT) {
        return AG_CLAIM_OVER;
    }
    if (t->kern_depth != 0 && t->kern_end == AG_UNWIND_END_ROOT) {
        /* the stack of the latest system call seen (its locator's) */
        *st = (struct ag_drain_stack){ t->kern_frames, t->kern_depth, t->kern_unwinder,
                                       t->kern_end };
        return AG_CLAIM_OVER;
    }
    next = ag_drain_root_ahead(&t->ring, tid, claim_ring == &t->ring ? 1u : 0u);
    if (next == NULL) {
        next = ag_drain_root_ahead(&t->pring, tid, claim_ring == &t->pring ? 1u : 0u);
    }
    if (next != NULL) {
        /* Checked now as its delivery would (a stack that reached its root is checked the same
         * twice: a cut leaves no frame outside code). */
        ag_drain_check_frames(next);
        *st = (struct ag_drain_stack){ next->frames, next->depth, next->unwinder, next->end };
        return AG_CLAIM_OVER;
    }
    if (!may_wait || t->has_start || t->claim_last ||
        (ag_drain_now >= from && ag_drain_now - from >= ag_drain_claim_wait_ns()) ||
        ag_drain_ring_half_full(&t->ring) || ag_drain_ring_half_full(&t->pring)) {
        return AG_CLAIM_ALONE;
    }
    return AG_CLAIM_WAIT;
}

/* Whether s is a [not sampled] claim the handler split off a late tick's sample. */
static int
ag_drain_is_claim(const struct ag_sample *s)
{
    return s->mode == AG_MODE_CPU && s->source == AG_SOURCE_TAIL && s->depth == 1 &&
           s->frames[0] == ag_not_sampled_pc();
}

/* The start of the span of CPU a sample at ts that stands for cpu_ns covers (at least 1). */
static uint64_t
ag_drain_span_start(uint64_t ts, uint64_t cpu_ns)
{
    return ts > cpu_ns ? ts - cpu_ns : 1u;
}

/* A claim of t whose span starts at `from` waits for a later drain. */
static void
ag_drain_claim_wait(struct ag_thread *t, uint64_t from)
{
    if (t->claim_wait_from == 0 || from < t->claim_wait_from) {
        t->claim_wait_from = from;
    }
}

/* The CPU of auto's timer sample that its tick did not see, split off by the handler (r, the
 * oldest record of ring): [not sampled] over the frames every stack of t shares. A thread whose
 * last stack does not show them (none yet: the first sample the agent took of it; or one cut,
 * its walk short of the root where a module's table was pending early in a process) has its
 * root found in the first sample after the claim in its rings whose walk reached it (the sample
 * it was split from comes next, and a thread that runs with the signal blocked gets its first
 * samples so: http-final-samples' masked thread); ag_drain_cpu() let it wait for one while it
 * could (ag_drain_claim_root). Returns fn's value. */
static int
ag_drain_not_sampled(struct ag_thread *t, struct ag_ring *ring, int32_t tid,
                     const struct ag_sample *r, ag_record_fn fn, void *ctx, int *n)
{
    struct ag_sample *s = ag_drain_own_sample(tid, r->timestamp_ns, r->cpu_time_ns, AG_SOURCE_TAIL,
                                              r->engine, r->weight, r->cpu_delta_ns);
    struct ag_drain_stack st;

    (void)ag_drain_claim_root(t, tid, 0, ring, 0, &st);
    ag_drain_not_sampled_over(t, s, &st);
    return ag_drain_own_deliver(s, fn, ctx, n);
}

/*
 * Delivers sample s of t, the oldest of its ring r (released here, also when fn stops the
 * drain). The stack of each CPU sample is kept in t->last_frames for the thread's final sample.
 * Returns 0, or fn's nonzero value (passed through as is).
 */
static int
ag_drain_one(struct ag_thread *t, struct ag_ring *r, int32_t tid, const struct ag_sample *s,
             ag_record_fn fn, void *ctx, int *n)
{
    struct ag_record rec;
    int rc;

    if (s->tid != tid) {
        /* Written by the wall thread for the slot's previous thread just as the slot was
         * reused: it would follow that thread's STOP. Counted as lost. */
        ag_ring_release(r);
        atomic_fetch_add_explicit(&ag.n_lost, 1, memory_order_relaxed);
        return 0;
    }
    if (ag_drain_is_claim(s)) {
        rc = ag_drain_not_sampled(t, r, tid, s, fn, ctx, n);
        ag_ring_release(r);
        return rc;
    }
    /* (kernel time split off a sample has no stack of its own, only the marks its split
     * wrote, ag_sig_split_faulted's count among them: not a stack to check) */
    if (s->mode != AG_MODE_CPU || s->source != AG_SOURCE_KERNEL || s->weight == 0) {
        ag_drain_check_frames((struct ag_sample *)(uintptr_t)s);
    }
    if (s->mode == AG_MODE_CPU && s->source == AG_SOURCE_KERNEL) {
        rc = ag_drain_kernel(t, tid, s, fn, ctx, n);
        ag_ring_release(r);
        return rc;
    }
    if (s->mode == AG_MODE_CPU && s->source == AG_SOURCE_SIGNAL) {
        struct ag_drain_stack over = { s->frames, s->depth, s->unwinder, s->end };

        /* Taken as a system call returned: a call seen, as the locator's are (a bursty
         * thread's calls fall between the ticks that time the locator; its perf samples
         * at a call's return come every few ms of its calls). */
        rc = ag_drain_kernel_faulted(t, tid, &over, fn, ctx, n);
        if (rc == 0) {
            rc = s->depth != 0 && s->frames[0] == ag_kernel_pc()
                         ? ag_drain_kernel_site(t, tid, s, fn, ctx, n)
                         : ag_drain_kernel_expired(t, tid, s->cpu_time_ns, &over, fn, ctx, n);
        }
        if (rc != 0) {
            ag_ring_release(r);
            return rc;
        }
        memcpy(t->last_frames, s->frames, s->depth * sizeof(uint64_t));
        t->last_depth = s->depth;
        t->last_unwinder = s->unwinder;
        t->last_end = s->end;
        t->kern_seen_n = 0; /* the calls seen from here are the next span's */
    }
    memset(&rec, 0, sizeof(rec));
    rec.kind = AG_RECORD_SAMPLE;
    rec.tid = tid;
    rec.u.sample = s;
    rec.unsampled = 0;
    rc = fn(&rec, ctx);
    ag_ring_release(r); /* consumed even when fn stops the drain */
    (*n)++;
    return rc;
}

/*
 * Delivers one ring's pending samples, up to those taken at `until` (UINT64_MAX: all). Returns 0,
 * or fn's nonzero value (passed through as is).
 */
static int
ag_drain_ring(struct ag_thread *t, struct ag_ring *r, int32_t tid, uint64_t until, ag_record_fn fn,
              void *ctx, int *n)
{
    const struct ag_sample *s;
    int rc;

    while ((s = ag_ring_peek(r)) != NULL && s->timestamp_ns <= until) {
        rc = ag_drain_one(t, r, tid, s, fn, ctx, n);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/*
 * Delivers a thread's CPU samples of both its rings in time order, up to those taken at `until`:
 * its own ring (signal samples, and its kernel locator's records) and the perf-ring reader's
 * pring. They must meet in time order: the drain shares a split's kernel time among the calls
 * the locator saw since the previous CPU sample. A split-off record of pring is ordered by its
 * sample's time (the reader writes it just before; in the signal engine's ring it comes there
 * too, after every locator record written before the sample), and waits while its sample is not
 * yet in pring. Records of the own ring after `hold` (pring_horizon: the reader's last read)
 * wait for the next drain, as a sample stamped before them may still be in the kernel's ring,
 * and so do the records of pring stamped after the first that waits (delivered before it, they
 * counted its call in the span after its own). A [not sampled] claim that waits for its thread's
 * root (ag_drain_claim_root) waits so too, with every later record (t->claim_wait_from).
 * Returns 0, or fn's nonzero value.
 */
static int
ag_drain_cpu(struct ag_thread *t, int32_t tid, uint64_t until, uint64_t hold, ag_record_fn fn,
             void *ctx, int *n)
{
    for (;;) {
        const struct ag_sample *a = ag_ring_peek(&t->ring), *b = ag_ring_peek(&t->pring), *b2;
        uint64_t kb = 0;
        int rc, held = 0;

        if (a != NULL && a->timestamp_ns > until) {
            a = NULL;
        } else if (a != NULL && a->timestamp_ns > hold) {
            held = 1; /* it waits, and so does every later record of pring */
        } else if (a != NULL && ag_drain_is_claim(a)) {
            uint64_t from = ag_drain_span_start(a->timestamp_ns, a->cpu_delta_ns);
            struct ag_drain_stack st;

            if (ag_drain_claim_root(t, tid, from, &t->ring, 1, &st) == AG_CLAIM_WAIT) {
                held = 1; /* for its root, as every later record of the thread */
                ag_drain_claim_wait(t, from);
            }
        }
        if (b != NULL && b->timestamp_ns > until) {
            b = NULL;
        }
        if (b != NULL) {
            kb = b->timestamp_ns;
            if (b->mode == AG_MODE_CPU && b->source == AG_SOURCE_KERNEL && b->weight != 0) {
                b2 = ag_drain_peek_second(&t->pring);
                if (b2 == NULL) {
                    b = NULL; /* its sample is being written */
                } else {
                    kb = b2->timestamp_ns;
                }
            }
        }
        if (a != NULL && !held && (b == NULL || a->timestamp_ns <= kb)) {
            rc = ag_drain_one(t, &t->ring, tid, a, fn, ctx, n);
        } else if (b != NULL && (a == NULL || kb < a->timestamp_ns)) {
            rc = ag_drain_one(t, &t->pring, tid, b, fn, ctx, n);
        } else {
            return 0;
        }
        if (rc != 0) {
            return rc;
        }
    }
}

/* Returns the n parts of a final sample that a stopped drain did not deliver to its slot, before
 * the parts claimed since the drain took them (each keeps its kind: ag_tails_push). */
static void
ag_drain_tail_put_back(struct ag_thread *t, const struct ag_tail_part *parts, uint32_t n)
{
    struct ag_tails back;
    uint32_t i;

    back.n = 0;
    for (i = 0; i < n; i++) {
        ag_tails_push(&back, &parts[i]);
    }
    pthread_mutex_lock(&ag.reg_lock);
    for (i = 0; i < t->tail.n; i++) {
        ag_tails_push(&back, &t->tail.part[i]);
    }
    t->tail = back;
    pthread_mutex_unlock(&ag.reg_lock);
}

/* Delivers a part of a thread's final sample with the stack of its last CPU sample (else its start
 * routine under its callers; with neither, [not sampled] alone), its kernel time (kern_w, a perf
 * thread's) split off first and placed as a perf sample's split is; one no sample saw (auto's
 * move: AG_TAIL_NOT_SAMPLED) is [not sampled] over the thread's root, found in root (the last
 * stack, or the one ag_drain_claim_root found). One that ran with the signal blocked
 * (AG_TAIL_UNSEEN) is AG_SOURCE_UNSEEN: the marker frame over the stack of the call that blocked
 * it (else over the thread's start routine, or alone). Returns fn's value; when fn stopped the
 * drain, *tail is what is left to deliver (weight 0: nothing). */
static int
ag_drain_tail(struct ag_thread *t, int32_t tid, struct ag_tail_part *tail,
              const struct ag_drain_stack *root, ag_record_fn fn, void *ctx, int *n)
{
    struct ag_sample *s;
    int unseen = tail->kind == AG_TAIL_UNSEEN;
    uint32_t max = ag.cfg.max_frames - (unseen ? 1u : 0u);
    uint32_t depth = t->last_depth < max ? t->last_depth : max;
    uint64_t own = tail->cpu_ns;
    uint32_t weight = tail->weight;
    int rc;

    if (tail->kern_w != 0 && tail->kern_w < tail->weight && tail->kern_ns < tail->cpu_ns) {
        /* Its kernel time first, ending where its own last interval begins, placed as a perf
         * sample's split is: among the calls seen since the last sample, not under the last one
         * alone (a thread's end makes calls that did not spend it: the close(2) of its
         * descriptors, which the host's fd interposer gates with sched_yield(2) spins on a
         * loaded machine; pp-sample-syscalls' sc_zero, whose final samples stand for 30 to 125 ms
         * of read(2) calls, put them there). */
        struct ag_drain_kernel k;
        uint32_t unpl_w;

        own -= tail->kern_ns;
        weight -= tail->kern_w;
        k.ts = tail->ts - own;
        k.cpu_time_ns = tail->cpu_time_ns - own;
        k.cpu_ns = tail->kern_ns;
        k.weight = tail->kern_w;
        unpl_w = ag_fault_unplaced_w(tail->kern_faults, k.weight, k.cpu_ns);
        rc = 0;
        if (unpl_w != 0) {
            /* Its span took page faults (timer.c): their bound's part is no call's, as in a perf
             * sample's span that took them; over the thread's last stack. The rest is shared
             * as a span's without faults (before, one fault in a span kept all of it from the
             * calls seen). */
            uint64_t unpl_ns = unpl_w == k.weight ? k.cpu_ns : k.cpu_ns / k.weight * unpl_w;

            t->kern_unpl_w += unpl_w;
            t->kern_unpl_ns += unpl_ns;
            t->kern_unpl_ts = k.ts;
            t->kern_unpl_cpu_time = k.cpu_time_ns;
            k.weight -= unpl_w;
            k.cpu_ns -= unpl_ns;
            rc = ag_drain_kernel_faulted(t, tid, NULL, fn, ctx, n);
        }
        if (rc == 0 && k.weight != 0) {
            rc = ag_drain_kernel_split(t, tid, &k, fn, ctx, n);
            k.weight = 0;
            k.cpu_ns = 0;
        }
        if (rc != 0) {
            /* the stopped drain's next turn delivers the rest: its own part, and kernel time
             * not delivered yet (placed as a span's without faults, theirs being counted) */
            tail->weight = weight + k.weight;
            tail->cpu_ns = own + k.cpu_ns;
            tail->kern_w = k.weight;
            tail->kern_ns = k.cpu_ns;
            tail->kern_faults = 0;
            return rc;
        }
    }
    tail->weight = 0; /* delivered, also when fn stops the drain */
    s = ag_drain_own_sample(tid, tail->ts, tail->cpu_time_ns,
                            unseen ? AG_SOURCE_UNSEEN : AG_SOURCE_TAIL, tail->engine, weight, own);
    s->unwinder = t->last_unwinder;
    s->end = t->last_end;
    if (!unseen && (tail->kind == AG_TAIL_NOT_SAMPLED || depth == 0)) {
        /* CPU no sample saw, of a thread with no stack known (timer.c), or a thread no sample
         * ever saw (one the scan found: every thread of an idle agent's first session that burned
         * less than an interval in it): whose, not where. As a stackless running sample it was
         * CPU_TIME without a frame in TraceEvent (dotnet-stack, dotnet-trace's Threads node),
         * counted nowhere. */
        ag_drain_not_sampled_over(t, s, root);
    } else if (!unseen) {
        s->depth = depth;
        memcpy(s->frames, t->last_frames, depth * sizeof(uint64_t));
    } else if (ag_seqstack_get(&t->sigblk, s->frames + 1, max, &s->depth, &s->unwinder, &s->end) ==
               0) {
        s->frames[0] = ag_unseen_pc(); /* over the call that blocked the signal */
        s->depth++;
    } else {
        /* It started with the signal blocked: where it was is not known, and of the last stack
         * only the frames every stack of the thread shares go under the marker. */
        ag_drain_marker_over_root(t, s, ag_unseen_pc());
    }
    return ag_drain_own_deliver(s, fn, ctx, n);
}

/* Hands on what slot t holds (its START, samples, final sample, LOST and, for a thread that
 * exited, its STOP, then frees the slot). drain_lock held, reg_lock not. Returns 0, or fn's
 * nonzero value (the slot keeps what was not handed on). */
static int
ag_drain_slot(struct ag_thread *t, ag_record_fn fn, void *ctx, int *np)
{
    struct ag_tails tails;
    struct ag_record rec;
    char name[AG_NAME_MAX];
    int state, announce, kern_flush;
    int32_t tid;
    uint64_t hold; /* the own ring's records up to here: perf-ring's (ag_drain_cpu) */
    uint64_t dropped, unsampled;
    int n = 0, rc = 0;
    uint32_t i;

    pthread_mutex_lock(&ag.reg_lock);
    state = atomic_load_explicit(&t->state, memory_order_acquire);
    tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
    hold = UINT64_MAX;
    if (state == AG_SLOT_ACTIVE && atomic_load_explicit(&t->has_ring, memory_order_relaxed)) {
        ag_pring_read_locked(t); /* perf-ring: what its ring holds now comes in this drain */
        if (!t->kern_flush) {
            /* (a flush's drain is a session's last: it takes all) */
            hold = atomic_load_explicit(&t->pring_horizon, memory_order_acquire);
        }
    } else if (state == AG_SLOT_ACTIVE &&
               atomic_load_explicit(&t->sigblk_ns, memory_order_relaxed) != 0) {
        /* A thread with the signal blocked has no sample to come: its CPU is claimed at each
         * drain, as unseen final samples that reach the consumer while their time is still
         * open to it (the bridge writes a sample's span only after what it has released). */
        ag_cpu_claim_tail_locked(t, ag_thread_cpu_clock(tid));
    }
    announce = state != AG_SLOT_FREE && !atomic_load(&t->excluded) &&
               t->name_gen != t->name_gen_reported;
    memcpy(name, t->name, sizeof(name));
    t->name_gen_reported = t->name_gen;
    tails = t->tail;
    if (state == AG_SLOT_FREE) {
        tails.n = 0;
    }
    t->tail.n = 0;
    kern_flush = t->kern_flush;
    t->kern_flush = 0;
    pthread_mutex_unlock(&ag.reg_lock);
    if (state == AG_SLOT_FREE) {
        return 0;
    }
    /* A claim waits for its thread's root no longer at the thread's end or a flush (the
     * session's last drain) */
    t->claim_last = kern_flush || state == AG_SLOT_EXITING;
    t->claim_wait_from = 0;
    if (atomic_load(&t->excluded)) {
        if (state == AG_SLOT_EXITING) {
            pthread_mutex_lock(&ag.reg_lock);
            ag_thread_release_locked(t);
            pthread_mutex_unlock(&ag.reg_lock);
        }
        return 0;
    }
    memset(&rec, 0, sizeof(rec));
    rec.tid = tid;
    if (announce || !t->announced) {
        t->announced = 1;
        rec.kind = AG_RECORD_THREAD_START;
        rec.u.name = name;
        n++;
        rc = fn(&rec, ctx);
        if (rc != 0) {
            ag_drain_tail_put_back(t, tails.part, tails.n); /* (it was lost) */
            goto out;
        }
    }
    /* Each part of the final sample goes after the samples taken before its claim, with their
     * stack (both CPU rings in time order: a perf-ring thread's locator writes to its own), and
     * the records after the last part follow it. A part that cannot go yet stops the rest, which
     * go back to the slot: one claimed after the hold (perf-ring's rate change: the records
     * stamped before it may not all come in this drain, and its kernel time is shared among
     * their calls), and every one from a [not sampled] claim that waits for its thread's root
     * (in the ring, or a move claim: with the records after it). */
    for (i = 0;; i++) {
        struct ag_tail_part *p = i < tails.n && tails.part[i].ts <= hold ? &tails.part[i] : NULL;
        struct ag_drain_stack root;
        enum ag_drain_claim where = AG_CLAIM_OVER;

        rc = ag_drain_cpu(t, tid, p != NULL ? p->ts : UINT64_MAX, hold, fn, ctx, &n);
        if (rc != 0 || p == NULL || t->claim_wait_from != 0) {
            break;
        }
        root = (struct ag_drain_stack){ t->last_frames, t->last_depth, t->last_unwinder,
                                        t->last_end };
        if (p->kind == AG_TAIL_NOT_SAMPLED) {
            /* [not sampled] (auto's move): over its root */
            where = ag_drain_claim_root(t, tid, ag_drain_span_start(p->ts, p->cpu_ns), NULL, 1,
                                        &root);
        }
        if (where == AG_CLAIM_WAIT) {
            ag_drain_claim_wait(t, ag_drain_span_start(p->ts, p->cpu_ns));
            break;
        }
        rc = ag_drain_tail(t, tid, p, &root, fn, ctx, &n);
        if (rc != 0) {
            break; /* (what is left of it goes back) */
        }
    }
    if (i < tails.n) {
        ag_drain_tail_put_back(t, &tails.part[i], tails.n - i);
    }
    if (t->claim_wait_from != 0) {
        ag_drain_held = t->claim_wait_from < ag_drain_held ? t->claim_wait_from : ag_drain_held;
        atomic_fetch_add_explicit(&ag.n_not_sampled_held, 1, memory_order_relaxed);
    }
    if (rc == 0) {
        rc = ag_drain_ring(t, &t->wring, tid, UINT64_MAX, fn, ctx, &n);
        ag_wall_trim_drained(t); /* a wall session's memory goes with it */
    }
    if (rc == 0 && (kern_flush || state == AG_SLOT_EXITING)) {
        /* Kernel time that waited for a call in vain: over the thread's last CPU stack (as
         * its final sample), else its start routine; not placed. */
        rc = ag_drain_kernel_faulted(t, tid, NULL, fn, ctx, &n);
        if (rc == 0) {
            rc = ag_drain_kernel_expired(t, tid, UINT64_MAX, NULL, fn, ctx, &n);
        }
    }
    if (rc != 0) {
        goto out;
    }
    if (state == AG_SLOT_EXITING) {
        /* Passes held for a wall signal it never took (it left from inside the kernel):
         * lost, in its last LOST record. A pass that comes later finds the mark clear. */
        uint32_t w = atomic_exchange_explicit(&t->wall_signalled, 0, memory_order_acq_rel);

        if (w >= AG_WALL_HELD_ONE) {
            ag_sig_count_unsampled(t, w / AG_WALL_HELD_ONE);
        }
    }
    dropped = atomic_load_explicit(&t->dropped, memory_order_acquire); /* then unsampled */
    unsampled = atomic_load_explicit(&t->unsampled, memory_order_relaxed);
    if (dropped != t->dropped_reported) {
        rec.kind = AG_RECORD_LOST;
        rec.u.lost = dropped - t->dropped_reported;
        /* The wall thread adds to both; one it has added to unsampled only waits a drain. */
        rec.unsampled = unsampled - t->unsampled_reported < rec.u.lost
                                ? unsampled - t->unsampled_reported
                                : rec.u.lost;
        t->dropped_reported = dropped;
        t->unsampled_reported += rec.unsampled;
        n++;
        rc = fn(&rec, ctx);
        if (rc != 0) {
            goto out;
        }
    }
    if (state == AG_SLOT_EXITING) {
        /* The thread is gone: no producer remains but the wall thread, which skips
         * non-active slots. Drain what it may have added, then free the slot. */
        rc = ag_drain_ring(t, &t->wring, tid, UINT64_MAX, fn, ctx, &n);
        rec.kind = AG_RECORD_THREAD_STOP;
        rec.u.name = NULL;
        rec.unsampled = 0;
        n++;
        if (rc == 0) {
            rc = fn(&rec, ctx);
        }
        pthread_mutex_lock(&ag.reg_lock);
        ag_thread_release_locked(t);
        pthread_mutex_unlock(&ag.reg_lock);
    }
out:
    *np += n;
    return rc;
}

/*
 * What ag_drain_reclaim took from the slots of exited threads, for the next ag_drain to hand on
 * before any slot's records (drain_lock): each record as the drain made it, in that order. An
 * entry is struct ag_parked, then a START's name or a sample (struct ag_sample and its frames),
 * 8-byte aligned. The mapping grows as needed (a registration's thread may not allocate:
 * threads.c) and goes back once delivered when it grew past AG_PARK_KEEP. AG_PARK_MAX bounds it:
 * past that, no more slots are reclaimed until a drain, and registrations are dropped as before.
 */
struct ag_parked {
    uint32_t size; /* of the entry, this header included */
    int32_t tid;
    uint32_t kind; /* enum ag_record_kind */
    uint32_t pad;
    uint64_t lost, unsampled;
};

#define AG_PARK_KEEP (256u << 10)
#define AG_PARK_MAX  (16u << 20)

static unsigned char *ag_park;
static size_t ag_park_len, ag_park_cap, ag_park_at; /* at: handed on up to here */

static int
ag_drain_park_grow(size_t need)
{
    size_t cap = ag_park_cap != 0 ? ag_park_cap * 2 : 64u << 10;
    void *p;

    while (cap < ag_park_len + need) {
        cap *= 2;
    }
    p = ag_park == NULL
                ? mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                : mremap(ag_park, ag_park_cap, cap, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) {
        return -ENOMEM;
    }
    ag_park = p;
    ag_park_cap = cap;
    return 0;
}

/* The reclaim's callback: copies rec to the parked records. 0, or -ENOMEM (rec lost). */
static int
ag_drain_park(const struct ag_record *rec, void *ctx)
{
    size_t body = 0, room = 0, need;
    struct ag_parked *p;

    (void)ctx;
    if (rec->kind == AG_RECORD_SAMPLE) {
        body = sizeof(struct ag_sample) + rec->u.sample->depth * sizeof(uint64_t);
        room = sizeof(uint64_t); /* the check at delivery may add a frame (a pending table's) */
    } else if (rec->kind == AG_RECORD_THREAD_START) {
        body = strlen(rec->u.name) + 1;
    }
    need = (sizeof(*p) + body + room + 7u) & ~(size_t)7u;
    if (ag_park_len + need > ag_park_cap && ag_drain_park_grow(need) != 0) {
        atomic_fetch_add_explicit(&ag.n_lost, rec->kind == AG_RECORD_SAMPLE, memory_order_relaxed);
        return -ENOMEM;
    }
    p = (struct ag_parked *)(void *)(ag_park + ag_park_len);
    memset(p, 0, sizeof(*p));
    p->size = (uint32_t)need;
    p->tid = rec->tid;
    p->kind = rec->kind;
    p->unsampled = rec->unsampled;
    if (rec->kind == AG_RECORD_LOST) {
        p->lost = rec->u.lost;
    } else if (body != 0) {
        memcpy(p + 1, rec->kind == AG_RECORD_SAMPLE ? (const void *)rec->u.sample : rec->u.name,
               body);
    }
    ag_park_len += need;
    return 0;
}

void
ag_drain_parked_discard(void)
{
    if (ag_park != NULL) {
        munmap(ag_park, ag_park_cap);
    }
    ag_park = NULL;
    ag_park_len = ag_park_cap = ag_park_at = 0;
}

/* Hands the parked records on to fn (each consumed, also the one fn stops at), their stacks
 * checked now. Returns 0, or fn's nonzero value. */
static int
ag_drain_parked(ag_record_fn fn, void *ctx, int *n)
{
    while (ag_park_at < ag_park_len) {
        struct ag_parked *p = (struct ag_parked *)(void *)(ag_park + ag_park_at);
        struct ag_record rec;
        int rc;

        memset(&rec, 0, sizeof(rec));
        rec.kind = (enum ag_record_kind)p->kind;
        rec.tid = p->tid;
        rec.unsampled = p->unsampled;
        if (rec.kind == AG_RECORD_SAMPLE) {
            struct ag_sample *s = (struct ag_sample *)(void *)(p + 1);

            ag_drain_check_frames(s);
            rec.u.sample = s;
        } else if (rec.kind == AG_RECORD_THREAD_START) {
            rec.u.name = (const char *)(p + 1);
        } else {
            rec.u.lost = p->lost;
        }
        ag_park_at += p->size;
        (*n)++;
        rc = fn(&rec, ctx);
        if (rc != 0) {
            return rc;
        }
    }
    if (ag_park_cap > AG_PARK_KEEP) {
        ag_drain_parked_discard();
    }
    ag_park_len = ag_park_at = 0;
    return 0;
}

int
ag_drain(ag_record_fn fn, void *ctx)
{
    unsigned i, high;
    int n = 0, rc;

    pthread_mutex_lock(&ag.drain_lock);
    if (!atomic_load(&ag.running) || ag.threads == NULL) {
        atomic_store_explicit(&ag.drain_held_from, UINT64_MAX, memory_order_relaxed);
        pthread_mutex_unlock(&ag.drain_lock);
        return -ESRCH;
    }
    ag_codemap_begin_drain();
    ag_drain_now = ag_now_ns();
    ag_drain_held = UINT64_MAX;
    /* Before the slots': a reclaimed slot may hold a new thread of the same tid. */
    rc = ag_drain_parked(fn, ctx, &n);
    high = atomic_load_explicit(&ag.high, memory_order_acquire);
    for (i = 0; i < high && rc == 0; i++) {
        rc = ag_drain_slot(&ag.threads[i], fn, ctx, &n);
    }
    atomic_store_explicit(&ag.drain_held_from, ag_drain_held, memory_order_relaxed);
    pthread_mutex_unlock(&ag.drain_lock);
    return rc != 0 ? rc : n;
}

uint64_t
ag_drain_held_from(void)
{
    return atomic_load_explicit(&ag.drain_held_from, memory_order_relaxed);
}

/*
 * A registration found no free slot (threads.c): the slots of exited threads are drained here,
 * as ag_drain would, into the parked records, and freed. The records keep their order: a
 * thread's START, samples, final sample, LOST and STOP, all before any later drain's. Their
 * stacks are checked at delivery: the check may read /proc/self/maps (codemap.c), which a host
 * thread's start does not open. Called with no lock held (drain_lock comes before reg_lock).
 */
unsigned
ag_drain_reclaim(void)
{
    unsigned i, high, freed = 0;
    int n = 0;

    pthread_mutex_lock(&ag.drain_lock);
    if (!atomic_load(&ag.running) || ag.threads == NULL) {
        pthread_mutex_unlock(&ag.drain_lock);
        return 0;
    }
    ag_drain_deferred = 1;
    high = atomic_load_explicit(&ag.high, memory_order_acquire);
    for (i = 0; i < high && ag_park_len < AG_PARK_MAX; i++) {
        struct ag_thread *t = &ag.threads[i];

        /* EXITING until a drain frees it, and drains hold drain_lock. */
        if (atomic_load_explicit(&t->state, memory_order_acquire) != AG_SLOT_EXITING) {
            continue;
        }
        if (ag_drain_slot(t, ag_drain_park, NULL, &n) != 0) {
            break;
        }
        freed += atomic_load_explicit(&t->state, memory_order_relaxed) == AG_SLOT_FREE;
    }
    ag_drain_deferred = 0;
    pthread_mutex_unlock(&ag.drain_lock);
    return freed;
}
