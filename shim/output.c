/* SPDX-License-Identifier: MIT */
/*
 * shim/output.c - the file PIPEPROF_OUTPUT names, for a process that records itself from its
 * first instruction to its exit without a wrapper (a service, a container). The IPC server writes
 * it (struct ipc_output_options); this file only decides its name and opens it. Names, so that
 * no image overwrites another's file:
 *   - "%p" is the pid, "%%" a percent sign; any other '%' is refused;
 *   - the first image of a process tree (PIPEPROF_OUTPUT_ROOT not set) writes the expanded
 *     PATH, replacing a file of an earlier run, as gperftools' CPUPROFILE does;
 *   - every later image (an exec'd or forked child, the same process after an exec) never
 *     replaces a file: a PATH without "%p" gets ".PID", and a name that exists gets ".2", ".3",
 *     ... (before a ".nettrace" extension, as `pipeprof record` names its children's traces).
 * Context: the constructor, or the thread that starts a fork()ed child's agent.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim/internal.h"

#define SHIM_OUTPUT_TRIES 100 /* names a later image tries before it gives up */
#define SHIM_OUTPUT_EXT   ".nettrace"

/* Expands %p and %%. Returns 1 when the pid was named, 0 when not, -EINVAL or -ENAMETOOLONG. */
static int
shim_output_expand(const char *tmpl, char *out, size_t cap)
{
    size_t o = 0;
    int named = 0, n;

    for (; *tmpl != '\0'; tmpl++) {
        if (*tmpl != '%') {
            n = snprintf(out + o, cap - o, "%c", *tmpl);
        } else if (tmpl[1] == 'p') {
            n = snprintf(out + o, cap - o, "%ld", (long)getpid());
            named = 1;
            tmpl++;
        } else if (tmpl[1] == '%') {
            n = snprintf(out + o, cap - o, "%%");
            tmpl++;
        } else {
            return -EINVAL;
        }
        if (n < 0 || (size_t)n >= cap - o) {
            return -ENAMETOOLONG;
        }
        o += (size_t)n;
    }
    return named;
}

/* path with ".SUFFIX" before its ".nettrace" extension (or at its end) into out. */
static int
shim_output_suffix(const char *path, const char *suffix, char *out, size_t cap)
{
    size_t len = strlen(path), ext = strlen(SHIM_OUTPUT_EXT);
    size_t stem = len > ext && strcmp(path + len - ext, SHIM_OUTPUT_EXT) == 0 ? len - ext : len;
    int n = snprintf(out, cap, "%.*s.%s%s", (int)stem, path, suffix, path + stem);

    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int
shim_output_open(int running)
{
    const char *tmpl = getenv("PIPEPROF_OUTPUT"), *root = getenv("PIPEPROF_OUTPUT_ROOT");
    char base[4096], path[4096 + 32], num[24];
    int first = root == NULL || root[0] == '\0', named, fd = -1, tries, err;

    if (tmpl == NULL || tmpl[0] == '\0') {
        return -1;
    }
    named = shim_output_expand(tmpl, base, sizeof(base));
    if (named == -EINVAL) {
        fprintf(stderr,
                "pipeprof: PIPEPROF_OUTPUT=%s: '%%' must be followed by p or %%; not "
                "recording\n",
                tmpl);
        return -1;
    }
    if (named == 0 && !first) {
        snprintf(num, sizeof(num), "%ld", (long)getpid());
        named = shim_output_suffix(base, num, path, sizeof(base));
        if (named == 0) {
            memcpy(base, path, strlen(path) + 1);
        }
    }
    if (named < 0) {
        fprintf(stderr, "pipeprof: PIPEPROF_OUTPUT=%s: %s; not recording\n", tmpl,
                strerror(-named));
        return -1;
    }
    snprintf(path, sizeof(path), "%s", base);
    if (first) {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    for (tries = 1; !first && fd < 0 && tries <= SHIM_OUTPUT_TRIES; tries++) {
        if (tries > 1) {
            snprintf(num, sizeof(num), "%d", tries);
            if (shim_output_suffix(base, num, path, sizeof(path)) < 0) {
                errno = ENAMETOOLONG;
                break;
            }
        }
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) {
            break;
        }
    }
    if (fd < 0) {
        err = errno;
        fprintf(stderr, "pipeprof: PIPEPROF_OUTPUT: %s: %s; not recording\n", path,
                err == EEXIST ? "every name taken" : strerror(err));
        return -1;
    }
    if (first && !running) {
        snprintf(num, sizeof(num), "%ld", (long)getpid());
        setenv("PIPEPROF_OUTPUT_ROOT", num, 1); /* before main: no other thread reads environ */
    }
    return fd;
}
