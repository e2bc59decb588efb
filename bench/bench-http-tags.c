/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-http-tags.c - what an HTTP recording's frame tags (bridge/frame-tags.h) add to a
 * sample: pp_profile_add_sample of a 32-frame stack alone (base), against the tags applied first
 * (bridge_http_tag's work once the gone modules are taken), with 0 modules gone, 60 (a recording
 * of 30 dlopen/dlclose rounds of two libraries at one address, as tests/http-module-reuse.sh:
 * one frame of each stack in their span, the others outside every span), and 5000 small ones at
 * as many addresses spread among all the stacks' frames (every frame looked up, some tagged).
 * Base and candidate alternate in ROUNDS rounds of SAMPLES samples in the same run; prints each
 * case's median ns per sample and its ratio to base.
 * Run: build/bench/bench-http-tags [ROUNDS [SAMPLES]]
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench.h"
#include "bridge/frame-tags.h"
#include "profile/profile.h"

#define DEPTH  32
#define STACKS 64
#define CODE   0x7f0000000000ull

static uint64_t bench_stacks[STACKS][DEPTH];

/* ns per sample of adding SAMPLES samples to a new profile, tagged when t is not NULL. */
static double
bench_round(const struct bridge_tags *t, unsigned samples)
{
    struct pp_profile *p;
    uint64_t out[DEPTH], t0, t1;
    char why[64];

    if (pp_profile_new(NULL, &p, why, sizeof(why)) != 0) {
        exit(1);
    }
    t0 = bench_now_ns();
    for (unsigned i = 0; i < samples; i++) {
        const uint64_t *f = bench_stacks[i % STACKS];
        uint64_t ts = 1000000 + i;

        if (t != NULL) {
            f = bridge_tags_apply(t, ts, f, DEPTH, out);
        }
        if (pp_profile_add_sample(p, 1 + i % 4, ts, 1, f, DEPTH) != 0) {
            exit(1);
        }
    }
    t1 = bench_now_ns();
    pp_profile_free(p);
    return (double)(t1 - t0) / samples;
}

int
main(int argc, char **argv)
{
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 15;
    unsigned samples = argc > 2 ? (unsigned)atoi(argv[2]) : 200000;
    static const unsigned gones[] = { 0, 60, 5000 };
    double *base, *cand;

    base = calloc(rounds, sizeof(*base));
    cand = calloc(rounds, sizeof(*cand));
    if (rounds == 0 || samples == 0 || base == NULL || cand == NULL) {
        fprintf(stderr, "usage: bench-http-tags [ROUNDS [SAMPLES]]\n");
        return 2;
    }
    /* frames spread over 4 MiB of code; frame 5 of each stack in the first library's span */
    for (unsigned s = 0; s < STACKS; s++) {
        for (unsigned d = 0; d < DEPTH; d++) {
            bench_stacks[s][d] = CODE + 0x100000 + ((s * 7919u + d * 104729u) % 0x400000u);
        }
        bench_stacks[s][5] = CODE + 0x10 + s;
    }
    for (size_t c = 0; c < sizeof(gones) / sizeof(gones[0]); c++) {
        struct bridge_tags t = { 0 };

        for (unsigned g = 0; g < gones[c]; g++) {
            /* 60: two libraries at one address by turns; 5000: small ones at addresses of their
             * own among the stacks' frames (each frame looked up, some tagged) */
            uint64_t lo = gones[c] <= 60 ? CODE : CODE + 0x100000 + g * 0x340ull;

            if (bridge_tags_add(&t, lo, lo + (gones[c] <= 60 ? 0x1000 : 0x100), 1000 + g) != 0) {
                return 1;
            }
        }
        for (unsigned r = 0; r < rounds; r++) {
            base[r] = bench_round(NULL, samples);
            cand[r] = bench_round(&t, samples);
        }
        qsort(base, rounds, sizeof(*base), bench_cmp_double);
        qsort(cand, rounds, sizeof(*cand), bench_cmp_double);
        printf("%4u modules gone: add_sample %.1f ns, tags + add_sample %.1f ns (%.2fx)\n",
               gones[c], base[rounds / 2], cand[rounds / 2], cand[rounds / 2] / base[rounds / 2]);
        bridge_tags_fini(&t);
    }
    free(base);
    free(cand);
    return 0;
}
