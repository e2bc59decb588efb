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

#include "common/sanitizer.h"
#include "host/internal.h"

HOST_ANCHOR(threads);

static _Atomic(void *) host_threads_real_create;

host_pthread_create_fn
host_real_pthread_create(void)
{
    return (host_pthread_create_fn)host_real(&host_threads_real_create, "pthread_create");
}

#if defined(__SANITIZE_ADDRESS__)
struct host_spawn_arg {
    void *(*fn)(void *);
    void *arg;
};

/* A library thread under ASan: its stack's shadow is cleared before its start routine runs
 * (host_thread_spawn says why). */
static void *
host_spawn_trampoline(void *p)
{
    struct host_spawn_arg a = *(struct host_spawn_arg *)p;

    free(p);
    pp_asan_clear_own_stack();
    return a.fn(a.arg);
}
#endif

/*
 * Under ASan a library thread clears its stack's shadow first: the real pthread_create bypasses
 * ASan's interceptor, so ASan does not clear it as it does for the threads it starts, and glibc
 * may hand the thread a stack that held another thread's instrumented frames: one joined before,
 * or in a fork()ed child any parent thread's (glibc reclaims them there). ASan's redzones of
 * those dead frames then lay under the new thread's uninstrumented ones (libc's), and an
 * instrumented read of their data was reported: dl_iterate_phdr's dl_phdr_info, read by the
 * agent's callback on a forked child's manager thread (output-file in build-asan, about one run
 * of the fork case in 30).
 */
int
host_thread_spawn(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    host_pthread_create_fn real = host_real_pthread_create();
    sigset_t all, old;
    int rc;

    if (real == NULL) {
        return -ENOSYS;
    }
#if defined(__SANITIZE_ADDRESS__)
    struct host_spawn_arg *a = malloc(sizeof(*a));

    if (a == NULL) {
        return -ENOMEM;
    }
    a->fn = fn;
    a->arg = arg;
    fn = host_spawn_trampoline;
    arg = a;
#endif
    sigfillset(&all);
    host_sigmask_raw(SIG_SETMASK, &all, &old);
    rc = real(th, attr, fn, arg);
    host_sigmask_raw(SIG_SETMASK, &old, NULL);
#if defined(__SANITIZE_ADDRESS__)
    if (rc != 0) {
        free(a);
    }
#endif
    return -rc;
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
