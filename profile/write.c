/* SPDX-License-Identifier: MIT */
/*
 * profile/write.c - format names and the dispatch to the format writers (profile/fmt-*.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "profile/internal.h"

struct pp_format_info {
    const char *name;
    const char *mime;
    int (*write)(const struct pp_profile *p, FILE *out, char *err, size_t errlen);
};

/* Indexed by enum pp_profile_format. */
static const struct pp_format_info pp_formats[] = {
    [PP_PROFILE_FOLDED] = { "folded", "text/plain; charset=utf-8", pp_write_folded },
    [PP_PROFILE_PERF] = { "perf", "text/plain; charset=utf-8", pp_write_perf },
    [PP_PROFILE_SPEEDSCOPE] = { "speedscope", "application/json", pp_write_speedscope },
    [PP_PROFILE_PPROF] = { "pprof", "application/octet-stream", pp_write_pprof },
    [PP_PROFILE_CHROMIUM] = { "chromium", "application/json", pp_write_chromium },
};

int
pp_profile_format_parse(const char *name, enum pp_profile_format *out)
{
    size_t i;

    /* "collapsed" is swift-profile-recorder's name for folded stacks. */
    if (strcmp(name, "collapsed") == 0) {
        *out = PP_PROFILE_FOLDED;
        return 0;
    }
    for (i = 0; i < sizeof(pp_formats) / sizeof(pp_formats[0]); i++) {
        if (strcmp(name, pp_formats[i].name) == 0) {
            *out = (enum pp_profile_format)i;
            return 0;
        }
    }
    return -EINVAL;
}

static const struct pp_format_info *
pp_format_info(enum pp_profile_format fmt)
{
    if ((unsigned)fmt >= sizeof(pp_formats) / sizeof(pp_formats[0])) {
        return NULL;
    }
    return &pp_formats[fmt];
}

const char *
pp_profile_format_name(enum pp_profile_format fmt)
{
    const struct pp_format_info *f = pp_format_info(fmt);

    return f != NULL ? f->name : "?";
}

const char *
pp_profile_format_mime(enum pp_profile_format fmt)
{
    const struct pp_format_info *f = pp_format_info(fmt);

    return f != NULL ? f->mime : "application/octet-stream";
}

int
pp_profile_write(const struct pp_profile *p, enum pp_profile_format fmt, FILE *out, char *err,
                 size_t errlen)
{
    const struct pp_format_info *f = pp_format_info(fmt);
    int e;

    if (f == NULL) {
        snprintf(err, errlen, "unknown format %d", (int)fmt);
        return -EINVAL;
    }
    err[0] = '\0';
    e = f->write(p, out, err, errlen);
    if (e == 0 && (fflush(out) != 0 || ferror(out))) {
        e = -EIO;
    }
    if (e != 0 && err[0] == '\0') {
        snprintf(err, errlen, "%s: %s", f->name, strerror(-e));
    }
    return e;
}

const char *
pp_profile_split_name(const char *name, size_t *module_len)
{
    const char *bang = strchr(name, '!');

    if (bang == NULL) {
        *module_len = 0;
        return name;
    }
    *module_len = (size_t)(bang - name);
    return bang + 1;
}

double
pp_profile_seconds(const struct pp_profile *p, uint64_t ts)
{
    uint64_t tps = p->ticks_per_second != 0 ? p->ticks_per_second : 1000000000ULL;

    return ts >= p->first_ts ? (double)(ts - p->first_ts) / (double)tps : 0.0;
}

static int
pp_profile_time_cmp(const void *a, const void *b, void *ctx)
{
    const struct pp_profile *p = ctx;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;

    if (p->timeline[i].timestamp != p->timeline[j].timestamp) {
        return p->timeline[i].timestamp < p->timeline[j].timestamp ? -1 : 1;
    }
    return i < j ? -1 : i > j;
}

int
pp_profile_time_order(const struct pp_profile *p, size_t **out)
{
    size_t *order = malloc((p->timeline_count + 1) * sizeof(*order)), i;

    *out = NULL;
    if (order == NULL) {
        return -ENOMEM;
    }
    for (i = 0; i < p->timeline_count; i++) {
        order[i] = i;
    }
    if (p->timeline_count > 1) {
        qsort_r(order, p->timeline_count, sizeof(*order), pp_profile_time_cmp, (void *)p);
    }
    *out = order;
    return 0;
}

int
pp_profile_json_string(FILE *out, const char *s, size_t len)
{
    char *copy = malloc(len + 1), *json = NULL;
    cJSON *str = NULL;
    int err = 0;

    if (copy == NULL) {
        return -ENOMEM;
    }
    memcpy(copy, s, len);
    copy[len] = '\0';
    str = cJSON_CreateString(copy);
    json = str != NULL ? cJSON_PrintUnformatted(str) : NULL;
    if (json == NULL) {
        err = -ENOMEM;
    } else if (fputs(json, out) < 0) {
        err = -EIO;
    }
    cJSON_free(json);
    cJSON_Delete(str);
    free(copy);
    return err;
}
