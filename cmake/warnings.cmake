include(CheckCCompilerFlag)

set(PP_WARNING_FLAGS
  -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla -Wformat=2
  -Wundef -Wcast-align -Werror=unused-result)
foreach(flag ${PP_WARNING_FLAGS})
  string(MAKE_C_IDENTIFIER "HAVE${flag}" var)
  check_c_compiler_flag(${flag} ${var})
  if(${var})
    add_compile_options(${flag})
  endif()
endforeach()
if(PP_WERROR)
  add_compile_options(-Werror)
endif()
add_compile_options(-fvisibility=hidden)
add_compile_definitions(_GNU_SOURCE)
