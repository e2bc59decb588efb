#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-outputs.sh - the CLI never loses data (issue 20): a write error is an error for every
# command (stdout on /dev/full: non-zero status and a message); an output that is an input is
# refused (the same name, a hard link, standard output appended to the input) and the input
# stays whole; an output is written beside and renamed into place, so a write that fails half way
# (a file size limit) leaves the earlier file as it was and no temporary file behind; `record`
# keeps its children's trouble off the shared stderr (counted in one summary line, named with -v).
source "$(dirname "$0")/ipc-lib.sh"
PP=$PIPEPROF
cp "$S/tests/data/pipeprof-workload-wall.nettrace" "$T/in.nettrace"
cp "$T/in.nettrace" "$T/orig.nettrace"

# 1. Standard output on a full disk.
for cmd in "report $T/in.nettrace" "convert --format folded $T/in.nettrace" "dump $T/in.nettrace" \
  "ps" "--help" "record --help"; do
  # shellcheck disable=SC2086
  if $PP $cmd >/dev/full 2>"$T/full.err"; then fail "pipeprof $cmd >/dev/full exited 0"; fi
  grep -q "No space left on device\|Input/output error" "$T/full.err" ||
    fail "pipeprof $cmd >/dev/full said nothing: $(cat "$T/full.err")"
done

# 2. An output that is an input.
ln "$T/in.nettrace" "$T/link.nettrace"
for out in "$T/in.nettrace" "$T/link.nettrace"; do
  if $PP convert --format folded -o "$out" "$T/in.nettrace" 2>"$T/same.err"; then
    fail "convert -o $out overwrote its input"
  fi
  grep -q "is also an input" "$T/same.err" || fail "no reason given: $(cat "$T/same.err")"
done
if $PP convert --format folded "$T/in.nettrace" >>"$T/in.nettrace" 2>"$T/same.err"; then
  fail "convert appended to its own input"
fi
cmp -s "$T/in.nettrace" "$T/orig.nettrace" || fail "the input was changed"

# 3. A write that fails half way: the earlier output stays, no temporary file is left.
echo earlier >"$T/out.perf"
if (trap '' XFSZ; ulimit -f 1; $PP convert --format perf -o "$T/out.perf" "$T/in.nettrace") 2>"$T/fsize.err"; then
  fail "convert past the file size limit exited 0"
fi
[[ $(cat "$T/out.perf") == earlier ]] || fail "a failed convert destroyed the earlier output"
[[ -z $(ls -A "$T" | grep '^\.out\.perf\.') ]] || fail "a temporary file was left: $(ls -A "$T")"
umask 022
$PP convert --format perf -o "$T/out.perf" "$T/in.nettrace"
[[ $(head -c 7 "$T/out.perf") != earlier && $(stat -c %a "$T/out.perf") == 644 ]] ||
  fail "convert did not replace the output with a 0644 file ($(stat -c %a "$T/out.perf"))"

# 4. record: children killed mid-session leave incomplete traces; the summary counts them. Each
# child is killed once it has burned 0.2 s of CPU (utime + stime in /proc/PID/stat, 100 ticks a
# second here), not after a fixed 0.4 s: at a load of 17 one child of three got too little CPU in
# 0.4 s to take its first sample, which is when a recorded child connects, and left no trace.
kids='for i in 1 2 3; do sh -c "while :; do :; done" & p=$!; n=0
  while [ $n -lt 600 ]; do
    set -- $(cat /proc/$p/stat 2>/dev/null) 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
    [ $((${14} + ${15})) -ge 20 ] && break
    sleep 0.05; n=$((n + 1))
  done
  sleep 0.1; kill -9 $p; wait $p; done; exit 0'
"${RECORD_ENV[@]}" "$PP" record -o "$T/kids.nettrace" -- sh -c "$kids" 2>"$T/kids.err" ||
  fail "record failed: $(cat "$T/kids.err")"
! grep -q "is incomplete\|failed:" "$T/kids.err" ||
  fail "record printed per-child trouble without -v: $(cat "$T/kids.err")"
# (their frames named from the files of their modules since 2026-11-29: cli-record-killed)
grep -q "3 with an incomplete trace (kept), [0-9]* of [0-9]* frames of cut traces named from files; -v for each" "$T/kids.err" ||
  fail "the summary does not count the 3 killed children: $(cat "$T/kids.err")"
"${RECORD_ENV[@]}" "$PP" record -v -o "$T/kidsv.nettrace" -- sh -c "$kids" 2>"$T/kidsv.err" ||
  fail "record -v failed"
[[ $(grep -c "is incomplete" "$T/kidsv.err") == 3 ]] ||
  fail "record -v does not name the 3 incomplete traces: $(cat "$T/kidsv.err")"
[[ -z $(ls -A "$T" | grep '^\.kids') ]] || fail "record left a temporary file: $(ls -A "$T")"
echo "cli-outputs: ok"
