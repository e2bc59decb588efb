#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/profile-consumers-pprof-perf.sh - the pprof and perf writers as their real readers see
# them. Profiles: the sample workload recorded live (LD_PRELOAD agent, `pipeprof collect`) and the
# shared .NET fixtures (../shared/fixtures/nettrace, skipped loudly when absent). For each one:
#   - `go tool pprof` reads `pipeprof convert --format pprof`, with the total sample count and the
#     top self function of `pipeprof report --format json`;
#   - the perf text has the shape of `perf script` (header, `\tADDR FUNCTION (MODULE)` frames,
#     blank line), one record per sample, and the same stacks as `pipeprof convert --format
#     folded`, read back by our own parser;
#   - FlameGraph's stackcollapse-perf.pl (on PATH or in $FLAMEGRAPH_DIR) folds it into the same
#     stacks and counts as our folded output, modulo the root frame (thread label vs COMM), the
#     module prefix, and the tidying stackcollapse-perf.pl applies to function names.
# go missing: everything else runs, then the test skips (77) loudly. stackcollapse-perf.pl missing
# (no Debian or npm package ships it): a loud note; the schema and parser checks still run.
source "$(dirname "$0")/ipc-lib.sh"
WORKLOAD=$B/samples/pp-sample-workload
[[ -x $WORKLOAD ]] || fail "missing $WORKLOAD"

GO=$(command -v go || true)
COLLAPSE=$(command -v stackcollapse-perf.pl || true)
if [[ -z $COLLAPSE && -n ${FLAMEGRAPH_DIR:-} && -f $FLAMEGRAPH_DIR/stackcollapse-perf.pl ]]; then
  COLLAPSE=$FLAMEGRAPH_DIR/stackcollapse-perf.pl
fi
[[ -n $COLLAPSE ]] || echo "SKIP (loud): FlameGraph's stackcollapse-perf.pl is not installed (set" \
  "FLAMEGRAPH_DIR or put it on PATH): perf output is checked by schema and by our own parser only" >&2
[[ -n $GO ]] || echo "SKIP (loud): go is not installed (apt-get install golang-go): the" \
  "go tool pprof checks do not run" >&2

# json_get FILE PYTHON-EXPR: evaluates EXPR with r = the report's JSON.
json_get() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

# check_pprof NAME TRACE: go tool pprof reads the pprof file; totals and the top self function
# agree with `pipeprof report`.
check_pprof() {
  local name=$1 trace=$2 out=$T/$1
  "$PIPEPROF" convert --format pprof -o "$out.pb.gz" "$trace" || fail "$name: convert --format pprof"
  [[ $(head -c 2 "$out.pb.gz" | od -An -tx1 | tr -d ' ') == 1f8b ]] || fail "$name: pprof output is not gzip"
  [[ -n $GO ]] || return 0
  "$GO" tool pprof -raw "$out.pb.gz" >"$out.raw" 2>&1 || { head -5 "$out.raw" >&2; fail "$name: go tool pprof -raw rejects the file"; }
  "$GO" tool pprof -top -sample_index=samples -nodefraction=0 -nodecount=100000 "$out.pb.gz" \
    >"$out.top" 2>&1 || { head -5 "$out.top" >&2; fail "$name: go tool pprof -top failed"; }
  python3 - "$out.top" "$out.json" "$name" <<'EOF' || fail "$name: go tool pprof disagrees with pipeprof report"
import json, re, sys
top, report, name = open(sys.argv[1]).read(), json.load(open(sys.argv[2])), sys.argv[3]
m = re.search(r"Total samples = (\d+)\s*$", top, re.M)
total = int(m.group(1)) if m else 0
if total != report["samples"]:
    sys.exit(f"{name}: go tool pprof counts {total} samples, pipeprof report {report['samples']}")
if total == 0:
    print(f"# {name}: empty profile, go tool pprof reads it"); sys.exit(0)
rows = []  # (flat, name) of every -top row
for line in top.splitlines():
    r = re.match(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+\d+\s+[\d.]+%\s+(.+?)\s*$", line)
    if r:
        rows.append((int(r.group(1)), r.group(2)))
best = report["top_self"][0]
fn = best["function"].split("!", 1)[-1]
tied = [n for f, n in rows if f == rows[0][0]]
# pprof shortens names (drops parameter lists, template arguments, lower-case package prefixes).
if rows[0][0] != best["self"] or not any(fn.startswith(n) or n in fn for n in tied):
    sys.exit(f"{name}: pprof's top self is {rows[0]} (tied: {tied}), report's {fn} with {best['self']}")
print(f"# {name}: go tool pprof: {total} samples, top self {rows[0][1]} ({rows[0][0]})")
EOF
}

# check_perf NAME TRACE: the perf text's shape, and its stacks against the folded output.
check_perf() {
  local name=$1 trace=$2 out=$T/$1
  "$PIPEPROF" convert --format perf -o "$out.perf" "$trace" || fail "$name: convert --format perf"
  "$PIPEPROF" convert --format folded -o "$out.folded" "$trace" || fail "$name: convert --format folded"
  if [[ -n $COLLAPSE ]]; then
    perl "$COLLAPSE" "$out.perf" >"$out.collapsed" 2>"$out.collapse.err" ||
      { cat "$out.collapse.err" >&2; fail "$name: stackcollapse-perf.pl failed"; }
  fi
  python3 - "$out.perf" "$out.folded" "$out.json" "$name" ${COLLAPSE:+"$out.collapsed"} <<'EOF' ||
import collections, json, re, sys
perf, folded, report, name = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), sys.argv[4]
header = re.compile(r"^\S.*? \d+/\d+ \d+\.\d{6}: (\d+) cpu-clock:$")
frame = re.compile(r"^\t([0-9a-f]+) (.+) \((.+)\)$")

# Our folded output: frames "module!function", root first, behind the thread label.
ours = collections.Counter()
for line in open(folded):
    stack, count = line.rstrip("\n").rsplit(" ", 1)
    ours[tuple(f.split("!", 1)[-1] for f in stack.split(";")[1:])] += int(count)
if sum(ours.values()) != report["samples"]:
    sys.exit(f"{name}: folded has {sum(ours.values())} samples, report {report['samples']}")

# The perf text, read back record by record: every line is a header, a frame or a blank line.
text = open(perf).read()
if text and not text.endswith("\n\n"):
    sys.exit(f"{name}: perf text does not end with a blank line")
records, stacks = 0, collections.Counter()
for n, block in enumerate(text.split("\n\n")[:-1] if text else []):
    lines = block.split("\n")
    h = header.match(lines[0])
    if not h:
        sys.exit(f"{name}: record {n}: bad header {lines[0]!r}")
    frames = []
    for line in lines[1:]:
        f = frame.match(line)
        if not f:
            sys.exit(f"{name}: record {n}: bad frame line {line!r}")
        frames.append(f.group(2).replace(";", ":"))
    records += int(h.group(1))
    stacks[tuple(reversed(frames))] += int(h.group(1))
if records != report["samples"]:
    sys.exit(f"{name}: {records} perf records, report {report['samples']} samples")
if stacks != ours:
    diff = set(stacks.items()) ^ set(ours.items())
    sys.exit(f"{name}: perf and folded stacks differ, e.g. {sorted(diff)[:3]}")
print(f"# {name}: perf text: {records} well-formed records, same stacks as folded")

if len(sys.argv) < 6:
    sys.exit(0)
# What stackcollapse-perf.pl does to a function name by default: drop a +0x offset, skip names
# that start with '(', and ($tidy_generic) cut everything from the first '(' that does not open
# "(anonymous namespace)" unless the name looks like a Go method, and delete quotes.
def tidy(f):
    f = re.sub(r"\+0x[\da-f]+$", "", f)
    if f.startswith("("):
        return None
    if not re.search(r"\.\(.*\)\.", f):
        f = re.sub(r"\((?!anonymous namespace\)).*", "", f)
    return f.replace('"', "").replace("'", "")
expected = collections.Counter()
for st, count in ours.items():
    expected[tuple(t for t in map(tidy, st) if t is not None)] += count
got = collections.Counter()
for line in open(sys.argv[5]):
    stack, count = line.rstrip("\n").rsplit(" ", 1)
    got[tuple(stack.split(";")[1:])] += int(count)  # [0] is the COMM
if got != expected:
    diff = set(got.items()) ^ set(expected.items())
    sys.exit(f"{name}: stackcollapse-perf.pl folds differently, e.g. {sorted(diff)[:3]}")
leaves = lambda c: {st[-1] for st in c if st}
if leaves(got) != leaves(expected):
    sys.exit(f"{name}: leaf functions differ")
print(f"# {name}: stackcollapse-perf.pl: {sum(got.values())} samples in {len(got)} stacks, as folded")
EOF
    fail "$name: perf output check"
}

# check_consumers NAME TRACE: the report, then both formats against their readers.
check_consumers() {
  "$PIPEPROF" report --format json --top 20 "$2" >"$T/$1.json" || fail "$1: pipeprof report"
  check_pprof "$1" "$2"
  check_perf "$1" "$2"
}

# A live profile: the workload under the agent, in CPU mode, at 1000 Hz: 2 s of a thread that
# gets a tenth of a core on a loaded machine still give enough samples (at the default 100 Hz,
# 47 at load 25).
LD_PRELOAD=$PRELOAD "$WORKLOAD" 4 >"$T/live.out" & PP_PIDS+=($!); W=$!
wait_socket "$W" >/dev/null
"$PIPEPROF" collect -p "$W" --duration 2 -o "$T/live.nettrace" \
  --providers 'Microsoft-DotNETCore-SampleProfiler:0xF00000000000:4:mode=cpu;hz=1000,pipeprof:0:4:mode=cpu;hz=1000' \
  >"$T/collect.log" 2>&1 ||
  { cat "$T/collect.log"; fail "pipeprof collect -p"; }
wait "$W" || fail "the workload failed under the agent"
check_consumers live "$T/live.nettrace"
[[ $(json_get "$T/live.json" "r['samples']") -ge 50 ]] || fail "live: too few samples to compare"
grep -q "pp_workload_fn_a" "$T/live.perf" || fail "live: perf text lacks pp_workload_fn_a"

# The shared fixtures: .NET traces with managed names (spaces, parentheses, generics), and one
# without samples, which must still give a valid pprof file and an empty perf text.
FIX=$S/../shared/fixtures/nettrace
if [[ -d $FIX ]]; then
  for f in mixed_managed_external_samples only_managed_samples eventpipe-dotnetcore5.0-win-x64-arraytypes; do
    [[ -f $FIX/$f.nettrace ]] || fail "fixture $FIX/$f.nettrace is missing"
    check_consumers "$f" "$FIX/$f.nettrace"
  done
else
  echo "SKIP (loud): $FIX is absent: only the live profile was checked" >&2
fi

[[ -n $GO ]] || skip "go is not installed: the perf checks passed, go tool pprof did not run"
echo "profile-consumers-pprof-perf: ok"
