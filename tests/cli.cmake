find_package(PkgConfig REQUIRED)
pkg_check_modules(PP_TEST_CJSON REQUIRED IMPORTED_TARGET libcjson)
pp_add_test(test-cli-report LIBS pp_nettrace PkgConfig::PP_TEST_CJSON LABELS integration)
add_dependencies(test-cli-report pipeprof)
