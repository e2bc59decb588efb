#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-trace-cputime.sh - dotnet-trace's time views tell the truth about a CPU-mode host.
# `dotnet-trace collect --diagnostic-port` records pp-sample-groundtruth (agent preloaded, CPU
# mode at 250 Hz) from its start to its exit, `dotnet-trace convert --format speedscope` runs
# TraceEvent's thread-time computer (the one PerfView's Thread Time view uses), and each work
# function's CPU_TIME share must be within 1.5 points of its share of the CPU time the threads
# measured themselves; CPU_TIME in all must be within 5 % of the measured total. A second case
# records pp-sample-syscalls (much of its CPU in system calls): the same limit, and TraceEvent's
# CPU_TIME under the [kernel] frames at least half the threads' tick-sampled system time. In both,
# a [kernel] or [kernel, not placed] frame must stand in the "[kernel]" module ("[kernel]!.[kernel]"
# in TraceEvent's names): main's "libpipeprof.so!.[kernel]", the agent's library as if the profiler
# had spent the time, failed both cases (the compute case at 250 Hz has a few kernel samples too).
# In both, each function's share of CPU_TIME must be within 0.5 points of its share of the samples pipeprof
# counts in the same trace (`pipeprof convert --format folded`): what TraceEvent shows is what was
# sampled (pooled as the truth is). Each case is judged on a pool of up to 3 recordings (CPU_TIME,
# counted samples and measured CPU added up), as issue 19 allows where one run is too few samples:
# on a loaded machine (load 13 to 20) a 4 s run of the compute case got 93 samples in all, and the
# syscall case's I/O-like thread 30 to 75, whose write/parse split then has a standard error of
# 6 to 9 % of its CPU, one to two points of the profile, so single runs missed 1.5 points by
# chance alone (and by 2 to 3 points in CI before the fix to auto's move to perf_event, which
# gave the timers' missed CPU to the first perf sample's user-code stack; docs/architecture.md).
set -euo pipefail
B=${PP_BINARY_DIR:?}
S=${PP_SOURCE_DIR:?}
export PATH="$PATH:$HOME/.dotnet/tools"
DT=$(command -v dotnet-trace || true)
if [[ -z $DT ]]; then
  echo "SKIP (loud): dotnet-trace is not installed (dotnet tool install -g dotnet-trace)" >&2
  exit 77
fi
T=$(mktemp -d /tmp/pp-dtcpu.XXXXXX)
. "$S/tests/groundtruth-lib.sh"
trap 'kill $(jobs -p) 2>/dev/null || true; [[ -n ${KEEP:-} ]] || rm -rf "$T"' EXIT

# record NAME WORKLOAD: one recording from the workload's start to its exit, converted and counted
# (folded); CPU_TIME in all within 5 % of the CPU the threads measured.
record() {
  local name=$1 wl=$2 ss
  timeout 120 "$DT" collect --diagnostic-port "$T/$name.sock" -o "$T/$name.nettrace" \
    >"$T/$name.collect.log" 2>&1 &
  local D=$!
  for _ in $(seq 300); do [[ -S $T/$name.sock ]] && break; sleep 0.1; done
  [[ -S $T/$name.sock ]] || { cat "$T/$name.collect.log"; echo "FAIL: dotnet-trace did not listen"; exit 1; }
  env PIPEPROF_HZ=250 PIPEPROF_MODE=cpu DOTNET_DiagnosticPorts=$T/$name.sock \
    LD_PRELOAD=$B/lib/libpipeprof.so "$B/samples/$wl" 4 "$T/$name.truth.json"
  wait "$D" || { cat "$T/$name.collect.log"; echo "FAIL: dotnet-trace collect"; exit 1; }
  grep -q "Trace completed" "$T/$name.collect.log" ||
    { cat "$T/$name.collect.log"; echo "FAIL: no trace"; exit 1; }
  timeout 180 "$DT" convert --format speedscope -o "$T/$name.speedscope.json" "$T/$name.nettrace" \
    >"$T/$name.convert.log" 2>&1 || { cat "$T/$name.convert.log"; echo "FAIL: dotnet-trace convert"; exit 1; }
  ss=$(ls "$T/$name".speedscope*.json | head -1)
  [[ $ss == "$T/$name.speedscope.json" ]] || mv "$ss" "$T/$name.speedscope.json"
  "$B/bin/pipeprof" convert --format folded -o "$T/$name.folded" "$T/$name.nettrace"
  echo "$name:"
  python3 - "$T/$name.truth.json" "$T/$name.speedscope.json" <<'PY' || { echo "FAIL: $name's CPU_TIME"; exit 1; }
import json, sys
truth = sum(v for k, v in json.load(open(sys.argv[1])).items() if not k.startswith("_")) / 1e6
d = json.load(open(sys.argv[2]))
frames = [f["name"] for f in d["shared"]["frames"]]
cpu = 0.0
for p in d["profiles"]:
    opened = []
    for e in p["events"]:
        if e["type"] == "O":
            opened.append(e["at"])
        else:
            at = opened.pop()
            if frames[e["frame"]] == "CPU_TIME":
                cpu += e["at"] - at
print("  CPU_TIME %.0f ms, measured %.0f ms" % (cpu, truth))
sys.exit(0 if abs(cpu - truth) <= 0.05 * truth else 1)
PY
}

# case NAME WORKLOAD RUNS: recordings until the pool of them (CPU_TIME, counted samples and
# measured CPU added up) is within 1.5 points of the truth per work function, with [kernel] at
# least half the system time, and within 0.5 points of the counted samples, at most RUNS, or more
# while the pool holds fewer samples than a quiet run (gt_pool_more): in a fresh-clone CI run at
# load 17 to 19 (2026-11-27) the syscall case's runs held 250 samples each, and the write/compute
# thread's 70 read sc_write 3.00, 2.28 and 1.31 points low over pools of 1 to 3 (1.55 at the
# limit of 1.5), where nine single runs at that load by hand scattered from -1.94 to +2.60
# (pooled, -1.07): a sampling error of about 1.6 points per run, not a bias.
case_() {
  local name=$1 wl=$2 runs=$3 i=0 pool=() layout=() folded=()
  while ((i == 0)) || gt_pool_more "$i" "$runs" "${folded[@]}"; do
    i=$((i + 1))
    record "$name-$i" "$wl"
    pool+=("$T/$name-$i.truth.json" "$T/$name-$i.speedscope.json")
    layout+=(--layout "$T/$name-$i.folded")
    folded+=("$T/$name-$i.folded")
    echo "  $name, pool of $i ($(gt_samples "${folded[@]}") samples):"
    python3 "$S/tests/tools/groundtruth-eval.py" "${pool[@]}" --speedscope --max-error 1.5 \
      --min-kernel 0.5 "${layout[@]}" && return
  done
  echo "FAIL: $name: CPU_TIME of the pool of $i is off"
  exit 1
}

case_ compute pp-sample-groundtruth 3
# Much of the CPU in system calls, the engine auto chooses at 250 Hz (timers; bursty threads on
# perf_event with a kernel locator): kernel time under [kernel] over the calls' stacks.
case_ syscalls pp-sample-syscalls 3
echo "dotnet-trace-cputime: ok"
