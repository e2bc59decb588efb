#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/harness-reaping.sh - the unit harness (tests/harness.c) leaves no process of a case
# behind. Each case runs as a process group of its own; whatever is still in that group when the
# case ends (passed or failed) is described and killed, and a failed case's leftovers get their
# threads' stacks (gdb, when it is on the PATH). A forked child that hung once kept ctest's pipe
# open and ctest waited out its 600 s for the whole binary, twice (forkhang, 2026-11-29).
# tests/tools/harness-probe.c has one case that passes and one that times out, each leaving a
# sleeping child; both must be gone when the probe returns.
set -euo pipefail
B=${PP_BINARY_DIR:?PP_BINARY_DIR is not set}
PROBE=$B/tests/harness-probe
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ -x $PROBE ]] || fail "missing build output $PROBE"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT # (never a kill by pid: a reaped leftover's pid may be reused)

rc=0
HARNESS_PROBE_DIR=$T "$PROBE" >"$T/out" 2>"$T/err" || rc=$?
cat "$T/out"
sed 's/^/  stderr: /' "$T/err" | head -60
[[ $rc -eq 1 ]] || fail "the probe's exit status is $rc, not 1 (one case fails by design)"
grep -qx "ok 1 - passes_and_leaves_a_sleeper" "$T/out" || fail "the passing case did not pass"
grep -qx "not ok 2 - times_out_and_leaves_a_sleeper" "$T/out" || fail "the timed-out case did not fail"
grep -q "killed by signal 14 (timeout)" "$T/err" || fail "no timeout reported"

for name in passes times-out; do
  [[ -s $T/$name.pid ]] || fail "the $name case wrote no pid"
  pid=$(cat "$T/$name.pid")
  grep -q "^# process $pid of the case outlived it:" "$T/err" ||
    fail "the $name case's leftover $pid was not described"
  # Killed by the harness, reparented and reaped: no process of that pid in the case's state.
  if [[ -e /proc/$pid ]] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
    fail "the $name case's leftover $pid is still alive"
  fi
done
# Stacks only for the failed case's leftover: gdb's lines, or the harness's word that it had none.
passes=$(cat "$T/passes.pid")
awk -v p="$passes" '/^# process /{cur=($3==p)} cur && /gdb|no gdb backtrace/{bad=1} END{exit bad}' "$T/err" ||
  fail "the passing case's leftover got a backtrace"
grep -qE "^#   gdb: |^#   \(no gdb backtrace\)" "$T/err" ||
  fail "the timed-out case's leftover got no backtrace line"
echo "PASS: both cases' leftovers described and killed, the failed one's with its stacks"
