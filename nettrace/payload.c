/* SPDX-License-Identifier: MIT */
/*
 * nettrace/payload.c - the nt_payload_* builder: appends little-endian fields and UTF-16LE
 * strings to caller storage. Context: any thread; never allocates, never writes past cap. The
 * first failure is sticky in p->err, and a failing append writes nothing, so callers check once.
 */
#include <errno.h>
#include <string.h>

#include "nettrace/internal.h"
#include "nettrace/nettrace.h"

void
nt_payload_init(struct nt_payload *p, void *buf, size_t cap)
{
    p->buf = buf;
    p->cap = buf != NULL ? cap : 0;
    p->len = 0;
    p->err = 0;
}

/* Returns where len bytes go, or NULL (and sets the sticky error) when they do not fit. */
static uint8_t *
nt_payload_reserve(struct nt_payload *p, size_t len)
{
    uint8_t *at;

    if (p->err != 0) {
        return NULL;
    }
    if (len > p->cap - p->len) {
        p->err = -ENOSPC;
        return NULL;
    }
    at = p->buf + p->len;
    p->len += len;
    return at;
}

void
nt_payload_bytes(struct nt_payload *p, const void *bytes, size_t len)
{
    uint8_t *at;

    if (len > 0 && bytes == NULL) {
        if (p->err == 0) {
            p->err = -EINVAL;
        }
        return;
    }
    at = nt_payload_reserve(p, len);
    if (at != NULL && len > 0) {
        memcpy(at, bytes, len);
    }
}

void
nt_payload_u8(struct nt_payload *p, uint8_t v)
{
    uint8_t *at = nt_payload_reserve(p, 1);

    if (at != NULL) {
        *at = v;
    }
}

void
nt_payload_u16(struct nt_payload *p, uint16_t v)
{
    uint8_t *at = nt_payload_reserve(p, 2);

    if (at != NULL) {
        nt_store_u16le(at, v);
    }
}

void
nt_payload_u32(struct nt_payload *p, uint32_t v)
{
    uint8_t *at = nt_payload_reserve(p, 4);

    if (at != NULL) {
        nt_store_u32le(at, v);
    }
}

void
nt_payload_u64(struct nt_payload *p, uint64_t v)
{
    uint8_t *at = nt_payload_reserve(p, 8);

    if (at != NULL) {
        nt_store_u64le(at, v);
    }
}

void
nt_payload_f32(struct nt_payload *p, float v)
{
    uint32_t bits;

    memcpy(&bits, &v, sizeof(bits));
    nt_payload_u32(p, bits);
}

void
nt_payload_f64(struct nt_payload *p, double v)
{
    uint64_t bits;

    memcpy(&bits, &v, sizeof(bits));
    nt_payload_u64(p, bits);
}

void
nt_payload_guid(struct nt_payload *p, const uint8_t guid[16])
{
    static const uint8_t zero[16];

    nt_payload_bytes(p, guid != NULL ? guid : zero, 16);
}

void
nt_payload_string(struct nt_payload *p, const char *utf8)
{
    long size;
    uint8_t *at;

    if (p->err != 0) {
        return;
    }
    /* Validate the whole string first, so invalid input leaves no half-written field. */
    size = nt_utf16_size(utf8);
    if (size < 0) {
        p->err = (int)size;
        return;
    }
    at = nt_payload_reserve(p, (size_t)size);
    if (at != NULL) {
        nt_utf16_put(at, utf8);
    }
}
