/* SPDX-License-Identifier: MIT */
/*
 * nettrace/internal.h - declarations private to nettrace/: little-endian stores, LEB128
 * varuint encoding and a strict UTF-8 decoder shared by the writer, the payload builder and the
 * GUID code. Never included from outside nettrace/ (tests excepted: they are white-box).
 * Append-only: the writer and the reader both add their private helpers here, each in its own
 * section. Context: any thread; nothing here allocates.
 */
#ifndef NT_INTERNAL_H
#define NT_INTERNAL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------------------ */
/* Writer side (owner: writer.c, payload.c, guid.c)                                           */
/* ------------------------------------------------------------------------------------------ */

/* Longest LEB128 encoding of a 64-bit value (format doc 2). */
#define NT_VARUINT_MAX 10

static inline void
nt_store_u16le(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void
nt_store_u32le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void
nt_store_u64le(uint8_t *p, uint64_t v)
{
    nt_store_u32le(p, (uint32_t)v);
    nt_store_u32le(p + 4, (uint32_t)(v >> 32));
}

/* Writes v as unsigned LEB128 (not zig-zag: format doc 2) and returns the byte count (1..10). */
static inline size_t
nt_varuint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;

    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/*
 * Decodes one code point of NUL-terminated UTF-8 at *s and advances *s. Returns 1 and stores the
 * code point, 0 at the terminating NUL (*s unchanged), or -EINVAL for an invalid sequence: a
 * stray continuation byte, a truncated sequence, an overlong form, a UTF-16 surrogate or a value
 * above U+10FFFF. Strictness matters because the result is re-encoded as UTF-16 on the wire.
 */
static inline int
nt_utf8_next(const char **s, uint32_t *cp)
{
    const uint8_t *p = (const uint8_t *)*s;
    uint32_t c = p[0];
    uint32_t min;
    int n;
    int i;

    if (c == 0) {
        return 0;
    }
    if (c < 0x80) {
        *cp = c;
        *s += 1;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        n = 1;
        c &= 0x1F;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 2;
        c &= 0x0F;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 3;
        c &= 0x07;
        min = 0x10000;
    } else {
        return -EINVAL; /* continuation byte, C0/C1 overlong lead, or F5..FF */
    }
    for (i = 1; i <= n; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            return -EINVAL; /* also catches the NUL of a truncated sequence */
        }
        c = (c << 6) | (p[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        return -EINVAL;
    }
    *cp = c;
    *s += n + 1;
    return 1;
}

/*
 * Bytes that utf8 needs as NUL-terminated UTF-16 (terminator included), or -EINVAL for invalid
 * UTF-8. NULL counts as "".
 */
static inline long
nt_utf16_size(const char *utf8)
{
    long size = 2;
    uint32_t cp;
    int rc;

    if (utf8 == NULL) {
        return 2;
    }
    while ((rc = nt_utf8_next(&utf8, &cp)) > 0) {
        size += cp >= 0x10000 ? 4 : 2;
    }
    return rc < 0 ? rc : size;
}

/*
 * Writes valid UTF-8 (checked by nt_utf16_size() first) as UTF-16LE with a NUL terminator and
 * returns the byte count. out must have nt_utf16_size(utf8) bytes.
 */
static inline size_t
nt_utf16_put(uint8_t *out, const char *utf8)
{
    size_t n = 0;
    uint32_t cp;

    while (utf8 != NULL && nt_utf8_next(&utf8, &cp) > 0) {
        if (cp >= 0x10000) {
            cp -= 0x10000;
            nt_store_u16le(out + n, (uint16_t)(0xD800 | (cp >> 10)));
            nt_store_u16le(out + n + 2, (uint16_t)(0xDC00 | (cp & 0x3FF)));
            n += 4;
        } else {
            nt_store_u16le(out + n, (uint16_t)cp);
            n += 2;
        }
    }
    nt_store_u16le(out + n, 0);
    return n + 2;
}

/*
 * The UTC calendar date of secs since 1970 (proleptic Gregorian, any sign), as the stream
 * header's SYSTEMTIME wants it. Pure arithmetic on purpose: glibc's gmtime_r() loads the time
 * zone (/etc/localtime: an open, two reads and its parse) at its first call, and every process
 * `pipeprof record` runs writes one header.
 */
struct nt_utc {
    int64_t year;
    int month, day, weekday, hour, minute, second; /* month 1-12, weekday 0 = Sunday */
};

static inline void
nt_utc_from_unix(int64_t secs, struct nt_utc *out)
{
    int64_t days = secs / 86400, rem = secs % 86400, era, doe, yoe, doy, mp;

    if (rem < 0) {
        rem += 86400;
        days -= 1;
    }
    out->hour = (int)(rem / 3600);
    out->minute = (int)(rem % 3600 / 60);
    out->second = (int)(rem % 60);
    out->weekday = (int)(((days + 4) % 7 + 7) % 7); /* 1970-01-01 was a Thursday */
    /* Counted from 0000-03-01, in 400-year eras of 146097 days, so leap days end each year. */
    days += 719468;
    era = (days >= 0 ? days : days - 146096) / 146097;
    doe = days - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153; /* months from March */
    out->day = (int)(doy - (153 * mp + 2) / 5 + 1);
    out->month = (int)(mp < 10 ? mp + 3 : mp - 9);
    out->year = yoe + era * 400 + (out->month <= 2);
}

/* The inverse: the seconds since 1970 of a UTC calendar date (its weekday unused). */
static inline int64_t
nt_unix_from_utc(const struct nt_utc *in)
{
    int64_t y = in->year - (in->month <= 2), era, yoe, doy, doe;

    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (in->month > 2 ? in->month - 3 : in->month + 9) + 2) / 5 + in->day - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return (era * 146097 + doe - 719468) * 86400 + in->hour * 3600 + in->minute * 60 + in->second;
}

#endif /* NT_INTERNAL_H */
