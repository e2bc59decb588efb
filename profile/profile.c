/* SPDX-License-Identifier: MIT */
/*
 * profile/profile.c - the profile builder: raw samples are interned by (thread, addresses) as
 * they arrive, and every stack is named once at the end, because the names of addresses (rundown
 * events, symbol tables) may arrive after the samples they name.
 * Context: one thread per profile.
 */
#include "profile/profile.h"

#include <errno.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

/* Open-addressing map from a 64-bit key to an index + 1 (0 marks an empty slot). */
struct pp_map {
    uint64_t *keys;
    uint32_t *values;
    size_t cap; /* power of two */
    size_t count;
};

struct pp_profile_priv {
    uint64_t *ips; /* raw stacks before naming, contiguous, leaf first */
    size_t ip_count, ip_cap;
    size_t *stack_ip_offset; /* per distinct raw stack */
    size_t stack_cap;
    uint32_t *stack_next;    /* chain of stacks sharing a hash slot */
    struct pp_map stack_map; /* hash of (thread, ips) -> stack index */
    struct pp_map thread_map;
    size_t thread_cap;
    size_t process_cap;
    size_t timeline_cap;
    regex_t fold_re;
    int have_fold_re;
    int named;
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

int
pp_profile_new(const char *fold_re, struct pp_profile **out, char *err, size_t errlen)
{
    struct pp_profile *p = calloc(1, sizeof(*p));
    struct pp_profile_priv *pv = calloc(1, sizeof(*pv));

    *out = NULL;
    if (p == NULL || pv == NULL) {
        free(p);
        free(pv);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    p->priv = pv;
    p->ticks_per_second = 1000000000ULL;
    if (fold_re != NULL && *fold_re != '\0') {
        if (regcomp(&pv->fold_re, fold_re, REG_EXTENDED | REG_NOSUB) != 0) {
            snprintf(err, errlen, "invalid fold regex: %s", fold_re);
            pp_profile_free(p);
            return -EINVAL;
        }
        pv->have_fold_re = 1;
    }
    *out = p;
    return 0;
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
        err = pp_grow_array((void **)&p->threads, &pv->thread_cap, p->thread_count + 1,
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

int
pp_profile_set_thread_name(struct pp_profile *p, uint64_t thread_id, const char *name)
{
    char *copy;
    size_t ti;
    int err;

    err = pp_thread_index(p, thread_id, &ti);
    if (err != 0) {
        return err;
    }
    copy = strdup(name);
    if (copy == NULL) {
        return -ENOMEM;
    }
    free((char *)p->threads[ti].name);
    p->threads[ti].name = copy;
    return 0;
}

/* Finds or adds the stack of (thread_id, ips); stores its index in *index. */
static int
pp_stack_index(struct pp_profile *p, uint64_t thread_id, const uint64_t *ips, uint32_t depth,
               size_t *index)
{
    struct pp_profile_priv *pv = p->priv;
    uint64_t h = pp_hash_u64(thread_id ^ depth);
    struct pp_profile_stack *st;
    size_t slot, idx, n;
    uint32_t i;
    int err;

    for (i = 0; i < depth; i++) {
        h = pp_hash_u64(h ^ ips[i]);
    }
    err = pp_map_slot(&pv->stack_map, h, &slot);
    if (err != 0) {
        return err;
    }
    /* Walk the chain of stacks with this hash for an exact match. */
    for (idx = pv->stack_map.values[slot]; idx != 0; idx = pv->stack_next[idx - 1]) {
        st = &p->stacks[idx - 1];
        /* an empty stack has no ips to compare (pv->ips may still be NULL) */
        if (st->thread_id == thread_id && st->depth == depth &&
            (depth == 0 ||
             memcmp(pv->ips + pv->stack_ip_offset[idx - 1], ips, depth * sizeof(*ips)) == 0)) {
            *index = idx - 1;
            return 0;
        }
    }
    n = p->stack_count;
    err = pp_grow_array((void **)&pv->ips, &pv->ip_cap, pv->ip_count + depth, sizeof(*pv->ips));
    if (err == 0 && n + 1 > pv->stack_cap) {
        size_t cap = pv->stack_cap;

        err = pp_grow_array((void **)&p->stacks, &cap, n + 1, sizeof(*p->stacks));
        if (err == 0) {
            cap = pv->stack_cap;
            err = pp_grow_array((void **)&pv->stack_ip_offset, &cap, n + 1,
                                sizeof(*pv->stack_ip_offset));
        }
        if (err == 0) {
            cap = pv->stack_cap;
            err = pp_grow_array((void **)&pv->stack_next, &cap, n + 1, sizeof(*pv->stack_next));
        }
        if (err == 0) {
            pv->stack_cap = cap;
        }
    }
    if (err != 0) {
        return err;
    }
    if (depth != 0) {
        memcpy(pv->ips + pv->ip_count, ips, depth * sizeof(*ips));
    }
    pv->stack_ip_offset[n] = pv->ip_count;
    pv->ip_count += depth;
    st = &p->stacks[n];
    memset(st, 0, sizeof(*st));
    st->thread_id = thread_id;
    st->depth = depth;
    pv->stack_next[n] = pv->stack_map.values[slot];
    if (pv->stack_map.values[slot] == 0) {
        pv->stack_map.count++;
    }
    pv->stack_map.keys[slot] = h;
    pv->stack_map.values[slot] = (uint32_t)(n + 1);
    p->stack_count++;
    *index = n;
    return 0;
}

int
pp_profile_add_sample(struct pp_profile *p, uint64_t thread_id, uint64_t timestamp, int running,
                      const uint64_t *ips, uint32_t depth)
{
    struct pp_profile_priv *pv = p->priv;
    struct pp_profile_stack *st;
    size_t si, ti;
    int err;

    if (pv->named) {
        return -EINVAL;
    }
    /* Reserve every allocation first, so that a failure leaves the counts consistent. */
    err = pp_grow_array((void **)&p->timeline, &pv->timeline_cap, p->timeline_count + 1,
                        sizeof(*p->timeline));
    if (err == 0) {
        err = pp_thread_index(p, thread_id, &ti);
    }
    if (err == 0) {
        err = pp_stack_index(p, thread_id, ips, depth, &si);
    }
    if (err != 0) {
        return err;
    }
    running = running != 0;
    st = &p->stacks[si];
    st->samples++;
    st->running_samples += (uint64_t)running;
    p->threads[ti].samples++;
    p->threads[ti].running_samples += (uint64_t)running;
    if (p->threads[ti].samples == 1 || timestamp < p->threads[ti].first_ts) {
        p->threads[ti].first_ts = timestamp;
    }
    if (timestamp > p->threads[ti].last_ts) {
        p->threads[ti].last_ts = timestamp;
    }

    p->samples++;
    p->running_samples += (uint64_t)running;
    p->timeline[p->timeline_count].timestamp = timestamp;
    p->timeline[p->timeline_count].stack = (uint32_t)si;
    p->timeline[p->timeline_count].running = (uint32_t)running;
    p->timeline_count++;
    if (p->samples == 1 || timestamp < p->first_ts) {
        p->first_ts = timestamp;
    }
    if (timestamp > p->last_ts) {
        p->last_ts = timestamp;
    }
    return 0;
}

double
pp_profile_busiest_rate(const struct pp_profile *p)
{
    double best = 0;
    size_t i;

    for (i = 0; i < p->thread_count && p->ticks_per_second != 0; i++) {
        const struct pp_profile_thread *t = &p->threads[i];
        double span;

        if (t->samples < PP_PROFILE_RATE_MIN_SAMPLES || t->last_ts <= t->first_ts) {
            continue;
        }
        span = (double)(t->last_ts - t->first_ts) / (double)p->ticks_per_second;
        if ((double)(t->samples - 1) / span > best) {
            best = (double)(t->samples - 1) / span;
        }
    }
    return best;
}

/* Interns a name (takes ownership); returns its index or a negative errno. */
static long
pp_intern_name(struct pp_profile *p, struct pp_map *names, size_t *cap, char *name)
{
    uint64_t h = 1469598103934665603ULL;
    const char *c;
    size_t slot;
    int err;

    if (name == NULL) {
        return -ENOMEM;
    }
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
    err = pp_grow_array((void **)&p->names, cap, p->name_count + 1, sizeof(*p->names));
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

/*
 * Names each distinct address once: an address map (ip, caller) -> name index + 1, with
 * UINT32_MAX marking a folded-away frame. Stacks share most of their frames, so this calls the
 * namer a small fraction of the frame count.
 */
int
pp_profile_name_frames(struct pp_profile *p, pp_profile_namer_fn namer, void *ctx)
{
    struct pp_profile_priv *pv = p->priv;
    struct pp_map names = { 0 }, addrs = { 0 };
    size_t name_cap = 0, s;
    int err = 0;

    if (pv->named) {
        return -EINVAL;
    }
    pv->named = 1;
    for (s = 0; s < p->stack_count; s++) {
        struct pp_profile_stack *st = &p->stacks[s];
        const uint64_t *ips = pv->ips + pv->stack_ip_offset[s];
        size_t alloc = st->depth != 0 ? st->depth : 1;
        uint32_t *out_names = malloc(alloc * sizeof(*out_names));
        uint64_t *out_ips = malloc(alloc * sizeof(*out_ips));
        uint32_t i, kept = 0;

        if (out_names == NULL || out_ips == NULL) {
            free(out_names);
            free(out_ips);
            err = -ENOMEM;
            goto out;
        }
        st->names = out_names;
        st->ips = out_ips;
        for (i = 0; i < st->depth; i++) {
            /* Bit 0 of the key separates a leaf PC from the same value as a return address. */
            uint64_t key = (ips[i] << 1) | (i > 0);
            uint32_t value;
            size_t slot;

            err = pp_map_slot(&addrs, key, &slot);
            if (err != 0) {
                goto out;
            }
            value = addrs.values[slot];
            if (value == 0) {
                char buf[1024];
                int resolved = 0;
                long idx;

                buf[0] = '\0';
                err = namer(ctx, ips[i], i > 0, buf, sizeof(buf), &resolved);
                if (err != 0) {
                    goto out;
                }
                if (pv->have_fold_re && regexec(&pv->fold_re, buf, 0, NULL, 0) == 0) {
                    value = UINT32_MAX;
                } else {
                    idx = pp_intern_name(p, &names, &name_cap, strdup(buf));
                    if (idx < 0) {
                        err = (int)idx;
                        goto out;
                    }
                    value = (uint32_t)idx + 1;
                }
                /* The resolved flag rides in the top bit of the stored index. */
                addrs.keys[slot] = key;
                addrs.values[slot] =
                        value == UINT32_MAX ? value : value | (resolved ? 0x80000000u : 0);
                addrs.count++;
                value = addrs.values[slot];
            }
            if (value == UINT32_MAX) {
                continue; /* folded away */
            }
            if (value & 0x80000000u) {
                p->resolved_frames += st->samples;
            } else {
                p->unresolved_frames += st->samples;
            }
            out_names[kept] = (value & 0x7fffffffu) - 1;
            out_ips[kept] = ips[i];
            kept++;
        }
        st->depth = kept;
    }
out:
    pp_map_fini(&names);
    pp_map_fini(&addrs);
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
        free((uint64_t *)p->stacks[i].ips);
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
    for (i = 0; i < p->process_count; i++) {
        free(p->processes[i].name);
    }
    free(p->processes);
    free(p->timeline);
    free(p->process_name);
    free(p->mode);
    free(p->engine);
    free(p->names_note);
    if (pv != NULL) {
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
pp_profile_thread_label(const struct pp_profile *p, uint64_t thread_id, char *buf, size_t len)
{
    size_t i;

    for (i = 0; i < p->thread_count; i++) {
        if (p->threads[i].thread_id == thread_id && p->threads[i].name != NULL) {
            snprintf(buf, len, "%s (%llu)", p->threads[i].name,
                     (unsigned long long)pp_profile_tid(thread_id));
            return buf;
        }
    }
    snprintf(buf, len, "Thread (%llu)", (unsigned long long)pp_profile_tid(thread_id));
    return buf;
}

int
pp_profile_add_process(struct pp_profile *p, uint32_t process_id, uint32_t instance,
                       const char *name)
{
    struct pp_profile_priv *pv = p->priv;
    struct pp_profile_process *pr = NULL;
    size_t i;
    int err;

    for (i = 0; i < p->process_count && pr == NULL; i++) {
        if (p->processes[i].process_id == process_id && p->processes[i].instance == instance) {
            pr = &p->processes[i];
        }
    }
    if (pr == NULL) {
        err = pp_grow_array((void **)&p->processes, &pv->process_cap, p->process_count + 1,
                            sizeof(*p->processes));
        if (err != 0) {
            return err;
        }
        pr = &p->processes[p->process_count++];
        memset(pr, 0, sizeof(*pr));
        pr->process_id = process_id;
        pr->instance = instance;
    }
    if (pr->name == NULL && name != NULL && (pr->name = strdup(name)) == NULL) {
        return -ENOMEM;
    }
    return 0;
}

int
pp_profile_set_thread_process(struct pp_profile *p, uint64_t thread_id, uint32_t process_id,
                              uint32_t instance)
{
    size_t ti;
    int err = pp_thread_index(p, thread_id, &ti);

    if (err == 0) {
        p->threads[ti].process_id = process_id;
        p->threads[ti].process_instance = instance;
    }
    return err;
}

uint32_t
pp_profile_thread_pid(const struct pp_profile *p, uint64_t thread_id)
{
    size_t i;

    for (i = 0; i < p->thread_count; i++) {
        if (p->threads[i].thread_id == thread_id && p->threads[i].process_id != 0) {
            return p->threads[i].process_id;
        }
    }
    return p->process_id;
}

const char *
pp_profile_process_label(const struct pp_profile *p, uint32_t process_id, uint32_t instance,
                         char *buf, size_t len)
{
    const char *name = "Process";
    char nth[16] = "";
    size_t i;

    buf[0] = '\0';
    if (p->process_count < 2) {
        return buf;
    }
    instance = instance != 0 ? instance : 1;
    for (i = 0; i < p->process_count; i++) {
        if (p->processes[i].process_id == process_id && p->processes[i].instance == instance &&
            p->processes[i].name != NULL) {
            name = p->processes[i].name;
        }
    }
    if (instance > 1) {
        snprintf(nth, sizeof(nth), " #%u", (unsigned)instance);
    }
    snprintf(buf, len, "%s (%u%s)", name, (unsigned)process_id, nth);
    return buf;
}

const char *
pp_profile_thread_process_label(const struct pp_profile *p, uint64_t thread_id, char *buf,
                                size_t len)
{
    uint32_t instance = 0;
    size_t i;

    for (i = 0; i < p->thread_count; i++) {
        if (p->threads[i].thread_id == thread_id && p->threads[i].process_id != 0) {
            instance = p->threads[i].process_instance;
        }
    }
    return pp_profile_process_label(p, pp_profile_thread_pid(p, thread_id), instance, buf, len);
}
