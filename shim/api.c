/* SPDX-License-Identifier: MIT */
/*
 * shim/api.c - include/pipeprof.h: a recording into a file for programs that link pipeprof in.
 * It is one more client of the agent's event source (bridge/agent-source.c): a private session
 * with the SampleProfiler and pipeprof providers, whose writer streams into the file, drained
 * every 10 ms by a thread of its own (the event source's callbacks expect one thread, as on the
 * IPC loop). Context: pipeprof_start/stop on ordinary threads; the drain thread is the agent's
 * and is never sampled.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "bridge/agent-source.h"
#include "host/host.h"
#include "include/pipeprof.h"
#include "nettrace/nettrace.h"

#define SHIM_API_DRAIN_MS 10

/* The library is built with -fvisibility=hidden; these two are its public API. */
#define SHIM_API_EXPORT __attribute__((visibility("default")))

struct shim_recording {
    pthread_mutex_t lock; /* serializes start and stop */
    int active;
    int fd;
    struct nt_sink sink;
    struct nt_writer *writer;
    struct ipc_event_source source;
    struct ipc_provider providers[2];
    struct ipc_session_config cfg;
    pthread_t thread;
    _Atomic int stop;
    _Atomic int started; /* 1 while the drain thread starts its session, then its result */
    int err;             /* first error of the drain thread */
};

static struct shim_recording shim_rec = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

static void
shim_api_drain_once(struct shim_recording *rec, int final)
{
    struct ipc_session_view view = { &rec->cfg, rec->writer, 0, final, 0 };
    int err = rec->source.drain(rec->source.ctx, &view, 1);

    if (err == 0) {
        err = nt_writer_poll(rec->writer, nt_clock_now());
    }
    if (err != 0 && rec->err == 0) {
        rec->err = err;
    }
}

/* The drain thread: the session starts and ends here, so the event source sees one thread. */
static void *
shim_api_thread(void *arg)
{
    struct shim_recording *rec = arg;
    struct timespec tick = { 0, SHIM_API_DRAIN_MS * 1000000L };
    int err;

    err = rec->source.session_start(rec->source.ctx, &rec->cfg);
    atomic_store(&rec->started, err);
    if (err != 0) {
        return NULL;
    }
    while (!atomic_load(&rec->stop)) {
        nanosleep(&tick, NULL);
        shim_api_drain_once(rec, 0);
    }
    shim_api_drain_once(rec, 1);
    err = rec->source.rundown(rec->source.ctx, &rec->cfg, rec->writer);
    if (err != 0 && rec->err == 0) {
        rec->err = err;
    }
    rec->source.session_stop(rec->source.ctx, &rec->cfg);
    return NULL;
}

SHIM_API_EXPORT int
pipeprof_start(const struct pipeprof_options *opts, const char *path)
{
    struct shim_recording *rec = &shim_rec;
    struct ag_config cfg;
    char why[256];
    int err;

    pthread_mutex_lock(&rec->lock);
    if (rec->active) {
        err = -EBUSY;
        goto out;
    }
    if (host_filter_killed() != NULL) {
        err = -EPERM; /* a seccomp filter the process inherited kills a call sampling needs */
        goto out;
    }
    ag_config_init(&cfg);
    err = ag_config_from_env(&cfg, why, sizeof(why));
    if (err != 0) {
        fprintf(stderr, "pipeprof: %s\n", why);
        goto out;
    }
    if (opts != NULL && opts->mode != PIPEPROF_MODE_DEFAULT) {
        if (opts->mode != PIPEPROF_MODE_CPU && opts->mode != PIPEPROF_MODE_WALL) {
            err = -EINVAL;
            goto out;
        }
        cfg.mode = opts->mode == PIPEPROF_MODE_WALL ? AG_MODE_WALL : AG_MODE_CPU;
    }
    if (opts != NULL && opts->hz != 0) {
        if (opts->hz > AG_HZ_MAX) {
            err = -EINVAL;
            goto out;
        }
        cfg.hz = opts->hz;
    }
    cfg.disabled = 0;
    rec->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (rec->fd < 0) {
        err = -errno;
        goto out;
    }
    nt_sink_fd(&rec->sink, &rec->fd);
    err = nt_writer_new(NULL, &rec->sink, &rec->writer);
    if (err != 0) {
        goto out;
    }
    /* ag_start() is idempotent: when the library's constructor started the agent, this is a
     * no-op. The agent keeps running after the recording (sampling stops with the session). */
    err = ag_start(&cfg);
    if (err != 0) {
        goto out;
    }
    bridge_agent_source_init(&rec->source, &cfg);
    memset(rec->providers, 0, sizeof(rec->providers));
    rec->providers[0].name = (char *)NT_PROVIDER_SAMPLE_PROFILER;
    rec->providers[0].level = 4;
    rec->providers[1].name = (char *)BRIDGE_PROVIDER_PIPEPROF;
    rec->providers[1].level = 4;
    memset(&rec->cfg, 0, sizeof(rec->cfg));
    rec->cfg.session_id = (uint64_t)(uintptr_t)rec;
    rec->cfg.providers = rec->providers;
    rec->cfg.provider_count = 2;
    rec->cfg.rundown_keyword = 1;
    rec->err = 0;
    atomic_store(&rec->stop, 0);
    atomic_store(&rec->started, 1);
    err = -pthread_create(&rec->thread, NULL, shim_api_thread, rec);
    if (err != 0) {
        goto out;
    }
    /* The session starts on the drain thread; its result is this call's (-EBUSY while a
     * diagnostic-port session drains the agent). */
    while ((err = atomic_load(&rec->started)) == 1) {
        struct timespec pause = { 0, 1000000L };

        nanosleep(&pause, NULL);
    }
    if (err != 0) {
        pthread_join(rec->thread, NULL);
        goto out;
    }
    rec->active = 1;
out:
    if (err != 0 && !rec->active) {
        nt_writer_free(rec->writer);
        rec->writer = NULL;
        if (rec->fd >= 0) {
            close(rec->fd);
            rec->fd = -1;
        }
    }
    pthread_mutex_unlock(&rec->lock);
    return err;
}

SHIM_API_EXPORT int
pipeprof_stop(void)
{
    struct shim_recording *rec = &shim_rec;
    int err;

    pthread_mutex_lock(&rec->lock);
    if (!rec->active) {
        pthread_mutex_unlock(&rec->lock);
        return -ESRCH;
    }
    atomic_store(&rec->stop, 1);
    pthread_join(rec->thread, NULL);
    err = rec->err;
    if (nt_writer_finish(rec->writer) != 0 && err == 0) {
        err = -EIO;
    }
    nt_writer_free(rec->writer);
    rec->writer = NULL;
    if (close(rec->fd) != 0 && err == 0) {
        err = -errno;
    }
    rec->fd = -1;
    rec->active = 0;
    pthread_mutex_unlock(&rec->lock);
    return err;
}
