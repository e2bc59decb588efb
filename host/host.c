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
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
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
 */
static _Atomic int host_filtered_at_start, host_filter_noted;

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
