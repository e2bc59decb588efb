/* SPDX-License-Identifier: MIT */
/*
 * samples/syscalls/main.c - a workload that measures itself, with much of its CPU in system
 * calls: each thread calls its phases' functions in turn and adds the CPU time each call burned
 * (CLOCK_THREAD_CPUTIME_ID, user and kernel time alike) to that function's total. A profile of
 * it is right when each function's share of the samples (its kernel time included) equals its
 * share of that CPU time.
 *
 *   sc_write / sc_compute  one thread, 5000 write(2) calls of 512 bytes to /dev/null (mostly
 *                          kernel time), then 1 M steps of arithmetic, in turn
 *   sc_io_write / sc_io_parse  an I/O-like thread: 2700 write(2) calls, 360 k steps of
 *                          arithmetic, 3 ms asleep (bursty)
 *   sc_zero                read(2) of /dev/zero, 16 KiB at a time, 9500 a phase (nearly all
 *                          kernel time)
 *   sc_busy                arithmetic, 4.5 M steps a phase
 *   sc_release / sc_fault  not run by default (MASK bit 4): one madvise(MADV_DONTNEED) of a
 *                          256-page region (a system call, some of the thread's kernel time),
 *                          then a store to each of its pages, each a page fault: kernel time
 *                          outside any system call, which must not go under the call made just
 *                          before (what a window that gives kernel time to the latest call seen
 *                          costs; docs/architecture.md, "Kernel time")
 *   sc_log / sc_crunch     not run by default (MASK bit 5): 2000 write(2) calls (about 0.5 ms),
 *                          then 45 M steps of arithmetic (about 50 ms): a compute thread that
 *                          makes a call now and then, whose kernel time outside the calls
 *                          (interrupts, preemption, its own samples' delivery) is not theirs
 *
 * On the 2-vCPU VM of docs/performance.md a write costs about 220 ns of CPU, a read 530 ns, a
 * step 1.1 ns (a cycle of the first thread, 2.2 ms, is no multiple of a 1 or 4 ms interval): the
 * phases last about 1.1, 1.1, 0.6, 0.4, 5 and 5 ms when the thread has a core. Each phase's work
 * and each sleep is from half to one and a half times its mean (sc_jitter).
 *
 * usage: pp-sample-syscalls [SECONDS [OUT.json [MASK]]] (default 3 s; MASK, a number, runs only the
 * threads whose bit is set, in the order above, default the first four): {"sc_write": ns, ...} plus
 * "_outside": the threads' CPU time in none of those functions (between the phases: the CPU-time
 * reads that time them, the loop, a sleep's own kernel time), which a profile shows under sc_main,
 * "_switches": their involuntary context switches, "_at_reads": how many of them came across the
 * reads of the CPU time at a phase boundary (see sc_cpu_ns), and
 * "_stime": the kernel time of all the threads as getrusage(RUSAGE_THREAD) reports it (sampled by
 * the kernel at its tick, so only roughly what the profile's [kernel] frames should add up to).
 * Built with and without frame pointers (the CMake file builds both).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

#define SC_NOINLINE __attribute__((noinline, used))

/* Written by every burning thread: relaxed atomics, so the threads share it without a data
 * race (ThreadSanitizer reported the plain volatile one); on x86-64 and aarch64 the same loads
 * and stores as before. */
static _Atomic uint64_t sc_sink;
static double sc_seconds = 3.0;
static int sc_null = -1, sc_zero_fd = -1;
static unsigned char *sc_region; /* sc_release/sc_fault's pages */
static const uint64_t sc_region_pages = 256;

/* The work, inlined into each function a profile must name (a function under another would
 * count for both). A phase is an amount of work, not of time: a phase timed by the clock is cut
 * short when its thread waits for a core, so on a loaded machine which phase a thread resumes in
 * would depend on the sampler's own timing, and a sample's weight (the CPU since the previous
 * one) would carry the other phase's time (up to 15 % of the thread's CPU moved between its two
 * functions with three busy loops beside it, under either engine). */
static inline __attribute__((always_inline)) void
sc_write_n(uint64_t n)
{
    static const char buf[512];

    for (uint64_t i = 0; i < n; i++) {
        if (write(sc_null, buf, sizeof(buf)) < 0) {
            abort();
        }
    }
}

static inline __attribute__((always_inline)) void
sc_compute_n(uint64_t n)
{
    uint64_t x = atomic_load_explicit(&sc_sink, memory_order_relaxed);

    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
    }
    atomic_store_explicit(&sc_sink, x, memory_order_relaxed);
}

SC_NOINLINE static void
sc_write(uint64_t n)
{
    sc_write_n(n);
}

SC_NOINLINE static void
sc_compute(uint64_t n)
{
    sc_compute_n(n);
}

SC_NOINLINE static void
sc_io_write(uint64_t n)
{
    sc_write_n(n);
}

SC_NOINLINE static void
sc_io_parse(uint64_t n)
{
    sc_compute_n(n);
}

SC_NOINLINE static void
sc_zero(uint64_t n)
{
    static char buf[16384];

    for (uint64_t i = 0; i < n; i++) {
        if (read(sc_zero_fd, buf, sizeof(buf)) < 0) {
            abort();
        }
    }
}

/* n is unused: the region is the amount (its pages are given back whole, then touched). */
SC_NOINLINE static void
sc_release(uint64_t n)
{
    (void)n;
    if (madvise(sc_region, sc_region_pages * 4096, MADV_DONTNEED) != 0) {
        abort();
    }
}

SC_NOINLINE static void
sc_fault(uint64_t n)
{
    (void)n;
    for (uint64_t i = 0; i < sc_region_pages; i++) {
        ((volatile unsigned char *)sc_region)[i * 4096] = (unsigned char)i;
    }
}

SC_NOINLINE static void
sc_log(uint64_t n)
{
    sc_write_n(n);
}

SC_NOINLINE static void
sc_crunch(uint64_t n)
{
    sc_compute_n(n);
}

SC_NOINLINE static void
sc_busy(uint64_t n)
{
    sc_compute_n(n);
}

/* The phases are timed by a task-clock counter of the thread (perf_event_open, counting only, read
 * with read(2)), not by clock_gettime(CLOCK_THREAD_CPUTIME_ID): a read of the thread's own CPU
 * clock brings the scheduler's accounting of it up to date (update_curr), and a thread whose time
 * slice is used up while another waits for its core is switched out right there. Beside two busy
 * loops 192 of a thread's 394 involuntary switches came at such a read made once every 1.1 ms, 1
 * at a getppid() made as often, and 0 of 455 at the counter's read. So the thread's runs began and
 * ended at its phase boundaries, and a sampler that sees it only at the ticks where it runs (the
 * timer engine) read the write phase 2 to 4 points of the profile off (docs/architecture.md,
 * "The tick's bias"), an error of the workload's accounting, not of the profiler. Where
 * perf_event_open is refused the clock is read, and stderr says so. */
static __thread int sc_task_clock = -1;

static void
sc_cpu_open(void)
{
    static int said;

    sc_task_clock = pp_task_clock_open();
    if (sc_task_clock < 0 && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED)) {
        perror("pp-sample-syscalls: no task-clock counter, phases timed by the thread's CPU clock "
               "(its reads are preemption points: a tick-sampled profile of a starved thread reads "
               "its split off)");
    }
}

/* The thread's CPU time, user and kernel, in nanoseconds. */
static uint64_t
sc_cpu_ns(void)
{
    return pp_task_clock_ns(sc_task_clock);
}

/* One thread: its phases in turn, each function's CPU time summed. */
struct sc_phase {
    const char *name;
    void (*fn)(uint64_t ns);
    uint64_t n;   /* mean units of work per call (about 1 ns of CPU each: see main) */
    uint64_t cpu; /* CPU time burned in it */
};

struct sc_thread {
    struct sc_phase phase[2];
    int phases;
    uint64_t sleep_ns; /* mean time asleep after the phases */
    uint64_t stime;    /* the thread's kernel time at its end */
    uint64_t outside;  /* its CPU time in none of its phases (see sc_main) */
    uint64_t switches; /* its involuntary context switches */
    uint64_t at_reads; /* of them, seen at its CPU-time reads (a wait of over 50 us across one) */
};

static uint64_t
sc_stime(void)
{
    struct rusage ru;

    getrusage(RUSAGE_THREAD, &ru);
    return (uint64_t)ru.ru_stime.tv_sec * 1000000000u + (uint64_t)ru.ru_stime.tv_usec * 1000u;
}

/* An amount from half to one and a half times mean: work in step with the sampling interval
 * (a 250 Hz tick, a perf period) would put every sample in the same phase of it, and a profile's
 * error would measure that beat instead of the profiler. */
static uint64_t
sc_jitter(uint64_t mean, unsigned *seed)
{
    return mean / 2 + (uint64_t)rand_r(seed) % (mean != 0 ? mean : 1);
}

/* sc_cpu_ns() at a phase boundary, counting a wait for a core across the read (wall time over
 * 50 us where the read costs about 1 us): what tests/agent-groundtruth-syscalls.sh holds to a
 * small part of the thread's involuntary switches. */
static uint64_t
sc_boundary(struct sc_thread *t)
{
    uint64_t m = pp_clock_ns(CLOCK_MONOTONIC), cpu = sc_cpu_ns();

    t->at_reads += pp_clock_ns(CLOCK_MONOTONIC) - m > 50000;
    return cpu;
}

static uint64_t
sc_nivcsw(void)
{
    struct rusage ru;

    getrusage(RUSAGE_THREAD, &ru);
    return (uint64_t)ru.ru_nivcsw;
}

static void *
sc_main(void *p)
{
    struct sc_thread *t = p;
    uint64_t start, in_phases = 0;
    uint64_t until = pp_clock_ns(CLOCK_MONOTONIC) + (uint64_t)(sc_seconds * 1e9);
    unsigned seed = (unsigned)(uintptr_t)t;

    sc_cpu_open();
    t->switches = sc_nivcsw();
    start = sc_cpu_ns();
    while (pp_clock_ns(CLOCK_MONOTONIC) < until) {
        for (int i = 0; i < t->phases; i++) {
            uint64_t c0 = sc_boundary(t);

            t->phase[i].fn(sc_jitter(t->phase[i].n, &seed));
            t->phase[i].cpu += sc_boundary(t) - c0;
        }
        if (t->sleep_ns != 0) {
            pp_sleep_ns(sc_jitter(t->sleep_ns, &seed));
        }
    }
    /* The CPU between the phases (the two CPU-time reads around each phase, system calls of about
     * 0.5 us, the sleep's own kernel time, the loop) is the thread's too, and a profile shows it
     * under sc_main: 0.1 to 0.4 % of the samples. A truth without it in its total read every
     * function's share low by that fraction of it (sc_busy and sc_zero 0.13 points low over
     * pools of 8 to 10 runs, docs/architecture.md, "Kernel time"). */
    for (int i = 0; i < t->phases; i++) {
        in_phases += t->phase[i].cpu;
    }
    t->outside = sc_cpu_ns() - start - in_phases;
    t->switches = sc_nivcsw() - t->switches;
    if (sc_task_clock >= 0) {
        close(sc_task_clock);
    }
    t->stime = sc_stime();
    return NULL;
}

int
main(int argc, char **argv)
{
    struct sc_thread threads[] = {
        { .phase = { { "sc_write", sc_write, 5000, 0 }, { "sc_compute", sc_compute, 1000000, 0 } },
          .phases = 2 },
        { .phase = { { "sc_io_write", sc_io_write, 2700, 0 },
                     { "sc_io_parse", sc_io_parse, 360000, 0 } },
          .phases = 2,
          .sleep_ns = 3000000 },
        { .phase = { { "sc_zero", sc_zero, 9500, 0 } }, .phases = 1 },
        { .phase = { { "sc_busy", sc_busy, 4500000, 0 } }, .phases = 1 },
        { .phase = { { "sc_release", sc_release, 1, 0 }, { "sc_fault", sc_fault, 1, 0 } },
          .phases = 2 },
        { .phase = { { "sc_log", sc_log, 2000, 0 }, { "sc_crunch", sc_crunch, 45000000, 0 } },
          .phases = 2 },
    };
    enum { N = sizeof(threads) / sizeof(threads[0]) };
    pthread_t th[N];
    FILE *out = stdout;
    uint64_t stime = 0, outside = 0, switches = 0, at_reads = 0;
    unsigned long mask = argc > 3 ? strtoul(argv[3], NULL, 0) : 15ul;

    if (argc > 1) {
        sc_seconds = atof(argv[1]);
    }
    if (argc > 2 && (out = fopen(argv[2], "w")) == NULL) {
        perror(argv[2]);
        return 1;
    }
    sc_null = open("/dev/null", O_WRONLY);
    sc_zero_fd = open("/dev/zero", O_RDONLY);
    if (sc_null < 0 || sc_zero_fd < 0) {
        perror("/dev/null or /dev/zero");
        return 1;
    }
    sc_region = mmap(NULL, sc_region_pages * 4096, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (sc_region == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (int i = 0; i < N; i++) {
        if (!(mask & (1ul << i))) {
            threads[i].phases = 0;
            continue;
        }
        if (pthread_create(&th[i], NULL, sc_main, &threads[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    for (int i = 0; i < N; i++) {
        if (threads[i].phases != 0) {
            pthread_join(th[i], NULL);
        }
    }
    fprintf(out, "{");
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < threads[i].phases; j++) {
            fprintf(out, "\"%s\": %llu, ", threads[i].phase[j].name,
                    (unsigned long long)threads[i].phase[j].cpu);
        }
        stime += threads[i].stime;
        outside += threads[i].outside;
        switches += threads[i].switches;
        at_reads += threads[i].at_reads;
    }
    fprintf(out,
            "\"_outside\": %llu, \"_switches\": %llu, \"_at_reads\": %llu, \"_stime\": %llu}\n",
            (unsigned long long)outside, (unsigned long long)switches, (unsigned long long)at_reads,
            (unsigned long long)stime);
    if (out != stdout) {
        fclose(out);
    }
    return 0;
}
