/* SPDX-License-Identifier: MIT */
/*
 * tests/tools/record-daemon.c - the host of tests/cli-record-daemon.sh: a daemon that double-forks
 * and is recorded only once its middle parent has gone.
 *
 * usage: record-daemon daemon PPID_FILE   fork; the child calls setsid(), waits 50 ms (its agent
 *                                         starts 5 ms after its fork), forks and exits; the
 *                                         grandchild waits until it has been reparented, writes
 *                                         "ppid N" to PPID_FILE, burns 300 ms of its own CPU in
 *                                         record_daemon_work and exits. The first process exits
 *                                         once the grandchild has (the end of a pipe it holds),
 *                                         so the recording lasts as long as the daemon
 *        record-daemon daemon-now PPID_FILE
 *                                         the same, the child's second fork at once after its
 *                                         setsid(), before its own agent has started (as most
 *                                         daemons do it)
 *        record-daemon burn MS            burns MS ms of CPU in record_daemon_outside_work
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long record_daemon_sink;

/* The calling thread's CPU, not the process's: the process's counts the daemon's agent threads
 * too (their start 5 ms after the fork, their module and unwind tables), which under ASan may
 * take much of a 300 ms budget and end the work early. */
static long
record_daemon_cpu_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
record_daemon_spin(long ms)
{
    long end = record_daemon_cpu_ms() + ms;
    unsigned long i;

    while (record_daemon_cpu_ms() < end) {
        for (i = 0; i < 100000; i++) {
            record_daemon_sink += i * 7;
        }
    }
}

__attribute__((noinline)) static void
record_daemon_work(long ms)
{
    record_daemon_spin(ms);
}

__attribute__((noinline)) static void
record_daemon_outside_work(long ms)
{
    record_daemon_spin(ms);
}

static int
record_daemon_run(const char *ppid_file, long wait_ns)
{
    int p[2];
    char c;
    pid_t middle;

    if (pipe(p) != 0) {
        return 1;
    }
    middle = fork();
    if (middle < 0) {
        return 1;
    }
    if (middle == 0) {
        pid_t me = getpid(), daemon;
        struct timespec wait = { 0, wait_ns };
        FILE *f;

        close(p[0]);
        setsid();
        if (wait_ns != 0) {
            nanosleep(&wait, NULL);
        }
        daemon = fork();
        if (daemon != 0) {
            _exit(daemon < 0);
        }
        while (getppid() == me) {
            struct timespec ms = { 0, 1000000 };

            nanosleep(&ms, NULL);
        }
        f = fopen(ppid_file, "w");
        if (f == NULL) {
            _exit(1);
        }
        fprintf(f, "ppid %ld\n", (long)getppid());
        fclose(f);
        record_daemon_work(300);
        _exit(0);
    }
    close(p[1]);
    waitpid(middle, NULL, 0);
    while (read(p[0], &c, 1) > 0) {
    }
    return 0;
}

int
main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "daemon") == 0) {
        return record_daemon_run(argv[2], 50000000);
    }
    if (argc == 3 && strcmp(argv[1], "daemon-now") == 0) {
        return record_daemon_run(argv[2], 0);
    }
    if (argc == 3 && strcmp(argv[1], "burn") == 0) {
        record_daemon_outside_work(atol(argv[2]));
        return 0;
    }
    fprintf(stderr, "usage: record-daemon daemon|daemon-now PPID_FILE | burn MS\n");
    return 2;
}
