/* SPDX-License-Identifier: MIT */
/*
 * host/host.c - the agent's hook table and the real-function cache of host/host.h; the server's
 * table is in server.c, in an archive of its own (host/CMakeLists.txt says why). No interposer
 * lives here. Context: any thread but a signal handler.
 */
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "host/internal.h"

_Atomic(const struct host_agent_hooks *) host_agent_hooks_installed;

/*
 * The anchors of the files the agent's hooks serve (internal.h says why): a program that installs
 * them links threads.c, blocking.c and signals.c; server.c does the same for the server's.
 */
static const char *
host_agent_anchors(void)
{
    static const char *const volatile anchors[] = { &host_anchor_threads, &host_anchor_blocking,
                                                    &host_anchor_signals, &host_anchor_fds,
                                                    &host_anchor_eintr,   &host_anchor_writes,
                                                    &host_anchor_dl,      &host_anchor_uring };

    return anchors[0];
}

void
host_set_agent_hooks(const struct host_agent_hooks *hooks)
{
    (void)host_agent_anchors();
    if (hooks != NULL) {
        host_writes_resolve();
    }
    atomic_store_explicit(&host_agent_hooks_installed, hooks, memory_order_release);
}

void *
host_real(_Atomic(void *) *slot, const char *name)
{
    void *p = atomic_load_explicit(slot, memory_order_acquire);

    if (p == NULL) {
        p = dlsym(RTLD_NEXT, name);
        atomic_store_explicit(slot, p, memory_order_release);
    }
    return p;
}

int
host_read_user(void *out, const void *addr, size_t len)
{
    static _Atomic(void *) real_syscall;
    long (*raw)(long, ...) = (long (*)(long, ...))host_real(&real_syscall, "syscall");
    struct iovec local = { out, len }, remote = { (void *)(uintptr_t)addr, len };
    int saved = errno, rc;
    long n;

    if (raw == NULL) {
        return -ENOSYS;
    }
    n = raw(SYS_process_vm_readv, (long)getpid(), (long)&local, 1L, (long)&remote, 1L, 0L);
    rc = n == (long)len ? 0 : n >= 0 || errno == EFAULT ? -EFAULT : -errno;
    errno = saved;
    return rc;
}
