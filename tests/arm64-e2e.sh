#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/arm64-e2e.sh - the arm64 agent's whole path under qemu-user, driven by the host's tools:
# pp-sample-workload built for arm64 runs under qemu-aarch64 with the arm64 libpipeprof.so
# preloaded and serves the diagnostic protocol on its own socket; the x86-64 `pipeprof collect
# -p` records it in CPU mode and in wall mode (chosen per session through the filter data), and
# the x86-64 `pipeprof report` and `convert` name the hot native functions, the threads and the
# sleeping main thread's waiting samples, or their loss, counted (as tests/agent-e2e.sh checks
# natively). The
# workload's own output must be unchanged by the agent.
source "$(dirname "$0")/ipc-lib.sh"
source "$(dirname "$0")/workload-lib.sh"
H=${PP_HOST_BINARY_DIR:-$S/build}
QEMU=${PP_QEMU_AARCH64:-qemu-aarch64}
command -v "$QEMU" >/dev/null || skip "$QEMU is not installed (qemu-user)"
[[ -x $H/bin/pipeprof ]] || skip "no host build at $H (build it first, or set PP_HOST_BINARY_DIR)"
PIPEPROF=$H/bin/pipeprof
WORKLOAD=$B/samples/pp-sample-workload
# emulated NAME SECONDS: the workload under qemu with the agent; sets W to its pid.
emulated() {
  "$QEMU" -L / -E "LD_PRELOAD=$SHIM" -E "TMPDIR=$TMPDIR" "$WORKLOAD" "$2" >"$T/$1.out" 2>"$T/$1.err" &
  W=$!
  PP_PIDS+=("$W")
  wait_socket "$W" >/dev/null
}

emulated cpu 5
"$PIPEPROF" collect -p "$W" --duration 3 -o "$T/cpu.nettrace" >"$T/collect.log" 2>&1 ||
  { cat "$T/collect.log"; fail "pipeprof collect -p (cpu)"; }
wait "$W" || { cat "$T/cpu.err"; fail "the workload failed under the agent"; }
workload_check_cpu 30 3
note "cpu mode under qemu: $samples samples, fn_a $a, fn_b $b"

emulated wall 5
"$PIPEPROF" collect -p "$W" --duration 3 -o "$T/wall.nettrace" \
  --providers 'Microsoft-DotNETCore-SampleProfiler:0:4:mode=wall;hz=100,pipeprof:0:4' >"$T/collect2.log" 2>&1 ||
  { cat "$T/collect2.log"; fail "pipeprof collect -p (wall)"; }
wait "$W" || { cat "$T/wall.err"; fail "the workload failed under the agent in wall mode"; }
grep -q "^worker-a cpu .* checksum " "$T/wall.out" || fail "the workload's output changed in wall mode"
"$PIPEPROF" report --format json --threads "$T/wall.nettrace" >"$T/wall.json"
waiting=$(json_get "$T/wall.json" "r['waiting_samples']")
lost=$(json_get "$T/wall.json" "r['lost_samples']")
# The main thread entered its nanosleep before the session began, so its interposer recorded no
# stack, and natively its waiting samples come from /proc/TID/syscall; under qemu that file shows
# the emulator's registers, so the agent refuses them and counts them lost instead.
[[ $((waiting + lost)) -gt 30 ]] ||
  fail "wall mode: only $waiting waiting samples and $lost lost of the sleeping main thread"
((lost == 0)) || note "NOTE (loud): $lost waiting samples lost: /proc/TID/syscall is qemu's, not the program's"
workload_check_wall_threads
note "wall mode under qemu: $waiting waiting samples; threads: $names"
echo "arm64-e2e: ok"
