/* SPDX-License-Identifier: MIT */
/*
 * nettrace/sha1.c - SHA-1 written from FIPS 180-4 (sections 5.1.1 padding, 6.1.2 hash
 * computation), used only to derive EventSource provider GUIDs. Context: any thread; no
 * allocation; must not be used where collision resistance matters.
 */
#include "nettrace/sha1.h"

#include <string.h>

static uint32_t
nt_sha1_rotl(uint32_t x, unsigned n)
{
    return (x << n) | (x >> (32 - n));
}

/* One 512-bit block: the message schedule W0..W79 and the 80 rounds of 6.1.2. */
static void
nt_sha1_compress(struct nt_sha1 *ctx, const uint8_t *m)
{
    uint32_t w[80];
    uint32_t a, b, c, d, e, f, k, t;
    int i;

    for (i = 0; i < 16; i++) {
        w[i] = (uint32_t)m[4 * i] << 24 | (uint32_t)m[4 * i + 1] << 16 |
               (uint32_t)m[4 * i + 2] << 8 | (uint32_t)m[4 * i + 3];
    }
    for (i = 16; i < 80; i++) {
        w[i] = nt_sha1_rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    }
    a = ctx->h[0];
    b = ctx->h[1];
    c = ctx->h[2];
    d = ctx->h[3];
    e = ctx->h[4];
    for (i = 0; i < 80; i++) {
        if (i < 20) {
            f = (b & c) ^ (~b & d); /* Ch */
            k = 0x5a827999;
        } else if (i < 40) {
            f = b ^ c ^ d; /* Parity */
            k = 0x6ed9eba1;
        } else if (i < 60) {
            f = (b & c) ^ (b & d) ^ (c & d); /* Maj */
            k = 0x8f1bbcdc;
        } else {
            f = b ^ c ^ d;
            k = 0xca62c1d6;
        }
        t = nt_sha1_rotl(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = nt_sha1_rotl(b, 30);
        b = a;
        a = t;
    }
    ctx->h[0] += a;
    ctx->h[1] += b;
    ctx->h[2] += c;
    ctx->h[3] += d;
    ctx->h[4] += e;
}

void
nt_sha1_init(struct nt_sha1 *ctx)
{
    /* Initial hash value, FIPS 180-4 5.3.1. */
    ctx->h[0] = 0x67452301;
    ctx->h[1] = 0xefcdab89;
    ctx->h[2] = 0x98badcfe;
    ctx->h[3] = 0x10325476;
    ctx->h[4] = 0xc3d2e1f0;
    ctx->length = 0;
    ctx->used = 0;
}

void
nt_sha1_update(struct nt_sha1 *ctx, const void *data, size_t len)
{
    const uint8_t *p = data;
    size_t take;

    ctx->length += len;
    while (len > 0) {
        take = sizeof(ctx->block) - ctx->used;
        if (take > len) {
            take = len;
        }
        memcpy(ctx->block + ctx->used, p, take);
        ctx->used += take;
        p += take;
        len -= take;
        if (ctx->used == sizeof(ctx->block)) {
            nt_sha1_compress(ctx, ctx->block);
            ctx->used = 0;
        }
    }
}

void
nt_sha1_final(struct nt_sha1 *ctx, uint8_t digest[NT_SHA1_DIGEST_SIZE])
{
    uint64_t bits = ctx->length * 8;
    int i;

    /* Padding (5.1.1): a 1 bit, zeros up to 56 mod 64 bytes, then the 64-bit big-endian length. */
    ctx->block[ctx->used++] = 0x80;
    if (ctx->used > 56) {
        memset(ctx->block + ctx->used, 0, sizeof(ctx->block) - ctx->used);
        nt_sha1_compress(ctx, ctx->block);
        ctx->used = 0;
    }
    memset(ctx->block + ctx->used, 0, 56 - ctx->used);
    for (i = 0; i < 8; i++) {
        ctx->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    }
    nt_sha1_compress(ctx, ctx->block);
    for (i = 0; i < 5; i++) {
        digest[4 * i] = (uint8_t)(ctx->h[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(ctx->h[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(ctx->h[i] >> 8);
        digest[4 * i + 3] = (uint8_t)ctx->h[i];
    }
}
