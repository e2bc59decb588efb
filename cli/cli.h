/* SPDX-License-Identifier: MIT */
/*
 * cli/cli.h - the subcommands of the `pipeprof` command. Each returns the process exit status:
 * 0 on success, 1 on failure (with a message on stderr), 2 on a usage error.
 */
#ifndef PP_CLI_H
#define PP_CLI_H

#include <stdio.h>

int pp_cmd_dump(int argc, char **argv);
int pp_cmd_report(int argc, char **argv);
int pp_cmd_convert(int argc, char **argv);
int pp_cmd_ps(int argc, char **argv);
int pp_cmd_collect(int argc, char **argv);
int pp_cmd_record(int argc, char **argv);

struct pp_profile;

/* Prints the top functions by self samples to out (record's closing summary). 0 or -ENOMEM. */
int pp_report_brief(const struct pp_profile *p, unsigned top, FILE *out);

/* One line, after prefix, of what the samples say no stack of the host's own shows, with only its
 * non-zero parts (nothing when all are 0): CPU in the kernel as a share of running samples and
 * how many of those were not placed, [not sampled] and CPU with the sampling signal blocked as
 * shares, the waiting samples and the not-running markers (record's summary line). */
void pp_report_time_brief(const struct pp_profile *p, const char *prefix, FILE *out);

/* Writes s (len bytes of UTF-8) to out as a JSON string: quotes, backslashes and control
 * characters escaped (dump's and report's JSON; cli/dump.c). */
void pp_json_text(FILE *out, const char *s, size_t len);
/* The same for a C string; NULL is written as "". */
void pp_json_string(FILE *out, const char *s);

#endif /* PP_CLI_H */
