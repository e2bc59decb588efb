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

static const struct test_case cases[] = {
    TEST_CASE(closed_after_close_range_unshare),
    TEST_CASE(closed_after_unshare_clone_files),
    TEST_CASE(closed_after_syscall_unshare_clone_files),
};

TEST_MAIN(cases)
