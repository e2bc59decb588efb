/* SPDX-License-Identifier: MIT */
/*
 * cli/output.c - output files that never lose data (cli/output.h): refuse an input as output,
 * write beside, rename into place.
 */
#include "cli/output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int
pp_output_is_input(const char *path, const char *const *inputs, size_t n)
{
    struct stat out, in;
    size_t i;

    if (stat(path, &out) != 0) {
        return 0;
    }
    for (i = 0; i < n; i++) {
        int r = strcmp(inputs[i], "-") == 0 ? fstat(0, &in) : stat(inputs[i], &in);

        if (r == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino) {
            return 1;
        }
    }
    return 0;
}

int
pp_output_open(struct pp_output *o, const char *path, const char *const *inputs, size_t n,
               char *err, size_t errlen)
{
    const char *slash = strrchr(path, '/');
    struct stat st;
    mode_t mask;
    int e;

    memset(o, 0, sizeof(*o));
    o->fd = -1;
    if (pp_output_is_input(path, inputs, n)) {
        snprintf(err, errlen, "%s is also an input; it would be overwritten while it is read",
                 path);
        return -EEXIST;
    }
    if (strlen(path) >= sizeof(o->path)) {
        snprintf(err, errlen, "%s: %s", path, strerror(ENAMETOOLONG));
        return -ENAMETOOLONG;
    }
    strcpy(o->path, path);
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        /* /dev/null, a FIFO, a terminal: written in place (a rename would replace it) */
        o->fd = open(path, O_WRONLY | O_CLOEXEC);
        if (o->fd < 0) {
            e = -errno;
            snprintf(err, errlen, "%s: %s", path, strerror(-e));
            return e;
        }
        return 0;
    }
    if ((size_t)snprintf(o->tmp, sizeof(o->tmp), "%.*s.%s.XXXXXX",
                         slash != NULL ? (int)(slash - path + 1) : 0, path,
                         slash != NULL ? slash + 1 : path) >= sizeof(o->tmp)) {
        snprintf(err, errlen, "%s: %s", path, strerror(ENAMETOOLONG));
        return -ENAMETOOLONG;
    }
    o->fd = mkostemp(o->tmp, O_CLOEXEC);
    if (o->fd < 0) {
        e = -errno;
        snprintf(err, errlen, "cannot create a file beside %s: %s", path, strerror(-e));
        o->tmp[0] = '\0';
        return e;
    }
    mask = umask(0); /* the mode a plain create would give: mkostemp's is 0600 */
    umask(mask);
    (void)fchmod(o->fd, 0666 & ~mask);
    return 0;
}

FILE *
pp_output_file(struct pp_output *o)
{
    if (o->f == NULL && o->fd >= 0) {
        o->f = fdopen(o->fd, "w");
    }
    return o->f;
}

int
pp_output_commit(struct pp_output *o, char *err, size_t errlen)
{
    int e = 0;

    if (o->f != NULL) {
        if (fflush(o->f) != 0 || ferror(o->f)) {
            e = errno != 0 ? -errno : -EIO;
        }
        if (fclose(o->f) != 0 && e == 0) {
            e = -errno;
        }
    } else if (o->fd >= 0 && close(o->fd) != 0) {
        e = -errno;
    }
    o->f = NULL;
    o->fd = -1;
    if (e == 0 && o->tmp[0] != '\0' && rename(o->tmp, o->path) != 0) {
        e = -errno;
    }
    if (e != 0) {
        snprintf(err, errlen, "writing %s: %s", o->path, strerror(-e));
        pp_output_abort(o);
        return e;
    }
    o->tmp[0] = '\0';
    return 0;
}

void
pp_output_abort(struct pp_output *o)
{
    if (o->f != NULL) {
        fclose(o->f);
    } else if (o->fd >= 0) {
        close(o->fd);
    }
    o->f = NULL;
    o->fd = -1;
    if (o->tmp[0] != '\0') {
        unlink(o->tmp);
        o->tmp[0] = '\0';
    }
}

int
pp_output_stdout_failed(const char *command)
{
    int e = 0;

    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        e = errno != 0 ? errno : EIO;
    }
    if (fclose(stdout) != 0 && e == 0) {
        e = errno;
    }
    if (e != 0) {
        fprintf(stderr, "pipeprof %s: writing standard output: %s\n", command, strerror(e));
        return 1;
    }
    return 0;
}
