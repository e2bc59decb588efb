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
