/* SPDX-License-Identifier: MIT */
/* tools/tsan-facts/context-edit.c - built plain and with TSan by run.sh. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

/* A handler installed with SA_RESTART that turns the restarted read into EINTR by editing its
 * ucontext (as the agent's chain does for a host handler without SA_RESTART). */
static int fds[2];
static volatile int runs, edited;
static pid_t reader;

static void
on_prof(int sig, siginfo_t *si, void *uc_)
{
    ucontext_t *uc = uc_;
    greg_t *r = uc->uc_mcontext.gregs;
    const unsigned char *at = (const unsigned char *)r[REG_RIP];
    (void)sig;
    (void)si;
    runs++;
    if (r[REG_RCX] == r[REG_RIP] + 2 && at[0] == 0x0f && at[1] == 0x05 && r[REG_RAX] == SYS_read) {
        r[REG_RAX] = -EINTR;
        r[REG_RIP] += 2;
        edited++;
    }
}

static void *
writer(void *a)
{
    (void)a;
    usleep(200000);
    syscall(SYS_tgkill, getpid(), reader, SIGPROF); /* while the reader blocks in read */
    usleep(800000);
    if (write(fds[1], "x", 1) != 1)
        perror("write");
    return NULL;
}

int
main(void)
{
    struct sigaction sa;
    pthread_t th;
    char c;
    ssize_t n;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_prof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
    if (pipe(fds) != 0)
        return 1;
    reader = (pid_t)syscall(SYS_gettid);
    pthread_create(&th, NULL, writer, NULL);
    n = read(fds[0], &c, 1);
    printf("read returned %zd (%s), handler runs %d, contexts edited %d\n", n,
           n < 0 ? strerror(errno) : "a byte", runs, edited);
    pthread_join(th, NULL);
    return 0;
}
