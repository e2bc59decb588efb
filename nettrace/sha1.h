/* SPDX-License-Identifier: MIT */
/*
 * nettrace/sha1.h - a private SHA-1 (FIPS 180-4, section 6.1) for the EventSource name-to-GUID
 * hash of nettrace/guid.c. Not for security use. Context: any thread, one context per caller;
 * no allocation. Private to nettrace/ (and its tests).
 */
#ifndef NT_SHA1_H
#define NT_SHA1_H

#include <stddef.h>
#include <stdint.h>

#define NT_SHA1_DIGEST_SIZE 20

struct nt_sha1 {
    uint32_t h[5];     /* intermediate hash value H0..H4 */
    uint64_t length;   /* message bytes hashed so far */
    uint8_t block[64]; /* pending partial block */
    size_t used;       /* bytes in block */
};

void nt_sha1_init(struct nt_sha1 *ctx);
void nt_sha1_update(struct nt_sha1 *ctx, const void *data, size_t len);
/* Pads, finishes and stores the 20-byte digest. ctx must be re-initialised before reuse. */
void nt_sha1_final(struct nt_sha1 *ctx, uint8_t digest[NT_SHA1_DIGEST_SIZE]);

#endif /* NT_SHA1_H */
