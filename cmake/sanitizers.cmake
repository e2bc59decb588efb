# PP_SANITIZE="address;undefined" or "thread". UBSan never recovers, so a report fails the test.
if(PP_SANITIZE)
  string(REPLACE ";" "," pp_san "${PP_SANITIZE}")
  add_compile_options(-fsanitize=${pp_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${pp_san})
endif()

# PP_FUZZ=ON (clang only): a fuzzing build. Every library is compiled with libFuzzer's coverage
# instrumentation and ASan + UBSan, not only the harness: without it the fuzzer sees no edge of
# the code under test and runs blind (issue 20: 1 new unit in 60 s, cov 20, against cov 255).
# Executables link the sanitizer runtimes (which also hold the coverage callbacks); the
# *-fuzzer targets add libFuzzer itself (tests/fuzz.cmake). tools/fuzz.sh makes such a build.
if(PP_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "PP_FUZZ=ON needs clang: -DCMAKE_C_COMPILER=clang")
  endif()
  if(PP_SANITIZE)
    message(FATAL_ERROR "PP_FUZZ=ON brings its own sanitizers (address, undefined); leave PP_SANITIZE empty")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
    -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
endif()
