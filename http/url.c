/* SPDX-License-Identifier: MIT */
/*
 * http/url.c - parses the listen URL of the HTTP endpoints (http_url_parse), after expanding
 * the {PID} and {UUID} patterns swift-profile-recorder's PROFILE_RECORDER_SERVER_URL_PATTERN
 * uses. Host names are never resolved (a library inside a host process must not block on DNS):
 * only IP literals and "localhost" are accepted. Context: any thread.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/errmsg.h"
#include "http/http.h"

static void
http_uuid(char out[37])
{
    unsigned char b[16];
    size_t i, n = 0;

    if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
        /* early boot without entropy: uniqueness is all a socket name needs */
        uint64_t x = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)clock();

        for (i = 0; i < sizeof(b); i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            b[i] = (unsigned char)(x >> 56);
        }
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    for (i = 0; i < sizeof(b); i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            out[n++] = '-';
        }
        snprintf(out + n, 3, "%02X", b[i]);
        n += 2;
    }
    out[n] = '\0';
}

/* Copies url into buf with {PID} and {UUID} replaced. Returns 0 or -ENAMETOOLONG. */
static int
http_url_expand(const char *url, char *buf, size_t cap)
{
    size_t n = 0;

    while (*url != '\0') {
        char piece[40];
        const char *add = piece;
        size_t len;

        if (strncmp(url, "{PID}", 5) == 0) {
            snprintf(piece, sizeof(piece), "%ld", (long)getpid());
            url += 5;
        } else if (strncmp(url, "{UUID}", 6) == 0) {
            http_uuid(piece);
            url += 6;
        } else {
            piece[0] = *url++;
            piece[1] = '\0';
        }
        len = strlen(add);
        if (n + len + 1 > cap) {
            return -ENAMETOOLONG;
        }
        memcpy(buf + n, add, len);
        n += len;
    }
    buf[n] = '\0';
    return 0;
}

static int
http_hex(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* Percent-decodes s[0, len) into out (cap bytes with the NUL). Returns 0 or -EINVAL. */
static int
http_unescape(const char *s, size_t len, char *out, size_t cap)
{
    size_t i, n = 0;

    for (i = 0; i < len; i++) {
        char c = s[i];

        if (c == '%') {
            int hi, lo;

            if (i + 2 >= len) {
                return -EINVAL;
            }
            hi = http_hex(s[i + 1]);
            lo = http_hex(s[i + 2]);
            if (hi < 0 || lo < 0) {
                return -EINVAL;
            }
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        if (c == '\0' || n + 1 >= cap) {
            return -EINVAL;
        }
        out[n++] = c;
    }
    out[n] = '\0';
    return 0;
}

static int
http_url_unix(const char *path, size_t len, struct http_url *out, char *err, size_t errlen)
{
    if (len == 0 || path[0] != '/') {
        return pp_errmsg_einval(err, errlen, "the socket path must be absolute (unix:///abs/path)");
    }
    if (len >= sizeof(out->path)) {
        return pp_errmsg_einval(err, errlen, "the socket path is longer than %zu bytes",
                                sizeof(out->path) - 1);
    }
    memcpy(out->path, path, len);
    out->path[len] = '\0';
    if (memchr(out->path, '\0', len) != NULL) {
        return pp_errmsg_einval(err, errlen, "the socket path contains a NUL byte");
    }
    out->family = AF_UNIX;
    out->loopback = 1;
    return 0;
}

static int
http_url_inet(const char *hostport, struct http_url *out, int allow_remote, char *err,
              size_t errlen)
{
    char host[64];
    const char *p, *port_at;
    size_t hlen;
    unsigned long port = 0;
    int v6 = 0;

    if (hostport[0] == '[') {
        p = strchr(hostport, ']');
        if (p == NULL) {
            return pp_errmsg_einval(err, errlen, "missing ']' after the IPv6 address");
        }
        hostport++;
        hlen = (size_t)(p - hostport);
        port_at = p + 1;
        v6 = 1;
    } else {
        p = hostport + strcspn(hostport, ":/");
        hlen = (size_t)(p - hostport);
        port_at = p;
    }
    if (hlen == 0 || hlen >= sizeof(host)) {
        return pp_errmsg_einval(err, errlen, "missing or overlong host in the URL");
    }
    memcpy(host, hostport, hlen);
    host[hlen] = '\0';
    if (*port_at != ':' || port_at[1] < '0' || port_at[1] > '9') {
        return pp_errmsg_einval(err, errlen, "the URL needs a port, as in http://127.0.0.1:7377");
    }
    for (p = port_at + 1; *p >= '0' && *p <= '9'; p++) {
        port = port * 10 + (unsigned long)(*p - '0');
        if (port > 65535) {
            return pp_errmsg_einval(err, errlen, "the port must be 0..65535");
        }
    }
    if (*p == '/') {
        p++;
    }
    if (*p != '\0') {
        return pp_errmsg_einval(err, errlen, "the listen URL takes no path, query or user info");
    }

    memset(&out->addr, 0, sizeof(out->addr));
    if (!v6 && strcmp(host, "localhost") == 0) {
        snprintf(host, sizeof(host), "127.0.0.1");
    }
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&out->addr;

        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) {
            return pp_errmsg_einval(err, errlen, "\"%s\" is not an IPv6 address", host);
        }
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        out->family = AF_INET6;
        out->loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
                        (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&out->addr;

        if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
            return pp_errmsg_einval(err, errlen,
                                    "\"%s\" is not an IP address (host names are not resolved; "
                                    "use 127.0.0.1, [::1] or localhost)",
                                    host);
        }
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        out->family = AF_INET;
        out->loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (!out->loopback && !allow_remote) {
        return pp_errmsg_einval(err, errlen,
                                "refusing to listen on %s, which is not a loopback address: the "
                                "endpoints have no authentication (set allow_remote to insist)",
                                host);
    }
    return 0;
}

int
http_url_parse(const char *url, int allow_remote, struct http_url *out, char *err, size_t errlen)
{
    char buf[1024], path[sizeof(out->path)];
    const char *rest;

    memset(out, 0, sizeof(*out));
    if (url == NULL || url[0] == '\0') {
        return pp_errmsg_einval(err, errlen, "no listen URL");
    }
    if (http_url_expand(url, buf, sizeof(buf)) != 0) {
        return pp_errmsg_einval(err, errlen, "the listen URL is too long");
    }
    if (strncmp(buf, "unix://", 7) == 0) {
        rest = buf + 7;
        return http_url_unix(rest, strlen(rest), out, err, errlen);
    }
    if (strncmp(buf, "http+unix://", 12) == 0) {
        /* swift-profile-recorder's form: the percent-encoded path is the host */
        rest = buf + 12;
        if (http_unescape(rest, strcspn(rest, "/"), path, sizeof(path)) != 0) {
            return pp_errmsg_einval(err, errlen, "bad percent-encoded socket path in \"%s\"", buf);
        }
        return http_url_unix(path, strlen(path), out, err, errlen);
    }
    if (strncmp(buf, "http://", 7) == 0) {
        return http_url_inet(buf + 7, out, allow_remote, err, errlen);
    }
    return pp_errmsg_einval(err, errlen,
                            "unsupported listen URL \"%.200s\": use http://127.0.0.1:PORT, "
                            "http://[::1]:PORT or unix:///path",
                            buf);
}
