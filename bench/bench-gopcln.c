/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-gopcln.c - what reading a Go module's pclntab into its CFI table (agent/cfi.c,
 * ag_cfi_go_find and ag_cfi_go_walk) costs, at build time and per walk, in interleaved batches of
 * the same run. The Go ELF file FILE (a cgo program: Go code without .eh_frame, runtime/cgo's C
 * with it; or a static one, without any) is laid out in memory as the loader would (its PT_LOAD
 * segments read at their addresses, read-only after; a fixed-address binary's textStart moved
 * with them), and its tables are built as the manager thread builds them:
 *   find        ag_cfi_go_find over its data segments (per call);
 *   build go    its table with the Go rows (ag_cfi_build_cancellable, the table freed after);
 *   build eh    its table from .eh_frame alone (what the agent built before);
 * then a synthetic goroutine stack of DEPTH frames of its own framed Go functions (each frame's
 * return address and saved rbp where the rows say, rbp chained as Go chains it), walked by
 * ag_sig_unwind through a published one-module snapshot:
 *   walk rows   with the Go rows, through a row cache (the sampling handler's way);
 *   walk fp     with the .eh_frame table only: the frame-pointer walk of before, through the cache;
 * the same two without a cache (interposed calls, the wall thread: every row looked up), and
 * the cached two on a stack outside the walk's direct-read window (every read a
 * process_vm_readv, as a goroutine's stack is outside its thread's recorded bounds). The walks
 * must name the same frames, checked first. Prints the median of each (us per find, ms per build,
 * ns per walk) and the medians of the per-batch differences.
 * usage: bench-gopcln FILE [BATCHES [REPS]] (15, 2000; builds REPS/200, remote walks REPS/10).
 * Context: a standalone program, run by hand; not part of ctest. x86-64 only.
 */
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/cfi.h"
#include "agent/internal.h"
#include "agent/symbols-internal.h"
#include "bench/bench.h"

#if defined(__x86_64__)
#define BENCH_DEPTH 16
#define BENCH_SEGS  16

static uint64_t bench_sink;
static struct ag_cfi_span bench_loads[BENCH_SEGS], bench_data[BENCH_SEGS], bench_text;
static size_t bench_n_loads, bench_n_data;
static uint64_t bench_base, bench_hdr, bench_gopcln;
static _Alignas(16) uint64_t bench_stack[BENCH_DEPTH * 64 + 64];
static uint64_t bench_pc0, bench_sp0, bench_fp0;
static struct ag_cfi_cache bench_cache;

/* Lays FILE's PT_LOAD segments out as the loader would; fills the spans. */
static int
bench_map(const char *path)
{
    Elf64_Ehdr eh;
    Elf64_Phdr ph[BENCH_SEGS * 2];
    uint64_t lo = UINT64_MAX, hi = 0;
    uint8_t *map;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0 || pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_phnum > BENCH_SEGS * 2 ||
        pread(fd, ph, sizeof(ph[0]) * eh.e_phnum, (off_t)eh.e_phoff) !=
                (ssize_t)(sizeof(ph[0]) * eh.e_phnum)) {
        return -1;
    }
    for (int i = 0; i < eh.e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD) {
            lo = ph[i].p_vaddr < lo ? ph[i].p_vaddr & ~(uint64_t)4095 : lo;
            hi = ph[i].p_vaddr + ph[i].p_memsz > hi ? ph[i].p_vaddr + ph[i].p_memsz : hi;
        }
    }
    map = mmap(NULL, hi - lo, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (lo >= hi || map == MAP_FAILED) {
        return -1;
    }
    bench_base = (uint64_t)(uintptr_t)map - lo;
    for (int i = 0; i < eh.e_phnum; i++) {
        uint64_t at = bench_base + ph[i].p_vaddr;

        if (ph[i].p_type == PT_GNU_EH_FRAME) {
            bench_hdr = at;
        }
        if (ph[i].p_type != PT_LOAD || bench_n_loads == BENCH_SEGS) {
            continue;
        }
        if (pread(fd, (void *)(uintptr_t)at, ph[i].p_filesz, (off_t)ph[i].p_offset) !=
            (ssize_t)ph[i].p_filesz) {
            return -1;
        }
        bench_loads[bench_n_loads++] = (struct ag_cfi_span){ at, at + ph[i].p_memsz };
        if (ph[i].p_flags & PF_X) {
            bench_text = bench_loads[bench_n_loads - 1];
        } else {
            bench_data[bench_n_data++] = bench_loads[bench_n_loads - 1];
        }
    }
    close(fd);
    /* The loader relocates the header's textStart in a position-independent binary; a fixed one
     * laid out here elsewhere than its link address gets the same move. */
    if (ag_cfi_go_find(bench_data, bench_n_data, &bench_gopcln) == 0 && lo != 0) {
        uint64_t *text_start = (uint64_t *)(uintptr_t)(bench_gopcln + 24);

        *text_start += bench_base;
    }
    mprotect(map, hi - lo, PROT_READ);
    return bench_text.hi > bench_text.lo ? 0 : -1;
}

/* Publishes a snapshot of one module, the text with table t. */
static void
bench_publish(const struct ag_cfi_table *t, uint64_t generation)
{
    struct ag_module_snapshot *s = calloc(1, sizeof(*s) + sizeof(s->spans[0]));

    s->generation = generation;
    s->n = 1;
    s->spans[0] = (struct ag_module_span){ bench_text.lo, bench_text.hi, NULL, t, 0 };
    atomic_store(&ag_sig_modules, s); /* the old one leaks: a few per run */
}

/*
 * Builds a stack of BENCH_DEPTH frames of framed Go functions: rows with CFA = sp + N (24..248),
 * the RA at CFA - 8 and rbp at CFA - 16, taken evenly across the table. A return address is a
 * row's address + 1 (the lookup of ra - 1 meets that row). rbp of each frame is its CFA - 16.
 */
static int
bench_stack_build(const struct ag_cfi_table *t)
{
    const uint8_t want = AG_CFI_CFA_SP | AG_CFI_RA_AT | AG_CFI_FP_AT;
    uint64_t pcs[BENCH_DEPTH], cfa_off[BENCH_DEPTH], sp;
    size_t k = 0, fit = 0, seen = 0;

    for (int pass = 0; pass < 2; pass++) { /* count the rows that fit, then take them evenly */
        for (size_t i = 0; i + 1 < t->n && k < BENCH_DEPTH; i++) {
            const struct ag_cfi_row *r = &t->rows[i];

            if (r->flags != want || r->cfa_off < 24 || r->cfa_off > 248 || r->fp_off8 != -2 ||
                r->ra_off != -8 || t->rows[i + 1].addr < r->addr + 2) {
                continue;
            }
            if (pass == 0) {
                fit++;
            } else if (seen++ % (fit / BENCH_DEPTH) == 0) {
                pcs[k] = t->base + r->addr + 1;
                cfa_off[k++] = (uint64_t)r->cfa_off;
            }
        }
        if (fit < BENCH_DEPTH) {
            fprintf(stderr, "bench-gopcln: %zu rows of framed Go functions\n", fit);
            return -1;
        }
    }
    memset(bench_stack, 0, sizeof(bench_stack));
    sp = (uint64_t)(uintptr_t)bench_stack;
    bench_pc0 = pcs[0];
    bench_sp0 = sp;
    bench_fp0 = sp + cfa_off[0] - 16;
    for (k = 0; k < BENCH_DEPTH; k++) {
        uint64_t cfa = sp + cfa_off[k];
        uint64_t *ra = (uint64_t *)(uintptr_t)(cfa - 8), *bp = (uint64_t *)(uintptr_t)(cfa - 16);

        *ra = k + 1 < BENCH_DEPTH ? pcs[k + 1] : 0;
        *bp = k + 1 < BENCH_DEPTH ? cfa + cfa_off[k + 1] - 16 : 0;
        sp = cfa;
    }
    return 0;
}

static double
bench_walks(int remote, int cached, int reps, uint32_t *depth)
{
    uint64_t frames[64], t0;
    struct ag_unwind_result res = { 0 };
    struct ag_unwind_ctx c;

    if (remote) {
        ag_sig_unwind_ctx_init(&c, bench_sp0, 0, 0);
    } else {
        ag_sig_unwind_ctx_init(&c, bench_sp0, bench_sp0,
                               (uint64_t)(uintptr_t)(bench_stack + PP_ARRAY_SIZE(bench_stack)));
    }
    c.remote_ok = 1;
    c.pid = getpid();
    c.cache = cached ? &bench_cache : NULL;
    t0 = bench_now_ns();
    for (int i = 0; i < reps; i++) {
        ag_sig_unwind(&c, bench_pc0, bench_sp0, bench_fp0, 0, frames, 64, &res);
        bench_sink += res.depth;
    }
    if (depth != NULL) {
        *depth = res.depth;
    }
    return (double)(bench_now_ns() - t0) / reps;
}

static double
bench_build(uint64_t gopcln, int reps)
{
    uint64_t t0 = bench_now_ns();

    for (int i = 0; i < reps; i++) {
        struct ag_cfi_table *t = NULL;

        if (ag_cfi_build_cancellable(bench_base, bench_hdr, gopcln, bench_loads, bench_n_loads,
                                     NULL, &t) == 0) {
            bench_sink += t->n;
        }
        ag_cfi_table_free(t);
    }
    return (double)(bench_now_ns() - t0) / reps / 1e6;
}

static double
bench_find(int reps)
{
    uint64_t t0 = bench_now_ns(), at = 0;

    for (int i = 0; i < reps; i++) {
        bench_sink += ag_cfi_go_find(bench_data, bench_n_data, &at) == 0 ? at : 0;
    }
    return (double)(bench_now_ns() - t0) / reps / 1e3;
}

int
main(int argc, char **argv)
{
    int batches = argc > 2 ? atoi(argv[2]) : 15, reps = argc > 3 ? atoi(argv[3]) : 2000;
    static const char *names[9] = {
        "find",
        "build go",
        "build eh",
        "walk rows",
        "walk fp",
        "walk rows, no cache",
        "walk fp, no cache",
        "remote walk rows",
        "remote walk fp",
    };
    struct ag_cfi_table *t_go = NULL, *t_eh = NULL;
    uint32_t d_go = 0, d_fp = 0;
    double *v[9], *d[4];

    if (argc < 2 || batches < 1 || reps < 200 || bench_map(argv[1]) != 0 ||
        ag_cfi_go_find(bench_data, bench_n_data, &bench_gopcln) != 0) {
        fprintf(stderr, "usage: bench-gopcln GO-ELF-FILE [BATCHES [REPS >= 200]] (a Go 1.18/1.19 "
                        "x86-64 binary)\n");
        return 2;
    }
    if (ag_cfi_build_cancellable(bench_base, bench_hdr, bench_gopcln, bench_loads, bench_n_loads,
                                 NULL, &t_go) != 0 ||
        (bench_hdr != 0 && ag_cfi_build_cancellable(bench_base, bench_hdr, 0, bench_loads,
                                                    bench_n_loads, NULL, &t_eh) != 0) ||
        bench_stack_build(t_go) != 0) {
        fprintf(stderr, "bench-gopcln: no tables, or too few framed Go functions\n");
        return 1;
    }
    printf("# %s: %zu rows with the Go functions (%zu functions and FDEs), %zu from .eh_frame\n",
           argv[1], t_go->n, t_go->fdes, t_eh != NULL ? t_eh->n : 0);
    /* The walks must be the ones described: the whole stack both ways. */
    for (int remote = 0; remote < 2; remote++) {
        bench_publish(t_go, 1);
        bench_walks(remote, 0, 1, &d_go);
        bench_publish(t_eh, 2);
        bench_walks(remote, 0, 1, &d_fp);
        if (d_go != BENCH_DEPTH || d_fp != BENCH_DEPTH) {
            fprintf(stderr, "bench-gopcln: %swalks of %u and %u frames, not %d\n",
                    remote ? "remote " : "", d_go, d_fp, BENCH_DEPTH);
            return 1;
        }
    }
    for (int k = 0; k < 9; k++) {
        v[k] = calloc((size_t)batches, sizeof(double));
    }
    for (int k = 0; k < 4; k++) {
        d[k] = calloc((size_t)batches, sizeof(double));
    }
    for (int b = 0; b < batches; b++) {
        for (int k = 0; k < 9; k++) {
            int which = (k + b) % 9; /* rotating order */
            int remote = which >= 7, rows = which == 3 || which == 5 || which == 7;

            if (which == 0) {
                v[which][b] = bench_find(reps / 200 + 1);
            } else if (which <= 2) {
                v[which][b] = bench_build(which == 1 ? bench_gopcln : 0, reps / 200 + 1);
            } else {
                /* A new generation: every walk starts from an empty cache, then fills it. */
                bench_publish(rows ? t_go : t_eh, (uint64_t)(3 + 9 * b + which));
                v[which][b] = bench_walks(remote, which != 5 && which != 6,
                                          remote ? reps / 10 : reps, NULL);
            }
        }
        d[0][b] = v[1][b] - v[2][b];
        d[1][b] = v[3][b] - v[4][b];
        d[2][b] = v[5][b] - v[6][b];
        d[3][b] = v[7][b] - v[8][b];
    }
    for (int k = 0; k < 9; k++) {
        printf("%-20s %10.*f %s\n", names[k], k == 1 || k == 2 ? 3 : 1,
               bench_median_of(v[k], batches),
               k == 0   ? "us per call"
               : k <= 2 ? "ms per build"
                        : "ns per walk");
    }
    printf("medians of the per-batch differences, rows against frame pointers: build %+.3f ms; "
           "walk %+.1f ns, without the cache %+.1f ns, remote %+.1f ns (%d batches of %d walks "
           "of %d frames)\n",
           bench_median_of(d[0], batches), bench_median_of(d[1], batches),
           bench_median_of(d[2], batches), bench_median_of(d[3], batches), batches, reps,
           BENCH_DEPTH);
    return bench_sink == 0 ? 1 : 0;
}
#else
int
main(void)
{
    printf("bench-gopcln: Go's pclntab is read on x86-64 only\n");
    return 0;
}
#endif
