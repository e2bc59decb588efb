/* SPDX-License-Identifier: MIT */
/*
 * A host whose fork()ed children do not exec at once, as Python's multiprocessing workers, a
 * shell's subshells and command substitutions, and Perl's fork() do (docs/architecture.md "Real
 * programs", the sweep of 2026-11-29).
 *
 *   forkchild list      10 children, each listing /proc/self/fd and /proc/self/task at once and
 *                       again after 30 ms of CPU, then exiting with 3. Bare, a child has its
 *                       parent's fds and one thread. Before: a preloaded parent's child listed
 *                       the parent's server fds (768, 771..775: its epoll fd, signal pipes,
 *                       eventfd, listening socket, spare /dev/null) for its whole life, under
 *                       record up to 10; and under record its first listing held the thread
 *                       that starts its agent, 2 tasks.
 *   forkchild execloop  20 children, half of them exec'ing this program again first, that call
 *                       execve() (by syscall(), on 3 threads) on a file of no executable
 *                       format from 2 ms to 30 ms after their start (each fails with ENOEXEC,
 *                       as when execvp() meets a script without #!), then exit with 4. While a
 * thread of a process is in execve(), a thread created by another fails with EAGAIN (the kernel's
 * copy_fs during an exec): the child's agent start under record (5 ms after the fork; a deferred
 *                       session 5 ms into the image) met that and said "pipeprof: diagnostic
 *                       server not started: Resource temporarily unavailable" or "pipeprof:
 *                       session N: sampling not started: ..." on the host's stderr, where bare
 *                       says nothing (bash scripts, git, under record).
 *
 *   forkchild execstart 120 children that exec /bin/true 4 to 10 ms after their fork, when
 *                       their agent starts under record. Before, an exec during that start found
 *                       no server to stop yet and went ahead while the new agent's wall thread
 *                       sent the thread its SIGPROF, which pends through execve() and met the
 *                       new image's SIG_DFL: a child killed by SIGPROF (status -27), about 1 in
 *                       60 under record --mode wall (bash's `( sleep 0.01 ) &`: "Profiling timer
 *                       expired").
 *
 * FORKCHILD_RAW=1 adds each child's open fds as the kernel has them (raw_open).
 *
 * Prints each child's listings and exit status; the fds it lists are the parent's open ones at
 * the fork, so they are the same bare and under the agent.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hosts.h"

static double
now_ms(int clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void
burn_ms(double ms)
{
    double t0 = now_ms(CLOCK_THREAD_CPUTIME_ID);
    volatile unsigned long x = 0;

    while (now_ms(CLOCK_THREAD_CPUTIME_ID) - t0 < ms) {
        for (int i = 0; i < 10000; i++) {
            x++;
        }
    }
}

/* fstat(fd) made without libc: the kernel's answer, which no interposer sees (as the Go runtime's
 * own system calls are made); -ENOSYS on other architectures. */
static long
raw_fstat(int fd, struct stat *st)
{
#if defined(__x86_64__)
    long ret;

    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"((long)SYS_fstat), "D"((long)fd), "S"(st)
                     : "rcx", "r11", "memory");
    return ret;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_fstat;
    register long x0 __asm__("x0") = fd;
    register long x1 __asm__("x1") = (long)st;

    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1) : "memory");
    return x0;
#else
    (void)fd;
    (void)st;
    return -ENOSYS;
#endif
}

/* FORKCHILD_RAW=1: the fds open in the child as the kernel has them (3..1023), whatever the
 * listings say, but pipes: the parent's library fds a child kept open but hid were open still
 * (its epoll fd, eventfd, listening socket, sessions' connections, for the child's whole life).
 * Pipes are left out: libuv's fork handler makes its signal lock pipe anew in every child, the
 * library's (docs/architecture.md, the host contract's fd section). Only where the child runs no
 * agent of its own (preloaded, listen mode): under record it starts one 5 ms on. */
static void
raw_open(const char *when)
{
    char line[2048];
    size_t o = 0;

    if (getenv("FORKCHILD_RAW") == NULL) {
        return;
    }
    for (int fd = 3; fd < 1024 && o < sizeof(line) - 16; fd++) {
        struct stat st;

        if (raw_fstat(fd, &st) == 0 && !S_ISFIFO(st.st_mode)) {
            o += (size_t)snprintf(line + o, sizeof(line) - o, " %d", fd);
        }
    }
    line[o] = '\0';
    printf("%s open but pipes (raw):%s\n", when, line);
}

/* The entries of dir (numbers, in order), the DIR's own fd among them as bare has it too. */
static void
list(const char *when, const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n[256], count = 0;
    char line[2048];
    size_t o = 0;

    if (d == NULL) {
        printf("%s %s: opendir: %s\n", when, dir, strerror(errno));
        return;
    }
    while ((e = readdir(d)) != NULL && count < 256) {
        if (e->d_name[0] != '.') {
            n[count++] = atoi(e->d_name);
        }
    }
    closedir(d);
    for (int i = 1; i < count; i++) { /* insertion sort: the kernel's order is by number anyway */
        for (int j = i; j > 0 && n[j - 1] > n[j]; j--) {
            int t = n[j];

            n[j] = n[j - 1];
            n[j - 1] = t;
        }
    }
    if (strstr(dir, "task") != NULL) {
        printf("%s %s: %d\n", when, dir, count); /* thread ids differ from run to run */
        return;
    }
    for (int i = 0; i < count && o < sizeof(line) - 16; i++) {
        o += (size_t)snprintf(line + o, sizeof(line) - o, " %d", n[i]);
    }
    line[o] = '\0';
    printf("%s %s:%s\n", when, dir, line);
}

/* fork() with stdout flushed first (a child's exit must not write the parent's buffer again);
 * -1 said on stderr. */
static pid_t
fork_flushed(void)
{
    pid_t p;

    fflush(stdout);
    p = fork();
    if (p < 0) {
        perror("fork");
    }
    return p;
}

/* Waits for child i (pid p) and prints its status; -1 when the wait failed (said). */
static int
reap(int i, pid_t p)
{
    int st;

    if (waitpid(p, &st, 0) != p) {
        perror("waitpid");
        return -1;
    }
    printf("child %d: status %d\n", i, WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
    return 0;
}

static int
list_children(void)
{
    burn_ms(50); /* the parent's agent samples first (record) */
    for (int i = 0; i < 10; i++) {
        pid_t p = fork_flushed();

        if (p < 0) {
            return 1;
        }
        if (p == 0) {
            raw_open("child at once");
            list("child at once", "/proc/self/fd");
            list("child at once", "/proc/self/task");
            burn_ms(30); /* its own agent starts 5 ms after the fork under record */
            list("child later", "/proc/self/fd");
            list("child later", "/proc/self/task");
            fflush(stdout);
            _exit(3);
        }
        if (reap(i, p) < 0) {
            return 1;
        }
    }
    list("parent", "/proc/self/fd");
    return 0;
}

/* execve() of path, a file of this user's with no format the kernel knows (ENOEXEC: the exec
 * goes as far as looking for a binary handler, which ENOENT does not), from 2 ms to 30 ms after
 * this image's start. Through syscall(): the library's exec interposer stops its agent before
 * each exec and starts it again after one that failed, and what is held here is the kernel's
 * refusal of a thread created during an exec, not hundreds of such restarts in a row (which say
 * "another recording of this process is draining the agent": docs/architecture.md, "Real
 * programs"). */
struct exec_loop {
    const char *path;
    double t0;
    long fails;
};

static void *
exec_loop(void *arg)
{
    struct exec_loop *l = arg;
    char *argv[] = { "x", NULL }, *envp[] = { NULL };
    double t;

    while ((t = now_ms(CLOCK_MONOTONIC) - l->t0) < 30) {
        if (t >= 2 && syscall(SYS_execve, l->path, argv, envp) < 0 && errno == ENOEXEC) {
            l->fails++;
        }
    }
    return NULL;
}

/* Three threads (made before the first exec: a thread created during one fails) whose execs
 * follow each other, so that one is nearly always under way. The status says nothing of them. */
static void
exec_attempts(const char *path)
{
    struct exec_loop l[3];
    pthread_t th[2];
    int made = 0;

    for (int i = 0; i < 3; i++) {
        l[i] = (struct exec_loop){ path, now_ms(CLOCK_MONOTONIC), 0 };
    }
    for (int i = 0; i < 2; i++) {
        made += pthread_create(&th[i], NULL, exec_loop, &l[i + 1]) == 0;
    }
    exec_loop(&l[0]);
    for (int i = 0; i < made; i++) {
        pthread_join(th[i], NULL);
    }
    _exit(4); /* a thread not made (the machine slow enough for an exec to have begun) is no
               * failure: the count of failed execs depends on the machine too */
}

static int
exec_children(const char *self)
{
    char path[] = "/tmp/pp-forkchild-XXXXXX";
    static const char junk[] = "no format of any binary handler\n";
    int fd = mkstemp(path), rc = 0;

    if (fd < 0 || write(fd, junk, sizeof(junk) - 1) != (ssize_t)(sizeof(junk) - 1) ||
        fchmod(fd, 0700) != 0 || close(fd) != 0) {
        perror("the file to exec");
        return 1;
    }
    for (int i = 0; i < 20 && rc == 0; i++) {
        pid_t p = fork_flushed();

        if (p < 0) {
            rc = 1;
            break;
        }
        if (p == 0) {
            if (i % 2) {
                execl(self, self, "execloop-child", path, (char *)NULL);
                _exit(127);
            }
            exec_attempts(path);
        }
        rc = reap(i, p) < 0;
    }
    unlink(path);
    return rc;
}

/* 120 children that exec /bin/true (or argv's TRUE) from 4 to 10 ms after their fork, when a
 * child's agent starts under record (5 ms on): each must exit with 0, as bare. */
static int
exec_in_start(const char *prog)
{
    int rc = 0;

    for (int i = 0; i < 120 && rc == 0; i++) {
        pid_t p = fork_flushed();

        if (p < 0) {
            rc = 1;
            break;
        }
        if (p == 0) {
            double t0 = now_ms(CLOCK_MONOTONIC), at = 4 + (i % 12) * 0.5;

            while (now_ms(CLOCK_MONOTONIC) - t0 < at) {
            }
            execl(prog, prog, (char *)NULL);
            _exit(127);
        }
        rc = reap(i, p) < 0;
    }
    return rc;
}

int
main(int argc, char **argv)
{
    if (argc == 2) {
        host_wait_go(); /* listen mode: once the session runs (not in an exec'd child) */
    }
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        return list_children();
    }
    if (argc == 2 && strcmp(argv[1], "execloop") == 0) {
        return exec_children(argv[0]);
    }
    if (argc == 2 && strcmp(argv[1], "execstart") == 0) {
        return exec_in_start("/bin/true");
    }
    if (argc == 3 && strcmp(argv[1], "execloop-child") == 0) {
        exec_attempts(argv[2]);
    }
    fprintf(stderr, "usage: forkchild list|execloop|execstart\n");
    return 2;
}
