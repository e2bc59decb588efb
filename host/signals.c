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
 *   sigaction signal bsd_signal sysv_signal
 *                    interposed for the library's own signal (SIGPROF by default) and for
 *                    handlers on alternate stacks. Before, a handler the host installed for it
 *                    after the agent started replaced the agent's (sampling silently stopped)
 *                    and received the agent's signals (1653 to 2207 where bare has 0); its
 *                    signal(SIG_IGN) stopped sampling without a word; and the sampling signal
 *                    landed on top of a host handler running on a 4.5 KiB sigaltstack (SIGSEGV
 *                    4 of 4 runs). Now, while the library holds the signal (host_signal_claim),
 *                    the host's disposition of it is recorded, reported back in oldact exactly
 *                    as bare, and never installed: the library's handler stays, and passes
 *                    every instance it did not send to the host's disposition
 *                    (host_signal_chain: the host's handler with its mask and flags, nothing
 *                    for SIG_IGN, the default action for SIG_DFL). A host handler of another
 *                    signal with SA_ONSTACK gets the library's signal added to its mask (its
 *                    oldact does not show it), at claim time for handlers installed before.
 *
 * What the host may rely on: the mask changes exactly as libc would change it, with libc's
 * result and errno (ENOSYS, or -1 and ENOSYS for sigprocmask, when libc has none); the old mask
 * is libc's. Without the agent's hooks the call goes straight to libc. host_sigmask_raw() is the
 * library's own way around the interposer (the agent's threads and exit hook). Its sigaction of
 * the library's signal returns what bare would, and its handler gets exactly its own signals:
 * those of kill, raise, sigqueue, its timers and setitimer(ITIMER_PROF), with its sa_mask and
 * flags (sig-chain.c): SA_NODEFER, SA_RESETHAND, SA_ONSTACK (its handler moved to the alternate
 * stack), a missing SA_RESTART (the call the kernel restarted for the library's handler turned
 * back into EINTR, x86-64 only; docs/architecture.md says what stays different and why); a query
 * reads it back as the kernel keeps it. Two threads that change that disposition at the same
 * instant may each see the other's as old. sigset() and raw rt_sigaction system calls are not
 * seen.
 *
 *   raise pthread_kill pthread_sigqueue tgkill
 *                    interposed for a send of the library's signal within the process, which the
 *                    kernel would drop while one of the library's own instances is pending for
 *                    the target thread (standard signals do not queue): to the calling thread,
 *                    with the signal open, the host's disposition runs at once instead, as bare
 *                    (host_sig_send_self below); to another thread (or to itself with the signal
 *                    blocked) the real send is made with the target's thread slot marked
 *                    around it, and the library's handler that takes an instance the host's was
 *                    merged into runs the host's disposition for it (host_sig_send_begin
 *                    below). kill() of the process needs nothing: a process-directed instance
 *                    pends in the process's set, apart from the thread's where the library's
 *                    pend, and comes on its own.
 *   syscall          (fds.c's interposer) hands over SYS_tgkill, SYS_tkill and
 *                    SYS_rt_tgsigqueueinfo (host_syscall_send below): the same sends made raw,
 *                    as language runtimes and thread libraries make them; not the library's own
 *                    (the wall sampler's, a nudge, sig-chain.c's re-raise), which it makes with
 *                    syscall() too.
 *
 * Held by: host-contract-signals-* (tests/hosts/signals.c: the host's own handler, setitimer,
 * SIG_IGN and SIG_DFL of SIGPROF after the agent started; its SA_NODEFER, sa_mask, SA_RESETHAND
 * and flags read back (-flags), SA_ONSTACK (-onstack), SA_RESTART or not under its own
 * ITIMER_PROF (-restart, -norestart); 20000 sends to its own thread under sampling, each one
 * running its handler before the call returns (-raises); 12000 sends to another thread and 500
 * kill()s, each one running its handler, and 200 raise()s with the signal blocked, each running
 * it once as the mask opens (-others); the same by syscall(SYS_tkill, SYS_rt_tgsigqueueinfo,
 * SYS_tgkill), 2 x 200 to itself with the signal blocked and 3 x 5000 with it open (-rawsends); its
 * own POSIX timer at 2 kHz, each expiration a handler run or in si_overrun, as bare (-timer: the
 * kernel queues a timer's signal apart from the library's pending one, nothing to do here);
 * host-contract-altstack-*: a handler on
 * a small alternate stack; host-contract-sigign-*: an inherited SIG_IGN through posix_spawn,
 * system and fork+exec), and test-agent-sampling
 * (cpu_with_the_signal_blocked_is_marked_unseen_timer and _perf,
 * a_long_blocked_span_reaches_the_consumer_in_pieces, a_note_of_a_blocked_signal_does_not_outlive
 * _the_block: CPU burned with the signal blocked by either call is marked unseen, with no sample
 * in the interposer itself); bench-sigmask times the interposer against libc.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

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

/* Serialises the library's claim, release and the spawn brackets; never taken by a handler. */
static pthread_mutex_t host_sig_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(void *) host_sig_real_p;
static int host_sig_spawners;

static host_sigaction_fn
host_sig_real(void)
{
    host_sigaction_fn real = (host_sigaction_fn)host_real(&host_sig_real_p, "sigaction");

    atomic_store_explicit(&host_sig.real_sigaction, real, memory_order_release);
    return real;
}

/* The handler's value decides, whatever the flags (the kernel's rule: SA_SIGINFO with SIG_DFL, as
 * SA_RESETHAND leaves it, is the default action). */
static int
host_sig_is_handler(const struct sigaction *a)
{
    return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000 /* the kernel's; glibc's headers keep it to themselves */
#endif
#ifndef SA_EXPOSE_TAGBITS
#define SA_EXPOSE_TAGBITS 0x00000800
#endif
#define HOST_SA_KNOWN                                                                  \
    (SA_NOCLDSTOP | SA_NOCLDWAIT | SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER | \
     SA_RESETHAND | SA_EXPOSE_TAGBITS)

/* act as the kernel keeps it and a query reports it: SIGKILL and SIGSTOP out of its mask, flags it
 * does not know cleared (Linux 5.11 and later), libc's restorer added where libc adds one (where
 * it does not, as on aarch64, libc leaves the caller's sa_restorer as it was). */
static void
host_sig_as_kernel_keeps(struct sigaction *act)
{
    sigdelset(&act->sa_mask, SIGKILL);
    sigdelset(&act->sa_mask, SIGSTOP);
    act->sa_flags = (act->sa_flags & (int)HOST_SA_KNOWN) | host_sig.restorer_flag;
    if (host_sig.restorer_flag) {
        act->sa_restorer = host_sig.restorer;
    }
}

static uint64_t
host_sig_bit(int s)
{
    return s > 0 && s <= 64 ? (uint64_t)1 << (unsigned)(s - 1) : 0;
}

/* Handlers installed before the claim: those with SA_ONSTACK get signo in their mask. */
static void
host_sig_guard_onstack_locked(host_sigaction_fn real, int signo)
{
    struct sigaction a;
    int s;

    for (s = 1; s < NSIG && s <= 64; s++) {
        if (s == signo || s == SIGKILL || s == SIGSTOP || real(s, NULL, &a) != 0) {
            continue;
        }
        if (host_sig_is_handler(&a) && (a.sa_flags & SA_ONSTACK) &&
            !sigismember(&a.sa_mask, signo)) {
            sigaddset(&a.sa_mask, signo);
            if (real(s, &a, NULL) == 0) {
                atomic_fetch_or_explicit(&host_sig.onstack_added, host_sig_bit(s),
                                         memory_order_relaxed);
            }
        }
    }
}

/* SIG_IGN discards every instance of signo pending in the kernel, the process's and each
 * thread's (a wall signal still queued for a thread that has not run, a timer's expiry). */
static void
host_sig_discard_pending(host_sigaction_fn real, int signo)
{
    struct sigaction ign;

    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    real(signo, &ign, NULL);
}

/* The host's disposition of signo put in place, the pending instances discarded first, and the
 * signal no longer the library's. host_sig_lock held. */
static void
host_sig_give_back_locked(host_sigaction_fn real, int signo)
{
    struct sigaction host;

    host_sig_discard_pending(real, signo);
    host_sig_current(&host);
    real(signo, &host, NULL);
    atomic_store_explicit(&host_sig.signo, 0, memory_order_release);
}

int
host_signal_claim(int signo, void (*handler)(int, siginfo_t *, void *))
{
    host_sigaction_fn real = host_sig_real();
    struct sigaction sa, old, back;
    int err = 0, held;

    if (real == NULL) {
        return -ENOSYS;
    }
    pthread_mutex_lock(&host_sig_lock);
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = handler;
    /* SA_ONSTACK: on a thread with a sigaltstack that runs elsewhere (a Go goroutine's 2 KiB
     * stack in its heap, which the kernel's frame and this handler overflowed: the program died
     * of "unexpected return pc" under record), the kernel puts both on the alternate stack. */
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    held = atomic_load_explicit(&host_sig.signo, memory_order_acquire);
    if (held != 0 && held != signo) {
        host_sig_give_back_locked(real, held); /* another signal, kept since a stop */
    }
    if (held != signo) {
        if (real(signo, NULL, &old) != 0) {
            err = -errno;
            goto out;
        }
        host_sig_publish(&old);
    }
    host_sig.library_act = sa;
    memset(&back, 0, sizeof(back));
    if (real(signo, &sa, NULL) != 0 || real(signo, NULL, &back) != 0) {
        err = -errno;
        goto out;
    }
    host_sig.restorer_flag = back.sa_flags & SA_RESTORER;
    host_sig.restorer = back.sa_restorer;
    atomic_store_explicit(&host_sig.signo, signo, memory_order_release);
    host_sig_guard_onstack_locked(real, signo);
out:
    pthread_mutex_unlock(&host_sig_lock);
    return err;
}

int
host_signals_spawn_begin(void)
{
    host_sigaction_fn real = host_sig_real();
    struct sigaction host;
    int signo = atomic_load_explicit(&host_sig.signo, memory_order_acquire);

    if (signo == 0 || real == NULL) {
        return 0;
    }
    host_sig_current(&host);
    if (host_sig_is_handler(&host) || host.sa_handler != SIG_IGN) {
        return 0;
    }
    pthread_mutex_lock(&host_sig_lock);
    if (host_sig_spawners++ == 0) {
        real(signo, &host, NULL);
    }
    pthread_mutex_unlock(&host_sig_lock);
    return 1;
}

void
host_signals_spawn_end(int began)
{
    host_sigaction_fn real = host_sig_real();
    int signo;

    if (!began) {
        return;
    }
    pthread_mutex_lock(&host_sig_lock);
    signo = atomic_load_explicit(&host_sig.signo, memory_order_acquire);
    if (--host_sig_spawners == 0 && signo != 0 && real != NULL) {
        real(signo, &host_sig.library_act, NULL);
    }
    pthread_mutex_unlock(&host_sig_lock);
}

HOST_EXPORT int
sigaction(int signo, const struct sigaction *act, struct sigaction *old)
{
    host_sigaction_fn real = host_sig_real();
    int claimed = atomic_load_explicit(&host_sig.signo, memory_order_acquire);
    uint64_t bit = host_sig_bit(signo), was;
    struct sigaction guarded, kept;
    int rc;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (claimed == 0) {
        return real(signo, act, old);
    }
    if (signo == claimed) {
        if (old != NULL) {
            host_sig_current(old);
        }
        if (act != NULL) {
            kept = *act;
            host_sig_as_kernel_keeps(&kept);
            host_sig_publish(&kept);
        }
        return 0;
    }
    was = atomic_load_explicit(&host_sig.onstack_added, memory_order_relaxed) & bit;
    if (act != NULL && host_sig_is_handler(act) && (act->sa_flags & SA_ONSTACK) &&
        !sigismember(&act->sa_mask, claimed)) {
        guarded = *act;
        sigaddset(&guarded.sa_mask, claimed);
        rc = real(signo, &guarded, old);
        if (rc == 0) {
            atomic_fetch_or_explicit(&host_sig.onstack_added, bit, memory_order_relaxed);
        }
    } else {
        rc = real(signo, act, old);
        if (rc == 0 && act != NULL) {
            atomic_fetch_and_explicit(&host_sig.onstack_added, ~bit, memory_order_relaxed);
        }
    }
    if (rc == 0 && old != NULL && was) {
        sigdelset(&old->sa_mask, claimed);
    }
    return rc;
}

/* signal() and its two historical forms, as glibc builds them, through sigaction above. */
static sighandler_t
host_signal_set(int signo, sighandler_t handler, int flags, int mask_self)
{
    struct sigaction act, old;

    if (handler == SIG_ERR || signo <= 0 || signo >= NSIG) {
        errno = EINVAL;
        return SIG_ERR;
    }
    memset(&act, 0, sizeof(act));
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    if (mask_self) {
        sigaddset(&act.sa_mask, signo);
    }
    act.sa_flags = flags;
    return sigaction(signo, &act, &old) == 0 ? old.sa_handler : SIG_ERR;
}

HOST_EXPORT sighandler_t
signal(int signo, sighandler_t handler)
{
    return host_signal_set(signo, handler, SA_RESTART, 1);
}

sighandler_t bsd_signal(int signo, sighandler_t handler);
sighandler_t sysv_signal(int signo, sighandler_t handler);

HOST_EXPORT sighandler_t
bsd_signal(int signo, sighandler_t handler)
{
    return host_signal_set(signo, handler, SA_RESTART, 1);
}

HOST_EXPORT sighandler_t
sysv_signal(int signo, sighandler_t handler)
{
    return host_signal_set(signo, handler, SA_RESETHAND | SA_NODEFER, 0);
}

/*
 * The library's signal sent by the host to the calling thread (raise, pthread_kill and
 * pthread_sigqueue of pthread_self(), tgkill of its own tid): run through the host's disposition
 * at once, as the kernel would run it before the call returns, without a signal. A standard
 * signal does not queue: a send that finds one of the library's own instances pending for the
 * thread (a wall pass's, a CPU timer's or perf overflow's, between their send and delivery) is
 * dropped by the kernel, and the host's handler never ran (host-signals raises: 5 of 6666
 * raise() calls under wall sampling at 1000 Hz). The host's handler gets what the kernel would
 * give: si_code SI_TKILL (SI_QUEUE with the value for pthread_sigqueue), its pid and uid, and a
 * context of the call (getcontext, with the thread's alternate stack as the kernel reports it),
 * whose registers are those of this function rather than of libc's system call. With the signal
 * blocked in the thread's mask the send is the real one (it pends as bare; one of the library's
 * pending then still takes its place). Returns 1 when the send is not the library's to make.
 */
static int
host_sig_send_self_info(int signo, siginfo_t *info)
{
    ucontext_t uc;
    stack_t off;
    sigset_t now;
    int autodisarm;

    if (signo == 0 || signo != atomic_load_explicit(&host_sig.signo, memory_order_acquire) ||
        host_sigmask_raw(SIG_BLOCK, NULL, &now) != 0 || sigismember(&now, signo)) {
        return 1;
    }
    memset(&uc, 0, sizeof(uc));
    if (getcontext(&uc) != 0 || sigaltstack(NULL, &uc.uc_stack) != 0) {
        return 1;
    }
    /* The kernel disarms an SS_AUTODISARM registration for a handler's duration (a SA_ONSTACK
     * signal raised inside it would otherwise start again at the stack's top, over the frames
     * of a handler running there) and puts it back at its return. */
    autodisarm = ((unsigned)uc.uc_stack.ss_flags & SS_AUTODISARM) &&
                 !(uc.uc_stack.ss_flags & SS_DISABLE);
    if (autodisarm) {
        memset(&off, 0, sizeof(off));
        off.ss_flags = SS_DISABLE;
        sigaltstack(&off, NULL);
    }
    host_signal_chain(signo, info, &uc);
    if (autodisarm) {
        sigaltstack(&uc.uc_stack, NULL);
    }
    return 0;
}

/* What the kernel gives a tgkill (SI_TKILL) or sigqueue (SI_QUEUE and value) from this process. */
static void
host_sig_info_of(siginfo_t *info, int signo, int code, const union sigval *value)
{
    memset(info, 0, sizeof(*info));
    info->si_signo = signo;
    info->si_code = code;
    info->si_pid = getpid();
    info->si_uid = getuid();
    if (value != NULL) {
        info->si_value = *value;
    }
}

static int
host_sig_send_self(int signo, int code, const union sigval *value)
{
    siginfo_t info;

    host_sig_info_of(&info, signo, code, value);
    return host_sig_send_self_info(signo, &info);
}

/*
 * The library's signal sent by the host to another of its threads (pthread_kill, pthread_sigqueue
 * of another thread, tgkill of another tid of this process), or to itself with the signal blocked:
 * the kernel merges it into one of the library's instances pending there, if any, and the
 * library's handler, which takes that one, runs the host's disposition for it (the agent's hooks
 * send_begin and send_end mark the target's thread slot around the real send; agent/sig-handler.c,
 * ag_sig_host_sends). Before, the host's handler never ran for it: host-signals others under
 * record --hz 1000, 5 of the first 98 pthread_kill sends in wall mode, 5 of 725 in CPU mode, and
 * 200 (wall) and 164 (CPU) of 200 raise() calls with the signal blocked. Lock-free.
 */
struct host_sig_send {
    const struct host_agent_hooks *h;
    void *token;
    pid_t tid;
};

static void
host_sig_send_begin(struct host_sig_send *s, pid_t tid, int signo, int code,
                    const union sigval *value)
{
    s->h = NULL;
    s->token = NULL;
    s->tid = tid;
    if (tid > 0 && signo != 0 &&
        signo == atomic_load_explicit(&host_sig.signo, memory_order_acquire) &&
        (s->h = host_agent_active()) != NULL && s->h->send_begin != NULL) {
        s->token = s->h->send_begin(tid, code, value);
    }
}

/* Returns rc, the real send's result (0: sent); errno as the send left it. */
static int
host_sig_send_end(const struct host_sig_send *s, int rc)
{
    if (s->token != NULL) {
        s->h->send_end(s->token, s->tid, rc == 0);
    }
    return rc;
}

/* The kernel's id of thread th's CPU clock encodes its tid (~tid << 3 | 6, glibc and musl
 * alike); 0 when th has none (gone). */
static pid_t
host_sig_tid_of(pthread_t th)
{
    clockid_t clk;

    if (pthread_getcpuclockid(th, &clk) != 0 || (clk & 7) != 6) {
        return 0;
    }
    return (pid_t)(~(unsigned)clk >> 3);
}

HOST_EXPORT int
raise(int signo)
{
    HOST_REAL_OR_ENOSYS(int, (int), raise)
    struct host_sig_send send;

    if (host_sig_send_self(signo, SI_TKILL, NULL) == 0) {
        return 0;
    }
    host_sig_send_begin(&send, gettid(), signo, SI_TKILL, NULL);
    return host_sig_send_end(&send, real(signo));
}

HOST_EXPORT int
pthread_kill(pthread_t thread, int signo)
{
    static _Atomic(void *) real_p;
    int (*real)(pthread_t, int) = (int (*)(pthread_t, int))host_real(&real_p, "pthread_kill");
    int self = pthread_equal(thread, pthread_self());
    struct host_sig_send send;

    if (real == NULL) {
        return ENOSYS;
    }
    if (self && host_sig_send_self(signo, SI_TKILL, NULL) == 0) {
        return 0;
    }
    host_sig_send_begin(&send, self ? gettid() : host_sig_tid_of(thread), signo, SI_TKILL, NULL);
    return host_sig_send_end(&send, real(thread, signo));
}

HOST_EXPORT int
pthread_sigqueue(pthread_t thread, int signo, const union sigval value)
{
    static _Atomic(void *) real_p;
    int (*real)(pthread_t, int, const union sigval) =
            (int (*)(pthread_t, int, const union sigval))host_real(&real_p, "pthread_sigqueue");
    int self = pthread_equal(thread, pthread_self());
    struct host_sig_send send;

    if (real == NULL) {
        return ENOSYS;
    }
    if (self && host_sig_send_self(signo, SI_QUEUE, &value) == 0) {
        return 0;
    }
    host_sig_send_begin(&send, self ? gettid() : host_sig_tid_of(thread), signo, SI_QUEUE, &value);
    return host_sig_send_end(&send, real(thread, signo, value));
}

HOST_EXPORT int
tgkill(pid_t tgid, pid_t tid, int signo)
{
    HOST_REAL_OR_ENOSYS(int, (pid_t, pid_t, int), tgkill)
    struct host_sig_send send;

    if (tgid != getpid()) {
        return real(tgid, tid, signo);
    }
    if (tid == gettid() && host_sig_send_self(signo, SI_TKILL, NULL) == 0) {
        return 0;
    }
    host_sig_send_begin(&send, tid, signo, SI_TKILL, NULL);
    return host_sig_send_end(&send, real(tgid, tid, signo));
}

/*
 * syscall(SYS_tgkill, tgid, tid, signo), syscall(SYS_tkill, tid, signo) and
 * syscall(SYS_rt_tgsigqueueinfo, tgid, tid, signo, info), as fds.c's syscall() hands them over:
 * a send of the library's signal within the process is made as tgkill's interposer makes it
 * (the kernel would merge it into one of the library's instances pending for the target; a Go
 * or Rust runtime and hand-written thread libraries send so). rt_tgsigqueueinfo's siginfo is the
 * caller's: the kernel first checks it with signal 0 (a bad pointer, a forbidden si_code or a
 * thread that is gone fail as bare, and the real call then makes them fail the same way), and
 * the host's handler gets its code and value, and all of it when it runs here for the calling
 * thread. Everything else goes to the real call with its six arguments, its result and errno.
 */
long
host_syscall_send(host_syscall_fn real, long n, const long a[6])
{
    int tk = n == SYS_tkill, signo = (int)(tk ? a[1] : a[2]), code = SI_TKILL;
    pid_t tgid = tk ? getpid() : (pid_t)a[0], tid = (pid_t)(tk ? a[0] : a[1]);
    const union sigval *value = NULL;
    struct host_sig_send send;
    siginfo_t info;
    long rc;

    if (signo == 0 || signo != atomic_load_explicit(&host_sig.signo, memory_order_acquire) ||
        tgid != getpid() || tid <= 0) {
        return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
    }
    if (n == SYS_rt_tgsigqueueinfo) {
        if (real(n, a[0], a[1], 0, a[3], a[4], a[5]) != 0) {
            return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
        }
        memcpy(&info, (const void *)a[3], sizeof(info));
        info.si_signo = signo;
        code = info.si_code;
        value = &info.si_value;
    } else {
        host_sig_info_of(&info, signo, SI_TKILL, NULL);
    }
    if (tid == gettid() && host_sig_send_self_info(signo, &info) == 0) {
        return 0;
    }
    host_sig_send_begin(&send, tid, signo, code, value);
    rc = real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
    (void)host_sig_send_end(&send, rc == 0 ? 0 : -1);
    return rc;
}
