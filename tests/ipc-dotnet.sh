#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/ipc-dotnet.sh - `pipeprof ps` and `pipeprof collect` against a real .NET process (its own
# diagnostic server), in -p mode and in reverse mode (--diagnostic-port ... -- dotnet app), and
# the same two modes against a pipeprof host; `pipeprof dump` must read every trace.
source "$(dirname "$0")/ipc-lib.sh"
APP=$(dotnet_app)

# Both run until the collections from them are done ($T/stop, 300 s at most), not 6 s: at load
# 20 the host had exited before the Ctrl-C case's collect was interrupted (kill: No such process;
# 2 of 2 runs, -Werror and ASan).
dotnet "$APP" 300 --until "$T/stop" >"$T/app.out" & PP_PIDS+=($!); P=$!
LD_PRELOAD=$PRELOAD "$BUSY" 300 --until "$T/stop" >"$T/busy.out" & PP_PIDS+=($!); Q=$!
wait_socket "$P" >/dev/null
wait_socket "$Q" >/dev/null
"$PIPEPROF" ps >"$T/ps.out"
grep -q "^ *$P .*dotnet-ipc.dll" "$T/ps.out" || { cat "$T/ps.out"; fail "ps does not list the .NET process"; }
grep -q "^ *$Q .*pp-sample-busy" "$T/ps.out" || { cat "$T/ps.out"; fail "ps does not list the pipeprof host"; }

"$PIPEPROF" collect -p "$P" --duration 2 -o "$T/dotnet-p.nettrace" 2>"$T/c1.log" || { cat "$T/c1.log"; fail "collect -p (dotnet)"; }
check_trace "$T/dotnet-p.nettrace"
"$PIPEPROF" collect -p "$Q" --duration 1 -o "$T/pp-p.nettrace" 2>"$T/c2.log" || { cat "$T/c2.log"; fail "collect -p (pipeprof)"; }
check_trace "$T/pp-p.nettrace"
check_process_info "$T/pp-p.nettrace"

# no --duration: Ctrl-C (SIGINT) stops the trace cleanly
"$PIPEPROF" collect -p "$Q" -o "$T/pp-int.nettrace" 2>"$T/c5.log" & C=$!
# Interrupted a second after its session began (collect names its file once it runs), not a
# second after it was started: on a loaded machine the session may not have begun by then.
for _ in $(seq 600); do
  grep -q "^Output File" "$T/c5.log" 2>/dev/null && break
  kill -0 "$C" 2>/dev/null || break
  sleep 0.1
done
sleep 1
kill -INT "$C"
wait "$C" || { cat "$T/c5.log"; fail "collect stopped by SIGINT"; }
check_trace "$T/pp-int.nettrace"
check_process_info "$T/pp-int.nettrace"
touch "$T/stop"

# reverse mode: the child connects to us (suspended until ResumeRuntime)
"$PIPEPROF" collect --diagnostic-port "$T/port1.sock" --duration 2 -o "$T/dotnet-port.nettrace" \
  -- dotnet "$APP" 3 >"$T/child1.out" 2>"$T/c3.log" || { cat "$T/c3.log"; fail "collect --diagnostic-port (dotnet)"; }
check_trace "$T/dotnet-port.nettrace"
grep -q "dotnet-ipc done" "$T/child1.out" || fail "the .NET child did not finish"
"$PIPEPROF" collect --diagnostic-port "$T/port2.sock" --duration 1 -o "$T/pp-port.nettrace" \
  -- env LD_PRELOAD="$PRELOAD" "$BUSY" 2 >"$T/child2.out" 2>"$T/c4.log" || { cat "$T/c4.log"; fail "collect --diagnostic-port (pipeprof)"; }
check_trace "$T/pp-port.nettrace"
check_process_info "$T/pp-port.nettrace"
grep -q "busy done" "$T/child2.out" || fail "the native child did not finish"

wait "$P" "$Q"
grep -q "dotnet-ipc done" "$T/app.out" || fail "the .NET app's output changed"
grep -q "busy done" "$T/busy.out" || fail "the host's output changed"
echo "ipc-dotnet: ok"
