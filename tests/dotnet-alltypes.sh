#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-alltypes.sh - the real .NET runtime writes a trace of an EventSource with every
# field type (tests/dotnet/alltypes, run with DOTNET_EnableEventPipe=1), and `pipeprof dump
# --format json` must give back exactly what the app wrote: every event, in order, with every
# field's name and value (integers at their limits, floats bit for bit, strings with non-BMP
# characters, GUID, DateTime, enum, opcode Start/Stop, nested objects). Events whose fields the
# runtime does not describe in the metadata (byte[], TraceLogging arrays) are checked byte for
# byte against the layout EventSource writes. Skips loudly without the .NET SDK.
set -euo pipefail
B=${PP_BINARY_DIR:?PP_BINARY_DIR is not set}
S=${PP_SOURCE_DIR:?PP_SOURCE_DIR is not set}
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
command -v dotnet >/dev/null || { echo "SKIP (loud): the .NET SDK (dotnet) is not installed" >&2; exit 77; }

out=$B/dotnet-alltypes
(
  flock 9
  if [[ ! -f $out/app/alltypes.dll || $S/tests/dotnet/alltypes/Program.cs -nt $out/app/alltypes.dll ]]; then
    rm -rf "$out/src" && mkdir -p "$out/src"
    cp "$S"/tests/dotnet/alltypes/{alltypes.csproj,Program.cs} "$out/src/"
    timeout 300 dotnet build -c Release -o "$out/app" "$out/src" >"$out/build.log" 2>&1 ||
      { cat "$out/build.log"; echo "FAIL: building tests/dotnet/alltypes" >&2; exit 1; }
  fi
) 9>"$B/dotnet-alltypes.lock"

T=$(mktemp -d /tmp/pp-alltypes.XXXXXX)
trap 'rm -rf "$T"' EXIT
DOTNET_EnableEventPipe=1 DOTNET_EventPipeOutputPath="$T/alltypes.nettrace" \
DOTNET_EventPipeConfig='Pipeprof-Test-AllTypes:0xFFFFFFFFFFFFFFFF:5,Pipeprof-Test-SelfDescribing:0xFFFFFFFFFFFFFFFF:5' \
  timeout 120 dotnet "$out/app/alltypes.dll" "$T/expected.json"
"$B/bin/pipeprof" dump --format json "$T/alltypes.nettrace" >"$T/dump.jsonl"

python3 - "$T/expected.json" "$T/dump.jsonl" <<'PY'
import json, struct, sys

expected = json.load(open(sys.argv[1]))
events = [json.loads(l) for l in open(sys.argv[2])]
ours = [e for e in events if e["provider"].startswith("Pipeprof-Test-")]

def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)

def f32(x):
    return struct.unpack("<f", struct.pack("<f", float(x)))[0]

def same(name, want, got):
    if isinstance(want, float) or isinstance(got, float):
        # float fields: bit-exact after rounding both to the field's width
        return float(want) == float(got) or f32(want) == f32(got) and name in ("f32",)
    if isinstance(want, dict):
        return isinstance(got, dict) and want.keys() == got.keys() and all(
            same(k, want[k], got[k]) for k in want)
    if isinstance(want, list):
        return isinstance(got, list) and len(want) == len(got) and all(
            same(name, a, b) for a, b in zip(want, got))
    return want == got

def raw(e):
    """The payload EventSource writes for the events the runtime leaves undescribed."""
    f = e["fields"]
    if e["name"] == "Bytes":
        return struct.pack("<i", len(f["bytes"])) + bytes(f["bytes"]) + struct.pack("<i", f["after"])
    if e["name"] == "Arrays":
        out = b""
        for key, code in (("ints", "i"), ("longs", "q"), ("doubles", "d")):
            out += struct.pack("<H", len(f[key])) + struct.pack("<%d%s" % (len(f[key]), code), *f[key])
        return out
    return None

if len(ours) != len(expected):
    fail("%d events in the trace, %d emitted" % (len(ours), len(expected)))
for i, (want, got) in enumerate(zip(expected, ours)):
    if want["name"] != got["name"]:
        fail("event %d: name %r, expected %r" % (i, got["name"], want["name"]))
    blob = raw(want)
    if blob is not None:
        if got.get("payload_hex") != blob.hex():
            fail("event %d (%s): payload %s, expected %s" % (i, want["name"], got.get("payload_hex"), blob.hex()))
        continue
    fields = got["fields"]
    # A TraceLogging event's members sit in one unnamed object; TraceEvent shows them flat too.
    if list(fields.keys()) == [""] and isinstance(fields[""], dict):
        fields = fields[""]
    if not same("", want["fields"], fields):
        fail("event %d (%s): fields %r, expected %r" % (i, want["name"], fields, want["fields"]))
# f32 fields must match as singles exactly, and the app's shortest form must parse to them.
for want, got in zip(expected, ours):
    if want["name"] == "Floats" and f32(want["fields"]["f32"]) != f32(got["fields"]["f32"]):
        fail("f32 %r != %r" % (got["fields"]["f32"], want["fields"]["f32"]))
print("dotnet-alltypes: %d events, every field equal" % len(ours))
PY
