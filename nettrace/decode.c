/* SPDX-License-Identifier: MIT */
/*
 * nettrace/decode.c - generic payload decoding: walks an event's payload with the field list of
 * its metadata (format doc 5.2, V6 type codes of 5.3), reporting each value to a callback or
 * formatting it as text, and converts UTF-16 strings to UTF-8. Context: any thread; no
 * allocation. The payload and the description are both untrusted: every read is bounds-checked
 * and nesting is limited, so a hostile file cannot make it read out of bounds or recurse
 * without end.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nettrace/cursor.h"
#include "nettrace/nettrace.h"

#define NT_DECODE_MAX_DEPTH    32
/* Every value but objects and fixed arrays takes at least one byte; allow generous slack. */
#define NT_DECODE_BUDGET(size) (4 * (uint64_t)(size) + 4096)

size_t
nt_utf16_to_utf8(const uint8_t *utf16, size_t len, char *out, size_t cap)
{
    size_t need = 0;
    size_t i = 0;

    while (i + 1 < len) {
        uint32_t cp = nt_load_u16le(utf16 + i);
        uint8_t enc[4];
        size_t n;

        if (cp == 0) {
            break;
        }
        i += 2;
        if (cp >= 0xD800 && cp <= 0xDBFF && i + 1 < len) {
            uint32_t lo = nt_load_u16le(utf16 + i);

            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 2;
            }
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            cp = 0xFFFD; /* an unpaired surrogate */
        }
        if (cp < 0x80) {
            enc[0] = (uint8_t)cp;
            n = 1;
        } else if (cp < 0x800) {
            enc[0] = (uint8_t)(0xC0 | (cp >> 6));
            enc[1] = (uint8_t)(0x80 | (cp & 0x3F));
            n = 2;
        } else if (cp < 0x10000) {
            enc[0] = (uint8_t)(0xE0 | (cp >> 12));
            enc[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
            enc[2] = (uint8_t)(0x80 | (cp & 0x3F));
            n = 3;
        } else {
            enc[0] = (uint8_t)(0xF0 | (cp >> 18));
            enc[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
            enc[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
            enc[3] = (uint8_t)(0x80 | (cp & 0x3F));
            n = 4;
        }
        /* Only whole sequences are written, so a truncated result is still valid UTF-8. */
        if (out != NULL && need + n < cap) {
            memcpy(out + need, enc, n);
        } else if (out != NULL && cap > 0 && need < cap) {
            cap = need + 1; /* stop writing from here on */
        }
        need += n;
    }
    if (out != NULL && cap > 0) {
        out[need < cap ? need : cap - 1] = '\0';
    }
    return need;
}

/* ------------------------------------------------------------------------------------------ */
/* Text output with snprintf semantics                                                        */
/* ------------------------------------------------------------------------------------------ */

struct nt_text {
    char *out;
    size_t cap;
    size_t len; /* needed so far (may exceed cap) */
};

static void
nt_text_put(struct nt_text *t, const char *s, size_t n)
{
    if (t->out != NULL && t->len < t->cap) {
        size_t room = t->cap - t->len;

        memcpy(t->out + t->len, s, n < room ? n : room);
    }
    t->len += n;
}

static void
nt_text_str(struct nt_text *t, const char *s)
{
    nt_text_put(t, s, strlen(s));
}

static void __attribute__((format(printf, 2, 3)))
nt_text_printf(struct nt_text *t, const char *fmt, ...)
{
    char buf[128];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > 0) {
        nt_text_put(t, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
    }
}

/* A quoted string; quotes, backslashes and control characters are escaped. */
static void
nt_text_quoted(struct nt_text *t, const char *s, size_t n)
{
    size_t i;

    nt_text_put(t, "\"", 1);
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch == '"' || ch == '\\') {
            char esc[2] = { '\\', (char)ch };

            nt_text_put(t, esc, 2);
        } else if (ch == '\n') {
            nt_text_put(t, "\\n", 2);
        } else if (ch == '\r') {
            nt_text_put(t, "\\r", 2);
        } else if (ch == '\t') {
            nt_text_put(t, "\\t", 2);
        } else if (ch < 0x20 || ch == 0x7F) {
            nt_text_printf(t, "\\x%02x", ch);
        } else {
            nt_text_put(t, (const char *)&s[i], 1);
        }
    }
    nt_text_put(t, "\"", 1);
}

static void
nt_text_utf16(struct nt_text *t, const uint8_t *s, size_t len)
{
    char buf[512];
    char *heap = NULL;
    char *p = buf;
    size_t n = nt_utf16_to_utf8(s, len, NULL, 0);

    if (n + 1 > sizeof(buf)) {
        heap = malloc(n + 1);
        if (heap == NULL) {
            nt_text_str(t, "\"?\"");
            return;
        }
        p = heap;
    }
    nt_utf16_to_utf8(s, len, p, n + 1);
    nt_text_quoted(t, p, n);
    free(heap);
}

/* Shortest %g form that reads back as the same value. */
static void
nt_text_double(struct nt_text *t, double v, int single)
{
    char buf[64];
    int prec;

    if (isnan(v) || isinf(v)) {
        nt_text_str(t, isnan(v) ? "NaN" : v < 0 ? "-Infinity" : "Infinity");
        return;
    }
    for (prec = single ? 6 : 15; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, v);
        if (single ? (float)strtod(buf, NULL) == (float)v : strtod(buf, NULL) == v) {
            break;
        }
    }
    nt_text_str(t, buf);
}

/* System.Decimal: flags (scale in bits 16-23, sign in bit 31), hi, lo, mid (format doc 5.2). */
static void
nt_text_decimal(struct nt_text *t, const uint8_t *p)
{
    uint32_t flags = nt_load_u32le(p);
    uint32_t w[3] = { nt_load_u32le(p + 4), nt_load_u32le(p + 12), nt_load_u32le(p + 8) };
    unsigned scale = (flags >> 16) & 0xFF;
    char digits[40];
    size_t n = 0;
    char out[48];
    size_t o = 0;

    /* w = hi:mid:lo, most significant first; repeated division by 10. */
    do {
        uint64_t rem = 0;
        int k;

        for (k = 0; k < 3; k++) {
            uint64_t cur = (rem << 32) | w[k];

            w[k] = (uint32_t)(cur / 10);
            rem = cur % 10;
        }
        digits[n++] = (char)('0' + rem);
    } while ((w[0] | w[1] | w[2]) != 0 && n < 30);
    if (scale > 28) {
        scale = 28;
    }
    while (n <= scale) {
        digits[n++] = '0';
    }
    if (flags & 0x80000000u) {
        out[o++] = '-';
    }
    while (n > 0) {
        out[o++] = digits[--n];
        if (n == scale && scale != 0) {
            out[o++] = '.';
        }
    }
    nt_text_put(t, out, o);
}

/* FILETIME (100 ns since 1601) as ISO 8601 UTC, or the raw number when out of range. */
static void
nt_text_filetime(struct nt_text *t, uint64_t ft)
{
    const uint64_t epoch_delta = 116444736000000000ULL; /* 1601 -> 1970 in 100 ns */
    struct tm tm;
    time_t secs;

    if (ft < epoch_delta || ft > epoch_delta + 253402300799ULL * 10000000ULL) {
        nt_text_printf(t, "%" PRIu64, ft);
        return;
    }
    secs = (time_t)((ft - epoch_delta) / 10000000ULL);
    if (gmtime_r(&secs, &tm) == NULL) {
        nt_text_printf(t, "%" PRIu64, ft);
        return;
    }
    nt_text_printf(t, "%04d-%02d-%02dT%02d:%02d:%02d.%07uZ", tm.tm_year + 1900, tm.tm_mon + 1,
                   tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   (unsigned)((ft - epoch_delta) % 10000000ULL));
}

/* ------------------------------------------------------------------------------------------ */
/* The walk                                                                                   */
/* ------------------------------------------------------------------------------------------ */

struct nt_walk {
    const uint8_t *payload; /* start of the event's payload (DataLoc base) */
    const uint8_t *p;
    const uint8_t *end;
    nt_value_fn fn; /* decode mode */
    void *ctx;
    /*
     * Values left to visit. Objects and fixed arrays may take no payload bytes, so nested
     * arrays of empty objects could otherwise cost 65535^depth steps on a tiny payload.
     */
    uint64_t budget;
    struct nt_text *text; /* format mode */
};

static int nt_walk_fields(struct nt_walk *w, const struct nt_field *fields, uint32_t n,
                          uint32_t depth);

/* Size of a fixed-size type, or 0 for variable-size ones. */
static size_t
nt_type_fixed_size(enum nt_type type, const struct nt_field *fields, uint32_t n, uint32_t depth)
{
    size_t total = 0;
    uint32_t i;

    switch (type) {
    case NT_TYPE_SBYTE:
    case NT_TYPE_BYTE:
    case NT_TYPE_UTF8_CODE_UNIT:
    case NT_TYPE_BOOLEAN8:
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
    case NT_TYPE_INT64:
    case NT_TYPE_UINT64:
    case NT_TYPE_DOUBLE:
    case NT_TYPE_DATETIME:
        return 8;
    case NT_TYPE_DECIMAL:
    case NT_TYPE_GUID:
        return 16;
    case NT_TYPE_OBJECT:
        if (depth > NT_DECODE_MAX_DEPTH || (n > 0 && fields == NULL)) {
            return 0;
        }
        for (i = 0; i < n; i++) {
            size_t s;

            if (fields[i].type == NT_TYPE_FIXED_ARRAY) {
                s = nt_type_fixed_size(fields[i].element_type, fields[i].fields,
                                       fields[i].field_count, depth + 1) *
                    fields[i].fixed_count;
                if (fields[i].fixed_count == 0) {
                    continue;
                }
            } else {
                s = nt_type_fixed_size(fields[i].type, fields[i].fields, fields[i].field_count,
                                       depth + 1);
            }
            if (s == 0) {
                return 0;
            }
            total += s;
        }
        return total;
    default:
        return 0;
    }
}

static const uint8_t *
nt_walk_take(struct nt_walk *w, size_t n)
{
    const uint8_t *p = w->p;

    if (n > (size_t)(w->end - w->p)) {
        return NULL;
    }
    w->p += n;
    return p;
}

static int
nt_walk_varuint(struct nt_walk *w, uint64_t *v)
{
    unsigned shift = 0;

    *v = 0;
    for (;;) {
        uint8_t b;

        if (w->p >= w->end || shift >= 64) {
            return -EBADMSG;
        }
        b = *w->p++;
        *v |= (uint64_t)(b & 0x7F) << shift;
        shift += 7;
        if ((b & 0x80) == 0) {
            return 0;
        }
    }
}

static int
nt_walk_emit(struct nt_walk *w, const struct nt_value *v)
{
    return w->fn != NULL ? w->fn(w->ctx, v) : 0;
}

/* The n-byte (1, 2, 4 or 8) little-endian unsigned integer at p. */
static uint64_t
nt_load_le(const uint8_t *p, size_t n)
{
    return n == 1 ? p[0] : n == 2 ? nt_load_u16le(p) : n == 4 ? nt_load_u32le(p) : nt_load_u64le(p);
}

/* u, an n-byte two's complement integer, widened with its sign. */
static int64_t
nt_sign_extend(uint64_t u, size_t n)
{
    return n == 1 ? (int8_t)u : n == 2 ? (int16_t)u : n == 4 ? (int32_t)u : (int64_t)u;
}

/* Reads one scalar of type into v and formats it in format mode. */
static int
nt_walk_scalar(struct nt_walk *w, struct nt_value *v)
{
    const uint8_t *start = w->p;
    /* Fixed-size types take their bytes here once; the cases below only interpret p. */
    size_t n = nt_type_fixed_size(v->type, NULL, 0, 0);
    const uint8_t *p = NULL;
    struct nt_text *t = w->text;
    char guid[37];
    uint32_t u32;
    uint64_t u64;
    float f;
    double d;

    if (n > 0) {
        p = nt_walk_take(w, n);
        if (p == NULL) {
            return -EBADMSG;
        }
    }
    switch (v->type) {
    case NT_TYPE_BOOLEAN:
    case NT_TYPE_BOOLEAN8:
        v->i = nt_load_le(p, n) != 0;
        if (t != NULL) {
            nt_text_str(t, v->i ? "true" : "false");
        }
        break;
    case NT_TYPE_CHAR:
        v->i = nt_load_u16le(p);
        if (t != NULL) {
            nt_text_utf16(t, p, 2);
        }
        break;
    case NT_TYPE_UTF8_CODE_UNIT:
        v->u = p[0];
        v->i = p[0];
        if (t != NULL) {
            if (p[0] >= 0x20 && p[0] < 0x7F) {
                nt_text_quoted(t, (const char *)p, 1);
            } else {
                nt_text_printf(t, "%u", p[0]);
            }
        }
        break;
    case NT_TYPE_SBYTE:
    case NT_TYPE_INT16:
    case NT_TYPE_INT32:
    case NT_TYPE_INT64:
        v->i = nt_sign_extend(nt_load_le(p, n), n);
        if (t != NULL) {
            nt_text_printf(t, "%" PRId64, v->i);
        }
        break;
    case NT_TYPE_BYTE:
    case NT_TYPE_UINT16:
    case NT_TYPE_UINT32:
    case NT_TYPE_UINT64:
        v->u = nt_load_le(p, n);
        if (t != NULL) {
            nt_text_printf(t, "%" PRIu64, v->u);
        }
        break;
    case NT_TYPE_SINGLE:
    case NT_TYPE_DOUBLE:
        if (n == 4) {
            u32 = nt_load_u32le(p);
            memcpy(&f, &u32, 4);
            v->f = f;
        } else {
            u64 = nt_load_u64le(p);
            memcpy(&d, &u64, 8);
            v->f = d;
        }
        if (t != NULL) {
            nt_text_double(t, v->f, n == 4);
        }
        break;
    case NT_TYPE_DECIMAL:
        if (t != NULL) {
            nt_text_decimal(t, p);
        }
        break;
    case NT_TYPE_DATETIME:
        v->u = nt_load_u64le(p);
        if (t != NULL) {
            nt_text_filetime(t, v->u);
        }
        break;
    case NT_TYPE_GUID:
        if (t != NULL) {
            nt_guid_format(p, guid);
            nt_text_str(t, guid);
        }
        break;
    case NT_TYPE_STRING: {
        const uint8_t *s = w->p;

        p = NULL;
        while ((size_t)(w->end - s) >= 2) {
            if (s[0] == 0 && s[1] == 0) {
                p = s;
                break;
            }
            s += 2;
        }
        if (p == NULL) {
            return -EBADMSG;
        }
        v->data = w->p;
        v->size = (uint32_t)(p - w->p);
        w->p = p + 2;
        if (t != NULL) {
            nt_text_utf16(t, v->data, v->size);
        }
        return nt_walk_emit(w, v);
    }
    case NT_TYPE_VARINT:
        if (nt_walk_varuint(w, &u64) != 0) {
            return -EBADMSG;
        }
        v->i = (int64_t)(u64 >> 1) ^ -(int64_t)(u64 & 1);
        if (t != NULL) {
            nt_text_printf(t, "%" PRId64, v->i);
        }
        break;
    case NT_TYPE_VARUINT:
        if (nt_walk_varuint(w, &v->u) != 0) {
            return -EBADMSG;
        }
        if (t != NULL) {
            nt_text_printf(t, "%" PRIu64, v->u);
        }
        break;
    default:
        return -EBADMSG; /* EMPTY or an unknown code */
    }
    v->data = start;
    v->size = (uint32_t)(w->p - start);
    return nt_walk_emit(w, v);
}

/* One value of type (with sub-fields for objects) described by f. */
static int
nt_walk_value(struct nt_walk *w, const struct nt_field *f, enum nt_type type,
              const struct nt_field *sub, uint32_t nsub, uint32_t depth, uint32_t index)
{
    struct nt_value v;
    int rc;

    if (depth > NT_DECODE_MAX_DEPTH || w->budget == 0) {
        return -EBADMSG;
    }
    w->budget--;
    memset(&v, 0, sizeof(v));
    v.field = f;
    v.type = type;
    v.depth = depth;
    v.index = index;
    switch (type) {
    case NT_TYPE_OBJECT:
        if (nsub > 0 && sub == NULL) {
            return -EBADMSG;
        }
        v.count = nsub;
        v.data = w->p;
        rc = nt_walk_emit(w, &v);
        if (rc != 0) {
            return rc;
        }
        if (w->text != NULL) {
            nt_text_put(w->text, "{", 1);
        }
        rc = nt_walk_fields(w, sub, nsub, depth + 1);
        if (rc == 0 && w->text != NULL) {
            nt_text_put(w->text, "}", 1);
        }
        return rc;
    case NT_TYPE_ARRAY:
    case NT_TYPE_FIXED_ARRAY:
    case NT_TYPE_RELLOC:
    case NT_TYPE_DATALOC: {
        const uint8_t *saved_end = w->end;
        const uint8_t *saved_p = NULL;
        uint32_t count;
        uint32_t k;

        if (f->element_type == NT_TYPE_ARRAY || f->element_type == NT_TYPE_FIXED_ARRAY ||
            f->element_type == NT_TYPE_RELLOC || f->element_type == NT_TYPE_DATALOC) {
            return -EBADMSG; /* the metadata parser never builds these */
        }
        if (type == NT_TYPE_ARRAY) {
            const uint8_t *p = nt_walk_take(w, 2);

            if (p == NULL) {
                return -EBADMSG;
            }
            count = nt_load_u16le(p);
        } else if (type == NT_TYPE_FIXED_ARRAY) {
            count = f->fixed_count;
        } else {
            /* RelLoc / DataLoc: u32 = size << 16 | offset, elements elsewhere in the payload. */
            const uint8_t *p = nt_walk_take(w, 4);
            size_t esize = nt_type_fixed_size(f->element_type, f->fields, f->field_count, depth);
            const uint8_t *base;
            uint32_t loc;

            if (p == NULL || esize == 0) {
                return -EBADMSG;
            }
            loc = nt_load_u32le(p);
            base = type == NT_TYPE_RELLOC ? w->p : w->payload;
            if ((size_t)(loc & 0xFFFF) > (size_t)(saved_end - base) ||
                (size_t)(loc >> 16) > (size_t)(saved_end - base) - (loc & 0xFFFF)) {
                return -EBADMSG;
            }
            count = (uint32_t)((loc >> 16) / esize);
            saved_p = w->p;
            w->p = base + (loc & 0xFFFF);
            w->end = w->p + (loc >> 16);
        }
        v.count = count;
        v.data = w->p;
        rc = nt_walk_emit(w, &v);
        if (rc == 0 && w->text != NULL) {
            nt_text_put(w->text, "[", 1);
        }
        for (k = 0; k < count && rc == 0; k++) {
            if (k > 0 && w->text != NULL) {
                nt_text_put(w->text, ",", 1);
            }
            rc = nt_walk_value(w, f, f->element_type, f->fields, f->field_count, depth + 1, k);
        }
        if (rc == 0 && w->text != NULL) {
            nt_text_put(w->text, "]", 1);
        }
        if (saved_p != NULL) {
            w->p = saved_p;
            w->end = saved_end;
        }
        return rc;
    }
    default:
        return nt_walk_scalar(w, &v);
    }
}

static int
nt_walk_fields(struct nt_walk *w, const struct nt_field *fields, uint32_t n, uint32_t depth)
{
    uint32_t i;
    int rc;

    for (i = 0; i < n; i++) {
        const struct nt_field *f = &fields[i];

        if (w->text != NULL) {
            if (i > 0) {
                nt_text_put(w->text, depth == 0 ? " " : ",", 1);
            }
            nt_text_str(w->text, f->name != NULL ? f->name : "?");
            nt_text_put(w->text, "=", 1);
        }
        rc = nt_walk_value(w, f, f->type, f->fields, f->field_count, depth, 0);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* Walks payload's fields by desc, each value to fn or into text: decode's and format's walk. */
static int
nt_walk_payload(const struct nt_event_desc *desc, const uint8_t *payload, uint32_t size,
                nt_value_fn fn, void *ctx, struct nt_text *text)
{
    struct nt_walk w;

    if (desc == NULL || (desc->field_count > 0 && desc->fields == NULL) ||
        (payload == NULL && size > 0)) {
        return -EINVAL;
    }
    w.payload = payload;
    w.p = payload;
    w.end = payload + size;
    w.fn = fn;
    w.ctx = ctx;
    w.text = text;
    w.budget = NT_DECODE_BUDGET(size);
    return nt_walk_fields(&w, desc->fields, desc->field_count, 0);
}

int
nt_payload_decode(const struct nt_event_desc *desc, const uint8_t *payload, uint32_t size,
                  nt_value_fn fn, void *ctx)
{
    return nt_walk_payload(desc, payload, size, fn, ctx, NULL);
}

int
nt_payload_format(const struct nt_event_desc *desc, const uint8_t *payload, uint32_t size,
                  char *out, size_t cap)
{
    struct nt_text t = { out, cap, 0 };
    int rc = nt_walk_payload(desc, payload, size, NULL, NULL, &t);

    /* terminated on every return, a refused call's too (empty) */
    if (out != NULL && cap > 0) {
        out[t.len < cap ? t.len : cap - 1] = '\0';
    }
    if (rc != 0) {
        return rc;
    }
    return t.len > INT32_MAX ? -EOVERFLOW : (int)t.len;
}
