/* SPDX-License-Identifier: MIT */
/*
 * agent/codemap.c - which addresses are code: the executable mappings of /proc/self/maps
 * (modules, the vdso, and anonymous ones such as a JIT's), kept as a sorted array on the drain
 * thread. ag_drain() cuts every stack at its first frame outside them, so a frame the unwinder
 * read from a corrupt or foreign stack is never reported as code. The map is re-read when a
 * lookup misses (new code appears: dlopen, JIT), at most once per drain.
 * Context: the consumer thread only (under ag.drain_lock); never a signal handler.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/internal.h"

struct ag_code_range {
    uint64_t lo, hi;
};

static struct ag_code_range *ag_code;
static size_t ag_code_n, ag_code_cap;
static uint64_t ag_code_read_at; /* the drain that last read the map */
static uint64_t ag_code_drain;   /* drains so far */

static int
ag_codemap_read(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    size_t n = 0;

    if (f == NULL) {
        return -errno;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi;
        char perms[8];

        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[2] != 'x') {
            continue;
        }
        if (n == ag_code_cap) {
            size_t cap = ag_code_cap != 0 ? ag_code_cap * 2 : 256;
            struct ag_code_range *p = realloc(ag_code, cap * sizeof(*p));

            if (p == NULL) {
                fclose(f);
                return -ENOMEM;
            }
            ag_code = p;
            ag_code_cap = cap;
        }
        ag_code[n].lo = lo; /* the kernel lists mappings in address order */
        ag_code[n].hi = hi;
        n++;
    }
    fclose(f);
    ag_code_n = n;
    ag_code_read_at = ag_code_drain;
    return 0;
}

static int
ag_codemap_find(uint64_t pc)
{
    size_t lo = 0, hi = ag_code_n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (pc < ag_code[mid].lo) {
            hi = mid;
        } else if (pc >= ag_code[mid].hi) {
            lo = mid + 1;
        } else {
            return 1;
        }
    }
    return 0;
}

void
ag_codemap_begin_drain(void)
{
    ag_code_drain++;
}

int
ag_codemap_contains(uint64_t pc)
{
    if (ag_codemap_find(pc)) {
        return 1;
    }
    if (ag_code_read_at == ag_code_drain && ag_code_n != 0) {
        return 0;
    }
    if (ag_codemap_read() != 0) {
        return 1; /* cannot tell: keep the frame rather than lose the stack */
    }
    return ag_codemap_find(pc);
}

void
ag_codemap_fini(void)
{
    free(ag_code);
    ag_code = NULL;
    ag_code_n = ag_code_cap = 0;
}
