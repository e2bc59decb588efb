#!/usr/bin/env bash
# Fails when a tracked C file is not formatted by .clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format missing, SKIPPED"; exit 0; }
bad=0
while IFS= read -r f; do
    [ -f "$f" ] || continue
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "not formatted: $f"
        bad=1
    fi
done < <(git ls-files '*.c' '*.h')
exit $bad
