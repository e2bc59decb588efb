#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/merge-late.sh [ROUNDS] - late events of a merged .NET session (docs/architecture.md, "A
# merged session's order: the watermark"): test-ipc-upstream's merged sessions against its fake
# runtime, whose stream lags the agent's by its 200 ms flushes (collect_merges_...) and by 800 ms
# (a_runtime_lagging_...), each round in this build and, with PP_BASELINE_DIR=OTHER_BUILD, in
# that build too, interleaved (before/after in one run, at the same load). The baseline build
# must hold this tree's tests/test-ipc-upstream.c (the 800 ms case is new with the watermark).
# Prints one line per run: the runtime events written late (unsorted) of the session, the load.
set -euo pipefail
B=${PP_BINARY_DIR:-$(cd "$(dirname "$0")/.." && pwd)/build}
ROUNDS=${1:-5}
builds=("candidate:$B")
[[ -n ${PP_BASELINE_DIR:-} ]] && builds=("baseline:$PP_BASELINE_DIR" "${builds[@]}")
for b in "${builds[@]}"; do
    [[ -x ${b#*:}/tests/test-ipc-upstream ]] || { echo "build ${b#*:} first" >&2; exit 2; }
done
printf '%-6s %-10s %-12s %6s %8s %6s\n' round build case late runtime load
for r in $(seq 1 "$ROUNDS"); do
    for b in "${builds[@]}"; do
        for c in collect_merges_the_runtime_session_and_stop_ends_it_first \
            a_runtime_lagging_past_the_window_has_no_event_written_late; do
            out=$("${b#*:}/tests/test-ipc-upstream" "$c" 2>&1 || true)
            late=$(sed -n 's/^# [0-9]* runtime events, [0-9]* ticks, \([0-9]*\) late.*/\1/p' \
                <<<"$out" | head -1)
            work=$(sed -n 's/^# \([0-9]*\) runtime events.*/\1/p' <<<"$out" | head -1)
            [[ $c == collect* ]] && name=flush-200ms || name=lag-800ms
            printf '%-6s %-10s %-12s %6s %8s %6s\n' "$r" "${b%%:*}" "$name" "${late:-0}" \
                "${work:--}" "$(cut -d' ' -f1 /proc/loadavg)"
        done
    done
done
