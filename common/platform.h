/* SPDX-License-Identifier: MIT */
/*
 * common/platform.h - the platform layer of the shim's load-time hooks. A preloaded library
 * runs code at load through a table of function pointers that the loader walks:
 *   ELF (Linux):      .init_array, walked by ld.so before main(); .fini_array at exit().
 *   Mach-O (macOS):   __DATA,__mod_init_func, walked by dyld (DYLD_INSERT_LIBRARIES);
 *                     __DATA,__mod_term_func at exit().
 * PP_LOAD_HOOK(fn) and PP_UNLOAD_HOOK(fn) place a pointer to `static void fn(void)` in the
 * right table explicitly, so that the shim does not depend on how a compiler spells
 * __attribute__((constructor)) for each format. Header only, no dependencies.
 */
#ifndef PP_PLATFORM_H
#define PP_PLATFORM_H

#if defined(__APPLE__) && defined(__MACH__)
#define PP_LOAD_SECTION   "__DATA,__mod_init_func,mod_init_funcs"
#define PP_UNLOAD_SECTION "__DATA,__mod_term_func,mod_term_funcs"
#elif defined(__ELF__)
#define PP_LOAD_SECTION   ".init_array"
#define PP_UNLOAD_SECTION ".fini_array"
#else
#error "the shim needs ELF (.init_array) or Mach-O (__mod_init_func)"
#endif

#define PP_LOAD_HOOK(fn)                                                                           \
    static void (*const pp_load_hook_##fn)(void) __attribute__((used, section(PP_LOAD_SECTION))) = \
            fn
#define PP_UNLOAD_HOOK(fn)                         \
    static void (*const pp_unload_hook_##fn)(void) \
            __attribute__((used, section(PP_UNLOAD_SECTION))) = fn

#endif /* PP_PLATFORM_H */
