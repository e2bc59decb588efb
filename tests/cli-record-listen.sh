#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-listen.sh - a child of `pipeprof record`'s tree (not CMD) is reached through
# record's connect port; its own listen socket (dotnet-diagnostic-PID-KEY-socket, what `pipeprof
# ps` and `dotnet-trace ps` list) is bound IPC_LISTEN_DEFER_MS after its start (ipc/server.c says
# why), its socket's fd made at its start like every other fd of the library:
#   1. a child that lives on gets its socket, is listed by `pipeprof ps` and removes it at exit;
#      CMD itself (the shell) binds its own at once;
#   2. short children (20 x /bin/true) bind none: under strace -f, with the delay made 60 s
#      (PIPEPROF_LISTEN_DEFER_MS, the tests' knob, read by the constructor) only CMD binds, so
#      no load can keep a child alive past it; with the knob at 0 every one of the 22 processes
#      binds (the knob reaches them, and the pattern matches).
source "$(dirname "$0")/ipc-lib.sh"
run_env=("${RECORD_ENV[@]}") # a sanitizer build's runtime first (tests/ipc-lib.sh)

# 1. sleep, a child of the recorded shell, lives 3 s: listed while it runs.
"${run_env[@]}" "$PIPEPROF" record -q -o "$T/long.nettrace" -- \
  sh -c 'echo $$ >"$TMPDIR/cmd"; sleep 3 & echo $! >"$TMPDIR/pid"; wait' 2>"$T/long.err" &
REC=$!
PP_PIDS+=("$REC")
wait_until 60 "the recorded shell wrote its sleep's pid" test -s "$T/pid"
pid=$(cat "$T/pid")
cmd=$(cat "$T/cmd")
sock=$(wait_socket "$pid")
cmd_sock=$(wait_socket "$cmd")
"$PIPEPROF" ps >"$T/ps.out"
grep -q "^ *$pid " "$T/ps.out" || { cat "$T/ps.out" >&2; fail "pipeprof ps does not list the recorded sleep ($pid)"; }
note "listed: $(grep "^ *$pid " "$T/ps.out")"
wait "$REC" || { cat "$T/long.err" >&2; fail "record of sleep failed"; }
[[ ! -e $sock ]] || fail "$sock is left after the recorded process exited"
[[ ! -e $cmd_sock ]] || fail "$cmd_sock is left after the recorded shell exited"
echo "ok   a recorded child that lives on has its socket, is listed, removes it at exit"

# 2. short children bind no socket; with no delay, each binds.
command -v strace >/dev/null || skip "strace is not installed (part 2: binds of short children)"
for defer in 60000 0; do
  strace -f -qq -e trace=bind -o "$T/strace.$defer" env PIPEPROF_LISTEN_DEFER_MS=$defer "${run_env[@]}" \
    "$PIPEPROF" record -q -o "$T/short.nettrace" -- sh -c 'for i in $(seq 20); do /bin/true; done' \
    2>"$T/short.err" || { cat "$T/short.err" >&2; fail "record of 20 children failed (delay $defer ms)"; }
  binds=$(grep -c 'bind(.*dotnet-diagnostic-' "$T/strace.$defer" || true)
  note "delay $defer ms: binds of a diagnostic socket in the recorded tree (sh, seq, 20 x true): $binds"
  if [[ $defer != 0 ]]; then
    [[ $binds == 1 ]] || fail "delay $defer ms: $binds of 22 recorded processes bound a diagnostic socket, want 1 (CMD's)"
  else
    [[ $binds -ge 22 ]] || fail "delay 0: $binds of 22 recorded processes bound a diagnostic socket, want each"
  fi
done
echo "ok   short children under record bind no diagnostic socket (CMD's alone), each with the delay at 0"
