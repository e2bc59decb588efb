#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/thread-create.sh [ROUNDS [N [BATCHES]]] - what a host thread's creation costs under a
# session (issue 22: servers that start a thread per request, test runners). bench-thread-create
# creates and joins N threads that do nothing and N that burn about 20 us of CPU, alternating over
# BATCHES batches, and prints the median wall and process CPU ns per creation. Each round runs it,
# in an order that rotates every round:
#   bare   no preload
#   idle   LD_PRELOAD=libpipeprof.so, no client (no session: the default socket in a temp dir)
#   cpu    under `pipeprof record --mode cpu --hz HZ`
#   wall   under `pipeprof record --mode wall --hz HZ`
# PP_BASELINE_DIR=OTHER_BUILD adds base-idle, base-cpu and base-wall: that build's library and
# recorder around the same bench binary, in the same rounds. PP_HZ sets HZ (default 100).
# PP_GAP_US=US sleeps US after each join (timed: compare the cost above bare): a session frees a
# thread's slot at its next drain (every 50 ms) and has 1024 (PIPEPROF_MAX_THREADS), so past
# about 20 000 thread exits a second every slot is taken and later threads go unregistered.
# Prints per case the median over the rounds of each figure and its ratio to bare, and with a
# baseline the paired ratio candidate / baseline (each round's pair, then the median).
set -euo pipefail
B=${PP_BINARY_DIR:-$(cd "$(dirname "$0")/.." && pwd)/build}
ROUNDS=${1:-5}
N=${2:-2000}
BATCHES=${3:-5}
ARGS=("${N}" "${BATCHES}" 13000 200 "${PP_GAP_US:-0}")
HZ=${PP_HZ:-100}
PROG=$B/bench/bench-thread-create
[[ -x $PROG && -x $B/bin/pipeprof && -f $B/lib/libpipeprof.so ]] ||
  { echo "build first: cmake --build build" >&2; exit 2; }
T=$(mktemp -d /tmp/pp-thread-create.XXXXXX)
trap 'rm -rf "$T"' EXIT
cases=(bare idle cpu wall)
[[ -n ${PP_BASELINE_DIR:-} ]] && cases+=(base-idle base-cpu base-wall)
for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < ${#cases[@]}; i++)); do
    c=${cases[(i + r) % ${#cases[@]}]}
    dir=$B
    [[ $c == base-* ]] && dir=$PP_BASELINE_DIR
    case ${c#base-} in
    bare) "$PROG" "${ARGS[@]}" ;;
    idle) TMPDIR=$T LD_PRELOAD=$dir/lib/libpipeprof.so "$PROG" "${ARGS[@]}" ;;
    *) "$dir/bin/pipeprof" record -q --mode "${c#base-}" --hz "$HZ" -o "$T/t.nettrace" -- \
      "$PROG" "${ARGS[@]}" ;;
    esac | sed "s/^/$r /" >>"$T/$c"
  done
done
python3 - "$T" "$ROUNDS" "${cases[@]}" <<'PY'
import statistics, sys
t, rounds, cases = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
keys = ("none-wall", "none-cpu", "work-wall", "work-cpu")
runs = {}
for c in cases:
    runs[c] = {}
    for line in open("%s/%s" % (t, c)):
        f = line.split()
        runs[c][int(f[0])] = {f[i]: float(f[i + 1]) for i in range(1, len(f), 2)}
    if len(runs[c]) != rounds:
        sys.exit("%s: %d of %d rounds printed a line" % (c, len(runs[c]), rounds))
med = {c: {k: statistics.median(v[k] for v in runs[c].values()) for k in keys} for c in cases}
print("ns per creation + join, median over %d rounds (ratio to bare)" % rounds)
print("%-10s" % "case" + "".join("%18s" % k for k in keys))
for c in cases:
    print("%-10s" % c + "".join("%10.0f %5.2fx " % (med[c][k], med[c][k] / med["bare"][k])
                                for k in keys))
for c in cases:
    if c.startswith("base-"):
        cand = c[5:]
        print("%-10s" % (cand + "/base") + "".join(
            "%16.2fx " % statistics.median(runs[cand][r][k] / runs[c][r][k] for r in range(rounds))
            for k in keys) + " (paired median)")
PY
