/* SPDX-License-Identifier: MIT */
/*
 * host/dl.c - the loader's unloads.
 *
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
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#include "host/internal.h"

HOST_ANCHOR(dl);

typedef int (*host_dlclose_fn)(void *);
static _Atomic(void *) host_real_dlclose;

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
    r = real(handle);
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
 * thread that may be it: another thread's value is never its own tid. */
static pthread_mutex_t host_loader_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic long host_loader_owner;
static unsigned host_loader_depth; /* the owner's */
static pthread_once_t host_loader_atfork_once = PTHREAD_ONCE_INIT;

static void
host_loader_lock_nested(void)
{
    long self = host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);

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

static void
host_loader_after_fork_child(void)
{
    /* the prepare handler's hold (and any the forking thread had), under the child's tid */
    atomic_store_explicit(&host_loader_owner, host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0),
                          memory_order_relaxed);
    host_loader_unlock_nested();
}

static void
host_loader_atfork_once_fn(void)
{
    pthread_atfork(host_loader_lock_nested, host_loader_unlock_nested,
                   host_loader_after_fork_child);
}

void
host_loader_atfork_register(void)
{
    pthread_once(&host_loader_atfork_once, host_loader_atfork_once_fn);
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

int
host_loader_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg)
{
    int r;

    host_loader_enter();
    r = dl_iterate_phdr(cb, arg);
    host_loader_leave();
    return r;
}

void *
host_loader_open(const char *file, int flags)
{
    void *h;

    host_loader_enter();
    h = dlopen(file, flags);
    host_loader_leave();
    return h;
}

int
host_loader_close(void *handle)
{
    host_dlclose_fn real = (host_dlclose_fn)host_real(&host_real_dlclose, "dlclose");
    int r = -1;

    host_loader_enter();
    if (real != NULL) {
        r = real(handle); /* the library's own: no rescan (the agent's hook is for the host's) */
    } else {
        errno = ENOSYS;
    }
    host_loader_leave();
    return r;
}
