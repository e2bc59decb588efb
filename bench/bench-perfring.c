/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-perfring.c - can a perf_event sample that sends no signal cost what a tick-bound
 * one does (issue 22, docs/performance.md "A perf sample without a signal")? One thread burns
 * fixed work units and measures its own CPU time, in interleaved rounds of:
 *   bare           no sampling;
 *   perf-signal    a cpu-clock perf_event at RATE, F_SETSIG SIGPROF to the thread, an empty
 *                  handler: the perf engine's delivery today;
 *   ring-ip        the same event with a ring buffer and no signal: sample_type IP|TID|TIME,
 *                  wakeup_watermark half the buffer, a reader thread that drains it (poll on the
 *                  event, and every 100 ms as an agent's scan would);
 *   ring-stack4k   ring-ip plus REGS_USER (the callee-saved registers, SP, IP) and STACK_USER
 *   ring-stack16k  of 4 or 16 KiB: what the agent's CFI unwinder would need, off the thread;
 *   ring-callchain ring-ip plus CALLCHAIN, user frames only (the kernel's frame-pointer walk);
 *   itimer-empty   ITIMER_PROF with an empty handler: gperftools' tick-bound clock;
 *   gperftools     gperftools' CPU profiler itself (libprofiler.so.0 at run time, skipped when
 *                  not installed), as bench-engine runs it.
 * Samples are counted exactly: the ring's PERF_RECORD_SAMPLE records (PERF_RECORD_LOST's counts
 * apart), the handlers' signals, gperftools' samples_gathered. Three prices per sample:
 *   step    the unit loop reads the thread CPU clock every BENCH_STEP multiplications between two
 *           CLOCK_MONOTONIC reads; a sample's time (the handler's clock read, or the ring
 *           record's TIME in CLOCK_MONOTONIC, attr.use_clockid) places it in one step, whose CPU
 *           time above the normal step is the sample's whole price to the thread (interrupt,
 *           write or delivery, handler); for the tick-bound ones also less bare's median
 *           interrupted step (the tick, which bare pays too);
 *   paired  sampling is on in even windows of BENCH_WINDOW_UNITS units and off in odd ones; the
 *           CPU time above the normal step (each step's capped) of the windows with it less that
 *           of the windows without, per sample: all of the price, both halves at the same moment
 *           of the machine;
 *   CPU     (CPU per unit - bare CPU per unit of the same round) x units / samples, as
 *           bench-engine; the noisiest on a loaded machine.
 * The reader's own CPU time per sample, the machine's local timer and irq_work interrupts
 * (/proc/interrupts LOC, IWI) and the thread's time slices (/proc/thread-self/schedstat) per
 * sample above the bare run's rate are printed too, and for stack samples the copy's size, the
 * stack in use and the frames a frame-pointer walk of the copy reaches. Unprivileged
 * (perf_event_paranoid 2): exclude_kernel and exclude_hv; a configuration the kernel refuses is
 * skipped, loudly. BENCH_PERFRING_ONLY=NAME,... runs only those (bare always runs);
 * BENCH_PERFRING_DEPTH the frames (default 32). usage: bench-perfring [RATE [ROUNDS [UNITS]]]
 * (250, 7, 25000). Not part of ctest; docs/performance.md has the runs.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "common/perf-ring.h"
#include "deep.h"
#include "gperf.h"

#define BENCH_STEP         4096 /* multiplications between two reads of the thread CPU clock */
#define BENCH_UNIT_STEPS   5    /* steps per unit */
#define BENCH_MAX_STEPS    (1u << 22)
#define BENCH_MAX_SAMPLES  (1u << 16)
#define BENCH_MAX_ROUNDS   64
#define BENCH_REC_MAX      65536 /* a perf record's size is a u16 */
/* A step counts at most this much in the excess: a sample costs less, a time slice lost to the
 * machine's other processes (its cache refill) more, and those are the excess's noise. */
#define BENCH_EXCESS_CAP   250000.0
/* Sampling is on in even windows of this many units and off in odd ones, in every run but bare:
 * the windows with and without it see the same moment of the machine. */
#define BENCH_WINDOW_UNITS 1000

enum bench_cfg {
    CFG_BARE,
    CFG_SIGNAL,
    CFG_RING_IP,
    CFG_RING_STACK4K,
    CFG_RING_STACK16K,
    CFG_RING_CALLCHAIN,
    CFG_ITIMER,
    CFG_GPERF,
    CFG_N,
};

static const char *const bench_names[CFG_N] = {
    "bare",          "perf-signal",    "ring-ip",      "ring-stack4k",
    "ring-stack16k", "ring-callchain", "itimer-empty", "gperftools",
};

/* The registers a CFI unwinder starts from: the callee-saved ones, the frame pointer, SP, IP. */
#if defined(__x86_64__)
/* BX, BP, SP, IP, R12-R15 (asm/perf_regs.h's numbers) */
#define BENCH_REGS_MASK ((1ull << 1) | (1ull << 6) | (1ull << 7) | (1ull << 8) | (0xfull << 20))
#define BENCH_REG_FP    6
#define BENCH_REG_SP    7
#elif defined(__aarch64__)
#define BENCH_REGS_MASK (((1ull << 33) - 1) & ~((1ull << 19) - 1)) /* x19-x28, FP, LR, SP, PC */
#define BENCH_REG_FP    29
#define BENCH_REG_SP    31
#else
#define BENCH_REGS_MASK 0ull /* the stack configurations are skipped here */
#define BENCH_REG_FP    0
#define BENCH_REG_SP    0
#endif

static volatile uint64_t bench_sink;
static int bench_depth = 32;

/* The unit loop's steps: the CPU time of step i (from read i-1 to read i) and the monotonic
 * clock just before and after read i. */
static uint64_t *bench_step_cpu;
static uint64_t *bench_mono_a, *bench_mono_b;
static unsigned bench_n_steps;

/* The samples' times (CLOCK_MONOTONIC): the handlers' or the ring records'. */
static uint64_t *bench_smp_t;
static volatile sig_atomic_t bench_smp_n;
static uintptr_t bench_stack_top; /* the outermost bench frame's address: the stack in use */

/* What turns the run's sampling on and off at the windows: its perf event, or ITIMER_PROF at
 * that interval (gperftools' timer too). Neither: bare, no windows. */
static int bench_toggle_fd = -1;
static long bench_toggle_us;

static void
bench_toggle(int on)
{
    struct itimerval itv;

    if (bench_toggle_fd >= 0) {
        ioctl(bench_toggle_fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
    } else if (bench_toggle_us > 0) {
        itv.it_interval.tv_sec = 0;
        itv.it_interval.tv_usec = on ? bench_toggle_us : 0;
        itv.it_value = itv.it_interval;
        setitimer(ITIMER_PROF, &itv, NULL);
    }
}

static uint64_t
bench_cpu_ns(void)
{
    return pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* The k-th unit of bench_deep_run()'s burn; every BENCH_WINDOW_UNITS the toggle turns. */
__attribute__((noinline)) static void
bench_unit(unsigned k)
{
    uint64_t x = bench_sink, now, a, b;
    int i, j;

    if (k % BENCH_WINDOW_UNITS == 0 && k > 0) {
        bench_toggle(((k / BENCH_WINDOW_UNITS) & 1) == 0);
    }
    for (i = 0; i < BENCH_UNIT_STEPS; i++) {
        for (j = 0; j < BENCH_STEP; j++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
        }
        a = bench_now_ns();
        now = bench_cpu_ns();
        b = bench_now_ns();
        if (bench_n_steps < BENCH_MAX_STEPS) {
            bench_mono_a[bench_n_steps] = a;
            bench_mono_b[bench_n_steps] = b;
            bench_step_cpu[bench_n_steps++] = now;
        }
    }
    bench_sink = x;
}

static void
bench_mark(void)
{
    int n = bench_smp_n;

    if ((unsigned)n < BENCH_MAX_SAMPLES) {
        bench_smp_t[n] = bench_now_ns();
        bench_smp_n = n + 1;
    }
}

static void
bench_empty(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    bench_mark();
}

/* ---- the ring buffer and its reader ---- */

struct bench_ring {
    int fd, stop_fd;
    void *base;
    size_t map_size;
    uint64_t sample_type;
    pthread_t reader;
    int reader_up;
    /* the reader's, read by the main thread after the join */
    unsigned samples, lost, throttles, wakeups, drains;
    uint64_t reader_ns;
    unsigned n_stat;
    float *dyn, *in_use, *frames, *whole; /* per stack sample; frames is nr for callchains */
    unsigned char rec[BENCH_REC_MAX];
};

/* One PERF_RECORD_SAMPLE in r->rec: its time, and for stacks what the copy holds. */
static void
bench_ring_sample(struct bench_ring *r, size_t size)
{
    const unsigned char *p = r->rec + sizeof(struct perf_event_header), *end = r->rec + size;
    uint64_t t, nr, abi, regs[64], sz, dyn, sp, fp;
    unsigned n = 0, i, frames;

    p += 8 + 8; /* IP, PID/TID */
    t = pp_perf_ring_u64(p);
    p += 8;
    r->samples++;
    if ((unsigned)bench_smp_n < BENCH_MAX_SAMPLES) {
        bench_smp_t[bench_smp_n] = t;
        bench_smp_n = bench_smp_n + 1;
    }
    if (r->sample_type & PERF_SAMPLE_CALLCHAIN) {
        nr = pp_perf_ring_u64(p);
        if (nr > (uint64_t)(end - p) / 8) {
            return;
        }
        p += 8 + 8 * nr;
        if (r->n_stat < BENCH_MAX_SAMPLES) {
            /* PERF_CONTEXT_USER leads the user frames */
            r->frames[r->n_stat] = nr > 0 ? (float)(nr - 1) : 0;
            r->dyn[r->n_stat] = r->in_use[r->n_stat] = r->whole[r->n_stat] = 0;
            r->n_stat++;
        }
    }
    if (!(r->sample_type & PERF_SAMPLE_REGS_USER) || p + 8 > end) {
        return;
    }
    abi = pp_perf_ring_u64(p);
    p += 8;
    if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
        n = (unsigned)__builtin_popcountll(BENCH_REGS_MASK);
        for (i = 0; i < n && i < 64; i++) {
            regs[i] = pp_perf_ring_u64(p + 8 * i);
        }
        p += 8 * n;
    }
    sz = pp_perf_ring_u64(p);
    p += 8;
    if (sz == 0 || n == 0 || p + sz + 8 > end || r->n_stat >= BENCH_MAX_SAMPLES) {
        return;
    }
    dyn = pp_perf_ring_u64(p + sz);
    dyn = dyn < sz ? dyn : sz;
    sp = regs[__builtin_popcountll(BENCH_REGS_MASK & ((1ull << BENCH_REG_SP) - 1))];
    fp = regs[__builtin_popcountll(BENCH_REGS_MASK & ((1ull << BENCH_REG_FP) - 1))];
    /* the frame-pointer chain inside the copy: how deep a walk of the copy gets */
    for (frames = 1; fp >= sp && fp - sp + 16 <= dyn && frames < 100000; frames++) {
        uint64_t next = pp_perf_ring_u64(p + (fp - sp));

        if (next <= fp) {
            frames++;
            break;
        }
        fp = next;
    }
    r->dyn[r->n_stat] = (float)dyn;
    r->in_use[r->n_stat] = bench_stack_top > sp ? (float)(bench_stack_top - sp) : 0;
    r->whole[r->n_stat] = bench_stack_top > sp && bench_stack_top - sp <= dyn;
    r->frames[r->n_stat++] = (float)frames;
}

/* Reads every record the kernel has written since the last drain. */
static void
bench_ring_drain(struct bench_ring *r)
{
    struct perf_event_mmap_page *pg = r->base;
    const unsigned char *data = (const unsigned char *)r->base + pg->data_offset;
    uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE), tail = pg->data_tail;
    struct perf_event_header h;

    r->drains++;
    while (tail < head) {
        pp_perf_ring_copy(pg, data, tail, &h, sizeof(h));
        if (h.size < sizeof(h)) {
            break; /* cannot happen; do not loop forever */
        }
        pp_perf_ring_copy(pg, data, tail, r->rec, h.size);
        if (h.type == PERF_RECORD_SAMPLE) {
            bench_ring_sample(r, h.size);
        } else if (h.type == PERF_RECORD_LOST) {
            r->lost += (unsigned)pp_perf_ring_u64(r->rec + sizeof(h) + 8); /* id, lost */
        } else if (h.type == PERF_RECORD_THROTTLE) {
            r->throttles++;
        }
        tail += h.size;
    }
    __atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
}

static void *
bench_ring_reader(void *arg)
{
    struct bench_ring *r = arg;
    struct pollfd pfd[2] = { { r->fd, POLLIN, 0 }, { r->stop_fd, POLLIN, 0 } };
    uint64_t t0 = bench_cpu_ns();

    for (;;) {
        int n = poll(pfd, 2, 100);

        if (n > 0 && (pfd[0].revents & POLLIN)) {
            r->wakeups++;
        }
        bench_ring_drain(r);
        if (n > 0 && (pfd[1].revents & POLLIN)) {
            break;
        }
    }
    r->reader_ns = bench_cpu_ns() - t0;
    return NULL;
}

/* The thread's cpu-clock event at hz, disabled: with a ring buffer of data_pages (0: none, the
 * F_SETSIG delivery instead) and sample_type's extras. 0 or -errno. */
static int
bench_perf_open(struct bench_ring *r, unsigned hz, unsigned data_pages, uint64_t extra,
                unsigned stack)
{
    struct perf_event_attr a;
    struct f_owner_ex o = { F_OWNER_TID, (pid_t)syscall(SYS_gettid) };
    long page = sysconf(_SC_PAGESIZE);
    int err = 0;

    memset(&a, 0, sizeof(a));
    a.size = sizeof(a);
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.sample_period = 1000000000u / hz;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.disabled = 1;
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | extra;
    a.use_clockid = 1;
    a.clockid = CLOCK_MONOTONIC;
    if (extra & PERF_SAMPLE_CALLCHAIN) {
        a.exclude_callchain_kernel = 1;
    }
    if (extra & PERF_SAMPLE_REGS_USER) {
        a.sample_regs_user = BENCH_REGS_MASK;
        a.sample_stack_user = stack;
    }
    if (data_pages == 0) {
        a.wakeup_events = 1;
    } else {
        a.watermark = 1;
        a.wakeup_watermark = (unsigned)(data_pages * (unsigned long)page / 2);
    }
    r->sample_type = a.sample_type;
    r->fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (r->fd < 0) {
        return -errno;
    }
    if (data_pages == 0) {
        if (fcntl(r->fd, F_SETOWN_EX, &o) != 0 || fcntl(r->fd, F_SETSIG, SIGPROF) != 0 ||
            fcntl(r->fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0) {
            err = -errno;
        }
        goto out;
    }
    r->map_size = (size_t)(data_pages + 1) * (size_t)page;
    r->base = mmap(NULL, r->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
    if (r->base == MAP_FAILED) {
        r->base = NULL;
        err = -errno;
        goto out;
    }
    r->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (r->stop_fd < 0) {
        err = -errno;
        goto out;
    }
    err = -pthread_create(&r->reader, NULL, bench_ring_reader, r);
    r->reader_up = err == 0;
out:
    return err;
}

/* Stops the event and the reader, drains the rest; closes all. */
static void
bench_perf_close(struct bench_ring *r)
{
    uint64_t one = 1;

    if (r->fd >= 0) {
        ioctl(r->fd, PERF_EVENT_IOC_DISABLE, 0);
    }
    if (r->reader_up) {
        if (write(r->stop_fd, &one, sizeof(one)) != (ssize_t)sizeof(one)) {
            perror("bench-perfring: eventfd");
        }
        pthread_join(r->reader, NULL);
        r->reader_up = 0;
    }
    if (r->stop_fd >= 0) {
        close(r->stop_fd);
        r->stop_fd = -1;
    }
    if (r->base != NULL) {
        munmap(r->base, r->map_size);
        r->base = NULL;
    }
    if (r->fd >= 0) {
        close(r->fd);
        r->fd = -1;
    }
}

/* ---- gperftools ---- */

static struct {
    struct bench_gperf_api api;
    struct sigaction act;
    int have_act;
    void (*inner)(int, siginfo_t *, void *);
} bench_gperf;

static void
bench_gperf_wrap(int sig, siginfo_t *si, void *uc)
{
    bench_mark();
    bench_gperf.inner(sig, si, uc);
}

/* gperftools' CPU profiler at hz around fn. 0, 1 when not installed, -1. */
static int
bench_gperf_run(unsigned hz, unsigned units, uint64_t *ns, unsigned *samples)
{
    char path[64];
    struct bench_gperf_state st;
    struct sigaction sa;

    if (bench_gperf_load(&bench_gperf.api, hz, "bench-perfring") != 0) {
        return 1;
    }
    if (bench_gperf.have_act) {
        sigaction(SIGPROF, &bench_gperf.act, NULL); /* the others leave SIG_DFL */
    }
    snprintf(path, sizeof(path), "/tmp/bench-perfring-gperf.%d", (int)getpid());
    if (!bench_gperf.api.start(path)) {
        fprintf(stderr, "bench-perfring: gperftools' ProfilerStart failed\n");
        return -1;
    }
    sigaction(SIGPROF, NULL, &sa);
    if (!bench_gperf.have_act) {
        bench_gperf.act = sa;
        bench_gperf.have_act = 1;
    }
    if (sa.sa_flags & SA_SIGINFO) {
        bench_gperf.inner = sa.sa_sigaction;
        sa.sa_sigaction = bench_gperf_wrap;
        sigaction(SIGPROF, &sa, NULL);
    }
    bench_toggle_us = 1000000 / (long)hz; /* its ITIMER_PROF (CPUPROFILE_REALTIME unset) */
    *ns = bench_deep_run(bench_depth, units, bench_unit, &bench_sink);
    bench_gperf.api.state(&st);
    bench_gperf.api.stop();
    unlink(path);
    *samples = st.samples_gathered > 0 ? (unsigned)st.samples_gathered : 0;
    return 0;
}

/* ---- one run ---- */

struct bench_sys { /* the machine's and the thread's counters around a run */
    uint64_t loc, iwi, slices, wall_ns;
};

static uint64_t
bench_irq_sum(const char *buf, const char *name)
{
    const char *p = strstr(buf, name), *e;
    uint64_t sum = 0;

    if (p == NULL) {
        return 0;
    }
    p += strlen(name);
    e = strchr(p, '\n');
    while (p != NULL && (e == NULL || p < e)) {
        char *q;
        unsigned long long v = strtoull(p, &q, 10);

        if (q == p) {
            break;
        }
        sum += v;
        p = q;
    }
    return sum;
}

static void
bench_sys_read(struct bench_sys *s)
{
    static char buf[1 << 16];
    ssize_t n;
    int fd;
    unsigned long long run, wait, slices = 0;
    FILE *f;

    memset(s, 0, sizeof(*s));
    s->wall_ns = bench_now_ns();
    fd = open("/proc/interrupts", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, buf, sizeof(buf) - 1);
        buf[n > 0 ? n : 0] = '\0';
        close(fd);
        s->loc = bench_irq_sum(buf, "LOC:");
        s->iwi = bench_irq_sum(buf, "IWI:");
    }
    f = fopen("/proc/thread-self/schedstat", "r");
    if (f != NULL) {
        if (fscanf(f, "%llu %llu %llu", &run, &wait, &slices) == 3) {
            s->slices = slices;
        }
        fclose(f);
    }
}

struct bench_result {
    uint64_t ns;
    unsigned samples, lost, wakeups;
    uint64_t reader_ns;
    struct bench_sys d; /* deltas */
    double gap, irq;    /* medians, ns above the normal step */
    double paired;      /* the CPU time above the normal step, each step's capped, of the windows
                         * with sampling less that of the windows without, ns */
    double dyn, in_use, frames, whole;
};

static int
bench_cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;

    return x < y ? -1 : x > y;
}

static int
bench_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts v), 0 when empty. */
static double
bench_fmedian(float *v, unsigned n)
{
    if (n == 0) {
        return 0;
    }
    qsort(v, n, sizeof(*v), bench_cmp_float);
    return v[n / 2];
}

/* Places the run's samples in their steps: the median step with one sample and the median
 * interruption without one, both above the normal step. Step i runs from the end of read i-1
 * (mono_b) to the start of read i (mono_a); a sample taken during a read (a signal delivered at
 * the clock system call's return) may cost either step, and both are left out. */
static void
bench_gaps(struct bench_result *res)
{
    unsigned i = 1, s, n = (unsigned)bench_smp_n, n_gaps = 0, n_normal = 0, lo;
    float *normal = malloc(sizeof(float) * (bench_n_steps + 1));
    float *gaps = malloc(sizeof(float) * (n + 1));
    unsigned char *cnt = calloc(bench_n_steps + 1, 1), *dirty = calloc(bench_n_steps + 1, 1);
    double step, ex[2] = { 0, 0 }, n_ex[2] = { 0, 0 };

    res->gap = res->irq = res->paired = 0;
    if (normal == NULL || gaps == NULL || cnt == NULL || dirty == NULL || bench_n_steps < 2) {
        goto out;
    }
    qsort(bench_smp_t, n, sizeof(*bench_smp_t), bench_cmp_u64);
    for (s = 0; s < n; s++) {
        uint64_t t = bench_smp_t[s];

        while (i < bench_n_steps && bench_mono_a[i] <= t) {
            i++;
        }
        if (i >= bench_n_steps) {
            break;
        }
        if (t >= bench_mono_b[i - 1]) {
            cnt[i] = cnt[i] < 255 ? cnt[i] + 1 : 255;
        } else if (t >= bench_mono_a[i - 1]) {
            dirty[i - 1] = dirty[i] = 1;
        }
    }
    for (i = 1; i < bench_n_steps; i++) {
        if (cnt[i] == 0 && !dirty[i]) {
            normal[n_normal++] = (float)(bench_step_cpu[i] - bench_step_cpu[i - 1]);
        }
    }
    step = bench_fmedian(normal, n_normal); /* sorts normal */
    for (i = 1; i < bench_n_steps; i++) {
        if (cnt[i] == 1 && !dirty[i]) {
            gaps[n_gaps++] = (float)((double)(bench_step_cpu[i] - bench_step_cpu[i - 1]) - step);
        }
    }
    res->gap = bench_fmedian(gaps, n_gaps);
    for (i = 1; i < bench_n_steps; i++) {
        double d = (double)(bench_step_cpu[i] - bench_step_cpu[i - 1]) - step;
        int on = ((i / BENCH_UNIT_STEPS / BENCH_WINDOW_UNITS) & 1) == 0;

        ex[on] += d < BENCH_EXCESS_CAP ? d : BENCH_EXCESS_CAP;
        n_ex[on]++;
    }
    if (n_ex[0] > 0 && n_ex[1] > 0) {
        res->paired = (ex[1] / n_ex[1] - ex[0] / n_ex[0]) * n_ex[1];
    }
    for (lo = 0; lo < n_normal && normal[lo] < step + 1000; lo++) {
    }
    res->irq = lo < n_normal ? bench_fmedian(normal + lo, n_normal - lo) - step : 0;
out:
    free(normal);
    free(gaps);
    free(cnt);
    free(dirty);
}

/* Starts configuration k's sampling (not bare, not gperftools). 0, 1 to skip (refused), -1. */
static int
bench_start(int k, unsigned hz, struct bench_ring *r)
{
    struct sigaction sa;
    struct itimerval itv;
    unsigned stack = k == CFG_RING_STACK16K ? 16384 : 4096;
    /* room for 32 records at least, half of it a wakeup */
    unsigned pages = k == CFG_RING_STACK16K    ? 128
                     : k == CFG_RING_STACK4K   ? 64
                     : k == CFG_RING_CALLCHAIN ? 32
                                               : 16;
    uint64_t extra = k == CFG_RING_CALLCHAIN ? PERF_SAMPLE_CALLCHAIN
                     : k == CFG_RING_STACK4K || k == CFG_RING_STACK16K
                             ? PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER
                             : 0;
    int err;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = bench_empty;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    if (k == CFG_ITIMER) {
        itv.it_interval.tv_sec = 0;
        itv.it_interval.tv_usec = 1000000 / (long)hz;
        itv.it_value = itv.it_interval;
        bench_toggle_us = itv.it_interval.tv_usec;
        return setitimer(ITIMER_PROF, &itv, NULL) == 0 ? 0 : -1;
    }
    if ((extra & PERF_SAMPLE_REGS_USER) && BENCH_REGS_MASK == 0) {
        fprintf(stderr, "bench-perfring: SKIP %s: no register mask for this architecture\n",
                bench_names[k]);
        return 1;
    }
    err = bench_perf_open(r, hz, k == CFG_SIGNAL ? 0 : pages, extra, stack);
    if (err == 0 && ioctl(r->fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
        err = -errno;
    }
    bench_toggle_fd = r->fd;
    if (err != 0) {
        fprintf(stderr,
                "bench-perfring: SKIP %s: the kernel refused it (%s; perf_event_paranoid, "
                "perf_event_mlock_kb?)\n",
                bench_names[k], strerror(-err));
        bench_perf_close(r);
        return 1;
    }
    return 0;
}

static void
bench_stop(int k, struct bench_ring *r)
{
    struct sigaction sa;
    struct itimerval zero;

    if (k == CFG_ITIMER) {
        memset(&zero, 0, sizeof(zero));
        setitimer(ITIMER_PROF, &zero, NULL);
    } else {
        bench_perf_close(r);
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN; /* discards a signal still pending */
    sigaction(SIGPROF, &sa, NULL);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGPROF, &sa, NULL);
}

/* One run of configuration k. 0, 1 to skip it from now on, -1 on error. */
static int
bench_run(int k, unsigned hz, unsigned units, struct bench_result *res)
{
    static struct bench_ring r;
    struct bench_sys s0, s1;
    int err = 0;

    memset(res, 0, sizeof(*res));
    memset(&r, 0, offsetof(struct bench_ring, rec));
    r.fd = r.stop_fd = -1;
    r.dyn = malloc(4 * BENCH_MAX_SAMPLES * sizeof(float));
    if (r.dyn == NULL) {
        return -1;
    }
    r.in_use = r.dyn + BENCH_MAX_SAMPLES;
    r.frames = r.in_use + BENCH_MAX_SAMPLES;
    r.whole = r.frames + BENCH_MAX_SAMPLES;
    bench_smp_n = 0;
    bench_n_steps = 0;
    bench_toggle_fd = -1;
    bench_toggle_us = 0;
    bench_stack_top = (uintptr_t)__builtin_frame_address(0);
    bench_sys_read(&s0);
    if (k == CFG_GPERF) {
        err = bench_gperf_run(hz, units, &res->ns, &res->samples);
        if (err != 0) {
            goto out;
        }
    } else if (k == CFG_BARE) {
        res->ns = bench_deep_run(bench_depth, units, bench_unit, &bench_sink);
    } else {
        err = bench_start(k, hz, &r);
        if (err != 0) {
            goto out;
        }
        res->ns = bench_deep_run(bench_depth, units, bench_unit, &bench_sink);
        bench_stop(k, &r);
        res->samples = k == CFG_SIGNAL || k == CFG_ITIMER ? (unsigned)bench_smp_n : r.samples;
    }
    bench_toggle_fd = -1;
    bench_toggle_us = 0;
    bench_sys_read(&s1);
    res->d.loc = s1.loc - s0.loc;
    res->d.iwi = s1.iwi - s0.iwi;
    res->d.slices = s1.slices - s0.slices;
    res->d.wall_ns = s1.wall_ns - s0.wall_ns;
    res->lost = r.lost;
    res->wakeups = r.wakeups;
    res->reader_ns = r.reader_ns;
    if (r.n_stat > 0) {
        res->dyn = bench_fmedian(r.dyn, r.n_stat);
        res->in_use = bench_fmedian(r.in_use, r.n_stat);
        res->frames = bench_fmedian(r.frames, r.n_stat);
        for (unsigned i = 0; i < r.n_stat; i++) {
            res->whole += r.whole[i];
        }
        res->whole /= r.n_stat;
    }
    bench_gaps(res);
out:
    free(r.dyn);
    return err;
}

/* ---- main ---- */

static double
bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
    return v[n / 2];
}

/* Prints "label median [quartiles]" of v[0..n) (sorts v); returns the median. */
static double
bench_print_mq(const char *label, double *v, int n)
{
    double m = bench_median(v, n);

    printf("  %s %6.0f ns [%.0f .. %.0f]", label, m, v[n / 4], v[n - 1 - n / 4]);
    return m;
}

static struct bench_result bench_res[CFG_N][BENCH_MAX_ROUNDS];

/* Per sample above the bare run's rate per wall second in the same round. */
static double
bench_above(uint64_t d, uint64_t wall, uint64_t bare_d, uint64_t bare_wall, unsigned samples)
{
    double rate = bare_wall > 0 ? (double)bare_d / (double)bare_wall : 0;

    return samples > 0 ? ((double)d - rate * (double)wall) / samples : 0;
}

/* Per configuration, the medians over the rounds: CPU time above bare, the sample's own step
 * above what a bare run pays there (the tick, for the tick-bound ones), the reader's CPU. */
struct bench_summary {
    double cost, inc, reader, paired;
};

static void
bench_report(int k, int rounds, unsigned units, struct bench_summary *sum)
{
    int tick_bound = k == CFG_ITIMER || k == CFG_GPERF;
    double inc[BENCH_MAX_ROUNDS], ex[BENCH_MAX_ROUNDS];
    double c[BENCH_MAX_ROUNDS], g[BENCH_MAX_ROUNDS], q[BENCH_MAX_ROUNDS], n[BENCH_MAX_ROUNDS];
    double rd[BENCH_MAX_ROUNDS], loc[BENCH_MAX_ROUNDS], iwi[BENCH_MAX_ROUNDS];
    double sl[BENCH_MAX_ROUNDS], lost[BENCH_MAX_ROUNDS], wk[BENCH_MAX_ROUNDS];
    double dy[BENCH_MAX_ROUNDS], iu[BENCH_MAX_ROUNDS], fr[BENCH_MAX_ROUNDS], wh[BENCH_MAX_ROUNDS];
    int r;

    for (r = 0; r < rounds; r++) {
        const struct bench_result *x = &bench_res[k][r], *b = &bench_res[CFG_BARE][r];
        double per_unit = (double)x->ns / units, bare_unit = (double)b->ns / units;

        c[r] = x->samples > 0 ? (per_unit - bare_unit) * units / x->samples : 0;
        g[r] = x->gap;
        ex[r] = x->samples > 0 ? x->paired / x->samples : 0;
        q[r] = x->irq;
        /* a tick-bound sample rides the tick the bare run takes too: its price is what its step
         * costs above a tick's (bare's median interruption) */
        inc[r] = x->gap - (tick_bound ? b->irq : 0);
        n[r] = x->samples;
        rd[r] = x->samples > 0 ? (double)x->reader_ns / x->samples : 0;
        loc[r] = bench_above(x->d.loc, x->d.wall_ns, b->d.loc, b->d.wall_ns, x->samples);
        iwi[r] = bench_above(x->d.iwi, x->d.wall_ns, b->d.iwi, b->d.wall_ns, x->samples);
        sl[r] = bench_above(x->d.slices, x->ns, b->d.slices, b->ns, x->samples);
        lost[r] = x->lost;
        wk[r] = x->wakeups;
        dy[r] = x->dyn;
        iu[r] = x->in_use;
        fr[r] = x->frames;
        wh[r] = x->whole * 100;
    }
    if (k == CFG_BARE) {
        printf("  %-14s %8.1f ns/unit, irq %.0f ns\n", bench_names[k],
               (double)bench_res[k][0].ns / units, bench_median(q, rounds));
        return;
    }
    printf("  %-14s %5.0f samples", bench_names[k], bench_median(n, rounds));
    sum[k].cost = bench_print_mq("per sample", c, rounds);
    bench_print_mq("gap", g, rounds);
    sum[k].paired = bench_print_mq("paired", ex, rounds);
    sum[k].inc = bench_median(inc, rounds);
    sum[k].reader = bench_median(rd, rounds);
    if (tick_bound) {
        printf(" (%.0f above a tick)", sum[k].inc);
    }
    printf("  irq %5.0f", bench_median(q, rounds));
    printf("  LOC %+.2f IWI %+.2f slices %+.2f", bench_median(loc, rounds),
           bench_median(iwi, rounds), bench_median(sl, rounds));
    if (k >= CFG_RING_IP && k <= CFG_RING_CALLCHAIN) {
        printf("\n  %-14s reader %5.0f ns per sample, %.0f wakeups, %.0f lost", "", sum[k].reader,
               bench_median(wk, rounds), bench_median(lost, rounds));
        if (k == CFG_RING_CALLCHAIN) {
            printf(", %.0f user frames", bench_median(fr, rounds));
        } else if (k != CFG_RING_IP) {
            printf(", copy %.0f B, stack in use %.0f B, whole in %.0f %%, frame-pointer walk of "
                   "the copy %.0f frames",
                   bench_median(dy, rounds), bench_median(iu, rounds), bench_median(wh, rounds),
                   bench_median(fr, rounds));
        }
    }
    printf("\n");
}

static double
bench_loadavg(void)
{
    double l = 0;
    FILE *f = fopen("/proc/loadavg", "r");

    if (f != NULL) {
        if (fscanf(f, "%lf", &l) != 1) {
            l = 0;
        }
        fclose(f);
    }
    return l;
}

int
main(int argc, char **argv)
{
    unsigned hz = argc > 1 ? (unsigned)atoi(argv[1]) : 250;
    int rounds = argc > 2 ? atoi(argv[2]) : 7, r, k, i;
    unsigned units = argc > 3 ? (unsigned)atoi(argv[3]) : 25000;
    int skipped[CFG_N] = { 0 };
    struct bench_summary sum[CFG_N] = { { 0, 0, 0, 0 } };
    double load0 = bench_loadavg();
    const char *only = getenv("BENCH_PERFRING_ONLY"), *depth = getenv("BENCH_PERFRING_DEPTH");

    if (rounds < 1 || rounds > BENCH_MAX_ROUNDS || hz == 0 || hz > 1000 || units == 0 ||
        (uint64_t)units * BENCH_UNIT_STEPS > BENCH_MAX_STEPS) {
        fprintf(stderr, "usage: bench-perfring [RATE 1..1000 [ROUNDS 1..%d [UNITS 1..%u]]]\n",
                BENCH_MAX_ROUNDS, BENCH_MAX_STEPS / BENCH_UNIT_STEPS);
        return 2;
    }
    if (depth != NULL) {
        bench_depth = atoi(depth);
        if (bench_depth < 0 || bench_depth > 1000) {
            fprintf(stderr, "bench-perfring: BENCH_PERFRING_DEPTH is 0..1000\n");
            return 2;
        }
    }
    bench_step_cpu = malloc(BENCH_MAX_STEPS * sizeof(*bench_step_cpu));
    bench_mono_a = malloc(BENCH_MAX_STEPS * sizeof(*bench_mono_a));
    bench_mono_b = malloc(BENCH_MAX_STEPS * sizeof(*bench_mono_b));
    bench_smp_t = malloc(BENCH_MAX_SAMPLES * sizeof(*bench_smp_t));
    if (bench_step_cpu == NULL || bench_mono_a == NULL || bench_mono_b == NULL ||
        bench_smp_t == NULL) {
        fprintf(stderr, "bench-perfring: out of memory\n");
        return 1;
    }
    for (k = 1; only != NULL && k < CFG_N; k++) {
        skipped[k] = bench_list_has(only, bench_names[k]) ? 0 : 2;
    }
    for (r = 0; r < rounds; r++) {
        for (i = 0; i < CFG_N; i++) {
            int err;

            k = (i + r) % CFG_N; /* rotating order: drift spreads evenly */
            memset(&bench_res[k][r], 0, sizeof(bench_res[k][r]));
            if (skipped[k]) {
                continue;
            }
            err = bench_run(k, hz, units, &bench_res[k][r]);
            if (err < 0) {
                fprintf(stderr, "bench-perfring: %s failed\n", bench_names[k]);
                return 1;
            }
            if (err > 0) {
                fprintf(stderr, "bench-perfring: SKIP %s from now on\n", bench_names[k]);
                skipped[k] = 1;
            }
        }
    }
    printf("bench-perfring: %u units x %d rounds, %u Hz, %d frames deep, load average %.2f -> "
           "%.2f; medians [quartiles] over the rounds; per sample: CPU time above bare; gap: the "
           "median step that took one sample, above the normal step (the docs' step); paired: the "
           "windows with sampling less those without; irq: the median step "
           "interrupted without a sample; LOC, IWI: the machine's local timer and irq_work "
           "interrupts, slices: this thread's time slices, per sample above bare's rate\n",
           units, rounds, hz, bench_depth, load0, bench_loadavg());
    for (k = 0; k < CFG_N; k++) {
        if (skipped[k] == 1) {
            printf("  %-14s SKIPPED: refused by this kernel or not installed\n", bench_names[k]);
        } else if (!skipped[k]) {
            bench_report(k, rounds, units, sum);
        }
    }
    if (!skipped[CFG_GPERF] && sum[CFG_GPERF].inc > 0) {
        const struct bench_summary *g = &sum[CFG_GPERF];

        printf("  per sample against gperftools' (of the medians): paired / paired with the "
               "reader's CPU / the step (above a tick for the tick-bound) / the CPU time above "
               "bare\n");
        for (k = CFG_SIGNAL; k < CFG_GPERF; k++) {
            if (!skipped[k]) {
                printf("  %-14s %5.2f / %5.2f / %5.2f / %5.2f\n", bench_names[k],
                       g->paired != 0 ? sum[k].paired / g->paired : 0.0,
                       g->paired != 0 ? (sum[k].paired + sum[k].reader) / g->paired : 0.0,
                       sum[k].inc / g->inc, g->cost != 0 ? sum[k].cost / g->cost : 0.0);
            }
        }
    }
    return 0;
}
