#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/agent-accuracy.sh - issue 4's accuracy and unwinding checks, through the whole path
# (LD_PRELOAD, pipeprof collect, report/convert):
# - CPU mode on pp-sample-workload: fn_a's share of worker-a's samples is within 3 percentage
#   points of the share of work units the workload reports (about 75%), and each worker's share
#   of samples is within 3 points of its share of the CPU time the workload measured itself;
# - the same workload built with -fomit-frame-pointer unwinds (DWARF CFI) to the thread's start
#   (clone3) in at least 99% of samples.
source "$(dirname "$0")/ipc-lib.sh"

# record BINARY CPU_SECONDS OUT: runs BINARY under the agent and records it until it has used
# CPU_SECONDS of CPU (its two workers together; 120 s at most), then lets it finish. A fixed
# SECONDS-1 s window of a SECONDS run held 366 samples of worker-a under ASan at load 30 (1 of 2
# ASan runs), under the 600 asked for; 4 s of CPU give about 2000 at 1000 Hz.
record() {
  LD_PRELOAD=$PRELOAD "$1" 300 --until "$3.stop" >"$3.out" & PP_PIDS+=($!)
  local w=$! c cpu wall
  wait_socket "$w" >/dev/null
  "$PIPEPROF" collect -p "$w" -o "$3" \
    --providers 'Microsoft-DotNETCore-SampleProfiler:0:4:mode=cpu;hz=1000,pipeprof:0:4' >"$3.log" 2>&1 &
  c=$!
  PP_PIDS+=($c)
  read -r cpu wall < <(wait_cpu "$w" "$2" 120)
  note "$1: recorded $wall s, $cpu s of CPU"
  kill -INT "$c"
  wait "$c" || { cat "$3.log"; fail "pipeprof collect"; }
  touch "$3.stop"
  wait "$w" || fail "$1 failed under the agent"
}

record "$B/samples/pp-sample-workload" 4 "$T/cpu.nettrace"
"$PIPEPROF" report --format json --threads --top 50 "$T/cpu.nettrace" >"$T/cpu.json"
python3 - "$T/cpu.json" "$T/cpu.nettrace.out" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
out = open(sys.argv[2]).read()
m = re.search(r"worker-a cpu ([0-9.]+) s units fn_a (\d+) fn_b (\d+); worker-b cpu ([0-9.]+) s", out)
if not m:
    sys.exit("FAIL: unexpected workload output: " + out)
cpu_a, units_a, units_b, cpu_b = float(m[1]), int(m[2]), int(m[3]), float(m[4])
self = {f["function"].split("!")[-1]: f["self"] for f in r["top_self"]}
a, b = self.get("pp_workload_fn_a", 0), self.get("pp_workload_fn_b", 0)
if a + b < 600:
    sys.exit("FAIL: only %d samples of worker-a" % (a + b))
truth = units_a / (units_a + units_b)
share = a / (a + b)
print("# fn_a: %.1f%% of worker-a's %d samples; truth %.1f%% (units)" % (100 * share, a + b, 100 * truth))
if abs(share - truth) > 0.03:
    sys.exit("FAIL: fn_a share %.1f%% is more than 3 points from %.1f%%" % (100 * share, 100 * truth))
threads = {t["name"]: t["samples"] for t in r["per_thread"]}
wa, wb = threads.get("worker-a", 0), threads.get("worker-b", 0)
truth_t = cpu_a / (cpu_a + cpu_b)
share_t = wa / (wa + wb)
print("# worker-a: %.1f%% of the workers' samples; truth %.1f%% (CPU time)" % (100 * share_t, 100 * truth_t))
if abs(share_t - truth_t) > 0.03:
    sys.exit("FAIL: worker-a share %.1f%% is more than 3 points from %.1f%%" % (100 * share_t, 100 * truth_t))
PY

record "$B/samples/pp-sample-workload-nofp" 2 "$T/nofp.nettrace"
"$PIPEPROF" convert --format folded "$T/nofp.nettrace" >"$T/nofp.folded"
python3 - "$T/nofp.folded" <<'PY'
import sys
total = rooted = 0
for line in open(sys.argv[1]):
    stack, count = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")
    total += int(count)
    # frames[0] is the thread; frames[1] the outermost frame the unwinder reached
    if len(frames) > 1 and frames[1].endswith(("!clone3", "!clone", "!_start")):
        rooted += int(count)
if total < 200:
    sys.exit("FAIL: only %d samples of the -fomit-frame-pointer workload" % total)
print("# -fomit-frame-pointer: %d of %d samples (%.2f%%) unwound to the thread start" % (rooted, total, 100.0 * rooted / total))
if rooted < 0.99 * total:
    sys.exit("FAIL: fewer than 99% of the stacks reach the thread start")
PY
echo "agent-accuracy: ok"
