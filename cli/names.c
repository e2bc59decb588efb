/* SPDX-License-Identifier: MIT */
/*
 * cli/names.c - names a cut trace's frames from its modules' files (cli/names.h). The addresses
 * are kept as the agent keeps them for its rundown (bridge/agent-source.c): a leaf as it is, a
 * caller's return address minus one (its call); an address a rundown of the trace named after
 * its last sample is dropped (a module unloaded during the session, named then); each is named
 * by the module its last sample saw there. Context: the CLI's single thread.
 */
#include "cli/names.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>

#include "common/grow.h"
#include "nettrace/format.h"
#include "symbols/symbols.h"

#define PP_NAMES_PROVIDER "pipeprof"
#define PP_NAMES_EVENT_ID 10 /* bridge/agent-source.c's ids end at 9 */

/* ModuleLoad's FileState (agent/agent.h's enum ag_file_state). */
#define PP_NAMES_FILE_UNKNOWN 0u
#define PP_NAMES_FILE_LOADED  1u
#define PP_NAMES_FILE_OTHER   2u

/* The agent's markers (agent/agent.c: functions of libpipeprof.so that never run, the leaf or
 * root of some samples) and the modules its ag_symbolize() puts their names in (agent/agent.h's
 * AG_KERNEL_MODULE, AG_UNKNOWN_MODULE and their ids). */
static const struct {
    const char *raw, *name, *module;
    uint64_t module_id;
} pp_names_markers[] = {
    { "pipeprof_cpu_in_kernel", "[kernel]", "[kernel]", UINT32_MAX },
    { "pipeprof_cpu_in_kernel_unplaced", "[kernel, not placed]", "[kernel]", UINT32_MAX },
    { "pipeprof_cpu_not_sampled", "[not sampled]", "[unknown]", UINT32_MAX - 1u },
    { "pipeprof_unwind_tables_pending", "[unwind tables not ready]", "[unknown]", UINT32_MAX - 1u },
};

/* A ModuleLoad of the trace, and what its file gave. */
struct pp_names_module {
    char *path;
    uint64_t base, size; /* Base and Size: its PT_LOAD span at runtime */
    uint8_t build_id[SYM_BUILD_ID_MAX];
    size_t build_id_len;
    uint64_t ts; /* when the trace announced it */
    /* The loaded file's identity (ModuleLoad's File* fields, since fileident; agent/agent.h's
     * struct ag_file_ident): state 0 unknown (an older trace), 1 dev..ctime_ns are its stat, 2
     * the path named another file when the agent looked */
    uint32_t file_state;
    uint64_t file_dev, file_ino, file_size, file_mtime_ns, file_ctime_ns;
    int checked;
    enum pp_names_why why; /* when no table: PP_NAMES_NO_FILE or _CHANGED (or _NO_SYMBOL) */
    uint64_t bias;         /* runtime address - ELF virtual address */
    struct sym_table *table;
};

/* An address of the samples: the last time one held it and how many frames did. */
struct pp_names_addr {
    uint64_t addr; /* 0: an empty slot */
    uint64_t ts;
    uint64_t frames;
};

/* A named range, as a MethodDCEndVerbose. */
struct pp_names_fn {
    uint64_t start, size;
    uint64_t module_id;
    const char *module; /* a module's path, or a marker's module */
    char *name;
};

/* A method range of the trace, and when the trace gave it. */
struct pp_names_range {
    uint64_t start, end;
    uint64_t ts;
};

struct pp_names {
    struct pp_names_module *mods;
    size_t mod_count, mod_cap;
    struct pp_names_addr *set; /* open addressing, a power of two */
    size_t set_cap, set_count;
    struct pp_names_range *open; /* the ranges of the rundown being read */
    size_t open_count, open_cap;
    struct pp_names_range *all; /* every method range of the trace (JIT code's too) */
    size_t all_count, all_cap;
    uint64_t *max_end; /* pp_names_ranges_sort()'s of open (at a rundown's end), then of all */
    size_t max_end_cap;
    struct pp_names_fn *fns;
    size_t fn_count, fn_cap;
    uint64_t last_ts, capture_tid;
    int64_t start_ms; /* the recording's start (UTC milliseconds since 1970), 0 unknown */
    int cxx;          /* the process had libstdc++: the agent demangled C++ names */
};

int
pp_names_new(struct pp_names **out)
{
    *out = calloc(1, sizeof(**out));
    return *out != NULL ? 0 : -ENOMEM;
}

void
pp_names_free(struct pp_names *n)
{
    if (n == NULL) {
        return;
    }
    for (size_t i = 0; i < n->mod_count; i++) {
        free(n->mods[i].path);
        sym_table_free(n->mods[i].table);
    }
    for (size_t i = 0; i < n->fn_count; i++) {
        free(n->fns[i].name);
    }
    free(n->mods);
    free(n->set);
    free(n->open);
    free(n->all);
    free(n->max_end);
    free(n->fns);
    free(n);
}

void
pp_names_set_start(struct pp_names *n, const struct nt_trace_info *info)
{
    int64_t unix_ns;

    /* (nettrace/'s arithmetic, not timegm(), which reads the time zone file at its first call:
     * an open cli-record-child-calls counts against record) */
    if (nt_trace_info_unix_ns(info, &unix_ns) == 0 && unix_ns >= 0) {
        n->start_ms = unix_ns / 1000000;
    }
}

static uint64_t
pp_names_hash(uint64_t a)
{
    a ^= a >> 33;
    a *= 0xff51afd7ed558ccdULL;
    a ^= a >> 33;
    return a;
}

static struct pp_names_addr *
pp_names_slot(struct pp_names_addr *set, size_t cap, uint64_t addr)
{
    size_t i = (size_t)pp_names_hash(addr) & (cap - 1);

    while (set[i].addr != 0 && set[i].addr != addr) {
        i = (i + 1) & (cap - 1);
    }
    return &set[i];
}

/* Rebuilds the set at cap slots, without the addresses drop says. */
static int
pp_names_rehash(struct pp_names *n, size_t cap,
                int (*drop)(const struct pp_names *, const struct pp_names_addr *, uint64_t),
                uint64_t ts)
{
    struct pp_names_addr *set = calloc(cap, sizeof(*set));

    if (set == NULL) {
        return -ENOMEM;
    }
    n->set_count = 0;
    for (size_t i = 0; i < n->set_cap; i++) {
        if (n->set[i].addr != 0 && (drop == NULL || !drop(n, &n->set[i], ts))) {
            *pp_names_slot(set, cap, n->set[i].addr) = n->set[i];
            n->set_count++;
        }
    }
    free(n->set);
    n->set = set;
    n->set_cap = cap;
    return 0;
}

static int
pp_names_add_addr(struct pp_names *n, uint64_t addr, uint64_t ts)
{
    struct pp_names_addr *a;
    int err;

    if (addr == 0) {
        return 0;
    }
    if ((n->set_count + 1) * 2 > n->set_cap) {
        err = pp_names_rehash(n, n->set_cap == 0 ? 1024 : n->set_cap * 2, NULL, 0);
        if (err != 0) {
            return err;
        }
    }
    a = pp_names_slot(n->set, n->set_cap, addr);
    if (a->addr == 0) {
        a->addr = addr;
        n->set_count++;
    }
    if (ts > a->ts) {
        a->ts = ts;
    }
    a->frames++;
    return 0;
}

static int
pp_names_range_add(struct pp_names_range **r, size_t *count, size_t *cap, uint64_t start,
                   uint64_t size, uint64_t ts)
{
    int err = pp_grow_array((void **)r, cap, *count + 1, sizeof(**r));

    if (err == 0) {
        (*r)[(*count)++] = (struct pp_names_range){ start, start + size, ts };
    }
    return err;
}

static int
pp_names_range_cmp(const void *a, const void *b)
{
    const struct pp_names_range *x = a, *y = b;

    return x->start < y->start ? -1 : x->start > y->start;
}

/* Sorts r[0, count) by start and fills n->max_end[i] with the highest end of r[0..i], for
 * pp_names_ranges_cover(). Returns 0 or -ENOMEM. */
static int
pp_names_ranges_sort(struct pp_names *n, struct pp_names_range *r, size_t count)
{
    int err = pp_grow_array((void **)&n->max_end, &n->max_end_cap, count + 1, sizeof(*n->max_end));

    if (err != 0) {
        return err;
    }
    if (count > 1) {
        qsort(r, count, sizeof(*r), pp_names_range_cmp);
    }
    for (size_t i = 0; i < count; i++) {
        n->max_end[i] = i > 0 && n->max_end[i - 1] > r[i].end ? n->max_end[i - 1] : r[i].end;
    }
    return 0;
}

/* Whether a range of r[0, count) (sorted, pp_names_ranges_sort()) given at min_ts or later
 * covers addr. */
static int
pp_names_ranges_cover(const struct pp_names *n, const struct pp_names_range *r, size_t count,
                      uint64_t addr, uint64_t min_ts)
{
    size_t lo = 0, hi = count;

    while (lo < hi) { /* the first range that starts above addr */
        size_t mid = lo + (hi - lo) / 2;

        if (r[mid].start <= addr) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    while (lo > 0 && n->max_end[lo - 1] > addr) { /* back while an earlier one may reach it */
        lo--;
        if (addr < r[lo].end && r[lo].ts >= min_ts) {
            return 1;
        }
    }
    return 0;
}

/* An address the rundown just completed named, not held by a sample since. */
static int
pp_names_named_by_open(const struct pp_names *n, const struct pp_names_addr *a, uint64_t ts)
{
    return a->ts <= ts && pp_names_ranges_cover(n, n->open, n->open_count, a->addr, 0);
}

static uint64_t
pp_names_le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

/* ModuleLoad's fields by name: Path, Base, Size, BuildId, then the file's identity. */
enum {
    PP_NAMES_F_PATH,
    PP_NAMES_F_BASE,
    PP_NAMES_F_SIZE,
    PP_NAMES_F_BUILD_ID,
    PP_NAMES_F_FILE_STATE,
    PP_NAMES_F_FILE_DEV,
    PP_NAMES_F_FILE_INO,
    PP_NAMES_F_FILE_SIZE,
    PP_NAMES_F_FILE_MTIME,
    PP_NAMES_F_FILE_CTIME,
    PP_NAMES_F_COUNT,
};
static const char *const pp_names_module_fields[PP_NAMES_F_COUNT] = {
    "Path",    "Base",    "Size",     "BuildId",     "FileState",
    "FileDev", "FileIno", "FileSize", "FileMtimeNs", "FileCtimeNs",
};

struct pp_names_fields {
    const struct nt_value *v[PP_NAMES_F_COUNT]; /* NULL: not in the event */
    struct nt_value got[PP_NAMES_F_COUNT];
};

static int
pp_names_visit(void *ctx, const struct nt_value *v)
{
    struct pp_names_fields *f = ctx;

    if (v->depth != 0 || v->field == NULL || v->field->name == NULL) {
        return 0;
    }
    for (int i = 0; i < PP_NAMES_F_COUNT; i++) {
        if (strcmp(v->field->name, pp_names_module_fields[i]) == 0) {
            f->got[i] = *v;
            f->v[i] = &f->got[i];
        }
    }
    return 0;
}

static int
pp_names_hex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* pipeprof's ModuleLoad: Path, Base, Size, BuildId (hex). */
static int
pp_names_module_load(struct pp_names *n, const struct nt_event *ev)
{
    struct pp_names_fields f;
    const struct nt_value *path, *build_id;
    struct pp_names_module *m;
    char hex[2 * SYM_BUILD_ID_MAX + 1];
    size_t need;
    int err;

    memset(&f, 0, sizeof(f));
    if (nt_payload_decode(ev->desc, ev->payload, ev->payload_size, pp_names_visit, &f) != 0 ||
        f.v[PP_NAMES_F_PATH] == NULL || f.v[PP_NAMES_F_BASE] == NULL ||
        f.v[PP_NAMES_F_SIZE] == NULL) {
        return 0;
    }
    path = f.v[PP_NAMES_F_PATH];
    build_id = f.v[PP_NAMES_F_BUILD_ID];
    err = pp_grow_array((void **)&n->mods, &n->mod_cap, n->mod_count + 1, sizeof(*n->mods));
    if (err != 0) {
        return err;
    }
    m = &n->mods[n->mod_count];
    memset(m, 0, sizeof(*m));
    need = nt_utf16_to_utf8(path->data, path->size, NULL, 0) + 1;
    m->path = malloc(need);
    if (m->path == NULL) {
        return -ENOMEM;
    }
    nt_utf16_to_utf8(path->data, path->size, m->path, need);
    m->base = f.v[PP_NAMES_F_BASE]->u;
    m->size = f.v[PP_NAMES_F_SIZE]->u;
    m->ts = ev->timestamp;
    if (f.v[PP_NAMES_F_FILE_STATE] != NULL && f.v[PP_NAMES_F_FILE_DEV] != NULL &&
        f.v[PP_NAMES_F_FILE_INO] != NULL && f.v[PP_NAMES_F_FILE_SIZE] != NULL &&
        f.v[PP_NAMES_F_FILE_MTIME] != NULL && f.v[PP_NAMES_F_FILE_CTIME] != NULL) {
        m->file_state = (uint32_t)f.v[PP_NAMES_F_FILE_STATE]->u;
        m->file_dev = f.v[PP_NAMES_F_FILE_DEV]->u;
        m->file_ino = f.v[PP_NAMES_F_FILE_INO]->u;
        m->file_size = f.v[PP_NAMES_F_FILE_SIZE]->u;
        m->file_mtime_ns = f.v[PP_NAMES_F_FILE_MTIME]->u;
        m->file_ctime_ns = f.v[PP_NAMES_F_FILE_CTIME]->u;
    }
    if (build_id != NULL) {
        size_t len = nt_utf16_to_utf8(build_id->data, build_id->size, hex, sizeof(hex));

        for (size_t i = 0; i + 1 < len && i + 1 < sizeof(hex) && i / 2 < SYM_BUILD_ID_MAX; i += 2) {
            int hi = pp_names_hex(hex[i]), lo = pp_names_hex(hex[i + 1]);

            if (hi < 0 || lo < 0) {
                m->build_id_len = 0;
                break;
            }
            m->build_id[m->build_id_len++] = (uint8_t)(hi << 4 | lo);
        }
    }
    if (strstr(m->path, "/libstdc++.so") != NULL) {
        n->cxx = 1;
    }
    n->mod_count++;
    return 0;
}

int
pp_names_event(struct pp_names *n, const struct nt_event *ev)
{
    const struct nt_event_desc *d = ev->desc;
    int err = 0;

    if (d == NULL) {
        return 0;
    }
    if (ev->timestamp > n->last_ts) {
        n->last_ts = ev->timestamp;
    }
    if (d->event_id == 0 && strcmp(d->provider, NT_PROVIDER_SAMPLE_PROFILER) == 0) {
        for (uint32_t i = 0; i < ev->stack_depth && err == 0; i++) {
            err = pp_names_add_addr(n, i == 0 ? ev->stack[i] : ev->stack[i] - 1, ev->timestamp);
        }
    } else if (strcmp(d->provider, PP_NAMES_PROVIDER) == 0) {
        n->capture_tid = ev->capture_thread_id;
        if (strcmp(d->name, "ModuleLoad") == 0) {
            err = pp_names_module_load(n, ev);
        }
    } else if ((d->event_id == 143 && strcmp(d->provider, NT_PROVIDER_RUNTIME) == 0) ||
               ((d->event_id == 143 || d->event_id == 144) &&
                strcmp(d->provider, NT_PROVIDER_RUNDOWN) == 0)) {
        /* MethodLoadVerbose / MethodDCEndVerbose: MethodID, ModuleID, start, size (u32) */
        if (ev->payload_size >= 28) {
            uint64_t start = pp_names_le64(ev->payload + 16);
            uint64_t size = (uint64_t)ev->payload[24] | (uint64_t)ev->payload[25] << 8 |
                            (uint64_t)ev->payload[26] << 16 | (uint64_t)ev->payload[27] << 24;

            if (strcmp(d->provider, NT_PROVIDER_RUNDOWN) == 0) { /* a rundown's, not a JIT's */
                err = pp_names_range_add(&n->open, &n->open_count, &n->open_cap, start, size,
                                         ev->timestamp);
            }
            if (err == 0) {
                err = pp_names_range_add(&n->all, &n->all_count, &n->all_cap, start, size,
                                         ev->timestamp);
            }
        }
    } else if (d->event_id == 146 && strcmp(d->provider, NT_PROVIDER_RUNDOWN) == 0) {
        /* MethodDCEndComplete: what this rundown named is named, up to now */
        if (n->open_count > 0 && n->set_cap > 0) {
            err = pp_names_ranges_sort(n, n->open, n->open_count);
            if (err == 0) {
                err = pp_names_rehash(n, n->set_cap, pp_names_named_by_open, ev->timestamp);
            }
        }
        n->open_count = 0;
    } else if (d->event_id == 148 && strcmp(d->provider, NT_PROVIDER_RUNDOWN) == 0) {
        n->open_count = 0; /* MethodDCEndInit */
    }
    return err;
}

int
pp_names_wanted(const struct pp_names *n)
{
    return n->mod_count > 0 && n->set_count > 0;
}

/* The module the last sample at a saw: the latest announced at or before it that covers it,
 * else the first that covers it (a module is announced with the batch after its first
 * samples). */
static struct pp_names_module *
pp_names_module_of(struct pp_names *n, const struct pp_names_addr *a)
{
    struct pp_names_module *best = NULL, *first = NULL;

    for (size_t i = 0; i < n->mod_count; i++) {
        struct pp_names_module *m = &n->mods[i];

        if (a->addr < m->base || a->addr - m->base >= m->size) {
            continue;
        }
        if (first == NULL) {
            first = m;
        }
        if (m->ts <= a->ts) {
            best = m;
        }
    }
    return best != NULL ? best : first;
}

static void
pp_names_note(char *buf, size_t len, const char *path, const char *what)
{
    if (buf[0] == '\0') {
        snprintf(buf, len, "%s (%s)", path, what);
    }
}

/*
 * The kernel's vdso has no file, but this process maps the same image when it runs on the
 * recording's kernel (its build-id says so): its symbols are read from there, as the agent reads
 * them from its own mapping.
 */
static void
pp_names_check_vdso(struct pp_names_module *m, struct pp_names_stats *st)
{
    const void *image = (const void *)(uintptr_t)getauxval(AT_SYSINFO_EHDR);
    struct sym_file_id id;
    struct sym_object o;

    if (image == NULL || sym_image_id_read(image, &id) != 0) {
        pp_names_note(st->missing, sizeof(st->missing), m->path, "no vdso here");
        return;
    }
    if (m->build_id_len == 0 || id.build_id_len != m->build_id_len ||
        memcmp(id.build_id, m->build_id, m->build_id_len) != 0 ||
        id.load_hi - id.load_lo != m->size) {
        m->why = PP_NAMES_CHANGED;
        pp_names_note(st->changed, sizeof(st->changed), m->path,
                      "another kernel's: its build-id differs");
        return;
    }
    m->bias = m->base - id.load_lo;
    m->why = PP_NAMES_NO_SYMBOL;
    memset(&o, 0, sizeof(o));
    o.path = m->path;
    o.image = image;
    o.image_size = (size_t)(id.load_hi - id.load_lo);
    if (sym_table_load(&o, &m->table) != 0) {
        m->table = NULL;
    }
}

/* A file time in milliseconds since 1970, as pp_names_set_start()'s start. */
static int64_t
pp_names_ms(const struct timespec *t)
{
    return (int64_t)t->tv_sec * 1000 + t->tv_nsec / 1000000;
}

/* A time of struct stat in nanoseconds since 1970, as the agent's FileMtimeNs and FileCtimeNs. */
static uint64_t
pp_names_ns(const struct timespec *t)
{
    return (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec;
}

/*
 * Whether the file at m's path (sb) is not the one the trace says was loaded: NULL when it is
 * (the same inode, unchanged since the agent looked at it), else what differs. Every field of
 * the inode's stat counts: its change time too, stamped by a write whose modification time was
 * set back, as by a chmod (refused, never misnamed).
 */
static const char *
pp_names_file_differs(const struct pp_names_module *m, const struct stat *sb)
{
    if (m->file_state == PP_NAMES_FILE_OTHER) {
        return "file changed since it was loaded: another file was at its path when it was "
               "recorded";
    }
    if (m->file_state != PP_NAMES_FILE_LOADED) {
        return "file changed since it was loaded: the trace's record of it is not understood";
    }
    if ((uint64_t)sb->st_dev != m->file_dev || (uint64_t)sb->st_ino != m->file_ino) {
        return "file changed since it was loaded: another file is at its path";
    }
    if ((uint64_t)sb->st_size != m->file_size || pp_names_ns(&sb->st_mtim) != m->file_mtime_ns) {
        return "file changed since it was loaded: modified";
    }
    if (pp_names_ns(&sb->st_ctim) != m->file_ctime_ns) {
        return "file changed since it was loaded: its inode changed";
    }
    return NULL;
}

/* Checks that m's file is the one the process loaded, and loads its symbols. */
static void
pp_names_check(struct pp_names *n, struct pp_names_module *m, struct pp_names_stats *st)
{
    struct sym_file_id id;
    struct sym_object o;
    struct stat sb;
    int err;

    m->checked = 1;
    m->why = PP_NAMES_NO_FILE;
    if (m->path[0] != '/' && strstr(m->path, "vdso") != NULL) {
        pp_names_check_vdso(m, st);
        return;
    }
    if (m->path[0] != '/') {
        return; /* an anonymous image: no file */
    }
    if (stat(m->path, &sb) != 0) {
        pp_names_note(st->missing, sizeof(st->missing), m->path, strerror(errno));
        return;
    }
    err = sym_file_id_read(m->path, &id);
    if (err != 0) {
        pp_names_note(st->missing, sizeof(st->missing), m->path,
                      err == -EBADMSG ? "not an ELF file" : strerror(-err));
        return;
    }
    m->why = PP_NAMES_CHANGED;
    if (m->build_id_len > 0 && (id.build_id_len != m->build_id_len ||
                                memcmp(id.build_id, m->build_id, m->build_id_len) != 0)) {
        pp_names_note(st->changed, sizeof(st->changed), m->path,
                      "its build-id differs from the loaded one's");
        return;
    }
    if (id.load_hi - id.load_lo != m->size) {
        pp_names_note(st->changed, sizeof(st->changed), m->path,
                      "its load size differs from the loaded one's");
        return;
    }
    if (m->build_id_len == 0 && m->file_state != PP_NAMES_FILE_UNKNOWN) {
        /* The trace says which file was loaded: only that file, unchanged, names (whatever its
         * times: a process recorded days after it started loaded its files before). */
        const char *what = pp_names_file_differs(m, &sb);

        if (what != NULL) {
            pp_names_note(st->changed, sizeof(st->changed), m->path, what);
            return;
        }
    } else if (m->build_id_len == 0 && n->start_ms != 0 && pp_names_ms(&sb.st_mtim) > n->start_ms) {
        /* no build-id to tell: a file modified since the recording began may be another */
        pp_names_note(st->changed, sizeof(st->changed), m->path,
                      "no build-id, and modified after the recording began");
        return;
    }
    if (m->build_id_len == 0 && n->start_ms != 0 && pp_names_ms(&sb.st_ctim) > n->start_ms) {
        /* An older file put in its place keeps its older mtime (mv, cp -p, install -p, a
         * package's files), but the kernel stamps the inode's change time then, and no one can
         * set that. (A chmod or a new hard link stamps it too: refused, named by offset.) */
        pp_names_note(st->changed, sizeof(st->changed), m->path,
                      "no build-id, and moved or changed after the recording began");
        return;
    }
    m->bias = m->base - id.load_lo;
    m->why = PP_NAMES_NO_SYMBOL;
    memset(&o, 0, sizeof(o));
    o.path = m->path;
    o.build_id = m->build_id_len > 0 ? m->build_id : NULL;
    o.build_id_len = m->build_id_len;
    err = sym_table_load(&o, &m->table);
    if (err != 0) {
        m->table = NULL; /* named by offset, as the agent names a module without symbols */
    }
}

/*
 * Whether a method event of the trace names a: in a module, one given after its last sample (the
 * agent names as it goes into a PIPEPROF_OUTPUT file, without a rundown's bounds); in no module
 * (JIT code the runtime named when it compiled it), any.
 */
static int
pp_names_in_trace(const struct pp_names *n, const struct pp_names_addr *a, int in_module)
{
    return pp_names_ranges_cover(n, n->all, n->all_count, a->addr, in_module ? a->ts : 0);
}

static int
pp_names_fn_add(struct pp_names *n, uint64_t start, uint64_t size, uint64_t module_id,
                const char *module, const char *name)
{
    struct pp_names_fn *f;
    int err = pp_grow_array((void **)&n->fns, &n->fn_cap, n->fn_count + 1, sizeof(*n->fns));

    if (err != 0) {
        return err;
    }
    f = &n->fns[n->fn_count];
    f->start = start;
    f->size = size != 0 ? size : 1;
    f->module_id = module_id;
    f->module = module;
    f->name = strdup(name);
    if (f->name == NULL) {
        return -ENOMEM;
    }
    n->fn_count++;
    return 0;
}

/* Names one address of module m the way ag_symbolize_at() and bridge_write_names() do. */
static int
pp_names_name(struct pp_names *n, struct pp_names_module *m, const struct pp_names_addr *a,
              struct pp_names_stats *st)
{
    uint64_t vaddr = a->addr - m->bias, start, end;
    struct sym_entry *s = m->table != NULL ? sym_table_lookup(m->table, vaddr) : NULL;
    char unnamed[32];

    if (s != NULL) {
        const char *raw = m->table->strings + s->name_off;

        st->named += a->frames;
        for (size_t i = 0; i < sizeof(pp_names_markers) / sizeof(pp_names_markers[0]); i++) {
            if (strcmp(raw, pp_names_markers[i].raw) == 0) {
                return pp_names_fn_add(n, m->bias + s->addr, s->size, pp_names_markers[i].module_id,
                                       pp_names_markers[i].module, pp_names_markers[i].name);
            }
        }
        return pp_names_fn_add(n, m->bias + s->addr, s->size, m->base, m->path,
                               sym_entry_name(m->table, s, n->cxx));
    }
    /* A stripped library's internal function: by its module and its address in the ELF file,
     * its whole function's where the unwind tables give it, as the agent's rundown does (the
     * file is the one loaded: pp_names_check). */
    st->unnamed[PP_NAMES_NO_SYMBOL] += a->frames;
    if (m->path[0] == '/' &&
        sym_fde_range_file(m->path, m->build_id, m->build_id_len, vaddr, &start, &end) == 0) {
        snprintf(unnamed, sizeof(unnamed), "0x%llx", (unsigned long long)start);
        return pp_names_fn_add(n, m->bias + start, end - start, m->base, m->path, unnamed);
    }
    snprintf(unnamed, sizeof(unnamed), "0x%llx", (unsigned long long)vaddr);
    return pp_names_fn_add(n, a->addr, 2, m->base, m->path, unnamed);
}

static int
pp_names_fn_cmp(const void *a, const void *b)
{
    const struct pp_names_fn *x = a, *y = b;

    return x->start < y->start ? -1 : x->start > y->start;
}

/* The CLI may load libraries the agent must not: libstdc++ for C++ names (sym_demangle's
 * RTLD_NOLOAD is the agent's rule, dropped here). */
static void *
pp_names_open(const char *name, int flags)
{
    return dlopen(name, flags & ~RTLD_NOLOAD);
}

static const struct sym_loader pp_names_loader = { pp_names_open, dlclose, NULL, NULL, NULL };

int
pp_names_resolve(struct pp_names *n, struct pp_names_stats *st)
{
    size_t kept = 0, pending = 0;
    int err = 0;

    memset(st, 0, sizeof(*st));
    err = pp_names_ranges_sort(n, n->all, n->all_count);
    if (err != 0) {
        return err;
    }
    for (size_t i = 0; i < n->set_cap; i++) { /* frames a file could name, that nothing named */
        const struct pp_names_addr *a = &n->set[i];

        pending += a->addr != 0 && pp_names_module_of(n, a) != NULL && !pp_names_in_trace(n, a, 1);
    }
    if (pending == 0) {
        return 0; /* the trace names its frames (a rundown after the last sample) */
    }
    sym_set_loader(&pp_names_loader);
    for (size_t i = 0; i < n->set_cap && err == 0; i++) {
        const struct pp_names_addr *a = &n->set[i];
        struct pp_names_module *m;

        if (a->addr == 0) {
            continue;
        }
        m = pp_names_module_of(n, a);
        if (pp_names_in_trace(n, a, m != NULL)) {
            continue;
        }
        st->frames += a->frames;
        if (m == NULL) {
            st->unnamed[PP_NAMES_NO_MODULE] += a->frames;
            continue;
        }
        if (!m->checked) {
            pp_names_check(n, m, st);
            st->modules_changed += m->why == PP_NAMES_CHANGED;
        }
        if (m->why != PP_NAMES_NO_SYMBOL) {
            st->unnamed[m->why] += a->frames;
            continue;
        }
        err = pp_names_name(n, m, a, st);
    }
    if (err != 0) {
        return err;
    }
    if (n->fn_count > 1) {
        qsort(n->fns, n->fn_count, sizeof(*n->fns), pp_names_fn_cmp);
    }
    for (size_t i = 0; i < n->fn_count; i++) { /* several addresses in one function */
        if (kept > 0 && n->fns[kept - 1].start == n->fns[i].start) {
            free(n->fns[i].name);
            continue;
        }
        n->fns[kept++] = n->fns[i];
    }
    n->fn_count = kept;
    return 1;
}

int
pp_names_foreach(const struct pp_names *n,
                 int (*fn)(void *ctx, uint64_t start, uint64_t size, uint64_t module_id,
                           const char *module, const char *name),
                 void *ctx)
{
    for (size_t i = 0; i < n->fn_count; i++) {
        int r = fn(ctx, n->fns[i].start, n->fns[i].size, n->fns[i].module_id, n->fns[i].module,
                   n->fns[i].name);

        if (r != 0) {
            return r;
        }
    }
    return 0;
}

void
pp_names_describe(const struct pp_names_stats *st, char *buf, size_t len)
{
    static const char *const what[PP_NAMES_WHY_COUNT] = {
        [PP_NAMES_NO_MODULE] = "in no module of the trace",
        [PP_NAMES_NO_FILE] = "in files not read",
        [PP_NAMES_CHANGED] = "in files that are not the ones loaded",
        [PP_NAMES_NO_SYMBOL] = "without a symbol (named module!offset)",
    };
    uint64_t left = st->frames - st->named;
    int used = snprintf(buf, len, "%llu of %llu frames named from the files of its modules",
                        (unsigned long long)st->named, (unsigned long long)st->frames);
    const char *sep = "; not: ";

    for (int i = 0; i < PP_NAMES_WHY_COUNT && left > 0; i++) {
        const char *file = i == PP_NAMES_CHANGED   ? st->changed
                           : i == PP_NAMES_NO_FILE ? st->missing
                                                   : "";

        if (st->unnamed[i] == 0 || used < 0 || (size_t)used >= len) {
            continue;
        }
        used += snprintf(buf + used, len - (size_t)used, "%s%llu %s%s%s%s", sep,
                         (unsigned long long)st->unnamed[i], what[i], file[0] != '\0' ? " (" : "",
                         file, file[0] != '\0' ? ")" : "");
        sep = ", ";
    }
    if (st->modules_changed > 0 && used >= 0 && (size_t)used < len) {
        snprintf(buf + used, len - (size_t)used,
                 "; %llu module%s not named: file changed since it was loaded",
                 (unsigned long long)st->modules_changed, st->modules_changed == 1 ? "" : "s");
    }
}

static const struct nt_field pp_names_fields[] = {
    { "Frames", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Named", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Changed", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "NoFile", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "NoSymbol", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "NoModule", NT_TYPE_UINT64, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Description", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
};
static const struct nt_event_desc pp_names_desc = {
    PP_NAMES_PROVIDER, PP_NAMES_EVENT_ID, PP_NAMES_EVENT, 0, 1, 4, 0, pp_names_fields, 7, 0,
};

int
pp_names_write(struct pp_names *n, const struct pp_names_stats *st, struct nt_writer *w)
{
    uint64_t tid = n->capture_tid, ts = n->last_ts;
    uint64_t *written = calloc(n->fn_count + 1, sizeof(*written));
    uint8_t *buf = malloc(NT_MAX_PAYLOAD);
    char why[1024];
    size_t mods = 0;
    struct nt_payload p;
    int err;

    if (written == NULL || buf == NULL) {
        err = -ENOMEM;
        goto out;
    }
    nt_payload_init(&p, buf, NT_MAX_PAYLOAD);
    nt_payload_rundown_complete(&p);
    err = nt_writer_write_payload(w, nt_known_event_desc(NT_KNOWN_RUNDOWN_DC_END_INIT), tid, tid,
                                  ts, &p);
    for (size_t i = 0; i < n->fn_count && err == 0; i++) {
        const struct pp_names_fn *f = &n->fns[i];
        size_t k;

        for (k = 0; k < mods && written[k] != f->module_id; k++) {
        }
        if (k == mods) {
            written[mods++] = f->module_id;
            nt_payload_init(&p, buf, NT_MAX_PAYLOAD);
            nt_payload_module_dc_end(&p, f->module_id, f->module);
            err = nt_writer_write_payload(w, nt_known_event_desc(NT_KNOWN_MODULE_DC_END), tid, tid,
                                          ts, &p);
            if (err != 0) {
                break;
            }
        }
        nt_payload_init(&p, buf, NT_MAX_PAYLOAD);
        nt_payload_method_dc_end(&p, f->module_id, f->start,
                                 f->size > UINT32_MAX ? UINT32_MAX : (uint32_t)f->size, "", f->name,
                                 "");
        if (p.err == -ENOSPC) { /* a name longer than an event can hold: skipped, as the agent */
            continue;
        }
        err = nt_writer_write_payload(w, nt_known_event_desc(NT_KNOWN_METHOD_DC_END), tid, tid, ts,
                                      &p);
    }
    if (err == 0) {
        nt_payload_init(&p, buf, NT_MAX_PAYLOAD);
        nt_payload_rundown_complete(&p);
        err = nt_writer_write_payload(w, nt_known_event_desc(NT_KNOWN_RUNDOWN_DC_END_COMPLETE), tid,
                                      tid, ts, &p);
    }
    if (err == 0) {
        pp_names_describe(st, why, sizeof(why));
        nt_payload_init(&p, buf, NT_MAX_PAYLOAD);
        nt_payload_u64(&p, st->frames);
        nt_payload_u64(&p, st->named);
        nt_payload_u64(&p, st->unnamed[PP_NAMES_CHANGED]);
        nt_payload_u64(&p, st->unnamed[PP_NAMES_NO_FILE]);
        nt_payload_u64(&p, st->unnamed[PP_NAMES_NO_SYMBOL]);
        nt_payload_u64(&p, st->unnamed[PP_NAMES_NO_MODULE]);
        nt_payload_string(&p, why);
        err = nt_writer_write_payload(w, &pp_names_desc, tid, tid, ts, &p);
    }
out:
    free(buf);
    free(written);
    return err;
}
