/* SPDX-License-Identifier: MIT */
/*
 * common/compiler.h - project-wide attribute macros. Header only, no dependencies.
 */
#ifndef PP_COMPILER_H
#define PP_COMPILER_H

/* Every fallible function returns 0 or a negative errno; callers must look at it. */
#define PP_MUST_USE __attribute__((warn_unused_result))

/* Marks functions that are reachable from a signal handler (documentation only). */
#define PP_SIGSAFE

#define PP_UNUSED __attribute__((unused))

#define PP_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif /* PP_COMPILER_H */
