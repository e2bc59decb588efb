#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/exit-bounded.sh - a preloaded host's exit() never waits for a stuck diagnostic server
# (issue 23: an idle .NET app once took 12 s to exit after SIGTERM; the unload hook joined the
# loop thread however long it took). tests/fixtures/stuck-loop.c makes the loop thread block
# for good as it stops; the host must still exit, with its own status and output, and say so in
# one line. The bound is shim.c's (2 s with no session): the limit asserted here is 60 s, so
# only a hang fails, never a loaded machine. The host is bash, whose exit builtin calls exit()
# with stderr open (dash calls _exit, whose bound is host/exit.c's; coreutils close stderr
# before the unload hook runs).
source "$(dirname "$0")/ipc-lib.sh"
STUCK=$B/tests/libpp-stuck-loop.so
[[ -f $STUCK ]] || fail "missing $STUCK"
preload=$STUCK:$SHIM
[[ -n $asan ]] && preload="$asan:$STUCK:$SHIM"
# TSan's runtime after both, as ipc-lib.sh's PRELOAD has it (left to load after libc as their
# dependency, it crashed the uninstrumented bash at its start: status 139)
[[ -n $tsan ]] && preload="$STUCK:$SHIM:$tsan"

set +e
out=$(timeout 60 env LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0 \
  bash -c 'sleep 0.2; echo host done; exit 3' 2>"$T/err")
rc=$?
set -e
[[ $rc != 124 ]] || { cat "$T/err" >&2; fail "the host's exit hung on the stuck loop (60 s)"; }
[[ $rc == 3 ]] || { cat "$T/err" >&2; fail "exit status $rc, expected the host's 3"; }
[[ $out == "host done" ]] || fail "the host's output changed: '$out'"
grep -q "did not stop within 2000 ms at exit" "$T/err" || {
  cat "$T/err" >&2
  fail "no line on stderr about the server left at exit"
}
note "$(grep 'did not stop' "$T/err")"
echo "exit-bounded: ok"
