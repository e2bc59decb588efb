/* SPDX-License-Identifier: MIT */
/*
 * agent/state.c - the agent's shared state (struct ag_agent ag, agent/internal.h) and the one
 * sleep its threads use (ag_wait_ms), at the bottom of the
 * agent's files: agent.c (lifecycle) uses threads.c, timer.c and wall.c; wall.c uses threads.c;
 * threads.c uses timer.c; all of them use this file, and none calls upwards. Context: any ordinary
 * thread.
 */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "agent/internal.h"

struct ag_agent ag = {
    .life_lock = PTHREAD_MUTEX_INITIALIZER,
    .reg_lock = PTHREAD_MUTEX_INITIALIZER,
    .drain_lock = PTHREAD_MUTEX_INITIALIZER,
    .wake_lock = PTHREAD_MUTEX_INITIALIZER,
};

int
ag_wait_ms(unsigned ms)
{
    struct timespec ts;
    unsigned seq;
    int stopping;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&ag.wake_lock);
    seq = ag.wake_seq;
    /* A wake (ag_wake_all: a new rate, a stop) ends the sleep at once: the wall thread's first
     * pass must not wait out a whole idle period. */
    while (!(stopping = atomic_load(&ag.stopping)) && ag.wake_seq == seq) {
        if (pthread_cond_timedwait(&ag.wake_cond, &ag.wake_lock, &ts) == ETIMEDOUT) {
            break;
        }
    }
    pthread_mutex_unlock(&ag.wake_lock);
    return stopping || atomic_load(&ag.stopping);
}
