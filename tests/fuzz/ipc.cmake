# IPC codec fuzz target: replayed over tests/fuzz/corpus/fuzz-ipc-codec/ in every build.
pp_add_fuzz(fuzz-ipc-codec LIBS pp_ipc)
