/* SPDX-License-Identifier: MIT */
/*
 * agent/symtab.c - function symbols of one module, read with libelf: the module's .symtab,
 * else a separate debug file found by build-id or .gnu_debuglink, else .dynsym; sorted by
 * address, one symbol per address, missing sizes filled from the next symbol. Context: the
 * drain or IPC thread, under ag_modules_mutex (modules.c); reads files, allocates. Must never
 * run in a signal handler and never keeps a file open after a load. libelf is opened with dlopen,
 * not linked: a process preloaded everywhere, or a short child under `record`, mostly never reads
 * a symbol table, and mapping libelf and its libz at every start cost each process two more
 * libraries to load and relocate. A session's manager opens it early (its first pass 50 ms in,
 * ag_symtab_prepare(); agent.c says why), else the first load does.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gelf.h>
#include <libelf.h>

#include "agent/symbols-internal.h"
#include "host/host.h"

static char ag_symtab_debug_root[PATH_MAX] = "/usr/lib/debug";

/* The libelf calls this file makes, from libelf.so.1 (ag_elf_open). */
static struct {
    unsigned (*version)(unsigned);
    Elf *(*begin)(int, Elf_Cmd, Elf *);
    Elf *(*memory)(char *, size_t);
    int (*end)(Elf *);
    Elf_Kind (*kind)(Elf *);
    Elf_Scn *(*nextscn)(Elf *, Elf_Scn *);
    int (*getshdrstrndx)(Elf *, size_t *);
    char *(*strptr)(Elf *, size_t, size_t);
    Elf_Data *(*getdata)(Elf_Scn *, Elf_Data *);
    GElf_Shdr *(*getshdr)(Elf_Scn *, GElf_Shdr *);
    GElf_Sym *(*getsym)(Elf_Data *, int, GElf_Sym *);
} ag_elf;
static int ag_elf_err = -ENOTSUP; /* 0 once every call above is found */
static pthread_once_t ag_elf_once = PTHREAD_ONCE_INIT;

/* Stores the address of symbol name of h into *fn (a function pointer, as POSIX's dlsym allows).
 * Returns 1 when found. */
static int
ag_elf_call(void *h, const char *name, void *fn)
{
    void *sym = dlsym(h, name);

    memcpy(fn, &sym, sizeof(sym));
    return sym != NULL;
}

static void
ag_elf_open(void)
{
    void *h;

    /* The loader opens the library and its dependencies at the lowest free numbers, and no
     * interposer sees those opens: the host's creations and closes wait for them (host/fds.c).
     * A host's open made while the session's first symbols loaded libelf got 5 where bare gets 4
     * (host-contract-fds-create, wall mode, in a fresh-clone CI run). */
    host_fds_hold();
    h = host_loader_open("libelf.so.1", RTLD_NOW | RTLD_LOCAL);
    host_fds_release();

    if (h == NULL) {
        return; /* symbols stay unnamed: ag_symtab_load() says -ENOTSUP */
    }
    if (ag_elf_call(h, "elf_version", &ag_elf.version) &&
        ag_elf_call(h, "elf_begin", &ag_elf.begin) &&
        ag_elf_call(h, "elf_memory", &ag_elf.memory) && ag_elf_call(h, "elf_end", &ag_elf.end) &&
        ag_elf_call(h, "elf_kind", &ag_elf.kind) &&
        ag_elf_call(h, "elf_nextscn", &ag_elf.nextscn) &&
        ag_elf_call(h, "elf_getshdrstrndx", &ag_elf.getshdrstrndx) &&
        ag_elf_call(h, "elf_strptr", &ag_elf.strptr) &&
        ag_elf_call(h, "elf_getdata", &ag_elf.getdata) &&
        ag_elf_call(h, "gelf_getshdr", &ag_elf.getshdr) &&
        ag_elf_call(h, "gelf_getsym", &ag_elf.getsym) && ag_elf.version(EV_CURRENT) != EV_NONE) {
        /* libelf's calls are the library's: elf_begin checks its fd with fcntl(F_GETFD), which
         * host/fds.c fails with EBADF for a library fd when the caller is not the library (the
         * drain at a host's exit runs on the host's thread) */
        host_fds_trust((const void *)ag_elf.begin);
        ag_elf_err = 0;
    }
}

void
ag_symtab_set_debug_root(const char *root)
{
    snprintf(ag_symtab_debug_root, sizeof(ag_symtab_debug_root), "%s",
             root != NULL ? root : "/usr/lib/debug");
}

/* An open ELF file; fd and elf are released together by ag_symtab_file_close(). */
struct ag_symtab_file {
    int fd;
    Elf *elf;
};

static int
ag_symtab_file_open(const char *path, struct ag_symtab_file *f)
{
    f->elf = NULL;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) {
        return -errno;
    }
    f->elf = ag_elf.begin(f->fd, ELF_C_READ_MMAP, NULL);
    if (f->elf == NULL || ag_elf.kind(f->elf) != ELF_K_ELF) {
        ag_elf.end(f->elf);
        f->elf = NULL;
        close(f->fd);
        f->fd = -1;
        return -EBADMSG;
    }
    return 0;
}

static void
ag_symtab_file_close(struct ag_symtab_file *f)
{
    ag_elf.end(f->elf); /* accepts NULL */
    f->elf = NULL;
    if (f->fd >= 0) {
        close(f->fd);
    }
    f->fd = -1;
}

/* Returns the first section of the given type, or NULL. */
static Elf_Scn *
ag_symtab_find_section(Elf *elf, Elf64_Word type)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;

    while ((scn = ag_elf.nextscn(elf, scn)) != NULL) {
        if (ag_elf.getshdr(scn, &sh) != NULL && sh.sh_type == type) {
            return scn;
        }
    }
    return NULL;
}

/* Returns the section named name, or NULL. */
static Elf_Scn *
ag_symtab_find_named(Elf *elf, const char *name)
{
    Elf_Scn *scn = NULL;
    size_t shstrndx;
    GElf_Shdr sh;

    if (ag_elf.getshdrstrndx(elf, &shstrndx) != 0) {
        return NULL;
    }
    while ((scn = ag_elf.nextscn(elf, scn)) != NULL) {
        const char *n;

        if (ag_elf.getshdr(scn, &sh) == NULL) {
            continue;
        }
        n = ag_elf.strptr(elf, shstrndx, sh.sh_name);
        if (n != NULL && strcmp(n, name) == 0) {
            return scn;
        }
    }
    return NULL;
}

/* Counts the defined function symbols of a symbol table section. */
static size_t
ag_symtab_count_funcs(Elf_Scn *scn)
{
    Elf_Data *data = ag_elf.getdata(scn, NULL);
    GElf_Shdr sh;
    size_t n = 0;

    if (data == NULL || ag_elf.getshdr(scn, &sh) == NULL || sh.sh_entsize == 0) {
        return 0;
    }
    for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
        GElf_Sym sym;

        if (ag_elf.getsym(data, (int)i, &sym) == NULL) {
            break;
        }
        if ((GELF_ST_TYPE(sym.st_info) == STT_FUNC || GELF_ST_TYPE(sym.st_info) == STT_GNU_IFUNC) &&
            sym.st_shndx != SHN_UNDEF && sym.st_value != 0) {
            n++;
        }
    }
    return n;
}

static int
ag_symtab_sym_cmp(const void *a, const void *b)
{
    const struct ag_sym *x = a, *y = b;

    if (x->addr != y->addr) {
        return x->addr < y->addr ? -1 : 1;
    }
    /* At one address keep the symbol with a size, then the best binding (qsort rather than
     * the local alias __GI_qsort), then the lowest name offset (stable). */
    if ((x->size == 0) != (y->size == 0)) {
        return x->size == 0 ? 1 : -1;
    }
    if (x->rank != y->rank) {
        return x->rank < y->rank ? -1 : 1;
    }
    return x->name_off < y->name_off ? -1 : x->name_off > y->name_off;
}

/* Alias preference: global before weak before local; names without a leading "_" first. */
static uint8_t
ag_symtab_rank(const GElf_Sym *sym, const char *name)
{
    uint8_t bind = GELF_ST_BIND(sym->st_info);
    uint8_t rank = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 2 : 4;

    return (uint8_t)(rank + (name[0] == '_'));
}

/*
 * Copies the function symbols of scn into t (addresses, sizes, names into one string pool),
 * sorts them, keeps one per address and fills missing sizes from the next symbol.
 */
static int
ag_symtab_fill(struct ag_symtab *t, Elf *elf, Elf_Scn *scn)
{
    Elf_Data *data = ag_elf.getdata(scn, NULL);
    size_t cap = ag_symtab_count_funcs(scn);
    size_t strcap = 0, k = 0;
    GElf_Shdr sh;

    if (data == NULL || ag_elf.getshdr(scn, &sh) == NULL || sh.sh_entsize == 0) {
        return -EBADMSG;
    }
    if (cap == 0) {
        return -ENOENT;
    }
    t->syms = calloc(cap, sizeof(*t->syms));
    if (t->syms == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < sh.sh_size / sh.sh_entsize && k < cap; i++) {
        GElf_Sym sym;
        const char *name;
        size_t len;

        if (ag_elf.getsym(data, (int)i, &sym) == NULL) {
            break;
        }
        if (!(GELF_ST_TYPE(sym.st_info) == STT_FUNC ||
              GELF_ST_TYPE(sym.st_info) == STT_GNU_IFUNC) ||
            sym.st_shndx == SHN_UNDEF || sym.st_value == 0) {
            continue;
        }
        name = ag_elf.strptr(elf, sh.sh_link, sym.st_name);
        if (name == NULL || name[0] == '\0') {
            continue;
        }
        /* .symtab of a shared library may carry versions (fopen@@GLIBC_2.2.5): drop them. */
        len = strcspn(name, "@") + 1;
        if (t->strings_len + len > strcap) {
            size_t ncap = strcap == 0 ? 4096 : strcap * 2;
            char *s;

            while (ncap < t->strings_len + len) {
                ncap *= 2;
            }
            s = realloc(t->strings, ncap);
            if (s == NULL) {
                return -ENOMEM;
            }
            t->strings = s;
            strcap = ncap;
        }
        if (t->strings_len > UINT32_MAX - len) {
            return -E2BIG;
        }
        memcpy(t->strings + t->strings_len, name, len - 1);
        t->strings[t->strings_len + len - 1] = '\0';
        t->syms[k].addr = sym.st_value;
        t->syms[k].size = sym.st_size;
        t->syms[k].name_off = (uint32_t)t->strings_len;
        t->syms[k].rank = ag_symtab_rank(&sym, name);
        t->strings_len += len;
        k++;
    }
    if (k == 0) {
        return -ENOENT;
    }
    qsort(t->syms, k, sizeof(*t->syms), ag_symtab_sym_cmp);
    t->n = 0;
    for (size_t i = 0; i < k; i++) {
        if (t->n > 0 && t->syms[t->n - 1].addr == t->syms[i].addr) {
            continue; /* an alias: the first one (with a size) wins */
        }
        t->syms[t->n++] = t->syms[i];
    }
    for (size_t i = 0; i < t->n; i++) {
        if (t->syms[i].size == 0 && i + 1 < t->n) {
            t->syms[i].size = t->syms[i + 1].addr - t->syms[i].addr;
            t->syms[i].size_filled = 1;
        }
    }
    return 0;
}

/* Loads the .symtab (or, when dynsym_ok, the .dynsym) of an open ELF into t. */
static int
ag_symtab_load_elf(struct ag_symtab *t, Elf *elf, const char *source, int dynsym_ok)
{
    Elf_Scn *scn;
    int err;

    scn = ag_symtab_find_section(elf, SHT_SYMTAB);
    if (scn != NULL && ag_symtab_count_funcs(scn) == 0) {
        scn = NULL;
    }
    if (scn == NULL && dynsym_ok) {
        scn = ag_symtab_find_section(elf, SHT_DYNSYM);
        t->from_dynsym = 1;
    }
    if (scn == NULL) {
        return -ENOENT;
    }
    err = ag_symtab_fill(t, elf, scn);
    if (err == 0) {
        t->source = strdup(source);
        err = t->source != NULL ? 0 : -ENOMEM;
    }
    return err;
}

/* Loads the .symtab (or, when dynsym_ok, the .dynsym) of one file into t. */
static int
ag_symtab_load_file(struct ag_symtab *t, const char *path, int dynsym_ok)
{
    struct ag_symtab_file f = { -1, NULL };
    int err;

    err = ag_symtab_file_open(path, &f);
    if (err != 0) {
        return err;
    }
    err = ag_symtab_load_elf(t, f.elf, path, dynsym_ok);
    ag_symtab_file_close(&f);
    return err;
}

/*
 * The vdso has no file: its image (a complete small ELF, section headers included) is copied
 * out of memory first, so that libelf never works on the live mapping.
 */
static int
ag_symtab_load_vdso(struct ag_symtab *t, const struct ag_module *m)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t mapped = ((m->hi + page - 1) & ~(page - 1)) - m->lo;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(uintptr_t)m->lo;
    size_t size;
    char *copy;
    Elf *elf = NULL;
    int err;

    /* The section headers follow the loaded bytes, inside the last mapped page. */
    if (m->hi <= m->lo || mapped > (64u << 20) || mapped < sizeof(*eh) ||
        memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) {
        return -ENOENT;
    }
    size = (size_t)(m->hi - m->lo);
    if (eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize <= mapped &&
        eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize > size) {
        size = (size_t)(eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize);
    }
    copy = malloc(size);
    if (copy == NULL) {
        return -ENOMEM;
    }
    memcpy(copy, (const void *)(uintptr_t)m->lo, size);
    elf = ag_elf.memory(copy, size);
    if (elf == NULL || ag_elf.kind(elf) != ELF_K_ELF) {
        err = -EBADMSG;
        goto out;
    }
    err = ag_symtab_load_elf(t, elf, m->path, 1);
out:
    ag_elf.end(elf);
    free(copy);
    return err;
}

/* Reads the file name of .gnu_debuglink into buf. Returns 0 or -ENOENT. */
static int
ag_symtab_debuglink(const char *path, char *buf, size_t cap)
{
    struct ag_symtab_file f = { -1, NULL };
    Elf_Scn *scn;
    Elf_Data *data;
    int err = -ENOENT;

    if (ag_symtab_file_open(path, &f) != 0) {
        return -ENOENT;
    }
    scn = ag_symtab_find_named(f.elf, ".gnu_debuglink");
    data = scn != NULL ? ag_elf.getdata(scn, NULL) : NULL;
    if (data != NULL && data->d_buf != NULL && data->d_size > 0) {
        size_t len = strnlen(data->d_buf, data->d_size);

        if (len > 0 && len < data->d_size && len < cap && memchr(data->d_buf, '/', len) == NULL) {
            memcpy(buf, data->d_buf, len);
            buf[len] = '\0';
            err = 0;
        }
    }
    ag_symtab_file_close(&f);
    return err;
}

/* Tries the separate debug files of m, in gdb's order. Returns 0 when one gave a .symtab. */
static int
ag_symtab_load_debug(struct ag_symtab *t, const struct ag_module *m)
{
    char path[PATH_MAX];
    char link[NAME_MAX + 1];
    char dir[PATH_MAX];
    char *slash;
    int n;

    if (m->build_id_len >= 2) {
        int off = snprintf(path, sizeof(path), "%s/.build-id/%02x/", ag_symtab_debug_root,
                           m->build_id[0]);

        for (size_t i = 1; i < m->build_id_len && off > 0 && (size_t)off + 3 < sizeof(path); i++) {
            off += snprintf(path + off, sizeof(path) - (size_t)off, "%02x", m->build_id[i]);
        }
        if (off > 0 && (size_t)off + 7 < sizeof(path)) {
            memcpy(path + off, ".debug", 7);
            if (ag_symtab_load_file(t, path, 0) == 0) {
                return 0;
            }
        }
    }
    if (ag_symtab_debuglink(m->path, link, sizeof(link)) != 0) {
        return -ENOENT;
    }
    snprintf(dir, sizeof(dir), "%s", m->path);
    slash = strrchr(dir, '/');
    if (slash == NULL) {
        return -ENOENT;
    }
    *slash = '\0';
    n = snprintf(path, sizeof(path), "%s/%s", dir, link);
    if (n > 0 && (size_t)n < sizeof(path) && strcmp(path, m->path) != 0 &&
        ag_symtab_load_file(t, path, 0) == 0) {
        return 0;
    }
    n = snprintf(path, sizeof(path), "%s/.debug/%s", dir, link);
    if (n > 0 && (size_t)n < sizeof(path) && ag_symtab_load_file(t, path, 0) == 0) {
        return 0;
    }
    n = snprintf(path, sizeof(path), "%s%s/%s", ag_symtab_debug_root, dir, link);
    if (n > 0 && (size_t)n < sizeof(path) && ag_symtab_load_file(t, path, 0) == 0) {
        return 0;
    }
    return -ENOENT;
}

static void
ag_symtab_reset(struct ag_symtab *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->syms[i].demangled);
    }
    free(t->syms);
    free(t->strings);
    free(t->source);
    memset(t, 0, sizeof(*t));
}

void
ag_symtab_prepare(void)
{
    pthread_once(&ag_elf_once, ag_elf_open);
}

int
ag_symtab_load(const struct ag_module *m, struct ag_symtab **out)
{
    struct ag_symtab *t = NULL;
    int err;

    *out = NULL;
    /* The dlopen of libelf, or a wait for the manager's (ag_symtab_prepare): marked as the
     * module lock's holder in a loader call, for a fork's prepare handler (agent.c) */
    atomic_fetch_add_explicit(&ag_modules_in_loader, 1, memory_order_relaxed);
    pthread_once(&ag_elf_once, ag_elf_open);
    atomic_fetch_sub_explicit(&ag_modules_in_loader, 1, memory_order_relaxed);
    if (ag_elf_err != 0) {
        return ag_elf_err;
    }
    if (!m->is_vdso && (m->path == NULL || m->path[0] != '/')) {
        return -ENOENT; /* anonymous images have no file */
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return -ENOMEM;
    }
    if (m->is_vdso) {
        err = ag_symtab_load_vdso(t, m);
        goto out;
    }
    err = ag_symtab_load_file(t, m->path, 0);
    if (err != 0 && err != -ENOENT) {
        goto out;
    }
    if (err == -ENOENT) {
        ag_symtab_reset(t);
        err = ag_symtab_load_debug(t, m);
    }
    if (err != 0) {
        ag_symtab_reset(t);
        err = ag_symtab_load_file(t, m->path, 1);
    }
out:
    if (err != 0) {
        ag_symtab_free(t);
        return err;
    }
    *out = t;
    return 0;
}

struct ag_sym *
ag_symtab_lookup(struct ag_symtab *t, uint64_t addr)
{
    size_t lo = 0, hi = t->n;

    /* Last symbol whose addr <= addr. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (t->syms[mid].addr <= addr) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == 0) {
        return NULL;
    }
    if (addr - t->syms[lo - 1].addr >= t->syms[lo - 1].size) {
        return NULL; /* in a gap after a sized symbol (or the last symbol has no size) */
    }
    return &t->syms[lo - 1];
}

void
ag_symtab_free(struct ag_symtab *t)
{
    if (t == NULL) {
        return;
    }
    ag_symtab_reset(t);
    free(t);
}
