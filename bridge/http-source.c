/* SPDX-License-Identifier: MIT */
/*
 * bridge/http-source.c - the agent as the backend of the HTTP pull endpoints (http/http.h), on
 * the diagnostic server's loop. A recording is a tap on the agent's records (bridge/agent-source.h)
 * plus a sampling request: wall mode at 1/interval for swift-profile-recorder's POST /sample
 * (every thread, as it samples them), CPU mode at the requested rate for Go's
 * /debug/pprof/profile. When it ends, its samples become a pp_profile named with the agent's
 * symbol tables, which the HTTP server writes in the requested format.
 * Context: every function runs on the IPC loop thread, except bridge_http_configure (constructor).
 */
#include "bridge/http-source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "agent/agent.h"
#include "bridge/agent-source.h"
#include "bridge/frame-tags.h"
#include "http/http.h"
#include "nettrace/nettrace.h"

#define BRIDGE_HTTP_PUMP_MS        10 /* how often a recording drains the agent without sessions */
#define BRIDGE_HTTP_THREADS        1024 /* threads whose sampling rate a recording keeps to its own */
#define BRIDGE_HTTP_MAX_RECORDINGS 4
#define BRIDGE_HTTP_FIRST_PASS_MS  5000 /* wall mode: how long a recording waits for its first */
struct bridge_http_rec {
    struct bridge_tap tap;
    struct pp_profile *profile;
    uv_timer_t end_timer;
    uv_timer_t pump_timer;
    int open_handles;
    enum ag_mode mode;
    unsigned hz;
    int acquired;
    int before_first; /* wall mode: no sample of the recording's yet; its window not begun */
    uint64_t start_ns, end_ns, duration_ns;
    struct ag_stats stats0; /* the agent's counters at the start: the losses are the growth */
    int add_err;            /* the first failure to add a sample (the profile is then incomplete) */
    uint64_t names_ns;      /* the request's time: untagged frames are named as of it */
    struct bridge_tags tags;        /* modules gone since names_ns (bridge_http_tag) */
    uint64_t gone_after;            /* the last ag_module_gone seq taken into tags */
    uint64_t gone_known_ns;         /* every module known gone by this time is in tags */
    uint64_t frames[AG_MAX_FRAMES]; /* a sample's frames, tagged */
    int32_t kept_tid[BRIDGE_HTTP_THREADS];
    uint64_t due_ts[BRIDGE_HTTP_THREADS];   /* wall mode: next sample time per thread */
    int64_t credit_ns[BRIDGE_HTTP_THREADS]; /* CPU mode: CPU per thread not yet in a sample */
    http_sample_done_fn done;
    void *token;
};

static struct {
    char url[512];
    int allow_remote;
    int allow_tcp;                  /* PIPEPROF_SAMPLING_SERVER_TCP_OPEN_TO_LOCAL_USERS=1 */
    char token[HTTP_MAX_TOKEN + 1]; /* PIPEPROF_SAMPLING_SERVER_TOKEN, or "" */
    int sampling;                   /* the agent runs: recordings are possible */
    struct http_server *server;
    uv_loop_t *loop;
} bridge_http;

/*
 * How many samples of this recording a drained sample makes for thread tid at ts. A recording
 * keeps its own rate while a diagnostic session or another recording asks the agent for a higher
 * one. Wall mode keeps one sample per thread and interval: each thread has a due time that
 * advances by the interval, so the kept rate is the asked one on average; a quarter interval of
 * slack absorbs the jitter of an agent sampling at this very rate. CPU mode counts CPU time
 * instead: each thread's credit gathers the CPU its samples stand for (a sample of several
 * intervals, a final sample claimed as the thread exits soon after its last one) and pays one
 * sample per interval of it, rounded as the agent rounds its weights. Keeping one sample per
 * interval there dropped the CPU of every sample but the interval's first: the final samples of
 * threads that exit within an interval of their last sample, and all but one of a weighted
 * sample's intervals. The table is open addressing on the tid (0 = empty).
 */
static uint32_t
bridge_http_keep(struct bridge_http_rec *r, const struct bridge_tap_sample *s)
{
    uint64_t interval = 1000000000u / r->hz, slack = interval / 4;
    uint64_t cpu = s->cpu_ns != 0 ? s->cpu_ns : (uint64_t)s->weight * interval;
    int64_t credit;
    uint32_t n;
    size_t i, k;

    for (k = 0, i = ((uint32_t)s->tid * 2654435761u) & (BRIDGE_HTTP_THREADS - 1);
         k < BRIDGE_HTTP_THREADS; k++, i = (i + 1) & (BRIDGE_HTTP_THREADS - 1)) {
        if (r->kept_tid[i] == 0) {
            r->kept_tid[i] = s->tid;
            r->due_ts[i] = s->timestamp_ns; /* due now: the thread's first sample is kept */
        }
        if (r->kept_tid[i] != s->tid) {
            continue;
        }
        if (r->mode == AG_MODE_CPU) {
            credit = r->credit_ns[i] + (int64_t)cpu;
            n = credit > (int64_t)(interval / 2) ? (uint32_t)((credit + interval / 2) / interval)
                                                 : 0;
            r->credit_ns[i] = credit - (int64_t)n * (int64_t)interval;
            return n;
        }
        /* A sample of weight k stands for the k intervals up to it (its thread waited for a
         * core with the signal pending, its stack unchanged): it pays the ones due by then. */
        for (n = 0; n < s->weight && s->timestamp_ns + slack >= r->due_ts[i]; n++) {
            r->due_ts[i] += interval;
        }
        if (n > 0 && s->timestamp_ns > r->due_ts[i]) {
            r->due_ts[i] = s->timestamp_ns + interval; /* behind (not sampled): start afresh */
        }
        return n;
    }
    /* More threads than slots: keep, rather than lose samples. */
    return r->mode == AG_MODE_CPU ? (uint32_t)((cpu + interval / 2) / interval)
                                  : (s->weight != 0 ? s->weight : 1);
}

static void bridge_http_end_cb(uv_timer_t *t);

static int
bridge_http_note_gone_cb(const struct ag_module_gone *g, void *ctx)
{
    struct bridge_http_rec *r = ctx;

    r->gone_after = g->seq;
    /* Gone before the request, it held no frame of the recording's (named as of names_ns). */
    return g->gone_ns <= r->names_ns
                   ? 0
                   : bridge_tags_add(&r->tags, g->text_start, g->text_end, g->gone_ns);
}

/*
 * Frames are named at the recording's end, and the profile keys them by address, but a library
 * unloaded during the recording and another one loaded at its address (issue 19) make one address
 * two functions: a frame of a sample taken after a module went is tagged with that going
 * (bridge/frame-tags.h). Which modules went is taken when a sample is newer than the last look
 * (once a pump): a going is known, with its time, before a sample after it is drained (the host's
 * dlclose, host/dl.c), or at the scan that missed it, whose time ag_symbolize_at names by too.
 * Returns the frames to add.
 */
static const uint64_t *
bridge_http_tag(struct bridge_http_rec *r, const struct bridge_tap_sample *s, uint32_t depth)
{
    if (s->timestamp_ns >= r->gone_known_ns) {
        uint64_t now = nt_clock_now(); /* before the look: a going by now is in it */
        int err = ag_module_gone_foreach(r->gone_after, bridge_http_note_gone_cb, r);

        if (err != 0 && r->add_err == 0) {
            r->add_err = err;
        }
        r->gone_known_ns = now;
    }
    return bridge_tags_apply(&r->tags, s->timestamp_ns, s->frames, depth, r->frames);
}

static void
bridge_http_on_sample(void *ctx, const struct bridge_tap_sample *s)
{
    struct bridge_http_rec *r = ctx;
    const uint64_t *frames;
    uint32_t n, depth;
    int err = 0;

    if (s->mode != r->mode || s->timestamp_ns < r->start_ns || s->timestamp_ns > r->end_ns ||
        r->add_err != 0) {
        return;
    }
    if (r->before_first) {
        /* The window begins at the wall thread's first pass for this recording: it is started
         * (or its rate changed) by the request, and on a host starved of CPU, or an agent the
         * request started, its first pass came after a short recording's end (http-agent: 0.2 s
         * asked, HTTP 200 with no sample, in a fresh-clone CI run's ASan stage at load 25). */
        uint64_t now = nt_clock_now(), end;

        r->before_first = 0;
        r->start_ns = s->timestamp_ns;
        r->end_ns = r->start_ns + r->duration_ns;
        end = r->end_ns > now ? (r->end_ns - now) / 1000000u : 0;
        uv_timer_start(&r->end_timer, bridge_http_end_cb, end, 0);
    }
    n = bridge_http_keep(r, s);
    depth = s->depth < AG_MAX_FRAMES ? s->depth : AG_MAX_FRAMES;
    frames = n > 0 ? bridge_http_tag(r, s, depth) : NULL;
    for (; n > 0 && err == 0; n--) {
        err = pp_profile_add_sample(r->profile, (uint64_t)s->tid, s->timestamp_ns, s->running,
                                    frames, depth);
    }
    if (err != 0) {
        r->add_err = err;
    }
}

/* "/usr/lib/libfoo.so.1" -> "libfoo.so", as the CLI and TraceEvent label modules. */
static void
bridge_http_module_label(const char *path, char *out, size_t len)
{
    const char *base = path != NULL ? strrchr(path, '/') : NULL;
    char *dot;

    base = base != NULL ? base + 1 : (path != NULL ? path : "?");
    snprintf(out, len, "%s", *base != '\0' ? base : "?");
    dot = strrchr(out, '.');
    if (dot != NULL && dot != out) {
        *dot = '\0';
    }
}

static int
bridge_http_namer(void *ctx, uint64_t ip, int caller, char *buf, size_t len, int *resolved)
{
    const struct bridge_http_rec *r = ctx;
    uint64_t ts = r->names_ns; /* a frame without a tag: as of the request */
    struct ag_symbol sym;
    char label[256];
    int err;

    ip = bridge_tags_address(&r->tags, ip, &ts);
    memset(&sym, 0, sizeof(sym));
    err = ag_symbolize_at(caller && ip > 0 ? ip - 1 : ip, ts, &sym);
    if (err == 0 && sym.name != NULL) {
        bridge_http_module_label(sym.module_path, label, sizeof(label));
        snprintf(buf, len, "%s!%s", label, sym.name);
        *resolved = 1;
    } else if (sym.module_path != NULL) {
        bridge_http_module_label(sym.module_path, label, sizeof(label));
        snprintf(buf, len, "%s!0x%llx", label, /* the function's start when known */
                 (unsigned long long)((sym.start != 0 ? sym.start : ip) - sym.module_base));
    } else {
        snprintf(buf, len, "?!0x%llx", (unsigned long long)ip);
    }
    return 0;
}

/* Thread names from /proc: threads that started before the recording sent no start record. */
static void
bridge_http_name_threads(struct pp_profile *p)
{
    char path[96], name[64];
    size_t i;

    for (i = 0; i < p->thread_count; i++) {
        FILE *f;

        /* Not /proc/self/task/TID: that entry stays and costs whoever reaps this process
         * (docs/architecture.md, "Resources"). */
        snprintf(path, sizeof(path), "/proc/%llu/task/%llu/comm",
                 (unsigned long long)p->threads[i].thread_id,
                 (unsigned long long)p->threads[i].thread_id);
        f = fopen(path, "re");
        if (f == NULL) {
            continue; /* the thread has exited */
        }
        if (fgets(name, sizeof(name), f) != NULL) {
            name[strcspn(name, "\n")] = '\0';
            if (pp_profile_set_thread_name(p, p->threads[i].thread_id, name) != 0) {
                fclose(f);
                return; /* out of memory: the threads keep their ids */
            }
        }
        fclose(f);
    }
}

static void
bridge_http_handle_closed(uv_handle_t *h)
{
    struct bridge_http_rec *r = h->data;

    if (--r->open_handles == 0) {
        pp_profile_free(r->profile);
        bridge_tags_fini(&r->tags);
        free(r);
    }
}

/* Stops sampling for r and releases it once its timers are closed. */
static void
bridge_http_rec_end(struct bridge_http_rec *r)
{
    bridge_tap_remove(&r->tap);
    if (r->acquired && ag_sampling_release(r->mode, r->hz) != 0) {
        fprintf(stderr, "pipeprof: http: no such sampling request to release\n");
    }
    r->acquired = 0;
    uv_close((uv_handle_t *)&r->end_timer, bridge_http_handle_closed);
    uv_close((uv_handle_t *)&r->pump_timer, bridge_http_handle_closed);
}

static void
bridge_http_pump_cb(uv_timer_t *t)
{
    struct bridge_http_rec *r = t->data;
    int err = bridge_tap_pump();

    if (err < 0 && err != -EBUSY && r->add_err == 0) {
        r->add_err = err;
    }
}

static void
bridge_http_end_cb(uv_timer_t *t)
{
    struct bridge_http_rec *r = t->data;
    struct pp_profile *p = r->profile;
    uint64_t now, ts;
    char name[64];
    size_t i;
    uint32_t d;
    FILE *f;
    int err;

    r->before_first = 0; /* no pass in all that time: what the last pump brings is kept */
    if (r->mode == AG_MODE_CPU) {
        /* The CPU each thread burned since its last sample comes in as a final sample, so the
         * profile holds all of the threads' CPU time (as a session's last drain does). Claimed
         * now, after the end this timer was set for: they are the recording's, not late. */
        ag_cpu_flush();
        now = nt_clock_now();
        r->end_ns = now > r->end_ns ? now : r->end_ns;
    }
    err = bridge_tap_pump(); /* the last samples */
    if (err < 0 && err != -EBUSY && r->add_err == 0) {
        r->add_err = err;
    }
    p->sampling_interval_ns = (uint32_t)(1000000000u / r->hz);
    p->process_id = (uint32_t)getpid();
    p->lost_samples = r->tap.lost;
    {
        struct ag_stats st;

        ag_stats_get(&st); /* a counter below its start was reset by a new start of the agent */
        p->threads_dropped = st.threads_dropped >= r->stats0.threads_dropped
                                     ? st.threads_dropped - r->stats0.threads_dropped
                                     : st.threads_dropped;
        p->cpu_rest_ns = st.cpu_rest_ns >= r->stats0.cpu_rest_ns
                                 ? st.cpu_rest_ns - r->stats0.cpu_rest_ns
                                 : st.cpu_rest_ns;
        p->perf_early = st.perf_early >= r->stats0.perf_early ? st.perf_early - r->stats0.perf_early
                                                              : st.perf_early;
        p->cpu_chance_ns = st.cpu_chance_ns >= r->stats0.cpu_chance_ns
                                   ? st.cpu_chance_ns - r->stats0.cpu_chance_ns
                                   : st.cpu_chance_ns;
        p->cpu_lost_ns = st.cpu_lost_ns >= r->stats0.cpu_lost_ns
                                 ? st.cpu_lost_ns - r->stats0.cpu_lost_ns
                                 : st.cpu_lost_ns;
    }
    p->mode = strdup(r->mode == AG_MODE_WALL ? "wall" : "cpu");
    f = fopen("/proc/self/comm", "re");
    if (f != NULL) {
        if (fgets(name, sizeof(name), f) != NULL) {
            name[strcspn(name, "\n")] = '\0';
            p->process_name = strdup(name);
        }
        fclose(f);
    }
    bridge_http_name_threads(p);
    err = r->add_err != 0 ? r->add_err : pp_profile_name_frames(p, bridge_http_namer, r);
    for (i = 0; err == 0 && r->tags.gone_count > 0 && i < p->stack_count; i++) {
        uint64_t *ips = (uint64_t *)p->stacks[i].ips; /* the tags are not addresses */

        for (d = 0; d < p->stacks[i].depth; d++) {
            ips[d] = bridge_tags_address(&r->tags, ips[d], &ts);
        }
    }
    r->profile = NULL; /* done takes it, also on failure */
    bridge_http_rec_end(r);
    if (err != 0) {
        pp_profile_free(p);
        r->done(r->token, NULL, err, "recording the samples failed");
        return;
    }
    r->done(r->token, p, 0, NULL);
}

static int
bridge_http_sample_start(void *ctx, const struct http_sample_request *req, http_sample_done_fn done,
                         void *token, void **handle)
{
    struct bridge_http_rec *r;
    uint64_t duration_ns;
    char why[128];
    int err;

    (void)ctx;
    if (!bridge_http.sampling) {
        return -ENOSYS; /* the agent did not start: its one-line reason is on stderr */
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return -ENOMEM;
    }
    if (req->pprof_endpoint) {
        r->mode = AG_MODE_CPU;
        r->hz = req->hz != 0 ? req->hz : HTTP_PPROF_HZ;
        duration_ns = (uint64_t)req->seconds * 1000000000ull;
    } else {
        uint64_t hz = (1000000000ull + req->interval_ns / 2) / req->interval_ns;

        r->mode = AG_MODE_WALL;
        r->hz = hz < 1 ? 1 : hz > 1000 ? 1000 : (unsigned)hz;
        duration_ns = (uint64_t)req->samples * req->interval_ns;
    }
    err = pp_profile_new(NULL, &r->profile, why, sizeof(why));
    if (err != 0) {
        free(r);
        return err;
    }
    r->tap.on_sample = bridge_http_on_sample;
    r->tap.ctx = r;
    err = bridge_tap_add(&r->tap);
    if (err != 0) {
        pp_profile_free(r->profile);
        free(r);
        return err; /* -EBUSY: a pipeprof_start() recording owns the agent: 429 */
    }
    err = bridge_agent_start();
    err = err != 0 ? err : ag_sampling_acquire(r->mode, r->hz);
    if (err != 0) {
        bridge_tap_remove(&r->tap);
        pp_profile_free(r->profile);
        free(r);
        return err;
    }
    r->acquired = 1;
    ag_stats_get(&r->stats0);
    r->done = done;
    r->token = token;
    r->start_ns = nt_clock_now();
    r->names_ns = r->start_ns;
    r->duration_ns = duration_ns;
    /* Wall mode: until the first pass, the window is open-ended, and the end is due at the latest
     * BRIDGE_HTTP_FIRST_PASS_MS later than asked (the HTTP server allows 30 s more). CPU mode
     * has no first pass to wait for (an idle process burns no CPU): its window is the request's. */
    r->before_first = r->mode == AG_MODE_WALL;
    r->end_ns = r->before_first ? UINT64_MAX : r->start_ns + duration_ns;
    uv_timer_init(bridge_http.loop, &r->end_timer);
    uv_timer_init(bridge_http.loop, &r->pump_timer);
    r->end_timer.data = r;
    r->pump_timer.data = r;
    r->open_handles = 2;
    uv_timer_start(&r->pump_timer, bridge_http_pump_cb, BRIDGE_HTTP_PUMP_MS, BRIDGE_HTTP_PUMP_MS);
    uv_timer_start(&r->end_timer, bridge_http_end_cb,
                   duration_ns / 1000000 + (r->before_first ? BRIDGE_HTTP_FIRST_PASS_MS : 0), 0);
    *handle = r;
    return 0;
}

static void
bridge_http_sample_cancel(void *ctx, void *handle)
{
    (void)ctx;
    bridge_http_rec_end(handle);
}

static const struct http_backend bridge_http_backend = {
    bridge_http_sample_start,
    bridge_http_sample_cancel,
    NULL,
};

static int
bridge_http_loop_start(void *ctx, void *loop)
{
    struct http_server_options opts;
    char err[256], url[256];
    int rc;

    (void)ctx;
    memset(&opts, 0, sizeof(opts));
    opts.url = bridge_http.url;
    opts.allow_remote = bridge_http.allow_remote;
    opts.allow_tcp = bridge_http.allow_tcp;
    opts.token = bridge_http.token;
    /* Recordings are taps that keep their own rate and mode, so a few can run at once. */
    opts.max_sampling = BRIDGE_HTTP_MAX_RECORDINGS;
    bridge_http.loop = loop;
    rc = http_server_start(loop, &opts, &bridge_http_backend, &bridge_http.server, err,
                           sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "pipeprof: sampling server not started: %s\n", err);
        return rc;
    }
    /* An ephemeral port (":0") is useless unless somebody learns it. */
    if (strstr(bridge_http.url, ":0") != NULL &&
        strstr(bridge_http.url, ":0") == bridge_http.url + strlen(bridge_http.url) - 2) {
        fprintf(stderr, "pipeprof: sampling server on %s\n",
                http_server_url(bridge_http.server, url, sizeof(url)));
    }
    return 0;
}

static void
bridge_http_loop_stop(void *ctx)
{
    (void)ctx;
    http_server_stop(bridge_http.server);
    bridge_http.server = NULL;
}

/* The first of the names that is set and not empty. */
static const char *
bridge_http_env(const char *const *names)
{
    for (; *names != NULL; names++) {
        const char *v = getenv(*names);

        if (v != NULL && v[0] != '\0') {
            return v;
        }
    }
    return NULL;
}

int
bridge_http_configure(struct ipc_server_options *opts, int sampling)
{
    /* pipeprof's names first, then swift-profile-recorder's (older SWIPR_ and newer
     * PROFILE_RECORDER_ spellings), so that its scripts and sidecars work as they are. */
    static const char *const url_names[] = { "PIPEPROF_SAMPLING_SERVER_URL",
                                             "SWIPR_SAMPLING_SERVER_URL",
                                             "PROFILE_RECORDER_SERVER_URL", NULL };
    static const char *const pattern_names[] = { "PIPEPROF_SAMPLING_SERVER_URL_PATTERN",
                                                 "SWIPR_SAMPLING_SERVER_URL_PATTERN",
                                                 "PROFILE_RECORDER_SERVER_URL_PATTERN", NULL };
    const char *url = bridge_http_env(url_names), *remote, *tcp, *token;
    struct http_url parsed;
    char err[256];

    if (url == NULL) {
        url = bridge_http_env(pattern_names); /* {PID} is expanded by http_url_parse */
    }
    if (url == NULL) {
        return 0;
    }
    remote = getenv("PIPEPROF_SAMPLING_SERVER_ALLOW_REMOTE");
    bridge_http.allow_remote = remote != NULL && strcmp(remote, "1") == 0;
    if (strlen(url) >= sizeof(bridge_http.url)) {
        fprintf(stderr, "pipeprof: sampling server not started: the URL is too long\n");
        return -ENAMETOOLONG;
    }
    if (http_url_parse(url, bridge_http.allow_remote, &parsed, err, sizeof(err)) != 0) {
        fprintf(stderr, "pipeprof: sampling server not started: %s\n", err);
        return -EINVAL;
    }
    /* TCP is opt-in by a name that says what it exposes; a Unix socket is 0600 */
    tcp = getenv("PIPEPROF_SAMPLING_SERVER_TCP_OPEN_TO_LOCAL_USERS");
    bridge_http.allow_tcp = tcp != NULL && strcmp(tcp, "1") == 0;
    if (parsed.family != AF_UNIX && !bridge_http.allow_tcp) {
        fprintf(stderr,
                "pipeprof: sampling server not started: on TCP (%s) every local user could make "
                "this process sample itself and read its stacks, thread names and module paths; "
                "use unix:///PATH, or set PIPEPROF_SAMPLING_SERVER_TCP_OPEN_TO_LOCAL_USERS=1\n",
                url);
        return -EACCES;
    }
    token = getenv("PIPEPROF_SAMPLING_SERVER_TOKEN");
    if (token != NULL && strlen(token) >= sizeof(bridge_http.token)) {
        fprintf(stderr, "pipeprof: sampling server not started: the token is longer than %u\n",
                HTTP_MAX_TOKEN);
        return -EINVAL;
    }
    snprintf(bridge_http.token, sizeof(bridge_http.token), "%s", token != NULL ? token : "");
    snprintf(bridge_http.url, sizeof(bridge_http.url), "%s", url);
    bridge_http.sampling = sampling;
    opts->loop_start = bridge_http_loop_start;
    opts->loop_stop = bridge_http_loop_stop;
    opts->loop_ctx = NULL;
    return 1;
}
