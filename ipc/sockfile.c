/* SPDX-License-Identifier: MIT */
/*
 * ipc/sockfile.c - the files of listening Unix sockets, in directories other users share
 * (/tmp): what may be replaced before a bind (only a stale socket of our own), which file is
 * ours to remove at the end, and whom a client may trust (the target's user, the target's pid).
 * Context: any thread; plain system calls, no allocation.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ipc/internal.h"

int
ipc_sockfile_make_room(const char *path, long *owner)
{
    struct sockaddr_un sa;
    struct stat st;
    int fd, err;

    *owner = -1;
    if (lstat(path, &st) != 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    *owner = (long)st.st_uid;
    if (!S_ISSOCK(st.st_mode)) {
        return -EEXIST; /* a file, a directory, a symbolic link: never ours to delete */
    }
    if (st.st_uid != geteuid()) {
        return -EPERM; /* another user's socket, stale or not */
    }
    if (strlen(path) >= sizeof(sa.sun_path)) {
        return -ENAMETOOLONG;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return -errno;
    }
    err = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : -errno;
    close(fd);
    if (err != -ECONNREFUSED) {
        return -EADDRINUSE; /* served (or a full backlog, or unknown): not stale */
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        return -errno;
    }
    return 0;
}

/*
 * The mark of the server's default socket (dotnet-diagnostic-PID-KEY-socket): the nanoseconds of
 * its mtime. A killed process cannot unlink its socket, and a bare .NET runtime's leftover has the
 * same name and must stay (only what is our own is removed): the mark tells them apart where no
 * client looks (the .NET client and `ps` glob the name, and among several names of one pid take
 * the newest). Its seconds are the current ones, so the file never looks older than it is. A
 * multiple of a microsecond survives file systems of coarser timestamps down to that; one of
 * 1 s granularity loses it, and such a leftover stays, as bare. Cheap: one utimensat after bind.
 */
#define IPC_SOCKFILE_MARK_NSEC 999999000L

int
ipc_sockfile_mark(const char *path)
{
    struct timespec t[2];

    clock_gettime(CLOCK_REALTIME, &t[1]);
    t[1].tv_nsec = IPC_SOCKFILE_MARK_NSEC;
    t[0].tv_sec = 0;
    t[0].tv_nsec = UTIME_OMIT;
    return utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
}

long
ipc_sockfile_name_pid(const char *name, const char *prefix)
{
    size_t plen = strlen(prefix), len = strlen(name);
    char *end;
    long pid;

    if (strncmp(name, prefix, plen) != 0 || len < plen + 8 ||
        strcmp(name + len - 7, "-socket") != 0) {
        return 0;
    }
    pid = strtol(name + plen, &end, 10);
    /* Something (N, KEY) between the pid and "-socket". */
    return end != name + plen && *end == '-' && end < name + len - 7 && pid > 0 ? pid : 0;
}

/* Whether dir/name carries ipc_sockfile_mark()'s mark (lstat: a link's target is not looked at). */
static int
ipc_sockfile_marked(const char *path)
{
    struct stat st;

    return lstat(path, &st) == 0 && st.st_mtim.tv_nsec == IPC_SOCKFILE_MARK_NSEC;
}

unsigned
ipc_sockfile_remove_stale(const char *dir, const char *const *prefixes, size_t n_prefixes,
                          int marked_only)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    unsigned removed = 0;

    while (d != NULL && (de = readdir(d)) != NULL) {
        char path[PATH_MAX];
        long pid = 0, owner;
        size_t i;
        int n;

        for (i = 0; i < n_prefixes && pid == 0; i++) {
            pid = ipc_sockfile_name_pid(de->d_name, prefixes[i]);
        }
        if (pid == 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) {
            continue;
        }
        n = snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (n < 0 || (size_t)n >= sizeof(path) || (marked_only && !ipc_sockfile_marked(path))) {
            continue;
        }
        /* a socket of this user that refuses a connection, or nothing is removed */
        removed += ipc_sockfile_make_room(path, &owner) == 0 && owner >= 0;
    }
    if (d != NULL) {
        closedir(d);
    }
    return removed;
}

const char *
ipc_sockfile_refusal(int err)
{
    switch (err) {
    case -EEXIST:
        return "it is not a socket";
    case -EPERM:
        return "it is another user's socket";
    case -EADDRINUSE:
        return "another server accepts on it";
    default:
        return strerror(-err);
    }
}

int
ipc_sockfile_note(const char *path, struct ipc_sockfile *f)
{
    struct stat st;

    f->dev = 0;
    f->ino = 0;
    if (lstat(path, &st) != 0) {
        return -errno;
    }
    f->dev = (uint64_t)st.st_dev;
    f->ino = (uint64_t)st.st_ino;
    return 0;
}

void
ipc_sockfile_remove(const char *path, const struct ipc_sockfile *f)
{
    struct stat st;

    /* only the file we made: a successor (or anyone else) may hold the name by now */
    if (f->ino != 0 && lstat(path, &st) == 0 && (uint64_t)st.st_dev == f->dev &&
        (uint64_t)st.st_ino == f->ino) {
        (void)unlink(path);
    }
}

/* The uids of /proc/PID/status (real, effective, saved, file system). Returns 0 or -ESRCH. */
static int
ipc_process_uids(int pid, long uids[4])
{
    char path[64], buf[4096], *line;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -ESRCH;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return -ESRCH;
    }
    buf[n] = '\0';
    line = strstr(buf, "\nUid:");
    if (line == NULL ||
        sscanf(line + 5, "%ld %ld %ld %ld", &uids[0], &uids[1], &uids[2], &uids[3]) != 4) {
        return -ESRCH;
    }
    return 0;
}

int
ipc_sockfile_trusted(const char *path, int pid, struct ipc_peer *who)
{
    struct stat st;
    long uids[4];
    int i;

    who->pid = -1;
    who->uid = -1;
    if (lstat(path, &st) != 0) {
        return -errno;
    }
    if (!S_ISSOCK(st.st_mode)) {
        return -ENOTSOCK; /* a symbolic link is not followed, nor anything else taken */
    }
    who->uid = (long)st.st_uid;
    if (ipc_process_uids(pid, uids) < 0) {
        return -ESRCH;
    }
    /* The process made it with one of its uids (a daemon may have dropped root since) */
    if (st.st_uid == 0) {
        return 0;
    }
    for (i = 0; i < 4; i++) {
        if ((long)st.st_uid == uids[i]) {
            return 0;
        }
    }
    return -EPERM;
}

#define IPC_HELD_MAX 16 /* listening sockets bound at one name (a stale one and a new one) */

/* The inodes of the listening sockets /proc/net/unix shows bound at dir/name (rdir: dir's real
 * path). Returns how many, at most IPC_HELD_MAX. */
static int
ipc_sockfile_listeners(const char *rdir, const char *name, unsigned long *inodes)
{
    char line[4096 + 128], where[PATH_MAX];
    FILE *f = fopen("/proc/net/unix", "re");
    int n = 0;

    if (f == NULL) {
        return 0;
    }
    while (n < IPC_HELD_MAX && fgets(line, sizeof(line), f) != NULL) {
        unsigned long flags, inode;
        char *path, *slash;
        int at = 0;

        line[strcspn(line, "\n")] = '\0';
        /* Num RefCount Protocol Flags Type St Inode Path; __SO_ACCEPTCON (0x10000): listening */
        if (sscanf(line, "%*s %*s %*s %lx %*s %*s %lu %n", &flags, &inode, &at) != 2 || at == 0 ||
            !(flags & 0x10000UL)) {
            continue;
        }
        path = line + at;
        slash = strrchr(path, '/');
        if (slash == NULL || strcmp(slash + 1, name) != 0) {
            continue;
        }
        *slash = '\0'; /* the directory as it was bound (relative, or through a link) */
        if (realpath(slash == path ? "/" : path, where) != NULL && strcmp(where, rdir) == 0) {
            inodes[n++] = inode;
        }
    }
    fclose(f);
    return n;
}

int
ipc_sockfile_held_by(const char *dir, const char *name, int pid)
{
    unsigned long inodes[IPC_HELD_MAX];
    char rdir[PATH_MAX], fds[64], link[64], target[64];
    struct dirent *de;
    int n, i, held = 0;
    DIR *d;

    if (realpath(dir, rdir) == NULL) {
        return 0;
    }
    n = ipc_sockfile_listeners(rdir, name, inodes);
    if (n == 0) {
        return 0;
    }
    snprintf(fds, sizeof(fds), "/proc/%d/fd", pid);
    d = opendir(fds);
    if (d == NULL) {
        return errno == EACCES || errno == EPERM ? -EACCES : 0;
    }
    while (!held && (de = readdir(d)) != NULL) {
        ssize_t len;

        if (snprintf(link, sizeof(link), "%s/%s", fds, de->d_name) >= (int)sizeof(link)) {
            continue;
        }
        len = readlink(link, target, sizeof(target) - 1);
        if (len <= 0) {
            continue;
        }
        target[len] = '\0';
        for (i = 0; i < n && !held; i++) {
            char want[40];

            snprintf(want, sizeof(want), "socket:[%lu]", inodes[i]);
            held = strcmp(target, want) == 0;
        }
    }
    closedir(d);
    return held;
}

int
ipc_client_peer(int fd, struct ipc_peer *who)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);

    who->pid = -1;
    who->uid = -1;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        return -errno;
    }
    who->pid = (long)cred.pid;
    who->uid = (long)cred.uid;
    return 0;
}
