#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tests/tools/pprof-folded.py [--threads] PROFILE.pb.gz [SAMPLE_INDEX]: a pprof profile (gzipped protobuf,
# github.com/google/pprof's profile.proto) as folded stacks, "root;...;leaf COUNT" per line, the
# count being the samples' value at SAMPLE_INDEX (default 0, pipeprof's "samples"), each frame
# "module!function" as pipeprof's folded output names it. Reads the wire format itself (no
# protobuf package): Profile's sample (2), mapping (3), location (4), function (5) and
# string_table (6); a location is named by its first line's function and its mapping's file.
# --threads: each stack under its sample's "thread" label ("name (tid)"), the root pipeprof's
# folded output gives it, which groundtruth-eval.py reads as the thread's.
import collections, gzip, sys


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    """(field number, value) of one message: ints for varints, bytes for length-delimited."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif wt == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        else:
            sys.exit("pprof-folded: wire type %d" % wt)
        yield num, v


def ints(v):
    """A repeated integer field: one varint, or a packed run of them."""
    if isinstance(v, int):
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


args = sys.argv[1:]
threads = "--threads" in args
if threads:
    args.remove("--threads")
data = gzip.open(args[0]).read()
index = int(args[1]) if len(args) > 1 else 0
samples, locations, functions, mappings, strings = [], {}, {}, {}, []
for num, v in fields(data):
    if num == 2:
        locs, vals, thread = [], [], None
        for n, x in fields(v):
            if n == 3:
                label = dict(fields(x))
                if label.get(2):  # a string label: key (1) and str (2), indexes of string_table
                    thread = thread or (label[1], label[2])
            elif n == 1:
                locs += ints(x)
            elif n == 2:
                vals += ints(x)
        samples.append((locs, vals, thread))
    elif num == 3:
        m = dict(fields(v))
        mappings[m.get(1, 0)] = m.get(5, 0)
    elif num == 4:
        lid, mid, fid = 0, 0, 0
        for n, x in fields(v):
            if n == 1:
                lid = x
            elif n == 2:
                mid = x
            elif n == 4 and fid == 0:
                fid = dict(fields(x)).get(1, 0)
        locations[lid] = (mid, fid)
    elif num == 5:
        f = dict(fields(v))
        functions[f.get(1, 0)] = f.get(2, 0)
    elif num == 6:
        strings.append(v.decode("utf-8", "replace"))


def name(loc):
    mid, fid = locations.get(loc, (0, 0))
    module = strings[mappings.get(mid, 0)].rsplit("/", 1)[-1] or "?"
    return "%s!%s" % (module, strings[functions.get(fid, 0)] or "?")


folded = collections.Counter()
for locs, vals, thread in samples:
    names = [name(l) for l in reversed(locs)]
    if threads:
        names.insert(0, strings[thread[1]] if thread and strings[thread[0]] == "thread" else "?")
    folded[";".join(names)] += vals[index] if index < len(vals) else 0
for stack, n in folded.items():
    print("%s %d" % (stack, n))
