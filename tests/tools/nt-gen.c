/* SPDX-License-Identifier: MIT */
/*
 * tests/tools/nt-gen.c - writes a nettrace file with libnettrace's writer: EventSource-style
 * events with names and typed fields (some with stacks) and SampleProfiler ThreadSamples with
 * stacks, on several threads and across sequence points; and, as JSON lines, what it wrote
 * (provider, id, name, thread, fields, stack leaf first), with the runtime-native ThreadSample
 * named and decoded the way TraceEvent's built-in parser shows it (Thread/Sample, Type), and the
 * timestamp. With --reorder the events reach a writer with a 20 ms reorder window out of order:
 * some a little late (it sorts them), two 40 ms late from another capture thread (written late,
 * with their true time and IsSorted clear), as the runtime's re-read events will be. Events are
 * noted lost (nt_writer_note_lost) before each capture thread's first event and now and then
 * after (none of a capture thread that writes no event: TraceEvent counts those nowhere); the total
 * goes to standard output as "lost N". tests/dotnet-traceevent.sh has TraceEvent read the trace and
 * compares. Usage: nt-gen [--reorder] OUT.nettrace EXPECTED.jsonl
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

#define GEN_EVENTS    400
#define GEN_WINDOW_NS (20u * 1000u * 1000u)

static FILE *expect;

static void
gen_json_stack(const uint64_t *stack, uint32_t depth, uint64_t ts)
{
    uint32_t i;

    fprintf(expect, "\"stack\":[");
    for (i = 0; i < depth; i++) {
        fprintf(expect, "%s\"0x%" PRIx64 "\"", i ? "," : "", stack[i]);
    }
    fprintf(expect, "],\"ts\":%" PRIu64 "}\n", ts);
}

/* Events that reach the writer 40 ms (twice the window) after they happened. */
static int
gen_is_late(int i)
{
    return i == 203 || i == 301;
}

/*
 * The order in which --reorder hands the events to the writer, in half-milliseconds after the
 * first: event i happens at 2 * i; every tenth arrives after the next one, every fiftieth 10 ms
 * late, both within the window.
 */
static int
gen_arrival(int i)
{
    return 2 * i + (gen_is_late(i) ? 81 : i % 10 == 3 ? 3 : i % 50 == 25 ? 20 : 0);
}

int
main(int argc, char **argv)
{
    static const char *const texts[] = { "hello", "", "caf\xc3\xa9 \xe2\x82\xac", "line" };
    static struct nt_event events[GEN_EVENTS];
    static uint8_t bufs[GEN_EVENTS][256];
    static int order[GEN_EVENTS];
    struct nt_writer_options opts = { 0 };
    struct nt_writer_stats st;
    struct nt_writer *w = NULL;
    uint32_t meta[4];
    struct nt_sink sink;
    uint64_t ts = nt_clock_now(), stacks[6][24];
    int reorder = argc == 4 && strcmp(argv[1], "--reorder") == 0;
    int fd, i, j, d;

    if (argc != 3 + reorder) {
        fprintf(stderr, "usage: nt-gen [--reorder] OUT.nettrace EXPECTED.jsonl\n");
        return 2;
    }
    argv += reorder;
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
    opts.reorder_window_ns = reorder ? GEN_WINDOW_NS : 0;
    if (nt_writer_new(&opts, &sink, &w) != 0 || nt_writer_define(w, &gen_descs[0], &meta[0]) != 0 ||
        nt_writer_define(w, &gen_descs[1], &meta[1]) != 0 ||
        nt_writer_define(w, &gen_descs[2], &meta[2]) != 0 ||
        nt_writer_define(w, nt_known_event_desc(NT_KNOWN_THREAD_SAMPLE), &meta[3]) != 0) {
        fprintf(stderr, "nt-gen: writer setup failed\n");
        return 1;
    }
    for (i = 0; i < GEN_EVENTS; i++) {
        uint8_t *buf = bufs[i];
        struct nt_payload p;
        struct nt_event ev;
        uint8_t guid[16];
        char g[37];
        int kind = i % 5;
        uint32_t depth = (uint32_t)(1 + i % 24);
        const uint64_t *stack = stacks[i % 6] + (24 - depth);

        memset(&ev, 0, sizeof(ev));
        nt_payload_init(&p, buf, sizeof(bufs[i]));
        ev.thread_id = 1001 + (uint64_t)(i % 4);
        ev.capture_thread_id = reorder && gen_is_late(i) ? 8 : 7;
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
        gen_json_stack(stack, depth, ev.timestamp);
        if (p.err != 0) {
            fprintf(stderr, "nt-gen: payload of event %d does not fit\n", i);
            return 1;
        }
        events[i] = ev;
        /* Arrival order: a stable insertion sort by gen_arrival(), or as they happen. */
        for (j = i; reorder && j > 0 && gen_arrival(order[j - 1]) > gen_arrival(i); j--) {
            order[j] = order[j - 1];
        }
        order[j] = i;
    }
    /* Lost before the first event of capture threads 7 and (with --reorder) 8: a reader starts
     * a thread there. And in the middle of 7's. */
    if (nt_writer_note_lost(w, 7, 5) != 0 || (reorder && nt_writer_note_lost(w, 8, 3) != 0)) {
        fprintf(stderr, "nt-gen: note_lost failed\n");
        return 1;
    }
    for (i = 0; i < GEN_EVENTS; i++) {
        if (i % 40 == 20 && nt_writer_note_lost(w, 7, 2) != 0) {
            fprintf(stderr, "nt-gen: note_lost failed\n");
            return 1;
        }
        if (nt_writer_write(w, &events[order[i]]) != 0) {
            fprintf(stderr, "nt-gen: write failed at event %d\n", order[i]);
            return 1;
        }
    }
    if (nt_writer_finish(w) != 0) {
        fprintf(stderr, "nt-gen: finish failed\n");
        return 1;
    }
    nt_writer_get_stats(w, &st);
    if (st.late != (reorder ? 2u : 0u)) {
        fprintf(stderr, "nt-gen: %" PRIu64 " events written late, not %d\n", st.late,
                reorder ? 2 : 0);
        return 1;
    }
    printf("lost %" PRIu64 "\n", st.lost);
    nt_writer_free(w);
    close(fd);
    return fclose(expect) == 0 ? 0 : 1;
}
