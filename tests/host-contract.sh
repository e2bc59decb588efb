#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/host-contract.sh HOST [ARGS...] - the host contract's promise, that a host cannot tell the
# profiler is there: tests/hosts/HOST (which prints every result it gets, per-call error counts
# included) runs bare, under `pipeprof record` in CPU and in wall mode at 1000 Hz, and preloaded
# in listen mode with `pipeprof collect -p` sampling it in wall mode at 1000 Hz. Its standard
# output and exit status must be the bare run's every time, and each recording must be readable.
# HC_MODES (default "cpu wall listen") picks the runs.
source "$(dirname "$0")/ipc-lib.sh"
NAME=$1
shift
HOST=$B/tests/hosts/host-$NAME
[[ -x $HOST ]] || fail "missing $HOST"

set +e
"$HOST" "$@" >"$T/bare.out" 2>"$T/bare.err"
rc_bare=$?
set -e

same() { # RUN RC: RUN's output and status are the bare run's
  [[ $2 == "$rc_bare" ]] || { cat "$T/$1.err" >&2; fail "$NAME $*: exit status $2, bare $rc_bare"; }
  diff -u "$T/bare.out" "$T/$1.out" >&2 || { cat "$T/$1.err" >&2; fail "$NAME $*: the output changed"; }
}

readable() { # TRACE: pipeprof reads it
  "$PIPEPROF" report "$1" >"$1.report" 2>&1 || { cat "$1.report" >&2; fail "$NAME: $1 is unreadable"; }
}

for run in ${HC_MODES:-cpu wall listen}; do
  case $run in
  cpu | wall)
    set +e
    "${RECORD_ENV[@]}" "$PIPEPROF" record --mode "$run" --hz 1000 -q --no-children \
      -o "$T/$run.nettrace" -- "$HOST" "$@" >"$T/$run.out" 2>"$T/$run.err"
    rc=$?
    set -e
    same "$run" "$rc"
    readable "$T/$run.nettrace"
    ;;
  listen)
    rm -f "$T/go"
    set +e
    HOST_GO=$T/go LD_PRELOAD=$PRELOAD "$HOST" "$@" >"$T/listen.out" 2>"$T/listen.err" &
    H=$!
    set -e
    PP_PIDS+=($H)
    wait_socket "$H" >/dev/null
    "$PIPEPROF" collect -p "$H" --duration 60 -o "$T/listen.nettrace" \
      --providers "Microsoft-DotNETCore-SampleProfiler:0:4:mode=wall;hz=1000,pipeprof:0:4" \
      >"$T/collect.log" 2>&1 &
    C=$!
    PP_PIDS+=($C)
    sleep 1 # the session starts
    touch "$T/go"
    set +e
    wait "$H"
    rc=$?
    wait "$C"
    rc_c=$?
    set -e
    same listen "$rc"
    [[ $rc_c == 0 ]] || { cat "$T/collect.log" >&2; fail "$NAME $*: pipeprof collect -p failed"; }
    readable "$T/listen.nettrace"
    ;;
  esac
  note "$NAME $* ($run): output and status as bare"
done
echo "host-contract $NAME $*: ok"
