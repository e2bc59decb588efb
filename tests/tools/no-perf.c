/* SPDX-License-Identifier: MIT */
/*
 * tests/tools/no-perf.c - `no-perf CMD ARGS...` runs CMD under a seccomp filter that refuses
 * perf_event_open with EACCES, as a container's seccomp profile does, so tests can check that
 * the agent falls back to CPU-time timers by itself. Sets no_new_privs (no privilege needed).
 * `no-perf --probe` instead exits 0 when this process may open a user-space cpu-clock perf event
 * on itself (what the agent's perf engine needs), 1 when not.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };

    if (argc == 2 && strcmp(argv[1], "--probe") == 0) {
        struct perf_event_attr attr;
        long fd;

        memset(&attr, 0, sizeof(attr));
        attr.size = sizeof(attr);
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_CPU_CLOCK;
        attr.sample_period = 1000000;
        attr.exclude_kernel = 1;
        attr.exclude_hv = 1;
        attr.disabled = 1;
        fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
        return fd >= 0 ? 0 : 1;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: no-perf CMD [ARGS...]\n");
        return 2;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("no-perf: seccomp");
        return 1;
    }
    execvp(argv[1], argv + 1);
    perror(argv[1]);
    return 127;
}
