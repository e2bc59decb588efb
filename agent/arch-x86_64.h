/* SPDX-License-Identifier: MIT */
/*
 * agent/arch-x86_64.h - x86-64 for agent/arch.h (include that, not this). A call pushes the
 * return address, so every frame's RA is in memory; rbp frame records sit right under the
 * caller's sp (push rbp; mov rsp, rbp). Async-signal-safe, inline.
 */
#ifndef AG_ARCH_X86_64_H
#define AG_ARCH_X86_64_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <ucontext.h>

#define AG_ARCH_NAME "x86_64"

/* DWARF register numbers (System V x86-64 psABI, figure 3.36). */
#define AG_DWARF_REG_FP 6  /* rbp */
#define AG_DWARF_REG_SP 7  /* rsp */
#define AG_DWARF_REG_RA 16 /* the return-address column */

#define AG_DWARF_RA_INITIAL_SAME 0 /* the CIE says where the RA is (CFA - 8) */
#define AG_DWARF_NEGATE_RA_STATE 0 /* 0x2d is DW_CFA_GNU_window_save (SPARC): not ours */
#define AG_ARCH_LINK_REGISTER    0
#define AG_ARCH_FP_RECORD_AT_CFA 1

/* The user registers a perf sample carries for the unwinder (PERF_SAMPLE_REGS_USER,
 * asm/perf_regs.h's numbers: BP 6, SP 7, IP 8); a sample lists them in that order. */
#define AG_ARCH_PERF_REGS_MASK ((1ull << 6) | (1ull << 7) | (1ull << 8))
#define AG_ARCH_PERF_REGS_N    3

static inline void
ag_arch_perf_regs(const uint64_t *v, struct ag_arch_regs *r)
{
    r->fp = v[0];
    r->sp = v[1];
    r->pc = v[2];
    r->lr = 0;
}

static inline int
ag_arch_sig_regs(const ucontext_t *uc, struct ag_arch_regs *r)
{
    int64_t ret = (int64_t)uc->uc_mcontext.gregs[REG_RAX];
    const volatile uint8_t *pc;

    r->pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    r->sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
    r->fp = (uint64_t)uc->uc_mcontext.gregs[REG_RBP];
    r->lr = 0;
    /* The kernel rewinds restartable syscalls (SA_RESTART) to the syscall instruction; the
     * others return -EINTR right after it (0f 05). pc - 2 is on pc's page, which is mapped.
     * Byte reads: code is not aligned, and a misaligned u16 load is undefined behaviour. */
    pc = (const volatile uint8_t *)(uintptr_t)r->pc;
    return ret == -EINTR && (r->pc & 4095) >= 2 && ag_arch_code_readable(r->pc) && pc[-2] == 0x0f &&
           pc[-1] == 0x05;
}

/* 1 when pc stands on a syscall instruction (0f 05) or right after one: the thread was in, or
 * entering or leaving, a system call. Byte reads of code that was executing, so mapped; an
 * instruction that would cross a page is left out rather than read across the boundary. */
static inline int
ag_arch_at_syscall(uint64_t pc)
{
    const volatile uint8_t *c = (const volatile uint8_t *)(uintptr_t)pc;

    if (!ag_arch_code_readable(pc)) {
        return 0; /* (agent/arch.h) */
    }
    return ((pc & 4095) >= 2 && c[-2] == 0x0f && c[-1] == 0x05) ||
           ((pc & 4095) <= 4094 && c[0] == 0x0f && c[1] == 0x05);
}

/* 1 when pc is right after glibc's rt_sigprocmask call, mov $14, %eax (b8 0e 00 00 00) then
 * syscall (0f 05), as pthread_sigmask and sigprocmask make it. Read as ag_arch_at_syscall's. */
static inline int
ag_arch_at_sigmask_return(uint64_t pc)
{
    static const uint8_t call[7] = { 0xb8, 0x0e, 0x00, 0x00, 0x00, 0x0f, 0x05 };
    const volatile uint8_t *c = (const volatile uint8_t *)(uintptr_t)pc;
    unsigned i;

    if ((pc & 4095) < sizeof(call) || !ag_arch_code_readable(pc)) {
        return 0;
    }
    for (i = 0; i < sizeof(call); i++) {
        if (c[(long)i - (long)sizeof(call)] != call[i]) {
            return 0;
        }
    }
    return 1;
}

static inline uint64_t
ag_arch_strip_ra(uint64_t ra)
{
    return ra; /* no pointer authentication */
}

#endif /* AG_ARCH_X86_64_H */
