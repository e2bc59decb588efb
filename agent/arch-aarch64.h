/* SPDX-License-Identifier: MIT */
/*
 * agent/arch-aarch64.h - AArch64 (Linux arm64) for agent/arch.h (include that, not this).
 * What differs from x86-64 (docs/architecture.md, "arm64"):
 *   - bl leaves the return address in x30 (the link register), not on the stack: a leaf, or
 *     any function before its prologue stored x30, returns through the register. Its CFI says
 *     nothing of x30 (the initial rule is "same value"), and the unwinder takes x30 from the
 *     signal context for that first step only.
 *   - An AAPCS64 frame record {x29, x30} may lie anywhere in its frame (GCC puts it at the
 *     bottom, under the locals), so a frame-pointer step knows the caller's pc and fp exactly
 *     but only a lower bound of its sp: the unwinder does not apply an sp-based CFI row after
 *     such a step.
 *   - With pointer authentication (-mbranch-protection, FEAT_PAuth) a saved return address
 *     carries a signature in its upper bits; DW_CFA_AARCH64_negate_ra_state (0x2d) marks the
 *     ranges where x30 is signed. The unwinder strips every RA it reads with xpaclri, which is
 *     in the hint space: a no-op on processors without PAuth, where no bits are set anyway.
 * Async-signal-safe, inline.
 */
#ifndef AG_ARCH_AARCH64_H
#define AG_ARCH_AARCH64_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <ucontext.h>

#define AG_ARCH_NAME "aarch64"

/* DWARF register numbers (DWARF for the Arm 64-bit Architecture, 4.1). */
#define AG_DWARF_REG_FP 29 /* x29 */
#define AG_DWARF_REG_SP 31 /* sp */
#define AG_DWARF_REG_RA 30 /* x30: the CIE's return-address column */

#define AG_DWARF_RA_INITIAL_SAME 1 /* until the prologue saves it, the RA is in x30 */
#define AG_DWARF_NEGATE_RA_STATE 1 /* 0x2d: DW_CFA_AARCH64_negate_ra_state, no operands */
#define AG_ARCH_LINK_REGISTER    1
#define AG_ARCH_FP_RECORD_AT_CFA 0

/* The user registers a perf sample carries for the unwinder (PERF_SAMPLE_REGS_USER,
 * asm/perf_regs.h's numbers: x29 29, LR 30, SP 31, PC 32); a sample lists them in that order. */
#define AG_ARCH_PERF_REGS_MASK ((1ull << 29) | (1ull << 30) | (1ull << 31) | (1ull << 32))
#define AG_ARCH_PERF_REGS_N    4

static inline void
ag_arch_perf_regs(const uint64_t *v, struct ag_arch_regs *r)
{
    r->fp = v[0];
    r->lr = v[1];
    r->sp = v[2];
    r->pc = v[3];
}

static inline int
ag_arch_sig_regs(const ucontext_t *uc, struct ag_arch_regs *r)
{
    int64_t ret = (int64_t)uc->uc_mcontext.regs[0];

    r->pc = (uint64_t)uc->uc_mcontext.pc;
    r->sp = (uint64_t)uc->uc_mcontext.sp;
    r->fp = (uint64_t)uc->uc_mcontext.regs[29];
    r->lr = (uint64_t)uc->uc_mcontext.regs[30];
    /* A syscall that returns -EINTR (x0) right after its svc #0 (0xd4000001); instructions are
     * 4-byte aligned, and pc - 4 is on pc's page, which is mapped. */
    return ret == -EINTR && (r->pc & 4095) >= 4 && (r->pc & 3) == 0 &&
           ag_arch_code_readable(r->pc) &&
           *(const volatile uint32_t *)(uintptr_t)(r->pc - 4) == 0xd4000001u;
}

/* 1 when pc stands on an svc #0 (0xd4000001) or right after one: the thread was in, or
 * entering or leaving, a system call. Aligned word reads of code that was executing. */
static inline int
ag_arch_at_syscall(uint64_t pc)
{
    const volatile uint32_t *c = (const volatile uint32_t *)(uintptr_t)pc;

    return (pc & 3) == 0 && ag_arch_code_readable(pc) &&
           (((pc & 4095) >= 4 && c[-1] == 0xd4000001u) || c[0] == 0xd4000001u);
}

/* 1 when pc is right after glibc's rt_sigprocmask call, mov x8, #135 (0xd28010e8) then svc #0,
 * as pthread_sigmask and sigprocmask make it. Aligned word reads, on pc's page. */
static inline int
ag_arch_at_sigmask_return(uint64_t pc)
{
    const volatile uint32_t *c = (const volatile uint32_t *)(uintptr_t)pc;

    return (pc & 3) == 0 && (pc & 4095) >= 8 && ag_arch_code_readable(pc) && c[-1] == 0xd4000001u &&
           c[-2] == 0xd28010e8u;
}

/* xpaclri (hint #7) strips the authentication code from x30; without FEAT_PAuth it is a NOP,
 * and an unsigned user address is its own stripped form. */
static inline uint64_t
ag_arch_strip_ra(uint64_t ra)
{
    register uint64_t x30 __asm__("x30") = ra;

    __asm__("hint #7" : "+r"(x30));
    return x30;
}

#endif /* AG_ARCH_AARCH64_H */
