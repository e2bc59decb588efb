/* SPDX-License-Identifier: MIT */
/*
 * ipc/client.c - blocking client side of the diagnostic protocol: connect, send a request, read
 * one response, find a pid's socket like the .NET client, accept an advertised connection.
 * Context: an ordinary thread of a tool (the CLI, tests); never used inside the server. It must
 * not raise SIGPIPE and must not wait forever unless the caller asks for it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ipc/ipc.h"

/* A Unix socket and its address; returns the CLOEXEC socket or a negative errno. */
static int
ipc_client_unix_socket(const char *path, struct sockaddr_un *addr)
{
    int s;

    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(addr->sun_path)) {
        return -ENAMETOOLONG;
    }
    strcpy(addr->sun_path, path);
    s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    return s < 0 ? -errno : s;
}

int
ipc_client_connect(const char *path, int *fd)
{
    struct sockaddr_un addr;
    int s;

    *fd = -1;
    s = ipc_client_unix_socket(path, &addr);
    if (s < 0) {
        return s;
    }
    if (connect(s, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        int err = -errno;

        close(s);
        return err;
    }
    *fd = s;
    return 0;
}

int
ipc_client_listen(const char *path, int *fd, struct ipc_sockfile *f)
{
    struct sockaddr_un addr;
    long owner;
    int s, err;

    *fd = -1;
    f->dev = f->ino = 0;
    s = ipc_client_unix_socket(path, &addr);
    if (s < 0) {
        return s;
    }
    err = ipc_sockfile_make_room(path, &owner); /* a stale socket of an earlier run only */
    if (err == 0 && bind(s, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        err = -errno;
    }
    if (err == 0) {
        (void)ipc_sockfile_note(path, f);
        if (listen(s, 16) < 0) {
            err = -errno;
            ipc_sockfile_remove(path, f);
        }
    }
    if (err < 0) {
        close(s);
        return err;
    }
    *fd = s;
    return 0;
}

int
ipc_client_send(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

uint64_t
ipc_client_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Reads exactly len bytes before the deadline (0: none). Returns bytes read or -errno. */
static ssize_t
ipc_client_read_full(int fd, uint8_t *buf, size_t len, uint64_t deadline)
{
    size_t got = 0;

    while (got < len) {
        struct pollfd pfd = { fd, POLLIN, 0 };
        int wait = -1;
        ssize_t n;

        if (deadline != 0) {
            uint64_t now = ipc_client_ms();

            if (now >= deadline) {
                return -ETIMEDOUT;
            }
            wait = (int)(deadline - now);
        }
        n = poll(&pfd, 1, wait);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -errno;
        }
        if (n == 0) {
            return -ETIMEDOUT;
        }
        n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return errno == ECONNRESET ? (ssize_t)got : -errno;
        }
        if (n == 0) {
            break;
        }
        got += (size_t)n;
    }
    return (ssize_t)got;
}

int
ipc_client_read_response(int fd, uint8_t *buf, size_t cap, int timeout_ms)
{
    uint64_t deadline = timeout_ms >= 0 ? ipc_client_ms() + (uint64_t)timeout_ms : 0;
    struct ipc_header h;
    ssize_t n;

    if (cap < IPC_HEADER_SIZE) {
        return -ENOSPC;
    }
    n = ipc_client_read_full(fd, buf, IPC_HEADER_SIZE, deadline);
    if (n < 0) {
        return (int)n;
    }
    if (n == 0) {
        return -ENODATA;
    }
    if (n < IPC_HEADER_SIZE) {
        return -EBADMSG;
    }
    /* Clients ignore a response's magic; only the size matters. */
    if (ipc_header_decode(buf, IPC_HEADER_SIZE, &h) == -EBADMSG) {
        return -EBADMSG;
    }
    if (h.size > cap) {
        return -ENOSPC;
    }
    n = ipc_client_read_full(fd, buf + IPC_HEADER_SIZE, h.size - IPC_HEADER_SIZE, deadline);
    if (n < 0) {
        return (int)n;
    }
    if ((size_t)n != (size_t)(h.size - IPC_HEADER_SIZE)) {
        return -EBADMSG;
    }
    return h.size;
}

/* The initial TMPDIR of pid, from /proc/pid/environ, or NULL. Static buffer. */
static const char *
ipc_client_target_tmpdir(int pid, char *out, size_t cap)
{
    char path[64], *buf;
    size_t len = 0, bufcap = 1 << 20;
    const char *found = NULL;
    ssize_t n;
    size_t i;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/environ", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    buf = malloc(bufcap);
    while (buf != NULL && len < bufcap - 1 && (n = read(fd, buf + len, bufcap - 1 - len)) > 0) {
        len += (size_t)n;
    }
    close(fd);
    if (buf == NULL) {
        return NULL;
    }
    buf[len] = '\0';
    for (i = 0; i < len; i += strlen(buf + i) + 1) {
        if (strncmp(buf + i, "TMPDIR=", 7) == 0 && buf[i + 7] != '\0') {
            snprintf(out, cap, "%s", buf + i + 7);
            found = out;
            break;
        }
    }
    free(buf);
    return found;
}

/* Whether mtime a is at least as new as b (on a tie the later entry wins). */
static int
ipc_client_newer(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec >= b->tv_nsec);
}

/*
 * The newest dotnet-diagnostic-PID-*-socket of dir that pid's user owns, as the .NET client
 * picks the newest; the newest refused one goes to *impostor when none is trusted.
 */
static int
ipc_client_glob(const char *dir, int pid, char *out, size_t cap, struct ipc_peer *impostor)
{
    char prefix[64], full[4096];
    struct timespec best = { 0, 0 }, best_refused = { 0, 0 };
    struct dirent *de;
    struct stat st;
    int found = 0, refused = 0;
    DIR *d;

    snprintf(prefix, sizeof(prefix), "dotnet-diagnostic-%d-", pid);
    d = opendir(dir);
    if (d == NULL) {
        return -ENOENT;
    }
    while ((de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        struct ipc_peer who;
        int trust;

        if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 || n < 7 ||
            strcmp(de->d_name + n - 7, "-socket") != 0) {
            continue;
        }
        snprintf(full, sizeof(full), "%s/%s", dir, de->d_name);
        if (lstat(full, &st) < 0) {
            continue;
        }
        trust = ipc_sockfile_trusted(full, pid, &who);
        if (trust == -EPERM || trust == -ENOTSOCK) {
            /* the newest impostor is named when nothing trusted is found */
            if (!refused || ipc_client_newer(&st.st_mtim, &best_refused)) {
                best_refused = st.st_mtim;
                *impostor = who;
                impostor->uid = (long)st.st_uid;
                if (!found) {
                    snprintf(out, cap, "%s", full);
                }
                refused = 1;
            }
            continue;
        }
        if (trust != 0) {
            continue;
        }
        /* the newest file wins, as in the .NET client */
        if (!found || ipc_client_newer(&st.st_mtim, &best)) {
            best = st.st_mtim;
            snprintf(out, cap, "%s", full);
            found = 1;
        }
    }
    closedir(d);
    return found ? 0 : refused ? -EPERM : -ENOENT;
}

int
ipc_client_find_socket(int pid, char *out, size_t cap, struct ipc_peer *impostor)
{
    char tmp[4096];
    const char *dir = ipc_client_target_tmpdir(pid, tmp, sizeof(tmp));
    int err = -ENOENT, e;

    impostor->pid = impostor->uid = -1;
    if (dir != NULL) {
        err = ipc_client_glob(dir, pid, out, cap, impostor);
        if (err == 0) {
            return 0;
        }
    }
    dir = getenv("TMPDIR");
    if (dir == NULL || dir[0] == '\0') {
        dir = "/tmp";
    }
    if (err == -EPERM) {
        char other[4096];
        struct ipc_peer o;

        /* keep naming the first impostor unless a trusted socket turns up here */
        e = ipc_client_glob(dir, pid, other, sizeof(other), &o);
        if (e == 0) {
            snprintf(out, cap, "%s", other);
        }
        return e == 0 ? 0 : err;
    }
    return ipc_client_glob(dir, pid, out, cap, impostor);
}

int
ipc_client_accept_advertise(int listen_fd, int timeout_ms, uint64_t want_pid, int *fd,
                            uint8_t cookie[16], uint64_t *pid)
{
    uint16_t flags;

    return ipc_client_accept_advertise_flags(listen_fd, timeout_ms, want_pid, fd, cookie, pid,
                                             &flags);
}

int
ipc_client_accept_advertise_flags(int listen_fd, int timeout_ms, uint64_t want_pid, int *fd,
                                  uint8_t cookie[16], uint64_t *pid, uint16_t *flags)
{
    uint64_t deadline = timeout_ms >= 0 ? ipc_client_ms() + (uint64_t)timeout_ms : 0;
    uint8_t ad[IPC_ADVERTISE_SIZE];

    *fd = -1;
    for (;;) {
        struct pollfd pfd = { listen_fd, POLLIN, 0 };
        int wait = -1, c, n;

        if (deadline != 0) {
            uint64_t now = ipc_client_ms();

            if (now >= deadline) {
                return -ETIMEDOUT;
            }
            wait = (int)(deadline - now);
        }
        n = poll(&pfd, 1, wait);
        if (n < 0 && errno == EINTR) {
            return -EINTR; /* let the caller see Ctrl-C */
        }
        if (n < 0) {
            return -errno;
        }
        if (n == 0) {
            return -ETIMEDOUT;
        }
        c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            continue;
        }
        /* like the .NET tool: the advertise must arrive within 250 ms */
        if (ipc_client_read_full(c, ad, sizeof(ad), ipc_client_ms() + 250) == (ssize_t)sizeof(ad) &&
            ipc_advertise_decode(ad, sizeof(ad), cookie, pid) == 0 &&
            (want_pid == 0 || *pid == want_pid)) {
            *flags = ipc_advertise_flags(ad);
            *fd = c;
            return 0;
        }
        close(c);
    }
}
