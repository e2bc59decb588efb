/* SPDX-License-Identifier: MIT */
/*
 * common/errmsg.h - the refusal step of the parsers that explain what they refuse
 * (agent/config.c, http/url.c): format the reason into the caller's buffer and fail.
 * Header only, libc only.
 */
#ifndef PP_ERRMSG_H
#define PP_ERRMSG_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

static inline int pp_errmsg_einval(char *err, size_t errlen, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/*
 * Writes the message to err (errlen bytes, truncated, NUL-terminated; nothing when err is NULL
 * or errlen is 0) and returns -EINVAL, so a parser can `return pp_errmsg_einval(...)`.
 */
static inline int
pp_errmsg_einval(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL && errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

#endif /* PP_ERRMSG_H */
