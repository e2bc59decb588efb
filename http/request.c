/* SPDX-License-Identifier: MIT */
/*
 * http/request.c - receives one HTTP/1.x request from bytes that arrive in arbitrary pieces,
 * on top of http-parser's callbacks. It enforces the header and body limits itself (http-parser
 * only has a process-wide header limit, which a library inside a host must not change) and turns
 * every failure into the precise status a client should see. No I/O, no clock: fuzzed by
 * tests/fuzz/fuzz-http-request.c. Context: one thread per request.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "http/internal.h"

int
http_error_set(struct http_error *e, int status, const char *error, const char *fmt, ...)
{
    va_list ap;

    if (e->status != 0) {
        return -EBADMSG;
    }
    e->status = status;
    e->error = error;
    va_start(ap, fmt);
    vsnprintf(e->detail, sizeof(e->detail), fmt, ap);
    va_end(ap);
    return -EBADMSG;
}

static struct http_request *
http_req(http_parser *p)
{
    return p->data;
}

/* Appends to a NUL-terminated growing buffer. Returns 0 or -ENOMEM. */
static int
http_append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t want = *cap != 0 ? *cap : 64;
        char *nb;

        while (want < *len + n + 1) {
            want *= 2;
        }
        nb = realloc(*buf, want);
        if (nb == NULL) {
            return -ENOMEM;
        }
        *buf = nb;
        *cap = want;
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

static int
http_on_url(http_parser *p, const char *at, size_t len)
{
    struct http_request *r = http_req(p);
    char *nb;

    /* Exact-size growth: the target is bounded by max_header and usually arrives in one piece. */
    nb = realloc(r->url, r->url_len + len + 1);
    if (nb == NULL) {
        http_error_set(&r->err, 500, "out_of_memory", "no memory for the request target");
        return -1;
    }
    r->url = nb;
    memcpy(r->url + r->url_len, at, len);
    r->url_len += len;
    r->url[r->url_len] = '\0';
    return 0;
}

/* A header name and value have both been received: act on the ones we care about. */
static int
http_finish_header(struct http_request *r)
{
    const char *v = r->value;
    size_t n = r->value_len;
    int is_expect = r->field_len == 6 && memcmp(r->field, "expect", 6) == 0;

    r->field_len = 0;
    r->field_done = 0;
    r->value_len = 0;
    if (!is_expect) {
        return 0;
    }
    while (n > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t')) {
        n--;
    }
    if (n == 12 && strncasecmp(v, "100-continue", 12) == 0) {
        r->expect_continue = 1;
        return 0;
    }
    return http_error_set(&r->err, 417, "expectation_failed",
                          "only \"Expect: 100-continue\" is supported");
}

static int
http_on_header_field(http_parser *p, const char *at, size_t len)
{
    struct http_request *r = http_req(p);
    size_t i;

    if (r->headers_done) {
        return 0; /* trailers of a chunked body: nothing there matters */
    }
    if (r->field_done && http_finish_header(r) != 0) {
        return -1;
    }
    for (i = 0; i < len; i++) {
        if (r->field_len < sizeof(r->field)) {
            char c = at[i];

            r->field[r->field_len] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        }
        /* A name longer than the buffer keeps counting, so it never equals a short name. */
        if (r->field_len < sizeof(r->field) + 1) {
            r->field_len++;
        }
    }
    return 0;
}

static int
http_on_header_value(http_parser *p, const char *at, size_t len)
{
    struct http_request *r = http_req(p);
    size_t n;

    if (r->headers_done) {
        return 0;
    }
    r->field_done = 1;
    if (r->field_len == 13 && memcmp(r->field, "authorization", 13) == 0) {
        /* a value longer than the buffer is marked so, and never matches a token */
        if (len > sizeof(r->auth) - r->auth_len || r->auth_len > sizeof(r->auth)) {
            r->auth_len = sizeof(r->auth) + 1;
            return 0;
        }
        memcpy(r->auth + r->auth_len, at, len);
        r->auth_len += len;
        return 0;
    }
    if (r->field_len != 6 || memcmp(r->field, "expect", 6) != 0) {
        return 0;
    }
    n = sizeof(r->value) - r->value_len;
    if (len > n) {
        /* too long to be "100-continue": any content past the buffer makes it a mismatch */
        memcpy(r->value + r->value_len, at, n);
        r->value_len = sizeof(r->value);
        return 0;
    }
    memcpy(r->value + r->value_len, at, len);
    r->value_len += len;
    return 0;
}

static int
http_on_headers_complete(http_parser *p)
{
    struct http_request *r = http_req(p);

    if (r->field_done && http_finish_header(r) != 0) {
        return -1;
    }
    r->headers_done = 1;
    r->method = p->method;
    r->http_major = p->http_major;
    r->http_minor = p->http_minor;
    if (p->http_major != 1) {
        http_error_set(&r->err, 505, "version_not_supported",
                       "HTTP/%u.%u is not supported; use HTTP/1.1", p->http_major, p->http_minor);
        return -1;
    }
    /* ULLONG_MAX means no Content-Length (chunked or no body); on_body checks chunked bodies. */
    if (p->content_length != ULLONG_MAX && p->content_length > r->max_body) {
        http_error_set(&r->err, 413, "body_too_large", "the body has %llu bytes; the limit is %zu",
                       (unsigned long long)p->content_length, r->max_body);
        return -1;
    }
    return 0;
}

static int
http_on_body(http_parser *p, const char *at, size_t len)
{
    struct http_request *r = http_req(p);

    if (len > r->max_body - r->body_len) {
        http_error_set(&r->err, 413, "body_too_large", "the body exceeds the limit of %zu bytes",
                       r->max_body);
        return -1;
    }
    if (http_append(&r->body, &r->body_len, &r->body_cap, at, len) != 0) {
        http_error_set(&r->err, 500, "out_of_memory", "no memory for the request body");
        return -1;
    }
    return 0;
}

static int
http_on_message_complete(http_parser *p)
{
    struct http_request *r = http_req(p);

    r->complete = 1;
    /* One request per connection: stop here, so pipelined bytes are never parsed. */
    http_parser_pause(p, 1);
    return 0;
}

void
http_request_init(struct http_request *r, size_t max_header, size_t max_body)
{
    memset(r, 0, sizeof(*r));
    r->max_header = max_header != 0 ? max_header : HTTP_DEFAULT_MAX_HEADER;
    r->max_body = max_body != 0 ? max_body : HTTP_DEFAULT_MAX_BODY;
    http_parser_init(&r->parser, HTTP_REQUEST);
    r->parser.data = r;
    http_parser_settings_init(&r->settings);
    r->settings.on_url = http_on_url;
    r->settings.on_header_field = http_on_header_field;
    r->settings.on_header_value = http_on_header_value;
    r->settings.on_headers_complete = http_on_headers_complete;
    r->settings.on_body = http_on_body;
    r->settings.on_message_complete = http_on_message_complete;
}

void
http_request_fini(struct http_request *r)
{
    free(r->url);
    free(r->body);
    r->url = NULL;
    r->body = NULL;
    r->url_len = r->body_len = r->body_cap = 0;
}

static int
http_request_status(struct http_request *r)
{
    if (r->err.status == 500) {
        return -ENOMEM;
    }
    return r->err.status != 0 ? -EBADMSG : r->complete;
}

int
http_request_feed(struct http_request *r, const char *data, size_t len)
{
    size_t off = 0;

    if (r->complete || r->err.status != 0) {
        return http_request_status(r);
    }
    while (off < len) {
        size_t n = len - off;
        size_t got, k;
        int in_head = !r->headers_done;
        enum http_errno e;

        if (in_head && n > r->max_header - r->header_bytes) {
            n = r->max_header - r->header_bytes; /* never parse a head past the limit */
        }
        for (k = 0; r->start_len < sizeof(r->start) && k < n; k++) {
            r->start[r->start_len++] = data[off + k];
        }
        got = http_parser_execute(&r->parser, &r->settings, data + off, n);
        if (r->err.status != 0 || r->complete) {
            return http_request_status(r);
        }
        e = HTTP_PARSER_ERRNO(&r->parser);
        if (e != HPE_OK && r->start_len == sizeof(r->start) && memcmp(r->start, "PRI", 3) == 0) {
            /* "PRI * HTTP/2.0": no HTTP/1 method starts so; http-parser 2.9 knows no PRI */
            return http_error_set(&r->err, 505, "version_not_supported",
                                  "HTTP/2 is not supported; use HTTP/1.1");
        }
        if (e != HPE_OK) {
            return http_error_set(&r->err, 400, "malformed_request", "bad HTTP request: %s",
                                  http_errno_description(e));
        }
        if (in_head && !r->headers_done) {
            r->header_bytes += got;
            if (r->header_bytes >= r->max_header) {
                return http_error_set(&r->err, 431, "headers_too_large",
                                      "the request line and headers exceed %zu bytes",
                                      r->max_header);
            }
        }
        if (got != n) {
            /* http-parser stops early only on an error, checked above; never spin. */
            return http_error_set(&r->err, 400, "malformed_request", "bad HTTP request");
        }
        off += got;
    }
    return 0;
}

int
http_request_eof(struct http_request *r)
{
    if (r->complete || r->err.status != 0) {
        return http_request_status(r);
    }
    return http_error_set(&r->err, 400, "incomplete_request",
                          "the client stopped sending before the request was complete");
}
