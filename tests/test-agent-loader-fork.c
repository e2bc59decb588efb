/* SPDX-License-Identifier: MIT */
/*
 * tests/test-agent-loader-fork.c - a fork of the host's while one of the library's threads is
 * inside a loader call that holds the loader's list lock (dl_iterate_phdr, dlopen, dlclose)
 * leaves the child's loader usable (host/dl.c): the fork waits for the call. glibc does not
 * reset that lock in the child, so before, the child's own dl_iterate_phdr waited forever (a
 * double-forking daemon's middle process hung in its agent's start, then in its next fork).
 * And the agent's fork handler, which takes the module lock, runs before the loader lock's, the
 * order the manager takes them in: a fork while the manager holds the module lock and waits for
 * the loader lock goes through.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/symbols-internal.h"
#include "host/host.h"
#include "tests/test.h"

/* How long the library's thread stays inside its loader call, waiting for the fork to return in
 * the parent: the fork waits for the call (the fix), so this bound is how long the case takes. */
#define INSIDE_MS 1500

static _Atomic int inside, fork_calling, forked, fork_seen_inside, thread_done;

static void
sleep_ms(unsigned ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

    nanosleep(&ts, NULL);
}

static int
noop_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info;
    (void)size;
    (*(int *)arg)++;
    return 0;
}

/* Inside the walk (the loader's list lock held): waits for the parent's return from fork, or
 * INSIDE_MS, whichever comes first. */
static int
hold_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info;
    (void)size;
    (void)arg;
    atomic_store(&inside, 1);
    for (int i = 0; i < INSIDE_MS && !atomic_load(&forked); i++) {
        sleep_ms(1);
    }
    atomic_store(&fork_seen_inside, atomic_load(&fork_calling));
    return 1;
}

static void *
walker_main(void *arg)
{
    (void)arg;
    host_loader_iterate(hold_cb, NULL);
    atomic_store(&thread_done, 1);
    return NULL;
}

/* Forks; the child walks the loader's list (and dlopens a library already loaded) under a 20 s
 * alarm and exits 0. Returns the child's wait status. */
static int
fork_and_walk(void)
{
    int status = 0, n = 0;
    pid_t pid;

    atomic_store(&fork_calling, 1);
    pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        void *h;

        alarm(20);
        dl_iterate_phdr(noop_cb, &n);
        h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
        _exit(n > 0 && h != NULL ? 0 : 3);
    }
    atomic_store(&forked, 1);
    ASSERT_TRUE(waitpid(pid, &status, 0) == pid);
    return status;
}

/* Runs fn on a detached thread (a joinable one the fork's child never joins is a leak to
 * ThreadSanitizer, in the child); thread_done says it returned. */
static void
start_detached(void *(*fn)(void *))
{
    pthread_attr_t a;
    pthread_t th;

    atomic_store(&thread_done, 0);
    ASSERT_OK(pthread_attr_init(&a));
    ASSERT_OK(pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED));
    ASSERT_OK(pthread_create(&th, &a, fn, NULL));
    pthread_attr_destroy(&a);
}

/* Runs fn as start_detached does, every flag cleared first, and waits until it is inside. */
static void
start_inside(void *(*fn)(void *))
{
    atomic_store(&inside, 0);
    atomic_store(&fork_calling, 0);
    atomic_store(&forked, 0);
    atomic_store(&fork_seen_inside, 0);
    start_detached(fn);
    while (!atomic_load(&inside)) {
        sleep_ms(1);
    }
}

static void
wait_thread_done(void)
{
    while (!atomic_load(&thread_done)) {
        sleep_ms(1);
    }
}

static void
expect_child_walked(int status, const char *what)
{
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
        test_fail(__FILE__, __LINE__,
                  "%s: the child's dl_iterate_phdr waited 20 s (the loader's lock stayed held "
                  "across the fork)",
                  what);
    }
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(a_fork_waits_for_the_librarys_walk_of_the_loaders_list)
{
    int status, tries;

    /* A try whose fork came after the walk (a machine too loaded to fork within INSIDE_MS)
     * proves nothing either way: tried again. */
    for (tries = 0; tries < 5; tries++) {
        start_inside(walker_main);
        status = fork_and_walk();
        wait_thread_done();
        expect_child_walked(status, "a fork during the library's walk");
        if (atomic_load(&fork_seen_inside)) {
            break;
        }
    }
    printf("# %d tries; the fork was called while the walk was inside: %d\n", tries + 1,
           atomic_load(&fork_seen_inside));
    ASSERT_TRUE(atomic_load(&fork_seen_inside));
}

/* The manager's order: the module lock, then the loader's (a walk under the module lock). */
static void *
manager_like_main(void *arg)
{
    int n = 0;

    (void)arg;
    pthread_mutex_lock(&ag_modules_mutex);
    atomic_store(&inside, 1);
    for (int i = 0; i < 200 && !atomic_load(&fork_calling); i++) {
        sleep_ms(1);
    }
    sleep_ms(50); /* the forking thread is in the prepare handlers by now, mostly */
    host_loader_iterate(noop_cb, &n);
    pthread_mutex_unlock(&ag_modules_mutex);
    atomic_store(&thread_done, 1);
    return NULL;
}

TEST(a_fork_while_the_module_lock_waits_for_the_loader_lock_goes_through)
{
    int status, n = 0;

    /* As ag_start registers them, and then its first walk. Had the loader lock's handlers been
     * registered only at that walk, after the agent's, their prepare would run first, and this
     * fork would take the loader lock and wait for the module lock held by a thread that waits
     * for the loader lock. They are registered before: at the library's start (host/fds.c's
     * first walk, in a constructor), and by ag_fork_handlers_register itself. */
    ag_fork_handlers_register();
    host_loader_iterate(noop_cb, &n);
    start_inside(manager_like_main);
    alarm(30); /* a deadlock of the prepare handlers: this process itself hangs */
    status = fork_and_walk();
    alarm(0);
    wait_thread_done();
    expect_child_walked(status, "a fork while the module lock was held");
}

/* What the SIGALRM of the cases below is waiting for: named on stderr when it comes. */
static const char *volatile alarm_what = "";

static void
on_alarm(int sig)
{
    static const char pre[] = "FAIL: ";
    size_t n = 0;

    (void)sig;
    while (alarm_what[n] != '\0') {
        n++;
    }
    (void)!write(2, pre, sizeof(pre) - 1);
    (void)!write(2, alarm_what, n);
    (void)!write(2, "\n", 1);
    _exit(1);
}

/* The manager's refresh: the module lock, the loader lock, then glibc's walk (its list lock). */
static void *
refresher_main(void *arg)
{
    (void)arg;
    atomic_store(&inside, 1);
    ASSERT_TRUE(ag_modules_refresh() >= 0);
    atomic_store(&thread_done, 1);
    return NULL;
}

/* symtab.c's load of libelf: under the module lock, a dlopen (its dl_load_lock), marked. */
static void *
opener_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ag_modules_mutex);
    atomic_fetch_add(&ag_modules_in_loader, 1);
    atomic_store(&inside, 1);
    ASSERT_TRUE(host_loader_open("libc.so.6", RTLD_NOW | RTLD_NOLOAD) != NULL);
    atomic_fetch_sub(&ag_modules_in_loader, 1);
    pthread_mutex_unlock(&ag_modules_mutex);
    atomic_store(&thread_done, 1);
    return NULL;
}

struct own_fork {
    void *(*holder)(void *); /* the library's thread that waits for the host's loader call */
    /* The host's call is a walk: glibc's list lock stays held in the child (by the forking
     * thread's old tid), so the child's dlopen is not tried there under ThreadSanitizer, whose
     * dlopen walks the loaded objects (it waited forever, as it would bare) */
    int walk_held;
    int called;
    int module_lock_held; /* by the holder, when the fork was called */
    int stuck;            /* host_loader_fork_stuck() then */
    int status;           /* the child's */
    /* The host's call is a dlopen, whose hold of dl_load_lock no counter tells: the prepare
     * handlers take its holder for stuck after their bound (1 s), not at their first look, and
     * the child takes its list lock for lost (host_loader_list_lost) */
    int timed;
    int lost; /* host_loader_list_lost() in the child, expected */
};

/* From inside the host's loader call (this thread holds one of glibc's loader locks): starts the
 * holder, gives it 300 ms to block on that lock, and forks. The child checks that the locks the
 * holder held are free in it and that the module list was dropped; its dlopen of a loaded library
 * works (after a walk's fork its dl_iterate_phdr would wait forever, bare too: glibc's list lock
 * is held there by the forking thread under its old tid). */
static void
fork_in_own_call(struct own_fork *f)
{
    pid_t pid;

    if (f->called++) {
        return;
    }
    atomic_store(&inside, 0);
    start_detached(f->holder);
    while (!atomic_load(&inside)) {
        sleep_ms(1);
    }
    sleep_ms(300);
    f->module_lock_held = pthread_mutex_trylock(&ag_modules_mutex) != 0;
    if (!f->module_lock_held) {
        pthread_mutex_unlock(&ag_modules_mutex);
    }
    f->stuck = host_loader_fork_stuck();
    alarm_what = "the fork did not return in 20 s (its prepare handlers waited for a lock held "
                 "by another thread, which waits for this thread's loader call)";
    alarm(20);
    pid = fork();
    if (pid == 0) {
        int ok;

        signal(SIGALRM, SIG_DFL);
        alarm(20);
        ok = pthread_mutex_trylock(&ag_modules_mutex) == 0;
        host_loader_enter(); /* waits forever (SIGALRM) if the child's loader lock is held */
        host_loader_leave();
        ok = ok && atomic_load(&ag_sig_modules) == NULL;
        ok = ok && (f->walk_held || dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD) != NULL);
        _exit(!ok ? 3 : host_loader_list_lost() != f->lost ? 4 : 0);
    }
    ASSERT_TRUE(pid > 0);
    alarm_what = "the child did not exit in 20 s";
    ASSERT_TRUE(waitpid(pid, &f->status, 0) == pid);
    alarm(0);
}

static void
own_fork_setup(void)
{
    signal(SIGALRM, on_alarm);
    ag_fork_handlers_register();
    ASSERT_TRUE(ag_modules_refresh() >= 0); /* a list and its snapshot, for the child to drop */
    ASSERT_TRUE(atomic_load(&ag_sig_modules) != NULL);
}

static void
own_fork_check(const struct own_fork *f)
{
    wait_thread_done(); /* the holder's call, once the host's ended */
    printf("# module lock held at the fork: %d; loader lock stuck: %d; child status %#x\n",
           f->module_lock_held, f->stuck, (unsigned)f->status);
    ASSERT_TRUE(f->called == 1 && f->module_lock_held && f->stuck == !f->timed);
    if (WIFEXITED(f->status) && WEXITSTATUS(f->status) == 4) {
        test_fail(__FILE__, __LINE__, "the child's host_loader_list_lost() was not %d", f->lost);
    }
    if (WIFSIGNALED(f->status) && WTERMSIG(f->status) == SIGALRM) {
        test_fail(__FILE__, __LINE__,
                  "the child waited 20 s for a lock (left held across the fork)");
    }
    ASSERT_TRUE(WIFEXITED(f->status) && WEXITSTATUS(f->status) == 0);
    ASSERT_TRUE(atomic_load(&ag_sig_modules) != NULL); /* the parent's list is whole */
    signal(SIGALRM, SIG_DFL);
}

static int
fork_in_walk_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info;
    (void)size;
    fork_in_own_call(arg);
    return 1;
}

TEST(a_fork_in_the_hosts_walk_while_the_manager_waits_for_it_goes_through)
{
#ifdef __SANITIZE_THREAD__
    struct own_fork f = { refresher_main, 1, 0, 0, 0, 0, 0, 1 };
#else
    struct own_fork f = { refresher_main, 0, 0, 0, 0, 0, 0, 1 };
#endif

    own_fork_setup();
    ASSERT_TRUE(dl_iterate_phdr(fork_in_walk_cb, &f) == 1);
    own_fork_check(&f);
}

static struct own_fork unload_fork = { opener_main, 0, 0, 0, 0, 0, 0, 0 };

static void
fork_in_unload(void)
{
    fork_in_own_call(&unload_fork);
}

/* own_fork_setup, then the host's dlopen of the fixture library tests/NAME (skipped without
 * PP_BINARY_DIR) */
static void *
own_fork_open(const char *name)
{
    const char *dir = getenv("PP_BINARY_DIR");
    char path[4096];
    void *h;

    if (dir == NULL) {
        test_skip("PP_BINARY_DIR is not set: the fixture library cannot be found");
    }
    snprintf(path, sizeof(path), "%s/tests/%s", dir, name);
    own_fork_setup();
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ASSERT_TRUE(h != NULL);
    return h;
}

TEST(a_fork_in_the_hosts_dlclose_while_the_library_opens_goes_through)
{
    void (**hook)(void);
    void *h = own_fork_open("libpp-dlfork-unload.so");

    hook = (void (**)(void))dlsym(h, "pp_dlfork_on_unload");
    ASSERT_TRUE(hook != NULL);
    *hook = fork_in_unload;
    ASSERT_TRUE(dlclose(h) == 0);
    own_fork_check(&unload_fork);
}

static struct own_fork load_fork = { opener_main, 0, 0, 0, 0, 0, 1, 1 };

/* Called by libpp-dlfork-load.so's constructor, which finds it by name (this program is linked
 * with -rdynamic). */
void pp_dlfork_on_load(void) __attribute__((visibility("default")));

void
pp_dlfork_on_load(void)
{
    fork_in_own_call(&load_fork);
}

/* The constructor forks inside this dlopen, while opener_main's dlopen waits for its
 * dl_load_lock under the module lock and the loader lock: the prepare handlers' bound lets the
 * fork go (before, it waited forever) */
TEST(a_fork_in_the_hosts_dlopen_while_the_library_opens_goes_through)
{
    void *h = own_fork_open("libpp-dlfork-load.so");

    own_fork_check(&load_fork);
    ASSERT_TRUE(dlclose(h) == 0);
}

static _Atomic int walker_inside, walker_done;

/* A library walk without the module lock (fds.c's lookup, the bridge's): it holds the loader
 * lock and waits for the host's walk. */
static void *
plain_walker_main(void *arg)
{
    int n = 0;

    (void)arg;
    atomic_store(&walker_inside, 1);
    host_loader_iterate(noop_cb, &n);
    atomic_store(&walker_done, 1);
    return NULL;
}

/* Another host thread's plain fork at that moment: its prepare handlers take the module lock and
 * wait for the loader lock, held by plain_walker_main. */
static void *
plain_forker_main(void *arg)
{
    pthread_attr_t a;
    pthread_t th;
    int status = 0;
    pid_t pid;

    (void)arg;
    atomic_store(&walker_inside, 0);
    atomic_store(&walker_done, 0);
    ASSERT_OK(pthread_attr_init(&a));
    ASSERT_OK(pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED));
    ASSERT_OK(pthread_create(&th, &a, plain_walker_main, NULL));
    pthread_attr_destroy(&a);
    while (!atomic_load(&walker_inside)) {
        sleep_ms(1);
    }
    sleep_ms(50); /* it holds the loader lock and waits for the list lock */
    atomic_store(&inside, 1);
    pid = fork();
    if (pid == 0) {
        _exit(0);
    }
    ASSERT_TRUE(pid > 0 && waitpid(pid, &status, 0) == pid && status == 0);
    while (!atomic_load(&walker_done)) {
        sleep_ms(1);
    }
    atomic_store(&thread_done, 1);
    return NULL;
}

TEST(a_fork_in_the_hosts_walk_while_another_fork_waits_for_the_loader_lock_goes_through)
{
    struct own_fork f = { plain_forker_main, 0, 0, 0, 0, 0, 0, 1 };

#ifdef __SANITIZE_THREAD__
    f.walk_held = 1;
#endif
    own_fork_setup();
    ASSERT_TRUE(dl_iterate_phdr(fork_in_walk_cb, &f) == 1);
    own_fork_check(&f);
}

/* A library walk that holds the loader lock and waits for the host's walk (glibc's list lock). */
static void *
library_walker_main(void *arg)
{
    int n = 0;

    (void)arg;
    atomic_store(&inside, 1);
    host_loader_iterate(noop_cb, &n);
    atomic_store(&thread_done, 1);
    return NULL;
}

/* The host's callback: a library call of its own on this thread (fds.c's lookup, the agent's
 * rescan in a dlclose) while another library walk holds the loader lock and waits for this one. */
static int
library_walk_in_walk_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    int *n = arg;

    (void)info;
    (void)size;
    if (*n != 0) {
        return 1;
    }
    atomic_store(&inside, 0);
    start_detached(library_walker_main);
    while (!atomic_load(&inside)) {
        sleep_ms(1);
    }
    sleep_ms(100); /* it holds the loader lock and waits for the list lock */
    alarm_what = "a library walk inside the host's walk waited 20 s for the loader lock, held by "
                 "a library walk that waits for the host's";
    alarm(20);
    host_loader_iterate(noop_cb, n);
    alarm(0);
    return 1;
}

TEST(a_library_walk_in_the_hosts_walk_does_not_wait_for_the_loader_lock)
{
    int n = 0;

    signal(SIGALRM, on_alarm);
    ASSERT_TRUE(dl_iterate_phdr(library_walk_in_walk_cb, &n) == 1);
    wait_thread_done();
    printf("# objects walked inside the host's walk: %d\n", n);
    ASSERT_TRUE(n > 0);
    signal(SIGALRM, SIG_DFL);
}

static const struct test_case cases[] = {
    TEST_CASE(a_fork_waits_for_the_librarys_walk_of_the_loaders_list),
    TEST_CASE(a_fork_while_the_module_lock_waits_for_the_loader_lock_goes_through),
    TEST_CASE(a_fork_in_the_hosts_walk_while_the_manager_waits_for_it_goes_through),
    TEST_CASE(a_fork_in_the_hosts_dlclose_while_the_library_opens_goes_through),
    TEST_CASE(a_fork_in_the_hosts_dlopen_while_the_library_opens_goes_through),
    TEST_CASE(a_library_walk_in_the_hosts_walk_does_not_wait_for_the_loader_lock),
    TEST_CASE(a_fork_in_the_hosts_walk_while_another_fork_waits_for_the_loader_lock_goes_through),
};

TEST_MAIN(cases)
