/* SPDX-License-Identifier: MIT */
/*
 * cli/names.h - names the frames of a trace that ended before its rundown (a process killed by a
 * signal: its agent never wrote the MethodDCEndVerbose events that name its native frames), from
 * the files its ModuleLoad events point to, with the agent's own symbol code (symbols/symbols.h),
 * so that a name is the one the agent's rundown would have written. A file that is not the one
 * the process loaded (its build-id differs; without a build-id, its load span differs, or it is
 * not the file ModuleLoad's File* fields say was loaded, or, in an older agent's trace without
 * them, it was modified, or moved or copied into place, after the recording began) names
 * nothing: a rebuilt binary must not give wrong names.
 * Context: the CLI's single thread.
 */
#ifndef PP_CLI_NAMES_H
#define PP_CLI_NAMES_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/compiler.h"
#include "nettrace/nettrace.h"

/* The name of the pipeprof event that says what a rundown from files named (pp_names_write). */
#define PP_NAMES_EVENT "NamesFromFiles"

/* Why frames stayed unnamed, counted in frames (an address times the samples that held it). */
enum pp_names_why {
    PP_NAMES_NO_MODULE, /* in no module of the trace (JIT code, or a module never announced) */
    PP_NAMES_NO_FILE,   /* its module's file is gone or unreadable, or it has none ([vdso]) */
    PP_NAMES_CHANGED,   /* its module's file is not the one loaded (rebuilt, replaced) */
    PP_NAMES_NO_SYMBOL, /* the file has no symbol for it: named by module and offset */
    PP_NAMES_WHY_COUNT,
};

struct pp_names_stats {
    uint64_t frames;                      /* frames of the addresses left to name */
    uint64_t named;                       /* of them, named by a function symbol */
    uint64_t unnamed[PP_NAMES_WHY_COUNT]; /* the rest, by why */
    char changed[256];                    /* the first changed file and what differs, or "" */
    char missing[256];                    /* the first file that could not be read, or "" */
    uint64_t modules_changed;             /* modules whose file is not the one loaded */
};

struct pp_names;

/* Ownership: caller owns *out; release with pp_names_free(). Returns 0 or -ENOMEM. */
PP_MUST_USE int pp_names_new(struct pp_names **out);
void pp_names_free(struct pp_names *n);

/* The recording's start (the trace header's sync time) for the modification check of files
 * without a build-id. */
void pp_names_set_start(struct pp_names *n, const struct nt_trace_info *info);

/*
 * Takes one event of the trace, in the trace's order: samples' addresses, pipeprof's ModuleLoad,
 * and the rundowns the agent wrote during the session (for modules unloaded then: their
 * addresses are named already unless a later sample held them again). Returns 0 or -ENOMEM.
 */
PP_MUST_USE int pp_names_event(struct pp_names *n, const struct nt_event *ev);

/* Whether the trace gave pipeprof's modules and sampled addresses (pp_names_resolve() may find
 * something to name). */
int pp_names_wanted(const struct pp_names *n);

/*
 * Names every address the trace left unnamed, from the files of the modules it lies in: none
 * when every address in a module was named by a method event after its last sample (a trace
 * with its rundown). Returns 1 when it named (*st says what), 0 when there was nothing to name,
 * or -ENOMEM.
 */
PP_MUST_USE int pp_names_resolve(struct pp_names *n, struct pp_names_stats *st);

/*
 * Writes the names as the agent's rundown would have (MethodDCEndInit, ModuleDCEnd and
 * MethodDCEndVerbose events, MethodDCEndComplete), after every event of the trace, and one
 * pipeprof PP_NAMES_EVENT that says what was named and why the rest was not. Returns 0 or a
 * negative errno of the writer.
 */
PP_MUST_USE int pp_names_write(struct pp_names *n, const struct pp_names_stats *st,
                               struct nt_writer *w);

/*
 * The names as the reader's method ranges: calls fn for each named range (start, size, the
 * ModuleDCEnd's id and path, name) in address order. Returns 0 or fn's first nonzero result.
 */
int pp_names_foreach(const struct pp_names *n,
                     int (*fn)(void *ctx, uint64_t start, uint64_t size, uint64_t module_id,
                               const char *module, const char *name),
                     void *ctx);

/* One line that says what was named from files and why the rest was not ("1234 of 1300 frames
 * named from the files of its modules; 66 not: ..."). */
void pp_names_describe(const struct pp_names_stats *st, char *buf, size_t len);

#endif /* PP_CLI_NAMES_H */
