/* SPDX-License-Identifier: MIT */
/*
 * tests/nettrace-bytes.h - a tiny byte builder for hand-made nettrace streams in the reader
 * tests (V4/V5 FastSerialization objects, V6 blocks, LEB128, UTF-16 strings). Test-only: it
 * aborts the test on allocation failure and records nothing about validity, so tests can build
 * broken streams on purpose. Header-only; include it from one test file each.
 */
#ifndef PP_TESTS_NETTRACE_BYTES_H
#define PP_TESTS_NETTRACE_BYTES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/compiler.h"
#include "tests/test.h"

struct tb {
    uint8_t *b;
    size_t n;
    size_t cap;
};

static PP_UNUSED void
tb_bytes(struct tb *t, const void *p, size_t len)
{
    if (t->n + len > t->cap) {
        size_t ncap = t->cap != 0 ? t->cap : 256;

        while (ncap < t->n + len) {
            ncap *= 2;
        }
        t->b = realloc(t->b, ncap);
        if (t->b == NULL) {
            test_fail(__FILE__, __LINE__, "out of memory");
        }
        t->cap = ncap;
    }
    if (len > 0) {
        memcpy(t->b + t->n, p, len);
    }
    t->n += len;
}

static PP_UNUSED void
tb_u8(struct tb *t, uint8_t v)
{
    tb_bytes(t, &v, 1);
}

static PP_UNUSED void
tb_u16(struct tb *t, uint16_t v)
{
    uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };

    tb_bytes(t, b, 2);
}

static PP_UNUSED void
tb_u32(struct tb *t, uint32_t v)
{
    tb_u16(t, (uint16_t)v);
    tb_u16(t, (uint16_t)(v >> 16));
}

static PP_UNUSED void
tb_u64(struct tb *t, uint64_t v)
{
    tb_u32(t, (uint32_t)v);
    tb_u32(t, (uint32_t)(v >> 32));
}

static PP_UNUSED void
tb_put_u32(struct tb *t, size_t at, uint32_t v)
{
    t->b[at] = (uint8_t)v;
    t->b[at + 1] = (uint8_t)(v >> 8);
    t->b[at + 2] = (uint8_t)(v >> 16);
    t->b[at + 3] = (uint8_t)(v >> 24);
}

static PP_UNUSED void
tb_var(struct tb *t, uint64_t v)
{
    while (v >= 0x80) {
        tb_u8(t, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    tb_u8(t, (uint8_t)v);
}

/* ASCII (or Latin-1) as NUL-terminated UTF-16LE. */
static PP_UNUSED void
tb_utf16(struct tb *t, const char *s)
{
    for (; *s != '\0'; s++) {
        tb_u16(t, (uint8_t)*s);
    }
    tb_u16(t, 0);
}

/* V6 string: varuint length + UTF-8. */
static PP_UNUSED void
tb_str6(struct tb *t, const char *s)
{
    tb_var(t, strlen(s));
    tb_bytes(t, s, strlen(s));
}

static PP_UNUSED void
tb_v4_header(struct tb *t)
{
    tb_bytes(t, "Nettrace", 8);
    tb_u32(t, 20);
    tb_bytes(t, "!FastSerialization.1", 20);
}

static PP_UNUSED void
tb_v4_object_begin(struct tb *t, const char *name, int32_t version, int32_t min_version)
{
    tb_u8(t, 5);
    tb_u8(t, 5);
    tb_u8(t, 1);
    tb_u32(t, (uint32_t)version);
    tb_u32(t, (uint32_t)min_version);
    tb_u32(t, (uint32_t)strlen(name));
    tb_bytes(t, name, strlen(name));
    tb_u8(t, 6);
}

/* The Trace object: 2021-06-09 09:48:25.902, ticks 1000, 1e9 ticks/s, pointer 8, pid. */
static PP_UNUSED void
tb_v4_trace(struct tb *t, uint32_t pid)
{
    static const uint16_t st[8] = { 2021, 6, 3, 9, 9, 48, 25, 902 };
    int i;

    tb_v4_object_begin(t, "Trace", 4, 4);
    for (i = 0; i < 8; i++) {
        tb_u16(t, st[i]);
    }
    tb_u64(t, 1000);
    tb_u64(t, 1000000000);
    tb_u32(t, 8);
    tb_u32(t, pid);
    tb_u32(t, 4);
    tb_u32(t, 1000000);
    tb_u8(t, 6);
}

/* Opens a block object; returns the offset of its size field. Content starts 4-aligned. */
static PP_UNUSED size_t
tb_v4_block_begin(struct tb *t, const char *name)
{
    size_t at;

    tb_v4_object_begin(t, name, 2, 2);
    at = t->n;
    tb_u32(t, 0);
    while (t->n % 4 != 0) {
        tb_u8(t, 0);
    }
    return at;
}

/* Patches the size of the block opened at size_at and closes the object. */
static PP_UNUSED void
tb_v4_block_end(struct tb *t, size_t size_at)
{
    size_t content = (size_at + 4 + 3) / 4 * 4;

    tb_put_u32(t, size_at, (uint32_t)(t->n - content));
    tb_u8(t, 6);
}

/* Event/metadata block header: size 20, compressed, timestamps 0. */
static PP_UNUSED void
tb_event_block_header(struct tb *t)
{
    tb_u16(t, 20);
    tb_u16(t, 1);
    tb_u64(t, 0);
    tb_u64(t, 0);
}

/*
 * A V5 metadata record (as the payload of a metadata event): id, provider, event id, name,
 * keywords 0, version 0, level 4, then nothing (the caller appends fields or tags).
 */
static PP_UNUSED void
tb_md_head(struct tb *t, uint32_t id, const char *provider, uint32_t event_id, const char *name)
{
    tb_u32(t, id);
    tb_utf16(t, provider);
    tb_u32(t, event_id);
    tb_utf16(t, name);
    tb_u64(t, 0);
    tb_u32(t, 0);
    tb_u32(t, 4);
}

/* A compressed metadata event carrying the record md (flags: metadata id 0 + size). */
static PP_UNUSED void
tb_md_event(struct tb *t, const struct tb *md)
{
    tb_u8(t, 0x80 | 0x01);
    tb_var(t, 0);
    tb_var(t, 0); /* timestamp delta */
    tb_var(t, md->n);
    tb_bytes(t, md->b, md->n);
}

/* V6 block header. */
static PP_UNUSED void
tb_v6_block(struct tb *t, unsigned kind, const struct tb *content)
{
    tb_u32(t, (uint32_t)content->n | ((uint32_t)kind << 24));
    tb_bytes(t, content->b, content->n);
}

static PP_UNUSED void
tb_free(struct tb *t)
{
    free(t->b);
    memset(t, 0, sizeof(*t));
}

/* A source over memory that hands out at most chunk bytes per read (pipe-like). */
struct tb_mem {
    const uint8_t *p;
    size_t n;
    size_t chunk;
};

static PP_UNUSED ssize_t
tb_mem_read(void *ctx, void *buf, size_t len)
{
    struct tb_mem *m = ctx;

    if (len > m->n) {
        len = m->n;
    }
    if (m->chunk != 0 && len > m->chunk) {
        len = m->chunk;
    }
    memcpy(buf, m->p, len);
    m->p += len;
    m->n -= len;
    return (ssize_t)len;
}

#endif /* PP_TESTS_NETTRACE_BYTES_H */
