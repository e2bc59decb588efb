#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-go-frames.sh - `pipeprof record` of a Go ground-truth program
# (tests/hosts/goframes.go) at 250 and 1000 Hz: every CPU second of its main thread stays under
# the function that spent it. The program runs four phases for the same thread CPU each (measured
# by getrusage(RUSAGE_THREAD)): frameless leaves, a deep recursion over a small framed function
# (its stack check at every call), runtime.memmove (assembly without a frame) and map lookups.
# Go emits no .eh_frame for Go code; before the pclntab's SP tables were read into the CFI tables
# (agent/cfi.c, ag_cfi_go_walk), a walk by %rbp from a leaf without a frame named the caller's
# caller as the leaf's caller: 57 % of the leaf samples lacked their caller, and main.phaseCopy
# held 0.0-0.3 % of the samples where it spent 25 % of the CPU (docs/performance.md, "Go's own
# frames"). Checked at each rate, on the main thread's
# samples: each phase's share of the samples (the phase function anywhere on the stack) within
# 1.5 points of its share of the thread's CPU; at least 99 % of the samples reach main.main; no
# sample of a leaf lacks its caller (main.leaf* over main.phaseLeaves or main.mid, memmove over
# main.phaseCopy, main.mid over main.deep). The agent's `[not sampled]` markers (CPU no sample
# saw, which has no stack) are left out of both. A run that misses is run once more (a loaded machine
# steals whole ticks from one phase). Skipped loudly without go, or where it cannot build a cgo
# program, and in sanitizer builds.
source "$(dirname "$0")/ipc-lib.sh"
[[ -z $asan && -z $tsan ]] || skip "sanitizer build: its runtime in a Go process is not tried"
command -v go >/dev/null || skip "go is not installed: no Go program to record"
[[ $(uname -m) == x86_64 ]] || skip "the Go pclntab unwinding is x86-64's only"
export GOCACHE=$B/go-cache GOPATH=$T/gopath GOENV=off GOFLAGS= CGO_ENABLED=1
(cd "$T" && go build -o "$T/goframes" "$S/tests/hosts/goframes.go") >"$T/build.log" 2>&1 ||
  skip "go cannot build a cgo program here: $(head -3 "$T/build.log")"
MS=${GOFRAMES_MS:-600} # thread CPU per phase

# judge HZ RUN: records one run and prints its figures; returns 1 when one misses its bound.
judge() {
  local hz=$1 run=$2 tid
  "${RECORD_ENV[@]}" "$PIPEPROF" record -q --hz "$hz" -o "$T/go-$hz.nettrace" -- \
    "$T/goframes" "$MS" 2>"$T/err-$hz" || { cat "$T/err-$hz" >&2; fail "$hz Hz: record or the program failed"; }
  tid=$(awk '$1 == "tid" { print $2 }' "$T/err-$hz")
  [[ -n $tid ]] || { cat "$T/err-$hz" >&2; fail "$hz Hz: the program printed no tid"; }
  "$PIPEPROF" convert "$T/go-$hz.nettrace" --thread "$tid" -f folded -o "$T/go-$hz.folded" ||
    fail "$hz Hz: convert failed"
  # folded: "thread;root;...;leaf N"; truth from the program's stderr
  awk -v hz="$hz" -v run="$run" -v tol=1.5 -v reachmin=99 '
    FNR == NR { if ($1 == "phase") cpu[$2] = $3; if ($1 == "total") total = $2; next }
    {
      n = $NF; s = $0; sub(/ [0-9]+$/, "", s); k = split(s, f, ";")
      if (k == 2 && f[2] ~ /\[not sampled\]$/) { unseen += n; next }
      all += n
      for (i = 2; i <= k; i++) {
        if (f[i] ~ /!main\.main$/) main += n
        if (match(f[i], /!main\.phase[A-Za-z]+$/)) seen[substr(f[i], RSTART + 6)] += n
      }
      leaf = f[k]; up = k > 2 ? f[k - 1] : ""; miss = 0
      if (leaf ~ /!main\.leaf[A-Za-z]+$/) { leaves += n; miss = up !~ /!main\.(phaseLeaves|mid)$/ }
      if (leaf ~ /!main\.mid$/) { leaves += n; miss = up !~ /!main\.deep$/ }
      # memmove has other callers (in the runtime): those of the copy phase, or one that lost its
      # caller (main.main right under it)
      if (leaf ~ /!runtime\.memmove$/ && (s ~ /!main\.phaseCopy;/ || up ~ /!main\.main$/)) {
        leaves += n; miss = up !~ /!main\.phaseCopy$/
      }
      if (miss) { lost += n; print "  without its caller: " substr(s, 1, 300) " " n }
    }
    END {
      bad = 0
      if (all == 0 || total == 0) { print "no samples or no truth"; exit 1 }
      printf "%s Hz run %d: %d samples of the main thread with a stack (and %d [not sampled]), %.2f %% reach main.main; %d of %d leaf samples lack their caller\n", hz, run, all, unseen, 100 * main / all, lost, leaves
      if (100 * main / all < reachmin) bad = 1
      if (lost > 0) bad = 1
      for (p in cpu) {
        t = 100 * cpu[p] / total; m = 100 * seen[p] / all; d = m - t
        printf "  main.%s: %.2f %% of the samples, %.2f %% of the CPU (%+.2f)\n", p, m, t, d
        if (d > tol || d < -tol) bad = 1
      }
      exit bad
    }' "$T/err-$hz" "$T/go-$hz.folded"
}

for hz in 250 1000; do
  if ! judge "$hz" 1 >&2; then
    judge "$hz" 2 >&2 || {
      sort -t' ' -k2 -nr "$T/go-$hz.folded" | awk '{ print $NF, substr($0, 1, 240) }' | sort -nr | head -8 >&2
      fail "$hz Hz: a Go function lost its caller, or a phase is off its CPU share (see above)"
    }
  fi
done
echo "PASS: the Go program's phases keep their shares and its leaves their callers at 250 and 1000 Hz"
