/* SPDX-License-Identifier: MIT */
/*
 * ipc/internal.h - declarations shared by server.c (thread, listeners, connect ports), conn.c
 * (one diagnostic connection: read one request, dispatch, answer) and session.c (tracing
 * sessions streaming nettrace). Private to ipc/ (and white-box tests).
 *
 * The three files call each other, and that cycle is kept on purpose. server.c owns the
 * connections and the sessions; conn.c hands a decoded command to a session (collect, stop) and
 * tells the server about its port (taken, lost, resumed); session.c answers on the connection
 * that asked (respond, close, read the next request) and logs through the server. All three
 * run on the one loop thread and share one struct ipc_server, so a callback interface between
 * them would add an indirection with no second implementation behind it. The rule that keeps
 * it small: only these three files, thread.c, and upstream.c, redirect.c and merge.c (the .NET
 * runtime behind the server, in a host it fronts; ipc/upstream-internal.h) see each other's
 * internals (this header); everything outside ipc/ sees ipc/ipc.h alone.
 *
 * Context: everything here runs on the loop thread, except the fields under srv->lock.
 * Handle lifetime: a struct holding uv handles is freed only in the last close callback.
 */
#ifndef IPC_INTERNAL_H
#define IPC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <uv.h>

#include "ipc/ipc.h"
#include "nettrace/nettrace.h"

/* Merged sessions (.NET host): how far the writer reorders events by time, and how long a stop
 * waits for the runtime to end its stream (its rundown can take a while in a large app). */
#define IPC_MERGE_REORDER_NS      (500ull * 1000000)
#define IPC_MERGE_STOP_TIMEOUT_MS 30000

struct ipc_session;
struct ipc_conn;
struct ipc_upstream; /* upstream.c: one connection to the runtime's own server */
struct ipc_merge;    /* merge.c: the runtime's event stream of one merged session */

/* A listening socket: the default one, PIPEPROF_DIAGNOSTIC_PORT, or a ",listen" port. */
struct ipc_listener {
    uv_pipe_t pipe;
    struct ipc_server *srv;
    char *path;
    struct ipc_sockfile file; /* the socket file bound, removed at stop if still ours */
    int open;                 /* the handle was initialized (must be closed) */
    int fd;                   /* its socket until the handle takes it at listen, else -1 */
};

/* A connect port of DOTNET_DiagnosticPorts (reverse mode). */
struct ipc_port {
    struct ipc_server *srv;
    char *path;
    int suspend; /* this port holds the host's start-up until ResumeRuntime arrives on it */
    int resumed;
    int readvertised;      /* a connection of this port carried a command already */
    struct ipc_conn *idle; /* the advertised connection waiting for a command, or NULL */
    int connecting;        /* a connect is in flight */
    /* A lazy session (ipc_server_options.lazy_providers) to stream on the connection being
     * made, advertised with IPC_ADVERTISE_STREAM_FOLLOWS; NULL: the port advertises for commands */
    struct ipc_session *stream;
    uv_timer_t retry;
    unsigned backoff_ms; /* 10 ms, x1.25 per failure, capped at 500 ms (the runtime's) */
    /* .NET host (upstream.c): the runtime's connects to path are redirected to rt_path, where
     * it advertises; its idle connection is kept for the commands that must reach it through
     * this port (ResumeRuntime). */
    uv_pipe_t rt_listen;
    int rt_open;
    char *rt_path;
    struct ipc_upstream *rt_idle;
    int waits_for_runtime; /* not connected yet: the runtime has not advertised */
};

enum ipc_conn_state {
    IPC_CONN_CONNECTING, /* connect port: uv_pipe_connect in flight */
    IPC_CONN_READING,    /* reading the header, then the payload */
    IPC_CONN_BUSY,       /* request handled; a response is being written, or a stop waits */
    IPC_CONN_STREAMING,  /* the nettrace stream of a session */
    IPC_CONN_CLOSING,
};

struct ipc_conn {
    uv_pipe_t pipe;
    uv_timer_t timer; /* request timeout, or the stop's drain timeout */
    struct ipc_server *srv;
    struct ipc_port *port;        /* the connect port it came from, or NULL */
    struct ipc_session *session;  /* STREAMING: the session it carries */
    struct ipc_session *stopping; /* BUSY: the session whose stop it waits for */
    struct ipc_upstream *up;      /* BUSY: the runtime is answering its command */
    enum ipc_conn_state state;
    int handles; /* open uv handles; freed when it reaches 0 */
    uint8_t hdr[IPC_HEADER_SIZE];
    size_t got;    /* bytes of header + payload read */
    int bad_magic; /* answer UNKNOWN_MAGIC once the payload is read */
    struct ipc_header h;
    uint8_t *payload;
    uint8_t scratch[64]; /* reads on a streaming connection: only EOF matters */
    struct ipc_conn *prev, *next;
};

struct ipc_session {
    struct ipc_server *srv;
    struct ipc_conn *conn; /* streaming connection; NULL once closed */
    struct ipc_collect req;
    struct ipc_session_config cfg;
    struct nt_writer *w;
    struct nt_sink sink;
    uint8_t *pend; /* sink output not yet handed to libuv */
    size_t pend_len, pend_cap;
    size_t queued; /* handed to uv_write, not yet written */
    int refs;      /* 1 for the stream + 1 per write in flight */
    int sink_err;
    int finished;               /* end tag written */
    int source_started;         /* session_start was called: session_stop is owed */
    struct ipc_conn *stop_conn; /* answer OK(id) here once the stream is closed */
    uint64_t lost_reported;
    /* .NET host: the runtime's own session that feeds this one (upstream.c), its id there, and
     * whether its end was asked for (StopTracing sent to the runtime). */
    struct ipc_merge *merge;
    uint64_t runtime_session_id;
    int merge_stopping;
    int merge_done;           /* the runtime's stream has ended */
    int runtime_process_info; /* the runtime's stream carried its ProcessInfo event */
    /* A file session (ipc_server_options.output): the file its sink writes into (-1 for a
     * connection's session), and when it last wrote the names of new addresses. */
    int fd;
    uint64_t names_ns;
    /* A lazy session (ipc_server_options.lazy_providers): 1 while it waits for its first sample
     * with no connection (its bytes queue in pend), 2 while its connection is being made. */
    int lazy;
    struct ipc_session *prev, *next;
};

struct ipc_server {
    uv_loop_t loop;
    uv_async_t wake;
    uv_timer_t drain;
    uv_timer_t stop_timer;
    uv_thread_t thread;
    int thread_started;
    atomic_int stopping; /* set by ipc_server_stop() on another thread */
    int shutting_down;   /* the loop thread has begun the stop (ipc_server_wake()) */

    struct ipc_listener *listeners;
    size_t listener_count;
    /* The default listener of a lazy child, bound on the loop thread IPC_LISTEN_DEFER_MS after
     * the start by listen_timer (server.c says why), or NULL. */
    struct ipc_listener *listen_later;
    uv_timer_t listen_timer;
    /* One scan of $TMPDIR for the default sockets of this user's killed processes,
     * IPC_STALE_SCAN_MS after the start (server.c says why then). */
    uv_timer_t stale_timer;
    int stale_scan;      /* the timer was initialized (must be closed) */
    char stale_dir[256]; /* $TMPDIR as the start saw it (the host may change its environment) */
    struct ipc_port *ports;
    size_t port_count;
    struct ipc_conn *conns;
    size_t conn_count;
    struct ipc_session *sessions;
    size_t session_count;

    const struct ipc_event_source *source;
    size_t queue_cap;
    uint32_t request_timeout_ms;
    size_t max_connections;
    void (*log)(void *ctx, const char *line);
    void *log_ctx;
    int (*loop_start)(void *ctx, void *loop); /* ipc_server_options; run on the loop thread */
    void (*loop_stop)(void *ctx);
    void *loop_ctx;
    int loop_started;     /* loop_start succeeded and loop_stop has not run yet */
    atomic_int loop_done; /* the loop thread left uv_run for good */

    /* what ProcessInfo reports */
    struct ipc_process_info info;
    char *command_line, *entrypoint;
    uint8_t cookie[16];
    int resume_at_session; /* ipc_server_options: a session's start resumes its suspend port */
    int owner_pid;         /* the process that created it: a fork()ed child must not unlink */

    /* .NET host (upstream.c; docs/dotnet-hosts.md) */
    int dotnet;
    char *rt_path;           /* the runtime's own listen socket */
    int rt_impostor_said;    /* a stranger answered on rt_path (said once) */
    uint64_t rt_deadline_ms; /* ipc_client_ms() until which commands wait for the runtime */
    int rt_seen;             /* the runtime answered once: a failure now is final */
    uv_timer_t rt_timer;     /* at the deadline, ports stop waiting for the runtime */
    int rt_timer_open;
    int redirects;            /* this server wrote the redirect table (ipc_redirect_path()) */
    uv_async_t merge_wake;    /* a runtime stream's reader has news for the loop */
    struct ipc_upstream *ups; /* live connections to the runtime */
    void (*thread_init)(void);
    int output_fd;              /* the output session's file until it starts; -1: none */
    char *output_providers;     /* its providers */
    char *lazy_providers;       /* ipc_server_options.lazy_providers, until its session starts */
    struct ipc_port *lazy_port; /* the port a lazy session streams on: connected only then */
    char *lazy_tally;           /* ipc_server_options.lazy_tally, or NULL */
    unsigned lazy_start_ms;     /* ipc_server_options.lazy_start_ms */
    uv_timer_t lazy_timer;      /* the deferred start of the lazy session */
    int lazy_pending;           /* lazy_timer runs: the session has not started */

    pthread_mutex_t lock; /* protects the fields below (read by other threads) */
    pthread_cond_t resumed;
    int suspended_ports; /* suspend ports that have not received ResumeRuntime */
    int output_waiting;  /* the output session is not started yet (the cond resumed says when) */
    struct ipc_server_stats stats;
};

/* server.c */
void ipc_log(struct ipc_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ipc_stats_add(struct ipc_server *s, size_t offset, uint64_t n);
#define IPC_STAT(s, field, n) ipc_stats_add((s), offsetof(struct ipc_server_stats, field), (n))
void ipc_port_taken(struct ipc_port *port);
void ipc_port_lost(struct ipc_port *port);
void ipc_port_resume(struct ipc_server *s, struct ipc_port *port);
void ipc_port_start(struct ipc_port *port); /* connect and advertise (and again when needed) */
/* Connects the port to stream ss (a lazy session), then advertises its spare connection
 * IPC_PORT_SPARE_DELAY_MS later; ipc_session_attach() once connected. Also during the stop. */
void ipc_port_stream(struct ipc_port *port, struct ipc_session *ss);

/* conn.c */
PP_MUST_USE int ipc_conn_new(struct ipc_server *s, struct ipc_port *port, struct ipc_conn **out);
/* Answers c's request (state BUSY, header and payload read) as a native process would. */
void ipc_conn_dispatch_native(struct ipc_conn *c);
/* Starts reading (c->state must be set: READING or STREAMING); timeout_ms 0: no timeout. */
void ipc_conn_start_reading(struct ipc_conn *c, uint32_t timeout_ms);
void ipc_conn_close(struct ipc_conn *c);
void ipc_conn_respond(struct ipc_conn *c, const void *buf, size_t len);
void ipc_conn_respond_error(struct ipc_conn *c, uint32_t hresult);

/* session.c */
/* Starts a session on c (takes req); merge, when not NULL, feeds it the runtime's session
 * runtime_id (the session takes the merge's reference). */
void ipc_session_collect(struct ipc_conn *c, struct ipc_collect *req, struct ipc_merge *merge,
                         uint64_t runtime_id);
void ipc_session_stop_request(struct ipc_conn *c, uint64_t id);
/* Starts the output session into s->output_fd (taken, also on failure). */
void ipc_session_output_start(struct ipc_server *s);
/* Starts the lazy session of s->lazy_providers (ipc_server_options.lazy_providers); returns 0
 * or a negative errno (then the port connects as for any session). */
PP_MUST_USE int ipc_session_lazy_start(struct ipc_server *s);
/* The process stops before its deferred lazy session started: it had no sample; the tally. */
void ipc_session_lazy_unstarted(struct ipc_server *s);
/* The lazy session's connection is made: c streams it from now on (what it queued first). */
void ipc_session_attach(struct ipc_session *ss, struct ipc_conn *c);
void ipc_session_conn_closed(struct ipc_session *ss);
void ipc_session_drain_all(struct ipc_server *s);
void ipc_session_shutdown_all(struct ipc_server *s);
/* Merged sessions of a stop that still wait for the runtime's stream to end. */
int ipc_session_merges_pending(const struct ipc_server *s);
/* The stop's grace is over: every session still open ends now. */
void ipc_session_shutdown_late(struct ipc_server *s);
/* The runtime's stream of a stopping merged session ended (or will not): finish it. */
void ipc_session_merge_ended(struct ipc_session *ss);

/* upstream.c: the runtime behind this server, in a .NET host */
/* After the ports are set up, in ipc_server_start(): private paths, redirects, runtime port
 * listeners. Does nothing unless o->dotnet_host. */
PP_MUST_USE int ipc_upstream_init(struct ipc_server *s, const struct ipc_server_options *o);
/* On the loop thread, at stop: listeners and timers close, and every connection to the runtime
 * but the StopTracing requests of merged sessions (all=0), or all of them (all=1). */
void ipc_upstream_shutdown(struct ipc_server *s, int all);
void ipc_upstream_free(struct ipc_server *s);
/* The PID of a file name PREFIX-PID-X-socket (X: anything not empty), or 0. */
long ipc_sockfile_name_pid(const char *name, const char *prefix);
/*
 * Removes from dir the socket files named PREFIX-PID-X-socket (one of prefixes) that a killed
 * process of this user left behind: only of a PID that no longer runs (kill(pid, 0) says ESRCH:
 * a live or another user's process is left alone), not this process's, sockets this user owns
 * (lstat: a symbolic link is not followed) on which a connect is refused (one a process listens
 * on, a reused pid's, stays), and when marked_only, only those ipc_sockfile_mark() marked.
 * Returns how many; never fails. Context: any thread; reads the whole directory.
 */
unsigned ipc_sockfile_remove_stale(const char *dir, const char *const *prefixes, size_t n_prefixes,
                                   int marked_only);
/* Removes from dir the private socket files a killed process of this user left behind
 * (pipeprof-port-PID-N-socket, pipeprof-runtime-PID-KEY-socket of a PID that no longer runs,
 * sockets this user owns that nobody listens on). Returns how many; never fails. */
unsigned ipc_upstream_remove_stale(const char *dir);
/* 1 when commands go to the runtime: a .NET host, or a runtime that appeared in another
 * process (its bind was redirected); then this server is a .NET host's from that moment on. */
int ipc_upstream_active(struct ipc_server *s);
/* Forwards c's request to the runtime and relays the answer; natively when there is none. */
void ipc_upstream_forward(struct ipc_conn *c);
/* CollectTracing in a .NET host: the runtime's session first, then ours (takes req). */
void ipc_upstream_collect(struct ipc_conn *c, struct ipc_collect *req);
/* StopTracing of a merged session: asks the runtime to end its session. */
void ipc_upstream_stop_session(struct ipc_session *ss);
/* c is closing while the runtime answers its command. */
void ipc_upstream_conn_closed(struct ipc_conn *c);
/* merge.c: the runtime's stream of a merged session, read by a thread of its own.
 * Writes the runtime events queued for ss; returns 1 once its stream has ended, else 0. */
int ipc_merge_pump(struct ipc_session *ss, int congested);
/* Logs what ss's writer wrote late, once it has finished (no-op for a session not merged). */
void ipc_merge_finished(struct ipc_session *ss);
/* Starts reading the runtime's stream on fd (taken, also on failure) in a thread of its own. */
PP_MUST_USE int ipc_merge_new(struct ipc_server *s, int fd, struct ipc_merge **out);
/* The sync time the merged session's writer must use (0 when unknown). */
void ipc_merge_sync(const struct ipc_merge *m, uint64_t *ticks, int64_t *unix_ns);
/* Ends the reading of the runtime's stream and drops the session's reference. */
void ipc_merge_release(struct ipc_merge *m);
/* thread.c: starts fn(arg) on a new thread with every signal blocked in it; joinable NULL: the
 * thread is detached, else *joinable is it (uv_thread_join). Returns 0 or -errno. */
PP_MUST_USE int ipc_thread_start(uv_thread_t *joinable, void (*fn)(void *), void *arg);

#endif /* IPC_INTERNAL_H */
