/* SPDX-License-Identifier: MIT */
/*
 * tests/test-nettrace-hostile.c - the reader against broken and lying input: hand-built streams
 * with one defect each (exact reason and byte offset expected), every truncation of a small valid
 * stream, and truncations and byte flips of a real fixture (no crash, an error or a clean end).
 * Inputs sit right before a PROT_NONE page (test_guarded_copy), so any over-read faults.
 */
#include <errno.h>
#include <sys/stat.h>

#include "nettrace/format.h"
#include "nettrace/nettrace.h"
#include "tests/nettrace-bytes.h"
#include "tests/test.h"

/* Offsets inside the stream built by hostile_build(). */
struct hostile_offsets {
    size_t md_object;     /* first byte (tag) of the MetadataBlock object */
    size_t md_size;       /* its block size field */
    size_t md_payload;    /* the metadata record (payload of the metadata event) */
    size_t md_tag;        /* the V5 tag after the field list of the record */
    size_t stack_count;   /* the count field of the StackBlock */
    size_t stack_entry;   /* the size field of the first stack */
    size_t event_object;  /* first byte of the EventBlock object */
    size_t event_size;    /* its block size field */
    size_t event_first;   /* first event (flags byte) */
    size_t event_ts;      /* the timestamp varuint of the first event */
    size_t event_payload; /* payload of the first event */
    size_t sp_object;
    size_t end;
};

enum hostile_variant {
    HV_VALID,
    HV_DUP_STACK,  /* a second StackBlock defines id 1 again */
    HV_STACK_AFTER /* the same, but after an SPBlock: legal */
};

/*
 * A valid V5 stream: Trace, MetadataBlock (id 1 "P"/7 "E", one Int32 field "x", an opcode tag),
 * StackBlock (id 1: two frames), EventBlock (two events, the first with stack 1), SPBlock, end.
 */
static void
hostile_build(struct tb *t, struct hostile_offsets *o, enum hostile_variant v)
{
    struct tb md = { 0 };
    size_t at;

    tb_v4_header(t);
    tb_v4_trace(t, 4242);

    o->md_object = t->n;
    at = tb_v4_block_begin(t, "MetadataBlock");
    o->md_size = at;
    tb_event_block_header(t);
    tb_md_head(&md, 1, "P", 7, "E");
    tb_u32(&md, 1); /* V1 field count */
    tb_u32(&md, NT_TYPE_INT32);
    tb_utf16(&md, "x");
    /* payload of the record starts after: flags, id, ts, size varuints (4 bytes here) */
    o->md_payload = t->n + 4;
    o->md_tag = o->md_payload + md.n;
    tb_u32(&md, 1); /* tag: OpCode, 1 byte */
    tb_u8(&md, NT_METADATA_TAG_OPCODE);
    tb_u8(&md, 9);
    tb_md_event(t, &md);
    tb_v4_block_end(t, at);

    at = tb_v4_block_begin(t, "StackBlock");
    tb_u32(t, 1);
    o->stack_count = t->n;
    tb_u32(t, 1);
    o->stack_entry = t->n;
    tb_u32(t, 16);
    tb_u64(t, 0x1000);
    tb_u64(t, 0x2000);
    tb_v4_block_end(t, at);

    if (v == HV_STACK_AFTER) {
        at = tb_v4_block_begin(t, "SPBlock");
        tb_u64(t, 1500);
        tb_u32(t, 0);
        tb_v4_block_end(t, at);
    }
    if (v != HV_VALID) {
        at = tb_v4_block_begin(t, "StackBlock");
        tb_u32(t, 1);
        tb_u32(t, 1);
        o->stack_entry = t->n;
        tb_u32(t, 8);
        tb_u64(t, 0x3000);
        tb_v4_block_end(t, at);
    }

    o->event_object = t->n;
    at = tb_v4_block_begin(t, "EventBlock");
    o->event_size = at;
    tb_event_block_header(t);
    o->event_first = t->n;
    tb_u8(t, 0xCF); /* metadata, seq/capture/proc, thread, stack, sorted, size */
    tb_var(t, 1);
    tb_var(t, 0); /* seq delta: seq 1 */
    tb_var(t, 100);
    tb_var(t, 3);
    tb_var(t, 200);
    tb_var(t, 1);
    o->event_ts = t->n;
    tb_var(t, 2000);
    tb_var(t, 4);
    o->event_payload = t->n;
    tb_u32(t, 42);
    tb_u8(t, 0x00); /* everything inherited; seq 2 */
    tb_var(t, 10);
    tb_u32(t, 43);
    tb_v4_block_end(t, at);

    o->sp_object = t->n;
    at = tb_v4_block_begin(t, "SPBlock");
    tb_u64(t, 3000);
    tb_u32(t, 1);
    tb_u64(t, 100);
    tb_u32(t, 2);
    tb_v4_block_end(t, at);
    o->end = t->n;
    tb_u8(t, 1);
    tb_free(&md);
}

/* Reads a whole stream from memory. Returns the final status (0 or negative); counts events. */
static int
hostile_read(const uint8_t *p, size_t n, const struct nt_reader_limits *lim,
             struct nt_reader_error *err, uint64_t *events)
{
    struct tb_mem m = { p, n, 0 };
    struct nt_source src = { tb_mem_read, &m };
    struct nt_reader *r = NULL;
    struct nt_event ev;
    int rc;

    *events = 0;
    rc = nt_reader_new(&src, lim, &r);
    while (rc == 0 && (rc = nt_reader_next(r, &ev)) == 1) {
        rc = 0;
        (*events)++;
        if (ev.desc != NULL) {
            char buf[256];

            (void)nt_payload_format(ev.desc, ev.payload, ev.payload_size, buf, sizeof(buf));
        }
    }
    err->offset = 0;
    err->reason = NULL;
    err->truncated = 0;
    if (r != NULL) {
        nt_reader_get_error(r, err);
    }
    nt_reader_free(r);
    return rc;
}

/* Whether the last expect_error() was the input ending early (nt_reader_error.truncated). */
static int last_truncated;

/* Asserts that bytes fail with exactly reason at offset. */
static void
expect_error(const struct tb *t, const struct nt_reader_limits *lim, uint64_t offset,
             const char *reason)
{
    const uint8_t *p = test_guarded_copy(t->b, t->n);
    struct nt_reader_error e;
    uint64_t events;
    int rc = hostile_read(p, t->n, lim, &e, &events);

    ASSERT_EQ(rc, -EBADMSG);
    ASSERT_STR_EQ(e.reason, reason);
    ASSERT_U64_EQ(e.offset, offset);
    last_truncated = e.truncated;
}

TEST(valid_stream_reads)
{
    struct hostile_offsets o;
    struct tb t = { 0 };
    struct tb_mem m;
    struct nt_source src = { tb_mem_read, &m };
    struct nt_reader *r = NULL;
    struct nt_reader_stats st;
    struct nt_event ev;
    const uint8_t *p;

    hostile_build(&t, &o, HV_VALID);
    p = test_guarded_copy(t.b, t.n);
    m = (struct tb_mem){ p, t.n, 0 };
    ASSERT_OK(nt_reader_new(&src, NULL, &r));
    ASSERT_EQ(nt_reader_info(r)->process_id, 4242);
    ASSERT_EQ(nt_reader_next(r, &ev), 1);
    ASSERT_EQ(ev.sequence, 1);
    ASSERT_EQ(ev.stack_depth, 2);
    ASSERT_U64_EQ(ev.stack[0], 0x1000);
    ASSERT_U64_EQ(ev.stack[1], 0x2000);
    ASSERT_EQ(ev.desc->opcode, 9);
    ASSERT_STR_EQ(ev.desc->name, "E");
    ASSERT_EQ(nt_reader_next(r, &ev), 1);
    ASSERT_EQ(ev.sequence, 2);
    ASSERT_U64_EQ(ev.timestamp, 2010);
    ASSERT_EQ(nt_reader_next(r, &ev), 0);
    ASSERT_EQ(nt_reader_next(r, &ev), 0);
    nt_reader_get_stats(r, &st);
    ASSERT_U64_EQ(st.bytes, t.n);
    ASSERT_U64_EQ(st.lost_events, 0);
    nt_reader_free(r);
    tb_free(&t);
}

TEST(bad_magic)
{
    struct hostile_offsets o;
    struct tb t = { 0 };

    hostile_build(&t, &o, HV_VALID);
    t.b[0] = 'X';
    expect_error(&t, NULL, 0, "bad magic: not a nettrace stream");
    ASSERT_EQ(last_truncated, 0); /* malformed, not cut short */
    tb_free(&t);
}

TEST(empty_and_short_header)
{
    struct tb t = { 0 };

    tb_bytes(&t, "Nettr", 5);
    expect_error(&t, NULL, 0, "stream ends inside the stream header");
    tb_free(&t);
}

TEST(every_truncation_is_an_error)
{
    struct hostile_offsets o;
    struct tb t = { 0 };
    size_t n;

    hostile_build(&t, &o, HV_VALID);
    for (n = 0; n < t.n; n++) {
        const uint8_t *p = test_guarded_copy(t.b, n);
        struct nt_reader_error e;
        uint64_t events;
        int rc = hostile_read(p, n, NULL, &e, &events);

        /* every cut is the input ending early, never malformed bytes */
        if (rc != -EBADMSG || e.reason == NULL || e.offset > n || !e.truncated) {
            test_fail(__FILE__, __LINE__, "truncation at %zu: rc %d reason %s offset %llu", n, rc,
                      e.reason != NULL ? e.reason : "(none)", (unsigned long long)e.offset);
        }
    }
    {
        struct tb cut = { 0 };

        tb_bytes(&cut, t.b, t.n - 1);
        expect_error(&cut, NULL, o.end, "stream ends before the end-of-stream tag");
        ASSERT_EQ(last_truncated, 1);
        tb_free(&cut);
    }
    tb_free(&t);
}

TEST(oversized_block_rejected_by_limit)
{
    struct nt_reader_limits lim = { 0 };
    struct hostile_offsets o;
    struct tb t = { 0 };

    hostile_build(&t, &o, HV_VALID);
    lim.max_block_bytes = 16;
    expect_error(&t, &lim, o.md_size, "block larger than the limit");
    tb_free(&t);
}

TEST(lying_block_size)
{
    struct hostile_offsets o;
    struct tb t = { 0 };
    size_t content;

    hostile_build(&t, &o, HV_VALID);
    content = (o.event_size + 4 + 3) / 4 * 4;
    tb_put_u32(&t, o.event_size, 1u << 20); /* within the limit, far past the end */
    expect_error(&t, NULL, content, "stream ends inside a block");
    tb_free(&t);
}

TEST(lying_payload_size)
{
    struct hostile_offsets o;
    struct tb t = { 0 };

    hostile_build(&t, &o, HV_VALID);
    t.b[o.event_payload - 1] = 0x7F; /* payload size 127 > the block */
    expect_error(&t, NULL, o.event_payload, "event runs past the end of its block");
    tb_free(&t);
}

TEST(bad_object_tag)
{
    struct hostile_offsets o;
    struct tb t = { 0 };

    hostile_build(&t, &o, HV_VALID);
    t.b[o.md_object] = 7;
    expect_error(&t, NULL, o.md_object, "expected an object or the end-of-stream tag");
    ASSERT_EQ(last_truncated, 0);
    tb_free(&t);
}

TEST(bad_end_object_tag)
{
    struct hostile_offsets o;
    struct tb t = { 0 };

    hostile_build(&t, &o, HV_VALID);
    t.b[o.event_object - 1] = 5; /* the EndObject of the StackBlock */
    expect_error(&t, NULL, o.event_object - 1, "expected the EndObject tag after a block");
    tb_free(&t);
}

TEST(duplicate_stack_id_in_region)
{
    struct hostile_offsets o;
    struct tb t = { 0 };

    hostile_build(&t, &o, HV_DUP_STACK);
    expect_error(&t, NULL, o.stack_entry, "stack id defined twice in one sequence-point region");
    tb_free(&t);
}

TEST(same_stack_id_after_sequence_point_is_fine)
{
    struct hostile_offsets o;
    struct tb t = { 0 };
    struct nt_reader_error e;
    uint64_t events;

    hostile_build(&t, &o, HV_STACK_AFTER);
    ASSERT_OK(hostile_read(t.b, t.n, NULL, &e, &events));
    ASSERT_EQ(events, 2);
    tb_free(&t);
}

TEST(huge_stack_count)
{
    struct hostile_offsets o;
    struct tb t = { 0 };

    hostile_build(&t, &o, HV_VALID);
    tb_put_u32(&t, o.stack_count, 0xFFFFFFFFu);
    expect_error(&t, NULL, o.stack_count, "stack count exceeds the block");
    tb_free(&t);
}

TEST(stack_size_not_multiple_of_pointer)
{
    struct hostile_offsets o;
    struct tb t = { 0 };

    hostile_build(&t, &o, HV_VALID);
    tb_put_u32(&t, o.stack_entry, 12);
    expect_error(&t, NULL, o.stack_entry, "stack size is not a multiple of the pointer size");
    tb_free(&t);
}

TEST(huge_stack_size)
{
    struct hostile_offsets o;
    struct tb t = { 0 };

    hostile_build(&t, &o, HV_VALID);
    tb_put_u32(&t, o.stack_entry, 0xFFFFFFF8u);
    expect_error(&t, NULL, o.stack_entry + 4, "stack block truncated");
    tb_free(&t);
}

TEST(stack_memory_limit)
{
    struct nt_reader_limits lim = { 0 };
    struct hostile_offsets o;
    struct tb t = { 0 };

    hostile_build(&t, &o, HV_VALID);
    lim.max_stack_bytes = 32;
    expect_error(&t, &lim, o.stack_entry, "stacks exceed the memory limit");
    tb_free(&t);
}

TEST(lying_metadata_tag_size)
{
    struct hostile_offsets o;
    struct tb t = { 0 };

    hostile_build(&t, &o, HV_VALID);
    tb_put_u32(&t, o.md_tag, 0xFFFFFF00u);
    expect_error(&t, NULL, o.md_tag, "metadata tag runs past the record");
    tb_free(&t);
}

TEST(metadata_count_limit)
{
    struct nt_reader_limits lim = { 0 };
    struct hostile_offsets o;
    struct tb t = { 0 };

    hostile_build(&t, &o, HV_VALID);
    lim.max_metadata_bytes = 64;
    expect_error(&t, &lim, o.md_payload, "metadata exceeds the memory limit");
    tb_free(&t);
}

TEST(huge_field_count_means_no_fields)
{
    /* As TraceEvent: an unparsable V1 field list gives an event without fields, not a failure. */
    struct hostile_offsets o;
    struct tb t = { 0 };
    struct tb_mem m;
    struct nt_source src = { tb_mem_read, &m };
    struct nt_reader *r = NULL;
    struct nt_event ev;
    size_t count_at;

    hostile_build(&t, &o, HV_VALID);
    count_at = o.md_tag - 4 - 4 - 4; /* count, type, "x\0" before the tag */
    tb_put_u32(&t, count_at, 0x7FFFFFFFu);
    m = (struct tb_mem){ test_guarded_copy(t.b, t.n), t.n, 0 };
    ASSERT_OK(nt_reader_new(&src, NULL, &r));
    ASSERT_EQ(nt_reader_next(r, &ev), 1);
    ASSERT_TRUE(ev.desc != NULL);
    ASSERT_EQ(ev.desc->field_count, 0);
    ASSERT_EQ(ev.desc->opcode, 0); /* the tags cannot be located after a broken list */
    nt_reader_free(r);
    tb_free(&t);
}

TEST(varuint_too_long)
{
    struct hostile_offsets o;
    struct tb t = { 0 };
    struct tb bad = { 0 };
    size_t i;

    hostile_build(&t, &o, HV_VALID);
    /* Replace the 2-byte timestamp varuint by an 11-byte one (block size fixed up). */
    tb_bytes(&bad, t.b, o.event_ts);
    for (i = 0; i < 10; i++) {
        tb_u8(&bad, 0x80);
    }
    tb_u8(&bad, 0x01);
    tb_bytes(&bad, t.b + o.event_ts + 2, t.n - o.event_ts - 2);
    tb_put_u32(&bad, o.event_size,
               (uint32_t)(t.b[o.event_size] | (t.b[o.event_size + 1] << 8)) + 9);
    expect_error(&bad, NULL, o.event_ts, "varuint64 too long or out of range");
    tb_free(&bad);
    tb_free(&t);
}

enum hostile_long_defect {
    HL_NONE,
    HL_TIMESTAMP_TOO_LONG, /* an 11-byte timestamp varuint */
    HL_STACK_ID_RANGE,     /* a 5-byte stack id varuint above 32 bits */
    HL_STACK_ID_TOO_LONG,  /* a 6-byte stack id varuint of a small value */
    HL_PAYLOAD_PAST_BLOCK, /* a payload size past the end of the block */
};

/*
 * A V5 stream whose EventBlock holds 40 events: the first sets every field, the others carry a
 * timestamp delta and a 4-byte payload. Event 10, far enough from the block's end for the
 * reader's unchecked header decoding, carries the defect; *defect_at is the offset of the field
 * the reader must name.
 */
static void
hostile_build_long(struct tb *t, enum hostile_long_defect defect, size_t *defect_at)
{
    struct tb md = { 0 };
    size_t at;
    int i;

    tb_v4_header(t);
    tb_v4_trace(t, 4242);
    at = tb_v4_block_begin(t, "MetadataBlock");
    tb_event_block_header(t);
    tb_md_head(&md, 1, "P", 7, "E");
    tb_u32(&md, 0); /* no fields */
    tb_md_event(t, &md);
    tb_v4_block_end(t, at);
    at = tb_v4_block_begin(t, "EventBlock");
    tb_event_block_header(t);
    tb_u8(t, 0xC7); /* metadata, seq/capture/proc, thread, sorted, size */
    tb_var(t, 1);
    tb_var(t, 0);
    tb_var(t, 100);
    tb_var(t, 3);
    tb_var(t, 200);
    tb_var(t, 1000);
    tb_var(t, 4);
    tb_u32(t, 0);
    for (i = 1; i < 40; i++) {
        uint8_t flags = 0x00;

        if (i == 10 && (defect == HL_STACK_ID_RANGE || defect == HL_STACK_ID_TOO_LONG)) {
            flags = 0x08;
        } else if (i == 10 && defect == HL_PAYLOAD_PAST_BLOCK) {
            flags = 0x80;
        }
        tb_u8(t, flags);
        if (i == 10) {
            *defect_at = t->n;
        }
        if (defect == HL_STACK_ID_RANGE && flags == 0x08) {
            static const uint8_t above_32_bits[5] = { 0xFF, 0xFF, 0xFF, 0xFF, 0x1F };

            tb_bytes(t, above_32_bits, sizeof(above_32_bits));
        } else if (flags == 0x08) {
            static const uint8_t six_bytes[6] = { 0x81, 0x80, 0x80, 0x80, 0x80, 0x00 };

            tb_bytes(t, six_bytes, sizeof(six_bytes));
        }
        if (i == 10 && defect == HL_TIMESTAMP_TOO_LONG) {
            static const uint8_t eleven[11] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                                0x80, 0x80, 0x80, 0x80, 0x01 };

            tb_bytes(t, eleven, sizeof(eleven));
        } else {
            tb_var(t, 10);
        }
        if (flags == 0x80) {
            tb_var(t, 1000);
            *defect_at = t->n; /* the payload, which the block does not hold */
        }
        tb_u32(t, (uint32_t)i);
    }
    tb_v4_block_end(t, at);
    tb_u8(t, 1);
    tb_free(&md);
}

/*
 * Defects in the middle of a long event block, where the reader decodes headers without a
 * bounds check per field: the same reason and offset as at the end of a block, and every event
 * before the defect returned.
 */
TEST(defects_inside_a_long_block)
{
    static const struct {
        enum hostile_long_defect defect;
        const char *reason;
    } cases[] = {
        { HL_TIMESTAMP_TOO_LONG, "varuint64 too long or out of range" },
        { HL_STACK_ID_RANGE, "varuint32 too long or out of range" },
        { HL_STACK_ID_TOO_LONG, "varuint32 too long or out of range" },
        { HL_PAYLOAD_PAST_BLOCK, "event runs past the end of its block" },
    };
    struct nt_reader_error e;
    uint64_t events;
    size_t defect_at = 0;
    size_t i;
    struct tb t = { 0 };

    hostile_build_long(&t, HL_NONE, &defect_at);
    ASSERT_OK(hostile_read(test_guarded_copy(t.b, t.n), t.n, NULL, &e, &events));
    ASSERT_U64_EQ(events, 40);
    tb_free(&t);
    for (i = 0; i < PP_ARRAY_SIZE(cases); i++) {
        hostile_build_long(&t, cases[i].defect, &defect_at);
        ASSERT_EQ(hostile_read(test_guarded_copy(t.b, t.n), t.n, NULL, &e, &events), -EBADMSG);
        ASSERT_U64_EQ(events, 10);
        ASSERT_STR_EQ(e.reason, cases[i].reason);
        ASSERT_U64_EQ(e.offset, defect_at);
        tb_free(&t);
    }
}

TEST(undefined_stack_id)
{
    struct hostile_offsets o;
    struct tb t = { 0 };

    hostile_build(&t, &o, HV_VALID);
    t.b[o.event_ts - 1] = 5; /* stack id 5 */
    expect_error(&t, NULL, o.event_first, "event refers to an undefined stack id");
    tb_free(&t);
}

TEST(trace_version_and_type_checks)
{
    struct hostile_offsets o;
    struct tb t = { 0 };

    hostile_build(&t, &o, HV_VALID);
    t.b[32 + 3] = 5; /* Trace version 5 */
    expect_error(&t, NULL, 32, "unsupported Trace object version");
    tb_free(&t);

    hostile_build(&t, &o, HV_VALID);
    memcpy(t.b + o.md_object + 15, "Metadata_lock", 13);
    expect_error(&t, NULL, o.md_object, "unknown object type");
    tb_free(&t);

    hostile_build(&t, &o, HV_VALID);
    t.b[o.md_object + 7] = 3; /* minimum reader version 3 */
    expect_error(&t, NULL, o.md_object, "block object needs a newer reader");
    tb_free(&t);

    hostile_build(&t, &o, HV_VALID);
    tb_put_u32(&t, o.md_object + 11, 100000);
    expect_error(&t, NULL, o.md_object + 11, "object type name too long");
    tb_free(&t);
}

TEST(bytes_after_end_tag_are_not_read)
{
    struct hostile_offsets o;
    struct tb t = { 0 };
    struct nt_reader_error e;
    uint64_t events;

    hostile_build(&t, &o, HV_VALID);
    tb_bytes(&t, "garbage", 7);
    ASSERT_OK(hostile_read(t.b, t.n, NULL, &e, &events));
    ASSERT_EQ(events, 2);
    tb_free(&t);
}

/* Truncations and byte flips of a real trace: never a crash, an error or a clean end. */
TEST(fixture_truncations_and_flips)
{
    char path[4096];
    struct stat st;
    uint8_t *data;
    uint8_t *copy;
    size_t n = 0;
    uint64_t seed = 0x9E3779B97F4A7C15ULL;
    unsigned i;

    snprintf(path, sizeof(path), "%s",
             test_source_path("../shared/fixtures/nettrace/"
                              "eventpipe-dotnetcore5.0-win-x64-arraytypes.nettrace"));
    if (stat(path, &st) != 0) {
        test_skip("fixture %s is absent: the shared fixtures are not checked out", path);
    }
    data = test_read_file(path, &n);
    ASSERT_TRUE(data != NULL);
    for (i = 0; i < 300; i++) {
        size_t cut = i < 150 ? i * 7 : (size_t)((n * (uint64_t)(i - 150)) / 150);
        struct nt_reader_error e;
        uint64_t events;
        int rc;

        if (cut >= n) {
            continue;
        }
        rc = hostile_read(test_guarded_copy(data, cut), cut, NULL, &e, &events);
        if (rc != -EBADMSG) {
            test_fail(__FILE__, __LINE__, "truncation at %zu gave %d", cut, rc);
        }
    }
    copy = malloc(n);
    ASSERT_TRUE(copy != NULL);
    for (i = 0; i < 400; i++) {
        struct nt_reader_error e;
        uint64_t events;
        unsigned k;
        int rc;

        memcpy(copy, data, n);
        for (k = 0; k < 1 + i % 4; k++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            /* Half of the flips land in the first 4 KB, where the metadata and headers are. */
            copy[(seed >> 33) % (i % 2 ? n : 4096)] ^= (uint8_t)(1u << ((seed >> 20) & 7));
        }
        rc = hostile_read(test_guarded_copy(copy, n), n, NULL, &e, &events);
        if (rc != 0 && rc != -EBADMSG) {
            test_fail(__FILE__, __LINE__, "flip run %u gave %d", i, rc);
        }
        if (rc == -EBADMSG && (e.reason == NULL || e.offset > n)) {
            test_fail(__FILE__, __LINE__, "flip run %u: no reason or offset past the end", i);
        }
    }
    free(copy);
    free(data);
}

static const struct test_case cases[] = {
    TEST_CASE(valid_stream_reads),
    TEST_CASE(bad_magic),
    TEST_CASE(empty_and_short_header),
    TEST_CASE(every_truncation_is_an_error),
    TEST_CASE(oversized_block_rejected_by_limit),
    TEST_CASE(lying_block_size),
    TEST_CASE(lying_payload_size),
    TEST_CASE(bad_object_tag),
    TEST_CASE(bad_end_object_tag),
    TEST_CASE(duplicate_stack_id_in_region),
    TEST_CASE(same_stack_id_after_sequence_point_is_fine),
    TEST_CASE(huge_stack_count),
    TEST_CASE(stack_size_not_multiple_of_pointer),
    TEST_CASE(huge_stack_size),
    TEST_CASE(stack_memory_limit),
    TEST_CASE(lying_metadata_tag_size),
    TEST_CASE(metadata_count_limit),
    TEST_CASE(huge_field_count_means_no_fields),
    TEST_CASE(varuint_too_long),
    TEST_CASE(defects_inside_a_long_block),
    TEST_CASE(undefined_stack_id),
    TEST_CASE(trace_version_and_type_checks),
    TEST_CASE(bytes_after_end_tag_are_not_read),
    TEST_CASE_TIMEOUT(fixture_truncations_and_flips, 300),
};

TEST_MAIN(cases)
