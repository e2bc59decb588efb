#!/usr/bin/env bash
# bench/reader-vs-traceevent.sh [FILE | --generate-mb N] - pipeprof's reader and TraceEvent's
# EventPipeEventSource read the same nettrace file, from memory, in the same run; prints both
# medians and the ratio. Default FILE: the largest shared fixture. Needs a build in build/ and
# the .NET SDK (TraceEvent comes from NuGet). See docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${PP_BINARY_DIR:-build}
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
echo "== file: $file ($(stat -c %s "$file") bytes)"
ours=$("$B/bench/bench-reader" "$file" | tee /dev/stderr | sed -n 's/.*median of 5: \([0-9.]*\) MB\/s.*/\1/p')
theirs=$(dotnet "$out/traceevent-read.dll" "$file" | tee /dev/stderr | sed -n 's/.*median of 5: \([0-9.]*\) MB\/s.*/\1/p')
python3 -c "import sys; print('ratio: pipeprof reader %.1f MB/s / TraceEvent %.1f MB/s = %.1fx' % (float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[1]) / float(sys.argv[2])))" "$ours" "$theirs"
