/* SPDX-License-Identifier: MIT */
/*
 * bridge/frame-tags.c - frames tagged by the module gone under them (bridge/frame-tags.h).
 * Context: one thread.
 */
#include "bridge/frame-tags.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

/* How many gones have lo <= addr (they come first in by_lo). */
static size_t
bridge_tags_upto(const struct bridge_tags *t, uint64_t addr)
{
    size_t first = 0, last = t->gone_count;

    while (first < last) {
        size_t mid = first + (last - first) / 2;

        if (t->gone[t->by_lo[mid]].lo <= addr) {
            first = mid + 1;
        } else {
            last = mid;
        }
    }
    return first;
}

int
bridge_tags_add(struct bridge_tags *t, uint64_t lo, uint64_t hi, uint64_t gone_ns)
{
    size_t n = t->gone_count, at;
    int err;

    if (lo >= hi || n == BRIDGE_TAG_MAX) {
        return 0;
    }
    err = pp_grow_array((void **)&t->gone, &t->gone_cap, n + 1, sizeof(*t->gone));
    if (err == 0) {
        err = pp_grow_array((void **)&t->by_lo, &t->by_lo_cap, n + 1, sizeof(*t->by_lo));
    }
    if (err == 0) {
        err = pp_grow_array((void **)&t->max_hi, &t->max_hi_cap, n + 1, sizeof(*t->max_hi));
    }
    if (err != 0) {
        return err;
    }
    /* after every gone with lo <= this one's: equal los stay in index order */
    at = bridge_tags_upto(t, lo);
    t->gone[n] = (struct bridge_tag_gone){ lo, hi, gone_ns };
    memmove(t->by_lo + at + 1, t->by_lo + at, (n - at) * sizeof(*t->by_lo));
    t->by_lo[at] = (uint32_t)n;
    t->gone_count = n + 1;
    for (size_t i = at; i <= n; i++) {
        uint64_t h = t->gone[t->by_lo[i]].hi, before = i > 0 ? t->max_hi[i - 1] : 0;

        t->max_hi[i] = h > before ? h : before;
    }
    return 0;
}

const uint64_t *
bridge_tags_apply(const struct bridge_tags *t, uint64_t ts, const uint64_t *frames, uint32_t depth,
                  uint64_t *out)
{
    uint64_t lo, hi;
    int any = 0;

    if (t->gone_count == 0 || ts < t->gone[0].gone_ns) {
        return frames; /* no module went before this sample */
    }
    lo = t->gone[t->by_lo[0]].lo;
    hi = t->max_hi[t->gone_count - 1];
    for (uint32_t d = 0; d < depth; d++) {
        uint64_t ip = frames[d], at = d > 0 && ip > 0 ? ip - 1 : ip;
        size_t best = 0, i;

        out[d] = ip;
        if (at < lo || at >= hi || ip > BRIDGE_TAG_ADDR_MASK) {
            continue; /* outside every gone's span: most frames, when few modules went */
        }
        /* the gones with lo <= at, back to the first whose span and every earlier one's end
         * at or below at; of those holding at, the latest gone by ts */
        for (i = bridge_tags_upto(t, at); i-- > 0 && t->max_hi[i] > at;) {
            uint32_t k = t->by_lo[i];
            const struct bridge_tag_gone *g = &t->gone[k];

            if (at < g->hi && g->gone_ns <= ts && k + 1 > best) {
                best = k + 1;
            }
        }
        if (best != 0) {
            out[d] = ip | (uint64_t)best << BRIDGE_TAG_ADDR_BITS;
            any = 1;
        }
    }
    return any ? out : frames;
}

uint64_t
bridge_tags_address(const struct bridge_tags *t, uint64_t frame, uint64_t *ts)
{
    uint64_t tag = frame >> BRIDGE_TAG_ADDR_BITS;

    if (tag == 0 || tag > t->gone_count) {
        return frame;
    }
    *ts = t->gone[tag - 1].gone_ns;
    return frame & BRIDGE_TAG_ADDR_MASK;
}

void
bridge_tags_fini(struct bridge_tags *t)
{
    free(t->gone);
    free(t->by_lo);
    free(t->max_hi);
    memset(t, 0, sizeof(*t));
}
