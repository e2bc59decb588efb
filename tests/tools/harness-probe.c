/* SPDX-License-Identifier: MIT */
/*
 * tests/tools/harness-probe.c - cases that leave processes behind on purpose, for
 * tests/harness-reaping.sh, which checks that the unit harness (tests/harness.c) describes and
 * kills every process a case left in its process group, whether the case passed or timed out,
 * and that a failed case's leftovers get their stacks. Not a unit test binary itself: its second
 * case fails by design. Each leftover's pid goes to $HARNESS_PROBE_DIR/NAME.pid.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "test.h"

/* Forks a child that sleeps (in the case's process group) and writes its pid to the probe's
 * file NAME.pid. */
static void
probe_leave_sleeper(const char *name)
{
    const char *dir = getenv("HARNESS_PROBE_DIR");
    char path[4096];
    FILE *f;
    pid_t pid;

    if (dir == NULL) {
        test_fail(__FILE__, __LINE__, "HARNESS_PROBE_DIR is not set");
    }
    pid = fork();
    if (pid < 0) {
        test_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        for (;;) {
            pause(); /* until the harness kills it */
        }
    }
    snprintf(path, sizeof(path), "%s/%s.pid", dir, name);
    f = fopen(path, "we");
    if (f == NULL || fprintf(f, "%d\n", (int)pid) < 0 || fclose(f) != 0) {
        test_fail(__FILE__, __LINE__, "cannot write %s", path);
    }
}

TEST(passes_and_leaves_a_sleeper)
{
    probe_leave_sleeper("passes");
}

TEST(times_out_and_leaves_a_sleeper)
{
    probe_leave_sleeper("times-out");
    for (;;) {
        pause(); /* the case's alarm ends it */
    }
}

static const struct test_case cases[] = {
    TEST_CASE(passes_and_leaves_a_sleeper),
    TEST_CASE_TIMEOUT(times_out_and_leaves_a_sleeper, 2),
};

TEST_MAIN(cases)
