#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/host-contract.sh HOST [ARGS...] - the host contract's promise, that a host cannot tell the
# profiler is there: tests/hosts/HOST (which prints every result it gets, per-call error counts
# included) runs bare, under `pipeprof record` in CPU and in wall mode at 1000 Hz, and preloaded
# in listen mode with `pipeprof collect -p` sampling it in wall mode at 1000 Hz, and preloaded with
# no session at all. Its standard output and exit status must be the bare run's every time, and
# each recording must be readable. HC_MODES (default "cpu wall listen preload") picks the runs; "sessions" runs the host preloaded while
# sessions of `pipeprof collect -p` start and stop against it in a loop, CPU and wall mode in
# turn, until it exits. HC_EXPECT_LOST=1: each recording must also report lost samples (a host
# whose code the agent cannot sample, and must say so). HC_PROC_TASKS=1: the record runs go
# under strace, and neither pipeprof nor the host's agent may open an entry of another thread
# under a process's /proc/PID/task/ (each such lookup leaves a dentry there that the reaping
# parent's kernel walks: 2 to 55 ms of its CPU per child; docs/architecture.md, Resources).
# HC_LIBRARY_OPENS=1: the record runs go under strace, and every open of the library's threads
# below fd 768 must move high at once (tests/library-opens.py; host/fds.c).
# HC_ERR_HAS=ERE: every run but the bare one says it on stderr (the library's, or record's);
# HC_ERR_LACKS=ERE: none says it. HC_EXPECT_SAMPLES=1: each recording holds samples.
# HC_RECORD_FRAME=NAME: each record run's report must name the function NAME (work the host does
# after something that restarts the library: host-contract-ns-user); with HC_RECORD_CHILDREN, the
# report of its trace and its children's.
# HC_TRACE_COMPLETE=1: each recording (record's and collect -p's) must hold its process's rundown
# (the report names no frame from files) and its end tag (record does not call it incomplete).
# HC_RECORD_CHILDREN=1: the record runs follow the host's children (without --no-children).
# HC_HZ=N: the record runs' rate (default 1000).
# HC_NOFILE=SOFT[:HARD]: every run (the host, pipeprof and collect) starts with that
# RLIMIT_NOFILE, the hard limit left as it is without HARD (`pipeprof record` gives CMD the soft
# one back).
source "$(dirname "$0")/ipc-lib.sh"
NAME=$1
shift
if [[ -n ${HC_NOFILE:-} ]]; then
  ulimit -Sn "${HC_NOFILE%%:*}" || fail "cannot set RLIMIT_NOFILE to $HC_NOFILE"
  [[ $HC_NOFILE != *:* ]] || ulimit -Hn "${HC_NOFILE#*:}" || fail "cannot set RLIMIT_NOFILE to $HC_NOFILE"
  note "$NAME: RLIMIT_NOFILE $(ulimit -Sn):$(ulimit -Hn)"
fi
HOST=$B/tests/hosts/host-$NAME
[[ -x $HOST ]] || fail "missing $HOST"

set +e
"$HOST" "$@" >"$T/bare.out" 2>"$T/bare.err"
rc_bare=$?
set -e
# A part the host skipped (a call this machine refuses: tests/hosts/fds.c's create mode) is said
# here too, loudly, where a passing test's output shows.
grep 'SKIPPED' "$T/bare.out" | while read -r line; do echo "SKIP (loud, part): $NAME: $line" >&2; done || true

same() { # RUN RC: RUN's output and status are the bare run's, its stderr as HC_ERR_* say
  [[ $2 == "$rc_bare" ]] || { cat "$T/$1.err" >&2; fail "$NAME $*: exit status $2, bare $rc_bare"; }
  diff -u "$T/bare.out" "$T/$1.out" >&2 || { cat "$T/$1.err" >&2; fail "$NAME $*: the output changed"; }
  if [[ -n ${HC_ERR_HAS:-} ]] && ! grep -Eq -- "$HC_ERR_HAS" "$T/$1.err"; then
    cat "$T/$1.err" >&2
    fail "$NAME $*: its stderr does not say: $HC_ERR_HAS"
  fi
  if [[ -n ${HC_ERR_LACKS:-} ]] && grep -Eq -- "$HC_ERR_LACKS" "$T/$1.err"; then
    cat "$T/$1.err" >&2
    fail "$NAME $*: its stderr says: $HC_ERR_LACKS"
  fi
}

alive() { # PID runs (an exited child stays a zombie until waited for: kill -0 succeeds on it)
  local st
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [[ $st != Z && $st != X ]]
}

tracer=()
if [[ -n ${HC_PROC_TASKS:-} ]]; then
  command -v strace >/dev/null || skip "strace is missing: cannot see the /proc entries opened"
  strace -f -qq -o /dev/null true 2>/dev/null || skip "strace cannot trace here (ptrace refused)"
  tracer=(strace -f -qq -e trace=%file -o)
fi
if [[ -n ${HC_LIBRARY_OPENS:-} ]]; then
  command -v strace >/dev/null || skip "strace is missing: cannot see the library's opens"
  command -v python3 >/dev/null || skip "python3 is missing: cannot read the library's opens"
  strace -f -qq -o /dev/null true 2>/dev/null || skip "strace cannot trace here (ptrace refused)"
  tracer=(strace -f -qq -e trace=openat,open,fcntl,close,clone,clone3,execve -o)
fi

no_proc_tasks() { # STRACE_LOG: no /proc/A/task/B with B another thread than A; no thread-self
  local bad
  bad=$(grep -oE '"/proc/(self|thread-self|[0-9]+)/task/[0-9]+|"/proc/thread-self' "$1" |
    awk -F/ '$3 == "thread-self" || $3 == "self" || $3 != $5' | sort -u || true)
  [[ -z $bad ]] || fail "$NAME: $1 opens other threads' entries under /proc/PID/task: $bad"
  note "$NAME: $(grep -c '"/proc/' "$1") /proc opens, none under another thread's task entry"
}

readable() { # TRACE: pipeprof reads it
  local lost
  "$PIPEPROF" report "$1" >"$1.report" 2>&1 || { cat "$1.report" >&2; fail "$NAME: $1 is unreadable"; }
  if [[ -n ${HC_EXPECT_SAMPLES:-} ]]; then
    local n
    n=$("$PIPEPROF" report --format json "$1" | grep -o '"samples":[0-9]*' | head -1 | cut -d: -f2)
    [[ ${n:-0} -gt 0 ]] || { cat "$1.report" >&2; fail "$NAME: $1 holds no samples"; }
    note "$NAME: $1 holds $n samples"
  fi
  if [[ -n ${HC_TRACE_COMPLETE:-} ]]; then
    ! grep -q "names from files" "$1.report" ||
      { cat "$1.report" >&2; fail "$NAME: $1 has no rundown (its frames were named from files)"; }
    note "$NAME: $1 holds its rundown"
  fi
  [[ -z ${HC_EXPECT_LOST:-} ]] && return 0
  lost=$("$PIPEPROF" report --format json "$1" | grep -o '"lost_samples":[0-9]*' | head -1 | cut -d: -f2)
  [[ ${lost:-0} -gt 0 ]] || { cat "$1.report" >&2; fail "$NAME: $1 reports no lost samples"; }
  note "$NAME: $1 reports $lost lost samples"
}

children=(--no-children)
[[ -z ${HC_RECORD_CHILDREN:-} ]] || children=()
for run in ${HC_MODES:-cpu wall listen preload}; do
  case $run in
  cpu | wall)
    set +e
    "${tracer[@]}" ${tracer:+"$T/$run.strace"} "${RECORD_ENV[@]}" "$PIPEPROF" record \
      --mode "$run" --hz "${HC_HZ:-1000}" -q "${children[@]}" \
      -o "$T/$run.nettrace" -- "$HOST" "$@" >"$T/$run.out" 2>"$T/$run.err"
    rc=$?
    set -e
    same "$run" "$rc"
    if [[ -n ${HC_TRACE_COMPLETE:-} ]] && grep -q "is incomplete" "$T/$run.err"; then
      cat "$T/$run.err" >&2
      fail "$NAME $run: record says the trace is incomplete"
    fi
    [[ -z ${HC_PROC_TASKS:-} ]] || no_proc_tasks "$T/$run.strace"
    if [[ -n ${HC_LIBRARY_OPENS:-} ]]; then
      python3 "$S/tests/library-opens.py" "$T/$run.strace" "$HOST" >"$T/$run.opens" ||
        fail "$NAME $run: a library thread's open stayed at a low number outside the fd gate"
      note "$NAME $run: $(cat "$T/$run.opens")"
    fi
    readable "$T/$run.nettrace"
    if [[ -n ${HC_RECORD_FRAME:-} ]]; then
      if [[ -n ${HC_RECORD_CHILDREN:-} ]]; then # the children's traces too
        "$PIPEPROF" report --top 100 "$T/$run.nettrace" "$T/$run".*.nettrace >"$T/$run.nettrace.report" 2>&1 ||
          true
      fi
      grep -qw -- "$HC_RECORD_FRAME" "$T/$run.nettrace.report" ||
        { cat "$T/$run.nettrace.report" "$T/$run.err" >&2; fail "$NAME $run: no sample in $HC_RECORD_FRAME"; }
      note "$NAME $run: the report names $HC_RECORD_FRAME"
    fi
    ;;
  listen)
    rm -f "$T/go"
    set +e
    # In the background of a shell without job control SIGINT and SIGQUIT start ignored: env
    # puts them back at SIG_DFL, as the bare run in the foreground has them (the signals host
    # prints SigIgn).
    env --default-signal=SIGINT,SIGQUIT HOST_GO="$T/go" LD_PRELOAD="$PRELOAD" "$HOST" "$@" \
      >"$T/listen.out" 2>"$T/listen.err" &
    H=$!
    set -e
    PP_PIDS+=($H)
    wait_socket "$H" >/dev/null
    "$PIPEPROF" collect -p "$H" --duration 60 -o "$T/listen.nettrace" \
      --providers "Microsoft-DotNETCore-SampleProfiler:0:4:mode=wall;hz=1000,pipeprof:0:4" \
      >"$T/collect.log" 2>&1 &
    C=$!
    PP_PIDS+=($C)
    # The host goes once the session runs: collect names its output file after ResumeRuntime's
    # answer. A fixed second was short under ASan at load 22: the host, told to go before the
    # session began, had exited by then, and collect's ResumeRuntime failed (fds-dup3high and
    # signals-spawn in one ASan pass).
    for _ in $(seq 1200); do
      grep -q "^Output File" "$T/collect.log" 2>/dev/null && break
      alive "$C" || break
      sleep 0.1
    done
    grep -q "^Output File" "$T/collect.log" ||
      { cat "$T/collect.log" >&2; fail "$NAME $*: pipeprof collect -p did not start its session"; }
    touch "$T/go"
    set +e
    wait "$H"
    rc=$?
    wait "$C"
    rc_c=$?
    set -e
    same listen "$rc"
    [[ $rc_c == 0 ]] || { cat "$T/collect.log" >&2; fail "$NAME $*: pipeprof collect -p failed"; }
    readable "$T/listen.nettrace"
    ;;
  preload)
    set +e
    LD_PRELOAD=$PRELOAD "$HOST" "$@" >"$T/preload.out" 2>"$T/preload.err"
    rc=$?
    set -e
    same preload "$rc"
    ;;
  sessions)
    set +e
    env --default-signal=SIGINT,SIGQUIT LD_PRELOAD="$PRELOAD" "$HOST" "$@" \
      >"$T/sessions.out" 2>"$T/sessions.err" &
    H=$!
    set -e
    PP_PIDS+=($H)
    wait_socket "$H" >/dev/null
    n=0
    while alive "$H"; do
      mode=cpu
      ((n % 2)) && mode=wall
      if ! "$PIPEPROF" collect -p "$H" --duration 0.3 -o "$T/s$n.nettrace" \
        --providers "Microsoft-DotNETCore-SampleProfiler:0:4:mode=$mode;hz=1000,pipeprof:0:4" \
        >"$T/s$n.log" 2>&1; then
        # A session the host's exit cut short is no failure; one refused while it runs is. The
        # host removes its socket as it exits, before it is gone (an ASan build's exit takes a
        # while): one that ends within 2 s was exiting.
        for _ in {1..20}; do
          alive "$H" || break
          sleep 0.1
        done
        if alive "$H"; then
          cat "$T/s$n.log" "$T/sessions.err" >&2
          fail "$NAME: session $n failed while the host ran"
        fi
        note "$NAME: session $n refused as the host exited"
      fi
      n=$((n + 1))
    done
    set +e
    wait "$H"
    rc=$?
    set -e
    same sessions "$rc"
    note "$NAME: $n sessions started and stopped while it ran"
    ;;
  esac
  note "$NAME $* ($run): output and status as bare"
done
echo "host-contract $NAME $*: ok"
