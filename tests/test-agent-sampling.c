/* tests/test-agent-sampling.c - the sampler end to end: CPU mode on two busy threads (samples,
 * frames inside the workload functions, names), wall mode on a sleeping thread (every sleep
 * lasts its full time, waiting samples carry the sleeper's stack), fork while sampling, errno
 * preservation, start/stop idempotence and short-lived threads. Counts are asserted as "> 0",
 * never as exact numbers. Built with frame pointers; pp_agent's interposers apply here. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/cfi.h"
#include "agent/internal.h"
#include "agent/symbols-internal.h"
#include "tests/test.h"

#define EXPORT __attribute__((visibility("default"), noinline))

/* Workload functions, exported so that dladdr() can name the frames. */
EXPORT void busy_a(void);
EXPORT void busy_b(void);
EXPORT void reader_a(int fd, char *buf, size_t len, uint64_t ns);
EXPORT void reader_b(int fd, char *buf, size_t len, uint64_t ns);
EXPORT void sleeper_wait(void);
EXPORT void raw_sleeper_wait(void);
EXPORT void late_b_phase(void *arg);
EXPORT void *scanroot_main(void *arg);

static uint64_t
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t
cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The time the hypervisor took from this machine's CPUs (all of them: /proc/stat's steal), in ns;
 * 0 where it is not known. perf's cpu-clock counts it while a thread is on its CPU, and the
 * thread's CPU clock does not: a perf sample of a guest whose CPU was stolen comes early by the
 * thread's clock, and a perf-ring thread's CPU (the counter's) reads more than its clock
 * (docs/architecture.md, "Weights"). A fresh-clone CI run's ASan stage: in one stretch of under
 * 2 s every perf case came early (two perf samples at 60 and 119 ms of a thread's CPU at 10 Hz;
 * perf-ring 916 ms for 900), the timer cases between them exact. Since weigh0 (2026-11-29) such
 * a perf sample weighs 0 (perf_samples_early_by_steal_weigh_the_threads_clock) and perf-ring
 * maps the counter to the thread's clock; the cases still print the steal.
 */
static uint64_t
steal_ns(void)
{
    unsigned long long v[8] = { 0 };
    long hz = sysconf(_SC_CLK_TCK);
    FILE *f = fopen("/proc/stat", "r");
    int n = 0;

    if (f != NULL) {
        n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
        fclose(f);
    }
    return n == 8 && hz > 0 ? (uint64_t)v[7] * (1000000000u / (uint64_t)hz) : 0;
}

/* ---- collector: what ag_drain delivered, per thread ---- */

#define MAX_TIDS 8192 /* threads_exiting_during_a_scan_are_stopped_once: 6400 */

struct tid_stats {
    int32_t tid;
    char name[AG_NAME_MAX];
    unsigned samples, waiting, running, stopped;
    unsigned hits[4]; /* samples with a frame in want[k] */
    unsigned blocked_src, proc_src;
    unsigned blocked_in_sleep;           /* of blocked_src, the leaf libc's nanosleep's entry */
    unsigned tails, tails_with_stack;    /* final samples (AG_SOURCE_TAIL), of those with a
                                            stack (not the [not sampled] marker alone) */
    uint32_t tail_depth;                 /* of the last one */
    uint64_t tail_leaf;                  /* of the last one: its frames[0] (0: no frame) */
    uint64_t last_cpu_stack, tail_stack; /* hashes: the last CPU signal sample's, the last final */
    unsigned cpu_signal_samples;         /* CPU samples the engine took (AG_SOURCE_SIGNAL) */
    uint64_t cpu_delta_sum, weight_sum;  /* CPU-mode samples: what they stand for */
    unsigned unseen, unseen_marked;      /* AG_SOURCE_UNSEEN samples, of those with the marker */
    unsigned unseen_bare;                /* of those, the marker alone */
    unsigned signal_hits3;               /* CPU signal samples with a frame in want[3] */
    uint64_t unseen_weight, unseen_ns;
    uint64_t hit_weight[4];      /* weights of the CPU samples in hits[k] */
    uint64_t unsampled;          /* wall intervals it went without a sample (its LOST records) */
    uint64_t wall_weight;        /* wall samples' weights: the intervals they stand for */
    unsigned wall_samples;       /* wall samples */
    unsigned wall_held;          /* wall samples that carry held intervals (weight > 1) */
    uint64_t dropped;            /* samples taken and dropped, its ring full (the same records) */
    uint64_t kernel_weight;      /* CPU samples of kernel time ([kernel] or not placed leaves) */
    uint64_t kernel_leaf_weight; /* CPU samples with a [kernel] or not placed leaf, of any source
                                    (a sample at a call's return is AG_SOURCE_SIGNAL) */
    uint64_t tail_weight;        /* final samples' weights (claims: at an exit, a flush, a block) */
    uint32_t signal_weight_max;  /* the largest weight of a CPU sample the engine took */
};

static struct tid_stats col[MAX_TIDS];
static const void *want[4];
static unsigned col_lost, col_records;

static struct tid_stats *
col_get(int32_t tid)
{
    int i;

    for (i = 0; i < MAX_TIDS; i++) {
        if (col[i].tid == tid || col[i].tid == 0) {
            col[i].tid = tid;
            return &col[i];
        }
    }
    return &col[MAX_TIDS - 1];
}

static int
col_frame_is(uint64_t ip, const void *fn)
{
    Dl_info di;

    /* Return addresses point after the call: look up ip - 1. */
    return ip > 1 && dladdr((void *)(uintptr_t)(ip - 1), &di) != 0 && di.dli_saddr == fn;
}

/* The sample's leaf is the first instruction of a function whose name contains name. */
static int
col_leaf_is_entry_of(const struct ag_sample *s, const char *name)
{
    Dl_info di;

    return s->depth != 0 && dladdr((void *)(uintptr_t)s->frames[0], &di) != 0 &&
           (uint64_t)(uintptr_t)di.dli_saddr == s->frames[0] && di.dli_sname != NULL &&
           strstr(di.dli_sname, name) != NULL;
}

static uint64_t
stack_hash(const struct ag_sample *s)
{
    uint64_t h = 1469598103934665603u;
    uint32_t i;

    for (i = 0; i < s->depth; i++) {
        h = (h ^ s->frames[i]) * 1099511628211u;
    }
    return h;
}

static int
col_cb(const struct ag_record *rec, void *ctx)
{
    struct tid_stats *t = col_get(rec->tid);
    uint32_t i;
    int k;

    (void)ctx;
    col_records++;
    switch (rec->kind) {
    case AG_RECORD_THREAD_START:
        snprintf(t->name, sizeof(t->name), "%s", rec->u.name);
        break;
    case AG_RECORD_THREAD_STOP:
        t->stopped++;
        break;
    case AG_RECORD_LOST:
        col_lost += (unsigned)rec->u.lost;
        t->unsampled += rec->unsampled;
        t->dropped += rec->u.lost - rec->unsampled;
        break;
    case AG_RECORD_SAMPLE:
        /* (A final sample of a thread no stack is known for is [not sampled], not stackless.) */
        if (rec->u.sample->tid != rec->tid || rec->u.sample->depth == 0) {
            test_fail(__FILE__, __LINE__, "bad sample: tid %d/%d depth %u", rec->tid,
                      rec->u.sample->tid, rec->u.sample->depth);
        }
        t->samples++;
        if (rec->u.sample->state == AG_STATE_WAITING) {
            t->waiting++;
        } else {
            t->running++;
        }
        t->blocked_src += rec->u.sample->source == AG_SOURCE_BLOCKED;
        t->blocked_in_sleep += rec->u.sample->source == AG_SOURCE_BLOCKED &&
                               col_leaf_is_entry_of(rec->u.sample, "nanosleep");
        t->proc_src += rec->u.sample->source == AG_SOURCE_PROC;
        if (rec->u.sample->source == AG_SOURCE_TAIL) {
            t->tails++;
            t->tails_with_stack +=
                    rec->u.sample->depth > 1 ||
                    (rec->u.sample->depth == 1 && rec->u.sample->frames[0] != ag_not_sampled_pc());
            t->tail_depth = rec->u.sample->depth;
            t->tail_stack = stack_hash(rec->u.sample);
            t->tail_leaf = rec->u.sample->depth > 0 ? rec->u.sample->frames[0] : 0;
            t->tail_weight += rec->u.sample->weight;
        } else if (rec->u.sample->mode == AG_MODE_CPU &&
                   rec->u.sample->source == AG_SOURCE_SIGNAL) {
            /* (a perf thread's final sample may come with its kernel time split off first) */
            t->last_cpu_stack = stack_hash(rec->u.sample);
            t->cpu_signal_samples++;
            if (rec->u.sample->weight > t->signal_weight_max) {
                t->signal_weight_max = rec->u.sample->weight;
            }
        }
        if (rec->u.sample->mode == AG_MODE_CPU) {
            t->cpu_delta_sum += rec->u.sample->cpu_delta_ns;
            t->weight_sum += rec->u.sample->weight;
            t->kernel_weight +=
                    rec->u.sample->source == AG_SOURCE_KERNEL ? rec->u.sample->weight : 0;
            t->kernel_leaf_weight +=
                    rec->u.sample->depth != 0 &&
                                    (rec->u.sample->frames[0] == ag_kernel_pc() ||
                                     rec->u.sample->frames[0] == ag_kernel_unplaced_pc())
                            ? rec->u.sample->weight
                            : 0;
        } else {
            t->wall_samples++;
            t->wall_weight += rec->u.sample->weight;
            t->wall_held += rec->u.sample->weight > 1;
        }
        if (rec->u.sample->source == AG_SOURCE_UNSEEN) {
            t->unseen++;
            t->unseen_marked += rec->u.sample->frames[0] == ag_unseen_pc();
            t->unseen_bare += rec->u.sample->depth == 1;
            t->unseen_weight += rec->u.sample->weight;
            t->unseen_ns += rec->u.sample->cpu_delta_ns;
        }
        for (k = 0; k < 4; k++) {
            for (i = 0; want[k] != NULL && i < rec->u.sample->depth; i++) {
                /* A signal's leaf is the interrupted pc itself, and a blocked call's the
                 * entry of the function called, not a return address: pc - 1 of a function's
                 * first instruction is the end of the function before it. */
                int leaf_pc = i == 0 && (rec->u.sample->source == AG_SOURCE_SIGNAL ||
                                         rec->u.sample->source == AG_SOURCE_TAIL ||
                                         rec->u.sample->source == AG_SOURCE_BLOCKED);

                if (col_frame_is(rec->u.sample->frames[i] + (leaf_pc ? 1 : 0), want[k])) {
                    t->hits[k]++;
                    t->signal_hits3 += k == 3 && rec->u.sample->mode == AG_MODE_CPU &&
                                       rec->u.sample->source == AG_SOURCE_SIGNAL;
                    t->hit_weight[k] +=
                            rec->u.sample->mode == AG_MODE_CPU ? rec->u.sample->weight : 0;
                    break;
                }
            }
        }
        break;
    }
    return 0;
}

/* Drains into fn (col_cb, or a case's own callback that passes each record on to it). */
static void
drain_into(ag_record_fn fn)
{
    int rc = ag_drain(fn, NULL);

    if (rc < 0) {
        test_fail(__FILE__, __LINE__, "ag_drain: %d", rc);
    }
}

static void
col_drain(void)
{
    drain_into(col_cb);
}

/* Drains every 20 ms (8 s at most) until thread tid's STOP came; returns its stats. */
static struct tid_stats *
col_drain_until_stopped(int32_t tid)
{
    struct tid_stats *t = col_get(tid);
    int i;

    for (i = 0; i < 400 && !t->stopped; i++) {
        usleep(20000);
        col_drain();
    }
    return t;
}

/* The agent's defaults, with the timers' first expiry a full interval after the baseline, as
 * these cases reckon their samples (PIPEPROF_TEST_FIXED_PHASE: timer.c, "The lottery"; the
 * lottery itself is tests/agent-groundtruth-short.sh's). */
static void
sampling_config_init(struct ag_config *cfg)
{
    ag_config_init(cfg);
    cfg->test_fixed_phase = 1;
}

static void
start_agent(void)
{
    struct ag_config cfg;

    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    ASSERT_OK(ag_start(&cfg));
}

/* ---- workloads ---- */

static _Atomic int stop_flag;
static _Atomic uint64_t sink; /* relaxed: keeps the loops from being optimised away */

EXPORT void
busy_a(void)
{
    uint64_t x = atomic_load_explicit(&sink, memory_order_relaxed);
    int i;

    for (i = 0; i < 20000; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
    }
    atomic_store_explicit(&sink, x, memory_order_relaxed);
}

EXPORT void
busy_b(void)
{
    uint64_t x = atomic_load_explicit(&sink, memory_order_relaxed);
    int i;

    for (i = 0; i < 20000; i++) {
        x = x * 2862933555777941757u + 3037000493u;
    }
    atomic_store_explicit(&sink, x, memory_order_relaxed);
}

struct busy_arg {
    void (*fn)(void);
    const char *name;
    uint64_t cpu_budget_ns;
    _Atomic int32_t tid;
};

static void *
busy_main(void *p)
{
    struct busy_arg *a = p;
    uint64_t c0 = cpu_ns();

    pthread_setname_np(pthread_self(), a->name);
    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    while (cpu_ns() - c0 < a->cpu_budget_ns && !atomic_load(&stop_flag)) {
        a->fn();
    }
    return NULL;
}

TEST(cpu_mode_samples_both_busy_threads)
{
    struct busy_arg a = { busy_a, "busy-a", 600000000u, 0 };
    struct busy_arg b = { busy_b, "busy-b", 600000000u, 0 };
    pthread_t ta, tb;
    struct ag_stats st;
    struct tid_stats *sa, *sb;
    int i;

    want[0] = (const void *)busy_a;
    want[1] = (const void *)busy_b;
    start_agent();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 1000));
    ASSERT_OK(pthread_create(&ta, NULL, busy_main, &a));
    ASSERT_OK(pthread_create(&tb, NULL, busy_main, &b));
    for (i = 0; i < 40; i++) {
        usleep(50000);
        col_drain();
    }
    ASSERT_OK(pthread_join(ta, NULL));
    ASSERT_OK(pthread_join(tb, NULL));
    sa = col_get(atomic_load(&a.tid));
    sb = col_get(atomic_load(&b.tid));
    /* The thread scan sees an exit within a few of its periods; under TSan on
     * a loaded machine that can take seconds (more than 5 at a load of 20), so wait for it with
     * a bound. */
    for (i = 0; i < 400 && !(sa->stopped && sb->stopped && strcmp(sa->name, "busy-a") == 0 &&
                             strcmp(sb->name, "busy-b") == 0);
         i++) {
        usleep(50000);
        col_drain();
    }
    ag_stats_get(&st);
    printf("# busy-a: %u samples, %u in busy_a; busy-b: %u samples, %u in busy_b; lost %u; "
           "stops announced %u and %u\n",
           sa->samples, sa->hits[0], sb->samples, sb->hits[1], col_lost, sa->stopped, sb->stopped);
    printf("# requested 1000 Hz; effective %.1f samples per CPU-second; overruns %llu; "
           "cfi steps %llu\n",
           st.effective_hz_cpu, (unsigned long long)st.timer_overruns,
           (unsigned long long)st.unwind_cfi_steps);
    ASSERT_TRUE(sa->samples > 0 && sb->samples > 0);
    ASSERT_TRUE(sa->hits[0] > sa->samples / 2); /* frames reach the workload function */
    ASSERT_TRUE(sb->hits[1] > sb->samples / 2);
    ASSERT_EQ(sa->hits[1], 0); /* and never the other thread's */
    ASSERT_EQ(sb->hits[0], 0);
    ASSERT_STR_EQ(sa->name, "busy-a");
    ASSERT_STR_EQ(sb->name, "busy-b");
    ASSERT_TRUE(sa->stopped == 1 && sb->stopped == 1);
    ASSERT_TRUE(st.effective_hz_cpu > 10.0 && st.effective_hz_cpu < 1100.0);
    for (i = 0; i < MAX_TIDS; i++) { /* the agent's own threads never appear */
        ASSERT_TRUE(strncmp(col[i].name, "pipeprof-", 9) != 0);
    }
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 1000));
    ASSERT_EQ(ag_sampling_release(AG_MODE_CPU, 1000), -ENOENT);
    ag_stop();
}

static void
split_fn(void)
{
    busy_a();
    busy_a();
    busy_a();
    busy_b();
}

/* The profile must reflect a known split: 75% of the thread's CPU in busy_a, 25% in busy_b. */
TEST(cpu_mode_attribution_matches_known_split)
{
    /* 2 s of CPU: 500 samples at 250 Hz on an idle machine. On a loaded one a CPU-time timer
     * only fires on ticks that find the thread running (the rest are merged overruns), and
     * 0.8 s once gave 44 samples, under the 50 this needs. */
    struct busy_arg a = { split_fn, "split", 2000000000u, 0 };
    struct tid_stats *t;
    pthread_t th;
    double share;
    int i;

    want[0] = (const void *)busy_a;
    want[1] = (const void *)busy_b;
    start_agent();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 250));
    ASSERT_OK(pthread_create(&th, NULL, busy_main, &a));
    for (i = 0; i < 100 && atomic_load(&a.tid) == 0; i++) {
        usleep(10000);
    }
    ASSERT_OK(pthread_join(th, NULL));
    col_drain();
    t = col_get(atomic_load(&a.tid));
    share = (double)t->hits[0] / (double)(t->hits[0] + t->hits[1] + (t->hits[0] + t->hits[1] == 0));
    printf("# split: %u samples, busy_a %u, busy_b %u: %.1f%% in busy_a (expected 75%%)\n",
           t->samples, t->hits[0], t->hits[1], share * 100.0);
    ASSERT_TRUE(t->hits[0] + t->hits[1] >= 50);
    ASSERT_TRUE(share > 0.6 && share < 0.9);
    ag_stop();
}

static _Atomic int early_returns, sleeps_done;

EXPORT void
sleeper_wait(void)
{
    uint64_t t0 = now_ns();

    if (usleep(20000) != 0 || now_ns() - t0 < 20000000u) {
        atomic_fetch_add(&early_returns, 1);
    }
    atomic_fetch_add(&sleeps_done, 1);
}

/*
 * A sleeper of the wall case: the wall passes made while it slept, its sleeps, its id. It sleeps
 * in 20 ms steps until the wall thread has made SLEEPER_PASSES passes over it (and at least 40
 * steps), not for a fixed 0.8 s: under TSan at load 50 the wall thread made 260 passes a second
 * over the whole case, and a sleeper's 0.8 s held 66 of them (66 waiting samples, under the 100
 * asked for, 1 of 6 runs); the intervals it missed were counted unsampled, as they should be.
 * Every pass over a sleeper takes a sample (kept, or dropped and counted when the test's drain
 * came too late for its 256-slot ring: 394 of 650 at load 28): so many passes, so many samples.
 */
#define SLEEPER_PASSES 400
#define SLEEPER_MAX    1000 /* steps: 20 s at least, for a wall thread that makes no passes */
struct sleeper {
    void (*wait)(void);
    _Atomic int32_t tid;
    unsigned steps;
    uint64_t passes;
    _Atomic int done;
};

static void *
sleeper_main(void *p)
{
    struct sleeper *sl = p;
    uint64_t p0 = atomic_load(&ag.wall_passes);

    atomic_store(&sl->tid, (int32_t)syscall(SYS_gettid));
    while (sl->steps < 40 ||
           (atomic_load(&ag.wall_passes) - p0 < SLEEPER_PASSES && sl->steps < SLEEPER_MAX)) {
        sl->wait();
        sl->steps++;
    }
    sl->passes = atomic_load(&ag.wall_passes) - p0;
    atomic_store(&sl->done, 1);
    return NULL;
}

static _Atomic int raw_eintr;

/* Sleeps with the raw syscall: not interposed, so its samples come from /proc. */
EXPORT void
raw_sleeper_wait(void)
{
    struct timespec ts = { 0, 20000000 };

    if (syscall(SYS_nanosleep, &ts, NULL) != 0 && errno == EINTR) {
        atomic_fetch_add(&raw_eintr, 1);
    }
}

/* A thread blocked in a raw read (no interposer: the wall pass reads its registers from /proc). */
static _Atomic int32_t woke_reader_tid;

static void *
woke_reader_main(void *p)
{
    int *fds = p;
    char c;

    atomic_store(&woke_reader_tid, (int32_t)syscall(SYS_gettid));
    return syscall(SYS_read, fds[0], &c, 1) == 1 ? NULL : (void *)1;
}

struct woke_seen {
    int32_t tid;
    uint64_t since_ns, first_ns; /* the thread's first wall sample at or after since_ns */
};

static int
woke_seen_cb(const struct ag_record *rec, void *ctx)
{
    struct woke_seen *w = ctx;

    if (rec->kind == AG_RECORD_SAMPLE && rec->tid == w->tid &&
        rec->u.sample->mode == AG_MODE_WALL && rec->u.sample->timestamp_ns >= w->since_ns &&
        (w->first_ns == 0 || rec->u.sample->timestamp_ns < w->first_ns)) {
        w->first_ns = rec->u.sample->timestamp_ns;
    }
    return 0;
}

/*
 * A wall pass that reads a thread asleep and then finds it awake (its registers no longer in a
 * system call) takes no sample; ag_wall_settle() must not count the thread as seen then, or a
 * stack snapshot (bridge/agent-source.c) settles without it: a thread leaving a short sleep as
 * the pass read it, with too little CPU in a 10 ms session for a CPU sample, was missing from
 * dotnet-stack's threads (dotnet-stack.sh, once in CI under ASan). The seam makes the first
 * pass's read of the reader's registers report that race; settle must wait for a pass with its
 * sample. Before, it returned after the first pass and the reader's first sample came after.
 */
TEST(a_wall_pass_that_finds_a_sleeper_awake_does_not_settle_it)
{
    struct woke_seen w = { 0, 0, 0 };
    uint64_t settled;
    pthread_t tr;
    char state = 0;
    int fds[2], i, rc;

    if (test_emulated()) {
        test_skip("under an emulator /proc's registers are the emulator's: no wall sample from "
                  "/proc is taken at all");
    }
    ASSERT_OK(pipe(fds));
    start_agent();
    ASSERT_OK(pthread_create(&tr, NULL, woke_reader_main, fds));
    for (i = 0; i < 2000 && state != 'S'; i++) {
        char path[64], buf[256], *p;
        FILE *f;

        usleep(1000);
        snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)atomic_load(&woke_reader_tid));
        if (atomic_load(&woke_reader_tid) != 0 && (f = fopen(path, "r")) != NULL) {
            if (fgets(buf, sizeof(buf), f) != NULL && (p = strrchr(buf, ')')) != NULL) {
                state = p[2];
            }
            fclose(f);
        }
    }
    ASSERT_EQ(state, 'S');
    w.tid = atomic_load(&woke_reader_tid);
    atomic_store(&ag_wall_test_woke_reads, 1);
    atomic_store(&ag_wall_test_woke_tid, w.tid);
    w.since_ns = ag_now_ns();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_WALL, 100)); /* a pass every 10 ms */
    rc = ag_wall_settle(w.since_ns, 5000);
    settled = ag_now_ns();
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(atomic_load(&ag_wall_test_woke_reads), 0u); /* the race was made */
    ASSERT_TRUE(ag_drain(woke_seen_cb, &w) >= 0);
    ASSERT_OK(ag_sampling_release(AG_MODE_WALL, 100));
    atomic_store(&ag_wall_test_woke_tid, 0);
    printf("# reader %d: first sample %.2f ms after the start, settled at %.2f ms\n", (int)w.tid,
           w.first_ns != 0 ? (double)(w.first_ns - w.since_ns) / 1e6 : -1.0,
           (double)(settled - w.since_ns) / 1e6);
    ASSERT_TRUE(w.first_ns != 0 && w.first_ns <= settled);
    ASSERT_EQ(write(fds[1], "x", 1), 1);
    ASSERT_OK(pthread_join(tr, NULL));
    close(fds[0]);
    close(fds[1]);
    ag_stop();
}

TEST(wall_mode_sleeps_are_complete_and_sampled_waiting)
{
    struct busy_arg a = { busy_a, "busy-a", 500000000u, 0 };
    struct sleeper sleeper = { sleeper_wait, 0, 0, 0, 0 }, raw = { raw_sleeper_wait, 0, 0, 0, 0 };
    pthread_t ts, tr, ta;
    struct ag_stats st;
    struct tid_stats *s, *r, *b;
    int i;

    want[0] = (const void *)busy_a;
    want[1] = (const void *)sleeper_wait;
    want[2] = (const void *)raw_sleeper_wait;
    start_agent();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_WALL, 1000));
    ASSERT_OK(pthread_create(&ts, NULL, sleeper_main, &sleeper));
    ASSERT_OK(pthread_create(&tr, NULL, sleeper_main, &raw));
    ASSERT_OK(pthread_create(&ta, NULL, busy_main, &a));
    /* drained as they go: 256 slots a ring hold a quarter of a second at 1 kHz */
    for (i = 0; i < 1000 && !(atomic_load(&sleeper.done) && atomic_load(&raw.done)); i++) {
        usleep(50000);
        col_drain();
    }
    ASSERT_OK(pthread_join(ts, NULL));
    ASSERT_OK(pthread_join(tr, NULL));
    ASSERT_OK(pthread_join(ta, NULL));
    col_drain();
    ag_stats_get(&st);
    s = col_get(atomic_load(&sleeper.tid));
    r = col_get(atomic_load(&raw.tid));
    b = col_get(atomic_load(&a.tid));
    printf("# sleeper: %u steps under %llu passes, %u samples (%u waiting, %u from the "
           "interposer, %u of them in libc's nanosleep, %u in sleeper_wait), %llu dropped, %llu "
           "unsampled\n",
           sleeper.steps, (unsigned long long)sleeper.passes, s->samples, s->waiting,
           s->blocked_src, s->blocked_in_sleep, s->hits[1], (unsigned long long)s->dropped,
           (unsigned long long)s->unsampled);
    printf("# raw: %u steps under %llu passes, %u samples (%u waiting, %u from /proc, %u in "
           "raw_sleeper_wait, %d EINTR), %llu dropped, %llu unsampled; busy: %u running\n",
           raw.steps, (unsigned long long)raw.passes, r->samples, r->waiting, r->proc_src,
           r->hits[2], atomic_load(&raw_eintr), (unsigned long long)r->dropped,
           (unsigned long long)r->unsampled, b->running);
    printf("# wall: requested 1000 Hz, effective %.1f passes/s; eintr seen %llu absorbed %llu\n",
           st.effective_hz_wall, (unsigned long long)st.eintr_seen,
           (unsigned long long)st.eintr_absorbed);
    ASSERT_EQ(atomic_load(&early_returns), 0);
    ASSERT_EQ(atomic_load(&sleeps_done), (int)sleeper.steps);
    ASSERT_TRUE(sleeper.passes >= SLEEPER_PASSES && raw.passes >= SLEEPER_PASSES);
    /* Asleep nearly all of its time, the sleeper is sampled waiting by the passes over it: 97 to
     * 100 % of them were sampled or dropped at load 15-50 (sampled once per sleep, it would
     * hold its steps, a tenth of them), and the first drain finds at least 100 in its ring. */
    ASSERT_TRUE(s->wall_weight + s->dropped >= sleeper.passes * 8 / 10);
    ASSERT_TRUE(s->waiting > 100 && s->waiting >= s->samples * 9 / 10);
    ASSERT_TRUE(s->hits[1] > s->waiting / 2);
    /* The stack recorded at usleep names the call it waits in: libc's nanosleep, which the
     * interposer calls, over sleeper_wait (usleep's caller). Before, its leaf was the return
     * address into sleeper_wait. */
    ASSERT_TRUE(s->blocked_src > 0 && s->blocked_in_sleep == s->blocked_src);
    if (test_emulated()) {
        /* /proc/TID/syscall shows qemu's own registers: the raw sleeper's waiting samples are
         * refused and counted as lost, never given a stack that is not its. */
        printf("# NOTE (loud): emulated: the /proc path is not checked; lost %llu\n",
               (unsigned long long)st.lost);
        ASSERT_EQ(r->proc_src, 0);
        ASSERT_TRUE(st.lost > 100);
    } else {
        /* Not interposed, it is signalled when a pass finds it runnable (woken, not yet run):
         * the passes until its handler runs are unsampled (618 passes: 397 samples, none
         * dropped, TSan at load 20), or held for its sample's weight while it waits for a
         * core. */
        ASSERT_TRUE(r->wall_weight + r->dropped + r->unsampled >= raw.passes * 8 / 10);
        /* Its samples while awake are true ones: at most one as a pass finds it woken and one
         * as it lies preempted before it sleeps again, per 20 ms step. How many passes that is
         * depends on the load, not on the agent (an ASan build at a load of 19: 38 of 337
         * samples, 64 steps, where a tenth was the bound); a raw sleep sampled as running
         * would put nearly every sample here. */
        ASSERT_TRUE(r->waiting > 100 && r->samples - r->waiting <= 2 * raw.steps);
        ASSERT_TRUE(r->proc_src > 0);
    }
    ASSERT_TRUE(b->running > 0 && b->hits[0] > 0);
    ag_stop();
}

/* A thread that waits in an interposed read() of a pipe until the test writes to it. */
struct pipe_waiter {
    int fds[2];
    _Atomic int32_t tid;
    _Atomic int entered;
};

EXPORT void pipe_waiter_read(struct pipe_waiter *w);

EXPORT __attribute__((noinline)) void
pipe_waiter_read(struct pipe_waiter *w)
{
    char c;

    atomic_store(&w->entered, 1);
    if (read(w->fds[0], &c, 1) != 1) {
        atomic_store(&w->entered, -1);
    }
    __asm__ volatile("" ::: "memory"); /* a frame of its own below the call */
}

static void *
pipe_waiter_main(void *p)
{
    struct pipe_waiter *w = p;

    atomic_store(&w->tid, (int32_t)syscall(SYS_gettid));
    pipe_waiter_read(w);
    return NULL;
}

/* The state letter of thread tid's stat, or 0. */
static char
thread_state(int32_t tid)
{
    char path[64], buf[256], *p;
    int fd, n;

    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
    fd = open(path, O_RDONLY);
    if (fd < 0) {
        return 0;
    }
    n = (int)read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p[2] : 0;
}

/*
 * The stack a CPU-mode stop marker gets for a thread the drain finds in an interposed blocking
 * call (ag_thread_wait_stack) is the one the call noted, as a wall sample has it: the libc
 * function the interposer calls, at its entry, over the caller (pipe_waiter_read). In CPU mode
 * alone the call notes only its frame and the drain walks from it; with wall sampling too it
 * noted the whole stack. Before, the stack was walked from /proc's registers: its leaf an
 * instruction inside libc's read, never its entry.
 */
TEST(cpu_wait_stack_of_a_thread_in_a_blocking_call_is_the_calls)
{
    int with_wall;

    if (test_emulated()) {
        /* ag_thread_wait_stack reads the thread's state from /proc/TID/syscall, which shows the
         * emulator's registers (the arm64 stage under qemu-user: depth 0 after 2000 tries) */
        test_skip("emulated: /proc/TID/syscall shows the emulator's registers");
    }
    start_agent();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 100));
    for (with_wall = 0; with_wall < 2; with_wall++) {
        struct pipe_waiter w = { { -1, -1 }, 0, 0 };
        uint64_t frames[AG_MAX_FRAMES];
        uint32_t depth = 0, i, caller = 0, tries;
        pthread_t th;
        Dl_info di;
        int leaf_is_read;

        if (with_wall) {
            ASSERT_OK(ag_sampling_acquire(AG_MODE_WALL, 100));
        }
        ASSERT_OK(pipe(w.fds));
        ASSERT_OK(pthread_create(&th, NULL, pipe_waiter_main, &w));
        /* in the call and asleep: a few tries, for a loaded machine */
        for (tries = 0; tries < 2000 && depth == 0; tries++) {
            usleep(5000);
            if (atomic_load(&w.entered) == 1 && thread_state(atomic_load(&w.tid)) == 'S') {
                depth = ag_thread_wait_stack(atomic_load(&w.tid), frames, AG_MAX_FRAMES);
            }
        }
        ASSERT_TRUE(write(w.fds[1], "x", 1) == 1);
        ASSERT_OK(pthread_join(th, NULL));
        close(w.fds[0]);
        close(w.fds[1]);
        leaf_is_read = depth > 0 && dladdr((void *)(uintptr_t)frames[0], &di) != 0 &&
                       (uint64_t)(uintptr_t)di.dli_saddr == frames[0] && di.dli_sname != NULL &&
                       strstr(di.dli_sname, "read") != NULL;
        for (i = 1; i < depth && !caller; i++) {
            caller = col_frame_is(frames[i], (const void *)pipe_waiter_read);
        }
        printf("# %s: depth %u after %u tries, leaf %#llx (%s at its entry), caller %s\n",
               with_wall ? "CPU and wall" : "CPU alone", depth, tries,
               depth > 0 ? (unsigned long long)frames[0] : 0ull, leaf_is_read ? "read" : "not read",
               caller ? "found" : "missing");
        ASSERT_EQ(atomic_load(&w.entered), 1);
        ASSERT_TRUE(depth >= 2);
        ASSERT_TRUE(leaf_is_read);
        ASSERT_TRUE(caller);
        if (with_wall) {
            ASSERT_OK(ag_sampling_release(AG_MODE_WALL, 100));
        }
    }
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 100));
    ag_stop();
}

TEST(fork_while_sampling_leaves_child_alone)
{
    struct busy_arg a = { busy_a, "busy-a", 300000000u, 0 };
    pthread_t ta;
    pid_t pid;
    int status;
#ifdef __SANITIZE_THREAD__
    sigset_t old_mask;
#endif

    start_agent();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 1000));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_WALL, 500));
    ASSERT_OK(pthread_create(&ta, NULL, busy_main, &a));
    usleep(50000);
#ifdef __SANITIZE_THREAD__
    /* ThreadSanitizer's fork interceptor holds its internal locks across the fork, and a signal
     * handled on the forking thread inside that window can wait for one of them (a wait of the
     * kind of google/sanitizers#1540's). Stop 37's CI run saw this case wait out its 60 s once,
     * in the TSan build only; 196 runs here since passed, so the cause is likely, not seen. The
     * forking thread takes no signal across fork() under TSan alone; the busy thread keeps
     * taking the agent's, and each side unblocks at once. */
    sigset_t all;
    sigfillset(&all);
    ASSERT_OK(pthread_sigmask(SIG_BLOCK, &all, &old_mask));
#endif
    pid = fork();
#ifdef __SANITIZE_THREAD__
    ASSERT_OK(pthread_sigmask(SIG_SETMASK, &old_mask, NULL));
#endif
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        struct sigaction sa;
        uint64_t t0 = now_ns(), c0 = cpu_ns();

        while (cpu_ns() - c0 < 200000000u) {
            busy_b();
        }
        if (usleep(30000) != 0 || now_ns() - t0 < 30000000u) {
            _exit(3);
        }
        sigaction(SIGPROF, NULL, &sa);
        _exit((sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == ag_sig_handler ? 4 : 0);
    }
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
    ASSERT_OK(pthread_join(ta, NULL));
    col_drain();
    ASSERT_TRUE(col_get(atomic_load(&a.tid))->samples > 0); /* the parent still samples */
    ag_stop();
}

static _Atomic int errno_bad;
static _Atomic int32_t errno_tid;

static void *
errno_main(void *p)
{
    uint64_t c0 = cpu_ns();

    (void)p;
    atomic_store(&errno_tid, (int32_t)syscall(SYS_gettid));
    errno = 1234;
    while (cpu_ns() - c0 < 400000000u) {
        busy_a();
        if (errno != 1234) {
            atomic_fetch_add(&errno_bad, 1);
            errno = 1234;
        }
    }
    return NULL;
}

/* ag_main_stack_bounds() computes, without /proc/self/maps, what pthread_getattr_np() reads there
 * for the main thread; another thread gets -1 (its stack is not the main one). */
static void *
stack_bounds_other_main(void *arg)
{
    uint64_t lo = 0, hi = 0;

    *(int *)arg = ag_main_stack_bounds(&lo, &hi);
    return NULL;
}

TEST(main_stack_bounds_match_glibcs)
{
    struct rlimit rl;
    pthread_attr_t attr;
    pthread_t t;
    uint64_t lo = 0, hi = 0;
    void *addr = NULL;
    size_t size = 0;
    int other = 0;

    ASSERT_OK(getrlimit(RLIMIT_STACK, &rl));
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (64u << 20)) {
        test_skip("RLIMIT_STACK is above 64 MiB: the bounds come from glibc's maps read");
    }
    ASSERT_EQ(syscall(SYS_gettid), getpid());
    ASSERT_OK(ag_main_stack_bounds(&lo, &hi));
    ASSERT_OK(pthread_getattr_np(pthread_self(), &attr));
    ASSERT_OK(pthread_attr_getstack(&attr, &addr, &size));
    pthread_attr_destroy(&attr);
    ASSERT_EQ(lo, (uint64_t)(uintptr_t)addr);
    ASSERT_EQ(hi, (uint64_t)(uintptr_t)addr + size);
    ASSERT_OK(pthread_create(&t, NULL, stack_bounds_other_main, &other));
    ASSERT_OK(pthread_join(t, NULL));
    ASSERT_EQ(other, -1);
}

TEST(handler_preserves_errno)
{
    pthread_t t;

    start_agent();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 1000));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_WALL, 1000));
    ASSERT_OK(pthread_create(&t, NULL, errno_main, NULL));
    ASSERT_OK(pthread_join(t, NULL));
    col_drain();
    ASSERT_TRUE(col_get(atomic_load(&errno_tid))->samples > 0);
    ASSERT_EQ(atomic_load(&errno_bad), 0);
    ag_stop();
}

static _Atomic int foreign_calls;

static void
foreign_handler(int sig)
{
    (void)sig;
    atomic_fetch_add(&foreign_calls, 1);
}

/* The real disposition, around the sigaction interposer (which shows the host its own). */
static void
real_sigaction_of(int signo, struct sigaction *out)
{
    int (*real)(int, const struct sigaction *, struct sigaction *) =
            (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT,
                                                                              "sigaction");

    real(signo, NULL, out);
}

TEST(start_stop_idempotent_and_restore_signal)
{
    struct sigaction sa, cur;
    struct ag_config cfg;

    start_agent();
    start_agent(); /* already started: 0, no second handler */
    real_sigaction_of(SIGPROF, &cur);
    ASSERT_TRUE((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == ag_sig_handler);
    ASSERT_TRUE(cur.sa_flags & SA_RESTART);
    sigaction(SIGPROF, NULL, &cur); /* the host sees its own disposition */
    ASSERT_TRUE(!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL);
    ASSERT_EQ(ag_sampling_acquire(AG_MODE_CPU, 0), -EINVAL);
    ASSERT_EQ(ag_sampling_acquire(AG_MODE_CPU, 5000), -EINVAL);
    ag_stop();
    ag_stop();
    /* The library's handler stays (host.h); the host still reads its SIG_DFL. */
    real_sigaction_of(SIGPROF, &cur);
    ASSERT_TRUE((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == ag_sig_handler);
    sigaction(SIGPROF, NULL, &cur);
    ASSERT_TRUE(!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL);
    ASSERT_EQ(ag_drain(col_cb, NULL), -ESRCH);
    ASSERT_EQ(ag_sampling_acquire(AG_MODE_CPU, 99), -ESRCH);
    /* Someone else's handler: it stays theirs, gets only their signals, and is back after. */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = foreign_handler;
    sigaction(SIGPROF, &sa, NULL);
    sampling_config_init(&cfg);
    ASSERT_OK(ag_start(&cfg));
    sigaction(SIGPROF, NULL, &cur);
    ASSERT_TRUE(cur.sa_handler == foreign_handler);
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 1000));
    {
        uint64_t c0 = cpu_ns();

        while (cpu_ns() - c0 < 100000000u) { /* 100 ms of CPU: about 100 of the agent's */
            busy_a();
        }
    }
    ASSERT_TRUE(atomic_load(&ag.n_samples) > 0);
    ASSERT_EQ(atomic_load(&foreign_calls), 0);
    raise(SIGPROF);
    ASSERT_EQ(atomic_load(&foreign_calls), 1);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 1000));
    ag_stop();
    /* After the stop too: the host's own signals reach its handler, through the library's. */
    real_sigaction_of(SIGPROF, &cur);
    ASSERT_TRUE((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == ag_sig_handler);
    sigaction(SIGPROF, NULL, &cur);
    ASSERT_TRUE(cur.sa_handler == foreign_handler);
    raise(SIGPROF);
    ASSERT_EQ(atomic_load(&foreign_calls), 2);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigaction(SIGPROF, &sa, NULL);
    /* Another signal works; SIGPROF goes back to the host's disposition, now SIG_DFL. */
    cfg.signo = SIGRTMIN + 2;
    ASSERT_OK(ag_start(&cfg));
    real_sigaction_of(SIGPROF, &cur);
    ASSERT_TRUE(!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL);
    ag_stop();
}

/* Blocks SIGPROF, has send() make one instance of it, waits until it is pending and opens it:
 * 0 once it was taken, -ETIMEDOUT when it never came. */
static int
sigprof_taken_after(int (*send)(void))
{
    sigset_t set, pending;
    unsigned i;
    int err;

    sigemptyset(&set);
    sigaddset(&set, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    err = send();
    for (i = 0; err == 0 && i < 1000; i++) {
        sigpending(&pending);
        if (sigismember(&pending, SIGPROF) == 1) {
            break;
        }
        usleep(1000);
    }
    err = err != 0 ? err : i == 1000 ? -ETIMEDOUT : 0;
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    return err;
}

/* A CPU timer's expiry of the agent's (its value), on a monotonic one-shot 1 ms timer. */
static int
send_timer_expiry(void)
{
    struct sigevent sev;
    struct itimerspec its;
    timer_t timer;

    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev.sigev_value.sival_int = AG_TIMER_SIVAL;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    memset(&its, 0, sizeof(its));
    its.it_value.tv_nsec = 1000000;
    if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0) {
        return -errno;
    }
    return timer_settime(timer, 0, &its, NULL) == 0 ? 0 : -errno;
}

/* A wall pass's signal (its value, from the process). */
static int
send_wall_signal(void)
{
    union sigval v = { .sival_int = AG_WALL_SIVAL };

    return sigqueue(getpid(), SIGPROF, v) == 0 ? 0 : -errno;
}

/*
 * An instance of the agent's signal delivered after its stop, where the host's disposition is
 * SIG_DFL, does not end the host; the host's own still does, as bare. The instances are made here
 * after the stop, as qemu-user delivers one it took from the kernel before the stop (its queue,
 * which the stop's SIG_IGN does not empty, is read with the disposition of the moment): the
 * arm64 stage's test-agent-resources died of signal 27 so (9 of 282 runs of its masking host case
 * under qemu-aarch64 7.2). Before, the stop restored SIG_DFL and this case died of SIGPROF.
 */
TEST(the_agents_signal_after_a_stop_does_not_end_the_host)
{
    struct sigaction cur;
    pid_t pid;
    int status;

    start_agent();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 1000));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_WALL, 1000));
    usleep(20000);
    ag_stop();
    sigaction(SIGPROF, NULL, &cur);
    ASSERT_TRUE(!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL);
    ASSERT_OK(sigprof_taken_after(send_timer_expiry));
    ASSERT_OK(sigprof_taken_after(send_wall_signal));
    pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        kill(getpid(), SIGPROF); /* the host's own: the default action */
        usleep(100000);
        _exit(0);
    }
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGPROF);
}

/*
 * The host's own instance of the signal, pending for a thread (sent while the thread blocks it),
 * takes in the wall passes' signals sent meanwhile: the kernel keeps one pending standard signal.
 * Its handler is the host's (chained), and no handler of the library takes the wall signal: it is
 * counted lost, and the next pass signals the thread again. Before, the pass's mark stayed set
 * and the thread had no wall sample for the rest of the session (0 in 200 ms of CPU at 1000 Hz,
 * every interval counted lost).
 */
TEST(wall_signals_a_thread_again_after_its_signal_merged_into_the_hosts)
{
    int32_t tid = (int32_t)syscall(SYS_gettid);
    struct tid_stats *me;
    struct sigaction sa;
    struct ag_stats st;
    unsigned blocked_samples;
    sigset_t prof;
    uint64_t c0;

#ifdef __SANITIZE_THREAD__
    /* TSan takes a signal for the thread and runs the handler at the thread's next call it
     * intercepts, which the burn does not make. */
    test_skip("under ThreadSanitizer, which holds the signals back (it runs in the -Werror and "
              "ASan builds)");
#endif
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = foreign_handler;
    sigaction(SIGPROF, &sa, NULL);
    atomic_store(&foreign_calls, 0);
    start_agent();
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    /* The host's instance first, before any wall pass could have one of the library's pending */
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &prof, NULL, (long)(_NSIG / 8));
    syscall(SYS_tgkill, (long)getpid(), (long)tid, (long)SIGPROF);
    ASSERT_OK(ag_sampling_acquire(AG_MODE_WALL, 1000));
    for (c0 = cpu_ns(); cpu_ns() - c0 < 100000000u;) {
        busy_a(); /* the passes signal it: merged into the host's */
    }
    col_drain();
    blocked_samples = col_get(tid)->samples;
    syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &prof, NULL, (long)(_NSIG / 8));
    ASSERT_EQ(atomic_load(&foreign_calls), 1);
    for (c0 = cpu_ns(); cpu_ns() - c0 < 200000000u;) {
        busy_a();
    }
    col_drain();
    ASSERT_OK(ag_sampling_release(AG_MODE_WALL, 1000));
    ag_stats_get(&st);
    me = col_get(tid);
    printf("# wall samples while it blocked the signal %u, after %u; intervals counted lost "
           "%llu\n",
           blocked_samples, me->samples - blocked_samples, (unsigned long long)st.lost);
    ASSERT_EQ(blocked_samples, 0);
    ASSERT_TRUE(st.lost > 0);
    /* 200 ms of CPU at 1000 Hz: a few even when the machine's load leaves it little of it */
    ASSERT_TRUE(me->samples - blocked_samples >= 5);
    ag_stop();
    sa.sa_handler = SIG_DFL;
    sigaction(SIGPROF, &sa, NULL);
}

/* ---- a running thread that waits for a core with its wall signal pending ---- */

static int
slot_active(int32_t tid)
{
    unsigned i, high = atomic_load(&ag.high);

    for (i = 0; i < high && i < ag.cfg.max_threads; i++) {
        if (atomic_load(&ag.threads[i].tid) == tid &&
            atomic_load(&ag.threads[i].state) == AG_SLOT_ACTIVE) {
            return 1;
        }
    }
    return 0;
}

/*
 * A busy thread at SCHED_IDLE shares one CPU with a busy hog: runnable all the time, it waits
 * for the core most of it, so the wall signal a pass sends it stays pending for many intervals.
 * Its stack does not change meanwhile: the sample that comes carries those intervals as weight
 * (before, each pass that found the signal pending counted its interval lost, and a thread
 * that waited more got less thread time than it spent: dotnet-threadtime's Cold thread had 8.4 %
 * of the workers' time with the agent against 14.3 % without, at load 20). Every interval of its
 * time in the session is in a sample's weight or counted lost, and the agent's count of held
 * intervals is exactly the weights beyond one that the drain delivered.
 */
TEST(wall_sample_carries_the_intervals_its_thread_waited_for_a_core)
{
    static _Atomic int stop_waiter, stop_hog;
    struct test_spinner waiter = { test_first_cpu(), 1, 0, 0, &stop_waiter, 0 },
                        hog = { waiter.cpu, 0, 0, 0, &stop_hog, 0 };
    pthread_t tw, th;
    struct tid_stats *me;
    struct ag_stats st;
    uint64_t requested, t0, t1, gone, held = 0;
    double intervals, got;
    int i;

#ifdef __SANITIZE_THREAD__
    /* TSan takes a signal for the thread and runs the handler at the thread's next call it
     * intercepts, which the burn does not make: the thread runs with it pending. */
    test_skip("under ThreadSanitizer, which holds the signals back (it runs in the -Werror and "
              "ASan builds)");
#endif
    memset(col, 0, sizeof(col));
    atomic_store(&stop_waiter, 0);
    atomic_store(&stop_hog, 0);
    start_agent();
    ASSERT_OK(pthread_create(&th, NULL, test_spinner_main, &hog));
    ASSERT_OK(pthread_create(&tw, NULL, test_spinner_main, &waiter));
    for (i = 0; i < 2000 && (atomic_load(&waiter.ready) == 0 || atomic_load(&hog.ready) == 0 ||
                             !slot_active(atomic_load(&waiter.tid)));
         i++) {
        usleep(5000);
    }
    ASSERT_EQ(atomic_load(&waiter.ready), 1);
    ASSERT_EQ(atomic_load(&hog.ready), 1);
    ASSERT_TRUE(slot_active(atomic_load(&waiter.tid)));
    col_drain();
    memset(col, 0, sizeof(col));
    requested = ag_now_ns();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_WALL, 100));
    /* Its time in the session starts at the wall thread's first pass (ag.wall_first_ns), as the
     * session's own window does: no pass, no interval to hold or count. From the acquire, a
     * fresh-clone CI run's ASan stage at load 21 found 80.6 % of 130 intervals, none lost. */
    for (i = 0; i < 4000 && atomic_load(&ag.wall_first_ns) == 0; i++) {
        usleep(1000);
    }
    t0 = atomic_load(&ag.wall_first_ns);
    ASSERT_TRUE(t0 != 0);
    for (i = 0; i < 10; i++) {
        usleep(100000);
        col_drain();
    }
    /* The hog goes, and the waiter is told to end: it runs and takes its pending signal with
     * what it held on its way out, while the session runs. (It used to be told after the session:
     * on a loaded machine another task kept the SCHED_IDLE thread off its core for the 100 ms
     * given after the hog, and it took its signal after the session's end, which counts held
     * passes lost: 0 samples and 110 intervals unsampled in a fresh-clone CI run's ASan stage.)
     * The join waits for it as long as it takes. */
    atomic_store(&stop_hog, 1);
    ASSERT_OK(pthread_join(th, NULL));
    atomic_store(&stop_waiter, 1);
    ASSERT_OK(pthread_join(tw, NULL));
    /* Its time ends as it leaves, not when this thread, which the load can keep off a core for
     * a while, has joined it. */
    t1 = atomic_load(&waiter.stopped_ns);
    ASSERT_OK(ag_sampling_release(AG_MODE_WALL, 100));
    /* no pass after this: the count of passes stood still for 50 ms */
    for (i = 0, held = atomic_load(&ag.wall_passes); i < 100; i++) {
        usleep(50000);
        if (atomic_load(&ag.wall_passes) == held) {
            break;
        }
        held = atomic_load(&ag.wall_passes);
    }
    held = 0;
    gone = ag_now_ns();
    col_drain();
    ag_stats_get(&st);
    me = col_get(atomic_load(&waiter.tid));
    for (i = 0; i < MAX_TIDS && col[i].tid != 0; i++) {
        held += col[i].wall_weight - col[i].wall_samples;
    }
    intervals = (double)(t1 - t0) / 1e7;
    got = (double)(me->wall_weight + me->unsampled + me->dropped);
    printf("# waiter on CPU %d beside a hog, %.0f ms at 100 Hz from the first pass (%.1f ms "
           "after the request): %u wall samples standing for "
           "%llu intervals (%u of them weighted), %llu unsampled, %llu dropped; %.1f%% of %.0f "
           "intervals accounted for; held: %llu delivered, %llu counted\n",
           waiter.cpu, (double)(t1 - t0) / 1e6, (double)(t0 - requested) / 1e6, me->wall_samples,
           (unsigned long long)me->wall_weight, me->wall_held, (unsigned long long)me->unsampled,
           (unsigned long long)me->dropped, 100.0 * got / intervals, intervals,
           (unsigned long long)held, (unsigned long long)st.wall_held);
    /* Its waits held intervals for its samples, and each reached the consumer once */
    ASSERT_TRUE(me->wall_held > 0);
    ASSERT_TRUE(me->wall_weight > me->wall_samples);
    ASSERT_U64_EQ(held, st.wall_held);
    /* Its intervals, less the first and last (outside), at most those until the wall thread
     * was gone: none counted twice */
    ASSERT_TRUE(got >= 0.85 * intervals);
    ASSERT_TRUE(got <= 1.1 * (double)(gone - t0) / 1e7 + 2);
    ag_stop();
}

static void *
short_main(void *p)
{
    uint64_t c0 = cpu_ns();

    (void)p;
    while (cpu_ns() - c0 < 10000000u) {
        busy_b();
    }
    return NULL;
}

TEST(short_lived_threads_start_and_stop)
{
    pthread_t t[16];
    unsigned stops = 0;
    int i, round;

    start_agent();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 1000));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_WALL, 1000));
    for (round = 0; round < 4; round++) {
        for (i = 0; i < 16; i++) {
            ASSERT_OK(pthread_create(&t[i], NULL, short_main, NULL));
        }
        for (i = 0; i < 16; i++) {
            ASSERT_OK(pthread_join(t[i], NULL));
        }
        col_drain();
    }
    usleep(100000);
    col_drain();
    for (i = 0; i < MAX_TIDS; i++) {
        stops += col[i].stopped;
    }
    ASSERT_TRUE(stops >= 32); /* tids may be reused; most exits are reported */
    ag_stop();
}

/*
 * Threads that exit together while the scan runs every millisecond: each one's stop is announced
 * once. An exit hook notes its thread's time under reg_lock, and the scan skips a thread noted
 * lately that the kernel still lists while it exits; the scan read its own time before it took
 * the lock, so a hook that held the lock meanwhile was later than the scan's now, the difference
 * wrapped around, and the exiting thread was registered again: a second START and STOP for it
 * (cpu_with_the_signal_blocked_is_marked_unseen_timer's "tb->stopped == 1: 2 != 1", once in CI).
 * Without the fix this case failed 11 of 12 runs (1 to 5 threads of 6400 stopped twice).
 * A tid the kernel gave twice within the test (it would take pid_max threads and processes
 * meanwhile) is left out of the count, and said.
 */
struct exiter {
    pthread_barrier_t *go;
    _Atomic int32_t tid;
};

static void *
exiter_main(void *p)
{
    struct exiter *e = p;

    atomic_store(&e->tid, (int32_t)syscall(SYS_gettid));
    pthread_barrier_wait(e->go);
    return NULL;
}

TEST(threads_exiting_during_a_scan_are_stopped_once)
{
    enum { MAX_ROUNDS = 200, N = 32 };
    static struct exiter e[MAX_ROUNDS * N];
#ifdef __SANITIZE_THREAD__
    const unsigned rounds = 50; /* 200 took 13 s there */
#else
    const unsigned rounds = test_emulated() ? 50 : MAX_ROUNDS;
#endif
    pthread_barrier_t go;
    struct ag_config cfg;
    unsigned round, i, j, k, twice = 0, unseen = 0, reused = 0, stopped = 0;
    pthread_t th[N];

    memset(col, 0, sizeof(col));
    sampling_config_init(&cfg);
    cfg.scan_ms = 1; /* below PIPEPROF_SCAN_MS's range: a scan meets the exits more often */
    ASSERT_OK(ag_start(&cfg));
    /* each exit hook then claims its thread's CPU and deletes its timer, under the lock */
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 100));
    for (round = 0; round < rounds; round++) {
        ASSERT_OK(pthread_barrier_init(&go, NULL, N + 1));
        for (i = 0; i < N; i++) {
            e[round * N + i].go = &go;
            ASSERT_OK(pthread_create(&th[i], NULL, exiter_main, &e[round * N + i]));
        }
        pthread_barrier_wait(&go); /* every tid stored; they exit together */
        for (i = 0; i < N; i++) {
            ASSERT_OK(pthread_join(th[i], NULL));
        }
        ASSERT_OK(pthread_barrier_destroy(&go));
        col_drain();
    }
    for (k = 0; k < 400 && stopped < rounds * N; k++) {
        usleep(5000);
        col_drain();
        for (i = 0, stopped = 0; i < rounds * N; i++) {
            stopped += col_get(atomic_load(&e[i].tid))->stopped != 0;
        }
    }
    /* A second slot for a thread is found gone by the scan after the thread was reaped, and
     * stopped by the drain after that */
    usleep(20000);
    col_drain();
    usleep(20000);
    col_drain();
    for (i = 0; i < rounds * N; i++) {
        int32_t tid = atomic_load(&e[i].tid);
        unsigned same = 0;

        for (j = 0; j < rounds * N; j++) {
            same += atomic_load(&e[j].tid) == tid;
        }
        if (same > 1) {
            reused++;
            continue;
        }
        twice += col_get(tid)->stopped > 1;
        unseen += col_get(tid)->stopped == 0;
    }
    printf("# %u threads exiting %u at a time, scans every 1 ms: %u stopped twice, %u never, "
           "%u with a tid given twice (not counted)\n",
           rounds * N, N, twice, unseen, reused);
    if (reused != 0) {
        printf("# NOTE (loud): the kernel gave a tid twice within the test\n");
    }
    ASSERT_EQ(twice, 0);
    ASSERT_EQ(unseen, 0);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 100));
    ag_stop();
}

/* Stopping while signals are in flight to busy threads must not leave one pending under
 * SIGPROF's default action (which would kill the process). Under qemu-user too, where it was
 * skipped: qemu keeps a signal it has taken from the kernel in a queue of its own until the
 * thread next runs guest code, which the stop's SIG_IGN did not empty, and one still there when
 * SIG_DFL returned killed the process; the handler now stays after a stop (host.h). */
TEST(stop_while_signals_in_flight_is_safe)
{
    struct busy_arg a[4];
    pthread_t t[4];
    int round, i;

    atomic_store(&stop_flag, 0);
    for (i = 0; i < 4; i++) {
        a[i].fn = busy_a;
        a[i].name = "stopper";
        a[i].cpu_budget_ns = 5000000000u;
        atomic_store(&a[i].tid, 0);
        ASSERT_OK(pthread_create(&t[i], NULL, busy_main, &a[i]));
    }
    for (round = 0; round < 20; round++) {
        start_agent();
        ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 1000));
        ASSERT_OK(ag_sampling_acquire(AG_MODE_WALL, 1000));
        usleep(20000);
        ag_stop();
    }
    atomic_store(&stop_flag, 1);
    for (i = 0; i < 4; i++) {
        ASSERT_OK(pthread_join(t[i], NULL));
    }
}

/* A session of max_threads slots sampling in mode at 1000 Hz, scanning every 20 ms. */
static void
start_small_registry(unsigned max_threads, enum ag_mode mode)
{
    struct ag_config cfg;

    sampling_config_init(&cfg);
    cfg.max_threads = max_threads;
    cfg.scan_ms = 20;
#ifdef __SANITIZE_THREAD__
    /* TSan defers signals to its interceptors, and 50 ms threads under it may see no perf
     * overflow there; the timer engine's expiries are merged into one that does arrive. */
    cfg.cpu_engine = AG_CPU_ENGINE_TIMER;
#endif
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(ag_sampling_acquire(mode, 1000));
}

/* More threads than slots: the extra ones are counted, not sampled, and nothing breaks. */
TEST(registry_full_counts_dropped_threads)
{
    struct busy_arg a[8];
    struct ag_stats st;
    pthread_t t[8];
    int i;

    /* Room for the main thread, the agent's own (registered, then excluded) and a few of the 8
     * workers: some are sampled, the others dropped. With 4 the workers could all be left out. */
    start_small_registry(6, AG_MODE_CPU);
    for (i = 0; i < 8; i++) {
        a[i].fn = busy_b;
        a[i].name = "many";
        a[i].cpu_budget_ns = 50000000u;
        atomic_store(&a[i].tid, 0);
        ASSERT_OK(pthread_create(&t[i], NULL, busy_main, &a[i]));
    }
    for (i = 0; i < 8; i++) {
        ASSERT_OK(pthread_join(t[i], NULL));
    }
    col_drain();
    ag_stats_get(&st);
    ASSERT_TRUE(st.threads_dropped > 0);
    ASSERT_TRUE(st.threads_dropped <= 8); /* each refused worker once, not at each scan */
    ASSERT_TRUE(st.threads_seen <= 6 + 8);
    ASSERT_TRUE(st.samples > 0);
    ag_stop();
}

/*
 * Thread churn past the registry (issue 22): 8 slots, and threads that start and exit one after
 * another, 2000 of them, with no drain until the end. An exited thread's slot was freed only by
 * the next drain, so every thread past the first few went unregistered (counted in
 * threads_dropped, never sampled). Now a registration that finds no free slot reclaims the
 * exited threads' slots, keeping their records for the drain: no thread is dropped, and each one
 * comes in whole, its START, its samples (CPU mode: the 2 ms it burns, in samples or its final
 * sample; wall mode: the waiting sample of a pass that found it asleep) and its STOP.
 *
 * Wall mode promises a look per pass at each live thread, not a sample of each thread: a pass
 * that cannot know where a thread waits (registers that are not the program's, under qemu-user)
 * counts the interval lost for it and takes it as seen (agent/internal.h, wall_seen_ns; docs/
 * architecture.md, "Linux arm64"), and there is no final sample in wall mode. Each thread here
 * sleeps until a pass has looked at it, so it has a wall sample or, under an emulator only, looks
 * counted lost (its LOST records). The arm64 stage under qemu-user failed with "1 without a
 * sample" of 300; by hand each such thread had slept 0 times and had 1 to 22 looks counted lost
 * (registers at a pc of the emulator's, ENOEXEC, as each run's 680 to 850 such looks were): 9 of
 * 3 x 2000 threads, and 2 to 6 of 300 in 4 runs of 8 with PP_EMULATED=1. With those losses left
 * uncounted this fails again (2 runs of 3). Natively a waiting thread's registers are read from
 * /proc, and every thread must have a sample.
 */
struct churn_arg {
    _Atomic int32_t tid;
    _Atomic int registered; /* it had a slot at its start */
    enum ag_mode mode;
    _Atomic int naps; /* wall mode: its sleeps until a pass had seen it */
};

static void *
churn_main(void *p)
{
    struct churn_arg *a = p;
    uint64_t c0 = cpu_ns();
    int k;

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    atomic_store(&a->registered, ag_tls_thread != NULL);
    if (a->mode == AG_MODE_CPU) {
        while (cpu_ns() - c0 < 2000000u) {
            busy_a(); /* two intervals at 1000 Hz */
        }
        return NULL;
    }
    /* Asleep until a wall pass has seen it (bounded: a pass may find nothing it can take). */
    for (k = 0; k < 1000 && ag_tls_thread != NULL &&
                atomic_load_explicit(&ag_tls_thread->wall_seen_ns, memory_order_relaxed) == 0;
         k++) {
        usleep(1000);
    }
    atomic_store(&a->naps, k);
    return NULL;
}

static int
churn_tid_cmp(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;

    return (a > b) - (a < b);
}

static void
churn_case(enum ag_mode mode)
{
    enum { N = 2000 };
    static struct churn_arg a[N];
    static int32_t sorted[N];
    const unsigned n = test_emulated() ? 300 : N;
    unsigned i, k, unregistered = 0, stopped = 0, unstarted = 0, stopped_twice = 0, none = 0;
    unsigned reused = 0, lost = 0;
    struct ag_stats st;

    memset(col, 0, sizeof(col));
    memset(a, 0, sizeof(a));
    /* the main thread, the agent's (excluded) and one worker at a time */
    start_small_registry(8, mode);
    for (i = 0; i < n; i++) {
        pthread_t th;

        a[i].mode = mode;
        ASSERT_OK(pthread_create(&th, NULL, churn_main, &a[i]));
        ASSERT_OK(pthread_join(th, NULL));
    }
    ag_stats_get(&st);
    for (k = 0; k < 400 && stopped < n; k++) {
        col_drain();
        for (i = 0, stopped = 0; i < n; i++) {
            stopped += col_get(atomic_load(&a[i].tid))->stopped != 0;
        }
        if (stopped < n) {
            usleep(5000);
        }
    }
    for (i = 0; i < n; i++) {
        sorted[i] = atomic_load(&a[i].tid);
    }
    qsort(sorted, n, sizeof(sorted[0]), churn_tid_cmp);
    for (i = 0; i < n; i++) {
        int32_t tid = atomic_load(&a[i].tid);
        const int32_t *at = bsearch(&tid, sorted, n, sizeof(sorted[0]), churn_tid_cmp);
        struct tid_stats *c = col_get(tid);

        unregistered += !atomic_load(&a[i].registered);
        if ((at > sorted && at[-1] == tid) || (at + 1 < sorted + n && at[1] == tid)) {
            reused++; /* two threads' records under one tid (pid_max 32768 and a busy machine) */
            continue;
        }
        unstarted += c->name[0] == '\0';
        stopped_twice += c->stopped > 1;
        if (mode == AG_MODE_CPU ? c->weight_sum == 0 : c->wall_samples == 0) {
            if (mode == AG_MODE_WALL && test_emulated() && c->dropped != 0) {
                lost++; /* looked at, its registers the emulator's: counted lost (above) */
                continue;
            }
            /* how it ended: its naps (1000: no pass seen), and what was counted lost for it */
            if (none++ < 4) {
                printf("# thread %d without a sample: %d naps, %llu dropped, %llu unsampled, "
                       "%u samples\n",
                       (int)tid, atomic_load(&a[i].naps), (unsigned long long)c->dropped,
                       (unsigned long long)c->unsampled, c->samples);
            }
        }
    }
    if (st.threads_dropped != 0 || unregistered != 0 || stopped != n || unstarted != 0 ||
        none != 0) {
        test_fail(__FILE__, __LINE__,
                  "%s: %u threads one after another, 8 slots: %" PRIu64
                  " dropped, %u not registered, %u stopped, %u without a START, %u without a "
                  "sample",
                  mode == AG_MODE_CPU ? "cpu" : "wall", n, st.threads_dropped, unregistered,
                  stopped, unstarted, none);
    }
    if (reused != 0) {
        printf("# NOTE (loud): the kernel gave %u of %u tids twice within the test (not counted)\n",
               reused, n);
    }
    if (lost != 0) {
        printf("# NOTE: %u of %u threads had their looks counted lost, no sample (emulated)\n",
               lost, n);
    }
    /* A sleep's stack is the interposer's, known under the emulator too: most threads have their
     * sample there (6 of 300 without, at most, in 8 runs by hand) */
    ASSERT_TRUE(lost <= n / 10);
    ASSERT_TRUE(reused < n / 2);
    ASSERT_EQ(stopped_twice, 0);
    ag_stop();
}

TEST(thread_churn_past_the_slots_drops_no_thread_cpu)
{
    churn_case(AG_MODE_CPU);
}

TEST(thread_churn_past_the_slots_drops_no_thread_wall)
{
    churn_case(AG_MODE_WALL);
}

/* More threads alive at once than slots: the ones without a slot are counted dropped (nothing
 * to reclaim: no slot's thread has exited), the others come in whole, and nothing breaks. */
struct alive_arg {
    pthread_barrier_t *go;
    _Atomic int32_t tid;
    _Atomic int registered;
};

static void *
alive_main(void *p)
{
    struct alive_arg *a = p;
    uint64_t c0 = cpu_ns();

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    atomic_store(&a->registered, ag_tls_thread != NULL);
    while (cpu_ns() - c0 < 2000000u) {
        busy_b();
    }
    pthread_barrier_wait(a->go); /* every worker alive until all have tried their registration */
    return NULL;
}

TEST(more_live_threads_than_slots_are_counted_dropped)
{
    enum { N = 16 };
    struct alive_arg a[N];
    pthread_barrier_t go;
    pthread_t th[N];
    struct ag_stats st;
    unsigned i, k, registered = 0, stopped = 0;

    memset(col, 0, sizeof(col));
    memset(a, 0, sizeof(a));
    start_small_registry(8, AG_MODE_CPU);
    ASSERT_OK(pthread_barrier_init(&go, NULL, N + 1));
    for (i = 0; i < N; i++) {
        a[i].go = &go;
        ASSERT_OK(pthread_create(&th[i], NULL, alive_main, &a[i]));
    }
    pthread_barrier_wait(&go);
    ag_stats_get(&st);
    for (i = 0; i < N; i++) {
        registered += atomic_load(&a[i].registered) != 0;
    }
    for (i = 0; i < N; i++) {
        ASSERT_OK(pthread_join(th[i], NULL));
    }
    ASSERT_OK(pthread_barrier_destroy(&go));
    for (k = 0; k < 400 && stopped < registered; k++) {
        col_drain();
        for (i = 0, stopped = 0; i < N; i++) {
            stopped +=
                    atomic_load(&a[i].registered) && col_get(atomic_load(&a[i].tid))->stopped == 1;
        }
        if (stopped < registered) {
            usleep(5000);
        }
    }
    /* at most 8 slots, the main thread's among them: some workers had none */
    ASSERT_TRUE(registered > 0 && registered < N);
    ASSERT_TRUE(st.threads_dropped >= N - registered);
    ASSERT_EQ(stopped, registered);
    for (i = 0; i < N; i++) {
        if (atomic_load(&a[i].registered)) {
            ASSERT_TRUE(col_get(atomic_load(&a[i].tid))->name[0] != '\0');
        }
    }
    ag_stop();
}

/* A thread that burns budget_ns of CPU, measures it, then waits for `go` (when wait) and exits. */
struct tail_arg {
    uint64_t budget_ns;
    int wait;
    _Atomic int32_t tid;
    _Atomic int phase; /* 1: burned, waiting; 2: go */
    _Atomic uint64_t cpu_ns;
    _Atomic int hold;    /* set before the start: it burns only once cleared (its engine armed) */
    uint64_t rearm_ns;   /* nonzero: its engine restarts its interval once it burned this much */
    _Atomic uint64_t c0; /* its CPU clock as it began to burn */
};

/* Restarts the calling thread's CPU engine's interval: its next sample comes a whole interval
 * from now, as a sample that came late (a signal held back, a tick that missed the thread). */
static void
tail_rearm_self(void)
{
    struct ag_thread *t = ag_sig_thread_self();
    uint64_t period = 100000000u;
    struct itimerspec its = { { 0, 100000000 }, { 0, 100000000 } };

    if (t == NULL) {
        test_fail(__FILE__, __LINE__, "rearm: the thread has no slot");
        return;
    }
    pthread_mutex_lock(&ag.reg_lock);
    if (t->has_perf) {
        /* a new period restarts the count to the next overflow (perf_event_open(2)) */
        if (ioctl(atomic_load(&t->perf_fd), PERF_EVENT_IOC_PERIOD, &period) != 0) {
            test_fail(__FILE__, __LINE__, "PERF_EVENT_IOC_PERIOD: %d", errno);
        }
    } else if (!t->has_timer || timer_settime(t->timer, 0, &its, NULL) != 0) {
        test_fail(__FILE__, __LINE__, "rearm: no engine to restart (%d)", errno);
    }
    pthread_mutex_unlock(&ag.reg_lock);
}

EXPORT void *tail_main(void *p);

EXPORT void *
tail_main(void *p)
{
    struct tail_arg *a = p;
    uint64_t c0;

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    while (atomic_load(&a->hold)) {
        usleep(1000);
    }
    c0 = cpu_ns();
    atomic_store(&a->c0, c0);
    while (cpu_ns() - c0 < a->budget_ns) {
        if (a->rearm_ns != 0 && cpu_ns() - c0 >= a->rearm_ns) {
            a->rearm_ns = 0;
            tail_rearm_self();
        }
        busy_a();
    }
    atomic_store(&a->cpu_ns, cpu_ns() - c0);
    atomic_store(&a->phase, 1);
    while (a->wait && atomic_load(&a->phase) != 2) {
        usleep(2000);
    }
    return NULL;
}

/*
 * The CPU a thread burned after its last sample is counted: ag_cpu_flush() claims it for a live
 * thread (what a session's end does), the thread's exit for one that ends. At 10 Hz, 175 ms of
 * CPU is one engine sample and 75 ms after it (never none: a final sample takes what is left, at
 * least half an interval). The samples' CPU then adds up to what the thread measured itself
 * (within what it burned before its first measurement and after its last: microseconds), the
 * weights to 2 intervals, and the final sample carries the last sample's stack. Before, the
 * 75 ms were never counted.
 */
/* Waits until the manager's scan has registered thread tid and armed its engine (timer or perf). */
static void
wait_thread_armed(int32_t tid)
{
    int i, armed = 0;

    for (i = 0; i < 6000 && !armed; i++) {
        unsigned k;

        pthread_mutex_lock(&ag.reg_lock);
        for (k = 0; k < atomic_load(&ag.high); k++) {
            armed |= atomic_load(&ag.threads[k].tid) == tid &&
                     atomic_load(&ag.threads[k].state) == AG_SLOT_ACTIVE &&
                     (ag.threads[k].has_timer || ag.threads[k].has_perf);
        }
        pthread_mutex_unlock(&ag.reg_lock);
        if (!armed) {
            usleep(5000);
        }
    }
    if (!armed) {
        test_fail(__FILE__, __LINE__, "thread %d not armed in 30 s", (int)tid);
    }
}

/* The CPU-time baseline the agent set for thread tid as it armed it (before its first sample). */
static uint64_t
thread_cpu_baseline(int32_t tid)
{
    uint64_t base = 0;
    unsigned k;

    pthread_mutex_lock(&ag.reg_lock);
    for (k = 0; k < atomic_load(&ag.high); k++) {
        if (atomic_load(&ag.threads[k].tid) == tid &&
            atomic_load(&ag.threads[k].state) == AG_SLOT_ACTIVE) {
            base = atomic_load(&ag.threads[k].last_cpu_ns);
        }
    }
    pthread_mutex_unlock(&ag.reg_lock);
    return base;
}

/* late: the engine's interval restarts at 55 ms of the thread's CPU, so its sample is due at 155
 * ms, weighing 2, and leaves 20 ms, no final sample: the outcome of late samples in CI. Returns 1
 * when that sample did not come before the exit (a loaded machine's tick that missed the thread,
 * an overflow skipped in the kernel): its final sample took both intervals; else 0. */
static int
check_tail(enum ag_cpu_engine engine, int flush, int late)
{
    /* Under qemu the thread's first run translates its code, on its CPU clock: milliseconds. */
    const int64_t slack = test_emulated() ? 8000000 : 1500000;
    struct tail_arg a = { 175000000u, flush, 0, 0, 0, 1, late ? 55000000u : 0, 0 };
    struct ag_config cfg;
    struct ag_stats st;
    struct tid_stats *t;
    pthread_t th;
    uint64_t rest, base, before, stolen = steal_ns();
    int64_t diff;
    int i;

    want[0] = (const void *)busy_a;
    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    cfg.cpu_engine = engine;
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 10));
    ASSERT_OK(pthread_create(&th, NULL, tail_main, &a));
    /* It burns once its engine is armed: the scan registers it (the interposed pthread_create
     * that registers a host's thread at its start is not in this test), and what it burned
     * before is not the engine's to count. */
    while (atomic_load(&a.tid) == 0) {
        usleep(1000);
    }
    wait_thread_armed(atomic_load(&a.tid));
    base = thread_cpu_baseline(atomic_load(&a.tid)); /* no sample before the hold ends */
    atomic_store(&a.hold, 0);
    for (i = 0; i < 2000 && atomic_load(&a.phase) != 1; i++) {
        usleep(5000);
    }
    ASSERT_EQ(atomic_load(&a.phase), 1);
    if (flush) {
        ag_cpu_flush();
        col_drain();
    } else {
        ASSERT_OK(pthread_join(th, NULL));
    }
    t = col_get(atomic_load(&a.tid));
    for (i = 0; i < 100 && (flush ? t->tails == 0 : !t->stopped); i++) {
        col_drain();
        usleep(20000);
    }
    ag_stats_get(&st);
    stolen = steal_ns() - stolen;
    /* What the samples stand for and what the thread's end left to no sample (a flush leaves
     * that to the live thread's next sample) add up to what the thread measured, with what it
     * burned between its arming and its first measurement (its waits for the hold to end: up to
     * 0.55 ms under TSan beside two busy loops, where its exit took 0.09 ms at most; a TSan run
     * beside a build came out 2.19 ms over the measure alone, past the slack). */
    rest = flush ? 0 : st.cpu_rest_ns;
    before = base != 0 && atomic_load(&a.c0) > base ? atomic_load(&a.c0) - base : 0;
    diff = (int64_t)t->cpu_delta_sum + (int64_t)rest - (int64_t)(atomic_load(&a.cpu_ns) + before);
    printf("# %s, %s: %u samples (%u final, %u with a stack, %u in busy_a), CPU %.2f ms "
           "+ %.2f ms left, measured %.2f ms (+ %.2f ms before), weights %llu x 100 ms; "
           "stolen %.0f ms\n",
           flush ? "flush" : "exit", st.threads_perf != 0 ? "perf_event" : "timer", t->samples,
           t->tails, t->tails_with_stack, t->hits[0], (double)t->cpu_delta_sum / 1e6,
           (double)st.cpu_rest_ns / 1e6, (double)atomic_load(&a.cpu_ns) / 1e6, (double)before / 1e6,
           (unsigned long long)t->weight_sum, (double)stolen / 1e6);
    ASSERT_EQ(t->weight_sum, 2);
    if (late && t->tails != 0 && t->cpu_signal_samples == 0) {
        ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 10));
        ag_stop();
        return 1;
    }
    if (late) {
        ASSERT_EQ(t->tails, 0);
        ASSERT_TRUE(rest > 0);
    }
    if (t->tails == 0) {
        /* The engine's samples came late (or early) enough to take both intervals, which leaves
         * no final sample due: the rest, with the carry the rounding left, is under half an
         * interval. Fresh-clone CI runs under TSan on a loaded machine: a timer sample at 168.58
         * ms of the thread's CPU weighing 2 (the tick can miss a thread's runs: docs/
         * architecture.md, "The tick's bias"); perf samples of 168.31 ms in all, weights 2 (an
         * overflow delivered late, its second interval split off as kernel time, or perf's
         * cpu-clock running ahead of the thread's clock), 6.7 ms left. The samples' CPU rounds
         * to their weights (a weight rounds its span, carry included, to the nearest interval),
         * and the thread's exit counts what it left (cpu_rest_ns): it adds up. */
        printf("# the engine's samples took both intervals: %.2f ms left, no final sample\n",
               (double)(atomic_load(&a.cpu_ns) - t->cpu_delta_sum) / 1e6);
        ASSERT_EQ(st.cpu_tails, 0);
        ASSERT_EQ(t->unseen, 0);
        ASSERT_TRUE(t->cpu_signal_samples >= 1); /* the others: their kernel time split off */
        /* (a perf sample early by what was stolen, steal_ns, weighs 0 since weigh0: the weights
         * follow the thread's clock, with no allowance for the steal) */
        ASSERT_TRUE(t->cpu_delta_sum + 50000000u >= 200000000u);
        ASSERT_TRUE(t->cpu_delta_sum < atomic_load(&a.cpu_ns));
    } else {
        ASSERT_EQ(t->tails, 1);
        ASSERT_EQ(st.cpu_tails, 1);
        ASSERT_U64_EQ(st.cpu_rest_ns, 0);  /* the final sample took it */
        ASSERT_EQ(t->tails_with_stack, 1); /* the last sample's, or tail_main under start_thread */
        if (t->cpu_signal_samples != 0) {  /* the engine's sample came (TSan may hold one back) */
            ASSERT_U64_EQ(t->tail_stack, t->last_cpu_stack);
        }
    }
    if (!flush || t->tails != 0) {
        ASSERT_TRUE(diff > -slack && diff < slack);
    }
    if (flush) {
        atomic_store(&a.phase, 2);
        ASSERT_OK(pthread_join(th, NULL));
    }
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 10));
    ag_stop();
    return 0;
}

/*
 * Feeds ag_sig_cpu_weigh n samples of a thread whose CPU clock moves by num/den of an interval
 * between them (a perf overflow every interval of perf's cpu-clock, which counts what the
 * hypervisor stole; the thread's clock does not), by rule. Returns the sum of the weights; *zero
 * gets the samples that weighed 0, and *left the CPU not in weights (the carry and the span no
 * sample took).
 */
static uint64_t
weigh_under_steal(int rule, uint64_t num, uint64_t den, unsigned n, unsigned *zero, int64_t *left)
{
    const uint64_t period = 100000000u, base = 1000000000u;
    struct ag_thread *t = calloc(1, sizeof(*t));
    uint64_t cpu = base, sum = 0, delta, delta_sum = 0, w;
    unsigned i;

    *zero = 0;
    if (t == NULL) {
        return 0;
    }
    atomic_store(&t->last_cpu_ns, base); /* armed: its baseline */
    for (i = 0; i < n; i++) {
        cpu += period * num / den;
        w = ag_sig_cpu_weigh(t, cpu, period, rule, &delta);
        sum += w;
        delta_sum += delta;
        *zero += w == 0;
        if (w == 0) {
            /* an early span is not taken: the sample's CPU stays for the next */
            ASSERT_U64_EQ(delta, 0);
        }
    }
    *left = atomic_load(&t->cpu_carry_ns) + (int64_t)(cpu - atomic_load(&t->last_cpu_ns));
    /* what the samples took is what the thread's clock moved since the last taken one */
    ASSERT_U64_EQ(delta_sum, atomic_load(&t->last_cpu_ns) - base);
    free(t);
    return sum;
}

/*
 * Perf samples under steal: a perf overflow comes every interval of perf's cpu-clock, and the
 * thread's clock moved 0.9 or 0.6 of one. The weights follow the thread's clock: a sample whose
 * CPU (the carry counted) is under half an interval weighs 0 and leaves its span to the next, so
 * the weights times the interval are the thread's CPU within half an interval. The at-least-one
 * rule (AG_WEIGH_ONE, the timers', where an expiry is never early by the thread's clock) gave each
 * such sample a whole interval: 1000 intervals for 900 and for 600 (docs/architecture.md,
 * "Weights").
 */
TEST(perf_samples_early_by_steal_weigh_the_threads_clock)
{
    static const uint64_t num[] = { 9, 6, 7, 1 }, den[] = { 10, 10, 9, 1 };
    const int64_t period = 100000000;
    unsigned zero, i;
    uint64_t w;
    int64_t left, cpu;

    for (i = 0; i < 4; i++) {
        cpu = period * (int64_t)num[i] / (int64_t)den[i] * 1000;
        w = weigh_under_steal(AG_WEIGH_EARLY, num[i], den[i], 1000, &zero, &left);
        printf("# perf, the thread's clock at %llu/%llu of perf's: weights %llu for %.1f intervals "
               "of its CPU, %u early, %.1f ms left\n",
               (unsigned long long)num[i], (unsigned long long)den[i], (unsigned long long)w,
               (double)cpu / (double)period, zero, (double)left / 1e6);
        /* the weights and what is left are the thread's CPU, exactly */
        ASSERT_TRUE((int64_t)w * period + left == cpu);
        ASSERT_TRUE(left > -period / 2 && left <= period / 2);
        ASSERT_U64_EQ(zero, 1000 - w);
        w = weigh_under_steal(AG_WEIGH_ONE, num[i], den[i], 1000, &zero, &left);
        printf("# the at-least-one rule: weights %llu\n", (unsigned long long)w);
        ASSERT_EQ(zero, 0);
        ASSERT_U64_EQ(w, 1000); /* 11 and 67 % over under steal */
    }
    /* no baseline (a thread not armed yet): one interval, as before */
    {
        struct ag_thread *t = calloc(1, sizeof(*t));
        uint64_t delta = 1;

        ASSERT_TRUE(t != NULL);
        ASSERT_U64_EQ(ag_sig_cpu_weigh(t, 5000000u, (uint64_t)period, AG_WEIGH_EARLY, &delta), 1);
        ASSERT_U64_EQ(delta, 0);
        /* a sample with no CPU since the previous one weighs 0 under perf, 1 on the timers */
        ASSERT_U64_EQ(ag_sig_cpu_weigh(t, 5000000u, (uint64_t)period, AG_WEIGH_EARLY, &delta), 0);
        ASSERT_U64_EQ(ag_sig_cpu_weigh(t, 5000000u, (uint64_t)period, AG_WEIGH_ONE, &delta), 1);
        free(t);
    }
}

/*
 * perf-ring under steal: its samples carry the event's count, perf's cpu-clock, which counts what
 * the hypervisor stole. 1000 samples an interval of the count apart, the thread's clock moving
 * 0.9 (then 0.6) of it, the ring read every 10 samples (a read's count and clock pair 3/4 of an
 * interval after its last sample): mapped to the thread's clock (ag_pring_cpu), the weights are
 * its CPU within an interval; read as the count (the clock at the enable plus the count, as
 * before), they were 1000 intervals.
 */
TEST(perf_ring_samples_under_steal_weigh_the_threads_clock)
{
    static const uint64_t num[] = { 9, 6 };
    const uint64_t period = 10000000u, base = 5000000000u;
    uint64_t sum, delta, clock = 0;
    unsigned i, k, early;
    struct ag_thread *t;

    for (i = 0; i < 2; i++) {
        t = calloc(1, sizeof(*t));
        ASSERT_TRUE(t != NULL);
        t->ring_cpu_base = base; /* the enable: count 0 */
        atomic_store(&t->last_cpu_ns, base);
        sum = 0;
        early = 0;
        for (k = 1; k <= 1000; k++) {
            uint64_t w;

            if (k % 10 == 1) { /* the read of samples k to k + 9: its pair, after them */
                t->ring_count_to = (k + 9) * period + period * 3 / 4;
                t->ring_cpu_to = base + t->ring_count_to / 10 * num[i];
            }
            w = ag_sig_cpu_weigh(t, ag_pring_cpu(t, k * period), period, AG_WEIGH_EARLY, &delta);
            sum += w;
            early += w == 0;
            if (k % 10 == 0) {
                ag_pring_pair_next(t);
            }
        }
        clock = 1000 * period / 10 * num[i]; /* the thread's CPU at the last sample */
        printf("# perf-ring, the thread's clock at %llu/10 of the count: weights %llu for %.1f "
               "intervals of its CPU, %u early\n",
               (unsigned long long)num[i], (unsigned long long)sum, (double)clock / (double)period,
               early);
        ASSERT_TRUE(sum * period + period >= clock && sum * period <= clock + period);
        ASSERT_TRUE(early >= 1);
        free(t);
    }
}

/* A thread that exits before its first sample: its CPU comes in as a final sample whose stack is
 * its start routine (under start_thread), not lost and not stackless. */
TEST(final_sample_of_an_unsampled_thread_has_its_start_routine)
{
    struct tail_arg a = { 60000000u, 0, 0, 0, 0, 0, 0, 0 };
    struct ag_config cfg;
    struct tid_stats *t;
    pthread_t th;
    int i;

    want[0] = (const void *)tail_main;
    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 10)); /* 60 ms: no sample before the end */
    ASSERT_OK(pthread_create(&th, NULL, tail_main, &a));
    ASSERT_OK(pthread_join(th, NULL));
    t = col_get(atomic_load(&a.tid));
    for (i = 0; i < 100 && !t->stopped; i++) {
        col_drain();
        usleep(20000);
    }
    printf("# unsampled: %u samples (%u final, %u frames), CPU %.2f ms, measured %.2f ms, "
           "leaf tail_main %u\n",
           t->samples, t->tails, t->tail_depth, (double)t->cpu_delta_sum / 1e6,
           (double)atomic_load(&a.cpu_ns) / 1e6, t->hits[0]);
    ASSERT_EQ(t->samples, 1);
    ASSERT_EQ(t->tails_with_stack, 1);
    ASSERT_EQ(t->hits[0], 1);
    /* tail_main, start_thread (and clone3 once libc's CFI table is built: the agent builds the
     * tables on its manager thread after it starts, and this thread starts at once) */
    ASSERT_TRUE(t->tail_depth >= 2);
    ASSERT_TRUE(t->cpu_delta_sum >= atomic_load(&a.cpu_ns));
    ASSERT_TRUE(t->cpu_delta_sum <
                atomic_load(&a.cpu_ns) + (test_emulated() ? 8000000u : 1500000u));
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 10));
    ag_stop();
}

/* Whether this process may open a cpu-clock event on itself (a seccomp profile or
 * perf_event_paranoid 3 may refuse it): the perf engine's cases say loudly when they skip. */
static int
perf_allowed(void)
{
    struct perf_event_attr attr;
    int fd;

    memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.exclude_kernel = 1;
    attr.disabled = 1;
    fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd < 0) {
        printf("# SKIP (loud): perf_event_open refused here (%s): the perf engine is not checked\n",
               strerror(errno));
        return 0;
    }
    close(fd);
    return 1;
}

/* Sends the calling thread a perf overflow's signal as the kernel fills it (F_SETSIG: POLL_IN and
 * the event's fd; a process may queue any code to itself). */
static void
send_perf_overflow(int fd)
{
    siginfo_t si;

    memset(&si, 0, sizeof(si));
    si.si_signo = ag.signo;
    si.si_code = POLL_IN;
    si.si_pid = getpid();
    si.si_uid = getuid();
    si.si_fd = fd;
    syscall(SYS_rt_tgsigqueueinfo, (long)getpid(), (long)syscall(SYS_gettid), (long)ag.signo, &si);
}

/* Burns the calling thread's CPU until its clock reads from + ns. */
static void
burn_to(uint64_t from, uint64_t ns)
{
    while (cpu_ns() < from + ns) {
        split_fn();
    }
}

/*
 * The perf handler's own path with overflows of our timing (the event disabled, its fd's signals
 * sent by hand) at 10 Hz: a sample at 60 ms of the thread's CPU (weight 1, 40 ms of debt), one
 * 60 ms after it (20 ms with the carry: early, weighs 0, no sample, nothing taken), one 200 ms
 * after the first (160 ms with the carry: weight 2). That last one's second interval is the early
 * overflow's, which came in user mode: no kernel time is split off it (before the early count,
 * one interval of kernel time was). The weights are the thread's CPU: 3 intervals for 260 ms.
 */
TEST(an_early_perf_sample_leaves_its_span_to_the_next)
{
    int32_t tid = (int32_t)syscall(SYS_gettid);
    struct ag_thread *t = NULL;
    struct ag_config cfg;
    struct ag_stats st;
    struct tid_stats *c;
    uint64_t first, base;
    int fd = -1, i;

    if (!perf_allowed()) {
        return;
    }
    sampling_config_init(&cfg);
    cfg.cpu_engine = AG_CPU_ENGINE_PERF;
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 10));
    for (i = 0; i < 2000 && (t == NULL || fd < 0); i++) {
        t = ag_sig_thread_self();
        fd = t != NULL ? atomic_load(&t->perf_fd) : -1;
        if (fd < 0) {
            usleep(1000);
        }
    }
    ASSERT_TRUE(t != NULL && fd >= 0);
    ASSERT_OK(ioctl(fd, PERF_EVENT_IOC_DISABLE, 0)); /* its overflows are ours alone */
    base = atomic_load(&t->last_cpu_ns);
    ASSERT_TRUE(base != 0);
    burn_to(base, 60000000u);
    send_perf_overflow(fd);
    first = atomic_load(&t->last_cpu_ns);
    ASSERT_TRUE(first >= base + 60000000u);
    burn_to(first, 60000000u);
    send_perf_overflow(fd);
    ag_stats_get(&st);
    ASSERT_U64_EQ(st.perf_early, 1);
    ASSERT_U64_EQ(atomic_load(&t->last_cpu_ns), first); /* nothing taken */
    burn_to(first, 200000000u);
    send_perf_overflow(fd);
    ag_stats_get(&st);
    ASSERT_U64_EQ(st.perf_early, 1);
    ag_cpu_flush(); /* kernel time that waits for a stack comes out now */
    for (i = 0; i < 10; i++) {
        col_drain();
        usleep(20000);
    }
    c = col_get(tid);
    printf("# early perf sample: %u samples (%u of the engine), weights %llu for %.1f ms of CPU, "
           "kernel time split off %llu intervals; %llu early\n",
           c->samples, c->cpu_signal_samples, (unsigned long long)c->weight_sum,
           (double)c->cpu_delta_sum / 1e6, (unsigned long long)c->kernel_weight,
           (unsigned long long)st.perf_early);
    ASSERT_EQ(c->cpu_signal_samples, 2);
    ASSERT_U64_EQ(c->weight_sum, 3);
    ASSERT_U64_EQ(c->kernel_weight, 0);
    ASSERT_TRUE(c->cpu_delta_sum >= 260000000u && c->cpu_delta_sum < 300000000u);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 10));
    ag_stop();
}

/* Waits (up to 20 s) until the agent's slot of tid is armed and its last scan read the thread's
 * CPU clock at cpu or later (0: any), reading the slot under the registry lock. */
static void
scan_slot_wait(int32_t tid, uint64_t cpu)
{
    int i, done = 0;
    unsigned j;

    for (i = 0; i < 4000 && !done; i++) {
        pthread_mutex_lock(&ag.reg_lock);
        for (j = 0; j < atomic_load(&ag.high); j++) {
            struct ag_thread *t = &ag.threads[j];

            if (atomic_load(&t->state) == AG_SLOT_ACTIVE && atomic_load(&t->tid) == tid &&
                (t->has_timer || t->has_perf) && t->scan_cpu_ns >= cpu) {
                done = 1;
            }
        }
        pthread_mutex_unlock(&ag.reg_lock);
        if (!done) {
            usleep(5000);
        }
    }
}

/* A thread the agent knows only from its /proc scan (created with the real pthread_create, as a
 * raw clone or a thread older than the agent would be): no key destructor claims its last CPU at
 * its exit. It waits until the scan found and armed it, burns 175 ms at 10 Hz, waits until a
 * scan read its CPU clock after that, and exits: the scan that finds it gone claims the CPU up to
 * the scan before. Before, the 75 ms after its one engine sample were never counted. (Fixed
 * sleeps for both waits missed the scan under TSan on a loaded machine.) */
static void *
scan_only_main(void *p)
{
    struct tail_arg *a = p;
    int32_t tid = (int32_t)syscall(SYS_gettid);
    uint64_t c0;

    atomic_store(&a->tid, tid);
    scan_slot_wait(tid, 0);
    c0 = cpu_ns();
    while (cpu_ns() - c0 < a->budget_ns) {
        busy_a();
    }
    atomic_store(&a->cpu_ns, cpu_ns() - c0);
    scan_slot_wait(tid, cpu_ns());
    return NULL;
}

/* Runs scan_only_main on a (timer engine, 10 Hz, 20 ms scans) and drains until its STOP; the
 * agent keeps sampling. Returns the thread's figures. */
static struct tid_stats *
run_scan_only(struct tail_arg *a)
{
    struct ag_config cfg;
    struct tid_stats *t;
    pthread_t th;
    int i;

    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    cfg.cpu_engine = AG_CPU_ENGINE_TIMER;
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 10));
    ASSERT_OK(host_real_pthread_create()(&th, NULL, scan_only_main, a));
    ASSERT_OK(pthread_join(th, NULL));
    t = col_get(atomic_load(&a->tid));
    for (i = 0; i < 100 && !t->stopped; i++) {
        col_drain();
        usleep(20000);
    }
    return t;
}

TEST(final_sample_of_a_thread_only_the_scan_found)
{
    struct tail_arg a = { 175000000u, 0, 0, 0, 0, 0, 0, 0 };
    struct tid_stats *t;
    int64_t diff, weights_ns;

    want[0] = (const void *)busy_a;
    t = run_scan_only(&a);
    diff = (int64_t)t->cpu_delta_sum - (int64_t)atomic_load(&a.cpu_ns);
    printf("# scan-only: %u samples (%u final), CPU %.2f ms, measured %.2f ms, weights %llu\n",
           t->samples, t->tails, (double)t->cpu_delta_sum / 1e6,
           (double)atomic_load(&a.cpu_ns) / 1e6, (unsigned long long)t->weight_sum);
    /* What a final claim guarantees: the samples stand for the thread's CPU within half an
     * interval (a claim of less is left out; a late engine sample under load takes it all and
     * rounds up). Before, the engine sample at 100 ms was all: 75 ms short. */
    weights_ns = (int64_t)t->weight_sum * 100000000 - (int64_t)atomic_load(&a.cpu_ns);
    ASSERT_EQ(t->stopped, 1);
    ASSERT_TRUE(diff > -50000000 && diff < (test_emulated() ? 8000000 : 1500000));
    ASSERT_TRUE(weights_ns >= -50000000 && weights_ns <= 50000000);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 10));
    ag_stop();
}

/* A thread that burned CPU time before the agent started, whose start was deferred with
 * ag_cpu_origin_set() (a `record` child in CPU mode starts its agent 5 ms after its constructor):
 * it burns 120 ms from its origin, waits for the start, burns 175 ms more at 10 Hz and waits for a
 * scan that read its clock. Its samples stand for all 295 ms; without the origin the 120 ms
 * before the start were never counted (the first sample stood for the CPU since the arming). */
struct origin_arg {
    _Atomic int32_t tid;
    _Atomic int go;
    _Atomic uint64_t cpu_ns;
    _Atomic uint64_t end_ns; /* its CPU since the origin once the scan read it: the claim's end */
};

static void *
origin_main(void *p)
{
    struct origin_arg *a = p;
    int32_t tid = (int32_t)syscall(SYS_gettid);
    uint64_t c0 = cpu_ns(), c1;

    ag_cpu_origin_set(tid, c0);
    while (cpu_ns() - c0 < 120000000u) {
        busy_a();
    }
    atomic_store(&a->tid, tid);
    while (!atomic_load(&a->go)) {
        usleep(2000);
    }
    c1 = cpu_ns();
    while (cpu_ns() - c1 < 175000000u) {
        busy_a();
    }
    atomic_store(&a->cpu_ns, cpu_ns() - c0);
    scan_slot_wait(tid, cpu_ns());
    atomic_store(&a->end_ns, cpu_ns() - c0);
    return NULL;
}

/* One run of the case below: the thread's samples (t), its CPU measured since the origin at the
 * end of its burn and once the scan read its clock (what its final claim may reach). */
static struct tid_stats *
origin_run(uint64_t *measured, uint64_t *end)
{
    struct origin_arg a = { 0, 0, 0, 0 };
    struct ag_config cfg;
    struct tid_stats *t;
    pthread_t th;
    int i;

    want[0] = (const void *)busy_a;
    ASSERT_OK(host_real_pthread_create()(&th, NULL, origin_main, &a));
    while (atomic_load(&a.tid) == 0) {
        usleep(2000);
    }
    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    cfg.cpu_engine = AG_CPU_ENGINE_TIMER;
    ASSERT_OK(ag_start(&cfg)); /* its scan finds the thread */
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 10));
    atomic_store(&a.go, 1);
    ASSERT_OK(pthread_join(th, NULL));
    t = col_get(atomic_load(&a.tid));
    for (i = 0; i < 100 && !t->stopped; i++) {
        col_drain();
        usleep(20000);
    }
    *measured = atomic_load(&a.cpu_ns);
    *end = atomic_load(&a.end_ns);
    printf("# origin: %u samples (%u final), CPU %.2f ms, measured since the origin %.2f ms "
           "(%.2f at the scan's read), weights %llu\n",
           t->samples, t->tails, (double)t->cpu_delta_sum / 1e6, (double)*measured / 1e6,
           (double)*end / 1e6, (unsigned long long)t->weight_sum);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 10));
    ag_stop();
    return t;
}

TEST(a_deferred_start_counts_the_cpu_since_the_origin)
{
    struct tid_stats *t;
    uint64_t measured, end;
    int64_t diff, over, weights_ns;

    t = origin_run(&measured, &end);
    diff = (int64_t)t->cpu_delta_sum - (int64_t)measured;
    over = (int64_t)t->cpu_delta_sum - (int64_t)end;
    weights_ns = (int64_t)t->weight_sum * 100000000 - (int64_t)measured;
    ASSERT_EQ(t->stopped, 1);
    /*
     * The weights stand for the thread's CPU within half an interval below (a final claim of
     * less is left out) and one above: a weight is the span and the carry rounded, and an engine
     * sample counts at least one, its debt at most an interval (ag_sig_cpu_weigh). The final
     * claim goes out when the carry and the span after the last sample make more than half an
     * interval, so a debt keeps back up to one and a half intervals of span. At load, under
     * ASan, a timer signal came 40 ms of CPU late: its sample stood for 160 ms, weight 2, the
     * next (on the timer's schedule) for 62 ms, weight 1 with a 78 ms debt, and the 74 ms after
     * it went unclaimed: weights 300 ms, spans 222 ms, for 295 (docs/performance.md, "A child's
     * agent starts after 5 ms"). Without the origin the weights stand for 200 ms: fails. The
     * claim ends at the scan's read of the thread's clock, after the CPU of its wait for that
     * read (301.5 ms of spans for 295.1 burned, 1 of 100 ASan runs at load 28).
     */
    ASSERT_TRUE(weights_ns >= -50000000 && weights_ns <= 100000000);
    ASSERT_TRUE(diff >= -150000000 && over < (test_emulated() ? 8000000 : 1500000));
}

/* Removes dir and the table files in it. */
static void
cache_dir_remove(const char *dir)
{
    char path[PATH_MAX];
    struct dirent *e;
    DIR *d = opendir(dir);

    while (d != NULL && (e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    rmdir(dir);
}

/* Whether a thread of this process is named name (/proc/self/task lists them). */
static int
thread_named(const char *name)
{
    char path[PATH_MAX], comm[32] = "";
    struct dirent *e;
    DIR *d = opendir("/proc/self/task");
    int found = 0;

    while (!found && d != NULL && (e = readdir(d)) != NULL) {
        FILE *f;

        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        if (e->d_name[0] != '.' && (f = fopen(path, "r")) != NULL) {
            found = fgets(comm, sizeof(comm), f) != NULL && strncmp(comm, name, strlen(name)) == 0;
            fclose(f);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    return found;
}

/* A `record` child whose every table the recording's cache holds (PIPEPROF_CFI_CACHE) starts no
 * manager thread (a short child then pays for none), and the consumer's drain starts it when its
 * first scan is due: a thread only that scan can find (real pthread_create, as a raw clone would
 * be) is armed and sampled. Without the late start the thread is never found: no samples. */
TEST(a_deferred_manager_starts_at_the_first_scan_and_finds_threads)
{
    char dir[] = "/tmp/pp-test-mgr-cache.XXXXXX";
    struct tail_arg a = { 250000000u, 0, 0, 0, 0, 0, 0, 0 };
    struct ag_config cfg;
    struct tid_stats *t;
    pthread_t th;
    int i;

    ASSERT_TRUE(mkdtemp(dir) != NULL);
    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    cfg.cpu_engine = AG_CPU_ENGINE_TIMER;
    snprintf(cfg.cfi_cache, sizeof(cfg.cfi_cache), "%s", dir);
    /* An earlier process of the recording: builds every table and stores it. (libelf mapped
     * first: a manager maps it at its start, which here would add two modules to this process
     * after the tables were stored, and the "new process" below would miss their tables.) */
    ag_symtab_prepare();
    ASSERT_OK(ag_start(&cfg));
    ASSERT_TRUE(ag_modules_build_cfi(NULL) >= 0);
    ag_stop();
    ag_modules_fini(); /* a new process: tables come from the cache or not at all */
    ASSERT_OK(ag_start(&cfg));
    ASSERT_EQ(ag.manager_started, 0);
    ASSERT_TRUE(!thread_named("pipeprof-mgr"));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 10));
    ASSERT_OK(host_real_pthread_create()(&th, NULL, scan_only_main, &a));
    for (i = 0; i < 2000 && pthread_tryjoin_np(th, NULL) != 0; i++) {
        ag_manager_start_due(); /* what the bridge's drain calls */
        col_drain();
        usleep(10000);
    }
    ASSERT_TRUE(i < 2000);
    col_drain();
    t = col_get(atomic_load(&a.tid));
    printf("# deferred manager: started %d, the scan-only thread %u samples for %.1f ms of CPU\n",
           ag.manager_started, t->samples, (double)atomic_load(&a.cpu_ns) / 1e6);
    ASSERT_EQ(ag.manager_started, 1);
    ASSERT_TRUE(t->samples >= 1);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 10));
    ag_stop();
    cache_dir_remove(dir);
}

/* The same thread burning 70 ms at 10 Hz: less than an interval, so its engine never fires and
 * no stack is known for it; the claim of its CPU still arrives, as a final sample of the
 * [not sampled] marker alone (before that it was dropped: the thread's CPU was counted nowhere;
 * then it came without frames, which TraceEvent shows as CPU_TIME with no frame: the threads of
 * an idle agent's first dotnet-stack session that burned less than an interval in it). */
TEST(final_sample_of_a_never_sampled_scan_only_thread)
{
    struct tail_arg a = { 70000000u, 0, 0, 0, 0, 0, 0, 0 };
    struct tid_stats *t = run_scan_only(&a);

    printf("# never sampled: %u samples (%u final, %u with a stack), CPU %.2f ms, measured %.2f "
           "ms\n",
           t->samples, t->tails, t->tails_with_stack, (double)t->cpu_delta_sum / 1e6,
           (double)atomic_load(&a.cpu_ns) / 1e6);
    ASSERT_EQ(t->stopped, 1);
    if (t->samples != t->tails) {
        test_skip("an engine sample came after all (a load that stretched 70 ms of CPU)");
    }
    ASSERT_EQ(t->tails, 1);
    ASSERT_EQ(t->tails_with_stack, 0);
    ASSERT_EQ(t->tail_depth, 1);
    ASSERT_EQ(t->tail_leaf, ag_not_sampled_pc());
    ASSERT_TRUE(t->cpu_delta_sum > 40000000 && t->cpu_delta_sum < 100000000);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 10));
    ag_stop();
}

/* The perf-ring engine (agent/perf-ring.c): a thread's samples come from its perf ring, read and
 * unwound by the agent, with no signal on the thread; their weights (and the final sample's) add
 * up to the thread's CPU time, also across a rate change, which opens a new ring after claiming
 * what the thread ran since its last sample. */
struct ring_arg {
    _Atomic int32_t tid;
    _Atomic int phase; /* 1: it has burned 0.3 s (the test then raises the rate), 2: done */
    uint64_t cpu_end;  /* its CPU time as it returns */
    uint32_t signals;  /* agent signals it handled (ag_tls_signals) */
    uint32_t located;  /* of them, its kernel locator's (ag_tls_locator_signals) */
};

static void *
ring_main(void *p)
{
    struct ring_arg *a = p;

    pthread_setname_np(pthread_self(), "ring");
    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    while (cpu_ns() < 300000000u) {
        split_fn();
    }
    atomic_store(&a->phase, 1);
    while (cpu_ns() < 900000000u) {
        split_fn();
    }
    a->cpu_end = cpu_ns();
    a->signals = atomic_load(&ag_tls_signals);
    a->located = atomic_load(&ag_tls_locator_signals);
    atomic_store(&a->phase, 2);
    return NULL;
}

TEST(perf_ring_samples_without_a_signal_and_weighs_the_threads_cpu)
{
    struct ring_arg a = { 0, 0, 0, 0, 0 };
    struct ag_config cfg;
    struct ag_stats st;
    struct tid_stats *t;
    pthread_t th;
    uint64_t ring_threads = 0, stolen = steal_ns();
    double share;
    int i;

    if (!perf_allowed()) {
        return;
    }
    want[0] = (const void *)busy_a;
    want[1] = (const void *)busy_b;
    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    cfg.cpu_engine = AG_CPU_ENGINE_PERF_RING;
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 100));
    ASSERT_OK(pthread_create(&th, NULL, ring_main, &a));
    for (i = 0; i < 4000 && atomic_load(&a.phase) == 0; i++) {
        usleep(5000);
    }
    ag_stats_get(&st);
    ring_threads = st.threads_ring;
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 250)); /* a new rate: a new ring */
    ASSERT_OK(pthread_join(th, NULL));
    t = col_drain_until_stopped(atomic_load(&a.tid));
    ag_stats_get(&st);
    stolen = steal_ns() - stolen;
    share = (double)t->hit_weight[0] / (double)(t->hit_weight[0] + t->hit_weight[1] +
                                                (t->hit_weight[0] + t->hit_weight[1] == 0));
    printf("# ring: %u CPU samples (%u final), weights %llu, CPU %.1f ms sampled of %.1f ms; "
           "busy_a %.1f%% (75%% expected); signals %u (%u its kernel locator's); threads on rings "
           "%llu; ring lost %llu, fallbacks %llu; stolen %.0f ms\n",
           t->cpu_signal_samples, t->tails, (unsigned long long)t->weight_sum,
           (double)t->cpu_delta_sum / 1e6, (double)a.cpu_end / 1e6, share * 100.0, a.signals,
           a.located, (unsigned long long)ring_threads, (unsigned long long)st.ring_lost,
           (unsigned long long)st.ring_fallbacks, (double)stolen / 1e6);
    /* No sampling signal reached the thread. Its kernel locator's may: a perf sample that stood
     * for two intervals (an overflow met the thread in the kernel) arms it, which a loaded
     * machine's preemptions and interrupts do (109 signals, all the locator's, in a fresh-clone
     * CI run's ASan stage at load 21; none by hand at load 2). */
    ASSERT_EQ(a.signals, a.located);
    ASSERT_TRUE(ring_threads >= 1);           /* the sampled threads were on rings */
    ASSERT_TRUE(t->cpu_signal_samples >= 50); /* 0.9 s of CPU at 100-250 Hz */
    /* Nothing dropped but what the kernel could not write to a full ring (its LOST records):
     * a ring holds 25 ms of samples, and a manager late by half of that on a loaded machine
     * loses some (1 of 172-176 in 2 of 5 runs of an ASan build at load 25); their CPU time
     * is counted lost (cpu_lost_ns, since ringdrop: before, it came back in the next sample's
     * weight, as kernel time), and the bounds below count it. */
    ASSERT_TRUE(t->stopped == 1 && t->dropped <= st.ring_lost);
    ASSERT_TRUE(share > 0.6 && share < 0.9);
    /* Its CPU since it was armed (just after its start), all of it in weights, none twice. The
     * thread burns some after cpu_end: its exit hook reads its ring and unwinds what the ring
     * holds on the thread itself (904.4 ms for 900.0 in a fresh-clone CI run; 10 ms is far
     * below a sample counted twice at 100-250 Hz). The counter's CPU counts what the hypervisor
     * stole (steal_ns), and read as CPU it came to 916 ms for 900 in a fresh-clone CI run: a
     * sample's count now maps to the thread's clock (perf-ring.c, ag_pring_cpu), so no
     * allowance is made for it. */
    ASSERT_TRUE(t->cpu_delta_sum + st.cpu_lost_ns <= a.cpu_end + 10000000u);
    ASSERT_TRUE(t->cpu_delta_sum + st.cpu_lost_ns + 20000000u >= a.cpu_end);
    ag_stop();
}

/*
 * A CPU sample dropped at a full ring (issue 19) leaves none of its CPU to the thread's next
 * sample: it is weighed where it is dropped and counted lost (ag_stats.cpu_lost_ns). A thread of
 * arithmetic only burns 400 ms of CPU at 100 Hz with nobody draining its ring of 16 slots (the
 * handler's ring for perf's signal and the timers, the pring for perf-ring), or, read_ms set,
 * with perf-ring's manager reading its kernel ring every read_ms only, so that the kernel loses
 * samples (PERF_RECORD_LOST; every 2 s: at 400 ms, a loaded machine's wall time for the
 * thread's 400 ms let reads in, and 7 were lost in a ctest -j3 run); it spins until the case has
 * drained (the drain reads the kernel's ring), then burns 200 ms more (50). Before, the first
 * sample kept after the drops stood for all their CPU: on perf and perf-ring as kernel time split
 * off it (a thread that makes no system call), on the timers under its own stack (its weight the
 * dropped samples' count and more).
 */
struct drop_arg {
    _Atomic int32_t tid;
    _Atomic int phase; /* 1: its first 400 ms burned; 2 (the case's): drained, go on; 3: done */
    uint64_t burn_ns;  /* what it burns after the drain */
    uint64_t cpu_end;
};

static void *
drop_main(void *p)
{
    struct drop_arg *a = p;
    uint64_t c0;

    pthread_setname_np(pthread_self(), "drop");
    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    c0 = cpu_ns();
    while (cpu_ns() < c0 + 400000000u) {
        busy_a();
    }
    atomic_store(&a->phase, 1);
    while (atomic_load(&a->phase) != 2) {
        busy_a();
    }
    c0 = cpu_ns();
    while (cpu_ns() < c0 + a->burn_ns) {
        busy_a();
    }
    a->cpu_end = cpu_ns();
    atomic_store(&a->phase, 3);
    return NULL;
}

static void
drop_test(uint8_t engine, unsigned read_ms)
{
    /* (after the drain, with the kernel's ring read every read_ms, 50 ms: fewer samples than
     * that ring holds, none lost at the thread's end, where no later sample brings the kernel's
     * LOST record and the final sample takes their CPU as kernel time) */
    struct drop_arg a = { 0, 0, read_ms != 0 ? 50000000u : 200000000u, 0 };
    struct ag_config cfg;
    struct ag_stats st;
    struct tid_stats *t;
    pthread_t th;
    int i;

    if (engine != AG_CPU_ENGINE_TIMER && !perf_allowed()) {
        return;
    }
    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    cfg.cpu_engine = engine;
    if (read_ms != 0) {
        cfg.test_ring_read_ms = read_ms;
    } else {
        cfg.ring_slots = 16;
    }
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 100));
    ASSERT_OK(pthread_create(&th, NULL, drop_main, &a));
    for (i = 0; i < 4000 && atomic_load(&a.phase) == 0; i++) {
        usleep(5000);
    }
    ASSERT_EQ(atomic_load(&a.phase), 1);
    usleep(50000); /* (perf-ring: a read of its kernel ring finds the pring full) */
    col_drain();
    atomic_store(&a.phase, 2);
    ASSERT_OK(pthread_join(th, NULL));
    t = col_drain_until_stopped(atomic_load(&a.tid));
    ag_stats_get(&st);
    printf("# dropped: %u CPU samples (%u final), weights %llu (largest %u), kernel %llu, CPU "
           "%.1f ms in samples + %.1f ms lost of %.1f ms; dropped %llu (ring lost %llu)\n",
           t->cpu_signal_samples, t->tails, (unsigned long long)t->weight_sum, t->signal_weight_max,
           (unsigned long long)t->kernel_weight, (double)t->cpu_delta_sum / 1e6,
           (double)st.cpu_lost_ns / 1e6, (double)a.cpu_end / 1e6, (unsigned long long)t->dropped,
           (unsigned long long)st.ring_lost);
    ASSERT_TRUE(t->stopped == 1);
    ASSERT_TRUE(t->dropped >= 8); /* the ring did fill: 40 samples in the first 400 ms */
    /* A thread that makes no system call: no sample stands for many intervals, none of them
     * kernel time (but for a rare interrupt's overflow, and its exit). Before: 32 to 35
     * intervals of kernel time on perf and perf-ring, a timer sample of weight 29. */
    ASSERT_TRUE(t->signal_weight_max <= 3);
    ASSERT_TRUE(t->kernel_weight <= 3);
    /* Each dropped sample stood for about an interval (10 ms); half of that is a wide margin. */
    ASSERT_TRUE(st.cpu_lost_ns >= t->dropped * 5000000u);
    /* Its CPU since it was armed: in samples or lost, none twice (perf_ring_samples_without_a_
     * signal_and_weighs_the_threads_cpu says why these margins). */
    ASSERT_TRUE(t->cpu_delta_sum + st.cpu_lost_ns <= a.cpu_end + 10000000u);
    ASSERT_TRUE(t->cpu_delta_sum + st.cpu_lost_ns + 20000000u >= a.cpu_end);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 100));
    ag_stop();
}

TEST(a_sample_dropped_at_a_full_ring_leaves_its_cpu_to_no_sample_perf)
{
    drop_test(AG_CPU_ENGINE_PERF, 0);
}

TEST(a_sample_dropped_at_a_full_ring_leaves_its_cpu_to_no_sample_timer)
{
    drop_test(AG_CPU_ENGINE_TIMER, 0);
}

TEST(a_sample_dropped_at_a_full_ring_leaves_its_cpu_to_no_sample_perf_ring)
{
    drop_test(AG_CPU_ENGINE_PERF_RING, 0);
}

TEST(a_sample_the_kernel_lost_leaves_its_cpu_to_no_sample_perf_ring)
{
    drop_test(AG_CPU_ENGINE_PERF_RING, 2000);
}

/*
 * Auto above the tick takes perf-ring (timer.c, ag_cpu_engine_for_rate): each thread starts on
 * perf's signal on probation and gets a ring at a scan when its walks fit in the ring's 4 KiB
 * stack copy; a thread deep from its start stays on perf's signal. A thread on a ring that goes
 * deeper than the copy (its ring samples' walks end reading past it) moves to perf's signal, whose
 * handler walks the live stack, and its samples reach the top of its stack again. Three threads:
 * shallow throughout (ends on its ring), deep from its start (stays on perf's signal, every
 * sample reaching deep_top), shallow for 300 ms of CPU and then deep (a ring, then moved).
 */
EXPORT void deep_top(_Atomic int *stop);
EXPORT int deep_rec(_Atomic int *stop, int n);

EXPORT int
deep_rec(_Atomic int *stop, int n)
{
    volatile char pad[256]; /* about 300 bytes a frame: 48 frames are 14 KiB of stack */

    pad[0] = (char)n;
    if (n > 0) {
        return deep_rec(stop, n - 1) + pad[0]; /* (not a tail call) */
    }
    while (!atomic_load(stop)) {
        busy_a();
    }
    return pad[0];
}

EXPORT void
deep_top(_Atomic int *stop)
{
    (void)deep_rec(stop, 48);
}

struct deep_arg {
    _Atomic int32_t tid;
    int deep; /* 0: shallow, 1: deep from its start, 2: shallow for 300 ms of CPU, then deep */
    uint32_t signals, located; /* as ring_arg's */
};

static void *
deep_main(void *p)
{
    struct deep_arg *a = p;

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    if (a->deep == 2) {
        while (cpu_ns() < 300000000u && !atomic_load(&stop_flag)) {
            busy_b();
        }
    }
    if (a->deep) {
        deep_top(&stop_flag);
    } else {
        while (!atomic_load(&stop_flag)) {
            busy_b();
        }
    }
    a->signals = atomic_load(&ag_tls_signals);
    a->located = atomic_load(&ag_tls_locator_signals);
    return NULL;
}

/* Thread tid's active slot, or NULL (reg_lock held). */
static struct ag_thread *
active_slot_locked(int32_t tid)
{
    struct ag_thread *t = NULL;
    unsigned i;

    for (i = 0; i < atomic_load(&ag.high); i++) {
        if (atomic_load(&ag.threads[i].tid) == tid &&
            atomic_load(&ag.threads[i].state) == AG_SLOT_ACTIVE) {
            t = &ag.threads[i];
        }
    }
    return t;
}

/* Thread tid's slot: 1 on a ring, 2 on perf's signal after auto moved it for its depth, 0 else. */
static int
slot_ring_state(int32_t tid)
{
    struct ag_thread *t;
    int on = 0;

    pthread_mutex_lock(&ag.reg_lock);
    t = active_slot_locked(tid);
    if (t != NULL) {
        on = atomic_load(&t->has_ring) ? 1 : t->has_perf && t->ring_deep ? 2 : 0;
    }
    pthread_mutex_unlock(&ag.reg_lock);
    return on;
}

TEST(auto_above_the_tick_rings_and_moves_a_deep_stack_to_perf)
{
    struct deep_arg arg[3] = { { 0, 0, 0, 0 }, { 0, 1, 0, 0 }, { 0, 2, 0, 0 } };
    unsigned tick = ag_kernel_tick_hz(), hz, i, k;
    struct tid_stats *ts[3];
    struct ag_stats st;
    pthread_t th[3];
    int state[3];

    if (!perf_allowed() || tick == 0 || 2 * tick > AG_HZ_MAX) {
        return;
    }
    hz = 2 * tick;
    memset(col, 0, sizeof(col));
    memset(want, 0, sizeof(want));
    want[1] = (const void *)busy_b;
    want[3] = (const void *)deep_top;
    start_agent();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, hz));
    atomic_store(&stop_flag, 0);
    for (k = 0; k < 3; k++) {
        ASSERT_OK(pthread_create(&th[k], NULL, deep_main, &arg[k]));
    }
    /* until each thread ran 0.8 s (the third one's last 0.5 s deep) */
    for (i = 0; i < 4000; i++) {
        unsigned done = 0;

        usleep(10000);
        col_drain();
        for (k = 0; k < 3; k++) {
            struct timespec c;
            clockid_t id;

            done += atomic_load(&arg[k].tid) != 0 && pthread_getcpuclockid(th[k], &id) == 0 &&
                    clock_gettime(id, &c) == 0 &&
                    c.tv_sec * 1000000000LL + c.tv_nsec >= 800000000LL;
        }
        if (done == 3) {
            break;
        }
    }
    for (k = 0; k < 3; k++) {
        state[k] = slot_ring_state(atomic_load(&arg[k].tid));
    }
    ag_stats_get(&st);
    atomic_store(&stop_flag, 1);
    for (k = 0; k < 3; k++) {
        ASSERT_OK(pthread_join(th[k], NULL));
        ts[k] = col_get(atomic_load(&arg[k].tid));
    }
    for (i = 0; i < 400 && !(ts[0]->stopped && ts[1]->stopped && ts[2]->stopped); i++) {
        usleep(20000);
        col_drain();
    }
    for (k = 0; k < 3; k++) {
        printf("# %u Hz, %s thread: %s, %u CPU samples (%u in busy_b, %u reaching deep_top), "
               "signals %u (%u its locator's)\n",
               hz,
               k == 0   ? "shallow"
               : k == 1 ? "deep"
                        : "shallow-then-deep",
               state[k] == 1   ? "on its ring"
               : state[k] == 2 ? "on perf's signal for its depth"
                               : "neither",
               ts[k]->cpu_signal_samples, ts[k]->hits[1], ts[k]->signal_hits3, arg[k].signals,
               arg[k].located);
    }
    printf("# ring_deep %llu, fallbacks %llu\n", (unsigned long long)st.ring_deep,
           (unsigned long long)st.ring_fallbacks);
    if (st.ring_fallbacks != 0) {
        test_skip("a ring could not be mapped here (locked memory)");
    }
    /* The shallow thread: on its ring, its signals those of its probation only (a scan or two
     * of its CPU, 20 ms each). */
    ASSERT_EQ(state[0], 1);
    ASSERT_TRUE(ts[0]->cpu_signal_samples >= 50);
    ASSERT_TRUE((arg[0].signals - arg[0].located) * 2u < ts[0]->cpu_signal_samples);
    /* Deep from its start: never on a ring, every sample reaching the top of its stack. */
    ASSERT_EQ(state[1], 2);
    ASSERT_TRUE(ts[1]->cpu_signal_samples >= 50);
    ASSERT_TRUE(ts[1]->signal_hits3 * 100u >= ts[1]->cpu_signal_samples * 99u);
    /* Deep later: moved off its ring; its deep samples cut before the move (a scan or two of its
     * CPU) are few, the rest reach the top. */
    ASSERT_EQ(state[2], 2);
    /* (the two, and maybe the test's main thread: its frames are deep under ASan, 3 there) */
    ASSERT_TRUE(st.ring_deep >= 2u);
    ASSERT_TRUE(ts[2]->cpu_signal_samples - ts[2]->hits[1] >= 50);
    ASSERT_TRUE(ts[2]->signal_hits3 * 10u >= (ts[2]->cpu_signal_samples - ts[2]->hits[1]) * 7u);
    ASSERT_TRUE(arg[2].signals - arg[2].located + 50u <= ts[2]->cpu_signal_samples); /* a ring */
    ag_stop();
}

TEST(final_sample_at_exit_timer)
{
    (void)check_tail(AG_CPU_ENGINE_TIMER, 0, 0);
}

TEST(final_sample_at_exit_perf)
{
    if (perf_allowed()) {
        (void)check_tail(AG_CPU_ENGINE_PERF, 0, 0);
    }
}

TEST(final_sample_at_flush_timer)
{
    (void)check_tail(AG_CPU_ENGINE_TIMER, 1, 0);
}

TEST(final_sample_at_flush_perf)
{
    if (perf_allowed()) {
        (void)check_tail(AG_CPU_ENGINE_PERF, 1, 0);
    }
}

/* A late sample that takes both intervals leaves the exit less than half an interval: no final
 * sample, and the exit counts what it left (cpu_rest_ns), so the thread's CPU adds up. Tried
 * again when the late sample itself did not come before the exit (beside two busy loops: the
 * timer's 6 runs in 25 at a due point of 168 ms, perf's 2). */
static void
check_late_tail(enum ag_cpu_engine engine)
{
    int i;

    for (i = 0; i < 8; i++) {
        memset(col, 0, sizeof(col));
        if (check_tail(engine, 0, 1) == 0) {
            return;
        }
        printf("# attempt %d: the late sample did not come before the exit; again\n", i + 1);
    }
    test_fail(__FILE__, __LINE__, "in 8 attempts the late sample never came before the exit");
}

TEST(exit_after_a_late_sample_counts_its_rest_timer)
{
    check_late_tail(AG_CPU_ENGINE_TIMER);
}

TEST(exit_after_a_late_sample_counts_its_rest_perf)
{
    if (perf_allowed()) {
        check_late_tail(AG_CPU_ENGINE_PERF);
    }
}

/*
 * A thread that blocks the sampling signal gets no sample while it does, and the one left pending
 * lands where it unblocks. The CPU burned meanwhile must not be given to that stack (nor to the
 * stack at its exit): it comes as AG_SOURCE_UNSEEN samples, with the marker frame over the
 * unblocking call's stack, and counted. signal_hidden burns 200 ms with SIGPROF blocked by
 * sigprocmask, busy_a 100 ms with it open, signal_hidden 100 ms blocked by pthread_sigmask up to
 * its exit; a second thread, created while its creator blocked SIGPROF (it inherits the mask),
 * burns 100 ms in signal_hidden. At 100 Hz: 30 and 10 intervals unseen, 10 seen, and no sample
 * in signal_hidden. Before, the 30 intervals went to the unblocking call's or the exit's stack.
 */
EXPORT void signal_hidden(uint64_t ns);
EXPORT void *signal_blocking_main(void *p);

EXPORT void
signal_hidden(uint64_t ns)
{
    uint64_t c0 = cpu_ns();

    while (cpu_ns() - c0 < ns) {
        busy_b();
    }
}

struct sigblk_arg {
    int inherited;
    _Atomic int32_t tid;
    _Atomic uint64_t hidden_ns, open_ns, total_ns;
};

EXPORT void *
signal_blocking_main(void *p)
{
    struct sigblk_arg *a = p;
    uint64_t c0 = cpu_ns(), c1, c2, c3;
    sigset_t prof;

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    if (a->inherited) {
        signal_hidden(100000000u);
        atomic_store(&a->hidden_ns, cpu_ns() - c0);
        atomic_store(&a->total_ns, cpu_ns());
        return NULL;
    }
    c1 = cpu_ns();
    sigprocmask(SIG_BLOCK, &prof, NULL);
    signal_hidden(200000000u);
    sigprocmask(SIG_UNBLOCK, &prof, NULL);
    c2 = cpu_ns();
    while (cpu_ns() - c2 < 100000000u) {
        busy_a();
    }
    c3 = cpu_ns();
    pthread_sigmask(SIG_BLOCK, &prof, NULL);
    signal_hidden(100000000u);
    atomic_store(&a->hidden_ns, (c2 - c1) + (cpu_ns() - c3));
    atomic_store(&a->open_ns, c3 - c2);
    atomic_store(&a->total_ns, cpu_ns());
    return NULL;
}

static void
check_sigblk(enum ag_cpu_engine engine)
{
    const int64_t interval = 10000000;
    struct sigblk_arg a = { 0, 0, 0, 0, 0 }, b = { 1, 0, 0, 0, 0 };
    struct tid_stats *ta, *tb;
    struct ag_config cfg;
    struct ag_stats st;
    sigset_t prof, old;
    pthread_t tha, thb;
    int64_t unseen_a, unseen_b, open_a, claimed_a, seen_a;
    int i;

    memset(col, 0, sizeof(col));
    want[0] = (const void *)signal_hidden;
    want[1] = (const void *)busy_a;
    want[2] = (const void *)signal_blocking_main;
    want[3] = (const void *)sigprocmask; /* the agent's interposer, linked into this test */
    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    cfg.cpu_engine = engine;
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 100));
    ASSERT_OK(pthread_create(&tha, NULL, signal_blocking_main, &a));
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    ASSERT_OK(pthread_sigmask(SIG_BLOCK, &prof, &old));
    ASSERT_OK(pthread_create(&thb, NULL, signal_blocking_main, &b));
    ASSERT_OK(pthread_sigmask(SIG_SETMASK, &old, NULL));
    ASSERT_OK(pthread_join(tha, NULL));
    ASSERT_OK(pthread_join(thb, NULL));
    ta = col_get(atomic_load(&a.tid));
    tb = col_get(atomic_load(&b.tid));
    for (i = 0; i < 100 && (!ta->stopped || !tb->stopped); i++) {
        col_drain();
        usleep(20000);
    }
    ag_stats_get(&st);
    unseen_a = (int64_t)ta->unseen_weight * interval - (int64_t)atomic_load(&a.hidden_ns);
    unseen_b = (int64_t)tb->unseen_weight * interval - (int64_t)atomic_load(&b.hidden_ns);
    open_a = (int64_t)ta->hit_weight[1] * interval - (int64_t)atomic_load(&a.open_ns);
    claimed_a = (int64_t)ta->tail_weight * interval;
    printf("# %s: A %u samples, weights %llu (unseen %llu in %u, marked %u, %.1f ms; busy_a %llu, "
           "under signal_blocking_main %u); measured %.1f ms hidden, %.1f open; B unseen %llu in "
           "%u, measured %.1f ms; samples in signal_hidden %u/%u; stats unseen %.1f ms; claimed "
           "at the blocks %lld ms\n",
           engine == AG_CPU_ENGINE_PERF ? "perf_event" : "timer", ta->samples,
           (unsigned long long)ta->weight_sum, (unsigned long long)ta->unseen_weight, ta->unseen,
           ta->unseen_marked, (double)ta->unseen_ns / 1e6, (unsigned long long)ta->hit_weight[1],
           ta->hits[2], (double)atomic_load(&a.hidden_ns) / 1e6,
           (double)atomic_load(&a.open_ns) / 1e6, (unsigned long long)tb->unseen_weight, tb->unseen,
           (double)atomic_load(&b.hidden_ns) / 1e6, ta->hits[0], tb->hits[0],
           (double)st.cpu_unseen_ns / 1e6, (long long)(claimed_a / 1000000));
    ASSERT_EQ(ta->stopped, 1);
    ASSERT_EQ(tb->stopped, 1);
    /* two spans (at the unblocking call, at the exit) and B's one (at its exit) */
    ASSERT_EQ(ta->unseen, 2);
    ASSERT_EQ(ta->unseen_marked, 2);
    ASSERT_EQ(tb->unseen, 1);
    ASSERT_EQ(tb->unseen_marked, 1);
    ASSERT_EQ(ta->hits[0], 0); /* nothing in signal_hidden: it never ran with the signal open */
    ASSERT_EQ(tb->hits[0], 0);
    /* the unseen spans sit under the thread's own function, and never under busy_a, which ran
     * last before the second span */
    ASSERT_TRUE(ta->hit_weight[1] <= ta->weight_sum - ta->unseen_weight);
    ASSERT_TRUE(ta->hits[2] >= 2);
    /* B's, at its exit, has its start routine when its registration's walk reached the root (not
     * under TSan, whose pthread_create interceptor stands between), else the marker alone */
    ASSERT_TRUE(tb->hits[2] + tb->unseen_bare == 1);
    /* within a rounding: the CPU before each block is claimed at the block, as seen */
    ASSERT_TRUE(unseen_a > -3 * interval / 2 && unseen_a < 3 * interval / 2);
    ASSERT_TRUE(unseen_b > -3 * interval / 2 && unseen_b < 3 * interval / 2);
    /* busy_a never gets more than it burned, and A's samples that are not unseen stand for its
     * open span. Where in that span: a perf sample is due every interval, so busy_a gets all but
     * a few. The timers' expiries are seen at ticks that find the thread running, and beside two
     * busy loops they placed 1 to 6 of busy_a's 10 intervals there in 6 of 40 runs: the rest went
     * to the claim at the second block (under the blocking call's stack, as a sample at that
     * moment would have) and to samples at the return of the loop's own clock reads (cpu_ns, a
     * system call), CPU of the span all of it; so under the timers only the sum is held. */
    ASSERT_TRUE(open_a < 2 * interval);
    ASSERT_TRUE(engine == AG_CPU_ENGINE_TIMER || open_a > -3 * interval);
    seen_a = (int64_t)(ta->weight_sum - ta->unseen_weight) * interval -
             (int64_t)atomic_load(&a.open_ns);
    ASSERT_TRUE(seen_a > -3 * interval / 2 && seen_a < 5 * interval / 2);
    /* the signal left pending, delivered as the mask opens after its span was claimed, is no
     * sample (it would count an interval at the unblocking call: in the sigprocmask interposer) */
    ASSERT_EQ(ta->signal_hits3, 0);
    ASSERT_TRUE(st.cpu_unseen_ns + 3 * (uint64_t)interval >=
                atomic_load(&a.hidden_ns) + atomic_load(&b.hidden_ns));
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 100));
    ag_stop();
    memset(want, 0, sizeof(want));
}

TEST(cpu_with_the_signal_blocked_is_marked_unseen_timer)
{
    check_sigblk(AG_CPU_ENGINE_TIMER);
}

TEST(cpu_with_the_signal_blocked_is_marked_unseen_perf)
{
    if (perf_allowed()) {
        check_sigblk(AG_CPU_ENGINE_PERF);
    }
}

/*
 * A long span with the signal blocked reaches the consumer while it lasts, in pieces: each drain
 * claims what the thread burned since the last one, as unseen samples under the call that blocked
 * the signal (signal_hider, called from the start routine). A consumer that writes time in order
 * (the bridge: nothing before what it has released) could not place one 300 ms span delivered at
 * its end: TraceEvent's time views showed half of such a thread's CPU. At 100 Hz, drains every
 * 20 ms: at least 5 pieces, none over 100 ms, all under signal_hider, adding up to what it burned.
 */
EXPORT void signal_hider(void);
EXPORT void *signal_hider_main(void *p);

EXPORT void
signal_hider(void)
{
    sigset_t prof;

    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &prof, NULL);
    signal_hidden(300000000u);
    pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
}

EXPORT void *
signal_hider_main(void *p)
{
    struct sigblk_arg *a = p;
    uint64_t c0 = cpu_ns();

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    signal_hider();
    atomic_store(&a->hidden_ns, cpu_ns() - c0);
    atomic_store(&a->total_ns, 1);
    return NULL;
}

static uint64_t piece_max_ns;
static unsigned piece_under_hider;

static int
piece_cb(const struct ag_record *rec, void *ctx)
{
    const struct ag_sample *s = rec->u.sample;
    uint32_t i;

    if (rec->kind == AG_RECORD_SAMPLE && s->source == AG_SOURCE_UNSEEN) {
        piece_max_ns = s->cpu_delta_ns > piece_max_ns ? s->cpu_delta_ns : piece_max_ns;
        for (i = 1; i < s->depth && !col_frame_is(s->frames[i], (const void *)signal_hider); i++) {
        }
        piece_under_hider += i < s->depth;
    }
    return col_cb(rec, ctx);
}

TEST(a_long_blocked_span_reaches_the_consumer_in_pieces)
{
    struct sigblk_arg a = { 0, 0, 0, 0, 0 };
    struct ag_config cfg;
    struct tid_stats *t;
    pthread_t th;
    int64_t diff;
    int i;

    memset(col, 0, sizeof(col));
    piece_max_ns = 0;
    piece_under_hider = 0;
    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 100));
    ASSERT_OK(pthread_create(&th, NULL, signal_hider_main, &a));
    for (i = 0; i < 1000 && atomic_load(&a.total_ns) == 0; i++) {
        ASSERT_TRUE(ag_drain(piece_cb, NULL) >= 0);
        usleep(20000);
    }
    ASSERT_OK(pthread_join(th, NULL));
    t = col_get(atomic_load(&a.tid));
    for (i = 0; i < 100 && !t->stopped; i++) {
        ASSERT_TRUE(ag_drain(piece_cb, NULL) >= 0);
        usleep(20000);
    }
    diff = (int64_t)t->unseen_ns - (int64_t)atomic_load(&a.hidden_ns);
    printf("# %u unseen pieces (%u under signal_hider), the longest %.1f ms, %.1f ms in all; "
           "measured %.1f ms\n",
           t->unseen, piece_under_hider, (double)piece_max_ns / 1e6, (double)t->unseen_ns / 1e6,
           (double)atomic_load(&a.hidden_ns) / 1e6);
    ASSERT_EQ(t->stopped, 1);
    ASSERT_TRUE(t->unseen >= 5);
    ASSERT_EQ(piece_under_hider, t->unseen);
    ASSERT_TRUE(piece_max_ns <= 100000000u);
    ASSERT_TRUE(diff > -20000000 && diff < 20000000);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 100));
    ag_stop();
}

/*
 * The note of a blocked signal must not outlive the block when no interposer sees the mask open.
 * (raw) A thread blocks SIGPROF with pthread_sigmask and opens it with a raw rt_sigprocmask, then
 * burns at 10 Hz: the engine's sample at 100 ms clears the note, and the flush's final sample of
 * the 70 ms after it is an ordinary one (without the handler's clear it was marked unseen).
 * (off) A thread blocks it while CPU sampling is on and opens it while sampling is off, then
 * burns 70 ms once sampling is back: the flush's final sample is an ordinary one (when the
 * interposers ignored masks while sampling was off, the stale note marked it unseen). A flush,
 * not the exit: the exit blocks the signal itself, which renews the note.
 */
struct stale_arg {
    int raw;
    _Atomic int32_t tid;
    _Atomic int phase; /* 1 blocked, 2 go on, 3 opened, 4 burn, 5 burned, 6 exit (off: all) */
};

static void
stale_wait(_Atomic int *phase, int value)
{
    while (atomic_load(phase) != value) {
        usleep(1000);
    }
}

static void *
stale_main(void *p)
{
    struct stale_arg *a = p;
    uint64_t c0, n0;
    sigset_t prof;

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &prof, NULL);
    if (a->raw) {
        syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &prof, NULL, (long)(_NSIG / 8));
    } else {
        atomic_store(&a->phase, 1);
        stale_wait(&a->phase, 2);
        pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
        atomic_store(&a->phase, 3);
        stale_wait(&a->phase, 4);
    }
    c0 = cpu_ns();
    n0 = atomic_load(&ag.n_samples);
    /* The raw case burns until a sample has landed after the unblock and the note is gone (that
     * sample clears it; the handler runs on this thread, so both move at once). Then both burn
     * until the thread's CPU not yet in a weight, as the flush's claim reckons it (since its last
     * sample or arming, with the carry: under half an interval, 50 ms, there is no final
     * sample), is 70 ms, short of the next perf overflow 100 ms after the last. A fixed 175 ms
     * burn ended before the first sample on a loaded machine (1 unseen, 0 final: the thread is
     * armed by a scan, its first overflow 100 ms of CPU later); ending at that sample left the
     * flush nothing (0 final); and 70 ms after the sample was still short (an ASan CI run: 2
     * samples, 0 final, 0 unseen) when the thread's arming read its baseline 20 ms or more of
     * its CPU after the event began to count: the first sample, weighed a whole interval, then
     * carried that much as a debt. The off case waits for the scans to arm the thread again. */
    for (;;) {
        struct ag_thread *st = ag_sig_thread_self();
        uint64_t used = cpu_ns() - c0, last = 0;
        int64_t unweighed = 0;
        int armed = 0;

        if (st != NULL) {
            pthread_mutex_lock(&ag.reg_lock);
            armed = st->timer_hz != 0 && (st->has_perf || st->has_timer);
            pthread_mutex_unlock(&ag.reg_lock);
            last = atomic_load(&st->last_cpu_ns);
        }
        if (armed && last != 0 &&
            (!a->raw || (atomic_load(&ag.n_samples) != n0 && atomic_load(&st->sigblk_ns) == 0))) {
            unweighed = (int64_t)(cpu_ns() - last) + atomic_load(&st->cpu_carry_ns);
        }
        if (unweighed >= 70000000 || used >= 5000000000u) {
            break;
        }
        busy_a();
    }
    atomic_store(&a->phase, 5);
    stale_wait(&a->phase, 6);
    return NULL;
}

/* No bound of its own: the thread's burns end by its own CPU time (5 s at most), which a loaded
 * machine stretches past any wall-clock bound (ctest's timeout catches a thread that hangs). */
static void
wait_phase(_Atomic int *phase, int value)
{
    while (atomic_load(phase) != value) {
        usleep(2000);
    }
}

/* Flushes, drains and checks the thread's final sample: one, not unseen; then lets it exit. */
static void
stale_check(struct stale_arg *a, pthread_t th, const char *what)
{
    struct tid_stats *t;
    uint64_t until;

    ag_cpu_flush();
    t = col_get(atomic_load(&a->tid));
    /* The flush's sample, or an unseen one instead, reaches the ring (60 s at most, not a fixed
     * 2 s: the assertions below tell which came; none is a failure too, after the bound). */
    for (until = test_ms_now() + 60000; t->tails + t->unseen == 0; usleep(20000)) {
        col_drain();
        if (t->tails + t->unseen == 0 && test_ms_now() > until) {
            test_fail(__FILE__, __LINE__, "%s: no final or unseen sample drained in 60 s", what);
        }
    }
    printf("# %s: %u samples, %u final, %u unseen\n", what, t->samples, t->tails, t->unseen);
    ASSERT_EQ(t->tails, 1);
    ASSERT_EQ(t->unseen, 0);
    atomic_store(&a->phase, 6);
    ASSERT_OK(pthread_join(th, NULL));
}

TEST(a_note_of_a_blocked_signal_does_not_outlive_the_block)
{
    struct stale_arg raw = { 1, 0, 0 }, off = { 0, 0, 0 };
    struct ag_config cfg;
    pthread_t th;

#ifdef __SANITIZE_THREAD__
    /* The note is cleared by the first sample after the raw unblock; ThreadSanitizer holds an
     * asynchronous signal back until the thread calls a function it intercepts, which the burn
     * does not, so under TSan that sample came after the flush (2 of 3 runs at load 3, one CI
     * run). Checked in the other builds. */
    test_skip("ThreadSanitizer delays the sampling signal past the burn it must land in");
#endif
    memset(col, 0, sizeof(col));
    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    /* perf's sample comes at 100 ms of CPU exactly, leaving 75 ms to the flush; a tick-bound
     * one may come so late on a loaded machine that nothing is left */
    cfg.cpu_engine = perf_allowed() ? AG_CPU_ENGINE_PERF : AG_CPU_ENGINE_TIMER;
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 10));
    ASSERT_OK(pthread_create(&th, NULL, stale_main, &raw));
    wait_phase(&raw.phase, 5);
    stale_check(&raw, th, "opened by a raw system call");
    ASSERT_OK(pthread_create(&th, NULL, stale_main, &off));
    wait_phase(&off.phase, 1);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 10));
    atomic_store(&off.phase, 2);
    wait_phase(&off.phase, 3);
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 10));
    atomic_store(&off.phase, 4); /* it burns once the scans have armed it again */
    wait_phase(&off.phase, 5);
    stale_check(&off, th, "opened while sampling was off");
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 10));
    ag_stop();
}

/* Polls until the agent's threads on each engine match: perf_event > 0 (want_perf) or == 0. */
static int
wait_engine(int want_perf)
{
    struct ag_stats st;
    int i;

    for (i = 0; i < 200; i++) {
        ag_stats_get(&st);
        /* (above the tick auto takes perf-ring, perf's signal where a ring cannot be mapped) */
        if (want_perf ? st.threads_perf + st.threads_ring > 0
                      : st.threads_perf == 0 && st.threads_ring == 0 && st.threads_timer > 0) {
            return 1;
        }
        usleep(10000);
    }
    printf("# threads on perf_event %llu, on perf rings %llu, on timers %llu\n",
           (unsigned long long)st.threads_perf, (unsigned long long)st.threads_ring,
           (unsigned long long)st.threads_timer);
    return 0;
}

/*
 * Auto takes the CPU-time timers up to the kernel's tick rate (they fire every interval there, at
 * a fraction of the cost of perf's own interrupt) and perf_event above it (the only way to keep
 * the rate), its samples on a ring without a signal (perf-ring); a setting of perf, timer or
 * perf-ring is kept at every rate. A live agent follows a rate that
 * crosses the tick.
 */
TEST(auto_engine_takes_timers_up_to_the_tick)
{
    struct busy_arg a = { busy_a, "busy-a", 5000000000u, 0 };
    unsigned tick = ag_kernel_tick_hz();
    pthread_t ta;

    ASSERT_EQ(ag_cpu_engine_for_rate(AG_CPU_ENGINE_AUTO, 250, 250), AG_CPU_ENGINE_TIMER);
    ASSERT_EQ(ag_cpu_engine_for_rate(AG_CPU_ENGINE_AUTO, 99, 250), AG_CPU_ENGINE_TIMER);
    ASSERT_EQ(ag_cpu_engine_for_rate(AG_CPU_ENGINE_AUTO, 251, 250), AG_CPU_ENGINE_PERF_RING);
    ASSERT_EQ(ag_cpu_engine_for_rate(AG_CPU_ENGINE_AUTO, 1000, 250), AG_CPU_ENGINE_PERF_RING);
    ASSERT_EQ(ag_cpu_engine_for_rate(AG_CPU_ENGINE_AUTO, 1000, 1000), AG_CPU_ENGINE_TIMER);
    ASSERT_EQ(ag_cpu_engine_for_rate(AG_CPU_ENGINE_AUTO, 99, 0), AG_CPU_ENGINE_PERF_RING);
    ASSERT_EQ(ag_cpu_engine_for_rate(AG_CPU_ENGINE_PERF, 10, 250), AG_CPU_ENGINE_PERF);
    ASSERT_EQ(ag_cpu_engine_for_rate(AG_CPU_ENGINE_TIMER, 1000, 250), AG_CPU_ENGINE_TIMER);
    ASSERT_EQ(ag_cpu_engine_for_rate(AG_CPU_ENGINE_PERF_RING, 10, 250), AG_CPU_ENGINE_PERF_RING);
    /* Linux builds with HZ of 100, 250, 300 or 1000; the coarse clock's resolution is a jiffy. */
    printf("# kernel tick: %u Hz\n", tick);
    ASSERT_TRUE(tick == 100 || tick == 250 || tick == 300 || tick == 1000);
    if (!perf_allowed() || tick >= AG_HZ_MAX) {
        return;
    }
    start_agent();
    atomic_store(&stop_flag, 0);
    ASSERT_OK(pthread_create(&ta, NULL, busy_main, &a));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, tick + 1));
    ASSERT_TRUE(wait_engine(1));
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, tick + 1));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, tick));
    ASSERT_TRUE(wait_engine(0));
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, tick));
    atomic_store(&stop_flag, 1);
    ASSERT_OK(pthread_join(ta, NULL));
    ag_stop();
}

/* 0.6 ms of CPU every 6 ms, like the ground-truth workload's tiny thread, until stop_flag. */
static void *
tiny_main(void *p)
{
    _Atomic int32_t *tid = p;

    atomic_store(tid, (int32_t)syscall(SYS_gettid));
    while (!atomic_load(&stop_flag)) {
        uint64_t c0 = cpu_ns();

        while (cpu_ns() - c0 < 600000) {
            busy_a();
        }
        usleep(5400);
    }
    return NULL;
}

/* Whether thread tid's slot is on perf_event, and whether auto moved it there. */
static int
slot_on_perf(int32_t tid, int *promoted)
{
    struct ag_thread *t;
    int on = 0;

    pthread_mutex_lock(&ag.reg_lock);
    t = active_slot_locked(tid);
    if (t != NULL) {
        on = t->has_perf;
        *promoted = t->perf_promoted;
    }
    pthread_mutex_unlock(&ag.reg_lock);
    return on;
}

/*
 * At the tick's rate auto starts every thread on the timers, and the scan moves a thread the
 * tick does not sample as it should (short bursts between ticks: its samples come late, or
 * never) to perf, where its own CPU time times it. A thread that runs all the time stays on the
 * tick (printed; not asserted: a loaded machine may make its samples late too).
 */
TEST(auto_moves_a_thread_the_tick_misses_to_perf)
{
    struct busy_arg a = { busy_a, "busy-a", 5000000000u, 0 };
    unsigned tick = ag_kernel_tick_hz();
    struct ag_config cfg;
    struct ag_stats st;
    _Atomic int32_t tiny_tid = 0;
    pthread_t ta, tt;
    int i, promoted = 0, steady_promoted = 0, steady_perf;

    if (!perf_allowed() || tick == 0) {
        return;
    }
    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, tick));
    atomic_store(&stop_flag, 0);
    ASSERT_OK(pthread_create(&ta, NULL, busy_main, &a));
    ASSERT_OK(pthread_create(&tt, NULL, tiny_main, &tiny_tid));
    for (i = 0; i < 300 && !(atomic_load(&tiny_tid) != 0 &&
                             slot_on_perf(atomic_load(&tiny_tid), &promoted) && promoted);
         i++) {
        usleep(10000);
    }
    steady_perf = slot_on_perf(atomic_load(&a.tid), &steady_promoted);
    ag_stats_get(&st);
    printf("# at %u Hz: the bursty thread on perf after %d ms (promoted %d); the busy one on %s; "
           "%llu promoted\n",
           tick, i * 10, promoted, steady_perf ? "perf" : "the timers",
           (unsigned long long)st.perf_promoted);
    atomic_store(&stop_flag, 1);
    ASSERT_OK(pthread_join(tt, NULL));
    ASSERT_OK(pthread_join(ta, NULL));
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, tick));
    ag_stop();
    ASSERT_EQ(promoted, 1);
    ASSERT_TRUE(st.perf_promoted >= 1);
}

/* The promoted thread: busy_a until phase 1, then busy_b for 60 ms of CPU (its CPU in each). */
struct promo_arg {
    _Atomic int phase;
    _Atomic int32_t tid;
    uint64_t cpu_a, cpu_b;
};

static void *
promo_main(void *p)
{
    struct promo_arg *a = p;
    uint64_t c0 = cpu_ns(), c1;

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    while (atomic_load(&a->phase) == 0) {
        busy_a();
    }
    c1 = cpu_ns();
    while (cpu_ns() - c1 < 60000000u) {
        busy_b();
    }
    a->cpu_a = c1 - c0;
    a->cpu_b = cpu_ns() - c1;
    return NULL;
}

/* The slot of thread tid (reg_lock held), or NULL. */
static struct ag_thread *
slot_of(int32_t tid)
{
    unsigned i;

    for (i = 0; i < atomic_load(&ag.high); i++) {
        if (atomic_load(&ag.threads[i].tid) == tid &&
            atomic_load(&ag.threads[i].state) == AG_SLOT_ACTIVE) {
            return &ag.threads[i];
        }
    }
    return NULL;
}

/* Polls until thread tid has burned at least ns of CPU. */
static void
wait_thread_cpu(int32_t tid, uint64_t ns)
{
    struct timespec ts;
    int i;

    for (i = 0; i < 6000; i++) {
        if (clock_gettime(ag_thread_cpu_clock(tid), &ts) == 0 &&
            (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec >= ns) {
            return;
        }
        usleep(5000);
    }
    test_fail(__FILE__, __LINE__, "thread %d did not burn %llu ns of CPU in 30 s", (int)tid,
              (unsigned long long)ns);
}

/* Joins th, thread tid, and drains until its STOP came (up to 4 s of drains): its stats. */
static struct tid_stats *
join_and_drain(pthread_t th, int32_t tid)
{
    struct tid_stats *st;
    int i;

    ASSERT_OK(pthread_join(th, NULL));
    st = col_get(tid);
    for (i = 0; i < 400 && !st->stopped; i++) {
        usleep(10000);
        col_drain();
    }
    return st;
}

/* Clears the collector and starts the agent for the move tests: busy_a, busy_b and [not
 * sampled] counted, the given engine, no scan (the test moves the thread, at a known point). */
static void
start_move_case(enum ag_cpu_engine engine)
{
    struct ag_config cfg;

    memset(col, 0, sizeof(col));
    want[0] = (const void *)busy_a;
    want[1] = (const void *)busy_b;
    want[2] = (const void *)pipeprof_cpu_not_sampled;
    sampling_config_init(&cfg);
    cfg.cpu_engine = engine;
    cfg.scan_ms = 3600000;
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 100)); /* at or below the tick: timers */
}

/* Stops the timer of thread tid (on the timers) and waits until it has burned ns since its last
 * sample: what the tick misses. Returns its CPU time at that sample. */
static uint64_t
stop_tick_for(int32_t tid, uint64_t ns)
{
    struct itimerspec off;
    struct ag_thread *t;
    uint64_t missed0;

    memset(&off, 0, sizeof(off));
    pthread_mutex_lock(&ag.reg_lock);
    t = slot_of(tid);
    ASSERT_TRUE(t != NULL && t->has_timer && !t->has_perf);
    ASSERT_OK(timer_settime(t->timer, 0, &off, NULL)); /* the tick misses it from here */
    missed0 = atomic_load(&t->last_cpu_ns);
    pthread_mutex_unlock(&ag.reg_lock);
    wait_thread_cpu(tid, missed0 + ns);
    return missed0;
}

/*
 * What the timers missed before auto moves a thread to perf is claimed at the move as [not
 * sampled], not carried into its first perf sample (perf samples land in user code only, so that
 * sample's stack got CPU that ran elsewhere: a starved bursty thread's 2 to 21 intervals, most of
 * them in system calls, went to its parser in pp-sample-syscalls), nor given to the stack of the
 * last timer sample (a tick's sample, which saw the thread before that CPU: 5 to 20 intervals of
 * a loaded pool of 8 so). Here the thread's timer is stopped while it burns 60 ms in busy_a (what
 * the tick missed), it is moved, and it runs busy_b after: busy_b's weight must be its own,
 * busy_a's what the timers saw, the 6 missed intervals [not sampled].
 * pause_us: the move's pause between its claim and the perf event's opening (a preempted
 * manager): busy_a's CPU in that pause is the timers' too, not the first perf sample's kernel
 * time (a fresh-clone CI run gave 2.2 of busy_a's 16.2 intervals to busy_b so; with 30 ms and
 * no second claim, 3 of 18.5 in each of 5 runs).
 */
static void
move_to_perf_case(unsigned pause_us)
{
    struct promo_arg a = { 0, 0, 0, 0 };
    struct ag_thread *t;
    struct tid_stats *st;
    uint64_t period = 10000000u, missed0 = 0, missed = 0, other;
    struct timespec now;
    int32_t tid;
    pthread_t th;
    int moved = 0;

    if (!perf_allowed() || ag_kernel_tick_hz() < 100) {
        return;
    }
    start_move_case(AG_CPU_ENGINE_AUTO);
    atomic_store(&ag_test_move_pause_us, pause_us);
    ASSERT_OK(pthread_create(&th, NULL, promo_main, &a));
    while ((tid = atomic_load(&a.tid)) == 0) {
        usleep(1000);
    }
    wait_thread_cpu(tid, 100000000u); /* 10 timer samples in busy_a */
    missed0 = stop_tick_for(tid, 6 * period);
    pthread_mutex_lock(&ag.reg_lock);
    t = slot_of(tid);
    ASSERT_TRUE(t != NULL);
    /* Its samples since the previous scan look late (1 standing for 3 intervals): auto moves it. */
    t->scan_samples = atomic_load(&t->timer_samples) - 1u;
    t->scan_weight = atomic_load(&t->timer_weight) - 3u;
    ASSERT_OK(clock_gettime(ag_thread_cpu_clock(tid), &now));
    missed = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec - missed0;
    ag_cpu_engine_check_locked(t);
    moved = t->has_perf && t->perf_promoted;
    pthread_mutex_unlock(&ag.reg_lock);
    /* A consumer drains every 50 ms or so: the claim is delivered before the thread's final one
     * (claimed at its exit, it would join this one, and a merged claim takes the later stack). */
    col_drain();
    atomic_store(&a.phase, 1);
    st = join_and_drain(th, tid);
    atomic_store(&ag_test_move_pause_us, 0);
    printf("# pause %u us: moved %d; busy_a %.1f intervals burned (%.1f missed), weight %llu; "
           "[not sampled] %llu; busy_b %.1f burned, weight "
           "%llu; final samples %u; all samples' weight %llu (%llu unseen, %llu kernel), cpu "
           "%.1f\n",
           pause_us, moved, (double)a.cpu_a / (double)period, (double)missed / (double)period,
           (unsigned long long)st->hit_weight[0], (unsigned long long)st->hit_weight[2],
           (double)a.cpu_b / (double)period, (unsigned long long)st->hit_weight[1], st->tails,
           (unsigned long long)st->weight_sum, (unsigned long long)st->unseen_weight,
           (unsigned long long)st->kernel_weight, (double)st->cpu_delta_sum / (double)period);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 100));
    ag_stop();
    ASSERT_TRUE(moved);
    ASSERT_TRUE(st->stopped == 1);
    /* Rounding and the carry move at most an interval or so between them. (A timer sample the
     * tick took late gives what it missed to [not sampled] too: busy_a's whole CPU is its
     * weight and [not sampled]'s.) */
    ASSERT_TRUE((double)st->hit_weight[1] <= (double)a.cpu_b / (double)period + 2.0);
    ASSERT_TRUE((double)st->hit_weight[2] >= (double)missed / (double)period - 1.5);
    ASSERT_TRUE((double)st->hit_weight[0] <= (double)(a.cpu_a - missed) / (double)period + 2.0);
    /* None of busy_a's CPU is lost: it stands under busy_a, [not sampled], or the loop around
     * busy_a's calls, whose own code takes a sample now and then (under TSan its atomic load is a
     * call into the runtime: 2 intervals of 25 in a fresh-clone CI run, 7 + 10 for busy_a's
     * 19.2). That loop's weight is bounded: a lost or misplaced span is several intervals. */
    other = st->weight_sum - st->hit_weight[0] - st->hit_weight[1] - st->hit_weight[2];
    ASSERT_TRUE(other <= 3);
    ASSERT_TRUE((double)(st->hit_weight[0] + st->hit_weight[2] + other) >=
                (double)a.cpu_a / (double)period - 2.0);
}

TEST(a_thread_moved_to_perf_keeps_what_the_timers_missed_in_place)
{
    move_to_perf_case(0);
    move_to_perf_case(30000);
}

/* A thread that burns busy_a until phase 1, tells so (in_b), then busy_b until its timer is
 * re-armed, for 60 ms of CPU after, and until a timer sample came after the re-arming. */
struct late_arg {
    _Atomic int phase, in_b, rearmed;
    _Atomic int32_t tid;
    _Atomic uint64_t cpu_b0; /* its CPU time as busy_b's phase began */
    uint64_t cpu_b;
    struct ag_thread *slot; /* its slot, and its timer samples at the re-arming (the test's) */
    uint32_t samples0;
    int sampled, late; /* a timer sample came in busy_b's phase; it left the thread late */
};

/* The second phase: busy_b and the clock reads that time it, all under this function (a tick
 * finds the thread in the kernel in a clock read now and then, and its sample stands there). */
EXPORT void
late_b_phase(void *arg)
{
    struct late_arg *a = arg;
    uint64_t c = cpu_ns(), armed;

    atomic_store(&a->cpu_b0, c);
    atomic_store(&a->in_b, 1);
    /* 60 ms from the timer's re-arming, not from here: a test thread kept off a core longer than
     * that re-armed it after the phase (a fresh-clone CI run beside another: busy_b's phase 0,
     * busy_a all 16 intervals, by the final sample) */
    while (!atomic_load(&a->rearmed)) {
        busy_b();
    }
    armed = cpu_ns();
    /* And until a timer sample came: the kernel sees a CPU-time timer's expiry only at a tick
     * that finds the thread running, and a thread whose runs all fall between ticks goes
     * without a sample however much CPU it burns (docs/architecture.md, "CPU engines"). A
     * fresh-clone CI run under load: no sample in the 60 ms after the re-arming, busy_b's phase
     * 0 and busy_a all 39 intervals, by the final sample, which has the last sample's stack.
     * bench/tick-shadow, running across each tick of the thread's CPU 200 ms in 500, failed
     * this case in 25 runs of 25 so (the bare timer: 0 signals in 1066 ms of a busy thread's
     * CPU). The samples are counted by the handler, which runs on this thread: a count seen
     * here is complete. Up to 3 s of CPU: a tick that never sees the thread leaves nothing to
     * judge. */
    while (cpu_ns() - armed < 60000000u || (!a->sampled && cpu_ns() - armed < 3000000000u)) {
        uint32_t n = atomic_load(&a->slot->timer_samples);

        if (!a->sampled && n != a->samples0) {
            a->sampled = 1;
            /* the handler's own test of its split (no scan ran: scan_samples and scan_weight 0) */
            a->late = ag_timer_late(n, atomic_load(&a->slot->timer_weight));
        }
        busy_b();
    }
    a->cpu_b = cpu_ns() - c;
}

static void *
late_main(void *p)
{
    struct late_arg *a = p;

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    while (atomic_load(&a->phase) == 0) {
        busy_a();
    }
    late_b_phase(a);
    return NULL;
}

/* One run of a_late_tick_sample_...: the thread's timer stopped after `before` ns of busy_a
 * (100 Hz timer samples) for `gap` ns more, set again once it runs busy_b. Returns the weight of
 * busy_b's phase (late_b_phase) and [not sampled]'s, how many intervals the tick missed and the
 * phase burned, and whether busy_b's first sample left the thread late (ag_timer_late). */
static void
late_tick_run(enum ag_cpu_engine engine, uint64_t before, uint64_t gap, uint64_t *w_b,
              uint64_t *w_ns, double *missed, double *burned_b, int *late)
{
    struct late_arg a;
    struct itimerspec on;
    struct ag_thread *t;
    struct tid_stats *st;
    uint64_t period = 10000000u, missed0 = 0;
    int32_t tid;
    pthread_t th;

    memset(&a, 0, sizeof(a));
    start_move_case(engine);
    want[1] = (const void *)late_b_phase;
    ASSERT_OK(pthread_create(&th, NULL, late_main, &a));
    while ((tid = atomic_load(&a.tid)) == 0) {
        usleep(1000);
    }
    wait_thread_cpu(tid, before);
    missed0 = stop_tick_for(tid, gap);
    atomic_store(&a.phase, 1);
    while (!atomic_load(&a.in_b)) {
        usleep(1000);
    }
    pthread_mutex_lock(&ag.reg_lock);
    t = slot_of(tid);
    ASSERT_TRUE(t != NULL && t->has_timer);
    on.it_value.tv_sec = 0;
    on.it_value.tv_nsec = (long)period;
    on.it_interval = on.it_value;
    a.slot = t;
    a.samples0 = atomic_load(&t->timer_samples);
    ASSERT_OK(timer_settime(t->timer, 0, &on, NULL)); /* its next sample is in busy_b, late */
    atomic_store(&a.rearmed, 1);
    pthread_mutex_unlock(&ag.reg_lock);
    st = join_and_drain(th, tid);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 100));
    ag_stop();
    ASSERT_TRUE(st->stopped == 1);
    printf("# %s: weights busy_a %llu, busy_b's phase %llu, [not sampled] %llu, all %llu (cpu "
           "%.1f intervals); a timer sample in busy_b's phase %d, late %d\n",
           engine == AG_CPU_ENGINE_AUTO ? "auto" : "timer", (unsigned long long)st->hit_weight[0],
           (unsigned long long)st->hit_weight[1], (unsigned long long)st->hit_weight[2],
           (unsigned long long)st->weight_sum, (double)st->cpu_delta_sum / (double)period,
           a.sampled, a.late);
    /* No sample in 3 s of its CPU: the tick never saw it (or the handler lost them all) */
    ASSERT_TRUE(a.sampled);
    *w_b = st->hit_weight[1];
    *w_ns = st->hit_weight[2];
    /* busy_a's CPU the tick missed: to busy_b's start, not to the timer's re-arming, which comes
     * later when this thread waits for a core, with that busy_b CPU in burned_b already (under
     * TSan at load 20 busy_b's phase weighed 10 for a required 10.2 so). */
    *missed = (double)(atomic_load(&a.cpu_b0) - missed0) / (double)period;
    *burned_b = (double)a.cpu_b / (double)period;
    *late = a.late;
}

/*
 * Auto's timers at or below the tick: a tick sample that stands for more than its own interval
 * stands for CPU the tick did not see, and gives it to [not sampled], not to its own stack
 * (pp-sample-syscalls beside two busy loops: 106 intervals of a pool of 8, 2.7 % of the
 * profile, went so to the stack a tick happened to find, half of them of the threads that mix
 * calls and user code). Here the thread's timer is stopped while it burns 60 ms in busy_a and
 * set again once it runs busy_b: busy_b's first sample stands for 7 intervals or so. Under auto
 * busy_b keeps its own 6, the missed ones are [not sampled]; PIPEPROF_CPU_ENGINE=timer keeps
 * the weights on the sample (the forced engine is the tick's, as gperftools': README).
 */
TEST(a_late_tick_sample_gives_what_the_tick_missed_to_not_sampled)
{
    uint64_t w_b = 0, w_ns = 0, period = 10000000u;
    double missed = 0, burned_b = 0;
    int late = 0;

    if (!perf_allowed() || ag_kernel_tick_hz() < 100) {
        return; /* auto keeps its timers' weights where a thread cannot move to perf */
    }
    /* 5 samples, then one that stands for 7: late, as a thread auto moves looks */
    late_tick_run(AG_CPU_ENGINE_AUTO, 5 * period, 6 * period, &w_b, &w_ns, &missed, &burned_b,
                  &late);
    printf("# auto: busy_a %.1f intervals missed, busy_b %.1f burned; weight busy_b %llu, "
           "[not sampled] %llu\n",
           missed, burned_b, (unsigned long long)w_b, (unsigned long long)w_ns);
    ASSERT_TRUE((double)w_b <= burned_b + 2.0);
    ASSERT_TRUE((double)w_ns >= missed - 1.5);
    late_tick_run(AG_CPU_ENGINE_TIMER, 5 * period, 6 * period, &w_b, &w_ns, &missed, &burned_b,
                  &late);
    printf("# timer: busy_a %.1f intervals missed, busy_b %.1f burned; weight busy_b %llu, "
           "[not sampled] %llu\n",
           missed, burned_b, (unsigned long long)w_b, (unsigned long long)w_ns);
    ASSERT_TRUE((double)w_b >= burned_b + missed - 2.0);
    ASSERT_EQ(w_ns, 0);
    /* 30 samples, then one that stands for 5: a thread the tick sees steadily keeps it (its
     * first samples may look late: 0 to 2 intervals [not sampled] beside two busy loops). When
     * the tick missed the thread long enough after the re-arming that this sample left it late
     * (one that stands for 19 or more here), the handler splits it, as in the first case. */
    late_tick_run(AG_CPU_ENGINE_AUTO, 30 * period, 4 * period, &w_b, &w_ns, &missed, &burned_b,
                  &late);
    printf("# auto, steady: busy_a %.1f intervals missed, busy_b %.1f burned; weight busy_b "
           "%llu, [not sampled] %llu; late %d\n",
           missed, burned_b, (unsigned long long)w_b, (unsigned long long)w_ns, late);
    if (late) {
        ASSERT_TRUE((double)w_ns >= missed - 1.5);
    } else {
        ASSERT_TRUE((double)w_b >= burned_b + missed - 2.0);
    }
}

/* A thread for the move before any timer sample: asleep until go, then busy_a until phase, then
 * busy_b for 60 ms of CPU (its CPU clock then in cpu_end); with wait (the exitgap cases' flush),
 * then asleep until phase 2. */
struct fresh_arg {
    _Atomic int go, phase;
    _Atomic int32_t tid;
    _Atomic uint64_t cpu_end;
    int wait;
};

static void *
fresh_main(void *p)
{
    struct fresh_arg *a = p;
    uint64_t c;

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    while (!atomic_load(&a->go)) {
        usleep(1000);
    }
    while (atomic_load(&a->phase) == 0) {
        busy_a();
    }
    for (c = cpu_ns(); cpu_ns() - c < 60000000u;) {
        busy_b();
    }
    atomic_store(&a->cpu_end, cpu_ns());
    while (a->wait && atomic_load(&a->phase) != 2) {
        usleep(2000);
    }
    return NULL;
}

/*
 * One run of an_exit_after_the_tick_missed_its_runs_...: the thread's timer stopped after 3 timer
 * samples in busy_a (the tick misses it from there), the thread runs busy_b for 60 ms of CPU and
 * ends (flush: stays, and the session's flush claims it). Its samples since the last scan: none
 * (steady 0), or `steady` of one interval each, as the scan's counts are set by hand (no scan
 * runs). Its final sample stands for the CPU since its last sample, in busy_a: 6 intervals or
 * more. Returns that sample's weight (all its parts'), [not sampled]'s, busy_a's and busy_b's, and
 * how many intervals ran since the last sample.
 */
static void
exitgap_run(enum ag_cpu_engine engine, int flush, uint32_t steady, uint64_t *w_tail, uint64_t *w_ns,
            uint64_t *w_a, uint64_t *w_b, double *missed)
{
    struct fresh_arg a;
    struct itimerspec off;
    struct ag_thread *t;
    struct tid_stats *st;
    uint64_t period = 10000000u, last = 0, ns0, tail0;
    int32_t tid;
    pthread_t th;
    int i, sampled = 0;

    memset(&a, 0, sizeof(a));
    a.go = 1;
    a.wait = flush;
    start_move_case(engine);
    ASSERT_OK(pthread_create(&th, NULL, fresh_main, &a));
    while ((tid = atomic_load(&a.tid)) == 0) {
        usleep(1000);
    }
    /* 3 timer samples in busy_a (the handler counts them on the thread: up to 60 s of its CPU) */
    for (i = 0; i < 12000 && !sampled; i++) {
        pthread_mutex_lock(&ag.reg_lock);
        t = slot_of(tid);
        ASSERT_TRUE(t != NULL && t->has_timer && !t->has_perf);
        sampled = atomic_load(&t->timer_samples) >= 3;
        pthread_mutex_unlock(&ag.reg_lock);
        usleep(5000);
    }
    ASSERT_TRUE(sampled);
    memset(&off, 0, sizeof(off));
    pthread_mutex_lock(&ag.reg_lock);
    t = slot_of(tid);
    ASSERT_TRUE(t != NULL);
    ASSERT_OK(timer_settime(t->timer, 0, &off, NULL)); /* the tick misses it from here */
    last = atomic_load(&t->last_cpu_ns);
    pthread_mutex_unlock(&ag.reg_lock);
    /* A signal sent as the timer stopped has been taken once the thread ran 2 ms more */
    wait_thread_cpu(tid, last + 2000000u);
    pthread_mutex_lock(&ag.reg_lock);
    last = atomic_load(&t->last_cpu_ns);
    /* A scan just now (steady 0), or one before `steady` samples of an interval each */
    atomic_store(&t->scan_samples, atomic_load(&t->timer_samples) - steady);
    atomic_store(&t->scan_weight, atomic_load(&t->timer_weight) - steady);
    pthread_mutex_unlock(&ag.reg_lock);
    /* What came before: a sample of its first ones may look late and split (the handler's
     * rule), as AG_SOURCE_TAIL records; the final sample's parts are what comes after. */
    col_drain();
    st = col_get(tid);
    ns0 = st->hit_weight[2];
    tail0 = st->tail_weight;
    atomic_store(&a.phase, 1);
    if (flush) {
        while (atomic_load(&a.cpu_end) == 0) {
            usleep(1000);
        }
        ag_cpu_flush(); /* a session's end: claims the live thread's CPU since its last sample */
    }
    col_drain();
    atomic_store(&a.phase, 2);
    st = join_and_drain(th, tid);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 100));
    ag_stop();
    ASSERT_TRUE(st->stopped == 1);
    *w_tail = st->tail_weight - tail0;
    *w_ns = st->hit_weight[2] - ns0;
    *w_a = st->hit_weight[0];
    *w_b = st->hit_weight[1];
    *missed = (double)(atomic_load(&a.cpu_end) - last) / (double)period;
    printf("# %s, %s, %u steady samples: %.1f intervals since the last sample; final sample "
           "weight %llu, [not sampled] %llu (%llu before), busy_a %llu, busy_b %llu, all %llu "
           "(cpu %.1f intervals)\n",
           engine == AG_CPU_ENGINE_AUTO ? "auto" : "timer", flush ? "flush" : "exit", steady,
           *missed, (unsigned long long)*w_tail, (unsigned long long)*w_ns, (unsigned long long)ns0,
           (unsigned long long)*w_a, (unsigned long long)*w_b, (unsigned long long)st->weight_sum,
           (double)st->cpu_delta_sum / (double)period);
}

/*
 * A final sample (the thread's end, a flush) stands for the thread's CPU since its last sample,
 * and goes under that sample's stack. When auto's timers missed the thread's runs for several
 * intervals (a busy thread whose CPU timer the tick never sees: bench/tick-shadow, the late-tick
 * thread of a_late_tick_sample_... in a loaded CI run) and it ends before the scan moves it to
 * perf, that stack saw only where the span began: the rest ran elsewhere (here in busy_b), and
 * is [not sampled], by the handler's rule for a late tick sample (ag_timer_late, the claim
 * counted as a sample): all but one interval. Before, busy_a took all of it (6 to 7 intervals of
 * busy_b's). A thread the tick sees steadily keeps its weight, as its late samples do, and so
 * does the forced timer engine (the tick's, as gperftools').
 */
static void
exitgap_case(int flush)
{
    uint64_t w_tail = 0, w_ns = 0, w_a = 0, w_b = 0;
    struct ag_stats stats;
    double missed = 0;

    if (!perf_allowed() || ag_kernel_tick_hz() < 100) {
        return; /* auto keeps its timers' weights where a thread cannot move to perf */
    }
    exitgap_run(AG_CPU_ENGINE_AUTO, flush, 0, &w_tail, &w_ns, &w_a, &w_b, &missed);
    ag_stats_get(&stats);
    /* One interval stays under the last stack (busy_a), the rest is [not sampled] and counted;
     * busy_b, which no sample saw, has nothing. The final sample's weight is its span's, give
     * or take the carry (-1 to 1/2 interval) and the rounding. */
    ASSERT_TRUE((double)w_tail >= missed - 1.5);
    ASSERT_EQ(w_ns, w_tail - 1);
    ASSERT_TRUE((double)stats.cpu_not_sampled_ns >= (missed - 2.5) * 10000000.0);
    ASSERT_EQ(w_b, 0);
    /* The same thread after 100 samples of an interval each: not late by that rule (a final
     * sample of 52 intervals would be), so its final sample keeps its weight under busy_a. */
    exitgap_run(AG_CPU_ENGINE_AUTO, flush, 100, &w_tail, &w_ns, &w_a, &w_b, &missed);
    if (ag_timer_late(101, 100 + (uint32_t)w_tail)) {
        ASSERT_EQ(w_ns, w_tail - 1);
    } else {
        ASSERT_EQ(w_ns, 0);
        ASSERT_TRUE(w_a >= w_tail && (double)w_tail >= missed - 1.5);
    }
    ASSERT_EQ(w_b, 0);
    /* The forced timers keep their weights (docs/architecture.md, "What the tick did not see") */
    exitgap_run(AG_CPU_ENGINE_TIMER, flush, 0, &w_tail, &w_ns, &w_a, &w_b, &missed);
    ASSERT_EQ(w_ns, 0);
    ASSERT_TRUE(w_a >= w_tail && (double)w_tail >= missed - 1.5);
    ASSERT_EQ(w_b, 0);
}

TEST(an_exit_after_the_tick_missed_its_runs_gives_them_to_not_sampled)
{
    exitgap_case(0);
}

TEST(a_flush_after_the_tick_missed_its_runs_gives_them_to_not_sampled)
{
    exitgap_case(1);
}

/*
 * A thread auto moves to perf before the timers gave it any sample has no stack for what it ran
 * until then: that CPU no sample saw is [not sampled] over its start routine, counted, and goes
 * to no code. It used to be carried, unsplit, into the thread's first perf sample, whose stack
 * perf puts in user code (pp-sample-syscalls' parser got 13 to 16 intervals so in loaded pools
 * of 8, 60 % of it write(2) calls' time). Here the thread's timer is stopped before it runs, it
 * burns 60 ms in busy_a, is moved, and runs busy_b: the 6 intervals must be [not sampled], and
 * busy_a and busy_b hold only what perf saw of them after the move.
 */
TEST(a_thread_moved_before_any_timer_sample_shows_that_cpu_as_not_sampled)
{
    struct fresh_arg a = { 0, 0, 0, 0, 0 };
    struct itimerspec off;
    struct ag_config cfg;
    struct ag_thread *t;
    struct tid_stats *st;
    struct ag_stats stats;
    struct timespec now;
    uint64_t period = 10000000u, cpu_move = 0, base = 0;
    int32_t tid;
    pthread_t th;
    int moved = 0, no_sample = 0;

    if (!perf_allowed() || ag_kernel_tick_hz() < 100) {
        return;
    }
    memset(col, 0, sizeof(col));
    want[0] = (const void *)busy_a;
    want[1] = (const void *)busy_b;
    want[2] = (const void *)pipeprof_cpu_not_sampled;
    sampling_config_init(&cfg);
    cfg.scan_ms = 3600000; /* no scan moves it: the test does, at a known point */
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(pthread_create(&th, NULL, fresh_main, &a));
    while ((tid = atomic_load(&a.tid)) == 0) {
        usleep(1000);
    }
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 100)); /* auto at or below the tick: timers */
    memset(&off, 0, sizeof(off));
    pthread_mutex_lock(&ag.reg_lock);
    t = slot_of(tid);
    ASSERT_TRUE(t != NULL && t->has_timer && !t->has_perf);
    ASSERT_OK(timer_settime(t->timer, 0, &off, NULL)); /* the tick never samples it */
    base = atomic_load(&t->last_cpu_ns);
    pthread_mutex_unlock(&ag.reg_lock);
    atomic_store(&a.go, 1);
    wait_thread_cpu(tid, base + 6 * period);
    pthread_mutex_lock(&ag.reg_lock);
    t = slot_of(tid);
    ASSERT_TRUE(t != NULL);
    no_sample = atomic_load(&t->timer_samples) == 0;
    ASSERT_OK(clock_gettime(ag_thread_cpu_clock(tid), &now));
    cpu_move = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    ag_cpu_engine_check_locked(t); /* no sample, two intervals burned: moved */
    moved = t->has_perf && t->perf_promoted;
    pthread_mutex_unlock(&ag.reg_lock);
    col_drain();
    atomic_store(&a.phase, 1);
    st = join_and_drain(th, tid);
    ag_stats_get(&stats);
    printf("# moved %d with no timer sample %d: %.1f intervals before the move, [not sampled] "
           "weight %llu (%.1f intervals counted); after it %.1f intervals, busy_a and busy_b's "
           "weight %llu + %llu\n",
           moved, no_sample, (double)(cpu_move - base) / (double)period,
           (unsigned long long)st->hit_weight[2], (double)stats.cpu_not_sampled_ns / (double)period,
           (double)(atomic_load(&a.cpu_end) - cpu_move) / (double)period,
           (unsigned long long)st->hit_weight[0], (unsigned long long)st->hit_weight[1]);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 100));
    ag_stop();
    ASSERT_TRUE(moved && no_sample);
    ASSERT_TRUE(st->stopped == 1);
    ASSERT_TRUE((double)st->hit_weight[2] >= (double)(cpu_move - base) / (double)period - 1.0);
    ASSERT_TRUE(stats.cpu_not_sampled_ns >= cpu_move - base - period);
    ASSERT_TRUE((double)(st->hit_weight[0] + st->hit_weight[1]) <=
                (double)(atomic_load(&a.cpu_end) - cpu_move) / (double)period + 2.0);
}

/* A thread only the /proc scan knows, started before the agent (every thread of an HTTP
 * recording, of an idle preload's first session): busy_a until phase. */
struct scanroot_arg {
    _Atomic int32_t tid;
    _Atomic int phase;
};

void *
scanroot_main(void *p)
{
    struct scanroot_arg *a = p;

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    while (atomic_load(&a->phase) == 0) {
        busy_a();
    }
    return NULL;
}

/* What root_cb saw of thread root_tid: its first [not sampled] sample, and the last CPU signal
 * sample before it. */
static int32_t root_tid;
static uint64_t root_ns_frames[AG_MAX_FRAMES], root_cpu_frames[AG_MAX_FRAMES];
static uint32_t root_ns_depth, root_cpu_depth, root_ns_weight;
static uint8_t root_cpu_end;
static unsigned root_ns_n;

static int
root_cb(const struct ag_record *rec, void *ctx)
{
    const struct ag_sample *s = rec->u.sample;

    if (rec->kind == AG_RECORD_SAMPLE && rec->tid == root_tid && s->mode == AG_MODE_CPU &&
        s->depth != 0) {
        if (s->frames[0] == ag_not_sampled_pc() && root_ns_n++ == 0) {
            memcpy(root_ns_frames, s->frames, s->depth * sizeof(uint64_t));
            root_ns_depth = s->depth;
            root_ns_weight = s->weight;
        } else if (s->source == AG_SOURCE_SIGNAL && root_ns_n == 0) {
            memcpy(root_cpu_frames, s->frames, s->depth * sizeof(uint64_t));
            root_cpu_depth = s->depth;
            root_cpu_end = s->end;
        }
    }
    return col_cb(rec, ctx);
}

/* Whether the code at pc (a return address: its call's) is in a library whose file name holds
 * name. */
static int
pc_in_lib(uint64_t pc, const char *name)
{
    Dl_info di;

    return dladdr((void *)(uintptr_t)(pc - 1), &di) != 0 && di.dli_fname != NULL &&
           strstr(di.dli_fname, name) != NULL;
}

/* Whether the code at pc (a return address) is in the C library. */
static int
pc_in_libc(uint64_t pc)
{
    return pc_in_lib(pc, "libc.so");
}

/* Whether the code at pc (a return address) is in a sanitizer's runtime. */
static int
pc_in_sanitizer(uint64_t pc)
{
    return pc_in_lib(pc, "libtsan") || pc_in_lib(pc, "libasan");
}

/*
 * A thread the /proc scan found, started before the agent (not through the pthread_create
 * interposer, so no start routine was recorded for it), whose CPU no sample saw is claimed after
 * it had samples (auto's move, as in the tests above): its [not sampled] stands over its start
 * routine, the routine's frame under the marker and the C library's callers under that, the
 * outermost frames of its last CPU stack. Before, it stood alone for such threads: under the
 * bare thread node in dotnet-trace's views (issue 19; http-final-samples' main, busy and masked
 * threads).
 */
TEST(a_not_sampled_claim_of_a_thread_the_scan_found_stands_over_its_start_routine)
{
    struct scanroot_arg a = { 0, 0 };
    struct tid_stats *st;
    struct ag_thread *t;
    struct timespec now;
    uint64_t period = 10000000u, stopped_at;
    uint32_t j;
    int32_t tid;
    pthread_t th;
    int i, moved = 0, registered = 0;
    unsigned early_claims = 0;

    if (!perf_allowed() || ag_kernel_tick_hz() < 100) {
        test_skip("auto cannot move a thread to perf here (perf refused or a tick below 100 Hz)");
    }
    ASSERT_OK(host_real_pthread_create()(&th, NULL, scanroot_main, &a));
    while ((tid = atomic_load(&a.tid)) == 0) {
        usleep(1000);
    }
    start_move_case(AG_CPU_ENGINE_AUTO); /* ag_start's scan finds it; timers at 100 Hz */
    root_tid = tid;
    root_ns_n = 0;
    root_cpu_depth = 0;
    root_cpu_end = AG_UNWIND_END_LEAF_ONLY;
    pthread_mutex_lock(&ag.reg_lock);
    t = slot_of(tid);
    registered = t != NULL && !t->has_start && t->has_timer && !t->has_perf;
    pthread_mutex_unlock(&ag.reg_lock);
    ASSERT_TRUE(registered);
    st = col_get(tid);
    /* Until its walks reach the root: the manager builds the unwind tables after the start, and
     * a slow build's first samples are cut where libc's was pending (an ASan build: 3 of 4 runs
     * had only such samples after 3). */
    for (i = 0; i < 2000 && (st->cpu_signal_samples < 3 || root_cpu_end != AG_UNWIND_END_ROOT);
         i++) {
        usleep(10000);
        drain_into(root_cb);
        /* A claim before any walk reached the root stands alone (no root known yet; issue 19):
         * a loaded machine's late first ticks (an ASan CI run: weight 1 while libc's table was
         * pending). Forgotten here, so that the CPU stacks after it are still taken in; the
         * claim this case judges is the one after the tick stops. */
        if (root_ns_n != 0 && root_cpu_end != AG_UNWIND_END_ROOT) {
            early_claims += root_ns_n;
            root_ns_n = 0;
        }
    }
    if (st->cpu_signal_samples < 3 || root_cpu_end != AG_UNWIND_END_ROOT) {
        test_fail(__FILE__, __LINE__,
                  "the scan-only thread got %u timer samples in 20 s, the last one's walk ending "
                  "%u (not at the root; %u claims before)",
                  st->cpu_signal_samples, root_cpu_end, early_claims);
    }
    /* Its tick stopped; a signal already pending lands within an interval of its CPU, then the
     * check notes its samples so far (regular: no move), and after 6 intervals more with no
     * sample the next check moves it, claiming those 6 as [not sampled]. */
    stopped_at = stop_tick_for(tid, 2 * period);
    drain_into(root_cb);
    pthread_mutex_lock(&ag.reg_lock);
    t = slot_of(tid);
    ASSERT_TRUE(t != NULL);
    ag_cpu_engine_check_locked(t);
    moved = t->has_perf;
    pthread_mutex_unlock(&ag.reg_lock);
    if (moved) {
        test_skip("the thread's first timer samples looked late (a loaded machine): moved early");
    }
    ASSERT_OK(clock_gettime(ag_thread_cpu_clock(tid), &now));
    wait_thread_cpu(tid, (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec + 6 * period);
    pthread_mutex_lock(&ag.reg_lock);
    t = slot_of(tid);
    ASSERT_TRUE(t != NULL);
    ag_cpu_engine_check_locked(t);
    moved = t->has_perf && t->perf_promoted;
    pthread_mutex_unlock(&ag.reg_lock);
    for (i = 0; i < 400 && root_ns_n == 0; i++) {
        drain_into(root_cb);
        usleep(10000);
    }
    atomic_store(&a.phase, 1);
    ASSERT_OK(pthread_join(th, NULL));
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 100));
    ag_stop();
    printf("# scan-only thread: moved %d (tick stopped at %.1f ms of CPU), %u CPU samples, "
           "[not sampled] %u (first: weight %u, depth %u; %u claims before a walk reached the "
           "root), last CPU stack before it: depth %u, end %u\n",
           moved, (double)stopped_at / 1e6, st->cpu_signal_samples, root_ns_n, root_ns_weight,
           root_ns_depth, early_claims, root_cpu_depth, root_cpu_end);
    ASSERT_TRUE(moved);
    ASSERT_TRUE(root_ns_n >= 1 && root_ns_weight >= 1);
    ASSERT_EQ(root_cpu_end, AG_UNWIND_END_ROOT);
    /* The routine's frame in the last CPU stack: what stands under the marker, outermost up.
     * Under a sanitizer, whose pthread_create starts every thread in a routine of its runtime
     * (as the interposer then records it for a registered thread), that routine's, scanroot_main
     * called by it. */
    for (j = 0; j < root_cpu_depth && !col_frame_is(root_cpu_frames[j] + (j == 0), scanroot_main);
         j++) {
    }
    ASSERT_TRUE(j < root_cpu_depth);
    if (j + 1 < root_cpu_depth && !pc_in_libc(root_cpu_frames[j + 1]) &&
        pc_in_sanitizer(root_cpu_frames[j + 1])) {
        j++;
    }
    for (i = 0; i < (int)root_ns_depth; i++) {
        Dl_info di;

        printf("#   [%d] %#llx %s\n", i, (unsigned long long)root_ns_frames[i],
               dladdr((void *)(uintptr_t)(root_ns_frames[i] - (i > 1)), &di) != 0 &&
                               di.dli_sname != NULL
                       ? di.dli_sname
                       : "?");
    }
    ASSERT_EQ(root_ns_depth, 1 + root_cpu_depth - j);
    ASSERT_TRUE(col_frame_is(root_ns_frames[1], scanroot_main) ||
                pc_in_sanitizer(root_ns_frames[1]));
    ASSERT_TRUE(memcmp(root_ns_frames + 1, root_cpu_frames + j,
                       (root_cpu_depth - j) * sizeof(uint64_t)) == 0);
    ASSERT_TRUE(root_ns_depth >= 3); /* its callers: start_thread, clone or clone3 */
    for (i = 2; i < (int)root_ns_depth; i++) {
        ASSERT_TRUE(pc_in_libc(root_ns_frames[i]));
    }
}

/* Kernel time as the drain delivers it: weights under a call ([kernel] over the stack), and not
 * placed ([kernel, not placed]); of thread kern_tid only, when it is not 0. */
static uint64_t kern_at_call_w, kern_unplaced_w;
static int32_t kern_tid;

static int
kern_cb(const struct ag_record *rec, void *ctx)
{
    (void)ctx;
    if (rec->kind == AG_RECORD_SAMPLE && rec->u.sample->source == AG_SOURCE_KERNEL &&
        rec->u.sample->weight != 0 && rec->u.sample->depth != 0 &&
        (kern_tid == 0 || rec->tid == kern_tid)) {
        if (rec->u.sample->frames[0] == ag_kernel_pc()) {
            kern_at_call_w += rec->u.sample->weight;
        } else if (rec->u.sample->frames[0] == ag_kernel_unplaced_pc()) {
            kern_unplaced_w += rec->u.sample->weight;
        }
    }
    return 0;
}

/* write(2) calls to /dev/null and arithmetic in turn, 2 ms of CPU each, for 400 ms of CPU. */
static void *
writer_main(void *p)
{
    static const char buf[512];
    _Atomic int32_t *tid = p;
    int fd = open("/dev/null", O_WRONLY);
    uint64_t c0 = cpu_ns(), c;

    atomic_store(tid, (int32_t)syscall(SYS_gettid));
    while (fd >= 0 && cpu_ns() - c0 < 400000000u) {
        for (c = cpu_ns(); cpu_ns() - c < 2000000u;) {
            if (write(fd, buf, sizeof(buf)) < 0) {
                break;
            }
        }
        for (c = cpu_ns(); cpu_ns() - c < 2000000u;) {
            busy_a();
        }
    }
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}

/* A thread of the locator test: busy without a system call (cpu_ns() is one: the thread CPU
 * clock), or making getppid() calls back to back, until stop_flag. */
struct locator_thread {
    _Atomic int32_t tid;
    int calls;
};
static _Atomic int32_t locator_sleeper_tid;

static void *
locator_thread_main(void *p)
{
    struct locator_thread *lt = p;

    atomic_store(&lt->tid, (int32_t)syscall(SYS_gettid));
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        if (lt->calls) {
            (void)syscall(SYS_getppid);
        } else {
            busy_a();
        }
    }
    return NULL;
}

/* A session's drain, its records let go: the locator tests empty the rings as a session does. A
 * ring left full (256 records, about a second of a busy thread's CPU at 250 Hz with its locator's)
 * drops every sample before it is weighed, so the thread's sampled CPU stops and each scan finds
 * it without a sample, which counts neither way for its locator: a locator not gone by then never
 * went (a_scan_without_a_sample_does_not_retire_a_locator, 20 s under TSan). */
static int
locator_drain_cb(const struct ag_record *rec, void *ctx)
{
    (void)rec;
    (void)ctx;
    return 0;
}

/* The locator tests' session: the perf engine at 250 Hz, scans every 20 ms. */
static int
locator_session_start(void)
{
    struct ag_config cfg;
    int err;

    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    cfg.cpu_engine = AG_CPU_ENGINE_PERF;
    err = ag_start(&cfg);
    if (err == 0) {
        err = ag_sampling_acquire(AG_MODE_CPU, 250);
    }
    atomic_store(&stop_flag, 0);
    return err;
}

/*
 * A perf thread's kernel locator goes when the thread stops needing it (timer.c): 10 scans with
 * no system call seen and under two intervals of kernel time split off each. Both threads are
 * given the two intervals of kernel time in a scan that arm a locator; the one that makes no
 * calls loses it (each of its signals was a delivery that placed nothing), the one that calls
 * getppid() back to back keeps it for 60 scans and more. With scans every 20 ms the quiet one's
 * goes after 200 ms.
 */
TEST(an_idle_kernel_locator_goes_and_a_calling_thread_keeps_its)
{
    struct locator_thread quiet = { 0, 0 }, calls = { 0, 1 };
    pthread_t tq, tc;
    int i, armed = 0, quiet_gone = 0, calls_kept = 0, calls_retired = 0;
    uint32_t calls_sites = 0;

    if (!perf_allowed()) {
        return;
    }
    ASSERT_OK(locator_session_start());
    ASSERT_OK(pthread_create(&tq, NULL, locator_thread_main, &quiet));
    ASSERT_OK(pthread_create(&tc, NULL, locator_thread_main, &calls));
    for (i = 0; i < 2000 && !(quiet_gone && calls_kept >= 60); i++) {
        struct ag_thread *q, *c;

        usleep(10000);
        drain_into(locator_drain_cb);
        pthread_mutex_lock(&ag.reg_lock);
        q = slot_of(atomic_load(&quiet.tid));
        c = slot_of(atomic_load(&calls.tid));
        if (!armed && q != NULL && c != NULL && q->has_perf && c->has_perf) {
            /* what two intervals of kernel time in a scan do (the handler's split) */
            atomic_fetch_add(&q->kern_w, 2);
            atomic_fetch_add(&c->kern_w, 2);
            armed = 1;
        } else if (armed && q != NULL && c != NULL) {
            quiet_gone |= atomic_load(&q->kern_retired) && !q->has_locator;
            calls_retired |= atomic_load(&c->kern_retired);
            calls_kept = c->has_locator ? calls_kept + 1 : 0;
            calls_sites = atomic_load(&c->kern_sites);
        }
        pthread_mutex_unlock(&ag.reg_lock);
    }
    atomic_store(&stop_flag, 1);
    ASSERT_OK(pthread_join(tq, NULL));
    ASSERT_OK(pthread_join(tc, NULL));
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 250));
    ag_stop();
    printf("# after %d ms: the quiet thread's locator gone %d; the calling thread's kept through "
           "%d looks (%u calls seen), retired %d; %llu retired in all\n",
           i * 10, quiet_gone, calls_kept, calls_sites, calls_retired,
           (unsigned long long)atomic_load(&ag.n_locators_retired));
    ASSERT_EQ(armed, 1);
    ASSERT_EQ(quiet_gone, 1);
    ASSERT_TRUE(calls_kept >= 60);
    ASSERT_EQ(calls_retired, 0);
}

/* A thread of the next test: asleep in a pipe read until told (a byte written). */
static void *
locator_sleeper_main(void *p)
{
    int *fds = p;
    char c;

    atomic_store(&locator_sleeper_tid, (int32_t)syscall(SYS_gettid));
    return read(fds[0], &c, 1) == 1 ? NULL : (void *)1;
}

/*
 * A scan in which a thread had no sample counts neither way for its locator's retirement (timer.c):
 * it did not run. A thread asleep all along keeps the locator armed for it while a busy thread
 * that makes no calls, armed at the same scan, loses its after 10 scans with samples. Before, a
 * scan counted idle whatever the thread did, and a calling thread that a loaded machine kept off
 * its core for 10 scans lost its locator
 * (an_idle_kernel_locator_goes_and_a_calling_thread_keeps_its under TSan at load 17-20, 2 of 15
 * runs); here the sleeper's went with the busy one's.
 */
TEST(a_scan_without_a_sample_does_not_retire_a_locator)
{
    struct locator_thread quiet = { 0, 0 };
    pthread_t tq, ts;
    int fds[2], i, armed = 0, quiet_gone = 0, sleeper_kept = 0;
    /* The busy thread's state at the last look, printed. Two CI runs under TSan saw its locator
     * not go in 20 s (0 retired in all); one by hand under SCHED_FIFO (1 of 60) printed locator 1,
     * idle scans 0, idle cpu 0.0 ms: in its first 0.8 s, 58 of its locator's signals came at
     * TSan's pthread_sigmask, each a call seen (ag_sig_call_seen says why they no longer are), and
     * then its ring was full (locator_drain_cb says what that did). */
    int q_perf = -1, q_locator = -1;
    uint32_t q_idle = 0, q_sites = 0;
    uint64_t q_idle_cpu = 0, q_dropped = 0;

    if (!perf_allowed()) {
        return;
    }
    ASSERT_EQ(pipe(fds), 0);
    atomic_store(&locator_sleeper_tid, 0);
    ASSERT_OK(locator_session_start());
    ASSERT_OK(pthread_create(&tq, NULL, locator_thread_main, &quiet));
    ASSERT_OK(pthread_create(&ts, NULL, locator_sleeper_main, fds));
    for (i = 0; i < 2000 && !quiet_gone; i++) {
        struct ag_thread *q, *z;

        usleep(10000);
        drain_into(locator_drain_cb);
        pthread_mutex_lock(&ag.reg_lock);
        q = slot_of(atomic_load(&quiet.tid));
        z = slot_of(atomic_load(&locator_sleeper_tid));
        if (!armed && q != NULL && z != NULL && q->has_perf && z->has_perf) {
            /* what two intervals of kernel time in a scan do (the handler's split) */
            atomic_fetch_add(&q->kern_w, 2);
            atomic_fetch_add(&z->kern_w, 2);
            armed = 1;
        } else if (armed && q != NULL && z != NULL) {
            quiet_gone = atomic_load(&q->kern_retired) && !q->has_locator;
            sleeper_kept = z->has_locator && !atomic_load(&z->kern_retired);
        }
        if (q != NULL) {
            q_perf = q->has_perf;
            q_locator = q->has_locator;
            q_idle = q->locator_idle;
            q_idle_cpu = q->locator_idle_cpu;
            q_sites = atomic_load(&q->kern_sites);
            q_dropped = atomic_load(&q->dropped);
        }
        pthread_mutex_unlock(&ag.reg_lock);
    }
    atomic_store(&stop_flag, 1);
    ASSERT_EQ(write(fds[1], "x", 1), 1);
    ASSERT_OK(pthread_join(tq, NULL));
    ASSERT_OK(pthread_join(ts, NULL));
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 250));
    ag_stop();
    close(fds[0]);
    close(fds[1]);
    printf("# after %d ms: the busy thread's locator gone %d, the sleeper's kept %d; %llu retired "
           "in all (the busy thread at the last look: perf %d, locator %d, idle scans %u, idle "
           "cpu %.1f ms, calls seen %u, samples dropped %llu)\n",
           i * 10, quiet_gone, sleeper_kept,
           (unsigned long long)atomic_load(&ag.n_locators_retired), q_perf, q_locator,
           (unsigned)q_idle, (double)q_idle_cpu / 1e6, (unsigned)q_sites,
           (unsigned long long)q_dropped);
    ASSERT_EQ(armed, 1);
    ASSERT_EQ(quiet_gone, 1);
    ASSERT_EQ(sleeper_kept, 1);
}

/* The interrupted pc of the last SIGUSR2, for the next test. */
static _Atomic uint64_t mask_signal_pc;

static void
mask_signal_handler(int sig, siginfo_t *si, void *uc)
{
    struct ag_arch_regs regs;

    (void)sig;
    (void)si;
    (void)ag_arch_sig_regs((const ucontext_t *)uc, &regs);
    atomic_store(&mask_signal_pc, regs.pc);
}

/* Sends SIGUSR2 to the calling thread while it has it blocked, and opens the mask with open_by
 * (0: pthread_sigmask, 1: sigprocmask, 2: a raw rt_sigprocmask): the pc the signal came at. */
static uint64_t
mask_signal_opened_by(int open_by)
{
    sigset_t usr2;

    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    ASSERT_OK(pthread_sigmask(SIG_BLOCK, &usr2, NULL));
    atomic_store(&mask_signal_pc, 0);
    ASSERT_EQ(syscall(SYS_tgkill, (long)getpid(), (long)syscall(SYS_gettid), (long)SIGUSR2), 0);
    ASSERT_U64_EQ(atomic_load(&mask_signal_pc), 0); /* pending */
    if (open_by == 0) {
        ASSERT_OK(pthread_sigmask(SIG_UNBLOCK, &usr2, NULL));
    } else if (open_by == 1) {
        ASSERT_EQ(sigprocmask(SIG_UNBLOCK, &usr2, NULL), 0);
    } else {
        ASSERT_EQ(syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &usr2, NULL, (long)(_NSIG / 8)), 0);
    }
    return atomic_load(&mask_signal_pc);
}

/*
 * A signal that came while the thread had it blocked is delivered as the mask opens, at the
 * return of glibc's rt_sigprocmask call: a system call's return, and no call seen for the
 * thread's kernel time (ag_sig_call_seen, sig-handler.c). Any other call's return is one, such as
 * a raw rt_sigprocmask's (the syscall() function).
 */
TEST(a_signal_at_a_masks_opening_is_no_call_seen)
{
    struct sigaction sa;
    uint64_t pc;
    int by;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = mask_signal_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGUSR2, &sa, NULL), 0);
    for (by = 0; by < 3; by++) {
        pc = mask_signal_opened_by(by);
        printf("# opened by %s: pc %#llx, at a call's return %d, a call seen %d\n",
               by == 0   ? "pthread_sigmask"
               : by == 1 ? "sigprocmask"
                         : "a raw rt_sigprocmask",
               (unsigned long long)pc, ag_sig_in_syscall(pc), ag_sig_call_seen(pc));
        ASSERT_TRUE(pc != 0);
        ASSERT_EQ(ag_sig_in_syscall(pc), 1);
        ASSERT_EQ(ag_sig_call_seen(pc), by == 2);
    }
}

/* A thread of the next test: busy with the sampling signal blocked, opening it between bursts. */
static void *
locator_masker_main(void *p)
{
    struct locator_thread *lt = p;
    sigset_t sig;
    int i;

    sigemptyset(&sig);
    sigaddset(&sig, ag.signo);
    atomic_store(&lt->tid, (int32_t)syscall(SYS_gettid));
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        (void)pthread_sigmask(SIG_BLOCK, &sig, NULL);
        for (i = 0; i < lt->calls; i++) {
            busy_a();
        }
        (void)pthread_sigmask(SIG_UNBLOCK, &sig, NULL);
    }
    return NULL;
}

/*
 * A busy thread that blocks the sampling signal around its work has its perf overflows and its
 * locator's signals delivered as it opens the mask, at the return of its pthread_sigmask: no call
 * seen (ag_sig_call_seen), and its locator goes as a thread's that makes no calls. Before, each
 * was a call seen, and it kept its locator: so did a busy thread under ThreadSanitizer, whose
 * runtime runs every handler inside such a block (a_scan_without_a_sample_does_not_retire_a_
 * locator).
 */
TEST(a_thread_that_blocks_the_signal_loses_its_locator)
{
    struct locator_thread masker = { 0, 40 }; /* 40 bursts of busy_a a block: about 1 ms */
    pthread_t tm;
    int i, armed = 0, gone = 0;
    uint32_t sites0 = 0, sites = 0;
    uint64_t cpu0 = 0, cpu = 0;

    if (!perf_allowed()) {
        return;
    }
    ASSERT_OK(locator_session_start());
    ASSERT_OK(pthread_create(&tm, NULL, locator_masker_main, &masker));
    for (i = 0; i < 2000 && !gone; i++) {
        struct ag_thread *m;

        usleep(10000);
        drain_into(locator_drain_cb);
        pthread_mutex_lock(&ag.reg_lock);
        m = slot_of(atomic_load(&masker.tid));
        if (!armed && m != NULL && m->has_perf) {
            atomic_fetch_add(&m->kern_w, 2); /* as the locator tests above */
            sites0 = atomic_load(&m->kern_sites);
            cpu0 = atomic_load(&m->last_cpu_ns);
            armed = 1;
        } else if (armed && m != NULL) {
            gone = atomic_load(&m->kern_retired) && !m->has_locator;
            sites = atomic_load(&m->kern_sites);
            cpu = atomic_load(&m->last_cpu_ns);
        }
        pthread_mutex_unlock(&ag.reg_lock);
    }
    atomic_store(&stop_flag, 1);
    ASSERT_OK(pthread_join(tm, NULL));
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 250));
    ag_stop();
    printf("# after %d ms: the masking thread's locator gone %d; %u calls seen in %.1f ms of its "
           "sampled CPU; %llu retired in all\n",
           i * 10, gone, sites - sites0, (double)(cpu - cpu0) / 1e6,
           (unsigned long long)atomic_load(&ag.n_locators_retired));
    ASSERT_EQ(armed, 1);
    ASSERT_EQ(gone, 1);
}

/*
 * The scan's choice of a locator (ag_locator_wanted, timer.c): two intervals of kernel time in a
 * scan arm one for a thread that never had one; for one whose locator went idle they must be a
 * quarter of its CPU in the scan, or come with a call seen. A busy thread that makes no calls
 * splits off a few per cent (its own signals' delivery), and its locator placed nothing.
 */
TEST(a_retired_locator_comes_back_for_calls_or_a_quarter_of_the_cpu)
{
    uint64_t period = 4000000, scan = 100000000; /* 250 Hz, a 100 ms scan busy throughout */

    ASSERT_EQ(ag_locator_wanted(0, 1, 5, scan, period), 0);
    ASSERT_EQ(ag_locator_wanted(0, 2, 0, scan, period), 1);
    ASSERT_EQ(ag_locator_wanted(1, 2, 0, scan, period), 0); /* 8 % of its CPU, no call: noise */
    ASSERT_EQ(ag_locator_wanted(1, 5, 0, scan, period), 0);
    ASSERT_EQ(ag_locator_wanted(1, 7, 0, scan, period), 1);    /* 28 %: long calls */
    ASSERT_EQ(ag_locator_wanted(1, 2, 1, scan, period), 1);    /* a call seen at its return */
    ASSERT_EQ(ag_locator_wanted(1, 2, 0, 8000000, period), 1); /* all of a short scan's CPU */
    ASSERT_EQ(ag_locator_wanted(1, 1, 3, scan, period), 0);
}

/*
 * The scan's window for a perf-ring thread no ring sample showed at a call's return
 * (ag_ring_locator_wanted, timer.c): 8 intervals of kernel time judged against the CPU they came
 * in, a fifth or more arms a locator; the window then begins again. A thread that makes no calls
 * (a few per cent, one scan of a starved one a quarter of its little CPU) gets none.
 */
TEST(a_ring_thread_gets_a_locator_for_a_window_of_kernel_time)
{
    uint64_t period = 4000000, cpu = 0; /* 250 Hz */
    uint32_t w = 0;
    int i, armed = 0;

    /* the I/O-like thread beside busy loops: 1 interval in 3 of its CPU, few a scan */
    for (i = 0; i < 7; i++) {
        ASSERT_EQ(ag_ring_locator_wanted(&w, &cpu, 1, 3 * period, period), 0);
    }
    ASSERT_EQ(ag_ring_locator_wanted(&w, &cpu, 1, 3 * period, period), 1);
    ASSERT_TRUE(w == 0 && cpu == 0); /* begun again */
    /* exactly a fifth */
    ASSERT_EQ(ag_ring_locator_wanted(&w, &cpu, 8, 40 * period, period), 1);
    ASSERT_EQ(ag_ring_locator_wanted(&w, &cpu, 8, 40 * period + 1, period), 0);
    /* a starved worker that makes no calls: 2 of 8 in one scan, then 3 % */
    ASSERT_EQ(ag_ring_locator_wanted(&w, &cpu, 2, 8 * period, period), 0);
    for (i = 0; i < 100 && !armed; i++) {
        armed = ag_ring_locator_wanted(&w, &cpu, (i % 4) == 0, 8 * period, period);
    }
    ASSERT_EQ(armed, 0);
    ASSERT_TRUE(w != 0 && w < 8); /* judged (at 26 of its 8-interval scans), begun again */
}

/* A perf-ring thread's calls, each about 2 ms in the kernel (1 MiB of getrandom(2)), between
 * 2 ms of arithmetic (ring_calls_main below). */
EXPORT void random_reader(char *buf, size_t len);

EXPORT void
random_reader(char *buf, size_t len)
{
    (void)getrandom(buf, len, 0);
    __asm__ volatile("" ::: "memory");
}

struct ring_calls_arg {
    _Atomic int32_t tid;
    _Atomic uint64_t cpu_calls; /* CPU in random_reader */
    uint64_t cpu_end;
};

static void *
ring_calls_main(void *p)
{
    static char buf[1u << 20];
    struct ring_calls_arg *a = p;
    uint64_t c, in = 0;

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    while (cpu_ns() < 800000000u) {
        for (c = cpu_ns(); cpu_ns() - c < 2000000u;) {
            busy_b();
        }
        c = cpu_ns();
        random_reader(buf, sizeof(buf));
        in += cpu_ns() - c;
    }
    atomic_store(&a->cpu_calls, in);
    a->cpu_end = cpu_ns();
    return NULL;
}

/*
 * A perf-ring thread whose calls are long (2 ms each in the kernel) shows few of them at their
 * return: an overflow comes there only when it was due in the call's exit path. Its first such
 * sample asked for its locator; without one the thread had none, and its kernel time went as not
 * placed over the next sample's stack (pp-sample-syscalls' I/O-like thread beside busy loops, in
 * 9 recordings of 16). The scan's window (above) arms it: at 100 Hz, half its 0.8 s in the calls,
 * most of that time must stand under random_reader.
 */
TEST(a_ring_thread_with_long_calls_gets_a_locator_and_its_kernel_time_placed)
{
    struct ring_calls_arg a = { 0, 0, 0 };
    struct ag_config cfg;
    struct ag_stats st;
    struct tid_stats *t;
    uint64_t unplaced0;
    pthread_t th;
    double calls;

#ifdef __SANITIZE_THREAD__
    test_skip("ThreadSanitizer delivers the locator's signal away from the call's return");
#endif
    if (!perf_allowed()) {
        return;
    }
    memset(col, 0, sizeof(col));
    want[0] = (const void *)random_reader;
    want[1] = NULL;
    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    cfg.cpu_engine = AG_CPU_ENGINE_PERF_RING;
    ASSERT_OK(ag_start(&cfg));
    ag_stats_get(&st);
    unplaced0 = st.cpu_kernel_unplaced_ns;
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 100));
    ASSERT_OK(pthread_create(&th, NULL, ring_calls_main, &a));
    ASSERT_OK(pthread_join(th, NULL));
    t = col_drain_until_stopped(atomic_load(&a.tid));
    ag_stats_get(&st);
    calls = (double)atomic_load(&a.cpu_calls) / 10000000.0;
    printf("# long calls: %.1f intervals in random_reader, %llu of weight under it; kernel time "
           "%llu intervals, %.1f not placed; %u samples, weights %llu\n",
           calls, (unsigned long long)t->hit_weight[0], (unsigned long long)t->kernel_weight,
           (double)(st.cpu_kernel_unplaced_ns - unplaced0) / 10000000.0, t->cpu_signal_samples,
           (unsigned long long)t->weight_sum);
    ASSERT_TRUE(t->stopped == 1);
    ASSERT_TRUE(calls >= 20.0); /* (it made its calls) */
    ASSERT_TRUE((double)t->hit_weight[0] >= calls / 2.0);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 100));
    ag_stop();
}

/*
 * Kernel time split off perf samples goes under a system call the thread was seen in. A perf
 * overflow due in a call's exit path (interrupts off until the return) comes in user mode at the
 * instruction after the call, its stack the call's: such a sample is a call seen, as the kernel
 * locator's are, which matters for a bursty thread whose calls fall between the ticks that time
 * the locator. Here the thread gets no locator at all (the handler takes it as armed, and no
 * scan runs): its kernel time must still be placed under its calls.
 */
TEST(a_perf_sample_at_a_call_return_places_kernel_time)
{
    _Atomic int32_t tid = 0;
    struct ag_config cfg;
    struct ag_thread *t;
    pthread_t th;
    int i, armed = 0;

#ifdef __SANITIZE_THREAD__
    /* ThreadSanitizer runs the handler at its next interceptor, not where the overflow came: no
     * sample stands at a call's return there. */
    test_skip("ThreadSanitizer delivers the signal away from the call's return");
#endif
    if (!perf_allowed()) {
        return;
    }
    sampling_config_init(&cfg);
    cfg.scan_ms = 3600000; /* no scan arms a locator, however slow the machine */
    cfg.cpu_engine = AG_CPU_ENGINE_PERF;
    ASSERT_OK(ag_start(&cfg));
    kern_at_call_w = kern_unplaced_w = 0;
    ASSERT_OK(pthread_create(&th, NULL, writer_main, &tid));
    while (atomic_load(&tid) == 0) {
        usleep(1000);
    }
    pthread_mutex_lock(&ag.reg_lock);
    t = slot_of(atomic_load(&tid));
    if (t != NULL) {
        /* No locator for it: the handler takes it as armed (and asks for none), no scan runs. */
        atomic_store(&t->kern_locating, 1);
        armed = 1;
    }
    pthread_mutex_unlock(&ag.reg_lock);
    ASSERT_TRUE(armed);
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 1000));
    armed = 0;
    for (i = 0; i < 4000 && pthread_tryjoin_np(th, NULL) != 0; i++) {
        usleep(10000);
        ASSERT_TRUE(ag_drain(kern_cb, NULL) >= 0);
        pthread_mutex_lock(&ag.reg_lock);
        t = slot_of(atomic_load(&tid));
        armed |= t != NULL && t->has_locator;
        pthread_mutex_unlock(&ag.reg_lock);
    }
    ag_cpu_flush();
    ASSERT_TRUE(ag_drain(kern_cb, NULL) >= 0);
    printf("# kernel time under a call %llu intervals, not placed %llu; locator %d\n",
           (unsigned long long)kern_at_call_w, (unsigned long long)kern_unplaced_w, armed);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 1000));
    ag_stop();
    ASSERT_TRUE(!armed);
    ASSERT_TRUE(kern_at_call_w + kern_unplaced_w >= 50); /* 400 ms, most of it in write(2) */
    /* At least a third placed under a call. Without call-return samples taken as calls
     * (the locator the only source), 0 to 7 intervals went under a call and 190 to 200 were not
     * placed. With them, such samples come 20 to 105 ms of the thread's CPU apart, not every few
     * ms, and kernel time between two further apart than AG_KERNEL_SITE_CPU_NS waits in vain and
     * is not placed: at 50 ms, over 36 runs on a quiet machine 92 to 185 went under a call and 0
     * to 92 were not placed (a fresh-clone CI run read 118 against 72); at 200 ms, 30 runs at
     * a load of 10 to 34, 170 to 223 under a call and 0 to 10 not placed (95 % placed at the
     * least), and 20 ASan runs beside the whole suite (load 25-29) 83 to 97 %. With the 50 ms
     * window this bound fails now and then (68 to 99 % placed in the first runs), not always:
     * the test holds the mechanism, the window's figures are in docs/performance.md. Two thirds
     * were asked until a run beside the whole suite at a heavy load placed 88 and left 94 (48 %):
     * a third still fails the mechanism's absence (at most 4 %) by far. */
    ASSERT_TRUE(3 * kern_at_call_w >= kern_at_call_w + kern_unplaced_w);
}

/* /dev/zero opened for reading into buf, whose len bytes are written first: their pages faulted in
 * before, so the reads take no fault. Returns the fd, or -1 (the caller then skips its reads). */
static int
zero_reader_open(char *buf, size_t len)
{
    memset(buf, 1, len);
    return open("/dev/zero", O_RDONLY);
}

/* read(2) by its system call, not libc's wrapper: a sanitizer's interceptor around read() is user
 * code of its own (ASan checks the shadow of each 1 MiB read: 3 of 8 intervals of a read loop
 * went to user code in a CI run), where a test of kernel time needs the call's time in the
 * kernel. */
static ssize_t
zero_read_raw(int fd, char *buf, size_t len)
{
    return (ssize_t)syscall(SYS_read, fd, buf, len);
}

/* busy_a for 50 ms of CPU, then read(2) calls of 1 MiB from /dev/zero for 80 ms (kernel time all
 * but the loop's few instructions), then it exits. */
struct tail_kernel_arg {
    _Atomic int32_t tid;
    _Atomic uint64_t cpu_a, cpu_read;
};

static void *
tail_kernel_main(void *p)
{
    static char buf[1u << 20];
    struct tail_kernel_arg *a = p;
    int fd = zero_reader_open(buf, sizeof(buf));
    uint64_t c0, c1;

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    c0 = cpu_ns();
    while (cpu_ns() - c0 < 50000000u) {
        busy_a();
    }
    c1 = cpu_ns();
    atomic_store(&a->cpu_a, c1 - c0);
    while (fd >= 0 && cpu_ns() - c1 < 80000000u) {
        if (zero_read_raw(fd, buf, sizeof(buf)) < 0) {
            break;
        }
    }
    atomic_store(&a->cpu_read, cpu_ns() - c1);
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}

/*
 * A perf thread's final sample: the CPU since its last perf sample passed each of its
 * intervals in the kernel (an overflow there is skipped), so all of it but the last interval is
 * kernel time, placed as a perf sample's split is, and not given to the stack of the thread's
 * last sample, which perf puts in user code. Here the thread ends with 80 ms of read(2) calls
 * after 50 ms of busy_a at 100 Hz: its user-code weight must be busy_a's 5 intervals, not 13.
 * (Before, the I/O-like thread of pp-sample-syscalls gave its last write calls' kernel time to
 * its parser this way: 0.4 to 0.6 points of a loaded pool, docs/performance.md.) A perf sample
 * taken at a read's return (an overflow due in its exit path, about one in a hundred here)
 * would have its stack under [kernel], and the test would pass without the split too.
 */
TEST(a_perf_threads_final_sample_gives_its_kernel_time_to_no_user_code)
{
    struct tail_kernel_arg a = { 0, 0, 0 };
    uint64_t period = 10000000u, user;
    struct ag_config cfg;
    struct tid_stats *st;
    pthread_t th;
    int i;

#ifdef __SANITIZE_THREAD__
    /* Its interceptors around each read(2) and clock read are user time of their own, where
     * the overflows land (12 intervals of user code in 14 in one run): no span of kernel time. */
    test_skip("ThreadSanitizer's interceptors make the read loop's user time");
#endif
    if (!perf_allowed()) {
        return;
    }
    memset(col, 0, sizeof(col));
    sampling_config_init(&cfg);
    cfg.scan_ms = 20;
    cfg.cpu_engine = AG_CPU_ENGINE_PERF;
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 100));
    ASSERT_OK(pthread_create(&th, NULL, tail_kernel_main, &a));
    ASSERT_OK(pthread_join(th, NULL));
    st = col_get(atomic_load(&a.tid));
    for (i = 0; i < 400 && !st->stopped; i++) {
        col_drain();
        usleep(10000);
    }
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 100));
    ag_stop();
    user = st->weight_sum - st->kernel_leaf_weight;
    printf("# busy_a %.1f intervals, read(2) %.1f; weight %llu: user code %llu, kernel %llu "
           "(split off %llu); final samples %u of weight %llu\n",
           (double)atomic_load(&a.cpu_a) / (double)period,
           (double)atomic_load(&a.cpu_read) / (double)period, (unsigned long long)st->weight_sum,
           (unsigned long long)user, (unsigned long long)st->kernel_leaf_weight,
           (unsigned long long)st->kernel_weight, st->tails, (unsigned long long)st->tail_weight);
    ASSERT_TRUE(st->stopped == 1);
    ASSERT_TRUE((double)st->weight_sum >=
                (double)(atomic_load(&a.cpu_a) + atomic_load(&a.cpu_read)) / (double)period - 2.0);
    /* busy_a's own, its clock reads' kernel time and the final sample's last interval at most */
    ASSERT_TRUE((double)user <= (double)atomic_load(&a.cpu_a) / (double)period + 2.0);
}

/* read(2) calls of len bytes from fd for ns of the thread's CPU: two callers, two stacks. */
EXPORT void
reader_a(int fd, char *buf, size_t len, uint64_t ns)
{
    uint64_t c = cpu_ns();

    while (cpu_ns() - c < ns && read(fd, buf, len) >= 0) {
    }
    __asm__ volatile("" ::: "memory");
}

EXPORT void
reader_b(int fd, char *buf, size_t len, uint64_t ns)
{
    uint64_t c = cpu_ns();

    while (cpu_ns() - c < ns && read(fd, buf, len) >= 0) {
    }
    __asm__ volatile("nop" ::: "memory");
}

struct share_arg {
    _Atomic int32_t tid;
    _Atomic int go;
    _Atomic uint64_t cpu_a, cpu_b;
    unsigned pages; /* fresh pages touched halfway through reader_a's reads (page faults) */
};

/* n fresh anonymous pages written once each: n page faults, a few us of kernel time. */
static void
touch_fresh_pages(unsigned n)
{
    long page = sysconf(_SC_PAGESIZE);
    char *p = n != 0 ? mmap(NULL, (size_t)n * (size_t)page, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                     : MAP_FAILED;
    unsigned i;

    if (p == MAP_FAILED) {
        return;
    }
    for (i = 0; i < n; i++) {
        ((volatile char *)p)[(size_t)i * (size_t)page] = 1;
    }
    munmap(p, (size_t)n * (size_t)page);
}

/* Asleep until go; busy_a 30 ms, 80 ms of 1 MiB reads of /dev/zero in reader_a, 20 ms in
 * reader_b, busy_b 30 ms. */
static void *
share_main(void *p)
{
    static char buf[1u << 20];
    struct share_arg *a = p;
    int fd = zero_reader_open(buf, sizeof(buf));
    uint64_t c;

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    while (!atomic_load(&a->go)) {
        usleep(1000);
    }
    for (c = cpu_ns(); cpu_ns() - c < 30000000u;) {
        busy_a();
    }
    c = cpu_ns();
    if (a->pages != 0) {
        reader_a(fd, buf, sizeof(buf), 40000000u);
        touch_fresh_pages(a->pages);
        reader_a(fd, buf, sizeof(buf), 40000000u);
    } else {
        reader_a(fd, buf, sizeof(buf), 80000000u);
    }
    atomic_store(&a->cpu_a, cpu_ns() - c);
    c = cpu_ns();
    reader_b(fd, buf, sizeof(buf), 20000000u);
    atomic_store(&a->cpu_b, cpu_ns() - c);
    for (c = cpu_ns(); cpu_ns() - c < 30000000u;) {
        busy_b();
    }
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}

/*
 * The kernel time split off a perf sample is shared among the calls the thread was seen in since
 * its previous sample, by how often each was seen, not given to the latest alone. Here a perf
 * thread at 100 Hz with its locator armed spends 80 ms in reader_a's reads and then 20 ms in
 * reader_b's before busy_b: no user-mode overflow falls in the reads (one at a read's return
 * would split the span there, which changes nothing here), so busy_b's first sample splits off
 * about 10 intervals, seen about 8 times in reader_a and 2 in reader_b. Under the latest call
 * alone, reader_b took all 10 (on a loaded machine: a starved thread's long span, given to the
 * close(2) it made at its end, docs/performance.md).
 */
/* One run of share_main (engine, perf or perf-ring, at 100 Hz, its locator armed by hand): its
 * weights under reader_a and reader_b (w[0], w[1]) and its kernel time not placed, in intervals,
 * with the CPU each reader burned. Returns whether the locator was armed. */
static int
share_case(enum ag_cpu_engine engine, unsigned pages, uint64_t w[2], double *unplaced,
           double cpu[2])
{
    struct share_arg a = { 0, 0, 0, 0, pages };
    struct ag_stats stats;
    uint64_t period = 10000000u, unplaced0;
    struct ag_config cfg;
    struct ag_thread *t;
    struct tid_stats *st;
    pthread_t th;
    int32_t tid;
    int i, armed = 0;

    memset(col, 0, sizeof(col));
    want[0] = (const void *)reader_a;
    want[1] = (const void *)reader_b;
    sampling_config_init(&cfg);
    cfg.scan_ms = 3600000; /* the test arms the locator */
    cfg.cpu_engine = engine;
    ASSERT_OK(ag_start(&cfg));
    ag_stats_get(&stats); /* (counted since the process started) */
    unplaced0 = stats.cpu_kernel_unplaced_ns;
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 100));
    ASSERT_OK(pthread_create(&th, NULL, share_main, &a));
    while ((tid = atomic_load(&a.tid)) == 0) {
        usleep(1000);
    }
    pthread_mutex_lock(&ag.reg_lock);
    t = slot_of(tid);
    if (t != NULL && (t->has_perf || atomic_load(&t->has_ring))) {
        atomic_store(&t->kern_asked, 1);
        ag_locators_arm_asked_locked();
        armed = t->has_locator;
    }
    pthread_mutex_unlock(&ag.reg_lock);
    atomic_store(&a.go, 1);
    ASSERT_OK(pthread_join(th, NULL));
    st = col_get(tid);
    for (i = 0; i < 400 && !st->stopped; i++) {
        col_drain();
        usleep(10000);
    }
    ag_stats_get(&stats);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 100));
    ag_stop();
    ASSERT_TRUE(st->stopped == 1);
    w[0] = st->hit_weight[0];
    w[1] = st->hit_weight[1];
    *unplaced = (double)(stats.cpu_kernel_unplaced_ns - unplaced0) / (double)period;
    cpu[0] = (double)atomic_load(&a.cpu_a) / (double)period;
    cpu[1] = (double)atomic_load(&a.cpu_b) / (double)period;
    printf("# locator %d; reader_a %.1f intervals, weight %llu; reader_b %.1f, weight %llu; not "
           "placed %.1f\n",
           armed, cpu[0], (unsigned long long)w[0], cpu[1], (unsigned long long)w[1], *unplaced);
    return armed;
}

/*
 * The kernel time split off a perf sample is shared among the calls the thread was seen in since
 * its previous sample, by how often each was seen, not given to the latest alone. Here a perf
 * thread at 100 Hz with its locator armed spends 80 ms in reader_a's reads and then 20 ms in
 * reader_b's before busy_b: no user-mode overflow falls in the reads (one at a read's return
 * would split the span there, which changes nothing here), so busy_b's first sample splits off
 * about 10 intervals, seen about 8 times in reader_a and 2 in reader_b: 8 and 2 in 8 of 8 runs.
 * Under the latest call alone, reader_b took all 10 (on a loaded machine: a starved thread's
 * long span, given to the close(2) it made at its end, docs/performance.md). Of a span the
 * handler saw take page faults, their bound is not placed (the case below); before, none of it
 * was (1 run in 5 or so here, 6 to 10 intervals, and most runs under ASan, whose read(2)
 * interceptor takes faults of its own). A run with 3 or more not placed says nothing of the
 * sharing, and the case runs again, up to 4 times. So does a run whose
 * placed weight falls short of the reads' CPU by 3 intervals or more: under ASan beside a
 * fresh-clone CI run's other tests (load 5 to 6) one placed 5 + 1 of 8 + 2 intervals, none counted
 * as not placed (not explained; a run that places the reads' time under the two calls is what
 * the case holds).
 */
/* The case below for engine (perf or perf-ring), pages fresh pages touched halfway through
 * reader_a's reads, fewer than max_unplaced intervals not placed. */
static void
share_test(enum ag_cpu_engine engine, unsigned pages, double max_unplaced)
{
    uint64_t w[2] = { 0, 0 };
    double unplaced = 0, cpu[2] = { 0, 0 };
    int runs;

#ifdef __SANITIZE_THREAD__
    test_skip("ThreadSanitizer delivers the locator's signal away from the call's return");
#endif
    if (!perf_allowed()) {
        return;
    }
    for (runs = 0; runs < 4; runs++) {
        ASSERT_TRUE(share_case(engine, pages, w, &unplaced, cpu));
        if (unplaced < max_unplaced && (double)(w[0] + w[1]) >= cpu[0] + cpu[1] - 3.0) {
            break;
        }
    }
    ASSERT_TRUE(unplaced < max_unplaced);
    ASSERT_TRUE((double)(w[0] + w[1]) >= cpu[0] + cpu[1] - 3.0);
    /* Not all to the latest call. The locator is the tick's: on a loaded machine it misses
     * more of a thread's calls, and one run beside the whole suite and two busy loops (load
     * 21) read 3 and 7; quiet, 8 and 2 in 8 runs of 8. */
    ASSERT_TRUE(w[0] >= 2);
}

TEST(kernel_time_is_shared_among_the_calls_seen_in_its_span)
{
    share_test(AG_CPU_ENGINE_PERF, 0, 3.0);
}

/*
 * A span that took a few page faults: each is taken to cost at most AG_FAULT_BOUND_NS (2 ms),
 * and only that much of its kernel time goes as not placed; the rest is shared among the calls
 * as above. Here 8 fresh pages are written halfway through reader_a's 80 ms of reads: 16 ms, 2
 * intervals at 100 Hz (at most one more for the handler's own ring faults, and for the
 * interceptor's under ASan). Before, all of the span's 8 to 10 intervals went as not placed (and
 * the case above, whose thread takes 1 to 5 faults of its own in its reads under ASan, failed a
 * fresh-clone CI run's ASan stage with 4 to 8 intervals not placed in each of its 4 runs).
 */
TEST(kernel_time_of_a_span_with_a_few_page_faults_is_placed_but_for_their_bound)
{
    share_test(AG_CPU_ENGINE_PERF, 8, 4.0);
}

TEST(perf_ring_kernel_time_of_a_span_with_a_few_page_faults_is_placed_but_for_their_bound)
{
    share_test(AG_CPU_ENGINE_PERF_RING, 8, 4.0);
}

/* The same under perf-ring: the split is the ring reader's (on the manager, up to 100 ms after
 * the sample), the locator's records are the thread's own, in its own ring, written in real time;
 * the drain meets them with the samples by time (drain.c, ag_drain_cpu). On main, where perf-ring
 * split nothing off, no weight stood under either reader. */
TEST(perf_ring_kernel_time_is_shared_among_the_calls_seen_in_its_span)
{
    share_test(AG_CPU_ENGINE_PERF_RING, 0, 3.0);
}

/* ---- the drain's merge of a perf-ring thread's two rings, at its hold ---- */

static _Atomic int32_t merge_tid;
static _Atomic int merge_done;

static void *
merge_idle(void *arg)
{
    (void)arg;
    atomic_store(&merge_tid, (int32_t)syscall(SYS_gettid));
    while (!atomic_load(&merge_done)) {
        usleep(1000);
    }
    return NULL;
}

/* Two calls' stacks (their leaves: code of this file, in the code map). */
static void
merge_call_a(void)
{
}

static void
merge_call_b(void)
{
}

/* The kernel time the drain placed under each call: [0] merge_call_a, [1] merge_call_b; and not
 * placed. */
static uint64_t merge_under[2], merge_unplaced;

static int
merge_cb(const struct ag_record *rec, void *ctx)
{
    const struct ag_sample *s = rec->u.sample;

    (void)ctx;
    if (rec->kind == AG_RECORD_SAMPLE && rec->tid == atomic_load(&merge_tid) &&
        s->source == AG_SOURCE_KERNEL && s->weight != 0 && s->depth != 0) {
        merge_under[0] += s->frames[0] == (uint64_t)(uintptr_t)merge_call_a ? s->weight : 0;
        merge_under[1] += s->frames[0] == (uint64_t)(uintptr_t)merge_call_b ? s->weight : 0;
        merge_unplaced += s->frames[0] == ag_kernel_unplaced_pc() ? s->weight : 0;
    }
    return 0;
}

/* A CPU record of tid at ts into r by engine, standing for w intervals of 1 ms: frames f (n of
 * them), its walk's end. */
static void
ring_put(struct ag_ring *r, int32_t tid, uint64_t ts, uint8_t source, uint8_t engine, uint16_t w,
         const uint64_t *f, uint32_t n, uint8_t end)
{
    struct ag_sample *s = ag_ring_reserve(r);

    ASSERT_TRUE(s != NULL);
    s->timestamp_ns = ts;
    s->cpu_time_ns = 1000000000u + ts % 1000000u;
    s->tid = tid;
    s->mode = AG_MODE_CPU;
    s->state = AG_STATE_RUNNING;
    s->source = source;
    s->engine = engine;
    s->weight = w;
    s->cpu_delta_ns = (uint64_t)w * 1000000u;
    memcpy(s->frames, f, n * sizeof(uint64_t));
    s->depth = n;
    s->unwinder = n > 1 ? AG_UNWINDER_CFI : AG_UNWINDER_NONE;
    s->end = end;
    ag_ring_commit(r);
}

/* A perf-ring record of tid at ts into r: a locator's (weight 0, under the call at leaf), a
 * split-off one (weight w, no stack) or a sample (weight w, at leaf). */
static void
merge_put(struct ag_ring *r, int32_t tid, uint64_t ts, uint8_t source, uint16_t w, uint64_t leaf)
{
    ring_put(r, tid, ts, source, AG_CPU_ENGINE_PERF_RING, w, &leaf, leaf != 0,
             AG_UNWIND_END_LEAF_ONLY);
}

/* Sets t's pending final sample by hand: one part of kind at ts, w intervals of 1 ms up to CPU
 * time cpu, kern_w of them in the kernel. reg_lock held. */
static void
tail_set(struct ag_thread *t, uint64_t ts, uint64_t cpu, uint32_t w, uint32_t kern_w,
         uint8_t engine, enum ag_tail_kind kind)
{
    t->tail.part[0] = (struct ag_tail_part){ .ts = ts,
                                             .cpu_time_ns = cpu,
                                             .cpu_ns = (uint64_t)w * 1000000u,
                                             .kern_ns = (uint64_t)kern_w * 1000000u,
                                             .weight = w,
                                             .kern_w = kern_w,
                                             .engine = engine,
                                             .kind = (uint8_t)kind };
    t->tail.n = 1;
}

/* The start of the merge cases: an idle thread registered as a perf-ring thread whose kernel ring
 * the drain does not read (no mapping), the drain's hold at *h, its own ring holding call a's
 * record before the hold and call b's after it. Returns it with reg_lock held (NULL: failed). */
static struct ag_thread *
merge_start(pthread_t *th, uint64_t *h)
{
    struct ag_config cfg;
    struct ag_thread *t;
    int32_t tid;

    atomic_store(&merge_done, 0);
    atomic_store(&merge_tid, 0);
    if (pthread_create(th, NULL, merge_idle, NULL) != 0) {
        return NULL;
    }
    while ((tid = atomic_load(&merge_tid)) == 0) {
        usleep(1000);
    }
    sampling_config_init(&cfg);
    if (ag_start(&cfg) != 0) {
        return NULL;
    }
    merge_under[0] = merge_under[1] = merge_unplaced = 0;
    pthread_mutex_lock(&ag.reg_lock);
    t = ag_thread_register_locked(tid, 0, NULL);
    if (t == NULL || (t->pring.slots == NULL &&
                      ag_ring_init(&t->pring, ag.cfg.ring_slots, ag.cfg.max_frames) != 0)) {
        pthread_mutex_unlock(&ag.reg_lock);
        return NULL;
    }
    *h = ag_now_ns();
    t->ring_fd = -1;
    t->ring_base = NULL;
    atomic_store(&t->pring_horizon, *h);
    atomic_store(&t->has_ring, 1);
    merge_put(&t->ring, tid, *h - 1000, AG_SOURCE_KERNEL, 0, (uint64_t)(uintptr_t)merge_call_a);
    merge_put(&t->ring, tid, *h + 1000, AG_SOURCE_KERNEL, 0, (uint64_t)(uintptr_t)merge_call_b);
    return t;
}

/* The end of the merge cases: a second drain, its horizon past every record, then the thread let
 * go. */
static void
merge_end(struct ag_thread *t, pthread_t th, uint64_t h)
{
    atomic_store(&t->pring_horizon, h + 1000000000u);
    ASSERT_TRUE(ag_drain(merge_cb, NULL) >= 0);
    printf("# under call a %llu intervals, under call b %llu, not placed %llu\n",
           (unsigned long long)merge_under[0], (unsigned long long)merge_under[1],
           (unsigned long long)merge_unplaced);
    pthread_mutex_lock(&ag.reg_lock);
    atomic_store(&t->has_ring, 0);
    pthread_mutex_unlock(&ag.reg_lock);
    atomic_store(&merge_done, 1);
    pthread_join(th, NULL);
    ag_stop();
}

/* merge_end, and one interval under each call wanted. */
static void
merge_finish(struct ag_thread *t, pthread_t th, uint64_t h)
{
    merge_end(t, th, h);
    ASSERT_EQ(merge_under[0], 1);
    ASSERT_EQ(merge_under[1], 1);
}

/*
 * A perf-ring thread's locator records after the hold (pring_horizon) wait for the next drain, as
 * a perf sample stamped before them may not have been read yet; a perf sample read already but
 * stamped after such a record must wait with it, or the call is counted in the span after its
 * own. Built by hand (no perf event): the thread's own ring holds calls a (before the hold) and b
 * (after it), its pring a split of 2 intervals and its sample, after b. Both calls were seen in
 * the split's span: one interval under each. Before, the drain passed b's record over for the
 * split, which went all to a (2 and 0), and b was counted in the next span.
 */
TEST(perf_ring_drain_keeps_time_order_at_its_hold)
{
    pthread_t th;
    uint64_t h;
    struct ag_thread *t = merge_start(&th, &h);

    ASSERT_TRUE(t != NULL);
    merge_put(&t->pring, atomic_load(&merge_tid), h + 1500, AG_SOURCE_KERNEL, 2, 0);
    merge_put(&t->pring, atomic_load(&merge_tid), h + 2000, AG_SOURCE_SIGNAL, 1,
              (uint64_t)(uintptr_t)merge_idle);
    pthread_mutex_unlock(&ag.reg_lock);
    ASSERT_TRUE(ag_drain(merge_cb, NULL) >= 0);
    merge_finish(t, th, h);
}

/*
 * The same for a final sample claimed after the hold (under perf-ring outside a flush: at a change
 * of rate): its kernel time is shared among the calls seen since the last sample, so it waits for
 * the records stamped before its claim. Call a before the hold, call b after it, the claim after
 * b with 2 intervals of kernel time: 1 under each. Before, the claim went in the first drain, all
 * to a (2 and 0), and b was counted after it.
 */
TEST(perf_ring_drain_holds_a_final_sample_claimed_after_its_hold)
{
    pthread_t th;
    uint64_t h;
    struct ag_thread *t = merge_start(&th, &h);

    ASSERT_TRUE(t != NULL);
    /* the final sample: 3 intervals of 1 ms, 2 of them in the kernel */
    tail_set(t, h + 1500, 2000000000u, 3, 2, AG_CPU_ENGINE_PERF_RING, AG_TAIL_OWN);
    pthread_mutex_unlock(&ag.reg_lock);
    ASSERT_TRUE(ag_drain(merge_cb, NULL) >= 0);
    merge_finish(t, th, h);
}

/* The [not sampled] claim the drain delivered for merge_tid: its depth and the frame above the
 * marker (0: none). */
static uint32_t claim_depth;
static uint64_t claim_above;

static int
claim_cb(const struct ag_record *rec, void *ctx)
{
    const struct ag_sample *s = rec->u.sample;

    (void)ctx;
    if (rec->kind == AG_RECORD_SAMPLE && rec->tid == atomic_load(&merge_tid) &&
        s->source == AG_SOURCE_TAIL && s->depth != 0 && s->frames[0] == ag_not_sampled_pc()) {
        claim_depth = s->depth;
        claim_above = s->depth > 1 ? s->frames[1] : 0;
    }
    return 0;
}

/* Starts the agent beside an idle thread (merge_idle, *th) once the C library's module is known to
 * the drain (the manager's first module list), and fills whole with a stack of that thread that
 * reached its root: merge_call_b under its start routine under two frames of the C library.
 * Returns the thread's tid. */
static int32_t
claim_start(pthread_t *th, uint64_t whole[4])
{
    struct ag_config cfg;
    int32_t tid;
    int i;

    atomic_store(&merge_done, 0);
    atomic_store(&merge_tid, 0);
    ASSERT_OK(pthread_create(th, NULL, merge_idle, NULL));
    while ((tid = atomic_load(&merge_tid)) == 0) {
        usleep(1000);
    }
    sampling_config_init(&cfg);
    ASSERT_OK(ag_start(&cfg));
    for (i = 0; i < 500 && ag_sig_module_find((uint64_t)(uintptr_t)getpid) == NULL; i++) {
        usleep(10000);
    }
    ASSERT_TRUE(ag_sig_module_find((uint64_t)(uintptr_t)getpid) != NULL);
    whole[0] = (uint64_t)(uintptr_t)merge_call_b;
    whole[1] = (uint64_t)(uintptr_t)merge_idle + 1u; /* return addresses: in their callers */
    whole[2] = (uint64_t)(uintptr_t)getpid + 1u;
    whole[3] = (uint64_t)(uintptr_t)getppid + 1u;
    return tid;
}

/*
 * issue 19: a [not sampled] claim stands over its thread's root, which the drain finds in the
 * thread's stacks. A thread found by the /proc scan early in a process has its first stacks cut
 * (libc's table still pending) and its claims came before any stack reached the root: they stood
 * alone, the marker without the thread (test-agent-sampling's scan-root case forgets them). Now
 * the drain looks ahead in the ring for the thread's first stack that reached its root. Built by
 * hand: a cut stack, the claim, a stack that reached its root (the start routine under two frames
 * of the C library). Before: the claim of depth 1.
 */
TEST(a_not_sampled_claim_after_a_cut_stack_finds_its_root_further_on)
{
    uint64_t cut[1], whole[4], now;
    struct ag_thread *t;
    pthread_t th;
    int32_t tid;

    tid = claim_start(&th, whole);
    cut[0] = (uint64_t)(uintptr_t)merge_call_a;
    claim_depth = 0;
    claim_above = 0;
    pthread_mutex_lock(&ag.reg_lock);
    t = ag_thread_register_locked(tid, 0, NULL);
    ASSERT_TRUE(t != NULL);
    now = ag_now_ns() - 1000000u;
    ring_put(&t->ring, tid, now - 3000, AG_SOURCE_SIGNAL, AG_CPU_ENGINE_TIMER, 1, cut, 1,
             AG_UNWIND_END_TABLES_PENDING);
    cut[0] = ag_not_sampled_pc();
    ring_put(&t->ring, tid, now - 2000, AG_SOURCE_TAIL, AG_CPU_ENGINE_TIMER, 2, cut, 1,
             AG_UNWIND_END_LEAF_ONLY);
    ring_put(&t->ring, tid, now - 1000, AG_SOURCE_SIGNAL, AG_CPU_ENGINE_TIMER, 1, whole, 4,
             AG_UNWIND_END_ROOT);
    pthread_mutex_unlock(&ag.reg_lock);
    ASSERT_TRUE(ag_drain(claim_cb, NULL) >= 0);
    printf("# the claim: depth %u, above the marker %s\n", claim_depth,
           claim_above == whole[1] ? "the start routine"
           : claim_above == 0      ? "nothing"
                                   : "another frame");
    atomic_store(&merge_done, 1);
    pthread_join(th, NULL);
    ag_stop();
    ASSERT_EQ(claim_depth, 4); /* the marker over the start routine and the C library's two */
    ASSERT_TRUE(claim_above == whole[1]);
}

/* Counts the [not sampled] claims claim_cb saw (claim_n), after which claim_depth is the last's. */
static unsigned claim_n;

static int
claim_count_cb(const struct ag_record *rec, void *ctx)
{
    const struct ag_sample *s = rec->u.sample;

    claim_n += rec->kind == AG_RECORD_SAMPLE && rec->tid == atomic_load(&merge_tid) &&
               s->source == AG_SOURCE_TAIL && s->depth != 0 && s->frames[0] == ag_not_sampled_pc();
    return claim_cb(rec, ctx);
}

/*
 * issue 19: a [not sampled] claim drained before its thread's first stack that reaches the root
 * was written (a thread the scan found, claimed before the drain saw a sample of it: a loaded
 * machine) waits for that stack and stands over the root it shows; one past its bound stands
 * alone, counted. Built by hand: a late tick's split (in the ring) and auto's move (the thread's
 * final sample), each drained once before the thread's whole stack is written (the claim
 * waits: no claim delivered, the drain says where its span starts), then after. Before (the
 * claim delivered at once): depth 1, the marker alone.
 */
TEST(a_not_sampled_claim_waits_for_its_threads_first_stack_that_reaches_the_root)
{
    uint64_t f[4], whole[4], now;
    struct ag_stats st0, st1;
    struct ag_thread *t;
    pthread_t th;
    int32_t tid;
    int round;

    tid = claim_start(&th, whole);
    f[0] = ag_not_sampled_pc();
    /* The rounds' claims wait without the drain's bound: a loaded machine may preempt this thread
     * past it between a claim and its drain. The bound is the last part's, at its real value. */
    atomic_store(&ag_test_claim_wait_ns, UINT64_MAX);
    pthread_mutex_lock(&ag.reg_lock);
    t = ag_thread_register_locked(tid, 0, NULL); /* as the scan finds it: no start routine */
    ASSERT_TRUE(t != NULL);
    pthread_mutex_unlock(&ag.reg_lock);
    for (round = 0; round < 2; round++) {
        /* round 0: the split of a late tick's sample (2 intervals); 1: auto's move (3) */
        claim_n = 0;
        claim_depth = 0;
        claim_above = 0;
        ag_stats_get(&st0);
        pthread_mutex_lock(&ag.reg_lock);
        now = ag_now_ns() - 1000000u;
        if (round == 0) {
            ring_put(&t->ring, tid, now - 2000, AG_SOURCE_TAIL, AG_CPU_ENGINE_TIMER, 2, f, 1,
                     AG_UNWIND_END_LEAF_ONLY);
        } else {
            tail_set(t, now - 2000, 1000000000u, 3, 0, AG_CPU_ENGINE_TIMER, AG_TAIL_NOT_SAMPLED);
        }
        pthread_mutex_unlock(&ag.reg_lock);
        ASSERT_TRUE(ag_drain(claim_count_cb, NULL) >= 0);
        ag_stats_get(&st1);
        printf("# round %d, before the thread's stack: %u claims delivered, %llu held, held from "
               "%lld us before the drain\n",
               round, claim_n, (unsigned long long)(st1.not_sampled_held - st0.not_sampled_held),
               ag_drain_held_from() == UINT64_MAX ? -1ll
                                                  : (long long)(now - ag_drain_held_from()) / 1000);
        ASSERT_EQ(claim_n, 0);
        ASSERT_EQ(st1.not_sampled_held - st0.not_sampled_held, 1);
        /* its span's start: 2 (3) intervals of 1 ms before its time */
        ASSERT_EQ(ag_drain_held_from(), now - 2000 - (round == 0 ? 2000000u : 3000000u));
        pthread_mutex_lock(&ag.reg_lock);
        ring_put(&t->ring, tid, now - 1000, AG_SOURCE_SIGNAL, AG_CPU_ENGINE_TIMER, 1, whole, 4,
                 AG_UNWIND_END_ROOT);
        pthread_mutex_unlock(&ag.reg_lock);
        ASSERT_TRUE(ag_drain(claim_count_cb, NULL) >= 0);
        printf("# round %d, after: %u claims, depth %u, above the marker %s\n", round, claim_n,
               claim_depth,
               claim_above == whole[1] ? "the start routine"
               : claim_above == 0      ? "nothing"
                                       : "another frame");
        ASSERT_EQ(claim_n, 1);
        ASSERT_EQ(claim_depth, 4); /* the marker over the start routine and the C library's two */
        ASSERT_TRUE(claim_above == whole[1]);
        ASSERT_TRUE(ag_drain_held_from() == UINT64_MAX);
        /* the next round's thread has no stack again */
        t->last_depth = 0;
    }
    /* A claim past its bound (its span started 400 ms ago) stands alone, counted. */
    atomic_store(&ag_test_claim_wait_ns, 0);
    claim_n = 0;
    claim_depth = 0;
    ag_stats_get(&st0);
    pthread_mutex_lock(&ag.reg_lock);
    ring_put(&t->ring, tid, ag_now_ns() - 398000000u, AG_SOURCE_TAIL, AG_CPU_ENGINE_TIMER, 2, f, 1,
             AG_UNWIND_END_LEAF_ONLY);
    pthread_mutex_unlock(&ag.reg_lock);
    ASSERT_TRUE(ag_drain(claim_count_cb, NULL) >= 0);
    ag_stats_get(&st1);
    printf("# past its bound: %u claims, depth %u, %llu alone\n", claim_n, claim_depth,
           (unsigned long long)(st1.not_sampled_alone - st0.not_sampled_alone));
    atomic_store(&merge_done, 1);
    pthread_join(th, NULL);
    ag_stop();
    ASSERT_EQ(claim_n, 1);
    ASSERT_EQ(claim_depth, 1);
    ASSERT_EQ(st1.not_sampled_alone - st0.not_sampled_alone, 1);
}

/* The final samples (AG_SOURCE_TAIL and AG_SOURCE_UNSEEN) the drain delivered for merge_tid, in
 * order: their time, weight, depth and two innermost frames. */
struct held_rec {
    uint64_t ts;
    uint32_t weight, depth;
    uint8_t source;
    uint64_t f0, f1;
};
static struct held_rec held_recs[8];
static unsigned held_n;
/* held_cb claims a final sample of this thread at its first CPU sample (then NULL again), as a
 * flush or the thread's end does while the drain has the slot's parts out; at held_own_ts. */
static struct ag_thread *held_claim_at;
static uint64_t held_own_ts;

/* A final sample of t claimed as the timer engine claims one (an exit's, a flush's, a drain's
 * while the signal is blocked): w intervals of 1 ms since its last sample at CPU time cpu0.
 * reg_lock held. */
static void
held_claim(struct ag_thread *t, uint64_t cpu0, unsigned w)
{
    int has_timer = t->has_timer;
    unsigned hz = t->timer_hz;

    t->has_timer = 1;
    t->timer_hz = 1000;
    atomic_store(&t->last_cpu_ns, cpu0);
    atomic_store(&t->cpu_carry_ns, 0);
    ASSERT_U64_EQ(ag_cpu_claim_tail_at_locked(t, cpu0 + (uint64_t)w * 1000000u), 0);
    t->has_timer = has_timer;
    t->timer_hz = hz;
}

static int
held_cb(const struct ag_record *rec, void *ctx)
{
    const struct ag_sample *s = rec->u.sample;

    (void)ctx;
    if (rec->kind == AG_RECORD_SAMPLE && rec->tid == atomic_load(&merge_tid) &&
        s->source == AG_SOURCE_SIGNAL && held_claim_at != NULL) {
        pthread_mutex_lock(&ag.reg_lock);
        held_claim(held_claim_at, 2000000000u, 2);
        held_own_ts = ag_now_ns();
        held_claim_at = NULL;
        pthread_mutex_unlock(&ag.reg_lock);
    }
    if (rec->kind == AG_RECORD_SAMPLE && rec->tid == atomic_load(&merge_tid) &&
        (s->source == AG_SOURCE_TAIL || s->source == AG_SOURCE_UNSEEN) && held_n < 8) {
        held_recs[held_n++] = (struct held_rec){ s->timestamp_ns,
                                                 s->weight,
                                                 s->depth,
                                                 s->source,
                                                 s->depth > 0 ? s->frames[0] : 0,
                                                 s->depth > 1 ? s->frames[1] : 0 };
    }
    return 0;
}

/*
 * issue 19: a [not sampled] claim that waits in its thread's slot for the thread's root keeps
 * apart from the final samples claimed after it: each part keeps its own marker or stack and its
 * own time. Built by hand: a thread the scan found, a cut stack (call a, its walk short of the
 * root), auto's move claim of 3 intervals (it waits: no root known), an ordinary final sample of
 * 2 claimed while that drain has the move claim out of the slot (a flush's, or the thread's end:
 * the claim goes back before it), then an unseen one of 2 (the signal blocked under call b: into
 * the slot that holds both), then a stack that reached the root. Before, they merged in the
 * slot: one final sample of 7 intervals, unseen over call b (the move claim's CPU given to call
 * b, and call a's 2 to the marker); or, without the unseen part, 5 intervals of [not sampled]
 * over the root.
 */
TEST(a_held_not_sampled_claim_keeps_apart_from_the_final_samples_after_it)
{
    uint64_t cut[1], whole[4], blk[2], now, t_unseen;
    struct ag_unwind_result res = { 2, AG_UNWINDER_CFI, AG_UNWIND_END_ROOT, 0, 0 };
    struct ag_stats st0, st1;
    struct ag_thread *t;
    pthread_t th;
    int32_t tid;
    unsigned i;

    tid = claim_start(&th, whole);
    cut[0] = (uint64_t)(uintptr_t)merge_call_a;
    blk[0] = (uint64_t)(uintptr_t)merge_call_b;
    blk[1] = whole[1];
    /* A first drain makes the code map (slow under TSan). The move claim waits for the root
     * without the drain's bound (AG_DRAIN_CLAIM_WAIT_NS, 300 ms from its span's start), which a
     * loaded machine's preemption between the claim and the drain can outlast: the claim then
     * stood alone at the first drain (held_n 1), which is not what this case is about. */
    atomic_store(&ag_test_claim_wait_ns, UINT64_MAX);
    ASSERT_TRUE(ag_drain(held_cb, NULL) >= 0);
    held_n = 0;
    ag_stats_get(&st0);
    pthread_mutex_lock(&ag.reg_lock);
    t = ag_thread_register_locked(tid, 0, NULL); /* as the scan finds it: no start routine */
    ASSERT_TRUE(t != NULL);
    now = ag_now_ns() - 1000000u;
    ring_put(&t->ring, tid, now - 3000, AG_SOURCE_SIGNAL, AG_CPU_ENGINE_TIMER, 1, cut, 1,
             AG_UNWIND_END_TABLES_PENDING);
    /* auto's move: 3 intervals no sample saw */
    tail_set(t, now - 2000, 2000000000u, 3, 0, AG_CPU_ENGINE_TIMER, AG_TAIL_NOT_SAMPLED);
    held_claim_at = t; /* the ordinary final sample, as the drain delivers the cut stack */
    pthread_mutex_unlock(&ag.reg_lock);
    ASSERT_TRUE(ag_drain(held_cb, NULL) >= 0);
    ag_stats_get(&st1);
    printf("# first drain: %u final samples, %llu held, %llu us after the claim\n", held_n,
           (unsigned long long)(st1.not_sampled_held - st0.not_sampled_held),
           (unsigned long long)(ag_now_ns() - (now - 2000)) / 1000);
    ASSERT_EQ(held_n, 0);
    ASSERT_TRUE(held_claim_at == NULL); /* claimed */
    ASSERT_EQ(st1.not_sampled_held - st0.not_sampled_held, 1);
    /* the cut stack: known, short of the root (call a over the tables-pending marker) */
    ASSERT_EQ(t->last_depth, 2);
    ASSERT_TRUE(t->last_frames[0] == cut[0]);
    /* 2 intervals with the signal blocked under call b */
    pthread_mutex_lock(&ag.reg_lock);
    ag_seqstack_put(&t->sigblk, blk, &res);
    atomic_store(&t->sigblk_ns, ag_now_ns() - 10000000u);
    held_claim(t, 2002000000u, 2);
    t_unseen = ag_now_ns();
    atomic_store(&t->sigblk_ns, 0);
    ring_put(&t->ring, tid, ag_now_ns(), AG_SOURCE_SIGNAL, AG_CPU_ENGINE_TIMER, 1, whole, 4,
             AG_UNWIND_END_ROOT);
    pthread_mutex_unlock(&ag.reg_lock);
    ASSERT_TRUE(ag_drain(held_cb, NULL) >= 0);
    for (i = 0; i < held_n; i++) {
        struct held_rec *r = &held_recs[i];

        printf("# final sample %u: %s, weight %u, depth %u, %s, %lld ns after the move claim\n", i,
               r->source == AG_SOURCE_UNSEEN ? "unseen" : "tail", r->weight, r->depth,
               r->f0 == ag_not_sampled_pc()                 ? "[not sampled]"
               : r->f0 == ag_unseen_pc() && r->f1 == blk[0] ? "unseen over call b"
               : r->f0 == cut[0]                            ? "under call a"
                                                            : "elsewhere",
               (long long)(r->ts - (now - 2000)));
    }
    atomic_store(&ag_test_claim_wait_ns, 0);
    atomic_store(&merge_done, 1);
    pthread_join(th, NULL);
    ag_stop();
    ASSERT_EQ(held_n, 3);
    /* the move claim at its own time: [not sampled] over the root the later stack showed */
    ASSERT_EQ(held_recs[0].source, AG_SOURCE_TAIL);
    ASSERT_EQ(held_recs[0].weight, 3);
    ASSERT_U64_EQ(held_recs[0].ts, now - 2000);
    ASSERT_EQ(held_recs[0].depth, 4);
    ASSERT_TRUE(held_recs[0].f0 == ag_not_sampled_pc() && held_recs[0].f1 == whole[1]);
    /* the ordinary final sample under the thread's last stack at its claim: call a */
    ASSERT_EQ(held_recs[1].source, AG_SOURCE_TAIL);
    ASSERT_EQ(held_recs[1].weight, 2);
    ASSERT_TRUE(held_recs[1].ts <= held_own_ts && held_recs[1].ts > now);
    ASSERT_EQ(held_recs[1].depth, 2);
    ASSERT_TRUE(held_recs[1].f0 == cut[0]);
    /* the unseen one: the marker over call b */
    ASSERT_EQ(held_recs[2].source, AG_SOURCE_UNSEEN);
    ASSERT_EQ(held_recs[2].weight, 2);
    ASSERT_TRUE(held_recs[2].ts <= t_unseen && held_recs[2].ts > held_own_ts);
    ASSERT_TRUE(held_recs[2].f0 == ag_unseen_pc() && held_recs[2].f1 == blk[0]);
}

/*
 * A final sample's parts past the slot's room (AG_TAIL_PARTS): every sequence of claims keeps
 * each kind's weight and CPU apart, the parts in time order, none two in a row of one kind. Claims
 * of kinds in turn (a held move claim, then the ordinary and unseen parts a drain's claims of a
 * thread that blocks the signal and opens it again make, and so on), 1 to 3 intervals each,
 * claimed at times 1, 2, 3...; checked after each push against the sums pushed.
 */
TEST(a_final_samples_parts_keep_their_kinds_past_the_slots_room)
{
    static const uint8_t seqs[][10] = {
        { AG_TAIL_NOT_SAMPLED, AG_TAIL_OWN, AG_TAIL_UNSEEN, AG_TAIL_OWN, AG_TAIL_UNSEEN,
          AG_TAIL_OWN, AG_TAIL_UNSEEN, AG_TAIL_NOT_SAMPLED, AG_TAIL_OWN, AG_TAIL_UNSEEN },
        { AG_TAIL_OWN, AG_TAIL_UNSEEN, AG_TAIL_NOT_SAMPLED, AG_TAIL_OWN, AG_TAIL_UNSEEN,
          AG_TAIL_NOT_SAMPLED, AG_TAIL_OWN, AG_TAIL_UNSEEN, AG_TAIL_NOT_SAMPLED, AG_TAIL_OWN },
        { AG_TAIL_NOT_SAMPLED, AG_TAIL_NOT_SAMPLED, AG_TAIL_OWN, AG_TAIL_OWN, AG_TAIL_UNSEEN,
          AG_TAIL_NOT_SAMPLED, AG_TAIL_UNSEEN, AG_TAIL_OWN, AG_TAIL_NOT_SAMPLED, AG_TAIL_OWN },
    };
    unsigned q, i, j, merged = 0;

    for (q = 0; q < sizeof(seqs) / sizeof(seqs[0]); q++) {
        struct ag_tails tl = { .n = 0 };
        uint64_t want_w[3] = { 0, 0, 0 }, want_ns[3] = { 0, 0, 0 };

        for (i = 0; i < 10; i++) {
            struct ag_tail_part p = { .ts = i + 1u,
                                      .cpu_time_ns = 1000u * (i + 1u),
                                      .cpu_ns = 1000000u * (i % 3u + 1u),
                                      .weight = i % 3u + 1u,
                                      .engine = AG_CPU_ENGINE_TIMER,
                                      .kind = seqs[q][i] };
            uint64_t got_w[3] = { 0, 0, 0 }, got_ns[3] = { 0, 0, 0 };

            want_w[p.kind] += p.weight;
            want_ns[p.kind] += p.cpu_ns;
            /* full, and p not of the last part's kind: two parts of one kind merge */
            merged += tl.n == AG_TAIL_PARTS && tl.part[tl.n - 1].kind != p.kind;
            ag_tails_push(&tl, &p);
            ASSERT_TRUE(tl.n >= 1 && tl.n <= AG_TAIL_PARTS);
            ASSERT_U64_EQ(tl.part[tl.n - 1].ts, i + 1u); /* the latest claim's time is the last */
            for (j = 0; j < tl.n; j++) {
                ASSERT_TRUE(tl.part[j].kind <= AG_TAIL_NOT_SAMPLED);
                got_w[tl.part[j].kind] += tl.part[j].weight;
                got_ns[tl.part[j].kind] += tl.part[j].cpu_ns;
                if (j > 0) {
                    ASSERT_TRUE(tl.part[j - 1].ts < tl.part[j].ts);
                    ASSERT_TRUE(tl.part[j - 1].kind != tl.part[j].kind);
                }
            }
            for (j = 0; j < 3; j++) {
                ASSERT_U64_EQ(got_w[j], want_w[j]);
                ASSERT_U64_EQ(got_ns[j], want_ns[j]);
            }
        }
    }
    printf("# %u pushes found the parts full\n", merged);
    ASSERT_TRUE(merged != 0);
}

/* A final sample of a thread built by hand as the merge cases (calls a and b in its own ring),
 * claimed over claim_ns of CPU at hz, all but its last interval in the kernel, after pages fresh
 * pages the thread faulted in (the "event's" page-fault counter: one on this thread, read before
 * them as the thread's last sample's). Returns the faults the claim counted. */
static uint64_t
tail_fault_case(unsigned pages, unsigned hz, uint64_t claim_ns)
{
    struct perf_event_attr attr;
    pthread_t th;
    uint64_t h, before, faults;
    struct ag_thread *t;
    unsigned char *region;
    int fd;

    memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_PAGE_FAULTS;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    ASSERT_TRUE(fd >= 0);
    t = merge_start(&th, &h);
    ASSERT_TRUE(t != NULL);
    ASSERT_EQ(read(fd, &t->ring_faults, sizeof(t->ring_faults)), (ssize_t)sizeof(t->ring_faults));
    before = t->ring_faults;
    region = mmap(NULL, pages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_TRUE(region != MAP_FAILED);
    for (unsigned i = 0; i < pages; i++) {
        ((volatile unsigned char *)region)[i * 4096] = (unsigned char)i;
    }
    munmap(region, pages * 4096);
    t->ring_faults_fd = fd;
    t->timer_hz = hz;
    atomic_store(&t->last_cpu_ns, 2000000000u);
    atomic_store(&t->cpu_carry_ns, 0);
    ag_cpu_claim_tail_at_locked(t, 2000000000u + claim_ns);
    faults = t->ring_faults - before; /* the claim read the counter */
    t->ring_faults_fd = -1;
    pthread_mutex_unlock(&ag.reg_lock);
    close(fd);
    merge_end(t, th, h);
    printf("# %llu page faults counted\n", (unsigned long long)faults);
    return faults;
}

/*
 * A final sample's kernel time is placed as a perf sample's split is, and a span that took page
 * faults is no call's: a thread that faults much and runs little user code has few perf samples
 * (the faulter below: one every 10 to 60 intervals), so its final sample carries up to 90
 * intervals of fault time. Before, the claim did not look at the fault counter, and once a call
 * had been seen (the thread's locator armed by a sample at madvise's return, about one run in
 * four) that time all went under the call: the faulter's case read 1 to 42 intervals under
 * madvise in 9 runs of 40, 0 in the rest. Here 16 faults (their bound 32 ms) in a claim of 3
 * intervals of 1 ms, 2 of them in the kernel. Before: 1 and 1 under the calls, 0 not placed.
 */
TEST(perf_ring_final_sample_after_page_faults_is_not_placed)
{
    if (!perf_allowed()) {
        return;
    }
    tail_fault_case(16, 1000, 3000000u);
    ASSERT_EQ(merge_under[0], 0);
    ASSERT_EQ(merge_under[1], 0);
    ASSERT_EQ(merge_unplaced, 2);
}

/*
 * A final sample whose span took a few page faults: only their bound (AG_FAULT_BOUND_NS each,
 * rounded up to whole intervals) is not placed, and the rest is shared among the calls seen, as
 * in a perf sample's span (ag_sig_split_faulted). Here one fresh page in a claim of 10 intervals
 * of 10 ms, 9 of them in the kernel: 1 to 5 faults with the thread's own (-Werror and ASan
 * builds), a bound of 2 to 10 ms, 1 interval not placed, 4 under each call; under TSan, whose
 * shadow memory faults too, 6 or more (2 not placed, 4 and 3). Before, one fault kept all 9 from
 * the calls (0, 0, 9).
 */
TEST(perf_ring_final_sample_after_a_few_page_faults_is_placed_but_for_their_bound)
{
    uint64_t faults, unplaced;

    if (!perf_allowed()) {
        return;
    }
    faults = tail_fault_case(1, 100, 100000000u);
    ASSERT_TRUE(faults >= 1 && faults <= 15); /* their bound 30 ms at most: 6 intervals placed */
    unplaced = (faults * AG_FAULT_BOUND_NS * 9u + 90000000u - 1u) / 90000000u;
    ASSERT_U64_EQ(merge_unplaced, unplaced);
    ASSERT_U64_EQ(merge_under[0] + merge_under[1], 9u - unplaced);
    ASSERT_TRUE(merge_under[0] >= 3 && merge_under[1] >= 3); /* shared, not all to one call */
}

struct faulter_arg {
    _Atomic int32_t tid;
    _Atomic uint64_t cpu_madvise; /* the thread's CPU inside its madvise(2) calls */
};

/* One madvise(2) call that gives 256 pages back, then a store to each page (a page fault each:
 * kernel time outside any system call), in turn, for 300 ms of CPU. */
static void *
faulter_main(void *p)
{
    enum { PAGES = 256 };
    struct faulter_arg *a = p;
    unsigned char *region =
            mmap(NULL, PAGES * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint64_t c0 = cpu_ns(), c, in_madvise = 0;

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    while (region != MAP_FAILED && (c = cpu_ns()) - c0 < 300000000u) {
        if (madvise(region, PAGES * 4096, MADV_DONTNEED) != 0) {
            break;
        }
        in_madvise += cpu_ns() - c;
        for (unsigned i = 0; i < PAGES; i++) {
            ((volatile unsigned char *)region)[i * 4096] = (unsigned char)i;
        }
    }
    atomic_store(&a->cpu_madvise, in_madvise);
    if (region != MAP_FAILED) {
        munmap(region, PAGES * 4096);
    }
    return NULL;
}

/*
 * Page faults are kernel time outside any system call: a thread that gives pages back with one
 * madvise(2) call (about 12 % of its CPU here) and faults them in again spends the rest in its
 * own code's faults, and that time must not go under the call its locator saw just before. With
 * the locator's call as the only place, 62 to 77 % of such a thread's CPU stood under madvise
 * (pp-sample-syscalls' sc_release/sc_fault, docs/performance.md). A span of a perf sample that
 * took page faults is not placed. The thread times its madvise calls by its CPU clock (one read
 * more per call), which bounds what may stand under them. Only the faulter's records count: the
 * test thread's own kernel time, rightly under its usleep and drain calls, was 2 to 5 intervals
 * beside two busy loops. The thread's final sample is the largest span (pfault: up to 90
 * intervals, one perf sample every 10 to 60), and its faults are read at the claim.
 */
/* The case below for engine (perf or perf-ring). */
static void
faulter_test(enum ag_cpu_engine engine)
{
    struct faulter_arg a = { 0, 0 };
    struct ag_config cfg;
    pthread_t th;
    int i;

    if (!perf_allowed()) {
        return;
    }
    sampling_config_init(&cfg);
    cfg.cpu_engine = engine;
    ASSERT_OK(ag_start(&cfg));
    kern_at_call_w = kern_unplaced_w = 0;
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 1000));
    ASSERT_OK(pthread_create(&th, NULL, faulter_main, &a));
    while ((kern_tid = atomic_load(&a.tid)) == 0) {
        usleep(1000);
    }
    for (i = 0; i < 4000 && pthread_tryjoin_np(th, NULL) != 0; i++) {
        usleep(10000);
        ASSERT_TRUE(ag_drain(kern_cb, NULL) >= 0);
    }
    ag_cpu_flush();
    ASSERT_TRUE(ag_drain(kern_cb, NULL) >= 0);
    printf("# kernel time under a call %llu intervals, not placed %llu; madvise %.1f intervals\n",
           (unsigned long long)kern_at_call_w, (unsigned long long)kern_unplaced_w,
           (double)atomic_load(&a.cpu_madvise) / 1e6);
    kern_tid = 0;
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 1000));
    ag_stop();
    ASSERT_TRUE(kern_at_call_w + kern_unplaced_w >= 50); /* 300 ms, most of it in the kernel */
    /* madvise's own time may be placed, no more: what the thread measured in its calls, with a
     * margin for the spans around them. The calls took 44 to 48 intervals of the 300 in 8 runs
     * beside three busy loops (and 5 to 32 were placed under them); a fixed quarter of the
     * kernel time, the bound before, failed a loaded CI run at 80 of 281 where madvise's own
     * share, not measured then, may have been that large. */
    ASSERT_TRUE((double)kern_at_call_w <= 1.25 * (double)atomic_load(&a.cpu_madvise) / 1e6 + 5.0);
}

TEST(kernel_time_of_page_faults_is_not_given_to_a_call)
{
    faulter_test(AG_CPU_ENGINE_PERF);
}

/* The same under perf-ring, whose page faults come from a counter in the event's group, read
 * with each sample (perf-ring.c). */
TEST(perf_ring_kernel_time_of_page_faults_is_not_given_to_a_call)
{
    faulter_test(AG_CPU_ENGINE_PERF_RING);
}

/* dl_iterate_phdr: the first executable address of the module loaded at base (in *pc). */
static int
exec_addr_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    uint64_t *pc = ctx;
    int i;

    (void)size;
    if (info->dlpi_addr != *pc) {
        return 0;
    }
    for (i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X)) {
            *pc = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr + 16;
            return 1;
        }
    }
    return 0;
}

/*
 * A library loaded while sampling unwinds by its CFI at once, not at the next scan: the walk
 * that meets code outside every known module (here a lookup at an address of a library just
 * dlopen'ed) raises a flag, the next sample's handler wakes the manager, and the manager
 * publishes the new module. The scan runs every 10 s here, so only the wake can do it in time.
 */
TEST(new_code_wakes_the_manager_to_load_its_module)
{
    struct busy_arg a = { busy_a, "busy-a", 5000000000u, 0 };
    struct ag_cfi_row rule;
    struct link_map *lm = NULL;
    struct ag_config cfg;
    uint64_t pc;
    pthread_t ta;
    void *lib;
    int i;

    sampling_config_init(&cfg);
    cfg.scan_ms = 30000; /* the manager's first periodic scan: the test's failure */
    ASSERT_OK(ag_start(&cfg));
    atomic_store(&stop_flag, 0);
    ASSERT_OK(pthread_create(&ta, NULL, busy_main, &a));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 250));
    /* Mostly past the manager's first pass (no assert relies on it: the dlopen may also come
     * while it builds, or while its next pass loads libelf and builds that table). */
    usleep(100000);
    lib = dlopen("libresolv.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL || dlinfo(lib, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL) {
        printf("# SKIP (loud): libresolv.so.2 cannot be loaded: %s\n", dlerror());
        goto out;
    }
    pc = lm->l_addr;
    ASSERT_EQ(dl_iterate_phdr(exec_addr_cb, &pc), 1);
    if (ag_sig_module_find(pc) != NULL) {
        printf("# SKIP (loud): libresolv.so.2 was loaded before the test\n");
        goto out;
    }
    ag_sig_cfi_rule_miss(pc, NULL, &rule); /* what a walk through it does */
    /* 1, or 2 when a false alarm (a pc outside every module: TSan's runtime makes some) told the
     * manager just before: then it holds for 50 ms and lets go. */
    ASSERT_TRUE(atomic_load(&ag_sig_unknown_code) != 0);
    /* Published by the wake, not by the scan: waits for either, with no bound of its own (the
     * scan's 30 s period is the bound). A fresh-clone CI run's ASan stage waited past 1 s: the
     * manager cleared the flag after a pass that loaded libelf, so nothing woke it again. */
    for (i = 0; ag_sig_module_find(pc) == NULL && atomic_load(&ag.manager_scans) == 0; i++) {
        usleep(1000);
    }
    printf("# the new module was published after %d polls of 1 ms (%" PRIu64 " scans)\n", i,
           (uint64_t)atomic_load(&ag.manager_scans));
    ASSERT_TRUE(ag_sig_module_find(pc) != NULL);
    ASSERT_EQ(atomic_load(&ag.manager_scans), 0);
out:
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 250));
    atomic_store(&stop_flag, 1);
    ASSERT_OK(pthread_join(ta, NULL));
    ag_stop();
    if (lib != NULL) {
        dlclose(lib);
    }
}

/* ---- the timers' first-sample lottery ---- */

/* Square root by Newton's steps (the tests link no libm). */
static double
lot_sqrt(double x)
{
    double r = x > 1.0 ? x : 1.0;
    int i;

    for (i = 0; i < 64; i++) {
        r = (r + x / r) / 2.0;
    }
    return r;
}

/*
 * Whether wins of n draws at probability num/den are within the bound a correct lottery keeps
 * but with probability under 1e-7 (the case makes at most 9 such checks: under 1e-6 in all):
 * Hoeffding's for draws independent of each other, |wins - n p| < t with 2 exp(-2 t^2 / n) =
 * 1e-7, t^2 = n ln(2e7) / 2 (ln(2e7) < 16.82). The lottery's draws are a Weyl sequence of the
 * golden ratio (sig-handler.c), whose wins stay closer to n p than that whatever the seed: with
 * weyl, also held to the Denjoy-Koksma bound, 2 for each of the Fibonacci numbers up to n (the
 * digits of n's Ostrowski expansion) and 1 for the threshold's 32-bit rounding. The draws of an
 * implementation that gave up the sequence for independent ones (splitmix64 was measured and
 * left: docs/architecture.md) would break that one in most runs.
 */
static int
lottery_within(uint64_t wins, uint64_t n, uint64_t num, uint64_t den, int weyl)
{
    double dev = (double)wins - (double)n * (double)num / (double)den;
    double t = lot_sqrt((double)n * 16.82 / 2.0);
    uint64_t f0 = 1, f1 = 2, fibs = 1, weyl_bound;

    while (f1 <= n) {
        uint64_t f2 = f0 + f1;

        f0 = f1;
        f1 = f2;
        fibs++;
    }
    weyl_bound = 2 * fibs + 1;
    dev = dev < 0 ? -dev : dev;
    printf("# %llu wins of %llu draws at %llu/%llu: %.1f from n p (bounds: %.0f independent, "
           "%llu the Weyl sequence's)\n",
           (unsigned long long)wins, (unsigned long long)n, (unsigned long long)num,
           (unsigned long long)den, dev, t, (unsigned long long)weyl_bound);
    return dev < t && (!weyl || dev <= (double)weyl_bound);
}

/* The lottery thread: its tid out, then asleep in a read of fd until a byte comes (it burns no
 * CPU meanwhile). */
struct lot_arg {
    int fds[2];
    _Atomic int32_t tid;
};

static void *
lot_main(void *p)
{
    struct lot_arg *a = p;
    char c;

    atomic_store(&a->tid, (int32_t)syscall(SYS_gettid));
    (void)read(a->fds[0], &c, 1);
    return NULL;
}

/*
 * The timers' first-sample lottery (timer.c, "The lottery"), its parts taken one at a time, no
 * timing involved. Drawing, a thread's timer signal (one tick that saw its timer expire, or
 * 1 + its overruns) is its first sample with probability those ticks' CPU / the interval
 * (ag_lottery_draw, ag_sig_lottery on a slot of the test's own): over many signals the wins are
 * that share of them; a win takes the CPU before it for the lottery (cpu_chance_ns), starts the
 * weights there with a carry in (-I/2, I/2]; a loss changes nothing; a signal that stands for more
 * than an interval leaves the lottery undrawn. Won, signals until about an interval since the win
 * are dropped. On a real thread: drawing, its timer is armed at the tick's period, and its win asks
 * the manager to re-arm it at the interval, next due an interval from the win.
 */
TEST(the_timers_lottery_wins_at_the_ticks_share_of_an_interval_and_rearms_after)
{
    static struct ag_thread fake;
    const unsigned rates[] = { 10, 40, 100 };
    struct ag_config cfg;
    struct itimerspec its;
    struct ag_thread *t;
    siginfo_t info;
    struct timespec ts;
    uint64_t tick, period, n = 200000, i, wins, chance0, cpu = 0, last;
    int64_t carry;
    unsigned r, hz;
    struct lot_arg lot = { { -1, -1 }, 0 };
    int32_t tid = 0;
    int won = 0;
    pthread_t th;

    ASSERT_EQ(ag_lottery_draw(5, 5), 1); /* one interval a tick: no draw loses */
    ASSERT_EQ(ag_lottery_draw(6, 5), 1);
    for (i = 0, wins = 0; i < 1000; i++) {
        wins += (uint64_t)ag_lottery_draw(0, 5);
    }
    ASSERT_EQ(wins, 0);
    sampling_config_init(&cfg);
    cfg.test_fixed_phase = 0; /* the lottery on */
    cfg.scan_ms = 3600000;    /* no scan: nothing but this case re-arms */
    ASSERT_OK(ag_start(&cfg));
    if (ag.tick_hz == 0) {
        ag_stop();
        return; /* (no tick known: no lottery) */
    }
    tick = 1000000000u / ag.tick_hz;
    memset(&info, 0, sizeof(info));
    info.si_code = SI_TIMER;
    for (r = 0; r < PP_ARRAY_SIZE(rates); r++) {
        hz = rates[r];
        period = 1000000000u / hz;
        if (tick >= period) {
            continue; /* a draw a tick at the interval wins always */
        }
        /* The draws alone */
        for (i = 0, wins = 0; i < n; i++) {
            wins += (uint64_t)ag_lottery_draw(tick, period);
        }
        ASSERT_TRUE(lottery_within(wins, n, tick, period, 1));
        /* The handler's take, one signal a tick: a loss leaves the thread as it was, a win
         * starts its weights (then it draws again, as a new thread) */
        memset(&fake, 0, sizeof(fake));
        atomic_store(&fake.lottery, AG_LOTTERY_DRAW);
        atomic_store(&fake.last_cpu_ns, 1000);
        last = 1000;
        cpu = 1000;
        info.si_overrun = 0;
        for (i = 0, wins = 0; i < n; i++) {
            cpu += tick;
            chance0 = atomic_load(&ag.cpu_chance_ns);
            atomic_store(&ag.lottery_asked, 0);
            if (ag_sig_lottery(&fake, &info, cpu, hz) != 0) {
                ASSERT_EQ(atomic_load(&fake.lottery), AG_LOTTERY_DRAW);
                ASSERT_U64_EQ(atomic_load(&fake.last_cpu_ns), last);
                ASSERT_U64_EQ(atomic_load(&ag.cpu_chance_ns), chance0);
                continue;
            }
            wins++;
            carry = atomic_load(&fake.cpu_carry_ns);
            ASSERT_EQ(atomic_load(&fake.lottery), AG_LOTTERY_WON);
            ASSERT_U64_EQ(atomic_load(&fake.last_cpu_ns), cpu);
            ASSERT_U64_EQ(atomic_load(&ag.cpu_chance_ns), chance0 + (cpu - last));
            ASSERT_TRUE(carry > -(int64_t)(period / 2) && carry <= (int64_t)(period / 2));
            /* Won: dropped until about an interval (half a tick short) since the win */
            ASSERT_EQ(ag_sig_lottery(&fake, &info, cpu + tick, hz), 1);
            ASSERT_EQ(ag_sig_lottery(&fake, &info, cpu + period - tick / 2 - 1, hz), 1);
            ASSERT_EQ(ag_sig_lottery(&fake, &info, cpu + period - tick / 2, hz), 0);
            atomic_store(&fake.lottery, AG_LOTTERY_DRAW);
            atomic_store(&fake.cpu_carry_ns, 0);
            last = cpu;
        }
        ASSERT_TRUE(lottery_within(wins, n, tick, period, 1));
        /* A signal of 2 ticks (1 overrun) draws at twice the odds */
        if (2 * tick <= period) {
            info.si_overrun = 1;
            for (i = 0, wins = 0; i < n; i++) {
                atomic_store(&fake.lottery, AG_LOTTERY_DRAW);
                wins += (uint64_t)(ag_sig_lottery(&fake, &info, cpu, hz) == 0);
            }
            ASSERT_TRUE(lottery_within(wins, n, 2 * tick, period, 1));
        }
        /* One that stands for more than an interval is no draw: its span is weighed */
        info.si_overrun = (int)(period / tick);
        atomic_store(&fake.lottery, AG_LOTTERY_DRAW);
        atomic_store(&fake.last_cpu_ns, 1000);
        chance0 = atomic_load(&ag.cpu_chance_ns);
        ASSERT_EQ(ag_sig_lottery(&fake, &info, cpu + period * 2, hz), 0);
        ASSERT_EQ(atomic_load(&fake.lottery), AG_LOTTERY_WON);
        ASSERT_U64_EQ(atomic_load(&fake.last_cpu_ns), 1000);
        ASSERT_U64_EQ(atomic_load(&ag.cpu_chance_ns), chance0);
    }

    /* A real thread, asleep (no CPU, so no expiry and no draw but the case's) */
    hz = 1000000000u / tick >= 100 ? 50 : 10; /* (an interval above the tick's period) */
    period = 1000000000u / hz;
    ASSERT_OK(pipe(lot.fds));
    ASSERT_OK(pthread_create(&th, NULL, lot_main, &lot));
    for (i = 0; i < 6000 && !won; i++) {
        tid = atomic_load(&lot.tid);
        pthread_mutex_lock(&ag.reg_lock);
        won = tid != 0 && slot_of(tid) != NULL;
        pthread_mutex_unlock(&ag.reg_lock);
        won = won && (thread_state(tid) == 'S' || thread_state(tid) == 'D'); /* (asleep) */
        usleep(5000);
    }
    ASSERT_TRUE(won);
    won = 0;
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, hz));
    pthread_mutex_lock(&ag.reg_lock);
    t = slot_of(tid);
    ASSERT_TRUE(t != NULL && t->has_timer && !t->has_perf);
    ASSERT_EQ(atomic_load(&t->lottery), AG_LOTTERY_DRAW);
    ASSERT_OK(timer_gettime(t->timer, &its));
    /* Drawing: due at once (its first CPU), then every tick */
    ASSERT_U64_EQ((uint64_t)its.it_interval.tv_sec * 1000000000u +
                          (uint64_t)its.it_interval.tv_nsec,
                  tick);
    ASSERT_TRUE(its.it_value.tv_sec == 0 && its.it_value.tv_nsec > 0 &&
                (uint64_t)its.it_value.tv_nsec <= tick);
    ASSERT_OK(clock_gettime(ag_thread_cpu_clock(tid), &ts));
    cpu = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    last = atomic_load(&t->last_cpu_ns);
    chance0 = atomic_load(&ag.cpu_chance_ns);
    info.si_overrun = 0;
    /* Its signals until one wins (the sequence never loses 64 in a row at these odds) */
    for (i = 0; i < 64 && !won; i++) {
        won = ag_sig_lottery(t, &info, cpu, hz) == 0;
    }
    ASSERT_TRUE(won);
    ASSERT_EQ(atomic_load(&t->lottery), AG_LOTTERY_WON);
    ASSERT_U64_EQ(atomic_load(&t->last_cpu_ns), cpu);
    ASSERT_U64_EQ(atomic_load(&ag.cpu_chance_ns), chance0 + (cpu > last ? cpu - last : 0));
    pthread_mutex_unlock(&ag.reg_lock);
    /* The win asked the manager to re-arm (no scan runs: nothing else does) */
    for (i = 0; i < 6000 && atomic_load(&t->lottery) != AG_LOTTERY_NONE; i++) {
        usleep(5000);
    }
    pthread_mutex_lock(&ag.reg_lock);
    ASSERT_EQ(atomic_load(&t->lottery), AG_LOTTERY_NONE);
    ASSERT_OK(timer_gettime(t->timer, &its));
    ASSERT_U64_EQ((uint64_t)its.it_interval.tv_sec * 1000000000u +
                          (uint64_t)its.it_interval.tv_nsec,
                  period);
    /* next due an interval after the win, less what the thread ran since (nothing: asleep) */
    ASSERT_TRUE((uint64_t)its.it_value.tv_sec * 1000000000u + (uint64_t)its.it_value.tv_nsec <=
                        period &&
                (uint64_t)its.it_value.tv_sec * 1000000000u + (uint64_t)its.it_value.tv_nsec >
                        period - tick);
    pthread_mutex_unlock(&ag.reg_lock);
    ASSERT_TRUE(write(lot.fds[1], "x", 1) == 1);
    ASSERT_OK(pthread_join(th, NULL));
    close(lot.fds[0]);
    close(lot.fds[1]);
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, hz));
    ag_stop();
}

static const struct test_case cases[] = {
    TEST_CASE(new_code_wakes_the_manager_to_load_its_module),
    TEST_CASE(perf_samples_early_by_steal_weigh_the_threads_clock),
    TEST_CASE(perf_ring_samples_under_steal_weigh_the_threads_clock),
    TEST_CASE(an_early_perf_sample_leaves_its_span_to_the_next),
    TEST_CASE(final_sample_of_an_unsampled_thread_has_its_start_routine),
    TEST_CASE(final_sample_of_a_thread_only_the_scan_found),
    TEST_CASE(a_deferred_start_counts_the_cpu_since_the_origin),
    TEST_CASE(a_deferred_manager_starts_at_the_first_scan_and_finds_threads),
    TEST_CASE(final_sample_of_a_never_sampled_scan_only_thread),
    TEST_CASE(perf_ring_samples_without_a_signal_and_weighs_the_threads_cpu),
    TEST_CASE(a_sample_dropped_at_a_full_ring_leaves_its_cpu_to_no_sample_perf),
    TEST_CASE(a_sample_dropped_at_a_full_ring_leaves_its_cpu_to_no_sample_timer),
    TEST_CASE(a_sample_dropped_at_a_full_ring_leaves_its_cpu_to_no_sample_perf_ring),
    TEST_CASE(a_sample_the_kernel_lost_leaves_its_cpu_to_no_sample_perf_ring),
    TEST_CASE(auto_above_the_tick_rings_and_moves_a_deep_stack_to_perf),
    TEST_CASE(final_sample_at_exit_timer),
    TEST_CASE(final_sample_at_exit_perf),
    TEST_CASE(exit_after_a_late_sample_counts_its_rest_timer),
    TEST_CASE(exit_after_a_late_sample_counts_its_rest_perf),
    TEST_CASE(final_sample_at_flush_timer),
    TEST_CASE(final_sample_at_flush_perf),
    TEST_CASE(cpu_with_the_signal_blocked_is_marked_unseen_timer),
    TEST_CASE(cpu_with_the_signal_blocked_is_marked_unseen_perf),
    TEST_CASE(a_note_of_a_blocked_signal_does_not_outlive_the_block),
    TEST_CASE(a_long_blocked_span_reaches_the_consumer_in_pieces),
    TEST_CASE(auto_engine_takes_timers_up_to_the_tick),
    TEST_CASE(auto_moves_a_thread_the_tick_misses_to_perf),
    TEST_CASE(a_thread_moved_to_perf_keeps_what_the_timers_missed_in_place),
    TEST_CASE(a_thread_moved_before_any_timer_sample_shows_that_cpu_as_not_sampled),
    TEST_CASE(a_late_tick_sample_gives_what_the_tick_missed_to_not_sampled),
    TEST_CASE(an_exit_after_the_tick_missed_its_runs_gives_them_to_not_sampled),
    TEST_CASE(a_flush_after_the_tick_missed_its_runs_gives_them_to_not_sampled),
    TEST_CASE(the_timers_lottery_wins_at_the_ticks_share_of_an_interval_and_rearms_after),
    TEST_CASE(a_not_sampled_claim_of_a_thread_the_scan_found_stands_over_its_start_routine),
    TEST_CASE(an_idle_kernel_locator_goes_and_a_calling_thread_keeps_its),
    TEST_CASE(a_scan_without_a_sample_does_not_retire_a_locator),
    TEST_CASE(a_signal_at_a_masks_opening_is_no_call_seen),
    TEST_CASE(a_thread_that_blocks_the_signal_loses_its_locator),
    TEST_CASE(a_retired_locator_comes_back_for_calls_or_a_quarter_of_the_cpu),
    TEST_CASE(a_ring_thread_gets_a_locator_for_a_window_of_kernel_time),
    TEST_CASE(a_ring_thread_with_long_calls_gets_a_locator_and_its_kernel_time_placed),
    TEST_CASE(a_perf_sample_at_a_call_return_places_kernel_time),
    TEST_CASE(perf_ring_final_sample_after_page_faults_is_not_placed),
    TEST_CASE(perf_ring_final_sample_after_a_few_page_faults_is_placed_but_for_their_bound),
    TEST_CASE(kernel_time_of_page_faults_is_not_given_to_a_call),
    TEST_CASE(perf_ring_kernel_time_of_page_faults_is_not_given_to_a_call),
    TEST_CASE(a_perf_threads_final_sample_gives_its_kernel_time_to_no_user_code),
    TEST_CASE(kernel_time_is_shared_among_the_calls_seen_in_its_span),
    TEST_CASE(perf_ring_kernel_time_is_shared_among_the_calls_seen_in_its_span),
    TEST_CASE(kernel_time_of_a_span_with_a_few_page_faults_is_placed_but_for_their_bound),
    TEST_CASE(perf_ring_kernel_time_of_a_span_with_a_few_page_faults_is_placed_but_for_their_bound),
    TEST_CASE(perf_ring_drain_keeps_time_order_at_its_hold),
    TEST_CASE(perf_ring_drain_holds_a_final_sample_claimed_after_its_hold),
    TEST_CASE(a_not_sampled_claim_after_a_cut_stack_finds_its_root_further_on),
    TEST_CASE(a_not_sampled_claim_waits_for_its_threads_first_stack_that_reaches_the_root),
    TEST_CASE(a_held_not_sampled_claim_keeps_apart_from_the_final_samples_after_it),
    TEST_CASE(a_final_samples_parts_keep_their_kinds_past_the_slots_room),
    TEST_CASE(cpu_mode_samples_both_busy_threads),
    TEST_CASE(cpu_mode_attribution_matches_known_split),
    TEST_CASE(wall_mode_sleeps_are_complete_and_sampled_waiting),
    TEST_CASE(a_wall_pass_that_finds_a_sleeper_awake_does_not_settle_it),
    TEST_CASE(cpu_wait_stack_of_a_thread_in_a_blocking_call_is_the_calls),
    TEST_CASE(fork_while_sampling_leaves_child_alone),
    TEST_CASE(handler_preserves_errno),
    TEST_CASE(main_stack_bounds_match_glibcs),
    TEST_CASE(start_stop_idempotent_and_restore_signal),
    TEST_CASE(the_agents_signal_after_a_stop_does_not_end_the_host),
    TEST_CASE(wall_signals_a_thread_again_after_its_signal_merged_into_the_hosts),
    TEST_CASE(wall_sample_carries_the_intervals_its_thread_waited_for_a_core),
    TEST_CASE(short_lived_threads_start_and_stop),
    TEST_CASE(threads_exiting_during_a_scan_are_stopped_once),
    TEST_CASE(registry_full_counts_dropped_threads),
    /* 2000 threads, 2 ms of CPU each, one at a time: 4 s of CPU, 77 s at a load of 23 (quietloc's
     * runs, 2026-11-29) against the default 60 s alarm, a hang guard */
    TEST_CASE_TIMEOUT(thread_churn_past_the_slots_drops_no_thread_cpu, 180),
    TEST_CASE(thread_churn_past_the_slots_drops_no_thread_wall),
    TEST_CASE(more_live_threads_than_slots_are_counted_dropped),
    TEST_CASE(stop_while_signals_in_flight_is_safe),
};
TEST_MAIN(cases)
