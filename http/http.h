/* SPDX-License-Identifier: MIT */
/*
 * http/http.h - pp_http: the HTTP "pull endpoints" of the agent. A small HTTP/1.1 server on a
 * libuv loop that answers swift-profile-recorder's `POST /sample` (and `POST /`) and Go's
 * `GET /debug/pprof/profile` with a profile the caller's backend records. Endpoints, limits
 * and error codes are documented in docs/http.md.
 *
 * The server never samples itself: it validates a request, asks struct http_backend for a
 * profile, writes it in the requested format (pp_profile_write) and closes the connection.
 * Every resource is bounded: connections, concurrent samplings, header and body size, and the
 * time a client may take to send its request or to read the response.
 *
 * Context: every function and every backend callback runs on the thread of the uv_loop the
 * server was started on (the diagnostic server's loop in the agent). Nothing is thread-safe or
 * async-signal-safe. That thread must block SIGPIPE (the diagnostic server's thread blocks every
 * signal): libuv writes with write(), and a client that vanishes mid-response would otherwise
 * kill the host. Dependencies: libuv, http-parser 2.9, cJSON, pp_profile.
 */
#ifndef HTTP_HTTP_H
#define HTTP_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "common/compiler.h"
#include "profile/profile.h"

typedef struct uv_loop_s uv_loop_t;
struct http_server; /* opaque; see http/server.c */

/* ------------------------------------------------------------------------------------------ */
/* Limits (docs/http.md, "Limits")                                                            */
/* ------------------------------------------------------------------------------------------ */

#define HTTP_MIN_SAMPLES     1u
#define HTTP_MAX_SAMPLES     100000u
#define HTTP_MIN_INTERVAL_NS 1000000ull      /* 1 ms: the agent's fastest timer */
#define HTTP_MAX_INTERVAL_NS 10000000000ull  /* 10 s */
#define HTTP_MAX_DURATION_NS 600000000000ull /* 10 min: samples x interval, and pprof seconds */
#define HTTP_PPROF_SECONDS   30u             /* Go's default for /debug/pprof/profile */
#define HTTP_PPROF_HZ        100u            /* Go's default CPU profiling rate */
#define HTTP_PPROF_MAX_HZ    1000u

/* Defaults for the zero fields of struct http_server_options. */
#define HTTP_DEFAULT_MAX_CONNECTIONS 64u
#define HTTP_DEFAULT_MAX_SAMPLING    1u
#define HTTP_DEFAULT_MAX_BODY        (64u * 1024u)
#define HTTP_DEFAULT_MAX_HEADER      (8u * 1024u)
#define HTTP_DEFAULT_REQUEST_TIMEOUT 10000u /* ms to send request line, headers and body */
#define HTTP_DEFAULT_WRITE_TIMEOUT   60000u /* ms to read the whole response */
#define HTTP_MAX_TOKEN               128u   /* bytes of a bearer token */

/* ------------------------------------------------------------------------------------------ */
/* Listen URLs (http/url.c)                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Where to listen, parsed from a URL. */
struct http_url {
    int family;                   /* AF_INET, AF_INET6 or AF_UNIX */
    struct sockaddr_storage addr; /* AF_INET/AF_INET6: address and port (0: any free port) */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* AF_UNIX: absolute path */
    int loopback; /* 1 for 127.0.0.0/8, ::1 and Unix sockets */
};

/*
 * Parses a listen URL: `http://127.0.0.1:PORT`, `http://[::1]:PORT`, `http://localhost:PORT`
 * (taken as 127.0.0.1, never resolved), another IP literal, `unix:///abs/path.sock`, or
 * swift-profile-recorder's `http+unix://%2Fabs%2Fpath.sock`. `{PID}` is replaced by getpid()
 * and `{UUID}` by a random UUID first, so one pattern serves every process of a container.
 * A non-loopback address is refused unless allow_remote is nonzero. Returns 0, or -EINVAL with
 * a sentence in err (err may be NULL).
 */
PP_MUST_USE int http_url_parse(const char *url, int allow_remote, struct http_url *out, char *err,
                               size_t errlen);

/* ------------------------------------------------------------------------------------------ */
/* Backend: who records the profile                                                           */
/* ------------------------------------------------------------------------------------------ */

/* A validated request for a profile. */
struct http_sample_request {
    unsigned samples;              /* how many times to sample (every thread), >= 1 */
    uint64_t interval_ns;          /* between two samples; samples x interval_ns <= 10 min */
    unsigned seconds;              /* /debug/pprof/profile: requested duration; 0 for /sample */
    unsigned hz;                   /* /debug/pprof/profile: requested rate; 0 for /sample */
    enum pp_profile_format format; /* what the server will write; the backend may ignore it */
    int pprof_endpoint;            /* 1 for GET /debug/pprof/profile, 0 for POST /sample */
};

/*
 * Completion of a sample_start(). err is 0 with a named profile p, or a negative errno with p
 * NULL and why a sentence (or NULL) that is copied before done returns: -EBUSY (sampler busy)
 * is answered 429, -EINVAL 400, -ENOTSUP/-ENOSYS 501, anything else 500.
 * Ownership: the server takes p (pp_profile_free), also when the client has gone.
 * Context: the loop thread. May be called from within sample_start() itself.
 */
typedef void (*http_sample_done_fn)(void *token, struct pp_profile *p, int err, const char *why);

struct http_backend {
    /*
     * Starts recording req. Returns 0 and stores an identifier of the recording in *handle (for
     * sample_cancel), after which done(token, ...) is called exactly once unless sample_cancel
     * comes first; or a negative errno (mapped as for done) and done is never called.
     */
    int (*sample_start)(void *ctx, const struct http_sample_request *req, http_sample_done_fn done,
                        void *token, void **handle);
    /*
     * Abandons a started recording whose done has not been called yet (the client went away or
     * the server stops). After it returns, done must never be called for that handle.
     */
    void (*sample_cancel)(void *ctx, void *handle);
    void *ctx; /* borrowed; passed to both */
};

/* ------------------------------------------------------------------------------------------ */
/* Server (http/server.c)                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Zero fields take the HTTP_DEFAULT_* values. */
struct http_server_options {
    const char *url; /* listen URL, see http_url_parse(); {PID} patterns allowed */
    /*
     * 1: a TCP URL may be served. Any local user can connect to a TCP port (a Unix socket is
     * 0600) and make the process sample itself and read its stacks, thread names and module
     * paths, so TCP is refused (-EACCES) unless the caller opts in.
     */
    int allow_tcp;
    int allow_remote; /* listen on a non-loopback address too (needs allow_tcp) */
    /*
     * A bearer token (copied; NULL or "": none). Every request must then carry
     * "Authorization: Bearer TOKEN", compared in constant time; others get 401.
     */
    const char *token;
    unsigned max_connections;    /* open connections; more are answered 503 */
    unsigned max_sampling;       /* concurrent recordings; more are answered 429 */
    size_t max_body;             /* request body bytes; more: 413 */
    size_t max_header;           /* request line + header bytes; more: 431 */
    unsigned request_timeout_ms; /* to receive the whole request; then 408 and close */
    unsigned write_timeout_ms;   /* to send the whole response; then close */
};

/*
 * Binds, listens and starts accepting on loop. A Unix socket is created with mode 0600; a stale
 * socket file (nobody accepting) is replaced, a live one or any other file is not (-EADDRINUSE,
 * -EEXIST). Returns 0, or a negative errno with a sentence in err. Every failure but one is
 * clean at once; only when libuv refuses the already-listening socket (uv_*_open, uv_listen) is
 * a closing handle left, which the next uv_run() releases.
 * Ownership: caller owns *out and ends it with http_server_stop(). backend is copied; its ctx
 * must outlive the server. Context: the loop thread.
 */
PP_MUST_USE int http_server_start(uv_loop_t *loop, const struct http_server_options *opts,
                                  const struct http_backend *backend, struct http_server **out,
                                  char *err, size_t errlen);

/*
 * The URL actually served (the port filled in when the URL said 0), e.g.
 * "http://127.0.0.1:40123" or "unix:///tmp/pp.sock", into buf. Returns buf.
 */
const char *http_server_url(const struct http_server *s, char *buf, size_t len);

/*
 * Stops accepting, cancels running recordings, closes every connection and removes the Unix
 * socket file. The memory is released once the loop has run the close callbacks, so the loop
 * must run again (uv_run) before it is closed. Accepts NULL. Context: the loop thread.
 */
void http_server_stop(struct http_server *s);

#endif /* HTTP_HTTP_H */
