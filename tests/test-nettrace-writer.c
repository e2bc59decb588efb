/* SPDX-License-Identifier: MIT */
/*
 * tests/test-nettrace-writer.c - the NetTrace V5 writer (nettrace/writer.c) and the payload
 * builder (nettrace/payload.c), checked byte for byte against the format notes (sections 3, 4.2,
 * 5.1, 11) through a memory sink. The stream is walked by a small decoder written here from the
 * format notes, independent of the library's reader.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nettrace/format.h"
#include "nettrace/nettrace.h"
#include "tests/test.h"

/* ------------------------------------------------------------------------------------------ */
/* Memory sink                                                                                */
/* ------------------------------------------------------------------------------------------ */

struct mem_sink {
    uint8_t *data;
    size_t len;
    size_t cap;
    size_t writes;
    size_t fail_at; /* 1-based write that fails; 0: never */
    int fail_rc;
    int store; /* 0: count bytes only */
};

static int
mem_sink_write(void *ctx, const void *buf, size_t len)
{
    struct mem_sink *m = ctx;

    m->writes++;
    if (m->fail_at != 0 && m->writes >= m->fail_at) {
        return m->fail_rc;
    }
    if (!m->store) {
        m->len += len;
        return 0;
    }
    if (m->len + len > m->cap) {
        m->cap = (m->len + len) * 2;
        m->data = realloc(m->data, m->cap);
        ASSERT_TRUE(m->data != NULL);
    }
    memcpy(m->data + m->len, buf, len);
    m->len += len;
    return 0;
}

static struct nt_sink
mem_sink_init(struct mem_sink *m)
{
    struct nt_sink sink = { mem_sink_write, m };

    memset(m, 0, sizeof(*m));
    m->store = 1;
    return sink;
}

/* ------------------------------------------------------------------------------------------ */
/* A decoder for the stream written here (format notes 3.2-3.7, 4.2)                          */
/* ------------------------------------------------------------------------------------------ */

static uint32_t
ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t
ld64(const uint8_t *p)
{
    return ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

struct block {
    char name[32];
    size_t content; /* stream offset of the content */
    uint32_t size;
};

#define STREAM_HEADER_SIZE (8 + 4 + 20 + 21 + 48 + 1)
#define MAX_BLOCKS         4096

/* Walks the block objects after the Trace object; returns the count. *ended: saw the 01 tag. */
static size_t
walk_blocks(const uint8_t *d, size_t n, struct block *out, size_t max, int *ended)
{
    size_t off = STREAM_HEADER_SIZE;
    size_t count = 0;
    uint32_t name_len;

    *ended = 0;
    while (off < n) {
        if (d[off] == NT_TAG_NULL_REFERENCE) {
            ASSERT_EQ(off + 1, n); /* nothing after the end tag */
            *ended = 1;
            break;
        }
        ASSERT_TRUE(count < max);
        ASSERT_TRUE(off + 15 <= n);
        ASSERT_EQ(d[off], 5);
        ASSERT_EQ(d[off + 1], 5);
        ASSERT_EQ(d[off + 2], 1);
        ASSERT_EQ(ld32(d + off + 3), 2);
        ASSERT_EQ(ld32(d + off + 7), 2);
        name_len = ld32(d + off + 11);
        ASSERT_TRUE(name_len < sizeof(out[count].name));
        memcpy(out[count].name, d + off + 15, name_len);
        out[count].name[name_len] = '\0';
        off += 15 + name_len;
        ASSERT_EQ(d[off], NT_TAG_END_OBJECT);
        off++;
        out[count].size = ld32(d + off);
        off += 4;
        while (off % 4 != 0) {
            ASSERT_EQ(d[off], 0); /* padding is zero */
            off++;
        }
        out[count].content = off;
        off += out[count].size;
        ASSERT_TRUE(off < n);
        ASSERT_EQ(d[off], NT_TAG_END_OBJECT);
        off++;
        count++;
    }
    return count;
}

static uint64_t
rd_var(const uint8_t **p)
{
    uint64_t v = 0;
    int shift = 0;

    for (;;) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if ((b & 0x80) == 0) {
            return v;
        }
        shift += 7;
        ASSERT_TRUE(shift < 70);
    }
}

/* Whether decode_events() takes events without IsSorted (a reorder window's late ones). */
static int decode_late_ok;

struct dec_event {
    uint8_t flags;
    uint32_t metadata_id;
    uint32_t seq;
    uint64_t capture;
    uint32_t proc;
    uint64_t thread;
    uint32_t stack;
    uint64_t ts;
    uint32_t payload_size;
    const uint8_t *payload;
};

/* Decodes an EventBlock or MetadataBlock; returns the event count. */
static size_t
decode_events(const uint8_t *content, uint32_t size, struct dec_event *out, size_t max)
{
    const uint8_t *p = content + 20;
    const uint8_t *end = content + size;
    struct dec_event prev;
    size_t n = 0;

    ASSERT_EQ(ld32(content) & 0xFFFF, 20);
    ASSERT_EQ(ld32(content) >> 16, NT_BLOCK_FLAG_COMPRESSED);
    memset(&prev, 0, sizeof(prev));
    while (p < end) {
        struct dec_event e = prev;

        ASSERT_TRUE(n < max);
        e.flags = *p++;
        if (e.flags & NT_HDR_METADATA_ID) {
            e.metadata_id = (uint32_t)rd_var(&p);
        }
        if (e.flags & NT_HDR_CAPTURE_THREAD_AND_SEQUENCE) {
            e.seq = prev.seq + (uint32_t)rd_var(&p) + 1;
            e.capture = rd_var(&p);
            e.proc = (uint32_t)rd_var(&p);
        } else if (e.metadata_id != 0) {
            e.seq = prev.seq + 1;
        }
        if (e.flags & NT_HDR_THREAD_ID) {
            e.thread = rd_var(&p);
        }
        if (e.flags & NT_HDR_STACK_ID) {
            e.stack = (uint32_t)rd_var(&p);
        }
        e.ts = prev.ts + rd_var(&p);
        ASSERT_TRUE((e.flags & (NT_HDR_ACTIVITY_ID | NT_HDR_RELATED_ACTIVITY_ID)) == 0);
        ASSERT_TRUE(decode_late_ok || (e.flags & NT_HDR_SORTED));
        if (e.flags & NT_HDR_PAYLOAD_SIZE) {
            e.payload_size = (uint32_t)rd_var(&p);
        }
        e.payload = p;
        p += e.payload_size;
        ASSERT_TRUE(p <= end);
        out[n++] = e;
        prev = e;
    }
    ASSERT_TRUE(p == end);
    return n;
}

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

#define SYNC_TICKS 1000u

/* Fixed Trace object fields and no flush by time, so that the bytes depend on the calls only. */
static void
fixed_options(struct nt_writer_options *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->process_id = 4242;
    opts->number_of_processors = 8;
    opts->sync_time_ticks = SYNC_TICKS;
    opts->sync_time_unix_ns = 1623232105902000000;
    opts->flush_interval_ns = 10ull * 1000 * 1000 * 1000;
}

static struct nt_writer *
new_writer_with(struct mem_sink *m, const struct nt_writer_options *opts)
{
    struct nt_sink sink = mem_sink_init(m);
    struct nt_writer *w = NULL;

    ASSERT_OK(nt_writer_new(opts, &sink, &w));
    ASSERT_TRUE(w != NULL);
    return w;
}

/* A writer with fixed_options() and these (0: the writer's defaults). */
static struct nt_writer *
new_writer_window(struct mem_sink *m, size_t block_bytes, uint64_t sp_bytes, uint64_t window_ns,
                  size_t max_bytes)
{
    struct nt_writer_options opts;

    fixed_options(&opts);
    opts.block_bytes = block_bytes;
    opts.sequence_point_bytes = sp_bytes;
    opts.reorder_window_ns = window_ns;
    opts.reorder_max_bytes = max_bytes;
    return new_writer_with(m, &opts);
}

static struct nt_writer *
new_writer(struct mem_sink *m, size_t block_bytes, uint64_t sp_bytes)
{
    return new_writer_window(m, block_bytes, sp_bytes, 0, 0);
}

static uint32_t
define_sample(struct nt_writer *w)
{
    uint32_t id = 0;

    ASSERT_OK(nt_writer_define(w, nt_known_event_desc(NT_KNOWN_THREAD_SAMPLE), &id));
    return id;
}

static void
sample(struct nt_event *ev, uint32_t id, uint64_t capture, uint64_t thread, uint64_t ts,
       const uint64_t *stack, uint32_t depth, const uint8_t payload[4])
{
    memset(ev, 0, sizeof(*ev));
    ev->metadata_id = id;
    ev->capture_thread_id = capture;
    ev->thread_id = thread;
    ev->processor = 3;
    ev->timestamp = ts;
    ev->stack = stack;
    ev->stack_depth = depth;
    ev->payload = payload;
    ev->payload_size = 4;
}

static const uint8_t managed[4] = { 2, 0, 0, 0 };

/* Appends UTF-16LE + NUL of an ASCII string to an expected-bytes buffer. */
static size_t
put_u16z(uint8_t *p, const char *ascii)
{
    size_t n = 0;

    for (; *ascii != '\0'; ascii++) {
        p[n++] = (uint8_t)*ascii;
        p[n++] = 0;
    }
    p[n++] = 0;
    p[n++] = 0;
    return n;
}

static size_t
put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
    return 4;
}

/* ------------------------------------------------------------------------------------------ */
/* Byte-exact layouts                                                                         */
/* ------------------------------------------------------------------------------------------ */

TEST(header_and_trace_object_are_byte_exact)
{
    static const uint8_t want[] = {
        /* Nettrace, u32 20, !FastSerialization.1 */
        'N', 'e', 't', 't', 'r', 'a', 'c', 'e', 20, 0, 0, 0, '!', 'F', 'a', 's', 't', 'S', 'e', 'r',
        'i', 'a', 'l', 'i', 'z', 'a', 't', 'i', 'o', 'n', '.', '1',
        /* Trace object: 05 05 01, version 4, min 4, "Trace", 06 */
        5, 5, 1, 4, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 'T', 'r', 'a', 'c', 'e', 6,
        /* SYSTEMTIME 2021-06-09 (Wednesday) 09:48:25.902 */
        0xE5, 0x07, 6, 0, 3, 0, 9, 0, 9, 0, 48, 0, 25, 0, 0x86, 0x03,
        /* SyncTimeQPC 1000, frequency 1e9 */
        0xE8, 0x03, 0, 0, 0, 0, 0, 0, 0x00, 0xCA, 0x9A, 0x3B, 0, 0, 0, 0,
        /* pointer size 8, pid 4242, 8 CPUs, 1 ms interval */
        8, 0, 0, 0, 0x92, 0x10, 0, 0, 8, 0, 0, 0, 0x40, 0x42, 0x0F, 0,
        /* end of the Trace object */
        6
    };
    struct mem_sink m;
    struct nt_writer *w = new_writer(&m, 0, 0);

    ASSERT_EQ(sizeof(want), STREAM_HEADER_SIZE);
    ASSERT_EQ(m.len, sizeof(want));
    ASSERT_EQ(m.writes, 1);
    ASSERT_MEM_EQ(m.data, want, sizeof(want));
    nt_writer_free(w);
}

/* The header's SYSTEMTIME of a sync time in seconds (and 987654321 ns). */
static int
header_date(int64_t secs, uint16_t out[8])
{
    const size_t at = NT_MAGIC_LEN + 4 + NT_FAST_SERIALIZATION_LEN + 3 + 12 +
                      sizeof(NT_TYPE_NAME_TRACE) - 1 + 1;
    struct nt_writer_options opts;
    struct mem_sink m;
    struct nt_sink sink = mem_sink_init(&m);
    struct nt_writer *w = NULL;
    int rc, i;

    fixed_options(&opts);
    opts.sync_time_unix_ns = secs * 1000000000 + 987654321;
    rc = nt_writer_new(&opts, &sink, &w);
    if (rc == 0) {
        for (i = 0; i < 8; i++) {
            out[i] = (uint16_t)(m.data[at + 2 * i] | m.data[at + 2 * i + 1] << 8);
        }
    }
    nt_writer_free(w);
    free(m.data);
    return rc;
}

/*
 * The writer works the date out itself (glibc's gmtime_r() reads /etc/localtime at its first
 * call, in every recorded process): the same calendar as gmtime_r() over the whole range of
 * sync_time_unix_ns (1677 to 2262), every 7 days, 3 hours and a second so that weekdays, hours and
 * leap days all come round, and the days around 1900, 1970, 2000 and 2100.
 */
TEST(header_date_is_gmtimes_over_the_sync_times_range)
{
    static const int64_t edges[] = { -2208988801, -2208988800, -1,         0,         951782400,
                                     951868799,   4102444799,  4107542400, 4107628799 };
    const int64_t first = INT64_MIN / 1000000000 + 1, last = INT64_MAX / 1000000000 - 1;
    int64_t secs = first;
    size_t k = 0, checked = 0;

    while (secs <= last) {
        int64_t t = k < sizeof(edges) / sizeof(edges[0]) ? edges[k++] : secs;
        time_t tt = (time_t)t;
        struct tm tm;
        uint16_t got[8];

        ASSERT_OK(header_date(t, got));
        ASSERT_TRUE(gmtime_r(&tt, &tm) != NULL);
        ASSERT_EQ(got[0], tm.tm_year + 1900);
        ASSERT_EQ(got[1], tm.tm_mon + 1);
        ASSERT_EQ(got[2], tm.tm_wday);
        ASSERT_EQ(got[3], tm.tm_mday);
        ASSERT_EQ(got[4], tm.tm_hour);
        ASSERT_EQ(got[5], tm.tm_min);
        ASSERT_EQ(got[6], tm.tm_sec);
        ASSERT_EQ(got[7], 987);
        checked++;
        if (t == secs) {
            secs += 7 * 86400 + 3 * 3600 + 1;
        }
    }
    ASSERT_TRUE(checked > 29000);
}

/*
 * A trace written again from a reader's header (record's join of its processes' traces, the
 * test tools' rewrites) keeps its SYSTEMTIME: nt_trace_info_unix_ns reads back every header date
 * of the range above to its millisecond, and nt_writer_options_from_info carries it with the
 * rest. Before, the joined trace was dated at the join (now), its events' wall-clock times moved
 * by the recording's length.
 */
TEST(a_headers_date_reads_back_and_goes_on_into_a_rewrite)
{
    const int64_t first = INT64_MIN / 1000000000 + 1, last = INT64_MAX / 1000000000 - 1;
    struct nt_trace_info info;
    struct nt_writer_options o;
    size_t checked = 0;
    int64_t secs, got;
    int i;

    for (secs = first; secs <= last; secs += 7 * 86400 + 3 * 3600 + 1) {
        uint16_t date[8];

        ASSERT_OK(header_date(secs, date));
        memset(&info, 0, sizeof(info));
        for (i = 0; i < 8; i++) {
            info.sync_time[i] = (int16_t)date[i];
        }
        ASSERT_OK(nt_trace_info_unix_ns(&info, &got));
        ASSERT_EQ(got, secs * 1000000000 + 987000000);
        checked++;
    }
    ASSERT_TRUE(checked > 29000);
    /* the rest of the header, and the date, into the options */
    info.process_id = 4242;
    info.number_of_processors = 3;
    info.expected_cpu_sampling_rate = 4000000;
    info.sync_time_ticks = 123456789;
    nt_writer_options_from_info(&o, &info);
    ASSERT_EQ(o.process_id, 4242);
    ASSERT_EQ(o.number_of_processors, 3);
    ASSERT_EQ(o.sampling_interval_ns, 4000000);
    ASSERT_EQ(o.sync_time_ticks, 123456789);
    ASSERT_EQ(o.sync_time_unix_ns, got);
    ASSERT_EQ(o.reorder_window_ns, 0);
    /* a header whose fields make no date: said, and a rewrite dated now (0) */
    info.sync_time[1] = 13;
    ASSERT_EQ(nt_trace_info_unix_ns(&info, &got), -EINVAL);
    nt_writer_options_from_info(&o, &info);
    ASSERT_EQ(o.sync_time_unix_ns, 0);
    info.sync_time[1] = 2;
    info.sync_time[3] = 0;
    ASSERT_EQ(nt_trace_info_unix_ns(&info, &got), -EINVAL);
    /* dates SYSTEMTIME holds and int64 nanoseconds do not (a fuzzed header: year 10247) */
    info.sync_time[3] = 1;
    info.sync_time[0] = 10247;
    ASSERT_EQ(nt_trace_info_unix_ns(&info, &got), -ERANGE);
    info.sync_time[0] = 30827;
    ASSERT_EQ(nt_trace_info_unix_ns(&info, &got), -ERANGE);
    info.sync_time[0] = 1601;
    ASSERT_EQ(nt_trace_info_unix_ns(&info, &got), -ERANGE);
    nt_writer_options_from_info(&o, &info);
    ASSERT_EQ(o.sync_time_unix_ns, 0);
}

TEST(worked_example_of_section_11_is_reproduced)
{
    static const uint64_t stack[2] = { 0x401000, 0x402000 };
    struct nt_event_desc other = { "Other-Provider", 1, "E", 0, 0, 4, 0, NULL, 0, 0 };
    struct mem_sink m;
    struct nt_writer *w = new_writer(&m, 0, 0);
    struct block blocks[8];
    const struct block *eb;
    struct nt_event ev;
    const uint64_t t = 123456789;
    uint8_t want[64];
    size_t n = 0;
    uint32_t id, k;
    int ended;

    /* Three other events first, so ThreadSample gets metadata id 4 as in the example. */
    for (k = 1; k <= 3; k++) {
        other.event_id = k;
        ASSERT_OK(nt_writer_define(w, &other, &id));
        ASSERT_EQ(id, k);
    }
    id = define_sample(w);
    ASSERT_EQ(id, 4);
    sample(&ev, id, 1000, 1234, t, stack, 2, managed);
    ASSERT_OK(nt_writer_write(w, &ev));
    ev.timestamp = t + 1000000;
    ASSERT_OK(nt_writer_write(w, &ev));
    ASSERT_OK(nt_writer_flush(w));

    ASSERT_EQ(walk_blocks(m.data, m.len, blocks, 8, &ended), 3);
    ASSERT_STR_EQ(blocks[0].name, "MetadataBlock");
    ASSERT_STR_EQ(blocks[1].name, "StackBlock");
    ASSERT_STR_EQ(blocks[2].name, "EventBlock");
    eb = &blocks[2];
    /* Block header: size 20, compressed, min and max timestamps. */
    ASSERT_EQ(ld32(m.data + eb->content), 20 | NT_BLOCK_FLAG_COMPRESSED << 16);
    ASSERT_U64_EQ(ld64(m.data + eb->content + 4), t);
    ASSERT_U64_EQ(ld64(m.data + eb->content + 12), t + 1000000);

    want[n++] = 0xCF; /* metadata, seq/capture/proc, thread, stack, sorted, size */
    want[n++] = 0x04;
    want[n++] = 0x00; /* seq 1 - 0 - 1 */
    want[n++] = 0xE8; /* 1000 */
    want[n++] = 0x07;
    want[n++] = 0x03;
    want[n++] = 0xD2; /* 1234 */
    want[n++] = 0x09;
    want[n++] = 0x01;
    want[n++] = 0x95; /* varuint(123456789) = 95 9A EF 3A */
    want[n++] = 0x9A;
    want[n++] = 0xEF;
    want[n++] = 0x3A;
    want[n++] = 0x04;
    memcpy(want + n, managed, 4);
    n += 4;
    want[n++] = 0x40; /* sorted only: everything else inherited */
    want[n++] = 0xC0; /* varuint(1000000) */
    want[n++] = 0x84;
    want[n++] = 0x3D;
    memcpy(want + n, managed, 4);
    n += 4;
    ASSERT_EQ(eb->size, 20 + n);
    ASSERT_MEM_EQ(m.data + eb->content + 20, want, n);

    /* The stack block: first id 1, one stack of 2 frames, leaf first. */
    ASSERT_EQ(blocks[1].size, 8 + 4 + 16);
    ASSERT_EQ(ld32(m.data + blocks[1].content), 1);
    ASSERT_EQ(ld32(m.data + blocks[1].content + 4), 1);
    ASSERT_EQ(ld32(m.data + blocks[1].content + 8), 16);
    ASSERT_U64_EQ(ld64(m.data + blocks[1].content + 12), 0x401000);
    ASSERT_U64_EQ(ld64(m.data + blocks[1].content + 20), 0x402000);
    nt_writer_free(w);
}

TEST(metadata_record_of_sample_profiler_is_byte_exact)
{
    struct mem_sink m;
    struct nt_writer *w = new_writer(&m, 0, 0);
    struct block blocks[4];
    uint8_t want[256];
    size_t n = 0, rec;
    int ended;

    ASSERT_EQ(define_sample(w), 1);
    ASSERT_OK(nt_writer_flush(w));
    ASSERT_EQ(walk_blocks(m.data, m.len, blocks, 4, &ended), 1);
    ASSERT_STR_EQ(blocks[0].name, "MetadataBlock");
    ASSERT_U64_EQ(ld64(m.data + blocks[0].content + 4), SYNC_TICKS);
    ASSERT_U64_EQ(ld64(m.data + blocks[0].content + 12), SYNC_TICKS);

    /* Header: id 0 (unchanged), seq delta -1 with capture 0 and processor -1, like the runtime. */
    want[n++] = 0xC2;
    memcpy(want + n, "\xFF\xFF\xFF\xFF\x0F", 5);
    n += 5;
    want[n++] = 0x00;
    memcpy(want + n, "\xFF\xFF\xFF\xFF\x0F", 5);
    n += 5;
    want[n++] = 0xE8; /* timestamp delta = sync ticks 1000 */
    want[n++] = 0x07;
    want[n++] = 102; /* payload size */
    rec = n;
    n += put32(want + n, 1);
    n += put_u16z(want + n, "Microsoft-DotNETCore-SampleProfiler");
    n += put32(want + n, 0);     /* event id */
    n += put_u16z(want + n, ""); /* name */
    n += put32(want + n, 0);     /* keywords */
    n += put32(want + n, 0);
    n += put32(want + n, 0); /* version */
    n += put32(want + n, 4); /* level */
    n += put32(want + n, 0); /* field count */
    ASSERT_EQ(n - rec, 102);
    ASSERT_EQ(blocks[0].size, 20 + n);
    ASSERT_MEM_EQ(m.data + blocks[0].content + 20, want, n);
    nt_writer_free(w);
}

TEST(metadata_with_object_field_uses_v1_list)
{
    static const struct nt_field point[] = {
        { "X", NT_TYPE_INT32, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "Y", NT_TYPE_INT32, NT_TYPE_EMPTY, NULL, 0, 0 },
    };
    static const struct nt_field fields[] = {
        { "Pt", NT_TYPE_OBJECT, NT_TYPE_EMPTY, point, 2, 0 },
        { "S", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    };
    const struct nt_event_desc desc = { "P", 7, "Ev", 0x10, 2, 5, 0, fields, 2, 0 };
    struct mem_sink m;
    struct nt_writer *w = new_writer(&m, 0, 0);
    struct block blocks[4];
    struct dec_event ev[2];
    uint8_t want[256];
    size_t n = 0;
    uint32_t id;
    int ended;

    ASSERT_OK(nt_writer_define(w, &desc, &id));
    ASSERT_OK(nt_writer_flush(w));
    ASSERT_EQ(walk_blocks(m.data, m.len, blocks, 4, &ended), 1);
    ASSERT_EQ(decode_events(m.data + blocks[0].content, blocks[0].size, ev, 2), 1);
    ASSERT_EQ(ev[0].metadata_id, 0);
    n += put32(want + n, 1);
    n += put_u16z(want + n, "P");
    n += put32(want + n, 7);
    n += put_u16z(want + n, "Ev");
    n += put32(want + n, 0x10);
    n += put32(want + n, 0);
    n += put32(want + n, 2);
    n += put32(want + n, 5);
    n += put32(want + n, 2);              /* fields */
    n += put32(want + n, NT_TYPE_OBJECT); /* Pt: nested list, then the name */
    n += put32(want + n, 2);
    n += put32(want + n, NT_TYPE_INT32);
    n += put_u16z(want + n, "X");
    n += put32(want + n, NT_TYPE_INT32);
    n += put_u16z(want + n, "Y");
    n += put_u16z(want + n, "Pt");
    n += put32(want + n, NT_TYPE_STRING);
    n += put_u16z(want + n, "S");
    ASSERT_EQ(ev[0].payload_size, n);
    ASSERT_MEM_EQ(ev[0].payload, want, n);
    nt_writer_free(w);
}

TEST(metadata_with_array_uses_v2_params_and_opcode_tags)
{
    static const struct nt_field fields[] = {
        { "Count", NT_TYPE_UINT32, NT_TYPE_EMPTY, NULL, 0, 0 },
        { "Values", NT_TYPE_ARRAY, NT_TYPE_UINT16, NULL, 0, 0 },
    };
    const struct nt_event_desc desc = { "P", 9, "ArrEv", 0, 0, 4, 1, fields, 2, 0 };
    struct mem_sink m;
    struct nt_writer *w = new_writer(&m, 0, 0);
    struct block blocks[4];
    struct dec_event ev[2];
    uint8_t want[256];
    size_t n = 0;
    uint32_t id;
    int ended;

    ASSERT_OK(nt_writer_define(w, &desc, &id));
    ASSERT_OK(nt_writer_flush(w));
    ASSERT_EQ(walk_blocks(m.data, m.len, blocks, 4, &ended), 1);
    ASSERT_EQ(decode_events(m.data + blocks[0].content, blocks[0].size, ev, 2), 1);
    n += put32(want + n, 1);
    n += put_u16z(want + n, "P");
    n += put32(want + n, 9);
    n += put_u16z(want + n, "ArrEv");
    n += put32(want + n, 0);
    n += put32(want + n, 0);
    n += put32(want + n, 0);
    n += put32(want + n, 4);
    n += put32(want + n, 0); /* V1 count 0: V2Params is authoritative */
    n += put32(want + n, 1); /* OpCode tag */
    want[n++] = NT_METADATA_TAG_OPCODE;
    want[n++] = 1;
    n += put32(want + n, 4 + 20 + 26); /* V2Params tag */
    want[n++] = NT_METADATA_TAG_V2_PARAMS;
    n += put32(want + n, 2);
    n += put32(want + n, 4 + 12 + 4);
    n += put_u16z(want + n, "Count");
    n += put32(want + n, NT_TYPE_UINT32);
    n += put32(want + n, 4 + 14 + 4 + 4);
    n += put_u16z(want + n, "Values");
    n += put32(want + n, NT_TYPE_ARRAY);
    n += put32(want + n, NT_TYPE_UINT16);
    ASSERT_EQ(ev[0].payload_size, n);
    ASSERT_MEM_EQ(ev[0].payload, want, n);
    nt_writer_free(w);
}

TEST(blocks_are_aligned_ordered_and_stream_ends_with_tag)
{
    static const uint64_t stack[3] = { 1, 2, 3 };
    struct nt_event_desc odd = { "Odd-Name-Provider", 5, "Odd", 0, 0, 4, 0, NULL, 0, 0 };
    uint8_t payload[7] = { 1, 2, 3, 4, 5, 6, 7 };
    struct mem_sink m;
    struct nt_writer *w = new_writer(&m, 256, 0);
    struct block *blocks = calloc(MAX_BLOCKS, sizeof(*blocks));
    size_t nb, i, seen_sp = 0;
    struct nt_event ev;
    uint32_t id, odd_id;
    int ended;

    id = define_sample(w);
    for (i = 0; i < 200; i++) {
        /* Odd payload sizes and new metadata along the way shift the stream alignment. */
        if (i % 50 == 0) {
            odd.event_id = (uint32_t)(100 + i);
            ASSERT_OK(nt_writer_define(w, &odd, &odd_id));
        }
        sample(&ev, i % 3 == 0 ? odd_id : id, 7, 8, 2000 + i, stack, (uint32_t)(i % 4), managed);
        ev.payload = payload;
        ev.payload_size = (uint32_t)(i % 8);
        ASSERT_OK(nt_writer_write(w, &ev));
    }
    ASSERT_OK(nt_writer_finish(w));
    nb = walk_blocks(m.data, m.len, blocks, MAX_BLOCKS, &ended);
    ASSERT_TRUE(ended);
    ASSERT_EQ(m.data[m.len - 1], NT_TAG_NULL_REFERENCE);
    ASSERT_TRUE(nb > 4);
    for (i = 0; i < nb; i++) {
        ASSERT_EQ(blocks[i].content % 4, 0);
        if (strcmp(blocks[i].name, "SPBlock") == 0) {
            seen_sp++;
        } else {
            ASSERT_TRUE(blocks[i].size <= 256);
        }
    }
    /* finish() wrote one sequence point, and it is the last block. */
    ASSERT_EQ(seen_sp, 1);
    ASSERT_STR_EQ(blocks[nb - 1].name, "SPBlock");
    ASSERT_STR_EQ(blocks[0].name, "MetadataBlock");
    /* After finish only free is allowed. */
    ASSERT_EQ(nt_writer_write(w, &ev), -EINVAL);
    ASSERT_EQ(nt_writer_flush(w), -EINVAL);
    ASSERT_EQ(nt_writer_finish(w), -EINVAL);
    free(blocks);
    nt_writer_free(w);
}

/* ------------------------------------------------------------------------------------------ */
/* Flush policy                                                                               */
/* ------------------------------------------------------------------------------------------ */

TEST(blocks_flush_at_block_bytes_and_never_exceed_it)
{
    static const uint64_t stack[4] = { 10, 20, 30, 40 };
    struct mem_sink m;
    struct nt_writer *w = new_writer(&m, 512, 0);
    struct block *blocks = calloc(MAX_BLOCKS, sizeof(*blocks));
    struct dec_event *ev = calloc(1000, sizeof(*ev));
    struct nt_writer_stats st;
    struct nt_event e;
    size_t nb, i, events = 0, event_blocks = 0;
    uint32_t id;
    int ended;

    id = define_sample(w);
    /* The first events stay in memory: only the header has been written. */
    for (i = 0; i < 20; i++) {
        sample(&e, id, 1, 100 + i % 5, 5000 + i * 10, stack, 4, managed);
        ASSERT_OK(nt_writer_write(w, &e));
    }
    ASSERT_EQ(m.writes, 1);
    for (; i < 1000; i++) {
        sample(&e, id, 1, 100 + i % 5, 5000 + i * 10, stack, 4, managed);
        ASSERT_OK(nt_writer_write(w, &e));
    }
    ASSERT_TRUE(m.writes > 5);
    ASSERT_OK(nt_writer_flush(w));
    nt_writer_get_stats(w, &st);
    nb = walk_blocks(m.data, m.len, blocks, MAX_BLOCKS, &ended);
    ASSERT_TRUE(!ended);
    /* One sink write per block, plus the header. */
    ASSERT_EQ(m.writes, nb + 1);
    ASSERT_U64_EQ(st.blocks, nb);
    ASSERT_U64_EQ(st.bytes, m.len);
    ASSERT_U64_EQ(st.events, 1000);
    for (i = 0; i < nb; i++) {
        ASSERT_TRUE(blocks[i].size <= 512);
        if (strcmp(blocks[i].name, "EventBlock") == 0) {
            size_t k = decode_events(m.data + blocks[i].content, blocks[i].size, ev, 1000);

            events += k;
            event_blocks++;
            /* Every block but the last was flushed because the next event could not fit. */
            if (events < 1000) {
                ASSERT_TRUE(blocks[i].size + 88 + 4 > 512);
            }
        }
    }
    ASSERT_EQ(events, 1000);
    ASSERT_TRUE(event_blocks >= 10);
    free(blocks);
    free(ev);
    nt_writer_free(w);
}

TEST(poll_flushes_only_after_the_interval)
{
    struct nt_writer_options opts;
    struct mem_sink m;
    struct nt_sink sink = mem_sink_init(&m);
    struct nt_writer *w = NULL;
    const uint64_t interval = 5ull * 1000 * 1000 * 1000;
    uint64_t t0, t1;
    struct nt_event e;
    uint32_t id;

    memset(&opts, 0, sizeof(opts));
    opts.flush_interval_ns = interval;
    opts.sync_time_ticks = 1;
    t0 = nt_clock_now();
    ASSERT_OK(nt_writer_new(&opts, &sink, &w));
    t1 = nt_clock_now();
    id = define_sample(w);
    sample(&e, id, 1, 2, 10, NULL, 0, managed);
    ASSERT_OK(nt_writer_write(w, &e));
    ASSERT_EQ(m.writes, 1);
    ASSERT_OK(nt_writer_poll(w, t0));
    ASSERT_OK(nt_writer_poll(w, t0 + interval - 1));
    ASSERT_OK(nt_writer_poll(w, 0)); /* a clock going backwards flushes nothing */
    ASSERT_EQ(m.writes, 1);
    ASSERT_OK(nt_writer_poll(w, t1 + interval));
    ASSERT_EQ(m.writes, 3); /* metadata block + event block */
    /* The interval restarts at the flush. */
    ASSERT_OK(nt_writer_write(w, &e));
    ASSERT_OK(nt_writer_poll(w, t1 + interval + interval / 2));
    ASSERT_EQ(m.writes, 3);
    ASSERT_OK(nt_writer_poll(w, t1 + 2 * interval));
    ASSERT_EQ(m.writes, 4);
    /* Nothing pending: a poll writes nothing. */
    ASSERT_OK(nt_writer_poll(w, t1 + 4 * interval));
    ASSERT_EQ(m.writes, 4);
    nt_writer_free(w);
}

/* ------------------------------------------------------------------------------------------ */
/* Sequence numbers, sequence points, stacks, timestamps                                      */
/* ------------------------------------------------------------------------------------------ */

struct sp_entry {
    uint64_t ts;
    uint32_t count;
    uint64_t tid[8];
    uint32_t seq[8];
};

static void
decode_sp(const uint8_t *data, const struct block *b, struct sp_entry *sp)
{
    const uint8_t *p = data + b->content;
    uint32_t i;

    ASSERT_STR_EQ(b->name, "SPBlock");
    sp->ts = ld64(p);
    sp->count = ld32(p + 8);
    ASSERT_TRUE(sp->count <= 8);
    ASSERT_EQ(b->size, 12 + 12 * sp->count);
    for (i = 0; i < sp->count; i++) {
        sp->tid[i] = ld64(p + 12 + 12 * i);
        sp->seq[i] = ld32(p + 20 + 12 * i);
    }
}

TEST(sequence_numbers_count_per_capture_thread_and_show_losses)
{
    struct mem_sink m;
    struct nt_writer *w = new_writer(&m, 0, 0);
    struct block blocks[16];
    struct dec_event ev[16];
    struct sp_entry sp;
    struct nt_writer_stats st;
    struct nt_event e;
    size_t nb, n;
    uint32_t id;
    int ended, i;

    id = define_sample(w);
    for (i = 0; i < 3; i++) {
        sample(&e, id, 0xA, 1, 2000 + i, NULL, 0, managed);
        ASSERT_OK(nt_writer_write(w, &e));
    }
    ASSERT_OK(nt_writer_note_lost(w, 0xA, 5));
    sample(&e, id, 0xA, 1, 2010, NULL, 0, managed);
    ASSERT_OK(nt_writer_write(w, &e));
    sample(&e, id, 0xB, 1, 2011, NULL, 0, managed);
    ASSERT_OK(nt_writer_write(w, &e));
    ASSERT_OK(nt_writer_write(w, &e));
    ASSERT_OK(nt_writer_sequence_point(w));

    nb = walk_blocks(m.data, m.len, blocks, 16, &ended);
    ASSERT_EQ(nb, 3);
    n = decode_events(m.data + blocks[1].content, blocks[1].size, ev, 16);
    ASSERT_EQ(n, 6);
    ASSERT_EQ(ev[0].seq, 1);
    ASSERT_EQ(ev[1].seq, 2);
    ASSERT_EQ(ev[2].seq, 3);
    ASSERT_EQ(ev[3].seq, 9); /* 5 lost: 4..8 */
    ASSERT_EQ(ev[3].capture, 0xA);
    ASSERT_EQ(ev[4].seq, 1);
    ASSERT_EQ(ev[4].capture, 0xB);
    ASSERT_EQ(ev[5].seq, 2);
    ASSERT_EQ(ev[1].flags, NT_HDR_SORTED); /* seq + 1 on the same thread is implied */
    decode_sp(m.data, &blocks[2], &sp);
    ASSERT_EQ(sp.count, 2);
    ASSERT_U64_EQ(sp.tid[0], 0xA);
    ASSERT_EQ(sp.seq[0], 9);
    ASSERT_U64_EQ(sp.tid[1], 0xB);
    ASSERT_EQ(sp.seq[1], 2);
    ASSERT_TRUE(sp.ts > 2011);

    /*
     * A thread that lost events before its first one: numbered right after it, a gap that
     * TraceEvent counts too (it counts none that a sequence point shows before the thread's
     * first event). One that never writes an event: the last sequence point lists its losses.
     */
    ASSERT_OK(nt_writer_note_lost(w, 0xC, 4));
    ASSERT_OK(nt_writer_note_lost(w, 0xD, 3));
    ASSERT_OK(nt_writer_note_lost(w, 0xA, 0));
    sample(&e, id, 0xC, 1, 3000, NULL, 0, managed);
    ASSERT_OK(nt_writer_write(w, &e));
    sample(&e, id, 0xC, 1, 3001, NULL, 0, managed);
    ASSERT_OK(nt_writer_write(w, &e));
    ASSERT_OK(nt_writer_sequence_point(w));
    nb = walk_blocks(m.data, m.len, blocks, 16, &ended);
    ASSERT_EQ(nb, 5);
    n = decode_events(m.data + blocks[3].content, blocks[3].size, ev, 16);
    ASSERT_EQ(n, 2);
    ASSERT_EQ(ev[0].seq, 1);
    ASSERT_EQ(ev[1].seq, 6); /* 4 lost: 2..5 */
    decode_sp(m.data, &blocks[4], &sp);
    ASSERT_EQ(sp.count, 4);
    ASSERT_U64_EQ(sp.tid[2], 0xC);
    ASSERT_EQ(sp.seq[2], 6);
    ASSERT_U64_EQ(sp.tid[3], 0xD);
    ASSERT_EQ(sp.seq[3], 0);
    ASSERT_OK(nt_writer_finish(w));
    nb = walk_blocks(m.data, m.len, blocks, 16, &ended);
    ASSERT_EQ(nb, 6);
    decode_sp(m.data, &blocks[5], &sp);
    ASSERT_EQ(sp.count, 4);
    ASSERT_U64_EQ(sp.tid[3], 0xD);
    ASSERT_EQ(sp.seq[3], 3);
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.lost, 12);
    ASSERT_U64_EQ(st.events, 8);
    ASSERT_U64_EQ(st.sequence_points, 3);
    nt_writer_free(w);
}

TEST(stacks_are_interned_per_sequence_point_region)
{
    static const uint64_t s1[3] = { 0x10, 0x20, 0x30 };
    static const uint64_t s2[3] = { 0x10, 0x20, 0x31 };
    static const uint64_t s3[2] = { 0x10, 0x20 };
    struct mem_sink m;
    struct nt_writer *w = new_writer(&m, 0, 0);
    struct block blocks[16];
    struct dec_event ev[16];
    struct nt_writer_stats st;
    const uint8_t *p;
    struct nt_event e;
    uint32_t id;
    size_t nb;
    int ended;

    id = define_sample(w);
    sample(&e, id, 1, 2, 2000, s1, 3, managed);
    ASSERT_OK(nt_writer_write(w, &e));
    sample(&e, id, 1, 2, 2001, s2, 3, managed);
    ASSERT_OK(nt_writer_write(w, &e));
    sample(&e, id, 1, 2, 2002, s1, 3, managed);
    ASSERT_OK(nt_writer_write(w, &e));
    sample(&e, id, 1, 2, 2003, s3, 2, managed); /* a prefix is a different stack */
    ASSERT_OK(nt_writer_write(w, &e));
    sample(&e, id, 1, 2, 2004, NULL, 0, managed); /* no stack: id 0 */
    ASSERT_OK(nt_writer_write(w, &e));
    ASSERT_OK(nt_writer_sequence_point(w));
    sample(&e, id, 1, 2, 2005, s2, 3, managed);
    ASSERT_OK(nt_writer_write(w, &e));
    sample(&e, id, 1, 2, 2006, s1, 3, managed);
    ASSERT_OK(nt_writer_write(w, &e));
    ASSERT_OK(nt_writer_flush(w));

    nb = walk_blocks(m.data, m.len, blocks, 16, &ended);
    ASSERT_EQ(nb, 6);
    ASSERT_STR_EQ(blocks[1].name, "StackBlock");
    p = m.data + blocks[1].content;
    ASSERT_EQ(ld32(p), 1);
    ASSERT_EQ(ld32(p + 4), 3);
    ASSERT_EQ(ld32(p + 8), 24);
    ASSERT_U64_EQ(ld64(p + 12 + 16), 0x30);
    ASSERT_EQ(ld32(p + 36), 24);
    ASSERT_U64_EQ(ld64(p + 40 + 16), 0x31);
    ASSERT_EQ(ld32(p + 64), 16);
    ASSERT_EQ(decode_events(m.data + blocks[2].content, blocks[2].size, ev, 16), 5);
    ASSERT_EQ(ev[0].stack, 1);
    ASSERT_EQ(ev[1].stack, 2);
    ASSERT_EQ(ev[2].stack, 1);
    ASSERT_EQ(ev[3].stack, 3);
    ASSERT_EQ(ev[4].stack, 0);
    /* After the sequence point ids restart at 1, in first-use order. */
    ASSERT_STR_EQ(blocks[3].name, "SPBlock");
    ASSERT_STR_EQ(blocks[4].name, "StackBlock");
    p = m.data + blocks[4].content;
    ASSERT_EQ(ld32(p), 1);
    ASSERT_EQ(ld32(p + 4), 2);
    ASSERT_U64_EQ(ld64(p + 12 + 16), 0x31);
    ASSERT_U64_EQ(ld64(p + 40 + 16), 0x30);
    ASSERT_EQ(decode_events(m.data + blocks[5].content, blocks[5].size, ev, 16), 2);
    ASSERT_EQ(ev[0].stack, 1);
    ASSERT_EQ(ev[1].stack, 2);
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.stacks, 5);
    nt_writer_free(w);
}

TEST(sequence_points_follow_bytes_and_bound_timestamps)
{
    uint64_t stack[8];
    struct mem_sink m;
    struct nt_writer *w = new_writer(&m, 1024, 8192);
    struct block *blocks = calloc(MAX_BLOCKS, sizeof(*blocks));
    struct dec_event *ev = calloc(4096, sizeof(*ev));
    struct nt_writer_stats st;
    struct sp_entry sp;
    struct nt_event e;
    uint64_t max_before = 0, last_sp = 0;
    size_t nb, i, k, j, sps = 0;
    uint32_t id;
    int ended, after_sp = 1;

    id = define_sample(w);
    for (i = 0; i < 3000; i++) {
        for (j = 0; j < 8; j++) {
            stack[j] = 0x1000 + j + (i % 37) * 0x100;
        }
        /* Timestamps repeat and occasionally go backwards: the writer clamps them. */
        sample(&e, id, 1 + i % 3, 50 + i % 7, 2000 + i - (i % 5 == 4 ? 3 : 0), stack, 8, managed);
        ASSERT_OK(nt_writer_write(w, &e));
    }
    nt_writer_get_stats(w, &st);
    ASSERT_TRUE(st.sequence_points >= 2); /* from sequence_point_bytes alone */
    ASSERT_OK(nt_writer_finish(w));
    nb = walk_blocks(m.data, m.len, blocks, MAX_BLOCKS, &ended);
    ASSERT_TRUE(ended);
    for (i = 0; i < nb; i++) {
        if (strcmp(blocks[i].name, "SPBlock") == 0) {
            decode_sp(m.data, &blocks[i], &sp);
            ASSERT_TRUE(sp.ts > max_before);
            ASSERT_EQ(sp.count, 3);
            last_sp = sp.ts;
            sps++;
            after_sp = 1;
        } else if (strcmp(blocks[i].name, "StackBlock") == 0) {
            /* The first stack block of each region starts at id 1. */
            if (after_sp) {
                ASSERT_EQ(ld32(m.data + blocks[i].content), 1);
            } else {
                ASSERT_TRUE(ld32(m.data + blocks[i].content) > 1);
            }
            after_sp = 0;
        } else if (strcmp(blocks[i].name, "EventBlock") == 0) {
            k = decode_events(m.data + blocks[i].content, blocks[i].size, ev, 4096);
            for (j = 0; j < k; j++) {
                ASSERT_TRUE(ev[j].ts >= last_sp);
                ASSERT_TRUE(ev[j].ts >= max_before); /* non-decreasing */
                max_before = ev[j].ts;
            }
        }
    }
    ASSERT_U64_EQ(sps, st.sequence_points + 1);
    free(blocks);
    free(ev);
    nt_writer_free(w);
}

TEST(timestamps_are_clamped_forward)
{
    struct mem_sink m;
    struct nt_writer *w = new_writer(&m, 0, 0);
    struct block blocks[4];
    struct dec_event ev[8];
    struct nt_event e;
    uint32_t id;
    int ended;

    id = define_sample(w);
    sample(&e, id, 1, 2, 5000, NULL, 0, managed);
    ASSERT_OK(nt_writer_write(w, &e));
    e.timestamp = 4000;
    ASSERT_OK(nt_writer_write(w, &e));
    e.timestamp = 6000;
    ASSERT_OK(nt_writer_write(w, &e));
    ASSERT_OK(nt_writer_flush(w));
    ASSERT_EQ(walk_blocks(m.data, m.len, blocks, 4, &ended), 2);
    ASSERT_EQ(decode_events(m.data + blocks[1].content, blocks[1].size, ev, 8), 3);
    ASSERT_U64_EQ(ev[0].ts, 5000);
    ASSERT_U64_EQ(ev[1].ts, 5000);
    ASSERT_U64_EQ(ev[2].ts, 6000);
    ASSERT_EQ(ev[1].flags, NT_HDR_SORTED);
    nt_writer_free(w);
    free(m.data);

    /* Before the sync time: clamped to it, so SyncTimeQPC <= every event. */
    w = new_writer(&m, 0, 0);
    id = define_sample(w);
    sample(&e, id, 1, 2, 10, NULL, 0, managed);
    ASSERT_OK(nt_writer_write(w, &e));
    ASSERT_OK(nt_writer_flush(w));
    ASSERT_EQ(walk_blocks(m.data, m.len, blocks, 4, &ended), 2);
    ASSERT_EQ(decode_events(m.data + blocks[1].content, blocks[1].size, ev, 8), 1);
    ASSERT_U64_EQ(ev[0].ts, SYNC_TICKS);
    nt_writer_free(w);
}

TEST(stack_table_limit_forces_a_sequence_point)
{
    struct nt_writer_options opts;
    struct mem_sink m;
    struct nt_sink sink = mem_sink_init(&m);
    struct nt_writer *w = NULL;
    struct nt_writer_stats st;
    struct nt_event e;
    uint64_t frame;
    uint32_t id, i;

    m.store = 0; /* count bytes only */
    memset(&opts, 0, sizeof(opts));
    opts.sync_time_ticks = 1;
    opts.sequence_point_bytes = UINT64_MAX; /* only the table limit can cause one */
    ASSERT_OK(nt_writer_new(&opts, &sink, &w));
    id = define_sample(w);
    for (i = 0; i < (1u << 20) + 10; i++) {
        frame = 0x100000 + i;
        sample(&e, id, 1, 2, 10 + i, &frame, 1, managed);
        ASSERT_OK(nt_writer_write(w, &e));
    }
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.sequence_points, 1);
    ASSERT_U64_EQ(st.stacks, (1u << 20) + 10);
    nt_writer_free(w);
}

/* ------------------------------------------------------------------------------------------ */
/* Reorder window                                                                             */
/* ------------------------------------------------------------------------------------------ */

static const uint8_t external[4] = { 1, 0, 0, 0 };

/* Reads a finished stream with the library's reader. */
struct mem_source {
    const uint8_t *data;
    size_t len;
    size_t pos;
};

static ssize_t
mem_source_read(void *ctx, void *buf, size_t len)
{
    struct mem_source *s = ctx;
    size_t n = s->len - s->pos < len ? s->len - s->pos : len;

    memcpy(buf, s->data + s->pos, n);
    s->pos += n;
    return (ssize_t)n;
}

/*
 * An event whose payload is its index (u32) and whose stack is derived from it, so what comes
 * back names the event it was written as.
 */
struct tagged {
    uint64_t stack[6];
    uint8_t payload[4];
    struct nt_event ev;
};

static void
tagged_event(struct tagged *t, uint32_t id, uint32_t index, uint64_t ts)
{
    uint32_t d;

    for (d = 0; d < 6; d++) {
        t->stack[d] = 0x7000000 + (uint64_t)index * 0x100 + d;
    }
    put32(t->payload, index);
    sample(&t->ev, id, 1 + index % 3, 100 + index % 5, ts, t->stack, index % 7, t->payload);
}

/* Reads the next event back and checks that it is exactly the tagged event index at ts. */
static void
expect_tagged(struct nt_reader *r, uint32_t index, uint64_t ts, int sorted)
{
    struct nt_event ev;
    uint32_t d;

    ASSERT_EQ(nt_reader_next(r, &ev), 1);
    ASSERT_EQ(ev.payload_size, 4);
    ASSERT_EQ(ld32(ev.payload), index);
    ASSERT_U64_EQ(ev.timestamp, ts);
    ASSERT_EQ(ev.is_sorted, sorted);
    ASSERT_U64_EQ(ev.capture_thread_id, 1 + index % 3);
    ASSERT_U64_EQ(ev.thread_id, 100 + index % 5);
    ASSERT_EQ(ev.stack_depth, index % 7);
    for (d = 0; d < ev.stack_depth; d++) {
        ASSERT_U64_EQ(ev.stack[d], 0x7000000 + (uint64_t)index * 0x100 + d);
    }
}

static struct nt_reader *
open_reader(const struct mem_sink *m, struct mem_source *s)
{
    struct nt_source src = { mem_source_read, s };
    struct nt_reader *r = NULL;

    s->data = m->data;
    s->len = m->len;
    s->pos = 0;
    ASSERT_OK(nt_reader_new(&src, NULL, &r));
    return r;
}

TEST(reorder_window_sorts_events_that_come_within_it)
{
    enum { N = 400, WINDOW = 1000 };
    static uint64_t ts[N];
    static uint32_t order[N];
    struct mem_sink m;
    struct nt_writer *w = new_writer_window(&m, 0, 0, WINDOW, 0);
    struct nt_writer_stats st;
    struct nt_reader_stats rst;
    struct mem_source src;
    struct nt_reader *r;
    struct tagged t;
    struct nt_event ev;
    uint32_t id, i, j, seq[4] = { 0 };
    uint64_t x = 12345;

    id = define_sample(w);
    /* Up to half a window behind the newest, and every 7th a tie with the one before it. */
    for (i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ts[i] = 100000 + 10 * (uint64_t)i - (x >> 33) % (WINDOW / 2);
        if (i % 7 == 6) {
            ts[i] = ts[i - 1];
        }
        tagged_event(&t, id, i, ts[i]);
        ASSERT_OK(nt_writer_write(w, &t.ev));
    }
    nt_writer_get_stats(w, &st);
    ASSERT_TRUE(st.events < N); /* the newest are still held */
    ASSERT_OK(nt_writer_finish(w));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.events, N);
    ASSERT_U64_EQ(st.late, 0);

    /* Expected: a stable sort of the arrivals by timestamp (insertion sort keeps ties). */
    for (i = 0; i < N; i++) {
        for (j = i; j > 0 && ts[order[j - 1]] > ts[i]; j--) {
            order[j] = order[j - 1];
        }
        order[j] = i;
    }
    r = open_reader(&m, &src);
    for (i = 0; i < N; i++) {
        expect_tagged(r, order[i], ts[order[i]], 1);
    }
    ASSERT_EQ(nt_reader_next(r, &ev), 0);
    nt_reader_get_stats(r, &rst);
    ASSERT_U64_EQ(rst.lost_events, 0); /* sequence numbers follow file order */
    nt_reader_free(r);

    r = open_reader(&m, &src);
    while (nt_reader_next(r, &ev) == 1) {
        ASSERT_EQ(ev.sequence, ++seq[ev.capture_thread_id]);
    }
    nt_reader_free(r);
    nt_writer_free(w);
    free(m.data);
}

TEST(reorder_window_keeps_arrival_order_of_ties)
{
    static const uint64_t ts[8] = { 5000, 5000, 3000, 5000, 3000, 5000, 4000, 3000 };
    static const uint32_t want[8] = { 2, 4, 7, 6, 0, 1, 3, 5 };
    struct mem_sink m;
    struct nt_writer *w = new_writer_window(&m, 0, 0, 1000000, 0);
    struct mem_source src;
    struct nt_reader *r;
    struct tagged t;
    struct nt_event ev;
    uint32_t id, i;

    id = define_sample(w);
    for (i = 0; i < 8; i++) {
        tagged_event(&t, id, i, ts[i]);
        ASSERT_OK(nt_writer_write(w, &t.ev));
    }
    ASSERT_OK(nt_writer_finish(w));
    r = open_reader(&m, &src);
    for (i = 0; i < 8; i++) {
        expect_tagged(r, want[i], ts[want[i]], 1);
    }
    ASSERT_EQ(nt_reader_next(r, &ev), 0);
    nt_reader_free(r);
    nt_writer_free(w);
    free(m.data);
}

TEST(event_later_than_the_window_keeps_its_time_unsorted)
{
    struct mem_sink m;
    struct nt_writer *w = new_writer_window(&m, 0, 0, 1000, 0);
    struct nt_writer_stats st;
    struct nt_reader_stats rst;
    struct mem_source src;
    struct nt_reader *r;
    struct tagged t;
    struct nt_event ev;
    uint32_t id;

    id = define_sample(w);
    tagged_event(&t, id, 0, 10000);
    ASSERT_OK(nt_writer_write(w, &t.ev));
    tagged_event(&t, id, 1, 12000); /* releases 10000 */
    ASSERT_OK(nt_writer_write(w, &t.ev));
    tagged_event(&t, id, 2, 13000); /* releases 12000 */
    ASSERT_OK(nt_writer_write(w, &t.ev));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.events, 2);
    tagged_event(&t, id, 3, 11500); /* older than 12000, already written: late */
    ASSERT_OK(nt_writer_write(w, &t.ev));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.events, 3);
    ASSERT_U64_EQ(st.late, 1);
    tagged_event(&t, id, 4, 14000);
    ASSERT_OK(nt_writer_write(w, &t.ev));
    tagged_event(&t, id, 5, 14000); /* a tie with the newest is not late */
    ASSERT_OK(nt_writer_write(w, &t.ev));
    ASSERT_OK(nt_writer_finish(w));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.events, 6);
    ASSERT_U64_EQ(st.late, 1);

    r = open_reader(&m, &src);
    expect_tagged(r, 0, 10000, 1);
    expect_tagged(r, 1, 12000, 1);
    expect_tagged(r, 3, 11500, 0); /* its true time, IsSorted clear */
    expect_tagged(r, 2, 13000, 1);
    expect_tagged(r, 4, 14000, 1);
    expect_tagged(r, 5, 14000, 1);
    ASSERT_EQ(nt_reader_next(r, &ev), 0);
    nt_reader_get_stats(r, &rst);
    ASSERT_U64_EQ(rst.lost_events, 0);
    nt_reader_free(r);
    nt_writer_free(w);
    free(m.data);

    /* Before the sync time is before the last time written too: true time, not clamped. */
    w = new_writer_window(&m, 0, 0, 1000, 0);
    id = define_sample(w);
    tagged_event(&t, id, 0, 10);
    ASSERT_OK(nt_writer_write(w, &t.ev));
    ASSERT_OK(nt_writer_finish(w));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.late, 1);
    r = open_reader(&m, &src);
    expect_tagged(r, 0, 10, 0);
    nt_reader_free(r);
    nt_writer_free(w);
    free(m.data);
}

TEST(reorder_byte_cap_writes_the_oldest_early)
{
    enum { PAYLOAD = 1000, CAP = 4096 };
    static uint8_t payload[PAYLOAD];
    struct mem_sink m;
    struct nt_writer *w = new_writer_window(&m, 0, 0, UINT64_MAX / 2, CAP);
    struct nt_writer_stats st;
    struct mem_source src;
    struct nt_reader *r;
    struct nt_event e, ev;
    uint32_t id, i, held;

    id = define_sample(w);
    for (i = 0; i < 40; i++) {
        put32(payload, i);
        sample(&e, id, 1, 2, 5000 + 10 * (uint64_t)i, NULL, 0, payload);
        e.payload_size = PAYLOAD;
        ASSERT_OK(nt_writer_write(w, &e));
        nt_writer_get_stats(w, &st);
        held = i + 1 - (uint32_t)st.events;
        /* The window alone would hold everything; each event costs more than PAYLOAD. */
        ASSERT_TRUE(held >= 1);
        ASSERT_TRUE(held * PAYLOAD <= CAP);
    }
    ASSERT_TRUE(st.events >= 40 - CAP / PAYLOAD);
    /* the high-water mark passed the cap (which released the oldest), by less than one event */
    ASSERT_TRUE(st.held_bytes_max > CAP && st.held_bytes_max < CAP + PAYLOAD + 512);
    /* Written early, so an event older than those is late now. */
    put32(payload, 40);
    sample(&e, id, 1, 2, 5001, NULL, 0, payload);
    e.payload_size = PAYLOAD;
    ASSERT_OK(nt_writer_write(w, &e));
    ASSERT_OK(nt_writer_finish(w));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.events, 41);
    ASSERT_U64_EQ(st.late, 1);
    r = open_reader(&m, &src);
    for (i = 0; i < 41; i++) {
        ASSERT_EQ(nt_reader_next(r, &ev), 1);
        if (ld32(ev.payload) == 40) {
            ASSERT_U64_EQ(ev.timestamp, 5001);
            ASSERT_EQ(ev.is_sorted, 0);
        } else {
            ASSERT_U64_EQ(ev.timestamp, 5000 + 10 * (uint64_t)ld32(ev.payload));
            ASSERT_EQ(ev.is_sorted, 1);
        }
    }
    ASSERT_EQ(nt_reader_next(r, &ev), 0);
    nt_reader_free(r);
    nt_writer_free(w);
    free(m.data);
}

TEST(reorder_poll_releases_by_time_and_flush_does_not)
{
    const uint64_t window = 1000000000, base = 50ull * 1000000000;
    struct mem_sink m;
    struct nt_writer *w = new_writer_window(&m, 0, 0, window, 0);
    struct nt_writer_stats st;
    struct mem_source src;
    struct nt_reader *r;
    struct tagged t;
    struct nt_event ev;
    uint32_t id;

    id = define_sample(w);
    tagged_event(&t, id, 0, base + 100);
    ASSERT_OK(nt_writer_write(w, &t.ev));
    tagged_event(&t, id, 1, base);
    ASSERT_OK(nt_writer_write(w, &t.ev));
    ASSERT_OK(nt_writer_flush(w));            /* only what the window released: nothing */
    ASSERT_OK(nt_writer_poll(w, window - 1)); /* now - window would wrap: nothing */
    ASSERT_OK(nt_writer_poll(w, base + window - 1));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.events, 0);
    ASSERT_OK(nt_writer_poll(w, base + window));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.events, 1);
    ASSERT_OK(nt_writer_poll(w, base + window + 99));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.events, 1);
    ASSERT_OK(nt_writer_poll(w, base + window + 100));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.events, 2);
    ASSERT_OK(nt_writer_finish(w));
    r = open_reader(&m, &src);
    expect_tagged(r, 1, base, 1);
    expect_tagged(r, 0, base + 100, 1);
    ASSERT_EQ(nt_reader_next(r, &ev), 0);
    nt_reader_free(r);
    nt_writer_free(w);
    free(m.data);
}

/* Holds a tagged event (tagged_event()) and returns how many events w has written. */
static uint64_t
write_tagged(struct nt_writer *w, uint32_t id, uint32_t index, uint64_t ts)
{
    struct nt_writer_stats st;
    struct tagged t;

    tagged_event(&t, id, index, ts);
    ASSERT_OK(nt_writer_write(w, &t.ev));
    nt_writer_get_stats(w, &st);
    return st.events;
}

/* A merge of sources that lag (ipc/merge.c) bounds what the window releases: newer arrivals
 * and the clock pass the held events by more than the window, and they stay held until the
 * limit rises, so a lagging source's event at the limit comes in time. */
TEST(release_limit_holds_what_the_window_would_release)
{
    struct mem_sink mem;
    struct nt_writer *wr = new_writer_window(&mem, 0, 0, 1000, 0);
    struct nt_writer_stats st;
    struct mem_source in;
    struct nt_reader *rd;
    struct nt_event ev;
    uint32_t meta = define_sample(wr), k;
    static const uint32_t order[] = { 0, 3, 1, 2 };
    static const uint64_t times[] = { 9000, 10000, 10500, 20000 };

    nt_writer_set_release_limit(wr, 10000);
    ASSERT_U64_EQ(write_tagged(wr, meta, 0, 9000), 0);
    ASSERT_U64_EQ(write_tagged(wr, meta, 1, 10500), 1); /* 9000, below the limit */
    /* the window alone would release 10500 now, and so would the clock */
    ASSERT_U64_EQ(write_tagged(wr, meta, 2, 20000), 1);
    ASSERT_OK(nt_writer_poll(wr, 50000));
    /* the lagging source, at its promise: in time */
    ASSERT_U64_EQ(write_tagged(wr, meta, 3, 10000), 2);
    nt_writer_set_release_limit(wr, 15000);
    ASSERT_OK(nt_writer_poll(wr, 50000)); /* 10500; 20000 waits for the limit */
    nt_writer_get_stats(wr, &st);
    ASSERT_U64_EQ(st.events, 3);
    nt_writer_set_release_limit(wr, UINT64_MAX);
    ASSERT_OK(nt_writer_finish(wr));
    nt_writer_get_stats(wr, &st);
    ASSERT_U64_EQ(st.late, 0);
    rd = open_reader(&mem, &in);
    for (k = 0; k < 4; k++) { /* all in time order, each sorted */
        expect_tagged(rd, order[k], times[k], 1);
    }
    ASSERT_EQ(nt_reader_next(rd, &ev), 0);
    nt_reader_free(rd);
    nt_writer_free(wr);
    free(mem.data);
}

TEST(reorder_sequence_point_and_finish_write_everything_held)
{
    struct mem_sink m;
    struct nt_writer *w = new_writer_window(&m, 0, 0, UINT64_MAX / 2, 0);
    struct block blocks[8];
    struct dec_event ev[8];
    struct nt_writer_stats st;
    struct sp_entry sp;
    struct tagged t;
    size_t nb;
    uint32_t id;
    int ended;

    id = define_sample(w);
    tagged_event(&t, id, 0, 3000);
    ASSERT_OK(nt_writer_write(w, &t.ev));
    tagged_event(&t, id, 1, 2000);
    ASSERT_OK(nt_writer_write(w, &t.ev));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.events, 0);
    ASSERT_OK(nt_writer_sequence_point(w));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.events, 2);
    tagged_event(&t, id, 2, 4000);
    ASSERT_OK(nt_writer_write(w, &t.ev));
    ASSERT_OK(nt_writer_finish(w));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.events, 3);
    ASSERT_U64_EQ(st.late, 0);

    /* meta, stacks, events, SP; stacks, events, SP; end */
    nb = walk_blocks(m.data, m.len, blocks, 8, &ended);
    ASSERT_TRUE(ended);
    ASSERT_EQ(nb, 7);
    ASSERT_EQ(decode_events(m.data + blocks[2].content, blocks[2].size, ev, 8), 2);
    ASSERT_U64_EQ(ev[0].ts, 2000);
    ASSERT_U64_EQ(ev[1].ts, 3000);
    decode_sp(m.data, &blocks[3], &sp);
    ASSERT_TRUE(sp.ts > 3000);
    ASSERT_EQ(decode_events(m.data + blocks[5].content, blocks[5].size, ev, 8), 1);
    ASSERT_U64_EQ(ev[0].ts, 4000);
    decode_sp(m.data, &blocks[6], &sp);
    ASSERT_TRUE(sp.ts > 4000);
    nt_writer_free(w);
    free(m.data);

    /* Freeing releases held events without writing them. A leak shows when this case runs
     * alone (in-process) in the sanitizer build: test-nettrace-writer CASE. */
    w = new_writer_window(&m, 0, 0, UINT64_MAX / 2, 0);
    id = define_sample(w);
    tagged_event(&t, id, 5, 3000);
    ASSERT_OK(nt_writer_write(w, &t.ev));
    ASSERT_OK(nt_writer_flush(w));
    nb = m.writes;
    nt_writer_free(w);
    ASSERT_EQ(m.writes, nb);
    free(m.data);
}

TEST(reorder_window_checks_events_before_holding_them)
{
    static uint64_t deep[NT_MAX_STACK_DEPTH + 1];
    struct mem_sink m;
    struct nt_writer *w = new_writer_window(&m, 0, 0, 1000, 0);
    struct nt_writer_stats st;
    struct nt_event e;
    uint32_t id;

    id = define_sample(w);
    sample(&e, id + 1, 1, 2, 2000, NULL, 0, managed);
    ASSERT_EQ(nt_writer_write(w, &e), -EINVAL);
    sample(&e, id, 1, 2, 2000, deep, NT_MAX_STACK_DEPTH + 1, managed);
    ASSERT_EQ(nt_writer_write(w, &e), -EINVAL);
    sample(&e, id, 1, 2, 2000, NULL, 0, NULL);
    ASSERT_EQ(nt_writer_write(w, &e), -EINVAL);
    ASSERT_OK(nt_writer_finish(w));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.events, 0);
    ASSERT_EQ(nt_writer_write(w, &e), -EINVAL); /* finished */
    nt_writer_free(w);
    free(m.data);
}

/*
 * Many threads' events, most a little late and some later than the window, with small blocks
 * and sequence-point regions so that sequence points fall in the middle of releases. Every
 * event comes back once with its own time; the sorted ones never go backwards; each unsorted
 * one is older than a sorted one before it, and there are as many as the writer counted late.
 */
TEST(reorder_window_random_arrivals_come_back_whole)
{
    enum { N = 5000, WINDOW = 2000 };
    static uint64_t ts[N], due[N];
    static uint32_t arrival[N];
    static uint8_t seen[N];
    struct nt_writer_options opts;
    struct mem_sink m;
    struct nt_writer *w;
    struct nt_writer_stats st;
    struct mem_source src;
    struct nt_reader *r;
    struct tagged t;
    struct nt_event ev;
    uint64_t x = 99, max_sorted = 0, unsorted = 0;
    uint32_t id, i, j, k;

    fixed_options(&opts);
    opts.block_bytes = 512;
    opts.sequence_point_bytes = 4096;
    opts.reorder_window_ns = WINDOW;
    w = new_writer_with(&m, &opts);
    id = define_sample(w);
    /* Event i happens at ts[i] and reaches the writer at due[i]: arrival order sorts by due. */
    for (i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ts[i] = 10000 + 10 * (uint64_t)i;
        due[i] = ts[i] + ((x >> 40) % 20 == 0 ? (x >> 20) % (3 * WINDOW) : (x >> 20) % WINDOW);
        for (j = i; j > 0 && due[arrival[j - 1]] > due[i]; j--) {
            arrival[j] = arrival[j - 1];
        }
        arrival[j] = i;
    }
    for (i = 0; i < N; i++) {
        k = arrival[i];
        tagged_event(&t, id, k, ts[k]);
        ASSERT_OK(nt_writer_write(w, &t.ev));
        if (i % 500 == 499) {
            ASSERT_OK(nt_writer_poll(w, due[k]));
        }
    }
    ASSERT_OK(nt_writer_finish(w));
    nt_writer_get_stats(w, &st);
    ASSERT_U64_EQ(st.events, N);
    ASSERT_TRUE(st.late > 0);
    ASSERT_TRUE(st.sequence_points > 3);

    r = open_reader(&m, &src);
    for (i = 0; i < N; i++) {
        ASSERT_EQ(nt_reader_next(r, &ev), 1);
        k = ld32(ev.payload);
        ASSERT_TRUE(k < N && !seen[k]);
        seen[k] = 1;
        ASSERT_U64_EQ(ev.timestamp, ts[k]);
        ASSERT_EQ(ev.stack_depth, k % 7);
        if (ev.is_sorted) {
            ASSERT_TRUE(ev.timestamp >= max_sorted);
            max_sorted = ev.timestamp;
        } else {
            ASSERT_TRUE(ev.timestamp < max_sorted);
            unsorted++;
        }
    }
    ASSERT_EQ(nt_reader_next(r, &ev), 0);
    ASSERT_U64_EQ(unsorted, st.late);
    nt_reader_free(r);
    nt_writer_free(w);
    free(m.data);
}

/* A fixed sequence of calls without a window; the same calls must give the same bytes. */
static void
window0_script(struct nt_writer *w)
{
    uint64_t stack[12];
    uint8_t info[256];
    struct nt_payload p;
    struct nt_event e;
    uint32_t id, pid, d, i;

    ASSERT_OK(nt_writer_define(w, nt_known_event_desc(NT_KNOWN_THREAD_SAMPLE), &id));
    ASSERT_OK(nt_writer_define(w, nt_known_event_desc(NT_KNOWN_PROCESS_INFO), &pid));
    nt_payload_init(&p, info, sizeof(info));
    nt_payload_process_info(&p, "app --flag", "Linux", "X64");
    ASSERT_OK(p.err);
    for (i = 0; i < 300; i++) {
        for (d = 0; d < 12; d++) {
            stack[d] = 0x400000 + (i % 9) * 0x1000 + d * 0x10;
        }
        memset(&e, 0, sizeof(e));
        e.metadata_id = id;
        e.capture_thread_id = 1 + i % 3;
        e.thread_id = 50 + i % 5;
        e.processor = i % 4 == 0 ? 0xFFFFFFFFu : i % 4;
        /* Backwards now and then, and once before the sync time: the writer clamps. */
        e.timestamp = i == 5 ? 10 : 2000 + i * 10 - (i % 7 == 3 ? 25 : 0);
        e.stack = stack;
        e.stack_depth = (i % 4) * 3;
        e.payload = i % 2 ? managed : external;
        e.payload_size = 4;
        if (i % 37 == 11) {
            e.metadata_id = pid;
            e.activity_id[0] = (uint8_t)i;
            e.related_activity_id[15] = (uint8_t)(i + 1);
            e.payload = info;
            e.payload_size = (uint32_t)p.len;
        }
        ASSERT_OK(nt_writer_write(w, &e));
        if (i % 50 == 49) {
            ASSERT_OK(nt_writer_note_lost(w, 9 + i / 50, 3));
            ASSERT_OK(nt_writer_note_lost(w, 1, 2));
        }
        if (i % 100 == 0) {
            ASSERT_OK(nt_writer_sequence_point(w));
        }
        if (i % 60 == 30) {
            ASSERT_OK(nt_writer_flush(w));
        }
        if (i % 80 == 40) {
            ASSERT_OK(nt_writer_poll(w, UINT64_MAX));
        }
    }
    ASSERT_OK(nt_writer_finish(w));
}

/* FNV-1a, 64 bits. */
static uint64_t
fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 0xCBF29CE484222325ull;

    while (n-- > 0) {
        h = (h ^ *p++) * 0x100000001B3ull;
    }
    return h;
}

TEST(window_zero_writes_the_same_bytes_as_before)
{
    struct nt_writer_options opts;
    struct mem_sink a, b;
    struct nt_writer *w;

    fixed_options(&opts);
    opts.block_bytes = 256;
    opts.sequence_point_bytes = 2048;
    w = new_writer_with(&a, &opts);
    window0_script(w);
    nt_writer_free(w);
    /* Length and hash of what the writer wrote for these calls before it had a window (since
     * losses before a thread's first event no longer force a sequence point: 24282 bytes
     * before). */
    ASSERT_EQ(a.len, 23702);
    ASSERT_U64_EQ(fnv1a(a.data, a.len), 0xC5E18BFE348820E0ull);

    /* reorder_max_bytes means nothing without a window. */
    opts.reorder_window_ns = 0;
    opts.reorder_max_bytes = 1;
    w = new_writer_with(&b, &opts);
    window0_script(w);
    nt_writer_free(w);
    ASSERT_EQ(b.len, a.len);
    ASSERT_MEM_EQ(b.data, a.data, a.len);
    free(a.data);
    free(b.data);
}

/* ------------------------------------------------------------------------------------------ */
/* Errors                                                                                     */
/* ------------------------------------------------------------------------------------------ */

TEST(sink_error_is_sticky)
{
    static const uint64_t stack[2] = { 1, 2 };
    struct nt_writer_options opts;
    struct mem_sink m;
    struct nt_sink sink = mem_sink_init(&m);
    struct nt_writer *w = NULL;
    struct nt_event e;
    uint32_t id;
    int rc = 0, i;

    /* The header itself fails: no writer. */
    m.fail_at = 1;
    m.fail_rc = -ENOSPC;
    memset(&opts, 0, sizeof(opts));
    opts.block_bytes = 256;
    ASSERT_EQ(nt_writer_new(&opts, &sink, &w), -ENOSPC);
    ASSERT_TRUE(w == NULL);

    sink = mem_sink_init(&m);
    m.fail_at = 3; /* header and the metadata block succeed, the stack block fails */
    m.fail_rc = -EPIPE;
    ASSERT_OK(nt_writer_new(&opts, &sink, &w));
    id = define_sample(w);
    for (i = 0; i < 1000 && rc == 0; i++) {
        sample(&e, id, 1, 2, 2000 + (uint64_t)i, stack, 2, managed);
        rc = nt_writer_write(w, &e);
    }
    ASSERT_EQ(rc, -EPIPE);
    ASSERT_EQ(m.writes, 3);
    ASSERT_EQ(nt_writer_write(w, &e), -EPIPE);
    ASSERT_EQ(nt_writer_define(w, nt_known_event_desc(NT_KNOWN_PROCESS_INFO), &id), -EPIPE);
    ASSERT_EQ(nt_writer_flush(w), -EPIPE);
    ASSERT_EQ(nt_writer_poll(w, UINT64_MAX), -EPIPE);
    ASSERT_EQ(nt_writer_sequence_point(w), -EPIPE);
    ASSERT_EQ(nt_writer_finish(w), -EPIPE);
    ASSERT_EQ(m.writes, 3); /* nothing more reached the sink */
    nt_writer_free(w);
}

TEST(bad_arguments_are_rejected)
{
    static const uint64_t stack[1] = { 1 };
    static uint64_t deep[NT_MAX_STACK_DEPTH + 1];
    static uint8_t big[NT_MAX_PAYLOAD + 1];
    struct mem_sink m;
    struct nt_sink sink = mem_sink_init(&m);
    struct nt_sink no_write = { NULL, NULL };
    struct nt_writer *w = NULL;
    struct nt_event e;
    uint32_t id;

    ASSERT_EQ(nt_writer_new(NULL, &sink, NULL), -EINVAL);
    ASSERT_EQ(nt_writer_new(NULL, NULL, &w), -EINVAL);
    ASSERT_EQ(nt_writer_new(NULL, &no_write, &w), -EINVAL);
    ASSERT_TRUE(w == NULL);
    ASSERT_EQ(m.writes, 0);

    w = new_writer(&m, 0, 0);
    id = define_sample(w);
    sample(&e, 0, 1, 2, 2000, NULL, 0, managed);
    ASSERT_EQ(nt_writer_write(w, &e), -EINVAL); /* metadata id 0 */
    e.metadata_id = id + 1;
    ASSERT_EQ(nt_writer_write(w, &e), -EINVAL); /* never defined */
    e.metadata_id = id;
    e.payload = big;
    e.payload_size = NT_MAX_PAYLOAD + 1;
    ASSERT_EQ(nt_writer_write(w, &e), -EINVAL);
    e.payload = NULL;
    e.payload_size = 4;
    ASSERT_EQ(nt_writer_write(w, &e), -EINVAL);
    e.payload = managed;
    e.stack = deep;
    e.stack_depth = NT_MAX_STACK_DEPTH + 1;
    ASSERT_EQ(nt_writer_write(w, &e), -EINVAL);
    e.stack = NULL;
    e.stack_depth = 1;
    ASSERT_EQ(nt_writer_write(w, &e), -EINVAL);
    ASSERT_EQ(nt_writer_write(w, NULL), -EINVAL);
    ASSERT_EQ(nt_writer_write(NULL, &e), -EINVAL);
    /* Limits themselves are fine. */
    e.stack = deep;
    e.stack_depth = NT_MAX_STACK_DEPTH;
    e.payload = big;
    e.payload_size = NT_MAX_PAYLOAD;
    ASSERT_OK(nt_writer_write(w, &e));
    e.stack = stack;
    ASSERT_EQ(nt_writer_note_lost(NULL, 1, 1), -EINVAL);
    ASSERT_EQ(nt_writer_flush(NULL), -EINVAL);
    ASSERT_EQ(nt_writer_poll(NULL, 0), -EINVAL);
    ASSERT_EQ(nt_writer_sequence_point(NULL), -EINVAL);
    ASSERT_EQ(nt_writer_finish(NULL), -EINVAL);
    nt_writer_free(NULL);
    nt_writer_free(w);
}

TEST(bad_descriptions_are_rejected)
{
    static const struct nt_field v6[] = { { "V", NT_TYPE_VARINT, NT_TYPE_EMPTY, NULL, 0, 0 } };
    static const struct nt_field arr2[] = { { "A", NT_TYPE_ARRAY, NT_TYPE_ARRAY, NULL, 0, 0 } };
    static const struct nt_field arr0[] = { { "A", NT_TYPE_ARRAY, NT_TYPE_EMPTY, NULL, 0, 0 } };
    static const struct nt_field code2[] = { { "A", (enum nt_type)2, NT_TYPE_EMPTY, NULL, 0, 0 } };
    static const struct nt_field badname[] = { { "\xC0\xAF", NT_TYPE_INT32, NT_TYPE_EMPTY, NULL, 0,
                                                 0 } };
    static const struct nt_field nullobj[] = { { "O", NT_TYPE_OBJECT, NT_TYPE_EMPTY, NULL, 2, 0 } };
    struct nt_field chain[10];
    struct nt_event_desc d = { "P", 1, "E", 0, 0, 4, 0, NULL, 0, 0 };
    struct mem_sink m;
    struct nt_writer *w = new_writer(&m, 0, 0);
    struct nt_writer_stats st;
    char *huge;
    uint32_t id = 77;
    int i;

    ASSERT_EQ(nt_writer_define(w, NULL, &id), -EINVAL);
    ASSERT_EQ(nt_writer_define(w, &d, NULL), -EINVAL);
    ASSERT_EQ(nt_writer_define(NULL, &d, &id), -EINVAL);
    d.provider = NULL;
    ASSERT_EQ(nt_writer_define(w, &d, &id), -EINVAL);
    d.provider = "Bad\xED\xA0\x80"; /* a UTF-16 surrogate in UTF-8 */
    ASSERT_EQ(nt_writer_define(w, &d, &id), -EINVAL);
    d.provider = "P";
    d.name = "\xE2\x82"; /* truncated */
    ASSERT_EQ(nt_writer_define(w, &d, &id), -EINVAL);
    d.name = "E";
    d.field_count = 1;
    d.fields = NULL;
    ASSERT_EQ(nt_writer_define(w, &d, &id), -EINVAL);
    d.fields = v6;
    ASSERT_EQ(nt_writer_define(w, &d, &id), -EINVAL);
    d.fields = arr2;
    ASSERT_EQ(nt_writer_define(w, &d, &id), -EINVAL);
    d.fields = arr0;
    ASSERT_EQ(nt_writer_define(w, &d, &id), -EINVAL);
    d.fields = code2;
    ASSERT_EQ(nt_writer_define(w, &d, &id), -EINVAL);
    d.fields = badname;
    ASSERT_EQ(nt_writer_define(w, &d, &id), -EINVAL);
    d.fields = nullobj;
    ASSERT_EQ(nt_writer_define(w, &d, &id), -EINVAL);
    /* Nesting: 8 levels of objects below the top are fine, 9 are not. */
    for (i = 0; i < 10; i++) {
        chain[i].name = "L";
        chain[i].type = i < 9 ? NT_TYPE_OBJECT : NT_TYPE_INT32;
        chain[i].element_type = NT_TYPE_EMPTY;
        chain[i].fields = i < 9 ? &chain[i + 1] : NULL;
        chain[i].field_count = i < 9 ? 1 : 0;
        chain[i].fixed_count = 0;
    }
    d.fields = &chain[0];
    ASSERT_EQ(nt_writer_define(w, &d, &id), -EINVAL);
    d.fields = &chain[1];
    ASSERT_OK(nt_writer_define(w, &d, &id));
    ASSERT_EQ(id, 1);
    /* A record over 64 KB. */
    huge = malloc(40000);
    memset(huge, 'x', 39999);
    huge[39999] = '\0';
    d.fields = NULL;
    d.field_count = 0;
    d.name = huge;
    ASSERT_EQ(nt_writer_define(w, &d, &id), -EINVAL);
    free(huge);
    ASSERT_EQ(id, 1); /* untouched by the failures */
    nt_writer_get_stats(w, &st);
    ASSERT_OK(nt_writer_flush(w));
    ASSERT_EQ(m.writes, 2); /* header + one metadata block with the one good record */
    nt_writer_free(w);
}

TEST(define_returns_the_same_id_for_the_same_event)
{
    struct nt_event_desc d = { "Prov", 3, "Name", 0, 1, 4, 0, NULL, 0, 0 };
    struct mem_sink m;
    struct nt_writer *w = new_writer(&m, 0, 0);
    struct block blocks[4];
    struct dec_event ev[8];
    uint32_t a, b, c, e;
    int ended;

    ASSERT_OK(nt_writer_define(w, &d, &a));
    ASSERT_OK(nt_writer_define(w, &d, &b));
    ASSERT_EQ(a, b);
    d.version = 2;
    ASSERT_OK(nt_writer_define(w, &d, &c));
    ASSERT_EQ(c, a + 1);
    d.version = 1;
    d.name = NULL; /* NULL and "" are the same name */
    ASSERT_OK(nt_writer_define(w, &d, &e));
    ASSERT_EQ(e, c + 1);
    d.name = "";
    ASSERT_OK(nt_writer_define(w, &d, &b));
    ASSERT_EQ(b, e);
    ASSERT_OK(nt_writer_flush(w));
    ASSERT_EQ(walk_blocks(m.data, m.len, blocks, 4, &ended), 1);
    ASSERT_EQ(decode_events(m.data + blocks[0].content, blocks[0].size, ev, 8), 3);
    ASSERT_EQ(ld32(ev[0].payload), 1);
    ASSERT_EQ(ld32(ev[1].payload), 2);
    ASSERT_EQ(ld32(ev[2].payload), 3);
    nt_writer_free(w);
}

TEST(records_larger_than_a_block_get_their_own_block)
{
    static uint8_t payload[3000];
    struct mem_sink m;
    struct nt_writer *w = new_writer(&m, 100, 0);
    struct block blocks[16];
    struct dec_event ev[4];
    struct nt_event e;
    uint32_t id;
    size_t nb;
    int ended;

    memset(payload, 0x5A, sizeof(payload));
    id = define_sample(w);
    sample(&e, id, 1, 2, 2000, NULL, 0, managed);
    ASSERT_OK(nt_writer_write(w, &e));
    e.payload = payload;
    e.payload_size = sizeof(payload);
    ASSERT_OK(nt_writer_write(w, &e));
    e.payload = managed;
    e.payload_size = 4;
    ASSERT_OK(nt_writer_write(w, &e));
    ASSERT_OK(nt_writer_finish(w));
    nb = walk_blocks(m.data, m.len, blocks, 16, &ended);
    ASSERT_TRUE(ended);
    ASSERT_EQ(nb, 5); /* metadata, three event blocks (no stacks), the final SP */
    ASSERT_STR_EQ(blocks[1].name, "EventBlock");
    ASSERT_EQ(decode_events(m.data + blocks[1].content, blocks[1].size, ev, 4), 1);
    ASSERT_EQ(decode_events(m.data + blocks[2].content, blocks[2].size, ev, 4), 1);
    ASSERT_EQ(ev[0].payload_size, sizeof(payload));
    ASSERT_MEM_EQ(ev[0].payload, payload, sizeof(payload));
    ASSERT_TRUE(blocks[2].size > 100);
    ASSERT_EQ(decode_events(m.data + blocks[3].content, blocks[3].size, ev, 4), 1);
    ASSERT_EQ(ev[0].payload_size, 4);
    ASSERT_TRUE(blocks[3].size <= 100);
    ASSERT_STR_EQ(blocks[nb - 1].name, "SPBlock");
    nt_writer_free(w);
}

TEST(fd_sink_and_source_carry_the_same_bytes)
{
    struct nt_writer_options opts;
    struct mem_sink m;
    struct nt_sink msink = mem_sink_init(&m);
    struct nt_sink fsink;
    struct nt_source src;
    struct nt_writer *a = NULL, *b = NULL;
    struct nt_event e;
    uint8_t back[4096];
    size_t got = 0;
    ssize_t n;
    uint32_t id;
    int fd = -1, bad = 1000;
    FILE *f = tmpfile();

    ASSERT_TRUE(f != NULL);
    fd = fileno(f);
    memset(&opts, 0, sizeof(opts));
    opts.sync_time_ticks = 5;
    opts.sync_time_unix_ns = 1;
    opts.process_id = 1;
    opts.number_of_processors = 1;
    nt_sink_fd(&fsink, &fd);
    ASSERT_OK(nt_writer_new(&opts, &msink, &a));
    ASSERT_OK(nt_writer_new(&opts, &fsink, &b));
    ASSERT_OK(nt_writer_define(a, nt_known_event_desc(NT_KNOWN_THREAD_SAMPLE), &id));
    ASSERT_OK(nt_writer_define(b, nt_known_event_desc(NT_KNOWN_THREAD_SAMPLE), &id));
    sample(&e, id, 1, 2, 100, NULL, 0, managed);
    ASSERT_OK(nt_writer_write(a, &e));
    ASSERT_OK(nt_writer_write(b, &e));
    ASSERT_OK(nt_writer_finish(a));
    ASSERT_OK(nt_writer_finish(b));
    ASSERT_TRUE(lseek(fd, 0, SEEK_SET) == 0);
    nt_source_fd(&src, &fd);
    while ((n = src.read(src.ctx, back + got, sizeof(back) - got)) > 0) {
        got += (size_t)n;
    }
    ASSERT_EQ(n, 0);
    ASSERT_EQ(got, m.len);
    ASSERT_MEM_EQ(back, m.data, got);
    nt_writer_free(a);
    nt_writer_free(b);
    fclose(f);

    /* A bad descriptor: the sink's errno comes back from nt_writer_new. */
    nt_sink_fd(&fsink, &bad);
    b = NULL;
    ASSERT_EQ(nt_writer_new(&opts, &fsink, &b), -EBADF);
    ASSERT_TRUE(b == NULL);
    nt_source_fd(&src, &bad);
    ASSERT_EQ(src.read(src.ctx, back, 1), -EBADF);
}

TEST(clock_is_monotonic_nanoseconds)
{
    uint64_t a = nt_clock_now();
    uint64_t b = nt_clock_now();
    struct timespec ts = { 0, 2000000 };

    ASSERT_TRUE(a > 0);
    ASSERT_TRUE(b >= a);
    nanosleep(&ts, NULL);
    ASSERT_TRUE(nt_clock_now() - a >= 2000000);
}

/* ------------------------------------------------------------------------------------------ */
/* Payload builder                                                                            */
/* ------------------------------------------------------------------------------------------ */

TEST(payload_builder_writes_little_endian)
{
    static const uint8_t guid[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
    static const uint8_t want[] = {
        0xAB,                                           /* u8 */
        0x34, 0x12,                                     /* u16 */
        0x78, 0x56, 0x34, 0x12,                         /* u32 */
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* u64 */
        0x00, 0x00, 0xC0, 0x3F,                         /* 1.5f */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xC0, /* -2.5 */
        1,    2,    3,    4,    5,    6,    7,    8,    9, 10, 11, 12, 13, 14, 15, 16, 0xEE, 0xFF,
    };
    uint8_t buf[64];
    struct nt_payload p;

    nt_payload_init(&p, buf, sizeof(buf));
    nt_payload_u8(&p, 0xAB);
    nt_payload_u16(&p, 0x1234);
    nt_payload_u32(&p, 0x12345678);
    nt_payload_u64(&p, 0x0102030405060708ull);
    nt_payload_f32(&p, 1.5f);
    nt_payload_f64(&p, -2.5);
    nt_payload_guid(&p, guid);
    nt_payload_bytes(&p, "\xEE\xFF", 2);
    ASSERT_OK(p.err);
    ASSERT_EQ(p.len, sizeof(want));
    ASSERT_MEM_EQ(buf, want, sizeof(want));
}

TEST(payload_builder_full_buffer_is_sticky)
{
    uint8_t buf[6];
    struct nt_payload p;

    memset(buf, 0xCC, sizeof(buf));
    nt_payload_init(&p, buf, 5);
    nt_payload_u32(&p, 0x01020304);
    nt_payload_u16(&p, 0xFFFF); /* does not fit: nothing written */
    ASSERT_EQ(p.err, -ENOSPC);
    ASSERT_EQ(p.len, 4);
    nt_payload_u8(&p, 0x77); /* would fit, but the error is sticky */
    ASSERT_EQ(p.len, 4);
    ASSERT_EQ(buf[4], 0xCC);
    ASSERT_EQ(buf[5], 0xCC);
    nt_payload_string(&p, "x");
    ASSERT_EQ(p.err, -ENOSPC);

    nt_payload_init(&p, buf, 5);
    nt_payload_string(&p, "abc"); /* 8 bytes with NUL */
    ASSERT_EQ(p.err, -ENOSPC);
    ASSERT_EQ(p.len, 0);
    nt_payload_init(&p, NULL, 100);
    nt_payload_u8(&p, 1);
    ASSERT_EQ(p.err, -ENOSPC);
    nt_payload_init(&p, buf, sizeof(buf));
    nt_payload_bytes(&p, NULL, 1);
    ASSERT_EQ(p.err, -EINVAL);
}

TEST(payload_string_is_utf16le_with_surrogate_pairs)
{
    static const uint8_t want[] = {
        'A',  0,    0xE9, 0x00, /* A, U+00E9 */
        0xAC, 0x20,             /* U+20AC euro */
        0x3D, 0xD8, 0x00, 0xDE, /* U+1F600 as D83D DE00 */
        0xFF, 0xDB, 0xFF, 0xDF, /* U+10FFFF as DBFF DFFF */
        0,    0,                /* NUL */
        0,    0,                /* NULL string: "" */
    };
    uint8_t buf[64];
    struct nt_payload p;

    nt_payload_init(&p, buf, sizeof(buf));
    nt_payload_string(&p, "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF");
    nt_payload_string(&p, NULL);
    ASSERT_OK(p.err);
    ASSERT_EQ(p.len, sizeof(want));
    ASSERT_MEM_EQ(buf, want, sizeof(want));
}

TEST(payload_string_rejects_invalid_utf8)
{
    static const char *const bad[] = {
        "\x80",             /* stray continuation */
        "a\xC3",            /* truncated 2-byte */
        "\xE2\x82",         /* truncated 3-byte */
        "\xC0\xAF",         /* overlong '/' */
        "\xE0\x80\xAF",     /* overlong 3-byte */
        "\xF0\x80\x80\xAF", /* overlong 4-byte */
        "\xED\xA0\x80",     /* surrogate U+D800 */
        "\xF4\x90\x80\x80", /* above U+10FFFF */
        "\xF8\x88\x80\x80\x80",
        "\xFF",
        "ok\xC3\x28",
    };
    uint8_t buf[64];
    struct nt_payload p;
    size_t i;

    for (i = 0; i < PP_ARRAY_SIZE(bad); i++) {
        nt_payload_init(&p, buf, sizeof(buf));
        nt_payload_u8(&p, 1);
        nt_payload_string(&p, bad[i]);
        if (p.err != -EINVAL || p.len != 1) {
            test_fail(__FILE__, __LINE__, "case %zu: err %d len %zu", i, p.err, p.len);
        }
        nt_payload_u8(&p, 2); /* sticky */
        ASSERT_EQ(p.len, 1);
        ASSERT_EQ(p.err, -EINVAL);
    }
}

/*
 * TraceEvent charges an unsorted event's sequence number to the capture thread of the block's
 * last sorted event (or its first event) and takes none from its header: a late event of another
 * capture thread starts a block. Before, the merged stream of a .NET host (the runtime's late
 * events among the agent's samples) and nt-gen --reorder read as 537 events lost in TraceEvent.
 */
TEST(late_event_of_another_capture_thread_starts_a_block)
{
    static const uint64_t caps[] = { 7, 7, 8, 7, 8, 8, 7, 9, 7 };
    static const uint64_t times[] = { 10000, 20000, 5000, 6000, 30000, 7000, 40000, 8000, 50000 };
    struct mem_sink m;
    struct nt_writer *w = new_writer_window(&m, 0, 0, 1000, 0);
    struct block blocks[32];
    struct dec_event ev[16];
    struct nt_event e;
    size_t nb, n, b, k, i, late = 0;
    uint32_t id = define_sample(w);
    uint64_t charged;
    int ended;

    for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
        sample(&e, id, caps[i], 1, times[i], NULL, 0, managed);
        ASSERT_OK(nt_writer_write(w, &e));
    }
    ASSERT_OK(nt_writer_finish(w));
    nb = walk_blocks(m.data, m.len, blocks, 32, &ended);
    decode_late_ok = 1;
    for (b = 0; b < nb; b++) {
        if (strcmp(blocks[b].name, "EventBlock") != 0) {
            continue;
        }
        n = decode_events(m.data + blocks[b].content, blocks[b].size, ev, 16);
        charged = ev[0].capture;
        for (k = 0; k < n; k++) {
            if (ev[k].flags & NT_HDR_SORTED) {
                charged = ev[k].capture;
            } else {
                ASSERT_U64_EQ(ev[k].capture, charged);
                late++;
            }
        }
    }
    ASSERT_EQ(late, 4); /* 5000, 6000, 7000 and 8000 */
    nt_writer_free(w);
}

static const struct test_case cases[] = {
    TEST_CASE(header_and_trace_object_are_byte_exact),
    TEST_CASE(header_date_is_gmtimes_over_the_sync_times_range),
    TEST_CASE(a_headers_date_reads_back_and_goes_on_into_a_rewrite),
    TEST_CASE(worked_example_of_section_11_is_reproduced),
    TEST_CASE(metadata_record_of_sample_profiler_is_byte_exact),
    TEST_CASE(metadata_with_object_field_uses_v1_list),
    TEST_CASE(metadata_with_array_uses_v2_params_and_opcode_tags),
    TEST_CASE(blocks_are_aligned_ordered_and_stream_ends_with_tag),
    TEST_CASE(blocks_flush_at_block_bytes_and_never_exceed_it),
    TEST_CASE(poll_flushes_only_after_the_interval),
    TEST_CASE(sequence_numbers_count_per_capture_thread_and_show_losses),
    TEST_CASE(late_event_of_another_capture_thread_starts_a_block),
    TEST_CASE(stacks_are_interned_per_sequence_point_region),
    TEST_CASE(sequence_points_follow_bytes_and_bound_timestamps),
    TEST_CASE(timestamps_are_clamped_forward),
    TEST_CASE(stack_table_limit_forces_a_sequence_point),
    TEST_CASE(reorder_window_sorts_events_that_come_within_it),
    TEST_CASE(reorder_window_keeps_arrival_order_of_ties),
    TEST_CASE(event_later_than_the_window_keeps_its_time_unsorted),
    TEST_CASE(reorder_byte_cap_writes_the_oldest_early),
    TEST_CASE(reorder_poll_releases_by_time_and_flush_does_not),
    TEST_CASE(release_limit_holds_what_the_window_would_release),
    TEST_CASE(reorder_sequence_point_and_finish_write_everything_held),
    TEST_CASE(reorder_window_checks_events_before_holding_them),
    TEST_CASE(reorder_window_random_arrivals_come_back_whole),
    TEST_CASE(window_zero_writes_the_same_bytes_as_before),
    TEST_CASE(sink_error_is_sticky),
    TEST_CASE(bad_arguments_are_rejected),
    TEST_CASE(bad_descriptions_are_rejected),
    TEST_CASE(define_returns_the_same_id_for_the_same_event),
    TEST_CASE(records_larger_than_a_block_get_their_own_block),
    TEST_CASE(fd_sink_and_source_carry_the_same_bytes),
    TEST_CASE(clock_is_monotonic_nanoseconds),
    TEST_CASE(payload_builder_writes_little_endian),
    TEST_CASE(payload_builder_full_buffer_is_sticky),
    TEST_CASE(payload_string_is_utf16le_with_surrogate_pairs),
    TEST_CASE(payload_string_rejects_invalid_utf8),
};
TEST_MAIN(cases)
