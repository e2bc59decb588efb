/* SPDX-License-Identifier: MIT */
/*
 * agent/sig-unwind.c - SIGNAL CONTEXT: the stack walker. Frame pointers first; DWARF CFI
 * (ag_sig_cfi_step in agent/sig-cfi.c) for the interrupted leaf and wherever the frame-pointer
 * chain gives up. What differs between architectures (the link register, where a frame record
 * lies, signed return addresses) comes from agent/arch.h. Every memory read is guarded: aligned,
 * inside the interrupted thread's stack above its sp (memory that is mapped for as long as the
 * thread runs), otherwise through process_vm_readv(), which fails with EFAULT instead of faulting;
 * the code at a leaf's pc (is it a function's entry?) through process_vm_readv() alone.
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
#include "agent/symbols-internal.h"

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

int
ag_sig_copy(pid_t pid, void *out, uint64_t addr, size_t n)
{
    struct iovec local = { out, n }, remote = { (void *)(uintptr_t)addr, n };
    int saved_errno = errno;
    long got = syscall(SYS_process_vm_readv, (long)pid, &local, 1L, &remote, 1L, 0L);

    errno = saved_errno;
    return got == (long)n ? 0 : -EFAULT;
}

/* Reads n (at most 8) bytes of code at addr with the non-faulting read. Not through the stack
 * window (code is not stack) nor a perf-ring copy (which holds only the stack); without remote
 * reads (qemu-user, a seccomp filter) it fails. */
static int
ag_sig_code_read(const struct ag_unwind_ctx *c, uint64_t addr, uint8_t *out, size_t n)
{
    if (!c->remote_ok || c->copy != NULL || n == 0 || n > 8) {
        return -EFAULT;
    }
    return ag_sig_copy(c->pid, out, addr, n);
}

/*
 * x86-64: an interrupted leaf without a CFI row that stands where its frame record is not made
 * yet: at `push %rbp` (55) or `endbr64` (f3 0f 1e fa), its return address is the word at sp; at
 * `mov %rsp,%rbp` (48 89 e5 or 48 8b ec) right after the push, the word at sp is rbp itself and
 * the return address the one above. rbp is still the caller's there, so a frame-pointer step
 * would name the caller's caller as the leaf's and drop the caller. Go's SIGURG preemption lands
 * here: its handler returns into runtime.asyncPreempt's `push %rbp` with the preempted pc pushed
 * as the return address, and a sampling signal that pended meanwhile (the handler blocks every
 * signal) is taken at that instruction (Go has no .eh_frame). Steps r to the caller and returns
 * 0, or -1 with r unchanged.
 * Cost: the code is read with the non-faulting read (a system call) and only where a known
 * module's executable span holds pc. A word at sp inside the stack window that is no return
 * address into a known module rules the entry out first (a direct read); a pc whose code was read
 * and is no entry is marked in the thread's row cache and not read again (a goroutine's stack is
 * outside the window: each of its reads is a system call too).
 */
AG_SIG_READS_FOREIGN_STACK static int
ag_sig_unwind_entry_step(struct ag_unwind_ctx *c, struct ag_cfi_regs *r)
{
    struct ag_cfi_cache_slot *slot = NULL;
    const struct ag_module_span *span;
    uint8_t code[4] = { 0, 0, 0, 0 };
    uint64_t top, ra;
    size_t n;
    int pushed;

    if (!c->remote_ok || c->copy != NULL) {
        return -1; /* no non-faulting read of code */
    }
    if (c->cache != NULL) {
        /* The walk's CFI lookup of pc has just filled this slot (unless the snapshot changed). */
        slot = &c->cache->slots[ag_sig_cfi_cache_index(r->pc)];
        if (slot->pc != r->pc) {
            slot = NULL;
        } else if ((slot->flags & AG_CFI_NOT_ENTRY) != 0) {
            return -1;
        }
    }
    if ((r->sp & 7) == 0 && r->sp >= c->lo && r->sp + 16 <= c->hi) {
        /* Direct reads: rule out a word at sp that is neither rbp nor a return address. */
        top = *(const volatile uint64_t *)(uintptr_t)r->sp;
        if (top != r->fp && (top < 4096 || ag_sig_module_find(top) == NULL)) {
            return -1;
        }
    }
    span = ag_sig_module_find(r->pc);
    if (span == NULL) {
        return -1;
    }
    n = span->hi - r->pc < sizeof(code) ? (size_t)(span->hi - r->pc) : sizeof(code);
    if (ag_sig_code_read(c, r->pc, code, n) != 0) {
        return -1;
    }
    if (code[0] == 0x55 ||
        (n == 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa)) {
        pushed = 0;
    } else if (n >= 3 && code[0] == 0x48 &&
               ((code[1] == 0x89 && code[2] == 0xe5) || (code[1] == 0x8b && code[2] == 0xec))) {
        pushed = 1;
    } else {
        if (slot != NULL) {
            slot->flags |= AG_CFI_NOT_ENTRY;
        }
        return -1;
    }
    /* After the push the word at sp must be rbp itself; the return address is above it. */
    if (ag_sig_unwind_read(c, r->sp, &top) != 0 || (pushed && top != r->fp) ||
        (pushed && ag_sig_unwind_read(c, r->sp + 8, &top) != 0)) {
        return -1;
    }
    ra = top;
    if (ra < 4096 || ag_sig_module_find(ra) == NULL) {
        return -1;
    }
    r->pc = ra;
    r->sp += pushed ? 16 : 8; /* the caller's exact sp; rbp stays the caller's */
    return 0;
}

/* One CFI step; maps ag_sig_cfi_step's result onto an end reason. sp_exact is 0 when sp is only
 * a lower bound (after a frame-pointer step on aarch64): an sp-based row would then read the
 * wrong words, so only an fp-based one is applied. *ra_exact: the row applied says the caller's
 * pc is the interrupted pc itself (AG_CFI_RA_EXACT), to be looked up as is. */
AG_SIG_READS_FOREIGN_STACK static int
ag_sig_unwind_cfi_step(struct ag_unwind_ctx *c, struct ag_cfi_regs *r, int pc_is_ra, int sp_exact,
                       uint8_t *why, int *ra_exact)
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
        *ra_exact = (rule.flags & AG_CFI_CFA_MASK) != AG_CFI_CFA_NONE &&
                    (rule.flags & AG_CFI_RA_EXACT) != 0;
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
    int exact = 0; /* r.pc is an interrupted pc, not a return address (AG_CFI_RA_EXACT) */

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
        /* Looked up at pc - 1 when pc is a return address: a call that ends a function is its
         * own. Not under Go's asyncPreempt, whose "caller" is the preempted pc itself. */
        int as_ra = !leaf && !exact;

        exact = 0;
        /* CFI first: where the module has a row for pc it is exact, whatever rbp holds (in code
         * built without frame pointers rbp is an ordinary register, and a "frame record" read
         * through it yields stale stack words as return addresses). */
        if (ag_sig_unwind_cfi_step(c, &r, as_ra, sp_exact, &cfi_why, &exact) == 0) {
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
        /* An interrupted leaf at its entry, before its frame record (x86-64; aarch64's x30 is
         * taken above): the return address at sp, not rbp's. */
        if (leaf && !AG_ARCH_LINK_REGISTER && ag_sig_unwind_entry_step(c, &r) == 0) {
            unwinder = AG_UNWINDER_FP;
            goto stepped;
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
