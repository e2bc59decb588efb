# PP_SANITIZE="address;undefined" or "thread". UBSan never recovers, so a report fails the test.
if(PP_SANITIZE)
  string(REPLACE ";" "," pp_san "${PP_SANITIZE}")
  add_compile_options(-fsanitize=${pp_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${pp_san})
endif()
