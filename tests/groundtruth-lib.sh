# SPDX-License-Identifier: MIT
# tests/groundtruth-lib.sh - sourced by the ground-truth tests: record a workload that measures
# its own CPU time per function, convert, and compare (tests/tools/groundtruth-eval.py). Needs
# B (binary dir), S (source dir), T (a scratch dir), PP, EVAL; sets fail=1 on a failure.

# gt_record NAME HZ ENGINE-CHECK WORKLOAD ARGS -- PREFIX...: records "WORKLOAD SECS JSON ARGS"
# (SECS from $SECS, default 3) under PREFIX, converts it to folded stacks and checks the engine
# the trace names ("timer-or-mixed": auto at or below the tick's rate, which moves threads the tick
# misses to perf_event). Returns 1 on a wrong engine.
gt_record() {
  local name=$1 hz=$2 engine=$3 wl=$4 args=$5 got
  shift 5
  [[ ${1:-} == -- ]] && shift
  # shellcheck disable=SC2086 # ARGS is a list of words
  "$@" "$PP" record -q --hz "$hz" -o "$T/$name.nettrace" -- "$B/samples/$wl" "${SECS:-3}" \
    "$T/$name.json" $args
  "$PP" convert --format folded -o "$T/$name.folded" "$T/$name.nettrace" 2>/dev/null
  got=$("$PP" report --format json "$T/$name.nettrace" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cpu_engine"])')
  echo "$name: $wl $args at $hz Hz, engine $got"
  [[ $got == "$engine" || ($engine == timer-or-mixed && ($got == timer || $got == mixed)) ]] ||
    { echo "FAIL: $name ran engine '$got', expected '$engine'"; return 1; }
}

# gt_eval NAME HZ [EVAL-ARGS...]: compares the recording with the truth; on a failure prints the
# threads' measured CPU and the recording's report. Returns the evaluation's status.
gt_eval() {
  local name=$1 hz=$2
  shift 2
  python3 "$EVAL" "$T/$name.json" "$T/$name.folded" --hz "$hz" --max-error "${MAX_ERROR:-1.0}" \
    --min-capture "${MIN_CAPTURE:-0}" "$@" && return 0
  echo "  ($name failed; its measured CPU: $(cat "$T/$name.json"); the recording:)"
  "$PP" report --threads --top 12 "$T/$name.nettrace" 2>&1 | sed 's/^/    /'
  return 1
}
