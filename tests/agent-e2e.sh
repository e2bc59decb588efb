#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/agent-e2e.sh - the whole path: the sample workload runs with LD_PRELOAD=libpipeprof.so,
# `pipeprof collect -p` records it in CPU mode and in wall mode, and `pipeprof report` names the
# hot native functions. The workload's own output must be unchanged by the agent. Where
# dotnet-trace is installed, it records the same host and `dotnet-trace convert` to speedscope
# shows the native function names; otherwise that part skips loudly.
source "$(dirname "$0")/ipc-lib.sh"
source "$(dirname "$0")/workload-lib.sh"
WORKLOAD=$B/samples/pp-sample-workload
[[ -x $WORKLOAD ]] || fail "missing $WORKLOAD"

# The workload runs until its recording is done ($T/stop.*, 300 s at most), and the CPU-mode
# recording until the two workers have used 4 s of CPU, what a fixed 2 s gave on a quiet
# machine (about 400 samples at 99 Hz): a fixed 2 s held 22 samples at load 20 (under the 50
# asked for), and a .NET tool's start-up can outlast a fixed 4 s run.
# CPU mode: worker-a splits its CPU 3:1 between fn_a and fn_b, worker-b runs fn_c only.
LD_PRELOAD=$PRELOAD "$WORKLOAD" 300 --until "$T/stop.cpu" >"$T/cpu.out" & PP_PIDS+=($!); W=$!
wait_socket "$W" >/dev/null
"$PIPEPROF" collect -p "$W" -o "$T/cpu.nettrace" >"$T/collect.log" 2>&1 & PP_PIDS+=($!); C=$!
read -r cpu wall < <(wait_cpu "$W" 4 120)
kill -INT "$C"
wait "$C" || { cat "$T/collect.log"; fail "pipeprof collect -p"; }
touch "$T/stop.cpu"
wait "$W" || fail "the workload failed under the agent"
workload_check_cpu 50 "$wall"
waiting=$(json_get "$T/cpu.json" "r['waiting_samples']")
[[ $waiting -eq 0 ]] || fail "CPU mode reported $waiting waiting samples"
note "cpu mode: $samples samples in $wall s ($cpu s of CPU), fn_a $a, fn_b $b"

# Wall mode, chosen per session through the filter data: the main thread sleeps (waiting).
LD_PRELOAD=$PRELOAD "$WORKLOAD" 300 --until "$T/stop.wall" >"$T/wall.out" & PP_PIDS+=($!); W=$!
wait_socket "$W" >/dev/null
"$PIPEPROF" collect -p "$W" --duration 2 -o "$T/wall.nettrace" \
  --providers 'Microsoft-DotNETCore-SampleProfiler:0:4:mode=wall;hz=200,pipeprof:0:4' >"$T/collect2.log" 2>&1 ||
  { cat "$T/collect2.log"; fail "pipeprof collect (wall)"; }
touch "$T/stop.wall"
wait "$W" || fail "the workload failed under the agent in wall mode"
grep -q "^worker-a cpu .* checksum " "$T/wall.out" || fail "the workload's output changed in wall mode"
"$PIPEPROF" report --format json --threads "$T/wall.nettrace" >"$T/wall.json"
waiting=$(json_get "$T/wall.json" "r['waiting_samples']")
[[ $waiting -gt 50 ]] || fail "wall mode: only $waiting waiting samples of the sleeping main thread"
workload_check_wall_threads
note "wall mode: $waiting waiting samples; threads: $names"

DT=$(command -v dotnet-trace || true)
[[ -n $DT ]] || skip "dotnet-trace is not installed: the pipeprof path passed, the dotnet-trace part did not run"
LD_PRELOAD=$PRELOAD "$WORKLOAD" 300 --until "$T/stop.dt" >"$T/dt.out" & PP_PIDS+=($!); W=$!
wait_socket "$W" >/dev/null
timeout 60 "$DT" collect -p "$W" --providers Microsoft-DotNETCore-SampleProfiler \
  --duration 00:00:00:02 -o "$T/dt.nettrace" >"$T/dt.log" 2>&1 || { cat "$T/dt.log"; fail "dotnet-trace collect"; }
touch "$T/stop.dt"
wait "$W" || true
(cd "$T" && timeout 120 "$DT" convert --format speedscope -o "$T/dt.json" "$T/dt.nettrace" >"$T/conv.log" 2>&1) ||
  { cat "$T/conv.log"; fail "dotnet-trace convert"; }
f=$(compgen -G "$T/dt*speedscope.json" | head -1 || true)
[[ -n $f ]] || fail "dotnet-trace convert wrote no speedscope file"
grep -q 'pp_workload_fn_c' "$f" || fail "speedscope output from dotnet-trace convert lacks native names"
note "dotnet-trace convert: native names present"
echo "agent-e2e: ok"
