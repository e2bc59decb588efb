/* SPDX-License-Identifier: MIT */
/*
 * tests/tools/nt-gen.c - writes a nettrace file with libnettrace's writer: EventSource-style
 * events with names and typed fields (some with stacks) and SampleProfiler ThreadSamples with
 * stacks, on several threads and across sequence points; and, as JSON lines, what it wrote
 * (provider, id, name, thread, fields, stack leaf first), with the runtime-native ThreadSample
 * named and decoded the way TraceEvent's built-in parser shows it (Thread/Sample, Type).
 * tests/dotnet-traceevent.sh has TraceEvent read the trace and compares. Usage: nt-gen OUT.nettrace
 * EXPECTED.jsonl
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nettrace/format.h"
#include "nettrace/nettrace.h"

#define GEN_PROVIDER "Pipeprof-Test-Gen"

static const struct nt_field gen_number_fields[] = {
    { "Count", NT_TYPE_INT32, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Big", NT_TYPE_INT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Mask", NT_TYPE_UINT32, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Ratio", NT_TYPE_DOUBLE, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Flag", NT_TYPE_BOOLEAN, NT_TYPE_EMPTY, NULL, 0, 0 },
};
static const struct nt_field gen_text_fields[] = {
    { "Text", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Id", NT_TYPE_GUID, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "After", NT_TYPE_INT32, NT_TYPE_EMPTY, NULL, 0, 0 },
};
static const struct nt_event_desc gen_descs[] = {
    { GEN_PROVIDER, 1, "Numbers", 0x1, 1, 4, 0, gen_number_fields, 5, 0 },
    { GEN_PROVIDER, 2, "Texts", 0x2, 0, 4, 0, gen_text_fields, 3, 0 },
    { GEN_PROVIDER, 3, "Marker", 0, 0, 4, 0, NULL, 0, 0 },
};

static FILE *expect;

static void
gen_json_stack(const uint64_t *stack, uint32_t depth)
{
    uint32_t i;

    fprintf(expect, "\"stack\":[");
    for (i = 0; i < depth; i++) {
        fprintf(expect, "%s\"0x%" PRIx64 "\"", i ? "," : "", stack[i]);
    }
    fprintf(expect, "]}\n");
}

int
main(int argc, char **argv)
{
    static const char *const texts[] = { "hello", "", "caf\xc3\xa9 \xe2\x82\xac", "line" };
    struct nt_writer_options opts = { 0 };
    struct nt_writer *w = NULL;
    uint32_t meta[4];
    struct nt_sink sink;
    uint64_t ts = nt_clock_now(), stacks[6][24];
    int fd, i, d;

    if (argc != 3) {
        fprintf(stderr, "usage: nt-gen OUT.nettrace EXPECTED.jsonl\n");
        return 2;
    }
    fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    expect = fopen(argv[2], "w");
    if (fd < 0 || expect == NULL) {
        perror("nt-gen");
        return 1;
    }
    for (i = 0; i < 6; i++) {
        for (d = 0; d < 24; d++) {
            stacks[i][d] = 0x7f1200000000ULL + (uint64_t)(i * 0x10000 + (24 - d) * 0x40);
        }
    }
    nt_sink_fd(&sink, &fd);
    opts.sync_time_ticks = ts;
    opts.sequence_point_bytes = 4096; /* several sequence-point regions */
    if (nt_writer_new(&opts, &sink, &w) != 0 || nt_writer_define(w, &gen_descs[0], &meta[0]) != 0 ||
        nt_writer_define(w, &gen_descs[1], &meta[1]) != 0 ||
        nt_writer_define(w, &gen_descs[2], &meta[2]) != 0 ||
        nt_writer_define(w, nt_known_event_desc(NT_KNOWN_THREAD_SAMPLE), &meta[3]) != 0) {
        fprintf(stderr, "nt-gen: writer setup failed\n");
        return 1;
    }
    for (i = 0; i < 400; i++) {
        uint8_t buf[256];
        struct nt_payload p;
        struct nt_event ev;
        uint8_t guid[16];
        char g[37];
        int kind = i % 5;
        uint32_t depth = (uint32_t)(1 + i % 24);
        const uint64_t *stack = stacks[i % 6] + (24 - depth);

        memset(&ev, 0, sizeof(ev));
        nt_payload_init(&p, buf, sizeof(buf));
        ev.thread_id = 1001 + (uint64_t)(i % 4);
        ev.capture_thread_id = 7;
        ev.processor = 0xFFFFFFFFu;
        ev.timestamp = ts += 1000000;
        if (kind == 0) {
            nt_payload_u32(&p, (uint32_t)(i * 1000 - 7));
            nt_payload_u64(&p, (uint64_t)((int64_t)i * -123456789012345));
            nt_payload_u32(&p, 0xF0000000u | (uint32_t)i);
            nt_payload_f64(&p, i / 8.0);
            nt_payload_u32(&p, (uint32_t)(i & 1));
            ev.metadata_id = meta[0];
            fprintf(expect,
                    "{\"provider\":\"%s\",\"id\":1,\"name\":\"Numbers\",\"thread\":%" PRIu64
                    ",\"fields\":{\"Count\":%d,\"Big\":%" PRId64 ",\"Mask\":%u,\"Ratio\":%.17g,"
                    "\"Flag\":%s},",
                    GEN_PROVIDER, ev.thread_id, i * 1000 - 7, (int64_t)i * -123456789012345,
                    0xF0000000u | (uint32_t)i, i / 8.0, i & 1 ? "true" : "false");
            depth = 0; /* EventSource events without a stack, as pipeprof writes them */
        } else if (kind == 1) {
            for (d = 0; d < 16; d++) {
                guid[d] = (uint8_t)(i * 16 + d);
            }
            nt_guid_format(guid, g);
            nt_payload_string(&p, texts[i % 4]);
            nt_payload_guid(&p, guid);
            nt_payload_u32(&p, (uint32_t)i);
            ev.metadata_id = meta[1];
            fprintf(expect,
                    "{\"provider\":\"%s\",\"id\":2,\"name\":\"Texts\",\"thread\":%" PRIu64
                    ",\"fields\":{\"Text\":\"%s\",\"Id\":\"%s\",\"After\":%d},",
                    GEN_PROVIDER, ev.thread_id, texts[i % 4], g, i);
        } else if (kind == 2) {
            ev.metadata_id = meta[2];
            fprintf(expect,
                    "{\"provider\":\"%s\",\"id\":3,\"name\":\"Marker\",\"thread\":%" PRIu64
                    ",\"fields\":{},",
                    GEN_PROVIDER, ev.thread_id);
        } else {
            nt_payload_u32(&p, kind == 3 ? NT_SAMPLE_MANAGED : NT_SAMPLE_EXTERNAL);
            ev.metadata_id = meta[3];
            fprintf(expect,
                    "{\"provider\":\"%s\",\"id\":0,\"name\":\"Thread/Sample\",\"thread\":%" PRIu64
                    ",\"fields\":{\"Type\":%d},",
                    NT_PROVIDER_SAMPLE_PROFILER, ev.thread_id,
                    kind == 3 ? NT_SAMPLE_MANAGED : NT_SAMPLE_EXTERNAL);
        }
        ev.stack = depth != 0 ? stack : NULL;
        ev.stack_depth = depth;
        ev.payload = buf;
        ev.payload_size = (uint32_t)p.len;
        gen_json_stack(stack, depth);
        if (p.err != 0 || nt_writer_write(w, &ev) != 0) {
            fprintf(stderr, "nt-gen: write failed at event %d\n", i);
            return 1;
        }
    }
    if (nt_writer_finish(w) != 0) {
        fprintf(stderr, "nt-gen: finish failed\n");
        return 1;
    }
    nt_writer_free(w);
    close(fd);
    return fclose(expect) == 0 ? 0 : 1;
}
