/* SPDX-License-Identifier: MIT */
/*
 * tests/test-profile-speedscope.c - the speedscope and chromium writers (profile/) on a profile
 * built through the builder (pp_profile_new/add_sample/name_frames), read back with cJSON:
 * per-thread totals, root-first samples, the shared frame table, time order, and B/E events
 * that nest per thread. Also the profile builder's interning, folding and thread naming.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "profile/profile.h"
#include "tests/test.h"

/* Addresses name themselves: 0x1000+ main, 0x2000+ work, 0x3000+ leaf, 0x4000+ "dl", else hex. */
static int
demo_namer(void *ctx, uint64_t ip, int caller, char *buf, size_t len, int *resolved)
{
    static const char *const names[] = { "app!main", "app!work(int, char)", "libc.so!leaf",
                                         "libdl!\"quoted\"\n" };
    uint64_t at = caller ? ip - 1 : ip;

    (void)ctx;
    if (at >= 0x1000 && at < 0x5000) {
        snprintf(buf, len, "%s", names[at / 0x1000 - 1]);
        *resolved = 1;
    } else {
        snprintf(buf, len, "app!0x%llx", (unsigned long long)ip);
    }
    return 0;
}

/*
 * Thread 7: three samples main>work>leaf (two addresses in leaf), one main>work, arriving out of
 * time order; thread 9: two samples main>dl. Leaf first, as the agent records them.
 */
static struct pp_profile *
demo_build(const char *fold)
{
    static const uint64_t a[] = { 0x3010, 0x2021, 0x1031 }, b[] = { 0x3020, 0x2021, 0x1031 };
    static const uint64_t c[] = { 0x2040, 0x1031 }, d[] = { 0x4000, 0x1051 };
    struct pp_profile *p;
    char err[128];

    ASSERT_OK(pp_profile_new(fold, &p, err, sizeof(err)));
    ASSERT_OK(pp_profile_add_sample(p, 7, 3000000, 1, a, 3));
    ASSERT_OK(pp_profile_add_sample(p, 7, 1000000, 1, a, 3));
    ASSERT_OK(pp_profile_add_sample(p, 9, 1500000, 0, d, 2));
    ASSERT_OK(pp_profile_add_sample(p, 7, 2000000, 1, b, 3));
    ASSERT_OK(pp_profile_add_sample(p, 7, 4000000, 1, c, 2));
    ASSERT_OK(pp_profile_add_sample(p, 9, 2500000, 0, d, 2));
    ASSERT_OK(pp_profile_set_thread_name(p, 7, "worker \"a\""));
    ASSERT_OK(pp_profile_name_frames(p, demo_namer, NULL));
    p->sampling_interval_ns = 1000000;
    p->process_id = 42;
    return p;
}

static cJSON *
demo_write(const struct pp_profile *p, enum pp_profile_format fmt)
{
    char *buf = NULL, err[128];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cJSON *doc;

    ASSERT_TRUE(f != NULL);
    ASSERT_OK(pp_profile_write(p, fmt, f, err, sizeof(err)));
    fclose(f);
    doc = cJSON_Parse(buf);
    if (doc == NULL) {
        fprintf(stderr, "not JSON: %s\n", buf);
    }
    ASSERT_TRUE(doc != NULL);
    free(buf);
    return doc;
}

static const char *
frame_name(cJSON *frames, int i)
{
    return cJSON_GetObjectItem(cJSON_GetArrayItem(frames, i), "name")->valuestring;
}

TEST(builder_interns_and_names)
{
    struct pp_profile *p = demo_build(NULL);

    ASSERT_EQ(p->samples, 6);
    ASSERT_EQ(p->running_samples, 4);
    ASSERT_EQ(p->stack_count, 4); /* a, b, c on 7 and d on 9: distinct (thread, addresses) */
    ASSERT_EQ(p->name_count, 4);  /* main, work, leaf, dl: named once each */
    ASSERT_EQ(p->thread_count, 2);
    ASSERT_EQ(p->timeline_count, 6);
    ASSERT_EQ(p->first_ts, 1000000);
    ASSERT_EQ(p->last_ts, 4000000);
    ASSERT_STR_EQ(p->threads[0].name, "worker \"a\"");
    ASSERT_TRUE(p->threads[1].name == NULL);
    ASSERT_STR_EQ(p->names[p->stacks[0].names[0]], "libc.so!leaf");
    ASSERT_EQ(p->stacks[0].ips[0], 0x3010);
    ASSERT_EQ(p->resolved_frames, 15); /* 2x3 + 1x3 + 1x2 + 2x2, weighted by samples */
    /* adding after naming is refused */
    ASSERT_EQ(pp_profile_add_sample(p, 7, 1, 1, NULL, 0), -EINVAL);
    pp_profile_free(p);
}

TEST(builder_folds_frames)
{
    struct pp_profile *p = demo_build("^app!work");
    char err[128];
    struct pp_profile *bad;

    ASSERT_EQ(p->stacks[0].depth, 2); /* leaf, main: work is folded away */
    ASSERT_STR_EQ(p->names[p->stacks[0].names[1]], "app!main");
    pp_profile_free(p);
    ASSERT_EQ(pp_profile_new("(", &bad, err, sizeof(err)), -EINVAL);
    ASSERT_TRUE(strstr(err, "regex") != NULL);
}

TEST(speedscope_totals_and_order)
{
    struct pp_profile *p = demo_build(NULL);
    cJSON *doc = demo_write(p, PP_PROFILE_SPEEDSCOPE);
    cJSON *frames = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "shared"), "frames");
    cJSON *profiles = cJSON_GetObjectItem(doc, "profiles"), *prof;
    int total = 0;

    ASSERT_STR_EQ(cJSON_GetObjectItem(doc, "$schema")->valuestring,
                  "https://www.speedscope.app/file-format-schema.json");
    ASSERT_EQ(cJSON_GetArraySize(frames), 4);
    ASSERT_EQ(cJSON_GetArraySize(profiles), 2);
    cJSON_ArrayForEach(prof, profiles)
    {
        cJSON *samples = cJSON_GetObjectItem(prof, "samples");
        cJSON *weights = cJSON_GetObjectItem(prof, "weights"), *w;
        const char *name = cJSON_GetObjectItem(prof, "name")->valuestring;
        int sum = 0;

        ASSERT_STR_EQ(cJSON_GetObjectItem(prof, "type")->valuestring, "sampled");
        ASSERT_EQ(cJSON_GetArraySize(samples), cJSON_GetArraySize(weights));
        cJSON_ArrayForEach(w, weights)
        {
            sum += w->valueint;
        }
        ASSERT_EQ(cJSON_GetObjectItem(prof, "endValue")->valueint, sum);
        total += sum;
        if (strcmp(name, "worker \"a\" (7)") == 0) {
            cJSON *first = cJSON_GetArrayItem(samples, 0);

            ASSERT_EQ(sum, 4);
            /* time order: a (1 ms), b (2 ms), a (3 ms), c (4 ms): four entries */
            ASSERT_EQ(cJSON_GetArraySize(samples), 4);
            /* root first */
            ASSERT_STR_EQ(frame_name(frames, cJSON_GetArrayItem(first, 0)->valueint), "main");
            ASSERT_STR_EQ(frame_name(frames, cJSON_GetArrayItem(first, 1)->valueint),
                          "work(int, char)");
            ASSERT_STR_EQ(frame_name(frames, cJSON_GetArrayItem(first, 2)->valueint), "leaf");
            ASSERT_EQ(cJSON_GetArraySize(cJSON_GetArrayItem(samples, 3)), 2);
        } else {
            ASSERT_STR_EQ(name, "Thread (9)");
            /* two consecutive identical stacks: one entry of weight 2 */
            ASSERT_EQ(cJSON_GetArraySize(samples), 1);
            ASSERT_EQ(sum, 2);
            ASSERT_STR_EQ(
                    frame_name(frames,
                               cJSON_GetArrayItem(cJSON_GetArrayItem(samples, 0), 1)->valueint),
                    "\"quoted\"\n");
        }
    }
    ASSERT_EQ(total, 6);
    cJSON_Delete(doc);
    pp_profile_free(p);
}

TEST(chromium_nests_per_thread)
{
    struct pp_profile *p = demo_build(NULL);
    cJSON *doc = demo_write(p, PP_PROFILE_CHROMIUM), *ev;
    char open7[8][64], open9[8][64];
    int n7 = 0, n9 = 0, begins = 0, meta = 0;
    double last7 = 0, last9 = 0;

    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents"))
    {
        const char *ph = cJSON_GetObjectItem(ev, "ph")->valuestring;
        const char *name = cJSON_GetObjectItem(ev, "name")->valuestring;
        int tid = cJSON_GetObjectItem(ev, "tid")->valueint;
        char(*open)[64] = tid == 7 ? open7 : open9;
        int *n = tid == 7 ? &n7 : &n9;
        double ts, *last = tid == 7 ? &last7 : &last9;

        ASSERT_EQ(cJSON_GetObjectItem(ev, "pid")->valueint, 42);
        if (strcmp(ph, "M") == 0) {
            meta++;
            continue;
        }
        ts = cJSON_GetObjectItem(ev, "ts")->valuedouble;
        ASSERT_TRUE(ts >= *last);
        *last = ts;
        if (strcmp(ph, "B") == 0) {
            ASSERT_TRUE(*n < 8);
            snprintf(open[(*n)++], 64, "%s", name);
            begins++;
        } else {
            ASSERT_STR_EQ(ph, "E");
            ASSERT_TRUE(*n > 0);
            ASSERT_STR_EQ(open[--(*n)], name);
        }
    }
    ASSERT_EQ(meta, 3); /* process and two threads */
    ASSERT_EQ(n7, 0);
    ASSERT_EQ(n9, 0);
    /* thread 7: main, work, leaf open once and stay (samples 1-3 ms share them; b differs only
     * in the address), then leaf closes at 4 ms; thread 9: main and dl once. */
    ASSERT_EQ(begins, 5);
    ASSERT_TRUE(last7 >= 3000.0 && last7 <= 4000.0); /* the last slice ends one interval later */
    cJSON_Delete(doc);
    pp_profile_free(p);
}

TEST(writers_refuse_unnamed_and_failed_output)
{
    static const uint64_t a[] = { 0x3010 };
    struct pp_profile *p;
    char err[128];
    FILE *full;

    ASSERT_OK(pp_profile_new(NULL, &p, err, sizeof(err)));
    ASSERT_OK(pp_profile_add_sample(p, 1, 1, 1, a, 1));
    ASSERT_EQ(pp_profile_write(p, PP_PROFILE_SPEEDSCOPE, stdout, err, sizeof(err)), -EINVAL);
    ASSERT_EQ(pp_profile_write(p, PP_PROFILE_CHROMIUM, stdout, err, sizeof(err)), -EINVAL);
    ASSERT_OK(pp_profile_name_frames(p, demo_namer, NULL));
    full = fopen("/dev/full", "w");
    if (full != NULL) {
        ASSERT_EQ(pp_profile_write(p, PP_PROFILE_SPEEDSCOPE, full, err, sizeof(err)), -EIO);
        fclose(full);
    }
    pp_profile_free(p);
}

TEST(empty_profile_is_valid)
{
    struct pp_profile *p;
    cJSON *doc;
    char err[128];

    ASSERT_OK(pp_profile_new(NULL, &p, err, sizeof(err)));
    ASSERT_OK(pp_profile_name_frames(p, demo_namer, NULL));
    doc = demo_write(p, PP_PROFILE_SPEEDSCOPE);
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "profiles")), 0);
    cJSON_Delete(doc);
    doc = demo_write(p, PP_PROFILE_CHROMIUM);
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "traceEvents")), 1);
    cJSON_Delete(doc);
    pp_profile_free(p);
}

static const struct test_case cases[] = {
    TEST_CASE(builder_interns_and_names),
    TEST_CASE(builder_folds_frames),
    TEST_CASE(speedscope_totals_and_order),
    TEST_CASE(chromium_nests_per_thread),
    TEST_CASE(writers_refuse_unnamed_and_failed_output),
    TEST_CASE(empty_profile_is_valid),
};
TEST_MAIN(cases)
