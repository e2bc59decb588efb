#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/agent-groundtruth-syscalls.sh - CPU time spent in system calls stands under the stack that
# made them. pp-sample-syscalls's threads (2 ms of write(2) calls / 2 ms of arithmetic; an
# I/O-like thread, 0.6 ms of write(2) calls, 0.4 ms of arithmetic, 3 ms asleep; read(2) of
# /dev/zero; arithmetic; every phase jittered) measure their own CPU time per function, kernel
# time included. Each function's share of the profile must be within 1.5 points of its share of
# that time, and the [kernel] frames must hold at least half the share the kernel's own
# (tick-sampled) system time gives:
#   - perf_event forced, the timers forced and the engine auto chooses, at 250 and 1000 Hz, with
#     and without frame pointers (perf_event: kernel time split off its samples, placed by a
#     CPU-time timer's signal at the system call's return; timers: a sample taken as a system
#     call returns is the call's);
#   - perf-ring (PIPEPROF_CPU_ENGINE=perf-ring) at 250 and 1000 Hz, with and without frame
#     pointers as perf_event, and at 250 Hz beside the busy loops: the same split, read from the
#     thread's ring buffer by the manager, its locator's records met by time in the drain;
#   - with two busy loops running beside the recording: auto at 250 and 1000 Hz, perf_event
#     forced at 250 Hz (its kernel locator armed at the thread's first kernel time, not at the
#     next scan: the kernel time a starved thread split off before its first call was seen went
#     over its compute function, 2-7 points over a pool of 4) and the timers forced at 250 Hz
#     (steady threads, as below); auto above the tick is perf, auto at the tick mostly the timers.
#     The timers forced at 1000 Hz, four times the tick, are not held to it beside the busy
#     loops: there every sample is taken at a tick and weighs about four intervals, so a run
#     holds a quarter of the samples its weights say. Its write/compute split read 1.9 to 3.0
#     points off over pools of 4 runs when the workload timed its phases by its CPU clock; with
#     the task-clock counter 0.23 over 32 runs, but this script's rule (below) applied to those
#     runs failed 4 windows of 25 (pools of 4 at 1.51 to 2.96), and 2 of 25 with pools of up to
#     8: a flaky case (docs/performance.md, "The forced timers beside busy loops"). Measured
#     again on 2026-11-28 (timerio, 59 runs at load 9-26): pooled 0.61, but the rule failed 5
#     windows of 58, and 3 of 58 with pools of up to 8 while under 8000 intervals.
# A split between two functions of one thread is a sampling estimate: at 250 Hz a 4 s run on a
# loaded 2-core machine gives such a thread 70-400 samples, a standard error of 2.5-6 % of its CPU,
# 0.7-1.7 points of the profile. So a case that misses pools its runs (samples and measured CPU
# added up: the error of the pool shrinks with the square root of the runs) and is judged on up to
# 4 runs; a systematic error does not shrink. The forced timers leave the I/O-like thread out, at
# 250 and at 1000 Hz: its samples come only from the ticks that find it running, which on a loaded
# machine is one interval in 2 to 4 (the rest come back as weight), and those ticks are not
# spread evenly over its bursts (it is often scheduled in just after a tick: the first 200 us of a
# burst, where its write(2) calls start, got 10 % of the samples against 20 % for the next 200 us
# in bench/tick-bias, without pipeprof). Its write/parse split read 2.0 points of the profile off
# on a pool of 3 runs (5.2 points of its own split recorded alone beside two busy loops, pool of
# 4), and the bare timer, without pipeprof, was as far off (docs/architecture.md, "The tick's
# bias"): that is the kernel's tick, and why auto moves such a thread to perf_event. With the
# workload's task-clock phases (2026-11-28, 59 runs a case at load 9-26) its own split still reads
# 1.9 to 4.8 points low pooled (0.36 to 0.82 points of the profile, inside 1.5), but this rule
# failed 2 to 11 windows of 55-58 in each of the four cases (250 and 1000 Hz, quiet and beside
# the busy loops): sampling error at these loads, still left out as flaky. The timers' steady
# threads are held to the same limit as the other engines.
set -euo pipefail
B=${PP_BINARY_DIR:?}
S=${PP_SOURCE_DIR:?}
PP=$B/bin/pipeprof
EVAL=$S/tests/tools/groundtruth-eval.py
T=$(mktemp -d /tmp/pp-gtsys.XXXXXX)
busy=()
cleanup() {
  for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
fail=0
MAX_ERROR=1.5
. "$S/tests/groundtruth-lib.sh"

# pooled NAME HZ ENGINE-CHECK WORKLOAD MASK PREFIX...: recordings until the pool of them is within
# the limits, at most 4, or more while the pool holds fewer samples than a quiet run (gt_pool_more:
# at a load of 15 to 19 a 4 s run at 250 Hz held 250 samples)
pooled() {
  local name=$1 hz=$2 engine=$3 wl=$4 mask=$5 i=0 pool=() folded=()
  shift 5
  while ((i == 0)) || gt_pool_more "$i" 4 "${folded[@]}"; do
    i=$((i + 1))
    gt_record "$name-$i" "$hz" "$engine" "$wl" "$mask" -- "$@" || { fail=1; return; }
    pool+=("$T/$name-$i.json" "$T/$name-$i.folded")
    folded+=("$T/$name-$i.folded")
    echo "  pool of $i ($(gt_samples "${folded[@]}") samples):"
    python3 "$EVAL" "${pool[@]}" --hz "$hz" --max-error "$MAX_ERROR" --min-kernel 0.5 && return
  done
  echo "FAIL: $name: the pool of $i runs is off; the last recording:"
  fail=1
  "$PP" report --threads --top 12 "$T/$name-$i.nettrace" 2>&1 | sed 's/^/    /'
}

# Two busy loops beside the recording (once): the threads wait for a core, the samples must not
# care.
start_busy() {
  ((${#busy[@]} == 0)) || return 0
  for _ in 1 2; do
    (while :; do :; done) &
    busy+=($!)
  done
}

# The truth's total holds the threads' CPU outside their work functions ("_outside": the clock
# reads between the phases, 0.2 to 1 % of it), which a profile shows under sc_main; a total of the
# functions alone read each of them low by that fraction of its share. Checked on made-up files
# first: a profile that matches the truth passes, one whose samples went under no function fails.
echo '{"sc_write": 450, "sc_compute": 450, "_outside": 100}' >"$T/eval.json"
printf '%s\n' 'p;sc_main;x!sc_write 45' 'p;sc_main;x!sc_compute 45' \
  'p;sc_main;libc!clock_gettime 10' >"$T/eval-right.folded"
printf '%s\n' 'p;sc_main;x!sc_write 41' 'p;sc_main;x!sc_compute 41' 'p;sc_main 18' \
  >"$T/eval-lost.folded"
if ! python3 "$EVAL" "$T/eval.json" "$T/eval-right.folded" --max-error 0.01; then
  echo "FAIL: the evaluation does not count the CPU outside the work functions in the total"
  fail=1
fi
if python3 "$EVAL" "$T/eval.json" "$T/eval-lost.folded" --max-error 5 >/dev/null; then
  echo "FAIL: the evaluation passed a profile with 8 % of the samples under no work function"
  fail=1
fi

if ! "$B/tests/no-perf" --probe; then
  echo "SKIP (loud): perf_event_open is refused here; the perf engine and auto above the tick are not checked"
  perf_ok=0
else
  perf_ok=1
fi
tick=$(python3 -c 'import time; print(round(1 / time.clock_getres(6)))')
# (above the tick auto's rings; a thread whose walks go deeper than a ring's stack copy stays on
# perf's signal, and the engine reads mixed: agent/timer.c, auto's probation)
auto_at() { if (($1 <= tick)); then echo timer-or-mixed; else echo ring-or-mixed; fi; }
all=15      # every thread of pp-sample-syscalls
steady=13   # all but the I/O-like thread
if [[ $perf_ok == 1 ]]; then
  SECS=5 pooled perf-250 250 perf_event pp-sample-syscalls $all env PIPEPROF_CPU_ENGINE=perf
  pooled perf-1000-nofp 1000 perf_event pp-sample-syscalls-nofp $all env PIPEPROF_CPU_ENGINE=perf
  # perf-ring: the same split, its samples read from the ring by the manager, the locator's
  # records met by time in the drain (agent/perf-ring.c, drain.c's ag_drain_cpu)
  SECS=5 pooled ring-250 250 perf_ring pp-sample-syscalls $all env PIPEPROF_CPU_ENGINE=perf-ring
  pooled ring-1000-nofp 1000 perf_ring pp-sample-syscalls-nofp $all \
    env PIPEPROF_CPU_ENGINE=perf-ring
fi
SECS=5 pooled timer-250-nofp 250 timer pp-sample-syscalls-nofp $steady env PIPEPROF_CPU_ENGINE=timer
pooled timer-1000 1000 timer pp-sample-syscalls $steady env PIPEPROF_CPU_ENGINE=timer
if [[ $perf_ok == 1 ]]; then
  SECS=5 pooled auto-250-nofp 250 "$(auto_at 250)" pp-sample-syscalls-nofp $all env
  pooled auto-1000 1000 "$(auto_at 1000)" pp-sample-syscalls $all env
  start_busy
  SECS=5 pooled loaded-250 250 "$(auto_at 250)" pp-sample-syscalls $all env
  pooled loaded-1000-nofp 1000 "$(auto_at 1000)" pp-sample-syscalls-nofp $all env
  SECS=4 pooled loaded-perf-250-nofp 250 perf_event pp-sample-syscalls-nofp $all \
    env PIPEPROF_CPU_ENGINE=perf
  SECS=4 pooled loaded-ring-250-nofp 250 perf_ring pp-sample-syscalls-nofp $all \
    env PIPEPROF_CPU_ENGINE=perf-ring
fi
start_busy
# The workload is not switched out at its own CPU-time reads (samples/syscalls/main.c, sc_cpu_ns):
# a read of the thread's CPU clock is a point where the scheduler switches out a thread whose slice
# is used up, so its runs began and ended at its phase boundaries, which a tick-sampled profile then
# saw unevenly. Beside the busy loops, with the phases timed by clock_gettime, 250 of the
# write/compute thread's 332 involuntary switches in 2 s came across those reads; with the
# task-clock counter 0 of 219.
if "$B/samples/pp-sample-syscalls" 2 "$T/reads.json" 1 2>"$T/reads.err"; then
  if grep -q "no task-clock counter" "$T/reads.err"; then
    echo "SKIP (loud): no task-clock counter here; the workload's reads are not checked"
  else
    python3 - "$T/reads.json" <<'EOF' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
sw, at = d["_switches"], d["_at_reads"]
print("reads: %d of the thread's %d involuntary switches came across its CPU-time reads" % (at, sw))
if sw < 20:
    print("SKIP (loud): too few switches beside the busy loops to judge")
elif at > 0.1 * sw:
    print("FAIL: the workload is switched out at its own CPU-time reads")
    sys.exit(1)
EOF
  fi
else
  echo "FAIL: pp-sample-syscalls failed: $(cat "$T/reads.err")"
  fail=1
fi
# The timers forced at the tick's rate beside the busy loops were held to 3 points, not 1.5: in a
# fresh-clone CI run (2026-11-26, 17:10, load 4-13) the write/compute thread's split read 1.94 to
# 2.52 points off over pools of 1 to 4 (sc_write high, sc_compute low, no kernel time unplaced,
# the other threads within 0.1), the same sign and size as the tick's bias at 1000 Hz above: a
# thread that waits for a core is scheduled in at a tick, and its CPU-time timer expires at ticks.
# auto moves such a thread to perf_event (loaded-250 holds 1.5); 3 points still catches kernel
# time given to the wrong function, which read 5 to 20 points off before issue 19. Most of that
# was the workload's clock reads, where the starved thread was switched out (see the reads check
# above): with its phases timed by the task-clock counter, 10 runs of this case at load 8-15 (each
# up to 4 recordings) passed 2 points by the first pool in 7, the second in 2, the third in 1
# (pools of 4: 0.26 to 1.36). Held to 2 points; the clock-timed workload also passed 2 in those
# minutes (pools of 4 0.12 to 1.49, single runs up to 5.31), and failed 3 in 1 of 4 runs at load
# 10-18 (a pool of 4 at 4.36). Held to 1.5 since (2026-11-27, timerbias): 48 runs at load 10-26,
# pooled 0.55 (sc_write +0.40, sc_compute -0.55; single runs up to 8.34 at 62-566 samples), and
# this rule over them in recording order, from each run, passed 41 windows of 41 (by the first
# run 21, the second pool 10, the third to seventh 10); the case as run here, 16 times at load
# 5-8, passed 16 (by the first run 12, the second pool 3, the third 1). autobias's split of late weights, tried
# on the forced timers too, took the lean out but put 5.2 to 5.7 % under [not sampled]: not kept.
SECS=4 pooled loaded-timer-250 250 timer pp-sample-syscalls $steady env PIPEPROF_CPU_ENGINE=timer
[[ $fail == 0 ]] || { echo "agent-groundtruth-syscalls: FAILED"; exit 1; }
echo "agent-groundtruth-syscalls: ok"
