/* SPDX-License-Identifier: MIT */
/*
 * symbols/symtab.c - function symbols of one ELF object, read with libelf: the object's .symtab,
 * else a separate debug file found by build-id or .gnu_debuglink, else .dynsym; sorted by
 * address, one symbol per address, missing sizes filled from the next symbol. Context: in the
 * agent, the drain or IPC thread under ag_modules_mutex (agent/modules.c); in the CLI, its one
 * thread (cli/names.c). Reads files, allocates. Must never run in a signal handler and never keeps
 * a file open after a load. libelf is opened through the caller's loader (sym_set_loader), not
 * linked: a process preloaded everywhere, or a short child under `record`, mostly never reads a
 * symbol table, and mapping libelf and its libz at every start cost each process two more
 * libraries to load and relocate. A session's manager opens it early (its first pass 50 ms in,
 * ag_symtab_prepare(); agent/agent.c says why), else the first load does.
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

#include "symbols/internal.h"
#include "symbols/symbols.h"

static char sym_debug_root[PATH_MAX] = "/usr/lib/debug";

/* The libelf calls this file makes, from libelf.so.1 (sym_elf_open). */
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
} sym_elf;
static int sym_elf_err = -ENOTSUP;               /* 0 once every call above is found */
static const struct sym_loader *sym_loader_used; /* sym_set_loader() */
static pthread_once_t sym_elf_once = PTHREAD_ONCE_INIT;

/* Stores the address of symbol name of h into *fn (a function pointer, as POSIX's dlsym allows).
 * Returns 1 when found. */
static int
sym_elf_call(void *h, const char *name, void *fn)
{
    void *sym = dlsym(h, name);

    memcpy(fn, &sym, sizeof(sym));
    return sym != NULL;
}

void
sym_set_loader(const struct sym_loader *l)
{
    sym_loader_used = l;
}

const struct sym_loader *
sym_loader_get(void)
{
    return sym_loader_used;
}

static void
sym_elf_open(void)
{
    const struct sym_loader *l = sym_loader_used;
    void *h;

    if (l == NULL || l->open == NULL) {
        return; /* no way to open libelf: every load says -ENOTSUP */
    }

    /* The loader opens the library and its dependencies at the lowest free numbers, and no
     * interposer sees those opens: the host's creations and closes wait for them (host/fds.c).
     * A host's open made while the session's first symbols loaded libelf got 5 where bare gets 4
     * (host-contract-fds-create, wall mode, in a fresh-clone CI run). */
    if (l->hold != NULL) {
        l->hold();
    }
    h = l->open("libelf.so.1", RTLD_NOW | RTLD_LOCAL);
    if (l->release != NULL) {
        l->release();
    }

    if (h == NULL) {
        return; /* symbols stay unnamed: sym_table_load() says -ENOTSUP */
    }
    if (sym_elf_call(h, "elf_version", &sym_elf.version) &&
        sym_elf_call(h, "elf_begin", &sym_elf.begin) &&
        sym_elf_call(h, "elf_memory", &sym_elf.memory) &&
        sym_elf_call(h, "elf_end", &sym_elf.end) && sym_elf_call(h, "elf_kind", &sym_elf.kind) &&
        sym_elf_call(h, "elf_nextscn", &sym_elf.nextscn) &&
        sym_elf_call(h, "elf_getshdrstrndx", &sym_elf.getshdrstrndx) &&
        sym_elf_call(h, "elf_strptr", &sym_elf.strptr) &&
        sym_elf_call(h, "elf_getdata", &sym_elf.getdata) &&
        sym_elf_call(h, "gelf_getshdr", &sym_elf.getshdr) &&
        sym_elf_call(h, "gelf_getsym", &sym_elf.getsym) && sym_elf.version(EV_CURRENT) != EV_NONE) {
        /* libelf's calls are the library's: elf_begin checks its fd with fcntl(F_GETFD), which
         * host/fds.c fails with EBADF for a library fd when the caller is not the library (the
         * drain at a host's exit runs on the host's thread) */
        if (l->trust != NULL) {
            l->trust((const void *)sym_elf.begin);
        }
        sym_elf_err = 0;
    }
}

void
sym_set_debug_root(const char *root)
{
    snprintf(sym_debug_root, sizeof(sym_debug_root), "%s", root != NULL ? root : "/usr/lib/debug");
}

/* An open ELF file; fd and elf are released together by sym_file_close(). */
struct sym_file {
    int fd;
    Elf *elf;
};

static int
sym_file_open(const char *path, struct sym_file *f)
{
    struct stat st;

    f->elf = NULL;
    /* O_NONBLOCK and a regular file only: the path may come from a trace (cli/names.c), which
     * anyone may write, and a FIFO held the open until a writer came, a device was read as
     * long as it gave bytes. */
    f->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (f->fd < 0) {
        return -errno;
    }
    if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(f->fd);
        f->fd = -1;
        return -EBADMSG;
    }
    f->elf = sym_elf.begin(f->fd, ELF_C_READ_MMAP, NULL);
    if (f->elf == NULL || sym_elf.kind(f->elf) != ELF_K_ELF) {
        sym_elf.end(f->elf);
        f->elf = NULL;
        close(f->fd);
        f->fd = -1;
        return -EBADMSG;
    }
    return 0;
}

static void
sym_file_close(struct sym_file *f)
{
    sym_elf.end(f->elf); /* accepts NULL */
    f->elf = NULL;
    if (f->fd >= 0) {
        close(f->fd);
    }
    f->fd = -1;
}

/* Returns the first section of the given type, or NULL. */
static Elf_Scn *
sym_table_find_section(Elf *elf, Elf64_Word type)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;

    while ((scn = sym_elf.nextscn(elf, scn)) != NULL) {
        if (sym_elf.getshdr(scn, &sh) != NULL && sh.sh_type == type) {
            return scn;
        }
    }
    return NULL;
}

/* Returns the section named name, or NULL. */
static Elf_Scn *
sym_table_find_named(Elf *elf, const char *name)
{
    Elf_Scn *scn = NULL;
    size_t shstrndx;
    GElf_Shdr sh;

    if (sym_elf.getshdrstrndx(elf, &shstrndx) != 0) {
        return NULL;
    }
    while ((scn = sym_elf.nextscn(elf, scn)) != NULL) {
        const char *n;

        if (sym_elf.getshdr(scn, &sh) == NULL) {
            continue;
        }
        n = sym_elf.strptr(elf, shstrndx, sh.sh_name);
        if (n != NULL && strcmp(n, name) == 0) {
            return scn;
        }
    }
    return NULL;
}

/* Counts the defined function symbols of a symbol table section. */
static size_t
sym_table_count_funcs(Elf_Scn *scn)
{
    Elf_Data *data = sym_elf.getdata(scn, NULL);
    GElf_Shdr sh;
    size_t n = 0;

    if (data == NULL || sym_elf.getshdr(scn, &sh) == NULL || sh.sh_entsize == 0) {
        return 0;
    }
    for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
        GElf_Sym sym;

        if (sym_elf.getsym(data, (int)i, &sym) == NULL) {
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
sym_table_sym_cmp(const void *a, const void *b)
{
    const struct sym_entry *x = a, *y = b;

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
sym_table_rank(const GElf_Sym *sym, const char *name)
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
sym_table_fill(struct sym_table *t, Elf *elf, Elf_Scn *scn)
{
    Elf_Data *data = sym_elf.getdata(scn, NULL);
    size_t cap = sym_table_count_funcs(scn);
    size_t strcap = 0, k = 0;
    GElf_Shdr sh;

    if (data == NULL || sym_elf.getshdr(scn, &sh) == NULL || sh.sh_entsize == 0) {
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

        if (sym_elf.getsym(data, (int)i, &sym) == NULL) {
            break;
        }
        if (!(GELF_ST_TYPE(sym.st_info) == STT_FUNC ||
              GELF_ST_TYPE(sym.st_info) == STT_GNU_IFUNC) ||
            sym.st_shndx == SHN_UNDEF || sym.st_value == 0) {
            continue;
        }
        name = sym_elf.strptr(elf, sh.sh_link, sym.st_name);
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
        t->syms[k].rank = sym_table_rank(&sym, name);
        t->strings_len += len;
        k++;
    }
    if (k == 0) {
        return -ENOENT;
    }
    qsort(t->syms, k, sizeof(*t->syms), sym_table_sym_cmp);
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
sym_table_load_elf(struct sym_table *t, Elf *elf, const char *source, int dynsym_ok)
{
    Elf_Scn *scn;
    int err;

    scn = sym_table_find_section(elf, SHT_SYMTAB);
    if (scn != NULL && sym_table_count_funcs(scn) == 0) {
        scn = NULL;
    }
    if (scn == NULL && dynsym_ok) {
        scn = sym_table_find_section(elf, SHT_DYNSYM);
        t->from_dynsym = 1;
    }
    if (scn == NULL) {
        return -ENOENT;
    }
    err = sym_table_fill(t, elf, scn);
    if (err == 0) {
        t->source = strdup(source);
        err = t->source != NULL ? 0 : -ENOMEM;
    }
    return err;
}

/* Loads the .symtab (or, when dynsym_ok, the .dynsym) of one file into t. */
static int
sym_table_load_file(struct sym_table *t, const char *path, int dynsym_ok)
{
    struct sym_file f = { -1, NULL };
    int err;

    err = sym_file_open(path, &f);
    if (err != 0) {
        return err;
    }
    err = sym_table_load_elf(t, f.elf, path, dynsym_ok);
    sym_file_close(&f);
    return err;
}

/*
 * The vdso has no file: its image (a complete small ELF, section headers included) is copied
 * out of memory first, so that libelf never works on the live mapping.
 */
static int
sym_table_load_vdso(struct sym_table *t, const struct sym_object *o)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t lo = (uint64_t)(uintptr_t)o->image, hi = lo + o->image_size;
    uint64_t mapped = ((hi + page - 1) & ~(page - 1)) - lo;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)o->image;
    size_t size;
    char *copy;
    Elf *elf = NULL;
    int err;

    /* The section headers follow the loaded bytes, inside the last mapped page. */
    if (hi <= lo || mapped > (64u << 20) || mapped < sizeof(*eh) ||
        memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) {
        return -ENOENT;
    }
    size = o->image_size;
    if (eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize <= mapped &&
        eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize > size) {
        size = (size_t)(eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize);
    }
    copy = malloc(size);
    if (copy == NULL) {
        return -ENOMEM;
    }
    memcpy(copy, o->image, size);
    elf = sym_elf.memory(copy, size);
    if (elf == NULL || sym_elf.kind(elf) != ELF_K_ELF) {
        err = -EBADMSG;
        goto out;
    }
    err = sym_table_load_elf(t, elf, o->path, 1);
out:
    sym_elf.end(elf);
    free(copy);
    return err;
}

/* Reads the file name of .gnu_debuglink into buf. Returns 0 or -ENOENT. */
static int
sym_table_debuglink(const char *path, char *buf, size_t cap)
{
    struct sym_file f = { -1, NULL };
    Elf_Scn *scn;
    Elf_Data *data;
    int err = -ENOENT;

    if (sym_file_open(path, &f) != 0) {
        return -ENOENT;
    }
    scn = sym_table_find_named(f.elf, ".gnu_debuglink");
    data = scn != NULL ? sym_elf.getdata(scn, NULL) : NULL;
    if (data != NULL && data->d_buf != NULL && data->d_size > 0) {
        size_t len = strnlen(data->d_buf, data->d_size);

        if (len > 0 && len < data->d_size && len < cap && memchr(data->d_buf, '/', len) == NULL) {
            memcpy(buf, data->d_buf, len);
            buf[len] = '\0';
            err = 0;
        }
    }
    sym_file_close(&f);
    return err;
}

/* Tries the separate debug files of m, in gdb's order. Returns 0 when one gave a .symtab. */
static int
sym_table_load_debug(struct sym_table *t, const struct sym_object *m)
{
    char path[PATH_MAX];
    char link[NAME_MAX + 1];
    char dir[PATH_MAX];
    char *slash;
    int n;

    if (m->build_id_len >= 2) {
        int off =
                snprintf(path, sizeof(path), "%s/.build-id/%02x/", sym_debug_root, m->build_id[0]);

        for (size_t i = 1; i < m->build_id_len && off > 0 && (size_t)off + 3 < sizeof(path); i++) {
            off += snprintf(path + off, sizeof(path) - (size_t)off, "%02x", m->build_id[i]);
        }
        if (off > 0 && (size_t)off + 7 < sizeof(path)) {
            memcpy(path + off, ".debug", 7);
            if (sym_table_load_file(t, path, 0) == 0) {
                return 0;
            }
        }
    }
    if (sym_table_debuglink(m->path, link, sizeof(link)) != 0) {
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
        sym_table_load_file(t, path, 0) == 0) {
        return 0;
    }
    n = snprintf(path, sizeof(path), "%s/.debug/%s", dir, link);
    if (n > 0 && (size_t)n < sizeof(path) && sym_table_load_file(t, path, 0) == 0) {
        return 0;
    }
    n = snprintf(path, sizeof(path), "%s%s/%s", sym_debug_root, dir, link);
    if (n > 0 && (size_t)n < sizeof(path) && sym_table_load_file(t, path, 0) == 0) {
        return 0;
    }
    return -ENOENT;
}

static void
sym_table_reset(struct sym_table *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->syms[i].demangled);
    }
    free(t->syms);
    free(t->strings);
    free(t->source);
    memset(t, 0, sizeof(*t));
}

int
sym_prepare(void)
{
    pthread_once(&sym_elf_once, sym_elf_open);
    return sym_elf_err;
}

int
sym_table_load(const struct sym_object *o, struct sym_table **out)
{
    struct sym_table *t = NULL;
    int err;

    *out = NULL;
    err = sym_prepare();
    if (err != 0) {
        return err;
    }
    if (o->image == NULL && (o->path == NULL || o->path[0] != '/')) {
        return -ENOENT; /* anonymous images have no file */
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return -ENOMEM;
    }
    if (o->image != NULL) {
        err = sym_table_load_vdso(t, o);
        goto out;
    }
    err = sym_table_load_file(t, o->path, 0);
    if (err != 0 && err != -ENOENT) {
        goto out;
    }
    if (err == -ENOENT) {
        sym_table_reset(t);
        err = sym_table_load_debug(t, o);
    }
    if (err != 0) {
        sym_table_reset(t);
        err = sym_table_load_file(t, o->path, 1);
    }
out:
    if (err != 0) {
        sym_table_free(t);
        return err;
    }
    *out = t;
    return 0;
}

struct sym_entry *
sym_table_lookup(struct sym_table *t, uint64_t addr)
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

const char *
sym_entry_name(struct sym_table *t, struct sym_entry *s, int cxx)
{
    if (!s->demangle_done) { /* cached: the caller serialises lookups of one table */
        s->demangled = sym_demangle(t->strings + s->name_off, cxx);
        s->demangle_done = 1;
    }
    return s->demangled != NULL ? s->demangled : t->strings + s->name_off;
}

void
sym_table_free(struct sym_table *t)
{
    if (t == NULL) {
        return;
    }
    sym_table_reset(t);
    free(t);
}
