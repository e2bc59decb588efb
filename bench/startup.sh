#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/startup.sh [N] [ROUNDS] - what the agent costs a short-lived process, and what
# `pipeprof record` costs a shell that runs N short children (`make`, shell scripts, compiler
# drivers). Each round runs, interleaved on the same machine:
#   bare    N x /bin/true from a shell
#   agent   the same with LD_PRELOAD=libpipeprof.so (no client: start-up and exit only)
#   record  `pipeprof record -q -- sh -c <the bare loop>` (every child recorded: connect,
#           session, resume, rundown at exit)
# and prints per-child medians over the rounds, and the ratios. Issue 10's target: a recording
# of 200 short children within 1 s + 10 % of the bare run's wall time.
set -euo pipefail
B=${PP_BINARY_DIR:-$(cd "$(dirname "$0")/.." && pwd)/build}
N=${1:-200}
ROUNDS=${2:-5}
LIB=$B/lib/libpipeprof.so
PP=$B/bin/pipeprof
[[ -f $LIB && -x $PP ]] || { echo "build first: cmake --build build" >&2; exit 2; }
T=$(mktemp -d /tmp/pp-startup.XXXXXX)
trap 'rm -rf "$T"' EXIT
loop="i=0; while [ \$i -lt $N ]; do /bin/true; i=\$((i+1)); done"

now() { date +%s%N; }
run() { # run KIND: wall ns of one batch
  local t0 t1
  t0=$(now)
  case $1 in
  bare) sh -c "$loop" ;;
  agent) LD_PRELOAD=$LIB PIPEPROF_DIAGNOSTIC_PORT= sh -c "$loop" ;;
  record) "$PP" record -q -o "$T/r.nettrace" -- sh -c "$loop" >/dev/null ;;
  esac
  t1=$(now)
  echo $((t1 - t0))
}

declare -A all
for r in $(seq "$ROUNDS"); do
  for k in bare agent record; do
    all[$k]+="$(run $k) "
  done
done
python3 - "$N" "${all[bare]}" "${all[agent]}" "${all[record]}" <<'PY'
import statistics, sys
n = int(sys.argv[1])
med = {k: statistics.median(int(x) for x in v.split()) for k, v in zip(("bare", "agent", "record"), sys.argv[2:5])}
for k in ("bare", "agent", "record"):
    print("%-7s %8.1f ms per batch of %d, %6.2f ms per child" % (k, med[k] / 1e6, n, med[k] / 1e6 / n))
print("agent  costs %.2f ms per process (%.2fx bare)" % ((med["agent"] - med["bare"]) / 1e6 / n, med["agent"] / med["bare"]))
print("record costs %.2f ms per child; %d children: %.2f s over the bare %.2f s (target: at most 1 s + 10 %%: %s)"
      % ((med["record"] - med["bare"]) / 1e6 / n, n, med["record"] / 1e9, med["bare"] / 1e9,
         "met" if med["record"] <= med["bare"] * 1.1 + 1e9 else "NOT met"))
PY
