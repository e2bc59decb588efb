/* SPDX-License-Identifier: MIT */
/*
 * host/threads.c - thread creation.
 *
 *   pthread_create   interposed so that a new thread registers itself with the agent (its
 *                    stack bounds, its CPU timer, its start routine as the root of its stacks)
 *                    before its start routine runs: its first instructions can be sampled, and
 *                    CPU it burns before its first sample has a stack.
 *
 * What the host may rely on: its start routine runs on the new thread with its argument, and
 * its return value is the thread's; the result is libc's (EAGAIN when there is no libc
 * pthread_create to call). The wrapper allocates a small argument; when that fails the thread
 * is created unwrapped (the agent's /proc scan still finds it). Without the agent's hooks the
 * call goes straight to libc.
 *
 * The library's own threads (host_thread_spawn's, and those its code creates through
 * pthread_create: libuv's, also when a sanitizer runtime's interceptor ahead of this library
 * passes the call on: a look up the stack, host_thread_library_caller) are counted from before
 * their clone and register their tids first thing (host_thread_library_live): host/ns.c tells the
 * host's threads from them, host/procstat.c leaves them out of /proc/self/stat's count.
 *
 * Held by: test-agent-sampling (final_sample_of_an_unsampled_thread_has_its_start_routine: the
 * start routine is the root of a thread's first stack; short_lived_threads_start_and_stop:
 * thread churn while sampling), agent-torture (thread churn in a preloaded host whose output
 * must not change).
 */
#include <errno.h>
#include <execinfo.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>

#include "common/sanitizer.h"
#include "host/internal.h"

HOST_ANCHOR(threads);

static _Atomic(void *) host_threads_real_create;

host_pthread_create_fn
host_real_pthread_create(void)
{
    return (host_pthread_create_fn)host_real(&host_threads_real_create, "pthread_create");
}

/* The library's threads by tid (host_thread_library_add), for ns.c's count of the host's threads;
 * at most HOST_LIBRARY_TIDS live at once (the IPC loop, the manager, the wall sampler, the runtime
 * stream's readers: a handful). host_library_starting counts those created and not yet
 * registered: the creator counts the thread in before the clone, the thread registers itself
 * first thing and counts itself out (host_trampoline), so that the count never misses a library
 * thread that is in the kernel's thread group. */
#define HOST_LIBRARY_TIDS 32
static _Atomic long host_library_tids[HOST_LIBRARY_TIDS];
static _Atomic int host_library_starting;

/* 1 when tid is a thread of this process now (a fork()ed child's parent's threads are not). */
static int
host_thread_alive(long tid)
{
    return tid > 0 && host_raw_syscall(SYS_tgkill, host_raw_syscall(SYS_getpid, 0, 0, 0, 0, 0, 0),
                                       tid, 0, 0, 0, 0) == 0;
}

void
host_thread_library_add(long tid)
{
    int err = errno;

    for (int i = 0; i < HOST_LIBRARY_TIDS; i++) {
        long cur = atomic_load_explicit(&host_library_tids[i], memory_order_acquire);

        if (cur == tid || ((cur == 0 || !host_thread_alive(cur)) &&
                           atomic_compare_exchange_strong(&host_library_tids[i], &cur, tid))) {
            break;
        }
    }
    errno = err;
}

int
host_thread_library_live(void)
{
    int n = atomic_load_explicit(&host_library_starting, memory_order_acquire), err = errno;

    for (int i = 0; i < HOST_LIBRARY_TIDS; i++) {
        n += host_thread_alive(atomic_load_explicit(&host_library_tids[i], memory_order_acquire));
    }
    errno = err;
    return n;
}

/*
 * A library thread is in the kernel's thread group, and so in /proc/self/task, from its clone on,
 * and leaves the host's listings of that directory only once it registered (host_trampoline). A
 * fork()ed child's start thread (shim/shim.c) registered only after its 5 ms pause: Python's and
 * Perl's fork()ed children under record listed 2 tasks where bare lists 1. A listing made while
 * such a thread is starting waits for it, 50 us at a time, at most 50 ms (the host's bound in the
 * fd gate): the common case is one load of host_library_starting.
 */
#define HOST_STARTED_WAIT_NS    50000L
#define HOST_STARTED_WAIT_LOOKS 1000

void
host_thread_library_started_wait(void)
{
    struct timespec pause = { 0, HOST_STARTED_WAIT_NS };
    int i, err;

    if (atomic_load_explicit(&host_library_starting, memory_order_acquire) <= 0) {
        return;
    }
    err = errno;
    for (i = 0; i < HOST_STARTED_WAIT_LOOKS &&
                atomic_load_explicit(&host_library_starting, memory_order_acquire) > 0;
         i++) {
        host_raw_syscall(SYS_nanosleep, (long)&pause, 0, 0, 0, 0, 0);
    }
    errno = err;
}

struct host_start_arg {
    void *(*fn)(void *);
    void *arg;
    const struct host_agent_hooks *hooks; /* NULL: no thread_started */
    uint64_t stack_size;                  /* for thread_started (host_thread_stack_size) */
    int library;                          /* a thread of the library's: registered first */
};

/*
 * The start arguments of threads being created, in a fixed pool: a slot is taken by its creator
 * and given back by the new thread once it has copied it (or by the creator when the creation
 * fails). Not malloc: a host thread's first malloc or free makes glibc set up its tcache and an
 * arena, which past the first arenas reads /sys/devices/system/cpu/online at the lowest free
 * number (glibc's own open, no interposer sees it). A thread of the host's that never allocates
 * does not do that bare; freed on it, the argument did, and that transient fd showed in the
 * host's listings of /proc/self/fd (host-contract-fds-fdchurn, preloaded: one listing in 30000 a
 * run held fd 4 that bare never has, 11 runs of 11 with the listing's message). Past the pool
 * (HOST_START_SLOTS creations not yet started), malloc as before.
 */
#define HOST_START_SLOTS 64
static struct host_start_slot {
    _Atomic int busy;
    struct host_start_arg a;
} host_start_slots[HOST_START_SLOTS];

/* A start argument holding a: a free slot of the pool, else malloc'd; NULL when neither. */
static struct host_start_arg *
host_start_arg_new(struct host_start_arg a)
{
    struct host_start_arg *p;

    for (int i = 0; i < HOST_START_SLOTS; i++) {
        int free_slot = 0;

        if (atomic_load_explicit(&host_start_slots[i].busy, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong_explicit(&host_start_slots[i].busy, &free_slot, 1,
                                                    memory_order_acquire, memory_order_relaxed)) {
            host_start_slots[i].a = a;
            return &host_start_slots[i].a;
        }
    }
    p = malloc(sizeof(*p));
    if (p != NULL) {
        *p = a;
    }
    return p;
}

/* Gives back what host_start_arg_new() returned. */
static void
host_start_arg_free(struct host_start_arg *p)
{
    uintptr_t at = (uintptr_t)p, lo = (uintptr_t)&host_start_slots[0],
              hi = (uintptr_t)&host_start_slots[HOST_START_SLOTS];

    if (at >= lo && at < hi) {
        struct host_start_slot *slot =
                &host_start_slots[(at - lo) / sizeof(struct host_start_slot)];

        atomic_store_explicit(&slot->busy, 0, memory_order_release);
    } else {
        free(p);
    }
}

void
host_thread_forked_child(void)
{
    atomic_store(&host_library_starting, 0);     /* the parent's starting threads are not here */
    for (int i = 0; i < HOST_START_SLOTS; i++) { /* nor the threads that took slots */
        atomic_store_explicit(&host_start_slots[i].busy, 0, memory_order_relaxed);
    }
}

/*
 * Under ASan every thread clears its stack's shadow first, before any code of the library's runs on
 * it: glibc may hand it a stack that held another thread's instrumented frames (one joined before,
 * or in a fork()ed child any parent thread's: glibc reclaims them there), and ASan's redzones of
 * those dead frames lie under the new thread's frames: an instrumented frame marks only its own
 * redzones and takes the shadow of its locals as clear, an uninstrumented one (libc's, the agent's
 * unwinder's, no_sanitize_address) marks nothing, and instrumented code that reads or writes
 * either's locals over a stale redzone is reported. A thread started with the real pthread_create
 * (host_thread_spawn's) bypasses ASan's interceptor, which clears a stack only for threads it
 * starts; one the host or libuv starts through that interceptor gets here, in the interceptor's
 * REAL pthread_create, before the interceptor's own start routine clears it: its thread_started
 * hook's walk of the thread's root frames (the agent's unwinder's rule, written by instrumented
 * code into an uninstrumented frame) was reported as a stack-buffer-overflow on thread T-1, then
 * ASan's CHECK failed describing it (the IPC loop thread, libuv's, of cli-record-daemon's daemon,
 * a fork()ed child, in build-asan: 17 of 50 wall runs before, none of 50 after).
 */
static void *
host_trampoline(void *p)
{
    struct host_start_arg a;

    pp_asan_clear_own_stack(); /* a no-op but under ASan */
    a = *(struct host_start_arg *)p;
    host_start_arg_free(p);
    if (a.library) {
        /* Listed before it counts itself out: for the listings of /proc/self/task too
         * (host_thread_library_started_wait), not only for the thread counts. Not marked: its
         * calls are the library's once its code says so (host_thread_mark_library); marked
         * here, a unit test's host threads made the library's calls (test-host-unshare). */
        host_thread_list_library();
        host_thread_library_add(host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0));
        atomic_fetch_sub(&host_library_starting, 1);
    }
    if (a.hooks != NULL) {
        a.hooks->thread_started(a.fn, HOST_FA, a.stack_size);
    }
    return a.fn(a.arg);
}

/* real's thread through host_trampoline with a (host_start_arg_new's; given back here when the
 * creation fails),
 * counted in as starting when it is the library's. Returns real's result. */
static int
host_thread_create(host_pthread_create_fn real, pthread_t *th, const pthread_attr_t *attr,
                   struct host_start_arg *a)
{
    int rc;

    if (a->library) {
        atomic_fetch_add(&host_library_starting, 1);
    }
    rc = real(th, attr, host_trampoline, a);
    if (rc != 0) {
        if (a->library) {
            atomic_fetch_sub(&host_library_starting, 1);
        }
        host_start_arg_free(a);
    }
    return rc;
}

/*
 * A library thread, started with the real pthread_create, past a sanitizer's interceptor. Under
 * ASan it clears its stack's shadow first (host_trampoline): an instrumented read of data that
 * dl_iterate_phdr's uninstrumented frame put over a dead frame's redzones (its dl_phdr_info, read
 * by the agent's callback on a forked child's manager thread) was reported before (output-file in
 * build-asan, about one run of the fork case in 30).
 */
int
host_thread_spawn(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    host_pthread_create_fn real = host_real_pthread_create();
    struct host_start_arg *a;
    sigset_t all, old;
    int rc;

    if (real == NULL) {
        return -ENOSYS;
    }
    a = host_start_arg_new((struct host_start_arg){ fn, arg, NULL, 0, 1 });
    if (a == NULL) {
        return -ENOMEM;
    }
    sigfillset(&all);
    host_sigmask_raw(SIG_SETMASK, &all, &old);
    rc = host_thread_create(real, th, attr, a);
    host_sigmask_raw(SIG_SETMASK, &old, NULL);
    return -rc;
}

/* 1 when the pthread_create whose return address is ra is the library's: its code's, or, through
 * a sanitizer runtime loaded ahead (ASan's interceptor calls this one for libuv's
 * uv_thread_create), one whose caller a few frames up is the library's code. Without that look
 * the IPC loop thread counted only from its own registration, and a host that read
 * /proc/self/stat at once under the ASan build counted it (host/procstat.c). */
static int
host_thread_library_caller(const void *ra)
{
    void *frames[10];
    int n;

    if (host_fds_is_library_call(ra)) {
        return 1;
    }
    if (!host_fds_is_ahead_call(ra)) {
        return 0;
    }
    n = backtrace(frames, (int)(sizeof(frames) / sizeof(frames[0])));
    /* the runtime's backtrace interceptor, this library's frames (this function and
     * pthread_create), the runtime's pthread_create interceptor, then the caller */
    for (int i = 0, part = 0; i < n; i++) {
        int ours = host_fds_is_library_call(frames[i]), ahead = host_fds_is_ahead_call(frames[i]);

        if (part == 0 && ours) {
            part = 1;
        } else if (part == 1 && ahead) {
            part = 2;
        } else if (part == 2 && !ahead) {
            return ours;
        }
    }
    return 0;
}

/* The size of the stack a thread created with attr (NULL: the defaults) gets, as libc sizes it;
 * 0 when not known. Allocates nothing (the defaults carry no CPU set unless the host set one). */
static uint64_t
host_thread_stack_size(const pthread_attr_t *attr)
{
    size_t size = 0;
#ifdef __GLIBC__
    pthread_attr_t def;

    if (attr == NULL) {
        if (pthread_getattr_default_np(&def) != 0) {
            return 0;
        }
        if (pthread_attr_getstacksize(&def, &size) != 0) {
            size = 0;
        }
        pthread_attr_destroy(&def);
    } else if (pthread_attr_getstacksize(attr, &size) != 0) {
        size = 0;
    }
#else
    (void)attr;
#endif
    return size;
}

/* Set at the host's first pthread_create (before the real call: glibc installs its SIGSETXID
 * handler there, whether the creation succeeds or not), for procstat.c's SigCgt: a host that made
 * no thread shows none bare. Inherited by a fork()ed child, as the handler is. */
static _Atomic int host_threads_host_made;

int
host_thread_host_made(void)
{
    return atomic_load_explicit(&host_threads_host_made, memory_order_relaxed);
}

/* A thread the library's code creates (libuv's uv_thread_create: the IPC loop, the runtime stream's
 * readers) is the library's from its first instruction (host_library_starting). */
HOST_EXPORT int
pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    host_pthread_create_fn real = host_real_pthread_create();
    const struct host_agent_hooks *hooks = host_agent();
    int library = host_thread_library_caller(__builtin_return_address(0));
    struct host_start_arg *a;

    if (real == NULL) {
        return EAGAIN;
    }
    if (!library) {
        atomic_store_explicit(&host_threads_host_made, 1, memory_order_relaxed);
    }
    a = hooks != NULL || library
                ? host_start_arg_new((struct host_start_arg){
                          fn, arg, hooks, hooks != NULL ? host_thread_stack_size(attr) : 0,
                          library })
                : NULL;
    if (a == NULL) {
        return real(th, attr, fn, arg); /* unregistered: the /proc scan still finds it */
    }
    return host_thread_create(real, th, attr, a);
}
