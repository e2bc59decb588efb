/* SPDX-License-Identifier: MIT */
/*
 * tests/tools/pid-reuse.c - two sampled children of one recording that get one pid:
 * cli-record-pidreuse. Run under `pipeprof record`, it execs itself as a first child that burns
 * 0.3 s of CPU time in pid_reuse_first, reaps it, then starts a spinner without the agent (its
 * environment lacks LD_PRELOAD: it is not recorded) that creates and joins threads (thread ids
 * share the pid space) until the next id would be the first child's pid, and forks: a child that
 * got that pid execs this program, the agent preloaded again, to burn 0.3 s in pid_reuse_second.
 * A fork that missed the pid (another process of the machine took an id between) exits at once,
 * and the spinner goes round the pid space again; when another program keeps the pid, a new
 * first child is started (up to 8). Prints `first PID` for each first child and `second PID`
 * (or `no reuse ...`, status 1, when SECONDS passed without one).
 *
 *   pid-reuse SECONDS             (the recorded command)
 *   pid-reuse burn first|second   (the children)
 *   pid-reuse spin PID SECONDS    (the spinner; PID_REUSE_PRELOAD holds the agent)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Ids before the wanted pid from which the spinner forks instead of creating threads. */
#define PID_REUSE_WINDOW 8
/* First children tried at most, each when another program took the last one's pid. */
#define PID_REUSE_ROUNDS 8

static double
pid_reuse_cpu(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static volatile unsigned long pid_reuse_sink;

__attribute__((noinline)) static void
pid_reuse_first(double until)
{
    while (pid_reuse_cpu() < until) {
        for (int i = 0; i < 100000; i++) {
            pid_reuse_sink += (unsigned long)i;
        }
    }
}

__attribute__((noinline)) static void
pid_reuse_second(double until)
{
    while (pid_reuse_cpu() < until) {
        for (int i = 0; i < 100000; i++) {
            pid_reuse_sink ^= (unsigned long)i;
        }
    }
}

static void *
pid_reuse_tid(void *arg)
{
    *(long *)arg = (long)syscall(SYS_gettid);
    return NULL;
}

/* Waits for child pid; its exit status, or 128+N for a signal N. */
static int
pid_reuse_wait(pid_t pid)
{
    int st;

    if (waitpid(pid, &st, 0) != pid) {
        return 127;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * This environment with its variable FROM renamed TO: a calloc'ed array of environ's strings and
 * buf, or NULL (said) when FROM is unset or memory is short.
 */
static char **
pid_reuse_env(const char *from, const char *to, char *buf, size_t cap)
{
    const char *value = getenv(from);
    size_t n = 0, i, k = 0, len = strlen(from);
    char **env;

    for (; environ[n] != NULL; n++) {
    }
    env = value != NULL ? calloc(n + 2, sizeof(*env)) : NULL;
    if (env == NULL) {
        fprintf(stderr, "pid-reuse: %s\n", value == NULL ? from : "out of memory");
        return NULL;
    }
    for (i = 0; i < n; i++) {
        if (strncmp(environ[i], from, len) != 0 || environ[i][len] != '=') {
            env[k++] = environ[i];
        }
    }
    snprintf(buf, cap, "%s=%s", to, value);
    env[k] = buf;
    return env;
}

static int
pid_reuse_spin(const char *self, long want, double seconds)
{
    char pre[4096];
    char **env = pid_reuse_env("PID_REUSE_PRELOAD", "LD_PRELOAD", pre, sizeof(pre));
    unsigned long threads = 0, misses = 0, failures = 0;
    time_t end = time(NULL) + (time_t)seconds;
    long tid = 0;

    if (env == NULL) {
        return 1;
    }
    while (time(NULL) < end) {
        pthread_t th;
        pid_t pid;

        if (tid < want - PID_REUSE_WINDOW || tid >= want) {
            if (pthread_create(&th, NULL, pid_reuse_tid, &tid) != 0) {
                usleep(1000); /* EAGAIN: the pid space or the thread limit is full for now */
                failures++;
                continue;
            }
            pthread_join(th, NULL);
            threads++;
            continue;
        }
        /* Close: forks, each child of the wrong pid exiting at once, until one gets it or an id
         * past it (another process took it: round the pid space again). */
        pid = fork();
        if (pid == 0) {
            if (getpid() == want) {
                char *argv[] = { (char *)self, "burn", "second", NULL };

                execve(self, argv, env);
                _exit(127);
            }
            _exit(42);
        }
        if (pid < 0) {
            usleep(1000);
            failures++;
            continue;
        }
        if (pid == want) {
            int st;

            printf("second %ld (after %lu threads, %lu misses)\n", (long)pid, threads, misses);
            fflush(stdout);
            free(env);
            st = pid_reuse_wait(pid);
            if (st != 0) {
                fprintf(stderr, "pid-reuse: the second child failed (%d)\n", st);
            }
            return st;
        }
        (void)pid_reuse_wait(pid);
        tid = pid;
        if (pid > want || pid < want - PID_REUSE_WINDOW) {
            char proc[32];

            /* Passed: a thread or process of another program took the pid meanwhile. One that
             * keeps it (a long-lived service's thread) would make every round miss. */
            snprintf(proc, sizeof(proc), "/proc/%ld/stat", want);
            if (access(proc, F_OK) == 0) {
                char line[256] = "";
                FILE *f = fopen(proc, "re");

                if (f != NULL) {
                    (void)!fgets(line, sizeof(line), f);
                    fclose(f);
                }
                printf("pid %ld taken by another program (after %lu threads): %.60s\n", want,
                       threads, line);
                free(env);
                return 2;
            }
            misses++;
        }
    }
    printf("no reuse of pid %ld in %.0f s (%lu threads, %lu misses, %lu failed creations)\n", want,
           seconds, threads, misses, failures);
    free(env);
    return 1;
}

int
main(int argc, char **argv)
{
    const char *self = argv[0];
    double seconds = argc > 1 ? atof(argv[1]) : 60;
    char spin_want[32], spin_secs[32], preload[4096];
    pid_t first, spinner;
    char **env;
    int st, round;

    if (argc == 3 && strcmp(argv[1], "burn") == 0) {
        double until = pid_reuse_cpu() + 0.3;

        if (strcmp(argv[2], "first") == 0) {
            pid_reuse_first(until);
        } else {
            pid_reuse_second(until);
        }
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "spin") == 0) {
        return pid_reuse_spin(self, atol(argv[2]), atof(argv[3]));
    }
    /* The spinner's environment: this one without LD_PRELOAD, which it hands back to the second
     * child through PID_REUSE_PRELOAD. */
    env = pid_reuse_env("LD_PRELOAD", "PID_REUSE_PRELOAD", preload, sizeof(preload));
    if (env == NULL) {
        return 1;
    }
    snprintf(spin_secs, sizeof(spin_secs), "%g", seconds);
    /* A round per first child, while another program keeps the pid the last one had. */
    for (round = 0, st = 2; round < PID_REUSE_ROUNDS && st == 2; round++) {
        first = fork();
        if (first == 0) {
            execl(self, self, "burn", "first", (char *)NULL);
            _exit(127);
        }
        if (first < 0 || (st = pid_reuse_wait(first)) != 0) {
            fprintf(stderr, "pid-reuse: the first child failed (%d)\n", first < 0 ? -1 : st);
            st = 1;
            break;
        }
        printf("first %ld\n", (long)first);
        fflush(stdout);
        snprintf(spin_want, sizeof(spin_want), "%ld", (long)first);
        spinner = fork();
        if (spinner == 0) {
            char *sargv[] = { (char *)self, "spin", spin_want, spin_secs, NULL };

            execve(self, sargv, env);
            _exit(127);
        }
        st = spinner < 0 ? 1 : pid_reuse_wait(spinner);
    }
    free(env);
    return st;
}
