#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/output-file.sh - PIPEPROF_OUTPUT=PATH records a process from its start to its exit into a
# nettrace file without a wrapper: a service stopped by SIGTERM, forked and exec'd children (each
# image a file of its own, never one that another image wrote), and crashes (SIGKILL, abort),
# which leave a partial file that `pipeprof report` reads up to the cut, with the host's work
# functions named. Hosts: tests/tools/output-host.c.
source "$(dirname "$0")/ipc-lib.sh"
HOST=$B/tests/output-host
[[ -x $HOST ]] || fail "missing $HOST"
export PIPEPROF_HZ=200 # PIPEPROF_MODE and PIPEPROF_HZ set the file session's sampling

# The hosts run as env's exec: a background one's $! is the host itself.
RUN=(env LD_PRELOAD="$PRELOAD" ASAN_OPTIONS=detect_leaks=0)

# report FILE EXPR: a field of `pipeprof report --format json` (python over the parsed object d).
report() {
  "$PIPEPROF" report --top 200 --format json "$1" 2>"$T/report.err" >"$T/report.json" ||
    { cat "$T/report.err" >&2; fail "pipeprof report $1 failed"; }
  python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
def total(fn):
    return sum(f["total"] for f in d["top_total"] if f["function"].endswith("!" + fn))
print(eval(sys.argv[2]))' "$T/report.json" "$2"
}

# expect FILE FUNC [complete|cut]: FILE names FUNC on at least 10 samples and is complete or cut.
expect() {
  local file=$1 fn=$2 want=${3:-complete} n truncated
  [[ -s $file ]] || fail "$file was not written"
  n=$(report "$file" "total('$fn')")
  [[ $n -ge 10 ]] || { cat "$T/report.json" >&2; fail "$file: $n samples in $fn"; }
  truncated=$(report "$file" 'd["truncated"]')
  if [[ $want == complete ]]; then
    [[ $truncated == False ]] || fail "$file: the trace of a process that exited ends early"
  else
    [[ $truncated == True ]] || fail "$file: the trace of a killed process claims its end"
    grep -q "ends early" "$T/report.err" || fail "$file: report does not say the trace is cut"
  fi
  note "$file: $n samples in $fn, $want"
}

# unwanted FILE FUNC: FILE holds no sample in FUNC (another image's work).
unwanted() {
  local n
  n=$(report "$1" "total('$2')")
  [[ $n -eq 0 ]] || fail "$1: $n samples in $2, which another image ran"
}

# wait_ready FILE: FILE says "ready" (20 s at most).
wait_ready() {
  local i
  for i in $(seq 200); do
    grep -q ready "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "the host never got ready ($1)"
}

# 1. A service: records from its start, stops on SIGTERM through its handler and exit().
"${RUN[@]}" PIPEPROF_OUTPUT="$T/svc-%p.nettrace" "$HOST" serve 400 >"$T/svc.out" &
pid=$!
PP_PIDS+=("$pid")
wait_ready "$T/svc.out"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc == 0 ]] && grep -q stopped "$T/svc.out" || fail "the service did not stop cleanly ($rc)"
expect "$T/svc-$pid.nettrace" out_serve_work
[[ $(report "$T/svc-$pid.nettrace" 'd["sampling_interval_ns"]') == 5000000 ]] ||
  fail "PIPEPROF_HZ=200 is not the file session's rate"
"$PIPEPROF" dump --summary --format json "$T/svc-$pid.nettrace" | python3 -c 'import json,sys
d = json.load(sys.stdin)
assert any(e["id"] == 144 for e in d["events"]), "no rundown"' || fail "the service's trace has no rundown"

# 2. fork without exec, a fixed PATH: the parent writes PATH, the child PATH.PID.
"${RUN[@]}" PIPEPROF_OUTPUT="$T/fork.nettrace" "$HOST" fork 400 || fail "fork host failed"
children=("$T"/fork.*.nettrace)
[[ ${#children[@]} == 1 && -f ${children[0]} ]] || fail "fork: child files: ${children[*]}"
expect "$T/fork.nettrace" out_fork_parent_work
unwanted "$T/fork.nettrace" out_fork_child_work
expect "${children[0]}" out_fork_child_work
unwanted "${children[0]}" out_fork_parent_work

# 3. An exec in place with %p: the same pid's second image takes the next free name.
"${RUN[@]}" PIPEPROF_OUTPUT="$T/ex-%p.nettrace" "$HOST" exec 300 &
pid=$!
wait "$pid" || fail "exec host failed"
expect "$T/ex-$pid.nettrace" out_exec_before_work
unwanted "$T/ex-$pid.nettrace" out_exec_after_work
expect "$T/ex-$pid.2.nettrace" out_exec_after_work

# 4. fork + exec of another program image, a fixed PATH that an earlier run left: the first
# image replaces it (as CPUPROFILE does), the exec'd child writes PATH.PID.
echo "an earlier run's file" >"$T/sp.nettrace"
"${RUN[@]}" PIPEPROF_OUTPUT="$T/sp.nettrace" "$HOST" spawn 300 || fail "spawn host failed"
children=("$T"/sp.*.nettrace)
[[ ${#children[@]} == 1 && -f ${children[0]} ]] || fail "spawn: child files: ${children[*]}"
expect "$T/sp.nettrace" out_spawn_parent_work
expect "${children[0]}" out_spawned_work

# 5. SIGKILL: the blocks flushed before it are there, and their frames are named.
"${RUN[@]}" PIPEPROF_OUTPUT="$T/kill.nettrace" "$HOST" crash 400 >"$T/kill.out" &
pid=$!
PP_PIDS+=("$pid")
wait_ready "$T/kill.out"
# Killed once the file holds 10 samples of the work (a fixed 0.3 s was the bet that they would be
# flushed by then, which a loaded machine can lose); 60 s at most, then killed all the same.
for _ in $(seq 300); do
  n=$("$PIPEPROF" report --top 200 --format json "$T/kill.nettrace" 2>/dev/null | python3 -c 'import json,sys
try:
    d = json.load(sys.stdin)
    print(sum(f["total"] for f in d["top_total"] if f["function"].endswith("!out_crash_work")))
except Exception:
    print(0)' || echo 0)
  [[ $n -ge 10 ]] && break
  sleep 0.2
done
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
expect "$T/kill.nettrace" out_crash_work cut

# 6. abort(): the same.
rc=0
"${RUN[@]}" PIPEPROF_OUTPUT="$T/abort.nettrace" "$HOST" abort 500 2>/dev/null || rc=$?
[[ $rc -gt 128 ]] || fail "the abort host ended with $rc"
expect "$T/abort.nettrace" out_abort_work cut

# 7. A bad PATH: one line on stderr, the host runs untouched.
out=$("${RUN[@]}" PIPEPROF_OUTPUT="$T/bad-%x.nettrace" "$HOST" spawned 10 2>&1) || fail "bad PATH: the host failed"
[[ $(grep -c "PIPEPROF_OUTPUT" <<<"$out") == 1 ]] || fail "bad PATH: stderr was: $out"
# 8. Trust: the first image writes PATH only when it is a regular file of this user's with one
# link. Another local user who put a symbolic link, a hard link to a file the service may write,
# a file of their own or a FIFO at the name (the pid %p stands for is easy to guess) gets nothing
# written or truncated through it, the host runs as bare, and one line says why.
# refused NAME WHY: PIPEPROF_OUTPUT=$T/NAME is refused with WHY, the host's output and status
# as bare, nothing written into the victim file.
echo "the victim's own data" >"$T/victim"
refused() {
  local out rc=0
  out=$(timeout 60 "${RUN[@]}" PIPEPROF_OUTPUT="$T/$1" "$HOST" spawned 10 2>"$T/refused.err") || rc=$?
  [[ $rc == 0 && $out == "$(env ASAN_OPTIONS=detect_leaks=0 "$HOST" spawned 10 2>/dev/null)" ]] ||
    fail "$1: the host's status $rc or output differs from bare (a FIFO would hang the open)"
  [[ $(cat "$T/victim") == "the victim's own data" ]] || fail "$1: the victim file was written"
  grep -q "PIPEPROF_OUTPUT: $T/$1: $2; not recording" "$T/refused.err" ||
    { cat "$T/refused.err" >&2; fail "$1: no line saying it is $2"; }
}
ln -s "$T/victim" "$T/symlink.nettrace"
refused symlink.nettrace "a symbolic link (never followed)"
ln "$T/victim" "$T/hardlink.nettrace"
refused hardlink.nettrace "a file with more than one name (a hard link)"
rm -f "$T/hardlink.nettrace"
mkfifo "$T/fifo.nettrace"
refused fifo.nettrace "not a regular file"
if [[ $(id -u) == 0 ]]; then
  cp "$T/victim" "$T/others.nettrace"
  chown 65534:65534 "$T/others.nettrace"
  refused others.nettrace "another user's file"
  cmp -s "$T/victim" "$T/others.nettrace" || fail "another user's file was written"
else
  echo "SKIP (loud): another user's file at PATH needs root to make (chown); not checked" >&2
fi
# The files written are 0600 (they hold the command line), a replaced one too.
[[ $(stat -c %a "$T/sp.nettrace") == 600 && $(stat -c %a "${children[0]}") == 600 ]] ||
  fail "modes $(stat -c %a "$T/sp.nettrace" "${children[0]}"), not 600"
note "PIPEPROF_OUTPUT: service, fork, exec, spawn, SIGKILL, abort and refused files as expected"
