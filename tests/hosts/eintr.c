/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/eintr.c - a host whose threads wait in calls the kernel never restarts after a
 * signal, each in a loop of 40 waits of 25 ms, and count how each wait ended: bare none ends in
 * EINTR (the host sends no signal), and under the agent sampling in wall mode at 1000 Hz none
 * may either. host-contract.sh compares the counts; host/eintr.c and host/blocking.c keep them.
 * Besides libc's waits: System V semaphores and message queues (semtimedop, semop, msgrcv), a
 * POSIX message queue (mq_timedreceive: the kernel restarts it under SA_RESTART, held here so
 * that it stays so), and raw system calls made with syscall() as other libraries make them
 * (libaio's io_getevents, futex FUTEX_WAIT with a relative timeout and FUTEX_WAIT_BITSET with
 * an absolute one, and recvmsg and recvmmsg as recvmsg's and recvmmsg's cases). Waits that need
 * a counterpart are fed by one poster thread, every 25 ms;
 * recvmmsg, whose missing retry those 40 waits never showed, waits 20000 times, fed by its own.
 * Waits that only a signal ends (sigwaitinfo, pause, sigsuspend) get a real-time signal of the
 * host's own every 25 ms (queued: none is lost), and count a return without it as EINTR.
 *
 * "eintr badtimeout": the timed waits given a timeout the kernel cannot read, each in a child of
 * its own (bad_timeouts): EFAULT, or libc's own SIGSEGV where it copies the timeout first.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <linux/futex.h>
#include <mqueue.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hosts.h"

#define ROUNDS 40

struct counts {
    const char *name;
    int how; /* which call, for a thread that makes one of several */
    int done, eintr, timeout, other;
};

static void
tally(struct counts *c, int rc, int err, int timeout_err)
{
    if (rc >= 0) {
        c->done++;
    } else if (err == EINTR) {
        c->eintr++;
    } else if (err == timeout_err) {
        c->timeout++;
    } else {
        c->other++;
    }
    /* Running when it enters the next wait, as a busy thread does: the wall sampler reads it as
     * running and signals it, and the signal meets the wait that has just begun. */
    host_burn_us(1000);
}

static const struct timespec wait25 = { 0, 25000000L };

static void *
t_pselect(void *p)
{
    struct counts *c = p;

    for (int i = 0; i < ROUNDS; i++) {
        fd_set r;
        int rc;

        FD_ZERO(&r);
        rc = pselect(0, &r, NULL, NULL, &wait25, NULL);
        tally(c, rc == 0 ? -1 : rc, rc == 0 ? ETIMEDOUT : errno, ETIMEDOUT);
    }
    return NULL;
}

static sem_t posted;
static int sysv_sem = -1, sysv_msg = -1;

struct message {
    long type;
    char text[8];
};

/* Feeds the waits that need a counterpart: a POSIX and a System V semaphore, a message. */
static void *
poster(void *p)
{
    struct sembuf up = { 0, 1, 0 };
    struct message m = { 1, "tick" };

    (void)p;
    for (int i = 0; i < ROUNDS; i++) {
        nanosleep(&wait25, NULL);
        sem_post(&posted);
        if (sysv_sem >= 0) {
            semop(sysv_sem, &up, 1);
        }
        if (sysv_msg >= 0) {
            msgsnd(sysv_msg, &m, sizeof(m.text), 0);
        }
    }
    return NULL;
}

/* Waits until ROUNDS of the poster's items came (or too many failures), tallying each try. */
#define UNTIL_POSTED(c, call, timeout_err)           \
    for (int got_ = 0; got_ < ROUNDS;) {             \
        int rc_ = (call);                            \
                                                     \
        tally((c), rc_, errno, (timeout_err));       \
        got_ += rc_ >= 0;                            \
        if ((c)->eintr + (c)->other > 10 * ROUNDS) { \
            break;                                   \
        }                                            \
    }

/* An absolute CLOCK clk time 25 ms from now. */
static struct timespec
in25(clockid_t clk)
{
    struct timespec abs;

    clock_gettime(clk, &abs);
    abs.tv_nsec += wait25.tv_nsec;
    if (abs.tv_nsec >= 1000000000L) {
        abs.tv_sec++;
        abs.tv_nsec -= 1000000000L;
    }
    return abs;
}

static void *
t_sem_wait(void *p)
{
    UNTIL_POSTED((struct counts *)p, sem_wait(&posted), ETIMEDOUT);
    return NULL;
}

static void *
t_semop(void *p)
{
    struct sembuf down = { 0, -1, 0 };

    UNTIL_POSTED((struct counts *)p, semop(sysv_sem, &down, 1), ETIMEDOUT);
    return NULL;
}

static void *
t_msgrcv(void *p)
{
    struct message m;

    UNTIL_POSTED((struct counts *)p, (int)msgrcv(sysv_msg, &m, sizeof(m.text), 0, 0), ETIMEDOUT);
    return NULL;
}

/* recvmmsg of one datagram on a blocking socket, RECVMMSG_ROUNDS times, each datagram sent by a
 * feeder thread once the last one's answer came back: each wait begins just as the thread stops
 * running, which is when the wall sampler's signal can meet a wait (a thread seen running is
 * signalled, a blocked one never: only a signal sent between the look and the wait's start
 * lands in it), 0 to 9 times in a wall run here without host/eintr.c's retry. Its socket has
 * SO_RCVTIMEO (5 s, never reached): the kernel then never restarts it after a handler
 * (signal(7)); without it the agent's SA_RESTART hid a missing retry (40 waits of 25 ms fed by
 * the poster, with or without a timeout: 0 EINTR without the retry). */
#define RECVMMSG_ROUNDS 20000
/* ROUNDS with the argument "few": host-contract-proc-tasks runs it under strace, where the 20000
 * rounds took its time from 6 to 23 s. */
static int recvmmsg_rounds = RECVMMSG_ROUNDS;

static void *
recvmmsg_feeder(void *p)
{
    int fd = *(int *)p;
    char b;

    for (int sent = 0; sent < recvmmsg_rounds;) {
        if (send(fd, "tick", 4, 0) == 4) {
            sent++;
            while (recv(fd, &b, 1, 0) < 0 && errno == EINTR) {
            }
        }
    }
    return NULL;
}

static void *
t_recvmmsg(void *p)
{
    struct counts *c = p;
    char b[8];
    struct iovec iov = { b, sizeof(b) };
    struct mmsghdr one = { .msg_hdr = { .msg_iov = &iov, .msg_iovlen = 1 } };
    struct timeval tv = { 5, 0 };
    pthread_t th;
    int sv[2];

    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0) {
        return NULL;
    }
    setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    pthread_create(&th, NULL, recvmmsg_feeder, &sv[1]);
    for (int got = 0; got < recvmmsg_rounds && c->eintr + c->other <= recvmmsg_rounds;) {
        int rc = c->how ? (int)syscall(SYS_recvmmsg, sv[0], &one, 1, 0, NULL)
                        : recvmmsg(sv[0], &one, 1, 0, NULL);

        if (rc == 1) {
            c->done++;
            got++;
            host_burn_us(5);
            send(sv[0], "a", 1, 0);
        } else if (errno == EINTR) {
            c->eintr++;
        } else {
            c->other++;
        }
    }
    pthread_join(th, NULL);
    close(sv[0]);
    close(sv[1]);
    return NULL;
}

static void *
t_semtimedop(void *p)
{
    struct counts *c = p;
    struct sembuf down = { 0, -1, 0 };
    int id = semget(IPC_PRIVATE, 1, 0600);

    for (int i = 0; id >= 0 && i < ROUNDS; i++) {
        int rc = semtimedop(id, &down, 1, &wait25);

        tally(c, rc, errno, EAGAIN);
    }
    if (id >= 0) {
        semctl(id, 0, IPC_RMID);
    }
    return NULL;
}

static void *
t_mq_timedreceive(void *p)
{
    struct counts *c = p;
    struct mq_attr attr = { .mq_maxmsg = 4, .mq_msgsize = 8 };
    char name[64], buf[8];
    mqd_t q;

    snprintf(name, sizeof(name), "/pipeprof-host-eintr-%d", (int)getpid());
    q = mq_open(name, O_CREAT | O_RDWR, 0600, &attr);
    mq_unlink(name);
    for (int i = 0; q != (mqd_t)-1 && i < ROUNDS; i++) {
        struct timespec abs = in25(CLOCK_REALTIME);
        int rc = (int)mq_timedreceive(q, buf, sizeof(buf), NULL, &abs);

        tally(c, rc, errno, ETIMEDOUT);
    }
    if (q != (mqd_t)-1) {
        mq_close(q);
    }
    return NULL;
}

static void *
t_io_getevents(void *p)
{
    struct counts *c = p;
    aio_context_t ctx = 0;
    struct io_event ev;

    if (syscall(SYS_io_setup, 1, &ctx) != 0) {
        return NULL;
    }
    for (int i = 0; i < ROUNDS; i++) {
        struct timespec left = wait25;
        int rc = (int)syscall(SYS_io_getevents, ctx, 1, 1, &ev, &left);

        tally(c, rc == 0 ? -1 : rc, rc == 0 ? ETIMEDOUT : errno, ETIMEDOUT);
    }
    syscall(SYS_io_destroy, ctx);
    return NULL;
}

/* FUTEX_WAIT takes a relative timeout, FUTEX_WAIT_BITSET an absolute one. */
static void *
t_futex(struct counts *c, int bitset)
{
    int word = 0;

    for (int i = 0; i < ROUNDS; i++) {
        struct timespec tmo = bitset ? in25(CLOCK_MONOTONIC) : wait25;
        int rc = (int)syscall(SYS_futex, &word,
                              bitset ? FUTEX_WAIT_BITSET_PRIVATE : FUTEX_WAIT_PRIVATE, 0, &tmo,
                              NULL, FUTEX_BITSET_MATCH_ANY);

        tally(c, rc, errno, ETIMEDOUT);
    }
    return NULL;
}

static void *
t_futex_wait(void *p)
{
    return t_futex(p, 0);
}

static void *
t_futex_bitset(void *p)
{
    return t_futex(p, 1);
}

/* A socket with SO_RCVTIMEO, read by recv (how 0), read (1), recvfrom (2), recvmsg (3) or
 * syscall(SYS_recvmsg) (4). */
static void *
t_rcvtimeo(void *p)
{
    struct counts *c = p;
    int how = c->how;
    struct timeval tv = { 0, 25000 };
    char b;
    struct iovec iov = { &b, 1 };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
    int sv[2];

    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    for (int i = 0; i < ROUNDS; i++) {
        ssize_t rc = how == 0   ? recv(sv[0], &b, 1, 0)
                     : how == 1 ? read(sv[0], &b, 1)
                     : how == 2 ? recvfrom(sv[0], &b, 1, 0, NULL, NULL)
                     : how == 3 ? recvmsg(sv[0], &m, 0)
                                : syscall(SYS_recvmsg, sv[0], &m, 0);

        tally(c, (int)rc, errno, EAGAIN);
    }
    close(sv[0]);
    close(sv[1]);
    return NULL;
}

static void *
t_sigtimedwait(void *p)
{
    struct counts *c = p;
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    for (int i = 0; i < ROUNDS; i++) {
        int rc = sigtimedwait(&set, NULL, &wait25);

        tally(c, rc, errno, EAGAIN);
    }
    return NULL;
}

static void *
t_epoll_pwait2(void *p)
{
    struct counts *c = p;
    struct epoll_event ev;
    int ep = epoll_create1(EPOLL_CLOEXEC);

    for (int i = 0; ep >= 0 && i < ROUNDS; i++) {
        int rc = epoll_pwait2(ep, &ev, 1, &wait25, NULL);

        if (rc < 0 && errno == ENOSYS) {
            c->done = ROUNDS; /* a kernel before 5.11: the same line bare and sampled */
            break;
        }
        tally(c, rc == 0 ? -1 : rc, rc == 0 ? ETIMEDOUT : errno, ETIMEDOUT);
    }
    if (ep >= 0) {
        close(ep);
    }
    return NULL;
}

/* sem_timedwait (how 0) or sem_clockwait (1) on a semaphore nobody posts. */
static void *
t_sem_timed(void *p)
{
    struct counts *c = p;
    sem_t sem;

    sem_init(&sem, 0, 0);
    for (int i = 0; i < ROUNDS; i++) {
        struct timespec abs = in25(c->how == 0 ? CLOCK_REALTIME : CLOCK_MONOTONIC);
        int rc = c->how == 0 ? sem_timedwait(&sem, &abs)
                             : sem_clockwait(&sem, CLOCK_MONOTONIC, &abs);

        tally(c, rc, errno, ETIMEDOUT);
    }
    sem_destroy(&sem);
    return NULL;
}

/* The host's own real-time signals: SIG_WAITED is blocked everywhere and taken by sigwaitinfo;
 * SIG_HANDLED has a handler that counts it per thread. */
#define SIG_WAITED  (SIGRTMIN + 2)
#define SIG_HANDLED (SIGRTMIN + 3)

static __thread volatile sig_atomic_t handled;

static void
on_handled(int sig)
{
    (void)sig;
    handled++;
}

struct pinger {
    pthread_t target;
    int sig;
    atomic_int done;
};

/* Queues sig to target every 25 ms until done. */
static void *
pinger(void *p)
{
    struct pinger *pg = p;
    union sigval v = { 0 };

    while (!atomic_load(&pg->done)) {
        nanosleep(&wait25, NULL);
        pthread_sigqueue(pg->target, pg->sig, v);
    }
    return NULL;
}

/* ROUNDS waits that only the host's signal ends: how = 0 sigwaitinfo, 1 pause, 2 sigsuspend.
 * A return without the host's signal counts as EINTR. */
static void *
t_signal_waits(void *p)
{
    struct counts *c = p;
    int how = c->how;
    struct pinger pg = { .target = pthread_self(), .sig = how == 0 ? SIG_WAITED : SIG_HANDLED };
    sigset_t set, open;
    pthread_t th;

    sigemptyset(&set);
    sigaddset(&set, pg.sig);
    if (how == 2) {
        pthread_sigmask(SIG_BLOCK, &set, &open);
        sigdelset(&open, pg.sig);
    }
    pthread_create(&th, NULL, pinger, &pg);
    for (int i = 0; i < ROUNDS; i++) {
        sig_atomic_t before = handled;
        int rc = how == 0 ? sigwaitinfo(&set, NULL) : how == 1 ? pause() : sigsuspend(&open);

        if (how == 0) {
            tally(c, rc, errno, ETIMEDOUT);
        } else {
            tally(c, handled != before ? 0 : -1, handled != before ? 0 : errno, ETIMEDOUT);
        }
    }
    atomic_store(&pg.done, 1);
    pthread_join(th, NULL);
    return NULL;
}

/* badtimeout's calls, each given a timeout the kernel cannot read (a page mapped without access):
 * bare, EFAULT where libc passes the pointer on, a SIGSEGV where libc copies it first (each is
 * made in a child of its own, whose end is printed). */
static const char *const bad_names[] = {
    "sigtimedwait",
    "semtimedop",
    "epoll_pwait2",
    "mq_timedreceive",
    "ppoll",
    "pselect",
    "syscall(SYS_futex, FUTEX_WAIT)",
    "syscall(SYS_semtimedop)",
    "nanosleep",
    "clock_nanosleep (its error number)",
};

static long
bad_call(int k, const struct timespec *bad)
{
    struct epoll_event ev;
    struct sembuf op = { 0, -1, 0 };
    sigset_t set;
    _Atomic int word = 0;
    char b[64];
    int ep;

    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    switch (k) {
    case 0:
        return sigtimedwait(&set, NULL, bad);
    case 1:
        return semtimedop(sysv_sem, &op, 1, bad);
    case 2:
        ep = epoll_create1(0);
        return epoll_pwait2(ep, &ev, 1, bad, NULL);
    case 3:
        return mq_timedreceive(-1, b, sizeof(b), NULL, bad);
    case 4:
        return ppoll(NULL, 0, bad, NULL);
    case 5:
        return pselect(0, NULL, NULL, NULL, bad, NULL);
    case 6:
        return syscall(SYS_futex, &word, FUTEX_WAIT, 0, bad, NULL, 0);
    case 7:
        return syscall(SYS_semtimedop, sysv_sem, &op, 1L, bad);
    case 8:
        return nanosleep(bad, NULL);
    default:
        errno = clock_nanosleep(CLOCK_MONOTONIC, 0, bad, NULL);
        return errno != 0 ? -1 : 0;
    }
}

static void
bad_timeouts(void)
{
    const struct timespec *bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    for (int k = 0; k < (int)(sizeof(bad_names) / sizeof(bad_names[0])); k++) {
        pid_t pid;
        int st;

        fflush(stdout);
        pid = fork();
        if (pid == 0) {
            long rc = bad_call(k, bad);

            printf("%s of an unreadable timeout: %ld, %s\n", bad_names[k], rc,
                   rc < 0 ? strerror(errno) : "-");
            fflush(stdout);
            _exit(0);
        }
        if (pid < 0 || waitpid(pid, &st, 0) != pid) {
            perror("fork");
            exit(1);
        }
        if (WIFSIGNALED(st)) {
            printf("%s of an unreadable timeout: killed by signal %d\n", bad_names[k],
                   WTERMSIG(st));
        }
    }
}

int
main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void *(*fn)(void *);
        int how;
    } waits[] = {
        { "pselect", t_pselect, 0 },
        { "sem_timedwait", t_sem_timed, 0 },
        { "sem_wait", t_sem_wait, 0 },
        { "recv SO_RCVTIMEO", t_rcvtimeo, 0 },
        { "sigtimedwait", t_sigtimedwait, 0 },
        { "semop", t_semop, 0 },
        { "semtimedop", t_semtimedop, 0 },
        { "msgrcv", t_msgrcv, 0 },
        { "recvmmsg", t_recvmmsg, 0 },
        { "syscall recvmmsg", t_recvmmsg, 1 },
        { "mq_timedreceive", t_mq_timedreceive, 0 },
        { "syscall io_getevents", t_io_getevents, 0 },
        { "syscall futex FUTEX_WAIT", t_futex_wait, 0 },
        { "syscall futex FUTEX_WAIT_BITSET", t_futex_bitset, 0 },
        { "recvmsg SO_RCVTIMEO", t_rcvtimeo, 3 },
        { "syscall recvmsg SO_RCVTIMEO", t_rcvtimeo, 4 },
        { "read SO_RCVTIMEO", t_rcvtimeo, 1 },
        { "recvfrom SO_RCVTIMEO", t_rcvtimeo, 2 },
        { "epoll_pwait2", t_epoll_pwait2, 0 },
        { "sem_clockwait", t_sem_timed, 1 },
        { "sigwaitinfo", t_signal_waits, 0 },
        { "pause", t_signal_waits, 1 },
        { "sigsuspend", t_signal_waits, 2 },
    };
    enum { N = sizeof(waits) / sizeof(waits[0]) };
    struct counts c[N];
    pthread_t th[N], post;

    sigset_t waited;

    if (argc > 1 && strcmp(argv[1], "few") == 0) {
        recvmmsg_rounds = ROUNDS;
    }
    memset(c, 0, sizeof(c));
    sigemptyset(&waited);
    sigaddset(&waited, SIG_WAITED);
    pthread_sigmask(SIG_BLOCK, &waited, NULL); /* every thread: sigwaitinfo's alone takes it */
    signal(SIG_HANDLED, on_handled);
    sem_init(&posted, 0, 0);
    sysv_sem = semget(IPC_PRIVATE, 1, 0600);
    sysv_msg = msgget(IPC_PRIVATE, 0600);
    host_wait_go();
    if (argc > 1 && strcmp(argv[1], "badtimeout") == 0) {
        bad_timeouts();
        semctl(sysv_sem, 0, IPC_RMID);
        msgctl(sysv_msg, IPC_RMID, NULL);
        return 0;
    }
    for (int i = 0; i < N; i++) {
        c[i].name = waits[i].name;
        c[i].how = waits[i].how;
        pthread_create(&th[i], NULL, waits[i].fn, &c[i]);
    }
    pthread_create(&post, NULL, poster, NULL);
    host_burn_us(300000);
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        printf("%s: %d done, %d EINTR, %d timed out, %d other\n", c[i].name, c[i].done, c[i].eintr,
               c[i].timeout, c[i].other);
    }
    pthread_join(post, NULL);
    if (sysv_sem >= 0) {
        semctl(sysv_sem, 0, IPC_RMID);
    }
    if (sysv_msg >= 0) {
        msgctl(sysv_msg, IPC_RMID, NULL);
    }
    return 0;
}
