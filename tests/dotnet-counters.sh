#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-counters.sh - counters for dotnet-counters: a native host with the agent preloaded
# (one busy thread) gets dotnet-counters' session (System.Runtime with EventCounterIntervalSec=1,
# and pipeprof's counters) from the real client libraries (NuGet Microsoft.Diagnostics.NETCore.
# Client, read live with TraceEvent: tests/dotnet/counters-client). Every counter must arrive in
# every interval with a plausible value: cpu-usage within 10 points of the CPU time the kernel
# accounted to the host over the same time, a working set, samples near the rate for that time. The same client reads a real .NET 10 app's counters the same way
# (the payload shape is the runtime's). dotnet-counters itself runs where it is installed; the
# test says loudly when it is not. Skips loudly without the .NET SDK or the NuGet packages.
source "$(dirname "$0")/ipc-lib.sh"
command -v dotnet >/dev/null || skip "the .NET SDK (dotnet) is not installed"

CLIENT=$(dotnet_project counters-client)

# The hosts run until the clients are done with them ($T/stop.*, 300 s at most; the .NET app
# 60 s, killed when done): fixed 10 s runs were gone before the second dotnet-counters collect
# had read them at load 20 (its CSV held 1 row), the .NET start-ups taking the time.
# 1. The native host: one thread burning CPU, the agent preloaded, CPU mode.
LD_PRELOAD=$PRELOAD "$BUSY" 300 --until "$T/stop.1" >/dev/null &
host=$!
PP_PIDS+=($host)
wait_socket "$host" >/dev/null
# The host's own CPU time (/proc/PID/stat, the kernel's accounting) over the counters' own
# intervals is the truth cpu-usage and samples are held to: on a loaded machine one busy thread
# gets less than a whole CPU, and how much changes from second to second. Read every 0.1 s
# beside the client ("UNIX_TIME TICKS") and taken over the intervals the client's rows cover (its
# "t" counts from the start it prints): over the client's whole run, its .NET start-up included,
# the rate was 0.06 CPUs at load 20 and the intervals' samples 3.3/s, under 0.6 of it.
( while [[ -e /proc/$host ]]; do
    echo "$(date +%s.%N) $(awk '{print $14 + $15}' "/proc/$host/stat" 2>/dev/null)"
    sleep 0.1
  done ) >"$T/cpu.series" 2>/dev/null &
sampler=$!
PP_PIDS+=($sampler)
timeout 120 dotnet "$CLIENT" "$host" 4.5 "$T/native.json" >"$T/native.log" 2>&1 ||
  { cat "$T/native.log"; fail "the counters client failed on the native host"; }
kill "$sampler" 2>/dev/null || true
touch "$T/stop.1"
start=$(awk '/^counters-client: start / {print $3}' "$T/native.log")
[[ -n $start ]] || { cat "$T/native.log"; fail "the counters client did not say when it started"; }
python3 - "$T/native.json" "$T/cpu.series" "$start" "$(getconf CLK_TCK)" <<'PY' || fail "native host counters"
import json, os, sys
rows = json.load(open(sys.argv[1]))
series = [tuple(map(float, l.split())) for l in open(sys.argv[2]) if len(l.split()) == 2]
start, tck = float(sys.argv[3]), float(sys.argv[4])
cpus = len(os.sched_getaffinity(0))
# The window of the intervals checked below (all but the first of each counter), in Unix time.
ivs = [(start + r["t"] - r["interval"], start + r["t"]) for r in rows
       if (r["provider"], r["name"]) == ("pipeprof", "samples")][1:]
if not ivs or len(series) < 2:
    sys.exit("FAIL: no intervals (%d) or CPU readings (%d)" % (len(ivs), len(series)))
t0, t1 = min(a for a, _ in ivs), max(b for _, b in ivs)
def ticks_at(t):  # the host's CPU ticks at time t, from the readings around it
    before = [s for s in series if s[0] <= t] or series[:1]
    after = [s for s in series if s[0] >= t] or series[-1:]
    (ta, ca), (tb, cb) = before[-1], after[0]
    return ca if tb == ta else ca + (cb - ca) * (t - ta) / (tb - ta)
cpu_s = (ticks_at(t1) - ticks_at(t0)) / tck / (t1 - t0)  # CPUs the host used, on average
truth = 100.0 * cpu_s / cpus              # cpu-usage's definition: percent of all CPUs
print("# measured by the kernel: %.2f CPUs, %.1f%% of %d" % (cpu_s, truth, cpus), file=sys.stderr)
want = {
    ("System.Runtime", "working-set"): (0.5, 1000),
    ("pipeprof", "lost-samples"): (0, 0),
    ("pipeprof", "thread-count"): (1, 64),
    ("pipeprof", "agent-cpu-usage"): (0, 10),
    ("pipeprof", "agent-memory"): (0.01, 512),
}
means = {}
for key in (("System.Runtime", "cpu-usage"), ("pipeprof", "samples")):
    vals = [r["value"] for r in rows if (r["provider"], r["name"]) == key][1:]
    means[key] = sum(vals) / len(vals) if vals else -1
    want[key] = (-1e9, 1e9)  # held to the truth below; checked for arrival here
bad = []
# cpu-usage within 10 points of the kernel's figure; samples near 100 Hz of the CPU time used.
if abs(means[("System.Runtime", "cpu-usage")] - truth) > 10:
    bad.append("cpu-usage averages %.1f%%, the kernel says %.1f%%" % (means[("System.Runtime", "cpu-usage")], truth))
if not (0.6 * 100 * cpu_s <= means[("pipeprof", "samples")] <= 1.3 * 100 * cpu_s + 5):
    bad.append("samples average %.1f/s for %.2f CPUs at 100 Hz" % (means[("pipeprof", "samples")], cpu_s))
for key, (lo, hi) in sorted(want.items()):
    vals = [r for r in rows if (r["provider"], r["name"]) == key]
    shown = ", ".join("%.2f" % r["value"] for r in vals)
    print("# %s/%s: %s" % (key[0], key[1], shown), file=sys.stderr)
    if len(vals) < 3:
        bad.append("%s/%s arrived %d times in 4.5 s at 1 s" % (key[0], key[1], len(vals)))
        continue
    for r in vals:
        if not (0.8 <= r["interval"] <= 1.5):
            bad.append("%s/%s interval %.3f s" % (key[0], key[1], r["interval"]))
    # The first interval may hold the session's start; the others must be in range.
    for r in vals[1:]:
        if not (lo <= r["value"] <= hi):
            bad.append("%s/%s = %.3f, want %.2f..%.2f" % (key[0], key[1], r["value"], lo, hi))
    ts = [r["t"] for r in vals]
    if any(b - a > 1.6 for a, b in zip(ts, ts[1:])):
        bad.append("%s/%s: a gap in %s" % (key[0], key[1], ts))
if bad:
    print("FAIL: " + "; ".join(bad), file=sys.stderr)
    sys.exit(1)
PY
note "native host: every counter every interval, values plausible"

# 2. The same client on a real .NET app: the runtime's payload reads the same way, and the
# System.Runtime counters pipeprof publishes are among the runtime's.
app=$(dotnet_app)
dotnet "$app" 60 >/dev/null &
dn=$!
PP_PIDS+=($dn)
wait_socket "$dn" >/dev/null
timeout 120 dotnet "$CLIENT" "$dn" 3.5 "$T/dotnet.json" >"$T/dotnet.log" 2>&1 ||
  { cat "$T/dotnet.log"; fail "the counters client failed on the .NET app"; }
python3 - "$T/native.json" "$T/dotnet.json" <<'PY' || fail "runtime comparison"
import json, sys
ours = json.load(open(sys.argv[1]))
theirs = json.load(open(sys.argv[2]))
names = {r["name"] for r in theirs if r["provider"] == "System.Runtime"}
mine = {r["name"] for r in ours if r["provider"] == "System.Runtime"}
print("# the runtime sent %d System.Runtime counters; pipeprof sends %s" % (len(names), sorted(mine)), file=sys.stderr)
if not mine or not mine <= names:
    print("FAIL: pipeprof's %s are not all among the runtime's %s" % (sorted(mine), sorted(names)), file=sys.stderr)
    sys.exit(1)
units = {r["name"]: r["units"] for r in theirs}
for r in ours:
    if r["provider"] == "System.Runtime" and units.get(r["name"]) != r["units"]:
        print("FAIL: %s in %s, the runtime says %s" % (r["name"], r["units"], units.get(r["name"])), file=sys.stderr)
        sys.exit(1)
PY
note "the real runtime's counters read the same way; names and units agree"

# 3. dotnet-counters itself, where it is installed (tools/install-deps.sh tries): its JSON and
# CSV files must be valid and hold the counters with plausible values.
if command -v dotnet-counters >/dev/null; then
  kill "$dn" 2>/dev/null || true
  LD_PRELOAD=$PRELOAD "$BUSY" 300 --until "$T/stop.2" >/dev/null &
  host2=$!
  PP_PIDS+=($host2)
  wait_socket "$host2" >/dev/null
  for fmt in json csv; do
    timeout 60 dotnet-counters collect -p "$host2" --format "$fmt" -o "$T/dc.$fmt" \
      --duration 00:00:04 >"$T/dc.$fmt.log" 2>&1 || { cat "$T/dc.$fmt.log"; fail "dotnet-counters collect --format $fmt"; }
  done
  touch "$T/stop.2"
  python3 - "$T/dc.json" "$T/dc.csv" <<'PY' || fail "dotnet-counters' files"
import csv, json, os, sys
d = json.load(open(sys.argv[1]))  # invalid JSON fails here
cpu = [e["value"] for e in d["Events"] if e["provider"] == "System.Runtime" and e["name"].startswith("CPU Usage")]
ws = [e["value"] for e in d["Events"] if e["provider"] == "System.Runtime" and e["name"].startswith("Working Set")]
rows = [r for r in csv.reader(open(sys.argv[2]))]
print("# dotnet-counters json: cpu %s, working set %s; csv: %d rows" % (cpu, ws, len(rows)), file=sys.stderr)
if len(cpu) < 2 or not ws or len(rows) < 3:
    sys.exit("FAIL: dotnet-counters recorded too little")
if not all(0 < v <= 100 for v in cpu):
    sys.exit("FAIL: dotnet-counters shows CPU usage %s" % cpu)
PY
  note "dotnet-counters collect: valid JSON and CSV, CPU usage of one busy thread"
else
  echo "SKIP (loud): dotnet-counters is not installed; its session was made with its client libraries instead" >&2
fi
echo "dotnet-counters: ok"
