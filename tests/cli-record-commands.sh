#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-commands.sh - `pipeprof record` on the commands people really type: through
# env, nice, `sh -c 'exec ...'`, a script that execs, and a chain of three execs, the recording
# follows the process through every exec (one trace, the work functions in it), nothing waits,
# and CMD's output and exit status are its own: byte-identical output, the same status (also a
# failing one, and 128+N for a CMD killed by signal N, whose trace is still a complete file), and
# a wall time within 1 s + 10 % of the bare run.
set -euo pipefail
B=${PP_BINARY_DIR:?}
PP=$B/bin/pipeprof
GT=$B/samples/pp-sample-groundtruth
T=$(mktemp -d /tmp/pp-rcmd.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
printf '#!/bin/sh\nexec "%s" 1 "$1"\n' "$GT" >"$T/wl.sh"
printf '#!/bin/sh\necho before\n"%s" 1 "$1" >/dev/null\necho after\nexit 3\n' "$GT" >"$T/exit3.sh"
printf '#!/bin/sh\nexec env B=2 nice -n 1 "%s" 1 "$1"\n' "$GT" >"$T/chain.sh"
chmod +x "$T"/*.sh

now() { date +%s.%N; }

# case NAME WANT-WORK CMD...: the same command bare and recorded.
case_() {
  local name=$1 work=$2 t0 t1 t2 bare rec st_bare st_rec
  shift 2
  t0=$(now)
  set +e
  "$@" "$T/$name.bare.json" >"$T/$name.bare.out" 2>&1
  st_bare=$?
  t1=$(now)
  "$PP" record -q -o "$T/$name.nettrace" -- "$@" "$T/$name.rec.json" >"$T/$name.rec.out" 2>"$T/$name.err"
  st_rec=$?
  set -e
  t2=$(now)
  bare=$(python3 -c "print($t1 - $t0)")
  rec=$(python3 -c "print($t2 - $t1)")
  local why=""
  [[ $st_bare == "$st_rec" ]] || why+=" status $st_rec, bare $st_bare;"
  cmp -s "$T/$name.bare.out" "$T/$name.rec.out" || why+=" output differs;"
  python3 -c "import sys; sys.exit(0 if $rec <= $bare * 1.1 + 1.0 else 1)" ||
    why+=" wall ${rec}s against ${bare}s bare;"
  if [[ $work == 1 ]]; then
    "$PP" convert --format folded -o "$T/$name.folded" "$T/$name.nettrace" 2>/dev/null
    grep -q "gt_steady" "$T/$name.folded" || why+=" no work function in the trace;"
  fi
  if [[ -n $why ]]; then
    echo "FAIL $name:$why"; cat "$T/$name.err"; fail=1
  else
    printf 'ok   %-10s status %s, %.2fs recorded against %.2fs bare\n' "$name" "$st_rec" "$rec" "$bare"
  fi
}

case_ env 1 env A=1 "$GT" 1
case_ nice 1 nice -n 1 "$GT" 1
case_ sh-exec 1 sh -c 'exec "$0" 1 "$1"' "$GT"
case_ script 1 "$T/wl.sh"
case_ chain 1 "$T/chain.sh"
case_ exit3 0 "$T/exit3.sh"
# CMD killed by a signal: 128+N, and the trace is still a complete file (its end tag written).
printf '#!/bin/sh\n"%s" 1 "$1" &\nsleep 0.5\nkill -TERM $$\n' "$GT" >"$T/killed.sh"
chmod +x "$T/killed.sh"
case_ killed 0 "$T/killed.sh"
trunc=$("$PP" report --format json "$T/killed.nettrace" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["truncated"])')
[[ $trunc == False ]] || { echo "FAIL killed: the trace is left cut (truncated=$trunc)"; fail=1; }
[[ $fail == 0 ]] || { echo "cli-record-commands: FAILED"; exit 1; }
echo "cli-record-commands: ok"
