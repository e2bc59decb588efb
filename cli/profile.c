/* SPDX-License-Identifier: MIT */
/*
 * cli/profile.c - loads ThreadSample events and the names of code addresses from a nettrace
 * stream into a pp_profile (profile/profile.h). Addresses are named at the end of the stream,
 * because rundown events come after the samples they name, as TraceEvent's TraceLog does; a frame
 * of a sample after a rundown that covered its address is named by a later one (pp_rundown).
 * Context: the CLI's single thread.
 */
#include "cli/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/names.h"
#include "common/grow.h"
#include "nettrace/format.h"
#include "nettrace/nettrace.h"

#define PP_PROVIDER_SAMPLE_PROFILER "Microsoft-DotNETCore-SampleProfiler"
#define PP_PROVIDER_RUNTIME         "Microsoft-Windows-DotNETRuntime"
#define PP_PROVIDER_RUNDOWN         "Microsoft-Windows-DotNETRuntimeRundown"
#define PP_PROVIDER_PIPEPROF        "pipeprof"
#define PP_PROVIDER_EVENTPIPE       "Microsoft-DotNETCore-EventPipe"

/* A method range from MethodLoadVerbose / MethodDCEndVerbose. */
struct pp_method {
    uint64_t start;
    uint64_t size;
    uint64_t module_id;
    size_t seq;     /* the order the trace gave it in */
    uint32_t epoch; /* rundowns (MethodDCEndComplete) the trace gave before it */
    char *ns;       /* MethodNamespace */
    char *name;     /* name(signature) */
};

struct pp_module {
    uint64_t id;   /* ModuleID, or the load base for pipeprof ModuleLoad */
    uint64_t base; /* 0 when unknown */
    uint64_t size;
    uint32_t epoch; /* rundowns the trace completed before it, as pp_method's (pp_module_by_id) */
    char *label;    /* file name without its last extension, as TraceEvent shows modules */
    char *basename; /* file name */
};

/*
 * Several traces load into one profile (one process each). Their addresses would collide, so
 * each is tagged with its trace's index + 1 in the bits above user space's 48 until the frames
 * are named; the tag picks the trace whose names apply and is then removed.
 */
#define PP_ADDR_BITS  48
#define PP_ADDR_MASK  ((1ULL << PP_ADDR_BITS) - 1)
#define PP_MAX_TRACES 65535

/*
 * A rundown the trace gave before some of its samples (MethodDCEndInit .. MethodDCEndComplete):
 * pipeprof's agent writes one for a library that was unloaded during the session, with its
 * functions, before the samples of a library loaded at its address later. TraceEvent names an
 * address by the first method event that covers it after the sample, so a frame of a later
 * sample in one of those ranges is named by a later method event; the loader tags such a frame
 * (pp_alias) and names it the same way.
 */
struct pp_rundown {
    uint32_t epoch;    /* 1, 2, ...: rundowns the trace completed up to this one */
    size_t first, end; /* its methods, [first, end) of the loader's methods in trace order */
    uint64_t *starts;  /* its methods' ranges, sorted by start, set when it completes */
    uint64_t *ends;
    size_t n;
};

/* A tagged address: addr of trace loader, named by methods of epoch >= epoch first; one no
 * method names is in module (1 + its index in the loader's modules; 0: the first whose span
 * holds it, pp_module_by_ip). */
struct pp_alias {
    size_t loader;
    uint32_t epoch;
    size_t module;
};

/* What the loader knows beyond the profile: the names of code addresses. */
struct pp_loader {
    struct pp_profile *p;
    uint64_t tag;            /* (index + 1) << PP_ADDR_BITS when several traces load, else 0 */
    uint64_t ts_num, ts_den; /* this trace's ticks to the profile's: * num / den */
    uint32_t process_id;
    uint32_t instance;  /* 1, or 1 + the traces before it whose process had its pid (several) */
    uint64_t tid_key;   /* (instance - 1) << PP_PROFILE_INSTANCE_SHIFT: its thread ids' */
    char *process_name; /* from ProcessInfo's CommandLine, or NULL */
    uint64_t *scratch;  /* a tagged stack */
    uint32_t scratch_cap;
    struct pp_method *methods;
    size_t method_count, method_cap;
    struct pp_module *modules;
    size_t module_count, module_cap;
    int modules_overlap;         /* two pipeprof ModuleLoads' spans meet: an address was reused */
    struct pp_rundown *rundowns; /* completed ones, and the one open (open set) */
    size_t rundown_count, rundown_cap;
    int rundown_open;
    size_t *epoch_first; /* methods sorted: epoch e's are [epoch_first[e], epoch_first[e + 1]) */
    struct pp_loaders *all;
    size_t index;
    struct pp_names *names; /* the trace's addresses and modules, to name what it left unnamed */
    int names_given;        /* the trace says its frames were named from files (record did) */
};

/* Every trace's loader, and the tags beyond the traces' own (several traces: index + 1). */
struct pp_loaders {
    struct pp_loader *lds;
    size_t n;
    struct pp_alias *aliases; /* tag n + 1 + i is aliases[i] */
    size_t alias_count, alias_cap;
    int tagged; /* stacks hold tags, to take off after naming */
};

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
pp_add_module(struct pp_loader *pv, uint64_t id, uint64_t base, uint64_t size, const char *path)
{
    struct pp_module *m;
    int err;

    err = pp_grow_array((void **)&pv->modules, &pv->module_cap, pv->module_count + 1,
                        sizeof(*pv->modules));
    if (err != 0) {
        return err;
    }
    for (size_t i = 0; size != 0 && i < pv->module_count; i++) {
        const struct pp_module *o = &pv->modules[i];

        pv->modules_overlap |= o->size != 0 && base < o->base + o->size && o->base < base + size;
    }
    m = &pv->modules[pv->module_count];
    m->id = id;
    m->base = base;
    m->size = size;
    m->epoch = (uint32_t)(pv->rundown_count - (size_t)pv->rundown_open);
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

/* Adds a method range of the trace's order and current epoch; ns and name are taken (freed on
 * failure too). Returns 0 or -ENOMEM. */
static int
pp_push_method(struct pp_loader *pv, uint64_t start, uint64_t size, uint64_t module_id, char *ns,
               char *name)
{
    struct pp_method *m;
    int err = ns != NULL && name != NULL ? 0 : -ENOMEM;

    if (err == 0) {
        err = pp_grow_array((void **)&pv->methods, &pv->method_cap, pv->method_count + 1,
                            sizeof(*pv->methods));
    }
    if (err != 0) {
        free(ns);
        free(name);
        return err;
    }
    m = &pv->methods[pv->method_count++];
    m->module_id = module_id;
    m->seq = pv->method_count - 1;
    m->epoch = (uint32_t)(pv->rundown_count - (size_t)pv->rundown_open);
    m->start = start;
    m->size = size;
    m->ns = ns;
    m->name = name;
    return 0;
}

/* MethodLoadVerbose (143) / MethodDCEndVerbose (144): see the class comment in cli/profile.h. */
static int
pp_add_method(struct pp_loader *pv, const uint8_t *p, uint32_t size)
{
    char *ns = NULL, *name = NULL, *sig = NULL, *full = NULL;
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
    paren = strchr(sig, '(');
    need = strlen(name) + (paren != NULL ? strlen(paren) : 0) + 1;
    full = malloc(need);
    if (full != NULL) {
        snprintf(full, need, "%s%s", name, paren != NULL ? paren : "");
    }
    err = pp_push_method(pv, pp_le64(p + 16), pp_le32(p + 24), pp_le64(p + 8), ns, full);
    ns = NULL;
out:
    free(ns);
    free(name);
    free(sig);
    return err;
}

/* ModuleLoad (152) / ModuleDCEnd (154): ModuleID, AssemblyID, flags, reserved, ILPath. */
static int
pp_add_clr_module(struct pp_loader *pv, const uint8_t *p, uint32_t size)
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

#define PP_FIELDS_MAX 5 /* (AgentLosses' fields) */

struct pp_fields {
    const char *want[PP_FIELDS_MAX];
    struct nt_value got[PP_FIELDS_MAX];
    int found[PP_FIELDS_MAX];
};

static int
pp_fields_visit(void *ctx, const struct nt_value *v)
{
    struct pp_fields *f = ctx;
    int i;

    if (v->depth != 0) {
        return 0;
    }
    for (i = 0; i < PP_FIELDS_MAX && f->want[i] != NULL; i++) {
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

/* The mode a recording says it was made in; "mixed" when two of its sessions say otherwise. */
static int
pp_set_mode(struct pp_profile *p, const char *mode)
{
    char *copy;

    if (p->mode != NULL && strcmp(p->mode, mode) == 0) {
        return 0;
    }
    copy = strdup(p->mode != NULL ? "mixed" : mode);
    if (copy == NULL) {
        return -ENOMEM;
    }
    free(p->mode);
    p->mode = copy;
    return 0;
}

/* pipeprof's own provider: ThreadStart names threads, ModuleLoad gives module ranges. */
static int
pp_on_pipeprof_event(struct pp_loader *ld, const struct nt_event *ev)
{
    struct pp_fields f;
    int err;

    memset(&f, 0, sizeof(f));
    if (strcmp(ev->desc->name, "ThreadStart") == 0) {
        uint64_t tid;
        char *name;

        f.want[0] = "ThreadId";
        f.want[1] = "Name";
        if (nt_payload_decode(ev->desc, ev->payload, ev->payload_size, pp_fields_visit, &f) != 0 ||
            !f.found[0] || !f.found[1]) {
            return 0;
        }
        name = pp_value_string(&f.got[1]);
        if (name == NULL) {
            return -ENOMEM;
        }
        tid = (f.got[0].u != 0 ? f.got[0].u : (uint64_t)f.got[0].i) | ld->tid_key;
        err = pp_profile_set_thread_name(ld->p, tid, name);
        if (err == 0 && ld->all->n > 1) {
            err = pp_profile_set_thread_process(ld->p, tid, ld->process_id, ld->instance);
        }
        free(name);
        return err;
    }
    if (strcmp(ev->desc->name, "Sampling") == 0) {
        char *engine, *mode = NULL;

        f.want[0] = "Engine";
        f.want[1] = "TickHz"; /* since 2026-11-27 */
        f.want[2] = "Mode";
        if (nt_payload_decode(ev->desc, ev->payload, ev->payload_size, pp_fields_visit, &f) != 0 ||
            !f.found[0]) {
            return 0;
        }
        if (f.found[1] && f.got[1].u != 0) {
            ld->p->tick_hz = (unsigned)f.got[1].u;
        }
        engine = pp_value_string(&f.got[0]);
        if (engine == NULL) {
            return -ENOMEM;
        }
        if (f.found[2] && (mode = pp_value_string(&f.got[2])) == NULL) {
            free(engine);
            return -ENOMEM;
        }
        /* The recording says its mode: Mode where it is "cpu" or "wall", else the Engine ("wall"
         * in wall mode, a CPU engine's name or "none" in CPU mode). */
        err = pp_set_mode(ld->p,
                          mode != NULL && (strcmp(mode, "cpu") == 0 || strcmp(mode, "wall") == 0)
                                  ? mode
                          : strcmp(engine, "wall") == 0 ? "wall"
                                                        : "cpu");
        free(mode);
        if (err != 0 || strcmp(engine, "wall") == 0 || strcmp(engine, "none") == 0) {
            free(engine);
            return err;
        }
        if (ld->p->engine != NULL && strcmp(ld->p->engine, engine) != 0) {
            free(engine);
            engine = strdup("mixed"); /* it changed during the recording */
            if (engine == NULL) {
                return -ENOMEM;
            }
        }
        free(ld->p->engine);
        ld->p->engine = engine;
        return 0;
    }
    if (strcmp(ev->desc->name, "AgentLosses") == 0) {
        f.want[0] = "ThreadsDropped";
        f.want[1] = "CpuRestNs";
        f.want[2] = "PerfEarly";   /* since weigh0 (2026-11-29) */
        f.want[3] = "CpuChanceNs"; /* since exitgap (2026-11-29) */
        f.want[4] = "CpuLostNs";   /* since ringdrop (2026-11-29) */
        if (nt_payload_decode(ev->desc, ev->payload, ev->payload_size, pp_fields_visit, &f) == 0 &&
            f.found[0] && f.found[1]) {
            ld->p->threads_dropped += f.got[0].u;
            ld->p->cpu_rest_ns += f.got[1].u;
            ld->p->perf_early += f.found[2] ? f.got[2].u : 0;
            ld->p->cpu_chance_ns += f.found[3] ? f.got[3].u : 0;
            ld->p->cpu_lost_ns += f.found[4] ? f.got[4].u : 0;
        }
        return 0;
    }
    if (strcmp(ev->desc->name, "LostSamples") == 0) {
        f.want[0] = "Count";
        if (nt_payload_decode(ev->desc, ev->payload, ev->payload_size, pp_fields_visit, &f) == 0 &&
            f.found[0]) {
            ld->p->lost_samples += f.got[0].u;
        }
        return 0;
    }
    if (strcmp(ev->desc->name, PP_NAMES_EVENT) == 0) {
        /* record named a killed process's frames from its modules' files (cli/names.c) */
        f.want[0] = "Frames";
        f.want[1] = "Named";
        f.want[2] = "Description";
        if (nt_payload_decode(ev->desc, ev->payload, ev->payload_size, pp_fields_visit, &f) != 0 ||
            !f.found[0] || !f.found[1] || !f.found[2]) {
            return 0;
        }
        ld->names_given = 1;
        ld->p->names_traces++;
        ld->p->names_frames += f.got[0].u;
        ld->p->names_named += f.got[1].u;
        if (ld->p->names_note == NULL && (ld->p->names_note = pp_value_string(&f.got[2])) == NULL) {
            return -ENOMEM;
        }
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
        err = pp_add_module(ld, f.got[1].u, f.got[1].u, f.got[2].u, path);
        free(path);
        return err;
    }
    return 0;
}

static int
pp_u64_cmp(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;

    return *x < *y ? -1 : *x > *y;
}

/* MethodDCEndInit (148) opens a rundown, MethodDCEndComplete (146) closes it (one without an
 * opening takes the methods since the last one). */
static int
pp_on_rundown_bound(struct pp_loader *ld, int complete)
{
    struct pp_rundown *r;
    size_t i;
    int err;

    if (!complete || !ld->rundown_open) {
        if (!complete && ld->rundown_open) {
            return 0; /* nested: the first opening holds */
        }
        err = pp_grow_array((void **)&ld->rundowns, &ld->rundown_cap, ld->rundown_count + 1,
                            sizeof(*ld->rundowns));
        if (err != 0) {
            return err;
        }
        r = &ld->rundowns[ld->rundown_count++];
        memset(r, 0, sizeof(*r));
        if (!complete) {
            r->first = ld->method_count;
        } else if (ld->rundown_count > 1) {
            r->first = ld->rundowns[ld->rundown_count - 2].end;
        }
        ld->rundown_open = 1;
    }
    if (!complete) {
        return 0;
    }
    r = &ld->rundowns[ld->rundown_count - 1];
    r->end = ld->method_count;
    r->epoch = (uint32_t)ld->rundown_count;
    ld->rundown_open = 0;
    if (r->end > r->first) {
        uint64_t *pairs = malloc((r->end - r->first) * 2 * sizeof(*pairs));

        if (pairs == NULL) {
            return -ENOMEM;
        }
        r->starts = malloc((r->end - r->first) * sizeof(*r->starts));
        r->ends = malloc((r->end - r->first) * sizeof(*r->ends));
        if (r->starts == NULL || r->ends == NULL) {
            free(pairs);
            return -ENOMEM;
        }
        for (i = r->first; i < r->end; i++) { /* start, end pairs sorted by start */
            pairs[2 * (i - r->first)] = ld->methods[i].start;
            pairs[2 * (i - r->first) + 1] = ld->methods[i].start + ld->methods[i].size;
        }
        qsort(pairs, r->end - r->first, 2 * sizeof(*pairs), pp_u64_cmp);
        for (i = 0; i < r->end - r->first; i++) {
            r->starts[i] = pairs[2 * i];
            r->ends[i] = pairs[2 * i + 1];
        }
        r->n = r->end - r->first;
        free(pairs);
    }
    return 0;
}

/* The latest completed rundown with a method that covers at (its epoch), or 0. */
static uint32_t
pp_rundown_epoch(const struct pp_loader *ld, uint64_t at)
{
    size_t k = ld->rundown_count - (size_t)ld->rundown_open;

    while (k > 0) {
        const struct pp_rundown *r = &ld->rundowns[--k];
        size_t lo = 0, hi = r->n;

        while (lo < hi) { /* the last method that starts at or below at */
            size_t mid = lo + (hi - lo) / 2;

            if (r->starts[mid] <= at) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if (lo > 0 && at < r->ends[lo - 1]) {
            return r->epoch;
        }
    }
    return 0;
}

/* The tag of the frames of trace ld named from epoch on, in module (pp_alias). */
static int
pp_alias_tag(struct pp_loader *ld, uint32_t epoch, size_t module, uint64_t *tag)
{
    struct pp_loaders *all = ld->all;
    size_t i;
    int err;

    for (i = 0; i < all->alias_count; i++) {
        if (all->aliases[i].loader == ld->index && all->aliases[i].epoch == epoch &&
            all->aliases[i].module == module) {
            break;
        }
    }
    if (i == all->alias_count) {
        if (all->n + 1 + all->alias_count >= (1u << (64 - PP_ADDR_BITS))) {
            *tag = ld->tag; /* out of tags: named as any other frame */
            return 0;
        }
        err = pp_grow_array((void **)&all->aliases, &all->alias_cap, all->alias_count + 1,
                            sizeof(*all->aliases));
        if (err != 0) {
            return err;
        }
        all->aliases[all->alias_count++] = (struct pp_alias){ ld->index, epoch, module };
    }
    all->tagged = 1;
    *tag = (uint64_t)(all->n + 1 + i) << PP_ADDR_BITS;
    return 0;
}

/*
 * The module an address of a sample read now lies in, when that is not the one the trace gave
 * first with a span that holds it (pp_module_by_ip's): 1 + its index, else 0. The latest given
 * so far is the one mapped there at the sample: its ModuleLoad comes before the samples that hold
 * it. An address is held by two only when it was reused: a library loaded where a gone one was,
 * or an exec chain's later image without ASLR (`setarch -R`) at an earlier one's base.
 */
static size_t
pp_module_now(const struct pp_loader *ld, uint64_t at)
{
    size_t first = 0, last = 0;

    for (size_t i = 0; ld->modules_overlap && i < ld->module_count; i++) {
        const struct pp_module *m = &ld->modules[i];

        if (m->size != 0 && at >= m->base && at - m->base < m->size) {
            first = first != 0 ? first : i + 1;
            last = i + 1;
        }
    }
    return last != first ? last : 0;
}

/*
 * A ThreadSample: type Managed (1) is a running thread, External (2) a waiting one. An External
 * one without a stack, or with NT_SAMPLE_WAIT_TAG, is not a sample: a CPU-mode trace writes it
 * where a thread stopped running, for TraceEvent's thread-time computer (docs/architecture.md,
 * "CPU samples in the trace").
 */
static int
pp_sample_is_marker(const struct nt_event *ev)
{
    if (ev->payload_size < 4 || pp_le32(ev->payload) != NT_SAMPLE_EXTERNAL) {
        return 0;
    }
    /* Stackless, or with the stack the thread waited in (NT_SAMPLE_WAIT_TAG). */
    return ev->stack_depth == 0 ||
           (ev->payload_size >= 8 && pp_le32(ev->payload + 4) == NT_SAMPLE_WAIT_TAG);
}

static int
pp_on_sample(struct pp_loader *ld, const struct nt_event *ev, const struct pp_load_filter *flt)
{
    int running = ev->payload_size >= 4 && pp_le32(ev->payload) == NT_SAMPLE_MANAGED;
    uint64_t ts = ev->timestamp;
    uint32_t i;
    int err;

    if (flt != NULL && flt->thread_id != 0 && flt->thread_id != ev->thread_id) {
        return 0;
    }
    if (pp_sample_is_marker(ev)) {
        ld->p->markers++;
        ld->p->wait_markers += ev->stack_depth != 0;
        return 0;
    }
    if (ld->tag == 0 && ld->rundown_count == (size_t)ld->rundown_open && !ld->modules_overlap) {
        return pp_profile_add_sample(ld->p, ev->thread_id, ts, running, ev->stack, ev->stack_depth);
    }
    if (ev->stack_depth > ld->scratch_cap) {
        uint64_t *grown = realloc(ld->scratch, ev->stack_depth * sizeof(*grown));

        if (grown == NULL) {
            return -ENOMEM;
        }
        ld->scratch = grown;
        ld->scratch_cap = ev->stack_depth;
    }
    for (i = 0; i < ev->stack_depth; i++) {
        uint64_t tag = ld->tag, at = i > 0 && ev->stack[i] > 0 ? ev->stack[i] - 1 : ev->stack[i];
        uint32_t epoch = pp_rundown_epoch(ld, at);
        size_t module = pp_module_now(ld, at);

        /* A frame no method names by the time of the sample, in a module at a reused address:
         * named from this epoch on (the rundown of its own image, or of its library), and by
         * its own module if none names it. */
        if (epoch == 0 && module != 0) {
            epoch = (uint32_t)(ld->rundown_count - (size_t)ld->rundown_open);
        }
        if ((epoch != 0 || module != 0) && (err = pp_alias_tag(ld, epoch, module, &tag)) != 0) {
            return err;
        }
        /* An address above user space (a garbage frame) keeps its tag and loses its value. */
        ld->scratch[i] = tag | (ev->stack[i] <= PP_ADDR_MASK ? ev->stack[i] : PP_ADDR_MASK);
    }
    if (ld->ts_den != 0) {
        ts = (uint64_t)((double)ts * (double)ld->ts_num / (double)ld->ts_den);
    }
    err = ld->all->n > 1 ? pp_profile_set_thread_process(ld->p, ev->thread_id | ld->tid_key,
                                                         ld->process_id, ld->instance)
                         : 0;
    if (err == 0) {
        err = pp_profile_add_sample(ld->p, ev->thread_id | ld->tid_key, ts, running, ld->scratch,
                                    ev->stack_depth);
    }
    return err;
}

static int
pp_method_cmp(const void *a, const void *b)
{
    const struct pp_method *x = a, *y = b;

    if (x->epoch != y->epoch) {
        return x->epoch < y->epoch ? -1 : 1;
    }
    if (x->start != y->start) {
        return x->start < y->start ? -1 : 1;
    }
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * Sorts the methods by epoch, then start, and drops each that lies inside one the trace gave
 * earlier in its epoch: an address is named by the first method event that covers it, as
 * TraceEvent's rundown handling does (a MethodDCEndVerbose names only addresses no earlier one
 * named). pipeprof names code in the runtime's ReadyToRun images by file offset after the
 * runtime's rundown named its methods: inside one of them, the runtime's name stays. A frame of
 * a sample after a rundown that covered its address looks from the next epoch on (pp_alias).
 */
static int
pp_methods_sort(struct pp_loader *ld)
{
    size_t i, kept = 0, cover = 0, epochs = ld->rundown_count + 2;
    uint32_t e;

    ld->epoch_first = calloc(epochs, sizeof(*ld->epoch_first));
    if (ld->epoch_first == NULL) {
        return -ENOMEM;
    }
    if (ld->method_count > 1) {
        qsort(ld->methods, ld->method_count, sizeof(*ld->methods), pp_method_cmp);
    }
    for (i = 0; i < ld->method_count; i++) {
        struct pp_method *m = &ld->methods[i];

        if (kept > 0 && m->epoch == ld->methods[cover].epoch &&
            m->start + m->size <= ld->methods[cover].start + ld->methods[cover].size &&
            m->seq > ld->methods[cover].seq) {
            free(m->ns);
            free(m->name);
            continue;
        }
        ld->methods[kept] = *m;
        if (kept == 0 || m->epoch != ld->methods[cover].epoch ||
            m->start + m->size > ld->methods[cover].start + ld->methods[cover].size) {
            cover = kept;
        }
        kept++;
    }
    ld->method_count = kept;
    for (i = 0, e = 0; e + 1 < epochs; e++) { /* epoch_first[e]: the first of epoch e or later */
        while (i < kept && ld->methods[i].epoch < e) {
            i++;
        }
        ld->epoch_first[e] = i;
    }
    ld->epoch_first[epochs - 1] = kept;
    return 0;
}

/* The method of epoch e whose [start, start+size) holds at, or NULL. */
static const struct pp_method *
pp_method_in_epoch(const struct pp_loader *ld, uint32_t e, uint64_t at)
{
    size_t lo = ld->epoch_first[e], hi = ld->epoch_first[e + 1];

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (ld->methods[mid].start <= at) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo > ld->epoch_first[e] && at - ld->methods[lo - 1].start < ld->methods[lo - 1].size) {
        return &ld->methods[lo - 1];
    }
    return NULL;
}

/*
 * The module of a method of epoch `epoch`: of those with that id, the one the trace gave last in
 * the latest epoch not after it (its own rundown's ModuleDCEnd), else the first given later. An
 * exec chain's trace (record joins a process's images) holds several images' rundowns, each
 * numbering its modules from 1: the first module with the id was an earlier image's (a later
 * image's python3!_start read bash!_start).
 */
static const struct pp_module *
pp_module_by_id(const struct pp_loader *ld, uint64_t id, uint32_t epoch)
{
    const struct pp_module *best = NULL, *later = NULL;
    size_t i;

    for (i = 0; i < ld->module_count; i++) {
        const struct pp_module *m = &ld->modules[i];

        if (m->id != id) {
            continue;
        }
        if (m->epoch <= epoch && (best == NULL || m->epoch >= best->epoch)) {
            best = m;
        } else if (m->epoch > epoch && (later == NULL || m->epoch < later->epoch)) {
            later = m;
        }
    }
    return best != NULL ? best : later;
}

/* The module the trace gave first whose span holds ip (an address in no rundown's method). */
static const struct pp_module *
pp_module_by_ip(const struct pp_loader *ld, uint64_t ip)
{
    size_t i;

    for (i = 0; i < ld->module_count; i++) {
        const struct pp_module *m = &ld->modules[i];

        if (m->size != 0 && ip >= m->base && ip - m->base < m->size) {
            return m;
        }
    }
    return NULL;
}

/* Names an address: the method whose [start, start+size) holds it, of epoch `from` or the
 * first later one that has one, else of the latest earlier one; else module+offset, of module
 * (1 + index, pp_module_now) or the first whose span holds it. */
static int
pp_loader_name_from(const struct pp_loader *ld, uint32_t from, size_t module, uint64_t ip,
                    int caller, char *buf, size_t len, int *resolved)
{
    const struct pp_method *m = NULL;
    const struct pp_module *mod;
    uint64_t at = caller && ip > 0 ? ip - 1 : ip;
    uint32_t epochs = (uint32_t)ld->rundown_count + 1, e;

    for (e = from; ld->epoch_first != NULL && m == NULL && e < epochs; e++) {
        m = pp_method_in_epoch(ld, e, at);
    }
    for (e = from < epochs ? from : epochs; ld->epoch_first != NULL && m == NULL && e > 0; e--) {
        m = pp_method_in_epoch(ld, e - 1, at);
    }
    if (m != NULL) {
        /* pipeprof's rundown puts the module's file name in the namespace (TraceEvent shows
         * "namespace.name"); a real namespace is kept, as TraceEvent shows it. */
        mod = pp_module_by_id(ld, m->module_id, m->epoch);
        if (*m->ns != '\0' && (mod == NULL || strcmp(m->ns, mod->basename) != 0)) {
            snprintf(buf, len, "%s!%s.%s", mod != NULL ? mod->label : "?", m->ns, m->name);
        } else {
            snprintf(buf, len, "%s!%s", mod != NULL ? mod->label : "?", m->name);
        }
        *resolved = 1;
    } else if ((mod = module != 0 && module <= ld->module_count
                              ? &ld->modules[module - 1]
                              : pp_module_by_ip(ld, at)) != NULL) {
        snprintf(buf, len, "%s!0x%llx", mod->label, (unsigned long long)(ip - mod->base));
    } else {
        snprintf(buf, len, "?!0x%llx", (unsigned long long)ip);
    }
    return 0;
}

static int
pp_loader_name(void *ctx, uint64_t ip, int caller, char *buf, size_t len, int *resolved)
{
    return pp_loader_name_from(ctx, 0, 0, ip, caller, buf, len, resolved);
}

/* One range pp_names_resolve() named, as a method of the rundown pp_loader_file_names() adds. */
static int
pp_loader_file_name(void *ctx, uint64_t start, uint64_t size, uint64_t module_id,
                    const char *module, const char *name)
{
    struct pp_loader *ld = ctx;
    uint32_t epoch = (uint32_t)(ld->rundown_count - (size_t)ld->rundown_open);
    int err;

    /* The module id is its ModuleLoad's base, whose latest announcement is its own image's (an
     * earlier image of an exec chain without ASLR had another file there). */
    if (pp_module_by_id(ld, module_id, epoch) == NULL &&
        (err = pp_add_module(ld, module_id, 0, 0, module)) != 0) {
        return err;
    }
    return pp_push_method(ld, start, size, module_id, strdup(""), strdup(name));
}

/*
 * A trace whose process ended before its rundown (killed: `dotnet-trace collect` of a pipeprof
 * process, or a `record` of an older pipeprof, or a PIPEPROF_OUTPUT file's last 250 ms) leaves
 * frames unnamed: they are named from the files its ModuleLoad events point to, as one more
 * rundown at its end, and stderr says so. Not when record did it already (names_given).
 */
static int
pp_loader_file_names(struct pp_loader *ld, const char *path)
{
    struct pp_names_stats st;
    char line[1024];
    int err;

    if (ld->names == NULL || ld->names_given || !pp_names_wanted(ld->names)) {
        return 0;
    }
    err = pp_names_resolve(ld->names, &st);
    if (err <= 0) {
        return err;
    }
    err = pp_on_rundown_bound(ld, 0);
    if (err == 0) {
        err = pp_names_foreach(ld->names, pp_loader_file_name, ld);
    }
    if (err == 0) {
        err = pp_on_rundown_bound(ld, 1);
    }
    if (err != 0) {
        return err;
    }
    pp_names_describe(&st, line, sizeof(line));
    fprintf(stderr,
            "pipeprof: %s: its process ended before its rundown; names read from files now: %s\n",
            path, line);
    ld->p->names_traces++;
    ld->p->names_frames += st.frames;
    ld->p->names_named += st.named;
    if (ld->p->names_note == NULL && (ld->p->names_note = strdup(line)) == NULL) {
        return -ENOMEM;
    }
    return 0;
}

static void
pp_loader_fini(struct pp_loader *ld)
{
    size_t i;

    for (i = 0; i < ld->method_count; i++) {
        free(ld->methods[i].ns);
        free(ld->methods[i].name);
    }
    free(ld->methods);
    for (i = 0; i < ld->module_count; i++) {
        free(ld->modules[i].label);
        free(ld->modules[i].basename);
    }
    free(ld->modules);
    for (i = 0; i < ld->rundown_count; i++) {
        free(ld->rundowns[i].starts);
        free(ld->rundowns[i].ends);
    }
    free(ld->rundowns);
    free(ld->epoch_first);
    free(ld->process_name);
    free(ld->scratch);
    pp_names_free(ld->names);
}

static ssize_t
pp_load_read_fd(void *ctx, void *buf, size_t len)
{
    int fd = *(int *)ctx;
    ssize_t n;

    do {
        n = read(fd, buf, len);
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

/* ProcessInfo's CommandLine: the process's name is its first word's file name. */
static int
pp_on_process_info(struct pp_loader *ld, const struct nt_event *ev)
{
    struct pp_fields f;
    char *cmd, *name, *end;
    int err;

    memset(&f, 0, sizeof(f));
    f.want[0] = "CommandLine";
    if (ld->process_name != NULL ||
        nt_payload_decode(ev->desc, ev->payload, ev->payload_size, pp_fields_visit, &f) != 0 ||
        !f.found[0]) {
        return 0;
    }
    cmd = pp_value_string(&f.got[0]);
    if (cmd == NULL) {
        return -ENOMEM;
    }
    end = strchr(cmd, ' ');
    if (end != NULL) {
        *end = '\0';
    }
    name = strrchr(cmd, '/') != NULL ? strrchr(cmd, '/') + 1 : cmd;
    err = 0;
    if (name[0] != '\0' && (ld->process_name = strdup(name)) == NULL) {
        err = -ENOMEM;
    }
    free(cmd);
    return err;
}

/*
 * Reads one trace into ld (its profile may hold other traces already). first: this trace's
 * header gives the profile's clock, process and rate. Returns 0 or a negative errno with a
 * message in err_msg.
 */
static int
pp_load_trace(struct pp_loader *ld, const char *path, const struct pp_load_filter *filter,
              int first, char *err_msg, size_t errlen)
{
    struct nt_source src = { pp_load_read_fd, NULL };
    struct pp_profile *p = ld->p;
    struct nt_reader *r = NULL;
    struct nt_reader_error rerr;
    struct nt_reader_stats stats;
    const struct nt_trace_info *info;
    struct nt_event ev;
    uint64_t start_ticks = 0, end_ticks = UINT64_MAX, tps;
    int fd = -1, err, waiting = 0;

    fd = strcmp(path, "-") == 0 ? dup(0) : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err = -errno;
        snprintf(err_msg, errlen, "%s: %s", path, strerror(errno));
        goto out;
    }
    src.ctx = &fd;
    err = nt_reader_new(&src, NULL, &r);
    if (err != 0) {
        goto reader_error;
    }
    info = nt_reader_info(r);
    err = pp_names_new(&ld->names);
    if (err != 0) {
        snprintf(err_msg, errlen, "out of memory");
        goto out;
    }
    pp_names_set_start(ld->names, info);
    tps = info->ticks_per_second != 0 ? info->ticks_per_second : 1000000000ULL;
    ld->process_id = info->process_id;
    ld->instance = 1;
    if (ld->all->n > 1) {
        /* A recording's pid may name two of its processes (thread ids wrap the pid space): the
         * later one's threads are kept apart, or its main thread (tid = pid) joins the first's. */
        for (size_t j = 0; j < ld->index; j++) {
            ld->instance += ld->all->lds[j].process_id == ld->process_id;
        }
        ld->tid_key = (uint64_t)(ld->instance - 1u) << PP_PROFILE_INSTANCE_SHIFT;
    }
    if (first) {
        p->ticks_per_second = tps;
        p->start_ts = info->sync_time_ticks;
        p->process_id = info->process_id;
        p->sampling_interval_ns = info->expected_cpu_sampling_rate;
    } else if (tps != p->ticks_per_second) {
        ld->ts_num = p->ticks_per_second; /* another clock rate: converted to the first's */
        ld->ts_den = tps;
    }
    if (filter != NULL) {
        start_ticks = info->sync_time_ticks + (uint64_t)(filter->start_ms * (double)tps / 1000.0);
        if (filter->end_ms > 0) {
            end_ticks = info->sync_time_ticks + (uint64_t)(filter->end_ms * (double)tps / 1000.0);
        }
    }
    while ((err = nt_reader_next(r, &ev)) == 1) {
        const char *prov;

        if (ev.desc == NULL) {
            continue;
        }
        prov = ev.desc->provider;
        if ((err = pp_names_event(ld->names, &ev)) != 0) {
            snprintf(err_msg, errlen, "%s: %s", path, strerror(-err));
            goto out;
        }
        if (ev.desc->event_id == 0 && strcmp(prov, PP_PROVIDER_SAMPLE_PROFILER) == 0) {
            if (ev.timestamp >= start_ticks && ev.timestamp <= end_ticks) {
                waiting |= ev.payload_size >= 4 && pp_le32(ev.payload) != NT_SAMPLE_MANAGED &&
                           !pp_sample_is_marker(&ev);
                err = pp_on_sample(ld, &ev, filter);
            }
        } else if ((ev.desc->event_id == 143 && strcmp(prov, PP_PROVIDER_RUNTIME) == 0) ||
                   ((ev.desc->event_id == 143 || ev.desc->event_id == 144) &&
                    strcmp(prov, PP_PROVIDER_RUNDOWN) == 0)) {
            err = pp_add_method(ld, ev.payload, ev.payload_size);
        } else if ((ev.desc->event_id == 146 || ev.desc->event_id == 148) &&
                   strcmp(prov, PP_PROVIDER_RUNDOWN) == 0) {
            err = pp_on_rundown_bound(ld, ev.desc->event_id == 146);
        } else if ((ev.desc->event_id == 152 && strcmp(prov, PP_PROVIDER_RUNTIME) == 0) ||
                   ((ev.desc->event_id == 153 || ev.desc->event_id == 154) &&
                    strcmp(prov, PP_PROVIDER_RUNDOWN) == 0)) {
            err = pp_add_clr_module(ld, ev.payload, ev.payload_size);
        } else if (strcmp(prov, PP_PROVIDER_PIPEPROF) == 0) {
            err = pp_on_pipeprof_event(ld, &ev);
        } else if (ev.desc->event_id == 1 && strcmp(prov, PP_PROVIDER_EVENTPIPE) == 0 &&
                   ev.desc->name != NULL && strcmp(ev.desc->name, "ProcessInfo") == 0) {
            err = pp_on_process_info(ld, &ev);
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
finish:
    nt_reader_get_stats(r, &stats);
    p->lost_events += stats.lost_events;
    /* A trace that names no mode (a .NET runtime's, an older pipeprof's): only wall-mode
     * sampling records waiting threads (SampleProfiler type External). */
    if (waiting && p->mode == NULL && (p->mode = strdup("wall")) == NULL) {
        err = -ENOMEM;
        snprintf(err_msg, errlen, "out of memory");
        goto out;
    }
    err = pp_loader_file_names(ld, path);
    if (err == 0) {
        err = pp_methods_sort(ld);
    }
    if (err != 0) {
        snprintf(err_msg, errlen, "out of memory");
    }
    goto out;
reader_error:
    if (r != NULL && err == -EBADMSG) {
        nt_reader_get_error(r, &rerr);
        if (rerr.truncated && p->samples > 0) {
            /* A process that died (or called _exit) mid-session leaves a trace without its end:
             * what arrived is intact, so it is used, and the loss is said out loud. */
            fprintf(stderr,
                    "pipeprof: warning: %s ends early at offset %llu (%s); using the samples "
                    "before it, names may be missing\n",
                    path, (unsigned long long)rerr.offset, rerr.reason);
            p->truncated = 1;
            err = 0;
            goto finish;
        }
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
    return err;
}

/* Names a tagged address with the names of the trace it came from (from the epoch its alias
 * says). A single trace's frames carry no tag but the aliases'. */
static int
pp_loaders_name(void *ctx, uint64_t ip, int caller, char *buf, size_t len, int *resolved)
{
    struct pp_loaders *all = ctx;
    uint64_t tag = ip >> PP_ADDR_BITS;

    if (tag > all->n + all->alias_count) {
        /* not a tag: a single trace's frame from before its aliases began (fast path), whose
         * value is above user space (a garbage frame) */
        return pp_loader_name(&all->lds[0], ip, caller, buf, len, resolved);
    }
    if (tag > all->n) {
        const struct pp_alias *a = &all->aliases[tag - all->n - 1];

        return pp_loader_name_from(&all->lds[a->loader], a->epoch, a->module, ip & PP_ADDR_MASK,
                                   caller, buf, len, resolved);
    }
    return pp_loader_name(&all->lds[tag != 0 ? tag - 1 : 0], ip & PP_ADDR_MASK, caller, buf, len,
                          resolved);
}

int
pp_load_profile(const char *path, const struct pp_load_filter *filter, struct pp_profile **out,
                char *err_msg, size_t errlen)
{
    return pp_load_profiles(&path, 1, filter, out, err_msg, errlen);
}

int
pp_load_profiles(const char *const *paths, size_t n, const struct pp_load_filter *filter,
                 struct pp_profile **out, char *err_msg, size_t errlen)
{
    struct pp_profile *p = NULL;
    struct pp_loader *lds = NULL;
    struct pp_loaders all = { 0 };
    size_t i, t, s;
    int err;

    *out = NULL;
    if (n == 0 || n > PP_MAX_TRACES) {
        snprintf(err_msg, errlen, "%zu traces: 1 to %d can be read together", n, PP_MAX_TRACES);
        return -EINVAL;
    }
    err = pp_profile_new(filter != NULL ? filter->fold_re : NULL, &p, err_msg, errlen);
    if (err != 0) {
        return err;
    }
    lds = calloc(n, sizeof(*lds));
    if (lds == NULL) {
        err = -ENOMEM;
        snprintf(err_msg, errlen, "out of memory");
        goto out;
    }
    all.lds = lds;
    all.n = n;
    all.tagged = n > 1;
    for (i = 0; i < n; i++) {
        lds[i].p = p;
        lds[i].all = &all;
        lds[i].index = i;
        lds[i].tag = n > 1 ? (uint64_t)(i + 1) << PP_ADDR_BITS : 0;
        err = pp_load_trace(&lds[i], paths[i], filter, i == 0, err_msg, errlen);
        if (err != 0) {
            goto out;
        }
        if (n > 1) {
            err = pp_profile_add_process(p, lds[i].process_id, lds[i].instance,
                                         lds[i].process_name);
            if (err != 0) {
                snprintf(err_msg, errlen, "out of memory");
                goto out;
            }
        }
    }
    err = all.tagged ? pp_profile_name_frames(p, pp_loaders_name, &all)
                     : pp_profile_name_frames(p, pp_loader_name, lds);
    if (err != 0) {
        snprintf(err_msg, errlen, "naming frames: %s", strerror(-err));
        goto out;
    }
    if (all.tagged) {
        for (s = 0; s < p->stack_count; s++) { /* the tags are not addresses */
            uint64_t *ips = (uint64_t *)p->stacks[s].ips;

            for (t = 0; t < p->stacks[s].depth; t++) {
                ips[t] &= PP_ADDR_MASK;
            }
        }
    }
    if (n > 1) {
        for (t = 0; t < p->thread_count; t++) {
            for (i = 0; i < p->process_count; i++) {
                if (p->processes[i].process_id == p->threads[t].process_id &&
                    p->processes[i].instance == p->threads[t].process_instance) {
                    p->processes[i].samples += p->threads[t].samples;
                }
            }
        }
    } else {
        err = pp_profile_add_process(p, lds[0].process_id, 1, lds[0].process_name);
        if (err != 0) {
            snprintf(err_msg, errlen, "out of memory");
            goto out;
        }
        p->processes[0].samples = p->samples;
        p->process_name = lds[0].process_name;
        lds[0].process_name = NULL;
    }
    *out = p;
    p = NULL;
out:
    for (i = 0; lds != NULL && i < n; i++) {
        pp_loader_fini(&lds[i]);
    }
    free(lds);
    free(all.aliases);
    pp_profile_free(p);
    return err;
}
