#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tests/library-opens.py STRACE_LOG HOST - every file the library's threads open inside a host
# lands high or is held there under the fd gate (host/fds.c): reads an `strace -f -o` log of
# `pipeprof record ... -- HOST` (trace=openat,open,fcntl,close,clone,clone3,execve) and checks each
# open at a number below 768 made by a thread of HOST's process other than its main thread (the
# library's threads: HOST here starts no thread that opens a file). Such an open must be followed,
# on its thread and before anything else done with that fd, by its F_DUPFD_CLOEXEC to 768 or up
# (host_fd_take). The loader's opens of a library loaded on demand (ld.so.cache, *.so*) are made
# with the gate held (shim/lazy-deps.c, host_fds_hold) and closed at once: not counted. Before
# nettrace's writer stopped asking sysconf for the CPUs, the IPC loop thread opened
# /sys/devices/system/cpu/online at fd 3 at every session start, inside libc, and never moved it.
# Exit 1 with each such open listed; prints the counts.
import re
import sys

log, host = sys.argv[1], sys.argv[2]
LIBRARY_BASE = 768
pending, calls = {}, []
for line in open(log, errors="replace"):
    m = re.match(r"(\d+)\s+(.*)", line.rstrip("\n"))
    if not m:
        continue
    tid, rest = int(m.group(1)), m.group(2)
    if rest.endswith("<unfinished ...>"):
        pending[tid] = rest[: -len("<unfinished ...>")]
        continue
    r = re.match(r"<\.\.\. \w+ resumed>(.*)", rest)
    if r:
        rest = pending.pop(tid, "") + r.group(1)
    calls.append((tid, rest))

main, threads = None, set()
for tid, rest in calls:
    if main is None and rest.startswith("execve(") and ('"%s"' % host) in rest and rest.endswith("= 0"):
        main = tid
        threads.add(tid)
    elif tid in threads and re.match(r"clone3?\(", rest):
        m = re.search(r"= (\d+)$", rest)
        if m and "CLONE_THREAD" in rest:
            threads.add(int(m.group(1)))
if main is None:
    print("library-opens: no execve of %s in %s" % (host, log), file=sys.stderr)
    sys.exit(1)

moved = loader = 0
bad = []
for i, (tid, rest) in enumerate(calls):
    if tid == main or tid not in threads:
        continue
    m = re.match(r'open(?:at)?\((?:AT_FDCWD, )?"([^"]*)".*\)\s+= (\d+)$', rest)
    if not m or int(m.group(2)) >= LIBRARY_BASE:
        continue
    path, fd = m.group(1), int(m.group(2))
    if path == "/etc/ld.so.cache" or re.search(r"\.so(\.[0-9.]+)?$", path):
        loader += 1
        continue
    ok = False
    for tid2, r2 in calls[i + 1:]:
        if tid2 != tid or not re.match(r"\w+\(%d\b" % fd, r2):
            continue
        d = re.match(r"fcntl\(%d, F_DUPFD_CLOEXEC, (\d+)\s*\)" % fd, r2)
        ok = d is not None and int(d.group(1)) >= LIBRARY_BASE
        break
    if ok:
        moved += 1
    else:
        bad.append("thread %d: %s" % (tid, rest))
print("library-opens: %d opens on the library's threads moved high, %d of the loader's under the "
      "gate, %d left low" % (moved, loader, len(bad)))
for b in bad:
    print("  left low: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
