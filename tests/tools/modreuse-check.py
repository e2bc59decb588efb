#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tests/tools/modreuse-check.py NAME PERF_SCRIPT MIN_SHARE [--rounds]: the perf-script text of a
# recording of pp-sample-modreuse (samples/modreuse), whose libpp-modreuse-b.so was loaded where
# libpp-modreuse-a.so had been: every frame in the two libraries must be named by a function of
# its own library (no offset, no frame of one library named by the other's), and each library
# must have at least MIN_SHARE of their samples. Every sample of liba's must come before every one
# of libb's, unless --rounds (the host ran several rounds of both). Exits 0 or 1 with the reason.
# Used by tests/agent-module-reuse.sh and tests/http-module-reuse.sh.
import re, sys
name, path, min_share = sys.argv[1], sys.argv[2], float(sys.argv[3])
rounds = "--rounds" in sys.argv[4:]
samples = []  # (time, count, [(function, module)])
for block in open(path).read().split("\n\n"):
    lines = [l for l in block.split("\n") if l.strip()]
    if not lines:
        continue
    m = re.search(r" ([0-9]+\.[0-9]+): ([0-9]+) ", lines[0])
    if not m:
        continue
    frames = []
    for l in lines[1:]:
        f = re.match(r"\s*[0-9a-f]+ (.*) \(([^()]*)\)$", l)
        if f:
            frames.append((f.group(1), f.group(2)))
    samples.append((float(m.group(1)), int(m.group(2)), frames))
bad, counts, times = [], {"a": 0, "b": 0}, {"a": [], "b": []}
for t, n, frames in samples:
    seen = set()
    for fn, mod in frames:
        mm = re.fullmatch(r"libpp-modreuse-([ab])", mod)
        if not mm:
            continue
        which = mm.group(1)
        # its own burn function (or another of its functions: a sample in its destructors as
        # dlclose runs them), never the other library's, never an offset
        other = re.fullmatch(r"pp_modreuse_([ab])_burn", fn)
        if (other and other.group(1) != which) or re.match(r"(0x|\[unknown\]|\?)", fn):
            bad.append("%s (%s) at %.6f" % (fn, mod, t))
        if fn == "pp_modreuse_%s_burn" % which:
            seen.add(which)
    for which in seen:
        counts[which] += n
        times[which].append(t)
total = sum(n for _, n, _ in samples)
both = counts["a"] + counts["b"]
print("%s: %d samples; liba's pp_modreuse_a_burn %d, libb's pp_modreuse_b_burn %d; misnamed: %s"
      % (name, total, counts["a"], counts["b"], bad[:3] or "none"))
ok = not bad and both > 0
for which in "ab":
    if counts[which] < min_share * both:
        print("FAIL: %s: lib%s has %d of %d samples (want >= %.0f %%)"
              % (name, which, counts[which], both, 100 * min_share), file=sys.stderr)
        ok = False
if not rounds and times["a"] and times["b"] and max(times["a"]) > min(times["b"]):
    print("FAIL: %s: a sample named by liba at %.6f s after one named by libb at %.6f s"
          % (name, max(times["a"]), min(times["b"])), file=sys.stderr)
    ok = False
if bad:
    print("FAIL: %s: frames in the two libraries named otherwise than by their own function: %s"
          % (name, bad[:5]), file=sys.stderr)
sys.exit(0 if ok else 1)
