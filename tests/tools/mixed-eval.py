#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tests/tools/mixed-eval.py CHECK.json PROGRESS [--label TEXT] [--ticks] [--max-error P]
#                           [--min-caller PCT] [--min-pinvoke N] [--run START_NS END_NS]
# Judges what tests/dotnet/mixed-check made of a trace of the mixed app (tests/dotnet/mixed)
# against the CPU time the app measured itself. PROGRESS is the app's --progress file (lines
# "MONOTONIC_NS MANAGED_NS PINVOKE_NS NATIVE_THREAD_NS PROCESS_CPU_NS", cumulative); the truth
# is taken over the trace's own window (its first to its last running sample, in CLOCK_MONOTONIC:
# the runtime's timestamps on Linux, checked against the Tick events' payload where they are
# present), interpolated between the 100 ms lines. Checks, each reported with its numbers:
#   - at least --min-pinvoke running samples in burn_native/burn_inner on the main thread, and
#     --min-caller % of them with the managed caller BurnViaNative in the same stack;
#   - each part's share of the three parts' running samples within --max-error points of its
#     share of their measured CPU time, and the same for TraceEvent's CPU_TIME (thread-time
#     view); the parts' CPU_TIME in all within 10 % of their measured CPU time;
#   - the parts' functions named with their modules (libburn*!burn_*, mixed!...BurnViaNative);
#   - GC/Start, JIT events (Method/* or TieredCompilation/*), method names from the runtime
#     (rundown Method/DCStopVerbose or Method/LoadVerbose) and EventPipe's ProcessInfo present;
#   - with --ticks: the app's Tick events present over the window (as many as its progress rows
#     there, two fewer at most), their timestamps within 1 ms of their CLOCK_MONOTONIC payload.
# Prints everything it looked at, then one line "FAIL <label>: <check and its numbers>" for each
# check that failed (exit status 1), or "ok <label>".
import argparse, bisect, json, re, sys

PARTS = ("managed", "pinvoke", "native_thread")
ap = argparse.ArgumentParser()
ap.add_argument("check")
ap.add_argument("progress")
ap.add_argument("--label", default="trace")
ap.add_argument("--ticks", action="store_true")
ap.add_argument("--max-error", type=float, default=3.0)
ap.add_argument("--min-caller", type=float, default=90.0)
ap.add_argument("--min-pinvoke", type=int, default=50)
ap.add_argument("--run", type=int, nargs=2, metavar=("START_NS", "END_NS"))
a = ap.parse_args()
d = json.load(open(a.check))
rows = [[int(x) for x in l.split()] for l in open(a.progress) if l.strip()]
bad = []
out = lambda s="": print("  " + s)


def truth_at(t):
    """Cumulative [managed, pinvoke, native_thread, process] at CLOCK_MONOTONIC t."""
    times = [r[0] for r in rows]
    i = bisect.bisect_left(times, t)
    if i <= 0:
        return rows[0][1:]
    if i >= len(rows):
        return rows[-1][1:]
    (t0, *v0), (t1, *v1) = rows[i - 1], rows[i]
    f = (t - t0) / (t1 - t0) if t1 > t0 else 0
    return [x + f * (y - x) for x, y in zip(v0, v1)]


def shares(values):
    total = sum(values)
    return [100.0 * v / total if total > 0 else 0.0 for v in values]


s = d["samples"]
print("%s: %d running samples, other types %s (%d of them with a stack)" %
      (a.label, s["running"], s["other_types"] or "none", s["other_with_stack"]))

# The window, in CLOCK_MONOTONIC.
ticks = d["ticks"]
offset = ticks["offset_ns"][1] if ticks["offset_ns"] else 0.0
if a.ticks:
    if ticks["count"] == 0:
        bad.append("no Pipeprof-Test-Mixed/Tick events")
    elif abs(offset) > 1e6:
        bad.append("Tick timestamps are %.3f ms off their CLOCK_MONOTONIC payload" % (offset / 1e6))
window = d["window_ns"]
if window is None:
    bad.append("no running samples at all")
    window = [rows[0][0], rows[0][0]]
w0, w1 = window[0] - offset, window[1] - offset
run0, run1 = rows[0][0], rows[-1][0]
# A recording from the process's start (connect mode) also samples the runtime's start-up before
# the app's first progress row and its shutdown after the last (100-200 ms each); a clock that is
# not CLOCK_MONOTONIC is off by far more.
# With --run (CLOCK_MONOTONIC before the app's start and after its end, for such a recording),
# the window lies within it, however long the start-up took on a loaded machine.
lo, hi = a.run if a.run else (run0 - 5e8, run1 + 5e8)
if w0 < lo or w1 > hi:
    bad.append("the samples' window [%.3f, %.3f] s lies outside the app's run [%.3f, %.3f] s: "
               "the trace's timestamps are not CLOCK_MONOTONIC" % (w0 / 1e9, w1 / 1e9, lo / 1e9, hi / 1e9))
t0, t1 = truth_at(w0), truth_at(w1)
truth = [y - x for x, y in zip(t0, t1)]
out("window %.2f s of the app's %.2f s run; Tick events: %d (Count %d..%d), timestamp - payload %s ms" %
    ((w1 - w0) / 1e9, (run1 - run0) / 1e9, ticks["count"], ticks["first"], ticks["last"],
     "%.3f" % (offset / 1e6) if ticks["offset_ns"] else "n/a"))

# Shares of the three parts: samples, CPU_TIME, measured.
samples = [d["parts"][p] for p in PARTS]
cpu_time = [d["thread_time"]["cpu_ms"][p] for p in PARTS]
measured_ms = [v / 1e6 for v in truth[:3]]
ss, cs, ms = shares(samples), shares(cpu_time), shares(measured_ms)
out("%-14s %8s %7s %11s %7s %12s %7s" % ("part", "samples", "share", "CPU_TIME ms", "share", "measured ms", "share"))
for i, p in enumerate(PARTS):
    out("%-14s %8d %6.1f%% %11.0f %6.1f%% %12.0f %6.1f%%" % (p, samples[i], ss[i], cpu_time[i], cs[i], measured_ms[i], ms[i]))
other_cpu = (truth[3] - sum(truth[:3])) / 1e6
out("%-14s %8d %6s %11.0f %7s %12.0f   (outside the parts: runtime threads, GC, the agent)" %
    ("other", d["parts"]["other"], "", d["thread_time"]["cpu_ms"]["other"], "", other_cpu))
out("thread-time leaves (ms): %s" % d["thread_time"]["leaf_ms"])
for i, p in enumerate(PARTS):
    if abs(ss[i] - ms[i]) > a.max_error:
        bad.append("%s: %.1f%% of the parts' running samples, measured %.1f%% of their CPU (limit %.0f points)"
                   % (p, ss[i], ms[i], a.max_error))
    if abs(cs[i] - ms[i]) > a.max_error:
        bad.append("%s: %.1f%% of the parts' CPU_TIME, measured %.1f%% (limit %.0f points)"
                   % (p, cs[i], ms[i], a.max_error))
if sum(measured_ms) > 0 and abs(sum(cpu_time) - sum(measured_ms)) > 0.10 * sum(measured_ms):
    bad.append("the parts' CPU_TIME is %.0f ms, measured %.0f ms over the window (limit 10 %%)"
               % (sum(cpu_time), sum(measured_ms)))

# P/Invoke'd native code and its managed caller in one stack.
pv = d["pinvoke"]
out("burn_native/burn_inner on the main thread: %d running samples, %d with BurnViaNative above; "
    "without it (any thread): %d; BurnViaNative without a native frame below: %d" %
    (pv["burn_main"], pv["burn_main_with_caller"], pv["burn_without_caller"], pv["caller_without_burn"]))
if pv["burn_main"] < a.min_pinvoke:
    bad.append("only %d running samples in burn_native/burn_inner on the main thread (need %d; measured %.0f ms "
               "there): the trace has no native frames below the P/Invoke"
               % (pv["burn_main"], a.min_pinvoke, measured_ms[1]))
elif pv["burn_main_with_caller"] < a.min_caller / 100.0 * pv["burn_main"]:
    bad.append("%d of %d (%.1f%%) main-thread samples in burn_native/burn_inner hold BurnViaNative (need %.0f%%)"
               % (pv["burn_main_with_caller"], pv["burn_main"],
                  100.0 * pv["burn_main_with_caller"] / pv["burn_main"], a.min_caller))

# Names, as TraceEvent gives them.
names = [n["name"] for n in d["names"]]
out("names: %s" % ", ".join("%s (%d)" % (n["name"], n["samples"]) for n in d["names"][:10]))
out("unnamed frames in running samples: %d of %d" % (d["unnamed"]["unnamed"], d["unnamed"]["frames"]))
# Every frame is named, a stripped library's internal functions by module and address (pipeprof's
# rundown), the JIT's by the runtime; a few frames outside any module may stay unnamed.
if d["unnamed"]["unnamed"] > 0.01 * d["unnamed"]["frames"]:
    bad.append("%d of %d frames unnamed in TraceEvent (limit 1 %%)"
               % (d["unnamed"]["unnamed"], d["unnamed"]["frames"]))
for what, pattern in (("burn_inner", r"^libburn[^!]*!(.*[.:])?burn_inner\b"),
                      ("native_thread_work", r"^libburn[^!]*!(.*[.:])?native_thread_work\b"),
                      ("BurnViaNative", r"^mixed!.*\bBurnViaNative\b"),
                      ("ManagedSpin", r"^mixed!.*\bManagedSpin\b")):
    if not any(re.search(pattern, n) for n in names):
        bad.append("no frame named like %s (%s)" % (what, pattern))
for p in PARTS:
    for e in d["examples"][p][:1]:
        out("%s, %d samples: %s" % (p, e["samples"], e["stack"]))
# The main thread's frames below the runtime's host (libhostpolicy's corehost_main) are the
# muxer's and libhostfxr's: a frame named from another module names code that was not there
# (libz.so!inflate, where the agent mapped libz over libhostfxr.so after the muxer unloaded it,
# in every recording from the start).
for p in ("managed", "pinvoke"):
    for e in d["examples"][p][:3]:
        frames = e["stack"].split(";")
        host = [i for i, f in enumerate(frames) if f.startswith("libhostpolicy")]
        stray = [f for f in frames[:host[0]] if not f.split("!")[0].startswith(("dotnet", "libc", "libhostfxr"))] if host else []
        if stray:
            bad.append("%s: frames below libhostpolicy named from other modules: %s" % (p, ", ".join(stray)))
            break

# The runtime's own events.
ev = d["events"]
count = lambda pattern: sum(n for k, n in ev.items() if re.search(pattern, k))
gc = count(r"^Microsoft-Windows-DotNETRuntime/GC/Start$")
jit = count(r"^Microsoft-Windows-DotNETRuntime/(Method|TieredCompilation)/")
named = count(r"^Microsoft-Windows-DotNETRuntime(Rundown)?/Method/(DCStopVerbose|LoadVerbose)$")
info = count(r"^Microsoft-DotNETCore-EventPipe/ProcessInfo$")
tick = count(r"^Pipeprof-Test-Mixed/Tick$")
out("runtime events: GC/Start %d, JIT (Method/*, TieredCompilation/*) %d, method names (DCStopVerbose, "
    "LoadVerbose) %d, ProcessInfo %d, Tick %d; %d kinds in all" % (gc, jit, named, info, tick, len(ev)))
for what, n in (("GC/Start", gc), ("JIT (Method/* or TieredCompilation/*)", jit),
                ("Method/DCStopVerbose or Method/LoadVerbose", named), ("EventPipe ProcessInfo", info)):
    if n == 0:
        bad.append("no %s events" % what)
# The app's ticks over the window, by its own progress rows: each row between the first (before
# any tick) and the last (at exit) is written right after a tick, so a row in the window is a
# tick the session saw, but at each end: the first row's tick may precede the session, a tick
# just before the window's end may have its row after it. Not one every 100 ms of the window: on
# a loaded machine the app's ticker is late too.
emitted = sum(1 for r in rows[1:-1] if w0 <= r[0] <= w1)
out("Tick events: %d in the trace, %d written by the app in the window" % (tick, emitted))
if a.ticks and tick < emitted - 2:
    bad.append("%d Tick events, the app wrote %d in the %.1f s window" % (tick, emitted, (w1 - w0) / 1e9))

for b in bad:
    print("FAIL %s: %s" % (a.label, b))
if bad:
    sys.exit(1)
print("ok   %s" % a.label)
