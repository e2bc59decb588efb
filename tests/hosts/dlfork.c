/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/dlfork.c - a host that forks while a loader call of its own is under way, which
 * bare returns:
 *
 *   walk       three times: dl_iterate_phdr with a callback that sleeps 300 ms on its first object
 *              (the agent's manager refreshes its module list every 100 ms meanwhile, and waits
 *              for the loader's list lock this thread holds), then forks; the child dlopen()s libc
 *              (RTLD_NOLOAD), lives 500 ms as a worker, forks a child of its own, waits for it and
 *              exit()s 0 (its dl_iterate_phdr would wait forever, bare too: the list lock is held
 *              there by the forking thread under its old tid).
 *   walkother  three times: another thread holds a dl_iterate_phdr open 200 ms in its callback
 *              while this one forks (plain fork(), not from a callback). The child inherits the
 *              list lock held by a thread it does not have (bare too: its own walk, dlopen or
 *              dlclose would wait forever); it says so by one write, burns 100 ms of CPU and
 *              exit()s 0. Before host/dl.c counted every thread's walk, the child's agent start
 *              waited for that lock for good, and the child's exit() for the agent's life lock:
 *              killed after 20 s, in 2 of 3 forks of a record run (the others waited in their
 *              prepare handlers for the walk's end, behind the manager's refresh).
 *   walkexec   the same, and the child then execs /bin/true.
 *   ctor       ten times: dlopen() of libhost-dlfork-ctor.so, whose constructor holds glibc's
 *              dl_load_lock 250 ms (it sleeps) and forks; its child says so, burns 100 ms and
 *              exit()s 0. Another thread dlopen()s and dlclose()s libhost-dlfork-other.so
 *              meanwhile (each host dlclose makes the agent rescan its module list).
 *   ctorburn   the same while a third thread burns CPU (sampled).
 *              The agent's dlopen of libelf, at its first symbols (once a process), mostly falls
 *              in a constructor's 250 ms and waits for it, holding the module lock and the loader
 *              lock, which the fork's prepare handlers then waited for forever before their bound
 *              (host/dl.c): "the dlopen whose constructor forks (its fork) did not return in 20 s"
 *              in 6 of 6 runs (cpu mode, the first of each).
 *
 * A fork or a child that does not return within 20 s is said on stderr (or in the output) and
 * ends the host with status 2: under the library before host/dl.c's host_loader_fork_stuck the
 * fork's prepare handlers waited for the module lock, held by the manager, which waited for this
 * walk; and the child's exit() waited for the agent's life lock, held by the agent's start in the
 * child, which waited for the list lock (shim.c, shim_atfork_child, now starts no agent there).
 */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
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

static void
sleep_ms(long ms)
{
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };

    nanosleep(&t, NULL);
}

/* "exit N", or what else the child did */
static void
print_child(const char *what, int round, int status)
{
    if (status == -3) {
        printf("%s %d: the child did not exit in 20 s (killed)\n", what, round);
        fprintf(stderr, "dlfork: %s %d: the child did not exit in 20 s (killed)\n", what, round);
    } else if (status >= 0 && WIFEXITED(status)) {
        printf("%s %d: child exit %d\n", what, round, WEXITSTATUS(status));
    } else {
        printf("%s %d: child status %d\n", what, round, status);
    }
}

static atomic_int walker_inside;

static int
hold_walk(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info;
    (void)size;
    (void)arg;
    atomic_store(&walker_inside, 1);
    sleep_ms(200);
    return 1;
}

static void *
walker_main(void *arg)
{
    *(int *)arg = dl_iterate_phdr(hold_walk, NULL);
    return NULL;
}

/* walkother and walkexec: a plain fork while another thread is inside its walk */
static int
fork_beside_walk(int exec_child)
{
    static const char said[] = "walkother child: runs\n";
    int failed = 0;

    for (int i = 0; i < 3; i++) {
        pthread_t walker;
        int r = -1, status;
        pid_t pid;

        atomic_store(&walker_inside, 0);
        if (pthread_create(&walker, NULL, walker_main, &r) != 0) {
            return 3;
        }
        while (!atomic_load(&walker_inside)) {
            sleep_ms(1);
        }
        sleep_ms(20); /* well inside its 200 ms */
        fflush(stdout);
        waiting_for = "the fork";
        alarm(20);
        pid = fork();
        alarm(0);
        if (pid == 0) {
            (void)!write(1, said, sizeof(said) - 1);
            host_burn_us(100000);
            if (exec_child) {
                execl("/bin/true", "true", (char *)NULL);
                _exit(5);
            }
            exit(0);
        }
        status = host_wait_child(pid);
        pthread_join(walker, NULL);
        printf("walk on another thread: dl_iterate_phdr %d\n", r);
        print_child("walkother", i, status);
        failed |= status != 0;
    }
    return failed ? 2 : 0;
}

static char lib_dir[PATH_MAX];
static atomic_int opener_stop;

static void *
lib_open(const char *name)
{
    char path[PATH_MAX + 64];

    snprintf(path, sizeof(path), "%s/%s", lib_dir, name);
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

/* dlopen and dlclose of another library in a loop, so that the agent rescans its modules often */
static void *
opener_main(void *arg)
{
    long *n = arg;

    while (!atomic_load(&opener_stop)) {
        void *h = lib_open("libhost-dlfork-other.so");

        if (h == NULL || dlclose(h) != 0) {
            *n = -1;
            return NULL;
        }
        ++*n;
        sleep_ms(2);
    }
    return NULL;
}

static void *
burner_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&opener_stop)) {
        host_burn_us(10000);
    }
    return NULL;
}

/* ctor and ctorburn: a fork from a constructor of the host's dlopen */
static int
fork_in_ctor(int burn)
{
    pthread_t opener, burner;
    long opened = 0;
    int failed = 0;
    char *slash;

    if (readlink("/proc/self/exe", lib_dir, sizeof(lib_dir) - 1) <= 0 ||
        (slash = strrchr(lib_dir, '/')) == NULL) {
        return 3;
    }
    *slash = '\0';
    if (pthread_create(&opener, NULL, opener_main, &opened) != 0 ||
        (burn && pthread_create(&burner, NULL, burner_main, NULL) != 0)) {
        return 3;
    }
    for (int i = 0; i < 10; i++) {
        void *h;
        int *status;

        sleep_ms(10);
        waiting_for = "the dlopen whose constructor forks (its fork)";
        alarm(60);
        h = lib_open("libhost-dlfork-ctor.so");
        alarm(0);
        status = h != NULL ? dlsym(h, "host_dlfork_ctor_status") : NULL;
        if (status == NULL) {
            printf("ctor %d: %s\n", i, dlerror());
            failed = 1;
            continue;
        }
        print_child("ctor", i, *status);
        failed |= *status != 0;
        dlclose(h);
    }
    atomic_store(&opener_stop, 1);
    pthread_join(opener, NULL);
    if (burn) {
        pthread_join(burner, NULL);
    }
    printf("other library opened and closed: %s\n", opened > 0 ? "yes" : "no");
    return failed ? 2 : 0;
}

int
main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s walk|walkother|walkexec|ctor|ctorburn\n", argv[0]);
        return 64;
    }
    signal(SIGALRM, on_alarm);
    if (strcmp(argv[1], "walkother") == 0 || strcmp(argv[1], "walkexec") == 0) {
        host_wait_go();
        return fork_beside_walk(strcmp(argv[1], "walkexec") == 0);
    }
    if (strcmp(argv[1], "ctor") == 0 || strcmp(argv[1], "ctorburn") == 0) {
        host_wait_go();
        return fork_in_ctor(strcmp(argv[1], "ctorburn") == 0);
    }
    if (strcmp(argv[1], "walk") != 0) {
        fprintf(stderr, "usage: %s walk|walkother|walkexec|ctor|ctorburn\n", argv[0]);
        return 64;
    }
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
