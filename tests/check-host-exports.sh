#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/check-host-exports.sh - what libpipeprof.so exports (`nm -D --defined-only`) is exactly:
#   - the libc functions of the host contract, each defined with default visibility in a file of
#     host/ (read from the objects of the pp_host and pp_host_server archives), and listed both
#     in host/host.h and in its own file's header comment;
#   - the public API, the functions include/pipeprof.h declares;
#   - the marker names below: functions that never run, whose names samples carry as frames.
# Every export must be one of these, and each of these must be exported: an interposer defined
# outside host/, a stray export, a name missing from shim/libpipeprof.map (it would stay local)
# or a host/ file left out of the link (host/internal.h's anchors) all fail. docs/architecture.md's
# table of host/'s files names each export in its file's row, and its "Exported symbols" counts
# are the library's. The comparison then checks itself: with a stray libc name and a stray
# function added to the exports, or a name taken out of the page's table, it must fail. Every
# interposer is also called by tests/hosts/stress.c, the host of host-contract-stress.
set -euo pipefail
B=${PP_BINARY_DIR:?}
S=${PP_SOURCE_DIR:?}
LIB=$B/lib/libpipeprof.so
ARCHIVES=("$B/lib/libpp_host.a" "$B/lib/libpp_host_server.a")
for tool in nm readelf python3; do
  command -v "$tool" >/dev/null || { echo "SKIP (loud): $tool is not installed" >&2; exit 77; }
done
for f in "$LIB" "${ARCHIVES[@]}"; do
  [[ -f $f ]] || { echo "FAIL: $f is missing" >&2; exit 1; }
done

# agent/agent.h, ag_unseen_pc(): the leaf of CPU samples taken while the signal was blocked;
# ag_kernel_pc() and ag_kernel_unplaced_pc(): the leaves of CPU time in the kernel.
MARKERS="pipeprof_cpu_while_signal_blocked pipeprof_cpu_in_kernel pipeprof_cpu_in_kernel_unplaced pipeprof_cpu_not_sampled pipeprof_unwind_tables_pending"

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
nm -D --defined-only "$LIB" | awk 'NF == 3 {print $3}' | sed 's/@.*//' | sort -u >"$T/exports"
# "file name" per function defined GLOBAL DEFAULT in an object of host/'s archives.
readelf -Ws "${ARCHIVES[@]}" | awk '
  /^File: / { f = $2; sub(/.*\(/, "", f); sub(/\.c\.o\)$/, ".c", f); next }
  $4 == "FUNC" && $5 == "GLOBAL" && $6 == "DEFAULT" && $7 != "UND" { print f, $8 }' |
  sort -u >"$T/host"
sed -n 's/^[a-z].*\<\(pipeprof_[a-z0-9_]*\) *(.*/\1/p' "$S/include/pipeprof.h" | sort -u >"$T/api"
tr ' ' '\n' <<<"$MARKERS" | sort -u >"$T/markers"
[[ $(wc -l <"$T/host") -ge 40 ]] || { echo "FAIL: only $(wc -l <"$T/host") functions found in host/" >&2; exit 1; }
[[ -s $T/api ]] || { echo "FAIL: no function found in include/pipeprof.h" >&2; exit 1; }

# compare EXPORTS [ARCHITECTURE.md]: 0 when EXPORTS is exactly host/ + API + markers, and the
# architecture page's table and counts say so too; prints every difference.
compare() {
  python3 - "$1" "$T/host" "$T/api" "$T/markers" "$S" "${2:-$S/docs/architecture.md}" <<'PY'
import re, sys
exports = set(open(sys.argv[1]).read().split())
host = {}
for line in open(sys.argv[2]):
    f, name = line.split()
    host[name] = f
api = set(open(sys.argv[3]).read().split())
markers = set(open(sys.argv[4]).read().split())
src = sys.argv[5]
bad = []
for name in sorted(exports - set(host) - api - markers):
    bad.append("%s is exported but is no interposer of host/, no function of include/pipeprof.h "
               "and no marker of tests/check-host-exports.sh" % name)
for name in sorted((set(host) | api | markers) - exports):
    where = ("host/" + host[name]) if name in host else \
        "include/pipeprof.h" if name in api else "the markers"
    bad.append("%s (%s) is not exported: is it in shim/libpipeprof.map, and is its file linked?"
               % (name, where))
# The documentation of the contract names each interposer: host/host.h's list and its file's
# header comment (all before its first #include).
header = open(src + "/host/host.h").read()
for name, f in sorted(host.items()):
    text = open("%s/host/%s" % (src, f)).read()
    first = text[:text.find("\n#include")]
    for doc, body in (("host/host.h", header), ("host/" + f + "'s header", first)):
        if not re.search(r"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % re.escape(name), body):
            bad.append("%s (host/%s) is not listed in %s" % (name, f, doc))
# docs/architecture.md: each host/ file's row of the table names (second column, in backticks)
# every export of that file, and names no function that is not exported from host/; "Exported
# symbols" gives the counts.
arch = open(sys.argv[6]).read()
rows = {}
for f, col in re.findall(r"^\| `host/([a-z-]+\.c)`[^|]*\| ([^|]*) \|", arch, re.M):
    rows.setdefault(f, set()).update(re.findall(r"`([A-Za-z_0-9]+)`", col))
for name, f in sorted(host.items()):
    if name in exports and name not in rows.get(f, ()):
        bad.append("%s (host/%s) is not in that file's row of docs/architecture.md's table" % (name, f))
for f, names in sorted(rows.items()):
    for name in sorted(names - (set(host) & exports)):
        bad.append("docs/architecture.md's row of host/%s names %s, which host/ does not export"
                   % (f, name))
n_host = len(set(host) & exports)
for what, n in (("in all", len(exports)), ("the host contract's libc calls", n_host),
                ("the public API", len(api & exports)), ("markers", len(markers & exports))):
    pat = r"%d in all" % n if what == "in all" else r"\*\*%s\*\* \(%d\)" % (re.escape(what), n)
    if not re.search(pat, arch):
        bad.append("docs/architecture.md's \"Exported symbols\" does not say %s: %d" % (what, n))
for b in bad:
    print("  " + b)
sys.exit(1 if bad else 0)
PY
}

if ! compare "$T/exports" >"$T/why"; then
  echo "FAIL: libpipeprof.so's exports do not match the host contract and the public API:" >&2
  cat "$T/why" >&2
  exit 1
fi
n_host=$(wc -l <"$T/host")
echo "check-host-exports: $(wc -l <"$T/exports") exports = $n_host from host/ + $(wc -l <"$T/api") API + $(wc -l <"$T/markers") marker"
awk '{by[$1] = by[$1] " " $2} END {for (f in by) printf "  host/%s:%s\n", f, by[f]}' "$T/host" | sort

# The stress host (host-contract-stress) calls every interposer while sessions start and stop: a
# new interposer joins it.
missing=$(awk '{print $2}' "$T/host" | while read -r name; do
  grep -qw -- "$name" "$S/tests/hosts/stress.c" || printf ' %s' "$name"
done)
[[ -z $missing ]] || { echo "FAIL: tests/hosts/stress.c never calls:$missing" >&2; exit 1; }
echo "check-host-exports: tests/hosts/stress.c calls each of the $n_host interposers"

# The check must be able to fail: a libc name defined outside host/ and a stray function.
for stray in truncate pipeprof_stray_helper; do
  { cat "$T/exports"; echo "$stray"; } >"$T/stray"
  if compare "$T/stray" >"$T/why"; then
    echo "FAIL: the comparison accepts a stray export ($stray)" >&2
    exit 1
  fi
  grep -q "^  $stray is exported but" "$T/why" || { echo "FAIL: no reason given for $stray" >&2; cat "$T/why" >&2; exit 1; }
done
echo "check-host-exports: a stray export (truncate, pipeprof_stray_helper) fails the comparison"

# The page's check must be able to fail too: a name left out of host/fds.c's row.
sed '/^| `host\/fds.c`/s/ `dup3`//' "$S/docs/architecture.md" >"$T/arch.md"
cmp -s "$T/arch.md" "$S/docs/architecture.md" && { echo "FAIL: no dup3 in host/fds.c's row to take out" >&2; exit 1; }
if compare "$T/exports" "$T/arch.md" >"$T/why"; then
  echo "FAIL: the comparison accepts an architecture page whose table misses dup3" >&2
  exit 1
fi
grep -q "^  dup3 (host/fds.c) is not in that file's row" "$T/why" || { echo "FAIL: no reason given for dup3" >&2; cat "$T/why" >&2; exit 1; }
echo "check-host-exports: docs/architecture.md's table and counts match; a name missing there fails"
