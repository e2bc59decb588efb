# nettrace reader: unit tests, hand-built hostile inputs, the shared real-runtime fixtures (and
# `pipeprof dump` on them), and the reader fuzz target's corpus (tests/fuzz/nettrace.cmake).
pp_add_test(test-nettrace-reader LIBS pp_nettrace LABELS unit)
pp_add_test(test-nettrace-hostile LIBS pp_nettrace LABELS unit TIMEOUT 600)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PP_TEST_CJSON REQUIRED IMPORTED_TARGET libcjson)
pp_add_test(test-nettrace-fixtures LIBS pp_nettrace PkgConfig::PP_TEST_CJSON LABELS integration
  TIMEOUT 600)
if(TARGET pipeprof)
  add_dependencies(test-nettrace-fixtures pipeprof)
endif()
