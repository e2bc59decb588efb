/* SPDX-License-Identifier: MIT */
/*
 * cli/convert.c - `pipeprof convert IN --format F [-o OUT]`: writes the samples of a nettrace
 * file in a format other viewers read. Formats: folded (collapsed stacks for FlameGraph).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/profile.h"

static void
pp_convert_usage(FILE *out)
{
    fprintf(out,
            "usage: pipeprof convert IN.nettrace --format FORMAT [-o OUT]\n"
            "\n"
            "Writes the samples of IN (a nettrace file written by pipeprof or by a .NET\n"
            "runtime; '-' for standard input) in another format. OUT defaults to standard\n"
            "output.\n"
            "\n"
            "formats:\n"
            "  folded   collapsed stacks, one line per distinct stack:\n"
            "           `THREAD;ROOT;...;LEAF COUNT` (FlameGraph's flamegraph.pl, speedscope,\n"
            "           inferno). Frames are `module!function`.\n"
            "\n"
            "options:\n"
            "  -f, --format F     output format (required)\n"
            "  -o, --output OUT   output file (default: standard output)\n"
            "  --thread TID       only samples of this thread\n"
            "  --fold REGEX       drop frames whose name matches REGEX (POSIX extended)\n"
            "  -h, --help         this text\n");
}

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

static int
pp_convert_folded(const struct pp_profile *p, FILE *out)
{
    struct pp_folded_line *lines = calloc(p->stack_count + 1, sizeof(*lines));
    size_t n = 0, i;
    int err = 0;

    if (lines == NULL) {
        return -ENOMEM;
    }
    for (i = 0; i < p->stack_count; i++) {
        const struct pp_profile_stack *st = &p->stacks[i];
        char *buf = NULL;
        size_t len = 0, cap = 0;
        uint32_t d;

        err = pp_folded_append(&buf, &len, &cap, pp_profile_thread_label(p, st->thread_id), 1);
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
        fprintf(out, "%s %llu\n", lines[i].text, (unsigned long long)count);
    }
out:
    for (i = 0; i < n; i++) {
        free(lines[i].text);
    }
    free(lines);
    return err;
}

int
pp_cmd_convert(int argc, char **argv)
{
    static const struct option opts[] = {
        { "format", required_argument, NULL, 'f' }, { "output", required_argument, NULL, 'o' },
        { "thread", required_argument, NULL, 'T' }, { "fold", required_argument, NULL, 'F' },
        { "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
    };
    struct pp_profile_filter filter = { 0 };
    struct pp_profile *p = NULL;
    const char *format = NULL, *output = NULL;
    FILE *out = stdout;
    char err[512], *end;
    int c, rc = 1, e;

    optind = 1;
    while ((c = getopt_long(argc, argv, "f:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            format = optarg;
            break;
        case 'o':
            output = optarg;
            break;
        case 'T':
            filter.thread_id = strtoull(optarg, &end, 10);
            if (*end != '\0' || filter.thread_id == 0) {
                fprintf(stderr, "pipeprof convert: --thread needs a thread id\n");
                return 2;
            }
            break;
        case 'F':
            filter.fold_re = optarg;
            break;
        case 'h':
            pp_convert_usage(stdout);
            return 0;
        default:
            pp_convert_usage(stderr);
            return 2;
        }
    }
    if (optind + 1 != argc || format == NULL) {
        pp_convert_usage(stderr);
        return 2;
    }
    if (strcmp(format, "folded") != 0) {
        fprintf(stderr, "pipeprof convert: unknown format '%s' (known: folded)\n", format);
        return 2;
    }
    if (pp_profile_load(argv[optind], &filter, &p, err, sizeof(err)) != 0) {
        fprintf(stderr, "pipeprof convert: %s\n", err);
        return 1;
    }
    if (output != NULL && (out = fopen(output, "w")) == NULL) {
        fprintf(stderr, "pipeprof convert: %s: %s\n", output, strerror(errno));
        out = NULL;
        goto out;
    }
    e = pp_convert_folded(p, out);
    if (e != 0 || fflush(out) != 0 || ferror(out)) {
        fprintf(stderr, "pipeprof convert: writing %s failed: %s\n",
                output != NULL ? output : "standard output", strerror(e != 0 ? -e : errno));
        goto out;
    }
    rc = 0;
out:
    if (out != NULL && out != stdout && fclose(out) != 0 && rc == 0) {
        fprintf(stderr, "pipeprof convert: %s: %s\n", output, strerror(errno));
        rc = 1;
    }
    pp_profile_free(p);
    return rc;
}
