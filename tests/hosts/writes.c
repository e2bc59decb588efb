/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/writes.c - blocking transfers of 1 MiB that a signal could cut short: write and
 * writev into a pipe; send, sendto, sendmsg and sendfile (from a memfd) into a stream socketpair;
 * recv with MSG_WAITALL out of one; getrandom of 1 MiB (random(7): a request over 256 bytes can be
 * cut). A reader thread drains the other end as it fills, so each call blocks and runs by turns,
 * and a signal that comes while it copies ends it with the bytes moved so far (pipe(7)). The host
 * asks for no signal, so bare no call is ever short. Prints, per call, how many of CALLS came back
 * short and whether every byte arrived in order.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "hosts.h"

#define CALLS      64
#define CALL_BYTES (1u << 20)

enum {
    W_WRITE,
    W_WRITEV,
    W_SEND,
    W_SENDTO,
    W_SENDMSG,
    W_SENDFILE,
    W_RECV_WAITALL,
    W_RECVMSG_WAITALL,
    W_GETRANDOM,
    W_CASES
};
static const char *const names[W_CASES] = { "write",        "writev",          "send",
                                            "sendto",       "sendmsg",         "sendfile",
                                            "recv-waitall", "recvmsg-waitall", "getrandom" };

struct drain {
    int fd;
    size_t total;
    int in_order;
};

static unsigned char
pattern_at(size_t i)
{
    return (unsigned char)(i * 31u + (i >> 20));
}

/* Reads total bytes from fd in small reads, checking the pattern. */
static void *
drainer(void *arg)
{
    struct drain *d = arg;
    static unsigned char buf[48 * 1024];
    size_t got = 0;

    d->in_order = 1;
    while (got < d->total) {
        ssize_t n = read(d->fd, buf, sizeof(buf));

        if (n <= 0) {
            d->in_order = 0;
            break;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != pattern_at(got + (size_t)i)) {
                d->in_order = 0;
            }
        }
        got += (size_t)n;
    }
    return NULL;
}

/* Writes total bytes to fd in chunks of 32 KiB: the peer of recv with MSG_WAITALL. */
static void *
feeder(void *arg)
{
    struct drain *d = arg;
    static unsigned char buf[32 * 1024];
    size_t put = 0;

    d->in_order = 1;
    while (put < d->total) {
        size_t k = d->total - put < sizeof(buf) ? d->total - put : sizeof(buf);
        ssize_t n;

        for (size_t i = 0; i < k; i++) {
            buf[i] = pattern_at(put + i);
        }
        n = write(d->fd, buf, k);
        if (n <= 0) {
            d->in_order = 0;
            break;
        }
        put += (size_t)n;
    }
    return NULL;
}

/* sendfile of buf's bytes from a memfd of their own: the socket may hold the file's pages
 * (unix_stream_sendpage takes them without a copy) until the reader has them. */
static ssize_t
sendfile_call(int fd, const unsigned char *buf)
{
    int src = memfd_create("host-writes", 0);
    off_t from = 0;
    ssize_t n = -1;

    if (src >= 0 && write(src, buf, CALL_BYTES) == (ssize_t)CALL_BYTES) {
        n = sendfile(fd, src, &from, CALL_BYTES);
    }
    if (src >= 0) {
        close(src);
    }
    return n;
}

/* One call of case c moving CALL_BYTES from buf at offset off of the stream. */
static ssize_t
one_call(int c, int fd, unsigned char *buf)
{
    struct iovec iov[4];
    struct msghdr m = { 0 };

    for (int i = 0; i < 4; i++) {
        iov[i].iov_base = buf + i * (CALL_BYTES / 4);
        iov[i].iov_len = CALL_BYTES / 4;
    }
    switch (c) {
    case W_WRITE:
        return write(fd, buf, CALL_BYTES);
    case W_WRITEV:
        return writev(fd, iov, 4);
    case W_SEND:
        return send(fd, buf, CALL_BYTES, 0);
    case W_SENDTO:
        return sendto(fd, buf, CALL_BYTES, 0, NULL, 0);
    case W_SENDMSG:
        m.msg_iov = iov;
        m.msg_iovlen = 4;
        return sendmsg(fd, &m, 0);
    case W_SENDFILE:
        return sendfile_call(fd, buf);
    case W_RECVMSG_WAITALL:
        m.msg_iov = iov;
        m.msg_iovlen = 4;
        return recvmsg(fd, &m, MSG_WAITALL);
    default:
        return recv(fd, buf, CALL_BYTES, MSG_WAITALL);
    }
}

/* getrandom's case: no stream, no reader; a short call is counted and the rest asked for. */
static int
getrandom_shorts(unsigned char *buf)
{
    int shorts = 0;

    for (int k = 0; k < CALLS; k++) {
        ssize_t n = getrandom(buf, CALL_BYTES, 0);

        shorts += n != (ssize_t)CALL_BYTES;
        for (size_t done = n > 0 ? (size_t)n : 0; done < CALL_BYTES;) {
            n = getrandom(buf + done, CALL_BYTES - done, 0);
            done += n > 0 ? (size_t)n : 0;
        }
    }
    return shorts;
}

int
main(void)
{
    unsigned char *buf = malloc(CALL_BYTES);
    int rc = 0;

    if (buf == NULL) {
        return 2;
    }
    host_wait_go();
    for (int c = 0; c < W_CASES; c++) {
        struct drain d = { .total = (size_t)CALLS * CALL_BYTES };
        pthread_t th;
        int fds[2], shorts = 0, fails = 0, in_order = 1;
        size_t off = 0;

        if (c == W_GETRANDOM) {
            shorts = getrandom_shorts(buf);
            printf("%s: %d calls of %u bytes, %d short\n", names[c], CALLS, CALL_BYTES, shorts);
            rc |= shorts != 0;
            continue;
        }
        if ((c <= W_WRITEV ? pipe(fds) : socketpair(AF_UNIX, SOCK_STREAM, 0, fds)) != 0) {
            return 2;
        }
        /* the writing cases drain fds[0]; recv's case reads fds[0] fed from fds[1] */
        d.fd = c >= W_RECV_WAITALL ? fds[1] : fds[0];
        pthread_create(&th, NULL, c >= W_RECV_WAITALL ? feeder : drainer, &d);
        for (int k = 0; k < CALLS; k++) {
            int fd = c >= W_RECV_WAITALL ? fds[0] : fds[1];
            size_t done = 0;

            if (c < W_RECV_WAITALL) {
                for (size_t i = 0; i < CALL_BYTES; i++) {
                    buf[i] = pattern_at(off + i);
                }
            }
            /* a short call is counted, and the rest moved so the stream stays whole */
            while (done < CALL_BYTES) {
                ssize_t n = done == 0 ? one_call(c, fd, buf)
                                      : (c >= W_RECV_WAITALL
                                                 ? recv(fd, buf + done, CALL_BYTES - done, 0)
                                                 : write(fd, buf + done, CALL_BYTES - done));

                if (n <= 0) {
                    fails++;
                    break;
                }
                if (done == 0 && (size_t)n < CALL_BYTES) {
                    shorts++;
                }
                done += (size_t)n;
            }
            if (c >= W_RECV_WAITALL) {
                for (size_t i = 0; i < done; i++) {
                    in_order &= buf[i] == pattern_at(off + i);
                }
            }
            off += CALL_BYTES;
        }
        close(fds[1]);
        pthread_join(th, NULL);
        close(fds[0]);
        in_order &= d.in_order;
        printf("%s: %d calls of %u bytes, %d short, %d failed, %s\n", names[c], CALLS, CALL_BYTES,
               shorts, fails, in_order ? "every byte in order" : "bytes lost or out of order");
        rc |= shorts != 0 || fails != 0 || !in_order;
    }
    free(buf);
    return rc;
}
