/* SPDX-License-Identifier: MIT */
/*
 * samples/forkwork/main.c - a process tree that measures itself: the parent forks workers
 * (without exec, as pre-fork servers and Python's multiprocessing do), each burns a known amount
 * of CPU time in a function of its own (fw_worker_1, fw_worker_2, ...) and reports the CPU time
 * its process used by its own clock (CLOCK_PROCESS_CPUTIME_ID) through a pipe. A recording of
 * the tree is right when each worker's share of the samples equals its share of that CPU time.
 *
 * usage: pp-sample-forkwork [MS [OUT.json]]: worker i burns i * MS milliseconds of CPU (default
 * 400; three workers). The JSON goes to OUT.json or stdout: {"fw_worker_1": {"pid": N,
 * "cpu_ns": N}, ...}. Worker 1 ends with _exit(), the others return through exit().
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

#define FW_WORKERS  3
#define FW_NOINLINE __attribute__((noinline, used))

static volatile uint64_t fw_sink;

/* Burns until this process has used `ns` more CPU time. */
static void
fw_burn(uint64_t ns)
{
    uint64_t end = pp_clock_ns(CLOCK_PROCESS_CPUTIME_ID) + ns, x = fw_sink;
    int i;

    do {
        for (i = 0; i < 20000; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
        }
    } while (pp_clock_ns(CLOCK_PROCESS_CPUTIME_ID) < end);
    fw_sink = x;
}

FW_NOINLINE static void
fw_worker_1(uint64_t ns)
{
    fw_burn(ns);
    fw_sink++; /* not a tail call: the worker's frame stays on the stack */
}

FW_NOINLINE static void
fw_worker_2(uint64_t ns)
{
    fw_burn(ns);
    fw_sink++; /* not a tail call: the worker's frame stays on the stack */
}

FW_NOINLINE static void
fw_worker_3(uint64_t ns)
{
    fw_burn(ns);
    fw_sink++; /* not a tail call: the worker's frame stays on the stack */
}

static void (*const fw_workers[FW_WORKERS])(uint64_t) = { fw_worker_1, fw_worker_2, fw_worker_3 };

int
main(int argc, char **argv)
{
    uint64_t ms = argc > 1 ? strtoull(argv[1], NULL, 10) : 400;
    FILE *out = argc > 2 ? fopen(argv[2], "w") : stdout;
    int fds[FW_WORKERS][2], i, failed = 0;
    pid_t pids[FW_WORKERS];
    uint64_t cpu[FW_WORKERS];

    if (out == NULL || ms == 0) {
        fprintf(stderr, "usage: pp-sample-forkwork [MS [OUT.json]]\n");
        return 2;
    }
    fflush(NULL);
    for (i = 0; i < FW_WORKERS; i++) {
        if (pipe(fds[i]) != 0 || (pids[i] = fork()) < 0) {
            perror("pp-sample-forkwork");
            return 1;
        }
        if (pids[i] == 0) {
            uint64_t used;

            close(fds[i][0]);
            fw_workers[i]((uint64_t)(i + 1) * ms * 1000000u);
            used = pp_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
            if (write(fds[i][1], &used, sizeof(used)) != (ssize_t)sizeof(used)) {
                _exit(3);
            }
            if (i == 0) {
                _exit(0);
            }
            exit(0);
        }
        close(fds[i][1]);
    }
    for (i = 0; i < FW_WORKERS; i++) {
        int status;

        if (read(fds[i][0], &cpu[i], sizeof(cpu[i])) != (ssize_t)sizeof(cpu[i])) {
            failed = 1;
        }
        close(fds[i][0]);
        if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            failed = 1;
        }
    }
    if (failed) {
        fprintf(stderr, "pp-sample-forkwork: a worker failed\n");
        return 1;
    }
    fprintf(out, "{");
    for (i = 0; i < FW_WORKERS; i++) {
        fprintf(out, "%s\"fw_worker_%d\": {\"pid\": %ld, \"cpu_ns\": %llu}", i > 0 ? ", " : "",
                i + 1, (long)pids[i], (unsigned long long)cpu[i]);
    }
    fprintf(out, "}\n");
    return out != stdout ? fclose(out) != 0 : 0;
}
