/* SPDX-License-Identifier: MIT */
/*
 * host/fds.c - file descriptors: the library's own stay its own.
 *
 *   close close_range closefrom dup2 dup3
 *                    interposed because a daemon closes every fd it did not open (a loop over
 *                    3..4095, close_range(3, ~0U, 0), closefrom(3)) or dup2()s a log file over
 *                    low numbers, after the library started. Without this the agent's manager
 *                    read the host's new pipe (8 to 41 % of its bytes lost), libuv aborted at
 *                    exit on its closed epoll fd (status 134), and nettrace bytes or an eventfd
 *                    counter went into the host's log file.
 *   fopen fclose opendir closedir
 *                    interposed for the library's own reads of /proc files and directories:
 *                    its read-only fopen and its opendir open the fd here (high, registered),
 *                    and fclose and closedir forget it; the host's calls are libc's.
 *   syscall          interposed for SYS_close only: libuv closes its fds with syscall(SYS_close),
 *                    and a host's raw close of a library fd gets the EBADF of close() too; every
 *                    other system call passes through with its six arguments.
 *   eventfd epoll_create epoll_create1 socket pipe pipe2 open open64 __open_2 __open64_2
 *                    interposed so that an fd the library creates (libuv's epoll fd, async
 *                    eventfd, signal pipes and the spare /dev/null it keeps for EMFILE, the IPC
 *                    sockets, the manager's eventfd, the files it reads; accept and accept4 of
 *                    blocking.c do the same for connections) moves to a high number
 *                    (F_DUPFD_CLOEXEC from a quarter below RLIMIT_NOFILE or 1024, host_fds_base)
 * and is registered in a lock-free set: the host's low numbers are its own, as bare. host_fd_take()
 * does the same for fds the library opens by other means (perf_event_open). fopen's fds are libc's
 * own and are not seen.
 *
 * A call is the library's when it comes from one of the library's threads
 * (host_thread_mark_library) or from the code of libpipeprof.so or of an object it trusts
 * (host_fds_trust: libuv); every other call is the host's.
 *
 * What the host may rely on: close() of a number it does not own fails with EBADF, exactly as
 * bare (where that number was free), and closes nothing; close_range and closefrom close every
 * fd of the host's in the range and none of the library's (their result is libc's);
 * eventfd, epoll_create*, socket and pipe2 called by the host behave as libc's and return the
 * numbers libc gives. dup2/dup3 onto a library fd is the one call that cannot be hidden: the
 * number is the host's to take, so the library stops (agent and server, one line on stderr, the
 * server's fd_taken hook) and the host's dup2 then proceeds on a free number; without the hook
 * the fd is forgotten and the host's call proceeds. Not covered: system calls made without
 * libc's functions (inline assembly, the Go runtime) see the library's fds as any other, and
 * syscall(2) is watched for SYS_close only (and hands eintr.c the waits it retries);
 * fcntl(F_DUPFD) onto a high number simply gets the next free one.
 *
 * The moment of a move: the kernel gives every new fd the lowest free number, and no call creates
 * one at a chosen number, so a library fd is low from its creation until host_fd_take() has
 * duplicated it high and closed the low number (two system calls, a few microseconds; the wall
 * thread keeps its /proc files open, so after a session's first passes this happens at thread
 * starts, connections and session starts). The host's closes are kept out of that moment by a
 * gate (host_fds_gate): while the library creates and moves fds the host's close, syscall
 * (SYS_close), close_range, closefrom, dup2 and dup3 wait, and while one of those runs the
 * library's creations wait. Without it a daemon's close_range(3, ~0U, 0) at its start met the
 * session's first fds under `record --mode wall` in 13 of 30 runs at a load of 20: the low
 * number closed before it moved, libuv got -1 from eventfd or epoll_create and aborted the host
 * (status 134). Each side waits at most a bound (HOST_FDS_GATE_HOST_NS for the host, whose
 * signal handler may interrupt the library's creation on the same thread; the library's longer,
 * as a host's close of a lingering socket may block), then goes ahead as before the gate. A
 * host's creation not made through an interposer here (below) in that moment gets the next
 * number instead of the low one (the kernel's choice; an fd received by SCM_RIGHTS or taken by
 * pidfd_getfd gets the lowest free number too, and only dup2, dup3 and F_DUPFD choose one, which
 * need the fd in the table already). Ways to be born high were weighed: a private fd table for the
 * library's threads (unshare(CLONE_FILES)) would hide their fds from the host, but the server's
 * loop and sockets are created on the host thread that starts it (the constructor) and used from
 * the loop thread; checking the low number with kcmp(KCMP_FILE) before the close only moves the
 * window to the next system call. The host's own creations through the interposers here (open,
 * open64,
 * __open_2, __open64_2, eventfd, epoll_create, epoll_create1, socket, pipe, pipe2) wait for
 * that moment to end (host_fds_creating, which says why they do not count themselves in): a host's
 * open after a close loop got fd 4 where bare gets 3 in two fresh-clone CI runs
 * (host-contract-fds-dup3 in CPU mode, -sysclose's pipe in wall mode, ASan stage). Still open:
 * creations made without them (openat, dup, accept, socketpair, inotify_init, memfd_create,
 * libc's own opens inside fopen and opendir).
 *
 * Held by: host-contract-fds-* (tests/hosts/fds.c: closing loops through close and
 * syscall(SYS_close), close_range, closefrom, dup2 and dup3 over 3..40 and over 768..800, then a
 * pipe and files of the host's own, bare against preloaded, CPU and wall, record, listen mode
 * and no session: same output, same per-call error counts, exit 0).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "host/internal.h"

HOST_ANCHOR(fds);

#define HOST_FDS_MAX   65536 /* numbers the set can hold; the library keeps its fds below */
#define HOST_FDS_WORDS (HOST_FDS_MAX / 64)
#define HOST_FDS_CODE  4 /* objects whose calls are the library's */

static _Atomic uint64_t host_fds_owned[HOST_FDS_WORDS];
static _Atomic int host_fds_count;

/* The executable ranges of libpipeprof.so and of the objects it trusts: [lo, hi). */
static _Atomic uintptr_t host_fds_code_lo[HOST_FDS_CODE], host_fds_code_hi[HOST_FDS_CODE];
static _Atomic int host_fds_code_n;

static _Thread_local int host_library_thread;

void
host_thread_mark_library(void)
{
    host_library_thread = 1;
}

static int
host_fd_is_owned(int fd)
{
    return fd >= 0 && fd < HOST_FDS_MAX &&
           (atomic_load_explicit(&host_fds_owned[fd / 64], memory_order_acquire) >>
            (unsigned)(fd % 64)) &
                   1u;
}

static void
host_fd_mark(int fd, int owned)
{
    uint64_t bit = (uint64_t)1 << (unsigned)(fd % 64);

    if (owned) {
        atomic_fetch_or_explicit(&host_fds_owned[fd / 64], bit, memory_order_release);
        atomic_fetch_add_explicit(&host_fds_count, 1, memory_order_relaxed);
    } else if (atomic_fetch_and_explicit(&host_fds_owned[fd / 64], ~bit, memory_order_acq_rel) &
               bit) {
        atomic_fetch_sub_explicit(&host_fds_count, 1, memory_order_relaxed);
    }
}

struct host_fds_find {
    uintptr_t addr, lo, hi;
};

static int
host_fds_find_segment(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct host_fds_find *f = arg;
    int i;

    (void)size;
    for (i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && f->addr >= lo &&
            f->addr < lo + ph->p_memsz) {
            f->lo = lo;
            f->hi = lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

static void host_fds_trust_one(const void *code);

/* libpipeprof.so itself (or the program host/ is linked into) comes first. */
static void
host_fds_trust_self(void)
{
    if (atomic_load_explicit(&host_fds_code_n, memory_order_acquire) == 0) {
        host_fds_trust_one((const void *)host_fds_trust_self);
    }
}

void
host_fds_trust(const void *code)
{
    host_fds_trust_self();
    host_fds_trust_one(code);
}

static void
host_fds_trust_one(const void *code)
{
    struct host_fds_find f = { (uintptr_t)code, 0, 0 };
    int i, n = atomic_load_explicit(&host_fds_code_n, memory_order_acquire);

    for (i = 0; i < n; i++) {
        if (f.addr >= atomic_load_explicit(&host_fds_code_lo[i], memory_order_relaxed) &&
            f.addr < atomic_load_explicit(&host_fds_code_hi[i], memory_order_relaxed)) {
            return;
        }
    }
    if (n == HOST_FDS_CODE || dl_iterate_phdr(host_fds_find_segment, &f) == 0) {
        return;
    }
    atomic_store_explicit(&host_fds_code_lo[n], f.lo, memory_order_relaxed);
    atomic_store_explicit(&host_fds_code_hi[n], f.hi, memory_order_relaxed);
    atomic_store_explicit(&host_fds_code_n, n + 1, memory_order_release);
}

/* ra: the interposer's return address. */
static int
host_fds_library_call(const void *ra)
{
    int i, n = atomic_load_explicit(&host_fds_code_n, memory_order_acquire);

    if (host_library_thread) {
        return 1;
    }
    for (i = 0; i < n; i++) {
        if ((uintptr_t)ra >= atomic_load_explicit(&host_fds_code_lo[i], memory_order_relaxed) &&
            (uintptr_t)ra < atomic_load_explicit(&host_fds_code_hi[i], memory_order_relaxed)) {
            return 1;
        }
    }
    return 0;
}

/*
 * Where the library's fds start: a quarter below RLIMIT_NOFILE, and never above
 * HOST_FDS_TOP: the kernel sizes a process's fd table to its highest number (a power of two),
 * and copies it at every fork and frees it at every exit; at 15000 (a 20000 limit) 200 short
 * children of a shell took 4.6 s instead of 2.3.
 */
#define HOST_FDS_TOP 1024

static int
host_fds_base(void)
{
    struct rlimit rl;
    rlim_t top = HOST_FDS_TOP;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < top) {
        top = rl.rlim_cur;
    }
    return top < 64 ? -1 : (int)(top - top / 4);
}

static _Atomic(void *) host_fds_real_close;

/* libc's close, so that a sanitizer's interceptor sees the fd go (ThreadSanitizer tracks fds, and
 * a number closed behind its back and reused looked like a race between its two owners). */
static int
host_fds_close_real(int fd)
{
    int (*real)(int) = (int (*)(int))host_real(&host_fds_real_close, "close");

    return real != NULL ? real(fd) : (int)syscall(SYS_close, fd);
}

/*
 * The gate between the library's fd creations and the host's closes (the moment of a move, above):
 * how many library creations are between their system call and the move of the new fd high, and
 * how many host closes (close, close_range, closefrom, dup2, dup3) are under way. A host close
 * counts itself in, then waits for the library's to finish; a library creation goes in only when
 * no host close is counted (it steps back and waits while one is). Each side enters regardless
 * after its bound: the host's is short, as its signal handler may interrupt a creation on the
 * same thread; the library's longer, as a host's close of a lingering socket may block.
 * Sequentially consistent: each side's count is stored before the other's is read.
 */
static _Atomic int host_fds_gate_library, host_fds_gate_host;
#define HOST_FDS_GATE_HOST_NS    50000000u  /* 50 ms */
#define HOST_FDS_GATE_LIBRARY_NS 500000000u /* 500 ms */

/* Whether the bound that *until holds (0: not started yet) has passed. */
static int
host_fds_gate_waited(uint64_t *until, uint64_t bound)
{
    struct timespec ts;
    uint64_t now;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (*until == 0) {
        *until = now + bound;
    }
    return now >= *until;
}

static void
host_fds_gate_host_enter(void)
{
    uint64_t until = 0;

    atomic_fetch_add(&host_fds_gate_host, 1);
    while (atomic_load(&host_fds_gate_library) != 0 &&
           !host_fds_gate_waited(&until, HOST_FDS_GATE_HOST_NS)) {
        sched_yield();
    }
}

static void
host_fds_gate_host_leave(void)
{
    atomic_fetch_sub(&host_fds_gate_host, 1);
}

static void
host_fds_gate_library_enter(void)
{
    uint64_t until = 0;

    for (;;) {
        atomic_fetch_add(&host_fds_gate_library, 1);
        if (atomic_load(&host_fds_gate_host) == 0) {
            return;
        }
        atomic_fetch_sub(&host_fds_gate_library, 1);
        while (atomic_load(&host_fds_gate_host) != 0) {
            if (host_fds_gate_waited(&until, HOST_FDS_GATE_LIBRARY_NS)) {
                atomic_fetch_add(&host_fds_gate_library, 1);
                return;
            }
            sched_yield();
        }
    }
}

static void
host_fds_gate_library_leave(void)
{
    atomic_fetch_sub(&host_fds_gate_library, 1);
}

void
host_fds_hold(void)
{
    host_fds_gate_library_enter();
}

void
host_fds_release(void)
{
    host_fds_gate_library_leave();
}

int
host_fd_take(int fd)
{
    int high, base, err = errno;

    if (fd < 0) {
        return fd;
    }
    host_fds_trust_self();
    base = host_fds_base();
    high = base > fd ? fcntl(fd, F_DUPFD_CLOEXEC, base) : -1;
    if (high >= 0 && high < HOST_FDS_MAX) {
        host_fds_close_real(fd);
        fd = high;
    } else if (high >= 0) {
        host_fds_close_real(high);
    } else if (base > fd && errno == EBADF) {
        /* Closed before it could move, by a host thread's close past the gate's bound: the
         * number may be the host's again already, and is not touched. */
        return -1;
    }
    if (fd < HOST_FDS_MAX) {
        host_fd_mark(fd, 1);
    }
    errno = err;
    return fd;
}

void
host_fd_forget(int fd)
{
    if (fd >= 0 && fd < HOST_FDS_MAX) {
        host_fd_mark(fd, 0);
    }
}

void
host_fds_forked_child(void)
{
    int i;

    for (i = 0; i < HOST_FDS_WORDS; i++) {
        atomic_store_explicit(&host_fds_owned[i], 0, memory_order_relaxed);
    }
    atomic_store_explicit(&host_fds_count, 0, memory_order_release);
    atomic_store(&host_fds_gate_library, 0); /* held by threads the child does not have */
    atomic_store(&host_fds_gate_host, 0);
}

int
host_fds_created(int fd, const void *ra)
{
    return fd >= 0 && host_fds_library_call(ra) ? host_fd_take(fd) : fd;
}

int
host_fds_create_begin(const void *ra)
{
    int library = host_fds_library_call(ra);

    if (library) {
        host_fds_gate_library_enter();
    }
    return library;
}

int
host_fds_create_end(int library, int fd)
{
    if (library) {
        int err = errno;

        fd = host_fd_take(fd);
        host_fds_gate_library_leave();
        if (fd < 0) {
            errno = err;
        }
    }
    return fd;
}

/*
 * Around one of fds.c's fd-creating interposers: a library call as host_fds_create_begin/_end; a
 * host's call first waits (at most the host's bound) while a library fd is in its low moment, so
 * that it does not get the next number (a host's open after closing every fd got 4 where bare
 * gets 3: host-contract-fds-dup3 and -sysclose in fresh-clone CI runs). It does not count itself
 * in, as a close does: a host's open may block for good (the .NET runtime opens its debugger
 * FIFOs so), and the library's creations would then wait their bound at each; a server stop at
 * exit took over 10 s. So a library creation that begins between the wait and the host's system
 * call can still meet it, a window of a few instructions instead of the moment.
 */
static int
host_fds_creating(const void *ra)
{
    int library = host_fds_create_begin(ra);
    uint64_t until = 0;

    while (!library && atomic_load(&host_fds_gate_library) != 0 &&
           !host_fds_gate_waited(&until, HOST_FDS_GATE_HOST_NS)) {
        sched_yield();
    }
    return library;
}

static int
host_fds_created_by(int library, int fd)
{
    return library ? host_fds_create_end(library, fd) : fd;
}

static _Atomic(void *) real_syscall;

/* Resolved before any signal handler can call syscall() (the first lookup takes a lock). */
__attribute__((constructor)) static void
host_fds_init(void)
{
    (void)host_real(&real_syscall, "syscall");
    host_fds_trust_self();
}

#define HOST_REAL(type, name) ((type)host_real(&real_##name, #name))

HOST_EXPORT int
close(int fd)
{
    int rc;

    if (host_fds_library_call(__builtin_return_address(0))) {
        if (host_fd_is_owned(fd)) {
            host_fd_mark(fd, 0);
        }
        return host_fds_close_real(fd);
    }
    host_fds_gate_host_enter();
    if (host_fd_is_owned(fd)) {
        errno = EBADF; /* the number was free in the bare run */
        rc = -1;
    } else {
        rc = host_fds_close_real(fd);
    }
    host_fds_gate_host_leave();
    return rc;
}

/* Six arguments are read whatever the call takes, as libc's syscall() passes six registers: the
 * last ones may lie past what the caller pushed (AddressSanitizer would call that a stack
 * underflow; the memory is the caller's stack, and the values are never used). */
HOST_EXPORT __attribute__((no_sanitize_address)) long
syscall(long n, ...)
{
    host_syscall_fn real = HOST_REAL(host_syscall_fn, syscall);
    long a[6];
    va_list ap;
    int i;

    va_start(ap, n);
    for (i = 0; i < 6; i++) {
        a[i] = va_arg(ap, long);
    }
    va_end(ap);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (n == SYS_close && !host_fds_library_call(__builtin_return_address(0))) {
        long rc = -1;

        host_fds_gate_host_enter();
        if (host_fd_is_owned((int)a[0])) {
            errno = EBADF;
        } else {
            rc = real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
        }
        host_fds_gate_host_leave();
        return rc;
    }
    if (n == SYS_close && host_fd_is_owned((int)a[0])) {
        host_fd_mark((int)a[0], 0);
    }
    if (HOST_SYSCALL_IS_SEND(n) && !host_fds_library_call(__builtin_return_address(0))) {
        return host_syscall_send(real, n, a); /* signals.c; the agent's own sends go as they are */
    }
    if (host_syscall_is_wait(n, a)) {
        long rc = host_syscall_wait(real, n, a, HOST_FA);

        HOST_NO_TAIL_CALL();
        return rc;
    }
    return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static int
host_close_range_raw(unsigned lo, unsigned hi, int flags)
{
    static _Atomic(void *) real_close_range;
    int (*real)(unsigned, unsigned, int) = HOST_REAL(int (*)(unsigned, unsigned, int), close_range);

    return real != NULL ? real(lo, hi, flags) : (int)syscall(SYS_close_range, lo, hi, flags);
}

/* close_range over [lo, hi] without the library's fds: the pieces between them. */
static int
host_close_range_around(unsigned lo, unsigned hi, int flags)
{
    unsigned fd = lo;
    int rc = 0, err = 0;

    if (lo > hi) {
        errno = EINVAL;
        return -1;
    }
    while (atomic_load_explicit(&host_fds_count, memory_order_acquire) > 0 && fd < HOST_FDS_MAX &&
           fd <= hi) {
        unsigned next = fd;

        while (next < HOST_FDS_MAX && next <= hi && !host_fd_is_owned((int)next)) {
            next++;
        }
        if (next >= HOST_FDS_MAX || next > hi) {
            break;
        }
        if (next > fd && host_close_range_raw(fd, next - 1, flags) != 0 && rc == 0) {
            rc = -1;
            err = errno;
        }
        fd = next + 1;
        if (fd == 0) {
            return rc; /* wrapped */
        }
    }
    if (fd <= hi && host_close_range_raw(fd, hi, flags) != 0 && rc == 0) {
        rc = -1;
        err = errno;
    }
    if (rc != 0) {
        errno = err;
    }
    return rc;
}

HOST_EXPORT int
close_range(unsigned lo, unsigned hi, int flags)
{
    int rc;

    if (host_fds_library_call(__builtin_return_address(0))) {
        return host_close_range_raw(lo, hi, flags);
    }
    host_fds_gate_host_enter();
    rc = host_close_range_around(lo, hi, flags);
    host_fds_gate_host_leave();
    return rc;
}

HOST_EXPORT void
closefrom(int lo)
{
    int fd, max;

    if (lo < 0) {
        lo = 0;
    }
    host_fds_gate_host_enter();
    if (host_close_range_around((unsigned)lo, ~0U, 0) != 0) {
        /* No close_range (a kernel before 5.9): one by one, as glibc's fallback would. */
        max = (int)sysconf(_SC_OPEN_MAX);
        for (fd = lo; fd < max; fd++) {
            if (!host_fd_is_owned(fd)) {
                host_fds_close_real(fd);
            }
        }
    }
    host_fds_gate_host_leave();
}

static _Atomic(void (*)(int)) host_fds_taken;

void
host_fds_set_taken(void (*taken)(int fd))
{
    atomic_store_explicit(&host_fds_taken, taken, memory_order_release);
}

/* The host takes newfd: a library fd there must go first (host_fds_set_taken). */
static void
host_fds_yield(int newfd, const void *ra)
{
    void (*taken)(int);

    if (!host_fd_is_owned(newfd) || host_fds_library_call(ra)) {
        return;
    }
    taken = atomic_load_explicit(&host_fds_taken, memory_order_acquire);
    if (taken != NULL) {
        taken(newfd);
    }
    host_fd_forget(newfd); /* whatever still holds it was told, or is gone */
}

/* 0 when the host's dup2 or dup3 of oldfd onto newfd may go ahead (a library fd at newfd was
 * given up); -1 with EBADF when oldfd is the library's, a number that was free in the bare run. */
static int
host_fds_dup_check(int oldfd, int newfd, const void *ra)
{
    int err = errno;

    if (host_fd_is_owned(oldfd) && !host_fds_library_call(ra)) {
        errno = EBADF;
        return -1;
    }
    host_fds_yield(newfd, ra);
    errno = err;
    return 0;
}

/*
 * The kernel answers EBUSY to a dup2 or dup3 onto a number another thread is opening at that
 * moment; the library's threads open files (and move them high) while the host's run, so the
 * host could see an EBUSY the bare run never would. Retried while it lasts (an open's moment).
 */
static int
host_fds_dup_retry(int rc, int (*again)(int, int, int), int oldfd, int newfd, int flags)
{
    int tries = 0;

    while (rc < 0 && errno == EBUSY && tries++ < 1000) {
        sched_yield();
        rc = again(oldfd, newfd, flags);
    }
    return rc;
}

static int
host_fds_dup2_once(int oldfd, int newfd, int flags)
{
    static _Atomic(void *) real_dup2;
    int (*real)(int, int) = HOST_REAL(int (*)(int, int), dup2);

    (void)flags;
    if (real != NULL) {
        return real(oldfd, newfd);
    }
#ifdef SYS_dup2
    return (int)syscall(SYS_dup2, oldfd, newfd);
#else /* aarch64 has dup3 only, which refuses oldfd == newfd where dup2 checks it */
    return oldfd == newfd ? (fcntl(oldfd, F_GETFD) < 0 ? -1 : newfd)
                          : (int)syscall(SYS_dup3, oldfd, newfd, 0);
#endif
}

static int
host_fds_dup3_once(int oldfd, int newfd, int flags)
{
    static _Atomic(void *) real_dup3;
    int (*real)(int, int, int) = HOST_REAL(int (*)(int, int, int), dup3);

    return real != NULL ? real(oldfd, newfd, flags) : (int)syscall(SYS_dup3, oldfd, newfd, flags);
}

/* dup2 or dup3 (once: one of the two) of the host's, in the gate; the library's, as they are. */
static int
host_fds_dup(int (*once)(int, int, int), int oldfd, int newfd, int flags, const void *ra)
{
    int rc = -1, host = !host_fds_library_call(ra);

    if (host) {
        host_fds_gate_host_enter();
    }
    if (host_fds_dup_check(oldfd, newfd, ra) == 0) {
        rc = host_fds_dup_retry(once(oldfd, newfd, flags), once, oldfd, newfd, flags);
    }
    if (host) {
        host_fds_gate_host_leave();
    }
    return rc;
}

HOST_EXPORT int
dup2(int oldfd, int newfd)
{
    return host_fds_dup(host_fds_dup2_once, oldfd, newfd, 0, __builtin_return_address(0));
}

HOST_EXPORT int
dup3(int oldfd, int newfd, int flags)
{
    return host_fds_dup(host_fds_dup3_once, oldfd, newfd, flags, __builtin_return_address(0));
}

/* open and open64 are one function in glibc on 64-bit targets, but both names are called. */
static int
host_fds_open(_Atomic(void *) *slot, const char *name, const char *path, int flags, va_list ap,
              const void *ra)
{
    int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))host_real(slot, name);
    mode_t mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;

    int library;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    library = host_fds_creating(ra);
    return host_fds_created_by(library, real(path, flags, mode));
}

#define HOST_FDS_OPEN(name)                                                               \
    HOST_EXPORT int name(const char *path, int flags, ...)                                \
    {                                                                                     \
        static _Atomic(void *) real_p;                                                    \
        va_list ap;                                                                       \
        int fd;                                                                           \
                                                                                          \
        va_start(ap, flags);                                                              \
        fd = host_fds_open(&real_p, #name, path, flags, ap, __builtin_return_address(0)); \
        va_end(ap);                                                                       \
        return fd;                                                                        \
    }

HOST_FDS_OPEN(open)
HOST_FDS_OPEN(open64)

/* An interposer of a call that returns one new fd (or -1): a library's fd moves high. */
#define HOST_FDS_CREATOR(name, types, params, args)                 \
    HOST_EXPORT int name params                                     \
    {                                                               \
        static _Atomic(void *) real_p;                              \
        int(*real) types = (int(*) types)host_real(&real_p, #name); \
        int library;                                                \
                                                                    \
        if (real == NULL) {                                         \
            errno = ENOSYS;                                         \
            return -1;                                              \
        }                                                           \
        library = host_fds_creating(__builtin_return_address(0));   \
        return host_fds_created_by(library, real args);             \
    }

/* The _FORTIFY_SOURCE forms of open without a mode (libuv opens its spare /dev/null so). */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
HOST_FDS_CREATOR(__open_2, (const char *, int), (const char *path, int flags), (path, flags))
HOST_FDS_CREATOR(__open64_2, (const char *, int), (const char *path, int flags), (path, flags))
HOST_FDS_CREATOR(eventfd, (unsigned, int), (unsigned int initval, int flags), (initval, flags))
HOST_FDS_CREATOR(epoll_create1, (int), (int flags), (flags))
HOST_FDS_CREATOR(epoll_create, (int), (int size), (size))
HOST_FDS_CREATOR(socket, (int, int, int), (int domain, int type, int protocol),
                 (domain, type, protocol))

/* pipe and pipe2 (glibc's pipe does not call pipe2 through the PLT). */
static int
host_fds_pipe(int (*real)(int *, int), int fds[2], int flags, const void *ra)
{
    int rc, library;

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    library = host_fds_creating(ra);
    rc = real(fds, flags);
    if (rc == 0 && library) {
        fds[0] = host_fd_take(fds[0]);
        fds[1] = host_fd_take(fds[1]);
    }
    if (library) {
        host_fds_gate_library_leave();
    }
    return rc;
}

HOST_EXPORT int
pipe2(int fds[2], int flags)
{
    static _Atomic(void *) real_pipe2;

    return host_fds_pipe(HOST_REAL(int (*)(int *, int), pipe2), fds, flags,
                         __builtin_return_address(0));
}

static int
host_fds_pipe_flagless(int *fds, int flags)
{
    static _Atomic(void *) real_pipe;
    int (*real)(int *) = HOST_REAL(int (*)(int *), pipe);

    (void)flags; /* 0 */
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return real(fds);
}

HOST_EXPORT int
pipe(int fds[2])
{
    return host_fds_pipe(host_fds_pipe_flagless, fds, 0, __builtin_return_address(0));
}

/*
 * The library reads /proc files and directories through stdio and dirent, whose fds libc opens
 * and closes without the calls above: a host closing every fd meanwhile closed them, and the
 * library's fclose or closedir would then close the number the host had reused. For the library's
 * own read-only fopen and its opendir the fd is opened here instead (high, registered), and
 * fclose and closedir forget it first. Every other call is libc's.
 */
HOST_EXPORT FILE *
fopen(const char *path, const char *mode)
{
    static _Atomic(void *) real_p;
    FILE *(*real)(const char *, const char *) =
            (FILE * (*)(const char *, const char *)) host_real(&real_p, "fopen");
    FILE *f;
    int fd;

    if (real == NULL) {
        errno = ENOSYS;
        return NULL;
    }
    if (mode[0] != 'r' || strchr(mode, '+') != NULL ||
        !host_fds_library_call(__builtin_return_address(0))) {
        return real(path, mode);
    }
    fd = host_fd_take(open(path, O_RDONLY | O_CLOEXEC));
    if (fd < 0) {
        return NULL;
    }
    f = fdopen(fd, mode);
    if (f == NULL) {
        host_fd_forget(fd);
        host_fds_close_real(fd);
    }
    return f;
}

HOST_EXPORT int
fclose(FILE *f)
{
    static _Atomic(void *) real_p;
    int (*real)(FILE *) = (int (*)(FILE *))host_real(&real_p, "fclose");

    if (real == NULL) {
        errno = ENOSYS;
        return EOF;
    }
    if (host_fd_is_owned(fileno(f)) && host_fds_library_call(__builtin_return_address(0))) {
        host_fd_forget(fileno(f));
    }
    return real(f);
}

HOST_EXPORT DIR *
opendir(const char *path)
{
    static _Atomic(void *) real_p;
    DIR *(*real)(const char *) = (DIR * (*)(const char *)) host_real(&real_p, "opendir");
    DIR *d;
    int fd;

    if (real == NULL) {
        errno = ENOSYS;
        return NULL;
    }
    if (!host_fds_library_call(__builtin_return_address(0))) {
        return real(path);
    }
    fd = host_fd_take(open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd < 0) {
        return NULL;
    }
    d = fdopendir(fd);
    if (d == NULL) {
        host_fd_forget(fd);
        host_fds_close_real(fd);
    }
    return d;
}

HOST_EXPORT int
closedir(DIR *d)
{
    static _Atomic(void *) real_p;
    int (*real)(DIR *) = (int (*)(DIR *))host_real(&real_p, "closedir");

    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (host_fd_is_owned(dirfd(d)) && host_fds_library_call(__builtin_return_address(0))) {
        host_fd_forget(dirfd(d));
    }
    return real(d);
}
