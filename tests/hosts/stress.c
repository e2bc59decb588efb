/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/stress.c - host threads call the interposed functions of every concern of host/ in
 * a loop (signal masks and dispositions, fds made and closed, short waits, thread creation) while
 * a SIGALRM handler of the host's calls the async-signal-safe ones too; host-contract.sh's
 * "sessions" run starts and stops sessions against it meanwhile. every_call() reaches each libc
 * function libpipeprof.so interposes (tests/check-host-exports.sh holds that this file names
 * them all): the waits with results known in advance, the exec family, posix_spawn, system and
 * the exits once per thread in children. Every result that is not what bare gives is counted and
 * printed: the output must stay bare's ("unexpected: 0").
 */
#include <aliases.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <link.h>
#include <mntent.h>
#include <mqueue.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <pwd.h>
#include <resolv.h>
#include <rpc/netdb.h>
#include <sched.h>
#include <semaphore.h>
#include <shadow.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/sendfile.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <utmp.h>
#include <utmpx.h>

#include "hosts.h"

/* glibc 2.42's (host/fds.c interposes it): weak, NULL where neither libc nor a preload has it */
struct mount_attr;
extern int open_tree_attr(int dfd, const char *path, unsigned int flags, struct mount_attr *attr,
                          size_t size) __attribute__((weak));

/* glibc's fstat of binaries built for a glibc before 2.33 (version 1: struct stat); its headers
 * no longer declare them. */
int __fxstat(int ver, int fd, struct stat *st);
int __fxstat64(int ver, int fd, struct stat64 *st);

#define THREADS 4

static _Atomic int stop, unexpected, alarms, usr1s;
static int sem_id = -1, msg_id = -1; /* System V IPC objects of this process, removed at its end */

extern char **environ;
/* glibc's fortified open (what open() becomes with _FORTIFY_SOURCE and a flags value unknown at
 * compile time); interposed as such */
extern int __open_2(const char *path, int flags);
extern int __open64_2(const char *path, int flags);
extern int __openat_2(int dirfd, const char *path, int flags);
extern int __openat64_2(int dirfd, const char *path, int flags);
/* glibc still exports the BSD name of signal(), no longer declared */
extern __sighandler_t bsd_signal(int sig, __sighandler_t handler);

static void
check(int ok, const char *what)
{
    if (!ok) {
        atomic_fetch_add(&unexpected, 1);
        fprintf(stderr, "unexpected: %s (errno %d)\n", what, errno);
    }
}

static void
on_alarm(int sig)
{
    int saved = errno, fd;
    sigset_t cur;
    struct sigaction old;

    (void)sig;
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
    }
    sigprocmask(SIG_BLOCK, NULL, &cur);
    sigaction(SIGUSR2, NULL, &old);
    poll(NULL, 0, 0);
    fd = eventfd(0, EFD_CLOEXEC);
    if (fd >= 0) {
        char b;
        struct timespec zero = { 0, 0 };

        (void)read(fd, &b, 0);
        (void)dup2(fd, fd);
        (void)ppoll(NULL, 0, &zero, NULL);
        (void)nanosleep(&zero, NULL);
        close(fd);
    }
    atomic_fetch_add(&alarms, 1);
    errno = saved;
}

static void
on_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&usr1s, 1);
}

/* A child that execs /bin/true by call `how`, or ends by _exit/_Exit: its status must be 0. */
static void
child_exec(int how)
{
    char *argv[] = { "true", NULL };
    pid_t pid = fork();
    int status = -1;

    if (pid == 0) {
        switch (how) {
        case 0:
            execve("/bin/true", argv, environ);
            break;
        case 1:
            execv("/bin/true", argv);
            break;
        case 2:
            execvp("true", argv);
            break;
        case 3:
            execvpe("true", argv, environ);
            break;
        case 4:
            execl("/bin/true", "true", (char *)NULL);
            break;
        case 5:
            execlp("true", "true", (char *)NULL);
            break;
        case 6:
            execle("/bin/true", "true", (char *)NULL, environ);
            break;
        case 7:
            _Exit(0);
        default:
            break;
        }
        _exit(how == 8 ? 0 : 127);
    }
    check(pid > 0 && waitpid(pid, &status, 0) == pid && status == 0, "fork/exec/_exit child");
}

/* The processes: once per thread (under record each exec'd child is one more recording). */
static void
every_process_call(void)
{
    char *argv[] = { "true", NULL };
    pid_t pid;
    int status = -1;

    for (int how = 0; how <= 8; how++) {
        child_exec(how);
    }
    check(posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) == 0 &&
                  waitpid(pid, &status, 0) == pid && status == 0,
          "posix_spawn");
    status = -1;
    check(posix_spawnp(&pid, "true", NULL, NULL, argv, environ) == 0 &&
                  waitpid(pid, &status, 0) == pid && status == 0,
          "posix_spawnp");
    check(system("exit 0") == 0, "system");
    status = -1;
    pid = vfork(); /* host/exit.c's, whose parent calls the server's hook after it */
    if (pid == 0) {
        execve("/bin/true", argv, environ);
        _exit(127);
    }
    check(pid > 0 && waitpid(pid, &status, 0) == pid && status == 0, "vfork");
    {
        FILE *cmd = popen("exit 0", "re");

        check(cmd != NULL && pclose(cmd) == 0, "popen");
    }
    {
        int master = -1;

        status = -1;
        pid = forkpty(&master, NULL, NULL, NULL);
        if (pid == 0) {
            _exit(0);
        }
        /* reaped before the master's close, which would hang up its terminal (SIGHUP) */
        check(pid > 0 && waitpid(pid, &status, 0) == pid && status == 0 && close(master) == 0,
              "forkpty");
    }
}

struct handoff {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int ready;
    _Atomic int waiting; /* 1 while the waiter may sit in sigsuspend() or pause() */
    pthread_t waiter;
};

/*
 * Ends the waiter's pthread_cond_wait, then its sigsuspend() and pause(): SIGUSR1 every
 * millisecond until both returned (a signal that came before pause() began does not end it).
 */
static void *
signaller(void *p)
{
    struct handoff *h = p;
    struct timespec ms = { 0, 1000000L };

    pthread_mutex_lock(&h->lock);
    h->ready = 1;
    pthread_cond_signal(&h->cond);
    pthread_mutex_unlock(&h->lock);
    while (atomic_load(&h->waiting)) {
        pthread_kill(h->waiter, SIGUSR1);
        nanosleep(&ms, NULL);
    }
    return NULL;
}

/* The calls that wait for another thread: pthread_cond_wait, sigsuspend, pause, pthread_join. */
static void
every_handoff_call(void)
{
    struct handoff h = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 1,
                         pthread_self() };
    sigset_t usr1, old, open_usr1;
    pthread_t th;
    int n0 = atomic_load(&usr1s);

    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, &old);
    open_usr1 = old;
    sigdelset(&open_usr1, SIGUSR1);
    check(pthread_create(&th, NULL, signaller, &h) == 0, "pthread_create signaller");
    pthread_mutex_lock(&h.lock);
    while (!h.ready) {
        pthread_cond_wait(&h.cond, &h.lock);
    }
    pthread_mutex_unlock(&h.lock);
    check(sigsuspend(&open_usr1) == -1 && errno == EINTR, "sigsuspend");
    pthread_sigmask(SIG_SETMASK, &open_usr1, NULL);
    check(pause() == -1 && errno == EINTR, "pause");
    atomic_store(&h.waiting, 0);
    check(pthread_join(th, NULL) == 0, "pthread_join signaller");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    check(atomic_load(&usr1s) > n0, "SIGUSR1 handled");
}

/*
 * The credential calls, set to what they are, on the main thread once the workers are done: glibc
 * makes every thread of the process change its credentials (a SIGSETXID to each, with a handler),
 * which ends another thread's nanosleep or pselect with EINTR, bare as well; and each change stops
 * the agent and its server and starts them again (host/creds.c), ending the sessions of the time.
 */
static void
every_credential_call(void)
{
    gid_t groups[64];
    int n;

    check(setuid(getuid()) == 0 && setgid(getgid()) == 0 && seteuid(geteuid()) == 0 &&
                  setegid(getegid()) == 0,
          "setuid/setgid/seteuid/setegid");
    check(setreuid((uid_t)-1, (uid_t)-1) == 0 && setregid((gid_t)-1, (gid_t)-1) == 0 &&
                  setresuid((uid_t)-1, (uid_t)-1, (uid_t)-1) == 0 &&
                  setresgid((gid_t)-1, (gid_t)-1, (gid_t)-1) == 0,
          "setreuid/setregid/setresuid/setresgid");
    n = getgroups(64, groups);
    /* setgroups needs CAP_SETGID: EPERM for another user, bare or not */
    check(n >= 0 && (setgroups((size_t)n, groups) == 0 || errno == EPERM), "setgroups");
    /* the namespace calls (host/ns.c) in their forms that need no privilege: no namespace to
     * leave, and a number that is no fd (the host-contract-ns-* cases make the real ones) */
    check(unshare(0) == 0 && syscall(SYS_unshare, 0) == 0, "unshare(0)");
    check(setns(-1, CLONE_NEWNS) == -1 && errno == EBADF &&
                  syscall(SYS_setns, -1, CLONE_NEWUSER) == -1 && errno == EBADF,
          "setns(-1)");
}

/* prctl (host/seccomp.c): an option it passes through, and PR_SET_SECCOMP of a mode the kernel
 * does not know (EINVAL), which installs nothing and stops nothing. */
static void
every_prctl_call(void)
{
    char name[16] = "";

    check(prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && name[0] != '\0', "prctl(PR_GET_NAME)");
    check(prctl(PR_SET_SECCOMP, 7, 0, 0, 0) == -1 && errno == EINVAL, "prctl(PR_SET_SECCOMP, 7)");
}

/* mkstemp and its kin (fds.c's interposers), each file removed: 0 when all worked. */
static int
stress_temporary(int fails)
{
    const char *dir = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    char path[4096];
    int i, fd;

    for (i = 0; i < 8; i++) {
        int sfx = i >= 4 ? 2 : 0;

        snprintf(path, sizeof(path), "%s/pp-stress-XXXXXX%s", dir, sfx ? ".t" : "");
        fd = i == 0   ? mkstemp(path)
             : i == 1 ? mkstemp64(path)
             : i == 2 ? mkostemp(path, O_CLOEXEC)
             : i == 3 ? mkostemp64(path, O_CLOEXEC)
             : i == 4 ? mkstemps(path, sfx)
             : i == 5 ? mkstemps64(path, sfx)
             : i == 6 ? mkostemps(path, sfx, O_CLOEXEC)
                      : mkostemps64(path, sfx, O_CLOEXEC);
        fails += fd < 0 || close(fd) != 0 || unlink(path) != 0;
    }
    return fails;
}

/* Held across the calls of libc's that are not reentrant (every_call). */
static pthread_mutex_t stress_nonreentrant = PTHREAD_MUTEX_INITIALIZER;

/* The lookups that go to DNS through the thread's _res (refused there), and those files answer. */
static void
stress_lookups(void)
{
    struct hostent he, *hep;
    struct netent ne, *nep;
    struct addrinfo hints = { .ai_family = AF_INET }, *ai = NULL;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0xc0000201) };
    struct in_addr addr = sa.sin_addr;
    char buf[4096], host[256];
    int herr, rc;

    check(gethostbyname("localhost") != NULL &&
                  gethostbyname2("nothing.invalid", AF_INET) == NULL &&
                  gethostbyaddr(&addr, sizeof(addr), AF_INET) == NULL,
          "gethostbyname/gethostbyname2/gethostbyaddr");
    check(gethostbyname_r("localhost", &he, buf, sizeof(buf), &hep, &herr) == 0 && hep != NULL &&
                  (gethostbyname2_r("nothing.invalid", AF_INET, &he, buf, sizeof(buf), &hep, &herr),
                   hep == NULL) &&
                  (gethostbyaddr_r(&addr, sizeof(addr), AF_INET, &he, buf, sizeof(buf), &hep,
                                   &herr),
                   hep == NULL),
          "gethostbyname_r/gethostbyname2_r/gethostbyaddr_r");
    rc = getaddrinfo("nothing.invalid", NULL, &hints, &ai);
    if (rc == 0) {
        freeaddrinfo(ai);
    }
    check(rc != 0 && getnameinfo((struct sockaddr *)&sa, sizeof(sa), host, sizeof(host), NULL, 0,
                                 NI_NAMEREQD) != 0,
          "getaddrinfo/getnameinfo");
    check(getnetbyname("loopback") != NULL && getnetbyaddr(0x7f000000u, AF_INET) != NULL &&
                  getnetbyname_r("loopback", &ne, buf, sizeof(buf), &nep, &herr) == 0 &&
                  getnetbyaddr_r(0x7f000000u, AF_INET, &ne, buf, sizeof(buf), &nep, &herr) == 0,
          "getnetbyname/getnetbyaddr/getnetbyname_r/getnetbyaddr_r");
}

/* The resolver's calls of both names (the __res_* ones, compat versions of glibc's, through the
 * preloaded library's exports: none bare) against a loopback port nothing listens on (each query
 * refused at once), with RES_STAYOPEN, then _res as resolv.conf says again. */
typedef int (*stress_res_fn)(const char *, int, int, unsigned char *, int);
typedef int (*stress_res_domain_fn)(const char *, const char *, int, int, unsigned char *, int);
typedef int (*stress_res_send_fn)(const unsigned char *, int, unsigned char *, int);
typedef int (*stress_res_n_fn)(res_state, const char *, int, int, unsigned char *, int);
typedef int (*stress_res_ndomain_fn)(res_state, const char *, const char *, int, int,
                                     unsigned char *, int);
typedef int (*stress_res_nsend_fn)(res_state, const unsigned char *, int, unsigned char *, int);

static void
stress_resolver(void)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(a);
    unsigned char q[512], ans[512];
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), n, ok;
    stress_res_fn q2 = (stress_res_fn)dlsym(RTLD_DEFAULT, "__res_query");
    stress_res_fn s2 = (stress_res_fn)dlsym(RTLD_DEFAULT, "__res_search");
    stress_res_domain_fn d2 = (stress_res_domain_fn)dlsym(RTLD_DEFAULT, "__res_querydomain");
    stress_res_send_fn send2 = (stress_res_send_fn)dlsym(RTLD_DEFAULT, "__res_send");
    stress_res_n_fn nq2 = (stress_res_n_fn)dlsym(RTLD_DEFAULT, "__res_nquery");
    stress_res_n_fn ns2 = (stress_res_n_fn)dlsym(RTLD_DEFAULT, "__res_nsearch");
    stress_res_ndomain_fn nd2 = (stress_res_ndomain_fn)dlsym(RTLD_DEFAULT, "__res_nquerydomain");
    stress_res_nsend_fn nsend2 = (stress_res_nsend_fn)dlsym(RTLD_DEFAULT, "__res_nsend");

    /* a port free on loopback: bound, then closed */
    check(s >= 0 && bind(s, (struct sockaddr *)&a, len) == 0 &&
                  getsockname(s, (struct sockaddr *)&a, &len) == 0 && close(s) == 0,
          "resolver's refusing port");
    check(res_init() == 0, "res_init");
    _res.nsaddr_list[0] = a;
    _res.nscount = 1;
    _res.retrans = 1;
    _res.retry = 1;
    _res.options |= RES_STAYOPEN;
    n = res_mkquery(QUERY, "nothing.invalid", C_IN, T_A, NULL, 0, NULL, q, sizeof(q));
    check(n > 0, "res_mkquery");
    ok = res_query("nothing.invalid", C_IN, T_A, ans, sizeof(ans)) < 0 &&
         res_search("nothing.invalid", C_IN, T_A, ans, sizeof(ans)) < 0 &&
         res_querydomain("nothing", "invalid", C_IN, T_A, ans, sizeof(ans)) < 0 &&
         res_send(q, n, ans, sizeof(ans)) < 0 &&
         res_nquery(&_res, "nothing.invalid", C_IN, T_A, ans, sizeof(ans)) < 0 &&
         res_nsearch(&_res, "nothing.invalid", C_IN, T_A, ans, sizeof(ans)) < 0 &&
         res_nquerydomain(&_res, "nothing", "invalid", C_IN, T_A, ans, sizeof(ans)) < 0 &&
         res_nsend(&_res, q, n, ans, sizeof(ans)) < 0;
    check(ok, "res_query/res_search/res_querydomain/res_send and their res_n* (refused)");
    ok = (q2 == NULL || q2("nothing.invalid", C_IN, T_A, ans, sizeof(ans)) < 0) &&
         (s2 == NULL || s2("nothing.invalid", C_IN, T_A, ans, sizeof(ans)) < 0) &&
         (d2 == NULL || d2("nothing", "invalid", C_IN, T_A, ans, sizeof(ans)) < 0) &&
         (send2 == NULL || send2(q, n, ans, sizeof(ans)) < 0) &&
         (nq2 == NULL || nq2(&_res, "nothing.invalid", C_IN, T_A, ans, sizeof(ans)) < 0) &&
         (ns2 == NULL || ns2(&_res, "nothing.invalid", C_IN, T_A, ans, sizeof(ans)) < 0) &&
         (nd2 == NULL || nd2(&_res, "nothing", "invalid", C_IN, T_A, ans, sizeof(ans)) < 0) &&
         (nsend2 == NULL || nsend2(&_res, q, n, ans, sizeof(ans)) < 0);
    check(ok, "__res_query/__res_search/__res_querydomain/__res_send and their __res_n*");
    stress_lookups();
    res_nclose(&_res);
    check(res_init() == 0, "res_init again");
}

/* The enumerations of netdb's files and the resolver's calls. */
static void
stress_netdb(void)
{
    struct hostent he, *hep;
    struct netent ne, *nep;
    struct protoent pe, *pep;
    struct servent se, *sep;
    struct rpcent re, *rep;
    struct aliasent ae, *aep;
    char buf[8192];
    int herr;

    sethostent(1);
    check(gethostent() != NULL && gethostent_r(&he, buf, sizeof(buf), &hep, &herr) == 0,
          "sethostent/gethostent/gethostent_r");
    endhostent();
    setnetent(1);
    check(getnetent() != NULL && getnetent_r(&ne, buf, sizeof(buf), &nep, &herr) == 0,
          "setnetent/getnetent/getnetent_r");
    endnetent();
    setprotoent(1);
    check(getprotoent() != NULL && getprotoent_r(&pe, buf, sizeof(buf), &pep) == 0,
          "setprotoent/getprotoent/getprotoent_r");
    endprotoent();
    setservent(1);
    check(getservent() != NULL && getservent_r(&se, buf, sizeof(buf), &sep) == 0,
          "setservent/getservent/getservent_r");
    endservent();
    setrpcent(1);
    check(getrpcent() != NULL && getrpcent_r(&re, buf, sizeof(buf), &rep) == 0,
          "setrpcent/getrpcent/getrpcent_r");
    endrpcent();
    setaliasent();
    (void)getaliasent(); /* no /etc/aliases on most machines */
    (void)getaliasent_r(&ae, buf, sizeof(buf), &aep);
    endaliasent();
    stress_resolver();
}

/* Each remaining interposer of host/ once, each with the result bare gives. */
static int
stress_count_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info;
    (void)size;
    (*(int *)arg)++;
    return 0;
}

static void
every_call(int idx)
{
    struct timespec zero = { 0, 0 }, tiny = { 0, 10000 }, past = { 0, 0 };
    struct timeval tv0 = { 0, 0 };
    struct epoll_event ev;
    /* one semaphore of the set per thread: the others never take this thread's unit */
    struct sembuf up = { (unsigned short)idx, 1, 0 }, down = { (unsigned short)idx, -1, 0 },
                  none = { (unsigned short)idx, -1, IPC_NOWAIT };
    struct {
        long type;
        char text[4];
    } msg = { idx + 1, "abc" };
    struct sockaddr_un addr;
    socklen_t alen = sizeof(addr);
    char shm[64];
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    sigset_t usr1, old;
    siginfo_t info;
    sem_t sem;
    char b[4];
    int sv[2], ls, cs, as, ep, fd, fd2, n;
    FILE *f;
    DIR *d;
    struct iovec iov = { b, 1 };
    struct msghdr mh = { 0 };

    void *dl = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);

    /* a library loaded and unloaded (the agent rescans its modules around dlclose) */
    check(dl != NULL && dlclose(dl) == 0, "dlopen/dlclose");
    /* a walk of the loaded objects (the interposer counts the host's walks for fork) */
    n = 0;
    check(dl_iterate_phdr(stress_count_object, &n) == 0 && n > 0, "dl_iterate_phdr");
    /* sleeps and readiness waits that return at once */
    check(clock_nanosleep(CLOCK_MONOTONIC, 0, &tiny, NULL) == 0, "clock_nanosleep");
    check(usleep(10) == 0 && sleep(0) == 0, "usleep/sleep");
    check(select(0, NULL, NULL, NULL, &tv0) == 0, "select");
    check(ppoll(NULL, 0, &zero, NULL) == 0, "ppoll");
    ep = epoll_create(1);
    check(ep >= 0, "epoll_create");
    check(epoll_wait(ep, &ev, 1, 0) == 0 && epoll_pwait(ep, &ev, 1, 0, NULL) == 0, "epoll_wait");
    n = epoll_pwait2(ep, &ev, 1, &zero, NULL);
    check(n == 0 || (n == -1 && errno == ENOSYS), "epoll_pwait2");
    close(ep);

    /* sockets: a listener of an autobound abstract name, bind, connect, accept, the receives */
    check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
    check(write(sv[1], "wx", 2) == 2 && send(sv[1], "y", 1, 0) == 1 &&
                  sendto(sv[1], "z", 1, 0, NULL, 0) == 1,
          "write/send/sendto");
    {
        struct iovec two[2] = { { "u", 1 }, { "v", 1 } };
        struct msghdr out = { .msg_iov = two, .msg_iovlen = 2 };

        check(writev(sv[1], two, 2) == 2 && sendmsg(sv[1], &out, 0) == 2, "writev/sendmsg");
        check(getrandom(b, 1, 0) == 1, "getrandom");
    }
    check(recv(sv[0], b, 1, MSG_DONTWAIT) == 1 &&
                  recvfrom(sv[0], b, 1, MSG_DONTWAIT, NULL, NULL) == 1,
          "recv/recvfrom");
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    check(recvmsg(sv[0], &mh, MSG_DONTWAIT) == 1 && read(sv[0], b, 1) == 1, "recvmsg/read");
    {
        struct mmsghdr one = { .msg_hdr = mh };

        check(write(sv[1], "m", 1) == 1 && recvmmsg(sv[0], &one, 1, MSG_DONTWAIT, NULL) == 1 &&
                      one.msg_len == 1,
              "recvmmsg");
    }
    fd = memfd_create("stress", MFD_CLOEXEC);
    check(fd >= 0 && write(fd, "fg", 2) == 2, "memfd");
    {
        off_t off = 0;
        off64_t off64 = 1;

        check(sendfile(sv[1], fd, &off, 1) == 1 && sendfile64(sv[1], fd, &off64, 1) == 1,
              "sendfile/sendfile64");
    }
    close(fd);
    close(sv[0]);
    close(sv[1]);
    ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    check(ls >= 0 && bind(ls, (struct sockaddr *)&addr, sizeof(sa_family_t)) == 0 &&
                  listen(ls, 4) == 0 && getsockname(ls, (struct sockaddr *)&addr, &alen) == 0,
          "bind/listen");
    check(accept(ls, NULL, NULL) == -1 && errno == EAGAIN, "accept, nobody there");
    cs = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    check(connect(cs, (struct sockaddr *)&addr, alen) == 0, "connect");
    as = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    check(as >= 0, "accept4");
    close(as);
    close(cs);
    close(ls);
    check(unlink("/nonexistent/pp-stress") == -1 && errno == ENOENT, "unlink");

    /* semaphores, signals waited for, System V IPC */
    sem_init(&sem, 0, 0);
    check(sem_post(&sem) == 0 && sem_wait(&sem) == 0, "sem_wait");
    check(sem_timedwait(&sem, &past) == -1 && errno == ETIMEDOUT, "sem_timedwait");
    check(sem_post(&sem) == 0 && sem_clockwait(&sem, CLOCK_MONOTONIC, &past) == 0, "sem_clockwait");
    sem_destroy(&sem);
    pthread_mutex_lock(&m);
    check(pthread_cond_timedwait(&cv, &m, &past) == ETIMEDOUT, "pthread_cond_timedwait");
    pthread_mutex_unlock(&m);
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, &old);
    check(sigtimedwait(&usr1, &info, &zero) == -1 && errno == EAGAIN, "sigtimedwait");
    pthread_kill(pthread_self(), SIGUSR1);
    check(sigwaitinfo(&usr1, &info) == SIGUSR1, "sigwaitinfo");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    check(semop(sem_id, &up, 1) == 0 && semtimedop(sem_id, &down, 1, &tiny) == 0 &&
                  semop(sem_id, &none, 1) == -1 && errno == EAGAIN,
          "semop/semtimedop");
    check(msgsnd(msg_id, &msg, sizeof(msg.text), 0) == 0 &&
                  msgrcv(msg_id, &msg, sizeof(msg.text), idx + 1, 0) == (ssize_t)sizeof(msg.text),
          "msgsnd/msgrcv");

    /* fds: the opens, pipes, dups and closes of fds.c; syscall() */
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    fd2 = open64("/dev/null", O_RDONLY | O_CLOEXEC);
    check(fd >= 0 && fd2 >= 0 && dup3(fd, fd2, O_CLOEXEC) == fd2, "open/open64/dup3");
    host_tsan_closing(fd2, fd2);
    host_tsan_closing(fd, fd);
    check(close_range((unsigned)fd2, (unsigned)fd2, 0) == 0 && syscall(SYS_close, fd) == 0,
          "close_range/syscall(SYS_close)");
    fd = __open_2("/dev/null", O_RDONLY | O_CLOEXEC);
    fd2 = __open64_2("/dev/null", O_RDONLY | O_CLOEXEC);
    check(fd >= 0 && fd2 >= 0 && close(fd) == 0 && close(fd2) == 0, "__open_2/__open64_2");
    check(pipe2(sv, O_CLOEXEC) == 0 && close(sv[0]) == 0 && close(sv[1]) == 0, "pipe2");
    fd = openat(AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
    fd2 = openat64(AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
    check(fd >= 0 && fd2 >= 0 && close(fd) == 0 && close(fd2) == 0, "openat/openat64");
    fd = __openat_2(AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
    fd2 = __openat64_2(AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
    check(fd >= 0 && fd2 >= 0 && close(fd) == 0 && close(fd2) == 0, "__openat_2/__openat64_2");
    fd = creat("/dev/null", 0600); /* O_TRUNC does nothing to a device */
    fd2 = creat64("/dev/null", 0600);
    check(fd >= 0 && fd2 >= 0 && close(fd) == 0 && close(fd2) == 0, "creat/creat64");
    fd = dup(2);
    check(fd >= 0 && close(fd) == 0, "dup");
    f = fopen64("/dev/null", "re");
    check(f != NULL && fclose(f) == 0, "fopen64");
    fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    fd2 = signalfd(-1, &usr1, SFD_CLOEXEC);
    check(fd >= 0 && fd2 >= 0 && signalfd(fd2, &usr1, 0) == fd2 && close(fd) == 0 &&
                  close(fd2) == 0,
          "timerfd_create/signalfd");
    fd = inotify_init();
    fd2 = inotify_init1(IN_CLOEXEC);
    check(fd >= 0 && fd2 >= 0 && close(fd) == 0 && close(fd2) == 0, "inotify_init/inotify_init1");
    fd = pidfd_open(getpid(), 0);
    fd2 = fd >= 0 ? pidfd_getfd(fd, 2, 0) : -1;
    check((fd >= 0 && fd2 >= 0 && close(fd2) == 0 && close(fd) == 0) || errno == ENOSYS,
          "pidfd_open/pidfd_getfd");
    fd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    fd2 = getpt();
    check(fd >= 0 && fd2 >= 0 && close(fd) == 0 && close(fd2) == 0, "posix_openpt/getpt");
    snprintf(shm, sizeof(shm), "/pp-stress-%d-%d", (int)getpid(), idx);
    fd = shm_open(shm, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    check(fd >= 0 && close(fd) == 0 && shm_unlink(shm) == 0, "shm_open");
    check(openpty(&fd, &fd2, NULL, NULL, NULL) == 0 && close(fd) == 0 && close(fd2) == 0,
          "openpty");
    {
        mqd_t mq = mq_open(shm, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600, NULL);

        check((mq >= 0 && mq_close(mq) == 0 && mq_unlink(shm) == 0) ||
                      (mq < 0 && (errno == ENOSYS || errno == EACCES)),
              "mq_open");
    }
    fd = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC, O_RDONLY);
    check((fd >= 0 && close(fd) == 0) || (fd < 0 && (errno == EPERM || errno == ENOSYS)),
          "fanotify_init");
    {
        struct file_handle empty = { .handle_bytes = 0 };

        check(open_by_handle_at(-1, &empty, O_RDONLY) == -1, "open_by_handle_at (a bad handle)");
    }
    fd = fcntl(2, F_DUPFD_CLOEXEC, 0);
    fd2 = fcntl64(2, F_DUPFD, 10);
    check(fd >= 0 && fd2 >= 10 && fcntl(fd, F_GETFD) == FD_CLOEXEC && close(fd) == 0 &&
                  fcntl64(fd2, F_GETFD) == 0 && close(fd2) == 0,
          "fcntl/fcntl64");
    check(stress_temporary(0) == 0, "mkstemp kin");
    {
        /* the calls on an fd's number, on fds of the host's own: as libc's */
        struct stat st;
        struct stat64 st64;
        int v = 0, sp[2] = { -1, -1 };
        socklen_t len = sizeof(v);
        struct sockaddr_un sa;
        socklen_t salen = sizeof(sa);
        FILE *t = tmpfile();

        fd = t != NULL ? fileno(t) : -1;
        check(fd >= 0 && fstat(fd, &st) == 0 && fstat64(fd, &st64) == 0 &&
                      fstatat(fd, "", &st, AT_EMPTY_PATH) == 0 &&
                      fstatat64(fd, "", &st64, AT_EMPTY_PATH) == 0 && ftruncate(fd, 10) == 0 &&
                      ftruncate64(fd, 20) == 0 && lseek(fd, 0, SEEK_END) == 10 * 2 &&
                      lseek64(fd, 0, SEEK_SET) == 0 && ioctl(fd, FIONREAD, &v) == 0 && v == 20 &&
                      fsync(fd) == 0 && fdatasync(fd) == 0 && fchmod(fd, 0600) == 0 &&
                      fchown(fd, (uid_t)-1, (gid_t)-1) == 0 && flock(fd, LOCK_EX) == 0 &&
                      flock(fd, LOCK_UN) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_NORMAL) == 0 &&
                      posix_fadvise64(fd, 0, 0, POSIX_FADV_NORMAL) == 0 && fclose(t) == 0,
              "fstat/fstat64/fstatat/fstatat64/ftruncate/ftruncate64/lseek/lseek64/ioctl/fsync/"
              "fdatasync/fchmod/fchown/flock/posix_fadvise/posix_fadvise64");
        check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0 &&
                      getsockopt(sp[0], SOL_SOCKET, SO_TYPE, &v, &len) == 0 && v == SOCK_STREAM &&
                      getsockname(sp[0], (struct sockaddr *)&sa, &salen) == 0 &&
                      (salen = sizeof(sa), getpeername(sp[1], (struct sockaddr *)&sa, &salen)) ==
                              0 &&
                      close(sp[0]) == 0 && close(sp[1]) == 0,
              "getsockopt/getsockname/getpeername");
    }
    {
        /* the data calls on an fd's number, on fds of the host's own: as libc's */
        char wb[4] = "abc", r[4] = { 0 };
        struct iovec v3 = { r, 3 };
        struct statfs sfs;
        struct statfs64 sfs64;
        struct statx sx;
        struct stat st;
        struct stat64 st64;
        int v = 1, dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC),
            cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), sp[2] = { -1, -1 };
        FILE *t = tmpfile();

        fd = t != NULL ? fileno(t) : -1;
        check(fd >= 0 && write(fd, wb, 3) == 3 && pread(fd, r, 3, 0) == 3 && r[2] == 'c' &&
                      pread64(fd, r, 2, 1) == 2 && r[0] == 'b' && lseek(fd, 0, SEEK_SET) == 0 &&
                      readv(fd, &v3, 1) == 3 && fstatfs(fd, &sfs) == 0 &&
                      fstatfs64(fd, &sfs64) == 0 &&
                      (fgetxattr(fd, "user.pipeprof", r, sizeof(r)) >= 0 || errno == ENODATA ||
                       errno == ENOTSUP) &&
                      statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &sx) == 0 && sx.stx_size == 3 &&
                      __fxstat(1, fd, &st) == 0 && st.st_size == 3 &&
                      __fxstat64(1, fd, &st64) == 0 && st64.st_size == 3 && fclose(t) == 0,
              "pread/pread64/readv/fstatfs/fstatfs64/fgetxattr/statx/__fxstat/__fxstat64");
        check(dir >= 0 && cwd >= 0 && fchdir(dir) == 0 && fchdir(cwd) == 0 && close(dir) == 0 &&
                      close(cwd) == 0,
              "fchdir");
        check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0 &&
                      setsockopt(sp[0], SOL_SOCKET, SO_KEEPALIVE, &v, sizeof(v)) == 0 &&
                      shutdown(sp[0], SHUT_WR) == 0 && read(sp[1], r, 1) == 0 &&
                      close(sp[0]) == 0 && close(sp[1]) == 0,
              "setsockopt/shutdown");
    }
    {
        /* RLIMIT_NOFILE's get and set: the host's soft limit, every time (a library fd's move
         * raises it for its dup alone), and a set that stays */
        struct rlimit rl, rl2;
        struct rlimit64 rl64;

        check(getrlimit(RLIMIT_NOFILE, &rl) == 0 && setrlimit(RLIMIT_NOFILE, &rl) == 0 &&
                      getrlimit64(RLIMIT_NOFILE, &rl64) == 0 && rl64.rlim_cur == rl.rlim_cur &&
                      setrlimit64(RLIMIT_NOFILE, &rl64) == 0 &&
                      prlimit(0, RLIMIT_NOFILE, &rl, &rl2) == 0 && rl2.rlim_cur == rl.rlim_cur &&
                      prlimit64(0, RLIMIT_NOFILE, NULL, &rl64) == 0 &&
                      rl64.rlim_cur == rl.rlim_cur &&
                      (rl.rlim_cur > INT_MAX || getdtablesize() == (int)rl.rlim_cur) &&
                      (rl.rlim_cur > LONG_MAX || sysconf(_SC_OPEN_MAX) == (long)rl.rlim_cur),
              "getrlimit/getrlimit64/setrlimit/setrlimit64/prlimit/prlimit64/getdtablesize/"
              "sysconf");
    }
    {
        /* the positioned and vector data calls, splice, sendmmsg, fsetxattr, fstatvfs, and
         * fchmodat/fchownat of a relative name, on fds of the host's own: as libc's */
        static const char nosuch[] = "pipeprof-stress-no-such-name";
        char r[8] = { 0 }, w[2] = "x";
        struct iovec rv = { r, 3 }, wv = { w, 1 };
        struct statvfs vfs;
        struct statvfs64 vfs64;
        struct mmsghdr mm;
        int dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC), p[2] = { -1, -1 },
            q[2] = { -1, -1 }, sp[2] = { -1, -1 };
        FILE *t = tmpfile();

        fd = t != NULL ? fileno(t) : -1;
        check(fd >= 0 && pwrite(fd, "abc", 3, 0) == 3 && pwrite64(fd, "d", 1, 3) == 1 &&
                      preadv(fd, &rv, 1, 0) == 3 && r[0] == 'a' && preadv64(fd, &rv, 1, 1) == 3 &&
                      r[2] == 'd' && pwritev(fd, &wv, 1, 4) == 1 && pwritev64(fd, &wv, 1, 5) == 1 &&
                      preadv2(fd, &rv, 1, 3, 0) == 3 && r[1] == 'x' &&
                      preadv64v2(fd, &rv, 1, 0, 0) == 3 && pwritev2(fd, &wv, 1, 6, 0) == 1 &&
                      pwritev64v2(fd, &wv, 1, 7, 0) == 1 &&
                      (fsetxattr(fd, "user.pipeprof", "1", 1, 0) == 0 || errno == ENOTSUP ||
                       errno == EPERM) &&
                      fstatvfs(fd, &vfs) == 0 && fstatvfs64(fd, &vfs64) == 0 && fclose(t) == 0,
              "pwrite/pwrite64/preadv*/pwritev*/fsetxattr/fstatvfs/fstatvfs64");
        check(dir >= 0 && fchmodat(dir, nosuch, 0600, 0) == -1 && errno == ENOENT &&
                      fchownat(dir, nosuch, (uid_t)-1, (gid_t)-1, 0) == -1 && errno == ENOENT &&
                      close(dir) == 0,
              "fchmodat/fchownat");
        memset(&mm, 0, sizeof(mm));
        mm.msg_hdr.msg_iov = &wv;
        mm.msg_hdr.msg_iovlen = 1;
        check(pipe2(p, O_CLOEXEC) == 0 && pipe2(q, O_CLOEXEC) == 0 && write(p[1], "yz", 2) == 2 &&
                      splice(p[0], NULL, q[1], NULL, 2, 0) == 2 && read(q[0], r, 2) == 2 &&
                      r[1] == 'z' && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0 &&
                      sendmmsg(sp[0], &mm, 1, MSG_NOSIGNAL) == 1 && read(sp[1], r, 1) == 1 &&
                      r[0] == 'x' && close(p[0]) == 0 && close(p[1]) == 0 && close(q[0]) == 0 &&
                      close(q[1]) == 0 && close(sp[0]) == 0 && close(sp[1]) == 0,
              "splice/sendmmsg");
    }
    {
        /* the other calls on an fd's number, on fds of the host's own: as libc's (the *at calls
         * of a relative name that is not there, fexecve of a directory: their libc errors) */
        static const char nosuch[] = "pipeprof-stress-no-such-name";
        char r[512], *argv[] = { "x", NULL };
        struct iovec wv = { "w", 1 };
        struct itimerspec its;
        struct epoll_event pev = { .events = EPOLLIN };
        struct file_handle *fh = (struct file_handle *)r;
        struct mount_attr mattr = { .attr_set = MOUNT_ATTR_RDONLY };
        off64_t o1 = 0, o2 = 0;
        int dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC), p[2] = { -1, -1 },
            q[2] = { -1, -1 }, in = inotify_init1(IN_CLOEXEC), pep = epoll_create1(EPOLL_CLOEXEC),
            tf = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC), wd, mount_id;
        FILE *t = tmpfile();

        fd = t != NULL ? fileno(t) : -1;
        fh->handle_bytes = 0;
        check(fd >= 0 && write(fd, "abcd", 4) == 4 &&
                      (fallocate(fd, 0, 0, 8) == 0 || errno == EOPNOTSUPP) &&
                      (fallocate64(fd, 0, 0, 8) == 0 || errno == EOPNOTSUPP) &&
                      sync_file_range(fd, 0, 0, 0) == 0 && syncfs(fd) == 0 &&
                      lockf(fd, F_TEST, 0) == 0 && lockf64(fd, F_TEST, 0) == 0 &&
                      futimens(fd, NULL) == 0 && futimes(fd, NULL) == 0 &&
                      (flistxattr(fd, NULL, 0) >= 0 || errno == ENOTSUP) &&
                      fremovexattr(fd, "user.pipeprof-no-such") == -1 &&
                      (errno == ENODATA || errno == ENOTSUP || errno == EPERM) &&
                      copy_file_range(fd, &o1, fd, &o2, 0, 0) == 0 && fclose(t) == 0,
              "fallocate*/sync_file_range/syncfs/lockf*/futimens/futimes/*xattr/copy_file_range");
        check(pipe2(p, O_CLOEXEC) == 0 && pipe2(q, O_CLOEXEC) == 0 &&
                      vmsplice(p[1], &wv, 1, 0) == 1 && tee(p[0], q[1], 1, 0) == 1 &&
                      read(q[0], r, 1) == 1 && r[0] == 'w' && pep >= 0 &&
                      epoll_ctl(pep, EPOLL_CTL_ADD, p[0], &pev) == 0 && in >= 0 &&
                      (wd = inotify_add_watch(in, "/", IN_ACCESS)) >= 0 &&
                      inotify_rm_watch(in, wd) == 0 && tf >= 0 && timerfd_gettime(tf, &its) == 0 &&
                      fanotify_mark(-1, FAN_MARK_ADD, FAN_ACCESS, AT_FDCWD, "/") == -1 &&
                      errno == EBADF && close(p[0]) == 0 && close(p[1]) == 0 && close(q[0]) == 0 &&
                      close(q[1]) == 0 && close(pep) == 0 && close(in) == 0 && close(tf) == 0,
              "vmsplice/tee/epoll_ctl/inotify_add_watch/inotify_rm_watch/timerfd_gettime/"
              "fanotify_mark");
#define STRESS_ENOENT(call) ((call) == -1 && errno == ENOENT)
        check(dir >= 0 && getdents64(dir, r, sizeof(r)) > 0 &&
                      STRESS_ENOENT(mkdirat(dir, "pipeprof-stress-no-such-name/d", 0700)) &&
                      STRESS_ENOENT(unlinkat(dir, nosuch, 0)) &&
                      STRESS_ENOENT(renameat(dir, nosuch, dir, "pipeprof-stress-2")) &&
                      STRESS_ENOENT(renameat2(dir, nosuch, dir, "pipeprof-stress-2", 0)) &&
                      STRESS_ENOENT(linkat(dir, nosuch, dir, "pipeprof-stress-2", 0)) &&
                      STRESS_ENOENT(symlinkat("x", dir, "pipeprof-stress-no-such-name/l")) &&
                      STRESS_ENOENT(readlinkat(dir, nosuch, r, sizeof(r))) &&
                      STRESS_ENOENT(faccessat(dir, nosuch, F_OK, 0)) &&
                      STRESS_ENOENT(mknodat(dir, "pipeprof-stress-no-such-name/p", S_IFIFO, 0)) &&
                      STRESS_ENOENT(mkfifoat(dir, "pipeprof-stress-no-such-name/p", 0600)) &&
                      STRESS_ENOENT(utimensat(dir, nosuch, NULL, 0)) &&
                      STRESS_ENOENT(futimesat(dir, nosuch, NULL)) &&
                      STRESS_ENOENT(name_to_handle_at(dir, nosuch, fh, &mount_id, 0)) &&
                      STRESS_ENOENT(execveat(dir, nosuch, argv, environ, 0)) &&
                      fexecve(dir, argv, environ) == -1 && errno == EACCES && close(dir) == 0,
              "getdents64/mkdirat/unlinkat/renameat*/linkat/symlinkat/readlinkat/faccessat/"
              "mknodat/mkfifoat/utimensat/futimesat/name_to_handle_at/execveat/fexecve");
        /* the mount calls on a name that is not there (unprivileged: EPERM first; a seccomp
         * filter's ENOSYS) */
#define STRESS_REFUSED(call, err) \
    ((call) == -1 && (errno == (err) || errno == EPERM || errno == ENOSYS))
        check(STRESS_REFUSED(open_tree(AT_FDCWD, nosuch, OPEN_TREE_CLOEXEC), ENOENT) &&
                      STRESS_REFUSED(fspick(AT_FDCWD, nosuch, FSPICK_CLOEXEC), ENOENT) &&
                      STRESS_REFUSED(move_mount(AT_FDCWD, nosuch, AT_FDCWD, nosuch, 0), ENOENT) &&
                      STRESS_REFUSED(mount_setattr(AT_FDCWD, nosuch, 0, &mattr, sizeof(mattr)),
                                     ENOENT) &&
                      STRESS_REFUSED(fsopen("pipeprof-stress-no-such-fs", FSOPEN_CLOEXEC),
                                     ENODEV) &&
                      STRESS_REFUSED(fsconfig(-1, FSCONFIG_SET_FLAG, "ro", NULL, 0), EINVAL) &&
                      STRESS_REFUSED(fsmount(-1, FSMOUNT_CLOEXEC, 0), EBADF) &&
                      (open_tree_attr == NULL || /* glibc before 2.42, bare */
                       STRESS_REFUSED(open_tree_attr(AT_FDCWD, nosuch, OPEN_TREE_CLOEXEC, NULL, 0),
                                      ENOENT)),
              "open_tree/fspick/move_mount/mount_setattr/fsopen/fsconfig/fsmount/open_tree_attr");
#undef STRESS_REFUSED
        /* a file's page mapped through both names, and a timer armed and disarmed */
        t = tmpfile();
        fd = t != NULL ? fileno(t) : -1;
        tf = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
        its.it_interval = (struct timespec){ 0, 0 };
        its.it_value = (struct timespec){ 1000, 0 };
        {
            void *m1 = fd >= 0 && write(fd, "abcd", 4) == 4
                               ? mmap(NULL, 4, PROT_READ, MAP_SHARED, fd, 0)
                               : MAP_FAILED;
            void *m2 = fd >= 0 ? mmap64(NULL, 4, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;

            check(m1 != MAP_FAILED && m2 != MAP_FAILED && memcmp(m1, "abcd", 4) == 0 &&
                          memcmp(m2, "abcd", 4) == 0 && munmap(m1, 4) == 0 && munmap(m2, 4) == 0 &&
                          fclose(t) == 0 && tf >= 0 && timerfd_settime(tf, 0, &its, NULL) == 0 &&
                          timerfd_gettime(tf, &its) == 0 && its.it_value.tv_sec > 0 &&
                          timerfd_settime(tf, 0, &(struct itimerspec){ { 0, 0 }, { 0, 0 } },
                                          NULL) == 0 &&
                          close(tf) == 0,
                  "mmap/mmap64/timerfd_settime");
        }
#undef STRESS_ENOENT
    }
    f = tmpfile();
    check(f != NULL && fclose(f) == 0, "tmpfile");
    f = tmpfile64();
    check(f != NULL && (f = freopen("/dev/null", "re", f)) != NULL &&
                  (f = freopen64("/dev/null", "re", f)) != NULL && fclose(f) == 0,
          "tmpfile64/freopen/freopen64");
    closefrom(60000); /* nothing of the host's up there */
    f = fopen("/dev/null", "re");
    check(f != NULL && fclose(f) == 0, "fopen/fclose");
    d = opendir("/");
    check(d != NULL && closedir(d) == 0, "opendir/closedir");
    d = opendir("/proc/self/fd"); /* the host's own entries only, each through its interposer */
    {
        struct dirent *e, *er = NULL;
        struct dirent64 *e64, *er64 = NULL;
        union {
            struct dirent e;
            struct dirent64 e64;
        } slot;
        struct stat st;
        struct stat64 st64;
        char link[64];

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        check(d != NULL && (e = readdir(d)) != NULL && (e64 = readdir64(d)) != NULL &&
                      readdir_r(d, &slot.e, &er) == 0 && er != NULL &&
                      readdir64_r(d, &slot.e64, &er64) == 0 && er64 != NULL && closedir(d) == 0,
              "readdir/readdir64/readdir_r/readdir64_r");
#pragma GCC diagnostic pop
        {
            struct dirent **list = NULL;
            struct dirent64 **list64 = NULL;
            int ns = scandir("/proc/self/task", &list, NULL, alphasort);
            int n64 = scandir64("/proc/self/fd", &list64, NULL, NULL);
            int k;

            check(ns >= 3 && n64 >= 5, "scandir/scandir64"); /* ., .., a thread; and 0..2 */
            for (k = 0; k < ns; k++) {
                free(list[k]);
            }
            for (k = 0; k < n64; k++) {
                free(list64[k]);
            }
            free(list);
            free(list64);
        }
        check(readlink("/proc/self/fd/0", link, sizeof(link)) > 0 && stat("/", &st) == 0 &&
                      stat64("/", &st64) == 0 && lstat("/", &st) == 0 && lstat64("/", &st64) == 0 &&
                      access("/", F_OK) == 0,
              "readlink/stat/stat64/lstat/lstat64/access");
    }
    check(syscall(SYS_getpid) == getpid(), "syscall(SYS_getpid)");
    /* syslog's socket opened (where /dev/log exists) and closed; every message below the mask,
     * so that nothing reaches the machine's log */
    setlogmask(LOG_MASK(LOG_EMERG));
    openlog("host-stress", LOG_NDELAY, LOG_USER);
    for (unsigned turn = 0; turn < 4; turn++) {
        host_syslog_message(turn, LOG_DEBUG); /* syslog vsyslog __syslog_chk __vsyslog_chk */
    }
    closelog();
    /* the calls glibc opens a file inside and keeps it in (host/fds.c counts them in the gate):
     * the enumerations of the machine's passwd, group and shadow (none as a non-root user), its
     * mounts, and a utmp file that does not exist (each lookup fails, nothing is written) */
    {
        struct passwd pw, *pwp;
        struct group gr, *grp;
        struct spwd sp, *spp;
        struct utmp ut = { .ut_type = USER_PROCESS }, utb, *utp;
        struct utmpx utx = { .ut_type = USER_PROCESS };
        char buf[4096];
        FILE *mnt;

        /* one thread at a time: these share one stream (and getpwent's kin one result) in libc,
         * as a host that calls them from many threads must hold a lock (TSan reported races in
         * getpwent, getgrent, gethostent, gethostbyname... between the workers) */
        pthread_mutex_lock(&stress_nonreentrant);
        setpwent();
        check(getpwent() != NULL && getpwent_r(&pw, buf, sizeof(buf), &pwp) == 0,
              "setpwent/getpwent/getpwent_r");
        endpwent();
        setgrent();
        check(getgrent() != NULL && getgrent_r(&gr, buf, sizeof(buf), &grp) == 0,
              "setgrent/getgrent/getgrent_r");
        endgrent();
        setspent();
        (void)getspent(); /* root only */
        (void)getspent_r(&sp, buf, sizeof(buf), &spp);
        endspent();
        mnt = setmntent("/proc/self/mounts", "re");
        check(mnt != NULL && endmntent(mnt) == 1, "setmntent");
        utmpname("/nonexistent/host-stress-utmp");
        setutent();
        check(getutent() == NULL && getutid(&ut) == NULL && getutline(&ut) == NULL &&
                      pututline(&ut) == NULL && getutent_r(&utb, &utp) != 0 &&
                      getutid_r(&ut, &utb, &utp) != 0 && getutline_r(&ut, &utb, &utp) != 0,
              "setutent/getutent/getutid/getutline/pututline/getutent_r/getutid_r/getutline_r");
        endutent();
        setutxent();
        check(getutxent() == NULL && getutxid(&utx) == NULL && getutxline(&utx) == NULL &&
                      pututxline(&utx) == NULL,
              "setutxent/getutxent/getutxid/getutxline/pututxline");
        endutxent();
    }
    /* NSS's other enumerations (hosts, networks, protocols, services, rpc; aliases: none here)
     * and the resolver with RES_STAYOPEN (host/fds.c counts them in the gate) */
    stress_netdb();
    pthread_mutex_unlock(&stress_nonreentrant);

    /* dispositions by the old calls */
    check(bsd_signal(SIGWINCH, SIG_DFL) != SIG_ERR && sysv_signal(SIGWINCH, SIG_DFL) != SIG_ERR,
          "bsd_signal/sysv_signal");
    /* sends to itself of a signal whose default action is to ignore it */
    check(raise(SIGWINCH) == 0 && pthread_kill(pthread_self(), SIGWINCH) == 0 &&
                  pthread_sigqueue(pthread_self(), SIGWINCH, (union sigval){ .sival_int = 1 }) ==
                          0 &&
                  tgkill(getpid(), gettid(), SIGWINCH) == 0,
          "raise/pthread_kill/pthread_sigqueue/tgkill");
}

static void *
nothing(void *p)
{
    return p;
}

static void *
worker(void *p)
{
    struct timespec zero = { 0, 0 }, tiny = { 0, 100000 };
    sigset_t set, old;
    sem_t sem;
    int i = 0;

    (void)p;
    sem_init(&sem, 0, 0);
    sigemptyset(&set);
    sigaddset(&set, SIGALRM); /* the host's own signal goes to the main thread */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    sigemptyset(&set);
    sigaddset(&set, SIGPROF);
    while (!atomic_load(&stop)) {
        int fds[2], fd, ep, s;
        fd_set r;
        char b;
        pthread_t th;
        struct sigaction sa;

        check(pthread_sigmask(SIG_BLOCK, &set, &old) == 0, "pthread_sigmask");
        host_burn_us(50);
        check(pthread_sigmask(SIG_SETMASK, &old, NULL) == 0, "pthread_sigmask restore");
        check(sigaction(SIGUSR2, NULL, &sa) == 0, "sigaction query");
        check(pipe(fds) == 0, "pipe");
        check(read(fds[0], &b, 0) == 0, "read 0");
        check(dup2(fds[0], fds[1]) == fds[1], "dup2");
        check(close(fds[0]) == 0 && close(fds[1]) == 0, "close pipe");
        fd = eventfd(0, EFD_CLOEXEC);
        ep = epoll_create1(EPOLL_CLOEXEC);
        s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        check(fd >= 0 && ep >= 0 && s >= 0, "eventfd/epoll/socket");
        check(fd < 100 && ep < 100 && s < 100, "low numbers for the host");
        close(fd);
        close(ep);
        close(s);
        check(poll(NULL, 0, 0) == 0, "poll");
        FD_ZERO(&r);
        check(pselect(0, &r, NULL, NULL, &zero, NULL) == 0, "pselect");
        check(nanosleep(&tiny, NULL) == 0, "nanosleep");
        check(sem_trywait(&sem) == -1 && errno == EAGAIN, "sem_trywait");
        if (i == 0) {
            every_process_call();
        }
        if (i % 25 == 0) {
            every_call((int)(intptr_t)p);
            every_handoff_call();
        }
        if (++i % 50 == 0) {
            check(pthread_create(&th, NULL, nothing, NULL) == 0 && pthread_join(th, NULL) == 0,
                  "pthread_create/join");
        }
    }
    sem_destroy(&sem);
    return NULL;
}

int
main(void)
{
    struct itimerval it = { { 0, 2000 }, { 0, 2000 } }, off = { { 0, 0 }, { 0, 0 } };
    struct sigaction sa;
    pthread_t th[THREADS];

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    sa.sa_handler = on_usr1;
    sa.sa_flags = 0; /* sigsuspend and pause end with EINTR */
    sigaction(SIGUSR1, &sa, NULL);
    sem_id = semget(IPC_PRIVATE, THREADS, 0600);
    msg_id = msgget(IPC_PRIVATE, 0600);
    if (sem_id < 0 || msg_id < 0) {
        perror("semget/msgget");
        return 1;
    }
    host_wait_go();
    for (int i = 0; i < THREADS; i++) {
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    }
    setitimer(ITIMER_REAL, &it, NULL);
    for (int i = 0; i < 40; i++) { /* 4 s */
        struct timespec t = { 0, 100000000L };

        while (nanosleep(&t, &t) != 0 && errno == EINTR) {
        }
    }
    setitimer(ITIMER_REAL, &off, NULL);
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    every_credential_call();
    every_prctl_call();
    semctl(sem_id, 0, IPC_RMID);
    msgctl(msg_id, IPC_RMID, NULL);
    printf("alarm handler ran: %s\n", atomic_load(&alarms) > 0 ? "yes" : "no");
    printf("unexpected: %d\n", atomic_load(&unexpected));
    return 0;
}
