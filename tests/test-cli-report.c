/* SPDX-License-Identifier: MIT */
/*
 * tests/test-cli-report.c - `pipeprof report` and `pipeprof convert --format folded` on a trace
 * with a known set of samples and rundown names, written with libnettrace. The totals of both
 * must agree with the samples written, to the sample.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "nettrace/format.h"
#include "nettrace/nettrace.h"
#include "tests/test.h"

#define MODULE_ID   0x7f0000000000ULL
#define MODULE_BASE 0x7f0000000000ULL

struct fn {
    const char *name;
    uint64_t start;
    uint32_t size;
};

/* Functions of a fake libdemo.so; main and start are on every stack of thread 101. */
static const struct fn fns[] = {
    { "fn_a", MODULE_BASE + 0x1000, 0x100 }, { "fn_b", MODULE_BASE + 0x1100, 0x100 },
    { "main", MODULE_BASE + 0x1200, 0x100 }, { "start", MODULE_BASE + 0x1300, 0x100 },
    { "fn_c", MODULE_BASE + 0x1400, 0x100 }, { "thread_start", MODULE_BASE + 0x1500, 0x100 },
};

static char trace_path[256];

/* pipeprof's AgentLosses event as the bridge writes it (bridge/agent-source.c): increments.
 * Before exitgap it had no CpuChanceNs: losses_desc is that event; losses4_desc the one before
 * ringdrop (no CpuLostNs), losses5_desc today's. */
static const struct nt_field losses_fields[] = {
    { "ThreadsDropped", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "CpuRestNs", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "PerfEarly", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "CpuChanceNs", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "CpuLostNs", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
};
static const struct nt_event_desc losses_desc = { "pipeprof", 9, "AgentLosses", 0, 1,
                                                  4,          0, losses_fields, 3, 0 };
static const struct nt_event_desc losses4_desc = { "pipeprof", 9, "AgentLosses", 0, 1,
                                                   4,          0, losses_fields, 4, 0 };
static const struct nt_event_desc losses5_desc = { "pipeprof", 9, "AgentLosses", 0, 1,
                                                   4,          0, losses_fields, 5, 0 };

static void
write_sample(struct nt_writer *w, uint32_t meta, uint64_t tid, uint64_t ts, const uint64_t *stack,
             uint32_t depth, int running)
{
    uint8_t buf[4];
    struct nt_payload p;
    struct nt_event ev;

    memset(&ev, 0, sizeof(ev));
    nt_payload_init(&p, buf, sizeof(buf));
    nt_payload_u32(&p, running ? NT_SAMPLE_MANAGED : NT_SAMPLE_EXTERNAL);
    ev.metadata_id = meta;
    ev.thread_id = tid;
    ev.capture_thread_id = 1;
    ev.processor = 0xFFFFFFFFu;
    ev.timestamp = ts;
    ev.stack = stack;
    ev.stack_depth = depth;
    ev.payload = buf;
    ev.payload_size = (uint32_t)p.len;
    ASSERT_OK(nt_writer_write(w, &ev));
}

static void
write_payload_event(struct nt_writer *w, uint32_t meta, uint64_t ts, struct nt_payload *p)
{
    struct nt_event ev;

    ASSERT_OK(p->err);
    memset(&ev, 0, sizeof(ev));
    ev.metadata_id = meta;
    ev.thread_id = 1;
    ev.capture_thread_id = 1;
    ev.processor = 0xFFFFFFFFu;
    ev.timestamp = ts;
    ev.payload = p->buf;
    ev.payload_size = (uint32_t)p->len;
    ASSERT_OK(nt_writer_write(w, &ev));
}

/* The trace being written (trace_begin .. trace_end). */
static int trace_fd = -1;
static struct nt_sink trace_sink;

/* Starts a trace at trace_path (/tmp/pp-test-WHAT-PID.nettrace) whose clock starts at ts, with
 * the ThreadSample, ModuleDCEnd and MethodDCEndVerbose events defined. */
static struct nt_writer *
trace_begin(const char *what, uint64_t ts, uint32_t *m_sample, uint32_t *m_module,
            uint32_t *m_method)
{
    struct nt_writer_options opts = { 0 };
    struct nt_writer *w = NULL;

    snprintf(trace_path, sizeof(trace_path), "/tmp/pp-test-%s-%d.nettrace", what, (int)getpid());
    trace_fd = open(trace_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_TRUE(trace_fd >= 0);
    nt_sink_fd(&trace_sink, &trace_fd);
    opts.sync_time_ticks = ts;
    ASSERT_OK(nt_writer_new(&opts, &trace_sink, &w));
    ASSERT_OK(nt_writer_define(w, nt_known_event_desc(NT_KNOWN_THREAD_SAMPLE), m_sample));
    ASSERT_OK(nt_writer_define(w, nt_known_event_desc(NT_KNOWN_MODULE_DC_END), m_module));
    ASSERT_OK(nt_writer_define(w, nt_known_event_desc(NT_KNOWN_METHOD_DC_END), m_method));
    return w;
}

static void
trace_end(struct nt_writer *w)
{
    ASSERT_OK(nt_writer_finish(w));
    nt_writer_free(w);
    close(trace_fd);
    trace_fd = -1;
}

/* 30 + 10 samples on thread 101, 20 running + 5 waiting on thread 202, 2 unnamed on 101; with
 * early, chance_ns or lost_ns, two AgentLosses events whose PerfEarly increments are 3 and
 * early - 3 (0 and 0 for early 0) and, with chance_ns (the event before ringdrop; without it,
 * the one before exitgap), whose CpuChanceNs are chance_ns / 4 and the rest, and with lost_ns
 * (today's event) whose CpuLostNs are lost_ns / 4 and the rest. */
static void
make_trace_losses(uint64_t early, uint64_t chance_ns, uint64_t lost_ns)
{
    const uint64_t s_a[] = { MODULE_BASE + 0x1010, MODULE_BASE + 0x1220, MODULE_BASE + 0x1305 };
    const uint64_t s_b[] = { MODULE_BASE + 0x1104, MODULE_BASE + 0x1230, MODULE_BASE + 0x1305 };
    const uint64_t s_b2[] = { MODULE_BASE + 0x1180, MODULE_BASE + 0x1240, MODULE_BASE + 0x1305 };
    const uint64_t s_c[] = { MODULE_BASE + 0x1408, MODULE_BASE + 0x1502 };
    const uint64_t s_unknown[] = { 0x1234, MODULE_BASE + 0x1220, MODULE_BASE + 0x1305 };
    struct nt_writer *w;
    uint32_t m_sample, m_module, m_method;
    uint8_t buf[1024];
    struct nt_payload p;
    uint64_t ts = 1000000;
    int i;
    size_t f;

    w = trace_begin("report", ts, &m_sample, &m_module, &m_method);
    if (early != 0 || chance_ns != 0 || lost_ns != 0) {
        uint32_t m_losses;
        uint64_t n[2] = { early != 0 ? 3 : 0, early != 0 ? early - 3 : 0 };
        uint64_t c[2] = { chance_ns / 4, chance_ns - chance_ns / 4 };
        uint64_t l[2] = { lost_ns / 4, lost_ns - lost_ns / 4 };

        ASSERT_OK(nt_writer_define(w,
                                   lost_ns != 0     ? &losses5_desc
                                   : chance_ns != 0 ? &losses4_desc
                                                    : &losses_desc,
                                   &m_losses));
        for (i = 0; i < 2; i++) {
            nt_payload_init(&p, buf, sizeof(buf));
            nt_payload_u64(&p, 0);
            nt_payload_u64(&p, 0);
            nt_payload_u64(&p, n[i]);
            if (chance_ns != 0 || lost_ns != 0) {
                nt_payload_u64(&p, c[i]);
            }
            if (lost_ns != 0) {
                nt_payload_u64(&p, l[i]);
            }
            write_payload_event(w, m_losses, ts += 1000, &p);
        }
    }
    for (i = 0; i < 30; i++) {
        write_sample(w, m_sample, 101, ts += 1000000, s_a, 3, 1);
    }
    for (i = 0; i < 10; i++) { /* two addresses inside fn_b: one folded line */
        write_sample(w, m_sample, 101, ts += 1000000, i % 2 ? s_b : s_b2, 3, 1);
    }
    for (i = 0; i < 25; i++) {
        write_sample(w, m_sample, 202, ts += 1000000, s_c, 2, i < 20);
    }
    for (i = 0; i < 2; i++) {
        write_sample(w, m_sample, 101, ts += 1000000, s_unknown, 3, 1);
    }
    nt_payload_init(&p, buf, sizeof(buf));
    nt_payload_module_dc_end(&p, MODULE_ID, "/usr/lib/libdemo.so");
    write_payload_event(w, m_module, ts += 1000, &p);
    for (f = 0; f < sizeof(fns) / sizeof(fns[0]); f++) {
        nt_payload_init(&p, buf, sizeof(buf));
        nt_payload_method_dc_end(&p, MODULE_ID, fns[f].start, fns[f].size, "", fns[f].name, "");
        write_payload_event(w, m_method, ts += 1000, &p);
    }
    /* A later name of a few bytes inside fn_a, as pipeprof's rundown names code in a ReadyToRun
     * image after the runtime's: the first name of an address stays (fn_a keeps its samples). */
    nt_payload_init(&p, buf, sizeof(buf));
    nt_payload_method_dc_end(&p, MODULE_ID, MODULE_BASE + 0x100f, 2, "", "0x100f", "");
    write_payload_event(w, m_method, ts += 1000, &p);
    trace_end(w);
}

static void
make_trace_early(uint64_t early)
{
    make_trace_losses(early, 0, 0);
}

static void
make_trace(void)
{
    make_trace_early(0);
}

/* Runs the pipeprof CLI and returns its standard output (malloc'd). */
static char *
run_cli(const char *args)
{
    const char *bin = getenv("PP_BINARY_DIR");
    char cmd[1024];
    char *out = NULL;
    size_t len = 0, cap = 0;
    FILE *f;
    int c, status;

    snprintf(cmd, sizeof(cmd), "%s/bin/pipeprof %s", bin != NULL ? bin : "build", args);
    f = popen(cmd, "r");
    ASSERT_TRUE(f != NULL);
    while ((c = fgetc(f)) != EOF) {
        if (len + 2 > cap) {
            cap = cap ? cap * 2 : 4096;
            out = realloc(out, cap);
            ASSERT_TRUE(out != NULL);
        }
        out[len++] = (char)c;
    }
    status = pclose(f);
    if (status != 0) {
        test_fail(__FILE__, __LINE__, "`%s` exited with %d", cmd, status);
    }
    if (out == NULL) {
        out = calloc(1, 1);
    }
    out[len] = '\0';
    return out;
}

static const cJSON *
find_function(const cJSON *list, const char *name)
{
    const cJSON *item;

    cJSON_ArrayForEach(item, list)
    {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(item, "function");

        if (cJSON_IsString(fn) && strcmp(fn->valuestring, name) == 0) {
            return item;
        }
    }
    test_fail(__FILE__, __LINE__, "function %s not in the report", name);
}

static double
num(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    if (!cJSON_IsNumber(v)) {
        test_fail(__FILE__, __LINE__, "no number %s", key);
    }
    return v->valuedouble;
}

TEST(report_counts_self_and_total)
{
    char args[512];
    cJSON *root, *self, *total, *threads;
    const cJSON *e;
    char *out;

    make_trace();
    snprintf(args, sizeof(args), "report --format json --top 50 %s", trace_path);
    out = run_cli(args);
    root = cJSON_Parse(out);
    ASSERT_TRUE(root != NULL);
    ASSERT_EQ(num(root, "samples"), 67);
    ASSERT_EQ(num(root, "running_samples"), 62);
    ASSERT_EQ(num(root, "waiting_samples"), 5);
    self = cJSON_GetObjectItemCaseSensitive(root, "top_self");
    total = cJSON_GetObjectItemCaseSensitive(root, "top_total");
    ASSERT_TRUE(cJSON_IsArray(self) && cJSON_IsArray(total));
    /* The first entry by self samples is fn_a, with 30 of 67. */
    e = cJSON_GetArrayItem(self, 0);
    ASSERT_STR_EQ(cJSON_GetObjectItemCaseSensitive(e, "function")->valuestring, "libdemo!fn_a");
    ASSERT_EQ(num(find_function(self, "libdemo!fn_a"), "self"), 30);
    ASSERT_EQ(num(find_function(self, "libdemo!fn_b"), "self"), 10);
    ASSERT_EQ(num(find_function(self, "libdemo!fn_c"), "self"), 25);
    ASSERT_EQ(num(find_function(total, "libdemo!main"), "total"), 42);
    ASSERT_EQ(num(find_function(total, "libdemo!main"), "self"), 0);
    ASSERT_EQ(num(find_function(total, "libdemo!start"), "total"), 42);
    ASSERT_EQ(num(find_function(total, "libdemo!thread_start"), "total"), 25);
    ASSERT_EQ(num(find_function(total, "?!0x1234"), "self"), 2);
    threads = cJSON_GetObjectItemCaseSensitive(root, "per_thread");
    ASSERT_EQ(cJSON_GetArraySize(threads), 2);
    cJSON_Delete(root);
    free(out);
    unlink(trace_path);
}

TEST(folded_totals_agree_with_report)
{
    char args[512], *out, *line, *save = NULL;
    unsigned long long sum = 0;
    int lines = 0, saw_a = 0, saw_b = 0;

    make_trace();
    snprintf(args, sizeof(args), "convert --format folded %s", trace_path);
    out = run_cli(args);
    for (line = strtok_r(out, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        char *sp = strrchr(line, ' ');

        ASSERT_TRUE(sp != NULL);
        sum += strtoull(sp + 1, NULL, 10);
        lines++;
        *sp = '\0';
        if (strcmp(line, "Thread (101);libdemo!start;libdemo!main;libdemo!fn_a") == 0) {
            saw_a = 1;
            ASSERT_STR_EQ(sp + 1, "30");
        }
        if (strcmp(line, "Thread (101);libdemo!start;libdemo!main;libdemo!fn_b") == 0) {
            saw_b = 1;
            ASSERT_STR_EQ(sp + 1, "10"); /* two distinct address stacks fold into one line */
        }
    }
    ASSERT_TRUE(saw_a && saw_b);
    ASSERT_EQ(sum, 67);
    /* fn_a, fn_b, fn_c running, fn_c waiting (same names: one line), unknown */
    ASSERT_EQ(lines, 4);
    free(out);
    unlink(trace_path);
}

TEST(report_filters_thread_and_folds_frames)
{
    char args[512];
    cJSON *root;
    char *out;

    make_trace();
    snprintf(args, sizeof(args), "report --format json --thread 202 --fold 'thread_start' %s",
             trace_path);
    out = run_cli(args);
    root = cJSON_Parse(out);
    ASSERT_TRUE(root != NULL);
    ASSERT_EQ(num(root, "samples"), 25);
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "top_total")), 1);
    cJSON_Delete(root);
    free(out);
    unlink(trace_path);
}

/* The perf samples the agent left out as early by their thread's CPU clock (its AgentLosses
 * events' PerfEarly increments, added up) are said, in JSON and in the text; a trace without them
 * says nothing in the text. */
TEST(report_says_the_perf_samples_left_out_as_early)
{
    char args[512];
    cJSON *root;
    char *out;

    make_trace_early(7);
    snprintf(args, sizeof(args), "report --format json %s", trace_path);
    out = run_cli(args);
    root = cJSON_Parse(out);
    ASSERT_TRUE(root != NULL);
    ASSERT_EQ(num(root, "perf_early_samples"), 7);
    ASSERT_EQ(num(root, "samples"), 67); /* they are not samples */
    cJSON_Delete(root);
    free(out);
    snprintf(args, sizeof(args), "report %s", trace_path);
    out = run_cli(args);
    ASSERT_TRUE(strstr(out, "\nperf samples early by their thread's CPU clock: 7, left out") !=
                NULL);
    free(out);
    unlink(trace_path);
    make_trace();
    snprintf(args, sizeof(args), "report %s", trace_path);
    out = run_cli(args);
    ASSERT_TRUE(strstr(out, "perf samples early") == NULL);
    free(out);
    unlink(trace_path);
}

/* The CPU threads burned before their first sample, the timers' lottery's (AgentLosses'
 * CpuChanceNs increments, added up), is said in JSON and in the text (record's summary line:
 * cli-record-summary); a trace of the event before it (no such field) says 0 and nothing. */
TEST(report_says_the_cpu_before_threads_first_samples)
{
    char args[512];
    cJSON *root;
    char *out;

    make_trace_losses(0, 12345678, 0);
    snprintf(args, sizeof(args), "report --format json %s", trace_path);
    out = run_cli(args);
    root = cJSON_Parse(out);
    ASSERT_TRUE(root != NULL);
    ASSERT_TRUE(num(root, "cpu_chance_ms") > 12.3455 && num(root, "cpu_chance_ms") < 12.3465);
    ASSERT_EQ(num(root, "perf_early_samples"), 0);
    ASSERT_EQ(num(root, "samples"), 67);
    cJSON_Delete(root);
    free(out);
    snprintf(args, sizeof(args), "report %s", trace_path);
    out = run_cli(args);
    ASSERT_TRUE(strstr(out, "\nCPU before threads' first samples: 12.346 ms, the timers' "
                            "first-sample lottery's") != NULL);
    free(out);
    unlink(trace_path);
    make_trace_early(7); /* AgentLosses of three fields */
    snprintf(args, sizeof(args), "report --format json %s", trace_path);
    out = run_cli(args);
    root = cJSON_Parse(out);
    ASSERT_TRUE(root != NULL);
    ASSERT_EQ(num(root, "cpu_chance_ms"), 0);
    ASSERT_EQ(num(root, "perf_early_samples"), 7);
    cJSON_Delete(root);
    free(out);
    snprintf(args, sizeof(args), "report %s", trace_path);
    out = run_cli(args);
    ASSERT_TRUE(strstr(out, "first samples") == NULL);
    free(out);
    unlink(trace_path);
}

/* The CPU of the samples the agent dropped (AgentLosses' CpuLostNs increments, added up) is said
 * in JSON and in the text (record's summary line: cli-record-summary); a trace of the event before
 * it (four fields) says 0 and nothing. */
TEST(report_says_the_cpu_of_the_lost_samples)
{
    char args[512];
    cJSON *root;
    char *out;

    make_trace_losses(0, 1000000, 23456789);
    snprintf(args, sizeof(args), "report --format json %s", trace_path);
    out = run_cli(args);
    root = cJSON_Parse(out);
    ASSERT_TRUE(root != NULL);
    ASSERT_TRUE(num(root, "cpu_lost_ms") > 23.4565 && num(root, "cpu_lost_ms") < 23.4575);
    ASSERT_TRUE(num(root, "cpu_chance_ms") > 0.9995 && num(root, "cpu_chance_ms") < 1.0005);
    cJSON_Delete(root);
    free(out);
    snprintf(args, sizeof(args), "report %s", trace_path);
    out = run_cli(args);
    ASSERT_TRUE(strstr(out, "\nCPU in lost samples: 23.457 ms") != NULL);
    free(out);
    unlink(trace_path);
    make_trace_losses(0, 1000000, 0); /* AgentLosses of four fields */
    snprintf(args, sizeof(args), "report --format json %s", trace_path);
    out = run_cli(args);
    root = cJSON_Parse(out);
    ASSERT_TRUE(root != NULL);
    ASSERT_EQ(num(root, "cpu_lost_ms"), 0);
    cJSON_Delete(root);
    free(out);
    snprintf(args, sizeof(args), "report %s", trace_path);
    out = run_cli(args);
    ASSERT_TRUE(strstr(out, "CPU in lost samples") == NULL);
    free(out);
    unlink(trace_path);
}

/*
 * An exec chain's trace, as record joins a process's images: each image's rundown numbers its
 * modules from 1. Image 1 (a shell) ran sh_loop in module 1 and libc in module 2; image 2 ran
 * prog_work in its module 1 and libprog in its module 2, and prog_same at the very address of
 * the shell's sh_loop (no ASLR). Each image's functions must carry its own modules' names.
 */
static void
make_trace_exec_chain(void)
{
    const uint64_t sh = 0x555555554000ULL, libc = 0x7f1000000000ULL, prog = 0x561000000000ULL,
                   libprog = 0x7f2000000000ULL;
    const uint64_t s_sh[] = { sh + 0x2010, libc + 0x3020 };
    const uint64_t s_prog[] = { prog + 0x4010, libprog + 0x5020 };
    const uint64_t s_same[] = { sh + 0x2010, libprog + 0x5020 };
    const struct {
        uint64_t module;
        uint64_t start;
        const char *name;
    } rundowns[2][3] = {
        { { 1, sh + 0x2000, "sh_loop" }, { 2, libc + 0x3000, "libc_start_main" }, { 0, 0, NULL } },
        { { 1, prog + 0x4000, "prog_work" },
          { 2, libprog + 0x5000, "libprog_start" },
          { 1, sh + 0x2000, "prog_same" } },
    };
    const char *paths[2][2] = { { "/usr/bin/shell", "/lib/x86_64-linux-gnu/libc.so.6" },
                                { "/usr/bin/prog", "/usr/lib/libprog.so" } };
    struct nt_writer *w;
    uint32_t m_sample, m_module, m_method, m_init, m_complete;
    uint8_t buf[1024];
    struct nt_payload p;
    uint64_t ts = 1000000;
    int i, img, k;

    w = trace_begin("execchain", ts, &m_sample, &m_module, &m_method);
    ASSERT_OK(nt_writer_define(w, nt_known_event_desc(NT_KNOWN_RUNDOWN_DC_END_INIT), &m_init));
    ASSERT_OK(nt_writer_define(w, nt_known_event_desc(NT_KNOWN_RUNDOWN_DC_END_COMPLETE),
                               &m_complete));
    for (img = 0; img < 2; img++) {
        for (i = 0; i < (img == 0 ? 5 : 7); i++) {
            write_sample(w, m_sample, 301, ts += 1000000, img == 0 ? s_sh : s_prog, 2, 1);
        }
        for (i = 0; img == 1 && i < 3; i++) {
            write_sample(w, m_sample, 301, ts += 1000000, s_same, 2, 1);
        }
        nt_payload_init(&p, buf, sizeof(buf));
        nt_payload_rundown_complete(&p);
        write_payload_event(w, m_init, ts += 1000, &p);
        for (k = 0; k < 2; k++) {
            nt_payload_init(&p, buf, sizeof(buf));
            nt_payload_module_dc_end(&p, (uint64_t)k + 1, paths[img][k]);
            write_payload_event(w, m_module, ts, &p);
        }
        for (k = 0; k < 3 && rundowns[img][k].name != NULL; k++) {
            nt_payload_init(&p, buf, sizeof(buf));
            nt_payload_method_dc_end(&p, rundowns[img][k].module, rundowns[img][k].start, 0x100, "",
                                     rundowns[img][k].name, "");
            write_payload_event(w, m_method, ts, &p);
        }
        nt_payload_init(&p, buf, sizeof(buf));
        nt_payload_rundown_complete(&p);
        write_payload_event(w, m_complete, ts, &p);
    }
    trace_end(w);
}

TEST(report_names_each_exec_images_modules_by_its_own_rundown)
{
    char args[512];
    cJSON *root, *self, *total;
    char *out;

    make_trace_exec_chain();
    snprintf(args, sizeof(args), "report --format json --top 50 %s", trace_path);
    out = run_cli(args);
    root = cJSON_Parse(out);
    ASSERT_TRUE(root != NULL);
    ASSERT_EQ(num(root, "samples"), 15);
    self = cJSON_GetObjectItemCaseSensitive(root, "top_self");
    total = cJSON_GetObjectItemCaseSensitive(root, "top_total");
    ASSERT_EQ(num(find_function(self, "shell!sh_loop"), "self"), 5);
    ASSERT_EQ(num(find_function(total, "libc.so!libc_start_main"), "total"), 5);
    /* before: shell!prog_work, libc.so!libprog_start and shell!prog_same (image 1's modules) */
    ASSERT_EQ(num(find_function(self, "prog!prog_work"), "self"), 7);
    ASSERT_EQ(num(find_function(self, "prog!prog_same"), "self"), 3);
    ASSERT_EQ(num(find_function(total, "libprog!libprog_start"), "total"), 10);
    ASSERT_EQ(cJSON_GetArraySize(total), 5); /* those five, no other label */
    cJSON_Delete(root);
    free(out);
    unlink(trace_path);
}

/* pipeprof's ModuleLoad as the bridge writes it (bridge/agent-source.c), its first four fields. */
static const struct nt_field module_load_fields[] = {
    { "Path", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Base", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Size", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "BuildId", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
};
static const struct nt_event_desc module_load_desc = { "pipeprof", 3, "ModuleLoad",       0, 1,
                                                       4,          0, module_load_fields, 4, 0 };

/*
 * An exec chain without ASLR (`setarch -R`): image 2 (/nonexistent/prog) is loaded at image 1's
 * (/nonexistent/shell) base, and each image samples code no method names, at one address both
 * (0x2800) and at one of its own (0x3800, image 2), while sh_loop (0x2010) is named by image 1's
 * rundown and image 2's work at that address by its own (prog_same). A frame no method names is
 * labelled by its module and offset: its own image's module, the ModuleLoad given last before
 * the sample, not the first whose span holds it.
 */
static void
make_trace_exec_chain_no_aslr(void)
{
    const uint64_t base = 0x555555554000ULL;
    const uint64_t s_named[] = { base + 0x2010 };
    const uint64_t s_both[] = { base + 0x2800 };
    const uint64_t s_own[] = { base + 0x3800 };
    const char *paths[2] = { "/nonexistent/shell", "/nonexistent/prog" };
    const char *names[2] = { "sh_loop", "prog_same" };
    struct nt_writer *w;
    uint32_t m_sample, m_module, m_method, m_init, m_complete, m_load;
    uint8_t buf[1024];
    struct nt_payload p;
    uint64_t ts = 1000000;
    int i, img;

    w = trace_begin("execnoaslr", ts, &m_sample, &m_module, &m_method);
    ASSERT_OK(nt_writer_define(w, nt_known_event_desc(NT_KNOWN_RUNDOWN_DC_END_INIT), &m_init));
    ASSERT_OK(nt_writer_define(w, nt_known_event_desc(NT_KNOWN_RUNDOWN_DC_END_COMPLETE),
                               &m_complete));
    ASSERT_OK(nt_writer_define(w, &module_load_desc, &m_load));
    for (img = 0; img < 2; img++) {
        nt_payload_init(&p, buf, sizeof(buf));
        nt_payload_string(&p, paths[img]);
        nt_payload_u64(&p, base);
        nt_payload_u64(&p, 0x10000);
        nt_payload_string(&p, "");
        write_payload_event(w, m_load, ts += 1000, &p);
        for (i = 0; i < 4; i++) {
            write_sample(w, m_sample, 301, ts += 1000000, s_named, 1, 1);
        }
        for (i = 0; i < (img == 0 ? 2 : 3); i++) {
            write_sample(w, m_sample, 301, ts += 1000000, s_both, 1, 1);
        }
        for (i = 0; img == 1 && i < 5; i++) {
            write_sample(w, m_sample, 301, ts += 1000000, s_own, 1, 1);
        }
        nt_payload_init(&p, buf, sizeof(buf));
        nt_payload_rundown_complete(&p);
        write_payload_event(w, m_init, ts += 1000, &p);
        nt_payload_init(&p, buf, sizeof(buf));
        nt_payload_module_dc_end(&p, 1, paths[img]);
        write_payload_event(w, m_module, ts, &p);
        nt_payload_init(&p, buf, sizeof(buf));
        nt_payload_method_dc_end(&p, 1, base + 0x2000, 0x100, "", names[img], "");
        write_payload_event(w, m_method, ts, &p);
        nt_payload_init(&p, buf, sizeof(buf));
        nt_payload_rundown_complete(&p);
        write_payload_event(w, m_complete, ts, &p);
    }
    trace_end(w);
}

TEST(report_labels_an_unnamed_frame_by_its_own_images_module)
{
    char args[512];
    cJSON *root, *self;
    char *out;

    make_trace_exec_chain_no_aslr();
    snprintf(args, sizeof(args), "report --format json --top 50 %s 2>/dev/null", trace_path);
    out = run_cli(args);
    root = cJSON_Parse(out);
    ASSERT_TRUE(root != NULL);
    ASSERT_EQ(num(root, "samples"), 18);
    self = cJSON_GetObjectItemCaseSensitive(root, "top_self");
    ASSERT_EQ(num(find_function(self, "shell!sh_loop"), "self"), 4);
    ASSERT_EQ(num(find_function(self, "prog!prog_same"), "self"), 4);
    ASSERT_EQ(num(find_function(self, "shell!0x2800"), "self"), 2);
    /* before: shell!0x2800 5 and shell!0x3800 5 (image 1's module, the first that holds them) */
    ASSERT_EQ(num(find_function(self, "prog!0x2800"), "self"), 3);
    ASSERT_EQ(num(find_function(self, "prog!0x3800"), "self"), 5);
    ASSERT_EQ(cJSON_GetArraySize(self), 5); /* those five, no other label */
    cJSON_Delete(root);
    free(out);
    unlink(trace_path);
}

TEST(report_rejects_garbage_with_offset)
{
    char cmd[600];
    FILE *f;
    int status;

    snprintf(trace_path, sizeof(trace_path), "/tmp/pp-test-garbage-%d.nettrace", (int)getpid());
    f = fopen(trace_path, "w");
    ASSERT_TRUE(f != NULL);
    fputs("this is not a trace at all, just text", f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "%s/bin/pipeprof report %s 2>/dev/null",
             getenv("PP_BINARY_DIR") ? getenv("PP_BINARY_DIR") : "build", trace_path);
    status = system(cmd);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    unlink(trace_path);
}

static const struct test_case cases[] = {
    TEST_CASE(report_counts_self_and_total),
    TEST_CASE(folded_totals_agree_with_report),
    TEST_CASE(report_filters_thread_and_folds_frames),
    TEST_CASE(report_says_the_perf_samples_left_out_as_early),
    TEST_CASE(report_says_the_cpu_before_threads_first_samples),
    TEST_CASE(report_says_the_cpu_of_the_lost_samples),
    TEST_CASE(report_names_each_exec_images_modules_by_its_own_rundown),
    TEST_CASE(report_labels_an_unnamed_frame_by_its_own_images_module),
    TEST_CASE(report_rejects_garbage_with_offset),
};
TEST_MAIN(cases)
