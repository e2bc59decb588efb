/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-reap.c - what reaping a child that ran the agent costs its parent, against a bare
 * child, in the same run. The parent posix_spawns itself as a child that starts THREADS threads,
 * lives LIFE ms and exits; children alternate bare / under LD_PRELOAD=LIB (its environment
 * otherwise the parent's, so PIPEPROF_* settings reach it). The parent waits until a child is a
 * zombie (waitid WNOWAIT), then times the reaping waitpid() on its own thread CPU clock (the
 * kernel's release_task runs on the reaper). Children are reaped as they exit, so the parent
 * holds about as many /proc entries as a forking server does. Prints the median and mean us of
 * CPU per reap for each kind and the ratio of the medians.
 * usage: bench-reap LIB [CHILDREN [LIFE_MS [THREADS]]] (defaults 40, 150, 4)
 */
#include <errno.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

extern char **environ;

static void *
bench_child_thread(void *arg)
{
    unsigned ms = *(unsigned *)arg;
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

    nanosleep(&ts, NULL);
    return NULL;
}

static int
bench_child(unsigned life_ms, unsigned threads)
{
    pthread_t th[64];
    unsigned i, n = threads < 64 ? threads : 64;

    for (i = 0; i < n; i++) {
        if (pthread_create(&th[i], NULL, bench_child_thread, &life_ms) != 0) {
            n = i;
            break;
        }
    }
    bench_child_thread(&life_ms);
    for (i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
    }
    return 0;
}

static int
bench_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Spawns one child (agent: with LD_PRELOAD=lib) and returns the CPU ns its reaping took. */
static int
bench_one(const char *self, const char *lib, int agent, const char *life, const char *threads,
          uint64_t *ns)
{
    char *argv[] = { (char *)self, (char *)"--child", (char *)life, (char *)threads, NULL };
    size_t n = 0, i;
    char **env, *preload = NULL;
    siginfo_t si;
    uint64_t t0;
    pid_t pid;
    int rc, status;

    while (environ[n] != NULL) {
        n++;
    }
    env = calloc(n + 2, sizeof(*env));
    if (env == NULL) {
        return -ENOMEM;
    }
    for (i = 0; i < n; i++) {
        env[i] = environ[i];
    }
    if (agent) {
        if (asprintf(&preload, "LD_PRELOAD=%s", lib) < 0) {
            free(env);
            return -ENOMEM;
        }
        env[n] = preload;
    }
    rc = posix_spawn(&pid, self, NULL, NULL, argv, env);
    free(env);
    free(preload);
    if (rc != 0) {
        return -rc;
    }
    memset(&si, 0, sizeof(si));
    while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
    }
    t0 = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    if (waitpid(pid, &status, 0) != pid) {
        return -errno;
    }
    *ns = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -ECHILD;
}

int
main(int argc, char **argv)
{
    unsigned children, i, k;
    uint64_t *ns[2], sum[2] = { 0, 0 };
    const char *life, *threads;

    if (argc >= 2 && strcmp(argv[1], "--child") == 0) {
        return bench_child(argc > 2 ? (unsigned)atoi(argv[2]) : 150,
                           argc > 3 ? (unsigned)atoi(argv[3]) : 4);
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s LIB [CHILDREN [LIFE_MS [THREADS]]]\n", argv[0]);
        return 2;
    }
    children = argc > 2 ? (unsigned)atoi(argv[2]) : 40;
    life = argc > 3 ? argv[3] : "150";
    threads = argc > 4 ? argv[4] : "4";
    ns[0] = calloc(children, sizeof(uint64_t));
    ns[1] = calloc(children, sizeof(uint64_t));
    if (children == 0 || ns[0] == NULL || ns[1] == NULL) {
        return 2;
    }
    for (i = 0; i < children; i++) {
        for (k = 0; k < 2; k++) {
            /* Alternating, and the order swapped every round, so drift hits both alike. */
            int agent = (int)(k ^ (i & 1));
            int err = bench_one("/proc/self/exe", argv[1], agent, life, threads, &ns[agent][i]);

            if (err != 0) {
                fprintf(stderr, "bench-reap: child %u (%s): %s\n", i, agent ? "agent" : "bare",
                        strerror(-err));
                return 1;
            }
            sum[agent] += ns[agent][i];
        }
    }
    for (k = 0; k < 2; k++) {
        qsort(ns[k], children, sizeof(uint64_t), bench_cmp);
    }
    printf("children %u each, life %s ms, %s threads\n", children, life, threads);
    printf("%-6s median %9.1f us  mean %9.1f us  max %9.1f us per reap\n", "bare",
           (double)ns[0][children / 2] / 1e3, (double)sum[0] / children / 1e3,
           (double)ns[0][children - 1] / 1e3);
    printf("%-6s median %9.1f us  mean %9.1f us  max %9.1f us per reap\n", "agent",
           (double)ns[1][children / 2] / 1e3, (double)sum[1] / children / 1e3,
           (double)ns[1][children - 1] / 1e3);
    printf("ratio agent/bare: median %.2f  mean %.2f\n",
           (double)ns[1][children / 2] / (double)(ns[0][children / 2] ? ns[0][children / 2] : 1),
           (double)sum[1] / (double)(sum[0] ? sum[0] : 1));
    free(ns[0]);
    free(ns[1]);
    return 0;
}
