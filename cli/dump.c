/* SPDX-License-Identifier: MIT */
/*
 * cli/dump.c - `pipeprof dump`: prints the events of a nettrace file one per line, or a summary
 * (counts per provider, event id and name) as a text table or JSON. It only reads the trace,
 * streaming from a file or standard input with bounded memory; a malformed trace ends with
 * "pipeprof dump: FILE: offset N: reason" and exit status 1, after the events read so far.
 * Context: the CLI's main thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "nettrace/nettrace.h"

#define PP_DUMP_FIELDS_MAX (64u << 10)

struct pp_dump_count {
    char *provider;
    uint32_t id;
    char *name;
    uint64_t count;
};

struct pp_dump_summary {
    struct pp_dump_count *rows;
    size_t n;
    size_t cap;
    const struct nt_event_desc *last_desc; /* cache: consecutive events share a row */
    size_t last_row;
};

static void
pp_dump_usage(FILE *out)
{
    fprintf(out,
            "usage: pipeprof dump [--summary] [--format text|json] FILE\n"
            "\n"
            "Reads a nettrace file (V4, V5 or V6; FILE '-' reads standard input, e.g. a pipe)\n"
            "and prints its events in file order, one line each:\n"
            "\n"
            "  TIME_MS PROVIDER ID NAME tid=THREAD stack=DEPTH FIELDS\n"
            "\n"
            "  TIME_MS   milliseconds since the trace's sync time, 3 decimals, right-aligned\n"
            "  PROVIDER  provider name ('?' when the event's metadata is missing)\n"
            "  ID        event id (the metadata id when the metadata is missing)\n"
            "  NAME      event name from the metadata; for the runtime's own events, whose\n"
            "            metadata has none, TraceEvent's name (GC/Start); '-' when unknown\n"
            "  THREAD    the thread the event is about (OS thread id)\n"
            "  DEPTH     frames in the event's stack, 0 when it has none\n"
            "  FIELDS    Name=value pairs decoded with the metadata: strings in double\n"
            "            quotes, arrays [a,b], objects {A=1,B=2}, GUIDs 8-4-4-4-12,\n"
            "            booleans true/false; '(N payload bytes)' when the metadata lists\n"
            "            no fields but the event has a payload\n"
            "\n"
            "options:\n"
            "  --summary          print one row per (provider, event id, name) with its count,\n"
            "                     plus the totals, instead of the events\n"
            "  --format text|json output format (default text).\n"
            "                     Events in JSON: one object per line with \"time_ms\",\n"
            "                     \"provider\", \"id\", \"name\", \"thread\", \"sequence\",\n"
            "                     \"stack_depth\", \"payload_size\" and \"fields\" (typed:\n"
            "                     numbers, strings, booleans, arrays, objects; GUIDs as\n"
            "                     strings, DateTime as FILETIME ticks; \"fields_error\": true\n"
            "                     when the payload does not match its metadata;\n"
            "                     \"payload_hex\" when the metadata lists no fields).\n"
            "                     Summary in JSON: an object with \"format_version\",\n"
            "                     \"process_id\", \"sync_time\" (the trace's start,\n"
            "                     UTC, ISO 8601 to the millisecond; null when the\n"
            "                     header's date is invalid), \"events_total\",\n"
            "                     \"lost_events\", \"stacks\" and \"events\": an array of\n"
            "                     {\"provider\", \"id\", \"name\", \"count\"}\n"
            "  -h, --help         show this help\n"
            "\n"
            "Exit status: 0 on success, 1 when the file cannot be read or is malformed (the\n"
            "message gives the byte offset and the reason), 2 on a usage error.\n");
}

/* The event's name: its metadata's, else TraceEvent's name for a runtime event, else "". */
static const char *
pp_dump_event_name(const struct nt_event_desc *d)
{
    const char *known;

    if (d == NULL) {
        return "";
    }
    if (d->name[0] != '\0') {
        return d->name;
    }
    known = nt_runtime_event_name(d->provider, d->event_id);
    return known != NULL ? known : "";
}

static int
pp_dump_count_add(struct pp_dump_summary *s, const struct nt_event *ev)
{
    const char *provider = ev->desc != NULL ? ev->desc->provider : "?";
    const char *name = pp_dump_event_name(ev->desc);
    uint32_t id = ev->desc != NULL ? ev->desc->event_id : ev->metadata_id;
    size_t i;

    if (ev->desc != NULL && ev->desc == s->last_desc) {
        s->rows[s->last_row].count++;
        return 0;
    }
    for (i = 0; i < s->n; i++) {
        if (s->rows[i].id == id && strcmp(s->rows[i].provider, provider) == 0 &&
            strcmp(s->rows[i].name, name) == 0) {
            break;
        }
    }
    if (i == s->n) {
        if (s->n == s->cap) {
            size_t ncap = s->cap != 0 ? s->cap * 2 : 64;
            struct pp_dump_count *nr = realloc(s->rows, ncap * sizeof(*nr));

            if (nr == NULL) {
                return -ENOMEM;
            }
            s->rows = nr;
            s->cap = ncap;
        }
        s->rows[i].provider = strdup(provider);
        s->rows[i].name = strdup(name);
        s->rows[i].id = id;
        s->rows[i].count = 0;
        if (s->rows[i].provider == NULL || s->rows[i].name == NULL) {
            free(s->rows[i].provider);
            free(s->rows[i].name);
            return -ENOMEM;
        }
        s->n++;
    }
    s->rows[i].count++;
    s->last_desc = ev->desc;
    s->last_row = i;
    return 0;
}

static int
pp_dump_count_cmp(const void *a, const void *b)
{
    const struct pp_dump_count *x = a, *y = b;
    int c = strcmp(x->provider, y->provider);

    if (c != 0) {
        return c;
    }
    if (x->id != y->id) {
        return x->id < y->id ? -1 : 1;
    }
    return strcmp(x->name, y->name);
}

static void
pp_dump_summary_free(struct pp_dump_summary *s)
{
    size_t i;

    for (i = 0; i < s->n; i++) {
        free(s->rows[i].provider);
        free(s->rows[i].name);
    }
    free(s->rows);
}

/*
 * The trace's sync time (its header's SYSTEMTIME, UTC, to the millisecond) as ISO 8601 in out.
 * Returns 0, or -EINVAL when the header holds no valid date (out is then "invalid").
 */
static int
pp_dump_sync_time(const struct nt_trace_info *info, char *out, size_t size)
{
    const int16_t *t = info->sync_time;
    int64_t unix_ns;

    if (nt_trace_info_unix_ns(info, &unix_ns) != 0) {
        snprintf(out, size, "invalid");
        return -EINVAL;
    }
    snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", t[0], t[1], t[3], t[4], t[5], t[6],
             t[7]);
    return 0;
}

static int
pp_dump_print_json(const struct pp_dump_summary *s, const struct nt_trace_info *info,
                   const struct nt_reader_stats *st)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *events = NULL;
    char *text = NULL, sync[64];
    size_t i;
    int err = -ENOMEM;

    if (root == NULL) {
        goto out;
    }
    if (cJSON_AddNumberToObject(root, "format_version", info->format_version) == NULL ||
        cJSON_AddNumberToObject(root, "process_id", info->process_id) == NULL) {
        goto out;
    }
    if (pp_dump_sync_time(info, sync, sizeof(sync)) == 0
                ? cJSON_AddStringToObject(root, "sync_time", sync) == NULL
                : cJSON_AddNullToObject(root, "sync_time") == NULL) {
        goto out;
    }
    if (cJSON_AddNumberToObject(root, "events_total", (double)st->events) == NULL ||
        cJSON_AddNumberToObject(root, "lost_events", (double)st->lost_events) == NULL ||
        cJSON_AddNumberToObject(root, "stacks", (double)st->stacks) == NULL) {
        goto out;
    }
    events = cJSON_AddArrayToObject(root, "events");
    if (events == NULL) {
        goto out;
    }
    for (i = 0; i < s->n; i++) {
        cJSON *row = cJSON_CreateObject();

        if (row == NULL) {
            goto out;
        }
        cJSON_AddItemToArray(events, row);
        if (cJSON_AddStringToObject(row, "provider", s->rows[i].provider) == NULL ||
            cJSON_AddNumberToObject(row, "id", s->rows[i].id) == NULL ||
            cJSON_AddStringToObject(row, "name", s->rows[i].name) == NULL ||
            cJSON_AddNumberToObject(row, "count", (double)s->rows[i].count) == NULL) {
            goto out;
        }
    }
    text = cJSON_Print(root);
    if (text == NULL) {
        goto out;
    }
    printf("%s\n", text);
    err = 0;
out:
    cJSON_free(text);
    cJSON_Delete(root);
    return err;
}

static void
pp_dump_print_text(const struct pp_dump_summary *s, const struct nt_trace_info *info,
                   const struct nt_reader_stats *st)
{
    char sync[64];
    size_t i;

    (void)pp_dump_sync_time(info, sync, sizeof(sync));
    printf("format version %u, process %u, %" PRIu64 " events, %" PRIu64 " lost, %" PRIu64
           " stacks\nsync time %s\n\n",
           info->format_version, info->process_id, st->events, st->lost_events, st->stacks, sync);
    printf("%10s %6s  %-44s %s\n", "COUNT", "ID", "PROVIDER", "NAME");
    for (i = 0; i < s->n; i++) {
        printf("%10" PRIu64 " %6u  %-44s %s\n", s->rows[i].count, s->rows[i].id,
               s->rows[i].provider, s->rows[i].name[0] != '\0' ? s->rows[i].name : "-");
    }
}

static void
pp_dump_print_event(const struct nt_event *ev, const struct nt_trace_info *info, char *fields,
                    size_t cap)
{
    double ms = (double)(int64_t)(ev->timestamp - info->sync_time_ticks) * 1000.0 /
                (double)info->ticks_per_second;
    const struct nt_event_desc *d = ev->desc;

    fields[0] = '\0';
    if (d != NULL && d->field_count > 0) {
        if (nt_payload_format(d, ev->payload, ev->payload_size, fields, cap) < 0) {
            snprintf(fields, cap, "(payload does not match its metadata: %u bytes)",
                     ev->payload_size);
        }
    } else if (ev->payload_size > 0) {
        snprintf(fields, cap, "(%u payload bytes)", ev->payload_size);
    }
    printf("%12.3f %s %u %s tid=%" PRIu64 " stack=%u %s\n", ms, d != NULL ? d->provider : "?",
           d != NULL ? d->event_id : ev->metadata_id,
           pp_dump_event_name(d)[0] != '\0' ? pp_dump_event_name(d) : "-", ev->thread_id,
           ev->stack_depth, fields);
}

void
pp_json_text(FILE *out, const char *s, size_t len)
{
    size_t i;

    fputc('"', out);
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '"' || c == '\\') {
            fprintf(out, "\\%c", c);
        } else if (c < 0x20) {
            fprintf(out, "\\u%04x", c);
        } else {
            fputc(c, out);
        }
    }
    fputc('"', out);
}

void
pp_json_string(FILE *out, const char *s)
{
    pp_json_text(out, s != NULL ? s : "", s != NULL ? strlen(s) : 0);
}

static void
pp_dump_json_utf16(FILE *out, const uint8_t *p, size_t len)
{
    char small[512];
    size_t need = nt_utf16_to_utf8(p, len, NULL, 0) + 1;
    char *s = need <= sizeof(small) ? small : malloc(need);

    if (s == NULL) {
        fputs("null", out);
        return;
    }
    nt_utf16_to_utf8(p, len, s, need);
    pp_json_text(out, s, strlen(s));
    if (s != small) {
        free(s);
    }
}

/*
 * JSON writer over nt_payload_decode()'s depth-first stream of values: a stack of open arrays
 * and objects, each with the number of elements still to come, closes each container after its
 * last element.
 */
struct pp_dump_json {
    FILE *out;
    struct {
        uint32_t remaining;
        int is_array;
        int first;
    } open[16];
    int depth;
};

static void
pp_dump_json_close_done(struct pp_dump_json *j)
{
    while (j->depth > 1 && j->open[j->depth - 1].remaining == 0) { /* [0]: the fields */
        fputc(j->open[j->depth - 1].is_array ? ']' : '}', j->out);
        j->depth--;
    }
}

static int
pp_dump_json_value(void *ctx, const struct nt_value *v)
{
    struct pp_dump_json *j = ctx;
    FILE *out = j->out;
    int in_array = j->depth > 0 && j->open[j->depth - 1].is_array;
    char guid[37];

    if (j->depth > 0) {
        if (!j->open[j->depth - 1].first) {
            fputc(',', out);
        }
        j->open[j->depth - 1].first = 0;
        j->open[j->depth - 1].remaining--;
    }
    if (!in_array) {
        pp_json_text(out, v->field != NULL && v->field->name != NULL ? v->field->name : "",
                     v->field != NULL && v->field->name != NULL ? strlen(v->field->name) : 0);
        fputc(':', out);
    }
    switch (v->type) {
    case NT_TYPE_ARRAY:
    case NT_TYPE_FIXED_ARRAY:
    case NT_TYPE_OBJECT:
        if (j->depth >= (int)PP_ARRAY_SIZE(j->open)) {
            return -E2BIG;
        }
        fputc(v->type == NT_TYPE_OBJECT ? '{' : '[', out);
        j->open[j->depth].remaining = v->count;
        j->open[j->depth].is_array = v->type != NT_TYPE_OBJECT;
        j->open[j->depth].first = 1;
        j->depth++;
        break;
    case NT_TYPE_BOOLEAN:
    case NT_TYPE_BOOLEAN8:
        fputs(v->i ? "true" : "false", out);
        break;
    case NT_TYPE_CHAR:
    case NT_TYPE_STRING:
        pp_dump_json_utf16(out, v->data, v->size);
        break;
    case NT_TYPE_SBYTE:
    case NT_TYPE_INT16:
    case NT_TYPE_INT32:
    case NT_TYPE_INT64:
    case NT_TYPE_VARINT:
        fprintf(out, "%" PRId64, v->i);
        break;
    case NT_TYPE_SINGLE:
        fprintf(out, "%.9g", v->f);
        break;
    case NT_TYPE_DOUBLE:
        fprintf(out, "%.17g", v->f);
        break;
    case NT_TYPE_GUID:
        if (v->size == 16) {
            nt_guid_format(v->data, guid);
            pp_json_text(out, guid, strlen(guid));
        } else {
            fputs("null", out);
        }
        break;
    case NT_TYPE_DECIMAL:
    case NT_TYPE_EMPTY:
        fputs("null", out);
        break;
    default: /* unsigned integers, DATETIME (FILETIME ticks), UTF-8 code units */
        fprintf(out, "%" PRIu64, v->u);
        break;
    }
    pp_dump_json_close_done(j);
    return 0;
}

/* One JSON object per line: time, provider, id, name, thread, stack depth, typed fields. */
static void
pp_dump_print_event_json(const struct nt_event *ev, const struct nt_trace_info *info)
{
    double ms = (double)(int64_t)(ev->timestamp - info->sync_time_ticks) * 1000.0 /
                (double)info->ticks_per_second;
    const struct nt_event_desc *d = ev->desc;
    struct pp_dump_json j = { stdout, { { 0, 0, 0 } }, 1 };
    const char *provider = d != NULL ? d->provider : "?";
    const char *name = pp_dump_event_name(d);

    printf("{\"time_ms\":%.6f,\"provider\":", ms);
    pp_json_text(stdout, provider, strlen(provider));
    printf(",\"id\":%u,\"name\":", d != NULL ? d->event_id : ev->metadata_id);
    pp_json_text(stdout, name, strlen(name));
    printf(",\"thread\":%" PRIu64 ",\"sequence\":%u,\"stack_depth\":%u,\"payload_size\":%u,",
           ev->thread_id, ev->sequence, ev->stack_depth, ev->payload_size);
    if ((d == NULL || d->field_count == 0) && ev->payload_size > 0) {
        /* No field metadata (runtime events; EventSource byte[] and TraceLogging arrays, which
         * the runtime does not describe): the raw bytes, so nothing is hidden. */
        uint32_t k;

        printf("\"payload_hex\":\"");
        for (k = 0; k < ev->payload_size; k++) {
            printf("%02x", ev->payload[k]);
        }
        printf("\",");
    }
    printf("\"fields\":{");
    j.open[0].remaining = d != NULL ? d->field_count : 0;
    j.open[0].first = 1;
    if (d != NULL && d->field_count > 0 &&
        nt_payload_decode(d, ev->payload, ev->payload_size, pp_dump_json_value, &j) != 0) {
        /* Close what was opened; the flag tells a consumer the fields are incomplete. */
        while (j.depth > 1) {
            fputc(j.open[--j.depth].is_array ? ']' : '}', stdout);
        }
        printf("},\"fields_error\":true}\n");
        return;
    }
    printf("}}\n");
}

int
pp_cmd_dump(int argc, char **argv)
{
    struct pp_dump_summary sum = { NULL, 0, 0, NULL, 0 };
    struct nt_reader *r = NULL;
    struct nt_reader_stats st;
    struct nt_source src;
    struct nt_event ev;
    const char *path = NULL;
    char *fields = NULL;
    int summary = 0;
    int json = 0;
    int status = 1;
    int fd = -1;
    int err;
    int i;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            pp_dump_usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--summary") == 0) {
            summary = 1;
        } else if (strcmp(argv[i], "--format") == 0 || strncmp(argv[i], "--format=", 9) == 0) {
            const char *f = argv[i][8] == '=' ? argv[i] + 9 : (i + 1 < argc ? argv[++i] : "");

            if (strcmp(f, "json") == 0) {
                json = 1;
            } else if (strcmp(f, "text") == 0) {
                json = 0;
            } else {
                fprintf(stderr, "pipeprof dump: unknown format '%s' (text or json)\n", f);
                return 2;
            }
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "pipeprof dump: unknown option '%s'\n", argv[i]);
            pp_dump_usage(stderr);
            return 2;
        } else if (path == NULL) {
            path = argv[i];
        } else {
            fprintf(stderr, "pipeprof dump: more than one FILE\n");
            return 2;
        }
    }
    if (path == NULL) {
        pp_dump_usage(stderr);
        return 2;
    }
    if (strcmp(path, "-") == 0) {
        fd = STDIN_FILENO;
    } else {
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fprintf(stderr, "pipeprof dump: %s: %s\n", path, strerror(errno));
            return 1;
        }
    }
    fields = malloc(PP_DUMP_FIELDS_MAX);
    if (fields == NULL) {
        fprintf(stderr, "pipeprof dump: out of memory\n");
        goto out;
    }
    nt_source_fd(&src, &fd);
    err = nt_reader_new(&src, NULL, &r);
    while (err == 0 && (err = nt_reader_next(r, &ev)) == 1) {
        err = 0;
        if (summary) {
            err = pp_dump_count_add(&sum, &ev);
        } else if (json) {
            pp_dump_print_event_json(&ev, nt_reader_info(r));
        } else {
            pp_dump_print_event(&ev, nt_reader_info(r), fields, PP_DUMP_FIELDS_MAX);
        }
    }
    if (err < 0) {
        struct nt_reader_error e = { 0, NULL, 0 };

        fflush(stdout);
        if (r != NULL) {
            nt_reader_get_error(r, &e);
        }
        fprintf(stderr, "pipeprof dump: %s: offset %" PRIu64 ": %s\n", path, e.offset,
                e.reason != NULL ? e.reason : strerror(-err));
        goto out;
    }
    if (summary) {
        nt_reader_get_stats(r, &st);
        if (sum.n > 1) {
            qsort(sum.rows, sum.n, sizeof(*sum.rows), pp_dump_count_cmp);
        }
        if (json) {
            if (pp_dump_print_json(&sum, nt_reader_info(r), &st) != 0) {
                fprintf(stderr, "pipeprof dump: out of memory\n");
                goto out;
            }
        } else {
            pp_dump_print_text(&sum, nt_reader_info(r), &st);
        }
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "pipeprof dump: writing the output: %s\n", strerror(errno));
        goto out;
    }
    status = 0;
out:
    pp_dump_summary_free(&sum);
    nt_reader_free(r);
    free(fields);
    if (fd > STDIN_FILENO) {
        close(fd);
    }
    return status;
}
