#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/golden-replay.sh [--update] - replays the traces committed under tests/data/ (one that
# `pipeprof record` wrote, one that the .NET 10 runtime wrote with DOTNET_EnableEventPipe)
# through `dump`, `report` and every `convert` format, and compares with the golden outputs in
# tests/data/golden/, so that a change in what the reader, the loader or a writer produces is
# caught without live sampling. Large outputs are kept as their first lines plus a SHA-256 of
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
((update)) && { echo "golden-replay: goldens rewritten for $n traces"; exit 0; }
((failed == 0)) || exit 1
echo "golden-replay: $n traces replayed through dump, report and 5 convert formats: all match"
