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
#include <string.h>
#include <sys/syscall.h>
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

void
host_signal_chain(int signo, siginfo_t *info, void *uctx)
{
    int (*real)(int, const struct sigaction *, struct sigaction *) =
            atomic_load_explicit(&host_sig.real_sigaction, memory_order_acquire);
    struct sigaction act, dfl;
    sigset_t mask, old, self;
    int saved = errno;

    host_sig_current(&act);
    if (!(act.sa_flags & SA_SIGINFO) && act.sa_handler == SIG_IGN) {
        return;
    }
    if (!(act.sa_flags & SA_SIGINFO) && act.sa_handler == SIG_DFL) {
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
    /* The host's handler, with the host's mask added for its duration; with SA_NODEFER the
     * signal itself is open inside it, as bare (the library's handler runs with it blocked). */
    mask = act.sa_mask;
    if (!(act.sa_flags & SA_NODEFER)) {
        sigaddset(&mask, signo);
    }
    host_sig_mask(SIG_BLOCK, &mask, &old);
    if ((act.sa_flags & SA_NODEFER) && !sigismember(&act.sa_mask, signo)) {
        sigemptyset(&self);
        sigaddset(&self, signo);
        host_sig_mask(SIG_UNBLOCK, &self, NULL);
    }
    if (act.sa_flags & SA_RESETHAND) {
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        host_sig_publish(&dfl);
    }
    errno = saved;
    if (act.sa_flags & SA_SIGINFO) {
        act.sa_sigaction(signo, info, uctx);
    } else {
        act.sa_handler(signo);
    }
    saved = errno;
    host_sig_mask(SIG_SETMASK, &old, NULL);
    errno = saved;
}
