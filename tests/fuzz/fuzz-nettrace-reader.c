/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz-nettrace-reader.c - libFuzzer target for the nettrace reader: the input is a
 * whole stream, read from memory in uneven chunks (as from a pipe); every event's payload is also
 * formatted and decoded with its metadata. Limits are small so a lying size cannot make the
 * fuzzer run out of memory. Nothing here may crash, hang or read out of bounds on any input.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "nettrace/nettrace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_mem {
    const uint8_t *p;
    size_t n;
    unsigned calls;
};

static ssize_t
fuzz_mem_read(void *ctx, void *buf, size_t len)
{
    struct fuzz_mem *m = ctx;
    size_t chunk = 1 + (m->calls++ * 7919u) % 4096u; /* uneven, like a pipe */

    if (len > chunk) {
        len = chunk;
    }
    if (len > m->n) {
        len = m->n;
    }
    memcpy(buf, m->p, len);
    m->p += len;
    m->n -= len;
    return (ssize_t)len;
}

static int
fuzz_value(void *ctx, const struct nt_value *v)
{
    uint64_t *sum = ctx;

    *sum += (uint64_t)v->i + v->u + v->size + v->count + v->depth;
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_mem m = { data, size, 0 };
    struct nt_source src = { fuzz_mem_read, &m };
    struct nt_reader_limits lim = { 1u << 20, 4096, 8u << 20, 8u << 20 };
    struct nt_reader *r = NULL;
    struct nt_reader_error err;
    struct nt_reader_stats st;
    struct nt_event ev;
    uint64_t sum = 0;
    char text[512];
    int rc;

    rc = nt_reader_new(&src, &lim, &r);
    while (rc == 0 && (rc = nt_reader_next(r, &ev)) == 1) {
        uint32_t k;

        rc = 0;
        for (k = 0; k < ev.stack_depth; k++) {
            sum += ev.stack[k];
        }
        if (ev.desc != NULL) {
            (void)nt_payload_format(ev.desc, ev.payload, ev.payload_size, text, sizeof(text));
            if (nt_payload_decode(ev.desc, ev.payload, ev.payload_size, fuzz_value, &sum) != 0) {
                sum++;
            }
        }
    }
    if (r != NULL) {
        nt_reader_get_error(r, &err);
        nt_reader_get_stats(r, &st);
        sum += st.events + err.offset;
    }
    nt_reader_free(r);
    return sum == 1 ? 0 : 0;
}
