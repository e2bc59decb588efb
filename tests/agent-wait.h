/* SPDX-License-Identifier: MIT */
/*
 * tests/agent-wait.h - waits on the agent's registry, for the cases whose threads must be
 * registered (or have their timer or perf event armed) before they go on: the condition itself,
 * not a fixed sleep that a loaded machine's late scan can outlast.
 */
#ifndef PP_TESTS_AGENT_WAIT_H
#define PP_TESTS_AGENT_WAIT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "agent/internal.h"
#include "tests/test.h"

/* How long a wait goes on before it fails: the suite's timeout; a case's alarm comes first. */
#define TEST_AGENT_WAIT_MS 600000u

/* 1 when the registry has thread tid active and, with armed, its timer or perf event armed. */
static inline int
test_agent_has_thread(int32_t tid, int armed)
{
    unsigned k, high;
    int found = 0;

    pthread_mutex_lock(&ag.reg_lock);
    high = atomic_load(&ag.high);
    for (k = 0; tid != 0 && k < high && k < ag.cfg.max_threads && !found; k++) {
        found = atomic_load(&ag.threads[k].tid) == tid &&
                atomic_load(&ag.threads[k].state) == AG_SLOT_ACTIVE &&
                (!armed || ag.threads[k].has_timer || ag.threads[k].has_perf);
    }
    pthread_mutex_unlock(&ag.reg_lock);
    return found;
}

/* Waits until the thread whose id *tid says (0 until it runs and stores it) is registered, with
 * armed its timer or perf event armed too. Returns 0, or -ETIMEDOUT after TEST_AGENT_WAIT_MS. */
static inline int
test_agent_wait_thread(const _Atomic int32_t *tid, int armed)
{
    uint64_t end = test_ms_now() + TEST_AGENT_WAIT_MS;

    while (!test_agent_has_thread(atomic_load(tid), armed)) {
        if (test_ms_now() > end) {
            return -ETIMEDOUT;
        }
        usleep(2000);
    }
    return 0;
}

#endif
