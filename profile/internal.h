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

/*
 * The timeline's indices sorted by timestamp (ties in arrival order): the timeline is in the
 * order samples arrived, thread by thread. Returns 0 with a malloc'd array of timeline_count
 * entries in *out (the caller frees it), or -ENOMEM.
 */
int pp_profile_time_order(const struct pp_profile *p, size_t **out);

/* Writes the len bytes at s as a JSON string (escaped by cJSON). Returns 0, -ENOMEM or -EIO. */
int pp_profile_json_string(FILE *out, const char *s, size_t len);

/* Seconds since the first sample of timestamp ts. */
double pp_profile_seconds(const struct pp_profile *p, uint64_t ts);

#endif /* PP_PROFILE_INTERNAL_H */
