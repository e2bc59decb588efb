# Interop with the real .NET runtime as the reference writer (skips loudly without dotnet).
pp_add_script_test(dotnet-alltypes dotnet-alltypes.sh LABELS integration TIMEOUT 400)

# TraceEvent reads what pipeprof's writer wrote (tests/tools/nt-gen.c writes both the trace and
# the expectation).
add_executable(nt-gen ${CMAKE_SOURCE_DIR}/tests/tools/nt-gen.c)
set_target_properties(nt-gen PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
target_link_libraries(nt-gen PRIVATE pp_nettrace)
pp_add_script_test(dotnet-traceevent dotnet-traceevent.sh LABELS integration TIMEOUT 400)

# dotnet-trace's thread-time view (TraceEvent) of a CPU-mode host against its own CPU time.
pp_add_script_test(dotnet-trace-cputime dotnet-trace-cputime.sh LABELS integration slow TIMEOUT 300)
set_tests_properties(dotnet-trace-cputime PROPERTIES RUN_SERIAL TRUE)
# dotnet-trace's default (thread-time) profile with the agent: runnable threads keep their stacks,
# each method's thread time as without the agent.
pp_add_script_test(dotnet-threadtime dotnet-threadtime.sh LABELS integration slow TIMEOUT 400)
set_tests_properties(dotnet-threadtime PROPERTIES RUN_SERIAL TRUE)

# dotnet-counters' session (System.Runtime and pipeprof EventCounters) through the real client
# libraries, against a native host and a real .NET app.
pp_add_script_test(dotnet-counters dotnet-counters.sh LABELS integration TIMEOUT 400)
set_tests_properties(dotnet-counters PROPERTIES RESOURCE_LOCK pp-dotnet-ipc-build)

# dotnet-stack's session (every thread's stack, CPU and wall mode) through the real client
# libraries and dotnet-stack itself; dotnet-trace report lists real functions only.
pp_add_script_test(dotnet-stack dotnet-stack.sh LABELS integration TIMEOUT 400)
set_tests_properties(dotnet-stack PROPERTIES RESOURCE_LOCK pp-dotnet-ipc-build)

# Issue 11, step 1: the agent's stacks in a real .NET process go from P/Invoke'd native code
# through the JIT's frames into the runtime (docs/dotnet-hosts.md).
pp_add_script_test(dotnet-mixed-stacks dotnet-mixed-stacks.sh LABELS integration TIMEOUT 400)
# Issue 19: ReadyToRun code (a PE image the runtime mapped) is named by its image, not `?!0x...`.
pp_add_script_test(dotnet-r2r-frames dotnet-r2r-frames.sh LABELS integration TIMEOUT 400)

# Issue 11, step 3: unmodified dotnet-trace (-p with default and explicit providers, -- CMD,
# --diagnostic-port) gets one trace with pipeprof's native frames and the runtime's managed frames
# and events; each part's share within 3 points of the CPU time the app measured (RUN_SERIAL:
# judges CPU shares). Label issue11: fails until the agent serves the runtime's port and merges the
# two streams (docs/dotnet-hosts.md, steps 2-3); `ctest -LE issue11` leaves it out until then.
pp_add_script_test(dotnet-mixed-dotnettrace dotnet-mixed-dotnettrace.sh LABELS integration slow issue11 TIMEOUT 600)
set_tests_properties(dotnet-mixed-dotnettrace PROPERTIES RUN_SERIAL TRUE)

# Issue 11: with the agent preloaded, the runtime answers the .NET tools as without it (ps lists
# the pid once, ProcessInfo is the runtime's, the app's EventSource reaches dotnet-trace, exit
# status and stdout unchanged). Label issue11: fails while the agent's own key+1 socket answers
# ProcessInfo as pipeprof beside the runtime's (docs/ipc.md, ".NET hosts").
pp_add_script_test(dotnet-runtime-intact dotnet-runtime-intact.sh LABELS integration issue11 TIMEOUT 400)

# Issue 11: dotnet mixed.dll, its apphost, a single-file publish and an undetected host all get
# mixed stacks, one public socket and the runtime's ProcessInfo.
pp_add_script_test(dotnet-host-forms dotnet-host-forms.sh LABELS integration slow issue11 TIMEOUT 900)
set_tests_properties(dotnet-host-forms PROPERTIES RESOURCE_LOCK pp-dotnet-mixed-build)

# Issue 19: dotnet-trace report of a `pipeprof record` trace (CPU and wall mode) shows the
# program's time: no pipeprof/* event nodes, the stackless Threads node no more than the time off
# the CPU, the ground-truth program's CPU at its measured share.
pp_add_script_test(dotnet-report-record dotnet-report-record.sh LABELS integration TIMEOUT 400)
