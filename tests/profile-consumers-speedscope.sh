#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/profile-consumers-speedscope.sh - the speedscope, chromium and folded formats, checked by their
# consumers. A live `pipeprof record` of the sample workload and the committed traces
# (tests/data/) are converted; then:
# - speedscope: every profile's total weight equals its thread's samples in `report`, and the
#   totals agree to the sample; the file conforms to the file-format schema that the npm package
#   `speedscope` ships (checked with ajv); and speedscope itself, from that package, loads the
#   file in headless Chromium and shows every thread's profile without an import error.
# - folded: FlameGraph's flamegraph.pl draws an SVG of every sample.
# - chromium: the Trace Event Format's rules (every event has ph/pid/tid/ts/name, B and E
#   balanced and properly nested per thread, time never going back), and the flame chart's
#   slices cover every sampled thread.
# npm (the registry) and Chromium (Debian package chromium) are installed by
# tools/install-deps.sh; where either is missing, that part says loudly that it skipped.
source "$(dirname "$0")/ipc-lib.sh"
WORKLOAD=$B/samples/pp-sample-workload
skipped=()

traces=("$S/tests/data/pipeprof-workload-wall.nettrace" "$S/tests/data/dotnet10-runtime-sampleprofiler.nettrace")
"${RECORD_ENV[@]}" "$PIPEPROF" record -q --hz 200 -o "$T/live.nettrace" -- "$WORKLOAD" 1 >/dev/null ||
  fail "pipeprof record of the workload"
traces+=("$T/live.nettrace")

# The npm packages, once per build directory (nothing of them is committed).
NPM_DIR=$B/npm-consumers
npm_ready=0
if command -v npm >/dev/null && command -v node >/dev/null; then
  (
    flock 9
    if [[ ! -f $NPM_DIR/node_modules/speedscope/dist/release/index.html || ! -d $NPM_DIR/node_modules/ajv ]]; then
      mkdir -p "$NPM_DIR"
      cd "$NPM_DIR"
      [[ -f package.json ]] || echo '{"private": true}' >package.json
      timeout 300 npm install --no-audit --no-fund speedscope@1.25.0 ajv@8 >"$NPM_DIR/install.log" 2>&1
    fi
  ) 9>"$B/npm-consumers.lock" && npm_ready=1
fi
((npm_ready)) || skipped+=("speedscope's schema and importer: npm or the registry is unavailable")
SS_DIST=$NPM_DIR/node_modules/speedscope/dist/release
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
FLAMEGRAPH=$(command -v flamegraph.pl || true)
[[ -z $FLAMEGRAPH && -f /usr/share/perl5/Devel/NYTProf/flamegraph.pl ]] &&
  FLAMEGRAPH=/usr/share/perl5/Devel/NYTProf/flamegraph.pl
[[ -n $FLAMEGRAPH ]] || skipped+=("flamegraph.pl: neither FlameGraph nor Debian's libdevel-nytprof-perl is installed")

# serve DIR: a static HTTP server on a free loopback port; sets SERVE_URL.
serve() {
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  python3 -m http.server "$port" --bind 127.0.0.1 --directory "$1" >/dev/null 2>&1 &
  PP_PIDS+=($!)
  SERVE_URL=http://127.0.0.1:$port
  for _ in $(seq 600); do curl -s -o /dev/null "$SERVE_URL/" && return 0; sleep 0.1; done # 60 s
  fail "the static server did not start"
}
if ((npm_ready)) && [[ -n $CHROMIUM ]]; then
  mkdir -p "$T/site"
  cp -r "$SS_DIST"/. "$T/site/"
  serve "$T/site"
elif ((npm_ready)); then
  skipped+=("the headless Chromium render: chromium is not installed")
fi

n=0
for trace in "${traces[@]}"; do
  [[ -f $trace ]] || fail "missing $trace"
  n=$((n + 1))
  name=t$n
  "$PIPEPROF" report --format json --threads "$trace" >"$T/$name.report.json"
  "$PIPEPROF" convert "$trace" --format speedscope -o "$T/$name.speedscope.json"
  "$PIPEPROF" convert "$trace" --format chromium -o "$T/$name.chromium.json"
  "$PIPEPROF" convert "$trace" --format folded -o "$T/$name.folded"

  python3 - "$T/$name.report.json" "$T/$name.speedscope.json" "$T/$name.folded" <<'PY' || fail "speedscope totals of $trace"
import json, sys
report = json.load(open(sys.argv[1]))
ss = json.load(open(sys.argv[2]))
folded = sum(int(l.rsplit(" ", 1)[1]) for l in open(sys.argv[3]) if l.strip())
frames = ss["shared"]["frames"]
per_thread = {t["thread_id"]: t["samples"] for t in report["per_thread"] if t["samples"] > 0}
total = 0
assert len(ss["profiles"]) == len(per_thread), (len(ss["profiles"]), len(per_thread))
for prof in ss["profiles"]:
    assert prof["type"] == "sampled" and len(prof["samples"]) == len(prof["weights"])
    tid = int(prof["name"].rsplit("(", 1)[1].rstrip(")"))
    w = sum(prof["weights"])
    assert w == per_thread[tid], (prof["name"], w, per_thread[tid])
    assert prof["endValue"] == w
    for s in prof["samples"]:
        assert all(0 <= i < len(frames) for i in s)
    total += w
assert total == report["samples"] == folded, (total, report["samples"], folded)
# root first: the last frame of a sample is a leaf that report counts as self
leaf_self = {}
for prof in ss["profiles"]:
    for s, w in zip(prof["samples"], prof["weights"]):
        if s:
            f = frames[s[-1]]
            key = (f.get("file", "") + "!" + f["name"]) if f.get("file") else f["name"]
            leaf_self[key] = leaf_self.get(key, 0) + w
top = report["top_self"][0]
assert leaf_self.get(top["function"]) == top["self"], (top, leaf_self.get(top["function"]))
print("speedscope: %d profiles, %d samples = report = folded; top self %s %d" %
      (len(ss["profiles"]), total, top["function"], top["self"]))
PY

  python3 - "$T/$name.chromium.json" "$T/$name.report.json" <<'PY' || fail "chromium trace events of $trace"
import json, sys
doc = json.load(open(sys.argv[1]))
report = json.load(open(sys.argv[2]))
events = doc["traceEvents"]
open_ = {}
last_ts = {}
threads_with_slices = set()
for e in events:
    for k in ("ph", "pid", "tid", "name"):
        assert k in e, (k, e)
    if e["ph"] == "M":
        assert e["name"] in ("process_name", "thread_name") and "name" in e["args"]
        continue
    assert e["ph"] in ("B", "E"), e
    assert isinstance(e["ts"], (int, float)) and e["ts"] >= last_ts.get(e["tid"], 0), e
    last_ts[e["tid"]] = e["ts"]
    stack = open_.setdefault(e["tid"], [])
    if e["ph"] == "B":
        stack.append(e["name"])
        threads_with_slices.add(e["tid"])
    else:
        assert stack and stack[-1] == e["name"], ("unbalanced E", e, stack[-3:])
        stack.pop()
assert all(not s for s in open_.values()), "slices left open"
sampled = {t["thread_id"] for t in report["per_thread"] if t["samples"] > 0}
assert sampled <= threads_with_slices, (sampled - threads_with_slices)
print("chromium: %d events, B/E balanced and nested on %d threads" % (len(events), len(threads_with_slices)))
PY

  # folded: FlameGraph's flamegraph.pl (the copy Debian ships in libdevel-nytprof-perl) draws
  # an SVG whose root frame holds every sample.
  if [[ -n $FLAMEGRAPH ]]; then
    perl "$FLAMEGRAPH" "$T/$name.folded" >"$T/$name.svg" 2>"$T/$name.fg.err" ||
      fail "flamegraph.pl failed on $trace: $(cat "$T/$name.fg.err")"
    python3 - "$T/$name.svg" "$T/$name.report.json" <<'PY' || fail "flamegraph.pl's SVG of $trace"
import json, re, sys, xml.etree.ElementTree as ET
svg = open(sys.argv[1]).read()
ET.fromstring(svg)  # well-formed
n = json.load(open(sys.argv[2]))["samples"]
m = re.search(r"all \(([0-9,]+) samples, 100%\)", svg)
assert m and int(m.group(1).replace(",", "")) == n, (m and m.group(1), n)
print("flamegraph.pl: an SVG of all %d samples" % n)
PY
  fi
  if ((npm_ready)); then
    NODE_PATH=$NPM_DIR/node_modules node "$S/tests/tools/json-schema-check.mjs" \
      "$SS_DIST/file-format-schema.json" "$T/$name.speedscope.json" ||
      fail "$trace: speedscope file does not conform to speedscope's schema"
  fi
  if ((npm_ready)) && [[ -n $CHROMIUM ]]; then
    cp "$T/$name.speedscope.json" "$T/site/$name.json"
    timeout 120 "$CHROMIUM" --headless=new --no-sandbox --disable-gpu --no-first-run \
      --user-data-dir="$T/chromium-profile" --virtual-time-budget=10000 --dump-dom \
      "$SERVE_URL/index.html#profileURL=$SERVE_URL/$name.json" >"$T/$name.dom" 2>"$T/$name.chromium.log" ||
      fail "chromium failed on $trace: $(tail -5 "$T/$name.chromium.log")"
    grep -qi "something went wrong\|failed to import\|unrecognized format" "$T/$name.dom" &&
      fail "speedscope could not import $trace's file"
    python3 - "$T/$name.dom" "$T/$name.speedscope.json" <<'PY' || fail "speedscope did not show every profile of $trace"
import html, json, sys
dom = html.unescape(open(sys.argv[1]).read())
names = [p["name"] for p in json.load(open(sys.argv[2]))["profiles"]]
missing = [n for n in names if n not in dom]
assert not missing, missing
print("speedscope (headless Chromium) shows all %d profiles" % len(names))
PY
  fi
done
for s in "${skipped[@]}"; do echo "SKIP (loud): $s" >&2; done
echo "profile-consumers-speedscope: ok ($n traces)"
