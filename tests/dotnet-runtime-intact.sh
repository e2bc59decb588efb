#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet-runtime-intact.sh - issue 11: with the agent preloaded (nothing but LD_PRELOAD), a
# .NET app and its runtime look to the .NET tools exactly as without it. The mixed app
# (tests/dotnet/mixed) runs twice side by side, bare and with the agent, with the same arguments
# and exit status 3:
#   - the agent's run exits 3 and prints the same stdout as the bare run;
#   - `dotnet-trace ps` and `pipeprof ps` list its pid exactly once;
#   - every dotnet-diagnostic-PID-*-socket of the pid answers ProcessInfo2
#     (tests/tools/processinfo.py) as the bare runtime does: the same command line, entry
#     assembly, OS, architecture and runtime version (10.x, no "+pipeprof");
#   - `dotnet-trace collect -p PID --providers Pipeprof-Test-Mixed` (3 s) receives the app's own
#     EventSource events, none lost: their Count runs without a gap, and the ticks received span
#     the session (the app's --progress file says when each tick was written).
# Skips loudly without the .NET SDK, dotnet-trace or the NuGet packages.
source "$(dirname "$0")/ipc-lib.sh"
mixed_setup
bad=()

# Both run until the collection below is done ($T/stop), 300 s at most: with a fixed 7 s, a loaded
# machine's dotnet-trace start-ups used them up and the app had exited when the collection
# began (dotnet-trace: Broken pipe, CI-like run at load 20).
# Each writes its progress (below) in its own directory, under the same relative name: the
# command lines must be the same.
args=(300 --until "$T/stop" --exit 3 --progress progress)
mkdir "$T/bare" "$T/agent"
(cd "$T/bare" && exec dotnet "$APP" "${args[@]}") >"$T/bare.out" 2>"$T/bare.err" &
bare=$!
PP_PIDS+=($bare)
(cd "$T/agent" && LD_PRELOAD=$PRELOAD exec dotnet "$APP" "${args[@]}") >"$T/agent.out" 2>"$T/agent.err" &
app=$!
PP_PIDS+=($app)
wait_socket "$bare" >/dev/null
wait_socket "$app" >/dev/null
# Both runtimes' servers are up once the apps' Main runs (the runtime starts its server before
# it): their first progress rows, not a fixed second a loaded machine's start-ups outlast.
wait_until 120 "the bare app's first progress row" test -s "$T/bare/progress"
wait_until 120 "the agent's app's first progress row" test -s "$T/agent/progress"

# ps: the pid once.
dotnet_trace_ps "$T/dt-ps.out" || { cat "$T/dt-ps.out"; fail "dotnet-trace ps"; }
"$PIPEPROF" ps >"$T/pp-ps.out" 2>&1 || { cat "$T/pp-ps.out"; fail "pipeprof ps"; }
for tool in dt-ps pp-ps; do
  n=$(grep -cE "^ *$app( |$)" "$T/$tool.out" || true)
  note "${tool%-ps} ps: pid $app listed $n time(s)"
  [[ $n == 1 ]] || { cat "$T/$tool.out" >&2; bad+=("${tool/dt-/dotnet-trace }: pid $app listed $n times, not once"); }
done

# ProcessInfo: every public socket of the pid answers as the bare runtime does.
ref=$(ls "$TMPDIR"/dotnet-diagnostic-"$bare"-*-socket | head -1)
python3 "$S/tests/tools/processinfo.py" "$ref" >"$T/bare.pi" || fail "ProcessInfo of the bare app"
note "bare runtime: $(cat "$T/bare.pi")"
python3 - "$T/bare.pi" <<'PY' || fail "the bare runtime's ProcessInfo is not what this test expects"
import json, re, sys
pi = json.load(open(sys.argv[1]))
sys.exit(0 if re.match(r"10\.", pi["version"]) and "mixed.dll" in pi["command_line"] else 1)
PY
for sock in "$TMPDIR"/dotnet-diagnostic-"$app"-*-socket; do
  if ! python3 "$S/tests/tools/processinfo.py" "$sock" >"$T/agent.pi" 2>&1; then
    bad+=("${sock##*/}: no ProcessInfo answer ($(cat "$T/agent.pi"))")
    continue
  fi
  note "${sock##*/}: $(cat "$T/agent.pi")"
  why=$(python3 - "$T/bare.pi" "$T/agent.pi" <<'PY'
import json, sys
want, got = (json.load(open(f)) for f in sys.argv[1:3])
diff = ["%s %r (the runtime: %r)" % (k, got.get(k), want[k]) for k in want if k != "pid" and got.get(k) != want[k]]
if "pipeprof" in got.get("version", ""):
    diff.append("a pipeprof version")
print(", ".join(diff))
PY
  )
  [[ -z $why ]] || bad+=("${sock##*/} answers ProcessInfo with $why")
done

# The app's own EventSource through dotnet-trace.
timeout 60 "$DT" collect -p "$app" --providers Pipeprof-Test-Mixed --duration 00:00:00:03 -o "$T/ticks.nettrace" \
  >"$T/collect.log" 2>&1 || { cat "$T/collect.log"; fail "dotnet-trace collect -p --providers Pipeprof-Test-Mixed"; }
touch "$T/stop"
grep -q "Trace completed" "$T/collect.log" || { cat "$T/collect.log"; fail "dotnet-trace collect: no trace"; }
timeout 300 dotnet "$CHECK" "$T/ticks.nettrace" "$T/ticks.json" "$T/ticks.etlx" >"$T/check.log" 2>&1 ||
  { cat "$T/check.log"; fail "TraceEvent cannot read the trace"; }

# Exit status and stdout.
rc=0
wait "$app" || rc=$?
[[ $rc == 3 ]] || bad+=("the app exited with $rc under the agent, 3 bare")
# Once the app has exited (its last progress row written), the ticks received must span the
# session, 3 s by dotnet-trace's clock: the app's progress row n is written right after tick n
# (row 0 before the first), so rows first-1 and last+1 were written before and after the ticks
# received; a tick lost at either end shortens the span by a tick's interval. Not a count of
# ticks in 3 s: at load 30 the app's ticker wrote 9 (1 of 5 runs), 300 ms apart, none lost.
why=$(python3 - "$T/ticks.json" "$T/agent/progress" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["ticks"]
rows = [int(l.split()[0]) for l in open(sys.argv[2]) if l.strip()]
span = (rows[t["last"] + 1] - rows[t["first"] - 1]) / 1e9 if 1 <= t["first"] <= t["last"] < len(rows) - 1 else 0
print("# Tick events: %d, Count %d..%d, spanning %.2f s (rows %d)" % (t["count"], t["first"], t["last"], span, len(rows)), file=sys.stderr)
if t["count"] == 0:
    print("no Tick events")
elif t["last"] - t["first"] + 1 != t["count"]:
    print("Tick Count %d..%d in %d events: some lost or repeated" % (t["first"], t["last"], t["count"]))
elif span < 3.0:
    print("Ticks %d..%d span %.2f s, less than the 3 s session: the first or last ones lost" % (t["first"], t["last"], span))
PY
)
[[ -z $why ]] || bad+=("collect --providers Pipeprof-Test-Mixed: $why")
rc=0
wait "$bare" || rc=$?
[[ $rc == 3 ]] || { cat "$T/bare.err"; fail "the bare app exited with $rc, not 3"; }
cmp -s "$T/bare.out" "$T/agent.out" ||
  bad+=("stdout differs from the bare run's: $(diff "$T/bare.out" "$T/agent.out" | head -5 | tr '\n' ' ')")

if ((${#bad[@]})); then
  printf 'FAIL: %s\n' "${bad[@]}" >&2
  fail "${#bad[@]} differences from the bare runtime"
fi
echo "dotnet-runtime-intact: ok"
