/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/dlfork.c - a host that forks inside its own loader call, which bare returns:
 *
 *   walk   three times: dl_iterate_phdr with a callback that sleeps 300 ms on its first object
 *          (the agent's manager refreshes its module list every 100 ms meanwhile, and waits for
 *          the loader's list lock this thread holds), then forks; the child dlopen()s libc
 *          (RTLD_NOLOAD), lives 500 ms as a worker, forks a child of its own, waits for it and
 *          exit()s 0 (its dl_iterate_phdr would wait forever, bare too: the list lock is held
 *          there by the forking thread under its old tid).
 *
 * A fork or a child that does not return within 20 s is said on stderr and ends the host with
 * status 2: under the library before host/dl.c's host_loader_fork_stuck the fork's prepare
 * handlers waited for the module lock, held by the manager, which waited for this walk; and the
 * child's exit() waited for the agent's life lock, held by the agent's start in the child, which
 * waited for the list lock (shim.c, shim_atfork_child, now starts no agent there).
 */
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hosts.h"

static const char *volatile waiting_for = "";

static void
on_alarm(int sig)
{
    (void)sig;
    (void)!write(2, "dlfork: ", 8);
    (void)!write(2, waiting_for, strlen(waiting_for));
    (void)!write(2, " did not return in 20 s\n", 24);
    _exit(2);
}

static int
fork_in_walk(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct timespec hold = { 0, 300000000L };
    int *status = arg;
    pid_t pid;

    (void)info;
    (void)size;
    nanosleep(&hold, NULL);
    fflush(stdout); /* the child's exit() flushes what it inherited */
    waiting_for = "the fork";
    alarm(20);
    pid = fork();
    if (pid == 0) {
        struct timespec live = { 1, 0 };

        if (dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD) == NULL) {
            _exit(3);
        }
        nanosleep(&live, NULL); /* a worker's life: the library's start in a child is 5 ms in */
        waiting_for = "the child's own fork";
        alarm(20);
        pid = fork();
        if (pid == 0) {
            _exit(0);
        }
        exit(pid > 0 && waitpid(pid, status, 0) == pid && *status == 0 ? 0 : 4);
    }
    waiting_for = "the child";
    if (pid < 0 || waitpid(pid, status, 0) != pid) {
        *status = -1;
    }
    alarm(0);
    return 1;
}

int
main(int argc, char **argv)
{
    if (argc != 2 || strcmp(argv[1], "walk") != 0) {
        fprintf(stderr, "usage: %s walk\n", argv[0]);
        return 64;
    }
    signal(SIGALRM, on_alarm);
    host_wait_go();
    for (int i = 0; i < 2; i++) {
        int status = -1, r = dl_iterate_phdr(fork_in_walk, &status);

        printf("walk %d: dl_iterate_phdr %d, child %s %d\n", i, r,
               status >= 0 && WIFEXITED(status) ? "exit" : "status",
               status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : status);
    }
    printf("done\n");
    return 0;
}
