/* SPDX-License-Identifier: MIT */
/*
 * tests/tools/strip-rundown.c - copies a nettrace file without the events that name its frames
 * (the rundown provider's MethodDCEndVerbose, ModuleDCEnd and the rundown's bounds, the runtime's
 * MethodLoadVerbose): the trace a killed process would have left, with the same samples and
 * modules as one that ended well. tests/cli-record-killed.sh has `report` name it from the files
 * and compares with the agent's own names. Usage: strip-rundown IN.nettrace OUT.nettrace
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nettrace/format.h"
#include "nettrace/nettrace.h"

static int
strip_names_event(const struct nt_event_desc *d)
{
    if (strcmp(d->provider, NT_PROVIDER_RUNDOWN) == 0) {
        return d->event_id == 144 || d->event_id == 146 || d->event_id == 148 || d->event_id == 154;
    }
    return strcmp(d->provider, NT_PROVIDER_RUNTIME) == 0 && d->event_id == 143;
}

int
main(int argc, char **argv)
{
    struct nt_reader *r = NULL;
    struct nt_writer *w = NULL;
    struct nt_source src;
    struct nt_sink sink;
    struct nt_event ev;
    int in, out, err, dropped = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: strip-rundown IN.nettrace OUT.nettrace\n");
        return 2;
    }
    in = open(argv[1], O_RDONLY | O_CLOEXEC);
    out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (in < 0 || out < 0) {
        perror("strip-rundown: open");
        return 1;
    }
    nt_source_fd(&src, &in);
    nt_sink_fd(&sink, &out);
    err = nt_reader_new(&src, NULL, &r);
    if (err == 0) {
        const struct nt_trace_info *info = nt_reader_info(r);
        struct nt_writer_options o;

        nt_writer_options_from_info(&o, info);
        err = nt_writer_new(&o, &sink, &w);
    }
    while (err == 0 && (err = nt_reader_next(r, &ev)) == 1) {
        uint32_t meta;

        err = 0;
        if (ev.desc == NULL) {
            continue;
        }
        if (strip_names_event(ev.desc)) {
            dropped++;
            continue;
        }
        err = nt_writer_define(w, ev.desc, &meta);
        if (err == 0) {
            ev.metadata_id = meta;
            err = nt_writer_write(w, &ev);
        }
    }
    if (err == 0) {
        err = nt_writer_finish(w);
    }
    nt_writer_free(w);
    nt_reader_free(r);
    close(in);
    if (close(out) != 0 && err == 0) {
        err = -errno;
    }
    if (err != 0) {
        fprintf(stderr, "strip-rundown: %s\n", strerror(-err));
        return 1;
    }
    printf("%d naming events dropped\n", dropped);
    return 0;
}
