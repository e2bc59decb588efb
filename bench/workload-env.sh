# SPDX-License-Identifier: MIT
# bench/workload-env.sh - sourced by overhead.sh and sample-events.sh (from the source tree's top):
# the workload they run in build B (PP_BINARY_DIR, default build) and gperftools' CPU profiler
# (Debian libgoogle-perftools-dev; GPERF empty when it is not installed).
B=${PP_BINARY_DIR:-build}
WORKLOAD=$B/samples/pp-sample-workload
GPERF=$(ls /usr/lib/*/libprofiler.so* 2>/dev/null | head -1 || true)
