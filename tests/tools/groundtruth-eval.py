#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tests/tools/groundtruth-eval.py TRUTH.json PROFILE [TRUTH.json PROFILE...] [--speedscope]
#                                  [--hz N] [--max-error P] [--min-capture R] [--min-kernel F]
#                                  [--layout FOLDED... [--max-layout P]] [--max-not-sampled P]
# Compares a profile of pp-sample-groundtruth with the CPU time its threads measured themselves.
# PROFILE is pipeprof's folded output (counts), or with --speedscope the speedscope file that
# `dotnet-trace convert` wrote from TraceEvent's thread-time computer (CPU_TIME durations). For
# each work function: its share of the profile against its share of the measured CPU time. Several
# pairs (runs of the same workload) are pooled: their samples and their CPU times are added up,
# which shrinks the sampling error of a split inside one thread by the square root of the runs.
# Exits 1 when the worst difference exceeds --max-error points, or when the samples fall short of
# --min-capture of (measured CPU seconds x --hz), or when the profile's [kernel] frames hold less
# than --min-kernel times the share of the threads' system time (the truth's "_stime", which the
# kernel samples at its tick: a loose check that kernel time is shown as such). A [kernel] frame
# counts only in the module "[kernel]" ("[kernel]![kernel]", "[kernel]!.[kernel]" in TraceEvent's
# views, which put a dot before every native function): a [kernel] or [kernel, not placed] frame
# in another module (the agent's library, whose bytes the markers are) fails the run.
# Samples under the agent's [not sampled] leaf (CPU of a thread no sample saw, with no stack
# known: docs/architecture.md, "Auto's move to perf", "What the tick did not see") stand under
# their thread's root: whose CPU is known, not where. They are shared among the thread's work
# functions (and its samples under none) by the thread's own samples in the same profile, and
# left out of the shares only for a thread with no other sample; they fail the check when they
# pass --max-not-sampled per cent of the samples (default 5). Left out of the total instead, a
# thread's [not sampled] read as the other threads' gain: pp-sample-groundtruth at 100 Hz (197
# samples, one function a thread) read its two bursty threads -1.10 and -0.83 points with 5
# intervals of theirs [not sampled].
# --layout FOLDED (with --speedscope, once per pair, in the pairs' order): the folded counts of the
# same traces (`pipeprof convert --format folded`); each work function's share of the pooled
# CPU_TIME must be within --max-layout points of its share of the pooled counted samples:
# TraceEvent's time view shows what was sampled, so a miss there is the bridge's layout of the
# samples, whatever the sampling's own error.
import argparse, collections, json, re, sys

ap = argparse.ArgumentParser()
ap.add_argument("files", nargs="+", help="TRUTH.json PROFILE pairs")
ap.add_argument("--speedscope", action="store_true")
ap.add_argument("--hz", type=float, default=0)
ap.add_argument("--max-error", type=float, default=1.0)
ap.add_argument("--min-capture", type=float, default=0)
ap.add_argument("--min-kernel", type=float, default=0)
ap.add_argument("--layout", action="append", default=[])
ap.add_argument("--max-layout", type=float, default=0.5)
ap.add_argument("--max-not-sampled", type=float, default=5.0)
a = ap.parse_args()
if len(a.files) % 2 != 0:
    sys.exit("groundtruth-eval: TRUTH.json and PROFILE come in pairs")
truth = collections.Counter()
# Keys that start with "_" are not functions: "_stime", the threads' kernel time as the kernel
# reports it (tick-sampled), is compared loosely with the profile's [kernel] frames; "_outside",
# the threads' CPU time in none of the work functions (between their phases: the CPU-time reads
# that time them, the loop), is part of the total the shares are taken of, and stands against the
# samples under no work function. Left out of the total, it read every function low by its
# share of it (pp-sample-syscalls: 0.3 to 0.4 % of the CPU, so its steady functions 0.13 points
# low over pools of 8 to 10 runs in every engine and in `perf record` as root).
stime = None
misplaced = collections.Counter()  # [kernel] frames in a module not "[kernel]", by name
outside = None
kernel = 0.0
not_sampled = 0.0
not_sampled_left = 0.0  # of it, of threads with no other sample: in no share
got = collections.Counter()
total = 0.0


def is_kernel(frame):
    """A [kernel] leaf in the "[kernel]" module; notes one of another module in misplaced."""
    if re.search(r"\[kernel(, not placed)?\]$", frame) and \
            not re.match(r"\[kernel\]!\.?\[kernel(, not placed)?\]$", frame):
        misplaced[frame] += 1
    return re.match(r"\[kernel\]!\.?\[kernel\]$", frame) is not None


def share_not_sampled(thread_got, thread_total, thread_ns):
    """Gives each thread's [not sampled] time to its work functions by its own samples."""
    global total, not_sampled_left
    for th, ns in thread_ns.items():
        if thread_total[th] <= 0:
            not_sampled_left += ns
            continue
        total += ns
        for k, n in thread_got[th].items():
            got[k] += ns * n / thread_total[th]


def read_speedscope(path):
    global total, kernel, not_sampled
    d = json.load(open(path))
    frames = [f["name"] for f in d["shared"]["frames"]]
    thread_got = collections.defaultdict(collections.Counter)
    thread_total = collections.Counter()
    thread_ns = collections.Counter()
    for th, p in enumerate(d["profiles"]):
        stack = []
        for e in p["events"]:
            if e["type"] == "O":
                stack.append((frames[e["frame"]], e["at"]))
                continue
            name, at = stack.pop()
            if name != "CPU_TIME":  # TraceEvent puts CPU_TIME on top of the stack it charges
                continue
            if stack and stack[-1][0].endswith("[not sampled]"):
                not_sampled += e["at"] - at
                thread_ns[th] += e["at"] - at
                continue
            total += e["at"] - at
            thread_total[th] += e["at"] - at
            if stack and is_kernel(stack[-1][0]):
                kernel += e["at"] - at
            for k in run_truth:
                if any(re.search(r"[.!]%s$" % k, n) for n, _ in stack):
                    got[k] += e["at"] - at
                    thread_got[th][k] += e["at"] - at
    share_not_sampled(thread_got, thread_total, thread_ns)


def read_folded(path):
    global total, kernel, not_sampled
    thread_got = collections.defaultdict(collections.Counter)
    thread_total = collections.Counter()
    thread_ns = collections.Counter()
    for line in open(path):
        stack, n = line.rsplit(" ", 1)
        th = stack.split(";", 1)[0]  # the thread: "name (tid)"
        if stack.endswith("[not sampled]"):
            not_sampled += int(n)
            thread_ns[th] += int(n)
            continue
        total += int(n)
        thread_total[th] += int(n)
        if is_kernel(stack.rsplit(";", 1)[-1]):
            kernel += int(n)
        for k in run_truth:
            if re.search(r"!%s(;|$)" % k, stack):
                got[k] += int(n)
                thread_got[th][k] += int(n)
    share_not_sampled(thread_got, thread_total, thread_ns)


for i in range(0, len(a.files), 2):
    run_truth = json.load(open(a.files[i]))
    if "_stime" in run_truth:
        stime = (stime or 0) + run_truth.pop("_stime")
    if "_outside" in run_truth:
        outside = (outside or 0) + run_truth.pop("_outside")
    for k in [k for k in run_truth if k.startswith("_")]:
        run_truth.pop(k)  # the workload's other notes ("_switches", "_at_reads")
    truth.update(run_truth)
    (read_speedscope if a.speedscope else read_folded)(a.files[i + 1])
cpu = sum(truth.values()) + (outside or 0)
if total <= 0 or cpu <= 0:
    sys.exit("groundtruth-eval: empty profile or truth")
worst = 0.0
rows = [(k, got[k], truth[k]) for k in truth]
if outside is not None:
    rows.append(("(outside)", total - sum(got.values()), outside))
for k, n, t in rows:
    share, want = 100.0 * n / total, 100.0 * t / cpu
    worst = max(worst, abs(share - want))
    print("  %-15s profile %6.2f%%  measured %6.2f%%  (%+.2f)" % (k, share, want, share - want))
line = "  worst %.2f points (limit %.2f)" % (worst, a.max_error)
ok = worst <= a.max_error
if a.hz > 0 and not a.speedscope:
    capture = (total + not_sampled_left) / (cpu / 1e9 * a.hz)
    line += "; capture %.1f%% of %.0f CPU-s x %g Hz" % (100 * capture, cpu / 1e9, a.hz)
    ok = ok and capture >= a.min_capture
# Samples under none of the work functions (a stack cut short, another thread): named when a run
# fails, so a failure says whether the samples were missing or in the wrong place (a truth with
# "_outside" has its own row for them).
other = total - sum(got.values())
if other > 0.005 * total and outside is None:
    line += "; %.1f%% of the profile under no work function" % (100.0 * other / total)
if stime is not None:
    line += "; [kernel] %.1f%% of the profile, the kernel's tick-sampled system time %.1f%%" % (
        100.0 * kernel / total, 100.0 * stime / cpu)
    if kernel / total < a.min_kernel * stime / cpu:
        line += " (too little [kernel]: at least %.2f of it)" % a.min_kernel
        ok = False
if misplaced:
    line += "; [kernel] frames not in the [kernel] module: %s" % ", ".join(sorted(misplaced))
    ok = False
if not_sampled > 0:
    share = 100.0 * not_sampled / (total + not_sampled_left)
    line += "; (not sampled) %.2f%% of the samples, shared by their threads' samples" % share
    if not_sampled_left > 0:
        line += " (%.2f%% of threads with none, left out)" % (
            100.0 * not_sampled_left / (total + not_sampled_left))
    line += " (limit %.2f)" % a.max_not_sampled
    ok = ok and share <= a.max_not_sampled
print(line)
if a.layout:
    shown = {k: 100.0 * got[k] / total for k in truth}
    got.clear()
    total = 0.0
    if len(a.layout) * 2 != len(a.files):
        sys.exit("groundtruth-eval: one --layout per TRUTH.json PROFILE pair")
    for path in a.layout:
        read_folded(path)
    layout = max(abs(shown[k] - 100.0 * got[k] / max(total, 1)) for k in truth)
    print("  CPU_TIME shares against the counted samples: worst %.2f points (limit %.2f)" %
          (layout, a.max_layout))
    ok = ok and layout <= a.max_layout
sys.exit(0 if ok else 1)
