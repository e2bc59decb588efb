# Cross-compiling pipeprof for Linux arm64 (aarch64) on an x86-64 Debian host:
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# needs gcc-aarch64-linux-gnu, qemu-user and the :arm64 -dev packages (tools/install-deps.sh
# --arm64). The unit tests run under qemu-user through CMAKE_CROSSCOMPILING_EMULATOR, so ctest
# works from the x86-64 host; script tests find it in PP_EMULATOR.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(PP_CROSS_TRIPLE aarch64-linux-gnu)
set(PP_CROSS_SYSROOT /usr/${PP_CROSS_TRIPLE})

set(CMAKE_C_COMPILER ${PP_CROSS_TRIPLE}-gcc)

# Debian's multiarch layout: the :arm64 libraries and headers live beside the host's, in
# /usr/lib/aarch64-linux-gnu and /usr/include/aarch64-linux-gnu; the cross compiler already
# searches there. pkg-config must see only the arm64 .pc files (and the architecture-independent
# ones), never the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${PP_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
set(CMAKE_FIND_ROOT_PATH ${PP_CROSS_SYSROOT} /usr/lib/${PP_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)

find_program(PP_QEMU_AARCH64 qemu-aarch64)
if(PP_QEMU_AARCH64)
  # -L /: the arm64 loader and libc of the multiarch install (libc6:arm64, in
  # /lib/aarch64-linux-gnu beside the :arm64 libraries), not the cross toolchain's copy in
  # /usr/aarch64-linux-gnu: Debian 12's libc6-arm64-cross (2.36-8cross1) leaves every fork()
  # child spinning under qemu-aarch64 7.2 before it returns from fork, and the test harness
  # forks per case. The cross compiler still links against its own copy (the same ABI).
  set(CMAKE_CROSSCOMPILING_EMULATOR ${PP_QEMU_AARCH64};-L;/)
endif()

# libhttp-parser-dev is not co-installable for two architectures (it is not Multi-Arch: same):
# installing its :arm64 copy removes the host's. Install only the :arm64 runtime
# (libhttp-parser2.9:arm64) and link it directly; http_parser.h is the same for both.
if(NOT EXISTS /usr/lib/${PP_CROSS_TRIPLE}/libhttp_parser.so AND
   EXISTS /usr/lib/${PP_CROSS_TRIPLE}/libhttp_parser.so.2.9)
  set(HTTP_PARSER_LIBRARY /usr/lib/${PP_CROSS_TRIPLE}/libhttp_parser.so.2.9 CACHE FILEPATH
    "http-parser for arm64 (its runtime library: the -dev package is the host's)")
endif()
