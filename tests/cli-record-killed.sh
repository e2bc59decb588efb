#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-killed.sh - a process that `pipeprof record` records and that a signal kills
# (SIGTERM at its default: docker stop, systemctl stop) never writes its rundown, which names its
# frames; record names them from the files its trace's modules point to (cli/names.c). Before
# (until 2026-11-29), report said "named frames: 0.0%", every frame pp-sample-workload!0x16c4.
#  1. CMD killed, in CPU and wall mode: its report names as large a share of its frames as a
#     graceful exit's (within 3 points), the workload's functions by name, and record and report
#     say the names came from files.
#  2. Followed children killed with CMD (the whole process group, as Ctrl-C in a terminal or
#     docker stop does), in CPU and wall mode: each child's trace is named the same way.
#  3. The binary replaced on disk after it was loaded (a rebuild): its frames stay unnamed
#     (module!offset, never another binary's names) and record and report say why.
#  4. `report` of a trace cut before its rundown that record did not name (the recording in the
#     making): names read from the files at the report, and stderr says so; and a graceful
#     recording with its rundown taken away (tests/tools/strip-rundown.c) converts to the same
#     folded stacks, names included, as with it.
#  5. A binary without a build-id: named while its file is unmodified, refused once modified
#     after the recording began (no build-id to tell it from another), or once an older file of
#     the same size was moved over it (its inode's change time tells); stripped too, its
#     functions named by their unwind tables' ranges as the agent names them.
source "$(dirname "$0")/ipc-lib.sh"
run_env=("${RECORD_ENV[@]}") # a sanitizer build's runtime first (tests/ipc-lib.sh)
WORKLOAD=$B/samples/pp-sample-workload
[[ -x $WORKLOAD ]] || fail "missing build output $WORKLOAD"

# named FILE...: the report's "named frames" share (a number, percent).
named() {
  "$PIPEPROF" report "$@" 2>/dev/null | sed -n 's/.*named frames: \([0-9.]*\)%.*/\1/p'
}
# at_least A B: A >= B (decimals).
at_least() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' "$1" "$2"; }

# record_bg MODE OUT CMD...: records CMD in the background into OUT (stderr in OUT.err); record's
# pid in $rp, CMD's in $cmd_pid once it started.
record_bg() {
  local mode=$1 out=$2
  shift 2
  "${run_env[@]}" "$PIPEPROF" record --mode "$mode" --hz 199 -o "$out" -- "$@" 2>"$out.err" &
  rp=$!
  PP_PIDS+=($rp)
  cmd_pid=
  wait_until 60 "$mode: CMD started under record" cmd_started
}
cmd_started() {
  cmd_pid=$(pgrep -P "$rp" | head -1)
  [[ -n $cmd_pid ]]
}
# workload_pids PGID: the workloads of the process group (by process name: sh's command line names
# the workload too).
workload_pids() { pgrep -g "$1" pp-sample-work || true; }

for mode in cpu wall; do
  d=$T/$mode
  mkdir "$d"
  # The reference: a graceful exit once each worker used 1 s of CPU.
  "${run_env[@]}" "$PIPEPROF" record --mode "$mode" --hz 199 -o "$d/ok.nettrace" -- \
    "$WORKLOAD" 120 --cpu 1 >/dev/null 2>"$d/ok.err" || { cat "$d/ok.err" >&2; fail "$mode: graceful record failed"; }
  ok=$(named "$d/ok.nettrace")
  [[ -n $ok ]] || fail "$mode: no named share in the graceful report"
  # The same trace without its names, named from the files: the agent's names, frame for frame.
  "$B/tests/strip-rundown" "$d/ok.nettrace" "$d/stripped.nettrace" >/dev/null
  "$PIPEPROF" convert --format folded -o "$d/ok.folded" "$d/ok.nettrace" 2>/dev/null
  "$PIPEPROF" convert --format folded -o "$d/stripped.folded" "$d/stripped.nettrace" 2>"$d/stripped.err"
  grep -q 'names read from files now' "$d/stripped.err" ||
    { cat "$d/stripped.err" >&2; fail "$mode: the trace without its rundown was not named from files"; }
  diff -u "$d/ok.folded" "$d/stripped.folded" >&2 ||
    fail "$mode: names from files differ from the agent's rundown's for the same samples"

  # 1. CMD killed by SIGTERM once it used 1 s of CPU.
  record_bg "$mode" "$d/k.nettrace" "$WORKLOAD" 120 --until "$d/never"
  read -r cpu waited < <(wait_cpu "$cmd_pid" 1 60)
  # 4's trace: the recording in the making, cut before any rundown (record has not named it).
  cp "$(ls "$d"/.k.nettrace.* | head -1)" "$d/partial.nettrace"
  kill -TERM "$cmd_pid"
  set +e
  wait "$rp"
  rc=$?
  set -e
  [[ $rc == 143 ]] || { cat "$d/k.nettrace.err" >&2; fail "$mode: record's status $rc, want 143 (CMD killed by SIGTERM)"; }
  grep -q "ended before its rundown: [0-9]* of [0-9]* frames named from the files" "$d/k.nettrace.err" ||
    { cat "$d/k.nettrace.err" >&2; fail "$mode: record did not say it named the killed process's frames from files"; }
  killed=$(named "$d/k.nettrace")
  note "$mode: graceful $ok% named; killed after $cpu s of CPU ($waited s): $killed% named; $(grep -m1 'ended before' "$d/k.nettrace.err")"
  at_least "$killed" "$(python3 -c "print($ok - 3)")" ||
    fail "$mode: killed process: $killed% of frames named, graceful exit $ok%"
  "$PIPEPROF" report "$d/k.nettrace" >"$d/k.report" 2>&1
  grep -q 'pp-sample-workload!pp_workload_fn_a' "$d/k.report" ||
    { cat "$d/k.report" >&2; fail "$mode: pp_workload_fn_a not named in the killed process's report"; }
  grep -q '^names from files (its process ended before its rundown): ' "$d/k.report" ||
    fail "$mode: the report does not say the names came from files"

  # 4. The cut trace record never named: report names it from the files, and says so.
  "$PIPEPROF" report "$d/partial.nettrace" >"$d/partial.report" 2>"$d/partial.err"
  grep -q 'names read from files now: ' "$d/partial.err" ||
    { cat "$d/partial.err" >&2; fail "$mode: report of a cut trace did not say it named from files"; }
  partial=$(sed -n 's/.*named frames: \([0-9.]*\)%.*/\1/p' "$d/partial.report")
  at_least "$partial" "$(python3 -c "print($ok - 3)")" ||
    fail "$mode: report of the cut trace: $partial% named, graceful exit $ok%"
done
echo "ok   CMD killed by SIGTERM: its frames named from files as a graceful exit's (CPU and wall)"

# 2. Followed children killed with CMD: the whole process group gets SIGTERM.
for mode in cpu wall; do
  d=$T/tree-$mode
  mkdir "$d"
  record_bg "$mode" "$d/t.nettrace" sh -c '"$1" 120 --until "$2" & "$1" 120 --until "$2"; wait' sh "$WORKLOAD" "$d/never"
  wait_until 60 "$mode: two workloads started" eval '[[ $(workload_pids "$cmd_pid" | wc -l) -ge 2 ]]'
  for p in $(workload_pids "$cmd_pid"); do
    read -r cpu waited < <(wait_cpu "$p" 1 60)
  done
  kill -TERM -- "-$cmd_pid"
  set +e
  wait "$rp"
  set -e
  children=("$d"/t.[0-9]*.nettrace)
  [[ ${#children[@]} -ge 2 && -f ${children[0]} ]] ||
    { cat "$d/t.nettrace.err" >&2; fail "$mode tree: ${#children[@]} child traces, want 2 (the workloads)"; }
  for f in "${children[@]}"; do
    share=$(named "$f")
    note "$mode tree: $(basename "$f"): $share% named"
    at_least "$share" 97 || fail "$mode tree: child trace $(basename "$f"): $share% of frames named"
    "$PIPEPROF" report "$f" 2>/dev/null | grep -q '^names from files' ||
      fail "$mode tree: the report of $(basename "$f") does not say its names came from files"
  done
  grep -q "frames of cut traces named from files" "$d/t.nettrace.err" ||
    { cat "$d/t.nettrace.err" >&2; fail "$mode tree: the summary does not count the frames named from files"; }
done
echo "ok   followed children killed with CMD: their frames named from files (CPU and wall)"

# 3. The recorded binary replaced on disk (as a rebuild does) while it ran: not named from the
# new file, and said.
d=$T/replaced
mkdir "$d"
cp "$WORKLOAD" "$d/pp-sample-workload"
record_bg cpu "$d/r.nettrace" "$d/pp-sample-workload" 120 --until "$d/never"
read -r cpu waited < <(wait_cpu "$cmd_pid" 1 60)
cp "$BUSY" "$d/new" # another program: another build-id
mv -f "$d/new" "$d/pp-sample-workload"
kill -TERM "$cmd_pid"
set +e
wait "$rp"
set -e
grep -q "not the ones loaded ($d/pp-sample-workload (its build-id differs" "$d/r.nettrace.err" ||
  { cat "$d/r.nettrace.err" >&2; fail "replaced: record did not say the binary is not the one loaded"; }
"$PIPEPROF" report "$d/r.nettrace" >"$d/r.report" 2>&1
grep -q "^names from files .*not the ones loaded ($d/pp-sample-workload" "$d/r.report" ||
  { cat "$d/r.report" >&2; fail "replaced: the report does not say why its frames stayed unnamed"; }
grep -q 'pp-sample-workload!0x' "$d/r.report" ||
  fail "replaced: no pp-sample-workload!0x... frame: named from the new file?"
if grep -q 'pp-sample-workload![a-z_]' "$d/r.report"; then
  cat "$d/r.report" >&2
  fail "replaced: a frame of the replaced binary has a name (from the new file?)"
fi
grep -q 'libc.so![a-z_]' "$d/r.report" || fail "replaced: libc's frames, whose file is the same, not named"
note "replaced: $(grep -m1 '^names from files' "$d/r.report")"
echo "ok   a binary replaced since it was loaded: its frames stay unnamed, and both say why"

# 5. A binary without a build-id: named from its file while the file is as it was when the
# recording began, not once it was modified after.
command -v objcopy >/dev/null || skip "objcopy (binutils) is not installed: cases 1-4 ran"
# moved: an older build of the same size (pp_workload_fn_a renamed pp_workload_fn_z, its mtime in
# 2020) moved over it while it runs, as `mv`, `cp -p` or a package upgrade put an older file in
# place: its mtime is older than the recording, only the inode's change time tells. Before
# (2026-11-29) it was taken for the loaded file and named pp_workload_fn_a's samples
# pp_workload_fn_z. Since fileident the trace says which file was loaded (ModuleLoad's File*
# fields), and the reasons are its: another inode at the path, or the same one modified; an older
# agent's trace by the times, tests/cli-fileident.sh.
for variant in unmodified touched moved; do
  d=$T/nobuildid-$variant
  mkdir "$d"
  objcopy --remove-section .note.gnu.build-id "$WORKLOAD" "$d/pp-sample-workload"
  if [[ $variant == moved ]]; then
    objcopy --remove-section .note.gnu.build-id --redefine-sym pp_workload_fn_a=pp_workload_fn_z \
      "$WORKLOAD" "$d/older"
    touch -d '2020-01-01 00:00' "$d/older"
  fi
  record_bg cpu "$d/n.nettrace" "$d/pp-sample-workload" 120 --until "$d/never"
  read -r cpu waited < <(wait_cpu "$cmd_pid" 1 60)
  [[ $variant == touched ]] && touch "$d/pp-sample-workload"
  [[ $variant == moved ]] && mv -f "$d/older" "$d/pp-sample-workload"
  kill -TERM "$cmd_pid"
  set +e
  wait "$rp"
  set -e
  share=$(named "$d/n.nettrace")
  note "no build-id, $variant: $share% named; $(grep -m1 'ended before' "$d/n.nettrace.err")"
  if [[ $variant == touched ]]; then
    grep -q "not the ones loaded ($d/pp-sample-workload (file changed since it was loaded: modified)" "$d/n.nettrace.err" ||
      { cat "$d/n.nettrace.err" >&2; fail "no build-id: a file modified after the recording began was not refused"; }
  elif [[ $variant == moved ]]; then
    if "$PIPEPROF" report "$d/n.nettrace" 2>/dev/null | grep -q 'pp_workload_fn_z'; then
      fail "no build-id: an older file moved into place named the loaded one's frames (pp_workload_fn_z)"
    fi
    grep -q "not the ones loaded ($d/pp-sample-workload (file changed since it was loaded: another file is at its path)" "$d/n.nettrace.err" ||
      { cat "$d/n.nettrace.err" >&2; fail "no build-id: an older file moved into place after the recording began was not refused"; }
  else
    at_least "$share" 97 || { cat "$d/n.nettrace.err" >&2; fail "no build-id, unmodified: $share% of frames named"; }
    "$PIPEPROF" report "$d/n.nettrace" 2>/dev/null | grep -q 'pp-sample-workload!pp_workload_fn_a' ||
      fail "no build-id, unmodified: pp_workload_fn_a not named"
  fi
done
# Stripped as well: its functions are known by the unwind tables only (module!0x<start>); the
# file's, read without a build-id to check, must give the agent's ranges.
d=$T/stripped
mkdir "$d"
strip --strip-all -R .note.gnu.build-id -o "$d/pp-sample-workload" "$WORKLOAD"
"${run_env[@]}" "$PIPEPROF" record --mode cpu --hz 199 -o "$d/ok.nettrace" -- \
  "$d/pp-sample-workload" 120 --cpu 0.5 >/dev/null 2>"$d/ok.err" || { cat "$d/ok.err" >&2; fail "stripped: record failed"; }
"$B/tests/strip-rundown" "$d/ok.nettrace" "$d/stripped.nettrace" >/dev/null
"$PIPEPROF" convert --format folded -o "$d/ok.folded" "$d/ok.nettrace" 2>/dev/null
"$PIPEPROF" convert --format folded -o "$d/stripped.folded" "$d/stripped.nettrace" 2>/dev/null
grep -q 'pp-sample-workload!0x' "$d/ok.folded" || fail "stripped: no pp-sample-workload!0x... frame in the agent's names"
diff -u "$d/ok.folded" "$d/stripped.folded" >&2 ||
  fail "stripped, no build-id: names from the file's unwind tables differ from the agent's"
echo "ok   a binary without a build-id: named while unmodified, not once modified or replaced by an older file after the start; stripped, by its unwind tables as the agent names it"
# A trace is anyone's to write, and the paths it names are read: one that is a FIFO now must be
# refused, not opened and waited on (report hung there until a writer came), nor a device read.
rm "$d/pp-sample-workload"
mkfifo "$d/pp-sample-workload"
rc=0
timeout 120 "$PIPEPROF" report "$d/stripped.nettrace" >"$d/fifo.report" 2>"$d/fifo.err" || rc=$?
[[ $rc == 0 ]] || { cat "$d/fifo.err" >&2; fail "a module path that is a FIFO: report ended with $rc (124: it waited on the FIFO)"; }
grep -q 'pp-sample-workload!0x' "$d/fifo.report" ||
  { cat "$d/fifo.report" >&2; fail "a module path that is a FIFO: its frames named from something"; }
echo "ok   a module path that is a FIFO now: refused at once, its frames left unnamed"
