/* SPDX-License-Identifier: MIT */
/*
 * A host that calls execve() in a loop on paths that fail, as a shell's command search or a
 * supervisor retrying a missing program does (realhosts: a `record` child's tight loop of failed
 * execs said "session N: sampling not started: another recording of this process is draining the
 * agent"). Each failed exec of a profiled image stops its server and starts it again
 * (host/exec.c, shim/shim.c's exec_failed).
 *
 *   execfail loop N     the main thread calls libc's execve() N times, in turn on a missing file
 *                       (ENOENT), a file without execute permission (EACCES) and an executable
 *                       file of no format (ENOEXEC), and counts each errno; then opens /dev/null
 *                       (its fd number), burns 50 ms of CPU and exits with 4.
 *   execfail child N    the same in a fork()ed child after 30 ms of its CPU (its agent runs
 *                       under record, children followed); the parent prints its status.
 *   execfail vforkexit N  N vfork()ed children whose execve() fails and which then call exit()
 *                       (not _exit: in the parent's memory, as some programs do); then 200 ms of
 *                       the parent's CPU, which the recording holds, and a return from main().
 *                       An atexit handler registered first prints where it runs: in the first
 *                       child (which uses up the parent's handlers, as bare), never in the
 *                       parent. Then a vfork()ed child that ends by _exit() and one whose exec
 *                       succeeds (/bin/true), each status printed.
 *   execfail vforkexit-exit N  the same, the parent ending by exit(0) instead.
 *   execfail vforkexit-fork N  vforkexit, then a fork()ed child that burns CPU in
 *                    after_vfork_fork_burn (250 ms) and _exit()s: the fork handlers the children's
 * exit() unregistered in the parent's memory are the library's again.
 *
 * Before, each failed exec left the stopped server's loop fds (5) and thread stack behind: with
 * RLIMIT_NOFILE 1024 the host's stderr said "pipeprof: diagnostic server not started: Too many
 * open files" after about 50, preloaded and under record (1519 fds open after 300).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hosts.h"

static double
cpu_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void
burn_ms(double ms)
{
    double t0 = cpu_ms();
    volatile unsigned long x = 0;

    while (cpu_ms() - t0 < ms) {
        for (int i = 0; i < 10000; i++) {
            x++;
        }
    }
}

/* A file of mode `mode` in a fresh directory; its path in out. */
static int
make_file(char *dir, const char *name, mode_t mode, const char *text, char *out, size_t size)
{
    int fd;

    snprintf(out, size, "%s/%s", dir, name);
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd) != 0) {
        printf("cannot make %s: %s\n", name, strerror(errno));
        return -1;
    }
    return chmod(out, mode);
}

static int
run(int n)
{
    char dir[] = "/tmp/pp-execfail-XXXXXX", missing[64], noperm[64], noformat[64];
    const char *paths[3] = { missing, noperm, noformat };
    static const char *kinds[3] = { "missing", "not executable", "no format" };
    char *argv[] = { "execfail-child", NULL };
    char *envp[] = { "A=1", NULL };
    int counts[3][4] = { { 0 } }; /* ENOENT, EACCES, ENOEXEC, other */
    int i, fd;

    if (mkdtemp(dir) == NULL) {
        printf("mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(missing, sizeof(missing), "%s/missing", dir);
    if (make_file(dir, "noperm", 0644, "#!/bin/sh\n", noperm, sizeof(noperm)) != 0 ||
        make_file(dir, "noformat", 0755, "not a program\n", noformat, sizeof(noformat)) != 0) {
        return 1;
    }
    for (i = 0; i < n; i++) {
        int k = i % 3, rc;

        errno = 0;
        rc = execve(paths[k], argv, envp);
        counts[k][rc != -1           ? 3
                  : errno == ENOENT  ? 0
                  : errno == EACCES  ? 1
                  : errno == ENOEXEC ? 2
                                     : 3]++;
    }
    for (i = 0; i < 3; i++) {
        printf("execve %s: ENOENT %d EACCES %d ENOEXEC %d other %d\n", kinds[i], counts[i][0],
               counts[i][1], counts[i][2], counts[i][3]);
    }
    fd = open("/dev/null", O_RDONLY);
    printf("open after the execs: fd %d\n", fd);
    close(fd);
    unlink(noperm);
    unlink(noformat);
    rmdir(dir);
    burn_ms(50);
    return 4;
}

/* The parent's CPU after its vfork()ed children: the recording names it (HC_RECORD_FRAME). */
__attribute__((noinline)) static void
after_vfork_burn(void)
{
    burn_ms(200);
    __asm__ volatile("" ::: "memory"); /* not a tail call: this frame stays on the stack */
}

/* A fork()ed child's CPU after the parent's vfork()ed children: its recording names it. */
__attribute__((noinline)) static void
after_vfork_fork_burn(void)
{
    burn_ms(250); /* not 200: gcc would fold it into after_vfork_burn (-fipa-icf) */
    __asm__ volatile("" ::: "memory");
}

static pid_t parent_pid;

/* The host's own exit handler: bare, the first vfork()ed child's exit() runs it, in the child,
 * and the parent's exit() runs it no more (glibc marked it run in the memory they share). */
static void
host_atexit(void)
{
    printf("atexit handler runs in %s\n", getpid() == parent_pid ? "the parent" : "a child");
}

/* One vfork()ed child that ends by _exit(3) (exec: 0) or that execs /bin/true (exec: 1). */
static int
vfork_one(int exec)
{
    static char *argv[] = { "true", NULL };
    int st;
    pid_t pid = vfork();

    if (pid == 0) {
        if (exec) {
            execve("/bin/true", argv, argv + 1);
        }
        _exit(3);
    }
    if (pid < 0 || waitpid(pid, &st, 0) != pid) {
        printf("vfork/wait: %s\n", strerror(errno));
        return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

/* N vfork()ed children whose exec fails and which end by exit(), not _exit(): in the parent's
 * memory (its atexit handlers and destructors run in the child and are used up there, as bare),
 * then 200 ms of the parent's CPU. */
static int
vfork_exit(int n)
{
    static char *argv[] = { "execfail-vfork", NULL };
    static volatile int i, statuses; /* not kept in registers across vfork() */
    int st;

    parent_pid = getpid();
    if (atexit(host_atexit) != 0) {
        printf("atexit failed\n");
        return 1;
    }
    burn_ms(50);
    for (i = 0, statuses = 0; i < n; i++) {
        pid_t pid = vfork();

        if (pid == 0) {
            execve("/nonexistent/pipeprof-execfail", argv, argv + 1);
            exit(errno == ENOENT ? 3 : 5);
        }
        if (pid < 0 || waitpid(pid, &st, 0) != pid) {
            printf("vfork/wait: %s\n", strerror(errno));
            return 1;
        }
        statuses += WIFEXITED(st) && WEXITSTATUS(st) == 3;
    }
    printf("vfork children that exit()ed with 3: %d of %d\n", statuses, n);
    printf("a vfork child that _exit()s: status %d\n", vfork_one(0));
    printf("a vfork child that execs /bin/true: status %d\n", vfork_one(1));
    /* bare: -1 (glibc refuses a handler once its list ran, in the child) */
    printf("atexit after the children: %d\n", atexit(host_atexit));
    after_vfork_burn();
    return 0;
}

/* vfork_exit(), then a fork()ed child that burns 250 ms and _exit()s: the children's exit() used
 * up the fork handlers of every library in the parent's memory, the library's among them. */
static int
vfork_exit_fork(int n)
{
    int rc = vfork_exit(n), st;
    pid_t pid;

    if (rc != 0) {
        return rc;
    }
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        after_vfork_fork_burn();
        _exit(6);
    }
    if (pid < 0 || waitpid(pid, &st, 0) != pid) {
        printf("fork/wait: %s\n", strerror(errno));
        return 1;
    }
    printf("a fork()ed child after them: status %d\n",
           WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
    return 0;
}

int
main(int argc, char **argv)
{
    int n = argc > 2 ? atoi(argv[2]) : 1000, st;
    pid_t pid;

    setvbuf(stdout, NULL, _IOLBF, 0);
    host_wait_go(); /* listen mode: collect's session runs (the first exec ends it) */
    if (argc > 1 && strcmp(argv[1], "loop") == 0) {
        return run(n);
    }
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        pid = fork();
        if (pid == 0) {
            burn_ms(30);
            fflush(stdout);
            _exit(run(n));
        }
        if (pid < 0 || waitpid(pid, &st, 0) != pid) {
            printf("fork/wait: %s\n", strerror(errno));
            return 1;
        }
        printf("child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "vforkexit") == 0) {
        return vfork_exit(n);
    }
    if (argc > 1 && strcmp(argv[1], "vforkexit-fork") == 0) {
        return vfork_exit_fork(n);
    }
    if (argc > 1 && strcmp(argv[1], "vforkexit-exit") == 0) {
        exit(vfork_exit(n));
    }
    fprintf(stderr, "usage: execfail loop|child|vforkexit|vforkexit-exit|vforkexit-fork [N]\n");
    return 2;
}
