#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-mixed-stacks.sh - issue 11 (docs/dotnet-hosts.md), through pipeprof's own tools:
# in a real .NET 10 process, the agent's samples walk from native code called by P/Invoke
# through the JIT's frames into the runtime and down to main, with no stitching, and pipeprof's
# `convert` names the managed frames from the runtime's events merged into the trace. The mixed
# app (tests/dotnet/mixed: C# + libburn.so built -O2 without frame pointers) is recorded through
# PIPEPROF_DIAGNOSTIC_PORT with `pipeprof collect --socket` (the runtime keeps its default name
# then, and the agent's sessions still merge the runtime's); at least 90 % of the main thread's
# samples in burn_native must have mixed!Program.BurnViaNative and Program.Main above it and
# reach libcoreclr's coreclr_execute_assembly, and the native thread's samples must be whole
# down to native_thread_main. tests/dotnet-mixed-dotnettrace.sh does the same through
# dotnet-trace and TraceEvent. Skips loudly without the .NET SDK.
source "$(dirname "$0")/ipc-lib.sh"
command -v dotnet >/dev/null || skip "the .NET SDK (dotnet) is not installed"
[[ -z ${asan:-} ]] || skip "under a sanitizer the runtime would need the sanitizer preloaded first; run in the plain build"

APP=$(mixed_app)

sock=$T/agent.sock
PIPEPROF_DIAGNOSTIC_PORT=$sock LD_PRELOAD=$PRELOAD dotnet "$APP" 6 >"$T/app.out" 2>"$T/app.err" &
app=$!
PP_PIDS+=($app)
for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
[[ -S $sock ]] || fail "the agent's socket did not appear"
sleep 0.5 # the app's loop has started
"$PIPEPROF" collect --socket "$sock" \
  --providers 'Microsoft-DotNETCore-SampleProfiler:0:4:mode=cpu;hz=250,pipeprof:0:4' \
  --duration 2 -o "$T/mixed.nettrace" >"$T/collect.log" 2>&1 || { cat "$T/collect.log"; fail "collect"; }
"$PIPEPROF" convert --format folded -o "$T/mixed.folded" "$T/mixed.nettrace"
python3 - "$T/mixed.folded" <<'PY' || fail "mixed stacks"
import sys
pinvoke = jit = runtime = native = native_whole = 0
for line in open(sys.argv[1]):
    stack, n = line.rsplit(" ", 1)
    n = int(n)
    frames = stack.split(";")
    if any("native_thread_work" in f for f in frames):
        native += n
        native_whole += n * any("native_thread_main" in f for f in frames)
        continue
    hits = [i for i, f in enumerate(frames) if f.endswith("!burn_native")]
    if not hits:
        continue
    callers = frames[:hits[0]]  # root first: everything above burn_native
    pinvoke += n
    # the JIT's frames, named by the runtime's rundown in the same trace
    jit += n * (any(f.startswith("mixed!Program.BurnViaNative(") for f in callers) and
                any(f.startswith("mixed!Program.Main(") for f in callers))
    runtime += n * any("coreclr_execute_assembly" in f for f in callers)
print("# burn_native: %d samples, %d under Main -> BurnViaNative, %d reaching "
      "coreclr_execute_assembly; native thread: %d samples, %d whole"
      % (pinvoke, jit, runtime, native, native_whole), file=sys.stderr)
bad = []
if pinvoke < 50:
    bad.append("only %d samples in burn_native" % pinvoke)
elif jit < 0.9 * pinvoke or runtime < 0.9 * pinvoke:
    bad.append("too few walks through the named JIT frames")
if native < 50 or native_whole < 0.9 * native:
    bad.append("native thread: %d of %d whole" % (native_whole, native))
if bad:
    print("FAIL: " + "; ".join(bad), file=sys.stderr)
    sys.exit(1)
PY
wait "$app" || fail "the app failed"
[[ $(cat "$T/app.out") == "mixed: ManagedSpin, BurnViaNative and native_thread_work ran" ]] ||
  { cat "$T/app.out" "$T/app.err"; fail "the app's output changed"; }
echo "dotnet-mixed-stacks: ok"
