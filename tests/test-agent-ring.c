/* tests/test-agent-ring.c - the per-thread SPSC ring of agent/internal.h: full-ring refusal,
 * an idle ring that never reports anything, and a producer/consumer stress run (run it under
 * -DPP_SANITIZE=thread to check the barrier table). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "agent/internal.h"
#include "tests/test.h"

TEST(ring_drops_when_full)
{
    struct ag_ring r = { 0 };
    struct ag_sample *s;
    unsigned i;

    ASSERT_OK(ag_ring_init(&r, 16, 8));
    for (i = 0; i < 16; i++) {
        s = ag_ring_reserve(&r);
        ASSERT_TRUE(s != NULL);
        s->depth = i;
        ag_ring_commit(&r);
    }
    ASSERT_TRUE(ag_ring_reserve(&r) == NULL); /* full: the producer must count a drop */
    ASSERT_EQ(ag_ring_peek(&r)->depth, 0);
    ag_ring_release(&r);
    ASSERT_TRUE(ag_ring_reserve(&r) != NULL); /* one slot free again */
    ag_ring_fini(&r);
    ag_ring_fini(&r); /* idempotent */
}

TEST(ring_idle_has_nothing_to_drain)
{
    struct ag_ring r = { 0 };

    ASSERT_TRUE(ag_ring_peek(&r) == NULL); /* unset ring */
    ASSERT_TRUE(ag_ring_reserve(&r) == NULL);
    ASSERT_OK(ag_ring_init(&r, 64, 4));
    ASSERT_TRUE(ag_ring_peek(&r) == NULL);
    ASSERT_TRUE(ag_ring_reserve(&r) != NULL); /* reserved but not committed: still empty */
    ASSERT_TRUE(ag_ring_peek(&r) == NULL);
    ASSERT_EQ(ag_ring_init(&r, 48, 4), -EINVAL);
    ag_ring_fini(&r);
}

#define STRESS_N 200000u

static struct ag_ring stress_ring;
static _Atomic uint64_t stress_drops;

static void *
stress_producer(void *arg)
{
    uint64_t i;

    (void)arg;
    for (i = 0; i < STRESS_N;) {
        struct ag_sample *s = ag_ring_reserve(&stress_ring);
        uint32_t k;

        if (s == NULL) {
            atomic_fetch_add(&stress_drops, 1);
            continue; /* retry the same sequence number: the consumer checks order */
        }
        s->timestamp_ns = i;
        s->depth = 4;
        for (k = 0; k < 4; k++) {
            s->frames[k] = i * 4 + k;
        }
        ag_ring_commit(&stress_ring);
        i++;
    }
    return NULL;
}

TEST(ring_spsc_stress_keeps_order_and_contents)
{
    pthread_t th;
    uint64_t next = 0;

    ASSERT_OK(ag_ring_init(&stress_ring, 64, 4));
    ASSERT_OK(pthread_create(&th, NULL, stress_producer, NULL));
    while (next < STRESS_N) {
        const struct ag_sample *s = ag_ring_peek(&stress_ring);
        uint32_t k;

        if (s == NULL) {
            continue;
        }
        ASSERT_U64_EQ(s->timestamp_ns, next);
        ASSERT_EQ(s->depth, 4);
        for (k = 0; k < 4; k++) {
            ASSERT_U64_EQ(s->frames[k], next * 4 + k);
        }
        ag_ring_release(&stress_ring);
        next++;
    }
    ASSERT_OK(pthread_join(th, NULL));
    ASSERT_TRUE(ag_ring_peek(&stress_ring) == NULL);
    ag_ring_fini(&stress_ring);
}

static const struct test_case cases[] = {
    TEST_CASE(ring_drops_when_full),
    TEST_CASE(ring_idle_has_nothing_to_drain),
    TEST_CASE(ring_spsc_stress_keeps_order_and_contents),
};
TEST_MAIN(cases)
