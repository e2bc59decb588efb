#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-child-calls.sh - what `pipeprof record` makes each short child do, seen by
# strace -f (issue 22: every exec'd child of a recorded tree pays it). A recorded child
#   - reads no time zone: the nettrace header's UTC date is worked out by nettrace/ itself
#     (glibc's gmtime_r() opened and parsed /etc/localtime at its first call, in every child);
#   - does not poll for its IPC loop's end at exit: the exit handler waits on a futex the loop
#     thread wakes (ipc_server_stop_quick slept 1 ms at a time, so every exit took 1 ms longer);
#   - is not sent ResumeRuntime: its start is held until its session runs, and then goes on by
#     itself (PIPEPROF_RESUME_AT_SESSION; its advertise says so), which saves a connection per
#     child on both sides (a third of the connections of a short child);
#   - advertises its next connection (the one `record` keeps for StopTracing) 20 ms after its
#     session began, not at once: most short children have ended by then (one connection each
#     instead of two). A lower bound, which a loaded machine only lengthens.
# The children still end their sessions: the recording's summary counts all 7 processes.
source "$(dirname "$0")/ipc-lib.sh"
command -v strace >/dev/null || skip "strace is missing: cannot see the children's calls"
strace -f -qq -o /dev/null true 2>/dev/null || skip "strace cannot trace here (ptrace refused)"

for mode in cpu wall; do
  out=$T/$mode
  mkdir "$out"
  strace -f -qq -ttt -s 24 -e trace=openat,open,nanosleep,clock_nanosleep,sendto,connect,clone,clone3,execve -o "$out/strace" \
    "${RECORD_ENV[@]}" "$PIPEPROF" record --mode "$mode" -o "$out/kids.nettrace" -- \
    sh -c 'for i in 1 2 3 4 5; do /bin/true; done; /bin/sleep 0.2' 2>"$out/err" ||
    { cat "$out/err" >&2; fail "$mode: record failed"; }
  execs=$(grep -c 'libpipeprof' "$out/strace" || true)
  tz=$(grep -c 'localtime' "$out/strace" || true)
  polls=$(grep -cE 'nanosleep\((CLOCK_[A-Z]*, 0, )?\{tv_sec=0, tv_nsec=1000000\}' "$out/strace" || true)
  # ResumeRuntime: the 20-byte header alone, command set 4 (process), id 1.
  resumes=$(grep -c 'sendto(.*"DOTNET_IPC_V1\\0\\24\\0\\4\\1' "$out/strace" || true)
  sessions=$(grep -c 'sendto(.*"DOTNET_IPC_V1\\0[^"]*\\2\\3\\0\\0' "$out/strace" || true)
  # Per image, the time from its first connection to record's socket (made on its main thread)
  # to its second (on its IPC loop thread): "smallest gap, images that connected twice". Threads
  # are mapped to their process through the clone calls; an exec starts a new image.
  read -r gap_min twice < <(awk '
      function tg(x) { return (x in g) ? g[x] : x }
      /clone3?\(/ && /CLONE_THREAD/ { if ($NF ~ /^[0-9]+$/) g[$NF] = tg($1); else pend[$1] = 1; next }
      /<\.\.\. clone3? resumed>/ && pend[$1] { g[$NF] = tg($1); delete pend[$1]; next }
      /execve\(/ && $NF == "0" { n[tg($1)] = 0; next }
      /connect\(.*port\.sock/ { p = tg($1); n[p]++; if (n[p] == 1) t[p] = $2;
        else if (n[p] == 2) { d = $2 - t[p]; if (c == 0 || d < m) m = d; c++ } }
      END { printf "%.4f %d\n", m, c }' "$out/strace")
  line=$(grep -m1 'recorded' "$out/err" || true)
  read -r recorded without < <(sed -n 's/^pipeprof: .*; \([0-9]*\) process[es]* recorded, \([0-9]*\) without samples.*/\1 \2/p' <<<"$line")
  note "$mode: $execs opens of the library, $tz of the time zone, $polls 1 ms sleeps, $sessions CollectTracing, $resumes ResumeRuntime, $twice images connected twice (first gap $gap_min s); $line"
  [[ $execs -ge 7 ]] || fail "$mode: strace saw $execs loads of the library, want 7 or more (sh and 6 children)"
  [[ $tz == 0 ]] || fail "$mode: $tz opens of the time zone in the recorded tree: $(grep localtime "$out/strace" | head -3)"
  [[ $sessions -ge 7 ]] || fail "$mode: strace saw $sessions CollectTracing requests, want 7 (the pattern no longer matches?)"
  [[ $twice -ge 1 ]] || fail "$mode: no image connected twice (sh and sleep live past 20 ms)"
  awk -v g="$gap_min" 'BEGIN { exit !(g >= 0.015) }' ||
    fail "$mode: an image connected again $gap_min s after its session's connection, want 0.02 (the spare waits)"
  [[ $resumes == 0 ]] || fail "$mode: record sent $resumes ResumeRuntime to children that resume at their session's start"
  [[ $polls == 0 ]] || fail "$mode: $polls 1 ms sleeps in the recorded tree (the exit's wait for the IPC loop)"
  [[ $((${recorded:-0} + ${without:-0})) == 7 ]] ||
    fail "$mode: summary counts ${recorded:-?} + ${without:-?} processes, want 7 (sh and 6 children)"
done
echo "ok   recorded children read no time zone, do not poll at exit, get no ResumeRuntime and connect again only later"
