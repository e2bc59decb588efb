/* SPDX-License-Identifier: MIT */
/*
 * common/clock.h - clock reads in nanoseconds and sleeps, for the sample workloads that measure
 * themselves (samples/groundtruth, syscalls, forkwork) and the benchmark programs (bench/).
 * Inline, so no extra frame stands between a workload's named functions and the work a profile
 * must place in them. Header only, libc only.
 */
#ifndef PP_CLOCK_H
#define PP_CLOCK_H

#include <stdint.h>
#include <time.h>

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

#endif /* PP_CLOCK_H */
