/* SPDX-License-Identifier: MIT */
/*
 * cli/diag.h - diagnostic-protocol client helpers shared by `collect` and `record`.
 * Context: the CLI's single thread; every call blocks up to its timeout.
 */
#ifndef PP_CLI_DIAG_H
#define PP_CLI_DIAG_H

#include <stddef.h>
#include <stdint.h>

#include "ipc/ipc.h"

/*
 * Sends req on fd and reads the response into r (buf holds its bytes). Returns 0 for OK, a
 * positive value for an error response (the HRESULT is in r->hresult), or a negative errno.
 */
int pp_diag_request(int fd, const void *req, size_t len, struct ipc_response *r, uint8_t *buf,
                    size_t cap, int timeout_ms);

/* Reads the response on fd to a request made before (or none: a peer that answers by itself), as
 * pp_diag_request() does after its send. */
int pp_diag_response(int fd, struct ipc_response *r, uint8_t *buf, size_t cap, int timeout_ms);

/*
 * Fills *req as dotnet-trace asks: CollectTracing2, 256 MB buffer, nettrace, rundown and stack
 * walks on, with providers in dotnet-trace's syntax. Returns 0, or a negative errno with a
 * static reason in *why (NULL when errno says it); release *req with ipc_collect_fini().
 */
int pp_diag_collect_init(struct ipc_collect *req, const char *providers, const char **why);

/* A readable name of a diagnostic HRESULT. Static string. */
const char *pp_diag_hr_name(uint32_t hr);

/*
 * What ended a child, from its waitpid() status, for `record`'s and `collect`'s messages:
 * "killed by SIGTERM (signal 15)", with ", core dumped" added when it dumped core (a realtime
 * signal is named SIGRTMIN+N); "" when no signal ended it. Writes into buf, returns buf.
 */
const char *pp_diag_killed_text(int status, char *buf, size_t cap);

#endif /* PP_CLI_DIAG_H */
