/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/procstat.c - the process's thread count as the host reads it from /proc
 * (host/procstat.c): every number must be bare's.
 *
 *   procstat counts  num_threads (field 20 of /proc/self/stat) read as CPython 3.12's os.fork()
 *                    reads it (fopen, one fread of 159 bytes), by open+read, by fopen "re" and
 *                    open64; of /proc/<pid>/stat, /proc/thread-self/stat and
 *                    /proc/self/task/<tid>/stat; Threads: of /proc/self/status and
 *                    /proc/<pid>/status; single-threaded, then with 3 threads of its own waiting
 *                    (not after a join: the kernel counts a joined thread a moment longer). With
 * each open also: the fd's number is the lowest free one, a second read after lseek(0) gives the
 * same count, a write fails with EBADF, and fstat says a regular file.
 *
 *   procstat altstack  Threads: of /proc/self/status read by a signal handler that runs on an
 *                    alternate stack of 8 KiB (SIGSTKSZ as glibc long defined it; 64 KiB in the
 *                    ASan build, whose frames are several times larger) with an
 *                    unmapped page below it, as a crash handler may: whatever the library does
 *                    in the open must fit there with the kernel's signal frame (an 8 KiB buffer
 *                    on the stack did not: SIGSEGV); then close_range(CLOSE_RANGE_UNSHARE) of
 *                    nothing there (the library's record of an unshare: 8 KiB of marks), and
 *                    the other interposed async-signal-safe calls (mask, waits, a pipe's I/O).
 *
 *   procstat signals  SigIgn, SigCgt and SigBlk of /proc/self/status (and of
 *                    /proc/self/task/<tid>/status): alone, with SIGPROF ignored, caught and
 *                    back at SIG_DFL, in a fork()ed child, then after a thread of the host's
 *                    (glibc's SIGSETXID handler comes with it, bare too). The library's handler of
 *                    SIGPROF and the SIGSETXID handler its own first thread brought showed in
 *                    SigCgt before (0000000104000000 under record where bare reads 0).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hosts.h"

/* Field 20 of a stat text (after the command's ')'); -1 when not there. */
static long
stat_threads(const char *text)
{
    const char *p = strrchr(text, ')');
    int field = 2;

    for (; p != NULL && *p != '\0'; p++) {
        if (*p == ' ' && ++field == 20) {
            return strtol(p + 1, NULL, 10);
        }
    }
    return -1;
}

/* Threads: of a status text; -1 when not there. */
static long
status_threads(const char *text)
{
    const char *p = strstr(text, "\nThreads:");

    return p != NULL ? strtol(p + 9, NULL, 10) : -1;
}

/* The count in path by fopen with mode and one fread of at most max bytes (CPython 3.12's read,
 * Modules/posixmodule.c's warn_about_fork_with_threads: "r", 159 bytes, field 20). */
static long
fopen_read(const char *path, const char *mode, int status, size_t max)
{
    char buf[4096];
    FILE *f = fopen(path, mode);
    size_t n;

    if (f == NULL) {
        return -errno;
    }
    n = fread(buf, 1, max < sizeof(buf) ? max : sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return status ? status_threads(buf) : stat_threads(buf);
}

/* read() of fd to the end into buf (NUL-terminated); bytes or -errno. */
static long
read_all(int fd, char *buf, size_t size)
{
    size_t len = 0;

    for (;;) {
        ssize_t n = read(fd, buf + len, size - 1 - len);

        if (n < 0) {
            return -errno;
        }
        if (n == 0) {
            break;
        }
        len += (size_t)n;
    }
    buf[len] = '\0';
    return (long)len;
}

/* The count in path by open (open64 when big) and read; prints what the fd looked like. */
static long
open_read(const char *label, const char *path, int flags, int big, int status)
{
    char buf[4096];
    struct stat st;
    long first, again;
    int lowest, fd, wrote, werr;

    lowest = dup(0); /* the lowest free number */
    close(lowest);
    fd = big ? open64(path, flags) : open(path, flags);
    if (fd < 0) {
        return -errno;
    }
    if (read_all(fd, buf, sizeof(buf)) < 0) {
        close(fd);
        return -1000;
    }
    first = status ? status_threads(buf) : stat_threads(buf);
    again = lseek(fd, 0, SEEK_SET) == 0 && read_all(fd, buf, sizeof(buf)) > 0
                    ? (status ? status_threads(buf) : stat_threads(buf))
                    : -1;
    wrote = (int)write(fd, "x", 1);
    werr = errno;
    printf("%s: fd lowest %d, again %s, write %d %s, regular %d, cloexec %d\n", label, fd == lowest,
           again == first ? "same" : "differs", wrote, strerror(werr),
           fstat(fd, &st) == 0 && S_ISREG(st.st_mode), (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    close(fd);
    return first;
}

static void
counts(const char *when)
{
    char path[128];

    printf("%s: cpython %ld\n", when, fopen_read("/proc/self/stat", "r", 0, 159));
    printf("%s: fopen stat %ld\n", when, fopen_read("/proc/self/stat", "r", 0, 4095));
    printf("%s: fopen-e stat %ld\n", when, fopen_read("/proc/self/stat", "re", 0, 4095));
    printf("%s: fopen status %ld\n", when, fopen_read("/proc/self/status", "r", 1, 4095));
    printf("%s: open stat %ld\n", when, open_read(when, "/proc/self/stat", O_RDONLY, 0, 0));
    printf("%s: open64 stat %ld\n", when,
           open_read(when, "/proc/self/stat", O_RDONLY | O_CLOEXEC, 1, 0));
    printf("%s: open status %ld\n", when, open_read(when, "/proc/self/status", O_RDONLY, 0, 1));
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)getpid());
    printf("%s: open pid stat %ld\n", when, open_read(when, path, O_RDONLY, 0, 0));
    snprintf(path, sizeof(path), "/proc/%d/status", (int)getpid());
    printf("%s: fopen pid status %ld\n", when, fopen_read(path, "r", 1, 4095));
    printf("%s: open thread-self stat %ld\n", when,
           open_read(when, "/proc/thread-self/stat", O_RDONLY, 0, 0));
    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)gettid());
    printf("%s: open task stat %ld\n", when, open_read(when, path, O_RDONLY, 0, 0));
    snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)getpid(), (int)gettid());
    printf("%s: fopen task status %ld\n", when, fopen_read(path, "r", 1, 4095));
}

static pthread_barrier_t barrier;

static void *
waiter(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&barrier); /* started */
    pthread_barrier_wait(&barrier); /* counted */
    return NULL;
}

static volatile long handler_threads = -2;
static volatile int handler_unshare = -2;
static volatile int handler_calls = -2;

/* Async-signal-safe: open, read and close of /proc/self/status, its Threads: parsed by hand. */
static void
status_handler(int sig)
{
    static char text[4096];
    const char *p;
    long n = 0, len = 0;
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

    (void)sig;
    if (fd < 0) {
        handler_threads = -1;
        return;
    }
    while (len < (long)sizeof(text) - 1 && (n = read(fd, text + len, sizeof(text) - 1 - len)) > 0) {
        len += n;
    }
    close(fd);
    /* Nothing closed, the thread's table made its own: async-signal-safe too, and the library's
     * record of it took 8 KiB of the caller's stack as well. */
    handler_unshare = close_range(~0U, ~0U, CLOSE_RANGE_UNSHARE);
    {
        /* The other interposers a handler may call (async-signal-safe ones): the mask, a wait
         * (the agent records a blocked thread's stack there in wall mode), a pipe's write and
         * read, a dup and its close. */
        struct timespec ts = { 0, 1000 };
        sigset_t set, old;
        int fds[2], ok = 0;
        char c = 'x';

        sigemptyset(&set);
        sigaddset(&set, SIGUSR2);
        ok += sigprocmask(SIG_BLOCK, &set, &old) == 0;
        ok += sigprocmask(SIG_SETMASK, &old, NULL) == 0;
        ok += nanosleep(&ts, NULL) == 0;
        ok += poll(NULL, 0, 1) == 0;
        if (pipe(fds) == 0) {
            int d = dup(fds[0]);

            ok += write(fds[1], &c, 1) == 1;
            ok += read(d, &c, 1) == 1;
            ok += close(d) == 0;
            close(fds[0]);
            close(fds[1]);
        }
        handler_calls = ok;
    }
    text[len] = '\0';
    p = strstr(text, "\nThreads:");
    if (p == NULL) {
        handler_threads = -1;
        return;
    }
    for (p += 9, n = 0; *p == '\t' || *p == ' '; p++) {
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (*p - '0');
    }
    handler_threads = n;
}

static int
altstack(void)
{
    long page = sysconf(_SC_PAGESIZE);
#if defined(__SANITIZE_ADDRESS__)
    /* The ASan build's frames (Debug, redzones around every local) take several times the stack:
     * its host and library overflowed 8 KiB in CPU mode (a CI run). The budget is the release
     * build's; here the calls run on the alternate stack all the same. */
    size_t size = 65536;
#else
    size_t size = 8192;
#endif
    char *map = mmap(NULL, size + (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    stack_t ss;
    struct sigaction sa;

    if (map == MAP_FAILED || mprotect(map, (size_t)page, PROT_NONE) != 0) {
        fprintf(stderr, "mmap/mprotect failed\n");
        return 1;
    }
    ss.ss_sp = map + page; /* the unmapped page just below it */
    ss.ss_size = size;
    ss.ss_flags = 0;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = status_handler;
    sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0) {
        fprintf(stderr, "sigaltstack/sigaction failed\n");
        return 1;
    }
    raise(SIGUSR1);
    printf("Threads: of /proc/self/status in a handler on an alternate stack of %zu KiB: %ld\n",
           size / 1024, handler_threads);
    printf("close_range(CLOSE_RANGE_UNSHARE) there: %d\n", handler_unshare);
    printf("sigprocmask, nanosleep, poll, pipe, dup, write, read, close there: %d of 7 ok\n",
           handler_calls);
    return 0;
}

/* The signals a sanitizer runtime preloaded ahead of the library catches itself (the ASan build's
 * runs: its handle_segv, handle_sigbus and handle_sigfpe, on by default), where the bare run has
 * no such runtime: left out of the masks printed. 0 without one. */
static unsigned long long
sanitizer_signals(void)
{
    if (dlsym(RTLD_DEFAULT, "__asan_init") == NULL && dlsym(RTLD_DEFAULT, "__tsan_init") == NULL) {
        return 0;
    }
    return 1ull << (SIGSEGV - 1) | 1ull << (SIGBUS - 1) | 1ull << (SIGFPE - 1) |
           1ull << (SIGILL - 1) | 1ull << (SIGABRT - 1) | 1ull << (SIGTRAP - 1);
}

/* The signal masks of status at path, one line each, prefixed with when. */
static void
signal_lines(const char *when, const char *path)
{
    static const char *const names[] = { "SigBlk:", "SigIgn:", "SigCgt:" };
    unsigned long long mask;
    char line[256];
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        printf("%s: fopen %s: %s\n", when, path, strerror(errno));
        return;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            if (strncmp(line, names[i], 7) == 0 && sscanf(line + 7, "%llx", &mask) == 1) {
                printf("%s: %s %016llx\n", when, names[i], mask & ~sanitizer_signals());
            }
        }
    }
    fclose(f);
}

static void
signal_masks(const char *when)
{
    char path[64];

    signal_lines(when, "/proc/self/status");
    snprintf(path, sizeof(path), "/proc/self/task/%ld/status", (long)gettid());
    signal_lines(when, path);
}

static void
on_prof(int sig)
{
    (void)sig;
}

static void *
idle_thread(void *arg)
{
    return arg;
}

static int
signals(void)
{
    struct sigaction sa;
    pthread_t th;
    pid_t child;
    int status;

    signal_masks("alone");
    signal(SIGPROF, SIG_IGN);
    signal_masks("ignored");
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_prof;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
    signal_masks("caught");
    child = fork();
    if (child == 0) {
        signal_masks("child caught");
        signal(SIGPROF, SIG_DFL);
        signal_masks("child default");
        _exit(0);
    }
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status)) {
        printf("fork: no child, or it did not exit\n");
    }
    signal(SIGPROF, SIG_DFL);
    signal_masks("default");
    if (pthread_create(&th, NULL, idle_thread, NULL) != 0 || pthread_join(th, NULL) != 0) {
        printf("pthread_create failed\n");
        return 1;
    }
    signal_masks("after a thread");
    return 0;
}

int
main(int argc, char **argv)
{
    pthread_t th[3];

    setvbuf(stdout, NULL, _IOLBF, 0);
    host_wait_go();
    if (argc == 2 && strcmp(argv[1], "altstack") == 0) {
        return altstack();
    }
    if (argc == 2 && strcmp(argv[1], "signals") == 0) {
        return signals();
    }
    if (argc < 2 || strcmp(argv[1], "counts") != 0) {
        fprintf(stderr, "usage: host-procstat counts|altstack|signals\n");
        return 2;
    }
    counts("alone");
    pthread_barrier_init(&barrier, NULL, 4);
    for (int i = 0; i < 3; i++) {
        if (pthread_create(&th[i], NULL, waiter, NULL) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    pthread_barrier_wait(&barrier);
    counts("threads");
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
    }
    return 0;
}
