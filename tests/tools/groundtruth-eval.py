#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tests/tools/groundtruth-eval.py TRUTH.json PROFILE [--speedscope] [--hz N] [--max-error P]
#                                  [--min-capture R]
# Compares a profile of pp-sample-groundtruth with the CPU time its threads measured themselves.
# PROFILE is pipeprof's folded output (counts), or with --speedscope the speedscope file that
# `dotnet-trace convert` wrote from TraceEvent's thread-time computer (CPU_TIME durations). For
# each work function: its share of the profile against its share of the measured CPU time.
# Exits 1 when the worst difference exceeds --max-error points, or when the samples fall short of
# --min-capture of (measured CPU seconds x --hz).
import argparse, collections, json, re, sys

ap = argparse.ArgumentParser()
ap.add_argument("truth")
ap.add_argument("profile")
ap.add_argument("--speedscope", action="store_true")
ap.add_argument("--hz", type=float, default=0)
ap.add_argument("--max-error", type=float, default=1.0)
ap.add_argument("--min-capture", type=float, default=0)
a = ap.parse_args()
truth = json.load(open(a.truth))
got = collections.Counter()
total = 0.0
if a.speedscope:
    d = json.load(open(a.profile))
    frames = [f["name"] for f in d["shared"]["frames"]]
    for p in d["profiles"]:
        stack = []
        for e in p["events"]:
            if e["type"] == "O":
                stack.append((frames[e["frame"]], e["at"]))
                continue
            name, at = stack.pop()
            if name != "CPU_TIME":  # TraceEvent puts CPU_TIME on top of the stack it charges
                continue
            total += e["at"] - at
            for k in truth:
                if any(re.search(r"[.!]%s$" % k, n) for n, _ in stack):
                    got[k] += e["at"] - at
else:
    for line in open(a.profile):
        stack, n = line.rsplit(" ", 1)
        total += int(n)
        for k in truth:
            if re.search(r"!%s(;|$)" % k, stack):
                got[k] += int(n)
cpu = sum(truth.values())
if total <= 0 or cpu <= 0:
    sys.exit("groundtruth-eval: empty profile or truth")
worst = 0.0
for k in truth:
    share, want = 100.0 * got[k] / total, 100.0 * truth[k] / cpu
    worst = max(worst, abs(share - want))
    print("  %-15s profile %6.2f%%  measured %6.2f%%  (%+.2f)" % (k, share, want, share - want))
line = "  worst %.2f points (limit %.2f)" % (worst, a.max_error)
ok = worst <= a.max_error
if a.hz > 0 and not a.speedscope:
    capture = total / (cpu / 1e9 * a.hz)
    line += "; capture %.1f%% of %.0f CPU-s x %g Hz" % (100 * capture, cpu / 1e9, a.hz)
    ok = ok and capture >= a.min_capture
# Samples under none of the work functions (a stack cut short, another thread): named when a run
# fails, so a failure says whether the samples were missing or in the wrong place.
other = total - sum(got.values())
if other > 0.005 * total:
    line += "; %.1f%% of the profile under no work function" % (100.0 * other / total)
print(line)
sys.exit(0 if ok else 1)
