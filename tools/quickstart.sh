#!/usr/bin/env bash
# The README's first command on a fresh machine: installs what building and recording need and
# is missing (the tests' tools come with tools/test.sh), builds pipeprof, then records the
# sample workload (two threads with a known split of CPU between functions) from its first
# instruction with `pipeprof record`, and prints the report. Leaves out/workload.nettrace
# (dotnet-trace convert, PerfView, TraceEvent) and, converted from it,
# out/workload.speedscope.json, out/workload.pb.gz (go tool pprof), out/workload.folded
# (flamegraph.pl), out/workload.perf.txt (stackcollapse-perf.pl, Firefox Profiler) and
# out/workload.chromium.json (Perfetto).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh --build
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
mkdir -p out

echo "== pipeprof record --hz 250 -o out/workload.nettrace -- build/samples/pp-sample-workload 3"
build/bin/pipeprof record --hz 250 -o out/workload.nettrace -- build/samples/pp-sample-workload 3

echo
echo "== pipeprof report --threads --top 10 out/workload.nettrace"
build/bin/pipeprof report --threads --top 10 out/workload.nettrace
for f in speedscope:speedscope.json pprof:pb.gz folded:folded perf:perf.txt chromium:chromium.json; do
  build/bin/pipeprof convert out/workload.nettrace --format "${f%%:*}" -o "out/workload.${f#*:}"
done
echo
echo "trace: out/workload.nettrace; for viewers: out/workload.{speedscope.json,pb.gz,folded,perf.txt,chromium.json}"
