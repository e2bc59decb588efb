/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/hosts.h - shared by the host-contract hosts (the .c files of tests/hosts): small
 * programs that do ordinary, if unusual, things and print every result they get, so that
 * host-contract.sh can compare a bare run with runs under the agent line by line.
 */
#ifndef TESTS_HOSTS_H
#define TESTS_HOSTS_H

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define HOST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HOST_TSAN 1
#endif
#endif

#ifdef HOST_TSAN
/* The sanitizers' hook for a raw close(2) (their linux_syscall_hooks.h, which GCC does not
 * install). */
void __sanitizer_syscall_pre_impl_close(long fd);
/* its dynamic annotations: this thread's accesses not checked in between */
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#endif

/*
 * Under ThreadSanitizer: this thread's accesses not checked from begin to end, fds included. For
 * what its fd model, one table per process that sees no synchronisation through the kernel,
 * reports where no memory is shared: a probe of whether a number is open, made on purpose on a
 * number another thread (the library's, or the host's own held one) opens and closes; a thread
 * of a private fd table (CLOSE_RANGE_UNSHARE) using numbers the library's threads use in the
 * process's table. Elsewhere nothing.
 */
static inline void
host_tsan_unchecked_begin(void)
{
#ifdef HOST_TSAN
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
#endif
}

static inline void
host_tsan_unchecked_end(void)
{
#ifdef HOST_TSAN
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
#endif
}

/*
 * Under ThreadSanitizer: fds lo..hi are about to be closed by a call its runtime does not
 * intercept (close_range, closefrom, syscall(SYS_close): GCC 12's libtsan sees none). Its model
 * of an fd forgets the fd's accesses at a close it sees; at one it does not, a thread that gets
 * the number back from a creation it does not see either (mkstemp, ...) and uses it is reported
 * as racing with the number's last user. Elsewhere nothing.
 */
static inline void
host_tsan_closing(int lo, int hi)
{
#ifdef HOST_TSAN
    for (int fd = lo; fd <= hi; fd++) {
        __sanitizer_syscall_pre_impl_close(fd);
    }
#else
    (void)lo;
    (void)hi;
#endif
}

/* Burns about us microseconds of CPU on the calling thread. */
static inline void
host_burn_us(long us)
{
    struct timespec t0, t;
    volatile unsigned long x = 0;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do {
        for (int i = 0; i < 1000; i++) {
            x += (unsigned long)i * 7u;
        }
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

/* On stderr: where a child that did not exit is (its kernel stack, and its threads' stacks by
 * gdb when gdb is on the PATH), before it is killed: a hang seen only in a CI run is then seen
 * whole in that run's log (the dlfork hosts' children in wall mode, twice). */
static inline void
host_describe_stuck(pid_t pid)
{
    char cmd[320];

    snprintf(cmd, sizeof(cmd),
             "for f in wchan syscall stack; do echo \"stuck child %d: $f: $(cat /proc/%d/$f "
             "2>&1 | tr '\\n' ' ')\"; done >&2; command -v gdb >/dev/null && timeout 60 gdb "
             "-batch -nx -p %d -ex 'thread apply all bt' 2>&1 | sed 's/^/stuck child: /' >&2",
             (int)pid, (int)pid, (int)pid);
    fflush(NULL);
    if (system(cmd) != 0) {
        fprintf(stderr, "stuck child %d: no gdb backtrace\n", (int)pid);
    }
}

/* Waits at most 20 s for child pid: its wait status, -1 for pid < 0 (no fork), or -3 when it did
 * not exit in time (then described on stderr, killed and reaped). */
static inline int
host_wait_child(pid_t pid)
{
    struct timespec tick = { 0, 10000000L };
    int status = 0;

    if (pid < 0) {
        return -1;
    }
    for (int i = 0; i < 2000; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            return status;
        }
        nanosleep(&tick, NULL);
    }
    host_describe_stuck(pid);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -3;
}

/* With HOST_GO set (listen mode), waits until that file exists: the session has started. */
static inline void
host_wait_go(void)
{
    const char *go = getenv("HOST_GO");
    struct timespec ms = { 0, 10000000L };

    for (int i = 0; go != NULL && i < 2000 && access(go, F_OK) != 0; i++) {
        nanosleep(&ms, NULL);
    }
}

/* What programs built with _FORTIFY_SOURCE call for syslog and vsyslog. */
void __syslog_chk(int pri, int flag, const char *fmt, ...);
void __vsyslog_chk(int pri, int flag, const char *fmt, va_list ap);

/* vsyslog, or __vsyslog_chk (chk), of one message. */
static inline void
host_vsyslog(int chk, int pri, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    if (chk) {
        __vsyslog_chk(pri, 1, fmt, ap);
    } else {
        vsyslog(pri, fmt, ap);
    }
    va_end(ap);
}

/* One message at pri, by syslog, vsyslog, __syslog_chk or __vsyslog_chk as turn % 4 says. */
static inline void
host_syslog_message(unsigned turn, int pri)
{
    switch (turn % 4) {
    case 0:
        syslog(pri, "message %u", turn);
        break;
    case 1:
        host_vsyslog(0, pri, "message %u", turn);
        break;
    case 2:
        __syslog_chk(pri, 1, "message %u", turn);
        break;
    default:
        host_vsyslog(1, pri, "message %u", turn);
        break;
    }
}

#endif /* TESTS_HOSTS_H */
