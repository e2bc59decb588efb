#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/agent-perf-ring.sh - the perf-ring engine (PIPEPROF_CPU_ENGINE=perf-ring, a prototype:
# agent/perf-ring.c): CPU samples read from each thread's perf ring buffer and unwound from its
# stack copy by an agent thread, with no signal. Checked:
#   - pp-sample-groundtruth's functions' shares within 1 point of their measured CPU, with and
#     without frame pointers (the copy unwound by CFI), at 250 Hz, the trace naming perf_ring (its
#     kernel time: agent-groundtruth-syscalls);
#   - no SIGPROF reaches the process while it records (strace counts the deliveries; the same
#     recording on the perf engine must show some, or the count proves nothing);
#   - as nobody with no RLIMIT_MEMLOCK, the rings past perf_event_mlock_kb cannot be mapped: those
#     threads fall back to perf's signal (logged once, engine "mixed"), and the shares still hold.
# Skipped, loudly, where perf_event_open is refused.
set -euo pipefail
B=${PP_BINARY_DIR:?}
S=${PP_SOURCE_DIR:?}
PP=$B/bin/pipeprof
EVAL=$S/tests/tools/groundtruth-eval.py
T=$(mktemp -d /tmp/pp-ring.XXXXXX)
chmod 1777 "$T" # the unprivileged run writes here too
trap 'rm -rf "$T"' EXIT
fail=0

. "$S/tests/groundtruth-lib.sh"

if ! "$B/tests/no-perf" --probe; then
  echo "SKIP (loud): perf_event_open is refused here; the perf-ring engine cannot run"
  exit 0
fi

# A sanitizer build's runtime goes first in the recorded program (tests/ipc-lib.sh), and
# LeakSanitizer cannot run under strace's ptrace.
asan=$(ldd "$PP" 2>/dev/null | awk '/libasan/ {print $3}' || true)
san_env=()
[[ -n $asan ]] && san_env=("LD_PRELOAD=$asan" "ASAN_OPTIONS=detect_leaks=0")

run() {
  local name=$1 hz=$2 engine=$3 wl=$4
  shift 4
  gt_record "$name" "$hz" "$engine" "$wl" 2 -- "$@" || fail=1
  gt_eval "$name" "$hz" || fail=1
}

run ring-fp 250 perf_ring pp-sample-groundtruth env "${san_env[@]}" PIPEPROF_CPU_ENGINE=perf-ring
run ring-nofp 250 perf_ring pp-sample-groundtruth-nofp env "${san_env[@]}" \
  PIPEPROF_CPU_ENGINE=perf-ring
# Kernel time is measured now (its split: tests/agent-groundtruth-syscalls.sh); the old line goes.
if "$PP" report "$T/ring-fp.nettrace" | grep -q 'CPU in the kernel: not measured'; then
  echo "FAIL: the perf-ring recording's report still says its kernel time is not measured"
  fail=1
fi

# sigprof ENGINE: SIGPROF deliveries to the recorder and its child while pp-sample-busy runs 2 s
# at 250 Hz on ENGINE.
sigprof() {
  strace -f -qq -e trace=none -e signal=SIGPROF -o "$T/strace-$1" \
    env "${san_env[@]}" PIPEPROF_CPU_ENGINE="$1" "$PP" record -q --hz 250 -o "$T/busy-$1.nettrace" -- \
    "$B/samples/pp-sample-busy" 2 >/dev/null
  grep -c -- '--- SIGPROF' "$T/strace-$1" || true
}
if command -v strace >/dev/null && strace -f -qq -e trace=none -o /dev/null true 2>/dev/null; then
  perf_sigs=$(sigprof perf)
  ring_sigs=$(sigprof perf-ring)
  ring_samples=$("$PP" report --format json "$T/busy-perf-ring.nettrace" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["samples"])')
  echo "SIGPROF deliveries: perf engine $perf_sigs, perf-ring $ring_sigs ($ring_samples samples)"
  if ((perf_sigs == 0)); then
    echo "FAIL: strace saw no SIGPROF under the perf engine: the count checks nothing"
    fail=1
  fi
  if ((ring_sigs != 0 || ring_samples < 100)); then
    echo "FAIL: perf-ring: $ring_sigs SIGPROF deliveries (expected 0), $ring_samples samples"
    fail=1
  fi
else
  echo "NOTE (loud): no usable strace; the no-signal check is skipped"
fi

if command -v setpriv >/dev/null && command -v prlimit >/dev/null && [[ $(id -u) == 0 ]]; then
  # perf_event_mlock_kb per CPU, then RLIMIT_MEMLOCK: with none, some of the workload's rings
  # (64+1 pages each at 250 Hz) are refused.
  run ring-nobody 250 mixed pp-sample-groundtruth prlimit --memlock=0 \
    setpriv --reuid=nobody --regid=nogroup --clear-groups env "${san_env[@]}" \
    PIPEPROF_CPU_ENGINE=perf-ring PIPEPROF_LOG_LEVEL=warn
else
  echo "NOTE (loud): the locked-memory fallback check needs root (to drop to nobody) and prlimit"
fi
[[ $fail == 0 ]] || { echo "agent-perf-ring: FAILED"; exit 1; }
echo "agent-perf-ring: ok"
