#!/usr/bin/env bash
# Installs what building and testing pipeprof needs on Debian/Ubuntu. Idempotent; needs root
# (or sudo). Skips apt-get entirely when everything is already there.
set -euo pipefail

# Build: libuv, libelf, cJSON, zlib (pprof's gzip), http-parser (the HTTP endpoints).
# Tests: clang (libFuzzer, sanitizer runtimes), curl (HTTP endpoints), golang-go (`go tool
# pprof` reads our pprof files), chromium (renders speedscope's view of our files), Node.js
# and npm (speedscope's package and its schema; Debian's, unless a node with npm is there),
# libdevel-nytprof-perl (ships FlameGraph's flamegraph.pl, which draws our folded stacks),
# libgoogle-perftools-dev (bench/overhead.sh compares against gperftools).
packages=(build-essential cmake pkg-config libuv1-dev libelf-dev libcjson-dev zlib1g-dev
          libhttp-parser-dev clang libclang-rt-14-dev curl golang-go chromium
          libdevel-nytprof-perl libgoogle-perftools-dev)
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "install-deps: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The .NET diagnostic tools are optional: interop tests use them where they can be installed,
# and say so loudly where not. (dotnet-monitor is not served by NuGet here.)
if command -v dotnet >/dev/null 2>&1; then
    export PATH="$PATH:$HOME/.dotnet/tools"
    for tool in dotnet-trace dotnet-counters dotnet-stack; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            dotnet tool install --global "$tool" >/dev/null 2>&1 \
                || echo "install-deps: $tool could not be installed; its tests will skip"
        fi
    done
fi
