/* SPDX-License-Identifier: MIT */
/*
 * agent/drain.c - the consumer side of the per-thread rings: ag_drain() walks the registry and
 * hands each thread's START (and renames), its pending samples from both rings, its lost count
 * and, for a thread that exited, its STOP to the callback, then frees the slot. Context: one
 * consumer thread (the IPC loop); ag.drain_lock makes concurrent callers take turns. The rings
 * are read lock-free; ag.reg_lock is held only while a slot's name or state is examined.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "agent/internal.h"

/*
 * Cuts the stack at its first frame outside every executable mapping: the unwinder's checks are
 * bounds and progress, and a word read from a corrupt stack can pass them. A return address is
 * checked at address - 1 (its call instruction); the leaf of a signal sample is the pc itself.
 * The consumer owns the slot until it releases it, so the sample is changed in place.
 */
static void
ag_drain_check_frames(struct ag_sample *s)
{
    uint32_t i;

    for (i = 0; i < s->depth; i++) {
        uint64_t pc = s->frames[i];

        if (i > 0 || s->source != AG_SOURCE_SIGNAL) {
            pc -= pc != 0;
        }
        if (pc < 4096 || !ag_codemap_contains(pc)) {
            s->depth = i;
            s->end = AG_UNWIND_END_NOT_CODE;
            atomic_fetch_add_explicit(&ag.n_not_code, 1, memory_order_relaxed);
            return;
        }
    }
}

/* Delivers one ring's pending samples. Returns the count, or fn's nonzero value (negated
 * count never: fn's value is passed through as is). */
static int
ag_drain_ring(struct ag_ring *r, int32_t tid, ag_record_fn fn, void *ctx, int *n)
{
    const struct ag_sample *s;
    struct ag_record rec;

    while ((s = ag_ring_peek(r)) != NULL) {
        int rc;

        if (s->tid != tid) {
            /* Written by the wall thread for the slot's previous thread just as the slot was
             * reused: it would follow that thread's STOP. Counted as lost. */
            ag_ring_release(r);
            atomic_fetch_add_explicit(&ag.n_lost, 1, memory_order_relaxed);
            continue;
        }
        ag_drain_check_frames((struct ag_sample *)(uintptr_t)s);
        memset(&rec, 0, sizeof(rec));
        rec.kind = AG_RECORD_SAMPLE;
        rec.tid = tid;
        rec.u.sample = s;
        rc = fn(&rec, ctx);
        ag_ring_release(r); /* consumed even when fn stops the drain */
        (*n)++;
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

int
ag_drain(ag_record_fn fn, void *ctx)
{
    unsigned i, high;
    int n = 0, rc = 0;

    pthread_mutex_lock(&ag.drain_lock);
    if (!atomic_load(&ag.running) || ag.threads == NULL) {
        pthread_mutex_unlock(&ag.drain_lock);
        return -ESRCH;
    }
    ag_codemap_begin_drain();
    high = atomic_load_explicit(&ag.high, memory_order_acquire);
    for (i = 0; i < high && rc == 0; i++) {
        struct ag_thread *t = &ag.threads[i];
        struct ag_record rec;
        char name[AG_NAME_MAX];
        int state, announce;
        int32_t tid;
        uint64_t dropped;

        pthread_mutex_lock(&ag.reg_lock);
        state = atomic_load_explicit(&t->state, memory_order_acquire);
        tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
        announce = state != AG_SLOT_FREE && !atomic_load(&t->excluded) &&
                   t->name_gen != t->name_gen_reported;
        memcpy(name, t->name, sizeof(name));
        t->name_gen_reported = t->name_gen;
        pthread_mutex_unlock(&ag.reg_lock);
        if (state == AG_SLOT_FREE) {
            continue;
        }
        if (atomic_load(&t->excluded)) {
            if (state == AG_SLOT_EXITING) {
                pthread_mutex_lock(&ag.reg_lock);
                ag_thread_release_locked(t);
                pthread_mutex_unlock(&ag.reg_lock);
            }
            continue;
        }
        memset(&rec, 0, sizeof(rec));
        rec.tid = tid;
        if (announce || !t->announced) {
            t->announced = 1;
            rec.kind = AG_RECORD_THREAD_START;
            rec.u.name = name;
            n++;
            rc = fn(&rec, ctx);
            if (rc != 0) {
                break;
            }
        }
        rc = ag_drain_ring(&t->ring, tid, fn, ctx, &n);
        if (rc == 0) {
            rc = ag_drain_ring(&t->wring, tid, fn, ctx, &n);
        }
        if (rc != 0) {
            break;
        }
        dropped = atomic_load_explicit(&t->dropped, memory_order_relaxed);
        if (dropped != t->dropped_reported) {
            rec.kind = AG_RECORD_LOST;
            rec.u.lost = dropped - t->dropped_reported;
            t->dropped_reported = dropped;
            n++;
            rc = fn(&rec, ctx);
            if (rc != 0) {
                break;
            }
        }
        if (state == AG_SLOT_EXITING) {
            /* The thread is gone: no producer remains but the wall thread, which skips
             * non-active slots. Drain what it may have added, then free the slot. */
            rc = ag_drain_ring(&t->wring, tid, fn, ctx, &n);
            rec.kind = AG_RECORD_THREAD_STOP;
            rec.u.name = NULL;
            n++;
            if (rc == 0) {
                rc = fn(&rec, ctx);
            }
            pthread_mutex_lock(&ag.reg_lock);
            ag_thread_release_locked(t);
            pthread_mutex_unlock(&ag.reg_lock);
        }
    }
    pthread_mutex_unlock(&ag.drain_lock);
    return rc != 0 ? rc : n;
}
