#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/agent-groundtruth.sh - CPU profiles match what really happened. pp-sample-groundtruth's
# threads (always busy; 1.5 ms on / 2.5 off; 7 on / 1 off; 0.6 every 6 ms) measure their own
# CPU time; `pipeprof record` profiles them, and each work function's share of the samples must
# be within 1 point of its share of the measured CPU time:
#   - both CPU engines (perf_event; timers forced with PIPEPROF_CPU_ENGINE=timer, and chosen by
#     the agent itself when a seccomp filter refuses perf_event_open at 1000 Hz), with and
#     without frame pointers, at 250 Hz;
#   - as an unprivileged user (setpriv to nobody) at 100, 250 and 1000 Hz, where the samples must
#     also reach 99 % of (measured CPU seconds x rate), with the engine the agent chooses itself:
#     CPU-time timers up to the kernel's tick rate (bursty threads the tick misses moved to
#     perf_event), perf_event above it, its samples from a ring without a signal (perf-ring).
set -euo pipefail
B=${PP_BINARY_DIR:?}
S=${PP_SOURCE_DIR:?}
PP=$B/bin/pipeprof
EVAL=$S/tests/tools/groundtruth-eval.py
T=$(mktemp -d /tmp/pp-gt.XXXXXX)
chmod 1777 "$T" # the unprivileged runs write here too
trap 'rm -rf "$T"' EXIT
fail=0

. "$S/tests/groundtruth-lib.sh"

# run NAME HZ ENGINE-CHECK WORKLOAD PREFIX...: one recording and its evaluation. The workload runs
# until its threads have used 2 CPU-s together (MIN_CPU), not for its 3 s alone: a share is
# measured to a point from a few hundred samples, and on a loaded machine 3 s gave the threads
# 0.07 CPU-s (18 samples at 250 Hz, timer-fp 18.2 points off) and 0.33 CPU-s (34 samples at
# 100 Hz, nobody-100 2.1 points off) beside an ASan ctest run (load about 20).
run() {
  local name=$1 hz=$2 engine=$3 wl=$4
  shift 4
  gt_record "$name" "$hz" "$engine" "$wl" 2 -- "$@" || fail=1
  gt_eval "$name" "$hz" || fail=1
}

perf_ok=1
if ! "$B/tests/no-perf" --probe; then
  perf_ok=0
  echo "NOTE (loud): perf_event_open is refused here; only the timer engine is checked"
fi

if [[ $perf_ok == 1 ]]; then
  run perf-fp 250 perf_event pp-sample-groundtruth env PIPEPROF_CPU_ENGINE=perf
  run perf-nofp 250 perf_event pp-sample-groundtruth-nofp env PIPEPROF_CPU_ENGINE=perf
fi
# Timers notice an expiry only at a tick that finds the thread running: the 0.6-in-6 ms thread
# can go 0.5 s of wall time (50 ms of its CPU) without a sample. Weights give that CPU to the
# next sample, and the CPU a thread burns after its last sample comes in as a final sample at its
# exit (before, that end was lost: up to 90 ms, 1.2 points in one run in five). Held to 1 point,
# as the perf engine.
run timer-fp 250 timer pp-sample-groundtruth env PIPEPROF_CPU_ENGINE=timer
run timer-nofp 250 timer pp-sample-groundtruth-nofp env PIPEPROF_CPU_ENGINE=timer
# Above the tick's rate auto asks for perf_event (its rings); a seccomp filter refuses it, and
# the agent falls back to the timers by itself.
run seccomp-auto 1000 timer pp-sample-groundtruth "$B/tests/no-perf"

if [[ $perf_ok == 1 ]] && command -v setpriv >/dev/null && [[ $(id -u) == 0 ]]; then
  # the kernel's tick rate: CLOCK_MONOTONIC_COARSE (6) ticks in jiffies
  tick=$(python3 -c 'import time; print(round(1 / time.clock_getres(6)))')
  for hz in 100 250 1000; do
    engine=ring-or-mixed # auto above the tick: rings (perf's signal for a thread too deep)
    ((hz <= tick)) && engine=timer-or-mixed
    MIN_CAPTURE=0.99 run "nobody-$hz" "$hz" "$engine" pp-sample-groundtruth \
      setpriv --reuid=nobody --regid=nogroup --clear-groups
  done
else
  echo "NOTE (loud): the unprivileged capture check needs root (to drop to nobody) and perf_event"
fi
[[ $fail == 0 ]] || { echo "agent-groundtruth: FAILED"; exit 1; }
echo "agent-groundtruth: ok"
