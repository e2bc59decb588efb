#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-go.sh - `pipeprof record` of a Go program (tests/hosts/gopreempt.go: goroutines
# burning CPU in main.burn, preempted by Go's SIGURG) keeps the preempted function under
# runtime.asyncPreempt. Go's handler, which runs with every signal blocked, makes the goroutine
# resume at asyncPreempt's first instruction with the preempted pc pushed as a return address;
# the sampling signal that pended meanwhile is taken right there, before asyncPreempt's
# `push %rbp`, and a walk by %rbp (Go has no .eh_frame) went from the preempted function's frame
# to its caller: 6 % of the samples read `func1;asyncPreempt`, main.burn missing
# (docs/architecture.md, "Real programs"). Now the walk takes the return address at %rsp there
# (agent/sig-unwind.c, ag_sig_unwind_entry_step); on aarch64 x30 holds it. Checked: samples whose
# leaf is asyncPreempt have main.burn under them, and at most a tenth have func1 (burn's caller)
# right under it instead. Skipped loudly without go, or where it cannot build a cgo program (a
# static Go binary loads no agent), and in sanitizer builds.
source "$(dirname "$0")/ipc-lib.sh"
[[ -z $asan && -z $tsan ]] || skip "sanitizer build: its runtime in a Go process is not tried"
command -v go >/dev/null || skip "go is not installed: no Go program to record"
export GOCACHE=$B/go-cache GOPATH=$T/gopath GOENV=off GOFLAGS= CGO_ENABLED=1
(cd "$T" && go build -o "$T/gopreempt" "$S/tests/hosts/gopreempt.go") >"$T/build.log" 2>&1 ||
  skip "go cannot build a cgo program here: $(head -3 "$T/build.log")"

for run in 1 2 3; do
  "${RECORD_ENV[@]}" "$PIPEPROF" record -q --hz 250 --format folded -o "$T/go.folded" -- \
    "$T/gopreempt" 2>"$T/err" || { cat "$T/err" >&2; fail "run $run: record or the program failed"; }
  # folded: "process;root;...;leaf N"
  read -r total ap kept lost < <(awk '{
      n = $NF; s = $0; sub(/ [0-9]+$/, "", s); k = split(s, f, ";"); total += n
      if (f[k] ~ /!runtime\.asyncPreempt/) {
        ap += n
        if (k > 1 && f[k - 1] ~ /!main\.(burn|tick)$/) kept += n
        if (k > 1 && f[k - 1] ~ /!main\.main\.func[0-9]+$/) lost += n
      }
    } END { print total + 0, ap + 0, kept + 0, lost + 0 }' "$T/go.folded")
  note "run $run: $total samples, $ap with runtime.asyncPreempt as the leaf: $kept over main.burn, $lost over its caller"
  [[ $total -gt 0 ]] || fail "run $run: no samples"
  [[ $ap -gt 0 ]] && break
done
[[ $ap -gt 0 ]] || skip "no sample landed in runtime.asyncPreempt in 3 runs: nothing to check"
[[ $kept -ge 1 && $((lost * 10)) -le $kept ]] || {
  grep 'asyncPreempt' "$T/go.folded" | head -5 >&2
  fail "the preempted function is missing under runtime.asyncPreempt ($lost of $ap samples over its caller, $kept over main.burn)"
}
echo "PASS: $kept of $ap samples at runtime.asyncPreempt keep main.burn under it ($lost over its caller)"
