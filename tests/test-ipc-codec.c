/* SPDX-License-Identifier: MIT */
/*
 * tests/test-ipc-codec.c - ipc/protocol.c and ipc/ports.c: every command encoded and decoded,
 * the worked example of the protocol notes byte for byte, every error path, on guard-page
 * buffers (the byte after the input is PROT_NONE, so any over-read crashes the case).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "tests/test.h"

static const uint8_t magic[14] = "DOTNET_IPC_V1";

/* dotnet-trace's default request (ipc-protocol.md 7.1), 213 bytes. */
static size_t
build_default_request(uint8_t *out)
{
    static const char *names[2] = { "Microsoft-Windows-DotNETRuntime",
                                    "Microsoft-DotNETCore-SampleProfiler" };
    static const uint8_t kw[2][8] = { { 0x1D, 0x80, 0x03, 0x00, 0x10, 0, 0, 0 },
                                      { 0, 0, 0, 0, 0, 0xF0, 0, 0 } };
    size_t n = 0, i, j;

    memcpy(out, magic, 14);
    n = 14;
    out[n++] = 0xD5;
    out[n++] = 0x00;
    out[n++] = 0x02;
    out[n++] = 0x03;
    out[n++] = 0;
    out[n++] = 0;
    memcpy(out + n, "\x00\x01\x00\x00\x01\x00\x00\x00\x01\x02\x00\x00\x00", 13);
    n += 13;
    for (i = 0; i < 2; i++) {
        size_t len = strlen(names[i]) + 1;

        memcpy(out + n, kw[i], 8);
        n += 8;
        memcpy(out + n, "\x04\x00\x00\x00", 4);
        n += 4;
        out[n++] = (uint8_t)len;
        out[n++] = 0;
        out[n++] = 0;
        out[n++] = 0;
        for (j = 0; j < len; j++) {
            out[n++] = (uint8_t)names[i][j];
            out[n++] = 0;
        }
        memcpy(out + n, "\x01\x00\x00\x00\x00\x00", 6);
        n += 6;
    }
    return n;
}

TEST(header_roundtrip_and_errors)
{
    uint8_t h[20];
    struct ipc_header d;
    const uint8_t *g;

    ipc_header_encode(h, 20, IPC_SET_PROCESS, IPC_PROC_INFO);
    ASSERT_MEM_EQ(h, "DOTNET_IPC_V1\0\x14\x00\x04\x00\x00\x00", 20);
    g = test_guarded_copy(h, 20);
    ASSERT_OK(ipc_header_decode(g, 20, &d));
    ASSERT_EQ(d.size, 20);
    ASSERT_EQ(d.command_set, 4);
    ASSERT_EQ(d.command_id, 0);
    ASSERT_EQ(ipc_header_decode(test_guarded_copy(h, 19), 19, &d), -EBADMSG);
    h[13] = 'X'; /* the NUL of the magic is part of it */
    ASSERT_EQ(ipc_header_decode(test_guarded_copy(h, 20), 20, &d), -EPROTO);
    h[14] = 10; /* size < 20 wins over a bad magic, as in the runtime */
    ASSERT_EQ(ipc_header_decode(test_guarded_copy(h, 20), 20, &d), -EBADMSG);
}

TEST(responses_encode_and_decode)
{
    uint8_t m[28];
    struct ipc_response r;

    ASSERT_EQ(ipc_error_encode(m, IPC_HR_UNKNOWN_COMMAND), 24);
    ASSERT_MEM_EQ(m + 14, "\x18\x00\xFF\xFF\x00\x00\x85\x13\x13\x80", 10);
    ASSERT_OK(ipc_response_decode(test_guarded_copy(m, 24), 24, &r));
    ASSERT_EQ(r.status, IPC_RESPONSE_ERROR);
    ASSERT_U64_EQ(r.hresult, IPC_HR_UNKNOWN_COMMAND);
    ASSERT_EQ(ipc_ok_u64_encode(m, 0x1122334455667788ull), 28);
    ASSERT_MEM_EQ(m + 14, "\x1C\x00\xFF\x00\x00\x00\x88\x77\x66\x55\x44\x33\x22\x11", 14);
    ASSERT_OK(ipc_response_decode(test_guarded_copy(m, 28), 28, &r));
    ASSERT_U64_EQ(r.value, 0x1122334455667788ull);
    ASSERT_EQ(ipc_response_decode(test_guarded_copy(m, 27), 27, &r), -EBADMSG);
    ASSERT_EQ(ipc_ok_i32_encode(m, 0), 24);
    ASSERT_OK(ipc_response_decode(test_guarded_copy(m, 24), 24, &r));
    ASSERT_EQ(r.status, IPC_RESPONSE_OK);
    ASSERT_EQ(r.payload_len, 4);
    /* an error without its 4-byte code is malformed */
    ipc_error_encode(m, 1);
    m[14] = 20;
    ASSERT_EQ(ipc_response_decode(test_guarded_copy(m, 20), 20, &r), -EBADMSG);
}

TEST(errno_maps_to_runtime_hresults)
{
    ASSERT_U64_EQ(ipc_errno_to_hresult(-EPROTO), 0x80131386u);
    ASSERT_U64_EQ(ipc_errno_to_hresult(-ENOTSUP), 0x80131385u);
    ASSERT_U64_EQ(ipc_errno_to_hresult(-EBADMSG), 0x80131384u);
    ASSERT_U64_EQ(ipc_errno_to_hresult(-EINVAL), 0x80131384u);
    ASSERT_U64_EQ(ipc_errno_to_hresult(-ENOMEM), 0x80004005u);
}

TEST(strings_encode_like_the_client)
{
    uint8_t b[64];
    size_t pos = 0;
    char *s = NULL;

    ASSERT_OK(ipc_string_encode(b, sizeof(b), &pos, "ab"));
    ASSERT_EQ(pos, 10);
    ASSERT_MEM_EQ(b, "\x03\x00\x00\x00\x61\x00\x62\x00\x00\x00", 10);
    pos = 0;
    ASSERT_OK(ipc_string_encode(b, sizeof(b), &pos, NULL)); /* never charCount 0 */
    ASSERT_MEM_EQ(b, "\x01\x00\x00\x00\x00\x00", 6);
    pos = 0;
    ASSERT_OK(ipc_string_encode(b, sizeof(b), &pos, "\xF0\x9F\x98\x80\xC3\xA9")); /* U+1F600 é */
    ASSERT_EQ(pos, 4 + 2 * 4);
    ASSERT_MEM_EQ(b, "\x04\x00\x00\x00\x3D\xD8\x00\xDE\xE9\x00\x00\x00", 12);
    pos = 0;
    ASSERT_OK(ipc_string_decode(test_guarded_copy(b, 12), 12, &pos, &s));
    ASSERT_STR_EQ(s, "\xF0\x9F\x98\x80\xC3\xA9");
    free(s);
    pos = 0;
    ASSERT_EQ(ipc_string_encode(b, 9, &pos, "ab"), -ENOSPC);
    ASSERT_EQ(pos, 0);
}

TEST(strings_decode_rejects_bad_input)
{
    static const uint8_t null_str[] = { 0, 0, 0, 0 };
    static const uint8_t no_nul[] = { 2, 0, 0, 0, 'a', 0, 'b', 0 };
    static const uint8_t too_long[] = { 9, 0, 0, 0, 'a', 0, 0, 0 };
    static const uint8_t huge[] = { 0xFF, 0xFF, 0xFF, 0xFF, 0, 0 };
    static const uint8_t lone[] = { 3, 0, 0, 0, 0x00, 0xD8, 'x', 0, 0, 0 };
    size_t pos = 0;
    char *s = (char *)1;

    ASSERT_OK(ipc_string_decode(test_guarded_copy(null_str, 4), 4, &pos, &s));
    ASSERT_TRUE(s == NULL);
    ASSERT_EQ(pos, 4);
    pos = 0;
    ASSERT_EQ(ipc_string_decode(test_guarded_copy(no_nul, 8), 8, &pos, &s), -EBADMSG);
    pos = 0;
    ASSERT_EQ(ipc_string_decode(test_guarded_copy(too_long, 8), 8, &pos, &s), -EBADMSG);
    pos = 0;
    ASSERT_EQ(ipc_string_decode(test_guarded_copy(huge, 6), 6, &pos, &s), -EBADMSG);
    pos = 0;
    ASSERT_EQ(ipc_string_decode(test_guarded_copy(huge, 3), 3, &pos, &s), -EBADMSG);
    pos = 0;
    ASSERT_OK(ipc_string_decode(test_guarded_copy(lone, 10), 10, &pos, &s));
    ASSERT_STR_EQ(s, "\xEF\xBF\xBDx"); /* a lone surrogate becomes U+FFFD */
    free(s);
}

TEST(collect2_worked_example_decodes)
{
    uint8_t m[256];
    size_t n = build_default_request(m);
    struct ipc_header h;
    struct ipc_collect c;
    const uint8_t *g;

    ASSERT_EQ(n, 213);
    g = test_guarded_copy(m, n);
    ASSERT_OK(ipc_header_decode(g, n, &h));
    ASSERT_EQ(h.size, 213);
    ASSERT_EQ(h.command_id, IPC_EP_COLLECT_TRACING2);
    ASSERT_OK(ipc_collect_decode(h.command_id, g + 20, n - 20, &c));
    ASSERT_EQ(c.buffer_mb, 256);
    ASSERT_EQ(c.format, 1);
    ASSERT_EQ(c.request_rundown, 1);
    ASSERT_U64_EQ(c.rundown_keyword, IPC_DEFAULT_RUNDOWN_KEYWORD);
    ASSERT_EQ(c.request_stackwalk, 1);
    ASSERT_EQ(c.provider_count, 2);
    ASSERT_STR_EQ(c.providers[0].name, "Microsoft-Windows-DotNETRuntime");
    ASSERT_U64_EQ(c.providers[0].keywords, 0x100003801Dull);
    ASSERT_EQ(c.providers[0].level, 4);
    ASSERT_STR_EQ(c.providers[0].args, "");
    ASSERT_STR_EQ(c.providers[1].name, "Microsoft-DotNETCore-SampleProfiler");
    ASSERT_U64_EQ(c.providers[1].keywords, 0xF00000000000ull);
    ipc_collect_fini(&c);
}

/* Every version: encode, then decode, and every truncation of the payload fails cleanly. */
TEST(collect_all_versions_roundtrip_and_truncations)
{
    uint32_t ids[3] = { 1, 7, 300 };
    struct ipc_provider p[2];
    struct ipc_collect in, out;
    uint8_t m[1024];
    uint8_t v;

    memset(p, 0, sizeof(p));
    p[0].keywords = 0xF00000000000ull;
    p[0].level = 5;
    p[0].name = "Microsoft-DotNETCore-SampleProfiler";
    p[0].args = "k=v;x=\xC3\xA9";
    p[1].keywords = 1;
    p[1].level = 0;
    p[1].name = "My-Provider";
    p[1].args = NULL;
    p[1].filter_enable = 1;
    p[1].event_ids = ids;
    p[1].event_id_count = 3;
    for (v = IPC_EP_COLLECT_TRACING; v <= IPC_EP_COLLECT_TRACING6; v++) {
        const uint8_t *g;
        size_t cut;
        int n;

        memset(&in, 0, sizeof(in));
        in.command_id = v;
        in.buffer_mb = 64;
        in.format = 1;
        in.request_rundown = 0;
        in.request_stackwalk = 0;
        in.rundown_keyword = 0x1;
        in.buffer_mode = 1;
        in.providers = p;
        in.provider_count = 2;
        n = ipc_collect_encode(&in, m, sizeof(m));
        ASSERT_TRUE(n > 20);
        g = test_guarded_copy(m, (size_t)n);
        ASSERT_OK(ipc_collect_decode(v, g + 20, (size_t)n - 20, &out));
        ASSERT_EQ(out.provider_count, 2);
        ASSERT_STR_EQ(out.providers[0].args, "k=v;x=\xC3\xA9");
        ASSERT_STR_EQ(out.providers[1].args, ""); /* NULL is sent as "" */
        ASSERT_EQ(out.providers[1].level, 0);
        ASSERT_EQ(out.buffer_mb, 64);
        switch (v) {
        case IPC_EP_COLLECT_TRACING:
            ASSERT_U64_EQ(out.rundown_keyword, IPC_DEFAULT_RUNDOWN_KEYWORD);
            ASSERT_EQ(out.request_stackwalk, 1);
            break;
        case IPC_EP_COLLECT_TRACING2:
            ASSERT_U64_EQ(out.rundown_keyword, 0);
            ASSERT_EQ(out.request_stackwalk, 1);
            break;
        case IPC_EP_COLLECT_TRACING3:
            ASSERT_U64_EQ(out.rundown_keyword, 0);
            ASSERT_EQ(out.request_stackwalk, 0);
            break;
        default:
            ASSERT_U64_EQ(out.rundown_keyword, 1);
            ASSERT_EQ(out.request_rundown, 1);
            ASSERT_EQ(out.request_stackwalk, 0);
            break;
        }
        if (v >= IPC_EP_COLLECT_TRACING5) {
            ASSERT_EQ(out.providers[1].filter_enable, 1);
            ASSERT_EQ(out.providers[1].event_id_count, 3);
            ASSERT_EQ(out.providers[1].event_ids[2], 300);
        }
        if (v == IPC_EP_COLLECT_TRACING6) {
            ASSERT_EQ(out.buffer_mode, 1);
        }
        ipc_collect_fini(&out);
        for (cut = 0; cut < (size_t)n - 20; cut++) {
            g = test_guarded_copy(m + 20, cut);
            ASSERT_EQ(ipc_collect_decode(v, g, cut, &out), -EBADMSG);
            ipc_collect_fini(&out);
        }
    }
}

/* Runtime validation: each rule is a BAD_ENCODING. */
TEST(collect_validation_rejects)
{
    struct ipc_provider p = { 0, 4, "P", NULL, 0, NULL, 0 };
    struct ipc_collect in, out;
    uint8_t m[512];
    int n;

    memset(&in, 0, sizeof(in));
    in.command_id = IPC_EP_COLLECT_TRACING2;
    in.buffer_mb = 0; /* buffer 0 */
    in.format = 1;
    in.providers = &p;
    in.provider_count = 1;
    n = ipc_collect_encode(&in, m, sizeof(m));
    ASSERT_EQ(ipc_collect_decode(3, m + 20, (size_t)n - 20, &out), -EBADMSG);
    ipc_collect_fini(&out);
    in.buffer_mb = 1;
    in.format = 2; /* format >= 2 */
    n = ipc_collect_encode(&in, m, sizeof(m));
    ASSERT_EQ(ipc_collect_decode(3, m + 20, (size_t)n - 20, &out), -EBADMSG);
    ipc_collect_fini(&out);
    in.format = 1;
    p.level = 6; /* level > 5 */
    n = ipc_collect_encode(&in, m, sizeof(m));
    ASSERT_EQ(ipc_collect_decode(3, m + 20, (size_t)n - 20, &out), -EBADMSG);
    ipc_collect_fini(&out);
    p.level = 4;
    p.name = ""; /* empty name */
    n = ipc_collect_encode(&in, m, sizeof(m));
    ASSERT_EQ(ipc_collect_decode(3, m + 20, (size_t)n - 20, &out), -EBADMSG);
    ipc_collect_fini(&out);
    p.name = "P";
    in.provider_count = 0; /* no provider */
    n = ipc_collect_encode(&in, m, sizeof(m));
    ASSERT_EQ(ipc_collect_decode(3, m + 20, (size_t)n - 20, &out), -EBADMSG);
    ipc_collect_fini(&out);
    /* a provider count that lies (one million) with a tiny payload */
    in.provider_count = 1;
    n = ipc_collect_encode(&in, m, sizeof(m));
    m[20 + 9] = 0x40;
    m[20 + 10] = 0x42;
    m[20 + 11] = 0x0F;
    ASSERT_EQ(
            ipc_collect_decode(3, test_guarded_copy(m + 20, (size_t)n - 20), (size_t)n - 20, &out),
            -EBADMSG);
    ipc_collect_fini(&out);
    /* v5 user_events sessions are not served; session_type >= 2 is malformed */
    memcpy(m, "\x01\x00\x00\x00", 4);
    ASSERT_EQ(ipc_collect_decode(6, test_guarded_copy(m, 4), 4, &out), -ENOTSUP);
    ipc_collect_fini(&out);
    memcpy(m, "\x02\x00\x00\x00", 4);
    ASSERT_EQ(ipc_collect_decode(6, test_guarded_copy(m, 4), 4, &out), -EBADMSG);
    ipc_collect_fini(&out);
    ASSERT_EQ(ipc_collect_decode(9, m, 4, &out), -ENOTSUP);
    ipc_collect_fini(&out);
    ASSERT_EQ(ipc_collect_decode(3, test_guarded_copy(m, 0), 0, &out), -EBADMSG);
    ipc_collect_fini(&out);
}

TEST(stop_encode_decode)
{
    uint8_t m[28];
    uint64_t id = 0;

    ASSERT_EQ(ipc_stop_encode(m, 42), 28);
    ASSERT_MEM_EQ(m + 14, "\x1C\x00\x02\x01\x00\x00\x2A", 7);
    ASSERT_OK(ipc_stop_decode(test_guarded_copy(m + 20, 8), 8, &id));
    ASSERT_U64_EQ(id, 42);
    ASSERT_EQ(ipc_stop_decode(test_guarded_copy(m + 20, 7), 7, &id), -EBADMSG);
}

TEST(providers_spec_like_dotnet_trace)
{
    struct ipc_collect c;
    const char *why;

    memset(&c, 0, sizeof(c));
    ASSERT_OK(ipc_providers_parse("A,B:0xFF,C:ff:Verbose,D::2:k=v;k2=\"a,b:c\"", &c, &why));
    ASSERT_EQ(c.provider_count, 4);
    ASSERT_STR_EQ(c.providers[0].name, "A");
    ASSERT_U64_EQ(c.providers[0].keywords, 0);
    ASSERT_EQ(c.providers[0].level, 4);
    ASSERT_U64_EQ(c.providers[1].keywords, 0xFF);
    ASSERT_EQ(c.providers[2].level, 5);
    ASSERT_U64_EQ(c.providers[3].keywords, 0);
    ASSERT_EQ(c.providers[3].level, 2);
    ASSERT_STR_EQ(c.providers[3].args, "k=v;k2=\"a,b:c\"");
    ipc_collect_fini(&c);
    ASSERT_EQ(ipc_providers_parse("A:xyz", &c, &why), -EINVAL);
    ASSERT_TRUE(why != NULL);
    ipc_collect_fini(&c);
    ASSERT_EQ(ipc_providers_parse("A:1:9", &c, &why), -EINVAL);
    ipc_collect_fini(&c);
    ASSERT_EQ(ipc_providers_parse(":1", &c, &why), -EINVAL);
    ipc_collect_fini(&c);
    ASSERT_EQ(ipc_providers_parse("", &c, &why), -EINVAL);
    ipc_collect_fini(&c);
    ASSERT_EQ(ipc_providers_parse("A:11112222333344445", &c, &why), -EINVAL);
    ipc_collect_fini(&c);
}

TEST(process_info_all_versions_roundtrip)
{
    struct ipc_process_info in = { 1234,
                                   { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 },
                                   "/usr/bin/app --x",
                                   "Linux",
                                   "x64",
                                   "app",
                                   "10.0.0+pipeprof.0.1.0",
                                   "linux-x64" };
    struct ipc_process_info out;
    static uint8_t m[IPC_MAX_MESSAGE];
    struct ipc_response r;
    int v, n;

    for (v = 1; v <= 3; v++) {
        const uint8_t *g;
        size_t cut;

        n = ipc_process_info_encode(&in, v, m, sizeof(m));
        ASSERT_TRUE(n > 20);
        g = test_guarded_copy(m, (size_t)n);
        ASSERT_OK(ipc_response_decode(g, (size_t)n, &r));
        ASSERT_EQ(r.status, IPC_RESPONSE_OK);
        ASSERT_OK(ipc_process_info_decode(r.payload, r.payload_len, v, &out));
        ASSERT_U64_EQ(out.pid, 1234);
        ASSERT_MEM_EQ(out.cookie, in.cookie, 16);
        ASSERT_STR_EQ(out.command_line, "/usr/bin/app --x");
        ASSERT_STR_EQ(out.os, "Linux");
        ASSERT_STR_EQ(out.arch, "x64");
        if (v >= 2) {
            ASSERT_STR_EQ(out.entrypoint_assembly, "app");
            ASSERT_STR_EQ(out.product_version, "10.0.0+pipeprof.0.1.0");
        }
        if (v == 3) {
            ASSERT_MEM_EQ(m + 20, "\x01\x00\x00\x00", 4); /* version 1: RID present */
            ASSERT_STR_EQ(out.runtime_id, "linux-x64");
        }
        ipc_process_info_fini(&out);
        for (cut = 0; cut < (size_t)n - 20; cut++) {
            g = test_guarded_copy(m + 20, cut);
            ASSERT_EQ(ipc_process_info_decode(g, cut, v, &out), -EBADMSG);
        }
    }
    ASSERT_EQ(ipc_process_info_encode(&in, 4, m, sizeof(m)), -EINVAL);
    ASSERT_EQ(ipc_process_info_encode(&in, 1, m, 40), -ENOSPC);
}

TEST(process_info_truncates_huge_command_line)
{
    struct ipc_process_info in = { 1, { 0 }, NULL, "Linux", "x64", "a", "1", "linux-x64" };
    struct ipc_process_info out;
    static uint8_t m[IPC_MAX_MESSAGE];
    char *cmd = malloc(100001);
    struct ipc_response r;
    int n;

    ASSERT_TRUE(cmd != NULL);
    memset(cmd, 'c', 100000);
    cmd[100000] = '\0';
    in.command_line = cmd;
    n = ipc_process_info_encode(&in, 3, m, sizeof(m));
    ASSERT_TRUE(n > 60000 && n <= IPC_MAX_MESSAGE);
    ASSERT_OK(ipc_response_decode(m, (size_t)n, &r));
    ASSERT_EQ(r.header.size, n);
    ASSERT_OK(ipc_process_info_decode(r.payload, r.payload_len, 3, &out));
    ASSERT_TRUE(strlen(out.command_line) > 30000);
    ASSERT_STR_EQ(out.runtime_id, "linux-x64");
    ipc_process_info_fini(&out);
    free(cmd);
}

TEST(environment_counts_exact_bytes)
{
    char *env[] = { "A=1", "PATH=/bin", "E=", NULL };
    uint8_t *m = NULL;
    size_t len = 0, pos = 30;
    uint32_t want;
    char *s;
    int i;

    ASSERT_OK(ipc_environment_encode(env, 1 << 20, &m, &len));
    ASSERT_MEM_EQ(m + 14, "\x1A\x00\xFF\x00\x00\x00", 6);
    want = (uint32_t)m[20] | (uint32_t)m[21] << 8;
    ASSERT_EQ(want, len - 26); /* nIncomingBytes == continuation length */
    ASSERT_EQ(want, 4 + (4 + 2 * 4) + (4 + 2 * 10) + (4 + 2 * 3));
    ASSERT_EQ(m[26], 3);
    for (i = 0; i < 3; i++) {
        ASSERT_OK(ipc_string_decode(m, len, &pos, &s));
        ASSERT_STR_EQ(s, env[i]);
        free(s);
    }
    ASSERT_EQ(pos, len);
    free(m);
    /* a cap leaves entries out but keeps the count exact */
    ASSERT_OK(ipc_environment_encode(env, 20, &m, &len));
    want = (uint32_t)m[20];
    ASSERT_EQ(want, len - 26);
    ASSERT_EQ(m[26], 1);
    free(m);
}

TEST(advertise_roundtrip)
{
    uint8_t cookie[16] = { 0xAA, 1, 2, 3 }, back[16];
    uint8_t m[IPC_ADVERTISE_SIZE];
    uint64_t pid;

    ipc_advertise_encode(m, cookie, 4242);
    ASSERT_MEM_EQ(m, "ADVR_V1\0", 8);
    ASSERT_MEM_EQ(m + 24, "\x92\x10\x00\x00\x00\x00\x00\x00\x00\x00", 10);
    ASSERT_OK(ipc_advertise_decode(test_guarded_copy(m, 34), 34, back, &pid));
    ASSERT_U64_EQ(pid, 4242);
    ASSERT_MEM_EQ(back, cookie, 16);
    ASSERT_EQ(ipc_advertise_flags(m), 0); /* what the runtime sends */
    ipc_advertise_set_flags(m, IPC_ADVERTISE_RESUMES_AT_SESSION);
    ASSERT_MEM_EQ(m + 32, "\x01\x00", 2); /* little-endian, as every u16 of the protocol */
    ASSERT_EQ(ipc_advertise_flags(m), IPC_ADVERTISE_RESUMES_AT_SESSION);
    ASSERT_OK(ipc_advertise_decode(test_guarded_copy(m, 34), 34, back, &pid)); /* still valid */
    /* a lazy child's stream connection (PIPEPROF_RECORD_LAZY): bit 1 beside bit 0 */
    ipc_advertise_set_flags(m, IPC_ADVERTISE_RESUMES_AT_SESSION | IPC_ADVERTISE_STREAM_FOLLOWS);
    ASSERT_MEM_EQ(m + 32, "\x03\x00", 2);
    ASSERT_EQ(ipc_advertise_flags(m) & IPC_ADVERTISE_STREAM_FOLLOWS, IPC_ADVERTISE_STREAM_FOLLOWS);
    ASSERT_OK(ipc_advertise_decode(test_guarded_copy(m, 34), 34, back, &pid));
    ASSERT_EQ(ipc_advertise_decode(test_guarded_copy(m, 33), 33, back, &pid), -EBADMSG);
    m[0] = 'X';
    ASSERT_EQ(ipc_advertise_decode(test_guarded_copy(m, 34), 34, back, &pid), -EPROTO);
}

TEST(ports_parse_runtime_rules)
{
    struct ipc_port_list l;

    ASSERT_OK(ipc_ports_parse("/tmp/a.sock", &l));
    ASSERT_EQ(l.count, 1);
    ASSERT_STR_EQ(l.ports[0].path, "/tmp/a.sock");
    ASSERT_EQ(l.ports[0].type, IPC_PORT_CONNECT);
    ASSERT_EQ(l.ports[0].suspend, 1);
    ipc_port_list_fini(&l);
    ASSERT_OK(ipc_ports_parse(
            ";;/a,NoSuspend,bogus;/b,listen,connect;,suspend;/c,suspend,nosuspend;", &l));
    ASSERT_EQ(l.count, 3);
    ASSERT_STR_EQ(l.ports[0].path, "/a");
    ASSERT_EQ(l.ports[0].suspend, 0);
    ASSERT_EQ(l.ports[1].type, IPC_PORT_LISTEN); /* leftmost tag of a kind wins */
    ASSERT_STR_EQ(l.ports[2].path, "/c");
    ASSERT_EQ(l.ports[2].suspend, 1);
    ipc_port_list_fini(&l);
    ASSERT_OK(ipc_ports_parse("nosuspend,connect", &l)); /* the first token is the address */
    ASSERT_EQ(l.count, 1);
    ASSERT_STR_EQ(l.ports[0].path, "nosuspend");
    ipc_port_list_fini(&l);
    ASSERT_OK(ipc_ports_parse("", &l));
    ASSERT_EQ(l.count, 0);
    ipc_port_list_fini(&l);
    ASSERT_OK(ipc_ports_parse(NULL, &l));
    ASSERT_EQ(l.count, 0);
}

TEST(default_socket_path_and_key)
{
    char path[256], want[256];
    uint64_t key = ipc_process_start_key(getpid());

    ASSERT_TRUE(key > 0);
    setenv("TMPDIR", "/some/dir", 1);
    ASSERT_OK(ipc_default_socket_path(path, sizeof(path), 0));
    snprintf(want, sizeof(want), "/some/dir/dotnet-diagnostic-%d-%llu-socket", (int)getpid(),
             (unsigned long long)key);
    ASSERT_STR_EQ(path, want);
    setenv("TMPDIR", "", 1);
    ASSERT_OK(ipc_default_socket_path(path, sizeof(path), 7));
    snprintf(want, sizeof(want), "/tmp/dotnet-diagnostic-%d-7-socket", (int)getpid());
    ASSERT_STR_EQ(path, want);
    memset(want, 'd', 200);
    want[0] = '/';
    want[200] = '\0';
    setenv("TMPDIR", want, 1);
    ASSERT_EQ(ipc_default_socket_path(path, sizeof(path), 0), -ENAMETOOLONG);
}

TEST(session_config_enables_like_the_runtime)
{
    struct ipc_provider p[2] = { { 0xF0, 4, "Prov-A", NULL, 0, NULL, 0 },
                                 { 0, 0, "Other", NULL, 0, NULL, 0 } };
    struct ipc_session_config cfg = { 1, p, 1, 0, 1, 0 };

    ASSERT_EQ(ipc_session_config_enables(&cfg, "prov-a", 0x10, 4), 1);
    ASSERT_EQ(ipc_session_config_enables(&cfg, "Prov-A", 0x01, 4), 0); /* keywords */
    ASSERT_EQ(ipc_session_config_enables(&cfg, "Prov-A", 0, 5), 0);    /* level */
    ASSERT_EQ(ipc_session_config_enables(&cfg, "Prov-A", 0, 0), 1);    /* LogAlways */
    ASSERT_EQ(ipc_session_config_enables(&cfg, "Prov-B", 0, 1), 0);
    p[1].name = "*";
    p[1].keywords = ~0ull;
    p[1].level = 5;
    cfg.provider_count = 2;
    ASSERT_EQ(ipc_session_config_enables(&cfg, "Prov-B", 0x8, 5), 1);
}

static const struct test_case cases[] = {
    TEST_CASE(header_roundtrip_and_errors),
    TEST_CASE(responses_encode_and_decode),
    TEST_CASE(errno_maps_to_runtime_hresults),
    TEST_CASE(strings_encode_like_the_client),
    TEST_CASE(strings_decode_rejects_bad_input),
    TEST_CASE(collect2_worked_example_decodes),
    TEST_CASE(collect_all_versions_roundtrip_and_truncations),
    TEST_CASE(collect_validation_rejects),
    TEST_CASE(stop_encode_decode),
    TEST_CASE(providers_spec_like_dotnet_trace),
    TEST_CASE(process_info_all_versions_roundtrip),
    TEST_CASE(process_info_truncates_huge_command_line),
    TEST_CASE(environment_counts_exact_bytes),
    TEST_CASE(advertise_roundtrip),
    TEST_CASE(ports_parse_runtime_rules),
    TEST_CASE(default_socket_path_and_key),
    TEST_CASE(session_config_enables_like_the_runtime),
};
TEST_MAIN(cases)
