#!/usr/bin/env bash
# Runs ctest with the arguments given, a failed test once more (ctest --repeat until-pass:2), and
# names at the end every test whose first try failed. Used by tools/test.sh and .ci/run.
#
# Why a second try: the agent's tests measure a sampling profiler on shared machines (2 cores,
# other work keeping both busy, sanitizers that hold signals back), and a handful of their ~160
# statistical checks miss now and then on such a machine while passing on the next try; one such
# miss in three builds failed whole CI runs. A test that fails twice in a row still fails the run.
# A first failure is not hidden: ctest prints its output where it happened, this script names it
# again at the end ("failed a first try"), and PP_FLAKY_LOG (a file, when set) collects the names
# across runs, so that each one is still chased to its cause.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
ctest --repeat until-pass:2 "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
# ctest killed (by a signal: status above 128), or this script's own run stopped: no summary. A
# run that was stopped has no verdict, and its names would land in the log of whatever run comes
# next at that path (a killed CI run's did in a fresh clone's build/flaky-tests.txt).
if ((rc > 128)); then
    exit "$rc"
fi
# ctest's line for a failed try: "  3/29 Test  #10: NAME ....***Failed  25.94 sec" (or ***Timeout,
# ***Exception: ...); a second try's line has no "3/29" before it.
first_failures=$(grep -a -E 'Test +#[0-9]+: [^ ]+ \.*\*\*\*(Failed|Timeout|Exception)' "$log" |
    sed -E 's/.*Test +#[0-9]+: ([^ ]+) .*/\1/' | sort -u)
if [ -n "$first_failures" ]; then
    echo "=== failed a first try (ctest's output of that try is above):"
    for name in $first_failures; do
        if grep -a -q -E "Test +#[0-9]+: $name \.* +Passed" "$log"; then
            echo "===   $name: passed at its second try"
            verdict="passed at its second try"
        else
            echo "===   $name: failed again"
            verdict="failed again"
        fi
        if [ -n "${PP_FLAKY_LOG:-}" ]; then
            echo "$(date -u +%FT%TZ) $name: $verdict (ctest $*)" >>"$PP_FLAKY_LOG"
        fi
    done
fi
exit "$rc"
