/* SPDX-License-Identifier: MIT */
/*
 * include/pipeprof.h - pipeprof for programs that link it in (build/lib/libpipeprof.so, linked
 * with -lpipeprof): record the program's own native stacks into a nettrace file, the way
 * pprof-rs's ProfilerGuard records a profile. The library also serves the diagnostic port as
 * when it is preloaded, so dotnet-trace and `pipeprof collect` work alongside.
 *
 *   struct pipeprof_options opts = { PIPEPROF_MODE_CPU, 99 };
 *   pipeprof_start(&opts, "out.nettrace");
 *   ... work ...
 *   pipeprof_stop();   // writes the rundown (function names) and closes the file
 *
 * Context: call both from ordinary threads (not from signal handlers). One recording at a time.
 */
#ifndef PIPEPROF_H
#define PIPEPROF_H

#ifdef __cplusplus
extern "C" {
#endif

enum pipeprof_mode {
    PIPEPROF_MODE_DEFAULT = 0, /* PIPEPROF_MODE from the environment, else cpu */
    PIPEPROF_MODE_CPU = 1,     /* running threads, per-thread CPU-time timers */
    PIPEPROF_MODE_WALL = 2,    /* every thread, running or waiting */
};

struct pipeprof_options {
    enum pipeprof_mode mode;
    unsigned hz; /* 1..1000; 0: PIPEPROF_HZ from the environment, else 99 */
};

/*
 * Starts sampling every thread of the process and streaming the samples into a nettrace file at
 * path (created or truncated). opts may be NULL for the defaults. Returns 0, or a negative errno:
 * -EBUSY (a recording is already running, or a diagnostic-port session is sampling this
 * process), -EINVAL (bad options or environment), -EPERM (the process started under a seccomp
 * filter that kills a system call the library needs: nothing is started), or the error of
 * opening the file or starting the sampler.
 */
int pipeprof_start(const struct pipeprof_options *opts, const char *path);

/*
 * Stops the recording started by pipeprof_start(): the last samples, the rundown that names
 * every sampled function, and the end of the stream are written, and the file is closed.
 * Returns 0, -ESRCH (no recording), or the first write error of the recording.
 */
int pipeprof_stop(void);

#ifdef __cplusplus
}
#endif

#endif /* PIPEPROF_H */
