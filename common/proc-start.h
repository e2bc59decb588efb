/* SPDX-License-Identifier: MIT */
/*
 * common/proc-start.h - a process's start time, which with its pid names it across pid reuse.
 *
 * Pids are reused: the kernel hands them out in turn up to kernel.pid_max (32768 by default),
 * and thread ids come from the same space, so a host that creates threads fast wraps it in
 * seconds. A pid alone then names two processes of one recording (record's tally of children
 * without samples counted 994 distinct pids for 1000 children beside a thread-churning
 * program). The start time does not change across exec, as the pid does not. Header only:
 * libc.
 */
#ifndef PP_PROC_START_H
#define PP_PROC_START_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The start time of process pid (0: the caller's own) in clock ticks after boot, field 22 of
 * /proc/PID/stat (of its main thread's task entry for the caller's own); 0 when it cannot be read
 * (the process is gone, /proc is not mounted). Opens and closes one file; errno may change. */
static inline uint64_t
pp_proc_start_ticks(long pid)
{
    char path[48], buf[1024];
    unsigned long long ticks;
    const char *p;
    ssize_t n;
    int fd, field;

    if (pid == 0) {
        /* The thread group leader's task entry, not /proc/self/stat: qemu-user answers the latter
         * itself, with the calling thread's start (a library thread's differs from main's), and
         * passes the former to the kernel, whose answer another process's read of
         * /proc/PID/stat matches. */
        snprintf(path, sizeof(path), "/proc/self/task/%ld/stat", (long)getpid());
    } else {
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    /* The command name (field 2) is in parentheses and may hold spaces and ')': the fields
     * after it start past the last ')'. */
    p = strrchr(buf, ')');
    for (field = 2; p != NULL && field < 22; field++) {
        p = strchr(p + 1, ' ');
    }
    return p != NULL && sscanf(p + 1, "%llu", &ticks) == 1 ? (uint64_t)ticks : 0;
}

#endif /* PP_PROC_START_H */
