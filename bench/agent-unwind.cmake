# bench-unwind: DWARF unwinding cost, our compact CFI step (agent/sig-cfi.c) against libgcc's
# _Unwind_Backtrace, on the same deep -fomit-frame-pointer stack in the same run. x86_64 and
# aarch64 (cross-built, it runs under qemu-user: figures then are emulated ones).
# Run: build/bench/bench-unwind [depth] [batches]
if(TARGET pp_agent)
  add_executable(bench-unwind bench-unwind.c ${CMAKE_SOURCE_DIR}/tests/fixtures/agent-cfi-chain.c)
  target_link_libraries(bench-unwind PRIVATE pp_agent)
  set_target_properties(bench-unwind PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
  set_source_files_properties(${CMAKE_SOURCE_DIR}/tests/fixtures/agent-cfi-chain.c PROPERTIES
    COMPILE_OPTIONS "-O2;-fomit-frame-pointer;-fno-optimize-sibling-calls")
endif()
# bench-entry: the entry step's cost on walks of code without CFI (x86-64).
# Run: build/bench/bench-entry [batches] [reps]
if(TARGET pp_agent)
  add_executable(bench-entry bench-entry.c ${CMAKE_SOURCE_DIR}/tests/fixtures/agent-entry-stubs.c)
  target_link_libraries(bench-entry PRIVATE pp_agent)
  set_target_properties(bench-entry PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
# bench-gopcln: a Go module's pclntab in its CFI table, at build time and per walk (x86-64).
# Run: build/bench/bench-gopcln GO-ELF-FILE [batches] [reps]
if(TARGET pp_agent)
  add_executable(bench-gopcln bench-gopcln.c)
  target_link_libraries(bench-gopcln PRIVATE pp_agent)
  set_target_properties(bench-gopcln PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
