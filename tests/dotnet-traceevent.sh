#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-traceevent.sh - TraceEvent (NuGet Microsoft.Diagnostics.Tracing.TraceEvent,
# through TraceLog as PerfView and dotnet-trace use it) reads a trace that pipeprof's writer
# wrote (tests/tools/nt-gen.c): every event, its provider, id, name, thread, fields and stack
# must be identical to what the writer was given. Skips loudly without the .NET SDK or when
# the package cannot be restored.
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
"$B/tests/nt-gen" "$T/gen.nettrace" "$T/expected.jsonl"
timeout 180 dotnet "$out/app/traceevent-dump.dll" "$T/gen.nettrace" "$T/traceevent.jsonl"

python3 - "$T/expected.jsonl" "$T/traceevent.jsonl" <<'PY'
import json, sys
want = [json.loads(l) for l in open(sys.argv[1])]
got = [json.loads(l) for l in open(sys.argv[2])]
ours = {"Pipeprof-Test-Gen", "Microsoft-DotNETCore-SampleProfiler"}
got = [e for e in got if e["provider"] in ours]
if len(got) != len(want):
    print("FAIL: TraceEvent read %d events, the writer wrote %d" % (len(got), len(want)), file=sys.stderr)
    sys.exit(1)
for i, (w, g) in enumerate(zip(want, got)):
    if w != g:
        print("FAIL: event %d differs:\n  written: %s\n  read:    %s" % (i, w, g), file=sys.stderr)
        sys.exit(1)
print("dotnet-traceevent: TraceEvent read all %d events identically" % len(got))
PY
