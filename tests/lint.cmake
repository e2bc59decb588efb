# Lint gates that need the build: the signal handler's imports (tools/check-sigsafe.sh).
add_test(NAME check-sigsafe COMMAND bash ${CMAKE_SOURCE_DIR}/tools/check-sigsafe.sh ${CMAKE_BINARY_DIR})
set_tests_properties(check-sigsafe PROPERTIES LABELS unit TIMEOUT 60)
