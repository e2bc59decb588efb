/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-interpose.c - what host/'s fd and signal interposers cost the host per call,
 * against libc's own function (dlsym(RTLD_NEXT)), in the same run:
 *   close             dup() of an fd and close() of the copy (the pair, both interposed)
 *   dup2              dup2() onto an open fd of the host's
 *   sigaction-other   sigaction(SIGUSR1) set and query, while the library holds SIGPROF
 *   sigaction-own     sigaction(SIGPROF), the library's signal: recorded, never installed
 *   sigmask           pthread_sigmask block + unblock of SIGUSR1 (no agent: a pass-through)
 *   write             write() of one byte to /dev/null, no agent installed (a pass-through)
 *   write-agent       the same with agent hooks installed (host/writes.c's fast path: the
 *                     thread's count of the agent's signals read before and after the call)
 *   open              open() of /dev/null and close() of it (the pair), called from
 *                     libbench-host-calls.so as a host's are: host/fds.c's look at the gate
 *                     before the call and its count after it, and the close's gate (the other
 *                     cases call from this program, which host/fds.c counts as the library's)
 *   open-agent        the same with agent hooks installed
 *   syscall-gettid    syscall(SYS_gettid): fds.c's syscall() on its fast path (no close, no
 *                     wait, no send of a signal)
 *   syscall-futex     syscall(SYS_futex, FUTEX_WAKE) of a word no thread waits on, as a
 *                     lock's release makes it
 *   fcntl-getfl       fcntl(F_GETFL) of one of the library's fds (this program's): host/fds.c's
 *                     look at the number, then the caller (the library's: passed through)
 *   fcntl-dupfd       fcntl(F_DUPFD_CLOEXEC, 0) and close() of the copy, from
 *                     libbench-host-calls.so as open's: the host's wait and count, as dup's
 *   syscall-eventfd   syscall(SYS_eventfd2) and close() of it, from libbench-host-calls.so:
 *                     syscall()'s creators take the wait and count of the host's creations
 *   syscall-getfl     syscall(SYS_fcntl, F_GETFL) of one of the library's fds: syscall()'s
 *                     switch looks at the command and the number, then the caller
 *   syscall-dupfd     syscall(SYS_fcntl, F_DUPFD_CLOEXEC, 0) and close() of the copy, from
 *                     libbench-host-calls.so: the host's wait and count, as fcntl's F_DUPFD
 *   fcntl-getfl-host  fcntl(F_GETFL) of a host's fd: the fast path of fcntl's commands other than
 *                     F_DUPFD* (a bit test of the number and a load of the gate; the caller is
 *                     not looked at)
 *   syscall-getfl-host  the same through syscall(SYS_fcntl)
 *   fstat-host        fstat() of a host's fd (libc's: host/fds.c leaves fstat and ioctl to
 *                     libc; kept to compare with the harm12 runs that interposed them)
 *   ioctl-host        ioctl(FIONREAD) of a host's fd (/dev/null: ENOTTY), the same
 *   syscall-fstat-host  fstat through syscall(SYS_fstat): syscall()'s switch, then the fast
 *                     path of the calls on an fd's number (fcntl's bit test and load)
 *   read-host         read() of one byte of a host's fd (/dev/null: end of file), no agent: the
 *                     data calls' fast path (one bit test of the number) and blocking.c's
 *   write-host        write() of one byte to a host's fd (/dev/null), no agent: the same bit
 *                     test and writes.c's pass-through
 *   openat-host       openat() of "null" relative to a host's fd of /dev, and close() of it (the
 *                     pair), from libbench-host-calls.so as open's: open's path and the bit test
 *                     of the dirfd (host/fds.c: EBADF for the host's on a library fd)
 *   epoll_wait-host   epoll_wait() of 0 ms on a host's epoll fd with nothing ready, no agent: the
 *                     bit test of the epoll fd (host/blocking.c; EBADF for the host's on a
 *                     library fd) and blocking.c's pass-through
 *   mmap-host         mmap() of a page of a host's file and munmap() of it (the pair; munmap is
 *                     libc's): the flag test, the bit test of the fd and the call through the
 *                     real mmap the constructor resolved (host/fds.c)
 *   mmap-anon-host    the same of an anonymous page, as an allocator maps: the flag test only
 *   io_uring-nop-host one IORING_OP_NOP queued in a host's ring (libbench-host-calls.so's, set
 *                     up through syscall() there) and io_uring_enter(1, 1, GETEVENTS) of it, from
 *                     there (host/uring.c: the scan of the entry through the library's own
 *                     mapping, the gate as a close's, the completion already there so no second
 *                     call) or through libc's syscall
 *   connect-udp-host  connect() of a host's AF_INET UDP socket to 127.0.0.1:9 (no packet is
 *                     sent), with the server's hooks installed (a socket_redirect that compares
 *                     the path with one port's, as ipc_redirect_path does): host/sockets.c's look
 *                     at the address; the address on the calling thread's stack
 *   connect-udp-heap-host  the same with the address in malloc()ed memory, as getaddrinfo's
 *   connect-unix-host connect() of a host's AF_UNIX stream socket to a path that does not exist
 *                     (ENOENT), the address on the stack: the path copied and handed to the hook
 *   connect-unix-heap-host  the same with the address in malloc()ed memory
 *   bind-host         bind() of a host's bound AF_INET UDP socket once more (EINVAL), the
 *                     address on the stack
 *   open-library      open() of /dev/null and close() of it from this program, the library's
 *                     creation: moved high (a dup and a close) and marked while open, its low
 *                     number in its moment too (host_fd_take), and its close's unmark
 *   readdir-procfd    opendir, readdir to the end and closedir of /proc/self/fd from
 *                     libbench-host-calls.so, as a host lists it (the library's ~10 fds there,
 *                     left out of the host's listing: host/fds.c's fdlist), the listing timed
 *   readdir-dir       the same of an ordinary directory of 20 files
 *   getdents64-dir    syscall(SYS_getdents64) of a host's fd of that directory (its offset put
 *                     back to 0 by libc's lseek before each, on both sides)
 *   open-trunc        open(O_WRONLY | O_TRUNC) of a /tmp file and close() of it, from
 *                     libbench-host-calls.so (the pre-check of the path before a truncation)
 *   open-plain        the same without O_TRUNC
 *   fcntl-getfd-host  fcntl(F_GETFD) of a host's fd
 *   read0-host        read() of 0 bytes of a host's fd
 * Then fcntl-getfd-host, read0-host and fcntl-dupfd again after a host thread's
 * close_range(CLOSE_RANGE_UNSHARE), a library thread marked (the server's loop thread, the
 * reference table): from the main thread ("other") and from the unsharing thread ("unshared").
 * The library holds 8 fds of its own (registered, high) and SIGPROF, as while sampling. Libc
 * and the interposer alternate within each round; prints per call the median ns of each over the
 * rounds and their ratio. usage: bench-interpose [ROUNDS [CALLS]] (11, 200000).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "host/host.h"

#define BENCH_OPS    41
#define BENCH_ROUNDS 64

static const char *const bench_ops[BENCH_OPS] = { "close",
                                                  "dup2",
                                                  "sigaction-other",
                                                  "sigaction-own",
                                                  "sigmask",
                                                  "write",
                                                  "write-agent",
                                                  "open",
                                                  "open-agent",
                                                  "syscall-gettid",
                                                  "syscall-futex",
                                                  "fcntl-getfl",
                                                  "fcntl-dupfd",
                                                  "syscall-eventfd",
                                                  "syscall-getfl",
                                                  "syscall-dupfd",
                                                  "fcntl-getfl-host",
                                                  "syscall-getfl-host",
                                                  "fstat-host",
                                                  "ioctl-host",
                                                  "syscall-fstat-host",
                                                  "read-host",
                                                  "write-host",
                                                  "openat-host",
                                                  "epoll_wait-host",
                                                  "mmap-host",
                                                  "mmap-anon-host",
                                                  "io_uring-nop-host",
                                                  "connect-udp-host",
                                                  "connect-udp-heap-host",
                                                  "connect-unix-host",
                                                  "connect-unix-heap-host",
                                                  "bind-host",
                                                  "open-library",
                                                  "readdir-procfd",
                                                  "readdir-dir",
                                                  "getdents64-dir",
                                                  "open-trunc",
                                                  "open-plain",
                                                  "fcntl-getfd-host",
                                                  "read0-host" };

/* The cases run again after a host thread's close_range(CLOSE_RANGE_UNSHARE) (main's second
 * part): from another thread (the record's count no longer 0) and from the unsharing thread. */
#define BENCH_UNSHARE_OPS 3
static const int bench_unshare_ops[BENCH_UNSHARE_OPS] = { 39, 40, 12 };

static int (*libc_close)(int);
static int (*libc_dup2)(int, int);
static int (*libc_sigaction)(int, const struct sigaction *, struct sigaction *);
static int (*libc_sigmask)(int, const sigset_t *, sigset_t *);
static ssize_t (*libc_write)(int, const void *, size_t);
static ssize_t (*libc_read)(int, void *, size_t);
static int (*libc_open)(const char *, int, ...);
static int (*libc_openat)(int, const char *, int, ...);
static int (*libc_fcntl)(int, int, ...);
static int (*libc_fstat)(int, struct stat *);
static int (*libc_ioctl)(int, unsigned long, ...);
static int (*libc_epoll_wait)(int, struct epoll_event *, int, int);
static void *(*libc_mmap)(void *, size_t, int, int, int, off_t);
static int (*libc_connect)(int, const struct sockaddr *, socklen_t);
static int (*libc_bind)(int, const struct sockaddr *, socklen_t);
static DIR *(*libc_opendir)(const char *);
static struct dirent *(*libc_readdir)(DIR *);
static int (*libc_closedir)(DIR *);
static off_t (*libc_lseek)(int, off_t, int);

/* bench-host-calls.c: open and close from an object of the host's. */
int bench_host_open(const char *path, int flags);
int bench_host_close(int fd);
int bench_host_dupfd(int fd);
int bench_host_sys_eventfd(void);
int bench_host_sys_dupfd(int fd);
int bench_host_openat(int dirfd, const char *path, int flags);
int bench_host_epoll(void);
int bench_host_page(void);
int bench_host_uring(void);
int bench_host_socket(int domain, int type);
void bench_host_uring_nop(void);
int bench_host_list(const char *path);
long bench_host_getdents(int fd, void *buf, size_t len);
int bench_host_unshare(void);
long bench_host_uring_enter(int fd);
static long (*libc_syscall)(long, ...);
static int bench_futex_word;
/* An fd of the host's for fcntl-dupfd (the program's own opens are the library's: moved high and
 * registered, and the host's F_DUPFD of one gets EBADF). */
static int bench_host_fd;
/* The same, open for writing (write-host). */
static int bench_host_wfd;
/* A host's fd of /dev (openat-host). */
static int bench_host_dirfd;
/* A host's epoll fd with nothing in it (epoll_wait-host), and a page's file (mmap-host). */
static int bench_host_epfd, bench_host_mapfd;
/* A host's io_uring (io_uring-nop-host). */
static int bench_host_ring;
/* A host's AF_INET UDP socket, bound (connect-udp-*, bind-host), and AF_UNIX stream socket
 * (connect-unix-*); their addresses in malloc()ed memory (the *-heap-host cases). */
static int bench_host_udp, bench_host_unix;
static struct sockaddr_in *bench_heap_in;
static struct sockaddr_un *bench_heap_un;
#define BENCH_MISSING_PATH "/nonexistent/pipeprof-bench-interpose-socket"
/* A directory of BENCH_ENTRIES files under a fresh /tmp directory (readdir-dir, getdents64-dir:
 * bench_host_dirfd2 is a host's fd of it) and a file beside it (open-trunc, open-plain). */
#define BENCH_ENTRIES      20
static char bench_tmp[64], bench_list[80], bench_trunc[80];
static int bench_host_listfd;
static char bench_dents[4096];

/* write-agent's hooks: an agent that does nothing but count its signals, as agent/host-hooks.c
 * does (a thread-local read). */
static _Thread_local uint32_t bench_signals;

static int
bench_inactive(void)
{
    return 0;
}

static uint32_t
bench_signals_handled(void)
{
    return bench_signals;
}

static const struct host_agent_hooks bench_hooks = {
    .active = bench_inactive,
    .signals_handled = bench_signals_handled,
};

/* The server's hooks of the connect and bind cases: a redirect of one connect port, as the
 * shim's (ipc_redirect_path compares the path with each port's); the others are not called. */
static int
bench_sessions_end(void)
{
    return 0;
}

static void
bench_server_nothing(void)
{
}

static int
bench_socket_redirect(enum host_socket_op op, const char *path, char *out, size_t size)
{
    static const char port[] = "/tmp/pipeprof-bench-interpose-port";

    if (op != HOST_SOCKET_CONNECT || strcmp(path, port) != 0 || size < sizeof(port)) {
        return 0;
    }
    memcpy(out, port, sizeof(port));
    return 1;
}

static const struct host_server_hooks bench_server_hooks = {
    .sessions_end = bench_sessions_end,
    .exec_failed = bench_server_nothing,
    .creds_before = bench_sessions_end,
    .creds_after = bench_server_nothing,
    .socket_redirect = bench_socket_redirect,
};

static void
bench_loopback(struct sockaddr_in *in)
{
    memset(in, 0, sizeof(*in));
    in->sin_family = AF_INET;
    in->sin_port = htons(9);
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

static void
bench_missing(struct sockaddr_un *un)
{
    memset(un, 0, sizeof(*un));
    un->sun_family = AF_UNIX;
    memcpy(un->sun_path, BENCH_MISSING_PATH, sizeof(BENCH_MISSING_PATH));
}

static void
bench_on_signal(int sig, siginfo_t *info, void *uc)
{
    (void)sig;
    (void)info;
    (void)uc;
}

/* The files of readdir-dir, getdents64-dir, open-trunc and open-plain (libc's calls: no mark);
 * 0 or -1. */
static int
bench_tmp_make(void)
{
    char name[96];
    int i, f;

    snprintf(bench_tmp, sizeof(bench_tmp), "/tmp/pipeprof-bench-interpose-XXXXXX");
    if (mkdtemp(bench_tmp) == NULL) {
        return -1;
    }
    snprintf(bench_list, sizeof(bench_list), "%s/list", bench_tmp);
    snprintf(bench_trunc, sizeof(bench_trunc), "%s/trunc", bench_tmp);
    if (mkdir(bench_list, 0700) != 0) {
        return -1;
    }
    for (i = 0; i <= BENCH_ENTRIES; i++) {
        if (i < BENCH_ENTRIES) {
            snprintf(name, sizeof(name), "%s/entry-%02d.txt", bench_list, i);
        }
        f = libc_open(i < BENCH_ENTRIES ? name : bench_trunc, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (f < 0) {
            return -1;
        }
        libc_close(f);
    }
    bench_host_listfd = bench_host_open(bench_list, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return bench_host_listfd >= 0 ? 0 : -1;
}

static void
bench_tmp_remove(void)
{
    char name[96];
    int i;

    for (i = 0; i < BENCH_ENTRIES; i++) {
        snprintf(name, sizeof(name), "%s/entry-%02d.txt", bench_list, i);
        unlink(name);
    }
    unlink(bench_trunc);
    rmdir(bench_list);
    rmdir(bench_tmp);
}

/* calls of op, through libc (real) or the interposer; ns per call. */
static double
bench_run(int op, int real, unsigned calls, int fd, int fd2)
{
    struct sigaction act, old;
    struct sockaddr_in in;
    struct sockaddr_un un;
    struct stat st;
    sigset_t set;
    uint64_t t0;
    unsigned i;
    int n;

    memset(&act, 0, sizeof(act));
    act.sa_handler = SIG_IGN;
    sigemptyset(&act.sa_mask);
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    bench_loopback(&in);
    bench_missing(&un);
    t0 = bench_now_ns();
    for (i = 0; i < calls; i++) {
        switch (op) {
        case 0: {
            int c = dup(fd);

            real ? libc_close(c) : close(c);
            break;
        }
        case 1:
            real ? libc_dup2(fd, fd2) : dup2(fd, fd2);
            break;
        case 2:
        case 3:
            real ? libc_sigaction(op == 2 ? SIGUSR1 : SIGPROF, &act, &old)
                 : sigaction(op == 2 ? SIGUSR1 : SIGPROF, &act, &old);
            break;
        case 5:
        case 6:
            real ? libc_write(fd, "", 1) : write(fd, "", 1);
            break;
        case 33: {
            int o = real ? libc_open("/dev/null", O_RDONLY | O_CLOEXEC)
                         : open("/dev/null", O_RDONLY | O_CLOEXEC);

            real ? libc_close(o) : close(o);
            break;
        }
        case 7:
        case 8: {
            int o = real ? libc_open("/dev/null", O_RDONLY | O_CLOEXEC)
                         : bench_host_open("/dev/null", O_RDONLY | O_CLOEXEC);

            real ? libc_close(o) : bench_host_close(o);
            break;
        }
        case 9:
            real ? libc_syscall(SYS_gettid) : syscall(SYS_gettid);
            break;
        case 10:
            real ? libc_syscall(SYS_futex, &bench_futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0)
                 : syscall(SYS_futex, &bench_futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
            break;
        case 11:
            real ? libc_fcntl(fd, F_GETFL) : fcntl(fd, F_GETFL);
            break;
        case 12: {
            int c = real ? libc_fcntl(bench_host_fd, F_DUPFD_CLOEXEC, 0)
                         : bench_host_dupfd(bench_host_fd);

            real ? libc_close(c) : bench_host_close(c);
            break;
        }
        case 13: {
            int e = real ? (int)libc_syscall(SYS_eventfd2, 0, EFD_CLOEXEC)
                         : bench_host_sys_eventfd();

            real ? libc_close(e) : bench_host_close(e);
            break;
        }
        case 14:
            real ? libc_syscall(SYS_fcntl, fd, F_GETFL) : syscall(SYS_fcntl, fd, F_GETFL);
            break;
        case 15: {
            int c = real ? (int)libc_syscall(SYS_fcntl, bench_host_fd, F_DUPFD_CLOEXEC, 0)
                         : bench_host_sys_dupfd(bench_host_fd);

            real ? libc_close(c) : bench_host_close(c);
            break;
        }
        case 16:
            real ? libc_fcntl(bench_host_fd, F_GETFL) : fcntl(bench_host_fd, F_GETFL);
            break;
        case 17:
            real ? libc_syscall(SYS_fcntl, bench_host_fd, F_GETFL)
                 : syscall(SYS_fcntl, bench_host_fd, F_GETFL);
            break;
        case 18:
            real ? libc_fstat(bench_host_fd, &st) : fstat(bench_host_fd, &st);
            break;
        case 19:
            real ? libc_ioctl(bench_host_fd, FIONREAD, &n) : ioctl(bench_host_fd, FIONREAD, &n);
            break;
        case 20:
            real ? libc_syscall(SYS_fstat, bench_host_fd, &st)
                 : syscall(SYS_fstat, bench_host_fd, &st);
            break;
        case 21: {
            char b;

            real ? libc_read(bench_host_fd, &b, 1) : read(bench_host_fd, &b, 1);
            break;
        }
        case 22:
            real ? libc_write(bench_host_wfd, "", 1) : write(bench_host_wfd, "", 1);
            break;
        case 23: {
            int o = real ? libc_openat(bench_host_dirfd, "null", O_RDONLY | O_CLOEXEC)
                         : bench_host_openat(bench_host_dirfd, "null", O_RDONLY | O_CLOEXEC);

            real ? libc_close(o) : bench_host_close(o);
            break;
        }
        case 24: {
            struct epoll_event ev;

            real ? libc_epoll_wait(bench_host_epfd, &ev, 1, 0)
                 : epoll_wait(bench_host_epfd, &ev, 1, 0);
            break;
        }
        case 25:
        case 26: {
            int fl = op == 25 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS;
            int mfd = op == 25 ? bench_host_mapfd : -1;
            void *m = real ? libc_mmap(NULL, 4096, PROT_READ, fl, mfd, 0)
                           : mmap(NULL, 4096, PROT_READ, fl, mfd, 0);

            if (m != MAP_FAILED) {
                munmap(m, 4096);
            }
            break;
        }
        case 27:
            bench_host_uring_nop();
            real ? libc_syscall(SYS_io_uring_enter, bench_host_ring, 1, 1, IORING_ENTER_GETEVENTS,
                                NULL, 0)
                 : bench_host_uring_enter(bench_host_ring);
            break;
        case 28:
        case 29: {
            const struct sockaddr *a =
                    op == 28 ? (struct sockaddr *)&in : (struct sockaddr *)bench_heap_in;

            real ? libc_connect(bench_host_udp, a, sizeof(in))
                 : connect(bench_host_udp, a, sizeof(in));
            break;
        }
        case 30:
        case 31: {
            const struct sockaddr *a =
                    op == 30 ? (struct sockaddr *)&un : (struct sockaddr *)bench_heap_un;

            real ? libc_connect(bench_host_unix, a, sizeof(un))
                 : connect(bench_host_unix, a, sizeof(un));
            break;
        }
        case 32:
            real ? libc_bind(bench_host_udp, (struct sockaddr *)&in, sizeof(in))
                 : bind(bench_host_udp, (struct sockaddr *)&in, sizeof(in));
            break;
        case 34:
        case 35: {
            const char *path = op == 34 ? "/proc/self/fd" : bench_list;

            if (real) {
                DIR *d = libc_opendir(path);

                while (d != NULL && libc_readdir(d) != NULL) {
                }
                if (d != NULL) {
                    libc_closedir(d);
                }
            } else {
                bench_host_list(path);
            }
            break;
        }
        case 36:
            libc_lseek(bench_host_listfd, 0, SEEK_SET);
            real ? libc_syscall(SYS_getdents64, bench_host_listfd, bench_dents, sizeof(bench_dents))
                 : bench_host_getdents(bench_host_listfd, bench_dents, sizeof(bench_dents));
            break;
        case 37:
        case 38: {
            int fl = O_WRONLY | O_CLOEXEC | (op == 37 ? O_TRUNC : 0);
            int o = real ? libc_open(bench_trunc, fl) : bench_host_open(bench_trunc, fl);

            real ? libc_close(o) : bench_host_close(o);
            break;
        }
        case 39:
            real ? libc_fcntl(bench_host_fd, F_GETFD) : fcntl(bench_host_fd, F_GETFD);
            break;
        case 40: {
            char b;

            real ? libc_read(bench_host_fd, &b, 0) : read(bench_host_fd, &b, 0);
            break;
        }
        default:
            real ? libc_sigmask(SIG_BLOCK, &set, NULL) : pthread_sigmask(SIG_BLOCK, &set, NULL);
            real ? libc_sigmask(SIG_UNBLOCK, &set, NULL) : pthread_sigmask(SIG_UNBLOCK, &set, NULL);
            break;
        }
    }
    return (double)(bench_now_ns() - t0) / calls;
}

/* The second part: bench_unshare_ops after a host thread's CLOSE_RANGE_UNSHARE, with a library
 * thread marked (the server's loop thread: the reference table, as while sampling), from the main
 * thread ([0]: another thread, the record's count not 0) and from the unsharing thread ([1]). */
struct bench_unshare {
    int rounds;
    unsigned calls;
    int fd, fd2;
    _Atomic int state; /* 1: library thread marked; 2: unshared; 3: main done; 4: thread done */
    double ns[BENCH_UNSHARE_OPS][2][2][BENCH_ROUNDS];
};

static void
bench_unshare_rounds(struct bench_unshare *u, int who)
{
    int r, k, i;

    for (r = 0; r < u->rounds; r++) {
        for (k = 0; k < BENCH_UNSHARE_OPS; k++) {
            for (i = 0; i < 2; i++) {
                int real = (i + r) % 2;

                u->ns[k][who][real][r] =
                        bench_run(bench_unshare_ops[k], real, u->calls, u->fd, u->fd2);
            }
        }
    }
}

static void
bench_wait_state(struct bench_unshare *u, int state)
{
    while (atomic_load(&u->state) < state) {
        sched_yield();
    }
}

static void *
bench_library_thread(void *arg)
{
    struct bench_unshare *u = arg;

    host_thread_mark_library();
    atomic_store(&u->state, 1);
    bench_wait_state(u, 4);
    return NULL;
}

static void *
bench_unsharing_thread(void *arg)
{
    struct bench_unshare *u = arg;

    if (bench_host_unshare() != 0) {
        fprintf(stderr, "bench-interpose: close_range(CLOSE_RANGE_UNSHARE): %s\n", strerror(errno));
        exit(1);
    }
    atomic_store(&u->state, 2);
    bench_wait_state(u, 3);
    bench_unshare_rounds(u, 1);
    atomic_store(&u->state, 4);
    return NULL;
}

/* libc's and the interposer's medians of n rounds of ns[2][...] (real at 1), printed. */
static void
bench_print(const char *name, double ns[2][BENCH_ROUNDS], int rounds)
{
    double libc, ours;

    qsort(ns[1], (size_t)rounds, sizeof(double), bench_cmp_double);
    qsort(ns[0], (size_t)rounds, sizeof(double), bench_cmp_double);
    libc = ns[1][rounds / 2];
    ours = ns[0][rounds / 2];
    printf("  %-16s libc %7.1f ns  interposed %7.1f ns  %.2fx\n", name, libc, ours,
           libc > 0 ? ours / libc : 0);
}

static int
bench_unshare_part(int rounds, unsigned calls, int fd, int fd2)
{
    static struct bench_unshare u;
    pthread_t lib, unsharer;
    char name[40];
    int k, who;

    u.rounds = rounds;
    u.calls = calls;
    u.fd = fd;
    u.fd2 = fd2;
    if (pthread_create(&lib, NULL, bench_library_thread, &u) != 0) {
        return -1;
    }
    bench_wait_state(&u, 1);
    if (pthread_create(&unsharer, NULL, bench_unsharing_thread, &u) != 0) {
        return -1;
    }
    bench_wait_state(&u, 2);
    bench_unshare_rounds(&u, 0);
    atomic_store(&u.state, 3);
    pthread_join(unsharer, NULL);
    pthread_join(lib, NULL);
    printf("after a host thread's CLOSE_RANGE_UNSHARE (a library thread marked): from another "
           "thread (other), from the unsharing thread (unshared)\n");
    for (k = 0; k < BENCH_UNSHARE_OPS; k++) {
        for (who = 0; who < 2; who++) {
            snprintf(name, sizeof(name), "%s %s", bench_ops[bench_unshare_ops[k]],
                     who ? "unshared" : "other");
            bench_print(name, u.ns[k][who], rounds);
        }
    }
    return 0;
}

int
main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 11, r, op, i;
    unsigned calls = argc > 2 ? (unsigned)atoi(argv[2]) : 200000;
    static double ns[BENCH_OPS][2][BENCH_ROUNDS];
    int fd = open("/dev/null", O_WRONLY), fd2 = open("/dev/null", O_RDONLY);

    if (rounds < 1 || rounds > BENCH_ROUNDS || calls == 0 || fd < 0 || fd2 < 0) {
        fprintf(stderr, "usage: bench-interpose [ROUNDS 1..%d [CALLS]]\n", BENCH_ROUNDS);
        return 2;
    }
    libc_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
    libc_dup2 = (int (*)(int, int))dlsym(RTLD_NEXT, "dup2");
    libc_sigaction = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT,
                                                                                       "sigaction");
    libc_sigmask = (int (*)(int, const sigset_t *, sigset_t *))dlsym(RTLD_NEXT, "pthread_sigmask");
    libc_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    libc_read = (ssize_t(*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
    libc_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    libc_openat = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
    libc_syscall = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    libc_fcntl = (int (*)(int, int, ...))dlsym(RTLD_NEXT, "fcntl");
    libc_fstat = (int (*)(int, struct stat *))dlsym(RTLD_NEXT, "fstat");
    libc_ioctl = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
    libc_epoll_wait = (int (*)(int, struct epoll_event *, int, int))dlsym(RTLD_NEXT, "epoll_wait");
    libc_mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
    libc_connect = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
    libc_bind = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
    libc_opendir = (DIR * (*)(const char *)) dlsym(RTLD_NEXT, "opendir");
    libc_readdir = (struct dirent * (*)(DIR *)) dlsym(RTLD_NEXT, "readdir");
    libc_closedir = (int (*)(DIR *))dlsym(RTLD_NEXT, "closedir");
    libc_lseek = (off_t(*)(int, off_t, int))dlsym(RTLD_NEXT, "lseek");
    if (!libc_connect || !libc_bind || !libc_epoll_wait || !libc_mmap || !libc_open ||
        !libc_openat || !libc_fcntl || !libc_fstat || !libc_ioctl || !libc_syscall || !libc_write ||
        !libc_read || !libc_close || !libc_dup2 || !libc_sigaction || !libc_sigmask ||
        !libc_opendir || !libc_readdir || !libc_closedir || !libc_lseek) {
        fprintf(stderr, "bench-interpose: libc's functions not found\n");
        return 1;
    }
    bench_host_fd = bench_host_open("/dev/null", O_RDONLY | O_CLOEXEC);
    bench_host_wfd = bench_host_open("/dev/null", O_WRONLY | O_CLOEXEC);
    bench_host_dirfd = bench_host_open("/dev", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    bench_host_epfd = bench_host_epoll();
    bench_host_mapfd = bench_host_page();
    bench_host_ring = bench_host_uring();
    bench_host_udp = bench_host_socket(AF_INET, SOCK_DGRAM);
    bench_host_unix = bench_host_socket(AF_UNIX, SOCK_STREAM);
    bench_heap_in = malloc(sizeof(*bench_heap_in));
    bench_heap_un = malloc(sizeof(*bench_heap_un));
    if (bench_host_udp < 0 || bench_host_unix < 0 || bench_heap_in == NULL ||
        bench_heap_un == NULL) {
        fprintf(stderr, "bench-interpose: no sockets\n");
        return 1;
    }
    bench_loopback(bench_heap_in);
    bench_missing(bench_heap_un);
    {
        struct sockaddr_in any;

        bench_loopback(&any);
        any.sin_port = 0;
        if (bind(bench_host_udp, (struct sockaddr *)&any, sizeof(any)) != 0) {
            fprintf(stderr, "bench-interpose: bind: %s\n", strerror(errno));
            return 1;
        }
    }
    if (bench_host_fd < 0 || bench_host_wfd < 0 || bench_host_dirfd < 0 || bench_host_epfd < 0 ||
        bench_host_mapfd < 0 || bench_host_ring < 0) {
        fprintf(stderr, "bench-interpose: /dev/null not opened\n");
        return 1;
    }
    if (bench_tmp_make() != 0) {
        fprintf(stderr, "bench-interpose: %s not made: %s\n", bench_tmp, strerror(errno));
        return 1;
    }
    for (i = 0; i < 8; i++) {
        (void)host_fd_take(open("/dev/null", O_RDONLY)); /* the library's own fds */
    }
    if (host_signal_claim(SIGPROF, bench_on_signal) != 0) {
        fprintf(stderr, "bench-interpose: SIGPROF not claimed\n");
        return 1;
    }
    for (r = 0; r < rounds; r++) {
        for (op = 0; op < BENCH_OPS; op++) {
            host_set_agent_hooks(op == 6 || op == 8 ? &bench_hooks : NULL);
            host_set_server_hooks(op >= 28 && op <= 32 ? &bench_server_hooks : NULL);
            for (i = 0; i < 2; i++) {
                int real = (i + r) % 2; /* which goes first alternates */

                ns[op][real][r] = bench_run(op, real, calls, fd, fd2);
            }
            host_set_agent_hooks(NULL);
            host_set_server_hooks(NULL);
        }
    }
    printf("bench-interpose: %u calls x %d rounds; median ns per call (sigmask: per pair)\n", calls,
           rounds);
    for (op = 0; op < BENCH_OPS; op++) {
        bench_print(bench_ops[op], ns[op], rounds);
    }
    if (bench_unshare_part(rounds, calls, fd, fd2) != 0) {
        fprintf(stderr, "bench-interpose: no threads\n");
        bench_tmp_remove();
        return 1;
    }
    bench_tmp_remove();
    return 0;
}
