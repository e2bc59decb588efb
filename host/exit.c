/* SPDX-License-Identifier: MIT */
/*
 * host/exit.c - leaving without exit().
 *
 *   _exit _Exit      interposed because they skip the destructor that ends every session
 *                    (shim/shim.c), and shells and forked workers leave that way: the server's
 *                    sessions_end hook gives each session its rundown and end tag first, within
 *                    a bounded wait, so a lock held by the exiting thread cannot hang the exit.
 *
 * What the host may rely on: the process ends with the status given, through the exit_group
 * system call itself, as libc's would; no exit handler or stdio flush runs. A fork()ed or
 * vfork()ed child finds no server of its own and leaves at once. Without the server's hooks it
 * leaves at once too.
 *
 * Held by: cli-record (a shell that leaves through _exit: its trace is complete, with rundown),
 * agent-torture (20 forked children _exit with their status under the agent).
 */
#include <sys/syscall.h>
#include <unistd.h>

#include "host/internal.h"

HOST_ANCHOR(exit);

__attribute__((noreturn)) static void
host_exit_group(int status)
{
    const struct host_server_hooks *h = host_server();

    if (h != NULL) {
        (void)h->sessions_end();
    }
    for (;;) {
        syscall(SYS_exit_group, status);
    }
}

HOST_EXPORT __attribute__((noreturn)) void
_exit(int status)
{
    host_exit_group(status);
}

HOST_EXPORT __attribute__((noreturn)) void
_Exit(int status)
{
    host_exit_group(status);
}
