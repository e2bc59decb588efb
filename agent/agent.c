/* SPDX-License-Identifier: MIT */
/*
 * agent/agent.c - the agent's lifecycle (ag_start/ag_stop), the refcounted sampling requests,
 * the statistics, and the manager thread that rescans threads, keeps the CPU timers in line
 * with the requested rate and refreshes the module list. Context: ordinary threads; ag.life_lock
 * serialises start, stop, acquire and release. Must not be called from a signal handler.
 */
#include "agent/agent.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "agent/internal.h"
#include "agent/symbols-internal.h"

static void
ag_wake_all(void)
{
    pthread_mutex_lock(&ag.wake_lock);
    ag.wake_seq++;
    pthread_cond_broadcast(&ag.wake_cond);
    pthread_mutex_unlock(&ag.wake_lock);
    ag_manager_wake();
}

/* Sleeps up to ms, until a wake (ag_wake_all, or a handler that met unknown code); returns
 * whether the agent stops. */
static int
ag_manager_sleep(unsigned ms)
{
    struct timespec ts = { (time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L };

    /* A stop sets stopping before it wakes: either it is seen here or the word is 1, and the
     * wait returns at once (the kernel compares it with 0 as it begins). */
    if (!atomic_load(&ag.stopping) && atomic_load(&ag.manager_word) == 0) {
        (void)syscall(SYS_futex, &ag.manager_word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
    }
    atomic_store(&ag.manager_word, 0);
    return atomic_load(&ag.stopping);
}

/*
 * Every scan_ms: the thread scan, the engines, the module list and new modules' CFI tables. In
 * between, a wake looks at the modules only: a handler whose walk met code outside every known
 * module wakes it at once, so a library just loaded with dlopen unwinds by its CFI within a
 * moment rather than at the next scan or drain (python3's extension modules, built without frame
 * pointers, lost 1-2 % of their stacks at 1000 Hz with 50 ms between drains). Code no new module
 * explains (JIT code) holds the flag for AG_NEW_CODE_HOLD_NS before it may wake the manager again:
 * at most 20 such wakes a second, and a library loaded after a false alarm waits that long.
 */
#define AG_NEW_CODE_HOLD_NS (50u * 1000000u)

/* How long into a session the manager maps libelf (ag_manager_main). */
#define AG_ELF_EARLY_NS (50u * 1000000u)

static void *
ag_manager_main(void *arg)
{
    /* ag_start() scanned the threads just now. The CFI tables are built at once, not deferred
     * to the first sample: every sample taken before them unwinds by frame pointers alone, and
     * python3's first 25 ms at 1000 Hz (2.3 % of its samples) then ended short of the thread's
     * entry (agent-stacks). A short child under `record` pays the build (about 2 ms of CPU). */
    uint64_t next_scan = ag_now_ns() + (uint64_t)ag.cfg.scan_ms * 1000000u, hold_until = 0, now,
             until;
    /* (tests: the window of stacks cut while a table is pending, made long on purpose) */
    uint64_t cfi_from = ag_now_ns() + (uint64_t)ag.cfg.test_cfi_delay_ms * 1000000u;

    if (arg != NULL) {
        next_scan = 0; /* started late (ag_manager_start_due): the scan is due now */
    }
    ag_thread_exclude_self();
    pthread_setname_np(pthread_self(), "pipeprof-mgr");
    /* libelf and its libz are mapped early in the session, while the host's libraries are all
     * still loaded, not at the first symbol, which is mostly the session's end: there the host
     * may have unloaded some (the dotnet muxer dlcloses libhostfxr.so before it exits), and libz
     * mapped into the freed range took the names of that library's frames (libz.so!inflate for
     * hostfxr_main_startupinfo in every .NET recording from the start). A module list holds a
     * live library before a gone one at the same address (modules.c). Not at once: a short
     * child under `record` (wall mode starts at once) ends first and mostly maps no symbols. */
    uint64_t elf_from = ag_now_ns() + AG_ELF_EARLY_NS;
    int elf_ready = 0;
    do {
        int err, changed = 0, asked = 0;

        if (ag_now_ns() >= next_scan) {
            ag_threads_scan();
            pthread_mutex_lock(&ag.reg_lock);
            ag_timers_update_locked();
            pthread_mutex_unlock(&ag.reg_lock);
            next_scan = ag_now_ns() + (uint64_t)ag.cfg.scan_ms * 1000000u;
            atomic_fetch_add_explicit(&ag.manager_scans, 1, memory_order_relaxed);
        }
        if (atomic_exchange_explicit(&ag.kern_asked, 0, memory_order_acquire)) {
            pthread_mutex_lock(&ag.reg_lock);
            ag_locators_arm_asked_locked();
            pthread_mutex_unlock(&ag.reg_lock);
        }
        if (atomic_exchange_explicit(&ag.lottery_asked, 0, memory_order_acquire)) {
            pthread_mutex_lock(&ag.reg_lock);
            ag_lottery_rearm_locked(); /* the timers of threads whose draw won, at the interval */
            pthread_mutex_unlock(&ag.reg_lock);
        }
        if (!elf_ready && ag_now_ns() >= elf_from) {
            ag_symtab_prepare();
            elf_ready = 1;
        }
        /* The unknown code flag is taken before the refresh looks, not cleared after it: a walk
         * that meets a library loaded after the refresh looked flags it again, and its handler
         * wakes us again. Cleared after the refresh (when it or a scan changed something), it
         * dropped a flag raised in between: the library waited for the next scan (test-agent-
         * sampling's new-code case in an ASan CI run: its one walk came while the manager built
         * libelf's table, loaded that pass). While a false alarm holds it, it stays 2 (the last
         * hold's own 2 is dropped when the hold ends). */
        if (hold_until == 0 || ag_now_ns() >= hold_until) {
            asked = atomic_exchange_explicit(&ag_sig_unknown_code, 0, memory_order_acq_rel);
            asked = hold_until != 0 ? 0 : asked;
            hold_until = 0;
        }
        err = ag_modules_refresh_deferred(); /* cheap unless dlopen/dlclose changed it */
        if (err >= 0) {
            changed = err > 0;
            if (ag_now_ns() >= cfi_from) {
                err = ag_modules_build_cfi(&ag.stopping); /* the new modules' tables */
            }
        }
        if (err < 0) {
            ag_log(AG_LOG_DEBUG, "modules: refresh: %s", strerror(-err));
        }
        now = ag_now_ns();
        if (asked == 2 && !changed) {
            /* A wake that found no new module (JIT code): held, then let go. A library loaded
             * since the refresh, whose flag this overwrites, waits for the hold's end. */
            atomic_store_explicit(&ag_sig_unknown_code, 2, memory_order_relaxed);
            hold_until = now + AG_NEW_CODE_HOLD_NS;
        }
        until = hold_until != 0 && hold_until < next_scan ? hold_until : next_scan;
        if (ag_cpu_engine_for_rate(ag.cfg.cpu_engine,
                                   atomic_load_explicit(&ag.hz_cpu, memory_order_relaxed),
                                   ag.tick_hz) == AG_CPU_ENGINE_PERF_RING &&
            atomic_load_explicit(&ag.hz_cpu, memory_order_relaxed) != 0) {
            /* The perf rings are read when half of what they hold at the rate may have been
             * written since the last read, whatever the scan's rate (perf-ring.c: 38 ms at
             * 100 Hz, 15 at 250); a new rate's rings are due by their own period, and their
             * open wakes the manager to see it. */
            uint64_t due =
                    ag.ring_read_ns +
                    ag_pring_read_period_ns(atomic_load_explicit(&ag.hz_cpu, memory_order_relaxed));

            if (now >= due) {
                ag_pring_read_all();
                now = ag_now_ns();
                ag.ring_read_ns = now;
                due = now + ag_pring_read_period_ns(
                                    atomic_load_explicit(&ag.hz_cpu, memory_order_relaxed));
            }
            until = due < until ? due : until;
        }
    } while (!ag_manager_sleep(until > now ? (unsigned)((until - now + 999999) / 1000000) : 0));
    return NULL;
}

/* Probes process_vm_readv on ourselves: seccomp or an LSM may forbid it. */
static int
ag_remote_read_probe(void)
{
    volatile uint64_t word = 0x1122334455667788u;
    uint64_t got = 0;
    struct iovec l = { &got, 8 }, r = { (void *)&word, 8 };

    /* (not tried under an inherited seccomp filter: host/host.c) */
    return !host_filter_refuses(SYS_process_vm_readv) &&
           syscall(SYS_process_vm_readv, (long)getpid(), &l, 1L, &r, 1L, 0L) == 8 && got == word;
}

/*
 * A thread created while another thread of the process is in execve() fails with EAGAIN (the
 * kernel's copy_fs during an exec, also for an exec that fails): a late start that met one
 * said "the manager thread did not start (Resource temporarily unavailable)" on the host's
 * stderr where bare says nothing (tests/hosts/forkchild.c, execloop). It is due again 10 ms on,
 * at the next drain's look, for up to 1 s from its first EAGAIN; then it is said. life_lock.
 */
#define AG_MANAGER_AGAIN_NS       1000000000ull
#define AG_MANAGER_AGAIN_PAUSE_NS 10000000ull
static uint64_t ag_manager_again_since;

/* The forking thread's: whether ag_agent_before_fork() took the module lock */
static __thread int ag_fork_took_modules AG_TLS;

static void
ag_agent_forked_child(void)
{
    pthread_mutex_init(&ag_modules_mutex, NULL); /* taken by ag_agent_before_fork(), or left */
    atomic_store_explicit(&ag_modules_in_loader, 0, memory_order_relaxed); /* no holder here */
    if (!ag_fork_took_modules) {
        ag_modules_forked_child_untrusted();
    }
    ag_threads_forked_child();
    ag_timers_forked_child();
    ag_wall_forked_child();
    /* Only the forking thread exists here, timers are not inherited, and the agent's threads
     * are gone: the agent is off (its handler stays, as after a stop). Locks held by vanished
     * threads are reinitialised. */
    atomic_store(&ag.running, 0);
    atomic_store(&ag.hz_cpu, 0);
    atomic_store(&ag.hz_wall, 0);
    atomic_store(&ag.inflight, 0);
    pthread_mutex_init(&ag.life_lock, NULL);
    pthread_mutex_init(&ag.reg_lock, NULL);
    pthread_mutex_init(&ag.drain_lock, NULL);
    pthread_mutex_init(&ag.wake_lock, NULL);
    ag.threads = NULL; /* the parent's registry stays mapped in the child but unused */
    atomic_store(&ag.manager_word, 0);
    ag.manager_started = 0;
    atomic_store(&ag.manager_due_ns, 0);
    ag.wall_started = 0;
    ag_manager_again_since = 0; /* the parent's tries */
}

/*
 * fork() while another thread holds the module lock (the manager builds CFI tables under it, the
 * IPC thread loads symbol tables) gave the child a lock nobody owns and a module list caught in
 * the middle of a change: a forked worker that then started an agent of its own waited forever
 * in ag_start(), and its exit() after it. The forking thread takes the lock around the fork, so
 * the child gets the list whole and the lock free (a fork waits for the build of one table).
 * Except when the holder is in a loader call that cannot return before the forking thread's own
 * does (host_loader_fork_stuck: the host forks in its dl_iterate_phdr's callback while the
 * manager's refresh waits for glibc's list lock): waiting for it never ended. The fork then goes
 * ahead without the lock, and the child drops what it guarded (ag_modules_forked_child_untrusted).
 */
static void
ag_agent_before_fork(void)
{
    ag_fork_took_modules = 1;
    while (pthread_mutex_trylock(&ag_modules_mutex) != 0) {
        if (atomic_load_explicit(&ag_modules_in_loader, memory_order_relaxed) != 0 &&
            host_loader_fork_stuck()) {
            ag_fork_took_modules = 0;
            return;
        }
        host_loader_fork_pause();
    }
    /* Marked: this thread goes on to wait for the loader lock (host/dl.c's prepare, next), whose
     * holder may wait for another thread's walk, whose callback forks too: that fork's prepare
     * leaves the module lock to this one then (both hung before). */
    atomic_fetch_add_explicit(&ag_modules_in_loader, 1, memory_order_relaxed);
}

static void
ag_agent_after_fork_parent(void)
{
    if (ag_fork_took_modules) {
        atomic_fetch_sub_explicit(&ag_modules_in_loader, 1, memory_order_relaxed);
        pthread_mutex_unlock(&ag_modules_mutex);
    }
}

/* The fd gate's handlers first (host/fds.c: the child's mark lock free before this file's child
 * handler closes scan files), then the loader lock's (host/dl.c): prepare handlers run in the
 * reverse order of registration, so the forking thread takes the module lock, then the loader
 * lock, as the manager does (its walks of the loader's list run under the module lock). */
static void
ag_agent_atfork_register(void)
{
    host_fds_atfork_register(NULL); /* the shim's, when the shim came first */
    host_loader_atfork_register();
    pthread_atfork(ag_agent_before_fork, ag_agent_after_fork_parent, ag_agent_forked_child);
}

/*
 * The one teardown of a run, for ag_stop() and for an ag_start() that fails once sampling could
 * begin: sampling off (the signal's handler stays, and drops the agent's late instances: host.h)
 * and the registry's timers and rings freed. The agent's threads are gone already. life_lock
 * held.
 */
static void
ag_teardown_locked(void)
{
    atomic_store(&ag.running, 0);
    /* A handler that saw running == 1 may still be writing into a ring. */
    while (atomic_load(&ag.inflight) != 0) {
        sched_yield();
    }
    /* A drain on another thread may be reading the rings. */
    pthread_mutex_lock(&ag.drain_lock);
    ag_threads_stop();
    pthread_mutex_unlock(&ag.drain_lock);
}

/* Starts the manager thread (late: after ag_start(), its scan due at once). On failure at the
 * start the agent is torn down; a late one leaves the agent sampling the threads it knows, with
 * one line in the log (a session may be streaming). life_lock held. */
static int
ag_manager_spawn_locked(int late)
{
    static char late_mark;
    uint64_t now;
    int err;

    atomic_store(&ag.manager_due_ns, 0);
    err = ag_thread_spawn(&ag.manager, ag_manager_main, late ? &late_mark : NULL);
    if (err == -EAGAIN && late) {
        now = ag_now_ns();
        if (ag_manager_again_since == 0) {
            ag_manager_again_since = now;
        }
        if (now - ag_manager_again_since < AG_MANAGER_AGAIN_NS) {
            atomic_store(&ag.manager_due_ns, now + AG_MANAGER_AGAIN_PAUSE_NS);
            return err;
        }
    }
    ag_manager_again_since = 0;
    if (err != 0 && late) {
        ag_log(AG_LOG_ERROR, "the manager thread did not start (%s): no thread scans",
               strerror(-err));
    } else if (err != 0) {
        ag_teardown_locked();
    } else {
        ag.manager_started = 1;
    }
    return err;
}

void
ag_manager_start_due(void)
{
    uint64_t due = atomic_load_explicit(&ag.manager_due_ns, memory_order_relaxed);

    if (due == 0 || (ag_now_ns() < due && !atomic_load(&ag.kern_asked) &&
                     atomic_load_explicit(&ag_sig_unknown_code, memory_order_relaxed) == 0)) {
        return;
    }
    /* Never waits: a start or a stop holds the lock, and the next drain looks again. */
    if (pthread_mutex_trylock(&ag.life_lock) != 0) {
        return;
    }
    if (atomic_load(&ag.running) && !atomic_load(&ag.stopping) && !ag.manager_started &&
        atomic_load(&ag.manager_due_ns) != 0) {
        (void)ag_manager_spawn_locked(1);
    }
    pthread_mutex_unlock(&ag.life_lock);
}

void
ag_fork_handlers_register_again(void)
{
    pthread_atfork(ag_agent_before_fork, ag_agent_after_fork_parent, ag_agent_forked_child);
}

void
ag_fork_handlers_register(void)
{
    static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

    pthread_once(&atfork_once, ag_agent_atfork_register);
}

int
ag_start(const struct ag_config *cfg)
{
    pthread_condattr_t ca;
    int err = 0, remote_read_ok, pending;

    ag_fork_handlers_register();
    ag_interpose_init();
    pthread_mutex_lock(&ag.life_lock);
    if (atomic_load(&ag.running) || cfg->disabled) {
        goto out;
    }
    /* Interposers on host threads read ag.cfg without a lock, also across a stop and a start:
     * a restart with the same settings leaves it untouched. */
    if (memcmp(&ag.cfg, cfg, sizeof(*cfg)) != 0) {
        ag.cfg = *cfg;
    }
    if (ag.cfg.max_frames == 0 || ag.cfg.max_frames > AG_MAX_FRAMES || ag.cfg.max_threads == 0 ||
        ag.cfg.max_threads > AG_MAX_THREADS || ag.cfg.ring_slots < 2 ||
        (ag.cfg.ring_slots & (ag.cfg.ring_slots - 1)) != 0 || ag.cfg.scan_ms == 0) {
        err = -EINVAL;
        goto out;
    }
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ag.wake_cond, &ca);
    pthread_condattr_destroy(&ca);
    /* Written only when they change (a forked child's first start): a stale interposer's walk
     * reads both without a lock. */
    if (ag.pid != getpid()) {
        ag.pid = getpid();
    }
    remote_read_ok = ag_remote_read_probe();
    if (ag.remote_read_ok != remote_read_ok) {
        ag.remote_read_ok = remote_read_ok;
    }
    atomic_store(&ag.stopping, 0);
    atomic_fetch_add(&ag.gen, 1);
    ag.req_n = 0;
    atomic_store(&ag.hz_cpu, 0);
    atomic_store(&ag.hz_wall, 0);
    atomic_store(&ag.n_samples, 0);
    atomic_store(&ag.n_cpu, 0);
    atomic_store(&ag.n_wall, 0);
    atomic_store(&ag.n_waiting, 0);
    atomic_store(&ag.n_lost, 0);
    atomic_store(&ag.n_overruns, 0);
    atomic_store(&ag.n_threads, 0);
    atomic_store(&ag.n_threads_dropped, 0);
    ag_thread_dropped_reset();
    atomic_store(&ag.n_eintr_seen, 0);
    atomic_store(&ag.n_eintr_absorbed, 0);
    atomic_store(&ag.n_offstack, 0);
    atomic_store(&ag.n_cfi_steps, 0);
    atomic_store(&ag.cpu_sampled_ns, 0);
    atomic_store(&ag.cpu_sampled_n, 0);
    atomic_store(&ag.n_cpu_weight, 0);
    atomic_store(&ag.n_perf_refused, 0);
    atomic_store(&ag.n_perf_promoted, 0);
    atomic_store(&ag.n_locators_retired, 0);
    atomic_store(&ag.n_ring_fallbacks, 0);
    atomic_store(&ag.n_ring_deep, 0);
    atomic_store(&ag.n_ring_lost, 0);
    atomic_store(&ag.n_perf_early, 0);
    atomic_store(&ag.manager_scans, 0);
    ag.ring_read_ns = 0;
    atomic_store(&ag.n_cpu_tails, 0);
    atomic_store(&ag.n_not_sampled_alone, 0);
    atomic_store(&ag.n_not_sampled_held, 0);
    atomic_store(&ag.drain_held_from, UINT64_MAX);
    atomic_store(&ag.cpu_unseen_ns, 0);
    atomic_store(&ag.cpu_rest_ns, 0);
    atomic_store(&ag.cpu_chance_ns, 0);
    atomic_store(&ag.cpu_lost_ns, 0);
    atomic_store(&ag.n_not_code, 0);
    atomic_store(&ag.n_tables_pending, 0);
    atomic_store(&ag.n_wall_unsampled, 0);
    atomic_store(&ag.n_wall_held, 0);
    ag.perf_unavailable = 0;
    ag.tick_hz = ag_kernel_tick_hz();
    atomic_store(&ag.wall_passes, 0);
    atomic_store(&ag.wall_active_ns, 0);
    atomic_store(&ag.wall_first_ns, 0);
    atomic_store(&ag.wall_last_ns, 0);
    /* The module list before the first sample; their CFI tables are built by the manager
     * thread, which starts below, so that a short-lived process does not wait for them. */
    ag_modules_set_cfi_cache(ag.cfg.cfi_cache);
    err = ag_modules_refresh_deferred();
    if (err < 0) {
        ag_log(AG_LOG_WARN, "modules: %s; unwinding uses frame pointers only", strerror(-err));
    }
    err = ag_threads_start();
    if (err != 0) {
        goto out;
    }
    err = ag_signal_install(cfg->signo);
    if (err != 0) {
        ag_log(AG_LOG_ERROR, "signal %d cannot be installed (%s); not sampling", cfg->signo,
               strerror(-err));
        ag_threads_stop();
        goto out;
    }
    /* Before running: a handler reads it once sampling can start. -1: no early wakes. */
    atomic_store(&ag_sig_unknown_code, 0);
    atomic_store(&ag.manager_word, 0);
    atomic_store(&ag.running, 1);
    ag_thread_attach_self(); /* the caller, with exact stack bounds */
    ag_threads_scan();
    /* Every table in the recording's cache (a `record` child whose libraries an earlier process
     * of the tree built): mapped here, and the manager, which has nothing to do before its first
     * scan, starts when that is due (ag_manager_start_due). Otherwise it starts now to build. */
    pending = ag_modules_map_cached_cfi();
    if (pending == 0) {
        atomic_store(&ag.manager_due_ns, ag_now_ns() + (uint64_t)ag.cfg.scan_ms * 1000000u);
        goto out;
    }
    err = ag_manager_spawn_locked(0);
out:
    pthread_mutex_unlock(&ag.life_lock);
    return err;
}

void
ag_stop(void)
{
    pthread_mutex_lock(&ag.life_lock);
    if (!atomic_load(&ag.running)) {
        pthread_mutex_unlock(&ag.life_lock);
        return;
    }
    atomic_store(&ag.hz_cpu, 0);
    atomic_store(&ag.hz_wall, 0);
    atomic_store(&ag.stopping, 1);
    atomic_store(&ag.manager_due_ns, 0); /* a manager never started stays so */
    ag_cpu_origin_clear();
    ag_wake_all();
    if (ag.manager_started) {
        pthread_join(ag.manager, NULL);
        ag.manager_started = 0;
    }
    ag_wall_stop();
    pthread_mutex_lock(&ag.reg_lock);
    ag_timers_update_locked(); /* hz 0: deletes every timer */
    pthread_mutex_unlock(&ag.reg_lock);
    ag_teardown_locked();
    ag_wall_files_close();
    pthread_cond_destroy(&ag.wake_cond);
    ag.req_n = 0;
    pthread_mutex_unlock(&ag.life_lock);
}

/* Recomputes the per-mode rates from the requests and applies them. life_lock held. */
static int
ag_sampling_apply_locked(void)
{
    unsigned cpu = 0, wall = 0, i;
    int err = 0;

    for (i = 0; i < ag.req_n; i++) {
        unsigned *hz = ag.req[i].mode == AG_MODE_CPU ? &cpu : &wall;

        if (ag.req[i].hz > *hz) {
            *hz = ag.req[i].hz;
        }
    }
    atomic_store(&ag.hz_cpu, cpu);
    if (wall != 0 && atomic_load(&ag.hz_wall) == 0) {
        atomic_store(&ag.wall_start_ns, ag_now_ns());
        atomic_store(&ag.wall_first_ns, 0);
        atomic_store(&ag.wall_last_ns, 0);
        atomic_store(&ag.wall_passes, 0);
    }
    atomic_store(&ag.hz_wall, wall);
    pthread_mutex_lock(&ag.reg_lock);
    ag_timers_update_locked();
    pthread_mutex_unlock(&ag.reg_lock);
    if (wall != 0) {
        err = ag_wall_start();
    } else {
        ag_wall_stop(); /* a session's thread and memory go with it */
    }
    ag_wake_all();
    return err;
}

int
ag_sampling_acquire(enum ag_mode mode, unsigned hz)
{
    int err;

    if ((mode != AG_MODE_CPU && mode != AG_MODE_WALL) || hz == 0 || hz > AG_HZ_MAX) {
        return -EINVAL;
    }
    pthread_mutex_lock(&ag.life_lock);
    if (!atomic_load(&ag.running)) {
        err = -ESRCH;
    } else if (ag.req_n == PP_ARRAY_SIZE(ag.req)) {
        err = -ENOSPC;
    } else {
        ag.req[ag.req_n].mode = mode;
        ag.req[ag.req_n].hz = hz;
        ag.req_n++;
        err = ag_sampling_apply_locked();
        if (err != 0) {
            ag.req_n--;
            (void)ag_sampling_apply_locked();
        }
    }
    if (atomic_load(&ag.hz_cpu) != 0) {
        ag_cpu_origin_clear(); /* the first CPU arming since ag_cpu_origin_set() is done */
    }
    pthread_mutex_unlock(&ag.life_lock);
    return err;
}

int
ag_sampling_release(enum ag_mode mode, unsigned hz)
{
    unsigned i;
    int err = -ENOENT;

    pthread_mutex_lock(&ag.life_lock);
    for (i = 0; i < ag.req_n; i++) {
        if (ag.req[i].mode == mode && ag.req[i].hz == hz) {
            ag.req[i] = ag.req[--ag.req_n];
            err = ag_sampling_apply_locked();
            break;
        }
    }
    pthread_mutex_unlock(&ag.life_lock);
    return err;
}

/* Never called: its entry is the leaf frame of AG_SOURCE_UNSEEN samples, so that its name says
 * in every consumer's view what the agent knows of that CPU time. Exported (shim/libpipeprof.map)
 * so that a stripped libpipeprof.so still names it. */
__attribute__((visibility("default"), noinline, used)) void pipeprof_cpu_while_signal_blocked(void);

void
pipeprof_cpu_while_signal_blocked(void)
{
    __asm__ volatile("" ::: "memory"); /* a body of its own: no two functions share the name */
}

uint64_t
ag_unseen_pc(void)
{
    return (uint64_t)(uintptr_t)pipeprof_cpu_while_signal_blocked;
}

/* Never called: its entry is the leaf frame of CPU time in the kernel (AG_SOURCE_KERNEL samples,
 * timer samples taken as a system call returns); ag_symbolize() names it "[kernel]". Exported
 * like the marker above. */
__attribute__((visibility("default"), noinline, used)) void
pipeprof_cpu_in_kernel(void)
{
    __asm__ volatile("nop" ::: "memory"); /* a body unlike the marker's: no identical folding */
}

/* The leaf of kernel time no system call's stack was found for: named "[kernel, not placed]". */
__attribute__((visibility("default"), noinline, used)) void
pipeprof_cpu_in_kernel_unplaced(void)
{
    __asm__ volatile("nop\n\tnop" ::: "memory");
}

/* The leaf of CPU time no sample saw (a thread auto moved to perf before any timer sample of it):
 * named "[not sampled]". */
__attribute__((visibility("default"), noinline, used)) void
pipeprof_cpu_not_sampled(void)
{
    __asm__ volatile("nop\n\tnop\n\tnop" ::: "memory");
}

uint64_t
ag_not_sampled_pc(void)
{
    return (uint64_t)(uintptr_t)pipeprof_cpu_not_sampled;
}

/* The root of a stack cut where a module's unwind table was not built yet (the manager builds
 * them after the start, drain.c): named "[unwind tables not ready]". */
__attribute__((visibility("default"), noinline, used)) void
pipeprof_unwind_tables_pending(void)
{
    __asm__ volatile("nop\n\tnop\n\tnop\n\tnop" ::: "memory");
}

uint64_t
ag_tables_pending_pc(void)
{
    return (uint64_t)(uintptr_t)pipeprof_unwind_tables_pending;
}

uint64_t
ag_kernel_pc(void)
{
    return (uint64_t)(uintptr_t)pipeprof_cpu_in_kernel;
}

uint64_t
ag_kernel_unplaced_pc(void)
{
    return (uint64_t)(uintptr_t)pipeprof_cpu_in_kernel_unplaced;
}

void
ag_stats_get(struct ag_stats *out)
{
    uint64_t cpu_ns = atomic_load(&ag.cpu_sampled_ns), cpu_n = atomic_load(&ag.cpu_sampled_n);
    uint64_t wall_active = atomic_load(&ag.wall_active_ns);
    uint64_t passes = atomic_load(&ag.wall_passes);

    memset(out, 0, sizeof(*out));
    out->samples = atomic_load(&ag.n_samples);
    out->samples_cpu = atomic_load(&ag.n_cpu);
    out->samples_wall = atomic_load(&ag.n_wall);
    out->samples_waiting = atomic_load(&ag.n_waiting);
    out->lost = atomic_load(&ag.n_lost);
    out->wall_unsampled = atomic_load(&ag.n_wall_unsampled);
    out->wall_held = atomic_load(&ag.n_wall_held);
    out->offstack = atomic_load(&ag.n_offstack);
    out->timer_overruns = atomic_load(&ag.n_overruns);
    out->threads_seen = atomic_load(&ag.n_threads);
    out->dlclose_unscanned = ag_modules_dlclose_unscanned();
    out->threads_dropped = atomic_load(&ag.n_threads_dropped);
    out->eintr_seen = atomic_load(&ag.n_eintr_seen);
    out->eintr_absorbed = atomic_load(&ag.n_eintr_absorbed);
    out->unwind_cfi_steps = atomic_load(&ag.n_cfi_steps);
    out->unwind_not_code = atomic_load(&ag.n_not_code);
    out->unwind_pending = atomic_load(&ag.n_tables_pending);
    out->cpu_sampled_ns = cpu_ns;
    out->requested_hz_cpu = atomic_load(&ag.hz_cpu);
    out->requested_hz_wall = atomic_load(&ag.hz_wall);
    out->effective_hz_cpu = cpu_ns != 0 ? (double)cpu_n * 1e9 / (double)cpu_ns : 0.0;
    out->effective_hz_wall = wall_active != 0 ? (double)passes * 1e9 / (double)wall_active : 0.0;
    out->cpu_weight = atomic_load(&ag.n_cpu_weight);
    out->perf_refused = atomic_load(&ag.n_perf_refused);
    out->perf_promoted = atomic_load(&ag.n_perf_promoted);
    out->ring_fallbacks = atomic_load(&ag.n_ring_fallbacks);
    out->ring_deep = atomic_load(&ag.n_ring_deep);
    out->ring_lost = atomic_load(&ag.n_ring_lost);
    out->perf_early = atomic_load(&ag.n_perf_early);
    out->cpu_tails = atomic_load(&ag.n_cpu_tails);
    out->cpu_unseen_ns = atomic_load(&ag.cpu_unseen_ns);
    out->cpu_kernel_ns = atomic_load(&ag.cpu_kernel_ns);
    out->cpu_kernel_unplaced_ns = atomic_load(&ag.cpu_kernel_unplaced_ns);
    out->cpu_not_sampled_ns = atomic_load(&ag.cpu_not_sampled_ns);
    out->not_sampled_alone = atomic_load(&ag.n_not_sampled_alone);
    out->not_sampled_held = atomic_load(&ag.n_not_sampled_held);
    out->cpu_rest_ns = atomic_load(&ag.cpu_rest_ns);
    out->cpu_chance_ns = atomic_load(&ag.cpu_chance_ns);
    out->cpu_lost_ns = atomic_load(&ag.cpu_lost_ns);
    out->tick_hz = ag.tick_hz;
    pthread_mutex_lock(&ag.reg_lock);
    if (ag.threads != NULL) {
        unsigned i, high = atomic_load(&ag.high);

        out->memory_bytes = (uint64_t)ag.threads_cap * sizeof(struct ag_thread);
        for (i = 0; i < high; i++) {
            /* Auto's probation for a ring (timer.c) is perf-ring's: its samples come by perf's
             * signal until a scan gives the thread a ring (an idle thread never leaves it). */
            int probe = ag.threads[i].has_perf && atomic_load(&ag.threads[i].ring_probe);

            out->threads_perf += ag.threads[i].has_perf && !probe;
            out->threads_timer += ag.threads[i].has_timer != 0;
            out->threads_ring += atomic_load(&ag.threads[i].has_ring) || probe;
            out->memory_bytes += ag.threads[i].ring.map_len + ag.threads[i].wring.map_len +
                                 ag.threads[i].pring.map_len + ag.threads[i].ring_map_len;
        }
    }
    pthread_mutex_unlock(&ag.reg_lock);
}
