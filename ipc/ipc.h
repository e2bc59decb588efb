/* SPDX-License-Identifier: MIT */
/*
 * ipc/ipc.h - pp_ipc: the .NET diagnostic IPC protocol, as a pure codec (protocol.c, ports.c:
 * no I/O, fuzzable) and as a server that impersonates the runtime's diagnostic server (server.c,
 * conn.c, session.c: libuv, on its own thread). Byte reference: the shared ipc-protocol.md, whose
 * sections the comments cite (docs/formats.md maps them to dotnet/diagnostics' public
 * ipc-protocol.md); the design (threads, state machine, limits, environment) is in docs/ipc.md.
 *
 * Codec functions work on caller buffers, never allocate except where a function says so, and
 * treat every input as hostile: they return -EBADMSG (malformed), -EPROTO (wrong magic) or
 * -ENOSPC (output too small) and never read outside what they were given.
 *
 * The server owns one thread running one uv_loop. Every callback of struct ipc_event_source runs
 * on that thread. Nothing here is async-signal-safe.
 */
#ifndef IPC_IPC_H
#define IPC_IPC_H

#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

struct nt_writer;

/* ------------------------------------------------------------------------------------------ */
/* Wire constants (ipc-protocol.md sections 4-6, 9.2)                                          */
/* ------------------------------------------------------------------------------------------ */

#define IPC_MAGIC           "DOTNET_IPC_V1" /* 14 bytes on the wire with the NUL */
#define IPC_MAGIC_LEN       14
#define IPC_HEADER_SIZE     20
#define IPC_MAX_MESSAGE     65535 /* the u16 size field counts header + payload */
#define IPC_MAX_PAYLOAD     (IPC_MAX_MESSAGE - IPC_HEADER_SIZE)
#define IPC_ADVERTISE_SIZE  34
#define IPC_ADVERTISE_MAGIC "ADVR_V1" /* 8 bytes with the NUL */
#define IPC_MAX_PROVIDERS   1000      /* the runtime's limit per CollectTracing */

/*
 * The advertise's last u16, which the runtime sends as 0. pipeprof's server sets this bit when its
 * start-up is held only until the first session on the port has started
 * (PIPEPROF_RESUME_AT_SESSION, which `pipeprof record` sets): the tool then needs no ResumeRuntime,
 * and no connection for it.
 */
#define IPC_ADVERTISE_RESUMES_AT_SESSION 0x0001u
/*
 * Set by a process that started its session by itself (PIPEPROF_RECORD_LAZY, set by `pipeprof
 * record` for the children of its tree) and connects only once that session has a sample: the
 * advertise is followed at once, on the same connection, by what a CollectTracing would have been
 * answered with (the OK response with the session's id, then the nettrace stream). The tool sends
 * no command on it.
 */
#define IPC_ADVERTISE_STREAM_FOLLOWS     0x0002u

enum ipc_command_set {
    IPC_SET_DUMP = 0x01,
    IPC_SET_EVENTPIPE = 0x02,
    IPC_SET_PROFILER = 0x03,
    IPC_SET_PROCESS = 0x04,
    IPC_SET_SERVER = 0xFF, /* responses */
};

enum ipc_eventpipe_command {
    IPC_EP_STOP_TRACING = 0x01,
    IPC_EP_COLLECT_TRACING = 0x02,  /* v1 */
    IPC_EP_COLLECT_TRACING2 = 0x03, /* + requestRundown: dotnet-trace's default */
    IPC_EP_COLLECT_TRACING3 = 0x04, /* + requestStackwalk */
    IPC_EP_COLLECT_TRACING4 = 0x05, /* u64 rundownKeyword replaces the bool */
    IPC_EP_COLLECT_TRACING5 = 0x06, /* session_type prefix, per-provider event filter */
    IPC_EP_COLLECT_TRACING6 = 0x07, /* v5 + trailing u32 bufferMode */
};

enum ipc_process_command {
    IPC_PROC_INFO = 0x00,
    IPC_PROC_RESUME_RUNTIME = 0x01,
    IPC_PROC_ENVIRONMENT = 0x02,
    IPC_PROC_SET_ENV = 0x03,
    IPC_PROC_INFO2 = 0x04,
    IPC_PROC_ENABLE_PERFMAP = 0x05,
    IPC_PROC_DISABLE_PERFMAP = 0x06,
    IPC_PROC_APPLY_STARTUP_HOOK = 0x07,
    IPC_PROC_INFO3 = 0x08,
};

enum ipc_response_id {
    IPC_RESPONSE_OK = 0x00,
    IPC_RESPONSE_ERROR = 0xFF,
};

/* HRESULTs carried by an error response (section 5). */
#define IPC_HR_OK              0x00000000u
#define IPC_HR_BAD_ENCODING    0x80131384u
#define IPC_HR_UNKNOWN_COMMAND 0x80131385u
#define IPC_HR_UNKNOWN_MAGIC   0x80131386u
#define IPC_HR_NOTSUPPORTED    0x80131515u
#define IPC_HR_FAIL            0x80004005u
#define IPC_HR_INVALIDARG      0x80070057u
/* pipeprof's own: HRESULT_FROM_WIN32(ERROR_BUSY), sent to a connection above the server's cap
 * before it is closed (the runtime has no cap), so the client can say why. */
#define IPC_HR_BUSY            0x800700AAu

/* The rundown keyword the runtime uses when a client asks for "rundown" (section 7.1). */
#define IPC_DEFAULT_RUNDOWN_KEYWORD 0x80020139ull

/* ------------------------------------------------------------------------------------------ */
/* Codec: header, responses (ipc/protocol.c)                                                  */
/* ------------------------------------------------------------------------------------------ */

struct ipc_header {
    uint16_t size; /* header + payload */
    uint8_t command_set;
    uint8_t command_id;
    uint16_t reserved;
};

/*
 * Decodes the 20-byte header. Returns 0; -EBADMSG when len < 20 or size < 20 (checked first, as
 * the runtime does); -EPROTO when the magic (with its NUL) differs. *out is filled whenever
 * len >= 20. The runtime reads the whole payload before it reports a bad magic.
 */
PP_MUST_USE int ipc_header_decode(const uint8_t *buf, size_t len, struct ipc_header *out);

/* Writes a header with the magic. */
void ipc_header_encode(uint8_t out[IPC_HEADER_SIZE], uint16_t size, uint8_t command_set,
                       uint8_t command_id);

/*
 * Maps a negative errno of the codec or of a handler to the HRESULT the runtime would send:
 * -EPROTO -> UNKNOWN_MAGIC, -ENOTSUP -> UNKNOWN_COMMAND, -EBADMSG/-EINVAL -> BAD_ENCODING,
 * anything else -> FAIL. The only place where errno values become wire errors.
 */
uint32_t ipc_errno_to_hresult(int err);

/* Response builders; each returns the message size (24 or 28). */
size_t ipc_error_encode(uint8_t out[24], uint32_t hresult);
size_t ipc_ok_u64_encode(uint8_t out[28], uint64_t value);
size_t ipc_ok_i32_encode(uint8_t out[24], int32_t value);

/*
 * A decoded response: what the client checks. status is IPC_RESPONSE_OK or ERROR (or another
 * byte, which clients reject). For errors, hresult is the payload's first u32; for OK with 8
 * payload bytes, value is the u64 (session id).
 */
struct ipc_response {
    struct ipc_header header;
    uint8_t status;
    uint32_t hresult;
    uint64_t value;
    const uint8_t *payload; /* view into the input */
    size_t payload_len;
};

/* Decodes a complete response message (header + size-20 payload bytes). -EBADMSG if short. */
PP_MUST_USE int ipc_response_decode(const uint8_t *buf, size_t len, struct ipc_response *out);

/* ------------------------------------------------------------------------------------------ */
/* Codec: strings                                                                             */
/* ------------------------------------------------------------------------------------------ */

/*
 * Reads a wire string (u32 charCount incl. NUL, UTF-16LE) at *pos of buf[0, len) and converts it
 * to UTF-8 in a malloc'd string stored in *out (NULL for charCount 0). Lone surrogates become
 * U+FFFD. Returns 0, -EBADMSG (short, missing NUL) or -ENOMEM.
 * Ownership: caller frees *out.
 */
PP_MUST_USE int ipc_string_decode(const uint8_t *buf, size_t len, size_t *pos, char **out);

/*
 * Appends a UTF-8 string as a wire string at *pos of out[0, cap). NULL is written as "" (never
 * charCount 0, which clients reject). Invalid UTF-8 bytes become U+FFFD. Returns 0 or -ENOSPC.
 */
PP_MUST_USE int ipc_string_encode(uint8_t *out, size_t cap, size_t *pos, const char *utf8);

/* ------------------------------------------------------------------------------------------ */
/* Codec: EventPipe commands                                                                  */
/* ------------------------------------------------------------------------------------------ */

struct ipc_provider {
    uint64_t keywords;
    uint32_t level; /* 0 LogAlways ... 5 Verbose */
    char *name;     /* UTF-8, never NULL or empty after a successful decode */
    char *args;     /* UTF-8 filter data "k=v;k2=v2", or NULL */
    /* CollectTracing5/6 event filter: enable=1 allow-list, enable=0 with ids deny-list. */
    uint8_t filter_enable;
    uint32_t *event_ids;
    uint32_t event_id_count;
};

struct ipc_collect {
    uint8_t command_id;    /* IPC_EP_COLLECT_TRACING .. 6: which layout */
    uint32_t session_type; /* v5/6: 0 streaming (the only one served) */
    uint32_t buffer_mb;
    uint32_t format; /* 1 NetTrace */
    uint64_t rundown_keyword;
    uint8_t request_rundown; /* derived for v4+: rundown_keyword != 0 */
    uint8_t request_stackwalk;
    uint32_t buffer_mode; /* v6: 0 drop, 1 block */
    struct ipc_provider *providers;
    uint32_t provider_count;
};

/*
 * Decodes a CollectTracing payload of the version command_id names, applying the runtime's
 * derived defaults and validation (buffer > 0, format < 2, 1..1000 providers, level <= 5,
 * non-empty names, v5 session_type 0). Returns 0, -EBADMSG (malformed or invalid), -ENOTSUP
 * (session_type 1, user_events, or an unknown command id) or -ENOMEM.
 * Ownership: *out owns its providers; release with ipc_collect_fini(), also after a failure.
 */
PP_MUST_USE int ipc_collect_decode(uint8_t command_id, const uint8_t *payload, size_t len,
                                   struct ipc_collect *out);
void ipc_collect_fini(struct ipc_collect *c);

/*
 * Encodes a complete CollectTracing request (header included) in c->command_id's layout.
 * Returns the message size, -ENOSPC or -EINVAL (unknown version, > 1000 providers).
 */
PP_MUST_USE int ipc_collect_encode(const struct ipc_collect *c, uint8_t *out, size_t cap);

/* Encodes StopTracing(session_id): 28 bytes. */
size_t ipc_stop_encode(uint8_t out[28], uint64_t session_id);

/* Decodes the StopTracing payload. Returns 0 or -EBADMSG (shorter than 8 bytes). */
PP_MUST_USE int ipc_stop_decode(const uint8_t *payload, size_t len, uint64_t *session_id);

/*
 * Parses dotnet-trace's provider syntax into c (appending): "Name[:keywords[:level[:args]]]"
 * entries separated by ','. keywords is hex (0x optional) and defaults to 0; level is a number
 * 0-5 or a name (LogAlways, Critical, Error, Warning, Informational, Verbose) and defaults to 4;
 * args are kept verbatim ("k=v;k2=v2", quotes around values allowed). Returns 0, -EINVAL with a
 * static reason in *why, or -ENOMEM. Ownership: as ipc_collect_decode.
 */
PP_MUST_USE int ipc_providers_parse(const char *spec, struct ipc_collect *c, const char **why);

/* ------------------------------------------------------------------------------------------ */
/* Codec: process commands                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* What ProcessInfo 1/2/3 report. Strings are UTF-8. */
struct ipc_process_info {
    uint64_t pid;
    uint8_t cookie[16];
    const char *command_line;
    const char *os;
    const char *arch;
    const char *entrypoint_assembly; /* v2+ */
    const char *product_version;     /* v2+ */
    const char *runtime_id;          /* v3 */
};

/*
 * Encodes the complete OK response to ProcessInfo (version 1), ProcessInfo2 (2) or
 * ProcessInfo3 (3). The command line is truncated so that the message fits in 64 KB.
 * Returns the message size, -EINVAL (version) or -ENOSPC.
 */
PP_MUST_USE int ipc_process_info_encode(const struct ipc_process_info *pi, int version,
                                        uint8_t *out, size_t cap);

/*
 * Decodes a ProcessInfo 1/2/3 response payload (what a client reads). Strings are malloc'd
 * UTF-8 and must be freed with ipc_process_info_fini(). Returns 0, -EBADMSG or -ENOMEM.
 */
PP_MUST_USE int ipc_process_info_decode(const uint8_t *payload, size_t len, int version,
                                        struct ipc_process_info *out);
void ipc_process_info_fini(struct ipc_process_info *pi);

/*
 * Encodes the reply to ProcessEnvironment: the 26-byte OK response (u32 nIncomingBytes, u16 0)
 * followed by the continuation (u32 count, then "NAME=value" strings), in one buffer.
 * envp is a NULL-terminated array. Entries that would push the continuation over max_bytes are
 * left out. Ownership: *out is malloc'd, caller frees. Returns 0 or -ENOMEM.
 */
PP_MUST_USE int ipc_environment_encode(char *const *envp, size_t max_bytes, uint8_t **out,
                                       size_t *out_len);

/* ------------------------------------------------------------------------------------------ */
/* Codec: reverse mode (ipc/ports.c, protocol.c)                                              */
/* ------------------------------------------------------------------------------------------ */

void ipc_advertise_encode(uint8_t out[IPC_ADVERTISE_SIZE], const uint8_t cookie[16], uint64_t pid);
void ipc_advertise_set_flags(uint8_t out[IPC_ADVERTISE_SIZE], uint16_t flags);
uint16_t ipc_advertise_flags(const uint8_t buf[IPC_ADVERTISE_SIZE]);
/* Returns 0 or -EPROTO (magic) / -EBADMSG (len < 34). */
PP_MUST_USE int ipc_advertise_decode(const uint8_t *buf, size_t len, uint8_t cookie[16],
                                     uint64_t *pid);

enum ipc_port_type {
    IPC_PORT_CONNECT = 0,
    IPC_PORT_LISTEN = 1,
};

struct ipc_port_config {
    char *path;
    enum ipc_port_type type;
    int suspend; /* 1: the host's start-up waits for ResumeRuntime on this port */
};

struct ipc_port_list {
    struct ipc_port_config *ports;
    size_t count;
};

/*
 * Parses DOTNET_DiagnosticPorts with the runtime's rules: ';' separates ports (empty ones are
 * skipped), ',' separates the address and tags; tags connect/listen and suspend/nosuspend are
 * case-insensitive, the leftmost of a kind wins, unknown tags are ignored; defaults connect and
 * suspend; an empty address drops the entry. Returns 0 or -ENOMEM.
 * Ownership: release with ipc_port_list_fini(), also after a failure.
 */
PP_MUST_USE int ipc_ports_parse(const char *value, struct ipc_port_list *out);
void ipc_port_list_fini(struct ipc_port_list *l);

/* ------------------------------------------------------------------------------------------ */
/* Event sources: how the sampler feeds sessions                                              */
/* ------------------------------------------------------------------------------------------ */

/* A tracing session as an event source sees it. Borrowed; valid until session_stop. */
struct ipc_session_config {
    uint64_t session_id;
    const struct ipc_provider *providers;
    uint32_t provider_count;
    uint64_t rundown_keyword; /* 0: no rundown */
    uint8_t request_stackwalk;
    /* 1: the .NET runtime's own session feeds this one (docs/dotnet-hosts.md): what only the
     * runtime can say (its System.Runtime counters, its rundown) comes from it, not the source. */
    uint8_t runtime_merged;
};

/*
 * Returns 1 when the session enables events of provider with these keywords and level (the
 * runtime's rule: the provider is named, or "*" is; keywords 0 or overlapping; level LogAlways
 * or <= the session's level), else 0.
 */
int ipc_session_config_enables(const struct ipc_session_config *cfg, const char *provider,
                               uint64_t keywords, uint32_t level);

/*
 * One active session in a drain call. When congested is 1, the client is not reading fast enough
 * and the session's queued bytes are over its cap: do not write events; report each dropped
 * event with nt_writer_note_lost(writer, capture_thread_id, n) so readers see the gap.
 */
struct ipc_session_view {
    const struct ipc_session_config *config;
    struct nt_writer *writer;
    int congested;
    int final; /* the session's last drain (it is ending): write everything held back */
    /* A lazy session (ipc_server_options.lazy_providers) that has not taken a sample yet: it is
     * sent only once the source's sampled() says it has one, so the source may leave its final
     * batch unwritten when that batch brings none (the stream is dropped whole). */
    int unsampled;
};

/*
 * The interface through which an event source (the agent's sampler) feeds every active session.
 * Every callback runs on the IPC loop thread, never concurrently with another callback of the
 * same source, and must not block for long (a few ms): the loop also serves the diagnostic
 * connections. Callbacks may be NULL.
 *
 * - session_start: a session was created (its writer exists and already holds ProcessInfo).
 *   Returning a negative errno fails nothing; it is logged. Use it to start sampling when the
 *   first session that enables the sampler appears.
 * - drain: called every drain interval (IPC_DRAIN_INTERVAL_MS) with every active session, and
 *   once more right before a session stops. Write events with nt_writer_define() and
 *   nt_writer_write() (define is idempotent per writer). Return 0 or a negative errno (logged).
 * - rundown: at StopTracing of a session whose rundown_keyword is not 0, after the last drain
 *   and before the end-of-stream tag: write module/method rundown events into w.
 * - session_stop: the session is gone (stopped, its client disconnected, or the server stops);
 *   its writer must not be touched any more. Use it to stop sampling after the last session.
 */
struct ipc_event_source {
    int (*session_start)(void *ctx, const struct ipc_session_config *cfg);
    int (*drain)(void *ctx, const struct ipc_session_view *sessions, size_t n);
    int (*rundown)(void *ctx, const struct ipc_session_config *cfg, struct nt_writer *w);
    void (*session_stop)(void *ctx, const struct ipc_session_config *cfg);
    /* Optional: the interval between samples of a thread this session will get, for the trace
     * header's ExpectedCPUSamplingRate (0 or NULL: the runtime's 1 ms). Called before
     * session_start. */
    uint32_t (*sampling_interval_ns)(void *ctx, const struct ipc_session_config *cfg);
    void *ctx;
    /* Optional: writes names (module and method rundown events) for the code addresses that
     * the session's events referenced since the previous call, so that a stream cut short by
     * the death of its process still names its frames. Called for the file session of
     * ipc_server_options.output every IPC_OUTPUT_NAMES_MS; the rundown at its end names
     * everything again. */
    int (*names)(void *ctx, const struct ipc_session_config *cfg, struct nt_writer *w);
    /* Optional: 1 once a drain handed the session a sample of its own (a thread's stack, in the
     * session's mode), else 0. A session started with ipc_server_options.lazy_providers connects
     * only then; NULL: at its first drain. */
    int (*sampled)(void *ctx, const struct ipc_session_config *cfg);
};

/* 50 ms: each drain wakes the loop thread, which on a busy host takes a core from one of its
 * threads; at 100 wakeups a second that cost the sampled threads about 0.1 % of their time in
 * bench/overhead.sh (2-core VM, docs/performance.md). A thread's ring (256 samples by default)
 * holds five drains' worth at 1000 Hz. */
#define IPC_DRAIN_INTERVAL_MS 50

/* How often a file session (ipc_server_options.output) writes the names of new addresses. */
#define IPC_OUTPUT_NAMES_MS 250

/* ------------------------------------------------------------------------------------------ */
/* Server                                                                                     */
/* ------------------------------------------------------------------------------------------ */

#define IPC_MAX_SESSIONS          64         /* the runtime's limit; beyond -> FAIL */
#define IPC_MAX_CONNECTIONS       4096       /* command connections; beyond: BUSY, closed */
#define IPC_SESSION_QUEUE_BYTES   (4u << 20) /* per-session bytes queued for the client */
#define IPC_REQUEST_TIMEOUT_MS    10000      /* a listen connection must send its request */
#define IPC_STOP_DRAIN_TIMEOUT_MS 5000       /* stop waits this long for the client to read */

struct ipc_server_options {
    /*
     * Listen socket path; NULL: $TMPDIR/dotnet-diagnostic-{pid}-{key}-socket as the runtime
     * names it (key from /proc/self/stat, or key_override when it is not 0). "" disables listen.
     */
    const char *listen_path;
    uint64_t key_override;
    /* DOTNET_DiagnosticPorts value (connect ports); NULL: none. */
    const char *diagnostic_ports;
    /* Borrowed; may be NULL (sessions then carry only ProcessInfo). Must outlive the server. */
    const struct ipc_event_source *source;
    /* Overrides for tests; 0: the defaults above. */
    size_t session_queue_bytes;
    uint32_t request_timeout_ms;
    size_t max_connections; /* command connections at once (IPC_MAX_CONNECTIONS) */
    /* Log hook (one line, no newline); NULL: stderr with a "pipeprof: " prefix. */
    void (*log)(void *ctx, const char *line);
    void *log_ctx;
    /*
     * Other services on the server's loop (the HTTP endpoints): loop_start runs on the loop
     * thread before the first command is served, with the uv_loop_t * as loop; a nonzero
     * return is logged and the server runs without them. loop_stop runs on the loop thread
     * when the server stops, and must close every handle it opened. Either may be NULL.
     */
    int (*loop_start)(void *ctx, void *loop);
    void (*loop_stop)(void *ctx);
    void *loop_ctx;
    /*
     * 1: this process is a .NET host whose runtime starts a diagnostic server of its own later
     * (docs/dotnet-hosts.md). The server then answers what only the runtime can answer by
     * forwarding it to the runtime's server, and merges the runtime's event stream with the
     * source's events in every CollectTracing session. With the default listen path, the
     * runtime's bind of that name is redirected to a private one (ipc_redirect_path(), called by
     * the interposers of host/sockets.c through the shim), so clients find one server per process.
     * Connect ports of diagnostic_ports wait for the runtime to advertise on them (its connects are
     * redirected to private listeners) and then advertise with the runtime's cookie; start-up is
     * never held by this server then (the runtime holds it itself).
     */
    int dotnet_host;
    uint32_t runtime_wait_ms; /* how long commands wait for the runtime's server; 0: 10000 */
    /*
     * Called first on every thread the server starts (its loop and the readers of runtime
     * streams), with every signal blocked: the agent excludes them from sampling and from its
     * interposers. May be NULL.
     */
    void (*thread_init)(void);
    /* A session into a file from the server's start to its stop (PIPEPROF_OUTPUT); NULL: none. */
    const struct ipc_output_options *output;
    /*
     * 1 (PIPEPROF_RESUME_AT_SESSION=1, set by `pipeprof record`): a suspend port is resumed when a
     * session started on it has begun (its sampling is running), not by a ResumeRuntime; the
     * advertise says so (IPC_ADVERTISE_RESUMES_AT_SESSION). Never in a .NET host, whose runtime
     * holds its start-up itself until its ResumeRuntime.
     */
    int resume_at_session;
    /*
     * Not NULL (PIPEPROF_RECORD_LAZY, which `pipeprof record` sets for the children of its tree):
     * a session with these providers (dotnet-trace's syntax) starts at the server's start, its
     * stream held in memory, and the first connect port is connected only once the session has a
     * sample (struct ipc_event_source's sampled), or at the stop if it had one by then; it then
     * advertises with IPC_ADVERTISE_STREAM_FOLLOWS and streams. A process that took no sample
     * never connects. Start-up is not held for that port. Never in a .NET host.
     */
    const char *lazy_providers;
    /* With lazy_providers (PIPEPROF_RECORD_TALLY): a file to which an image whose lazy session
     * ends without a sample appends its pid and a newline, so that the tool can count the
     * processes it never heard of. NULL: none. */
    const char *lazy_tally;
    /*
     * With lazy_providers: 0, the session starts before ipc_server_start() returns (sampling runs
     * before the host's main); N, it starts on the loop thread N ms after the server's start,
     * without holding the host, and a process that stops sooner never starts it (nor the agent:
     * the caller leaves the event source's agent to its first session) and only counts itself in
     * lazy_tally. Set for a CPU-mode `record` child (ipc/env.c, IPC_LAZY_START_MS): most children
     * of a build or a script end sooner, and the agent's start was the largest piece of their CPU
     * time under `record` (docs/performance.md).
     */
    unsigned lazy_start_ms;
    /* With lazy_providers and a connect port: the default listen socket is bound this many ms
     * after the start (server.c says why), 0 at once. Read from the environment on the starting
     * thread (PIPEPROF_LISTEN_DEFER_MS, a test's knob; ipc_server_options_from_env() sets the
     * default, IPC_LISTEN_DEFER_MS). */
    unsigned listen_defer_ms;
};

/*
 * A tracing session whose stream goes into a file instead of a connection: started on the loop
 * thread before ipc_server_start() returns (so sampling runs from then on), ended with rundown,
 * ProcessInfo and the end tag by ipc_server_stop() or ipc_server_stop_quick(). No client can stop
 * it. Its writer flushes whole blocks every 100 ms (nt_writer_poll) straight into the file, and
 * names new addresses every IPC_OUTPUT_NAMES_MS (struct ipc_event_source's names), so a process
 * that dies leaves a trace cut after its last flush that readers take up to the cut. A server
 * with an output runs even when it can listen on no socket.
 */
struct ipc_output_options {
    int fd;                /* open for writing; the server owns it from ipc_server_start() on */
    const char *providers; /* dotnet-trace's provider syntax (ipc_providers_parse) */
};

struct ipc_server; /* opaque; ipc/server.c */

/* The providers of a PIPEPROF_OUTPUT session: pipeprof's samples and events, at the mode and
 * rate PIPEPROF_MODE and PIPEPROF_HZ give the agent's defaults. */
#define IPC_OUTPUT_PROVIDERS "Microsoft-DotNETCore-SampleProfiler:0:4,pipeprof:0:4"

/*
 * PIPEPROF_OUTPUT=PATH (ipc/env.c): opens the file this image records into, named by the rules
 * ipc/env.c gives (the first image of a process tree writes PATH, every later one a name of its
 * own and never an existing file). The first image marks the environment (PIPEPROF_OUTPUT_ROOT)
 * unless running (the host runs already, and its threads may read the environment). Returns the
 * descriptor (close-on-exec), -1 when the variable is unset or empty, or -1 after one line on
 * stderr saying why nothing is written. Context: the constructor, or the thread that starts a
 * fork()ed child's agent.
 */
int ipc_output_file_open(int running);

/* How long after its start a lazy child binds its default listen socket, unless its test says
 * otherwise (ipc_server_options.listen_defer_ms). */
#define IPC_LISTEN_DEFER_MS 50

/*
 * Fills opts' listen_path, diagnostic_ports, dotnet_host and key_override from the environment
 * (ipc/env.c lists the variables; the other fields are left alone). running: the host runs
 * already (a fork()ed child, an exec that failed), so its start-up is not held. Returns how long
 * start-up waits for ResumeRuntime on a suspend port: 0 not at all (a .NET host, whose runtime
 * holds it itself; running; an image after an exec whose first one was resumed), -1 forever, else
 * ms. A bad PIPEPROF_SUSPEND_TIMEOUT_MS is one line on stderr and the default. Context: the
 * constructor, or the thread that starts a fork()ed child's agent.
 */
int ipc_server_options_from_env(struct ipc_server_options *opts, int running);

/*
 * Starts the server: computes the process info, creates the listen socket (mode 0600) and the
 * connect ports, starts the loop thread (all signals blocked in it) and waits until the output
 * session, when asked for, has started. Returns 0 and stores the server in *out, or a negative
 * errno (nothing left behind; opts->output's fd is closed).
 * Ownership: caller owns *out; release with ipc_server_stop().
 */
PP_MUST_USE int ipc_server_start(const struct ipc_server_options *opts, struct ipc_server **out);

/*
 * Blocks until every suspend-mode connect port received ResumeRuntime, or timeout_ms passed
 * (< 0: forever). Returns 0 (resumed or nothing to wait for) or -ETIMEDOUT.
 * Context: any thread but the loop's.
 */
PP_MUST_USE int ipc_server_wait_resume(struct ipc_server *s, int timeout_ms);

/*
 * Stops the server: every session is drained, gets its rundown (when it asked for it) and its
 * end-of-stream tag and is closed, the listen socket is unlinked, the thread joined, everything
 * freed. Accepts NULL. Context: any thread but the loop's.
 */
void ipc_server_stop(struct ipc_server *s);

/*
 * For a host that ends without exit handlers (_exit, _Exit): ends every session as
 * ipc_server_stop() does (rundown, end tag, flush) and waits at most timeout_ms for the loop
 * thread to finish (a futex wait the loop thread's end wakes). Frees nothing and joins nothing, so
 * that a lock held by the caller's thread cannot hang the exit: takes no lock and allocates nothing
 * in the caller, and may be called from a signal handler. Returns 0, -ETIMEDOUT, or -ESRCH in a
 * child of the server's process. The server must not be used afterwards.
 */
int ipc_server_stop_quick(struct ipc_server *s, int timeout_ms);
/* The number the stops' wake of the loop thread writes to (libuv's async fd), in the fd table of
 * the thread that started the server. */
int ipc_server_wake_fd(const struct ipc_server *s);

/* The listen path in use ("" when none). Valid until ipc_server_stop(). */
const char *ipc_server_listen_path(const struct ipc_server *s);

/* This process's runtime cookie (random per process, as in ADVR_V1 and ProcessInfo). */
void ipc_server_cookie(const struct ipc_server *s, uint8_t out[16]);

struct ipc_server_stats {
    uint64_t connections; /* accepted or connected */
    uint64_t commands;    /* requests decoded */
    uint64_t errors;      /* error responses sent */
    uint64_t sessions;    /* sessions started */
    uint64_t active_sessions;
    uint64_t lost_events; /* dropped for congested sessions, as reported by sources */
    uint64_t advertises;  /* ADVR_V1 messages sent */
    /* Requests that waited for a .NET runtime's server to come up (runtime_wait_ms), and those of
     * them the wait's end left to be answered natively (ipc/upstream.c). */
    uint64_t runtime_waits;
    uint64_t runtime_wait_timeouts;
    /* StopTracing answered because its client did not read its stream's end within
     * IPC_STOP_DRAIN_TIMEOUT_MS (the rest of the stream dropped). */
    uint64_t stop_drain_timeouts;
};
/* Thread-safe snapshot. */
void ipc_server_get_stats(struct ipc_server *s, struct ipc_server_stats *out);

/* What a host does with a socket path, for ipc_redirect_path(). */
enum ipc_redirect_op {
    IPC_REDIRECT_BIND,    /* bind(2) of a listening socket */
    IPC_REDIRECT_UNLINK,  /* unlink(2) of a socket file */
    IPC_REDIRECT_CONNECT, /* connect(2) to a listening socket */
};

/*
 * In a .NET host served with dotnet_host (and the default listen path): where the runtime's own
 * operation on path must go instead. The runtime's bind and unlink of its default name
 * (dotnet-diagnostic-PID-KEY-socket, which this server holds) go to its private path; its
 * connects to a connect port of DOTNET_DiagnosticPorts go to this server's private listener for
 * that port. Returns 1 with the replacement in out (NUL-terminated), or 0: leave path alone.
 * The caller must not call this for the server's own threads (struct ipc_server_options'
 * thread_init marks them) nor around ipc_server_start()/stop() on its own thread.
 * Context: any thread; lock-free, no allocation; the table it reads lives as long as the process.
 */
int ipc_redirect_path(enum ipc_redirect_op op, const char *path, char *out, size_t cap);

/*
 * 1 when this process is a .NET host (ipc/dotnet-host.c): PIPEPROF_DOTNET_HOST=0|1 when set, else
 * the executable is `dotnet` or an apphost (its ELF image names libhostfxr.so; a single-file
 * app's too, before the bundle appended to it). A runtime this misses is still found when it
 * binds its socket (ipc_redirect_path()), only later. Context: any thread; reads the executable.
 */
int ipc_dotnet_host_detect(void);
/* Whether the executable file mapped at file (size bytes) is a .NET host as the above tells it
 * (an apphost naming libhostfxr.so, or a single-file app's host exporting DotNetRuntimeInfo). */
int ipc_dotnet_host_image(const void *file, size_t size);
/* /proc/self/exe's target ("" when unreadable), read once per image. */
const char *ipc_self_exe(void);

/*
 * Computes the runtime's default socket path for this process into out:
 * "<TMPDIR or /tmp>/dotnet-diagnostic-<pid>-<key>-socket". Returns 0 or -ENAMETOOLONG (longer
 * than sun_path).
 */
PP_MUST_USE int ipc_default_socket_path(char *out, size_t cap, uint64_t key_override);

/* starttime (field 22) of /proc/<pid>/stat, or 0 when unreadable: the runtime's key. */
uint64_t ipc_process_start_key(int pid);

/*
 * Reads /proc/PID/stat into buf (cap bytes) and returns a pointer to the ')' that ends the
 * command name (which may hold spaces and parentheses): the fields from state on follow it.
 * NULL when the process is gone or the file is unreadable.
 */
const char *ipc_process_stat(int pid, char *buf, size_t cap);

/* ------------------------------------------------------------------------------------------ */
/* Blocking client helpers (ipc/client.c): used by `pipeprof ps/collect` and the tests          */
/* ------------------------------------------------------------------------------------------ */

/* Milliseconds on the monotonic clock (for the clients' deadlines and progress). */
uint64_t ipc_client_ms(void);

/* ------------------------------------------------------------------------------------------ */
/* Socket files in shared directories (ipc/sockfile.c): whom to trust, what to replace         */
/* ------------------------------------------------------------------------------------------ */

/* A process on the other side of a socket, or the owner of a socket file (-1: unknown). */
struct ipc_peer {
    long pid;
    long uid;
};

/*
 * Makes room for a listening socket at path: 0 when nothing is there, or when a socket of our
 * own uid nobody accepts on (connect is refused: its server died) was removed. Anything else
 * stays: -EEXIST (not a socket: a file, a directory, a symbolic link), -EPERM (another user's
 * socket), -EADDRINUSE (somebody accepts on it), or another negative errno. *owner is the uid
 * of what was found there (-1: nothing).
 */
PP_MUST_USE int ipc_sockfile_make_room(const char *path, long *owner);

/* Why ipc_sockfile_make_room() left a path alone, in words. Static string. */
const char *ipc_sockfile_refusal(int err);

/* The identity of a socket file this process bound, to remove it and nothing else later. */
struct ipc_sockfile {
    uint64_t dev;
    uint64_t ino; /* 0: not noted; nothing is removed */
};

/* Notes the file at path right after bind(). Returns 0 or a negative errno (f then empty). */
int ipc_sockfile_note(const char *path, struct ipc_sockfile *f);

/* Unlinks path only if it is still the file noted in f. */
void ipc_sockfile_remove(const char *path, const struct ipc_sockfile *f);

/* Marks the socket file at path as the server's default socket (its mtime; sockfile.c says how
 * and why), for ipc_sockfile_remove_stale() to know it from a bare runtime's once its process is
 * killed. Returns 0 or a negative errno (then it stays unmarked: never removed). */
int ipc_sockfile_mark(const char *path);

/*
 * Whether a client may trust the socket file at path as pid's diagnostic socket: a socket (not
 * followed when it is a symbolic link) whose owner is one of pid's uids (real, effective, saved,
 * file system: /proc/PID/status) or root. Returns 0, -EPERM (another user's: who->uid names
 * it), -ENOTSOCK, -ESRCH (pid gone) or the lstat errno.
 */
PP_MUST_USE int ipc_sockfile_trusted(const char *path, int pid, struct ipc_peer *who);

/*
 * Whether process pid holds a listening Unix socket bound at dir/name, found without connecting
 * to it (`ps` disturbs nobody): /proc/net/unix names what each listening socket was bound to,
 * /proc/PID/fd which sockets pid holds. Returns 1, 0 (it does not: another process listens
 * there, or nobody), or -EACCES when pid's fds cannot be read (another user's process).
 */
PP_MUST_USE int ipc_sockfile_held_by(const char *dir, const char *name, int pid);

/* The process at the other end of a connected Unix socket (SO_PEERCRED: for a client, the
 * process that called listen()). Returns 0 or a negative errno. */
PP_MUST_USE int ipc_client_peer(int fd, struct ipc_peer *who);

/* Connects to a Unix socket path; *fd is CLOEXEC. Returns 0 or a negative errno. */
PP_MUST_USE int ipc_client_connect(const char *path, int *fd);

/* Listens on a Unix socket path (reverse mode: targets connect and advertise), replacing only a
 * stale socket of our own left there (ipc_sockfile_make_room(): -EEXIST, -EPERM, -EADDRINUSE
 * otherwise); *fd is CLOEXEC and *f identifies the file for ipc_sockfile_remove(). Returns 0 or
 * a negative errno. */
PP_MUST_USE int ipc_client_listen(const char *path, int *fd, struct ipc_sockfile *f);

/* Writes all of buf (MSG_NOSIGNAL). Returns 0 or a negative errno. */
PP_MUST_USE int ipc_client_send(int fd, const void *buf, size_t len);

/*
 * Reads one response (header, then size-20 payload bytes) into buf[0, cap). timeout_ms < 0 waits
 * forever. Returns the message size, -ENODATA (EOF before the first byte), -EBADMSG (EOF inside
 * the message, size < 20), -ENOSPC, -ETIMEDOUT or another negative errno.
 */
PP_MUST_USE int ipc_client_read_response(int fd, uint8_t *buf, size_t cap, int timeout_ms);

/*
 * Finds the diagnostic socket of pid the way the .NET client does: the newest
 * dotnet-diagnostic-{pid}-*-socket in the target's initial TMPDIR (from /proc/pid/environ), else
 * in our own $TMPDIR or /tmp; but only a socket ipc_sockfile_trusted() accepts (owned by pid's
 * user, not followed through a symbolic link). Returns 0, -ENOENT, or -EPERM when every candidate
 * belongs to another user: out is then the newest of them and impostor->uid its owner.
 */
PP_MUST_USE int ipc_client_find_socket(int pid, char *out, size_t cap, struct ipc_peer *impostor);

/*
 * Accepts connections on listen_fd until one sends a valid ADVR_V1 (within 250 ms of accept) or
 * timeout_ms passes (< 0: forever). want_pid != 0 skips other pids. Returns 0 with the
 * connection in *fd, -ETIMEDOUT, or a negative errno. The _flags form also gives the advertise's
 * flags (IPC_ADVERTISE_RESUMES_AT_SESSION).
 */
PP_MUST_USE int ipc_client_accept_advertise(int listen_fd, int timeout_ms, uint64_t want_pid,
                                            int *fd, uint8_t cookie[16], uint64_t *pid);
PP_MUST_USE int ipc_client_accept_advertise_flags(int listen_fd, int timeout_ms, uint64_t want_pid,
                                                  int *fd, uint8_t cookie[16], uint64_t *pid,
                                                  uint16_t *flags);

#endif /* IPC_IPC_H */
