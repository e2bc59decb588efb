#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/check-shim-hooks.sh - libpipeprof.so's load-time hooks (common/platform.h) are where the
# loader looks: a pointer to shim_start in .init_array and one to shim_exit in .fini_array. What
# the library exports is checked by tests/check-host-exports.sh.
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
stop=$(addr shim_exit)
[[ -n $start && -n $stop ]] || fail "shim_start/shim_exit not in the symbol table"
slots .init_array | grep -x "$start" >/dev/null || fail ".init_array does not point at shim_start ($start)"
slots .fini_array | grep -x "$stop" >/dev/null || fail ".fini_array does not point at shim_exit ($stop)"
echo "check-shim-hooks: .init_array -> shim_start@$start, .fini_array -> shim_exit@$stop"

