/* SPDX-License-Identifier: MIT */
/*
 * profile/fmt-folded.c - collapsed stacks, one line per distinct stack: `THREAD;ROOT;...;LEAF
 * COUNT` (`PROCESS;THREAD;...` when the profile holds several processes), sorted, as
 * FlameGraph's flamegraph.pl, speedscope and inferno read them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile/internal.h"

/*
 * Appends s to *buf. In a frame name (escape != 0), ';' (the frame separator) becomes ':' and a
 * newline a space, so that every line stays one stack.
 */
static int
pp_folded_append(char **buf, size_t *len, size_t *cap, const char *s, int escape)
{
    size_t n = strlen(s), i;

    if (*len + n + 2 > *cap) {
        size_t ncap = (*cap + n + 2) * 2;
        char *b = realloc(*buf, ncap);

        if (b == NULL) {
            return -ENOMEM;
        }
        *buf = b;
        *cap = ncap;
    }
    for (i = 0; i < n; i++) {
        char c = s[i];

        if (escape && c == ';') {
            c = ':';
        } else if (escape && c == '\n') {
            c = ' ';
        }
        (*buf)[(*len)++] = c;
    }
    (*buf)[*len] = '\0';
    return 0;
}

struct pp_folded_line {
    char *text;
    uint64_t count;
};

static int
pp_folded_cmp(const void *a, const void *b)
{
    return strcmp(((const struct pp_folded_line *)a)->text,
                  ((const struct pp_folded_line *)b)->text);
}

int
pp_write_folded(const struct pp_profile *p, FILE *out, char *err_msg, size_t errlen)
{
    struct pp_folded_line *lines = calloc(p->stack_count + 1, sizeof(*lines));
    size_t n = 0, i;
    int err = 0;

    if (lines == NULL) {
        err = -ENOMEM;
        goto out;
    }
    for (i = 0; i < p->stack_count; i++) {
        const struct pp_profile_stack *st = &p->stacks[i];
        char *buf = NULL, label[320], proc[320];
        size_t len = 0, cap = 0;
        uint32_t d;

        if (st->samples == 0) {
            continue;
        }
        /* Several processes: each stack starts at its process, then its thread. */
        pp_profile_thread_process_label(p, st->thread_id, proc, sizeof(proc));
        if (proc[0] != '\0') {
            err = pp_folded_append(&buf, &len, &cap, proc, 1);
            if (err == 0) {
                err = pp_folded_append(&buf, &len, &cap, ";", 0);
            }
        }
        if (err == 0) {
            err = pp_folded_append(&buf, &len, &cap,
                                   pp_profile_thread_label(p, st->thread_id, label, sizeof(label)),
                                   1);
        }
        for (d = st->depth; err == 0 && d > 0; d--) { /* root first */
            err = pp_folded_append(&buf, &len, &cap, ";", 0);
            if (err == 0) {
                err = pp_folded_append(&buf, &len, &cap, p->names[st->names[d - 1]], 1);
            }
        }
        if (err != 0) {
            free(buf);
            goto out;
        }
        lines[n].text = buf;
        lines[n].count = st->samples;
        n++;
    }
    /* Stacks that differ only in addresses inside one function fold into one line. */
    if (n > 1) {
        qsort(lines, n, sizeof(*lines), pp_folded_cmp);
    }
    for (i = 0; i < n; i++) {
        uint64_t count = lines[i].count;

        while (i + 1 < n && strcmp(lines[i].text, lines[i + 1].text) == 0) {
            count += lines[++i].count;
        }
        if (fprintf(out, "%s %llu\n", lines[i].text, (unsigned long long)count) < 0) {
            err = -EIO;
            goto out;
        }
    }
out:
    if (err != 0) {
        snprintf(err_msg, errlen, "folded: %s", strerror(-err));
    }
    for (i = 0; lines != NULL && i < n; i++) {
        free(lines[i].text);
    }
    free(lines);
    return err;
}
