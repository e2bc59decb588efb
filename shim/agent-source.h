/* SPDX-License-Identifier: MIT */
/*
 * shim/agent-source.h - the sampling agent (agent/) as an event source of the diagnostic server
 * (ipc/): it turns the agent's drained records into SampleProfiler ThreadSample events, pipeprof
 * provider events and, at StopTracing, rundown events that name every sampled function.
 * Context: every callback runs on the IPC loop thread (ipc/ipc.h, struct ipc_event_source).
 */
#ifndef SHIM_AGENT_SOURCE_H
#define SHIM_AGENT_SOURCE_H

#include "agent/agent.h"
#include "ipc/ipc.h"

/* The EventSource-style provider of pipeprof's own events (docs/architecture.md). */
#define SHIM_PROVIDER_PIPEPROF "pipeprof"

/*
 * Fills *out with the agent's event source. defaults gives the mode and rate of sessions whose
 * filter data does not name them (`mode=cpu|wall;hz=N` on the SampleProfiler or pipeprof
 * provider). The agent must be started (ag_start) before the first session. Ownership: *out
 * and defaults are copied; *out must outlive the server that uses it.
 */
void shim_agent_source_init(struct ipc_event_source *out, const struct ag_config *defaults);

/*
 * Parses a provider's filter data for `mode` and `hz`. Returns 0 (unknown keys are ignored) or
 * -EINVAL with a static reason in *why. Exposed for tests.
 */
PP_MUST_USE int shim_filter_parse(const char *args, enum ag_mode *mode, unsigned *hz,
                                  const char **why);

#endif /* SHIM_AGENT_SOURCE_H */
