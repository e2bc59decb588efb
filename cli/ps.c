/* SPDX-License-Identifier: MIT */
/*
 * cli/ps.c - `pipeprof ps`: lists the processes that serve a diagnostic port, the way
 * `dotnet-trace ps` does: a glob of $TMPDIR (or /tmp) for dotnet-diagnostic-PID-KEY-socket,
 * keeping live pids whose socket `collect -p` would trust (a socket owned by the process's user,
 * on which the process itself listens: /proc/net/unix and /proc/PID/fd), with the name and
 * command line from /proc. It never connects to anyone.
 * Context: the CLI's single thread.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ipc/ipc.h"

/* Parses "dotnet-diagnostic-PID-KEY-socket" (digits only, as the .NET client's regex). */
static int
pp_ps_parse_name(const char *name, int *pid)
{
    const char *p = name + strlen("dotnet-diagnostic-");
    char *end;
    long v;

    if (strncmp(name, "dotnet-diagnostic-", 18) != 0 || *p < '0' || *p > '9') {
        return -1;
    }
    v = strtol(p, &end, 10);
    if (*end != '-' || end[1] < '0' || end[1] > '9' || v <= 0) {
        return -1;
    }
    p = end + 1;
    while (*p >= '0' && *p <= '9') {
        p++;
    }
    if (strcmp(p, "-socket") != 0) {
        return -1;
    }
    *pid = (int)v;
    return 0;
}

static void
pp_ps_read(const char *path, char *out, size_t cap, int nul_to_space)
{
    ssize_t n = 0, i;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    out[0] = '\0';
    if (fd >= 0) {
        n = read(fd, out, cap - 1);
        close(fd);
    }
    if (n < 0) {
        n = 0;
    }
    out[n] = '\0';
    for (i = 0; i < n; i++) {
        if (out[i] == '\0' && nul_to_space) {
            out[i] = ' ';
        }
    }
    while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == '\n')) {
        out[--n] = '\0';
    }
}

int
pp_cmd_ps(int argc, char **argv)
{
    const char *dir = getenv("TMPDIR");
    int seen[4096], nseen = 0, found = 0, i;
    struct dirent *de;
    DIR *d;

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: pipeprof ps\n"
               "\n"
               "Lists processes serving a .NET diagnostic port: every\n"
               "dotnet-diagnostic-PID-KEY-socket in $TMPDIR (or /tmp) whose process is alive\n"
               "and owns it and listens on it (another user's socket at that name, or one\n"
               "another process listens on, is not listed).\n"
               "pipeprof agents and .NET runtimes alike, one line each:\n"
               "\n"
               "  PID  NAME  COMMAND LINE\n"
               "\n"
               "NAME is the process's comm, the command line comes from /proc/PID/cmdline.\n"
               "Record one with `pipeprof collect -p PID` or `dotnet-trace collect -p PID`.\n"
               "Exit status: 0, or 2 on a usage error.\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "pipeprof ps: unexpected argument '%s'\n", argv[1]);
        return 2;
    }
    if (dir == NULL || dir[0] == '\0') {
        dir = "/tmp";
    }
    d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "pipeprof ps: cannot read %s\n", dir);
        return 1;
    }
    while ((de = readdir(d)) != NULL) {
        char path[64], name[256], cmd[4096], full[4096];
        struct ipc_peer owner;
        int pid, dup = 0;

        if (pp_ps_parse_name(de->d_name, &pid) < 0 || pid == (int)getpid()) {
            continue;
        }
        for (i = 0; i < nseen; i++) {
            dup |= seen[i] == pid;
        }
        snprintf(full, sizeof(full), "%s/%s", dir, de->d_name);
        if (dup || ipc_sockfile_trusted(full, pid, &owner) != 0 ||
            ipc_sockfile_held_by(dir, de->d_name, pid) == 0) {
            /* listed once; files of dead processes, and sockets `collect -p` would refuse
             * (another user's, no socket at all, or one another process listens on) are
             * skipped; another user's process whose fds cannot be read is listed */
            continue;
        }
        if (nseen < (int)(sizeof(seen) / sizeof(seen[0]))) {
            seen[nseen++] = pid;
        }
        snprintf(path, sizeof(path), "/proc/%d/comm", pid);
        pp_ps_read(path, name, sizeof(name), 0);
        snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
        pp_ps_read(path, cmd, sizeof(cmd), 1);
        printf("%10d %-16s %s\n", pid, name, cmd);
        found++;
    }
    closedir(d);
    if (found == 0) {
        printf("No processes with a diagnostic port were found in %s\n", dir);
    }
    return 0;
}
