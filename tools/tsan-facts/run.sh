#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tools/tsan-facts/run.sh - what GCC's ThreadSanitizer runtime itself changes in a program's
# signals and threads, shown bare: each program here is built plain and with -fsanitize=thread and
# run both ways, nothing of pipeprof's loaded. The host-contract hosts skip the probes these
# change under TSan (tests/hosts/signals.c; docs/architecture.md, "Sanitizers").
#   context-edit       a handler installed with SA_RESTART that turns the restarted read into
#                      EINTR by editing its ucontext (as host/sig-chain.c does for a host handler
#                      without SA_RESTART): plain, read fails with EINTR; TSan, the edit is lost
#                      and read waits for its byte
#   one-instance       a thread-directed and a process-directed SIGPROF for a thread that burns
#                      without a call: plain, the handler runs for each; TSan, it holds one
#                      instance per signal and thread until its next interceptor, and drops the
#                      second
#   background-thread  a program that starts one thread: plain 2 threads, TSan 3 (its own)
set -euo pipefail
cd "$(dirname "$0")"
out=$(mktemp -d /tmp/tsan-facts.XXXXXX)
trap 'rm -rf "$out"' EXIT
cc=${CC:-cc}
if ! echo 'int main(void){return 0;}' | "$cc" -x c - -fsanitize=thread -o "$out/probe" 2>/dev/null; then
  echo "SKIP (loud): $cc cannot build with -fsanitize=thread here" >&2
  exit 77
fi
for prog in context-edit one-instance background-thread; do
  "$cc" -O1 -g "$prog.c" -o "$out/$prog-plain" -lpthread
  "$cc" -O1 -g -fsanitize=thread "$prog.c" -o "$out/$prog-tsan" -lpthread
  echo "$prog plain: $("$out/$prog-plain")"
  echo "$prog tsan:  $(env -u LD_PRELOAD "$out/$prog-tsan")"
done
