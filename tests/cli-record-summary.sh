#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-summary.sh - `pipeprof record` shares its stderr with the recorded program, so
# its summary is one line (issue 20): the output and its format, samples, seconds, threads, the
# effective rate, every loss and every process without a file of its own. -v gives the full
# summary and the top functions; -q none. Before: 5 lines and a top-10 table on every run.
source "$(dirname "$0")/ipc-lib.sh"
WORKLOAD=$B/samples/pp-sample-workload
SIGNALS=$B/tests/hosts/host-signals
[[ -x $WORKLOAD && -x $SIGNALS ]] || fail "missing $WORKLOAD or $SIGNALS"

# record NAME ARGS... -- CMD...: records into $T/NAME.nettrace, CMD's stdout away, its stderr
# (with record's) in $T/NAME.err.
record() {
  local name=$1
  shift
  "${RECORD_ENV[@]}" "$PIPEPROF" record -o "$T/$name.nettrace" "$@" >/dev/null 2>"$T/$name.err" ||
    { cat "$T/$name.err" >&2; fail "$name: record failed"; }
}

# 1. By default: exactly one line on stderr (the workload writes none), which names the output,
# the format, the samples, the threads, the rate and that nothing was lost.
record one --hz 200 -- "$WORKLOAD" 1
[[ $(wc -l <"$T/one.err") == 1 ]] || { cat "$T/one.err" >&2; fail "the summary is not one line"; }
line=$(cat "$T/one.err")
samples=$("$PIPEPROF" report --format json "$T/one.nettrace" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["samples"])')
for want in "^pipeprof: $T/one.nettrace written (nettrace format): " " $samples samples in [0-9.]* s" \
  "from [0-9]* threads" "[0-9.]* Hz effective on the busiest thread (cpu mode, 200 Hz requested)" \
  "nothing lost" "; 1 process recorded$"; do
  grep -q "$want" <<<"$line" || fail "the summary line lacks '$want': $line"
done
note "default: $line"

# 2. Losses are never left out of that line: host-signals offstack burns CPU on a stack the
# agent will not walk, and every such sample is dropped and counted.
record lost -- "$SIGNALS" offstack
line=$(grep '^pipeprof: ' "$T/lost.err" || true)
[[ $(grep -c '^pipeprof: ' "$T/lost.err") == 1 ]] || { cat "$T/lost.err" >&2; fail "lost: not one line"; }
lost=$("$PIPEPROF" report --format json "$T/lost.nettrace" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["lost_samples"])')
[[ $lost -gt 0 ]] || fail "the offstack host lost no samples (cannot check the summary)"
grep -q ", lost $lost samples dropped by the agent and [0-9]* events in the trace;" <<<"$line" ||
  fail "the summary line hides the $lost lost samples: $line"
note "losses: $line"

# 3. -v: the full summary and the top functions, as before.
record verbose -v --hz 200 -- "$WORKLOAD" 1
for want in "written (nettrace format)$" "samples in" "effective rate" "lost:" "top [0-9]* functions"; do
  grep -q "$want" "$T/verbose.err" || { cat "$T/verbose.err" >&2; fail "-v lacks '$want'"; }
done
[[ $(wc -l <"$T/verbose.err") -gt 5 ]] || fail "-v gives $(wc -l <"$T/verbose.err") lines"

# 4. -q: nothing at all.
record quiet -q -- "$WORKLOAD" 1
[[ ! -s $T/quiet.err ]] || fail "-q printed: $(cat "$T/quiet.err")"
echo "cli-record-summary: ok"
