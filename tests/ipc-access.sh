#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/ipc-access.sh - another user cannot connect to a pipeprof host's socket (mode 0600, as
# the runtime's), while the owner can. Needs root and setpriv; skips loudly otherwise.
source "$(dirname "$0")/ipc-lib.sh"
[[ $(id -u) -eq 0 ]] || skip "needs root to run a client as nobody"
command -v setpriv >/dev/null || skip "setpriv is missing"
chmod 755 "$B" "$B/tests" 2>/dev/null || true

LD_PRELOAD=$PRELOAD "$BUSY" 4 >"$T/host.out" & PP_PIDS+=($!); Q=$!
SOCK=$(wait_socket "$Q")
[[ $(stat -c %a "$SOCK") == 600 ]] || fail "socket mode is $(stat -c %a "$SOCK"), not 600"
cp "$SEND" "$T/ipc-send" && chmod 755 "$T/ipc-send"
got=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$T/ipc-send" --path "$SOCK" --cmd 4 0 2>&1 || true)
[[ $got == noconnect ]] || fail "user nobody got '$got' instead of a refused connection"
[[ $("$SEND" --path "$SOCK" --cmd 4 1) == "ok size=24 i32=0" ]] || fail "the owner cannot connect"
wait "$Q"
echo "ipc-access: ok"
