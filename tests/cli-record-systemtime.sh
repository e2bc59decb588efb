#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-systemtime.sh - record's joined trace keeps the recorded process's start time.
# The trace header's SYSTEMTIME is the wall clock at the trace's sync point, and every event's time
# is counted from it: viewers print a recording's events at SYSTEMTIME + their offset. `record`
# joins an exec chain's segment traces (one per image) into one file when the process ends; that
# file must carry the first image's SYSTEMTIME, not the time of the join (before forkhang,
# 2026-11-29, the join's writer took "now"). Checked by
# ordering only, which load cannot break: the wall clock before record started <= the trace's sync
# time <= what CMD itself read from the clock at its start, and the sync time plus the last
# event's offset <= the wall clock after record returned. CMD (bash) execs bash again, so the
# trace is a join of two images' segments.
source "$(dirname "$0")/ipc-lib.sh"
trap 'pp_cleanup' EXIT
REC=("${RECORD_ENV[@]}" "$PIPEPROF")

before=$(date +%s%N)
"${REC[@]}" record -q -o "$T/t.nettrace" -- \
  bash -c 'date +%s%N >"$0"; i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done
    exec bash -c '"'"'i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done'"'"'' "$T/inside" \
  >"$T/rec.out" 2>"$T/rec.err" || { cat "$T/rec.err" >&2; fail "record"; }
after=$(date +%s%N)

"$PIPEPROF" dump --summary --format json "$T/t.nettrace" >"$T/summary.json"
"$PIPEPROF" dump --format json "$T/t.nettrace" >"$T/events.json"
python3 - "$before" "$(cat "$T/inside")" "$after" "$T/summary.json" "$T/events.json" <<'PY' ||
import datetime, json, sys
before, inside, after = (int(x) // 1000000 for x in sys.argv[1:4])  # milliseconds
summary = json.load(open(sys.argv[4]))
sync = summary["sync_time"]
assert sync is not None, "the trace's header has no valid date"
dt = datetime.datetime.strptime(sync, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
sync_ms = int(dt.timestamp() * 1000 + 0.5)
times = [json.loads(l)["time_ms"] for l in open(sys.argv[5])]
print(f"before {before}, sync {sync_ms} ({sync}), CMD's own clock {inside}, after {after}, "
      f"{len(times)} events, last at +{max(times):.3f} ms")
# SYSTEMTIME holds milliseconds (truncated): the sync point itself is within [sync_ms, sync_ms + 1)
assert before <= sync_ms, "the sync time is before record started"
assert sync_ms <= inside, "the sync time is after CMD read the clock: not CMD's start"
assert min(times) >= 0, "an event before the sync point"
assert sync_ms + max(times) <= after + 1, "the last event is after record returned"
PY
  fail "the joined trace's sync time (above)"
# Two images: two rundowns (each segment ends with its own), so this was a join.
n=$(grep -c '"provider": *"Microsoft-Windows-DotNETRuntimeRundown", *"id": *146' "$T/events.json" || true)
[[ $n -ge 2 ]] || fail "$n rundown ends in the trace: not a join of two images"
echo "PASS: the joined trace's SYSTEMTIME is CMD's start, its events within the recording"
