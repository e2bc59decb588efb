# HTTP request reader, router and URL parser: replayed over tests/fuzz/corpus/fuzz-http-request/
# in every build.
if(TARGET pp_http)
  pp_add_fuzz(fuzz-http-request LIBS pp_http)
endif()
