/* SPDX-License-Identifier: MIT */
/*
 * tests/dotnet/mixed/burn.c - the native half of the mixed test app: burn_native() spins for a
 * given CPU time in burn_inner(), and start_native_thread() starts a thread of its own that
 * does the same in native_thread_work(), so a profile has native time called from managed code
 * and native time on a thread the runtime never sees.
 */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

static volatile uint64_t burn_sink;

static uint64_t
burn_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void
burn_inner(uint64_t ns)
{
    uint64_t end = burn_cpu_ns() + ns, x = burn_sink;
    int i;

    do {
        for (i = 0; i < 5000; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
        }
    } while (burn_cpu_ns() < end);
    burn_sink = x;
}

/* Called from managed code (P/Invoke): burns ns of this thread's CPU time. */
__attribute__((visibility("default"), noinline)) void
burn_native(uint64_t ns)
{
    burn_inner(ns);
    burn_sink++;
}

__attribute__((noinline)) static void
native_thread_work(uint64_t ns)
{
    burn_inner(ns);
    burn_sink++;
}

static void *
native_thread_main(void *arg)
{
    native_thread_work((uint64_t)(uintptr_t)arg);
    return NULL;
}

/* Starts a native thread that burns ns of CPU time; returns 0 or an error number. */
__attribute__((visibility("default"))) int
start_native_thread(uint64_t ns)
{
    pthread_t t;
    int err = pthread_create(&t, NULL, native_thread_main, (void *)(uintptr_t)ns);

    if (err == 0) {
        pthread_detach(t);
    }
    return err;
}
