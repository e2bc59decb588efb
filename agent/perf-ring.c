/* SPDX-License-Identifier: MIT */
/*
 * agent/perf-ring.c - the perf-ring engine, a prototype behind PIPEPROF_CPU_ENGINE=perf-ring
 * (issue 22; docs/performance.md "A perf engine without a signal"). Each sampled thread's
 * cpu-clock event (as the perf engine opens it: user space only) writes its samples into a ring
 * buffer of its own, mapped here, instead of signalling the thread: the instruction pointer, the
 * time (CLOCK_MONOTONIC), the event's count (the thread's CPU time since the event was enabled),
 * the registers an unwind starts from and a copy of the user stack from SP. No signal, no
 * irq_work per sample (the wakeup watermark is half the ring and nobody polls). An agent thread
 * holding reg_lock reads the rings (the manager every 100 ms at most, ag_cpu_flush, the drain, a
 * thread's exit hook), unwinds each sample from its copy with the signal handler's unwinder
 * (reads bounded to the copy) and writes it to the thread's pring as the handler writes a CPU
 * sample to its ring, so the drain and everything after it see the usual records. Weights come
 * from the CPU time each sample carries (ag_sig_cpu_weigh, as the handler's), so a thread's
 * weights add up to its CPU time; the intervals a sample carries beyond its own were spent in the
 * kernel (the event counts user mode only) and are split off as the signal perf engine splits
 * them, for the drain to place among the calls the thread's kernel locator saw (drain.c, by time;
 * docs/architecture.md, "Kernel time under perf-ring"). Context: ordinary threads, reg_lock.
 */
#include "common/perf-ring.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/arch.h"
#include "agent/cfi.h"
#include "agent/internal.h"

/* The user stack each sample copies: AG_PRING_STACK (internal.h). */
/* Ring data pages: the fewest (a power of two, at least AG_PRING_BYTES_MIN) that hold
 * AG_PRING_HOLD_MS of samples at the rate, at most AG_PRING_PAGES_MAX. The pages are locked
 * memory, which bounds the threads that get a ring unprivileged (perf_event_mlock_kb per CPU,
 * then RLIMIT_MEMLOCK): at 250 and 100 Hz a ring is 8+1 pages of 4 KiB, 255 threads in the
 * default 516 KiB x 2 CPUs + 8 MiB, where rings of 200 ms (64+1 pages at 250 Hz) fitted 34. The
 * manager reads a small ring more often (ag_pring_read_period_ns): half of what it holds. */
#define AG_PRING_HOLD_MS   25u
#define AG_PRING_BYTES_MIN 32768u
#define AG_PRING_PAGES_MAX 256u
/* A sample's record at most, but its stack copy and its registers (for the sizes above). */
#define AG_PRING_RECORD    (AG_PRING_STACK + 128u)

/* How long before a read of the ring its horizon ends (pring_horizon): a sample is stamped in
 * the overflow's interrupt and published there microseconds later; a vCPU preempted in between
 * takes longer, and then one locator record may be counted in the span next to its own. */
#define AG_PRING_HORIZON_SLACK_NS 2000000u

/* The record being read (reg_lock): the largest sample the attributes above make, with room. */
static union {
    uint64_t align;
    unsigned char b[2 * AG_PRING_STACK + 512];
} ag_pring_rec;

/* The reader's CFI row cache (reg_lock): a thread's own belongs to its handler, which still runs
 * for wall samples. */
static struct ag_cfi_cache ag_pring_cfi;

/* The code bytes around a sample's pc, copied at their page offset (reg_lock). */
static unsigned char ag_pring_code[4096] __attribute__((aligned(4096)));

/*
 * Whether a ring sample's pc is just after a system call's instruction (ag_sig_in_syscall), read
 * without faulting. The handler reads the code at its own pc, which is mapped while it runs; a
 * ring sample is read up to 100 ms after it was taken, and the library it was taken in may have
 * been unmapped since (dlclose): read directly, the reader died of SIGSEGV there in 3 of 3
 * recordings of agent-module-reuse's host at 1000 Hz under perf-ring. So the bytes of pc's page
 * around it (the page offset kept, so the arch's test of the page's edges holds) are copied with
 * process_vm_readv; without it (a seccomp filter), read directly as before.
 */
static int
ag_pring_in_syscall(uint64_t pc)
{
    uint64_t off = pc & 4095u, lo = off >= 8u ? off - 8u : 0u,
             hi = off + 8u <= 4096u ? off + 8u : 4096u;

    if (pc < 4096u) {
        return 0;
    }
    if (!ag.remote_read_ok) {
        return ag_sig_in_syscall(pc);
    }
    if (ag_sig_copy(getpid(), ag_pring_code + lo, pc - off + lo, (size_t)(hi - lo)) != 0) {
        return 0; /* unmapped since the sample: not a call's return that can be told */
    }
    return ag_sig_in_syscall((uint64_t)(uintptr_t)ag_pring_code + off);
}

static unsigned
ag_pring_pages(unsigned hz)
{
    unsigned hold = ag.cfg.test_ring_hold_ms != 0 ? ag.cfg.test_ring_hold_ms : AG_PRING_HOLD_MS;
    uint64_t bytes = (uint64_t)hz * AG_PRING_RECORD * hold / 1000u;
    long page = sysconf(_SC_PAGESIZE);
    unsigned pages = 1;

    if (bytes < AG_PRING_BYTES_MIN) {
        bytes = AG_PRING_BYTES_MIN;
    }
    while (pages < AG_PRING_PAGES_MAX && (uint64_t)pages * (uint64_t)page < bytes) {
        pages *= 2;
    }
    return pages;
}

uint64_t
ag_pring_read_period_ns(unsigned hz)
{
    uint64_t bytes = (uint64_t)ag_pring_pages(hz) * (uint64_t)sysconf(_SC_PAGESIZE), period;

    if (ag.cfg.test_ring_read_ms != 0) {
        return (uint64_t)ag.cfg.test_ring_read_ms * 1000000u;
    }
    if (hz == 0) {
        return (uint64_t)AG_PRING_READ_MS * 1000000u;
    }
    /* half the samples the ring holds, at the rate */
    period = bytes / AG_PRING_RECORD * 1000000000u / hz / 2u;
    return period < (uint64_t)AG_PRING_READ_MS * 1000000u ? period
                                                          : (uint64_t)AG_PRING_READ_MS * 1000000u;
}

int
ag_pring_open_locked(struct ag_thread *t, int32_t tid, unsigned hz)
{
    struct perf_event_attr attr, fattr;
    long page = sysconf(_SC_PAGESIZE);
    unsigned pages = ag_pring_pages(hz);
    size_t len = (size_t)(pages + 1u) * (size_t)page;
    struct timespec ts;
    void *base;
    int fd, err;

    ag_perf_attr_init(&attr, hz);
    attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_READ |
                       PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    /* The group's counts (the CPU time since the event was enabled, and the page faults the
     * thread took in user mode, its member's, when it could be opened). */
    attr.read_format = PERF_FORMAT_GROUP;
    attr.use_clockid = 1;
    attr.clockid = CLOCK_MONOTONIC;
    attr.sample_regs_user = AG_ARCH_PERF_REGS_MASK;
    attr.sample_stack_user = AG_PRING_STACK;
    /* The kernel's irq_work wakes the ring's pollers (none) each time this many bytes more
     * were written, whatever was read: the whole ring, the fewest it allows (one wakeup per
     * 7.8 samples of 8 pages, where half the ring asked for two). */
    attr.watermark = 1;
    attr.wakeup_watermark = (uint32_t)((size_t)pages * (size_t)page);
    err = ag_perf_event_open(&attr, tid, -1, &fd);
    if (err != 0) {
        return err;
    }
    base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        err = errno;
        close(fd);
        return err == EPERM || err == ENOMEM ? 1 : -err;
    }
    if (t->pring.slots == NULL &&
        ag_ring_init(&t->pring, ag.cfg.ring_slots, ag.cfg.max_frames) != 0) {
        munmap(base, len);
        close(fd);
        return -ENOMEM;
    }
    /* Page faults are kernel time outside any system call (the signal perf engine reads them
     * with getrusage in its handler, sig-handler.c): a software counter in the event's group,
     * user mode only as the event is, read with each sample. Without it (refused), a span's
     * kernel time is always placed among the calls seen. */
    ag_perf_attr_init(&fattr, hz);
    fattr.config = PERF_COUNT_SW_PAGE_FAULTS;
    fattr.sample_period = 0; /* counting only */
    fattr.disabled = 0;      /* enabled with its leader */
    fattr.use_clockid = 1;   /* a group's events share their clock */
    fattr.clockid = CLOCK_MONOTONIC;
    if (ag_perf_event_open(&fattr, tid, fd, &t->ring_faults_fd) != 0) {
        t->ring_faults_fd = -1;
    }
    t->ring_faults = 0;
    t->ring_lost_w = 0;
    (void)ag_timer_baseline(t, tid);
    /* The count starts at the enable: the thread's CPU time then is its origin. */
    t->ring_cpu_base = clock_gettime(ag_thread_cpu_clock(tid), &ts) == 0
                               ? (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec
                               : 0;
    t->ring_count_base = 0;
    t->ring_cpu_to = 0;
    if (ioctl(fd, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP) != 0) {
        err = -errno;
        if (t->ring_faults_fd >= 0) {
            close(t->ring_faults_fd);
            t->ring_faults_fd = -1;
        }
        munmap(base, len);
        close(fd);
        return err;
    }
    t->ring_fd = fd;
    t->ring_base = base;
    t->ring_map_len = len;
    t->timer_hz = hz;
    atomic_store_explicit(&t->has_ring, 1, memory_order_release);
    ag_log(AG_LOG_DEBUG, "cpu engine perf-ring: thread %d on a ring of %u+1 pages", (int)tid,
           pages);
    /* A new rate's ring may be due sooner than the manager's sleep ends (ag_manager_main). */
    ag_manager_wake();
    return 0;
}

/* Its first kernel time and no locator yet (as the signal perf engine's first split asks, but
 * only for a split taken at a call's return: a thread that makes no calls gets none, where the
 * signal perf engine armed one at its first split and retired it idle a second later): the
 * manager arms one (timer.c). Once per thread. */
static void
ag_pring_ask_locator(struct ag_thread *t, int in_kernel)
{
    if (!in_kernel || atomic_load_explicit(&t->kern_locating, memory_order_relaxed) ||
        atomic_load_explicit(&t->kern_retired, memory_order_relaxed) ||
        atomic_exchange_explicit(&t->kern_asked, 1, memory_order_relaxed)) {
        return;
    }
    atomic_store_explicit(&ag.kern_asked, 1, memory_order_release);
    ag_manager_wake();
}

/* Reserves a slot of t->pring for a sample of t, counting a full ring as a lost sample. */
static struct ag_sample *
ag_pring_reserve(struct ag_thread *t)
{
    struct ag_sample *s = ag_ring_reserve(&t->pring);

    if (s == NULL) {
        atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&ag.n_lost, 1, memory_order_relaxed);
    }
    return s;
}

/*
 * The thread's CPU clock at a sample whose event count was count. The count is perf's cpu-clock,
 * which runs while the thread is on its CPU, stolen time included (and the interrupts' time);
 * the thread's clock does not count those, and weights follow the thread's clock (sig-handler.c,
 * AG_WEIGH_EARLY). So a count between the last read's pair (the count and the clock, read
 * together) and this read's maps to the clock in proportion; a count with no pair after it, or
 * a pair the clock ran ahead of the count in, maps one to one from the last pair.
 */
uint64_t
ag_pring_cpu(const struct ag_thread *t, uint64_t count)
{
    uint64_t dc = t->ring_count_to - t->ring_count_base, dt = t->ring_cpu_to - t->ring_cpu_base;

    if (count <= t->ring_count_base) {
        return t->ring_cpu_base;
    }
    if (t->ring_cpu_to == 0 || t->ring_count_to <= t->ring_count_base ||
        t->ring_cpu_to < t->ring_cpu_base || dt >= dc) {
        return t->ring_cpu_base + (count - t->ring_count_base);
    }
    return t->ring_cpu_base + (uint64_t)((unsigned __int128)(count - t->ring_count_base) * dt / dc);
}

void
ag_pring_pair_next(struct ag_thread *t)
{
    if (t->ring_cpu_to != 0 && t->ring_count_to > t->ring_count_base &&
        t->ring_cpu_to >= t->ring_cpu_base) {
        t->ring_count_base = t->ring_count_to;
        t->ring_cpu_base = t->ring_cpu_to;
    }
    t->ring_cpu_to = 0;
}

/* The event's count and the thread's CPU clock now, for ag_pring_cpu (0 and 0: unknown). */
static void
ag_pring_clocks(struct ag_thread *t, int32_t tid)
{
    uint64_t v[3] = { 0, 0, 0 };
    struct timespec ts;

    t->ring_count_to = 0;
    t->ring_cpu_to = 0;
    if (read(t->ring_fd, v, sizeof(v)) < (ssize_t)(2 * sizeof(uint64_t)) || v[0] == 0 ||
        clock_gettime(ag_thread_cpu_clock(tid), &ts) != 0) {
        return; /* (nr, then the leader's count first) */
    }
    t->ring_count_to = v[1];
    t->ring_cpu_to = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * One PERF_RECORD_SAMPLE of t (size bytes in ag_pring_rec) into t->pring, with the signal perf
 * engine's kernel-time split (sig-handler.c): the event counts in user mode only, so a sample that
 * carries k intervals of CPU saw k-1 overflows skipped in the kernel. They go first, as an
 * AG_SOURCE_KERNEL record ending where the sample's own interval begins (depth 0: the drain
 * shares it among the calls the thread's kernel locator saw in the span, which it finds in the
 * thread's own ring by time), then the sample with its own interval. A sample taken as a system
 * call returned (its pc just after the call instruction) is the call's: a [kernel] leaf over its
 * stack, and a call seen. A span whose page-fault count moved (the event's group member, read
 * with the sample) took kernel time outside any call: its faults' bound is not placed, over the
 * next sample's stack (ag_sig_split_faulted).
 */
static void
ag_pring_sample(struct ag_thread *t, int32_t tid, size_t size)
{
    const unsigned char *p = ag_pring_rec.b + sizeof(struct perf_event_header);
    const unsigned char *end = ag_pring_rec.b + size;
    uint64_t v[AG_ARCH_PERF_REGS_N], ts, count, faults = 0, abi, sz, dyn = 0, cpu, delta, period;
    uint64_t kernel_ns = 0, own, nr, fault_n = 0, lost_ns;
    struct ag_arch_regs regs;
    struct ag_unwind_result res;
    struct ag_unwind_ctx c;
    struct ag_sample *s;
    uint32_t weight, kernel_w = 0, skip = 0, early, lost_w;
    unsigned i;
    int in_kernel, faulted = 0;

    if (t->timer_hz == 0 || (size_t)(end - p) < 6 * 8) {
        return;
    }
    /* IP, PID/TID, TIME, READ (the count; with the fault counter, nr and both counts),
     * REGS_USER (abi, registers), STACK_USER */
    if ((int32_t)(pp_perf_ring_u64(p + 8) >> 32) != tid) {
        return; /* cannot happen: the event is this thread's */
    }
    ts = pp_perf_ring_u64(p + 16);
    p += 24;
    nr = pp_perf_ring_u64(p);
    if (nr == 0 || nr > 2 || (size_t)(end - p) < 8 * (nr + 2)) {
        return;
    }
    count = pp_perf_ring_u64(p + 8);
    if (nr == 2) {
        faults = pp_perf_ring_u64(p + 16);
    }
    p += 8 * (nr + 1);
    abi = pp_perf_ring_u64(p);
    p += 8;
    memset(&regs, 0, sizeof(regs));
    regs.pc = pp_perf_ring_u64(ag_pring_rec.b + sizeof(struct perf_event_header));
    if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
        if ((size_t)(end - p) < 8 * AG_ARCH_PERF_REGS_N + 8) {
            return;
        }
        for (i = 0; i < AG_ARCH_PERF_REGS_N; i++) {
            v[i] = pp_perf_ring_u64(p + 8 * i);
        }
        p += 8 * AG_ARCH_PERF_REGS_N;
        ag_arch_perf_regs(v, &regs);
    }
    if ((size_t)(end - p) < 8) {
        return;
    }
    sz = pp_perf_ring_u64(p);
    p += 8;
    if (sz != 0 && sz <= (uint64_t)(end - p) && (uint64_t)(end - p) - sz >= 8) {
        dyn = pp_perf_ring_u64(p + sz);
        dyn = dyn < sz ? dyn : sz;
    }
    period = 1000000000u / t->timer_hz;
    cpu = ag_pring_cpu(t, count);
    weight = (uint32_t)ag_sig_cpu_weigh(t, cpu, period, AG_WEIGH_EARLY, &delta);
    if (weight == 0) {
        /* Early by the thread's clock (sig-handler.c): no sample, its CPU goes to the next. */
        atomic_fetch_add_explicit(&t->perf_early, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&ag.n_perf_early, 1, memory_order_relaxed);
        return;
    }
    early = atomic_exchange_explicit(&t->perf_early, 0, memory_order_relaxed);
    own = delta != 0 ? delta : period;
    lost_w = t->ring_lost_w;
    t->ring_lost_w = 0;
    if (nr == 2) {
        faulted = faults != t->ring_faults;
        fault_n = faults - t->ring_faults;
        t->ring_faults = faults;
    }
    /* Two slots or none: a split-off record is always followed by its sample (the drain orders
     * the pair by the sample's time). A sample dropped here was weighed above, its span counted
     * lost with it: left to the next sample (as before), its CPU came back there as weight
     * beyond one interval, kernel time to a call seen or [kernel, not placed] (issue 19). */
    if (t->pring.slots == NULL ||
        atomic_load_explicit(&t->pring.head, memory_order_relaxed) -
                        atomic_load_explicit(&t->pring.tail, memory_order_acquire) >=
                t->pring.mask) {
        ag_sig_count_lost(t, own);
        return;
    }
    if (lost_w != 0) {
        /* The samples the kernel could not write (PERF_RECORD_LOST) came in user mode, one
         * interval each, and their CPU is in this span: not kernel time, and not this stack's.
         * Counted lost; this sample keeps its own interval and what the kernel skipped. */
        lost_w = lost_w < weight - 1u ? lost_w : weight - 1u;
        lost_ns = own / weight * lost_w;
        atomic_fetch_add_explicit(&ag.cpu_lost_ns, lost_ns, memory_order_relaxed);
        weight -= lost_w;
        own -= lost_ns;
        delta = delta != 0 ? delta - lost_ns : 0;
    }
    /* An overflow due in a system call's exit path, where interrupts are off until the return,
     * is taken just after it: its interval ended in the kernel (sig-handler.c). */
    in_kernel = ag_pring_in_syscall(regs.pc);
    if (in_kernel) {
        atomic_fetch_add_explicit(&t->kern_sites, 1, memory_order_relaxed);
    }
    if (weight > 1u + early) {
        kernel_w = weight - 1u - early; /* (the early overflows came in user mode) */
        kernel_ns = own / weight * kernel_w;
        atomic_fetch_add_explicit(&t->kern_w, kernel_w, memory_order_relaxed);
        ag_pring_ask_locator(t, in_kernel);
        s = ag_ring_reserve(&t->pring);
        s->timestamp_ns = ts - (own - kernel_ns);
        s->cpu_time_ns = cpu - (own - kernel_ns);
        s->tid = tid;
        s->mode = AG_MODE_CPU;
        s->state = AG_STATE_RUNNING;
        s->source = AG_SOURCE_KERNEL;
        s->engine = AG_CPU_ENGINE_PERF_RING;
        s->weight = (uint16_t)kernel_w;
        s->cpu_delta_ns = kernel_ns;
        s->depth = 0; /* the drain gives it a stack */
        if (faulted) {
            /* Not to be placed under a call, up to the faults' bound: the drain puts that over
             * the next sample's stack. */
            ag_sig_split_faulted(s, fault_n);
        }
        s->unwinder = AG_UNWINDER_NONE;
        s->end = AG_UNWIND_END_LEAF_ONLY;
        ag_ring_commit(&t->pring);
        own -= kernel_ns;
    }
    /* (at a call's return, the sample's own interval is kernel time too) */
    atomic_fetch_add_explicit(&ag.cpu_kernel_ns, in_kernel ? own + kernel_ns : kernel_ns,
                              memory_order_relaxed);
    s = ag_pring_reserve(t);
    if (s == NULL) {
        return; /* cannot happen: two slots were free */
    }
    s->timestamp_ns = ts;
    s->cpu_time_ns = cpu;
    s->tid = tid;
    s->mode = AG_MODE_CPU;
    s->state = AG_STATE_RUNNING;
    s->source = AG_SOURCE_SIGNAL; /* a sample of the running thread, as the handler's */
    s->engine = AG_CPU_ENGINE_PERF_RING;
    s->weight = (uint16_t)(weight - kernel_w);
    s->cpu_delta_ns = own;
    if (in_kernel) {
        s->frames[0] = (uint64_t)(uintptr_t)pipeprof_cpu_in_kernel; /* the [kernel] leaf */
        skip = 1;
    }
    ag_sig_unwind_ctx_init(&c, regs.sp, 0, 0);
    c.remote_ok = 0;
    c.cache = &ag_pring_cfi;
    c.lr = regs.lr;
    if (dyn != 0 && regs.sp != 0) {
        c.copy = p;
        c.copy_sp = regs.sp;
        c.copy_len = dyn;
    } else {
        c.copy = ag_pring_rec.b; /* no copy: nothing but the registers is read */
        c.copy_sp = 0;
        c.copy_len = 0;
    }
    ag_sig_unwind(&c, regs.pc, regs.sp, regs.fp, 0, s->frames + skip, ag.cfg.max_frames - skip,
                  &res);
    s->depth = res.depth + skip;
    s->unwinder = res.unwinder;
    s->end = res.end;
    if (res.end == AG_UNWIND_END_READ_FAULT && dyn != 0 && dyn >= AG_PRING_STACK) {
        /* The copy was full (the kernel clips it at the stack's end otherwise) and the walk
         * needed what lies above it: a stack deeper than the copy, cut. Auto moves such a
         * thread to perf's signal, whose handler walks the live stack (timer.c). */
        t->ring_cut++;
    }
    ag_ring_commit(&t->pring);
    atomic_store_explicit(&t->last_claim_ns, ts, memory_order_relaxed);
    atomic_fetch_add_explicit(&ag.n_cpu_weight, weight, memory_order_relaxed);
    if (delta != 0) {
        atomic_fetch_add_explicit(&ag.cpu_sampled_ns, delta, memory_order_relaxed);
        atomic_fetch_add_explicit(&ag.cpu_sampled_n, 1, memory_order_relaxed);
    }
    if (res.cfi_steps != 0) {
        atomic_fetch_add_explicit(&ag.n_cfi_steps, res.cfi_steps, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&ag.n_samples, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ag.n_cpu, 1, memory_order_relaxed);
}

void
ag_pring_read_locked(struct ag_thread *t)
{
    struct perf_event_mmap_page *pg = t->ring_base;
    const unsigned char *data;
    uint64_t head, tail, now;
    struct perf_event_header h;
    int32_t tid = atomic_load_explicit(&t->tid, memory_order_relaxed);

    if (!atomic_load_explicit(&t->has_ring, memory_order_relaxed) || pg == NULL) {
        return;
    }
    /* The time first: a sample stamped before it (by AG_PRING_HORIZON_SLACK_NS: the kernel
     * stamps a sample before it publishes it) is in the ring at the head read next. */
    now = ag_now_ns();
    data = (const unsigned char *)t->ring_base + pg->data_offset;
    head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE); /* the kernel's writes before */
    tail = pg->data_tail;
    if (tail < head && t->ring_fd >= 0) {
        ag_pring_clocks(t, tid); /* after the head: the samples before it have smaller counts */
    }
    while (tail < head) {
        pp_perf_ring_copy(pg, data, tail, &h, sizeof(h));
        if (h.size < sizeof(h)) {
            tail = head; /* cannot happen; the rest is skipped rather than read forever */
            break;
        }
        if (h.size <= sizeof(ag_pring_rec.b)) {
            pp_perf_ring_copy(pg, data, tail, ag_pring_rec.b, h.size);
            if (h.type == PERF_RECORD_SAMPLE) {
                ag_pring_sample(t, tid, h.size);
            } else if (h.type == PERF_RECORD_LOST && h.size >= sizeof(h) + 16) {
                uint64_t lost = pp_perf_ring_u64(ag_pring_rec.b + sizeof(h) + 8); /* id, lost */

                atomic_fetch_add_explicit(&t->dropped, lost, memory_order_relaxed);
                atomic_fetch_add_explicit(&ag.n_lost, lost, memory_order_relaxed);
                atomic_fetch_add_explicit(&ag.n_ring_lost, lost, memory_order_relaxed);
                t->ring_lost_w += lost; /* their CPU: the next sample's span takes it out */
            }
        }
        tail += h.size;
    }
    __atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE); /* the space is the kernel's */
    ag_pring_pair_next(t); /* the next read's samples map from this read's pair */
    /* After the samples' commits: a drain that reads this horizon finds them in pring. */
    atomic_store_explicit(&t->pring_horizon,
                          now > AG_PRING_HORIZON_SLACK_NS ? now - AG_PRING_HORIZON_SLACK_NS : 0,
                          memory_order_release);
}

/* Closes t's page-fault counter, if it has one. */
static void
ag_pring_close_faults(struct ag_thread *t)
{
    if (t->ring_faults_fd >= 0) {
        close(t->ring_faults_fd);
        t->ring_faults_fd = -1;
    }
}

void
ag_pring_close_locked(struct ag_thread *t)
{
    if (!atomic_load_explicit(&t->has_ring, memory_order_relaxed)) {
        return;
    }
    (void)ioctl(t->ring_fd, PERF_EVENT_IOC_DISABLE, 0);
    ag_pring_read_locked(t);
    atomic_store_explicit(&t->has_ring, 0, memory_order_release);
    munmap(t->ring_base, t->ring_map_len);
    close(t->ring_fd);
    ag_pring_close_faults(t);
    t->ring_base = NULL;
    t->ring_map_len = 0;
    t->ring_fd = -1;
    t->timer_hz = 0;
}

void
ag_pring_read_all(void)
{
    unsigned i, high;

    pthread_mutex_lock(&ag.reg_lock);
    high = atomic_load_explicit(&ag.high, memory_order_relaxed);
    for (i = 0; ag.threads != NULL && i < high; i++) {
        struct ag_thread *t = &ag.threads[i];

        if (atomic_load_explicit(&t->state, memory_order_relaxed) == AG_SLOT_ACTIVE) {
            ag_pring_read_locked(t);
        }
    }
    pthread_mutex_unlock(&ag.reg_lock);
}

void
ag_pring_forked_child(struct ag_thread *t)
{
    if (atomic_load_explicit(&t->has_ring, memory_order_relaxed)) {
        munmap(t->ring_base, t->ring_map_len);
        close(t->ring_fd);
        ag_pring_close_faults(t);
        t->ring_base = NULL;
        t->ring_map_len = 0;
        t->ring_fd = -1;
        atomic_store_explicit(&t->has_ring, 0, memory_order_relaxed);
    }
}
