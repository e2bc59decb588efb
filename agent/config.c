/* SPDX-License-Identifier: MIT */
/*
 * agent/config.c - PIPEPROF_* environment parsing into struct ag_config, and the agent's log
 * sink. Context: ordinary threads (the shim's constructor, tests). Every invalid value yields
 * -EINVAL and a message naming the variable and what it accepts; nothing is silently clamped.
 */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/agent.h"
#include "agent/internal.h"
#include "common/errmsg.h"

static _Atomic(ag_log_fn) ag_log_hook;
static _Atomic int ag_log_level_cur = AG_LOG_WARN;

void
ag_config_init(struct ag_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->mode = AG_MODE_CPU;
    cfg->hz = 99; /* off the 100 Hz beat of periodic host work */
    cfg->signo = SIGPROF;
    cfg->ring_slots = 256;
    cfg->max_frames = 128;
    cfg->max_threads = 1024;
    cfg->scan_ms = 100;
    cfg->log_level = AG_LOG_WARN;
}

/* Strict unsigned decimal: digits only, no sign, no trailing text, no overflow. */
static int
ag_config_parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    unsigned long v = 0;

    if (*s == '\0') {
        return -EINVAL;
    }
    for (; *s != '\0'; s++) {
        if (!isdigit((unsigned char)*s)) {
            return -EINVAL;
        }
        v = v * 10 + (unsigned long)(*s - '0');
        if (v > max) {
            return -ERANGE;
        }
    }
    *out = v;
    return 0;
}

static int
ag_config_uint(const char *name, unsigned long lo, unsigned long hi, unsigned *out, char *err,
               size_t errlen)
{
    const char *v = getenv(name);
    unsigned long x;

    if (v == NULL) {
        return 0;
    }
    if (ag_config_parse_uint(v, hi, &x) != 0 || x < lo) {
        return pp_errmsg_einval(err, errlen, "%s=%s: expected an integer in %lu..%lu", name, v, lo,
                                hi);
    }
    *out = (unsigned)x;
    return 0;
}

static const struct {
    const char *name;
    int signo;
} ag_config_signals[] = {
    { "PROF", SIGPROF }, { "VTALRM", SIGVTALRM }, { "ALRM", SIGALRM },
    { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 },
};

/* SIGPROF, PROF, 27, RTMIN+3, SIGRTMAX-1. Signals the host relies on are refused. */
static int
ag_config_parse_signal(const char *v, int *out)
{
    const char *s = v;
    unsigned long n;
    size_t i;

    if (strncasecmp(s, "SIG", 3) == 0) {
        s += 3;
    }
    if (isdigit((unsigned char)*s)) {
        if (s != v || ag_config_parse_uint(s, 64, &n) != 0) {
            return -EINVAL;
        }
        *out = (int)n;
    } else if (strncasecmp(s, "RTMIN", 5) == 0 || strncasecmp(s, "RTMAX", 5) == 0) {
        int max = strncasecmp(s, "RTMAX", 5) == 0;
        const char *t = s + 5;
        long off = 0;

        if (*t == '+' || *t == '-') {
            if ((*t == '+') == max || ag_config_parse_uint(t + 1, 64, &n) != 0) {
                return -EINVAL;
            }
            off = *t == '+' ? (long)n : -(long)n;
        } else if (*t != '\0') {
            return -EINVAL;
        }
        *out = (int)((max ? SIGRTMAX : SIGRTMIN) + off);
    } else {
        for (i = 0; i < PP_ARRAY_SIZE(ag_config_signals); i++) {
            if (strcasecmp(s, ag_config_signals[i].name) == 0) {
                *out = ag_config_signals[i].signo;
                return 0;
            }
        }
        return -EINVAL;
    }
    if (*out == SIGPROF || *out == SIGVTALRM || *out == SIGALRM || *out == SIGUSR1 ||
        *out == SIGUSR2 || (*out >= SIGRTMIN && *out <= SIGRTMAX)) {
        return 0;
    }
    return -EINVAL;
}

int
ag_config_from_env(struct ag_config *cfg, char *err, size_t errlen)
{
    const char *v;
    unsigned long x;
    int err2;

    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    v = getenv("PIPEPROF_DISABLE");
    if (v != NULL) {
        if (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0) {
            cfg->disabled = 1;
        } else if (strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0 ||
                   v[0] == '\0') {
            cfg->disabled = 0;
        } else {
            return pp_errmsg_einval(err, errlen, "PIPEPROF_DISABLE=%s: expected 1 or 0", v);
        }
    }
    v = getenv("PIPEPROF_MODE");
    cfg->mode_set |= v != NULL;
    if (v != NULL) {
        if (strcasecmp(v, "cpu") == 0) {
            cfg->mode = AG_MODE_CPU;
        } else if (strcasecmp(v, "wall") == 0) {
            cfg->mode = AG_MODE_WALL;
        } else {
            return pp_errmsg_einval(err, errlen, "PIPEPROF_MODE=%s: expected cpu or wall", v);
        }
    }
    err2 = ag_config_uint("PIPEPROF_HZ", 1, AG_HZ_MAX, &cfg->hz, err, errlen);
    if (err2 != 0) {
        return err2;
    }
    v = getenv("PIPEPROF_SIGNAL");
    if (v != NULL && ag_config_parse_signal(v, &cfg->signo) != 0) {
        return pp_errmsg_einval(err, errlen,
                                "PIPEPROF_SIGNAL=%s: expected PROF, VTALRM, ALRM, USR1, USR2, "
                                "RTMIN+n, RTMAX-n or their number",
                                v);
    }
    v = getenv("PIPEPROF_RING_SLOTS");
    if (v != NULL) {
        if (ag_config_parse_uint(v, 65536, &x) != 0 || x < 16 || (x & (x - 1)) != 0) {
            return pp_errmsg_einval(
                    err, errlen, "PIPEPROF_RING_SLOTS=%s: expected a power of two in 16..65536", v);
        }
        cfg->ring_slots = (unsigned)x;
    }
    err2 = ag_config_uint("PIPEPROF_MAX_FRAMES", 4, AG_MAX_FRAMES, &cfg->max_frames, err, errlen);
    if (err2 == 0) {
        err2 = ag_config_uint("PIPEPROF_MAX_THREADS", 1, AG_MAX_THREADS, &cfg->max_threads, err,
                              errlen);
    }
    if (err2 == 0) {
        err2 = ag_config_uint("PIPEPROF_SCAN_MS", 10, 10000, &cfg->scan_ms, err, errlen);
    }
    if (err2 == 0) {
        err2 = ag_config_uint("PIPEPROF_TEST_CFI_DELAY_MS", 0, 60000, &cfg->test_cfi_delay_ms, err,
                              errlen);
    }
    if (err2 == 0) {
        err2 = ag_config_uint("PIPEPROF_TEST_RING_HOLD_MS", 0, 1000, &cfg->test_ring_hold_ms, err,
                              errlen);
    }
    if (err2 == 0) {
        err2 = ag_config_uint("PIPEPROF_TEST_RING_READ_MS", 0, 10000, &cfg->test_ring_read_ms, err,
                              errlen);
    }
    if (err2 == 0) {
        err2 = ag_config_uint("PIPEPROF_TEST_FIXED_PHASE", 0, 1, &cfg->test_fixed_phase, err,
                              errlen);
    }
    if (err2 != 0) {
        return err2;
    }
    v = getenv("PIPEPROF_CPU_ENGINE");
    if (v != NULL) {
        if (strcasecmp(v, "auto") == 0 || v[0] == '\0') {
            cfg->cpu_engine = AG_CPU_ENGINE_AUTO;
        } else if (strcasecmp(v, "perf") == 0) {
            cfg->cpu_engine = AG_CPU_ENGINE_PERF;
        } else if (strcasecmp(v, "timer") == 0) {
            cfg->cpu_engine = AG_CPU_ENGINE_TIMER;
        } else if (strcasecmp(v, "perf-ring") == 0) {
            cfg->cpu_engine = AG_CPU_ENGINE_PERF_RING;
        } else {
            return pp_errmsg_einval(
                    err, errlen, "PIPEPROF_CPU_ENGINE=%s: expected auto, perf, timer or perf-ring",
                    v);
        }
    }
    v = getenv("PIPEPROF_LOG_LEVEL");
    if (v != NULL) {
        static const char *const names[] = { "error", "warn", "info", "debug" };
        size_t i;

        for (i = 0; i < PP_ARRAY_SIZE(names); i++) {
            if (strcasecmp(v, names[i]) == 0 || (v[0] == (char)('0' + i) && v[1] == '\0')) {
                cfg->log_level = (enum ag_log_level)i;
                break;
            }
        }
        if (i == PP_ARRAY_SIZE(names)) {
            return pp_errmsg_einval(err, errlen,
                                    "PIPEPROF_LOG_LEVEL=%s: expected error, warn, info, debug "
                                    "or 0..3",
                                    v);
        }
    }
    v = getenv("PIPEPROF_CFI_CACHE");
    if (v != NULL) {
        if (strlen(v) >= sizeof(cfg->cfi_cache) || (v[0] != '/' && v[0] != '\0')) {
            return pp_errmsg_einval(err, errlen,
                                    "PIPEPROF_CFI_CACHE=%.64s: expected an absolute directory of "
                                    "at most %zu bytes",
                                    v, sizeof(cfg->cfi_cache) - 1);
        }
        snprintf(cfg->cfi_cache, sizeof(cfg->cfi_cache), "%s", v);
    }
    atomic_store(&ag_log_level_cur, (int)cfg->log_level);
    return 0;
}

void
ag_log_set(ag_log_fn fn)
{
    atomic_store(&ag_log_hook, fn);
}

void
ag_log(enum ag_log_level level, const char *fmt, ...)
{
    ag_log_fn fn = atomic_load(&ag_log_hook);
    char line[512];
    va_list ap;

    if ((int)level > atomic_load(&ag_log_level_cur)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (fn != NULL) {
        fn(level, line);
    } else {
        fprintf(stderr, "pipeprof: %s\n", line);
    }
}
