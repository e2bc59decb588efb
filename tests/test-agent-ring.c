/* tests/test-agent-ring.c - the per-thread SPSC ring of agent/internal.h: full-ring refusal,
 * an idle ring that never reports anything, a ring drained as it fills that stays in its first
 * slot, a discarded ring that stays mapped, and a producer/consumer stress run (run it under
 * -DPP_SANITIZE=thread to check the barrier table). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
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

/* A ring the consumer empties between samples touches one slot, not every slot in turn: 256
 * slots of 1 KB cycled through were 278 KB of every wall-sampled thread's memory. */
TEST(ring_drained_as_it_fills_stays_in_its_first_slot)
{
    struct ag_ring r = { 0 };
    struct ag_sample *s;
    unsigned i, k;

    ASSERT_OK(ag_ring_init(&r, 16, 8));
    for (i = 0; i < 100; i++) {
        /* Up to 3 at a time: the ring's first 3 slots, however many laps. */
        for (k = 0; k <= i % 3; k++) {
            s = ag_ring_reserve(&r);
            ASSERT_TRUE(s != NULL);
            ASSERT_TRUE((unsigned char *)s < r.slots + 3 * r.slot_size);
            s->timestamp_ns = i * 10 + k;
            s->depth = 0;
            ag_ring_commit(&r);
        }
        for (k = 0; k <= i % 3; k++) {
            ASSERT_TRUE(ag_ring_peek(&r) != NULL);
            ASSERT_U64_EQ(ag_ring_peek(&r)->timestamp_ns, i * 10 + k);
            ag_ring_release(&r);
        }
        ASSERT_TRUE(ag_ring_peek(&r) == NULL); /* empty: the consumer moves it to a new lap */
    }
    /* A sample filled while the consumer moved the ring on is moved along and published. */
    s = ag_ring_reserve(&r);
    ASSERT_TRUE(s != NULL);
    s->timestamp_ns = 7;
    s->depth = 2;
    s->frames[0] = 11;
    s->frames[1] = 12;
    ASSERT_OK(ag_ring_reserve(&r) == s ? 0 : -1);
    ag_ring_commit(&r);
    ASSERT_U64_EQ(ag_ring_peek(&r)->frames[1], 12);
    ag_ring_release(&r);
    s = ag_ring_reserve(&r); /* at the second slot of the lap */
    ASSERT_TRUE(s != NULL);
    s->timestamp_ns = 8;
    s->depth = 1;
    s->frames[0] = 13;
    ASSERT_TRUE(ag_ring_peek(&r) == NULL); /* moves the lap on under the producer */
    ag_ring_commit(&r);
    ASSERT_TRUE(ag_ring_peek(&r) == (const struct ag_sample *)(const void *)r.slots);
    ASSERT_U64_EQ(ag_ring_peek(&r)->timestamp_ns, 8);
    ASSERT_U64_EQ(ag_ring_peek(&r)->frames[0], 13);
    ag_ring_release(&r);
    ASSERT_TRUE(ag_ring_peek(&r) == NULL);
    ag_ring_fini(&r);
}

/* A producer may still hold a ring when the agent stops (an interposer paused in a claim):
 * discarding keeps its addresses mapped and writable; a new init of the same size reuses them. */
TEST(ring_discarded_stays_mapped)
{
    struct ag_ring r = { 0 };
    struct ag_sample *s;
    unsigned char *slots;

    ASSERT_OK(ag_ring_init(&r, 16, 8));
    s = ag_ring_reserve(&r);
    ASSERT_TRUE(s != NULL);
    slots = r.slots;
    ag_ring_discard(&r);
    ASSERT_TRUE(r.slots == slots);
    s->depth = 3; /* a stale producer's write: mapped memory (ASan and the kernel agree) */
    ASSERT_TRUE(ag_ring_peek(&r) == NULL);
    ASSERT_OK(ag_ring_init(&r, 8, 8));
    ASSERT_TRUE(r.slots == slots); /* fits in the old mapping */
    ASSERT_TRUE(ag_ring_fits(&r, 8, 8));
    ASSERT_TRUE(!ag_ring_fits(&r, 16, 8));
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
            sched_yield(); /* the consumer may be waiting for this CPU (see below) */
            continue;      /* retry the same sequence number: the consumer checks order */
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
            /* Spinning without a yield, each side waited out the other's time slice on a
             * loaded machine: 200000 samples through 64 slots passed the 60 s timeout under
             * TSan at load 30. */
            sched_yield();
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
    TEST_CASE(ring_drained_as_it_fills_stays_in_its_first_slot),
    TEST_CASE(ring_discarded_stays_mapped),
    TEST_CASE(ring_spsc_stress_keeps_order_and_contents),
};
TEST_MAIN(cases)
