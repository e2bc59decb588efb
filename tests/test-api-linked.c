/* SPDX-License-Identifier: MIT */
/*
 * tests/test-api-linked.c - include/pipeprof.h in a program linked with libpipeprof.so:
 * pipeprof_start() records this process into a file, pipeprof_stop() ends it with the rundown,
 * and the file holds ThreadSamples whose stacks `pipeprof report` names, the busy function on
 * top. Also the API's refusals: a second start, a stop without a start, bad options; and, in an
 * ASan build, a fork()ed child's session on its parent's thread stacks (host_thread_spawn) and a
 * thread started on a stack with stale redzones (host_trampoline).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "include/pipeprof.h"
#include "tests/test.h"

/* Burns seconds of this thread's CPU time (not of wall time: 0.8 s of it held 19 samples at 250
 * Hz at load 20, the thread on the CPU a tenth of the time). */
__attribute__((noinline)) static unsigned long
api_busy_function(double seconds)
{
    struct timespec t0, t;
    unsigned long x = 1;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do {
        int i;

        for (i = 0; i < 100000; i++) {
            x = x * 6364136223846793005UL + 1442695040888963407UL;
        }
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
    return x;
}

#if defined(__SANITIZE_THREAD__)
/* Said where the test's output shows: tests/ipc.cmake preloads the library under TSan. */
__attribute__((constructor)) static void
api_tsan_note(void)
{
    const char *pre = getenv("LD_PRELOAD");

    printf("# under ThreadSanitizer: libpipeprof.so preloaded ahead of libtsan (LD_PRELOAD=%s): "
           "linked, libtsan comes first and its start-up calls the library's instrumented "
           "sigaction (tests/ipc.cmake)\n",
           pre != NULL ? pre : "(unset)");
}
#endif

TEST(records_named_stacks_into_a_file)
{
    struct pipeprof_options opts = { PIPEPROF_MODE_CPU, 250 };
    char path[128], cmd[512], line[512];
    int found = 0, samples = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/tmp/pp-api-%d.nettrace", (int)getpid());
    ASSERT_OK(pipeprof_start(&opts, path));
    ASSERT_EQ(pipeprof_start(&opts, path), -EBUSY);
    ASSERT_TRUE(api_busy_function(0.8) != 0);
    ASSERT_OK(pipeprof_stop());
    ASSERT_EQ(pipeprof_stop(), -ESRCH);

    snprintf(cmd, sizeof(cmd), "%s/bin/pipeprof report --top 3 %s",
             getenv("PP_BINARY_DIR") ? getenv("PP_BINARY_DIR") : "build", path);
    f = popen(cmd, "r");
    ASSERT_TRUE(f != NULL);
    while (fgets(line, sizeof(line), f) != NULL) {
        fputs(line, stdout);
        if (sscanf(line, "samples: %d", &samples) == 1) {
            continue;
        }
        if (strstr(line, "!api_busy_function") != NULL) {
            found = 1;
        }
    }
    ASSERT_EQ(pclose(f), 0);
    ASSERT_TRUE(samples >= 20); /* 0.8 s of CPU at a tick-bound rate */
    ASSERT_TRUE(found);
    unlink(path);
}

TEST(rejects_bad_options_and_paths)
{
    struct pipeprof_options bad_mode = { (enum pipeprof_mode)7, 0 };
    struct pipeprof_options bad_hz = { PIPEPROF_MODE_WALL, 5000 };

    ASSERT_EQ(pipeprof_start(&bad_mode, "/tmp/pp-api-bad.nettrace"), -EINVAL);
    ASSERT_EQ(pipeprof_start(&bad_hz, "/tmp/pp-api-bad.nettrace"), -EINVAL);
    ASSERT_EQ(pipeprof_start(NULL, "/nonexistent-dir/x.nettrace"), -ENOENT);
    ASSERT_EQ(pipeprof_stop(), -ESRCH);
}

#if defined(__SANITIZE_ADDRESS__)
#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <stdatomic.h>
#include <sys/wait.h>

#define LIVE_THREADS 6

static _Atomic int live_ready, live_stop;

/* Marks ASan's shadow of most of this thread's stack below its frame as redzones, as deep
 * instrumented frames mark it while they run, and waits to be told to stop. */
static void *
live_frames_main(void *arg)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0), from = 0, to = 0;
    pthread_attr_t attr;
    void *lo = NULL;
    size_t size = 0;

    (void)arg;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        (void)pthread_attr_getstack(&attr, &lo, &size);
        pthread_attr_destroy(&attr);
    }
    from = (uintptr_t)lo + 65536;
    to = sp - 16384;
    if (lo != NULL && to > from) {
        __asan_poison_memory_region((void *)from, to - from);
    }
    atomic_fetch_add(&live_ready, 1);
    while (!atomic_load(&live_stop)) {
        usleep(1000);
    }
    if (lo != NULL && to > from) {
        __asan_unpoison_memory_region((void *)from, to - from);
    }
    return NULL;
}
#endif

/* A fork()ed child's session: glibc gives its library threads (the agent's manager, started
 * past ASan's interceptor) the stacks of the parent's other threads, whose shadow still marks
 * their frames; the session runs with no ASan report (output-file's fork case had one, in the
 * manager's dl_iterate_phdr: host/threads.c). */
TEST(a_forked_childs_session_runs_on_its_parents_thread_stacks)
{
#if defined(__SANITIZE_ADDRESS__)
    struct pipeprof_options opts = { PIPEPROF_MODE_CPU, 250 };
    pthread_t th[LIVE_THREADS];
    char path[128];
    int i, status = 0;
    pid_t pid;

    for (i = 0; i < LIVE_THREADS; i++) {
        ASSERT_OK(pthread_create(&th[i], NULL, live_frames_main, NULL));
    }
    while (atomic_load(&live_ready) < LIVE_THREADS) {
        usleep(1000);
    }
    pid = fork();
    if (pid == 0) {
        snprintf(path, sizeof(path), "/tmp/pp-api-fork-%d.nettrace", (int)getpid());
        if (pipeprof_start(&opts, path) != 0 || api_busy_function(0.3) == 0 ||
            pipeprof_stop() != 0) {
            _exit(2);
        }
        unlink(path);
        _exit(0);
    }
    atomic_store(&live_stop, 1);
    for (i = 0; i < LIVE_THREADS; i++) {
        ASSERT_OK(pthread_join(th[i], NULL));
    }
    ASSERT_TRUE(pid > 0);
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    printf("# the child's status: %#x\n", (unsigned)status);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#else
    test_skip("not an ASan build: a stack's shadow exists only there");
#endif
}

#if defined(__SANITIZE_ADDRESS__)
#include <sys/mman.h>

#define STALE_STACK_SIZE (1u << 20)

static _Atomic int stale_ran;

__attribute__((noinline)) static void *
api_stale_stack_main(void *arg)
{
    (void)arg;
    atomic_store(&stale_ran, api_busy_function(0.05) != 0);
    return NULL;
}
#endif

/* A thread the program starts through ASan's interceptor while a session runs, on a stack whose
 * shadow still marks an earlier thread's frames as redzones (what glibc's stack cache hands a
 * fork()ed child's thread, cli-record-daemon's daemon's libuv thread: here a stack of the test's
 * own, marked by hand). The interceptor calls the library's pthread_create, whose start hook walks
 * the new thread's root frames before the interceptor's start routine clears the shadow: the
 * daemon's had a stack-buffer-overflow reported on thread T-1, writing the unwinder's locals;
 * here, without host_trampoline's clearing, a use-after-poison in ag_sig_unwind_ctx_init writing
 * the walk's context (5 runs of 5; the poison here is not a stack redzone's). */
TEST(a_thread_started_on_a_stack_with_stale_redzones_is_walked_cleanly)
{
#if defined(__SANITIZE_ADDRESS__)
    struct pipeprof_options opts = { PIPEPROF_MODE_WALL, 250 };
    pthread_attr_t attr;
    pthread_t th;
    char path[128];
    void *stack;

    stack = mmap(NULL, STALE_STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                 0);
    ASSERT_TRUE(stack != MAP_FAILED);
    snprintf(path, sizeof(path), "/tmp/pp-api-stale-%d.nettrace", (int)getpid());
    ASSERT_OK(pipeprof_start(&opts, path));
    __asan_poison_memory_region(stack, STALE_STACK_SIZE);
    ASSERT_OK(pthread_attr_init(&attr));
    ASSERT_OK(pthread_attr_setstack(&attr, stack, STALE_STACK_SIZE));
    ASSERT_OK(pthread_create(&th, &attr, api_stale_stack_main, NULL));
    ASSERT_OK(pthread_join(th, NULL));
    ASSERT_OK(pthread_attr_destroy(&attr));
    ASSERT_OK(pipeprof_stop());
    ASSERT_TRUE(atomic_load(&stale_ran));
    __asan_unpoison_memory_region(stack, STALE_STACK_SIZE);
    ASSERT_OK(munmap(stack, STALE_STACK_SIZE));
    unlink(path);
#else
    test_skip("not an ASan build: a stack's shadow exists only there");
#endif
}

static const struct test_case cases[] = {
    TEST_CASE(records_named_stacks_into_a_file),
    TEST_CASE(rejects_bad_options_and_paths),
    TEST_CASE(a_forked_childs_session_runs_on_its_parents_thread_stacks),
    TEST_CASE(a_thread_started_on_a_stack_with_stale_redzones_is_walked_cleanly),
};
TEST_MAIN(cases)
