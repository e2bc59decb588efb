/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/suspend.c - a host that waits in sigsuspend for the one signal it sent itself, the
 * way a daemon waits for its one SIGTERM or SIGCHLD: SIGUSR1 blocked, raised, then sigsuspend
 * with it open. Bare, every wait ends at once with EINTR after the handler ran. Two threads wait
 * so WAITS times each while sampled. A wait that has not ended after RESCUE_MS, its thread asleep,
 * is ended by a watchdog's SIGUSR2 and counted: the host's signal was swallowed (before
 * host/eintr.c blocked the library's signal for the wait, a retry after one of the agent's signals
 * in the same call waited for a next SIGUSR1 that never came). The output must be bare's: "rescued:
 * 0".
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hosts.h"

#define WAITERS   2
#define WAITS     2000
#define RESCUE_MS 300

static _Atomic int handled, rescued, ended, done;
static _Atomic unsigned progress[WAITERS];
static _Atomic int tids[WAITERS];

/* Whether thread tid sleeps (a starved thread on a loaded machine runs, or waits to: 'R'). */
static int
sleeping(int tid)
{
    char path[64], buf[256], *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' && p[2] == 'S';
}

static void
on_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&handled, 1);
}

static void
on_usr2(int sig)
{
    (void)sig;
}

static void *
waiter(void *p)
{
    int idx = (int)(intptr_t)p;
    sigset_t usr1, old, open_usr1;

    atomic_store(&tids[idx], gettid());
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, &old);
    open_usr1 = old;
    sigdelset(&open_usr1, SIGUSR1);
    sigdelset(&open_usr1, SIGUSR2);
    for (int i = 0; i < WAITS; i++) {
        int before = atomic_load(&handled);

        pthread_kill(pthread_self(), SIGUSR1);
        if (sigsuspend(&open_usr1) == -1 && errno == EINTR && atomic_load(&handled) > before) {
            atomic_fetch_add(&ended, 1);
        }
        atomic_fetch_add(&progress[idx], 1);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return NULL;
}

int
main(void)
{
    struct sigaction sa;
    struct timespec tick = { 0, RESCUE_MS * 1000000L };
    pthread_t th[WAITERS];
    unsigned seen[WAITERS] = { 0 };
    sigset_t usr2;

    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_usr1; /* no SA_RESTART: sigsuspend returns EINTR in any case */
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_usr2;
    sigaction(SIGUSR2, &sa, NULL);
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2); /* the watchdog's signal goes to a waiter only */
    pthread_sigmask(SIG_BLOCK, &usr2, NULL);
    host_wait_go();
    for (int i = 0; i < WAITERS; i++) {
        pthread_create(&th[i], NULL, waiter, (void *)(intptr_t)i);
    }
    /* the watchdog: a waiter that made no progress for RESCUE_MS sits in a swallowed wait */
    while (atomic_load(&done) < WAITERS) {
        nanosleep(&tick, NULL);
        atomic_store(&done, 0);
        for (int i = 0; i < WAITERS; i++) {
            unsigned now = atomic_load(&progress[i]);

            if (now >= WAITS) {
                atomic_fetch_add(&done, 1);
            } else if (now == seen[i] && sleeping(atomic_load(&tids[i]))) {
                atomic_fetch_add(&rescued, 1);
                pthread_kill(th[i], SIGUSR2);
            }
            seen[i] = now;
        }
    }
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(th[i], NULL);
    }
    printf("waits: %d\n", WAITERS * WAITS);
    printf("ended by the host's own signal: %d\n", atomic_load(&ended));
    printf("rescued: %d\n", atomic_load(&rescued));
    return 0;
}
