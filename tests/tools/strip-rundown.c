/* SPDX-License-Identifier: MIT */
/*
 * tests/tools/strip-rundown.c - copies a nettrace file without the events that name its frames
 * (the rundown provider's MethodDCEndVerbose, ModuleDCEnd and the rundown's bounds, the runtime's
 * MethodLoadVerbose): the trace a killed process would have left, with the same samples and
 * modules as one that ended well. tests/cli-record-killed.sh has `report` name it from the files
 * and compares with the agent's own names. With --old-modules, pipeprof's ModuleLoad loses the
 * fields after its first four (Path, Base, Size, BuildId), as the agent wrote it before the
 * loaded file's identity (FileState...): a trace of an older agent, which a reader names by its
 * older rules (tests/cli-fileident.sh).
 * Usage: strip-rundown [--old-modules] IN.nettrace OUT.nettrace
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

/* The fields of an older ModuleLoad: its first four. */
#define OLD_MODULE_FIELDS 4

static int
old_module_visit(void *ctx, const struct nt_value *v)
{
    const uint8_t **end = ctx;

    if (v->depth == 0 && v->field != NULL && v->field->name != NULL &&
        strcmp(v->field->name, "BuildId") == 0) {
        *end = v->data + v->size + 2; /* its NUL */
    }
    return 0;
}

/* ev as an older agent wrote it: 0, or -EINVAL when its ModuleLoad is not the one expected. */
static int
old_module_load(struct nt_event *ev, struct nt_event_desc *old)
{
    const uint8_t *end = NULL;

    if (ev->desc->field_count <= OLD_MODULE_FIELDS ||
        nt_payload_decode(ev->desc, ev->payload, ev->payload_size, old_module_visit, &end) != 0 ||
        end == NULL) {
        return -EINVAL;
    }
    *old = *ev->desc;
    old->field_count = OLD_MODULE_FIELDS;
    ev->desc = old;
    ev->payload_size = (uint32_t)(end - ev->payload);
    return 0;
}

int
main(int argc, char **argv)
{
    struct nt_event_desc old;
    int old_modules = argc > 1 && strcmp(argv[1], "--old-modules") == 0;
    struct nt_reader *r = NULL;
    struct nt_writer *w = NULL;
    struct nt_source src;
    struct nt_sink sink;
    struct nt_event ev;
    int in, out, err, dropped = 0;

    argv += old_modules;
    argc -= old_modules;
    if (argc != 3) {
        fprintf(stderr, "usage: strip-rundown [--old-modules] IN.nettrace OUT.nettrace\n");
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
        if (old_modules && strcmp(ev.desc->provider, "pipeprof") == 0 &&
            strcmp(ev.desc->name, "ModuleLoad") == 0 && (err = old_module_load(&ev, &old)) != 0) {
            break;
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
