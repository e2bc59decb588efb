/* SPDX-License-Identifier: MIT */
/*
 * profile/fmt-pprof.c - the pprof format: a gzipped protobuf `Profile` message as
 * github.com/google/pprof's proto/profile.proto defines it, which `go tool pprof`, pprof's web UI,
 * Pyroscope and Grafana read. The few protobuf field kinds it needs (varint, packed varints,
 * length-delimited bytes and messages) are encoded by hand into memory, then deflated with zlib's
 * gzip wrapper. The profile holds one Sample per distinct stack (labelled with its thread), one
 * Location per distinct (address, frame name), one Function per frame name and one Mapping per
 * module. Context: any thread. Memory: the whole message is built before it is compressed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "profile/internal.h"

/* Field numbers of profile.proto. */
enum {
    PP_PB_PROFILE_SAMPLE_TYPE = 1,
    PP_PB_PROFILE_SAMPLE = 2,
    PP_PB_PROFILE_MAPPING = 3,
    PP_PB_PROFILE_LOCATION = 4,
    PP_PB_PROFILE_FUNCTION = 5,
    PP_PB_PROFILE_STRING_TABLE = 6,
    PP_PB_PROFILE_DURATION_NANOS = 10,
    PP_PB_PROFILE_PERIOD_TYPE = 11,
    PP_PB_PROFILE_PERIOD = 12,
    PP_PB_PROFILE_COMMENT = 13,
    PP_PB_PROFILE_DEFAULT_SAMPLE_TYPE = 14,
    PP_PB_VALUE_TYPE_TYPE = 1,
    PP_PB_VALUE_TYPE_UNIT = 2,
    PP_PB_SAMPLE_LOCATION_ID = 1,
    PP_PB_SAMPLE_VALUE = 2,
    PP_PB_SAMPLE_LABEL = 3,
    PP_PB_LABEL_KEY = 1,
    PP_PB_LABEL_STR = 2,
    PP_PB_LABEL_NUM = 3,
    PP_PB_MAPPING_ID = 1,
    PP_PB_MAPPING_FILENAME = 5,
    PP_PB_MAPPING_HAS_FUNCTIONS = 7,
    PP_PB_LOCATION_ID = 1,
    PP_PB_LOCATION_MAPPING_ID = 2,
    PP_PB_LOCATION_ADDRESS = 3,
    PP_PB_LOCATION_LINE = 4,
    PP_PB_LINE_FUNCTION_ID = 1,
    PP_PB_FUNCTION_ID = 1,
    PP_PB_FUNCTION_NAME = 2,
    PP_PB_FUNCTION_SYSTEM_NAME = 3,
    PP_PB_FUNCTION_FILENAME = 4,
};

/* Protobuf wire types. */
enum {
    PP_PB_VARINT = 0,
    PP_PB_LEN = 2,
};

/* The interval pprof's values assume when the trace did not say (pprof-rs's 100 Hz). */
#define PP_PPROF_DEFAULT_INTERVAL_NS 10000000ULL

/* A growable byte buffer. Errors are sticky, so that encoders need not check every append. */
struct pp_pb {
    uint8_t *data;
    size_t len, cap;
    int err; /* 0, or -ENOMEM after the first failed growth */
};

static int
pp_pb_reserve(struct pp_pb *b, size_t n)
{
    size_t ncap;
    uint8_t *d;

    if (b->err != 0) {
        return b->err;
    }
    if (b->cap - b->len >= n) {
        return 0;
    }
    ncap = b->cap != 0 ? b->cap : 256;
    while (ncap - b->len < n) {
        if (ncap > SIZE_MAX / 2) {
            b->err = -ENOMEM;
            return b->err;
        }
        ncap *= 2;
    }
    d = realloc(b->data, ncap);
    if (d == NULL) {
        b->err = -ENOMEM;
        return b->err;
    }
    b->data = d;
    b->cap = ncap;
    return 0;
}

static void
pp_pb_bytes(struct pp_pb *b, const void *bytes, size_t n)
{
    if (n == 0 || pp_pb_reserve(b, n) != 0) {
        return;
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
}

static void
pp_pb_varint(struct pp_pb *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;

    do {
        tmp[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v != 0) {
            tmp[n] |= 0x80;
        }
        n++;
    } while (v != 0);
    pp_pb_bytes(b, tmp, n);
}

static void
pp_pb_tag(struct pp_pb *b, uint32_t field, uint32_t wire_type)
{
    pp_pb_varint(b, ((uint64_t)field << 3) | wire_type);
}

/* A varint field. Zero is proto3's default, which decoders assume for an absent field. */
static void
pp_pb_uint(struct pp_pb *b, uint32_t field, uint64_t v)
{
    if (v != 0) {
        pp_pb_tag(b, field, PP_PB_VARINT);
        pp_pb_varint(b, v);
    }
}

/* A length-delimited field: a string, packed varints or an encoded message. */
static void
pp_pb_len(struct pp_pb *b, uint32_t field, const void *bytes, size_t n)
{
    pp_pb_tag(b, field, PP_PB_LEN);
    pp_pb_varint(b, n);
    pp_pb_bytes(b, bytes, n);
}

/* Appends the message encoded in sub as field, then empties sub for reuse. */
static void
pp_pb_message(struct pp_pb *b, uint32_t field, struct pp_pb *sub)
{
    if (sub->err != 0 && b->err == 0) {
        b->err = sub->err;
    }
    pp_pb_len(b, field, sub->data, sub->len);
    sub->len = 0;
}

static void
pp_pb_fini(struct pp_pb *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ------------------------------------------------------------------------------------------ */

/*
 * An open-addressing hash map from a pair of 64-bit keys to a dense index (0, 1, ...). Both the
 * string table (key: hash and length, confirmed by comparing bytes) and the locations (key:
 * address and name index) use it.
 */
struct pp_pmap_slot {
    uint64_t k1, k2;
    uint32_t index_plus1; /* 0: empty */
};

struct pp_pmap {
    struct pp_pmap_slot *slots;
    size_t nslots; /* a power of two, or 0 */
    size_t count;
};

static uint64_t
pp_pmap_hash(uint64_t k1, uint64_t k2)
{
    uint64_t h = k1 * 0x9e3779b97f4a7c15ULL ^ (k2 + 0x632be59bd9b4e019ULL) * 0xc2b2ae3d27d4eb4fULL;

    return h ^ (h >> 29);
}

static int
pp_pmap_grow(struct pp_pmap *m)
{
    size_t n = m->nslots != 0 ? m->nslots * 2 : 1024, i;
    struct pp_pmap_slot *s = calloc(n, sizeof(*s));

    if (s == NULL) {
        return -ENOMEM;
    }
    for (i = 0; i < m->nslots; i++) {
        const struct pp_pmap_slot *o = &m->slots[i];
        size_t j;

        if (o->index_plus1 == 0) {
            continue;
        }
        j = pp_pmap_hash(o->k1, o->k2) & (n - 1);
        while (s[j].index_plus1 != 0) {
            j = (j + 1) & (n - 1);
        }
        s[j] = *o;
    }
    free(m->slots);
    m->slots = s;
    m->nslots = n;
    return 0;
}

/*
 * Finds (k1, k2) for which same() is true, or adds it with the next index. Stores the index in
 * *index and sets *added when it is new. Returns 0 or -ENOMEM.
 */
static int
pp_pmap_find_or_add(struct pp_pmap *m, uint64_t k1, uint64_t k2,
                    int (*same)(const void *ctx, uint32_t index), const void *ctx, uint32_t *index,
                    int *added)
{
    size_t j;

    if ((m->count + 1) * 2 > m->nslots && pp_pmap_grow(m) != 0) {
        return -ENOMEM;
    }
    for (j = pp_pmap_hash(k1, k2) & (m->nslots - 1); m->slots[j].index_plus1 != 0;
         j = (j + 1) & (m->nslots - 1)) {
        const struct pp_pmap_slot *s = &m->slots[j];

        if (s->k1 == k1 && s->k2 == k2 && (same == NULL || same(ctx, s->index_plus1 - 1))) {
            *index = s->index_plus1 - 1;
            *added = 0;
            return 0;
        }
    }
    if (m->count >= UINT32_MAX - 1) {
        return -ENOMEM;
    }
    m->slots[j].k1 = k1;
    m->slots[j].k2 = k2;
    m->slots[j].index_plus1 = (uint32_t)(++m->count);
    *index = (uint32_t)(m->count - 1);
    *added = 1;
    return 0;
}

static void
pp_pmap_fini(struct pp_pmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->nslots = m->count = 0;
}

/* ------------------------------------------------------------------------------------------ */

/* The profile's string_table: distinct strings, in the order of their indexes. */
struct pp_pprof_strings {
    struct pp_pmap map;
    char **v; /* owned NUL-terminated copies; NULL only after a failed copy */
    size_t *lens;
    size_t cap;
};

struct pp_pprof_str_key {
    const struct pp_pprof_strings *t;
    const char *s;
    size_t len;
};

static int
pp_pprof_str_same(const void *ctx, uint32_t index)
{
    const struct pp_pprof_str_key *k = ctx;

    return k->t->v[index] != NULL && k->t->lens[index] == k->len &&
           memcmp(k->t->v[index], k->s, k->len) == 0;
}

/* The index of s[0..len) in the string table, added when new. Returns 0 or -ENOMEM. */
static int
pp_pprof_intern(struct pp_pprof_strings *t, const char *s, size_t len, uint64_t *index)
{
    struct pp_pprof_str_key key = { t, s, len };
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    uint32_t i;
    size_t k;
    int added, err;

    /* Room for one more first, so that a string the map has counted always has a slot. */
    if (t->map.count >= t->cap) {
        size_t ncap = t->cap != 0 ? t->cap * 2 : 256;
        char **v = realloc(t->v, ncap * sizeof(*v));
        size_t *lens;

        if (v == NULL) {
            return -ENOMEM;
        }
        t->v = v;
        lens = realloc(t->lens, ncap * sizeof(*lens));
        if (lens == NULL) {
            return -ENOMEM;
        }
        t->lens = lens;
        t->cap = ncap;
    }
    for (k = 0; k < len; k++) {
        h = (h ^ (uint8_t)s[k]) * 1099511628211ULL;
    }
    err = pp_pmap_find_or_add(&t->map, h, len, pp_pprof_str_same, &key, &i, &added);
    if (err != 0) {
        return err;
    }
    if (added) {
        t->lens[i] = len;
        t->v[i] = malloc(len + 1);
        if (t->v[i] == NULL) {
            return -ENOMEM; /* the write fails, so the half-added string is never looked up */
        }
        memcpy(t->v[i], s, len);
        t->v[i][len] = '\0';
    }
    *index = i;
    return 0;
}

static void
pp_pprof_strings_fini(struct pp_pprof_strings *t)
{
    size_t i;

    for (i = 0; i < t->map.count; i++) {
        free(t->v[i]);
    }
    free(t->v);
    free(t->lens);
    pp_pmap_fini(&t->map);
}

/* ------------------------------------------------------------------------------------------ */

struct pp_pprof {
    const struct pp_profile *p;
    struct pp_pprof_strings str;
    struct pp_pmap locations; /* (address, name index) -> location index */
    uint64_t *loc_ip;
    uint32_t *loc_name;
    size_t loc_cap;
    struct pp_pmap mappings; /* module's string index -> mapping index */
    uint64_t *mapping_file;  /* per mapping: its module's string index */
    uint64_t *name_mapping;  /* per frame name: its mapping's id, 0 for none */
    struct pp_pb msg;        /* the Profile */
    struct pp_pb sub, sub2;  /* scratch for nested messages */
};

/* Appends a ValueType{type, unit} as field. */
static int
pp_pprof_value_type(struct pp_pprof *w, uint32_t field, const char *type, const char *unit)
{
    uint64_t ti, ui;
    int err;

    err = pp_pprof_intern(&w->str, type, strlen(type), &ti);
    if (err == 0) {
        err = pp_pprof_intern(&w->str, unit, strlen(unit), &ui);
    }
    if (err != 0) {
        return err;
    }
    pp_pb_uint(&w->sub, PP_PB_VALUE_TYPE_TYPE, ti);
    pp_pb_uint(&w->sub, PP_PB_VALUE_TYPE_UNIT, ui);
    pp_pb_message(&w->msg, field, &w->sub);
    return 0;
}

/*
 * One Function per frame name (id = name index + 1), named by the function part, with the module
 * as its file so that equal function names in different modules stay apart; and one Mapping per
 * module, which the Functions' Locations refer to.
 */
static int
pp_pprof_functions(struct pp_pprof *w)
{
    const struct pp_profile *p = w->p;
    size_t i;
    int err;

    w->name_mapping = calloc(p->name_count + 1, sizeof(*w->name_mapping));
    w->mapping_file = calloc(p->name_count + 1, sizeof(*w->mapping_file));
    if (w->name_mapping == NULL || w->mapping_file == NULL) {
        return -ENOMEM;
    }
    for (i = 0; i < p->name_count; i++) {
        size_t module_len;
        const char *fn = pp_profile_split_name(p->names[i], &module_len);
        uint64_t fn_index, module_index = 0;

        err = pp_pprof_intern(&w->str, fn, strlen(fn), &fn_index);
        if (err == 0 && module_len > 0) {
            uint32_t m;
            int added;

            err = pp_pprof_intern(&w->str, p->names[i], module_len, &module_index);
            if (err == 0) {
                err = pp_pmap_find_or_add(&w->mappings, module_index, 0, NULL, NULL, &m, &added);
            }
            if (err == 0) {
                w->mapping_file[m] = module_index;
                w->name_mapping[i] = (uint64_t)m + 1;
            }
        }
        if (err != 0) {
            return err;
        }
        pp_pb_uint(&w->sub, PP_PB_FUNCTION_ID, (uint64_t)i + 1);
        pp_pb_uint(&w->sub, PP_PB_FUNCTION_NAME, fn_index);
        pp_pb_uint(&w->sub, PP_PB_FUNCTION_SYSTEM_NAME, fn_index);
        pp_pb_uint(&w->sub, PP_PB_FUNCTION_FILENAME, module_index);
        pp_pb_message(&w->msg, PP_PB_PROFILE_FUNCTION, &w->sub);
    }
    for (i = 0; i < w->mappings.count; i++) {
        /* has_functions: names come with the profile, so pprof must not symbolize. */
        pp_pb_uint(&w->sub, PP_PB_MAPPING_ID, (uint64_t)i + 1);
        pp_pb_uint(&w->sub, PP_PB_MAPPING_FILENAME, w->mapping_file[i]);
        pp_pb_uint(&w->sub, PP_PB_MAPPING_HAS_FUNCTIONS, 1);
        pp_pb_message(&w->msg, PP_PB_PROFILE_MAPPING, &w->sub);
    }
    return 0;
}

/* The location id of frame (ip, name), added when new. */
static int
pp_pprof_location(struct pp_pprof *w, uint64_t ip, uint32_t name, uint64_t *id)
{
    uint32_t li;
    int added, err;

    err = pp_pmap_find_or_add(&w->locations, ip, name, NULL, NULL, &li, &added);
    if (err != 0) {
        return err;
    }
    if (added) {
        if (li >= w->loc_cap) {
            size_t ncap = w->loc_cap != 0 ? w->loc_cap * 2 : 1024;
            uint64_t *ips = realloc(w->loc_ip, ncap * sizeof(*ips));
            uint32_t *names;

            if (ips == NULL) {
                return -ENOMEM;
            }
            w->loc_ip = ips;
            names = realloc(w->loc_name, ncap * sizeof(*names));
            if (names == NULL) {
                return -ENOMEM;
            }
            w->loc_name = names;
            w->loc_cap = ncap;
        }
        w->loc_ip[li] = ip;
        w->loc_name[li] = name;
    }
    *id = (uint64_t)li + 1;
    return 0;
}

/* A Label{key, str} or, when str is NULL, a Label{key, num}. */
static int
pp_pprof_label(struct pp_pprof *w, const char *key, const char *str, uint64_t num)
{
    uint64_t ki, si;
    int err;

    err = pp_pprof_intern(&w->str, key, strlen(key), &ki);
    if (err == 0 && str != NULL) {
        err = pp_pprof_intern(&w->str, str, strlen(str), &si);
    }
    if (err != 0) {
        return err;
    }
    pp_pb_uint(&w->sub2, PP_PB_LABEL_KEY, ki);
    if (str != NULL) {
        pp_pb_uint(&w->sub2, PP_PB_LABEL_STR, si);
    } else {
        pp_pb_uint(&w->sub2, PP_PB_LABEL_NUM, num);
    }
    pp_pb_message(&w->sub, PP_PB_SAMPLE_LABEL, &w->sub2);
    return 0;
}

/* One Sample per distinct stack: its locations leaf first, its samples and its CPU time. */
static int
pp_pprof_samples(struct pp_pprof *w, uint64_t interval_ns, char *err_msg, size_t errlen)
{
    const struct pp_profile *p = w->p;
    struct pp_pb packed = { 0 };
    size_t i;
    int err = 0;

    for (i = 0; i < p->stack_count; i++) {
        const struct pp_profile_stack *st = &p->stacks[i];
        char label[320];
        uint32_t d;

        if (st->samples == 0) {
            continue;
        }
        if (st->depth > 0 && st->names == NULL) {
            snprintf(err_msg, errlen, "pprof: the profile's frames are not named");
            err = -EINVAL;
            goto out;
        }
        for (d = 0; d < st->depth; d++) {
            uint64_t id;

            if (st->names[d] >= p->name_count) {
                snprintf(err_msg, errlen, "pprof: stack %zu names frame %u out of range", i,
                         (unsigned)st->names[d]);
                err = -EINVAL;
                goto out;
            }
            err = pp_pprof_location(w, st->ips != NULL ? st->ips[d] : 0, st->names[d], &id);
            if (err != 0) {
                goto out;
            }
            pp_pb_varint(&packed, id);
        }
        pp_pb_message(&w->sub, PP_PB_SAMPLE_LOCATION_ID, &packed);
        /* Packed values are written whole: a zero inside a packed field is not a default. */
        pp_pb_varint(&packed, st->samples);
        pp_pb_varint(&packed, st->samples * interval_ns);
        pp_pb_message(&w->sub, PP_PB_SAMPLE_VALUE, &packed);
        err = pp_pprof_label(w, "thread",
                             pp_profile_thread_label(p, st->thread_id, label, sizeof(label)), 0);
        if (err == 0) {
            err = pp_pprof_label(w, "thread_id", NULL, pp_profile_tid(st->thread_id));
        }
        if (err == 0 && p->process_count > 1) {
            err = pp_pprof_label(w, "pid", NULL, pp_profile_thread_pid(p, st->thread_id));
        }
        if (err != 0) {
            goto out;
        }
        pp_pb_message(&w->msg, PP_PB_PROFILE_SAMPLE, &w->sub);
    }
    for (i = 0; i < w->locations.count; i++) {
        pp_pb_uint(&w->sub, PP_PB_LOCATION_ID, (uint64_t)i + 1);
        pp_pb_uint(&w->sub, PP_PB_LOCATION_MAPPING_ID, w->name_mapping[w->loc_name[i]]);
        pp_pb_uint(&w->sub, PP_PB_LOCATION_ADDRESS, w->loc_ip[i]);
        pp_pb_uint(&w->sub2, PP_PB_LINE_FUNCTION_ID, (uint64_t)w->loc_name[i] + 1);
        pp_pb_message(&w->sub, PP_PB_LOCATION_LINE, &w->sub2);
        pp_pb_message(&w->msg, PP_PB_PROFILE_LOCATION, &w->sub);
    }
    err = packed.err;
out:
    pp_pb_fini(&packed);
    return err;
}

/* Ticks to nanoseconds without overflowing for any realistic tick rate. */
static uint64_t
pp_pprof_ns(const struct pp_profile *p, uint64_t ticks)
{
    uint64_t tps = p->ticks_per_second != 0 ? p->ticks_per_second : 1000000000ULL;

    return ticks / tps * 1000000000ULL + ticks % tps * 1000000000ULL / tps;
}

/* Adds a comment line (an index into the string table). */
static int
pp_pprof_comment(struct pp_pprof *w, const char *text)
{
    uint64_t ci;
    int err = pp_pprof_intern(&w->str, text, strlen(text), &ci);

    if (err == 0) {
        pp_pb_uint(&w->msg, PP_PB_PROFILE_COMMENT, ci);
    }
    return err;
}

/* Everything but the string table, which must come last: every other part adds strings. */
static int
pp_pprof_encode(struct pp_pprof *w, char *err_msg, size_t errlen)
{
    const struct pp_profile *p = w->p;
    uint64_t interval =
            p->sampling_interval_ns != 0 ? p->sampling_interval_ns : PP_PPROF_DEFAULT_INTERVAL_NS;
    /* The value is time, and in wall mode it is not CPU time. */
    const char *time_type = p->mode != NULL && strcmp(p->mode, "wall") == 0 ? "wall" : "cpu";
    uint64_t empty, time_index;
    char text[512];
    int err;

    err = pp_pprof_intern(&w->str, "", 0, &empty); /* string_table[0] must be "" */
    if (err == 0) {
        err = pp_pprof_value_type(w, PP_PB_PROFILE_SAMPLE_TYPE, "samples", "count");
    }
    if (err == 0) {
        err = pp_pprof_value_type(w, PP_PB_PROFILE_SAMPLE_TYPE, time_type, "nanoseconds");
    }
    if (err == 0) {
        err = pp_pprof_value_type(w, PP_PB_PROFILE_PERIOD_TYPE, time_type, "nanoseconds");
    }
    if (err == 0) {
        err = pp_pprof_functions(w);
    }
    if (err == 0) {
        err = pp_pprof_samples(w, interval, err_msg, errlen);
    }
    if (err != 0) {
        return err;
    }
    pp_pb_uint(&w->msg, PP_PB_PROFILE_DURATION_NANOS,
               p->last_ts > p->first_ts ? pp_pprof_ns(p, p->last_ts - p->first_ts) : 0);
    pp_pb_uint(&w->msg, PP_PB_PROFILE_PERIOD, interval);
    if (p->process_name != NULL || p->process_id != 0) {
        snprintf(text, sizeof(text), "process %s (%u)",
                 p->process_name != NULL ? p->process_name : "?", (unsigned)p->process_id);
        err = pp_pprof_comment(w, text);
    }
    if (err == 0 && p->mode != NULL) {
        snprintf(text, sizeof(text), "mode %s", p->mode);
        err = pp_pprof_comment(w, text);
    }
    if (err == 0 && (p->lost_samples != 0 || p->lost_events != 0)) {
        snprintf(text, sizeof(text), "lost %llu samples and %llu events",
                 (unsigned long long)p->lost_samples, (unsigned long long)p->lost_events);
        err = pp_pprof_comment(w, text);
    }
    if (err == 0 && (p->threads_dropped != 0 || p->cpu_rest_ns != 0)) {
        snprintf(text, sizeof(text),
                 "%llu threads refused by the agent, %.3f ms of CPU at the ends of threads in no "
                 "sample",
                 (unsigned long long)p->threads_dropped, (double)p->cpu_rest_ns / 1e6);
        err = pp_pprof_comment(w, text);
    }
    if (err == 0 && p->cpu_lost_ns != 0) {
        snprintf(text, sizeof(text),
                 "%.3f ms of CPU in the samples the agent dropped, in no sample",
                 (double)p->cpu_lost_ns / 1e6);
        err = pp_pprof_comment(w, text);
    }
    if (err == 0 && p->perf_early != 0) {
        snprintf(text, sizeof(text),
                 "%llu perf samples left out, early by their thread's CPU clock (their CPU is in "
                 "the thread's next sample)",
                 (unsigned long long)p->perf_early);
        err = pp_pprof_comment(w, text);
    }
    if (err == 0 && p->cpu_chance_ns != 0) {
        snprintf(text, sizeof(text),
                 "%.3f ms of CPU before threads' first samples, the timers' lottery's (its "
                 "winners' samples stand for it)",
                 (double)p->cpu_chance_ns / 1e6);
        err = pp_pprof_comment(w, text);
    }
    if (err == 0) {
        err = pp_pprof_intern(&w->str, time_type, strlen(time_type), &time_index);
    }
    if (err != 0) {
        return err;
    }
    pp_pb_uint(&w->msg, PP_PB_PROFILE_DEFAULT_SAMPLE_TYPE, time_index);
    return w->msg.err != 0 ? w->msg.err : w->sub.err != 0 ? w->sub.err : w->sub2.err;
}

/* Gzips bytes to out. Returns 0, -EIO when out failed, or -ENOMEM. */
static int
pp_pprof_gzip(const uint8_t *bytes, size_t len, FILE *out, char *err_msg, size_t errlen)
{
    z_stream zs;
    uint8_t *chunk = malloc(65536);
    int err = 0, zerr, flush;

    memset(&zs, 0, sizeof(zs));
    if (chunk == NULL) {
        return -ENOMEM;
    }
    /* windowBits 15 + 16: a gzip header and trailer around the deflate stream, as pprof reads. */
    zerr = deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    if (zerr != Z_OK) {
        snprintf(err_msg, errlen, "pprof: deflateInit2 failed (%d)", zerr);
        free(chunk);
        return zerr == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
    }
    zs.next_in = (Bytef *)bytes;
    do {
        /* avail_in is an unsigned int: feed a larger buffer in slices. */
        if (zs.avail_in == 0 && len > 0) {
            zs.avail_in = len > (1u << 30) ? (1u << 30) : (uInt)len;
            len -= zs.avail_in;
        }
        flush = len == 0 ? Z_FINISH : Z_NO_FLUSH;
        do {
            zs.next_out = chunk;
            zs.avail_out = 65536;
            zerr = deflate(&zs, flush);
            if (zerr == Z_STREAM_ERROR) {
                snprintf(err_msg, errlen, "pprof: deflate failed");
                err = -EINVAL;
                goto out;
            }
            if (fwrite(chunk, 1, 65536 - zs.avail_out, out) != 65536 - zs.avail_out) {
                err = -EIO;
                goto out;
            }
        } while (zs.avail_out == 0);
    } while (flush != Z_FINISH);
    if (zerr != Z_STREAM_END) {
        snprintf(err_msg, errlen, "pprof: deflate did not finish (%d)", zerr);
        err = -EINVAL;
    }
out:
    deflateEnd(&zs);
    free(chunk);
    return err;
}

int
pp_write_pprof(const struct pp_profile *p, FILE *out, char *err_msg, size_t errlen)
{
    struct pp_pprof w;
    size_t i;
    int err;

    memset(&w, 0, sizeof(w));
    w.p = p;
    err_msg[0] = '\0';
    err = pp_pprof_encode(&w, err_msg, errlen);
    for (i = 0; err == 0 && i < w.str.map.count; i++) {
        pp_pb_len(&w.msg, PP_PB_PROFILE_STRING_TABLE, w.str.v[i], w.str.lens[i]);
    }
    if (err == 0) {
        err = w.msg.err;
    }
    if (err == 0) {
        err = pp_pprof_gzip(w.msg.data, w.msg.len, out, err_msg, errlen);
    }
    if (err != 0 && err_msg[0] == '\0') {
        snprintf(err_msg, errlen, "pprof: %s", strerror(-err));
    }
    pp_pprof_strings_fini(&w.str);
    pp_pmap_fini(&w.locations);
    pp_pmap_fini(&w.mappings);
    free(w.loc_ip);
    free(w.loc_name);
    free(w.mapping_file);
    free(w.name_mapping);
    pp_pb_fini(&w.msg);
    pp_pb_fini(&w.sub);
    pp_pb_fini(&w.sub2);
    return err;
}
