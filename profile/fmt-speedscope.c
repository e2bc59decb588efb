/* SPDX-License-Identifier: MIT */
/*
 * profile/fmt-speedscope.c - speedscope's file format (https://www.speedscope.app/
 * file-format-schema.json): one shared frame table (a frame per distinct name: the function,
 * with its module as the file) and one "sampled" profile per thread, whose samples list frame
 * indices root first in time order, with weights in samples (unit "none"), so that every
 * profile's total is its thread's sample count, as `report` counts them. Consecutive samples of
 * one thread with the same stack are one entry with their summed weight.
 * Strings go through cJSON (escaping); the arrays are streamed, so memory stays small.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile/internal.h"

static int
pp_ss_frames(const struct pp_profile *p, FILE *out)
{
    size_t i;
    int err = 0;

    fputs("\"shared\":{\"frames\":[", out);
    for (i = 0; i < p->name_count && err == 0; i++) {
        size_t mlen;
        const char *fn = pp_profile_split_name(p->names[i], &mlen);

        fputs(i > 0 ? ",{\"name\":" : "{\"name\":", out);
        err = pp_profile_json_string(out, fn, strlen(fn));
        if (err == 0 && mlen > 0) {
            fputs(",\"file\":", out);
            err = pp_profile_json_string(out, p->names[i], mlen);
        }
        fputc('}', out);
    }
    fputs("]}", out);
    return err;
}

/* One stack, root first, as a JSON array of frame indices. */
static void
pp_ss_stack(const struct pp_profile_stack *st, FILE *out)
{
    uint32_t d;

    fputc('[', out);
    for (d = st->depth; d > 0; d--) {
        fprintf(out, d < st->depth ? ",%u" : "%u", st->names[d - 1]);
    }
    fputc(']', out);
}

/*
 * The (stack, weight) entries of one thread: from the timeline in time order when there is one
 * (runs of the same stack merged), else the thread's stacks with their counts. Returns the
 * number of entries written to idx/weight (both sized for the worst case by the caller).
 */
static size_t
pp_ss_entries(const struct pp_profile *p, uint64_t tid, const size_t *order, size_t norder,
              uint32_t *idx, uint64_t *weight)
{
    size_t n = 0, i;

    if (p->timeline_count > 0) {
        for (i = 0; i < norder; i++) {
            const struct pp_profile_sample *s = &p->timeline[order[i]];

            if (p->stacks[s->stack].thread_id != tid) {
                continue;
            }
            if (n > 0 && idx[n - 1] == s->stack) {
                weight[n - 1]++;
            } else {
                idx[n] = s->stack;
                weight[n] = 1;
                n++;
            }
        }
        return n;
    }
    for (i = 0; i < p->stack_count; i++) {
        if (p->stacks[i].thread_id == tid && p->stacks[i].samples > 0) {
            idx[n] = (uint32_t)i;
            weight[n] = p->stacks[i].samples;
            n++;
        }
    }
    return n;
}

int
pp_write_speedscope(const struct pp_profile *p, FILE *out, char *err_msg, size_t errlen)
{
    size_t cap = p->timeline_count > p->stack_count ? p->timeline_count : p->stack_count;
    size_t *order = NULL, i, t, written = 0;
    uint32_t *idx = NULL;
    uint64_t *weight = NULL;
    char label[320], proc[320], name[660];
    int err = 0;

    for (i = 0; i < p->stack_count; i++) {
        if (p->stacks[i].samples > 0 && p->stacks[i].names == NULL && p->stacks[i].depth > 0) {
            snprintf(err_msg, errlen, "speedscope: the profile's frames are not named");
            return -EINVAL;
        }
    }
    idx = malloc((cap + 1) * sizeof(*idx));
    weight = malloc((cap + 1) * sizeof(*weight));
    err = idx != NULL && weight != NULL ? pp_profile_time_order(p, &order) : -ENOMEM;
    if (err != 0) {
        goto out;
    }
    fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",", out);
    err = pp_ss_frames(p, out);
    if (err != 0) {
        goto out;
    }
    fputs(",\"profiles\":[", out);
    for (t = 0; t < p->thread_count && err == 0; t++) {
        const struct pp_profile_thread *th = &p->threads[t];
        size_t n = pp_ss_entries(p, th->thread_id, order, p->timeline_count, idx, weight), e;
        uint64_t total = 0;

        if (th->samples == 0) {
            continue;
        }
        fputs(written++ > 0 ? ",{\"type\":\"sampled\",\"name\":"
                            : "{\"type\":\"sampled\",\"name\":",
              out);
        /* Several processes: a profile per process and thread, named by both. */
        pp_profile_thread_label(p, th->thread_id, label, sizeof(label));
        pp_profile_thread_process_label(p, th->thread_id, proc, sizeof(proc));
        snprintf(name, sizeof(name), "%s%s%s", proc, proc[0] != '\0' ? ": " : "", label);
        err = pp_profile_json_string(out, name, strlen(name));
        for (e = 0; e < n; e++) {
            total += weight[e];
        }
        fprintf(out, ",\"unit\":\"none\",\"startValue\":0,\"endValue\":%llu,\"samples\":[",
                (unsigned long long)total);
        for (e = 0; e < n; e++) {
            if (e > 0) {
                fputc(',', out);
            }
            pp_ss_stack(&p->stacks[idx[e]], out);
        }
        fputs("],\"weights\":[", out);
        for (e = 0; e < n; e++) {
            fprintf(out, e > 0 ? ",%llu" : "%llu", (unsigned long long)weight[e]);
        }
        fputs("]}", out);
    }
    if (err != 0) {
        goto out;
    }
    fputs("],\"name\":", out);
    err = pp_profile_json_string(out, p->process_name != NULL ? p->process_name : "pipeprof",
                                 strlen(p->process_name != NULL ? p->process_name : "pipeprof"));
    fputs(",\"activeProfileIndex\":0,\"exporter\":\"pipeprof\"}\n", out);
    if (err == 0 && ferror(out)) {
        err = -EIO;
    }
out:
    if (err != 0) {
        snprintf(err_msg, errlen, "speedscope: %s", strerror(-err));
    }
    free(order);
    free(idx);
    free(weight);
    return err;
}
