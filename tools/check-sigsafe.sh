#!/usr/bin/env bash
# tools/check-sigsafe.sh [BUILD_DIR] - the link-level signal-safety gate: every symbol that an
# object of agent/sig-*.c or host/sig-*.c imports must be defined by another sig-* object or
# match a pattern in tools/sigsafe-allow.txt. A call to malloc, printf, a lock or any other function that is not
# async-signal-safe in the handler's reach fails here.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
objs=$(find "$build/agent" "$build/host" -name 'sig-*.c.o' | sort)
[[ -n $objs ]] || { echo "check-sigsafe: no agent/sig-*.o under $build (build first)" >&2; exit 1; }
defined=$(nm --defined-only $objs | awk 'NF == 3 { print $3 }' | sort -u)
mapfile -t allow < <(grep -v '^\s*\(#\|$\)' tools/sigsafe-allow.txt)
bad=0
for sym in $(nm -u $objs | awk '$1 == "U" { print $2 }' | sort -u); do
  grep -qxF "$sym" <<<"$defined" && continue
  ok=0
  for pat in "${allow[@]}"; do
    # shellcheck disable=SC2053
    [[ $sym == $pat ]] && { ok=1; break; }
  done
  if [[ $ok == 0 ]]; then
    echo "check-sigsafe: agent/sig-*.c imports $sym, which is not known to be async-signal-safe" >&2
    bad=1
  fi
done
[[ $bad == 0 ]] && echo "check-sigsafe: $(echo $objs | wc -w) objects, every import allowed"
exit $bad
