/* SPDX-License-Identifier: MIT */
/*
 * nettrace/nettrace.h - libnettrace: a streaming writer for NetTrace V5 and a streaming reader
 * for V4, V5 and V6 (V3 "netperf" optional). Byte-level reference: docs/nettrace-format.md of
 * the shared notes, whose sections "format doc N" cites (docs/formats.md says what each covers
 * and links the public specification), and docs/architecture.md.
 *
 * The writer appends blocks to a sink and never seeks, so a file and a socket are the same to
 * it. Its memory is bounded by the block size plus the stack-intern table of one
 * sequence-point region, and with a reorder window by the events it holds (reorder_max_bytes).
 * The reader treats its input as hostile: a bad stream yields -EBADMSG and an error with the
 * byte offset and a reason, never a crash, an out-of-bounds read or an unbounded allocation.
 *
 * Context: any thread, one thread per object. Nothing here is async-signal-safe.
 * Dependencies: libc only.
 */
#ifndef NT_NETTRACE_H
#define NT_NETTRACE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/compiler.h"

/* ------------------------------------------------------------------------------------------ */
/* Types shared by the writer and the reader                                                  */
/* ------------------------------------------------------------------------------------------ */

/* Field type codes: System.TypeCode numbering as nettrace metadata uses it (format doc 5.2). */
enum nt_type {
    NT_TYPE_EMPTY = 0,
    NT_TYPE_OBJECT = 1,  /* nested fields, concatenated */
    NT_TYPE_BOOLEAN = 3, /* 4 bytes */
    NT_TYPE_CHAR = 4,    /* UTF-16 code unit, 2 bytes */
    NT_TYPE_SBYTE = 5,
    NT_TYPE_BYTE = 6,
    NT_TYPE_INT16 = 7,
    NT_TYPE_UINT16 = 8,
    NT_TYPE_INT32 = 9,
    NT_TYPE_UINT32 = 10,
    NT_TYPE_INT64 = 11,
    NT_TYPE_UINT64 = 12,
    NT_TYPE_SINGLE = 13,
    NT_TYPE_DOUBLE = 14,
    NT_TYPE_DECIMAL = 15,  /* 16 bytes */
    NT_TYPE_DATETIME = 16, /* 8 bytes, FILETIME as EventSource writes it */
    NT_TYPE_GUID = 17,     /* 16 bytes, .NET layout */
    NT_TYPE_STRING = 18,   /* UTF-16LE, NUL-terminated */
    NT_TYPE_ARRAY = 19,    /* u16 count, then elements (V5 V2Params, V6) */
    /* V6 only (reader) */
    NT_TYPE_VARINT = 20,
    NT_TYPE_VARUINT = 21,
    NT_TYPE_FIXED_ARRAY = 22,
    NT_TYPE_UTF8_CODE_UNIT = 23,
    NT_TYPE_RELLOC = 24,
    NT_TYPE_DATALOC = 25,
    NT_TYPE_BOOLEAN8 = 26,
};

/* One field description. Strings are UTF-8 (converted from UTF-16 by the reader). */
struct nt_field {
    const char *name;
    enum nt_type type;
    /* NT_TYPE_ARRAY / NT_TYPE_FIXED_ARRAY: the element type; otherwise NT_TYPE_EMPTY. */
    enum nt_type element_type;
    /* NT_TYPE_OBJECT (or an array of objects): the nested fields. */
    const struct nt_field *fields;
    uint32_t field_count;
    uint16_t fixed_count; /* NT_TYPE_FIXED_ARRAY (V6) element count */
};

/* Event metadata: what an EventSource manifest says about one event. */
struct nt_event_desc {
    const char *provider; /* UTF-8, e.g. "Microsoft-DotNETCore-SampleProfiler" */
    uint32_t event_id;
    const char *name; /* UTF-8; "" for runtime-native events */
    uint64_t keywords;
    uint32_t version;
    uint32_t level; /* 0 LogAlways, 1 Critical ... 5 Verbose */
    uint8_t opcode; /* 0: none (no opcode tag is written) */
    const struct nt_field *fields;
    uint32_t field_count;
    /* Reader only: the metadata id this record defines. Ignored by the writer. */
    uint32_t metadata_id;
};

/*
 * One event. The writer reads it; the reader fills it. Timestamps are in the trace's ticks
 * (the writer uses CLOCK_MONOTONIC nanoseconds, frequency 1e9).
 */
struct nt_event {
    uint32_t metadata_id;       /* 0 is reserved for metadata records */
    uint32_t sequence;          /* reader: decoded; writer: assigned per capture thread */
    uint64_t thread_id;         /* the thread the event is about (OS tid) */
    uint64_t capture_thread_id; /* the thread that wrote it (for samples: the sampler) */
    uint32_t processor;         /* 0xFFFFFFFF when unknown */
    uint64_t timestamp;
    uint8_t activity_id[16];
    uint8_t related_activity_id[16];
    int is_sorted; /* reader: the header's IsSorted flag; writer: ignored (it decides) */
    /* Instruction pointers, leaf first; stack_depth 0 means no stack. */
    const uint64_t *stack;
    uint32_t stack_depth;
    uint32_t stack_id; /* reader: the id in the file; writer: ignored (interned) */
    const uint8_t *payload;
    uint32_t payload_size;
    /* Reader only: the metadata of metadata_id, or NULL when the file never defined it. */
    const struct nt_event_desc *desc;
};

/* ------------------------------------------------------------------------------------------ */
/* GUIDs                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/*
 * The GUID EventSource derives from a provider name: SHA-1 over a fixed namespace and the
 * upper-cased name in UTF-16BE, version-5 nibble (format doc section 10). out is in .NET byte
 * layout. A leading '*' is dropped. Only ASCII letters are upper-cased.
 */
void nt_eventsource_guid(const char *name, uint8_t out[16]);

/*
 * The GUID TraceEvent uses for a provider name: the runtime's legacy providers and the
 * SampleProfiler have fixed GUIDs; every other name gets nt_eventsource_guid().
 */
void nt_provider_guid(const char *name, uint8_t out[16]);

/* Formats a .NET-layout GUID as "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (37 bytes with NUL). */
void nt_guid_format(const uint8_t guid[16], char out[37]);

/* ------------------------------------------------------------------------------------------ */
/* Writer (NetTrace V5)                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Destination of serialized bytes. write() consumes all of len or fails with a negative errno. */
struct nt_sink {
    int (*write)(void *ctx, const void *buf, size_t len);
    void *ctx;
};

/* A sink that writes to a file descriptor (file, pipe or blocking socket), retrying EINTR. */
void nt_sink_fd(struct nt_sink *sink, int *fd);

struct nt_writer_options {
    uint32_t process_id;           /* 0: getpid() */
    uint32_t number_of_processors; /* 0: the CPUs it may run on (sched_getaffinity) */
    uint32_t sampling_interval_ns; /* the Trace object's ExpectedCPUSamplingRate; 0: 1 ms */
    uint64_t sync_time_ticks;      /* 0: now (nt_clock_now()) */
    int64_t sync_time_unix_ns;     /* 0: now (CLOCK_REALTIME); the Trace object's SYSTEMTIME */
    size_t block_bytes;            /* flush a block at this size; 0: 100 KB (and at most 1 MB) */
    uint64_t flush_interval_ns;    /* nt_writer_poll() flushes after this; 0: 100 ms */
    uint64_t sequence_point_bytes; /* a sequence point after this many bytes; 0: 4 MB */
    /*
     * 0: events are written as they come, and one older than the last written is clamped
     * forward to its time. Otherwise the writer puts events in timestamp order itself: it holds
     * each event until one at least this much newer was written to it (or nt_writer_poll()'s
     * clock passed it by this much), so streams that arrive up to this late still merge in
     * order. An event older than the last event or sequence point written (it came later than
     * the window, or the byte cap, poll or a sequence point wrote newer ones first; or it is
     * before the sync time) is late: written with its true time and IsSorted clear (format doc
     * 4.3: TraceEvent places it at the next sorted event), and counted in nt_writer_stats.late.
     */
    uint64_t reorder_window_ns;
    /*
     * With a reorder window: the most the held events may cost (their copies of the header,
     * stack and payload, and the queue's index); past it the oldest are written early.
     * 0: 64 MB. Held events cost at most this plus one event.
     */
    size_t reorder_max_bytes;
};

struct nt_writer; /* opaque; nettrace/writer.c */

/*
 * Creates a writer and writes the stream header and the Trace object through sink.
 * Returns 0 and stores the writer in *out, or a negative errno (the sink's error included).
 * Ownership: caller owns *out and releases it with nt_writer_free(). The sink is borrowed and
 * must outlive the writer. opts may be NULL for all defaults.
 */
PP_MUST_USE int nt_writer_new(const struct nt_writer_options *opts, const struct nt_sink *sink,
                              struct nt_writer **out);

/*
 * Defines an event and stores its metadata id (1, 2, ...) in *metadata_id. Defining the same
 * (provider, event id, version, name) twice returns the same id. Returns 0, -EINVAL for a
 * description that cannot be encoded (nesting deeper than 8, a metadata record over 64 KB),
 * or the sink's error. The description is copied.
 */
PP_MUST_USE int nt_writer_define(struct nt_writer *w, const struct nt_event_desc *desc,
                                 uint32_t *metadata_id);

/*
 * Appends one event. The stack is interned in the current sequence-point region, the sequence
 * number is the capture thread's next one (given when the event is written, so in file order),
 * and the header is compressed against the previous event of the block.
 * Without a reorder window the event is written now; events should come in timestamp order,
 * and one older than the last written is clamped forward so that readers that merge by time
 * stay correct. With a window the event is copied and held (ev's pointers are not kept), then
 * every held event that the window releases (see reorder_window_ns and reorder_max_bytes) is
 * written, oldest first; events with equal timestamps keep the order they came in.
 * Returns 0, -EINVAL (unknown metadata id, payload over 64 KB, stack over NT_MAX_STACK_DEPTH
 * frames; checked first, so nothing is held), -ENOMEM, or the sink's error, which is sticky:
 * every later call returns it. With a window, -ENOMEM can mean two things: copying ev failed
 * (ev was not taken), or ev was taken and writing the released events failed (they stay held,
 * oldest first, for the next call). Neither loses a held event or sets a sticky error.
 */
PP_MUST_USE int nt_writer_write(struct nt_writer *w, const struct nt_event *ev);

/*
 * Records that count events of capture_thread_id were lost before they reached the writer. Its
 * sequence number advances by count, so every reader sees the gap (TraceEvent's EventsLost
 * too): losses before the thread's first event are numbered right after that event, those of a
 * thread that writes none at the end's sequence point. Returns 0 or -EINVAL.
 */
PP_MUST_USE int nt_writer_note_lost(struct nt_writer *w, uint64_t capture_thread_id,
                                    uint32_t count);

/*
 * With a reorder window: the window releases no held event newer than limit, whatever arrives
 * and whatever nt_writer_poll()'s clock says, until a later call raises it. The byte cap
 * (reorder_max_bytes), a sequence point and finish still write them. A writer that merges
 * sources which may lag sets it to the time up to which every source has delivered (ipc/merge.c's
 * watermark). UINT64_MAX, the default, leaves the window alone.
 */
void nt_writer_set_release_limit(struct nt_writer *w, uint64_t limit);

/*
 * Writes the pending metadata, stack and event blocks (in that order). Events held by a reorder
 * window stay held: only what the window already released is written, so a flush never makes
 * a later event late.
 */
PP_MUST_USE int nt_writer_flush(struct nt_writer *w);

/*
 * With a reorder window, first writes the held events with timestamps <= now - window, so a
 * stream that has gone quiet still drains. Then flushes when flush_interval_ns has passed since
 * the last flush. now is nt_clock_now().
 */
PP_MUST_USE int nt_writer_poll(struct nt_writer *w, uint64_t now);

/*
 * Writes every held event, flushes, writes a sequence-point block and restarts stack ids. The
 * sequence point's timestamp is above every event written before it.
 */
PP_MUST_USE int nt_writer_sequence_point(struct nt_writer *w);

/*
 * Writes every held event, flushes, writes a final sequence point and the end-of-stream tag.
 * After it, only nt_writer_free() may be called. Returns 0, -ENOMEM or the sink's error.
 */
PP_MUST_USE int nt_writer_finish(struct nt_writer *w);

struct nt_writer_stats {
    uint64_t events;          /* events written */
    uint64_t lost;            /* events reported through nt_writer_note_lost() */
    uint64_t stacks;          /* distinct stacks written (summed over regions) */
    uint64_t bytes;           /* bytes handed to the sink */
    uint64_t blocks;          /* blocks written */
    uint64_t sequence_points; /* sequence-point blocks written */
    uint64_t late;            /* with a reorder window: events written late (see
                                 reorder_window_ns), with their true time, IsSorted clear */
    uint64_t held_bytes_max;  /* with a reorder window: the most its held events cost at once
                                 (see reorder_max_bytes) */
};
void nt_writer_get_stats(const struct nt_writer *w, struct nt_writer_stats *out);

/* Releases w without flushing; events held by a reorder window are dropped. Accepts NULL. */
void nt_writer_free(struct nt_writer *w);

/* CLOCK_MONOTONIC in nanoseconds: the writer's tick. */
uint64_t nt_clock_now(void);

#define NT_MAX_STACK_DEPTH 512
#define NT_MAX_PAYLOAD     65000 /* TraceEvent's EVENT_RECORD size field is 16-bit */

/*
 * Payload builder over caller storage. No allocation. The first failure (-ENOSPC, -EINVAL for
 * invalid UTF-8) is sticky in err; check it once at the end.
 */
struct nt_payload {
    uint8_t *buf;
    size_t cap;
    size_t len;
    int err;
};
void nt_payload_init(struct nt_payload *p, void *buf, size_t cap);
void nt_payload_bytes(struct nt_payload *p, const void *bytes, size_t len);
void nt_payload_u8(struct nt_payload *p, uint8_t v);
void nt_payload_u16(struct nt_payload *p, uint16_t v);
void nt_payload_u32(struct nt_payload *p, uint32_t v);
void nt_payload_u64(struct nt_payload *p, uint64_t v);
void nt_payload_f32(struct nt_payload *p, float v);
void nt_payload_f64(struct nt_payload *p, double v);
void nt_payload_guid(struct nt_payload *p, const uint8_t guid[16]);
/* A UTF-8 string as UTF-16LE with a NUL terminator (NT_TYPE_STRING). NULL is written as "". */
void nt_payload_string(struct nt_payload *p, const char *utf8);

/*
 * Writes one event of desc without a stack (nt_writer_define(), then nt_writer_write()): p's
 * bytes about thread tid, written by capture_tid, at ts, on no known processor. Returns p's error
 * when building it failed (-ENOSPC: too long), else nt_writer_define()'s or nt_writer_write()'s.
 */
PP_MUST_USE int nt_writer_write_payload(struct nt_writer *w, const struct nt_event_desc *desc,
                                        uint64_t tid, uint64_t capture_tid, uint64_t ts,
                                        const struct nt_payload *p);

/* ------------------------------------------------------------------------------------------ */
/* Reader (V4, V5, V6; V3 optional)                                                           */
/* ------------------------------------------------------------------------------------------ */

/* Source of bytes: read() returns the count read (> 0), 0 at end of input, or a negative errno. */
struct nt_source {
    ssize_t (*read)(void *ctx, void *buf, size_t len);
    void *ctx;
};

/* A source over a file descriptor (file or pipe), retrying EINTR. */
void nt_source_fd(struct nt_source *src, int *fd);

/* Resource limits; a zeroed struct (or NULL) means the defaults in brackets. */
struct nt_reader_limits {
    size_t max_block_bytes;    /* [64 MB] largest block accepted */
    size_t max_metadata;       /* [1 M] metadata records */
    size_t max_metadata_bytes; /* [256 MB] decoded metadata held at once */
    size_t max_stack_bytes;    /* [512 MB] stack bytes held for one sequence-point region */
};

struct nt_trace_info {
    uint32_t format_version; /* 3, 4 (V4/V5 container) or 6 */
    int16_t sync_time[8];    /* SYSTEMTIME, UTC: year, month, weekday, day, h, m, s, ms */
    uint64_t sync_time_ticks;
    uint64_t ticks_per_second;
    uint32_t pointer_size;
    uint32_t process_id;
    uint32_t number_of_processors;
    uint32_t expected_cpu_sampling_rate;
};

struct nt_reader_error {
    uint64_t offset;    /* byte offset in the stream where the problem was found */
    const char *reason; /* static string */
    int truncated;      /* 1: the input ended early (a writer that died), not malformed bytes;
                           every event before offset was returned intact */
};

struct nt_reader_stats {
    uint64_t bytes;           /* consumed so far */
    uint64_t events;          /* events returned, metadata records excluded */
    uint64_t lost_events;     /* from sequence-number gaps and sequence points */
    uint64_t stacks;          /* stack records read */
    uint64_t metadata;        /* metadata records read */
    uint64_t blocks;          /* blocks read */
    uint64_t sequence_points; /* sequence-point blocks read */
};

struct nt_reader; /* opaque; nettrace/reader.c */

/*
 * Creates a reader and reads the stream header (and, for V4/V5, the Trace object).
 * Returns 0 and stores the reader in *out, -EBADMSG for input that is not a trace (see
 * nt_reader_get_error() on the reader, which is still returned in *out in that case), or another
 * negative errno. Ownership: caller owns *out (also on -EBADMSG) and releases it with
 * nt_reader_free(). src is borrowed and must outlive the reader. limits may be NULL.
 */
PP_MUST_USE int nt_reader_new(const struct nt_source *src, const struct nt_reader_limits *limits,
                              struct nt_reader **out);

/* The trace header. Valid after nt_reader_new() succeeded. */
const struct nt_trace_info *nt_reader_info(const struct nt_reader *r);

/* The header's SYSTEMTIME as nanoseconds since 1970, UTC, to its millisecond: 0, -EINVAL when
 * its fields make no date (a month of 13, a day of 0, ...), or -ERANGE for a date int64
 * nanoseconds cannot hold (before 1677 or after 2262). */
PP_MUST_USE int nt_trace_info_unix_ns(const struct nt_trace_info *info, int64_t *out);

/* Options for a writer whose trace goes on from info's (a copy, a merge, a rewrite): the same
 * process, processors, sampling interval and sync time (its ticks and its SYSTEMTIME, so that
 * events keep their wall-clock times), the rest 0 (the defaults). */
void nt_writer_options_from_info(struct nt_writer_options *o, const struct nt_trace_info *info);

/*
 * Reads the next event in file order (metadata records are consumed internally and not
 * returned). Returns 1 and fills *ev, 0 at the end of the stream, or a negative errno
 * (-EBADMSG for malformed input; see nt_reader_get_error()). The pointers in *ev (stack,
 * payload, desc) stay valid until the next call.
 */
PP_MUST_USE int nt_reader_next(struct nt_reader *r, struct nt_event *ev);

/* The metadata record with this id, or NULL. Valid until the reader is freed. */
const struct nt_event_desc *nt_reader_metadata(const struct nt_reader *r, uint32_t metadata_id);

void nt_reader_get_error(const struct nt_reader *r, struct nt_reader_error *out);
void nt_reader_get_stats(const struct nt_reader *r, struct nt_reader_stats *out);

/* Releases r. Accepts NULL. */
void nt_reader_free(struct nt_reader *r);

/* ------------------------------------------------------------------------------------------ */
/* Generic payload decoding                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* One decoded value, as nt_payload_decode() reports it. */
struct nt_value {
    const struct nt_field *field; /* its description (for array elements: the array's) */
    enum nt_type type;            /* the value's own type (an element's type inside arrays) */
    uint32_t depth;               /* 0 for top-level fields */
    uint32_t index;               /* position inside the enclosing array, else 0 */
    int64_t i;                    /* signed integers, BOOLEAN, CHAR */
    uint64_t u;                   /* unsigned integers, DATETIME */
    double f;                     /* SINGLE, DOUBLE */
    const uint8_t *data;          /* raw bytes inside the payload (strings: UTF-16LE w/o NUL) */
    uint32_t size;                /* bytes at data */
    uint32_t count;               /* ARRAY / FIXED_ARRAY / OBJECT: elements or fields */
};

/* Called once per value, depth first. Arrays and objects are reported before their elements. */
typedef int (*nt_value_fn)(void *ctx, const struct nt_value *v);

/*
 * Walks the payload of an event with desc's fields. Returns 0, -EBADMSG when the payload is
 * shorter than its fields need, or the callback's non-zero return. Extra trailing payload bytes
 * are not an error (runtime events often carry more fields than their metadata lists).
 */
PP_MUST_USE int nt_payload_decode(const struct nt_event_desc *desc, const uint8_t *payload,
                                  uint32_t size, nt_value_fn fn, void *ctx);

/*
 * Formats the fields as `Name=value Name2=[1,2] Name3="text"` into out (always NUL-terminated
 * when cap > 0). Returns the length it needed (like snprintf), or a negative errno.
 */
int nt_payload_format(const struct nt_event_desc *desc, const uint8_t *payload, uint32_t size,
                      char *out, size_t cap);

/* Converts UTF-16LE (len bytes, stops at a NUL) to UTF-8 in out; like snprintf's return. */
size_t nt_utf16_to_utf8(const uint8_t *utf16, size_t len, char *out, size_t cap);

/* ------------------------------------------------------------------------------------------ */
/* Well-known events (nettrace/events.c)                                                      */
/* ------------------------------------------------------------------------------------------ */

/*
 * Events that TraceEvent decodes with built-in knowledge, described with the minimal metadata
 * the runtime itself writes (format doc 5.1, 8, 9). Payload layouts are in the builders below.
 */
enum nt_known_event {
    NT_KNOWN_THREAD_SAMPLE,           /* Microsoft-DotNETCore-SampleProfiler 0: i32 type */
    NT_KNOWN_PROCESS_INFO,            /* Microsoft-DotNETCore-EventPipe 1 "ProcessInfo" */
    NT_KNOWN_MODULE_DC_END,           /* Microsoft-Windows-DotNETRuntimeRundown 154, version 1 */
    NT_KNOWN_METHOD_DC_END,           /* Microsoft-Windows-DotNETRuntimeRundown 144, version 1 */
    NT_KNOWN_RUNDOWN_DC_END_COMPLETE, /* Microsoft-Windows-DotNETRuntimeRundown 146 */
    NT_KNOWN_RUNDOWN_DC_END_INIT,     /* Microsoft-Windows-DotNETRuntimeRundown 148 */
    NT_KNOWN_COUNT,
};

#define NT_PROVIDER_SAMPLE_PROFILER "Microsoft-DotNETCore-SampleProfiler"
#define NT_PROVIDER_EVENTPIPE       "Microsoft-DotNETCore-EventPipe"
#define NT_PROVIDER_RUNTIME         "Microsoft-Windows-DotNETRuntime"
#define NT_PROVIDER_RUNDOWN         "Microsoft-Windows-DotNETRuntimeRundown"

/*
 * The name TraceEvent (and so PerfView and dotnet-trace) gives an event of the runtime's own
 * providers (the runtime, its rundown and private providers, SampleProfiler), whose metadata
 * carries no name: "GC/Start", "Method/DCStopVerbose". NULL for any other (provider, id).
 * Static storage (nettrace/runtime-names.c, generated from TraceEvent's parsers).
 */
const char *nt_runtime_event_name(const char *provider, uint32_t event_id);

/* The description of a well-known event; static storage. */
const struct nt_event_desc *nt_known_event_desc(enum nt_known_event which);

/* ProcessInfo: CommandLine, OSInformation, ArchInformation (UTF-16 strings). */
void nt_payload_process_info(struct nt_payload *p, const char *command_line, const char *os,
                             const char *arch);

/*
 * ModuleDCEnd, version 1: ModuleID, AssemblyID, ModuleFlags, reserved, ModuleILPath,
 * ModuleNativePath, ClrInstanceID. TraceEvent names the module after il_path's file name.
 */
void nt_payload_module_dc_end(struct nt_payload *p, uint64_t module_id, const char *il_path);

/*
 * MethodDCEndVerbose, version 1: MethodID, ModuleID, MethodStartAddress, MethodSize,
 * MethodToken, MethodFlags, MethodNamespace, MethodName, MethodSignature, ClrInstanceID.
 * TraceEvent resolves every sampled address in [start, start + size) to namespace.name.
 */
void nt_payload_method_dc_end(struct nt_payload *p, uint64_t module_id, uint64_t start,
                              uint32_t size, const char *ns, const char *name,
                              const char *signature);

/* DCEndComplete, version 1: ClrInstanceID. */
/* MethodDCEndComplete (146) and MethodDCEndInit (148): u16 ClrInstanceID. */
void nt_payload_rundown_complete(struct nt_payload *p);

#endif /* NT_NETTRACE_H */
