find_package(PkgConfig REQUIRED)
pkg_check_modules(PP_TEST_CJSON REQUIRED IMPORTED_TARGET libcjson)
pp_add_test(test-cli-report LIBS pp_nettrace PkgConfig::PP_TEST_CJSON LABELS integration)
add_dependencies(test-cli-report pipeprof)
pp_add_script_test(cli-record cli-record.sh LABELS integration TIMEOUT 180)
pp_add_script_test(golden-replay golden-replay.sh LABELS integration TIMEOUT 120)
pp_add_script_test(cli-outputs cli-outputs.sh LABELS integration TIMEOUT 120)
pp_add_script_test(cli-report-pidshare cli-report-pidshare.sh LABELS integration TIMEOUT 120)
pp_add_script_test(cli-record-summary cli-record-summary.sh LABELS integration TIMEOUT 120)
pp_add_script_test(cli-record-short cli-record-short.sh LABELS integration TIMEOUT 180)
# record and collect name the signal that ended CMD
pp_add_script_test(cli-killed cli-killed.sh LABELS integration TIMEOUT 120)
# A Go program preempted by SIGURG: runtime.asyncPreempt keeps the preempted function under it
pp_add_script_test(cli-record-go cli-record-go.sh LABELS integration TIMEOUT 180)
# A Go ground truth: frameless leaves and prologues keep their callers (the pclntab's SP tables)
pp_add_script_test(cli-record-go-frames cli-record-go-frames.sh LABELS integration TIMEOUT 240)
pp_add_script_test(cli-record-listen cli-record-listen.sh LABELS integration TIMEOUT 120)
pp_add_script_test(cli-record-child-calls cli-record-child-calls.sh LABELS integration TIMEOUT 120)
pp_add_script_test(cli-record-commands cli-record-commands.sh LABELS integration slow TIMEOUT 180)
pp_add_script_test(cli-collect-signals cli-collect-signals.sh LABELS integration TIMEOUT 120)
# Processes killed by SIGTERM under record: their frames named from their modules' files, the same
# names as the agent's rundown gives (tests/tools/strip-rundown.c takes a trace's names away).
add_executable(strip-rundown ${CMAKE_SOURCE_DIR}/tests/tools/strip-rundown.c)
target_link_libraries(strip-rundown PRIVATE pp_nettrace)
set_target_properties(strip-rundown PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
pp_add_script_test(cli-record-killed cli-record-killed.sh LABELS integration TIMEOUT 300)
# A library without a build-id replaced on disk while a process keeps it mapped, before or
# during its recording by `collect -p` (tests/tools/dlburn.c loads and burns in it): the trace
# says which file was loaded (ModuleLoad's File* fields), and nothing names from another.
add_executable(dlburn ${CMAKE_SOURCE_DIR}/tests/tools/dlburn.c)
target_link_libraries(dlburn PRIVATE ${CMAKE_DL_LIBS})
set_target_properties(dlburn PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
pp_add_script_test(cli-fileident cli-fileident.sh LABELS integration TIMEOUT 300)
add_dependencies(dlburn pp-modreuse-a strip-rundown)
pp_add_script_test(dump-runtime-names dump-runtime-names.sh LABELS integration TIMEOUT 60)
# An exec chain's images, each numbering its modules from 1: each keeps its own module names.
pp_add_script_test(cli-record-exec-modules cli-record-exec-modules.sh LABELS integration TIMEOUT 300)
# The joined trace keeps CMD's SYSTEMTIME (the wall clock of its sync point), not the join's.
pp_add_script_test(cli-record-systemtime cli-record-systemtime.sh LABELS integration TIMEOUT 120)
# Forked workers' shares of the samples against their measured CPU time: alone.
set_tests_properties(cli-record-commands PROPERTIES RUN_SERIAL TRUE)
# Its `many-reused` case: a thread churner that wraps the pid space during a recording.
add_executable(tid-churn ${CMAKE_SOURCE_DIR}/tests/tools/tid-churn.c)
target_link_libraries(tid-churn PRIVATE Threads::Threads)
set_target_properties(tid-churn PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
# Two sampled children of one recording that get one pid (tests/tools/pid-reuse.c), each its own
# file: alone, since it wraps the pid space with threads.
add_executable(pid-reuse ${CMAKE_SOURCE_DIR}/tests/tools/pid-reuse.c)
target_link_libraries(pid-reuse PRIVATE Threads::Threads)
target_compile_options(pid-reuse PRIVATE -O2 -fno-omit-frame-pointer)
set_target_properties(pid-reuse PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
pp_add_script_test(cli-record-pidreuse cli-record-pidreuse.sh LABELS integration slow TIMEOUT 600)
set_tests_properties(cli-record-pidreuse PROPERTIES RUN_SERIAL TRUE)
# PIPEPROF_OUTPUT: a service, fork and exec children, crashes (tests/tools/output-host.c).
add_executable(output-host ${CMAKE_SOURCE_DIR}/tests/tools/output-host.c)
set_target_properties(output-host PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
pp_add_script_test(output-file output-file.sh LABELS integration TIMEOUT 180)
pp_add_script_test(idle-agent idle-agent.sh LABELS integration TIMEOUT 120)
# A double-forked daemon recorded after its middle parent exited; an outside process refused.
add_executable(record-daemon ${CMAKE_SOURCE_DIR}/tests/tools/record-daemon.c)
set_target_properties(record-daemon PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
pp_add_script_test(cli-record-daemon cli-record-daemon.sh LABELS integration TIMEOUT 180)
# The unit harness describes and kills what a case leaves in its process group.
add_executable(harness-probe ${CMAKE_SOURCE_DIR}/tests/tools/harness-probe.c
  ${CMAKE_SOURCE_DIR}/tests/harness.c)
target_include_directories(harness-probe PRIVATE ${CMAKE_SOURCE_DIR}/tests)
set_target_properties(harness-probe PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
pp_add_script_test(harness-reaping harness-reaping.sh LABELS integration TIMEOUT 120)
