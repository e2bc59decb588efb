/* SPDX-License-Identifier: MIT */
/*
 * shim/internal.h - what shim.c uses of the shim's other files. Private to shim/.
 */
#ifndef SHIM_INTERNAL_H
#define SHIM_INTERNAL_H

#include <stddef.h>

/* The providers of the PIPEPROF_OUTPUT session: pipeprof's samples and events, at the mode and
 * rate PIPEPROF_MODE and PIPEPROF_HZ give the agent's defaults. */
#define SHIM_OUTPUT_PROVIDERS "Microsoft-DotNETCore-SampleProfiler:0:4,pipeprof:0:4"

/*
 * PIPEPROF_OUTPUT=PATH (shim/output.c): opens the file this image records into, named by the
 * rules docs/ipc.md gives ("%p" the pid, "%%" a percent sign; the first image of a process tree
 * writes PATH, every later one a name of its own and never an existing file). The first image
 * marks the environment (PIPEPROF_OUTPUT_ROOT) unless running (the host runs already, and its
 * threads may read the environment). Returns the descriptor (close-on-exec), -1 when the
 * variable is unset or empty, or -1 after one line on stderr saying why nothing is written.
 * Context: the constructor, or the thread that starts a fork()ed child's agent.
 */
int shim_output_open(int running);

#endif /* SHIM_INTERNAL_H */
