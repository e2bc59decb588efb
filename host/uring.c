/* SPDX-License-Identifier: MIT */
/*
 * host/uring.c - the host's io_uring operations that name a library fd's number fail with EBADF,
 * as bare. No interposer lives here: glibc has no io_uring functions, and a host reaches the
 * kernel through syscall(SYS_io_uring_setup), syscall(SYS_io_uring_enter) and
 * syscall(SYS_io_uring_register), which fds.c's syscall() hands here (host_fds_syscall_kind).
 *
 * A submission names its fd in the ring's memory, not in a system call's arguments: the host
 * writes entries (SQEs) into the submission ring it mapped from the ring's fd and then calls
 * io_uring_enter, or the kernel's poller reads them (IORING_SETUP_SQPOLL). Bare, an entry whose
 * fd (or dirfd) is not open completes with -EBADF; profiled, a library fd's number held the
 * library's file, and IORING_OP_CLOSE on 3..1023 closed the library's fds (libuv's epoll fd:
 * the session's loop then spun on EBADF), IORING_OP_READ of 1 byte took the library's bytes.
 *
 * So for each ring the host sets up through syscall() (host_uring_created), the library maps the
 * ring's submission queue and SQE array itself (its own MAP_SHARED mapping of the same pages,
 * which stays valid whatever the host unmaps; dropped when the host closes the ring's fd:
 * host_uring_closed), and before the host's io_uring_enter submits, the entries between the
 * kernel's head and the host's tail (at most to_submit) whose fd or second fd is a library fd
 * and that are not fixed files (IOSQE_FIXED_FILE) get -1 there, which the kernel answers with
 * -EBADF for every operation below, as for a number not open; an absolute path makes a *at
 * operation ignore its dirfd, -1 or not, as bare. The host's SQE is changed in its memory (a host
 * that reads an entry back after its submission sees -1). The fields looked at: sqe->fd of the
 * operations whose fd is a file or a dirfd (host_uring_op_fd: not NOP, TIMEOUT, SOCKET's domain,
 * PROVIDE_BUFFERS' count, WAITID's pid, FUTEX's, FILES_UPDATE's and the ones this code does not
 * know), SPLICE's and TEE's fd_in, LINKAT's and RENAMEAT's second dirfd (sqe->len), EPOLL_CTL's
 * target (sqe->off), ASYNC_CANCEL's fd with IORING_ASYNC_CANCEL_FD.
 *
 * io_uring_register: the ring's fd, and the fds IORING_REGISTER_FILES, _FILES2, _FILES_UPDATE,
 * _FILES_UPDATE2, _EVENTFD, _EVENTFD_ASYNC and _RING_FDS name (read with host_read_user, so
 * that a bad pointer fails with EFAULT in the kernel, as bare, and not here; host_uring_read says
 * what a seccomp filter that refuses that read changes): a whole
 * registration with a library fd fails with EBADF, as bare; an update stops before it (nr_args
 * or nr cut there, so that the kernel returns the count done, or EBADF at the first), as the
 * kernel's loop does at a number not open. io_uring_enter's and io_uring_register's own fd: a
 * library fd's number fails with EBADF (fds.c, the calls on an fd's number).
 *
 * Not covered (docs/architecture.md, "Still open"): rings the kernel polls (IORING_SETUP_SQPOLL:
 * no io_uring_enter precedes a submission), rings in the host's own memory (IORING_SETUP_NO_MMAP,
 * IORING_SETUP_REGISTERED_FD_ONLY) or with setup flags this code does not know (the 128-byte
 * entries of IORING_SETUP_SQE_MIXED), io_uring_enter by a registered ring's index
 * (IORING_ENTER_REGISTERED_RING), liburing (whose system calls are inline: no syscall() to see),
 * a ring set up through syscall() before this library's constructor, more than HOST_URING_MAX
 * rings at once, a dup of a ring's fd, IORING_OP_FILES_UPDATE's array,
 * IORING_REGISTER_CLONE_BUFFERS' and _SEND_MSG_RING's fds, and another host thread's io_uring_enter
 * of the same ring that takes the entries between this scan and its own submission.
 *
 * Tests: host-contract-fds-uring (tests/hosts/fds.c's uring_scan: the operations, registrations
 * and io_uring_enter of 3..1023 on a raw ring, as bare; before, preloaded, 6 to 8 fewer EBADF an
 * operation, IORING_OP_CLOSE closed 8 library fds and libuv aborted the host, status 134). Under
 * load (18 to 23 on 2 cores) 1 to 3 of 35 to 60 runs still had one entry answered by a library fd
 * with the gate held, not explained (docs/architecture.md's row); the test submits such a number
 * once more and counts that answer. host-contract-fds-uring-seccomp: the registrations under a
 * seccomp filter of the host's that refuses process_vm_readv (EPERM, ENOSYS), as bare (with a
 * refused read taken as a bad pointer, 8 library fds registered a file registration).
 *
 * Context: the host's threads, and its signal handlers (loads, stores, and system calls only;
 * host_uring_closed waits for the scans under way of the ring it drops).
 */
#include <errno.h>
#include <linux/io_uring.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "host/internal.h"

HOST_ANCHOR(uring);

/* Setup flags of kernels newer than the headers (6.1): their meaning for the scan. */
#define HOST_URING_NO_MMAP      (1u << 14)
#define HOST_URING_FD_ONLY      (1u << 15) /* IORING_SETUP_REGISTERED_FD_ONLY */
#define HOST_URING_NO_SQARRAY   (1u << 16)
#define HOST_URING_KNOWN        ((1u << 19) - 1u) /* through IORING_SETUP_CQE_MIXED (6.18) */
#define HOST_URING_REG_RING     (1u << 31)        /* IORING_REGISTER_USE_REGISTERED_RING */
#define HOST_URING_CANCEL_FD    (1u << 1)         /* IORING_ASYNC_CANCEL_FD */
#define HOST_URING_CANCEL_FIXED (1u << 3)         /* IORING_ASYNC_CANCEL_FD_FIXED */
#define HOST_URING_SPLICE_FIXED (1u << 31)        /* SPLICE_F_FD_IN_FIXED */
#define HOST_URING_MAX          16

/* One ring of the host's: fd -1 when the slot is free, -2 while it is being filled or emptied;
 * users, the scans under way (the slot is emptied only when none is). */
struct host_uring {
    _Atomic int fd;
    _Atomic int users;
    unsigned flags, entries, sqe_size;
    unsigned off_head, off_tail, off_mask, off_array;
    unsigned off_cq_head, off_cq_tail; /* in sq's mapping; 0 and 0: not looked at */
    unsigned char *sq, *sqes;
    size_t sq_len, sqes_len;
};

static struct host_uring host_urings[HOST_URING_MAX];
static _Atomic int host_uring_count; /* slots in use, the fast path's one load */

static void *
host_uring_map(int fd, size_t len, long off)
{
    long rc = host_raw_syscall(SYS_mmap, 0, (long)len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);

    return rc == -1 ? NULL : (void *)rc;
}

__attribute__((constructor)) static void
host_uring_init(void)
{
    int i;

    for (i = 0; i < HOST_URING_MAX; i++) {
        atomic_store_explicit(&host_urings[i].fd, -1, memory_order_relaxed);
    }
}

/* Empties slot r, whose fd the caller set to -2: waits for its scans, unmaps, frees it. */
static void
host_uring_empty(struct host_uring *r)
{
    while (atomic_load(&r->users) != 0) {
        sched_yield();
    }
    if (r->sq != NULL) {
        host_raw_syscall(SYS_munmap, (long)r->sq, (long)r->sq_len, 0, 0, 0, 0);
    }
    if (r->sqes != NULL) {
        host_raw_syscall(SYS_munmap, (long)r->sqes, (long)r->sqes_len, 0, 0, 0, 0);
    }
    r->sq = r->sqes = NULL;
    atomic_fetch_sub(&host_uring_count, 1);
    atomic_store_explicit(&r->fd, -1, memory_order_release);
}

void
host_uring_closed(int lo, int hi)
{
    int i;

    if (atomic_load_explicit(&host_uring_count, memory_order_acquire) == 0) {
        return;
    }
    for (i = 0; i < HOST_URING_MAX; i++) {
        int fd = atomic_load_explicit(&host_urings[i].fd, memory_order_acquire);

        if (fd >= lo && fd <= hi && atomic_compare_exchange_strong(&host_urings[i].fd, &fd, -2)) {
            host_uring_empty(&host_urings[i]);
        }
    }
}

/* Whether a submission's wait may be left out when the completions it asks for are there already
 * (host_uring_ready): the CQ ring in the SQ ring's mapping, and no completion that only a wait
 * posts (IORING_SETUP_DEFER_TASKRUN runs its task work there). */
static int
host_uring_cq_seen(const struct io_uring_params *p)
{
    return (p->features & IORING_FEAT_SINGLE_MMAP) && !(p->flags & IORING_SETUP_DEFER_TASKRUN);
}

/* The end of the last field of the SQ ring the scan reads (and the CQ ring's head and tail). */
static size_t
host_uring_sq_len(const struct io_uring_params *p)
{
    size_t len = p->sq_off.head, end;

    end = p->sq_off.tail;
    len = end > len ? end : len;
    end = p->sq_off.ring_mask;
    len = (end > len ? end : len) + sizeof(unsigned);
    if (host_uring_cq_seen(p)) {
        end = (p->cq_off.head > p->cq_off.tail ? p->cq_off.head : p->cq_off.tail) +
              sizeof(unsigned);
        len = end > len ? end : len;
    }
    if (!(p->flags & HOST_URING_NO_SQARRAY)) {
        end = p->sq_off.array + (size_t)p->sq_entries * sizeof(unsigned);
        len = end > len ? end : len;
    }
    return len;
}

void
host_uring_created(int fd, const struct io_uring_params *p)
{
    struct host_uring *r = NULL;
    int i, free_fd;

    if (fd < 0 || (p->flags & (IORING_SETUP_SQPOLL | HOST_URING_NO_MMAP | HOST_URING_FD_ONLY)) ||
        (p->flags & ~HOST_URING_KNOWN)) {
        return;
    }
    host_uring_closed(fd, fd); /* a slot left by a close this code did not see */
    for (i = 0; i < HOST_URING_MAX && r == NULL; i++) {
        free_fd = -1;
        if (atomic_compare_exchange_strong(&host_urings[i].fd, &free_fd, -2)) {
            r = &host_urings[i];
        }
    }
    if (r == NULL) {
        return; /* more rings than slots: not covered */
    }
    r->flags = p->flags;
    r->entries = p->sq_entries;
    r->sqe_size = (p->flags & IORING_SETUP_SQE128) ? 128u : 64u;
    r->off_head = p->sq_off.head;
    r->off_tail = p->sq_off.tail;
    r->off_mask = p->sq_off.ring_mask;
    r->off_array = p->sq_off.array;
    r->off_cq_head = host_uring_cq_seen(p) ? p->cq_off.head : 0;
    r->off_cq_tail = host_uring_cq_seen(p) ? p->cq_off.tail : 0;
    r->sq_len = host_uring_sq_len(p);
    r->sqes_len = (size_t)p->sq_entries * r->sqe_size;
    r->sq = host_uring_map(fd, r->sq_len, (long)IORING_OFF_SQ_RING);
    r->sqes = host_uring_map(fd, r->sqes_len, (long)IORING_OFF_SQES);
    atomic_fetch_add(&host_uring_count, 1);
    if (r->sq == NULL || r->sqes == NULL) {
        host_uring_empty(r);
        return;
    }
    atomic_store_explicit(&r->fd, fd, memory_order_release);
}

/* The slot of the host's ring fd, with a scan counted in (host_uring_put), or NULL. */
static struct host_uring *
host_uring_get(int fd)
{
    int i;

    for (i = 0; i < HOST_URING_MAX; i++) {
        struct host_uring *r = &host_urings[i];

        if (atomic_load_explicit(&r->fd, memory_order_acquire) != fd) {
            continue;
        }
        atomic_fetch_add(&r->users, 1);
        if (atomic_load(&r->fd) == fd) {
            return r;
        }
        atomic_fetch_sub(&r->users, 1);
    }
    return NULL;
}

static void
host_uring_put(struct host_uring *r)
{
    atomic_fetch_sub(&r->users, 1);
}

/* Whether opcode's sqe->fd is an fd or a dirfd (the kernel's file of the request, or the number
 * it opens or closes relative to): by the opcodes' numbers, those of the kernels after the
 * headers (6.1) included. */
static int
host_uring_op_fd(unsigned op)
{
    switch (op) {
    case 1:  /* READV */
    case 2:  /* WRITEV */
    case 3:  /* FSYNC */
    case 4:  /* READ_FIXED */
    case 5:  /* WRITE_FIXED */
    case 6:  /* POLL_ADD */
    case 8:  /* SYNC_FILE_RANGE */
    case 9:  /* SENDMSG */
    case 10: /* RECVMSG */
    case 13: /* ACCEPT */
    case 16: /* CONNECT */
    case 17: /* FALLOCATE */
    case 18: /* OPENAT: its dirfd */
    case 19: /* CLOSE */
    case 21: /* STATX: its dirfd */
    case 22: /* READ */
    case 23: /* WRITE */
    case 24: /* FADVISE */
    case 26: /* SEND */
    case 27: /* RECV */
    case 28: /* OPENAT2: its dirfd */
    case 29: /* EPOLL_CTL: the epoll fd */
    case 30: /* SPLICE: fd_out */
    case 33: /* TEE: fd_out */
    case 34: /* SHUTDOWN */
    case 35: /* RENAMEAT: the old dirfd */
    case 36: /* UNLINKAT */
    case 37: /* MKDIRAT */
    case 38: /* SYMLINKAT: the new dirfd */
    case 39: /* LINKAT: the old dirfd */
    case 40: /* MSG_RING: the target ring */
    case 41: /* FSETXATTR */
    case 43: /* FGETXATTR */
    case 46: /* URING_CMD */
    case 47: /* SEND_ZC */
    case 48: /* SENDMSG_ZC */
    case 49: /* READ_MULTISHOT */
    case 55: /* FTRUNCATE */
    case 56: /* BIND */
    case 57: /* LISTEN */
    case 58: /* RECV_ZC */
    case 59: /* EPOLL_WAIT */
    case 60: /* READV_FIXED */
    case 61: /* WRITEV_FIXED */
        return 1;
    default:
        return 0;
    }
}

/* One entry: its fds that are library fds get -1 (a number never open); the count changed. */
static int
host_uring_check(struct io_uring_sqe *sqe)
{
    unsigned op = atomic_load_explicit((_Atomic uint8_t *)&sqe->opcode, memory_order_relaxed);
    int changed = 0;

    if (sqe->flags & IOSQE_FIXED_FILE) {
        return 0; /* an index of the ring's registered files, never a library fd */
    }
    if (op == IORING_OP_ASYNC_CANCEL) {
        if ((sqe->cancel_flags & (HOST_URING_CANCEL_FD | HOST_URING_CANCEL_FIXED)) ==
                    HOST_URING_CANCEL_FD &&
            host_fd_is_library(sqe->fd)) {
            sqe->fd = -1;
            changed++;
        }
        return changed;
    }
    if (host_uring_op_fd(op) && host_fd_is_library(sqe->fd)) {
        sqe->fd = -1;
        changed++;
    }
    if ((op == IORING_OP_SPLICE || op == IORING_OP_TEE) &&
        !(sqe->splice_flags & HOST_URING_SPLICE_FIXED) && host_fd_is_library(sqe->splice_fd_in)) {
        sqe->splice_fd_in = -1;
        changed++;
    }
    if ((op == IORING_OP_LINKAT || op == IORING_OP_RENAMEAT) && host_fd_is_library((int)sqe->len)) {
        sqe->len = (uint32_t)-1;
        changed++;
    }
    if (op == IORING_OP_EPOLL_CTL && host_fd_is_library((int)sqe->off)) {
        sqe->off = (uint64_t)-1;
        changed++;
    }
    return changed;
}

/* The entries the host's io_uring_enter of ring fd will submit (at most to_submit). */
static void
host_uring_scan(int fd, unsigned to_submit)
{
    struct host_uring *r = host_uring_get(fd);
    unsigned head, tail, mask, i, n;

    if (r == NULL) {
        return;
    }
    head = atomic_load_explicit((_Atomic unsigned *)(void *)(r->sq + r->off_head),
                                memory_order_acquire);
    tail = atomic_load_explicit((_Atomic unsigned *)(void *)(r->sq + r->off_tail),
                                memory_order_acquire);
    mask = *(volatile unsigned *)(void *)(r->sq + r->off_mask);
    n = tail - head;
    n = n > to_submit ? to_submit : n;
    n = n > r->entries ? r->entries : n;
    for (i = 0; i < n; i++) {
        unsigned idx = (head + i) & mask;

        if (!(r->flags & HOST_URING_NO_SQARRAY)) {
            idx = ((volatile unsigned *)(void *)(r->sq + r->off_array))[idx];
        }
        if (idx < r->entries) { /* else the kernel drops it */
            (void)host_uring_check(
                    (struct io_uring_sqe *)(void *)(r->sqes + (size_t)idx * r->sqe_size));
        }
    }
    host_uring_put(r);
}

int
host_uring_tracked(int fd)
{
    struct host_uring *r;

    if (atomic_load_explicit(&host_uring_count, memory_order_acquire) == 0 ||
        (r = host_uring_get(fd)) == NULL) {
        return 0;
    }
    host_uring_put(r);
    return 1;
}

int
host_uring_ready(int fd, unsigned min_complete)
{
    struct host_uring *r = host_uring_get(fd);
    unsigned head, tail;
    int ready = 0;

    if (r == NULL) {
        return 0;
    }
    if (r->off_cq_tail != 0) {
        head = atomic_load_explicit((_Atomic unsigned *)(void *)(r->sq + r->off_cq_head),
                                    memory_order_acquire);
        tail = atomic_load_explicit((_Atomic unsigned *)(void *)(r->sq + r->off_cq_tail),
                                    memory_order_acquire);
        ready = tail - head >= min_complete;
    }
    host_uring_put(r);
    return ready;
}

long
host_uring_submit(host_syscall_fn real, const long a[6])
{
    host_uring_scan((int)a[0], (unsigned)a[1]);
    return real(SYS_io_uring_enter, a[0], a[1], 0,
                (long)((unsigned)a[3] & ~(IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG)), 0, 0);
}

/*
 * Reads len bytes of the host's memory at addr into out (host_read_user): 0, or -1 for a bad
 * pointer, which the kernel's own read then answers with EFAULT. Where the non-faulting read is
 * refused (a seccomp filter that forbids process_vm_readv) host_read_user reads the memory
 * directly, for sockets.c and fds.c too: a registration that names a library fd would otherwise
 * reach the kernel unchecked (the host's ring would then hold the library's file: IORING_OP_CLOSE
 * of it broke the session's loop), while a host whose filter refuses the call and that passes an
 * unreadable array is killed by SIGSEGV where bare gets EFAULT (tests/hosts/fds.c's "fds
 * uringseccompbad", by hand: IORING_REGISTER_FILES of (int *)8, bare EFAULT, preloaded status 139).
 * Before, a refused read was taken as a bad pointer (the check skipped).
 */
static int
host_uring_read(void *out, const void *addr, size_t len)
{
    return host_read_user(out, addr, len) == 0 ? 0 : -1;
}

/* The index of the first library fd among the n ints of the host's array at fds (stride bytes
 * apart), or n. */
static unsigned
host_uring_first(const void *fds, unsigned n, size_t stride)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        int fd;

        if (host_uring_read(&fd, (const char *)fds + (size_t)i * stride, sizeof(fd)) != 0) {
            return n; /* the kernel's EFAULT */
        }
        if (host_fd_is_library(fd)) {
            return i;
        }
    }
    return n;
}

static long
host_uring_ebadf(void)
{
    errno = EBADF;
    return -1;
}

long
host_uring_register(host_syscall_fn real, const long a[6])
{
    unsigned op = (unsigned)a[1] & ~HOST_URING_REG_RING, nr = (unsigned)a[3], k;
    const void *arg = (const void *)a[2];
    long b[6];

    memcpy(b, a, sizeof(b));
    switch (op) {
    case IORING_REGISTER_FILES: /* the whole set, or EBADF */
        if (host_uring_first(arg, nr, sizeof(int)) < nr) {
            return host_uring_ebadf();
        }
        break;
    case IORING_REGISTER_FILES2: {
        struct io_uring_rsrc_register rr;

        if (nr == sizeof(rr) && host_uring_read(&rr, arg, sizeof(rr)) == 0 && rr.data != 0 &&
            host_uring_first((const void *)(uintptr_t)rr.data, rr.nr, sizeof(int)) < rr.nr) {
            return host_uring_ebadf();
        }
        break;
    }
    case IORING_REGISTER_FILES_UPDATE: { /* the count before the first, or EBADF */
        struct io_uring_files_update up;

        if (host_uring_read(&up, arg, sizeof(up)) == 0 &&
            (k = host_uring_first((const void *)(uintptr_t)up.fds, nr, sizeof(int))) < nr) {
            if (k == 0) {
                return host_uring_ebadf();
            }
            b[3] = k;
        }
        break;
    }
    case IORING_REGISTER_FILES_UPDATE2: {
        struct io_uring_rsrc_update2 up;

        if (nr == sizeof(up) && host_uring_read(&up, arg, sizeof(up)) == 0 &&
            (k = host_uring_first((const void *)(uintptr_t)up.data, up.nr, sizeof(int))) < up.nr) {
            if (k == 0) {
                return host_uring_ebadf();
            }
            up.nr = k; /* the kernel reads this copy (during the call), not the host's */
            b[2] = (long)&up;
        }
        break;
    }
    case IORING_REGISTER_EVENTFD:
    case IORING_REGISTER_EVENTFD_ASYNC:
        if (host_uring_first(arg, 1, sizeof(int)) == 0) {
            return host_uring_ebadf();
        }
        break;
    case IORING_REGISTER_RING_FDS: /* the host's array: the kernel writes offsets back */
        k = host_uring_first((const char *)arg + offsetof(struct io_uring_rsrc_update, data), nr,
                             sizeof(struct io_uring_rsrc_update));
        if (k == 0 && nr > 0) {
            return host_uring_ebadf();
        }
        b[3] = k;
        break;
    default:
        break;
    }
    return real(SYS_io_uring_register, b[0], b[1], b[2], b[3], b[4], b[5]);
}
