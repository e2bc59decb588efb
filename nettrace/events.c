/* SPDX-License-Identifier: MIT */
/*
 * nettrace/events.c - descriptions and payload builders of the events TraceEvent knows without
 * metadata: SampleProfiler's ThreadSample, EventPipe's ProcessInfo, and the rundown events that
 * name code addresses. Context: any thread; no allocation.
 */
#include "nettrace/nettrace.h"

static const struct nt_field nt_process_info_fields[] = {
    { "CommandLine", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "OSInformation", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "ArchInformation", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
};

/*
 * Runtime-native events carry minimal metadata: provider, id, keywords, version and level, but
 * no name and no fields (dotnet/runtime#96365); consumers decode them by (provider, id, version).
 * Keywords are those the runtime uses, so a session's keyword filter treats them alike.
 */
static const struct nt_event_desc nt_known_events[NT_KNOWN_COUNT] = {
    [NT_KNOWN_THREAD_SAMPLE] = { NT_PROVIDER_SAMPLE_PROFILER, 0, "", 0, 0, 4, 0, NULL, 0, 0 },
    [NT_KNOWN_PROCESS_INFO] = { NT_PROVIDER_EVENTPIPE, 1, "ProcessInfo", 0, 1, 0, 0,
                                nt_process_info_fields, 3, 0 },
    /* Loader keyword 0x8 */
    [NT_KNOWN_MODULE_DC_END] = { NT_PROVIDER_RUNDOWN, 154, "", 0x8, 1, 4, 0, NULL, 0, 0 },
    /* Jit 0x10 | NGen 0x20 | Rundown Start/End */
    [NT_KNOWN_METHOD_DC_END] = { NT_PROVIDER_RUNDOWN, 144, "", 0x30, 1, 5, 0, NULL, 0, 0 },
    [NT_KNOWN_RUNDOWN_DC_END_COMPLETE] = { NT_PROVIDER_RUNDOWN, 146, "", 0x30, 1, 4, 0, NULL, 0,
                                           0 },
    [NT_KNOWN_RUNDOWN_DC_END_INIT] = { NT_PROVIDER_RUNDOWN, 148, "", 0x30, 1, 4, 0, NULL, 0, 0 },
};

const struct nt_event_desc *
nt_known_event_desc(enum nt_known_event which)
{
    if ((unsigned)which >= NT_KNOWN_COUNT) {
        return NULL;
    }
    return &nt_known_events[which];
}

void
nt_payload_process_info(struct nt_payload *p, const char *command_line, const char *os,
                        const char *arch)
{
    nt_payload_string(p, command_line);
    nt_payload_string(p, os);
    nt_payload_string(p, arch);
}

void
nt_payload_module_dc_end(struct nt_payload *p, uint64_t module_id, const char *il_path)
{
    nt_payload_u64(p, module_id);
    nt_payload_u64(p, 0); /* AssemblyID */
    nt_payload_u32(p, 0); /* ModuleFlags */
    nt_payload_u32(p, 0); /* Reserved1 */
    nt_payload_string(p, il_path);
    /* An empty native path: a non-empty one makes TraceLog look the module up by path. */
    nt_payload_string(p, "");
    nt_payload_u16(p, 0); /* ClrInstanceID */
}

void
nt_payload_method_dc_end(struct nt_payload *p, uint64_t module_id, uint64_t start, uint32_t size,
                         const char *ns, const char *name, const char *signature)
{
    nt_payload_u64(p, start); /* MethodID: unique per method, the start address is */
    nt_payload_u64(p, module_id);
    nt_payload_u64(p, start);
    nt_payload_u32(p, size);
    nt_payload_u32(p, 0); /* MethodToken */
    nt_payload_u32(p, 0); /* MethodFlags */
    nt_payload_string(p, ns);
    nt_payload_string(p, name);
    nt_payload_string(p, signature);
    nt_payload_u16(p, 0); /* ClrInstanceID */
}

void
nt_payload_rundown_complete(struct nt_payload *p)
{
    nt_payload_u16(p, 0);
}
