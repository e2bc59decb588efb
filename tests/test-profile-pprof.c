/* SPDX-License-Identifier: MIT */
/*
 * tests/test-profile-pprof.c - the pprof and perf writers (profile/fmt-pprof.c, fmt-perf.c) on
 * profiles built by hand. The pprof output is inflated and its protobuf walked here, independently
 * of the writer's encoder: per-stack totals, the string table, and that every id a sample or a
 * location refers to exists. The perf output is compared with the exact text.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "profile/profile.h"
#include "tests/test.h"

/* ------------------------------------------------------------------------------------------ */
/* A small profile: two threads, three sampled stacks and one that was never sampled.          */
/* ------------------------------------------------------------------------------------------ */

static char *demo_names[] = {
    "libdemo.so!fn_a", "libdemo.so!main", "libdemo.so!fn_b", "app!foo(int, char)", "0x1234",
};
static const uint32_t s0_names[] = { 0, 1 }, s1_names[] = { 2, 1 }, s2_names[] = { 3, 4 };
static const uint64_t s0_ips[] = { 0x1010, 0x1210 }, s1_ips[] = { 0x1110, 0x1220 };
static const uint64_t s2_ips[] = { 0x2000, 0x3000 };
static struct pp_profile_stack demo_stacks[] = {
    { 101, 3, 3, 2, s0_names, s0_ips },
    { 101, 1, 1, 2, s1_names, s1_ips },
    { 202, 2, 2, 2, s2_names, s2_ips },
    { 202, 0, 0, 2, s2_names, s2_ips }, /* never sampled: no pprof Sample, no perf record */
};
static struct pp_profile_thread demo_threads[] = {
    { 101, "main", 4, 4, 0, 0, 0, 0 },
    { 202, NULL, 2, 2, 0, 0, 0, 0 },
};
static struct pp_profile_sample demo_timeline[] = {
    { 1000000000, 0, 1 }, { 1010000000, 2, 1 }, { 1020000000, 0, 1 },
    { 1030000000, 1, 1 }, { 1040000000, 0, 1 }, { 1050000000, 2, 1 },
};
static char demo_process[] = "demo app";

static void
demo_profile(struct pp_profile *p)
{
    memset(p, 0, sizeof(*p));
    p->stacks = demo_stacks;
    p->stack_count = sizeof(demo_stacks) / sizeof(demo_stacks[0]);
    p->names = demo_names;
    p->name_count = sizeof(demo_names) / sizeof(demo_names[0]);
    p->threads = demo_threads;
    p->thread_count = sizeof(demo_threads) / sizeof(demo_threads[0]);
    p->timeline = demo_timeline;
    p->timeline_count = sizeof(demo_timeline) / sizeof(demo_timeline[0]);
    p->samples = p->running_samples = 6;
    p->first_ts = 1000000000;
    p->last_ts = 1050000000;
    p->ticks_per_second = 1000000000;
    p->process_id = 4242;
    p->sampling_interval_ns = 1000000; /* 1 ms */
    p->process_name = demo_process;
}

/* Runs a writer into memory. Returns the malloc'd bytes (NUL-terminated) and their length. */
static char *
write_to_memory(const struct pp_profile *p, enum pp_profile_format fmt, size_t *len, int *ret)
{
    char *buf = NULL, err[256] = "";
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);

    ASSERT_TRUE(f != NULL);
    *ret = pp_profile_write(p, fmt, f, err, sizeof(err));
    ASSERT_EQ(fclose(f), 0);
    if (*ret != 0) {
        printf("# writer said: %s\n", err);
    }
    *len = n;
    return buf;
}

/* ------------------------------------------------------------------------------------------ */
/* A minimal protobuf reader and the parts of profile.proto the tests look at.                 */
/* ------------------------------------------------------------------------------------------ */

struct pb {
    const uint8_t *p, *end;
};

static uint64_t
pb_varint(struct pb *b)
{
    uint64_t v = 0;
    unsigned shift = 0;

    for (;;) {
        uint8_t c;

        ASSERT_TRUE(b->p < b->end);
        ASSERT_TRUE(shift < 64);
        c = *b->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if ((c & 0x80) == 0) {
            return v;
        }
        shift += 7;
    }
}

/* Reads the next field: 0 at the end, else 1 with either *v (varint) or *sub (bytes). */
static int
pb_next(struct pb *b, uint32_t *field, uint64_t *v, struct pb *sub)
{
    uint64_t key, len;

    if (b->p == b->end) {
        return 0;
    }
    key = pb_varint(b);
    *field = (uint32_t)(key >> 3);
    ASSERT_TRUE(*field != 0);
    switch (key & 7) {
    case 0:
        *v = pb_varint(b);
        sub->p = sub->end = NULL;
        return 1;
    case 2:
        len = pb_varint(b);
        ASSERT_TRUE(len <= (uint64_t)(b->end - b->p));
        sub->p = b->p;
        sub->end = b->p + len;
        b->p += len;
        *v = 0;
        return 1;
    default:
        test_fail(__FILE__, __LINE__, "unexpected wire type %u", (unsigned)(key & 7));
    }
}

/* A repeated uint64 field, packed (bytes) or not (one varint). */
static void
pb_repeated(struct pb *sub, uint64_t v, uint64_t *out, size_t *n, size_t max)
{
    if (sub->p == NULL) {
        ASSERT_TRUE(*n < max);
        out[(*n)++] = v;
        return;
    }
    while (sub->p < sub->end) {
        ASSERT_TRUE(*n < max);
        out[(*n)++] = pb_varint(sub);
    }
}

#define DEC_MAX 64

struct dec_label {
    uint64_t key, str, num;
    int has_str;
};

struct dec_sample {
    uint64_t locs[DEC_MAX];
    size_t nlocs;
    uint64_t values[4];
    size_t nvalues;
    struct dec_label labels[4];
    size_t nlabels;
};

struct dec_location {
    uint64_t id, mapping_id, address;
    uint64_t functions[4];
    size_t nfunctions;
};

struct dec_function {
    uint64_t id, name, system_name, filename;
};

struct dec_mapping {
    uint64_t id, filename, has_functions;
};

struct dec_profile {
    struct dec_sample samples[DEC_MAX];
    size_t nsamples;
    struct dec_location locations[DEC_MAX];
    size_t nlocations;
    struct dec_function functions[DEC_MAX];
    size_t nfunctions;
    struct dec_mapping mappings[DEC_MAX];
    size_t nmappings;
    char *strings[4 * DEC_MAX];
    size_t nstrings;
    uint64_t sample_types[4][2];
    size_t nsample_types;
    uint64_t period_type[2];
    uint64_t period, duration, default_sample_type;
    uint64_t comments[8];
    size_t ncomments;
};

static void
dec_value_type(struct pb *b, uint64_t out[2])
{
    struct pb sub;
    uint32_t f;
    uint64_t v;

    while (pb_next(b, &f, &v, &sub)) {
        if (f == 1 || f == 2) {
            out[f - 1] = v;
        }
    }
}

static void
dec_sample(struct pb *b, struct dec_sample *s)
{
    struct pb sub, lsub;
    uint32_t f, lf;
    uint64_t v, lv;

    while (pb_next(b, &f, &v, &sub)) {
        if (f == 1) {
            pb_repeated(&sub, v, s->locs, &s->nlocs, DEC_MAX);
        } else if (f == 2) {
            pb_repeated(&sub, v, s->values, &s->nvalues, 4);
        } else if (f == 3) {
            struct dec_label *l = &s->labels[s->nlabels++];

            ASSERT_TRUE(s->nlabels <= 4);
            while (pb_next(&sub, &lf, &lv, &lsub)) {
                if (lf == 1) {
                    l->key = lv;
                } else if (lf == 2) {
                    l->str = lv;
                    l->has_str = 1;
                } else if (lf == 3) {
                    l->num = lv;
                }
            }
        }
    }
}

/* Inflates a gzip file and decodes its Profile into *d (static storage, strings malloc'd). */
static void
dec_profile(const char *gz, size_t gz_len, struct dec_profile *d)
{
    static uint8_t raw[1 << 20];
    z_stream zs;
    struct pb b, sub, inner;
    uint32_t f, g;
    uint64_t v, w;

    ASSERT_TRUE(gz_len >= 18);
    ASSERT_EQ((uint8_t)gz[0], 0x1f); /* gzip, not zlib or raw deflate */
    ASSERT_EQ((uint8_t)gz[1], 0x8b);
    memset(&zs, 0, sizeof(zs));
    ASSERT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
    zs.next_in = (Bytef *)gz;
    zs.avail_in = (uInt)gz_len;
    zs.next_out = raw;
    zs.avail_out = sizeof(raw);
    ASSERT_EQ(inflate(&zs, Z_FINISH), Z_STREAM_END);
    ASSERT_EQ(zs.avail_in, 0); /* nothing after the gzip member */
    b.p = raw;
    b.end = raw + zs.total_out;
    inflateEnd(&zs);

    memset(d, 0, sizeof(*d));
    while (pb_next(&b, &f, &v, &sub)) {
        switch (f) {
        case 1:
            ASSERT_TRUE(d->nsample_types < 4);
            dec_value_type(&sub, d->sample_types[d->nsample_types++]);
            break;
        case 2:
            ASSERT_TRUE(d->nsamples < DEC_MAX);
            dec_sample(&sub, &d->samples[d->nsamples++]);
            break;
        case 3: {
            struct dec_mapping *m = &d->mappings[d->nmappings++];

            ASSERT_TRUE(d->nmappings <= DEC_MAX);
            while (pb_next(&sub, &g, &w, &inner)) {
                if (g == 1) {
                    m->id = w;
                } else if (g == 5) {
                    m->filename = w;
                } else if (g == 7) {
                    m->has_functions = w;
                }
            }
            break;
        }
        case 4: {
            struct dec_location *l = &d->locations[d->nlocations++];
            struct pb line;
            uint32_t h;
            uint64_t x;

            ASSERT_TRUE(d->nlocations <= DEC_MAX);
            while (pb_next(&sub, &g, &w, &inner)) {
                if (g == 1) {
                    l->id = w;
                } else if (g == 2) {
                    l->mapping_id = w;
                } else if (g == 3) {
                    l->address = w;
                } else if (g == 4) {
                    ASSERT_TRUE(l->nfunctions < 4);
                    while (pb_next(&inner, &h, &x, &line)) {
                        if (h == 1) {
                            l->functions[l->nfunctions++] = x;
                        }
                    }
                }
            }
            break;
        }
        case 5: {
            struct dec_function *fn = &d->functions[d->nfunctions++];

            ASSERT_TRUE(d->nfunctions <= DEC_MAX);
            while (pb_next(&sub, &g, &w, &inner)) {
                if (g == 1) {
                    fn->id = w;
                } else if (g == 2) {
                    fn->name = w;
                } else if (g == 3) {
                    fn->system_name = w;
                } else if (g == 4) {
                    fn->filename = w;
                }
            }
            break;
        }
        case 6: {
            size_t n = (size_t)(sub.end - sub.p);
            char *s = malloc(n + 1);

            ASSERT_TRUE(s != NULL && d->nstrings < 4 * DEC_MAX);
            memcpy(s, sub.p, n);
            s[n] = '\0';
            d->strings[d->nstrings++] = s;
            break;
        }
        case 10:
            d->duration = v;
            break;
        case 11:
            dec_value_type(&sub, d->period_type);
            break;
        case 12:
            d->period = v;
            break;
        case 13:
            ASSERT_TRUE(d->ncomments < 8);
            d->comments[d->ncomments++] = v;
            break;
        case 14:
            d->default_sample_type = v;
            break;
        default:
            break;
        }
    }
}

static const char *
dec_str(const struct dec_profile *d, uint64_t i)
{
    if (i >= d->nstrings) {
        test_fail(__FILE__, __LINE__, "string index %llu >= %zu", (unsigned long long)i,
                  d->nstrings);
    }
    return d->strings[i];
}

static const struct dec_location *
dec_location(const struct dec_profile *d, uint64_t id)
{
    size_t i;

    for (i = 0; i < d->nlocations; i++) {
        if (d->locations[i].id == id) {
            return &d->locations[i];
        }
    }
    test_fail(__FILE__, __LINE__, "location id %llu does not exist", (unsigned long long)id);
}

static const struct dec_function *
dec_function(const struct dec_profile *d, uint64_t id)
{
    size_t i;

    for (i = 0; i < d->nfunctions; i++) {
        if (d->functions[i].id == id) {
            return &d->functions[i];
        }
    }
    test_fail(__FILE__, __LINE__, "function id %llu does not exist", (unsigned long long)id);
}

/* The label of s whose key is the string key; fails when there is none. */
static const struct dec_label *
dec_label(const struct dec_profile *d, const struct dec_sample *s, const char *key)
{
    size_t i;

    for (i = 0; i < s->nlabels; i++) {
        if (strcmp(dec_str(d, s->labels[i].key), key) == 0) {
            return &s->labels[i];
        }
    }
    test_fail(__FILE__, __LINE__, "sample has no label %s", key);
}

/*
 * The checks every decoded profile must pass: string 0 is "", ids are nonzero and unique, every
 * id referred to exists, and the sample types are samples/count and cpu/nanoseconds.
 */
static void
dec_check(const struct dec_profile *d, const char *time_type)
{
    size_t i, j, k;

    ASSERT_TRUE(d->nstrings >= 1);
    ASSERT_STR_EQ(d->strings[0], "");
    ASSERT_EQ(d->nsample_types, 2);
    ASSERT_STR_EQ(dec_str(d, d->sample_types[0][0]), "samples");
    ASSERT_STR_EQ(dec_str(d, d->sample_types[0][1]), "count");
    ASSERT_STR_EQ(dec_str(d, d->sample_types[1][0]), time_type);
    ASSERT_STR_EQ(dec_str(d, d->sample_types[1][1]), "nanoseconds");
    ASSERT_STR_EQ(dec_str(d, d->period_type[0]), time_type);
    ASSERT_STR_EQ(dec_str(d, d->period_type[1]), "nanoseconds");
    ASSERT_STR_EQ(dec_str(d, d->default_sample_type), time_type);
    for (i = 0; i < d->ncomments; i++) {
        (void)dec_str(d, d->comments[i]);
    }
    for (i = 0; i < d->nmappings; i++) {
        ASSERT_TRUE(d->mappings[i].id != 0);
        ASSERT_EQ(d->mappings[i].has_functions, 1);
        (void)dec_str(d, d->mappings[i].filename);
        for (j = i + 1; j < d->nmappings; j++) {
            ASSERT_TRUE(d->mappings[i].id != d->mappings[j].id);
        }
    }
    for (i = 0; i < d->nfunctions; i++) {
        ASSERT_TRUE(d->functions[i].id != 0);
        (void)dec_str(d, d->functions[i].name);
        (void)dec_str(d, d->functions[i].filename);
        for (j = i + 1; j < d->nfunctions; j++) {
            ASSERT_TRUE(d->functions[i].id != d->functions[j].id);
        }
    }
    for (i = 0; i < d->nlocations; i++) {
        const struct dec_location *l = &d->locations[i];

        ASSERT_TRUE(l->id != 0);
        ASSERT_EQ(l->nfunctions, 1);
        (void)dec_function(d, l->functions[0]);
        if (l->mapping_id != 0) {
            for (k = 0; k < d->nmappings && d->mappings[k].id != l->mapping_id; k++) {
                continue;
            }
            ASSERT_TRUE(k < d->nmappings);
        }
        for (j = i + 1; j < d->nlocations; j++) {
            ASSERT_TRUE(l->id != d->locations[j].id);
        }
    }
    for (i = 0; i < d->nsamples; i++) {
        ASSERT_EQ(d->samples[i].nvalues, 2);
        ASSERT_EQ(d->samples[i].nlabels, 2);
        ASSERT_TRUE(dec_label(d, &d->samples[i], "thread")->has_str);
        ASSERT_TRUE(!dec_label(d, &d->samples[i], "thread_id")->has_str);
        for (j = 0; j < d->samples[i].nlocs; j++) {
            (void)dec_location(d, d->samples[i].locs[j]);
        }
    }
}

/* "THREAD|ROOT;...;LEAF" of a sample, each frame "filename!name" as the profile named it. */
static void
dec_stack_text(const struct dec_profile *d, const struct dec_sample *s, char *buf, size_t len)
{
    size_t n, i;

    n = (size_t)snprintf(buf, len, "%s|", dec_str(d, dec_label(d, s, "thread")->str));
    for (i = s->nlocs; i > 0 && n < len; i--) {
        const struct dec_location *l = dec_location(d, s->locs[i - 1]);
        const struct dec_function *fn = dec_function(d, l->functions[0]);
        const char *file = dec_str(d, fn->filename);

        n += (size_t)snprintf(buf + n, len - n, "%s%s%s%s", i == s->nlocs ? "" : ";", file,
                              file[0] != '\0' ? "!" : "", dec_str(d, fn->name));
    }
}

/* The decoded sample whose stack text is text; fails when there is not exactly one. */
static const struct dec_sample *
dec_find(const struct dec_profile *d, const char *text)
{
    const struct dec_sample *found = NULL;
    char buf[512];
    size_t i;

    for (i = 0; i < d->nsamples; i++) {
        dec_stack_text(d, &d->samples[i], buf, sizeof(buf));
        if (strcmp(buf, text) == 0) {
            ASSERT_TRUE(found == NULL);
            found = &d->samples[i];
        }
    }
    if (found == NULL) {
        test_fail(__FILE__, __LINE__, "no sample with stack %s", text);
    }
    return found;
}

/* ------------------------------------------------------------------------------------------ */

TEST(pprof_totals_per_stack)
{
    static struct dec_profile d;
    struct pp_profile p;
    const struct dec_sample *s;
    uint64_t total = 0;
    size_t len, i;
    int ret;
    char *gz;

    demo_profile(&p);
    gz = write_to_memory(&p, PP_PROFILE_PPROF, &len, &ret);
    ASSERT_OK(ret);
    dec_profile(gz, len, &d);
    dec_check(&d, "cpu");

    ASSERT_EQ(d.nsamples, 3); /* the stack with 0 samples is left out */
    s = dec_find(&d, "main (101)|libdemo.so!main;libdemo.so!fn_a");
    ASSERT_U64_EQ(s->values[0], 3);
    ASSERT_U64_EQ(s->values[1], 3 * 1000000ULL);
    ASSERT_U64_EQ(dec_label(&d, s, "thread_id")->num, 101);
    ASSERT_U64_EQ(dec_location(&d, s->locs[0])->address, 0x1010); /* leaf first */
    ASSERT_U64_EQ(dec_location(&d, s->locs[1])->address, 0x1210);
    s = dec_find(&d, "main (101)|libdemo.so!main;libdemo.so!fn_b");
    ASSERT_U64_EQ(s->values[0], 1);
    ASSERT_U64_EQ(s->values[1], 1000000ULL);
    s = dec_find(&d, "Thread (202)|0x1234;app!foo(int, char)");
    ASSERT_U64_EQ(s->values[0], 2);
    ASSERT_U64_EQ(dec_label(&d, s, "thread_id")->num, 202);
    /* "0x1234" has no module, so its location has no mapping. */
    ASSERT_U64_EQ(dec_location(&d, s->locs[1])->mapping_id, 0);
    ASSERT_TRUE(dec_location(&d, s->locs[0])->mapping_id != 0);
    for (i = 0; i < d.nsamples; i++) {
        total += d.samples[i].values[0];
    }
    ASSERT_U64_EQ(total, p.samples);

    /* main at two addresses: two locations, one function; two modules, two mappings. */
    ASSERT_EQ(d.nlocations, 6);
    ASSERT_EQ(d.nfunctions, 5);
    ASSERT_EQ(d.nmappings, 2);
    ASSERT_U64_EQ(d.period, 1000000);
    ASSERT_U64_EQ(d.duration, 50000000); /* last_ts - first_ts, 50 ms */
    for (i = 0; i < d.nfunctions; i++) {
        ASSERT_U64_EQ(d.functions[i].system_name, d.functions[i].name);
    }
    for (i = 0; i + 1 < d.nstrings; i++) { /* the string table has no duplicates */
        size_t j;

        for (j = i + 1; j < d.nstrings; j++) {
            ASSERT_TRUE(strcmp(d.strings[i], d.strings[j]) != 0);
        }
    }
    free(gz);
}

TEST(pprof_default_interval_and_ticks)
{
    static struct dec_profile d;
    struct pp_profile p;
    const struct dec_sample *s;
    size_t len;
    int ret;
    char *gz;

    demo_profile(&p);
    p.sampling_interval_ns = 0;    /* unknown: 10 ms, as pprof-rs's 100 Hz */
    p.ticks_per_second = 10000000; /* 100 ns ticks */
    p.first_ts = 5;
    p.last_ts = 5 + 25000000; /* 2.5 s */
    p.mode = (char *)"cpu";
    p.lost_samples = 7;
    gz = write_to_memory(&p, PP_PROFILE_PPROF, &len, &ret);
    ASSERT_OK(ret);
    dec_profile(gz, len, &d);
    dec_check(&d, "cpu");
    ASSERT_U64_EQ(d.period, 10000000);
    ASSERT_U64_EQ(d.duration, 2500000000ULL);
    s = dec_find(&d, "main (101)|libdemo.so!main;libdemo.so!fn_a");
    ASSERT_U64_EQ(s->values[1], 3 * 10000000ULL);
    ASSERT_EQ(d.ncomments, 3); /* process, mode, lost samples */
    ASSERT_STR_EQ(dec_str(&d, d.comments[0]), "process demo app (4242)");
    ASSERT_STR_EQ(dec_str(&d, d.comments[2]), "lost 7 samples and 0 events");
    free(gz);
}

TEST(pprof_wall_mode_names_its_time)
{
    static struct dec_profile d;
    struct pp_profile p;
    size_t len;
    int ret;
    char *gz;

    demo_profile(&p);
    p.mode = (char *)"wall"; /* waiting threads are sampled too: the time is not CPU time */
    gz = write_to_memory(&p, PP_PROFILE_PPROF, &len, &ret);
    ASSERT_OK(ret);
    dec_profile(gz, len, &d);
    dec_check(&d, "wall");
    ASSERT_U64_EQ(dec_find(&d, "Thread (202)|0x1234;app!foo(int, char)")->values[1], 2000000);
    free(gz);
}

TEST(pprof_without_addresses)
{
    static struct pp_profile_stack stacks[3];
    static struct dec_profile d;
    struct pp_profile p;
    size_t len, i;
    int ret;
    char *gz;

    demo_profile(&p);
    memcpy(stacks, demo_stacks, sizeof(stacks));
    for (i = 0; i < 3; i++) {
        stacks[i].ips = NULL;
    }
    p.stacks = stacks;
    p.stack_count = 3;
    gz = write_to_memory(&p, PP_PROFILE_PPROF, &len, &ret);
    ASSERT_OK(ret);
    dec_profile(gz, len, &d);
    dec_check(&d, "cpu");
    /* One location per name when there are no addresses: main is one location now. */
    ASSERT_EQ(d.nlocations, 5);
    for (i = 0; i < d.nlocations; i++) {
        ASSERT_U64_EQ(d.locations[i].address, 0);
    }
    ASSERT_U64_EQ(dec_find(&d, "main (101)|libdemo.so!main;libdemo.so!fn_b")->values[0], 1);
    free(gz);
}

/* Two empty stacks of one thread share a stack; the second used to compare them with
 * memcmp(NULL, NULL, 0), which UBSan aborts on (issue 20: 28 of 1500 mutated traces). */
TEST(empty_stack_twice_shares_one_stack)
{
    struct pp_profile *p = NULL;
    char err[128];

    ASSERT_OK(pp_profile_new(NULL, &p, err, sizeof(err)));
    ASSERT_OK(pp_profile_add_sample(p, 7, 1, 1, NULL, 0));
    ASSERT_OK(pp_profile_add_sample(p, 7, 2, 0, NULL, 0));
    ASSERT_EQ(p->stack_count, 1);
    ASSERT_EQ(p->stacks[0].samples, 2);
    pp_profile_free(p);
}

/* The busiest thread's rate is over its own life: a tree of short processes (a build's compiler
 * runs) each sampled at 100 Hz while it ran read 3.6 Hz over the whole recording. */
TEST(busiest_rate_is_over_each_threads_life)
{
    struct pp_profile *p = NULL;
    char err[128];
    uint64_t i;

    ASSERT_OK(pp_profile_new(NULL, &p, err, sizeof(err)));
    ASSERT_TRUE(pp_profile_busiest_rate(p) == 0); /* no thread */
    /* thread 1: 21 samples 10 ms apart at 1 s; thread 2: 11 samples 20 ms apart at 9 s; thread
     * 3: 5 samples 1 ms apart (too few to tell) at 19 s; the recording spans 19 s */
    for (i = 0; i < 21; i++) {
        ASSERT_OK(pp_profile_add_sample(p, 1, 1000000000u + i * 10000000u, 1, NULL, 0));
    }
    ASSERT_TRUE(pp_profile_busiest_rate(p) > 99.99 && pp_profile_busiest_rate(p) < 100.01);
    for (i = 0; i < 11; i++) {
        ASSERT_OK(pp_profile_add_sample(p, 2, 9000000000u + i * 20000000u, 1, NULL, 0));
    }
    for (i = 0; i < 5; i++) {
        ASSERT_OK(pp_profile_add_sample(p, 3, 19000000000u + i * 1000000u, 1, NULL, 0));
    }
    ASSERT_EQ(p->threads[1].first_ts, 9000000000u);
    ASSERT_EQ(p->threads[1].last_ts, 9200000000u);
    ASSERT_TRUE(pp_profile_busiest_rate(p) > 99.99 && pp_profile_busiest_rate(p) < 100.01);
    pp_profile_free(p);
}

TEST(pprof_empty_profile)
{
    static struct dec_profile d;
    struct pp_profile p;
    size_t len;
    int ret;
    char *gz;

    memset(&p, 0, sizeof(p));
    gz = write_to_memory(&p, PP_PROFILE_PPROF, &len, &ret);
    ASSERT_OK(ret);
    dec_profile(gz, len, &d);
    dec_check(&d, "cpu");
    ASSERT_EQ(d.nsamples, 0);
    ASSERT_EQ(d.nlocations, 0);
    ASSERT_EQ(d.nfunctions, 0);
    ASSERT_U64_EQ(d.duration, 0);
    ASSERT_U64_EQ(d.period, 10000000);
    free(gz);
}

TEST(pprof_rejects_unnamed_stacks)
{
    static struct pp_profile_stack stacks[1];
    struct pp_profile p;
    char err[128] = "";
    FILE *f = fopen("/dev/null", "w");

    ASSERT_TRUE(f != NULL);
    demo_profile(&p);
    stacks[0] = demo_stacks[0];
    stacks[0].names = NULL;
    p.stacks = stacks;
    p.stack_count = 1;
    ASSERT_EQ(pp_profile_write(&p, PP_PROFILE_PPROF, f, err, sizeof(err)), -EINVAL);
    ASSERT_TRUE(strstr(err, "not named") != NULL);
    ASSERT_EQ(pp_profile_write(&p, PP_PROFILE_PERF, f, err, sizeof(err)), -EINVAL);
    ASSERT_TRUE(strstr(err, "not named") != NULL);
    fclose(f);
}

TEST(pprof_reports_write_failure)
{
    struct pp_profile p;
    char err[128] = "";
    FILE *f = fopen("/dev/full", "w");

    if (f == NULL) {
        test_skip("/dev/full is missing");
    }
    setvbuf(f, NULL, _IONBF, 0);
    demo_profile(&p);
    ASSERT_EQ(pp_profile_write(&p, PP_PROFILE_PPROF, f, err, sizeof(err)), -EIO);
    ASSERT_EQ(pp_profile_write(&p, PP_PROFILE_PERF, f, err, sizeof(err)), -EIO);
    fclose(f);
}

/* ------------------------------------------------------------------------------------------ */

static const char demo_perf_text[] = "main 4242/101 0.000000: 1 cpu-clock:\n"
                                     "\t1010 fn_a (libdemo.so)\n"
                                     "\t1210 main (libdemo.so)\n"
                                     "\n"
                                     "demo_app 4242/202 0.010000: 1 cpu-clock:\n"
                                     "\t2000 foo(int, char) (app)\n"
                                     "\t3000 0x1234 ([unknown])\n"
                                     "\n"
                                     "main 4242/101 0.020000: 1 cpu-clock:\n"
                                     "\t1010 fn_a (libdemo.so)\n"
                                     "\t1210 main (libdemo.so)\n"
                                     "\n"
                                     "main 4242/101 0.030000: 1 cpu-clock:\n"
                                     "\t1110 fn_b (libdemo.so)\n"
                                     "\t1220 main (libdemo.so)\n"
                                     "\n"
                                     "main 4242/101 0.040000: 1 cpu-clock:\n"
                                     "\t1010 fn_a (libdemo.so)\n"
                                     "\t1210 main (libdemo.so)\n"
                                     "\n"
                                     "demo_app 4242/202 0.050000: 1 cpu-clock:\n"
                                     "\t2000 foo(int, char) (app)\n"
                                     "\t3000 0x1234 ([unknown])\n"
                                     "\n";

TEST(perf_exact_text)
{
    struct pp_profile p;
    size_t len;
    int ret;
    char *text;

    demo_profile(&p);
    text = write_to_memory(&p, PP_PROFILE_PERF, &len, &ret);
    ASSERT_OK(ret);
    ASSERT_STR_EQ(text, demo_perf_text);
    ASSERT_EQ(len, strlen(demo_perf_text));
    free(text);
}

TEST(perf_without_timeline_weights_stacks)
{
    static const char expected[] = "main 4242/101 0.000000: 3 cpu-clock:\n"
                                   "\t1010 fn_a (libdemo.so)\n"
                                   "\t1210 main (libdemo.so)\n"
                                   "\n"
                                   "main 4242/101 0.000000: 1 cpu-clock:\n"
                                   "\t1110 fn_b (libdemo.so)\n"
                                   "\t1220 main (libdemo.so)\n"
                                   "\n"
                                   "demo_app 4242/202 0.000000: 2 cpu-clock:\n"
                                   "\t2000 foo(int, char) (app)\n"
                                   "\t3000 0x1234 ([unknown])\n"
                                   "\n";
    struct pp_profile p;
    size_t len;
    int ret;
    char *text;

    demo_profile(&p);
    p.timeline = NULL;
    p.timeline_count = 0;
    text = write_to_memory(&p, PP_PROFILE_PERF, &len, &ret);
    ASSERT_OK(ret);
    ASSERT_STR_EQ(text, expected);
    free(text);
}

TEST(perf_keeps_records_intact)
{
    static char *names[] = { "my lib.so!operator new(unsigned\nlong)", "x!main" };
    static const uint32_t snames[] = { 0, 1 };
    static struct pp_profile_stack stacks[] = {
        { 7, 1, 1, 2, snames, NULL },
        { 8, 1, 1, 0, NULL, NULL }, /* a sample without frames is still a record */
    };
    static struct pp_profile_thread threads[] = { { 7, "worker 2", 1, 1, 0, 0, 0, 0 } };
    static struct pp_profile_sample timeline[] = { { 0, 0, 1 }, { 1500, 1, 0 } };
    static const char expected[] = "worker_2 0/7 0.000000: 1 cpu-clock:\n"
                                   "\t0 operator new(unsigned long) (my lib.so)\n"
                                   "\t0 main (x)\n"
                                   "\n"
                                   "pipeprof 0/8 0.001500: 1 cpu-clock:\n"
                                   "\n";
    struct pp_profile p;
    size_t len;
    int ret;
    char *text;

    memset(&p, 0, sizeof(p));
    p.stacks = stacks;
    p.stack_count = 2;
    p.names = names;
    p.name_count = 2;
    p.threads = threads;
    p.thread_count = 1;
    p.timeline = timeline;
    p.timeline_count = 2;
    p.samples = 2;
    p.last_ts = 1500;
    p.ticks_per_second = 1000000; /* microseconds: 1500 ticks = 0.0015 s */
    text = write_to_memory(&p, PP_PROFILE_PERF, &len, &ret);
    ASSERT_OK(ret);
    ASSERT_STR_EQ(text, expected);
    free(text);
}

TEST(perf_empty_profile)
{
    struct pp_profile p;
    size_t len;
    int ret;
    char *text;

    memset(&p, 0, sizeof(p));
    text = write_to_memory(&p, PP_PROFILE_PERF, &len, &ret);
    ASSERT_OK(ret);
    ASSERT_EQ(len, 0);
    free(text);
}

/* A profile merged from two traces: every writer puts each thread under its process. */
TEST(writers_keep_processes_apart)
{
    static struct pp_profile_thread threads[] = {
        { 101, "main", 4, 4, 111, 1, 0, 0 },
        { 202, NULL, 2, 2, 222, 1, 0, 0 },
    };
    static char alpha[] = "alpha", beta[] = "beta";
    static struct pp_profile_process procs[] = { { 111, 1, alpha, 4 }, { 222, 1, beta, 2 } };
    static const struct {
        enum pp_profile_format fmt;
        const char *want[2];
    } cases[] = {
        { PP_PROFILE_FOLDED, { "alpha (111);main (101);", "beta (222);Thread (202);" } },
        { PP_PROFILE_PERF, { "main 111/101 ", "demo_app 222/202 " } },
        { PP_PROFILE_SPEEDSCOPE,
          { "\"alpha (111): main (101)\"", "\"beta (222): Thread (202)\"" } },
        { PP_PROFILE_CHROMIUM, { "\"pid\":222,\"tid\":202", "\"name\":\"beta\"" } },
    };
    struct pp_profile p;
    size_t len, i;
    int ret;

    demo_profile(&p);
    p.threads = threads;
    p.processes = procs;
    p.process_count = 2;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *text = write_to_memory(&p, cases[i].fmt, &len, &ret);

        ASSERT_OK(ret);
        ASSERT_TRUE(strstr(text, cases[i].want[0]) != NULL);
        ASSERT_TRUE(strstr(text, cases[i].want[1]) != NULL);
        free(text);
    }
    ASSERT_EQ(pp_profile_thread_pid(&p, 202), 222);
    ASSERT_EQ(pp_profile_thread_pid(&p, 999), 4242); /* unknown: the profile's own */
}

static const struct test_case cases[] = {
    TEST_CASE(writers_keep_processes_apart),
    TEST_CASE(pprof_totals_per_stack),
    TEST_CASE(pprof_default_interval_and_ticks),
    TEST_CASE(pprof_wall_mode_names_its_time),
    TEST_CASE(pprof_without_addresses),
    TEST_CASE(empty_stack_twice_shares_one_stack),
    TEST_CASE(busiest_rate_is_over_each_threads_life),
    TEST_CASE(pprof_empty_profile),
    TEST_CASE(pprof_rejects_unnamed_stacks),
    TEST_CASE(pprof_reports_write_failure),
    TEST_CASE(perf_exact_text),
    TEST_CASE(perf_without_timeline_weights_stacks),
    TEST_CASE(perf_keeps_records_intact),
    TEST_CASE(perf_empty_profile),
};
TEST_MAIN(cases)
