/* SPDX-License-Identifier: MIT */
/*
 * tests/test-bridge-source.c - the agent event source's parsing of a session's filter data
 * (mode and rate per session, dotnet-trace's `Provider:keywords:level:key=value;...` syntax),
 * the EventCounters it writes: the interval, and the runtime's payload shape read back; what
 * a session's trace counts as lost when the wall sampler falls behind; and the CPU time a
 * thread-time view reads from a CPU session whose samples reach back further than the holdback,
 * or that writes thread events beside them.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bridge/agent-source.h"
#include "bridge/counters.h"
#include "common/clock.h"
#include "nettrace/nettrace.h"
#include "tests/agent-wait.h"
#include "tests/test.h"

TEST(filter_sets_mode_and_rate)
{
    enum ag_mode mode = AG_MODE_CPU;
    unsigned hz = 99;
    const char *why = NULL;

    ASSERT_OK(bridge_filter_parse("mode=wall;hz=250", &mode, &hz, &why));
    ASSERT_EQ(mode, AG_MODE_WALL);
    ASSERT_EQ(hz, 250);
    ASSERT_OK(bridge_filter_parse("Mode=\"cpu\";other=1", &mode, &hz, &why));
    ASSERT_EQ(mode, AG_MODE_CPU);
    ASSERT_EQ(hz, 250);
    ASSERT_OK(bridge_filter_parse("", &mode, &hz, &why));
    ASSERT_OK(bridge_filter_parse(NULL, &mode, &hz, &why));
}

TEST(filter_rejects_bad_values)
{
    enum ag_mode mode = AG_MODE_CPU;
    unsigned hz = 99;
    const char *why = NULL;

    ASSERT_EQ(bridge_filter_parse("mode=both", &mode, &hz, &why), -EINVAL);
    ASSERT_STR_EQ(why, "mode must be cpu or wall");
    ASSERT_EQ(bridge_filter_parse("hz=0", &mode, &hz, &why), -EINVAL);
    ASSERT_EQ(bridge_filter_parse("hz=1001", &mode, &hz, &why), -EINVAL);
    ASSERT_EQ(bridge_filter_parse("hz=12abc", &mode, &hz, &why), -EINVAL);
    ASSERT_STR_EQ(why, "hz must be a number from 1 to 1000");
    ASSERT_EQ(hz, 99);
}

TEST(counters_interval_parse)
{
    uint64_t ns = 7;

    ASSERT_OK(bridge_counters_interval("EventCounterIntervalSec=1", &ns));
    ASSERT_EQ(ns, 1000000000ULL);
    ASSERT_OK(bridge_counters_interval("a=b; EventCounterIntervalSec=0.5;c=d", &ns));
    ASSERT_EQ(ns, 500000000ULL);
    ASSERT_OK(bridge_counters_interval("EventCounterIntervalSec=0.001", &ns));
    ASSERT_EQ(ns, 10000000ULL); /* no faster than the drain */
    ASSERT_OK(bridge_counters_interval("EventCounterIntervalSec=0", &ns));
    ASSERT_EQ(ns, 0);
    ASSERT_OK(bridge_counters_interval(NULL, &ns));
    ASSERT_EQ(ns, 0);
    ASSERT_EQ(bridge_counters_interval("EventCounterIntervalSec=", &ns), -EINVAL);
    ASSERT_EQ(bridge_counters_interval("EventCounterIntervalSec=1s", &ns), -EINVAL);
    ASSERT_EQ(bridge_counters_interval("EventCounterIntervalSec=-1", &ns), -EINVAL);
    ASSERT_EQ(bridge_counters_interval("EventCounterIntervalSec=nan", &ns), -EINVAL);
}

struct counter_seen {
    char names[8][32];
    char types[8][8];
    double values[8];
    int n, depth2;
};

/* Collects Payload.Name, Payload.CounterType and Payload.Mean of each event. */
static int
counter_visit(void *ctx, const struct nt_value *v)
{
    struct counter_seen *c = ctx;
    char *dst = NULL;
    size_t cap = 0, i;

    if (v->depth == 2) {
        c->depth2++;
    }
    if (v->depth != 2 || v->field == NULL || c->n >= 8) {
        return 0;
    }
    if (strcmp(v->field->name, "Name") == 0) {
        dst = c->names[c->n];
        cap = sizeof(c->names[0]);
    } else if (strcmp(v->field->name, "CounterType") == 0) {
        dst = c->types[c->n];
        cap = sizeof(c->types[0]);
    } else if (strcmp(v->field->name, "Mean") == 0) {
        c->values[c->n] = v->f;
    }
    for (i = 0; dst != NULL && i + 1 < cap && i * 2 < v->size; i++) {
        dst[i] = (char)v->data[i * 2]; /* ASCII names */
        dst[i + 1] = '\0';
    }
    return 0;
}

/* A writer into an unlinked temporary file; returns the file's fd. */
static int
trace_file_writer(struct nt_writer **w)
{
    char path[] = "/tmp/pp-bridge-test.XXXXXX";
    struct nt_writer_options o;
    static struct nt_sink sink;
    static int fd;

    fd = mkstemp(path);
    ASSERT_TRUE(fd >= 0);
    unlink(path);
    memset(&o, 0, sizeof(o));
    o.process_id = (uint32_t)getpid();
    nt_sink_fd(&sink, &fd);
    ASSERT_OK(nt_writer_new(&o, &sink, w));
    return fd;
}

/* A reader of what trace_file_writer()'s file holds, from its start. */
static struct nt_reader *
trace_file_reader(int fd)
{
    static struct nt_source src;
    static int rfd;
    struct nt_reader *r = NULL;

    rfd = fd;
    ASSERT_TRUE(lseek(rfd, 0, SEEK_SET) == 0);
    nt_source_fd(&src, &rfd);
    ASSERT_OK(nt_reader_new(&src, NULL, &r));
    return r;
}

TEST(counters_written_as_the_runtime_writes_them)
{
    struct ipc_provider prov = {
        0, 4, (char *)"System.Runtime", (char *)"EventCounterIntervalSec=0.05", 0, NULL, 0
    };
    struct ipc_session_config cfg = { 1, &prov, 1, 0, 0, 0 };
    struct bridge_counters c;
    struct nt_writer *w = NULL;
    struct nt_reader *r = NULL;
    struct nt_event ev;
    struct counter_seen seen;
    const char *why = NULL;
    uint64_t t0 = nt_clock_now(), end, now;
    volatile uint64_t x = 1;
    int fd = trace_file_writer(&w), events = 0;

    ASSERT_OK(bridge_counters_start(&c, &cfg, t0, &why));
    ASSERT_EQ(c.interval_ns, 50000000ULL);
    ASSERT_TRUE(c.runtime && !c.pipeprof);
    /* too early: nothing */
    ASSERT_OK(bridge_counters_drain(&c, w, 1, t0 + 10000000ULL, t0 + 10000000ULL));
    for (end = t0 + 60000000ULL; nt_clock_now() < end;) {
        x = x * 6364136223846793005ULL + 1; /* CPU time for cpu-usage */
    }
    now = nt_clock_now();
    ASSERT_OK(bridge_counters_drain(&c, w, 1, now, now));
    ASSERT_OK(nt_writer_finish(w));
    nt_writer_free(w);

    r = trace_file_reader(fd);
    memset(&seen, 0, sizeof(seen));
    while (nt_reader_next(r, &ev) == 1) {
        if (ev.desc == NULL) {
            continue;
        }
        ASSERT_STR_EQ(ev.desc->provider, "System.Runtime");
        ASSERT_STR_EQ(ev.desc->name, "EventCounters");
        /* Of no thread: the writing thread's id made TraceEvent charge its time to them. */
        ASSERT_U64_EQ(ev.thread_id, BRIDGE_NO_THREAD);
        ASSERT_U64_EQ(ev.capture_thread_id, 1);
        /* One unnamed object holding "Payload", as EventSource writes `new { Payload = p }`. */
        ASSERT_EQ(ev.desc->field_count, 1);
        ASSERT_STR_EQ(ev.desc->fields[0].name, "");
        ASSERT_STR_EQ(ev.desc->fields[0].fields[0].name, "Payload");
        ASSERT_OK(nt_payload_decode(ev.desc, ev.payload, ev.payload_size, counter_visit, &seen));
        seen.n++;
        events++;
    }
    nt_reader_free(r);
    close(fd);
    ASSERT_EQ(events, 2);
    ASSERT_STR_EQ(seen.names[0], "cpu-usage");
    ASSERT_STR_EQ(seen.types[0], "Mean");
    ASSERT_TRUE(seen.values[0] > 0 && seen.values[0] <= 100.0);
    ASSERT_STR_EQ(seen.names[1], "working-set");
    ASSERT_TRUE(seen.values[1] > 0);
    ASSERT_EQ(seen.depth2, 2 * 12); /* every field of CounterPayload, in each event */
}

/* A thread blocked in read() until the test closes the pipe's other end. */
static void *
blocked_reader_main(void *arg)
{
    char c;

    while (read(*(int *)arg, &c, 1) < 0 && errno == EINTR) {
    }
    return NULL;
}

/* A blocked reader that says its thread id first. */
struct tid_reader {
    int fd;
    _Atomic int32_t tid;
};

static void *
tid_reader_main(void *arg)
{
    struct tid_reader *b = arg;

    atomic_store(&b->tid, (int32_t)syscall(SYS_gettid));
    return blocked_reader_main(&b->fd);
}

/* Sums LostSamples' Count and Unsampled fields, by name. */
struct lost_seen {
    uint64_t count, unsampled;
};

static int
lost_visit(void *ctx, const struct nt_value *v)
{
    struct lost_seen *l = ctx;

    if (v->field != NULL && strcmp(v->field->name, "Count") == 0) {
        l->count += v->u;
    } else if (v->field != NULL && strcmp(v->field->name, "Unsampled") == 0) {
        l->unsampled += v->u;
    }
    return 0;
}

/*
 * 200 threads blocked in read(), a wall session at 1000 Hz: a pass over them takes longer than
 * an interval here, so threads go intervals without a sample. No sample was taken and none
 * dropped, so the trace shows no sequence gap for them (the runtime's own sampler, late, counts
 * nothing either): LostSamples says how many there were (Unsampled), and the trace's lost events
 * are exactly the samples dropped (Count - Unsampled). Before: every missed interval was a
 * sequence gap, and a .NET app on a loaded machine read "310 lost events" with the agent, 0
 * without.
 */
TEST(late_wall_passes_are_no_lost_events)
{
    enum { N = 200 };
    static pthread_t th[N];
    static struct tid_reader rd[N];
    struct ipc_provider prov[2] = {
        { 0, 4, (char *)NT_PROVIDER_SAMPLE_PROFILER, (char *)"mode=wall;hz=1000", 0, NULL, 0 },
        { 0, 4, (char *)BRIDGE_PROVIDER_PIPEPROF, (char *)"mode=wall;hz=1000", 0, NULL, 0 },
    };
    struct ipc_session_config cfg = { 7, prov, 2, 0, 0, 0 };
    struct ipc_event_source es;
    struct ipc_session_view view = { &cfg, NULL, 0, 0, 0 };
    struct ag_config ac;
    struct nt_reader *r = NULL;
    struct nt_reader_stats rs;
    struct nt_event ev;
    struct lost_seen lost = { 0, 0 };
    uint64_t samples = 0, pipeprof_events = 0;
    unsigned i;
    int fd, pipefd[2];

    ag_config_init(&ac);
    ac.scan_ms = 20;
    ASSERT_OK(ag_start(&ac));
    ASSERT_OK(pipe(pipefd));
    for (i = 0; i < N; i++) {
        rd[i].fd = pipefd[0];
        atomic_store(&rd[i].tid, 0);
        ASSERT_OK(pthread_create(&th[i], NULL, tid_reader_main, &rd[i]));
    }
    /* each one registered by the scan (or the interposer) before the session: a ThreadStart */
    for (i = 0; i < N; i++) {
        ASSERT_OK(test_agent_wait_thread(&rd[i].tid, 0));
    }
    bridge_agent_source_init(&es, &ac);
    fd = trace_file_writer(&view.writer);
    ASSERT_OK(es.session_start(es.ctx, &cfg));
    /* 0.4 s of drains, not a wait for an event: a loaded machine's wall thread only falls
     * further behind, which the unsampled count below can only gain from */
    for (i = 0; i < 20; i++) {
        usleep(20000);
        ASSERT_OK(es.drain(es.ctx, &view, 1));
    }
    view.final = 1;
    ASSERT_OK(es.drain(es.ctx, &view, 1));
    es.session_stop(es.ctx, &cfg);
    ASSERT_OK(nt_writer_finish(view.writer));
    nt_writer_free(view.writer);
    close(pipefd[1]);
    for (i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
    }
    close(pipefd[0]);
    ag_stop();

    r = trace_file_reader(fd);
    while (nt_reader_next(r, &ev) == 1) {
        /* pipeprof's own events are of no thread (bridge/counters.h, BRIDGE_NO_THREAD): with
         * the IPC loop's tid, TraceEvent charged that thread's time to them. */
        if (ev.desc != NULL && strcmp(ev.desc->provider, BRIDGE_PROVIDER_PIPEPROF) == 0) {
            ASSERT_U64_EQ(ev.thread_id, BRIDGE_NO_THREAD);
            pipeprof_events++;
        }
        if (ev.desc != NULL && strcmp(ev.desc->name, "LostSamples") == 0) {
            ASSERT_OK(nt_payload_decode(ev.desc, ev.payload, ev.payload_size, lost_visit, &lost));
        } else if (ev.desc != NULL && strcmp(ev.desc->provider, NT_PROVIDER_SAMPLE_PROFILER) == 0) {
            samples++;
        }
    }
    nt_reader_get_stats(r, &rs);
    nt_reader_free(r);
    close(fd);
    printf("# %d threads at 1000 Hz: %llu samples, LostSamples %llu (%llu unsampled), %llu lost "
           "events in the trace\n",
           N, (unsigned long long)samples, (unsigned long long)lost.count,
           (unsigned long long)lost.unsampled, (unsigned long long)rs.lost_events);
    /* No samples > 0: under qemu-user a blocked thread's registers are the emulator's, and every
     * wall sample of it is dropped (a real loss, in Count - Unsampled). */
    ASSERT_TRUE(pipeprof_events > N); /* ThreadStart of each, ModuleLoad, Sampling */
    ASSERT_TRUE(lost.unsampled > 0);  /* the passes did fall behind: the case is tested */
    ASSERT_TRUE(lost.unsampled <= lost.count);
    ASSERT_U64_EQ(rs.lost_events, lost.count - lost.unsampled);
}

/* What one session of the case below saw: the waiter's and the busy one's events, the time from
 * its start to its last drain, and events out of time order. */
struct runnable_seen {
    uint64_t events, hog_events, t2_ns, unordered;
};

/*
 * A wall session's running thread that waits for a core with its signal pending: the sample that
 * comes carries the intervals it waited (agent/wall.c), and the trace has one ThreadSample for
 * each, in time order, so TraceEvent's thread-time view and counting tools give it its time.
 * Before, its events were one per sample: 1 of its 100 intervals here (a SCHED_IDLE thread
 * pinned beside a busy one barely runs).
 */
static void
runnable_run(struct runnable_seen *out)
{
    static _Atomic int stop;
    /* (with pipeprof's provider: no stack snapshot, whose 1000 Hz passes would come first) */
    struct ipc_provider prov[2] = {
        { 0, 4, (char *)NT_PROVIDER_SAMPLE_PROFILER, (char *)"mode=wall;hz=100", 0, NULL, 0 },
        { 0, 4, (char *)BRIDGE_PROVIDER_PIPEPROF, (char *)"mode=wall;hz=100", 0, NULL, 0 },
    };
    struct ipc_session_config cfg = { 8, prov, 2, 0, 0, 0 };
    struct test_spinner waiter = { test_first_cpu(), 1, 0, 0, &stop, 0 },
                        hog = { waiter.cpu, 0, 0, 0, &stop, 0 };
    struct ipc_event_source es;
    struct ipc_session_view view = { &cfg, NULL, 0, 0, 0 };
    struct ag_config ac;
    struct nt_reader *r;
    struct nt_event ev;
    uint64_t t0, t1, t2, events = 0, hog_events = 0, last_ts = 0, unordered = 0;
    pthread_t tw, th;
    unsigned i;
    int fd;

    atomic_store(&stop, 0);
    ag_config_init(&ac);
    ac.scan_ms = 20;
    ASSERT_OK(ag_start(&ac));
    ASSERT_OK(pthread_create(&th, NULL, test_spinner_main, &hog));
    ASSERT_OK(pthread_create(&tw, NULL, test_spinner_main, &waiter));
    for (i = 0; i < 2000 && (atomic_load(&waiter.ready) == 0 || atomic_load(&hog.ready) == 0);
         i++) {
        usleep(5000);
    }
    ASSERT_EQ(atomic_load(&waiter.ready), 1);
    ASSERT_EQ(atomic_load(&hog.ready), 1);
    ASSERT_OK(test_agent_wait_thread(&waiter.tid, 0)); /* registered */
    ASSERT_OK(test_agent_wait_thread(&hog.tid, 0));
    bridge_agent_source_init(&es, &ac);
    fd = trace_file_writer(&view.writer);
    t0 = pp_clock_ns(CLOCK_MONOTONIC);
    ASSERT_OK(es.session_start(es.ctx, &cfg));
    for (i = 0; i < 6; i++) { /* within the second one sample may carry */
        usleep(100000);
        ASSERT_OK(es.drain(es.ctx, &view, 1));
    }
    t1 = pp_clock_ns(CLOCK_MONOTONIC);
    atomic_store(&stop, 1); /* the waiter runs and takes its pending signal */
    pthread_join(th, NULL);
    pthread_join(tw, NULL);
    view.final = 1;
    ASSERT_OK(es.drain(es.ctx, &view, 1));
    t2 = pp_clock_ns(CLOCK_MONOTONIC);
    es.session_stop(es.ctx, &cfg);
    ASSERT_OK(nt_writer_finish(view.writer));
    nt_writer_free(view.writer);
    ag_stop();

    r = trace_file_reader(fd);
    while (nt_reader_next(r, &ev) == 1) {
        if (ev.desc != NULL && strcmp(ev.desc->provider, NT_PROVIDER_SAMPLE_PROFILER) == 0) {
            unordered += ev.timestamp < last_ts;
            last_ts = ev.timestamp;
            events += ev.thread_id == (uint64_t)atomic_load(&waiter.tid);
            hog_events += ev.thread_id == (uint64_t)atomic_load(&hog.tid);
        }
    }
    nt_reader_free(r);
    close(fd);
    printf("# a SCHED_IDLE thread beside a busy one on CPU %d, %.0f ms at 100 Hz (%.0f to the "
           "session's stop): %llu events (the busy one %llu), %llu out of time order\n",
           waiter.cpu, (double)(t1 - t0) / 1e6, (double)(t2 - t0) / 1e6, (unsigned long long)events,
           (unsigned long long)hog_events, (unsigned long long)unordered);
    out->events = events;
    out->hog_events = hog_events;
    out->t2_ns = t2 - t0;
    out->unordered = unordered;
}

#define RUNNABLE_TRIES 5
TEST(a_runnable_thread_gets_an_event_for_each_interval_it_waited)
{
    struct runnable_seen seen = { 0, 0, 0, 0 };
    int attempt;

#ifdef __SANITIZE_THREAD__
    test_skip("under ThreadSanitizer, which holds the signals back (it runs in the -Werror and "
              "ASan builds)");
#endif
    /* The busy one's events count the wall thread's passes: under 20 in the 0.6 s (60 asked
     * for; 57 to 67 beside two busy loops at load 15), the wall thread was starved and the
     * session says nothing of the waiter's intervals. The session cannot just run longer:
     * past a second of held intervals a waiting thread's interval is counted lost. Such an
     * attempt is made again, up to RUNNABLE_TRIES times, then the case fails. */
    for (attempt = 1; attempt <= RUNNABLE_TRIES; attempt++) {
        runnable_run(&seen);
        if (seen.hog_events >= 20) {
            break;
        }
        fprintf(stderr,
                "# try %d: the busy one had %llu events, 60 asked for (the wall thread "
                "starved): again\n",
                attempt, (unsigned long long)seen.hog_events);
    }
    /* As many as the busy one, which runs all along (a pass the wall thread, starved on a
     * loaded machine, did not make misses both: 47 and 47 of 60 at load 20), and at most its
     * intervals to the end (the weights are the session's intervals, not more). The session runs
     * on while the threads end and the waiter takes its signal, to t2: on a loaded machine that
     * took 20 intervals and more (a fresh-clone CI run: 100 events, 98.9 allowed to t1). */
    ASSERT_TRUE(seen.hog_events >= 20);
    ASSERT_TRUE((double)seen.events >= 0.8 * (double)seen.hog_events);
    ASSERT_TRUE((double)seen.events <= 1.3 * (double)seen.t2_ns / 1e7 + 20);
    ASSERT_EQ(seen.unordered, 0);
}

/* A worker of the thread-time cases: what it does, its id and the CPU it burned. */
struct tt_worker {
    int signo; /* > 0: holds this signal back (reach); 0: spins all along; -1: bursts */
    int hold;  /* read end of a pipe it waits on at its end, until the test has drained */
    struct tt_worker *other; /* spinning: goes on until this one has measured */
    _Atomic int32_t tid;
    _Atomic uint64_t cpu_ns;
};

static void
tt_spin(uint64_t ns)
{
    volatile uint64_t x = 1;
    uint64_t end = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) + ns;

    while (pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) < end) {
        x = x * 6364136223846793005ULL + 1;
    }
}

/* Spins 20 ms, then 150 ms with the sampling signal blocked by a raw system call (no interposer
 * sees it: the signal waits, and its one sample stands for the whole 150 ms), then 20 ms; with
 * signo 0 as long with nothing blocked (and on until `other` is done); with -1, six bursts of
 * 30 ms, 170 ms asleep after each. */
static void *
tt_worker_main(void *arg)
{
    struct tt_worker *w = arg;
    sigset_t set, old;
    uint64_t c0;
    int i;

    w->tid = (int32_t)syscall(SYS_gettid);
    /* registered (the interposer or the scan), its timer or perf event armed: its CPU from here
     * on is sampled */
    ASSERT_OK(test_agent_wait_thread(&w->tid, 1));
    c0 = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (i = 0; w->signo < 0 && i < 6; i++) {
        tt_spin(30000000u);
        usleep(170000);
    }
    if (w->signo >= 0) {
        tt_spin(20000000u);
        sigemptyset(&set);
        sigaddset(&set, w->signo != 0 ? w->signo : SIGPROF);
        if (w->signo != 0) {
            syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, &old, 8);
        }
        tt_spin(150000000u);
        if (w->signo != 0) {
            syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
        }
        tt_spin(20000000u);
    }
    while (w->signo == 0 && w->other != NULL && w->other->cpu_ns == 0) {
        tt_spin(10000000u);
    }
    w->cpu_ns = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    blocked_reader_main(&w->hold); /* no CPU after it measured, until the drains are done */
    return NULL;
}

/* A CPU session as dotnet-trace and dotnet-stack open it: SampleProfiler alone, at 250 Hz; and
 * as `pipeprof record` opens it, with pipeprof's own events (threads, modules, losses). */
static struct ipc_provider cpu_session = {
    0, 4, (char *)NT_PROVIDER_SAMPLE_PROFILER, (char *)"mode=cpu;hz=250", 0, NULL, 0
};
static struct ipc_provider cpu_session_pipeprof[2] = {
    { 0, 4, (char *)NT_PROVIDER_SAMPLE_PROFILER, (char *)"mode=cpu;hz=250", 0, NULL, 0 },
    { 0, 4, (char *)BRIDGE_PROVIDER_PIPEPROF, (char *)"mode=cpu;hz=250", 0, NULL, 0 },
};

/* The sampler and the runtime's counters every 20 ms (drained each 50 ms: a counter each drain). */
static struct ipc_provider cpu_session_counters[2] = {
    { 0, 4, (char *)NT_PROVIDER_SAMPLE_PROFILER, (char *)"mode=cpu;hz=250", 0, NULL, 0 },
    { 0, 4, (char *)"System.Runtime", (char *)"EventCounterIntervalSec=0.02", 0, NULL, 0 },
};

static void *
churn_noop(void *arg)
{
    return arg;
}

/* Starts a thread that ends at once every 5 ms until *arg is set: every drain has thread events. */
static void *
churn_main(void *arg)
{
    _Atomic int *stop = arg;
    pthread_t t;

    while (!atomic_load(stop)) {
        if (pthread_create(&t, NULL, churn_noop, NULL) == 0) {
            pthread_join(t, NULL);
        }
        usleep(5000);
    }
    return NULL;
}

/* A session's last drain and its stop; then the threads that wait on the pipe hold are let go and
 * joined, the trace is finished and the agent stopped. */
static void
session_end(struct ipc_event_source *es, struct ipc_session_view *view, int hold[2],
            const pthread_t *th, size_t n)
{
    size_t i;

    view->final = 1;
    ASSERT_OK(es->drain(es->ctx, view, 1));
    es->session_stop(es->ctx, view->config);
    close(hold[1]);
    for (i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
    }
    close(hold[0]);
    ASSERT_OK(nt_writer_finish(view->writer));
    nt_writer_free(view->writer);
    ag_stop();
}

/* One ThreadSample of a thread: its time, and whether it says running (Managed). */
struct tt_event {
    uint64_t ts;
    int running;
};

/*
 * A CPU session as dotnet-trace opens it (SampleProfiler alone, 250 Hz), drained every drain_us,
 * of wk beside a thread that spins (so that the session has events to write all along). With
 * churn 1, the session has pipeprof's events too and a third thread starts a thread every 5 ms;
 * with 2, the runtime's counters every 20 ms.
 * Returns the time TraceEvent's thread-time computer charges wk as CPU: each running sample of
 * it until its next sample, in time order.
 */
static uint64_t
tt_charged(struct tt_worker *wk, unsigned drain_us, int churn)
{
    struct ipc_session_config cfg = { 9,
                                      churn == 2 ? cpu_session_counters
                                      : churn    ? cpu_session_pipeprof
                                                 : &cpu_session,
                                      churn ? 2u : 1u,
                                      0,
                                      0,
                                      0 };
    static _Atomic int churn_stop;
    pthread_t churner;
    struct ipc_event_source es;
    struct ipc_session_view view = { &cfg, NULL, 0, 0, 0 };
    struct ag_config ac;
    struct tt_worker beside = { 0, -1, wk, 0, 0 };
    static struct tt_event evs[4096];
    struct nt_reader *r = NULL;
    struct nt_event ev;
    pthread_t th, th2;
    size_t n = 0, i, j;
    uint64_t charged = 0;
    int fd, done = 0, hold[2];

    ag_config_init(&ac);
    ac.scan_ms = 20;
    if (wk->signo > 0) {
        wk->signo = ac.signo;
    }
    ASSERT_OK(pipe(hold));
    wk->hold = beside.hold = hold[0];
    ASSERT_OK(ag_start(&ac));
    bridge_agent_source_init(&es, &ac);
    fd = trace_file_writer(&view.writer);
    ASSERT_OK(es.session_start(es.ctx, &cfg));
    ASSERT_OK(pthread_create(&th, NULL, tt_worker_main, wk));
    ASSERT_OK(pthread_create(&th2, NULL, tt_worker_main, &beside));
    atomic_store(&churn_stop, 0);
    if (churn == 1) {
        ASSERT_OK(pthread_create(&churner, NULL, churn_main, &churn_stop));
    }
    while (!done) {
        usleep(drain_us);
        ASSERT_OK(es.drain(es.ctx, &view, 1));
        done = wk->cpu_ns != 0 && beside.cpu_ns != 0;
    }
    if (churn == 1) {
        atomic_store(&churn_stop, 1);
        pthread_join(churner, NULL);
    }
    usleep(20000);
    session_end(&es, &view, hold, (pthread_t[]){ th, th2 }, 2);

    r = trace_file_reader(fd);
    while (nt_reader_next(r, &ev) == 1) {
        if (ev.desc != NULL && strcmp(ev.desc->provider, NT_PROVIDER_SAMPLE_PROFILER) == 0 &&
            ev.thread_id == (uint64_t)wk->tid && ev.payload_size >= 4) {
            ASSERT_TRUE(n < sizeof(evs) / sizeof(evs[0]));
            evs[n].ts = ev.timestamp;
            evs[n].running = ev.payload[0] == 2; /* Managed: running */
            n++;
        }
    }
    nt_reader_free(r);
    close(fd);
    for (i = 1; i < n; i++) { /* in time order, equal times as written (a stable sort) */
        struct tt_event e = evs[i];

        for (j = i; j > 0 && evs[j - 1].ts > e.ts; j--) {
            evs[j] = evs[j - 1];
        }
        evs[j] = e;
    }
    for (i = 0; i + 1 < n; i++) {
        charged += evs[i].running ? evs[i + 1].ts - evs[i].ts : 0;
    }
    printf("# %zu events of the worker: %.1f ms charged as CPU, %.1f ms burned\n", n,
           (double)charged / 1e6, (double)wk->cpu_ns / 1e6);
    ASSERT_TRUE(n > 2);
    return charged;
}

/*
 * Drained every 10 ms: the spinning thread's events older than the holdback (about 42 ms) are
 * written while the worker runs 150 ms with the signal blocked; its next sample stands for all
 * of it, back-dated over more than was held. Before: the span was clamped to what had been
 * written and its samples stood at one instant, so the thread-time view lost most of the 150 ms
 * (a thread in system calls on perf_event lost 15 % of its CPU_TIME so, in dotnet-trace-cputime).
 */
TEST(cpu_spans_reaching_back_keep_their_time)
{
    struct tt_worker wk = { 1, -1, NULL, 0, 0 };
    uint64_t charged = tt_charged(&wk, 10000, 0);

    /* 20 ms of slack: the worker measures from its timer's arming (tt_worker_main), and its
     * first and last samples' intervals straddle what it measured (before the fix about 70 ms of
     * 190 were charged). */
    ASSERT_TRUE(charged + 20000000u >= wk.cpu_ns);
    ASSERT_TRUE(charged <= wk.cpu_ns + 20000000u);
}

/*
 * Drained every 150 ms, as a loaded machine's late drains are: a burst's last samples are older
 * than the holdback when drained, so what is written may pass the end of a thread's running
 * interval before the drain that sees it stop (its next, with no sample of it). The interval
 * must still end there. Before: the not-running sample was clamped to what was written, and the
 * bursts were charged up to 58 ms of sleep each (gt_burst_tiny 2.3 to 2.6 points over in
 * dotnet-trace-cputime on a loaded machine, 25 % of its CPU).
 */
TEST(cpu_intervals_end_where_they_end_when_drains_are_late)
{
    struct tt_worker wk = { -1, -1, NULL, 0, 0 };
    uint64_t charged = tt_charged(&wk, 150000, 0);

    /* (Before the fix: 19 to 101 ms over, over 4 runs.) */
    ASSERT_TRUE(charged + 20000000u >= wk.cpu_ns);
    ASSERT_TRUE(charged <= wk.cpu_ns + 10000000u);
}

/*
 * A CPU session with pipeprof's events, drained every 50 ms (as the IPC loop drains), while a
 * thread starts a thread every 5 ms: every drain writes thread events. They must come after the
 * events held back up to their time: written first, they took the writer's time up, it clamped
 * those held-back samples to it, and TraceEvent charged them nothing (agent-module-reuse's liba
 * got 58 to 96 ms of CPU_TIME for 300 ms burned). The worker burns in bursts, so that the time
 * before such an instant goes to its sleep (a thread that ran all along got it back there, as
 * the sample before the instant was one of its running ones).
 */
TEST(cpu_samples_keep_their_time_beside_thread_events)
{
    struct tt_worker wk = { -1, -1, NULL, 0, 0 };
    uint64_t charged = tt_charged(&wk, 50000, 1);

    ASSERT_TRUE(charged + 20000000u >= wk.cpu_ns);
    ASSERT_TRUE(charged <= wk.cpu_ns + 20000000u);
}

/* The same beside the runtime's counters (a System.Runtime provider in the CPU session, as
 * dotnet-counters or dotnet-trace's --counters add): written first at the present, they squeezed
 * the samples held back to that instant (agent-module-reuse's liba 100 ms for 599 samples). */
TEST(cpu_samples_keep_their_time_beside_counters)
{
    struct tt_worker wk = { -1, -1, NULL, 0, 0 };
    uint64_t charged = tt_charged(&wk, 50000, 2);

    ASSERT_TRUE(charged + 20000000u >= wk.cpu_ns);
    ASSERT_TRUE(charged <= wk.cpu_ns + 20000000u);
}

/* The worker of the case below: it holds the agent's signal back (pthread_sigmask, which the
 * agent's interposer sees) while it burns, then burns a little more and waits on a pipe. */
struct snap_worker {
    int signo, hold;
    int brief; /* 1: burns 60 ms (less than a 10 Hz interval) with the signal held back by the
                  raw system call, which the agent does not see, and ends as it lets it go */
    unsigned late_ms; /* made this long after the session's start (drained every 10 ms) */
    _Atomic int32_t tid;
    _Atomic int done;
};

static void *
snap_worker_main(void *arg)
{
    struct snap_worker *w = arg;
    sigset_t set, old;

    w->tid = (int32_t)syscall(SYS_gettid);
    sigemptyset(&set);
    sigaddset(&set, w->signo);
    if (w->brief) {
        syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, &old, 8);
        tt_spin(60000000u);
        syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8); /* the pass's signal: now */
        w->done = 1;
        return NULL;
    }
    pthread_sigmask(SIG_BLOCK, &set, &old);
    tt_spin(150000000u);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    tt_spin(20000000u);
    w->done = 1;
    blocked_reader_main(&w->hold);
    return NULL;
}

/* What a snapshot session wrote of its worker: the first ThreadSample in time order (the first of
 * equal times as written), and whether a running one came before the first waiting one. */
struct snap_seen {
    uint32_t n, first_depth;
    int running_before_waiting;
};

/*
 * dotnet-stack's session (SampleProfiler alone, CPU mode: a stack snapshot, drained every 10 ms;
 * at prov's rate) while wk burns.
 */
static void
snap_run(struct snap_worker *wk, struct ipc_provider *prov, struct snap_seen *seen)
{
    struct ipc_session_config cfg = { 11, prov, 1, 0, 0, 0 };
    struct ipc_event_source es;
    struct ipc_session_view view = { &cfg, NULL, 0, 0, 0 };
    struct ag_config ac;
    struct nt_reader *r = NULL;
    struct nt_event ev;
    uint64_t first_ts = UINT64_MAX, first_waiting = UINT64_MAX, first_running = UINT64_MAX;
    pthread_t th;
    int fd, hold[2], i;

    memset(seen, 0, sizeof(*seen));
    ag_config_init(&ac);
    ac.scan_ms = 20;
    wk->signo = ac.signo;
    ASSERT_OK(pipe(hold));
    wk->hold = hold[0];
    ASSERT_OK(ag_start(&ac));
    bridge_agent_source_init(&es, &ac);
    fd = trace_file_writer(&view.writer);
    ASSERT_OK(es.session_start(es.ctx, &cfg));
    for (i = 0; i < (int)wk->late_ms / 10; i++) {
        usleep(10000);
        ASSERT_OK(es.drain(es.ctx, &view, 1));
    }
    ASSERT_OK(pthread_create(&th, NULL, snap_worker_main, wk));
    for (i = 0; i < 3000 && !wk->done; i++) {
        usleep(10000);
        ASSERT_OK(es.drain(es.ctx, &view, 1));
    }
    ASSERT_TRUE(wk->done);
    usleep(30000);
    ASSERT_OK(es.drain(es.ctx, &view, 1));
    session_end(&es, &view, hold, &th, 1);

    r = trace_file_reader(fd);
    while (nt_reader_next(r, &ev) == 1) {
        if (ev.desc != NULL && strcmp(ev.desc->provider, NT_PROVIDER_SAMPLE_PROFILER) == 0 &&
            ev.thread_id == (uint64_t)wk->tid && ev.payload_size >= 4) {
            uint64_t *at = ev.payload[0] == 2 ? &first_running : &first_waiting;

            seen->n++;
            if (ev.timestamp < first_ts) {
                first_ts = ev.timestamp;
                seen->first_depth = ev.stack_depth;
            }
            *at = ev.timestamp < *at ? ev.timestamp : *at;
        }
    }
    nt_reader_free(r);
    close(fd);
    seen->running_before_waiting = first_running < first_waiting;
    printf("# the worker: %u ThreadSamples, the first with %u frames, running %.1f ms %s the first "
           "waiting\n",
           seen->n, seen->first_depth,
           (double)(first_running > first_waiting ? first_running - first_waiting
                                                  : first_waiting - first_running) /
                   1e6,
           seen->running_before_waiting ? "before" : "after");
}

/*
 * A thread whose CPU sample reaches the snapshot session before the wall pass brings it into the
 * snapshot: it burns with the signal held back by pthread_sigmask, so the pass's signal waits and
 * its CPU arrives as unseen final samples at each drain (on an idle agent's first session the wall
 * thread starts with it, 25 to 45 ms before its first pass, and a busy thread's CPU sample may
 * come first). dotnet-stack prints the thread's first sample in time order: it must have a stack.
 * Before, a stackless waiting sample came first (UNMANAGED_CODE_TIME with no frame), as in 1 of 40
 * idle agents' first snapshots of pp-sample-groundtruth.
 */
TEST(a_snapshot_thread_whose_cpu_sample_comes_first_starts_with_a_stack)
{
    struct snap_worker wk = { 0, -1, 0, 0, 0, 0 };
    struct snap_seen seen;

    snap_run(&wk, &cpu_session, &seen);
    ASSERT_TRUE(seen.n >= 2);
    ASSERT_TRUE(seen.first_depth > 0);
}

/*
 * A thread in the snapshot whose first CPU sample reaches back past its snapshot's sample: at
 * 10 Hz it burns 60 ms with the signal held back and ends as it lets it go, so the pass samples it
 * late, at its end, and its CPU comes as its final sample, standing for the 60 ms before. No
 * running sample may come before the snapshot's in time: TraceEvent takes a running sample that
 * comes first for the thread's first stack (such a final sample of a thread found by the scan,
 * stackless, was dotnet-stack's "CPU_TIME" with no frame, in a main trace of pp-sample-groundtruth
 * read by its libraries).
 */
TEST(a_snapshot_thread_runs_after_its_snapshot_sample)
{
    struct ipc_provider slow = {
        0, 4, (char *)NT_PROVIDER_SAMPLE_PROFILER, (char *)"mode=cpu;hz=10", 0, NULL, 0
    };
    struct snap_worker wk = { 0, -1, 1, 0, 0, 0 };
    struct snap_seen seen;

    /* A snapshot session's threads are those its first pass meets, and this one lives 60 ms: on
     * a loaded machine the pass (25 to 45 ms after the start on an idle agent) came after it had
     * ended, 1 run in 25 at load 4, and the thread was rightly in no sample at all. That run is
     * not the case: said, and made again (the assertions below hold for a run that met it). */
    for (int tries = 0; tries < 5; tries++) {
        wk = (struct snap_worker){ 0, -1, 1, 0, 0, 0 };
        snap_run(&wk, &slow, &seen);
        if (seen.n != 0) {
            break;
        }
        printf("# the worker ended before the snapshot's first pass met it: made again\n");
    }
    ASSERT_TRUE(seen.n >= 2);
    ASSERT_TRUE(seen.first_depth > 0);
    ASSERT_TRUE(!seen.running_before_waiting);
}

/*
 * A thread born after the snapshot settled (a snapshot session's threads are those of its first
 * pass; the wall sampler stops then) starts with a stack too: its first CPU sample's, on the
 * waiting sample before its span. Before, that sample was stackless (UNMANAGED_CODE_TIME with no
 * frame for dotnet-stack), as it was for a thread the snapshot settled without in a fresh-clone
 * CI run's ASan stage (a_snapshot_thread_runs_after_its_snapshot_sample: 3 samples, the first
 * with 0 frames).
 */
TEST(a_thread_born_after_the_snapshot_starts_with_a_stack)
{
    struct snap_worker wk = { 0, -1, 0, 300, 0, 0 };
    struct snap_seen seen;

    snap_run(&wk, &cpu_session, &seen);
    ASSERT_TRUE(seen.n >= 2);
    ASSERT_TRUE(seen.first_depth > 0);
    ASSERT_TRUE(!seen.running_before_waiting);
}

static const struct test_case cases[] = {
    TEST_CASE(counters_interval_parse),
    TEST_CASE(counters_written_as_the_runtime_writes_them),
    TEST_CASE(cpu_intervals_end_where_they_end_when_drains_are_late),
    TEST_CASE(cpu_samples_keep_their_time_beside_thread_events),
    TEST_CASE(cpu_samples_keep_their_time_beside_counters),
    TEST_CASE(cpu_spans_reaching_back_keep_their_time),
    TEST_CASE(filter_sets_mode_and_rate),
    TEST_CASE(filter_rejects_bad_values),
    TEST_CASE(late_wall_passes_are_no_lost_events),
    TEST_CASE(a_runnable_thread_gets_an_event_for_each_interval_it_waited),
    TEST_CASE(a_snapshot_thread_whose_cpu_sample_comes_first_starts_with_a_stack),
    TEST_CASE(a_snapshot_thread_runs_after_its_snapshot_sample),
    TEST_CASE(a_thread_born_after_the_snapshot_starts_with_a_stack),
};
TEST_MAIN(cases)
