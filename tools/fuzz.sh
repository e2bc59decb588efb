#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tools/fuzz.sh TARGET SECONDS [LIBFUZZER-ARGS...] - one libFuzzer campaign of a target of
# tests/fuzz/ (fuzz-nettrace-reader, fuzz-ipc-codec, fuzz-http-request, fuzz-profile-load), from
# its committed corpus, printing libFuzzer's progress lines ("#4096 pulse cov: 255 ft: 1024 ...").
# It makes a clang build with the libraries under test instrumented (-DPP_FUZZ=ON:
# -fsanitize=fuzzer-no-link,address,undefined, cmake/sanitizers.cmake) in $PP_FUZZ_BUILD_DIR
# (default build-fuzz; PP_CMAKE_ARGS adds configure arguments).
# Exit status: 0 when the campaign ends without a finding; libFuzzer's own (non-zero) on a
# crash, a leak, a sanitizer report, a timeout (10 s for one input) or running out of memory
# (2 GB), with the input kept in $PP_FUZZ_BUILD_DIR/fuzz-artifacts/TARGET/.
# New inputs are kept in $PP_FUZZ_BUILD_DIR/fuzz-new/TARGET/. With PP_FUZZ_MERGE=1 the corpus
# and those are merged (libFuzzer -merge=1 -use_counters=0: the smallest inputs that keep every
# covered edge) into tests/fuzz/corpus/TARGET/, which is replaced: review and commit it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 2 || ! -f tests/fuzz/$1.c || ! $2 =~ ^[0-9]+$ ]]; then
  echo "usage: tools/fuzz.sh TARGET SECONDS [LIBFUZZER-ARGS...]" >&2
  echo "targets: $(cd tests/fuzz && ls fuzz-*.c | sed 's/\.c$//' | tr '\n' ' ')" >&2
  exit 2
fi
target=$1 secs=$2
shift 2
build=${PP_FUZZ_BUILD_DIR:-build-fuzz}
command -v clang >/dev/null || { echo "tools/fuzz.sh: clang is not installed" >&2; exit 1; }
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPP_FUZZ=ON \
  ${PP_CMAKE_ARGS:-} >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" --target "$target-fuzzer" -j"${PP_JOBS:-2}" >"$build/$target.build.log" 2>&1 ||
  { tail -40 "$build/$target.build.log" >&2; exit 1; }
corpus=tests/fuzz/corpus/$target
new=$build/fuzz-new/$target
artifacts=$build/fuzz-artifacts/$target
mkdir -p "$new" "$artifacts" "$corpus"
fuzzer=$build/tests/$target-fuzzer
echo "=== $target: $secs s from $(ls "$corpus" | wc -l) inputs ($(du -sh "$corpus" | cut -f1))"
# The first directory receives new inputs; the committed corpus is only read. The stderr of the
# code under test is closed (the loader's warnings about each broken input); libFuzzer's lines
# and the sanitizers' reports still come through.
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -close_fd_mask=2 \
  -artifact_prefix="$artifacts/" "$@" "$new" "$corpus"
if [[ ${PP_FUZZ_MERGE:-0} == 1 ]]; then
  merged=$build/fuzz-merged/$target
  rm -rf "$merged" && mkdir -p "$merged"
  # edges only (no hit counts): every covered edge kept by the smallest inputs, a corpus of a
  # few hundred KB instead of MBs
  "$fuzzer" -merge=1 -use_counters=0 -timeout=10 -rss_limit_mb=2048 "$merged" "$corpus" "$new" \
    2>&1 | tail -2
  rm -rf "$corpus" && mkdir -p "$corpus" && cp "$merged"/* "$corpus"/
  echo "=== $target: corpus now $(ls "$corpus" | wc -l) inputs ($(du -sh "$corpus" | cut -f1))"
fi
