#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-summary.sh - `pipeprof record` shares its stderr with the recorded program, so
# its summary is one line (issue 20): the output and its format, samples, seconds, threads, the
# effective rate, every loss and every process without a file of its own; and a second one, only
# when the trace holds any, with CPU in the kernel (and not placed), [not sampled], waiting
# samples and not-running markers (issue 19). -v gives the full summary and the top functions; -q
# none. Before: 5 lines and a top-10 table on every run.
source "$(dirname "$0")/ipc-lib.sh"
WORKLOAD=$B/samples/pp-sample-workload
SIGNALS=$B/tests/hosts/host-signals
[[ -x $WORKLOAD && -x $SIGNALS ]] || fail "missing $WORKLOAD or $SIGNALS"

# record NAME ARGS... -- CMD...: records into $T/NAME.nettrace, CMD's stdout away, its stderr
# (with record's) in $T/NAME.err.
record() {
  local name=$1
  shift
  "${RECORD_ENV[@]}" "$PIPEPROF" record -o "$T/$name.nettrace" "$@" >/dev/null 2>"$T/$name.err" ||
    { cat "$T/$name.err" >&2; fail "$name: record failed"; }
}

# time_line NAME: the summary's second line as report's JSON figures for $T/NAME.nettrace give it
# (nothing when they are all 0): CPU in the kernel as a share of running samples and how much of
# it was not placed, [not sampled] and signal-blocked shares, the stacks cut short while an unwind
# table was pending (a share of all samples), CPU at threads' ends in no sample, CPU in lost
# samples, perf samples left out as early, CPU before threads' first samples (the lottery's),
# waiting samples, not-running markers.
time_line() {
  "$PIPEPROF" report --format json "$T/$1.nettrace" | python3 -c '
import json, sys
j = json.load(sys.stdin)
run = j["running_samples"]
pct = lambda n: "%.1f%%" % (100.0 * n / run if run else 0.0)
parts = []
if j["kernel_samples"]:
    parts.append("CPU in the kernel %s of running samples" % pct(j["kernel_samples"]) +
                 (" (%d of its %d not placed)" % (j["kernel_unplaced_samples"], j["kernel_samples"])
                  if j["kernel_unplaced_samples"] else ""))
if j["not_sampled_samples"]:
    parts.append("[not sampled] " + pct(j["not_sampled_samples"]))
if j["unseen_samples"]:
    parts.append("signal blocked " + pct(j["unseen_samples"]))
if j["tables_pending_samples"]:
    parts.append("%.1f%% of stacks cut short (unwind tables not ready)" %
                 (100.0 * j["tables_pending_samples"] / j["samples"] if j["samples"] else 0.0))
if j["cpu_rest_ms"]:
    parts.append("%.1f ms of CPU at the ends of threads in no sample" % j["cpu_rest_ms"])
if j["cpu_lost_ms"]:
    parts.append("%.1f ms of CPU in lost samples" % j["cpu_lost_ms"])
if j["perf_early_samples"]:  # (chr(39): this program sits in single quotes)
    parts.append("%d perf samples left out, early by their thread%ss CPU clock" %
                 (j["perf_early_samples"], chr(39)))
if j["cpu_chance_ms"]:
    parts.append("%.1f ms of CPU before threads%s first samples (the lottery%ss)" %
                 (j["cpu_chance_ms"], chr(39), chr(39)))
if j["waiting_samples"]:
    parts.append("%d waiting samples" % j["waiting_samples"])
if j["not_running_markers"]:
    parts.append("%d not-running markers (%d with a wait stack)" % (j["not_running_markers"],
                                                                    j["wait_markers"]))
print("pipeprof: " + "; ".join(parts) if parts else "")
'
}

# 1. By default: one line on stderr (the workload writes none), which names the output, the
# format, the samples, the threads, the rate and that nothing was lost, and a second one only
# for what the trace holds beyond that (a CPU-mode trace's not-running markers at least).
record one --hz 200 -- "$WORKLOAD" 1
want=$(time_line one)
[[ $(wc -l <"$T/one.err") == $((${#want} > 0 ? 2 : 1)) ]] ||
  { cat "$T/one.err" >&2; fail "the summary is not one line and the time line ('$want')"; }
[[ $(sed -n 2p "$T/one.err") == "$want" ]] || fail "the second line is not '$want': $(cat "$T/one.err")"
line=$(head -1 "$T/one.err")
samples=$("$PIPEPROF" report --format json "$T/one.nettrace" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["samples"])')
for want in "^pipeprof: $T/one.nettrace written (nettrace format): " " $samples samples in [0-9.]* s" \
  "from [0-9]* threads" "[0-9.]* Hz effective on the busiest thread (cpu mode, 200 Hz requested)" \
  "nothing lost" "; 1 process recorded$"; do
  grep -q "$want" <<<"$line" || fail "the summary line lacks '$want': $line"
done
note "default: $line"

# 2. Losses are never left out of that line: host-signals offstack burns CPU on a stack the
# agent will not walk, and every such sample is dropped and counted.
record lost -- "$SIGNALS" offstack
line=$(grep '^pipeprof: ' "$T/lost.err" | head -1 || true)
[[ $(grep -c '^pipeprof: ' "$T/lost.err") == $(($(time_line lost | wc -c) > 1 ? 2 : 1)) ]] ||
  { cat "$T/lost.err" >&2; fail "lost: not one line and the time line"; }
lost=$("$PIPEPROF" report --format json "$T/lost.nettrace" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["lost_samples"])')
[[ $lost -gt 0 ]] || fail "the offstack host lost no samples (cannot check the summary)"
grep -q ", lost $lost samples dropped by the agent and [0-9]* events in the trace;" <<<"$line" ||
  fail "the summary line hides the $lost lost samples: $line"
note "losses: $line"
# Their CPU (300 ms burned on the alternate stack) is counted lost, in no sample, and said on the
# time line; before ringdrop the thread's next sample took it: 10 intervals of [kernel, not
# placed] and 10 of [not sampled] at 100 Hz, 0 ms lost.
cpu_lost=$("$PIPEPROF" report --format json "$T/lost.nettrace" |
  python3 -c 'import json,sys; print(int(json.load(sys.stdin)["cpu_lost_ms"]))')
((cpu_lost >= 150)) || fail "the offstack host's CPU on its alternate stack: $cpu_lost ms lost"
grep -q "ms of CPU in lost samples" "$T/lost.err" ||
  fail "the summary does not say the CPU in lost samples: $(cat "$T/lost.err")"
note "losses: $cpu_lost ms of CPU in lost samples"

# 2a. What no sample holds is said too (AgentLosses): with 2 thread slots the workload's threads
# (main, two workers, the library's own) do not all get one; each refused thread is counted once,
# not again at each scan that finds it (before: 59 for a 2 s run's 5 threads). A recording with
# the default slots refuses none.
base_env=("${RECORD_ENV[@]}")
if ((${#base_env[@]} == 0)); then base_env=(env); fi
RECORD_ENV=("${base_env[@]}" PIPEPROF_MAX_THREADS=2)
record refused -- "$WORKLOAD" 1
RECORD_ENV=("${base_env[@]}")
refused=$("$PIPEPROF" report --format json "$T/refused.nettrace" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["threads_dropped"])')
[[ $refused -ge 2 && $refused -le 8 ]] ||
  fail "2 slots for the workload's 5 or more threads: $refused refused (want 2 to 8, once each)"
line=$(head -1 "$T/refused.err")
grep -q "requested), $refused threads refused by the agent (its thread table full" \
  <<<"$line" || fail "the summary line hides the $refused refused threads: $line"
"$PIPEPROF" report "$T/refused.nettrace" | grep -q "^threads refused: $refused (the agent's" ||
  fail "report's text does not say the $refused refused threads"
none=$("$PIPEPROF" report --format json "$T/one.nettrace" |
  python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["threads_dropped"], j["cpu_rest_ms"])')
[[ $none == 0\ * ]] || fail "the default recording says threads were refused: $none"
note "refused: $line"

# 2b. Kernel time and waiting samples are said in the second line: pp-sample-syscalls spends much
# of its CPU in system calls (CPU mode), and a wall recording of the workload holds waiting samples.
# Without that line the summary said nothing of either (report and -v did).
record sys -- "$B/samples/pp-sample-syscalls" 1 "$T/sys.json"
record wall --mode wall -- "$WORKLOAD" 1
for name in sys wall; do
  want=$(time_line "$name")
  line=$(grep '^pipeprof: ' "$T/$name.err" | sed -n 2p)
  note "$name: $line"
  case $name in
  sys) grep -q "^pipeprof: CPU in the kernel [0-9.]*% of running samples" <<<"$want" ||
    fail "report counts no kernel time in pp-sample-syscalls ('$want'): cannot check the summary" ;;
  wall) grep -q "; [1-9][0-9]* waiting samples\|^pipeprof: [1-9][0-9]* waiting samples" <<<"$want" ||
    fail "report counts no waiting samples in a wall recording ('$want'): cannot check the summary" ;;
  esac
  [[ $line == "$want" ]] || { cat "$T/$name.err" >&2; fail "$name: the second line is not '$want'"; }
  [[ $(grep -c '^pipeprof: ' "$T/$name.err") == 2 ]] || fail "$name: not two summary lines"
done

# 3. -v: the full summary and the top functions, as before.
record verbose -v --hz 200 -- "$WORKLOAD" 1
for want in "written (nettrace format)$" "samples in" "effective rate" "lost:" "top [0-9]* functions"; do
  grep -q "$want" "$T/verbose.err" || { cat "$T/verbose.err" >&2; fail "-v lacks '$want'"; }
done
[[ $(wc -l <"$T/verbose.err") -gt 5 ]] || fail "-v gives $(wc -l <"$T/verbose.err") lines"

# 4. -q: nothing at all.
record quiet -q -- "$WORKLOAD" 1
[[ ! -s $T/quiet.err ]] || fail "-q printed: $(cat "$T/quiet.err")"
# 5. The timers forced above the kernel's tick take their samples at the tick (each weighed for
# several intervals, where a tick found the thread): record says so on stderr, even with -q, and
# report says the trace is tick-bound ("tick_bound"); at the tick's rate, or with the default
# engine (perf-ring above the tick), neither does.
# (CLOCK_MONOTONIC_COARSE, 6 on Linux, ticks at the tick, as the agent and record take it)
tick=$(python3 -c 'import time; print(round(1 / time.clock_getres(6)))')
tick_bound() {
  "$PIPEPROF" report --format json "$T/$1.nettrace" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["tick_bound"], d["tick_hz"])'
}
if ((tick >= 1000 || tick < 10)); then
  echo "SKIP (loud): the kernel's tick is $tick Hz: no rate up to 1000 Hz lies above it"
else
  # (added to RECORD_ENV, which under ASan preloads its runtime: ipc-lib.sh)
  base_env=("${RECORD_ENV[@]}")
  if ((${#base_env[@]} == 0)); then base_env=(env); fi
  RECORD_ENV=("${base_env[@]}" PIPEPROF_CPU_ENGINE=timer)
  record timerhigh -q --hz 1000 -- "$WORKLOAD" 1
  grep -q "PIPEPROF_CPU_ENGINE=timer at 1000 Hz is above the kernel's tick ($tick Hz)" \
    "$T/timerhigh.err" || { cat "$T/timerhigh.err" >&2; fail "no tick-bound warning at 1000 Hz"; }
  [[ $(tick_bound timerhigh) == "True $tick" ]] ||
    fail "report: tick_bound/tick_hz $(tick_bound timerhigh) for the timers at 1000 Hz"
  "$PIPEPROF" report "$T/timerhigh.nettrace" | grep -q "^tick-bound: the timer engine samples at the kernel's tick ($tick Hz), below the 1000 Hz asked" ||
    fail "report's text does not say the timers were tick-bound"
  record timertick -q --hz "$tick" -- "$WORKLOAD" 1
  [[ ! -s $T/timertick.err && $(tick_bound timertick) == "False $tick" ]] ||
    fail "the timers at the tick's $tick Hz: '$(cat "$T/timertick.err")', $(tick_bound timertick)"
  RECORD_ENV=("${base_env[@]}")
  record autohigh -q --hz 1000 -- "$WORKLOAD" 1
  [[ ! -s $T/autohigh.err && $(tick_bound autohigh) == "False $tick" ]] ||
    fail "auto at 1000 Hz: '$(cat "$T/autohigh.err")', $(tick_bound autohigh)"
  note "timers above the tick: $(cat "$T/timerhigh.err")"
fi
echo "cli-record-summary: ok"
