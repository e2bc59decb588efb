# tick-bias: where a thread CPU-time timer's signals land in a bursty thread that makes system
# calls, without pipeprof (the timer engine's limit, docs/architecture.md "The tick's bias").
# Run: build/bench/tick-bias [SECONDS [HZ [ROUNDS [BUSY [bursty|steady [counter|clock]]]]]]
add_executable(tick-bias ${CMAKE_CURRENT_LIST_DIR}/tick-bias.c)
target_link_libraries(tick-bias PRIVATE pthread)
target_compile_options(tick-bias PRIVATE -O2)
set_target_properties(tick-bias PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
