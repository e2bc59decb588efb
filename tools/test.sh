#!/usr/bin/env bash
# The README's test command: installs missing dependencies, builds pipeprof in build/ and runs
# every test with ctest.
# PP_BUILD_DIR and PP_CMAKE_ARGS select another configuration (the CI uses them for ASan).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PP_BUILD_DIR:-build}
# A fresh machine: install what is missing (idempotent; no apt-get when everything is there).
bash tools/install-deps.sh
export PATH="$PATH:$HOME/.dotnet/tools"
cmake -S . -B "$build" ${PP_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$(nproc)"
# A failed test runs once more and the run ends naming every first failure (tools/ctest-retry.sh).
bash tools/ctest-retry.sh --test-dir "$build" --output-on-failure -j "$(nproc)" ${PP_CTEST_ARGS:-}
