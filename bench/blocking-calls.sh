#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/blocking-calls.sh [ROUNDS] - what the blocking interposers' note costs a call that returns
# at once (bench-blocking-calls: poll() of no fds, a 1-byte read() of /dev/zero, three frames
# down), per call: bare, under `pipeprof record --mode cpu` and under `--mode wall` (100 Hz). In
# CPU mode a call notes only its frame (a stop marker's stack is walked from it by the drain); in
# wall mode it walks its stack. PP_BASELINE_DIR=OTHER_BUILD adds base-cpu and base-wall with that
# build's library and recorder, interleaved in the same rounds. Prints the median over the rounds
# of each case's best-of-5 ns a call, and each case's ratio to bare.
set -euo pipefail
B=${PP_BINARY_DIR:-$(cd "$(dirname "$0")/.." && pwd)/build}
ROUNDS=${1:-5}
PROG=$B/bench/bench-blocking-calls
[[ -x $PROG && -x $B/bin/pipeprof ]] || { echo "build first: cmake --build build" >&2; exit 2; }
T=$(mktemp -d /tmp/pp-blocking.XXXXXX)
trap 'rm -rf "$T"' EXIT
cases=(bare cpu wall)
[[ -n ${PP_BASELINE_DIR:-} ]] && cases+=(base-cpu base-wall)
for ((r = 0; r < ROUNDS; r++)); do
  for c in "${cases[@]}"; do
    pp=$B/bin/pipeprof
    [[ $c == base-* ]] && pp=$PP_BASELINE_DIR/bin/pipeprof
    case $c in
    bare) "$PROG" ;;
    *) "$pp" record -q --mode "${c#base-}" --hz 100 -o "$T/t.nettrace" -- "$PROG" ;;
    esac >>"$T/$c"
  done
done
python3 - "$T" "${cases[@]}" <<'PY'
import statistics, sys
t, cases = sys.argv[1], sys.argv[2:]
med = {}
for c in cases:
    rows = [l.split() for l in open("%s/%s" % (t, c))]
    med[c] = (statistics.median(float(r[1]) for r in rows), statistics.median(float(r[3]) for r in rows))
print("%-10s %12s %12s" % ("case", "poll0 ns", "read1 ns"))
for c in cases:
    print("%-10s %7.1f %4.2fx %7.1f %4.2fx" % (c, med[c][0], med[c][0] / med["bare"][0],
                                               med[c][1], med[c][1] / med["bare"][1]))
PY
