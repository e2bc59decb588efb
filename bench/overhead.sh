#!/usr/bin/env bash
# bench/overhead.sh [REPS] [SECONDS] - what sampling costs the host: pp-sample-workload (two
# CPU-bound threads whose work units all cost the same) runs bare, under `pipeprof record` in
# CPU mode, and under gperftools' CPU profiler (LD_PRELOAD=libprofiler.so, Debian
# libgoogle-perftools-dev), at 100, 250 and 1000 Hz, in the same run and in interleaved order.
# The figure is work units per CPU-second of the two workers: time spent in a signal handler is
# CPU time of the thread it interrupts, so it shows as fewer units per CPU-second, while other
# processes taking a core (a noisy shared machine) do not change it. Prints per configuration
# the median over REPS runs (default 5) of SECONDS each (default 3), and the overhead relative
# to the bare median. See docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${PP_BINARY_DIR:-build}
REPS=${1:-5}
SECS=${2:-3}
WORKLOAD=$B/samples/pp-sample-workload
GPERF=$(ls /usr/lib/*/libprofiler.so* 2>/dev/null | head -1 || true)
T=$(mktemp -d /tmp/pp-overhead.XXXXXX)
trap 'rm -rf "$T"' EXIT

# units/cpu-second from the workload's line:
# "worker-a cpu 3.757 s units fn_a 8348 fn_b 2817; worker-b cpu 3.857 s units fn_c 11545; ..."
rate() {
  python3 -c 'import re,sys
s = sys.stdin.read()
cpu = sum(float(x) for x in re.findall(r"cpu ([0-9.]+) s", s))
units = sum(int(x) for x in re.findall(r"fn_[abc] ([0-9]+)", s))
print("%.3f" % (units / cpu))'
}

run() { # run CONFIG: prints units per CPU-second
  local cfg=$1 hz=${1#*@}
  case $cfg in
    bare) "$WORKLOAD" "$SECS" ;;
    pipeprof@*) "$B/bin/pipeprof" record -q --mode cpu --hz "$hz" -o "$T/p.nettrace" -- "$WORKLOAD" "$SECS" ;;
    gperftools@*) LD_PRELOAD=$GPERF CPUPROFILE=$T/g.prof CPUPROFILE_FREQUENCY=$hz "$WORKLOAD" "$SECS" ;;
  esac 2>/dev/null | rate
}

configs=(bare pipeprof@100 pipeprof@250 pipeprof@1000)
if [[ -n $GPERF ]]; then
  configs+=(gperftools@100 gperftools@250 gperftools@1000)
else
  echo "gperftools not installed (apt-get install libgoogle-perftools-dev): pipeprof only" >&2
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
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for c, v in rows:
    by.setdefault(c, []).append(float(v))
base = statistics.median(by["bare"])
print("%d runs of %s s per configuration; units per worker CPU-second (median)" % (int(sys.argv[2]), sys.argv[3]))
print("%-16s %12s %10s   %s" % ("config", "median", "overhead", "runs"))
for c in by:
    m = statistics.median(by[c])
    print("%-16s %12.1f %9.2f%%   %s" % (c, m, 100.0 * (1 - m / base), " ".join("%.0f" % v for v in by[c])))
PY
