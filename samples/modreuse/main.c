/* SPDX-License-Identifier: MIT */
/*
 * samples/modreuse/main.c - pp-sample-modreuse MS_A MS_B LIBDIR [ROUNDS [churn]]: dlopens
 * libpp-modreuse-a.so, burns MS_A ms of CPU in its pp_modreuse_a_burn, dlcloses it, dlopens
 * libpp-modreuse-b.so (the same code, the same size), burns MS_B ms in its pp_modreuse_b_burn
 * and dlcloses it; ROUNDS times (default 1), so that a recording that starts at some time
 * during the run holds both (tests/http-module-reuse.sh). The loader maps libb
 * into the range liba left (checked and printed: "same address" or "other address"); a profile
 * must name each library's samples by its own function (tests/agent-module-reuse.sh). With
 * "churn", another thread starts a thread that ends at once every 5 ms while liba burns: every
 * drain of a session then has thread events to write beside liba's samples (the CPU session
 * once wrote such events before the samples it held back, which took their time: see
 * tests/agent-module-reuse.sh). Exits 0, or 2 when a library cannot be loaded or a thread
 * cannot start.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef uint64_t (*burn_fn)(unsigned ms);

static atomic_int churn_stop;

static void *
churn_noop(void *arg)
{
    return arg;
}

/* Starts a thread that ends at once, every 5 ms, until churn_stop. */
static void *
churn_main(void *arg)
{
    struct timespec gap = { 0, 5000000L };
    pthread_t t;

    while (!atomic_load(&churn_stop)) {
        if (pthread_create(&t, NULL, churn_noop, NULL) == 0) {
            pthread_join(t, NULL);
        }
        nanosleep(&gap, NULL);
    }
    return arg;
}

static void *
modreuse_open(const char *dir, const char *which, const char *sym, burn_fn *fn, uintptr_t *base)
{
    char path[4096];
    Dl_info info;
    void *h;

    snprintf(path, sizeof(path), "%s/libpp-modreuse-%s.so", dir, which);
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "pp-sample-modreuse: %s\n", dlerror());
        return NULL;
    }
    *fn = (burn_fn)(uintptr_t)dlsym(h, sym);
    if (*fn == NULL || dladdr((void *)(uintptr_t)*fn, &info) == 0) {
        fprintf(stderr, "pp-sample-modreuse: %s: no %s\n", path, sym);
        dlclose(h);
        return NULL;
    }
    *base = (uintptr_t)info.dli_fbase;
    return h;
}

int
main(int argc, char **argv)
{
    unsigned ms_a = argc > 1 ? (unsigned)atoi(argv[1]) : 300;
    unsigned ms_b = argc > 2 ? (unsigned)atoi(argv[2]) : 300;
    const char *dir = argc > 3 ? argv[3] : ".";
    unsigned rounds = argc > 4 ? (unsigned)atoi(argv[4]) : 1;
    int churn = argc > 5 && strcmp(argv[5], "churn") == 0;
    uintptr_t base_a, base_b;
    pthread_t churner;
    burn_fn a, b;
    void *h;

    for (unsigned round = 0; round < rounds; round++) {
        h = modreuse_open(dir, "a", "pp_modreuse_a_burn", &a, &base_a);
        if (h == NULL) {
            return 2;
        }
        atomic_store(&churn_stop, 0);
        if (churn && pthread_create(&churner, NULL, churn_main, NULL) != 0) {
            fprintf(stderr, "pp-sample-modreuse: cannot start the churning thread\n");
            return 2;
        }
        (void)a(ms_a);
        if (churn) {
            atomic_store(&churn_stop, 1);
            pthread_join(churner, NULL);
        }
        if (dlclose(h) != 0) {
            fprintf(stderr, "pp-sample-modreuse: dlclose: %s\n", dlerror());
            return 2;
        }
        h = modreuse_open(dir, "b", "pp_modreuse_b_burn", &b, &base_b);
        if (h == NULL) {
            return 2;
        }
        if (round == 0) {
            printf("pp-sample-modreuse: liba at 0x%" PRIxPTR " (pp_modreuse_a_burn 0x%" PRIxPTR
                   "), libb at 0x%" PRIxPTR " (pp_modreuse_b_burn 0x%" PRIxPTR "): %s\n",
                   base_a, (uintptr_t)a, base_b, (uintptr_t)b,
                   base_a == base_b && (uintptr_t)a - base_a == (uintptr_t)b - base_b
                           ? "same address"
                           : "other address");
            fflush(stdout);
        }
        (void)b(ms_b);
        if (dlclose(h) != 0) {
            fprintf(stderr, "pp-sample-modreuse: dlclose: %s\n", dlerror());
            return 2;
        }
    }
    return 0;
}
