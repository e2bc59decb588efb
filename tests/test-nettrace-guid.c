/* SPDX-License-Identifier: MIT */
/*
 * tests/test-nettrace-guid.c - the private SHA-1 against FIPS 180 test vectors, and provider
 * GUIDs (nettrace/guid.c) against GUIDs that EventSource and TraceEvent are known to produce.
 */
#include <string.h>

#include "nettrace/nettrace.h"
#include "nettrace/sha1.h"
#include "tests/test.h"

static void
sha1_hex(const void *data, size_t len, size_t chunk, char out[41])
{
    uint8_t digest[NT_SHA1_DIGEST_SIZE];
    const uint8_t *p = data;
    struct nt_sha1 ctx;
    size_t take;
    int i;

    nt_sha1_init(&ctx);
    while (len > 0) {
        take = len < chunk ? len : chunk;
        nt_sha1_update(&ctx, p, take);
        p += take;
        len -= take;
    }
    nt_sha1_final(&ctx, digest);
    for (i = 0; i < NT_SHA1_DIGEST_SIZE; i++) {
        snprintf(out + 2 * i, 3, "%02x", digest[i]);
    }
}

TEST(sha1_matches_fips_vectors)
{
    static const char msg448[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    char hex[41];

    sha1_hex("abc", 3, 64, hex);
    ASSERT_STR_EQ(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
    sha1_hex("", 0, 64, hex);
    ASSERT_STR_EQ(hex, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    sha1_hex(msg448, strlen(msg448), 64, hex);
    ASSERT_STR_EQ(hex, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    /* Same message fed in odd pieces: the partial-block logic must not change the result. */
    sha1_hex(msg448, strlen(msg448), 7, hex);
    ASSERT_STR_EQ(hex, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

TEST(sha1_handles_padding_boundaries)
{
    static uint8_t million[1000000];
    char hex[41];

    memset(million, 'a', sizeof(million));
    sha1_hex(million, sizeof(million), 4093, hex);
    ASSERT_STR_EQ(hex, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    /* 55 and 56 bytes: the length fits in the last block, or needs one more. */
    sha1_hex(million, 55, 64, hex);
    ASSERT_STR_EQ(hex, "c1c8bbdc22796e28c0e15163d20899b65621d65a");
    sha1_hex(million, 56, 64, hex);
    ASSERT_STR_EQ(hex, "c2db330f6083854c99d4b5bfb6e8f29f201be699");
}

static void
expect_guid(void (*fn)(const char *, uint8_t *), const char *name, const char *want)
{
    uint8_t guid[16];
    char text[37];

    fn(name, guid);
    nt_guid_format(guid, text);
    if (strcmp(text, want) != 0) {
        test_fail(__FILE__, __LINE__, "%s: %s != %s", name, text, want);
    }
}

TEST(eventsource_guid_matches_known_providers)
{
    expect_guid(nt_eventsource_guid, "Microsoft-Extensions-Logging",
                "3ac73b97-af73-50e9-0822-5da4367920d0");
    expect_guid(nt_eventsource_guid, "System.Runtime", "49592c0f-5a05-516d-aa4b-a64e02026c89");
    expect_guid(nt_eventsource_guid, "Microsoft-DotNETCore-EventPipe",
                "92f528a6-f5b8-5160-a7ee-b33da7739e29");
    expect_guid(nt_eventsource_guid, "Universal.System", "8c107b6c-79f8-5231-4de6-2a0e20a3f562");
    expect_guid(nt_eventsource_guid, "Universal.Events", "bc5e5d63-9799-5873-33d9-fba8316cef71");
    expect_guid(nt_eventsource_guid, NT_PROVIDER_SAMPLE_PROFILER,
                "84ad50b1-22f8-59cd-333e-718371a1925e");
}

TEST(eventsource_guid_ignores_ascii_case_and_leading_star)
{
    expect_guid(nt_eventsource_guid, "system.runtime", "49592c0f-5a05-516d-aa4b-a64e02026c89");
    expect_guid(nt_eventsource_guid, "*System.Runtime", "49592c0f-5a05-516d-aa4b-a64e02026c89");
}

TEST(eventsource_guid_distinguishes_names_and_sets_version)
{
    uint8_t a[16], b[16];

    nt_eventsource_guid("Provider-A", a);
    nt_eventsource_guid("Provider-B", b);
    ASSERT_TRUE(memcmp(a, b, 16) != 0);
    ASSERT_EQ(a[7] >> 4, 5); /* version-5 nibble, high byte of the third group */
    /* Non-ASCII names hash their UTF-16 units; case folding stays ASCII-only. */
    nt_eventsource_guid("\xC3\xA9v\xC3\xA9nement", a); /* "événement" */
    nt_eventsource_guid("\xC3\x89V\xC3\x89NEMENT", b); /* "ÉVÉNEMENT" */
    ASSERT_TRUE(memcmp(a, b, 16) != 0);
    /* Invalid UTF-8 must not crash and must be deterministic. */
    nt_eventsource_guid("bad\xFF", a);
    nt_eventsource_guid("bad\xFF", b);
    ASSERT_MEM_EQ(a, b, 16);
    nt_eventsource_guid(NULL, a);
    nt_eventsource_guid("", b);
    ASSERT_MEM_EQ(a, b, 16);
}

TEST(provider_guid_uses_traceevent_fixed_table)
{
    expect_guid(nt_provider_guid, NT_PROVIDER_SAMPLE_PROFILER,
                "3c530d44-97ae-513a-1e6d-783e8f8e03a9");
    expect_guid(nt_provider_guid, NT_PROVIDER_RUNTIME, "e13c0d23-ccbc-4e12-931b-d9cc2eee27e4");
    expect_guid(nt_provider_guid, NT_PROVIDER_RUNDOWN, "a669021c-c450-4609-a035-5af59af4df18");
    expect_guid(nt_provider_guid, "Microsoft-Windows-DotNETRuntimePrivate",
                "763fd754-7086-4dfe-95eb-c01a46faf4ca");
    expect_guid(nt_provider_guid, "Microsoft-Windows-DotNETRuntimeStress",
                "cc2bcbba-16b6-4cf3-8990-d74c2e8af500");
    expect_guid(nt_provider_guid, "System.Threading.Tasks.TplEventSource",
                "2e5dba47-a3d2-4d16-8ee0-6671ffdcd7b5");
    expect_guid(nt_provider_guid, "System.Diagnostics.Eventing.FrameworkEventSource",
                "8e9f5090-2d75-4d03-8a81-e5afbf85daf1");
    /* Everything else (and a differently-cased legacy name: TraceEvent compares exactly). */
    expect_guid(nt_provider_guid, NT_PROVIDER_EVENTPIPE, "92f528a6-f5b8-5160-a7ee-b33da7739e29");
    expect_guid(nt_provider_guid, "microsoft-dotnetcore-sampleprofiler",
                "84ad50b1-22f8-59cd-333e-718371a1925e");
}

TEST(provider_guid_of_empty_name_is_zero)
{
    static const uint8_t zero[16];
    uint8_t guid[16];

    memset(guid, 0xAA, sizeof(guid));
    nt_provider_guid("", guid);
    ASSERT_MEM_EQ(guid, zero, 16);
    memset(guid, 0xAA, sizeof(guid));
    nt_provider_guid(NULL, guid);
    ASSERT_MEM_EQ(guid, zero, 16);
}

TEST(guid_format_uses_dotnet_layout)
{
    static const uint8_t guid[16] = { 0x0f, 0x2c, 0x59, 0x49, 0x05, 0x5a, 0x6d, 0x51,
                                      0xaa, 0x4b, 0xa6, 0x4e, 0x02, 0x02, 0x6c, 0x89 };
    uint8_t computed[16];
    char text[37];

    nt_guid_format(guid, text);
    ASSERT_STR_EQ(text, "49592c0f-5a05-516d-aa4b-a64e02026c89");
    ASSERT_EQ(strlen(text), 36);
    nt_eventsource_guid("System.Runtime", computed);
    ASSERT_MEM_EQ(computed, guid, 16);
}

static const struct test_case cases[] = {
    TEST_CASE(sha1_matches_fips_vectors),
    TEST_CASE(sha1_handles_padding_boundaries),
    TEST_CASE(eventsource_guid_matches_known_providers),
    TEST_CASE(eventsource_guid_ignores_ascii_case_and_leading_star),
    TEST_CASE(eventsource_guid_distinguishes_names_and_sets_version),
    TEST_CASE(provider_guid_uses_traceevent_fixed_table),
    TEST_CASE(provider_guid_of_empty_name_is_zero),
    TEST_CASE(guid_format_uses_dotnet_layout),
};
TEST_MAIN(cases)
