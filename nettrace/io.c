/* SPDX-License-Identifier: MIT */
/*
 * nettrace/io.c - file-descriptor sink and source for the writer and the reader, and the
 * writer's clock. Context: any thread; the fd is borrowed (never closed here). EINTR is retried
 * so a profiler's signals never turn into a truncated trace.
 */
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "nettrace/nettrace.h"

static int
nt_sink_fd_write(void *ctx, const void *buf, size_t len)
{
    const int *fd = ctx;
    const char *p = buf;
    ssize_t n;

    while (len > 0) {
        n = write(*fd, p, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        if (n == 0) {
            return -EIO; /* write(2) never returns 0 for len > 0 on a working fd */
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

void
nt_sink_fd(struct nt_sink *sink, int *fd)
{
    sink->write = nt_sink_fd_write;
    sink->ctx = fd;
}

static ssize_t
nt_source_fd_read(void *ctx, void *buf, size_t len)
{
    const int *fd = ctx;
    ssize_t n;

    do {
        n = read(*fd, buf, len);
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

void
nt_source_fd(struct nt_source *src, int *fd)
{
    src->read = nt_source_fd_read;
    src->ctx = fd;
}

uint64_t
nt_clock_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
