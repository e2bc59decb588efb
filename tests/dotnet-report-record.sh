#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-report-record.sh - `dotnet-trace report TRACE topN` of a `pipeprof record` trace
# shows the program's time, not pipeprof's. pp-sample-groundtruth (threads that measure their own
# CPU time) is recorded in CPU and in wall mode, and TraceEvent's thread-time computer (what
# `dotnet-trace report` runs, docs/architecture.md "pipeprof's own events in TraceEvent's views")
# shares out the time of every thread with events in the trace:
# - no "EventName: pipeprof/..." node holds more than 1 % (inclusive or exclusive). They held 18
#   to 23 % while pipeprof's events carried the IPC loop's tid: TraceEvent charged that thread's
#   time from one such event to the next to it.
# - CPU mode: the nodes where the program's CPU samples land (gt_burn, the [kernel] leaves and the
#   clock reads) hold within 3 points of its measured CPU time's share of the program threads'
#   time (each thread's first to last ThreadSample, what TraceEvent shares out); the stackless
#   Threads node holds no more than the rest (the time the threads were off the CPU) plus 3
#   points, and at most four fifths of it: the stacks the threads waited in name the rest (the
#   drain that finds a thread stopped reads the stack its interposed blocking call noted, else
#   the one /proc gives a sleeping thread). It was all on Threads before pipeprof's own sessions
#   read them (73.8 % of 74.1 % off the CPU), 13 to 25 % of it named with the /proc stacks alone
#   (9 runs at load 7 to 15), 28 to 42 % with the noted ones too (9 runs at load 6 to 12: a thread
#   woken in its call but waiting for a core is named now; docs/performance.md), but 23.0 % in a
#   fresh-clone CI run (2026-11-28, run AA) and 26.5 to 29.3 % in 3 runs by hand at load 3 then:
#   a quarter was within the spread, a fifth is not (the /proc stacks alone reach it, so this
#   bound no longer tells them from the noted ones; the noted ones' own cases are in
#   test-agent-sampling). gt_burn
#   leads the functions other than the waits. With the IPC loop's thread in the total, the CPU
#   nodes held 21.7 % where 27.4 % was measured.
# - wall mode: every thread is sampled every interval, so Threads holds at most 5 %, gt_burn leads,
#   and the CPU nodes hold at least the measured CPU's share less 3 points (runnable time adds).
#   A thread blocked in an interposed call is sampled with the call as its leaf: main's time in
#   pthread_join stands on `pthread_join` (at least 10 %, a fifth of the threads), the sleepers'
#   on nanosleep or clock_nanosleep (at least 10 %), and no function of the program but gt_burn
#   holds more than 3 % exclusive, here and in `pipeprof report`. Before the stack recorded at the
#   call got the call as its leaf, main held 20 % and gt_burst_tiny 18 % exclusive.
# - kernel time (pp-sample-syscalls, CPU mode): the frame of CPU time in system calls reads as the
#   kernel's in both reports: "[kernel]!.[kernel]" in dotnet-trace's (TraceEvent puts a dot before
#   every native function's name), "[kernel]![kernel]" in pipeprof's; no [kernel] or [kernel, not
#   placed] row in another module (before, "libpipeprof.so!.[kernel]" and "libpipeprof![kernel]":
#   the agent's library, as if the profiler had spent the time). The [kernel] module's share of the
#   CPU rows in dotnet-trace's report (the rows but Threads, (Non-Activities) and the waits:
#   exclusive time on a blocking call's leaf, such as pp-sample-syscalls' reader's in read) is
#   within 5 points of the share of running samples pipeprof's report counts in the kernel.
# Wide bounds for a loaded 2-core machine; no wall-clock bound.
source "$(dirname "$0")/ipc-lib.sh"
export PATH="$PATH:$HOME/.dotnet/tools"
command -v dotnet-trace >/dev/null || skip "dotnet-trace is not installed (dotnet tool install -g dotnet-trace)"

# The waits: exclusive time on a blocking call's leaf (the stack a thread waited in, noted by the
# interposed call or read from /proc), as dotnet-trace's report names libc's functions.
WAITS='nanosleep|!\.?(read|recv|recvfrom|poll|ppoll|select|pselect|epoll_wait|epoll_pwait|accept4?|pthread_join|pthread_cond_(timed)?wait|sem_(timed)?wait|sigtimedwait|sigwaitinfo)$'
failed=()
for mode in cpu wall; do
  ${RECORD_ENV[@]+"${RECORD_ENV[@]}"} "$PIPEPROF" record -q --mode "$mode" -o "$T/$mode.nettrace" -- \
    "$B/samples/pp-sample-groundtruth" 3 "$T/$mode.truth.json" || fail "$mode: pipeprof record"
  "$PIPEPROF" dump "$T/$mode.nettrace" >"$T/$mode.dump" || fail "$mode: pipeprof dump"
  "$PIPEPROF" report --top 1000 "$T/$mode.nettrace" >"$T/$mode.pp" || fail "$mode: pipeprof report"
  for kind in excl incl; do
    opt=()
    [[ $kind == incl ]] && opt=(--inclusive)
    timeout 180 dotnet-trace report "$T/$mode.nettrace" topN -n 1000 ${opt[@]+"${opt[@]}"} >"$T/$mode.$kind" 2>&1 ||
      { cat "$T/$mode.$kind"; fail "$mode: dotnet-trace report"; }
  done
  python3 - "$T" "$mode" "$WAITS" <<'PY' || failed+=("$mode")
import json, re, sys
t, mode = sys.argv[1], sys.argv[2]

def table(path):
    rows = []
    for line in open(path):
        m = re.match(r"\s*\d+\.\s+(.*?)\s{2,}([\d.]+)%\s+([\d.]+)%\s*$", line)
        if m:
            rows.append((m.group(1), float(m.group(2)), float(m.group(3))))
    return rows

excl, incl = table("%s/%s.excl" % (t, mode)), table("%s/%s.incl" % (t, mode))
if not excl:
    print("no rows in the report:\n" + open("%s/%s.excl" % (t, mode)).read())
    sys.exit(1)
cpu_ms = sum(v for k, v in json.load(open("%s/%s.truth.json" % (t, mode))).items()
             if not k.startswith("_")) / 1e6
first, last = {}, {}
for line in open("%s/%s.dump" % (t, mode)):
    m = re.match(r"\s*([\d.]+) Microsoft-DotNETCore-SampleProfiler \d+ \S+ tid=(\d+)", line)
    if m:
        first.setdefault(m.group(2), float(m.group(1)))
        last[m.group(2)] = float(m.group(1))
span_ms = sum(last[k] - first[k] for k in first)
want = 100.0 * cpu_ms / span_ms
threads = max([e for n, i, e in excl if n == "Threads"] or [0.0])
events = {}
for n, i, e in excl + incl:
    if n.startswith("EventName: pipeprof/"):
        events[n] = max(events.get(n, 0.0), i, e)
cpu = sum(e for n, i, e in excl if re.search(r"gt_burn|\[kernel|clock_gettime", n))
sleeps = r"^Threads$|^\(Non-Activities\)$|" + sys.argv[3]
lead = [n for n, i, e in excl if not re.search(sleeps, n)][:1]
print("  %-4s %d threads, %.0f ms of their time, %.0f ms of CPU measured (%.1f %%): CPU nodes "
      "%.1f %%, Threads %.1f %%, pipeprof's events %.1f %%, first %s" % (
          mode, len(first), span_ms, cpu_ms, want, cpu, threads, sum(events.values()),
          lead[0] if lead else "-"))
bad = ["%s holds %.1f %%" % (n, v) for n, v in events.items() if v > 1.0]
if not lead or "gt_burn" not in lead[0]:
    bad.append("gt_burn does not lead: %s" % (lead[0] if lead else "no function"))
if mode == "cpu":
    if abs(cpu - want) > 3.0:
        bad.append("the CPU nodes hold %.1f %%, %.1f %% measured" % (cpu, want))
    if threads > 100.0 - want + 3.0:
        bad.append("Threads holds %.1f %%, more than the time off the CPU (%.1f %%)" % (
            threads, 100.0 - want))
    elif threads > 0.8 * (100.0 - want):
        bad.append("Threads holds %.1f %% of %.1f %% off the CPU: less than a fifth named by "
                   "the stacks the threads waited in" % (threads, 100.0 - want))
else:
    if threads > 5.0:
        bad.append("Threads holds %.1f %% in wall mode" % threads)
    if cpu < want - 3.0:
        bad.append("the CPU nodes hold %.1f %%, %.1f %% measured" % (cpu, want))
    # pipeprof report's "self self% total total% function" rows, the first table (by self)
    pp = []
    for line in open("%s/%s.pp" % (t, mode)):
        m = re.match(r"\s*\d+\s+([\d.]+)%\s+\d+\s+[\d.]+%\s+(\S+)\s*$", line)
        if m:
            pp.append((m.group(2), float(m.group(1))))
        elif pp:
            break
    for who, rows in (("dotnet-trace report", [(n, e) for n, i, e in excl]), ("pipeprof report", pp)):
        join = sum(e for n, e in rows if re.search(r"!\.?pthread_join$", n))
        sleep = sum(e for n, e in rows if re.search(r"!\.?(__)?(clock_)?nanosleep$", n))
        own = [(n, e) for n, e in rows
               if re.search(r"pp-sample-groundtruth!", n) and "gt_burn" not in n and e > 3.0]
        print("  %-4s %s: pthread_join %.1f %%, nanosleep %.1f %% exclusive; the program's "
              "functions but gt_burn above 3 %%: %s" % (mode, who, join, sleep, own or "none"))
        if join < 10.0 or sleep < 10.0:
            bad.append("%s: the blocked calls are no leaves (pthread_join %.1f %%, nanosleep "
                       "%.1f %%)" % (who, join, sleep))
        bad += ["%s: %s holds %.1f %% exclusive" % (who, n, e) for n, e in own]
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
done

${RECORD_ENV[@]+"${RECORD_ENV[@]}"} "$PIPEPROF" record -q --mode cpu -o "$T/sys.nettrace" -- \
  "$B/samples/pp-sample-syscalls" 3 "$T/sys.truth.json" || fail "syscalls: pipeprof record"
"$PIPEPROF" report --top 1000 "$T/sys.nettrace" >"$T/sys.pp" || fail "syscalls: pipeprof report"
timeout 180 dotnet-trace report "$T/sys.nettrace" topN -n 1000 >"$T/sys.excl" 2>&1 ||
  { cat "$T/sys.excl"; fail "syscalls: dotnet-trace report"; }
python3 - "$T" "$WAITS" <<'PY' || failed+=(kernel)
import re, sys
t = sys.argv[1]
rows = []
for line in open(t + "/sys.excl"):
    m = re.match(r"\s*\d+\.\s+(.*?)\s{2,}([\d.]+)%\s+([\d.]+)%\s*$", line)
    if m:
        rows.append((m.group(1), float(m.group(3))))
pp = [m.group(1) for m in (re.match(r"\s*\d+\s+[\d.]+%\s+\d+\s+[\d.]+%\s+(\S.*?)\s*$", l)
                           for l in open(t + "/sys.pp")) if m]
m = re.search(r"CPU in the kernel: \d+ samples \(([\d.]+)% of running\)", open(t + "/sys.pp").read())
want = float(m.group(1)) if m else 0.0
bad = []
for who, names, form in (("dotnet-trace report", [n for n, e in rows], r"\[kernel\]!\.\["),
                         ("pipeprof report", pp, r"\[kernel\]!\[")):
    odd = sorted(set(n for n in names if "[kernel" in n and
                     not re.match(form + r"kernel(, not placed)?\]$", n)))
    if odd:
        bad.append("%s: [kernel] frames not in the [kernel] module: %s" % (who, ", ".join(odd)))
kernel = sum(e for n, e in rows if re.match(r"\[kernel\]!\.\[kernel(, not placed)?\]$", n))
# the CPU rows: all but Threads, (Non-Activities) and the waits
cpu = sum(e for n, e in rows if not re.search(r"^Threads$|^\(Non-Activities\)$|" + sys.argv[2], n))
share = 100.0 * kernel / cpu if cpu > 0 else 0.0
print("  syscalls: the [kernel] module %.1f %% of dotnet-trace's CPU rows (%.1f %%), pipeprof's "
      "report %.1f %% of running samples in the kernel" % (share, cpu, want))
if want < 10.0:
    bad.append("pipeprof's report counts %.1f %% of the samples in the kernel, too few to judge" % want)
elif abs(share - want) > 5.0:
    bad.append("the [kernel] module holds %.1f %% of the CPU rows, %.1f %% in pipeprof's report" % (
        share, want))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
((${#failed[@]} == 0)) || fail "dotnet-trace report shares the time out wrongly or names it wrongly (${failed[*]})"
echo "dotnet-report-record: ok"
