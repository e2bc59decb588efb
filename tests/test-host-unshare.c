/*
 * host/fds.c's record of a host thread's unshare of its fd table (close_range with
 * CLOSE_RANGE_UNSHARE; unshare(CLONE_FILES) by libc, through host/ns.c's interposer, and by
 * syscall()): a library fd open at the unshare that the library closes after it, in the
 * process's table, loses its process-wide mark, but its copy in the unsharing thread's private
 * table stays the library's there. The host thread's probes of that number answer EBADF, as
 * bare's free number does; its close answers EBADF and closes the copy; its dup2 onto it replaces
 * the copy, and the number is the host's there. Its data calls (fstatat, read, write) on such a
 * copy answer EBADF too (HOST_FD_DATA_REFUSED looks past the process-wide mark once a thread
 * unshared). The library's side is a thread of this program marked as the library's; the host's
 * side is test-host-unshare-calls.c, a shared object of its own.
 */
#include "tests/test-host-unshare.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/host.h"
#include "tests/test.h"

/* host/ns.c's unshare interposer, pulled from the server's archive into this program */
extern const char host_anchor_ns;

struct hu_run {
    /* between the library's thread and the host's: a and b open; the host thread unshared; the
     * library closed a and b in the process's table; the host thread's probes are done */
    pthread_barrier_t open, unshared, closed, done;
    int way; /* HU_CLOSE_RANGE, HU_UNSHARE, HU_SYSCALL_UNSHARE */
    int a, b, c;
    int unshare, close, left, dup2, dup_getfd, dup_close;
    int c_getfd, c_fstat, c_read, c_write;
};

/* The library's thread, alive throughout: the process's table is told from a private one by
 * comparing with it (kcmp). */
static void *
hu_library_thread(void *arg)
{
    struct hu_run *r = arg;

    host_thread_mark_library();
    r->a = host_fd_take(open("/dev/null", O_RDONLY | O_CLOEXEC));
    r->b = host_fd_take(open("/dev/null", O_RDONLY | O_CLOEXEC));
    r->c = host_fd_take(open("/dev/null", O_RDWR | O_CLOEXEC)); /* a write would succeed */
    pthread_barrier_wait(&r->open);
    pthread_barrier_wait(&r->unshared);
    close(r->a);
    close(r->b);
    close(r->c);
    pthread_barrier_wait(&r->closed);
    pthread_barrier_wait(&r->done);
    return NULL;
}

static void *
hu_host_thread(void *arg)
{
    struct hu_run *r = arg;

    pthread_barrier_wait(&r->open);
    r->unshare = hu_unshare(r->way);
    pthread_barrier_wait(&r->unshared);
    pthread_barrier_wait(&r->closed);
    r->close = hu_close(r->a);
    /* this program's fcntl is the library's call, passed as it is: the copy is gone */
    r->left = fcntl(r->a, F_GETFD) >= 0 ? 0 : -errno;
    r->dup2 = hu_dup2(0, r->b);
    r->dup_getfd = hu_getfd(r->b);
    r->dup_close = hu_close(r->b);
    r->c_getfd = hu_getfd(r->c);
    r->c_fstat = hu_fstat(r->c);
    r->c_read = hu_read(r->c);
    r->c_write = hu_write(r->c);
    pthread_barrier_wait(&r->done);
    return NULL;
}

static void
closed_after_unshare(int way)
{
    struct hu_run r = { .way = way, .a = -1, .b = -1, .c = -1 };
    pthread_t lib, host;

    ASSERT_EQ(host_anchor_ns, 1);
    ASSERT_EQ(pthread_barrier_init(&r.open, NULL, 2), 0);
    ASSERT_EQ(pthread_barrier_init(&r.unshared, NULL, 2), 0);
    ASSERT_EQ(pthread_barrier_init(&r.closed, NULL, 2), 0);
    ASSERT_EQ(pthread_barrier_init(&r.done, NULL, 2), 0);
    ASSERT_EQ(pthread_create(&lib, NULL, hu_library_thread, &r), 0);
    ASSERT_EQ(pthread_create(&host, NULL, hu_host_thread, &r), 0);
    ASSERT_EQ(pthread_join(host, NULL), 0);
    ASSERT_EQ(pthread_join(lib, NULL), 0);
    ASSERT_TRUE(r.a > 2 && r.b > 2 && r.c > 2);
    ASSERT_EQ(r.unshare, 0);
    /* the copy of a, still open in the host thread's table, is not the host's: its close answers
     * EBADF as bare's free number does, and the copy is closed */
    ASSERT_EQ(r.close, -EBADF);
    ASSERT_EQ(r.left, -EBADF);
    /* the host's dup2 onto b replaces the copy: the number is the host's there */
    ASSERT_EQ(r.dup2, 0);
    ASSERT_EQ(r.dup_getfd, 0);
    ASSERT_EQ(r.dup_close, 0);
    /* the copy of c (open for reading and writing): every call on it answers as on a free number */
    ASSERT_EQ(r.c_getfd, -EBADF);
    ASSERT_EQ(r.c_fstat, -EBADF);
    ASSERT_EQ(r.c_read, -EBADF);
    ASSERT_EQ(r.c_write, -EBADF);
    pthread_barrier_destroy(&r.open);
    pthread_barrier_destroy(&r.unshared);
    pthread_barrier_destroy(&r.closed);
    pthread_barrier_destroy(&r.done);
}

TEST(closed_after_close_range_unshare)
{
    closed_after_unshare(HU_CLOSE_RANGE);
}

TEST(closed_after_unshare_clone_files)
{
    closed_after_unshare(HU_UNSHARE);
}

TEST(closed_after_syscall_unshare_clone_files)
{
    closed_after_unshare(HU_SYSCALL_UNSHARE);
}

/*
 * host_fds_library_here() against a reference thread that exits: the reference's fd table is
 * gone while tgkill still finds the thread. The main thread of a fork()ed child is the reference
 * here and leaves by the exit system call alone (a zombie leader, found by tgkill, its table
 * gone: the window between a thread's exit_files() and its unhash, held open). A host thread of
 * the same table then asks whether the wake fd's number is the library's: it is (0). Before,
 * the answer was -EBADF ("the host's own file") and shim_exit() said "did not stop within
 * 10000 ms" at once, its session left without its end (a bash child under record --mode wall).
 */
struct hu_zombie {
    pid_t leader;
    int fd;
};

static int
hu_thread_state(pid_t tid)
{
    char path[64], buf[256], *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p[2] : 0;
}

static void *
hu_zombie_host_thread(void *arg)
{
    struct hu_zombie *z = arg;
    struct timespec ms = { 0, 1000000L };
    int i, rc;

    for (i = 0; i < 10000 && hu_thread_state(z->leader) != 'Z'; i++) {
        nanosleep(&ms, NULL);
    }
    if (hu_thread_state(z->leader) != 'Z') {
        _exit(100); /* the leader never became a zombie */
    }
    rc = host_fds_library_here(z->fd);
    _exit(rc == 0 && fcntl(z->fd, F_GETFD) >= 0 ? 0 : rc < 0 ? -rc : 101);
    return NULL;
}

TEST(library_here_reference_exiting)
{
    pid_t pid = fork();
    int st;

    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        static struct hu_zombie z;
        pthread_t host;

        host_thread_mark_library(); /* the reference: the child's first library thread */
        z.leader = getpid();
        z.fd = host_fd_take(open("/dev/null", O_RDONLY | O_CLOEXEC)); /* the wake fd's stand-in */
        if (z.fd < 0 || pthread_create(&host, NULL, hu_zombie_host_thread, &z) != 0) {
            _exit(102);
        }
        syscall(SYS_exit, 0); /* this thread only, without its destructors */
    }
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
}

/*
 * The reference thread's exit hands the reference to another live library thread (its key's
 * destructor): a host thread's private table is still told from the process's. A fork()ed
 * child's first library thread is its start thread, which exits once the agent runs: before,
 * the reference stayed its gone id, and a host thread that unshared its table and closed its copy
 * of the wake fd was taken for one of the library's table (no copy put back: libuv aborted on
 * the stop's write, as host-contract-fds-unshare-high had it before host_fds_library_here).
 */
struct hu_handover {
    pthread_barrier_t marked, first_gone, done;
    int fd;
};

static void *
hu_first_library_thread(void *arg)
{
    struct hu_handover *h = arg;

    host_thread_mark_library(); /* the reference */
    pthread_barrier_wait(&h->marked);
    return NULL; /* its destructor hands the reference over */
}

static void *
hu_second_library_thread(void *arg)
{
    struct hu_handover *h = arg;

    pthread_barrier_wait(&h->marked);
    host_thread_mark_library();
    h->fd = host_fd_take(open("/dev/null", O_RDONLY | O_CLOEXEC));
    pthread_barrier_wait(&h->first_gone);
    pthread_barrier_wait(&h->done);
    return NULL;
}

static void
hu_handover_child(void)
{
    struct hu_handover h = { .fd = -1 };
    pthread_t first, second;
    int rc;

    if (pthread_barrier_init(&h.marked, NULL, 2) != 0 ||
        pthread_barrier_init(&h.first_gone, NULL, 2) != 0 ||
        pthread_barrier_init(&h.done, NULL, 2) != 0 ||
        pthread_create(&first, NULL, hu_first_library_thread, &h) != 0 ||
        pthread_create(&second, NULL, hu_second_library_thread, &h) != 0) {
        _exit(102);
    }
    pthread_join(first, NULL);           /* gone: tgkill no longer finds it */
    pthread_barrier_wait(&h.first_gone); /* and the second thread's fd is made */
    if (h.fd < 0 || hu_unshare(HU_CLOSE_RANGE) != 0) {
        _exit(103);
    }
    (void)hu_close(h.fd); /* the host's close of its copy: EBADF, the copy closed */
    if (fcntl(h.fd, F_GETFD) >= 0) {
        _exit(104);
    }
    rc = host_fds_library_here(h.fd);
    rc = rc == 0 && fcntl(h.fd, F_GETFD) >= 0 ? 0 : rc < 0 ? -rc : 105;
    pthread_barrier_wait(&h.done);
    pthread_join(second, NULL);
    _exit(rc);
}

TEST(library_here_reference_handed_over)
{
    pid_t pid;
    long pidfd = syscall(SYS_pidfd_open, (long)syscall(SYS_gettid), O_EXCL /* PIDFD_THREAD */);
    int st;

    if (pidfd < 0) {
        test_skip("pidfd_open(PIDFD_THREAD) refused (%s): no copy to put back", strerror(errno));
    }
    close((int)pidfd);
    pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        hu_handover_child();
    }
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
}

static const struct test_case cases[] = {
    TEST_CASE(closed_after_close_range_unshare),
    TEST_CASE(closed_after_unshare_clone_files),
    TEST_CASE(closed_after_syscall_unshare_clone_files),
    TEST_CASE(library_here_reference_exiting),
    TEST_CASE(library_here_reference_handed_over),
};

TEST_MAIN(cases)
