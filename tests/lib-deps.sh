#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/lib-deps.sh - what a process pays to load libpipeprof.so: the library needs only libuv and
# libc's own libraries (readelf -d), and a preloaded process that makes no HTTP request never maps
# cJSON, zlib or http-parser, which shim/lazy-deps.c opens with dlopen at the first call from the
# HTTP endpoints (http-agent and http-final-samples make those calls). Each one loaded at start
# was mapped, relocated and unmapped again by every short child under `pipeprof record`
# (docs/performance.md, start-up).
set -euo pipefail
B=${PP_BINARY_DIR:?}
LIB=$B/lib/libpipeprof.so
command -v readelf >/dev/null || { echo "SKIP (loud): readelf is not installed" >&2; exit 77; }
[[ -f $LIB ]] || { echo "FAIL: $LIB is missing" >&2; exit 1; }

# libc's own parts, libuv (the diagnostic server's loop, in every process), and a sanitizer
# build's runtimes.
allowed='^(libc\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libm\.so\.6|ld-linux[-a-z0-9_.]*\.so\.[0-9]+|libuv\.so\.1|lib(asan|ubsan|tsan)\.so\.[0-9]+|libgcc_s\.so\.1)$'
needed=$(readelf -d "$LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[[ -n $needed ]] || { echo "FAIL: readelf -d lists no NEEDED entry in $LIB" >&2; exit 1; }
bad=$(grep -Ev "$allowed" <<<"$needed" || true)
if [[ -n $bad ]]; then
  echo "FAIL: libpipeprof.so needs $(tr '\n' ' ' <<<"$bad")(every process it is preloaded into loads them at start)" >&2
  exit 1
fi
echo "ok: NEEDED $(tr '\n' ' ' <<<"$needed")"

# The same in a running process: /proc/self/maps of a preloaded cat (a native build only).
if ! readelf -h "$LIB" | grep 'X86-64' >/dev/null || [[ $(uname -m) != x86_64 ]]; then
  echo "SKIP (loud): the preloaded run needs a native x86-64 build; readelf's check above ran" >&2
  exit 0
fi
preload=$LIB
asan=$(ldd "$LIB" 2>/dev/null | awk '/libasan/ {print $3}' || true)
[[ -n $asan ]] && preload="$asan:$LIB" # ASan's runtime comes first
tsan=$(ldd "$LIB" 2>/dev/null | awk '/libtsan/ {print $3}' || true)
[[ -n $tsan ]] && preload="$LIB:$tsan" # TSan's right after (tests/ipc-lib.sh)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
TMPDIR=$T LD_PRELOAD=$preload ASAN_OPTIONS=detect_leaks=0 cat /proc/self/maps >"$T/maps"
grep -q libpipeprof "$T/maps" || { echo "FAIL: the preloaded cat did not map libpipeprof.so" >&2; exit 1; }
if grep -E 'libcjson|libz\.so|libhttp_parser' "$T/maps" >&2; then
  echo "FAIL: a preloaded process that made no HTTP request mapped the libraries above" >&2
  exit 1
fi
echo "ok: a preloaded cat maps neither cJSON, zlib nor http-parser"
