/* SPDX-License-Identifier: MIT */
/*
 * host/internal.h - shared by the files of host/: the installed hook tables, the export marker
 * and the link anchors. Nothing outside host/ includes it.
 */
#ifndef HOST_INTERNAL_H
#define HOST_INTERNAL_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include "host/host.h"

/* The library is built with -fvisibility=hidden; an interposer is exported. */
#define HOST_EXPORT         __attribute__((visibility("default")))
/* The calling function's frame address, handed to the agent's hooks as fa. */
#define HOST_FA             ((uint64_t)(uintptr_t)__builtin_frame_address(0))
/* Keeps an interposer's frame (whose address was handed down as fa) alive during the call. */
#define HOST_NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

/* The installed tables (host.c), NULL until installed. */
extern _Atomic(const struct host_agent_hooks *) host_agent_hooks_installed;
extern _Atomic(const struct host_server_hooks *) host_server_hooks_installed;

static inline const struct host_agent_hooks *
host_agent(void)
{
    return atomic_load_explicit(&host_agent_hooks_installed, memory_order_acquire);
}

static inline const struct host_server_hooks *
host_server(void)
{
    return atomic_load_explicit(&host_server_hooks_installed, memory_order_acquire);
}

/* The agent's hooks when they apply to the calling thread, else NULL: pass the call through. */
static inline const struct host_agent_hooks *
host_agent_active(void)
{
    const struct host_agent_hooks *h = host_agent();

    return h != NULL && h->active() ? h : NULL;
}

/*
 * One anchor per file of host/, referenced by the hook installers (host.c). A program links a
 * static archive's member only when something references it, and nothing calls an interposer by
 * its name (the dynamic linker finds it): without the anchors a program linked with pp_host, or
 * libpipeprof.so built against a sanitizer runtime that defines read() itself, would silently
 * lose every interposer. A new file of host/ defines its anchor and is added to host.c's lists;
 * check-host-exports fails when a file's interposers are not exported.
 */
#define HOST_ANCHOR(file) const char host_anchor_##file = 1
extern const char host_anchor_threads, host_anchor_blocking, host_anchor_signals;
extern const char host_anchor_fds, host_anchor_eintr;
extern const char host_anchor_exit, host_anchor_exec, host_anchor_creds, host_anchor_sockets;

/*
 * The library's signal and the host's disposition of it (sig-chain.c, written by signals.c).
 * signo is 0 while the library holds no signal; act[cur] is what the host installed, as bare
 * would have it; onstack_added has bit s-1 set when the host's handler of signal s got signo
 * added to its mask (hidden from its oldact).
 */
typedef int (*host_sigaction_fn)(int, const struct sigaction *, struct sigaction *);
struct host_sig_record {
    _Atomic int signo;
    _Atomic unsigned cur;
    struct sigaction act[2];
    struct sigaction library_act;
    _Atomic(host_sigaction_fn) real_sigaction;
    _Atomic uint64_t onstack_added;
};
extern struct host_sig_record host_sig;

/* Publishes the host's disposition (a writer at a time); reads it. Async-signal-safe. */
void host_sig_publish(const struct sigaction *act);
void host_sig_current(struct sigaction *out);

/* posix_spawn, system and exec (exec.c): a child must inherit the host's SIG_IGN of the
 * library's signal, which a handler would turn into SIG_DFL. begin returns 1 when it set the
 * real disposition to SIG_IGN; end(1) puts the library's handler back. */
int host_signals_spawn_begin(void);
void host_signals_spawn_end(int began);

/* fd came from a call whose return address is ra: the library's fds move high and are
 * registered (fds.c); returns the fd to hand back. */
int host_fds_created(int fd, const void *ra);

#endif /* HOST_INTERNAL_H */
