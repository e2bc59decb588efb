/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-reader.c - throughput of the nettrace reader: reads one trace from memory N times
 * (a memory source, so only parsing is measured) and prints the median of 5 runs in MB/s and
 * events/s. By default the largest shared fixture; --generate-mb N first writes an N-MB trace of
 * sample-like events with the project's writer. Not part of ctest.
 * Run: build/bench/bench-reader [--decode] [--runs-per-sample N] [FILE | --generate-mb N
 *      [--save FILE]]  (--save keeps the generated trace, for bench/reader-vs-traceevent.sh)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nettrace/nettrace.h"

#define BENCH_SAMPLES 5
#define BENCH_DEFAULT_FILE \
    "../shared/fixtures/nettrace/eventpipe-dotnetcore3.0-win-x64-objver4.nettrace"

struct bench_buf {
    uint8_t *p;
    size_t n;
    size_t cap;
};

struct bench_src {
    const uint8_t *p;
    size_t n;
};

static ssize_t
bench_src_read(void *ctx, void *buf, size_t len)
{
    struct bench_src *s = ctx;

    if (len > s->n) {
        len = s->n;
    }
    memcpy(buf, s->p, len);
    s->p += len;
    s->n -= len;
    return (ssize_t)len;
}

static int
bench_sink_write(void *ctx, const void *buf, size_t len)
{
    struct bench_buf *b = ctx;

    if (b->n + len > b->cap) {
        size_t ncap = b->cap != 0 ? b->cap * 2 : 1u << 20;
        uint8_t *np;

        while (ncap < b->n + len) {
            ncap *= 2;
        }
        np = realloc(b->p, ncap);
        if (np == NULL) {
            return -12;
        }
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->n, buf, len);
    b->n += len;
    return 0;
}

static double
bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int
bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* A trace of about mb megabytes: ThreadSamples with 32-frame stacks from 500 distinct ones. */
static int
bench_generate(size_t mb, struct bench_buf *out)
{
    struct nt_sink sink = { bench_sink_write, out };
    struct nt_writer *w = NULL;
    uint64_t stack[32];
    uint32_t id = 0;
    uint64_t i;
    int err;

    err = nt_writer_new(NULL, &sink, &w);
    if (err == 0) {
        err = nt_writer_define(w, nt_known_event_desc(NT_KNOWN_THREAD_SAMPLE), &id);
    }
    for (i = 0; err == 0 && out->n < mb << 20; i++) {
        struct nt_event ev;
        uint8_t payload[4] = { 2, 0, 0, 0 };
        unsigned k;

        for (k = 0; k < 32; k++) {
            stack[k] = 0x400000 + (i % 500) * 4096 + k * 64;
        }
        memset(&ev, 0, sizeof(ev));
        ev.metadata_id = id;
        ev.thread_id = 1000 + i % 8;
        ev.capture_thread_id = 999;
        ev.processor = 0xFFFFFFFFu;
        ev.timestamp = 1000000 + i * 1000;
        ev.stack = stack;
        ev.stack_depth = 32;
        ev.payload = payload;
        ev.payload_size = 4;
        err = nt_writer_write(w, &ev);
    }
    if (err == 0) {
        err = nt_writer_finish(w);
    }
    nt_writer_free(w);
    return err;
}

static int
bench_value(void *ctx, const struct nt_value *v)
{
    *(uint64_t *)ctx += v->u + (uint64_t)v->i;
    return 0;
}

/* One full read; returns the events read or -1. */
static long long
bench_read_once(const uint8_t *p, size_t n, int decode, uint64_t *sink)
{
    struct bench_src s = { p, n };
    struct nt_source src = { bench_src_read, &s };
    struct nt_reader *r = NULL;
    struct nt_event ev;
    long long events = 0;
    int rc;

    rc = nt_reader_new(&src, NULL, &r);
    while (rc == 0 && (rc = nt_reader_next(r, &ev)) == 1) {
        rc = 0;
        events++;
        *sink += ev.timestamp + ev.stack_depth;
        if (decode && ev.desc != NULL &&
            nt_payload_decode(ev.desc, ev.payload, ev.payload_size, bench_value, sink) != 0) {
            (*sink)++;
        }
    }
    if (rc != 0) {
        struct nt_reader_error e = { 0, NULL, 0 };

        if (r != NULL) {
            nt_reader_get_error(r, &e);
        }
        fprintf(stderr, "bench-reader: offset %llu: %s\n", (unsigned long long)e.offset,
                e.reason != NULL ? e.reason : "error");
        events = -1;
    }
    nt_reader_free(r);
    return events;
}

int
main(int argc, char **argv)
{
    struct bench_buf data = { NULL, 0, 0 };
    const char *path = NULL, *save = NULL;
    size_t generate_mb = 0;
    int runs = 0;
    int decode = 0;
    double mbps[BENCH_SAMPLES], evps[BENCH_SAMPLES];
    uint64_t sink = 0;
    long long events = 0;
    int i, k;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--generate-mb") == 0 && i + 1 < argc) {
            generate_mb = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--save") == 0 && i + 1 < argc) {
            save = argv[++i];
        } else if (strcmp(argv[i], "--runs-per-sample") == 0 && i + 1 < argc) {
            runs = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--decode") == 0) {
            decode = 1;
        } else if (argv[i][0] != '-') {
            path = argv[i];
        } else {
            fprintf(stderr, "usage: bench-reader [--decode] [--runs-per-sample N] "
                            "[FILE | --generate-mb N [--save FILE]]\n");
            return 2;
        }
    }
    if (generate_mb > 0) {
        if (bench_generate(generate_mb, &data) != 0) {
            fprintf(stderr, "bench-reader: generating the trace failed\n");
            return 1;
        }
        printf("generated %zu bytes with the writer\n", data.n);
        if (save != NULL) {
            FILE *f = fopen(save, "wb");

            if (f == NULL || fwrite(data.p, 1, data.n, f) != data.n || fclose(f) != 0) {
                fprintf(stderr, "bench-reader: cannot save the trace to %s\n", save);
                return 1;
            }
            printf("saved to %s\n", save);
            return 0;
        }
    } else {
        char def[4096];
        FILE *f;
        long size;

        if (path == NULL) {
            const char *root = getenv("PP_SOURCE_DIR");

            snprintf(def, sizeof(def), "%s/%s", root != NULL ? root : ".", BENCH_DEFAULT_FILE);
            path = def;
        }
        f = fopen(path, "rb");
        if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) <= 0 ||
            fseek(f, 0, SEEK_SET) != 0) {
            fprintf(stderr, "bench-reader: cannot read %s (set PP_SOURCE_DIR or give a FILE)\n",
                    path);
            return 1;
        }
        data.p = malloc((size_t)size);
        data.n = (size_t)size;
        if (data.p == NULL || fread(data.p, 1, data.n, f) != data.n) {
            fprintf(stderr, "bench-reader: cannot read %s\n", path);
            return 1;
        }
        fclose(f);
        printf("file %s (%zu bytes)\n", path, data.n);
    }
    if (runs <= 0) {
        runs = (int)(200u * 1000000u / (data.n + 1)) + 1; /* about 200 MB per sample */
    }
    for (k = 0; k < BENCH_SAMPLES; k++) {
        double t0 = bench_now(), dt;

        for (i = 0; i < runs; i++) {
            events = bench_read_once(data.p, data.n, decode, &sink);
            if (events < 0) {
                return 1;
            }
        }
        dt = bench_now() - t0;
        mbps[k] = (double)data.n * runs / dt / 1e6;
        evps[k] = (double)events * runs / dt;
    }
    qsort(mbps, BENCH_SAMPLES, sizeof(double), bench_cmp);
    qsort(evps, BENCH_SAMPLES, sizeof(double), bench_cmp);
    printf("%lld events per read, %d reads per sample%s\n", events, runs,
           decode ? ", payloads decoded" : "");
    printf("median of %d: %.1f MB/s, %.2f M events/s (checksum %llu)\n", BENCH_SAMPLES,
           mbps[BENCH_SAMPLES / 2], evps[BENCH_SAMPLES / 2] / 1e6, (unsigned long long)(sink & 1));
    return 0;
}
