find_package(PkgConfig REQUIRED)
pkg_check_modules(PP_TEST_CJSON REQUIRED IMPORTED_TARGET libcjson)
pp_add_test(test-cli-report LIBS pp_nettrace PkgConfig::PP_TEST_CJSON LABELS integration)
add_dependencies(test-cli-report pipeprof)
pp_add_script_test(cli-record cli-record.sh LABELS integration TIMEOUT 180)
pp_add_script_test(golden-replay golden-replay.sh LABELS integration TIMEOUT 120)
pp_add_script_test(cli-record-commands cli-record-commands.sh LABELS integration slow TIMEOUT 180)
pp_add_script_test(dump-runtime-names dump-runtime-names.sh LABELS integration TIMEOUT 60)
# Wall-time bounds against a bare run: alone.
set_tests_properties(cli-record-commands PROPERTIES RUN_SERIAL TRUE)
# PIPEPROF_OUTPUT: a service, fork and exec children, crashes (tests/tools/output-host.c).
add_executable(output-host ${CMAKE_SOURCE_DIR}/tests/tools/output-host.c)
set_target_properties(output-host PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
pp_add_script_test(output-file output-file.sh LABELS integration TIMEOUT 180)
