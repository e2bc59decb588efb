#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/golden-replay.sh [--update] - replays the traces committed under tests/data/ (one that
# `pipeprof record` wrote, one that the .NET 10 runtime wrote with DOTNET_EnableEventPipe)
# through `dump`, `report` and every `convert` format, and compares with the golden outputs in
# tests/data/golden/, so that a change in what the reader, the loader or a writer produces is
# caught without live sampling. Also: a trace cut short is used up to the cut, with a warning,
# and a malformed one is refused. Large outputs are kept as their first lines plus a SHA-256 of
# the whole. --update rewrites the goldens (review the diff before committing it).
set -euo pipefail
B=${PP_BINARY_DIR:-build}
S=${PP_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
PIPEPROF=$B/bin/pipeprof
DATA=$S/tests/data
GOLDEN=$DATA/golden
update=0
[[ ${1:-} == --update ]] && update=1
T=$(mktemp -d /tmp/pp-golden.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$GOLDEN"
LIMIT=65536 # bytes kept verbatim; above that: the first 60 lines and a SHA-256
failed=0

# check NAME FILE: compares FILE (an output) with the golden NAME.
check() {
  local name=$1 file=$2 want got
  if [[ $name == *.pb || $(stat -c %s "$file") -gt $LIMIT ]]; then
    if [[ $name == *.pb ]]; then
      : >"$T/$name.head" # binary: the hash alone
    else
      head -60 "$file" >"$T/$name.head"
    fi
    sha256sum <"$file" | cut -d' ' -f1 >"$T/$name.sha256"
    if ((update)); then
      rm -f "$GOLDEN/$name"
      cp "$T/$name.head" "$GOLDEN/$name.head"
      cp "$T/$name.sha256" "$GOLDEN/$name.sha256"
      return
    fi
    if ! diff -u "$GOLDEN/$name.head" "$T/$name.head" >"$T/diff" 2>&1 ||
      ! cmp -s "$GOLDEN/$name.sha256" "$T/$name.sha256"; then
      echo "FAIL: $name differs from tests/data/golden/$name.{head,sha256}" >&2
      head -40 "$T/diff" >&2
      failed=1
    fi
  else
    if ((update)); then
      rm -f "$GOLDEN/$name.head" "$GOLDEN/$name.sha256"
      cp "$file" "$GOLDEN/$name"
      return
    fi
    if ! diff -u "$GOLDEN/$name" "$file" >"$T/diff" 2>&1; then
      echo "FAIL: $name differs from tests/data/golden/$name" >&2
      head -40 "$T/diff" >&2
      failed=1
    fi
  fi
}

n=0
for trace in "$DATA"/*.nettrace; do
  base=$(basename "$trace" .nettrace)
  "$PIPEPROF" dump "$trace" >"$T/dump.txt"
  check "$base.dump.txt" "$T/dump.txt"
  "$PIPEPROF" dump --format json "$trace" >"$T/dump.jsonl"
  check "$base.dump.jsonl" "$T/dump.jsonl"
  "$PIPEPROF" dump --summary --format json "$trace" >"$T/summary.json"
  check "$base.summary.json" "$T/summary.json"
  "$PIPEPROF" report --threads --top 15 "$trace" >"$T/report.txt"
  check "$base.report.txt" "$T/report.txt"
  "$PIPEPROF" report --threads --format json "$trace" >"$T/report.json"
  check "$base.report.json" "$T/report.json"
  for f in folded perf speedscope chromium pprof; do
    "$PIPEPROF" convert "$trace" --format "$f" -o "$T/out.$f"
    if [[ $f == pprof ]]; then
      gzip -dc "$T/out.$f" >"$T/out.pprof.pb" # the protobuf, not gzip's framing
      check "$base.pprof.pb" "$T/out.pprof.pb"
    else
      check "$base.$f" "$T/out.$f"
    fi
  done
  n=$((n + 1))
done
((n >= 2)) || { echo "FAIL: expected at least 2 traces in tests/data, found $n" >&2; exit 1; }

# A trace cut short (its writer died): report uses the intact samples before the cut, says so on
# stderr and in JSON; convert agrees with it. Malformed bytes are still an error.
full=$DATA/pipeprof-workload-wall.nettrace
size=$(stat -c %s "$full")
head -c $((size * 6 / 10)) "$full" >"$T/cut.nettrace"
"$PIPEPROF" report --format json "$T/cut.nettrace" >"$T/cut.json" 2>"$T/cut.err" ||
  { echo "FAIL: report refused a trace cut short: $(cat "$T/cut.err")" >&2; exit 1; }
grep -q "ends early" "$T/cut.err" || { echo "FAIL: no warning for a trace cut short" >&2; exit 1; }
python3 - "$T/cut.json" "$GOLDEN/pipeprof-workload-wall.report.json" <<'PY' || exit 1
import json, sys
cut, whole = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ok = cut["truncated"] is True and 0 < cut["samples"] < whole["samples"]
print(("" if ok else "FAIL: ") + "a trace cut at 60%%: %d of %d samples, truncated=%s" %
      (cut["samples"], whole["samples"], cut["truncated"]), file=sys.stderr)
sys.exit(0 if ok else 1)
PY
folded=$("$PIPEPROF" convert "$T/cut.nettrace" --format folded 2>/dev/null | awk '{s += $NF} END {print s}')
[[ $folded == $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"])' "$T/cut.json") ]] ||
  { echo "FAIL: convert of a cut trace gives $folded samples" >&2; exit 1; }
{ printf 'Xettrace'; tail -c +9 "$full"; } >"$T/bad.nettrace"
if "$PIPEPROF" report "$T/bad.nettrace" >/dev/null 2>"$T/bad.err"; then
  echo "FAIL: report accepted a malformed trace" >&2
  exit 1
fi
grep -q "offset 0: bad magic" "$T/bad.err" || { echo "FAIL: $(cat "$T/bad.err")" >&2; exit 1; }
((update)) && { echo "golden-replay: goldens rewritten for $n traces"; exit 0; }
((failed == 0)) || exit 1
echo "golden-replay: $n traces replayed through dump, report and 5 convert formats: all match"
