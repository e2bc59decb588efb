#!/usr/bin/env bash
# bench/overhead.sh [REPS] [SECONDS] - what sampling costs the host: pp-sample-workload (two
# CPU-bound threads whose work units all cost the same) runs bare, under `pipeprof record` in
# CPU mode with the engine it chooses itself (CPU-time timers up to the kernel's tick rate,
# perf_event above it), with the other engine forced (PIPEPROF_CPU_ENGINE=perf at 100 and 250 Hz,
# =timer at 1000 Hz, where the timers are tick-bound like gperftools' ITIMER_PROF), and under
# gperftools' CPU profiler (LD_PRELOAD=libprofiler.so, Debian libgoogle-perftools-dev), at 100,
# 250 and 1000 Hz, in the same run and in interleaved order. The figure is work units per
# CPU-second of the two workers: time spent in a signal handler (and in the kernel delivering the
# signal) is CPU time of the thread it interrupts, so it shows as fewer units per CPU-second,
# while other processes taking a core (a noisy shared machine) do not change it. Prints per
# configuration the median over REPS runs (default 5) of SECONDS each (default 3), the overhead
# relative to the bare median, the samples each profiler took per worker CPU-second (a profiler
# that takes more samples pays more), and the cost per sample: overhead x CPU time / samples.
# PP_OVERHEAD_PAIRED=1: each run has a bare twin started beside it, and its overhead is taken
# against its twin (median of those per-run overheads): the two share the machine's moments
# (another engineer's build, a busy sibling hyperthread), which moves units per CPU-second by
# +-1.5 % between runs here and so hides a few microseconds per sample; the bare row then gives
# the noise of a twin pair. PP_OVERHEAD_CONFIGS="CONFIG ..." runs only those (and bare): bare,
# pipeprof@HZ, pipeprof-timer@HZ, pipeprof-perf@HZ, pipeprof-perf-ring@HZ (the prototype engine
# without a signal, whose samples are unwound on the agent's manager thread), gperftools@HZ, and
# with
# PP_BASELINE_DIR=OTHER_BUILD base-pipeprof@HZ, base-pipeprof-timer@HZ, base-pipeprof-perf@HZ:
# that build's recorder and library on the same workload binary, in the same rotation (before and
# after in one run). The last column, "other us/sample", is the CPU the run took outside the two
# workers (/usr/bin/time of the whole command: the recorder, the agent's threads, the main thread)
# per sample, where perf-ring's reading and unwinding of the rings shows. The "engines" column is
# the CPU engine each run's trace names (cpu_engine: timer, perf_event, perf_ring, or mixed when
# auto moved a thread the tick missed off the timers), with its count of runs, and each run's
# overhead is tagged with its engine where a configuration's runs differ: under load auto's
# pipeprof@100 and @250 often run mixed, workers on perf_event. See docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/workload-env.sh
REPS=${1:-5}
SECS=${2:-3}
T=$(mktemp -d /tmp/pp-overhead.XXXXXX)
trap 'rm -rf "$T"' EXIT

# "UNITS_PER_CPU_S CPU_S" from the workload's line:
# "worker-a cpu 3.757 s units fn_a 8348 fn_b 2817; worker-b cpu 3.857 s units fn_c 11545; ..."
rate() {
  python3 -c 'import re,sys
s = sys.stdin.read()
cpu = sum(float(x) for x in re.findall(r"cpu ([0-9.]+) s", s))
units = sum(int(x) for x in re.findall(r"fn_[abc] ([0-9]+)", s))
print("%.3f %.3f" % (units / cpu, cpu))'
}

# Samples in a profile: pipeprof's trace (report's count: a sample of weight k counts k), or
# gperftools' legacy CPU profile (bench/gperftools-samples.py).
samples() {
  case $1 in
    pipeprof*) "$B/bin/pipeprof" report --format json "$T/p.nettrace" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["samples"])' ;;
    gperftools*) python3 bench/gperftools-samples.py "$T/g.prof" ;;
    *) echo 0 ;;
  esac
}

# The CPU engine a pipeprof trace names ("-" for the others).
engine() {
  case $1 in
    pipeprof*) "$B/bin/pipeprof" report --format json "$T/p.nettrace" |
      python3 -c 'import json,sys; print(json.load(sys.stdin).get("cpu_engine") or "-")' ;;
    *) echo - ;;
  esac
}

PAIRED=${PP_OVERHEAD_PAIRED:-0}

TIME=(/usr/bin/time -f '%U %S' -o "$T/time")
[[ -x /usr/bin/time ]] || TIME=()

# The CPU seconds the timed command took outside the workers (worker CPU seconds $1).
other() {
  if [[ -s $T/time ]]; then
    awk -v w="$1" '{ printf "%.3f", $1 + $2 - w }' "$T/time"
  else
    echo 0
  fi
}

# run CONFIG: prints "UNITS_PER_CPU_S CPU_S SAMPLES OTHER_CPU_S ENGINE [TWIN_UNITS_PER_CPU_S]"
run() {
  local cfg=$1 hz=${1#*@} r engine twin= PB=$B
  if [[ $cfg == base-* ]]; then
    PB=${PP_BASELINE_DIR:?base-* configurations need PP_BASELINE_DIR}
    cfg=${cfg#base-}
  fi
  rm -f "$T/p.nettrace" "$T/g.prof" "$T/twin" "$T/time"
  if [[ $PAIRED == 1 ]]; then
    "$WORKLOAD" "$SECS" >"$T/twin" 2>/dev/null &
    twin=$!
  fi
  case $cfg in
    bare) r=$("${TIME[@]}" "$WORKLOAD" "$SECS" 2>/dev/null | rate) ;;
    pipeprof@*) r=$("${TIME[@]}" "$PB/bin/pipeprof" record -q --mode cpu --hz "$hz" \
      -o "$T/p.nettrace" -- "$WORKLOAD" "$SECS" 2>/dev/null | rate) ;;
    pipeprof-timer@* | pipeprof-perf@* | pipeprof-perf-ring@*)
      engine=${cfg%@*}
      r=$(PIPEPROF_CPU_ENGINE=${engine#pipeprof-} "${TIME[@]}" "$PB/bin/pipeprof" record -q \
        --mode cpu --hz "$hz" -o "$T/p.nettrace" -- "$WORKLOAD" "$SECS" 2>/dev/null | rate) ;;
    gperftools@*) r=$("${TIME[@]}" env LD_PRELOAD="$GPERF" CPUPROFILE="$T/g.prof" \
      CPUPROFILE_FREQUENCY="$hz" "$WORKLOAD" "$SECS" 2>/dev/null | rate) ;;
  esac
  r="$r $(samples "$cfg") $(other "${r#* }") $(engine "$cfg")"
  if [[ -n $twin ]]; then
    wait "$twin"
    echo "$r $(rate <"$T/twin" | cut -d' ' -f1)"
  else
    echo "$r"
  fi
}

configs=(bare pipeprof@100 pipeprof@250 pipeprof@1000 pipeprof-perf@100 pipeprof-perf@250
  pipeprof-timer@1000)
if [[ -n $GPERF ]]; then
  configs+=(gperftools@100 gperftools@250 gperftools@1000)
else
  echo "gperftools not installed (apt-get install libgoogle-perftools-dev): pipeprof only" >&2
fi
if [[ -n ${PP_OVERHEAD_CONFIGS:-} ]]; then # e.g. "pipeprof-timer@250 gperftools@250"; bare stays
  read -ra configs <<<"bare $PP_OVERHEAD_CONFIGS"
fi
for ((r = 0; r < REPS; r++)); do
  # rotate the order each repetition, so that drift in the machine's load spreads evenly
  for ((i = 0; i < ${#configs[@]}; i++)); do
    c=${configs[$(((i + r) % ${#configs[@]}))]}
    echo "$c $(run "$c")" >>"$T/results"
  done
done
python3 - "$T/results" "$REPS" "$SECS" <<'PY'
import statistics, sys
by, twin, other, engines, run_eng = {}, {}, {}, {}, {}
for l in open(sys.argv[1]):
    f = l.split()
    c, rate, cpu, n, o, e = f[:6]
    by.setdefault(c, []).append((float(rate), float(cpu), int(n)))
    other.setdefault(c, []).append((float(o), int(n)))
    engines.setdefault(c, {})[e] = engines.get(c, {}).get(e, 0) + 1
    run_eng.setdefault(c, []).append(e)
    if len(f) > 6:
        twin.setdefault(c, []).append(float(f[6]))
med = lambda v: statistics.median(v)
base = med([r for r, _, _ in by["bare"]])
print("%d runs of %s s per configuration, in rotating order; medians%s" % (int(sys.argv[2]),
      sys.argv[3], "; overhead against a bare twin run beside each run" if twin else ""))
print("%-24s %11s %9s %15s %12s %8s %-16s %s" % ("config", "units/cpu-s", "overhead",
      "samples/cpu-s", "us/sample", "other", "engines",
      "runs (overhead against the twin)" if twin else "runs (units/cpu-s)"))
for c in by:
    rate = med([r for r, _, _ in by[c]])
    over = 1 - rate / base
    if c in twin:
        over = med([1 - r / t for (r, _, _), t in zip(by[c], twin[c])])
    # samples per worker CPU-second, and the overhead each one costs: overhead x CPU / samples
    per = med([n / cpu for _, cpu, n in by[c]]) if c != "bare" else 0
    cost = "%.1f" % (over * 1e6 / per) if per > 0 else "-"
    runs = (["%.2f%%" % (100 - 100 * r / t) for (r, _, _), t in zip(by[c], twin[c])]
            if c in twin else ["%.0f" % r for r, _, _ in by[c]])
    if len(engines[c]) > 1:  # which run had which engine (auto's: timer or mixed)
        runs = ["%s(%s)" % (x, e) for x, e in zip(runs, run_eng[c])]
    runs = " ".join(runs)
    # CPU outside the workers per sample (us): the recorder, the agent's threads, the main thread
    oth = med([o * 1e6 / n for o, n in other[c]]) if c != "bare" and per > 0 else 0
    eng = ",".join("%s:%d" % kv for kv in sorted(engines[c].items()))
    print("%-24s %11.1f %8.2f%% %15.0f %12s %8s %-16s %s" % (c, rate, 100 * over, per, cost,
          "%.1f" % oth if per > 0 else "-", eng, runs))
PY
