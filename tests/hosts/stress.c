/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/stress.c - host threads call the interposed functions of every concern of host/ in
 * a loop (signal masks and dispositions, fds made and closed, short waits, thread creation) while
 * a SIGALRM handler of the host's calls the async-signal-safe ones too; host-contract.sh's
 * "sessions" run starts and stops sessions against it meanwhile. Every result that is not what
 * bare gives is counted and printed: the output must stay bare's ("unexpected: 0").
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "hosts.h"

#define THREADS 4

static _Atomic int stop, unexpected, alarms;

static void
check(int ok, const char *what)
{
    if (!ok) {
        atomic_fetch_add(&unexpected, 1);
        fprintf(stderr, "unexpected: %s (errno %d)\n", what, errno);
    }
}

static void
on_alarm(int sig)
{
    int saved = errno, fd;
    sigset_t cur;
    struct sigaction old;

    (void)sig;
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
    }
    sigprocmask(SIG_BLOCK, NULL, &cur);
    sigaction(SIGUSR2, NULL, &old);
    poll(NULL, 0, 0);
    atomic_fetch_add(&alarms, 1);
    errno = saved;
}

static void *
nothing(void *p)
{
    return p;
}

static void *
worker(void *p)
{
    struct timespec zero = { 0, 0 }, tiny = { 0, 100000 };
    sigset_t set, old;
    sem_t sem;
    int i = 0;

    (void)p;
    sem_init(&sem, 0, 0);
    sigemptyset(&set);
    sigaddset(&set, SIGALRM); /* the host's own signal goes to the main thread */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    sigemptyset(&set);
    sigaddset(&set, SIGPROF);
    while (!atomic_load(&stop)) {
        int fds[2], fd, ep, s;
        fd_set r;
        char b;
        pthread_t th;
        struct sigaction sa;

        check(pthread_sigmask(SIG_BLOCK, &set, &old) == 0, "pthread_sigmask");
        host_burn_us(50);
        check(pthread_sigmask(SIG_SETMASK, &old, NULL) == 0, "pthread_sigmask restore");
        check(sigaction(SIGUSR2, NULL, &sa) == 0, "sigaction query");
        check(pipe(fds) == 0, "pipe");
        check(read(fds[0], &b, 0) == 0, "read 0");
        check(dup2(fds[0], fds[1]) == fds[1], "dup2");
        check(close(fds[0]) == 0 && close(fds[1]) == 0, "close pipe");
        fd = eventfd(0, EFD_CLOEXEC);
        ep = epoll_create1(EPOLL_CLOEXEC);
        s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        check(fd >= 0 && ep >= 0 && s >= 0, "eventfd/epoll/socket");
        check(fd < 100 && ep < 100 && s < 100, "low numbers for the host");
        close(fd);
        close(ep);
        close(s);
        check(poll(NULL, 0, 0) == 0, "poll");
        FD_ZERO(&r);
        check(pselect(0, &r, NULL, NULL, &zero, NULL) == 0, "pselect");
        check(nanosleep(&tiny, NULL) == 0, "nanosleep");
        check(sem_trywait(&sem) == -1 && errno == EAGAIN, "sem_trywait");
        if (++i % 50 == 0) {
            check(pthread_create(&th, NULL, nothing, NULL) == 0 && pthread_join(th, NULL) == 0,
                  "pthread_create/join");
        }
    }
    sem_destroy(&sem);
    return NULL;
}

int
main(void)
{
    struct itimerval it = { { 0, 2000 }, { 0, 2000 } }, off = { { 0, 0 }, { 0, 0 } };
    struct sigaction sa;
    pthread_t th[THREADS];

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    host_wait_go();
    for (int i = 0; i < THREADS; i++) {
        pthread_create(&th[i], NULL, worker, NULL);
    }
    setitimer(ITIMER_REAL, &it, NULL);
    for (int i = 0; i < 40; i++) { /* 4 s */
        struct timespec t = { 0, 100000000L };

        while (nanosleep(&t, &t) != 0 && errno == EINTR) {
        }
    }
    setitimer(ITIMER_REAL, &off, NULL);
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    printf("alarm handler ran: %s\n", atomic_load(&alarms) > 0 ? "yes" : "no");
    printf("unexpected: %d\n", atomic_load(&unexpected));
    return 0;
}
