/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-blocking-calls.c - calls that the agent's blocking interposers wrap but that return
 * at once: poll() of no fds with a zero timeout and a 1-byte read() of /dev/zero, each made three
 * frames down. Prints the best per-call time of ROUNDS rounds of CALLS calls each, in ns:
 * "poll0 N read1 N". Run bare, preloaded or under `pipeprof record` by bench/blocking-calls.sh.
 * Usage: bench-blocking-calls [CALLS [ROUNDS]]
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double
bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Three frames of the host's own above each call, as a real caller has some. */
__attribute__((noinline)) static int
bench_call3(int fd, char *buf)
{
    return fd < 0 ? poll(NULL, 0, 0) : (int)read(fd, buf, 1);
}

__attribute__((noinline)) static int
bench_call2(int fd, char *buf)
{
    return bench_call3(fd, buf) + 1;
}

__attribute__((noinline)) static int
bench_call1(int fd, char *buf)
{
    return bench_call2(fd, buf) + 1;
}

int
main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 200000, i;
    int rounds = argc > 2 ? atoi(argv[2]) : 5, r, k, fd = open("/dev/zero", O_RDONLY);
    double best[2] = { 1e18, 1e18 };
    volatile int sink = 0;
    char buf[8];

    if (fd < 0 || calls <= 0 || rounds <= 0) {
        fprintf(stderr, "usage: bench-blocking-calls [CALLS [ROUNDS]] (and /dev/zero)\n");
        return 2;
    }
    for (r = 0; r < rounds; r++) {
        for (k = 0; k < 2; k++) {
            double t0 = bench_now_ns(), ns;

            for (i = 0; i < calls; i++) {
                sink += bench_call1(k == 0 ? -1 : fd, buf);
            }
            ns = (bench_now_ns() - t0) / (double)calls;
            best[k] = ns < best[k] ? ns : best[k];
        }
    }
    printf("poll0 %.1f read1 %.1f\n", best[0], best[1]);
    close(fd);
    (void)sink;
    return 0;
}
