/* SPDX-License-Identifier: MIT */
/*
 * tests/dotnet/mixed/burn.c - the native half of the mixed test app (libburn.so, built -O2
 * without frame pointers, so a profiler must unwind it by CFI):
 *   - burn_native() is called from managed code (P/Invoke) and spins in burn_inner();
 *   - start_native_thread() starts a thread the runtime never sees, which spins in
 *     native_thread_work(): a fixed number of work units, or, paced by the calling thread's CPU
 *     clock, a fixed fraction of that thread's CPU time until stop_native_thread();
 *   - burn_thread_cpu_ns(), burn_process_cpu_ns() and burn_monotonic_ns() are the clocks the
 *     app measures itself with (CLOCK_MONOTONIC is the clock of the runtime's timestamps).
 * Work is counted in units of BURN_UNIT_ITERS steps of a 64-bit LCG, the same in C# and here.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define BURN_UNIT_ITERS 10000

static volatile uint64_t burn_sink;

static uint64_t
burn_clock_ns(clockid_t clk)
{
    struct timespec ts;

    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The calling thread's CPU time in ns. */
__attribute__((visibility("default"))) uint64_t
burn_thread_cpu_ns(void)
{
    return burn_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* The process's CPU time in ns (every thread, the runtime's and a profiler's included). */
__attribute__((visibility("default"))) uint64_t
burn_process_cpu_ns(void)
{
    return burn_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

/* CLOCK_MONOTONIC in ns. */
__attribute__((visibility("default"))) uint64_t
burn_monotonic_ns(void)
{
    return burn_clock_ns(CLOCK_MONOTONIC);
}

/* Burns exactly units work units, or with units == 0 until ns more of this thread's CPU time. */
__attribute__((noinline)) static void
burn_inner(uint64_t ns, uint64_t units)
{
    uint64_t end = burn_thread_cpu_ns() + ns, x = burn_sink, n;
    int i;

    for (n = 0; units == 0 || n < units; n++) {
        for (i = 0; i < BURN_UNIT_ITERS; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
        }
        if (units == 0 && burn_thread_cpu_ns() >= end) {
            break;
        }
    }
    burn_sink = x;
}

/* Called from managed code (P/Invoke): burns units work units, or ns of CPU time if units is 0. */
__attribute__((visibility("default"), noinline)) void
burn_native(uint64_t ns, uint64_t units)
{
    burn_inner(ns, units);
    burn_sink++;
}

struct burn_pace {
    clockid_t leader;   /* the CPU clock of the thread that started us */
    uint64_t leader_t0; /* its CPU time then */
    uint64_t permille;  /* our CPU time as a fraction of the leader's since then */
    uint64_t units;     /* or a fixed number of units (permille unused) */
};

static struct burn_pace burn_pace;
static pthread_t burn_thread;
static atomic_int burn_thread_started;
static atomic_int burn_stop;
static _Atomic uint64_t burn_thread_ns; /* the native thread's CPU time, as it last measured it */

__attribute__((noinline)) static void
native_thread_work(const struct burn_pace *p)
{
    const struct timespec nap = { 0, 1000000 };

    if (p->units != 0) {
        burn_inner(0, p->units);
    }
    while (p->units == 0 && !atomic_load(&burn_stop)) {
        uint64_t want = (burn_clock_ns(p->leader) - p->leader_t0) * p->permille / 1000;

        if (burn_thread_cpu_ns() < want) {
            burn_inner(1000000, 0);
        } else {
            nanosleep(&nap, NULL);
        }
        atomic_store(&burn_thread_ns, burn_thread_cpu_ns());
    }
    atomic_store(&burn_thread_ns, burn_thread_cpu_ns());
    burn_sink++;
}

static void *
native_thread_main(void *arg)
{
    pthread_setname_np(pthread_self(), "mixed-native");
    native_thread_work(arg);
    return NULL;
}

/*
 * Starts the native thread: with units > 0 it burns that many units; otherwise it keeps its CPU
 * time at permille/1000 of the calling thread's (from now on) until stop_native_thread().
 * Returns 0 or an error number (EBUSY if it was started already).
 */
__attribute__((visibility("default"))) int
start_native_thread(uint64_t permille, uint64_t units)
{
    int err;

    if (atomic_exchange(&burn_thread_started, 1)) {
        return EBUSY;
    }
    err = pthread_getcpuclockid(pthread_self(), &burn_pace.leader);
    if (err != 0) {
        return err;
    }
    burn_pace.leader_t0 = burn_clock_ns(burn_pace.leader);
    burn_pace.permille = permille;
    burn_pace.units = units;
    return pthread_create(&burn_thread, NULL, native_thread_main, &burn_pace);
}

/* The native thread's CPU time in ns as of its last work chunk (1 ms of CPU at most ago). */
__attribute__((visibility("default"))) uint64_t
native_thread_cpu_ns(void)
{
    return atomic_load(&burn_thread_ns);
}

/* Stops the native thread (a fixed amount of work is finished first), waits for it and returns
 * its CPU time in ns. */
__attribute__((visibility("default"))) uint64_t
stop_native_thread(void)
{
    if (atomic_load(&burn_thread_started)) {
        atomic_store(&burn_stop, 1);
        pthread_join(burn_thread, NULL);
    }
    return atomic_load(&burn_thread_ns);
}
