#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tests/tools/processinfo.py SOCKET: sends ProcessInfo2 (command set 0x04, id 0x04) to a
# diagnostic socket and prints its answer as one JSON object: pid, command_line, os, arch,
# entrypoint (the managed entry assembly) and version (the runtime's product version). Exits 1
# with a message when the answer is an error or cannot be decoded
# (/work/shared/docs/ipc-protocol.md has the layout).
import json, socket, struct, sys

MAGIC = b"DOTNET_IPC_V1\0"


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            sys.exit("processinfo: the connection ended after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(MAGIC + struct.pack("<HBBH", 20, 0x04, 0x04, 0))
head = recv_exact(s, 20)
if head[:14] != MAGIC:
    sys.exit("processinfo: the answer does not start with the IPC magic")
size, cmdset, cmdid = struct.unpack_from("<HBB", head, 14)
body = recv_exact(s, size - 20)
if (cmdset, cmdid) != (0xFF, 0x00):
    sys.exit("processinfo: answer %#x/%#x (%s)" % (cmdset, cmdid, body.hex()))
pid = struct.unpack_from("<Q", body, 0)[0]
at = 8 + 16  # pid, runtime cookie (GUID)
fields = []
for _ in range(5):
    n = struct.unpack_from("<I", body, at)[0]  # UTF-16 code units, the NUL included
    fields.append(body[at + 4:at + 4 + 2 * n].decode("utf-16-le").rstrip("\0"))
    at += 4 + 2 * n
print(json.dumps(dict(zip(("command_line", "os", "arch", "entrypoint", "version"), fields), pid=pid)))
