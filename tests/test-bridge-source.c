/* SPDX-License-Identifier: MIT */
/*
 * tests/test-bridge-source.c - the agent event source's parsing of a session's filter data
 * (mode and rate per session, dotnet-trace's `Provider:keywords:level:key=value;...` syntax),
 * and the EventCounters it writes: the interval, and the runtime's payload shape read back.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bridge/agent-source.h"
#include "bridge/counters.h"
#include "nettrace/nettrace.h"
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

TEST(counters_interval_parse)
{
    uint64_t ns = 7;

    ASSERT_OK(bridge_counters_interval("EventCounterIntervalSec=1", &ns));
    ASSERT_EQ(ns, 1000000000ULL);
    ASSERT_OK(bridge_counters_interval("a=b; EventCounterIntervalSec=0.5;c=d", &ns));
    ASSERT_EQ(ns, 500000000ULL);
    ASSERT_OK(bridge_counters_interval("EventCounterIntervalSec=0.001", &ns));
    ASSERT_EQ(ns, 10000000ULL); /* no faster than the drain */
    ASSERT_OK(bridge_counters_interval("EventCounterIntervalSec=0", &ns));
    ASSERT_EQ(ns, 0);
    ASSERT_OK(bridge_counters_interval(NULL, &ns));
    ASSERT_EQ(ns, 0);
    ASSERT_EQ(bridge_counters_interval("EventCounterIntervalSec=", &ns), -EINVAL);
    ASSERT_EQ(bridge_counters_interval("EventCounterIntervalSec=1s", &ns), -EINVAL);
    ASSERT_EQ(bridge_counters_interval("EventCounterIntervalSec=-1", &ns), -EINVAL);
    ASSERT_EQ(bridge_counters_interval("EventCounterIntervalSec=nan", &ns), -EINVAL);
}

struct counter_seen {
    char names[8][32];
    char types[8][8];
    double values[8];
    int n, depth2;
};

/* Collects Payload.Name, Payload.CounterType and Payload.Mean of each event. */
static int
counter_visit(void *ctx, const struct nt_value *v)
{
    struct counter_seen *c = ctx;
    char *dst = NULL;
    size_t cap = 0, i;

    if (v->depth == 2) {
        c->depth2++;
    }
    if (v->depth != 2 || v->field == NULL || c->n >= 8) {
        return 0;
    }
    if (strcmp(v->field->name, "Name") == 0) {
        dst = c->names[c->n];
        cap = sizeof(c->names[0]);
    } else if (strcmp(v->field->name, "CounterType") == 0) {
        dst = c->types[c->n];
        cap = sizeof(c->types[0]);
    } else if (strcmp(v->field->name, "Mean") == 0) {
        c->values[c->n] = v->f;
    }
    for (i = 0; dst != NULL && i + 1 < cap && i * 2 < v->size; i++) {
        dst[i] = (char)v->data[i * 2]; /* ASCII names */
        dst[i + 1] = '\0';
    }
    return 0;
}

TEST(counters_written_as_the_runtime_writes_them)
{
    struct ipc_provider prov = {
        0, 4, (char *)"System.Runtime", (char *)"EventCounterIntervalSec=0.05", 0, NULL, 0
    };
    struct ipc_session_config cfg = { 1, &prov, 1, 0, 0, 0 };
    struct bridge_counters c;
    struct nt_writer *w = NULL;
    struct nt_reader *r = NULL;
    struct nt_writer_options o;
    struct nt_sink sink;
    struct nt_source src;
    struct nt_event ev;
    struct counter_seen seen;
    char path[] = "/tmp/pp-counters.XXXXXX";
    const char *why = NULL;
    uint64_t t0 = nt_clock_now(), end;
    volatile uint64_t x = 1;
    int fd = mkstemp(path), events = 0;

    ASSERT_TRUE(fd >= 0);
    unlink(path);
    memset(&o, 0, sizeof(o));
    o.process_id = (uint32_t)getpid();
    nt_sink_fd(&sink, &fd);
    ASSERT_OK(nt_writer_new(&o, &sink, &w));
    ASSERT_OK(bridge_counters_start(&c, &cfg, t0, &why));
    ASSERT_EQ(c.interval_ns, 50000000ULL);
    ASSERT_TRUE(c.runtime && !c.pipeprof);
    ASSERT_OK(bridge_counters_drain(&c, w, 1, t0 + 10000000ULL)); /* too early: nothing */
    for (end = t0 + 60000000ULL; nt_clock_now() < end;) {
        x = x * 6364136223846793005ULL + 1; /* CPU time for cpu-usage */
    }
    ASSERT_OK(bridge_counters_drain(&c, w, 1, nt_clock_now()));
    ASSERT_OK(nt_writer_finish(w));
    nt_writer_free(w);

    ASSERT_TRUE(lseek(fd, 0, SEEK_SET) == 0);
    nt_source_fd(&src, &fd);
    ASSERT_OK(nt_reader_new(&src, NULL, &r));
    memset(&seen, 0, sizeof(seen));
    while (nt_reader_next(r, &ev) == 1) {
        if (ev.desc == NULL) {
            continue;
        }
        ASSERT_STR_EQ(ev.desc->provider, "System.Runtime");
        ASSERT_STR_EQ(ev.desc->name, "EventCounters");
        /* One unnamed object holding "Payload", as EventSource writes `new { Payload = p }`. */
        ASSERT_EQ(ev.desc->field_count, 1);
        ASSERT_STR_EQ(ev.desc->fields[0].name, "");
        ASSERT_STR_EQ(ev.desc->fields[0].fields[0].name, "Payload");
        ASSERT_OK(nt_payload_decode(ev.desc, ev.payload, ev.payload_size, counter_visit, &seen));
        seen.n++;
        events++;
    }
    nt_reader_free(r);
    close(fd);
    ASSERT_EQ(events, 2);
    ASSERT_STR_EQ(seen.names[0], "cpu-usage");
    ASSERT_STR_EQ(seen.types[0], "Mean");
    ASSERT_TRUE(seen.values[0] > 0 && seen.values[0] <= 100.0);
    ASSERT_STR_EQ(seen.names[1], "working-set");
    ASSERT_TRUE(seen.values[1] > 0);
    ASSERT_EQ(seen.depth2, 2 * 12); /* every field of CounterPayload, in each event */
}

static const struct test_case cases[] = {
    TEST_CASE(counters_interval_parse),
    TEST_CASE(counters_written_as_the_runtime_writes_them),
    TEST_CASE(filter_sets_mode_and_rate),
    TEST_CASE(filter_rejects_bad_values),
};
TEST_MAIN(cases)
