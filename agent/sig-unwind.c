/* SPDX-License-Identifier: MIT */
/*
 * agent/sig-unwind.c - SIGNAL CONTEXT: the stack walker. Frame pointers first; DWARF CFI
 * (ag_sig_cfi_step in agent/sig-cfi.c) for the interrupted leaf and wherever the frame-pointer
 * chain gives up. What differs between architectures (the link register, where a frame record
 * lies, signed return addresses) comes from agent/arch.h. Every memory read is guarded: aligned,
 * inside the interrupted thread's stack above its sp (memory that is mapped for as long as the
 * thread runs), otherwise through process_vm_readv(), which fails with EFAULT instead of faulting.
 * Context: signal handlers, the wall thread and interposed calls. Must not allocate, lock, call
 * non-async-signal-safe functions or leave errno changed.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/cfi.h"
#include "agent/internal.h"

/* Internal to this file: no CFI row covers pc (never stored in a sample). */
#define AG_UNWIND_NO_ROW     255
/* (internal) no CFI row because the module's table is not built yet: a walk that goes on by
 * frame pointers through code that may lack them; ends it as AG_UNWIND_END_TABLES_PENDING */
#define AG_UNWIND_NO_ROW_YET 254

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
    c->lr = 0;
    c->copy = NULL;
    c->copy_sp = 0;
    c->copy_len = 0;
}

/* Every function here that reads the interrupted thread's stack wherever its frames lead does
 * it uninstrumented: the redzones of an AddressSanitizer-built host lie in that stack (a host of
 * tests/hosts in build-asan: a stack-buffer overflow reported inside this handler, first in
 * ag_sig_read, then in the walk's direct read of a frame record). */
#define AG_SIG_READS_FOREIGN_STACK __attribute__((no_sanitize_address))

AG_SIG_READS_FOREIGN_STACK int
ag_sig_read(void *ctx, uint64_t addr, uint64_t *out)
{
    const struct ag_unwind_ctx *c = ctx;
    struct iovec local, remote;
    long n;
    int saved_errno;

    if ((addr & 7) != 0 || addr < 4096) {
        return -EFAULT;
    }
    if (c->copy != NULL) {
        /* A copied stack (perf-ring): the live one has moved on since, and is not read. */
        if (addr < c->copy_sp || addr - c->copy_sp > c->copy_len ||
            c->copy_len - (addr - c->copy_sp) < 8) {
            return -EFAULT;
        }
        __builtin_memcpy(out, c->copy + (addr - c->copy_sp), 8);
        return 0;
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
AG_SIG_READS_FOREIGN_STACK static inline int
ag_sig_unwind_read(void *ctx, uint64_t addr, uint64_t *out)
{
    const struct ag_unwind_ctx *c = ctx;

    if ((addr & 7) == 0 && addr >= c->lo && addr + 8 <= c->hi && addr + 8 > addr) {
        *out = *(const volatile uint64_t *)(uintptr_t)addr;
        return 0;
    }
    return ag_sig_read(ctx, addr, out);
}

/* One frame-pointer step: {pc, sp, fp} of the frame whose frame pointer is fp -> its caller.
 * The record is {caller's fp, return address} on both architectures; the caller's sp is fp + 16
 * on x86-64 and at least that on aarch64 (AG_ARCH_FP_RECORD_AT_CFA). */
AG_SIG_READS_FOREIGN_STACK static int
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
    ra = ag_arch_strip_ra(ra);
    if (ra < 4096 || (next_fp != 0 && next_fp <= r->fp)) {
        *why = AG_UNWIND_END_FP_INVALID; /* the chain must grow strictly toward the stack base */
        return -1;
    }
    r->pc = ra;
    r->sp = r->fp + 16;
    r->fp = next_fp;
    r->lr = 0;
    return 0;
}

/* One CFI step; maps ag_sig_cfi_step's result onto an end reason. sp_exact is 0 when sp is only
 * a lower bound (after a frame-pointer step on aarch64): an sp-based row would then read the
 * wrong words, so only an fp-based one is applied. */
AG_SIG_READS_FOREIGN_STACK static int
ag_sig_unwind_cfi_step(struct ag_unwind_ctx *c, struct ag_cfi_regs *r, int pc_is_ra, int sp_exact,
                       uint8_t *why)
{
    struct ag_cfi_row rule;
    int rc;

    ag_sig_cfi_rule_find(r->pc - (pc_is_ra ? 1 : 0), c->cache, &rule);
    if (!sp_exact && (rule.flags & AG_CFI_CFA_MASK) == AG_CFI_CFA_SP) {
        *why = AG_UNWIND_END_CFI_FAILED; /* the frame pointers may go on */
        return -1;
    }
    rc = ag_sig_cfi_apply(&rule, r, ag_sig_unwind_read, c);

    if (rc == 0) {
        return 0;
    }
    switch (rc) {
    case AG_CFI_STEP_END:
        *why = AG_UNWIND_END_ROOT;
        break;
    case -ENOENT:
        *why = (rule.flags & AG_CFI_NONE_YET) != 0 ? AG_UNWIND_NO_ROW_YET : AG_UNWIND_NO_ROW;
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

/* The walk from r (see ag_sig_unwind). sp_exact: r.sp is the frame's sp, not only a lower bound
 * of it. Frames whose sp is at or below skip_to are walked through but not stored (0: none). */
AG_SIG_READS_FOREIGN_STACK static void
ag_sig_unwind_walk(struct ag_unwind_ctx *c, struct ag_cfi_regs r, int pc_is_ra, int sp_exact,
                   uint64_t skip_to, uint64_t *frames, uint32_t max, struct ag_unwind_result *out)
{
    uint32_t depth = 0;
    uint8_t unwinder = AG_UNWINDER_NONE;
    uint8_t why = AG_UNWIND_END_DEPTH_LIMIT;
    uint32_t cfi_steps = 0;
    int pending = 0, cfi_root = 0; /* a pc met with its table not built; the end was CFI's */

    if (max == 0) {
        goto out;
    }
    if (c->cache != NULL) {
        ag_sig_cfi_cache_begin(c->cache);
    }
    if (r.sp > skip_to) {
        frames[depth++] = r.pc;
    }
    while (depth < max) {
        struct ag_cfi_regs before = r;
        uint8_t fp_why = AG_UNWIND_END_ROOT, cfi_why = AG_UNWIND_NO_ROW;
        /* An interrupted leaf may be in a prologue or epilogue, or in a function built without
         * frame pointers (libc): its CFI row is exact, while rbp may still be the caller's. */
        int leaf = depth == 1 && !pc_is_ra;

        /* CFI first: where the module has a row for pc it is exact, whatever rbp holds (in code
         * built without frame pointers rbp is an ordinary register, and a "frame record" read
         * through it yields stale stack words as return addresses). */
        if (ag_sig_unwind_cfi_step(c, &r, !leaf, sp_exact, &cfi_why) == 0) {
            unwinder = AG_UNWINDER_CFI;
            cfi_steps++;
            sp_exact = 1;
            goto stepped;
        }
        r = before;
        if (cfi_why == AG_UNWIND_NO_ROW_YET) {
            pending = 1;
            cfi_why = AG_UNWIND_NO_ROW;
        }
        if (cfi_why != AG_UNWIND_NO_ROW && cfi_why != AG_UNWIND_END_CFI_FAILED) {
            goto stop; /* the CFI says this is the outermost frame, or a read faulted */
        }
        /* An interrupted leaf without CFI on a link-register machine: unless its frame record
         * already holds x30 (its prologue ran), x29 is still its caller's, and a frame-pointer
         * step would skip the caller. x30 is the caller's pc; fp stays the caller's. */
        if (leaf && AG_ARCH_LINK_REGISTER && r.lr >= 4096) {
            uint64_t saved;

            if (ag_sig_read(c, r.fp + 8, &saved) != 0 ||
                ag_arch_strip_ra(saved) != ag_arch_strip_ra(r.lr)) {
                r.pc = ag_arch_strip_ra(r.lr);
                r.lr = 0;
                sp_exact = 0; /* the leaf may have moved sp without saving x30 */
                unwinder = AG_UNWINDER_FP;
                goto stepped;
            }
        }
        /* No row (JIT code, a module without .eh_frame) or an unsupported one: frame pointers,
         * the direct read first when the record lies inside the thread's own stack. */
        if (!leaf && r.fp >= r.sp && (r.fp & 7) == 0 && c->hi >= 16 && r.fp >= c->lo &&
            r.fp <= c->hi - 16) {
            const volatile uint64_t *rec = (const volatile uint64_t *)(uintptr_t)r.fp;
            uint64_t next_fp = rec[0], ra = ag_arch_strip_ra(rec[1]);

            if (ra >= 4096 && (next_fp == 0 || next_fp > r.fp)) {
                r.pc = ra;
                r.sp = r.fp + 16;
                r.fp = next_fp;
                r.lr = 0;
                sp_exact = AG_ARCH_FP_RECORD_AT_CFA;
                unwinder = AG_UNWINDER_FP;
                if (r.sp > skip_to) {
                    frames[depth++] = ra;
                }
                continue;
            }
        }
        if (ag_sig_unwind_fp_step(c, &r, &fp_why) == 0) {
            unwinder = AG_UNWINDER_FP;
            sp_exact = AG_ARCH_FP_RECORD_AT_CFA;
            goto stepped;
        }
        r = before;
        /* An interrupted leaf that neither CFI nor rbp explains (a PLT stub, or a function's
         * first instruction in code without frame pointers): the word at sp is the return
         * address a call just pushed (x86-64; aarch64's is x30, taken above). A wrong guess is
         * cut at the drain (not code). */
        if (leaf && !AG_ARCH_LINK_REGISTER) {
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
            cfi_root = 1;
        } else if (cfi_why == AG_UNWIND_NO_ROW) {
            why = fp_why;
        } else {
            why = cfi_why;
        }
        goto out;
    stepped:
        /* Progress: a higher sp, or the link register consumed (a leaf without a stack frame,
         * whose caller has the same sp). Anything else may loop in a corrupt stack. */
        if (r.sp < before.sp || (r.sp == before.sp && before.lr == 0)) {
            why = AG_UNWIND_END_FP_INVALID;
            goto out;
        }
        if (r.sp > skip_to) {
            frames[depth++] = r.pc;
        }
    }
    why = AG_UNWIND_END_DEPTH_LIMIT;
out:
    if (pending && !cfi_root && why != AG_UNWIND_END_DEPTH_LIMIT) {
        /* Frame pointers stood in for a table not built yet (the manager builds them after
         * the start): in code without them the walk stops early or at a false root. */
        why = AG_UNWIND_END_TABLES_PENDING;
    }
    out->depth = depth;
    out->unwinder = unwinder;
    out->end = why;
    out->cfi_steps = cfi_steps;
    out->sp_end = r.sp;
}

void
ag_sig_unwind(struct ag_unwind_ctx *c, uint64_t pc, uint64_t sp, uint64_t fp, int pc_is_ra,
              uint64_t *frames, uint32_t max, struct ag_unwind_result *out)
{
    /* A recorded return address (an interposer's frame record) may be signed too. */
    struct ag_cfi_regs r = { pc_is_ra ? ag_arch_strip_ra(pc) : pc, sp, fp, pc_is_ra ? 0 : c->lr };

    /* A walk that starts from a recorded return address was given its frame record's fp + 16
     * as sp: exact only where records sit under the caller's sp. */
    ag_sig_unwind_walk(c, r, pc_is_ra, !pc_is_ra || AG_ARCH_FP_RECORD_AT_CFA, 0, frames, max, out);
}

AG_SIG_READS_FOREIGN_STACK __attribute__((noinline)) void
ag_sig_unwind_caller(struct ag_unwind_ctx *c, uint64_t fa, uint64_t *frames, uint32_t max,
                     struct ag_unwind_result *out)
{
    uint64_t here = (uint64_t)(uintptr_t)__builtin_frame_address(0);

    if (!AG_ARCH_FP_RECORD_AT_CFA && here < fa) {
        /* From here, with this function's exact CFA as sp, through the agent's own frames and
         * the one at fa (all built with CFI), so that the first frame kept, fa's caller, has its
         * exact sp. Those frames lie below fa: the direct-read window starts here. */
        struct ag_cfi_regs r = { ag_arch_strip_ra((uint64_t)(uintptr_t)__builtin_return_address(0)),
                                 (uint64_t)(uintptr_t)__builtin_dwarf_cfa(),
                                 *(const volatile uint64_t *)(uintptr_t)here, 0 };

        if (c->lo == fa && c->hi != 0 && fa - here < 65536) {
            c->lo = here & ~(uint64_t)7;
        }
        ag_sig_unwind_walk(c, r, 1, 1, fa, frames, max, out);
        if (out->depth != 0) {
            return;
        }
    }
    ag_sig_unwind_record(c, fa, frames, max, out);
}

AG_SIG_READS_FOREIGN_STACK void
ag_sig_unwind_record(struct ag_unwind_ctx *c, uint64_t fa, uint64_t *frames, uint32_t max,
                     struct ag_unwind_result *out)
{
    uint64_t fp = 0, ra = 0;

    /* The frame record at fa: [fa] = its caller's fp, [fa + 8] = the return address. */
    if (ag_sig_read(c, fa, &fp) != 0 || ag_sig_read(c, fa + 8, &ra) != 0) {
        out->depth = 0;
        out->unwinder = AG_UNWINDER_NONE;
        out->end = AG_UNWIND_END_READ_FAULT;
        out->cfi_steps = 0;
        return;
    }
    ag_sig_unwind(c, ra, fa + 16, fp, 1, frames, max, out);
}
