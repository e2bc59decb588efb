/* SPDX-License-Identifier: MIT */
/*
 * bridge/counters.c - EventCounters (bridge/counters.h). The payload's shape is the runtime's
 * (System.Private.CoreLib's CounterPayload and IncrementingCounterPayload, as a .NET 10 runtime
 * wrote them into tests' reference traces): field order and types matter to TraceEvent's
 * dynamic parser, which hands dotnet-counters a dictionary per event.
 * Context: the IPC loop thread.
 */
#include "bridge/counters.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "nettrace/nettrace.h"

#define BRIDGE_COUNTERS_KEY     "EventCounterIntervalSec"
#define BRIDGE_COUNTERS_MIN_NS  10000000ULL /* the drain's own period: no faster */
#define BRIDGE_EV_COUNTERS_MEAN 7           /* after pipeprof's own event ids (agent-source.c) */
#define BRIDGE_EV_COUNTERS_SUM  8
#define BRIDGE_COUNTERS_PAYLOAD 1024

/* CounterPayload: a gauge, reported as the mean of one observation per interval. */
static const struct nt_field bridge_mean_fields[] = {
    { "Name", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "DisplayName", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Mean", NT_TYPE_DOUBLE, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "StandardDeviation", NT_TYPE_DOUBLE, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Count", NT_TYPE_INT32, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Min", NT_TYPE_DOUBLE, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Max", NT_TYPE_DOUBLE, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "IntervalSec", NT_TYPE_SINGLE, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Series", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "CounterType", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Metadata", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "DisplayUnits", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
};
/* IncrementingCounterPayload: what happened during the interval. */
static const struct nt_field bridge_sum_fields[] = {
    { "Name", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "DisplayName", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "DisplayRateTimeScale", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Increment", NT_TYPE_DOUBLE, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "IntervalSec", NT_TYPE_SINGLE, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Metadata", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "Series", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "CounterType", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
    { "DisplayUnits", NT_TYPE_STRING, NT_TYPE_EMPTY, NULL, 0, 0 },
};
/* EventSource writes `new { Payload = payload }`: one unnamed object holding "Payload", which is
 * what dotnet-counters looks up in the event's first value. */
static const struct nt_field bridge_mean_payload[] = {
    { "Payload", NT_TYPE_OBJECT, NT_TYPE_EMPTY, bridge_mean_fields,
      sizeof(bridge_mean_fields) / sizeof(bridge_mean_fields[0]), 0 },
};
static const struct nt_field bridge_sum_payload[] = {
    { "Payload", NT_TYPE_OBJECT, NT_TYPE_EMPTY, bridge_sum_fields,
      sizeof(bridge_sum_fields) / sizeof(bridge_sum_fields[0]), 0 },
};
static const struct nt_field bridge_mean_event[] = {
    { "", NT_TYPE_OBJECT, NT_TYPE_EMPTY, bridge_mean_payload, 1, 0 },
};
static const struct nt_field bridge_sum_event[] = {
    { "", NT_TYPE_OBJECT, NT_TYPE_EMPTY, bridge_sum_payload, 1, 0 },
};

int
bridge_counters_interval(const char *args, uint64_t *interval_ns)
{
    size_t klen = strlen(BRIDGE_COUNTERS_KEY);
    const char *p = args;

    *interval_ns = 0;
    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ';');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);

        while (len > 0 && isspace((unsigned char)*p)) {
            p++;
            len--;
        }
        if (len > klen && strncmp(p, BRIDGE_COUNTERS_KEY, klen) == 0 && p[klen] == '=') {
            char value[64], *stop;
            double sec;

            if (len - klen - 1 >= sizeof(value)) {
                return -EINVAL;
            }
            memcpy(value, p + klen + 1, len - klen - 1);
            value[len - klen - 1] = '\0';
            sec = strtod(value, &stop);
            while (isspace((unsigned char)*stop)) {
                stop++;
            }
            if (stop == value || *stop != '\0' || !isfinite(sec) || sec < 0 || sec > 86400) {
                return -EINVAL;
            }
            /* 0 turns counters off, as in EventSource; anything else is at least a drain. */
            *interval_ns = sec == 0 ? 0 : (uint64_t)(sec * 1e9);
            if (*interval_ns != 0 && *interval_ns < BRIDGE_COUNTERS_MIN_NS) {
                *interval_ns = BRIDGE_COUNTERS_MIN_NS;
            }
        }
        p = end != NULL ? end + 1 : NULL;
    }
    return 0;
}

static uint64_t
bridge_counters_clock_ns(clockid_t clk)
{
    struct timespec ts;

    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPUs this process may run on: what the runtime's Environment.ProcessorCount counts. */
static unsigned
bridge_counters_cpus(void)
{
    cpu_set_t set;
    long n;

    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
        return (unsigned)CPU_COUNT(&set);
    }
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

/* Reads a small /proc file into buf. Returns the length, or 0. */
static size_t
bridge_counters_read(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0) {
        return 0;
    }
    n = read(fd, buf, cap - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    return (size_t)n;
}

/* Resident set size in bytes (/proc/self/statm), as Environment.WorkingSet. */
static double
bridge_counters_rss(void)
{
    char buf[256];
    unsigned long long size, resident;

    if (bridge_counters_read("/proc/self/statm", buf, sizeof(buf)) == 0 ||
        sscanf(buf, "%llu %llu", &size, &resident) != 2) {
        return 0;
    }
    return (double)resident * (double)sysconf(_SC_PAGESIZE);
}

/*
 * The process's threads, and the CPU time (ns) of the agent's own: the threads named
 * pipeprof-* in /proc/self/task (the manager, the wall sampler, the IPC loop).
 */
static void
bridge_counters_threads(unsigned *threads, uint64_t *agent_cpu_ns)
{
    long tick = sysconf(_SC_CLK_TCK);
    struct dirent *de;
    DIR *d = opendir("/proc/self/task");

    *threads = 0;
    *agent_cpu_ns = 0;
    if (d == NULL) {
        return;
    }
    while ((de = readdir(d)) != NULL) {
        char path[600], buf[512];
        const char *comm, *after;
        unsigned long long utime, stime;

        if (de->d_name[0] < '0' || de->d_name[0] > '9') {
            continue;
        }
        (*threads)++;
        /* The thread's own entry: one under /proc/self/task stays and costs whoever reaps this
         * process (docs/architecture.md, "Resources"). */
        snprintf(path, sizeof(path), "/proc/%s/task/%s/stat", de->d_name, de->d_name);
        if (bridge_counters_read(path, buf, sizeof(buf)) == 0 ||
            (comm = strchr(buf, '(')) == NULL || (after = strrchr(buf, ')')) == NULL ||
            strncmp(comm + 1, "pipeprof", 8) != 0) {
            continue;
        }
        /* After ')': state is field 3; utime and stime are fields 14 and 15. */
        if (sscanf(after + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                   &stime) == 2 &&
            tick > 0) {
            *agent_cpu_ns += (utime + stime) * (1000000000ULL / (uint64_t)tick);
        }
    }
    closedir(d);
}

struct bridge_counter_out {
    struct nt_writer *w;
    const char *provider;
    uint64_t capture_tid, stamp_ns; /* the events' time */
    float interval_sec;
    char series[32];
};

static int
bridge_counters_write(const struct bridge_counter_out *o, int sum, const struct nt_payload *p)
{
    struct nt_event_desc desc;
    struct nt_event ev;
    uint32_t meta;
    int err;

    if (p->err != 0) {
        return p->err;
    }
    memset(&desc, 0, sizeof(desc));
    desc.provider = o->provider;
    desc.event_id = sum ? BRIDGE_EV_COUNTERS_SUM : BRIDGE_EV_COUNTERS_MEAN;
    desc.name = "EventCounters";
    desc.fields = sum ? bridge_sum_event : bridge_mean_event;
    desc.field_count = 1;
    err = nt_writer_define(o->w, &desc, &meta);
    if (err != 0) {
        return err;
    }
    memset(&ev, 0, sizeof(ev));
    ev.metadata_id = meta;
    ev.thread_id = BRIDGE_NO_THREAD;
    ev.capture_thread_id = o->capture_tid;
    ev.processor = 0xFFFFFFFFu;
    ev.timestamp = o->stamp_ns;
    ev.payload = p->buf;
    ev.payload_size = (uint32_t)p->len;
    return nt_writer_write(o->w, &ev);
}

/* A gauge: one observation, so Mean = Min = Max and Count 1, as the runtime's polling counters. */
static int
bridge_counters_mean(const struct bridge_counter_out *o, const char *name, const char *display,
                     double value, const char *units)
{
    uint8_t buf[BRIDGE_COUNTERS_PAYLOAD];
    struct nt_payload p;

    nt_payload_init(&p, buf, sizeof(buf));
    nt_payload_string(&p, name);
    nt_payload_string(&p, display);
    nt_payload_f64(&p, value);
    nt_payload_f64(&p, 0);
    nt_payload_u32(&p, 1);
    nt_payload_f64(&p, value);
    nt_payload_f64(&p, value);
    nt_payload_f32(&p, o->interval_sec);
    nt_payload_string(&p, o->series);
    nt_payload_string(&p, "Mean");
    nt_payload_string(&p, "");
    nt_payload_string(&p, units);
    return bridge_counters_write(o, 0, &p);
}

static int
bridge_counters_sum(const struct bridge_counter_out *o, const char *name, const char *display,
                    double increment, const char *units)
{
    uint8_t buf[BRIDGE_COUNTERS_PAYLOAD];
    struct nt_payload p;

    nt_payload_init(&p, buf, sizeof(buf));
    nt_payload_string(&p, name);
    nt_payload_string(&p, display);
    nt_payload_string(&p, "00:00:01"); /* shown per second */
    nt_payload_f64(&p, increment);
    nt_payload_f32(&p, o->interval_sec);
    nt_payload_string(&p, "");
    nt_payload_string(&p, o->series);
    nt_payload_string(&p, "Sum");
    nt_payload_string(&p, units);
    return bridge_counters_write(o, 1, &p);
}

int
bridge_counters_start(struct bridge_counters *c, const struct ipc_session_config *cfg,
                      uint64_t now_ns, const char **why)
{
    struct ag_stats st;
    uint32_t i;

    memset(c, 0, sizeof(*c));
    *why = NULL;
    for (i = 0; i < cfg->provider_count; i++) {
        const struct ipc_provider *pr = &cfg->providers[i];
        /* In a .NET host the runtime writes its own System.Runtime counters into the merged
         * session; the agent's would be a second, different set. */
        int runtime = strcmp(pr->name, BRIDGE_COUNTERS_RUNTIME) == 0 && !cfg->runtime_merged;
        int own = strcmp(pr->name, BRIDGE_COUNTERS_PIPEPROF) == 0;
        uint64_t ns;

        if (!runtime && !own) {
            continue;
        }
        if (bridge_counters_interval(pr->args, &ns) != 0) {
            *why = "EventCounterIntervalSec is not a number of seconds from 0 to 86400";
            memset(c, 0, sizeof(*c));
            return -EINVAL;
        }
        if (ns == 0) {
            continue;
        }
        /* One interval per session: the shortest any of its providers asked for. */
        if (c->interval_ns == 0 || ns < c->interval_ns) {
            c->interval_ns = ns;
        }
        c->runtime |= runtime;
        c->pipeprof |= own;
    }
    if (c->interval_ns != 0) {
        unsigned threads;

        c->last_ns = now_ns;
        c->last_cpu_ns = bridge_counters_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        bridge_counters_threads(&threads, &c->last_agent_cpu_ns);
        ag_stats_get(&st);
        c->last_samples = st.samples;
        c->last_lost = st.lost;
    }
    return 0;
}

int
bridge_counters_drain(struct bridge_counters *c, struct nt_writer *w, uint64_t capture_tid,
                      uint64_t now_ns, uint64_t stamp_ns)
{
    struct bridge_counter_out o;
    struct ag_stats st;
    uint64_t cpu_ns, agent_cpu_ns, elapsed;
    double all_cpus_ns;
    unsigned threads;
    int err = 0;

    if (c->interval_ns == 0 || now_ns < c->last_ns + c->interval_ns) {
        return 0;
    }
    elapsed = now_ns - c->last_ns;
    all_cpus_ns = (double)elapsed * (double)bridge_counters_cpus();
    cpu_ns = bridge_counters_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    bridge_counters_threads(&threads, &agent_cpu_ns);
    ag_stats_get(&st);
    memset(&o, 0, sizeof(o));
    o.w = w;
    o.capture_tid = capture_tid;
    o.stamp_ns = stamp_ns < now_ns ? stamp_ns : now_ns;
    o.interval_sec = (float)((double)elapsed / 1e9);
    snprintf(o.series, sizeof(o.series), "Interval=%llu",
             (unsigned long long)(c->interval_ns / 1000000u));
    if (c->runtime) {
        /* The runtime's definitions: CPU time over all CPUs of the process, in percent, and
         * the working set in MB of 10^6 bytes. */
        o.provider = BRIDGE_COUNTERS_RUNTIME;
        err = bridge_counters_mean(&o, "cpu-usage", "CPU Usage",
                                   100.0 * (double)(cpu_ns - c->last_cpu_ns) / all_cpus_ns, "%");
        if (err == 0) {
            err = bridge_counters_mean(&o, "working-set", "Working Set",
                                       bridge_counters_rss() / 1e6, "MB");
        }
    }
    if (c->pipeprof && err == 0) {
        o.provider = BRIDGE_COUNTERS_PIPEPROF;
        err = bridge_counters_sum(&o, "samples", "Samples taken",
                                  (double)(st.samples - c->last_samples), "");
        if (err == 0) {
            err = bridge_counters_sum(&o, "lost-samples", "Samples lost (full rings)",
                                      (double)(st.lost - c->last_lost), "");
        }
        if (err == 0) {
            err = bridge_counters_mean(&o, "thread-count", "Threads", (double)threads, "");
        }
        if (err == 0) {
            err = bridge_counters_mean(
                    &o, "agent-cpu-usage", "Agent CPU Usage",
                    100.0 * (double)(agent_cpu_ns - c->last_agent_cpu_ns) / all_cpus_ns, "%");
        }
        if (err == 0) {
            err = bridge_counters_mean(&o, "agent-memory", "Agent Memory (mapped)",
                                       (double)st.memory_bytes / 1e6, "MB");
        }
    }
    c->last_ns = now_ns;
    c->last_cpu_ns = cpu_ns;
    c->last_agent_cpu_ns = agent_cpu_ns;
    c->last_samples = st.samples;
    c->last_lost = st.lost;
    return err;
}
