#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/dotnet-overhead.sh [REPS] [UNITS] - what the agent costs a .NET app: the mixed test app
# (tests/dotnet/mixed) does a fixed amount of work (--work UNITS: 40 % in managed code, 35 % in
# P/Invoke'd native code, 25 % on a native thread; default 200000 units, about 2.3 CPU-s here)
# in each of these configurations, alternating in the same run, REPS times (default 5), in an
# order that rotates every repetition:
#   bare             dotnet mixed.dll
#   preload          LD_PRELOAD=libpipeprof.so and nothing else (the agent's default settings;
#                    no client, so nothing samples)
#   preload+collect  the same, and a session of the agent's samples for the whole run
#                    (PIPEPROF_DIAGNOSTIC_PORT, `pipeprof collect --socket` with the SampleProfiler
#                    and pipeprof providers: CPU mode at the default 99 Hz; the runtime's part of
#                    the merged session is its rundown only): the agent sampling the .NET host
#   bare+trace       no agent; `pipeprof collect -p` with dotnet-trace's default providers for
#                    the whole run: what a dotnet-trace user pays today (the runtime's own
#                    SampleProfiler suspends the runtime 1000 times a second)
#   preload+trace    the same client against the agent: the runtime's session without its
#                    SampleProfiler, merged with the agent's samples (docs/dotnet-hosts.md)
# Per run it prints the wall time, the process's CPU time (user + system, every thread: the
# runtime's and the agent's) and the work threads' CPU time (the three parts, measured by the app
# with the thread CPU clock: a signal handler's time counts there). Then per configuration the
# medians and their overhead against bare. The target (issue 11) is <= 2 % of the process's CPU
# time. See docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${PP_BINARY_DIR:-build}
REPS=${1:-5}
UNITS=${2:-200000}
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
command -v dotnet >/dev/null || { echo "dotnet-overhead: the .NET SDK (dotnet) is not installed" >&2; exit 1; }
[[ -f $B/lib/libpipeprof.so && -x $B/bin/pipeprof ]] || { echo "dotnet-overhead: build first ($B)" >&2; exit 1; }
APP=$(bash tests/dotnet/mixed/build.sh "$B/dotnet-mixed")
T=$(mktemp -d /tmp/pp-dotnet-overhead.XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$APP" "$B/lib/libpipeprof.so" "$B/bin/pipeprof" "$T" "$REPS" "$UNITS" <<'PY'
import json, os, statistics, subprocess, sys, time

app, shim, pipeprof, tmp, reps, units = sys.argv[1:7]
reps = int(reps)
configs = ["bare", "preload", "preload+collect", "bare+trace", "preload+trace"]
sock, truth = os.path.join(tmp, "agent.sock"), os.path.join(tmp, "truth.json")


def run(cfg):
    plain = dict(os.environ, TMPDIR=tmp)
    env = dict(plain)
    if cfg.startswith("preload"):
        env["LD_PRELOAD"] = shim
    if cfg == "preload+collect":
        env["PIPEPROF_DIAGNOSTIC_PORT"] = sock
    for f in (sock, truth):
        if os.path.exists(f):
            os.unlink(f)
    t0 = time.monotonic()
    app_p = subprocess.Popen(["dotnet", app, "0", truth, "--work", units], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    collect = None
    if cfg == "preload+collect":
        while not os.path.exists(sock) and app_p.poll() is None:
            time.sleep(0.002)
        collect = subprocess.Popen([pipeprof, "collect", "--socket", sock, "--providers",
                                    "Microsoft-DotNETCore-SampleProfiler,pipeprof:0:4",
                                    "-o", os.path.join(tmp, "c.nettrace")],
                                   env=plain, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elif cfg.endswith("+trace"):
        # the runtime's socket (bare) or the agent's (preload) under the public name
        pattern = "dotnet-diagnostic-%d-" % app_p.pid
        while app_p.poll() is None and not any(f.startswith(pattern) for f in os.listdir(tmp)):
            time.sleep(0.002)
        collect = subprocess.Popen([pipeprof, "collect", "-p", str(app_p.pid), "--providers",
                                    "Microsoft-Windows-DotNETRuntime:0x100003801D:4,"
                                    "Microsoft-DotNETCore-SampleProfiler:0xF00000000000:4",
                                    "-o", os.path.join(tmp, "t.nettrace")],
                                   env=plain, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(app_p.pid, 0)
    wall = time.monotonic() - t0
    if collect is not None:
        collect.wait(timeout=60)
    if status != 0:
        sys.exit("dotnet-overhead: %s run failed (wait status %d)" % (cfg, status))
    t = json.load(open(truth))
    work = (t["managed_ns"] + t["pinvoke_ns"] + t["native_thread_ns"]) / 1e9
    return wall, usage.ru_utime + usage.ru_stime, work


results = {c: [] for c in configs}
print("%d x %s work units per configuration" % (reps, units))
print("%-4s %-16s %8s %14s %11s" % ("rep", "config", "wall s", "process CPU s", "work CPU s"))
for r in range(reps):
    for i in range(len(configs)):
        c = configs[(i + r) % len(configs)]
        row = run(c)
        results[c].append(row)
        print("%-4d %-16s %8.3f %14.3f %11.3f" % (r + 1, c, *row), flush=True)

base = [statistics.median(v[k] for v in results["bare"]) for k in range(3)]
print()
print("%-16s %8s %8s %14s %8s %11s %8s" % ("median", "wall s", "", "process CPU s", "", "work CPU s", ""))
for c in configs:
    med = [statistics.median(v[k] for v in results[c]) for k in range(3)]
    cells = []
    for k in range(3):
        cells += ["%.3f" % med[k], "" if c == "bare" else "%+.2f%%" % (100.0 * (med[k] / base[k] - 1))]
    print("%-16s %8s %8s %14s %8s %11s %8s" % (c, *cells))
print("target: process CPU overhead <= 2 % (preload+collect against bare); "
      "preload+trace against bare+trace is what pipeprof changes for a dotnet-trace user")
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
