/* SPDX-License-Identifier: MIT */
/*
 * common/grow.h - the growable arrays of the libraries that keep lists (profile/, shim/, cli/).
 * Header only, libc only.
 */
#ifndef PP_GROW_H
#define PP_GROW_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/compiler.h"

/*
 * Makes *arr (items of elem bytes, *cap of them allocated) hold at least need items, doubling
 * from 64. Returns 0, or -ENOMEM with *arr and *cap unchanged (also when the size would
 * overflow). Ownership: *arr stays the caller's (free()).
 */
static inline PP_MUST_USE int
pp_grow_array(void **arr, size_t *cap, size_t need, size_t elem)
{
    size_t ncap;
    void *n;

    if (need <= *cap) {
        return 0;
    }
    ncap = *cap != 0 ? *cap : 64;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) {
            return -ENOMEM;
        }
        ncap *= 2;
    }
    if (elem != 0 && ncap > SIZE_MAX / elem) {
        return -ENOMEM;
    }
    n = realloc(*arr, ncap * elem);
    if (n == NULL) {
        return -ENOMEM;
    }
    *arr = n;
    *cap = ncap;
    return 0;
}

#endif /* PP_GROW_H */
