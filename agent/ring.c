/* SPDX-License-Identifier: MIT */
/*
 * agent/ring.c - allocation of the per-thread SPSC sample rings (the lock-free operations are
 * static inline in agent/internal.h). Context: ordinary threads, when a thread is registered
 * and when the agent stops; never in a signal handler. Slots are mmap'ed so that an idle
 * thread's ring costs address space, not memory, until samples touch it.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "agent/internal.h"

int
ag_ring_init(struct ag_ring *r, unsigned slots, unsigned max_frames)
{
    size_t slot_size = sizeof(struct ag_sample) + (size_t)max_frames * sizeof(uint64_t);
    size_t len;
    void *p;

    if (slots == 0 || (slots & (slots - 1)) != 0 || max_frames == 0) {
        return -EINVAL;
    }
    slot_size = (slot_size + 63) & ~(size_t)63; /* one producer write never shares a line */
    len = slot_size * slots;
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return -ENOMEM;
    }
    atomic_store_explicit(&r->head, 0, memory_order_relaxed);
    atomic_store_explicit(&r->tail, 0, memory_order_relaxed);
    r->mask = slots - 1;
    r->slot_size = slot_size;
    r->map_len = len;
    r->slots = p;
    return 0;
}

void
ag_ring_fini(struct ag_ring *r)
{
    if (r->slots != NULL) {
        munmap(r->slots, r->map_len);
    }
    r->slots = NULL;
    r->map_len = 0;
    r->mask = 0;
    atomic_store_explicit(&r->head, 0, memory_order_relaxed);
    atomic_store_explicit(&r->tail, 0, memory_order_relaxed);
}
