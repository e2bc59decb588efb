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
 */
#include <dlfcn.h>
#include <errno.h>

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
