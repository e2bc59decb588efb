/* SPDX-License-Identifier: MIT */
/*
 * host/threads.c - thread creation.
 *
 *   pthread_create   interposed so that a new thread registers itself with the agent (its
 *                    stack bounds, its CPU timer, its start routine as the root of its stacks)
 *                    before its start routine runs: its first instructions can be sampled, and
 *                    CPU it burns before its first sample has a stack.
 *
 * What the host may rely on: its start routine runs on the new thread with its argument, and
 * its return value is the thread's; the result is libc's (EAGAIN when there is no libc
 * pthread_create to call). The wrapper allocates a small argument; when that fails the thread
 * is created unwrapped (the agent's /proc scan still finds it). Without the agent's hooks the
 * call goes straight to libc.
 *
 * Held by: test-agent-sampling (final_sample_of_an_unsampled_thread_has_its_start_routine: the
 * start routine is the root of a thread's first stack; short_lived_threads_start_and_stop:
 * thread churn while sampling), agent-torture (thread churn in a preloaded host whose output
 * must not change).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>

#include "host/internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define HOST_THREADS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOST_THREADS_ASAN 1
#endif
#endif
#ifdef HOST_THREADS_ASAN
#include <sanitizer/asan_interface.h>
#endif

HOST_ANCHOR(threads);

static _Atomic(void *) host_threads_real_create;

host_pthread_create_fn
host_real_pthread_create(void)
{
    return (host_pthread_create_fn)host_real(&host_threads_real_create, "pthread_create");
}

#ifdef HOST_THREADS_ASAN
/*
 * Under AddressSanitizer (the project's ASan build): the library's threads come from libc's
 * pthread_create, past ASan's interceptor, so ASan never clears the shadow of their stacks, as it
 * does for a thread it creates. libc hands a new thread a cached stack, and the shadow of that
 * memory can still hold the redzones of frames that were live on it: after fork() libc takes the
 * stacks of every thread but the caller's into its cache with whatever frames they held. A
 * manager thread so started in an output-file child had dl_iterate_phdr (libc, not
 * instrumented) put its dl_phdr_info over such stale redzones, and the agent's callback's read
 * of it was reported as a stack-buffer-overflow (CI, output-file, ASan stage). The thread clears
 * its stack's shadow before anything else, as ASan does for its own.
 */
struct host_spawn_arg {
    void *(*fn)(void *);
    void *arg;
};

static void *
host_spawn_trampoline(void *p)
{
    struct host_spawn_arg a = *(struct host_spawn_arg *)p;

    free(p);
    host_thread_clear_stack_shadow();
    return a.fn(a.arg);
}
#endif

void
host_thread_clear_stack_shadow(void)
{
#ifdef HOST_THREADS_ASAN
    pthread_attr_t attr;
    void *lo;
    size_t size;

    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        if (pthread_attr_getstack(&attr, &lo, &size) == 0) {
            __asan_unpoison_memory_region(lo, size);
        }
        pthread_attr_destroy(&attr);
    }
#endif
}

int
host_thread_spawn(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    host_pthread_create_fn real = host_real_pthread_create();
    sigset_t all, old;
    int rc;

    if (real == NULL) {
        return -ENOSYS;
    }
#ifdef HOST_THREADS_ASAN
    {
        struct host_spawn_arg *a = malloc(sizeof(*a));

        if (a == NULL) {
            return -ENOMEM;
        }
        a->fn = fn;
        a->arg = arg;
        sigfillset(&all);
        host_sigmask_raw(SIG_SETMASK, &all, &old);
        rc = real(th, attr, host_spawn_trampoline, a);
        host_sigmask_raw(SIG_SETMASK, &old, NULL);
        if (rc != 0) {
            free(a);
        }
        return -rc;
    }
#else
    sigfillset(&all);
    host_sigmask_raw(SIG_SETMASK, &all, &old);
    rc = real(th, attr, fn, arg);
    host_sigmask_raw(SIG_SETMASK, &old, NULL);
    return -rc;
#endif
}

struct host_start_arg {
    void *(*fn)(void *);
    void *arg;
    const struct host_agent_hooks *hooks;
};

static void *
host_trampoline(void *p)
{
    struct host_start_arg a = *(struct host_start_arg *)p;

    free(p);
    a.hooks->thread_started(a.fn, HOST_FA);
    return a.fn(a.arg);
}

HOST_EXPORT int
pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    host_pthread_create_fn real = host_real_pthread_create();
    const struct host_agent_hooks *hooks = host_agent();
    struct host_start_arg *a;
    int rc;

    if (real == NULL) {
        return EAGAIN;
    }
    a = hooks != NULL ? malloc(sizeof(*a)) : NULL;
    if (a == NULL) {
        return real(th, attr, fn, arg); /* unregistered: the /proc scan still finds it */
    }
    a->fn = fn;
    a->arg = arg;
    a->hooks = hooks;
    rc = real(th, attr, host_trampoline, a);
    if (rc != 0) {
        free(a);
    }
    return rc;
}
