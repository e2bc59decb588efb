/* SPDX-License-Identifier: MIT */
/* profile/fmt-chromium.c - placeholder until the chromium writer lands. */
#include <errno.h>

#include "profile/internal.h"

int
pp_write_chromium(const struct pp_profile *p, FILE *out, char *err, size_t errlen)
{
    (void)p;
    (void)out;
    snprintf(err, errlen, "format not implemented yet");
    return -ENOSYS;
}
