/* SPDX-License-Identifier: MIT */
/*
 * agent/ring.c - allocation of the per-thread SPSC sample rings (the lock-free operations are
 * static inline in agent/internal.h). Context: ordinary threads, when a thread is registered
 * and when the agent stops; never in a signal handler. Slots are mmap'ed so that an idle
 * thread's ring costs address space, not memory, until samples touch it; a mapping is never
 * unmapped while the agent may run (internal.h says why), only emptied.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "agent/internal.h"

static void
ag_ring_reset(struct ag_ring *r)
{
    atomic_store_explicit(&r->head, 0, memory_order_relaxed);
    atomic_store_explicit(&r->tail, 0, memory_order_relaxed);
    r->reserved = 0;
    r->trimmed_at = 0;
}

static size_t
ag_ring_slot_size(unsigned max_frames)
{
    size_t slot_size = sizeof(struct ag_sample) + (size_t)max_frames * sizeof(uint64_t);

    return (slot_size + 63) & ~(size_t)63; /* one producer write never shares a line */
}

int
ag_ring_fits(const struct ag_ring *r, unsigned slots, unsigned max_frames)
{
    return r->slots != NULL && r->mask + 1 == slots &&
           r->slot_size == ag_ring_slot_size(max_frames);
}

int
ag_ring_init(struct ag_ring *r, unsigned slots, unsigned max_frames)
{
    size_t slot_size = ag_ring_slot_size(max_frames);
    size_t len;
    void *p;

    if (slots == 0 || (slots & (slots - 1)) != 0 || max_frames == 0) {
        return -EINVAL;
    }
    len = slot_size * slots;
    if (r->slots != NULL && r->map_len >= len) {
        p = r->slots; /* a stale producer with the old geometry stays inside it too */
    } else {
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            return -ENOMEM;
        }
        ag_ring_discard(r); /* the old mapping, if any, stays: only its memory goes */
        r->map_len = len;
    }
    ag_ring_reset(r);
    r->mask = slots - 1;
    r->slot_size = slot_size;
    /* Published last (release): a consumer that reads it non-NULL (acquire, ag_ring_slots) reads
     * the geometry above. auto's perf-ring maps a thread's pring when a scan gives it a ring, under
     * reg_lock, while a drain (drain_lock) peeks it (TSan: this store against ag_ring_peek's
     * read, in test-agent-sampling's cpu_mode_samples_both_busy_threads). */
    __atomic_store_n(&r->slots, (unsigned char *)p, __ATOMIC_RELEASE);
    return 0;
}

void
ag_ring_discard(struct ag_ring *r)
{
    if (r->slots == NULL) {
        return;
    }
    /* As the consumer: what is there is dropped. The producer's indices stay its own, so that a
     * stale producer (one that read the ring before a stop) races with nothing; its sample, in
     * a page given back meanwhile, reads as a slot of thread 0, which the drain counts lost. */
    atomic_store_explicit(&r->tail, atomic_load_explicit(&r->head, memory_order_acquire),
                          memory_order_release);
    (void)madvise(r->slots, r->map_len, MADV_DONTNEED);
    r->trimmed_at = atomic_load_explicit(&r->tail, memory_order_relaxed);
}

int
ag_ring_trim(struct ag_ring *r)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);

    if (r->slots == NULL || head != atomic_load_explicit(&r->tail, memory_order_acquire) ||
        head == r->trimmed_at) {
        return 0;
    }
    (void)madvise(r->slots, r->map_len, MADV_DONTNEED);
    r->trimmed_at = head;
    return 1;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* MADV_POPULATE_WRITE of slots [from, from + n) of r, within the ring's memory. */
static void
ag_ring_populate_at(struct ag_ring *r, uint64_t from, uint64_t n)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)(r->slots + from * r->slot_size);
    uintptr_t hi = (uintptr_t)(r->slots + (from + n) * r->slot_size);

    lo &= ~(uintptr_t)(page - 1);
    (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
}

void
ag_ring_populate(struct ag_ring *r, unsigned n)
{
    uint64_t at, slots = (uint64_t)r->mask + 1u;

    if (r->slots == NULL) {
        return;
    }
    n = n < slots ? n : (unsigned)slots;
    at = atomic_load_explicit(&r->head, memory_order_acquire) & r->mask;
    ag_ring_populate_at(r, at, at + n <= slots ? n : slots - at);
    if (at + n > slots) {
        ag_ring_populate_at(r, 0, at + n - slots);
    }
    ag_ring_populate_at(r, 0, n); /* an empty ring's consumer moves it to a lap's first slot */
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
    ag_ring_reset(r);
}
