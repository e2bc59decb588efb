/* SPDX-License-Identifier: MIT */
/*
 * cli/cli.h - the subcommands of the `pipeprof` command. Each returns the process exit status:
 * 0 on success, 1 on failure (with a message on stderr), 2 on a usage error.
 */
#ifndef PP_CLI_H
#define PP_CLI_H

int pp_cmd_dump(int argc, char **argv);
int pp_cmd_report(int argc, char **argv);
int pp_cmd_convert(int argc, char **argv);
int pp_cmd_ps(int argc, char **argv);
int pp_cmd_collect(int argc, char **argv);

#endif /* PP_CLI_H */
