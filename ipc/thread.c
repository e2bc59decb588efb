/* SPDX-License-Identifier: MIT */
/*
 * ipc/thread.c - how ipc/ starts its helper threads (the runtime stream's readers, merge.c):
 * with every signal blocked, so no SIGPIPE from a vanished peer, no sampling signal and no host
 * handler ever runs on a thread the host does not know.
 * Context: any thread.
 */
#include <pthread.h>
#include <signal.h>

#include "ipc/internal.h"

int
ipc_thread_start(void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    pthread_t thread;
    sigset_t all, old;
    int err;

    /* As the loop thread: no signal of the host's or of the sampler's ever lands here. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = pthread_attr_init(&attr);
    if (err == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        err = pthread_create(&thread, &attr, fn, arg);
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return -err;
}
