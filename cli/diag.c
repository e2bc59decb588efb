/* SPDX-License-Identifier: MIT */
/*
 * cli/diag.c - what `collect` and `record` share as clients of the diagnostic protocol: a
 * request/response exchange, HRESULT names, and the listening socket of the reverse mode.
 */
#include "cli/diag.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

int
pp_diag_request(int fd, const void *req, size_t len, struct ipc_response *r, uint8_t *buf,
                size_t cap, int timeout_ms)
{
    int n = ipc_client_send(fd, req, len);

    return n < 0 ? n : pp_diag_response(fd, r, buf, cap, timeout_ms);
}

int
pp_diag_response(int fd, struct ipc_response *r, uint8_t *buf, size_t cap, int timeout_ms)
{
    int n = ipc_client_read_response(fd, buf, cap, timeout_ms);

    if (n < 0) {
        return n;
    }
    if (ipc_response_decode(buf, (size_t)n, r) < 0) {
        return -EBADMSG;
    }
    if (r->status == IPC_RESPONSE_ERROR) {
        return (int)(r->hresult & 0x7FFFFFFF) | 0x40000000; /* positive: an HRESULT */
    }
    return r->status == IPC_RESPONSE_OK ? 0 : -EPROTO;
}

const char *
pp_diag_hr_name(uint32_t hr)
{
    switch (hr) {
    case IPC_HR_BAD_ENCODING:
        return "BAD_ENCODING (the target does not support one of the options)";
    case IPC_HR_UNKNOWN_COMMAND:
        return "UNKNOWN_COMMAND";
    case IPC_HR_UNKNOWN_MAGIC:
        return "UNKNOWN_MAGIC";
    case IPC_HR_FAIL:
        return "FAIL (too many sessions?)";
    case IPC_HR_BUSY:
        return "BUSY (the target is at its limit of connections; try again)";
    default:
        return "error";
    }
}

int
pp_diag_collect_init(struct ipc_collect *req, const char *providers, const char **why)
{
    memset(req, 0, sizeof(*req));
    req->command_id = IPC_EP_COLLECT_TRACING2;
    req->buffer_mb = 256;
    req->format = 1;
    req->request_rundown = 1;
    req->request_stackwalk = 1;
    *why = NULL;
    return ipc_providers_parse(providers, req, why);
}

const char *
pp_diag_killed_text(int status, char *buf, size_t cap)
{
    const char *abbrev;
    char name[32];
    int sig;

    if (cap == 0) {
        return buf;
    }
    buf[0] = '\0';
    if (!WIFSIGNALED(status)) {
        return buf;
    }
    sig = WTERMSIG(status);
    /* Name and number both: "Profiling timer expired" or a bare 27 was all one had to go on
     * when a CI run's CMD died under record (which signal it was could not be told later). */
    abbrev = sigabbrev_np(sig);
    if (abbrev != NULL) {
        snprintf(name, sizeof(name), "SIG%s", abbrev);
    } else if (sig >= SIGRTMIN && sig <= SIGRTMAX) {
        snprintf(name, sizeof(name), "SIGRTMIN+%d", sig - SIGRTMIN);
    } else {
        snprintf(name, sizeof(name), "a signal");
    }
    snprintf(buf, cap, "killed by %s (signal %d%s)", name, sig,
             WCOREDUMP(status) ? ", core dumped" : "");
    return buf;
}
