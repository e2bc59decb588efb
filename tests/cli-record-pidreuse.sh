#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-pidreuse.sh - two sampled children of one recording that get one pid (thread ids
# share the pid space, so beside a program that creates threads fast a pid names two processes
# of one recording): each gets a trace file of its own, X.<pid>.nettrace for the first and
# X.<pid>-2.nettrace for the second, holding its own samples only, and the summary counts both.
# Joined by the pid alone, as before the images were grouped by pid and start time, one file
# held both children's samples and the summary counted 2 processes of 3. tests/tools/pid-reuse.c
# forces the reuse (its spinner wraps the pid space with threads, unrecorded; when another
# program keeps the first child's pid, it starts another first child: one more file).
source "$(dirname "$0")/ipc-lib.sh" # B, T (TMPDIR), RECORD_ENV: a sanitizer's runtime first
PP=("${RECORD_ENV[@]}" "$PIPEPROF")

pid_max=$(cat /proc/sys/kernel/pid_max)
((pid_max <= 131072)) || skip "kernel.pid_max is $pid_max, too large to wrap within a recording here"
fail=0
# 30 s a round for the spinner to get the pid back (a wrap of the pid space took 3 s, 9 s in an
# ASan build beside other work): a bound for a loaded machine, which names what did not happen.
"${PP[@]}" record -v -o "$T/r.nettrace" -- "$B/tests/pid-reuse" 30 >"$T/r.out" 2>"$T/r.err" || {
  echo "FAIL: record or pid-reuse failed (status $?)"; cat "$T/r.out" "$T/r.err"; exit 1
}
cat "$T/r.out" | sed 's/^/     /'
first=$(awk '$1 == "first" {p = $2} END {print p}' "$T/r.out") # the last round's
rounds=$(grep -c '^first' "$T/r.out" || true) # a first child per round: a file each
second=$(awk '$1 == "second" {print $2}' "$T/r.out")
if [[ -z $first || $first != "$second" ]]; then
  echo "FAIL: the second child did not get the first child's pid ($first, ${second:-none})"
  cat "$T/r.err"; exit 1
fi

ls "$T"/r*.nettrace | sed 's/^/     /'
# Which work functions a trace holds.
works() {
  "$PIPEPROF" convert --format folded -o "$1.folded" "$1" 2>/dev/null || true
  grep -o 'pid_reuse_[a-z]*' "$1.folded" 2>/dev/null | sort -u | tr '\n' ' ' || true
}
check() { # FILE WANT: the file exists and holds WANT's samples, not the other child's
  local f=$1 want=$2 got
  if [[ ! -f $f ]]; then
    echo "FAIL: no $(basename "$f")"; fail=1; return
  fi
  got=$(works "$f")
  if [[ $got != "$want " ]]; then
    echo "FAIL: $(basename "$f") holds [${got% }], want [$want] only"; fail=1
  else
    echo "ok   $(basename "$f"): $want only"
  fi
}
# Whether the summary on stderr (FILE) counts N processes recorded: "pipeprof: N processes" with -v,
# "...; N processes" without (not "13 processes" for 3).
counts() { grep -qE "(^|[:;] )$2 processes recorded" "$1"; }
# Each process's samples in a folded file (its first frame names it: "NAME (PID)", "NAME (PID #2)"
# for a reused pid), for a failure's message: which process a count lacks.
per_process() {
  awk '{ n = $NF; sub(/ [0-9]+$/, ""); split($0, f, ";"); s[f[1]] += n }
       END { for (p in s) printf "     %s: %d samples\n", p, s[p] }' "$1" | sort
}
check "$T/r.$first.nettrace" pid_reuse_first
check "$T/r.$first-2.nettrace" pid_reuse_second
n=$(ls "$T"/r*.nettrace | wc -l)
want=$((rounds + 2))
[[ $n == "$want" ]] || { echo "FAIL: $n trace files, want $want (CMD's and one per child)"; fail=1; }
if counts "$T/r.err" "$want"; then
  echo "ok   summary: $want processes recorded"
else
  echo "FAIL: the summary does not count $want processes"; fail=1
fi
[[ $fail == 0 ]] || { cat "$T/r.err"; echo "cli-record-pidreuse: FAILED"; exit 1; }

# Another format: the processes' traces are converted into the one output from files in the
# recording's directory (process-<pid>.nettrace, process-<pid>-2.nettrace), which are removed
# with it (they were left there, and the directory with them).
mkdir "$T/tmp"
TMPDIR="$T/tmp" "${PP[@]}" record --format folded -o "$T/f.folded" -- "$B/tests/pid-reuse" 30 \
  >"$T/f.out" 2>"$T/f.err" || {
  echo "FAIL: record --format folded or pid-reuse failed (status $?)"; cat "$T/f.out" "$T/f.err"; exit 1
}
first=$(awk '$1 == "first" {p = $2} END {print p}' "$T/f.out")
rounds=$(grep -c '^first' "$T/f.out" || true)
second=$(awk '$1 == "second" {print $2}' "$T/f.out")
got=$(grep -o 'pid_reuse_[a-z]*' "$T/f.folded" | sort -u | tr '\n' ' ' || true)
if [[ -z $first || $first != "$second" ]]; then
  echo "FAIL: --format folded: the second child did not get the first child's pid ($first, ${second:-none})"; fail=1
elif [[ $got != "pid_reuse_first pid_reuse_second " ]] || ! counts "$T/f.err" $((rounds + 2)); then
  echo "FAIL: --format folded holds [${got% }], want both and $((rounds + 2)) processes recorded ($rounds rounds)"
  cat "$T/f.out" "$T/f.err"
  echo "     the folded output's processes:"; per_process "$T/f.folded"
  fail=1
else
  echo "ok   --format folded: both children, $((rounds + 2)) processes recorded"
fi
left=$(ls -A "$T/tmp")
[[ -z $left ]] || { echo "FAIL: left in TMPDIR: $(ls -AR "$T/tmp" | tr '\n' ' ')"; fail=1; }
[[ $fail == 0 ]] || { echo "cli-record-pidreuse: FAILED"; exit 1; }
echo "cli-record-pidreuse: ok"
