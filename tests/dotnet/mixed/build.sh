#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/dotnet/mixed/build.sh OUT_DIR - builds the mixed test app (mixed.dll and libburn.so,
# -O2 without frame pointers) into OUT_DIR/app when a source is newer than the build, under a
# lock (tests run in parallel), and prints the path of mixed.dll. The build log is
# OUT_DIR/build.log. Used by tests/ipc-lib.sh (mixed_app) and bench/dotnet-overhead.sh.
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT_DIR}
mkdir -p "$out"
(
  flock 9
  stale=0
  for f in Program.cs mixed.csproj burn.c; do
    [[ -f $out/app/mixed.dll && -f $out/app/libburn.so && ! $src/$f -nt $out/app/mixed.dll ]] || stale=1
  done
  if [[ $stale == 1 ]]; then
    rm -rf "$out/src" "$out/app" && mkdir -p "$out/src"
    cp "$src/mixed.csproj" "$src/Program.cs" "$out/src/"
    timeout 300 dotnet build -c Release -o "$out/app" "$out/src" >"$out/build.log" 2>&1 ||
      { cat "$out/build.log" >&2; exit 1; }
    cc -O2 -fomit-frame-pointer -fPIC -shared -o "$out/app/libburn.so" "$src/burn.c" -lpthread \
      >>"$out/build.log" 2>&1 || { cat "$out/build.log" >&2; exit 1; }
    touch "$out/app/mixed.dll"
  fi
) 9>"$out.lock"
echo "$out/app/mixed.dll"
