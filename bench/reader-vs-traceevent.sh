#!/usr/bin/env bash
# bench/reader-vs-traceevent.sh [FILE | --generate-mb N] - pipeprof's reader and TraceEvent's
# EventPipeEventSource read the same nettrace file, from memory, in the same run; prints both
# medians and the ratio. Default FILE: the largest shared fixture. Needs a build in build/ and
# the .NET SDK (TraceEvent comes from NuGet). See docs/performance.md.
# PP_ROUNDS=N (default 3) alternates the two readers N times and reports the median of each
# round's ratio, so that a burst of load on a shared machine hits both. PP_BASELINE_READER=PATH
# runs another build of bench/bench-reader (an older commit's) in each round too.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${PP_BINARY_DIR:-build}
rounds=${PP_ROUNDS:-3}
baseline=${PP_BASELINE_READER:-}
file=${1:-../shared/fixtures/nettrace/eventpipe-dotnetcore3.0-win-x64-objver4.nettrace}
if [[ $file == --generate-mb ]]; then # a trace of sample-like events written by pipeprof's writer
  file=$(mktemp /tmp/pp-bench.XXXXXX.nettrace)
  trap 'rm -f "$file"' EXIT
  "$B/bench/bench-reader" --generate-mb "${2:?--generate-mb needs a size in MB}" --save "$file" >/dev/null
fi
out=$B/bench/traceevent-read
if [[ ! -f $out/traceevent-read.dll || bench/traceevent-read/Program.cs -nt $out/traceevent-read.dll ]]; then
  # Built from a copy in the build tree: MSBuild writes obj/ next to the project it builds.
  rm -rf "$out.src" && mkdir -p "$out.src"
  cp bench/traceevent-read/{traceevent-read.csproj,Program.cs} "$out.src/"
  dotnet build -c Release -o "$out" "$out.src" >/dev/null
fi
median_mbs() { "$@" | tee /dev/stderr | sed -n 's/.*median of 5: \([0-9.]*\) MB\/s.*/\1/p'; }
echo "== file: $file ($(stat -c %s "$file") bytes), $rounds rounds"
results=()
for ((i = 1; i <= rounds; i++)); do
  echo "== round $i"
  ours=$(median_mbs "$B/bench/bench-reader" "$file")
  base=0
  [[ -z $baseline ]] || base=$(median_mbs "$baseline" "$file")
  theirs=$(median_mbs dotnet "$out/traceevent-read.dll" "$file")
  results+=("$ours $base $theirs")
done
python3 - "${results[@]}" <<'EOF'
import statistics, sys
rows = [tuple(float(x) for x in r.split()) for r in sys.argv[1:]]
for ours, base, theirs in rows:
    line = 'round: pipeprof reader %.1f MB/s / TraceEvent %.1f MB/s = %.1fx' % (ours, theirs, ours / theirs)
    if base:
        line += '; baseline reader %.1f MB/s (%.1fx TraceEvent), this one %.2fx the baseline' % (
            base, base / theirs, ours / base)
    print(line)
med = statistics.median
print('ratio: pipeprof reader %.1f MB/s / TraceEvent %.1f MB/s = %.1fx (medians over %d rounds; median of the rounds\' ratios %.1fx)'
      % (med(r[0] for r in rows), med(r[2] for r in rows), med(r[0] for r in rows) / med(r[2] for r in rows),
         len(rows), med(r[0] / r[2] for r in rows)))
if rows[0][1]:
    print('baseline: %.1f MB/s = %.1fx TraceEvent; this reader %.2fx the baseline (median of the rounds)'
          % (med(r[1] for r in rows), med(r[1] / r[2] for r in rows), med(r[0] / r[1] for r in rows)))
EOF
