/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/replay.c - a main() for fuzz targets in builds without libFuzzer: it feeds every
 * file of the corpus directories given on the command line to LLVMFuzzerTestOneInput(), so the
 * corpus is replayed (under the sanitizers of the build) by every ctest run.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
pp_replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long size;
    int err = -1;

    if (f == NULL) {
        perror(path);
        return -1;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        goto out;
    }
    /* An exact-size allocation, so ASan flags any read past the input. */
    buf = malloc(size > 0 ? (size_t)size : 1);
    if (buf == NULL || fread(buf, 1, (size_t)size, f) != (size_t)size) {
        goto out;
    }
    LLVMFuzzerTestOneInput(buf, (size_t)size);
    err = 0;
out:
    free(buf);
    fclose(f);
    return err;
}

int
main(int argc, char **argv)
{
    unsigned long files = 0;
    int i;

    for (i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        struct dirent *de;

        if (d == NULL) {
            if (pp_replay_file(argv[i]) != 0) {
                return 1;
            }
            files++;
            continue;
        }
        while ((de = readdir(d)) != NULL) {
            char path[4096];
            struct stat st;

            snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
            if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
                continue;
            }
            if (pp_replay_file(path) != 0) {
                closedir(d);
                return 1;
            }
            files++;
        }
        closedir(d);
    }
    if (files == 0) {
        fprintf(stderr, "replay: no corpus files found\n");
        return 1;
    }
    printf("replay: %lu inputs replayed without a fault\n", files);
    return 0;
}
