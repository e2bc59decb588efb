# HTTP pull endpoints (http/, docs/http.md): the pure request/route/URL code, and the server on
# a real libuv loop with a fake sampling backend.
if(TARGET pp_http)
  find_package(Threads REQUIRED)
  pp_add_test(test-http-request SOURCES ${CMAKE_SOURCE_DIR}/tests/test-http-request.c
    LIBS pp_http LABELS unit)
  pp_add_test(test-http-server SOURCES ${CMAKE_SOURCE_DIR}/tests/test-http-server.c
    LIBS pp_http Threads::Threads LABELS unit TIMEOUT 180)
  # bind() wrapped: a socket file swapped for a link as it is bound (docs/http.md)
  target_link_options(test-http-server PRIVATE -Wl,--wrap=bind)
endif()
