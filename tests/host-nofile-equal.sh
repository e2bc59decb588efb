#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/host-nofile-equal.sh - RLIMIT_NOFILE with the soft limit at the hard one (docker's
# 1048576:1048576; here 64:64): no raise is allowed, so the library's fds keep their place a
# quarter below the limit (host/fds.c, host_fds_base) and the host loses their numbers, as
# docs/architecture.md says. Held: preloaded, tests/hosts/fds.c's nofile opens fewer fds than bare
# (the library's own, at 48..63), every read of the limit is still the host's, and with the soft
# limit below the hard one (host-contract-fds-nofile) it opens as many as bare.
source "$(dirname "$0")/ipc-lib.sh"
HOST=$B/tests/hosts/host-fds
[[ -x $HOST ]] || fail "missing $HOST"
ulimit -n 64 || fail "cannot set RLIMIT_NOFILE to 64:64"
"$HOST" nofile >"$T/bare.out"
LD_PRELOAD=$PRELOAD "$HOST" nofile >"$T/preload.out"
count() { sed -n 's/^pass 0: opened \([0-9]*\),.*/\1/p' "$1"; }
bare=$(count "$T/bare.out")
pre=$(count "$T/preload.out")
[[ -n $bare && -n $pre ]] || { cat "$T/bare.out" "$T/preload.out" >&2; fail "no count printed"; }
grep -q "^RLIMIT_NOFILE: soft 64, at the hard limit" "$T/preload.out" ||
  { cat "$T/preload.out" >&2; fail "the limit was not 64:64"; }
grep -q "not the host's soft limit: 0$" "$T/preload.out" ||
  { cat "$T/preload.out" >&2; fail "a read of the limit was not the host's"; }
((pre < bare)) || fail "soft == hard: preloaded opened $pre, bare $bare (today's placement takes numbers)"
note "soft == hard (64): bare opened $bare, preloaded $pre: the library holds $((bare - pre)) numbers below 64"
echo "host-nofile-equal: ok"
