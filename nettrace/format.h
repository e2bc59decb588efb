/* SPDX-License-Identifier: MIT */
/*
 * nettrace/format.h - wire constants of the nettrace format, shared by the writer and the
 * reader. Each group names the section of the format notes (docs/nettrace-format.md of the
 * shared reference; docs/formats.md maps its sections to the public specification) it comes
 * from. Public: tools and tests may include it.
 */
#ifndef NT_FORMAT_H
#define NT_FORMAT_H

/* 3.1 Stream header: magic, then the FastSerialization signature (V4/V5). */
#define NT_MAGIC                  "Nettrace"
#define NT_MAGIC_LEN              8
#define NT_FAST_SERIALIZATION     "!FastSerialization.1"
#define NT_FAST_SERIALIZATION_LEN 20

/* 3.2 FastSerialization tags. */
enum nt_tag {
    NT_TAG_NULL_REFERENCE = 1,
    NT_TAG_BEGIN_OBJECT = 4, /* V3 only */
    NT_TAG_BEGIN_PRIVATE_OBJECT = 5,
    NT_TAG_END_OBJECT = 6,
};

/* 3.2 Object type names and versions (version, minimum reader version). */
#define NT_TYPE_NAME_TRACE    "Trace"
#define NT_TYPE_NAME_METADATA "MetadataBlock"
#define NT_TYPE_NAME_STACK    "StackBlock"
#define NT_TYPE_NAME_EVENT    "EventBlock"
#define NT_TYPE_NAME_SP       "SPBlock"
#define NT_TRACE_VERSION      4
#define NT_BLOCK_VERSION      2

/* 3.3 The Trace object payload is exactly this long. */
#define NT_TRACE_OBJECT_SIZE 48

/* 3.5 Event and metadata block header. */
#define NT_BLOCK_HEADER_SIZE     20
#define NT_BLOCK_FLAG_COMPRESSED 0x0001

/* 4.2 Compressed event header flags. */
enum nt_header_flag {
    NT_HDR_METADATA_ID = 0x01,
    NT_HDR_CAPTURE_THREAD_AND_SEQUENCE = 0x02,
    NT_HDR_THREAD_ID = 0x04,
    NT_HDR_STACK_ID = 0x08,
    NT_HDR_ACTIVITY_ID = 0x10, /* V6: label list id */
    NT_HDR_RELATED_ACTIVITY_ID = 0x20,
    NT_HDR_SORTED = 0x40,
    NT_HDR_PAYLOAD_SIZE = 0x80,
};

/* 5.1 V5 metadata tags after the V1 field list. */
enum nt_metadata_tag {
    NT_METADATA_TAG_OPCODE = 1,
    NT_METADATA_TAG_V2_PARAMS = 2,
};

/* 6 V6 block kinds (u32 header: size in the low 24 bits, kind in the high 8). */
enum nt_v6_block_kind {
    NT_V6_END_OF_STREAM = 0,
    NT_V6_TRACE = 1,
    NT_V6_EVENT = 2,
    NT_V6_METADATA = 3,
    NT_V6_SEQUENCE_POINT = 4,
    NT_V6_STACK = 5,
    NT_V6_THREAD = 6,
    NT_V6_REMOVE_THREAD = 7,
    NT_V6_LABEL_LIST = 8,
};

/* 9 SampleProfiler ThreadSample payload: one i32. */
enum nt_sample_type {
    NT_SAMPLE_ERROR = 0,
    NT_SAMPLE_EXTERNAL = 1, /* not running: blocked or in native code from the runtime's view */
    NT_SAMPLE_MANAGED = 2,  /* running: TraceEvent charges it as CPU time */
};

/*
 * pipeprof's CPU-mode "stopped running" marker that carries the stack the thread waits in: an
 * External ThreadSample whose payload has this second u32 after the type (readers of the type
 * alone, TraceEvent among them, see an ordinary waiting sample). It marks time off the CPU, not
 * a sample: pipeprof's own readers do not count it.
 */
#define NT_SAMPLE_WAIT_TAG 0x74696177u /* "wait" */

#endif /* NT_FORMAT_H */
