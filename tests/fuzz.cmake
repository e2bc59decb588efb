# pp_add_fuzz(NAME LIBS ... [SOURCES ...]): tests/fuzz/NAME.c defines LLVMFuzzerTestOneInput;
# SOURCES are more files of the code under test (the CLI's, which is no library).
# - Always: a replay executable that runs tests/fuzz/corpus/NAME/ under ctest (label fuzz-replay).
# - With -DPP_FUZZ=ON (clang): also NAME-fuzzer, linked with libFuzzer. In that build every
#   library under test is compiled with -fsanitize=fuzzer-no-link,address,undefined too
#   (cmake/sanitizers.cmake), so the fuzzer sees their coverage and ASan/UBSan check them, not
#   only the harness. tools/fuzz.sh TARGET SECONDS makes that build and runs a campaign.
function(pp_add_fuzz name)
  cmake_parse_arguments(F "" "" "LIBS;SOURCES" ${ARGN})
  set(corpus ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${name})
  add_executable(${name}-replay ${CMAKE_SOURCE_DIR}/tests/fuzz/${name}.c
    ${CMAKE_SOURCE_DIR}/tests/fuzz/replay.c ${F_SOURCES})
  set_target_properties(${name}-replay PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${name}-replay PRIVATE ${F_LIBS})
  add_test(NAME ${name}-replay COMMAND ${name}-replay ${corpus})
  set_tests_properties(${name}-replay PROPERTIES LABELS fuzz-replay TIMEOUT 300)
  if(PP_FUZZ)
    add_executable(${name}-fuzzer ${CMAKE_SOURCE_DIR}/tests/fuzz/${name}.c ${F_SOURCES})
    set_target_properties(${name}-fuzzer PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
    target_compile_options(${name}-fuzzer PRIVATE -fsanitize=fuzzer)
    target_link_options(${name}-fuzzer PRIVATE -fsanitize=fuzzer)
    target_link_libraries(${name}-fuzzer PRIVATE ${F_LIBS})
  endif()
endfunction()

# Each area registers its fuzz targets in tests/fuzz/<area>.cmake.
file(GLOB pp_fuzz_fragments ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/*.cmake)
foreach(fragment ${pp_fuzz_fragments})
  include(${fragment})
endforeach()
