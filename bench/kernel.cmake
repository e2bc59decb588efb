# tick-bias: where a thread CPU-time timer's signals land in a bursty thread that makes system
# calls, without pipeprof (the timer engine's limit, docs/architecture.md "The tick's bias").
# Run: build/bench/tick-bias [SECONDS [HZ [ROUNDS [BUSY [bursty|steady [counter|clock]]]]]]
add_executable(tick-bias ${CMAKE_CURRENT_LIST_DIR}/tick-bias.c)
target_link_libraries(tick-bias PRIVATE pthread)
target_compile_options(tick-bias PRIVATE -O2)
set_target_properties(tick-bias PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
# bench-perfring: a perf_event sample without a signal (the kernel's ring buffer read by a thread,
# with IP only, user stack copies or callchains) against today's F_SETSIG delivery, ITIMER_PROF
# and gperftools, per delivered sample (docs/performance.md "A perf sample without a signal").
# Run: build/bench/bench-perfring [RATE [ROUNDS [UNITS]]]
add_executable(bench-perfring ${CMAKE_CURRENT_LIST_DIR}/bench-perfring.c)
target_link_libraries(bench-perfring PRIVATE pthread ${CMAKE_DL_LIBS})
target_compile_options(bench-perfring PRIVATE -O2 -fno-omit-frame-pointer -fno-optimize-sibling-calls)
set_target_properties(bench-perfring PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)

# tick-shadow: a thread that runs across every tick of its CPU, so that the threads it preempts
# get no CPU-time timer expiry (test-agent-sampling's late-tick case without a timer sample).
# Run: build/bench/tick-shadow SECONDS [ON_MS OFF_MS]   or   build/bench/tick-shadow measure [S]
add_executable(tick-shadow ${CMAKE_CURRENT_LIST_DIR}/tick-shadow.c)
target_link_libraries(tick-shadow PRIVATE pthread)
target_compile_options(tick-shadow PRIVATE -O2)
set_target_properties(tick-shadow PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
