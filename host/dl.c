/* SPDX-License-Identifier: MIT */
/*
 * host/dl.c - the loader's unloads, and the host's loader calls a fork may come from.
 *
 *   dl_iterate_phdr  interposed to know that the calling thread is inside its walk, with glibc's
 *                    list lock held, while its callback runs (host_loader_fork_stuck, below).
 *                    Its result and errno are libc's; the callback is the host's, called by libc.
 *   dlclose          interposed so that the agent knows the moment a library is unmapped: as
 *                    the call returns, the agent's dlclosed hook rescans the module list, and a
 *                    library the call unloaded is gone from then on. The hook runs before the
 *                    call too, so that a library loaded since the last scan (every 100 ms) is
 *                    known before it goes: one loaded, run and unloaded within 15 ms was never
 *                    in the list, and its samples took the names of the next one at its address.
 * Another library the host loads at its address later (which the loader can do only after this
 *                    call's unmapping) is then told apart from it by time: a sample taken
 *                    before the return is named by the unloaded library, one after by the new
 *                    one (agent/modules.c, ag_symbolize_at). Without it the agent knew of the
 *                    unload only at its next scan (up to 100 ms later), and the new library's
 *                    samples of that time took the old one's names.
 *
 * What the host may rely on: the call's result and errno are libc's; the rescan runs after it,
 * outside the loader's lock, and is skipped when the agent's module lock is held (the agent's
 * own dlclose calls, which run under it). Without the agent's hooks the call passes through.
 *
 * Held by: agent-module-reuse (a library unloaded and another loaded at its address, both named
 * by name with their shares), host-contract-stress (the call, with and without sessions).
 *
 * The library's own calls that take the loader's list lock (host_loader_iterate, _open, _close)
 * are kept out of the host's forks. dl_iterate_phdr holds that lock (glibc's dl_load_write_lock)
 * for its whole walk, and dlopen and dlclose take it as they add or remove an object; glibc's
 * fork resets the loader's other locks in the child but not this one (2.36 here: its fork
 * re-initialises dl_load_lock and dl_load_tls_lock only, and later releases the same). A fork
 * made while another thread holds it gives the child a lock held by a thread that is not there,
 * and the child's first dl_iterate_phdr, dlopen or dlclose waits forever. The host's own threads
 * can do that to it bare; the library's must not: a double-forking daemon's middle process
 * (record-daemon, ASan build) hung in its agent's start, in dl_iterate_phdr under the agent's
 * module lock, and then in its own next fork, whose prepare handler waits for that module lock.
 * So each such call runs under host_loader_lock, which a fork's prepare handler takes: the fork
 * waits for the call to return, and no call starts until the fork is done. The lock nests on
 * one thread, since a dlopen runs the new objects' constructors, whose calls come back through the
 * interposers. Its handlers are registered before the agent's (host_loader_atfork_register), so
 * that its prepare runs after theirs: the agent's manager takes its module lock first, then this
 * one, and so does the forking thread. Held by: test-agent-loader-fork, check-loader-calls.
 *
 * A fork from inside the host's own loader call is the exception: a host whose dl_iterate_phdr
 * callback forks holds glibc's list lock across the fork's prepare handlers, and one whose
 * destructor forks (in its dlclose) holds dl_load_lock. A library call waiting for that lock
 * under host_loader_lock (the manager's refresh of the module list, every scan, under the module
 * lock too) waits for the forking thread, which waited for it in the prepare handlers: the host
 * hung for good, where bare it runs. So the host's dl_iterate_phdr and dlclose count themselves
 * on their thread, each library call records its kind while it holds the lock (iterate, open,
 * close), and the prepare handler leaves the lock to a holder that cannot let go before the
 * forking thread's call returns (host_loader_fork_stuck): any holder while the forking thread
 * walks (it holds the list lock: no library call is inside glibc's walk or list change, so the
 * lock's purpose is met), a dlopen or dlclose not returned while it unloads (blocked on
 * dl_load_lock, before the list lock); a walk it waits for (it ends). The child then makes the
 * lock anew; the parent's handler releases only what the prepare took. The agent's module lock
 * follows the same rule for a holder inside such a call (agent/agent.c). For the same reason a
 * library call made on a thread inside the host's walk (from its callback) does not take the
 * lock (host_loader_call_begin): it waited for a holder that waits for that thread, with no
 * fork at all. A fork from a constructor of the host's dlopen or dlmopen, which are not
 * interposed (libc reads the caller's object from the return address, for its search path and
 * namespace: a wrapper would change which library a host's dlopen finds), holds dl_load_lock as
 * well, and no counter tells: a library dlopen or dlclose the prepare handler waits for is taken
 * for stuck after a bound (the same call not returned 1 s, by CLOCK_MONOTONIC, after the first
 * look), and the child then takes its list lock for lost, since that holder may have been anywhere
 * in its call. The fork waited forever before. A walk holder is not bounded: it needs only the
 * list lock, which such a fork does not hold.
 *
 * A plain fork while another thread of the host's is in its dl_iterate_phdr gives the child that
 * thread's hold of the list lock, for good (bare too: the child's own walk, dlopen or dlclose
 * waits forever; it may exit, exec or compute). So the walks are counted for the whole process
 * too (host_dl_walks, from before libc's call to after it), and the child reads the count as the
 * fork left it: above 0, its list lock is lost (host_loader_list_lost), and it starts no agent
 * (shim.c), whose start walked the list and hung, holding the agent's life lock, which the
 * child's exit() then waited for. An exec'd image is profiled as usual. The count is read in the
 * child, not in the prepare handlers: a walk may start between those and the fork.
 *
 * Not covered: a callback that leaves dl_iterate_phdr by longjmp leaves its thread and the
 * process counted as walking (no child forked after it is profiled; glibc's list lock stays held
 * by that thread too, bare). A host's dlopen or dlclose on another thread
 * changes the list under its lock for a moment too; a fork in that moment loses the child's list
 * lock uncounted. Library calls other than these that wait for dl_load_lock (dlsym) under the
 * module lock or the loader lock are not bounded. Held by: test-agent-loader-fork (a fork in a
 * walk's callback while the module list's refresh waits; one in a destructor, in the host's
 * dlclose, and one in a constructor, in the host's dlopen, while a library thread's dlopen waits
 * under the module lock), host-contract-dlfork-walk (the walk's fork under record),
 * -walkother and -walkexec (a plain fork beside another thread's walk), -ctor and -ctorburn (a
 * constructor's fork while the agent's dlopen of libelf waits for it).
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>

#include "host/internal.h"

HOST_ANCHOR(dl);

typedef int (*host_dlclose_fn)(void *);
static _Atomic(void *) host_real_dlclose;

/* The host's own loader calls on this thread that hold one of glibc's loader locks while the
 * host's code runs: its dl_iterate_phdr (the list lock, dl_load_write_lock, around the
 * callback) and its dlclose (dl_load_lock, around the destructors). A fork's prepare handlers
 * run on the forking thread and read them (host_loader_fork_stuck). The library's own calls
 * (host_loader_*) call libc's directly and do not count. */
#define HOST_DL_TLS __attribute__((tls_model("initial-exec")))
static _Thread_local unsigned host_dl_walking HOST_DL_TLS, host_dl_unloading HOST_DL_TLS;
/* The host's walks under way on all threads: counted before libc's call takes the list lock and
 * until after it let go, so that a fork()ed child finds it above 0 whenever a thread held that
 * lock at the fork (and sometimes when none did yet: the child is then let alone for nothing).
 * host_loader_list_lost: this process was forked while it was above 0 (or from one that was):
 * its list lock is held for good by a thread it does not have. */
static _Atomic unsigned host_dl_walks;
static int host_loader_list_lost_here;

typedef int (*host_dl_iterate_fn)(int (*)(struct dl_phdr_info *, size_t, void *), void *);
static _Atomic(void *) host_real_dl_iterate_phdr;

/* Not instrumented, and calling nothing that is: a sanitizer's runtime walks the loaded objects
 * from its own initialisation, through the first definition (this one, in a library preloaded
 * after it or a program that links host/ in), before its shadow memory exists (SEGV at the entry
 * of an instrumented host_real: ASan build, test-agent-loader-fork, host-contract-dlfork-walk).
 * Its counter is initial-exec TLS for the same reason: the runtime intercepts __tls_get_addr,
 * whose real one it has not looked up yet (a call to address 0 there). */
#define HOST_DL_PLAIN __attribute__((no_sanitize("address", "thread", "undefined")))

static HOST_DL_PLAIN host_dl_iterate_fn
host_dl_real_iterate(void)
{
    void *p = atomic_load_explicit(&host_real_dl_iterate_phdr, memory_order_acquire);

    if (p == NULL) {
        p = dlsym(RTLD_NEXT, "dl_iterate_phdr");
        atomic_store_explicit(&host_real_dl_iterate_phdr, p, memory_order_release);
    }
    return (host_dl_iterate_fn)p;
}

HOST_EXPORT HOST_DL_PLAIN int
dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg)
{
    host_dl_iterate_fn real = host_dl_real_iterate();
    int r;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    host_dl_walking++;
    atomic_fetch_add_explicit(&host_dl_walks, 1, memory_order_seq_cst);
    r = real(cb, arg);
    atomic_fetch_sub_explicit(&host_dl_walks, 1, memory_order_seq_cst);
    host_dl_walking--;
    return r;
}

HOST_EXPORT int
dlclose(void *handle)
{
    host_dlclose_fn real = (host_dlclose_fn)host_real(&host_real_dlclose, "dlclose");
    const struct host_agent_hooks *h = host_agent();
    int r, saved;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (h != NULL && h->dlclosed != NULL) {
        /* first, so that a library loaded since the last scan is known before it goes */
        saved = errno;
        h->dlclosed();
        errno = saved;
    }
    host_dl_unloading++;
    r = real(handle);
    host_dl_unloading--;
    if (h != NULL && h->dlclosed != NULL) {
        saved = errno;
        h->dlclosed();
        errno = saved;
    }
    return r;
}

/* A plain mutex with its own nesting (owner and depth): a recursive mutex's owner is a tid, and
 * the forking thread's tid is a new one in the child, whose unlock it would refuse; this one the
 * child unlocks (ThreadSanitizer follows a lock and unlock by one thread, not a re-initialised
 * lock, and took the static recursive initialiser for a plain lock). The owner is read by the
 * thread that may be it: another thread's value is never its own tid. host_loader_kind is the
 * owner's innermost call whose libc call has not returned (NONE between them); the owner writes
 * it, a forking thread reads it. */
enum { HOST_LOADER_NONE, HOST_LOADER_ITERATE, HOST_LOADER_OPEN, HOST_LOADER_CLOSE };
static pthread_mutex_t host_loader_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic long host_loader_owner;
static _Atomic int host_loader_kind;
static unsigned host_loader_depth; /* the owner's */
static pthread_once_t host_loader_atfork_once = PTHREAD_ONCE_INIT;
/* The forking thread's: whether its prepare handler took the lock (the parent's and the child's
 * handlers release only what it took) */
static _Thread_local int host_loader_fork_took;
/* A library dlopen or dlclose that a fork's prepare handlers wait for may wait in turn for
 * dl_load_lock held by the forking thread in a constructor of the host's dlopen (not interposed:
 * host_loader_fork_stuck cannot tell). host_loader_calls numbers the library's calls as they
 * begin; the forking thread notes when it first looked at one that has not returned
 * (host_loader_fork_since, of call host_loader_fork_call), and once HOST_LOADER_FORK_STUCK_NS
 * have passed since by CLOCK_MONOTONIC, takes it for stuck (host_loader_fork_timed). (A count of
 * 5000 looks 200 us apart was the bound first: on a loaded machine each pause sleeps milliseconds,
 * so it stretched to seconds, past the tests' own 20 s bound on the fork.) The holder may
 * then have been anywhere in its call, the list lock's change included, so the child takes its
 * list lock for lost. The handlers after the fork start the count anew. */
#define HOST_LOADER_FORK_STUCK_NS 1000000000ull
static _Atomic unsigned long host_loader_calls;
static _Thread_local unsigned long host_loader_fork_call;
static _Thread_local unsigned long long host_loader_fork_since; /* ns; 0: not looking */
static _Thread_local int host_loader_fork_timed;

static long
host_loader_self(void)
{
    return host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);
}

static void
host_loader_lock_nested(void)
{
    long self = host_loader_self();

    if (atomic_load_explicit(&host_loader_owner, memory_order_relaxed) == self) {
        host_loader_depth++;
        return;
    }
    pthread_mutex_lock(&host_loader_lock);
    atomic_store_explicit(&host_loader_owner, self, memory_order_relaxed);
    host_loader_depth = 1;
}

static void
host_loader_unlock_nested(void)
{
    if (--host_loader_depth == 0) {
        atomic_store_explicit(&host_loader_owner, 0, memory_order_relaxed);
        pthread_mutex_unlock(&host_loader_lock);
    }
}

int
host_loader_list_lost(void)
{
    return host_loader_list_lost_here ||
           atomic_load_explicit(&host_dl_walks, memory_order_seq_cst) != 0;
}

int
host_loader_fork_stuck(void)
{
    unsigned long long now;
    unsigned long call;
    int kind;

    if (atomic_load_explicit(&host_loader_owner, memory_order_relaxed) == 0) {
        return 0; /* free, or its holder is only taking it: it gets going */
    }
    if (host_dl_walking > 0) {
        /* This thread holds the list lock: no other is inside a walk, a dlopen's or a dlclose's
         * change of the list, so the holder waits for it or is past it. */
        return 1;
    }
    kind = atomic_load_explicit(&host_loader_kind, memory_order_relaxed);
    if (kind != HOST_LOADER_OPEN && kind != HOST_LOADER_CLOSE) {
        host_loader_fork_since = 0;
        return 0; /* a walk needs only the list lock, which this thread does not hold: it ends */
    }
    /* This thread holds dl_load_lock (a destructor): a dlopen or dlclose that has not returned
     * waits for it before it takes the list lock. */
    if (host_dl_unloading > 0) {
        return 1;
    }
    /* Or it holds it in a constructor of the host's dlopen, which no counter tells: bounded */
    call = atomic_load_explicit(&host_loader_calls, memory_order_relaxed);
    now = host_now_ns();
    if (host_loader_fork_since == 0 || call != host_loader_fork_call) {
        host_loader_fork_call = call;
        host_loader_fork_since = now != 0 ? now : 1;
        return 0;
    }
    if (now - host_loader_fork_since < HOST_LOADER_FORK_STUCK_NS) {
        return 0;
    }
    host_loader_fork_timed = 1;
    return 1;
}

/* The prepare handler: takes the lock, unless its holder cannot let go before this thread's own
 * loader call returns (host_loader_fork_stuck); then the fork goes ahead without it, and the
 * child makes it anew. Polls: the holder's state may change while it waits. */
void
host_loader_fork_pause(void)
{
    struct timespec pause = { 0, 200000 };

    host_raw_syscall(SYS_nanosleep, (long)&pause, 0, 0, 0, 0, 0);
}

static void
host_loader_before_fork(void)
{
    long self = host_loader_self();

    host_loader_fork_took = 1;
    if (atomic_load_explicit(&host_loader_owner, memory_order_relaxed) == self) {
        host_loader_depth++;
        return;
    }
    while (pthread_mutex_trylock(&host_loader_lock) != 0) {
        if (host_loader_fork_stuck()) {
            host_loader_fork_took = 0;
            return;
        }
        host_loader_fork_pause();
    }
    atomic_store_explicit(&host_loader_owner, self, memory_order_relaxed);
    host_loader_depth = 1;
}

static void
host_loader_after_fork_parent(void)
{
    host_loader_fork_since = 0;
    host_loader_fork_timed = 0;
    if (host_loader_fork_took) {
        host_loader_unlock_nested();
    }
}

static void
host_loader_after_fork_child(void)
{
    /* The walks counted are the parent's threads': any but this thread's own is gone with the
     * list lock it held, and this thread's, which goes on, cannot let go of it under its new tid
     * (glibc's recursive lock knows the old one). */
    if (atomic_load_explicit(&host_dl_walks, memory_order_seq_cst) != 0 || host_loader_fork_timed) {
        host_loader_list_lost_here = 1;
    }
    atomic_store_explicit(&host_dl_walks, host_dl_walking, memory_order_seq_cst);
    host_loader_fork_since = 0;
    host_loader_fork_timed = 0;
    if (!host_loader_fork_took) {
        /* held by a thread the child does not have, which had not reached libc's call or was
         * past it: the child's is free */
        pthread_mutex_init(&host_loader_lock, NULL);
        atomic_store_explicit(&host_loader_owner, 0, memory_order_relaxed);
        atomic_store_explicit(&host_loader_kind, HOST_LOADER_NONE, memory_order_relaxed);
        host_loader_depth = 0;
        return;
    }
    /* the prepare handler's hold (and any the forking thread had), under the child's tid */
    atomic_store_explicit(&host_loader_owner, host_loader_self(), memory_order_relaxed);
    host_loader_unlock_nested();
}

static void
host_loader_atfork_once_fn(void)
{
    pthread_atfork(host_loader_before_fork, host_loader_after_fork_parent,
                   host_loader_after_fork_child);
}

void
host_loader_atfork_register(void)
{
    pthread_once(&host_loader_atfork_once, host_loader_atfork_once_fn);
}

void
host_loader_atfork_register_again(void)
{
    host_loader_atfork_once_fn();
}

void
host_loader_enter(void)
{
    host_loader_atfork_register();
    host_loader_lock_nested();
}

void
host_loader_leave(void)
{
    host_loader_unlock_nested();
}

/* host_loader_enter for a call of kind: returns the kind it replaces (the enclosing call's, when
 * it nests), for host_loader_call_end; or -1 without the lock, on a thread inside the host's
 * dl_iterate_phdr (a library call made in its callback: fds.c's lookup, the agent's rescan in a
 * dlclose there): it holds glibc's list lock, so no other library call is inside it and the
 * lock's purpose is met, and its holder may be waiting for that list lock (the manager's
 * refresh): the call waited for it for good, where bare the walk returns. */
static int
host_loader_call_begin(int kind)
{
    if (host_dl_walking > 0 &&
        atomic_load_explicit(&host_loader_owner, memory_order_relaxed) != host_loader_self()) {
        return -1;
    }
    host_loader_enter();
    atomic_fetch_add_explicit(&host_loader_calls, 1, memory_order_relaxed);
    return atomic_exchange_explicit(&host_loader_kind, kind, memory_order_relaxed);
}

static void
host_loader_call_end(int outer)
{
    if (outer < 0) {
        return;
    }
    atomic_store_explicit(&host_loader_kind, outer, memory_order_relaxed);
    host_loader_leave();
}

int
host_loader_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg)
{
    host_dl_iterate_fn real = host_dl_real_iterate();
    int r = 0, outer;

    outer = host_loader_call_begin(HOST_LOADER_ITERATE);
    if (real != NULL) {
        r = real(cb, arg); /* the library's own: not counted as the host's walk */
    }
    host_loader_call_end(outer);
    return r;
}

void *
host_loader_open(const char *file, int flags)
{
    void *h;
    int outer;

    outer = host_loader_call_begin(HOST_LOADER_OPEN);
    h = dlopen(file, flags);
    host_loader_call_end(outer);
    return h;
}

int
host_loader_close(void *handle)
{
    host_dlclose_fn real = (host_dlclose_fn)host_real(&host_real_dlclose, "dlclose");
    int r = -1, outer;

    outer = host_loader_call_begin(HOST_LOADER_CLOSE);
    if (real != NULL) {
        r = real(handle); /* the library's own: no rescan (the agent's hook is for the host's) */
    } else {
        errno = ENOSYS;
    }
    host_loader_call_end(outer);
    return r;
}
