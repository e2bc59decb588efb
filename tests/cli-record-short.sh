#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-short.sh - `pipeprof record` of a shell that runs 50 short children writes no
# trace for a child that produced no samples of its own, and its summary counts them: a child's
# time in the profiler's own code (the constructor's wait for ResumeRuntime, the exit handler's
# wait for the session's end) is no sample of it. Wall mode took one at the session's first pass,
# in that wait, for every child (49 of 52 processes got a file), so each child left a file. Run at
# 10 Hz in wall and CPU mode: a child's own code lasts about a millisecond, so a fair sample of it
# comes about once in a hundred children, and the test allows 10 of 52 files (a loaded machine
# stretches the children's lives); the profiler's own waits came at every child.
source "$(dirname "$0")/ipc-lib.sh"
run_env=("${RECORD_ENV[@]}") # a sanitizer build's runtime first (tests/ipc-lib.sh)
procs=52                     # sh, seq and 50 times true

for mode in wall cpu; do
  out=$T/$mode
  mkdir "$out"
  "${run_env[@]}" "$PIPEPROF" record --mode "$mode" --hz 10 -o "$out/kids.nettrace" -- \
    sh -c 'for i in $(seq 50); do /bin/true; done' 2>"$out/err" ||
    { cat "$out/err" >&2; fail "$mode: record failed"; }
  files=$(find "$out" -name 'kids*.nettrace' | wc -l)
  # "pipeprof: ...; N processes recorded, M without samples (no file written)..."
  line=$(grep -m1 'recorded' "$out/err" || true)
  read -r recorded without < <(sed -n 's/^pipeprof: .*; \([0-9]*\) process[es]* recorded, \([0-9]*\) without samples.*/\1 \2/p' <<<"$line")
  note "$mode: $files files; $line"
  for f in $(find "$out" -name 'kids.[0-9]*.nettrace' | head -5); do
    "$PIPEPROF" convert --format folded -o "$out/one.folded" "$f" 2>/dev/null &&
      note "  $(basename "$f"): $(head -c 300 "$out/one.folded")"
  done
  [[ $files -ge 1 && $files -le 10 ]] ||
    fail "$mode: $files trace files for $procs processes, want 1 to 10 (children without samples of their own leave none)"
  [[ ${recorded:-} == "$files" ]] || fail "$mode: summary says '$line', $files files were written"
  [[ $((recorded + without)) == "$procs" ]] ||
    fail "$mode: summary counts $recorded + $without processes, want $procs"
done
echo "ok   short children: no file for a child without samples of its own, counted in the summary"
