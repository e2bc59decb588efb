#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-exec-modules.sh - an exec chain's trace names each image's functions with its
# own modules. `record` of bash busy in a loop that then execs pp-sample-groundtruth: one process,
# two images, whose agents both number their modules from 1 (bash is module 1 of the first,
# pp-sample-groundtruth of the second). The joined trace must give the two images' modules ids of
# their own (`dump`: no ModuleDCEnd id names two files), `report` must put gt_steady in
# pp-sample-groundtruth, and so must TraceEvent (`dotnet-trace convert --format speedscope`, when
# dotnet-trace is installed; said loudly when not). Before (2026-11-29), both read
# bash!gt_steady. And the same chain without ASLR, its second image killed (names from files).
source "$(dirname "$0")/ipc-lib.sh" # B, T (TMPDIR), RECORD_ENV: a sanitizer's runtime first
trap 'pp_cleanup' EXIT
GT=$B/samples/pp-sample-groundtruth
REC=("${RECORD_ENV[@]}" "$PIPEPROF")

# bash's loop is about 0.3 s of CPU here: its image takes samples in bash itself, so its rundown
# names bash's module 1 (checked below, not assumed).
"${REC[@]}" record -q -o "$T/chain.nettrace" -- \
  bash -c 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; exec "$0" 1 "$1"' "$GT" \
  "$T/gt.json" >"$T/rec.out" 2>"$T/rec.err" || { cat "$T/rec.err" >&2; fail "record"; }

# The rundowns' ModuleDCEnd ids and paths, in the trace's order.
"$PIPEPROF" dump --format json "$T/chain.nettrace" >"$T/dump.json"
python3 - "$T/dump.json" <<'EOF' || fail "module ids of the two images (dump above)"
import json, sys
rundowns, cur = [], None
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("provider") != "Microsoft-Windows-DotNETRuntimeRundown":
        continue
    if e["id"] == 148:
        cur = {}
    elif e["id"] == 146 and cur is not None:
        rundowns.append(cur)
        cur = None
    elif e["id"] == 154 and cur is not None:
        p = bytes.fromhex(e["payload_hex"])
        cur[int.from_bytes(p[:8], "little")] = p[24:].decode("utf-16-le").rstrip("\0")
print("rundowns:", [{hex(k): v.rsplit("/", 1)[-1] for k, v in r.items()} for r in rundowns])
files = [r for r in rundowns if any(v.endswith("/bash") for v in r.values())]
gts = [r for r in rundowns if any(v.endswith("/pp-sample-groundtruth") for v in r.values())]
if not files or not gts:
    sys.exit("want a rundown that names bash and one that names pp-sample-groundtruth")
seen = {}
for r in rundowns:
    for k, v in r.items():
        if seen.setdefault(k, v) != v:
            sys.exit(f"module id {hex(k)} is {seen[k]} and {v}")
EOF

# pipeprof's reader
"$PIPEPROF" report --format json --top 500 "$T/chain.nettrace" >"$T/report.json"
python3 - "$T/report.json" <<'EOF' || fail "report labels gt_steady with another image's module"
import json, sys
r = json.load(open(sys.argv[1]))
names = [e["function"] for e in r["top_total"] if "gt_steady" in e["function"]]
print("report:", names)
if not names or any(not n.startswith("pp-sample-groundtruth!") for n in names):
    sys.exit(1)
if not any(e["function"].startswith("bash!") for e in r["top_total"]):
    sys.exit("no frame of bash's image")
EOF

# TraceEvent
if command -v dotnet-trace >/dev/null && command -v dotnet >/dev/null; then
  (cd "$T" && timeout 300 dotnet-trace convert --format speedscope -o "$T/te" "$T/chain.nettrace" \
    >"$T/te.log" 2>&1) || { cat "$T/te.log" >&2; fail "dotnet-trace convert"; }
  python3 - "$(ls "$T"/te*.json | head -1)" <<'EOF' || fail "TraceEvent labels gt_steady with another image's module"
import json, sys
d = json.load(open(sys.argv[1]))
names = [f["name"] for f in d["shared"]["frames"] if "gt_steady" in f["name"]]
print("TraceEvent:", names)
if not names or any(not n.startswith("pp-sample-groundtruth!") for n in names):
    sys.exit(1)
EOF
else
  echo "SKIP (loud, this part only): dotnet-trace is not installed, TraceEvent's labels not checked" >&2
fi
echo "ok: each image's functions under its own modules"

# Killed, without ASLR (setarch -R): bash and pp-sample-workload load at the same base, and the
# workload, killed by SIGTERM, never writes its rundown: record names its frames from the files,
# a rundown whose modules are known by their base (cli/names.c), which is bash's ModuleLoad's too.
# Before (2026-11-29) report labelled them bash!pp_workload_fn_c.
WL=$B/samples/pp-sample-workload
if ! setarch -R true 2>/dev/null; then
  echo "SKIP (loud, this part only): setarch -R does not run here" >&2
  exit 0
fi
"${RECORD_ENV[@]}" setarch -R "$PIPEPROF" record -o "$T/norand.nettrace" -- \
  bash -c 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; exec "$0" 120' "$WL" \
  >/dev/null 2>"$T/norand.err" &
rp=$!
PP_PIDS+=($rp)
cmd_pid=
cmd_execd() {
  cmd_pid=$(pgrep -P "$rp" | head -1)
  [[ -n $cmd_pid && $(cat "/proc/$cmd_pid/comm" 2>/dev/null) == pp-sample-work* ]]
}
wait_until 60 "the workload exec'd under record" cmd_execd
read -r cpu waited < <(wait_cpu "$cmd_pid" 1 60)
kill -TERM "$cmd_pid"
set +e
wait "$rp"
set -e
grep -q "ended before its rundown" "$T/norand.err" || { cat "$T/norand.err" >&2; fail "no-ASLR: the workload's frames were not named from files"; }
"$PIPEPROF" dump --format json "$T/norand.nettrace" >"$T/norand.json"
"$PIPEPROF" report --format json --top 500 "$T/norand.nettrace" >"$T/norand.report" 2>/dev/null
python3 - "$T/norand.json" "$T/norand.report" <<'EOF2' || fail "no-ASLR killed chain: labels (above)"
import json, sys
bases = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("name") == "ModuleLoad" and e["fields"]["Path"].rsplit("/", 1)[-1] in ("bash", "pp-sample-workload"):
        bases[e["fields"]["Path"].rsplit("/", 1)[-1]] = e["fields"]["Base"]
print("bases:", {k: hex(v) for k, v in bases.items()})
if len(bases) != 2 or len(set(bases.values())) != 1:
    sys.exit("premise: bash and pp-sample-workload at one base under setarch -R")
r = json.load(open(sys.argv[2]))
names = [e["function"] for e in r["top_total"] if "pp_workload_" in e["function"]]
print("report:", names)
if not names or any(not n.startswith("pp-sample-workload!") for n in names):
    sys.exit(1)
EOF2
echo "ok: without ASLR, a killed image's functions named from files under its own module"
