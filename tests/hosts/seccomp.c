/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/seccomp.c - a host that installs a seccomp filter (or strict mode) while it runs,
 * as sandboxing programs do (host/seccomp.c): the library must stop before the call and the host
 * get bare's results. The filters allow a small list of calls (what this host makes after them)
 * and answer every other one with EPERM or kill the process: the library's threads, had they
 * stayed, would have met it.
 *
 *   seccomp tsync   CPU burnt on the main thread and a worker, then (the session running, in
 *                   listen mode) a filter of EPERM for all but the list installed with
 *                   SECCOMP_FILTER_FLAG_TSYNC by syscall(SYS_seccomp), then more CPU on both, a
 *                   fork()ed child that sleeps past the library's fork start delay and exits 7,
 *                   and sleeps (the reproducer's: bare "done", preloaded SIGSEGV)
 *   seccomp kill    the same with a filter that kills the process (SECCOMP_RET_KILL_PROCESS) for
 *                   every call off the list: a systemd-like SystemCallFilter=
 *   seccomp nosync  a killing filter without TSYNC by prctl(PR_SET_SECCOMP), whose list lacks
 *                   rt_sigreturn, on the main thread, which then burns CPU: a sampled thread's
 *                   signal handler could not return
 *   seccomp strict  a worker enters strict mode by prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT),
 *                   burns CPU without a system call, writes a line and ends by SYS_exit
 *   seccomp inherited  a launcher: a filter that allows everything but the debugging calls a
 *                   service's list leaves out (process_vm_readv and _writev, perf_event_open, kcmp,
 *                   pidfd_open, pidfd_getfd, memfd_create), killing the process at any of them (a
 *                   systemd-like SystemCallFilter=@system-service), then exec of this program as
 *                   "inherited-child", which starts under that filter: CPU burnt on the main
 *                   thread and a worker, a pipe's I/O, sleeps (before: SIGSYS at the library's
 *                   first process_vm_readv, the server's read of its socket address, preloaded
 *                   with no session)
 *   seccomp inheritedkill  the same launcher with a filter that also kills socket(2) and
 *                   timer_create(2) (a list without networking or timers): the library, which
 *                   needs both, stays out of the child (one line on stderr) and the child runs as
 *                   bare (before: SIGSYS at the server's socket in the library's constructor)
 *   seccomp none    the calls that install nothing (SECCOMP_GET_ACTION_AVAIL,
 *                   SECCOMP_GET_NOTIF_SIZES, strict mode with flags, an unknown operation, a
 *                   filter of a NULL program), then CPU burnt: the library keeps running
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "hosts.h"

#if defined(__x86_64__)
#define HOST_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define HOST_ARCH AUDIT_ARCH_AARCH64
#endif

#define ALLOW(nr) \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

/* A filter of the calls this host makes after it (and the loader's, libc's exit and thread
 * exit); every other call gets deny. with_sigreturn: rt_sigreturn is on the list. */
static int
filter_install(unsigned deny, unsigned flags, int by_prctl, int with_sigreturn)
{
#ifdef HOST_ARCH
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, HOST_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, deny),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        ALLOW(SYS_read),
        ALLOW(SYS_write),
        ALLOW(SYS_writev),
        ALLOW(SYS_exit),
        ALLOW(SYS_exit_group),
        ALLOW(SYS_futex),
        ALLOW(SYS_nanosleep),
        ALLOW(SYS_clock_nanosleep),
        ALLOW(SYS_clock_gettime),
        ALLOW(SYS_rt_sigprocmask),
        ALLOW(SYS_getpid),
        ALLOW(SYS_gettid),
        ALLOW(SYS_newfstatat),
        ALLOW(SYS_fstat),
        ALLOW(SYS_clone),
        ALLOW(SYS_clone3),
        ALLOW(SYS_wait4),
        ALLOW(SYS_mmap),
        ALLOW(SYS_munmap),
        ALLOW(SYS_madvise),
        ALLOW(SYS_mprotect),
        ALLOW(SYS_brk),
        ALLOW(SYS_set_robust_list),
        ALLOW(SYS_rseq),
        ALLOW(SYS_sched_yield),
        ALLOW(SYS_getrandom),
        ALLOW(with_sigreturn ? SYS_rt_sigreturn : SYS_read),
        BPF_STMT(BPF_RET | BPF_K, deny),
    };
    struct sock_fprog prog = { sizeof(code) / sizeof(code[0]), code };
    long rc;

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        return -1;
    }
    rc = by_prctl ? prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)
                  : syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
    return (int)rc;
#else
    (void)deny;
    (void)flags;
    (void)by_prctl;
    (void)with_sigreturn;
    errno = ENOSYS;
    return -1;
#endif
}

static atomic_int phase; /* 1: the filter is in; 2: the worker may end */

static void *
worker(void *arg)
{
    (void)arg;
    host_burn_us(100000);
    while (atomic_load(&phase) == 0) {
        host_burn_us(1000);
    }
    host_burn_us(100000); /* under the filter */
    return NULL;
}

/* A fork()ed child of the filtered process: it outlives the library's fork start delay (5 ms),
 * so a start there would have run, then exits 7. */
static void
fork_child(void)
{
    struct timespec t = { 0, 50000000L };
    pid_t pid;
    int status = 0;

    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        nanosleep(&t, NULL);
        printf("child: exits 7\n");
        exit(7);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        printf("fork: %s\n", strerror(errno));
        return;
    }
    printf("child status: %s %d\n", WIFEXITED(status) ? "exit" : "signal",
           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

static int
filtered(unsigned deny)
{
    pthread_t th;
    int rc;

    if (pthread_create(&th, NULL, worker, NULL) != 0) {
        printf("pthread_create failed\n");
        return 1;
    }
    host_burn_us(100000);
    host_wait_go();
    rc = filter_install(deny, SECCOMP_FILTER_FLAG_TSYNC, 0, 1);
    printf("seccomp TSYNC: %d %s\n", rc, rc != 0 ? strerror(errno) : "");
    atomic_store(&phase, 1);
    host_burn_us(100000);
    pthread_join(th, NULL);
    fork_child();
    for (int i = 0; i < 10; i++) {
        struct timespec t = { 0, 20000000L };

        nanosleep(&t, NULL);
    }
    printf("done\n");
    return 0;
}

static int
nosync(void)
{
    int rc;

    host_burn_us(100000);
    host_wait_go();
    rc = filter_install(SECCOMP_RET_KILL_PROCESS, 0, 1, 0);
    printf("prctl(PR_SET_SECCOMP, FILTER) without rt_sigreturn: %d %s\n", rc,
           rc != 0 ? strerror(errno) : "");
    fflush(stdout);
    host_burn_us(300000);
    printf("done\n");
    return 0;
}

static void *
strict_worker(void *arg)
{
    static const char line[] = "strict thread: done\n";
    volatile unsigned long x = 0;

    (void)arg;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) != 0) {
        printf("strict mode: %s\n", strerror(errno));
        return NULL;
    }
    for (unsigned long i = 0; i < 300000000ul; i++) { /* no system call: strict mode */
        x += i * 7u;
    }
    (void)!write(1, line, sizeof(line) - 1);
    syscall(SYS_exit, 0); /* strict mode allows exit, not exit_group or glibc's thread end */
    return NULL;
}

static int
strict(void)
{
    struct timespec until;
    pthread_t th;

    host_burn_us(100000);
    host_wait_go();
    fflush(stdout);
    if (pthread_create(&th, NULL, strict_worker, NULL) != 0) {
        printf("pthread_create failed\n");
        return 1;
    }
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60; /* a strict thread that never ends is said, not waited for */
    if (pthread_timedjoin_np(th, NULL, &until) != 0) {
        printf("the strict thread did not end within 60 s\n");
        return 1;
    }
    host_burn_us(100000);
    printf("done\n");
    return 0;
}

#define DENY(nr)                                     \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)

static int
inherited(char **argv, int kill_more)
{
#ifdef HOST_ARCH
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        DENY(kill_more ? SYS_socket : SYS_process_vm_readv),
        DENY(kill_more ? SYS_timer_create : SYS_process_vm_readv),
        DENY(SYS_process_vm_readv),
        DENY(SYS_process_vm_writev),
        DENY(SYS_perf_event_open),
        DENY(SYS_kcmp),
        DENY(SYS_pidfd_open),
        DENY(SYS_pidfd_getfd),
        DENY(SYS_memfd_create),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { sizeof(code) / sizeof(code[0]), code };
    char *child[] = { argv[0], "inherited-child", NULL };

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
        printf("seccomp: %s\n", strerror(errno));
        return 1;
    }
    fflush(stdout);
    execv("/proc/self/exe", child);
    printf("exec: %s\n", strerror(errno));
    return 1;
#else
    (void)argv;
    return 1;
#endif
}

static int
inherited_child(void)
{
    pthread_t th;
    struct rlimit core;
    int fds[2];
    char c = 'x';

    printf("started under the inherited filter\n");
    /* the library's probe of the filter (host/host.c) leaves the process's own flags alone */
    printf("dumpable %d\n", prctl(PR_GET_DUMPABLE, 0, 0, 0, 0));
    if (getrlimit(RLIMIT_CORE, &core) == 0) {
        printf("core limit %s\n", core.rlim_cur == 0 ? "0" : "not 0");
    }
    if (pthread_create(&th, NULL, worker, NULL) != 0) {
        printf("pthread_create failed\n");
        return 1;
    }
    host_wait_go();
    host_burn_us(200000);
    atomic_store(&phase, 1);
    pthread_join(th, NULL);
    if (pipe(fds) == 0) {
        ssize_t w = write(fds[1], &c, 1), r = read(fds[0], &c, 1);

        printf("pipe: write %zd, read %zd\n", w, r);
        close(fds[0]);
        close(fds[1]);
    }
    for (int i = 0; i < 10; i++) {
        struct timespec t = { 0, 20000000L };

        nanosleep(&t, NULL);
    }
    printf("done\n");
    return 0;
}

static void
result(const char *what, long rc)
{
    printf("%s: %ld %s\n", what, rc, rc < 0 ? strerror(errno) : "");
}

static int
none(void)
{
    unsigned action = SECCOMP_RET_KILL_PROCESS;
    struct seccomp_notif_sizes sizes;

    host_wait_go();
    result("prctl(PR_SET_SECCOMP, FILTER, NULL)", prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, 0));
    result("prctl(PR_SET_SECCOMP, 7)", prctl(PR_SET_SECCOMP, 7, 0));
    result("prctl(PR_SET_NO_NEW_PRIVS)", prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
    result("seccomp GET_ACTION_AVAIL", syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action));
    result("seccomp GET_NOTIF_SIZES", syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes));
    result("seccomp SET_MODE_STRICT flags 1", syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 1, 0));
    result("seccomp SET_MODE_FILTER of NULL", syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, 0));
    result("seccomp operation 99", syscall(SYS_seccomp, 99, 0, 0));
    host_burn_us(200000);
    printf("done\n");
    return 0;
}

int
main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

#ifndef HOST_ARCH
    printf("seccomp: SKIPPED, no architecture check for this machine\n");
    fprintf(stderr, "SKIP (loud): seccomp: no seccomp architecture here\n");
    return 0;
#endif
    if (strcmp(mode, "tsync") == 0) {
        return filtered(SECCOMP_RET_ERRNO | EPERM);
    }
    if (strcmp(mode, "kill") == 0) {
        return filtered(SECCOMP_RET_KILL_PROCESS);
    }
    if (strcmp(mode, "nosync") == 0) {
        return nosync();
    }
    if (strcmp(mode, "strict") == 0) {
        return strict();
    }
    if (strcmp(mode, "none") == 0) {
        return none();
    }
    if (strcmp(mode, "inherited") == 0 || strcmp(mode, "inheritedkill") == 0) {
        return inherited(argv, strcmp(mode, "inheritedkill") == 0);
    }
    if (strcmp(mode, "inherited-child") == 0) {
        return inherited_child();
    }
    fprintf(stderr, "usage: host-seccomp tsync|kill|nosync|strict|none|inherited|inheritedkill\n");
    return 2;
}
