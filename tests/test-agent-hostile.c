/* SPDX-License-Identifier: MIT */
/*
 * tests/test-agent-hostile.c - stacks no unwinder should trust, sampled by the real agent in CPU
 * mode at 1000 Hz: a frame pointer to a fake record whose return address is junk, one whose
 * return address points into a writable, non-executable page, and a stack pointer outside the
 * thread's stack. Every sample must come out clean: no frame outside an executable mapping, the
 * cut counted (unwind_not_code) and marked (AG_UNWIND_END_NOT_CODE), and the host unharmed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/agent.h"
#include "tests/fixtures/agent-hostile.h"
#include "tests/test.h"

#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(__SANITIZE_THREAD__)

struct range {
    uint64_t lo, hi;
};

static struct range code[512];
static size_t ncode;
static volatile int stop;
static _Atomic int32_t target_tid;
static unsigned samples, bad_frames, cut, leaf_only, pending;

static void
code_read(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];

    ncode = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL && ncode < 512) {
        unsigned long lo, hi;
        char perms[8];

        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && perms[2] == 'x') {
            code[ncode].lo = lo;
            code[ncode].hi = hi;
            ncode++;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
}

static int
is_code(uint64_t pc)
{
    size_t i;

    for (i = 0; i < ncode; i++) {
        if (pc >= code[i].lo && pc < code[i].hi) {
            return 1;
        }
    }
    return 0;
}

static int
collect(const struct ag_record *rec, void *ctx)
{
    uint32_t i;

    (void)ctx;
    if (rec->kind != AG_RECORD_SAMPLE || rec->tid != atomic_load(&target_tid)) {
        return 0;
    }
    samples++;
    for (i = 0; i < rec->u.sample->depth; i++) {
        uint64_t pc = rec->u.sample->frames[i] - (i > 0);

        bad_frames += !is_code(pc);
    }
    /* A final sample (at the thread's exit) repeats the stack of its last sample, cut already:
     * the agent's count is of the stacks it cut. */
    cut += rec->u.sample->end == AG_UNWIND_END_NOT_CODE && rec->u.sample->source != AG_SOURCE_TAIL;
    leaf_only += rec->u.sample->depth <= 1;
    /* Cut before its junk is met: the manager was still building this binary's unwind table (an
     * ASan build at a load of 20 took over half of a kind's samples so); not judged. */
    pending += rec->u.sample->end == AG_UNWIND_END_TABLES_PENDING;
    return 0;
}

struct job {
    int kind;
    uint64_t *record;
    void *stack_top;
};

/* Without process_vm_readv (qemu-user, some seccomp policies) the agent reads only the sampled
 * thread's own stack, so a record on another thread's stack ends the walk with a read fault
 * before its junk is met: the record is then copied onto this thread's stack. */
static int
remote_read_missing(void)
{
    uint64_t word = 7, got = 0;
    struct iovec l = { &got, 8 }, r = { &word, 8 };

    return syscall(SYS_process_vm_readv, (long)getpid(), &l, 1L, &r, 1L, 0L) != 8;
}

static void *
job_main(void *p)
{
    struct job *j = p;
    _Alignas(16) uint64_t own[2] = { j->record[0], j->record[1] };

    atomic_store(&target_tid, (int32_t)syscall(SYS_gettid));
    if (j->kind == 2) {
        hostile_foreign_stack(&stop, j->stack_top);
    } else {
        hostile_fake_frame(&stop, remote_read_missing() ? own : j->record);
    }
    return NULL;
}

/* Runs one hostile job under CPU sampling and checks every sample of it. */
static void
run(int kind, uint64_t ra)
{
    _Alignas(16) uint64_t record[2] = { 0, ra };
    struct ag_config cfg;
    struct ag_stats st;
    struct job j = { kind, record, NULL };
    pthread_t th;
    void *stack = NULL;
    int i;

    if (kind == 2) {
        stack = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_TRUE(stack != MAP_FAILED);
        j.stack_top = (char *)stack + (1 << 20) - 64;
    }
    samples = bad_frames = cut = leaf_only = pending = 0;
    stop = 0;
    atomic_store(&target_tid, 0);
    ag_config_init(&cfg);
    cfg.scan_ms = 20;
    ASSERT_OK(ag_start(&cfg));
    ASSERT_OK(ag_sampling_acquire(AG_MODE_CPU, 1000));
    ASSERT_OK(pthread_create(&th, NULL, job_main, &j));
    /* At least 0.6 s, and on until the job has had enough samples to judge: on a loaded
     * machine it may get a small share of a CPU, and its first ones may come before the unwind
     * tables (up to 20 s) */
    for (i = 0; i < 12 || (samples - pending <= 20 && i < 400); i++) {
        usleep(50000);
        code_read();
        ASSERT_TRUE(ag_drain(collect, NULL) >= 0);
    }
    stop = 1;
    ASSERT_OK(pthread_join(th, NULL));
    code_read();
    ASSERT_TRUE(ag_drain(collect, NULL) >= 0);
    ag_stats_get(&st);
    printf("# kind %d: %u samples, %u cut at a non-code frame, %u leaf-only, %u before the unwind "
           "tables, %u bad frames; unwind_not_code %llu\n",
           kind, samples, cut, leaf_only, pending, bad_frames,
           (unsigned long long)st.unwind_not_code);
    ASSERT_TRUE(samples - pending > 20);
    ASSERT_EQ(bad_frames, 0);
    if (kind != 2) {
        ASSERT_TRUE(cut > (samples - pending) / 2); /* the junk return address is cut, counted */
        ASSERT_TRUE(st.unwind_not_code >= cut);
    }
    ASSERT_OK(ag_sampling_release(AG_MODE_CPU, 1000));
    ag_stop();
    if (stack != NULL) {
        munmap(stack, 1 << 20);
    }
}

TEST(junk_return_address_is_cut_and_counted)
{
    run(0, 0x4141414100000000u);
}

TEST(return_address_into_data_page_is_cut)
{
    static _Alignas(4096) uint8_t data[8192];

    run(1, (uint64_t)(uintptr_t)(data + 4096 + 16));
}

TEST(stack_pointer_outside_the_thread_stack_is_clean)
{
    run(2, 0);
}

static const struct test_case cases[] = {
    TEST_CASE(junk_return_address_is_cut_and_counted),
    TEST_CASE(return_address_into_data_page_is_cut),
    TEST_CASE(stack_pointer_outside_the_thread_stack_is_clean),
};
#else
TEST(hostile_stacks_need_x86_64_or_aarch64)
{
    /* Under TSan a signal is delivered only when the thread enters an intercepted call, and the
     * hostile code spins in assembly without one: the ASan and plain builds run these. */
    printf("# SKIP (loud): the hostile stacks are x86-64 or aarch64 assembly, and TSan never "
           "delivers a signal into them\n");
}

static const struct test_case cases[] = { TEST_CASE(hostile_stacks_need_x86_64_or_aarch64) };
#endif

TEST_MAIN(cases)
