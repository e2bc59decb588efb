/* SPDX-License-Identifier: MIT */
/*
 * bridge/frame-tags.h - which module instance a frame's address belongs to, for a profile that
 * names its frames only at its end (bridge/http-source.c). A library unloaded during a recording
 * and another one loaded at its address make one address two functions (issue 19), and
 * pp_profile keys frames by address. So a frame of a sample taken after a module went, at an
 * address that module's code spanned, is tagged with that going (the latest such) in the bits
 * above user space's 48, and named as of the going's time with ag_symbolize_at(): the code mapped
 * there next. A frame without a tag had no module go under it since the recording began.
 * Context: one thread (the IPC loop's); no locking.
 */
#ifndef PP_BRIDGE_FRAME_TAGS_H
#define PP_BRIDGE_FRAME_TAGS_H

#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

#define BRIDGE_TAG_ADDR_BITS 48
#define BRIDGE_TAG_ADDR_MASK ((1ull << BRIDGE_TAG_ADDR_BITS) - 1)
/* bit 63 stays free: pp_profile_name_frames shifts the address left by one */
#define BRIDGE_TAG_MAX       32767

/* A module gone during the recording: the span of its code, and when it was known gone. */
struct bridge_tag_gone {
    uint64_t lo, hi, gone_ns;
};

struct bridge_tags {
    struct bridge_tag_gone *gone; /* in the order they went (gone_ns never decreases) */
    size_t gone_count, gone_cap;
    uint32_t *by_lo; /* indices into gone, sorted by lo, then by index */
    uint64_t
            *max_hi; /* max_hi[i]: the highest hi of by_lo[0..i] (a frame below it may be in one) */
    size_t by_lo_cap, max_hi_cap;
};

/*
 * Adds a module that went at gone_ns (not before the last one added) whose code spanned
 * [lo, hi). Past BRIDGE_TAG_MAX gones the rest are ignored (their frames are then named by the
 * last one tagged, or as of the start). Returns 0 or -ENOMEM.
 */
PP_MUST_USE int bridge_tags_add(struct bridge_tags *t, uint64_t lo, uint64_t hi, uint64_t gone_ns);

/*
 * The frames of a sample taken at ts (leaf first: a return address is looked up at ip - 1),
 * tagged: out when some frame got a tag (out holds depth frames), else frames itself. Cost: one
 * comparison without gones; else two per frame outside the span of all gones, and for a frame
 * inside it a binary search of the gones by lo, then a look at each gone whose span may hold it
 * (the modules mapped at that address one after the other, when they do not overlap others).
 */
const uint64_t *bridge_tags_apply(const struct bridge_tags *t, uint64_t ts, const uint64_t *frames,
                                  uint32_t depth, uint64_t *out);

/*
 * The address of a tagged frame, and in *ts the time to name it as of (the going's); an address
 * without a tag is returned as it is and *ts left.
 */
uint64_t bridge_tags_address(const struct bridge_tags *t, uint64_t frame, uint64_t *ts);

void bridge_tags_fini(struct bridge_tags *t);

#endif /* PP_BRIDGE_FRAME_TAGS_H */
