#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-host-forms.sh - issue 11: the ways a .NET app is started all get mixed stacks
# (docs/dotnet-hosts.md). The mixed app (tests/dotnet/mixed) runs with the agent preloaded as
# `dotnet mixed.dll`, as its apphost (`./mixed`), as a self-contained single-file executable
# (`dotnet publish -p:PublishSingleFile=true`: the runtime linked into a 70 MB executable), and
# as `dotnet mixed.dll` with PIPEPROF_DOTNET_HOST=0 (a host the detection misses: the runtime is
# found when it binds its socket), and as `dotnet mixed.dll` run as user nobody. For each: the process serves one public socket and the
# runtime's moved to pipeprof-runtime-PID-KEY-socket, ProcessInfo on the public one is the
# runtime's, and `pipeprof collect -p` (forwarded to the runtime and merged) gives stacks where
# libburn's burn_native sits under mixed!Program.BurnViaNative, named from the runtime's events.
# The single-file form skips loudly when the runtime packs cannot be restored here.
source "$(dirname "$0")/ipc-lib.sh"
[[ -z ${asan:-} ]] || skip "under a sanitizer the runtime would need the sanitizer preloaded first; run in the plain build"
APP=$(mixed_app)
APPDIR=$(dirname "$APP")

# The single-file form, published once per build directory.
SF=$B/dotnet-mixed-single/out/mixed
(
  flock 9
  if [[ ! -x $SF || $APP -nt $SF ]]; then
    rm -rf "$B/dotnet-mixed-single" && mkdir -p "$B/dotnet-mixed-single/src"
    cp "$S/tests/dotnet/mixed/mixed.csproj" "$S/tests/dotnet/mixed/Program.cs" "$B/dotnet-mixed-single/src/"
    if timeout 600 dotnet publish "$B/dotnet-mixed-single/src" -c Release -r linux-x64 --self-contained \
      -p:PublishSingleFile=true -o "$B/dotnet-mixed-single/out" >"$B/dotnet-mixed-single/publish.log" 2>&1; then
      cp "$APPDIR/libburn.so" "$B/dotnet-mixed-single/out/"
    else
      rm -f "$SF"
    fi
  fi
) 9>"$B/dotnet-mixed-single.lock"

failed=0
# form NAME ENV... -- CMD...: records CMD with the agent preloaded and checks it.
form() {
  local name=$1 envs=() pid sock rt n
  shift
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  # The app runs until its recording is done ($T/NAME.stop, 300 s at most), and the recording
  # until the app has burnt 0.4 s in burn_native (its --progress file; 100 samples at 250 Hz,
  # 120 s at most): a fixed 3 s held 18 samples at load 20 (1 of 3 -Werror runs), under the 20
  # asked for.
  env "${envs[@]}" PIPEPROF_MODE=cpu PIPEPROF_HZ=250 LD_PRELOAD="$PRELOAD" "$@" 300 \
    --until "$T/$name.stop" --progress "$T/$name.progress" >"$T/$name.out" 2>"$T/$name.err" &
  pid=$!
  PP_PIDS+=("$pid")
  sock=$(wait_socket "$pid")
  for _ in $(seq 600); do # 60 s: a loaded machine's runtime may start seconds late
    rt=$(ls "$TMPDIR"/pipeprof-runtime-"$pid"-*-socket 2>/dev/null || true)
    [[ -n $rt ]] && break
    sleep 0.1
  done
  local why=""
  n=$(ls "$TMPDIR"/dotnet-diagnostic-"$pid"-*-socket | wc -l)
  [[ $n == 1 ]] || why+=" $n public sockets;"
  [[ -S $rt ]] || why+=" the runtime's socket was not moved to pipeprof-runtime-$pid-*;"
  if python3 "$S/tests/tools/processinfo.py" "$sock" >"$T/$name.pi" 2>&1; then
    grep -q '"version": "10\.' "$T/$name.pi" && ! grep -q pipeprof "$T/$name.pi" ||
      why+=" ProcessInfo is not the runtime's: $(cat "$T/$name.pi");"
  else
    why+=" no ProcessInfo: $(cat "$T/$name.pi");"
  fi
  for _ in $(seq 600); do [[ -s $T/$name.progress ]] && break; sleep 0.1; done
  "$PIPEPROF" collect -p "$pid" -o "$T/$name.nettrace" >"$T/$name.collect" 2>&1 &
  local collect=$! p0 p start=$SECONDS
  PP_PIDS+=("$collect")
  # the progress file's last complete line's PINVOKE_NS (its third field)
  p0=$(tail -n 2 "$T/$name.progress" | head -n 1 | awk '{print $3 + 0}')
  sleep 1
  while :; do
    p=$(tail -n 2 "$T/$name.progress" | head -n 1 | awk '{print $3 + 0}')
    ((p - p0 >= 400000000 || SECONDS - start >= 120)) && break
    sleep 0.2
  done
  kill -INT "$collect" 2>/dev/null || true
  if wait "$collect"; then
    "$PIPEPROF" convert --format folded -o "$T/$name.folded" "$T/$name.nettrace" 2>/dev/null
    python3 - "$T/$name.folded" >"$T/$name.eval" 2>&1 <<'PY' || why+=" $(cat "$T/$name.eval");"
import sys
burn = under = 0
for line in open(sys.argv[1]):
    stack, n = line.rsplit(" ", 1)
    frames = stack.split(";")
    hits = [i for i, f in enumerate(frames) if f.endswith("!burn_native")]
    if hits:
        burn += int(n)
        under += int(n) * any(f.startswith("mixed!Program.BurnViaNative(") for f in frames[:hits[0]])
print("burn_native %d samples, %d under mixed!Program.BurnViaNative" % (burn, under))
sys.exit(0 if burn >= 20 and under >= 0.9 * burn else 1)
PY
  else
    why+=" pipeprof collect -p failed: $(tail -2 "$T/$name.collect");"
  fi
  touch "$T/$name.stop"
  wait "$pid" || why+=" the app failed: $(tail -2 "$T/$name.err");"
  if [[ -n $why ]]; then
    echo "FAIL $name:$why" >&2
    failed=1
  else
    note "$name: one public socket, the runtime's aside, its ProcessInfo; $(cat "$T/$name.eval")"
  fi
}

form dotnet -- dotnet "$APP"
form apphost -- "$APPDIR/mixed"
form undetected PIPEPROF_DOTNET_HOST=0 -- dotnet "$APP"
# As an ordinary user: nothing the agent does needs a privilege (the perf engine runs at the
# default perf_event_paranoid, the sockets are the user's own).
if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1 &&
  setpriv --reuid=nobody --regid=nogroup --clear-groups test -r "$APP"; then
  chmod 1777 "$T"
  form nobody HOME="$T" -- setpriv --reuid=nobody --regid=nogroup --clear-groups dotnet "$APP"
  chmod 755 "$T"
else
  echo "SKIP (loud): the form as user nobody needs root, setpriv and an app nobody can read" >&2
fi
if [[ -x $SF ]]; then
  form single-file DOTNET_BUNDLE_EXTRACT_BASE_DIR="$T/bundle" -- "$SF"
else
  tail -5 "$B/dotnet-mixed-single/publish.log" >&2
  echo "SKIP (loud): the single-file form: dotnet publish -p:PublishSingleFile=true failed here (runtime packs from NuGet)" >&2
fi
[[ $failed == 0 ]] || fail "host forms"
echo "dotnet-host-forms: ok"
