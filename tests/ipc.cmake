# IPC: codec unit tests, in-process server tests, and scripts against real .NET processes,
# dotnet-trace and LD_PRELOAD=libpipeprof.so hosts (docs/ipc.md).
add_executable(ipc-send ${CMAKE_SOURCE_DIR}/tests/tools/ipc-send.c)
set_target_properties(ipc-send PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
target_link_libraries(ipc-send PRIVATE pp_ipc)
add_executable(ipc-impostor ${CMAKE_SOURCE_DIR}/tests/tools/ipc-impostor.c)
set_target_properties(ipc-impostor PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
target_link_libraries(ipc-impostor PRIVATE pp_ipc)

pp_add_test(test-ipc-codec SOURCES ${CMAKE_SOURCE_DIR}/tests/test-ipc-codec.c LIBS pp_ipc LABELS unit)
pp_add_test(test-ipc-server SOURCES ${CMAKE_SOURCE_DIR}/tests/test-ipc-server.c LIBS pp_ipc
  LABELS unit TIMEOUT 120)
if(EXISTS ${CMAKE_SOURCE_DIR}/nettrace/reader.c)
  # the streams are read back with nt_reader once libnettrace has its reader
  target_compile_definitions(test-ipc-server PRIVATE PP_HAVE_NT_READER=1)
endif()

# The server in a .NET host against a fake runtime: redirects, forwarding, merged sessions.
pp_add_test(test-ipc-upstream SOURCES ${CMAKE_SOURCE_DIR}/tests/test-ipc-upstream.c LIBS pp_ipc
  LABELS unit TIMEOUT 120)

# Scripts (tests/ipc-lib.sh is shared; each uses its own TMPDIR). The C# target app is built
# once into ${CMAKE_BINARY_DIR}/dotnet-ipc by the first script that needs it.
pp_add_script_test(ipc-differential ipc-differential.sh LABELS integration TIMEOUT 180)
pp_add_script_test(ipc-dotnet ipc-dotnet.sh LABELS integration TIMEOUT 180)
pp_add_script_test(ipc-faults ipc-faults.sh LABELS integration TIMEOUT 120)
pp_add_script_test(ipc-access ipc-access.sh LABELS integration TIMEOUT 60)
pp_add_script_test(ipc-trust ipc-trust.sh LABELS integration TIMEOUT 90)
pp_add_script_test(ipc-dotnet-trace ipc-dotnet-trace.sh LABELS integration TIMEOUT 300)
# The C# app is built under a lock, but two first builds at once would only wait: run the
# dotnet-based scripts one after the other.
set_tests_properties(ipc-differential ipc-dotnet PROPERTIES RESOURCE_LOCK pp-dotnet-ipc-build)

# The agent's event source (bridge/agent-source.c).
if(TARGET pp_bridge)
  pp_add_test(test-bridge-source LIBS pp_bridge LABELS unit)
  if(TARGET pp_http)
    # an HTTP recording's frame tags (bridge/frame-tags.c)
    pp_add_test(test-bridge-tags LIBS pp_bridge LABELS unit)
  endif()
endif()

# The agent end to end: preloaded workload, pipeprof collect/report/convert, dotnet-trace.
pp_add_script_test(agent-e2e agent-e2e.sh LABELS integration TIMEOUT 180)

# include/pipeprof.h in a program linked with libpipeprof.so. The constructor's own server is
# switched off (PIPEPROF_DISABLE=1); the API starts the agent itself.
pp_add_test(test-api-linked LIBS pipeprof_shim LABELS integration TIMEOUT 60)
set_property(TEST test-api-linked APPEND PROPERTY ENVIRONMENT "PIPEPROF_DISABLE=1")
add_dependencies(test-api-linked pipeprof)
# Under ThreadSanitizer the link puts libtsan first (the compiler driver's -ltsan comes before
# every library named), so libtsan's lookup of the next sigaction finds the library's interposer,
# instrumented, and its start-up calls it before its own thread state exists: SIGSEGV in
# __tsan_func_entry, every run. Preloaded, the library comes before libtsan, the order `pipeprof
# record` and the scripts' PRELOAD use (docs/architecture.md, "Sanitizers"); libtsan is named too
# for the uninstrumented sh of the test's popen. The test says so as it starts.
if(PP_SANITIZE MATCHES "thread")
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libtsan.so.2
    OUTPUT_VARIABLE pp_libtsan OUTPUT_STRIP_TRAILING_WHITESPACE)
  set_property(TEST test-api-linked APPEND PROPERTY ENVIRONMENT
    "LD_PRELOAD=$<TARGET_FILE:pipeprof_shim>:${pp_libtsan}")
endif()

# Accuracy of attribution and DWARF unwinding through the whole path (issue 4).
pp_add_script_test(agent-accuracy agent-accuracy.sh LABELS integration TIMEOUT 120)
# An accuracy measurement needs the machine to itself: under ctest -j the workers compete with
# other tests for the two cores and the measured split drifts (70% against 75% seen).
set_tests_properties(agent-accuracy PROPERTIES RUN_SERIAL TRUE)

# Survival of a torture host sampled at the highest rate, in both modes (issue 4).
pp_add_script_test(agent-torture agent-torture.sh LABELS integration TIMEOUT 120)
