#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record.sh - `pipeprof record -- CMD`: CMD's exit status, stdout and stderr are kept;
# the trace starts at CMD's first instruction and ends complete (rundown, end tag) whether CMD
# returns from main, calls _exit, is a shell that forks and execs children, or is stopped by
# Ctrl-C or --duration; every format is written directly; the private socket directory is
# removed on every path.
source "$(dirname "$0")/ipc-lib.sh"
WORKLOAD=$B/samples/pp-sample-workload
[[ -x $WORKLOAD ]] || fail "missing $WORKLOAD"
run_env=("${RECORD_ENV[@]}") # a sanitizer build's runtime first (tests/ipc-lib.sh)

no_leftovers() {
  local left
  left=$(find "$TMPDIR" -maxdepth 1 -name 'pipeprof-record-*' | head -1)
  [[ -z $left ]] || fail "$1: record left $left behind"
}

json() { "$PIPEPROF" report --format json "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)$2)"; }

# 1. Exit status, stdout and stderr of a shell that forks and execs children and ends with
# `exit 7` (dash leaves through _exit, which skips exit handlers).
# (sleep 2, not 0.5: the wall samples of the shell's wait, over 20 asked, were 15 at load 20 with
# 0.5, record's and the agent's start-up taking part of it; 1 of 3 -Werror runs)
cmd=(sh -c 'echo out-1; ls / >/dev/null; echo err-1 >&2; sleep 2; echo out-2; exit 7')
set +e
"${cmd[@]}" >"$T/bare.out" 2>"$T/bare.err"
bare_rc=$?
start=$(date +%s)
"${run_env[@]}" "$PIPEPROF" record -q --mode wall -o "$T/sh.nettrace" -- "${cmd[@]}" \
  >"$T/rec.out" 2>"$T/rec.err"
rc=$?
set -e
elapsed=$(($(date +%s) - start))
[[ $bare_rc == 7 && $rc == 7 ]] || fail "exit status: bare $bare_rc, recorded $rc"
# Children inherit LD_PRELOAD but not the profiling (PIPEPROF_TARGET_PID): none of them may sit
# out the 30 s suspend timeout waiting for a resume that is not coming. One that does says so on
# stderr (shim/shim.c: "no ResumeRuntime after N ms"), whatever the machine's load; not a bound
# of 15 s on the whole run's wall time, which a loaded machine's start-ups can reach.
if grep -q "no ResumeRuntime" "$T/rec.err"; then
  fail "a child of the recorded shell sat out the suspend timeout ($elapsed s): $(grep "no ResumeRuntime" "$T/rec.err")"
fi
diff -u "$T/bare.out" "$T/rec.out" || fail "stdout changed under record"
diff -u "$T/bare.err" "$T/rec.err" || fail "stderr changed under record (-q)"
"$PIPEPROF" dump --summary --format json "$T/sh.nettrace" >"$T/sh.summary" ||
  fail "the _exit'ed shell's trace is not complete"
rundown=$(python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
print(sum(e["count"] for e in d["events"]
          if e["provider"] == "Microsoft-Windows-DotNETRuntimeRundown" and e["id"] == 144))' "$T/sh.summary")
[[ $rundown -gt 0 ]] || fail "no MethodDCEndVerbose rundown in the trace of a host that left through _exit"
samples=$(json "$T/sh.nettrace" '["samples"]')
[[ $samples -gt 20 ]] || fail "wall mode on the shell: only $samples samples"
no_leftovers "exit 7"
note "forking shell: status 7, output intact, $samples samples, rundown present, ${elapsed}s"

# 1b. The report names the mode the recording was made in, from the agent's Sampling event: a
# wall recording of a program that never waits holds no waiting sample, and the report once took
# that for CPU mode ("mode: cpu (no waiting samples)").
BUSY=$B/samples/pp-sample-busy
[[ -x $BUSY ]] || fail "missing $BUSY"
"${run_env[@]}" "$PIPEPROF" record -q --mode wall -o "$T/busy.nettrace" -- "$BUSY" 1 >/dev/null ||
  fail "record --mode wall of the busy program failed"
busy_waiting=$(json "$T/busy.nettrace" '["waiting_samples"]')
[[ $(json "$T/busy.nettrace" '["mode"]') == wall ]] ||
  fail "report --format json of a wall recording says mode $(json "$T/busy.nettrace" '["mode"]')"
mode_line=$("$PIPEPROF" report "$T/busy.nettrace" | grep '^mode: ')
[[ $mode_line == "mode: wall; "* ]] || fail "report of a wall recording says '$mode_line'"
note "wall recording of a busy program ($busy_waiting waiting samples): '$mode_line'"

# 2. The main job: a CPU-bound program, summary on stderr, named hot functions.
"${run_env[@]}" "$PIPEPROF" record -v --hz 200 -o "$T/w.nettrace" -- "$WORKLOAD" >"$T/w.out" 2>"$T/w.err" ||
  { cat "$T/w.err"; fail "record of the workload failed"; }
grep -q "checksum" "$T/w.out" || fail "the workload's stdout is missing"
for want in "samples in" "effective rate" "lost:" "top 10 functions\|top [0-9]* functions" "pp_workload_fn_c"; do
  grep -q "$want" "$T/w.err" || { cat "$T/w.err"; fail "summary lacks '$want'"; }
done
[[ $(json "$T/w.nettrace" '["truncated"]') == False ]] || fail "workload trace truncated"
# The trace header names the session's interval (200 Hz: 5 ms), not the runtime's 1 ms.
interval=$(json "$T/w.nettrace" '["sampling_interval_ns"]')
[[ $interval == 5000000 ]] || fail "the trace header says a $interval ns interval at 200 Hz"
# A CPU recording says cpu, as the recording says it (no "(no waiting samples)" guess).
[[ $(json "$T/w.nettrace" '["mode"]') == cpu ]] || fail "report --format json of a CPU recording says another mode"
mode_line=$("$PIPEPROF" report "$T/w.nettrace" | grep '^mode: ')
[[ $mode_line == "mode: cpu; "* ]] || fail "report of a CPU recording says '$mode_line'"
top=$(json "$T/w.nettrace" '["top_self"][0]["function"]')
[[ $top == *pp_workload_fn_* ]] || fail "top function is $top"
no_leftovers workload

# 3. Formats written directly agree with the trace's report, to the sample. The workload runs
# until each worker has used 1.5 s of CPU (about 300 samples at 99 Hz, 120 s at most): its
# default 5 s of wall time held 71 samples under ASan at load 15-20, under the 100 asked for.
total=$(json "$T/w.nettrace" '["samples"]')
"${run_env[@]}" "$PIPEPROF" record -q --format folded -o "$T/w.folded" -- "$WORKLOAD" 120 --cpu 1.5 >/dev/null ||
  fail "record --format folded"
folded=$(awk '{s += $NF} END {print s}' "$T/w.folded")
[[ $folded -gt 100 ]] || fail "folded output holds $folded samples"
no_leftovers "--format folded"

# 4. Ctrl-C (SIGINT to pipeprof): the session ends first (complete trace), then CMD gets the
# signal and its status (130) is returned.
set +e
# A non-interactive shell starts background jobs with SIGINT ignored; a terminal's foreground
# job has it at its default, so restore that first.
dfl_int=(python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])')
# A duration of its own, so that no other `sleep` on the machine is taken for it below, longer
# than the wait for its samples (it ends by the interrupt).
naptime=300.$$
"${run_env[@]}" "${dfl_int[@]}" "$PIPEPROF" record -q --mode wall -o "$T/int.nettrace" -- sleep "$naptime" &
rp=$!
PP_PIDS+=($rp)
# Interrupted once the recording in the making (cli/output.c's .int.nettrace.XXXXXX beside the
# output, read as a truncated trace) holds over 50 samples, the count checked below, not after a
# fixed 2 s: counted from the start, record's and the agent's start-up took most of 2 s at load
# 15-20 and the trace held 35 samples.
partial_over_50() {
  local f n
  kill -0 "$rp" 2>/dev/null || fail "Ctrl-C: record ended before it was interrupted"
  for f in "$T"/.int.nettrace.*; do
    [[ -f $f ]] || return 1
    n=$("$PIPEPROF" report --format json "$f" 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["samples"])' 2>/dev/null) || return 1
    ((n > 50)) && return 0
  done
  return 1
}
wait_until 120 "Ctrl-C: 50 samples in the recording before the interrupt" partial_over_50
kill -INT "$rp"
wait "$rp"
rc=$?
set -e
[[ $rc == 130 ]] || fail "Ctrl-C: status $rc, expected 130 (sleep killed by SIGINT)"
[[ $(json "$T/int.nettrace" '["truncated"]') == False ]] || fail "Ctrl-C trace truncated"
s=$(json "$T/int.nettrace" '["samples"]')
[[ $s -gt 50 ]] || fail "Ctrl-C trace has $s samples"
note "Ctrl-C: status 130, complete trace, $s samples"
no_leftovers "Ctrl-C"
pgrep -f "^sleep $naptime$" >/dev/null && fail "sleep $naptime survived Ctrl-C"

# 5. --duration stops recording, CMD runs on to its end and keeps its status.
set +e
"${run_env[@]}" "$PIPEPROF" record -q --duration 1 -o "$T/d.nettrace" -- sh -c 'sleep 2; exit 4'
rc=$?
set -e
[[ $rc == 4 ]] || fail "--duration: status $rc, expected 4"
[[ $(json "$T/d.nettrace" '["truncated"]') == False ]] || fail "--duration trace truncated"
no_leftovers "--duration"

# 6. A command that cannot start: 127 as from a shell, and no leftovers. Its stderr says why
# (the exec's errno), and not that a program kept the agent out: before (realhosts2), a missing
# or non-executable CMD also got "did not load the agent (it exited first): is it statically
# linked, setuid, or did it clear LD_PRELOAD?".
for cmd in /nonexistent/cmd /etc/passwd; do
  set +e
  "$PIPEPROF" record -q -o "$T/none.nettrace" -- "$cmd" 2>"$T/none.err"
  rc=$?
  set -e
  [[ $rc == 127 ]] || fail "$cmd: status $rc"
  grep -q "cannot run $cmd: " "$T/none.err" || { cat "$T/none.err" >&2; fail "$cmd: no 'cannot run'"; }
  ! grep -q "did not load the agent" "$T/none.err" || { cat "$T/none.err" >&2; fail "$cmd: taken for a program that kept the agent out"; }
  no_leftovers "missing command"
done
# 7. Usage errors.
set +e
"$PIPEPROF" record --hz 0 -- true 2>/dev/null; [[ $? == 2 ]] || fail "--hz 0 accepted"
"$PIPEPROF" record --format bogus -- true 2>/dev/null; [[ $? == 2 ]] || fail "bad format accepted"
"$PIPEPROF" record 2>/dev/null; [[ $? == 2 ]] || fail "no command accepted"
set -e
echo "cli-record: ok ($total samples in the workload trace, $folded in the folded one)"
