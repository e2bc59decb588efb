pp_add_test(test-nettrace-roundtrip LIBS pp_nettrace LABELS unit TIMEOUT 180)
