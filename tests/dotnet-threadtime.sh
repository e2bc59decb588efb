#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-threadtime.sh - dotnet-trace's default profile (thread time: the SampleProfiler and
# the runtime's keywords) keeps the stacks of runnable threads with the agent preloaded. The app
# (tests/dotnet/threadtime) runs six busy threads on fewer cores: three in Hot, two in Warm, one
# in Cold, the main thread asleep. `dotnet-trace collect -p PID` with its defaults records it
# without the agent and with it; in each, `dotnet-trace report TRACE topN` must hold no stackless
# "Threads" node above 5 % exclusive (CPU mode left runnable time without a stack: 88 %), and each
# of Hot, Warm, Cold and Thread.Sleep must take within 3 points the same share of the app's
# managed threads' time (the sum of the four) with the agent as without it: native frames and
# the runtime's native threads, which only the agent samples, aside. `pipeprof dump` and TraceEvent
# (tests/dotnet/traceevent-dump) count the same events lost: none without the agent, with it at
# most 1 % of the events, the wall samples it really dropped (one whose registers could not be
# read: 0 or 1 in 4 s here). Before, a loaded machine read 160 to 3261 lost with the agent, each
# an interval its late wall pass missed, which is no event dropped.
source "$(dirname "$0")/ipc-lib.sh"
command -v dotnet-trace >/dev/null || skip "dotnet-trace is not installed (dotnet tool install -g dotnet-trace)"
APP=$(dotnet_project threadtime)
TE=$(dotnet_project traceevent-dump)

# record NAME ENV...: dotnet-trace's defaults for 4 s, from 3 s of the app's CPU time after its
# "ready" line, then its report.
# The app runs for up to 60 s and is stopped once the trace is written: a fixed run length
# raced dotnet-trace's own start-up and its Stop on a loaded machine ("The target process may
# have exited").
record() {
  local name=$1 app cpu
  shift
  env "$@" dotnet "$APP" 60 >"$T/$name.out" &
  app=$!
  PP_PIDS+=($app)
  wait_until 120 "$name: the app's \"ready\" line (its workers started)" grep -q ready "$T/$name.out"
  # Tiering settled: 3 s of the workers' CPU time (1.5 s of wall time on 2 cores unloaded), not
  # a fixed 1.5 s of wall time, which a loaded machine's start-up outlasts.
  read -r cpu _ < <(wait_cpu "$app" 3 120)
  ((cpu >= 3)) || fail "$name: the app used $cpu s of CPU time in 120 s, not 3, before the session"
  timeout 90 dotnet-trace collect -p "$app" --duration 00:00:00:04 -o "$T/$name.nettrace" \
    >"$T/$name.collect.log" 2>&1 || { cat "$T/$name.collect.log"; fail "$name: dotnet-trace collect"; }
  kill "$app" 2>/dev/null || true
  wait "$app" || true
  timeout 180 dotnet-trace report "$T/$name.nettrace" topN -n 1000 --inclusive >"$T/$name.incl" 2>&1 &&
    timeout 180 dotnet-trace report "$T/$name.nettrace" topN -n 1000 >"$T/$name.excl" 2>&1 ||
    { cat "$T/$name.incl" "$T/$name.excl"; fail "$name: dotnet-trace report"; }
}

record bare
record agent LD_PRELOAD="$PRELOAD"
for name in bare agent; do
  read -r ours events < <("$PIPEPROF" dump --format json --summary "$T/$name.nettrace" |
    python3 -c 'import json, sys; s = json.load(sys.stdin); print(s["lost_events"], s["events_total"])') ||
    fail "$name: pipeprof dump cannot read the trace"
  te=$(timeout 180 dotnet "$TE" "$T/$name.nettrace" "$T/$name.te.jsonl" | sed -n 's/^EventsLost //p')
  echo "  $name: lost events: pipeprof $ours, TraceEvent $te, of $events events"
  [[ $ours == "$te" ]] || fail "$name: pipeprof counts $ours events lost, TraceEvent '$te'"
  [[ $name == agent || $ours == 0 ]] || fail "bare: the runtime lost $ours events"
  ((ours * 100 <= events)) || fail "$name: $ours of $events events lost (more than the agent's real drops)"
done
python3 - "$T" <<'PY' || fail "thread time with the agent differs from the runtime's own"
import re, sys
t = sys.argv[1]

def table(path):
    rows = {}
    for line in open(path):
        m = re.match(r"\s*\d+\.\s+(.*?)\s{2,}([\d.]+)%\s+([\d.]+)%\s*$", line)
        if m:
            rows[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    return rows

want = {"Hot": r"Program\.Hot\(", "Warm": r"Program\.Warm\(", "Cold": r"Program\.Cold\(",
        "Sleep": r"Thread\.Sleep\("}
shares, bad = {}, []
for name in ("bare", "agent"):
    incl, excl = table("%s/%s.incl" % (t, name)), table("%s/%s.excl" % (t, name))
    threads = max([e for f, (i, e) in list(incl.items()) + list(excl.items()) if f == "Threads"] or [0.0])
    if threads > 5.0:
        bad.append("%s: a stackless Threads node holds %.1f %% exclusive" % (name, threads))
    got = {k: max([i for f, (i, e) in incl.items() if re.search(p, f)] or [0.0]) for k, p in want.items()}
    total = sum(got.values())
    if total <= 0:
        bad.append("%s: none of %s in the report" % (name, ", ".join(want)))
        continue
    shares[name] = {k: 100.0 * v / total for k, v in got.items()}
    print("  %-6s Threads exclusive %4.1f %%; of the managed threads' time: %s" % (
        name, threads, ", ".join("%s %.1f %%" % (k, v) for k, v in shares[name].items())))
if len(shares) == 2:
    for k in want:
        d = shares["agent"][k] - shares["bare"][k]
        if abs(d) > 3.0:
            bad.append("%s: %.1f %% with the agent, %.1f %% without" % (k, shares["agent"][k], shares["bare"][k]))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
echo "dotnet-threadtime: ok"
