/* SPDX-License-Identifier: MIT */
/*
 * bridge/agent-source.h - the sampling agent (agent/) as an event source of the diagnostic server
 * (ipc/): it turns the agent's drained records into SampleProfiler ThreadSample events, pipeprof
 * provider events and, at StopTracing, rundown events that name every sampled function.
 * Context: every callback runs on the IPC loop thread (ipc/ipc.h, struct ipc_event_source).
 */
#ifndef BRIDGE_AGENT_SOURCE_H
#define BRIDGE_AGENT_SOURCE_H

#include "agent/agent.h"
#include "ipc/ipc.h"

/* The EventSource-style provider of pipeprof's own events (docs/architecture.md). */
#define BRIDGE_PROVIDER_PIPEPROF "pipeprof"

/*
 * Fills *out with the agent's event source. defaults gives the mode and rate of sessions whose
 * filter data does not name them (`mode=cpu|wall;hz=N` on the SampleProfiler or pipeprof
 * provider). The agent must be started (ag_start) before the first session. Ownership: *out
 * and defaults are copied; *out must outlive the server that uses it.
 */
void bridge_agent_source_init(struct ipc_event_source *out, const struct ag_config *defaults);

/*
 * Starts the agent with the defaults of bridge_agent_source_init() unless it runs: the shim
 * leaves it stopped until something asks for samples, so that a preloaded process nobody
 * profiles pays for no /proc scan, module list or manager thread. Called before every sampling
 * request of a session or an HTTP recording. Returns 0 or ag_start()'s error.
 * Context: the consumer's thread (the IPC loop), never a signal handler.
 */
PP_MUST_USE int bridge_agent_start(void);

/*
 * In the child of fork(): the parent's sessions and taps do not exist here (their server and
 * threads stayed in the parent); forgets them so that a server started in the child begins
 * empty. Their memory is left as it is. Context: the child's atfork handler, single-threaded.
 */
void bridge_agent_source_forked_child(void);

/*
 * A consumer of the agent's samples besides the diagnostic sessions: the HTTP endpoints. The
 * agent has one consumer thread (ag_drain); a tap joins it, so taps and sessions run on the
 * same thread (the IPC loop). on_sample gets every sample drained while the tap is added, of
 * every mode and at the highest rate any consumer asked for, leaf-first frames borrowed for the
 * call; lost counts samples the agent dropped meanwhile.
 * Ownership: the caller owns the tap and keeps it alive until bridge_tap_remove().
 */
struct bridge_tap_sample {
    int32_t tid;
    enum ag_mode mode;
    uint64_t timestamp_ns;
    int running;
    uint32_t weight;        /* intervals it stands for, at the agent's rate then (wall mode: 1,
                               or a running thread's that waited for a core with its signal
                               pending, its stack unchanged, that many intervals back) */
    uint64_t cpu_ns;        /* CPU mode: the CPU time it stands for (its weight's, exactly) */
    const uint64_t *frames; /* leaf first */
    uint32_t depth;
};

struct bridge_tap {
    void (*on_sample)(void *ctx, const struct bridge_tap_sample *s);
    void *ctx;
    uint64_t lost;           /* written by the source */
    struct bridge_tap *next; /* the source's list */
};

/* Adds a tap; -EBUSY when another thread consumes the agent (a pipeprof_start() recording). */
PP_MUST_USE int bridge_tap_add(struct bridge_tap *t);

/* Removes a tap (no-op when it is not added). */
void bridge_tap_remove(struct bridge_tap *t);

/*
 * Drains the agent into the taps unless diagnostic sessions are running (their drain timer
 * feeds the taps then). Returns 0, -EBUSY when this thread has no tap, or a negative errno.
 * Context: the thread that added the taps.
 */
PP_MUST_USE int bridge_tap_pump(void);

/*
 * Parses a provider's filter data for `mode` and `hz`. Returns 0 (unknown keys are ignored) or
 * -EINVAL with a static reason in *why. Exposed for tests.
 */
PP_MUST_USE int bridge_filter_parse(const char *args, enum ag_mode *mode, unsigned *hz,
                                    const char **why);

#endif /* BRIDGE_AGENT_SOURCE_H */
