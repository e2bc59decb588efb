#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/dlclose.sh [BUILD_DIR] [ROUNDS] - what a dlopen + dlclose of a small library costs the host
# bare, with libpipeprof.so preloaded and idle (no session: the dlclose interposer's rescans are
# skipped until a first scan), and under `pipeprof record` (CPU mode, 100 Hz: the agent rescans its
# module list before and after each dlclose, host/dl.c, at most 16 dlcloses in 100 ms: a run's
# 300 cycles take about 20 ms, so most of them are over the bound). ROUNDS (default 5) runs of 300 cycles
# each, the three interleaved; prints each run's median and the medians' median and ratio to bare.
# WALK=1: the same for 300 rounds of 1000 dl_iterate_phdr calls stopping at the first object
# (bench-dlclose -w: the interposer's cost per call, in ns; host/dl.c).
set -euo pipefail
B=${1:-build}
R=${2:-5}
LIB=$B/samples/libpp-modreuse-a.so
for f in "$B/bench/bench-dlclose" "$LIB" "$B/lib/libpipeprof.so" "$B/bin/pipeprof"; do
  [[ -e $f ]] || { echo "missing $f" >&2; exit 1; }
done
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
declare -A med
ARGS=("$LIB" 300)
WHAT="dlopen+dlclose" UNIT=us
[[ -z ${WALK:-} ]] || { ARGS=(-w 300); WHAT="dl_iterate_phdr (first object)" UNIT=ns; }
for ((i = 0; i < R; i++)); do
  med[bare]+=" $("$B/bench/bench-dlclose" "${ARGS[@]}" | awk '{print $2}')"
  med[idle]+=" $(LD_PRELOAD=$B/lib/libpipeprof.so "$B/bench/bench-dlclose" "${ARGS[@]}" | awk '{print $2}')"
  med[record]+=" $("$B/bin/pipeprof" record -q --hz 100 -o "$T/r.nettrace" -- "$B/bench/bench-dlclose" "${ARGS[@]}" | awk '{print $2}')"
done
for k in bare idle record; do
  echo "$k: ${med[$k]}"
done
python3 - "$WHAT" "$UNIT" "${med[bare]}" "${med[idle]}" "${med[record]}" <<'PY'
import statistics, sys
what, unit = sys.argv[1:3]
bare, idle, rec = (statistics.median(float(x) for x in a.split()) for a in sys.argv[3:])
print("%s median of medians: bare %.1f %s, idle agent %.1f %s (%.2f), record %.1f %s (%.2f)"
      % (what, bare, unit, idle, unit, idle / bare, rec, unit, rec / bare))
PY
