/* SPDX-License-Identifier: MIT */
/*
 * samples/modreuse/lib.c - the two libraries of pp-sample-modreuse, built from this one source
 * (MODREUSE_NAME is pp_modreuse_a_burn in libpp-modreuse-a.so, pp_modreuse_b_burn in
 * libpp-modreuse-b.so): the same code at the same offsets, so that libb loaded where liba was
 * has its function at the very addresses liba's had. Each burns the calling thread's CPU for the
 * time asked.
 */
#include <stdint.h>

#include "common/clock.h"

#ifndef MODREUSE_NAME
#error "MODREUSE_NAME names the library's function"
#endif

static uint64_t
modreuse_cpu_ns(void)
{
    return pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

uint64_t MODREUSE_NAME(unsigned ms);

/* Burns ms of the thread's CPU in this function (the clock is read every 2^16 rounds). */
__attribute__((noinline, visibility("default"))) uint64_t
MODREUSE_NAME(unsigned ms)
{
    uint64_t end = modreuse_cpu_ns() + (uint64_t)ms * 1000000u;
    volatile uint64_t x = 1;

    do {
        for (unsigned i = 0; i < 65536u; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
        }
    } while (modreuse_cpu_ns() < end);
    return x;
}
