# The CLI's profile loader (cli/profile.c: nettrace -> names, stacks, threads) and every writer
# of pp_profile: replayed over tests/fuzz/corpus/fuzz-profile-load/ in every build.
pp_add_fuzz(fuzz-profile-load LIBS pp_nettrace pp_profile SOURCES ${CMAKE_SOURCE_DIR}/cli/profile.c)
