/* SPDX-License-Identifier: MIT */
/*
 * tests/test-nettrace-reader.c - the reader on hand-built streams: compressed-header arithmetic
 * (wrap-around deltas, inherited fields), lost events from sequence gaps and sequence points,
 * the per-region stack cache, V5 metadata tags (OpCode, V2Params arrays, unknown tags), the V4
 * uncompressed form, a V6 stream (threads, label lists, metadata, SP flags, remove-thread),
 * generic payload decoding and formatting of every type code, UTF-16 conversion, pipes, and a
 * writer -> reader round trip.
 */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nettrace/format.h"
#include "nettrace/nettrace.h"
#include "tests/nettrace-bytes.h"
#include "tests/test.h"

static struct nt_reader *
open_mem(const struct tb *t, struct tb_mem *m, size_t chunk)
{
    struct nt_source src;
    struct nt_reader *r = NULL;
    int rc;

    *m = (struct tb_mem){ test_guarded_copy(t->b, t->n), t->n, chunk };
    src.read = tb_mem_read;
    src.ctx = m;
    rc = nt_reader_new(&src, NULL, &r);
    if (rc != 0) {
        struct nt_reader_error e = { 0, NULL, 0 };

        if (r != NULL) {
            nt_reader_get_error(r, &e);
        }
        test_fail(__FILE__, __LINE__, "nt_reader_new: %d at %llu: %s", rc,
                  (unsigned long long)e.offset, e.reason ? e.reason : "-");
    }
    return r;
}

static int
next_or_fail(struct nt_reader *r, struct nt_event *ev)
{
    int rc = nt_reader_next(r, ev);

    if (rc < 0) {
        struct nt_reader_error e;

        nt_reader_get_error(r, &e);
        test_fail(__FILE__, __LINE__, "nt_reader_next: %d at %llu: %s", rc,
                  (unsigned long long)e.offset, e.reason ? e.reason : "-");
    }
    return rc;
}

/* Metadata block with one record: id, provider "Prov", event id, name, no fields. */
static void
add_md_block(struct tb *t, uint32_t id, uint32_t event_id, const char *name)
{
    struct tb md = { 0 };
    size_t at = tb_v4_block_begin(t, "MetadataBlock");

    tb_event_block_header(t);
    tb_md_head(&md, id, "Prov", event_id, name);
    tb_md_event(t, &md);
    tb_v4_block_end(t, at);
    tb_free(&md);
}

static void
add_sp(struct tb *t, size_t n, const uint64_t *tids, const uint32_t *seqs)
{
    size_t at = tb_v4_block_begin(t, "SPBlock");
    size_t i;

    tb_u64(t, 0);
    tb_u32(t, (uint32_t)n);
    for (i = 0; i < n; i++) {
        tb_u64(t, tids[i]);
        tb_u32(t, seqs[i]);
    }
    tb_v4_block_end(t, at);
}

TEST(compressed_header_wraps_and_inherits)
{
    struct tb t = { 0 };
    struct tb_mem m;
    struct nt_reader *r;
    struct nt_event ev;
    size_t at;

    tb_v4_header(&t);
    tb_v4_trace(&t, 1);
    add_md_block(&t, 3, 11, "Ev");
    at = tb_v4_block_begin(&t, "EventBlock");
    tb_event_block_header(&t);
    /* seq delta 0xFFFFFFFF from 0: seq 0 + 0xFFFFFFFF + 1 = 0; processor 0xFFFFFFFF */
    tb_u8(&t, 0x01 | 0x02 | 0x04 | 0x80);
    tb_var(&t, 3);
    tb_var(&t, 0xFFFFFFFFu);
    tb_var(&t, 77);
    tb_var(&t, 0xFFFFFFFFu);
    tb_var(&t, 88);
    tb_var(&t, 5000);
    tb_var(&t, 0);
    /* timestamp delta 2^64 - 5: the timestamp goes back by 5 (another capture thread) */
    tb_u8(&t, 0x00);
    tb_var(&t, UINT64_MAX - 4);
    /* activity ids, new thread, sorted, payload size 2 */
    tb_u8(&t, 0x04 | 0x10 | 0x20 | 0x40 | 0x80);
    tb_var(&t, 99);
    tb_var(&t, 1);
    tb_bytes(&t, "AAAAAAAAAAAAAAAA", 16);
    tb_bytes(&t, "BBBBBBBBBBBBBBBB", 16);
    tb_var(&t, 2);
    tb_u16(&t, 0xBEEF);
    tb_v4_block_end(&t, at);
    tb_u8(&t, 1);

    r = open_mem(&t, &m, 0);
    ASSERT_EQ(next_or_fail(r, &ev), 1);
    ASSERT_EQ(ev.metadata_id, 3);
    ASSERT_EQ(ev.sequence, 0);
    ASSERT_U64_EQ(ev.capture_thread_id, 77);
    ASSERT_U64_EQ(ev.processor, 0xFFFFFFFFu);
    ASSERT_U64_EQ(ev.thread_id, 88);
    ASSERT_U64_EQ(ev.timestamp, 5000);
    ASSERT_EQ(ev.is_sorted, 0);
    ASSERT_STR_EQ(ev.desc->name, "Ev");
    ASSERT_EQ(ev.desc->event_id, 11);
    ASSERT_EQ(next_or_fail(r, &ev), 1);
    ASSERT_EQ(ev.sequence, 1); /* metadata id != 0: +1 */
    ASSERT_U64_EQ(ev.timestamp, 4995);
    ASSERT_U64_EQ(ev.thread_id, 88);
    ASSERT_EQ(ev.payload_size, 0);
    ASSERT_EQ(next_or_fail(r, &ev), 1);
    ASSERT_U64_EQ(ev.thread_id, 99);
    ASSERT_U64_EQ(ev.timestamp, 4996);
    ASSERT_EQ(ev.is_sorted, 1);
    ASSERT_MEM_EQ(ev.activity_id, "AAAAAAAAAAAAAAAA", 16);
    ASSERT_MEM_EQ(ev.related_activity_id, "BBBBBBBBBBBBBBBB", 16);
    ASSERT_EQ(ev.payload_size, 2);
    ASSERT_EQ(ev.payload[0], 0xEF);
    ASSERT_EQ(next_or_fail(r, &ev), 0);
    nt_reader_free(r);
    tb_free(&t);
}

/* One compressed event of capture thread tid with sequence seq (absolute, via a delta). */
static void
add_seq_event(struct tb *t, uint32_t *prev_seq, uint64_t tid, uint32_t seq)
{
    tb_u8(t, 0x01 | 0x02 | 0x80);
    tb_var(t, 1);
    tb_var(t, (uint32_t)(seq - *prev_seq - 1));
    tb_var(t, tid);
    tb_var(t, 0);
    tb_var(t, 10);
    tb_var(t, 0);
    *prev_seq = seq;
}

TEST(lost_events_from_gaps_and_sequence_points)
{
    struct tb t = { 0 };
    struct tb_mem m;
    struct nt_reader *r;
    struct nt_reader_stats st;
    struct nt_event ev;
    uint32_t prev = 0;
    size_t at;
    int n = 0;
    static const uint64_t sp_tids[3] = { 100, 101, 102 };
    static const uint32_t sp_seqs[3] = { 9, 10, 7 };

    tb_v4_header(&t);
    tb_v4_trace(&t, 1);
    add_md_block(&t, 1, 1, "");
    at = tb_v4_block_begin(&t, "EventBlock");
    tb_event_block_header(&t);
    add_seq_event(&t, &prev, 100, 1);
    add_seq_event(&t, &prev, 100, 5);  /* 2, 3, 4 lost */
    add_seq_event(&t, &prev, 101, 10); /* new thread: nothing lost */
    add_seq_event(&t, &prev, 100, 6);
    tb_v4_block_end(&t, at);
    /* SP: 100 attempted up to 9 (3 more lost), 101 nothing new, 102 never seen: its 7 events
     * were all lost (the case sequence points exist for) */
    add_sp(&t, 3, sp_tids, sp_seqs);
    at = tb_v4_block_begin(&t, "EventBlock");
    tb_event_block_header(&t);
    prev = 0;
    add_seq_event(&t, &prev, 102, 9); /* 102 was at 7: 8 lost */
    tb_v4_block_end(&t, at);
    tb_u8(&t, 1);

    r = open_mem(&t, &m, 3);
    while (next_or_fail(r, &ev) == 1) {
        n++;
    }
    nt_reader_get_stats(r, &st);
    ASSERT_EQ(n, 5);
    ASSERT_U64_EQ(st.lost_events, 3 + 3 + 7 + 1);
    ASSERT_U64_EQ(st.sequence_points, 1);
    nt_reader_free(r);
    tb_free(&t);
}

static void
add_stack_block(struct tb *t, uint32_t first, uint64_t ip)
{
    size_t at = tb_v4_block_begin(t, "StackBlock");

    tb_u32(t, first);
    tb_u32(t, 2);
    tb_u32(t, 8);
    tb_u64(t, ip);
    tb_u32(t, 0); /* an empty stack, as the runtime interns it */
    tb_v4_block_end(t, at);
}

static void
add_stack_event(struct tb *t, uint32_t stack_id)
{
    size_t at = tb_v4_block_begin(t, "EventBlock");

    tb_event_block_header(t);
    tb_u8(t, 0x01 | 0x08 | 0x80);
    tb_var(t, 1);
    tb_var(t, stack_id);
    tb_var(t, 1);
    tb_var(t, 0);
    tb_v4_block_end(t, at);
}

TEST(stacks_live_for_one_sequence_point_region)
{
    struct tb t = { 0 };
    struct tb_mem m;
    struct nt_reader *r;
    struct nt_reader_error e;
    struct nt_event ev;

    tb_v4_header(&t);
    tb_v4_trace(&t, 1);
    add_md_block(&t, 1, 1, "");
    add_stack_block(&t, 1, 0xAAAA);
    add_stack_event(&t, 1);
    add_stack_event(&t, 2);
    add_sp(&t, 0, NULL, NULL);
    add_stack_block(&t, 1, 0xBBBB); /* ids restart after the SP */
    add_stack_event(&t, 1);
    add_sp(&t, 0, NULL, NULL);
    add_stack_event(&t, 1); /* no stack block in this region */
    tb_u8(&t, 1);

    r = open_mem(&t, &m, 0);
    ASSERT_EQ(next_or_fail(r, &ev), 1);
    ASSERT_EQ(ev.stack_depth, 1);
    ASSERT_U64_EQ(ev.stack[0], 0xAAAA);
    ASSERT_EQ(next_or_fail(r, &ev), 1);
    ASSERT_EQ(ev.stack_id, 2);
    ASSERT_EQ(ev.stack_depth, 0);
    ASSERT_EQ(next_or_fail(r, &ev), 1);
    ASSERT_U64_EQ(ev.stack[0], 0xBBBB);
    ASSERT_EQ(nt_reader_next(r, &ev), -EBADMSG);
    nt_reader_get_error(r, &e);
    ASSERT_STR_EQ(e.reason, "event refers to an undefined stack id");
    ASSERT_EQ(nt_reader_next(r, &ev), -EBADMSG); /* sticky */
    nt_reader_free(r);
    tb_free(&t);
}

/* What one event of fast_path_block() must read back as. */
struct fp_event {
    uint64_t capture;
    uint32_t seq;
    uint64_t thread;
    uint64_t timestamp;
    uint32_t stack_id;
    uint32_t payload_size;
};

#define FP_EVENTS 90

/* A value whose LEB128 takes len bytes (1 to 10), the largest such for odd len. */
static uint64_t
fp_value_of_length(unsigned len, unsigned salt)
{
    uint64_t low = len == 1 ? 0 : 1ULL << (7 * (len - 1));
    uint64_t high = len == 10 ? UINT64_MAX : (1ULL << (7 * len)) - 1;

    return salt % 2 != 0 ? high : low + salt;
}

/* One compressed event with the fields e has and flags says, the header state in *prev. */
static void
fp_add_event(struct tb *t, struct fp_event *prev, const struct fp_event *e, uint8_t flags)
{
    tb_u8(t, flags);
    if (flags & 0x01) {
        tb_var(t, 1);
    }
    if (flags & 0x02) {
        tb_var(t, (uint32_t)(e->seq - prev->seq - 1));
        tb_var(t, e->capture);
        tb_var(t, 0);
    }
    if (flags & 0x04) {
        tb_var(t, e->thread);
    }
    if (flags & 0x08) {
        tb_var(t, e->stack_id);
    }
    tb_var(t, e->timestamp - prev->timestamp);
    if (flags & 0x80) {
        tb_var(t, e->payload_size);
    }
    for (uint32_t k = 0; k < e->payload_size; k++) {
        tb_u8(t, (uint8_t)(e->seq + k));
    }
    *prev = *e;
}

/*
 * One EventBlock of FP_EVENTS events, long enough for the reader's own path for the common
 * event: thread ids, timestamp deltas and payload sizes of every LEB128 length, stack ids dense
 * (1-3), sparse (10, 11: the map), repeated and none, and capture threads 100 and 101 taking
 * turns (101 new in the middle). *want gets what each event must read back as.
 */
static void
fast_path_block(struct tb *t, struct fp_event *want)
{
    static const uint32_t stack_ids[] = { 1, 2, 3, 10, 10, 11, 0, 3, 11, 11, 1 };
    struct fp_event prev = { 0 };
    uint32_t seq[2] = { 0, 0 };
    size_t at = tb_v4_block_begin(t, "EventBlock");
    unsigned i;

    tb_event_block_header(t);
    for (i = 0; i < FP_EVENTS; i++) {
        struct fp_event *e = &want[i];
        unsigned who = i >= 30 && i < 60 ? 1 : 0;
        uint8_t flags = 0x04 | 0x08;

        *e = prev;
        e->capture = 100 + who;
        e->seq = ++seq[who];
        e->thread = fp_value_of_length(1 + i % 10, i);
        e->timestamp += fp_value_of_length(1 + (i / 10) % 9, i + 1);
        e->stack_id = stack_ids[i % PP_ARRAY_SIZE(stack_ids)];
        if (i % 7 == 0) {
            e->payload_size = i % 2 != 0 ? 130 : 3; /* a 2-byte size, then a 1-byte one */
            flags |= 0x80;
        }
        if (i == 0) {
            flags |= 0x01;
        }
        if (i == 0 || i == 30 || i == 60) {
            flags |= 0x02;
        }
        flags |= i % 3 == 0 ? 0x40 : 0;
        fp_add_event(t, &prev, e, flags);
    }
    tb_v4_block_end(t, at);
}

/* A stack block of count one-frame stacks from first on; frame: 0x1000 + id. */
static void
fp_stack_block(struct tb *t, uint32_t first, uint32_t count)
{
    size_t at = tb_v4_block_begin(t, "StackBlock");

    tb_u32(t, first);
    tb_u32(t, count);
    for (uint32_t id = first; id < first + count; id++) {
        tb_u32(t, 8);
        tb_u64(t, 0x1000 + id);
    }
    tb_v4_block_end(t, at);
}

/*
 * The common event inside a long block, where the reader decodes without a bounds check per
 * field and without a lookup (nt_reader_next()'s own path): every field as written, whatever
 * its length, and no event counted lost when the capture thread changes inside the block (the
 * sequence numbers go to the thread the events belong to; a sequence point then agrees).
 */
TEST(every_field_length_inside_a_long_block)
{
    static const uint64_t sp_tids[2] = { 100, 101 };
    static const uint32_t sp_seqs[2] = { 60, 30 };
    static const size_t chunks[] = { 0, 5, 100 };
    struct fp_event want[FP_EVENTS];
    struct tb t = { 0 };
    size_t c;

    tb_v4_header(&t);
    tb_v4_trace(&t, 1);
    add_md_block(&t, 1, 1, "");
    fp_stack_block(&t, 1, 3);
    fp_stack_block(&t, 10, 2);
    fast_path_block(&t, want);
    add_sp(&t, 2, sp_tids, sp_seqs);
    tb_u8(&t, 1);
    for (c = 0; c < PP_ARRAY_SIZE(chunks); c++) {
        struct nt_reader_stats st;
        struct nt_event ev;
        struct tb_mem m;
        struct nt_reader *r = open_mem(&t, &m, chunks[c]);
        unsigned i;

        for (i = 0; i < FP_EVENTS; i++) {
            const struct fp_event *e = &want[i];

            ASSERT_EQ(next_or_fail(r, &ev), 1);
            ASSERT_EQ(ev.metadata_id, 1);
            ASSERT_U64_EQ(ev.capture_thread_id, e->capture);
            ASSERT_EQ(ev.sequence, e->seq);
            ASSERT_U64_EQ(ev.thread_id, e->thread);
            ASSERT_U64_EQ(ev.timestamp, e->timestamp);
            ASSERT_EQ(ev.is_sorted, i % 3 == 0);
            ASSERT_EQ(ev.stack_id, e->stack_id);
            ASSERT_EQ(ev.stack_depth, e->stack_id != 0);
            if (e->stack_id != 0) {
                ASSERT_U64_EQ(ev.stack[0], 0x1000 + e->stack_id);
            } else {
                ASSERT_TRUE(ev.stack == NULL);
            }
            ASSERT_EQ(ev.payload_size, e->payload_size);
            if (e->payload_size != 0) {
                ASSERT_EQ(ev.payload[0], (uint8_t)e->seq);
                ASSERT_EQ(ev.payload[e->payload_size - 1], (uint8_t)(e->seq + e->payload_size - 1));
            }
        }
        ASSERT_EQ(next_or_fail(r, &ev), 0);
        nt_reader_get_stats(r, &st);
        ASSERT_U64_EQ(st.events, FP_EVENTS);
        ASSERT_U64_EQ(st.lost_events, 0);
        nt_reader_free(r);
    }
    tb_free(&t);
}

/* V5 metadata with an opcode tag, an unknown tag and V2Params (arrays, a nested object). */
TEST(v5_metadata_tags_and_arrays)
{
    struct tb t = { 0 };
    struct tb md = { 0 };
    struct tb p2 = { 0 };
    struct tb f = { 0 };
    struct tb_mem m;
    struct nt_reader *r;
    struct nt_event ev;
    char text[256];
    size_t at;

    tb_md_head(&md, 5, "TestEventSource0", 6, "TestEvent2");
    tb_u32(&md, 0); /* V1: no fields (V2Params follows) */
    tb_u32(&md, 1);
    tb_u8(&md, NT_METADATA_TAG_OPCODE);
    tb_u8(&md, 24);
    tb_u32(&md, 3);
    tb_u8(&md, 77); /* unknown tag: skipped */
    tb_bytes(&md, "xyz", 3);
    /* V2Params: 3 fields */
    tb_u32(&p2, 3);
    /* arg0: Int32 */
    tb_utf16(&f, "arg0");
    tb_u32(&f, NT_TYPE_INT32);
    tb_u32(&p2, (uint32_t)f.n + 4);
    tb_bytes(&p2, f.b, f.n);
    tb_free(&f);
    /* arg1: Array of Int32 */
    tb_utf16(&f, "arg1");
    tb_u32(&f, NT_TYPE_ARRAY);
    tb_u32(&f, NT_TYPE_INT32);
    tb_u32(&p2, (uint32_t)f.n + 4);
    tb_bytes(&p2, f.b, f.n);
    tb_free(&f);
    /* arg2: Array of Object { a: UInt16, s: String } */
    tb_utf16(&f, "arg2");
    tb_u32(&f, NT_TYPE_ARRAY);
    tb_u32(&f, NT_TYPE_OBJECT);
    tb_u32(&f, 2);
    tb_u32(&f, 4 + 4 + 4);
    tb_utf16(&f, "a");
    tb_u32(&f, NT_TYPE_UINT16);
    tb_u32(&f, 4 + 4 + 4);
    tb_utf16(&f, "s");
    tb_u32(&f, NT_TYPE_STRING);
    tb_u32(&p2, (uint32_t)f.n + 4);
    tb_bytes(&p2, f.b, f.n);
    tb_free(&f);
    tb_u32(&md, (uint32_t)p2.n);
    tb_u8(&md, NT_METADATA_TAG_V2_PARAMS);
    tb_bytes(&md, p2.b, p2.n);

    tb_v4_header(&t);
    tb_v4_trace(&t, 1);
    at = tb_v4_block_begin(&t, "MetadataBlock");
    tb_event_block_header(&t);
    tb_md_event(&t, &md);
    tb_v4_block_end(&t, at);
    at = tb_v4_block_begin(&t, "EventBlock");
    tb_event_block_header(&t);
    tb_u8(&t, 0x01 | 0x80);
    tb_var(&t, 5);
    tb_var(&t, 0);
    tb_var(&t, 4 + 2 + 8 + 2 + 2 + 6 + 2 + 2);
    tb_u32(&t, (uint32_t)-1001479330);
    tb_u16(&t, 2);
    tb_u32(&t, 1);
    tb_u32(&t, (uint32_t)-2);
    tb_u16(&t, 2);
    tb_u16(&t, 7);
    tb_utf16(&t, "hi");
    tb_u16(&t, 8);
    tb_utf16(&t, "");
    tb_v4_block_end(&t, at);
    tb_u8(&t, 1);

    r = open_mem(&t, &m, 1);
    ASSERT_EQ(next_or_fail(r, &ev), 1);
    ASSERT_EQ(ev.desc->opcode, 24);
    ASSERT_EQ(ev.desc->field_count, 3);
    ASSERT_EQ(ev.desc->fields[1].type, NT_TYPE_ARRAY);
    ASSERT_EQ(ev.desc->fields[1].element_type, NT_TYPE_INT32);
    ASSERT_EQ(ev.desc->fields[2].element_type, NT_TYPE_OBJECT);
    ASSERT_EQ(ev.desc->fields[2].field_count, 2);
    ASSERT_STR_EQ(ev.desc->fields[2].fields[1].name, "s");
    ASSERT_EQ(nt_payload_format(ev.desc, ev.payload, ev.payload_size, text, sizeof(text)),
              (int)strlen("arg0=-1001479330 arg1=[1,-2] arg2=[{a=7,s=\"hi\"},{a=8,s=\"\"}]"));
    ASSERT_STR_EQ(text, "arg0=-1001479330 arg1=[1,-2] arg2=[{a=7,s=\"hi\"},{a=8,s=\"\"}]");
    ASSERT_EQ(next_or_fail(r, &ev), 0);
    nt_reader_free(r);
    tb_free(&t);
    tb_free(&md);
    tb_free(&p2);
}

TEST(v4_uncompressed_events)
{
    struct tb t = { 0 };
    struct tb_mem m;
    struct nt_reader *r;
    struct nt_event ev;
    size_t at;

    tb_v4_header(&t);
    tb_v4_trace(&t, 1);
    add_md_block(&t, 2, 1, "U");
    at = tb_v4_block_begin(&t, "EventBlock");
    tb_u16(&t, 20);
    tb_u16(&t, 0); /* not compressed */
    tb_u64(&t, 0);
    tb_u64(&t, 0);
    tb_u32(&t, 4 + 4 + 8 + 8 + 4 + 4 + 8 + 32 + 4 + 3 + 1); /* EventSize, with padding */
    tb_u32(&t, 2 | 0x80000000u);                            /* not sorted */
    tb_u32(&t, 7);
    tb_u64(&t, 1234);
    tb_u64(&t, 1000);
    tb_u32(&t, 2);
    tb_u32(&t, 0);
    tb_u64(&t, 999);
    tb_bytes(&t, "AAAAAAAAAAAAAAAABBBBBBBBBBBBBBBB", 32);
    tb_u32(&t, 3);
    tb_bytes(&t, "xyz", 3);
    tb_u8(&t, 0);
    tb_v4_block_end(&t, at);
    tb_u8(&t, 1);

    r = open_mem(&t, &m, 0);
    ASSERT_EQ(next_or_fail(r, &ev), 1);
    ASSERT_EQ(ev.metadata_id, 2);
    ASSERT_EQ(ev.is_sorted, 0);
    ASSERT_EQ(ev.sequence, 7);
    ASSERT_U64_EQ(ev.thread_id, 1234);
    ASSERT_U64_EQ(ev.capture_thread_id, 1000);
    ASSERT_U64_EQ(ev.timestamp, 999);
    ASSERT_EQ(ev.payload_size, 3);
    ASSERT_MEM_EQ(ev.payload, "xyz", 3);
    ASSERT_EQ(next_or_fail(r, &ev), 0);
    nt_reader_free(r);
    tb_free(&t);
}

/* A V6 stream in the shape one-collect writes. */
static void
build_v6(struct tb *t)
{
    struct tb b = { 0 };
    struct tb row = { 0 };

    tb_bytes(t, "Nettrace", 8);
    tb_u32(t, 0);
    tb_u32(t, 6);
    tb_u32(t, 0);
    /* Trace block */
    {
        static const uint16_t st[8] = { 2025, 1, 3, 2, 10, 0, 0, 0 };
        int i;

        for (i = 0; i < 8; i++) {
            tb_u16(&b, st[i]);
        }
        tb_u64(&b, 100);
        tb_u64(&b, 1000000000);
        tb_u32(&b, 8);
        tb_u32(&b, 2);
        tb_str6(&b, "ProcessId");
        tb_str6(&b, "31337");
        tb_str6(&b, "HardwareThreadCount");
        tb_str6(&b, "12");
        tb_v6_block(t, NT_V6_TRACE, &b);
        tb_free(&b);
    }
    /* Metadata block: id 1 "Universal.Events"/0 "cpu" with Value: VarUInt, Name: String */
    tb_u16(&b, 0);
    tb_var(&row, 1);
    tb_str6(&row, "Universal.Events");
    tb_var(&row, 0);
    tb_str6(&row, "cpu");
    tb_u16(&row, 2);
    tb_u16(&row, 1 + 5 + 1);
    tb_str6(&row, "Value");
    tb_u8(&row, NT_TYPE_VARUINT);
    tb_u16(&row, 1 + 4 + 1);
    tb_str6(&row, "Name");
    tb_u8(&row, NT_TYPE_STRING);
    tb_u16(&row, 2 + 2);
    tb_u8(&row, 8); /* level 2 */
    tb_u8(&row, 2);
    tb_u8(&row, 1); /* opcode 5 */
    tb_u8(&row, 5);
    tb_u16(&b, (uint16_t)row.n);
    tb_bytes(&b, row.b, row.n);
    tb_free(&row);
    tb_v6_block(t, NT_V6_METADATA, &b);
    tb_free(&b);
    /* SP (flag 1) with no threads, then stack, thread, label blocks, as one-collect flushes */
    tb_u64(&b, 0);
    tb_u32(&b, 1);
    tb_u32(&b, 0);
    tb_v6_block(t, NT_V6_SEQUENCE_POINT, &b);
    tb_free(&b);
    tb_u32(&b, 1);
    tb_u32(&b, 1);
    tb_u32(&b, 16);
    tb_u64(&b, 0x401000);
    tb_u64(&b, 0x402000);
    tb_v6_block(t, NT_V6_STACK, &b);
    tb_free(&b);
    /* threads: index 0 (tid 0), index 1 (tid 4321, name), index 2 (tid 5000) */
    {
        static const uint64_t idx[3] = { 0, 1, 2 }, tid[3] = { 0, 4321, 5000 };
        int i;

        for (i = 0; i < 3; i++) {
            tb_var(&row, idx[i]);
            tb_u8(&row, 3);
            tb_var(&row, tid[i]);
            if (i == 1) {
                tb_u8(&row, 1);
                tb_str6(&row, "worker");
            }
            tb_u16(&b, (uint16_t)row.n);
            tb_bytes(&b, row.b, row.n);
            tb_free(&row);
        }
        tb_v6_block(t, NT_V6_THREAD, &b);
        tb_free(&b);
    }
    tb_u32(&b, 1);
    tb_u32(&b, 1);
    tb_u8(&b, 0x80 | 1);
    tb_bytes(&b, "CCCCCCCCCCCCCCCC", 16);
    tb_v6_block(t, NT_V6_LABEL_LIST, &b);
    tb_free(&b);
    /* an unknown block kind: skipped */
    tb_bytes(&b, "future", 6);
    tb_v6_block(t, 42, &b);
    tb_free(&b);
    /* events: capture index 2 seq 1 and 3 (one lost), thread index 1, stack 1, label 1 */
    tb_u16(&b, 20);
    tb_u16(&b, 1);
    tb_u64(&b, 0);
    tb_u64(&b, 0);
    tb_u8(&b, 0xDF);
    tb_var(&b, 1);
    tb_var(&b, 0);
    tb_var(&b, 2);
    tb_var(&b, 7);
    tb_var(&b, 1);
    tb_var(&b, 1);
    tb_var(&b, 1100);
    tb_var(&b, 1);
    tb_var(&b, 2 + 4);
    tb_var(&b, 300);
    tb_u16(&b, 'o');
    tb_u16(&b, 0);
    tb_u8(&b, 0x02 | 0x40);
    tb_var(&b, 0); /* seq 1 + 0 + 1 = 2 */
    tb_var(&b, 2);
    tb_var(&b, 7);
    tb_var(&b, 5);
    tb_var(&b, 200);
    tb_u16(&b, 'p');
    tb_u16(&b, 0);
    tb_u8(&b, 0x02);
    tb_var(&b, 1); /* seq 2 + 1 + 1 = 4: 3 lost */
    tb_var(&b, 2);
    tb_var(&b, 7);
    tb_var(&b, 5);
    tb_var(&b, 201);
    tb_u16(&b, 'q');
    tb_u16(&b, 0);
    tb_v6_block(t, NT_V6_EVENT, &b);
    tb_free(&b);
    /* remove thread 2 at seq 6: 2 more lost */
    tb_var(&b, 2);
    tb_var(&b, 6);
    tb_v6_block(t, NT_V6_REMOVE_THREAD, &b);
    tb_free(&b);
    /* SP with flag 2: metadata flushed */
    tb_u64(&b, 2000);
    tb_u32(&b, 2);
    tb_u32(&b, 0);
    tb_v6_block(t, NT_V6_SEQUENCE_POINT, &b);
    tb_free(&b);
    tb_u32(t, 0); /* EndOfStream */
}

TEST(v6_stream)
{
    struct tb t = { 0 };
    struct tb_mem m;
    struct nt_reader *r;
    struct nt_reader_stats st;
    struct nt_event ev;
    char text[128];

    build_v6(&t);
    r = open_mem(&t, &m, 5);
    ASSERT_EQ(nt_reader_info(r)->format_version, 6);
    ASSERT_EQ(nt_reader_info(r)->process_id, 31337);
    ASSERT_EQ(nt_reader_info(r)->number_of_processors, 12);
    ASSERT_U64_EQ(nt_reader_info(r)->sync_time_ticks, 100);
    ASSERT_EQ(next_or_fail(r, &ev), 1);
    ASSERT_STR_EQ(ev.desc->provider, "Universal.Events");
    ASSERT_STR_EQ(ev.desc->name, "cpu");
    ASSERT_EQ(ev.desc->level, 2);
    ASSERT_EQ(ev.desc->opcode, 5);
    ASSERT_U64_EQ(ev.thread_id, 4321);
    ASSERT_U64_EQ(ev.capture_thread_id, 5000);
    ASSERT_EQ(ev.processor, 7);
    ASSERT_EQ(ev.sequence, 1);
    ASSERT_EQ(ev.stack_depth, 2);
    ASSERT_U64_EQ(ev.stack[1], 0x402000);
    ASSERT_MEM_EQ(ev.activity_id, "CCCCCCCCCCCCCCCC", 16);
    ASSERT_TRUE(nt_payload_format(ev.desc, ev.payload, ev.payload_size, text, sizeof(text)) > 0);
    ASSERT_STR_EQ(text, "Value=300 Name=\"o\"");
    ASSERT_EQ(next_or_fail(r, &ev), 1);
    ASSERT_EQ(ev.sequence, 2);
    ASSERT_EQ(ev.is_sorted, 1);
    ASSERT_EQ(next_or_fail(r, &ev), 1);
    ASSERT_EQ(ev.sequence, 4);
    ASSERT_EQ(next_or_fail(r, &ev), 0);
    nt_reader_get_stats(r, &st);
    ASSERT_U64_EQ(st.events, 3);
    ASSERT_U64_EQ(st.lost_events, 1 + 2);
    ASSERT_U64_EQ(st.sequence_points, 2);
    ASSERT_TRUE(nt_reader_metadata(r, 1) == NULL); /* flushed by the SP's flag 2 */
    nt_reader_free(r);
    tb_free(&t);
}

TEST(v6_undeclared_thread_index)
{
    struct tb t = { 0 };
    struct tb_mem m;
    struct nt_reader *r;
    struct nt_reader_error e;
    struct nt_event ev;
    size_t i;

    build_v6(&t);
    /* Rename thread index 2 in the thread block to 9: the events then name an unknown index. */
    for (i = 0; i + 3 < t.n; i++) {
        if (t.b[i] == 2 && t.b[i + 1] == 3 && t.b[i + 2] == 0x88 && t.b[i + 3] == 0x27) {
            t.b[i] = 9;
            break;
        }
    }
    ASSERT_TRUE(i + 3 < t.n);
    r = open_mem(&t, &m, 0);
    ASSERT_EQ(nt_reader_next(r, &ev), -EBADMSG);
    nt_reader_get_error(r, &e);
    ASSERT_STR_EQ(e.reason, "event refers to an undeclared thread index");
    nt_reader_free(r);
    tb_free(&t);
}

/* ------------------------------------------------------------------------------------------ */
/* Payload decoding                                                                           */
/* ------------------------------------------------------------------------------------------ */

struct collected {
    char line[1024];
    size_t n;
};

static int
collect_value(void *ctx, const struct nt_value *v)
{
    struct collected *c = ctx;

    c->n += (size_t)snprintf(c->line + c->n, sizeof(c->line) - c->n, "%s:%d:%u:%u;", v->field->name,
                             (int)v->type, v->depth, v->count);
    return 0;
}

TEST(decode_and_format_every_type)
{
    static const struct nt_field pt[2] = {
        { "X", NT_TYPE_INT16, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "Y", NT_TYPE_BYTE, NT_TYPE_EMPTY, NULL, 0, 0 },
    };
    static const struct nt_field fields[] = {
        { "b", NT_TYPE_BOOLEAN, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "c", NT_TYPE_CHAR, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "sb", NT_TYPE_SBYTE, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "by", NT_TYPE_BYTE, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "i16", NT_TYPE_INT16, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "u16", NT_TYPE_UINT16, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "i32", NT_TYPE_INT32, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "u32", NT_TYPE_UINT32, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "i64", NT_TYPE_INT64, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "u64", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "f", NT_TYPE_SINGLE, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "d", NT_TYPE_DOUBLE, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "dec", NT_TYPE_DECIMAL, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "dt", NT_TYPE_DATETIME, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "g", NT_TYPE_GUID, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "s", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "pt", NT_TYPE_OBJECT, NT_TYPE_EMPTY, pt, 2, 0 },
        { "arr", NT_TYPE_ARRAY, NT_TYPE_UINT32, NULL, 0, 0 },
        { "vi", NT_TYPE_VARINT, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "vu", NT_TYPE_VARUINT, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "fx", NT_TYPE_FIXED_ARRAY, NT_TYPE_OBJECT, pt, 2, 2 },
        { "u8", NT_TYPE_UTF8_CODE_UNIT, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "rl", NT_TYPE_RELLOC, NT_TYPE_UINT16, NULL, 0, 0 },
        { "dl", NT_TYPE_DATALOC, NT_TYPE_BYTE, NULL, 0, 0 },
        { "b8", NT_TYPE_BOOLEAN8, NT_TYPE_EMPTY, NULL, 0, 0 },
    };
    static const uint8_t guid[16] = { 0x44, 0x0d, 0x53, 0x3c, 0xae, 0x97, 0x3a, 0x51,
                                      0x1e, 0x6d, 0x78, 0x3e, 0x8f, 0x8e, 0x03, 0xa9 };
    struct nt_event_desc desc = { 0 };
    struct collected col = { { 0 }, 0 };
    struct tb p = { 0 };
    char text[1024];
    char small[16];
    const uint8_t *g;
    double d = -2.5;
    float f = 0.1f;
    uint64_t bits;
    uint32_t fb;
    size_t rl_at;
    int n;
    uint32_t k;

    desc.fields = fields;
    desc.field_count = PP_ARRAY_SIZE(fields);
    tb_u32(&p, 1);
    tb_u16(&p, 'Z');
    tb_u8(&p, 0xFF);
    tb_u8(&p, 200);
    tb_u16(&p, (uint16_t)-300);
    tb_u16(&p, 60000);
    tb_u32(&p, (uint32_t)-70000);
    tb_u32(&p, 4000000000u);
    tb_u64(&p, (uint64_t)-5);
    tb_u64(&p, UINT64_MAX);
    memcpy(&fb, &f, 4);
    tb_u32(&p, fb);
    memcpy(&bits, &d, 8);
    tb_u64(&p, bits);
    /* decimal -123.45: flags (scale 2, negative), hi 0, lo 12345, mid 0 */
    tb_u32(&p, 0x80020000u);
    tb_u32(&p, 0);
    tb_u32(&p, 12345);
    tb_u32(&p, 0);
    tb_u64(&p, 132677057059020000ULL); /* 2021-06-09T09:48:25.9020000Z */
    tb_bytes(&p, guid, 16);
    tb_u16(&p, 'a');
    tb_u16(&p, '"');
    tb_u16(&p, 0x00E9); /* é */
    tb_u16(&p, 0xD83D); /* U+1F600 as a surrogate pair */
    tb_u16(&p, 0xDE00);
    tb_u16(&p, 0);
    tb_u16(&p, (uint16_t)-1); /* pt.X */
    tb_u8(&p, 9);
    tb_u16(&p, 3);
    tb_u32(&p, 1);
    tb_u32(&p, 2);
    tb_u32(&p, 3);
    tb_var(&p, 3); /* zig-zag: -2 */
    tb_var(&p, 1u << 20);
    tb_u16(&p, 1);
    tb_u8(&p, 2);
    tb_u16(&p, 3);
    tb_u8(&p, 4);
    tb_u8(&p, 'k');
    rl_at = p.n;
    tb_u32(&p, (4u << 16) | 5u); /* 4 bytes, 5 bytes after this field */
    tb_u32(&p, (2u << 16) | (uint32_t)(rl_at + 13));
    tb_u8(&p, 0);   /* b8 */
    tb_u16(&p, 10); /* RelLoc data at rl_at + 4 + 5 */
    tb_u16(&p, 11);
    tb_u8(&p, 0xAB); /* DataLoc data */
    tb_u8(&p, 0xCD);

    g = test_guarded_copy(p.b, p.n);
    n = nt_payload_format(&desc, g, (uint32_t)p.n, text, sizeof(text));
    ASSERT_STR_EQ(text, "b=true c=\"Z\" sb=-1 by=200 i16=-300 u16=60000 i32=-70000 u32=4000000000 "
                        "i64=-5 u64=18446744073709551615 f=0.1 d=-2.5 dec=-123.45 "
                        "dt=2021-06-09T09:48:25.9020000Z g=3c530d44-97ae-513a-1e6d-783e8f8e03a9 "
                        "s=\"a\\\"\xC3\xA9\xF0\x9F\x98\x80\" pt={X=-1,Y=9} arr=[1,2,3] vi=-2 "
                        "vu=1048576 fx=[{X=1,Y=2},{X=3,Y=4}] u8=\"k\" rl=[10,11] dl=[171,205] "
                        "b8=false");
    ASSERT_EQ(n, (int)strlen(text));
    /* snprintf semantics: the full length is returned, the output is cut and terminated */
    ASSERT_EQ(nt_payload_format(&desc, g, (uint32_t)p.n, small, sizeof(small)), n);
    ASSERT_EQ(strlen(small), sizeof(small) - 1);
    ASSERT_OK(nt_payload_decode(&desc, g, (uint32_t)p.n, collect_value, &col));
    ASSERT_TRUE(strstr(col.line, "pt:1:0:2;X:7:1:0;Y:6:1:0;arr:19:0:3;arr:10:1:0;") != NULL);
    /* every shorter payload is refused (the DataLoc data is last), never over-read */
    for (k = 0; k < p.n; k++) {
        const uint8_t *cut = test_guarded_copy(p.b, k);

        ASSERT_EQ(nt_payload_decode(&desc, cut, (uint32_t)k, NULL, NULL), -EBADMSG);
        ASSERT_EQ(nt_payload_format(&desc, cut, (uint32_t)k, text, sizeof(text)), -EBADMSG);
    }
    tb_free(&p);
}

/* Nested arrays of empty objects take no payload bytes: the walk must still stay bounded. */
TEST(decode_work_is_bounded)
{
    static const struct nt_field none[1] = { { "z", NT_TYPE_OBJECT, NT_TYPE_EMPTY, NULL, 0, 0 } };
    static const struct nt_field l3[1] = { { "c", NT_TYPE_FIXED_ARRAY, NT_TYPE_OBJECT, none, 0,
                                             65535 } };
    static const struct nt_field l2[1] = { { "b", NT_TYPE_FIXED_ARRAY, NT_TYPE_OBJECT, l3, 1,
                                             65535 } };
    static const struct nt_field l1[1] = { { "a", NT_TYPE_FIXED_ARRAY, NT_TYPE_OBJECT, l2, 1,
                                             65535 } };
    struct nt_event_desc desc = { 0 };
    static const uint8_t payload[1] = { 0 };
    char text[64];

    desc.fields = l1;
    desc.field_count = 1;
    ASSERT_EQ(nt_payload_decode(&desc, payload, 1, NULL, NULL), -EBADMSG);
    ASSERT_EQ(nt_payload_format(&desc, payload, 1, text, sizeof(text)), -EBADMSG);
}

static int
stop_at_second(void *ctx, const struct nt_value *v)
{
    int *calls = ctx;

    (void)v;
    return ++*calls == 2 ? 42 : 0;
}

TEST(decode_callback_can_stop)
{
    static const struct nt_field fields[] = {
        { "a", NT_TYPE_BYTE, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "b", NT_TYPE_BYTE, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "c", NT_TYPE_BYTE, NT_TYPE_EMPTY, NULL, 0, 0 },
    };
    struct nt_event_desc desc = { 0 };
    static const uint8_t payload[4] = { 1, 2, 3, 4 }; /* one extra byte: not an error */
    int calls = 0;

    desc.fields = fields;
    desc.field_count = 3;
    ASSERT_EQ(nt_payload_decode(&desc, payload, 4, stop_at_second, &calls), 42);
    ASSERT_EQ(calls, 2);
    ASSERT_OK(nt_payload_decode(&desc, payload, 4, NULL, NULL));
}

TEST(utf16_to_utf8)
{
    static const uint8_t s[] = { 'h',  0,    0xE9, 0, 0x3D, 0xD8, 0x00, 0xDE,
                                 0x00, 0xD8, 'x',  0, 0,    0,    'y',  0 };
    char out[32];
    char tiny[4];

    /* h, é, U+1F600, an unpaired high surrogate (U+FFFD), x, then NUL stops */
    ASSERT_EQ(nt_utf16_to_utf8(s, sizeof(s), out, sizeof(out)), 1 + 2 + 4 + 3 + 1);
    ASSERT_STR_EQ(out, "h\xC3\xA9\xF0\x9F\x98\x80\xEF\xBF\xBDx");
    ASSERT_EQ(nt_utf16_to_utf8(s, sizeof(s), NULL, 0), 11);
    /* truncation never splits a sequence */
    ASSERT_EQ(nt_utf16_to_utf8(s, sizeof(s), tiny, sizeof(tiny)), 11);
    ASSERT_STR_EQ(tiny, "h\xC3\xA9");
    ASSERT_EQ(nt_utf16_to_utf8(s, 3, out, sizeof(out)), 1); /* odd length: last byte ignored */
}

/* ------------------------------------------------------------------------------------------ */
/* Pipes and the writer                                                                       */
/* ------------------------------------------------------------------------------------------ */

TEST(reads_from_a_pipe)
{
    struct tb t = { 0 };
    struct nt_source src;
    struct nt_reader *r = NULL;
    struct nt_event ev;
    int fds[2];
    pid_t pid;
    int status;
    int n = 0;

    build_v6(&t);
    ASSERT_OK(pipe(fds));
    pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        size_t off = 0;

        close(fds[0]);
        while (off < t.n) { /* dribble 3 bytes at a time */
            size_t len = t.n - off < 3 ? t.n - off : 3;

            if (write(fds[1], t.b + off, len) != (ssize_t)len) {
                _exit(1);
            }
            off += len;
        }
        _exit(0);
    }
    close(fds[1]);
    nt_source_fd(&src, &fds[0]);
    ASSERT_OK(nt_reader_new(&src, NULL, &r));
    while (next_or_fail(r, &ev) == 1) {
        n++;
    }
    ASSERT_EQ(n, 3);
    nt_reader_free(r);
    close(fds[0]);
    ASSERT_TRUE(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    tb_free(&t);
}

static int
mem_sink_write(void *ctx, const void *buf, size_t len)
{
    tb_bytes(ctx, buf, len);
    return 0;
}

TEST(writer_round_trip)
{
    static const struct nt_field fields[] = {
        { "Count", NT_TYPE_UINT32, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "Text", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    };
    struct nt_event_desc desc = { 0 };
    struct nt_writer_options opts = { 0 };
    struct nt_writer *w = NULL;
    struct tb out = { 0 };
    struct nt_sink sink = { mem_sink_write, &out };
    struct tb_mem m;
    struct nt_reader *r;
    struct nt_reader_stats st;
    struct nt_event ev;
    uint32_t id = 0;
    uint64_t stack[3] = { 0x10, 0x20, 0x30 };
    uint8_t pbuf[64];
    struct nt_payload p;
    char text[128];
    int i;

    desc.provider = "My-Provider";
    desc.event_id = 9;
    desc.name = "Thing";
    desc.version = 1;
    desc.level = 4;
    desc.fields = fields;
    desc.field_count = 2;
    opts.process_id = 777;
    opts.sync_time_ticks = 1000;
    ASSERT_OK(nt_writer_new(&opts, &sink, &w));
    ASSERT_OK(nt_writer_define(w, &desc, &id));
    for (i = 0; i < 1000; i++) {
        memset(&ev, 0, sizeof(ev));
        nt_payload_init(&p, pbuf, sizeof(pbuf));
        nt_payload_u32(&p, (uint32_t)i);
        nt_payload_string(&p, "h\xC3\xA9");
        ASSERT_OK(p.err);
        ev.metadata_id = id;
        ev.thread_id = 50 + (uint64_t)(i % 3);
        ev.capture_thread_id = 7;
        ev.processor = 1;
        ev.timestamp = 2000 + (uint64_t)i * 10;
        ev.stack = stack;
        ev.stack_depth = (uint32_t)(i % 4);
        ev.payload = pbuf;
        ev.payload_size = (uint32_t)p.len;
        ASSERT_OK(nt_writer_write(w, &ev));
        if (i == 500) {
            ASSERT_OK(nt_writer_sequence_point(w));
            ASSERT_OK(nt_writer_note_lost(w, 7, 5));
        }
    }
    ASSERT_OK(nt_writer_finish(w));
    nt_writer_free(w);

    r = open_mem(&out, &m, 4096);
    ASSERT_EQ(nt_reader_info(r)->process_id, 777);
    ASSERT_U64_EQ(nt_reader_info(r)->sync_time_ticks, 1000);
    for (i = 0; i < 1000; i++) {
        ASSERT_EQ(next_or_fail(r, &ev), 1);
        ASSERT_U64_EQ(ev.timestamp, 2000 + (uint64_t)i * 10);
        ASSERT_U64_EQ(ev.thread_id, 50 + (uint64_t)(i % 3));
        ASSERT_U64_EQ(ev.capture_thread_id, 7);
        ASSERT_EQ(ev.stack_depth, (uint32_t)(i % 4));
        if (ev.stack_depth > 0) {
            ASSERT_MEM_EQ(ev.stack, stack, ev.stack_depth * sizeof(uint64_t));
        }
        ASSERT_STR_EQ(ev.desc->name, "Thing");
        ASSERT_TRUE(nt_payload_format(ev.desc, ev.payload, ev.payload_size, text, sizeof(text)) >
                    0);
        {
            char want[64];

            snprintf(want, sizeof(want), "Count=%d Text=\"h\xC3\xA9\"", i);
            ASSERT_STR_EQ(text, want);
        }
    }
    ASSERT_EQ(next_or_fail(r, &ev), 0);
    nt_reader_get_stats(r, &st);
    ASSERT_U64_EQ(st.lost_events, 5);
    ASSERT_TRUE(st.sequence_points >= 2);
    nt_reader_free(r);
    tb_free(&out);
}

static const struct test_case cases[] = {
    TEST_CASE(compressed_header_wraps_and_inherits),
    TEST_CASE(lost_events_from_gaps_and_sequence_points),
    TEST_CASE(stacks_live_for_one_sequence_point_region),
    TEST_CASE(every_field_length_inside_a_long_block),
    TEST_CASE(v5_metadata_tags_and_arrays),
    TEST_CASE(v4_uncompressed_events),
    TEST_CASE(v6_stream),
    TEST_CASE(v6_undeclared_thread_index),
    TEST_CASE(decode_and_format_every_type),
    TEST_CASE(decode_work_is_bounded),
    TEST_CASE(decode_callback_can_stop),
    TEST_CASE(utf16_to_utf8),
    TEST_CASE(reads_from_a_pipe),
    TEST_CASE(writer_round_trip),
};

TEST_MAIN(cases)
