/* SPDX-License-Identifier: MIT */
/*
 * agent/modules.c - the list of loaded modules (dl_iterate_phdr), their build-ids and CFI
 * tables, the signal-safe lookup snapshot, and ag_symbolize() on top of agent/symtab.c.
 * Context: any thread but a signal handler; one mutex guards the list and the symbol caches.
 * Modules, tables and snapshots are never freed before ag_modules_fini(), because a signal
 * handler or a caller holding an ag_symbol may still point into them. Must not be called from
 * a signal handler, and must not call into the sampler.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/symbols-internal.h"
#include "common/clock.h"
#include "common/grow.h"
#include "host/host.h"

pthread_mutex_t ag_modules_mutex = PTHREAD_MUTEX_INITIALIZER;
_Atomic int ag_modules_in_loader;

static struct ag_module *ag_modules_all;              /* mutex; newest first */
static struct ag_module_snapshot *ag_modules_retired; /* mutex; replaced snapshots */
static uint32_t ag_modules_next_id = 1;               /* mutex */
static unsigned long long ag_modules_adds;            /* mutex; dlpi_adds at the last scan */
static unsigned long long ag_modules_subs;            /* mutex */
static int ag_modules_scanned;                        /* mutex */
static int ag_modules_defer_cfi;                      /* mutex: new modules' tables wait */
static uint64_t ag_modules_generation;                /* mutex */
static int ag_modules_files_changed;                  /* mutex: mapped files came or went */
/* ag_symbolize()'s time: after every module's going, before a live one's (UINT64_MAX) */
#define AG_MODULES_NOW (UINT64_MAX - 1)
static char ag_modules_cfi_dir[AG_CFI_CACHE_DIR_MAX]; /* mutex: PIPEPROF_CFI_CACHE, or "" */
static uint64_t ag_modules_gone_count;                /* mutex: the last gone_seq given */

/* host_loader_iterate under the mutex, marked for a fork's prepare (ag_modules_in_loader) */
static int
ag_modules_iterate_locked(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg)
{
    int r;

    atomic_fetch_add_explicit(&ag_modules_in_loader, 1, memory_order_relaxed);
    r = host_loader_iterate(cb, arg);
    atomic_fetch_sub_explicit(&ag_modules_in_loader, 1, memory_order_relaxed);
    return r;
}

/* Marks m gone as of now (called with the mutex held). */
static void
ag_module_gone_now(struct ag_module *m)
{
    m->live = 0; /* kept until ag_modules_fini(): samples taken before name its pcs */
    m->gone_ns = pp_clock_ns(CLOCK_MONOTONIC);
    m->gone_seq = ++ag_modules_gone_count;
}

void
ag_modules_set_cfi_cache(const char *dir)
{
    pthread_mutex_lock(&ag_modules_mutex);
    snprintf(ag_modules_cfi_dir, sizeof(ag_modules_cfi_dir), "%s", dir);
    pthread_mutex_unlock(&ag_modules_mutex);
}

/* The runtime address of a Go module's pclntab, found in its readable data (0: none, and why in
 * m->go_err). */
static uint64_t
ag_modules_go_pclntab(struct ag_module *m, const struct dl_phdr_info *info)
{
    struct ag_cfi_span *data;
    uint64_t at = 0;
    size_t n = 0;

    if (!m->go) {
        return 0;
    }
    data = calloc(info->dlpi_phnum + 1u, sizeof(*data));
    if (data == NULL) {
        m->go_err = -ENOMEM;
        return 0;
    }
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R) && !(ph->p_flags & PF_X)) {
            data[n++] = (struct ag_cfi_span){ m->base + ph->p_vaddr,
                                              m->base + ph->p_vaddr + ph->p_memsz };
        }
    }
    m->go_err = ag_cfi_go_find(data, n, &at);
    free(data);
    return at;
}

/* A module's table from the recording's cache when it holds it, else built (and stored there).
 * Called with the mutex held. */
static int
ag_modules_cfi_get(struct ag_module *m, const struct dl_phdr_info *info, uint64_t hdr,
                   const struct ag_cfi_span *loads, size_t n_loads, _Atomic int *cancel)
{
    uint64_t gopclntab;
    int err;

    if (ag_cfi_cache_load(ag_modules_cfi_dir, m->build_id, m->build_id_len, m->base, &m->cfi) ==
        0) {
        return 0;
    }
    gopclntab = ag_modules_go_pclntab(m, info);
    err = ag_cfi_build_cancellable(m->base, hdr, gopclntab, loads, n_loads, cancel, &m->cfi);
    if (err == 0) {
        ag_cfi_cache_store(ag_modules_cfi_dir, m->build_id, m->build_id_len, m->cfi);
    }
    return err;
}

struct ag_modules_scan {
    int err;
    int changed;
};

static int
ag_modules_counters_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    unsigned long long *c = ctx;

    if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
        c[0] = c[1] = ~0ull; /* ancient libc: always rescan */
        return 1;
    }
    c[0] = info->dlpi_adds;
    c[1] = info->dlpi_subs;
    return 1; /* the counters are the same in every entry: stop after the first */
}

static char *
ag_modules_exe_path(void)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);

    if (n <= 0) {
        return strdup("");
    }
    buf[n] = '\0';
    return strdup(buf);
}

/* Reads the notes of a PT_NOTE segment that lies inside the mapped image: the first
 * NT_GNU_BUILD_ID, and whether a note is named "Go" (Go's build ID, in every Go binary). */
static void
ag_modules_read_notes(struct ag_module *m, const ElfW(Phdr) * ph, uint64_t base)
{
    const uint8_t *p = (const uint8_t *)(uintptr_t)(base + ph->p_vaddr);
    size_t left = ph->p_memsz;

    while (left >= sizeof(ElfW(Nhdr))) {
        const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
        size_t namesz = (nh->n_namesz + 3u) & ~(size_t)3;
        size_t descsz = (nh->n_descsz + 3u) & ~(size_t)3;
        size_t total = sizeof(*nh) + namesz + descsz;

        if (nh->n_namesz > left || nh->n_descsz > left || total > left) {
            return; /* corrupt note: nothing more from this segment */
        }
        if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
            memcmp(p + sizeof(*nh), "GNU", 4) == 0 && nh->n_descsz <= AG_BUILD_ID_MAX &&
            m->build_id_len == 0) {
            memcpy(m->build_id, p + sizeof(*nh) + namesz, nh->n_descsz);
            m->build_id_len = nh->n_descsz;
        }
        if (nh->n_namesz >= 3 && memcmp(p + sizeof(*nh), "Go", 3) == 0) {
            m->go = 1;
        }
        p += total;
        left -= total;
    }
}

/*
 * Creates the module of one dl_iterate_phdr entry: segments, build-id and CFI table. Runs in
 * the callback, so the loader lock keeps the image mapped while .eh_frame is parsed.
 */
static int
ag_module_new(const struct dl_phdr_info *info, int is_exe, struct ag_module **out)
{
    struct ag_module *m = NULL;
    struct ag_cfi_span *loads = NULL;
    size_t n_loads = 0;
    uint64_t hdr = 0;
    int err = -ENOMEM;

    m = calloc(1, sizeof(*m));
    loads = calloc(info->dlpi_phnum + 1u, sizeof(*loads));
    if (m == NULL || loads == NULL) {
        goto out;
    }
    m->exec = calloc(info->dlpi_phnum + 1u, sizeof(*m->exec));
    m->name = strdup(info->dlpi_name != NULL ? info->dlpi_name : "");
    if (m->exec == NULL || m->name == NULL) {
        goto out;
    }
    m->base = info->dlpi_addr;
    m->lo = UINT64_MAX;
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uint64_t lo = m->base + ph->p_vaddr;
        uint64_t hi = lo + ph->p_memsz;

        if (ph->p_type == PT_LOAD) {
            if (lo < m->lo) {
                m->lo = lo;
            }
            if (hi > m->hi) {
                m->hi = hi;
            }
            if (ph->p_flags & PF_R) {
                loads[n_loads++] = (struct ag_cfi_span){ lo, hi };
            }
            if (ph->p_flags & PF_X) {
                m->exec[m->n_exec++] = (struct ag_cfi_span){ lo, hi };
            }
        } else if (ph->p_type == PT_GNU_EH_FRAME) {
            hdr = lo;
        }
    }
    if (m->lo == UINT64_MAX) {
        m->lo = m->hi = 0;
    }
    m->is_vdso = getauxval(AT_SYSINFO_EHDR) >= m->lo && getauxval(AT_SYSINFO_EHDR) < m->hi;
    if (m->is_vdso) {
        m->path = strdup(m->name[0] != '\0' ? m->name : "[vdso]");
    } else if (is_exe) {
        m->path = ag_modules_exe_path();
    } else if (m->name[0] != '/' && m->name[0] != '\0') {
        /* A relative path (LD_PRELOAD=build/lib/libpipeprof.so) names the file only from the
         * loader's working directory: resolved now, or the module's symbols (pipeprof's own
         * markers, [kernel] among them) would go unnamed. */
        m->path = realpath(m->name, NULL);
        if (m->path == NULL && errno != ENOMEM) {
            m->path = strdup(m->name);
        }
    } else {
        m->path = strdup(m->name);
    }
    if (m->path == NULL) {
        goto out;
    }
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_NOTE) {
            ag_modules_read_notes(m, &info->dlpi_phdr[i], m->base);
        }
    }
    m->eh_frame_hdr = hdr;
    m->go_err = m->go ? -EINPROGRESS : -ENOENT;
    if ((hdr != 0 || m->go) && ag_modules_defer_cfi) {
        m->cfi_err = -EINPROGRESS; /* ag_modules_build_cfi() */
    } else if (hdr != 0 || m->go) {
        m->cfi_err = ag_modules_cfi_get(m, info, hdr, loads, n_loads, NULL);
    } else {
        m->cfi_err = -ENOENT;
    }
    m->id = ag_modules_next_id++;
    m->live = 1;
    m->gone_ns = UINT64_MAX;
    *out = m;
    m = NULL;
    err = 0;
out:
    if (m != NULL) {
        free(m->exec);
        free(m->name);
        free(m->path);
        free(m);
    }
    free(loads);
    return err;
}

static void
ag_module_free(struct ag_module *m)
{
    sym_table_free(m->symtab);
    ag_cfi_table_free(m->cfi);
    free(m->exec);
    free(m->name);
    free(m->path);
    free(m);
}

static int
ag_modules_scan_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    struct ag_modules_scan *scan = ctx;
    int is_exe = info->dlpi_name == NULL || info->dlpi_name[0] == '\0';
    struct ag_module *m;

    (void)size;
    if (info->dlpi_phnum == 0) {
        return 0;
    }
    for (m = ag_modules_all; m != NULL; m = m->next) {
        if (m->live && !m->seen && !m->mapped_file && m->base == info->dlpi_addr &&
            strcmp(m->name, info->dlpi_name != NULL ? info->dlpi_name : "") == 0) {
            m->seen = 1;
            return 0;
        }
    }
    scan->err = ag_module_new(info, is_exe, &m);
    if (scan->err != 0) {
        return 1;
    }
    m->seen = 1;
    m->next = ag_modules_all;
    ag_modules_all = m;
    scan->changed = 1;
    return 0;
}

static int
ag_modules_span_cmp(const void *a, const void *b)
{
    const struct ag_module_span *x = a, *y = b;

    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Builds and publishes the snapshot of the live modules. Called with the mutex held. */
static int
ag_modules_publish(void)
{
    struct ag_module_snapshot *snap, *old;
    size_t n = 0, k = 0;

    /* Mapped files stay out: the handler walks their code as it walks a JIT's, and tells the
     * manager of code outside every module as before. */
    for (struct ag_module *m = ag_modules_all; m != NULL; m = m->next) {
        n += m->live && !m->mapped_file ? m->n_exec : 0;
    }
    snap = calloc(1, sizeof(*snap) + n * sizeof(snap->spans[0]));
    if (snap == NULL) {
        return -ENOMEM;
    }
    for (struct ag_module *m = ag_modules_all; m != NULL; m = m->next) {
        for (size_t i = 0; m->live && !m->mapped_file && i < m->n_exec; i++) {
            snap->spans[k++] = (struct ag_module_span){ m->exec[i].lo, m->exec[i].hi, m, m->cfi,
                                                        m->cfi_err == -EINPROGRESS };
        }
    }
    qsort(snap->spans, k, sizeof(snap->spans[0]), ag_modules_span_cmp);
    /* Overlaps would break the binary search; they only come from corrupt headers. */
    for (size_t i = 1; i < k; i++) {
        if (snap->spans[i].lo < snap->spans[i - 1].hi) {
            snap->spans[i].lo = snap->spans[i - 1].hi;
            if (snap->spans[i].hi < snap->spans[i].lo) {
                snap->spans[i].hi = snap->spans[i].lo;
            }
        }
    }
    snap->n = k;
    snap->generation = ++ag_modules_generation;
    old = atomic_exchange_explicit(&ag_sig_modules, snap, memory_order_acq_rel);
    if (old != NULL) {
        old->retired_next = ag_modules_retired;
        ag_modules_retired = old;
    }
    return 0;
}

/* Whether mapped files came or went since the last ordinary refresh: the consumer's, which
 * announces modules (bridge/agent-source.c). The manager's deferred refreshes and the code map's
 * leave the news to it. */
static int
ag_modules_files_take_locked(void)
{
    int changed = ag_modules_files_changed;

    if (ag_modules_defer_cfi) {
        return 0;
    }
    ag_modules_files_changed = 0;
    return changed;
}

/* The refresh itself; the caller holds the mutex. */
static int
ag_modules_refresh_locked(void)
{
    unsigned long long c[2] = { 0, 0 };
    struct ag_modules_scan scan = { 0, 0 };
    struct ag_module *m;
    int err;

    ag_modules_iterate_locked(ag_modules_counters_cb, c);
    if (ag_modules_scanned && c[0] == ag_modules_adds && c[1] == ag_modules_subs && c[0] != ~0ull) {
        return ag_modules_files_take_locked();
    }
    for (m = ag_modules_all; m != NULL; m = m->next) {
        m->seen = 0;
    }
    ag_modules_iterate_locked(ag_modules_scan_cb, &scan);
    if (scan.err != 0) {
        return scan.err; /* counters not recorded: the next call rescans */
    }
    for (m = ag_modules_all; m != NULL; m = m->next) {
        if (m->live && !m->seen && !m->mapped_file) {
            ag_module_gone_now(m); /* dlclose'd */
            scan.changed = 1;
        }
    }
    if (scan.changed && ag_modules_defer_cfi) {
        ag_modules_files_changed = 1; /* the news is the consumer's too (it announces modules) */
    }
    if (scan.changed || !ag_modules_scanned) {
        err = ag_modules_publish();
        if (err != 0) {
            return err;
        }
    }
    ag_modules_adds = c[0];
    ag_modules_subs = c[1];
    ag_modules_scanned = 1;
    return scan.changed | ag_modules_files_take_locked();
}

int
ag_modules_refresh(void)
{
    int err;

    pthread_mutex_lock(&ag_modules_mutex);
    err = ag_modules_refresh_locked();
    pthread_mutex_unlock(&ag_modules_mutex);
    return err;
}

int
ag_modules_refresh_deferred(void)
{
    int err;

    pthread_mutex_lock(&ag_modules_mutex);
    ag_modules_defer_cfi = 1;
    err = ag_modules_refresh_locked();
    ag_modules_defer_cfi = 0;
    pthread_mutex_unlock(&ag_modules_mutex);
    return err;
}

struct ag_modules_build {
    _Atomic int *cancel;
    int cached_only; /* map the recording's stored tables, build none (ag_modules_map_cached_cfi) */
    int built;
    int missing; /* cached_only: modules whose table is not stored */
};

/* A dl_iterate_phdr callback: the loader lock keeps the module mapped while it is read. */
static int
ag_modules_build_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    struct ag_modules_build *b = ctx;
    struct ag_cfi_span *loads;
    struct ag_module *m;
    uint64_t hdr = 0;
    size_t n_loads = 0;

    (void)size;
    if (b->cancel != NULL && atomic_load(b->cancel)) {
        return 1;
    }
    for (m = ag_modules_all; m != NULL; m = m->next) {
        if (m->live && m->cfi_err == -EINPROGRESS && m->base == info->dlpi_addr &&
            strcmp(m->name, info->dlpi_name != NULL ? info->dlpi_name : "") == 0) {
            break;
        }
    }
    if (m == NULL) {
        return 0;
    }
    loads = calloc(info->dlpi_phnum + 1u, sizeof(*loads));
    if (loads == NULL) {
        return 0; /* tried again at the next refresh */
    }
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uint64_t lo = m->base + ph->p_vaddr;

        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R)) {
            loads[n_loads++] = (struct ag_cfi_span){ lo, lo + ph->p_memsz };
        } else if (ph->p_type == PT_GNU_EH_FRAME) {
            hdr = lo;
        }
    }
    if (b->cached_only) {
        free(loads);
        if ((hdr != 0 || m->go) && ag_cfi_cache_load(ag_modules_cfi_dir, m->build_id,
                                                     m->build_id_len, m->base, &m->cfi) != 0) {
            b->missing++; /* left -EINPROGRESS for ag_modules_build_cfi() */
            return 0;
        }
        m->cfi_err = hdr != 0 || m->go ? 0 : -ENOENT;
        b->built++;
        return 0;
    }
    m->cfi_err = hdr != 0 || m->go ? ag_modules_cfi_get(m, info, hdr, loads, n_loads, b->cancel)
                                   : -ENOENT;
    free(loads);
    if (m->cfi_err == -ECANCELED) {
        m->cfi_err = -EINPROGRESS; /* built at the next refresh, if the agent runs on */
        return 1;
    }
    b->built++;
    return 0;
}

/* One pass over the loaded modules for the tables a refresh left; returns b->built or -errno. */
static int
ag_modules_build_pass(struct ag_modules_build *b)
{
    int err = 0;

    pthread_mutex_lock(&ag_modules_mutex);
    ag_modules_iterate_locked(ag_modules_build_cb, b);
    if (b->built > 0) {
        err = ag_modules_publish();
    }
    pthread_mutex_unlock(&ag_modules_mutex);
    return err < 0 ? err : b->built;
}

int
ag_modules_build_cfi(_Atomic int *cancel)
{
    struct ag_modules_build b = { cancel, 0, 0, 0 };

    return ag_modules_build_pass(&b);
}

int
ag_modules_map_cached_cfi(void)
{
    struct ag_modules_build b = { NULL, 1, 0, 0 };
    int err, cached;

    pthread_mutex_lock(&ag_modules_mutex);
    cached = ag_modules_cfi_dir[0] != '\0';
    pthread_mutex_unlock(&ag_modules_mutex);
    if (!cached) {
        return 1; /* every table is still to build */
    }
    err = ag_modules_build_pass(&b);
    return err < 0 ? err : b.missing;
}

static void
ag_module_info_fill(const struct ag_module *m, struct ag_module_info *out)
{
    memset(out, 0, sizeof(*out));
    out->id = m->id;
    out->path = m->path;
    out->base = m->base;
    out->start = m->lo;
    out->end = m->hi;
    if (m->n_exec > 0) {
        out->text_start = m->exec[0].lo;
        out->text_end = m->exec[m->n_exec - 1].hi;
    }
    out->build_id = m->build_id_len > 0 ? m->build_id : NULL;
    out->build_id_len = m->build_id_len;
    out->cfi_rows = m->cfi != NULL ? m->cfi->n : 0;
    out->file = m->file;
}

/* The identity of the file sb describes, as the one a module was loaded from. */
static void
ag_file_ident_of(const struct stat *sb, struct ag_file_ident *f)
{
    f->state = AG_FILE_LOADED;
    f->dev = (uint64_t)sb->st_dev;
    f->ino = (uint64_t)sb->st_ino;
    f->size = (uint64_t)sb->st_size;
    f->mtime_ns = (uint64_t)sb->st_mtim.tv_sec * 1000000000u + (uint64_t)sb->st_mtim.tv_nsec;
    f->ctime_ns = (uint64_t)sb->st_ctim.tv_sec * 1000000000u + (uint64_t)sb->st_ctim.tv_nsec;
}

/* A module ag_modules_identify() looks for in the map. */
struct ag_ident_want {
    uint32_t id;
    uint64_t page; /* the page its lowest PT_LOAD segment starts in: mapped from its file */
    char *path;
    uint64_t map_ino; /* the inode of the mapping that holds page, 0 none (or anonymous) */
    struct ag_file_ident file;
};

static int
ag_ident_want_cmp(const void *a, const void *b)
{
    const struct ag_ident_want *x = a, *y = b;

    return x->page < y->page ? -1 : x->page > y->page;
}

/* Gives want[0, n) (sorted by page) the inodes of the mappings that hold their pages. */
static int
ag_ident_read_map(struct ag_ident_want *want, size_t n)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[PATH_MAX + 128];
    size_t k = 0;
    int in_tail = 0;

    if (f == NULL) {
        return -errno;
    }
    while (k < n && fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi, ino;
        size_t len = strlen(line);
        int tail = in_tail;

        in_tail = len == 0 || line[len - 1] != '\n';
        if (tail || sscanf(line, "%lx-%lx %*s %*s %*s %lu", &lo, &hi, &ino) != 3) {
            continue; /* the rest of a line longer than the buffer (a long path) */
        }
        while (k < n && want[k].page < lo) {
            k++; /* in no mapping (the kernel lists them in address order, apart) */
        }
        for (; k < n && want[k].page < hi; k++) {
            want[k].map_ino = ino;
        }
    }
    fclose(f);
    return 0;
}

int
ag_modules_identify(void)
{
    struct ag_ident_want *want = NULL;
    size_t n = 0, cap = 0;
    uint64_t page_mask = ~(uint64_t)(sysconf(_SC_PAGESIZE) - 1);
    int err = 0;

    pthread_mutex_lock(&ag_modules_mutex);
    for (struct ag_module *m = ag_modules_all; m != NULL && err == 0; m = m->next) {
        if (!m->live || m->file_tried || m->is_vdso || m->path[0] != '/') {
            continue;
        }
        err = pp_grow_array((void **)&want, &cap, n + 1, sizeof(*want));
        if (err == 0) {
            memset(&want[n], 0, sizeof(want[n]));
            want[n].id = m->id;
            want[n].page = m->lo & page_mask;
            want[n].path = strdup(m->path);
            err = want[n].path != NULL ? 0 : -ENOMEM;
            n += err == 0;
        }
    }
    pthread_mutex_unlock(&ag_modules_mutex);
    if (err != 0 || n == 0) {
        goto out;
    }
    qsort(want, n, sizeof(*want), ag_ident_want_cmp);
    /* Read outside the lock: a sample's naming or a dlclose's rescan must not wait on /proc. */
    err = ag_ident_read_map(want, n);
    if (err != 0) {
        goto out; /* tried again at the next announcement */
    }
    for (size_t i = 0; i < n; i++) {
        struct ag_file_ident *f = &want[i].file;
        struct stat sb;

        if (want[i].map_ino == 0) {
            continue; /* no file's mapping holds it: unknown */
        }
        /* The inode alone is compared: on overlayfs the map gives the device of the layer that
         * holds the file, stat the overlay's. While the process maps the inode, no other file
         * of its file system can have its number. */
        if (stat(want[i].path, &sb) == 0 && (uint64_t)sb.st_ino == want[i].map_ino) {
            ag_file_ident_of(&sb, f);
        } else {
            f->state = AG_FILE_OTHER; /* replaced (or removed) since it was mapped */
            f->ino = want[i].map_ino;
        }
    }
    pthread_mutex_lock(&ag_modules_mutex);
    for (struct ag_module *m = ag_modules_all; m != NULL; m = m->next) {
        for (size_t i = 0; i < n; i++) {
            if (want[i].id == m->id) {
                m->file_tried = 1;
                m->file = want[i].file;
                break;
            }
        }
    }
    pthread_mutex_unlock(&ag_modules_mutex);
out:
    for (size_t i = 0; i < n; i++) {
        free(want[i].path);
    }
    free(want);
    return err;
}

/* Calls fn in load order: the list is newest first, so recurse to its end first. */
static int
ag_module_foreach_from(struct ag_module *m, int (*fn)(const struct ag_module_info *, void *),
                       void *ctx)
{
    struct ag_module_info info;
    struct ag_module *stack[64];
    size_t n = 0;
    int r;

    while (m != NULL && n < PP_ARRAY_SIZE(stack)) {
        stack[n++] = m;
        m = m->next;
    }
    if (m != NULL) {
        r = ag_module_foreach_from(m, fn, ctx);
        if (r != 0) {
            return r;
        }
    }
    while (n > 0) {
        m = stack[--n];
        if (!m->live) {
            continue;
        }
        ag_module_info_fill(m, &info);
        r = fn(&info, ctx);
        if (r != 0) {
            return r;
        }
    }
    return 0;
}

int
ag_module_foreach(int (*fn)(const struct ag_module_info *m, void *ctx), void *ctx)
{
    int r;

    pthread_mutex_lock(&ag_modules_mutex);
    r = ag_modules_scanned ? 0 : ag_modules_refresh_locked();
    if (r >= 0) {
        r = ag_module_foreach_from(ag_modules_all, fn, ctx);
    }
    pthread_mutex_unlock(&ag_modules_mutex);
    return r;
}

static int
ag_module_holds(const struct ag_module *m, uint64_t pc)
{
    for (size_t i = 0; i < m->n_exec; i++) {
        if (pc >= m->exec[i].lo && pc < m->exec[i].hi) {
            return 1;
        }
    }
    return 0;
}

/*
 * The module that held pc at ts: of those whose ranges hold it, the one that went first after
 * ts (a live one's gone_ns is UINT64_MAX), else the one that went last; NULL when none holds it.
 * Modules at one address follow each other (the loader maps the next one only once the last one
 * is unmapped), so this is the one mapped at ts, as far as the times they were known gone allow.
 */
static struct ag_module *
ag_modules_lookup_at_locked(uint64_t pc, uint64_t ts)
{
    struct ag_module *after = NULL, *before = NULL;

    for (struct ag_module *m = ag_modules_all; m != NULL; m = m->next) {
        if (!ag_module_holds(m, pc)) {
            continue;
        }
        if (m->gone_ns > ts) {
            if (after == NULL || m->gone_ns < after->gone_ns) {
                after = m;
            }
        } else if (before == NULL || m->gone_ns > before->gone_ns) {
            before = m;
        }
    }
    return after != NULL ? after : before;
}

/* The module of pc at ts, rescanning once when no live module contains pc (a new dlopen). */
static struct ag_module *
ag_modules_find_locked(uint64_t pc, uint64_t ts, int allow_dead)
{
    struct ag_module *m = ag_modules_lookup_at_locked(pc, ts);

    if ((m == NULL || !m->live) && ag_modules_refresh_locked() > 0) {
        m = ag_modules_lookup_at_locked(pc, ts);
    }
    return m != NULL && (m->live || allow_dead) ? m : NULL;
}

int
ag_module_held_at(uint64_t pc, uint64_t ts)
{
    struct ag_module *m;

    pthread_mutex_lock(&ag_modules_mutex);
    m = ag_modules_lookup_at_locked(pc, ts);
    pthread_mutex_unlock(&ag_modules_mutex);
    return m != NULL && !m->live && m->gone_ns > ts;
}

int
ag_module_find(uint64_t pc, struct ag_module_info *out)
{
    struct ag_module *m;

    pthread_mutex_lock(&ag_modules_mutex);
    m = ag_modules_find_locked(pc, AG_MODULES_NOW, 0);
    if (m != NULL) {
        ag_module_info_fill(m, out);
    }
    pthread_mutex_unlock(&ag_modules_mutex);
    return m != NULL ? 0 : -ENOENT;
}

/*
 * sym_fde_range() of a gone module (its image unmapped), from its file (sym_fde_range_file): only
 * when the file's build-id is the module's (a library replaced on disk since is not read). A gone
 * stripped library's frames were named by their pc's offset, one row per address
 * (libhostfxr.so!0x1ff12): now by their function's start, as when it was mapped.
 */
static int
ag_fde_range_file(const struct ag_module *m, uint64_t pc, uint64_t *start, uint64_t *end)
{
    int err;

    if (m->eh_frame_hdr == 0 || m->is_vdso || m->mapped_file || m->build_id_len == 0) {
        return -ENOENT;
    }
    err = sym_fde_range_file(m->path, m->build_id, m->build_id_len, pc - m->base, start, end);
    if (err == 0) {
        *start += m->base;
        *end += m->base;
    }
    return err;
}

/* sym_fde_range() of m: its mapped image while it is live, else its file. */
static int
ag_modules_fde_range(const struct ag_module *m, uint64_t pc, uint64_t *start, uint64_t *end)
{
    const uint8_t *h = (const uint8_t *)(uintptr_t)m->eh_frame_hdr;

    if (h == NULL) {
        return -ENOENT;
    }
    if (!m->live) {
        return ag_fde_range_file(m, pc, start, end);
    }
    return sym_fde_range(h, m->eh_frame_hdr, (const uint8_t *)(uintptr_t)m->lo,
                         (const uint8_t *)(uintptr_t)m->hi, pc, start, end);
}

/* symbols/'s way to libelf and libstdc++: host/dl.c's loader calls (never dlopen by name: a
 * fork during one would leave the child's loader locked, host/dl.c), and host/fds.c's bracket of
 * the fds the loader opens and its trust of libelf's own calls (elf_begin checks its fd with
 * fcntl(F_GETFD), which host/fds.c fails with EBADF for a library fd when the caller is not the
 * library: the drain at a host's exit runs on the host's thread). */
static const struct sym_loader ag_symtab_loader = {
    host_loader_open, host_loader_close, host_fds_hold, host_fds_release, host_fds_trust,
};

void
ag_symtab_prepare(void)
{
    sym_set_loader(&ag_symtab_loader);
    /* The dlopen of libelf, or a wait for the manager's: marked as the module lock's holder in a
     * loader call, for a fork's prepare handler (agent.c) */
    atomic_fetch_add_explicit(&ag_modules_in_loader, 1, memory_order_relaxed);
    (void)sym_prepare(); /* without libelf, sym_table_load() says -ENOTSUP */
    atomic_fetch_sub_explicit(&ag_modules_in_loader, 1, memory_order_relaxed);
}

/*
 * Whether the file at m's path is the one the process mapped, so that its symbols are m's: the
 * same inode, unchanged since ag_modules_identify() looked at it, or, with a build-id, a file of
 * the same build. A module not identified (an address named before any announcement) is taken
 * as before. Called with the mutex held.
 */
static int
ag_module_file_is_loaded(const struct ag_module *m)
{
    struct ag_file_ident now;
    struct sym_file_id id;
    struct stat sb;

    if (!m->file_tried || m->file.state == AG_FILE_UNKNOWN) {
        return 1;
    }
    if (m->file.state == AG_FILE_LOADED && stat(m->path, &sb) == 0) {
        ag_file_ident_of(&sb, &now);
        if (now.dev == m->file.dev && now.ino == m->file.ino && now.size == m->file.size &&
            now.mtime_ns == m->file.mtime_ns && now.ctime_ns == m->file.ctime_ns) {
            return 1;
        }
    }
    return m->build_id_len > 0 && sym_file_id_read(m->path, &id) == 0 &&
           id.build_id_len == m->build_id_len &&
           memcmp(id.build_id, m->build_id, m->build_id_len) == 0;
}

int
ag_symbolize(uint64_t pc, struct ag_symbol *out)
{
    return ag_symbolize_at(pc, AG_MODULES_NOW, out);
}

int
ag_symbolize_at(uint64_t pc, uint64_t ts, struct ag_symbol *out)
{
    struct ag_module *m;
    struct sym_entry *s;
    int err = -ESRCH;

    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&ag_modules_mutex);
    m = ag_modules_find_locked(pc, ts, 1);
    if (m == NULL) {
        err = -ENOENT;
        goto out;
    }
    out->module_id = m->id;
    out->module_path = m->path;
    out->module_base = m->base;
    out->mapped_file = m->mapped_file;
    if (m->mapped_file) {
        goto out; /* no ELF symbols or unwind tables to read: -ESRCH, named by offset */
    }
    if (m->symtab == NULL && m->symtab_err == 0) {
        struct sym_object o = { m->path, NULL, 0, m->build_id, m->build_id_len };

        if (m->is_vdso) {
            o.image = (const void *)(uintptr_t)m->lo;
            o.image_size = (size_t)(m->hi - m->lo);
        }
        if (!m->is_vdso && !ag_module_file_is_loaded(m)) {
            m->symtab_err = -ESTALE; /* named by offset, never by another file's symbols */
        } else {
            ag_symtab_prepare();
            m->symtab_err = sym_table_load(&o, &m->symtab);
        }
    }
    s = m->symtab != NULL ? sym_table_lookup(m->symtab, pc - m->base) : NULL;
    if (s == NULL) {
        uint64_t start, end;

        if (ag_modules_fde_range(m, pc, &start, &end) == 0) {
            out->start = start; /* unnamed, but its function is known */
            out->size = end - start;
            out->offset = pc - start;
        }
        goto out;
    }
    out->raw_name = m->symtab->strings + s->name_off;
    /* demangled once, cached under the mutex; C++ by the process's own libstdc++, if loaded */
    out->name = sym_entry_name(m->symtab, s, 1);
    out->start = m->base + s->addr;
    if (out->start == ag_kernel_pc() || out->start == ag_kernel_unplaced_pc()) {
        /* the markers of CPU time in the kernel, as perf names it, in a module of their own
         * (AG_KERNEL_MODULE), not in the agent's library that holds their bytes */
        out->name = out->start == ag_kernel_pc() ? "[kernel]" : "[kernel, not placed]";
        out->module_id = AG_KERNEL_MODULE_ID;
        out->module_path = AG_KERNEL_MODULE;
        out->module_base = out->start;
    } else if (out->start == ag_not_sampled_pc() || out->start == ag_tables_pending_pc()) {
        /* CPU no sample saw before auto's move; the root of a stack cut where an unwind table
         * was still being built (drain.c) */
        out->name =
                out->start == ag_not_sampled_pc() ? "[not sampled]" : "[unwind tables not ready]";
        out->module_id = AG_UNKNOWN_MODULE_ID;
        out->module_path = AG_UNKNOWN_MODULE;
        out->module_base = out->start;
    }
    out->size = s->size;
    out->offset = pc - out->start;
    err = 0;
out:
    pthread_mutex_unlock(&ag_modules_mutex);
    return err;
}

static int
ag_module_gone_from(uint64_t after, int (*fn)(const struct ag_module_gone *g, void *ctx), void *ctx)
{
    struct ag_module *m;

    /* the list is newest first, not in gone order: each call finds the next one */
    for (uint64_t want = after + 1; want <= ag_modules_gone_count; want++) {
        for (m = ag_modules_all; m != NULL; m = m->next) {
            if (m->gone_seq == want) {
                struct ag_module_gone g = { m->id,       m->path,       0, 0, m->gone_ns,
                                            m->gone_seq, m->mapped_file };
                int r;

                if (m->n_exec > 0) {
                    g.text_start = m->exec[0].lo;
                    g.text_end = m->exec[m->n_exec - 1].hi;
                }
                r = fn(&g, ctx);
                if (r != 0) {
                    return r;
                }
                break;
            }
        }
    }
    return 0;
}

int
ag_module_gone_foreach(uint64_t after, int (*fn)(const struct ag_module_gone *g, void *ctx),
                       void *ctx)
{
    int r;

    pthread_mutex_lock(&ag_modules_mutex);
    r = ag_module_gone_from(after, fn, ctx);
    pthread_mutex_unlock(&ag_modules_mutex);
    return r;
}

/* At most this many rescans of the dlclose hook (two a dlclose) in a window: each may add a
 * module and publish a snapshot, neither freed before the agent stops, so a host that loads and
 * unloads a library in a loop would grow them at its own rate. */
#define AG_MODULES_DLCLOSE_SCANS     32
#define AG_MODULES_DLCLOSE_WINDOW_NS 100000000u

static _Atomic uint64_t ag_modules_dlclose_skipped;
static uint64_t ag_modules_dlclose_window_ns; /* mutex */
static unsigned ag_modules_dlclose_scans;     /* mutex: in the window */

uint64_t
ag_modules_dlclose_unscanned(void)
{
    return atomic_load(&ag_modules_dlclose_skipped) / 2; /* two a dlclose */
}

void
ag_modules_note_dlclose(void)
{
    uint64_t now;

    /* Not when the lock is held: the agent's own dlclose (the demangler's, under it) would
     * deadlock, and another holder scans soon anyway; the scan that first misses the module
     * then dates its going. */
    if (pthread_mutex_trylock(&ag_modules_mutex) != 0) {
        atomic_fetch_add(&ag_modules_dlclose_skipped, 1);
        return;
    }
    if (ag_modules_scanned) {
        now = pp_clock_ns(CLOCK_MONOTONIC);
        if (now - ag_modules_dlclose_window_ns >= AG_MODULES_DLCLOSE_WINDOW_NS) {
            ag_modules_dlclose_window_ns = now;
            ag_modules_dlclose_scans = 0;
        }
        if (ag_modules_dlclose_scans < AG_MODULES_DLCLOSE_SCANS) {
            ag_modules_dlclose_scans++;
            ag_modules_defer_cfi = 1;
            (void)ag_modules_refresh_locked();
            ag_modules_defer_cfi = 0;
        } else {
            atomic_fetch_add(&ag_modules_dlclose_skipped, 1);
        }
    }
    pthread_mutex_unlock(&ag_modules_mutex);
}

/* A live module of the loader's whose executable ranges meet [lo, hi). */
static int
ag_modules_elf_overlaps_locked(uint64_t lo, uint64_t hi)
{
    for (struct ag_module *m = ag_modules_all; m != NULL; m = m->next) {
        for (size_t i = 0; m->live && !m->mapped_file && i < m->n_exec; i++) {
            if (lo < m->exec[i].hi && m->exec[i].lo < hi) {
                return 1;
            }
        }
    }
    return 0;
}

/* Adds [lo, hi) to the live mapped-file module of path at image (created when absent). */
static int
ag_modules_file_add_locked(const struct ag_file_code *fc)
{
    struct ag_module *m;
    struct ag_cfi_span *exec;

    for (m = ag_modules_all; m != NULL; m = m->next) {
        if (m->mapped_file && m->live && m->base == fc->image && strcmp(m->path, fc->path) == 0) {
            break;
        }
    }
    if (m == NULL) {
        m = calloc(1, sizeof(*m));
        if (m == NULL || (m->path = strdup(fc->path)) == NULL ||
            (m->name = strdup(fc->path)) == NULL) {
            if (m != NULL) {
                free(m->path);
            }
            free(m);
            return -ENOMEM;
        }
        m->mapped_file = 1;
        m->base = m->lo = fc->image;
        m->hi = fc->hi;
        m->cfi_err = m->symtab_err = -ENOENT;
        m->live = 1;
        m->gone_ns = UINT64_MAX;
        m->id = ag_modules_next_id++;
        m->next = ag_modules_all;
        ag_modules_all = m;
        ag_modules_files_changed = 1;
    }
    m->seen = 1;
    for (size_t i = 0; i < m->n_exec; i++) {
        if (m->exec[i].lo == fc->lo && m->exec[i].hi == fc->hi) {
            return 0;
        }
    }
    exec = realloc(m->exec, (m->n_exec + 1) * sizeof(*exec));
    if (exec == NULL) {
        return -ENOMEM;
    }
    m->exec = exec;
    m->exec[m->n_exec++] = (struct ag_cfi_span){ fc->lo, fc->hi };
    if (fc->hi > m->hi) {
        m->hi = fc->hi;
    }
    ag_modules_files_changed = 1;
    return 0;
}

int
ag_modules_note_file_code(const struct ag_file_code *code, size_t n)
{
    struct ag_module *m;
    int err = 0, known;

    pthread_mutex_lock(&ag_modules_mutex);
    ag_modules_defer_cfi = 1; /* new ELF modules' tables: the manager's to build, not the drain's */
    known = ag_modules_refresh_locked() >= 0;
    ag_modules_defer_cfi = 0;
    if (!known) {
        goto out; /* the loader's list is unknown: nothing can be told apart from it */
    }
    for (m = ag_modules_all; m != NULL; m = m->next) {
        m->seen = 0;
    }
    for (size_t i = 0; i < n && err == 0; i++) {
        if (!ag_modules_elf_overlaps_locked(code[i].lo, code[i].hi)) {
            err = ag_modules_file_add_locked(&code[i]);
        }
    }
    for (m = ag_modules_all; err == 0 && m != NULL; m = m->next) {
        if (m->mapped_file && m->live && !m->seen) {
            ag_module_gone_now(m); /* unmapped */
            ag_modules_files_changed = 1;
        }
    }
out:
    pthread_mutex_unlock(&ag_modules_mutex);
    return err;
}

void
ag_modules_forked_child_untrusted(void)
{
    /* Not freed: a change the holder had begun may have left them half made. */
    atomic_store_explicit(&ag_sig_modules, NULL, memory_order_release);
    ag_modules_retired = NULL;
    ag_modules_all = NULL;
    ag_modules_scanned = 0;
    ag_modules_defer_cfi = 0;
    ag_modules_files_changed = 0;
    ag_modules_adds = ag_modules_subs = 0;
    ag_modules_dlclose_window_ns = 0;
    ag_modules_dlclose_scans = 0;
    atomic_store_explicit(&ag_modules_in_loader, 0, memory_order_relaxed);
}

void
ag_modules_fini(void)
{
    struct ag_module_snapshot *snap;

    pthread_mutex_lock(&ag_modules_mutex);
    snap = atomic_exchange_explicit(&ag_sig_modules, NULL, memory_order_acq_rel);
    free(snap);
    while (ag_modules_retired != NULL) {
        snap = ag_modules_retired;
        ag_modules_retired = snap->retired_next;
        free(snap);
    }
    while (ag_modules_all != NULL) {
        struct ag_module *m = ag_modules_all;

        ag_modules_all = m->next;
        ag_module_free(m);
    }
    ag_modules_scanned = 0;
    ag_modules_gone_count = 0;
    ag_modules_files_changed = 0;
    ag_modules_adds = ag_modules_subs = 0;
    pthread_mutex_unlock(&ag_modules_mutex);
}
