/* SPDX-License-Identifier: MIT */
/*
 * cli/convert.c - `pipeprof convert IN --format F [-o OUT]`: writes the samples of a nettrace
 * file in a format other viewers read (profile/profile.h has the writers).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/output.h"
#include "cli/profile.h"

static void
pp_convert_usage(FILE *out)
{
    fprintf(out,
            "usage: pipeprof convert IN.nettrace... --format FORMAT [-o OUT]\n"
            "\n"
            "Writes the samples of IN (a nettrace file written by pipeprof or by a .NET\n"
            "runtime; '-' for standard input) in another format. OUT defaults to standard\n"
            "output. Frames are named `module!function` from the trace's rundown and\n"
            "method-load events; managed frames of .NET traces included.\n"
            "Several IN files (the processes of one `pipeprof record`) become one output\n"
            "in which every stack is under its process: folded stacks start with\n"
            "`process (pid);`, perf script has each process's pid, speedscope a profile per\n"
            "process and thread, pprof a `pid` label, chromium a pid per process.\n"
            "\n"
            "formats:\n"
            "  folded      collapsed stacks, one line per distinct stack:\n"
            "              `THREAD;ROOT;...;LEAF COUNT` (FlameGraph's flamegraph.pl, inferno,\n"
            "              speedscope). `collapsed` is accepted as a synonym.\n"
            "  perf        `perf script` text: one block per sample, leaf first\n"
            "              (FlameGraph's stackcollapse-perf.pl, Firefox Profiler).\n"
            "  speedscope  speedscope's JSON file format, one sampled profile per thread\n"
            "              (https://www.speedscope.app, `speedscope FILE`).\n"
            "  pprof       gzipped pprof protobuf with samples/count and cpu/nanoseconds\n"
            "              (`go tool pprof`, Pyroscope, Parca).\n"
            "  chromium    Chrome trace-event JSON, a flame chart per thread over time\n"
            "              (Perfetto UI, chrome://tracing).\n"
            "\n"
            "options:\n"
            "  -f, --format F     output format (required)\n"
            "  -o, --output OUT   output file (default: standard output)\n"
            "  --thread TID       only samples of this thread\n"
            "  --from MS          only samples at or after MS milliseconds into the trace\n"
            "  --to MS            only samples before MS milliseconds into the trace\n"
            "  --fold REGEX       drop frames whose name matches REGEX (POSIX extended)\n"
            "  -h, --help         this text\n");
}

int
pp_cmd_convert(int argc, char **argv)
{
    static const struct option opts[] = {
        { "format", required_argument, NULL, 'f' }, { "output", required_argument, NULL, 'o' },
        { "thread", required_argument, NULL, 'T' }, { "fold", required_argument, NULL, 'F' },
        { "from", required_argument, NULL, 'A' },   { "to", required_argument, NULL, 'B' },
        { "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
    };
    struct pp_load_filter filter = { 0 };
    struct pp_profile *p = NULL;
    enum pp_profile_format fmt = PP_PROFILE_FOLDED;
    const char *format = NULL, *output = NULL;
    const char *const *inputs;
    struct pp_output o;
    size_t n_inputs;
    FILE *out = NULL;
    char err[512], *end;
    int c, rc = 1;

    optind = 1;
    while ((c = getopt_long(argc, argv, "f:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            format = optarg;
            break;
        case 'o':
            output = optarg;
            break;
        case 'T':
            filter.thread_id = strtoull(optarg, &end, 10);
            if (*end != '\0' || filter.thread_id == 0) {
                fprintf(stderr, "pipeprof convert: --thread needs a thread id\n");
                return 2;
            }
            break;
        case 'F':
            filter.fold_re = optarg;
            break;
        case 'A':
        case 'B': {
            double ms = strtod(optarg, &end);

            if (*end != '\0' || ms < 0) {
                fprintf(stderr, "pipeprof convert: --%s needs milliseconds >= 0\n",
                        c == 'A' ? "from" : "to");
                return 2;
            }
            *(c == 'A' ? &filter.start_ms : &filter.end_ms) = ms;
            break;
        }
        case 'h':
            pp_convert_usage(stdout);
            return 0;
        default:
            pp_convert_usage(stderr);
            return 2;
        }
    }
    if (optind >= argc || format == NULL) {
        pp_convert_usage(stderr);
        return 2;
    }
    if (pp_profile_format_parse(format, &fmt) != 0) {
        fprintf(stderr,
                "pipeprof convert: unknown format '%s' (known: folded, perf, speedscope, pprof, "
                "chromium)\n",
                format);
        return 2;
    }
    inputs = (const char *const *)argv + optind;
    n_inputs = (size_t)(argc - optind);
    if (output == NULL && pp_output_is_input("/dev/stdout", inputs, n_inputs)) {
        fprintf(stderr, "pipeprof convert: standard output is also an input; use -o\n");
        return 1;
    }
    if (output != NULL && pp_output_open(&o, output, inputs, n_inputs, err, sizeof(err)) != 0) {
        fprintf(stderr, "pipeprof convert: %s\n", err);
        return 1;
    }
    if (pp_load_profiles(inputs, n_inputs, &filter, &p, err, sizeof(err)) != 0) {
        fprintf(stderr, "pipeprof convert: %s\n", err);
        goto out;
    }
    out = output != NULL ? pp_output_file(&o) : stdout;
    if (out == NULL) {
        fprintf(stderr, "pipeprof convert: %s: %s\n", output, strerror(ENOMEM));
        goto out;
    }
    if (pp_profile_write(p, fmt, out, err, sizeof(err)) != 0) {
        fprintf(stderr, "pipeprof convert: writing %s failed: %s\n",
                output != NULL ? output : "standard output", err);
        goto out;
    }
    if (output != NULL && pp_output_commit(&o, err, sizeof(err)) != 0) {
        fprintf(stderr, "pipeprof convert: %s\n", err);
        goto out;
    }
    rc = 0;
out:
    if (output != NULL) {
        pp_output_abort(&o); /* nothing after a commit; else the previous file stays */
    }
    pp_profile_free(p);
    return rc;
}
