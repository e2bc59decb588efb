# Tests of the sampler (agent/agent.c, config.c, threads.c, timer.c, ring.c, drain.c, wall.c,
# sig-handler.c, sig-unwind.c). The sampling tests build their workloads with frame pointers and
# link pp_agent, so its pthread_create and blocking-call interposers apply to their own calls.
if(TARGET pp_agent)
  pp_add_test(test-agent-config LIBS pp_agent LABELS unit)
  pp_add_test(test-agent-ring LIBS pp_agent pthread LABELS unit)
  pp_add_test(test-agent-unwind LIBS pp_agent LABELS unit)
  # 160 s of its 180 under ASan in a suite run beside three busy loops (load 20-25): the
  # timeout guards against a hang, not a speed.
  pp_add_test(test-agent-sampling LIBS pp_agent pthread LABELS unit TIMEOUT 600)
  target_compile_options(test-agent-sampling PRIVATE -fno-omit-frame-pointer -O1)
  target_link_options(test-agent-sampling PRIVATE -rdynamic)
  target_compile_options(test-agent-unwind PRIVATE -fno-omit-frame-pointer)
  # A fork during the library's loader calls (host/dl.c) leaves the child's loader usable; one
  # from the host's own (a walk's callback, the destructor of pp-dlfork-unload, the constructor
  # of pp-dlfork-load) returns.
  add_library(pp-dlfork-unload SHARED ${CMAKE_SOURCE_DIR}/tests/fixtures/dlfork-unload.c)
  set_target_properties(pp-dlfork-unload PROPERTIES LIBRARY_OUTPUT_DIRECTORY
    ${CMAKE_BINARY_DIR}/tests)
  # and pp-dlfork-load, whose constructor calls the test's pp_dlfork_on_load (exported)
  add_library(pp-dlfork-load SHARED ${CMAKE_SOURCE_DIR}/tests/fixtures/dlfork-load.c)
  set_target_properties(pp-dlfork-load PROPERTIES LIBRARY_OUTPUT_DIRECTORY
    ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(pp-dlfork-load PRIVATE dl)
  pp_add_test(test-agent-loader-fork LIBS pp_agent pthread dl LABELS unit)
  target_link_options(test-agent-loader-fork PRIVATE -rdynamic)
  add_dependencies(test-agent-loader-fork pp-dlfork-unload pp-dlfork-load)
endif()

# Ground truth: CPU profiles against the threads' own CPU-time accounting, both engines, with
# and without frame pointers, and the capture rate as an unprivileged user.
add_executable(no-perf ${CMAKE_SOURCE_DIR}/tests/tools/no-perf.c)
set_target_properties(no-perf PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
pp_add_script_test(agent-groundtruth agent-groundtruth.sh LABELS integration slow TIMEOUT 300)
# The same with much of the CPU in system calls: kernel time under the calls' stacks. 94 s in a
# CI run at load 17; a case that misses on a loaded machine pools up to 8 runs (gt_pool_more).
pp_add_script_test(agent-groundtruth-syscalls agent-groundtruth-syscalls.sh LABELS integration slow
  TIMEOUT 600)
# The perf-ring engine (a prototype): shares against the CPU truth, no SIGPROF, the fallback.
pp_add_script_test(agent-perf-ring agent-perf-ring.sh LABELS integration slow TIMEOUT 300)
# Code in a file mapped by hand (as .NET maps ReadyToRun images) is named by file and offset.
if(TARGET pp-sample-mapped)
  pp_add_script_test(agent-mapped-code agent-mapped-code.sh LABELS integration TIMEOUT 60)
endif()
# A library unloaded and another loaded at its address: each named by its own function.
pp_add_script_test(agent-module-reuse agent-module-reuse.sh LABELS integration TIMEOUT 300)
pp_add_script_test(agent-stacks agent-stacks.sh LABELS integration slow TIMEOUT 180)
pp_add_script_test(agent-credentials agent-credentials.sh LABELS integration slow TIMEOUT 120)

# Hostile stacks (a junk frame record, a return address into data, a foreign stack pointer):
# the agent's samples stay clean. The fixture has no unwind tables, so frame pointers are used.
if(TARGET pp_agent AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|aarch64|arm64")
  add_library(pp-hostile-fixture STATIC ${CMAKE_SOURCE_DIR}/tests/fixtures/agent-hostile.c)
  target_compile_options(pp-hostile-fixture PRIVATE -fno-asynchronous-unwind-tables
    -fno-unwind-tables)
  pp_add_test(test-agent-hostile LIBS pp_agent pp-hostile-fixture pthread LABELS unit TIMEOUT 60)
endif()
# Accuracy against the threads' own CPU time: alone, not beside ctest's other jobs on a 2-core
# machine (timer expiries under full contention drift by more than the 1-point limit).
set_tests_properties(agent-groundtruth agent-groundtruth-syscalls agent-perf-ring PROPERTIES
  RUN_SERIAL TRUE)

# What the agent holds of the host's resources: fds and memory of wall mode, the wall thread's
# lifetime, unsampled intervals, rings kept mapped across sessions under a masking host.
if(TARGET pp_agent)
  pp_add_test(test-agent-resources LIBS pp_agent pthread LABELS unit TIMEOUT 120)
  target_compile_options(test-agent-resources PRIVATE -fno-omit-frame-pointer)
endif()
# Short threads' CPU placed in samples (the timers' first-sample lottery, issue 19): alone too.
pp_add_script_test(agent-groundtruth-short agent-groundtruth-short.sh LABELS integration slow
  TIMEOUT 300)
set_tests_properties(agent-groundtruth-short PROPERTIES RUN_SERIAL TRUE)
