/* SPDX-License-Identifier: MIT */
/*
 * host/sockets.c - the .NET runtime's socket names, in a .NET host the diagnostic server fronts
 * (docs/dotnet-hosts.md).
 *
 *   bind connect unlink
 *                    interposed because libcoreclr calls them through the PLT: the runtime's bind
 *                    of its default name dotnet-diagnostic-PID-KEY-socket, which pipeprof's server
 *                    holds, goes to a private path, and so does its unlink of that name at
 *                    shutdown; its connects to a DOTNET_DiagnosticPorts address go to the server's
 *                    private listener for that port. The server's socket_redirect hook
 *                    (ipc_redirect_path() behind it) names the new path. The host's bind or
 *                    connect on a library fd's number fails with EBADF, as bare (host/fds.c's
 *                    calls on an fd's number: HOST_FD_DATA_REFUSED, whose ahead rule lets the
 *                    library's through TSan's interceptors of both).
 *   listen           interposed for that alone: the host's listen on a library fd's number set the
 *                    backlog of the library's listener (a scan of 3..4095 got 1 success and 7
 *                    to 15 other errors where bare has EBADF, preloaded and under record).
 *
 * What the host may rely on: every other name, abstract and non-Unix sockets, and every call
 * while no .NET runtime is fronted pass through unchanged, with libc's result and errno (-1 and
 * ENOSYS when libc has no such call). A redirected bind first removes a stale socket at the
 * private path (one of this very process's runtime). Without the server's hooks every call goes
 * straight to libc.
 *
 * Held by: dotnet-runtime-intact (a preloaded .NET app: every socket of the pid answers as the
 * bare runtime's), dotnet-host-forms (dotnet app.dll, an apphost, a single-file app, a runtime
 * found only when it binds: one public socket, the runtime's moved to its private name). Both
 * need the .NET SDK and skip, loudly, without it; no test holds connect's redirect of a
 * DOTNET_DiagnosticPorts address on its own.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "host/internal.h"

HOST_ANCHOR(sockets);

typedef int (*host_sockaddr_fn)(int, const struct sockaddr *, socklen_t);

/* 1 when an address of len bytes for socket fd is provably not for a Unix socket's: len is an
 * AF_INET or AF_INET6 address's and the socket's family (SO_DOMAIN, through the real syscall: one
 * system call) is known and not AF_UNIX. errno kept. */
static int
host_socket_not_unix(int fd, socklen_t len)
{
    int saved = errno, domain = AF_UNIX;
    socklen_t size = sizeof(domain);

    if (len != sizeof(struct sockaddr_in) && len != sizeof(struct sockaddr_in6)) {
        return 0;
    }
    if (host_raw_syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_DOMAIN, (long)&domain, (long)&size,
                         0) != 0 ||
        size != sizeof(domain)) {
        domain = AF_UNIX; /* cannot tell */
    }
    errno = saved;
    return domain != AF_UNIX;
}

/*
 * The redirect of a Unix socket address into *out; 0 when addr is left as it is. The host's
 * address is never read where the kernel could not (fix15: before, bind and connect of a bad
 * pointer killed a host that ran the server with SIGSEGV, where bare gets EFAULT), and a system
 * call is spent on it only where it may matter (sockread; docs/performance.md has the figures):
 *   - on the main thread's stack above the caller's frame (host_stack_readable) it is copied;
 *   - elsewhere, with the length of an AF_INET or AF_INET6 address (a Unix one of that length has
 *     a path of 13 or 25 bytes and a NUL, or none), a socket that is not AF_UNIX (SO_DOMAIN:
 *     getsockopt, one system call) has nothing to redirect and is left to the kernel, the address
 *     unread; another length is most often a Unix address (sizeof(struct sockaddr_un), SUN_LEN),
 *     whose socket that look would only cost one call more;
 *   - else it is copied without faulting (host_read_user: process_vm_readv and getpid); one the
 *     kernel cannot read is left to it (EFAULT, as bare); where that read is refused (a seccomp
 *     filter) it is read as before fix15.
 */
static int
host_redirect_sockaddr(const struct host_server_hooks *h, enum host_socket_op op, int fd,
                       const struct sockaddr *addr, socklen_t len, struct sockaddr_un *out)
{
    struct sockaddr_un copy;
    char path[sizeof(out->sun_path) + 1];
    size_t n;

    if (h == NULL || addr == NULL || len <= (socklen_t)offsetof(struct sockaddr_un, sun_path)) {
        return 0;
    }
    n = (size_t)len < sizeof(copy) ? (size_t)len : sizeof(copy);
    if (host_stack_readable(addr, n)) {
        memcpy(&copy, addr, n);
    } else if (host_socket_not_unix(fd, len)) {
        return 0;
    } else if (host_read_user(&copy, addr, n) != 0) {
        return 0; /* unreadable: the kernel's EFAULT */
    }
    if (copy.sun_family != AF_UNIX) {
        return 0;
    }
    n -= offsetof(struct sockaddr_un, sun_path);
    memcpy(path, copy.sun_path, n);
    path[n] = '\0';
    if (path[0] == '\0') {
        return 0; /* an abstract socket */
    }
    memset(out, 0, sizeof(*out));
    out->sun_family = AF_UNIX;
    return h->socket_redirect(op, path, out->sun_path, sizeof(out->sun_path));
}

HOST_EXPORT int
bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    static _Atomic(void *) real;
    host_sockaddr_fn fn = (host_sockaddr_fn)host_real(&real, "bind");
    struct sockaddr_un to;

    if (fn == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1; /* the host's on a library fd (host/fds.c) */
    }
    if (host_redirect_sockaddr(host_server(), HOST_SOCKET_BIND, fd, addr, len, &to)) {
        unlink(to.sun_path); /* a stale socket of this very process's runtime */
        return fn(fd, (struct sockaddr *)&to, sizeof(to));
    }
    return fn(fd, addr, len);
}

HOST_EXPORT int
connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    static _Atomic(void *) real;
    host_sockaddr_fn fn = (host_sockaddr_fn)host_real(&real, "connect");
    struct sockaddr_un to;

    if (fn == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1; /* the host's on a library fd (host/fds.c) */
    }
    if (host_redirect_sockaddr(host_server(), HOST_SOCKET_CONNECT, fd, addr, len, &to)) {
        return fn(fd, (struct sockaddr *)&to, sizeof(to));
    }
    return fn(fd, addr, len);
}

/* Not the runtime's: only the host's call on a library fd's number, which would change the
 * library's listener's backlog (host/fds.c). */
HOST_EXPORT int
listen(int fd, int backlog)
{
    if (HOST_FD_DATA_REFUSED(fd)) {
        return -1;
    }
    HOST_REAL_OR_ENOSYS(int, (int, int), listen)
    return real(fd, backlog);
}

HOST_EXPORT int
unlink(const char *path)
{
    static _Atomic(void *) real;
    int (*fn)(const char *) = (int (*)(const char *))host_real(&real, "unlink");
    const struct host_server_hooks *h = host_server();
    char to[sizeof(((struct sockaddr_un *)0)->sun_path)];

    if (fn == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (h != NULL && h->socket_redirect(HOST_SOCKET_UNLINK, path, to, sizeof(to))) {
        return fn(to);
    }
    return fn(path);
}
