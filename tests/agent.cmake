# Tests of the sampler (agent/agent.c, config.c, threads.c, timer.c, ring.c, drain.c, wall.c,
# sig-handler.c, sig-unwind.c). The sampling tests build their workloads with frame pointers and
# link pp_agent, so its pthread_create and blocking-call interposers apply to their own calls.
if(TARGET pp_agent)
  pp_add_test(test-agent-config LIBS pp_agent LABELS unit)
  pp_add_test(test-agent-ring LIBS pp_agent pthread LABELS unit)
  pp_add_test(test-agent-unwind LIBS pp_agent LABELS unit)
  pp_add_test(test-agent-sampling LIBS pp_agent pthread LABELS unit TIMEOUT 180)
  target_compile_options(test-agent-sampling PRIVATE -fno-omit-frame-pointer -O1)
  target_link_options(test-agent-sampling PRIVATE -rdynamic)
  target_compile_options(test-agent-unwind PRIVATE -fno-omit-frame-pointer)
endif()

# Ground truth: CPU profiles against the threads' own CPU-time accounting, both engines, with
# and without frame pointers, and the capture rate as an unprivileged user.
add_executable(no-perf ${CMAKE_SOURCE_DIR}/tests/tools/no-perf.c)
set_target_properties(no-perf PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
pp_add_script_test(agent-groundtruth agent-groundtruth.sh LABELS integration slow TIMEOUT 240)
