#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/ipc-trust.sh - pipeprof's clients check whom they talk to, and never delete what is not
# theirs (issue 20). In a shared sticky directory (as /tmp) an impostor listens at the target's
# socket name: `collect -p` refuses it (SO_PEERCRED: another process; as root also: a socket of
# another user, nobody), writes no trace, and `ps` does not list the target for it (neither for
# another user's socket nor for one another process listens on); a real host
# is still found beside a newer impostor; `collect --diagnostic-port` refuses an outsider's
# advertise and leaves a regular file at its path alone; `collect --socket PATH` refuses another
# user's socket (by its owner, also through a link) and a server of another user (SO_PEERCRED)
# unless --allow-other-user, and names the process it reaches; a server's BUSY answer (above its
# connection cap) is named. The cases with a second user need root and setpriv, and skip loudly
# otherwise.
source "$(dirname "$0")/ipc-lib.sh"
IMP=$B/tests/ipc-impostor
[[ -x $IMP ]] || fail "missing $IMP"
cp "$IMP" "$T/ipc-impostor" && chmod 755 "$T/ipc-impostor"
chmod 1777 "$T" # shared and sticky, as /tmp
as_nobody=()
if [[ $(id -u) -eq 0 ]] && command -v setpriv >/dev/null; then
  as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  chmod 755 "$B" "$B/tests" 2>/dev/null || true
else
  note "SKIP (loud): the other-user cases need root and setpriv"
fi

# wait_line FILE TEXT: TEXT appears in FILE within 60 s (a hang guard: a loaded machine's
# processes may take seconds to get there).
wait_line() {
  local i
  for i in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  fail "no '$2' in $1: $(cat "$1" 2>/dev/null)"
}

# collect_refused N PID TEXT: `collect -p PID` fails saying TEXT and writes no trace tN.
collect_refused() {
  if "$PIPEPROF" collect -p "$2" --duration 1 -o "$T/t$1.nettrace" 2>"$T/c$1.err"; then
    fail "collect -p $2 trusted an impostor: $(cat "$T/c$1.err")"
  fi
  grep -q "$3" "$T/c$1.err" || fail "the refusal does not say '$3': $(cat "$T/c$1.err")"
  [[ ! -e $T/t$1.nettrace ]] || fail "a trace was written from the impostor's bytes"
}

# 1. Same user, another process at the target's name: the peer's pid gives it away.
sleep 60 & PP_PIDS+=($!); Q=$!
"$T/ipc-impostor" listen "$T/dotnet-diagnostic-$Q-1-socket" 20 >"$T/imp1.out" & PP_PIDS+=($!); I=$!
wait_line "$T/imp1.out" listening
collect_refused 1 "$Q" "served by process $I of uid $(id -u), not by process $Q"
# ps leaves it out too (the listener is not Q: /proc/net/unix and Q's fds), and lists a real host
LD_PRELOAD=$PRELOAD "$BUSY" 300 --until "$T/stop1" >"$T/host1.out" & PP_PIDS+=($!); R=$!
wait_socket "$R" >/dev/null
"$PIPEPROF" ps >"$T/ps1.out"
! grep -q "^ *$Q " "$T/ps1.out" || fail "ps lists $Q for another process's socket: $(cat "$T/ps1.out")"
grep -q "^ *$R " "$T/ps1.out" || fail "ps does not list the real host $R: $(cat "$T/ps1.out")"
touch "$T/stop1"
wait "$R" || fail "the host failed"
kill "$I"; wait "$I" 2>/dev/null || true
grep -q "served 0" "$T/imp1.out" || fail "the impostor got requests: $(cat "$T/imp1.out")"
rm -f "$T/dotnet-diagnostic-$Q-1-socket"
note "same-user impostor refused by its pid"

if [[ ${#as_nobody[@]} -gt 0 ]]; then
  # 2. Another user's socket at the target's name: refused by its owner, not listed by ps.
  "${as_nobody[@]}" "$T/ipc-impostor" listen "$T/dotnet-diagnostic-$Q-2-socket" 20 >"$T/imp2.out" &
  PP_PIDS+=($!); I=$!
  wait_line "$T/imp2.out" listening
  collect_refused 2 "$Q" "belongs to uid 65534, not to the user of process $Q"
  "$PIPEPROF" ps >"$T/ps2.out"
  ! grep -q "^ *$Q " "$T/ps2.out" || fail "ps lists $Q for nobody's socket: $(cat "$T/ps2.out")"

  # 3. A real host, and a newer impostor of another user at another key: the host is found.
  # (until its checks are done, 300 s at most, not 4 s: under ASan at load 20 it was exiting
  # during the collect, ResumeRuntime failed, 1 of 2 ASan runs)
  LD_PRELOAD=$PRELOAD "$BUSY" 300 --until "$T/stop3" >"$T/host.out" & PP_PIDS+=($!); W=$!
  wait_socket "$W" >/dev/null
  sleep 0.05
  "${as_nobody[@]}" "$T/ipc-impostor" listen "$T/dotnet-diagnostic-$W-99-socket" 20 >"$T/imp3.out" &
  PP_PIDS+=($!); I3=$!
  wait_line "$T/imp3.out" listening
  "$PIPEPROF" collect -p "$W" --duration 1 -o "$T/t3.nettrace" 2>"$T/c3.err" ||
    fail "collect -p of a real host beside an impostor: $(cat "$T/c3.err")"
  check_trace "$T/t3.nettrace"
  check_process_info "$T/t3.nettrace"
  "$PIPEPROF" ps >"$T/ps3.out"
  grep -q "^ *$W " "$T/ps3.out" || fail "ps does not list the real host $W: $(cat "$T/ps3.out")"
  kill "$I" "$I3"; wait "$I" "$I3" 2>/dev/null || true
  grep -q "served 0" "$T/imp3.out" || fail "the impostor got requests: $(cat "$T/imp3.out")"
  touch "$T/stop3"
  wait "$W" || fail "the host failed"
  note "another user's socket refused by its owner; the real host found beside it"

  # 4. Reverse mode: an outsider who can reach the port advertises; it is refused by its uid.
  "$PIPEPROF" collect --diagnostic-port "$T/port.sock" -o "$T/t4.nettrace" 2>"$T/c4.err" &
  PP_PIDS+=($!); C=$!
  wait_until 60 "collect's listening socket $T/port.sock" test -S "$T/port.sock"
  chmod 777 "$T/port.sock" # as a permissive umask would leave it
  "${as_nobody[@]}" "$T/ipc-impostor" advertise "$T/port.sock" "$Q" 2 >"$T/imp4.out" ||
    fail "the advertising impostor failed"
  wait_line "$T/c4.err" "refused a connection on $T/port.sock from process .* of uid 65534"
  kill -INT "$C"; wait "$C" 2>/dev/null || true
  grep -q "served 0" "$T/imp4.out" || fail "the outsider was answered: $(cat "$T/imp4.out")"
  note "an outsider's advertise refused"

  # 8. collect --socket PATH: another user's socket is refused by its owner, also through a
  # link of ours; a socket file of root's served by another user is refused by SO_PEERCRED; with
  # --allow-other-user it is reached, and its server is named.
  "${as_nobody[@]}" "$T/ipc-impostor" listen "$T/nobody.sock" 20 >"$T/imp8.out" & PP_PIDS+=($!); I=$!
  wait_line "$T/imp8.out" listening
  ln -s "$T/nobody.sock" "$T/link.sock"
  for s in nobody link; do
    if "$PIPEPROF" collect --socket "$T/$s.sock" --duration 1 -o "$T/t8$s.nettrace" 2>"$T/c8$s.err"; then
      fail "collect --socket $s.sock trusted nobody's socket: $(cat "$T/c8$s.err")"
    fi
    grep -q "refusing $T/$s.sock: it belongs to uid 65534, not you (uid 0) or root; --allow-other-user" \
      "$T/c8$s.err" || fail "the refusal of $s.sock does not name uid 65534: $(cat "$T/c8$s.err")"
    [[ ! -e $T/t8$s.nettrace ]] || fail "a trace was written from nobody's socket ($s.sock)"
  done
  chown root "$T/nobody.sock"
  if "$PIPEPROF" collect --socket "$T/nobody.sock" --duration 1 -o "$T/t8p.nettrace" 2>"$T/c8p.err"; then
    fail "collect --socket trusted a server of uid 65534: $(cat "$T/c8p.err")"
  fi
  grep -q "refusing $T/nobody.sock: it is served by process $I of uid 65534, not you (uid 0) or root" \
    "$T/c8p.err" || fail "the refusal does not name the server: $(cat "$T/c8p.err")"
  [[ ! -e $T/t8p.nettrace ]] || fail "a trace was written from a server of uid 65534"
  "$PIPEPROF" collect --socket "$T/nobody.sock" --allow-other-user --duration 1 \
    -o "$T/t8a.nettrace" 2>"$T/c8a.err" || true
  grep -q "Process        : $I (uid 65534), serving $T/nobody.sock" "$T/c8a.err" ||
    fail "--allow-other-user did not reach and name the server: $(cat "$T/c8a.err")"
  kill "$I"; wait "$I" 2>/dev/null || true
  grep -q "served [1-9]" "$T/imp8.out" || fail "--allow-other-user sent nothing: $(cat "$T/imp8.out")"
  note "collect --socket: another user's socket and server refused; --allow-other-user reaches it"
fi

# 5. collect --diagnostic-port FILE: a regular file is not deleted to make room.
echo precious >"$T/keep"
if "$PIPEPROF" collect --diagnostic-port "$T/keep" -o "$T/t5.nettrace" 2>"$T/c5.err"; then
  fail "collect listened over a regular file"
fi
grep -q "not a socket" "$T/c5.err" || fail "no reason given: $(cat "$T/c5.err")"
[[ $(cat "$T/keep") == precious ]] || fail "the file at --diagnostic-port was replaced"

# 6. PIPEPROF_DIAGNOSTIC_PORT=FILE: the host runs, the file stays.
PIPEPROF_DIAGNOSTIC_PORT=$T/keep LD_PRELOAD=$PRELOAD "$BUSY" 1 >"$T/host6.out" 2>"$T/host6.err" ||
  fail "the host failed with PIPEPROF_DIAGNOSTIC_PORT on a file"
[[ $(cat "$T/keep") == precious ]] || fail "PIPEPROF_DIAGNOSTIC_PORT replaced a regular file"
grep -q "not a socket" "$T/host6.err" || fail "the host did not say why: $(cat "$T/host6.err")"

# 7. record's working directory can be passed by every uid (a tree may change credentials), so
#    the children's segment files in it must be readable by the recording user alone: another
#    user who reads /tmp sees the directory's name and could guess segment-N.nettrace.
"${RECORD_ENV[@]}" "$PIPEPROF" record --hz 99 -o "$T/t7.nettrace" -- sh -c \
  '"$1" 1 >/dev/null; stat -c "%a %n" "$(dirname "${DOTNET_DiagnosticPorts%%,*}")"/segment-*.nettrace' \
  sh "$BUSY" >"$T/rec7.out" 2>"$T/rec7.err" || { cat "$T/rec7.err"; fail "record of a child failed"; }
grep -q 'segment-' "$T/rec7.out" || fail "no segment file seen: $(cat "$T/rec7.out")"
if grep -v '^600 ' "$T/rec7.out"; then
  fail "a child's segment file is readable by other users"
fi
note "record's segment files are the recording user's alone"

# 9. collect --socket PATH of our own host: it is recorded, and its server named by its pid.
PIPEPROF_DIAGNOSTIC_PORT=$T/own.sock LD_PRELOAD=$PRELOAD "$BUSY" 3 >"$T/host9.out" &
PP_PIDS+=($!); W=$!
wait_until 60 "the host's listening socket $T/own.sock" test -S "$T/own.sock"
"$PIPEPROF" collect --socket "$T/own.sock" --duration 1 -o "$T/t9.nettrace" 2>"$T/c9.err" ||
  fail "collect --socket of our own host: $(cat "$T/c9.err")"
grep -q "Process        : $W (uid $(id -u)), serving $T/own.sock" "$T/c9.err" ||
  fail "the server of --socket is not named: $(cat "$T/c9.err")"
check_trace "$T/t9.nettrace"
wait "$W" || fail "the host failed"
if "$PIPEPROF" collect --socket "$T/keep" -o "$T/t9b.nettrace" 2>"$T/c9b.err"; then
  fail "collect --socket connected to a regular file"
fi
grep -q "is not a socket" "$T/c9b.err" || fail "no reason given: $(cat "$T/c9b.err")"
note "collect --socket of our own host names its server"

# 10. A server above its connection cap answers BUSY: collect says so, not 'No data available'.
"$T/ipc-impostor" busy "$T/busy.sock" 20 >"$T/imp10.out" & PP_PIDS+=($!); I=$!
wait_line "$T/imp10.out" listening
if "$PIPEPROF" collect --socket "$T/busy.sock" --duration 1 -o "$T/t10.nettrace" 2>"$T/c10.err"; then
  fail "collect succeeded against a busy server"
fi
grep -q "CollectTracing failed: BUSY (the target is at its limit of connections" "$T/c10.err" ||
  fail "collect does not say the target is busy: $(cat "$T/c10.err")"
kill "$I"; wait "$I" 2>/dev/null || true
note "a busy server's answer is named"
echo "ipc-trust: ok"
