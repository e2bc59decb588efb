#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/sample-events.sh [REPS] [SECONDS] - what the kernel does per delivered CPU sample, by
# count: pp-sample-workload SECONDS runs under `perf stat` (tracepoints: root, or
# perf_event_paranoid -1) bare and under each sampler, and per sample the script prints the
# signals delivered to the process (the agent's, a kernel locator's, gperftools'), the irq_work
# self-interrupts (the perf engine's F_SETSIG delivery), the local timer interrupts (the tick and
# every high-resolution timer: the perf engine's overflows), context switches, and the system
# calls the handlers make (the thread CPU clock's clock_gettime, getrusage for page faults,
# rt_sigreturn, timer_create). Counts, unlike overhead.sh's CPU time, do not move with the
# machine's load, so a change that removes a signal or a call per sample shows in one run.
# Configurations: pipeprof-perf@HZ, pipeprof-timer@HZ, gperftools@HZ at 100 and 250 Hz (or
# PP_EVENTS_CONFIGS="CONFIG ...", where pipeprof-perf-ring@HZ is the prototype engine without a
# signal, and pipeprof@HZ is the engine auto chooses); with PP_BASELINE_DIR=OTHER_BUILD also
# base-pipeprof-perf@HZ and base-pipeprof-timer@HZ (that build's recorder and library, the same
# workload binary). PP_EVENTS_PAIRED=1 starts a bare workload beside each run (not counted), as
# overhead.sh's twin does: two more busy threads for the 2 vCPUs, the load under which auto moves
# threads the tick misses to perf_event. The last column is the CPU engine each run's trace names
# (timer, perf_event, perf_ring, or mixed), with its count of runs.
# Prints medians over REPS runs (default 3) of SECONDS each (default 3). See docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/workload-env.sh
REPS=${1:-3}
SECS=${2:-3}
if ! command -v perf >/dev/null; then
  echo "SKIPPED: perf is not installed (linux-perf)" >&2
  exit 0
fi
EVENTS=signal:signal_deliver,irq_vectors:irq_work_entry,irq_vectors:local_timer_entry
EVENTS+=,context-switches,syscalls:sys_enter_clock_gettime,syscalls:sys_enter_getrusage
EVENTS+=,syscalls:sys_enter_rt_sigreturn,syscalls:sys_enter_timer_create,task-clock
if ! perf stat -e "$EVENTS" -o /dev/null -- true 2>/dev/null; then
  echo "SKIPPED: perf stat cannot count tracepoints here (run as root)" >&2
  exit 0
fi
T=$(mktemp -d /tmp/pp-events.XXXXXX)
[[ -n ${PP_EVENTS_KEEP:-} ]] || trap 'rm -rf "$T"' EXIT

configs=(pipeprof-perf@100 pipeprof-perf@250 pipeprof-timer@100 pipeprof-timer@250)
if [[ -n ${PP_BASELINE_DIR:-} ]]; then
  configs+=(base-pipeprof-perf@100 base-pipeprof-perf@250 base-pipeprof-timer@100
    base-pipeprof-timer@250)
fi
if [[ -n $GPERF ]]; then
  configs+=(gperftools@100 gperftools@250)
else
  echo "gperftools not installed (apt-get install libgoogle-perftools-dev): pipeprof only" >&2
fi
if [[ -n ${PP_EVENTS_CONFIGS:-} ]]; then
  read -ra configs <<<"$PP_EVENTS_CONFIGS"
fi

# run CONFIG: appends "CONFIG SAMPLES EVENT=COUNT ..." to $T/results
run() {
  local c=$1 cfg=$1 hz=${1#*@} PB=$B n
  if [[ $cfg == base-* ]]; then
    PB=$PP_BASELINE_DIR
    cfg=${cfg#base-}
  fi
  rm -f "$T/p.nettrace" "$T/g.prof"
  case $cfg in
    pipeprof*)
      n=${cfg%@*}
      n=${n#pipeprof}
      n=${n#-}
      env PIPEPROF_CPU_ENGINE="${n:-auto}" perf stat -x, -e "$EVENTS" -o "$T/stat" -- \
        "$PB/bin/pipeprof" record -q --mode cpu --hz "$hz" -o "$T/p.nettrace" -- \
        "$WORKLOAD" "$SECS" >/dev/null 2>&1
      n=$("$B/bin/pipeprof" report --format json "$T/p.nettrace" |
        python3 -c 'import json,sys; d = json.load(sys.stdin); print(d["samples"], d["cpu_engine"])'
      ) ;;
    gperftools@*)
      perf stat -x, -e "$EVENTS" -o "$T/stat" -- env LD_PRELOAD="$GPERF" CPUPROFILE="$T/g.prof" \
        CPUPROFILE_FREQUENCY="$hz" "$WORKLOAD" "$SECS" >/dev/null 2>&1
      n="$(python3 bench/gperftools-samples.py "$T/g.prof") -" ;;
  esac
  echo "$c $n $(awk -F, '!/^#/ && NF > 2 { sub(/.*:/, "", $3); printf "%s=%s ", $3, $1 }' \
    "$T/stat")" >>"$T/results"
}

configs=(bare "${configs[@]}")
for ((r = 0; r < REPS; r++)); do
  for ((i = 0; i < ${#configs[@]}; i++)); do
    c=${configs[$(((i + r) % ${#configs[@]}))]}
    twin=
    if [[ ${PP_EVENTS_PAIRED:-0} == 1 ]]; then
      "$WORKLOAD" "$SECS" >/dev/null 2>&1 &
      twin=$!
    fi
    if [[ $c == bare ]]; then
      perf stat -x, -e "$EVENTS" -o "$T/stat" -- "$WORKLOAD" "$SECS" >/dev/null 2>&1
      echo "bare 0 - $(awk -F, '!/^#/ && NF > 2 { sub(/.*:/, "", $3); printf "%s=%s ", $3, $1 }' \
        "$T/stat")" >>"$T/results"
    else
      run "$c"
    fi
    [[ -z $twin ]] || wait "$twin"
  done
done
python3 - "$T/results" "$REPS" "$SECS" <<'PY'
import statistics, sys
cols = [("signal_deliver", "signals"), ("irq_work_entry", "irq_work"),
        ("local_timer_entry", "timer irq"), ("context-switches", "switches"),
        ("sys_enter_clock_gettime", "clock_gettime"), ("sys_enter_getrusage", "getrusage"),
        ("sys_enter_timer_create", "timer_create")]
by, engines = {}, {}
for l in open(sys.argv[1]):
    f = l.split()
    ev = dict(x.split("=", 1) for x in f[3:])
    by.setdefault(f[0], []).append((int(f[1]), {k: float(v) for k, v in ev.items()}))
    engines.setdefault(f[0], {})[f[2]] = engines.get(f[0], {}).get(f[2], 0) + 1
print("%s runs of %s s per configuration; medians; events per delivered sample (timer irq and"
      " switches less the bare run's per CPU-second)" % (sys.argv[2], sys.argv[3]))
bare = by.pop("bare", [])
def per_cpu_s(runs, k):
    return statistics.median([e[k] / (e["task-clock"] / 1000.0) for _, e in runs])
print("%-24s %8s %10s" % ("config", "samples", "cpu-s") +
      "".join(" %13s" % name for _, name in cols) + "  engines")
for c, runs in by.items():
    runs = [(s, e) for s, e in runs if s > 0]
    if not runs:
        print("%-24s no samples" % c)
        continue
    n = statistics.median([s for s, _ in runs])
    cpu = statistics.median([e["task-clock"] / 1000.0 for _, e in runs])
    row = "%-24s %8d %10.2f" % (c, n, cpu)
    for k, _ in cols:
        v = statistics.median([e[k] / s for s, e in runs if s > 0])
        if k in ("local_timer_entry", "context-switches") and bare:
            # what the bare workload has anyway, per CPU-second, taken out
            v = statistics.median([(e[k] - per_cpu_s(bare, k) * e["task-clock"] / 1000.0) / s
                                   for s, e in runs if s > 0])
        row += " %13.2f" % v
    print(row + "  " + ",".join("%s:%d" % kv for kv in sorted(engines[c].items())))
PY
