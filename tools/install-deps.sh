#!/usr/bin/env bash
# Installs what pipeprof needs on Debian/Ubuntu. Idempotent; needs root (or sudo). Skips apt-get
# entirely when everything is already there.
#   tools/install-deps.sh          building, recording and every test (tools/test.sh, CI)
#   tools/install-deps.sh --build  building and recording only (tools/quickstart.sh)
set -euo pipefail

# Build and record: libuv, libelf, cJSON, zlib (pprof's gzip), http-parser (the HTTP endpoints).
build_packages=(build-essential cmake pkg-config libuv1-dev libelf-dev libcjson-dev zlib1g-dev
                libhttp-parser-dev)
# Tests: clang (libFuzzer, sanitizer runtimes), curl (HTTP endpoints), golang-go (`go tool
# pprof` reads our pprof files), chromium (renders speedscope's view of our files), Node.js
# and npm (speedscope's package and its schema; Debian's, unless a node with npm is there),
# libdevel-nytprof-perl (ships FlameGraph's flamegraph.pl, which draws our folded stacks),
# libgoogle-perftools-dev (bench/overhead.sh compares against gperftools), strace
# (host-contract-proc-tasks lists the /proc entries opened), tcl and busybox (two of real-hosts'
# programs, a few MB); and the .NET diagnostic tools, below.
test_packages=(clang libclang-rt-14-dev curl golang-go chromium libdevel-nytprof-perl
               libgoogle-perftools-dev strace tcl busybox)
command -v npm >/dev/null 2>&1 || test_packages+=(nodejs npm)

# retry CMD...: runs CMD up to 4 times, 10, 20 and 40 s apart, and says so each time it failed: a
# fresh machine's apt-get and NuGet meet transient network failures (a mirror's hash-sum mismatch
# mid-sync, a timeout), which one failed try would make a CI failure or, for the .NET tools, a
# silent skip of their tests.
retry() {
  local try delay=10
  for try in 1 2 3 4; do
    "$@" && return 0
    [[ $try == 4 ]] && break
    echo "install-deps: '$*' failed (try $try of 4); again in $delay s" >&2
    sleep "$delay"
    delay=$((delay * 2))
  done
  return 1
}

# apt_install PACKAGE...: apt-get install, quietly; after a failure the package lists are read
# again for the next try (a mirror mid-sync). Uses $sudo.
apt_install() {
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null && return 0
  $sudo apt-get update -qq || true
  return 1
}

# tool_install TOOL: a .NET global tool from NuGet, quietly (its output only when it failed).
tool_install() {
  local out
  out=$(dotnet tool install --global "$1" 2>&1) && return 0
  echo "$out" | tail -3 >&2
  return 1
}

# Other options are left to the sections that take them.
tests=1
for arg in "$@"; do
    [[ $arg != --build ]] || tests=0
done
packages=("${build_packages[@]}")
[ "$tests" -eq 0 ] || packages+=("${test_packages[@]}")

# Installed for this machine's architecture: another architecture's copy (a cross-compiling
# setup) does not build here, and the -dev packages that cannot stand side by side replace
# each other.
native=$(dpkg --print-architecture)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Architecture} ${Status}\n' "$p" 2>/dev/null |
        grep -Eq "^($native|all) install ok installed$" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "install-deps: installing ${missing[*]}"
    retry $sudo apt-get update -qq
    retry apt_install "${missing[@]}"
fi

# Linux arm64, cross-built and tested under qemu-user (cmake/aarch64-linux-gnu.cmake), only when
# asked for: `tools/install-deps.sh --arm64` or PP_ARM64=1. The :arm64 libraries come through
# Debian's multiarch; libhttp-parser-dev is not co-installable for two architectures (installing
# its :arm64 copy removes the host's), so only the :arm64 runtime is installed and the toolchain
# file links it directly (the header is the host's, the same for both).
if [[ ${1:-} == --arm64 || ${PP_ARM64:-0} == 1 ]]; then
    arm64=(gcc-aarch64-linux-gnu qemu-user libc6:arm64 libuv1-dev:arm64 libelf-dev:arm64
           libcjson-dev:arm64 zlib1g-dev:arm64 libhttp-parser2.9:arm64)
    missing=()
    for p in "${arm64[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        sudo=""
        [ "$(id -u)" -eq 0 ] || sudo=sudo
        echo "install-deps: installing for arm64: ${missing[*]}"
        dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64
        retry $sudo apt-get update -qq
        retry apt_install --no-install-recommends "${missing[@]}"
    fi
fi

# The .NET diagnostic tools are optional: interop tests use them where they can be installed,
# and say so loudly where not. (dotnet-monitor is not served by NuGet here.)
if [ "$tests" -eq 1 ] && command -v dotnet >/dev/null 2>&1; then
    export PATH="$PATH:$HOME/.dotnet/tools"
    for tool in dotnet-trace dotnet-counters dotnet-stack; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            retry tool_install "$tool" ||
                echo "install-deps: $tool could not be installed (4 tries); its tests will skip"
        fi
    done
fi
