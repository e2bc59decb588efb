# bench-writer: nettrace writer throughput on sample-like events (null and memory sinks).
# Run: build/bench/bench-writer [events] [distinct-stacks]
if(TARGET pp_nettrace)
  add_executable(bench-writer bench-writer.c)
  target_link_libraries(bench-writer PRIVATE pp_nettrace)
  set_target_properties(bench-writer PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
