# bench-reader: nettrace reader throughput from memory (median of 5), on the largest shared
# fixture by default, a given FILE, or a trace generated with the writer (--generate-mb N).
# Run: PP_SOURCE_DIR=<repo> build/bench/bench-reader [--decode] [FILE | --generate-mb 100]
if(TARGET pp_nettrace)
  add_executable(bench-reader bench-reader.c)
  target_link_libraries(bench-reader PRIVATE pp_nettrace)
  set_target_properties(bench-reader PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
