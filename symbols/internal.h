/* SPDX-License-Identifier: MIT */
/*
 * symbols/internal.h - what the files of symbols/ share beyond symbols/symbols.h: the caller's
 * loader (set in symtab.c, used by demangle.c to find libstdc++).
 */
#ifndef SYM_INTERNAL_H
#define SYM_INTERNAL_H

#include "symbols/symbols.h"

/* The loader sym_set_loader() gave, or NULL. */
const struct sym_loader *sym_loader_get(void);

#endif /* SYM_INTERNAL_H */
