/* SPDX-License-Identifier: MIT */
/*
 * agent/arch.h - what the sampler needs to know about the processor it runs on, in one small
 * header per architecture (agent/arch-x86_64.h, agent/arch-aarch64.h), so that the unwinder,
 * the CFI tables and the signal handler read constants and call inline helpers instead of
 * testing the architecture themselves. Each header defines:
 *   AG_ARCH_NAME                   "x86_64" or "aarch64"
 *   AG_DWARF_REG_FP, _SP, _RA      DWARF numbers of the frame pointer, the stack pointer and the
 *                                  return-address column of the psABI
 *   AG_DWARF_RA_INITIAL_SAME       1 when a frame whose CFI says nothing of the return address
 *                                  still has it in the link register (aarch64's x30)
 *   AG_DWARF_NEGATE_RA_STATE       1 when opcode 0x2d is DW_CFA_AARCH64_negate_ra_state
 *   AG_ARCH_LINK_REGISTER          1 when calls leave the return address in a register
 *   AG_ARCH_FP_RECORD_AT_CFA       1 when a frame record lies right below the caller's sp, so
 *                                  fp + 16 is the caller's sp (x86-64); 0 when it may lie
 *                                  anywhere in the frame (AAPCS64: fp + 16 is only a lower bound)
 *   struct ag_arch_regs            {pc, sp, fp, lr} of an interrupted context
 *   ag_arch_sig_regs(uc, out)      fills it from a signal's ucontext; returns nonzero when the
 *                                  context is a system call about to return -EINTR
 *   ag_arch_strip_ra(ra)           a return address without pointer-authentication bits
 * and, for all of them, ag_arch_code_readable(pc) below.
 * Context: everything here is async-signal-safe and inline.
 */
#ifndef AG_ARCH_H
#define AG_ARCH_H

#include <stdint.h>

struct ag_arch_regs {
    uint64_t pc, sp, fp;
    uint64_t lr; /* the link register; 0 where there is none (x86-64) */
};

/* A signal's pc is code that was executing, so mapped, and the handler reads the bytes around it.
 * Not under ThreadSanitizer: its runtime holds an asynchronous signal that comes inside one of its
 * interceptors and runs the handler as the interceptor returns, with the context saved when the
 * signal came, by which time that code may be unmapped (a library's destructor run by dlclose:
 * agent-torture's host died of SIGSEGV with no report in 3 of 62 runs under TSan, and twice in a
 * row in a fresh-clone CI run). There the page is checked first with a read that fails instead of
 * faulting; other builds read it directly. */
#if defined(__SANITIZE_THREAD__)
#define AG_ARCH_SIGNALS_DEFERRED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define AG_ARCH_SIGNALS_DEFERRED 1
#endif
#endif

#ifdef AG_ARCH_SIGNALS_DEFERRED
#include <errno.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static inline int
ag_arch_code_readable(uint64_t pc)
{
    uint8_t byte;
    struct iovec local = { &byte, 1 }, remote = { (void *)(uintptr_t)pc, 1 };
    int saved_errno = errno;
    long n = syscall(SYS_process_vm_readv, (long)getpid(), &local, 1L, &remote, 1L, 0L);

    errno = saved_errno;
    return n == 1;
}
#else
static inline int
ag_arch_code_readable(uint64_t pc)
{
    (void)pc;
    return 1;
}
#endif

#if defined(__x86_64__)
#include "agent/arch-x86_64.h"
#elif defined(__aarch64__)
#include "agent/arch-aarch64.h"
#else
#error "pipeprof: the agent supports x86_64 and aarch64"
#endif

#endif /* AG_ARCH_H */
