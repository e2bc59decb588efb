#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/http-final-samples.sh - an HTTP recording (Go's /debug/pprof/profile, CPU mode at 250 Hz)
# holds every interval of CPU its samples stand for: pp-sample-shortthreads starts one thread after
# another, each burning 0.275 to 2.225 intervals of CPU, beside a busy one and one that burns 3.6
# intervals at a time with its signals blocked by a raw system call. Most of the short threads'
# CPU is carried by final samples (claimed as each thread exits, and at the recording's end), the
# masked thread's by samples that stand for several intervals. Each function's share of the
# profile's samples must be within 5 points of its share of the CPU the threads measured, and the
# samples (4 ms each) within 15 % of the CPU the threads burned during the recording. Without the
# final samples the short threads' share was 17.6 points short and the samples 75 % of the CPU;
# with one sample per thread and interval kept (before), the masked thread's 15.5 points, 75 %.
source "$(dirname "$0")/ipc-lib.sh"
# Preloaded first, a sanitizer's pthread_create starts every thread in its own routine, which the
# agent's interposer then records as the thread's: a never-sampled thread's final sample stands
# under asan_thread_start, not under st_short.
[[ -z ${asan:-} ]] || skip "under a sanitizer a thread's start routine is the sanitizer's; run in the plain build"
HOST_BIN=$B/samples/pp-sample-shortthreads
EVAL=$S/tests/tools/groundtruth-eval.py
command -v curl >/dev/null || skip "curl is not installed"

# run N: one host of 5 s recorded for 3 s from about its first half second.
run() {
  local sock=$T/st$1.sock
  env LD_PRELOAD="$PRELOAD" PIPEPROF_SAMPLING_SERVER_URL="unix://$sock" \
    "$HOST_BIN" 5 4 "$T/truth$1.json" "$T/series$1" 2>"$T/host$1.err" &
  local host=$!
  PP_PIDS+=($host)
  for _ in $(seq 1200); do [[ -S $sock ]] && break; sleep 0.05; done # 60 s: a hang guard
  [[ -S $sock ]] || fail "no sampling socket: $(cat "$T/host$1.err")"
  date +%s%N >"$T/start$1"
  code=$(curl -sS -o "$T/p$1.pb.gz" -w '%{http_code}' --unix-socket "$sock" \
    "http://localhost/debug/pprof/profile?seconds=3&rate=250")
  [[ $code == 200 ]] || fail "/debug/pprof/profile: HTTP $code"
  wait "$host" || fail "the host exited with $?: $(cat "$T/host$1.err")"
  echo "$host" >"$T/pid$1"
  python3 "$S/tests/tools/pprof-folded.py" --threads "$T/p$1.pb.gz" >"$T/p$1.folded"
  note "run $1: $(grep -o '[0-9]* short threads' "$T/host$1.err"), $(awk '{s += $NF} END {print s}' "$T/p$1.folded") samples"
}
run 1
run 2
# The CPU burned from each request's start for 3 s (the recording starts a little later), in all
# and by function: the shares are held to the CPU of the recording's window (wtruthN.json), not
# of the whole run, whose first half second and last 1.5 s the recording does not see.
captured=1
python3 - "$T" <<'PY' || captured=0
import json, sys
t, samples, cpu = sys.argv[1], 0, 0.0
names = ("st_steady", "st_short", "st_masked")
for run in (1, 2):
    start = int(open("%s/start%d" % (t, run)).read())
    series = [tuple(map(int, l.split())) for l in open("%s/series%d" % (t, run))]

    def at(ts):  # each function's CPU so far at ts, interpolated between two ends of short threads
        prev = (0, 0, 0, 0)
        for cur in series:
            if cur[0] >= ts:
                f = (ts - prev[0]) / max(cur[0] - prev[0], 1) if prev[0] else 1.0
                return [p + f * (c - p) for p, c in zip(prev[1:], cur[1:])]
            prev = cur
        return list(prev[1:])

    window = [b - a for a, b in zip(at(start), at(start + 3e9))]
    whole = json.load(open("%s/truth%d.json" % (t, run)))
    json.dump(dict(zip(names, (int(v) for v in window))), open("%s/wtruth%d.json" % (t, run), "w"))
    print("  run %d: shares in the window %s, in the whole run %s" % (run,
          " ".join("%.1f%%" % (100 * v / sum(window)) for v in window),
          " ".join("%.1f%%" % (100 * whole[n] / sum(whole.values())) for n in names)))
    cpu += sum(window)
    samples += sum(int(l.rsplit(" ", 1)[1]) for l in open("%s/p%d.folded" % (t, run)))
capture = samples * 4e6 / cpu
print("  samples %d x 4 ms for %.0f ms of CPU: %.1f%%" % (samples, cpu / 1e6, 100 * capture))
sys.exit(0 if abs(capture - 1) <= 0.15 else 1)
PY
# [not sampled] (CPU no sample saw): an HTTP recording starts the agent late (docs/architecture.md,
# "When the agent starts"), so the threads that existed then (main, the busy and the masked one,
# the short thread running) were found by the /proc scan, with no start routine recorded: their
# tick-missed CPU that auto's move claims, and what a late timer sample stands for beyond its own
# interval, stands over the root the drain finds in their stacks (the C library's frames and the
# routine they call). It grows with load (fresh-clone CI, moderately loaded: 7.72 % of the
# samples; docs/performance.md, "[not sampled] of an HTTP recording"), and the eval shares it
# among its thread's own samples, so the shares check holds it. Held here: where it stands.
# - the busy and the masked thread: under st_steady or st_masked. Before, all of it stood alone
#   (9 to 25 samples a pool), under the bare thread node in dotnet-trace's views (issue 19). A
#   claim that comes before the thread's first stack whose walk reached the root waits for it, up
#   to a bound (the drain's AG_DRAIN_CLAIM_WAIT_NS, 300 ms; the thread's end, a flush), and then
#   stands alone: more than 2 alone and more than a quarter of the two runs' fails. Beside two
#   busy loops (load 12 to 16), without the wait 0 to 11 a pool stood alone, in 8 of 10 pools
#   (1/11, 7/8, 14/3, 8/8, 3/8, 6/3, 23/0, 4/5, 7/9, 16/0 under the routine/not; a fresh-clone
#   CI run 3/11), so more than half under the routine was all that held (6 of those 10 failed
#   it, 7 fail this rule); with it 0 in 25 of 26 pools of 5 to 29, 2 of 7 in one.
# - main: under main, or alone (main runs under an interval at a time: its claims often come
#   before any sample of it; printed).
# - the short threads: the pthread_create interposer recorded the start routine of those started
#   after the agent, so theirs stands under st_short (a late tick's split, a final sample); alone
#   in at most one thread per run (the one the scan found, claimed before its first sample).
python3 - "$T" <<'PY' || fail "[not sampled] of the scan's threads not under their start routine, or alone in threads the agent saw start, or samples with no thread"
import collections, sys
t, bad, routine, alone_long = sys.argv[1], 0, 0, 0
for run in (1, 2):
    pid = open("%s/pid%d" % (t, run)).read().strip()
    roles, ns = {}, collections.defaultdict(collections.Counter)
    for line in open("%s/p%d.folded" % (t, run)):
        stack, n = line.rsplit(" ", 1)
        th = stack.split(";", 1)[0]
        if th == "?":  # no thread label: whose a sample is must be known for this check
            sys.exit("  run %d: a sample without a thread label: %s" % (run, line.strip()))
        if th.endswith("(%s)" % pid):
            roles[th] = "main"
        for r in ("st_steady", "st_masked"):
            if "!%s;" % r in stack + ";":
                roles[th] = r
        if stack.endswith("[not sampled]"):
            frames = stack.split(";")
            ns[th][frames[-2].split("!")[-1] if len(frames) > 2 else "alone"] += int(n)
    alone_short = 0
    for th, under in sorted(ns.items()):
        role = roles.get(th, "short")
        print("  run %d: [not sampled] of %s, %s: %s" % (run, th, role,
              " ".join("%s %d" % kv for kv in sorted(under.items()))))
        if role in ("st_steady", "st_masked"):
            routine += under[role]
            alone_long += sum(under.values()) - under[role]
        elif role == "main":
            bad += any(k not in ("main", "alone") for k in under)
        else:
            bad += any(k not in ("st_short", "alone") for k in under)
            alone_short += under["alone"] != 0
    bad += alone_short > 1
print("  the busy and the masked thread's [not sampled]: %d under their routine, %d not" %
      (routine, alone_long))
if routine + alone_long == 0:  # (9 to 65 a pool in every run seen: say so if a pool has none)
    print("  NOTE: no [not sampled] of the busy and the masked thread: where it stands not checked")
sys.exit(1 if bad or alone_long > 2 and 4 * alone_long > routine + alone_long else 0)
PY
# Two runs pooled: the rounding of each thread's CPU to whole samples (about 0.3 samples a thread)
# and the sampling's own error shrink. --max-not-sampled 100: held above by thread instead.
python3 "$EVAL" "$T/wtruth1.json" "$T/p1.folded" "$T/wtruth2.json" "$T/p2.folded" --max-error 5 \
  --max-not-sampled 100 || fail "the HTTP profile's shares are not the threads' CPU"
[[ $captured == 1 ]] || fail "the HTTP profile's samples are not the CPU the threads burned"
echo "http-final-samples: ok"
