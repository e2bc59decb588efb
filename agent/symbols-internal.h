/* SPDX-License-Identifier: MIT */
/*
 * agent/symbols-internal.h - private state of the module list and its symbol tables
 * (agent/modules.c, on symbols/symbols.h's tables and demangler; the signal-safe module lookup
 * lives in agent/sig-cfi.c). The public API is in agent/agent.h. Context: everything here except
 * the ag_sig_* functions runs outside signal context, under ag_modules_mutex where stated; the
 * snapshot is the only structure a signal handler reads, and it is immutable once published.
 */
#ifndef AG_SYMBOLS_INTERNAL_H
#define AG_SYMBOLS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"
#include "agent/cfi.h"
#include "common/compiler.h"
#include "symbols/symbols.h"

#define AG_BUILD_ID_MAX SYM_BUILD_ID_MAX

/*
 * One loaded module (one dl_iterate_phdr entry at one load address). Owned by modules.c and
 * never freed before ag_modules_fini(): a dlclose'd module stays on the list with live == 0,
 * so that strings handed out by ag_symbolize() and tables a signal handler may still read
 * stay valid. Fields are immutable after creation except those marked "mutex".
 */
struct ag_module {
    struct ag_module *next;   /* every module ever seen, newest first */
    uint32_t id;              /* 1, 2, ... in order of discovery; never reused */
    char *path;               /* file path (/proc/self/exe resolved for the executable) */
    char *name;               /* dlpi_name as the loader reports it ("" for the executable) */
    uint64_t base;            /* load bias */
    uint64_t lo, hi;          /* span of all PT_LOAD segments (runtime addresses) */
    struct ag_cfi_span *exec; /* executable PT_LOAD ranges (runtime addresses) */
    size_t n_exec;
    uint8_t build_id[AG_BUILD_ID_MAX];
    size_t build_id_len;
    int is_vdso;               /* the kernel's vdso: symbols are read from memory */
    int mapped_file;           /* no ELF object: a file mapped executable by other code than the
                                * loader (ag_modules_note_file_code); named by offset only, and
                                * left out of the signal handler's snapshot */
    uint64_t eh_frame_hdr;     /* runtime address of its .eh_frame_hdr, 0 when none */
    int go;                    /* a Go program or library (a "Go" ELF note): its pclntab's rows
                                * join the CFI table (agent/cfi.c, ag_cfi_go_find) */
    int go_err;                /* mutex: 0 when the pclntab's rows were read, or why not */
    struct ag_cfi_table *cfi;  /* NULL when the module has no usable .eh_frame_hdr */
    int cfi_err;               /* 0 or why cfi is NULL; -EINPROGRESS: not built yet */
    int live;                  /* mutex: still in the loader's list at the last refresh */
    uint64_t gone_ns;          /* mutex: CLOCK_MONOTONIC when first seen gone (UINT64_MAX while
                                * live): a sample taken before it may lie in this module */
    uint64_t gone_seq;         /* mutex: 1, 2, ... in the order modules went; 0 while live */
    int seen;                  /* mutex: scratch for one refresh */
    int symtab_err;            /* mutex: 0 until a load failed, then its error */
    struct sym_table *symtab;  /* mutex: loaded on the first ag_symbolize() in this module */
    struct ag_file_ident file; /* mutex: ag_modules_identify()'s */
    int file_tried;            /* mutex: ag_modules_identify() looked (it looks once) */
};

/* One executable range of a live module, as a signal handler sees it. */
struct ag_module_span {
    uint64_t lo, hi;
    const struct ag_module *mod;
    const struct ag_cfi_table *cfi;
    int cfi_pending; /* cfi is NULL because the manager has not built it yet (-EINPROGRESS) */
};

/*
 * The signal-safe lookup table: executable ranges of the live modules, sorted by lo, never
 * overlapping. Published with a release store into ag_sig_modules (agent/sig-cfi.c); readers
 * acquire-load it. A replaced snapshot is put on a retired list and freed only by
 * ag_modules_fini(), after the sampler has stopped: a handler that loaded the old pointer may
 * still be reading it, and the agent has no cheaper way to know when it is done. The cost is
 * one small array per dlopen/dlclose generation.
 */
struct ag_module_snapshot {
    struct ag_module_snapshot *retired_next;
    uint64_t generation;
    size_t n;
    struct ag_module_span spans[];
};

/* The published snapshot (defined in sig-cfi.c so that handler code has no outside data). */
extern _Atomic(struct ag_module_snapshot *) ag_sig_modules;

/*
 * Set to 1 when a CFI lookup met a pc outside every module of the snapshot: code loaded since
 * (a dlopen the manager has not seen yet) or JIT code. The sampling handler turns 1 into 2 and
 * wakes the manager, which rescans the modules at once and puts it back to 0 (defined in
 * sig-cfi.c; agent/agent.c explains the rate limit).
 */
extern _Atomic int ag_sig_unknown_code;

/* Finds the span containing pc in the published snapshot, or NULL. Async-signal-safe. */
PP_SIGSAFE const struct ag_module_span *ag_sig_module_find(uint64_t pc);

/* The host's dlcloses whose rescans ag_modules_note_dlclose() skipped (ag_stats). Any thread. */
uint64_t ag_modules_dlclose_unscanned(void);

/* Guards the module list and every symtab cache. */
extern pthread_mutex_t ag_modules_mutex;
/* Nonzero while the mutex's holder is in a loader call of host/dl.c's (host_loader_iterate, _open)
 * or waits to be, or is a fork's prepare handler (which waits for host/dl.c's next): written by
 * the holder only, read by a fork's prepare handler (agent.c). */
extern _Atomic int ag_modules_in_loader;
/* In a fork()ed child whose prepare handler left the mutex to a holder stopped in a loader call
 * (agent.c): drops the module list, its snapshots and symbol tables (not freed: the holder may
 * have been in the middle of a change), so that the next refresh rebuilds them from the loader.
 * Context: the child's fork handler, with the mutex made anew. */
void ag_modules_forked_child_untrusted(void);

/* --- symbols (symbols/symbols.h: the symbol tables and the demangler, shared with the CLI) --- */

/*
 * Gives the symbols library the agent's loader (host/dl.c's calls, the fd bracket of host/fds.c)
 * and maps libelf (and its libz) now, once: see ag_manager_main() for why a session does it early
 * rather than at its first symbol. Marked as the module lock's holder in a loader call while it
 * runs, for a fork's prepare handler (agent.c). Context: not signal-safe; any thread.
 */
void ag_symtab_prepare(void);

/*
 * ag_modules_refresh() without building the CFI tables of new modules: start-up stays short
 * (compiling libc's tables is most of a short-lived process's start). Until
 * ag_modules_build_cfi() has built them, those modules unwind by frame pointers.
 */
PP_MUST_USE int ag_modules_refresh_deferred(void);

/*
 * Builds the tables ag_modules_refresh_deferred() left, module by module, and publishes them.
 * Stops early when *cancel (may be NULL) becomes nonzero. Returns the tables built or -errno.
 */
PP_MUST_USE int ag_modules_build_cfi(_Atomic int *cancel);

/*
 * Maps the tables ag_modules_refresh_deferred() left that the recording's cache
 * (ag_modules_set_cfi_cache) holds, builds none: a few mmaps, cheap enough for the start. Returns
 * how many modules still need ag_modules_build_cfi() (1 without a cache), or -errno.
 */
PP_MUST_USE int ag_modules_map_cached_cfi(void);

/* An executable mapping of a file, as /proc/self/maps lists it (agent/codemap.c). */
struct ag_file_code {
    uint64_t lo, hi;
    uint64_t
            image; /* the file's first byte in memory (its mapping at offset 0), else lo - offset */
    const char *path;
};

/*
 * Makes modules of the file-backed executable mappings no loaded ELF object covers (the .NET
 * runtime maps the PE images of ReadyToRun assemblies itself), from a complete read of the map
 * (code[0..n), in address order); mapped-file modules absent from it are marked gone. The next
 * ag_modules_refresh() returns 1 when that changed the list. Context: the consumer thread; takes
 * the module lock. Returns 0 or -ENOMEM.
 */
PP_MUST_USE int ag_modules_note_file_code(const struct ag_file_code *code, size_t n);

#endif /* AG_SYMBOLS_INTERNAL_H */
