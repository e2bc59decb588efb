#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/idle-preload.sh [N] [ROUNDS] - what a preloaded profiler costs a process that is never
# profiled (issue 22: the agent preloaded everywhere, turned on when something is slow). Each
# round runs, interleaved on the same machine, a shell that starts N x /bin/true:
#   bare       without a preload
#   gperftools with LD_PRELOAD=libprofiler.so and no CPUPROFILE (its idle preload)
#   pipeprof   with LD_PRELOAD=libpipeprof.so and no client (PIPEPROF_DIAGNOSTIC_PORT unset:
#              the default socket, as a preload everywhere has it)
# and prints, per kind, the median over the rounds of the CPU time (user + system of the shell
# and its children) per process, the median above bare, and the paired ratio pipeprof /
# gperftools of the costs above bare (each round's pair, then the median). Target: <= 1.
# PP_BASELINE_DIR=OTHER_BUILD adds base-pipeprof, that build's library, in the same rounds, and
# the paired ratio pipeprof / base-pipeprof above bare (before/after in one run).
set -euo pipefail
B=${PP_BINARY_DIR:-$(cd "$(dirname "$0")/.." && pwd)/build}
N=${1:-100}
ROUNDS=${2:-7}
LIB=$B/lib/libpipeprof.so
GPERF=${GPERF_LIB:-/usr/lib/x86_64-linux-gnu/libprofiler.so}
[[ -f $LIB ]] || { echo "build first: cmake --build build" >&2; exit 2; }
[[ -f $GPERF ]] || { echo "SKIP (loud): $GPERF missing (libgoogle-perftools-dev)" >&2; exit 77; }
T=$(mktemp -d /tmp/pp-idle.XXXXXX)
trap 'rm -rf "$T"' EXIT
export TMPDIR=$T # the sockets of the preloaded processes
loop="i=0; while [ \$i -lt $N ]; do /bin/true; i=\$((i+1)); done"

cpu_us() { # cpu_us KIND: user + system microseconds of one batch, children included
  local pre=()
  case $1 in
  gperftools) pre=(env LD_PRELOAD="$GPERF") ;;
  pipeprof) pre=(env LD_PRELOAD="$LIB") ;;
  base-pipeprof) pre=(env LD_PRELOAD="$PP_BASELINE_DIR/lib/libpipeprof.so") ;;
  esac
  # getrusage's microseconds (time(1) prints hundredths of a second: 0.1 ms per process at N=100)
  python3 -c '
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(int((r.ru_utime + r.ru_stime) * 1e6))' "${pre[@]}" sh -c "$loop"
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

kinds=(bare gperftools pipeprof)
[[ -n ${PP_BASELINE_DIR:-} ]] && kinds+=(base-pipeprof)
declare -A all v
ratios="" base_ratios=""
for r in $(seq "$ROUNDS"); do
  for k in "${kinds[@]}"; do
    v[$k]=$(cpu_us $k)
    all[$k]+="${v[$k]} "
  done
  g=$((v[gperftools] - v[bare])) p=$((v[pipeprof] - v[bare]))
  ratios+="$(awk -v p="$p" -v g="$g" 'BEGIN {print (g > 0) ? p / g : 0}') "
  if [[ -n ${PP_BASELINE_DIR:-} ]]; then
    q=$((v[base-pipeprof] - v[bare]))
    base_ratios+="$(awk -v p="$p" -v q="$q" 'BEGIN {print (q > 0) ? p / q : 0}') "
  fi
done
bare=$(median <<<"${all[bare]}")
printf '%-13s %14s %16s\n' kind "ms CPU/process" "above bare (ms)"
for k in "${kinds[@]}"; do
  m=$(median <<<"${all[$k]}")
  awk -v m="$m" -v b="$bare" -v n="$N" -v k="$k" \
    'BEGIN {printf "%-13s %14.3f %16.3f\n", k, m / n / 1000, (m - b) / n / 1000}'
done
echo "pipeprof / gperftools above bare, paired median over $ROUNDS rounds: $(median <<<"$ratios")"
[[ -z ${PP_BASELINE_DIR:-} ]] ||
  echo "pipeprof / base-pipeprof above bare, paired median over $ROUNDS rounds: $(median <<<"$base_ratios")"
