/* SPDX-License-Identifier: MIT */
/*
 * cli/report.c - `pipeprof report`: where the samples of a trace went. Top functions by self
 * and total samples, the per-thread breakdown, and the sampling and loss figures.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/profile.h"

struct pp_func_stat {
    uint32_t name;
    uint64_t self;
    uint64_t total;
    size_t last_stack; /* stack index + 1 that last counted this name in total */
};

static void
pp_report_usage(FILE *out)
{
    fprintf(out, "usage: pipeprof report [OPTIONS] FILE...\n"
                 "\n"
                 "Shows where the samples of a nettrace file went: the top functions by self\n"
                 "samples (the function was the leaf) and by total samples (the function was\n"
                 "anywhere on the stack), with percentages of all samples, then the sampling\n"
                 "figures. FILE may be '-' for standard input. Several files (the processes of\n"
                 "one `pipeprof record`, X.nettrace and X.<pid>.nettrace) are reported as one,\n"
                 "with a per-process breakdown; each counts as the sum of its own reports.\n"
                 "\n"
                 "options:\n"
                 "  --top N            functions to list (default 20)\n"
                 "  --threads          add a per-thread breakdown\n"
                 "  --thread TID       only samples of this thread\n"
                 "  --from MS          only samples at or after MS milliseconds into the trace\n"
                 "  --to MS            only samples before MS milliseconds into the trace\n"
                 "  --fold REGEX       drop frames whose name matches REGEX (POSIX extended)\n"
                 "  --format text|json output format (default text)\n"
                 "  -h, --help         this text\n"
                 "\n"
                 "The figures: samples (running and waiting), the mode (wall when the trace\n"
                 "holds waiting samples), the sampling interval from the trace header, the\n"
                 "effective rate per sampled thread (over the trace, and on the busiest\n"
                 "thread from its first sample to its last), the samples the agent dropped, the\n"
                 "events lost in the trace (sequence gaps), the threads the agent refused\n"
                 "(not sampled while refused), the CPU threads burned after their last\n"
                 "sample that no sample holds, the CPU the dropped samples stood for, the\n"
                 "share of named frames (and, for a trace\n"
                 "whose process was killed before its rundown, how many were named from the\n"
                 "files of its modules and why the rest were not),\n"
                 "whether the trace ends early, the CPU samples in the kernel ([kernel] leaf;\n"
                 "[kernel, not placed]: no system call's stack known), with the sampling\n"
                 "signal blocked, not sampled ([not sampled]: CPU no sample saw), and the\n"
                 "not-running markers, whether the timer engine sampled above the kernel's\n"
                 "tick (tick-bound: its samples came at the tick), and the stacks cut short\n"
                 "where an unwind table was not built yet, and the perf samples left out as\n"
                 "early by their thread's CPU clock (stolen time). JSON has \"samples\", "
                 "\"running_samples\",\n"
                 "\"waiting_samples\", \"lost_events\", \"lost_samples\", \"duration_s\",\n"
                 "\"busiest_rate_hz\" (the busiest thread's, from its first sample to its last),\n"
                 "\"threads\", \"process_id\", \"sampling_interval_ns\", \"mode\",\n"
                 "\"truncated\", \"cpu_engine\", \"kernel_samples\" (leaf [kernel] or [kernel,\n"
                 "not placed]), \"kernel_unplaced_samples\", \"unseen_samples\" (CPU with the\n"
                 "sampling signal blocked), \"not_sampled_samples\", \"not_running_markers\",\n"
                 "\"tick_hz\" (the recorded machine's tick, 0 unknown), \"tick_bound\"\n"
                 "and \"wait_markers\" (what a\n"
                 "CPU-mode trace writes for TraceEvent's thread-time view where a thread stopped\n"
                 "running, with the stack it waited in: not samples here),\n"
                 "\"tables_pending_samples\" (stacks cut short, rooted at [unwind tables not\n"
                 "ready]), \"threads_dropped\" (refused), \"cpu_rest_ms\" (in no sample),\n"
                 "\"perf_early_samples\", \"cpu_chance_ms\" (before threads' first samples,\n"
                 "the lottery's), \"cpu_lost_ms\" (what the lost samples stood for),\n"
                 "\"names_from_files_traces\",\n"
                 "\"names_from_files_frames\" and \"names_from_files_named\" (traces whose\n"
                 "process ended before its rundown, their frames named from the files of\n"
                 "its modules: by `record`, or here, which says so on stderr), \"top_self\" and\n"
                 "\"top_total\" ([{\"function\", \"self\",\n"
                 "\"self_pct\", \"total\", \"total_pct\"}]), \"per_thread\" and \"processes\"\n"
                 "([{\"process_id\", \"name\", \"samples\"}], one per file).\n"
                 "Works on traces a .NET runtime wrote: managed frames are named from its\n"
                 "method load and rundown events.\n"
                 "Exit status: 0, 1 when the file cannot be read, 2 on a usage error.\n");
}

static int
pp_stat_self_cmp(const void *a, const void *b)
{
    const struct pp_func_stat *x = a, *y = b;

    if (x->self != y->self) {
        return x->self < y->self ? 1 : -1;
    }
    if (x->total != y->total) {
        return x->total < y->total ? 1 : -1;
    }
    return x->name < y->name ? -1 : x->name > y->name;
}

static int
pp_stat_total_cmp(const void *a, const void *b)
{
    const struct pp_func_stat *x = a, *y = b;

    if (x->total != y->total) {
        return x->total < y->total ? 1 : -1;
    }
    return pp_stat_self_cmp(a, b);
}

static double
pp_pct(uint64_t n, uint64_t d)
{
    return d != 0 ? 100.0 * (double)n / (double)d : 0.0;
}

/* Self and total samples per function name. Returns a malloc'd array of name_count, or NULL. */
static struct pp_func_stat *
pp_report_stats(const struct pp_profile *p)
{
    struct pp_func_stat *stats = calloc(p->name_count + 1, sizeof(*stats));
    size_t i, s;

    if (stats == NULL) {
        return NULL;
    }
    for (i = 0; i < p->name_count; i++) {
        stats[i].name = (uint32_t)i;
    }
    for (s = 0; s < p->stack_count; s++) {
        const struct pp_profile_stack *st = &p->stacks[s];

        if (st->depth > 0) {
            stats[st->names[0]].self += st->samples;
        }
        for (i = 0; i < st->depth; i++) {
            struct pp_func_stat *fs = &stats[st->names[i]];

            if (fs->last_stack != s + 1) { /* recursion counts once per stack */
                fs->last_stack = s + 1;
                fs->total += st->samples;
            }
        }
    }
    return stats;
}

/* Samples by what their leaf says of the time: in the kernel (placed under a system call's stack,
 * or not placed), or with the sampling signal blocked (the agent's markers, agent/agent.h); and
 * by their root: stacks cut short where a module's unwind table was still being built. */
struct pp_report_time {
    uint64_t kernel, kernel_unplaced, unseen, not_sampled, tables_pending;
};

static int
pp_name_ends(const char *name, const char *tail)
{
    size_t n = strlen(name), t = strlen(tail);

    return n >= t && strcmp(name + n - t, tail) == 0 && (n == t || name[n - t - 1] == '!');
}

static void
pp_report_time(const struct pp_profile *p, struct pp_report_time *out)
{
    size_t s;

    memset(out, 0, sizeof(*out));
    for (s = 0; s < p->stack_count; s++) {
        const struct pp_profile_stack *st = &p->stacks[s];
        const char *leaf = st->depth > 0 ? p->names[st->names[0]] : "";

        if (st->depth > 0 &&
            pp_name_ends(p->names[st->names[st->depth - 1]], "[unwind tables not ready]")) {
            out->tables_pending += st->samples;
        }
        if (pp_name_ends(leaf, "[kernel]")) {
            out->kernel += st->samples;
        } else if (pp_name_ends(leaf, "[kernel, not placed]")) {
            out->kernel += st->samples;
            out->kernel_unplaced += st->samples;
        } else if (pp_name_ends(leaf, "pipeprof_cpu_while_signal_blocked")) {
            out->unseen += st->samples;
        } else if (pp_name_ends(leaf, "[not sampled]")) {
            out->not_sampled += st->samples;
        }
    }
}

/* The rate asked of a CPU trace that the timer engine alone sampled above the recorded
 * machine's tick (PIPEPROF_CPU_ENGINE=timer): its samples came at the tick, each weighed for the
 * intervals since the last, and carry the tick's bias (docs/architecture.md). 0 otherwise. */
static unsigned
pp_profile_tick_bound(const struct pp_profile *p)
{
    unsigned hz;

    if (p->engine == NULL || strcmp(p->engine, "timer") != 0 || p->tick_hz == 0 ||
        p->sampling_interval_ns == 0) {
        return 0;
    }
    hz = (unsigned)((1000000000u + p->sampling_interval_ns / 2) / p->sampling_interval_ns);
    return hz > p->tick_hz ? hz : 0;
}

/* What the samples say of where the time went that no stack of the host's own shows: kernel
 * time (placed under a system call or not), CPU with the signal blocked, and the not-running
 * markers a CPU-mode trace holds, each line with prefix. */
static void
pp_report_time_lines(const struct pp_profile *p, const struct pp_report_time *tm,
                     const char *prefix, FILE *out)
{
    unsigned hz = pp_profile_tick_bound(p);

    if (hz != 0) {
        fprintf(out,
                "%stick-bound: the timer engine samples at the kernel's tick (%u Hz), below the "
                "%u Hz asked: each sample stands for about %.1f intervals, taken where a tick "
                "found the thread (PIPEPROF_CPU_ENGINE=auto takes perf_event above the tick)\n",
                prefix, p->tick_hz, hz, (double)hz / (double)p->tick_hz);
    }
    if (p->markers != 0) {
        fprintf(out,
                "%snot-running markers: %llu, %llu with the stack the thread waited in "
                "(TraceEvent's thread time counts them; they are no samples here)\n",
                prefix, (unsigned long long)p->markers, (unsigned long long)p->wait_markers);
    }
    if (tm->kernel != 0 || tm->unseen != 0 || tm->not_sampled != 0) {
        fprintf(out,
                "%sCPU in the kernel: %llu samples (%.1f%% of running), %llu of them not placed "
                "under a system call; with the sampling signal blocked: %llu (%.1f%%); not "
                "sampled: %llu (%.1f%%)\n",
                prefix, (unsigned long long)tm->kernel, pp_pct(tm->kernel, p->running_samples),
                (unsigned long long)tm->kernel_unplaced, (unsigned long long)tm->unseen,
                pp_pct(tm->unseen, p->running_samples), (unsigned long long)tm->not_sampled,
                pp_pct(tm->not_sampled, p->running_samples));
    }
    if (p->cpu_rest_ns != 0) {
        fprintf(out,
                "%sCPU in no sample: %.3f ms, what threads burned after their last sample and "
                "their final one did not take (under half an interval a thread)\n",
                prefix, (double)p->cpu_rest_ns / 1e6);
    }
    if (p->cpu_lost_ns != 0) {
        fprintf(out,
                "%sCPU in lost samples: %.3f ms, what the samples the agent dropped (a full "
                "ring) stood for, in no sample (not given to the next)\n",
                prefix, (double)p->cpu_lost_ns / 1e6);
    }
    if (p->perf_early != 0) {
        fprintf(out,
                "%sperf samples early by their thread's CPU clock: %llu, left out (perf's "
                "cpu-clock counts time the hypervisor stole and interrupts' time; their CPU went "
                "to each thread's next sample)\n",
                prefix, (unsigned long long)p->perf_early);
    }
    if (p->cpu_chance_ns != 0) {
        fprintf(out,
                "%sCPU before threads' first samples: %.3f ms, the timers' first-sample "
                "lottery's (no sample is at it; its winners' samples stand for it, in "
                "expectation)\n",
                prefix, (double)p->cpu_chance_ns / 1e6);
    }
    if (tm->tables_pending != 0) {
        fprintf(out,
                "%sstacks cut short while a module's unwind table was being built: %llu samples "
                "(%.1f%%), under [unwind tables not ready]\n",
                prefix, (unsigned long long)tm->tables_pending,
                pp_pct(tm->tables_pending, p->samples));
    }
}

void
pp_report_time_brief(const struct pp_profile *p, const char *prefix, FILE *out)
{
    struct pp_report_time tm;
    const char *sep = prefix;

    pp_report_time(p, &tm);
    if (tm.kernel != 0) {
        fprintf(out, "%sCPU in the kernel %.1f%% of running samples", sep,
                pp_pct(tm.kernel, p->running_samples));
        if (tm.kernel_unplaced != 0) {
            fprintf(out, " (%llu of its %llu not placed)", (unsigned long long)tm.kernel_unplaced,
                    (unsigned long long)tm.kernel);
        }
        sep = "; ";
    }
    if (tm.not_sampled != 0) {
        fprintf(out, "%s[not sampled] %.1f%%", sep, pp_pct(tm.not_sampled, p->running_samples));
        sep = "; ";
    }
    if (tm.unseen != 0) {
        fprintf(out, "%ssignal blocked %.1f%%", sep, pp_pct(tm.unseen, p->running_samples));
        sep = "; ";
    }
    if (tm.tables_pending != 0) {
        fprintf(out, "%s%.1f%% of stacks cut short (unwind tables not ready)", sep,
                pp_pct(tm.tables_pending, p->samples));
        sep = "; ";
    }
    if (p->cpu_rest_ns != 0) {
        fprintf(out, "%s%.1f ms of CPU at the ends of threads in no sample", sep,
                (double)p->cpu_rest_ns / 1e6);
        sep = "; ";
    }
    if (p->cpu_lost_ns != 0) {
        fprintf(out, "%s%.1f ms of CPU in lost samples", sep, (double)p->cpu_lost_ns / 1e6);
        sep = "; ";
    }
    if (p->perf_early != 0) {
        fprintf(out, "%s%llu perf samples left out, early by their thread's CPU clock", sep,
                (unsigned long long)p->perf_early);
        sep = "; ";
    }
    if (p->cpu_chance_ns != 0) {
        fprintf(out, "%s%.1f ms of CPU before threads' first samples (the lottery's)", sep,
                (double)p->cpu_chance_ns / 1e6);
        sep = "; ";
    }
    if (p->samples > p->running_samples) {
        fprintf(out, "%s%llu waiting samples", sep,
                (unsigned long long)(p->samples - p->running_samples));
        sep = "; ";
    }
    if (p->markers != 0) {
        fprintf(out, "%s%llu not-running markers (%llu with a wait stack)", sep,
                (unsigned long long)p->markers, (unsigned long long)p->wait_markers);
        sep = "; ";
    }
    if (sep != prefix) {
        fputc('\n', out);
    }
}

int
pp_report_brief(const struct pp_profile *p, unsigned top, FILE *out)
{
    struct pp_func_stat *stats = pp_report_stats(p);
    struct pp_report_time tm;
    size_t i;

    if (stats == NULL) {
        return -ENOMEM;
    }
    pp_report_time(p, &tm);
    pp_report_time_lines(p, &tm, "pipeprof: ", out);
    if (p->name_count > 1) {
        qsort(stats, p->name_count, sizeof(*stats), pp_stat_self_cmp);
    }
    if (top > p->name_count) {
        top = (unsigned)p->name_count;
    }
    fprintf(out, "top %u functions by self samples:\n%10s %7s %10s %7s  %s\n", top, "self", "self%",
            "total", "total%", "function");
    for (i = 0; i < top; i++) {
        const struct pp_func_stat *fs = &stats[i];

        fprintf(out, "%10llu %6.2f%% %10llu %6.2f%%  %s\n", (unsigned long long)fs->self,
                pp_pct(fs->self, p->samples), (unsigned long long)fs->total,
                pp_pct(fs->total, p->samples), p->names[fs->name]);
    }
    free(stats);
    return 0;
}

int
pp_cmd_report(int argc, char **argv)
{
    static const struct option opts[] = {
        { "top", required_argument, NULL, 'n' },
        { "threads", no_argument, NULL, 't' },
        { "thread", required_argument, NULL, 'T' },
        { "from", required_argument, NULL, 'f' },
        { "to", required_argument, NULL, 'u' },
        { "fold", required_argument, NULL, 'F' },
        { "format", required_argument, NULL, 'o' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct pp_load_filter filter = { 0 };
    struct pp_profile *p = NULL;
    struct pp_func_stat *stats = NULL;
    struct pp_report_time tm;
    unsigned long top = 20;
    int threads = 0, json = 0, c, rc = 1;
    size_t sampled_threads = 0;
    double duration_s;
    char err[512], *end;
    size_t i;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            top = strtoul(optarg, &end, 10);
            if (*end != '\0' || top == 0) {
                fprintf(stderr, "pipeprof report: --top needs a positive number\n");
                return 2;
            }
            break;
        case 't':
            threads = 1;
            break;
        case 'T':
            filter.thread_id = strtoull(optarg, &end, 10);
            if (*end != '\0' || filter.thread_id == 0) {
                fprintf(stderr, "pipeprof report: --thread needs a thread id\n");
                return 2;
            }
            break;
        case 'f':
        case 'u':
            if (c == 'f') {
                filter.start_ms = strtod(optarg, &end);
            } else {
                filter.end_ms = strtod(optarg, &end);
            }
            if (*end != '\0' || (c == 'f' ? filter.start_ms : filter.end_ms) < 0) {
                fprintf(stderr, "pipeprof report: --from/--to need milliseconds >= 0\n");
                return 2;
            }
            break;
        case 'F':
            filter.fold_re = optarg;
            break;
        case 'o':
            if (strcmp(optarg, "json") == 0) {
                json = 1;
            } else if (strcmp(optarg, "text") != 0) {
                fprintf(stderr, "pipeprof report: unknown format '%s' (text, json)\n", optarg);
                return 2;
            }
            break;
        case 'h':
            pp_report_usage(stdout);
            return 0;
        default:
            pp_report_usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        pp_report_usage(stderr);
        return 2;
    }
    if (pp_load_profiles((const char *const *)argv + optind, (size_t)(argc - optind), &filter, &p,
                         err, sizeof(err)) != 0) {
        fprintf(stderr, "pipeprof report: %s\n", err);
        return 1;
    }
    stats = pp_report_stats(p);
    if (stats == NULL) {
        fprintf(stderr, "pipeprof report: out of memory\n");
        goto out;
    }
    duration_s = p->last_ts > p->first_ts
                         ? (double)(p->last_ts - p->first_ts) / (double)p->ticks_per_second
                         : 0.0;
    if (top > p->name_count) {
        top = p->name_count;
    }
    for (i = 0; i < p->thread_count; i++) {
        sampled_threads += p->threads[i].samples != 0;
    }
    pp_report_time(p, &tm);
    if (json) {
        printf("{\"samples\":%llu,\"running_samples\":%llu,\"waiting_samples\":%llu,"
               "\"lost_events\":%llu,\"duration_s\":%.6f,\"busiest_rate_hz\":%.1f,"
               "\"threads\":%zu,\"process_id\":%u,"
               "\"sampling_interval_ns\":%u,\"mode\":\"%s\",\"lost_samples\":%llu,"
               "\"truncated\":%s,\"cpu_engine\":\"%s\",\"kernel_samples\":%llu,"
               "\"kernel_unplaced_samples\":%llu,\"unseen_samples\":%llu,"
               "\"not_sampled_samples\":%llu,\"not_running_markers\":%llu,\"wait_markers\":%llu,"
               "\"tick_hz\":%u,\"tick_bound\":%s,\"tables_pending_samples\":%llu,"
               "\"threads_dropped\":%llu,\"cpu_rest_ms\":%.3f,\"perf_early_samples\":%llu,"
               "\"cpu_chance_ms\":%.3f,\"cpu_lost_ms\":%.3f,\"names_from_files_traces\":%u,"
               "\"names_from_files_frames\":%llu,\"names_from_files_named\":%llu,",
               (unsigned long long)p->samples, (unsigned long long)p->running_samples,
               (unsigned long long)(p->samples - p->running_samples),
               (unsigned long long)p->lost_events, duration_s, pp_profile_busiest_rate(p),
               p->thread_count, p->process_id, p->sampling_interval_ns,
               p->mode != NULL ? p->mode : "cpu", (unsigned long long)p->lost_samples,
               p->truncated ? "true" : "false", p->engine != NULL ? p->engine : "",
               (unsigned long long)tm.kernel, (unsigned long long)tm.kernel_unplaced,
               (unsigned long long)tm.unseen, (unsigned long long)tm.not_sampled,
               (unsigned long long)p->markers, (unsigned long long)p->wait_markers, p->tick_hz,
               pp_profile_tick_bound(p) != 0 ? "true" : "false",
               (unsigned long long)tm.tables_pending, (unsigned long long)p->threads_dropped,
               (double)p->cpu_rest_ns / 1e6, (unsigned long long)p->perf_early,
               (double)p->cpu_chance_ns / 1e6, (double)p->cpu_lost_ns / 1e6, p->names_traces,
               (unsigned long long)p->names_frames, (unsigned long long)p->names_named);
    } else {
        printf("samples: %llu (running %llu, waiting %llu) in %.3f s, %zu threads, pid %u\n",
               (unsigned long long)p->samples, (unsigned long long)p->running_samples,
               (unsigned long long)(p->samples - p->running_samples), duration_s, p->thread_count,
               p->process_id);
        pp_report_time_lines(p, &tm, "", stdout);
        printf("mode: %s%s%s; sampling interval: %u ns%s\n",
               p->mode != NULL ? p->mode : "cpu (no waiting samples)",
               p->engine != NULL ? "; cpu engine: " : "", p->engine != NULL ? p->engine : "",
               p->sampling_interval_ns,
               p->truncated ? "; the trace ends early (its writer died)" : "");
        printf("effective rate: %.1f samples/s per sampled thread, %.1f on the busiest while it "
               "lived; lost samples: %llu; lost events: %llu; named frames: %.1f%%\n",
               duration_s > 0 && sampled_threads > 0
                       ? (double)p->samples / duration_s / (double)sampled_threads
                       : 0.0,
               pp_profile_busiest_rate(p), (unsigned long long)p->lost_samples,
               (unsigned long long)p->lost_events,
               pp_pct(p->resolved_frames, p->resolved_frames + p->unresolved_frames));
        if (p->names_traces == 1) {
            printf("names from files (its process ended before its rundown): %s\n",
                   p->names_note != NULL ? p->names_note : "");
        } else if (p->names_traces > 1) {
            printf("names from files (%u processes ended before their rundown): %llu of %llu "
                   "frames named; the first: %s\n",
                   p->names_traces, (unsigned long long)p->names_named,
                   (unsigned long long)p->names_frames, p->names_note != NULL ? p->names_note : "");
        }
        if (p->threads_dropped != 0) {
            printf("threads refused: %llu (the agent's thread table full or their engine "
                   "failed): not sampled while refused\n",
                   (unsigned long long)p->threads_dropped);
        }
    }
    for (c = 0; c < 2; c++) {
        if (p->name_count > 1) {
            qsort(stats, p->name_count, sizeof(*stats),
                  c == 0 ? pp_stat_self_cmp : pp_stat_total_cmp);
        }
        if (json) {
            printf("%s:[", c == 0 ? "\"top_self\"" : ",\"top_total\"");
        } else {
            printf("\ntop %lu by %s samples:\n%10s %7s %10s %7s  %s\n", top,
                   c == 0 ? "self" : "total", "self", "self%", "total", "total%", "function");
        }
        for (i = 0; i < top; i++) {
            const struct pp_func_stat *fs = &stats[i];

            if (json) {
                printf("%s{\"function\":", i > 0 ? "," : "");
                pp_json_string(stdout, p->names[fs->name]);
                printf(",\"self\":%llu,\"self_pct\":%.2f,\"total\":%llu,\"total_pct\":%.2f}",
                       (unsigned long long)fs->self, pp_pct(fs->self, p->samples),
                       (unsigned long long)fs->total, pp_pct(fs->total, p->samples));
            } else {
                printf("%10llu %6.2f%% %10llu %6.2f%%  %s\n", (unsigned long long)fs->self,
                       pp_pct(fs->self, p->samples), (unsigned long long)fs->total,
                       pp_pct(fs->total, p->samples), p->names[fs->name]);
            }
        }
        if (json) {
            printf("]");
        }
    }
    if (json) {
        printf(",\"per_thread\":[");
    } else if (threads) {
        printf("\nthreads:\n%10s %7s %10s  %s\n", "samples", "share", "running", "thread");
    }
    for (i = 0; i < p->thread_count && (json || threads); i++) {
        const struct pp_profile_thread *t = &p->threads[i];
        char label[320];

        if (json) {
            printf("%s{\"thread_id\":%llu,\"process_id\":%u,", i > 0 ? "," : "",
                   (unsigned long long)pp_profile_tid(t->thread_id),
                   pp_profile_thread_pid(p, t->thread_id));
            if (t->process_instance > 1) {
                printf("\"process_instance\":%u,", (unsigned)t->process_instance);
            }
            printf("\"name\":");
            pp_json_string(stdout, t->name);
            printf(",\"samples\":%llu,\"running_samples\":%llu}", (unsigned long long)t->samples,
                   (unsigned long long)t->running_samples);
        } else {
            printf("%10llu %6.2f%% %10llu  %s\n", (unsigned long long)t->samples,
                   pp_pct(t->samples, p->samples), (unsigned long long)t->running_samples,
                   pp_profile_thread_label(p, t->thread_id, label, sizeof(label)));
        }
    }
    if (json) {
        printf("],\"processes\":[");
    } else if (p->process_count > 1) {
        printf("\nprocesses:\n%10s %7s  %s\n", "samples", "share", "process");
    }
    for (i = 0; i < p->process_count && (json || p->process_count > 1); i++) {
        const struct pp_profile_process *pr = &p->processes[i];
        char label[320];

        if (json) {
            printf("%s{\"process_id\":%u,", i > 0 ? "," : "", pr->process_id);
            if (pr->instance > 1) {
                printf("\"instance\":%u,", (unsigned)pr->instance);
            }
            printf("\"name\":");
            pp_json_string(stdout, pr->name);
            printf(",\"samples\":%llu}", (unsigned long long)pr->samples);
        } else {
            printf("%10llu %6.2f%%  %s\n", (unsigned long long)pr->samples,
                   pp_pct(pr->samples, p->samples),
                   pp_profile_process_label(p, pr->process_id, pr->instance, label, sizeof(label)));
        }
    }
    if (json) {
        printf("]}\n");
    }
    rc = 0;
out:
    free(stats);
    pp_profile_free(p);
    return rc;
}
