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

HOST_ANCHOR(threads);

static _Atomic(void *) host_threads_real_create;

host_pthread_create_fn
host_real_pthread_create(void)
{
    return (host_pthread_create_fn)host_real(&host_threads_real_create, "pthread_create");
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
    sigfillset(&all);
    host_sigmask_raw(SIG_SETMASK, &all, &old);
    rc = real(th, attr, fn, arg);
    host_sigmask_raw(SIG_SETMASK, &old, NULL);
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
