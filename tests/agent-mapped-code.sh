#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/agent-mapped-code.sh - code in a file that no loader knows is named by that file and the
# offset in it. The .NET runtime maps the PE images of ReadyToRun assemblies itself, section by
# section, so their code is file-backed but in no ELF module: such frames came out as
# `?!0x7ffa354097c3` (between Deflater.Deflate and CompressionNative_Deflate, issue 19).
# pp-sample-mapped maps a file of its own the same way (headers at offset 0 read-only, a code page
# executable after them) and spends its time in a loop there: recorded with `pipeprof record`,
# at least 90 % of the samples must have the loop's frame, named pp-mapped-code!0x10NN (its
# offset from the image's first byte, as a PE's RVA), and no frame may be in no module.
source "$(dirname "$0")/ipc-lib.sh"

"${RECORD_ENV[@]}" "$PIPEPROF" record -q --hz 1000 -o "$T/mapped.nettrace" -- \
  "$B/samples/pp-sample-mapped" 2 "$T" >/dev/null || fail "record"
"$PIPEPROF" convert --format folded -o "$T/mapped.folded" "$T/mapped.nettrace" 2>/dev/null
python3 - "$T/mapped.folded" <<'PY' || fail "the mapped file's code is not named by its file and offset"
import re, sys
total = loop = 0
nowhere = []
for line in open(sys.argv[1]):
    stack, n = line.rsplit(" ", 1)
    n = int(n)
    total += n
    frames = stack.split(";")[1:]
    if any(re.fullmatch(r"pp-mapped-code!0x10[0-9a-f]{2}", f) for f in frames):
        loop += n
    nowhere += [f for f in frames if f.startswith("?!")]
print("agent-mapped-code: %d samples, %d in the mapped loop; frames in no module: %s"
      % (total, loop, sorted(set(nowhere))[:5] or "none"))
sys.exit(1 if total < 20 or loop < 0.9 * total or nowhere else 0)
PY
echo "agent-mapped-code: ok"
