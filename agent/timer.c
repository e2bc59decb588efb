/* SPDX-License-Identifier: MIT */
/*
 * agent/timer.c - the sampling signal's disposition and the per-thread CPU-time timers
 * (timer_create on the thread's CPU clock with SIGEV_THREAD_ID, so each expiry interrupts the
 * thread that burned the CPU). Their resolution is the scheduler tick: a rate above the
 * kernel's HZ is delivered at about HZ, which ag_stats reports as effective_hz_cpu.
 * Context: ordinary threads under ag.reg_lock (timers) or ag.life_lock (the signal).
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "agent/internal.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

int
ag_signal_install(int signo)
{
    struct sigaction sa, old;

    if (sigaction(signo, NULL, &old) != 0) {
        return -errno;
    }
    /* There is no chaining: a handler someone else installed would lose its signals. */
    if ((old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != ag_sig_handler
                                    : (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
        return -EBUSY;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = ag_sig_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(signo, &sa, NULL) != 0) {
        return -errno;
    }
    ag.signo = signo;
    ag.old_sa = old;
    return 0;
}

void
ag_signal_restore(void)
{
    struct sigaction ign;

    /* A wall signal may still be queued for a thread that has not run yet; under the previous
     * disposition (SIG_DFL for SIGPROF terminates) it would kill the host. Setting SIG_IGN
     * discards every pending instance, in every thread, before the old disposition returns.
     * (Deleted timers already withdrew theirs.) */
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(ag.signo, &ign, NULL);
    sigaction(ag.signo, &ag.old_sa, NULL);
}

void
ag_timer_delete_locked(struct ag_thread *t)
{
    if (t->has_timer) {
        timer_delete(t->timer);
        t->has_timer = 0;
        t->timer_hz = 0;
    }
}

static int
ag_timer_arm(timer_t timer, unsigned hz)
{
    struct itimerspec its;
    long ns = 1000000000L / (long)hz;

    its.it_interval.tv_sec = ns / 1000000000L;
    its.it_interval.tv_nsec = ns % 1000000000L;
    its.it_value = its.it_interval;
    return timer_settime(timer, 0, &its, NULL) == 0 ? 0 : -errno;
}

/* A thread's CPU clock from its tid (the kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)). */
static clockid_t
ag_timer_thread_clock(int32_t tid)
{
    return (clockid_t)((~(unsigned)tid << 3) | 6u);
}

static void
ag_timer_sync_locked(struct ag_thread *t, unsigned hz)
{
    struct sigevent sev;
    int32_t tid = atomic_load_explicit(&t->tid, memory_order_relaxed);

    if (hz == 0 || atomic_load_explicit(&t->excluded, memory_order_relaxed) ||
        atomic_load_explicit(&t->state, memory_order_relaxed) != AG_SLOT_ACTIVE) {
        ag_timer_delete_locked(t);
        return;
    }
    if (t->has_timer && t->timer_hz == hz) {
        return;
    }
    if (!t->has_timer) {
        memset(&sev, 0, sizeof(sev));
        sev.sigev_notify = SIGEV_THREAD_ID;
        sev.sigev_signo = ag.signo;
        sev.sigev_notify_thread_id = tid;
        if (timer_create(ag_timer_thread_clock(tid), &sev, &t->timer) != 0) {
            /* The thread exited under us (EINVAL), or RLIMIT_SIGPENDING is exhausted. */
            if (errno != EINVAL) {
                atomic_fetch_add_explicit(&ag.n_threads_dropped, 1, memory_order_relaxed);
                ag_log(AG_LOG_WARN, "timer: timer_create for thread %d: %s", (int)tid,
                       strerror(errno));
            }
            return;
        }
        t->has_timer = 1;
    }
    if (ag_timer_arm(t->timer, hz) != 0) {
        ag_timer_delete_locked(t);
        return;
    }
    t->timer_hz = hz;
}

void
ag_timers_update_locked(void)
{
    unsigned i, high = atomic_load_explicit(&ag.high, memory_order_relaxed);
    unsigned hz = atomic_load_explicit(&ag.hz_cpu, memory_order_relaxed);

    for (i = 0; ag.threads != NULL && i < high; i++) {
        ag_timer_sync_locked(&ag.threads[i], hz);
    }
}
