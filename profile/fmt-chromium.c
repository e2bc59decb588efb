/* SPDX-License-Identifier: MIT */
/*
 * profile/fmt-chromium.c - Chrome's trace-event JSON (the "JSON Object Format" that
 * chrome://tracing, Perfetto's UI and `dotnet-trace convert --format chromium` use): metadata
 * events name the process and its threads, and each thread's samples, in time order, become a
 * flame chart of nested B/E duration events. A sample lasts until the thread's next sample (at
 * most two intervals: a longer gap means the thread was not sampled, and its stack is closed);
 * from one sample to the next only the frames that differ are closed and opened, so a function
 * that stays on the stack is one long slice. Timestamps are microseconds since the first sample.
 * Strings go through cJSON (escaping); events are streamed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile/internal.h"

struct pp_cr {
    const struct pp_profile *p;
    FILE *out;
    uint64_t tid;
    uint32_t *open; /* name indices of the open slices, root first */
    uint32_t depth;
    int first;
};

static double
pp_cr_us(const struct pp_profile *p, uint64_t ts)
{
    return pp_profile_seconds(p, ts) * 1e6;
}

/* One B or E event of frame name index n. */
static int
pp_cr_event(struct pp_cr *c, char ph, uint32_t n, double us)
{
    size_t mlen;
    const char *name = c->p->names[n];
    const char *fn = pp_profile_split_name(name, &mlen);
    int err = 0;

    fprintf(c->out,
            "%s{\"ph\":\"%c\",\"pid\":%u,\"tid\":%llu,\"ts\":%.3f,\"name\":", c->first ? "" : ",\n",
            ph, pp_profile_thread_pid(c->p, c->tid), (unsigned long long)c->tid, us);
    c->first = 0;
    err = pp_profile_json_string(c->out, fn, strlen(fn));
    if (err == 0) {
        fputs(",\"cat\":", c->out);
        err = pp_profile_json_string(c->out, mlen > 0 ? name : "?", mlen > 0 ? mlen : 1);
    }
    fputc('}', c->out);
    return err;
}

/* Closes open slices down to keep frames, deepest first. */
static int
pp_cr_close_to(struct pp_cr *c, uint32_t keep, double us)
{
    int err = 0;

    while (c->depth > keep && err == 0) {
        c->depth--;
        err = pp_cr_event(c, 'E', c->open[c->depth], us);
    }
    return err;
}

/* Moves the open slices to stack st (names leaf first) at time us. */
static int
pp_cr_enter(struct pp_cr *c, const struct pp_profile_stack *st, double us)
{
    uint32_t common = 0, d;
    int err = 0;

    while (common < c->depth && common < st->depth &&
           c->open[common] == st->names[st->depth - 1 - common]) {
        common++;
    }
    err = pp_cr_close_to(c, common, us);
    for (d = common; d < st->depth && err == 0; d++) {
        c->open[c->depth++] = st->names[st->depth - 1 - d];
        err = pp_cr_event(c, 'B', c->open[c->depth - 1], us);
    }
    return err;
}

static int
pp_cr_metadata(struct pp_cr *c)
{
    const struct pp_profile *p = c->p;
    const char *proc = p->process_name != NULL ? p->process_name : "pipeprof";
    char label[320];
    size_t t;
    int err = 0;

    /* One process_name per process: the profile's own, or each merged trace's. */
    for (t = 0; t < (p->process_count > 1 ? p->process_count : 1) && err == 0; t++) {
        const char *name = p->process_count <= 1          ? proc
                           : p->processes[t].name != NULL ? p->processes[t].name
                                                          : "process";

        fprintf(c->out,
                "%s{\"ph\":\"M\",\"pid\":%u,\"tid\":0,\"name\":\"process_name\",\"args\":{"
                "\"name\":",
                t > 0 ? ",\n" : "",
                p->process_count <= 1 ? p->process_id : p->processes[t].process_id);
        err = pp_profile_json_string(c->out, name, strlen(name));
        fputs("}}", c->out);
    }
    c->first = 0;
    for (t = 0; t < p->thread_count && err == 0; t++) {
        fprintf(c->out,
                ",\n{\"ph\":\"M\",\"pid\":%u,\"tid\":%llu,\"name\":\"thread_name\",\"args\":{"
                "\"name\":",
                pp_profile_thread_pid(p, p->threads[t].thread_id),
                (unsigned long long)p->threads[t].thread_id);
        pp_profile_thread_label(p, p->threads[t].thread_id, label, sizeof(label));
        err = pp_profile_json_string(c->out, label, strlen(label));
        fputs("}}", c->out);
    }
    return err;
}

int
pp_write_chromium(const struct pp_profile *p, FILE *out, char *err_msg, size_t errlen)
{
    uint64_t tps = p->ticks_per_second != 0 ? p->ticks_per_second : 1000000000ULL;
    uint64_t interval = p->sampling_interval_ns != 0
                                ? (uint64_t)((double)p->sampling_interval_ns * (double)tps / 1e9)
                                : tps / 100;
    struct pp_cr c = { p, out, 0, NULL, 0, 1 };
    uint32_t max_depth = 1;
    size_t *order = NULL, i, t;
    int err = 0;

    for (i = 0; i < p->stack_count; i++) {
        if (p->stacks[i].depth > max_depth) {
            max_depth = p->stacks[i].depth;
        }
        if (p->stacks[i].names == NULL && p->stacks[i].depth > 0) {
            snprintf(err_msg, errlen, "chromium: the profile's frames are not named");
            return -EINVAL;
        }
    }
    if (interval == 0) {
        interval = 1;
    }
    c.open = malloc(max_depth * sizeof(*c.open));
    err = c.open != NULL ? pp_profile_time_order(p, &order) : -ENOMEM;
    if (err != 0) {
        goto out;
    }
    fputs("{\"traceEvents\":[\n", out);
    err = pp_cr_metadata(&c);
    /* Thread by thread: the events of one thread nest only among themselves. */
    for (t = 0; t < p->thread_count && err == 0; t++) {
        uint64_t prev = 0;
        int any = 0;

        c.tid = p->threads[t].thread_id;
        c.depth = 0;
        for (i = 0; i < p->timeline_count && err == 0; i++) {
            const struct pp_profile_sample *s = &p->timeline[order[i]];
            const struct pp_profile_stack *st = &p->stacks[s->stack];

            if (st->thread_id != c.tid) {
                continue;
            }
            if (any && s->timestamp - prev > 2 * interval) {
                err = pp_cr_close_to(&c, 0, pp_cr_us(p, prev + interval)); /* not sampled */
            }
            if (err == 0) {
                err = pp_cr_enter(&c, st, pp_cr_us(p, s->timestamp));
            }
            prev = s->timestamp;
            any = 1;
        }
        if (any && err == 0) {
            err = pp_cr_close_to(&c, 0, pp_cr_us(p, prev + interval));
        }
    }
    fputs("\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":\"pipeprof\"}}\n", out);
    if (err == 0 && ferror(out)) {
        err = -EIO;
    }
out:
    if (err != 0) {
        snprintf(err_msg, errlen, "chromium: %s", strerror(-err));
    }
    free(order);
    free(c.open);
    return err;
}
