# nettrace reader fuzz target: replayed over tests/fuzz/corpus/fuzz-nettrace-reader/ in every build.
pp_add_fuzz(fuzz-nettrace-reader LIBS pp_nettrace)
