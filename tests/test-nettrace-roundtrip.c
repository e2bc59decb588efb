/* SPDX-License-Identifier: MIT */
/*
 * tests/test-nettrace-roundtrip.c - randomized sets of events written with the writer and read
 * back with the reader must come back equal: metadata (names, nested fields, arrays, opcode,
 * keywords, level, version), headers, stacks, payloads, sequence numbers and lost counts. Sets
 * include maximal payloads, 100-frame and NT_MAX_STACK_DEPTH stacks, thousands of threads and
 * many sequence-point regions. The seed is printed; PP_SEED=N replays one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nettrace/nettrace.h"
#include "tests/test.h"

struct mem {
    uint8_t *buf;
    size_t len, cap, pos;
};

static int
mem_write(void *ctx, const void *buf, size_t len)
{
    struct mem *m = ctx;

    if (m->len + len > m->cap) {
        size_t cap = (m->len + len) * 2;
        uint8_t *b = realloc(m->buf, cap);

        if (b == NULL) {
            return -ENOMEM;
        }
        m->buf = b;
        m->cap = cap;
    }
    memcpy(m->buf + m->len, buf, len);
    m->len += len;
    return 0;
}

static ssize_t
mem_read(void *ctx, void *buf, size_t len)
{
    struct mem *m = ctx;
    size_t n = m->len - m->pos < len ? m->len - m->pos : len;

    /* Odd short reads exercise the reader's refills at every boundary. */
    if (n > 7 && (m->pos & 1) != 0) {
        n = n / 2 + 1;
    }
    memcpy(buf, m->buf + m->pos, n);
    m->pos += n;
    return (ssize_t)n;
}

static uint64_t rng;

static uint64_t
rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint32_t
rnd_below(uint32_t n)
{
    return n != 0 ? (uint32_t)(rnd() % n) : 0;
}

#define MAX_DESCS  12
#define MAX_FIELDS 6

static const enum nt_type scalar_types[] = {
    NT_TYPE_BOOLEAN, NT_TYPE_CHAR,   NT_TYPE_SBYTE,  NT_TYPE_BYTE,   NT_TYPE_INT16,
    NT_TYPE_UINT16,  NT_TYPE_INT32,  NT_TYPE_UINT32, NT_TYPE_INT64,  NT_TYPE_UINT64,
    NT_TYPE_SINGLE,  NT_TYPE_DOUBLE, NT_TYPE_GUID,   NT_TYPE_STRING, NT_TYPE_DATETIME,
};

static size_t
scalar_size(enum nt_type t)
{
    switch (t) {
    case NT_TYPE_SBYTE:
    case NT_TYPE_BYTE:
        return 1;
    case NT_TYPE_CHAR:
    case NT_TYPE_INT16:
    case NT_TYPE_UINT16:
        return 2;
    case NT_TYPE_BOOLEAN:
    case NT_TYPE_INT32:
    case NT_TYPE_UINT32:
    case NT_TYPE_SINGLE:
        return 4;
    case NT_TYPE_GUID:
        return 16;
    default:
        return 8;
    }
}

struct desc_store {
    struct nt_event_desc desc;
    struct nt_field fields[MAX_FIELDS];
    struct nt_field nested[MAX_FIELDS][3];
    char names[MAX_FIELDS + 4][24];
    uint32_t id;
};

static struct desc_store descs[MAX_DESCS];

static void
make_desc(struct desc_store *d, int index)
{
    uint32_t n = rnd_below(MAX_FIELDS + 1), i, j;

    memset(d, 0, sizeof(*d));
    snprintf(d->names[0], sizeof(d->names[0]), "Test-Provider-%u", rnd_below(3));
    snprintf(d->names[1], sizeof(d->names[1]), index % 4 == 0 ? "" : "Event%dStart", index);
    d->desc.provider = d->names[0];
    d->desc.name = d->names[1];
    d->desc.event_id = (uint32_t)index + 1;
    d->desc.keywords = rnd();
    d->desc.version = rnd_below(4);
    d->desc.level = rnd_below(6);
    d->desc.opcode = (uint8_t)rnd_below(3) * 7; /* 0 (no tag), 7 or 14 */
    for (i = 0; i < n; i++) {
        struct nt_field *f = &d->fields[i];
        uint32_t kind = rnd_below(10);

        snprintf(d->names[i + 2], sizeof(d->names[i + 2]), "Field%u_%u", (unsigned)index, i);
        f->name = d->names[i + 2];
        f->type = scalar_types[rnd_below(PP_ARRAY_SIZE(scalar_types))];
        if (kind == 0) { /* an array of scalars (V2Params) */
            f->element_type = f->type == NT_TYPE_STRING ? NT_TYPE_INT32 : f->type;
            f->type = NT_TYPE_ARRAY;
        } else if (kind == 1) { /* a nested object of 1..3 scalars */
            f->type = NT_TYPE_OBJECT;
            f->field_count = 1 + rnd_below(3);
            f->fields = d->nested[i];
            for (j = 0; j < f->field_count; j++) {
                d->nested[i][j].name = j == 0 ? "A" : (j == 1 ? "B" : "C");
                d->nested[i][j].type = scalar_types[rnd_below(PP_ARRAY_SIZE(scalar_types))];
            }
        }
    }
    d->desc.fields = n != 0 ? d->fields : NULL;
    d->desc.field_count = n;
}

static void
payload_scalar(struct nt_payload *p, enum nt_type t)
{
    uint8_t raw[16];
    size_t k;

    if (t == NT_TYPE_STRING) {
        static const char *const strings[] = { "", "plain", "caf\xc3\xa9 \xe2\x82\xac",
                                               "\xf0\x9f\x98\x80 emoji" };
        nt_payload_string(p, strings[rnd_below(4)]);
        return;
    }
    if (t == NT_TYPE_BOOLEAN) {
        nt_payload_u32(p, rnd_below(2));
        return;
    }
    for (k = 0; k < sizeof(raw); k++) {
        raw[k] = (uint8_t)rnd();
    }
    if (t == NT_TYPE_SINGLE || t == NT_TYPE_DOUBLE) {
        memset(raw, 0x40, sizeof(raw)); /* a finite number: NaN payloads may not survive */
    }
    nt_payload_bytes(p, raw, scalar_size(t));
}

static void
make_payload(const struct desc_store *d, struct nt_payload *p, int maximal)
{
    uint32_t i, j;

    for (i = 0; i < d->desc.field_count; i++) {
        const struct nt_field *f = &d->fields[i];

        if (f->type == NT_TYPE_ARRAY) {
            uint32_t count =
                    maximal ? 60000 / (uint32_t)scalar_size(f->element_type) / 2 : rnd_below(20);

            nt_payload_u16(p, (uint16_t)count);
            for (j = 0; j < count; j++) {
                payload_scalar(p, f->element_type);
            }
        } else if (f->type == NT_TYPE_OBJECT) {
            for (j = 0; j < f->field_count; j++) {
                payload_scalar(p, f->fields[j].type);
            }
        } else {
            payload_scalar(p, f->type);
        }
    }
}

static void
assert_fields_equal(const struct nt_field *a, const struct nt_field *b, uint32_t n)
{
    uint32_t i;

    for (i = 0; i < n; i++) {
        ASSERT_STR_EQ(a[i].name, b[i].name);
        ASSERT_EQ(a[i].type, b[i].type);
        if (a[i].type == NT_TYPE_ARRAY) {
            ASSERT_EQ(a[i].element_type, b[i].element_type);
        }
        ASSERT_EQ(a[i].field_count, b[i].field_count);
        if (a[i].type == NT_TYPE_OBJECT) {
            assert_fields_equal(a[i].fields, b[i].fields, a[i].field_count);
        }
    }
}

struct expect {
    uint32_t desc;
    uint64_t thread, capture, ts;
    uint32_t processor, sequence;
    uint8_t activity[16], related[16];
    uint32_t depth;
    uint64_t *stack;
    uint8_t *payload;
    uint32_t payload_size;
};

static int
count_value(void *ctx, const struct nt_value *v)
{
    (void)v;
    ++*(uint64_t *)ctx;
    return 0;
}

/* One randomized set: writes n events (some maximal, some lost), reads them back, compares. */
static void
roundtrip(uint64_t seed, uint32_t n, uint32_t threads, size_t block_bytes, uint64_t sp_bytes)
{
    struct nt_writer_options opts = { 0 };
    struct mem m = { 0 };
    struct nt_sink sink = { mem_write, &m };
    struct nt_source src = { mem_read, &m };
    struct nt_writer *w = NULL;
    struct nt_reader *r = NULL;
    struct nt_reader_stats rs;
    struct nt_writer_stats ws;
    struct expect *ex = calloc(n, sizeof(*ex));
    /* before: lost before the thread's first event, numbered right after it */
    uint32_t seq[4] = { 0 }, before[4] = { 0 }, i, d, got = 0;
    uint64_t lost = 0, ts = 1000, values = 0;
    static uint64_t stack_pool[8][NT_MAX_STACK_DEPTH];
    static uint8_t buf[NT_MAX_PAYLOAD];
    struct nt_event ev;

    rng = seed | 1;
    ASSERT_TRUE(ex != NULL);
    for (i = 0; i < 8; i++) {
        for (d = 0; d < NT_MAX_STACK_DEPTH; d++) {
            stack_pool[i][d] = 0x400000 + rnd_below(1 << 20);
        }
    }
    opts.process_id = 4242;
    opts.sync_time_ticks = ts;
    opts.block_bytes = block_bytes;
    opts.sequence_point_bytes = sp_bytes;
    ASSERT_OK(nt_writer_new(&opts, &sink, &w));
    for (i = 0; i < MAX_DESCS; i++) {
        make_desc(&descs[i], (int)i);
        ASSERT_OK(nt_writer_define(w, &descs[i].desc, &descs[i].id));
    }
    for (i = 0; i < n; i++) {
        struct expect *e = &ex[i];
        struct nt_payload p;
        uint32_t cap_index = rnd_below(4), pool = rnd_below(8);

        if (rnd_below(50) == 0) { /* a gap in this capture thread's sequence */
            uint32_t k = 1 + rnd_below(5);

            ASSERT_OK(nt_writer_note_lost(w, 100 + cap_index, k));
            *(seq[cap_index] != 0 ? &seq[cap_index] : &before[cap_index]) += k;
            lost += k;
        }
        e->desc = rnd_below(MAX_DESCS);
        nt_payload_init(&p, buf, sizeof(buf));
        make_payload(&descs[e->desc], &p, rnd_below(200) == 0);
        if (p.err == -ENOSPC) {
            nt_payload_init(&p, buf, sizeof(buf));
            make_payload(&descs[e->desc], &p, 0);
        }
        ASSERT_OK(p.err);
        e->payload_size = (uint32_t)p.len;
        e->payload = malloc(p.len + 1);
        memcpy(e->payload, buf, p.len);
        e->thread = 1 + rnd_below(threads);
        e->capture = 100 + cap_index;
        e->processor = rnd_below(3) == 0 ? 0xFFFFFFFFu : rnd_below(64);
        e->ts = ts += 2 + rnd_below(100000);
        if (rnd_below(3) == 0) {
            for (d = 0; d < 16; d++) {
                e->activity[d] = (uint8_t)rnd();
                e->related[d] = (uint8_t)rnd();
            }
        }
        e->depth = rnd_below(4) == 0 ? 0 : 1 + rnd_below(100);
        if (rnd_below(100) == 0) {
            e->depth = NT_MAX_STACK_DEPTH;
        }
        e->stack = stack_pool[pool];
        e->sequence = ++seq[cap_index];
        seq[cap_index] += before[cap_index];
        before[cap_index] = 0;
        memset(&ev, 0, sizeof(ev));
        ev.metadata_id = descs[e->desc].id;
        ev.thread_id = e->thread;
        ev.capture_thread_id = e->capture;
        ev.processor = e->processor;
        ev.timestamp = e->ts;
        memcpy(ev.activity_id, e->activity, 16);
        memcpy(ev.related_activity_id, e->related, 16);
        ev.stack = e->depth != 0 ? e->stack : NULL;
        ev.stack_depth = e->depth;
        ev.payload = e->payload;
        ev.payload_size = e->payload_size;
        ASSERT_OK(nt_writer_write(w, &ev));
    }
    ASSERT_OK(nt_writer_finish(w));
    nt_writer_get_stats(w, &ws);
    nt_writer_free(w);
    ASSERT_U64_EQ(ws.events, n);

    ASSERT_OK(nt_reader_new(&src, NULL, &r));
    ASSERT_EQ(nt_reader_info(r)->process_id, 4242);
    while (nt_reader_next(r, &ev) == 1) {
        const struct expect *e;

        if (got >= n) {
            test_fail(__FILE__, __LINE__, "seed %llu: more events than written",
                      (unsigned long long)seed);
        }
        e = &ex[got++];
        if (ev.desc == NULL || ev.metadata_id != descs[e->desc].id) {
            test_fail(__FILE__, __LINE__, "seed %llu: event %u has the wrong metadata",
                      (unsigned long long)seed, got - 1);
        }
        ASSERT_STR_EQ(ev.desc->provider, descs[e->desc].desc.provider);
        ASSERT_STR_EQ(ev.desc->name, descs[e->desc].desc.name);
        ASSERT_EQ(ev.desc->event_id, descs[e->desc].desc.event_id);
        ASSERT_U64_EQ(ev.desc->keywords, descs[e->desc].desc.keywords);
        ASSERT_EQ(ev.desc->version, descs[e->desc].desc.version);
        ASSERT_EQ(ev.desc->level, descs[e->desc].desc.level);
        ASSERT_EQ(ev.desc->opcode, descs[e->desc].desc.opcode);
        ASSERT_EQ(ev.desc->field_count, descs[e->desc].desc.field_count);
        assert_fields_equal(ev.desc->fields, descs[e->desc].desc.fields,
                            descs[e->desc].desc.field_count);
        ASSERT_U64_EQ(ev.thread_id, e->thread);
        ASSERT_U64_EQ(ev.capture_thread_id, e->capture);
        ASSERT_EQ(ev.processor, e->processor);
        ASSERT_U64_EQ(ev.timestamp, e->ts);
        ASSERT_EQ(ev.sequence, e->sequence);
        ASSERT_MEM_EQ(ev.activity_id, e->activity, 16);
        ASSERT_MEM_EQ(ev.related_activity_id, e->related, 16);
        ASSERT_EQ(ev.stack_depth, e->depth);
        if (e->depth != 0) {
            ASSERT_MEM_EQ(ev.stack, e->stack, e->depth * sizeof(uint64_t));
        }
        ASSERT_EQ(ev.payload_size, e->payload_size);
        ASSERT_MEM_EQ(ev.payload, e->payload, e->payload_size);
        ASSERT_OK(nt_payload_decode(ev.desc, ev.payload, ev.payload_size, count_value, &values));
    }
    nt_reader_get_stats(r, &rs);
    ASSERT_EQ(got, n);
    ASSERT_U64_EQ(rs.events, n);
    ASSERT_U64_EQ(rs.lost_events, lost);
    nt_reader_free(r);
    for (i = 0; i < n; i++) {
        free(ex[i].payload);
    }
    free(ex);
    free(m.buf);
}

static uint64_t
seed_base(void)
{
    const char *s = getenv("PP_SEED");
    uint64_t seed = s != NULL ? strtoull(s, NULL, 10) : (uint64_t)getpid() * 2654435761u;

    printf("# seed %llu (PP_SEED to replay)\n", (unsigned long long)seed);
    return seed;
}

TEST(roundtrip_default_options)
{
    uint64_t seed = seed_base();
    int i;

    for (i = 0; i < 5; i++) {
        roundtrip(seed + (uint64_t)i, 3000, 8, 0, 0);
    }
}

TEST(roundtrip_tiny_blocks_many_sequence_points)
{
    uint64_t seed = seed_base() + 100;
    int i;

    for (i = 0; i < 5; i++) {
        roundtrip(seed + (uint64_t)i, 3000, 8, 512, 8192);
    }
}

TEST(roundtrip_thousands_of_threads)
{
    roundtrip(seed_base() + 200, 20000, 5000, 0, 65536);
}

static const struct test_case cases[] = {
    TEST_CASE(roundtrip_default_options),
    TEST_CASE(roundtrip_tiny_blocks_many_sequence_points),
    TEST_CASE(roundtrip_thousands_of_threads),
};
TEST_MAIN(cases)
