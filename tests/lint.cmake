# Lint gates that need the build: the signal handler's imports (tools/check-sigsafe.sh).
add_test(NAME check-sigsafe COMMAND bash ${CMAKE_SOURCE_DIR}/tools/check-sigsafe.sh ${CMAKE_BINARY_DIR})
set_tests_properties(check-sigsafe PROPERTIES LABELS unit TIMEOUT 60)
# The shim's load-time hooks are in the loader's tables (common/platform.h).
add_test(NAME check-shim-hooks COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check-shim-hooks.sh)
set_tests_properties(check-shim-hooks PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77
  ENVIRONMENT "PP_BINARY_DIR=${CMAKE_BINARY_DIR};PP_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
# libpipeprof.so exports host/'s interposers, include/pipeprof.h and its markers, and nothing else.
add_test(NAME check-host-exports COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check-host-exports.sh)
set_tests_properties(check-host-exports PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77
  ENVIRONMENT "PP_BINARY_DIR=${CMAKE_BINARY_DIR};PP_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
# libpipeprof.so loads only libuv and libc at start (shim/lazy-deps.c: the HTTP side's libraries).
add_test(NAME lib-deps COMMAND bash ${CMAKE_SOURCE_DIR}/tests/lib-deps.sh)
set_tests_properties(lib-deps PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77
  ENVIRONMENT "PP_BINARY_DIR=${CMAKE_BINARY_DIR};PP_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
# The library's loader calls are host/dl.c's, kept out of the host's forks.
add_test(NAME check-loader-calls COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check-loader-calls.sh)
set_tests_properties(check-loader-calls PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77
  ENVIRONMENT "PP_BINARY_DIR=${CMAKE_BINARY_DIR};PP_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
