#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-fileident.sh - names only from the very file a process loaded. A long-running process
# (tests/tools/dlburn.c, the agent preloaded) dlopens a library without a build-id and burns CPU
# in it; `pipeprof collect -p` records it. The library's file is replaced by another build of the
# same size (pp_modreuse_a_burn renamed pp_modreuse_z_burn, dated 2020, as `mv`, `cp -p` or a
# package upgrade put an older file in place):
#   unchanged: the agent's rundown names pp_modreuse_a_burn, and so do names from files (the
#              trace's rundown taken away, tests/tools/strip-rundown.c): the file is the one the
#              trace says was loaded (ModuleLoad's FileState, FileDev, FileIno, ... : its stat).
#   before:    replaced after the process loaded it, before the recording began. Nothing in a
#              trace told before (fileident): the file's times were all before the recording's
#              start, and both the agent's rundown and names from files named the library's
#              frames pp_modreuse_z_burn. Now the agent saw another file at the path than the
#              one mapped (/proc/self/maps' inode): its rundown names them by offset, names
#              from files refuse the file and report says why ("1 module not named: file
#              changed since it was loaded").
#   during:    replaced while the recording runs: refused by both, report says why.
# Each trace also read as an older agent wrote it (the File* fields taken away: strip-rundown
# --old-modules): the older rules hold (unchanged named; during refused by the inode's change
# time), and `before` is the case they could not tell (named pp_modreuse_z_burn), which this test
# checks too so that it knows its case is the one that fooled them.
source "$(dirname "$0")/ipc-lib.sh"
HOST=$B/tests/dlburn
LIB=$B/samples/libpp-modreuse-a.so
STRIP=$B/tests/strip-rundown
for f in "$HOST" "$LIB" "$STRIP"; do
  [[ -x $f || -f $f ]] || fail "missing build output $f"
done
command -v objcopy >/dev/null || skip "objcopy (binutils) is not installed"

objcopy --remove-section .note.gnu.build-id "$LIB" "$T/lib.so"
objcopy --remove-section .note.gnu.build-id --redefine-sym pp_modreuse_a_burn=pp_modreuse_z_burn \
  "$LIB" "$T/other.so"
touch -d '2020-01-01 00:00' "$T/lib.so" "$T/other.so"
if readelf -n "$T/lib.so" 2>/dev/null | grep -q 'Build ID'; then
  fail "the library still has a build-id"
fi
[[ $(stat -c %s "$T/lib.so") == $(stat -c %s "$T/other.so") ]] || fail "the two builds differ in size"

# report_of TRACE OUT: report's output into OUT, its stderr into OUT.err.
report_of() { "$PIPEPROF" report "$1" >"$2" 2>"$2.err" || { cat "$2.err" >&2; fail "report of $1 failed"; }; }

for variant in unchanged before during; do
  d=$T/$variant
  mkdir "$d"
  cp -p "$T/lib.so" "$d/libfi.so"
  cp -p "$T/other.so" "$d/other.so"
  LD_PRELOAD=$PRELOAD "$HOST" "$d/libfi.so" pp_modreuse_a_burn "$d/stop" >"$d/host.out" &
  W=$!
  PP_PIDS+=($W)
  wait_until 60 "$variant: the host loaded its library" grep -q loaded "$d/host.out"
  wait_socket "$W" >/dev/null
  [[ $variant == before ]] && mv -f "$d/other.so" "$d/libfi.so"
  "$PIPEPROF" collect -p "$W" -o "$d/t.nettrace" >"$d/collect.log" 2>&1 &
  C=$!
  PP_PIDS+=($C)
  read -r cpu waited < <(wait_cpu "$W" 1 60)
  if [[ $variant == during ]]; then
    mv -f "$d/other.so" "$d/libfi.so"
    read -r cpu2 waited2 < <(wait_cpu "$W" 1 60)
  fi
  kill -INT "$C"
  wait "$C" || { cat "$d/collect.log" >&2; fail "$variant: collect -p failed"; }
  touch "$d/stop"
  wait "$W" || fail "$variant: the host failed"
  "$PIPEPROF" dump "$d/t.nettrace" | grep 'ModuleLoad.*libfi.so' >"$d/module" ||
    fail "$variant: no ModuleLoad of the library"
  note "$variant: $(sed 's/.*Path=/Path=/' "$d/module")"

  # The agent's own rundown.
  report_of "$d/t.nettrace" "$d/agent.report"
  # Names from files: the rundown taken away; and so from an older agent's trace.
  "$STRIP" "$d/t.nettrace" "$d/files.nettrace" >/dev/null
  report_of "$d/files.nettrace" "$d/files.report"
  grep -q 'names read from files now' "$d/files.report.err" ||
    { cat "$d/files.report.err" >&2; fail "$variant: the trace without its rundown was not named from files"; }
  "$STRIP" --old-modules "$d/t.nettrace" "$d/old.nettrace" >/dev/null
  if "$PIPEPROF" dump "$d/old.nettrace" | grep -q 'ModuleLoad.*FileState'; then
    fail "$variant: strip-rundown --old-modules left the File* fields"
  fi
  report_of "$d/old.nettrace" "$d/old.report"
  note "$variant: names from files: $(grep -m1 '^names from files' "$d/files.report")"

  for r in agent files; do
    if grep -q 'pp_modreuse_z_burn' "$d/$r.report"; then
      cat "$d/$r.report" >&2
      fail "$variant: the $r names took the replacement file's function (pp_modreuse_z_burn)"
    fi
  done
  case $variant in
    unchanged)
      for r in agent files old; do
        grep -q 'libfi!pp_modreuse_a_burn' "$d/$r.report" ||
          { cat "$d/$r.report" "$d/$r.report.err" >&2; fail "unchanged: $r names lack libfi!pp_modreuse_a_burn"; }
      done
      grep -q 'FileState=1 ' "$d/module" || fail "unchanged: the agent did not identify the loaded file"
      ;;
    before | during)
      for r in agent files; do
        grep -q 'libfi!0x' "$d/$r.report" ||
          { cat "$d/$r.report" >&2; fail "$variant: the $r names hold no libfi!0x... frame"; }
        if grep -q 'libfi!pp_modreuse' "$d/$r.report"; then
          fail "$variant: the $r names named the library's frames from a file that is not the one loaded"
        fi
      done
      if [[ $variant == before ]]; then
        want='file changed since it was loaded: another file was at its path when it was recorded'
        grep -q 'FileState=2 ' "$d/module" || fail "before: the agent did not see another file at the path"
        # The older rules' blind spot, which this case must be.
        grep -q 'libfi!pp_modreuse_z_burn' "$d/old.report" ||
          { cat "$d/old.report" "$d/old.report.err" >&2; fail "before: the older rules were not fooled: not the case this test is for"; }
      else
        want='file changed since it was loaded: another file is at its path'
        grep -q 'FileState=1 ' "$d/module" || fail "during: the agent did not identify the loaded file"
        grep -q 'moved or changed after the recording began' "$d/old.report.err" ||
          { cat "$d/old.report.err" >&2; fail "during: an older agent's trace not refused by the older rules"; }
      fi
      grep -qF "($d/libfi.so ($want))" "$d/files.report.err" ||
        { cat "$d/files.report.err" >&2; fail "$variant: the reason is not given"; }
      grep -q '^names from files.*1 module not named: file changed since it was loaded' "$d/files.report" ||
        { cat "$d/files.report" >&2; fail "$variant: report does not count the module not named"; }
      ;;
  esac
done
echo "ok   a library without a build-id replaced before or during its recording names nothing, and report says why; unchanged, it names"
