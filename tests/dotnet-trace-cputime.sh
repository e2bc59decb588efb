#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-trace-cputime.sh - dotnet-trace's time views tell the truth about a CPU-mode host.
# `dotnet-trace collect --diagnostic-port` records pp-sample-groundtruth (agent preloaded, CPU
# mode at 250 Hz) from its start to its exit, `dotnet-trace convert --format speedscope` runs
# TraceEvent's thread-time computer (the one PerfView's Thread Time view uses), and each work
# function's CPU_TIME share must be within 1.5 points of its share of the CPU time the threads
# measured themselves; CPU_TIME in all must be within 5 % of the measured total. A second case
# records pp-sample-syscalls (much of its CPU in system calls): the same within 2 points, and
# TraceEvent's CPU_TIME under the [kernel] frames at least half the threads' tick-sampled system
# time. In both, each function's share of CPU_TIME must be within 0.5 points of its share of the
# samples pipeprof counts in the same trace (`pipeprof convert --format folded`): what TraceEvent
# shows is what was sampled. (The syscall case's 2 points: on a machine at load 10 to 14 the
# sampling itself gives a call's kernel time to the code beside it, 2.3 to 3.8 points in 4 of 10
# runs, the folded counts as far off as CPU_TIME; that is the agent's part of issue 19.)
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
trap 'kill $(jobs -p) 2>/dev/null || true; [[ -n ${KEEP:-} ]] || rm -rf "$T"' EXIT

# case NAME WORKLOAD MAX_ERROR ENV...: one recording from the workload's start to its exit,
# converted, and its CPU_TIME per work function against the truth and the counted samples.
case_() {
  local name=$1 wl=$2 max=$3 ss
  shift 3
  timeout 120 "$DT" collect --diagnostic-port "$T/$name.sock" -o "$T/$name.nettrace" \
    >"$T/$name.collect.log" 2>&1 &
  local D=$!
  for _ in $(seq 300); do [[ -S $T/$name.sock ]] && break; sleep 0.1; done
  [[ -S $T/$name.sock ]] || { cat "$T/$name.collect.log"; echo "FAIL: dotnet-trace did not listen"; exit 1; }
  env "$@" PIPEPROF_HZ=250 PIPEPROF_MODE=cpu DOTNET_DiagnosticPorts=$T/$name.sock \
    LD_PRELOAD=$B/lib/libpipeprof.so "$B/samples/$wl" 4 "$T/$name.truth.json"
  wait "$D" || { cat "$T/$name.collect.log"; echo "FAIL: dotnet-trace collect"; exit 1; }
  grep -q "Trace completed" "$T/$name.collect.log" ||
    { cat "$T/$name.collect.log"; echo "FAIL: no trace"; exit 1; }
  timeout 180 "$DT" convert --format speedscope -o "$T/$name.speedscope.json" "$T/$name.nettrace" \
    >"$T/$name.convert.log" 2>&1 || { cat "$T/$name.convert.log"; echo "FAIL: dotnet-trace convert"; exit 1; }
  ss=$(ls "$T/$name".speedscope*.json | head -1)
  "$B/bin/pipeprof" convert --format folded -o "$T/$name.folded" "$T/$name.nettrace"
  echo "$name:"
  python3 "$S/tests/tools/groundtruth-eval.py" "$T/$name.truth.json" "$ss" --speedscope \
    --max-error "$max" --min-kernel 0.5 --layout "$T/$name.folded"
  python3 - "$T/$name.truth.json" "$ss" <<'PY'
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

case_ compute pp-sample-groundtruth 1.5
# Much of the CPU in system calls, the engine auto chooses at 250 Hz (timers; bursty threads on
# perf_event with a kernel locator): kernel time under [kernel] over the calls' stacks.
case_ syscalls pp-sample-syscalls 2.0
echo "dotnet-trace-cputime: ok"
