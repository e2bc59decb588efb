/* tests/test-agent-config.c - PIPEPROF_* parsing of agent/config.c: defaults, accepted forms,
 * and a clear -EINVAL for every invalid value. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "tests/test.h"

TEST(config_defaults_without_env)
{
    struct ag_config c;
    char err[256];

    ag_config_init(&c);
    ASSERT_OK(ag_config_from_env(&c, err, sizeof(err)));
    ASSERT_EQ(c.mode, AG_MODE_CPU);
    ASSERT_EQ(c.hz, 99);
    ASSERT_EQ(c.signo, SIGPROF);
    ASSERT_EQ(c.ring_slots, 256);
    ASSERT_EQ(c.disabled, 0);
    ASSERT_STR_EQ(err, "");
}

TEST(config_accepts_valid_values)
{
    struct ag_config c;
    char err[256];

    setenv("PIPEPROF_MODE", "WALL", 1);
    setenv("PIPEPROF_HZ", "1000", 1);
    setenv("PIPEPROF_SIGNAL", "SIGRTMIN+3", 1);
    setenv("PIPEPROF_RING_SLOTS", "1024", 1);
    setenv("PIPEPROF_LOG_LEVEL", "debug", 1);
    setenv("PIPEPROF_DISABLE", "1", 1);
    setenv("PIPEPROF_MAX_FRAMES", "32", 1);
    ag_config_init(&c);
    ASSERT_OK(ag_config_from_env(&c, err, sizeof(err)));
    ASSERT_EQ(c.mode, AG_MODE_WALL);
    ASSERT_EQ(c.hz, 1000);
    ASSERT_EQ(c.signo, SIGRTMIN + 3);
    ASSERT_EQ(c.ring_slots, 1024);
    ASSERT_EQ(c.log_level, AG_LOG_DEBUG);
    ASSERT_EQ(c.disabled, 1);
    ASSERT_EQ(c.max_frames, 32);
    setenv("PIPEPROF_SIGNAL", "usr2", 1);
    ASSERT_OK(ag_config_from_env(&c, err, sizeof(err)));
    ASSERT_EQ(c.signo, SIGUSR2);
    setenv("PIPEPROF_SIGNAL", "27", 1);
    ASSERT_OK(ag_config_from_env(&c, err, sizeof(err)));
    ASSERT_EQ(c.signo, 27);
    ASSERT_EQ(c.cpu_engine, AG_CPU_ENGINE_AUTO); /* the default */
    setenv("PIPEPROF_CPU_ENGINE", "Timer", 1);
    ASSERT_OK(ag_config_from_env(&c, err, sizeof(err)));
    ASSERT_EQ(c.cpu_engine, AG_CPU_ENGINE_TIMER);
    setenv("PIPEPROF_CPU_ENGINE", "perf", 1);
    ASSERT_OK(ag_config_from_env(&c, err, sizeof(err)));
    ASSERT_EQ(c.cpu_engine, AG_CPU_ENGINE_PERF);
    setenv("PIPEPROF_CPU_ENGINE", "perf-ring", 1);
    ASSERT_OK(ag_config_from_env(&c, NULL, 0));
    ASSERT_EQ(c.cpu_engine, AG_CPU_ENGINE_PERF_RING);
    unsetenv("PIPEPROF_CPU_ENGINE");
}

/* Each bad value fails with -EINVAL and a message that names the variable. */
static void
config_expect_invalid(const char *name, const char *value)
{
    struct ag_config c;
    char err[256];

    setenv(name, value, 1);
    ag_config_init(&c);
    ASSERT_EQ(ag_config_from_env(&c, err, sizeof(err)), -EINVAL);
    if (strstr(err, name) == NULL) {
        test_fail(__FILE__, __LINE__, "message \"%s\" does not name %s", err, name);
    }
    unsetenv(name);
}

TEST(config_rejects_invalid_values)
{
    config_expect_invalid("PIPEPROF_MODE", "cpu2");
    config_expect_invalid("PIPEPROF_HZ", "0");
    config_expect_invalid("PIPEPROF_HZ", "1001");
    config_expect_invalid("PIPEPROF_HZ", "-5");
    config_expect_invalid("PIPEPROF_HZ", "99hz");
    config_expect_invalid("PIPEPROF_HZ", "");
    config_expect_invalid("PIPEPROF_HZ", "99999999999999999999999");
    config_expect_invalid("PIPEPROF_SIGNAL", "SIGSEGV");
    config_expect_invalid("PIPEPROF_SIGNAL", "9");
    config_expect_invalid("PIPEPROF_SIGNAL", "RTMIN+99");
    config_expect_invalid("PIPEPROF_SIGNAL", "bogus");
    config_expect_invalid("PIPEPROF_RING_SLOTS", "100");
    config_expect_invalid("PIPEPROF_RING_SLOTS", "8");
    config_expect_invalid("PIPEPROF_LOG_LEVEL", "loud");
    config_expect_invalid("PIPEPROF_DISABLE", "maybe");
    config_expect_invalid("PIPEPROF_MAX_FRAMES", "1");
    config_expect_invalid("PIPEPROF_MAX_THREADS", "0");
    config_expect_invalid("PIPEPROF_CPU_ENGINE", "hrtimer");
}

TEST(config_error_is_truncated_safely)
{
    struct ag_config c;
    char err[8];

    setenv("PIPEPROF_MODE", "nonsense", 1);
    ag_config_init(&c);
    ASSERT_EQ(ag_config_from_env(&c, err, sizeof(err)), -EINVAL);
    ASSERT_EQ(strlen(err), 7);
    ASSERT_EQ(ag_config_from_env(&c, NULL, 0), -EINVAL);
}

static const struct test_case cases[] = {
    TEST_CASE(config_defaults_without_env),
    TEST_CASE(config_accepts_valid_values),
    TEST_CASE(config_rejects_invalid_values),
    TEST_CASE(config_error_is_truncated_safely),
};
TEST_MAIN(cases)
