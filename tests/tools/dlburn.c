/* SPDX-License-Identifier: MIT */
/*
 * tests/tools/dlburn.c - dlburn LIB SYMBOL STOPFILE: dlopens LIB, prints "loaded" once it is
 * mapped, and burns CPU in its SYMBOL (uint64_t SYMBOL(unsigned ms), as samples/modreuse/lib.c
 * builds it) 20 ms at a time until STOPFILE exists. A long-running process whose library a test
 * replaces on disk while it stays mapped (tests/cli-fileident.sh). Exits 0, or 2 when LIB or
 * SYMBOL cannot be loaded.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

typedef uint64_t (*burn_fn)(unsigned ms);

int
main(int argc, char **argv)
{
    burn_fn burn;
    void *h;

    if (argc != 4) {
        fprintf(stderr, "usage: dlburn LIB SYMBOL STOPFILE\n");
        return 2;
    }
    h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    burn = h != NULL ? (burn_fn)(uintptr_t)dlsym(h, argv[2]) : NULL;
    if (burn == NULL) {
        fprintf(stderr, "dlburn: %s\n", dlerror());
        return 2;
    }
    printf("loaded\n");
    fflush(stdout);
    while (access(argv[3], F_OK) != 0) {
        (void)burn(20);
    }
    return 0;
}
