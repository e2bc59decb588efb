/* SPDX-License-Identifier: MIT */
/*
 * tests/test-bridge-tags.c - an HTTP recording's frame tags (bridge/frame-tags.h): a frame of a
 * sample taken after a module went, inside that module's span, is tagged with the latest such
 * going and named as of it; every other frame is left as it is, so samples with no going under
 * them keep sharing their stacks; nested and overlapping spans each hold their own frames.
 */
#include <errno.h>
#include <stdint.h>

#include "bridge/frame-tags.h"
#include "tests/test.h"

#define LIB   0x7f0000001000ull /* one library's code, then another's at the same address */
#define OTHER 0x7f0000900000ull /* code no module went from */

TEST(frames_before_any_going_are_not_tagged)
{
    struct bridge_tags t = { 0 };
    uint64_t frames[2] = { LIB + 0x10, OTHER }, out[2];

    ASSERT_TRUE(bridge_tags_apply(&t, 100, frames, 2, out) == frames);
    ASSERT_OK(bridge_tags_add(&t, LIB, LIB + 0x1000, 200));
    ASSERT_TRUE(bridge_tags_apply(&t, 199, frames, 2, out) == frames);
    bridge_tags_fini(&t);
}

TEST(a_frame_after_a_going_is_named_as_of_the_latest_going_under_it)
{
    struct bridge_tags t = { 0 };
    uint64_t frames[3] = { LIB + 0x10, OTHER, LIB + 0x1000 }, out[3], ts = 1;
    const uint64_t *got;

    ASSERT_OK(bridge_tags_add(&t, LIB, LIB + 0x1000, 200));              /* liba went */
    ASSERT_OK(bridge_tags_add(&t, OTHER + 0x8000, OTHER + 0x9000, 250)); /* elsewhere */
    ASSERT_OK(bridge_tags_add(&t, LIB, LIB + 0x1000, 300));              /* libb went */
    got = bridge_tags_apply(&t, 250, frames, 3, out);
    ASSERT_TRUE(got == out);
    ASSERT_U64_EQ(bridge_tags_address(&t, got[0], &ts), LIB + 0x10);
    ASSERT_U64_EQ(ts, 200); /* after liba: named as of its going (libb's code) */
    ASSERT_U64_EQ(got[1], OTHER);
    /* a return address at the span's end calls from inside it (looked up at ip - 1) */
    ts = 1;
    ASSERT_U64_EQ(bridge_tags_address(&t, got[2], &ts), LIB + 0x1000);
    ASSERT_U64_EQ(ts, 200);
    got = bridge_tags_apply(&t, 300, frames, 3, out);
    ASSERT_U64_EQ(bridge_tags_address(&t, got[0], &ts), LIB + 0x10);
    ASSERT_U64_EQ(ts, 300); /* after libb too */
    /* the leaf at the span's end is past it */
    frames[0] = LIB + 0x1000;
    got = bridge_tags_apply(&t, 300, frames, 1, out);
    ASSERT_TRUE(got == frames);
    ts = 7;
    ASSERT_U64_EQ(bridge_tags_address(&t, OTHER, &ts), OTHER);
    ASSERT_U64_EQ(ts, 7); /* untagged: the caller's time stays */
    bridge_tags_fini(&t);
}

/* The tag of frame (a leaf) in a sample at ts, 0 for none. */
static uint64_t
tag_of(const struct bridge_tags *t, uint64_t ts, uint64_t frame)
{
    uint64_t out[1];

    return bridge_tags_apply(t, ts, &frame, 1, out)[0] >> BRIDGE_TAG_ADDR_BITS;
}

TEST(overlapping_and_nested_spans_find_the_latest_going_that_held_the_frame)
{
    struct bridge_tags t = { 0 };

    ASSERT_OK(bridge_tags_add(&t, 0x1000, 0x9000, 10)); /* tag 1: a big one */
    ASSERT_OK(bridge_tags_add(&t, 0x5000, 0x6000, 11)); /* tag 2: inside it */
    ASSERT_OK(bridge_tags_add(&t, 0x2000, 0x3000, 12)); /* tag 3: inside it, lower */
    ASSERT_OK(bridge_tags_add(&t, 0xa000, 0xb000, 13)); /* tag 4: apart */
    ASSERT_OK(bridge_tags_add(&t, 0x5000, 0x6000, 14)); /* tag 5: at tag 2's address again */
    ASSERT_OK(bridge_tags_add(&t, 0x7000, 0x7000, 15)); /* empty: ignored */
    ASSERT_EQ(t.gone_count, 5);
    ASSERT_U64_EQ(tag_of(&t, 9, 0x5800), 0);  /* before any going */
    ASSERT_U64_EQ(tag_of(&t, 10, 0x5800), 1); /* the big one went, nothing else yet */
    ASSERT_U64_EQ(tag_of(&t, 11, 0x5800), 2);
    ASSERT_U64_EQ(tag_of(&t, 13, 0x5800), 2);
    ASSERT_U64_EQ(tag_of(&t, 20, 0x5800), 5);
    ASSERT_U64_EQ(tag_of(&t, 20, 0x8fff), 1); /* only the big one held it */
    ASSERT_U64_EQ(tag_of(&t, 20, 0x2fff), 3);
    ASSERT_U64_EQ(tag_of(&t, 20, 0x9000), 0); /* between the spans */
    ASSERT_U64_EQ(tag_of(&t, 20, 0xa000), 4);
    ASSERT_U64_EQ(tag_of(&t, 20, 0xb000), 0); /* past every span */
    ASSERT_U64_EQ(tag_of(&t, 20, 0xfff), 0);  /* below every span */
    bridge_tags_fini(&t);
}

static const struct test_case cases[] = {
    TEST_CASE(frames_before_any_going_are_not_tagged),
    TEST_CASE(a_frame_after_a_going_is_named_as_of_the_latest_going_under_it),
    TEST_CASE(overlapping_and_nested_spans_find_the_latest_going_that_held_the_frame),
};
TEST_MAIN(cases)
