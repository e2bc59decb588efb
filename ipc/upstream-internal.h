/* SPDX-License-Identifier: MIT */
/*
 * ipc/upstream-internal.h - what the three files of the .NET runtime behind the server share
 * (docs/dotnet-hosts.md), one file per thread context:
 *   redirect.c  any thread: the table of the runtime's socket paths moved aside, read by the
 *               socket interposers (ipc_redirect_path());
 *   upstream.c  the loop thread: connections to the runtime, its connect ports, and writing the
 *               table above (ipc_upstream_init(), ipc_upstream_shutdown());
 *   merge.c     the reader threads (one per merged session) and the loop's side of their queue.
 * Private to those files; the rest of ipc/ sees ipc/internal.h, everything outside ipc/ sees
 * ipc/ipc.h alone.
 */
#ifndef IPC_UPSTREAM_INTERNAL_H
#define IPC_UPSTREAM_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include "ipc/internal.h"

#define IPC_REDIRECT_PORTS 8
#define IPC_PATH_MAX       sizeof(((struct sockaddr_un *)0)->sun_path)

/*
 * The redirect table (redirect.c). Written by ipc_upstream_init() (the constructor, before the
 * runtime exists, or a restart of the server) and ipc_upstream_shutdown(), on the loop thread,
 * with ready cleared while it changes and set (release) when it is whole; read by the socket
 * interposers on any thread after an acquire of ready. Fixed storage that is never freed, so an
 * interposer can never read freed memory.
 */
struct ipc_redirect_table {
    atomic_int ready;
    long pid;
    char dir[IPC_PATH_MAX];     /* where the default name lives, without trailing '/' */
    char runtime[IPC_PATH_MAX]; /* "": the runtime keeps its default name */
    size_t ports;
    char port_path[IPC_REDIRECT_PORTS][IPC_PATH_MAX];
    char port_private[IPC_REDIRECT_PORTS][IPC_PATH_MAX];
    atomic_int runtime_bound; /* a runtime's bind was redirected: it is there to forward to */
};
extern struct ipc_redirect_table ipc_redirects;

/* Length of path's directory part (base points into path, after the last '/') without
 * trailing slashes. */
size_t ipc_dir_len(const char *path, const char *base);

/* merge.c, on the loop thread: the merged stream's sync time, both clocks when the runtime was
 * asked for its session (struct ipc_up_request). */
void ipc_merge_set_sync(struct ipc_merge *m, uint64_t ticks, int64_t unix_ns);

#endif /* IPC_UPSTREAM_INTERNAL_H */
