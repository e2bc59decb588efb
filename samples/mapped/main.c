/* SPDX-License-Identifier: MIT */
/*
 * samples/mapped/main.c - code in a file mapped by hand, as the .NET runtime maps the PE images
 * of ReadyToRun assemblies: no ELF object, unknown to the dynamic loader, yet file-backed. The
 * program writes DIR/pp-mapped-code.dll (a page of header starting "MZ", then a page of machine
 * code: a countdown loop), maps the header at offset 0 and the code page after it executable,
 * and calls the loop for SECONDS. A profile must name the loop's frames by the file and their
 * offset in it (pp-mapped-code!0x1000...), never as code of no module.
 *
 * usage: pp-sample-mapped SECONDS DIR
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MC_PAGE 4096

/* for (n in the first argument; n != 0; n--); return */
#if defined(__x86_64__)
static const uint8_t mc_loop[] = {
    0x48, 0xff, 0xcf, /* dec %rdi */
    0x75, 0xfb,       /* jnz .-3  */
    0xc3,             /* ret      */
};
#elif defined(__aarch64__)
static const uint8_t mc_loop[] = {
    0x00, 0x04, 0x00, 0xf1, /* subs x0, x0, #1 */
    0xe1, 0xff, 0xff, 0x54, /* b.ne .-4        */
    0xc0, 0x03, 0x5f, 0xd6, /* ret             */
};
#else
#error "pp-sample-mapped: no loop for this architecture"
#endif

static double
mc_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
    static uint8_t file[2 * MC_PAGE];
    char path[4096];
    uint8_t *image;
    void (*loop)(uint64_t);
    double until;
    int fd;

    if (argc != 3) {
        fprintf(stderr, "usage: pp-sample-mapped SECONDS DIR\n");
        return 2;
    }
    snprintf(path, sizeof(path), "%s/pp-mapped-code.dll", argv[2]);
    memcpy(file, "MZ", 2);
    memcpy(file + MC_PAGE, mc_loop, sizeof(mc_loop));
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, file, sizeof(file)) != (ssize_t)sizeof(file)) {
        perror(path);
        return 1;
    }
    /* Section by section, as the runtime maps an image: headers read-only at offset 0, the code
     * page after them executable. */
    image = mmap(NULL, 2 * MC_PAGE, PROT_READ, MAP_PRIVATE, fd, 0);
    if (image == MAP_FAILED || mmap(image + MC_PAGE, MC_PAGE, PROT_READ | PROT_EXEC,
                                    MAP_PRIVATE | MAP_FIXED, fd, MC_PAGE) == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    close(fd);
    __builtin___clear_cache((char *)image + MC_PAGE, (char *)image + 2 * MC_PAGE);
    loop = (void (*)(uint64_t))(uintptr_t)(image + MC_PAGE);
    until = mc_now() + atof(argv[1]);
    while (mc_now() < until) {
        loop(1000000);
    }
    printf("%p\n", (void *)image);
    return 0;
}
