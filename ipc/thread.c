/* SPDX-License-Identifier: MIT */
/*
 * ipc/thread.c - how ipc/ starts its threads (the loop thread, server.c; the runtime stream's
 * readers, merge.c): with every signal blocked, so no SIGPIPE from a vanished peer, no sampling
 * signal and no host handler ever runs on a thread the host does not know.
 * Context: any thread.
 */
#include <pthread.h>
#include <signal.h>

#include "ipc/internal.h"

int
ipc_thread_start(uv_thread_t *joinable, void (*fn)(void *), void *arg)
{
    uv_thread_t detached;
    sigset_t all, old;
    int err;

    /* The new thread inherits the mask: blocked from its first instruction. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = uv_thread_create(joinable != NULL ? joinable : &detached, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err == 0 && joinable == NULL) {
        pthread_detach(detached); /* uv_thread_t is a pthread_t on Unix */
    }
    return err;
}
