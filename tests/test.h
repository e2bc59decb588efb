/* SPDX-License-Identifier: MIT */
/*
 * tests/test.h - the unit test harness. Each case runs in a fork()ed child under alarm(), so a
 * crash, a hang or a stray signal handler fails that case only. Output is TAP-like; the last
 * line is "N passed, N failed, N skipped". `./test-x CASE` runs one case in-process (for gdb).
 */
#ifndef PP_TEST_H
#define PP_TEST_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct test_case {
    const char *name;
    void (*fn)(void);
    unsigned timeout_s; /* 0: the default, 60 s */
};

#define TEST(name) static void test_##name(void)
#define TEST_CASE(name)       \
    {                         \
#name, test_##name, 0 \
    }
#define TEST_CASE_TIMEOUT(name, secs) \
    {                                 \
#name, test_##name, (secs)    \
    }

int test_main(int argc, char **argv, const struct test_case *cases, size_t n);
#define TEST_MAIN(cases)                                                         \
    int main(int argc, char **argv)                                              \
    {                                                                            \
        return test_main(argc, argv, cases, sizeof(cases) / sizeof((cases)[0])); \
    }

/* Fails the running case with a message; never returns. */
void test_fail(const char *file, int line, const char *fmt, ...)
        __attribute__((noreturn, format(printf, 3, 4)));
/* Ends the running case as skipped, with the reason printed loudly; never returns. */
void test_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* Nonzero when the test runs under an emulator (qemu-user for a cross build: cmake/tests.cmake
 * sets PP_EMULATED): code is translated as it first runs, on the thread's CPU clock, and
 * /proc/TID/syscall shows the emulator's registers. */
static inline int
test_emulated(void)
{
    const char *v = getenv("PP_EMULATED");

    return v != NULL && v[0] == '1';
}

/* Copies len bytes so that the byte after the copy is on a PROT_NONE page. Never freed. */
const uint8_t *test_guarded_copy(const void *bytes, size_t len);
/* Path under the source tree: test_source_path("tests/data/x"). Static buffer. */
const char *test_source_path(const char *rel);
/* Reads a whole file; returns malloc'd bytes (caller frees) and stores its size, or NULL. */
uint8_t *test_read_file(const char *path, size_t *len);
/* 1 when something (a symbolic link not followed) is at dir/name, else 0. */
int test_file_in(const char *dir, const char *name);
/* Milliseconds on the monotonic clock. */
uint64_t test_ms_now(void);
/* Reads fd until EOF (a stream's end); fails the case after timeout_ms. Returns malloc'd bytes
 * (caller frees) and stores their count. */
uint8_t *test_read_to_eof(int fd, size_t *len, int timeout_ms);

/* A thread that spins on one CPU (test_spinner_main), at SCHED_IDLE when idle: beside a spinner
 * of normal priority on the same CPU it is runnable all the time and waits for the core. */
struct test_spinner {
    int cpu, idle;               /* set by the caller (test_first_cpu()) */
    _Atomic int32_t tid;         /* its thread id, once it runs */
    _Atomic int ready;           /* 1 pinned (and idle), -1 it could not be */
    _Atomic int *stop;           /* it spins until *stop */
    _Atomic uint64_t stopped_ns; /* CLOCK_MONOTONIC as it saw *stop and left */
};
void *test_spinner_main(void *spinner);
/* The first CPU this process may run on. */
int test_first_cpu(void);
/* 1 when process_vm_readv of this process fails with ENOSYS or EPERM: qemu-user answers it so
 * (the agent's probe then turns remote reads off, agent.c), and a seccomp filter may. */
int test_remote_read_missing(void);

#define ASSERT_TRUE(c)                                                   \
    do {                                                                 \
        if (!(c)) {                                                      \
            test_fail(__FILE__, __LINE__, "ASSERT_TRUE(%s) failed", #c); \
        }                                                                \
    } while (0)
#define ASSERT_EQ(a, b)                                                                        \
    do {                                                                                       \
        long long test_a_ = (long long)(a), test_b_ = (long long)(b);                          \
        if (test_a_ != test_b_) {                                                              \
            test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, test_a_, test_b_); \
        }                                                                                      \
    } while (0)
#define ASSERT_U64_EQ(a, b)                                                                     \
    do {                                                                                        \
        uint64_t test_a_ = (uint64_t)(a), test_b_ = (uint64_t)(b);                              \
        if (test_a_ != test_b_) {                                                               \
            test_fail(__FILE__, __LINE__, "%s == %s: %" PRIu64 " != %" PRIu64, #a, #b, test_a_, \
                      test_b_);                                                                 \
        }                                                                                       \
    } while (0)
#define ASSERT_OK(e)                                                            \
    do {                                                                        \
        long long test_r_ = (long long)(e);                                     \
        if (test_r_ != 0) {                                                     \
            test_fail(__FILE__, __LINE__, "%s returned %lld (%s)", #e, test_r_, \
                      test_r_ < 0 ? strerror((int)-test_r_) : "not zero");      \
        }                                                                       \
    } while (0)
#define ASSERT_STR_EQ(a, b)                                                        \
    do {                                                                           \
        const char *test_a_ = (a), *test_b_ = (b);                                 \
        if (test_a_ == NULL || test_b_ == NULL || strcmp(test_a_, test_b_) != 0) { \
            test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,    \
                      test_a_ ? test_a_ : "(null)", test_b_ ? test_b_ : "(null)"); \
        }                                                                          \
    } while (0)
#define ASSERT_MEM_EQ(a, b, n)                                                    \
    do {                                                                          \
        if (memcmp((a), (b), (n)) != 0) {                                         \
            test_fail(__FILE__, __LINE__, "memcmp(%s, %s, %s) != 0", #a, #b, #n); \
        }                                                                         \
    } while (0)

#endif /* PP_TEST_H */
