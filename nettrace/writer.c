/* SPDX-License-Identifier: MIT */
/*
 * nettrace/writer.c - the NetTrace V5 writer: stream header and Trace object, then
 * MetadataBlock, StackBlock, EventBlock and SPBlock objects with compressed event headers
 * (format doc sections 3, 4.2-4.4, 5.1), and the end-of-stream tag. It appends to a sink and
 * never seeks. Memory is one buffer of about block_bytes per block kind, the capture-thread
 * table and the stack-intern table of one sequence-point region (a sequence point is forced
 * before that table grows past NT_STACK_TABLE_MAX_*), and with a reorder window the held events
 * (at most reorder_max_bytes plus one). Context: one thread per writer; without a reorder window
 * the hot path (nt_writer_write with a known stack) does not allocate, with one it allocates a
 * copy of each event. It must never emit a block the readers cannot order: metadata, then
 * stacks, then events, and every stack id after the last sequence point.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nettrace/format.h"
#include "nettrace/internal.h"
#include "nettrace/nettrace.h"

#define NT_DEFAULT_BLOCK_BYTES   (100u * 1024u)
#define NT_MAX_BLOCK_BYTES       (1024u * 1024u)
#define NT_MIN_BLOCK_BYTES       64u
#define NT_DEFAULT_FLUSH_NS      (100u * 1000u * 1000u)
#define NT_DEFAULT_SP_BYTES      (4u * 1024u * 1024u)
#define NT_DEFAULT_INTERVAL_NS   (1000u * 1000u)
#define NT_TICKS_PER_SECOND      1000000000u
#define NT_POINTER_SIZE          8u
#define NT_MAX_FIELD_NESTING     8u
#define NT_STACK_TABLE_MAX_BYTES (64u << 20)
#define NT_STACK_TABLE_MAX_COUNT (1u << 20)
#define NT_STACK_INDEX_INITIAL   1024u
/* Index slots kept across sequence points; a bigger table is released to bound memory. */
#define NT_STACK_INDEX_KEEP      (64u * 1024u)
/* Room in front of block content for the object framing: 05 05 01, versions, name, 06, size. */
#define NT_BLOCK_HEADROOM        48u
/* Longest compressed event header: flags, 3 x varuint32, 2 x varuint64 + varuint32 (capture,
 * thread, stack), timestamp, 2 GUIDs, payload size (format doc 4.2). */
#define NT_EVENT_HEADER_MAX      (1u + 5u + 5u + 10u + 5u + 10u + 5u + 10u + 16u + 16u + 5u)
#define NT_DEFAULT_REORDER_BYTES (64u << 20)
/* The reorder queue's index never shrinks below this many slots (128 bytes). */
#define NT_HELD_MIN_SLOTS        16u

/* A block under construction. data holds NT_BLOCK_HEADROOM bytes, content, one tail byte. */
struct nt_buf {
    uint8_t *data;
    size_t len; /* content bytes, at data + NT_BLOCK_HEADROOM */
    size_t cap; /* content capacity */
};

/* The previous event header of a block, which the next one is compressed against (4.2). */
struct nt_header {
    uint32_t metadata_id;
    uint32_t sequence;
    uint64_t capture_thread_id;
    uint64_t thread_id;
    uint32_t processor;
    uint32_t stack_id;
    uint64_t timestamp;
    uint8_t activity_id[16];
    uint8_t related_activity_id[16];
    uint32_t payload_size;
};

/* An EventBlock or MetadataBlock: content starts with the 20-byte block header (3.5). */
struct nt_event_block {
    struct nt_buf buf;
    struct nt_header prev;
    uint64_t min_ts;
    uint64_t max_ts;
    uint32_t count;
};

struct nt_capture_thread {
    uint64_t id;
    uint32_t sequence;    /* last sequence number attempted (written or lost) */
    int written;          /* an event of this thread is in the stream */
    uint32_t lost_before; /* lost before its first event: numbered after it (note_lost) */
};

struct nt_stack_entry {
    uint64_t hash;
    uint32_t offset; /* into stack_frames, in frames */
    uint32_t depth;
};

struct nt_meta_key {
    char *provider;
    char *name;
    uint32_t event_id;
    uint32_t version;
};

/*
 * An event held by the reorder window, in one allocation: the caller's event, whose stack and
 * payload pointers are moved to copies in frames. Ordered by (ev.timestamp, arrival).
 */
struct nt_held {
    struct nt_event ev;
    uint64_t arrival;  /* nt_writer.held_arrivals when it came: ties keep arrival order */
    size_t cost;       /* what it adds to nt_writer.held_bytes */
    uint64_t frames[]; /* ev.stack_depth frames, then ev.payload_size bytes */
};

struct nt_writer {
    struct nt_sink sink;
    uint32_t process_id;
    uint32_t number_of_processors;
    uint32_t sampling_interval_ns;
    uint64_t sync_time_ticks;
    int64_t sync_time_unix_ns;
    size_t block_bytes;
    uint64_t flush_interval_ns;
    uint64_t sequence_point_bytes;

    int err; /* first sink error; sticky */
    int finished;
    uint64_t offset;    /* bytes handed to the sink: the stream position */
    uint64_t sp_offset; /* stream position after the last sequence point */
    /*
     * The newest event or sequence-point time written: no sorted event or sequence point goes
     * below it. Without a reorder window older events are clamped to it; with one they are
     * late (written with their own time, not sorted) and leave it alone.
     */
    uint64_t last_ts;
    uint64_t last_flush_time; /* for nt_writer_poll() */

    struct nt_event_block meta;
    struct nt_event_block events;
    struct nt_buf stacks; /* content: u32 first id, u32 count, records (3.6) */
    uint32_t stack_block_count;

    struct nt_meta_key *metas;
    uint32_t meta_count;
    uint32_t meta_cap;

    struct nt_capture_thread *threads;
    uint32_t thread_count;
    uint32_t thread_cap;
    uint32_t *thread_index; /* open addressing: thread position + 1, 0 = empty */
    uint32_t thread_mask;
    uint32_t last_thread;

    /*
     * The reorder window (reorder_window_ns 0: off, nothing is ever held). held is a binary
     * min-heap on (timestamp, arrival): held[0] is the next to write. held_bytes charges each
     * event its record and four index slots, which covers the index: it doubles when full and
     * halves when a quarter full, so it never has more than four slots per event (or
     * NT_HELD_MIN_SLOTS).
     */
    uint64_t reorder_window_ns;
    size_t reorder_max_bytes;
    struct nt_held **held;
    size_t held_count;
    size_t held_cap;
    size_t held_bytes;
    uint64_t held_arrivals;
    uint64_t newest_ts;     /* the newest timestamp nt_writer_write() was given */
    uint64_t release_limit; /* the window releases nothing newer (nt_writer_set_release_limit) */
    /*
     * The capture thread TraceEvent charges an unsorted (late) event's sequence number to: the
     * pending event block's first event's, then that of its last sorted event. It takes no
     * other from an unsorted event's header (the runtime's are its own thread's).
     */
    uint64_t block_capture;

    struct nt_stack_entry *stack_entries; /* stack id = position + 1 */
    uint32_t stack_count;
    uint32_t stack_entry_cap;
    uint32_t *stack_index; /* open addressing: stack id, 0 = empty */
    uint32_t stack_mask;
    uint64_t *stack_frames;
    size_t stack_frames_len;
    size_t stack_frames_cap;

    struct nt_writer_stats stats;
};

/* ------------------------------------------------------------------------------------------ */
/* Buffers and the sink                                                                       */
/* ------------------------------------------------------------------------------------------ */

PP_MUST_USE static int
nt_buf_init(struct nt_buf *b, size_t cap)
{
    b->data = malloc(NT_BLOCK_HEADROOM + cap + 1);
    if (b->data == NULL) {
        return -ENOMEM;
    }
    b->len = 0;
    b->cap = cap;
    return 0;
}

/* Makes room for len more content bytes. Only a record larger than a block ever grows it. */
PP_MUST_USE static int
nt_buf_reserve(struct nt_buf *b, size_t len)
{
    uint8_t *data;
    size_t cap;

    if (len <= b->cap - b->len) {
        return 0;
    }
    cap = b->len + len;
    data = realloc(b->data, NT_BLOCK_HEADROOM + cap + 1);
    if (data == NULL) {
        return -ENOMEM;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static uint8_t *
nt_buf_end(struct nt_buf *b)
{
    return b->data + NT_BLOCK_HEADROOM + b->len;
}

PP_MUST_USE static int
nt_writer_emit(struct nt_writer *w, const void *bytes, size_t len)
{
    int rc;

    if (w->err != 0) {
        return w->err;
    }
    rc = w->sink.write(w->sink.ctx, bytes, len);
    if (rc != 0) {
        w->err = rc < 0 ? rc : -EIO;
        return w->err;
    }
    w->offset += len;
    w->stats.bytes += len;
    return 0;
}

/*
 * Writes one block object (3.2, 3.4) in a single sink call: the framing goes into the headroom
 * in front of the content, with the padding that puts the content at a stream offset that is a
 * multiple of 4, and the closing EndObject tag into the tail byte.
 */
PP_MUST_USE static int
nt_writer_emit_block(struct nt_writer *w, const char *type_name, struct nt_buf *b)
{
    size_t name_len = strlen(type_name);
    size_t framing = 3 + 4 + 4 + 4 + name_len + 1 + 4;
    size_t pad = (size_t)((4 - (w->offset + framing) % 4) % 4);
    uint8_t *content = b->data + NT_BLOCK_HEADROOM;
    uint8_t *p = content - framing - pad;
    uint8_t *start = p;

    *p++ = NT_TAG_BEGIN_PRIVATE_OBJECT;
    *p++ = NT_TAG_BEGIN_PRIVATE_OBJECT;
    *p++ = NT_TAG_NULL_REFERENCE;
    nt_store_u32le(p, NT_BLOCK_VERSION);
    nt_store_u32le(p + 4, NT_BLOCK_VERSION);
    nt_store_u32le(p + 8, (uint32_t)name_len);
    p += 12;
    memcpy(p, type_name, name_len);
    p += name_len;
    *p++ = NT_TAG_END_OBJECT;
    nt_store_u32le(p, (uint32_t)b->len);
    p += 4;
    memset(p, 0, pad);
    content[b->len] = NT_TAG_END_OBJECT;
    return nt_writer_emit(w, start, (size_t)(content - start) + b->len + 1);
}

/* ------------------------------------------------------------------------------------------ */
/* Event headers (4.2)                                                                        */
/* ------------------------------------------------------------------------------------------ */

static void
nt_event_block_reset(struct nt_event_block *blk)
{
    memset(&blk->prev, 0, sizeof(blk->prev));
    blk->buf.len = NT_BLOCK_HEADER_SIZE;
    blk->count = 0;
    blk->min_ts = 0;
    blk->max_ts = 0;
}

/*
 * Appends a compressed header for cur and then the payload. The caller has reserved
 * NT_EVENT_HEADER_MAX + payload_size bytes. Each field is written only when it differs from the
 * previous event of the block; the timestamp delta always (a late event's wraps around, as the
 * runtime's do across capture threads, 4.2); IsSorted unless the event is late: every event
 * after a sorted one must be at least as new (4.3).
 */
static void
nt_event_block_append(struct nt_event_block *blk, const struct nt_header *cur, int sorted,
                      const uint8_t *payload)
{
    struct nt_header *prev = &blk->prev;
    uint8_t *start = nt_buf_end(&blk->buf);
    uint8_t *p = start + 1;
    uint8_t flags = sorted ? NT_HDR_SORTED : 0;
    uint32_t expected = prev->sequence + (cur->metadata_id != 0 ? 1u : 0u);

    if (cur->metadata_id != prev->metadata_id) {
        flags |= NT_HDR_METADATA_ID;
        p += nt_varuint_put(p, cur->metadata_id);
    }
    if (cur->sequence != expected || cur->capture_thread_id != prev->capture_thread_id ||
        cur->processor != prev->processor) {
        flags |= NT_HDR_CAPTURE_THREAD_AND_SEQUENCE;
        p += nt_varuint_put(p, (uint32_t)(cur->sequence - prev->sequence - 1u));
        p += nt_varuint_put(p, cur->capture_thread_id);
        p += nt_varuint_put(p, cur->processor);
    }
    if (cur->thread_id != prev->thread_id) {
        flags |= NT_HDR_THREAD_ID;
        p += nt_varuint_put(p, cur->thread_id);
    }
    if (cur->stack_id != prev->stack_id) {
        flags |= NT_HDR_STACK_ID;
        p += nt_varuint_put(p, cur->stack_id);
    }
    p += nt_varuint_put(p, cur->timestamp - prev->timestamp);
    if (memcmp(cur->activity_id, prev->activity_id, 16) != 0) {
        flags |= NT_HDR_ACTIVITY_ID;
        memcpy(p, cur->activity_id, 16);
        p += 16;
    }
    if (memcmp(cur->related_activity_id, prev->related_activity_id, 16) != 0) {
        flags |= NT_HDR_RELATED_ACTIVITY_ID;
        memcpy(p, cur->related_activity_id, 16);
        p += 16;
    }
    if (cur->payload_size != prev->payload_size) {
        flags |= NT_HDR_PAYLOAD_SIZE;
        p += nt_varuint_put(p, cur->payload_size);
    }
    start[0] = flags;
    if (cur->payload_size > 0) {
        memcpy(p, payload, cur->payload_size);
        p += cur->payload_size;
    }
    blk->buf.len += (size_t)(p - start);
    /* Only a late event is below max_ts; without one these are the first and last times. */
    if (blk->count == 0 || cur->timestamp < blk->min_ts) {
        blk->min_ts = cur->timestamp;
    }
    if (blk->count == 0 || cur->timestamp > blk->max_ts) {
        blk->max_ts = cur->timestamp;
    }
    blk->count++;
    *prev = *cur;
}

/* Writes the block header (3.5) into the first 20 content bytes and emits the block. */
PP_MUST_USE static int
nt_writer_emit_event_block(struct nt_writer *w, const char *type_name, struct nt_event_block *blk)
{
    uint8_t *h = blk->buf.data + NT_BLOCK_HEADROOM;
    int rc;

    nt_store_u16le(h, NT_BLOCK_HEADER_SIZE);
    nt_store_u16le(h + 2, NT_BLOCK_FLAG_COMPRESSED);
    nt_store_u64le(h + 4, blk->min_ts);
    nt_store_u64le(h + 12, blk->max_ts);
    rc = nt_writer_emit_block(w, type_name, &blk->buf);
    if (rc == 0) {
        w->stats.blocks++;
    }
    nt_event_block_reset(blk);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Flushing and sequence points                                                               */
/* ------------------------------------------------------------------------------------------ */

static void
nt_stack_block_reset(struct nt_writer *w)
{
    w->stacks.len = 8;
    w->stack_block_count = 0;
}

/* Pending blocks in dependency order: metadata, then stacks, then the events using both. */
PP_MUST_USE static int
nt_writer_flush_blocks(struct nt_writer *w)
{
    uint8_t *content;
    int rc;

    if (w->meta.count > 0) {
        rc = nt_writer_emit_event_block(w, NT_TYPE_NAME_METADATA, &w->meta);
        if (rc != 0) {
            return rc;
        }
    }
    if (w->stack_block_count > 0) {
        content = w->stacks.data + NT_BLOCK_HEADROOM;
        nt_store_u32le(content + 4, w->stack_block_count);
        rc = nt_writer_emit_block(w, NT_TYPE_NAME_STACK, &w->stacks);
        nt_stack_block_reset(w);
        if (rc != 0) {
            return rc;
        }
        w->stats.blocks++;
    }
    if (w->events.count > 0) {
        rc = nt_writer_emit_event_block(w, NT_TYPE_NAME_EVENT, &w->events);
        if (rc != 0) {
            return rc;
        }
    }
    return w->err;
}

/* Forgets every interned stack: ids restart at 1 (3.6). Oversized tables are released. */
static void
nt_writer_stacks_clear(struct nt_writer *w)
{
    if (w->stack_mask + 1 > NT_STACK_INDEX_KEEP) {
        free(w->stack_index);
        free(w->stack_entries);
        free(w->stack_frames);
        w->stack_index = NULL;
        w->stack_entries = NULL;
        w->stack_frames = NULL;
        w->stack_mask = 0;
        w->stack_entry_cap = 0;
        w->stack_frames_cap = 0;
    } else if (w->stack_index != NULL && w->stack_count > 0) {
        memset(w->stack_index, 0, (w->stack_mask + 1) * sizeof(*w->stack_index));
    }
    w->stack_count = 0;
    w->stack_frames_len = 0;
}

/*
 * Flushes and writes an SPBlock (3.7): a timestamp above every earlier event, and every capture
 * thread with its last sequence number, so readers count losses even for threads that lost all
 * their events. Later events are clamped to at least that timestamp, or with a reorder window
 * written late. Held events are not written first: this also runs in the middle of writing one.
 */
PP_MUST_USE static int
nt_writer_write_sequence_point(struct nt_writer *w)
{
    struct nt_buf *b = &w->stacks; /* empty after the flush: reused as scratch */
    uint8_t *p;
    uint32_t i;
    int rc;

    rc = nt_writer_flush_blocks(w);
    if (rc != 0) {
        return rc;
    }
    b->len = 0;
    rc = nt_buf_reserve(b, 12 + (size_t)w->thread_count * 12);
    if (rc != 0) {
        nt_stack_block_reset(w);
        return rc;
    }
    w->last_ts++;
    p = b->data + NT_BLOCK_HEADROOM;
    nt_store_u64le(p, w->last_ts);
    nt_store_u32le(p + 8, w->thread_count);
    p += 12;
    for (i = 0; i < w->thread_count; i++) {
        nt_store_u64le(p, w->threads[i].id);
        nt_store_u32le(p + 8, w->threads[i].sequence);
        p += 12;
    }
    b->len = (size_t)(p - (b->data + NT_BLOCK_HEADROOM));
    rc = nt_writer_emit_block(w, NT_TYPE_NAME_SP, b);
    nt_stack_block_reset(w);
    if (rc != 0) {
        return rc;
    }
    w->stats.sequence_points++;
    w->sp_offset = w->offset;
    nt_writer_stacks_clear(w);
    return 0;
}

/* Flushes, then starts a new sequence-point region when sequence_point_bytes were written. */
PP_MUST_USE static int
nt_writer_flush_all(struct nt_writer *w)
{
    int rc = nt_writer_flush_blocks(w);

    if (rc == 0 && w->offset - w->sp_offset >= w->sequence_point_bytes) {
        rc = nt_writer_write_sequence_point(w);
    }
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Capture threads and stacks                                                                 */
/* ------------------------------------------------------------------------------------------ */

static uint32_t
nt_thread_slot(uint64_t id, uint32_t mask)
{
    return (uint32_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

PP_MUST_USE static int
nt_writer_threads_grow(struct nt_writer *w)
{
    uint32_t cap = w->thread_cap != 0 ? w->thread_cap * 2 : 8;
    uint32_t mask = cap * 2 - 1;
    struct nt_capture_thread *threads;
    uint32_t *index;
    uint32_t i, slot;

    if (w->thread_cap >= (1u << 24)) {
        return -ENOMEM; /* more capture threads than any SPBlock should list */
    }
    threads = realloc(w->threads, cap * sizeof(*threads));
    if (threads == NULL) {
        return -ENOMEM;
    }
    w->threads = threads;
    index = calloc((size_t)mask + 1, sizeof(*index));
    if (index == NULL) {
        return -ENOMEM;
    }
    for (i = 0; i < w->thread_count; i++) {
        slot = nt_thread_slot(threads[i].id, mask);
        while (index[slot] != 0) {
            slot = (slot + 1) & mask;
        }
        index[slot] = i + 1;
    }
    free(w->thread_index);
    w->thread_index = index;
    w->thread_mask = mask;
    w->thread_cap = cap;
    return 0;
}

/* Finds or adds the capture thread id. Returns 0 and its position, or -ENOMEM. */
PP_MUST_USE static int
nt_writer_thread(struct nt_writer *w, uint64_t id, uint32_t *pos)
{
    uint32_t slot, i;
    int rc;

    if (w->last_thread < w->thread_count && w->threads[w->last_thread].id == id) {
        *pos = w->last_thread;
        return 0;
    }
    if (w->thread_count == w->thread_cap) {
        rc = nt_writer_threads_grow(w);
        if (rc != 0) {
            return rc;
        }
    }
    slot = nt_thread_slot(id, w->thread_mask);
    while ((i = w->thread_index[slot]) != 0) {
        if (w->threads[i - 1].id == id) {
            *pos = w->last_thread = i - 1;
            return 0;
        }
        slot = (slot + 1) & w->thread_mask;
    }
    i = w->thread_count++;
    w->threads[i].id = id;
    w->threads[i].sequence = 0;
    w->threads[i].written = 0;
    w->threads[i].lost_before = 0;
    w->thread_index[slot] = i + 1;
    *pos = w->last_thread = i;
    return 0;
}

/* Two independent multiply chains, so the hash of a deep stack is not one long dependency. */
static uint64_t
nt_stack_hash(const uint64_t *frames, uint32_t depth)
{
    uint64_t a = 0x9E3779B97F4A7C15ull ^ depth;
    uint64_t b = 0xC2B2AE3D27D4EB4Full;
    uint32_t i;

    for (i = 0; i + 1 < depth; i += 2) {
        a = (a ^ frames[i]) * 0xFF51AFD7ED558CCDull;
        b = (b ^ frames[i + 1]) * 0xC4CEB9FE1A85EC53ull;
        a ^= a >> 32;
        b ^= b >> 29;
    }
    if (i < depth) {
        a = (a ^ frames[i]) * 0xFF51AFD7ED558CCDull;
    }
    a ^= b * 0x9E3779B97F4A7C15ull;
    return a ^ (a >> 31);
}

PP_MUST_USE static int
nt_writer_stacks_grow(struct nt_writer *w, uint32_t depth)
{
    struct nt_stack_entry *entries;
    uint64_t *frames;
    uint32_t *index;
    uint32_t mask, i, slot;
    size_t cap;

    if (w->stack_count == w->stack_entry_cap) {
        cap = w->stack_entry_cap != 0 ? (size_t)w->stack_entry_cap * 2 : 256;
        entries = realloc(w->stack_entries, cap * sizeof(*entries));
        if (entries == NULL) {
            return -ENOMEM;
        }
        w->stack_entries = entries;
        w->stack_entry_cap = (uint32_t)cap;
    }
    if (w->stack_frames_cap - w->stack_frames_len < depth) {
        cap = w->stack_frames_cap != 0 ? w->stack_frames_cap : 4096;
        while (cap - w->stack_frames_len < depth) {
            cap *= 2;
        }
        frames = realloc(w->stack_frames, cap * sizeof(*frames));
        if (frames == NULL) {
            return -ENOMEM;
        }
        w->stack_frames = frames;
        w->stack_frames_cap = cap;
    }
    /* Keep the index at most half full. */
    if (w->stack_index == NULL || (w->stack_count + 1) * 2 > w->stack_mask + 1) {
        mask = w->stack_index == NULL ? NT_STACK_INDEX_INITIAL - 1 : w->stack_mask * 2 + 1;
        index = calloc((size_t)mask + 1, sizeof(*index));
        if (index == NULL) {
            return -ENOMEM;
        }
        for (i = 0; i < w->stack_count; i++) {
            slot = (uint32_t)w->stack_entries[i].hash & mask;
            while (index[slot] != 0) {
                slot = (slot + 1) & mask;
            }
            index[slot] = i + 1;
        }
        free(w->stack_index);
        w->stack_index = index;
        w->stack_mask = mask;
    }
    return 0;
}

/* Appends one stack record (3.6) to the pending StackBlock. */
static void
nt_writer_stack_record(struct nt_writer *w, uint32_t id, const uint64_t *frames, uint32_t depth)
{
    uint8_t *p = nt_buf_end(&w->stacks);
    uint32_t i;

    if (w->stack_block_count == 0) {
        nt_store_u32le(w->stacks.data + NT_BLOCK_HEADROOM, id);
    }
    nt_store_u32le(p, depth * NT_POINTER_SIZE);
    p += 4;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, frames, (size_t)depth * 8);
    (void)i;
#else
    for (i = 0; i < depth; i++) {
        nt_store_u64le(p + 8 * i, frames[i]);
    }
#endif
    w->stacks.len += 4 + (size_t)depth * 8;
    w->stack_block_count++;
}

/*
 * Returns the id of the stack in the current sequence-point region, adding it (and its
 * StackBlock record) when new. May flush, and may write a sequence point when the region's
 * table is full; both happen before the caller encodes its event.
 */
PP_MUST_USE static int
nt_writer_intern(struct nt_writer *w, const uint64_t *frames, uint32_t depth, uint32_t *id)
{
    uint64_t hash = nt_stack_hash(frames, depth);
    size_t record = 4 + (size_t)depth * 8;
    struct nt_stack_entry *e;
    uint32_t slot, i;
    int rc;

again:
    if (w->stack_index != NULL) {
        slot = (uint32_t)hash & w->stack_mask;
        while ((i = w->stack_index[slot]) != 0) {
            e = &w->stack_entries[i - 1];
            if (e->hash == hash && e->depth == depth &&
                memcmp(w->stack_frames + e->offset, frames, (size_t)depth * 8) == 0) {
                *id = i;
                return 0;
            }
            slot = (slot + 1) & w->stack_mask;
        }
    }
    if (w->stack_count >= NT_STACK_TABLE_MAX_COUNT ||
        (w->stack_frames_len + depth) * 8 > NT_STACK_TABLE_MAX_BYTES) {
        rc = nt_writer_write_sequence_point(w);
        if (rc != 0) {
            return rc;
        }
        goto again;
    }
    if (w->stack_block_count > 0 && w->stacks.len + record > w->block_bytes) {
        rc = nt_writer_flush_all(w);
        if (rc != 0) {
            return rc;
        }
        goto again; /* a sequence point may have emptied the table */
    }
    rc = nt_writer_stacks_grow(w, depth);
    if (rc == 0) {
        rc = nt_buf_reserve(&w->stacks, record);
    }
    if (rc != 0) {
        return rc;
    }
    slot = (uint32_t)hash & w->stack_mask;
    while (w->stack_index[slot] != 0) {
        slot = (slot + 1) & w->stack_mask;
    }
    i = w->stack_count++;
    e = &w->stack_entries[i];
    e->hash = hash;
    e->depth = depth;
    e->offset = (uint32_t)w->stack_frames_len;
    memcpy(w->stack_frames + w->stack_frames_len, frames, (size_t)depth * 8);
    w->stack_frames_len += depth;
    w->stack_index[slot] = i + 1;
    nt_writer_stack_record(w, i + 1, frames, depth);
    w->stats.stacks++;
    *id = i + 1;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata records (5.1)                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Serialises into p when p is not NULL; always counts. */
struct nt_meta_out {
    uint8_t *p;
    size_t n;
};

static void
nt_meta_u32(struct nt_meta_out *o, uint32_t v)
{
    if (o->p != NULL) {
        nt_store_u32le(o->p + o->n, v);
    }
    o->n += 4;
}

static void
nt_meta_u8(struct nt_meta_out *o, uint8_t v)
{
    if (o->p != NULL) {
        o->p[o->n] = v;
    }
    o->n += 1;
}

static void
nt_meta_string(struct nt_meta_out *o, const char *utf8)
{
    if (o->p != NULL) {
        o->n += nt_utf16_put(o->p + o->n, utf8);
    } else {
        o->n += (size_t)nt_utf16_size(utf8); /* validated by nt_meta_check() */
    }
}

static int
nt_meta_type_ok(enum nt_type t)
{
    return t == NT_TYPE_OBJECT || (t >= NT_TYPE_BOOLEAN && t <= NT_TYPE_ARRAY);
}

/*
 * Rejects what V5 metadata cannot say: V6-only or unknown type codes, arrays of arrays, nesting
 * deeper than NT_MAX_FIELD_NESTING, NULL field lists and invalid UTF-8 names. Sets *has_array
 * when some field is an array (which needs the V2Params tag).
 */
PP_MUST_USE static int
nt_meta_check(const struct nt_field *fields, uint32_t count, uint32_t depth, int *has_array)
{
    const struct nt_field *f;
    uint32_t i;
    int rc;

    if (count > 0 && fields == NULL) {
        return -EINVAL;
    }
    if (depth > NT_MAX_FIELD_NESTING || count > NT_MAX_PAYLOAD) {
        return -EINVAL;
    }
    for (i = 0; i < count; i++) {
        f = &fields[i];
        if (!nt_meta_type_ok(f->type) || nt_utf16_size(f->name) < 0) {
            return -EINVAL;
        }
        if (f->type == NT_TYPE_ARRAY) {
            *has_array = 1;
            if (f->element_type == NT_TYPE_ARRAY || !nt_meta_type_ok(f->element_type)) {
                return -EINVAL;
            }
        }
        if (f->type == NT_TYPE_OBJECT ||
            (f->type == NT_TYPE_ARRAY && f->element_type == NT_TYPE_OBJECT)) {
            rc = nt_meta_check(f->fields, f->field_count, depth + 1, has_array);
            if (rc != 0) {
                return rc;
            }
        }
    }
    return 0;
}

/* V1 field list: i32 count, then { i32 type, [nested list for Object], UTF-16z name }. */
static void
nt_meta_fields_v1(struct nt_meta_out *o, const struct nt_field *fields, uint32_t count)
{
    uint32_t i;

    nt_meta_u32(o, count);
    for (i = 0; i < count; i++) {
        nt_meta_u32(o, (uint32_t)fields[i].type);
        if (fields[i].type == NT_TYPE_OBJECT) {
            nt_meta_fields_v1(o, fields[i].fields, fields[i].field_count);
        }
        nt_meta_string(o, fields[i].name);
    }
}

static void nt_meta_fields_v2(struct nt_meta_out *o, const struct nt_field *fields, uint32_t count);

/* V2 type: i32 type, then the nested list (Object) or the element type (Array). */
static void
nt_meta_type_v2(struct nt_meta_out *o, enum nt_type type, const struct nt_field *f)
{
    nt_meta_u32(o, (uint32_t)type);
    if (type == NT_TYPE_OBJECT) {
        nt_meta_fields_v2(o, f->fields, f->field_count);
    } else if (type == NT_TYPE_ARRAY) {
        nt_meta_type_v2(o, f->element_type, f);
    }
}

/* V2 field list: i32 count, then { i32 size including itself, UTF-16z name, type }. */
static void
nt_meta_fields_v2(struct nt_meta_out *o, const struct nt_field *fields, uint32_t count)
{
    struct nt_meta_out sizer;
    uint32_t i;

    nt_meta_u32(o, count);
    for (i = 0; i < count; i++) {
        sizer.p = NULL;
        sizer.n = 4;
        nt_meta_string(&sizer, fields[i].name);
        nt_meta_type_v2(&sizer, fields[i].type, &fields[i]);
        nt_meta_u32(o, (uint32_t)sizer.n);
        nt_meta_string(o, fields[i].name);
        nt_meta_type_v2(o, fields[i].type, &fields[i]);
    }
}

/* The whole record; tags in the runtime's order: OpCode, then V2Params (5.1). */
static void
nt_meta_record(struct nt_meta_out *o, const struct nt_event_desc *d, uint32_t id, int has_array)
{
    struct nt_meta_out sizer = { NULL, 0 };

    nt_meta_u32(o, id);
    nt_meta_string(o, d->provider);
    nt_meta_u32(o, d->event_id);
    nt_meta_string(o, d->name);
    nt_meta_u32(o, (uint32_t)d->keywords);
    nt_meta_u32(o, (uint32_t)(d->keywords >> 32));
    nt_meta_u32(o, d->version);
    nt_meta_u32(o, d->level);
    if (has_array) {
        nt_meta_u32(o, 0); /* the V2Params tag is authoritative */
    } else {
        nt_meta_fields_v1(o, d->fields, d->field_count);
    }
    if (d->opcode != 0) {
        nt_meta_u32(o, 1);
        nt_meta_u8(o, NT_METADATA_TAG_OPCODE);
        nt_meta_u8(o, d->opcode);
    }
    if (has_array) {
        nt_meta_fields_v2(&sizer, d->fields, d->field_count);
        nt_meta_u32(o, (uint32_t)sizer.n);
        nt_meta_u8(o, NT_METADATA_TAG_V2_PARAMS);
        nt_meta_fields_v2(o, d->fields, d->field_count);
    }
}

static int
nt_meta_key_equal(const struct nt_meta_key *k, const struct nt_event_desc *d, const char *name)
{
    return k->event_id == d->event_id && k->version == d->version &&
           strcmp(k->provider, d->provider) == 0 && strcmp(k->name, name) == 0;
}

static char *
nt_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *copy = malloc(n);

    if (copy != NULL) {
        memcpy(copy, s, n);
    }
    return copy;
}

/* Whether w takes more events: 0, its sticky error, or -EINVAL (none, or finished). */
static int
nt_writer_check_open(const struct nt_writer *w)
{
    if (w == NULL) {
        return -EINVAL;
    }
    return w->err != 0 ? w->err : w->finished ? -EINVAL : 0;
}

int
nt_writer_define(struct nt_writer *w, const struct nt_event_desc *desc, uint32_t *metadata_id)
{
    struct nt_meta_out out = { NULL, 0 };
    struct nt_header hdr;
    struct nt_meta_key key = { NULL, NULL, 0, 0 };
    struct nt_meta_key *metas;
    uint8_t *record = NULL;
    const char *name;
    int has_array = 0;
    size_t need;
    uint32_t i;
    int rc;

    if (w == NULL || desc == NULL || metadata_id == NULL || desc->provider == NULL) {
        return -EINVAL;
    }
    rc = nt_writer_check_open(w);
    if (rc != 0) {
        return rc;
    }
    name = desc->name != NULL ? desc->name : "";
    for (i = 0; i < w->meta_count; i++) {
        if (nt_meta_key_equal(&w->metas[i], desc, name)) {
            *metadata_id = i + 1;
            return 0;
        }
    }
    if (nt_utf16_size(desc->provider) < 0 || nt_utf16_size(name) < 0 ||
        w->meta_count >= INT32_MAX - 1) {
        return -EINVAL;
    }
    rc = nt_meta_check(desc->fields, desc->field_count, 0, &has_array);
    if (rc != 0) {
        return rc;
    }
    nt_meta_record(&out, desc, w->meta_count + 1, has_array);
    if (out.n > NT_MAX_PAYLOAD) {
        return -EINVAL; /* the metadata event's payload must fit TraceEvent's 16-bit size */
    }
    if (w->meta_count == w->meta_cap) {
        metas = realloc(w->metas, (w->meta_cap != 0 ? w->meta_cap * 2 : 16) * sizeof(*metas));
        if (metas == NULL) {
            return -ENOMEM;
        }
        w->metas = metas;
        w->meta_cap = w->meta_cap != 0 ? w->meta_cap * 2 : 16;
    }
    key.provider = nt_strdup(desc->provider);
    key.name = nt_strdup(name);
    key.event_id = desc->event_id;
    key.version = desc->version;
    if (key.provider == NULL || key.name == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    need = NT_EVENT_HEADER_MAX + out.n;
    if (w->meta.count > 0 && w->meta.buf.len + need > w->block_bytes) {
        rc = nt_writer_flush_all(w);
        if (rc != 0) {
            goto out;
        }
    }
    rc = nt_buf_reserve(&w->meta.buf, need);
    if (rc != 0) {
        goto out;
    }
    /*
     * Metadata events carry metadata id 0, no sequence number, capture thread 0 and processor
     * 0xFFFFFFFF, as the runtime writes them; their payload is the record.
     */
    memset(&hdr, 0, sizeof(hdr));
    hdr.processor = UINT32_MAX;
    hdr.timestamp = w->last_ts;
    hdr.payload_size = (uint32_t)out.n;
    record = malloc(out.n);
    if (record == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    out.p = record;
    out.n = 0;
    nt_meta_record(&out, desc, w->meta_count + 1, has_array);
    nt_event_block_append(&w->meta, &hdr, 1, record);
    w->metas[w->meta_count++] = key;
    key.provider = NULL;
    key.name = NULL;
    *metadata_id = w->meta_count;
    rc = 0;
out:
    free(record);
    free(key.provider);
    free(key.name);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Stream header and Trace object (3.1-3.3)                                                   */
/* ------------------------------------------------------------------------------------------ */

int
nt_trace_info_unix_ns(const struct nt_trace_info *info, int64_t *out)
{
    const int16_t *t = info->sync_time;
    struct nt_utc tm;
    int64_t secs;

    /* year, month, weekday, day, hour, minute, second, millisecond */
    if (t[0] < 1601 || t[1] < 1 || t[1] > 12 || t[3] < 1 || t[3] > 31 || t[4] < 0 || t[4] > 23 ||
        t[5] < 0 || t[5] > 59 || t[6] < 0 || t[6] > 59 || t[7] < 0 || t[7] > 999) {
        return -EINVAL;
    }
    tm.year = t[0];
    tm.month = t[1];
    tm.day = t[3];
    tm.weekday = t[2];
    tm.hour = t[4];
    tm.minute = t[5];
    tm.second = t[6];
    secs = nt_unix_from_utc(&tm);
    /* int64 nanoseconds hold 1677 to 2262 (the writer's range); SYSTEMTIME's years go on to
     * 30827 (the fuzzer's header of year 10247 overflowed here) */
    if (secs <= INT64_MIN / 1000000000 || secs >= INT64_MAX / 1000000000) {
        return -ERANGE;
    }
    *out = secs * 1000000000 + (int64_t)t[7] * 1000000;
    return 0;
}

void
nt_writer_options_from_info(struct nt_writer_options *o, const struct nt_trace_info *info)
{
    int64_t unix_ns;

    memset(o, 0, sizeof(*o));
    o->process_id = info->process_id;
    o->number_of_processors = info->number_of_processors;
    o->sampling_interval_ns = info->expected_cpu_sampling_rate;
    o->sync_time_ticks = info->sync_time_ticks;
    /* 0 (now) for a header whose date is no date, as a writer without one would say. The epoch
     * itself (1970-01-01 00:00:00.000) is 0 too, and is taken as now: a trace of that instant is
     * not one of this machine's. */
    if (nt_trace_info_unix_ns(info, &unix_ns) == 0) {
        o->sync_time_unix_ns = unix_ns;
    }
}

PP_MUST_USE static int
nt_writer_write_header(struct nt_writer *w)
{
    uint8_t buf[NT_MAGIC_LEN + 4 + NT_FAST_SERIALIZATION_LEN + 21 + NT_TRACE_OBJECT_SIZE + 1];
    int64_t secs = w->sync_time_unix_ns / 1000000000;
    int64_t nsec = w->sync_time_unix_ns % 1000000000;
    struct nt_utc tm;
    uint8_t *p = buf;

    if (nsec < 0) {
        secs -= 1;
        nsec += 1000000000;
    }
    nt_utc_from_unix(secs, &tm);
    if (tm.year < 1601 || tm.year > 30827) {
        return -EINVAL; /* SYSTEMTIME cannot hold it, and TraceEvent throws on invalid dates */
    }
    memcpy(p, NT_MAGIC, NT_MAGIC_LEN);
    p += NT_MAGIC_LEN;
    nt_store_u32le(p, NT_FAST_SERIALIZATION_LEN);
    p += 4;
    memcpy(p, NT_FAST_SERIALIZATION, NT_FAST_SERIALIZATION_LEN);
    p += NT_FAST_SERIALIZATION_LEN;
    *p++ = NT_TAG_BEGIN_PRIVATE_OBJECT;
    *p++ = NT_TAG_BEGIN_PRIVATE_OBJECT;
    *p++ = NT_TAG_NULL_REFERENCE;
    nt_store_u32le(p, NT_TRACE_VERSION);
    nt_store_u32le(p + 4, NT_TRACE_VERSION);
    nt_store_u32le(p + 8, sizeof(NT_TYPE_NAME_TRACE) - 1);
    p += 12;
    memcpy(p, NT_TYPE_NAME_TRACE, sizeof(NT_TYPE_NAME_TRACE) - 1);
    p += sizeof(NT_TYPE_NAME_TRACE) - 1;
    *p++ = NT_TAG_END_OBJECT;
    /* SYSTEMTIME, UTC: year, month, day of week, day, hour, minute, second, millisecond. */
    nt_store_u16le(p, (uint16_t)tm.year);
    nt_store_u16le(p + 2, (uint16_t)tm.month);
    nt_store_u16le(p + 4, (uint16_t)tm.weekday);
    nt_store_u16le(p + 6, (uint16_t)tm.day);
    nt_store_u16le(p + 8, (uint16_t)tm.hour);
    nt_store_u16le(p + 10, (uint16_t)tm.minute);
    nt_store_u16le(p + 12, (uint16_t)tm.second);
    nt_store_u16le(p + 14, (uint16_t)(nsec / 1000000));
    nt_store_u64le(p + 16, w->sync_time_ticks);
    nt_store_u64le(p + 24, NT_TICKS_PER_SECOND);
    nt_store_u32le(p + 32, NT_POINTER_SIZE);
    nt_store_u32le(p + 36, w->process_id);
    nt_store_u32le(p + 40, w->number_of_processors);
    nt_store_u32le(p + 44, w->sampling_interval_ns);
    p += NT_TRACE_OBJECT_SIZE;
    *p++ = NT_TAG_END_OBJECT;
    return nt_writer_emit(w, buf, (size_t)(p - buf));
}

/* ------------------------------------------------------------------------------------------ */
/* Writing one event, and the reorder window                                                  */
/* ------------------------------------------------------------------------------------------ */

/*
 * Encodes one validated event into the pending blocks. Without a reorder window an event older
 * than last_ts is clamped to it; with one it is late: its own time, not sorted, last_ts kept,
 * so the sorted events and sequence points around it still bound each other (4.3).
 */
PP_MUST_USE static int
nt_writer_put(struct nt_writer *w, const struct nt_event *ev)
{
    struct nt_capture_thread *t;
    struct nt_header hdr;
    uint32_t stack_id = 0;
    uint32_t pos;
    size_t need;
    int sorted = 1;
    int rc;

    need = NT_EVENT_HEADER_MAX + ev->payload_size;
    if (w->events.count > 0 && w->events.buf.len + need > w->block_bytes) {
        rc = nt_writer_flush_all(w);
        if (rc != 0) {
            return rc;
        }
    }
    if (w->events.count > 0 && w->reorder_window_ns != 0 && ev->timestamp < w->last_ts &&
        ev->capture_thread_id != w->block_capture) {
        /* A late event of another capture thread starts a block: TraceEvent would check its
         * sequence number against that thread's and count thousands of events lost. */
        rc = nt_writer_flush_blocks(w);
        if (rc != 0) {
            return rc;
        }
    }
    if (ev->stack_depth > 0) {
        rc = nt_writer_intern(w, ev->stack, ev->stack_depth, &stack_id);
        if (rc != 0) {
            return rc;
        }
    }
    rc = nt_buf_reserve(&w->events.buf, need);
    if (rc == 0) {
        rc = nt_writer_thread(w, ev->capture_thread_id, &pos);
    }
    if (rc != 0) {
        return rc;
    }
    t = &w->threads[pos];
    t->sequence++;
    t->written = 1;
    if (w->reorder_window_ns != 0 && ev->timestamp < w->last_ts) {
        sorted = 0;
        w->stats.late++;
    } else if (ev->timestamp > w->last_ts) {
        w->last_ts = ev->timestamp;
    }
    if (sorted || w->events.count == 0) {
        w->block_capture = ev->capture_thread_id;
    }
    hdr.metadata_id = ev->metadata_id;
    hdr.sequence = t->sequence;
    hdr.capture_thread_id = ev->capture_thread_id;
    hdr.thread_id = ev->thread_id;
    hdr.processor = ev->processor;
    hdr.stack_id = stack_id;
    hdr.timestamp = sorted ? w->last_ts : ev->timestamp;
    memcpy(hdr.activity_id, ev->activity_id, 16);
    memcpy(hdr.related_activity_id, ev->related_activity_id, 16);
    hdr.payload_size = ev->payload_size;
    nt_event_block_append(&w->events, &hdr, sorted, ev->payload);
    t->sequence += t->lost_before; /* the next event shows them as a gap */
    t->lost_before = 0;
    w->stats.events++;
    return 0;
}

static int
nt_held_before(const struct nt_held *a, const struct nt_held *b)
{
    return a->ev.timestamp < b->ev.timestamp ||
           (a->ev.timestamp == b->ev.timestamp && a->arrival < b->arrival);
}

/* Resizes the index to cap slots (never below held_count). */
PP_MUST_USE static int
nt_writer_held_resize(struct nt_writer *w, size_t cap)
{
    struct nt_held **held = realloc(w->held, cap * sizeof(*held));

    if (held == NULL) {
        return -ENOMEM;
    }
    w->held = held;
    w->held_cap = cap;
    return 0;
}

/* Copies ev (validated) into a new record and adds it to the heap. Returns 0 or -ENOMEM. */
PP_MUST_USE static int
nt_writer_hold(struct nt_writer *w, const struct nt_event *ev)
{
    size_t frames = (size_t)ev->stack_depth * sizeof(uint64_t);
    size_t size = sizeof(struct nt_held) + frames + ev->payload_size;
    struct nt_held *h;
    size_t i, parent;
    int rc;

    if (w->held_count == w->held_cap) {
        rc = nt_writer_held_resize(w, w->held_cap != 0 ? w->held_cap * 2 : NT_HELD_MIN_SLOTS);
        if (rc != 0) {
            return rc;
        }
    }
    h = malloc(size);
    if (h == NULL) {
        return -ENOMEM;
    }
    h->ev = *ev;
    h->ev.stack = NULL;
    h->ev.payload = NULL;
    h->ev.desc = NULL;
    h->arrival = w->held_arrivals++;
    h->cost = size + 4 * sizeof(*w->held);
    if (frames > 0) {
        memcpy(h->frames, ev->stack, frames);
        h->ev.stack = h->frames;
    }
    if (ev->payload_size > 0) {
        memcpy((uint8_t *)h->frames + frames, ev->payload, ev->payload_size);
        h->ev.payload = (const uint8_t *)h->frames + frames;
    }
    for (i = w->held_count++; i > 0; i = parent) {
        parent = (i - 1) / 2;
        if (!nt_held_before(h, w->held[parent])) {
            break;
        }
        w->held[i] = w->held[parent];
    }
    w->held[i] = h;
    w->held_bytes += h->cost;
    if (w->held_bytes > w->stats.held_bytes_max) {
        w->stats.held_bytes_max = w->held_bytes;
    }
    return 0;
}

/* Removes held[0] from the heap (sift-down of the last record) and frees it. */
static void
nt_writer_held_pop(struct nt_writer *w)
{
    struct nt_held *first = w->held[0];
    struct nt_held *last = w->held[--w->held_count];
    size_t n = w->held_count;
    size_t i = 0, child;

    while ((child = 2 * i + 1) < n) {
        if (child + 1 < n && nt_held_before(w->held[child + 1], w->held[child])) {
            child++;
        }
        if (!nt_held_before(w->held[child], last)) {
            break;
        }
        w->held[i] = w->held[child];
        i = child;
    }
    if (n > 0) {
        w->held[i] = last;
    }
    w->held_bytes -= first->cost;
    free(first);
    /* Halving at a quarter full keeps the four slots charged per event an upper bound. */
    if (w->held_cap > NT_HELD_MIN_SLOTS && w->held_count <= w->held_cap / 4 &&
        nt_writer_held_resize(w, w->held_cap / 2) != 0) {
        return; /* a failed shrink only keeps the larger index */
    }
}

/*
 * Writes the oldest held event and drops it. On failure it stays first in the queue, so a later
 * call writes it: nothing is lost or written twice.
 */
PP_MUST_USE static int
nt_writer_release_first(struct nt_writer *w)
{
    int rc;

    if (w->err != 0) {
        return w->err;
    }
    rc = nt_writer_put(w, &w->held[0]->ev);
    if (rc == 0) {
        nt_writer_held_pop(w);
    }
    return rc;
}

/* Writes the held events with timestamps <= until, oldest first (UINT64_MAX: all of them). */
PP_MUST_USE static int
nt_writer_release(struct nt_writer *w, uint64_t until)
{
    int rc = 0;

    while (rc == 0 && w->held_count > 0 && w->held[0]->ev.timestamp <= until) {
        rc = nt_writer_release_first(w);
    }
    return rc;
}

/* What the window releases: the held events up to until, never past the release limit. */
static int
nt_writer_release_window(struct nt_writer *w, uint64_t until)
{
    return nt_writer_release(w, until < w->release_limit ? until : w->release_limit);
}

/* ------------------------------------------------------------------------------------------ */
/* Public API                                                                                 */
/*
 * The CPUs this process may run on (sched_getaffinity, a system call), or sysconf's count of those
 * online when that fails. Not sysconf first: glibc reads /sys/devices/system/cpu/online for it, an
 * open at the lowest free number inside libc that no fd interposer of host/ sees, and a writer is
 * made at each session start of the library's while the host runs (host/fds.c).
 */
static long
nt_writer_cpus(void)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
        return CPU_COUNT(&set);
    }
    return sysconf(_SC_NPROCESSORS_ONLN);
}

/* ------------------------------------------------------------------------------------------ */

int
nt_writer_new(const struct nt_writer_options *opts, const struct nt_sink *sink,
              struct nt_writer **out)
{
    struct nt_writer_options o;
    struct nt_writer *w = NULL;
    struct timespec ts;
    long ncpu;
    int rc;

    if (out == NULL) {
        return -EINVAL;
    }
    *out = NULL;
    if (sink == NULL || sink->write == NULL) {
        return -EINVAL;
    }
    if (opts != NULL) {
        o = *opts;
    } else {
        memset(&o, 0, sizeof(o));
    }
    w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return -ENOMEM;
    }
    w->sink = *sink;
    w->process_id = o.process_id != 0 ? o.process_id : (uint32_t)getpid();
    ncpu = o.number_of_processors != 0 ? (long)o.number_of_processors : nt_writer_cpus();
    w->number_of_processors = ncpu > 0 ? (uint32_t)ncpu : 1;
    w->sampling_interval_ns =
            o.sampling_interval_ns != 0 ? o.sampling_interval_ns : NT_DEFAULT_INTERVAL_NS;
    w->sync_time_ticks = o.sync_time_ticks != 0 ? o.sync_time_ticks : nt_clock_now();
    if (o.sync_time_unix_ns != 0) {
        w->sync_time_unix_ns = o.sync_time_unix_ns;
    } else {
        clock_gettime(CLOCK_REALTIME, &ts);
        w->sync_time_unix_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    }
    w->block_bytes = o.block_bytes != 0 ? o.block_bytes : NT_DEFAULT_BLOCK_BYTES;
    if (w->block_bytes > NT_MAX_BLOCK_BYTES) {
        w->block_bytes = NT_MAX_BLOCK_BYTES;
    }
    if (w->block_bytes < NT_MIN_BLOCK_BYTES) {
        w->block_bytes = NT_MIN_BLOCK_BYTES;
    }
    w->flush_interval_ns = o.flush_interval_ns != 0 ? o.flush_interval_ns : NT_DEFAULT_FLUSH_NS;
    w->sequence_point_bytes =
            o.sequence_point_bytes != 0 ? o.sequence_point_bytes : NT_DEFAULT_SP_BYTES;
    w->reorder_window_ns = o.reorder_window_ns;
    w->reorder_max_bytes =
            o.reorder_max_bytes != 0 ? o.reorder_max_bytes : NT_DEFAULT_REORDER_BYTES;
    w->release_limit = UINT64_MAX;
    w->last_ts = w->sync_time_ticks;
    w->last_flush_time = nt_clock_now();

    rc = nt_buf_init(&w->meta.buf, w->block_bytes);
    if (rc == 0) {
        rc = nt_buf_init(&w->events.buf, w->block_bytes);
    }
    if (rc == 0) {
        rc = nt_buf_init(&w->stacks, w->block_bytes);
    }
    if (rc != 0) {
        goto out;
    }
    nt_event_block_reset(&w->meta);
    nt_event_block_reset(&w->events);
    nt_stack_block_reset(w);
    rc = nt_writer_write_header(w);
    if (rc != 0) {
        goto out;
    }
    w->sp_offset = w->offset;
    *out = w;
    w = NULL;
out:
    nt_writer_free(w);
    return rc;
}

int
nt_writer_write(struct nt_writer *w, const struct nt_event *ev)
{
    int rc;

    if (w == NULL || ev == NULL) {
        return -EINVAL;
    }
    rc = nt_writer_check_open(w);
    if (rc != 0) {
        return rc;
    }
    if (ev->metadata_id == 0 || ev->metadata_id > w->meta_count ||
        ev->payload_size > NT_MAX_PAYLOAD || (ev->payload_size > 0 && ev->payload == NULL) ||
        ev->stack_depth > NT_MAX_STACK_DEPTH || (ev->stack_depth > 0 && ev->stack == NULL)) {
        return -EINVAL;
    }
    if (w->reorder_window_ns == 0) {
        return nt_writer_put(w, ev);
    }
    rc = nt_writer_hold(w, ev);
    if (rc != 0) {
        return rc;
    }
    if (ev->timestamp > w->newest_ts) {
        w->newest_ts = ev->timestamp;
    }
    if (w->newest_ts >= w->reorder_window_ns) {
        rc = nt_writer_release_window(w, w->newest_ts - w->reorder_window_ns);
    }
    while (rc == 0 && w->held_bytes > w->reorder_max_bytes) {
        rc = nt_writer_release_first(w);
    }
    return rc;
}

int
nt_writer_write_payload(struct nt_writer *w, const struct nt_event_desc *desc, uint64_t tid,
                        uint64_t capture_tid, uint64_t ts, const struct nt_payload *p)
{
    struct nt_event ev;
    uint32_t meta;
    int rc;

    if (p->err != 0) {
        return p->err;
    }
    rc = nt_writer_define(w, desc, &meta);
    if (rc != 0) {
        return rc;
    }
    memset(&ev, 0, sizeof(ev));
    ev.metadata_id = meta;
    ev.thread_id = tid;
    ev.capture_thread_id = capture_tid;
    ev.processor = 0xFFFFFFFFu;
    ev.timestamp = ts;
    ev.payload = p->buf;
    ev.payload_size = (uint32_t)p->len;
    return nt_writer_write(w, &ev);
}

int
nt_writer_note_lost(struct nt_writer *w, uint64_t capture_thread_id, uint32_t count)
{
    uint32_t pos;
    int rc;

    if (w == NULL || w->finished) {
        return -EINVAL;
    }
    rc = nt_writer_thread(w, capture_thread_id, &pos);
    if (rc != 0) {
        return rc;
    }
    /*
     * Readers start a new capture thread at its first sequence number, so a loss before its
     * first event is no gap; nor does TraceEvent (4.0) count one that a sequence point shows
     * before that event. Such losses are numbered right after the first event, where every
     * reader counts them; a thread that never writes one shows them at the end's sequence
     * point (nt_writer_finish).
     */
    if (w->threads[pos].written) {
        w->threads[pos].sequence += count;
    } else {
        w->threads[pos].lost_before += count;
    }
    w->stats.lost += count;
    return 0;
}

void
nt_writer_set_release_limit(struct nt_writer *w, uint64_t limit)
{
    if (w != NULL) {
        w->release_limit = limit;
    }
}

int
nt_writer_flush(struct nt_writer *w)
{
    int rc = nt_writer_check_open(w);

    return rc != 0 ? rc : nt_writer_flush_all(w);
}

int
nt_writer_poll(struct nt_writer *w, uint64_t now)
{
    int rc = nt_writer_check_open(w);

    if (rc != 0) {
        return rc;
    }
    if (w->reorder_window_ns != 0 && now >= w->reorder_window_ns) {
        rc = nt_writer_release_window(w, now - w->reorder_window_ns);
        if (rc != 0) {
            return rc;
        }
    }
    if (now < w->last_flush_time || now - w->last_flush_time < w->flush_interval_ns) {
        return 0;
    }
    rc = nt_writer_flush_all(w);
    w->last_flush_time = now;
    return rc;
}

/* Releases every held event and writes a sequence point after them. */
static int
nt_writer_release_all(struct nt_writer *w)
{
    int rc = nt_writer_release(w, UINT64_MAX);

    return rc != 0 ? rc : nt_writer_write_sequence_point(w);
}

int
nt_writer_sequence_point(struct nt_writer *w)
{
    int rc = nt_writer_check_open(w);

    return rc != 0 ? rc : nt_writer_release_all(w);
}

int
nt_writer_finish(struct nt_writer *w)
{
    static const uint8_t end = NT_TAG_NULL_REFERENCE;
    int rc = nt_writer_check_open(w);
    uint32_t i;

    if (rc != 0) {
        return rc;
    }
    rc = nt_writer_release(w, UINT64_MAX);
    for (i = 0; i < w->thread_count; i++) {
        /* A thread that lost events but wrote none: the last sequence point lists them. */
        w->threads[i].sequence += w->threads[i].lost_before;
        w->threads[i].lost_before = 0;
    }
    if (rc == 0) {
        rc = nt_writer_write_sequence_point(w);
    }
    if (rc == 0) {
        rc = nt_writer_emit(w, &end, 1);
    }
    w->finished = 1;
    return rc;
}

void
nt_writer_get_stats(const struct nt_writer *w, struct nt_writer_stats *out)
{
    if (out == NULL) {
        return;
    }
    if (w == NULL) {
        memset(out, 0, sizeof(*out));
        return;
    }
    *out = w->stats;
}

void
nt_writer_free(struct nt_writer *w)
{
    size_t k;
    uint32_t i;

    if (w == NULL) {
        return;
    }
    for (k = 0; k < w->held_count; k++) {
        free(w->held[k]);
    }
    free(w->held);
    for (i = 0; i < w->meta_count; i++) {
        free(w->metas[i].provider);
        free(w->metas[i].name);
    }
    free(w->metas);
    free(w->meta.buf.data);
    free(w->events.buf.data);
    free(w->stacks.data);
    free(w->threads);
    free(w->thread_index);
    free(w->stack_entries);
    free(w->stack_index);
    free(w->stack_frames);
    free(w);
}
