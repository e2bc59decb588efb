#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dump-runtime-names.sh - `pipeprof dump` names the runtime's own events as TraceEvent
# does: for each shared fixture, the count per (provider, name) of the runtime's providers in
# `dump --summary` equals the count TraceEvent's own reading (FILE.baseline.txt) gives that
# name, and no runtime event is left unnamed. Reads the fixtures in place (../shared beside the checkout); skips loudly without them.
set -euo pipefail
PP=${PP_BINARY_DIR:?}/bin/pipeprof
dir=${PP_SHARED_DIR:-${PP_SOURCE_DIR:?}/../shared}/fixtures/nettrace
if ! ls "$dir"/*.baseline.txt >/dev/null 2>&1; then
  echo "SKIP (loud): no fixtures with TraceEvent baselines in $dir (../shared is absent)" >&2
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0 files=0
for base in "$dir"/*.baseline.txt; do
  trace=${base%.baseline.txt}
  "$PP" dump --summary --format json "$trace" >"$out/summary.json"
  python3 - "$out/summary.json" "$base" <<'PY' || fail=1
import json, sys
summary, base = sys.argv[1], sys.argv[2]
runtime = lambda p: p.startswith("Microsoft-Windows-DotNETRuntime") or p == "Microsoft-DotNETCore-SampleProfiler"
ours = {}
for row in json.load(open(summary))["events"]:
    if runtime(row["provider"]):
        key = row["provider"] + "/" + row["name"]
        ours[key] = ours.get(key, 0) + row["count"]
theirs = {}
for line in open(base, encoding="utf-8-sig"):
    parts = line.split(", ", 2)
    if len(parts) == 3 and runtime(parts[0].split("/")[0]):
        theirs[parts[0]] = int(parts[1])
# TraceEvent's reading lists a selection of names; each of those must match, and no runtime
# event of ours may be left without a name.
bad = [(k, ours.get(k), theirs.get(k)) for k in sorted(theirs) if ours.get(k) != theirs[k]]
bad += [(k, ours[k], None) for k in sorted(ours) if k.endswith("/")]
for k, a, b in bad:
    print("  %s: dump %s, TraceEvent %s" % (k, a, b))
print("%s: %d runtime event names, %d differ" % (base.split("/")[-1], len(theirs), len(bad)))
sys.exit(1 if bad or not theirs else 0)
PY
  files=$((files + 1))
done
[[ $files -gt 0 && $fail -eq 0 ]] || { echo "FAIL: dump's runtime event names differ from TraceEvent's" >&2; exit 1; }
echo "dump-runtime-names: $files fixtures agree with TraceEvent"
