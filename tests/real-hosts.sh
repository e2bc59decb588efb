#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/real-hosts.sh - the host contract against programs nobody here wrote (docs/architecture.md,
# "Real programs"): python3, bash, perl, git, sqlite3, make, tclsh and awk/xargs/busybox, each
# given a small script that prints what it sees of itself (its fd and task listings, its own and
# its fork()ed children's, its ignored signals, its exit statuses, a pipeline's end), run bare,
# preloaded with no session, under `pipeprof record` in CPU and in wall mode (children followed),
# and preloaded with a `pipeprof collect --diagnostic-port` session from its first instruction. Standard output,
# standard error and exit status must be the bare run's every time. A program that is missing
# is skipped loudly; with none of them the test is skipped.
#
# What it found (2026-11-29): a fork()ed child listed its parent's server fds (768, 771..775) in
# /proc/self/fd, and under record its agent's start thread in /proc/self/task (Python's
# multiprocessing, bash's subshells and command substitutions, Perl's fork); "pipeprof:
# diagnostic server not started: Resource temporarily unavailable" and "session N: sampling not
# started" on stderr under record (a start that met an exec: bash pipelines, git); `collect --
# CMD` started CMD with SIGPIPE ignored (sort | head: "write error: Broken pipe"). Added by
# realhosts2 (2026-11-29): tclsh (its glob of /proc/self/fd, a command pipe, exec's child status),
# awk's getline from a command and system(), xargs -P4, busybox sh; identical in every mode.
source "$(dirname "$0")/ipc-lib.sh"
# TSan's runtime starts a thread of its own in every process it is preloaded into (one more task
# than bare: docs/architecture.md, "Sanitizers"); under ASan the programs' own allocations would
# be reported as leaks at their exit.
[[ -z $tsan ]] || skip "ThreadSanitizer build: its runtime's own thread is in every listing"
[[ -z $asan ]] || export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
C=$T/cases
mkdir -p "$C"

# --- the cases: each prints only what is the same from run to run bare ---------------------
cat >"$C/py.py" <<'EOF'
import os, sys, signal, subprocess, multiprocessing as mp
def fds(tag):
    print(tag, 'fds', sorted(int(x) for x in os.listdir('/proc/self/fd')),
          'tasks', len(os.listdir('/proc/self/task')), flush=True)
def status(tag):
    with open('/proc/self/status') as f:
        d = dict(l.rstrip('\n').split(':\t', 1) for l in f if ':\t' in l)
    print(tag, 'Threads', d['Threads'], 'SigIgn', d['SigIgn'], 'SigBlk', d['SigBlk'], flush=True)
def child(q):
    fds('mp-child'); status('mp-child'); q.put(sum(i * i for i in range(200000)))
if __name__ == '__main__':
    s = sum(i * i for i in range(1000000))
    fds('main'); status('main')
    got = []
    signal.signal(signal.SIGUSR1, lambda n, f: got.append(n))
    os.kill(os.getpid(), signal.SIGUSR1); print('got', got)
    for method in ('fork', 'spawn'):
        ctx = mp.get_context(method); q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,)); p.start(); v = q.get(); p.join()
        print(method, p.exitcode, v, flush=True)
    pid = os.fork()
    if pid == 0:
        fds('fork-child'); status('fork-child')
        sum(i * i for i in range(300000)); fds('fork-child-later'); os._exit(7)
    print('waitpid', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    r = subprocess.run(['sh', '-c', 'ls /proc/self/fd | wc -l; exit 3'], capture_output=True, text=True)
    print('subprocess', r.returncode, r.stdout.strip())
    pid = os.fork()  # a close-everything child: multiprocessing's fds stay the parent's
    if pid == 0:
        opened = [os.open('/dev/null', os.O_RDONLY) for _ in range(4)]
        print('opened', opened); os.closerange(3, 1024); fds('closed')
        print('pipe', os.pipe(), flush=True); os._exit(0)
    os.waitpid(pid, 0)
    sys.exit(5)
EOF
cat >"$C/bash.sh" <<'EOF'
fds() { local a=(/proc/self/fd/*); echo "$1 fds: ${a[*]##*/}"; }
tasks() { local a=(/proc/self/task/*); echo "$1 tasks: ${#a[@]}"; }
ign() { local k v; while read -r k v; do [[ $k == SigIgn: ]] && echo "$1 SigIgn $v"; done </proc/self/status; }
fds main; tasks main; ign main
exec 5>/dev/null; fds exec5; exec 5>&-
( fds subshell; tasks subshell; ign subshell )
x=$(fds cmdsub); echo "$x"
{ fds group; } | cat
trap 'echo got USR1' USR1; kill -USR1 $$
n=0; for i in $(seq 40); do n=$((n + $(echo 1 | cat | wc -l))); done; echo "pipelines $n"
for i in 1 2 3; do (sleep 0.0$i; fds bg$i >/dev/null) & done; wait
seq 1 100000 | sort -rn | head -2
( exit 7 ); echo "subshell status $?"
bash -c 'exit 9'; echo "child status $?"
exit 3
EOF
cat >"$C/perl.pl" <<'EOF'
use strict; use warnings; use POSIX ();
$| = 1;
sub list { opendir(my $d, $_[1]) or die; my @f = sort { $a <=> $b } grep { !/^\./ } readdir $d; closedir $d; return @f; }
sub show { my @f = list(0, "/proc/self/fd"); my @t = list(0, "/proc/self/task"); print "$_[0] fds @f tasks ", scalar(@t), "\n"; }
my $s = 0; $s += $_ % 7 for 1..2_000_000; print "burn $s\n";
show("main");
for my $n (1..3) {
  my $pid = fork();
  if ($pid == 0) { show("child$n"); my $t = 0; $t += $_ for 1..400_000; show("child$n-later"); POSIX::_exit($n); }
  waitpid($pid, 0); print "child$n exit ", $? >> 8, "\n";
}
my $out = `echo hi; ls /proc/self/fd | wc -l`; print "backtick $out";
system("sh", "-c", "exit 5"); print "system ", $? >> 8, "\n";
exit 4;
EOF
cat >"$C/git.sh" <<'EOF'
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b
export GIT_AUTHOR_DATE='2020-01-01T00:00:00Z' GIT_COMMITTER_DATE='2020-01-01T00:00:00Z'
export HOME=$PWD GIT_CONFIG_NOSYSTEM=1
rm -rf repo && git init -q -b main repo && cd repo
for i in $(seq 12); do seq $i >f$i; git add f$i; git commit -qm "c$i"; done
git log --format='%H %s' | head -2
git gc -q; echo "gc $?"
git fsck --full 2>&1 | sort; echo "fsck $?"
git count-objects -v | grep -v size
echo x >f1; git status --porcelain; git diff --stat
git nosuchcommand 2>&1; echo "bad $?"
EOF
cat >"$C/sqlite.sh" <<'EOF'
rm -f db.sqlite
sqlite3 db.sqlite <<'SQL'
PRAGMA journal_mode=WAL;
CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20000)
INSERT INTO t SELECT x, printf('v%05d', x) FROM n;
CREATE INDEX tb ON t(b);
SELECT count(*), sum(a), max(b) FROM t;
PRAGMA integrity_check;
VACUUM;
SQL
echo "sqlite $?"
sqlite3 db.sqlite 'SELECT * FROM nosuch;' 2>&1; echo "error $?"
EOF
cat >"$C/Makefile" <<'EOF'
T := $(addprefix out/t,1 2 3 4 5 6 7 8)
all: $(T)
	@cat $(sort $(T)) | md5sum
out/t%: | out
	@echo "$@ $$(ls /proc/self/fd | wc -l)" >$@; echo "made $@"
out:
	@mkdir -p out
EOF
cat >"$C/make.sh" <<'EOF'
rm -rf out; make -s -j4 -O -f "$1/Makefile" | sort; echo "make $?"
make -s -f "$1/Makefile" nosuch 2>&1; echo "missing $?"
EOF
cat >"$C/tcl.tcl" <<'EOF'
set fds [lsort -integer [glob -tails -directory /proc/self/fd *]]
puts "fds $fds tasks [llength [glob -directory /proc/self/task *]]"
set s 0; for {set i 0} {$i < 300000} {incr i} { incr s [expr {$i % 7}] }
puts "sum $s"
set f [open "|sh -c {ls /proc/self/fd | wc -l}" r]; puts "pipe [string trim [read $f]]"; close $f
catch {exec sh -c {exit 4}} r o; puts "exec [lindex [dict get $o -errorcode] 0] [lindex [dict get $o -errorcode] 2]"
exit 2
EOF
cat >"$C/tools.sh" <<'EOF'
seq 1 200000 | awk '{s += $1 % 13; a[$1 % 100]++} END {print "awk", s, length(a);
  while (("ls /proc/self/fd" | getline l) > 0) n++; print "awk fds", n; print "system", system("exit 3")}'
seq 1 40 | xargs -P4 -n5 sh -c 'echo $(($1 + $2)) $(ls /proc/self/fd | wc -l)' sh | sort -n | md5sum
if command -v busybox >/dev/null; then
  busybox sh -c 'ls /proc/self/fd | wc -l; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo bb $i; exit 5'
  echo "busybox $?"
fi
exit 6
EOF

cases=()
have() { command -v "$1" >/dev/null 2>&1 || { echo "SKIP (loud, part): $1 is not installed: its case did not run" >&2; return 1; }; }
have python3 && cases+=("py:python3 $C/py.py")
have bash && cases+=("bash:bash $C/bash.sh")
have perl && cases+=("perl:perl $C/perl.pl")
have git && cases+=("git:bash $C/git.sh")
have sqlite3 && cases+=("sqlite:bash $C/sqlite.sh")
have make && cases+=("make:bash $C/make.sh $C")
have tclsh && cases+=("tcl:tclsh $C/tcl.tcl")
have awk && have xargs && cases+=("tools:bash $C/tools.sh")
have busybox || true # tools.sh leaves its busybox part out without it (said here)
((${#cases[@]})) || skip "none of python3, bash, perl, git, sqlite3, make, tclsh, awk is installed"

# run MODE NAME CMD...: CMD in its own directory; its stdout, stderr and status kept
run() {
  local mode=$1 name=$2 d=$T/run/$2/$1
  shift 2
  mkdir -p "$d"
  set +e
  (cd "$d" && "$@") >"$T/$name.$mode.out" 2>"$T/$name.$mode.err"
  echo $? >"$T/$name.$mode.rc"
  set -e
}

same() { # NAME MODE: as bare
  local name=$1 mode=$2 f
  for f in rc out err; do
    if ! diff -u "$T/$name.bare.$f" "$T/$name.$mode.$f" >"$T/$name.$mode.diff"; then
      cat "$T/$name.$mode.diff" >&2
      fail "$name $mode: its $f is not bare's"
    fi
  done
  note "$name $mode: output, stderr and status as bare"
}

for c in "${cases[@]}"; do
  name=${c%%:*}
  read -r -a cmd <<<"${c#*:}"
  run bare "$name" "${cmd[@]}"
  run preload "$name" env "LD_PRELOAD=$PRELOAD" "${cmd[@]}"
  same "$name" preload
  for mode in cpu wall; do
    run "$mode" "$name" "${RECORD_ENV[@]}" "$PIPEPROF" record --mode "$mode" --hz 250 -q \
      -o "$T/$name.$mode.nettrace" -- "${cmd[@]}"
    same "$name" "$mode"
    "$PIPEPROF" report "$T/$name.$mode.nettrace" >/dev/null 2>&1 ||
      fail "$name $mode: $T/$name.$mode.nettrace is unreadable"
  done
  # a session from the first instruction, as `collect -- CMD` makes it (the agent connects to the
  # port and waits for the session; PIPEPROF_TARGET_PID keeps CMD's children off the port), CMD
  # started here so that its own status is kept
  port=$T/$name.port
  "$PIPEPROF" collect --diagnostic-port "$port" -o "$T/$name.connect.nettrace" --duration 120 \
    --providers "Microsoft-DotNETCore-SampleProfiler:0:4:mode=wall;hz=250,pipeprof:0:4" \
    >"$T/$name.collect.log" 2>&1 &
  cpid=$!
  PP_PIDS+=("$cpid")
  wait_until 30 "$name: collect's port $port" test -S "$port"
  run connect "$name" sh -c 'export PIPEPROF_TARGET_PID=$$; exec "$@"' sh \
    env "DOTNET_DiagnosticPorts=$port" "LD_PRELOAD=$PRELOAD" "${cmd[@]}"
  set +e
  wait "$cpid"
  crc=$?
  set -e
  same "$name" connect
  [[ $crc == 0 ]] || { cat "$T/$name.collect.log" >&2; fail "$name connect: pipeprof collect failed ($crc)"; }
  [[ $name == bash ]] || continue
  # `collect -- CMD` starts CMD itself: with the dispositions collect was given (before, SIGPIPE
  # ignored: sort's "write error: Broken pipe" and a SigIgn bit of 0x1000). Its status is
  # collect's, its stderr has collect's own lines too.
  run collect-cmd "$name" "$PIPEPROF" collect --diagnostic-port "$T/$name.port2" \
    -o "$T/$name.collect-cmd.nettrace" --duration 120 \
    --providers "Microsoft-DotNETCore-SampleProfiler:0:4:mode=wall;hz=250,pipeprof:0:4" \
    -- env "LD_PRELOAD=$PRELOAD" "${cmd[@]}"
  [[ $(cat "$T/$name.collect-cmd.rc") == 0 ]] || { cat "$T/$name.collect-cmd.err" >&2; fail "$name collect-cmd: pipeprof collect failed"; }
  cp "$T/$name.bare.rc" "$T/$name.collect-cmd.rc"
  sed -i '/^Output File *:/d; /^Trace completed:/d' "$T/$name.collect-cmd.err"
  same "$name" collect-cmd
done
echo "PASS: real-hosts (${#cases[@]} programs)"
