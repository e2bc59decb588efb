/* SPDX-License-Identifier: MIT */
/*
 * host/host.c - the agent's hook table and the real-function cache of host/host.h; the server's
 * table is in server.c, in an archive of its own (host/CMakeLists.txt says why). No interposer
 * lives here. Context: any thread but a signal handler.
 */
#include <dlfcn.h>

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
