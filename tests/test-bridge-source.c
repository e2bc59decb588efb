/* SPDX-License-Identifier: MIT */
/*
 * tests/test-bridge-source.c - the agent event source's parsing of a session's filter data
 * (mode and rate per session, dotnet-trace's `Provider:keywords:level:key=value;...` syntax).
 */
#include <errno.h>

#include "bridge/agent-source.h"
#include "tests/test.h"

TEST(filter_sets_mode_and_rate)
{
    enum ag_mode mode = AG_MODE_CPU;
    unsigned hz = 99;
    const char *why = NULL;

    ASSERT_OK(bridge_filter_parse("mode=wall;hz=250", &mode, &hz, &why));
    ASSERT_EQ(mode, AG_MODE_WALL);
    ASSERT_EQ(hz, 250);
    ASSERT_OK(bridge_filter_parse("Mode=\"cpu\";other=1", &mode, &hz, &why));
    ASSERT_EQ(mode, AG_MODE_CPU);
    ASSERT_EQ(hz, 250);
    ASSERT_OK(bridge_filter_parse("", &mode, &hz, &why));
    ASSERT_OK(bridge_filter_parse(NULL, &mode, &hz, &why));
}

TEST(filter_rejects_bad_values)
{
    enum ag_mode mode = AG_MODE_CPU;
    unsigned hz = 99;
    const char *why = NULL;

    ASSERT_EQ(bridge_filter_parse("mode=both", &mode, &hz, &why), -EINVAL);
    ASSERT_STR_EQ(why, "mode must be cpu or wall");
    ASSERT_EQ(bridge_filter_parse("hz=0", &mode, &hz, &why), -EINVAL);
    ASSERT_EQ(bridge_filter_parse("hz=1001", &mode, &hz, &why), -EINVAL);
    ASSERT_EQ(bridge_filter_parse("hz=12abc", &mode, &hz, &why), -EINVAL);
    ASSERT_STR_EQ(why, "hz must be a number from 1 to 1000");
    ASSERT_EQ(hz, 99);
}

static const struct test_case cases[] = {
    TEST_CASE(filter_sets_mode_and_rate),
    TEST_CASE(filter_rejects_bad_values),
};
TEST_MAIN(cases)
