/* SPDX-License-Identifier: MIT */
/*
 * samples/torture/main.c - a host that checks it was not harmed by a profiler sampling it at
 * its highest rate. While threads churn, it forks, forks and execs, dlopens and dlcloses, runs
 * its own signal handler, recurses deeply, spins with a corrupted frame pointer, and checks that
 * every sleep, poll and read waited its full time and returned what it should. Its output is
 * the same with and without a profiler, and its exit status is 0 only when every check held.
 * Usage: pp-sample-torture. Context: x86_64 Linux (the frame-pointer check is x86_64 only).
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int pp_torture_failures;
static char pp_torture_why[160]; /* what the first failure of the current check saw, or "" */

static void
pp_torture_check(int ok, const char *what)
{
    printf("%s: %s%s%s\n", what, ok ? "ok" : "FAILED", !ok && pp_torture_why[0] ? ": " : "",
           !ok ? pp_torture_why : "");
    if (!ok) {
        pp_torture_failures++;
    }
    pp_torture_why[0] = '\0';
}

/* Waits for child pid and says whether it exited with status want; the first child that did not
 * is described in pp_torture_why (a failure printed as FAILED alone cannot be told apart). */
static int
pp_torture_reap(pid_t pid, int want)
{
    int status = 0, err = 0;
    pid_t got = -1;

    if (pid > 0) {
        got = waitpid(pid, &status, 0);
        err = errno;
    }
    if (got == pid && WIFEXITED(status) && WEXITSTATUS(status) == want) {
        return 1;
    }
    if (pp_torture_why[0] == '\0') {
        if (pid <= 0) {
            snprintf(pp_torture_why, sizeof(pp_torture_why), "fork failed");
        } else if (got != pid) {
            snprintf(pp_torture_why, sizeof(pp_torture_why), "waitpid returned %d (%s)", (int)got,
                     strerror(err));
        } else if (WIFSIGNALED(status)) {
            snprintf(pp_torture_why, sizeof(pp_torture_why), "a child killed by signal %d (%s)",
                     WTERMSIG(status), strsignal(WTERMSIG(status)));
        } else {
            snprintf(pp_torture_why, sizeof(pp_torture_why), "a child's status 0x%x, %d wanted",
                     (unsigned)status, want);
        }
    }
    return 0;
}

static double
pp_torture_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *
pp_torture_short_thread(void *arg)
{
    volatile unsigned long x = (uintptr_t)arg;
    int i;

    for (i = 0; i < 20000; i++) {
        x = x * 31 + 7;
    }
    return (void *)(uintptr_t)(x & 1);
}

static _Atomic int pp_torture_stop;

/* Churns threads until told to stop; returns how many were created and joined. */
static void *
pp_torture_churn(void *arg)
{
    unsigned long n = 0;

    (void)arg;
    while (!atomic_load(&pp_torture_stop)) {
        pthread_t t[8];
        int i;

        for (i = 0; i < 8; i++) {
            if (pthread_create(&t[i], NULL, pp_torture_short_thread, (void *)(uintptr_t)i) != 0) {
                return (void *)0;
            }
        }
        for (i = 0; i < 8; i++) {
            pthread_join(t[i], NULL);
        }
        n += 8;
    }
    return (void *)(uintptr_t)n;
}

static _Atomic int pp_torture_signals;

static void
pp_torture_on_usr1(int signo)
{
    (void)signo;
    atomic_fetch_add(&pp_torture_signals, 1);
}

__attribute__((noinline)) static unsigned long
pp_torture_recurse(int depth)
{
    volatile unsigned long spin = 0;
    unsigned long i;

    if (depth == 0) {
        for (i = 0; i < 30000000UL; i++) {
            spin += i;
        }
        return spin & 1;
    }
    return pp_torture_recurse(depth - 1) + (unsigned long)(depth & 1);
}

/* Spins with rbp pointing at garbage, as code built without frame pointers may leave it. */
static void
pp_torture_corrupt_fp_spin(unsigned long iters)
{
#if defined(__x86_64__)
    __asm__ volatile("mov %%rbp, %%r11\n\t"
                     "mov $0xdeadbeef1, %%rbp\n\t"
                     "1: dec %0\n\t"
                     "jnz 1b\n\t"
                     "mov %%r11, %%rbp\n\t"
                     : "+r"(iters)
                     :
                     : "r11", "cc", "memory");
#else
    volatile unsigned long x = iters;

    while (x-- > 0) {
    }
#endif
}

struct pp_torture_pipe {
    int fd;
    double delay;
};

static void *
pp_torture_late_writer(void *arg)
{
    struct pp_torture_pipe *p = arg;
    struct timespec ts = { 0, (long)(p->delay * 1e9) };

    nanosleep(&ts, NULL);
    return (void *)(intptr_t)write(p->fd, "x", 1);
}

int
main(void)
{
    struct sigaction sa;
    pthread_t churn, writer;
    void *churned = NULL;
    int i, ok, fds[2];
    double t0, t;
    pid_t pid;

    setvbuf(stdout, NULL, _IOLBF, 0);
    pthread_create(&churn, NULL, pp_torture_churn, NULL);

    /* Sleeps and polls must wait their full time: a profiler's signal must not cut them short. */
    for (ok = 1, i = 0; i < 20; i++) {
        t0 = pp_torture_now();
        if (usleep(20000) != 0) {
            ok = 0;
        }
        ok &= pp_torture_now() - t0 >= 0.0195;
    }
    pp_torture_check(ok, "usleep waits its full time");
    for (ok = 1, i = 0; i < 20; i++) {
        struct timespec ts = { 0, 20000000L };

        t0 = pp_torture_now();
        ok &= nanosleep(&ts, NULL) == 0 && pp_torture_now() - t0 >= 0.0195;
    }
    pp_torture_check(ok, "nanosleep waits its full time");
    for (ok = 1, i = 0; i < 20; i++) {
        t0 = pp_torture_now();
        ok &= poll(NULL, 0, 20) == 0 && pp_torture_now() - t0 >= 0.0195;
    }
    pp_torture_check(ok, "poll waits its full time");
    for (ok = 1, i = 0; i < 5; i++) {
        struct pp_torture_pipe p;
        char c = 0;

        if (pipe(fds) != 0) {
            ok = 0;
            break;
        }
        p.fd = fds[1];
        p.delay = 0.05;
        t0 = pp_torture_now();
        pthread_create(&writer, NULL, pp_torture_late_writer, &p);
        ok &= read(fds[0], &c, 1) == 1 && c == 'x' && pp_torture_now() - t0 >= 0.045;
        pthread_join(writer, NULL);
        close(fds[0]);
        close(fds[1]);
    }
    pp_torture_check(ok, "read blocks until data arrives");

    /* Its own signal handler keeps working. */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = pp_torture_on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    for (i = 0; i < 1000; i++) {
        raise(SIGUSR1);
    }
    pp_torture_check(atomic_load(&pp_torture_signals) == 1000,
                     "own SIGUSR1 handler runs 1000 times");

    /* fork, and fork + exec. */
    for (ok = 1, i = 0; i < 20; i++) {
        pid = fork();
        if (pid == 0) {
            _exit(pp_torture_short_thread((void *)7) != NULL ? 7 : 8);
        }
        ok &= pp_torture_reap(pid, 7);
    }
    pp_torture_check(ok, "fork: 20 children exit with their status");
    for (ok = 1, i = 0; i < 10; i++) {
        pid = fork();
        if (pid == 0) {
            execl("/bin/sh", "sh", "-c", "exit 3", (char *)NULL);
            _exit(99);
        }
        ok &= pp_torture_reap(pid, 3);
    }
    pp_torture_check(ok, "fork+exec: 10 children exit with their status");

    /* dlopen and dlclose churn. */
    for (ok = 1, i = 0; i < 50; i++) {
        void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
        const char *(*version)(void) =
                h != NULL ? (const char *(*)(void))dlsym(h, "zlibVersion") : NULL;

        ok &= version != NULL && version()[0] == '1';
        if (h != NULL) {
            dlclose(h);
        }
    }
    pp_torture_check(ok, "dlopen/dlclose of libz 50 times");

    /* Deep recursion and a corrupted frame pointer, both burning CPU so they are sampled. */
    pp_torture_check(pp_torture_recurse(5000) == 2500, "recursion 5000 deep");
    t = pp_torture_now();
    pp_torture_corrupt_fp_spin(600000000UL);
    pp_torture_check(pp_torture_now() - t > 0.0, "spin with a corrupted frame pointer");

    atomic_store(&pp_torture_stop, 1);
    pthread_join(churn, &churned);
    pp_torture_check(churned != NULL, "thread churn created and joined threads");
    printf("torture: %s\n", pp_torture_failures == 0 ? "all checks held" : "FAILED");
    return pp_torture_failures == 0 ? 0 : 1;
}
