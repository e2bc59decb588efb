# bench-reap: the CPU a parent spends reaping a child that ran the agent (LD_PRELOAD of
# libpipeprof.so) against a bare child, alternating in the same run.
# Run: build/bench/bench-reap build/lib/libpipeprof.so [CHILDREN [LIFE_MS [THREADS]]]
add_executable(bench-reap ${CMAKE_CURRENT_LIST_DIR}/bench-reap.c)
target_link_libraries(bench-reap PRIVATE pthread)
set_target_properties(bench-reap PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
# bench-wall-threads: fds, openable fds and resident memory of a host with many sleeping threads
# before, during and after a wall session, with the samples and losses per thread-second.
# Run: (ulimit -n 1024; build/bench/bench-wall-threads [THREADS [HZ [SECONDS]]])
if(TARGET pp_agent)
  add_executable(bench-wall-threads ${CMAKE_CURRENT_LIST_DIR}/bench-wall-threads.c)
  target_link_libraries(bench-wall-threads PRIVATE pp_agent pthread)
  set_target_properties(bench-wall-threads PROPERTIES RUNTIME_OUTPUT_DIRECTORY
    ${CMAKE_BINARY_DIR}/bench)
endif()
