/* SPDX-License-Identifier: MIT */
/*
 * cli/output.h - output files that never lose data: an output that is one of the inputs is
 * refused (same device and inode, so a hard link is caught too), and an output is written to a
 * temporary file beside it and renamed into place only when every byte was written, so a
 * failure leaves the previous file as it was. A path that is not a regular file (/dev/null, a
 * FIFO, a terminal) is written in place. Context: the CLI's single thread.
 */
#ifndef PP_CLI_OUTPUT_H
#define PP_CLI_OUTPUT_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>

struct pp_output {
    char path[PATH_MAX]; /* where the output goes */
    char tmp[PATH_MAX];  /* the temporary file written instead, or "" (in place) */
    int fd;              /* open for writing; -1 after commit or abort */
    FILE *f;             /* pp_output_file()'s stream over fd, or NULL */
};

/*
 * Returns 1 when path names the same file as one of inputs[0, n) (stat: same st_dev and
 * st_ino; "-" is standard input), else 0. A path that does not exist is no input.
 */
int pp_output_is_input(const char *path, const char *const *inputs, size_t n);

/*
 * Opens the output path: refuses it (-EEXIST, with the reason in err) when it is one of
 * inputs[0, n), else creates the temporary file "DIR/.NAME.XXXXXX" (mode 0666 minus the umask)
 * or, for an existing non-regular file, opens path itself. Returns 0 or a negative errno with a
 * sentence in err. Ownership: end it with pp_output_commit() or pp_output_abort().
 */
int pp_output_open(struct pp_output *o, const char *path, const char *const *inputs, size_t n,
                   char *err, size_t errlen);

/* A stdio stream over the output (created on first call); NULL on -ENOMEM. */
FILE *pp_output_file(struct pp_output *o);

/*
 * Flushes and closes the output, checking every step, and renames the temporary file into
 * place. Returns 0, or a negative errno with a sentence in err; the temporary file is then
 * removed and an earlier file at path is left as it was.
 */
int pp_output_commit(struct pp_output *o, char *err, size_t errlen);

/* Closes and removes the temporary file; path is left as it was. Accepts an ended output. */
void pp_output_abort(struct pp_output *o);

/*
 * Flushes standard output and reports a write error (a full disk, a closed pipe) of the command
 * on stderr: returns 1 if there was one, else 0. main() calls it after every command.
 */
int pp_output_stdout_failed(const char *command);

#endif /* PP_CLI_OUTPUT_H */
