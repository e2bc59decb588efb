/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-sample.c - what one sample costs the sampled thread. Sends the sampling signal to
 * the calling thread, 32 frames deep, and times the round trip with: an empty SA_SIGINFO handler;
 * the agent's handler on its wall path (ring slot, clock, unwind); the agent's handler on its CPU
 * path as the perf_event engine takes it (si_code POLL_IN and the thread's own event fd: the
 * thread CPU clock and the weight too), with the thread's CFI row cache and without it, and an
 * overflow early by the thread's clock, which weighs 0 and is no sample. The
 * configurations alternate batch by batch in one run, and each figure is the median of the
 * batches. Then times ag_sig_unwind() alone at two depths for the per-frame cost of the walk,
 * with and without the cache. usage: bench-sample [SIGNALS-PER-BATCH [BATCHES]] (20000, 9).
 * Context: a standalone program; not part of ctest.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/cfi.h"
#include "agent/internal.h"
#include "common/clock.h"

static unsigned bench_iters = 20000;

static void
bench_empty_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
}

/* What a batch sends: a wall sample's signal, or a perf_event overflow's (POLL_IN, si_fd). */
enum bench_kind {
    BENCH_EMPTY = 0,  /* the empty handler installed; the signal is a plain SI_QUEUE */
    BENCH_WALL = 1,   /* the agent's wall path */
    BENCH_CPU = 2,    /* the agent's CPU path, perf_event engine, with the CFI row cache */
    BENCH_CPU_NC = 3, /* the same without the cache */
    /* The CPU path of an overflow early by the thread's clock (microseconds of CPU after the
     * previous one at 1 Hz): it weighs 0, no sample (agent/sig-handler.c, AG_WEIGH_EARLY) */
    BENCH_CPU_EARLY = 4,
    BENCH_KINDS = 5,
};

static int bench_perf_fd = -1;
static struct ag_thread *bench_thread; /* the calling thread's slot, while the agent runs */

static void
bench_send(int signo, enum bench_kind kind)
{
    siginfo_t si;

    memset(&si, 0, sizeof(si));
    si.si_signo = signo;
    si.si_code = SI_QUEUE;
    si.si_pid = getpid();
    si.si_uid = getuid();
    if (kind == BENCH_WALL) {
        si.si_value.sival_int = AG_WALL_SIVAL;
    } else if (kind >= BENCH_CPU) {
        /* As the kernel fills it for F_SETSIG: a process may queue any code to itself. */
        si.si_code = POLL_IN;
        si.si_fd = bench_perf_fd;
        if (kind != BENCH_CPU_EARLY) {
            /* No baseline: the overflow stands for one interval, a whole sample (signals
             * microseconds of CPU apart at 1 Hz are early by the thread's clock, and weigh 0). */
            atomic_store_explicit(&bench_thread->last_cpu_ns, 0, memory_order_relaxed);
        }
    }
    syscall(SYS_rt_tgsigqueueinfo, (long)getpid(), (long)syscall(SYS_gettid), (long)signo, &si);
}

static int
bench_drop(const struct ag_record *rec, void *ctx)
{
    (void)rec;
    (void)ctx;
    return 0;
}

static void
bench_drain(void)
{
    if (ag_drain(bench_drop, NULL) < 0) {
        fprintf(stderr, "bench-sample: ag_drain failed\n");
        exit(1);
    }
}

static int
bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static struct ag_cfi_cache *bench_cache; /* the calling thread's, while the agent runs */

/* One batch of signals of one kind; returns ns per signal. */
static double
bench_batch(enum bench_kind kind)
{
    struct sigaction sa;
    struct ag_thread *t = ag_sig_thread_self();
    uint64_t total = 0;
    unsigned i;

    memset(&sa, 0, sizeof(sa));
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sa.sa_sigaction = kind == BENCH_EMPTY ? bench_empty_handler : ag_sig_handler;
    sigaction(SIGPROF, &sa, NULL);
    if (t != NULL) {
        t->cfi_cache = kind == BENCH_CPU_NC ? NULL : bench_cache;
    }
    for (i = 0; i < bench_iters;) {
        uint64_t c0 = pp_clock_ns(CLOCK_MONOTONIC);
        unsigned j;

        for (j = 0; j < 1024 && i < bench_iters; j++, i++) {
            bench_send(SIGPROF, kind);
        }
        total += pp_clock_ns(CLOCK_MONOTONIC) - c0;
        if (kind != BENCH_EMPTY) {
            bench_drain(); /* untimed: keeps the ring from filling */
        }
    }
    sa.sa_sigaction = ag_sig_handler;
    sigaction(SIGPROF, &sa, NULL);
    if (t != NULL) {
        t->cfi_cache = bench_cache;
    }
    return (double)total / bench_iters;
}

static unsigned bench_batches = 9;

/* Batches of every kind in rotating order; r[kind] gets each kind's median ns per signal. */
static void
bench_signals(double *r)
{
    double v[BENCH_KINDS][64];
    unsigned b, k;

    for (b = 0; b < bench_batches; b++) {
        for (k = 0; k < BENCH_KINDS; k++) {
            unsigned kind = (k + b) % BENCH_KINDS;

            v[kind][b] = bench_batch((enum bench_kind)kind);
        }
    }
    for (k = 0; k < BENCH_KINDS; k++) {
        qsort(v[k], bench_batches, sizeof(v[k][0]), bench_cmp);
        r[k] = v[k][bench_batches / 2];
    }
}

/* ag_sig_unwind() from here, with cache (or NULL); returns the median ns per walk. */
static double
bench_unwind(struct ag_cfi_cache *cache, uint32_t *depth)
{
    uint64_t frames[AG_MAX_FRAMES];
    struct ag_unwind_result res = { 0 };
    struct ag_unwind_ctx c;
    uint64_t fp = (uint64_t)(uintptr_t)__builtin_frame_address(0);
    uint64_t sp = fp;
    double r[64];
    unsigned b;
    pthread_attr_t attr;
    void *lo = NULL;
    size_t size = 0;

    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        (void)pthread_attr_getstack(&attr, &lo, &size);
        pthread_attr_destroy(&attr);
    }
    ag_sig_unwind_ctx_init(&c, sp, (uint64_t)(uintptr_t)lo, (uint64_t)(uintptr_t)lo + size);
    c.cache = cache;
    for (b = 0; b < bench_batches; b++) {
        uint64_t t0 = pp_clock_ns(CLOCK_MONOTONIC);
        unsigned i;

        for (i = 0; i < bench_iters * 10; i++) {
            ag_sig_unwind(&c, (uint64_t)(uintptr_t)bench_unwind, sp, fp, 1, frames, 128, &res);
        }
        r[b] = (double)(pp_clock_ns(CLOCK_MONOTONIC) - t0) / (bench_iters * 10);
    }
    qsort(r, bench_batches, sizeof(r[0]), bench_cmp);
    *depth = res.depth;
    return r[bench_batches / 2];
}

struct bench_out {
    double sig[BENCH_KINDS];
    double walk[2][2]; /* [deep][cached] */
    uint32_t depth[2];
};

/* Recurses to depth, then measures: every measurement runs under the same frames. */
__attribute__((noinline)) static void
bench_at_depth(int depth, struct bench_out *o, int which)
{
    if (depth > 0) {
        bench_at_depth(depth - 1, o, which);
        __asm__ volatile("" ::: "memory");
        return;
    }
    if (which == 0) {
        bench_signals(o->sig);
        return;
    }
    o->walk[which - 1][0] = bench_unwind(NULL, &o->depth[which - 1]);
    o->walk[which - 1][1] = bench_unwind(bench_cache, &o->depth[which - 1]);
}

int
main(int argc, char **argv)
{
    struct ag_config cfg;
    struct bench_out o;
    struct ag_stats st;
    struct ag_thread *t;
    uint32_t frames;

    memset(&o, 0, sizeof(o));
    if (argc > 1) {
        bench_iters = (unsigned)strtoul(argv[1], NULL, 10);
        if (bench_iters == 0) {
            bench_iters = 20000;
        }
    }
    if (argc > 2) {
        bench_batches = (unsigned)strtoul(argv[2], NULL, 10);
        if (bench_batches == 0 || bench_batches > 64) {
            bench_batches = 9;
        }
    }
    ag_config_init(&cfg);
    cfg.ring_slots = 4096;
    cfg.cpu_engine = AG_CPU_ENGINE_PERF;
    /* CPU mode at 1 Hz arms this thread's perf event (its fd makes the POLL_IN signals ours)
     * and takes almost no real samples; wall mode at 1 Hz lets the wall signals through. */
    if (ag_start(&cfg) != 0 || ag_sampling_acquire(AG_MODE_WALL, 1) != 0 ||
        ag_sampling_acquire(AG_MODE_CPU, 1) != 0) {
        fprintf(stderr, "bench-sample: agent did not start\n");
        return 1;
    }
    t = ag_sig_thread_self();
    if (t == NULL || (bench_perf_fd = atomic_load(&t->perf_fd)) < 0) {
        fprintf(stderr, "bench-sample: no perf_event for this thread (perf_event_open refused?)\n");
        return 1;
    }
    bench_cache = t->cfi_cache;
    bench_thread = t;
    usleep(300000); /* the manager thread builds the CFI tables */
    bench_at_depth(32, &o, 0);
    ag_stats_get(&st);
    printf("bench-sample: %u signals per batch, %u batches per configuration in rotating order,"
           " medians; stack 32+ frames deep\n",
           bench_iters, bench_batches);
    printf("  empty SA_SIGINFO handler round trip       : %5.0f ns/signal\n", o.sig[BENCH_EMPTY]);
    printf("  agent handler, wall path                  : %5.0f ns/signal (+%.0f ns)\n",
           o.sig[BENCH_WALL], o.sig[BENCH_WALL] - o.sig[BENCH_EMPTY]);
    printf("  agent handler, CPU path (perf), row cache : %5.0f ns/signal (+%.0f ns)\n",
           o.sig[BENCH_CPU], o.sig[BENCH_CPU] - o.sig[BENCH_EMPTY]);
    printf("  agent handler, CPU path (perf), no cache  : %5.0f ns/signal (+%.0f ns)\n",
           o.sig[BENCH_CPU_NC], o.sig[BENCH_CPU_NC] - o.sig[BENCH_EMPTY]);
    printf("  agent handler, CPU path (perf), early     : %5.0f ns/signal (+%.0f ns)\n",
           o.sig[BENCH_CPU_EARLY], o.sig[BENCH_CPU_EARLY] - o.sig[BENCH_EMPTY]);
    printf("  %llu samples, %llu lost; row cache: %llu hits, %llu misses\n",
           (unsigned long long)st.samples, (unsigned long long)st.lost,
           (unsigned long long)bench_cache->hits, (unsigned long long)bench_cache->misses);
    bench_at_depth(2, &o, 1);
    bench_at_depth(34, &o, 2);
    frames = o.depth[1] - o.depth[0];
    printf("  ag_sig_unwind, %u and %u frames: %.0f / %.0f ns without the cache, %.0f / %.0f ns "
           "with it\n",
           o.depth[0], o.depth[1], o.walk[0][0], o.walk[1][0], o.walk[0][1], o.walk[1][1]);
    printf("  per frame (difference / %u frames): %.1f ns without the cache, %.1f ns with it\n",
           frames, (o.walk[1][0] - o.walk[0][0]) / frames, (o.walk[1][1] - o.walk[0][1]) / frames);
    ag_stop();
    return 0;
}
