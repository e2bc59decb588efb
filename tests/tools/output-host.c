/* SPDX-License-Identifier: MIT */
/*
 * tests/tools/output-host.c - the hosts of tests/output-file.sh (PIPEPROF_OUTPUT): each mode burns
 * CPU in work functions of its own, so a test can tell whose samples landed in which file.
 *
 * usage: output-host MODE [MS]
 *   serve       a service: out_serve_work until SIGTERM (handled: a flag, then exit(0)); prints
 *               "ready" once it has worked MS ms
 *   fork        forks a child that burns MS ms in out_fork_child_work and returns from main; the
 *               parent burns MS ms in out_fork_parent_work and waits for it
 *   exec        burns MS ms in out_exec_before_work, then execs itself as "exec-after" (same pid)
 *   exec-after  burns MS ms in out_exec_after_work
 *   spawn       forks and execs itself as "spawned" (another pid), burns MS ms in
 *               out_spawn_parent_work and waits for it
 *   spawned     burns MS ms in out_spawned_work
 *   crash       burns MS ms in out_crash_work, prints "ready", burns on until it is killed
 *   abort       burns MS ms in out_abort_work, then abort()
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OUT_WORK           __attribute__((noinline, used))
/* After the call: a work function that ended in a tail call would leave no frame of its own. */
#define OUT_NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

static volatile uint64_t out_sink;
static volatile sig_atomic_t out_stop;

static uint64_t
out_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Burns ms of this thread's CPU time (forever when ms < 0, until out_stop). The clock is read
 * either way: under ThreadSanitizer that call is where its runtime runs the SIGTERM handler it
 * held back (it defers a signal that comes in instrumented code to its next interceptor), and
 * a loop without one never stopped (idle-agent and output-file timed out under TSan). */
static void
out_burn(long ms)
{
    uint64_t end = out_cpu_ns() + (uint64_t)(ms < 0 ? 0 : ms) * 1000000u, x = out_sink;
    int i;

    while ((out_cpu_ns() < end || ms < 0) && !out_stop) {
        for (i = 0; i < 20000; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
        }
    }
    out_sink = x;
}

OUT_WORK static void
out_serve_work(long ms)
{
    out_burn(ms);
    OUT_NO_TAIL_CALL();
}
OUT_WORK static void
out_fork_child_work(long ms)
{
    out_burn(ms);
    OUT_NO_TAIL_CALL();
}
OUT_WORK static void
out_fork_parent_work(long ms)
{
    out_burn(ms);
    OUT_NO_TAIL_CALL();
}
OUT_WORK static void
out_exec_before_work(long ms)
{
    out_burn(ms);
    OUT_NO_TAIL_CALL();
}
OUT_WORK static void
out_exec_after_work(long ms)
{
    out_burn(ms);
    OUT_NO_TAIL_CALL();
}
OUT_WORK static void
out_spawn_parent_work(long ms)
{
    out_burn(ms);
    OUT_NO_TAIL_CALL();
}
OUT_WORK static void
out_spawned_work(long ms)
{
    out_burn(ms);
    OUT_NO_TAIL_CALL();
}
OUT_WORK static void
out_crash_work(long ms)
{
    out_burn(ms);
    OUT_NO_TAIL_CALL();
}
OUT_WORK static void
out_abort_work(long ms)
{
    out_burn(ms);
    OUT_NO_TAIL_CALL();
}

static void
out_on_term(int sig)
{
    (void)sig;
    out_stop = 1;
}

static void
out_ready(void)
{
    printf("ready\n");
    fflush(stdout);
}

static int
out_wait(pid_t pid)
{
    int status = 0;

    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        return 1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void
out_exec_self(const char *mode, const char *ms)
{
    execl("/proc/self/exe", "output-host", mode, ms, (char *)NULL);
    perror("output-host: exec");
    _exit(127);
}

int
main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const char *ms_arg = argc > 2 ? argv[2] : "300";
    long ms = atol(ms_arg);
    pid_t pid;

    if (strcmp(mode, "serve") == 0) {
        struct sigaction sa;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = out_on_term;
        sigaction(SIGTERM, &sa, NULL);
        out_serve_work(ms);
        out_ready();
        out_serve_work(-1);
        printf("stopped\n");
        exit(0);
    }
    if (strcmp(mode, "fork") == 0) {
        pid = fork();
        if (pid == 0) {
            out_fork_child_work(ms);
            return 0;
        }
        out_fork_parent_work(ms);
        return out_wait(pid);
    }
    if (strcmp(mode, "exec") == 0) {
        out_exec_before_work(ms);
        out_exec_self("exec-after", ms_arg);
    }
    if (strcmp(mode, "exec-after") == 0) {
        out_exec_after_work(ms);
        return 0;
    }
    if (strcmp(mode, "spawn") == 0) {
        pid = fork();
        if (pid == 0) {
            out_exec_self("spawned", ms_arg);
        }
        out_spawn_parent_work(ms);
        return out_wait(pid);
    }
    if (strcmp(mode, "spawned") == 0) {
        out_spawned_work(ms);
        return 0;
    }
    if (strcmp(mode, "crash") == 0) {
        out_crash_work(ms);
        out_ready();
        out_crash_work(-1);
        return 0;
    }
    if (strcmp(mode, "abort") == 0) {
        out_abort_work(ms);
        abort();
    }
    fprintf(stderr, "usage: output-host serve|fork|exec|spawn|crash|abort [MS]\n");
    return 2;
}
