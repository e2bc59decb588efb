/* SPDX-License-Identifier: MIT */
/*
 * bridge/counters.h - EventCounters for diagnostic sessions, internal to bridge/: the
 * `System.Runtime` counters that mean something in a native process (cpu-usage, working-set)
 * and pipeprof's own (samples, lost-samples, thread-count, agent-cpu-usage, agent-memory),
 * written every EventCounterIntervalSec as the runtime's EventSource writes them: an event named
 * "EventCounters" whose one field "Payload" is an object with Name, DisplayName, Mean or
 * Increment, ... (docs/ipc.md, "Counters"). dotnet-counters and TraceEvent read them as they
 * read a .NET process's.
 * Context: the IPC loop thread (bridge/agent-source.c's session_start and drain callbacks).
 */
#ifndef BRIDGE_COUNTERS_H
#define BRIDGE_COUNTERS_H

#include <stdint.h>

#include "common/compiler.h"
#include "ipc/ipc.h"

struct nt_writer;

/*
 * The thread id of pipeprof's own events (the pipeprof provider's and the counters): no thread.
 * TraceEvent reads the header's thread id as a 32-bit int and gives an event of thread -1 no
 * TraceThread, so its thread-time computer (dotnet-trace report, PerfView) skips it. Written with
 * the IPC loop's tid, each such event (an EventSource's, to TraceEvent) began a stretch of that
 * thread's time charged to "EventName: pipeprof/..." until its next one: 20 % of the report of a
 * `pipeprof record` trace (docs/architecture.md, "pipeprof's own events in TraceEvent's views").
 * The capture thread id (sequence numbers) stays the writing thread's.
 */
#define BRIDGE_NO_THREAD UINT64_C(0xFFFFFFFF)

#define BRIDGE_COUNTERS_RUNTIME  "System.Runtime"
#define BRIDGE_COUNTERS_PIPEPROF "pipeprof"

/* One session's counter state. Zeroed: no counters. Owned by the session (no allocations). */
struct bridge_counters {
    uint64_t interval_ns; /* 0: the session asked for no counters */
    int runtime;          /* System.Runtime's counters are enabled */
    int pipeprof;         /* pipeprof's counters are enabled */
    uint64_t last_ns;     /* the previous interval's end (CLOCK_MONOTONIC) */
    uint64_t last_cpu_ns; /* process CPU time then */
    uint64_t last_agent_cpu_ns;
    uint64_t last_samples, last_lost;
};

/*
 * Reads the session's providers: System.Runtime or pipeprof with EventCounterIntervalSec=S in
 * their filter data (S > 0, fractions allowed, as EventSource parses it) turn the counters on.
 * now_ns starts the first interval. Returns 0 or -EINVAL with a static reason in *why (an
 * interval that is not a number); the session then runs without counters.
 */
PP_MUST_USE int bridge_counters_start(struct bridge_counters *c,
                                      const struct ipc_session_config *cfg, uint64_t now_ns,
                                      const char **why);

/*
 * Writes the counters into w when an interval has ended by now_ns (at most one set per call),
 * measured over the interval up to now_ns and stamped stamp_ns (at most now_ns: the time the
 * session's other events stand at). capture_tid is the writing thread's id. Returns 0 or a
 * negative errno from the writer.
 */
PP_MUST_USE int bridge_counters_drain(struct bridge_counters *c, struct nt_writer *w,
                                      uint64_t capture_tid, uint64_t now_ns, uint64_t stamp_ns);

/* The interval in ns of filter data "k=v;..." (EventCounterIntervalSec), 0 when absent, or
 * -EINVAL. Exposed for tests. */
PP_MUST_USE int bridge_counters_interval(const char *args, uint64_t *interval_ns);

#endif /* BRIDGE_COUNTERS_H */
