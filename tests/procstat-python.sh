#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/procstat-python.sh - CPython 3.12's os.fork() warns "This process ... is multi-threaded"
# when /proc/self/stat's num_threads is above 1 (host/procstat.c): a single-threaded script forks
# without the warning bare, preloaded and under `pipeprof record` in CPU and wall mode (before: it
# warned preloaded and under record), and a script with a thread of its own gets it in every run
# (the check is live). Skipped, loudly, without a python of 3.12 or later.
source "$(dirname "$0")/ipc-lib.sh"
PY=
for c in /usr/bin/python3.1[2-9] /usr/local/bin/python3.1[2-9] \
  "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/3.1[2-9]*/bin/python3; do
  [[ -x $c ]] && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null &&
    { PY=$c; break; }
done
[[ -n $PY ]] || skip "no python 3.12 or later here (its os.fork() is what warns)"
note "python: $PY ($("$PY" --version 2>&1))"

cat >"$T/alone.py" <<'PYEOF'
import os
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
print("forked")
PYEOF
cat >"$T/threaded.py" <<'PYEOF'
import os, threading
ev = threading.Event()
t = threading.Thread(target=ev.wait)
t.start()
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
ev.set()
t.join()
print("forked")
PYEOF

run() { # MODE SCRIPT: its stderr in $T/MODE-SCRIPT.err; fails unless it printed "forked"
  local mode=$1 script=$2 out
  case $mode in
    bare) out=$("$PY" -W default "$T/$script.py" 2>"$T/$mode-$script.err") ;;
    preload) out=$(LD_PRELOAD=$PRELOAD "$PY" -W default "$T/$script.py" 2>"$T/$mode-$script.err") ;;
    cpu | wall) out=$("${RECORD_ENV[@]}" "$PIPEPROF" record --mode "$mode" --hz 1000 -q \
      -o "$T/$mode-$script.nettrace" -- "$PY" -W default "$T/$script.py" 2>"$T/$mode-$script.err") ;;
  esac
  [[ $out == forked ]] || { cat "$T/$mode-$script.err" >&2; fail "$mode $script: printed '$out'"; }
}

for mode in bare preload cpu wall; do
  run "$mode" alone
  if grep -q 'multi-threaded' "$T/$mode-alone.err"; then
    cat "$T/$mode-alone.err" >&2
    fail "$mode: a single-threaded script's os.fork() warned that it is multi-threaded"
  fi
  run "$mode" threaded
  grep -q 'multi-threaded' "$T/$mode-threaded.err" ||
    { cat "$T/$mode-threaded.err" >&2; fail "$mode: a script with a thread of its own was not warned"; }
  note "$mode: no warning alone, the warning with a thread"
done
echo "PASS: procstat-python"
