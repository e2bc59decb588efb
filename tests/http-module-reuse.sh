#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/http-module-reuse.sh - an HTTP recording names each frame by the library that was mapped
# at the sample's time (issue 19), as tests/agent-module-reuse.sh holds `record` and `collect` to.
# pp-sample-modreuse runs 30 rounds of 100 ms of CPU in libpp-modreuse-a.so's pp_modreuse_a_burn
# and 100 ms in libpp-modreuse-b.so's pp_modreuse_b_burn, each library dlclose'd after its turn
# and the two mapped at one address (the host prints "same address", else this test says loudly
# it could not overlap them and skips). Recorded for 2 s by swift-profile-recorder's POST /sample
# (wall mode, perf script text) and by Go's /debug/pprof/profile (CPU mode, pprof): every frame in
# the two libraries must be named by a function of its own library and each library must have a
# third of their CPU samples (a tenth of the wall samples: below). Before, every frame was named
# by the library mapped at the recording's end: one function had every sample of both (wall
# mode: pp_modreuse_a_burn 992 of 992).
source "$(dirname "$0")/ipc-lib.sh"

HOSTBIN=$B/samples/pp-sample-modreuse
CHECK=$S/tests/tools/modreuse-check.py
[[ -x $HOSTBIN && -f $B/samples/libpp-modreuse-a.so && -f $B/samples/libpp-modreuse-b.so ]] ||
  fail "missing pp-sample-modreuse or its libraries"
command -v curl >/dev/null || skip "curl is not installed"
out=$("$HOSTBIN" 1 1 "$B/samples")
echo "# $out" >&2
[[ $out == *"same address"* ]] ||
  skip "the loader mapped libpp-modreuse-b.so elsewhere than where liba was (no overlap to test): $out"

# record NAME URL-PATH [CURL-ARGS...]: a host of 30 rounds, recorded from its socket's start.
record() {
  local name=$1 path=$2 sock=$T/$1.sock
  shift 2
  env LD_PRELOAD="$PRELOAD" PIPEPROF_SAMPLING_SERVER_URL="unix://$sock" \
    ${asan:+ASAN_OPTIONS=detect_leaks=0} "$HOSTBIN" 100 100 "$B/samples" 30 \
    >"$T/$name.out" 2>"$T/$name.err" &
  local host=$!
  PP_PIDS+=($host)
  for _ in $(seq 1200); do [[ -S $sock ]] && break; sleep 0.05; done # 60 s: a hang guard
  [[ -S $sock ]] || fail "$name: no sampling socket: $(cat "$T/$name.err")"
  code=$(curl -sS -o "$T/$name.body" -w '%{http_code}' --unix-socket "$sock" "$@" \
    "http://localhost$path")
  [[ $code == 200 ]] || fail "$name: HTTP $code: $(head -c 300 "$T/$name.body")"
  wait "$host" || fail "$name: the host exited with $?: $(cat "$T/$name.err")"
}

record wall /sample -d '{"numberOfSamples":1000,"timeInterval":"2 ms","format":"perf"}'
# The host's phases are CPU time, so in wall mode each library's share follows the machine's load
# (82 of 335 samples, 24 %, for liba in a fresh-clone CI's ASan stage at a load of 22); the
# failure this holds gave one library every sample. 0.1 keeps the two apart; CPU mode keeps 0.3.
python3 "$CHECK" wall "$T/wall.body" 0.1 --rounds ||
  fail "wall mode: frames not named by the library mapped at their time"

record cpu "/debug/pprof/profile?seconds=2&rate=500"
python3 "$S/tests/tools/pprof-folded.py" "$T/cpu.body" >"$T/cpu.folded" || fail "cpu: not pprof"
# The folded stacks have no time and no module: each library's function must have its share,
# and no frame of the two libraries may be an offset.
python3 - "$T/cpu.folded" <<'PY' || fail "CPU mode: frames not named by the library mapped at their time"
import re, sys
counts, bad = {"a": 0, "b": 0}, []
for line in open(sys.argv[1]):
    stack, n = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")
    for which in {m.group(1) for f in frames for m in [re.search(r"pp_modreuse_([ab])_burn", f)] if m}:
        counts[which] += int(n)
    bad += [f for f in frames if "modreuse" in f and re.search(r"0x[0-9a-f]+$", f)]
both = sum(counts.values())
print("cpu: pp_modreuse_a_burn %d, pp_modreuse_b_burn %d; offsets: %s"
      % (counts["a"], counts["b"], bad[:3] or "none"))
sys.exit(0 if both > 0 and min(counts.values()) >= 0.3 * both and not bad else 1)
PY
echo "http-module-reuse: ok"
