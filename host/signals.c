/* SPDX-License-Identifier: MIT */
/*
 * host/signals.c - the signal mask.
 *
 *   pthread_sigmask sigprocmask
 *                    interposed because a thread that blocks the sampling signal gets no samples
 *                    while it does, and the signal left pending would land where it unblocks:
 *                    the agent's hook claims the CPU burned meanwhile as it unblocks, as an
 *                    AG_SOURCE_UNSEEN sample under the stack of the call that blocked it.
 *
 * What the host may rely on: the mask changes exactly as libc would change it, with libc's
 * result and errno (ENOSYS, or -1 and ENOSYS for sigprocmask, when libc has none); the old mask
 * is libc's. Without the agent's hooks the call goes straight to libc. host_sigmask_raw() is the
 * library's own way around the interposer (the agent's threads and exit hook).
 *
 * Held by: test-agent-sampling (cpu_with_the_signal_blocked_is_marked_unseen_timer and _perf,
 * a_long_blocked_span_reaches_the_consumer_in_pieces, a_note_of_a_blocked_signal_does_not_outlive
 * _the_block: CPU burned with the signal blocked by either call is marked unseen, with no sample
 * in the interposer itself); bench-sigmask times the interposer against libc.
 */
#include <errno.h>

#include "host/internal.h"

HOST_ANCHOR(signals);

static _Atomic(void *) host_signals_real_mask, host_signals_real_procmask;

int
host_sigmask_raw(int how, const sigset_t *set, sigset_t *old)
{
    host_sigmask_fn real = (host_sigmask_fn)host_real(&host_signals_real_mask, "pthread_sigmask");

    return real != NULL ? real(how, set, old) : ENOSYS;
}

HOST_EXPORT int
pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    host_sigmask_fn real = (host_sigmask_fn)host_real(&host_signals_real_mask, "pthread_sigmask");
    const struct host_agent_hooks *h;
    int rc;

    if (real == NULL) {
        return ENOSYS;
    }
    if (set == NULL || (h = host_agent_active()) == NULL) {
        return real(how, set, old); /* a query, or nothing for the agent to note */
    }
    rc = h->change_mask(real, how, set, old, HOST_FA);
    HOST_NO_TAIL_CALL();
    return rc;
}

HOST_EXPORT int
sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    host_sigmask_fn real = (host_sigmask_fn)host_real(&host_signals_real_procmask, "sigprocmask");
    const struct host_agent_hooks *h;
    int rc;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (set == NULL || (h = host_agent_active()) == NULL) {
        return real(how, set, old);
    }
    rc = h->change_mask(real, how, set, old, HOST_FA);
    HOST_NO_TAIL_CALL();
    return rc;
}
