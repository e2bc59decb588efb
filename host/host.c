/* SPDX-License-Identifier: MIT */
/*
 * host/host.c - the agent's hook table and the real-function cache of host/host.h; the server's
 * table is in server.c, in an archive of its own (host/CMakeLists.txt says why), and the
 * interposers' non-faulting look at a host's memory (host_read_user, host_stack_readable). No
 * interposer lives here. Context: any thread; host_raw_syscall, host_read_user and
 * host_stack_readable also a signal handler (the constructor resolved what they call).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/internal.h"

_Atomic(const struct host_agent_hooks *) host_agent_hooks_installed;
_Atomic(host_seccomp_fn) host_seccomp_hook;
_Atomic int host_seccomp_sealed;

/*
 * The anchors of the files the agent's hooks serve (internal.h says why): a program that installs
 * them links threads.c, blocking.c and signals.c; server.c does the same for the server's.
 */
static const char *
host_agent_anchors(void)
{
    static const char *const volatile anchors[] = { &host_anchor_threads, &host_anchor_blocking,
                                                    &host_anchor_signals, &host_anchor_fds,
                                                    &host_anchor_eintr,   &host_anchor_writes,
                                                    &host_anchor_dl,      &host_anchor_uring };

    return anchors[0];
}

void
host_set_agent_hooks(const struct host_agent_hooks *hooks)
{
    (void)host_agent_anchors();
    if (hooks != NULL) {
        host_writes_resolve();
    }
    atomic_store_explicit(&host_agent_hooks_installed, hooks, memory_order_release);
}

void *
host_real(_Atomic(void *) *slot, const char *name)
{
    void *p = atomic_load_explicit(slot, memory_order_acquire);

    if (p == NULL) {
        p = dlsym(RTLD_NEXT, name);
        atomic_store_explicit(slot, p, memory_order_release);
    }
    return p;
}

static _Atomic(void *) host_real_syscall_slot;

/* The main thread's stack as far as host_stack_readable trusts it: [lo, hi), lo == hi when
 * unknown. Set by the constructor, read-only after; atomic because the library's threads may read
 * them while it runs (shim.c's constructor, which starts the IPC thread, can run first: its
 * connect read them as host_init wrote them, a data race under TSan). hi is stored last. */
static _Atomic uintptr_t host_main_stack_lo, host_main_stack_hi;

#ifdef __GLIBC__
extern void *__libc_stack_end; /* ld.so's: the main thread's stack pointer at its start */
#endif

/*
 * libc's syscall resolved before any interposer needs it (a host's signal handler's first call
 * must not take the loader's lock in dlsym), and the main thread's stack: from __libc_stack_end
 * (everything above it up to the mapping's end is the process's arguments, environment and
 * auxiliary vector, readable) down RLIMIT_STACK bytes, the most the kernel grows that mapping to
 * while the limit holds. The kernel puts no mapping of its own choice there (mmap_base lies at
 * least the stack limit and a guard gap below the stack's top), only a host's MAP_FIXED or hinted
 * mmap would; an unlimited limit (the legacy layout, no such bound) leaves it unknown, and so does
 * a limit the host raises later for a stack grown below lo (the fast path is then not taken).
 */
__attribute__((constructor)) static void
host_init(void)
{
    (void)host_real(&host_real_syscall_slot, "syscall");
#ifdef __GLIBC__
    struct rlimit rl;
    uintptr_t hi = (uintptr_t)__libc_stack_end;

    if (hi != 0 && getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < hi) {
        atomic_store_explicit(&host_main_stack_lo, hi - (uintptr_t)rl.rlim_cur,
                              memory_order_relaxed);
        atomic_store_explicit(&host_main_stack_hi, hi, memory_order_release);
    }
#endif
}

long
host_raw_syscall(long n, long a, long b, long c, long d, long e, long f)
{
    host_syscall_fn raw = (host_syscall_fn)host_real(&host_real_syscall_slot, "syscall");

    if (raw == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return raw(n, a, b, c, d, e, f);
}

/*
 * Without a system call: the calling thread runs on the main thread's stack (its frame between
 * lo and hi: not a signal stack or a stack the host made elsewhere), and [addr, addr + len) lies
 * between that frame and hi, all of it in the one stack mapping, which is readable from its
 * lowest page up. A frame is the lowest of the caller's: the host's address on its own stack is
 * above it.
 */
int
host_stack_readable(const void *addr, size_t len)
{
    uintptr_t frame = (uintptr_t)__builtin_frame_address(0), a = (uintptr_t)addr;
    uintptr_t hi = atomic_load_explicit(&host_main_stack_hi, memory_order_acquire);
    uintptr_t lo = atomic_load_explicit(&host_main_stack_lo, memory_order_relaxed);

    return frame >= lo && frame < hi && a >= frame && a < hi && len <= hi - a;
}

/*
 * A process that starts under a seccomp filter it inherited (a service manager's
 * SystemCallFilter=, a sandbox's launcher, a container runtime's profile) runs every call of the
 * library's under a filter the library cannot read; one that kills a call off its list (systemd's
 * default action) killed the host by SIGSYS at the library's first process_vm_readv, the server's
 * read of its own socket address in the constructor, where bare the program runs. So in such a
 * process the library leaves out the calls a program's own list is least likely to hold (the
 * debugging ones: process_vm_readv and _writev, perf_event_open, kcmp, pidfd_getfd and
 * pidfd_open, and memfd_create) and takes the path it takes where a filter refuses them with an
 * error: reads made directly, the timer engine, no fd-table comparisons, /proc's count unchanged.
 * A filter the host installs later stops the library instead (host/seccomp.c). Read once, from
 * /proc/self/status at the library's start (the loader's own calls, which the filter let through);
 * without /proc, not filtered (as before).
 *
 * A filter can kill other calls of the library's too (a list without the sockets the server
 * binds, without the timers CPU sampling arms), and those have no path without them. So in a
 * filtered process the library's other calls that a program's list may lack are tried first, with
 * arguments each refuses before it acts (a bad fd, flag or pointer), in a child that shares no
 * signal handlers and cannot dump core (host_filter_probe): the child dies at a call the filter
 * kills (or traps: SIGSYS at its default), and the library then does not start in this process
 * (host_filter_killed names the call; shim.c says it on stderr). The child is made as
 * posix_spawn makes one (clone with CLONE_VM and CLONE_VFORK), with no exit signal (the host's
 * SIGCHLD handler and its waits for any child do not see it), and reaped at once.
 */
static _Atomic int host_filtered_at_start, host_filter_noted;
static const char *_Atomic host_filter_killed_name;

static void host_filter_probe(void);

void
host_filter_note_start(void)
{
    char text[4096];
    const char *p;
    long fd, n, len = 0;

    if (atomic_exchange_explicit(&host_filter_noted, 1, memory_order_acq_rel)) {
        return; /* once: the first of the library's constructors */
    }
    fd = host_raw_syscall(SYS_openat, AT_FDCWD, (long)"/proc/self/status", O_RDONLY | O_CLOEXEC, 0,
                          0, 0);
    if (fd < 0) {
        return;
    }
    while (len < (long)sizeof(text) - 1 &&
           (n = host_raw_syscall(SYS_read, fd, (long)(text + len), (long)sizeof(text) - 1 - len, 0,
                                 0, 0)) > 0) {
        len += n;
    }
    host_raw_syscall(SYS_close, fd, 0, 0, 0, 0, 0);
    text[len] = '\0';
    p = strstr(text, "\nSeccomp:");
    if (p != NULL) {
        for (p += 9; *p == '\t' || *p == ' '; p++) {
        }
        atomic_store_explicit(&host_filtered_at_start, *p == '2', memory_order_release);
    }
    if (atomic_load_explicit(&host_filtered_at_start, memory_order_acquire)) {
        int saved = errno;

        host_filter_probe();
        errno = saved;
    }
}

/* A call of the library's and arguments it refuses without acting. */
struct host_filter_call {
    long nr;
    const char *name;
    long a[6];
};

#define HOST_FILTER_CALL(call, a0, a1, a2, a3) \
    {                                          \
        SYS_##call, #call,                     \
        {                                      \
            a0, a1, a2, a3, 0, 0               \
        }                                      \
    }

/* Not here: the calls every program makes (mmap, read, futex...), the debugging ones the library
 * leaves out under a filter (host_filter_refuses), rt_sigreturn (tried by a signal of the child's
 * own, host_filter_probe_child). */
static const struct host_filter_call host_filter_calls[] = {
    /* CPU and wall sampling: the timers, the signals to threads, the CPU clocks' limits */
    HOST_FILTER_CALL(timer_create, 1000, 0, 0, 0),    /* EINVAL: no such clock */
    HOST_FILTER_CALL(timer_settime, -1, 0, 0, 0),     /* EINVAL: no such timer */
    HOST_FILTER_CALL(timer_delete, -1, 0, 0, 0),      /* EINVAL */
    HOST_FILTER_CALL(tgkill, 0, 0, 0, 0),             /* EINVAL: tgid 0 */
    HOST_FILTER_CALL(rt_tgsigqueueinfo, 0, 0, 0, 0),  /* EINVAL */
    HOST_FILTER_CALL(rt_sigaction, 0, 0, 0, 8),       /* EINVAL: signal 0 */
    HOST_FILTER_CALL(sigaltstack, 0, 0, 0, 0),        /* 0, nothing changed */
    HOST_FILTER_CALL(getrusage, -100, 0, 0, 0),       /* EINVAL */
    HOST_FILTER_CALL(prlimit64, 0, 1000, 0, 0),       /* EINVAL: no such resource */
    HOST_FILTER_CALL(prctl, -1, 0, 0, 0),             /* EINVAL */
    HOST_FILTER_CALL(sched_getaffinity, 0, 0, 0, 0),  /* EINVAL: size 0 */
    HOST_FILTER_CALL(sched_yield, 0, 0, 0, 0),        /* 0 */
    HOST_FILTER_CALL(clock_nanosleep, 1000, 0, 0, 0), /* EINVAL */
    HOST_FILTER_CALL(getrandom, 0, 0, -1, 0),         /* EINVAL: flags */
    HOST_FILTER_CALL(sysinfo, 0, 0, 0, 0),            /* EFAULT */
    HOST_FILTER_CALL(madvise, 0, 0, -1, 0),           /* EINVAL: advice */
    HOST_FILTER_CALL(mremap, 0, 0, 0, -1),            /* EINVAL: flags */
    HOST_FILTER_CALL(set_robust_list, 0, 0, 0, 0),    /* EINVAL: size */
    HOST_FILTER_CALL(clone3, 0, 0, 0, 0),             /* EINVAL: size 0 */
    /* the task and fd directories, symbols, trace files */
    HOST_FILTER_CALL(openat, -1, 0, 0, 0),      /* EFAULT */
    HOST_FILTER_CALL(getdents64, -1, 0, 0, 0),  /* EBADF */
    HOST_FILTER_CALL(pread64, -1, 0, 0, 0),     /* EBADF */
    HOST_FILTER_CALL(lseek, -1, 0, 0, 0),       /* EBADF */
    HOST_FILTER_CALL(newfstatat, -1, 0, 0, 0),  /* EFAULT */
    HOST_FILTER_CALL(readlinkat, -1, 0, 0, 0),  /* EFAULT, EINVAL */
    HOST_FILTER_CALL(renameat2, -1, 0, -1, 0),  /* EFAULT */
    HOST_FILTER_CALL(unlinkat, -1, 0, 0, 0),    /* EFAULT */
    HOST_FILTER_CALL(utimensat, -1, 0, 0, 0),   /* EBADF */
    HOST_FILTER_CALL(fchmod, -1, 0, 0, 0),      /* EBADF */
    HOST_FILTER_CALL(faccessat, -1, 0, 0, 0),   /* EFAULT */
    HOST_FILTER_CALL(fcntl, -1, F_GETFD, 0, 0), /* EBADF */
    HOST_FILTER_CALL(dup3, -1, -1, 0, 0),       /* EBADF */
    HOST_FILTER_CALL(ioctl, -1, 0, 0, 0),       /* EBADF */
    /* the diagnostic server: its socket, its loop, its clients */
    HOST_FILTER_CALL(socket, -1, -1, -1, 0),      /* EAFNOSUPPORT */
    HOST_FILTER_CALL(bind, -1, 0, 0, 0),          /* EBADF */
    HOST_FILTER_CALL(listen, -1, 0, 0, 0),        /* EBADF */
    HOST_FILTER_CALL(accept4, -1, 0, 0, 0),       /* EBADF */
    HOST_FILTER_CALL(connect, -1, 0, 0, 0),       /* EBADF */
    HOST_FILTER_CALL(getsockopt, -1, 0, 0, 0),    /* EBADF */
    HOST_FILTER_CALL(setsockopt, -1, 0, 0, 0),    /* EBADF */
    HOST_FILTER_CALL(getsockname, -1, 0, 0, 0),   /* EBADF */
    HOST_FILTER_CALL(shutdown, -1, 0, 0, 0),      /* EBADF */
    HOST_FILTER_CALL(sendmsg, -1, 0, 0, 0),       /* EBADF */
    HOST_FILTER_CALL(recvmsg, -1, 0, 0, 0),       /* EBADF */
    HOST_FILTER_CALL(pipe2, 0, -1, 0, 0),         /* EINVAL: flags */
    HOST_FILTER_CALL(eventfd2, 0, -1, 0, 0),      /* EINVAL: flags */
    HOST_FILTER_CALL(epoll_create1, -1, 0, 0, 0), /* EINVAL: flags */
    HOST_FILTER_CALL(epoll_ctl, -1, 0, 0, 0),     /* EBADF */
    HOST_FILTER_CALL(epoll_pwait, -1, 0, 1, 0),   /* EBADF */
#ifdef SYS_epoll_wait
    HOST_FILTER_CALL(epoll_wait, -1, 0, 1, 0), /* EBADF */
#endif
};

#define HOST_FILTER_CALLS (sizeof(host_filter_calls) / sizeof(host_filter_calls[0]))

/* Where the probe's child is before the list: its SIGSYS at its default, its core limit 0. */
#define HOST_FILTER_SETUP_SIGACTION (HOST_FILTER_CALLS + 1)
#define HOST_FILTER_SETUP_RLIMIT    (HOST_FILTER_CALLS + 2)

/* What the probe's child shares with the library (CLONE_VM): the call it is at. */
struct host_filter_probe {
    _Atomic unsigned at; /* an index of host_filter_calls; HOST_FILTER_CALLS: rt_sigreturn;
                          * HOST_FILTER_SETUP_*: before them */
    int (*sigaction)(int, const struct sigaction *, struct sigaction *); /* libc's */
};

static void
host_filter_probe_handler(int sig)
{
    (void)sig; /* its return is rt_sigreturn */
}

/* The child: raw calls only (it shares the library's memory), its signals its own. Not
 * instrumented: a sanitizer's runtime does not know this task, whose stack is not a thread's. */
__attribute__((no_sanitize("address", "thread", "undefined"))) static int
host_filter_probe_child(void *arg)
{
    struct host_filter_probe *p = arg;
    const struct rlimit no_core = { 0, 0 };
    struct sigaction sa;
    unsigned i;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    /* A trapping filter's SIGSYS ends the child, not a handler of the host's; and no core file:
     * its own RLIMIT_CORE (a child of its own has its own limits; not PR_SET_DUMPABLE, whose flag
     * is the memory's, which it shares with the host: the host lost its own, "dumpable 1" of
     * host-contract-seccomp-inherited read 0). */
    atomic_store(&p->at, HOST_FILTER_SETUP_SIGACTION);
    if (p->sigaction(SIGSYS, &sa, NULL) != 0) {
        return 2;
    }
    atomic_store(&p->at, HOST_FILTER_SETUP_RLIMIT);
    if (host_raw_syscall(SYS_prlimit64, 0, RLIMIT_CORE, (long)&no_core, 0, 0, 0) != 0) {
        return 2;
    }
    for (i = 0; i < HOST_FILTER_CALLS; i++) {
        const struct host_filter_call *c = &host_filter_calls[i];

        atomic_store(&p->at, i);
        host_raw_syscall(c->nr, c->a[0], c->a[1], c->a[2], c->a[3], c->a[4], c->a[5]);
    }
    atomic_store(&p->at, i);
    sa.sa_handler = host_filter_probe_handler;
    if (p->sigaction(SIGUSR2, &sa, NULL) != 0) {
        return 2;
    }
    host_raw_syscall(SYS_tgkill, host_raw_syscall(SYS_getpid, 0, 0, 0, 0, 0, 0),
                     host_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0), SIGUSR2, 0, 0, 0);
    return 0;
}

/* In a filtered process, before any call of the library's the filter may kill: the first of
 * host_filter_calls (or rt_sigreturn) that the filter kills, else none. Once. */
static void
host_filter_probe(void)
{
    enum { STACK = 64 * 1024 };
    struct host_filter_probe p = { HOST_FILTER_SETUP_SIGACTION, NULL };
    char *stack;
    long pid;
    int status = 0;

    p.sigaction = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT,
                                                                                    "sigaction");
    stack = host_scratch_map(STACK);
    if (p.sigaction == NULL || stack == NULL) {
        host_scratch_unmap(stack, STACK);
        return;
    }
    pid = clone(host_filter_probe_child, stack + STACK, CLONE_VM | CLONE_VFORK, &p);
    if (pid > 0) {
        while (host_raw_syscall(SYS_wait4, pid, (long)&status, __WALL, 0, 0, 0) < 0 &&
               errno == EINTR) {
        }
        if (WIFSIGNALED(status)) {
            unsigned at = atomic_load(&p.at);

            atomic_store_explicit(&host_filter_killed_name,
                                  at < HOST_FILTER_CALLS           ? host_filter_calls[at].name
                                  : at == HOST_FILTER_CALLS        ? "rt_sigreturn"
                                  : at == HOST_FILTER_SETUP_RLIMIT ? "prlimit64"
                                                                   : "rt_sigaction",
                                  memory_order_release);
        }
    }
    host_scratch_unmap(stack, STACK);
}

const char *
host_filter_killed(void)
{
    return atomic_load_explicit(&host_filter_killed_name, memory_order_acquire);
}

int
host_filter_refuses(long n)
{
    if (!atomic_load_explicit(&host_filtered_at_start, memory_order_acquire)) {
        return 0;
    }
    switch (n) {
    case SYS_process_vm_readv:
    case SYS_process_vm_writev:
    case SYS_perf_event_open:
    case SYS_kcmp:
#ifdef SYS_pidfd_getfd
    case SYS_pidfd_getfd:
#endif
#ifdef SYS_pidfd_open
    case SYS_pidfd_open:
#endif
    case SYS_memfd_create:
        return 1;
    default:
        return 0;
    }
}

void *
host_scratch_map(size_t len)
{
    long p = host_raw_syscall(SYS_mmap, 0, (long)len, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    return p == -1 ? NULL : (void *)p; /* syscall()'s failure: -1 (MAP_FAILED) */
}

void
host_scratch_unmap(void *p, size_t len)
{
    if (p != NULL) {
        (void)host_raw_syscall(SYS_munmap, (long)p, (long)len, 0, 0, 0, 0);
    }
}

int
host_read_user(void *out, const void *addr, size_t len)
{
    struct iovec local = { out, len }, remote = { (void *)(uintptr_t)addr, len };
    int saved = errno, rc;
    long n;

    if (host_filter_refuses(SYS_process_vm_readv)) {
        rc = -EPERM; /* as a filter that refuses it */
    } else {
        n = host_raw_syscall(SYS_process_vm_readv, (long)getpid(), (long)&local, 1L, (long)&remote,
                             1L, 0L);
        rc = n == (long)len ? 0 : n >= 0 || errno == EFAULT ? -EFAULT : -errno;
    }
    if (rc != 0 && rc != -EFAULT) {
        memcpy(out, addr, len); /* cannot tell (a seccomp filter refused the read): read it */
        rc = 0;
    }
    errno = saved;
    return rc;
}
