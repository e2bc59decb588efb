# SPDX-License-Identifier: MIT
# tests/ipc-lib.sh - shared by the tests/ipc-*.sh scripts (sourced, not run): paths, loud skips,
# a private TMPDIR per test (so sockets never mix with other tests), the C# target app built once
# per build directory, and cleanup of every process a test started.
set -euo pipefail
# A command of the script itself that fails ends it (set -e): it says which (not where a script
# turned set -e off to take a status). idle-agent failed once under ASan at load 20 with no word
# at all (13 s in; not reproduced).
pp_on_err() { [[ $- != *e* ]] || echo "FAIL: ${0##*/} line $2: \"$BASH_COMMAND\" failed ($1)" >&2; }
trap 'pp_on_err $? $LINENO' ERR
B=${PP_BINARY_DIR:?PP_BINARY_DIR is not set}
S=${PP_SOURCE_DIR:?PP_SOURCE_DIR is not set}
PIPEPROF=$B/bin/pipeprof
SHIM=$B/lib/libpipeprof.so
SEND=$B/tests/ipc-send
BUSY=$B/samples/pp-sample-busy
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
export PATH="$PATH:$HOME/.dotnet/tools"

skip() { echo "SKIP (loud): $*" >&2; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "# $*" >&2; }

for f in "$PIPEPROF" "$SHIM" "$SEND" "$BUSY"; do
  [[ -x $f || -f $f ]] || fail "missing build output $f"
done

# LD_PRELOAD value for a pipeprof host; a sanitizer build needs its runtime preloaded too.
PRELOAD=$SHIM
# (ldd fails on another architecture's library: a cross build's, run under qemu)
asan=$(ldd "$SHIM" 2>/dev/null | awk '/libasan/ {print $3}' || true)
[[ -n $asan ]] && PRELOAD="$asan:$SHIM"
# Prefix for `pipeprof record`, which appends the agent to LD_PRELOAD: the sanitizer runtime
# must come first (and its leak check would report the host's own allocations).
RECORD_ENV=()
[[ -n $asan ]] && RECORD_ENV=(env "LD_PRELOAD=$asan" "ASAN_OPTIONS=detect_leaks=0")
# ThreadSanitizer's runtime comes right after the agent instead (before it, or left to load after
# libc as the agent's dependency, it crashes an uninstrumented host at start: cli/record.c's
# pp_record_add_sanitizer, which does the same for `pipeprof record`). The recorded tree's forked
# children start the agent's threads, which TSan refuses after a multi-threaded fork by default.
tsan=$(ldd "$SHIM" 2>/dev/null | awk '/libtsan/ {print $3}' || true)
# The same holds for a preloaded host that forks (output-file's fork host died so under TSan):
# every process of a test runs with die_after_fork=0, which changes nothing for one that starts
# no thread after a fork.
if [[ -n $tsan ]]; then
  PRELOAD="$SHIM:$tsan"
  export TSAN_OPTIONS="${TSAN_OPTIONS:-} die_after_fork=0"
  RECORD_ENV=(env "TSAN_OPTIONS=$TSAN_OPTIONS")
fi

T=$(mktemp -d /tmp/pp-ipc-test.XXXXXX)
chmod 755 "$T" # only the socket's own mode may keep other users out
export TMPDIR=$T
PP_PIDS=()
pp_cleanup() {
  local p
  for p in "${PP_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PP_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap pp_cleanup EXIT

# unix_listening PATH: the socket bound at PATH listens, as /proc/net/unix shows it (flags
# __SO_ACCEPTCON, 00010000). A socket's file appears at its bind, before its listen(), and a
# connect in between is refused (ECONNREFUSED): the agent's server, as the .NET runtime's, binds
# then listens, and a thread preempted between the two on a loaded machine leaves the window open
# for milliseconds (ipc-faults' first request, made at once, came back "noconnect" so). A socket
# /proc/net/unix does not list at all (bound in another network namespace) is taken as listening.
unix_listening() {
  awk -v p="$1" '$NF == p { seen = 1; if ($4 == "00010000") on = 1 } END { exit !(on || !seen) }' \
    /proc/net/unix 2>/dev/null
}

# wait_socket PID: the path of PID's diagnostic socket once it exists and listens (60 s at most: a
# .NET runtime's start-up took over 10 s at load 20 on 2 cores).
wait_socket() {
  local i f
  for i in $(seq 600); do
    for f in "$TMPDIR"/dotnet-diagnostic-"$1"-*-socket; do
      [[ -S $f ]] && unix_listening "$f" && { echo "$f"; return 0; }
    done
    sleep 0.1
  done
  fail "no diagnostic socket listening for pid $1"
}

# wait_until MAX WHAT CMD...: runs CMD every 0.1 s until it succeeds; fails saying WHAT did not
# happen once MAX seconds of wall time have passed first. For the event a step needs (a line
# printed, samples written), where a fixed sleep is outlasted by a loaded machine's start-ups.
wait_until() {
  local max=$1 what=$2 start=$SECONDS
  shift 2
  until "$@"; do
    ((SECONDS - start < max)) || fail "$what: not within $max s"
    sleep 0.1
  done
}

# cpu_ticks PID: the CPU time PID's threads have used so far, in clock ticks (/proc/PID/stat's
# utime + stime; getconf CLK_TCK ticks a second), 0 once PID is gone.
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $12 + $13}' || echo 0; }

# wait_cpu PID SECONDS MAX: returns once PID has used SECONDS (whole) more CPU time (all its threads
# together) than when called, or after MAX seconds of wall time, or when PID is gone; prints
# "CPU WALL", the CPU seconds it used and the wall seconds waited. For a recording whose samples
# must cover a given amount of CPU time: the wall time that takes on a loaded machine is unknown.
wait_cpu() {
  local tck t0 t start=$SECONDS
  tck=$(getconf CLK_TCK)
  t0=$(cpu_ticks "$1")
  t=$t0
  while ((SECONDS - start < $3)) && [[ -e /proc/$1 ]]; do
    t=$(cpu_ticks "$1")
    ((t - t0 < $2 * tck)) || break
    sleep 0.1
  done
  echo "$(((t - t0) / tck)) $((SECONDS - start))"
}

# dotnet_trace_ps OUT: `dotnet-trace ps` into OUT, 0 when it succeeded. dotnet-trace 10.x reads
# each process's name after listing them and throws "Process has exited" when any process on the
# machine exits in between (CI, 2026-11-26: a parallel test's child). That race is the tool's and
# says nothing of the host, so it is tried again, loudly, up to 4 times; any other failure is not.
dotnet_trace_ps() {
  local out=$1 try
  for try in 1 2 3 4; do
    "$DT" ps >"$out" 2>&1 && return 0
    grep -q "Process has exited" "$out" || return 1
    note "dotnet-trace ps, try $try: a process exited while it listed them; again"
    sleep 0.3
  done
  return 1
}

# dotnet_app: prints the path of the C# target (built once per build directory).
dotnet_app() {
  command -v dotnet >/dev/null || skip "dotnet is not installed"
  local out=$B/dotnet-ipc
  (
    flock 9
    if [[ ! -f $out/app/dotnet-ipc.dll || $S/tests/dotnet-ipc/Program.cs -nt $out/app/dotnet-ipc.dll ]]; then
      rm -rf "$out/src" && mkdir -p "$out/src"
      cp "$S/tests/dotnet-ipc/dotnet-ipc.csproj" "$S/tests/dotnet-ipc/Program.cs" "$out/src/"
      dotnet build "$out/src/dotnet-ipc.csproj" -c Release -o "$out/app" >"$out/build.log" 2>&1 ||
        { cat "$out/build.log" >&2; exit 1; }
    fi
  ) 9>"$B/dotnet-ipc.lock" || fail "cannot build the C# target app"
  echo "$out/app/dotnet-ipc.dll"
}

# dotnet_project NAME: builds tests/dotnet/NAME (NAME.csproj and Program.cs) from a copy, once per
# build directory, and prints the path of NAME.dll; skips loudly when its NuGet packages cannot be
# restored here.
dotnet_project() {
  command -v dotnet >/dev/null || skip "the .NET SDK (dotnet) is not installed"
  local name=$1 src=$S/tests/dotnet/$1 out=$B/dotnet-$1 rc=0
  (
    flock 9
    if [[ ! -f $out/app/$name.dll || $src/Program.cs -nt $out/app/$name.dll ]]; then
      rm -rf "$out/src" && mkdir -p "$out/src"
      cp "$src/$name.csproj" "$src/Program.cs" "$out/src/"
      if ! timeout 300 dotnet build -c Release -o "$out/app" "$out/src" >"$out/build.log" 2>&1; then
        grep -q "NU1101\|NU1102\|Unable to find package" "$out/build.log" && exit 77
        cat "$out/build.log" >&2
        exit 1
      fi
    fi
  ) 9>"$B/dotnet-$name.lock" || rc=$?
  [[ $rc == 77 ]] && skip "the NuGet packages of tests/dotnet/$name cannot be restored here"
  [[ $rc == 0 ]] || fail "building tests/dotnet/$name"
  echo "$out/app/$name.dll"
}

# mixed_app: prints the path of the mixed test app's mixed.dll (tests/dotnet/mixed: managed code,
# P/Invoke'd native code in libburn.so and a native thread), built once per build directory.
mixed_app() {
  command -v dotnet >/dev/null || skip "the .NET SDK (dotnet) is not installed"
  bash "$S/tests/dotnet/mixed/build.sh" "$B/dotnet-mixed" || fail "building tests/dotnet/mixed"
}

# mixed_setup: for the tests of the mixed app with dotnet-trace; skips loudly without the .NET
# SDK, dotnet-trace or a plain (not sanitized) build, and sets DT (dotnet-trace), APP (mixed.dll)
# and CHECK (tests/dotnet/mixed-check, TraceEvent's reading of a trace of it).
mixed_setup() {
  command -v dotnet >/dev/null || skip "the .NET SDK (dotnet) is not installed"
  DT=$(command -v dotnet-trace || true)
  [[ -n $DT ]] || skip "dotnet-trace is not installed (dotnet tool install -g dotnet-trace)"
  [[ -z ${asan:-} ]] || skip "under a sanitizer the runtime would need the sanitizer preloaded first; run in the plain build"
  APP=$(mixed_app)
  CHECK=$(dotnet_project mixed-check)
}

# check_trace FILE: a complete nettrace that `pipeprof dump` reads.
check_trace() {
  [[ -s $1 ]] || fail "$1 is empty"
  [[ $(head -c 8 "$1") == Nettrace ]] || fail "$1 does not start with Nettrace"
  [[ $(tail -c 1 "$1" | od -An -tx1 | tr -d ' ') == 01 ]] || fail "$1 has no end-of-stream tag"
  "$PIPEPROF" dump "$1" >"$1.dump" 2>&1 || { tail -5 "$1.dump" >&2; fail "pipeprof dump cannot read $1"; }
}

# check_process_info FILE: the trace of a pipeprof host names its process (after check_trace).
check_process_info() {
  grep -q 'ProcessInfo.*CommandLine=".*pp-sample-busy' "$1.dump" ||
    { head -5 "$1.dump" >&2; fail "$1 has no ProcessInfo event naming pp-sample-busy"; }
}
