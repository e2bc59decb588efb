#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-child-calls.sh - what `pipeprof record` makes each short child do, seen by
# strace -f (issue 22: every exec'd child of a recorded tree pays it). A recorded child
#   - reads no time zone: the nettrace header's UTC date is worked out by nettrace/ itself
#     (glibc's gmtime_r() opened and parsed /etc/localtime at its first call, in every child);
#   - does not poll for its IPC loop's end at exit: the exit handler waits on a futex the loop
#     thread wakes (ipc_server_stop_quick slept 1 ms at a time, so every exit took 1 ms longer).
# The children still end their sessions: the recording's summary counts all 6 processes.
source "$(dirname "$0")/ipc-lib.sh"
command -v strace >/dev/null || skip "strace is missing: cannot see the children's calls"
strace -f -qq -o /dev/null true 2>/dev/null || skip "strace cannot trace here (ptrace refused)"

for mode in cpu wall; do
  out=$T/$mode
  mkdir "$out"
  strace -f -qq -e trace=openat,open,nanosleep,clock_nanosleep -o "$out/strace" \
    "${RECORD_ENV[@]}" "$PIPEPROF" record --mode "$mode" -o "$out/kids.nettrace" -- \
    sh -c 'for i in 1 2 3 4 5; do /bin/true; done' 2>"$out/err" ||
    { cat "$out/err" >&2; fail "$mode: record failed"; }
  execs=$(grep -c 'libpipeprof' "$out/strace" || true)
  tz=$(grep -c 'localtime' "$out/strace" || true)
  polls=$(grep -cE 'nanosleep\((CLOCK_[A-Z]*, 0, )?\{tv_sec=0, tv_nsec=1000000\}' "$out/strace" || true)
  line=$(grep -m1 'recorded' "$out/err" || true)
  read -r recorded without < <(sed -n 's/^pipeprof: .*; \([0-9]*\) process[es]* recorded, \([0-9]*\) without samples.*/\1 \2/p' <<<"$line")
  note "$mode: $execs opens of the library, $tz of the time zone, $polls 1 ms sleeps; $line"
  [[ $execs -ge 6 ]] || fail "$mode: strace saw $execs loads of the library, want 6 or more (sh and 5 children)"
  [[ $tz == 0 ]] || fail "$mode: $tz opens of the time zone in the recorded tree: $(grep localtime "$out/strace" | head -3)"
  [[ $polls == 0 ]] || fail "$mode: $polls 1 ms sleeps in the recorded tree (the exit's wait for the IPC loop)"
  [[ $((${recorded:-0} + ${without:-0})) == 6 ]] ||
    fail "$mode: summary counts ${recorded:-?} + ${without:-?} processes, want 6 (sh and 5 children)"
done
echo "ok   recorded children read no time zone and do not poll at exit"
