/* SPDX-License-Identifier: MIT */
/*
 * profile/fmt-perf.c - `perf script` text, as `perf script` prints a cpu-clock recording and
 * swift-profile-recorder emits it: per sample a header `COMM PID/TID SECONDS: 1 cpu-clock:`, one
 * `\tADDRESS FUNCTION (MODULE)` line per frame, leaf first, and an empty line. FlameGraph's
 * stackcollapse-perf.pl, speedscope, the Firefox Profiler and inferno read it. Samples come in
 * timeline order; a profile without a timeline gives one record per stack, weighted by its period.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile/internal.h"

/*
 * The COMM of a thread: its name, else the process name, else "pipeprof". Whitespace becomes '_'
 * because readers find the PID as the first number after a space: "worker 2 17/18" would read as
 * COMM "worker", PID 2. Ownership: caller frees the result.
 */
static char *
pp_perf_comm(const struct pp_profile *p, const char *thread_name)
{
    const char *src = thread_name != NULL && thread_name[0] != '\0'           ? thread_name
                      : p->process_name != NULL && p->process_name[0] != '\0' ? p->process_name
                                                                              : "pipeprof";
    char *comm = strdup(src), *c;

    for (c = comm; c != NULL && *c != '\0'; c++) {
        if (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r') {
            *c = '_';
        }
    }
    return comm;
}

/* Writes s[0..len), a newline (which would end the record early) written as a space. */
static void
pp_perf_put(FILE *out, const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++) {
        putc(s[i] == '\n' || s[i] == '\r' ? ' ' : s[i], out);
    }
}

/* One record: the header, then the frames leaf first, then the empty line that ends it. */
static int
pp_perf_record(const struct pp_profile *p, const struct pp_profile_stack *st, const char *comm,
               uint64_t timestamp, uint64_t period, FILE *out)
{
    uint32_t d;

    fprintf(out, "%s %u/%llu %.6f: %llu cpu-clock:\n", comm,
            (unsigned)pp_profile_thread_pid(p, st->thread_id),
            (unsigned long long)pp_profile_tid(st->thread_id), pp_profile_seconds(p, timestamp),
            (unsigned long long)period);
    for (d = 0; d < st->depth; d++) {
        const char *name = p->names[st->names[d]];
        size_t module_len;
        const char *fn = pp_profile_split_name(name, &module_len);

        fprintf(out, "\t%llx ", (unsigned long long)(st->ips != NULL ? st->ips[d] : 0));
        if (fn[0] != '\0') {
            pp_perf_put(out, fn, strlen(fn));
        } else {
            fputs("[unknown]", out);
        }
        /* perf's name for code outside any known module. */
        fputs(" (", out);
        if (module_len > 0) {
            pp_perf_put(out, name, module_len);
        } else {
            fputs("[unknown]", out);
        }
        fputs(")\n", out);
    }
    return putc('\n', out) == EOF ? -EIO : 0;
}

int
pp_write_perf(const struct pp_profile *p, FILE *out, char *err_msg, size_t errlen)
{
    /* The COMM of every thread, and which one each stack uses (thread_count: no thread entry). */
    char **comms = calloc(p->thread_count + 1, sizeof(*comms));
    size_t *stack_comm = calloc(p->stack_count + 1, sizeof(*stack_comm));
    size_t i, t;
    int err = 0;

    err_msg[0] = '\0';
    if (comms == NULL || stack_comm == NULL) {
        err = -ENOMEM;
        goto out;
    }
    for (t = 0; t <= p->thread_count; t++) {
        comms[t] = pp_perf_comm(p, t < p->thread_count ? p->threads[t].name : NULL);
        if (comms[t] == NULL) {
            err = -ENOMEM;
            goto out;
        }
    }
    for (i = 0; i < p->stack_count; i++) {
        const struct pp_profile_stack *st = &p->stacks[i];
        uint32_t d;

        if (st->depth > 0 && st->names == NULL) {
            snprintf(err_msg, errlen, "perf: the profile's frames are not named");
            err = -EINVAL;
            goto out;
        }
        for (d = 0; d < st->depth; d++) {
            if (st->names[d] >= p->name_count) {
                snprintf(err_msg, errlen, "perf: stack %zu names frame %u out of range", i,
                         (unsigned)st->names[d]);
                err = -EINVAL;
                goto out;
            }
        }
        for (t = 0; t < p->thread_count && p->threads[t].thread_id != st->thread_id; t++) {
            continue;
        }
        stack_comm[i] = t;
    }
    if (p->timeline_count == 0) {
        /* No per-sample order to keep: one record per stack, its samples as the period, which
         * stackcollapse-perf.pl adds up as the stack's weight. */
        for (i = 0; err == 0 && i < p->stack_count; i++) {
            if (p->stacks[i].samples != 0) {
                err = pp_perf_record(p, &p->stacks[i], comms[stack_comm[i]], p->first_ts,
                                     p->stacks[i].samples, out);
            }
        }
        goto out;
    }
    for (i = 0; err == 0 && i < p->timeline_count; i++) {
        const struct pp_profile_sample *s = &p->timeline[i];

        if (s->stack >= p->stack_count) {
            snprintf(err_msg, errlen, "perf: sample %zu refers to stack %u out of range", i,
                     (unsigned)s->stack);
            err = -EINVAL;
            goto out;
        }
        err = pp_perf_record(p, &p->stacks[s->stack], comms[stack_comm[s->stack]], s->timestamp, 1,
                             out);
    }
out:
    if (err == 0 && ferror(out)) {
        err = -EIO;
    }
    if (err != 0 && err_msg[0] == '\0') {
        snprintf(err_msg, errlen, "perf: %s", strerror(-err));
    }
    for (t = 0; comms != NULL && t <= p->thread_count; t++) {
        free(comms[t]);
    }
    free(comms);
    free(stack_comm);
    return err;
}
