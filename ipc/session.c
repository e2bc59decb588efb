/* SPDX-License-Identifier: MIT */
/*
 * ipc/session.c - tracing sessions: each CollectTracing connection becomes a nettrace stream fed
 * by an nt_writer whose sink queues bytes on the connection: whatever the event source writes on
 * the drain timer. StopTracing drains, runs rundown, writes ProcessInfo (at the end, on the loop
 * thread, as the runtime does), the end tag, closes the stream, and only then answers. Context: the
 * loop thread. It must never block on a client: bytes queued for a session are capped, and events
 * beyond the cap are dropped and counted (nt_writer_note_lost), never the stream's own bytes, which
 * would corrupt it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/proc-start.h"
#include "ipc/internal.h"

struct ipc_stream_write {
    uv_write_t req;
    struct ipc_session *ss;
    uint8_t *buf;
    size_t len;
};

/* The session is freed when its stream is closed and every write it queued has completed. */
static void
ipc_session_unref(struct ipc_session *ss)
{
    if (--ss->refs > 0) {
        return;
    }
    ipc_merge_release(ss->merge);
    ipc_collect_fini(&ss->req);
    nt_writer_free(ss->w);
    free(ss->pend);
    free(ss);
}

/* A file session's sink: whole blocks go straight into the file, so that what a process that
 * dies has flushed is there. */
static int
ipc_session_file_write(struct ipc_session *ss, const uint8_t *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(ss->fd, buf, len);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            ss->sink_err = n < 0 ? -errno : -EIO;
            return ss->sink_err;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static int
ipc_session_sink_write(void *ctx, const void *buf, size_t len)
{
    struct ipc_session *ss = ctx;

    if (ss->fd >= 0) {
        return ipc_session_file_write(ss, buf, len);
    }
    if (ss->pend_cap - ss->pend_len < len) {
        size_t cap = ss->pend_cap ? ss->pend_cap : 64 * 1024;
        uint8_t *grown;

        while (cap - ss->pend_len < len) {
            cap *= 2;
        }
        grown = realloc(ss->pend, cap);
        if (grown == NULL) {
            ss->sink_err = -ENOMEM;
            return -ENOMEM;
        }
        ss->pend = grown;
        ss->pend_cap = cap;
    }
    memcpy(ss->pend + ss->pend_len, buf, len);
    ss->pend_len += len;
    return 0;
}

static void
ipc_session_write_done(uv_write_t *req, int status)
{
    struct ipc_stream_write *sw = (struct ipc_stream_write *)req;
    struct ipc_session *ss = sw->ss;

    ss->queued -= sw->len;
    free(sw->buf);
    free(sw);
    if (status < 0 && status != UV_ECANCELED && ss->conn != NULL) {
        /* EPIPE/ECONNRESET: the client is gone (SIGPIPE is blocked on this thread). */
        ipc_conn_close(ss->conn);
    }
    ipc_session_unref(ss);
}

/* Hands the pending sink bytes to libuv in one write. */
static void
ipc_session_kick(struct ipc_session *ss)
{
    struct ipc_stream_write *sw;
    uv_buf_t b;

    if (ss->conn == NULL || ss->pend_len == 0) {
        return;
    }
    sw = malloc(sizeof(*sw));
    if (sw == NULL) {
        return; /* retried at the next tick */
    }
    sw->ss = ss;
    sw->buf = ss->pend;
    sw->len = ss->pend_len;
    ss->pend = NULL;
    ss->pend_len = ss->pend_cap = 0;
    ss->queued += sw->len;
    ss->refs++;
    b = uv_buf_init((char *)sw->buf, (unsigned)sw->len);
    if (uv_write(&sw->req, (uv_stream_t *)&ss->conn->pipe, &b, 1, ipc_session_write_done) < 0) {
        ss->queued -= sw->len;
        ss->refs--;
        free(sw->buf);
        free(sw);
        ipc_conn_close(ss->conn);
    }
}

static int
ipc_session_congested(const struct ipc_session *ss)
{
    return ss->queued + ss->pend_len > ss->srv->queue_cap;
}

static void
ipc_session_drain_some(struct ipc_server *s, struct ipc_session *only)
{
    struct ipc_session_view views[IPC_MAX_SESSIONS];
    struct ipc_session *ss;
    size_t n = 0;
    int err;

    for (ss = s->sessions; ss != NULL && n < IPC_MAX_SESSIONS; ss = ss->next) {
        if (ss->finished || ss->w == NULL || (only != NULL && ss != only)) {
            continue;
        }
        if (ss->merge != NULL) {
            err = ipc_merge_pump(ss, ipc_session_congested(ss));
            if (err < 0) {
                ipc_log(s, "session %llx: the runtime's events: %s",
                        (unsigned long long)ss->cfg.session_id, strerror(-err));
            }
            ss->merge_done = err > 0;
        }
        views[n].config = &ss->cfg;
        views[n].writer = ss->w;
        views[n].congested = ipc_session_congested(ss);
        views[n].final = only != NULL;
        views[n].unsampled = ss->lazy == 1;
        n++;
    }
    if (n > 0 && s->source != NULL && s->source->drain != NULL) {
        err = s->source->drain(s->source->ctx, views, n);
        if (err < 0) {
            ipc_log(s, "event source: drain failed: %s", strerror(-err));
        }
    }
}

/* A file session names the addresses its new events referenced, every IPC_OUTPUT_NAMES_MS. */
static void
ipc_session_write_names(struct ipc_session *ss, uint64_t now)
{
    struct ipc_server *s = ss->srv;
    int err;

    if (s->source == NULL || s->source->names == NULL ||
        now - ss->names_ns < IPC_OUTPUT_NAMES_MS * 1000000ull) {
        return;
    }
    ss->names_ns = now;
    err = s->source->names(s->source->ctx, &ss->cfg, ss->w);
    if (err < 0) {
        ipc_log(s, "event source: names failed: %s", strerror(-err));
    }
}

static void ipc_session_close_stream(struct ipc_session *ss);

/* Whether a lazy session took a sample: then it has something worth a connection. */
static int
ipc_session_sampled(struct ipc_session *ss)
{
    const struct ipc_event_source *src = ss->srv->source;

    return src == NULL || src->sampled == NULL || src->sampled(src->ctx, &ss->cfg);
}

void
ipc_session_drain_all(struct ipc_server *s)
{
    struct ipc_session *ss, *next;
    uint64_t now = nt_clock_now();

    ipc_session_drain_some(s, NULL);
    for (ss = s->sessions; ss != NULL; ss = next) {
        next = ss->next;
        if (ss->lazy == 1 && ipc_session_sampled(ss)) {
            ss->lazy = 2;
            ipc_port_stream(s->lazy_port, ss);
        }
        if (ss->merge_stopping && ss->merge_done && !ss->finished) {
            ipc_session_merge_ended(ss); /* the runtime's rundown is in: ours follows */
            continue;
        }
        if (!ss->finished && ss->fd >= 0) {
            ipc_session_write_names(ss, now);
        }
        if (!ss->finished && ss->w != NULL && nt_writer_poll(ss->w, now) < 0) {
            ipc_log(s, "session %llx: stream failed", (unsigned long long)ss->cfg.session_id);
            if (ss->conn != NULL) {
                ipc_conn_close(ss->conn);
            } else if (ss->fd >= 0) {
                ipc_session_close_stream(ss);
            }
            continue;
        }
        ipc_session_kick(ss);
    }
    if (s->shutting_down && !ipc_session_merges_pending(s) &&
        !uv_is_closing((uv_handle_t *)&s->drain)) {
        uv_close((uv_handle_t *)&s->drain, NULL); /* the last merged session of a stop ended */
    }
}

static int ipc_session_write_process_info(struct ipc_session *ss);

/* Last drain, optional rundown, ProcessInfo, end tag: the stream is complete once the bytes are
 * written. */
static void
ipc_session_finish_drained(struct ipc_session *ss, int rundown)
{
    struct ipc_server *s = ss->srv;
    int err;

    if (rundown && ss->cfg.rundown_keyword != 0 && s->source != NULL &&
        s->source->rundown != NULL) {
        err = s->source->rundown(s->source->ctx, &ss->cfg, ss->w);
        if (err < 0) {
            ipc_log(s, "event source: rundown failed: %s", strerror(-err));
        }
    }
    /* A merged session carries the runtime's own ProcessInfo, written at its end. */
    err = ss->runtime_process_info ? 0 : ipc_session_write_process_info(ss);
    if (err < 0) {
        ipc_log(s, "session %llx: ProcessInfo: %s", (unsigned long long)ss->cfg.session_id,
                strerror(-err));
    }
    ss->finished = 1;
    err = nt_writer_finish(ss->w);
    if (err < 0) {
        ipc_log(s, "session %llx: end of stream failed: %s", (unsigned long long)ss->cfg.session_id,
                strerror(-err));
    }
    ipc_merge_finished(ss); /* every late event counted now, before the stream closes */
    ipc_session_kick(ss);
}

static void
ipc_session_finish(struct ipc_session *ss, int rundown)
{
    if (ss->finished) {
        return;
    }
    ipc_session_drain_some(ss->srv, ss);
    ipc_session_finish_drained(ss, rundown);
}

static void
ipc_session_shutdown_done(uv_shutdown_t *req, int status)
{
    struct ipc_conn *c = req->data;

    (void)status;
    free(req);
    ipc_conn_close(c); /* no-op when it is already closing */
}

/* Closes the stream after every queued byte has been written (a file session: now). */
static void
ipc_session_close_stream(struct ipc_session *ss)
{
    uv_shutdown_t *req;

    if (ss->fd >= 0) { /* a file session: its bytes are written; it ends here */
        if (close(ss->fd) < 0 && ss->sink_err == 0) {
            ipc_log(ss->srv, "session %llx: closing the output file: %s",
                    (unsigned long long)ss->cfg.session_id, strerror(errno));
        }
        ss->fd = -1;
        ipc_session_conn_closed(ss);
        return;
    }
    if (ss->conn == NULL || ss->conn->state == IPC_CONN_CLOSING) {
        return;
    }
    uv_read_stop((uv_stream_t *)&ss->conn->pipe);
    req = malloc(sizeof(*req));
    if (req == NULL) {
        ipc_conn_close(ss->conn);
        return;
    }
    req->data = ss->conn;
    if (uv_shutdown(req, (uv_stream_t *)&ss->conn->pipe, ipc_session_shutdown_done) < 0) {
        free(req);
        ipc_conn_close(ss->conn);
    }
}

void
ipc_session_conn_closed(struct ipc_session *ss)
{
    struct ipc_server *s = ss->srv;
    struct nt_writer_stats st;
    uint8_t msg[28];

    ss->conn = NULL;
    ipc_merge_release(ss->merge); /* the runtime's session ends when its reader leaves */
    ss->merge = NULL;
    if (ss->prev != NULL) {
        ss->prev->next = ss->next;
    } else {
        s->sessions = ss->next;
    }
    if (ss->next != NULL) {
        ss->next->prev = ss->prev;
    }
    s->session_count--;
    if (ss->w != NULL) {
        nt_writer_get_stats(ss->w, &st);
        IPC_STAT(s, lost_events, st.lost);
    }
    IPC_STAT(s, active_sessions, (uint64_t)-1);
    if (ss->source_started && s->source != NULL && s->source->session_stop != NULL) {
        s->source->session_stop(s->source->ctx, &ss->cfg);
    }
    if (s->session_count == 0) {
        uv_timer_stop(&s->drain);
    }
    if (ss->stop_conn != NULL) {
        struct ipc_conn *c = ss->stop_conn;

        ss->stop_conn = NULL;
        c->stopping = NULL;
        ipc_conn_respond(c, msg, ipc_ok_u64_encode(msg, ss->cfg.session_id));
    }
    ipc_session_unref(ss);
}

static void
ipc_session_drain_tick(uv_timer_t *t)
{
    ipc_session_drain_all(t->data);
}

static int
ipc_session_write_process_info(struct ipc_session *ss)
{
    const struct ipc_process_info *pi = &ss->srv->info;
    uint8_t buf[8192];
    struct nt_payload p;
    struct nt_event ev;
    uint32_t id;
    int err;

    err = nt_writer_define(ss->w, nt_known_event_desc(NT_KNOWN_PROCESS_INFO), &id);
    if (err < 0) {
        return err;
    }
    nt_payload_init(&p, buf, sizeof(buf));
    nt_payload_process_info(&p, pi->command_line, pi->os, pi->arch);
    if (p.err < 0) {
        /* a command line too long for the buffer: name the process by its executable only */
        nt_payload_init(&p, buf, sizeof(buf));
        nt_payload_process_info(&p, ss->srv->entrypoint, pi->os, pi->arch);
    }
    if (p.err < 0) {
        return p.err;
    }
    memset(&ev, 0, sizeof(ev));
    ev.metadata_id = id;
    /* As the runtime does: at the end, from the thread that ends the session (ours), so no
     * consumer takes its fields for a frame of one of the host's threads. */
    ev.thread_id = (uint64_t)syscall(SYS_gettid);
    ev.capture_thread_id = ev.thread_id;
    ev.processor = 0xFFFFFFFFu;
    ev.timestamp = nt_clock_now();
    ev.payload = buf;
    ev.payload_size = (uint32_t)p.len;
    return nt_writer_write(ss->w, &ev);
}

/*
 * A new session of s for req (taken), fed by merge when it is not NULL (the session takes its
 * reference). Its stream goes into the file fd, or, when fd < 0, queues for a connection behind
 * the OK response. Returns 0 with the session in s's list, or a negative errno (-EBUSY: the
 * runtime's 64 sessions; req and merge are released, fd is left to the caller).
 */
static int
ipc_session_create(struct ipc_server *s, struct ipc_collect *req, struct ipc_merge *merge,
                   uint64_t runtime_id, int fd, struct ipc_session **out)
{
    struct nt_writer_options wo;
    struct ipc_session *ss;
    uint8_t msg[28];
    int err = 0;

    *out = NULL;
    ss = s->session_count < IPC_MAX_SESSIONS ? calloc(1, sizeof(*ss)) : NULL;
    if (ss == NULL) {
        ipc_collect_fini(req);
        ipc_merge_release(merge);
        return s->session_count < IPC_MAX_SESSIONS ? -ENOMEM : -EBUSY;
    }
    ss->srv = s;
    ss->refs = 1;
    ss->fd = fd;
    ss->merge = merge;
    ss->runtime_session_id = runtime_id;
    ss->req = *req;
    memset(req, 0, sizeof(*req));
    /* Like the runtime, the id is the session's address: non-zero and unique while it lives. */
    ss->cfg.session_id = (uint64_t)(uintptr_t)ss;
    ss->cfg.providers = ss->req.providers;
    ss->cfg.provider_count = ss->req.provider_count;
    ss->cfg.rundown_keyword = ss->req.rundown_keyword;
    ss->cfg.request_stackwalk = ss->req.request_stackwalk;
    ss->cfg.runtime_merged = merge != NULL;
    ss->sink.write = ipc_session_sink_write;
    ss->sink.ctx = ss;
    if (fd < 0) {
        /* The OK response goes first in the same byte queue, so it always precedes the stream. */
        ipc_ok_u64_encode(msg, ss->cfg.session_id);
        err = ipc_session_sink_write(ss, msg, sizeof(msg));
    }
    if (err == 0) {
        memset(&wo, 0, sizeof(wo));
        if (merge != NULL) {
            /* the runtime's events arrive up to a few hundred ms after the agent's samples, and
             * its first ones precede this session (it was asked first) */
            wo.reorder_window_ns = IPC_MERGE_REORDER_NS;
            ipc_merge_sync(merge, &wo.sync_time_ticks, &wo.sync_time_unix_ns);
        }
        if (s->source != NULL && s->source->sampling_interval_ns != NULL) {
            wo.sampling_interval_ns = s->source->sampling_interval_ns(s->source->ctx, &ss->cfg);
        }
        err = nt_writer_new(&wo, &ss->sink, &ss->w);
    }
    if (err < 0) {
        ss->fd = -1;
        ipc_session_unref(ss);
        return err;
    }
    ss->next = s->sessions;
    if (s->sessions != NULL) {
        s->sessions->prev = ss;
    }
    s->sessions = ss;
    s->session_count++;
    IPC_STAT(s, sessions, 1);
    IPC_STAT(s, active_sessions, 1);
    *out = ss;
    return 0;
}

/* The event source learns of the session, and the drain timer runs. */
static void
ipc_session_begin(struct ipc_session *ss)
{
    struct ipc_server *s = ss->srv;
    int err;

    if (s->source != NULL && s->source->session_start != NULL) {
        err = s->source->session_start(s->source->ctx, &ss->cfg);
        if (err < 0) {
            ipc_log(s, "event source: session start failed: %s", strerror(-err));
        }
    }
    ss->source_started = 1;
    if (!uv_is_active((uv_handle_t *)&s->drain)) {
        s->drain.data = s;
        uv_timer_start(&s->drain, ipc_session_drain_tick, IPC_DRAIN_INTERVAL_MS,
                       IPC_DRAIN_INTERVAL_MS);
    }
}

void
ipc_session_collect(struct ipc_conn *c, struct ipc_collect *req, struct ipc_merge *merge,
                    uint64_t runtime_id)
{
    struct ipc_server *s = c->srv;
    struct ipc_port *port = c->port;
    struct ipc_session *ss;
    int err;

    err = ipc_session_create(s, req, merge, runtime_id, -1, &ss);
    if (err < 0) {
        if (err != -EBUSY) {
            ipc_log(s, "cannot start a session: %s", strerror(-err));
        }
        ipc_conn_respond_error(c, IPC_HR_FAIL); /* what the runtime answers past 64 sessions */
        return;
    }
    ss->conn = c;
    c->session = ss;
    c->state = IPC_CONN_STREAMING;
    ipc_conn_start_reading(c, 0); /* only to notice the client leaving */
    if (c->state == IPC_CONN_CLOSING) {
        return;
    }
    ipc_session_kick(ss);
    ipc_session_begin(ss);
    if (s->resume_at_session && port != NULL) {
        /* Its sampling runs: the start-up it held need not wait for a ResumeRuntime, which would
         * cost the tool and this process one more connection each (`record`'s short children). */
        ipc_port_resume(s, port);
    }
}

/*
 * A session this server starts by itself, with providers, as a CollectTracing2 with rundown
 * would: into the file fd, or (fd < 0) queued in memory for a connection made later. Returns 0
 * with *out begun, or a negative errno with *why set when the providers were refused.
 */
static int
ipc_session_start_own(struct ipc_server *s, const char *providers, int fd, int stackwalk,
                      const char **why, struct ipc_session **out)
{
    struct ipc_collect req;
    int err;

    memset(&req, 0, sizeof(req));
    req.command_id = IPC_EP_COLLECT_TRACING2;
    req.buffer_mb = 256;
    req.format = 1;
    req.request_rundown = 1;
    req.rundown_keyword = IPC_DEFAULT_RUNDOWN_KEYWORD;
    req.request_stackwalk = (uint8_t)stackwalk;
    *why = NULL;
    err = ipc_providers_parse(providers, &req, why);
    if (err < 0) {
        ipc_collect_fini(&req);
        return err;
    }
    err = ipc_session_create(s, &req, NULL, 0, fd, out);
    if (err == 0) {
        ipc_session_begin(*out);
    }
    return err;
}

void
ipc_session_output_start(struct ipc_server *s)
{
    struct ipc_session *ss;
    const char *why = NULL;
    int fd = s->output_fd, err;

    s->output_fd = -1;
    err = ipc_session_start_own(s, s->output_providers, fd, 0, &why, &ss);
    if (err < 0) {
        ipc_log(s, "the output file is not written: %s", why != NULL ? why : strerror(-err));
        close(fd);
    }
}

int
ipc_session_lazy_start(struct ipc_server *s)
{
    struct ipc_session *ss;
    const char *why = NULL;
    int err;

    /* As `record`'s CollectTracing asks (cli/diag.c): stacks, rundown at the end. */
    err = ipc_session_start_own(s, s->lazy_providers, -1, 1, &why, &ss);
    if (err < 0) {
        ipc_log(s, "the recording's session did not start here: %s",
                why != NULL ? why : strerror(-err));
        return err;
    }
    ss->lazy = 1;
    return 0;
}

void
ipc_session_attach(struct ipc_session *ss, struct ipc_conn *c)
{
    ss->lazy = 0;
    ss->conn = c;
    c->session = ss;
    c->state = IPC_CONN_STREAMING;
    ipc_conn_start_reading(c, 0); /* only to notice the client leaving */
    if (c->state == IPC_CONN_CLOSING) {
        return;
    }
    ipc_session_kick(ss);
    if (ss->finished) {
        ipc_session_close_stream(ss); /* the stop came first: everything is queued */
    }
}

static void
ipc_session_stop_timeout(uv_timer_t *t)
{
    struct ipc_conn *c = t->data;

    /* The client does not read its stream: drop what is queued and close it anyway. */
    if (c->stopping != NULL && c->stopping->conn != NULL) {
        IPC_STAT(c->srv, stop_drain_timeouts, 1); /* before the close answers the stop */
        ipc_conn_close(c->stopping->conn);
    }
}

static void
ipc_session_merge_timeout(uv_timer_t *t)
{
    struct ipc_conn *c = t->data;

    /* The runtime did not end its stream in time: end ours without the rest of it. */
    if (c->stopping != NULL) {
        ipc_log(c->srv, "session %llx: the runtime did not end its session in %d ms",
                (unsigned long long)c->stopping->cfg.session_id, IPC_MERGE_STOP_TIMEOUT_MS);
        ipc_session_merge_ended(c->stopping);
    }
}

void
ipc_session_merge_ended(struct ipc_session *ss)
{
    struct ipc_conn *c = ss->stop_conn;

    if (ss->finished) {
        return;
    }
    ipc_session_finish(ss, 1);
    ipc_merge_release(ss->merge);
    ss->merge = NULL;
    if (c != NULL) {
        uv_timer_start(&c->timer, ipc_session_stop_timeout, IPC_STOP_DRAIN_TIMEOUT_MS, 0);
    }
    ipc_session_close_stream(ss);
}

void
ipc_session_stop_request(struct ipc_conn *c, uint64_t id)
{
    struct ipc_server *s = c->srv;
    struct ipc_session *ss;
    uint8_t msg[28];

    for (ss = s->sessions; ss != NULL; ss = ss->next) {
        if (ss->cfg.session_id == id && ss->stop_conn == NULL && !ss->finished) {
            break;
        }
    }
    if ((ss == NULL || ss->conn == NULL) && s->dotnet) {
        ipc_upstream_forward(c); /* perhaps a session a client started with the runtime itself */
        return;
    }
    if (ss == NULL || ss->conn == NULL) {
        /* Unknown id: the runtime silently answers OK. */
        ipc_conn_respond(c, msg, ipc_ok_u64_encode(msg, id));
        return;
    }
    c->state = IPC_CONN_BUSY;
    c->stopping = ss;
    ss->stop_conn = c;
    if (ss->merge != NULL) {
        /* The runtime ends its session first (its rundown names the managed frames); the end of
         * its stream then ends ours (ipc_session_drain_all()). */
        ss->merge_stopping = 1;
        uv_timer_start(&c->timer, ipc_session_merge_timeout, IPC_MERGE_STOP_TIMEOUT_MS, 0);
        ipc_upstream_stop_session(ss);
        return;
    }
    ipc_session_finish(ss, 1);
    uv_timer_start(&c->timer, ipc_session_stop_timeout, IPC_STOP_DRAIN_TIMEOUT_MS, 0);
    ipc_session_close_stream(ss);
}

/* A lazy session ends without a sample: its pid and start time go to the tally, in one append (a
 * line is never split by another process's; the start time tells apart two processes a reused
 * pid named, common/proc-start.h). Best effort: a process that cannot open it (another uid) is
 * not counted. */
static void
ipc_session_tally(struct ipc_server *s)
{
    char line[48];
    int fd, n;

    if (s->lazy_tally == NULL) {
        return;
    }
    n = snprintf(line, sizeof(line), "%ld %llu\n", (long)getpid(),
                 (unsigned long long)pp_proc_start_ticks(0));
    fd = open(s->lazy_tally, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    if (write(fd, line, (size_t)n) != n) {
        ipc_log(s, "the recording's tally: %s", strerror(errno));
    }
    close(fd);
}

void
ipc_session_lazy_unstarted(struct ipc_server *s)
{
    ipc_session_tally(s);
}

/*
 * The stop of a lazy session: one that never took a sample ends here with nothing written and
 * no connection made (no rundown either: it named nothing); one that did is finished, queued
 * whole, and streamed once its connection is made (ipc_session_attach() closes it then).
 */
static void
ipc_session_lazy_stop(struct ipc_session *ss)
{
    struct ipc_server *s = ss->srv;

    if (ss->lazy == 1) {
        ipc_session_drain_some(s, ss); /* its last samples may be the first */
        if (!ipc_session_sampled(ss)) {
            ipc_session_conn_closed(ss);
            ipc_session_tally(s);
            return;
        }
        ipc_session_finish_drained(ss, 1);
    } else {
        ipc_session_finish(ss, 1);
    }
    if (!s->lazy_port->connecting) {
        /* not connecting yet, or waiting for a retry the stop cancelled: connect now */
        ss->lazy = 2;
        ipc_port_stream(s->lazy_port, ss);
    }
}

void
ipc_session_shutdown_all(struct ipc_server *s)
{
    struct ipc_session *ss, *next;

    /* The host is exiting: rundown still names the sampled functions (a session that asked for
     * rundown gets it whether it ends by StopTracing or with the process), which is what lets
     * `pipeprof record` name the functions of a command that simply exits. A merged session
     * waits, within the shutdown's grace, for the runtime to end its stream: the runtime writes
     * its rundown as it shuts down, and cutting it short would leave methods without their
     * modules (ipc_session_shutdown_late()). */
    for (ss = s->sessions; ss != NULL; ss = next) {
        next = ss->next;
        if (ss->merge != NULL && !ss->finished) {
            if (!ss->merge_stopping) {
                ss->merge_stopping = 1;
                ipc_upstream_stop_session(ss);
            }
            continue;
        }
        if (ss->lazy != 0) {
            ipc_session_lazy_stop(ss);
            continue;
        }
        ipc_session_finish(ss, 1);
        ipc_session_close_stream(ss);
    }
}

int
ipc_session_merges_pending(const struct ipc_server *s)
{
    const struct ipc_session *ss;

    for (ss = s->sessions; ss != NULL; ss = ss->next) {
        if (ss->merge != NULL && !ss->finished) {
            return 1;
        }
    }
    return 0;
}

void
ipc_session_shutdown_late(struct ipc_server *s)
{
    struct ipc_session *ss, *next;

    for (ss = s->sessions; ss != NULL; ss = next) {
        next = ss->next;
        if (!ss->finished) {
            ipc_log(s, "session %llx: the runtime did not end its stream before the exit",
                    (unsigned long long)ss->cfg.session_id);
            ipc_session_merge_ended(ss);
        }
    }
}
