#!/usr/bin/env bash
# The README's first command on a fresh machine: installs what is missing, builds pipeprof, then
# profiles the sample workload (two threads with a known split of CPU between functions) with
# the agent preloaded, records 3 seconds through the diagnostic port, and prints the report.
# Leaves out/workload.nettrace (for dotnet-trace convert, PerfView, TraceEvent) and
# out/workload.folded (for flamegraph.pl, speedscope).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
mkdir -p out

export TMPDIR=${TMPDIR:-/tmp}
echo "== running build/samples/pp-sample-workload with LD_PRELOAD=build/lib/libpipeprof.so"
LD_PRELOAD="$PWD/build/lib/libpipeprof.so" build/samples/pp-sample-workload 5 >out/workload.log &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    compgen -G "$TMPDIR/dotnet-diagnostic-$pid-*-socket" >/dev/null && break
    sleep 0.05
done

echo "== pipeprof collect -p $pid --duration 3"
build/bin/pipeprof collect -p "$pid" --duration 3 -o out/workload.nettrace
wait "$pid"
trap - EXIT
echo "== the workload says: $(cat out/workload.log)"

echo "== pipeprof report out/workload.nettrace"
build/bin/pipeprof report --threads --top 10 out/workload.nettrace
build/bin/pipeprof convert out/workload.nettrace --format folded -o out/workload.folded
echo
echo "trace: out/workload.nettrace   folded stacks: out/workload.folded"
