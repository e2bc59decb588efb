/* SPDX-License-Identifier: MIT */
/*
 * tests/test-agent-cfi.c - the compact DWARF CFI tables (agent/cfi.c) and the signal-safe step
 * (agent/sig-cfi.c): a chain built with -O2 -fomit-frame-pointer (tests/fixtures/
 * agent-cfi-chain.c) unwinds to main and _start, frame by frame equal to libgcc's
 * _Unwind_Backtrace; known rows of the chain; an interrupted (signal) context; corrupt
 * .eh_frame_hdr input; the per-thread row cache (same walks, emptied by a new snapshot); a leaf
 * without CFI interrupted at its entry, before its frame record, keeps its caller (Go's
 * runtime.asyncPreempt, by a handler that preempts as Go's does).
 * x86_64 and aarch64 (there, the fixture is built with return addresses signed where the
 * processor has pointer authentication, and a leaf returns through x30).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#include "agent/cfi.h"
#include "agent/internal.h"
#include "agent/symbols-internal.h"
#include "tests/fixtures/agent-cfi-chain.h"
#include "tests/fixtures/agent-entry-stubs.h"
#include "tests/test.h"

#define MAX_FRAMES 256

struct stack_bounds {
    uint64_t lo, hi;
};

/* The guarded reader: only 8-byte words inside the current thread's stack. */
static int
read_stack(void *ctx, uint64_t addr, uint64_t *out)
{
    const struct stack_bounds *b = ctx;

    if (addr < b->lo || addr > b->hi - 8 || addr % 8 != 0) {
        return -EFAULT;
    }
    memcpy(out, (const void *)(uintptr_t)addr, 8);
    return 0;
}

static void
stack_bounds_get(struct stack_bounds *b)
{
    pthread_attr_t attr;
    void *addr;
    size_t size;

    ASSERT_OK(pthread_getattr_np(pthread_self(), &attr));
    ASSERT_OK(pthread_attr_getstack(&attr, &addr, &size));
    pthread_attr_destroy(&attr);
    b->lo = (uint64_t)(uintptr_t)addr;
    b->hi = b->lo + size;
}

struct trace {
    uint64_t ours[MAX_FRAMES];
    int n_ours;
    int last_rc;
    uint64_t ub[MAX_FRAMES];
    int n_ub;
};

static _Unwind_Reason_Code
ub_frame(struct _Unwind_Context *uc, void *arg)
{
    struct trace *t = arg;

    if (t->n_ub == MAX_FRAMES) {
        return _URC_END_OF_STACK;
    }
    /* libgcc reports the frame above _start (RA undefined) with IP 0; we end at _start. */
    if (_Unwind_GetIP(uc) == 0) {
        return _URC_END_OF_STACK;
    }
    t->ub[t->n_ub++] = (uint64_t)_Unwind_GetIP(uc);
    return _URC_NO_REASON;
}

/* Unwinds from regs with the CFI step only; frames[0] is regs->pc. */
static void
cfi_unwind(struct ag_cfi_regs regs, int first_is_ra, struct trace *t)
{
    struct stack_bounds b;
    int rc = 0;

    stack_bounds_get(&b);
    t->n_ours = 0;
    t->ours[t->n_ours++] = regs.pc;
    while (t->n_ours < MAX_FRAMES) {
        rc = ag_sig_cfi_step(&regs, t->n_ours > 1 || first_is_ra, read_stack, &b);
        if (rc != 0) {
            break;
        }
        t->ours[t->n_ours++] = regs.pc;
    }
    t->last_rc = rc;
}

__attribute__((noinline)) static int
chain_leaf(void *arg)
{
    struct trace *t = arg;
    uint64_t r[3];

    cfi_capture_regs(r);
    cfi_unwind((struct ag_cfi_regs){ r[0], r[1], r[2], 0 }, 1, t);
    _Unwind_Backtrace(ub_frame, t);
    return t->n_ours;
}

static const char *
frame_name(uint64_t pc)
{
    static char name[8][128];
    static int next;
    struct ag_symbol s;
    char *buf = name[next++ % 8];

    if (ag_symbolize(pc - 1, &s) != 0) {
        return "?";
    }
    snprintf(buf, sizeof(name[0]), "%s", s.name);
    return buf;
}

/* Ours from frame 1 on must equal _Unwind_Backtrace's from frame 1 on (frame 0 differs: the
 * capture call and the _Unwind_Backtrace call are two call sites in chain_leaf). */
static void
check_against_libgcc(const struct trace *t)
{
    ASSERT_EQ(t->last_rc, AG_CFI_STEP_END);
    ASSERT_EQ(t->n_ours, t->n_ub);
    for (int i = 1; i < t->n_ours; i++) {
        if (t->ours[i] != t->ub[i]) {
            test_fail(__FILE__, __LINE__, "frame %d: ours %#llx (%s) libgcc %#llx (%s)", i,
                      (unsigned long long)t->ours[i], frame_name(t->ours[i]),
                      (unsigned long long)t->ub[i], frame_name(t->ub[i]));
        }
    }
}

TEST(cfi_chain_unwinds_to_main_like_libgcc)
{
    struct trace t = { 0 };
    int saw_main = 0, saw_start = 0;

    ASSERT_TRUE(ag_modules_refresh() >= 0);
    ASSERT_TRUE(cfi_chain_a(3, chain_leaf, &t) > 0);
    ASSERT_STR_EQ(frame_name(t.ours[0]), "chain_leaf");
    ASSERT_STR_EQ(frame_name(t.ours[1]), "cfi_chain_c");
    ASSERT_STR_EQ(frame_name(t.ours[2]), "cfi_chain_b");
    ASSERT_STR_EQ(frame_name(t.ours[3]), "cfi_chain_a");
    ASSERT_STR_EQ(frame_name(t.ours[4]), "test_cfi_chain_unwinds_to_main_like_libgcc");
    for (int i = 5; i < t.n_ours; i++) {
        /* main may tail-call the harness's test_main and then is no frame of its own. */
        saw_main |= strcmp(frame_name(t.ours[i]), "main") == 0 ||
                    strcmp(frame_name(t.ours[i]), "test_main") == 0;
        saw_start |= strcmp(frame_name(t.ours[i]), "_start") == 0;
    }
    ASSERT_TRUE(saw_main);
    ASSERT_TRUE(saw_start);
    check_against_libgcc(&t);
    ag_modules_fini();
}

/* A 2 KiB frame that keeps a frame record: gcc puts an aarch64 record at the bottom of such a
 * frame, x29 saved 2 KiB below the CFA (out of a row's fp_off8), as in the agent's own
 * ag_thread_blocking_enter; x86-64 saves rbp right under the return address. */
__attribute__((noinline, optimize("no-omit-frame-pointer"))) static int
big_frame(void *arg)
{
    volatile char big[2048];
    int r;

    big[0] = 1;
    r = chain_leaf(arg);
    return r + big[0];
}

/* The fp saved far from the CFA must be recovered: cfi_chain_a, above, finds its CFA through
 * it (alloca). */
TEST(cfi_fp_saved_far_below_the_cfa_is_recovered)
{
    struct trace t = { 0 };

    ASSERT_TRUE(ag_modules_refresh() >= 0);
    ASSERT_TRUE(cfi_chain_a(3, big_frame, &t) > 0);
    ASSERT_STR_EQ(frame_name(t.ours[1]), "big_frame");
    ASSERT_STR_EQ(frame_name(t.ours[2]), "cfi_chain_c");
    ASSERT_STR_EQ(frame_name(t.ours[4]), "cfi_chain_a");
    check_against_libgcc(&t);
    ag_modules_fini();
}

TEST(cfi_deep_recursion_like_libgcc)
{
    struct trace t = { 0 };
    int n_rec = 0;

    ASSERT_TRUE(ag_modules_refresh() >= 0);
    ASSERT_TRUE(cfi_chain_recurse(100, chain_leaf, &t) > 0);
    for (int i = 1; i < t.n_ours; i++) {
        n_rec += strcmp(frame_name(t.ours[i]), "cfi_chain_recurse") == 0;
    }
    ASSERT_EQ(n_rec, 101);
    check_against_libgcc(&t);
    ag_modules_fini();
}

/* Rows at the entry of a function: CFA = rsp + 8, RA at CFA - 8, rbp unchanged (x86-64); CFA =
 * sp, RA still in x30, x29 unchanged (aarch64). */
TEST(cfi_rows_at_function_entry)
{
    struct ag_module_info info;
    const struct ag_module_span *span;
    const struct ag_cfi_row *row;
    uint64_t fn = (uint64_t)(uintptr_t)&cfi_chain_c;

    ASSERT_TRUE(ag_modules_refresh() >= 0);
    ASSERT_OK(ag_module_find(fn, &info));
    span = ag_sig_module_find(fn);
    ASSERT_TRUE(span != NULL && span->cfi != NULL);
    ASSERT_U64_EQ(span->cfi->base, info.base);
    ASSERT_EQ(span->cfi->n, info.cfi_rows);
    row = ag_sig_cfi_row_find(span->cfi, fn - info.base);
    ASSERT_TRUE(row != NULL);
    ASSERT_EQ(row->flags & AG_CFI_CFA_MASK, AG_CFI_CFA_SP);
    if (AG_ARCH_LINK_REGISTER) {
        ASSERT_EQ(row->cfa_off, 0);
        ASSERT_EQ(row->flags & AG_CFI_RA_MASK, AG_CFI_RA_LR);
    } else {
        ASSERT_EQ(row->cfa_off, 8);
        ASSERT_EQ(row->flags & AG_CFI_RA_MASK, AG_CFI_RA_AT);
        ASSERT_EQ(row->ra_off, -8);
    }
    ASSERT_EQ(row->flags & AG_CFI_FP_MASK, AG_CFI_FP_SAME);
    /* Inside cfi_chain_a (alloca) some row must use the rbp-based CFA. */
    {
        int fp_rows = 0;
        uint64_t a = (uint64_t)(uintptr_t)&cfi_chain_a - info.base;

        for (size_t i = 0; i < span->cfi->n; i++) {
            const struct ag_cfi_row *r = &span->cfi->rows[i];

            if (r->addr >= a && r->addr < a + 128 &&
                (r->flags & AG_CFI_CFA_MASK) == AG_CFI_CFA_FP) {
                fp_rows++;
            }
        }
        ASSERT_TRUE(fp_rows > 0);
    }
    /* Below the first row and in no module: nothing. */
    ASSERT_TRUE(ag_sig_module_find(8) == NULL);
    ag_modules_fini();
}

static struct trace sig_trace;
static struct stack_bounds sig_bounds;
static volatile sig_atomic_t sig_done;
static volatile sig_atomic_t sig_armed; /* set once the chain is on the stack */

static void
on_sigprof(int signo, siginfo_t *info, void *uctx)
{
    struct ag_arch_regs ar;
    struct ag_cfi_regs regs;
    int rc = 0;

    (void)signo;
    (void)info;
    if (sig_done || !sig_armed) {
        return;
    }
    (void)ag_arch_sig_regs(uctx, &ar);
    regs = (struct ag_cfi_regs){ ar.pc, ar.sp, ar.fp, ar.lr };
    sig_trace.n_ours = 0;
    sig_trace.ours[sig_trace.n_ours++] = regs.pc;
    while (sig_trace.n_ours < MAX_FRAMES) {
        rc = ag_sig_cfi_step(&regs, sig_trace.n_ours > 1, read_stack, &sig_bounds);
        if (rc != 0) {
            break;
        }
        sig_trace.ours[sig_trace.n_ours++] = regs.pc;
    }
    sig_trace.last_rc = rc;
    sig_done = 1;
}

static int
spin_leaf(void *arg)
{
    (void)arg;
    sig_armed = 1;
    while (!sig_done) {
        __asm__ volatile("" ::: "memory");
    }
    return 1;
}

/* From an interrupted context (exact pc, first frame not a return address). */
TEST(cfi_unwinds_from_signal_context)
{
    struct sigaction sa;
    struct itimerval it = { { 0, 1000 }, { 0, 1000 } };
    int found = 0;

#if defined(__SANITIZE_THREAD__)
    /* TSan defers asynchronous signals to its own safe points, so the interrupted context is
     * never inside spin_leaf and the case would spin forever. */
    test_skip("ThreadSanitizer delays SIGPROF delivery; unwinding from a signal is covered by "
              "the other builds");
#endif
    ASSERT_TRUE(ag_modules_refresh() >= 0);
    stack_bounds_get(&sig_bounds);
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigprof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    ASSERT_OK(sigaction(SIGPROF, &sa, NULL));
    ASSERT_OK(setitimer(ITIMER_PROF, &it, NULL));
    ASSERT_TRUE(cfi_chain_a(1, spin_leaf, NULL) > 0);
    memset(&it, 0, sizeof(it));
    ASSERT_OK(setitimer(ITIMER_PROF, &it, NULL));
    ASSERT_EQ(sig_trace.last_rc, AG_CFI_STEP_END);
    ASSERT_TRUE(sig_trace.n_ours >= 6);
    for (int i = 0; i < sig_trace.n_ours; i++) {
        found += strcmp(frame_name(sig_trace.ours[i] - (i > 0)), "cfi_chain_b") == 0;
    }
    ASSERT_EQ(found, 1);
    ag_modules_fini();
}

/* Garbage after a valid-looking .eh_frame_hdr header never reads outside the span. */
TEST(cfi_build_rejects_corrupt_eh_frame_hdr)
{
    static const uint8_t hdr1[] = { 1, 0x1b, 0x03, 0x3b, 0x10, 0, 0, 0, 0xff, 0xff, 0xff, 0x0f };
    static const uint8_t hdr2[] = { 1, 0x1b, 0x03, 0x3b, 0x00, 0,    0,    0,    2, 0, 0, 0,
                                    0, 0,    0,    0,    0xf0, 0xff, 0xff, 0x7f, 0, 0, 0, 0 };
    static const uint8_t hdr3[] = { 1, 0x1b };
    static const uint8_t hdr4[] = { 2, 0x1b, 0x03, 0x3b };
    static const struct {
        const uint8_t *b;
        size_t n;
    } cases[] = { { hdr1, sizeof(hdr1) },
                  { hdr2, sizeof(hdr2) },
                  { hdr3, sizeof(hdr3) },
                  { hdr4, sizeof(hdr4) } };

    for (size_t i = 0; i < PP_ARRAY_SIZE(cases); i++) {
        const uint8_t *g = test_guarded_copy(cases[i].b, cases[i].n);
        struct ag_cfi_span span = { (uint64_t)(uintptr_t)g, (uint64_t)(uintptr_t)g + cases[i].n };
        struct ag_cfi_table *t = NULL;
        int rc = ag_cfi_build(span.lo, span.lo, &span, 1, &t);

        ASSERT_TRUE(rc < 0);
        ASSERT_TRUE(t == NULL);
    }
}

/* Writes len bytes of buf to path (replacing it). */
static void
cache_file_put(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    ASSERT_TRUE(fd >= 0);
    ASSERT_TRUE(write(fd, buf, len) == (ssize_t)len);
    close(fd);
}

/* A table stored in a recording's cache comes back row for row at another load bias; a file that
 * is truncated, unsorted, of another layout or a symlink is refused, and a missing file or a
 * module without a usable build-id is a miss. */
TEST(cfi_cache_round_trip_and_bad_files)
{
    static const uint8_t id[20] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6 };
    uint64_t fn = (uint64_t)(uintptr_t)&cfi_chain_c;
    char dir[] = "/tmp/pp-test-cfi-cache.XXXXXX", path[PATH_MAX], other[PATH_MAX];
    const struct ag_module_span *span;
    struct ag_cfi_table *t = NULL;
    uint8_t *file;
    size_t len;
    int fd;

    ASSERT_TRUE(ag_modules_refresh() >= 0);
    span = ag_sig_module_find(fn);
    ASSERT_TRUE(span != NULL && span->cfi != NULL && span->cfi->n > 2);
    ASSERT_TRUE(mkdtemp(dir) != NULL);
    ASSERT_EQ(ag_cfi_cache_load(dir, id, sizeof(id), 0, &t), -ENOENT);
    ag_cfi_cache_store(dir, id, sizeof(id), span->cfi);
    ASSERT_OK(ag_cfi_cache_load(dir, id, sizeof(id), 0x1000, &t));
    ASSERT_TRUE(t != NULL && t->map != NULL);
    ASSERT_U64_EQ(t->base, 0x1000);
    ASSERT_EQ(t->n, span->cfi->n);
    ASSERT_EQ(t->fdes, span->cfi->fdes);
    ASSERT_EQ(t->unsupported, span->cfi->unsupported);
    ASSERT_TRUE(memcmp(t->rows, span->cfi->rows, t->n * sizeof(t->rows[0])) == 0);
    ag_cfi_table_free(t);
    ASSERT_EQ(ag_cfi_cache_load(dir, id, 4, 0, &t), -ENOENT); /* too short to name content */

    /* The file as stored, then spoilt in each way. */
    len = (size_t)snprintf(path, sizeof(path), "%s/cfi-", dir);
    for (size_t i = 0; i < sizeof(id); i++) {
        len += (size_t)snprintf(path + len, sizeof(path) - len, "%02x", id[i]);
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    ASSERT_TRUE(fd >= 0);
    len = (size_t)lseek(fd, 0, SEEK_END);
    file = malloc(len);
    ASSERT_TRUE(file != NULL && pread(fd, file, len, 0) == (ssize_t)len);
    close(fd);
    cache_file_put(path, file, len - 1); /* truncated */
    ASSERT_EQ(ag_cfi_cache_load(dir, id, sizeof(id), 0, &t), -EBADMSG);
    memcpy(file + len - 12, file + len - 24, 12); /* the last row repeats an address */
    cache_file_put(path, file, len);
    ASSERT_EQ(ag_cfi_cache_load(dir, id, sizeof(id), 0, &t), -EBADMSG);
    file[8] = 16; /* another row layout */
    cache_file_put(path, file, len);
    ASSERT_EQ(ag_cfi_cache_load(dir, id, sizeof(id), 0, &t), -EBADMSG);
    ASSERT_TRUE(t == NULL);
    snprintf(other, sizeof(other), "%s/elsewhere", dir);
    ASSERT_OK(rename(path, other));
    ASSERT_OK(symlink(other, path));
    ASSERT_EQ(ag_cfi_cache_load(dir, id, sizeof(id), 0, &t), -ENOENT);
    unlink(path);
    unlink(other);
    ASSERT_OK(rmdir(dir)); /* the store left no temporary file behind */
    free(file);
    ag_modules_fini();
}

/* The first address in fn's first 256 bytes whose row reads the return address from the stack
 * (after the prologue stored x30 on aarch64; fn itself on x86-64), or 0. */
static uint64_t
pc_with_ra_on_stack(uint64_t fn)
{
    const struct ag_module_span *span = ag_sig_module_find(fn);

    if (span == NULL || span->cfi == NULL) {
        return 0;
    }
    for (size_t i = 0; i < span->cfi->n; i++) {
        const struct ag_cfi_row *r = &span->cfi->rows[i];
        uint64_t at = span->cfi->base + r->addr;

        if (at >= fn && at < fn + 256 && (r->flags & AG_CFI_RA_MASK) == AG_CFI_RA_AT) {
            return at;
        }
    }
    return 0;
}

/* Bad registers fail cleanly and leave regs unchanged. */
TEST(cfi_step_rejects_bad_registers)
{
    struct stack_bounds b;
    uint64_t fn;
    struct ag_cfi_regs regs = { 8, 0, 0, 0 };

    ASSERT_TRUE(ag_modules_refresh() >= 0);
    fn = pc_with_ra_on_stack((uint64_t)(uintptr_t)&cfi_chain_c);
    ASSERT_TRUE(fn != 0);
    stack_bounds_get(&b);
    ASSERT_EQ(ag_sig_cfi_step(&regs, 0, read_stack, &b), -ENOENT); /* pc in no module */
    regs = (struct ag_cfi_regs){ fn, 8, 0, 0 };                    /* sp outside the stack */
    ASSERT_EQ(ag_sig_cfi_step(&regs, 0, read_stack, &b), -EFAULT);
    ASSERT_U64_EQ(regs.pc, fn);
    ASSERT_U64_EQ(regs.sp, 8);
    regs = (struct ag_cfi_regs){ fn, UINT64_MAX - 4, 0, 0 }; /* CFA wraps below sp */
    ASSERT_EQ(ag_sig_cfi_step(&regs, 0, read_stack, &b), -EINVAL);
    ag_modules_fini();
    regs = (struct ag_cfi_regs){ fn, b.hi - 64, 0, 0 }; /* no snapshot after fini */
    ASSERT_EQ(ag_sig_cfi_step(&regs, 0, read_stack, &b), -ENOENT);
}

/* aarch64: a frame whose row leaves the RA in x30 (a function's entry, a leaf) steps to x30 with
 * sp unchanged when the link register is known (an interrupted instruction's), and is refused
 * without it (every later frame: a call overwrote x30), so the walker falls back. */
TEST(cfi_leaf_returns_through_the_link_register)
{
    struct stack_bounds b;
    uint64_t fn = (uint64_t)(uintptr_t)&cfi_chain_c;
    struct ag_cfi_regs regs;

    if (!AG_ARCH_LINK_REGISTER) {
        test_skip("x86-64 has no link register: every return address is on the stack");
    }
    ASSERT_TRUE(ag_modules_refresh() >= 0);
    stack_bounds_get(&b);
    regs = (struct ag_cfi_regs){ fn, b.hi - 64, 0x7000, 0x5000 };
    ASSERT_EQ(ag_sig_cfi_step(&regs, 0, read_stack, &b), 0);
    ASSERT_U64_EQ(regs.pc, 0x5000);
    ASSERT_U64_EQ(regs.sp, b.hi - 64); /* no frame yet: the caller's sp */
    ASSERT_U64_EQ(regs.fp, 0x7000);    /* x29 unchanged */
    ASSERT_U64_EQ(regs.lr, 0);         /* consumed */
    regs = (struct ag_cfi_regs){ fn, b.hi - 64, 0x7000, 0 };
    ASSERT_EQ(ag_sig_cfi_step(&regs, 0, read_stack, &b), -ENOTSUP);
    ASSERT_U64_EQ(regs.pc, fn);
    ag_modules_fini();
}

/* aarch64: a return address signed with pointer authentication comes back whole. */
TEST(cfi_signed_return_address_is_stripped)
{
#if defined(__aarch64__)
    register uint64_t x17 __asm__("x17") = (uint64_t)(uintptr_t)&cfi_chain_c + 4;
    register uint64_t x16 __asm__("x16") = 0x1234; /* the modifier (a stack pointer, in code) */
    uint64_t plain = x17, signed_ra;

    __asm__("hint #8" : "+r"(x17) : "r"(x16)); /* pacia1716: signs x17 with the A key */
    signed_ra = x17;
    printf("# %#llx signed: %#llx\n", (unsigned long long)plain, (unsigned long long)signed_ra);
    ASSERT_U64_EQ(ag_arch_strip_ra(plain), plain);
    if (signed_ra == plain) {
        test_skip("no pointer authentication here (FEAT_PAuth absent or disabled): nothing to "
                  "strip");
    }
    ASSERT_U64_EQ(ag_arch_strip_ra(signed_ra), plain);
#else
    test_skip("pointer authentication is aarch64's");
#endif
}

/* ---- the per-thread row cache ---- */

static struct ag_cfi_cache row_cache;

/* cfi_unwind() through the row cache, as the handler steps. */
static void
cfi_unwind_cached(struct ag_cfi_regs regs, struct trace *t)
{
    struct stack_bounds b;
    int rc = 0;

    stack_bounds_get(&b);
    ag_sig_cfi_cache_begin(&row_cache);
    t->n_ours = 0;
    t->ours[t->n_ours++] = regs.pc;
    while (t->n_ours < MAX_FRAMES) {
        struct ag_cfi_row rule;

        ag_sig_cfi_rule_find(regs.pc - 1, &row_cache, &rule);
        rc = ag_sig_cfi_apply(&rule, &regs, read_stack, &b);
        if (rc != 0) {
            break;
        }
        t->ours[t->n_ours++] = regs.pc;
    }
    t->last_rc = rc;
}

struct cached_traces {
    struct trace plain, cold, warm;
    uint64_t cold_hits, warm_hits, warm_misses;
};

__attribute__((noinline)) static int
chain_leaf_cached(void *arg)
{
    struct cached_traces *c = arg;
    uint64_t r[3];

    cfi_capture_regs(r);
    cfi_unwind((struct ag_cfi_regs){ r[0], r[1], r[2], 0 }, 1, &c->plain);
    cfi_unwind_cached((struct ag_cfi_regs){ r[0], r[1], r[2], 0 }, &c->cold);
    c->cold_hits = row_cache.hits;
    row_cache.hits = row_cache.misses = 0;
    cfi_unwind_cached((struct ag_cfi_regs){ r[0], r[1], r[2], 0 }, &c->warm);
    c->warm_hits = row_cache.hits;
    c->warm_misses = row_cache.misses;
    return c->plain.n_ours;
}

/* Through the cache, cold (filling it) and warm (from it), a walk is the tables' own walk. */
TEST(cfi_row_cache_walks_like_the_tables)
{
    static struct cached_traces c;
    unsigned shared = 0;

    memset(&row_cache, 0, sizeof(row_cache));
    ASSERT_TRUE(ag_modules_refresh() >= 0);
    ASSERT_TRUE(cfi_chain_recurse(20, chain_leaf_cached, &c) > 20);
    ASSERT_EQ(c.plain.last_rc, AG_CFI_STEP_END);
    ASSERT_EQ(c.cold.n_ours, c.plain.n_ours);
    ASSERT_EQ(c.warm.n_ours, c.plain.n_ours);
    ASSERT_EQ(c.cold.last_rc, c.plain.last_rc);
    ASSERT_EQ(c.warm.last_rc, c.plain.last_rc);
    for (int i = 0; i < c.plain.n_ours; i++) {
        ASSERT_U64_EQ(c.cold.ours[i], c.plain.ours[i]);
        ASSERT_U64_EQ(c.warm.ours[i], c.plain.ours[i]);
    }
    /* The recursion repeats one return address: the cold walk already hits. The warm walk
     * misses only at a pc that shares its slot with another pc of the walk; where they fall
     * depends on the addresses this run was loaded at (4 misses in one ASan run of a
     * fresh-clone CI, where a fixed bound allowed 3). */
    for (int i = 0; i < c.plain.n_ours; i++) {
        for (int j = 0; j < c.plain.n_ours; j++) {
            if (c.plain.ours[j] != c.plain.ours[i] &&
                ag_sig_cfi_cache_index(c.plain.ours[j] - 1) ==
                        ag_sig_cfi_cache_index(c.plain.ours[i] - 1)) {
                shared++;
                break;
            }
        }
    }
    printf("# %d frames: cold walk %llu hits, warm walk %llu hits %llu misses; %u lookups at a "
           "pc whose slot another pc of the walk shares\n",
           c.plain.n_ours, (unsigned long long)c.cold_hits, (unsigned long long)c.warm_hits,
           (unsigned long long)c.warm_misses, shared);
    ASSERT_TRUE(c.cold_hits >= 18);
    ASSERT_U64_EQ(c.warm_hits + c.warm_misses, (uint64_t)c.plain.n_ours);
    ASSERT_TRUE(c.warm_misses <= shared);
    ag_modules_fini();
}

/*
 * A module loaded (or unloaded) publishes a new snapshot: the next walk starts from an empty
 * cache, and a miss served by a snapshot newer than the cache's entries is not kept in it.
 */
TEST(cfi_row_cache_is_emptied_by_a_new_snapshot)
{
    uint64_t pc = (uint64_t)(uintptr_t)&cfi_chain_c;
    size_t slot = ag_sig_cfi_cache_index(pc);
    struct ag_cfi_row rule;
    uint64_t gen;
    void *lib;

    memset(&row_cache, 0, sizeof(row_cache));
    ASSERT_TRUE(ag_modules_refresh() >= 0);
    ag_sig_cfi_cache_begin(&row_cache);
    gen = row_cache.generation;
    ASSERT_TRUE(gen != 0);
    ag_sig_cfi_rule_find(pc, &row_cache, &rule);
    ASSERT_U64_EQ(row_cache.slots[slot].pc, pc);
    ASSERT_EQ(rule.flags & AG_CFI_CFA_MASK, AG_CFI_CFA_SP);
    ag_sig_cfi_cache_begin(&row_cache); /* same snapshot: kept */
    ASSERT_U64_EQ(row_cache.slots[slot].pc, pc);

    lib = dlopen("libresolv.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        test_skip("libresolv.so.2 cannot be loaded: %s", dlerror());
    }
    ASSERT_EQ(ag_modules_refresh(), 1); /* a new module: a new snapshot */
    /* A walk that began before the publish: its misses are served but not kept. */
    row_cache.slots[slot].pc = 0;
    ag_sig_cfi_rule_miss(pc, &row_cache, &rule);
    ASSERT_EQ(rule.flags & AG_CFI_CFA_MASK, AG_CFI_CFA_SP);
    ASSERT_U64_EQ(row_cache.slots[slot].pc, 0);
    row_cache.slots[slot].pc = pc;
    ag_sig_cfi_cache_begin(&row_cache); /* the next walk: emptied */
    ASSERT_TRUE(row_cache.generation > gen);
    for (size_t i = 0; i < AG_CFI_CACHE_SLOTS; i++) {
        ASSERT_U64_EQ(row_cache.slots[i].pc, 0);
    }
    gen = row_cache.generation;
    dlclose(lib);
    ASSERT_TRUE(ag_modules_refresh() >= 0);
    ag_sig_cfi_cache_begin(&row_cache); /* unloaded: again a new snapshot */
    ASSERT_TRUE(row_cache.generation > gen);
    ag_modules_fini();
}

#if defined(__x86_64__)
static _Alignas(16) uint64_t entry_stack[16];

static struct ag_cfi_cache entry_cache;

/* Walks from an interrupted pc with sp = entry_stack and rbp = fp, through entry_cache when
 * cached. */
static void
entry_walk_cached(uint64_t pc, uint64_t fp, int remote_ok, int cached, uint64_t *frames,
                  struct ag_unwind_result *res)
{
    struct ag_unwind_ctx c;

    ag_sig_unwind_ctx_init(&c, (uint64_t)(uintptr_t)entry_stack, (uint64_t)(uintptr_t)entry_stack,
                           (uint64_t)(uintptr_t)(entry_stack + 16));
    c.remote_ok = remote_ok;
    c.pid = getpid(); /* the agent's pid: not started here */
    c.cache = cached ? &entry_cache : NULL;
    ag_sig_unwind(&c, pc, (uint64_t)(uintptr_t)entry_stack, fp, 0, frames, 16, res);
}

static void
entry_walk(uint64_t pc, uint64_t fp, int remote_ok, uint64_t *frames, struct ag_unwind_result *res)
{
    entry_walk_cached(pc, fp, remote_ok, 0, frames, res);
}
#endif

/*
 * x86-64: a leaf without a CFI row sampled at push %rbp or endbr64 (its return address at sp),
 * or at the mov %rsp,%rbp after the push (the caller's rbp at sp, the return address above it):
 * rbp is still the caller's, and the caller, named by that return address, is kept. Before, the
 * walk went by rbp and dropped it: {pc, grand}. Where the leaf's frame exists, where the word at
 * sp is not a return address, where pc is in no module, and without the non-faulting read, the
 * walk is the frame pointers' as before.
 */
TEST(cfi_leaf_at_its_entry_keeps_its_caller)
{
#if defined(__x86_64__)
    uint64_t frames[16];
    struct ag_unwind_result res;
    uint64_t caller = (uint64_t)(uintptr_t)entry_caller + 2;
    uint64_t grand = (uint64_t)(uintptr_t)entry_caller + 4;
    uint64_t rec = (uint64_t)(uintptr_t)&entry_stack[8]; /* the caller's frame record */
    uint64_t push = (uint64_t)(uintptr_t)entry_push;
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *anon;

    if (test_remote_read_missing()) {
        test_skip("process_vm_readv is not available here: the agent reads no code");
    }
    ASSERT_TRUE(ag_modules_refresh() >= 0);
    ASSERT_TRUE(ag_sig_module_find(push) != NULL);
    memset(entry_stack, 0, sizeof(entry_stack));
    entry_stack[8] = 0; /* the caller's caller's fp: the root */
    entry_stack[9] = grand;

    /* At push %rbp and at endbr64: the return address at sp. */
    entry_stack[0] = caller;
    entry_walk(push, rec, 1, frames, &res);
    ASSERT_EQ(res.end, AG_UNWIND_END_ROOT);
    ASSERT_EQ(res.depth, 3);
    ASSERT_U64_EQ(frames[0], push);
    ASSERT_U64_EQ(frames[1], caller);
    ASSERT_U64_EQ(frames[2], grand);
    entry_walk((uint64_t)(uintptr_t)entry_endbr, rec, 1, frames, &res);
    ASSERT_EQ(res.depth, 3);
    ASSERT_U64_EQ(frames[1], caller);
    ASSERT_U64_EQ(frames[2], grand);
    /* At mov %rsp,%rbp: the pushed rbp at sp, the return address above. */
    entry_stack[0] = rec;
    entry_stack[1] = caller;
    entry_walk(push + 1, rec, 1, frames, &res);
    ASSERT_EQ(res.end, AG_UNWIND_END_ROOT);
    ASSERT_EQ(res.depth, 3);
    ASSERT_U64_EQ(frames[1], caller);
    ASSERT_U64_EQ(frames[2], grand);

    /* Past the prologue: rbp is the leaf's own record {caller's rbp, return address}. */
    entry_walk(push + 4, (uint64_t)(uintptr_t)entry_stack, 1, frames, &res);
    ASSERT_EQ(res.depth, 3);
    ASSERT_U64_EQ(frames[1], caller);
    ASSERT_U64_EQ(frames[2], grand);
    /* A push %rbp whose sp holds no return address (a register saved before it, in code built
     * without frame pointers), a pc in no module (an anonymous page holding 55), and no
     * non-faulting read: the frame pointers' walk, {pc, grand}. */
    entry_stack[0] = 0x12345678;
    entry_stack[1] = 0;
    entry_walk(push, rec, 1, frames, &res);
    ASSERT_EQ(res.depth, 2);
    ASSERT_U64_EQ(frames[1], grand);
    entry_stack[0] = caller;
    anon = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_TRUE(anon != MAP_FAILED);
    anon[0] = 0x55;
    ASSERT_TRUE(ag_sig_module_find((uint64_t)(uintptr_t)anon) == NULL);
    entry_walk((uint64_t)(uintptr_t)anon, rec, 1, frames, &res);
    ASSERT_EQ(res.depth, 2);
    ASSERT_U64_EQ(frames[1], grand);
    entry_walk(push, rec, 0, frames, &res);
    ASSERT_EQ(res.depth, 2);
    ASSERT_U64_EQ(frames[1], grand);
    munmap(anon, (size_t)page);

    /* Through a row cache: a pc whose code was read and is no entry (pop %rbp, a return address
     * at sp) is marked and not read again; a mark on entry_push's pc turns the step off there. */
    memset(&entry_cache, 0, sizeof(entry_cache));
    entry_walk_cached(push + 4, rec, 1, 1, frames, &res);
    ASSERT_EQ(res.depth, 2);
    ASSERT_U64_EQ(entry_cache.slots[ag_sig_cfi_cache_index(push + 4)].pc, push + 4);
    ASSERT_TRUE((entry_cache.slots[ag_sig_cfi_cache_index(push + 4)].flags & AG_CFI_NOT_ENTRY) !=
                0);
    entry_walk_cached(push, rec, 1, 1, frames, &res);
    ASSERT_EQ(res.depth, 3); /* an entry: not marked */
    ASSERT_U64_EQ(frames[1], caller);
    ASSERT_TRUE((entry_cache.slots[ag_sig_cfi_cache_index(push)].flags & AG_CFI_NOT_ENTRY) == 0);
    entry_cache.slots[ag_sig_cfi_cache_index(push)].flags |= AG_CFI_NOT_ENTRY;
    entry_walk_cached(push, rec, 1, 1, frames, &res);
    ASSERT_EQ(res.depth, 2);
    ASSERT_U64_EQ(frames[1], grand);
    ag_modules_fini();
#else
    test_skip("aarch64's return address is in x30 at an entry (unwind_leaf_returns_through_the_"
              "link_register; cfi_preempted_as_go_does_keeps_the_preempted_function)");
#endif
}

static struct stack_bounds entry_bounds;
static volatile sig_atomic_t entry_preempted, entry_sampled;
static uint64_t entry_preempted_pc, entry_frames[16];
static struct ag_unwind_result entry_res;

/* SIGPROF, every signal blocked (as Go's handlers run): once the spin loop is interrupted, makes
 * the thread resume at entry_push as if the loop had called it, as Go's sigctxt.pushCall does for
 * runtime.asyncPreempt, and sends the sampling signal, which pends until this returns. */
static void
on_preempt(int signo, siginfo_t *info, void *uctx)
{
    ucontext_t *uc = uctx;
    uint64_t pc, sp;

    (void)signo;
    (void)info;
#if defined(__x86_64__)
    pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP] - 8;
#elif defined(__aarch64__)
    pc = (uint64_t)uc->uc_mcontext.pc;
    sp = (uint64_t)uc->uc_mcontext.sp - 16; /* 16-byte aligned; x30 kept at [sp] */
#endif
    if (entry_preempted || pc < (uint64_t)(uintptr_t)entry_spin_loop ||
        pc >= (uint64_t)(uintptr_t)entry_spin_loop_end) {
        return;
    }
#if defined(__x86_64__)
    *(uint64_t *)(uintptr_t)sp = pc; /* the call's return address */
    uc->uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)entry_push;
#elif defined(__aarch64__)
    *(uint64_t *)(uintptr_t)sp = (uint64_t)uc->uc_mcontext.regs[30];
    uc->uc_mcontext.sp = sp;
    uc->uc_mcontext.regs[30] = pc; /* the call's return address */
    uc->uc_mcontext.pc = (uint64_t)(uintptr_t)entry_push;
#endif
    entry_preempted_pc = pc;
    entry_preempted = 1;
    raise(SIGUSR1);
}

/* SIGUSR1: the sample, walked as the agent's handler walks one. */
static void
on_entry_sample(int signo, siginfo_t *info, void *uctx)
{
    struct ag_arch_regs ar;
    struct ag_unwind_ctx c;

    (void)signo;
    (void)info;
    (void)ag_arch_sig_regs(uctx, &ar);
    ag_sig_unwind_ctx_init(&c, ar.sp, entry_bounds.lo, entry_bounds.hi);
    c.remote_ok = !test_remote_read_missing();
    c.pid = getpid();
    c.lr = ar.lr;
    ag_sig_unwind(&c, ar.pc, ar.sp, ar.fp, 0, entry_frames, 16, &entry_res);
    entry_sampled = 1;
    entry_spin_stop = 1;
}

/*
 * Go's preemption for real: a handler with every signal blocked makes the interrupted function
 * call a stub (runtime.asyncPreempt), and the sampling signal that came meanwhile is taken at the
 * stub's first instruction, rbp (x29) still the interrupted function's. The stack must read
 * {stub, the interrupted pc, its caller (this test)}; before, on x86-64, {stub, this test}: the
 * frame-pointer step from the interrupted function's rbp skipped it. aarch64 takes x30.
 */
TEST(cfi_preempted_as_go_does_keeps_the_preempted_function)
{
    struct sigaction sa;
    struct itimerval it = { { 0, 1000 }, { 0, 1000 } };

#if defined(__SANITIZE_THREAD__)
    test_skip("ThreadSanitizer delays SIGPROF delivery: the interrupted context is never the "
              "spin loop");
#endif
    if (!AG_ARCH_LINK_REGISTER && test_remote_read_missing()) {
        test_skip("process_vm_readv is not available here: the agent reads no code");
    }
    ASSERT_TRUE(ag_modules_refresh() >= 0);
    stack_bounds_get(&entry_bounds);
    memset(&sa, 0, sizeof(sa));
    sigfillset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sa.sa_sigaction = on_entry_sample;
    ASSERT_OK(sigaction(SIGUSR1, &sa, NULL));
    sa.sa_sigaction = on_preempt;
    ASSERT_OK(sigaction(SIGPROF, &sa, NULL));
    ASSERT_OK(setitimer(ITIMER_PROF, &it, NULL));
    entry_spin();
    memset(&it, 0, sizeof(it));
    ASSERT_OK(setitimer(ITIMER_PROF, &it, NULL));
    ASSERT_TRUE(entry_sampled);
    printf("# preempted at %#llx; frames %u: %#llx %#llx %s\n",
           (unsigned long long)entry_preempted_pc, entry_res.depth,
           (unsigned long long)entry_frames[0], (unsigned long long)entry_frames[1],
           entry_res.depth > 2 ? frame_name(entry_frames[2]) : "-");
    ASSERT_TRUE(entry_res.depth >= 3);
    ASSERT_U64_EQ(entry_frames[0], (uint64_t)(uintptr_t)entry_push);
    ASSERT_U64_EQ(entry_frames[1], entry_preempted_pc);
    ASSERT_STR_EQ(frame_name(entry_frames[2]),
                  "test_cfi_preempted_as_go_does_keeps_the_preempted_function");
    ag_modules_fini();
}

#if defined(__x86_64__)
/*
 * A Go 1.19 module image in miniature (agent/cfi.c, ag_cfi_go_walk): code, then a pclntab of Go
 * 1.18's and 1.19's layout (runtime/symtab.go's pcHeader, functab, _func and the function names)
 * over five functions:
 *   A [0, 32)    a leaf: sp never moves until 24, then 16 below the entry's (an assembly push);
 *   B [32, 80)   Go 1.19's prologue: 10 bytes of stack check, `sub $0x30,%rsp` at 42, `mov
 *                %rbp,0x28(%rsp)` at 46, the body from 51, back to the entry's sp at 72 (ret);
 *   C [80, 96)   TOPFRAME (runtime.goexit): the end of a stack;
 *   D [96, 112)  SPWRITE (a stack switch): no rows, the frame pointers as before;
 *   E [112, 128) runtime.asyncPreempt, frameless: its caller's pc is the preempted pc itself.
 * The image's length is a multiple of 8 so that test_guarded_copy() ends it at its guard page.
 */
#define GO_IMG_SIZE 544
#define GO_TEXT_END 128
#define GO_HDR      128
#define GO_PCTAB    200
#define GO_PCLN     224
#define GO_FUNCS    272
#define GO_NAMES    472
#define GO_NFUNC    5

static void
go_put(uint8_t *img, size_t at, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        img[at + i] = (uint8_t)(v >> (8 * i));
    }
}

static void
go_image(uint8_t *img, uint32_t magic)
{
    static const uint8_t pcsp[] = {
        0,                       /* offset 0 is "no table" */
        2, 24, 32, 8,  0,        /* A at 1: 0 over 24 bytes, 16 over 8 */
        2, 14, 96, 26, 95, 8, 0, /* B at 6: 0 over 14, 0x30 over 26, 0 over 8 */
        2, 16, 0,                /* C at 13 */
        2, 16, 0,                /* D at 16 */
        2, 16, 0,                /* E at 19 */
    };
    static const char names[] = "main.A\0main.B\0runtime.goexit\0runtime.systemstack\0"
                                "runtime.asyncPreempt";
    static const uint32_t entry[] = { 0, 32, 80, 96, 112, GO_TEXT_END };
    static const uint32_t sp_at[] = { 1, 6, 13, 16, 19 }, name_at[] = { 0, 7, 14, 29, 49 };
    static const uint8_t flags[] = { 0, 0, 1, 2, 0 };

    memset(img, 0xcc, GO_HDR);
    memset(img + 32, 0x90, 48);
    memcpy(img + 42, "\x48\x83\xec\x30", 4);     /* sub $0x30,%rsp */
    memcpy(img + 46, "\x48\x89\x6c\x24\x28", 5); /* mov %rbp,0x28(%rsp) */
    img[72] = 0xc3;
    memset(img + GO_HDR, 0, GO_IMG_SIZE - GO_HDR);
    go_put(img, GO_HDR, magic, 4);
    img[GO_HDR + 6] = 1;                  /* minLC */
    img[GO_HDR + 7] = 8;                  /* ptrSize */
    go_put(img, GO_HDR + 8, GO_NFUNC, 8); /* nfunc */
    /* textStart, an address: set by go_image_place */
    go_put(img, GO_HDR + 32, GO_NAMES - GO_HDR, 8);
    go_put(img, GO_HDR + 56, GO_PCTAB - GO_HDR, 8);
    go_put(img, GO_HDR + 64, GO_PCLN - GO_HDR, 8);
    memcpy(img + GO_PCTAB, pcsp, sizeof(pcsp));
    memcpy(img + GO_NAMES, names, sizeof(names));
    for (size_t i = 0; i <= GO_NFUNC; i++) {
        go_put(img, GO_PCLN + 8 * i, entry[i], 4);
        go_put(img, GO_PCLN + 8 * i + 4, GO_FUNCS - GO_PCLN + 40 * i, 4);
    }
    for (size_t i = 0; i < GO_NFUNC; i++) {
        go_put(img, GO_FUNCS + 40 * i, entry[i], 4);
        go_put(img, GO_FUNCS + 40 * i + 4, name_at[i], 4);
        go_put(img, GO_FUNCS + 40 * i + 16, sp_at[i], 4);
        img[GO_FUNCS + 40 * i + 37] = flags[i];
    }
}

/* The guarded copy of an image made by go_image, its textStart set to where its code lies. */
static uint8_t *
go_image_place(const uint8_t *img)
{
    uint8_t *w = (uint8_t *)(uintptr_t)test_guarded_copy(img, GO_IMG_SIZE);

    go_put(w, GO_HDR + 24, (uint64_t)(uintptr_t)w, 8);
    return w;
}

/* Checks the rule of the row at rel in t. */
static void
go_row_is(const struct ag_cfi_table *t, uint64_t rel, uint8_t flags, int32_t cfa_off,
          int16_t ra_off, int8_t fp_off8)
{
    const struct ag_cfi_row *r = ag_sig_cfi_row_find(t, rel);

    printf("# row at %llu: flags %#x cfa %d ra %d fp %d\n", (unsigned long long)rel,
           r != NULL ? r->flags : 0, r != NULL ? r->cfa_off : 0, r != NULL ? r->ra_off : 0,
           r != NULL ? r->fp_off8 : 0);
    ASSERT_TRUE(r != NULL);
    ASSERT_EQ(r->flags, flags);
    if ((flags & AG_CFI_CFA_MASK) == AG_CFI_CFA_SP) {
        ASSERT_EQ(r->cfa_off, cfa_off);
        ASSERT_EQ(r->ra_off, ra_off);
    }
    if ((flags & AG_CFI_FP_MASK) == AG_CFI_FP_AT) {
        ASSERT_EQ(r->fp_off8, fp_off8);
    }
}

/* A Go pclntab's SP tables become rows: the return address at sp on a frameless leaf and at a
 * function's stack check, rbp saved only after the prologue's store, the end of a stack at
 * goexit, no rows for a stack switch or past the last function. */
TEST(cfi_go_pclntab_rows)
{
    static uint8_t img[GO_IMG_SIZE];
    const uint8_t *g;
    struct ag_cfi_span span;
    struct ag_cfi_table *t = NULL;
    uint64_t hdr = 0;
    const uint8_t sp_same = AG_CFI_CFA_SP | AG_CFI_RA_AT | AG_CFI_FP_SAME;
    const uint8_t sp_saved = AG_CFI_CFA_SP | AG_CFI_RA_AT | AG_CFI_FP_AT;

    go_image(img, 0xfffffff0u);
    g = go_image_place(img);
    span = (struct ag_cfi_span){ (uint64_t)(uintptr_t)g, (uint64_t)(uintptr_t)g + GO_IMG_SIZE };
    ASSERT_EQ(ag_cfi_go_find(&span, 1, &hdr), 0);
    ASSERT_U64_EQ(hdr, span.lo + GO_HDR);
    ASSERT_EQ(ag_cfi_build_cancellable(span.lo, 0, hdr, &span, 1, NULL, &t), 0);
    ASSERT_TRUE(t != NULL);
    printf("# %zu rows, %zu functions\n", t->n, t->fdes);
    ASSERT_EQ(t->fdes, 4);
    go_row_is(t, 0, sp_same, 8, -8, 0); /* A, the entry */
    go_row_is(t, 23, sp_same, 8, -8, 0);
    go_row_is(t, 24, sp_same, 24, -8, 0); /* A, 16 pushed: no frame pointer of its own */
    go_row_is(t, 31, sp_same, 24, -8, 0);
    go_row_is(t, 32, sp_same, 8, -8, 0);      /* B, the stack check */
    go_row_is(t, 45, sp_same, 8, -8, 0);      /* B, `sub $0x30,%rsp` */
    go_row_is(t, 46, sp_same, 0x38, -8, 0);   /* B, the store of rbp: rbp is the caller's */
    go_row_is(t, 51, sp_saved, 0x38, -8, -2); /* B, the body: rbp at CFA - 16 */
    go_row_is(t, 71, sp_saved, 0x38, -8, -2);
    go_row_is(t, 72, sp_same, 8, -8, 0);                                       /* B, its ret */
    go_row_is(t, 80, AG_CFI_CFA_SP | AG_CFI_RA_END | AG_CFI_FP_SAME, 8, 0, 0); /* C */
    go_row_is(t, 96, AG_CFI_CFA_NONE, 0, 0, 0);             /* D: a stack switch */
    go_row_is(t, 112, sp_same | AG_CFI_RA_EXACT, 8, -8, 0); /* E, asyncPreempt */
    go_row_is(t, 127, sp_same | AG_CFI_RA_EXACT, 8, -8, 0);
    go_row_is(t, GO_TEXT_END, AG_CFI_CFA_NONE, 0, 0, 0); /* past the last function */
    ag_cfi_table_free(t);
}

/* A walk through a Go table: the frame under runtime.asyncPreempt is the preempted pc itself, B's
 * first instruction, and is looked up there (B's entry row: the return address at sp), not at
 * pc - 1 (A's last row, which would read the word 16 higher). */
TEST(cfi_go_preempted_at_an_entry_keeps_its_caller)
{
    static uint8_t img[GO_IMG_SIZE];
    static uint64_t stack[16];
    struct ag_module_snapshot *snap, *old;
    struct ag_cfi_table *t = NULL;
    struct ag_cfi_span span;
    struct ag_unwind_result res;
    struct ag_unwind_ctx c;
    uint64_t frames[8], base, sp = (uint64_t)(uintptr_t)stack;
    uint8_t *w;

    go_image(img, 0xfffffff0u);
    w = go_image_place(img);
    base = (uint64_t)(uintptr_t)w;
    span = (struct ag_cfi_span){ base, base + GO_IMG_SIZE };
    ASSERT_EQ(ag_cfi_build_cancellable(base, 0, base + GO_HDR, &span, 1, NULL, &t), 0);
    snap = calloc(1, sizeof(*snap) + sizeof(snap->spans[0]));
    ASSERT_TRUE(snap != NULL);
    snap->generation = 0x60f4a3e5;
    snap->n = 1;
    snap->spans[0] = (struct ag_module_span){ base, base + GO_TEXT_END, NULL, t, 0 };
    old = atomic_exchange(&ag_sig_modules, snap);
    memset(stack, 0, sizeof(stack));
    stack[0] = base + 32;     /* pushed by Go's preemption: B preempted at its entry */
    stack[1] = base + 80 + 5; /* B's return address, into C (goexit: the end) */
    stack[3] = base + 96 + 3; /* where A's row at pc - 1 would find it */
    ag_sig_unwind_ctx_init(&c, sp, sp, sp + sizeof(stack));
    ag_sig_unwind(&c, base + 112 + 4, sp, 0, 0, frames, 8, &res);
    atomic_store(&ag_sig_modules, old);
    printf("# %u frames: %#llx %#llx %#llx, end %u\n", res.depth,
           (unsigned long long)(frames[0] - base), (unsigned long long)(frames[1] - base),
           (unsigned long long)(res.depth > 2 ? frames[2] - base : 0), res.end);
    ASSERT_EQ(res.depth, 3);
    ASSERT_U64_EQ(frames[0], base + 116);
    ASSERT_U64_EQ(frames[1], base + 32);
    ASSERT_U64_EQ(frames[2], base + 85);
    ASSERT_EQ(res.end, AG_UNWIND_END_ROOT);
    free(snap);
    ag_cfi_table_free(t);
}

/* Places img (go_image_place) and builds its table from its pclntab alone; *find gets what
 * ag_cfi_go_find says of it. */
static int
go_build(const uint8_t *img, int *find, struct ag_cfi_table **t)
{
    uint8_t *w = go_image_place(img);
    struct ag_cfi_span span = { (uint64_t)(uintptr_t)w, (uint64_t)(uintptr_t)w + GO_IMG_SIZE };
    uint64_t hdr = 0;

    *find = ag_cfi_go_find(&span, 1, &hdr);
    *t = NULL;
    return ag_cfi_build_cancellable(span.lo, 0, span.lo + GO_HDR, &span, 1, NULL, t);
}

/* Another Go version's header is refused; corrupt tables are refused or their function dropped,
 * never read past the image (its end is a guard page). */
TEST(cfi_go_pclntab_refused_and_corrupt)
{
    static uint8_t img[GO_IMG_SIZE];
    struct ag_cfi_table *t = NULL;
    int find;

    /* Go 1.20's magic. */
    go_image(img, 0xfffffff1u);
    ASSERT_TRUE(go_build(img, &find, &t) < 0);
    ASSERT_EQ(find, -ENOTSUP);
    ASSERT_TRUE(t == NULL);

    /* A function table out of order. */
    go_image(img, 0xfffffff0u);
    go_put(img, GO_PCLN + 8, 100, 4);
    ASSERT_TRUE(go_build(img, &find, &t) < 0);
    ASSERT_TRUE(t == NULL);

    /* More functions than the image holds. */
    go_image(img, 0xfffffff0u);
    go_put(img, GO_HDR + 8, 1000, 8);
    ASSERT_TRUE(go_build(img, &find, &t) < 0);
    ASSERT_TRUE(t == NULL);

    /* D's table at the image's last byte, a varint that goes on past it: D is dropped, A, B, C
     * and E are kept. */
    go_image(img, 0xfffffff0u);
    img[GO_FUNCS + 3 * 40 + 37] = 0;
    go_put(img, GO_FUNCS + 3 * 40 + 16, GO_IMG_SIZE - 1 - GO_PCTAB, 4);
    img[GO_IMG_SIZE - 1] = 0x80;
    ASSERT_EQ(go_build(img, &find, &t), 0);
    ASSERT_EQ(find, 0);
    ASSERT_EQ(t->fdes, 4);
    go_row_is(t, 96, AG_CFI_CFA_NONE, 0, 0, 0);
    ag_cfi_table_free(t);
}
#endif

static const struct test_case cases[] = {
    TEST_CASE(cfi_chain_unwinds_to_main_like_libgcc),
    TEST_CASE(cfi_deep_recursion_like_libgcc),
    TEST_CASE(cfi_fp_saved_far_below_the_cfa_is_recovered),
    TEST_CASE(cfi_rows_at_function_entry),
    TEST_CASE(cfi_unwinds_from_signal_context),
    TEST_CASE(cfi_build_rejects_corrupt_eh_frame_hdr),
    TEST_CASE(cfi_cache_round_trip_and_bad_files),
    TEST_CASE(cfi_step_rejects_bad_registers),
    TEST_CASE(cfi_leaf_returns_through_the_link_register),
    TEST_CASE(cfi_signed_return_address_is_stripped),
    TEST_CASE(cfi_row_cache_walks_like_the_tables),
    TEST_CASE(cfi_row_cache_is_emptied_by_a_new_snapshot),
    TEST_CASE(cfi_leaf_at_its_entry_keeps_its_caller),
    TEST_CASE(cfi_preempted_as_go_does_keeps_the_preempted_function),
#if defined(__x86_64__)
    TEST_CASE(cfi_go_pclntab_rows),
    TEST_CASE(cfi_go_pclntab_refused_and_corrupt),
    TEST_CASE(cfi_go_preempted_at_an_entry_keeps_its_caller),
#endif
};
TEST_MAIN(cases)
