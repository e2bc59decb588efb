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
# bench-thread-create: pthread_create + pthread_join of a thread that does nothing and of one that
# burns about 20 us of CPU, wall and process CPU time per creation; bench/thread-create.sh runs it
# bare, with libpipeprof.so preloaded idle and under `pipeprof record` in CPU and wall mode.
# Run: build/bench/bench-thread-create [N [BATCHES [WORK_ITERS [SETTLE_MS]]]]
add_executable(bench-thread-create ${CMAKE_CURRENT_LIST_DIR}/bench-thread-create.c)
target_include_directories(bench-thread-create PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(bench-thread-create PRIVATE pthread)
set_target_properties(bench-thread-create PROPERTIES RUNTIME_OUTPUT_DIRECTORY
  ${CMAKE_BINARY_DIR}/bench)
