/* SPDX-License-Identifier: MIT */
/*
 * nettrace/reader.c - the streaming nettrace reader: stream header, the V4/V5 FastSerialization
 * container and the V6 block container, blocks, compressed and uncompressed event headers,
 * metadata records, stack and label caches per sequence-point region, thread tables and
 * lost-event accounting (format doc 3-7). It pulls bytes from an nt_source and never seeks, so
 * a pipe works as well as a file.
 *
 * Context: one thread per reader. The input is hostile: every read goes through a bounds-checked
 * cursor (cursor.h), every allocation is checked against struct nt_reader_limits first, and a
 * malformed stream ends in -EBADMSG with the offset and a static reason. It must never trust a
 * size or count field before comparing it with the bytes that are really there.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nettrace/cursor.h"
#include "nettrace/format.h"
#include "nettrace/nettrace.h"

#define NT_DEFAULT_MAX_BLOCK          (64u << 20)
#define NT_DEFAULT_MAX_METADATA       (1u << 20)
#define NT_DEFAULT_MAX_METADATA_BYTES (256u << 20)
#define NT_DEFAULT_MAX_STACK_BYTES    (512u << 20)
#define NT_MAX_THREADS                (1u << 20) /* capture threads / V6 thread indexes held */
#define NT_MAX_TYPE_NAME              64         /* longest FastSerialization type name */
#define NT_MAX_FIELD_DEPTH            8          /* nesting of object / array field types */
#define NT_READ_CHUNK                 (1u << 20)

/* Keeps a rare path out of the per-event loop it is called from. */
#define NT_NOINLINE __attribute__((noinline))

/* An open-addressing hash from a 64-bit key to a 64-bit value (stack, label, thread, metadata). */
struct nt_map_slot {
    uint64_t key;
    uint64_t val; /* value + 1; 0 marks an empty slot */
};

struct nt_map {
    struct nt_map_slot *slots;
    size_t cap; /* power of two, or 0 */
    size_t count;
};

struct nt_stack_entry {
    size_t off; /* into stack_ips */
    uint32_t depth;
};

struct nt_label_entry {
    uint8_t activity[16];
    uint8_t related[16];
};

struct nt_thread_entry {
    uint64_t os_tid;  /* V6: OSThreadId of the index; V4/V5: unused */
    uint32_t seq;     /* last sequence number seen */
    uint8_t declared; /* V6: the index was declared by a thread block and not removed */
};

/* The event-header state carried from one event to the next inside a block (format doc 4.2). */
struct nt_header_state {
    uint32_t metadata_id;
    uint32_t seq;
    uint64_t capture_thread;
    uint32_t processor;
    uint64_t thread;
    uint32_t stack_id;
    uint64_t timestamp;
    uint8_t activity[16];
    uint8_t related[16];
    uint32_t label_list;
    uint32_t payload_size;
};

struct nt_reader {
    struct nt_source src;
    struct nt_reader_limits lim;
    struct nt_trace_info info;
    struct nt_reader_stats stats;
    int major; /* 4 (V4/V5 container) or 6 */

    /* Sticky first error. */
    int err;
    const char *err_reason;
    uint64_t err_offset;

    /* Input buffer: bytes [pos, len) are read but not consumed; buf[0] is at stream offset base. */
    uint8_t *buf;
    size_t cap;
    size_t pos;
    size_t len;
    uint64_t base;
    int eof;
    int done;      /* the end-of-stream tag/block was read */
    int truncated; /* the error is the input ending early, not malformed bytes */

    /* The event block being iterated, if any. */
    int in_block;
    int md_block; /* the open block is a V4/V5 MetadataBlock */
    int compressed;
    int fast_block; /* compressed V4/V5 events: nt_reader_event_fast() may take them */
    struct nt_cursor blk;
    struct nt_header_state hdr;
    /*
     * nt_reader_next() decodes the event at blk.p itself while (uintptr_t)blk.p < fast_end: a
     * fast block still holding the longest compressed header, no error, and the event before
     * it in the block returned with the metadata id last_md_id and the capture thread
     * last_thread, whose sequence number was set to hdr.seq. 0 closes the path; set by
     * nt_reader_fast_open(), cleared by every error, the start and end of a block and every
     * event nt_reader_event_finish() takes (it opens it again after an event).
     */
    uintptr_t fast_end;
    uintptr_t block_fast_end; /* fast_end while in this block, or 0 for a block never fast */
    uint32_t *fast_seq;       /* while fast_end is open: &threads[last_thread - 1].seq */

    /* Metadata: id -> index into descs (descs are never freed before the reader). */
    struct nt_map md_map;
    struct nt_event_desc **descs;
    size_t ndescs;
    size_t descs_cap;
    size_t md_bytes;

    /* Stacks of the current sequence-point region. */
    struct nt_map stack_map;
    struct nt_stack_entry *stacks;
    size_t nstacks;
    size_t stacks_cap;
    uint64_t *stack_ips;
    size_t nips;
    size_t ips_cap;
    size_t dense_stacks; /* stacks[0, dense_stacks) have the ids 1, 2, 3...: no map needed */

    /* V6 label lists of the current region. */
    struct nt_map label_map;
    struct nt_label_entry *labels;
    size_t nlabels;
    size_t labels_cap;

    /* Threads: V4/V5 keyed by capture thread id, V6 by thread index. */
    struct nt_map thread_map;
    struct nt_thread_entry *threads;
    size_t nthreads;
    size_t threads_cap;

    /* Last lookups: consecutive events mostly share metadata, stack and capture thread. */
    uint32_t last_md_id; /* 0: none */
    const struct nt_event_desc *last_md;
    uint32_t last_stack_id; /* 0: none */
    size_t last_stack;
    uint64_t last_thread_key;
    size_t last_thread; /* index + 1; 0: none */
};

/* ------------------------------------------------------------------------------------------ */
/* Small containers                                                                           */
/* ------------------------------------------------------------------------------------------ */

static size_t
nt_map_hash(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

/* Returns the value + 1 of key, or 0. */
static uint64_t
nt_map_get(const struct nt_map *m, uint64_t key)
{
    size_t i;

    if (m->cap == 0) {
        return 0;
    }
    for (i = nt_map_hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].val == 0) {
            return 0;
        }
        if (m->slots[i].key == key) {
            return m->slots[i].val;
        }
    }
}

static int
nt_map_grow(struct nt_map *m)
{
    size_t ncap = m->cap != 0 ? m->cap * 2 : 64;
    struct nt_map_slot *ns = calloc(ncap, sizeof(*ns));
    size_t i;

    if (ns == NULL) {
        return -ENOMEM;
    }
    for (i = 0; i < m->cap; i++) {
        if (m->slots[i].val != 0) {
            size_t j = nt_map_hash(m->slots[i].key, ncap);

            while (ns[j].val != 0) {
                j = (j + 1) & (ncap - 1);
            }
            ns[j] = m->slots[i];
        }
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

/* Sets key to val (replacing). Returns 0 or -ENOMEM. */
static int
nt_map_put(struct nt_map *m, uint64_t key, uint64_t val)
{
    size_t i;
    int err;

    if ((m->count + 1) * 2 > m->cap) {
        err = nt_map_grow(m);
        if (err != 0) {
            return err;
        }
    }
    for (i = nt_map_hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].val == 0) {
            m->slots[i].key = key;
            m->slots[i].val = val + 1;
            m->count++;
            return 0;
        }
        if (m->slots[i].key == key) {
            m->slots[i].val = val + 1;
            return 0;
        }
    }
}

static void
nt_map_clear(struct nt_map *m)
{
    if (m->count != 0) {
        memset(m->slots, 0, m->cap * sizeof(*m->slots));
    }
    m->count = 0;
}

static size_t
nt_map_bytes(const struct nt_map *m)
{
    return m->cap * sizeof(struct nt_map_slot);
}

/* Makes room for one more element of size elem in *v (count n, capacity *cap). */
static int
nt_vec_reserve(void **v, size_t *cap, size_t n, size_t need, size_t elem)
{
    size_t ncap;
    void *nv;

    if (n + need <= *cap) {
        return 0;
    }
    ncap = *cap != 0 ? *cap : 16;
    while (ncap < n + need) {
        ncap *= 2;
    }
    nv = realloc(*v, ncap * elem);
    if (nv == NULL) {
        return -ENOMEM;
    }
    *v = nv;
    *cap = ncap;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Errors and input                                                                           */
/* ------------------------------------------------------------------------------------------ */

static int
nt_reader_fail_at(struct nt_reader *r, int err, uint64_t offset, const char *reason)
{
    r->fast_end = 0;
    if (r->err == 0) {
        r->err = err;
        r->err_offset = offset;
        r->err_reason = reason;
    }
    return r->err;
}

static uint64_t
nt_reader_offset(const struct nt_reader *r)
{
    return r->base + r->pos;
}

static int
nt_reader_fail(struct nt_reader *r, const char *reason)
{
    return nt_reader_fail_at(r, -EBADMSG, nt_reader_offset(r), reason);
}

/* Turns a cursor's recorded error into the reader's. */
static int
nt_reader_fail_cursor(struct nt_reader *r, const struct nt_cursor *c)
{
    return nt_reader_fail_at(r, -EBADMSG, c->err_offset, c->err);
}

/*
 * Makes n bytes available at buf + pos. Returns 0, 1 when the input ends first (the bytes that
 * exist stay available), or a negative errno from the source or the allocator.
 */
static int
nt_reader_fill(struct nt_reader *r, size_t n)
{
    while (r->len - r->pos < n) {
        ssize_t got;

        if (r->eof) {
            return 1;
        }
        if (r->cap - r->len < n - (r->len - r->pos) || r->cap - r->len < 4096) {
            /* Compact first; grow only when the request itself does not fit. */
            if (r->pos != 0) {
                memmove(r->buf, r->buf + r->pos, r->len - r->pos);
                r->len -= r->pos;
                r->base += r->pos;
                r->pos = 0;
            }
            if (r->cap < n + 4096) {
                size_t ncap = r->cap != 0 ? r->cap : NT_READ_CHUNK;
                uint8_t *nb;

                while (ncap < n + 4096) {
                    ncap *= 2;
                }
                nb = realloc(r->buf, ncap);
                if (nb == NULL) {
                    return nt_reader_fail_at(r, -ENOMEM, nt_reader_offset(r),
                                             "out of memory for the input buffer");
                }
                r->buf = nb;
                r->cap = ncap;
            }
        }
        got = r->src.read(r->src.ctx, r->buf + r->len, r->cap - r->len);
        if (got < 0) {
            return nt_reader_fail_at(r, (int)got, r->base + r->len, "read error");
        }
        if (got == 0) {
            r->eof = 1;
            continue;
        }
        r->len += (size_t)got;
    }
    return 0;
}

/*
 * Consumes n bytes of the stream and returns them (valid until the next fill), or NULL with the
 * error recorded: a truncated stream is reported at the start of the item, with what.
 */
static const uint8_t *
nt_reader_take(struct nt_reader *r, size_t n, const char *what)
{
    const uint8_t *p;
    int rc = nt_reader_fill(r, n);

    if (rc != 0) {
        if (rc > 0) {
            r->truncated = r->err == 0;
            nt_reader_fail(r, what);
        }
        return NULL;
    }
    p = r->buf + r->pos;
    r->pos += n;
    return p;
}

/* Reads one byte and checks it against want. */
static int
nt_reader_expect(struct nt_reader *r, uint8_t want, const char *truncated, const char *wrong)
{
    const uint8_t *p = nt_reader_take(r, 1, truncated);

    if (p == NULL) {
        return r->err;
    }
    if (*p != want) {
        r->pos--;
        return nt_reader_fail(r, wrong);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/*
 * Metadata records are parsed twice: once to measure (out == NULL) and once to fill a single
 * allocation of exactly that size, so a description is one block and never over-allocated.
 */
struct nt_mdb {
    uint8_t *out;
    size_t used;
    size_t cap;
};

static void *
nt_mdb_alloc(struct nt_mdb *b, size_t size, size_t align)
{
    void *p = NULL;

    b->used = (b->used + align - 1) & ~(align - 1);
    if (b->out != NULL && b->used + size <= b->cap) {
        p = b->out + b->used;
        memset(p, 0, size);
    }
    b->used += size;
    return p;
}

static const char *
nt_mdb_utf16(struct nt_mdb *b, const uint8_t *s, size_t len)
{
    size_t n = nt_utf16_to_utf8(s, len, NULL, 0);
    char *out = nt_mdb_alloc(b, n + 1, 1);

    if (out == NULL) {
        return "";
    }
    nt_utf16_to_utf8(s, len, out, n + 1);
    return out;
}

static const char *
nt_mdb_utf8(struct nt_mdb *b, const uint8_t *s, size_t len)
{
    char *out = nt_mdb_alloc(b, len + 1, 1);

    if (out == NULL) {
        return "";
    }
    memcpy(out, s, len);
    out[len] = '\0';
    return out;
}

/* Field layouts (format doc 5.1, 5.3). */
enum nt_layout {
    NT_LAYOUT_V1, /* V3-V5 field list: type, [nested], name */
    NT_LAYOUT_V2, /* V5 V2Params tag: size, name, type [, element] */
    NT_LAYOUT_V6, /* V6: u16 size, string name, u8 type ... */
};

static int nt_md_fields(struct nt_cursor *c, struct nt_mdb *b, enum nt_layout layout,
                        unsigned depth, const struct nt_field **out, uint32_t *count);

/*
 * Reads one name in the layout's encoding (V6: UTF-8 after its length; V3-V5: UTF-16 up to a
 * NUL) and copies it into b as UTF-8. *name is left as it was when the name does not parse.
 */
static int
nt_md_name(struct nt_cursor *c, struct nt_mdb *b, enum nt_layout layout, const char **name)
{
    const uint8_t *s;
    size_t len;

    if (layout == NT_LAYOUT_V6) {
        if (nt_cursor_str6(c, &s, &len) != 0) {
            return -EBADMSG;
        }
        *name = nt_mdb_utf8(b, s, len);
    } else {
        if (nt_cursor_utf16z(c, &s, &len) != 0) {
            return -EBADMSG;
        }
        *name = nt_mdb_utf16(b, s, len);
    }
    return 0;
}

/* The head V5 and V6 metadata share (format doc 5.1, 5.3): ids and names, in d. */
static int
nt_md_head(struct nt_cursor *c, struct nt_mdb *b, enum nt_layout layout, struct nt_event_desc *d)
{
    d->metadata_id = layout == NT_LAYOUT_V6 ? nt_cursor_varu32(c) : nt_cursor_u32(c);
    if (nt_md_name(c, b, layout, &d->provider) != 0) {
        return -EBADMSG;
    }
    d->event_id = layout == NT_LAYOUT_V6 ? nt_cursor_varu32(c) : nt_cursor_u32(c);
    return nt_md_name(c, b, layout, &d->name);
}

static int
nt_md_type_ok(uint32_t code, enum nt_layout layout)
{
    if (code == NT_TYPE_OBJECT || (code >= NT_TYPE_BOOLEAN && code <= NT_TYPE_STRING)) {
        return 1;
    }
    if (code == NT_TYPE_ARRAY) {
        return layout != NT_LAYOUT_V1;
    }
    return layout == NT_LAYOUT_V6 && code >= NT_TYPE_VARINT && code <= NT_TYPE_BOOLEAN8;
}

/* Reads a Type (type code and what depends on it) into f. */
static int
nt_md_type(struct nt_cursor *c, struct nt_mdb *b, enum nt_layout layout, unsigned depth,
           struct nt_field *f, int is_element)
{
    uint32_t code = layout == NT_LAYOUT_V6 ? nt_cursor_u8(c) : nt_cursor_u32(c);
    struct nt_field elem;

    if (!nt_cursor_ok(c)) {
        return -EBADMSG;
    }
    if (!nt_md_type_ok(code, layout)) {
        return nt_cursor_fail_at(c, nt_cursor_offset(c) - (layout == NT_LAYOUT_V6 ? 1 : 4),
                                 "unknown field type code in metadata");
    }
    if (depth > NT_MAX_FIELD_DEPTH) {
        return nt_cursor_fail(c, "metadata field types nested too deeply");
    }
    memset(&elem, 0, sizeof(elem));
    f->type = (enum nt_type)code;
    switch (code) {
    case NT_TYPE_OBJECT:
        return nt_md_fields(c, b, layout, depth + 1, &f->fields, &f->field_count);
    case NT_TYPE_ARRAY:
    case NT_TYPE_FIXED_ARRAY:
    case NT_TYPE_RELLOC:
    case NT_TYPE_DATALOC:
        if (is_element) {
            return nt_cursor_fail(c, "array of arrays in metadata");
        }
        if (nt_md_type(c, b, layout, depth + 1, &elem, 1) != 0) {
            return -EBADMSG;
        }
        f->element_type = elem.type;
        f->fields = elem.fields;
        f->field_count = elem.field_count;
        if (code == NT_TYPE_FIXED_ARRAY) {
            f->fixed_count = nt_cursor_u16(c);
        }
        return nt_cursor_ok(c) ? 0 : -EBADMSG;
    default:
        return 0;
    }
}

/* Reads a field list: a count, then the fields in the layout's form. */
static int
nt_md_fields(struct nt_cursor *c, struct nt_mdb *b, enum nt_layout layout, unsigned depth,
             const struct nt_field **out, uint32_t *count)
{
    size_t min = layout == NT_LAYOUT_V1 ? 6 : layout == NT_LAYOUT_V2 ? 10 : 4;
    uint64_t at = nt_cursor_offset(c);
    uint32_t n = layout == NT_LAYOUT_V6 ? nt_cursor_u16(c) : nt_cursor_u32(c);
    struct nt_field *fields;
    uint32_t i;

    *out = NULL;
    *count = 0;
    if (!nt_cursor_ok(c)) {
        return -EBADMSG;
    }
    if (n > nt_cursor_left(c) / min) {
        return nt_cursor_fail_at(c, at, "field count exceeds the metadata record");
    }
    fields = nt_mdb_alloc(b, (size_t)n * sizeof(*fields), _Alignof(struct nt_field));
    for (i = 0; i < n; i++) {
        struct nt_field f;

        memset(&f, 0, sizeof(f));
        if (layout == NT_LAYOUT_V1) {
            if (nt_md_type(c, b, layout, depth, &f, 0) != 0 ||
                nt_md_name(c, b, layout, &f.name) != 0) {
                return -EBADMSG;
            }
        } else {
            struct nt_cursor sub;
            uint64_t fat = nt_cursor_offset(c);
            uint32_t size = layout == NT_LAYOUT_V2 ? nt_cursor_u32(c) : nt_cursor_u16(c);
            const uint8_t *body;

            if (layout == NT_LAYOUT_V2) {
                if (nt_cursor_ok(c) && size < 4) {
                    return nt_cursor_fail_at(c, fat, "metadata field size below 4");
                }
                size -= 4; /* V2Params sizes include the size field itself */
            }
            body = nt_cursor_take(c, size);
            if (body == NULL) {
                return -EBADMSG;
            }
            nt_cursor_init(&sub, body, size, nt_cursor_offset(c) - size,
                           "metadata field runs past its size");
            (void)nt_md_name(&sub, b, layout, &f.name); /* a bad name fails the cursor */
            if (nt_cursor_ok(&sub)) {
                nt_md_type(&sub, b, layout, depth, &f, 0);
            }
            if (!nt_cursor_ok(&sub)) {
                return nt_cursor_fail_at(c, sub.err_offset, sub.err);
            }
        }
        if (fields != NULL) {
            fields[i] = f;
        }
    }
    *out = fields;
    *count = n;
    return 0;
}

/* The rest of a V3-V5 metadata payload after its head (format doc 5.1), into md and b. */
static int
nt_md_rest_v5(struct nt_cursor *c, struct nt_mdb *b, struct nt_event_desc *md)
{
    md->keywords = nt_cursor_u64(c);
    md->version = nt_cursor_u32(c);
    md->level = nt_cursor_u32(c);
    if (!nt_cursor_ok(c)) {
        return -EBADMSG;
    }
    if (nt_cursor_left(c) > 0) {
        /*
         * TraceEvent treats an unparsable field list as "no fields" rather than a broken trace;
         * so do we, and then ignore the rest of the record (its tags cannot be located).
         */
        struct nt_cursor v1 = *c;

        v1.short_reason = "metadata field list truncated";
        if (nt_md_fields(&v1, b, NT_LAYOUT_V1, 0, &md->fields, &md->field_count) != 0) {
            md->fields = NULL;
            md->field_count = 0;
            c->p = c->end;
        } else {
            c->p = v1.p;
        }
    }
    c->short_reason = "metadata tag header truncated";
    while (nt_cursor_left(c) > 0) {
        uint64_t at = nt_cursor_offset(c);
        uint32_t size = nt_cursor_u32(c);
        uint8_t kind = nt_cursor_u8(c);
        const uint8_t *body;
        struct nt_cursor tag;

        if (!nt_cursor_ok(c)) {
            return -EBADMSG;
        }
        if (size > nt_cursor_left(c)) {
            return nt_cursor_fail_at(c, at, "metadata tag runs past the record");
        }
        body = nt_cursor_take(c, size);
        nt_cursor_init(&tag, body, size, nt_cursor_offset(c) - size, "metadata tag truncated");
        if (kind == NT_METADATA_TAG_OPCODE) {
            md->opcode = nt_cursor_u8(&tag);
            if (!nt_cursor_ok(&tag)) {
                return nt_cursor_fail_at(c, tag.err_offset, tag.err);
            }
        } else if (kind == NT_METADATA_TAG_V2_PARAMS) {
            const struct nt_field *f;
            uint32_t n;

            if (nt_md_fields(&tag, b, NT_LAYOUT_V2, 0, &f, &n) == 0) {
                md->fields = f;
                md->field_count = n;
            } else {
                md->fields = NULL; /* as TraceEvent: unparsable parameters = no fields */
                md->field_count = 0;
            }
        }
        /* Unknown tags are skipped by size (format doc 5.1). */
    }
    return 0;
}

/* The rest of a V6 metadata row after its head (format doc 5.3), into md and b. */
static int
nt_md_rest_v6(struct nt_cursor *c, struct nt_mdb *b, struct nt_event_desc *md)
{
    md->level = 5;
    if (nt_md_fields(c, b, NT_LAYOUT_V6, 0, &md->fields, &md->field_count) != 0) {
        return -EBADMSG;
    }
    if (nt_cursor_left(c) > 0) {
        uint16_t size = nt_cursor_u16(c);
        const uint8_t *body = nt_cursor_take(c, size);
        struct nt_cursor opt;

        if (body == NULL) {
            return -EBADMSG;
        }
        nt_cursor_init(&opt, body, size, nt_cursor_offset(c) - size, "optional metadata truncated");
        while (nt_cursor_ok(&opt) && nt_cursor_left(&opt) > 0) {
            uint8_t kind = nt_cursor_u8(&opt);

            switch (kind) {
            case 1:
                md->opcode = nt_cursor_u8(&opt);
                break;
            case 3:
                md->keywords = nt_cursor_u64(&opt);
                break;
            case 4:
            case 5:
                nt_cursor_skip_str6(&opt);
                break;
            case 6:
                nt_cursor_skip_str6(&opt);
                nt_cursor_skip_str6(&opt);
                break;
            case 7:
                (void)nt_cursor_take(&opt, 16);
                break;
            case 8:
                md->level = nt_cursor_u8(&opt);
                break;
            case 9:
                md->version = nt_cursor_u8(&opt);
                break;
            default:
                nt_cursor_fail_at(&opt, nt_cursor_offset(&opt) - 1,
                                  "unknown optional metadata kind");
                break;
            }
        }
        if (!nt_cursor_ok(&opt)) {
            return nt_cursor_fail_at(c, opt.err_offset, opt.err);
        }
    }
    /* The rest of the row is reserved for future versions. */
    return 0;
}

/*
 * Parses one metadata record into b: the event description first (nt_reader_add_metadata reads
 * it back at b's start), then what it points to. The head is the same in every version; the
 * rest is V3-V5's (format doc 5.1) or V6's (5.3).
 */
static int
nt_md_parse(struct nt_cursor *c, struct nt_mdb *b, int v6)
{
    struct nt_event_desc *d = nt_mdb_alloc(b, sizeof(*d), _Alignof(struct nt_event_desc));
    struct nt_event_desc tmp;
    int err;

    memset(&tmp, 0, sizeof(tmp));
    if (!v6) {
        c->short_reason = "metadata record truncated";
    }
    if (nt_md_head(c, b, v6 ? NT_LAYOUT_V6 : NT_LAYOUT_V1, &tmp) != 0) {
        return -EBADMSG;
    }
    err = v6 ? nt_md_rest_v6(c, b, &tmp) : nt_md_rest_v5(c, b, &tmp);
    if (err == 0 && d != NULL) {
        *d = tmp;
    }
    return err;
}

/* Parses one metadata record at [p, p + n) (stream offset off) and adds it to the table. */
static int
nt_reader_add_metadata(struct nt_reader *r, const uint8_t *p, size_t n, uint64_t off)
{
    struct nt_cursor c;
    struct nt_mdb b = { NULL, 0, 0 };
    struct nt_event_desc *d;
    int err;

    nt_cursor_init(&c, p, n, off, "metadata record truncated");
    err = nt_md_parse(&c, &b, r->major == 6);
    if (err != 0) {
        return nt_reader_fail_cursor(r, &c);
    }
    if (r->ndescs >= r->lim.max_metadata) {
        return nt_reader_fail_at(r, -EBADMSG, off, "more metadata records than the limit");
    }
    if (b.used > r->lim.max_metadata_bytes - r->md_bytes) {
        return nt_reader_fail_at(r, -EBADMSG, off, "metadata exceeds the memory limit");
    }
    if (nt_vec_reserve((void **)&r->descs, &r->descs_cap, r->ndescs, 1, sizeof(*r->descs)) != 0) {
        return nt_reader_fail_at(r, -ENOMEM, off, "out of memory for metadata");
    }
    b.out = malloc(b.used);
    if (b.out == NULL) {
        return nt_reader_fail_at(r, -ENOMEM, off, "out of memory for metadata");
    }
    b.cap = b.used;
    b.used = 0;
    nt_cursor_init(&c, p, n, off, "metadata record truncated");
    err = nt_md_parse(&c, &b, r->major == 6);
    d = (void *)b.out; /* malloc memory: aligned for any type */
    if (err != 0 || b.used != b.cap) {
        free(b.out); /* cannot happen: both passes see the same bytes */
        return nt_reader_fail_at(r, -EBADMSG, off, "metadata record parsed inconsistently");
    }
    if (d->metadata_id == 0) {
        free(b.out);
        return nt_reader_fail_at(r, -EBADMSG, off, "metadata record defines id 0");
    }
    if (nt_map_get(&r->md_map, d->metadata_id) != 0) {
        free(b.out);
        return nt_reader_fail_at(r, -EBADMSG, off, "metadata id defined twice");
    }
    if (nt_map_put(&r->md_map, d->metadata_id, r->ndescs) != 0) {
        free(b.out);
        return nt_reader_fail_at(r, -ENOMEM, off, "out of memory for metadata");
    }
    r->descs[r->ndescs++] = d;
    r->last_md_id = 0; /* the cached id may have been an undefined one */
    r->md_bytes += b.cap + sizeof(struct nt_map_slot) * 2;
    r->stats.metadata++;
    return 0;
}

const struct nt_event_desc *
nt_reader_metadata(const struct nt_reader *r, uint32_t metadata_id)
{
    uint64_t v = nt_map_get(&r->md_map, metadata_id);

    return v != 0 ? r->descs[v - 1] : NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Threads and sequence numbers (format doc 4.4)                                              */
/* ------------------------------------------------------------------------------------------ */

static NT_NOINLINE struct nt_thread_entry *
nt_reader_thread_lookup(struct nt_reader *r, uint64_t key)
{
    uint64_t v = nt_map_get(&r->thread_map, key);

    if (v == 0) {
        return NULL;
    }
    r->last_thread_key = key;
    r->last_thread = (size_t)v;
    return &r->threads[v - 1];
}

/* The entry of a thread key, or NULL; consecutive events mostly share their capture thread. */
static inline struct nt_thread_entry *
nt_reader_thread(struct nt_reader *r, uint64_t key)
{
    if (r->last_thread != 0 && r->last_thread_key == key) {
        return &r->threads[r->last_thread - 1];
    }
    return nt_reader_thread_lookup(r, key);
}

static struct nt_thread_entry *
nt_reader_thread_add(struct nt_reader *r, uint64_t key, uint64_t at)
{
    struct nt_thread_entry *t;

    if (r->nthreads >= NT_MAX_THREADS) {
        nt_reader_fail_at(r, -EBADMSG, at, "more threads than the limit");
        return NULL;
    }
    if (nt_vec_reserve((void **)&r->threads, &r->threads_cap, r->nthreads, 1,
                       sizeof(*r->threads)) != 0 ||
        nt_map_put(&r->thread_map, key, r->nthreads) != 0) {
        nt_reader_fail_at(r, -ENOMEM, at, "out of memory for threads");
        return NULL;
    }
    t = &r->threads[r->nthreads++];
    memset(t, 0, sizeof(*t));
    return t;
}

/*
 * Accounts an observed sequence number of a capture thread: a gap of k after the previous one
 * means k events lost. V3-V5 treat a previous value of 0 as thread-id reuse (no loss); a
 * backward jump counts nothing (TraceEvent counts INT_MAX there; we do not invent losses).
 */
static void
nt_reader_seq_check(struct nt_reader *r, struct nt_thread_entry *t, uint32_t expected_last)
{
    if (r->major >= 6 || t->seq != 0) {
        uint32_t gap = expected_last - t->seq;

        if ((int32_t)gap > 0) {
            r->stats.lost_events += gap;
        }
    }
    t->seq = expected_last;
}

/* ------------------------------------------------------------------------------------------ */
/* Stacks and labels                                                                          */
/* ------------------------------------------------------------------------------------------ */

static size_t
nt_reader_region_bytes(const struct nt_reader *r)
{
    return r->ips_cap * sizeof(uint64_t) + r->stacks_cap * sizeof(struct nt_stack_entry) +
           nt_map_bytes(&r->stack_map) + r->labels_cap * sizeof(struct nt_label_entry) +
           nt_map_bytes(&r->label_map);
}

static void
nt_reader_region_clear(struct nt_reader *r)
{
    nt_map_clear(&r->stack_map);
    r->nstacks = 0;
    r->nips = 0;
    r->dense_stacks = 0;
    nt_map_clear(&r->label_map);
    r->nlabels = 0;
    r->last_stack_id = 0;
}

/* Stack block content (format doc 3.6). */
static int
nt_reader_stack_block(struct nt_reader *r, struct nt_cursor *c)
{
    uint32_t first = nt_cursor_u32(c);
    uint32_t count = nt_cursor_u32(c);
    unsigned psize = r->info.pointer_size;
    uint32_t i;

    if (!nt_cursor_ok(c)) {
        return nt_reader_fail_cursor(r, c);
    }
    if (count > nt_cursor_left(c) / 4) {
        return nt_reader_fail_at(r, -EBADMSG, nt_cursor_offset(c) - 4,
                                 "stack count exceeds the block");
    }
    for (i = 0; i < count; i++) {
        uint64_t at = nt_cursor_offset(c);
        uint32_t size = nt_cursor_u32(c);
        const uint8_t *ips = nt_cursor_take(c, size);
        uint32_t id = first + i;
        uint32_t depth = size / psize;
        uint32_t k;

        if (ips == NULL) {
            return nt_reader_fail_cursor(r, c);
        }
        if (size % psize != 0) {
            return nt_reader_fail_at(r, -EBADMSG, at,
                                     "stack size is not a multiple of the pointer size");
        }
        if (id == 0) {
            return nt_reader_fail_at(r, -EBADMSG, at, "stack id 0 is reserved");
        }
        if (nt_map_get(&r->stack_map, id) != 0) {
            return nt_reader_fail_at(r, -EBADMSG, at,
                                     "stack id defined twice in one sequence-point region");
        }
        if (nt_reader_region_bytes(r) > r->lim.max_stack_bytes ||
            (size_t)depth * 8 + 64 > r->lim.max_stack_bytes - nt_reader_region_bytes(r)) {
            return nt_reader_fail_at(r, -EBADMSG, at, "stacks exceed the memory limit");
        }
        if (nt_vec_reserve((void **)&r->stack_ips, &r->ips_cap, r->nips, depth, sizeof(uint64_t)) !=
                    0 ||
            nt_vec_reserve((void **)&r->stacks, &r->stacks_cap, r->nstacks, 1,
                           sizeof(*r->stacks)) != 0 ||
            nt_map_put(&r->stack_map, id, r->nstacks) != 0) {
            return nt_reader_fail_at(r, -ENOMEM, at, "out of memory for stacks");
        }
        for (k = 0; k < depth; k++) {
            r->stack_ips[r->nips + k] = psize == 8 ? nt_load_u64le(ips + (size_t)k * 8)
                                                   : nt_load_u32le(ips + (size_t)k * 4);
        }
        if (r->dense_stacks == r->nstacks && id == r->nstacks + 1) {
            r->dense_stacks++;
        }
        r->stacks[r->nstacks].off = r->nips;
        r->stacks[r->nstacks].depth = depth;
        r->nstacks++;
        r->nips += depth;
        r->stats.stacks++;
    }
    return 0;
}

/* V6 label list block (format doc 6). Only the activity ids are kept. */
static int
nt_reader_label_block(struct nt_reader *r, struct nt_cursor *c)
{
    uint32_t first = nt_cursor_u32(c);
    uint32_t count = nt_cursor_u32(c);
    uint32_t i;

    if (!nt_cursor_ok(c)) {
        return nt_reader_fail_cursor(r, c);
    }
    if (first == 0) {
        return nt_reader_fail_at(r, -EBADMSG, nt_cursor_offset(c) - 8,
                                 "label list index 0 is reserved");
    }
    if (count > nt_cursor_left(c)) {
        return nt_reader_fail_at(r, -EBADMSG, nt_cursor_offset(c) - 4,
                                 "label list count exceeds the block");
    }
    c->short_reason = "label list truncated";
    for (i = 0; i < count; i++) {
        uint64_t at = nt_cursor_offset(c);
        struct nt_label_entry e;
        uint8_t kind;

        memset(&e, 0, sizeof(e));
        do {
            const uint8_t *s;

            kind = nt_cursor_u8(c);
            switch (kind & 0x7F) {
            case 1:
            case 2:
                s = nt_cursor_take(c, 16);
                if (s != NULL) {
                    memcpy((kind & 0x7F) == 1 ? e.activity : e.related, s, 16);
                }
                break;
            case 3:
                (void)nt_cursor_take(c, 16);
                break;
            case 4:
            case 8:
                (void)nt_cursor_u64(c);
                break;
            case 5:
                nt_cursor_skip_str6(c);
                nt_cursor_skip_str6(c);
                break;
            case 6:
                nt_cursor_skip_str6(c);
                (void)nt_cursor_varu64(c);
                break;
            case 7:
            case 9:
            case 10:
                (void)nt_cursor_u8(c);
                break;
            default:
                nt_cursor_fail_at(c, nt_cursor_offset(c) - 1, "unknown label kind");
                break;
            }
        } while (nt_cursor_ok(c) && (kind & 0x80) == 0);
        if (!nt_cursor_ok(c)) {
            return nt_reader_fail_cursor(r, c);
        }
        if (nt_map_get(&r->label_map, (uint64_t)first + i) != 0) {
            return nt_reader_fail_at(r, -EBADMSG, at,
                                     "label list defined twice in one sequence-point region");
        }
        if (nt_reader_region_bytes(r) > r->lim.max_stack_bytes ||
            sizeof(e) + 64 > r->lim.max_stack_bytes - nt_reader_region_bytes(r)) {
            return nt_reader_fail_at(r, -EBADMSG, at, "label lists exceed the memory limit");
        }
        if (nt_vec_reserve((void **)&r->labels, &r->labels_cap, r->nlabels, 1,
                           sizeof(*r->labels)) != 0 ||
            nt_map_put(&r->label_map, (uint64_t)first + i, r->nlabels) != 0) {
            return nt_reader_fail_at(r, -ENOMEM, at, "out of memory for label lists");
        }
        r->labels[r->nlabels++] = e;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Sequence points and V6 thread blocks                                                       */
/* ------------------------------------------------------------------------------------------ */

/* An SP entry (or V6 RemoveThread entry): the thread's last attempted sequence number. */
static int
nt_reader_checkpoint(struct nt_reader *r, uint64_t key, uint32_t seq, uint64_t at)
{
    struct nt_thread_entry *t = nt_reader_thread(r, key);

    if (t == NULL) {
        /* V6 writers may name a thread before its thread block; it is declared later. */
        t = nt_reader_thread_add(r, key, at);
        if (t == NULL) {
            return r->err;
        }
        /*
         * V4/V5: sequence numbers start at 1 with a thread's first event, so a thread that a
         * sequence point lists before any of its events were seen lost all seq of them (the
         * sequence point exists to catch exactly that; TraceEvent 4.0 counts none of them, so
         * pipeprof's writer numbers such losses after the thread's first event, or lists them
         * only when it wrote none). V6 writers may list a thread before its first event block,
         * so there it starts at seq without a loss.
         */
        if (r->info.format_version != 6) {
            r->stats.lost_events += seq;
        }
        t->seq = seq;
        return 0;
    }
    nt_reader_seq_check(r, t, seq);
    return 0;
}

static int
nt_reader_sp_block(struct nt_reader *r, struct nt_cursor *c)
{
    uint32_t flags = 0;
    uint32_t count;
    uint32_t i;

    c->short_reason = "sequence point block truncated";
    (void)nt_cursor_u64(c); /* timestamp */
    if (r->major >= 6) {
        flags = nt_cursor_u32(c);
    }
    count = nt_cursor_u32(c);
    if (!nt_cursor_ok(c)) {
        return nt_reader_fail_cursor(r, c);
    }
    if (count > nt_cursor_left(c) / (r->major >= 6 ? 2 : 12)) {
        return nt_reader_fail_at(r, -EBADMSG, nt_cursor_offset(c) - 4,
                                 "sequence point thread count exceeds the block");
    }
    for (i = 0; i < count; i++) {
        uint64_t at = nt_cursor_offset(c);
        uint64_t key = r->major >= 6 ? nt_cursor_varu64(c) : nt_cursor_u64(c);
        uint32_t seq = r->major >= 6 ? nt_cursor_varu32(c) : nt_cursor_u32(c);

        if (!nt_cursor_ok(c)) {
            return nt_reader_fail_cursor(r, c);
        }
        if (nt_reader_checkpoint(r, key, seq, at) != 0) {
            return r->err;
        }
    }
    nt_reader_region_clear(r);
    if (flags & 1) {
        nt_map_clear(&r->thread_map);
        r->nthreads = 0;
        r->last_thread = 0;
    }
    if (flags & 2) {
        /* Descriptions stay allocated (and counted) so earlier pointers remain valid. */
        nt_map_clear(&r->md_map);
        r->last_md_id = 0;
    }
    r->stats.sequence_points++;
    return 0;
}

static int
nt_reader_thread_block(struct nt_reader *r, struct nt_cursor *c)
{
    while (nt_cursor_left(c) > 0) {
        uint64_t at = nt_cursor_offset(c);
        uint16_t size = nt_cursor_u16(c);
        const uint8_t *row = nt_cursor_take(c, size);
        struct nt_cursor rc;
        struct nt_thread_entry *t;
        uint64_t index;
        uint64_t tid = 0;

        if (row == NULL) {
            return nt_reader_fail_at(r, -EBADMSG, at, "thread row runs past the block");
        }
        nt_cursor_init(&rc, row, size, at + 2, "thread row truncated");
        index = nt_cursor_varu64(&rc);
        while (nt_cursor_ok(&rc) && nt_cursor_left(&rc) > 0) {
            uint8_t kind = nt_cursor_u8(&rc);

            switch (kind) {
            case 1:
                nt_cursor_skip_str6(&rc);
                break;
            case 2:
                (void)nt_cursor_varu64(&rc);
                break;
            case 3:
                tid = nt_cursor_varu64(&rc);
                break;
            case 4:
                nt_cursor_skip_str6(&rc);
                nt_cursor_skip_str6(&rc);
                break;
            default:
                /* Unknown kinds have no size: the rest of the row cannot be read. */
                rc.p = rc.end;
                break;
            }
        }
        if (!nt_cursor_ok(&rc)) {
            return nt_reader_fail_cursor(r, &rc);
        }
        t = nt_reader_thread(r, index);
        if (t == NULL) {
            t = nt_reader_thread_add(r, index, at);
            if (t == NULL) {
                return r->err;
            }
        }
        t->os_tid = tid;
        t->declared = 1;
    }
    return 0;
}

static int
nt_reader_remove_thread_block(struct nt_reader *r, struct nt_cursor *c)
{
    c->short_reason = "remove-thread entry truncated";
    while (nt_cursor_left(c) > 0) {
        uint64_t at = nt_cursor_offset(c);
        uint64_t index = nt_cursor_varu64(c);
        uint32_t seq = nt_cursor_varu32(c);
        struct nt_thread_entry *t;

        if (!nt_cursor_ok(c)) {
            return nt_reader_fail_cursor(r, c);
        }
        t = nt_reader_thread(r, index);
        if (t == NULL || !t->declared) {
            return nt_reader_fail_at(r, -EBADMSG, at, "remove-thread names an unknown thread");
        }
        nt_reader_seq_check(r, t, seq);
        t->declared = 0;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Event blocks                                                                               */
/* ------------------------------------------------------------------------------------------ */

/*
 * The longest compressed event header (format doc 4.2): flags, metadata id, sequence delta,
 * capture thread, processor, thread, stack id, timestamp delta, two V4/V5 GUIDs, payload size.
 */
#define NT_MAX_COMPRESSED_HEADER (1 + 5 + 5 + 10 + 5 + 10 + 5 + 10 + 16 + 16 + 5)

/* Parses the 20-byte event/metadata block header and starts iterating (format doc 3.5). */
static int
nt_reader_event_block_begin(struct nt_reader *r, struct nt_cursor *c)
{
    uint64_t at = nt_cursor_offset(c);
    uint16_t header_size = nt_cursor_u16(c);
    uint16_t flags = nt_cursor_u16(c);

    if (!nt_cursor_ok(c)) {
        return nt_reader_fail_cursor(r, c);
    }
    if (header_size < NT_BLOCK_HEADER_SIZE) {
        return nt_reader_fail_at(r, -EBADMSG, at, "event block header size below 20");
    }
    if (nt_cursor_skip(c, header_size - 4u) != 0) {
        return nt_reader_fail_cursor(r, c);
    }
    r->blk = *c;
    r->blk.short_reason = "event runs past the end of its block";
    r->compressed = (flags & NT_BLOCK_FLAG_COMPRESSED) != 0;
    r->fast_block = r->compressed && r->major < 6;
    r->fast_end = 0;
    r->block_fast_end = r->fast_block && nt_cursor_left(c) >= NT_MAX_COMPRESSED_HEADER
                                ? (uintptr_t)c->end - (NT_MAX_COMPRESSED_HEADER - 1)
                                : 0;
    memset(&r->hdr, 0, sizeof(r->hdr));
    r->in_block = 1;
    return 0;
}

/* A LEB128 of one or two bytes at p: returns the byte after it, or NULL when it is longer. */
static inline __attribute__((always_inline)) const uint8_t *
nt_varuint_short(const uint8_t *p, uint64_t *out)
{
    if (p[0] < 0x80) {
        *out = p[0];
        return p + 1;
    }
    if (p[1] < 0x80) {
        *out = (uint64_t)p[0] - 0x80 + ((uint64_t)p[1] << 7); /* p[0] has its high bit */
        return p + 2;
    }
    return NULL;
}

/*
 * LEB128 of at most max_len bytes (5 for 32 bits, 10 for 64) whose last byte may be at most
 * last_max, from memory that holds max_len bytes, so that no byte needs a bounds check. Returns
 * the byte after it, or NULL for a too-long or out-of-range encoding (the cursor's checked
 * reader then records why). One or two bytes are the common case.
 */
static inline const uint8_t *
nt_varuint_unchecked(const uint8_t *p, int max_len, uint8_t last_max, uint64_t *out)
{
    const uint8_t *q = nt_varuint_short(p, out);
    uint64_t v;
    int i;

    if (q != NULL) {
        return q;
    }
    v = (p[0] & 0x7Fu) | (uint64_t)(p[1] & 0x7F) << 7;
    for (i = 2; i < max_len; i++) {
        v |= (uint64_t)(p[i] & 0x7F) << (7 * i);
        if (p[i] < 0x80) {
            *out = v;
            return i == max_len - 1 && p[i] > last_max ? NULL : p + i + 1;
        }
    }
    return NULL;
}

static inline const uint8_t *
nt_varu32_unchecked(const uint8_t *p, uint32_t *out)
{
    uint64_t v = 0;

    p = nt_varuint_unchecked(p, 5, 0x0F, &v);
    *out = (uint32_t)v;
    return p;
}

static inline const uint8_t *
nt_varu64_unchecked(const uint8_t *p, uint64_t *out)
{
    return nt_varuint_unchecked(p, 10, 0x01, out);
}

/*
 * nt_reader_event_fast()'s LEB128, from memory that holds 8 bytes: one or two bytes as above,
 * three to max_len (at most 8) without a loop, the 7-bit groups gathered from one 64-bit load.
 * Returns the byte after it, or NULL for an encoding of more than max_len bytes or a value
 * above max: an invalid one, or a 9- or 10-byte one that nt_varuint_unchecked() reads.
 */
static inline __attribute__((always_inline)) const uint8_t *
nt_varuint_fast(const uint8_t *p, unsigned max_len, uint64_t max, uint64_t *out)
{
    const uint8_t *q = nt_varuint_short(p, out);
    uint64_t x, stops;
    unsigned len;

    if (q != NULL) {
        return q;
    }
    x = nt_load_u64le(p);
    stops = ~x & 0x8080808080808080ULL; /* the high bit of each byte that ends an encoding */
    if (stops == 0) {
        return NULL;
    }
    len = (unsigned)__builtin_ctzll(stops) / 8 + 1;
    x &= (stops ^ (stops - 1)) & 0x7F7F7F7F7F7F7F7FULL; /* its bytes, without the high bits */
    x = (x & 0x007F007F007F007FULL) | (x & 0x7F007F007F007F00ULL) >> 1;
    x = (x & 0x00003FFF00003FFFULL) | (x & 0x3FFF00003FFF0000ULL) >> 2;
    x = (x & 0x000000000FFFFFFFULL) | (x & 0x0FFFFFFF00000000ULL) >> 4;
    if (len > max_len || x > max) {
        return NULL;
    }
    *out = x;
    return p + len;
}

static inline __attribute__((always_inline)) const uint8_t *
nt_varu32_fast(const uint8_t *p, uint32_t *out)
{
    uint64_t v = 0;

    p = nt_varuint_fast(p, 5, UINT32_MAX, &v);
    *out = (uint32_t)v;
    return p;
}

static inline __attribute__((always_inline)) const uint8_t *
nt_varu64_fast(const uint8_t *p, uint64_t *out)
{
    return nt_varuint_fast(p, 8, UINT64_MAX, out);
}

/*
 * The thread id, stack id and timestamp delta of a compressed header (format doc 4.2), from the
 * byte after its flags, into h. Returns the byte after them, or NULL for an invalid encoding
 * and, with fast (nt_varuint_fast()), for one longer than 8 bytes: h then holds the same ids
 * as before or the ones a second decode of the same bytes stores, and the same timestamp.
 */
static inline __attribute__((always_inline)) const uint8_t *
nt_header_ids_unchecked(struct nt_header_state *h, const uint8_t *p, uint8_t flags, int fast)
{
    uint64_t ts;

    if ((flags & NT_HDR_THREAD_ID) &&
        (p = fast ? nt_varu64_fast(p, &h->thread) : nt_varu64_unchecked(p, &h->thread)) == NULL) {
        return NULL;
    }
    if ((flags & NT_HDR_STACK_ID) && (p = fast ? nt_varu32_fast(p, &h->stack_id)
                                               : nt_varu32_unchecked(p, &h->stack_id)) == NULL) {
        return NULL;
    }
    if ((p = fast ? nt_varu64_fast(p, &ts) : nt_varu64_unchecked(p, &ts)) == NULL) {
        return NULL;
    }
    h->timestamp += ts;
    return p;
}

/*
 * The payload size of a compressed header, the last field, into h. Returns the payload, or NULL
 * for an invalid encoding or a payload that runs past end.
 */
static inline __attribute__((always_inline)) const uint8_t *
nt_header_payload_unchecked(struct nt_header_state *h, const uint8_t *p, uint8_t flags,
                            const uint8_t *end, int fast)
{
    if ((flags & NT_HDR_PAYLOAD_SIZE) &&
        (p = fast ? nt_varu32_fast(p, &h->payload_size)
                  : nt_varu32_unchecked(p, &h->payload_size)) == NULL) {
        return NULL;
    }
    return h->payload_size <= (size_t)(end - p) ? p : NULL;
}

/*
 * Decodes a compressed header (format doc 4.2) into r->hdr and consumes its event. The caller
 * checked that the block is compressed and still holds the longest header, so that the fields
 * need no bounds check each. Returns the payload, or NULL for an invalid encoding or a payload
 * past the block: the cursor has not moved, and nt_reader_event_header() reads the same bytes
 * with every check and stops at the same place with the error, which ends the stream (so the
 * fields already decoded into r->hdr do not matter).
 */
static inline __attribute__((always_inline)) const uint8_t *
nt_reader_header_decode(struct nt_reader *r, int *sorted)
{
    struct nt_header_state *h = &r->hdr;
    struct nt_cursor *c = &r->blk;
    const uint8_t *p = c->p;
    uint8_t flags = *p++;
    uint32_t delta;

    if ((flags & NT_HDR_METADATA_ID) && (p = nt_varu32_unchecked(p, &h->metadata_id)) == NULL) {
        return NULL;
    }
    if (flags & NT_HDR_CAPTURE_THREAD_AND_SEQUENCE) {
        if ((p = nt_varu32_unchecked(p, &delta)) == NULL ||
            (p = nt_varu64_unchecked(p, &h->capture_thread)) == NULL ||
            (p = nt_varu32_unchecked(p, &h->processor)) == NULL) {
            return NULL;
        }
        h->seq += delta + 1u; /* wraps, as the runtime writes it */
    } else if (h->metadata_id != 0 || r->major >= 6) {
        h->seq++;
    }
    if ((p = nt_header_ids_unchecked(h, p, flags, 0)) == NULL) {
        return NULL;
    }
    if (r->major >= 6) {
        if ((flags & NT_HDR_ACTIVITY_ID) && (p = nt_varu32_unchecked(p, &h->label_list)) == NULL) {
            return NULL;
        }
    } else {
        if (flags & NT_HDR_ACTIVITY_ID) {
            memcpy(h->activity, p, 16);
            p += 16;
        }
        if (flags & NT_HDR_RELATED_ACTIVITY_ID) {
            memcpy(h->related, p, 16);
            p += 16;
        }
    }
    if ((p = nt_header_payload_unchecked(h, p, flags, c->end, 0)) == NULL) {
        return NULL;
    }
    *sorted = (flags & NT_HDR_SORTED) != 0;
    c->p = p + h->payload_size;
    return p;
}

/* Whether nt_reader_header_decode() may decode the block's next header. */
static inline int
nt_reader_header_fits(const struct nt_reader *r)
{
    return r->compressed && r->blk.err == NULL &&
           nt_cursor_left(&r->blk) >= NT_MAX_COMPRESSED_HEADER;
}

/*
 * Decodes one event header (format doc 4.1, 4.2) into r->hdr; stores the payload. Out of line:
 * event_next() calls it only for uncompressed blocks and the last events of a block, and
 * inlined it made the per-event path spill registers.
 */
static NT_NOINLINE int
nt_reader_event_header(struct nt_reader *r, struct nt_cursor *c, int *sorted,
                       const uint8_t **payload)
{
    struct nt_header_state *h = &r->hdr;

    if (r->compressed) {
        uint8_t flags = nt_cursor_u8(c);

        if (flags & NT_HDR_METADATA_ID) {
            h->metadata_id = nt_cursor_varu32(c);
        }
        if (flags & NT_HDR_CAPTURE_THREAD_AND_SEQUENCE) {
            h->seq += nt_cursor_varu32(c) + 1u; /* wraps, as the runtime writes it */
            h->capture_thread = nt_cursor_varu64(c);
            h->processor = nt_cursor_varu32(c);
        } else if (h->metadata_id != 0 || r->major >= 6) {
            h->seq++;
        }
        if (flags & NT_HDR_THREAD_ID) {
            h->thread = nt_cursor_varu64(c);
        }
        if (flags & NT_HDR_STACK_ID) {
            h->stack_id = nt_cursor_varu32(c);
        }
        h->timestamp += nt_cursor_varu64(c);
        if (r->major >= 6) {
            if (flags & NT_HDR_ACTIVITY_ID) {
                h->label_list = nt_cursor_varu32(c);
            }
        } else {
            if (flags & NT_HDR_ACTIVITY_ID) {
                const uint8_t *g = nt_cursor_take(c, 16);

                if (g != NULL) {
                    memcpy(h->activity, g, 16);
                }
            }
            if (flags & NT_HDR_RELATED_ACTIVITY_ID) {
                const uint8_t *g = nt_cursor_take(c, 16);

                if (g != NULL) {
                    memcpy(h->related, g, 16);
                }
            }
        }
        *sorted = (flags & NT_HDR_SORTED) != 0;
        if (flags & NT_HDR_PAYLOAD_SIZE) {
            h->payload_size = nt_cursor_varu32(c);
        }
        *payload = nt_cursor_take(c, h->payload_size);
    } else {
        uint64_t at = nt_cursor_offset(c);
        uint32_t size = nt_cursor_u32(c);
        const uint8_t *body = nt_cursor_take(c, size);
        struct nt_cursor e;
        uint32_t md;

        if (body == NULL) {
            return -EBADMSG;
        }
        nt_cursor_init(&e, body, size, at + 4, "uncompressed event header runs past its size");
        md = nt_cursor_u32(&e);
        h->metadata_id = md & 0x7FFFFFFFu;
        *sorted = (md & 0x80000000u) == 0;
        h->seq = nt_cursor_u32(&e);
        h->thread = nt_cursor_u64(&e);
        h->capture_thread = nt_cursor_u64(&e);
        h->processor = nt_cursor_u32(&e);
        h->stack_id = nt_cursor_u32(&e);
        h->timestamp = nt_cursor_u64(&e);
        if (r->major >= 6) {
            h->label_list = nt_cursor_u32(&e);
            *sorted = !*sorted; /* V6: the high bit is IsSorted */
        } else {
            const uint8_t *g = nt_cursor_take(&e, 32);

            if (g != NULL) {
                memcpy(h->activity, g, 16);
                memcpy(h->related, g + 16, 16);
            }
        }
        h->payload_size = nt_cursor_u32(&e);
        *payload = nt_cursor_take(&e, h->payload_size);
        if (!nt_cursor_ok(&e)) {
            return nt_cursor_fail_at(c, e.err_offset, e.err);
        }
        /* Any rest of EventSize is the runtime's alignment padding. */
    }
    return nt_cursor_ok(c) ? 0 : -EBADMSG;
}

/* Resolves a V6 thread index to its OS thread id. */
static int
nt_reader_v6_tid(struct nt_reader *r, uint64_t index, uint64_t at, uint64_t *tid)
{
    struct nt_thread_entry *t = nt_reader_thread(r, index);

    if (t == NULL || !t->declared) {
        return nt_reader_fail_at(r, -EBADMSG, at, "event refers to an undeclared thread index");
    }
    *tid = t->os_tid;
    return 0;
}

/*
 * A metadata record where event_next() met one: everything in a MetadataBlock (TraceEvent does
 * not look at the id there), or an id-0 record inline in an event block.
 */
static NT_NOINLINE int
nt_reader_event_metadata(struct nt_reader *r, const uint8_t *payload, uint64_t at)
{
    const struct nt_cursor *c = &r->blk;

    if (r->major >= 6) {
        return nt_reader_fail_at(r, -EBADMSG, at, "V6 event with metadata id 0");
    }
    return nt_reader_add_metadata(r, payload, r->hdr.payload_size,
                                  c->base + (uint64_t)(payload - c->start));
}

/*
 * Fills *ev from the header state of the event just decoded, with r->last_md as its metadata,
 * all but the stack (nt_reader_event_stack()). Every field is assigned (no memset): at 25+ M
 * events/s the clearing of the whole struct was a measurable share of the time per event.
 */
static inline void
nt_reader_event_fill(const struct nt_reader *r, struct nt_event *ev, const uint8_t *payload,
                     int sorted)
{
    const struct nt_header_state *h = &r->hdr;

    ev->metadata_id = h->metadata_id;
    ev->sequence = h->seq;
    ev->thread_id = h->thread;
    ev->capture_thread_id = h->capture_thread;
    ev->processor = h->processor;
    ev->timestamp = h->timestamp;
    memcpy(ev->activity_id, h->activity, 16);
    memcpy(ev->related_activity_id, h->related, 16);
    ev->is_sorted = sorted;
    ev->stack_id = h->stack_id;
    ev->payload = payload;
    ev->payload_size = h->payload_size;
    ev->desc = r->last_md;
}

/* Gives ev its stack: none for stack id 0, else the one at index in r->stacks (resolved). */
static inline void
nt_reader_event_stack(const struct nt_reader *r, struct nt_event *ev, size_t index)
{
    const uint64_t *ips = NULL;
    uint32_t depth = 0;

    if (r->hdr.stack_id != 0) {
        depth = r->stacks[index].depth;
        /* only empty stacks so far: stack_ips is still NULL, and NULL + 0 is undefined */
        ips = depth != 0 ? r->stack_ips + r->stacks[index].off : NULL;
    }
    ev->stack = ips;
    ev->stack_depth = depth;
}

/*
 * Opens nt_reader_next()'s own path for the next event of the block (see fast_end), after an
 * event of last_md_id and last_thread (t) whose sequence number was stored.
 */
static inline void
nt_reader_fast_open(struct nt_reader *r, struct nt_thread_entry *t)
{
    r->fast_end = r->block_fast_end;
    r->fast_seq = &t->seq;
}

/*
 * The rest of nt_reader_event_next() after the header (at: its stream offset): a metadata
 * record is consumed (returns 0); an event gets its metadata, threads, activity and stack
 * looked up and checked (returns 1 with *ev filled, or a negative errno).
 */
static NT_NOINLINE int
nt_reader_event_finish(struct nt_reader *r, struct nt_event *ev, const uint8_t *payload, int sorted,
                       uint64_t at)
{
    const struct nt_header_state *h = &r->hdr;
    struct nt_thread_entry *t;
    uint64_t seq_key;

    r->fast_end = 0;
    if (h->metadata_id == 0 || r->md_block) {
        return nt_reader_event_metadata(r, payload, at) != 0 ? r->err : 0;
    }
    if (h->metadata_id != r->last_md_id) {
        r->last_md_id = h->metadata_id;
        r->last_md = nt_reader_metadata(r, h->metadata_id);
    }
    nt_reader_event_fill(r, ev, payload, sorted);
    if (r->major >= 6) {
        if (nt_reader_v6_tid(r, h->thread, at, &ev->thread_id) != 0 ||
            nt_reader_v6_tid(r, h->capture_thread, at, &ev->capture_thread_id) != 0) {
            return r->err;
        }
        if (h->label_list != 0) {
            uint64_t v = nt_map_get(&r->label_map, h->label_list);

            if (v == 0) {
                return nt_reader_fail_at(r, -EBADMSG, at,
                                         "event refers to an undefined label list");
            }
            memcpy(ev->activity_id, r->labels[v - 1].activity, 16);
            memcpy(ev->related_activity_id, r->labels[v - 1].related, 16);
        }
    }
    if (h->stack_id != 0) {
        if (h->stack_id <= r->dense_stacks) {
            r->last_stack_id = h->stack_id;
            r->last_stack = h->stack_id - 1u;
        } else if (h->stack_id != r->last_stack_id) {
            uint64_t v = nt_map_get(&r->stack_map, h->stack_id);

            if (v == 0) {
                return nt_reader_fail_at(r, -EBADMSG, at, "event refers to an undefined stack id");
            }
            r->last_stack_id = h->stack_id;
            r->last_stack = (size_t)v - 1;
        }
    }
    nt_reader_event_stack(r, ev, r->last_stack);
    seq_key = h->capture_thread;
    t = nt_reader_thread(r, seq_key);
    if (t == NULL) {
        t = nt_reader_thread_add(r, seq_key, at);
        if (t == NULL) {
            return r->err;
        }
        t->seq = h->seq - 1;
        r->last_thread_key = seq_key;
        r->last_thread = (size_t)(t - r->threads) + 1;
    }
    nt_reader_seq_check(r, t, h->seq - 1);
    t->seq = h->seq;
    r->stats.events++;
    nt_reader_fast_open(r, t);
    return 1;
}

/* Header flags that leave an event to nt_reader_event_next(): they change more than the ids. */
#define NT_HDR_NOT_FAST                                                             \
    (NT_HDR_METADATA_ID | NT_HDR_CAPTURE_THREAD_AND_SEQUENCE | NT_HDR_ACTIVITY_ID | \
     NT_HDR_RELATED_ACTIVITY_ID)

static int nt_reader_next_any(struct nt_reader *r, struct nt_event *ev);

/*
 * nt_reader_event_finish() for an event of nt_reader_event_fast() whose stack id needs the map,
 * and nt_reader_next_any() after it when it was none; a call nt_reader_next() can end with.
 */
static NT_NOINLINE int
nt_reader_event_lookup(struct nt_reader *r, struct nt_event *ev, const uint8_t *payload, int sorted,
                       uint64_t at)
{
    int rc = nt_reader_event_finish(r, ev, payload, sorted, at);

    return rc != 0 ? rc : nt_reader_next_any(r, ev);
}

/*
 * nt_reader_event_next() for one event where fast_end lets nt_reader_next() decode the header
 * unchecked but its flags leave it to the lookups (a new metadata id or capture thread, activity
 * ids). Returns what nt_reader_next() returns.
 */
static NT_NOINLINE int
nt_reader_event_other(struct nt_reader *r, struct nt_event *ev)
{
    uint64_t at = nt_cursor_offset(&r->blk);
    int sorted = 0;
    const uint8_t *payload = nt_reader_header_decode(r, &sorted);

    if (payload == NULL) {
        return nt_reader_next_any(r, ev);
    }
    return nt_reader_event_lookup(r, ev, payload, sorted, at);
}

/*
 * The common event, inline in nt_reader_next() while fast_end lets it: a V4/V5 compressed
 * header that keeps the metadata id, capture thread and activity ids of the event before it
 * (none of the NT_HDR_NOT_FAST flags). Then the sequence number is the next one of a thread
 * with no gap, the metadata is last_md, and only the stack id may need a lookup (a dense or
 * repeated id does not). Returns what nt_reader_next() returns: the rest, an invalid header
 * or one with a field of 9 bytes or more (decoded again from the start, which gives the same
 * state), goes to nt_reader_next_any().
 */
static inline __attribute__((always_inline)) int
nt_reader_event_fast(struct nt_reader *r, struct nt_event *ev, const uint8_t *start)
{
    struct nt_header_state *h = &r->hdr;
    uint8_t flags = *start;
    const uint8_t *payload = nt_header_ids_unchecked(h, start + 1, flags, 1);
    size_t stack;
    int sorted = (flags & NT_HDR_SORTED) != 0;

    if (payload == NULL ||
        (payload = nt_header_payload_unchecked(h, payload, flags, r->blk.end, 1)) == NULL) {
        return nt_reader_next_any(r, ev);
    }
    h->seq++;
    r->blk.p = payload + h->payload_size;
    stack = (size_t)h->stack_id - 1u; /* SIZE_MAX for no stack */
    if (stack >= r->dense_stacks && h->stack_id != 0) {
        if (h->stack_id != r->last_stack_id) {
            return nt_reader_event_lookup(r, ev, payload, sorted,
                                          r->blk.base + (uint64_t)(start - r->blk.start));
        }
        stack = r->last_stack;
    }
    nt_reader_event_fill(r, ev, payload, sorted);
    nt_reader_event_stack(r, ev, stack);
    *r->fast_seq = h->seq;
    r->stats.events++;
    return 1;
}

/* Returns 1 with *ev filled, 0 at the end of the block, or a negative errno. */
static int
nt_reader_event_next(struct nt_reader *r, struct nt_event *ev)
{
    struct nt_cursor *c = &r->blk;

    while (nt_cursor_left(c) > 0) {
        uint64_t at = nt_cursor_offset(c);
        const uint8_t *payload = NULL;
        int sorted = 0;
        int rc;

        if ((!nt_reader_header_fits(r) ||
             (payload = nt_reader_header_decode(r, &sorted)) == NULL) &&
            nt_reader_event_header(r, c, &sorted, &payload) != 0) {
            return nt_reader_fail_cursor(r, c);
        }
        rc = nt_reader_event_finish(r, ev, payload, sorted, at);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Containers                                                                                 */
/* ------------------------------------------------------------------------------------------ */

static int
nt_reader_trace_v4(struct nt_reader *r, const uint8_t *p)
{
    struct nt_cursor c;
    int i;

    nt_cursor_init(&c, p, NT_TRACE_OBJECT_SIZE, nt_reader_offset(r) - NT_TRACE_OBJECT_SIZE,
                   "Trace object truncated");
    for (i = 0; i < 8; i++) {
        r->info.sync_time[i] = (int16_t)nt_cursor_u16(&c);
    }
    r->info.sync_time_ticks = nt_cursor_u64(&c);
    r->info.ticks_per_second = nt_cursor_u64(&c);
    r->info.pointer_size = nt_cursor_u32(&c);
    r->info.process_id = nt_cursor_u32(&c);
    r->info.number_of_processors = nt_cursor_u32(&c);
    r->info.expected_cpu_sampling_rate = nt_cursor_u32(&c);
    if (r->info.pointer_size != 4 && r->info.pointer_size != 8) {
        return nt_reader_fail_at(r, -EBADMSG, c.base + 32, "pointer size is not 4 or 8");
    }
    if (r->info.ticks_per_second == 0) {
        return nt_reader_fail_at(r, -EBADMSG, c.base + 24, "tick frequency is 0");
    }
    return 0;
}

/*
 * Reads a FastSerialization object header up to the end of its type descriptor (format doc
 * 3.2). Stores 1 in *end when the stream's final NullReference tag was read instead.
 */
static int
nt_reader_object_begin(struct nt_reader *r, char name[NT_MAX_TYPE_NAME + 1], int32_t *version,
                       int32_t *min_version, int *end)
{
    const uint8_t *p;
    uint32_t len;
    int rc;

    *end = 0;
    rc = nt_reader_fill(r, 1);
    if (rc != 0) {
        r->truncated = rc > 0 && r->err == 0;
        return rc > 0 ? nt_reader_fail(r, "stream ends before the end-of-stream tag") : rc;
    }
    p = r->buf + r->pos;
    if (*p == NT_TAG_NULL_REFERENCE) {
        r->pos++;
        *end = 1;
        return 0;
    }
    if (*p != NT_TAG_BEGIN_PRIVATE_OBJECT) {
        return nt_reader_fail(r, "expected an object or the end-of-stream tag");
    }
    r->pos++;
    if (nt_reader_expect(r, NT_TAG_BEGIN_PRIVATE_OBJECT, "stream ends inside an object header",
                         "expected the type descriptor of an object") != 0 ||
        nt_reader_expect(r, NT_TAG_NULL_REFERENCE, "stream ends inside an object header",
                         "expected the NullReference tag of a type descriptor") != 0) {
        return r->err;
    }
    p = nt_reader_take(r, 12, "stream ends inside an object header");
    if (p == NULL) {
        return r->err;
    }
    *version = (int32_t)nt_load_u32le(p);
    *min_version = (int32_t)nt_load_u32le(p + 4);
    len = nt_load_u32le(p + 8);
    if (len > NT_MAX_TYPE_NAME) {
        r->pos -= 4;
        return nt_reader_fail(r, "object type name too long");
    }
    p = nt_reader_take(r, len, "stream ends inside an object type name");
    if (p == NULL) {
        return r->err;
    }
    memcpy(name, p, len);
    name[len] = '\0';
    return nt_reader_expect(r, NT_TAG_END_OBJECT, "stream ends inside an object header",
                            "expected the EndObject tag of a type descriptor");
}

/* Reads the next V4/V5 object; event blocks are left open for iteration. */
static NT_NOINLINE int
nt_reader_next_object(struct nt_reader *r)
{
    char name[NT_MAX_TYPE_NAME + 1];
    int32_t version = 0, min_version = 0;
    uint64_t at = nt_reader_offset(r);
    const uint8_t *p;
    struct nt_cursor c;
    uint32_t size;
    size_t pad;
    int end;
    int kind;

    if (nt_reader_object_begin(r, name, &version, &min_version, &end) != 0) {
        return r->err;
    }
    if (end) {
        r->done = 1;
        return 0;
    }
    if (strcmp(name, NT_TYPE_NAME_EVENT) == 0) {
        kind = NT_V6_EVENT;
    } else if (strcmp(name, NT_TYPE_NAME_METADATA) == 0) {
        kind = NT_V6_METADATA;
    } else if (strcmp(name, NT_TYPE_NAME_STACK) == 0) {
        kind = NT_V6_STACK;
    } else if (strcmp(name, NT_TYPE_NAME_SP) == 0) {
        kind = NT_V6_SEQUENCE_POINT;
    } else if (strcmp(name, NT_TYPE_NAME_TRACE) == 0) {
        return nt_reader_fail_at(r, -EBADMSG, at, "second Trace object");
    } else {
        return nt_reader_fail_at(r, -EBADMSG, at, "unknown object type");
    }
    if (min_version > NT_BLOCK_VERSION) {
        return nt_reader_fail_at(r, -EBADMSG, at, "block object needs a newer reader");
    }
    p = nt_reader_take(r, 4, "stream ends inside a block size");
    if (p == NULL) {
        return r->err;
    }
    size = nt_load_u32le(p);
    if (size > r->lim.max_block_bytes) {
        return nt_reader_fail_at(r, -EBADMSG, nt_reader_offset(r) - 4,
                                 "block larger than the limit");
    }
    pad = (size_t)((4 - (nt_reader_offset(r) & 3)) & 3);
    if (nt_reader_take(r, pad, "stream ends inside block padding") == NULL) {
        return r->err;
    }
    p = nt_reader_take(r, size, "stream ends inside a block");
    if (p == NULL) {
        return r->err;
    }
    r->stats.blocks++;
    nt_cursor_init(&c, p, size, nt_reader_offset(r) - size, "block content truncated");
    switch (kind) {
    case NT_V6_EVENT:
        return nt_reader_event_block_begin(r, &c);
    case NT_V6_METADATA:
        if (nt_reader_event_block_begin(r, &c) != 0) {
            return r->err;
        }
        /* Metadata blocks hold only metadata records; consume them now. */
        {
            struct nt_event ev;
            int rc;

            r->md_block = 1;
            rc = nt_reader_event_next(r, &ev);
            r->md_block = 0;
            r->in_block = 0;
            if (rc != 0) {
                return r->err;
            }
        }
        break;
    case NT_V6_STACK:
        c.short_reason = "stack block truncated";
        if (nt_reader_stack_block(r, &c) != 0) {
            return r->err;
        }
        break;
    default:
        if (nt_reader_sp_block(r, &c) != 0) {
            return r->err;
        }
        break;
    }
    return nt_reader_expect(r, NT_TAG_END_OBJECT, "stream ends before the EndObject of a block",
                            "expected the EndObject tag after a block");
}

/* Parses a decimal V6 trace key value; anything else gives 0. */
static uint32_t
nt_reader_parse_u32(const uint8_t *s, size_t len)
{
    uint64_t v = 0;
    size_t i;

    for (i = 0; i < len && i < 10; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return 0;
        }
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    return v > UINT32_MAX || len == 0 || len > 10 ? 0 : (uint32_t)v;
}

static int
nt_reader_trace_v6(struct nt_reader *r, struct nt_cursor *c)
{
    uint32_t n;
    uint32_t i;
    int k;

    c->short_reason = "trace block truncated";
    for (k = 0; k < 8; k++) {
        r->info.sync_time[k] = (int16_t)nt_cursor_u16(c);
    }
    r->info.sync_time_ticks = nt_cursor_u64(c);
    r->info.ticks_per_second = nt_cursor_u64(c);
    r->info.pointer_size = nt_cursor_u32(c);
    n = nt_cursor_u32(c);
    for (i = 0; i < n && nt_cursor_ok(c); i++) {
        const uint8_t *key = NULL, *val = NULL;
        size_t klen = 0, vlen = 0;

        if (nt_cursor_str6(c, &key, &klen) != 0 || nt_cursor_str6(c, &val, &vlen) != 0) {
            break;
        }
        if (klen == 9 && memcmp(key, "ProcessId", 9) == 0) {
            r->info.process_id = nt_reader_parse_u32(val, vlen);
        } else if (klen == 19 && memcmp(key, "HardwareThreadCount", 19) == 0) {
            r->info.number_of_processors = nt_reader_parse_u32(val, vlen);
        } else if (klen == 23 && memcmp(key, "ExpectedCPUSamplingRate", 23) == 0) {
            r->info.expected_cpu_sampling_rate = nt_reader_parse_u32(val, vlen);
        }
    }
    if (!nt_cursor_ok(c)) {
        return nt_reader_fail_cursor(r, c);
    }
    if (r->info.pointer_size != 4 && r->info.pointer_size != 8) {
        return nt_reader_fail_at(r, -EBADMSG, c->base + 32, "pointer size is not 4 or 8");
    }
    if (r->info.ticks_per_second == 0) {
        return nt_reader_fail_at(r, -EBADMSG, c->base + 24, "tick frequency is 0");
    }
    return 0;
}

/* V6 metadata block (format doc 5.3). */
static int
nt_reader_metadata_block_v6(struct nt_reader *r, struct nt_cursor *c)
{
    uint16_t hsize = nt_cursor_u16(c);

    c->short_reason = "metadata block header truncated";
    if (nt_cursor_skip(c, hsize) != 0) {
        return nt_reader_fail_cursor(r, c);
    }
    while (nt_cursor_left(c) > 0) {
        uint64_t at = nt_cursor_offset(c);
        uint16_t size = nt_cursor_u16(c);
        const uint8_t *row = nt_cursor_take(c, size);

        if (row == NULL) {
            return nt_reader_fail_at(r, -EBADMSG, at, "metadata row runs past the block");
        }
        if (nt_reader_add_metadata(r, row, size, at + 2) != 0) {
            return r->err;
        }
    }
    return 0;
}

/* Reads the next V6 block; event blocks are left open for iteration. */
static NT_NOINLINE int
nt_reader_next_block_v6(struct nt_reader *r)
{
    const uint8_t *p;
    struct nt_cursor c;
    uint32_t header;
    uint32_t size;
    unsigned kind;
    int rc;

    rc = nt_reader_fill(r, 1);
    if (rc != 0) {
        r->truncated = rc > 0 && r->err == 0;
        return rc > 0 ? nt_reader_fail(r, "stream ends before the end-of-stream block") : rc;
    }
    p = nt_reader_take(r, 4, "stream ends inside a block header");
    if (p == NULL) {
        return r->err;
    }
    header = nt_load_u32le(p);
    size = header & 0xFFFFFFu;
    kind = header >> 24;
    if (size > r->lim.max_block_bytes) {
        return nt_reader_fail_at(r, -EBADMSG, nt_reader_offset(r) - 4,
                                 "block larger than the limit");
    }
    p = nt_reader_take(r, size, "stream ends inside a block");
    if (p == NULL) {
        return r->err;
    }
    r->stats.blocks++;
    nt_cursor_init(&c, p, size, nt_reader_offset(r) - size, "block content truncated");
    switch (kind) {
    case NT_V6_END_OF_STREAM:
        r->done = 1;
        return 0;
    case NT_V6_TRACE:
        return nt_reader_fail_at(r, -EBADMSG, c.base - 4, "second trace block");
    case NT_V6_EVENT:
        return nt_reader_event_block_begin(r, &c);
    case NT_V6_METADATA:
        return nt_reader_metadata_block_v6(r, &c);
    case NT_V6_SEQUENCE_POINT:
        return nt_reader_sp_block(r, &c);
    case NT_V6_STACK:
        c.short_reason = "stack block truncated";
        return nt_reader_stack_block(r, &c);
    case NT_V6_THREAD:
        return nt_reader_thread_block(r, &c);
    case NT_V6_REMOVE_THREAD:
        return nt_reader_remove_thread_block(r, &c);
    case NT_V6_LABEL_LIST:
        return nt_reader_label_block(r, &c);
    default:
        return 0; /* unknown kinds are skipped (format doc 6) */
    }
}

static int
nt_reader_open(struct nt_reader *r)
{
    char name[NT_MAX_TYPE_NAME + 1];
    int32_t version = 0, min_version = 0;
    const uint8_t *p;
    uint32_t word;
    int end;

    p = nt_reader_take(r, 12, "stream ends inside the stream header");
    if (p == NULL) {
        return r->err;
    }
    if (memcmp(p, NT_MAGIC, NT_MAGIC_LEN) != 0) {
        r->pos -= 12;
        if (p[0] == 20 && p[1] == 0 && p[2] == 0 && p[3] == 0) {
            return nt_reader_fail(r, "V3 netperf streams are not supported");
        }
        return nt_reader_fail(r, "bad magic: not a nettrace stream");
    }
    word = nt_load_u32le(p + 8);
    if (word == 0) {
        struct nt_cursor c;
        uint32_t header;

        p = nt_reader_take(r, 8, "stream ends inside the stream header");
        if (p == NULL) {
            return r->err;
        }
        if (nt_load_u32le(p) != 6) {
            r->pos -= 8;
            return nt_reader_fail(r, "unsupported major version");
        }
        r->major = 6;
        r->info.format_version = 6;
        p = nt_reader_take(r, 4, "stream ends before the trace block");
        if (p == NULL) {
            return r->err;
        }
        header = nt_load_u32le(p);
        if (header >> 24 != NT_V6_TRACE) {
            r->pos -= 4;
            return nt_reader_fail(r, "first block is not the trace block");
        }
        p = nt_reader_take(r, header & 0xFFFFFFu, "stream ends inside the trace block");
        if (p == NULL) {
            return r->err;
        }
        r->stats.blocks++;
        nt_cursor_init(&c, p, header & 0xFFFFFFu, nt_reader_offset(r) - (header & 0xFFFFFFu),
                       "trace block truncated");
        return nt_reader_trace_v6(r, &c);
    }
    if (word != NT_FAST_SERIALIZATION_LEN) {
        r->pos -= 4;
        return nt_reader_fail(r, "bad serializer signature length");
    }
    p = nt_reader_take(r, NT_FAST_SERIALIZATION_LEN, "stream ends inside the stream header");
    if (p == NULL) {
        return r->err;
    }
    if (memcmp(p, NT_FAST_SERIALIZATION, NT_FAST_SERIALIZATION_LEN) != 0) {
        r->pos -= NT_FAST_SERIALIZATION_LEN;
        return nt_reader_fail(r, "bad serializer signature");
    }
    r->major = 4;
    r->info.format_version = 4;
    if (nt_reader_object_begin(r, name, &version, &min_version, &end) != 0) {
        return r->err;
    }
    if (end || strcmp(name, NT_TYPE_NAME_TRACE) != 0) {
        return nt_reader_fail_at(r, -EBADMSG, 32, "first object is not the Trace object");
    }
    if (version != NT_TRACE_VERSION) {
        return nt_reader_fail_at(r, -EBADMSG, 32, "unsupported Trace object version");
    }
    p = nt_reader_take(r, NT_TRACE_OBJECT_SIZE, "stream ends inside the Trace object");
    if (p == NULL) {
        return r->err;
    }
    if (nt_reader_trace_v4(r, p) != 0) {
        return r->err;
    }
    return nt_reader_expect(r, NT_TAG_END_OBJECT, "stream ends inside the Trace object",
                            "expected the EndObject tag after the Trace object");
}

/* ------------------------------------------------------------------------------------------ */
/* Public API                                                                                 */
/* ------------------------------------------------------------------------------------------ */

int
nt_reader_new(const struct nt_source *src, const struct nt_reader_limits *limits,
              struct nt_reader **out)
{
    struct nt_reader *r;

    *out = NULL;
    if (src == NULL || src->read == NULL) {
        return -EINVAL;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return -ENOMEM;
    }
    r->src = *src;
    if (limits != NULL) {
        r->lim = *limits;
    }
    if (r->lim.max_block_bytes == 0) {
        r->lim.max_block_bytes = NT_DEFAULT_MAX_BLOCK;
    }
    if (r->lim.max_metadata == 0) {
        r->lim.max_metadata = NT_DEFAULT_MAX_METADATA;
    }
    if (r->lim.max_metadata_bytes == 0) {
        r->lim.max_metadata_bytes = NT_DEFAULT_MAX_METADATA_BYTES;
    }
    if (r->lim.max_stack_bytes == 0) {
        r->lim.max_stack_bytes = NT_DEFAULT_MAX_STACK_BYTES;
    }
    *out = r;
    if (nt_reader_open(r) != 0) {
        return r->err;
    }
    return 0;
}

const struct nt_trace_info *
nt_reader_info(const struct nt_reader *r)
{
    return &r->info;
}

/* nt_reader_next() for every event and block that nt_reader_event_fast() leaves. */
static NT_NOINLINE int
nt_reader_next_any(struct nt_reader *r, struct nt_event *ev)
{
    for (;;) {
        int rc;

        if (r->err != 0) {
            return r->err;
        }
        if (r->in_block) {
            rc = nt_reader_event_next(r, ev);
            if (rc != 0) {
                return rc;
            }
            r->in_block = 0;
            r->fast_end = 0; /* blk.p is at the end already; the threads may move from here */
            if (r->major < 6 && nt_reader_expect(r, NT_TAG_END_OBJECT,
                                                 "stream ends before the EndObject of a block",
                                                 "expected the EndObject tag after a block") != 0) {
                return r->err;
            }
        }
        if (r->done) {
            return 0;
        }
        rc = r->major >= 6 ? nt_reader_next_block_v6(r) : nt_reader_next_object(r);
        if (rc != 0) {
            return rc;
        }
    }
}

int
nt_reader_next(struct nt_reader *r, struct nt_event *ev)
{
    const uint8_t *p = r->blk.p;

    /* Most events, without the frame of the loop that reads blocks. */
    if ((uintptr_t)p < r->fast_end) {
        if ((*p & NT_HDR_NOT_FAST) == 0) {
            return nt_reader_event_fast(r, ev, p);
        }
        return nt_reader_event_other(r, ev);
    }
    return nt_reader_next_any(r, ev);
}

void
nt_reader_get_error(const struct nt_reader *r, struct nt_reader_error *out)
{
    out->offset = r->err_offset;
    out->reason = r->err != 0 ? r->err_reason : NULL;
    out->truncated = r->err != 0 && r->truncated;
}

void
nt_reader_get_stats(const struct nt_reader *r, struct nt_reader_stats *out)
{
    *out = r->stats;
    out->bytes = nt_reader_offset(r);
}

void
nt_reader_free(struct nt_reader *r)
{
    size_t i;

    if (r == NULL) {
        return;
    }
    for (i = 0; i < r->ndescs; i++) {
        free(r->descs[i]);
    }
    free(r->descs);
    free(r->md_map.slots);
    free(r->stack_map.slots);
    free(r->stacks);
    free(r->stack_ips);
    free(r->label_map.slots);
    free(r->labels);
    free(r->thread_map.slots);
    free(r->threads);
    free(r->buf);
    free(r);
}
