# Tests of the agent's module list, symbolizer, demangler and DWARF CFI unwinder (agent/modules.c,
# symtab.c, demangle.c, cfi.c, sig-cfi.c). ELF fixtures are built here, at test build time:
# libagent-symfix.so (unstripped, -g) and its derivatives: -stripped (only .dynsym), -dl (stripped,
# .gnu_debuglink to -dl.so.debug) and -bid (stripped; its debug file is found by build-id under a
# debug root the test creates). The C++ fixture needs g++; without it that case skips loudly.
if(TARGET pp_agent)
  set(pp_agent_fix_dir ${CMAKE_BINARY_DIR}/tests/fixtures)
  add_library(agent-symfix SHARED fixtures/agent-symfix.c)
  target_compile_options(agent-symfix PRIVATE -g -O1 -fno-inline)
  target_link_options(agent-symfix PRIVATE -Wl,--build-id)
  set_target_properties(agent-symfix PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${pp_agent_fix_dir})
  add_custom_command(TARGET agent-symfix POST_BUILD
    COMMAND ${CMAKE_STRIP} --strip-all -o libagent-symfix-stripped.so libagent-symfix.so
    COMMAND ${CMAKE_OBJCOPY} --only-keep-debug libagent-symfix.so libagent-symfix-dl.so.debug
    COMMAND ${CMAKE_STRIP} --strip-all -o libagent-symfix-dl.so libagent-symfix.so
    COMMAND ${CMAKE_OBJCOPY} --add-gnu-debuglink=libagent-symfix-dl.so.debug libagent-symfix-dl.so
    COMMAND ${CMAKE_STRIP} --strip-all -o libagent-symfix-bid.so libagent-symfix.so
    COMMAND ${CMAKE_OBJCOPY} --only-keep-debug libagent-symfix.so libagent-symfix-bid.debug
    WORKING_DIRECTORY ${pp_agent_fix_dir}
    VERBATIM)

  if(CMAKE_CROSSCOMPILING)
    # The fixture must be built for the target: the cross g++ (g++-aarch64-linux-gnu), if any.
    get_filename_component(pp_cc_name ${CMAKE_C_COMPILER} NAME)
    string(REGEX REPLACE "gcc$" "g++" pp_cross_gxx ${pp_cc_name})
    find_program(PP_AGENT_GXX NAMES ${pp_cross_gxx})
  else()
    find_program(PP_AGENT_GXX NAMES g++ c++)
  endif()
  set(pp_agent_have_cxx 0)
  if(PP_AGENT_GXX)
    set(pp_agent_cxx_lib ${pp_agent_fix_dir}/libagent-symfix-cpp.so)
    add_custom_command(OUTPUT ${pp_agent_cxx_lib}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${pp_agent_fix_dir}
      COMMAND ${PP_AGENT_GXX} -shared -fPIC -O1 -Wl,--no-as-needed -o ${pp_agent_cxx_lib}
              ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/agent-symfix.cpp
      DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/agent-symfix.cpp
      VERBATIM)
    add_custom_target(agent-symfix-cpp DEPENDS ${pp_agent_cxx_lib})
    set(pp_agent_have_cxx 1)
  endif()

  pp_add_test(test-agent-symbols LIBS pp_agent elf LABELS unit)
  target_compile_definitions(test-agent-symbols PRIVATE
    PP_AGENT_FIXTURE_DIR="${pp_agent_fix_dir}" PP_AGENT_HAVE_CXX=${pp_agent_have_cxx}
    PP_MODREUSE_DIR="${CMAKE_BINARY_DIR}/samples")
  add_dependencies(test-agent-symbols agent-symfix pp-modreuse-a pp-modreuse-b)
  if(pp_agent_have_cxx)
    add_dependencies(test-agent-symbols agent-symfix-cpp)
  endif()

  pp_add_test(test-agent-cfi SOURCES test-agent-cfi.c fixtures/agent-cfi-chain.c
    fixtures/agent-entry-stubs.c
    LIBS pp_agent LABELS unit)
  # The last -f flag wins, so this also holds in sanitizer builds (-fno-omit-frame-pointer).
  set(pp_cfi_chain_flags -O2 -fomit-frame-pointer -fno-optimize-sibling-calls)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
    # Signed return addresses (paciasp/autiasp; no-ops without FEAT_PAuth) and their
    # DW_CFA_AARCH64_negate_ra_state in the CFI: the walk must read both.
    list(APPEND pp_cfi_chain_flags -mbranch-protection=pac-ret)
  endif()
  set_source_files_properties(fixtures/agent-cfi-chain.c PROPERTIES
    COMPILE_OPTIONS "${pp_cfi_chain_flags}")
endif()
