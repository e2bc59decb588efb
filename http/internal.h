/* SPDX-License-Identifier: MIT */
/*
 * http/internal.h - the I/O-free parts of pp_http, shared by server.c and the white-box tests:
 * the request reader (request.c: bytes -> one parsed request or a precise HTTP error), the
 * router (route.c: request -> action or error) and the response builders (route.c).
 * None of them touches a socket, a timer or a clock, so they can be fuzzed.
 * Context: one thread per object.
 */
#ifndef HTTP_INTERNAL_H
#define HTTP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>

#include "http/http.h"

/* An HTTP error answer: status, a stable machine-readable code, a sentence for people. */
struct http_error {
    int status;        /* 4xx/5xx; 0 while there is no error */
    const char *error; /* static: "malformed_json", "body_too_large", ... (docs/http.md) */
    char detail[192];
};

/* Records the first error only; later calls are ignored. Returns -EBADMSG for convenience. */
int http_error_set(struct http_error *e, int status, const char *error, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* ------------------------------------------------------------------------------------------ */
/* request.c                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/*
 * One request being received. Feed it bytes as they arrive; it keeps the method, the request
 * target and the (de-chunked) body, and nothing else of the headers but Expect. Pipelined
 * bytes after the first request are ignored: the server answers one request per connection.
 */
struct http_request {
    http_parser parser;
    http_parser_settings settings;
    size_t max_header, max_body;
    size_t header_bytes; /* bytes fed before the headers were complete */
    int headers_done;
    int complete;        /* the whole message, body included, was received */
    int expect_continue; /* the client waits for "100 Continue" before the body */
    unsigned method;     /* enum http_method, once headers_done */
    unsigned short http_major, http_minor;
    char *url; /* request target, NUL-terminated; owned */
    size_t url_len;
    char *body; /* NUL-terminated (the NUL is not counted); owned */
    size_t body_len, body_cap;
    /* the header being received, only as far as needed to recognise Expect */
    char field[16];
    size_t field_len; /* > sizeof(field): a long name, not one we look at */
    int field_done;   /* the value of the current header has started */
    char value[32];
    size_t value_len;
    char start[3]; /* the first bytes: "PRI" opens HTTP/2's preface, which http-parser rejects */
    char auth[HTTP_MAX_TOKEN + 16]; /* the Authorization header's value, as far as it fits */
    size_t auth_len;                /* > sizeof(auth): longer than any token we accept */
    size_t start_len;
    struct http_error err;
};

/* Prepares r. Zero limits take HTTP_DEFAULT_MAX_HEADER/BODY. */
void http_request_init(struct http_request *r, size_t max_header, size_t max_body);

/* Frees what r owns. Accepts a zeroed or finished r; r can be init'ed again. */
void http_request_fini(struct http_request *r);

/*
 * Parses len more bytes. Returns 1 when the request is complete (later calls keep returning 1
 * and ignore their bytes), 0 when more bytes are needed, -EBADMSG with r->err set (400, 413,
 * 417, 431, 505) or -ENOMEM.
 */
PP_MUST_USE int http_request_feed(struct http_request *r, const char *data, size_t len);

/* The peer finished sending. Returns 1 if the request is complete, else -EBADMSG (400). */
PP_MUST_USE int http_request_eof(struct http_request *r);

/* ------------------------------------------------------------------------------------------ */
/* route.c                                                                                    */
/* ------------------------------------------------------------------------------------------ */

enum http_action {
    HTTP_ACTION_ERROR = 0, /* answer route.err */
    HTTP_ACTION_INDEX,     /* answer the text index of endpoints */
    HTTP_ACTION_SAMPLE,    /* record route.sample and answer the profile */
};

struct http_route {
    enum http_action action;
    struct http_sample_request sample;
    struct http_error err;
    const char *allow; /* 405: the Allow header's value */
};

/* Decides what a complete request asks for. Never fails: everything wrong becomes an error. */
void http_route_request(const struct http_request *r, struct http_route *out);

/*
 * Whether the request carries "Authorization: Bearer TOKEN" with token[0, token_len) (the
 * scheme in any case). The comparison takes the same time wherever the first difference is.
 * Returns 1, or 0 with a 401 "unauthorized" in *err.
 */
int http_request_authorized(const struct http_request *r, const char *token, size_t token_len,
                            struct http_error *err);

/*
 * Parses a swift-profile-recorder interval: a decimal number, optional whitespace, and a unit
 * ns, us, ms, s, min, h or hr (any case; none means ms). Returns 0 with *ns, or -EINVAL.
 */
PP_MUST_USE int http_interval_parse(const char *text, uint64_t *ns);

/* The text of GET /. */
extern const char http_index_text[];

/* An HTTP response: the head (status line and headers) and a body, each malloc'd. */
struct http_response {
    char *head;
    size_t head_len;
    char *body;
    size_t body_len;
};

/*
 * Builds a response that takes ownership of body (malloc'd or NULL, freed also on failure).
 * extra is more header lines, each ending in "\r\n", or NULL. Every response says
 * "Connection: close". Returns 0 or -ENOMEM.
 */
PP_MUST_USE int http_response_build(struct http_response *out, int status, const char *content_type,
                                    const char *extra, char *body, size_t body_len);

/*
 * Builds the JSON error answer of e: {"error": e->error, "detail": e->detail}, with Allow when
 * allow is set (405), Retry-After when retry_after_s is nonzero (429, 503), and
 * WWW-Authenticate for a 401.
 */
PP_MUST_USE int http_response_error(struct http_response *out, const struct http_error *e,
                                    const char *allow, unsigned retry_after_s);

void http_response_fini(struct http_response *r);

/* The reason phrase of a status ("Not Found"). */
const char *http_status_text(int status);

/* ------------------------------------------------------------------------------------------ */
/* server.c                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* What the tests wait on in place of a sleep: the server's state as of now. */
struct http_server_counts {
    unsigned conns; /* connections held, closing ones included until their close callbacks */
    uint64_t reads; /* reads that brought a connection request bytes, since the start */
    /* connections held and not closing as the last newcomer came, before any idle one was
     * closed for it: a 503'd one still lingering then is among them */
    unsigned open_at_accept;
};

/* Fills out. Context: any thread (all are atomics the loop thread writes). */
void http_server_counts(struct http_server *s, struct http_server_counts *out);

#endif /* HTTP_INTERNAL_H */
