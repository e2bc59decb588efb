/* SPDX-License-Identifier: MIT */
/*
 * tests/harness.c - fork-per-case runner behind tests/test.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/test.h"

#define TEST_EXIT_SKIP 77

void
test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "# FAIL %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(NULL);
    _exit(1);
}

void
test_skip(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "# SKIP: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(NULL);
    _exit(TEST_EXIT_SKIP);
}

const uint8_t *
test_guarded_copy(const void *bytes, size_t len)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t span = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
    uint8_t *map;

    map = mmap(NULL, span + (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
               0);
    if (map == MAP_FAILED) {
        test_fail(__FILE__, __LINE__, "mmap: %s", strerror(errno));
    }
    if (mprotect(map + span, (size_t)page, PROT_NONE) != 0) {
        test_fail(__FILE__, __LINE__, "mprotect: %s", strerror(errno));
    }
    memcpy(map + span - len, bytes, len);
    return map + span - len;
}

const char *
test_source_path(const char *rel)
{
    static char buf[4096];
    const char *root = getenv("PP_SOURCE_DIR");

    snprintf(buf, sizeof(buf), "%s/%s", root != NULL ? root : ".", rel);
    return buf;
}

uint8_t *
test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long size;

    if (f == NULL) {
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        goto out;
    }
    buf = malloc((size_t)size + 1);
    if (buf != NULL && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
        goto out;
    }
    *len = (size_t)size;
out:
    fclose(f);
    return buf;
}

int
test_file_in(const char *dir, const char *name)
{
    char path[512];
    struct stat st;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return lstat(path, &st) == 0;
}

uint64_t
test_ms_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint8_t *
test_read_to_eof(int fd, size_t *len, int timeout_ms)
{
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    uint64_t end = test_ms_now() + (uint64_t)timeout_ms;

    ASSERT_TRUE(buf != NULL);
    for (;;) {
        struct pollfd p = { fd, POLLIN, 0 };
        ssize_t k;

        ASSERT_TRUE(test_ms_now() < end);
        if (poll(&p, 1, 100) <= 0) {
            continue;
        }
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            ASSERT_TRUE(buf != NULL);
        }
        k = read(fd, buf + n, cap - n);
        if (k <= 0) {
            break;
        }
        n += (size_t)k;
    }
    *len = n;
    return buf;
}

/* The pgrp field of /proc/PID/stat (after the parenthesised name, which may hold anything), or
 * -1; -1 too for a zombie (a child the case killed and did not reap, reaped once reparented). */
static pid_t
test_pgrp_of(pid_t pid)
{
    char path[64], buf[512], *p, state = '?';
    int fd, pgrp = -1;
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return -1;
    }
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 1, " %c %*d %d", &state, &pgrp) != 2 || state == 'Z') {
        return -1;
    }
    return (pid_t)pgrp;
}

/* Prints the file /proc/PID/NAME, each line prefixed, at most max lines. */
static void
test_print_proc(pid_t pid, const char *name, int max)
{
    char path[64], line[256];
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
    f = fopen(path, "re");
    if (f == NULL) {
        return;
    }
    while (max-- > 0 && fgets(line, sizeof(line), f) != NULL) {
        fprintf(stderr, "#   %s: %s%s", name, line, strchr(line, '\n') != NULL ? "" : "\n");
    }
    fclose(f);
}

/*
 * A case's processes that outlived it (the case runs as a process group of its own): a child it
 * forked that hung kept ctest's pipe open, and ctest waited out its 600 s for the whole binary
 * twice (a CI run's TSan stage: a forked child spinning on a lock its parent's thread held). Each
 * is described (its state, kernel stack, and its threads' user stacks when gdb is on the PATH
 * and the case failed) and killed; the case's result stands, with these lines beside it.
 */
static void
test_reap_group(pid_t pgrp, int failed)
{
    struct dirent *e;
    DIR *d;

    if (kill(-pgrp, 0) != 0) {
        return; /* none left */
    }
    d = opendir("/proc");
    while (d != NULL && (e = readdir(d)) != NULL) {
        pid_t p = (pid_t)atoi(e->d_name);
        char cmd[160];

        if (p <= 0 || test_pgrp_of(p) != pgrp) {
            continue;
        }
        fprintf(stderr, "# process %d of the case outlived it:\n", (int)p);
        test_print_proc(p, "status", 3);
        test_print_proc(p, "wchan", 1);
        test_print_proc(p, "syscall", 1);
        test_print_proc(p, "stack", 16);
        if (failed) {
            snprintf(cmd, sizeof(cmd),
                     "command -v gdb >/dev/null && timeout 60 gdb -batch -nx -p %d "
                     "-ex 'thread apply all bt' 2>&1 | sed 's/^/#   gdb: /' >&2",
                     (int)p);
            fflush(NULL);
            if (system(cmd) != 0) {
                fprintf(stderr, "#   (no gdb backtrace)\n");
            }
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    kill(-pgrp, SIGKILL);
}

static int
test_run_one(const struct test_case *tc)
{
    unsigned timeout = tc->timeout_s != 0 ? tc->timeout_s : 60;
    int status;
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "# fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        setpgid(0, 0); /* the case's group: test_reap_group() */
        alarm(timeout);
        tc->fn();
        fflush(NULL);
        _exit(0);
    }
    setpgid(pid, pid); /* either side's call makes it, before any fork of the case */
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            return 1;
        }
    }
    if (WIFEXITED(status)) {
        test_reap_group(pid, WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != TEST_EXIT_SKIP);
        return WEXITSTATUS(status);
    }
    fprintf(stderr, "# killed by signal %d%s\n", WTERMSIG(status),
            WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
    test_reap_group(pid, 1);
    return 1;
}

int
test_main(int argc, char **argv, const struct test_case *cases, size_t n)
{
    size_t passed = 0, failed = 0, skipped = 0, ran = 0;
    size_t i;

    if (argc > 1) {
        for (i = 0; i < n; i++) {
            if (strcmp(argv[1], cases[i].name) == 0) {
                cases[i].fn(); /* in-process, for gdb */
                printf("ok - %s\n", cases[i].name);
                return 0;
            }
        }
        fprintf(stderr, "no test case named %s\n", argv[1]);
        return 2;
    }
    printf("1..%zu\n", n);
    for (i = 0; i < n; i++) {
        int rc = test_run_one(&cases[i]);

        ran++;
        if (rc == 0) {
            passed++;
            printf("ok %zu - %s\n", ran, cases[i].name);
        } else if (rc == TEST_EXIT_SKIP) {
            skipped++;
            printf("ok %zu - %s # SKIP\n", ran, cases[i].name);
        } else {
            failed++;
            printf("not ok %zu - %s\n", ran, cases[i].name);
        }
        fflush(stdout);
    }
    printf("%zu passed, %zu failed, %zu skipped\n", passed, failed, skipped);
    return failed == 0 ? 0 : 1;
}

void *
test_spinner_main(void *spinner)
{
    struct test_spinner *p = spinner;
    struct sched_param none = { 0 };
    volatile uint64_t x = 1;
    struct timespec ts;
    cpu_set_t one;

    CPU_ZERO(&one);
    CPU_SET(p->cpu, &one);
    atomic_store(&p->tid, (int32_t)syscall(SYS_gettid));
    if (sched_setaffinity(0, sizeof(one), &one) != 0 ||
        (p->idle && sched_setscheduler(0, SCHED_IDLE, &none) != 0)) {
        atomic_store(&p->ready, -1);
        return NULL;
    }
    atomic_store(&p->ready, 1);
    while (!atomic_load_explicit(p->stop, memory_order_relaxed)) {
        x = x * 6364136223846793005ULL + 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    atomic_store(&p->stopped_ns, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
    return NULL;
}

int
test_first_cpu(void)
{
    cpu_set_t mask;
    int cpu = 0;

    if (sched_getaffinity(0, sizeof(mask), &mask) == 0) {
        while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &mask)) {
            cpu++;
        }
    }
    return cpu;
}

int
test_remote_read_missing(void)
{
    uint64_t word = 7, got = 0;
    struct iovec l = { &got, 8 }, r = { &word, 8 };

    return syscall(SYS_process_vm_readv, (long)getpid(), &l, 1L, &r, 1L, 0L) != 8 &&
           (errno == ENOSYS || errno == EPERM);
}
