# The CLI's profile loader (cli/profile.c: nettrace -> names, stacks, threads; cli/names.c: the
# names of a cut trace's frames from its modules' files) and every writer of pp_profile: replayed
# over tests/fuzz/corpus/fuzz-profile-load/ in every build.
pp_add_fuzz(fuzz-profile-load LIBS pp_nettrace pp_profile pp_symbols dl
            SOURCES ${CMAKE_SOURCE_DIR}/cli/profile.c ${CMAKE_SOURCE_DIR}/cli/names.c)
