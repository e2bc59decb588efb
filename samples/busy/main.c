/* SPDX-License-Identifier: MIT */
/*
 * samples/busy/main.c - a native program that burns CPU for N seconds (default 5) and prints a
 * checksum, so tests can check that an injected pipeprof leaves its output unchanged. Usage:
 * pp-sample-busy [SECONDS] [--print-start] [--until FILE]: --until ends the run as soon as FILE
 * exists, SECONDS at most, for a test that must find the program still running after steps of
 * unknown length on a loaded machine (a .NET tool's start-up). Context: any; it must not depend
 * on pipeprof.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double
pp_sample_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A deterministic amount of work per call: the checksum depends only on the call count. */
static unsigned long
pp_sample_work(unsigned long seed)
{
    unsigned long x = seed;
    int i;

    for (i = 0; i < 100000; i++) {
        x = x * 6364136223846793005ul + 1442695040888963407ul;
    }
    return x;
}

int
main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 5.0;
    double end = pp_sample_now() + seconds;
    unsigned long sum = 0, rounds = 0;
    const char *until = NULL;
    int i;

    for (i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--print-start") == 0) {
            printf("started %d\n", (int)getpid());
            fflush(stdout);
        } else if (strcmp(argv[i], "--until") == 0 && i + 1 < argc) {
            until = argv[++i];
        }
    }
    while (pp_sample_now() < end && (until == NULL || access(until, F_OK) != 0)) {
        sum ^= pp_sample_work(rounds++);
    }
    /* Only the fixed part of the output: the round count depends on the machine's speed. */
    printf("busy done\n");
    (void)sum;
    return 0;
}
