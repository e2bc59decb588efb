#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-trace-cputime.sh - dotnet-trace's time views tell the truth about a CPU-mode host.
# `dotnet-trace collect --diagnostic-port` records pp-sample-groundtruth (agent preloaded, CPU
# mode at 250 Hz) from its start to its exit, `dotnet-trace convert --format speedscope` runs
# TraceEvent's thread-time computer (the one PerfView's Thread Time view uses), and each work
# function's CPU_TIME share must be within 2 points of its share of the CPU time the threads
# measured themselves; CPU_TIME in all must be within 5 % of the measured total.
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
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$T"' EXIT
timeout 120 "$DT" collect --diagnostic-port "$T/dt.sock" -o "$T/t.nettrace" >"$T/collect.log" 2>&1 &
D=$!
for _ in $(seq 300); do [[ -S $T/dt.sock ]] && break; sleep 0.1; done
[[ -S $T/dt.sock ]] || { cat "$T/collect.log"; echo "FAIL: dotnet-trace did not listen"; exit 1; }
PIPEPROF_HZ=250 PIPEPROF_MODE=cpu DOTNET_DiagnosticPorts=$T/dt.sock \
  LD_PRELOAD=$B/lib/libpipeprof.so "$B/samples/pp-sample-groundtruth" 4 "$T/truth.json"
wait "$D" || { cat "$T/collect.log"; echo "FAIL: dotnet-trace collect"; exit 1; }
grep -q "Trace completed" "$T/collect.log" || { cat "$T/collect.log"; echo "FAIL: no trace"; exit 1; }
timeout 180 "$DT" convert --format speedscope -o "$T/t.speedscope.json" "$T/t.nettrace" \
  >"$T/convert.log" 2>&1 || { cat "$T/convert.log"; echo "FAIL: dotnet-trace convert"; exit 1; }
ss=$(ls "$T"/t.speedscope*.json | head -1)
python3 "$S/tests/tools/groundtruth-eval.py" "$T/truth.json" "$ss" --speedscope --max-error 2.0
python3 - "$T/truth.json" "$ss" <<'PY'
import json, sys
truth = sum(json.load(open(sys.argv[1])).values()) / 1e6
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
echo "dotnet-trace-cputime: ok"
