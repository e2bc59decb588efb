#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-listen.sh - a child of `pipeprof record`'s tree (not CMD) is reached through
# record's connect port; its own listen socket (dotnet-diagnostic-PID-KEY-socket, what `pipeprof
# ps` and `dotnet-trace ps` list) is bound IPC_LISTEN_DEFER_MS after its start (ipc/server.c says
# why), its socket's fd made at its start like every other fd of the library:
#   1. a child that lives on gets its socket, is listed by `pipeprof ps` and removes it at exit;
#      CMD itself (the shell) binds its own at once;
#   2. short children (20 x /bin/true) bind none: under strace -f, fewer than half of the 22
#      processes call bind on a diagnostic socket (before the change each of them did; the bound
#      is loose because a child that a loaded machine keeps alive past the delay binds as before).
source "$(dirname "$0")/ipc-lib.sh"
run_env=("${RECORD_ENV[@]}") # a sanitizer build's runtime first (tests/ipc-lib.sh)

# 1. sleep, a child of the recorded shell, lives 3 s: listed while it runs.
"${run_env[@]}" "$PIPEPROF" record -q -o "$T/long.nettrace" -- \
  sh -c 'echo $$ >"$TMPDIR/cmd"; sleep 3 & echo $! >"$TMPDIR/pid"; wait' 2>"$T/long.err" &
REC=$!
PP_PIDS+=("$REC")
for _ in $(seq 100); do [[ -s $T/pid ]] && break; sleep 0.1; done
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

# 2. short children bind no socket.
command -v strace >/dev/null || skip "strace is not installed (part 2: binds of short children)"
strace -f -qq -e trace=bind -o "$T/strace.out" "${run_env[@]}" "$PIPEPROF" record -q \
  -o "$T/short.nettrace" -- sh -c 'for i in $(seq 20); do /bin/true; done' 2>"$T/short.err" ||
  { cat "$T/short.err" >&2; fail "record of 20 children failed"; }
binds=$(grep -c 'bind(.*dotnet-diagnostic-' "$T/strace.out" || true)
note "binds of a diagnostic socket in the recorded tree (sh, seq, 20 x true): $binds"
[[ $binds -ge 1 ]] || fail "the recorded shell (CMD) bound no diagnostic socket"
[[ $binds -lt 10 ]] || fail "$binds of 22 recorded processes bound a diagnostic socket, want fewer than 10"
echo "ok   short children under record bind no diagnostic socket ($binds binds)"
