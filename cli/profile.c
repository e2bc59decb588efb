/* SPDX-License-Identifier: MIT */
/*
 * cli/profile.c - loads ThreadSample events and the names of code addresses from a nettrace
 * stream into a compact profile (cli/profile.h). Addresses are named at the end of the stream,
 * because rundown events come after the samples they name, as TraceEvent's TraceLog does.
 * Context: the CLI's single thread.
 */
#include "cli/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nettrace/format.h"
#include "nettrace/nettrace.h"

#define PP_PROVIDER_SAMPLE_PROFILER "Microsoft-DotNETCore-SampleProfiler"
#define PP_PROVIDER_RUNTIME         "Microsoft-Windows-DotNETRuntime"
#define PP_PROVIDER_RUNDOWN         "Microsoft-Windows-DotNETRuntimeRundown"
#define PP_PROVIDER_PIPEPROF        "pipeprof"

/* A method range from MethodLoadVerbose / MethodDCEndVerbose. */
struct pp_method {
    uint64_t start;
    uint64_t size;
    uint64_t module_id;
    char *ns;   /* MethodNamespace */
    char *name; /* name(signature) */
};

struct pp_module {
    uint64_t id;   /* ModuleID, or the load base for pipeprof ModuleLoad */
    uint64_t base; /* 0 when unknown */
    uint64_t size;
    char *label;    /* file name without its last extension, as TraceEvent shows modules */
    char *basename; /* file name */
};

/* Open-addressing map from a 64-bit key (or a byte string) to an index. */
struct pp_map {
    uint64_t *keys;
    uint32_t *values; /* index + 1; 0 marks an empty slot */
    size_t cap;       /* power of two */
    size_t count;
};

struct pp_profile_priv {
    struct pp_method *methods;
    size_t method_count, method_cap;
    struct pp_module *modules;
    size_t module_count, module_cap;
    /* Raw stacks before naming: ips stored contiguously, leaf first. */
    uint64_t *ips;
    size_t ip_count, ip_cap;
    size_t *stack_ip_offset; /* per distinct raw stack */
    size_t stack_cap;
    struct pp_map stack_map;  /* hash of (thread, ips) -> stack index (collisions chained) */
    uint32_t *stack_next;     /* chain of stacks sharing a hash slot */
    struct pp_map thread_map; /* thread id -> thread index */
    size_t thread_cap;
    regex_t fold_re;
    int have_fold_re;
};

static uint64_t
pp_hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static int
pp_map_grow(struct pp_map *m)
{
    size_t ncap = m->cap != 0 ? m->cap * 2 : 1024;
    uint64_t *keys = calloc(ncap, sizeof(*keys));
    uint32_t *values = calloc(ncap, sizeof(*values));
    size_t i;

    if (keys == NULL || values == NULL) {
        free(keys);
        free(values);
        return -ENOMEM;
    }
    for (i = 0; i < m->cap; i++) {
        size_t j;

        if (m->values[i] == 0) {
            continue;
        }
        for (j = pp_hash_u64(m->keys[i]) & (ncap - 1); values[j] != 0; j = (j + 1) & (ncap - 1)) {
        }
        keys[j] = m->keys[i];
        values[j] = m->values[i];
    }
    free(m->keys);
    free(m->values);
    m->keys = keys;
    m->values = values;
    m->cap = ncap;
    return 0;
}

/* Returns the slot for key: values[slot] is 0 when the key is absent. */
static int
pp_map_slot(struct pp_map *m, uint64_t key, size_t *slot)
{
    size_t j;

    if ((m->count + 1) * 2 > m->cap) {
        int err = pp_map_grow(m);

        if (err != 0) {
            return err;
        }
    }
    for (j = pp_hash_u64(key) & (m->cap - 1); m->values[j] != 0; j = (j + 1) & (m->cap - 1)) {
        if (m->keys[j] == key) {
            break;
        }
    }
    *slot = j;
    return 0;
}

static void
pp_map_fini(struct pp_map *m)
{
    free(m->keys);
    free(m->values);
    memset(m, 0, sizeof(*m));
}

static int
pp_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    size_t ncap;
    void *n;

    if (need <= *cap) {
        return 0;
    }
    ncap = *cap != 0 ? *cap : 64;
    while (ncap < need) {
        ncap *= 2;
    }
    n = realloc(*arr, ncap * elem);
    if (n == NULL) {
        return -ENOMEM;
    }
    *arr = n;
    *cap = ncap;
    return 0;
}

/* Reads a NUL-terminated UTF-16LE string at *pos as UTF-8 (malloc'd). */
static char *
pp_read_utf16z(const uint8_t *p, uint32_t size, uint32_t *pos)
{
    uint32_t start = *pos, end = start;
    size_t need;
    char *s;

    while (end + 1 < size && (p[end] != 0 || p[end + 1] != 0)) {
        end += 2;
    }
    if (end + 1 >= size) {
        return NULL;
    }
    *pos = end + 2;
    need = nt_utf16_to_utf8(p + start, end - start, NULL, 0) + 1;
    s = malloc(need);
    if (s != NULL) {
        nt_utf16_to_utf8(p + start, end - start, s, need);
    }
    return s;
}

static uint64_t
pp_le64(const uint8_t *p)
{
    uint64_t v = 0;
    int i;

    for (i = 7; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

static uint32_t
pp_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* "/usr/lib/libfoo.so" -> "libfoo", "libc.so.6" -> "libc.so", as TraceEvent names modules. */
static char *
pp_module_label(const char *path)
{
    const char *base = strrchr(path, '/');
    char *label, *dot;

    base = base != NULL ? base + 1 : path;
    if (*base == '\0') {
        base = path;
    }
    label = strdup(base);
    if (label != NULL && (dot = strrchr(label, '.')) != NULL && dot != label) {
        *dot = '\0';
    }
    return label;
}

static int
pp_add_module(struct pp_profile_priv *pv, uint64_t id, uint64_t base, uint64_t size,
              const char *path)
{
    struct pp_module *m;
    int err;

    err = pp_grow((void **)&pv->modules, &pv->module_cap, pv->module_count + 1,
                  sizeof(*pv->modules));
    if (err != 0) {
        return err;
    }
    m = &pv->modules[pv->module_count];
    m->id = id;
    m->base = base;
    m->size = size;
    m->label = pp_module_label(path);
    m->basename = strdup(strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path);
    if (m->label == NULL || m->basename == NULL) {
        free(m->label);
        free(m->basename);
        return -ENOMEM;
    }
    pv->module_count++;
    return 0;
}

/* MethodLoadVerbose (143) / MethodDCEndVerbose (144): see the class comment in cli/profile.h. */
static int
pp_add_method(struct pp_profile_priv *pv, const uint8_t *p, uint32_t size)
{
    struct pp_method *m;
    char *ns = NULL, *name = NULL, *sig = NULL;
    const char *paren;
    uint32_t pos = 36;
    size_t need;
    int err = 0;

    if (size < 36) {
        return 0; /* too short to be a method event: ignore, as TraceEvent would */
    }
    ns = pp_read_utf16z(p, size, &pos);
    name = ns != NULL ? pp_read_utf16z(p, size, &pos) : NULL;
    sig = name != NULL ? pp_read_utf16z(p, size, &pos) : NULL;
    if (sig == NULL || pp_le32(p + 24) == 0) {
        goto out;
    }
    err = pp_grow((void **)&pv->methods, &pv->method_cap, pv->method_count + 1,
                  sizeof(*pv->methods));
    if (err != 0) {
        goto out;
    }
    m = &pv->methods[pv->method_count];
    m->module_id = pp_le64(p + 8);
    m->start = pp_le64(p + 16);
    m->size = pp_le32(p + 24);
    paren = strchr(sig, '(');
    need = strlen(name) + (paren != NULL ? strlen(paren) : 0) + 1;
    m->name = malloc(need);
    if (m->name == NULL) {
        err = -ENOMEM;
        goto out;
    }
    snprintf(m->name, need, "%s%s", name, paren != NULL ? paren : "");
    m->ns = ns;
    ns = NULL;
    pv->method_count++;
out:
    free(ns);
    free(name);
    free(sig);
    return err;
}

/* ModuleLoad (152) / ModuleDCEnd (154): ModuleID, AssemblyID, flags, reserved, ILPath. */
static int
pp_add_clr_module(struct pp_profile_priv *pv, const uint8_t *p, uint32_t size)
{
    uint32_t pos = 24;
    char *path;
    int err;

    if (size < 24) {
        return 0;
    }
    path = pp_read_utf16z(p, size, &pos);
    if (path == NULL) {
        return 0;
    }
    err = pp_add_module(pv, pp_le64(p), 0, 0, path);
    free(path);
    return err;
}

struct pp_fields {
    const char *want[4];
    struct nt_value got[4];
    int found[4];
};

static int
pp_fields_visit(void *ctx, const struct nt_value *v)
{
    struct pp_fields *f = ctx;
    int i;

    if (v->depth != 0) {
        return 0;
    }
    for (i = 0; i < 4 && f->want[i] != NULL; i++) {
        if (v->field != NULL && v->field->name != NULL && strcmp(v->field->name, f->want[i]) == 0) {
            f->got[i] = *v;
            f->found[i] = 1;
        }
    }
    return 0;
}

static char *
pp_value_string(const struct nt_value *v)
{
    size_t need = nt_utf16_to_utf8(v->data, v->size, NULL, 0) + 1;
    char *s = malloc(need);

    if (s != NULL) {
        nt_utf16_to_utf8(v->data, v->size, s, need);
    }
    return s;
}

static int
pp_thread_index(struct pp_profile *p, uint64_t tid, size_t *index)
{
    struct pp_profile_priv *pv = p->priv;
    size_t slot;
    int err;

    err = pp_map_slot(&pv->thread_map, tid, &slot);
    if (err != 0) {
        return err;
    }
    if (pv->thread_map.values[slot] == 0) {
        err = pp_grow((void **)&p->threads, &pv->thread_cap, p->thread_count + 1,
                      sizeof(*p->threads));
        if (err != 0) {
            return err;
        }
        memset(&p->threads[p->thread_count], 0, sizeof(*p->threads));
        p->threads[p->thread_count].thread_id = tid;
        pv->thread_map.keys[slot] = tid;
        pv->thread_map.values[slot] = (uint32_t)++p->thread_count;
        pv->thread_map.count++;
    }
    *index = pv->thread_map.values[slot] - 1;
    return 0;
}

/* pipeprof's own provider: ThreadStart names threads, ModuleLoad gives module ranges. */
static int
pp_on_pipeprof_event(struct pp_profile *p, const struct nt_event *ev)
{
    struct pp_profile_priv *pv = p->priv;
    struct pp_fields f;
    size_t ti;
    int err;

    memset(&f, 0, sizeof(f));
    if (strcmp(ev->desc->name, "ThreadStart") == 0) {
        f.want[0] = "ThreadId";
        f.want[1] = "Name";
        if (nt_payload_decode(ev->desc, ev->payload, ev->payload_size, pp_fields_visit, &f) != 0 ||
            !f.found[0] || !f.found[1]) {
            return 0;
        }
        err = pp_thread_index(p, f.got[0].u != 0 ? f.got[0].u : (uint64_t)f.got[0].i, &ti);
        if (err != 0) {
            return err;
        }
        free((char *)p->threads[ti].name);
        p->threads[ti].name = pp_value_string(&f.got[1]);
        return 0;
    }
    if (strcmp(ev->desc->name, "ModuleLoad") == 0) {
        char *path;

        f.want[0] = "Path";
        f.want[1] = "Base";
        f.want[2] = "Size";
        if (nt_payload_decode(ev->desc, ev->payload, ev->payload_size, pp_fields_visit, &f) != 0 ||
            !f.found[0] || !f.found[1] || !f.found[2]) {
            return 0;
        }
        path = pp_value_string(&f.got[0]);
        if (path == NULL) {
            return -ENOMEM;
        }
        err = pp_add_module(pv, f.got[1].u, f.got[1].u, f.got[2].u, path);
        free(path);
        return err;
    }
    return 0;
}

static int
pp_on_sample(struct pp_profile *p, const struct nt_event *ev, const struct pp_profile_filter *flt)
{
    struct pp_profile_priv *pv = p->priv;
    uint64_t h = pp_hash_u64(ev->thread_id ^ ev->stack_depth);
    int running = ev->payload_size >= 4 && pp_le32(ev->payload) == NT_SAMPLE_MANAGED;
    struct pp_profile_stack *st;
    uint32_t depth = ev->stack_depth, i;
    size_t slot, ti, idx;
    int err;

    if (flt != NULL && flt->thread_id != 0 && flt->thread_id != ev->thread_id) {
        return 0;
    }
    for (i = 0; i < depth; i++) {
        h = pp_hash_u64(h ^ ev->stack[i]);
    }
    err = pp_map_slot(&pv->stack_map, h, &slot);
    if (err != 0) {
        return err;
    }
    /* Walk the chain of stacks with this hash for an exact match. */
    for (idx = pv->stack_map.values[slot]; idx != 0; idx = pv->stack_next[idx - 1]) {
        st = &p->stacks[idx - 1];
        if (st->thread_id == ev->thread_id && st->depth == depth &&
            memcmp(pv->ips + pv->stack_ip_offset[idx - 1], ev->stack, depth * sizeof(uint64_t)) ==
                    0) {
            break;
        }
    }
    if (idx == 0) {
        size_t n = p->stack_count;

        err = pp_grow((void **)&pv->ips, &pv->ip_cap, pv->ip_count + depth, sizeof(*pv->ips));
        if (err == 0 && n + 1 > pv->stack_cap) {
            size_t cap = pv->stack_cap;

            err = pp_grow((void **)&p->stacks, &cap, n + 1, sizeof(*p->stacks));
            if (err == 0) {
                cap = pv->stack_cap;
                err = pp_grow((void **)&pv->stack_ip_offset, &cap, n + 1,
                              sizeof(*pv->stack_ip_offset));
            }
            if (err == 0) {
                cap = pv->stack_cap;
                err = pp_grow((void **)&pv->stack_next, &cap, n + 1, sizeof(*pv->stack_next));
            }
            if (err == 0) {
                pv->stack_cap = cap;
            }
        }
        if (err != 0) {
            return err;
        }
        memcpy(pv->ips + pv->ip_count, ev->stack, depth * sizeof(uint64_t));
        pv->stack_ip_offset[n] = pv->ip_count;
        pv->ip_count += depth;
        st = &p->stacks[n];
        memset(st, 0, sizeof(*st));
        st->thread_id = ev->thread_id;
        st->depth = depth;
        pv->stack_next[n] = pv->stack_map.values[slot];
        if (pv->stack_map.values[slot] == 0) {
            pv->stack_map.count++;
        }
        pv->stack_map.keys[slot] = h;
        pv->stack_map.values[slot] = (uint32_t)(n + 1);
        p->stack_count++;
        idx = n + 1;
    }
    st = &p->stacks[idx - 1];
    st->samples++;
    st->running_samples += running;
    err = pp_thread_index(p, ev->thread_id, &ti);
    if (err != 0) {
        return err;
    }
    p->threads[ti].samples++;
    p->threads[ti].running_samples += running;
    p->samples++;
    p->running_samples += running;
    if (p->first_ts == 0 || ev->timestamp < p->first_ts) {
        p->first_ts = ev->timestamp;
    }
    if (ev->timestamp > p->last_ts) {
        p->last_ts = ev->timestamp;
    }
    return 0;
}

static int
pp_method_cmp(const void *a, const void *b)
{
    const struct pp_method *x = a, *y = b;

    return x->start < y->start ? -1 : x->start > y->start;
}

static const struct pp_module *
pp_module_by_id(const struct pp_profile_priv *pv, uint64_t id)
{
    size_t i;

    for (i = 0; i < pv->module_count; i++) {
        if (pv->modules[i].id == id) {
            return &pv->modules[i];
        }
    }
    return NULL;
}

static const struct pp_module *
pp_module_by_ip(const struct pp_profile_priv *pv, uint64_t ip)
{
    size_t i;

    for (i = 0; i < pv->module_count; i++) {
        const struct pp_module *m = &pv->modules[i];

        if (m->size != 0 && ip >= m->base && ip - m->base < m->size) {
            return m;
        }
    }
    return NULL;
}

/* Interns a name; returns its index or a negative errno. Linear probing on a string hash. */
static long
pp_intern_name(struct pp_profile *p, struct pp_map *names, size_t *cap, char *name)
{
    uint64_t h = 1469598103934665603ULL;
    const char *c;
    size_t slot;
    int err;

    for (c = name; *c != '\0'; c++) {
        h = (h ^ (uint8_t)*c) * 1099511628211ULL;
    }
    for (;;) {
        err = pp_map_slot(names, h, &slot);
        if (err != 0) {
            free(name);
            return err;
        }
        if (names->values[slot] == 0) {
            break;
        }
        if (strcmp(p->names[names->values[slot] - 1], name) == 0) {
            free(name);
            return names->values[slot] - 1;
        }
        h++; /* a hash collision between different names: probe the next key */
    }
    err = pp_grow((void **)&p->names, cap, p->name_count + 1, sizeof(*p->names));
    if (err != 0) {
        free(name);
        return err;
    }
    p->names[p->name_count] = name;
    names->keys[slot] = h;
    names->values[slot] = (uint32_t)++p->name_count;
    names->count++;
    return (long)p->name_count - 1;
}

/* Names every frame: the method whose [start, start+size) holds the ip, else module+offset. */
static int
pp_name_frames(struct pp_profile *p)
{
    struct pp_profile_priv *pv = p->priv;
    struct pp_map names = { 0 };
    size_t name_cap = 0, s;
    int err = 0;

    if (pv->method_count > 1) {
        qsort(pv->methods, pv->method_count, sizeof(*pv->methods), pp_method_cmp);
    }
    for (s = 0; s < p->stack_count; s++) {
        struct pp_profile_stack *st = &p->stacks[s];
        const uint64_t *ips = pv->ips + pv->stack_ip_offset[s];
        uint32_t *out = malloc((st->depth != 0 ? st->depth : 1) * sizeof(*out));
        uint32_t i, kept = 0;

        if (out == NULL) {
            err = -ENOMEM;
            goto out;
        }
        for (i = 0; i < st->depth; i++) {
            uint64_t ip = ips[i];
            const struct pp_method *m = NULL;
            const struct pp_module *mod;
            size_t lo = 0, hi = pv->method_count;
            char buf[1024];
            long idx;

            /* A return address points after the call; look up ip - 1 for caller frames. */
            if (i > 0 && ip > 0) {
                ip--;
            }
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (pv->methods[mid].start <= ip) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            if (lo > 0 && ip - pv->methods[lo - 1].start < pv->methods[lo - 1].size) {
                m = &pv->methods[lo - 1];
            }
            if (m != NULL) {
                /* pipeprof's rundown puts the module's file name in the namespace (TraceEvent
                 * shows "namespace.name"); a real namespace is kept, as TraceEvent shows it. */
                mod = pp_module_by_id(pv, m->module_id);
                if (*m->ns != '\0' && (mod == NULL || strcmp(m->ns, mod->basename) != 0)) {
                    snprintf(buf, sizeof(buf), "%s!%s.%s", mod != NULL ? mod->label : "?", m->ns,
                             m->name);
                } else {
                    snprintf(buf, sizeof(buf), "%s!%s", mod != NULL ? mod->label : "?", m->name);
                }
                p->resolved_frames += st->samples;
            } else if ((mod = pp_module_by_ip(pv, ip)) != NULL) {
                snprintf(buf, sizeof(buf), "%s!0x%llx", mod->label,
                         (unsigned long long)(ips[i] - mod->base));
                p->unresolved_frames += st->samples;
            } else {
                snprintf(buf, sizeof(buf), "?!0x%llx", (unsigned long long)ips[i]);
                p->unresolved_frames += st->samples;
            }
            if (pv->have_fold_re && regexec(&pv->fold_re, buf, 0, NULL, 0) == 0) {
                continue; /* folded away, as pprof-rs's frame post-processor does */
            }
            idx = pp_intern_name(p, &names, &name_cap, strdup(buf));
            if (idx < 0) {
                free(out);
                err = (int)idx;
                goto out;
            }
            out[kept++] = (uint32_t)idx;
        }
        st->names = out;
        st->depth = kept;
    }
out:
    pp_map_fini(&names);
    return err;
}

static ssize_t
pp_profile_read_fd(void *ctx, void *buf, size_t len)
{
    int fd = *(int *)ctx;
    ssize_t n;

    do {
        n = read(fd, buf, len);
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

int
pp_profile_load(const char *path, const struct pp_profile_filter *filter, struct pp_profile **out,
                char *err_msg, size_t errlen)
{
    struct nt_source src = { pp_profile_read_fd, NULL };
    struct nt_reader *r = NULL;
    struct nt_reader_error rerr;
    struct nt_reader_stats stats;
    struct pp_profile_priv *pv = NULL;
    struct pp_profile *p = NULL;
    const struct nt_trace_info *info;
    struct nt_event ev;
    uint64_t start_ticks = 0, end_ticks = UINT64_MAX;
    int fd = -1, err;

    *out = NULL;
    fd = strcmp(path, "-") == 0 ? dup(0) : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err = -errno;
        snprintf(err_msg, errlen, "%s: %s", path, strerror(errno));
        goto out;
    }
    src.ctx = &fd;
    p = calloc(1, sizeof(*p));
    pv = calloc(1, sizeof(*pv));
    if (p == NULL || pv == NULL) {
        err = -ENOMEM;
        snprintf(err_msg, errlen, "out of memory");
        goto out;
    }
    p->priv = pv;
    if (filter != NULL && filter->fold_re != NULL) {
        if (regcomp(&pv->fold_re, filter->fold_re, REG_EXTENDED | REG_NOSUB) != 0) {
            err = -EINVAL;
            snprintf(err_msg, errlen, "invalid fold regex: %s", filter->fold_re);
            goto out;
        }
        pv->have_fold_re = 1;
    }
    err = nt_reader_new(&src, NULL, &r);
    if (err != 0) {
        goto reader_error;
    }
    info = nt_reader_info(r);
    p->ticks_per_second = info->ticks_per_second != 0 ? info->ticks_per_second : 1000000000ULL;
    p->process_id = info->process_id;
    p->sampling_interval_ns = info->expected_cpu_sampling_rate;
    if (filter != NULL) {
        start_ticks = info->sync_time_ticks +
                      (uint64_t)(filter->start_ms * (double)p->ticks_per_second / 1000.0);
        if (filter->end_ms > 0) {
            end_ticks = info->sync_time_ticks +
                        (uint64_t)(filter->end_ms * (double)p->ticks_per_second / 1000.0);
        }
    }
    while ((err = nt_reader_next(r, &ev)) == 1) {
        const char *prov;

        if (ev.desc == NULL) {
            continue;
        }
        prov = ev.desc->provider;
        if (ev.desc->event_id == 0 && strcmp(prov, PP_PROVIDER_SAMPLE_PROFILER) == 0) {
            if (ev.timestamp >= start_ticks && ev.timestamp <= end_ticks) {
                err = pp_on_sample(p, &ev, filter);
            }
        } else if ((ev.desc->event_id == 143 && strcmp(prov, PP_PROVIDER_RUNTIME) == 0) ||
                   ((ev.desc->event_id == 143 || ev.desc->event_id == 144) &&
                    strcmp(prov, PP_PROVIDER_RUNDOWN) == 0)) {
            err = pp_add_method(pv, ev.payload, ev.payload_size);
        } else if ((ev.desc->event_id == 152 && strcmp(prov, PP_PROVIDER_RUNTIME) == 0) ||
                   ((ev.desc->event_id == 153 || ev.desc->event_id == 154) &&
                    strcmp(prov, PP_PROVIDER_RUNDOWN) == 0)) {
            err = pp_add_clr_module(pv, ev.payload, ev.payload_size);
        } else if (strcmp(prov, PP_PROVIDER_PIPEPROF) == 0) {
            err = pp_on_pipeprof_event(p, &ev);
        } else {
            err = 0;
        }
        if (err != 0) {
            snprintf(err_msg, errlen, "%s: %s", path, strerror(-err));
            goto out;
        }
    }
    if (err < 0) {
        goto reader_error;
    }
    nt_reader_get_stats(r, &stats);
    p->lost_events = stats.lost_events;
    err = pp_name_frames(p);
    if (err != 0) {
        snprintf(err_msg, errlen, "%s: %s", path, strerror(-err));
        goto out;
    }
    *out = p;
    p = NULL;
    goto out;
reader_error:
    if (r != NULL && err == -EBADMSG) {
        nt_reader_get_error(r, &rerr);
        snprintf(err_msg, errlen, "%s: offset %llu: %s", path, (unsigned long long)rerr.offset,
                 rerr.reason != NULL ? rerr.reason : "malformed trace");
    } else {
        snprintf(err_msg, errlen, "%s: %s", path, strerror(-err));
    }
out:
    nt_reader_free(r);
    if (fd >= 0) {
        close(fd);
    }
    if (p == NULL && pv != NULL && *out == NULL) {
        free(pv);
    }
    pp_profile_free(p);
    return err;
}

void
pp_profile_free(struct pp_profile *p)
{
    struct pp_profile_priv *pv;
    size_t i;

    if (p == NULL) {
        return;
    }
    pv = p->priv;
    for (i = 0; i < p->stack_count; i++) {
        free((uint32_t *)p->stacks[i].names);
    }
    free(p->stacks);
    for (i = 0; i < p->name_count; i++) {
        free(p->names[i]);
    }
    free(p->names);
    for (i = 0; i < p->thread_count; i++) {
        free((char *)p->threads[i].name);
    }
    free(p->threads);
    if (pv != NULL) {
        for (i = 0; i < pv->method_count; i++) {
            free(pv->methods[i].ns);
            free(pv->methods[i].name);
        }
        free(pv->methods);
        for (i = 0; i < pv->module_count; i++) {
            free(pv->modules[i].label);
            free(pv->modules[i].basename);
        }
        free(pv->modules);
        free(pv->ips);
        free(pv->stack_ip_offset);
        free(pv->stack_next);
        pp_map_fini(&pv->stack_map);
        pp_map_fini(&pv->thread_map);
        if (pv->have_fold_re) {
            regfree(&pv->fold_re);
        }
        free(pv);
    }
    free(p);
}

const char *
pp_profile_thread_label(const struct pp_profile *p, uint64_t thread_id)
{
    static char buf[320];
    size_t i;

    for (i = 0; i < p->thread_count; i++) {
        if (p->threads[i].thread_id == thread_id && p->threads[i].name != NULL) {
            snprintf(buf, sizeof(buf), "%s (%llu)", p->threads[i].name,
                     (unsigned long long)thread_id);
            return buf;
        }
    }
    snprintf(buf, sizeof(buf), "Thread (%llu)", (unsigned long long)thread_id);
    return buf;
}
