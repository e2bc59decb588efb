# host/: unit tests that link pp_host. The host's calls come from a shared object of their own,
# bound to this program's interposers (ENABLE_EXPORTS), as code that is not the library's.
# test-host-unshare takes ns.c's unshare interposer from the server's archive.
add_library(test-host-unshare-calls SHARED ${CMAKE_SOURCE_DIR}/tests/test-host-unshare-calls.c)
target_include_directories(test-host-unshare-calls PRIVATE ${CMAKE_SOURCE_DIR})
set_target_properties(test-host-unshare-calls PROPERTIES LIBRARY_OUTPUT_DIRECTORY
  ${CMAKE_BINARY_DIR}/tests)
pp_add_test(test-host-unshare SOURCES ${CMAKE_SOURCE_DIR}/tests/test-host-unshare.c
  LIBS pp_host_server pp_host test-host-unshare-calls LABELS unit)
set_target_properties(test-host-unshare PROPERTIES ENABLE_EXPORTS ON)
