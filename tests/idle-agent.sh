#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/idle-agent.sh - a preloaded process that nobody profiles runs the diagnostic server's
# loop thread only: the agent (its /proc scans, module list, manager thread) starts when the
# first session asks for samples, and that session samples the host's work functions. The cost
# it saves is measured by bench/idle-preload.sh (docs/performance.md). A stack snapshot
# (dotnet-stack's session: SampleProfiler alone, stopped at once) as the first session of an
# idle host holds a stack of every thread of the host, in CPU and in wall mode, though the agent
# and its wall sampler start with that session.
source "$(dirname "$0")/ipc-lib.sh"
HOST=$B/tests/output-host
[[ -x $HOST ]] || fail "missing $HOST"

threads() { ls "/proc/$1/task" | wc -l; }

env LD_PRELOAD="$PRELOAD" ASAN_OPTIONS=detect_leaks=0 "$HOST" serve 200 >"$T/svc.out" &
pid=$!
PP_PIDS+=("$pid")
for i in $(seq 200); do grep -q ready "$T/svc.out" && break; sleep 0.1; done
grep -q ready "$T/svc.out" || fail "the host never got ready"
wait_socket "$pid" >/dev/null
idle=$(threads "$pid")
names=$(cat /proc/"$pid"/task/*/comm | sort | tr '\n' ' ')
# ThreadSanitizer's runtime starts a thread of its own at a process's first pthread_create (here
# the agent's pipeprof-ipc), named as the process: bare, a TSan program that starts one thread
# has three (docs/architecture.md, "Sanitizers"). It is counted apart, loudly.
tsan_threads=0
if [[ -n $tsan ]]; then
  tsan_threads=1
  note "under TSan: one more thread, its runtime's background thread, is expected ($names)"
fi
[[ $idle == $((2 + tsan_threads)) ]] ||
  fail "idle: $idle threads ($names); want the host's and pipeprof-ipc"
note "idle: $idle threads: $names"

"$PIPEPROF" collect -p "$pid" --duration 2 -o "$T/c.nettrace" >/dev/null 2>"$T/collect.err" ||
  { cat "$T/collect.err" >&2; fail "collect failed"; }
busy=$(threads "$pid")
[[ $busy -gt $((2 + tsan_threads)) ]] || fail "the agent did not start for the session ($busy threads)"
n=$("$PIPEPROF" report --top 200 --format json "$T/c.nettrace" | python3 -c 'import json,sys
d = json.load(sys.stdin)
print(sum(f["total"] for f in d["top_total"] if f["function"].endswith("!out_serve_work")))')
[[ $n -ge 5 ]] || fail "the first session got $n samples in out_serve_work"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc == 0 ]] || fail "the host ended with $rc after the session"
note "the agent started for the first session: $busy threads, $n samples in out_serve_work"

# The snapshot as the first session, stopped at once (--duration 0.001: the stop follows the
# start as the client's next request), three fresh hosts per mode. The hosts' manager builds no
# unwind table for 300 ms (PIPEPROF_TEST_CFI_DELAY_MS): the session's start builds every table of
# the modules loaded now before the first sample (bridge_agent_start), so no stack may be cut
# under [unwind tables not ready]. What dotnet-stack prints of a thread is the first sample of
# its thread time (TraceEvent's computer): that must have a stack of the thread's own functions,
# and no running sample may be stackless (a thread the snapshot had not reached when its first
# CPU sample came started with a stackless waiting sample; a thread that ran less than an
# interval, never sampled, ended with a stackless running one: 1 trace in 40, and 40 in 40).
GT=$B/samples/pp-sample-groundtruth
for mode in cpu wall; do
  for run in 1 2 3; do
    env PIPEPROF_MODE=$mode PIPEPROF_TEST_CFI_DELAY_MS=300 LD_PRELOAD="$PRELOAD" ASAN_OPTIONS=detect_leaks=0 \
      "$GT" 30 /dev/null >/dev/null 2>"$T/gt.err" &
    host=$!
    PP_PIDS+=("$host")
    wait_socket "$host" >/dev/null
    # The host's main thread and its four workers exist and each has been on a CPU (its
    # schedstat's run time is past 0; a thread cloned but never run yet has no stack of its own
    # to snapshot): up to 600 s, not a fixed 0.3 s, which a loaded machine can outlast.
    # (builtins only: a process per thread and round made a round take seconds at load 8, and
    # the 30 s host could end before its snapshot)
    for _ in $(seq 6000); do
      want= nt=0 ran=0
      for t in /proc/"$host"/task/*; do
        comm= rt=1
        read -r comm 2>/dev/null <"$t/comm" || true
        [[ $comm == pipeprof-* ]] && continue
        want+="${t##*/} "
        nt=$((nt + 1))
        [[ -r $t/schedstat ]] && { read -r rt _ 2>/dev/null <"$t/schedstat" || true; }
        [[ $rt != 0 ]] && ran=$((ran + 1))
      done
      ((ran == nt && nt == 5 + tsan_threads)) && break
      kill -0 "$host" 2>/dev/null || break
      sleep 0.1
    done
    want=$(tr ' ' '\n' <<<"$want" | sed '/^$/d' | sort -n | tr '\n' ' ')
    [[ $(wc -w <<<"$want") == $((5 + tsan_threads)) ]] || fail "the ground-truth host has threads $want"
    "$PIPEPROF" collect -p "$host" --providers Microsoft-DotNETCore-SampleProfiler:0:4 --duration 0.001 \
      -o "$T/snap.nettrace" >/dev/null 2>"$T/collect.err" || { cat "$T/collect.err" >&2; fail "collect failed"; }
    kill "$host" 2>/dev/null || true
    wait "$host" 2>/dev/null || true
    "$PIPEPROF" dump --format json "$T/snap.nettrace" >"$T/snap.jsonl"
    "$PIPEPROF" convert --format perf -o "$T/snap.perf" "$T/snap.nettrace"
    "$PIPEPROF" report --format json "$T/snap.nettrace" >"$T/snap.json"
    # (under a sanitizer the stack of a thread that blocked before sampling began may end at the
    # sanitizer's interceptor, as in dotnet-stack.sh: there its first stack must be named, not
    # necessarily reach main: ['clock_nanosleep', '__nanosleep'] in a fresh-clone CI run)
    python3 - "$T/snap.jsonl" "$T/snap.perf" "$T/snap.json" "$want" "$mode mode, host $run" \
      "${asan:+1}${tsan:+1}" "${tsan:+1}" <<'PY' ||
import json, re, sys
events = [json.loads(l) for l in open(sys.argv[1])]
want, label, bad = sys.argv[4].split(), sys.argv[5], []
sanitized = len(sys.argv) > 6 and sys.argv[6] != ""
tsan = len(sys.argv) > 7 and sys.argv[7] == "1"
samples = [e for e in events if e["name"] == "Thread/Sample"]
first, later = {}, set()
for e in sorted(samples, key=lambda e: e["time_ms"]):  # TraceEvent takes them in time order
    if e["thread"] in first:
        later.add(e["thread"])
    else:
        first[e["thread"]] = e
for e in samples:
    if e["payload_hex"].startswith("02") and e["stack_depth"] == 0:
        bad.append("a running sample of thread %d has no stack" % e["thread"])
if tsan:
    # TSan's runtime's own thread (one more than the host's, named as the process) runs none of
    # the host's code: the one thread without any sample is taken for it, loudly
    silent = [t for t in want if int(t) not in first]
    if silent:
        want.remove(silent[0])
        print("# under TSan: thread %s, without a sample, taken for its runtime's thread" % silent[0],
              file=sys.stderr)
for t in want:
    e = first.get(int(t))
    if e is None or int(t) not in later:
        bad.append("thread %s has %s" % (t, "no sample" if e is None else "one sample"))
    elif e["stack_depth"] == 0:
        bad.append("thread %s's first sample (%.3f ms, type %s) has no stack" % (t, e["time_ms"], e["payload_hex"][:2]))
# The first sample with a stack of each thread, named: the thread's own functions, no cut.
named = {}
for block in open(sys.argv[2]).read().split("\n\n"):
    lines = [l for l in block.splitlines() if l.strip()]
    m = re.match(r"\S+ \d+/(\d+) ", lines[0]) if lines else None
    if m and m.group(1) not in named:
        named[m.group(1)] = [l.split()[1] for l in lines[1:]]
for t in want:
    fns = named.get(t, [])
    if sanitized and fns and not any(f in ("main", "gt_main") for f in fns):
        continue
    if not any(f in ("main", "gt_main") for f in fns):
        bad.append("thread %s's first stack lacks main or gt_main: %s" % (t, fns))
pending = json.load(open(sys.argv[3]))["tables_pending_samples"]
if pending:
    bad.append("%d stacks cut under [unwind tables not ready]" % pending)
if bad:
    print("FAIL: snapshot (%s): %s" % (label, "; ".join(bad)), file=sys.stderr)
    sys.exit(1)
PY
      { cat "$T/gt.err" >&2; fail "the first snapshot"; }
  done
  note "the first session, a snapshot stopped at once, has every thread's stack ($mode mode, 3 hosts)"
done
