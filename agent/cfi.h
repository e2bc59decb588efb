/* SPDX-License-Identifier: MIT */
/*
 * agent/cfi.h - compact DWARF call-frame tables and the signal-safe CFI step (private to the
 * agent; owned by agent/cfi.c and agent/sig-cfi.c). agent/cfi.c turns a module's .eh_frame_hdr
 * and .eh_frame (and a Go module's pclntab) into one immutable table of 12-byte rows, outside
 * signal context, while the module list is refreshed; agent/sig-cfi.c looks a pc up in the
 * published module snapshot and computes the caller's {pc, sp, fp}. Context: tables are built on
 * the thread that calls ag_modules_refresh(); ag_sig_* functions run in signal handlers and never
 * allocate, lock or touch errno. Tables are built for the architecture the agent runs on (x86_64 or
 * aarch64; its register numbers and return-address rules come from agent/arch.h).
 */
#ifndef AG_CFI_H
#define AG_CFI_H

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/arch.h"
#include "common/compiler.h"

/* Row flags: how the CFA is computed and where the caller's RA and frame pointer are. */
#define AG_CFI_CFA_MASK    0x03u
#define AG_CFI_CFA_NONE    0x00u /* no FDE covers this address (gap or end of an FDE) */
#define AG_CFI_CFA_SP      0x01u /* CFA = sp + cfa_off */
#define AG_CFI_CFA_FP      0x02u /* CFA = fp + cfa_off */
#define AG_CFI_CFA_OTHER   0x03u /* expression or another register: not supported */
#define AG_CFI_RA_MASK     0x0cu
#define AG_CFI_RA_OTHER    0x00u /* register or expression rule: not supported */
#define AG_CFI_RA_AT       0x04u /* RA = *(CFA + ra_off) */
#define AG_CFI_RA_END      0x08u /* RA undefined: the outermost frame (_start, clone) */
#define AG_CFI_RA_LR       0x0cu /* RA still in the link register (aarch64 x30, same value) */
#define AG_CFI_FP_MASK     0x30u
#define AG_CFI_FP_OTHER    0x00u /* unsupported rule: the caller's fp is unknown */
#define AG_CFI_FP_SAME     0x10u /* the caller's fp is the current fp */
#define AG_CFI_FP_AT       0x20u /* fp = *(CFA + 8 * fp_off8) */
/* fp = *(CFA + ra_off - 8): saved beside the RA, out of fp_off8's reach (an aarch64 frame record
 * at the bottom of a frame larger than 1 KiB: stp x29, x30, [sp, #-N]!) */
#define AG_CFI_FP_BELOW_RA 0x30u
/* With AG_CFI_CFA_NONE: no row because the module's table is not built yet (a lookup's result
 * only; no table row has it) */
#define AG_CFI_NONE_YET    0x40u
/* With any other CFA rule: the caller's pc is the interrupted pc itself, not a return address
 * (Go's runtime.asyncPreempt and runtime.sigpanic, entered as if called from it): the walk looks
 * it up as is, not at pc - 1 (agent/sig-unwind.c) */
#define AG_CFI_RA_EXACT    0x40u
/* With AG_CFI_CFA_NONE, in a cache slot only: the code at this pc was read and is no function
 * entry the unwinder recognises (agent/sig-unwind.c, ag_sig_unwind_entry_step): not read again */
#define AG_CFI_NOT_ENTRY   0x80u

/*
 * One row covers [addr, next row's addr). addr is relative to the module's load bias, that is
 * the ELF virtual address, so a table does not depend on where the module was mapped.
 */
struct ag_cfi_row {
    uint32_t addr;
    int32_t cfa_off;
    int16_t ra_off;
    int8_t fp_off8;
    uint8_t flags;
};
_Static_assert(sizeof(struct ag_cfi_row) == 12, "compact CFI row");

/* Immutable after ag_cfi_build() or ag_cfi_cache_load() returns; read concurrently by signal
 * handlers. */
struct ag_cfi_table {
    uint64_t base;                 /* load bias of the module: runtime address = base + row addr */
    size_t n;                      /* rows, sorted by addr */
    size_t fdes;                   /* FDEs parsed (statistics) */
    size_t unsupported;            /* rows whose CFA rule is AG_CFI_CFA_OTHER (statistics) */
    const struct ag_cfi_row *rows; /* after the struct, or inside map */
    void *map;                     /* a cache file's mapping (ag_cfi_cache_load), or NULL */
    size_t map_len;
};

/* A readable address range of the module image, used to bound every read of .eh_frame. */
struct ag_cfi_span {
    uint64_t lo, hi;
};

/*
 * Builds the CFI table of a loaded module from its in-memory .eh_frame_hdr (the PT_GNU_EH_FRAME
 * segment at runtime address hdr). Every byte read lies inside one of the n_spans readable
 * ranges (the module's PT_LOAD segments); corrupt data ends the parse with -EBADMSG.
 * Returns 0, -ENOENT (no usable .eh_frame_hdr), -EBADMSG or -ENOMEM.
 * Ownership: caller owns *out and releases it with ag_cfi_table_free().
 * Context: outside signal context, while the module cannot be unmapped (modules.c calls it
 * inside the dl_iterate_phdr callback, under the loader lock).
 */
PP_MUST_USE int ag_cfi_build(uint64_t base, uint64_t hdr, const struct ag_cfi_span *spans,
                             size_t n_spans, struct ag_cfi_table **out);

/* ag_cfi_build() that gives up with -ECANCELED soon after *cancel becomes nonzero (an exiting
 * process must not wait for a large module's table), and adds the rows of the Go functions of
 * the pclntab at runtime address gopclntab (ag_cfi_go_find; 0: none) that no .eh_frame row
 * covers. hdr may be 0 when gopclntab is not. */
PP_MUST_USE int ag_cfi_build_cancellable(uint64_t base, uint64_t hdr, uint64_t gopclntab,
                                         const struct ag_cfi_span *spans, size_t n_spans,
                                         _Atomic int *cancel, struct ag_cfi_table **out);

/*
 * Finds a Go module's function table (.gopclntab, which has no program header of its own, and no
 * section of its own in a position-independent Go binary) in its mapped data: the first 8-aligned
 * header of Go 1.18's and 1.19's layout (magic 0xfffffff0, minLC 1, 8-byte pointers) in spans
 * (the module's readable, not executable, PT_LOAD ranges). Its rows: CFA = sp + the pcsp table's
 * delta + 8, the return address at CFA - 8, rbp at CFA - 16 once the prologue saved it (see
 * agent/cfi.c). Returns 0 (*out set), -ENOENT (none) or -ENOTSUP (only another Go version's
 * header, or not x86-64). Context: outside signal context, while the module cannot be unmapped;
 * reads every 8th byte of the spans at most (a Go program's table lies early in them).
 */
PP_MUST_USE int ag_cfi_go_find(const struct ag_cfi_span *spans, size_t n_spans, uint64_t *out);

/*
 * A cache of built tables shared by the processes of one recording (PIPEPROF_CFI_CACHE=DIR, set
 * by `pipeprof record` to a private directory): a process whose module's table is in DIR maps it
 * instead of building it again (about 1.5 ms of CPU per short child, most of it libc's table).
 * Files are named by the module's build-id (the tables do not depend on where a module is
 * mapped); one is read only when it is a regular file of this user whose header matches its size
 * and layout (agent/cfi-cache.c says why its rows are not all read). ag_cfi_cache_load returns 0
 * (*out set, base applied), -ENOENT or -EBADMSG; ag_cfi_cache_store writes a table under a
 * temporary name and renames it into place (two processes storing the same module's table at once
 * both succeed); its failure only costs the next process a build. Context: outside signal context
 * (files, malloc).
 */
PP_MUST_USE int ag_cfi_cache_load(const char *dir, const uint8_t *id, size_t id_len, uint64_t base,
                                  struct ag_cfi_table **out);
void ag_cfi_cache_store(const char *dir, const uint8_t *id, size_t id_len,
                        const struct ag_cfi_table *t);

/* Releases a table. Accepts NULL. Only once no signal handler can still read it. */
void ag_cfi_table_free(struct ag_cfi_table *t);

/* Registers of one frame. pc is an instruction address, sp the stack pointer, fp the frame
 * pointer (rbp, x29); lr the link register (aarch64 x30) where it is known, which is only at an
 * interrupted instruction: 0 otherwise, and after every step (a call overwrote it). */
struct ag_cfi_regs {
    uint64_t pc;
    uint64_t sp;
    uint64_t fp;
    uint64_t lr;
};

/*
 * Guarded 8-byte read for the step function: returns 0 and stores the word, or a negative
 * errno when addr is not safely readable (outside the thread's stack, say). Must be
 * async-signal-safe. S's sampler passes its stack-bounds-checked reader.
 */
typedef int (*ag_cfi_read_fn)(void *ctx, uint64_t addr, uint64_t *out);

#define AG_CFI_STEP_END 1 /* the current frame is the outermost one; regs unchanged */

/*
 * One unwind step: finds the row for regs->pc in the published module snapshot and replaces
 * regs by the caller's registers. pc_is_ra is nonzero when regs->pc is a return address (every
 * frame but an interrupted one): the lookup then uses pc - 1, so that a call that ends a
 * function is attributed to it. Returns 0 (stepped), AG_CFI_STEP_END (outermost frame), or
 * -ENOENT (no module or no CFI row covers pc), -ENOTSUP (a rule the tables do not support),
 * -EFAULT (a read failed), -EINVAL (the result does not move up the stack). On failure regs
 * are unchanged, so the caller may fall back to frame pointers.
 * Context: async-signal-safe; lock-free; reads only the snapshot and memory through read.
 */
PP_SIGSAFE PP_MUST_USE int ag_sig_cfi_step(struct ag_cfi_regs *regs, int pc_is_ra,
                                           ag_cfi_read_fn read, void *ctx);

/*
 * A thread's cache of resolved rows: a direct-mapped table from a looked-up pc to the rule of the
 * row that covers it (or "no row"), filled on misses. A sampled thread's stacks repeat the same
 * return addresses, and a hit replaces two binary searches (module spans, then up to tens of
 * thousands of rows, mostly cache misses) with one compare. Entries are valid for one module
 * snapshot generation: a snapshot published since (a module loaded or unloaded, a table built)
 * empties the cache at the next walk (ag_sig_cfi_cache_begin), so a pc reused by another module
 * never meets a stale row. Single-threaded: one cache per thread, read and written only by that
 * thread's sampling signal handler, which does not nest (its signal is blocked while it runs).
 * Interposed calls and the wall thread walk without one. No locks, no atomics, no allocation.
 */
#define AG_CFI_CACHE_SLOTS 256 /* a power of two */

struct ag_cfi_cache_slot {
    uint64_t pc;     /* the looked-up address; 0: empty */
    int32_t cfa_off; /* the rule of the row (struct ag_cfi_row without addr) */
    int16_t ra_off;
    int8_t fp_off8;
    uint8_t flags; /* AG_CFI_CFA_NONE: no row covers pc */
};

struct ag_cfi_cache {
    uint64_t generation; /* snapshot generation of the entries; 0: none */
    uint64_t hits, misses;
    struct ag_cfi_cache_slot slots[AG_CFI_CACHE_SLOTS];
};

/* Starts a walk with cache c: empties it when the published module snapshot changed since it
 * was filled. Async-signal-safe. */
PP_SIGSAFE void ag_sig_cfi_cache_begin(struct ag_cfi_cache *c);

/* The cache slot of pc: return addresses are spread, their low bits vary most. */
static inline size_t
ag_sig_cfi_cache_index(uint64_t pc)
{
    return (size_t)(((pc ^ (pc >> 12)) * 0x9e3779b97f4a7c15u) >> 56) & (AG_CFI_CACHE_SLOTS - 1);
}

/*
 * Copies the rule of the row that covers pc into *out (flags AG_CFI_CFA_NONE when no module,
 * table or row covers it) from the published snapshot, and keeps it in cache (when not NULL)
 * if the snapshot is the one the cache's entries belong to. Async-signal-safe.
 */
PP_SIGSAFE void ag_sig_cfi_rule_miss(uint64_t pc, struct ag_cfi_cache *cache,
                                     struct ag_cfi_row *out);

/* ag_sig_cfi_rule_miss() after a look in cache (NULL: none); out->addr is not set on a hit. */
PP_SIGSAFE static inline void
ag_sig_cfi_rule_find(uint64_t pc, struct ag_cfi_cache *cache, struct ag_cfi_row *out)
{
    if (cache != NULL) {
        const struct ag_cfi_cache_slot *slot = &cache->slots[ag_sig_cfi_cache_index(pc)];

        if (slot->pc == pc && pc != 0) {
            cache->hits++;
            out->cfa_off = slot->cfa_off;
            out->ra_off = slot->ra_off;
            out->fp_off8 = slot->fp_off8;
            out->flags = slot->flags;
            return;
        }
    }
    ag_sig_cfi_rule_miss(pc, cache, out);
}

/*
 * Applies rule to regs: the caller's registers, read through read (a static inline, so that a
 * caller with a known reader gets it inlined). Returns what ag_sig_cfi_step() returns.
 */
PP_SIGSAFE static inline int
ag_sig_cfi_apply(const struct ag_cfi_row *rule, struct ag_cfi_regs *regs, ag_cfi_read_fn read,
                 void *ctx)
{
    uint64_t cfa, ra = 0, fp;

    switch (rule->flags & AG_CFI_CFA_MASK) {
    case AG_CFI_CFA_SP:
        cfa = regs->sp + (uint64_t)(int64_t)rule->cfa_off;
        break;
    case AG_CFI_CFA_FP:
        if (regs->fp == 0) {
            return -ENOTSUP; /* an earlier step could not recover rbp */
        }
        cfa = regs->fp + (uint64_t)(int64_t)rule->cfa_off;
        break;
    case AG_CFI_CFA_NONE:
        return -ENOENT;
    default:
        return -ENOTSUP;
    }
    switch (rule->flags & AG_CFI_RA_MASK) {
    case AG_CFI_RA_AT:
        if (cfa <= regs->sp) {
            return -EINVAL; /* the caller's frame must be above ours, or we could loop */
        }
        if (read(ctx, cfa + (uint64_t)(int64_t)rule->ra_off, &ra) != 0) {
            return -EFAULT;
        }
        break;
    case AG_CFI_RA_LR:
        /* A frame that has not stored x30 (a leaf, a prologue): it may have no stack frame at
         * all (CFA = sp), and progress is the link register consumed, which is known only at
         * an interrupted instruction. */
        if (regs->lr == 0) {
            return -ENOTSUP;
        }
        if (cfa < regs->sp) {
            return -EINVAL;
        }
        ra = regs->lr;
        break;
    case AG_CFI_RA_END:
        return AG_CFI_STEP_END;
    default:
        return -ENOTSUP;
    }
    switch (rule->flags & AG_CFI_FP_MASK) {
    case AG_CFI_FP_SAME:
        fp = regs->fp;
        break;
    case AG_CFI_FP_AT:
        if (read(ctx, cfa + (uint64_t)(int64_t)rule->fp_off8 * 8u, &fp) != 0) {
            return -EFAULT;
        }
        break;
    case AG_CFI_FP_BELOW_RA:
        if (read(ctx, cfa + (uint64_t)(int64_t)rule->ra_off - 8u, &fp) != 0) {
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
    regs->pc = ag_arch_strip_ra(ra); /* a signed RA (pointer authentication) */
    regs->sp = cfa;
    regs->fp = fp;
    regs->lr = 0; /* the call that made this frame overwrote the caller's */
    return 0;
}

/*
 * Finds the row for a module-relative address in t, or NULL. Async-signal-safe (pure).
 */
PP_SIGSAFE const struct ag_cfi_row *ag_sig_cfi_row_find(const struct ag_cfi_table *t, uint64_t rel);

#endif /* AG_CFI_H */
