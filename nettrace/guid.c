/* SPDX-License-Identifier: MIT */
/*
 * nettrace/guid.c - provider GUIDs as TraceEvent derives them from the provider names of a
 * nettrace file (format doc section 10): a fixed table for the runtime's legacy providers and
 * the SampleProfiler, the EventSource name hash (SHA-1, version-5 nibble) for every other name.
 * Context: any thread; no allocation. It must agree with TraceEvent bit for bit, so it never
 * normalises names beyond what TraceEvent does (exact, case-sensitive table lookup).
 */
#include <stdio.h>
#include <string.h>

#include "nettrace/internal.h"
#include "nettrace/nettrace.h"
#include "nettrace/sha1.h"

/* A GUID as printed: xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx. */
struct nt_guid_fields {
    uint32_t a;
    uint16_t b;
    uint16_t c;
    uint8_t d[8];
};

struct nt_fixed_guid {
    const char *name;
    struct nt_guid_fields guid;
};

/*
 * TraceEvent's GetProviderGuidFromProviderName: providers that existed before the EventSource
 * naming convention keep their manifest GUIDs. The SampleProfiler entry is the one that matters
 * most: its name hash (84ad50b1-...) would not match TraceEvent's built-in parser.
 */
static const struct nt_fixed_guid nt_fixed_guids[] = {
    { "Microsoft-DotNETCore-SampleProfiler",
      { 0x3c530d44, 0x97ae, 0x513a, { 0x1e, 0x6d, 0x78, 0x3e, 0x8f, 0x8e, 0x03, 0xa9 } } },
    { "Microsoft-Windows-DotNETRuntime",
      { 0xe13c0d23, 0xccbc, 0x4e12, { 0x93, 0x1b, 0xd9, 0xcc, 0x2e, 0xee, 0x27, 0xe4 } } },
    { "Microsoft-Windows-DotNETRuntimeRundown",
      { 0xa669021c, 0xc450, 0x4609, { 0xa0, 0x35, 0x5a, 0xf5, 0x9a, 0xf4, 0xdf, 0x18 } } },
    { "Microsoft-Windows-DotNETRuntimePrivate",
      { 0x763fd754, 0x7086, 0x4dfe, { 0x95, 0xeb, 0xc0, 0x1a, 0x46, 0xfa, 0xf4, 0xca } } },
    { "Microsoft-Windows-DotNETRuntimeStress",
      { 0xcc2bcbba, 0x16b6, 0x4cf3, { 0x89, 0x90, 0xd7, 0x4c, 0x2e, 0x8a, 0xf5, 0x00 } } },
    { "System.Threading.Tasks.TplEventSource",
      { 0x2e5dba47, 0xa3d2, 0x4d16, { 0x8e, 0xe0, 0x66, 0x71, 0xff, 0xdc, 0xd7, 0xb5 } } },
    { "System.Diagnostics.Eventing.FrameworkEventSource",
      { 0x8e9f5090, 0x2d75, 0x4d03, { 0x8a, 0x81, 0xe5, 0xaf, 0xbf, 0x85, 0xda, 0xf1 } } },
};

/* EventSource's namespace GUID for name-based GUIDs, as raw bytes (format doc 10, step 2). */
static const uint8_t nt_eventsource_namespace[16] = {
    0x48, 0x2C, 0x2D, 0xB2, 0xC3, 0x90, 0x47, 0xC8, 0x87, 0xF8, 0x1A, 0x15, 0xBF, 0xC1, 0x30, 0xFB,
};

static void
nt_guid_sha1_unit(struct nt_sha1 *ctx, uint16_t unit)
{
    uint8_t be[2] = { (uint8_t)(unit >> 8), (uint8_t)unit };

    nt_sha1_update(ctx, be, sizeof(be));
}

void
nt_eventsource_guid(const char *name, uint8_t out[16])
{
    uint8_t digest[NT_SHA1_DIGEST_SIZE];
    struct nt_sha1 ctx;
    uint32_t cp;
    int rc;

    if (name == NULL) {
        name = "";
    }
    if (name[0] == '*') {
        name++;
    }
    nt_sha1_init(&ctx);
    nt_sha1_update(&ctx, nt_eventsource_namespace, sizeof(nt_eventsource_namespace));
    for (;;) {
        rc = nt_utf8_next(&name, &cp);
        if (rc == 0) {
            break;
        }
        if (rc < 0) {
            /* Like a UTF-8 decoder in .NET: each invalid byte becomes U+FFFD. */
            cp = 0xFFFD;
            name++;
        }
        if (cp >= 'a' && cp <= 'z') {
            cp -= 'a' - 'A';
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            nt_guid_sha1_unit(&ctx, (uint16_t)(0xD800 | (cp >> 10)));
            nt_guid_sha1_unit(&ctx, (uint16_t)(0xDC00 | (cp & 0x3FF)));
        } else {
            nt_guid_sha1_unit(&ctx, (uint16_t)cp);
        }
    }
    nt_sha1_final(&ctx, digest);
    memcpy(out, digest, 16);
    /* Version 5 in the high nibble of the third group's high byte (byte 7 in .NET layout). */
    out[7] = (uint8_t)((out[7] & 0x0F) | 0x50);
}

static void
nt_guid_from_fields(const struct nt_guid_fields *f, uint8_t out[16])
{
    nt_store_u32le(out, f->a);
    nt_store_u16le(out + 4, f->b);
    nt_store_u16le(out + 6, f->c);
    memcpy(out + 8, f->d, 8);
}

void
nt_provider_guid(const char *name, uint8_t out[16])
{
    size_t i;

    if (name == NULL || name[0] == '\0') {
        memset(out, 0, 16); /* TraceEvent: Guid.Empty for a missing name */
        return;
    }
    for (i = 0; i < PP_ARRAY_SIZE(nt_fixed_guids); i++) {
        if (strcmp(name, nt_fixed_guids[i].name) == 0) {
            nt_guid_from_fields(&nt_fixed_guids[i].guid, out);
            return;
        }
    }
    nt_eventsource_guid(name, out);
}

void
nt_guid_format(const uint8_t guid[16], char out[37])
{
    uint32_t a = (uint32_t)guid[0] | (uint32_t)guid[1] << 8 | (uint32_t)guid[2] << 16 |
                 (uint32_t)guid[3] << 24;
    unsigned b = (unsigned)guid[4] | (unsigned)guid[5] << 8;
    unsigned c = (unsigned)guid[6] | (unsigned)guid[7] << 8;

    snprintf(out, 37, "%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x", (unsigned)a, b, c,
             guid[8], guid[9], guid[10], guid[11], guid[12], guid[13], guid[14], guid[15]);
}
