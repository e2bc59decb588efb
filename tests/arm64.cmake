# Tests of a cross build for Linux arm64 (cmake/aarch64-linux-gnu.cmake), run under qemu-user
# from the x86-64 host: the unit tests run through CMAKE_CROSSCOMPILING_EMULATOR as they are;
# these need the host's own build too (its pipeprof records the emulated program), found in
# PP_HOST_BINARY_DIR (default: build/ of the same checkout). CI's arm64 stage runs
# `ctest -L 'unit|arm64'` in build-arm64.
if(CMAKE_CROSSCOMPILING AND CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(PP_HOST_BINARY_DIR ${CMAKE_SOURCE_DIR}/build CACHE PATH
    "The x86-64 build whose pipeprof records the emulated arm64 programs")
  pp_add_script_test(arm64-groundtruth arm64-groundtruth.sh LABELS arm64 TIMEOUT 300)
  set_property(TEST arm64-groundtruth APPEND PROPERTY ENVIRONMENT
    "PP_HOST_BINARY_DIR=${PP_HOST_BINARY_DIR}")
  pp_add_script_test(arm64-e2e arm64-e2e.sh LABELS arm64 TIMEOUT 180)
  set_property(TEST arm64-e2e APPEND PROPERTY ENVIRONMENT "PP_HOST_BINARY_DIR=${PP_HOST_BINARY_DIR}")
  # Accuracy against the threads' own CPU time: alone, not beside ctest's other jobs.
  set_tests_properties(arm64-groundtruth PROPERTIES RUN_SERIAL TRUE)
endif()
