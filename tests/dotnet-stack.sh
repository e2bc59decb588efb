#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-stack.sh - stack snapshots for dotnet-stack, and dotnet-trace's report: a native
# host with the agent preloaded (a busy thread, bursty threads, threads asleep in nanosleep and
# in pthread_join), in CPU mode and in wall mode, gets dotnet-stack's session (SampleProfiler
# alone, rundown, 10 ms) from the real client libraries read the way dotnet-stack reads it
# (tests/dotnet/stack-client: TraceLog, the thread-time computer, managed-only stacks, the first
# stack of each thread). Every thread of the host must be there, with its own functions, in
# both modes, three times in a row. dotnet-stack itself runs where it is installed, and
# `dotnet-trace report` on a pipeprof trace must list real functions only (no event fields) and
# charge the threads' sleeps to where they sleep; each says loudly when its tool is missing.
source "$(dirname "$0")/ipc-lib.sh"
command -v dotnet >/dev/null || skip "the .NET SDK (dotnet) is not installed"
GT=$B/samples/pp-sample-groundtruth

CLIENT=$(dotnet_project stack-client)

# The host's own threads: every task but the agent's (pipeprof-*).
host_threads() {
  local t
  for t in /proc/"$1"/task/*; do
    [[ $(cat "$t/comm") == pipeprof-* ]] || basename "$t"
  done | sort -n | tr '\n' ' '
}

# check JSON TIDS LABEL: every thread, each with a stack of its own functions. Under a
# sanitizer the stack of a thread that blocked before sampling began may end at the
# sanitizer's interceptor (its walk starts from /proc/TID/syscall): there every thread must have
# a named function, not necessarily its own.
sanitized=0
[[ -n ${asan:-} ]] && sanitized=1
check() {
  python3 - "$1" "$2" "$3" "$sanitized" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))
want = sys.argv[2].split()
label = sys.argv[3]
sanitized = sys.argv[4] == "1"
bad = []
if sorted(got) != sorted(want):
    bad.append("threads %s, the host has %s" % (sorted(got, key=int), want))
for tid, frames in got.items():
    real = [f for f in frames if "!" in f]
    if not real:
        bad.append("thread %s has no function: %s" % (tid, frames))
    elif not sanitized and not any(f.endswith((".main", ".gt_main")) for f in real):
        bad.append("thread %s lacks main or gt_main: %s" % (tid, real))
if bad:
    print("FAIL: %s: %s" % (label, "; ".join(bad)), file=sys.stderr)
    sys.exit(1)
print("# %s: %d threads, e.g. %s" % (label, len(got), " <- ".join(got[sorted(got, key=int)[-1]][:4])), file=sys.stderr)
PY
}

# The hosts run until killed below (600 s, longer than the clients' timeouts together): with 30 s,
# three stack clients' .NET start-ups at load 20 outlasted the host and dotnet-stack found no
# process ("No process with ID ... is currently running").
for mode in cpu wall; do
  PIPEPROF_MODE=$mode LD_PRELOAD=$PRELOAD "$GT" 600 /dev/null >/dev/null 2>"$T/host.$mode.err" &
  host=$!
  PP_PIDS+=($host)
  wait_socket "$host" >/dev/null
  # The host's main thread and its four workers (and under TSan its runtime's background
  # thread) exist: up to 600 s, not a fixed 0.3 s, which a loaded machine can outlast.
  nwant=5
  [[ -z ${tsan:-} ]] || nwant=6
  for _ in $(seq 6000); do
    tids=$(host_threads "$host")
    [[ $(wc -w <<<"$tids") == "$nwant" ]] && break
    kill -0 "$host" 2>/dev/null || break
    sleep 0.1
  done
  [[ $(wc -w <<<"$tids") == "$nwant" ]] || fail "the host has threads $tids, not $nwant ($mode mode)"
  for run in 1 2 3; do
    timeout 120 dotnet "$CLIENT" "$host" "$T/stack.$mode.$run.json" >"$T/client.log" 2>&1 ||
      { cat "$T/client.log"; fail "the stack client failed ($mode mode)"; }
    check "$T/stack.$mode.$run.json" "$tids" "$mode mode, run $run" ||
      { cat "$T/host.$mode.err" >&2; fail "stack snapshot"; }
  done
  if command -v dotnet-stack >/dev/null; then
    timeout 60 dotnet-stack report -p "$host" >"$T/ds.$mode.txt" 2>&1 || { cat "$T/ds.$mode.txt"; fail "dotnet-stack report"; }
    n=$(grep -c "^Thread (" "$T/ds.$mode.txt" || true)
    want=$(wc -w <<<"$tids")
    [[ $n == "$want" ]] || { cat "$T/ds.$mode.txt"; fail "dotnet-stack shows $n threads of $want ($mode mode)"; }
    grep -q "gt_main" "$T/ds.$mode.txt" || { cat "$T/ds.$mode.txt"; fail "dotnet-stack names no function"; }
    note "dotnet-stack report ($mode mode): all $n threads with their stacks"
  else
    echo "SKIP (loud): dotnet-stack is not installed; its session was made with its client libraries instead" >&2
  fi
  kill "$host" 2>/dev/null || true
  wait "$host" 2>/dev/null || true
done

# dotnet-trace report on a CPU-mode trace: real functions, no event fields taken for frames.
if command -v dotnet-trace >/dev/null; then
  # (PIPEPROF_MODE=cpu: dotnet-trace's default session otherwise gets thread time, wall mode.)
  PIPEPROF_MODE=cpu LD_PRELOAD=$PRELOAD "$GT" 600 /dev/null >/dev/null &
  host=$!
  PP_PIDS+=($host)
  wait_socket "$host" >/dev/null
  timeout 60 dotnet-trace collect -p "$host" --duration 00:00:00:02 -o "$T/dt.nettrace" >"$T/dt.log" 2>&1 ||
    { cat "$T/dt.log"; fail "dotnet-trace collect"; }
  kill "$host" 2>/dev/null || true
  timeout 120 dotnet-trace report "$T/dt.nettrace" topN -n 12 >"$T/report.txt" 2>&1 ||
    { cat "$T/report.txt"; fail "dotnet-trace report"; }
  if grep -q "EventData\|EventName\|OSInformation" "$T/report.txt"; then
    cat "$T/report.txt"
    fail "dotnet-trace report lists event fields as functions"
  fi
  grep -q "gt_burn" "$T/report.txt" || { cat "$T/report.txt"; fail "dotnet-trace report lacks gt_burn"; }
  # Time off the CPU is charged where the threads wait (CPU mode's "stopped running" markers
  # carry the stack a waiting thread is in), and pipeprof's own report does not count those
  # markers as samples. The stack is the interposed call's (nanosleep, whose frame libc names
  # __nanosleep) where the drain finds the thread in one, else the kernel's view of the wait
  # (clock_nanosleep under it).
  grep -q "nanosleep" "$T/report.txt" ||
    { cat "$T/report.txt"; fail "dotnet-trace report charges no time to where the threads sleep"; }
  "$PIPEPROF" report --format json "$T/dt.nettrace" | python3 -c '
import json, sys
r = json.load(sys.stdin)
sys.exit(0 if r["waiting_samples"] == 0 and r["mode"] == "cpu" else "pipeprof report: %s waiting samples, mode %s" % (r["waiting_samples"], r["mode"]))' ||
    fail "the wait markers were counted as samples"
  note "dotnet-trace report: real functions only, waits charged to clock_nanosleep"
else
  echo "SKIP (loud): dotnet-trace is not installed; its report was not checked" >&2
fi
echo "dotnet-stack: ok"
