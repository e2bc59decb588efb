# pp_add_test(NAME SOURCES ... LIBS ... LABELS ... TIMEOUT n)
# One executable per tests/test-<module>-<topic>.c, one CTest entry each.
function(pp_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  if(NOT T_SOURCES)
    set(T_SOURCES ${name}.c)
  endif()
  add_executable(${name} ${T_SOURCES} ${CMAKE_SOURCE_DIR}/tests/harness.c)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${T_LIBS})
  add_test(NAME ${name} COMMAND ${name} ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
    ENVIRONMENT "PP_SOURCE_DIR=${CMAKE_SOURCE_DIR};PP_BINARY_DIR=${CMAKE_BINARY_DIR}")
  if(CMAKE_CROSSCOMPILING_EMULATOR)
    # Under qemu-user (tests/test.h: test_emulated()), and given time for it: 5 to 10 times
    # slower than native here.
    math(EXPR T_TIMEOUT "${T_TIMEOUT} * 3")
    set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT})
    set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT "PP_EMULATED=1")
  endif()
endfunction()

# Script tests find python3 first in build/tests/path: the system interpreter when there is
# one, because a version-manager shim (pyenv's) costs about a second per start, and the
# scripts start python dozens of times.
set(PP_TEST_PATH_DIR ${CMAKE_BINARY_DIR}/tests/path)
find_program(PP_SYSTEM_PYTHON3 python3 PATHS /usr/bin /bin NO_DEFAULT_PATH)
file(MAKE_DIRECTORY ${PP_TEST_PATH_DIR})
if(PP_SYSTEM_PYTHON3)
  file(CREATE_LINK ${PP_SYSTEM_PYTHON3} ${PP_TEST_PATH_DIR}/python3 SYMBOLIC)
endif()

# pp_add_script_test(NAME SCRIPT LABELS ... TIMEOUT n): a shell test in tests/.
function(pp_add_script_test name script)
  cmake_parse_arguments(T "" "TIMEOUT" "LABELS" ${ARGN})
  add_test(NAME ${name} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/${script})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS integration)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
    ENVIRONMENT "PP_SOURCE_DIR=${CMAKE_SOURCE_DIR};PP_BINARY_DIR=${CMAKE_BINARY_DIR};PATH=${PP_TEST_PATH_DIR}:$ENV{PATH}"
    SKIP_RETURN_CODE 77)
endfunction()
