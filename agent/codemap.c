/* SPDX-License-Identifier: MIT */
/*
 * agent/codemap.c - which addresses are code: the executable mappings of /proc/self/maps
 * (modules, the vdso, and anonymous ones such as a JIT's), kept as a sorted array on the drain
 * thread. ag_drain() cuts every stack at its first frame outside them, so a frame the unwinder
 * read from a corrupt or foreign stack is never reported as code. Each read also tells modules.c
 * the file-backed ones, so that code in a file the loader does not know (a PE image) is named. The
 * map is re-read when a lookup misses (new code appears: dlopen, JIT), at most once per drain.
 * Context: the consumer thread only (under ag.drain_lock); never a signal handler.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/internal.h"
#include "agent/symbols-internal.h"
#include "common/grow.h"

struct ag_code_range {
    uint64_t lo, hi;
};

static struct ag_code_range *ag_code;
static size_t ag_code_n, ag_code_cap;
static uint64_t ag_code_read_at; /* the drain that last read the map */
static uint64_t ag_code_drain;   /* drains so far */

/* The file-backed executable mappings of one read, handed to modules.c: the loader's ELF objects
 * are modules already, and the others (the PE images of ReadyToRun assemblies, which the .NET
 * runtime maps itself) become modules there, named by file and offset. */
struct ag_codemap_files {
    struct ag_file_code *code;
    size_t n, cap;
    char image_path[PATH_MAX]; /* the latest mapping at file offset 0, where an image starts */
    uint64_t image;
};

static int
ag_codemap_file_add(struct ag_codemap_files *fs, uint64_t lo, uint64_t hi, uint64_t offset,
                    const char *path)
{
    struct ag_file_code *fc;

    if (pp_grow_array((void **)&fs->code, &fs->cap, fs->n + 1, sizeof(*fs->code)) != 0) {
        return -ENOMEM;
    }
    fc = &fs->code[fs->n];
    fc->lo = lo;
    fc->hi = hi;
    /* A PE image is mapped section by section from its headers on (offset 0), so the header's
     * address is its base and an offset from it is the address in the image (an RVA). */
    fc->image = strcmp(path, fs->image_path) == 0 && fs->image <= lo ? fs->image : lo - offset;
    fc->path = strdup(path);
    if (fc->path == NULL) {
        return -ENOMEM;
    }
    fs->n++;
    return 0;
}

static void
ag_codemap_files_free(struct ag_codemap_files *fs)
{
    for (size_t i = 0; i < fs->n; i++) {
        free((void *)(uintptr_t)fs->code[i].path);
    }
    free(fs->code);
}

static int
ag_codemap_read(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    struct ag_codemap_files *files = calloc(1, sizeof(*files));
    char line[PATH_MAX + 128];
    size_t n = 0;
    int err = 0, in_tail = 0;

    if (f == NULL || files == NULL) {
        err = f == NULL ? -errno : -ENOMEM;
        goto out;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi, offset = 0;
        char perms[8];
        size_t len = strlen(line);
        int path_at = 0, whole = len > 0 && line[len - 1] == '\n', tail = in_tail;

        in_tail = !whole;
        if (tail) {
            continue; /* the rest of a line longer than the buffer */
        }
        if (whole) {
            line[len - 1] = '\0';
        }
        if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perms, &offset, &path_at) < 3) {
            continue;
        }
        if (!whole) {
            path_at = 0; /* a path longer than PATH_MAX: the range is code, unnamed */
        }
        if (path_at > 0 && line[path_at] == '/' && offset == 0) {
            snprintf(files->image_path, sizeof(files->image_path), "%s", line + path_at);
            files->image = lo;
        }
        if (perms[2] != 'x') {
            continue;
        }
        /* memfd's files are memory: the .NET runtime maps its JIT code twice from one (W^X),
         * and that code is named by the runtime's events, not by a file. */
        if (path_at > 0 && line[path_at] == '/' && strncmp(line + path_at, "/memfd:", 7) != 0 &&
            ag_codemap_file_add(files, lo, hi, offset, line + path_at) != 0) {
            err = -ENOMEM;
            goto out;
        }
        if (n == ag_code_cap) {
            size_t cap = ag_code_cap != 0 ? ag_code_cap * 2 : 256;
            struct ag_code_range *p = realloc(ag_code, cap * sizeof(*p));

            if (p == NULL) {
                err = -ENOMEM;
                goto out;
            }
            ag_code = p;
            ag_code_cap = cap;
        }
        ag_code[n].lo = lo; /* the kernel lists mappings in address order */
        ag_code[n].hi = hi;
        n++;
    }
    ag_code_n = n;
    ag_code_read_at = ag_code_drain;
    /* Naming is a side matter here: a failure leaves the frames unnamed, never cut. */
    (void)!ag_modules_note_file_code(files->code, files->n);
out:
    if (f != NULL) {
        fclose(f);
    }
    if (files != NULL) {
        ag_codemap_files_free(files);
    }
    free(files);
    return err;
}

static int
ag_codemap_find(uint64_t pc)
{
    size_t lo = 0, hi = ag_code_n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (pc < ag_code[mid].lo) {
            hi = mid;
        } else if (pc >= ag_code[mid].hi) {
            lo = mid + 1;
        } else {
            return 1;
        }
    }
    return 0;
}

void
ag_codemap_begin_drain(void)
{
    ag_code_drain++;
}

int
ag_codemap_contains(uint64_t pc)
{
    if (ag_codemap_find(pc)) {
        return 1;
    }
    if (ag_code_read_at == ag_code_drain && ag_code_n != 0) {
        return 0;
    }
    if (ag_codemap_read() != 0) {
        return 1; /* cannot tell: keep the frame rather than lose the stack */
    }
    return ag_codemap_find(pc);
}

void
ag_codemap_fini(void)
{
    free(ag_code);
    ag_code = NULL;
    ag_code_n = ag_code_cap = 0;
}
