/* SPDX-License-Identifier: MIT */
/*
 * ipc/conn.c - one diagnostic connection: read exactly one request (header, then size-20 payload
 * bytes, never more), dispatch it, answer, and close, unless the connection becomes a session's
 * stream. Context: the loop thread. It must never block and never trust the peer: a silent
 * client times out, a short or lying request gets BAD_ENCODING, a wrong magic UNKNOWN_MAGIC.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc/internal.h"

extern char **environ;

/* The continuation of ProcessEnvironment is capped; the runtime has no cap, clients none. */
#define IPC_ENV_MAX_BYTES (4u << 20)

struct ipc_write_req {
    uv_write_t req;
    struct ipc_conn *conn;
    size_t len;
    uint8_t data[];
};

static void
ipc_conn_handle_closed(uv_handle_t *h)
{
    struct ipc_conn *c = h->data;

    if (--c->handles > 0) {
        return;
    }
    free(c->payload);
    free(c);
}

void
ipc_conn_close(struct ipc_conn *c)
{
    struct ipc_server *s = c->srv;

    if (c->state == IPC_CONN_CLOSING) {
        return;
    }
    c->state = IPC_CONN_CLOSING;
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        s->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    c->prev = c->next = NULL;
    s->conn_count--;
    if (c->port != NULL && c->port->idle == c) {
        ipc_port_lost(c->port);
    }
    if (c->stopping != NULL) {
        c->stopping->stop_conn = NULL;
        c->stopping = NULL;
    }
    if (c->up != NULL) {
        ipc_upstream_conn_closed(c);
    }
    if (c->session != NULL) {
        struct ipc_session *ss = c->session;

        c->session = NULL;
        ipc_session_conn_closed(ss);
    }
    uv_close((uv_handle_t *)&c->timer, ipc_conn_handle_closed);
    uv_close((uv_handle_t *)&c->pipe, ipc_conn_handle_closed);
}

int
ipc_conn_new(struct ipc_server *s, struct ipc_port *port, struct ipc_conn **out)
{
    struct ipc_conn *c;
    int err;

    *out = NULL;
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return -ENOMEM;
    }
    c->srv = s;
    c->port = port;
    err = uv_pipe_init(&s->loop, &c->pipe, 0);
    if (err < 0) {
        free(c);
        return err;
    }
    c->pipe.data = c;
    c->handles = 1;
    err = uv_timer_init(&s->loop, &c->timer);
    if (err < 0) {
        uv_close((uv_handle_t *)&c->pipe, ipc_conn_handle_closed);
        return err;
    }
    c->timer.data = c;
    c->handles = 2;
    c->state = IPC_CONN_READING;
    c->next = s->conns;
    if (s->conns != NULL) {
        s->conns->prev = c;
    }
    s->conns = c;
    s->conn_count++;
    *out = c;
    return 0;
}

static void
ipc_conn_write_done(uv_write_t *req, int status)
{
    struct ipc_write_req *wr = (struct ipc_write_req *)req;
    struct ipc_conn *c = wr->conn;

    (void)status;
    free(wr);
    /* One command per connection: after the answer the connection is done. */
    if (c->state == IPC_CONN_BUSY) {
        ipc_conn_close(c);
    }
}

void
ipc_conn_respond(struct ipc_conn *c, const void *buf, size_t len)
{
    struct ipc_write_req *wr;
    uv_buf_t b;

    if (c->state == IPC_CONN_CLOSING) {
        return;
    }
    c->state = IPC_CONN_BUSY;
    uv_timer_stop(&c->timer);
    uv_read_stop((uv_stream_t *)&c->pipe);
    wr = malloc(sizeof(*wr) + len);
    if (wr == NULL) {
        ipc_conn_close(c);
        return;
    }
    wr->conn = c;
    wr->len = len;
    memcpy(wr->data, buf, len);
    b = uv_buf_init((char *)wr->data, (unsigned)len);
    if (uv_write(&wr->req, (uv_stream_t *)&c->pipe, &b, 1, ipc_conn_write_done) < 0) {
        free(wr);
        ipc_conn_close(c);
    }
}

void
ipc_conn_respond_error(struct ipc_conn *c, uint32_t hresult)
{
    uint8_t msg[24];

    IPC_STAT(c->srv, errors, 1);
    ipc_conn_respond(c, msg, ipc_error_encode(msg, hresult));
}

static void
ipc_conn_process_info(struct ipc_conn *c, int version)
{
    uint8_t *msg = malloc(IPC_MAX_MESSAGE);
    int n;

    if (msg == NULL) {
        ipc_conn_respond_error(c, IPC_HR_FAIL);
        return;
    }
    n = ipc_process_info_encode(&c->srv->info, version, msg, IPC_MAX_MESSAGE);
    if (n < 0) {
        ipc_conn_respond_error(c, ipc_errno_to_hresult(n));
    } else {
        ipc_conn_respond(c, msg, (size_t)n);
    }
    free(msg);
}

static void
ipc_conn_environment(struct ipc_conn *c)
{
    uint8_t *msg = NULL;
    size_t len = 0;

    /* environ may change under us if the host calls setenv(): the runtime has the same race. */
    if (ipc_environment_encode(environ, IPC_ENV_MAX_BYTES, &msg, &len) < 0) {
        ipc_conn_respond_error(c, IPC_HR_FAIL);
        return;
    }
    ipc_conn_respond(c, msg, len);
    free(msg);
}

void
ipc_conn_dispatch_native(struct ipc_conn *c)
{
    const uint8_t *p = c->payload;
    size_t len = c->h.size - IPC_HEADER_SIZE;
    uint8_t msg[28];

    if (c->h.command_set == IPC_SET_EVENTPIPE) {
        if (c->h.command_id == IPC_EP_STOP_TRACING) {
            uint64_t id;

            if (ipc_stop_decode(p, len, &id) < 0) {
                ipc_conn_respond_error(c, IPC_HR_BAD_ENCODING);
                return;
            }
            ipc_session_stop_request(c, id);
            return;
        }
        /* CollectTracing6 (buffer mode Block) is unknown to the .NET 10 runtime pipeprof answers
         * as (10.0.12 answers UNKNOWN_COMMAND): dotnet-trace --buffering-mode Block then says
         * it is not supported, as it does against that runtime. */
        if (c->h.command_id >= IPC_EP_COLLECT_TRACING &&
            c->h.command_id <= IPC_EP_COLLECT_TRACING5) {
            struct ipc_collect req;
            int err = ipc_collect_decode(c->h.command_id, p, len, &req);

            if (err < 0) {
                ipc_collect_fini(&req);
                ipc_conn_respond_error(c, ipc_errno_to_hresult(err));
                return;
            }
            ipc_session_collect(c, &req, NULL, 0); /* takes req */
            return;
        }
    } else if (c->h.command_set == IPC_SET_PROCESS) {
        switch (c->h.command_id) {
        case IPC_PROC_INFO:
            ipc_conn_process_info(c, 1);
            return;
        case IPC_PROC_INFO2:
            ipc_conn_process_info(c, 2);
            return;
        case IPC_PROC_INFO3:
            ipc_conn_process_info(c, 3);
            return;
        case IPC_PROC_RESUME_RUNTIME:
            if (c->port != NULL) {
                ipc_port_resume(c->srv, c->port);
            }
            ipc_conn_respond(c, msg, ipc_ok_i32_encode(msg, 0));
            return;
        case IPC_PROC_ENVIRONMENT:
            ipc_conn_environment(c);
            return;
        case IPC_PROC_ENABLE_PERFMAP:
            /* u32 type: 1 all, 2 jitdump, 3 perfmap; the runtime refuses 0 (none) and unknown
             * types with E_INVALIDARG. A native process has no JIT code to map (perf reads the
             * symbols of its binaries itself), so a valid request succeeds with nothing to do. */
            if (len < 4) {
                ipc_conn_respond_error(c, IPC_HR_BAD_ENCODING);
            } else if (p[0] == 0 || p[0] > 3 || p[1] != 0 || p[2] != 0 || p[3] != 0) {
                ipc_conn_respond_error(c, IPC_HR_INVALIDARG);
            } else {
                ipc_conn_respond(c, msg, ipc_ok_i32_encode(msg, 0));
            }
            return;
        case IPC_PROC_DISABLE_PERFMAP:
            /* nothing is ever enabled, so disabling succeeds (the runtime answers OK too) */
            ipc_conn_respond(c, msg, ipc_ok_i32_encode(msg, 0));
            return;
        default:
            break;
        }
    }
    /* Dump, profiler, SetEnv, perf maps, startup hooks: not served. UNKNOWN_COMMAND drives the
     * client's fallbacks and its clean "not supported" message. */
    ipc_conn_respond_error(c, IPC_HR_UNKNOWN_COMMAND);
}

/*
 * In a .NET host (docs/dotnet-hosts.md) the runtime answers everything but the tracing sessions,
 * which are merged: a CollectTracing starts the runtime's session and this server's together,
 * and a StopTracing of one of them ends both. Requests this server cannot decode go to the
 * runtime as they came, and its answer (an error, as a rule) is the one a client gets.
 */
static void
ipc_conn_dispatch(struct ipc_conn *c)
{
    size_t len = c->h.size - IPC_HEADER_SIZE;

    IPC_STAT(c->srv, commands, 1);
    if (!ipc_upstream_active(c->srv)) {
        ipc_conn_dispatch_native(c);
        return;
    }
    if (c->h.command_set == IPC_SET_EVENTPIPE && c->h.command_id == IPC_EP_STOP_TRACING) {
        uint64_t id;

        if (ipc_stop_decode(c->payload, len, &id) == 0) {
            ipc_session_stop_request(c, id);
            return;
        }
    } else if (c->h.command_set == IPC_SET_EVENTPIPE && c->h.command_id >= IPC_EP_COLLECT_TRACING &&
               c->h.command_id <= IPC_EP_COLLECT_TRACING5) {
        struct ipc_collect req;

        if (ipc_collect_decode(c->h.command_id, c->payload, len, &req) == 0) {
            ipc_upstream_collect(c, &req); /* takes req */
            return;
        }
        ipc_collect_fini(&req);
    }
    ipc_upstream_forward(c);
}

/* Hands libuv exactly the bytes still missing, so nothing past the request is ever read. */
static void
ipc_conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct ipc_conn *c = h->data;

    (void)suggested;
    if (c->state != IPC_CONN_READING) {
        *buf = uv_buf_init((char *)c->scratch, sizeof(c->scratch));
    } else if (c->got < IPC_HEADER_SIZE) {
        *buf = uv_buf_init((char *)c->hdr + c->got, (unsigned)(IPC_HEADER_SIZE - c->got));
    } else {
        *buf = uv_buf_init((char *)c->payload + (c->got - IPC_HEADER_SIZE),
                           (unsigned)(c->h.size - c->got));
    }
}

static void
ipc_conn_timeout(uv_timer_t *t)
{
    ipc_conn_close(t->data);
}

static void
ipc_conn_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct ipc_conn *c = stream->data;
    int err;

    (void)buf;
    if (c->state == IPC_CONN_STREAMING) {
        /* The client never writes on its stream; EOF or an error means it went away. */
        if (nread < 0) {
            ipc_conn_close(c);
        }
        return;
    }
    if (c->state != IPC_CONN_READING) {
        return;
    }
    if (nread < 0) {
        if (c->got == 0 && c->port != NULL) {
            /* The tool dropped an advertised connection: just close (the port reconnects). */
            ipc_conn_close(c);
        } else {
            /* a short (or empty) request, as the runtime answers it */
            ipc_conn_respond_error(c, IPC_HR_BAD_ENCODING);
        }
        return;
    }
    if (nread == 0) {
        return;
    }
    if (c->got == 0 && c->port != NULL) {
        /* A command arrived on the advertised connection: the port must re-advertise now. */
        ipc_port_taken(c->port);
        uv_timer_start(&c->timer, ipc_conn_timeout, c->srv->request_timeout_ms, 0);
    }
    c->got += (size_t)nread;
    if (c->got == IPC_HEADER_SIZE) {
        err = ipc_header_decode(c->hdr, IPC_HEADER_SIZE, &c->h);
        if (err == -EBADMSG) {
            ipc_conn_respond_error(c, IPC_HR_BAD_ENCODING);
            return;
        }
        /* A bad magic is answered once the payload is in, as the runtime does. */
        c->bad_magic = err == -EPROTO;
        if (c->h.size > IPC_HEADER_SIZE) {
            c->payload = malloc(c->h.size - IPC_HEADER_SIZE);
            if (c->payload == NULL) {
                ipc_conn_respond_error(c, IPC_HR_FAIL);
                return;
            }
        }
    }
    if (c->got >= IPC_HEADER_SIZE && c->got == c->h.size) {
        uv_read_stop(stream);
        uv_timer_stop(&c->timer);
        c->state = IPC_CONN_BUSY;
        if (c->bad_magic) {
            ipc_conn_respond_error(c, IPC_HR_UNKNOWN_MAGIC);
            return;
        }
        ipc_conn_dispatch(c);
    }
}

void
ipc_conn_start_reading(struct ipc_conn *c, uint32_t timeout_ms)
{
    if (timeout_ms > 0) {
        uv_timer_start(&c->timer, ipc_conn_timeout, timeout_ms, 0);
    }
    if (uv_read_start((uv_stream_t *)&c->pipe, ipc_conn_alloc, ipc_conn_read) < 0) {
        ipc_conn_close(c);
    }
}
