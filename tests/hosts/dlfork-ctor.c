/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/dlfork-ctor.c - libhost-dlfork-ctor.so, which host-dlfork's ctor modes dlopen():
 * its constructor sleeps 250 ms and forks, inside the host's dlopen (glibc's dl_load_lock held
 * by the forking thread all along: a library dlopen begun meanwhile waits for it). The child says
 * so by one write, burns 100 ms of CPU and exit()s 0; the constructor waits for it at most 20 s and
 * leaves the outcome in host_dlfork_ctor_status for the host: the child's wait status, or -1 when
 * the fork failed, -3 when the child did not exit in 20 s (killed). A fork that does not return in
 * 20 s ends the host (its SIGALRM handler).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hosts.h"

int host_dlfork_ctor_status __attribute__((visibility("default")));

__attribute__((constructor)) static void
host_dlfork_ctor(void)
{
    static const char said[] = "ctor child: runs\n";
    struct timespec hold = { 0, 250000000L };
    pid_t pid;

    nanosleep(&hold, NULL); /* dl_load_lock held: a library dlopen begun now waits for it */
    fflush(stdout);         /* the child's exit() flushes what it inherited */
    alarm(20);              /* the fork itself: the host's SIGALRM handler says so and ends it */
    pid = fork();
    alarm(0);
    if (pid == 0) {
        (void)!write(1, said, sizeof(said) - 1);
        host_burn_us(100000);
        exit(0);
    }
    host_dlfork_ctor_status = host_wait_child(pid);
    if (host_dlfork_ctor_status == -3) {
        fprintf(stderr, "dlfork: the constructor's child did not exit in 20 s (killed)\n");
    }
}
