/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-host-calls.c - libbench-host-calls.so: open, openat, close, fcntl(F_DUPFD_CLOEXEC),
 * syscall(SYS_eventfd2) and syscall(SYS_fcntl, F_DUPFD_CLOEXEC) called from an object of their own,
 * as a host's are, and the epoll fd and page file bench-interpose's epoll_wait-host and mmap-host
 * use, made as a host's. bench-interpose links host/ into its program, whose code host/fds.c counts
 * as the library's (host_fds_trust_self); calls made from here are the host's. Exported: the
 * project builds with -fvisibility=hidden.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((visibility("default"))) int bench_host_open(const char *path, int flags);
__attribute__((visibility("default"))) int bench_host_close(int fd);
__attribute__((visibility("default"))) int bench_host_dupfd(int fd);
__attribute__((visibility("default"))) int bench_host_sys_eventfd(void);
__attribute__((visibility("default"))) int bench_host_sys_dupfd(int fd);
__attribute__((visibility("default"))) int bench_host_openat(int dirfd, const char *path,
                                                             int flags);
__attribute__((visibility("default"))) int bench_host_epoll(void);
__attribute__((visibility("default"))) int bench_host_page(void);

int
bench_host_open(const char *path, int flags)
{
    return open(path, flags);
}

int
bench_host_openat(int dirfd, const char *path, int flags)
{
    return openat(dirfd, path, flags);
}

int
bench_host_close(int fd)
{
    return close(fd);
}

int
bench_host_dupfd(int fd)
{
    return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

int
bench_host_sys_eventfd(void)
{
    return (int)syscall(SYS_eventfd2, 0, EFD_CLOEXEC);
}

int
bench_host_sys_dupfd(int fd)
{
    return (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 0);
}

/* An epoll fd of the host's with nothing in it (bench-interpose's epoll_wait-host). */
int
bench_host_epoll(void)
{
    return epoll_create1(EPOLL_CLOEXEC);
}

/* A host's file of one page (mmap-host): an unlinked temporary file. */
int
bench_host_page(void)
{
    char path[] = "/tmp/bench-interpose-page-XXXXXX";
    int fd = mkostemp(path, O_CLOEXEC);

    if (fd >= 0) {
        unlink(path);
        if (ftruncate(fd, 4096) != 0) {
            close(fd);
            fd = -1;
        }
    }
    return fd;
}
