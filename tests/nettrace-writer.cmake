# nettrace writer: byte-exact layouts, flush policy, sequence numbers and stacks, payload builder;
# and provider GUIDs with the private SHA-1. Round trips through the reader live elsewhere.
pp_add_test(test-nettrace-writer LIBS pp_nettrace LABELS unit)
pp_add_test(test-nettrace-guid LIBS pp_nettrace LABELS unit)
