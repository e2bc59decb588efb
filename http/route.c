/* SPDX-License-Identifier: MIT */
/*
 * http/route.c - decides what a complete request asks for (the index, a recording, or an error
 * with its exact status) and builds the bytes of responses. The JSON of POST /sample is read
 * with cJSON and checked field by field, so a client learns which field was wrong and why.
 * No I/O, no clock: fuzzed with request.c. Context: any thread; no shared state.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>
#include <http_parser.h>

#include "http/internal.h"

const char http_index_text[] =
        "pipeprof sampling server\n"
        "\n"
        "POST /sample (or POST /) with a JSON body records the process and returns a profile:\n"
        "  {\"numberOfSamples\": 100, \"timeInterval\": \"10 ms\", \"format\": \"perf\"}\n"
        "  numberOfSamples 1..100000; timeInterval 1 ms..10 s (ns, us, ms, s); the product at\n"
        "  most 10 min; format perf (default), collapsed, pprof, speedscope or chromium.\n"
        "  curl -sd '{\"numberOfSamples\":100,\"timeInterval\":\"10 ms\"}' "
        "http://HOST:PORT/sample\n"
        "\n"
        "GET /debug/pprof/profile?seconds=30&rate=100 returns a gzipped pprof profile, as Go's\n"
        "  net/http/pprof does (seconds 1..600, default 30; rate 1..1000 Hz, default 100):\n"
        "  go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=10\n"
        "\n"
        "Errors are JSON: {\"error\": \"code\", \"detail\": \"sentence\"}.\n";

/* ------------------------------------------------------------------------------------------ */
/* Intervals                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static int
http_is_space(char c)
{
    return c == ' ' || c == '\t';
}

int
http_interval_parse(const char *text, uint64_t *ns)
{
    static const struct {
        const char *name;
        uint64_t ns;
    } units[] = {
        { "ns", 1ull },
        { "us", 1000ull },
        { "ms", 1000000ull },
        { "s", 1000000000ull },
        { "min", 60000000000ull },
        { "h", 3600000000000ull },
        { "hr", 3600000000000ull },
    };
    const char *p = text;
    const char *unit;
    uint64_t whole = 0, frac = 0, frac_scale = 1, mult = 1000000ull; /* no unit: ms */
    size_t unit_len, i;
    int digits = 0;

    while (http_is_space(*p)) {
        p++;
    }
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (whole > 1000000000000ull) {
            return -ERANGE; /* any unit makes this far beyond every limit */
        }
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        p++;
        for (; *p >= '0' && *p <= '9'; p++, digits++) {
            if (frac_scale < 1000000000ull) { /* finer than a nanosecond second is noise */
                frac = frac * 10 + (uint64_t)(*p - '0');
                frac_scale *= 10;
            }
        }
    }
    if (digits == 0) {
        return -EINVAL;
    }
    while (http_is_space(*p)) {
        p++;
    }
    unit = p;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) {
        p++;
    }
    unit_len = (size_t)(p - unit);
    while (http_is_space(*p)) {
        p++;
    }
    if (*p != '\0') {
        return -EINVAL;
    }
    if (unit_len != 0) {
        for (i = 0; i < PP_ARRAY_SIZE(units); i++) {
            if (strlen(units[i].name) == unit_len &&
                strncasecmp(unit, units[i].name, unit_len) == 0) {
                break;
            }
        }
        if (i == PP_ARRAY_SIZE(units)) {
            return -EINVAL;
        }
        mult = units[i].ns;
    }
    if (whole > UINT64_MAX / mult / 2) {
        return -ERANGE;
    }
    /* The fraction is below one unit (< 3.6e12 ns), so a double rounds it exactly enough. */
    *ns = whole * mult + (uint64_t)((double)frac / (double)frac_scale * (double)mult + 0.5);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Routing                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* Copies untrusted text for a detail message: printable ASCII only, shortened. */
static const char *
http_quote(const char *s, size_t len, char *buf, size_t cap)
{
    size_t i, n = 0;

    for (i = 0; i < len && n + 4 < cap; i++) {
        unsigned char c = (unsigned char)s[i];

        buf[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (i < len) {
        buf[n++] = '.';
        buf[n++] = '.';
        buf[n++] = '.';
    }
    buf[n] = '\0';
    return buf;
}

/* Maps a format name of swift-profile-recorder or of pp_profile_format_parse(). */
static int
http_format_parse(const char *name, enum pp_profile_format *out)
{
    if (strcmp(name, "perfSymbolized") == 0) {
        *out = PP_PROFILE_PERF;
        return 0;
    }
    if (strcmp(name, "pprofSymbolized") == 0) {
        *out = PP_PROFILE_PPROF;
        return 0;
    }
    if (strcmp(name, "flamegraphCollapsedSymbolized") == 0) {
        *out = PP_PROFILE_FOLDED;
        return 0;
    }
    return pp_profile_format_parse(name, out);
}

static void
http_route_fail(struct http_route *out, int status, const char *error, const char *detail)
{
    out->action = HTTP_ACTION_ERROR;
    http_error_set(&out->err, status, error, "%s", detail);
}

/* Checks numberOfSamples x interval against HTTP_MAX_DURATION_NS. */
static int
http_duration_ok(unsigned samples, uint64_t interval_ns)
{
    return interval_ns <= HTTP_MAX_DURATION_NS / samples;
}

static void
http_route_sample_json(const char *body, size_t len, struct http_route *out)
{
    struct http_sample_request *s = &out->sample;
    const cJSON *samples = NULL, *interval = NULL, *format = NULL, *symbolizer = NULL;
    const cJSON *item;
    const char *end = NULL;
    cJSON *root = NULL;
    char q[64];
    uint64_t ns;
    int e;

    memset(s, 0, sizeof(*s));
    s->format = PP_PROFILE_PERF;
    if (len == 0) {
        http_route_fail(out, 400, "malformed_json",
                        "the body is empty; send a JSON object such as "
                        "{\"numberOfSamples\": 100, \"timeInterval\": \"10 ms\"}");
        return;
    }
    root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (root == NULL) {
        size_t at = end != NULL && end >= body && end <= body + len ? (size_t)(end - body) : 0;

        out->action = HTTP_ACTION_ERROR;
        http_error_set(&out->err, 400, "malformed_json", "the body is not valid JSON (at byte %zu)",
                       at);
        return;
    }
    while (end < body + len && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')) {
        end++;
    }
    if (end != body + len) {
        out->action = HTTP_ACTION_ERROR;
        http_error_set(&out->err, 400, "malformed_json",
                       "unexpected bytes after the JSON value (at byte %zu)", (size_t)(end - body));
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        http_route_fail(out, 400, "malformed_json", "the body must be a JSON object");
        goto out;
    }
    cJSON_ArrayForEach(item, root)
    {
        const cJSON **slot;
        const char *key = item->string != NULL ? item->string : "";

        if (strcmp(key, "numberOfSamples") == 0) {
            slot = &samples;
        } else if (strcmp(key, "timeInterval") == 0) {
            slot = &interval;
        } else if (strcmp(key, "format") == 0) {
            slot = &format;
        } else if (strcmp(key, "symbolizer") == 0) {
            slot = &symbolizer;
        } else {
            out->action = HTTP_ACTION_ERROR;
            http_error_set(&out->err, 400, "unknown_field",
                           "unknown field \"%s\"; the fields are numberOfSamples, timeInterval, "
                           "format and symbolizer",
                           http_quote(key, strlen(key), q, sizeof(q)));
            goto out;
        }
        if (*slot != NULL) {
            out->action = HTTP_ACTION_ERROR;
            http_error_set(&out->err, 400, "duplicate_field", "the field \"%s\" appears twice",
                           http_quote(key, strlen(key), q, sizeof(q)));
            goto out;
        }
        *slot = item;
    }

    if (samples == NULL) {
        http_route_fail(out, 400, "missing_field",
                        "numberOfSamples is required (an integer, 1..100000)");
        goto out;
    }
    if (!cJSON_IsNumber(samples)) {
        http_route_fail(out, 400, "wrong_type", "numberOfSamples must be an integer");
        goto out;
    }
    /* the range first: converting a huge double to an integer type is undefined */
    if (!(samples->valuedouble >= HTTP_MIN_SAMPLES && samples->valuedouble <= HTTP_MAX_SAMPLES)) {
        out->action = HTTP_ACTION_ERROR;
        http_error_set(&out->err, 400, "out_of_range", "numberOfSamples is %g; it must be 1..%u",
                       samples->valuedouble, HTTP_MAX_SAMPLES);
        goto out;
    }
    if (samples->valuedouble != (double)(unsigned)samples->valuedouble) {
        http_route_fail(out, 400, "wrong_type", "numberOfSamples must be an integer");
        goto out;
    }
    s->samples = (unsigned)samples->valuedouble;

    if (interval == NULL) {
        http_route_fail(out, 400, "missing_field",
                        "timeInterval is required (a string such as \"10 ms\")");
        goto out;
    }
    if (!cJSON_IsString(interval)) {
        http_route_fail(out, 400, "wrong_type",
                        "timeInterval must be a string such as \"10 ms\" or \"1s\"");
        goto out;
    }
    e = http_interval_parse(interval->valuestring, &ns);
    if (e == -EINVAL) {
        const char *v = interval->valuestring;

        out->action = HTTP_ACTION_ERROR;
        http_error_set(&out->err, 400, "bad_interval",
                       "timeInterval \"%s\" is not a number and a unit (ns, us, ms, s)",
                       http_quote(v, strlen(v), q, sizeof(q)));
        goto out;
    }
    if (e != 0 || ns < HTTP_MIN_INTERVAL_NS || ns > HTTP_MAX_INTERVAL_NS) {
        const char *v = interval->valuestring;

        out->action = HTTP_ACTION_ERROR;
        http_error_set(&out->err, 400, "out_of_range", "timeInterval \"%s\" must be 1 ms..10 s",
                       http_quote(v, strlen(v), q, sizeof(q)));
        goto out;
    }
    s->interval_ns = ns;
    if (!http_duration_ok(s->samples, ns)) {
        out->action = HTTP_ACTION_ERROR;
        http_error_set(&out->err, 400, "out_of_range",
                       "numberOfSamples x timeInterval is %.1f s; the limit is %llu s",
                       (double)s->samples * (double)ns / 1e9,
                       (unsigned long long)(HTTP_MAX_DURATION_NS / 1000000000ull));
        goto out;
    }

    if (format != NULL) {
        if (!cJSON_IsString(format)) {
            http_route_fail(out, 400, "wrong_type", "format must be a string such as \"perf\"");
            goto out;
        }
        if (http_format_parse(format->valuestring, &s->format) != 0) {
            const char *v = format->valuestring;

            out->action = HTTP_ACTION_ERROR;
            http_error_set(&out->err, 400, "unsupported_format",
                           "format \"%s\" is not one of perf, collapsed, pprof, speedscope, "
                           "chromium (or perfSymbolized, pprofSymbolized, "
                           "flamegraphCollapsedSymbolized)",
                           http_quote(v, strlen(v), q, sizeof(q)));
            goto out;
        }
    }
    if (symbolizer != NULL) {
        if (!cJSON_IsString(symbolizer)) {
            http_route_fail(out, 400, "wrong_type", "symbolizer must be a string");
            goto out;
        }
        if (strcmp(symbolizer->valuestring, "native") != 0) {
            http_route_fail(out, 400, "unsupported_symbolizer",
                            "only the \"native\" symbolizer is available");
            goto out;
        }
    }
    out->action = HTTP_ACTION_SAMPLE;
out:
    cJSON_Delete(root);
}

/* Parses a query value as a decimal integer 1..max; an empty value keeps *v. */
static int
http_query_uint(const char *v, size_t len, unsigned max, unsigned *out)
{
    unsigned long long n = 0;
    size_t i;

    if (len == 0) {
        return 0; /* "?seconds=" means the default, as in Go */
    }
    for (i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9') {
            return -EINVAL;
        }
        n = n * 10 + (unsigned)(v[i] - '0');
        if (n > max) {
            return -ERANGE;
        }
    }
    if (n == 0) {
        return -ERANGE;
    }
    *out = (unsigned)n;
    return 0;
}

static void
http_route_pprof(const char *query, size_t len, struct http_route *out)
{
    struct http_sample_request *s = &out->sample;
    unsigned max_seconds = (unsigned)(HTTP_MAX_DURATION_NS / 1000000000ull);
    int seen_seconds = 0, seen_rate = 0;
    size_t pos = 0;
    char q[64];

    memset(s, 0, sizeof(*s));
    s->pprof_endpoint = 1;
    s->format = PP_PROFILE_PPROF;
    s->seconds = HTTP_PPROF_SECONDS;
    s->hz = HTTP_PPROF_HZ;
    while (pos < len) {
        const char *pair = query + pos;
        const char *amp = memchr(pair, '&', len - pos);
        size_t plen = amp != NULL ? (size_t)(amp - pair) : len - pos;
        const char *eq = memchr(pair, '=', plen);
        size_t klen = eq != NULL ? (size_t)(eq - pair) : plen;
        const char *val = eq != NULL ? eq + 1 : pair + plen;
        size_t vlen = plen - klen - (eq != NULL ? 1 : 0);
        int e = 0;

        pos += plen + 1;
        /* Go reads the first value of a parameter; other parameters are ignored, as in Go. */
        if (klen == 7 && memcmp(pair, "seconds", 7) == 0 && !seen_seconds) {
            seen_seconds = 1;
            e = http_query_uint(val, vlen, max_seconds, &s->seconds);
            if (e != 0) {
                out->action = HTTP_ACTION_ERROR;
                http_error_set(&out->err, 400, e == -EINVAL ? "wrong_type" : "out_of_range",
                               "seconds=%s: it must be an integer, 1..%u",
                               http_quote(val, vlen, q, sizeof(q)), max_seconds);
                return;
            }
        } else if (klen == 4 && memcmp(pair, "rate", 4) == 0 && !seen_rate) {
            seen_rate = 1;
            e = http_query_uint(val, vlen, HTTP_PPROF_MAX_HZ, &s->hz);
            if (e != 0) {
                out->action = HTTP_ACTION_ERROR;
                http_error_set(&out->err, 400, e == -EINVAL ? "wrong_type" : "out_of_range",
                               "rate=%s: it must be an integer, 1..%u Hz",
                               http_quote(val, vlen, q, sizeof(q)), HTTP_PPROF_MAX_HZ);
                return;
            }
        }
    }
    s->interval_ns = 1000000000ull / s->hz;
    s->samples = s->seconds * s->hz;
    out->action = HTTP_ACTION_SAMPLE;
}

static int
http_path_is(const char *path, size_t len, const char *want)
{
    size_t n = strlen(want);

    /* one trailing slash is tolerated: "/sample/" is "/sample" */
    if (len == n + 1 && path[n] == '/') {
        len = n;
    }
    return len == n && memcmp(path, want, n) == 0;
}

void
http_route_request(const struct http_request *r, struct http_route *out)
{
    struct http_parser_url u;
    const char *path = "/", *query = "";
    size_t plen = 1, qlen = 0;
    int get = r->method == HTTP_GET, post = r->method == HTTP_POST;
    char q[64];

    memset(out, 0, sizeof(*out));
    http_parser_url_init(&u);
    if (r->url == NULL || http_parser_parse_url(r->url, r->url_len, 0, &u) != 0) {
        out->action = HTTP_ACTION_ERROR;
        http_error_set(&out->err, 400, "malformed_request", "bad request target \"%s\"",
                       http_quote(r->url != NULL ? r->url : "", r->url_len, q, sizeof(q)));
        return;
    }
    if (u.field_set & (1u << UF_PATH)) {
        path = r->url + u.field_data[UF_PATH].off;
        plen = u.field_data[UF_PATH].len;
    }
    if (u.field_set & (1u << UF_QUERY)) {
        query = r->url + u.field_data[UF_QUERY].off;
        qlen = u.field_data[UF_QUERY].len;
    }

    if (plen == 1 && path[0] == '/') {
        if (get) {
            out->action = HTTP_ACTION_INDEX;
        } else if (post) {
            http_route_sample_json(r->body != NULL ? r->body : "", r->body_len, out);
        } else {
            out->allow = "GET, POST";
        }
    } else if (http_path_is(path, plen, "/sample") || http_path_is(path, plen, "/samples")) {
        if (post) {
            http_route_sample_json(r->body != NULL ? r->body : "", r->body_len, out);
        } else {
            out->allow = "POST";
        }
    } else if (http_path_is(path, plen, "/debug/pprof/profile")) {
        if (get) {
            http_route_pprof(query, qlen, out);
        } else {
            out->allow = "GET";
        }
    } else {
        out->action = HTTP_ACTION_ERROR;
        http_error_set(&out->err, 404, "not_found", "no endpoint at \"%s\"; see GET / for the list",
                       http_quote(path, plen, q, sizeof(q)));
        return;
    }
    if (out->allow != NULL) {
        out->action = HTTP_ACTION_ERROR;
        http_error_set(&out->err, 405, "method_not_allowed", "%s is not allowed here; use %s",
                       http_method_str((enum http_method)r->method), out->allow);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Responses                                                                                  */
int
http_request_authorized(const struct http_request *r, const char *token, size_t token_len,
                        struct http_error *err)
{
    const char *v = r->auth;
    size_t n = r->auth_len <= sizeof(r->auth) ? r->auth_len : 0, i;
    volatile unsigned char diff = 0;

    while (n > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t')) {
        n--;
    }
    if (n > 7 && strncasecmp(v, "bearer ", 7) == 0) {
        v += 7;
        n -= 7;
        while (n > 0 && *v == ' ') {
            v++;
            n--;
        }
        /* every byte of the token is compared, whatever the first difference */
        diff = (unsigned char)(n != token_len);
        for (i = 0; i < token_len; i++) {
            diff |= (unsigned char)(token[i] ^ (i < n ? v[i] : ~token[i]));
        }
        if (diff == 0) {
            return 1;
        }
    }
    http_error_set(err, 401, "unauthorized",
                   "this endpoint needs the header \"Authorization: Bearer TOKEN\" with the "
                   "token it was started with");
    return 0;
}

/* ------------------------------------------------------------------------------------------ */

const char *
http_status_text(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 417:
        return "Expectation Failed";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

int
http_response_build(struct http_response *out, int status, const char *content_type,
                    const char *extra, char *body, size_t body_len)
{
    int n;

    memset(out, 0, sizeof(*out));
    /* X-Content-Type-Options: a browser must not render a profile or an error as HTML. */
    n = asprintf(&out->head,
                 "HTTP/1.1 %d %s\r\n"
                 "Content-Type: %s\r\n"
                 "Content-Length: %zu\r\n"
                 "Connection: close\r\n"
                 "Cache-Control: no-store\r\n"
                 "X-Content-Type-Options: nosniff\r\n"
                 "%s"
                 "\r\n",
                 status, http_status_text(status), content_type, body_len,
                 extra != NULL ? extra : "");
    if (n < 0) {
        out->head = NULL;
        free(body);
        return -ENOMEM;
    }
    out->head_len = (size_t)n;
    out->body = body;
    out->body_len = body_len;
    return 0;
}

int
http_response_error(struct http_response *out, const struct http_error *e, const char *allow,
                    unsigned retry_after_s)
{
    cJSON *obj = NULL;
    char *json = NULL, *body = NULL;
    char extra[128] = "";
    size_t len = 0;
    int err = -ENOMEM;

    memset(out, 0, sizeof(*out));
    obj = cJSON_CreateObject();
    if (obj == NULL || cJSON_AddStringToObject(obj, "error", e->error) == NULL ||
        cJSON_AddStringToObject(obj, "detail", e->detail) == NULL) {
        goto out;
    }
    json = cJSON_PrintUnformatted(obj);
    if (json == NULL) {
        goto out;
    }
    /* a copy with a newline, so that `curl` output ends its line; freed with free() */
    len = strlen(json) + 1;
    body = malloc(len + 1);
    if (body == NULL) {
        goto out;
    }
    memcpy(body, json, len - 1);
    body[len - 1] = '\n';
    body[len] = '\0';
    if (allow != NULL) {
        snprintf(extra, sizeof(extra), "Allow: %s\r\n", allow);
    } else if (retry_after_s != 0) {
        snprintf(extra, sizeof(extra), "Retry-After: %u\r\n", retry_after_s);
    } else if (e->status == 401) {
        snprintf(extra, sizeof(extra), "WWW-Authenticate: Bearer realm=\"pipeprof\"\r\n");
    }
    err = http_response_build(out, e->status, "application/json", extra, body, len);
    body = NULL;
out:
    free(body);
    cJSON_free(json);
    cJSON_Delete(obj);
    return err;
}

void
http_response_fini(struct http_response *r)
{
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof(*r));
}
