/* SPDX-License-Identifier: MIT */
/*
 * tests/test-nettrace-fixtures.c - the reader against traces written by real .NET runtimes
 * (shared/fixtures/nettrace) and TraceEvent's reading of them (*.baseline.txt): per-provider
 * totals, counts and first-occurrence field values of events named by their metadata, sample
 * counts and kinds the fixture notes state, and `pipeprof dump` on the same files (JSON summary
 * against the reader, pipe input against file input, the error message on a truncated file).
 * When the shared fixtures are absent every case skips loudly.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "nettrace/nettrace.h"
#include "tests/test.h"

#define FX_30    "eventpipe-dotnetcore3.0-win-x64-objver4.nettrace"
#define FX_50    "eventpipe-dotnetcore5.0-win-x64-arraytypes.nettrace"
#define FX_60    "eventpipe-dotnetcore6.0-win-x64-executioncheckpoints.nettrace"
#define FX_MIXED "mixed_managed_external_samples.nettrace"
#define FX_MANGD "only_managed_samples.nettrace"

#define FX_MAX_ROWS   256
#define FX_MAX_FIELDS 32

struct fx_field {
    char name[64];
    char value[1024];
};

struct fx_row {
    char provider[128];
    uint32_t id;
    char name[128];
    uint64_t count;
    struct fx_field fields[FX_MAX_FIELDS]; /* first occurrence, normalised */
    unsigned nfields;
};

struct fx_tally {
    struct fx_row rows[FX_MAX_ROWS];
    unsigned nrows;
    struct nt_reader_stats stats;
    struct nt_trace_info info;
    uint64_t samples[3];    /* ThreadSample by Type 0, 1, 2 */
    uint64_t samples_other; /* any other Type */
    uint32_t sample_max_depth;
    uint64_t samples_without_stack;
    int first_sample_type;
};

static const char *
fx_path(const char *file)
{
    static char buf[4096];
    const char *dir = test_source_path("../shared/fixtures/nettrace");
    struct stat st;

    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        test_skip("the shared fixtures directory %s is absent: real-trace checks NOT run", dir);
    }
    snprintf(buf, sizeof(buf), "%s/%s", dir, file);
    if (stat(buf, &st) != 0) {
        test_skip("fixture %s is absent: real-trace check NOT run", buf);
    }
    return buf;
}

/* Collects the top-level values of one event as normalised strings (decode callback). */
struct fx_collect {
    struct fx_row *row;
};

static void
fx_append(char *dst, size_t cap, const char *s)
{
    size_t n = strlen(dst);

    snprintf(dst + n, cap - n, "%s", s);
}

static int
fx_collect_value(void *ctx, const struct nt_value *v)
{
    struct fx_collect *c = ctx;
    struct fx_row *row = c->row;
    struct fx_field *f;
    char buf[1024];

    if (v->depth == 0) {
        if (row->nfields == FX_MAX_FIELDS) {
            return 0;
        }
        f = &row->fields[row->nfields++];
        snprintf(f->name, sizeof(f->name), "%s", v->field->name);
        f->value[0] = '\0';
        if (v->type == NT_TYPE_ARRAY && v->field->element_type != NT_TYPE_CHAR) {
            fx_append(f->value, sizeof(f->value), "[");
        }
    } else {
        if (row->nfields == 0) {
            return 0;
        }
        f = &row->fields[row->nfields - 1];
    }
    buf[0] = '\0';
    switch (v->type) {
    case NT_TYPE_ARRAY:
    case NT_TYPE_OBJECT:
        return 0;
    case NT_TYPE_STRING:
        nt_utf16_to_utf8(v->data, v->size, buf, sizeof(buf));
        break;
    case NT_TYPE_CHAR:
        nt_utf16_to_utf8(v->data, v->size, buf, sizeof(buf)); /* "" for a NUL unit */
        break;
    case NT_TYPE_SBYTE:
    case NT_TYPE_INT16:
    case NT_TYPE_INT32:
    case NT_TYPE_INT64:
    case NT_TYPE_BOOLEAN:
        snprintf(buf, sizeof(buf), "%lld", (long long)v->i);
        break;
    case NT_TYPE_SINGLE:
    case NT_TYPE_DOUBLE:
        snprintf(buf, sizeof(buf), "%.15g", v->f);
        break;
    default:
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v->u);
        break;
    }
    if (v->depth > 0 && v->field->element_type != NT_TYPE_CHAR) {
        if (v->index > 0) {
            fx_append(f->value, sizeof(f->value), ",");
        }
        fx_append(f->value, sizeof(f->value), buf);
        if (v->index + 1 == v->field->fixed_count || v->depth == 1) {
            /* closing bracket added by the caller after the walk */
        }
    } else {
        fx_append(f->value, sizeof(f->value), buf);
    }
    return 0;
}

static void
fx_close_arrays(struct fx_row *row)
{
    unsigned i;

    for (i = 0; i < row->nfields; i++) {
        if (row->fields[i].value[0] == '[') {
            fx_append(row->fields[i].value, sizeof(row->fields[i].value), "]");
        }
    }
}

static void
fx_read(const char *path, struct fx_tally *t)
{
    struct nt_source src;
    struct nt_reader *r = NULL;
    struct nt_event ev;
    int fd = open(path, O_RDONLY);
    int rc;

    memset(t, 0, sizeof(*t));
    t->first_sample_type = -1;
    ASSERT_TRUE(fd >= 0);
    nt_source_fd(&src, &fd);
    rc = nt_reader_new(&src, NULL, &r);
    while (rc == 0 && (rc = nt_reader_next(r, &ev)) == 1) {
        const char *provider = ev.desc != NULL ? ev.desc->provider : "?";
        const char *name = ev.desc != NULL ? ev.desc->name : "";
        uint32_t id = ev.desc != NULL ? ev.desc->event_id : ev.metadata_id;
        unsigned i;

        rc = 0;
        for (i = 0; i < t->nrows; i++) {
            if (t->rows[i].id == id && strcmp(t->rows[i].provider, provider) == 0 &&
                strcmp(t->rows[i].name, name) == 0) {
                break;
            }
        }
        if (i == t->nrows) {
            struct fx_collect c;

            ASSERT_TRUE(t->nrows < FX_MAX_ROWS);
            snprintf(t->rows[i].provider, sizeof(t->rows[i].provider), "%s", provider);
            snprintf(t->rows[i].name, sizeof(t->rows[i].name), "%s", name);
            t->rows[i].id = id;
            c.row = &t->rows[i];
            if (ev.desc != NULL) {
                ASSERT_OK(nt_payload_decode(ev.desc, ev.payload, ev.payload_size, fx_collect_value,
                                            &c));
                fx_close_arrays(&t->rows[i]);
            }
            t->nrows++;
        }
        t->rows[i].count++;
        if (strcmp(provider, NT_PROVIDER_SAMPLE_PROFILER) == 0 && id == 0) {
            int32_t type;

            ASSERT_TRUE(ev.payload_size >= 4);
            memcpy(&type, ev.payload, 4);
            if (type >= 0 && type <= 2) {
                t->samples[type]++;
            } else {
                t->samples_other++;
            }
            if (t->first_sample_type < 0) {
                t->first_sample_type = type;
            }
            if (ev.stack_depth > t->sample_max_depth) {
                t->sample_max_depth = ev.stack_depth;
            }
            t->samples_without_stack += ev.stack_depth == 0;
        }
    }
    if (rc != 0) {
        struct nt_reader_error e = { 0, NULL, 0 };

        if (r != NULL) {
            nt_reader_get_error(r, &e);
        }
        test_fail(__FILE__, __LINE__, "%s: %d at offset %llu: %s", path, rc,
                  (unsigned long long)e.offset, e.reason != NULL ? e.reason : "-");
    }
    nt_reader_get_stats(r, &t->stats);
    t->info = *nt_reader_info(r);
    nt_reader_free(r);
    close(fd);
}

/* TraceLog folds these into its method tables; they are not in the baselines (README). */
static int
fx_folded(const char *provider, uint32_t id)
{
    return (strcmp(provider, NT_PROVIDER_RUNDOWN) == 0 && (id == 144 || id == 150)) ||
           (strcmp(provider, NT_PROVIDER_RUNTIME) == 0 && id == 190);
}

/* ------------------------------------------------------------------------------------------ */
/* Baselines                                                                                  */
/* ------------------------------------------------------------------------------------------ */

struct fx_bline {
    char provider[128];
    char event[256];
    uint64_t count;
    char *attrs; /* the <Event .../> text */
};

struct fx_baseline {
    struct fx_bline lines[128];
    unsigned n;
    uint8_t *text;
};

static void
fx_baseline_load(const char *trace_path, struct fx_baseline *b)
{
    char path[4200];
    size_t len = 0;
    char *p;

    memset(b, 0, sizeof(*b));
    snprintf(path, sizeof(path), "%s.baseline.txt", trace_path);
    b->text = test_read_file(path, &len);
    ASSERT_TRUE(b->text != NULL);
    b->text[len] = '\0';
    p = (char *)b->text;
    if (memcmp(p, "\xEF\xBB\xBF", 3) == 0) {
        p += 3;
    }
    while (*p != '\0') {
        char *eol = strchr(p, '\n');
        char *slash = strchr(p, '/');
        char *comma;
        struct fx_bline *l;

        if (eol != NULL) {
            *eol = '\0';
        }
        comma = strstr(p, ", ");
        if (slash != NULL && comma != NULL && slash < comma) {
            ASSERT_TRUE(b->n < PP_ARRAY_SIZE(b->lines));
            l = &b->lines[b->n++];
            snprintf(l->provider, sizeof(l->provider), "%.*s", (int)(slash - p), p);
            snprintf(l->event, sizeof(l->event), "%.*s", (int)(comma - slash - 1), slash + 1);
            l->count = strtoull(comma + 2, NULL, 10);
            l->attrs = strstr(comma + 2, "<Event");
            ASSERT_TRUE(l->attrs != NULL);
        }
        if (eol == NULL) {
            break;
        }
        p = eol + 1;
    }
    ASSERT_TRUE(b->n > 0);
}

/* The attribute key="value" of a baseline line, XML-unescaped, numbers normalised. */
static int
fx_attr(const char *attrs, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    const char *p = attrs;

    while ((p = strstr(p, key)) != NULL) {
        const char *q = p + klen;

        if (p > attrs && p[-1] == ' ') {
            while (*q == ' ') {
                q++;
            }
            if (*q == '=') {
                const char *v;
                size_t o = 0;
                int numeric = 1;
                size_t i;

                q++;
                while (*q == ' ') {
                    q++;
                }
                if (*q != '"') {
                    return -1;
                }
                v = ++q;
                while (*v != '\0' && *v != '"' && o + 1 < cap) {
                    static const char *const ents[][2] = {
                        { "&quot;", "\"" }, { "&amp;", "&" },  { "&lt;", "<" },
                        { "&gt;", ">" },    { "&apos;", "'" },
                    };
                    size_t e;

                    for (e = 0; e < PP_ARRAY_SIZE(ents); e++) {
                        if (strncmp(v, ents[e][0], strlen(ents[e][0])) == 0) {
                            break;
                        }
                    }
                    if (e < PP_ARRAY_SIZE(ents)) {
                        out[o++] = ents[e][1][0];
                        v += strlen(ents[e][0]);
                    } else {
                        out[o++] = *v++;
                    }
                }
                out[o] = '\0';
                /* "2,033,417,279" -> "2033417279" (TraceEvent's thousands separators) */
                for (i = 0; out[i] != '\0'; i++) {
                    if (!((out[i] >= '0' && out[i] <= '9') || out[i] == ',' ||
                          (i == 0 && out[i] == '-'))) {
                        numeric = 0;
                    }
                }
                if (numeric && o > 0) {
                    size_t w = 0;

                    for (i = 0; out[i] != '\0'; i++) {
                        if (out[i] != ',') {
                            out[w++] = out[i];
                        }
                    }
                    out[w] = '\0';
                } else if (strncmp(out, "0x", 2) == 0) {
                    snprintf(out, cap, "%llu", strtoull(out + 2, NULL, 16));
                }
                return 0;
            }
        }
        p += klen;
    }
    return -1;
}

static const char *const fx_baselined[] = { FX_30, FX_50, FX_60 };

TEST(provider_totals_match_baselines)
{
    size_t f;

    for (f = 0; f < PP_ARRAY_SIZE(fx_baselined); f++) {
        const char *path = fx_path(fx_baselined[f]);
        static struct fx_tally t;
        static struct fx_baseline b;
        unsigned i, j;

        fx_read(path, &t);
        fx_baseline_load(path, &b);
        /* every provider of either side, once */
        for (i = 0; i < b.n + t.nrows; i++) {
            const char *prov = i < b.n ? b.lines[i].provider : t.rows[i - b.n].provider;
            uint64_t want = 0, got = 0;

            for (j = 0; j < b.n; j++) {
                want += strcmp(b.lines[j].provider, prov) == 0 ? b.lines[j].count : 0;
            }
            for (j = 0; j < t.nrows; j++) {
                if (strcmp(t.rows[j].provider, prov) == 0 &&
                    !fx_folded(t.rows[j].provider, t.rows[j].id)) {
                    got += t.rows[j].count;
                }
            }
            if (want != got) {
                test_fail(__FILE__, __LINE__, "%s: provider %s: baseline %llu, reader %llu",
                          fx_baselined[f], prov, (unsigned long long)want, (unsigned long long)got);
            }
        }
        ASSERT_U64_EQ(t.stats.lost_events, 0);
        free(b.text);
    }
}

TEST(named_events_match_baselines)
{
    unsigned checked_events = 0, checked_fields = 0;
    size_t f;

    for (f = 0; f < PP_ARRAY_SIZE(fx_baselined); f++) {
        const char *path = fx_path(fx_baselined[f]);
        static struct fx_tally t;
        static struct fx_baseline b;
        unsigned i, j, k;

        fx_read(path, &t);
        fx_baseline_load(path, &b);
        for (i = 0; i < t.nrows; i++) {
            const struct fx_row *row = &t.rows[i];
            size_t nlen = strlen(row->name);
            const struct fx_bline *first = NULL;
            uint64_t want = 0;

            if (nlen == 0) {
                continue; /* runtime events: TraceEvent names them from its manifests */
            }
            for (j = 0; j < b.n; j++) {
                const char *ev = b.lines[j].event;

                if (strcmp(b.lines[j].provider, row->provider) == 0 &&
                    strncmp(ev, row->name, nlen) == 0 && (ev[nlen] == '\0' || ev[nlen] == '/')) {
                    want += b.lines[j].count;
                    if (first == NULL) {
                        first = &b.lines[j];
                    }
                }
            }
            if (first == NULL) {
                test_fail(__FILE__, __LINE__, "%s: %s/%s is not in the baseline", fx_baselined[f],
                          row->provider, row->name);
            }
            ASSERT_U64_EQ(row->count, want);
            checked_events++;
            for (k = 0; k < row->nfields; k++) {
                char value[1024];

                if (fx_attr(first->attrs, row->fields[k].name, value, sizeof(value)) != 0) {
                    continue; /* TraceEvent did not print this field */
                }
                if (strcmp(value, row->fields[k].value) != 0) {
                    test_fail(__FILE__, __LINE__,
                              "%s: %s/%s field %s: baseline \"%s\", reader \"%s\"", fx_baselined[f],
                              row->provider, row->name, row->fields[k].name, value,
                              row->fields[k].value);
                }
                checked_fields++;
            }
        }
        free(b.text);
    }
    /* ProcessInfo and TestEvent1..3 with their arrays, at least */
    ASSERT_TRUE(checked_events >= 4);
    ASSERT_TRUE(checked_fields >= 8);
}

TEST(sample_profiler_samples)
{
    static struct fx_tally t;

    /* README: 35161 SampleProfiler samples; baseline: the first one is Type="External" (1) */
    fx_read(fx_path(FX_30), &t);
    ASSERT_U64_EQ(t.samples[0] + t.samples[1] + t.samples[2] + t.samples_other, 35161);
    ASSERT_EQ(t.first_sample_type, 1);

    /* format notes 12: 6331 ThreadSamples, Type 2 (3904) or 1 (2427), stacks <= 9 frames */
    fx_read(fx_path(FX_MIXED), &t);
    ASSERT_U64_EQ(t.samples[2], 3904);
    ASSERT_U64_EQ(t.samples[1], 2427);
    ASSERT_U64_EQ(t.samples[0] + t.samples_other, 0);
    ASSERT_TRUE(t.sample_max_depth <= 9 && t.sample_max_depth > 0);
    ASSERT_U64_EQ(t.stats.lost_events, 0);
    ASSERT_EQ(t.info.ticks_per_second, 1000000000);

    /* README: managed samples only */
    fx_read(fx_path(FX_MANGD), &t);
    ASSERT_TRUE(t.samples[2] > 0);
    ASSERT_U64_EQ(t.samples[0] + t.samples[1] + t.samples_other, 0);
}

TEST(execution_checkpoints_byte_facts)
{
    static struct fx_tally t;
    static const int16_t when[8] = { 2021, 6, 3, 9, 9, 48, 25, 902 };

    /* format notes 12: the 582-byte trace decoded byte by byte */
    fx_read(fx_path(FX_60), &t);
    ASSERT_EQ(t.info.format_version, 4);
    ASSERT_EQ(t.info.process_id, 9832);
    ASSERT_EQ(t.info.number_of_processors, 8);
    ASSERT_U64_EQ(t.info.ticks_per_second, 10000000);
    ASSERT_EQ(t.info.pointer_size, 8);
    ASSERT_EQ(t.info.expected_cpu_sampling_rate, 1000000);
    ASSERT_EQ(t.info.sync_time[0], when[0]);
    ASSERT_EQ(t.info.sync_time[1], when[1]);
    ASSERT_EQ(t.info.sync_time[3], when[3]);
    ASSERT_EQ(t.info.sync_time[4], when[4]);
    ASSERT_EQ(t.info.sync_time[5], when[5]);
    ASSERT_EQ(t.info.sync_time[6], when[6]);
    ASSERT_EQ(t.info.sync_time[7], when[7]);
    ASSERT_EQ(t.nrows, 1);
    ASSERT_STR_EQ(t.rows[0].provider, NT_PROVIDER_RUNDOWN);
    ASSERT_EQ(t.rows[0].id, 300);
    ASSERT_STR_EQ(t.rows[0].name, "");
    ASSERT_U64_EQ(t.rows[0].count, 3);
    ASSERT_U64_EQ(t.stats.bytes, 582);
    ASSERT_U64_EQ(t.stats.metadata, 1);
    ASSERT_U64_EQ(t.stats.stacks, 1);
    ASSERT_U64_EQ(t.stats.sequence_points, 1);
    ASSERT_U64_EQ(t.stats.blocks, 4);
}

/* ------------------------------------------------------------------------------------------ */
/* pipeprof dump                                                                              */
/* ------------------------------------------------------------------------------------------ */

static const char *
fx_pipeprof(void)
{
    static char buf[4096];
    const char *bin = getenv("PP_BINARY_DIR");

    snprintf(buf, sizeof(buf), "%s/bin/pipeprof", bin != NULL ? bin : "build");
    if (access(buf, X_OK) != 0) {
        test_fail(__FILE__, __LINE__, "%s is not built", buf);
    }
    return buf;
}

/* Runs a shell command; returns its stdout (malloc'd) and stores the exit status. */
static char *
fx_run(const char *cmd, int *status)
{
    FILE *f = popen(cmd, "r");
    char *out = NULL;
    size_t n = 0, cap = 0;
    int st;

    ASSERT_TRUE(f != NULL);
    for (;;) {
        size_t got;

        if (cap - n < 65536) {
            cap = cap != 0 ? cap * 2 : 1 << 20;
            out = realloc(out, cap);
            ASSERT_TRUE(out != NULL);
        }
        got = fread(out + n, 1, cap - n - 1, f);
        if (got == 0) {
            break;
        }
        n += got;
    }
    out[n] = '\0';
    st = pclose(f);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

TEST(dump_summary_json_matches_reader)
{
    static const char *const files[] = { FX_50, FX_MIXED, FX_60 };
    size_t f;

    for (f = 0; f < PP_ARRAY_SIZE(files); f++) {
        const char *path = fx_path(files[f]);
        static struct fx_tally t;
        char cmd[8400];
        cJSON *root, *events, *row;
        uint64_t sum = 0;
        unsigned matched = 0;
        char *out;
        int status;

        fx_read(path, &t);
        snprintf(cmd, sizeof(cmd), "'%s' dump --summary --format json '%s'", fx_pipeprof(), path);
        out = fx_run(cmd, &status);
        ASSERT_EQ(status, 0);
        root = cJSON_Parse(out);
        ASSERT_TRUE(root != NULL);
        ASSERT_EQ(cJSON_GetObjectItem(root, "format_version")->valuedouble, t.info.format_version);
        ASSERT_EQ(cJSON_GetObjectItem(root, "process_id")->valuedouble, t.info.process_id);
        ASSERT_U64_EQ(cJSON_GetObjectItem(root, "events_total")->valuedouble, t.stats.events);
        ASSERT_U64_EQ(cJSON_GetObjectItem(root, "lost_events")->valuedouble, t.stats.lost_events);
        ASSERT_U64_EQ(cJSON_GetObjectItem(root, "stacks")->valuedouble, t.stats.stacks);
        events = cJSON_GetObjectItem(root, "events");
        ASSERT_TRUE(cJSON_IsArray(events));
        ASSERT_EQ(cJSON_GetArraySize(events), t.nrows);
        cJSON_ArrayForEach(row, events)
        {
            const char *prov = cJSON_GetStringValue(cJSON_GetObjectItem(row, "provider"));
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(row, "name"));
            double id = cJSON_GetObjectItem(row, "id")->valuedouble;
            double count = cJSON_GetObjectItem(row, "count")->valuedouble;
            unsigned i;

            ASSERT_TRUE(prov != NULL && name != NULL);
            for (i = 0; i < t.nrows; i++) {
                /* dump names the runtime's own events as TraceEvent does; the reader does not */
                const char *known = nt_runtime_event_name(t.rows[i].provider, t.rows[i].id);
                const char *want =
                        t.rows[i].name[0] != '\0' || known == NULL ? t.rows[i].name : known;

                if (t.rows[i].id == id && strcmp(t.rows[i].provider, prov) == 0 &&
                    strcmp(want, name) == 0) {
                    ASSERT_U64_EQ(count, t.rows[i].count);
                    matched++;
                    break;
                }
            }
            sum += (uint64_t)count;
        }
        ASSERT_EQ(matched, t.nrows);
        ASSERT_U64_EQ(sum, t.stats.events);
        cJSON_Delete(root);
        free(out);
    }
}

TEST(dump_reads_a_pipe_like_a_file)
{
    static const char *const modes[] = { "", "--summary", "--summary --format json" };
    const char *path = fx_path(FX_50);
    size_t m;

    for (m = 0; m < PP_ARRAY_SIZE(modes); m++) {
        char cmd[8400];
        char *from_file, *from_pipe;
        int s1, s2;

        snprintf(cmd, sizeof(cmd), "'%s' dump %s '%s'", fx_pipeprof(), modes[m], path);
        from_file = fx_run(cmd, &s1);
        snprintf(cmd, sizeof(cmd), "cat '%s' | '%s' dump %s -", path, fx_pipeprof(), modes[m]);
        from_pipe = fx_run(cmd, &s2);
        ASSERT_EQ(s1, 0);
        ASSERT_EQ(s2, 0);
        ASSERT_TRUE(strlen(from_file) > 100);
        ASSERT_STR_EQ(from_pipe, from_file);
        if (m == 0) {
            /* one line per event, and a metadata-named event with its decoded fields */
            size_t lines = 0;
            const char *p;

            for (p = from_file; *p != '\0'; p++) {
                lines += *p == '\n';
            }
            ASSERT_EQ(lines, 1970);
            ASSERT_TRUE(strstr(from_file, " TestEventSource0 5 TestEvent1 tid=23560 stack=") !=
                        NULL);
            ASSERT_TRUE(strstr(from_file, "arg1=[26494,17115,-7229,18850,27931] "
                                          "arg2=2033417279\n") != NULL);
        }
        free(from_file);
        free(from_pipe);
    }
}

TEST(dump_reports_offset_and_reason)
{
    const char *path = fx_path(FX_50);
    char tmp[] = "/tmp/pp-dump-XXXXXX";
    struct nt_source src;
    struct nt_reader *r = NULL;
    struct nt_reader_error e;
    struct nt_event ev;
    char cmd[8400];
    char want[512];
    uint8_t *data;
    size_t n = 0;
    char *out;
    int status;
    int fd;
    int rc;

    data = test_read_file(path, &n);
    ASSERT_TRUE(data != NULL);
    fd = mkstemp(tmp);
    ASSERT_TRUE(fd >= 0);
    ASSERT_EQ(write(fd, data, n / 2), (ssize_t)(n / 2));
    ASSERT_TRUE(lseek(fd, 0, SEEK_SET) == 0);
    nt_source_fd(&src, &fd);
    rc = nt_reader_new(&src, NULL, &r);
    while (rc == 0 && (rc = nt_reader_next(r, &ev)) == 1) {
        rc = 0;
    }
    ASSERT_EQ(rc, -EBADMSG);
    nt_reader_get_error(r, &e);
    snprintf(want, sizeof(want), "pipeprof dump: %s: offset %llu: %s\n", tmp,
             (unsigned long long)e.offset, e.reason);
    nt_reader_free(r);
    close(fd);
    snprintf(cmd, sizeof(cmd), "'%s' dump --summary '%s' 2>&1 >/dev/null", fx_pipeprof(), tmp);
    out = fx_run(cmd, &status);
    unlink(tmp);
    ASSERT_EQ(status, 1);
    ASSERT_STR_EQ(out, want);
    free(out);
    free(data);
}

static const struct test_case cases[] = {
    TEST_CASE(provider_totals_match_baselines),  TEST_CASE(named_events_match_baselines),
    TEST_CASE(sample_profiler_samples),          TEST_CASE(execution_checkpoints_byte_facts),
    TEST_CASE(dump_summary_json_matches_reader), TEST_CASE(dump_reads_a_pipe_like_a_file),
    TEST_CASE(dump_reports_offset_and_reason),
};

TEST_MAIN(cases)
