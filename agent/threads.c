/* SPDX-License-Identifier: MIT */
/*
 * agent/threads.c - the thread registry: registration from host/threads.c (the start routine is
 * wrapped so the thread registers itself, records its stack bounds and gets its CPU timer
 * before user code runs; with every slot taken it reclaims those of exited threads, drain.c's
 * ag_drain_reclaim), a pthread key destructor that retires the slot at thread exit, and
 * the manager's periodic /proc/self/task scan for threads created otherwise (and for threads
 * that vanished), their names and their stack bounds. Context: ordinary threads under
 * ag.reg_lock; never called from a signal handler. Slots are never unmapped while the agent
 * runs, because a handler may hold a stale pointer.
 */
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/cfi.h"
#include "agent/internal.h"
#include "host/host.h"

__thread struct ag_thread *ag_tls_thread AG_TLS;
__thread int32_t ag_tls_tid AG_TLS;
__thread unsigned ag_tls_gen AG_TLS;
__thread uint64_t ag_tls_stack_lo AG_TLS;
__thread uint64_t ag_tls_stack_hi AG_TLS;
__thread int ag_tls_excluded AG_TLS;
__thread _Atomic uint32_t ag_tls_signals AG_TLS;
__thread _Atomic uint32_t ag_tls_locator_signals AG_TLS;

#define AG_EXCLUDED_MAX 32

/* A thread's own mapping: blk.frames, sigblk.frames, last_frames, kern_frames, the calls seen
 * since its last CPU sample (kern_seen_frames), cfi_cache. */
#define AG_THREAD_MAP_LEN \
    ((4 + AG_KERN_SEEN) * AG_MAX_FRAMES * sizeof(uint64_t) + sizeof(struct ag_cfi_cache))

static pthread_once_t ag_threads_once = PTHREAD_ONCE_INIT;
static pthread_key_t ag_threads_key;
static int ag_threads_key_ok;
static int32_t ag_threads_excluded[AG_EXCLUDED_MAX]; /* reg_lock: tids excluded before start */
static unsigned ag_threads_n_excluded;               /* reg_lock */

int32_t
ag_gettid(void)
{
    if (ag_tls_tid == 0) {
        ag_tls_tid = (int32_t)syscall(SYS_gettid);
    }
    return ag_tls_tid;
}

#ifdef __GLIBC__
extern void *__libc_stack_end; /* ld.so's: the main thread's stack pointer at its start */
#endif

#define AG_MAIN_STACK_FAST_MAX (64ull << 20) /* RLIMIT_STACK up to which the fast path holds */

/*
 * The main thread's stack as pthread_getattr_np() gives it, without glibc's read of
 * /proc/self/maps (about 50 us of every recorded short child's start-up; docs/performance.md):
 * the top is __libc_stack_end's page end; the bottom is the stack mapping's end less
 * RLIMIT_STACK, rounded as glibc rounds it. The mapping's end is found where exec put the
 * program's file name (AT_EXECFN: the first string it copies, under one null pointer at the very
 * top). glibc also bounds the size by the mapping below the stack, which only the maps file
 * tells: the kernel keeps mmap_base at least 128 MiB below the stack, so that bound does not
 * apply to a limit of 64 MiB or less. Returns 0, or -1 where any of this does not hold (no
 * glibc, no AT_EXECFN, a misaligned end, a larger or unlimited RLIMIT_STACK): ask glibc then.
 */
int
ag_main_stack_bounds(uint64_t *lo, uint64_t *hi)
{
#ifdef __GLIBC__
    const char *fn = (const char *)getauxval(AT_EXECFN);
    uintptr_t page = (uintptr_t)getauxval(AT_PAGESZ), end, top, size;
    struct rlimit rl;

    if (fn == NULL || page == 0 || (page & (page - 1)) != 0 || __libc_stack_end == NULL ||
        getrlimit(RLIMIT_STACK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > AG_MAIN_STACK_FAST_MAX) {
        return -1;
    }
    end = (uintptr_t)fn + strlen(fn) + 1 + sizeof(void *);
    top = ((uintptr_t)__libc_stack_end & ~(page - 1)) + page;
    if ((end & (page - 1)) != 0 || top > end || end - top >= rl.rlim_cur) {
        return -1;
    }
    size = ((uintptr_t)rl.rlim_cur - (end - top)) & ~(page - 1);
    /* Only the first thread's: a fork()ed child of another thread runs on that thread's stack,
     * with tid == pid (glibc knows that thread's stack block). */
    if ((uintptr_t)&rl < top - size || (uintptr_t)&rl >= top) {
        return -1;
    }
    *lo = top - size;
    *hi = top;
    return 0;
#else
    (void)lo;
    (void)hi;
    return -1;
#endif
}

static void
ag_threads_bounds_self(uint64_t *lo, uint64_t *hi)
{
    pthread_attr_t attr;
    void *addr = NULL;
    size_t size = 0;
    int is_main, rc;

    *lo = 0;
    *hi = 0;
    /* glibc reads /proc/self/maps for the main thread's stack, opened inside libc at the lowest
     * free number: a library creation, with the fd gate held (host/fds.c; pipeprof_start of a
     * host that links the library, on its main thread while its other threads run). */
    is_main = ag_gettid() == (int32_t)getpid();
    if (is_main && ag_main_stack_bounds(lo, hi) == 0) {
        return;
    }
    if (is_main) {
        host_fds_hold();
    }
    rc = pthread_getattr_np(pthread_self(), &attr);
    if (is_main) {
        host_fds_release();
    }
    if (rc != 0) {
        return;
    }
    if (pthread_attr_getstack(&attr, &addr, &size) == 0 && addr != NULL) {
        *lo = (uint64_t)(uintptr_t)addr;
        *hi = *lo + size;
    }
    pthread_attr_destroy(&attr);
}

static struct ag_thread *
ag_thread_find_locked(int32_t tid)
{
    unsigned i, high = atomic_load_explicit(&ag.high, memory_order_relaxed);

    for (i = 0; i < high; i++) {
        struct ag_thread *t = &ag.threads[i];

        if (atomic_load_explicit(&t->state, memory_order_relaxed) == AG_SLOT_ACTIVE &&
            atomic_load_explicit(&t->tid, memory_order_relaxed) == tid) {
            return t;
        }
    }
    return NULL;
}

/*
 * The scan's files stay open from one scan to the next (reg_lock): /proc/self/task, read again
 * from its start, and each thread's comm, read again at offset 0, in AG_NAME_CACHE slots by tid
 * (as agent/wall.c's stat files). Each open of the library's is a moment in which its fd is low
 * (host/fds.c, "the moment of a move"), and the host's creations that no interposer sees (an
 * io_uring open, getpwent's stream) got the next number when they met one: opened at every scan
 * (100 ms), 4 of 595 getpwent calls and 1 of 897 io_uring opens in one CPU-mode record run of
 * host-contract-fds-uninterposed. Closed with the registry (ag_threads_stop) and in a forked
 * child (the parent's /proc/PID/task). The slots bound the fds held (AG_NAME_CACHE, internal.h):
 * one per thread would take a host's RLIMIT_NOFILE with its threads.
 */
static DIR *ag_scan_dir;
static struct {
    int32_t tid; /* 0: empty */
    int fd;
} ag_name_cache[AG_NAME_CACHE];

static void
ag_scan_files_close_locked(void)
{
    unsigned i;

    if (ag_scan_dir != NULL) {
        closedir(ag_scan_dir);
        ag_scan_dir = NULL;
    }
    for (i = 0; i < AG_NAME_CACHE; i++) {
        if (ag_name_cache[i].tid != 0) {
            close(ag_name_cache[i].fd);
            ag_name_cache[i].tid = 0;
        }
    }
}

/* Thread tid's comm into buf (not NUL-terminated): bytes read, or -1. */
static ssize_t
ag_thread_comm_read(int32_t tid, char *buf, size_t size)
{
    unsigned slot = (unsigned)tid % AG_NAME_CACHE;
    char path[64];
    ssize_t n;
    int fd;

    if (ag_name_cache[slot].tid == tid) {
        n = pread(ag_name_cache[slot].fd, buf, size, 0);
        if (n > 0) {
            return n;
        }
        /* gone (ESRCH), or its tid taken by a new thread: open it again */
    }
    /* Not /proc/self/task/TID: the dentries left there cost the reaper of this process
     * (agent/wall.c says how much). */
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)tid);
    fd = open(path, O_RDONLY | O_CLOEXEC); /* high and the library's: host/fds.c */
    if (fd < 0) {
        return -1;
    }
    n = read(fd, buf, size);
    if (n <= 0) {
        close(fd);
        return -1;
    }
    if (ag_name_cache[slot].tid != 0) {
        close(ag_name_cache[slot].fd);
    }
    ag_name_cache[slot].tid = tid;
    ag_name_cache[slot].fd = fd;
    return n;
}

static void
ag_thread_name_read(int32_t tid, char *name)
{
    char buf[AG_NAME_MAX + 1];
    ssize_t n;

    if (tid == ag_gettid()) {
        /* The calling thread (the main thread in the start's scan): no file to open. */
        prctl(PR_GET_NAME, name, 0, 0, 0);
        return;
    }
    n = ag_thread_comm_read(tid, buf, sizeof(buf) - 1);
    if (n <= 0) {
        return;
    }
    if (buf[n - 1] == '\n') {
        n--;
    }
    if (n > AG_NAME_MAX - 1) {
        n = AG_NAME_MAX - 1;
    }
    memcpy(name, buf, (size_t)n);
    name[n] = '\0';
}

static void
ag_thread_name_set_locked(struct ag_thread *t, const char *name)
{
    if (strncmp(t->name, name, AG_NAME_MAX) != 0) {
        snprintf(t->name, sizeof(t->name), "%s", name);
        t->name_gen++;
    }
}

static int
ag_thread_is_excluded_locked(int32_t tid)
{
    unsigned i;

    for (i = 0; i < ag_threads_n_excluded; i++) {
        if (ag_threads_excluded[i] == tid) {
            return 1;
        }
    }
    return 0;
}

/*
 * Each slot's tid as its tid field holds it (0: free or never taken), written where that is
 * (ag_thread_register_locked, ag_thread_release_locked), under reg_lock. The registration's pass
 * over the slots reads these 4 bytes a slot, not the slots (a cache line or more each): in a host
 * that starts threads faster than the drain frees their slots, 1024 cache misses a registration.
 * Indexes at or above ag.high are never read (a new registry starts it at 0).
 */
static int32_t ag_slot_tids[AG_MAX_THREADS];

/*
 * The threads counted in threads_dropped, a bit per tid, so that a thread the registry or its
 * engine refuses is counted once, not again at each scan that finds it: report says how many
 * threads went unsampled. Mapped at the first refusal (512 KiB of address space for Linux's
 * highest pid_max, pages only where tids fall), under reg_lock; a registration clears its tid's
 * bit, so that a later thread with that tid is counted anew.
 */
#define AG_DROPPED_TIDS (1u << 22) /* PID_MAX_LIMIT on 64-bit Linux */
static uint8_t *ag_dropped_tids;

void
ag_thread_dropped_locked(int32_t tid)
{
    if (ag_dropped_tids == NULL) {
        void *m = mmap(NULL, AG_DROPPED_TIDS / 8, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

        ag_dropped_tids = m != MAP_FAILED ? m : NULL;
    }
    if (tid > 0 && (uint32_t)tid < AG_DROPPED_TIDS && ag_dropped_tids != NULL) {
        uint8_t bit = (uint8_t)(1u << (tid & 7));

        if (ag_dropped_tids[tid >> 3] & bit) {
            return; /* counted already */
        }
        ag_dropped_tids[tid >> 3] |= bit;
    }
    atomic_fetch_add_explicit(&ag.n_threads_dropped, 1, memory_order_relaxed);
}

/* A new ag_start() counts from 0 (its caller resets threads_dropped): every tid may count anew. */
void
ag_thread_dropped_reset(void)
{
    if (ag_dropped_tids != NULL) {
        madvise(ag_dropped_tids, AG_DROPPED_TIDS / 8, MADV_DONTNEED); /* zero pages again */
    }
}

/*
 * The one list of what a slot keeps of its thread, emptied: engines and their counters, the
 * pending final sample and kernel time, the stacks recorded for it, its stack bounds, drops
 * reported, THREAD_START sent. For a slot a new thread takes (ag_thread_register_locked) and one
 * given back (ag_thread_release_locked, also for every slot at ag_threads_stop). Not here: the
 * rings and mappings (they stay for stale writers), the name, tid, excluded and state (the
 * callers'). reg_lock held, the slot's timers deleted (ag_timer_delete_locked) or never armed.
 */
static void
ag_thread_reset_locked(struct ag_thread *t)
{
    t->kern_depth = 0;
    t->kern_seen_n = 0;
    t->kern_pend_w = 0;
    t->kern_unpl_w = 0;
    t->kern_unpl_ns = 0;
    atomic_store_explicit(&t->kern_faults, 0, memory_order_relaxed);
    t->kern_pend_ns = 0;
    t->last_depth = 0; /* the drain's: no last CPU stack yet */
    t->root_depth = 0;
    t->has_start = 0;
    t->root_key_n = 0; /* the drain's: no root looked for yet */
    t->root_found = 0;
    t->announced = 0;
    t->has_timer = 0;
    t->has_perf = 0;
    t->timer_hz = 0;
    t->scan_seen = 0;
    t->exit_hooked = 0;
    t->scan_cpu_ns = 0;
    t->perf_promoted = 0;
    t->ring_cut = 0;
    t->ring_deep = 0;
    atomic_store_explicit(&t->ring_probe, 0, memory_order_relaxed);
    atomic_store_explicit(&t->ring_probe_n, 0, memory_order_relaxed);
    atomic_store_explicit(&t->ring_probe_deep, 0, memory_order_relaxed);
    t->has_locator = 0;
    atomic_store_explicit(&t->kern_locating, 0, memory_order_relaxed);
    t->kern_flush = 0;
    t->scan_kern_w = 0;
    t->ring_loc_w = 0;
    t->ring_loc_cpu = 0;
    atomic_store_explicit(&t->kern_w, 0, memory_order_relaxed);
    atomic_store_explicit(&t->kern_asked, 0, memory_order_relaxed);
    atomic_store_explicit(&t->kern_retired, 0, memory_order_relaxed);
    atomic_store_explicit(&t->wall_signalled, 0, memory_order_relaxed);
    atomic_store_explicit(&t->timer_samples, 0, memory_order_relaxed);
    atomic_store_explicit(&t->timer_weight, 0, memory_order_relaxed);
    atomic_store_explicit(&t->scan_samples, 0, memory_order_relaxed);
    atomic_store_explicit(&t->scan_weight, 0, memory_order_relaxed);
    t->tail.n = 0;
    atomic_store_explicit(&t->sigblk_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&t->last_claim_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&t->sigblk_claimed, 0, memory_order_relaxed);
    atomic_store_explicit(&t->sigblk.info, 0, memory_order_relaxed); /* no stack yet */
    t->dropped_reported = atomic_load_explicit(&t->dropped, memory_order_relaxed);
    t->unsampled_reported = atomic_load_explicit(&t->unsampled, memory_order_relaxed);
    atomic_store_explicit(&t->blocked, AG_BLOCKED_NONE, memory_order_relaxed);
    atomic_store_explicit(&t->stack_lo, 0, memory_order_relaxed);
    atomic_store_explicit(&t->stack_hi, 0, memory_order_relaxed);
    atomic_store_explicit(&t->last_sp, 0, memory_order_relaxed);
    atomic_store_explicit(&t->last_cpu_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&t->wall_seen_ns, 0, memory_order_relaxed);
}

struct ag_thread *
ag_thread_register_locked(int32_t tid, int self, int *full)
{
    struct ag_thread *t = NULL;
    unsigned i, high = atomic_load_explicit(&ag.high, memory_order_relaxed);
    char name[AG_NAME_MAX] = "";

    /* One pass over the slots' tids (ag_thread_find_locked's, then the first free one's, went
     * over every slot twice in a host whose slots are all taken): the thread's own slot, when the
     * scan or its own start registered it first (an exited thread's slot keeps its tid, which the
     * kernel may have given again), else the first freed slot, whose rings are empty (the
     * consumer drained them before freeing). */
    for (i = 0; i < high; i++) {
        struct ag_thread *s = &ag.threads[i];

        if (ag_slot_tids[i] == tid &&
            atomic_load_explicit(&s->state, memory_order_relaxed) == AG_SLOT_ACTIVE) {
            return s;
        }
        if (ag_slot_tids[i] == 0 && t == NULL &&
            atomic_load_explicit(&s->state, memory_order_relaxed) == AG_SLOT_FREE) {
            t = s;
        }
    }
    if (t == NULL) {
        if (high >= ag.cfg.max_threads) {
            if (full != NULL) {
                *full = 1; /* the caller's to count, or to reclaim */
            } else {
                ag_thread_dropped_locked(tid);
            }
            return NULL;
        }
        t = &ag.threads[high];
    }
    /* Rings stay mapped from one session to the next (internal.h says why); a new geometry
     * (another PIPEPROF_RING_SLOTS or _MAX_FRAMES) can only come with a new ag_start(), when no
     * producer runs but a stale one. */
    if ((!ag_ring_fits(&t->ring, ag.cfg.ring_slots, ag.cfg.max_frames) &&
         ag_ring_init(&t->ring, ag.cfg.ring_slots, ag.cfg.max_frames) != 0) ||
        (!ag_ring_fits(&t->wring, ag.cfg.ring_slots, ag.cfg.max_frames) &&
         ag_ring_init(&t->wring, ag.cfg.ring_slots, ag.cfg.max_frames) != 0) ||
        (ag.cfg.cpu_engine == AG_CPU_ENGINE_PERF_RING &&
         !ag_ring_fits(&t->pring, ag.cfg.ring_slots, ag.cfg.max_frames) &&
         ag_ring_init(&t->pring, ag.cfg.ring_slots, ag.cfg.max_frames) != 0)) {
        ag_thread_dropped_locked(tid);
        return NULL;
    }
    if (t->blk.frames == NULL) {
        /* Mapped, like the registry that points to it and outlives ag_stop() (an interposed call
         * may still write here): heap memory referenced only from a mapping would look leaked
         * to LeakSanitizer, which does not scan mappings. Sized for any later config: the
         * blocking-call stack, the signal-blocking call's, the drain's copies of the last CPU
         * stack and of the last system call's, the CFI row cache. */
        void *m = mmap(NULL, AG_THREAD_MAP_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);

        if (m == MAP_FAILED) {
            ag_thread_dropped_locked(tid);
            return NULL;
        }
        t->blk.frames = m;
        t->sigblk.frames = t->blk.frames + AG_MAX_FRAMES;
    }
    t->last_frames = (uint64_t *)(uintptr_t)(t->sigblk.frames + AG_MAX_FRAMES);
    t->kern_frames = t->last_frames + AG_MAX_FRAMES;
    t->kern_seen_frames = t->kern_frames + AG_MAX_FRAMES;
    t->cfi_cache =
            (struct ag_cfi_cache *)(void *)(t->kern_seen_frames + AG_KERN_SEEN * AG_MAX_FRAMES);
    t->cfi_cache->generation = 0; /* empty: the previous thread's rows may not be this one's */
    ag_thread_reset_locked(t);
    if (t == &ag.threads[high]) {
        atomic_store_explicit(&ag.high, high + 1, memory_order_release);
    }
    if (self) {
        prctl(PR_GET_NAME, name, 0, 0, 0);
    } else {
        ag_thread_name_read(tid, name);
    }
    t->name[0] = '\0';
    t->name_gen = 1;
    t->name_gen_reported = 0;
    ag_thread_name_set_locked(t, name);
    t->scan_seen = 1;
    atomic_store_explicit(&t->excluded, ag_thread_is_excluded_locked(tid), memory_order_relaxed);
    atomic_store_explicit(&t->tid, tid, memory_order_relaxed);
    ag_slot_tids[t - ag.threads] = tid;
    if (ag_dropped_tids != NULL && tid > 0 && (uint32_t)tid < AG_DROPPED_TIDS) {
        ag_dropped_tids[tid >> 3] &= (uint8_t) ~(1u << (tid & 7)); /* its tid may count anew */
    }
    atomic_store_explicit(&t->state, AG_SLOT_ACTIVE, memory_order_release);
    atomic_fetch_add_explicit(&ag.n_threads, 1, memory_order_relaxed);
    /* Its timer alone: all of them went through every slot up to high, 1024 in a host that
     * starts threads faster than the drain frees their slots (docs/performance.md, "Thread
     * creation under a session"). */
    ag_timer_update_locked(t);
    return t;
}

/*
 * ag_thread_register_locked() of a thread that may wait for a slot: when none is free, the slots
 * of threads that exited are reclaimed (ag_drain_reclaim drains what they hold into records that
 * the next drain hands on first) and the registration tried again; only a registry full of live
 * threads (or of records not yet handed on past their bound) drops it. An exited thread's slot
 * is otherwise freed by the next drain (every 50 ms), and past max_threads exits in between
 * every later thread went unregistered until then (docs/performance.md, "Thread churn past the
 * registry"). No extra work while a slot is free. reg_lock held; released while reclaiming
 * (drain_lock comes first), so the registry may have changed meanwhile.
 */
static struct ag_thread *
ag_thread_register_reclaim_locked(int32_t tid, int self)
{
    struct ag_thread *t;
    unsigned freed = 1;
    int full = 0;

    /* Tried again after a reclaim that freed none too: another thread's may have. */
    while ((t = ag_thread_register_locked(tid, self, &full)) == NULL && full && freed != 0) {
        pthread_mutex_unlock(&ag.reg_lock);
        freed = ag_drain_reclaim();
        pthread_mutex_lock(&ag.reg_lock);
        full = 0;
        if (!atomic_load(&ag.running)) {
            return NULL; /* stopped meanwhile: its registry is gone */
        }
    }
    if (full) {
        ag_thread_dropped_locked(tid);
    }
    return t;
}

void
ag_thread_release_locked(struct ag_thread *t)
{
    ag_timer_delete_locked(t);
    ag_thread_reset_locked(t);
    atomic_store_explicit(&t->tid, 0, memory_order_relaxed);
    if (ag.threads != NULL && t >= ag.threads && t < ag.threads + AG_MAX_THREADS) {
        ag_slot_tids[t - ag.threads] = 0; /* a slot of this registry: all of them */
    }
    atomic_store_explicit(&t->state, AG_SLOT_FREE, memory_order_release);
}

/* Key destructor: the thread is exiting. Later signals see EXITING and do nothing. */
/*
 * Threads whose exit hook has run (reg_lock). Such a thread is still listed in /proc/self/task
 * until the kernel has reaped it, and its slot is EXITING, then freed by the drain: a scan in
 * between would register it again as a new thread, which the drain then announces started and
 * stopped a second time (seen as "stops announced 2" in test-agent-sampling: once natively in
 * CI's ASan stage, 1 run in 4 under qemu-user, where a thread takes longer to go). The scan skips
 * a tid here for a while; a tid the kernel reuses later registers itself again (its
 * pthread_create trampoline) or is found by a scan once the entry has expired.
 */
#define AG_THREADS_EXITED_MAX 64
#define AG_THREADS_EXITED_NS  2000000000u

static struct {
    int32_t tid;
    uint64_t ns; /* CLOCK_MONOTONIC at its exit hook */
} ag_threads_exited[AG_THREADS_EXITED_MAX];
static unsigned ag_threads_exited_next;

static int
ag_thread_exited_locked(int32_t tid, uint64_t now)
{
    unsigned i;

    for (i = 0; i < AG_THREADS_EXITED_MAX; i++) {
        if (ag_threads_exited[i].tid == tid &&
            now - ag_threads_exited[i].ns < AG_THREADS_EXITED_NS) {
            return 1;
        }
    }
    return 0;
}

static void
ag_threads_on_exit(void *p)
{
    struct ag_thread *t = p;
    char name[AG_NAME_MAX] = "";
    sigset_t sig, old;

    if (!atomic_load(&ag.running) || ag.threads == NULL || ag_tls_gen != atomic_load(&ag.gen)) {
        return;
    }
    /* The thread's last name: a rename that no /proc scan saw before the exit is reported
     * with the thread's samples rather than lost (scans run every PIPEPROF_SCAN_MS). */
    prctl(PR_GET_NAME, name, 0, 0, 0);
    /* No sample between the final claim and the engine's end: the claim is the last span. */
    sigemptyset(&sig);
    sigaddset(&sig, ag.signo);
    host_sigmask_raw(SIG_BLOCK, &sig, &old);
    pthread_mutex_lock(&ag.reg_lock);
    if (atomic_load_explicit(&t->tid, memory_order_relaxed) == ag_gettid() &&
        atomic_load_explicit(&t->state, memory_order_relaxed) == AG_SLOT_ACTIVE) {
        if (name[0] != '\0') {
            ag_thread_name_set_locked(t, name);
        }
        /* What the thread burned after its last sample: with CPU-time timers a bursty thread can
         * go hundreds of ms without one, and that end would never be counted. */
        ag_cpu_end_rest(t, ag_cpu_claim_tail_locked(t, CLOCK_THREAD_CPUTIME_ID));
        ag_timer_delete_locked(t);
        atomic_store_explicit(&t->state, AG_SLOT_EXITING, memory_order_seq_cst);
        ag_threads_exited[ag_threads_exited_next].tid = ag_gettid();
        ag_threads_exited[ag_threads_exited_next].ns = ag_now_ns();
        ag_threads_exited_next = (ag_threads_exited_next + 1) % AG_THREADS_EXITED_MAX;
    }
    pthread_mutex_unlock(&ag.reg_lock);
    host_sigmask_raw(SIG_SETMASK, &old, NULL);
}

static void
ag_threads_once_init(void)
{
    ag_threads_key_ok = pthread_key_create(&ag_threads_key, ag_threads_on_exit) == 0;
}

/*
 * The stack a started thread's CPU belongs to before any sample of it: its start routine fn
 * (as a leaf pc) under the frames that called the trampoline whose frame address is fa
 * (start_thread, clone3). Returns the depth, 0 when the walk fails.
 */
static uint32_t
ag_threads_root_stack(void *(*fn)(void *), uint64_t fa, uint64_t *frames,
                      struct ag_unwind_result *res)
{
    struct ag_unwind_ctx c;

    if (fa == 0) {
        return 0;
    }
    ag_sig_unwind_ctx_init(&c, fa, ag_tls_stack_lo, ag_tls_stack_hi);
    frames[0] = (uint64_t)(uintptr_t)fn;
    ag_sig_unwind_caller(&c, fa, frames + 1, ag.cfg.max_frames - 1, res); /* the trampoline's */
    return res->depth != 0 ? res->depth + 1 : 0;
}

void
ag_thread_attach_self(void)
{
    ag_thread_attach_started(NULL, 0, 0);
}

void
ag_seqstack_put(struct ag_seqstack *st, const uint64_t *frames, const struct ag_unwind_result *res)
{
    uint32_t seq = atomic_load_explicit(&st->seq, memory_order_relaxed), i;

    atomic_store_explicit(&st->seq, seq + 1, memory_order_relaxed);
    for (i = 0; i < res->depth; i++) {
        atomic_store_explicit(&st->frames[i], frames[i], memory_order_release);
    }
    atomic_store_explicit(&st->info,
                          res->depth | (uint32_t)res->unwinder << 16 | (uint32_t)res->end << 24,
                          memory_order_release);
    atomic_store_explicit(&st->seq, seq + 2, memory_order_release);
}

int
ag_seqstack_get(struct ag_seqstack *st, uint64_t *frames, uint32_t max, uint32_t *depth,
                uint8_t *unwinder, uint8_t *end)
{
    int tries;

    for (tries = 0; tries < 4; tries++) {
        uint32_t seq = atomic_load_explicit(&st->seq, memory_order_acquire);
        uint32_t info, n, i;

        if (seq & 1) {
            continue;
        }
        info = atomic_load_explicit(&st->info, memory_order_acquire);
        n = info & 0xffff;
        n = n < max ? n : max;
        for (i = 0; i < n; i++) {
            /* Acquire: seeing a word stored after the odd seq makes the re-read below see
             * that seq (or a later one), so a torn copy is never accepted. */
            frames[i] = atomic_load_explicit(&st->frames[i], memory_order_acquire);
        }
        if (atomic_load_explicit(&st->seq, memory_order_relaxed) == seq) {
            *depth = n;
            *unwinder = (uint8_t)(info >> 16);
            *end = (uint8_t)(info >> 24);
            return n > 0 ? 0 : -EAGAIN;
        }
    }
    return -EAGAIN;
}

/*
 * The stack bounds of a thread glibc started with a stack of size bytes, without
 * pthread_getattr_np (which allocates its CPU set: a host thread's first allocation gets it a
 * malloc arena and may open /sys/devices/system/cpu/online, where bare it allocates nothing). The
 * thread's descriptor (pthread_self()) lies at the top of its stack block, above every frame
 * (static TLS above it on aarch64, below it on x86-64), and the block holds size bytes and the
 * guard under the descriptor's end: [self - size, self) holds every frame (the bottom may reach
 * into the guard, which only bounds where a stack pointer may be). -1 where that does not hold
 * here (not glibc, a size not known, the caller's frame outside).
 */
static int
ag_threads_bounds_started(uint64_t size, uint64_t *lo, uint64_t *hi)
{
#ifdef __GLIBC__
    uint64_t top = (uint64_t)(uintptr_t)pthread_self(),
             here = (uint64_t)(uintptr_t)__builtin_frame_address(0);

    if (size == 0 || top < size || here >= top || here < top - size) {
        return -1;
    }
    *lo = top - size;
    *hi = top;
    return 0;
#else
    (void)size;
    (void)lo;
    (void)hi;
    return -1;
#endif
}

void
ag_thread_attach_started(void *(*fn)(void *), uint64_t fa, uint64_t stack_size)
{
    uint64_t root[AG_MAX_FRAMES];
    struct ag_unwind_result res = { 0, 0, 0, 0, 0 };
    struct ag_thread *t;
    int32_t tid;
    uint32_t root_depth = 0;

    /* Idle (no session yet), nothing: pthread_getattr_np() mallocs, and a host thread's first
     * allocation sets up glibc's tcache and an arena, which may open
     * /sys/devices/system/cpu/online at the host's lowest free number (a thread that never
     * allocates does not, bare: host-contract-fds-fdchurn's preloaded listings held that fd). A
     * thread started idle is found by the agent's /proc scan when it starts, as one started
     * before the library was loaded: its bounds come from its samples' stack pointers. */
    if (!atomic_load(&ag.running) || ag_tls_excluded) {
        return;
    }
    tid = ag_gettid(); /* a system call in a new thread: not made idle */
    if (ag_tls_stack_hi == 0) {
        uint64_t lo, hi;

        if (ag_threads_bounds_started(stack_size, &lo, &hi) != 0) {
            ag_threads_bounds_self(&lo, &hi);
        }
        ag_tls_stack_lo = lo;
        ag_tls_stack_hi = hi;
    }
    if (fn != NULL) {
        root_depth = ag_threads_root_stack(fn, fa, root, &res);
    }
    pthread_once(&ag_threads_once, ag_threads_once_init);
    pthread_mutex_lock(&ag.reg_lock);
    t = ag.threads != NULL ? ag_thread_register_reclaim_locked(tid, 1) : NULL;
    if (t != NULL) {
        /* The drain sees the slot only under reg_lock, after this. */
        memcpy(t->last_frames, root, root_depth * sizeof(root[0]));
        t->last_depth = root_depth;
        t->root_depth = res.end == AG_UNWIND_END_ROOT ? root_depth : 0;
        t->has_start = fn != NULL;
        t->last_unwinder = res.unwinder;
        t->last_end = res.end;
        atomic_store_explicit(&t->stack_lo, ag_tls_stack_lo, memory_order_relaxed);
        atomic_store_explicit(&t->stack_hi, ag_tls_stack_hi, memory_order_release);
        ag_tls_thread = t;
        ag_tls_gen = atomic_load(&ag.gen);
        if (ag_threads_key_ok && pthread_setspecific(ag_threads_key, t) == 0) {
            t->exit_hooked = 1;
        }
    }
    pthread_mutex_unlock(&ag.reg_lock);
    ag_thread_sigmask_started(t);
}

void
ag_thread_exclude_self(void)
{
    int32_t tid = ag_gettid();
    struct ag_thread *t;

    ag_tls_excluded = 1;
    host_thread_mark_library(); /* its fds are the library's (host/fds.c) */
    pthread_mutex_lock(&ag.reg_lock);
    if (!ag_thread_is_excluded_locked(tid) && ag_threads_n_excluded < AG_EXCLUDED_MAX) {
        ag_threads_excluded[ag_threads_n_excluded++] = tid;
    }
    t = ag.threads != NULL ? ag_thread_find_locked(tid) : NULL;
    if (t != NULL) {
        atomic_store_explicit(&t->excluded, 1, memory_order_relaxed);
        ag_timer_delete_locked(t);
    }
    pthread_mutex_unlock(&ag.reg_lock);
}

void
ag_thread_own_code(int on)
{
    /* Not ag_gettid(): in a vfork()ed child (exec's path) its cache is the parent's memory. */
    int32_t tid = (int32_t)syscall(SYS_gettid);
    unsigned i;

    for (i = 0; i < AG_OWN_CODE_MAX; i++) {
        int32_t expected = on ? 0 : tid;

        if (atomic_compare_exchange_strong(&ag.own_code_tids[i], &expected, on ? tid : 0)) {
            return;
        }
    }
}

/* Finds the mapping of /proc/self/maps that contains sp: the stack of a thread we did not
 * create. Returns 0 and the range, or -ENOENT. */
static int
ag_threads_bounds_from_maps(uint64_t sp, uint64_t *lo, uint64_t *hi)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    int err = -ENOENT;

    if (f == NULL) {
        return -errno;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long a, b;
        char perms[8];

        if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) == 3 && sp >= a && sp < b &&
            perms[0] == 'r' && perms[1] == 'w') {
            *lo = a;
            *hi = b;
            err = 0;
            break;
        }
    }
    fclose(f);
    return err;
}

/* Registers the threads the listing d holds (read from its start) that have no slot. With full
 * non-NULL, one that finds the registry full is not counted and *full set. reg_lock held; now:
 * read under it. */
static void
ag_threads_scan_list_locked(DIR *d, uint64_t now, int *full)
{
    struct dirent *de;

    rewinddir(d);
    while ((de = readdir(d)) != NULL) {
        struct ag_thread *t;
        char *end;
        long tid;

        if (!isdigit((unsigned char)de->d_name[0])) {
            continue;
        }
        tid = strtol(de->d_name, &end, 10);
        if (*end != '\0' || tid <= 0) {
            continue;
        }
        /* A tid whose exit hook ran lately is not registered again; but a slot that is active
         * under it (the tid reused by a thread that registered itself since) is still seen,
         * or the loop below would take it for gone and stop sampling it. */
        t = ag_thread_exited_locked((int32_t)tid, now)
                    ? ag_thread_find_locked((int32_t)tid)
                    : ag_thread_register_locked((int32_t)tid, 0, full);
        if (t != NULL) {
            t->scan_seen = 1;
        }
    }
}

void
ag_threads_scan(void)
{
    unsigned i, high;
    uint64_t now;
    int full = 0;
    DIR *d;

    pthread_mutex_lock(&ag.reg_lock);
    /* Read under the lock, as the exit hooks' times are: read before it, an exit hook that held
     * the lock meanwhile noted a later time, now - ns wrapped around, and the thread (still
     * listed while it exits) was registered again: its stop announced twice. */
    now = ag_now_ns();
    high = atomic_load_explicit(&ag.high, memory_order_relaxed);
    for (i = 0; i < high; i++) {
        ag.threads[i].scan_seen = 0;
    }
    if (ag_scan_dir == NULL) {
        ag_scan_dir = opendir("/proc/self/task");
    }
    d = ag_scan_dir;
    if (d == NULL) {
        pthread_mutex_unlock(&ag.reg_lock);
        return;
    }
    ag_threads_scan_list_locked(d, now, &full);
    if (full) {
        /* A thread it found with every slot taken: the exited threads' are reclaimed, as at a
         * thread's own registration (the lock let go: drain_lock comes first; the listing is the
         * manager's alone, and a stop joins the manager before it closes it), and the listing
         * read again, counting what is left. */
        pthread_mutex_unlock(&ag.reg_lock);
        (void)ag_drain_reclaim();
        pthread_mutex_lock(&ag.reg_lock);
        now = ag_now_ns();
        ag_threads_scan_list_locked(d, now, NULL);
    }
    high = atomic_load_explicit(&ag.high, memory_order_relaxed);
    for (i = 0; i < high; i++) {
        struct ag_thread *t = &ag.threads[i];
        char name[AG_NAME_MAX] = "";
        uint64_t sp, lo, hi;

        if (atomic_load_explicit(&t->state, memory_order_relaxed) != AG_SLOT_ACTIVE) {
            continue;
        }
        if (!t->scan_seen &&
            syscall(SYS_tgkill, (long)getpid(),
                    (long)atomic_load_explicit(&t->tid, memory_order_relaxed), 0L) == 0) {
            /* Alive, though the listing missed it: a thread listed before it that exits while
             * the directory is read shifts the rest back by one (the listing goes by position),
             * and the one after is skipped. Taken for gone, it was stopped and found again as a
             * new thread: its STOP came twice (test-agent-sampling under ASan at -j2). */
            t->scan_seen = 1;
        }
        if (!t->scan_seen) {
            /* Gone without our key destructor (raw clone, or created before the agent): its
             * CPU up to the previous scan still comes in as a final sample. */
            if (t->scan_cpu_ns != 0) {
                ag_cpu_end_rest(t, ag_cpu_claim_tail_at_locked(t, t->scan_cpu_ns));
            }
            ag_timer_delete_locked(t);
            atomic_store_explicit(&t->state, AG_SLOT_EXITING, memory_order_release);
            continue;
        }
        if (!t->exit_hooked && (t->has_timer || t->has_perf || t->has_ring)) {
            struct timespec ts;

            /* Its CPU clock cannot be read once it has gone. */
            if (clock_gettime(
                        ag_thread_cpu_clock(atomic_load_explicit(&t->tid, memory_order_relaxed)),
                        &ts) == 0) {
                t->scan_cpu_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
            }
        }
        ag_cpu_engine_check_locked(t);
        ag_thread_name_read(atomic_load_explicit(&t->tid, memory_order_relaxed), name);
        if (name[0] != '\0') {
            ag_thread_name_set_locked(t, name);
        }
        sp = atomic_load_explicit(&t->last_sp, memory_order_relaxed);
        if (atomic_load_explicit(&t->stack_hi, memory_order_relaxed) == 0 && sp != 0 &&
            ag_threads_bounds_from_maps(sp, &lo, &hi) == 0) {
            atomic_store_explicit(&t->stack_lo, lo, memory_order_relaxed);
            atomic_store_explicit(&t->stack_hi, hi, memory_order_release);
        }
    }
    pthread_mutex_unlock(&ag.reg_lock);
}

/* In the child of fork() (called by the agent's atfork handler, agent.c): only the forking
 * thread exists, and its cached identity belongs to the parent's thread. */
void
ag_threads_forked_child(void)
{
    unsigned i;

    ag_tls_tid = 0;
    ag_tls_thread = NULL;
    for (i = 0; i < AG_OWN_CODE_MAX; i++) {
        atomic_store(&ag.own_code_tids[i], 0); /* the parent's threads' */
    }
    ag_scan_files_close_locked(); /* the parent's process's (reg_lock is the child's alone) */
    ag_drain_parked_discard();    /* the parent's threads' records */
}

int
ag_threads_start(void)
{
    size_t len = (size_t)ag.cfg.max_threads * sizeof(struct ag_thread);
    void *p = NULL;

    pthread_once(&ag_threads_once, ag_threads_once_init);
    /* The registry outlives ag_stop(): an interposed call that read hz_wall just before a stop
     * may still touch its slot. A larger registry replaces (and leaks) a smaller one. */
    if (ag.threads == NULL || ag.threads_cap < ag.cfg.max_threads) {
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            return -ENOMEM;
        }
    }
    pthread_mutex_lock(&ag.reg_lock);
    if (p != NULL) {
        ag.threads_cap = ag.cfg.max_threads;
        /* Released: host threads in an interposer look it up without the lock. */
        __atomic_store_n(&ag.threads, (struct ag_thread *)p, __ATOMIC_RELEASE);
    }
    atomic_store(&ag.high, 0);
    pthread_mutex_unlock(&ag.reg_lock);
    return 0;
}

/* Called after the handler is gone and no handler is in flight: deletes the timers and empties
 * the rings, giving their memory back; slots and ring mappings stay, for an interposer that read
 * a slot just before the stop (ag_ip_claim writes into the ring) may still write there. */
void
ag_threads_stop(void)
{
    unsigned i, high;
    struct ag_thread *all;

    pthread_mutex_lock(&ag.reg_lock);
    all = ag.threads;
    high = atomic_load(&ag.high);
    for (i = 0; all != NULL && i < high; i++) {
        ag_ring_discard(&all[i].ring);
        ag_ring_discard(&all[i].wring);
        ag_thread_release_locked(&all[i]); /* a perf ring read into pring a last time */
        ag_ring_discard(&all[i].pring);
    }
    atomic_store(&ag.high, 0);
    ag_drain_parked_discard();    /* the exited threads' records a reclaim kept */
    ag_scan_files_close_locked(); /* the session's fds go with it */
    pthread_mutex_unlock(&ag.reg_lock);
}
