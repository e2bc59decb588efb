/* SPDX-License-Identifier: MIT */
/*
 * cli/main.c - `pipeprof SUBCOMMAND ...`: dispatches to cli/<subcommand>.c.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/output.h"
#include "common/compiler.h"

struct pp_command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

static const struct pp_command pp_commands[] = {
    { "record", pp_cmd_record, "run a command under the profiler and record its samples" },
    { "dump", pp_cmd_dump, "print the events of a nettrace file, or a summary of them" },
    { "report", pp_cmd_report, "show the top functions and threads of a sampled trace" },
    { "convert", pp_cmd_convert,
      "write the samples of a trace for other viewers (speedscope, pprof, perf...)" },
    { "ps", pp_cmd_ps, "list processes that serve a .NET diagnostic port" },
    { "collect", pp_cmd_collect, "record a trace from a process over the diagnostic port" },
};

static void
pp_usage(FILE *out)
{
    size_t i;

    fprintf(out, "usage: pipeprof COMMAND [ARGS...]\n\ncommands:\n");
    for (i = 0; i < PP_ARRAY_SIZE(pp_commands); i++) {
        fprintf(out, "  %-10s %s\n", pp_commands[i].name, pp_commands[i].summary);
    }
    fprintf(out, "\n`pipeprof COMMAND --help` describes each command.\n");
}

int
main(int argc, char **argv)
{
    size_t i;

    if (argc < 2) {
        pp_usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        pp_usage(stdout);
        return pp_output_stdout_failed("help");
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("pipeprof %s\n", PP_VERSION);
        return pp_output_stdout_failed("--version");
    }
    for (i = 0; i < PP_ARRAY_SIZE(pp_commands); i++) {
        if (strcmp(argv[1], pp_commands[i].name) == 0) {
            int rc = pp_commands[i].fn(argc - 1, argv + 1);

            /* a report to a full disk is a failure, whatever the command (a failed one has
             * said why already) */
            if (rc == 0 && pp_output_stdout_failed(argv[1])) {
                rc = 1;
            }
            return rc;
        }
    }
    fprintf(stderr, "pipeprof: unknown command '%s'\n", argv[1]);
    pp_usage(stderr);
    return 2;
}
