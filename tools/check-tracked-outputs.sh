#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tools/check-tracked-outputs.sh - fails when git tracks a build output: a file that .gitignore
# names as one (CMake trees, dotnet bin/ and obj/, fuzz artefacts, objects), or a binary that
# is an ELF or PE executable or library. Run by .ci/run; prints every offender.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(git ls-files -ci --exclude-standard)
# Executables and libraries whatever their names (an apphost, a DLL, an object file).
while IFS= read -r -d '' f; do
  [[ -f $f ]] || continue
  magic=$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')
  case $magic in
    7f454c46) bad+=$'\n'"$f (ELF)" ;;
    4d5a*) bad+=$'\n'"$f (PE)" ;;
  esac
done < <(git ls-files -z)
bad=$(sed '/^$/d' <<<"$bad")
if [[ -n $bad ]]; then
  echo "check-tracked-outputs: build outputs are tracked by git (remove them with git rm --cached):" >&2
  echo "$bad" >&2
  exit 1
fi
echo "check-tracked-outputs: no build output is tracked ($(git ls-files | wc -l) files checked)"
