#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-daemon.sh - `pipeprof record` of a daemon that double-forks: its middle parent
# exits before the daemon's first sample, so the daemon has been reparented (to init or a
# subreaper) and is in a session of its own; neither its parents nor its process group lead back
# to CMD. Its connection was refused ("not in the recorded tree") in 5 of 6 runs: it must be
# recorded every run, by the recording's token in its environment (cli/record.c,
# pp_record_has_token). The daemon's ppid must be what it is bare. A process started outside the
# tree and pointed at the recording's socket, without the token or with a wrong one, is refused.
# Every other run's middle parent forks the daemon at once after its setsid(), before its own
# agent has started (5 ms after its fork): the daemon, forked while its parent's start was still
# pending, was never profiled (5 of 5 wall runs, no sample in CPU mode) until shim/shim.c counted
# a pending start as a running one (shim_forked_start_pending).
source "$(dirname "$0")/ipc-lib.sh"
run_env=("${RECORD_ENV[@]}")
HOST=$B/tests/record-daemon
[[ -x $HOST ]] || fail "missing $HOST"
runs=${PP_DAEMON_RUNS:-6}

"$HOST" daemon "$T/bare.ppid" || fail "bare daemon failed"
bare=$(cat "$T/bare.ppid")

# Under ASan the daemon runs stay skipped. Two causes found and fixed (2026-11-29): a library
# thread's stack-buffer-overflow report on a stack glibc handed it with a parent thread's redzones
# (host_trampoline clears the shadow first now), and a hang of the middle process in its agent's
# start, dl_iterate_phdr waiting on a loader lock copied held from the first process's fork
# (host/dl.c: a fork waits for the library's loader calls). What is left is ASan's own: GCC 12's
# allocator takes no lock around fork(), so a child forked while a parent thread allocates can
# find that lock held for good; the daemon's IPC thread then waits on it and the daemon goes
# unrecorded (3 of 60 runs of `record ... record-daemon` with the ASan build, 0 of 80 with the
# -Werror build, where these runs stay). The refusals below run here.
if [[ -n $asan ]]; then
  echo "SKIP (loud): the daemon runs under ASan (its allocator is not fork-safe: see the comment)" >&2
  runs=0
fi
for i in $(seq "$runs"); do
  mode=cpu
  ((i % 3 == 0)) && mode=wall
  kind=daemon
  ((i % 2 == 0)) && kind=daemon-now
  out=$T/run$i
  mkdir "$out"
  "${run_env[@]}" "$PIPEPROF" record --mode "$mode" --format folded -o "$out/d.folded" -- \
    "$HOST" "$kind" "$out/ppid" 2>"$out/err" || { cat "$out/err" >&2; fail "run $i: record failed"; }
  n=$(grep -c 'record_daemon_work' "$out/d.folded" || true)
  note "run $i ($mode, $kind): $n stacks in record_daemon_work; $(grep -m1 recorded "$out/err" | cut -c1-200)"
  if grep -q 'refused' "$out/err"; then
    cat "$out/err" >&2
    fail "run $i ($mode, $kind): the daemon's connection was refused"
  fi
  [[ $n -ge 1 ]] || { cat "$out/err" >&2; fail "run $i ($mode, $kind): no sample of record_daemon_work in the report"; }
  [[ $(cat "$out/ppid") == "$bare" ]] ||
    fail "run $i: the daemon says '$(cat "$out/ppid")' under record, '$bare' bare"
done
((runs == 0)) ||
  echo "ok   a double-forked daemon is recorded after its middle parent exited ($runs of $runs runs; $bare as bare)"

# Outside the tree: started by this script, not by CMD, with the port taken from CMD's
# environment; one recording each (record says its first refusal only).
for token in none wrong; do
  out=$T/outside-$token
  mkdir "$out"
  "${run_env[@]}" "$PIPEPROF" record -o "$out/r.nettrace" -- sh -c \
    'echo "$DOTNET_DiagnosticPorts" >"$1/port"; while [ ! -e "$1/go" ]; do sleep 0.05; done' sh "$out" \
    2>"$out/err" &
  rec=$!
  PP_PIDS+=("$rec")
  wait_until 60 "CMD writing its port" test -s "$out/port"
  port=$(cut -d, -f1 "$out/port")
  tokenenv=(-u PIPEPROF_RECORD_TOKEN)
  [[ $token == wrong ]] && tokenenv=("PIPEPROF_RECORD_TOKEN=0123456789abcdef0123456789abcdef")
  env "${tokenenv[@]}" LD_PRELOAD="$PRELOAD" DOTNET_DiagnosticPorts="$port,connect,nosuspend" \
    "$HOST" burn 300 &
  pid=$!
  PP_PIDS+=("$pid")
  wait_until 60 "record refusing process $pid ($token token)" \
    grep -q "refused a connection from process $pid," "$out/err"
  wait "$pid" || fail "the outside process ($token token) failed"
  touch "$out/go"
  wait "$rec" || { cat "$out/err" >&2; fail "record of the outside test ($token token) failed"; }
  if ls "$out" | grep -q '^r\.[0-9]*\.nettrace$'; then
    fail "an outside process ($token token) got a trace file: $(ls "$out")"
  fi
done
echo "ok   a process outside the tree is refused, without the token or with a wrong one"
