#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-r2r-frames.sh - ReadyToRun code is named by its image. The .NET runtime maps the PE
# images of ReadyToRun assemblies itself, so a frame in one lies in a file-backed mapping the
# loader does not know: between Deflater.Deflate and CompressionNative_Deflate such a frame came
# out as `?!0x7ffa354097c3` (issue 19). `pipeprof record` of tests/dotnet/compress (DeflateStream
# in a loop, 3 s at 1000 Hz): every frame between a System.IO.Compression frame and the native
# library under it must name its module (System.IO.Compression!0x97c3 and the like), and there
# must be such stacks.
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
sys.exit(0 if crossing >= 5 and unnamed == 0 else 1)
PY
echo "dotnet-r2r-frames: ok"
