/*
 * host/fds.c's record of a host thread's unshare (close_range with CLOSE_RANGE_UNSHARE): a
 * library fd open at the unshare that the library closes after it, in the process's table,
 * loses its process-wide mark, but its copy in the unsharing thread's private table stays the
 * library's there. The host thread's probes of that number answer EBADF, as bare's free number
 * does; its close answers EBADF and closes the copy; its dup2 onto it replaces the copy, and the
 * number is the host's there. The data calls (fcntl, fstat, read, write) look at the process-wide
 * mark only (host_fd_is_library), so they are not asserted here: they reach the copy.
 * The library's side is a thread of this program marked as the library's; the host's side is
 * test-host-unshare-calls.c, a shared object of its own.
 */
#include "tests/test-host-unshare.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "host/host.h"
#include "tests/test.h"

struct hu_run {
    /* between the library's thread and the host's: a and b open; the host thread unshared; the
     * library closed a and b in the process's table; the host thread's probes are done */
    pthread_barrier_t open, unshared, closed, done;
    int a, b;
    int unshare, close, left, dup2, dup_getfd, dup_close;
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
    pthread_barrier_wait(&r->open);
    pthread_barrier_wait(&r->unshared);
    close(r->a);
    close(r->b);
    pthread_barrier_wait(&r->closed);
    pthread_barrier_wait(&r->done);
    return NULL;
}

static void *
hu_host_thread(void *arg)
{
    struct hu_run *r = arg;

    pthread_barrier_wait(&r->open);
    r->unshare = hu_unshare();
    pthread_barrier_wait(&r->unshared);
    pthread_barrier_wait(&r->closed);
    r->close = hu_close(r->a);
    /* this program's fcntl is the library's call, passed as it is: the copy is gone */
    r->left = fcntl(r->a, F_GETFD) >= 0 ? 0 : -errno;
    r->dup2 = hu_dup2(0, r->b);
    r->dup_getfd = hu_getfd(r->b);
    r->dup_close = hu_close(r->b);
    pthread_barrier_wait(&r->done);
    return NULL;
}

TEST(closed_after_unshare)
{
    struct hu_run r = { .a = -1, .b = -1 };
    pthread_t lib, host;

    ASSERT_EQ(pthread_barrier_init(&r.open, NULL, 2), 0);
    ASSERT_EQ(pthread_barrier_init(&r.unshared, NULL, 2), 0);
    ASSERT_EQ(pthread_barrier_init(&r.closed, NULL, 2), 0);
    ASSERT_EQ(pthread_barrier_init(&r.done, NULL, 2), 0);
    ASSERT_EQ(pthread_create(&lib, NULL, hu_library_thread, &r), 0);
    ASSERT_EQ(pthread_create(&host, NULL, hu_host_thread, &r), 0);
    ASSERT_EQ(pthread_join(host, NULL), 0);
    ASSERT_EQ(pthread_join(lib, NULL), 0);
    ASSERT_TRUE(r.a > 2 && r.b > 2);
    ASSERT_EQ(r.unshare, 0);
    /* the copy of a, still open in the host thread's table, is not the host's: its close answers
     * EBADF as bare's free number does, and the copy is closed */
    ASSERT_EQ(r.close, -EBADF);
    ASSERT_EQ(r.left, -EBADF);
    /* the host's dup2 onto b replaces the copy: the number is the host's there */
    ASSERT_EQ(r.dup2, 0);
    ASSERT_EQ(r.dup_getfd, 0);
    ASSERT_EQ(r.dup_close, 0);
    pthread_barrier_destroy(&r.open);
    pthread_barrier_destroy(&r.unshared);
    pthread_barrier_destroy(&r.closed);
    pthread_barrier_destroy(&r.done);
}

static const struct test_case cases[] = {
    TEST_CASE(closed_after_unshare),
};

TEST_MAIN(cases)
