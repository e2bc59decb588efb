/* SPDX-License-Identifier: MIT */
/*
 * host/writes.c - transfers one of the agent's signals could cut short.
 *
 *   write writev send sendto sendmsg
 *                    interposed because a blocking write to a pipe or a stream socket that has
 *                    moved some bytes returns the count moved so far when a signal comes before
 *                    it is done (pipe(7), POSIX's "partial transfer"), and the host has not
 *                    asked for any signal: bare, its one 4 MiB write() to a pipe moves 4 MiB.
 *                    Under `record --mode wall` one moved 245488 bytes (host-contract-fds-range,
 *                    a fresh-clone CI run): a wall pass signals a thread that runs, and a copy
 *                    into a pipe runs. CPU mode's timers and overflows come while it runs too.
 *                    When the call returns short, one of the agent's signals was handled by the
 *                    thread during it and the fd blocks (no O_NONBLOCK, no MSG_DONTWAIT), the
 *                    rest is written here, as many times as the agent cuts it again, and the
 *                    total is returned. A short return nobody caused (the reader closed the
 *                    pipe, SO_SNDTIMEO ran out) or that the host's own signal caused is
 *                    returned as it is, and so is what was moved before a continuation failed
 *                    (with errno as the first call left it: a transfer that moved bytes does not
 *                    fail). XXX(S) of host/internal.h applies: a host signal handled in the same
 *                    call as one of the agent's is taken for the agent's, and the write goes on.
 *                    The host's on a library fd fail with EBADF, as bare, and write nothing
 *                    (fds.c's header, the data calls: one bit test of the number first).
 *   getrandom        a request of more than 256 bytes is cut short by a signal the same way
 *                    (random(7)): 8 MiB asked for, 40 of 40 calls short under `record --mode
 *                    wall` at 1000 Hz, none bare. The rest is asked for in the same way.
 *   sendfile sendfile64
 *                    the same to a stream socket: a 4 MiB sendfile from a file to a socketpair
 *                    drained slowly came back short 8 of 12 times under `record --mode wall` at
 *                    1000 Hz, none bare. The kernel has moved the offset on; the rest is the
 *                    count left. Only to a socket (fstat, on a short return the agent caused):
 *                    to a pipe sendfile is short bare too (12 of 12 of those), and going on
 *                    would wait for a reader where bare it returns.
 *   (recv recvfrom recvmsg with MSG_WAITALL)
 *                    the mirror image: a signal ends a stream's wait for all the bytes with what
 *                    has come (0 or 1 of 128 calls of 1 MiB in wall mode at 1000 Hz; rare, as
 *                    the interposers mark the thread blocked and the wall sampler does not signal
 *                    it). They are blocking.c's and eintr.c's, which call host_recv_waitall,
 *                    host_recvfrom_waitall and host_recvmsg_waitall below. A recvmsg with a
 *                    control buffer stays short: fds or credentials a second call received would
 *                    be lost with its ancillary data. The continuations ask for no address.
 *
 * Not interposed: pwrite and pwritev (a pipe or a socket cannot take them, and a regular file's
 * write is not cut by a signal), splice and vmsplice (short by design: a host loops on them),
 * and the stdio functions (glibc's own loop writes what a cut left).
 * Without the agent's hooks every call goes straight to libc. The fast path is the thread's count
 * of the agent's signals read before and after the call and one compare; a vector's length is
 * summed only after a call the agent's signal met (bench-interpose: write to /dev/null,
 * docs/performance.md). A continuation is not counted in ag_stats.eintr_absorbed (EINTRs only). A
 * vector is continued through a window of HOST_IOV_WINDOW entries on the interposer's stack (the
 * host may run on a small alternate stack): the kernel takes the rest of a long vector in more
 * calls, as it would split it anyway.
 *
 * Held by: host-contract-writes (tests/hosts/writes.c: write and writev of 1 MiB into a pipe,
 * send, sendto, sendmsg and sendfile into a socketpair and recv with MSG_WAITALL out of one,
 * getrandom of 1 MiB, 64 calls of each while sampled at 1000 Hz in CPU, wall and listen mode; bare
 * and sampled: none short. Without this file, wall mode: write 93 of 128 short, writev 85, send 14,
 * sendto 14, sendmsg 11, recv with MSG_WAITALL 1, getrandom 128; without sendfile's interposer,
 * sendfile 25 to 32 of 64).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "host/internal.h"

HOST_ANCHOR(writes);

/*
 * The real functions, resolved when the agent's hooks are installed (host_writes_resolve, from
 * host_set_agent_hooks): the agent's signal handler wakes its manager with a write() to an
 * eventfd, which comes here, and a handler must never reach dlsym. Until then (a write before
 * the agent, or with no agent at all) the first call resolves it as the other files' do.
 */
static _Atomic(void *) real_write_p, real_writev_p, real_send_p, real_sendto_p, real_sendmsg_p,
        real_getrandom_p, real_sendfile_p, real_sendfile64_p;

void
host_writes_resolve(void)
{
    (void)host_real(&real_write_p, "write");
    (void)host_real(&real_writev_p, "writev");
    (void)host_real(&real_send_p, "send");
    (void)host_real(&real_sendto_p, "sendto");
    (void)host_real(&real_sendmsg_p, "sendmsg");
    (void)host_real(&real_getrandom_p, "getrandom");
    (void)host_real(&real_sendfile_p, "sendfile");
    (void)host_real(&real_sendfile64_p, "sendfile64");
}

/* HOST_REAL_OR_ENOSYS with the slot above. */
#define HOST_WRITES_REAL(ret, params, name)                                \
    ret(*real) params = (ret(*) params)host_real(&real_##name##_p, #name); \
                                                                           \
    if (real == NULL) {                                                    \
        errno = ENOSYS;                                                    \
        return -1;                                                         \
    }

#define HOST_IOV_WINDOW 8

/* In host_cut_by_agent's flags: the call goes on only when fd is a socket (sendfile). The bit is
 * MSG_CMSG_CLOEXEC's, a receive's flag that no send or write passes. */
#define HOST_XFER_SOCKET_ONLY 0x40000000

/* One transfer of the call being continued (the interposer's real function and its arguments):
 * moves what iov[0..cnt) holds and returns the real call's result. */
typedef ssize_t (*host_xfer_fn)(void *call, const struct iovec *iov, int cnt);

/* 1 when the short transfer of a call on fd with flags (its MSG_ flags, 0 for write) that
 * began when the thread had handled sig0 of the agent's signals is the agent's doing. */
static int
host_cut_by_agent(const struct host_agent_hooks *h, uint32_t sig0, int fd, int flags)
{
    int fl;

    if (h->signals_handled() == sig0 || (flags & MSG_DONTWAIT)) {
        return 0;
    }
    if (fd < 0) {
        return 1; /* no fd: getrandom */
    }
    if (flags & HOST_XFER_SOCKET_ONLY) {
        struct stat st;

        if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
            return 0;
        }
    }
    fl = fcntl(fd, F_GETFL);
    return fl >= 0 && !(fl & O_NONBLOCK);
}

/*
 * The call moved done bytes of iov[0..cnt) and the agent cut it: moves the rest by xfer, again
 * after each cut of the agent's (or EINTR of its signal), and returns the total with errno at
 * err (a call that moved bytes leaves errno as it was). fd and flags as host_cut_by_agent.
 */
static ssize_t
host_xfer_rest(const struct host_agent_hooks *h, host_xfer_fn xfer, void *call,
               const struct iovec *iov, int cnt, size_t done, int fd, int flags, int err)
{
    struct iovec win[HOST_IOV_WINDOW];
    size_t skip = done, want;
    uint32_t sig0;
    ssize_t n;
    int k;

    for (;;) {
        while (cnt > 0 && skip >= iov->iov_len) {
            skip -= iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt <= 0) {
            break;
        }
        k = cnt < HOST_IOV_WINDOW ? cnt : HOST_IOV_WINDOW;
        memcpy(win, iov, (size_t)k * sizeof(*win));
        win[0].iov_base = (void *)((uintptr_t)win[0].iov_base + skip); /* sendfile's is NULL */
        win[0].iov_len -= skip;
        want = 0;
        for (int i = 0; i < k; i++) {
            want += win[i].iov_len;
        }
        sig0 = h->signals_handled();
        n = xfer(call, win, k);
        if (n < 0) {
            if (errno == EINTR && h->signals_handled() != sig0) {
                h->eintr_absorbed();
                continue;
            }
            break; /* what moved before stands; the error is not the host's to see */
        }
        done += (size_t)n;
        skip += (size_t)n;
        if ((size_t)n < want) {
            if (n == 0 || !host_cut_by_agent(h, sig0, fd, flags)) {
                break;
            }
        }
    }
    errno = err;
    return (ssize_t)done;
}

/* After a call that moved n bytes of the cnt buffers of iov with sig0 the agent's count of
 * signals before it: n, or with its rest moved by xfer when the agent cut it. */
static ssize_t
host_xfer_made(const struct host_agent_hooks *h, host_xfer_fn xfer, void *call,
               const struct iovec *iov, int cnt, int fd, int flags, uint32_t sig0, ssize_t n)
{
    size_t want = 0;

    /* The fast path: none of the agent's signals came during the call (a second read of the
     * count), whatever it moved. */
    if (n <= 0 || h->signals_handled() == sig0) {
        return n;
    }
    for (int i = 0; i < cnt; i++) {
        want += iov[i].iov_len;
    }
    if ((size_t)n >= want || !host_cut_by_agent(h, sig0, fd, flags)) {
        return n;
    }
    return host_xfer_rest(h, xfer, call, iov, cnt, (size_t)n, fd, flags, errno);
}

/* A call (the agent installed) that moves the cnt buffers of iov by xfer, on fd with flags:
 * made once, and its rest moved when the agent cut it. */
static ssize_t
host_xfer(const struct host_agent_hooks *h, host_xfer_fn xfer, void *call, const struct iovec *iov,
          int cnt, int fd, int flags)
{
    uint32_t sig0 = h->signals_handled();
    ssize_t n = xfer(call, iov, cnt);

    return host_xfer_made(h, xfer, call, iov, cnt, fd, flags, sig0, n);
}

/* Each interposer's call: its real function and its arguments. The xfer functions make it with
 * the buffers given (for write, send, sendto and recv one: cnt is 1). */
struct host_write_call {
    ssize_t (*real)(int, const void *, size_t);
    int fd;
};

static ssize_t
host_write_xfer(void *call, const struct iovec *iov, int cnt)
{
    const struct host_write_call *c = call;

    (void)cnt;
    return c->real(c->fd, iov[0].iov_base, iov[0].iov_len);
}

HOST_EXPORT ssize_t
write(int fd, const void *buf, size_t len)
{
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1;
    }
    if (__builtin_expect(fd == HOST_FD_NEVER, 0) &&
        host_fds_sealed_call(fd, __builtin_return_address(0))) {
        return (ssize_t)len; /* libuv's fork child handler after a seccomp filter (internal.h) */
    }
    HOST_WRITES_REAL(ssize_t, (int, const void *, size_t), write)
    const struct host_agent_hooks *h = host_agent();
    struct host_write_call c = { real, fd };
    struct iovec one = { (void *)(uintptr_t)buf, len };

    return h == NULL ? real(fd, buf, len) : host_xfer(h, host_write_xfer, &c, &one, 1, fd, 0);
}

struct host_writev_call {
    ssize_t (*real)(int, const struct iovec *, int);
    int fd;
};

static ssize_t
host_writev_xfer(void *call, const struct iovec *iov, int cnt)
{
    const struct host_writev_call *c = call;

    return c->real(c->fd, iov, cnt);
}

HOST_EXPORT ssize_t
writev(int fd, const struct iovec *iov, int cnt)
{
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1;
    }
    HOST_WRITES_REAL(ssize_t, (int, const struct iovec *, int), writev)
    const struct host_agent_hooks *h = host_agent();
    struct host_writev_call c = { real, fd };

    /* the caller's array is only read: host_xfer_rest continues from a copy */
    return h == NULL ? real(fd, iov, cnt) : host_xfer(h, host_writev_xfer, &c, iov, cnt, fd, 0);
}

/* send is sendto without an address, and recv recvfrom without one; each keeps its own real
 * function (a host or a sanitizer may interpose one and not the other). */
struct host_sendto_call {
    ssize_t (*real_sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
    ssize_t (*real_send)(int, const void *, size_t, int);
    int fd, flags;
    const struct sockaddr *sa;
    socklen_t salen;
};

static ssize_t
host_sendto_xfer(void *call, const struct iovec *iov, int cnt)
{
    const struct host_sendto_call *c = call;

    (void)cnt;
    return c->real_send != NULL ? c->real_send(c->fd, iov[0].iov_base, iov[0].iov_len, c->flags)
                                : c->real_sendto(c->fd, iov[0].iov_base, iov[0].iov_len, c->flags,
                                                 c->sa, c->salen);
}

HOST_EXPORT ssize_t
sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *sa, socklen_t salen)
{
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1;
    }
    HOST_WRITES_REAL(ssize_t, (int, const void *, size_t, int, const struct sockaddr *, socklen_t),
                     sendto)
    const struct host_agent_hooks *h = host_agent();
    struct host_sendto_call c = { real, NULL, fd, flags, sa, salen };
    struct iovec one = { (void *)(uintptr_t)buf, len };

    return h == NULL ? real(fd, buf, len, flags, sa, salen)
                     : host_xfer(h, host_sendto_xfer, &c, &one, 1, fd, flags);
}

HOST_EXPORT ssize_t
send(int fd, const void *buf, size_t len, int flags)
{
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1;
    }
    HOST_WRITES_REAL(ssize_t, (int, const void *, size_t, int), send)
    const struct host_agent_hooks *h = host_agent();
    struct host_sendto_call c = { NULL, real, fd, flags, NULL, 0 };
    struct iovec one = { (void *)(uintptr_t)buf, len };

    return h == NULL ? real(fd, buf, len, flags)
                     : host_xfer(h, host_sendto_xfer, &c, &one, 1, fd, flags);
}

struct host_sendmsg_call {
    ssize_t (*real)(int, const struct msghdr *, int);
    const struct msghdr *msg;
    int fd, flags;
};

/* The rest of the host's message, after sendmsg's own call sent its first bytes: without its
 * ancillary data, which went with the first byte. */
static ssize_t
host_sendmsg_xfer(void *call, const struct iovec *iov, int cnt)
{
    struct host_sendmsg_call *c = call;
    struct msghdr m = *c->msg;

    m.msg_iov = (struct iovec *)(uintptr_t)iov; /* only read */
    m.msg_iovlen = (size_t)cnt;
    m.msg_control = NULL;
    m.msg_controllen = 0;
    return c->real(c->fd, &m, c->flags);
}

HOST_EXPORT ssize_t
sendmsg(int fd, const struct msghdr *msg, int flags)
{
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1;
    }
    HOST_WRITES_REAL(ssize_t, (int, const struct msghdr *, int), sendmsg)
    const struct host_agent_hooks *h = host_agent();
    struct host_sendmsg_call c = { real, msg, fd, flags };
    uint32_t sig0;
    ssize_t n;

    if (h == NULL || msg == NULL) {
        return real(fd, msg, flags);
    }
    /* The message is read only once the kernel has read it (it moved bytes): an unreadable one
     * is the kernel's EFAULT, as bare (reading its iov first killed the host with SIGSEGV). */
    sig0 = h->signals_handled();
    n = real(fd, msg, flags);
    if (n <= 0 || msg->msg_iovlen > (size_t)INT32_MAX) {
        return n;
    }
    return host_xfer_made(h, host_sendmsg_xfer, &c, msg->msg_iov, (int)msg->msg_iovlen, fd, flags,
                          sig0, n);
}

struct host_recvmsg_call {
    host_recvmsg_fn real;
    struct msghdr *msg;
    int fd, flags, first;
};

/* The first call fills the host's message (its address and flags); the rest of a stream goes
 * into the buffers left, with nothing else asked. */
static ssize_t
host_recvmsg_xfer(void *call, const struct iovec *iov, int cnt)
{
    struct host_recvmsg_call *c = call;
    struct msghdr m = { 0 };

    if (c->first) {
        c->first = 0;
        return c->real(c->fd, c->msg, c->flags);
    }
    m.msg_iov = (struct iovec *)(uintptr_t)iov; /* only read */
    m.msg_iovlen = (size_t)cnt;
    return c->real(c->fd, &m, c->flags);
}

ssize_t
host_recvmsg_waitall(host_recvmsg_fn real, int fd, struct msghdr *msg, int flags)
{
    struct host_recvmsg_call c = { real, msg, fd, flags, 1 };

    /* fds or credentials a second call received would be lost with its ancillary data */
    if (msg == NULL || msg->msg_controllen != 0 || msg->msg_iovlen > (size_t)INT32_MAX) {
        return real(fd, msg, flags);
    }
    return host_xfer(host_agent(), host_recvmsg_xfer, &c, msg->msg_iov, (int)msg->msg_iovlen, fd,
                     flags);
}

struct host_recvfrom_call {
    host_recvfrom_fn real_recvfrom;
    host_recv_fn real_recv;
    int fd, flags;
    struct sockaddr *sa;
    socklen_t *salen;
};

/* The sender's address comes with the first bytes of a stream: the rest is received without. */
static ssize_t
host_recvfrom_xfer(void *call, const struct iovec *iov, int cnt)
{
    struct host_recvfrom_call *c = call;
    struct sockaddr *sa = c->sa;
    socklen_t *salen = c->salen;

    (void)cnt;
    c->sa = NULL;
    c->salen = NULL;
    return c->real_recv != NULL
                   ? c->real_recv(c->fd, iov[0].iov_base, iov[0].iov_len, c->flags)
                   : c->real_recvfrom(c->fd, iov[0].iov_base, iov[0].iov_len, c->flags, sa, salen);
}

ssize_t
host_recv_waitall(host_recv_fn real, int fd, void *buf, size_t len, int flags)
{
    struct host_recvfrom_call c = { NULL, real, fd, flags, NULL, NULL };
    struct iovec one = { buf, len };

    return host_xfer(host_agent(), host_recvfrom_xfer, &c, &one, 1, fd, flags);
}

ssize_t
host_recvfrom_waitall(host_recvfrom_fn real, int fd, void *buf, size_t len, int flags,
                      struct sockaddr *sa, socklen_t *salen)
{
    struct host_recvfrom_call c = { real, NULL, fd, flags, sa, salen };
    struct iovec one = { buf, len };

    return host_xfer(host_agent(), host_recvfrom_xfer, &c, &one, 1, fd, flags);
}

struct host_getrandom_call {
    ssize_t (*real)(void *, size_t, unsigned);
    unsigned flags;
};

static ssize_t
host_getrandom_xfer(void *call, const struct iovec *iov, int cnt)
{
    const struct host_getrandom_call *c = call;

    (void)cnt;
    return c->real(iov[0].iov_base, iov[0].iov_len, c->flags);
}

HOST_EXPORT ssize_t
getrandom(void *buf, size_t len, unsigned int flags)
{
    HOST_WRITES_REAL(ssize_t, (void *, size_t, unsigned), getrandom)
    const struct host_agent_hooks *h = host_agent();
    struct host_getrandom_call c = { real, flags };
    struct iovec one = { buf, len };

    return h == NULL ? real(buf, len, flags)
                     : host_xfer(h, host_getrandom_xfer, &c, &one, 1, -1, 0);
}

/* sendfile and sendfile64 (one function in glibc on 64-bit targets; -D_FILE_OFFSET_BITS=64 makes
 * a program's sendfile call sendfile64): the kernel has moved the offset (or the file position)
 * on by what it sent, so the rest is the count left. Only to a socket: to a pipe sendfile moves
 * what the pipe takes and returns short, bare too, and a continuation would wait for a reader
 * where bare it returns (a host that reads that pipe itself would hang). */
struct host_sendfile_call {
    ssize_t (*real)(int, int, off_t *, size_t);
    int out, in;
    off_t *off;
};

static ssize_t
host_sendfile_xfer(void *call, const struct iovec *iov, int cnt)
{
    const struct host_sendfile_call *c = call;

    (void)cnt; /* 1, of no base: the count left */
    return c->real(c->out, c->in, c->off, iov[0].iov_len);
}

static ssize_t
host_sendfile(ssize_t (*real)(int, int, off_t *, size_t), int out, int in, off_t *off, size_t count)
{
    const struct host_agent_hooks *h = host_agent();
    struct host_sendfile_call c = { real, out, in, off };
    struct iovec one = { NULL, count };

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return h == NULL ? real(out, in, off, count)
                     : host_xfer(h, host_sendfile_xfer, &c, &one, 1, out, HOST_XFER_SOCKET_ONLY);
}

HOST_EXPORT ssize_t
sendfile(int out, int in, off_t *off, size_t count)
{
    HOST_FD_NEVER_AT(out, out); /* the kernel reads off first: bare's EFAULT */
    HOST_FD_NEVER_AT(in, in);
    return host_sendfile(
            (ssize_t(*)(int, int, off_t *, size_t))host_real(&real_sendfile_p, "sendfile"), out, in,
            off, count);
}

_Static_assert(sizeof(off_t) == sizeof(off64_t), "sendfile64 shares sendfile's body");

HOST_EXPORT ssize_t
sendfile64(int out, int in, off64_t *off, size_t count)
{
    HOST_FD_NEVER_AT(out, out); /* the kernel reads off first: bare's EFAULT */
    HOST_FD_NEVER_AT(in, in);
    return host_sendfile(
            (ssize_t(*)(int, int, off_t *, size_t))host_real(&real_sendfile64_p, "sendfile64"), out,
            in, (off_t *)off, count);
}
