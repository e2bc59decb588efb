/* SPDX-License-Identifier: MIT */
/*
 * agent/sig-cfi.c - the signal-safe half of DWARF unwinding: finds the module of a pc in the
 * published snapshot and applies one compact CFI row to {pc, sp, fp}, through the calling
 * thread's row cache when it has one (struct ag_cfi_cache). Context: signal handlers (and any
 * thread); every function here is async-signal-safe. It reads only the immutable snapshot and
 * tables that agent/modules.c publishes, the caller's own cache, and stack memory through the
 * caller's guarded read function. Must not allocate, lock, call libc or touch errno.
 */
#include <errno.h>
#include <stdatomic.h>

#include "agent/cfi.h"
#include "agent/symbols-internal.h"

_Atomic(struct ag_module_snapshot *) ag_sig_modules;
_Atomic int ag_sig_unknown_code;

/* The span of snapshot s that contains pc, or NULL. */
static const struct ag_module_span *
ag_sig_module_span_find(const struct ag_module_snapshot *s, uint64_t pc)
{
    size_t lo = 0, hi = s->n;

    while (lo < hi) { /* first span with lo > pc */
        size_t mid = lo + (hi - lo) / 2;

        if (s->spans[mid].lo <= pc) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == 0 || pc >= s->spans[lo - 1].hi) {
        return NULL;
    }
    return &s->spans[lo - 1];
}

const struct ag_module_span *
ag_sig_module_find(uint64_t pc)
{
    /* Pairs with the release (acq_rel exchange) in ag_modules_publish(): the spans and the
     * tables they point to are complete before the pointer is visible. */
    const struct ag_module_snapshot *s =
            atomic_load_explicit(&ag_sig_modules, memory_order_acquire);

    return s != NULL ? ag_sig_module_span_find(s, pc) : NULL;
}

const struct ag_cfi_row *
ag_sig_cfi_row_find(const struct ag_cfi_table *t, uint64_t rel)
{
    size_t lo = 0, hi = t->n;

    while (lo < hi) { /* first row with addr > rel */
        size_t mid = lo + (hi - lo) / 2;

        if (t->rows[mid].addr <= rel) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo == 0 ? NULL : &t->rows[lo - 1];
}

void
ag_sig_cfi_cache_begin(struct ag_cfi_cache *c)
{
    const struct ag_module_snapshot *s =
            atomic_load_explicit(&ag_sig_modules, memory_order_acquire);
    uint64_t gen = s != NULL ? s->generation : 0;
    size_t i;

    if (c->generation == gen) {
        return;
    }
    for (i = 0; i < AG_CFI_CACHE_SLOTS; i++) {
        c->slots[i].pc = 0;
    }
    c->generation = gen;
}

void
ag_sig_cfi_rule_miss(uint64_t pc, struct ag_cfi_cache *cache, struct ag_cfi_row *out)
{
    const struct ag_module_snapshot *s;
    const struct ag_module_span *span;
    const struct ag_cfi_table *t;
    const struct ag_cfi_row *row = NULL;

    /* Pairs with the release (acq_rel exchange) in ag_modules_publish(): the spans and the
     * tables they point to are complete before the pointer is visible. */
    s = atomic_load_explicit(&ag_sig_modules, memory_order_acquire);
    span = s != NULL ? ag_sig_module_span_find(s, pc) : NULL;
    t = span != NULL ? span->cfi : NULL;
    if (t != NULL && pc >= t->base && pc - t->base <= UINT32_MAX) {
        row = ag_sig_cfi_row_find(t, pc - t->base);
    }
    if (span == NULL && pc != 0 &&
        atomic_load_explicit(&ag_sig_unknown_code, memory_order_relaxed) == 0) {
        /* Release: the manager's take (acquire) then sees the loader's list that held pc. */
        atomic_store_explicit(&ag_sig_unknown_code, 1, memory_order_release);
    }
    if (row != NULL) {
        *out = *row;
    } else {
        out->addr = 0;
        out->cfa_off = 0;
        out->ra_off = 0;
        out->fp_off8 = 0;
        out->flags = AG_CFI_CFA_NONE |
                     (span != NULL && t == NULL && span->cfi_pending ? AG_CFI_NONE_YET : 0u);
    }
    if (cache == NULL) {
        return;
    }
    cache->misses++;
    /* Kept only if the rows came from the snapshot the cache's entries belong to. */
    if (cache->generation != 0 && pc != 0 && s != NULL && s->generation == cache->generation) {
        struct ag_cfi_cache_slot *slot = &cache->slots[ag_sig_cfi_cache_index(pc)];

        slot->pc = pc;
        slot->cfa_off = out->cfa_off;
        slot->ra_off = out->ra_off;
        slot->fp_off8 = out->fp_off8;
        slot->flags = out->flags;
    }
}

int
ag_sig_cfi_step(struct ag_cfi_regs *regs, int pc_is_ra, ag_cfi_read_fn read, void *ctx)
{
    struct ag_cfi_row rule;
    uint64_t pc = regs->pc - (pc_is_ra ? 1 : 0);

    ag_sig_cfi_rule_miss(pc, NULL, &rule);
    return ag_sig_cfi_apply(&rule, regs, read, ctx);
}
