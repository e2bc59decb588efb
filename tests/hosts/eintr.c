/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/eintr.c - a host whose threads wait in calls the kernel never restarts after a
 * signal, each in a loop of 40 waits of 25 ms, and count how each wait ended: bare none ends in
 * EINTR (the host sends no signal), and under the agent sampling in wall mode at 1000 Hz none
 * may either. host-contract.sh compares the counts; host/eintr.c and host/blocking.c keep them.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hosts.h"

#define ROUNDS 40

struct counts {
    const char *name;
    int done, eintr, timeout, other;
};

static void
tally(struct counts *c, int rc, int err, int timeout_err)
{
    if (rc >= 0) {
        c->done++;
    } else if (err == EINTR) {
        c->eintr++;
    } else if (err == timeout_err) {
        c->timeout++;
    } else {
        c->other++;
    }
}

static const struct timespec wait25 = { 0, 25000000L };

static void *
t_pselect(void *p)
{
    struct counts *c = p;

    for (int i = 0; i < ROUNDS; i++) {
        fd_set r;
        int rc;

        FD_ZERO(&r);
        rc = pselect(0, &r, NULL, NULL, &wait25, NULL);
        tally(c, rc == 0 ? -1 : rc, rc == 0 ? ETIMEDOUT : errno, ETIMEDOUT);
    }
    return NULL;
}

static void *
t_sem_timedwait(void *p)
{
    struct counts *c = p;
    sem_t sem;

    sem_init(&sem, 0, 0);
    for (int i = 0; i < ROUNDS; i++) {
        struct timespec abs;
        int rc;

        clock_gettime(CLOCK_REALTIME, &abs);
        abs.tv_nsec += wait25.tv_nsec;
        if (abs.tv_nsec >= 1000000000L) {
            abs.tv_sec++;
            abs.tv_nsec -= 1000000000L;
        }
        rc = sem_timedwait(&sem, &abs);
        tally(c, rc, errno, ETIMEDOUT);
    }
    sem_destroy(&sem);
    return NULL;
}

static sem_t posted;

static void *
poster(void *p)
{
    (void)p;
    for (int i = 0; i < ROUNDS; i++) {
        nanosleep(&wait25, NULL);
        sem_post(&posted);
    }
    return NULL;
}

static void *
t_sem_wait(void *p)
{
    struct counts *c = p;
    pthread_t th;
    int got = 0;

    sem_init(&posted, 0, 0);
    pthread_create(&th, NULL, poster, NULL);
    while (got < ROUNDS) {
        int rc = sem_wait(&posted);

        tally(c, rc, errno, ETIMEDOUT);
        got += rc == 0;
        if (c->eintr + c->other > 10 * ROUNDS) {
            break;
        }
    }
    pthread_join(th, NULL);
    return NULL;
}

static void *
t_recv(void *p)
{
    struct counts *c = p;
    struct timeval tv = { 0, 25000 };
    char b;
    int sv[2];

    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    for (int i = 0; i < ROUNDS; i++) {
        ssize_t rc = recv(sv[0], &b, 1, 0);

        tally(c, (int)rc, errno, EAGAIN);
    }
    close(sv[0]);
    close(sv[1]);
    return NULL;
}

static void *
t_sigtimedwait(void *p)
{
    struct counts *c = p;
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    for (int i = 0; i < ROUNDS; i++) {
        int rc = sigtimedwait(&set, NULL, &wait25);

        tally(c, rc, errno, EAGAIN);
    }
    return NULL;
}

int
main(void)
{
    static const char *const names[] = { "pselect", "sem_timedwait", "sem_wait", "recv SO_RCVTIMEO",
                                         "sigtimedwait" };
    struct counts c[5];
    void *(*fn[])(void *) = { t_pselect, t_sem_timedwait, t_sem_wait, t_recv, t_sigtimedwait };
    pthread_t th[5];

    memset(c, 0, sizeof(c));
    host_wait_go();
    for (int i = 0; i < 5; i++) {
        c[i].name = names[i];
        pthread_create(&th[i], NULL, fn[i], &c[i]);
    }
    host_burn_us(300000);
    for (int i = 0; i < 5; i++) {
        pthread_join(th[i], NULL);
        printf("%s: %d done, %d EINTR, %d timed out, %d other\n", c[i].name, c[i].done, c[i].eintr,
               c[i].timeout, c[i].other);
    }
    return 0;
}
