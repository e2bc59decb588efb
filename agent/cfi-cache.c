/* SPDX-License-Identifier: MIT */
/*
 * agent/cfi-cache.c - CFI tables shared through files by the processes of one recording
 * (agent/cfi.h says what and why). A file is a fixed header and the table's rows as they are in
 * memory; it is mapped read-only and private, so the pages of one module's table are the page
 * cache's, shared by every process that maps it, and a process touches only those its samples
 * look up. Context: the thread that builds the tables (the agent's manager), outside signal
 * context.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/cfi.h"
#include "host/host.h"

#define AG_CFI_CACHE_MAGIC "PPCFI\002\000\000" /* 8 bytes: name and layout version */
#if defined(__x86_64__)
#define AG_CFI_CACHE_MACHINE EM_X86_64
#else
#define AG_CFI_CACHE_MACHINE EM_AARCH64
#endif

struct ag_cfi_cache_head {
    char magic[8];
    uint32_t row_size; /* sizeof(struct ag_cfi_row): another layout is another file format */
    uint32_t machine;  /* ELF e_machine: the register rules are the architecture's */
    uint64_t n;        /* rows that follow the header */
    uint64_t fdes;
    uint64_t unsupported;
};

/* DIR/cfi-<hex build-id>. Returns 0, or -ENAMETOOLONG (or -ENOENT: no usable build-id). */
static int
ag_cfi_cache_path(const char *dir, const uint8_t *id, size_t id_len, char *out, size_t size)
{
    int len;

    if (dir == NULL || dir[0] == '\0' || id_len < 8) {
        return -ENOENT; /* a short or missing build-id names no file content */
    }
    len = snprintf(out, size, "%s/cfi-", dir);
    for (size_t i = 0; i < id_len && len >= 0 && (size_t)len < size; i++) {
        len += snprintf(out + len, size - (size_t)len, "%02x", id[i]);
    }
    return len >= 0 && (size_t)len < size ? 0 : -ENAMETOOLONG;
}

int
ag_cfi_cache_load(const char *dir, const uint8_t *id, size_t id_len, uint64_t base,
                  struct ag_cfi_table **out)
{
    const struct ag_cfi_cache_head *head;
    const struct ag_cfi_row *rows;
    struct ag_cfi_table *t = NULL;
    char path[PATH_MAX];
    struct stat st;
    void *map = MAP_FAILED;
    int fd, err;

    *out = NULL;
    err = ag_cfi_cache_path(dir, id, id_len, path, sizeof(path));
    if (err != 0) {
        return -ENOENT;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return -ENOENT;
    }
    err = -EBADMSG;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (uint64_t)st.st_size < sizeof(*head)) {
        goto out;
    }
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        goto out;
    }
    head = map;
    if (memcmp(head->magic, AG_CFI_CACHE_MAGIC, sizeof(head->magic)) != 0 ||
        head->row_size != sizeof(struct ag_cfi_row) || head->machine != AG_CFI_CACHE_MACHINE ||
        head->n == 0 ||
        head->n != ((uint64_t)st.st_size - sizeof(*head)) / sizeof(struct ag_cfi_row) ||
        (uint64_t)st.st_size != sizeof(*head) + head->n * sizeof(struct ag_cfi_row)) {
        goto out;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        err = -ENOMEM;
        goto out;
    }
    rows = (const struct ag_cfi_row *)(head + 1);
    /* The file is this user's, in a directory only this user can write, renamed into place
     * whole: its shape is checked, not every row (reading them all would touch every page of a
     * table a short process mostly never looks at). The last pair stands for the order the
     * handler's binary search needs. */
    if (head->n > 1 && rows[head->n - 1].addr <= rows[head->n - 2].addr) {
        goto out;
    }
    t->unsupported = head->unsupported;
    t->base = base;
    t->n = head->n;
    t->fdes = head->fdes;
    t->rows = rows;
    t->map = map;
    t->map_len = (size_t)st.st_size;
    *out = t;
    t = NULL;
    map = MAP_FAILED;
    err = 0;
out:
    free(t);
    if (map != MAP_FAILED) {
        munmap(map, (size_t)st.st_size);
    }
    close(fd);
    return err;
}

static int
ag_cfi_cache_write(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t w = write(fd, p, len);

        if (w <= 0) {
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

void
ag_cfi_cache_store(const char *dir, const uint8_t *id, size_t id_len, const struct ag_cfi_table *t)
{
    struct ag_cfi_cache_head head;
    char path[PATH_MAX], tmp[PATH_MAX];
    int fd, ok;

    if (t == NULL || ag_cfi_cache_path(dir, id, id_len, path, sizeof(path)) != 0 ||
        snprintf(tmp, sizeof(tmp), "%s/.tmp-XXXXXX", dir) >= (int)sizeof(tmp)) {
        return;
    }
    /* Made and moved high with the fd gate held, as a library creation (host/fds.c, whose mkstemp
     * interposer moves it too and registers it once). Made low and kept there while the table
     * was written, a host's pipe got fds 4 and 6 where bare gets 4 and 5
     * (host-contract-fds-create, wall mode, in a fresh-clone CI run). */
    host_fds_hold();
    fd = mkstemp(tmp);
    if (fd >= 0) {
        fd = host_fd_take(fd);
    }
    host_fds_release();
    if (fd < 0) {
        return; /* the next process builds the table again */
    }
    memset(&head, 0, sizeof(head));
    memcpy(head.magic, AG_CFI_CACHE_MAGIC, sizeof(head.magic));
    head.row_size = sizeof(struct ag_cfi_row);
    head.machine = AG_CFI_CACHE_MACHINE;
    head.n = t->n;
    head.fdes = t->fdes;
    head.unsupported = t->unsupported;
    ok = ag_cfi_cache_write(fd, &head, sizeof(head)) == 0 &&
         ag_cfi_cache_write(fd, t->rows, t->n * sizeof(t->rows[0])) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
    }
}
