/* SPDX-License-Identifier: MIT */
/*
 * samples/clock.h - the clock reads and sleeps of the sample workloads that measure themselves
 * (groundtruth, syscalls, forkwork). Inline, so no extra frame stands between a workload's named
 * functions and the work a profile must place in them. Header only, libc only.
 */
#ifndef PP_SAMPLES_CLOCK_H
#define PP_SAMPLES_CLOCK_H

#include <stdint.h>
#include <time.h>

/* clk's reading in nanoseconds. */
static inline uint64_t
sample_clock_ns(clockid_t clk)
{
    struct timespec ts;

    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleeps about ns nanoseconds (an interrupted sleep ends early). */
static inline void
sample_sleep_ns(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

    nanosleep(&ts, NULL);
}

#endif /* PP_SAMPLES_CLOCK_H */
