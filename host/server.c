/* SPDX-License-Identifier: MIT */
/*
 * host/server.c - the server's hook table of host/host.h (struct host_server_hooks), which
 * exit.c, exec.c, creds.c, ns.c, sockets.c and seccomp.c call. These seven files are the archive
 * pp_host_server, linked into libpipeprof.so only (host/CMakeLists.txt says why); installing the
 * table links the six interposer files (host/internal.h says why). Context: any thread.
 */
#include "host/internal.h"

_Atomic(const struct host_server_hooks *) host_server_hooks_installed;

static const char *
host_server_anchors(void)
{
    static const char *const volatile anchors[] = { &host_anchor_exit,    &host_anchor_exec,
                                                    &host_anchor_creds,   &host_anchor_sockets,
                                                    &host_anchor_seccomp, &host_anchor_ns };

    return anchors[0];
}

void
host_set_server_hooks(const struct host_server_hooks *hooks)
{
    (void)host_server_anchors();
    atomic_store_explicit(&host_ns_syscall_installed, host_ns_syscall, memory_order_release);
    atomic_store_explicit(&host_server_hooks_installed, hooks, memory_order_release);
    atomic_store_explicit(&host_seccomp_hook, host_seccomp_before, memory_order_release);
}
