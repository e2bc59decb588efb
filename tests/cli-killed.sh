#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-killed.sh - `pipeprof record` and `pipeprof collect -- CMD` say which signal ended CMD:
# its name and number, and whether it dumped core, in record's incomplete-trace line, in its line
# for a CMD whose own trace was complete or that had none, and after collect's trace. record's
# status stays CMD's (128+N). A fresh-clone CI run's CMD died under record with only "CMD was
# killed before it could end the session" said, and which signal it was could not be told after.
source "$(dirname "$0")/ipc-lib.sh"

ulimit -S -c 0 # no core: the line must not say "core dumped" (that case is below, where it can be)

# record CASE STATUS WANT CMD...: record's status is STATUS and its stderr has WANT.
record_case() {
  local name=$1 want_rc=$2 want=$3 rc=0
  shift 3
  "${RECORD_ENV[@]}" "$PIPEPROF" record -q -o "$T/$name.nettrace" -- "$@" >/dev/null \
    2>"$T/$name.err" || rc=$?
  [[ $rc == "$want_rc" ]] || { cat "$T/$name.err" >&2; fail "$name: status $rc, want $want_rc"; }
  grep -qF -- "$want" "$T/$name.err" || { cat "$T/$name.err" >&2; fail "$name: no '$want'"; }
  if [[ $want != *"core dumped"* ]] && grep -q "core dumped" "$T/$name.err"; then
    cat "$T/$name.err" >&2
    fail "$name: says core dumped where none was"
  fi
  note "$name: $(grep -F -- "$want" "$T/$name.err")"
}

# CMD kills itself after its session started: its trace is cut, and the cut line names the signal.
record_case term 143 "(CMD was killed by SIGTERM (signal 15) before it could end the session)" \
  sh -c 'sleep 0.2; kill -TERM $$'
record_case abrt 134 "(CMD was killed by SIGABRT (signal 6) before it could end the session)" \
  sh -c 'sleep 0.2; kill -ABRT $$'
# CMD's own image ended its session at the exec; the program it exec'd, without the agent, is
# killed: no trace is cut, so a line of its own says it.
record_case noagent 143 "pipeprof record: env was killed by SIGTERM (signal 15)" \
  env -u LD_PRELOAD sh -c 'sleep 0.2; kill -TERM $$'
[[ $(grep -c "killed by" "$T/noagent.err") == 1 ]] ||
  { cat "$T/noagent.err" >&2; fail "noagent: the signal said more than once"; }
[[ $(grep -c "killed by" "$T/term.err") == 1 ]] ||
  { cat "$T/term.err" >&2; fail "term: the signal said more than once"; }

# A core dump is said where the kernel writes one (a plain core_pattern: the file lands in $T;
# not under a sanitizer, whose runtime in CMD turns core dumps off).
if [[ -z $asan && -z $tsan && $(cat /proc/sys/kernel/core_pattern) != \|* ]] &&
  (ulimit -c unlimited) 2>/dev/null; then
  (
    ulimit -c unlimited
    cd "$T"
    record_case core 134 "(CMD was killed by SIGABRT (signal 6, core dumped) before it could end" \
      sh -c 'sleep 0.2; kill -ABRT $$'
  )
  rm -f "$T"/core*
else
  note "core: not tried (a sanitizer, a core_pattern that pipes to a program, or no core size allowed)"
fi

# collect -- CMD: the trace is what arrived (status 0, as before), and the line after it says
# which signal ended CMD.
rc=0
"$PIPEPROF" collect --diagnostic-port "$T/c.sock" -o "$T/collect.nettrace" -- \
  env LD_PRELOAD="$PRELOAD" ${asan:+ASAN_OPTIONS=detect_leaks=0} sh -c 'sleep 0.2; kill -TERM $$' \
  >/dev/null 2>"$T/collect.err" || rc=$?
[[ $rc == 0 ]] || { cat "$T/collect.err" >&2; fail "collect: status $rc"; }
grep -qF "pipeprof collect: env was killed by SIGTERM (signal 15)" "$T/collect.err" ||
  { cat "$T/collect.err" >&2; fail "collect: the signal that ended CMD is not said"; }
note "collect: $(grep -F "killed by" "$T/collect.err")"
echo "cli-killed: ok"
