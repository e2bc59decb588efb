#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/idle-agent.sh - a preloaded process that nobody profiles runs the diagnostic server's
# loop thread only: the agent (its /proc scans, module list, manager thread) starts when the
# first session asks for samples, and that session samples the host's work functions. The cost
# it saves is measured by bench/idle-preload.sh (docs/performance.md). A stack snapshot
# (dotnet-stack's session: SampleProfiler alone, stopped at once) as the first session of an
# idle host holds a stack of every thread of the host, in CPU and in wall mode, though the agent
# and its wall sampler start with that session.
source "$(dirname "$0")/ipc-lib.sh"
HOST=$B/tests/output-host
[[ -x $HOST ]] || fail "missing $HOST"

threads() { ls "/proc/$1/task" | wc -l; }

env LD_PRELOAD="$PRELOAD" ASAN_OPTIONS=detect_leaks=0 "$HOST" serve 200 >"$T/svc.out" &
pid=$!
PP_PIDS+=("$pid")
for i in $(seq 200); do grep -q ready "$T/svc.out" && break; sleep 0.1; done
grep -q ready "$T/svc.out" || fail "the host never got ready"
wait_socket "$pid" >/dev/null
idle=$(threads "$pid")
names=$(cat /proc/"$pid"/task/*/comm | sort | tr '\n' ' ')
[[ $idle == 2 ]] || fail "idle: $idle threads ($names); want the host's and pipeprof-ipc"
note "idle: $idle threads: $names"

"$PIPEPROF" collect -p "$pid" --duration 2 -o "$T/c.nettrace" >/dev/null 2>"$T/collect.err" ||
  { cat "$T/collect.err" >&2; fail "collect failed"; }
busy=$(threads "$pid")
[[ $busy -gt 2 ]] || fail "the agent did not start for the session ($busy threads)"
n=$("$PIPEPROF" report --top 200 --format json "$T/c.nettrace" | python3 -c 'import json,sys
d = json.load(sys.stdin)
print(sum(f["total"] for f in d["top_total"] if f["function"].endswith("!out_serve_work")))')
[[ $n -ge 5 ]] || fail "the first session got $n samples in out_serve_work"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc == 0 ]] || fail "the host ended with $rc after the session"
note "the agent started for the first session: $busy threads, $n samples in out_serve_work"

# The snapshot as the first session, stopped at once (--duration 0.001: the stop follows the
# start as the client's next request), three fresh hosts per mode.
GT=$B/samples/pp-sample-groundtruth
for mode in cpu wall; do
  for run in 1 2 3; do
    env PIPEPROF_MODE=$mode LD_PRELOAD="$PRELOAD" ASAN_OPTIONS=detect_leaks=0 "$GT" 30 /dev/null >/dev/null 2>"$T/gt.err" &
    host=$!
    PP_PIDS+=("$host")
    wait_socket "$host" >/dev/null
    sleep 0.3 # the workers exist
    want=$(for t in /proc/"$host"/task/*; do [[ $(cat "$t/comm") == pipeprof-* ]] || basename "$t"; done | sort -n | tr '\n' ' ')
    [[ $(wc -w <<<"$want") == 5 ]] || fail "the ground-truth host has threads $want"
    "$PIPEPROF" collect -p "$host" --providers Microsoft-DotNETCore-SampleProfiler:0:4 --duration 0.001 \
      -o "$T/snap.nettrace" >/dev/null 2>"$T/collect.err" || { cat "$T/collect.err" >&2; fail "collect failed"; }
    # A thread counts with a sample that has a stack and a later one (TraceEvent's thread time,
    # dotnet-stack's view, charges a thread from one sample to its next).
    got=$("$PIPEPROF" dump "$T/snap.nettrace" | awk '/Thread\/Sample/ {
        for (i = 1; i <= NF; i++) if ($i ~ /^tid=/) t = substr($i, 5)
        if (stacked[t]) later[t] = 1
        if ($0 !~ / stack=0 /) stacked[t] = 1 }
      END { for (t in later) print t }' | sort -n | tr '\n' ' ')
    kill "$host" 2>/dev/null || true
    wait "$host" 2>/dev/null || true
    [[ $got == "$want" ]] || { cat "$T/gt.err" >&2; fail "snapshot ($mode mode, host $run) has stacks of threads '$got', the host has '$want'"; }
  done
  note "the first session, a snapshot stopped at once, has every thread's stack ($mode mode, 3 hosts)"
done
