/* SPDX-License-Identifier: MIT */
/*
 * http/server.c - the libuv side of pp_http: the listening socket, one struct http_conn per
 * client, its deadline timer, the backend calls, and the response writes. Parsing and routing
 * are in request.c and route.c.
 *
 * A connection moves READING -> (SAMPLING) -> WRITING -> LINGER -> CLOSING, and every state
 * has a bound: the request must arrive within request_timeout_ms (else 408), a recording may
 * overrun its duration by HTTP_SAMPLE_GRACE_MS (else 500), the response must be read within
 * write_timeout_ms, and after the response the connection lingers at most HTTP_LINGER_MS,
 * reading and dropping what the client still sends so that closing does not reset the
 * connection before the client has read an early error answer (one answered before its request
 * came lingers up to request_timeout_ms for it). Nothing queues: at
 * max_connections the oldest idle connection (still reading its request, preferably one that
 * sent nothing) is closed to make room, so that clients holding connections open cannot keep
 * others out; only when none is idle a client is answered 503 through the same write-and-linger
 * path (so it reads the answer rather than a reset), beyond HTTP_REJECT_FACTOR times that it is
 * closed at once, and beyond max_sampling a request is answered 429. With a token, a request
 * without it is answered 401 before anything else.
 *
 * Context: the loop thread only (see http/http.h). Memory of a connection is released in the
 * close callbacks of its two handles, never earlier.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <uv.h>

#include "http/internal.h"

#define HTTP_LINGER_MS       2000u
#define HTTP_LINGER_MAX      (1u << 20) /* bytes dropped while lingering before giving up */
#define HTTP_SAMPLE_GRACE_MS 30000u     /* a recording may overrun its duration this much */
#define HTTP_READ_BUF        4096u
#define HTTP_REJECT_FACTOR   4u /* connections over the limit still answered 503, per allowed one */
/* A connection silent this long while its request is incomplete may be closed for a newcomer:
 * a client sends its request within milliseconds of connecting, so a burst of real clients is
 * never closed (they get 503), while connections held open to block others are. */
#define HTTP_IDLE_EVICT_MS   1000u

enum http_conn_state {
    HTTP_CONN_READING,  /* receiving the request; request deadline */
    HTTP_CONN_SAMPLING, /* the backend records; reading only to notice a hang-up */
    HTTP_CONN_WRITING,  /* the response is being written; write deadline */
    HTTP_CONN_LINGER,   /* response sent and FIN sent; dropping input until EOF or deadline */
    HTTP_CONN_CLOSING,  /* uv_close() called on both handles */
};

union http_stream {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
};

struct http_conn {
    union http_stream h;
    uv_timer_t timer;
    uv_write_t write_req;
    uv_write_t continue_req;
    uv_shutdown_t shutdown_req;
    struct http_server *server;
    struct http_conn *prev, *next; /* server->conns */
    enum http_conn_state state;
    int open_handles;   /* 2 until the close callbacks ran */
    int received;       /* any byte arrived */
    uint64_t active_ms; /* uv_now() at accept and at the last byte received */
    int continue_sent;  /* "100 Continue" was written */
    int peer_eof;       /* the client has finished sending (half-closed or gone) */
    int unasked;        /* answered before any byte of its request came (a 503 at the limit) */
    int sampling;       /* counted in server->sampling; the backend owes done or a cancel */
    void *sample_handle;
    uint64_t sample_end_ms; /* uv_now() when the recording should be over (Retry-After) */
    struct http_sample_request sample; /* what is being recorded, and in which format */
    size_t dropped;                    /* bytes read and ignored after the request */
    struct http_request req;
    struct http_response resp;
    char rbuf[HTTP_READ_BUF];
};

struct http_server {
    uv_loop_t *loop;
    union http_stream listener;
    int listener_open; /* the listener's close callback has not run yet */
    int stopping;
    struct http_url url;
    struct http_server_options opts; /* defaults filled in; url not kept */
    struct http_backend backend;
    struct http_conn *conns;
    _Atomic unsigned conn_count; /* in conns, closing ones included (read by http_server_counts) */
    unsigned closing;            /* of those, closed and waiting for their close callbacks */
    _Atomic uint64_t reads;      /* reads that brought a connection request bytes */
    _Atomic unsigned open_at_accept; /* conn_count - closing as the last newcomer came */
    char token[HTTP_MAX_TOKEN + 1];
    size_t token_len; /* 0: no token required */
    unsigned sampling;
    dev_t sock_dev; /* the Unix socket file we created, to remove only our own */
    ino_t sock_ino;
};

/* A client far over the limit: accepted only to be closed. */
struct http_reject {
    union http_stream h;
};

static const char http_continue[] = "HTTP/1.1 100 Continue\r\n\r\n";

static void http_conn_close(struct http_conn *c);
static void http_conn_respond(struct http_conn *c, struct http_response *resp);

/* ------------------------------------------------------------------------------------------ */
/* Teardown                                                                                   */
/* ------------------------------------------------------------------------------------------ */

static void
http_server_maybe_free(struct http_server *s)
{
    if (s->stopping && !s->listener_open && s->conns == NULL) {
        free(s);
    }
}

static void
http_on_conn_handle_closed(uv_handle_t *h)
{
    struct http_conn *c = h->data;
    struct http_server *s = c->server;

    if (--c->open_handles > 0) {
        return;
    }
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        s->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    s->conn_count--;
    s->closing--;
    http_request_fini(&c->req);
    http_response_fini(&c->resp);
    free(c);
    http_server_maybe_free(s);
}

/* Ends a recording this connection waits for, if any. */
static void
http_conn_cancel_sampling(struct http_conn *c)
{
    struct http_server *s = c->server;

    if (!c->sampling) {
        return;
    }
    c->sampling = 0;
    s->sampling--;
    if (s->backend.sample_cancel != NULL) {
        s->backend.sample_cancel(s->backend.ctx, c->sample_handle);
    }
    c->sample_handle = NULL;
}

static void
http_conn_close(struct http_conn *c)
{
    if (c->state == HTTP_CONN_CLOSING) {
        return;
    }
    http_conn_cancel_sampling(c);
    c->state = HTTP_CONN_CLOSING;
    c->server->closing++;
    uv_close(&c->h.handle, http_on_conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, http_on_conn_handle_closed);
}

static void http_on_timer(uv_timer_t *t);

static void
http_conn_deadline(struct http_conn *c, uint64_t ms)
{
    /* cannot fail on an initialized timer with a callback */
    (void)uv_timer_start(&c->timer, http_on_timer, ms, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* Responses                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static void
http_on_shutdown(uv_shutdown_t *req, int status)
{
    struct http_conn *c = req->data;

    if (status < 0 && c->state != HTTP_CONN_CLOSING) {
        http_conn_close(c);
    }
}

static void
http_on_write(uv_write_t *req, int status)
{
    struct http_conn *c = req->data;

    if (c->state == HTTP_CONN_CLOSING) {
        return; /* cancelled by the close; memory is released by the close callbacks */
    }
    if (status < 0) {
        http_conn_close(c);
        return;
    }
    http_response_fini(&c->resp);
    if (c->peer_eof) {
        http_conn_close(c); /* nothing left to drain: no reason to linger */
        return;
    }
    c->state = HTTP_CONN_LINGER;
    c->dropped = 0;
    c->shutdown_req.data = c;
    if (uv_shutdown(&c->shutdown_req, &c->h.stream, http_on_shutdown) != 0) {
        http_conn_close(c);
        return;
    }
    /* Answered before its request came (the limit's 503 at accept): its client may send the
     * request later, as late as a request may come, and a close before that request was read
     * reset the connection where the client would have read the 503 (2 of 100 concurrent curls
     * at a load of 8 to 9: "Recv failure: Connection reset by peer"). It lingers until then, and
     * HTTP_LINGER_MS after its first bytes. */
    c->unasked = !c->received;
    http_conn_deadline(c, c->unasked && c->server->opts.request_timeout_ms > HTTP_LINGER_MS
                                  ? c->server->opts.request_timeout_ms
                                  : HTTP_LINGER_MS);
}

/* Sends resp (taken over) and then closes the connection. */
static void
http_conn_respond(struct http_conn *c, struct http_response *resp)
{
    uv_buf_t bufs[2];
    unsigned n = 1;

    if (c->state == HTTP_CONN_CLOSING || c->state == HTTP_CONN_WRITING ||
        c->state == HTTP_CONN_LINGER) {
        http_response_fini(resp);
        return;
    }
    http_response_fini(&c->resp);
    c->resp = *resp;
    memset(resp, 0, sizeof(*resp));
    c->state = HTTP_CONN_WRITING;
    bufs[0] = uv_buf_init(c->resp.head, (unsigned)c->resp.head_len);
    if (c->resp.body_len > 0) {
        bufs[1] = uv_buf_init(c->resp.body, (unsigned)c->resp.body_len);
        n = 2;
    }
    c->write_req.data = c;
    if (uv_write(&c->write_req, &c->h.stream, bufs, n, http_on_write) != 0) {
        http_conn_close(c);
        return;
    }
    http_conn_deadline(c, c->server->opts.write_timeout_ms);
}

static void
http_conn_respond_error(struct http_conn *c, const struct http_error *e, const char *allow,
                        unsigned retry_after_s)
{
    struct http_response resp;

    if (http_response_error(&resp, e, allow, retry_after_s) != 0) {
        http_conn_close(c); /* no memory for even an error: hang up */
        return;
    }
    http_conn_respond(c, &resp);
}

static void
http_conn_fail(struct http_conn *c, int status, const char *error, const char *detail)
{
    struct http_error e = { 0 };

    http_error_set(&e, status, error, "%s", detail != NULL ? detail : "");
    http_conn_respond_error(c, &e, NULL, status == 429 ? 1 : 0);
}

/* Maps a backend errno to the answer documented in http/http.h. */
static void
http_conn_backend_error(struct http_conn *c, int err, const char *why)
{
    char detail[160];

    snprintf(detail, sizeof(detail), "%s", why != NULL && why[0] != '\0' ? why : strerror(-err));
    switch (err) {
    case -EBUSY:
        http_conn_fail(c, 429, "sampler_busy", detail);
        break;
    case -EINVAL:
        http_conn_fail(c, 400, "rejected", detail);
        break;
    case -ENOTSUP:
    case -ENOSYS:
        http_conn_fail(c, 501, "not_implemented", detail);
        break;
    default:
        http_conn_fail(c, 500, "sampling_failed", detail);
        break;
    }
}

/* Writes p in the requested format and answers it. Takes p. */
static void
http_conn_respond_profile(struct http_conn *c, struct pp_profile *p)
{
    const struct http_sample_request *rq = &c->sample;
    struct http_response resp;
    char err[160] = "", extra[160];
    char *buf = NULL;
    size_t len = 0;
    FILE *f;
    int e;

    f = open_memstream(&buf, &len);
    if (f == NULL) {
        pp_profile_free(p);
        http_conn_fail(c, 500, "out_of_memory", "no memory for the profile");
        return;
    }
    e = pp_profile_write(p, rq->format, f, err, sizeof(err));
    if (fclose(f) != 0 && e == 0) {
        e = -ENOMEM;
        snprintf(err, sizeof(err), "no memory for the profile");
    }
    pp_profile_free(p);
    if (e != 0) {
        char detail[200];

        free(buf);
        snprintf(detail, sizeof(detail), "format %s: %s", pp_profile_format_name(rq->format),
                 err[0] != '\0' ? err : strerror(-e));
        if (e == -ENOSYS || e == -ENOTSUP) {
            http_conn_fail(c, 501, "not_implemented", detail);
        } else {
            http_conn_fail(c, 500, "write_failed", detail);
        }
        return;
    }
    if (rq->pprof_endpoint) {
        /* as Go's net/http/pprof answers, so browsers and scripts save it as a file */
        snprintf(extra, sizeof(extra), "Content-Disposition: attachment; filename=\"profile\"\r\n");
    } else {
        snprintf(extra, sizeof(extra),
                 "Content-Disposition: inline; filename=\"pipeprof-%ld.%s\"\r\n", (long)getpid(),
                 pp_profile_format_name(rq->format));
    }
    if (http_response_build(&resp, 200, pp_profile_format_mime(rq->format), extra, buf, len) != 0) {
        http_conn_close(c);
        return;
    }
    http_conn_respond(c, &resp);
}

/* ------------------------------------------------------------------------------------------ */
/* Sampling                                                                                   */
/* ------------------------------------------------------------------------------------------ */

static void
http_on_sample_done(void *token, struct pp_profile *p, int err, const char *why)
{
    struct http_conn *c = token;
    struct http_server *s = c->server;

    if (!c->sampling || c->state != HTTP_CONN_SAMPLING) {
        /* a backend that broke the contract; never touch a response twice */
        pp_profile_free(p);
        return;
    }
    c->sampling = 0;
    c->sample_handle = NULL;
    s->sampling--;
    (void)uv_timer_stop(&c->timer);
    if (err != 0) {
        pp_profile_free(p);
        http_conn_backend_error(c, err, why);
        return;
    }
    if (p == NULL) {
        http_conn_fail(c, 500, "sampling_failed", "the sampler returned no profile");
        return;
    }
    http_conn_respond_profile(c, p);
}

/* Seconds until the first running recording should end, at least 1. */
static unsigned
http_server_retry_after(const struct http_server *s)
{
    uint64_t now = uv_now(s->loop), best = UINT64_MAX;
    const struct http_conn *c;

    for (c = s->conns; c != NULL; c = c->next) {
        if (c->sampling) {
            uint64_t left = c->sample_end_ms > now ? c->sample_end_ms - now : 0;

            best = left < best ? left : best;
        }
    }
    if (best == UINT64_MAX || best < 1000) {
        return 1;
    }
    return (unsigned)((best + 999) / 1000);
}

static void
http_conn_start_sampling(struct http_conn *c, const struct http_sample_request *rq)
{
    struct http_server *s = c->server;
    uint64_t duration_ms = rq->samples * rq->interval_ns / 1000000ull;
    void *handle = NULL;
    int e;

    if (s->sampling >= s->opts.max_sampling) {
        struct http_error err = { 0 };

        http_error_set(&err, 429, "too_many_requests",
                       "%u recording(s) already running; the limit is %u", s->sampling,
                       s->opts.max_sampling);
        http_conn_respond_error(c, &err, NULL, http_server_retry_after(s));
        return;
    }
    if (s->backend.sample_start == NULL) {
        http_conn_fail(c, 501, "not_implemented", "this process has no sampler");
        return;
    }
    c->state = HTTP_CONN_SAMPLING;
    c->sample = *rq;
    c->sampling = 1;
    c->sample_end_ms = uv_now(s->loop) + duration_ms;
    s->sampling++;
    /* the backend may call done before it returns: the state is set up first */
    e = s->backend.sample_start(s->backend.ctx, rq, http_on_sample_done, c, &handle);
    if (e != 0) {
        if (c->sampling) {
            c->sampling = 0;
            s->sampling--;
            c->state = HTTP_CONN_READING; /* lets the error answer go out */
            http_conn_backend_error(c, e, NULL);
        }
        return;
    }
    if (c->sampling) {
        c->sample_handle = handle;
        http_conn_deadline(c, duration_ms + HTTP_SAMPLE_GRACE_MS);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Reading                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static void
http_conn_dispatch(struct http_conn *c)
{
    struct http_route route;
    struct http_response resp;
    char *body;

    (void)uv_timer_stop(&c->timer);
    if (c->server->token_len != 0) {
        struct http_error denied = { 0 };

        if (!http_request_authorized(&c->req, c->server->token, c->server->token_len, &denied)) {
            http_conn_respond_error(c, &denied, NULL, 0);
            return;
        }
    }
    http_route_request(&c->req, &route);
    switch (route.action) {
    case HTTP_ACTION_INDEX:
        body = strdup(http_index_text);
        if (body == NULL || http_response_build(&resp, 200, "text/plain; charset=utf-8", NULL, body,
                                                strlen(http_index_text)) != 0) {
            http_conn_close(c);
            return;
        }
        http_conn_respond(c, &resp);
        break;
    case HTTP_ACTION_SAMPLE:
        http_conn_start_sampling(c, &route.sample);
        break;
    case HTTP_ACTION_ERROR:
    default:
        http_conn_respond_error(c, &route.err, route.allow, 0);
        break;
    }
}

static void
http_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct http_conn *c = h->data;

    (void)suggested;
    /* one read at a time per stream: the connection's own buffer is enough */
    *buf = uv_buf_init(c->rbuf, sizeof(c->rbuf));
}

static void
http_conn_on_bytes(struct http_conn *c, const char *data, size_t len)
{
    int e;

    c->received = 1;
    c->active_ms = uv_now(c->server->loop);
    atomic_fetch_add_explicit(&c->server->reads, 1, memory_order_relaxed);
    e = http_request_feed(&c->req, data, len);
    if (e == 1) {
        http_conn_dispatch(c);
    } else if (e < 0) {
        http_conn_respond_error(c, &c->req.err, NULL, 0);
    } else if (c->req.expect_continue && !c->continue_sent) {
        uv_buf_t b = uv_buf_init((char *)http_continue, sizeof(http_continue) - 1);

        /* curl waits (up to 1 s) for this before it sends a large body */
        c->continue_sent = 1;
        c->continue_req.data = c;
        if (uv_write(&c->continue_req, &c->h.stream, &b, 1, NULL) != 0) {
            http_conn_close(c);
        }
    }
}

static void
http_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct http_conn *c = stream->data;

    if (nread == 0 || c->state == HTTP_CONN_CLOSING) {
        return;
    }
    if (nread == UV_EOF) {
        c->peer_eof = 1;
        (void)uv_read_stop(stream);
        switch (c->state) {
        case HTTP_CONN_READING:
            if (!c->received) {
                http_conn_close(c); /* connected and left: nobody to answer */
            } else if (http_request_eof(&c->req) == 1) {
                http_conn_dispatch(c);
            } else {
                http_conn_respond_error(c, &c->req.err, NULL, 0);
            }
            break;
        case HTTP_CONN_WRITING:
            break; /* the client may have half-closed and still read the response */
        default:
            /* SAMPLING: the client hung up, the recording is for nobody; LINGER: done */
            http_conn_close(c);
            break;
        }
        return;
    }
    if (nread < 0) {
        http_conn_close(c);
        return;
    }
    if (c->state == HTTP_CONN_READING) {
        http_conn_on_bytes(c, buf->base, (size_t)nread);
        return;
    }
    /* bytes after the request (pipelining) are dropped: one request per connection */
    c->dropped += (size_t)nread;
    if (c->state == HTTP_CONN_LINGER && c->unasked) {
        c->unasked = 0; /* its request came: the usual linger from here */
        http_conn_deadline(c, HTTP_LINGER_MS);
    }
    if (c->state == HTTP_CONN_LINGER && c->dropped > HTTP_LINGER_MAX) {
        http_conn_close(c);
    }
}

static void
http_on_timer(uv_timer_t *t)
{
    struct http_conn *c = t->data;
    struct http_error e = { 0 };

    switch (c->state) {
    case HTTP_CONN_READING:
        http_error_set(&e, 408, "request_timeout", "the request was not complete within %u ms",
                       c->server->opts.request_timeout_ms);
        http_conn_respond_error(c, &e, NULL, 0);
        break;
    case HTTP_CONN_SAMPLING:
        http_conn_cancel_sampling(c);
        c->state = HTTP_CONN_READING; /* lets the error answer go out */
        http_conn_fail(c, 500, "sampling_timeout", "the sampler did not finish in time");
        break;
    default:
        /* WRITING: the client does not read; LINGER: enough waiting */
        http_conn_close(c);
        break;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Accepting                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static int
http_stream_init(struct http_server *s, union http_stream *h)
{
    if (s->url.family == AF_UNIX) {
        return uv_pipe_init(s->loop, &h->pipe, 0);
    }
    return uv_tcp_init(s->loop, &h->tcp);
}

static void
http_on_reject_closed(uv_handle_t *h)
{
    free(h->data);
}

static void
http_reject(struct http_server *s)
{
    struct http_reject *r = calloc(1, sizeof(*r));

    if (r == NULL || http_stream_init(s, &r->h) != 0) {
        free(r);
        return;
    }
    r->h.handle.data = r;
    (void)uv_accept(&s->listener.stream, &r->h.stream);
    uv_close(&r->h.handle, http_on_reject_closed);
}

/*
 * At the limit: closes a connection that has been silent for HTTP_IDLE_EVICT_MS while still
 * waiting for its request, one that sent nothing first, else the one silent longest. A client
 * cannot hold the endpoint with idle connections; one that stalls mid-request for a second may
 * lose its place to a newcomer. Returns 1 if one was closed; the caller closes as many as it
 * takes to make room (connections answered 503 linger, count, and cannot be closed).
 */
static int
http_drop_idle(struct http_server *s)
{
    uint64_t now = uv_now(s->loop);
    struct http_conn *c, *victim = NULL;

    for (c = s->conns; c != NULL; c = c->next) {
        if (c->state != HTTP_CONN_READING || now - c->active_ms < HTTP_IDLE_EVICT_MS) {
            continue;
        }
        if (victim == NULL || (!c->received && victim->received) ||
            (c->received == victim->received && c->active_ms <= victim->active_ms)) {
            victim = c;
        }
    }
    if (victim == NULL) {
        return 0;
    }
    http_conn_close(victim);
    return 1;
}

void
http_server_counts(struct http_server *s, struct http_server_counts *out)
{
    out->conns = atomic_load(&s->conn_count);
    out->reads = atomic_load(&s->reads);
    out->open_at_accept = atomic_load(&s->open_at_accept);
}

static void
http_on_connection(uv_stream_t *listener, int status)
{
    struct http_server *s = listener->data;
    struct http_conn *c;

    if (status < 0 || s->stopping) {
        return;
    }
    atomic_store_explicit(&s->open_at_accept, s->conn_count - s->closing, memory_order_relaxed);
    /* as many idle connections as keep the newcomer out: the limit's 503s linger and count too */
    while (s->conn_count - s->closing >= s->opts.max_connections && http_drop_idle(s)) {
    }
    if (s->conn_count - s->closing >= s->opts.max_connections * HTTP_REJECT_FACTOR) {
        http_reject(s);
        return;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        http_reject(s);
        return;
    }
    c->server = s;
    http_request_init(&c->req, s->opts.max_header, s->opts.max_body);
    if (http_stream_init(s, &c->h) != 0) {
        free(c);
        return;
    }
    (void)uv_timer_init(s->loop, &c->timer);
    c->h.handle.data = c;
    c->timer.data = c;
    c->open_handles = 2;
    c->next = s->conns;
    if (s->conns != NULL) {
        s->conns->prev = c;
    }
    s->conns = c;
    s->conn_count++;
    c->state = HTTP_CONN_READING;
    c->active_ms = uv_now(s->loop);
    if (uv_accept(listener, &c->h.stream) != 0 ||
        uv_read_start(&c->h.stream, http_on_alloc, http_on_read) != 0) {
        http_conn_close(c);
        return;
    }
    if (s->conn_count - s->closing > s->opts.max_connections) {
        struct http_error e = { 0 };

        http_error_set(&e, 503, "too_many_connections",
                       "the server is at its connection limit of %u", s->opts.max_connections);
        http_conn_respond_error(c, &e, NULL, 1);
        return;
    }
    http_conn_deadline(c, s->opts.request_timeout_ms);
}

/* ------------------------------------------------------------------------------------------ */
/* Listening                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/*
 * Makes room for a Unix socket at path: nothing there, or a socket of our uid nobody accepts on
 * (left by a process that died), which is removed. Returns 0 or a negative errno with err set.
 */
static int
http_unix_clear(const char *path, char *err, size_t errlen)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct stat st;
    int fd, e;

    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) {
            return 0;
        }
        e = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(-e));
        return e;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen, "%s exists and is not a socket; not replacing it", path);
        return -EEXIST;
    }
    if (st.st_uid != geteuid()) {
        snprintf(err, errlen, "%s is a socket of uid %ld; not replacing it", path, (long)st.st_uid);
        return -EEXIST;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        e = -errno;
        snprintf(err, errlen, "socket: %s", strerror(-e));
        return e;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    e = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : -errno;
    close(fd);
    if (e != -ECONNREFUSED) {
        /* 0 or EAGAIN (a full backlog): somebody serves it. Anything else: do not guess. */
        snprintf(err, errlen, "%s is in use by another server%s%s", path, e != 0 ? ": " : "",
                 e != 0 ? strerror(-e) : "");
        return -EADDRINUSE;
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        e = -errno;
        snprintf(err, errlen, "removing the stale socket %s: %s", path, strerror(-e));
        return e;
    }
    return 0;
}

/*
 * Creates the listening socket outside libuv, so that every failure is synchronous and leaves
 * no handle to close. Returns the descriptor or a negative errno with err set.
 */
static int
http_listen_fd(struct http_server *s, char *err, size_t errlen)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    const struct sockaddr *sa = (const struct sockaddr *)&s->url.addr;
    socklen_t salen =
            s->url.family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    struct stat st;
    int fd = -1, one = 1, e;

    if (s->url.family == AF_UNIX) {
        e = http_unix_clear(s->url.path, err, errlen);
        if (e != 0) {
            return e;
        }
        memcpy(sun.sun_path, s->url.path, strlen(s->url.path) + 1);
        sa = (const struct sockaddr *)&sun;
        salen = sizeof(sun);
    }
    fd = socket(s->url.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        e = -errno;
        snprintf(err, errlen, "socket: %s", strerror(-e));
        return e;
    }
    if (s->url.family != AF_UNIX) {
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    }
    if (s->url.family == AF_INET6) {
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    /*
     * bind() gives the file the socket inode's mode less the umask: 0600 set on the socket first
     * is the file's mode from its first instant, without touching the process-wide umask. A
     * chmod() of the path after bind() followed whatever was at the path by then: in a directory
     * others may write, a symbolic link put there in between had its target's mode changed.
     */
    if (s->url.family == AF_UNIX && fchmod(fd, 0600) != 0) {
        e = -errno;
        snprintf(err, errlen, "fchmod: %s", strerror(-e));
        goto fail;
    }
    if (bind(fd, sa, salen) != 0) {
        e = -errno;
        snprintf(err, errlen, "bind: %s", strerror(-e));
        goto fail;
    }
    if (s->url.family == AF_UNIX) {
        /* the file to remove at stop; anything but our socket there is not ours to remove */
        if (lstat(s->url.path, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
            e = -EEXIST;
            snprintf(err, errlen, "%s: replaced by something else as it was bound", s->url.path);
            goto fail;
        }
        s->sock_dev = st.st_dev;
        s->sock_ino = st.st_ino;
    }
    if (listen(fd, 128) != 0) {
        e = -errno;
        snprintf(err, errlen, "listen: %s", strerror(-e));
        if (s->url.family == AF_UNIX) {
            (void)unlink(s->url.path);
        }
        goto fail;
    }
    return fd;
fail:
    close(fd);
    return e;
}

static void
http_server_unlink(struct http_server *s)
{
    struct stat st;

    /* only the file we made: a successor may already have put its own socket there */
    if (s->url.family == AF_UNIX && lstat(s->url.path, &st) == 0 && st.st_dev == s->sock_dev &&
        st.st_ino == s->sock_ino) {
        (void)unlink(s->url.path);
    }
}

static void
http_on_listener_closed(uv_handle_t *h)
{
    struct http_server *s = h->data;

    s->listener_open = 0;
    http_server_maybe_free(s);
}

int
http_server_start(uv_loop_t *loop, const struct http_server_options *opts,
                  const struct http_backend *backend, struct http_server **out, char *err,
                  size_t errlen)
{
    struct http_server *s = NULL;
    char scratch[8];
    int fd = -1, e;

    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    err[0] = '\0';
    *out = NULL;
    if (loop == NULL || opts == NULL || backend == NULL) {
        snprintf(err, errlen, "missing loop, options or backend");
        return -EINVAL;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    e = http_url_parse(opts->url, opts->allow_remote, &s->url, err, errlen);
    if (e != 0) {
        goto out;
    }
    s->loop = loop;
    s->backend = *backend;
    s->opts = *opts;
    s->opts.url = NULL; /* not kept: the caller's string need not outlive the server */
    s->opts.token = NULL;
    if (s->url.family != AF_UNIX && !opts->allow_tcp) {
        snprintf(err, errlen,
                 "TCP is not enabled: every local user could connect to it, make this process "
                 "sample itself and read its stacks, thread names and module paths; use a "
                 "unix:// URL (mode 0600) or opt in to TCP");
        e = -EACCES;
        goto out;
    }
    if (opts->token != NULL && strlen(opts->token) > HTTP_MAX_TOKEN) {
        snprintf(err, errlen, "the token is longer than %u bytes", HTTP_MAX_TOKEN);
        e = -EINVAL;
        goto out;
    }
    if (opts->token != NULL) {
        s->token_len = strlen(opts->token);
        memcpy(s->token, opts->token, s->token_len + 1);
    }
    if (s->opts.max_connections == 0) {
        s->opts.max_connections = HTTP_DEFAULT_MAX_CONNECTIONS;
    }
    if (s->opts.max_sampling == 0) {
        s->opts.max_sampling = HTTP_DEFAULT_MAX_SAMPLING;
    }
    if (s->opts.max_body == 0) {
        s->opts.max_body = HTTP_DEFAULT_MAX_BODY;
    }
    if (s->opts.max_header == 0) {
        s->opts.max_header = HTTP_DEFAULT_MAX_HEADER;
    }
    if (s->opts.request_timeout_ms == 0) {
        s->opts.request_timeout_ms = HTTP_DEFAULT_REQUEST_TIMEOUT;
    }
    if (s->opts.write_timeout_ms == 0) {
        s->opts.write_timeout_ms = HTTP_DEFAULT_WRITE_TIMEOUT;
    }

    fd = http_listen_fd(s, err, errlen);
    if (fd < 0) {
        e = fd;
        goto out;
    }
    e = http_stream_init(s, &s->listener);
    if (e != 0) {
        snprintf(err, errlen, "uv init: %s", uv_strerror(e));
        goto out;
    }
    s->listener.handle.data = s;
    s->listener_open = 1;
    e = s->url.family == AF_UNIX ? uv_pipe_open(&s->listener.pipe, fd)
                                 : uv_tcp_open(&s->listener.tcp, fd);
    if (e == 0) {
        fd = -1; /* the handle owns it now */
        e = uv_listen(&s->listener.stream, 128, http_on_connection);
    }
    if (e != 0) {
        snprintf(err, errlen, "uv listen: %s", uv_strerror(e));
        goto out;
    }
    *out = s;
    s = NULL;
out:
    if (fd >= 0) {
        close(fd);
    }
    if (s != NULL) {
        http_server_unlink(s);
        if (s->listener_open) {
            /* a handle exists: it is released once the loop runs its close callback */
            s->stopping = 1;
            uv_close(&s->listener.handle, http_on_listener_closed);
        } else {
            free(s);
        }
    }
    return e;
}

const char *
http_server_url(const struct http_server *s, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    int sslen = sizeof(ss);
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;

    if (s->url.family == AF_UNIX) {
        snprintf(buf, len, "unix://%s", s->url.path);
        return buf;
    }
    if (uv_tcp_getsockname(&s->listener.tcp, (struct sockaddr *)&ss, &sslen) == 0) {
        if (ss.ss_family == AF_INET6) {
            const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;

            uv_ip6_name(a, ip, sizeof(ip));
            port = ntohs(a->sin6_port);
        } else {
            const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;

            uv_ip4_name(a, ip, sizeof(ip));
            port = ntohs(a->sin_port);
        }
    }
    snprintf(buf, len, ss.ss_family == AF_INET6 ? "http://[%s]:%u" : "http://%s:%u", ip, port);
    return buf;
}

void
http_server_stop(struct http_server *s)
{
    struct http_conn *c;

    if (s == NULL || s->stopping) {
        return;
    }
    s->stopping = 1;
    http_server_unlink(s);
    for (c = s->conns; c != NULL; c = c->next) {
        http_conn_close(c); /* cancels recordings; unlinked in the close callbacks */
    }
    uv_close(&s->listener.handle, http_on_listener_closed);
}
