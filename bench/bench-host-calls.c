/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-host-calls.c - libbench-host-calls.so: open, openat, close, fcntl(F_DUPFD_CLOEXEC),
 * syscall(SYS_eventfd2) and syscall(SYS_fcntl, F_DUPFD_CLOEXEC) called from an object of their own,
 * as a host's are, and the epoll fd and page file bench-interpose's epoll_wait-host and mmap-host
 * use, made as a host's, and a ring of the host's (io_uring-nop-host) set up and filled here, its
 * io_uring_enter made here or through libc's syscall by bench-interpose, and the sockets of its
 * connect and bind cases, made as a host's; a directory's listing (opendir, readdir, closedir;
 * getdents64 through syscall()) and a thread's close_range(CLOSE_RANGE_UNSHARE), made here.
 * bench-interpose links host/ into its program, whose code host/fds.c counts as the library's
 * (host_fds_trust_self); calls made from here are the host's. Exported: the project builds with
 * -fvisibility=hidden.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
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
__attribute__((visibility("default"))) int bench_host_uring(void);
__attribute__((visibility("default"))) void bench_host_uring_nop(void);
__attribute__((visibility("default"))) long bench_host_uring_enter(int fd);
__attribute__((visibility("default"))) int bench_host_socket(int domain, int type);
__attribute__((visibility("default"))) int bench_host_list(const char *path);
__attribute__((visibility("default"))) long bench_host_getdents(int fd, void *buf, size_t len);
__attribute__((visibility("default"))) int bench_host_unshare(void);

/* A socket of the host's (bench-interpose's connect and bind cases). */
int
bench_host_socket(int domain, int type)
{
    return socket(domain, type | SOCK_CLOEXEC, 0);
}

/* opendir, readdir to the end and closedir of path, as a host lists a directory: the entries
 * seen, or -1 (bench-interpose's readdir-* cases). */
int
bench_host_list(const char *path)
{
    DIR *d = opendir(path);
    int n = 0;

    if (d == NULL) {
        return -1;
    }
    while (readdir(d) != NULL) {
        n++;
    }
    closedir(d);
    return n;
}

/* syscall(SYS_getdents64) of fd, the host's raw listing (getdents64-dir). */
long
bench_host_getdents(int fd, void *buf, size_t len)
{
    return syscall(SYS_getdents64, fd, buf, len);
}

/* close_range(CLOSE_RANGE_UNSHARE) of a range that holds no fd: the calling thread's fd table
 * made its own, the library's record of its marks then (the *-unshared cases). */
int
bench_host_unshare(void)
{
    return close_range(0x7ffffff0u, ~0u, CLOSE_RANGE_UNSHARE);
}

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

/* The host's ring (io_uring-nop-host): 8 entries, set up and mapped through syscall() and mmap
 * from here, as a host's. */
static struct {
    unsigned char *ring;
    struct io_uring_sqe *sqes;
    struct io_uring_params p;
} bench_ring;

/* The ring's fd, or -1. */
int
bench_host_uring(void)
{
    int fd = (int)syscall(SYS_io_uring_setup, 8, &bench_ring.p);
    size_t len;

    if (fd < 0 || !(bench_ring.p.features & IORING_FEAT_SINGLE_MMAP)) {
        return -1;
    }
    len = bench_ring.p.cq_off.cqes + bench_ring.p.cq_entries * sizeof(struct io_uring_cqe);
    bench_ring.ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, IORING_OFF_SQ_RING);
    bench_ring.sqes = mmap(NULL, bench_ring.p.sq_entries * sizeof(struct io_uring_sqe),
                           PROT_READ | PROT_WRITE, MAP_SHARED, fd, IORING_OFF_SQES);
    if (bench_ring.ring == MAP_FAILED || bench_ring.sqes == MAP_FAILED) {
        return -1;
    }
    return fd;
}

static _Atomic unsigned *
bench_ring_at(unsigned off)
{
    return (_Atomic unsigned *)(void *)(bench_ring.ring + off);
}

/* Takes the ring's completions and queues one IORING_OP_NOP (no system call). */
void
bench_host_uring_nop(void)
{
    const struct io_uring_params *p = &bench_ring.p;
    unsigned tail = atomic_load_explicit(bench_ring_at(p->sq_off.tail), memory_order_relaxed);
    unsigned idx = tail & *(unsigned *)(void *)(bench_ring.ring + p->sq_off.ring_mask);

    atomic_store_explicit(bench_ring_at(p->cq_off.head),
                          atomic_load_explicit(bench_ring_at(p->cq_off.tail), memory_order_acquire),
                          memory_order_release);
    memset(&bench_ring.sqes[idx], 0, sizeof(bench_ring.sqes[idx]));
    bench_ring.sqes[idx].opcode = IORING_OP_NOP;
    ((unsigned *)(void *)(bench_ring.ring + p->sq_off.array))[idx] = idx;
    atomic_store_explicit(bench_ring_at(p->sq_off.tail), tail + 1, memory_order_release);
}

long
bench_host_uring_enter(int fd)
{
    return syscall(SYS_io_uring_enter, fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0);
}
