/* SPDX-License-Identifier: MIT */
/*
 * nettrace/cursor.h - a bounds-checked little-endian reader over one in-memory span (a block of
 * the stream), with a sticky first error: the first failed read records its reason and stream
 * offset, every later read returns zeroes and fails too, so a parser may read a whole structure
 * and check once. Private to nettrace/ (owner: the reader). Context: any thread; no allocation.
 * It must never read outside [start, end).
 */
#ifndef NT_CURSOR_H
#define NT_CURSOR_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

struct nt_cursor {
    const uint8_t *start; /* first byte of the span */
    const uint8_t *p;     /* next byte to read */
    const uint8_t *end;   /* one past the last byte */
    uint64_t base;        /* stream offset of start */
    /* What a read past the end means here (a static string); set by the parser. */
    const char *short_reason;
    const char *err;     /* first error, or NULL */
    uint64_t err_offset; /* its stream offset */
};

/* Little-endian loads from memory already known to be in bounds. */
static inline uint16_t
nt_load_u16le(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t
nt_load_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t
nt_load_u64le(const uint8_t *p)
{
    return (uint64_t)nt_load_u32le(p) | ((uint64_t)nt_load_u32le(p + 4) << 32);
}

/* Starts a cursor over len bytes at buf, which is at stream offset base. */
void nt_cursor_init(struct nt_cursor *c, const void *buf, size_t len, uint64_t base,
                    const char *short_reason);

/* Records reason at the current offset unless an error is already recorded. Returns -EBADMSG. */
int nt_cursor_fail(struct nt_cursor *c, const char *reason);
/* Same at an explicit stream offset. */
int nt_cursor_fail_at(struct nt_cursor *c, uint64_t offset, const char *reason);

static inline int
nt_cursor_ok(const struct nt_cursor *c)
{
    return c->err == NULL;
}

static inline size_t
nt_cursor_left(const struct nt_cursor *c)
{
    return (size_t)(c->end - c->p);
}

static inline uint64_t
nt_cursor_offset(const struct nt_cursor *c)
{
    return c->base + (uint64_t)(c->p - c->start);
}

/*
 * Returns a pointer to the next n bytes and advances past them, or NULL (with the cursor's
 * short_reason recorded) when fewer are left or an error is already recorded.
 */
static inline const uint8_t *
nt_cursor_take(struct nt_cursor *c, size_t n)
{
    const uint8_t *p = c->p;

    if (c->err != NULL || n > (size_t)(c->end - c->p)) {
        nt_cursor_fail(c, c->short_reason);
        return NULL;
    }
    c->p += n;
    return p;
}

/* Advances n bytes; returns 0 or -EBADMSG. */
static inline PP_MUST_USE int
nt_cursor_skip(struct nt_cursor *c, size_t n)
{
    return nt_cursor_take(c, n) != NULL ? 0 : -EBADMSG;
}

static inline uint8_t
nt_cursor_u8(struct nt_cursor *c)
{
    const uint8_t *p = nt_cursor_take(c, 1);

    return p != NULL ? p[0] : 0;
}

static inline uint16_t
nt_cursor_u16(struct nt_cursor *c)
{
    const uint8_t *p = nt_cursor_take(c, 2);

    return p != NULL ? nt_load_u16le(p) : 0;
}

static inline uint32_t
nt_cursor_u32(struct nt_cursor *c)
{
    const uint8_t *p = nt_cursor_take(c, 4);

    return p != NULL ? nt_load_u32le(p) : 0;
}

static inline uint64_t
nt_cursor_u64(struct nt_cursor *c)
{
    const uint8_t *p = nt_cursor_take(c, 8);

    return p != NULL ? nt_load_u64le(p) : 0;
}

/* The slow path of the varuint readers (long encodings, end of span, errors). */
uint64_t nt_cursor_varuint_slow(struct nt_cursor *c, unsigned max_bits);

/*
 * Unsigned LEB128 limited to 32 / 64 bits (format doc 2); a longer or overflowing encoding is
 * an error. Inline while the longest encoding fits in the span: every event header has several.
 */
static inline uint32_t
nt_cursor_varu32(struct nt_cursor *c)
{
    if (c->err == NULL && c->end - c->p >= 5) {
        const uint8_t *p = c->p;
        uint32_t v = 0;
        int i;

        for (i = 0; i < 5; i++) {
            v |= (uint32_t)(p[i] & 0x7F) << (7 * i);
            if ((p[i] & 0x80) == 0) {
                if (i == 4 && p[i] > 0x0F) {
                    break; /* out of range: the slow path records the error */
                }
                c->p = p + i + 1;
                return v;
            }
        }
    }
    return (uint32_t)nt_cursor_varuint_slow(c, 32);
}

static inline uint64_t
nt_cursor_varu64(struct nt_cursor *c)
{
    if (c->err == NULL && c->end - c->p >= 10) {
        const uint8_t *p = c->p;
        uint64_t v = 0;
        int i;

        for (i = 0; i < 10; i++) {
            v |= (uint64_t)(p[i] & 0x7F) << (7 * i);
            if ((p[i] & 0x80) == 0) {
                if (i == 9 && p[i] > 0x01) {
                    break;
                }
                c->p = p + i + 1;
                return v;
            }
        }
    }
    return nt_cursor_varuint_slow(c, 64);
}

/*
 * A NUL-terminated UTF-16LE string: stores its start and its length in bytes without the
 * terminator and advances past the terminator. Returns 0, or -EBADMSG when no terminator is
 * found before the end (reason: short_reason).
 */
PP_MUST_USE int nt_cursor_utf16z(struct nt_cursor *c, const uint8_t **s, size_t *len);

/* A V6 string: varuint32 byte length then UTF-8. Same contract as nt_cursor_utf16z(). */
PP_MUST_USE int nt_cursor_str6(struct nt_cursor *c, const uint8_t **s, size_t *len);

/* Skips a V6 string; a failure stays recorded in the cursor (check nt_cursor_ok() later). */
static inline void
nt_cursor_skip_str6(struct nt_cursor *c)
{
    uint32_t n = nt_cursor_varu32(c);

    (void)nt_cursor_take(c, n);
}

#endif /* NT_CURSOR_H */
