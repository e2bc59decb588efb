#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/check-shim-hooks.sh - libpipeprof.so's load-time hooks (common/platform.h) are where the
# loader looks: a pointer to shim_start in .init_array and one to shim_stop in .fini_array; and
# every interposed call is exported.
set -euo pipefail
LIB=${PP_BINARY_DIR:?}/lib/libpipeprof.so
command -v readelf >/dev/null || { echo "SKIP (loud): readelf (binutils) is not installed" >&2; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
addr() { readelf -Ws "$LIB" | awk -v n="$1" '$8 == n {print $2}' | sed 's/^0*//'; }
# The RELATIVE relocations that fill a section: their addends are the function addresses.
slots() {
  local sec=$1 start size
  read -r start size < <(readelf -SW "$LIB" | awk -v s="$sec" '$2 == s {print $4, $6}')
  [[ -n ${start:-} ]] || fail "no $sec section"
  local off add
  readelf -rW "$LIB" | awk '$3 == "R_X86_64_RELATIVE" || $3 == "R_AARCH64_RELATIVE" {print $1, $4}' |
    while read -r off add; do
      (( 16#$off >= 16#$start && 16#$off < 16#$start + 16#$size )) && echo "${add##+(0)}" | sed 's/^0*//'
    done
  return 0
}
start=$(addr shim_start)
stop=$(addr shim_stop)
[[ -n $start && -n $stop ]] || fail "shim_start/shim_stop not in the symbol table"
slots .init_array | grep -qx "$start" || fail ".init_array does not point at shim_start ($start)"
slots .fini_array | grep -qx "$stop" || fail ".fini_array does not point at shim_stop ($stop)"
echo "check-shim-hooks: .init_array -> shim_start@$start, .fini_array -> shim_stop@$stop"

# Every function the sources mark for export (AG_EXPORT or visibility("default"): the calls
# host/ interposes, the public API) is defined and exported by the
# library: a static archive's member that nothing references would be left out silently, and a
# name missing from shim/libpipeprof.map would stay local.
src=${PP_SOURCE_DIR:?}
want=$(python3 - "$src" <<'PY'
import glob, re, sys
# A definition marked for export: the marker (a macro, or the attribute itself) at the start of
# a line, the name on that line or the next, followed by its parameter list.
mark = re.compile(r'^(?:[A-Z_]*EXPORT\b|__attribute__\(\(visibility\("default"\)[^)]*\)\))(.*)$')
names = set()
for path in sorted(sum((glob.glob(sys.argv[1] + "/%s/*.c" % d) for d in ("host", "agent", "bridge", "shim", "ipc")), [])):
    lines = open(path).read().split("\n")
    for i, line in enumerate(lines):
        m = mark.match(line)
        if m is None or line.startswith("#"):
            continue
        rest = m.group(1) + " " + (lines[i + 1] if i + 1 < len(lines) else "")
        f = re.search(r"([A-Za-z_][A-Za-z_0-9]*)\(", rest)
        if f and f.group(1) != "__attribute__":
            names.add(f.group(1))
print("\n".join(sorted(names)))
PY
)
have=$(readelf -W --dyn-syms "$LIB" | awk '$7 != "UND" && $5 == "GLOBAL" {sub(/@.*/, "", $8); print $8}')
n=0
for fn in $want; do
  grep -qx "$fn" <<<"$have" || fail "libpipeprof.so does not export $fn (marked for export in the sources)"
  n=$((n + 1))
done
[[ $n -ge 20 ]] || fail "only $n exported functions found in the sources"
echo "check-shim-hooks: all $n functions marked for export are exported:" $want
