/* SPDX-License-Identifier: MIT */
/*
 * tests/test-http-request.c - the I/O-free parts of pp_http: the request reader
 * (http/request.c), the router and the response builders (http/route.c) and the listen URL
 * parser (http/url.c). Every error path is checked for its exact status, error code, and for
 * the JSON body a client receives.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "http/internal.h"
#include "tests/test.h"

/* Feeds raw (copied before a guard page) in one piece; returns the feed result. */
static int
feed_all(struct http_request *r, const char *raw, size_t len)
{
    const char *g = (const char *)test_guarded_copy(raw, len);

    return http_request_feed(r, g, len);
}

/* Feeds raw one byte at a time, each byte before a guard page; returns the last result. */
static int
feed_bytes(struct http_request *r, const char *raw, size_t len)
{
    size_t i;
    int e = 0;

    for (i = 0; i < len; i++) {
        e = http_request_feed(r, (const char *)test_guarded_copy(raw + i, 1), 1);
        if (e != 0) {
            break;
        }
    }
    return e;
}

/* Parses a whole request and routes it. */
static void
route_raw(const char *raw, struct http_route *rt)
{
    struct http_request r;

    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_all(&r, raw, strlen(raw)), 1);
    http_route_request(&r, rt);
    http_request_fini(&r);
}

/* POSTs body to path and routes the request. */
static void
route_post(const char *path, const char *body, struct http_route *rt)
{
    char raw[4096];

    snprintf(raw, sizeof(raw),
             "POST %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n"
             "Content-Length: %zu\r\nContent-Type: application/x-www-form-urlencoded\r\n\r\n%s",
             path, strlen(body), body);
    route_raw(raw, rt);
}

/* Asserts an error route: status, code, and that the detail mentions want_detail. */
static void
assert_route_error(const struct http_route *rt, int status, const char *code,
                   const char *want_detail)
{
    ASSERT_EQ(rt->action, HTTP_ACTION_ERROR);
    ASSERT_EQ(rt->err.status, status);
    ASSERT_STR_EQ(rt->err.error, code);
    if (want_detail != NULL && strstr(rt->err.detail, want_detail) == NULL) {
        test_fail(__FILE__, __LINE__, "detail \"%s\" lacks \"%s\"", rt->err.detail, want_detail);
    }
}

static void
assert_post_error(const char *body, int status, const char *code, const char *want_detail)
{
    struct http_route rt;

    route_post("/sample", body, &rt);
    assert_route_error(&rt, status, code, want_detail);
}

static void
assert_post_sample(const char *path, const char *body, unsigned samples, uint64_t interval_ns,
                   enum pp_profile_format format)
{
    struct http_route rt;

    route_post(path, body, &rt);
    if (rt.action != HTTP_ACTION_SAMPLE) {
        test_fail(__FILE__, __LINE__, "%s: %d %s: %s", body, rt.err.status,
                  rt.err.error ? rt.err.error : "", rt.err.detail);
    }
    ASSERT_EQ(rt.sample.samples, samples);
    ASSERT_U64_EQ(rt.sample.interval_ns, interval_ns);
    ASSERT_EQ(rt.sample.format, format);
    ASSERT_EQ(rt.sample.pprof_endpoint, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* Request reader                                                                             */
/* ------------------------------------------------------------------------------------------ */

TEST(request_get_in_one_piece)
{
    static const char raw[] = "GET /debug/pprof/profile?seconds=5 HTTP/1.1\r\nHost: x\r\n\r\n";
    struct http_request r;

    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_all(&r, raw, sizeof(raw) - 1), 1);
    ASSERT_EQ(r.method, HTTP_GET);
    ASSERT_STR_EQ(r.url, "/debug/pprof/profile?seconds=5");
    ASSERT_EQ(r.body_len, 0);
    ASSERT_EQ(r.expect_continue, 0);
    /* later bytes are ignored: one request per connection */
    ASSERT_EQ(http_request_feed(&r, "GET /x HTTP/1.1\r\n\r\n", 19), 1);
    ASSERT_STR_EQ(r.url, "/debug/pprof/profile?seconds=5");
    http_request_fini(&r);
    http_request_fini(&r); /* idempotent */
}

TEST(request_post_byte_by_byte)
{
    static const char raw[] = "POST /sample HTTP/1.1\r\nhOsT: x\r\nContent-Length: 11\r\n\r\n"
                              "{\"a\": true}";
    struct http_request r;

    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_bytes(&r, raw, sizeof(raw) - 1), 1);
    ASSERT_EQ(r.method, HTTP_POST);
    ASSERT_STR_EQ(r.url, "/sample");
    ASSERT_EQ(r.body_len, 11);
    ASSERT_STR_EQ(r.body, "{\"a\": true}");
    http_request_fini(&r);
}

TEST(request_pipelined_bytes_ignored)
{
    static const char raw[] = "POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"
                              "GET /other HTTP/1.1\r\n\r\n";
    struct http_request r;

    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_all(&r, raw, sizeof(raw) - 1), 1);
    ASSERT_STR_EQ(r.url, "/");
    ASSERT_STR_EQ(r.body, "{}");
    http_request_fini(&r);
}

TEST(request_chunked_body)
{
    static const char raw[] = "POST /sample HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "5\r\n{\"num\r\n3\r\nber\r\n0\r\nX-Trailer: 1\r\n\r\n";
    struct http_request r;

    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_bytes(&r, raw, sizeof(raw) - 1), 1);
    ASSERT_STR_EQ(r.body, "{\"number");
    http_request_fini(&r);
}

TEST(request_content_length_too_large_413_before_body)
{
    static const char raw[] = "POST /sample HTTP/1.1\r\nContent-Length: 65537\r\n\r\n";
    struct http_request r;

    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_all(&r, raw, sizeof(raw) - 1), -EBADMSG);
    ASSERT_EQ(r.err.status, 413);
    ASSERT_STR_EQ(r.err.error, "body_too_large");
    ASSERT_STR_EQ(r.err.detail, "the body has 65537 bytes; the limit is 65536");
    /* a failed request stays failed */
    ASSERT_EQ(http_request_feed(&r, "x", 1), -EBADMSG);
    ASSERT_EQ(http_request_eof(&r), -EBADMSG);
    ASSERT_EQ(r.err.status, 413);
    http_request_fini(&r);
}

TEST(request_chunked_body_too_large_413)
{
    static const char head[] = "POST /sample HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    char chunk[64];
    struct http_request r;
    int i, e = 0;

    http_request_init(&r, 0, 100);
    ASSERT_EQ(feed_all(&r, head, sizeof(head) - 1), 0);
    snprintf(chunk, sizeof(chunk), "20\r\n%032d\r\n", 0);
    for (i = 0; i < 4 && e == 0; i++) {
        e = feed_all(&r, chunk, strlen(chunk));
    }
    ASSERT_EQ(e, -EBADMSG);
    ASSERT_EQ(i, 4); /* 3 x 32 = 96 bytes fit, the 4th chunk does not */
    ASSERT_EQ(r.err.status, 413);
    ASSERT_STR_EQ(r.err.error, "body_too_large");
    http_request_fini(&r);
}

TEST(request_body_exactly_at_limit)
{
    char raw[256];
    struct http_request r;

    snprintf(raw, sizeof(raw), "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789");
    http_request_init(&r, 0, 10);
    ASSERT_EQ(feed_all(&r, raw, strlen(raw)), 1);
    ASSERT_EQ(r.body_len, 10);
    http_request_fini(&r);
}

TEST(request_headers_too_large_431)
{
    char raw[20000];
    size_t n = 0;
    struct http_request r;

    n += (size_t)snprintf(raw + n, sizeof(raw) - n, "GET / HTTP/1.1\r\n");
    while (n < 9000) {
        n += (size_t)snprintf(raw + n, sizeof(raw) - n, "X-Filler: %0100d\r\n", 0);
    }
    n += (size_t)snprintf(raw + n, sizeof(raw) - n, "\r\n");
    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_all(&r, raw, n), -EBADMSG);
    ASSERT_EQ(r.err.status, 431);
    ASSERT_STR_EQ(r.err.error, "headers_too_large");
    ASSERT_STR_EQ(r.err.detail, "the request line and headers exceed 8192 bytes");
    http_request_fini(&r);

    /* the same, arriving byte by byte: the limit holds however the bytes are split */
    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_bytes(&r, raw, n), -EBADMSG);
    ASSERT_EQ(r.err.status, 431);
    ASSERT_EQ(r.header_bytes, 8192);
    http_request_fini(&r);
}

TEST(request_long_url_431)
{
    char raw[10000];
    struct http_request r;

    memcpy(raw, "GET /", 5);
    memset(raw + 5, 'a', 9000);
    memcpy(raw + 9005, " HTTP/1.1\r\n\r\n", 13);
    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_all(&r, raw, 9018), -EBADMSG);
    ASSERT_EQ(r.err.status, 431);
    http_request_fini(&r);
}

TEST(request_head_just_under_limit)
{
    static const char raw[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    struct http_request r;

    /* 27 bytes of head: a limit of 27 admits it, 26 does not */
    http_request_init(&r, 27, 0);
    ASSERT_EQ(feed_bytes(&r, raw, sizeof(raw) - 1), 1);
    http_request_fini(&r);
    http_request_init(&r, 27, 0);
    ASSERT_EQ(feed_all(&r, raw, sizeof(raw) - 1), 1);
    http_request_fini(&r);
    http_request_init(&r, 26, 0);
    ASSERT_EQ(feed_bytes(&r, raw, sizeof(raw) - 1), -EBADMSG);
    ASSERT_EQ(r.err.status, 431);
    http_request_fini(&r);
}

TEST(request_malformed_400)
{
    static const char *const bad[] = {
        "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "G@T / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1 extra\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Header\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", /* a TLS ClientHello */
    };
    size_t i;

    for (i = 0; i < PP_ARRAY_SIZE(bad); i++) {
        struct http_request r;

        http_request_init(&r, 0, 0);
        if (feed_all(&r, bad[i], strlen(bad[i])) != -EBADMSG) {
            test_fail(__FILE__, __LINE__, "case %zu accepted", i);
        }
        ASSERT_EQ(r.err.status, 400);
        ASSERT_STR_EQ(r.err.error, "malformed_request");
        ASSERT_TRUE(strncmp(r.err.detail, "bad HTTP request: ", 18) == 0);
        http_request_fini(&r);
    }
}

TEST(request_http2_505)
{
    static const char raw[] = "GET / HTTP/2.0\r\n\r\n";
    struct http_request r;

    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_all(&r, raw, sizeof(raw) - 1), -EBADMSG);
    ASSERT_EQ(r.err.status, 505);
    ASSERT_STR_EQ(r.err.error, "version_not_supported");
    ASSERT_STR_EQ(r.err.detail, "HTTP/2.0 is not supported; use HTTP/1.1");
    http_request_fini(&r);
}

/* HTTP/2's connection preface (prior knowledge, h2c) gets the 505 of any other version, in
 * one piece or byte by byte; a method merely starting with P is still a 400. */
TEST(request_http2_preface_505)
{
    static const char raw[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    struct http_request r;

    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_all(&r, raw, sizeof(raw) - 1), -EBADMSG);
    ASSERT_EQ(r.err.status, 505);
    ASSERT_STR_EQ(r.err.error, "version_not_supported");
    http_request_fini(&r);
    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_bytes(&r, raw, sizeof(raw) - 1), -EBADMSG);
    ASSERT_EQ(r.err.status, 505);
    http_request_fini(&r);
    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_all(&r, "PRX / HTTP/1.1\r\n\r\n", 18), -EBADMSG);
    ASSERT_EQ(r.err.status, 400);
    http_request_fini(&r);
}

TEST(request_http10_accepted)
{
    static const char raw[] = "GET / HTTP/1.0\r\n\r\n";
    struct http_request r;

    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_all(&r, raw, sizeof(raw) - 1), 1);
    ASSERT_EQ(r.http_minor, 0);
    http_request_fini(&r);
}

TEST(request_expect_continue)
{
    static const char raw[] = "POST /sample HTTP/1.1\r\nExpect:  100-Continue \r\n"
                              "Content-Length: 2\r\n\r\n";
    struct http_request r;

    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_bytes(&r, raw, sizeof(raw) - 1), 0);
    ASSERT_EQ(r.headers_done, 1);
    ASSERT_EQ(r.expect_continue, 1);
    ASSERT_EQ(http_request_feed(&r, "{}", 2), 1);
    http_request_fini(&r);
}

TEST(request_expect_other_417)
{
    static const char *const bad[] = {
        "POST / HTTP/1.1\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 2\r\nexpect: 100-continue-and-a-very-long-tail\r\n\r\n",
    };
    size_t i;

    for (i = 0; i < PP_ARRAY_SIZE(bad); i++) {
        struct http_request r;

        http_request_init(&r, 0, 0);
        ASSERT_EQ(feed_all(&r, bad[i], strlen(bad[i])), -EBADMSG);
        ASSERT_EQ(r.err.status, 417);
        ASSERT_STR_EQ(r.err.error, "expectation_failed");
        http_request_fini(&r);
    }
}

TEST(request_long_header_names_not_confused)
{
    /* "Expect" as a prefix of a longer name is not Expect */
    static const char raw[] = "POST / HTTP/1.1\r\nExpect-CT: whatever\r\n"
                              "X-A-Very-Long-Header-Name-Indeed: 1\r\nContent-Length: 0\r\n\r\n";
    struct http_request r;

    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_all(&r, raw, sizeof(raw) - 1), 1);
    ASSERT_EQ(r.expect_continue, 0);
    http_request_fini(&r);
}

TEST(request_eof_before_complete_400)
{
    static const char raw[] = "POST /sample HTTP/1.1\r\nContent-Length: 10\r\n\r\n{\"a\"";
    struct http_request r;

    http_request_init(&r, 0, 0);
    ASSERT_EQ(feed_all(&r, raw, sizeof(raw) - 1), 0);
    ASSERT_EQ(http_request_eof(&r), -EBADMSG);
    ASSERT_EQ(r.err.status, 400);
    ASSERT_STR_EQ(r.err.error, "incomplete_request");
    http_request_fini(&r);
}

/* ------------------------------------------------------------------------------------------ */
/* Intervals                                                                                  */
/* ------------------------------------------------------------------------------------------ */

TEST(interval_units)
{
    static const struct {
        const char *text;
        uint64_t ns;
    } ok[] = {
        { "10 ms", 10000000ull },     { "10ms", 10000000ull },
        { "100 ms", 100000000ull },   { "1.5 s", 1500000000ull },
        { "1.5s", 1500000000ull },    { "250us", 250000ull },
        { "1000000 ns", 1000000ull }, { " 10 MS ", 10000000ull },
        { "10", 10000000ull },        { "0.5ms", 500000ull },
        { "1min", 60000000000ull },   { "2 h", 7200000000000ull },
        { "1hr", 3600000000000ull },  { ".5 s", 500000000ull },
        { "7.", 7000000ull },         { "0", 0ull },
    };
    static const char *const bad[] = { "",           " ",       "ms",     "ten ms",
                                       "10 parsecs", "10 ms x", "-10 ms", "1e3 ms",
                                       "10 m s",     "1,5 s",   ".",      "10\nms" };
    uint64_t ns;
    size_t i;

    for (i = 0; i < PP_ARRAY_SIZE(ok); i++) {
        ns = 12345;
        if (http_interval_parse(ok[i].text, &ns) != 0 || ns != ok[i].ns) {
            test_fail(__FILE__, __LINE__, "\"%s\" -> %llu, want %llu", ok[i].text,
                      (unsigned long long)ns, (unsigned long long)ok[i].ns);
        }
    }
    for (i = 0; i < PP_ARRAY_SIZE(bad); i++) {
        if (http_interval_parse(bad[i], &ns) != -EINVAL) {
            test_fail(__FILE__, __LINE__, "\"%s\" accepted", bad[i]);
        }
    }
    ASSERT_EQ(http_interval_parse("99999999999999999999 h", &ns), -ERANGE);
}

/* ------------------------------------------------------------------------------------------ */
/* Routes                                                                                     */
/* ------------------------------------------------------------------------------------------ */

TEST(route_index)
{
    struct http_route rt;

    route_raw("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &rt);
    ASSERT_EQ(rt.action, HTTP_ACTION_INDEX);
    route_raw("GET /?x=1 HTTP/1.1\r\n\r\n", &rt);
    ASSERT_EQ(rt.action, HTTP_ACTION_INDEX);
    route_raw("GET http://localhost:7377/ HTTP/1.1\r\n\r\n", &rt); /* absolute-form */
    ASSERT_EQ(rt.action, HTTP_ACTION_INDEX);
}

/* The request bodies of swift-profile-recorder's README and docs, verbatim. */
TEST(route_swift_profile_recorder_examples)
{
    assert_post_sample("/sample", "{\"numberOfSamples\":10,\"timeInterval\":\"100 ms\"}", 10,
                       100000000ull, PP_PROFILE_PERF);
    assert_post_sample("/", "{\"numberOfSamples\":1000,\"timeInterval\":\"10ms\"}", 1000,
                       10000000ull, PP_PROFILE_PERF);
    assert_post_sample("/", "{\"numberOfSamples\":100,\"timeInterval\":\"10 ms\"}", 100,
                       10000000ull, PP_PROFILE_PERF);
    assert_post_sample("/", "{\"numberOfSamples\":100,\"timeInterval\":\"100 ms\"}", 100,
                       100000000ull, PP_PROFILE_PERF);
    assert_post_sample("/sample", "{\"timeInterval\":\"100 ms\",\"numberOfSamples\":100}", 100,
                       100000000ull, PP_PROFILE_PERF);
    assert_post_sample("/sample",
                       "{\"timeInterval\":\"100 ms\",\"numberOfSamples\":100, \"format\": "
                       "\"pprofSymbolized\"}",
                       100, 100000000ull, PP_PROFILE_PPROF);
}

TEST(route_sample_formats_and_aliases)
{
    assert_post_sample("/samples", "{\"numberOfSamples\":5,\"timeInterval\":\"1s\"}", 5,
                       1000000000ull, PP_PROFILE_PERF);
    assert_post_sample("/sample/", "{\"numberOfSamples\":5,\"timeInterval\":\"1s\"}", 5,
                       1000000000ull, PP_PROFILE_PERF);
    assert_post_sample("/sample",
                       "{\"numberOfSamples\":5,\"timeInterval\":\"1s\",\"format\":\"collapsed\"}",
                       5, 1000000000ull, PP_PROFILE_FOLDED);
    assert_post_sample("/sample",
                       "{\"numberOfSamples\":5,\"timeInterval\":\"1s\",\"format\":"
                       "\"flamegraphCollapsedSymbolized\"}",
                       5, 1000000000ull, PP_PROFILE_FOLDED);
    assert_post_sample(
            "/sample",
            "{\"numberOfSamples\":5,\"timeInterval\":\"1s\",\"format\":\"perfSymbolized\","
            "\"symbolizer\":\"native\"}",
            5, 1000000000ull, PP_PROFILE_PERF);
    assert_post_sample("/sample",
                       "{\"numberOfSamples\":5,\"timeInterval\":\"1s\",\"format\":\"speedscope\"}",
                       5, 1000000000ull, PP_PROFILE_SPEEDSCOPE);
    assert_post_sample("/sample", " {\"numberOfSamples\":1e2,\"timeInterval\":\"1 ms\"}\r\n ", 100,
                       1000000ull, PP_PROFILE_PERF);
    /* the limits themselves are inside: 100000 x 6 ms = 600 s, 60 x 10 s = 600 s */
    assert_post_sample("/sample", "{\"numberOfSamples\":100000,\"timeInterval\":\"6 ms\"}", 100000,
                       6000000ull, PP_PROFILE_PERF);
    assert_post_sample("/sample", "{\"numberOfSamples\":60,\"timeInterval\":\"10 s\"}", 60,
                       10000000000ull, PP_PROFILE_PERF);
}

TEST(route_sample_json_errors)
{
    assert_post_error("", 400, "malformed_json", "the body is empty");
    assert_post_error("{", 400, "malformed_json", "not valid JSON (at byte ");
    assert_post_error("{\"numberOfSamples\":10,}", 400, "malformed_json", "not valid JSON");
    assert_post_error("{} x", 400, "malformed_json", "unexpected bytes after the JSON value");
    assert_post_error("[]", 400, "malformed_json", "must be a JSON object");
    assert_post_error("\"x\"", 400, "malformed_json", "must be a JSON object");
    assert_post_error("numberOfSamples=10", 400, "malformed_json", NULL);
}

TEST(route_sample_field_errors)
{
    assert_post_error("{\"numberOfSamples\":10,\"timeInterval\":\"1ms\",\"sampels\":1}", 400,
                      "unknown_field", "unknown field \"sampels\"");
    assert_post_error("{\"numberOfSamples\":10,\"numberOfSamples\":10,\"timeInterval\":\"1ms\"}",
                      400, "duplicate_field", "\"numberOfSamples\" appears twice");
    assert_post_error("{\"timeInterval\":\"1ms\"}", 400, "missing_field",
                      "numberOfSamples is required");
    assert_post_error("{\"numberOfSamples\":10}", 400, "missing_field", "timeInterval is required");
    assert_post_error("{\"numberOfSamples\":\"10\",\"timeInterval\":\"1ms\"}", 400, "wrong_type",
                      "numberOfSamples must be an integer");
    assert_post_error("{\"numberOfSamples\":10.5,\"timeInterval\":\"1ms\"}", 400, "wrong_type",
                      "numberOfSamples must be an integer");
    assert_post_error("{\"numberOfSamples\":10,\"timeInterval\":10}", 400, "wrong_type",
                      "timeInterval must be a string");
    assert_post_error("{\"numberOfSamples\":10,\"timeInterval\":\"1ms\",\"format\":1}", 400,
                      "wrong_type", "format must be a string");
    assert_post_error("{\"numberOfSamples\":10,\"timeInterval\":\"1ms\",\"symbolizer\":true}", 400,
                      "wrong_type", "symbolizer must be a string");
}

TEST(route_sample_range_errors)
{
    assert_post_error("{\"numberOfSamples\":0,\"timeInterval\":\"1ms\"}", 400, "out_of_range",
                      "numberOfSamples is 0; it must be 1..100000");
    assert_post_error("{\"numberOfSamples\":-1,\"timeInterval\":\"1ms\"}", 400, "out_of_range",
                      "numberOfSamples is -1");
    assert_post_error("{\"numberOfSamples\":100001,\"timeInterval\":\"1ms\"}", 400, "out_of_range",
                      "numberOfSamples is 100001");
    assert_post_error("{\"numberOfSamples\":1e300,\"timeInterval\":\"1ms\"}", 400, "out_of_range",
                      NULL);
    assert_post_error("{\"numberOfSamples\":10,\"timeInterval\":\"0 ms\"}", 400, "out_of_range",
                      "timeInterval \"0 ms\" must be 1 ms..10 s");
    assert_post_error("{\"numberOfSamples\":10,\"timeInterval\":\"999us\"}", 400, "out_of_range",
                      NULL);
    assert_post_error("{\"numberOfSamples\":10,\"timeInterval\":\"10.001 s\"}", 400, "out_of_range",
                      NULL);
    assert_post_error("{\"numberOfSamples\":10,\"timeInterval\":\"99999999999999999999 h\"}", 400,
                      "out_of_range", NULL);
    assert_post_error("{\"numberOfSamples\":100000,\"timeInterval\":\"10 ms\"}", 400,
                      "out_of_range",
                      "numberOfSamples x timeInterval is 1000.0 s; the limit is 600 s");
    assert_post_error("{\"numberOfSamples\":10,\"timeInterval\":\"ten ms\"}", 400, "bad_interval",
                      "timeInterval \"ten ms\" is not a number and a unit");
}

TEST(route_sample_format_errors)
{
    assert_post_error("{\"numberOfSamples\":10,\"timeInterval\":\"1ms\",\"format\":\"raw\"}", 400,
                      "unsupported_format", "format \"raw\" is not one of");
    assert_post_error("{\"numberOfSamples\":10,\"timeInterval\":\"1ms\",\"format\":\"PERF\"}", 400,
                      "unsupported_format", NULL);
    assert_post_error("{\"numberOfSamples\":10,\"timeInterval\":\"1ms\",\"symbolizer\":\"fake\"}",
                      400, "unsupported_symbolizer", "only the \"native\" symbolizer");
}

TEST(route_detail_sanitized)
{
    struct http_route rt;

    /* control bytes and non-ASCII from the client never reach the detail; long names are cut */
    route_post(
            "/sample",
            "{\"\\u0001\\u00e9xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxx\":1}",
            &rt);
    assert_route_error(&rt, 400, "unknown_field", "unknown field \"???xxxx");
    ASSERT_TRUE(strstr(rt.err.detail, "x...\"") != NULL);
}

TEST(route_pprof)
{
    struct http_route rt;

    route_raw("GET /debug/pprof/profile HTTP/1.1\r\n\r\n", &rt);
    ASSERT_EQ(rt.action, HTTP_ACTION_SAMPLE);
    ASSERT_EQ(rt.sample.pprof_endpoint, 1);
    ASSERT_EQ(rt.sample.seconds, 30);
    ASSERT_EQ(rt.sample.hz, 100);
    ASSERT_EQ(rt.sample.samples, 3000);
    ASSERT_U64_EQ(rt.sample.interval_ns, 10000000ull);
    ASSERT_EQ(rt.sample.format, PP_PROFILE_PPROF);

    route_raw("GET /debug/pprof/profile?seconds=5&rate=50&symbolizer=fake HTTP/1.1\r\n\r\n", &rt);
    ASSERT_EQ(rt.action, HTTP_ACTION_SAMPLE);
    ASSERT_EQ(rt.sample.seconds, 5);
    ASSERT_EQ(rt.sample.hz, 50);
    ASSERT_EQ(rt.sample.samples, 250);
    ASSERT_U64_EQ(rt.sample.interval_ns, 20000000ull);

    route_raw("GET /debug/pprof/profile/?seconds=&seconds=9&rate=1000 HTTP/1.1\r\n\r\n", &rt);
    ASSERT_EQ(rt.action, HTTP_ACTION_SAMPLE);
    ASSERT_EQ(rt.sample.seconds, 30); /* the first value counts, and empty is the default */
    ASSERT_U64_EQ(rt.sample.interval_ns, 1000000ull);

    route_raw("GET /debug/pprof/profile?seconds=600 HTTP/1.1\r\n\r\n", &rt);
    ASSERT_EQ(rt.action, HTTP_ACTION_SAMPLE);
}

TEST(route_pprof_errors)
{
    struct http_route rt;

    route_raw("GET /debug/pprof/profile?seconds=0 HTTP/1.1\r\n\r\n", &rt);
    assert_route_error(&rt, 400, "out_of_range", "seconds=0: it must be an integer, 1..600");
    route_raw("GET /debug/pprof/profile?seconds=601 HTTP/1.1\r\n\r\n", &rt);
    assert_route_error(&rt, 400, "out_of_range", "seconds=601");
    route_raw("GET /debug/pprof/profile?seconds=99999999999999999999 HTTP/1.1\r\n\r\n", &rt);
    assert_route_error(&rt, 400, "out_of_range", NULL);
    route_raw("GET /debug/pprof/profile?seconds=abc HTTP/1.1\r\n\r\n", &rt);
    assert_route_error(&rt, 400, "wrong_type", "seconds=abc");
    route_raw("GET /debug/pprof/profile?seconds=-5 HTTP/1.1\r\n\r\n", &rt);
    assert_route_error(&rt, 400, "wrong_type", NULL);
    route_raw("GET /debug/pprof/profile?rate=1001 HTTP/1.1\r\n\r\n", &rt);
    assert_route_error(&rt, 400, "out_of_range", "rate=1001: it must be an integer, 1..1000 Hz");
    route_raw("GET /debug/pprof/profile?rate=0 HTTP/1.1\r\n\r\n", &rt);
    assert_route_error(&rt, 400, "out_of_range", NULL);
}

TEST(route_not_found_and_methods)
{
    struct http_route rt;

    route_raw("GET /debug/pprof/heap HTTP/1.1\r\n\r\n", &rt);
    assert_route_error(&rt, 404, "not_found", "no endpoint at \"/debug/pprof/heap\"");
    route_raw("GET /samplex HTTP/1.1\r\n\r\n", &rt);
    assert_route_error(&rt, 404, "not_found", NULL);
    route_raw("GET /sample HTTP/1.1\r\n\r\n", &rt);
    assert_route_error(&rt, 405, "method_not_allowed", "GET is not allowed here; use POST");
    ASSERT_STR_EQ(rt.allow, "POST");
    route_raw("POST /debug/pprof/profile HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &rt);
    assert_route_error(&rt, 405, "method_not_allowed", NULL);
    ASSERT_STR_EQ(rt.allow, "GET");
    route_raw("DELETE / HTTP/1.1\r\n\r\n", &rt);
    assert_route_error(&rt, 405, "method_not_allowed", "DELETE is not allowed here");
    ASSERT_STR_EQ(rt.allow, "GET, POST");
    route_raw("OPTIONS * HTTP/1.1\r\n\r\n", &rt);
    assert_route_error(&rt, 404, "not_found", "no endpoint at \"*\"");
}

/* ------------------------------------------------------------------------------------------ */
/* Responses                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* Checks head and body of an error response as a client would see them. */
static void
assert_error_response(const struct http_response *resp, const char *status_line, const char *code,
                      const char *detail)
{
    char want[64];
    cJSON *j;

    ASSERT_TRUE(strncmp(resp->head, status_line, strlen(status_line)) == 0);
    ASSERT_TRUE(strstr(resp->head, "\r\nContent-Type: application/json\r\n") != NULL);
    ASSERT_TRUE(strstr(resp->head, "\r\nConnection: close\r\n") != NULL);
    snprintf(want, sizeof(want), "\r\nContent-Length: %zu\r\n", resp->body_len);
    ASSERT_TRUE(strstr(resp->head, want) != NULL);
    ASSERT_TRUE(resp->head_len >= 4 && memcmp(resp->head + resp->head_len - 4, "\r\n\r\n", 4) == 0);
    ASSERT_EQ(resp->body[resp->body_len - 1], '\n');
    j = cJSON_ParseWithLength(resp->body, resp->body_len);
    ASSERT_TRUE(j != NULL);
    ASSERT_EQ(cJSON_GetArraySize(j), 2);
    ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "error")), code);
    ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "detail")), detail);
    cJSON_Delete(j);
}

TEST(response_error_json)
{
    struct http_response resp;
    struct http_route rt;

    route_raw("GET /nope HTTP/1.1\r\n\r\n", &rt);
    ASSERT_OK(http_response_error(&resp, &rt.err, rt.allow, 0));
    assert_error_response(&resp, "HTTP/1.1 404 Not Found\r\n", "not_found",
                          "no endpoint at \"/nope\"; see GET / for the list");
    ASSERT_STR_EQ(resp.body, "{\"error\":\"not_found\",\"detail\":\"no endpoint at \\\"/nope\\\"; "
                             "see GET / for the list\"}\n");
    http_response_fini(&resp);

    route_raw("PUT /sample HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &rt);
    ASSERT_OK(http_response_error(&resp, &rt.err, rt.allow, 0));
    assert_error_response(&resp, "HTTP/1.1 405 Method Not Allowed\r\n", "method_not_allowed",
                          "PUT is not allowed here; use POST");
    ASSERT_TRUE(strstr(resp.head, "\r\nAllow: POST\r\n") != NULL);
    http_response_fini(&resp);
}

TEST(response_statuses)
{
    static const struct {
        int status;
        const char *line;
    } cases[] = {
        { 400, "HTTP/1.1 400 Bad Request\r\n" },
        { 408, "HTTP/1.1 408 Request Timeout\r\n" },
        { 413, "HTTP/1.1 413 Content Too Large\r\n" },
        { 417, "HTTP/1.1 417 Expectation Failed\r\n" },
        { 429, "HTTP/1.1 429 Too Many Requests\r\n" },
        { 431, "HTTP/1.1 431 Request Header Fields Too Large\r\n" },
        { 500, "HTTP/1.1 500 Internal Server Error\r\n" },
        { 501, "HTTP/1.1 501 Not Implemented\r\n" },
        { 505, "HTTP/1.1 505 HTTP Version Not Supported\r\n" },
    };
    size_t i;

    for (i = 0; i < PP_ARRAY_SIZE(cases); i++) {
        struct http_error e = { 0 };
        struct http_response resp;

        ASSERT_EQ(http_error_set(&e, cases[i].status, "code", "detail %d", 7), -EBADMSG);
        ASSERT_EQ(http_error_set(&e, 999, "later", "ignored"), -EBADMSG); /* first one wins */
        ASSERT_OK(http_response_error(&resp, &e, NULL, cases[i].status == 429 ? 12 : 0));
        assert_error_response(&resp, cases[i].line, "code", "detail 7");
        ASSERT_EQ(strstr(resp.head, "Retry-After: 12\r\n") != NULL, cases[i].status == 429);
        http_response_fini(&resp);
    }
}

TEST(response_build_takes_body)
{
    struct http_response resp;
    char *body = strdup("abc");

    ASSERT_OK(http_response_build(&resp, 200, "text/plain", "X-A: b\r\n", body, 3));
    ASSERT_TRUE(strncmp(resp.head,
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                        "Content-Length: 3\r\n",
                        60) == 0);
    ASSERT_TRUE(strstr(resp.head, "\r\nX-A: b\r\n\r\n") != NULL);
    ASSERT_TRUE(resp.body == body);
    http_response_fini(&resp);
}

/* ------------------------------------------------------------------------------------------ */
/* Listen URLs                                                                                */
/* ------------------------------------------------------------------------------------------ */

static void
assert_url_error(const char *url, int allow_remote, const char *want)
{
    struct http_url u;
    char err[256] = "";

    ASSERT_EQ(http_url_parse(url, allow_remote, &u, err, sizeof(err)), -EINVAL);
    if (strstr(err, want) == NULL) {
        test_fail(__FILE__, __LINE__, "%s: \"%s\" lacks \"%s\"", url, err, want);
    }
}

TEST(url_forms)
{
    struct http_url u;
    char err[256], want[128];

    ASSERT_OK(http_url_parse("http://127.0.0.1:7377", 0, &u, err, sizeof(err)));
    ASSERT_EQ(u.family, AF_INET);
    ASSERT_EQ(u.loopback, 1);
    ASSERT_EQ(ntohs(((struct sockaddr_in *)&u.addr)->sin_port), 7377);
    ASSERT_OK(http_url_parse("http://localhost:0/", 0, &u, err, sizeof(err)));
    ASSERT_EQ(u.family, AF_INET);
    ASSERT_EQ(ntohl(((struct sockaddr_in *)&u.addr)->sin_addr.s_addr), 0x7f000001);
    ASSERT_OK(http_url_parse("http://127.1.2.3:80", 0, &u, err, sizeof(err)));
    ASSERT_OK(http_url_parse("http://[::1]:6060", 0, &u, err, sizeof(err)));
    ASSERT_EQ(u.family, AF_INET6);
    ASSERT_EQ(u.loopback, 1);
    ASSERT_EQ(ntohs(((struct sockaddr_in6 *)&u.addr)->sin6_port), 6060);
    ASSERT_OK(http_url_parse("unix:///tmp/pp.sock", 0, &u, err, sizeof(err)));
    ASSERT_EQ(u.family, AF_UNIX);
    ASSERT_STR_EQ(u.path, "/tmp/pp.sock");
    ASSERT_OK(http_url_parse("http+unix://%2Ftmp%2Fpp%2esock", 0, &u, err, sizeof(err)));
    ASSERT_STR_EQ(u.path, "/tmp/pp.sock");

    ASSERT_OK(http_url_parse("unix:///tmp/my-app-samples-{PID}.sock", 0, &u, err, sizeof(err)));
    snprintf(want, sizeof(want), "/tmp/my-app-samples-%ld.sock", (long)getpid());
    ASSERT_STR_EQ(u.path, want);
    ASSERT_OK(http_url_parse("unix:///tmp/x-{UUID}.sock", 0, &u, err, sizeof(err)));
    ASSERT_EQ(strlen(u.path), strlen("/tmp/x-.sock") + 36);
    ASSERT_EQ(u.path[7 + 14], '4'); /* version nibble */

    ASSERT_OK(http_url_parse("http://0.0.0.0:7377", 1, &u, err, sizeof(err)));
    ASSERT_EQ(u.loopback, 0);
    ASSERT_OK(http_url_parse("http://[::]:7377", 1, &u, NULL, 0));
}

TEST(url_errors)
{
    assert_url_error("http://0.0.0.0:7377", 0, "refusing to listen on 0.0.0.0");
    assert_url_error("http://[::]:7377", 0, "not a loopback address");
    assert_url_error("http://10.1.2.3:7377", 0, "allow_remote");
    assert_url_error("http://example.com:80", 1, "host names are not resolved");
    assert_url_error("http://127.0.0.1", 0, "needs a port");
    assert_url_error("http://127.0.0.1:", 0, "needs a port");
    assert_url_error("http://127.0.0.1:65536", 0, "0..65535");
    assert_url_error("http://127.0.0.1:80/sample", 0, "takes no path");
    assert_url_error("http://[::1:80", 0, "missing ']'");
    assert_url_error("http://[zz]:80", 0, "not an IPv6 address");
    assert_url_error("unix://relative.sock", 0, "must be absolute");
    assert_url_error("unix://", 0, "must be absolute");
    assert_url_error("http+unix://%2", 0, "bad percent-encoded");
    assert_url_error("http+unix://%00x", 0, "bad percent-encoded");
    assert_url_error("https://127.0.0.1:80", 0, "unsupported listen URL");
    assert_url_error("", 0, "no listen URL");
    {
        char longpath[300];

        memset(longpath, 'a', sizeof(longpath));
        memcpy(longpath, "unix:///", 8);
        longpath[sizeof(longpath) - 1] = '\0';
        assert_url_error(longpath, 0, "longer than 107 bytes");
    }
}

static const struct test_case cases[] = {
    TEST_CASE(request_get_in_one_piece),
    TEST_CASE(request_post_byte_by_byte),
    TEST_CASE(request_pipelined_bytes_ignored),
    TEST_CASE(request_chunked_body),
    TEST_CASE(request_content_length_too_large_413_before_body),
    TEST_CASE(request_chunked_body_too_large_413),
    TEST_CASE(request_body_exactly_at_limit),
    TEST_CASE(request_headers_too_large_431),
    TEST_CASE(request_long_url_431),
    TEST_CASE(request_head_just_under_limit),
    TEST_CASE(request_malformed_400),
    TEST_CASE(request_http2_505),
    TEST_CASE(request_http2_preface_505),
    TEST_CASE(request_http10_accepted),
    TEST_CASE(request_expect_continue),
    TEST_CASE(request_expect_other_417),
    TEST_CASE(request_long_header_names_not_confused),
    TEST_CASE(request_eof_before_complete_400),
    TEST_CASE(interval_units),
    TEST_CASE(route_index),
    TEST_CASE(route_swift_profile_recorder_examples),
    TEST_CASE(route_sample_formats_and_aliases),
    TEST_CASE(route_sample_json_errors),
    TEST_CASE(route_sample_field_errors),
    TEST_CASE(route_sample_range_errors),
    TEST_CASE(route_sample_format_errors),
    TEST_CASE(route_detail_sanitized),
    TEST_CASE(route_pprof),
    TEST_CASE(route_pprof_errors),
    TEST_CASE(route_not_found_and_methods),
    TEST_CASE(response_error_json),
    TEST_CASE(response_statuses),
    TEST_CASE(response_build_takes_body),
    TEST_CASE(url_forms),
    TEST_CASE(url_errors),
};
TEST_MAIN(cases)
