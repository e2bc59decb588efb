/* SPDX-License-Identifier: MIT */
/* tools/tsan-facts/one-instance.c - built plain and with TSan by run.sh. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Two instances of SIGPROF for one thread that burns CPU without a call: one sent to the thread
 * (tgkill, SI_TKILL), one to the process (kill, SI_USER) while every other thread blocks it. The
 * kernel keeps them apart (thread and process pending sets): the handler runs twice. */
static _Atomic int tkill_runs, user_runs, ready;
static _Atomic pid_t tid;

static void
on_prof(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    if (si->si_code == SI_TKILL)
        tkill_runs++;
    else if (si->si_code == SI_USER)
        user_runs++;
    else
        fprintf(stderr, "code %d\n", si->si_code);
}

static void *
burn(void *a)
{
    volatile unsigned long x = 0;
    sigset_t prof;
    (void)a;
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
    tid = (pid_t)syscall(SYS_gettid);
    ready = 1;
    for (unsigned long i = 0; i < 1000000000UL; i++)
        x += i;   /* no call: no TSan processing point */
    usleep(1000); /* an interceptor: TSan runs what it deferred */
    return NULL;
}

int
main(void)
{
    struct sigaction sa;
    sigset_t prof;
    pthread_t th;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_prof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &prof, NULL); /* the process's instance goes to the burner */
    pthread_create(&th, NULL, burn, NULL);
    while (!ready)
        usleep(1000);
    usleep(20000);
    syscall(SYS_tgkill, getpid(), tid, SIGPROF);
    usleep(20000);
    kill(getpid(), SIGPROF);
    pthread_join(th, NULL);
    printf("handler runs: thread-directed %d, process-directed %d\n", tkill_runs, user_runs);
    return 0;
}
