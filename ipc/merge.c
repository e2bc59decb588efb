/* SPDX-License-Identifier: MIT */
/*
 * ipc/merge.c - the runtime's event stream of a merged session, in a .NET host
 * (docs/dotnet-hosts.md): a CollectTracing starts the same session in the runtime (upstream.c),
 * and a reader thread of its own turns the runtime's stream into events queued for the loop,
 * which session.c writes into the client's stream beside the agent's (ipc_merge_pump()).
 *
 * Context: two sides of one queue. The reader thread (ipc_merge_main() and what it calls) owns
 * the nettrace reader and the socket and nothing of the server's; the loop thread drains the
 * queue (ipc_merge_pump(), ipc_merge_define()) and owns the metadata map. They meet only in
 * struct ipc_merge, under its lock; the last of the two references frees it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/upstream-internal.h"

#define IPC_MERGE_QUEUE_BYTES (32u << 20) /* runtime events read but not written yet */
/* A runtime that delivered nothing for this long is not waited for (ipc_merge_watermark()). */
#define IPC_MERGE_SILENT_NS   (2000ull * 1000000)

/* One event read from the runtime's stream (or a count of events it lost), queued for the loop.
 * The description lives in the reader, which outlives every item. */
struct ipc_merge_item {
    struct ipc_merge_item *next;
    const struct nt_event_desc *desc; /* NULL: lost events of ev.capture_thread_id */
    uint32_t lost;
    struct nt_event ev;
    size_t size;
    uint8_t data[]; /* the stack, then the payload */
};

struct ipc_merge_map_slot {
    const struct nt_event_desc *desc;
    uint32_t id;
};

struct ipc_merge {
    pthread_mutex_t lock;
    int refs;      /* under lock: the reader thread and the session */
    int fd;        /* the runtime's stream; closed with the last reference */
    int done;      /* under lock: the reader thread has ended */
    int cancelled; /* under lock */
    struct ipc_merge_item *head, **tail;
    size_t bytes;             /* under lock: queued */
    char why[200];            /* under lock once done: why the stream ended early, or "" */
    struct nt_reader *reader; /* the thread's; freed with the last reference */
    void (*thread_init)(void);
    /* converts the runtime's ticks to the writer's CLOCK_MONOTONIC nanoseconds */
    uint64_t rt_freq;
    int64_t rt_offset;
    /* the merged stream's sync time: when the runtime was asked (struct ipc_up_request) */
    uint64_t sync_ticks;
    int64_t sync_unix_ns;
    /* Under lock, written by the reader thread: the runtime's watermark, the time below which
     * no later event of its stream goes (ipc_merge_promise()), and when it last delivered bytes
     * (nt_clock_now()). */
    uint64_t promised;
    uint64_t heard_ns;
    /* loop thread only: metadata ids in the session's writer */
    struct ipc_merge_map_slot *map;
    size_t map_cap, map_count;
    uint64_t written, dropped;
    uint64_t pumped_ns; /* the last pump, which the event source's drain followed */
    uint64_t silences;  /* times the runtime, silent past IPC_MERGE_SILENT_NS, was not waited for */
    int waited;         /* the last pump waited for the runtime */
    int reported;       /* the runtime's end was seen (an early end logged) */
};

static void
ipc_merge_unref(struct ipc_merge *m)
{
    struct ipc_merge_item *it, *next;
    int last;

    pthread_mutex_lock(&m->lock);
    last = --m->refs == 0;
    pthread_mutex_unlock(&m->lock);
    if (!last) {
        return;
    }
    for (it = m->head; it != NULL; it = next) {
        next = it->next;
        free(it);
    }
    nt_reader_free(m->reader);
    close(m->fd);
    free(m->map);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static ssize_t
ipc_merge_read(void *ctx, void *buf, size_t len)
{
    struct ipc_merge *m = ctx;
    ssize_t n;

    do {
        n = recv(m->fd, buf, len, 0);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
        /* part of a block is still a delivery: the runtime is not silent, only slow */
        pthread_mutex_lock(&m->lock);
        m->heard_ns = nt_clock_now();
        pthread_mutex_unlock(&m->lock);
    }
    return n < 0 ? -errno : n;
}

static void
ipc_merge_push(struct ipc_merge *m, struct ipc_merge_item *it)
{
    it->next = NULL;
    *m->tail = it;
    m->tail = &it->next;
    m->bytes += it->size;
}

/* A count of the runtime's events that did not reach the queue. */
static void
ipc_merge_note_lost(struct ipc_merge *m, uint64_t capture_thread, uint32_t n)
{
    struct ipc_merge_item *it = calloc(1, sizeof(*it));

    if (it == NULL) {
        return;
    }
    it->ev.capture_thread_id = capture_thread;
    it->lost = n;
    it->size = sizeof(*it);
    pthread_mutex_lock(&m->lock);
    ipc_merge_push(m, it);
    pthread_mutex_unlock(&m->lock);
}

static void
ipc_merge_clock(struct ipc_merge *m, const struct nt_trace_info *info)
{
    /* On Linux the runtime's clock is CLOCK_MONOTONIC in nanoseconds, the writer's own; another
     * frequency is scaled and aligned by the two clocks' readings at the stream's start. */
    m->rt_freq = info->ticks_per_second;
    if (m->rt_freq == 1000000000u || m->rt_freq == 0) {
        m->rt_freq = 1000000000u;
        m->rt_offset = 0;
        return;
    }
    m->rt_offset = (int64_t)nt_clock_now() -
                   (int64_t)((double)info->sync_time_ticks * 1e9 / (double)m->rt_freq);
}

/*
 * What the runtime's stream promises once ev is queued: an IsSorted event says that no later
 * event of the stream is older (format doc 4.3; the runtime marks the first event of each
 * capture thread's run so). A stream that never marks one is trusted to be disordered by less
 * than the reorder window, as the window alone trusted every source before. Under lock.
 */
static void
ipc_merge_promise(struct ipc_merge *m, const struct nt_event *ev)
{
    uint64_t t = ev->timestamp;

    if (!ev->is_sorted) {
        t = t > IPC_MERGE_REORDER_NS ? t - IPC_MERGE_REORDER_NS : 0;
    }
    if (t > m->promised) {
        m->promised = t;
    }
}

static void
ipc_merge_queue_event(struct ipc_merge *m, const struct nt_event *ev)
{
    size_t stack = (size_t)ev->stack_depth * sizeof(uint64_t);
    size_t size = sizeof(struct ipc_merge_item) + stack + ev->payload_size;
    struct ipc_merge_item *it;
    int full;

    pthread_mutex_lock(&m->lock);
    full = m->bytes + size > IPC_MERGE_QUEUE_BYTES;
    pthread_mutex_unlock(&m->lock);
    it = full ? NULL : malloc(size);
    if (it == NULL) {
        ipc_merge_note_lost(m, ev->capture_thread_id, 1);
        return;
    }
    it->desc = ev->desc;
    it->lost = 0;
    it->ev = *ev;
    it->size = size;
    if (m->rt_freq != 1000000000u) {
        it->ev.timestamp =
                (uint64_t)((double)ev->timestamp * 1e9 / (double)m->rt_freq + m->rt_offset);
    }
    if (stack > 0) {
        memcpy(it->data, ev->stack, stack);
    }
    if (ev->payload_size > 0) {
        memcpy(it->data + stack, ev->payload, ev->payload_size);
    }
    it->ev.stack = (const uint64_t *)(void *)it->data;
    it->ev.payload = it->data + stack;
    it->ev.desc = NULL;
    pthread_mutex_lock(&m->lock);
    ipc_merge_push(m, it);
    ipc_merge_promise(m, &it->ev);
    pthread_mutex_unlock(&m->lock);
}

static void
ipc_merge_main(void *arg)
{
    struct ipc_merge *m = arg;
    struct nt_reader_stats st;
    struct nt_reader_error e;
    struct nt_source src;
    struct nt_event ev;
    uint64_t lost = 0;
    char why[200] = "";
    int rc;

    if (m->thread_init != NULL) {
        m->thread_init();
    }
    pthread_setname_np(pthread_self(), "pipeprof-rt");
    src.read = ipc_merge_read;
    src.ctx = m;
    rc = nt_reader_new(&src, NULL, &m->reader);
    if (rc == 0) {
        ipc_merge_clock(m, nt_reader_info(m->reader));
        while ((rc = nt_reader_next(m->reader, &ev)) > 0) {
            nt_reader_get_stats(m->reader, &st);
            if (st.lost_events > lost) {
                /* the runtime's own losses (sequence gaps) stay visible in the merged stream */
                ipc_merge_note_lost(m, ev.capture_thread_id, (uint32_t)(st.lost_events - lost));
                lost = st.lost_events;
            }
            if (ev.desc != NULL) {
                ipc_merge_queue_event(m, &ev);
            } else {
                /* no metadata to write it with: it reaches the client as a counted loss */
                ipc_merge_note_lost(m, ev.capture_thread_id, 1);
            }
        }
    }
    if (rc < 0 && m->reader != NULL) {
        nt_reader_get_error(m->reader, &e);
        snprintf(why, sizeof(why), "at byte %llu: %s", (unsigned long long)e.offset,
                 e.reason != NULL ? e.reason : strerror(-rc));
    } else if (rc < 0) {
        snprintf(why, sizeof(why), "%s", strerror(-rc));
    }
    pthread_mutex_lock(&m->lock);
    if (!m->cancelled) {
        snprintf(m->why, sizeof(m->why), "%s", why);
    }
    m->done = 1;
    pthread_mutex_unlock(&m->lock);
    ipc_merge_unref(m);
}

int
ipc_merge_new(struct ipc_server *s, int fd, struct ipc_merge **out)
{
    struct ipc_merge *m = calloc(1, sizeof(*m));
    int err;

    *out = NULL;
    if (m == NULL) {
        close(fd);
        return -ENOMEM;
    }
    pthread_mutex_init(&m->lock, NULL);
    m->fd = fd;
    m->refs = 2;
    m->tail = &m->head;
    m->rt_freq = 1000000000u;
    m->heard_ns = nt_clock_now(); /* a runtime silent from the start is waited for as long */
    m->thread_init = s->thread_init;
    err = ipc_thread_start(NULL, ipc_merge_main, m);
    if (err < 0) {
        m->refs = 1;
        ipc_merge_unref(m);
        return err;
    }
    *out = m;
    return 0;
}

/* The session writer's metadata id for a description of the runtime's stream (0: none). */
static uint32_t
ipc_merge_define(struct ipc_merge *m, struct nt_writer *w, const struct nt_event_desc *d)
{
    size_t i, mask;
    uint32_t id;

    if (m->map_count * 2 >= m->map_cap) {
        size_t cap = m->map_cap ? m->map_cap * 2 : 64;
        struct ipc_merge_map_slot *map = calloc(cap, sizeof(*map));

        if (map == NULL) {
            return 0;
        }
        for (i = 0; i < m->map_cap; i++) {
            if (m->map[i].desc != NULL) {
                size_t j = ((uintptr_t)m->map[i].desc >> 4) & (cap - 1);

                while (map[j].desc != NULL) {
                    j = (j + 1) & (cap - 1);
                }
                map[j] = m->map[i];
            }
        }
        free(m->map);
        m->map = map;
        m->map_cap = cap;
    }
    mask = m->map_cap - 1;
    for (i = ((uintptr_t)d >> 4) & mask; m->map[i].desc != NULL; i = (i + 1) & mask) {
        if (m->map[i].desc == d) {
            return m->map[i].id;
        }
    }
    if (nt_writer_define(w, d, &id) < 0) {
        return 0;
    }
    m->map[i].desc = d;
    m->map[i].id = id;
    m->map_count++;
    return id;
}

static int
ipc_merge_is_process_info(const struct nt_event_desc *d)
{
    return d->event_id == 1 && d->provider != NULL &&
           strcmp(d->provider, NT_PROVIDER_EVENTPIPE) == 0;
}

/*
 * Sets what the session's writer may release: the watermark, the time up to which every source
 * still waited for has delivered (docs/architecture.md, "Merged sessions: the watermark").
 * - The event source (the agent): its drain follows each pump on the loop and takes what its
 *   rings held, so by this pump it has delivered everything sampled before the last one. Its
 *   own events may lie behind each other by up to the reorder window (a CPU sample's holdback,
 *   a batch's thread events), which its watermark leaves them.
 * - The runtime: what its stream promised (ipc_merge_promise()), while it delivers. One that
 *   delivered nothing for IPC_MERGE_SILENT_NS, or whose stream ended, is not waited for: a
 *   runtime that stops holds neither the stream nor memory longer (its later events may then
 *   be late: counted in the writer's late events, reported at the end).
 * The window still bounds what an arrival or the clock releases, and the writer's byte cap
 * (reorder_max_bytes) what it holds.
 */
static void
ipc_merge_watermark(struct ipc_merge *m, struct nt_writer *w, uint64_t now, uint64_t promised,
                    uint64_t heard, int done)
{
    uint64_t limit = m->pumped_ns > IPC_MERGE_REORDER_NS ? m->pumped_ns - IPC_MERGE_REORDER_NS : 0;
    int waited = !done && now - heard < IPC_MERGE_SILENT_NS;

    if (waited && promised < limit) {
        limit = promised;
    }
    if (m->waited && !waited && !done) {
        m->silences++;
    }
    m->waited = waited;
    m->pumped_ns = now;
    nt_writer_set_release_limit(w, limit);
}

/*
 * At the merged session's end, once its writer has finished (every held event written): what it
 * wrote out of order, if anything. Not at the runtime's end: the events the last pumps wrote may
 * still be held then (a runtime heard again after a silence is waited for from its old promise,
 * which holds its late events until its promise passes them), and are counted as they go out.
 */
void
ipc_merge_finished(struct ipc_session *ss)
{
    struct ipc_merge *m = ss->merge;
    struct nt_writer_stats st;

    if (m == NULL) {
        return;
    }
    nt_writer_get_stats(ss->w, &st);
    if (st.late > 0) {
        ipc_log(ss->srv,
                "session %llx: %llu events written late (unsorted: a source lagged more than "
                "the merge waits; the runtime went unwaited for %llu times, silent for %llu ms; "
                "events held at most %llu KB)",
                (unsigned long long)ss->cfg.session_id, (unsigned long long)st.late,
                (unsigned long long)m->silences,
                (unsigned long long)(IPC_MERGE_SILENT_NS / 1000000),
                (unsigned long long)(st.held_bytes_max / 1024));
    }
}

int
ipc_merge_pump(struct ipc_session *ss, int congested)
{
    struct ipc_merge *m = ss->merge;
    struct ipc_merge_item *it, *next;
    char why[sizeof(m->why)];
    uint64_t promised, heard;
    int done, err;

    if (m == NULL) {
        return 1;
    }
    pthread_mutex_lock(&m->lock);
    it = m->head;
    m->head = NULL;
    m->tail = &m->head;
    m->bytes = 0;
    done = m->done;
    promised = m->promised;
    heard = m->heard_ns;
    memcpy(why, m->why, sizeof(why));
    pthread_mutex_unlock(&m->lock);
    for (; it != NULL; it = next) {
        next = it->next;
        if (it->desc == NULL) {
            err = nt_writer_note_lost(ss->w, it->ev.capture_thread_id, it->lost);
            m->dropped += it->lost;
        } else if (congested) {
            err = nt_writer_note_lost(ss->w, it->ev.capture_thread_id, 1);
            m->dropped++;
        } else {
            it->ev.metadata_id = ipc_merge_define(m, ss->w, it->desc);
            err = it->ev.metadata_id != 0 ? nt_writer_write(ss->w, &it->ev) : -EINVAL;
            if (err == -EINVAL) {
                m->dropped++; /* an event the writer cannot take: counted, not fatal */
                err = nt_writer_note_lost(ss->w, it->ev.capture_thread_id, 1);
            } else if (err == 0) {
                m->written++;
                if (ipc_merge_is_process_info(it->desc)) {
                    ss->runtime_process_info = 1;
                }
            }
        }
        free(it);
        if (err < 0 && err != -EINVAL) {
            for (it = next; it != NULL; it = next) {
                next = it->next;
                free(it);
            }
            return err;
        }
    }
    /* Only now: the promise covers the events just written, which the writer must have before
     * it may release past them. The clock is read after heard was (the reader may have
     * stamped it since this pump began). */
    ipc_merge_watermark(m, ss->w, nt_clock_now(), promised, heard, done);
    if (done && !m->reported && why[0] != '\0') {
        ipc_log(ss->srv, "session %llx: the runtime's stream ended early (%s)",
                (unsigned long long)ss->cfg.session_id, why);
    }
    m->reported |= done;
    return done;
}

void
ipc_merge_set_sync(struct ipc_merge *m, uint64_t ticks, int64_t unix_ns)
{
    m->sync_ticks = ticks;
    m->sync_unix_ns = unix_ns;
}

void
ipc_merge_sync(const struct ipc_merge *m, uint64_t *ticks, int64_t *unix_ns)
{
    *ticks = m->sync_ticks;
    *unix_ns = m->sync_unix_ns;
}

void
ipc_merge_release(struct ipc_merge *m)
{
    if (m == NULL) {
        return;
    }
    pthread_mutex_lock(&m->lock);
    m->cancelled = 1;
    pthread_mutex_unlock(&m->lock);
    shutdown(m->fd, SHUT_RDWR); /* wakes the reader; the runtime sees its client leave */
    ipc_merge_unref(m);
}
