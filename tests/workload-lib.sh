# SPDX-License-Identifier: MIT
# tests/workload-lib.sh - the checks of pp-sample-workload's traces that tests/agent-e2e.sh
# (native) and tests/arm64-e2e.sh (under qemu) share. Source it after ipc-lib.sh; it uses
# $PIPEPROF, $T, fail and note from there.

# json_get FILE PYTHON-EXPR: evaluates EXPR with r = the report's JSON.
json_get() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

# workload_check_cpu MIN-SAMPLES SECONDS: $T/cpu.out is the workload's unchanged output and
# $T/cpu.nettrace, a CPU-mode recording of SECONDS, holds at least MIN-SAMPLES samples that name
# fn_a, fn_b and fn_c, fn_a above fn_b (worker-a splits its CPU 3:1 between them). Leaves
# $T/cpu.json for further checks and sets samples, a and b for the caller's note.
workload_check_cpu() {
  grep -q "^worker-a cpu .* checksum " "$T/cpu.out" || fail "the workload's output changed: $(cat "$T/cpu.out")"
  "$PIPEPROF" report --format json --top 50 "$T/cpu.nettrace" >"$T/cpu.json"
  samples=$(json_get "$T/cpu.json" "r['samples']")
  [[ $samples -ge $1 ]] || fail "only $samples samples in $2 s of two busy threads"
  for fn in fn_a fn_b fn_c; do
    n=$(json_get "$T/cpu.json" "sum(f['self'] for f in r['top_self'] if f['function'] == 'pp-sample-workload!pp_workload_$fn')")
    [[ $n -gt 0 ]] || fail "pp_workload_$fn is not named in the report"
  done
  a=$(json_get "$T/cpu.json" "sum(f['self'] for f in r['top_self'] if f['function'].endswith('!pp_workload_fn_a'))")
  b=$(json_get "$T/cpu.json" "sum(f['self'] for f in r['top_self'] if f['function'].endswith('!pp_workload_fn_b'))")
  [[ $a -gt $b ]] || fail "fn_a ($a) should have about 3 times the samples of fn_b ($b)"
}

# workload_check_wall_threads: $T/wall.json (report --threads of $T/wall.nettrace) names both
# workers and the folded output holds worker-b's stack down to fn_c. Sets names.
workload_check_wall_threads() {
  names=$(json_get "$T/wall.json" "' '.join(t['name'] for t in r['per_thread'])")
  [[ $names == *worker-a* && $names == *worker-b* ]] || fail "thread names missing: $names"
  "$PIPEPROF" convert --format folded "$T/wall.nettrace" >"$T/wall.folded"
  grep -q "^worker-b ([0-9]*);.*pp-sample-workload!pp_workload_fn_c [0-9]*$" "$T/wall.folded" ||
    fail "folded output lacks worker-b's stack"
}
