#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/check-loader-calls.sh - the library's calls that take the loader's list lock
# (dl_iterate_phdr, dlopen, dlmopen, dlclose) are made by host/dl.c alone, through
# host_loader_iterate, _open and _close, which keep them out of the host's forks (host/dl.c says
# why: a fork during one left the child's loader locked for good). Read from the compiled
# objects of libpipeprof.so, not the sources: every object of its archives and of the shim
# target but dl.c.o must leave these names undefined-free.
set -euo pipefail
B=${PP_BINARY_DIR:?}
command -v nm >/dev/null || { echo "SKIP (loud): nm (binutils) is not installed" >&2; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
shopt -s nullglob
objs=("$B"/lib/libpp_*.a "$B"/shim/CMakeFiles/pipeprof_shim.dir/*.o)
((${#objs[@]} >= 3)) || fail "no objects of libpipeprof.so under $B (built?)"
names='dl_iterate_phdr|dlopen|dlmopen|dlclose'
bad=$(nm -A "${objs[@]}" 2>/dev/null | grep -E " U ($names)(@.*)?$" | grep -v -E '[:/]dl\.c\.o:' || true)
[[ -z $bad ]] || fail "loader calls outside host/dl.c (use host_loader_iterate/_open/_close):
$bad"
# dl.c calls dlopen by name, and libc's dl_iterate_phdr and dlclose through dlsym: it defines
# those two itself, the host's (interposers that count the host's walks and unloads).
seen=$(nm -A "${objs[@]}" 2>/dev/null |
  grep -c -E '[:/]dl\.c\.o: *(U dlopen|[0-9a-f]+ T (dl_iterate_phdr|dlclose))(@.*)?$' || true)
[[ $seen -eq 3 ]] || fail "host/dl.c's dlopen call and its dl_iterate_phdr and dlclose not found ($seen of 3)"
echo "check-loader-calls: ${#objs[@]} archives and objects, loader calls only in host/dl.c"
