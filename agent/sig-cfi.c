/* SPDX-License-Identifier: MIT */
/*
 * agent/sig-cfi.c - the signal-safe half of DWARF unwinding: finds the module of a pc in the
 * published snapshot and applies one compact CFI row to {pc, sp, fp}. Context: signal handlers
 * (and any thread); every function here is async-signal-safe. It reads only the immutable
 * snapshot and tables that agent/modules.c publishes, and stack memory through the caller's
 * guarded read function. Must not allocate, lock, call libc or touch errno.
 */
#include <errno.h>
#include <stdatomic.h>

#include "agent/cfi.h"
#include "agent/symbols-internal.h"

_Atomic(struct ag_module_snapshot *) ag_sig_modules;

const struct ag_module_span *
ag_sig_module_find(uint64_t pc)
{
    /* Pairs with the release (acq_rel exchange) in ag_modules_publish(): the spans and the
     * tables they point to are complete before the pointer is visible. */
    const struct ag_module_snapshot *s =
            atomic_load_explicit(&ag_sig_modules, memory_order_acquire);
    size_t lo = 0, hi;

    if (s == NULL) {
        return NULL;
    }
    hi = s->n;
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

int
ag_sig_cfi_step(struct ag_cfi_regs *regs, int pc_is_ra, ag_cfi_read_fn read, void *ctx)
{
    const struct ag_module_span *span;
    const struct ag_cfi_table *t;
    const struct ag_cfi_row *row;
    uint64_t pc = regs->pc - (pc_is_ra ? 1 : 0);
    uint64_t cfa, ra, fp, rel;

    span = ag_sig_module_find(pc);
    if (span == NULL || span->cfi == NULL) {
        return -ENOENT;
    }
    t = span->cfi;
    rel = pc - t->base;
    if (pc < t->base || rel > UINT32_MAX) {
        return -ENOENT;
    }
    row = ag_sig_cfi_row_find(t, rel);
    if (row == NULL) {
        return -ENOENT;
    }
    switch (row->flags & AG_CFI_CFA_MASK) {
    case AG_CFI_CFA_SP:
        cfa = regs->sp + (uint64_t)(int64_t)row->cfa_off;
        break;
    case AG_CFI_CFA_FP:
        if (regs->fp == 0) {
            return -ENOTSUP; /* an earlier step could not recover rbp */
        }
        cfa = regs->fp + (uint64_t)(int64_t)row->cfa_off;
        break;
    case AG_CFI_CFA_NONE:
        return -ENOENT;
    default:
        return -ENOTSUP;
    }
    switch (row->flags & AG_CFI_RA_MASK) {
    case AG_CFI_RA_AT:
        break;
    case AG_CFI_RA_END:
        return AG_CFI_STEP_END;
    default:
        return -ENOTSUP;
    }
    if (cfa <= regs->sp) {
        return -EINVAL; /* the caller's frame must be above ours, or we could loop */
    }
    if (read(ctx, cfa + (uint64_t)(int64_t)row->ra_off, &ra) != 0) {
        return -EFAULT;
    }
    switch (row->flags & AG_CFI_FP_MASK) {
    case AG_CFI_FP_SAME:
        fp = regs->fp;
        break;
    case AG_CFI_FP_AT:
        if (read(ctx, cfa + (uint64_t)(int64_t)row->fp_off8 * 8u, &fp) != 0) {
            return -EFAULT;
        }
        break;
    default:
        fp = 0; /* unknown: a later FP-based CFA fails cleanly instead of using garbage */
        break;
    }
    if (ra == 0) {
        return AG_CFI_STEP_END; /* a zero return address ends the stack (clone, _start) */
    }
    regs->pc = ra;
    regs->sp = cfa;
    regs->fp = fp;
    return 0;
}
