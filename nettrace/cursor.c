/* SPDX-License-Identifier: MIT */
/*
 * nettrace/cursor.c - the out-of-line parts of the bounds-checked cursor (cursor.h): error
 * recording, long LEB128 encodings and string scanning. Context: any thread; no allocation;
 * never reads outside the cursor's span.
 */
#include "nettrace/cursor.h"

#include <errno.h>

void
nt_cursor_init(struct nt_cursor *c, const void *buf, size_t len, uint64_t base,
               const char *short_reason)
{
    c->start = buf;
    c->p = buf;
    c->end = c->start + len;
    c->base = base;
    c->short_reason = short_reason;
    c->err = NULL;
    c->err_offset = 0;
}

int
nt_cursor_fail_at(struct nt_cursor *c, uint64_t offset, const char *reason)
{
    if (c->err == NULL) {
        c->err = reason != NULL ? reason : "malformed input";
        c->err_offset = offset;
    }
    return -EBADMSG;
}

int
nt_cursor_fail(struct nt_cursor *c, const char *reason)
{
    return nt_cursor_fail_at(c, nt_cursor_offset(c), reason);
}

uint64_t
nt_cursor_varuint_slow(struct nt_cursor *c, unsigned max_bits)
{
    const uint8_t *p = c->p;
    uint64_t v = 0;
    unsigned shift = 0;

    if (c->err != NULL) {
        return 0;
    }
    for (;;) {
        uint8_t b;

        if (p >= c->end) {
            nt_cursor_fail(c, c->short_reason);
            return 0;
        }
        b = *p++;
        /* The last group may only carry the bits that still fit in max_bits. */
        if (shift >= max_bits || (shift + 7 > max_bits && (b & 0x7F) >> (max_bits - shift))) {
            nt_cursor_fail(c, max_bits == 32 ? "varuint32 too long or out of range"
                                             : "varuint64 too long or out of range");
            return 0;
        }
        v |= (uint64_t)(b & 0x7F) << shift;
        shift += 7;
        if ((b & 0x80) == 0) {
            break;
        }
    }
    c->p = p;
    return v;
}

int
nt_cursor_utf16z(struct nt_cursor *c, const uint8_t **s, size_t *len)
{
    const uint8_t *p = c->p;

    if (c->err != NULL) {
        return -EBADMSG;
    }
    while ((size_t)(c->end - p) >= 2) {
        if (p[0] == 0 && p[1] == 0) {
            *s = c->p;
            *len = (size_t)(p - c->p);
            c->p = p + 2;
            return 0;
        }
        p += 2;
    }
    return nt_cursor_fail(c, c->short_reason);
}

int
nt_cursor_str6(struct nt_cursor *c, const uint8_t **s, size_t *len)
{
    uint32_t n = nt_cursor_varu32(c);
    const uint8_t *p = nt_cursor_take(c, n);

    if (p == NULL) {
        return -EBADMSG;
    }
    *s = p;
    *len = n;
    return 0;
}
