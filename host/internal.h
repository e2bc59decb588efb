/* SPDX-License-Identifier: MIT */
/*
 * host/internal.h - shared by the files of host/: the installed hook tables, the export marker
 * and the link anchors. Nothing outside host/ includes it.
 */
#ifndef HOST_INTERNAL_H
#define HOST_INTERNAL_H

#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include "host/host.h"

/* The library is built with -fvisibility=hidden; an interposer is exported. */
#define HOST_EXPORT         __attribute__((visibility("default")))
/* The calling function's frame address, handed to the agent's hooks as fa. */
#define HOST_FA             ((uint64_t)(uintptr_t)__builtin_frame_address(0))
/* Keeps an interposer's frame (whose address was handed down as fa) alive during the call. */
#define HOST_NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

/* seccomp.c: before the host's seccomp(op, flags, args) is made (its prctl(PR_SET_SECCOMP), and
 * fds.c's syscall() of SYS_seccomp through host_seccomp_hook): the server's seccomp_before hook
 * when the call may install a filter or strict mode. errno kept. */
void host_seccomp_before(long op, unsigned long flags, const void *args);
typedef void (*host_seccomp_fn)(long op, unsigned long flags, const void *args);
/* 1 once seccomp_before stopped the library for a filter (seccomp.c), before the filter is in:
 * the library makes no system call of the kinds below from then on, in this process and its
 * fork()ed children. What of it still runs there is libuv's: its destructor at exit closes its
 * signal lock's pipe, and its fork child handler, which it cannot take back, closes that pipe in
 * every child, makes a new one and writes a byte to it, aborting when the pipe or the write fails
 * (a filter refuses or kills them). So the library's closes succeed without a system call (the
 * fd stays open: the library is gone), its pipe, pipe2 and socketpair return HOST_FD_NEVER twice
 * without one, and its write to HOST_FD_NEVER succeeds without one. */
extern _Atomic int host_seccomp_sealed;
/* 1 when the seal is on and the caller whose return address is ra is the library's (its code,
 * its thread, or a definition ahead of it: fds.c's host_fds_data_refused says why), or, for fd a
 * library fd or HOST_FD_NEVER (-1: no fd), libuv's code anywhere: its destructor's close of its
 * signal lock's pipe runs on the host's thread outside the library's spans (fds.c,
 * host_library_span), where a host's own libuv closes and makes its own fds for real. One relaxed
 * load while the seal is off. */
int host_fds_sealed_call(int fd, const void *ra);

/* host_seccomp_before once the server's hooks are installed (server.c), else NULL; defined in
 * host.c, so that fds.c links without the server's archive. */
extern _Atomic(host_seccomp_fn) host_seccomp_hook;

/* The installed tables (host.c), NULL until installed. */
extern _Atomic(const struct host_agent_hooks *) host_agent_hooks_installed;
extern _Atomic(const struct host_server_hooks *) host_server_hooks_installed;

static inline const struct host_agent_hooks *
host_agent(void)
{
    return atomic_load_explicit(&host_agent_hooks_installed, memory_order_acquire);
}

static inline const struct host_server_hooks *
host_server(void)
{
    return atomic_load_explicit(&host_server_hooks_installed, memory_order_acquire);
}

/* The agent's hooks when they apply to the calling thread, else NULL: pass the call through. */
static inline const struct host_agent_hooks *
host_agent_active(void)
{
    const struct host_agent_hooks *h = host_agent();

    return h != NULL && h->active() ? h : NULL;
}

/*
 * One anchor per file of host/, referenced by the hook installers (host.c). A program links a
 * static archive's member only when something references it, and nothing calls an interposer by
 * its name (the dynamic linker finds it): without the anchors a program linked with pp_host, or
 * libpipeprof.so built against a sanitizer runtime that defines read() itself, would silently
 * lose every interposer. A new file of host/ defines its anchor and is added to host.c's lists;
 * check-host-exports fails when a file's interposers are not exported.
 */
#define HOST_ANCHOR(file) const char host_anchor_##file = 1
extern const char host_anchor_threads, host_anchor_blocking, host_anchor_signals;
extern const char host_anchor_fds, host_anchor_eintr, host_anchor_writes;
extern const char host_anchor_exit, host_anchor_exec, host_anchor_creds, host_anchor_sockets;
extern const char host_anchor_dl, host_anchor_uring, host_anchor_seccomp, host_anchor_ns;

/*
 * The library's signal and the host's disposition of it (sig-chain.c, written by signals.c).
 * signo is 0 while the library holds no signal; act[cur] is what the host installed, as bare
 * would have it; onstack_added has bit s-1 set when the host's handler of signal s got signo
 * added to its mask (hidden from its oldact). restorer_flag and restorer are what libc adds to
 * every disposition it installs (SA_RESTORER and its trampoline on x86-64; 0 and NULL where the
 * kernel provides it), as the library's own handler reads back: a recorded disposition gets them
 * too, as the kernel would report it.
 */
#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1u << 31) /* linux/signal.h; glibc's headers lack it */
#endif

typedef int (*host_sigaction_fn)(int, const struct sigaction *, struct sigaction *);
struct host_sig_record {
    _Atomic int signo;
    _Atomic unsigned cur;
    struct sigaction act[2];
    struct sigaction library_act;
    _Atomic(host_sigaction_fn) real_sigaction;
    _Atomic uint64_t onstack_added;
    int restorer_flag;
    void (*restorer)(void);
};
extern struct host_sig_record host_sig;

/* Publishes the host's disposition (a writer at a time); reads it. Async-signal-safe. */
void host_sig_publish(const struct sigaction *act);
void host_sig_current(struct sigaction *out);

/* posix_spawn, system and exec (exec.c): a child must inherit the host's SIG_IGN of the
 * library's signal, which a handler would turn into SIG_DFL. begin returns 1 when it set the
 * real disposition to SIG_IGN; end(1) puts the library's handler back. */
int host_signals_spawn_begin(void);
void host_signals_spawn_end(int began);

/*
 * One blocking call made for the host (blocking.c, eintr.c), retried while it fails with an EINTR
 * one of the agent's signals caused. host_wait_begin returns 0 when the call goes straight to
 * libc (no agent, or one of the agent's threads); else 1, with the caller's stack recorded for the
 * wall sampler (fa: the interposer's frame) under callee, the libc function the interposer
 * calls (its real), as the stack's leaf: the sample names the call it waits in. After each try
 * host_wait_again says whether to make it again (an EINTR the agent caused: counted, and the next
 * try's baseline taken); host_wait_end ends the record and leaves errno at err. XXX(S): a host
 * signal delivered in the very same try as one of the agent's is swallowed with it; both would have
 * to coincide. A wait that only a signal ends (sigsuspend, pause) must not be retried so: eintr.c's
 * host_suspend.
 */
struct host_wait {
    const struct host_agent_hooks *h;
    void *token;
    uint32_t sig0;
};
int host_wait_begin(struct host_wait *w, uint64_t fa, const void *callee);
int host_wait_again(struct host_wait *w, long rc, int err);
void host_wait_end(const struct host_wait *w, int err);

/* A relative timeout carried across retries: what is left of it, from CLOCK_MONOTONIC. cur is
 * what a try passes: the caller's own first (NULL: no timeout), which is read here only after the
 * kernel read it (a retry: an EINTR), as an unreadable one is the kernel's to refuse (EFAULT), then
 * what is left. */
struct host_timeout {
    struct timespec left;
    const struct timespec *tmo, *cur;
    uint64_t start, deadline;
    int set;
};
void host_timeout_start(struct host_timeout *t, const struct timespec *tmo);
void host_timeout_next(struct host_timeout *t);
/* CLOCK_MONOTONIC in ns, 0 where it cannot be read: the one clock of host/'s bounds. */
uint64_t host_now_ns(void);

/*
 * The body of an interposer that is a blocking call and nothing else: without the agent returns
 * pass; else makes call (which fails with -1 and errno) until it returns something other than an
 * EINTR the agent caused, running next between tries, and returns its result. The interposer's
 * real (HOST_REAL_OR_ENOSYS) is the leaf of the stack recorded for the wall sampler.
 */
#define HOST_WAIT_RETRY(type, pass, call, next)             \
    do {                                                    \
        struct host_wait w_;                                \
        type rc_;                                           \
        int err_;                                           \
                                                            \
        if (!host_wait_begin(&w_, HOST_FA, (void *)real)) { \
            return pass;                                    \
        }                                                   \
        for (;;) {                                          \
            rc_ = call;                                     \
            err_ = errno;                                   \
            if (!host_wait_again(&w_, (long)rc_, err_)) {   \
                break;                                      \
            }                                               \
            next;                                           \
        }                                                   \
        host_wait_end(&w_, err_);                           \
        return rc_;                                         \
    } while (0)

/* In an interposer: ret (*real) params is the next definition of name, or it returns -1 with
 * ENOSYS. */
#define HOST_REAL_OR_ENOSYS(ret, params, name)                    \
    static _Atomic(void *) real_p;                                \
    ret(*real) params = (ret(*) params)host_real(&real_p, #name); \
                                                                  \
    if (real == NULL) {                                           \
        errno = ENOSYS;                                           \
        return -1;                                                \
    }

/* syscall()'s six arguments (fds.c's interposer) and the real syscall. */
typedef long (*host_syscall_fn)(long, long, long, long, long, long, long);
/* 1 when system call n with arguments a is a wait the kernel does not restart after a handler
 * (eintr.c: futex waits, io_getevents, System V IPC): fds.c's syscall() then makes it through
 * host_syscall_wait with its own frame address fa. */
int host_syscall_is_wait(long n, const long a[6]);
/* fds.c's receives through syscall() (SYS_recvmsg, SYS_recvmmsg) are made through it too, with
 * their arguments passed again as they were at each retry. */
long host_syscall_wait(host_syscall_fn real, long n, const long a[6], uint64_t fa);
/* syscall()'s sends of a signal to a thread (SYS_tkill, SYS_tgkill, SYS_rt_tgsigqueueinfo), which
 * host/signals.c treats as tgkill's interposer treats its own (host_syscall_send). */
#define HOST_SYSCALL_IS_SEND(n) \
    ((n) == SYS_tgkill || (n) == SYS_tkill || (n) == SYS_rt_tgsigqueueinfo)
long host_syscall_send(host_syscall_fn real, long n, const long a[6]);

/* syscall()'s SYS_unshare and SYS_setns (ns.c, in the server's archive): fds.c's syscall() hands
 * them to host_ns_syscall_installed, which server.c sets when the server's hooks are installed
 * (NULL: they pass through); ra is syscall()'s caller. */
typedef long (*host_ns_syscall_fn)(host_syscall_fn real, long n, const long a[6], const void *ra);
extern _Atomic(host_ns_syscall_fn) host_ns_syscall_installed;
long host_ns_syscall(host_syscall_fn real, long n, const long a[6], const void *ra);

/* A host thread's unshare(2) with CLONE_FILES (libc's unshare, syscall()'s SYS_unshare) made by
 * call(real, n, a), and the calling thread's new fd table recorded as close_range's
 * CLOSE_RANGE_UNSHARE's is (fds.c); ra is the caller. Returns call's result, errno its. */
long host_fds_unshare_files(long (*call)(void *, long, const long[6]), void *real, long n,
                            const long a[6], const void *ra);

/* creds.c: the server's creds_before hook, if installed (1 when it stopped the library); and
 * creds_after when restart is 1, errno left at saved_errno. ns.c makes its calls with them. */
int host_creds_before(void);
void host_creds_after(int restart, int saved_errno);

/* threads.c: the tids of the library's threads (host_thread_mark_library registers the caller),
 * and how many of them are alive in this process now. A small fixed table: a dead thread's slot
 * is taken again. */
void host_thread_library_add(long tid);
int host_thread_library_live(void);
/* 1 once the host (not the library) called pthread_create, in this process or the parent it was
 * fork()ed from. */
int host_thread_host_made(void);
/* fds.c: lists the calling thread's id as the library's in the host's listings of
 * /proc/self/task (as host_thread_mark_library does), without making its calls the library's:
 * host_trampoline's, for a thread created from the library's code, before that code runs. Its
 * calls become the library's where that code marks the thread (host_thread_mark_library): a
 * unit test's threads, whose code is the library's object, are the host's
 * (test-host-unshare). */
void host_thread_list_library(void);
/* threads.c: returns once no library thread is between its clone and its registration (the
 * listing's table of host_thread_mark_library), or after a bound: a host's listing of
 * /proc/self/task made meanwhile held that thread (fds.c's listings call it before the kernel
 * reads). Raw system calls only, errno kept: async-signal-safe. */
void host_thread_library_started_wait(void);
/* threads.c: a fork()ed child's reset (host_fds_forked_child calls it). */
void host_thread_forked_child(void);
/* fds.c: 1 when the interposer whose return address is ra was called by the library (its code or
 * one of its threads). */
int host_fds_is_library_call(const void *ra);
/* fds.c: 1 when ra is in an object whose definitions come ahead of this library's (a sanitizer
 * runtime: its interceptors call this library's interposers for the library's calls too). */
int host_fds_is_ahead_call(const void *ra);
/* procstat.c: after a host's successful read-only open of path (absolute, under /proc/) at fd
 * with flags, by the interposer whose return address is ra: when path is this process's stat or
 * status and library threads are live, fd's number holds a sealed copy whose thread count is the
 * bare one. errno kept. */
void host_procstat_opened(int fd, const char *path, int flags, const void *ra);
/* The open flags besides O_RDONLY that host_procstat_opened accepts. */
#define HOST_PROCSTAT_FLAGS (O_CLOEXEC | O_NONBLOCK | O_LARGEFILE | O_NOCTTY | O_NOFOLLOW)
/* The cheap test of an open's result fd, path and flags before host_procstat_opened: a failed
 * open, a path not under /proc/ and a write pass with two compares. */
static inline int
host_procstat_maybe(long fd, const char *path, int flags, const void *ra)
{
    if (__builtin_expect(fd >= 0 && path[0] == '/' && path[1] == 'p', 0) &&
        strncmp(path, "/proc/", 6) == 0 && (flags & ~HOST_PROCSTAT_FLAGS) == O_RDONLY) {
        host_procstat_opened((int)fd, path, flags, ra);
    }
    return (int)fd;
}

/*
 * recv and recvfrom with MSG_WAITALL (blocking.c), made once inside HOST_WAIT_RETRY's loop (the
 * agent installed): a stream's wait for all len bytes that one of the agent's signals ended with
 * fewer goes on for the rest (writes.c, which says why).
 */
typedef ssize_t (*host_recv_fn)(int, void *, size_t, int);
typedef ssize_t (*host_recvfrom_fn)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
typedef ssize_t (*host_recvmsg_fn)(int, struct msghdr *, int);
ssize_t host_recv_waitall(host_recv_fn real, int fd, void *buf, size_t len, int flags);
ssize_t host_recvmsg_waitall(host_recvmsg_fn real, int fd, struct msghdr *msg, int flags);
ssize_t host_recvfrom_waitall(host_recvfrom_fn real, int fd, void *buf, size_t len, int flags,
                              struct sockaddr *sa, socklen_t *salen);

/* Resolves writes.c's real functions (host_set_agent_hooks: before the agent's handler can call
 * write). */
void host_writes_resolve(void);

/* Around an fd-creating call of the interposer whose return address is ra: returns whether it is
 * the library's, and then holds the gate (fds.c) until host_fds_create_end(), which moves the new
 * fd high and returns it (a negative fd as it is, errno kept). Not across a blocking call. */
int host_fds_create_begin(const void *ra);
int host_fds_create_end(int library, int fd);
/* Around accept and accept4 of the caller whose return address is ra, blocking or not: returns
 * what host_fds_accepted(), which moves the new fd (the host's down, the library's high), takes. */
unsigned host_fds_accepting(const void *ra);
int host_fds_accepted(int fd, const void *ra, unsigned entries);
/*
 * The data calls on an fd's number (read, write, their vector, positioned and socket forms,
 * fstatfs, fgetxattr, __fxstat): the host's on a library fd fail with EBADF, as bare, and move
 * nothing (fds.c's header). The fast path is one bit test of the set of library fds:
 * HOST_FD_DATA_REFUSED(fd) is 1, with errno EBADF, when the caller's call must fail; its slow
 * half (host_fds_data_refused) runs only for a library fd, while a library creation is between
 * its system call and its mark (a host's call then waits for it), or after a host thread's
 * unshare. Async-signal-safe (loads, and sched_yield in the wait).
 */
#define HOST_FDS_MAX 65536 /* numbers the set can hold; the library keeps its fds below */
extern _Atomic uint64_t host_fds_owned[HOST_FDS_MAX / 64];
int host_fds_data_refused(int fd, const void *ra);

/* 1 when fd's mark is a library creation's low moment made in another fd table than the
 * caller's (a host thread's close_range(CLOSE_RANGE_UNSHARE): fds.c, host_fds_low): there the
 * number is not the library's. Async-signal-safe; errno kept. */
int host_fds_low_elsewhere(int fd);

static inline int
host_fd_is_library(int fd)
{
    return (unsigned)fd < HOST_FDS_MAX &&
           ((atomic_load_explicit(&host_fds_owned[(unsigned)fd / 64], memory_order_relaxed) >>
             ((unsigned)fd % 64)) &
            1u) &&
           !host_fds_low_elsewhere(fd);
}

/* Copies len bytes of the host's memory at addr into out without faulting (process_vm_readv of
 * this process, and a getpid: two system calls), for an interposer that must look at what a
 * host's pointer points to before the kernel does: a pointer the kernel answers with EFAULT must
 * not kill the host in the interposer. 0; -EFAULT when not all of it is readable (the kernel
 * would answer EFAULT). Where it cannot tell (a seccomp filter refused the call) the memory is
 * read directly and 0 returned: a look the interposer needs (a library fd's number named in an
 * io_uring registration, a path's first byte, a socket's address to redirect) is never skipped,
 * and a bad pointer then faults where bare gets EFAULT (docs/architecture.md's rows say where).
 * errno kept. Context: any thread, a signal handler too (host.c). */
int host_read_user(void *out, const void *addr, size_t len);
/* len bytes of scratch memory mapped for one call (raw mmap), not taken from the caller's stack,
 * which may be a small alternate one: an async-signal-safe call may run in a handler there (host/
 * procstat.c, fds.c's unshare record). NULL when the mapping fails. Errno may change. */
void *host_scratch_map(size_t len);
void host_scratch_unmap(void *p, size_t len);
/* 1 when [addr, addr + len) is provably readable without a system call: on the main thread's
 * stack, between the caller's frame and the stack's top (host.c says how it knows); 0 when it
 * cannot tell. Loads and compares only. */
int host_stack_readable(const void *addr, size_t len);
/* libc's syscall(), resolved by host.c's constructor: -1 with ENOSYS where libc has none.
 * Context: any thread, a signal handler too. */
long host_raw_syscall(long n, long a, long b, long c, long d, long e, long f);

/* Whether a data call on fd by the caller whose return address is ra must fail (EBADF, errno
 * set): a library fd's number, or, once a host thread unshared its fd table (fds.c: a count that
 * is 0 until then), a copy the caller's unshare kept of a library fd the library has closed since
 * (its mark gone from the process-wide set). */
extern _Atomic int host_fds_unshared_n;
/* Library creations between their system call and their mark (fds.c): loaded before the bit
 * test (acquire: a 0 from a creation's end brings its mark), the slow half waits while not 0. */
extern _Atomic int host_fds_creating_n;
static inline int
host_fd_data_refused_by(int fd, const void *ra)
{
    int creating = atomic_load_explicit(&host_fds_creating_n, memory_order_acquire);

    return (__builtin_expect(creating != 0, 0) || __builtin_expect(host_fd_is_library(fd), 0) ||
            __builtin_expect(atomic_load_explicit(&host_fds_unshared_n, memory_order_relaxed) != 0,
                             0)) &&
           host_fds_data_refused(fd, ra);
}

#define HOST_FD_DATA_REFUSED(fd) host_fd_data_refused_by((fd), __builtin_return_address(0))

/* A number no fd ever has (the kernel's fd table ends below fs.nr_open's maximum, INT_MAX rounded
 * down): a refused call of those that check other arguments before the fd (signalfd's flags,
 * timerfd_settime's, mmap's offset, the mount calls' flags and commands, openat's and the *at
 * calls' flags, the positioned calls' offset: fds.c's header lists them) is made with it in the
 * library fd's place, so that the host gets what bare gets, EINVAL for a bad flag before the fd's
 * EBADF (fds.c). */
#define HOST_FD_NEVER 0x7fffffff

/* For a call that checks other arguments before its fd (its flags, its path's name, an offset, a
 * pointer it reads): fd, the parameter fd_at names when the call looks at it, becomes HOST_FD_NEVER
 * when the host's call is refused, and the call is made so (bare's errno: EINVAL first for a bad
 * flag, else EBADF). */
#define HOST_FD_NEVER_AT(fd_at, fd)        \
    do {                                   \
        if (HOST_FD_DATA_REFUSED(fd_at)) { \
            (fd) = HOST_FD_NEVER;          \
        }                                  \
    } while (0)

/* After recvmsg (eintr.c; host_fds_accepting before it): moves the fds an SCM_RIGHTS message
 * of msg brought as accept's, and returns rc (msg is read only when rc >= 0, errno kept). */
ssize_t host_fds_received(ssize_t rc, struct msghdr *msg, const void *ra, unsigned entries);
/* The same for the rc messages of vec that recvmmsg received; returns rc. */
int host_fds_received_many(int rc, struct mmsghdr *vec, const void *ra, unsigned entries);

/* uring.c: the host's io_uring rings (set up through syscall()) and the submissions and
 * registrations that name a library fd. host_uring_created after the host's io_uring_setup of fd
 * succeeded (p: its parameters as the kernel filled them); host_uring_closed after the host closed
 * the numbers lo..hi; host_uring_tracked says whether fd is such a ring; host_uring_submit makes
 * the host's io_uring_enter's submission (only: no wait), host_uring_ready says whether
 * min_complete completions are in fd's ring already (then the wait is left out), and
 * host_uring_register its io_uring_register (a[0], the ring's fd, already checked) with real. */
struct io_uring_params;
void host_uring_created(int fd, const struct io_uring_params *p);
void host_uring_closed(int lo, int hi);
int host_uring_tracked(int fd);
long host_uring_submit(host_syscall_fn real, const long a[6]);
int host_uring_ready(int fd, unsigned min_complete);
long host_uring_register(host_syscall_fn real, const long a[6]);

#endif /* HOST_INTERNAL_H */
