/* SPDX-License-Identifier: MIT */
/*
 * ipc/protocol.c - the diagnostic IPC codec: header, strings, every command payload the server
 * understands, responses and error codes (ipc-protocol.md sections 3-9). Pure: no I/O, no
 * globals, no libuv, so it can be fuzzed alone. Context: any thread. It must never read outside
 * the buffer it is given nor trust a length field: every count is checked against what is left.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ipc/ipc.h"

/* ------------------------------------------------------------------------------------------ */
/* Little-endian helpers over a bounded cursor                                                 */
/* ------------------------------------------------------------------------------------------ */

struct ipc_cursor {
    const uint8_t *p;
    size_t len;
    size_t pos;
};

static int
ipc_cursor_u8(struct ipc_cursor *c, uint8_t *v)
{
    if (c->len - c->pos < 1) {
        return -EBADMSG;
    }
    *v = c->p[c->pos++];
    return 0;
}

static int
ipc_cursor_u32(struct ipc_cursor *c, uint32_t *v)
{
    const uint8_t *b;

    if (c->len - c->pos < 4) {
        return -EBADMSG;
    }
    b = c->p + c->pos;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    c->pos += 4;
    return 0;
}

static int
ipc_cursor_u64(struct ipc_cursor *c, uint64_t *v)
{
    uint32_t lo = 0, hi = 0;
    int err;

    if (c->len - c->pos < 8) {
        return -EBADMSG;
    }
    err = ipc_cursor_u32(c, &lo);
    if (err == 0) {
        err = ipc_cursor_u32(c, &hi);
    }
    *v = (uint64_t)hi << 32 | lo;
    return err;
}

static void
ipc_put_u16(uint8_t *out, uint16_t v)
{
    out[0] = (uint8_t)v;
    out[1] = (uint8_t)(v >> 8);
}

static void
ipc_put_u32(uint8_t *out, uint32_t v)
{
    out[0] = (uint8_t)v;
    out[1] = (uint8_t)(v >> 8);
    out[2] = (uint8_t)(v >> 16);
    out[3] = (uint8_t)(v >> 24);
}

static void
ipc_put_u64(uint8_t *out, uint64_t v)
{
    ipc_put_u32(out, (uint32_t)v);
    ipc_put_u32(out + 4, (uint32_t)(v >> 32));
}

static uint32_t
ipc_get_u32(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Appenders over out[0, cap) at *pos: each returns 0 or -ENOSPC and then leaves *pos alone. */
static int
ipc_out_bytes(uint8_t *out, size_t cap, size_t *pos, const void *bytes, size_t n)
{
    if (cap < *pos || cap - *pos < n) {
        return -ENOSPC;
    }
    memcpy(out + *pos, bytes, n);
    *pos += n;
    return 0;
}

static int
ipc_out_u8(uint8_t *out, size_t cap, size_t *pos, uint8_t v)
{
    return ipc_out_bytes(out, cap, pos, &v, 1);
}

static int
ipc_out_u32(uint8_t *out, size_t cap, size_t *pos, uint32_t v)
{
    uint8_t b[4];

    ipc_put_u32(b, v);
    return ipc_out_bytes(out, cap, pos, b, 4);
}

static int
ipc_out_u64(uint8_t *out, size_t cap, size_t *pos, uint64_t v)
{
    uint8_t b[8];

    ipc_put_u64(b, v);
    return ipc_out_bytes(out, cap, pos, b, 8);
}

/* ------------------------------------------------------------------------------------------ */
/* Header and responses                                                                       */
/* ------------------------------------------------------------------------------------------ */

static const uint8_t ipc_magic[IPC_MAGIC_LEN] = "DOTNET_IPC_V1";

int
ipc_header_decode(const uint8_t *buf, size_t len, struct ipc_header *out)
{
    if (len < IPC_HEADER_SIZE) {
        return -EBADMSG;
    }
    out->size = (uint16_t)(buf[14] | buf[15] << 8);
    out->command_set = buf[16];
    out->command_id = buf[17];
    out->reserved = (uint16_t)(buf[18] | buf[19] << 8);
    /* The runtime checks the size first (a short size is BAD_ENCODING even with a bad magic). */
    if (out->size < IPC_HEADER_SIZE) {
        return -EBADMSG;
    }
    if (memcmp(buf, ipc_magic, IPC_MAGIC_LEN) != 0) {
        return -EPROTO;
    }
    return 0;
}

void
ipc_header_encode(uint8_t out[IPC_HEADER_SIZE], uint16_t size, uint8_t command_set,
                  uint8_t command_id)
{
    memcpy(out, ipc_magic, IPC_MAGIC_LEN);
    ipc_put_u16(out + 14, size);
    out[16] = command_set;
    out[17] = command_id;
    ipc_put_u16(out + 18, 0);
}

uint32_t
ipc_errno_to_hresult(int err)
{
    switch (err) {
    case 0:
        return IPC_HR_OK;
    case -EPROTO:
        return IPC_HR_UNKNOWN_MAGIC;
    case -ENOTSUP:
        return IPC_HR_UNKNOWN_COMMAND;
    case -EBADMSG:
    case -EINVAL:
        return IPC_HR_BAD_ENCODING;
    default:
        return IPC_HR_FAIL;
    }
}

size_t
ipc_error_encode(uint8_t out[24], uint32_t hresult)
{
    ipc_header_encode(out, 24, IPC_SET_SERVER, IPC_RESPONSE_ERROR);
    ipc_put_u32(out + 20, hresult);
    return 24;
}

size_t
ipc_ok_u64_encode(uint8_t out[28], uint64_t value)
{
    ipc_header_encode(out, 28, IPC_SET_SERVER, IPC_RESPONSE_OK);
    ipc_put_u64(out + 20, value);
    return 28;
}

size_t
ipc_ok_i32_encode(uint8_t out[24], int32_t value)
{
    ipc_header_encode(out, 24, IPC_SET_SERVER, IPC_RESPONSE_OK);
    ipc_put_u32(out + 20, (uint32_t)value);
    return 24;
}

int
ipc_response_decode(const uint8_t *buf, size_t len, struct ipc_response *out)
{
    int err;

    memset(out, 0, sizeof(*out));
    /* Clients ignore the magic of a response; so do we, but the size must be sane. */
    err = ipc_header_decode(buf, len, &out->header);
    if (err == -EBADMSG) {
        return err;
    }
    if (out->header.size > len) {
        return -EBADMSG;
    }
    out->status = out->header.command_id;
    out->payload = buf + IPC_HEADER_SIZE;
    out->payload_len = out->header.size - IPC_HEADER_SIZE;
    if (out->status == IPC_RESPONSE_ERROR) {
        if (out->payload_len < 4) {
            return -EBADMSG;
        }
        out->hresult = ipc_get_u32(out->payload);
    } else if (out->payload_len >= 8) {
        struct ipc_cursor c = { out->payload, out->payload_len, 0 };

        err = ipc_cursor_u64(&c, &out->value);
        if (err < 0) {
            return err;
        }
    } else if (out->payload_len >= 4) {
        out->hresult = ipc_get_u32(out->payload);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Strings: u32 charCount (with the NUL) + UTF-16LE                                            */
/* ------------------------------------------------------------------------------------------ */

/* Appends code point cp as UTF-8 to out (room for 4 bytes is the caller's job). */
static size_t
ipc_utf8_put(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int
ipc_string_decode(const uint8_t *buf, size_t len, size_t *pos, char **out)
{
    struct ipc_cursor c = { buf, len, *pos };
    const uint8_t *units;
    uint32_t count, i;
    size_t o = 0;
    char *s;
    int err;

    *out = NULL;
    err = ipc_cursor_u32(&c, &count);
    if (err < 0) {
        return err;
    }
    if (count == 0) {
        *pos = c.pos;
        return 0; /* null */
    }
    if ((c.len - c.pos) / 2 < count) {
        return -EBADMSG;
    }
    units = c.p + c.pos;
    if (units[2 * (size_t)(count - 1)] != 0 || units[2 * (size_t)(count - 1) + 1] != 0) {
        return -EBADMSG; /* the runtime requires the terminating NUL unit */
    }
    /* Each UTF-16 unit becomes at most 3 UTF-8 bytes (a pair of 2 units, 4 bytes). */
    s = malloc((size_t)count * 3 + 1);
    if (s == NULL) {
        return -ENOMEM;
    }
    for (i = 0; i + 1 < count; i++) {
        uint32_t u = (uint32_t)units[2 * i] | (uint32_t)units[2 * i + 1] << 8;

        if (u >= 0xD800 && u < 0xDC00 && i + 2 < count) {
            uint32_t lo = (uint32_t)units[2 * i + 2] | (uint32_t)units[2 * i + 3] << 8;

            if (lo >= 0xDC00 && lo < 0xE000) {
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                i++;
            } else {
                u = 0xFFFD;
            }
        } else if (u >= 0xD800 && u < 0xE000) {
            u = 0xFFFD;
        }
        if (u == 0) {
            break; /* an embedded NUL ends the C string */
        }
        o += ipc_utf8_put(s + o, u);
    }
    s[o] = '\0';
    *pos = c.pos + 2 * (size_t)count;
    *out = s;
    return 0;
}

/* Decodes one code point of UTF-8 at *s; invalid bytes yield U+FFFD and advance by one. */
static uint32_t
ipc_utf8_next(const unsigned char **s)
{
    const unsigned char *p = *s;
    uint32_t cp;
    int n, i;

    if (p[0] < 0x80) {
        *s = p + 1;
        return p[0];
    }
    if (p[0] >= 0xC2 && p[0] < 0xE0) {
        n = 1;
        cp = p[0] & 0x1F;
    } else if (p[0] >= 0xE0 && p[0] < 0xF0) {
        n = 2;
        cp = p[0] & 0x0F;
    } else if (p[0] >= 0xF0 && p[0] < 0xF5) {
        n = 3;
        cp = p[0] & 0x07;
    } else {
        *s = p + 1;
        return 0xFFFD;
    }
    for (i = 1; i <= n; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            *s = p + 1;
            return 0xFFFD;
        }
        cp = cp << 6 | (p[i] & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp < 0xE000)) {
        *s = p + 1;
        return 0xFFFD;
    }
    *s = p + n + 1;
    return cp;
}

/* Number of UTF-16 units the UTF-8 string needs, without the NUL. */
static size_t
ipc_utf16_units(const char *utf8)
{
    const unsigned char *s = (const unsigned char *)utf8;
    size_t n = 0;

    while (*s != 0) {
        n += ipc_utf8_next(&s) >= 0x10000 ? 2 : 1;
    }
    return n;
}

int
ipc_string_encode(uint8_t *out, size_t cap, size_t *pos, const char *utf8)
{
    const unsigned char *s;
    size_t units, p = *pos;
    uint8_t b[4];

    if (utf8 == NULL) {
        utf8 = "";
    }
    units = ipc_utf16_units(utf8) + 1;
    if (units > UINT32_MAX / 2 || cap < p || (cap - p - 0) < 4 || (cap - p - 4) / 2 < units) {
        return -ENOSPC;
    }
    ipc_put_u32(out + p, (uint32_t)units);
    p += 4;
    s = (const unsigned char *)utf8;
    while (*s != 0) {
        uint32_t cp = ipc_utf8_next(&s);

        if (cp >= 0x10000) {
            cp -= 0x10000;
            ipc_put_u16(b, (uint16_t)(0xD800 + (cp >> 10)));
            ipc_put_u16(b + 2, (uint16_t)(0xDC00 + (cp & 0x3FF)));
            memcpy(out + p, b, 4);
            p += 4;
        } else {
            ipc_put_u16(out + p, (uint16_t)cp);
            p += 2;
        }
    }
    ipc_put_u16(out + p, 0);
    *pos = p + 2;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* CollectTracing 1..6                                                                        */
/* ------------------------------------------------------------------------------------------ */

void
ipc_collect_fini(struct ipc_collect *c)
{
    uint32_t i;

    if (c->providers != NULL) {
        for (i = 0; i < c->provider_count; i++) {
            free(c->providers[i].name);
            free(c->providers[i].args);
            free(c->providers[i].event_ids);
        }
        free(c->providers);
    }
    c->providers = NULL;
    c->provider_count = 0;
}

static int
ipc_provider_decode(struct ipc_cursor *c, int with_filter, struct ipc_provider *p)
{
    uint32_t n, i;
    int err;

    err = ipc_cursor_u64(c, &p->keywords);
    if (err == 0) {
        err = ipc_cursor_u32(c, &p->level);
    }
    if (err == 0) {
        err = ipc_string_decode(c->p, c->len, &c->pos, &p->name);
    }
    if (err == 0) {
        err = ipc_string_decode(c->p, c->len, &c->pos, &p->args);
    }
    if (err < 0) {
        return err;
    }
    if (p->level > 5 || p->name == NULL || p->name[0] == '\0') {
        return -EBADMSG;
    }
    if (!with_filter) {
        return 0;
    }
    err = ipc_cursor_u8(c, &p->filter_enable);
    if (err == 0) {
        err = ipc_cursor_u32(c, &n);
    }
    if (err < 0) {
        return err;
    }
    if ((c->len - c->pos) / 4 < n) {
        return -EBADMSG;
    }
    if (n > 0) {
        p->event_ids = malloc((size_t)n * sizeof(uint32_t));
        if (p->event_ids == NULL) {
            return -ENOMEM;
        }
        for (i = 0; i < n; i++) {
            err = ipc_cursor_u32(c, &p->event_ids[i]);
            if (err < 0) {
                return err;
            }
        }
    }
    p->event_id_count = n;
    return 0;
}

int
ipc_collect_decode(uint8_t command_id, const uint8_t *payload, size_t len, struct ipc_collect *out)
{
    struct ipc_cursor c = { payload, len, 0 };
    uint32_t count = 0, i;
    int err = 0;

    memset(out, 0, sizeof(*out));
    out->command_id = command_id;
    if (command_id < IPC_EP_COLLECT_TRACING || command_id > IPC_EP_COLLECT_TRACING6) {
        return -ENOTSUP;
    }
    if (command_id >= IPC_EP_COLLECT_TRACING5) {
        err = ipc_cursor_u32(&c, &out->session_type);
        if (err < 0) {
            return err;
        }
        if (out->session_type >= 2) {
            return -EBADMSG;
        }
        if (out->session_type != 0) {
            return -ENOTSUP; /* user_events: needs an fd over SCM_RIGHTS; not served */
        }
    }
    err = ipc_cursor_u32(&c, &out->buffer_mb);
    if (err == 0) {
        err = ipc_cursor_u32(&c, &out->format);
    }
    if (err < 0) {
        return err;
    }
    out->request_stackwalk = 1;
    switch (command_id) {
    case IPC_EP_COLLECT_TRACING:
        out->request_rundown = 1;
        out->rundown_keyword = IPC_DEFAULT_RUNDOWN_KEYWORD;
        break;
    case IPC_EP_COLLECT_TRACING2:
    case IPC_EP_COLLECT_TRACING3:
        err = ipc_cursor_u8(&c, &out->request_rundown);
        out->request_rundown = out->request_rundown != 0;
        if (err == 0 && command_id == IPC_EP_COLLECT_TRACING3) {
            err = ipc_cursor_u8(&c, &out->request_stackwalk);
        }
        out->rundown_keyword = out->request_rundown ? IPC_DEFAULT_RUNDOWN_KEYWORD : 0;
        break;
    default: /* 4, 5, 6 */
        err = ipc_cursor_u64(&c, &out->rundown_keyword);
        if (err == 0) {
            err = ipc_cursor_u8(&c, &out->request_stackwalk);
        }
        out->request_rundown = out->rundown_keyword != 0;
        break;
    }
    out->request_stackwalk = out->request_stackwalk != 0;
    if (err == 0) {
        err = ipc_cursor_u32(&c, &count);
    }
    if (err < 0) {
        return err;
    }
    if (out->buffer_mb == 0 || out->format >= 2 || count == 0 || count > IPC_MAX_PROVIDERS) {
        return -EBADMSG;
    }
    /* Each provider needs at least 8 + 4 + 4 + 4 bytes, so a lying count cannot allocate much. */
    if ((c.len - c.pos) / 20 < count) {
        return -EBADMSG;
    }
    out->providers = calloc(count, sizeof(*out->providers));
    if (out->providers == NULL) {
        return -ENOMEM;
    }
    for (i = 0; i < count; i++) {
        out->provider_count = i + 1;
        err = ipc_provider_decode(&c, command_id >= IPC_EP_COLLECT_TRACING5, &out->providers[i]);
        if (err < 0) {
            return err;
        }
    }
    if (command_id == IPC_EP_COLLECT_TRACING6) {
        err = ipc_cursor_u32(&c, &out->buffer_mode);
        if (err < 0) {
            return err;
        }
    }
    return 0;
}

int
ipc_collect_encode(const struct ipc_collect *c, uint8_t *out, size_t cap)
{
    size_t pos = IPC_HEADER_SIZE;
    uint32_t i, j;
    int err = 0;

    if (c->command_id < IPC_EP_COLLECT_TRACING || c->command_id > IPC_EP_COLLECT_TRACING6 ||
        c->provider_count > IPC_MAX_PROVIDERS) {
        return -EINVAL;
    }
    if (cap < IPC_HEADER_SIZE) {
        return -ENOSPC;
    }
    if (c->command_id >= IPC_EP_COLLECT_TRACING5) {
        err = ipc_out_u32(out, cap, &pos, c->session_type);
    }
    if (err == 0) {
        err = ipc_out_u32(out, cap, &pos, c->buffer_mb);
    }
    if (err == 0) {
        err = ipc_out_u32(out, cap, &pos, c->format);
    }
    if (err == 0 && c->command_id >= IPC_EP_COLLECT_TRACING2 &&
        c->command_id <= IPC_EP_COLLECT_TRACING3) {
        err = ipc_out_u8(out, cap, &pos, c->request_rundown);
        if (err == 0 && c->command_id == IPC_EP_COLLECT_TRACING3) {
            err = ipc_out_u8(out, cap, &pos, c->request_stackwalk);
        }
    } else if (err == 0 && c->command_id >= IPC_EP_COLLECT_TRACING4) {
        err = ipc_out_u64(out, cap, &pos, c->rundown_keyword);
        if (err == 0) {
            err = ipc_out_u8(out, cap, &pos, c->request_stackwalk);
        }
    }
    if (err == 0) {
        err = ipc_out_u32(out, cap, &pos, c->provider_count);
    }
    for (i = 0; err == 0 && i < c->provider_count; i++) {
        const struct ipc_provider *p = &c->providers[i];

        err = ipc_out_u64(out, cap, &pos, p->keywords);
        if (err == 0) {
            err = ipc_out_u32(out, cap, &pos, p->level);
        }
        if (err == 0) {
            err = ipc_string_encode(out, cap, &pos, p->name);
        }
        if (err == 0) {
            err = ipc_string_encode(out, cap, &pos, p->args);
        }
        if (err == 0 && c->command_id >= IPC_EP_COLLECT_TRACING5) {
            err = ipc_out_u8(out, cap, &pos, p->filter_enable);
            if (err == 0) {
                err = ipc_out_u32(out, cap, &pos, p->event_id_count);
            }
            for (j = 0; err == 0 && j < p->event_id_count; j++) {
                err = ipc_out_u32(out, cap, &pos, p->event_ids[j]);
            }
        }
    }
    if (err == 0 && c->command_id == IPC_EP_COLLECT_TRACING6) {
        err = ipc_out_u32(out, cap, &pos, c->buffer_mode);
    }
    if (err < 0) {
        return err;
    }
    if (pos > IPC_MAX_MESSAGE) {
        return -ENOSPC;
    }
    ipc_header_encode(out, (uint16_t)pos, IPC_SET_EVENTPIPE, c->command_id);
    return (int)pos;
}

size_t
ipc_stop_encode(uint8_t out[28], uint64_t session_id)
{
    ipc_header_encode(out, 28, IPC_SET_EVENTPIPE, IPC_EP_STOP_TRACING);
    ipc_put_u64(out + 20, session_id);
    return 28;
}

int
ipc_stop_decode(const uint8_t *payload, size_t len, uint64_t *session_id)
{
    struct ipc_cursor c = { payload, len, 0 };

    return ipc_cursor_u64(&c, session_id);
}

/* ------------------------------------------------------------------------------------------ */
/* dotnet-trace provider syntax                                                               */
/* ------------------------------------------------------------------------------------------ */

static const char *const ipc_level_names[] = { "logalways", "critical",      "error",
                                               "warning",   "informational", "verbose" };

static int
ipc_level_parse(const char *s, size_t n, uint32_t *level)
{
    size_t i;

    if (n == 1 && s[0] >= '0' && s[0] <= '5') {
        *level = (uint32_t)(s[0] - '0');
        return 0;
    }
    for (i = 0; i < sizeof(ipc_level_names) / sizeof(ipc_level_names[0]); i++) {
        if (strlen(ipc_level_names[i]) == n && strncasecmp(s, ipc_level_names[i], n) == 0) {
            *level = (uint32_t)i;
            return 0;
        }
    }
    return -EINVAL;
}

static int
ipc_keywords_parse(const char *s, size_t n, uint64_t *kw)
{
    uint64_t v = 0;
    size_t i = 0;

    if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        i = 2;
    }
    if (i == n || n - i > 16) {
        return -EINVAL;
    }
    for (; i < n; i++) {
        char ch = s[i];
        unsigned d;

        if (ch >= '0' && ch <= '9') {
            d = (unsigned)(ch - '0');
        } else if (ch >= 'a' && ch <= 'f') {
            d = (unsigned)(ch - 'a' + 10);
        } else if (ch >= 'A' && ch <= 'F') {
            d = (unsigned)(ch - 'A' + 10);
        } else {
            return -EINVAL;
        }
        v = v << 4 | d;
    }
    *kw = v;
    return 0;
}

/* Splits the next provider entry at top-level ',' (commas inside "quotes" do not split). */
static size_t
ipc_provider_entry_len(const char *s)
{
    int quoted = 0;
    size_t i;

    for (i = 0; s[i] != '\0'; i++) {
        if (s[i] == '"') {
            quoted = !quoted;
        } else if (s[i] == ',' && !quoted) {
            break;
        }
    }
    return i;
}

static int
ipc_provider_entry_parse(const char *s, size_t n, struct ipc_provider *p, const char **why)
{
    const char *field[3] = { NULL, NULL, NULL };
    size_t flen[3] = { 0, 0, 0 };
    size_t name_len, i, k = 0;
    const char *args = NULL;
    size_t args_len = 0;

    /* Name:keywords:level:args; the args part may itself contain ':' */
    for (i = 0; i < n && s[i] != ':'; i++) {
    }
    name_len = i;
    while (i < n && k < 2) {
        size_t start = ++i;

        while (i < n && s[i] != ':') {
            i++;
        }
        field[k] = s + start;
        flen[k] = i - start;
        k++;
    }
    if (i < n) {
        field[2] = s + i + 1;
        flen[2] = n - i - 1;
    }
    if (name_len == 0) {
        *why = "empty provider name";
        return -EINVAL;
    }
    p->keywords = 0;
    p->level = 4;
    if (field[0] != NULL && flen[0] > 0 && ipc_keywords_parse(field[0], flen[0], &p->keywords)) {
        *why = "keywords must be hexadecimal (at most 16 digits)";
        return -EINVAL;
    }
    if (field[1] != NULL && flen[1] > 0 && ipc_level_parse(field[1], flen[1], &p->level)) {
        *why = "level must be 0-5 or a level name";
        return -EINVAL;
    }
    if (field[2] != NULL) {
        args = field[2];
        args_len = flen[2];
    }
    p->name = strndup(s, name_len);
    p->args = args != NULL ? strndup(args, args_len) : strdup("");
    if (p->name == NULL || p->args == NULL) {
        return -ENOMEM;
    }
    return 0;
}

int
ipc_providers_parse(const char *spec, struct ipc_collect *c, const char **why)
{
    struct ipc_provider *grown;
    const char *s = spec;
    int err;

    *why = NULL;
    while (*s != '\0') {
        size_t n = ipc_provider_entry_len(s);

        if (n > 0) {
            if (c->provider_count >= IPC_MAX_PROVIDERS) {
                *why = "more than 1000 providers";
                return -EINVAL;
            }
            grown = realloc(c->providers, (c->provider_count + 1) * sizeof(*grown));
            if (grown == NULL) {
                return -ENOMEM;
            }
            c->providers = grown;
            memset(&grown[c->provider_count], 0, sizeof(*grown));
            c->provider_count++;
            err = ipc_provider_entry_parse(s, n, &grown[c->provider_count - 1], why);
            if (err < 0) {
                return err;
            }
        }
        s += n;
        if (*s == ',') {
            s++;
        }
    }
    if (c->provider_count == 0) {
        *why = "no provider given";
        return -EINVAL;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* ProcessInfo 1/2/3, ProcessEnvironment, advertise                                           */
/* ------------------------------------------------------------------------------------------ */

int
ipc_process_info_encode(const struct ipc_process_info *pi, int version, uint8_t *out, size_t cap)
{
    size_t pos = IPC_HEADER_SIZE, room, fixed;
    char *cmd = NULL;
    int err = 0;

    if (version < 1 || version > 3) {
        return -EINVAL;
    }
    if (cap < IPC_HEADER_SIZE) {
        return -ENOSPC;
    }
    if (cap > IPC_MAX_MESSAGE) {
        cap = IPC_MAX_MESSAGE;
    }
    /* Everything but the command line, to know how much room the command line may take. */
    fixed = IPC_HEADER_SIZE + 4 + 8 + 16 + 4;
    fixed += 4 + 2 * (ipc_utf16_units(pi->os ? pi->os : "") + 1);
    fixed += 4 + 2 * (ipc_utf16_units(pi->arch ? pi->arch : "") + 1);
    if (version >= 2) {
        fixed += 4 +
                 2 * (ipc_utf16_units(pi->entrypoint_assembly ? pi->entrypoint_assembly : "") + 1);
        fixed += 4 + 2 * (ipc_utf16_units(pi->product_version ? pi->product_version : "") + 1);
    }
    if (version >= 3) {
        fixed += 4 + 2 * (ipc_utf16_units(pi->runtime_id ? pi->runtime_id : "") + 1);
    }
    if (fixed > cap) {
        return -ENOSPC;
    }
    room = (cap - fixed) / 2; /* UTF-16 units (incl. the NUL) left for the command line */
    if (pi->command_line != NULL && ipc_utf16_units(pi->command_line) + 1 > room) {
        /* Truncate at a UTF-8 boundary so that the message still fits (the runtime would FAIL). */
        size_t keep = room > 2 ? room - 2 : 0;
        const unsigned char *s = (const unsigned char *)pi->command_line;
        size_t units = 0;

        while (*s != 0) {
            const unsigned char *prev = s;
            uint32_t cp = ipc_utf8_next(&s);

            units += cp >= 0x10000 ? 2 : 1;
            if (units > keep) {
                s = prev;
                break;
            }
        }
        cmd = strndup(pi->command_line, (size_t)(s - (const unsigned char *)pi->command_line));
        if (cmd == NULL) {
            return -ENOMEM;
        }
    }
    if (version == 3) {
        err = ipc_out_u32(out, cap, &pos, 1); /* version 1: the runtime identifier follows */
    }
    if (err == 0) {
        err = ipc_out_u64(out, cap, &pos, pi->pid);
    }
    if (err == 0) {
        err = ipc_out_bytes(out, cap, &pos, pi->cookie, 16);
    }
    if (err == 0) {
        err = ipc_string_encode(out, cap, &pos, cmd != NULL ? cmd : pi->command_line);
    }
    if (err == 0) {
        err = ipc_string_encode(out, cap, &pos, pi->os);
    }
    if (err == 0) {
        err = ipc_string_encode(out, cap, &pos, pi->arch);
    }
    if (err == 0 && version >= 2) {
        err = ipc_string_encode(out, cap, &pos, pi->entrypoint_assembly);
        if (err == 0) {
            err = ipc_string_encode(out, cap, &pos, pi->product_version);
        }
    }
    if (err == 0 && version >= 3) {
        err = ipc_string_encode(out, cap, &pos, pi->runtime_id);
    }
    free(cmd);
    if (err < 0) {
        return err;
    }
    ipc_header_encode(out, (uint16_t)pos, IPC_SET_SERVER, IPC_RESPONSE_OK);
    return (int)pos;
}

void
ipc_process_info_fini(struct ipc_process_info *pi)
{
    free((char *)pi->command_line);
    free((char *)pi->os);
    free((char *)pi->arch);
    free((char *)pi->entrypoint_assembly);
    free((char *)pi->product_version);
    free((char *)pi->runtime_id);
    memset(pi, 0, sizeof(*pi));
}

int
ipc_process_info_decode(const uint8_t *payload, size_t len, int version,
                        struct ipc_process_info *out)
{
    struct ipc_cursor c = { payload, len, 0 };
    char *s[6] = { NULL, NULL, NULL, NULL, NULL, NULL };
    uint32_t v3 = 0;
    int err = 0, n, i;

    memset(out, 0, sizeof(*out));
    if (version < 1 || version > 3) {
        return -EINVAL;
    }
    if (version == 3) {
        err = ipc_cursor_u32(&c, &v3);
    }
    if (err == 0) {
        err = ipc_cursor_u64(&c, &out->pid);
    }
    if (err == 0 && c.len - c.pos < 16) {
        err = -EBADMSG;
    }
    if (err < 0) {
        return err;
    }
    memcpy(out->cookie, c.p + c.pos, 16);
    c.pos += 16;
    n = version == 1 ? 3 : 5;
    if (version == 3 && v3 >= 1) {
        n = 6;
    }
    for (i = 0; i < n && err == 0; i++) {
        err = ipc_string_decode(c.p, c.len, &c.pos, &s[i]);
    }
    out->command_line = s[0];
    out->os = s[1];
    out->arch = s[2];
    out->entrypoint_assembly = s[3];
    out->product_version = s[4];
    out->runtime_id = s[5];
    if (err < 0) {
        ipc_process_info_fini(out);
    }
    return err;
}

int
ipc_environment_encode(char *const *envp, size_t max_bytes, uint8_t **out, size_t *out_len)
{
    size_t total = 4, cap, pos, i;
    uint32_t count = 0;
    uint8_t *buf;

    *out = NULL;
    *out_len = 0;
    for (i = 0; envp != NULL && envp[i] != NULL; i++) {
        size_t need = 4 + 2 * (ipc_utf16_units(envp[i]) + 1);

        if (total + need <= max_bytes) {
            total += need;
        }
    }
    cap = 26 + total;
    buf = malloc(cap);
    if (buf == NULL) {
        return -ENOMEM;
    }
    pos = 30;
    total = 4;
    for (i = 0; envp != NULL && envp[i] != NULL; i++) {
        size_t need = 4 + 2 * (ipc_utf16_units(envp[i]) + 1);

        if (total + need > max_bytes || ipc_string_encode(buf, cap, &pos, envp[i]) < 0) {
            continue;
        }
        total += need;
        count++;
    }
    ipc_header_encode(buf, 26, IPC_SET_SERVER, IPC_RESPONSE_OK);
    ipc_put_u32(buf + 20, (uint32_t)total);
    ipc_put_u16(buf + 24, 0);
    ipc_put_u32(buf + 26, count);
    *out = buf;
    *out_len = pos;
    return 0;
}

void
ipc_advertise_encode(uint8_t out[IPC_ADVERTISE_SIZE], const uint8_t cookie[16], uint64_t pid)
{
    memcpy(out, IPC_ADVERTISE_MAGIC, 8);
    memcpy(out + 8, cookie, 16);
    ipc_put_u64(out + 24, pid);
    ipc_put_u16(out + 32, 0);
}

void
ipc_advertise_set_flags(uint8_t out[IPC_ADVERTISE_SIZE], uint16_t flags)
{
    ipc_put_u16(out + 32, flags);
}

uint16_t
ipc_advertise_flags(const uint8_t buf[IPC_ADVERTISE_SIZE])
{
    return (uint16_t)(buf[32] | buf[33] << 8);
}

int
ipc_advertise_decode(const uint8_t *buf, size_t len, uint8_t cookie[16], uint64_t *pid)
{
    struct ipc_cursor c = { buf, len, 24 };

    if (len < IPC_ADVERTISE_SIZE) {
        return -EBADMSG;
    }
    if (memcmp(buf, IPC_ADVERTISE_MAGIC, 8) != 0) {
        return -EPROTO;
    }
    memcpy(cookie, buf + 8, 16);
    return ipc_cursor_u64(&c, pid);
}

int
ipc_session_config_enables(const struct ipc_session_config *cfg, const char *provider,
                           uint64_t keywords, uint32_t level)
{
    uint32_t i;

    for (i = 0; i < cfg->provider_count; i++) {
        const struct ipc_provider *p = &cfg->providers[i];
        int star = strcmp(p->name, "*") == 0;

        if (!star && strcasecmp(p->name, provider) != 0) {
            continue;
        }
        if (keywords != 0 && (keywords & p->keywords) == 0) {
            continue;
        }
        if (level != 0 && p->level < level) {
            continue;
        }
        return 1;
    }
    return 0;
}
