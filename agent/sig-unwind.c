/* SPDX-License-Identifier: MIT */
/*
 * agent/sig-unwind.c - SIGNAL CONTEXT: the stack walker. Frame pointers first; DWARF CFI
 * (ag_sig_cfi_step in agent/sig-cfi.c) for the interrupted leaf and wherever the frame-pointer
 * chain gives up. Every memory read is guarded: aligned, inside the interrupted thread's stack
 * above its sp (memory that is mapped for as long as the thread runs), otherwise through
 * process_vm_readv(), which fails with EFAULT instead of faulting. Context: signal handlers, the
 * wall thread and interposed calls. Must not allocate, lock, call non-async-signal-safe
 * functions or leave errno changed.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/cfi.h"
#include "agent/internal.h"

/* Internal to this file: no CFI row covers pc (never stored in a sample). */
#define AG_UNWIND_NO_ROW 255

void
ag_sig_unwind_ctx_init(struct ag_unwind_ctx *c, uint64_t sp, uint64_t lo, uint64_t hi)
{
    c->lo = 0;
    c->hi = 0;
    /* Only [sp, hi) is known to be mapped: the stack below sp may not be populated (main
     * thread) and a sigaltstack or coroutine stack is not inside the recorded bounds. */
    if (hi != 0 && sp >= lo && sp < hi) {
        c->lo = sp & ~(uint64_t)7;
        c->hi = hi;
    }
    c->remote_ok = ag.remote_read_ok;
    c->pid = ag.pid;
    c->cache = NULL;
}

/* Reads the interrupted thread's stack wherever its frames lead, redzones of an
 * AddressSanitizer-built host included (a host of tests/hosts in build-asan: a stack-buffer
 * overflow reported inside this handler): not instrumented. */
__attribute__((no_sanitize_address)) int
ag_sig_read(void *ctx, uint64_t addr, uint64_t *out)
{
    const struct ag_unwind_ctx *c = ctx;
    struct iovec local, remote;
    long n;
    int saved_errno;

    if ((addr & 7) != 0 || addr < 4096) {
        return -EFAULT;
    }
    if (addr >= c->lo && addr + 8 <= c->hi && addr + 8 > addr) {
        *out = *(const volatile uint64_t *)(uintptr_t)addr;
        return 0;
    }
    if (!c->remote_ok) {
        return -EFAULT;
    }
    /* Non-faulting read of our own memory: the kernel copies or returns EFAULT. */
    local.iov_base = out;
    local.iov_len = 8;
    remote.iov_base = (void *)(uintptr_t)addr;
    remote.iov_len = 8;
    saved_errno = errno;
    n = syscall(SYS_process_vm_readv, (long)c->pid, &local, 1L, &remote, 1L, 0L);
    errno = saved_errno;
    return n == 8 ? 0 : -EFAULT;
}

/* ag_sig_read() with its common case inlined: an aligned word inside the stack's window. */
static inline int
ag_sig_unwind_read(void *ctx, uint64_t addr, uint64_t *out)
{
    const struct ag_unwind_ctx *c = ctx;

    if ((addr & 7) == 0 && addr >= c->lo && addr + 8 <= c->hi && addr + 8 > addr) {
        *out = *(const volatile uint64_t *)(uintptr_t)addr;
        return 0;
    }
    return ag_sig_read(ctx, addr, out);
}

/* One frame-pointer step: {pc, sp, fp} of the frame whose rbp is fp -> its caller. */
static int
ag_sig_unwind_fp_step(struct ag_unwind_ctx *c, struct ag_cfi_regs *r, uint8_t *why)
{
    uint64_t next_fp, ra;

    if (r->fp == 0) {
        *why = AG_UNWIND_END_ROOT;
        return -1;
    }
    /* The saved frame lies at or above sp and 8-aligned; anything else is not a frame. */
    if ((r->fp & 7) != 0 || r->fp < r->sp || r->fp + 16 < r->fp) {
        *why = AG_UNWIND_END_FP_INVALID;
        return -1;
    }
    if (ag_sig_read(c, r->fp, &next_fp) != 0 || ag_sig_read(c, r->fp + 8, &ra) != 0) {
        *why = AG_UNWIND_END_READ_FAULT;
        return -1;
    }
    if (ra == 0) {
        *why = AG_UNWIND_END_ROOT;
        return -1;
    }
    if (ra < 4096 || (next_fp != 0 && next_fp <= r->fp)) {
        *why = AG_UNWIND_END_FP_INVALID; /* the chain must grow strictly toward the stack base */
        return -1;
    }
    r->pc = ra;
    r->sp = r->fp + 16;
    r->fp = next_fp;
    return 0;
}

/* One CFI step; maps ag_sig_cfi_step's result onto an end reason. */
static int
ag_sig_unwind_cfi_step(struct ag_unwind_ctx *c, struct ag_cfi_regs *r, int pc_is_ra, uint8_t *why)
{
    struct ag_cfi_row rule;
    int rc;

    ag_sig_cfi_rule_find(r->pc - (pc_is_ra ? 1 : 0), c->cache, &rule);
    rc = ag_sig_cfi_apply(&rule, r, ag_sig_unwind_read, c);

    if (rc == 0) {
        return 0;
    }
    switch (rc) {
    case AG_CFI_STEP_END:
        *why = AG_UNWIND_END_ROOT;
        break;
    case -ENOENT:
        *why = AG_UNWIND_NO_ROW;
        break;
    case -EFAULT:
        *why = AG_UNWIND_END_READ_FAULT;
        break;
    default:
        *why = AG_UNWIND_END_CFI_FAILED;
        break;
    }
    return -1;
}

void
ag_sig_unwind(struct ag_unwind_ctx *c, uint64_t pc, uint64_t sp, uint64_t fp, int pc_is_ra,
              uint64_t *frames, uint32_t max, struct ag_unwind_result *out)
{
    struct ag_cfi_regs r = { pc, sp, fp };
    uint32_t depth = 0;
    uint8_t unwinder = AG_UNWINDER_NONE;
    uint8_t why = AG_UNWIND_END_DEPTH_LIMIT;
    uint32_t cfi_steps = 0;

    if (max == 0) {
        goto out;
    }
    if (c->cache != NULL) {
        ag_sig_cfi_cache_begin(c->cache);
    }
    frames[depth++] = pc;
    while (depth < max) {
        struct ag_cfi_regs before = r;
        uint8_t fp_why = AG_UNWIND_END_ROOT, cfi_why = AG_UNWIND_NO_ROW;
        /* An interrupted leaf may be in a prologue or epilogue, or in a function built without
         * frame pointers (libc): its CFI row is exact, while rbp may still be the caller's. */
        int leaf = depth == 1 && !pc_is_ra;

        /* CFI first: where the module has a row for pc it is exact, whatever rbp holds (in code
         * built without frame pointers rbp is an ordinary register, and a "frame record" read
         * through it yields stale stack words as return addresses). */
        if (ag_sig_unwind_cfi_step(c, &r, !leaf, &cfi_why) == 0) {
            unwinder = AG_UNWINDER_CFI;
            cfi_steps++;
            goto stepped;
        }
        r = before;
        if (cfi_why != AG_UNWIND_NO_ROW && cfi_why != AG_UNWIND_END_CFI_FAILED) {
            goto stop; /* the CFI says this is the outermost frame, or a read faulted */
        }
        /* No row (JIT code, a module without .eh_frame) or an unsupported one: frame pointers,
         * the direct read first when the record lies inside the thread's own stack. */
        if (!leaf && r.fp >= r.sp && (r.fp & 7) == 0 && c->hi >= 16 && r.fp >= c->lo &&
            r.fp <= c->hi - 16) {
            const volatile uint64_t *rec = (const volatile uint64_t *)(uintptr_t)r.fp;
            uint64_t next_fp = rec[0], ra = rec[1];

            if (ra >= 4096 && (next_fp == 0 || next_fp > r.fp)) {
                r.pc = ra;
                r.sp = r.fp + 16;
                r.fp = next_fp;
                unwinder = AG_UNWINDER_FP;
                frames[depth++] = ra;
                continue;
            }
        }
        if (ag_sig_unwind_fp_step(c, &r, &fp_why) == 0) {
            unwinder = AG_UNWINDER_FP;
            goto stepped;
        }
        r = before;
        /* An interrupted leaf that neither CFI nor rbp explains (a PLT stub, or a function's
         * first instruction in code without frame pointers): the word at sp is the return
         * address a call just pushed. A wrong guess is cut at the drain (not code). */
        if (leaf) {
            uint64_t ra;

            if (ag_sig_read(c, r.sp, &ra) == 0 && ra >= 4096) {
                r.pc = ra;
                r.sp += 8;
                unwinder = AG_UNWINDER_FP;
                goto stepped;
            }
        }
        /* Both gave up. A CFI end or a zero fp/ra with no CFI row is the normal root; when no
         * CFI row exists, the frame-pointer reason is the one that explains the stop. */
    stop:
        if (cfi_why == AG_UNWIND_END_ROOT) {
            why = AG_UNWIND_END_ROOT;
        } else if (cfi_why == AG_UNWIND_NO_ROW) {
            why = fp_why;
        } else {
            why = cfi_why;
        }
        goto out;
    stepped:
        if (r.sp <= before.sp) {
            why = AG_UNWIND_END_FP_INVALID; /* no progress: a loop in a corrupt stack */
            goto out;
        }
        frames[depth++] = r.pc;
    }
    why = AG_UNWIND_END_DEPTH_LIMIT;
out:
    out->depth = depth;
    out->unwinder = unwinder;
    out->end = why;
    out->cfi_steps = cfi_steps;
}
