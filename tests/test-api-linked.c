/* SPDX-License-Identifier: MIT */
/*
 * tests/test-api-linked.c - include/pipeprof.h in a program linked with libpipeprof.so:
 * pipeprof_start() records this process into a file, pipeprof_stop() ends it with the rundown,
 * and the file holds ThreadSamples whose stacks `pipeprof report` names, the busy function on
 * top. Also the API's refusals: a second start, a stop without a start, bad options.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "include/pipeprof.h"
#include "tests/test.h"

/* Burns seconds of this thread's CPU time (not of wall time: 0.8 s of it held 19 samples at 250
 * Hz at load 20, the thread on the CPU a tenth of the time). */
__attribute__((noinline)) static unsigned long
api_busy_function(double seconds)
{
    struct timespec t0, t;
    unsigned long x = 1;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do {
        int i;

        for (i = 0; i < 100000; i++) {
            x = x * 6364136223846793005UL + 1442695040888963407UL;
        }
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
    return x;
}

TEST(records_named_stacks_into_a_file)
{
    struct pipeprof_options opts = { PIPEPROF_MODE_CPU, 250 };
    char path[128], cmd[512], line[512];
    int found = 0, samples = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/tmp/pp-api-%d.nettrace", (int)getpid());
    ASSERT_OK(pipeprof_start(&opts, path));
    ASSERT_EQ(pipeprof_start(&opts, path), -EBUSY);
    ASSERT_TRUE(api_busy_function(0.8) != 0);
    ASSERT_OK(pipeprof_stop());
    ASSERT_EQ(pipeprof_stop(), -ESRCH);

    snprintf(cmd, sizeof(cmd), "%s/bin/pipeprof report --top 3 %s",
             getenv("PP_BINARY_DIR") ? getenv("PP_BINARY_DIR") : "build", path);
    f = popen(cmd, "r");
    ASSERT_TRUE(f != NULL);
    while (fgets(line, sizeof(line), f) != NULL) {
        fputs(line, stdout);
        if (sscanf(line, "samples: %d", &samples) == 1) {
            continue;
        }
        if (strstr(line, "!api_busy_function") != NULL) {
            found = 1;
        }
    }
    ASSERT_EQ(pclose(f), 0);
    ASSERT_TRUE(samples >= 20); /* 0.8 s of CPU at a tick-bound rate */
    ASSERT_TRUE(found);
    unlink(path);
}

TEST(rejects_bad_options_and_paths)
{
    struct pipeprof_options bad_mode = { (enum pipeprof_mode)7, 0 };
    struct pipeprof_options bad_hz = { PIPEPROF_MODE_WALL, 5000 };

    ASSERT_EQ(pipeprof_start(&bad_mode, "/tmp/pp-api-bad.nettrace"), -EINVAL);
    ASSERT_EQ(pipeprof_start(&bad_hz, "/tmp/pp-api-bad.nettrace"), -EINVAL);
    ASSERT_EQ(pipeprof_start(NULL, "/nonexistent-dir/x.nettrace"), -ENOENT);
    ASSERT_EQ(pipeprof_stop(), -ESRCH);
}

static const struct test_case cases[] = {
    TEST_CASE(records_named_stacks_into_a_file),
    TEST_CASE(rejects_bad_options_and_paths),
};
TEST_MAIN(cases)
