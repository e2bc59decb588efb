#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tests/tools/modreuse-speedscope.py SPEEDSCOPE_JSON COUNT_A COUNT_B: dotnet-trace's speedscope of
# a CPU recording of pp-sample-modreuse at 1000 Hz (tests/agent-module-reuse.sh), whose
# libpp-modreuse-b.so was loaded where libpp-modreuse-a.so had been. TraceEvent must name both
# burn functions by their own library (no offset, none named by the other's), and give each the
# time of its samples: COUNT_A and COUNT_B are pipeprof's own counts of them (modreuse-check.py),
# about a millisecond of CPU each. Exits 0 or 1 with the reason.
#
# Time: an "evented" profile (dotnet-trace's) opens and closes frames; a frame's time runs from
# its outermost open to the close that ends it (a frame that a stack held twice, nested, is
# counted once); a "sampled" profile adds each sample's weight to the functions its stack holds.
import json, re, sys

d = json.load(open(sys.argv[1]))
count = {"a": int(sys.argv[2]), "b": int(sys.argv[3])}
frames = [f["name"] for f in d["shared"]["frames"]]
burn = {}
for i, f in enumerate(frames):
    m = re.search(r"pp_modreuse_([ab])_burn", f)
    if m:
        burn[i] = m.group(1)
names = sorted(f for f in frames if "modreuse-" in f)
ms = {"a": 0.0, "b": 0.0}
for p in d["profiles"]:
    if p["type"] == "evented":
        depth, since = {}, {}
        for e in p["events"]:
            f = e["frame"]
            if f not in burn:
                continue
            if e["type"] == "O":
                depth[f] = depth.get(f, 0) + 1
                if depth[f] == 1:
                    since[f] = e["at"]
            elif depth.get(f, 0) > 0:
                depth[f] -= 1
                if depth[f] == 0:
                    ms[burn[f]] += e["at"] - since.pop(f)
    else:
        for st, w in zip(p["samples"], p["weights"]):
            for which in {burn[i] for i in st if i in burn}:
                ms[which] += w
want = ["libpp-modreuse-a.so!.pp_modreuse_a_burn", "libpp-modreuse-b.so!.pp_modreuse_b_burn"]
print("dotnet-trace speedscope: frames in the libraries %s; pp_modreuse_a_burn %.1f ms "
      "(%d samples), pp_modreuse_b_burn %.1f ms (%d samples)"
      % (names, ms["a"], count["a"], ms["b"], count["b"]))
ok = True
missing = [w for w in want if w not in names]
bad = [f for f in names if re.search(r"!\.(0x|\?)", f) or
       any(len(set(m.groups())) > 1
           for m in [re.search(r"modreuse-([ab])\.so!\.pp_modreuse_([ab])_burn", f)] if m)]
if missing or bad:
    print("FAIL: TraceEvent named the libraries' frames %s (want %s)" % (names, want),
          file=sys.stderr)
    ok = False
# Each function's time against its samples: 10 % and 10 ms apart at most. The failure this holds
# charged samples nothing, as they were written at one instant (76.6 ms for 298 samples in a CI
# run; 0 to 153 ms with the host's churn); after, every function within 0.8 % in 50 runs at loads
# of 11 to 25 (docs/architecture.md, "CPU samples in the trace").
for which in "ab":
    if abs(ms[which] - count[which]) > 0.1 * count[which] + 10:
        print("FAIL: TraceEvent gives pp_modreuse_%s_burn %.1f ms for %d samples of 1 ms"
              % (which, ms[which], count[which]), file=sys.stderr)
        ok = False
sys.exit(0 if ok else 1)
