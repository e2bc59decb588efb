/* SPDX-License-Identifier: MIT */
/*
 * host/sig-chain.c - SIGNAL CONTEXT: the host's disposition of the library's signal, as the
 * sigaction interposers of signals.c record it, and its delivery from the library's handler.
 * Everything here is async-signal-safe (tools/check-sigsafe.sh reads this object too): no lock,
 * no allocation, errno left as found. No interposer lives here.
 *
 * The record is double-buffered: a writer (signals.c, under its lock, never in a handler) fills
 * the slot not in use and then publishes its index, so a handler that interrupts the writer on
 * the same thread reads the previous disposition whole.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "host/internal.h"

struct host_sig_record host_sig;

void
host_sig_publish(const struct sigaction *act)
{
    unsigned next = atomic_load_explicit(&host_sig.cur, memory_order_relaxed) ^ 1u;

    host_sig.act[next] = *act;
    atomic_store_explicit(&host_sig.cur, next, memory_order_release);
}

void
host_sig_current(struct sigaction *out)
{
    *out = host_sig.act[atomic_load_explicit(&host_sig.cur, memory_order_acquire)];
}

static void
host_sig_mask(int how, const sigset_t *set, sigset_t *old)
{
    syscall(SYS_rt_sigprocmask, how, set, old, (long)(_NSIG / 8));
}

/*
 * SA_RESTART of a host handler that has none. The library's handler has SA_RESTART, so a call the
 * kernel restarts after a handler (read, wait4, futex waits: signal(7)'s list) comes back rewound
 * to its system-call instruction, where the host's own signal, bare, would have ended it with
 * EINTR. On x86-64 a rewound context is told from one interrupted just before that instruction by
 * what the instruction itself left: rcx holds the address after it and r11 the flags, which no
 * libc wrapper loads there; the call is then turned into the EINTR bare returns (rax, rip past
 * the instruction) before the host's handler sees the context. Only the calls signal(7) lists as
 * restarted under SA_RESTART: fork and clone come back rewound with a handler or without
 * (ERESTARTNOINTR) and must stay so. On aarch64 the rewound context is the untouched one (x0 is
 * put back, the pc moved back by one instruction), so the call restarts, as documented.
 */
#if defined(__x86_64__)
static int
host_sig_restarts_under_sa_restart(long nr)
{
    switch (nr) {
    case SYS_read:
    case SYS_readv:
    case SYS_write:
    case SYS_writev:
    case SYS_ioctl:
    case SYS_open:
    case SYS_openat:
    case SYS_wait4:
    case SYS_waitid:
    case SYS_accept:
    case SYS_accept4:
    case SYS_connect:
    case SYS_recvfrom:
    case SYS_recvmsg:
    case SYS_recvmmsg:
    case SYS_sendto:
    case SYS_sendmsg:
    case SYS_sendmmsg:
    case SYS_flock:
    case SYS_fcntl:
    case SYS_mq_timedreceive:
    case SYS_mq_timedsend:
    case SYS_futex:
    case SYS_getrandom:
        return 1;
    default:
        return 0;
    }
}

static void
host_sig_undo_restart(void *uctx)
{
    greg_t *r = ((ucontext_t *)uctx)->uc_mcontext.gregs;
    const unsigned char *at = (const unsigned char *)(uintptr_t)r[REG_RIP];

    if (r[REG_RCX] == r[REG_RIP] + 2 && r[REG_R11] == r[REG_EFL] && at[0] == 0x0f &&
        at[1] == 0x05 && host_sig_restarts_under_sa_restart(r[REG_RAX])) {
        r[REG_RAX] = -EINTR;
        r[REG_RIP] += 2;
    }
}
#else
static void
host_sig_undo_restart(void *uctx)
{
    (void)uctx;
}
#endif

/*
 * SA_ONSTACK of the host's handler. The library's handler has SA_ONSTACK too (signals.c: the Go
 * runtime's goroutines run on stacks of 2 KiB, too small for it and the kernel's frame); the
 * host's is moved to the alternate stack the thread had registered when the signal came
 * (uc_stack), where the kernel would have put it: at its top, unless the thread already runs on
 * it (then where it is, as the kernel does), or the registration is disabled (then nowhere else).
 * An SS_AUTODISARM registration is always entered at its top (the kernel disarmed it for the
 * handler's duration already, as it would bare). host_sig_call_on_stack (below, per
 * architecture) calls fn(arg) with the stack pointer at top and returns on the old stack; it
 * keeps a frame record, so unwinders walk from the alternate stack back to the interrupted one.
 */
#if defined(__x86_64__) || defined(__aarch64__)
#define HOST_SIG_CAN_SWITCH 1
void host_sig_call_on_stack(void *top, void (*fn)(void *), void *arg);
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl host_sig_call_on_stack\n"
        ".hidden host_sig_call_on_stack\n"
        ".type host_sig_call_on_stack, @function\n"
        "host_sig_call_on_stack:\n"
        ".cfi_startproc\n"
        "    pushq %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "    movq %rsp, %rbp\n"
        ".cfi_def_cfa_register %rbp\n"
        "    movq %rdi, %rsp\n"
        "    movq %rdx, %rdi\n"
        "    callq *%rsi\n"
        "    movq %rbp, %rsp\n"
        "    popq %rbp\n"
        ".cfi_def_cfa %rsp, 8\n"
        "    ret\n"
        ".cfi_endproc\n"
        ".size host_sig_call_on_stack, .-host_sig_call_on_stack\n");
#else
__asm__(".text\n"
        ".globl host_sig_call_on_stack\n"
        ".hidden host_sig_call_on_stack\n"
        ".type host_sig_call_on_stack, %function\n"
        "host_sig_call_on_stack:\n"
        ".cfi_startproc\n"
        "    stp x29, x30, [sp, #-16]!\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset x29, -16\n"
        ".cfi_offset x30, -8\n"
        "    mov x29, sp\n"
        ".cfi_def_cfa_register x29\n"
        "    mov sp, x0\n"
        "    mov x0, x2\n"
        "    blr x1\n"
        "    mov sp, x29\n"
        ".cfi_def_cfa_register sp\n"
        "    ldp x29, x30, [sp], #16\n"
        ".cfi_def_cfa_offset 0\n"
        ".cfi_restore x29\n"
        ".cfi_restore x30\n"
        "    ret\n"
        ".cfi_endproc\n"
        ".size host_sig_call_on_stack, .-host_sig_call_on_stack\n");
#endif
#else
#define HOST_SIG_CAN_SWITCH 0
#endif

/* The top of the alternate stack to run the host's handler on, or NULL to stay. */
static void *
host_sig_altstack_top(const void *uctx)
{
    const stack_t *ss = &((const ucontext_t *)uctx)->uc_stack;
    uintptr_t lo = (uintptr_t)ss->ss_sp, here = (uintptr_t)__builtin_frame_address(0);

    if (!HOST_SIG_CAN_SWITCH || (ss->ss_flags & SS_DISABLE) || ss->ss_size == 0) {
        return NULL;
    }
    if (!((unsigned)ss->ss_flags & SS_AUTODISARM) && here > lo && here - lo <= ss->ss_size) {
        return NULL; /* on it already */
    }
    /* The library's handler has SA_ONSTACK (signals.c): the kernel may have put its frame, and
     * the library's, on this stack already (the interrupted code was off it). The host's handler
     * goes below them, where the kernel would have put it below a frame of its own. */
    if ((uintptr_t)uctx > lo && (uintptr_t)uctx - lo <= ss->ss_size) {
        return here > lo && here - lo <= ss->ss_size
                       ? NULL
                       : (void *)(((uintptr_t)uctx - 256) & ~(uintptr_t)15);
    }
    return (void *)((lo + ss->ss_size) & ~(uintptr_t)15);
}

struct host_sig_call {
    struct sigaction act;
    int signo;
    siginfo_t *info;
    void *uctx;
};

static void
host_sig_call_handler(void *arg)
{
    const struct host_sig_call *c = arg;

    if (c->act.sa_flags & SA_SIGINFO) {
        c->act.sa_sigaction(c->signo, c->info, c->uctx);
    } else {
        c->act.sa_handler(c->signo);
    }
}

void
host_signal_chain(int signo, siginfo_t *info, void *uctx)
{
    int (*real)(int, const struct sigaction *, struct sigaction *) =
            atomic_load_explicit(&host_sig.real_sigaction, memory_order_acquire);
    struct host_sig_call call = { .signo = signo, .info = info, .uctx = uctx };
    struct sigaction dfl;
    sigset_t mask, old, self;
    void *top = NULL;
    int saved = errno;

    host_sig_current(&call.act);
    /* The handler's value decides, whatever the flags say (the kernel's rule: SA_SIGINFO with
     * SIG_DFL, as SA_RESETHAND leaves it, is the default action). */
    if (call.act.sa_handler == SIG_IGN) {
        return;
    }
    if (call.act.sa_handler == SIG_DFL) {
        /* The default action, as bare: the library's handler steps aside, the signal is raised
         * again with the mask open, and for SIGPROF the process ends with it. A default that
         * ignores (SIGURG) comes back here and the handler is put back. */
        if (real == NULL) {
            return;
        }
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        real(signo, &dfl, NULL);
        sigemptyset(&mask);
        sigaddset(&mask, signo);
        syscall(SYS_tgkill, (long)getpid(), (long)syscall(SYS_gettid), (long)signo);
        host_sig_mask(SIG_UNBLOCK, &mask, &old);
        host_sig_mask(SIG_SETMASK, &old, NULL);
        real(signo, &host_sig.library_act, NULL);
        errno = saved;
        return;
    }
    if (!(call.act.sa_flags & SA_RESTART)) {
        host_sig_undo_restart(uctx);
    }
    if (call.act.sa_flags & SA_ONSTACK) {
        top = host_sig_altstack_top(uctx);
    }
    /* The host's handler, with the host's mask added for its duration; with SA_NODEFER the
     * signal itself is open inside it, as bare (the library's handler runs with it blocked),
     * except on an alternate stack the chain moved it to: there the library's own instances of
     * the signal would land on top of it, and the stack may be small. */
    mask = call.act.sa_mask;
    if (!(call.act.sa_flags & SA_NODEFER)) {
        sigaddset(&mask, signo);
    }
    host_sig_mask(SIG_BLOCK, &mask, &old);
    if ((call.act.sa_flags & SA_NODEFER) && !sigismember(&call.act.sa_mask, signo) && top == NULL) {
        sigemptyset(&self);
        sigaddset(&self, signo);
        host_sig_mask(SIG_UNBLOCK, &self, NULL);
    }
    if (call.act.sa_flags & SA_RESETHAND) {
        /* The kernel resets the handler alone: flags and mask stay, as a query shows. */
        dfl = call.act;
        dfl.sa_handler = SIG_DFL;
        host_sig_publish(&dfl);
    }
    errno = saved;
#if HOST_SIG_CAN_SWITCH
    if (top != NULL) {
        host_sig_call_on_stack(top, host_sig_call_handler, &call);
    } else
#endif
    {
        host_sig_call_handler(&call);
    }
    saved = errno;
    host_sig_mask(SIG_SETMASK, &old, NULL);
    errno = saved;
}
