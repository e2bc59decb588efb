# pipeprof's report against TraceEvent's on traces the .NET runtime and dotnet-trace recorded.
pp_add_script_test(dotnet-report-parity dotnet-report-parity.sh LABELS integration TIMEOUT 400)
set_tests_properties(dotnet-report-parity PROPERTIES RESOURCE_LOCK pp-dotnet-ipc-build)
