/* SPDX-License-Identifier: MIT */
/*
 * ipc/redirect.c - in a .NET host, the runtime's socket paths moved aside (docs/dotnet-hosts.md):
 * its bind of the public name goes to a private path, and its connects to a connect port's
 * address go to a private listener of this server, so every client finds this server and the
 * runtime still has one of its own (upstream.c forwards to it).
 *
 * Context: any thread. ipc_redirect_path() is called through the shim by host/sockets.c's bind,
 * connect and unlink, on whichever thread of the host makes the call; it only reads the table
 * (ipc/upstream-internal.h says when it is written).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ipc/upstream-internal.h"

struct ipc_redirect_table ipc_redirects;

size_t
ipc_dir_len(const char *path, const char *base)
{
    size_t n = (size_t)(base - path);

    while (n > 1 && path[n - 1] == '/') {
        n--;
    }
    return n;
}

/* Is path the runtime's default name for this process: DIR/dotnet-diagnostic-PID-DIGITS-socket? */
static int
ipc_redirect_is_default_name(const char *path)
{
    const char *base = strrchr(path, '/'), *p;
    char prefix[64];
    size_t n, dlen;

    if (base == NULL) {
        return 0;
    }
    dlen = ipc_dir_len(path, base);
    if (dlen != strlen(ipc_redirects.dir) || memcmp(path, ipc_redirects.dir, dlen) != 0) {
        return 0;
    }
    n = (size_t)snprintf(prefix, sizeof(prefix), "dotnet-diagnostic-%ld-", ipc_redirects.pid);
    base++;
    if (strncmp(base, prefix, n) != 0) {
        return 0;
    }
    for (p = base + n; *p >= '0' && *p <= '9'; p++) {
    }
    return p > base + n && strcmp(p, "-socket") == 0;
}

static int
ipc_redirect_copy(const char *to, char *out, size_t cap)
{
    size_t n = strlen(to);

    if (n == 0 || n >= cap) {
        return 0;
    }
    memcpy(out, to, n + 1);
    return 1;
}

int
ipc_redirect_path(enum ipc_redirect_op op, const char *path, char *out, size_t cap)
{
    size_t i;

    if (path == NULL || !atomic_load_explicit(&ipc_redirects.ready, memory_order_acquire) ||
        ipc_redirects.pid != (long)getpid()) {
        return 0;
    }
    if (op == IPC_REDIRECT_CONNECT) {
        for (i = 0; i < ipc_redirects.ports; i++) {
            if (strcmp(path, ipc_redirects.port_path[i]) == 0) {
                return ipc_redirect_copy(ipc_redirects.port_private[i], out, cap);
            }
        }
        return 0;
    }
    if (ipc_redirects.runtime[0] == '\0' || !ipc_redirect_is_default_name(path)) {
        return 0;
    }
    if (op == IPC_REDIRECT_BIND) {
        atomic_store(&ipc_redirects.runtime_bound, 1);
    }
    return ipc_redirect_copy(ipc_redirects.runtime, out, cap);
}
