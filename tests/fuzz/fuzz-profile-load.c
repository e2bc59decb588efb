/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz-profile-load.c - libFuzzer target for what `pipeprof report` and `convert` do
 * with a trace: the input is a whole nettrace file, loaded by the CLI's loader (cli/profile.c:
 * samples, stacks, threads, the names of the rundown and method events), then written in every
 * format. UBSan found memcmp(NULL, NULL, 0) here in profile/profile.c with mutated traces
 * (issue 20). Nothing may crash, hang or read out of bounds on any input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const enum pp_profile_format formats[] = { PP_PROFILE_FOLDED, PP_PROFILE_PERF,
                                                      PP_PROFILE_SPEEDSCOPE, PP_PROFILE_PPROF,
                                                      PP_PROFILE_CHROMIUM };
    struct pp_profile *p = NULL;
    char path[64], err[512];
    size_t off = 0, i;
    int fd = memfd_create("trace", MFD_CLOEXEC);

    if (fd < 0) {
        return 0;
    }
    while (off < size) {
        ssize_t n = write(fd, data + off, size - off);

        if (n <= 0) {
            close(fd);
            return 0;
        }
        off += (size_t)n;
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    if (pp_load_profile(path, NULL, &p, err, sizeof(err)) == 0) {
        for (i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
            FILE *out = fopen("/dev/null", "w");

            /* a write may fail (a profile a format cannot hold): never crash */
            if (out != NULL && pp_profile_write(p, formats[i], out, err, sizeof(err)) != 0) {
                err[sizeof(err) - 1] = '\0';
            }
            if (out != NULL) {
                fclose(out);
            }
        }
        pp_profile_free(p);
    }
    close(fd);
    return 0;
}
