/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/fds-early.c - libhost-fds-early.so, a library tests/hosts/fds.c's host needs: its
 * constructor maps a file, an anonymous region, a number that is not open and a file at an offset
 * that is not a multiple of the page, before libpipeprof.so's constructor has run (the loader
 * initialises a program's libraries before a preloaded one), so through host/fds.c's mmap before
 * it resolved the real one: its system call made directly (host_fds_mmap_sys). `fds mmapearly`
 * prints what it got, which must be bare's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

__attribute__((visibility("default"))) const char *host_fds_early(void);

static char early[256];

/* "ok" or the error of one mapping of a page, unmapped again. */
static const char *
early_map(int flags, int fd, off_t off, int *err)
{
    void *m;

    errno = 0;
    m = mmap(NULL, 4096, PROT_READ, flags, fd, off);
    *err = errno;
    if (m == MAP_FAILED) {
        return strerror(*err);
    }
    return munmap(m, 4096) == 0 ? "ok" : "not unmapped";
}

__attribute__((constructor)) static void
early_maps(void)
{
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC), err;
    const char *file = early_map(MAP_PRIVATE, fd, 0, &err);
    const char *anon = early_map(MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &err);
    const char *none = early_map(MAP_PRIVATE, 1000, 0, &err);
    const char *odd = early_map(MAP_PRIVATE, fd, 1, &err);

    snprintf(early, sizeof(early),
             "mmap before the constructors: file %s, anonymous %s, fd 1000 %s, offset 1 %s", file,
             anon, none, odd);
    if (fd >= 0) {
        close(fd);
    }
}

const char *
host_fds_early(void)
{
    return early;
}
