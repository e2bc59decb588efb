# bench-sample: cost of one sample. A bare signal round trip (rt_tgsigqueueinfo to self, empty
# SA_SIGINFO handler) against the agent's handler taking a sample 32 frames deep (wall path, and
# CPU path as the perf engine takes it, with and without the thread's CFI row cache), and the
# walker's cost per frame. Run: build/bench/bench-sample [signals-per-batch [batches]]
if(TARGET pp_agent)
  add_executable(bench-sample ${CMAKE_CURRENT_LIST_DIR}/bench-sample.c)
  target_link_libraries(bench-sample PRIVATE pp_agent)
  target_compile_options(bench-sample PRIVATE -fno-omit-frame-pointer -fno-optimize-sibling-calls)
  set_target_properties(bench-sample PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
# bench-identify: what identifying the modules' files (ag_modules_identify, at a first
# announcement) costs against the module scan before it. Run: build/bench/bench-identify [ROUNDS [LIB...]]
if(TARGET pp_agent)
  add_executable(bench-identify ${CMAKE_CURRENT_LIST_DIR}/bench-identify.c)
  target_link_libraries(bench-identify PRIVATE pp_agent dl)
  set_target_properties(bench-identify PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
# bench-engine: what a CPU-mode sample costs the sampled thread per engine (perf_event, timers)
# against the bare perf_event signal round trip. Run: build/bench/bench-engine [RATE [ROUNDS]]
if(TARGET pp_agent)
  add_executable(bench-engine ${CMAKE_CURRENT_LIST_DIR}/bench-engine.c)
  target_link_libraries(bench-engine PRIVATE pp_agent pthread)
  target_compile_options(bench-engine PRIVATE -fno-optimize-sibling-calls)
  set_target_properties(bench-engine PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
# bench-sigmask: what the pthread_sigmask interposer costs a host masking signals (pass-through,
# another signal, the sampling signal) against libc's. Run: build/bench/bench-sigmask [ROUNDS [PAIRS]]
if(TARGET pp_agent)
  add_executable(bench-sigmask ${CMAKE_CURRENT_LIST_DIR}/bench-sigmask.c)
  target_link_libraries(bench-sigmask PRIVATE pp_agent pthread)
  target_compile_options(bench-sigmask PRIVATE -fno-omit-frame-pointer -fno-optimize-sibling-calls)
  set_target_properties(bench-sigmask PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()

# bench-interpose: what host/'s fd and signal interposers (close, dup2, sigaction, pthread_sigmask, open)
# cost per call against libc's own, the library holding fds and SIGPROF.
# Run: build/bench/bench-interpose [ROUNDS [CALLS]]
# Its open cases call through libbench-host-calls.so, code of the host's (host/fds.c's own
# program is the library's).
add_library(bench-host-calls SHARED ${CMAKE_CURRENT_LIST_DIR}/bench-host-calls.c)
# no tail calls: the interposer's return address must be in this object, not the caller's
target_compile_options(bench-host-calls PRIVATE -fno-optimize-sibling-calls)
set_target_properties(bench-host-calls PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
add_executable(bench-interpose ${CMAKE_CURRENT_LIST_DIR}/bench-interpose.c)
target_link_libraries(bench-interpose PRIVATE pp_host_server pp_host bench-host-calls pthread dl)
set_target_properties(bench-interpose PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
# bench-blocking-calls: calls the blocking interposers wrap that return at once (poll, read), per
# call; bench/blocking-calls.sh runs it bare and under `pipeprof record` in CPU and wall mode.
add_executable(bench-blocking-calls ${CMAKE_CURRENT_LIST_DIR}/bench-blocking-calls.c)
target_compile_options(bench-blocking-calls PRIVATE -fno-omit-frame-pointer -fno-optimize-sibling-calls)
set_target_properties(bench-blocking-calls PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
# bench-dlclose: dlopen + dlclose cycles of a small library, timed; bench/dlclose.sh runs it bare,
# with the agent preloaded idle and under `pipeprof record` (the dlclose interposer's rescans).
add_executable(bench-dlclose ${CMAKE_CURRENT_LIST_DIR}/bench-dlclose.c)
target_include_directories(bench-dlclose PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(bench-dlclose PRIVATE dl)
set_target_properties(bench-dlclose PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
# bench-http-tags: what an HTTP recording's frame tags (bridge/frame-tags.c) add to a sample
# against pp_profile_add_sample alone, with 0, 60 and 5000 modules gone.
# Run: build/bench/bench-http-tags [ROUNDS [SAMPLES]]
if(TARGET pp_bridge AND TARGET pp_http)
  add_executable(bench-http-tags ${CMAKE_CURRENT_LIST_DIR}/bench-http-tags.c)
  target_link_libraries(bench-http-tags PRIVATE pp_bridge)
  target_include_directories(bench-http-tags PRIVATE ${PROJECT_SOURCE_DIR})
  set_target_properties(bench-http-tags PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
