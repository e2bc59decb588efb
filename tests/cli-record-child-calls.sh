#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/cli-record-child-calls.sh - what `pipeprof record` makes each short child do, seen by
# strace -f (issue 22: every exec'd child of a recorded tree pays it). A recorded child
#   - reads no time zone: the nettrace header's UTC date is worked out by nettrace/ itself
#     (glibc's gmtime_r() opened and parsed /etc/localtime at its first call, in every child);
#   - does not poll for its IPC loop's end at exit: the exit handler waits on a futex the loop
#     thread wakes (ipc_server_stop_quick slept 1 ms at a time, so every exit took 1 ms longer);
#   - is not sent ResumeRuntime: its start is held until its session runs, and then goes on by
#     itself (PIPEPROF_RESUME_AT_SESSION; its advertise says so), which saves a connection per
#     child on both sides (a third of the connections of a short child);
#   - advertises its next connection (the one `record` keeps for StopTracing) 20 ms after its
#     session began, not at once: most short children have ended by then (one connection each
#     instead of two). A lower bound, which a loaded machine only lengthens;
#   - starts its session by itself and connects only once it has a sample (PIPEPROF_RECORD_LAZY;
#     its advertise says its stream follows): `/bin/true` makes no connection to the recording's
#     socket at all, while a busy child (a shell loop of about 1 s) still gets its file with
#     its samples. Only CMD's own image is sent a CollectTracing;
#   - in CPU mode, starts that session and its agent only some ms after its constructor, on its
#     IPC loop thread (IPC_LAZY_START_MS, 5; 400 here, PIPEPROF_LAZY_START_MS, since strace
#     slows every system call of a child): `/bin/true`, long gone by then, maps none of the
#     recording's CFI tables and creates no sampling timer, while the busy child still gets its
#     samples. In wall mode the session starts at once, as before (a skipped wall pass is lost):
#     there `/bin/true` maps them (so the pattern below is seen to match).
# The children still end their sessions: the recording's summary counts all 8 processes (those
# that never connected through the tally, PIPEPROF_RECORD_TALLY).
# Then, without strace: a child killed by SIGKILL after its first samples leaves its samples.
source "$(dirname "$0")/ipc-lib.sh"
command -v strace >/dev/null || skip "strace is missing: cannot see the children's calls"
strace -f -qq -o /dev/null true 2>/dev/null || skip "strace cannot trace here (ptrace refused)"

# The samples in the files of a recording's children (kids.PID.nettrace in $1).
children_samples() {
  local f total=0
  for f in "$1"/kids.[0-9]*.nettrace; do
    [[ -f $f ]] || continue
    total=$((total + $("$PIPEPROF" convert --format folded "$f" 2>/dev/null | awk '{ s += $NF } END { print s + 0 }')))
  done
  echo "$total"
}

# The busy child's loop is 1500000 steps, about 1 s of CPU here: a CPU-mode child's session starts
# 400 ms after its constructor (PIPEPROF_LAZY_START_MS, above), and one that ends before it has no
# sample at all. With 600000 steps (0.42 s of CPU at a load of 7, less on an idle core) a
# fresh-clone CI run's quick moment left the children's files 3 samples (2026-11-30; a loop of
# 250000 steps gets 0 samples here, 450000 about 30).
for mode in cpu wall; do
  out=$T/$mode
  mkdir "$out"
  strace -f -qq -ttt -s 24 -e trace=openat,open,nanosleep,clock_nanosleep,sendto,connect,clone,clone3,execve,timer_create -o "$out/strace" \
    env PIPEPROF_LAZY_START_MS=400 "${RECORD_ENV[@]}" "$PIPEPROF" record --mode "$mode" -o "$out/kids.nettrace" -- \
    sh -c 'for i in 1 2 3 4 5; do /bin/true; done; sh -c "i=0; while [ \$i -lt 1500000 ]; do i=\$((i+1)); done"; /bin/sleep 0.2' 2>"$out/err" ||
    { cat "$out/err" >&2; fail "$mode: record failed"; }
  execs=$(grep -c 'libpipeprof' "$out/strace" || true)
  tz=$(grep -c 'localtime' "$out/strace" || true)
  polls=$(grep -cE 'nanosleep\((CLOCK_[A-Z]*, 0, )?\{tv_sec=0, tv_nsec=1000000\}' "$out/strace" || true)
  # ResumeRuntime: the 20-byte header alone, command set 4 (process), id 1.
  resumes=$(grep -c 'sendto(.*"DOTNET_IPC_V1\\0\\24\\0\\4\\1' "$out/strace" || true)
  sessions=$(grep -c 'sendto(.*"DOTNET_IPC_V1\\0[^"]*\\2\\3\\0\\0' "$out/strace" || true)
  # Per image, the time from its first connection to record's socket (made on its main thread)
  # to its second (on its IPC loop thread): "smallest gap, images that connected twice". Threads
  # are mapped to their process through the clone calls; an exec starts a new image.
  read -r gap_min twice < <(awk '
      function tg(x) { return (x in g) ? g[x] : x }
      /clone3?\(/ && /CLONE_THREAD/ { if ($NF ~ /^[0-9]+$/) g[$NF] = tg($1); else pend[$1] = 1; next }
      /<\.\.\. clone3? resumed>/ && pend[$1] { g[$NF] = tg($1); delete pend[$1]; next }
      /execve\(/ && $NF == "0" { n[tg($1)] = 0; next }
      /connect\(.*port\.sock/ { p = tg($1); n[p]++; if (n[p] == 1) t[p] = $2;
        else if (n[p] == 2) { d = $2 - t[p]; if (c == 0 || d < m) m = d; c++ } }
      END { printf "%.4f %d\n", m, c }' "$out/strace")
  # connect() calls to record's socket by an image of /bin/true (any of its threads), and those
  # of them by an image whose file holds no sample: a child connects at its first sample, so a
  # /bin/true that a wall pass caught (strace and a loaded machine stretch its life; in wall mode
  # its session starts at once) connects rightly. Only a connection without a sample is wrong
  # (fresh-clone CI run TT's ASan stage: 1 connection, counted before as a failure whatever it held).
  true_pids=$(awk '
      function tg(x) { return (x in g) ? g[x] : x }
      /clone3?\(/ && /CLONE_THREAD/ { if ($NF ~ /^[0-9]+$/) g[$NF] = tg($1); else pend[$1] = 1; next }
      /<\.\.\. clone3? resumed>/ && pend[$1] { g[$NF] = tg($1); delete pend[$1]; next }
      /execve\(/ && $NF == "0" { img[tg($1)] = ($0 ~ /execve\("\/bin\/true"/); next }
      /connect\(.*port\.sock/ && img[tg($1)] { print tg($1) }' "$out/strace")
  true_connects=$(grep -c . <<<"$true_pids" || true)
  true_unsampled=0
  for pid in $(sort -u <<<"$true_pids"); do
    n=0
    [[ -f $out/kids.$pid.nettrace ]] &&
      n=$("$PIPEPROF" convert --format folded "$out/kids.$pid.nettrace" 2>/dev/null | awk '{ s += $NF } END { print s + 0 }')
    ((n > 0)) || true_unsampled=$((true_unsampled + 1))
  done
  # What the images of /bin/true did of the agent's start: opens of the recording's stored CFI
  # tables (cfi/cfi-BUILDID) and CPU-time timers created.
  read -r true_cfi true_timers < <(awk '
      function tg(x) { return (x in g) ? g[x] : x }
      /clone3?\(/ && /CLONE_THREAD/ { if ($NF ~ /^[0-9]+$/) g[$NF] = tg($1); else pend[$1] = 1; next }
      /<\.\.\. clone3? resumed>/ && pend[$1] { g[$NF] = tg($1); delete pend[$1]; next }
      /execve\(/ && $NF == "0" { img[tg($1)] = ($0 ~ /execve\("\/bin\/true"/); next }
      /open(at)?\(.*\/cfi\/cfi-/ && img[tg($1)] { c++ }
      /timer_create\(/ && img[tg($1)] { t++ }
      END { print c + 0, t + 0 }' "$out/strace")
  busy_samples=$(children_samples "$out")
  line=$(grep -m1 'recorded' "$out/err" || true)
  read -r recorded without < <(sed -n 's/^pipeprof: .*; \([0-9]*\) process[es]* recorded, \([0-9]*\) without samples.*/\1 \2/p' <<<"$line")
  note "$mode: $execs opens of the library, $tz of the time zone, $polls 1 ms sleeps, $sessions CollectTracing, $resumes ResumeRuntime, $twice images connected twice (first gap $gap_min s), $true_connects connects by /bin/true ($true_unsampled images without a sample), $true_cfi opens of stored CFI tables and $true_timers timers by /bin/true, $busy_samples samples in the children's files; $line"
  [[ $execs -ge 8 ]] || fail "$mode: strace saw $execs loads of the library, want 8 or more (sh and 7 children)"
  [[ $tz == 0 ]] || fail "$mode: $tz opens of the time zone in the recorded tree: $(grep localtime "$out/strace" | head -3)"
  [[ $sessions -ge 1 ]] || fail "$mode: strace saw $sessions CollectTracing requests, want 1, CMD's (the pattern no longer matches?)"
  [[ $sessions == 1 ]] || fail "$mode: record sent $sessions CollectTracing requests, want 1 (CMD's): the children start their own"
  [[ $true_unsampled == 0 ]] ||
    fail "$mode: $true_unsampled images of /bin/true connected to the recording without a sample (no sample, no connection)"
  if [[ $mode == cpu ]]; then
    # its agent never starts (PIPEPROF_LAZY_START_MS above): no sample, so no connection at all
    [[ $true_connects == 0 ]] ||
      fail "$mode: the images of /bin/true made $true_connects connections to the recording"
    [[ $true_cfi == 0 && $true_timers == 0 ]] ||
      fail "$mode: the images of /bin/true started their agent: $true_cfi opens of stored CFI tables, $true_timers timers (their session waits 400 ms)"
  else
    [[ $true_cfi -ge 5 ]] ||
      fail "$mode: the images of /bin/true opened $true_cfi stored CFI tables, want 5 or more (wall mode starts at once; the pattern no longer matches?)"
  fi
  [[ $busy_samples -ge 5 ]] || fail "$mode: $busy_samples samples in the children's files, want 5 or more (the busy child's, about 1 s)"
  [[ $twice -ge 1 ]] || fail "$mode: no image connected twice (sh and sleep live past 20 ms)"
  awk -v g="$gap_min" 'BEGIN { exit !(g >= 0.015) }' ||
    fail "$mode: an image connected again $gap_min s after its session's connection, want 0.02 (the spare waits)"
  [[ $resumes == 0 ]] || fail "$mode: record sent $resumes ResumeRuntime to children that resume at their session's start"
  [[ $polls == 0 ]] || fail "$mode: $polls 1 ms sleeps in the recorded tree (the exit's wait for the IPC loop)"
  [[ $((${recorded:-0} + ${without:-0})) == 8 ]] ||
    fail "$mode: summary counts ${recorded:-?} + ${without:-?} processes, want 8 (sh and 7 children)"
done

# A child killed by SIGKILL once it has burned 0.4 s of CPU in a busy loop (by its /proc stat, so
# that a loaded machine only makes it wait longer): it connected at its first samples and streamed
# from then on, so its file holds the samples of the blocks it had flushed (what its last 100 ms
# and its rundown would have added is lost: the summary counts it as incomplete).
out=$T/killed
mkdir "$out"
cat >"$T/killer.sh" <<'EOF'
sh -c 'while :; do :; done' &
p=$!
need=$(( $(getconf CLK_TCK) * 4 / 10 ))
while :; do
  set -- $(cut -d' ' -f14,15 "/proc/$p/stat")
  [ $(($1 + $2)) -ge "$need" ] && break
  sleep 0.05
done
kill -9 "$p"
wait
true
EOF
"${RECORD_ENV[@]}" "$PIPEPROF" record -o "$out/kids.nettrace" -- sh "$T/killer.sh" 2>"$out/err" ||
  { cat "$out/err" >&2; fail "killed: record failed"; }
killed_samples=$(children_samples "$out")
note "killed: $killed_samples samples in the killed child's file; $(grep -m1 recorded "$out/err" || true)"
[[ $killed_samples -ge 5 ]] || fail "killed: $killed_samples samples kept of a child killed after 0.4 s of CPU, want 5 or more"
grep -q "1 with an incomplete trace" "$out/err" || fail "killed: the summary does not count the cut trace: $(cat "$out/err")"
echo "ok   recorded children read no time zone, do not poll at exit, get no ResumeRuntime, connect only with a sample and again only later; a killed child keeps its samples"
