/* SPDX-License-Identifier: MIT */
/*
 * ipc/server.c - the diagnostic server: its thread and loop, the listen sockets (named and
 * protected as the runtime's), the connect ports of DOTNET_DiagnosticPorts (advertise, reconnect
 * with the runtime's backoff, suspend until ResumeRuntime), start-up and orderly shutdown.
 * Context: ipc_server_start/stop/wait_resume on the host's threads; everything else on the loop
 * thread, which runs with every signal blocked. It must never block or kill the host: no abort,
 * no exit, no unbounded wait at shutdown, and a fork()ed child never touches the parent's socket.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ipc/internal.h"

#ifndef PP_VERSION
#define PP_VERSION "0.1.0"
#endif

#define IPC_SHUTDOWN_GRACE_MS 1000 /* at stop, streams get this long to drain */

/* ------------------------------------------------------------------------------------------ */
/* Logging and statistics                                                                     */
/* ------------------------------------------------------------------------------------------ */

void
ipc_log(struct ipc_server *s, const char *fmt, ...)
{
    char line[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (s != NULL && s->log != NULL) {
        s->log(s->log_ctx, line);
    } else {
        fprintf(stderr, "pipeprof: %s\n", line);
    }
}

void
ipc_stats_add(struct ipc_server *s, size_t offset, uint64_t n)
{
    pthread_mutex_lock(&s->lock);
    *(uint64_t *)(void *)((char *)&s->stats + offset) += n;
    pthread_mutex_unlock(&s->lock);
}

void
ipc_server_get_stats(struct ipc_server *s, struct ipc_server_stats *out)
{
    pthread_mutex_lock(&s->lock);
    *out = s->stats;
    pthread_mutex_unlock(&s->lock);
}

const char *
ipc_server_listen_path(const struct ipc_server *s)
{
    return s->listener_count > 0 ? s->listeners[0].path : "";
}

void
ipc_server_cookie(const struct ipc_server *s, uint8_t out[16])
{
    memcpy(out, s->cookie, 16);
}

/* ------------------------------------------------------------------------------------------ */
/* Process information                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* The .NET runtime version pipeprof answers as: commands behave as that runtime's do, and the
 * tests compare them with a real .NET 10 app (tests/ipc-differential.sh). */
#define IPC_CLAIMED_RUNTIME_VERSION "10.0.0"

#if defined(__x86_64__)
#define IPC_ARCH     "x64"
#define IPC_RID_ARCH "x64"
#elif defined(__aarch64__)
#define IPC_ARCH     "arm64"
#define IPC_RID_ARCH "arm64"
#elif defined(__i386__)
#define IPC_ARCH     "x86"
#define IPC_RID_ARCH "x86"
#elif defined(__arm__)
#define IPC_ARCH     "arm32"
#define IPC_RID_ARCH "arm"
#elif defined(__s390x__)
#define IPC_ARCH     "s390x"
#define IPC_RID_ARCH "s390x"
#else
#define IPC_ARCH     "Unknown"
#define IPC_RID_ARCH "unknown"
#endif
#if defined(__GLIBC__)
#define IPC_RID_OS "linux-"
#else
#define IPC_RID_OS "linux-musl-"
#endif

#define IPC_CMDLINE_MAX (1 << 20) /* what is read of /proc/self/cmdline at most */

/* "<exe path> arg1 arg2 ...", as the runtime reports it on Unix (exe: /proc/self/exe's target).
 * The buffer grows from 4 KiB: a first malloc of the whole 1 MiB was an mmap and a munmap in every
 * process. */
static char *
ipc_command_line_read(const char *exe)
{
    char *out = NULL, *buf, *grown;
    size_t len = 0, cap = 4096, i, skip;
    ssize_t n;
    int fd;

    buf = malloc(cap);
    if (buf == NULL) {
        return strdup(exe);
    }
    fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && (n = read(fd, buf + len, cap - 1 - len)) > 0) {
        len += (size_t)n;
        if (len < cap - 1) {
            continue;
        }
        if (cap >= IPC_CMDLINE_MAX || (grown = realloc(buf, cap * 2)) == NULL) {
            break;
        }
        buf = grown;
        cap *= 2;
    }
    if (fd >= 0) {
        close(fd);
    }
    buf[len] = '\0';
    skip = strnlen(buf, len) + 1; /* argv[0] is replaced by the executable's full path */
    out = malloc(strlen(exe) + (len > skip ? len - skip : 0) + 2);
    if (out != NULL) {
        strcpy(out, exe);
        if (len > skip) {
            size_t o = strlen(out);

            out[o++] = ' ';
            for (i = skip; i < len; i++) {
                out[o++] = buf[i] == '\0' ? ' ' : buf[i];
            }
            while (o > 0 && out[o - 1] == ' ') {
                o--;
            }
            out[o] = '\0';
        }
    }
    free(buf);
    return out;
}

static int
ipc_server_info_init(struct ipc_server *s)
{
    const char *exe, *base;

    if (getrandom(s->cookie, sizeof(s->cookie), 0) != (ssize_t)sizeof(s->cookie)) {
        /* no entropy source: time and pid still make a per-process value */
        uint64_t t = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ nt_clock_now();

        memcpy(s->cookie, &t, 8);
        t = nt_clock_now() * 2654435761u;
        memcpy(s->cookie + 8, &t, 8);
    }
    s->cookie[7] = (uint8_t)((s->cookie[7] & 0x0F) | 0x40); /* a version-4 GUID (Data3) */
    s->cookie[8] = (uint8_t)((s->cookie[8] & 0x3F) | 0x80);
    exe = ipc_self_exe();
    s->command_line = ipc_command_line_read(exe);
    base = strrchr(exe, '/');
    s->entrypoint = strdup(base != NULL ? base + 1 : exe);
    if (s->command_line == NULL || s->entrypoint == NULL) {
        return -ENOMEM;
    }
    s->info.pid = (uint64_t)getpid();
    memcpy(s->info.cookie, s->cookie, 16);
    s->info.command_line = s->command_line;
    s->info.os = "Linux";
    s->info.arch = IPC_ARCH;
    s->info.entrypoint_assembly = s->entrypoint;
    /* The runtime version whose protocol pipeprof answers as (docs/ipc.md, "Version"): clients
     * parse what precedes '+' (Microsoft.Diagnostics.NETCore.Client, dotnet-monitor), and the
     * SemVer build metadata names the server and its own version. */
    s->info.product_version = IPC_CLAIMED_RUNTIME_VERSION "+pipeprof." PP_VERSION;
    s->info.runtime_id = IPC_RID_OS IPC_RID_ARCH;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Listen sockets                                                                             */
/* ------------------------------------------------------------------------------------------ */

static void
ipc_listener_accept(uv_stream_t *server, int status)
{
    struct ipc_listener *l = server->data;
    struct ipc_server *s = l->srv;
    struct ipc_conn *c;

    if (status < 0 || s->stopping) {
        return;
    }
    if (ipc_conn_new(s, NULL, &c) < 0) {
        return;
    }
    if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
        ipc_conn_close(c);
        return;
    }
    IPC_STAT(s, connections, 1);
    if (s->conn_count > s->max_connections) {
        uint8_t busy[24];
        uv_os_fd_t fd;

        /* Too many pending requests: shed load, never grow without bound. The answer to the
         * request the client is about to send goes first, so that it can say why; a Unix
         * socket keeps it readable after the close. */
        if (uv_fileno((uv_handle_t *)&c->pipe, &fd) == 0) {
            (void)send(fd, busy, ipc_error_encode(busy, IPC_HR_BUSY), MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        ipc_conn_close(c);
        return;
    }
    ipc_conn_start_reading(c, s->request_timeout_ms);
}

/*
 * A listener is made in two steps. ipc_listener_prepare() creates its socket (fchmod 0600 before
 * bind, as the runtime does, so the file is never accessible to others) and its handle, on the
 * starting thread: every fd of ours exists before the host's main, where no call of the host can
 * meet its creation (host/fds.c moves it high). ipc_listener_bind() then binds it at a path and
 * listens (255): at once, or later on the loop thread for a deferred default socket, which
 * creates no fd. Only a stale socket of our own at path (nobody accepts on it: a previous life of
 * this process, or of another of this user's) is replaced; anything else there
 * (ipc_sockfile_make_room()) is left alone and the bind fails. *owner is the uid of what was
 * found at path, or -1.
 */
/* The socket of a listener that never listened (its bind failed, or the stop came first). */
static void
ipc_listener_drop_fd(struct ipc_listener *l)
{
    if (l->fd >= 0) {
        close(l->fd);
        l->fd = -1;
    }
}

static int
ipc_listener_prepare(struct ipc_server *s, struct ipc_listener *l, const char *path)
{
    int err;

    l->srv = s;
    l->fd = -1;
    free(l->path);
    l->path = strdup(path);
    if (l->path == NULL) {
        return -ENOMEM;
    }
    l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (l->fd < 0) {
        return -errno;
    }
    if (fchmod(l->fd, 0600) < 0) {
        err = -errno;
        goto out;
    }
    err = uv_pipe_init(&s->loop, &l->pipe, 0); /* the loop's spare fd for EMFILE comes here */
    if (err < 0) {
        goto out;
    }
    l->open = 1;
    l->pipe.data = l;
    return 0;
out:
    ipc_listener_drop_fd(l);
    return err;
}

static int
ipc_listener_bind(struct ipc_listener *l, const char *path, long *owner)
{
    struct sockaddr_un addr;
    char *copy;
    int err;

    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    *owner = -1;
    if (l->fd < 0) {
        return -EBADF;
    }
    if (strlen(path) >= sizeof(addr.sun_path)) {
        return -ENAMETOOLONG;
    }
    strcpy(addr.sun_path, path);
    if (path != l->path) {
        copy = strdup(path);
        if (copy == NULL) {
            return -ENOMEM;
        }
        free(l->path);
        l->path = copy;
    }
    err = ipc_sockfile_make_room(path, owner);
    if (err < 0) {
        return err;
    }
    if (bind(l->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        return -errno;
    }
    (void)ipc_sockfile_note(path, &l->file);
    if (listen(l->fd, 255) < 0) {
        err = -errno;
        goto out_bound;
    }
    err = uv_pipe_open(&l->pipe, l->fd);
    if (err < 0) {
        goto out_bound;
    }
    l->fd = -1; /* owned by the handle */
    err = uv_listen((uv_stream_t *)&l->pipe, 255, ipc_listener_accept);
out_bound:
    if (err < 0) {
        ipc_sockfile_remove(path, &l->file);
        ipc_listener_drop_fd(l); /* bound: it cannot bind another name */
    }
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Connect ports (reverse mode)                                                               */
/* ------------------------------------------------------------------------------------------ */

static void ipc_port_connect(struct ipc_port *port);

static void
ipc_port_retry_cb(uv_timer_t *t)
{
    ipc_port_connect(t->data);
}

static void
ipc_port_schedule(struct ipc_port *port, unsigned ms)
{
    if (port->srv->stopping) {
        return;
    }
    uv_timer_start(&port->retry, ipc_port_retry_cb, ms, 0);
}

static void
ipc_port_failed(struct ipc_port *port)
{
    unsigned ms = port->backoff_ms;

    /* 10, 12, 15, 18, ... 457, 571, then 500 ms: the runtime's sequence. */
    if (port->backoff_ms >= 500) {
        port->backoff_ms = 500;
    } else {
        port->backoff_ms = port->backoff_ms * 5 / 4;
    }
    ipc_port_schedule(port, ms);
}

static void
ipc_port_advertised(uv_write_t *req, int status)
{
    struct ipc_conn *c = req->data;

    free(req);
    if (status < 0 && c->state != IPC_CONN_CLOSING) {
        ipc_conn_close(c); /* ipc_port_lost() reconnects */
    }
}

/* The lazy session that was to stream on port's connection cannot (the server stops): it ends
 * without a word, as one that never took a sample. */
static void
ipc_port_stream_lost(struct ipc_port *port)
{
    struct ipc_session *ss = port->stream;

    if (ss != NULL) {
        port->stream = NULL;
        ipc_session_conn_closed(ss);
    }
}

static void
ipc_port_connected(uv_connect_t *req, int status)
{
    struct ipc_conn *c = req->data;
    struct ipc_port *port = c->port;
    struct ipc_server *s = c->srv;
    struct ipc_session *stream;
    uint16_t flags = 0;
    uv_write_t *wr;
    uv_buf_t b;
    free(req);
    if (port != NULL) {
        port->connecting = 0;
    }
    /* A connect cancelled by a stop (ECANCELED) finds its connection closing or detached from
     * its port (port NULL): nothing to retry. */
    if (c->state == IPC_CONN_CLOSING || port == NULL) {
        if (port != NULL) {
            ipc_port_stream_lost(port);
        }
        return;
    }
    stream = port->stream;
    if (status < 0 || (s->stopping && stream == NULL)) {
        c->port = NULL; /* not the idle connection: closing it must not reconnect */
        ipc_conn_close(c);
        if (s->stopping || status == UV_ENOENT || status == UV_ECONNREFUSED) {
            /* No retry during a stop; and a recording that has ended (its socket is gone) would
             * never take the stream: the session stops sampling, and the port reconnects as
             * any does. A full backlog (EAGAIN) is tried again, the session queued meanwhile. */
            ipc_port_stream_lost(port);
        }
        ipc_port_failed(port);
        return;
    }
    IPC_STAT(s, connections, 1);
    port->backoff_ms = 10;
    if (stream == NULL) {
        port->idle = c;
    }
    /* The 34 bytes go in one write right after connect: the tool waits 250 ms for them. */
    wr = malloc(sizeof(*wr) + IPC_ADVERTISE_SIZE);
    if (wr == NULL) {
        ipc_conn_close(c);
        return;
    }
    ipc_advertise_encode((uint8_t *)(wr + 1), s->cookie, (uint64_t)getpid());
    if (s->resume_at_session && port->suspend) {
        flags |= IPC_ADVERTISE_RESUMES_AT_SESSION;
    }
    if (stream != NULL) {
        flags |= IPC_ADVERTISE_STREAM_FOLLOWS;
    }
    ipc_advertise_set_flags((uint8_t *)(wr + 1), flags);
    b = uv_buf_init((char *)(wr + 1), IPC_ADVERTISE_SIZE);
    wr->data = c;
    if (uv_write(wr, (uv_stream_t *)&c->pipe, &b, 1, ipc_port_advertised) < 0) {
        free(wr);
        if (stream != NULL) {
            c->port = NULL; /* the stream is tried again by the port's retry */
            ipc_port_failed(port);
        }
        ipc_conn_close(c);
        return;
    }
    IPC_STAT(s, advertises, 1);
    if (stream != NULL) {
        /* The session's queued bytes follow the advertise; the tool takes this connection for
         * its stream. The spare, for StopTracing, comes later as after a first command. */
        port->stream = NULL;
        c->port = NULL;
        ipc_session_attach(stream, c);
        ipc_port_taken(port);
        return;
    }
    c->state = IPC_CONN_READING;
    ipc_conn_start_reading(c, 0); /* an advertised connection waits for its command forever */
}

static void
ipc_port_connect(struct ipc_port *port)
{
    struct ipc_server *s = port->srv;
    uv_connect_t *req;
    struct ipc_conn *c;

    /* A lazy session's stream is connected during the stop too: its samples are sent at exit */
    if ((s->stopping && port->stream == NULL) || port->idle != NULL || port->connecting) {
        return;
    }
    req = malloc(sizeof(*req));
    if (req == NULL || ipc_conn_new(s, port, &c) < 0) {
        free(req);
        if (s->stopping) {
            ipc_port_stream_lost(port);
        }
        ipc_port_failed(port);
        return;
    }
    /* A stream's connection is left open by the stop (ipc_server_wake()), as a stream is. */
    c->state = port->stream != NULL ? IPC_CONN_STREAMING : IPC_CONN_CONNECTING;
    req->data = c;
    port->connecting = 1;
    uv_pipe_connect(req, &c->pipe, port->path, ipc_port_connected);
}

/*
 * How long a process that resumes at its session's start (`pipeprof record`'s) waits before it
 * advertises again after its first command: the tool needs that connection only for a later
 * StopTracing (or a ResumeRuntime after a session that failed), and most of a recorded tree's
 * processes have ended by then, saving a connection on both sides.
 */
#define IPC_PORT_SPARE_DELAY_MS 20

/* The advertised connection carried a command: advertise again at once (tool waits for it). */
void
ipc_port_taken(struct ipc_port *port)
{
    int spare_later = port->srv->resume_at_session && port->suspend && !port->readvertised;

    port->idle = NULL;
    port->readvertised = 1;
    ipc_port_schedule(port, spare_later ? IPC_PORT_SPARE_DELAY_MS : 0);
}

/* The advertised connection was closed by the tool: reconnect after 10 ms. */
void
ipc_port_lost(struct ipc_port *port)
{
    port->idle = NULL;
    port->backoff_ms = 10;
    ipc_port_schedule(port, 10);
}

void
ipc_port_start(struct ipc_port *port)
{
    ipc_port_connect(port);
}

void
ipc_port_stream(struct ipc_port *port, struct ipc_session *ss)
{
    port->stream = ss;
    ipc_port_connect(port);
}

void
ipc_port_resume(struct ipc_server *s, struct ipc_port *port)
{
    if (!port->suspend || port->resumed) {
        return;
    }
    port->resumed = 1;
    pthread_mutex_lock(&s->lock);
    if (s->suspended_ports > 0 && --s->suspended_ports == 0) {
        pthread_cond_broadcast(&s->resumed);
    }
    pthread_mutex_unlock(&s->lock);
}

int
ipc_server_wait_resume(struct ipc_server *s, int timeout_ms)
{
    struct timespec deadline;
    int err = 0;

    clock_gettime(CLOCK_MONOTONIC, &deadline);
    if (timeout_ms >= 0) {
        deadline.tv_sec += timeout_ms / 1000;
        deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&s->lock);
    while (s->suspended_ports > 0 && err == 0) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&s->resumed, &s->lock);
        } else if (pthread_cond_timedwait(&s->resumed, &s->lock, &deadline) == ETIMEDOUT) {
            err = s->suspended_ports > 0 ? -ETIMEDOUT : 0;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Thread, start, stop                                                                        */
/* ------------------------------------------------------------------------------------------ */

static void
ipc_server_stop_timeout(uv_timer_t *t)
{
    struct ipc_server *s = t->data;
    struct ipc_conn *c, *next;

    /* Merged sessions whose runtime did not end its stream, and clients that did not read
     * theirs in time: everything ends now. */
    ipc_session_shutdown_late(s);
    ipc_upstream_shutdown(s, 1);
    if (!uv_is_closing((uv_handle_t *)&s->drain)) {
        uv_close((uv_handle_t *)&s->drain, NULL);
    }
    for (c = s->conns; c != NULL; c = next) {
        next = c->next;
        ipc_conn_close(c);
    }
}

static void
ipc_server_wake(uv_async_t *a)
{
    struct ipc_server *s = a->data;
    struct ipc_conn *c, *next;
    size_t i;

    if (!s->stopping || s->shutting_down) {
        return;
    }
    /* From here on the loop thread knows it stops (s->stopping is set by another thread, which
     * a drain tick may see before this callback runs). */
    s->shutting_down = 1;
    if (s->loop_started) {
        s->loop_started = 0;
        s->loop_stop(s->loop_ctx);
    }
    if (s->listen_later != NULL && !uv_is_closing((uv_handle_t *)&s->listen_timer)) {
        uv_close((uv_handle_t *)&s->listen_timer, NULL); /* never bound: nothing to remove */
    }
    if (s->lazy_pending) {
        /* Stopped before its session started: no agent ran, no sample was taken. */
        s->lazy_pending = 0;
        uv_close((uv_handle_t *)&s->lazy_timer, NULL);
        ipc_session_lazy_unstarted(s);
    }
    for (i = 0; i < s->listener_count; i++) {
        ipc_listener_drop_fd(&s->listeners[i]);
        if (s->listeners[i].open && !uv_is_closing((uv_handle_t *)&s->listeners[i].pipe)) {
            uv_close((uv_handle_t *)&s->listeners[i].pipe, NULL);
            if (s->owner_pid == getpid()) {
                ipc_sockfile_remove(s->listeners[i].path, &s->listeners[i].file);
            }
        }
    }
    if (s->stale_scan && !uv_is_closing((uv_handle_t *)&s->stale_timer)) {
        uv_close((uv_handle_t *)&s->stale_timer, NULL);
    }
    for (i = 0; i < s->port_count; i++) {
        uv_close((uv_handle_t *)&s->ports[i].retry, NULL);
    }
    ipc_session_shutdown_all(s);
    ipc_upstream_shutdown(s, 0);
    for (c = s->conns; c != NULL; c = next) {
        next = c->next;
        if (c->state != IPC_CONN_STREAMING) {
            if (c->port != NULL) {
                c->port->idle = NULL;
                c->port = NULL;
            }
            ipc_conn_close(c);
        }
    }
    if (!ipc_session_merges_pending(s) && !uv_is_closing((uv_handle_t *)&s->drain)) {
        uv_close((uv_handle_t *)&s->drain, NULL); /* else once they end (drain_all) */
    }
    uv_close((uv_handle_t *)&s->wake, NULL);
    uv_timer_start(&s->stop_timer, ipc_server_stop_timeout, IPC_SHUTDOWN_GRACE_MS, 0);
    uv_unref((uv_handle_t *)&s->stop_timer);
}

/* The lazy session's start (ipc_server_options.lazy_start_ms: deferred, or at once). */
static void
ipc_server_lazy_start(struct ipc_server *s)
{
    if (ipc_session_lazy_start(s) < 0) {
        ipc_port_connect(s->lazy_port); /* the tool starts a session on it, as without */
    }
}

static void
ipc_server_lazy_start_due(uv_timer_t *t)
{
    struct ipc_server *s = t->data;

    s->lazy_pending = 0;
    uv_close((uv_handle_t *)t, NULL);
    if (!s->shutting_down) {
        ipc_server_lazy_start(s);
    }
}

static void
ipc_server_run(void *arg)
{
    struct ipc_server *s = arg;
    int err;

    if (s->output_fd >= 0 && !atomic_load(&s->stopping)) {
        ipc_session_output_start(s); /* sampling runs before ipc_server_start() returns */
    }
    if (s->lazy_providers != NULL && s->lazy_start_ms != 0) {
        if (atomic_load(&s->stopping)) {
            if (!s->shutting_down) {           /* not a failed start's run on the host's thread */
                ipc_session_lazy_unstarted(s); /* the host ended before this thread ran */
            }
        } else {
            uv_timer_init(&s->loop, &s->lazy_timer);
            s->lazy_timer.data = s;
            s->lazy_pending = 1;
            uv_timer_start(&s->lazy_timer, ipc_server_lazy_start_due, s->lazy_start_ms, 0);
        }
    } else if (s->lazy_providers != NULL && !atomic_load(&s->stopping)) {
        ipc_server_lazy_start(s);
    }
    pthread_mutex_lock(&s->lock);
    s->output_waiting = 0;
    pthread_cond_broadcast(&s->resumed);
    pthread_mutex_unlock(&s->lock);
    if (s->loop_start != NULL && !atomic_load(&s->stopping)) {
        err = s->loop_start(s->loop_ctx, &s->loop);
        if (err != 0) {
            ipc_log(s, "services on the diagnostic loop not started: %s",
                    strerror(err < 0 ? -err : err));
        } else {
            s->loop_started = 1;
        }
    }
    uv_run(&s->loop, UV_RUN_DEFAULT);
    /* Only the stop timer may be left (unref'd): close it and finish its callbacks. */
    if (!uv_is_closing((uv_handle_t *)&s->stop_timer)) {
        uv_close((uv_handle_t *)&s->stop_timer, NULL);
    }
    uv_run(&s->loop, UV_RUN_DEFAULT);
    atomic_store(&s->loop_done, 1);
    /* ipc_server_stop_quick() waits on it: the raw call, as there (async-signal-safe). */
    syscall(SYS_futex, &s->loop_done, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void
ipc_server_thread_main(void *arg)
{
    struct ipc_server *s = arg;

    if (s->thread_init != NULL) {
        s->thread_init();
    }
    /* Named, so that tools and the agent's own counters tell it from the host's threads (here,
     * not in ipc_server_run(), which a failed start runs on the host's own thread). */
    pthread_setname_np(pthread_self(), "pipeprof-ipc");
    ipc_server_run(s);
}

static void
ipc_server_free(struct ipc_server *s)
{
    size_t i;

    for (i = 0; i < s->listener_count; i++) {
        free(s->listeners[i].path);
    }
    free(s->listeners);
    ipc_upstream_free(s);
    for (i = 0; i < s->port_count; i++) {
        free(s->ports[i].path);
    }
    free(s->ports);
    free(s->command_line);
    free(s->entrypoint);
    if (s->output_fd >= 0) {
        close(s->output_fd); /* the output session never started */
    }
    free(s->output_providers);
    free(s->lazy_providers);
    free(s->lazy_tally);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->resumed);
    free(s);
}

static int
ipc_server_add_listener(struct ipc_server *s, const char *path)
{
    struct ipc_listener *l = &s->listeners[s->listener_count];
    long owner = -1;
    int err;

    s->listener_count++; /* counted even on failure so that the path and handle are released */
    err = ipc_listener_prepare(s, l, path);
    err = err < 0 ? err : ipc_listener_bind(l, path, &owner);
    ipc_listener_drop_fd(l);
    if (err == -EEXIST || err == -EPERM || err == -EADDRINUSE) {
        ipc_log(s, "cannot listen on %s: %s (uid %ld); it is left alone", path,
                ipc_sockfile_refusal(err), owner);
    } else if (err < 0) {
        ipc_log(s, "cannot listen on %s: %s", path, strerror(-err));
    }
    return err;
}

#define IPC_DEFAULT_NAME_TRIES 8

/* path, dotnet-diagnostic-PID-KEY-socket, with another KEY (no getenv: the loop thread may
 * call this, while the host changes its environment). */
static int
ipc_default_path_rekey(char *path, size_t cap, uint64_t key)
{
    char *dash = strrchr(path, '-'), *k;
    int n;

    if (dash == NULL) {
        return -EINVAL;
    }
    *dash = '\0';
    k = strrchr(path, '-');
    *dash = '-';
    if (k == NULL) {
        return -EINVAL;
    }
    k++;
    n = snprintf(k, cap - (size_t)(k - path), "%llu-socket", (unsigned long long)key);
    if (n < 0 || (size_t)n >= cap - (size_t)(k - path) ||
        strlen(path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path)) {
        return -ENAMETOOLONG;
    }
    return 0;
}

/*
 * The runtime's default name, dotnet-diagnostic-PID-KEY-socket, is predictable: in a shared
 * /tmp another user may hold it (a file, a directory, a socket). The server then takes the same
 * name with another key, which the tools' glob of dotnet-diagnostic-PID-*-socket still finds,
 * and says so in one line. l is prepared, l->path the first name.
 */
static int
ipc_server_listen_default(struct ipc_server *s, struct ipc_listener *l)
{
    char path[256], taken[256];
    uint64_t key;
    long owner, taken_owner = -1;
    int err, i, taken_err = 0;

    snprintf(path, sizeof(path), "%s", l->path);
    for (i = 0;; i++) {
        err = ipc_listener_bind(l, path, &owner);
        if (!(err == -EEXIST || err == -EPERM || err == -EADDRINUSE) ||
            i == IPC_DEFAULT_NAME_TRIES) {
            break;
        }
        if (i == 0) {
            snprintf(taken, sizeof(taken), "%s", path);
            taken_err = err;
            taken_owner = owner;
        }
        /* a random key: another user who took one name cannot take the next in advance */
        if (getrandom(&key, sizeof(key), GRND_NONBLOCK) != (ssize_t)sizeof(key)) {
            key = nt_clock_now();
        }
        key = (key & 0xFFFFFFFFFFFFull) | 1;
        err = ipc_default_path_rekey(path, sizeof(path), key);
        if (err < 0) {
            break;
        }
    }
    ipc_listener_drop_fd(l);
    if (err == 0) {
        (void)ipc_sockfile_mark(path); /* unmarked, a leftover of this process merely stays */
    }
    if (err == 0 && i > 0) {
        ipc_log(s, "%s is taken (%s, uid %ld): listening on %s instead", taken,
                ipc_sockfile_refusal(taken_err), taken_owner, path);
    } else if (err < 0) {
        ipc_log(s, "cannot listen on %s: %s", path, strerror(-err));
    }
    return err;
}

/*
 * A recorded child that starts its session by itself (ipc_server_options.lazy_providers: the
 * children of `pipeprof record`'s tree, not CMD) is reached through its connect port; its own
 * socket at the default name is there for the tools that list and attach (`pipeprof ps`,
 * `dotnet-trace ps`, `collect -p`). It binds that name IPC_LISTEN_DEFER_MS after its start, on
 * the loop thread, unless it has stopped by then: the socket file's inode (ext4's allocation in
 * a /tmp where every child makes and removes one) and its removal at exit were the largest
 * single piece of a short child's CPU under `record` (docs/performance.md). The socket itself
 * and its handle are made at the start, with every other fd of ours: the bind creates none.
 * (ipc_server_options.listen_defer_ms: a test's other delay, 0 binds at once.)
 */

static void
ipc_server_listen_deferred(uv_timer_t *t)
{
    struct ipc_server *s = t->data;

    uv_close((uv_handle_t *)t, NULL);
    if (!s->shutting_down) {
        (void)ipc_server_listen_default(s, s->listen_later); /* it says why it failed */
    }
}

static int
ipc_server_add_default_listener(struct ipc_server *s, uint64_t key_override, unsigned defer_ms)
{
    struct ipc_listener *l = &s->listeners[s->listener_count];
    char path[256];
    int err;

    err = ipc_default_socket_path(path, sizeof(path), key_override);
    if (err < 0) {
        return err;
    }
    s->listener_count++; /* counted even on failure so that the path and handle are released */
    err = ipc_listener_prepare(s, l, path);
    if (err < 0) {
        ipc_listener_drop_fd(l);
        ipc_log(s, "cannot listen on %s: %s", path, strerror(-err));
        return err;
    }
    if (defer_ms == 0) {
        return ipc_server_listen_default(s, l);
    }
    s->listen_later = l;
    uv_timer_init(&s->loop, &s->listen_timer);
    s->listen_timer.data = s;
    uv_timer_start(&s->listen_timer, ipc_server_listen_deferred, defer_ms, 0);
    return 0;
}

/*
 * A process killed by SIGKILL leaves its default socket (dotnet-diagnostic-PID-KEY-socket) in
 * $TMPDIR, where bare leaves nothing: the next process of this user that runs the agent removes
 * such leftovers (ipc_sockfile_remove_stale(): a dead pid's, this user's, connect refused, and
 * carrying ipc_sockfile_mark()'s mark, so that a bare .NET runtime's stays). Not at the start:
 * reading a shared /tmp would cost every short child and the idle preload (issue 22). Once, on the
 * loop thread, IPC_STALE_SCAN_MS after the start, with the timer unref'd: it never keeps the loop
 * alive nor delays a stop, and a process that lives less than this never scans (the next
 * longer-lived one does). Not at the first session: a process nobody profiles would never scan.
 */
#define IPC_STALE_SCAN_MS 1000

static void
ipc_server_stale_scan(uv_timer_t *t)
{
    static const char *const prefixes[] = { "dotnet-diagnostic-" };
    struct ipc_server *s = t->data;

    uv_close((uv_handle_t *)t, NULL);
    if (!s->shutting_down) {
        /* quietly: the host's stderr is the host's, and bare removes nothing either */
        (void)ipc_sockfile_remove_stale(s->stale_dir, prefixes, 1, 1);
    }
}

/* Schedules the scan of the default socket's directory, read now (on the starting thread, as
 * the default name is: getenv on the loop thread would race the host's setenv). */
static void
ipc_server_schedule_stale_scan(struct ipc_server *s)
{
    char *base;

    if (ipc_default_socket_path(s->stale_dir, sizeof(s->stale_dir), 1) < 0 ||
        (base = strrchr(s->stale_dir, '/')) == NULL) {
        return;
    }
    base[base == s->stale_dir] = '\0'; /* "/" stays "/" */
    uv_timer_init(&s->loop, &s->stale_timer);
    s->stale_timer.data = s;
    s->stale_scan = 1;
    uv_timer_start(&s->stale_timer, ipc_server_stale_scan, IPC_STALE_SCAN_MS, 0);
    uv_unref((uv_handle_t *)&s->stale_timer);
}

#define IPC_OUTPUT_START_WAIT_MS 5000 /* a loop thread that cannot start never holds the host */

/* The output session started (or failed) on the loop thread: the host may run now. */
static void
ipc_server_wait_output(struct ipc_server *s)
{
    struct timespec deadline;

    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += IPC_OUTPUT_START_WAIT_MS / 1000;
    pthread_mutex_lock(&s->lock);
    while (s->output_waiting &&
           pthread_cond_timedwait(&s->resumed, &s->lock, &deadline) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&s->lock);
}

/* Whether ports has a connect port (where a lazy session streams). */
static int
ipc_port_list_connects(const struct ipc_port_list *ports)
{
    size_t i;

    for (i = 0; i < ports->count; i++) {
        if (ports->ports[i].type == IPC_PORT_CONNECT) {
            return 1;
        }
    }
    return 0;
}

int
ipc_server_start(const struct ipc_server_options *opts, struct ipc_server **out)
{
    struct ipc_port_list ports = { NULL, 0 };
    struct ipc_server *s;
    pthread_condattr_t ca;
    size_t i;
    int err, loop_ok = 0;

    *out = NULL;
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        if (opts->output != NULL) {
            close(opts->output->fd);
        }
        return -ENOMEM;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->resumed, &ca);
    pthread_condattr_destroy(&ca);
    s->source = opts->source;
    s->queue_cap = opts->session_queue_bytes ? opts->session_queue_bytes : IPC_SESSION_QUEUE_BYTES;
    s->request_timeout_ms =
            opts->request_timeout_ms ? opts->request_timeout_ms : IPC_REQUEST_TIMEOUT_MS;
    s->max_connections = opts->max_connections ? opts->max_connections : IPC_MAX_CONNECTIONS;
    s->log = opts->log;
    s->loop_start = opts->loop_start;
    s->loop_stop = opts->loop_stop;
    s->loop_ctx = opts->loop_ctx;
    s->log_ctx = opts->log_ctx;
    s->thread_init = opts->thread_init;
    s->resume_at_session = opts->resume_at_session && !opts->dotnet_host;
    s->owner_pid = getpid();
    s->output_fd = -1;
    if (opts->output != NULL) {
        s->output_fd = opts->output->fd;
        s->output_waiting = 1;
        s->output_providers = strdup(opts->output->providers);
        if (s->output_providers == NULL) {
            err = -ENOMEM;
            goto out;
        }
    }
    if (opts->lazy_providers != NULL && !opts->dotnet_host) {
        /* Unless deferred, its sampling runs before ipc_server_start() returns. */
        s->output_waiting = s->output_waiting || opts->lazy_start_ms == 0;
        s->lazy_start_ms = opts->lazy_start_ms;
        s->lazy_providers = strdup(opts->lazy_providers);
        s->lazy_tally = opts->lazy_tally != NULL ? strdup(opts->lazy_tally) : NULL;
        if (s->lazy_providers == NULL) {
            err = -ENOMEM;
            goto out;
        }
    }
    err = ipc_server_info_init(s);
    if (err < 0) {
        goto out;
    }
    err = ipc_ports_parse(opts->diagnostic_ports, &ports);
    if (err < 0) {
        goto out;
    }
    err = uv_loop_init(&s->loop);
    if (err < 0) {
        goto out;
    }
    loop_ok = 1;
    s->listeners = calloc(ports.count + 1, sizeof(*s->listeners));
    s->ports = calloc(ports.count + 1, sizeof(*s->ports));
    if (s->listeners == NULL || s->ports == NULL) {
        err = -ENOMEM;
        goto out;
    }
    for (i = 0; i <= ports.count; i++) {
        s->listeners[i].fd = -1;
    }
    uv_async_init(&s->loop, &s->wake, ipc_server_wake);
    s->wake.data = s;
    uv_timer_init(&s->loop, &s->drain);
    s->drain.data = s;
    uv_timer_init(&s->loop, &s->stop_timer);
    s->stop_timer.data = s;

    if (opts->listen_path == NULL) {
        err = ipc_server_add_default_listener(
                s, opts->key_override,
                s->lazy_providers != NULL && ipc_port_list_connects(&ports) ? opts->listen_defer_ms
                                                                            : 0);
    } else if (opts->listen_path[0] != '\0') {
        err = ipc_server_add_listener(s, opts->listen_path);
    }
    if (opts->listen_path == NULL) {
        ipc_server_schedule_stale_scan(s);
    }
    for (i = 0; i < ports.count; i++) {
        if (ports.ports[i].type == IPC_PORT_LISTEN) {
            (void)ipc_server_add_listener(s, ports.ports[i].path);
            continue;
        }
        s->ports[s->port_count].srv = s;
        s->ports[s->port_count].path = ports.ports[i].path;
        ports.ports[i].path = NULL;
        s->ports[s->port_count].suspend = ports.ports[i].suspend;
        s->ports[s->port_count].backoff_ms = 10;
        uv_timer_init(&s->loop, &s->ports[s->port_count].retry);
        s->ports[s->port_count].retry.data = &s->ports[s->port_count];
        /* In a .NET host the runtime holds its start-up itself, until the ResumeRuntime that
         * this server forwards to it. */
        if (s->lazy_providers != NULL && s->lazy_port == NULL) {
            /* It connects once its session has a sample: nothing to hold start-up for. */
            s->lazy_port = &s->ports[s->port_count];
            s->lazy_port->resumed = 1;
        } else if (ports.ports[i].suspend && !opts->dotnet_host) {
            s->suspended_ports++;
        }
        s->port_count++;
    }
    if (s->lazy_port == NULL) {
        free(s->lazy_providers); /* nowhere to stream to */
        s->lazy_providers = NULL;
        free(s->lazy_tally);
        s->lazy_tally = NULL;
    }
    if (err < 0 && s->port_count == 0 && opts->output == NULL) {
        goto out; /* no way to reach this server, and nothing to write */
    }
    err = ipc_upstream_init(s, opts);
    if (err < 0) {
        ipc_log(s, "cannot serve the .NET runtime's commands: %s", strerror(-err));
        goto out;
    }
    for (i = 0; i < s->port_count; i++) {
        if (!s->ports[i].waits_for_runtime && &s->ports[i] != s->lazy_port) {
            ipc_port_connect(&s->ports[i]);
        }
    }
    err = ipc_thread_start(&s->thread, ipc_server_thread_main, s); /* takes no signal */
    if (err < 0) {
        goto out;
    }
    s->thread_started = 1;
    ipc_server_wait_output(s);
out:
    ipc_port_list_fini(&ports);
    if (err < 0) {
        if (loop_ok) {
            atomic_store(&s->stopping, 1);
            ipc_server_wake(&s->wake);
            ipc_server_run(s);
            uv_loop_close(&s->loop);
        }
        ipc_server_free(s);
        return err;
    }
    *out = s;
    return 0;
}

int
ipc_server_wake_fd(const struct ipc_server *s)
{
    return s->loop.async_wfd != -1 ? s->loop.async_wfd : s->loop.async_io_watcher.fd;
}

int
ipc_server_stop_quick(struct ipc_server *s, int timeout_ms)
{
    uint64_t deadline;

    if (s == NULL) {
        return 0;
    }
    if (s->owner_pid != getpid()) {
        return -ESRCH;
    }
    atomic_store(&s->stopping, 1);
    uv_async_send(&s->wake); /* async-signal-safe */
    /*
     * Woken by the loop thread's end (a futex on loop_done, which a signal handler may wait on
     * too): polling it every 1 ms held each exit, under `record` every short child's, 1 ms longer
     * than the loop took. By the clock: on a loaded machine a wait lasts longer than asked.
     */
    deadline = ipc_client_ms() + (uint64_t)timeout_ms;
    while (!atomic_load(&s->loop_done)) {
        uint64_t now = ipc_client_ms(), left = deadline - now;
        struct timespec wait = { (time_t)(left / 1000), (long)(left % 1000) * 1000000L };

        if (now >= deadline) {
            return -ETIMEDOUT;
        }
        syscall(SYS_futex, &s->loop_done, FUTEX_WAIT_PRIVATE, 0, &wait, NULL, 0);
    }
    return 0;
}

void
ipc_server_stop(struct ipc_server *s)
{
    if (s == NULL) {
        return;
    }
    if (s->owner_pid != getpid()) {
        /* a fork()ed child: the loop thread does not exist here; leave the parent's files */
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->suspended_ports = 0;
    pthread_cond_broadcast(&s->resumed);
    pthread_mutex_unlock(&s->lock);
    atomic_store(&s->stopping, 1);
    uv_async_send(&s->wake);
    uv_thread_join(&s->thread);
    if (uv_loop_close(&s->loop) != 0) {
        ipc_log(s, "loop not empty at stop");
    }
    ipc_server_free(s);
}
