/* SPDX-License-Identifier: MIT */
/*
 * profile/internal.h - what the format writers of pp_profile share. Not installed; only the
 * files of profile/ include it. Every writer reads a named profile (profile/profile.h) and writes
 * to a FILE; it returns 0, or a negative errno with a message in err (-EIO when a write failed).
 */
#ifndef PP_PROFILE_INTERNAL_H
#define PP_PROFILE_INTERNAL_H

#include "profile/profile.h"

int pp_write_folded(const struct pp_profile *p, FILE *out, char *err, size_t errlen);
int pp_write_perf(const struct pp_profile *p, FILE *out, char *err, size_t errlen);
int pp_write_speedscope(const struct pp_profile *p, FILE *out, char *err, size_t errlen);
int pp_write_pprof(const struct pp_profile *p, FILE *out, char *err, size_t errlen);
int pp_write_chromium(const struct pp_profile *p, FILE *out, char *err, size_t errlen);

/*
 * Splits a frame name "module!function" at its first '!': returns the function part and stores
 * the module's length in *module_len. A name without '!' has an empty module ("?" is a module).
 */
const char *pp_profile_split_name(const char *name, size_t *module_len);

/* Seconds since the first sample of timestamp ts. */
double pp_profile_seconds(const struct pp_profile *p, uint64_t ts);

#endif /* PP_PROFILE_INTERNAL_H */
