#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-traceevent.sh - TraceEvent (NuGet Microsoft.Diagnostics.Tracing.TraceEvent,
# through TraceLog as PerfView and dotnet-trace use it) reads a trace that pipeprof's writer
# wrote (tests/tools/nt-gen.c): every event, its provider, id, name, thread, fields, stack and
# timestamp must be identical to what the writer was given. Twice: events written in order, and
# events given out of order to a writer with a reorder window, two of them later than the window
# (written with their true time and IsSorted clear, which TraceEvent must still deliver). Both
# traces have events noted lost (before a capture thread's first event, and in the middle): the
# writer's count, TraceEvent's EventsLost and `pipeprof dump`'s must be the same.
# Skips loudly without the .NET SDK or when the package cannot be restored.
set -euo pipefail
B=${PP_BINARY_DIR:?PP_BINARY_DIR is not set}
S=${PP_SOURCE_DIR:?PP_SOURCE_DIR is not set}
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
command -v dotnet >/dev/null || { echo "SKIP (loud): the .NET SDK (dotnet) is not installed" >&2; exit 77; }

out=$B/dotnet-traceevent
(
  flock 9
  if [[ ! -f $out/app/traceevent-dump.dll || $S/tests/dotnet/traceevent-dump/Program.cs -nt $out/app/traceevent-dump.dll ]]; then
    rm -rf "$out/src" && mkdir -p "$out/src"
    cp "$S"/tests/dotnet/traceevent-dump/{traceevent-dump.csproj,Program.cs} "$out/src/"
    if ! timeout 300 dotnet build -c Release -o "$out/app" "$out/src" >"$out/build.log" 2>&1; then
      if grep -q "NU1101\|NU1102\|Unable to find package" "$out/build.log"; then
        echo "SKIP (loud): Microsoft.Diagnostics.Tracing.TraceEvent cannot be restored here" >&2
        exit 77
      fi
      cat "$out/build.log"
      echo "FAIL: building tests/dotnet/traceevent-dump" >&2
      exit 1
    fi
  fi
) 9>"$B/dotnet-traceevent.lock"

T=$(mktemp -d /tmp/pp-traceevent.XXXXXX)
trap 'rm -rf "$T"' EXIT
# in-order: TraceEvent's order is the writer's. by-time: the late events come in TraceEvent's
# own order (at the next sorted event, format doc 4.3), so both sides are compared by time.
check() {
  python3 - "$1" "$T/expected.jsonl" "$T/traceevent.jsonl" <<'PY'
import json, sys
mode = sys.argv[1]
want = [json.loads(l) for l in open(sys.argv[2])]
got = [json.loads(l) for l in open(sys.argv[3])]
ours = {"Pipeprof-Test-Gen", "Microsoft-DotNETCore-SampleProfiler"}
got = [e for e in got if e["provider"] in ours]
if mode == "by-time":
    want.sort(key=lambda e: e["ts"])
    got.sort(key=lambda e: e["ts"])
if len(got) != len(want):
    print("FAIL (%s): TraceEvent read %d events, the writer wrote %d" % (mode, len(got), len(want)), file=sys.stderr)
    sys.exit(1)
for i, (w, g) in enumerate(zip(want, got)):
    if w != g:
        print("FAIL (%s): event %d differs:\n  written: %s\n  read:    %s" % (mode, i, w, g), file=sys.stderr)
        sys.exit(1)
print("dotnet-traceevent (%s): TraceEvent read all %d events identically" % (mode, len(got)))
PY
}

# check_lost MODE: the writer's lost count ($T/gen.out), TraceEvent's ($T/traceevent.out) and
# pipeprof's agree (before: TraceEvent counted none lost before a capture thread's first event,
# and 537 for the late events of another capture thread).
check_lost() {
  local written te ours
  written=$(sed -n 's/^lost //p' "$T/gen.out")
  te=$(sed -n 's/^EventsLost //p' "$T/traceevent.out")
  ours=$("$B/bin/pipeprof" dump --format json --summary "$T/gen.nettrace" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["lost_events"])')
  if [[ -z $written || $written == 0 || $te != "$written" || $ours != "$written" ]]; then
    echo "FAIL ($1): lost events: the writer noted '$written', TraceEvent counts '$te', pipeprof dump '$ours'" >&2
    exit 1
  fi
  echo "dotnet-traceevent ($1): $written events lost, counted alike by TraceEvent and pipeprof"
}

"$B/tests/nt-gen" "$T/gen.nettrace" "$T/expected.jsonl" >"$T/gen.out"
timeout 180 dotnet "$out/app/traceevent-dump.dll" "$T/gen.nettrace" "$T/traceevent.jsonl" >"$T/traceevent.out"
check in-order
check_lost in-order

"$B/tests/nt-gen" --reorder "$T/gen.nettrace" "$T/expected.jsonl" >"$T/gen.out"
timeout 180 dotnet "$out/app/traceevent-dump.dll" "$T/gen.nettrace" "$T/traceevent.jsonl" >"$T/traceevent.out"
check by-time
check_lost by-time
