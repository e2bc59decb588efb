#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/ipc-differential.sh - the same request bytes to a real .NET process and to a native
# process running pipeprof (LD_PRELOAD): every implemented command, then truncated, oversized,
# lying, wrong-magic, unknown-command and bad-payload requests. Response headers, error codes and
# payload layouts must match. Requests that crash the real runtime (10.0.12: an empty payload
# for CollectTracing2, GenerateCoreDump, AttachProfiler, SetEnvironmentVariable) or that it
# answers with garbage are sent to pipeprof only, with the answer the protocol calls for.
source "$(dirname "$0")/ipc-lib.sh"
APP=$(dotnet_app)
M=444F544E45545F4950435F563100 # the magic with its NUL
PROV="040000000200000041000000010000000000" # level 4, name "A", args ""

dotnet "$APP" 30 >"$T/app.out" & PP_PIDS+=($!); P=$!
LD_PRELOAD=$PRELOAD "$BUSY" 30 >"$T/busy.out" & PP_PIDS+=($!); Q=$!
wait_socket "$P" >/dev/null
wait_socket "$Q" >/dev/null

cases=(
  "processinfo|--cmd 4 0 --decode pi1"
  "processinfo2|--cmd 4 4 --decode pi2"
  "processinfo3|--cmd 4 8 --decode pi3"
  "resume|--cmd 4 1"
  "environment|--cmd 4 2 --decode env"
  "disable-perfmap|--cmd 4 6"
  "enable-perfmap-all|--hex ${M}18000405000001000000"
  "enable-perfmap-none|--hex ${M}18000405000000000000"
  "collect6-block|--hex ${M}500002070000000000000100000001000000000000000000000001010000000000000000000000${PROV}000000000001000000"
  "collect6-drop|--hex ${M}500002070000000000000100000001000000000000000000000001010000000000000000000000${PROV}000000000000000000"
  "collect2+disconnect-mid-stream|--collect --decode stream"
  "collect2+hold|--collect --hold-ms 300"
  "unknown-set|--cmd 7 0"
  "unknown-eventpipe-id|--cmd 2 9"
  "unknown-process-id|--cmd 4 0x20"
  "server-set-as-request|--cmd 0xff 0"
  "empty+eof|--shut"
  "truncated-header|--hex 444F54 --shut"
  "wrong-magic|--hex 444F544E45545F4950435F5632001400040000000000"
  "wrong-magic-garbage|--hex 00112233445566778899AABBCCDD1400AABB0000"
  "size-below-20|--hex ${M}0A00040000000000"
  "wrong-magic-size-below-20|--hex 444F544E45545F4950435F5632000A00040000000000"
  "size-lies-then-eof|--hex ${M}30000400000000AABBCCDD --shut"
  "size-65535-then-eof|--hex ${M}FFFF0400000000 --shut"
  "garbage-then-eof|--hex DEADBEEFDEADBEEFDEADBEEFDEADBEEFDEADBEEF0102 --shut"
  "collect2-buffer-0|--hex ${M}3B0002030000000000000100000001010000000000000000000000$PROV"
  "collect2-format-2|--hex ${M}3B0002030000010000000200000001010000000000000000000000$PROV"
  "collect2-level-6|--hex ${M}3B0002030000010000000100000001010000000000000000000000060000000200000041000000010000000000"
  "collect2-name-without-nul|--hex ${M}3B0002030000010000000100000001010000000000000000000000040000000200000041004100010000000000"
  "collect2-no-provider|--hex ${M}3B0002030000010000000100000001000000000000000000000000$PROV"
)
fails=0
for c in "${cases[@]}"; do
  name=${c%%|*}
  args=${c#*|}
  # shellcheck disable=SC2086
  a=$("$SEND" --pid "$P" $args --timeout 3000)
  # shellcheck disable=SC2086
  b=$("$SEND" --pid "$Q" $args --timeout 3000)
  if [[ $a == "$b" ]]; then
    echo "same  $name: $a"
  else
    echo "DIFF  $name: dotnet='$a' pipeprof='$b'"
    fails=$((fails + 1))
  fi
done
# connect-then-silence: neither answers (the runtime waits forever, pipeprof times out later)
a=$("$SEND" --pid "$P" --timeout 1000)
b=$("$SEND" --pid "$Q" --timeout 1000)
[[ $a == timeout && $b == timeout ]] || { echo "DIFF  silence: dotnet='$a' pipeprof='$b'"; fails=$((fails + 1)); }
kill -0 "$P" || fail "the .NET process died during the differential run"

# pipeprof only: requests the real runtime crashes on or answers with garbage
expect() { # name expected args...
  local name=$1 want=$2 got
  shift 2
  got=$("$SEND" --pid "$Q" "$@" --timeout 3000)
  if [[ $got == "$want" ]]; then echo "ok    $name (pipeprof only): $got"; else
    echo "BAD   $name (pipeprof only): got '$got', want '$want'"; fails=$((fails + 1)); fi
}
expect collect2-empty-payload "error size=24 hresult=0x80131384" --cmd 2 3
expect dump-empty-payload "error size=24 hresult=0x80131385" --cmd 1 1
expect profiler-empty-payload "error size=24 hresult=0x80131385" --cmd 3 1
expect setenv-empty-payload "error size=24 hresult=0x80131385" --cmd 4 3
expect stop-short-payload "error size=24 hresult=0x80131384" --hex "${M}18000201000001000000"
expect processinfo-extra-payload "pi1 pid=match cookie=nonzero cmd=nonempty os=Linux arch=x64" \
  --hex "${M}180004000000AABBCCDD" --decode pi1
expect stop-unknown-session "ok size=28 u64=nonzero" --hex "${M}1C00020100000100000000000000"
kill -0 "$Q" || fail "the pipeprof host died"
[[ $fails -eq 0 ]] || fail "$fails differences"
echo "ipc-differential: ok"
