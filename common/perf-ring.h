/* SPDX-License-Identifier: MIT */
/*
 * common/perf-ring.h - reading a perf_event ring buffer's records, for the agent's perf-ring
 * engine (agent/perf-ring.c) and the benchmark that measured that delivery before it was built
 * (bench/bench-perfring.c). Header only: libc and the kernel's perf_event.h. The caller owns the
 * mapping and the position; these only copy bytes out of it.
 */
#ifndef PP_PERF_RING_H
#define PP_PERF_RING_H

#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>

/* Copies len bytes at position pos of the ring's data area (data, pg->data_size long) to out,
 * across the area's end where the record wraps. */
static inline void
pp_perf_ring_copy(const struct perf_event_mmap_page *pg, const unsigned char *data, uint64_t pos,
                  void *out, size_t len)
{
    uint64_t off = pos % pg->data_size, first = pg->data_size - off;

    if (first >= len) {
        memcpy(out, data + off, len);
    } else {
        memcpy(out, data + off, first);
        memcpy((unsigned char *)out + first, data, len - first);
    }
}

/* A record's 64-bit field at p (records are 8-byte aligned within themselves, not in memory
 * the caller copied them to). */
static inline uint64_t
pp_perf_ring_u64(const unsigned char *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

#endif
