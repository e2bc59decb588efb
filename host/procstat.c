/* SPDX-License-Identifier: MIT */
/*
 * host/procstat.c - the process's thread count as the host would see it bare.
 *
 * The library's threads (pipeprof-ipc; under record also pipeprof-mgr and pipeprof-wall) are in
 * the kernel's thread group, so that /proc/self/stat's field 20 (num_threads) and
 * /proc/self/status's Threads: counted them: CPython 3.12's os.fork() read 3 or 4 there for a
 * single-threaded script and warned "This process ... is multi-threaded" (it fopen()s
 * /proc/self/stat and takes field 20). fds.c's opens (open, open64, openat, openat64 and their
 * _FORTIFY_SOURCE forms) and fopen, fopen64 call host_procstat_opened after a host's successful
 * read-only open of an absolute path under /proc/: when the path is this process's stat or status
 * (/proc/self/, /proc/thread-self/, /proc/<its pid>/, and any /proc/.../task/<tid>/ below those,
 * where num_threads is the process's too) and library threads are live, the file's text is read
 * now, its count made the bare one (the kernel's minus host_thread_library_live, never below 1),
 * and the host's fd number made to hold a read-only open of a sealed memfd with that text, at
 * offset 0, with the open's O_CLOEXEC and O_NONBLOCK. The number is the one the real open gave
 * (dup3 onto it), so that it is the number bare gets; a stdio stream keeps it too (nothing was
 * read through it yet).
 *
 * What the host may rely on: the fd's reads, lseek and fstat are a regular file's, its text that
 * of the moment of the open (a procfs file's is made at each read from offset 0: a host that
 * keeps the fd and reads again from 0 sees the old text; fstat's st_size is the text's length,
 * not procfs's 0); readlink of /proc/self/fd/N says "/memfd:stat (deleted)" or
 * "/memfd:status (deleted)"; write fails with EBADF as on a read-only open. Anything else (the
 * library's own opens, a write or O_PATH or other flags, a relative path or a dirfd, another
 * process's pid, a /proc/<tid>/ of one of this process's threads, a failure of memfd_create
 * (seccomp, EMFILE at the limit), a text larger than HOST_PROCSTAT_MAX) keeps the real file:
 * the count is then the kernel's. Not covered: a read made through syscall(SYS_open...), through
 * glibc's internal opens, or of other files that count threads (/proc/self/sched, /proc/loadavg),
 * and a sanitizer runtime's own threads (TSan's background thread: one more than bare there).
 * status's SigIgn and SigCgt are made bare's the same way (host_procstat_signals): the library's
 * signal shows the host's disposition of it, not the library's handler, and glibc's SIGSETXID
 * handler, which came with the library's first thread, is not shown to a host that made none.
 * Known cost (docs/architecture.md, the thread-count row): the text is read into
 * HOST_PROCSTAT_MAX bytes mapped for the call (an mmap and a munmap: not the host's stack, which
 * may be a small alternate one; a failed mmap keeps the real file).
 *
 * Held by: host-contract-procstat (tests/hosts/procstat.c: num_threads by fopen+fread as CPython
 * does, by open+read, and Threads: of status, single-threaded and then with 3 threads; each
 * number the same bare, preloaded, in listen mode and under record) and host-contract-procstat-
 * signals (SigIgn and SigCgt with SIGPROF at each disposition, before and after a thread of the
 * host's, and in a fork()ed child).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "host/internal.h"

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif
#ifndef F_ADD_SEALS
#define F_ADD_SEALS   1033
#define F_SEAL_SEAL   0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW   0x0004
#define F_SEAL_WRITE  0x0008
#endif

/* The largest text patched: /proc/self/status is about 1.5 KiB. */
#define HOST_PROCSTAT_MAX         8192
/* status's signal masks: 16 hex digits each (the kernel's render_sigset_t). */
#define HOST_PROCSTAT_MASK_DIGITS 16
/* glibc's SIGSETXID (__SIGRTMIN + 1): its handler comes with a process's first pthread_create. */
#define HOST_PROCSTAT_SIGSETXID   33

enum host_procstat_kind { HOST_PROCSTAT_NONE, HOST_PROCSTAT_STAT, HOST_PROCSTAT_STATUS };

/* Reads a decimal number without a sign at *p (at most 9 digits), advancing *p; -1 when none. */
static long
host_procstat_decimal(const char **p)
{
    long v = 0;
    int digits = 0;

    while (**p >= '0' && **p <= '9' && digits < 10) {
        v = v * 10 + (**p - '0');
        (*p)++;
        digits++;
    }
    return digits == 0 || digits > 9 ? -1 : v;
}

/* Which of this process's files path (after "/proc/") names. */
static enum host_procstat_kind
host_procstat_kind(const char *p)
{
    if (strncmp(p, "self/", 5) == 0) {
        p += 5;
    } else if (strncmp(p, "thread-self/", 12) == 0) {
        p += 12;
    } else {
        long pid = host_procstat_decimal(&p);

        if (pid <= 0 || *p != '/' || pid != host_raw_syscall(SYS_getpid, 0, 0, 0, 0, 0, 0)) {
            return HOST_PROCSTAT_NONE;
        }
        p++;
    }
    if (strncmp(p, "task/", 5) == 0) {
        p += 5;
        if (host_procstat_decimal(&p) <= 0 || *p != '/') {
            return HOST_PROCSTAT_NONE;
        }
        p++;
    }
    return strcmp(p, "stat") == 0     ? HOST_PROCSTAT_STAT
           : strcmp(p, "status") == 0 ? HOST_PROCSTAT_STATUS
                                      : HOST_PROCSTAT_NONE;
}

/* Replaces the decimal number at text[at] (of len bytes in all) with count; the new length, or -1
 * when it is no number or does not fit in cap. */
static long
host_procstat_replace(char *text, long len, long cap, long at, long count)
{
    const char *p = text + at;
    long old = host_procstat_decimal(&p), end = p - text;
    char num[24];
    int n;

    if (old < 0) {
        return -1;
    }
    count = count < 1 ? 1 : count;
    count = count > old ? old : count;
    n = snprintf(num, sizeof(num), "%ld", count);
    if (n <= 0 || len - (end - at) + n > cap) {
        return -1;
    }
    memmove(text + at + n, text + end, (size_t)(len - end));
    memcpy(text + at, num, (size_t)n);
    return len - (end - at) + n;
}

/* The offset of the value of status's line that starts with name (its tabs and spaces skipped);
 * -1 when not found. */
static long
host_procstat_value_at(const char *text, long len, const char *name)
{
    long i, n = (long)strlen(name);

    for (i = 0; i + n < len; i++) {
        if ((i == 0 || text[i - 1] == '\n') && memcmp(text + i, name, (size_t)n) == 0) {
            for (i += n; i < len && (text[i] == '\t' || text[i] == ' '); i++) {
            }
            return i < len ? i : -1;
        }
    }
    return -1;
}

/* The offset of the thread count in text: stat's field 20 (the 18th after the command's ')',
 * which may itself hold spaces and parentheses), status's "Threads:" value; -1 when not found. */
static long
host_procstat_count_at(const char *text, long len, enum host_procstat_kind kind)
{
    long i;

    if (kind == HOST_PROCSTAT_STATUS) {
        return host_procstat_value_at(text, len, "Threads:");
    }
    for (i = len - 1; i >= 0 && text[i] != ')'; i--) {
    }
    if (i < 0) {
        return -1;
    }
    for (int field = 2; i < len; i++) {
        if (text[i] == ' ' && ++field == 20) {
            return i + 1 < len ? i + 1 : -1;
        }
    }
    return -1;
}

/* The 16 hex digits of a status mask at text[at] (of len bytes), as the kernel prints them; 0 when
 * they are not there. */
static int
host_procstat_mask_get(const char *text, long len, long at, uint64_t *mask)
{
    uint64_t v = 0;

    if (at < 0 || at + HOST_PROCSTAT_MASK_DIGITS > len) {
        return 0;
    }
    for (long i = at; i < at + HOST_PROCSTAT_MASK_DIGITS; i++) {
        int c = text[i];

        v <<= 4;
        if (c >= '0' && c <= '9') {
            v |= (uint64_t)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            v |= (uint64_t)(c - 'a' + 10);
        } else {
            return 0;
        }
    }
    *mask = v;
    return 1;
}

static void
host_procstat_mask_put(char *text, long at, uint64_t mask)
{
    for (long i = at + HOST_PROCSTAT_MASK_DIGITS - 1; i >= at; i--, mask >>= 4) {
        text[i] = "0123456789abcdef"[mask & 0xf];
    }
}

/*
 * status's SigIgn and SigCgt as bare (in place: the masks keep their 16 digits); 1 when it changed
 * them. The library's signal, while it holds it (signals.c), has the library's handler in the
 * kernel: its bits are made the host's recorded disposition's (ignored, caught, or neither for
 * SIG_DFL). glibc installs its SIGSETXID handler (signal 33) at a process's first pthread_create,
 * which the library's loop thread made: the bit is cleared while the host made no thread through
 * pthread_create and the kernel counts no thread of the host's beyond the first (one libc made
 * for the host, as timer_create's SIGEV_THREAD helper, keeps it). Not covered: a host's thread
 * that libc made and that exited before the read (its bit stays cleared, bare would show it).
 */
static int
host_procstat_signals(char *text, long len, long kernel_threads, long live)
{
    long ign_at = host_procstat_value_at(text, len, "SigIgn:");
    long cgt_at = host_procstat_value_at(text, len, "SigCgt:");
    int signo = atomic_load_explicit(&host_sig.signo, memory_order_acquire);
    uint64_t ign, cgt, ign_kernel, cgt_kernel;

    if (!host_procstat_mask_get(text, len, ign_at, &ign) ||
        !host_procstat_mask_get(text, len, cgt_at, &cgt)) {
        return 0;
    }
    ign_kernel = ign;
    cgt_kernel = cgt;
    if (signo > 0 && signo <= 64) {
        uint64_t bit = 1ull << (signo - 1);
        struct sigaction host;

        host_sig_current(&host);
        ign &= ~bit;
        cgt &= ~bit;
        if (host.sa_handler == SIG_IGN) {
            ign |= bit;
        } else if (host.sa_handler != SIG_DFL) {
            cgt |= bit;
        }
    }
#ifdef __GLIBC__
    if (!host_thread_host_made() && kernel_threads - live <= 1) {
        cgt &= ~(1ull << (HOST_PROCSTAT_SIGSETXID - 1));
    }
#else
    (void)kernel_threads;
    (void)live;
#endif
    host_procstat_mask_put(text, ign_at, ign);
    host_procstat_mask_put(text, cgt_at, cgt);
    return ign != ign_kernel || cgt != cgt_kernel;
}

/* A sealed memfd holding text, reopened read-only with the open's status flags; -1 on failure.
 * Both are library creations in the fd gate, moved high at once (host_fds_create_begin/_end), so
 * that no host thread's creation meanwhile gets a number other than bare's; the memfd is closed
 * through close(), whose library path forgets its mark. */
static int
host_procstat_memfd(const char *text, long len, enum host_procstat_kind kind, int flags)
{
    const void *self_code = (const void *)host_procstat_memfd;
    char self[40];
    int mem, fd = -1, library;
    long off = 0;

    library = host_fds_create_begin(self_code);
    mem = host_fds_create_end(
            library,
            (int)(host_filter_refuses(SYS_memfd_create)
                          ? -1
                          : host_raw_syscall(SYS_memfd_create,
                                             (long)(kind == HOST_PROCSTAT_STAT ? "stat" : "status"),
                                             MFD_CLOEXEC | MFD_ALLOW_SEALING, 0, 0, 0, 0)));
    if (mem < 0) {
        return -1;
    }
    while (off < len) {
        long n = host_raw_syscall(SYS_write, mem, (long)(text + off), len - off, 0, 0, 0);

        if (n <= 0) {
            goto out;
        }
        off += n;
    }
    if (host_raw_syscall(SYS_fcntl, mem, F_ADD_SEALS,
                         F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE, 0, 0, 0) != 0) {
        goto out;
    }
    (void)snprintf(self, sizeof(self), "/proc/self/fd/%d", mem);
    library = host_fds_create_begin(self_code);
    fd = host_fds_create_end(
            library, (int)host_raw_syscall(SYS_openat, AT_FDCWD, (long)self,
                                           O_RDONLY | O_CLOEXEC | (flags & O_NONBLOCK), 0, 0, 0));
out:
    close(mem);
    return fd;
}

void
host_procstat_opened(int fd, const char *path, int flags, const void *ra)
{
    enum host_procstat_kind kind;
    char *text = NULL;
    long len = 0, at, live, kernel;
    int err = errno, mem, changed = 0;

    kind = host_procstat_kind(path + 6);
    if (kind == HOST_PROCSTAT_NONE || host_fds_is_library_call(ra)) {
        return;
    }
    live = host_thread_library_live();
    if (live <= 0 && kind != HOST_PROCSTAT_STATUS) {
        goto out; /* nothing of the library's in the text (status's masks may be: a fork()ed
                   * child's, before its agent's threads, has its parent's SIGSETXID handler) */
    }
    /* Not on the host's stack: an open is async-signal-safe, and a crash handler on a small
     * alternate stack (8 KiB, SIGSTKSZ as glibc long had it) that opened /proc/self/status
     * overflowed it into the page below (host-contract-procstat-altstack: SIGSEGV). */
    text = host_scratch_map(HOST_PROCSTAT_MAX);
    if (text == NULL) {
        goto rewind; /* the real file stays: the kernel's count */
    }
    for (;;) {
        long n = host_raw_syscall(SYS_read, fd, (long)(text + len), HOST_PROCSTAT_MAX - len, 0, 0,
                                  0);

        if (n < 0 || len + n >= HOST_PROCSTAT_MAX) {
            goto rewind; /* the real file stays, read again from 0 */
        }
        if (n == 0) {
            break;
        }
        len += n;
    }
    at = host_procstat_count_at(text, len, kind);
    if (at < 0) {
        goto rewind;
    }
    {
        const char *p = text + at;

        kernel = host_procstat_decimal(&p);
    }
    if (kind == HOST_PROCSTAT_STATUS) {
        changed = host_procstat_signals(text, len, kernel, live);
    }
    if (live > 0) {
        len = host_procstat_replace(text, len, HOST_PROCSTAT_MAX, at, kernel - live);
        changed = 1;
    }
    if (len < 0 || !changed) {
        goto rewind;
    }
    mem = host_procstat_memfd(text, len, kind, flags);
    if (mem < 0) {
        goto rewind;
    }
    (void)host_raw_syscall(SYS_dup3, mem, fd, flags & O_CLOEXEC, 0, 0, 0);
    close(mem);
    goto out;
rewind:
    (void)host_raw_syscall(SYS_lseek, fd, 0, SEEK_SET, 0, 0, 0);
out:
    host_scratch_unmap(text, HOST_PROCSTAT_MAX);
    errno = err;
}
