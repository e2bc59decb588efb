#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-r2r-frames.sh - ReadyToRun code is named by its image. The .NET runtime maps the PE
# images of ReadyToRun assemblies itself, so a frame in one lies in a file-backed mapping the
# loader does not know: between Deflater.Deflate and CompressionNative_Deflate such a frame came
# out as `?!0x7ffa354097c3` (issue 19). `pipeprof record` of tests/dotnet/compress (DeflateStream
# in a loop, 3 s at 1000 Hz): every frame between a System.IO.Compression frame and the native
# library under it must name its module (System.IO.Compression!0x97c3 and the like), and there
# must be such stacks. The same in TraceEvent's view (`dotnet-trace convert --format speedscope`),
# which does not read pipeprof's module events: pipeprof's rundown names such a frame by file and
# offset (System.IO.Compression!.0x97c2) after the runtime's rundown, so no frame between is
# `?!?`, and the methods the runtime names in the image (Deflater.Deflate) keep their names in
# both readers.
source "$(dirname "$0")/ipc-lib.sh"
[[ -z ${asan:-} ]] || skip "under a sanitizer the runtime would need the sanitizer preloaded first; run in the plain build"
APP=$(dotnet_project compress)

"$PIPEPROF" record -q --hz 1000 -o "$T/compress.nettrace" -- dotnet "$APP" 3 >"$T/app.out" ||
  fail "record"
grep -q "compress: ran" "$T/app.out" || { cat "$T/app.out"; fail "the app did not run"; }
"$PIPEPROF" convert --format folded -o "$T/compress.folded" "$T/compress.nettrace"
python3 - "$T/compress.folded" <<'PY' || fail "R2R frames"
import sys
crossing = unnamed = 0
seen = set()
for line in open(sys.argv[1]):
    stack, n = line.rsplit(" ", 1)
    frames = stack.split(";")
    managed = [i for i, f in enumerate(frames) if f.startswith("System.IO.Compression!")]
    native = [i for i, f in enumerate(frames) if f.startswith("libSystem.IO.Compression.Native!")]
    if not managed or not native or native[0] < managed[0]:
        continue
    crossing += int(n)
    between = frames[managed[0]:native[0]]
    bad = [f for f in between if f.startswith("?!")]
    unnamed += int(n) * bool(bad)
    seen.update(bad)
print("# %d samples from System.IO.Compression into its native library, %d with a frame of no "
      "module between: %s" % (crossing, unnamed, sorted(seen)[:5] or "none"), file=sys.stderr)
deflate = any("Deflater.Deflate(" in l for l in open(sys.argv[1]))
print("# the runtime's name of Deflater.Deflate: %s" % ("kept" if deflate else "missing"),
      file=sys.stderr)
sys.exit(0 if crossing >= 5 and unnamed == 0 and deflate else 1)
PY

DT=$(command -v dotnet-trace || true)
if [[ -z $DT ]]; then
  echo "SKIP (loud): dotnet-trace is not installed; TraceEvent's names not checked" >&2
  echo "dotnet-r2r-frames: ok"
  exit 0
fi
timeout 180 "$DT" convert --format speedscope -o "$T/compress.speedscope.json" "$T/compress.nettrace" \
  >"$T/convert.log" 2>&1 || { cat "$T/convert.log"; fail "dotnet-trace convert"; }
python3 - "$(ls "$T"/compress.speedscope*.json | head -1)" <<'PY' || fail "R2R frames in TraceEvent's view"
import json, sys
d = json.load(open(sys.argv[1]))
names = [f["name"] for f in d["shared"]["frames"]]
crossing = unnamed = 0
deflate = False
for p in d["profiles"]:
    stack = []
    for e in p["events"]:
        if e["type"] != "O":
            stack.pop()
            continue
        stack.append(names[e["frame"]])
        deflate = deflate or "Deflater.Deflate(" in stack[-1]
        if not stack[-1].lower().startswith("libsystem.io.compression.native"):
            continue
        managed = [i for i, f in enumerate(stack) if f.startswith("System.IO.Compression!")]
        if not managed or any(f.lower().startswith("libsystem.io.compression.native")
                              for f in stack[managed[0]:-1]):
            continue  # not the first native frame under the managed ones
        crossing += 1
        unnamed += any(f == "?!?" for f in stack[managed[0]:])
print("# TraceEvent: %d stacks from System.IO.Compression into its native library, %d with an "
      "unnamed frame (?!?) between; the runtime's Deflater.Deflate %s" %
      (crossing, unnamed, "kept" if deflate else "missing"), file=sys.stderr)
sys.exit(0 if crossing >= 5 and unnamed == 0 and deflate else 1)
PY
echo "dotnet-r2r-frames: ok"
