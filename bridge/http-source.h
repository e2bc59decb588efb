/* SPDX-License-Identifier: MIT */
/*
 * bridge/http-source.h - the HTTP pull endpoints (http/) in the agent: configured from the
 * environment, run on the diagnostic server's loop, recording through the agent.
 *
 *   PIPEPROF_SAMPLING_SERVER_URL           http://127.0.0.1:PORT, unix:///path.sock, ...
 *   PIPEPROF_SAMPLING_SERVER_URL_PATTERN   the same with {PID} replaced by the pid
 *   SWIPR_SAMPLING_SERVER_URL[_PATTERN]    swift-profile-recorder's spellings (older)
 *   PROFILE_RECORDER_SERVER_URL[_PATTERN]  swift-profile-recorder's spellings (newer)
 *   PIPEPROF_SAMPLING_SERVER_ALLOW_REMOTE  1: allow a non-loopback address
 */
#ifndef BRIDGE_HTTP_SOURCE_H
#define BRIDGE_HTTP_SOURCE_H

#include "ipc/ipc.h"

/*
 * Reads the environment. When a server is configured, sets opts' loop hooks so that it starts
 * on the diagnostic server's loop, and returns 1; returns 0 when none is configured, or a
 * negative errno after one line on stderr for an invalid value. sampling is 0 when the agent
 * did not start (requests are then answered 501). Context: the constructor.
 */
int bridge_http_configure(struct ipc_server_options *opts, int sampling);

#endif /* BRIDGE_HTTP_SOURCE_H */
