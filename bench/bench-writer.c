/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-writer.c - throughput of the nettrace writer on sample-like events: ThreadSample
 * (4-byte payload), 32-frame stacks drawn from a few hundred distinct ones, a few sampled
 * threads, one capture thread. Runs into a null sink (encoding cost only) and into a memory
 * sink (plus the copy), and prints the median of 5 runs. Not part of ctest.
 * Run: build/bench/bench-writer [events] [distinct-stacks]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nettrace/nettrace.h"

#define BENCH_RUNS   5
#define BENCH_DEPTH  32
#define BENCH_MEMBUF (8u << 20)

struct bench_mem {
    uint8_t *buf;
    size_t pos;
};

static int
bench_null_write(void *ctx, const void *buf, size_t len)
{
    (void)ctx;
    (void)buf;
    (void)len;
    return 0;
}

/* Copies into a fixed buffer, wrapping: the cost of a real memory sink without page faults. */
static int
bench_mem_write(void *ctx, const void *buf, size_t len)
{
    struct bench_mem *m = ctx;
    const uint8_t *p = buf;
    size_t take;

    while (len > 0) {
        if (m->pos == BENCH_MEMBUF) {
            m->pos = 0;
        }
        take = BENCH_MEMBUF - m->pos;
        if (take > len) {
            take = len;
        }
        memcpy(m->buf + m->pos, p, take);
        m->pos += take;
        p += take;
        len -= take;
    }
    return 0;
}

static int
bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* One run: returns the elapsed seconds and the bytes written, or a negative errno. */
static int
bench_run(const struct nt_sink *sink, uint64_t events, const uint64_t *stacks, uint32_t nstacks,
          double *secs, uint64_t *bytes)
{
    static const uint8_t payload[4] = { 2, 0, 0, 0 };
    struct nt_writer *w = NULL;
    struct nt_writer_stats st;
    struct nt_event ev;
    uint64_t i, t0, rng = 88172645463325252ull;
    uint32_t id;
    int rc;

    rc = nt_writer_new(NULL, sink, &w);
    if (rc != 0) {
        return rc;
    }
    rc = nt_writer_define(w, nt_known_event_desc(NT_KNOWN_THREAD_SAMPLE), &id);
    if (rc != 0) {
        goto out;
    }
    memset(&ev, 0, sizeof(ev));
    ev.metadata_id = id;
    ev.capture_thread_id = 1000;
    ev.processor = 0xFFFFFFFF;
    ev.payload = payload;
    ev.payload_size = sizeof(payload);
    ev.stack_depth = BENCH_DEPTH;
    t0 = nt_clock_now();
    for (i = 0; i < events; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        ev.thread_id = 2000 + (i & 3);
        ev.timestamp = t0 + i * 250;
        ev.stack = stacks + (rng % nstacks) * BENCH_DEPTH;
        rc = nt_writer_write(w, &ev);
        if (rc != 0) {
            goto out;
        }
    }
    rc = nt_writer_finish(w);
    *secs = (double)(nt_clock_now() - t0) / 1e9;
    nt_writer_get_stats(w, &st);
    *bytes = st.bytes;
out:
    nt_writer_free(w);
    return rc;
}

static int
bench_sink(const char *label, const struct nt_sink *sink, uint64_t events, const uint64_t *stacks,
           uint32_t nstacks)
{
    double secs[BENCH_RUNS], median;
    uint64_t bytes = 0;
    int i, rc;

    for (i = 0; i < BENCH_RUNS; i++) {
        rc = bench_run(sink, events, stacks, nstacks, &secs[i], &bytes);
        if (rc != 0) {
            fprintf(stderr, "bench-writer: %s: error %d\n", label, rc);
            return 1;
        }
    }
    qsort(secs, BENCH_RUNS, sizeof(secs[0]), bench_cmp);
    median = secs[BENCH_RUNS / 2];
    printf("%-12s %10.2f Mevents/s %9.1f MB/s  (%llu events, %llu bytes, %.3f s median of %d)\n",
           label, (double)events / median / 1e6, (double)bytes / median / 1e6,
           (unsigned long long)events, (unsigned long long)bytes, median, BENCH_RUNS);
    return 0;
}

int
main(int argc, char **argv)
{
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 5000000;
    uint32_t nstacks = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 300;
    struct nt_sink null_sink = { bench_null_write, NULL };
    struct bench_mem mem = { NULL, 0 };
    struct nt_sink mem_sink = { bench_mem_write, &mem };
    uint64_t *stacks;
    uint32_t s, f;
    int rc = 1;

    if (events == 0 || nstacks == 0) {
        fprintf(stderr, "usage: bench-writer [events] [distinct-stacks]\n");
        return 2;
    }
    stacks = malloc((size_t)nstacks * BENCH_DEPTH * sizeof(*stacks));
    mem.buf = malloc(BENCH_MEMBUF);
    if (stacks == NULL || mem.buf == NULL) {
        goto out;
    }
    /* Stacks share their root frames, as real ones do, and differ toward the leaf. */
    for (s = 0; s < nstacks; s++) {
        for (f = 0; f < BENCH_DEPTH; f++) {
            stacks[s * BENCH_DEPTH + f] =
                    0x55550000000ull + (f < 24 ? f * 0x40 : f * 0x40 + (s + 1) * 0x1000 + f);
        }
    }
    printf("bench-writer: ThreadSample, %u-frame stacks, %u distinct, 4 threads\n", BENCH_DEPTH,
           nstacks);
    rc = bench_sink("null sink", &null_sink, events, stacks, nstacks);
    if (rc == 0) {
        rc = bench_sink("memory sink", &mem_sink, events, stacks, nstacks);
    }
out:
    free(stacks);
    free(mem.buf);
    return rc;
}
