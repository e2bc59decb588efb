/* SPDX-License-Identifier: MIT */
/*
 * common/clock.h - clock reads in nanoseconds and sleeps, for the sample workloads that measure
 * themselves (samples/groundtruth, syscalls, forkwork) and the benchmark programs (bench/).
 * Inline, so no extra frame stands between a workload's named functions and the work a profile
 * must place in them. Header only: libc, and the kernel's perf_event.h for the task clock.
 */
#ifndef PP_CLOCK_H
#define PP_CLOCK_H

#include <linux/perf_event.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* clk's reading in nanoseconds. */
static inline uint64_t
pp_clock_ns(clockid_t clk)
{
    struct timespec ts;

    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleeps about ns nanoseconds (an interrupted sleep ends early). */
static inline void
pp_sleep_ns(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

    nanosleep(&ts, NULL);
}

/* A task-clock counter of the calling thread (perf_event_open, counting only), or -1 (errno set)
 * where perf_event_open is refused; the caller closes it. A workload that times its own phases
 * reads this instead of CLOCK_THREAD_CPUTIME_ID: a read of the thread's own CPU clock brings the
 * scheduler's accounting up to date, which switches out there a thread whose slice is used up
 * while another waits for its core, and a read(2) of the counter does not (docs/architecture.md,
 * "The write/compute split's bias"). It counts user and kernel time alike; exclude_kernel is what
 * an unprivileged user may ask, and filters only a sampling event's overflows. */
static inline int
pp_task_clock_open(void)
{
    struct perf_event_attr attr = { .size = sizeof(attr),
                                    .type = PERF_TYPE_SOFTWARE,
                                    .config = PERF_COUNT_SW_TASK_CLOCK,
                                    .exclude_kernel = 1,
                                    .exclude_hv = 1 };

    return (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* The thread's CPU time in nanoseconds: the counter's (fd from pp_task_clock_open), or its CPU
 * clock's when fd is -1. Aborts when the counter cannot be read. */
static inline uint64_t
pp_task_clock_ns(int fd)
{
    uint64_t v;

    if (fd < 0) {
        return pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    }
    if (read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v)) {
        abort();
    }
    return v;
}

#endif /* PP_CLOCK_H */
