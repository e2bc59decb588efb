/* tests/test-agent-unwind.c - the guarded frame-pointer walker of agent/sig-unwind.c on
 * synthetic stacks: a clean chain ends at the root; loops, misaligned and wild frame pointers,
 * and frames on unmapped pages end the walk with the matching reason and never crash. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/arch.h"
#include "agent/internal.h"
#include "tests/test.h"

#define NFRAMES 5

static _Alignas(16) uint64_t stack[64];

/* Frame k lives at stack[4k]: [0] = caller's frame (next fp), [1] = return address. */
static void
stack_build(void)
{
    int k;

    memset(stack, 0, sizeof(stack));
    for (k = 0; k < NFRAMES; k++) {
        stack[4 * k] = k + 1 < NFRAMES ? (uint64_t)(uintptr_t)&stack[4 * (k + 1)] : 0;
        stack[4 * k + 1] = 0x401000u + (uint64_t)k;
    }
}

static void
unwind(int remote, uint32_t max, uint64_t *frames, struct ag_unwind_result *res)
{
    struct ag_unwind_ctx c;

    c.lo = (uint64_t)(uintptr_t)stack;
    c.hi = (uint64_t)(uintptr_t)(stack + 64);
    c.remote_ok = remote;
    c.pid = getpid();
    c.cache = NULL;
    c.lr = 0;
    c.copy = NULL;
    ag_sig_unwind(&c, 0x400000, (uint64_t)(uintptr_t)stack, (uint64_t)(uintptr_t)stack, 0, frames,
                  max, res);
}

TEST(unwind_clean_chain_reaches_root)
{
    uint64_t frames[32];
    struct ag_unwind_result res;
    int k;

    stack_build();
    unwind(0, 32, frames, &res);
    ASSERT_EQ(res.depth, NFRAMES + 1);
    ASSERT_EQ(res.end, AG_UNWIND_END_ROOT);
    ASSERT_EQ(res.unwinder, AG_UNWINDER_FP);
    ASSERT_U64_EQ(frames[0], 0x400000);
    for (k = 0; k < NFRAMES; k++) {
        ASSERT_U64_EQ(frames[k + 1], 0x401000u + (uint64_t)k);
    }
}

TEST(unwind_stops_at_depth_limit)
{
    uint64_t frames[32];
    struct ag_unwind_result res;

    stack_build();
    unwind(0, 3, frames, &res);
    ASSERT_EQ(res.depth, 3);
    ASSERT_EQ(res.end, AG_UNWIND_END_DEPTH_LIMIT);
}

TEST(unwind_loop_is_fp_invalid)
{
    uint64_t frames[32];
    struct ag_unwind_result res;

    stack_build();
    stack[8] = (uint64_t)(uintptr_t)&stack[4]; /* frame 2 points back to frame 1 */
    unwind(1, 32, frames, &res);
    ASSERT_EQ(res.end, AG_UNWIND_END_FP_INVALID);
    ASSERT_EQ(res.depth, 3); /* pc, ra0, ra1: ra2 belongs to the looping record */
}

TEST(unwind_misaligned_fp_is_fp_invalid)
{
    uint64_t frames[32];
    struct ag_unwind_result res;

    stack_build();
    stack[4] = (uint64_t)(uintptr_t)&stack[8] + 3;
    unwind(1, 32, frames, &res);
    ASSERT_EQ(res.end, AG_UNWIND_END_FP_INVALID);
    ASSERT_EQ(res.depth, 3);
}

TEST(unwind_unmapped_fp_is_read_fault)
{
    uint64_t frames[32];
    struct ag_unwind_result res;
    long page = sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                   0);
    uint64_t wild = 0x7ff0deadbe00u;

    ASSERT_TRUE(p != MAP_FAILED);
    ASSERT_OK(mprotect(p + page, (size_t)page, PROT_NONE));
    /* Above the stack and on a PROT_NONE page: only the non-faulting read may touch it. */
    stack_build();
    stack[4] = (uint64_t)(uintptr_t)(p + page);
    if ((uint64_t)(uintptr_t)(p + page) <= (uint64_t)(uintptr_t)&stack[4]) {
        test_skip("mmap placed the page below the synthetic stack");
    }
    unwind(1, 32, frames, &res);
    ASSERT_EQ(res.end, AG_UNWIND_END_READ_FAULT);
    ASSERT_EQ(res.depth, 3);
    unwind(0, 32, frames, &res); /* without process_vm_readv: refused before any access */
    ASSERT_EQ(res.end, AG_UNWIND_END_READ_FAULT);
    stack[4] = wild;
    unwind(1, 32, frames, &res);
    ASSERT_EQ(res.end, AG_UNWIND_END_READ_FAULT);
}

/* aarch64: an interrupted leaf without CFI (0x400000 is in no module) whose return address is
 * still in x30: x30 is its caller, then the frame records from x29 (still the caller's). */
TEST(unwind_leaf_returns_through_the_link_register)
{
    uint64_t frames[32];
    struct ag_unwind_result res;
    struct ag_unwind_ctx c;
    int k;

    if (!AG_ARCH_LINK_REGISTER) {
        test_skip("x86-64 has no link register");
    }
    stack_build();
    c.lo = (uint64_t)(uintptr_t)stack;
    c.hi = (uint64_t)(uintptr_t)(stack + 64);
    c.remote_ok = 0;
    c.pid = getpid();
    c.cache = NULL;
    c.lr = 0x402000;
    c.copy = NULL;
    ag_sig_unwind(&c, 0x400000, (uint64_t)(uintptr_t)stack, (uint64_t)(uintptr_t)stack, 0, frames,
                  32, &res);
    ASSERT_EQ(res.end, AG_UNWIND_END_ROOT);
    ASSERT_EQ(res.depth, NFRAMES + 2);
    ASSERT_U64_EQ(frames[1], 0x402000);
    for (k = 0; k < NFRAMES; k++) {
        ASSERT_U64_EQ(frames[k + 2], 0x401000u + (uint64_t)k);
    }
    /* Its prologue ran (x30 is in its own record): x30 is not a frame of its own. */
    c.lr = 0x401000;
    ag_sig_unwind(&c, 0x400000, (uint64_t)(uintptr_t)stack, (uint64_t)(uintptr_t)stack, 0, frames,
                  32, &res);
    ASSERT_EQ(res.depth, NFRAMES + 1);
    ASSERT_U64_EQ(frames[1], 0x401000);
}

/* aarch64: return addresses signed with pointer authentication in the frame records come out
 * stripped. */
TEST(unwind_signed_return_addresses_are_stripped)
{
#if defined(__aarch64__)
    uint64_t frames[32];
    struct ag_unwind_result res;
    int k, signed_any = 0;

    stack_build();
    for (k = 0; k < NFRAMES; k++) {
        register uint64_t x17 __asm__("x17") = stack[4 * k + 1];
        register uint64_t x16 __asm__("x16") = (uint64_t)(uintptr_t)&stack[4 * k];

        __asm__("hint #8" : "+r"(x17) : "r"(x16)); /* pacia1716 */
        signed_any |= x17 != stack[4 * k + 1];
        stack[4 * k + 1] = x17;
    }
    if (!signed_any) {
        test_skip("no pointer authentication here: nothing is signed");
    }
    unwind(0, 32, frames, &res);
    ASSERT_EQ(res.end, AG_UNWIND_END_ROOT);
    ASSERT_EQ(res.depth, NFRAMES + 1);
    for (k = 0; k < NFRAMES; k++) {
        ASSERT_U64_EQ(frames[k + 1], 0x401000u + (uint64_t)k);
    }
#else
    test_skip("pointer authentication is aarch64's");
#endif
}

TEST(unwind_read_rejects_unaligned_and_null)
{
    struct ag_unwind_ctx c = { 0, 0, 1, 0, NULL, 0, NULL, 0, 0 };
    uint64_t v = 42, out = 0;

    c.pid = getpid();
    ASSERT_EQ(ag_sig_read(&c, 0, &out), -EFAULT);
    ASSERT_EQ(ag_sig_read(&c, (uint64_t)(uintptr_t)&v + 1, &out), -EFAULT);
    if (test_remote_read_missing()) {
        test_skip("process_vm_readv is not implemented here (qemu-user): the agent reads only "
                  "its threads' own stacks");
    }
    ASSERT_OK(ag_sig_read(&c, (uint64_t)(uintptr_t)&v, &out)); /* remote path */
    ASSERT_U64_EQ(out, 42);
}

/* A perf-ring sample's walk (agent/perf-ring.c): every read is of the stack's copy, at the
 * addresses the stack had; the live stack, changed since, is not read, nor anything past the
 * copy's end. */
static void
unwind_copy(const uint64_t *copy, uint64_t len, uint64_t *frames, struct ag_unwind_result *res)
{
    struct ag_unwind_ctx c;

    ag_sig_unwind_ctx_init(&c, (uint64_t)(uintptr_t)stack, 0, 0);
    c.remote_ok = 0;
    c.copy = (const unsigned char *)copy;
    c.copy_sp = (uint64_t)(uintptr_t)stack;
    c.copy_len = len;
    ag_sig_unwind(&c, 0x400000, (uint64_t)(uintptr_t)stack, (uint64_t)(uintptr_t)stack, 0, frames,
                  32, res);
}

TEST(unwind_from_a_copy_reads_the_copy_alone)
{
    static uint64_t copy[64];
    uint64_t frames[32], out = 0;
    struct ag_unwind_result res;
    struct ag_unwind_ctx c;
    int k;

    stack_build();
    memcpy(copy, stack, sizeof(copy));
    memset(stack, 0, sizeof(stack)); /* the live stack moved on */
    unwind_copy(copy, sizeof(copy), frames, &res);
    ASSERT_EQ(res.end, AG_UNWIND_END_ROOT);
    ASSERT_EQ(res.depth, NFRAMES + 1);
    for (k = 0; k < NFRAMES; k++) {
        ASSERT_U64_EQ(frames[k + 1], 0x401000u + (uint64_t)k);
    }
    /* A copy that ends inside the fourth frame record: three frames and a read fault. */
    unwind_copy(copy, 4 * 8 * 2 + 16, frames, &res);
    ASSERT_EQ(res.end, AG_UNWIND_END_READ_FAULT);
    ASSERT_EQ(res.depth, 4);
    /* Outside the copy nothing is read, not even memory the process has mapped. */
    ag_sig_unwind_ctx_init(&c, 0, 0, 0);
    c.copy = (const unsigned char *)copy;
    c.copy_sp = (uint64_t)(uintptr_t)stack;
    c.copy_len = 16;
    ASSERT_EQ(ag_sig_read(&c, (uint64_t)(uintptr_t)&out, &out), -EFAULT);
    ASSERT_EQ(ag_sig_read(&c, (uint64_t)(uintptr_t)stack + 16, &out), -EFAULT);
    ASSERT_OK(ag_sig_read(&c, (uint64_t)(uintptr_t)stack + 8, &out));
    ASSERT_U64_EQ(out, 0x401000u);
}

/* The drain's check of a sample's frames: a frame outside executable code cuts the stack and is
 * counted; where the walk met a pending unwind table, the cut stack is rooted at the marker,
 * also when the cut is at its first frame (an empty stack before, counted nowhere). */
static union {
    struct ag_sample s;
    uint64_t words[(sizeof(struct ag_sample) + 8 * sizeof(uint64_t)) / sizeof(uint64_t) + 1];
} check_buf;

static struct ag_sample *
check_sample(uint8_t end, uint32_t depth, uint64_t f0, uint64_t f1)
{
    struct ag_sample *s = &check_buf.s;

    memset(&check_buf, 0, sizeof(check_buf));
    s->source = AG_SOURCE_SIGNAL;
    s->end = end;
    s->depth = depth;
    s->frames[0] = f0;
    s->frames[1] = f1;
    ag_drain_check_frames(s);
    return s;
}

TEST(drain_cut_stack_is_counted_or_rooted_at_the_pending_marker)
{
    uint64_t code = (uint64_t)(uintptr_t)&check_sample + 1u, not_code = 0x10u;
    uint64_t marker = ag_tables_pending_pc() + 1u, nc, tp;
    struct ag_sample *s;

    ag.cfg.max_frames = 8;
    nc = atomic_load(&ag.n_not_code);
    tp = atomic_load(&ag.n_tables_pending);

    s = check_sample(AG_UNWIND_END_FP_INVALID, 2, code, not_code);
    ASSERT_EQ(s->depth, 1);
    ASSERT_EQ(s->end, AG_UNWIND_END_NOT_CODE);
    ASSERT_U64_EQ(atomic_load(&ag.n_not_code), nc + 1);

    s = check_sample(AG_UNWIND_END_TABLES_PENDING, 2, code, not_code);
    ASSERT_EQ(s->depth, 2);
    ASSERT_U64_EQ(s->frames[0], code);
    ASSERT_U64_EQ(s->frames[1], marker);
    ASSERT_EQ(s->end, AG_UNWIND_END_TABLES_PENDING);

    s = check_sample(AG_UNWIND_END_TABLES_PENDING, 1, not_code, 0);
    ASSERT_EQ(s->depth, 1);
    ASSERT_U64_EQ(s->frames[0], marker);
    ASSERT_U64_EQ(atomic_load(&ag.n_tables_pending), tp + 2);
    ASSERT_U64_EQ(atomic_load(&ag.n_not_code), nc + 1);
}

static const struct test_case cases[] = {
    TEST_CASE(unwind_clean_chain_reaches_root),
    TEST_CASE(unwind_stops_at_depth_limit),
    TEST_CASE(unwind_loop_is_fp_invalid),
    TEST_CASE(unwind_misaligned_fp_is_fp_invalid),
    TEST_CASE(unwind_unmapped_fp_is_read_fault),
    TEST_CASE(unwind_read_rejects_unaligned_and_null),
    TEST_CASE(unwind_from_a_copy_reads_the_copy_alone),
    TEST_CASE(unwind_leaf_returns_through_the_link_register),
    TEST_CASE(unwind_signed_return_addresses_are_stripped),
    TEST_CASE(drain_cut_stack_is_counted_or_rooted_at_the_pending_marker),
};
TEST_MAIN(cases)
