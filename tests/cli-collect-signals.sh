#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-collect-signals.sh - `pipeprof collect --diagnostic-port PATH -- CMD` starts CMD with
# the signal dispositions collect itself was started with, as `record` does. collect catches
# SIGINT and SIGTERM and ignores SIGPIPE for itself; CMD started with SIGPIPE ignored (SigIgn
# 0x1000 more than bare) and with a caller's ignored SIGINT set back to its default, and a
# script's `seq | sort -rn | head -2` said "sort: write failed: ... Broken pipe" where bare sort
# dies quietly of SIGPIPE (found by running real programs bare against collected, 2026-11-29).
# Each run reads CMD's own /proc/self/status SigIgn, bare and collected, with SIGINT ignored by
# the caller and without.
source "$(dirname "$0")/ipc-lib.sh"

probe='grep "^SigIgn" /proc/self/status; seq 100000 | sort -rn | head -1 >/dev/null'
for caller in default ignored; do
  if [[ $caller == ignored ]]; then trap '' INT; else trap - INT; fi
  bare=$(sh -c "$probe" 2>&1)
  got=$("$PIPEPROF" collect --diagnostic-port "$T/$caller.sock" -o "$T/$caller.nettrace" -- \
    env LD_PRELOAD="$PRELOAD" ${asan:+ASAN_OPTIONS=detect_leaks=0} sh -c "$probe" 2>"$T/$caller.err") ||
    { cat "$T/$caller.err" >&2; fail "$caller: collect failed"; }
  note "$caller SIGINT: bare [$bare], collected [$got]"
  [[ $got == "$bare" ]] || fail "SIGINT $caller by the caller: CMD under collect read [$got] where bare reads [$bare]"
done
trap - INT
echo "cli-collect-signals: ok"
