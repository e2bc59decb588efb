# Tests of the pprof and perf writers (profile/fmt-pprof.c, profile/fmt-perf.c): a unit test on
# hand-built profiles, and a script that feeds a real profile to the consumers (go tool pprof,
# FlameGraph's stackcollapse-perf.pl), each skipped loudly when it is not installed.
if(TARGET pp_profile)
  pp_add_test(test-profile-pprof LIBS pp_profile)
  pp_add_script_test(profile-consumers-pprof-perf profile-consumers-pprof-perf.sh TIMEOUT 300)
endif()
