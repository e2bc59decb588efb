/* SPDX-License-Identifier: MIT */
/*
 * symbols/symbols.h - function symbols of ELF files and the demangler, shared by the agent (which
 * names the addresses of its own process at a session's rundown) and the CLI (which names the
 * frames of a recorded process from the files its trace's modules point to, when the process was
 * killed before its rundown: cli/names.c). One code path, so that both name an address alike.
 *
 * Depends on libc and libelf's headers only: libelf.so.1 (and libstdc++'s __cxa_demangle) are
 * opened through the caller's loader (sym_set_loader), never by name from here, because the
 * agent's loader calls must go through host/dl.c (tests/check-loader-calls.sh). Context: not
 * signal-safe; allocates and reads files. The caller serialises loads and lookups of one table
 * (the agent under its module lock; the CLI has one thread).
 */
#ifndef PP_SYMBOLS_H
#define PP_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

#define SYM_BUILD_ID_MAX 64

/*
 * How the library opens libelf.so.1 and finds libstdc++: the agent's are host/dl.c's calls and
 * its fd bracket, the CLI's plain dlopen. open and close are required; the rest may be NULL.
 */
struct sym_loader {
    void *(*open)(const char *name, int flags); /* dlopen's contract */
    int (*close)(void *handle);
    void (*hold)(void);              /* before libelf's open (the agent's host_fds_hold) */
    void (*release)(void);           /* after it */
    void (*trust)(const void *code); /* libelf's code may use the caller's fds (host_fds_trust) */
};

/* Sets the loader; l must stay valid. Context: before the first sym_prepare() or load. */
void sym_set_loader(const struct sym_loader *l);

/* Maps libelf (and its libz) now, once. Returns 0, or -ENOTSUP when it is not there (no loader,
 * no libelf.so.1): every load then fails with that. Context: any thread. */
int sym_prepare(void);

/* One function symbol; addr is the ELF virtual address (runtime address - load bias). */
struct sym_entry {
    uint64_t addr;
    uint64_t size;     /* filled from the next symbol when the ELF size was 0 */
    uint32_t name_off; /* into sym_table.strings */
    uint8_t size_filled;
    uint8_t rank;    /* alias preference at one address: lower wins (global, weak, local) */
    char *demangled; /* cached sym_demangle() result, or NULL until asked / when raw */
    uint8_t demangle_done;
};

struct sym_table {
    struct sym_entry *syms; /* sorted by addr, one per address */
    size_t n;
    char *strings;
    size_t strings_len;
    char *source;    /* the file the symbols came from (the module or its debug file) */
    int from_dynsym; /* 1 when only .dynsym was available */
};

/* What sym_table_load() reads: a file by its absolute path, or an image in memory (the vdso). */
struct sym_object {
    const char *path;        /* the file (and the name of an image in memory) */
    const void *image;       /* NULL: read path; else the first byte of a mapped ELF image */
    size_t image_size;       /* the image's loaded span (its section headers may follow it) */
    const uint8_t *build_id; /* for a debug file found by build-id; may be NULL */
    size_t build_id_len;
};

/*
 * Loads the function symbols of o: its .symtab; else the .symtab of a separate debug file found
 * by build-id (<root>/.build-id/xx/rest.debug) or .gnu_debuglink (the file's directory, its
 * .debug/ subdirectory, <root>/<directory>); else its .dynsym. Returns 0, -ENOENT (no symbols
 * anywhere), -EBADMSG, -ENOMEM, -ENOTSUP (no libelf) or another negative errno.
 * Ownership: caller owns *out; release with sym_table_free().
 */
PP_MUST_USE int sym_table_load(const struct sym_object *o, struct sym_table **out);

/* Finds the symbol covering the ELF virtual address addr, or NULL. */
struct sym_entry *sym_table_lookup(struct sym_table *t, uint64_t addr);

/* The name of s as shown: demangled (cached in s) when possible, else the raw name. cxx as for
 * sym_demangle(). */
const char *sym_entry_name(struct sym_table *t, struct sym_entry *s, int cxx);

/* Releases t. Accepts NULL. */
void sym_table_free(struct sym_table *t);

/*
 * Sets the root of the system debug directory ("/usr/lib/debug" by default; NULL restores it).
 * Context: before any symbol load, or under the caller's lock.
 */
void sym_set_debug_root(const char *root);

/*
 * Demangles a C++ (Itanium, through __cxa_demangle: cxx 1 finds it in the process or in a
 * libstdc++ already loaded, through the loader's open with RTLD_NOLOAD, which a caller free to
 * load it may drop; cxx 0 leaves C++ names raw), Rust legacy or Rust v0 symbol. Returns a
 * malloc'd string, or NULL when raw is not mangled, the demangler is unavailable or the name is
 * malformed (then callers keep the raw name). Ownership: caller frees the result.
 */
char *sym_demangle(const char *raw, int cxx);

/* What a file on disk is, to compare with what a process loaded (cli/names.c). */
struct sym_file_id {
    uint8_t build_id[SYM_BUILD_ID_MAX]; /* NT_GNU_BUILD_ID, build_id_len bytes (0: none) */
    size_t build_id_len;
    uint64_t load_lo, load_hi; /* span of its PT_LOAD segments, ELF virtual addresses */
    uint64_t eh_frame_hdr;     /* ELF virtual address of PT_GNU_EH_FRAME, 0 when none */
};

/* Reads the program headers and build-id of the ELF file at path (the machine's own class and
 * byte order). Returns 0, -EBADMSG (not such an ELF file) or a negative errno of the open. */
PP_MUST_USE int sym_file_id_read(const char *path, struct sym_file_id *out);

/* sym_file_id_read() of an ELF image mapped in this process whose lowest PT_LOAD segment
 * starts at image (the vdso, getauxval(AT_SYSINFO_EHDR)): trusted memory. */
PP_MUST_USE int sym_image_id_read(const void *image, struct sym_file_id *out);

/*
 * The function that the ELF virtual address addr lies in, from the .eh_frame_hdr search table of
 * the file at path (a stripped library's function without a symbol): [*start, *end) in ELF
 * virtual addresses. Only when the file's build-id is want; want_len 0: the caller has checked
 * that the file is the one it means (cli/names.c: no build-id, the same load span, unmodified).
 * Returns 0 or -ENOENT.
 */
PP_MUST_USE int sym_fde_range_file(const char *path, const uint8_t *want, size_t want_len,
                                   uint64_t addr, uint64_t *start, uint64_t *end);

/*
 * The search of sym_fde_range_file() on bytes: h is the .eh_frame_hdr table at address h_addr (any
 * address space, pc in the same one); every read stays within [lo, hi). 0 with [*start, *end) or
 * -ENOENT.
 */
PP_MUST_USE int sym_fde_range(const uint8_t *h, uint64_t h_addr, const uint8_t *lo,
                              const uint8_t *hi, uint64_t pc, uint64_t *start, uint64_t *end);

#endif /* PP_SYMBOLS_H */
