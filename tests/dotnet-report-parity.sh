#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-report-parity.sh - pipeprof on traces that the real .NET runtime recorded from a
# real .NET program (tests/dotnet/hotmethods: 3 of every 4 equal work units in Hot75, 1 in
# Cold25): once through the runtime's own file output (DOTNET_EnableEventPipe) and once with
# dotnet-trace where it is installed. Managed frames are named from the runtime's method events;
# `pipeprof report` must agree with TraceEvent (NuGet Microsoft.Diagnostics.Tracing.TraceEvent,
# through TraceLog) on the number of samples, on the top self methods (name and count) and on the
# inclusive samples of Hot75 and Cold25; `convert --format folded` and `pprof` carry the same
# totals. `pipeprof record -- dotnet app.dll` records mixed native and managed stacks and says so.
# Skips loudly without the .NET SDK or when TraceEvent cannot be restored.
set -euo pipefail
B=${PP_BINARY_DIR:?PP_BINARY_DIR is not set}
S=${PP_SOURCE_DIR:?PP_SOURCE_DIR is not set}
PIPEPROF=$B/bin/pipeprof
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
export PATH="$PATH:$HOME/.dotnet/tools"
skip() { echo "SKIP (loud): $*" >&2; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "# $*" >&2; }
command -v dotnet >/dev/null || skip "the .NET SDK (dotnet) is not installed"

out=$B/dotnet-report
# build PROJECT: builds tests/dotnet/PROJECT from a copy (nothing is written into the sources).
build() {
  local p=$1
  if [[ ! -f $out/$p/$p.dll || $S/tests/dotnet/$p/Program.cs -nt $out/$p/$p.dll ]]; then
    rm -rf "$out/src/$p" && mkdir -p "$out/src/$p"
    cp "$S/tests/dotnet/$p/"{"$p.csproj",Program.cs} "$out/src/$p/"
    if ! timeout 300 dotnet build -c Release -o "$out/$p" "$out/src/$p" >"$out/$p.build.log" 2>&1; then
      if grep -q "NU1101\|NU1102\|Unable to find package" "$out/$p.build.log"; then
        skip "a NuGet package of tests/dotnet/$p cannot be restored here"
      fi
      cat "$out/$p.build.log"
      fail "building tests/dotnet/$p"
    fi
  fi
}
mkdir -p "$out"
(
  flock 9
  build hotmethods
  build traceevent-samples
) 9>"$B/dotnet-report.lock"

T=$(mktemp -d /tmp/pp-dotnet-report.XXXXXX)
trap 'rm -rf "$T"' EXIT

# compare TRACE LABEL [mixed]: pipeprof's report against TraceEvent's reading of TRACE. With
# "mixed" (pipeprof's own samples of a .NET app), the self counts are compared for managed frames
# only: both name those from the runtime's events, while native frames are spelled by each tool
# its own way (pipeprof `libc.so!poll`, TraceEvent `libc.so.6!.poll`; a stripped library's
# internal function is `libcoreclr!0x6315b5` in pipeprof and unnamed in TraceEvent).
compare() {
  local trace=$1 label=$2 mixed=${3:-}
  timeout 180 dotnet "$out/traceevent-samples/traceevent-samples.dll" "$trace" "$T/$label.te.json" ||
    fail "$label: TraceEvent could not read the trace"
  "$PIPEPROF" report --format json --top 1000 "$trace" >"$T/$label.pp.json" ||
    fail "$label: pipeprof report failed"
  "$PIPEPROF" convert "$trace" --format folded -o "$T/$label.folded"
  python3 - "$T/$label.pp.json" "$T/$label.te.json" "$T/$label.folded" "$label" "$mixed" <<'PY'
import json, sys
pp = json.load(open(sys.argv[1]))
te = json.load(open(sys.argv[2]))
folded = sum(int(l.rsplit(" ", 1)[1]) for l in open(sys.argv[3]) if l.strip())
label = sys.argv[4]
if sys.argv[5] == "mixed":
    def managed(name):
        # the runtime names methods with their signature; this app's native frames are C
        module = name.split("!", 1)[0]
        return "(" in name and module != "" and not module.startswith("lib")
    te["top_self"] = [x for x in te["top_self"] if managed(x["function"])]
    pp["top_self"] = [x for x in pp["top_self"] if managed(x["function"])]
def fail(msg):
    print("FAIL: %s: %s" % (label, msg), file=sys.stderr)
    sys.exit(1)
if not pp["samples"] == te["samples"] == folded:
    fail("samples: pipeprof %d, TraceEvent %d, folded %d" % (pp["samples"], te["samples"], folded))
if pp["samples"] < 200:
    fail("only %d samples" % pp["samples"])
# The same top method, and the same self count for every method TraceEvent gives 5 or more
# (ties below that may be listed in another order).
ours = {x["function"]: x["self"] for x in pp["top_self"]}
# Code in no module the trace names and in no method (a stub the runtime made): TraceEvent
# names all of it "!", pipeprof each address "?!0x<address>" (a runtime-file trace had 6 such
# samples at one address, 1 of 2 -Werror runs at load 20; 2 in 1 of 6 runs more). Compared as
# the one sum TraceEvent gives.
unnamed = sum(x["self"] for x in pp["top_self"] if x["function"].startswith("?!0x"))
if unnamed:
    ours["!"] = unnamed
for x in te["top_self"][:3]:
    print("# top self: TraceEvent %6d, pipeprof %6d  %s" % (x["self"], ours.get(x["function"], 0), x["function"]),
          file=sys.stderr)
if pp["top_self"][0]["function"] != te["top_self"][0]["function"]:
    fail("top self method: pipeprof %s, TraceEvent %s" % (pp["top_self"][0]["function"], te["top_self"][0]["function"]))
for x in te["top_self"]:
    if x["self"] >= 5 and ours.get(x["function"]) != x["self"]:
        fail("%s: TraceEvent %d self samples, pipeprof %s" % (x["function"], x["self"], ours.get(x["function"])))
def total(rows, key, name):
    for r in rows:
        if r["function"].endswith(name):
            return r[key]
    return 0
# Both tools charge Hot75 and Cold25 (the callers of the shared Unit) the same samples. (Their
# ratio is the runtime sampler's business, not ours: its stacks through GC polls cut frames.)
for name in ("Program.Hot75()", "Program.Cold25()"):
    a, b = total(pp["top_total"], "total", name), total(te["top_total"], "total", name)
    print("# total %s: pipeprof %d, TraceEvent %d" % (name, a, b), file=sys.stderr)
    if a != b or a == 0:
        fail("%s: pipeprof %d samples, TraceEvent %d" % (name, a, b))
PY
  # pprof carries the same total (go tool pprof where it is installed)
  if command -v go >/dev/null; then
    "$PIPEPROF" convert "$trace" --format pprof -o "$T/$label.pb.gz"
    HOME=$T go tool pprof -raw "$T/$label.pb.gz" 2>/dev/null >"$T/$label.raw" || fail "$label: go tool pprof -raw"
    got=$(awk '/^Samples:/ {on=1; next} on && /^ *[0-9]+ +[0-9]+: / {s += $1} /^Locations/ {on=0} END {print s + 0}' "$T/$label.raw")
    [[ $got == $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"])' "$T/$label.pp.json") ]] ||
      fail "$label: go tool pprof counts $got samples"
  fi
  note "$label: pipeprof and TraceEvent agree"
}

# 1. The runtime's own file output, with rundown at exit.
DOTNET_EnableEventPipe=1 DOTNET_EventPipeOutputPath="$T/file.nettrace" \
  DOTNET_EventPipeConfig='Microsoft-DotNETCore-SampleProfiler:0:5,Microsoft-Windows-DotNETRuntime:0x10:5' \
  dotnet "$out/hotmethods/hotmethods.dll" 2 >"$T/file.out"
grep -q "^hot " "$T/file.out" || fail "hotmethods did not run"
compare "$T/file.nettrace" "runtime-file"

# 2. dotnet-trace, the way .NET users record (its default providers, rundown at stop).
if command -v dotnet-trace >/dev/null; then
  timeout 120 dotnet-trace collect -o "$T/dt.nettrace" --show-child-io -- \
    dotnet "$out/hotmethods/hotmethods.dll" 2 >"$T/dt.log" 2>&1 || { cat "$T/dt.log"; fail "dotnet-trace collect"; }
  compare "$T/dt.nettrace" "dotnet-trace"
else
  echo "SKIP (loud): dotnet-trace is not installed; only the runtime's file output was compared" >&2
fi
# 3. `pipeprof record -- dotnet app.dll`: the agent fronts the runtime (docs/dotnet-hosts.md):
# its samples hold native and managed frames, the runtime's rundown names the managed ones, and
# record says so; the app's output and status are its own. Wall mode, so that every sample
# TraceEvent counts is one pipeprof counts (CPU mode adds stackless not-running markers).
# A sanitizer build's runtime must come first in LD_PRELOAD (record appends the agent).
record_env=()
asan=$(ldd "$B/lib/libpipeprof.so" 2>/dev/null | awk '/libasan/ {print $3}')
[[ -n $asan ]] && record_env=(env "LD_PRELOAD=$asan" "ASAN_OPTIONS=detect_leaks=0")
set +e
"${record_env[@]}" "$PIPEPROF" record --mode wall -o "$T/rec.nettrace" -- dotnet "$out/hotmethods/hotmethods.dll" 2 \
  >"$T/rec.out" 2>"$T/rec.err"
st=$?
set -e
[[ $st == 0 ]] || { cat "$T/rec.err"; fail "record -- dotnet: status $st"; }
grep -q "^hot " "$T/rec.out" || fail "record -- dotnet: the app's output is missing"
grep -q "; 1 process recorded, 1 .NET app (native and managed frames merged)" "$T/rec.err" || { cat "$T/rec.err"; fail "record -- dotnet does not say what it recorded"; }
compare "$T/rec.nettrace" "pipeprof-record" mixed
echo "dotnet-report-parity: ok"
