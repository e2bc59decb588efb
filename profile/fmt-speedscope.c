/* SPDX-License-Identifier: MIT */
/* profile/fmt-speedscope.c - placeholder until the speedscope writer lands. */
#include <errno.h>

#include "profile/internal.h"

int
pp_write_speedscope(const struct pp_profile *p, FILE *out, char *err, size_t errlen)
{
    (void)p;
    (void)out;
    snprintf(err, errlen, "format not implemented yet");
    return -ENOSYS;
}
