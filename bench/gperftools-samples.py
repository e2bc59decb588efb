#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# bench/gperftools-samples.py PROFILE - the samples in gperftools' legacy CPU profile: a header
# of 5 words, then records [count, depth, pcs...], up to the trailer [0, 1, 0]. Used by
# overhead.sh and sample-events.sh.
import struct
import sys

d = open(sys.argv[1], "rb").read()
off, n = 40, 0
while off + 16 <= len(d):
    cnt, depth = struct.unpack_from("<2Q", d, off)
    if cnt == 0 and depth == 1:
        break
    n += cnt
    off += 16 + 8 * depth
print(n)
