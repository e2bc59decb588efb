/* tests/test-agent-resources.c - what the agent holds of the host's resources (docs/
 * architecture.md, "Resources"): wall mode opens no fd per thread and touches only the ring
 * slots its backlog needs; its thread and memory leave with the last wall session; passes the
 * wall thread could not make are counted as lost, per thread; rings stay mapped after a stop;
 * and sessions started and stopped in a loop while host threads mask the sampling signal, block
 * and take a host signal whose handler does the same; a host thread started during a session
 * allocates nothing at its start. Built with frame pointers; pp_agent's interposers apply here. */
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/internal.h"
#include "tests/agent-wait.h"
#include "tests/test.h"

static void
start_agent(void)
{
    struct ag_config cfg;

    ag_config_init(&cfg);
    cfg.scan_ms = 20;
    if (ag_start(&cfg) != 0) {
        fprintf(stderr, "ag_start failed\n");
        abort();
    }
}

/* ---- host threads that sleep until told ---- */

static _Atomic int sleepers_stop;
static _Atomic unsigned sleepers_started;
static _Atomic int32_t sleeper_tids[512]; /* start_threads' n at most */

static void *
sleeper_main(void *arg)
{
    atomic_store((_Atomic int32_t *)arg, (int32_t)syscall(SYS_gettid));
    atomic_fetch_add(&sleepers_started, 1);
    while (!atomic_load(&sleepers_stop)) {
        usleep(20000);
    }
    return NULL;
}

/* Sleeps by raw system calls, which no interposer sees: the wall thread reads their state
 * every pass. */
static void *
raw_sleeper_main(void *arg)
{
    atomic_store((_Atomic int32_t *)arg, (int32_t)syscall(SYS_gettid));
    atomic_fetch_add(&sleepers_started, 1);
    while (!atomic_load(&sleepers_stop)) {
        struct timespec ts = { 0, 20000000 };

        syscall(SYS_nanosleep, &ts, NULL);
    }
    return NULL;
}

static int
start_threads(pthread_t *th, unsigned n, void *(*fn)(void *))
{
    pthread_attr_t attr;
    unsigned i;
    int rc = 0;

    if (n > sizeof(sleeper_tids) / sizeof(sleeper_tids[0])) {
        return -EINVAL;
    }
    atomic_store(&sleepers_stop, 0);
    atomic_store(&sleepers_started, 0);
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (i = 0; i < n && rc == 0; i++) {
        atomic_store(&sleeper_tids[i], 0);
        rc = pthread_create(&th[i], &attr, fn, (void *)&sleeper_tids[i]);
    }
    pthread_attr_destroy(&attr);
    /* Each one running, then registered (by the interposer's trampoline or a scan): a created
     * thread a loaded machine has not run yet is found by a scan later, or registers itself
     * later, and has had no interval before (40 of 300 came 146 ms after the session's first
     * pass at load 25, with 200 ms to start in). */
    for (i = 0; rc == 0 && i < 2000 && atomic_load(&sleepers_started) < n; i++) {
        usleep(5000);
    }
    rc = rc != 0 ? rc : atomic_load(&sleepers_started) < n ? -ETIMEDOUT : 0;
    for (i = 0; rc == 0 && i < n; i++) {
        rc = test_agent_wait_thread(&sleeper_tids[i], 0);
    }
    return rc;
}

static int
start_sleepers(pthread_t *th, unsigned n)
{
    return start_threads(th, n, sleeper_main);
}

static void
stop_sleepers(pthread_t *th, unsigned n)
{
    unsigned i;

    atomic_store(&sleepers_stop, 1);
    for (i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
    }
}

/* ---- what the process holds ---- */

static unsigned
count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    unsigned n = 0;

    while (d != NULL && (de = readdir(d)) != NULL) {
        n += de->d_name[0] != '.';
    }
    if (d != NULL) {
        closedir(d);
        n--; /* the directory's own */
    }
    return n;
}

/* Threads of this process named name. */
static unsigned
count_threads_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *de;
    unsigned n = 0;

    while (d != NULL && (de = readdir(d)) != NULL) {
        char path[300], comm[32] = "";
        FILE *f;

        if (de->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
        f = fopen(path, "re");
        if (f != NULL) {
            if (fgets(comm, sizeof(comm), f) != NULL) {
                comm[strcspn(comm, "\n")] = '\0';
            }
            fclose(f);
        }
        n += strcmp(comm, name) == 0;
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

/* Resident pages of a ring's mapping, or -1 when it is not mapped. */
static int
ring_resident_pages(const struct ag_ring *r)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t pages, i;
    unsigned char *vec;
    int n = 0;

    if (r->slots == NULL) {
        return -1;
    }
    pages = (r->map_len + (size_t)page - 1) / (size_t)page;
    vec = calloc(pages, 1);
    if (vec == NULL || mincore(r->slots, r->map_len, vec) != 0) {
        free(vec);
        return -1;
    }
    for (i = 0; i < pages; i++) {
        n += vec[i] & 1;
    }
    free(vec);
    return n;
}

/* ---- a consumer: samples and losses per thread, and the largest batch of one ring ---- */

#define MAX_TIDS 512

struct per_tid {
    int32_t tid;
    unsigned samples, batch, max_batch;
    uint64_t intervals; /* the wall samples' weights: the intervals they stand for */
    uint64_t lost, unsampled;
};

static struct per_tid seen[MAX_TIDS];

static struct per_tid *
seen_get(int32_t tid)
{
    unsigned i;

    for (i = 0; i < MAX_TIDS; i++) {
        if (seen[i].tid == tid || seen[i].tid == 0) {
            seen[i].tid = tid;
            return &seen[i];
        }
    }
    return &seen[MAX_TIDS - 1];
}

static int
seen_record(const struct ag_record *rec, void *ctx)
{
    struct per_tid *p = seen_get(rec->tid);

    (void)ctx;
    if (rec->kind == AG_RECORD_SAMPLE && rec->u.sample->mode == AG_MODE_WALL) {
        p->samples++;
        p->intervals += rec->u.sample->weight;
        p->batch++;
        p->max_batch = p->batch > p->max_batch ? p->batch : p->max_batch;
    } else if (rec->kind == AG_RECORD_LOST) {
        p->lost += rec->u.lost;
        p->unsampled += rec->unsampled;
    }
    return 0;
}

/* Of the first n sleepers, how many have a wall sample in seen. */
static unsigned
sleepers_sampled(unsigned n)
{
    unsigned i, k, got = 0;

    for (i = 0; i < n; i++) {
        int32_t tid = atomic_load(&sleeper_tids[i]);

        for (k = 0; k < MAX_TIDS && seen[k].tid != 0; k++) {
            if (seen[k].tid == tid) {
                got += seen[k].samples > 0;
                break;
            }
        }
    }
    return got;
}

static void
seen_drain(void)
{
    unsigned i;

    for (i = 0; i < MAX_TIDS; i++) {
        seen[i].batch = 0;
    }
    if (ag_drain(seen_record, NULL) < 0) {
        abort();
    }
}

/*
 * 64 sleeping threads sampled in wall mode at 1000 Hz: the process holds no more fds than the
 * wall thread's bounded cache of stat files and a few (was two per thread: 128 here, and 1000
 * threads under `ulimit -n 1024` left the host none), a wall ring touches the pages of its largest
 * backlog (was every slot in turn: 68 pages), and the wall thread and the rings' memory go when the
 * session ends (were kept until ag_stop).
 */
TEST(wall_holds_no_fd_per_thread_and_leaves_with_its_session)
{
    enum { N = 64 };
    pthread_t th[N];
    unsigned fds_before, fds_max = 0, i, k, max_batch = 0, sampled = 0, over = 0;
    int worst_pages = 0;
    long page = sysconf(_SC_PAGESIZE);

    memset(seen, 0, sizeof(seen));
    start_agent();
    ASSERT_OK(start_sleepers(th, N)); /* registered by the scan or the interposer */
    fds_before = count_fds();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_WALL, 1000));
    /* 40 drains at least, and on until half the threads have a wall sample (the wall thread of a
     * loaded machine may make few passes in 0.4 s): 60 s for none */
    for (k = 0; k < 40 || (k < 6000 && sleepers_sampled(N) < N / 2); k++) {
        unsigned fds;

        usleep(10000);
        fds = count_fds();
        fds_max = fds > fds_max ? fds : fds_max;
        seen_drain();
    }
    ASSERT_EQ(count_threads_named("pipeprof-wall"), 1);
    for (i = 0; i < atomic_load(&ag.high); i++) {
        struct ag_thread *t = &ag.threads[i];
        struct per_tid *p;
        unsigned batch;
        int pages;

        if (atomic_load(&t->state) != AG_SLOT_ACTIVE || atomic_load(&t->excluded)) {
            continue;
        }
        p = seen_get(atomic_load(&t->tid));
        pages = ring_resident_pages(&t->wring);
        /* The backlog the wall thread wrote since the last drain touched pages too (a slow pass
         * under TSan, or this thread held up on a loaded machine): read after the pages, so that
         * it holds every sample they saw. The drain leaves a ring at its first slot. */
        batch = (unsigned)(atomic_load(&t->wring.head) - atomic_load(&t->wring.tail));
        batch = p->max_batch > batch ? p->max_batch : batch;
        if (p->samples > 0) {
            sampled++;
        }
        /* The ring's pages hold its largest backlog and the slot after it, plus one page the
         * lap move may leave partly behind. */
        if (pages > 0 &&
            (size_t)pages * (size_t)page > (batch + 2) * t->wring.slot_size + 2 * (size_t)page) {
            printf("# thread %d: %d resident pages, largest batch %u\n", (int)p->tid, pages, batch);
            over++;
        }
        worst_pages = pages > worst_pages ? pages : worst_pages;
        max_batch = batch > max_batch ? batch : max_batch;
    }
    ASSERT_OK(ag_sampling_release(AG_MODE_WALL, 1000));
    seen_drain();
    {
        size_t slot = 0;
        int after = 0;

        for (i = 0; i < atomic_load(&ag.high); i++) {
            int pages = ring_resident_pages(&ag.threads[i].wring);

            after += pages > 0 ? pages : 0;
            slot = ag.threads[i].wring.slot_size != 0 ? ag.threads[i].wring.slot_size : slot;
        }
        printf("# fds %u before, at most %u during; %u threads sampled, largest batch %u, worst "
               "wall ring %d resident pages of %zu-byte slots; %d pages left after the session\n",
               fds_before, fds_max, sampled, max_batch, worst_pages, slot, after);
        ASSERT_TRUE(sampled >= N / 2);
        ASSERT_EQ(over, 0);
        if (test_emulated()) {
            /* qemu-user 7.2 answers madvise() with success and does nothing (a hint it may
             * ignore), so a ring's pages stay resident after MADV_DONTNEED there. */
            printf("# NOTE (loud): emulated: the pages left after the session are not checked\n");
        } else {
            ASSERT_EQ(after, 0);
        }
    }
    /* and the thread scan's comm files (AG_NAME_CACHE), which a scan after fds_before may open
     * (the agent's, bounded; closed at ag_stop) */
    ASSERT_TRUE(fds_max <= fds_before + 2 * AG_WALL_STAT_CACHE + AG_NAME_CACHE + 4);
    ASSERT_EQ(count_threads_named("pipeprof-wall"), 0);
    /* the cache went with the wall thread */
    ASSERT_TRUE(count_fds() <= fds_before + AG_NAME_CACHE + 1);
    stop_sleepers(th, N);
    ag_stop();
}

/*
 * 300 threads asleep in raw system calls at 1000 Hz: a pass reads every one's state, longer
 * than an interval here, so many intervals go without a sample. Each thread's samples and its
 * LOST records add up to the intervals of the session (before: 35.8 samples per thread-second
 * of 100 were reported with 0 lost); the records' unsampled part is the agent's wall_unsampled.
 */
TEST(wall_counts_the_intervals_it_could_not_sample)
{
    enum { N = 300 };
    static pthread_t th[N];
    struct ag_stats st;
    uint64_t t0, t1, samples = 0, lost = 0, unsampled = 0;
    unsigned i;

    memset(seen, 0, sizeof(seen));
    start_agent();
    ASSERT_OK(start_threads(th, N, raw_sleeper_main)); /* each registered */
    seen_drain();
    memset(seen, 0, sizeof(seen));
    t0 = ag_now_ns();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_WALL, 1000));
    /* The session is 0.4 s of the wall thread's passes: from its first (ag.wall_first_ns) to one
     * that began 0.4 s later (ag.wall_last_ns), as long as the machine takes to give it them.
     * A pass that began goes over every thread before the release ends the wall thread. */
    for (i = 0; i < 4000 && atomic_load(&ag.wall_first_ns) == 0; i++) {
        usleep(5000);
    }
    ASSERT_TRUE(atomic_load(&ag.wall_first_ns) != 0);
    for (i = 0; i < 20 || (i < 4000 && atomic_load(&ag.wall_last_ns) <
                                               atomic_load(&ag.wall_first_ns) + 400000000u);
         i++) {
        usleep(20000);
        seen_drain();
    }
    ASSERT_TRUE(atomic_load(&ag.wall_last_ns) >= atomic_load(&ag.wall_first_ns) + 400000000u);
    ASSERT_OK(ag_sampling_release(AG_MODE_WALL, 1000));
    t1 = ag_now_ns();
    /* Its last pass may still be counting as the release returns (a slow pass under TSan on a
     * loaded machine counted 21 intervals after the drain): read both once the wall thread is
     * gone. */
    for (i = 0; i < 1000 && count_threads_named("pipeprof-wall") != 0; i++) {
        usleep(5000);
    }
    seen_drain();
    ag_stats_get(&st);
    for (i = 0; i < MAX_TIDS && seen[i].tid != 0; i++) {
        samples += seen[i].intervals;
        lost += seen[i].lost;
        unsampled += seen[i].unsampled;
    }
    printf("# %u threads, %.0f ms at 1000 Hz: %llu intervals in wall samples, %llu lost (%llu "
           "unsampled "
           "intervals); %.1f%% of %u thread-intervals accounted for\n",
           N, (double)(t1 - t0) / 1e6, (unsigned long long)samples, (unsigned long long)lost,
           (unsigned long long)st.wall_unsampled,
           100.0 * (double)(samples + lost) / ((double)N * (double)(t1 - t0) / 1e6),
           (unsigned)(N * (t1 - t0) / 1000000u));
    ASSERT_TRUE(st.wall_unsampled <= st.lost);
    /* The LOST records tell the missed intervals apart (no sample was taken, none dropped): a
     * nettrace's sequence gaps leave them out. */
    ASSERT_U64_EQ(unsampled, st.wall_unsampled);
    ASSERT_TRUE(unsampled <= lost);
    /* Every interval of the wall sampler's is there, and none twice. Its intervals begin at its
     * first pass (ag.wall_first_ns; an HTTP recording's window too, bridge/http-source.c), not
     * at the request: under TSan the wall thread's creation alone took 2 to 14 ms at load 17
     * here, every thread going without a sample meanwhile, and the intervals counted from t0
     * held 96.6 % at worst (83.0 % in a CI run, 85 % was required); the shortfall was that delay
     * times N within 10 % in 54 runs. A thread's intervals are counted at the wall thread's
     * visits, so those after its last visit are not: up to that visit (wall_seen_ns, or the
     * last pass's slot when a handler took the last pass's signal later), every one is, but for
     * the one its last visit stands for, one whose signal no handler took yet (under TSan a
     * signal waits for an interceptor) and a visit that found it waking (no sample, not
     * counted): 3 a thread. */
    {
        uint64_t visited = 0, accounted = 0, first = atomic_load(&ag.wall_first_ns);
        uint64_t end = atomic_load(&ag.wall_last_ns) + 1000000u;
        unsigned high = atomic_load(&ag.high);

        for (i = 0; first != 0 && i < high && i < ag.cfg.max_threads; i++) {
            int32_t tid = atomic_load(&ag.threads[i].tid);
            uint64_t seen_ns = atomic_load(&ag.threads[i].wall_seen_ns);

            seen_ns = seen_ns < end ? seen_ns : end;
            for (unsigned k = 0; tid != 0 && k < MAX_TIDS && seen[k].tid != 0; k++) {
                if (seen[k].tid == tid && seen_ns > first) {
                    visited += (seen_ns - first) / 1000000u;
                    accounted += seen[k].intervals + seen[k].lost;
                    break;
                }
            }
        }
        printf("# from the first pass (%.1f ms after the request) to each thread's last visit: "
               "%llu thread-intervals, %llu accounted for (%.2f%%)\n",
               first != 0 ? (double)(first - t0) / 1e6 : -1.0, (unsigned long long)visited,
               (unsigned long long)accounted,
               visited != 0 ? 100.0 * (double)accounted / (double)visited : 0.0);
        /* Each thread visited by the pass 0.4 s into the session (a starved wall thread with
         * no pass but its first, a 0.4 s window from the request, was seen once in about 150
         * runs at load 28) */
        ASSERT_TRUE(visited >= (uint64_t)N * 400u);
        ASSERT_TRUE(accounted + 3u * N >= visited);
    }
    ASSERT_TRUE((double)(samples + lost) <= 1.1 * (double)N * (double)(t1 - t0) / 1e6);
    stop_sleepers(th, N);
    ag_stop();
}

/* ---- a running thread whose sampling signal stays pending ---- */

struct masked_burner {
    uint64_t start_ns; /* CLOCK_MONOTONIC, when it began */
    _Atomic int32_t tid;
    int go_pipe[2];    /* written when it may begin */
    int burnt_pipe[2]; /* written when it has burnt */
    int stop_pipe[2];  /* written when it may go */
};

static void
burn_until_ns(uint64_t end)
{
    volatile uint64_t x = 1;

    while (ag_now_ns() < end) {
        for (int i = 0; i < 20000; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
        }
    }
}

/* Waits to be told to begin, runs 300 ms with the sampling signal blocked by a raw rt_sigprocmask
 * (no interposer sees it), then 100 ms with it open, then sleeps in a raw read until told (so that
 * the session ends before it does: the slot of a thread gone is visited until the scan sees it
 * gone). */
static void *
masked_burner_main(void *arg)
{
    struct masked_burner *b = arg;
    sigset_t prof;
    char c;

    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    atomic_store(&b->tid, (int32_t)syscall(SYS_gettid));
    syscall(SYS_read, b->go_pipe[0], &c, 1); /* until the agent knows it and the session began */
    b->start_ns = ag_now_ns();
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &prof, NULL, (long)(_NSIG / 8));
    burn_until_ns(b->start_ns + 300000000u);
    syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &prof, NULL, (long)(_NSIG / 8));
    burn_until_ns(b->start_ns + 400000000u);
    c = 'b';
    syscall(SYS_write, b->burnt_pipe[1], &c, 1);
    syscall(SYS_read, b->stop_pipe[0], &c, 1); /* asleep until told, all the time */
    return NULL;
}

/*
 * A running thread is sampled by its handler on the wall thread's signal, a standard signal:
 * the kernel merges the passes' signals sent while one is pending (here the thread blocks it for
 * 300 ms; on a loaded machine, a runnable thread not scheduled for an interval) into one sample.
 * Each pass that finds its last signal not yet taken counts an interval lost: the thread's
 * samples and LOST records add up to its intervals in the session (before: 21 of 80 at 200 Hz;
 * a pprof recording of 100 x 10 ms over HTTP at load 17 had 195 of 297 intervals accounted).
 */
TEST(wall_counts_the_passes_whose_signal_merged)
{
    struct masked_burner b = { 0 };
    pthread_t th;
    struct per_tid *p;
    uint64_t session_ns, end_ns, gone_ns;
    double intervals, got;
    char c;

#ifdef __SANITIZE_THREAD__
    /* TSan takes the signal for the thread and runs the handler at the thread's next call it
     * intercepts, which the burn does not make: what is counted is TSan's queue, not the
     * kernel's merge. */
    test_skip("under ThreadSanitizer, which holds the wall signals back (it runs in the -Werror "
              "and ASan builds)");
#endif
    memset(seen, 0, sizeof(seen));
    start_agent();
    ASSERT_EQ(pipe(b.go_pipe), 0);
    ASSERT_EQ(pipe(b.stop_pipe), 0);
    ASSERT_EQ(pipe(b.burnt_pipe), 0);
    ASSERT_EQ(pthread_create(&th, NULL, masked_burner_main, &b), 0);
    /* Counted from when the agent knows the thread (its scan may be late on a loaded machine:
     * 10 of 82 intervals were accounted for when the count began at the thread's start). */
    ASSERT_OK(test_agent_wait_thread(&b.tid, 0));
    session_ns = ag_now_ns();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_WALL, 200));
    /* The session's intervals begin at the wall thread's first pass (ag.wall_first_ns), 30 to
     * 52 ms after the request in some runs beside busy loops: the burner begins after it. */
    for (int i = 0; i < 4000 && atomic_load(&ag.wall_first_ns) == 0; i++) {
        usleep(5000);
    }
    ASSERT_TRUE(atomic_load(&ag.wall_first_ns) != 0);
    ASSERT_EQ(write(b.go_pipe[1], "g", 1), 1);
    ASSERT_EQ(read(b.burnt_pipe[0], &c, 1), 1);
    end_ns = ag_now_ns();
    /* A thread's intervals are counted at the wall thread's visits, and the session's end an
     * interval after its last pass (ag.wall_last_ns): the release waits for a pass on the grid
     * past end_ns, as long as that takes. On a loaded machine the wall thread made 28 to 84 of
     * the 80 passes due in 400 ms (two busy loops at load 15), and one that had no CPU for the
     * session's last 100 ms left them out: 78.5 % accounted for in 1 of 93 runs (the others
     * 90.7 % at worst; two to six busy loops beside, load 15-18); with the wall thread held
     * 150 ms at its 60th pass (a debug sleep, not committed), 3 of 3 runs failed at 74.6 to
     * 80.0 %. The burner sleeps meanwhile, sampled by every pass. */
    for (int i = 0; i < 4000 && atomic_load(&ag.wall_last_ns) < end_ns; i++) {
        usleep(5000);
    }
    ASSERT_TRUE(atomic_load(&ag.wall_last_ns) >= end_ns);
    ASSERT_OK(ag_sampling_release(AG_MODE_WALL, 200));
    for (int i = 0; i < 1000 && count_threads_named("pipeprof-wall") != 0; i++) {
        usleep(5000);
    }
    gone_ns = ag_now_ns(); /* no pass after this */
    ASSERT_EQ(write(b.stop_pipe[1], "x", 1), 1);
    ASSERT_EQ(pthread_join(th, NULL), 0);
    close(b.stop_pipe[0]);
    close(b.stop_pipe[1]);
    close(b.burnt_pipe[0]);
    close(b.burnt_pipe[1]);
    close(b.go_pipe[0]);
    close(b.go_pipe[1]);
    seen_drain();
    p = seen_get(atomic_load(&b.tid));
    intervals = (double)(end_ns - b.start_ns) / 5e6;
    got = (double)p->intervals + (double)p->lost;
    printf("# a thread %.0f ms in the session (%.0f until the wall thread was gone), 300 of them "
           "with the signal blocked, at 200 Hz: %u wall samples, %llu lost (%llu unsampled); "
           "%.1f%% of %.0f intervals accounted for\n",
           (double)(end_ns - b.start_ns) / 1e6, (double)(gone_ns - b.start_ns) / 1e6, p->samples,
           (unsigned long long)p->lost, (unsigned long long)p->unsampled, 100.0 * got / intervals,
           intervals);
    printf("# the wall thread's first pass %.1f ms after the thread's start, its last %.1f ms, "
           "%llu passes\n",
           ((double)atomic_load(&ag.wall_first_ns) - (double)b.start_ns) / 1e6,
           ((double)atomic_load(&ag.wall_last_ns) - (double)b.start_ns) / 1e6,
           (unsigned long long)atomic_load(&ag.wall_passes));
    /* At least its intervals until the release was asked for (less the first and last, which
     * may fall outside), at most those until the wall thread was gone. */
    ASSERT_TRUE(got >= 0.85 * intervals);
    ASSERT_TRUE(got <= 1.1 * (double)(gone_ns - session_ns) / 5e6);
    ASSERT_TRUE(p->unsampled <= p->lost);
    ag_stop();
}

/* ---- sessions in a loop under a host that masks, blocks and takes its own signal ---- */

static _Atomic int churn_stop;
static _Atomic uint64_t churn_handled;

static void
burn_us(unsigned us)
{
    struct timespec a, b;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    do {
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    } while ((uint64_t)(b.tv_sec - a.tv_sec) * 1000000000u + (uint64_t)b.tv_nsec -
                     (uint64_t)a.tv_nsec <
             (uint64_t)us * 1000u);
}

/* The host's own handler: masks the sampling signal around a bit of work and sleeps, through
 * the interposers, from signal context. */
static void
host_handler(int signo)
{
    sigset_t set;
    struct timespec ts = { 0, 1000 };
    int saved = errno;

    (void)signo;
    sigemptyset(&set);
    sigaddset(&set, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    burn_us(600);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    nanosleep(&ts, NULL);
    atomic_fetch_add(&churn_handled, 1);
    errno = saved;
}

static void *
churn_main(void *arg)
{
    sigset_t set;
    unsigned i = 0;

    (void)arg;
    sigemptyset(&set);
    sigaddset(&set, SIGPROF);
    while (!atomic_load(&churn_stop)) {
        struct timespec ts = { 0, 50000 };

        pthread_sigmask(SIG_BLOCK, &set, NULL);
        burn_us(800); /* more than half an interval at 1000 Hz: the unblock claims it */
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        burn_us(300);
        if (++i % 4 == 0) {
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static void *
kicker_main(void *arg)
{
    pthread_t *targets = arg;
    unsigned i = 0;

    while (!atomic_load(&churn_stop)) {
        pthread_kill(targets[i++ % 3], SIGUSR2);
        usleep(700);
    }
    return NULL;
}

static int
discard_record(const struct ag_record *rec, void *ctx)
{
    (void)rec;
    (void)ctx;
    return 0;
}

/*
 * Sessions started and stopped in a loop (CPU and wall at 1000 Hz) while host threads block the
 * sampling signal over spans the unblocking interposer claims into their rings, sleep, and take
 * a host signal whose handler does the same: nothing crashes (run under ASan+UBSan and TSan),
 * and after each stop every ring a producer could still hold is mapped.
 */
TEST(sessions_start_and_stop_under_a_masking_host)
{
    struct sigaction sa, old;
    enum { MAX_RINGS = 64 };
    static struct ag_ring held[MAX_RINGS];
    pthread_t th[3], kicker;
    unsigned round, i, n_held, unmapped = 0;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = host_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ASSERT_OK(sigaction(SIGUSR2, &sa, &old));
    atomic_store(&churn_stop, 0);
    for (i = 0; i < 3; i++) {
        ASSERT_OK(pthread_create(&th[i], NULL, churn_main, NULL));
    }
    ASSERT_OK(pthread_create(&kicker, NULL, kicker_main, th));
    for (round = 0; round < 25; round++) {
        start_agent();
        ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 1000));
        ASSERT_OK(ag_sampling_acquire(AG_MODE_WALL, 1000));
        usleep(15000);
        ASSERT_TRUE(ag_drain(discard_record, NULL) >= 0);
        if (round % 2 == 0) {
            ASSERT_OK(ag_sampling_release(AG_MODE_WALL, 1000));
        }
        usleep(5000);
        /* The rings as a producer that read them now would hold them. */
        for (i = 0; i < atomic_load(&ag.high) && i < MAX_RINGS; i++) {
            held[i].slots = ag.threads[i].ring.slots; /* set at registration, before this */
            held[i].map_len = ag.threads[i].ring.map_len;
        }
        n_held = i;
        ag_stop();
        for (i = 0; i < n_held; i++) {
            if (held[i].slots != NULL && ring_resident_pages(&held[i]) < 0) {
                unmapped++;
            }
        }
    }
    atomic_store(&churn_stop, 1);
    ASSERT_OK(pthread_join(kicker, NULL));
    for (i = 0; i < 3; i++) {
        ASSERT_OK(pthread_join(th[i], NULL));
    }
    ASSERT_OK(sigaction(SIGUSR2, &old, NULL));
    printf("# 25 sessions; host handler ran %llu times; %u rings unmapped after a stop\n",
           (unsigned long long)atomic_load(&churn_handled), unmapped);
    ASSERT_EQ(unmapped, 0);
    ASSERT_TRUE(atomic_load(&churn_handled) > 0);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && defined(__GLIBC__)
/* glibc malloc's arenas (malloc_info's heaps): a thread's first allocation attaches it to one, a
 * new one while there are fewer than the limit (8 per core). */
static int
arena_count(void)
{
    static char buf[1 << 17];
    FILE *f;
    const char *p = buf;
    int n = 0;

    memset(buf, 0, sizeof(buf));
    f = fmemopen(buf, sizeof(buf) - 1, "w");
    ASSERT_TRUE(f != NULL);
    ASSERT_OK(malloc_info(0, f));
    fclose(f);
    while ((p = strstr(p, "<heap nr=")) != NULL) {
        n++;
        p++;
    }
    return n;
}

static _Atomic int quiet_stop;
static _Atomic unsigned quiet_started;
static _Atomic int32_t quiet_tids[4];

/* A host thread that never allocates (as the burners of host-contract-fds-fdchurn). */
static void *
quiet_main(void *arg)
{
    atomic_store((_Atomic int32_t *)arg, (int32_t)syscall(SYS_gettid));
    atomic_fetch_add(&quiet_started, 1);
    while (!atomic_load(&quiet_stop)) {
        sched_yield();
    }
    return NULL;
}

/* The control: a thread that allocates once. */
static void *
allocating_main(void *arg)
{
    void *volatile p = malloc(64); /* volatile: kept, not folded away with its free */

    free(p);
    return quiet_main(arg);
}

/* The bounds the agent registered for thread i (th), against pthread_getattr_np's (asked here,
 * on this thread): the same top, give or take the thread's descriptor and TLS, and the bottom at
 * most the guard and a page away. */
static void
expect_bounds(pthread_t th, int i)
{
    pthread_attr_t a;
    void *addr;
    size_t size, guard;
    uint64_t lo = 0, hi = 0, real_lo, real_hi;
    int32_t tid = atomic_load(&quiet_tids[i]);

    pthread_mutex_lock(&ag.reg_lock);
    for (unsigned k = 0; k < atomic_load(&ag.high); k++) {
        if (atomic_load(&ag.threads[k].tid) == tid &&
            atomic_load(&ag.threads[k].state) == AG_SLOT_ACTIVE) {
            lo = atomic_load(&ag.threads[k].stack_lo);
            hi = atomic_load(&ag.threads[k].stack_hi);
        }
    }
    pthread_mutex_unlock(&ag.reg_lock);
    ASSERT_OK(pthread_getattr_np(th, &a));
    ASSERT_OK(pthread_attr_getstack(&a, &addr, &size));
    ASSERT_OK(pthread_attr_getguardsize(&a, &guard));
    pthread_attr_destroy(&a);
    real_lo = (uint64_t)(uintptr_t)addr;
    real_hi = real_lo + size;
    printf("# thread %d: registered [%#llx, %#llx), pthread_getattr_np [%#llx, %#llx) guard %zu\n",
           i, (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)real_lo,
           (unsigned long long)real_hi, guard);
    ASSERT_TRUE(hi != 0 && hi <= real_hi && hi + 65536 > real_hi);
    ASSERT_TRUE(lo + guard + 8192 >= real_lo && lo <= real_lo + 8192);
}
#endif

/*
 * A host thread started during a session allocates nothing at its start: the agent's start hook
 * registers it without malloc (its stack bounds from its thread descriptor and the size it was
 * created with). Before, pthread_getattr_np() allocated there, so each new thread that never
 * allocates bare got a malloc arena (a heap reserved per arena) and glibc's read of
 * /sys/devices/system/cpu/online (an fd the host could see in its listings).
 */
TEST(a_host_thread_started_during_a_session_allocates_nothing)
{
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && defined(__GLIBC__)
    pthread_t th[4];
    int before, quiet, control, prev, i, stable = 0;

    start_agent();
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 100));
    /* The agent's own threads attach to arenas of their own at their first allocations. */
    prev = arena_count();
    for (i = 0; i < 100 && stable < 3; i++) {
        usleep(30000);
        before = arena_count();
        stable = before == prev ? stable + 1 : 0;
        prev = before;
    }
    before = prev;
    atomic_store(&quiet_stop, 0);
    atomic_store(&quiet_started, 0);
    for (i = 0; i < 3; i++) {
        pthread_attr_t small;

        /* the third with a stack size of its own */
        ASSERT_OK(pthread_attr_init(&small));
        ASSERT_OK(pthread_attr_setstacksize(&small, 256 * 1024));
        ASSERT_OK(pthread_create(&th[i], i == 2 ? &small : NULL, quiet_main, &quiet_tids[i]));
        pthread_attr_destroy(&small);
    }
    while (atomic_load(&quiet_started) < 3) {
        sched_yield();
    }
    quiet = arena_count();
    ASSERT_OK(pthread_create(&th[3], NULL, allocating_main, &quiet_tids[3]));
    while (atomic_load(&quiet_started) < 4) {
        sched_yield();
    }
    control = arena_count();
    for (i = 0; i < 3; i++) {
        expect_bounds(th[i], i);
    }
    atomic_store(&quiet_stop, 1);
    for (i = 0; i < 4; i++) {
        ASSERT_OK(pthread_join(th[i], NULL));
    }
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 100));
    ag_stop();
    printf("# arenas: %d before, %d after 3 host threads started, %d after one that allocates\n",
           before, quiet, control);
    if (control == quiet) {
        test_skip("an allocating thread got no new arena either (glibc's arena limit reached)");
    }
    ASSERT_EQ(quiet, before);
#else
    test_skip("counts glibc malloc's arenas: not under a sanitizer's allocator, or without glibc");
#endif
}

static const struct test_case cases[] = {
    TEST_CASE(wall_holds_no_fd_per_thread_and_leaves_with_its_session),
    TEST_CASE(wall_counts_the_intervals_it_could_not_sample),
    TEST_CASE(wall_counts_the_passes_whose_signal_merged),
    TEST_CASE(sessions_start_and_stop_under_a_masking_host),
    TEST_CASE(a_host_thread_started_during_a_session_allocates_nothing),
};
TEST_MAIN(cases)
