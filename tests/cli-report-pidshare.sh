#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-report-pidshare.sh - `report` and `convert` over the files of two processes that had
# one pid (thread ids wrap the pid space, so one recording can hold two such processes: record
# names the later X.<pid>-2.nettrace; cli-record-pidreuse) keep them apart: two processes, the
# later one labelled "name (pid #2)", every thread of each under its own, none joined with the
# other's thread of the same id (the main threads' ids are both the pid). Before, the merge keyed
# processes and threads by id alone: one process, and the two main threads (and any pair of
# workers that got one tid) one thread. The pids are made equal with a pid namespace per
# recording (unshare --pid), not by wrapping the pid space.
source "$(dirname "$0")/ipc-lib.sh"
WORKLOAD=$B/samples/pp-sample-workload
[[ -x $WORKLOAD ]] || fail "missing $WORKLOAD"
for n in a b; do
  if ! unshare --pid --fork --mount-proc "${RECORD_ENV[@]}" "$PIPEPROF" record -q \
    -o "$T/$n.nettrace" -- "$WORKLOAD" 1 >/dev/null 2>"$T/$n.err"; then
    cat "$T/$n.err" >&2
    skip "unshare --pid --fork --mount-proc failed (no pid namespaces here): two recordings of one pid cannot be made"
  fi
done
json() { "$PIPEPROF" report --format json "$@"; }
json "$T/a.nettrace" >"$T/a.json"
json "$T/b.nettrace" >"$T/b.json"
json "$T/a.nettrace" "$T/b.nettrace" >"$T/ab.json"
"$PIPEPROF" convert "$T/a.nettrace" "$T/b.nettrace" --format folded >"$T/ab.folded"
rc=0
python3 - "$T" <<'PY' || rc=$?
import json, sys
t = sys.argv[1]
a, b, ab = (json.load(open("%s/%s.json" % (t, n))) for n in ("a", "b", "ab"))
if a["process_id"] != b["process_id"]:
    print("  the two recordings got pids %d and %d" % (a["process_id"], b["process_id"]))
    sys.exit(77)
pid = a["process_id"]
procs = sorted((p["process_id"], p.get("instance", 1), p["samples"]) for p in ab["processes"])
print("  pid %d; merged: %d threads (files: %d + %d), processes %s" %
      (pid, ab["threads"], a["threads"], b["threads"], procs))
bad = []
if procs != [(pid, 1, a["samples"]), (pid, 2, b["samples"])]:
    bad.append("processes %s, want pid %d twice with the files' samples %d and %d" %
               (procs, pid, a["samples"], b["samples"]))
if ab["threads"] != a["threads"] + b["threads"]:
    bad.append("%d threads, the files %d and %d" % (ab["threads"], a["threads"], b["threads"]))
if ab["samples"] != a["samples"] + b["samples"]:
    bad.append("%d samples, the files %d and %d" % (ab["samples"], a["samples"], b["samples"]))
ids = {(th["thread_id"], th.get("process_instance", 1)) for th in ab["per_thread"]}
if len(ids) != len(ab["per_thread"]) or any(th["thread_id"] > 2**32 for th in ab["per_thread"]):
    bad.append("thread ids not as the traces said them: %s" % ab["per_thread"])
labels = {l.split(";", 1)[0] for l in open("%s/ab.folded" % t)}
want = {"pp-sample-workload (%d)" % pid, "pp-sample-workload (%d #2)" % pid}
if labels != want:
    bad.append("folded process labels %s, want %s" % (sorted(labels), sorted(want)))
for m in bad:
    print("  " + m)
sys.exit(1 if bad else 0)
PY
((rc != 77)) || skip "the pid namespaces gave the two recordings different pids"
((rc == 0)) || fail "the two processes of one pid were not kept apart"
echo "cli-report-pidshare: ok"
