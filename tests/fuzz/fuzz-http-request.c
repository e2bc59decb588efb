/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz-http-request.c - libFuzzer target for http/request.c, http/route.c and
 * http/url.c. The first byte chooses the limits and how the rest is cut into pieces (a client's
 * bytes arrive in arbitrary reads); the rest is what a client sends. Whatever parses is routed
 * and answered, and the answer must be well formed. The same bytes also go through the listen
 * URL and interval parsers. Corpus: tests/fuzz/corpus/fuzz-http-request/ (replayed by ctest).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "http/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
fuzz_check_error_response(const struct http_error *e, const char *allow)
{
    struct http_response resp;
    cJSON *j;

    if (e->status < 400 || e->status > 599 || e->error == NULL) {
        abort();
    }
    if (http_response_error(&resp, e, allow, 0) != 0) {
        return; /* out of memory */
    }
    j = cJSON_ParseWithLength(resp.body, resp.body_len);
    if (j == NULL || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "error"))) {
        abort(); /* an error answer that is not the documented JSON */
    }
    cJSON_Delete(j);
    http_response_fini(&resp);
}

static void
fuzz_request(uint8_t mode, const char *in, size_t len)
{
    size_t max_header = (mode & 1) ? 64 : 0, max_body = (mode & 2) ? 16 : 0;
    size_t step = (mode >> 2) == 0 ? len : (size_t)(mode >> 2);
    struct http_request r;
    struct http_route route;
    size_t off = 0;
    int e = 0;

    http_request_init(&r, max_header, max_body);
    while (off < len && e == 0) {
        size_t n = len - off < step ? len - off : step;

        e = http_request_feed(&r, in + off, n);
        off += n;
    }
    if (e == 0 && (mode & 0x80)) {
        e = http_request_eof(&r);
    }
    if (r.headers_done == 0 && r.header_bytes > r.max_header) {
        abort();
    }
    if (r.body_len > r.max_body) {
        abort();
    }
    if (e < 0 && e != -ENOMEM) {
        fuzz_check_error_response(&r.err, NULL);
    }
    if (e == 1) {
        struct http_error auth = { 0 };

        /* whatever Authorization says: a verdict, and a 401 answer when refused */
        if (!http_request_authorized(&r, "s3cret", 6, &auth)) {
            if (auth.status != 401) {
                abort();
            }
            fuzz_check_error_response(&auth, NULL);
        }
        http_route_request(&r, &route);
        if (route.action == HTTP_ACTION_ERROR) {
            fuzz_check_error_response(&route.err, route.allow);
        } else if (route.action == HTTP_ACTION_SAMPLE) {
            const struct http_sample_request *s = &route.sample;

            if (s->samples == 0 || s->interval_ns < HTTP_MIN_INTERVAL_NS ||
                s->interval_ns > HTTP_MAX_INTERVAL_NS ||
                (uint64_t)s->samples * s->interval_ns > HTTP_MAX_DURATION_NS + 1000000000ull) {
                abort(); /* a recording outside the documented limits */
            }
        }
    }
    http_request_fini(&r);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct http_url url;
    char *text;
    uint64_t ns;

    if (size == 0) {
        return 0;
    }
    fuzz_request(data[0], (const char *)data + 1, size - 1);

    text = malloc(size);
    if (text != NULL) {
        memcpy(text, data + 1, size - 1);
        text[size - 1] = '\0';
        if (http_url_parse(text, data[0] & 1, &url, NULL, 0) == 0) {
            if (!url.loopback && !(data[0] & 1)) {
                abort(); /* a remote address without the opt-in */
            }
        }
        if (http_interval_parse(text, &ns) == 0 && strlen(text) == 0) {
            abort();
        }
        free(text);
    }
    return 0;
}
