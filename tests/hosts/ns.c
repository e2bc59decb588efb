/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/ns.c - a host that changes its namespaces where the kernel wants a process of one
 * thread (host/ns.c): host-contract.sh compares its output and status, bare and under the agent.
 *
 *   user     500 ms of CPU (sessions of host-contract.sh's sessions mode start meanwhile), then
 *            unshare(CLONE_NEWUSER), its uid_map and gid_map written (setgroups denied), getuid();
 *            then syscall(SYS_unshare, CLONE_NEWUSER) into a nested one (unmapped: getuid() is the
 *            overflow uid); then 300 ms of CPU in burn_after_unshare, which a recording samples
 *   mount    a child unshare()s a mount namespace; the host setns()es into it by its ns file with
 *            nstype 0, then CLONE_NEWNS through syscall(), then by the child's pidfd
 *   threads  the same calls while a thread of the host's own waits: EINVAL each, bare as well
 *
 * A part bare cannot make here (no user namespaces, no privilege for a mount namespace) prints a
 * SKIPPED line, the same in every run.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hosts.h"

static void
result(const char *what, long rc)
{
    printf("%s: %ld%s%s\n", what, rc, rc < 0 ? " " : "", rc < 0 ? strerrorname_np(errno) : "");
}

static int
write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC), rc;

    if (fd < 0) {
        return -1;
    }
    rc = write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -1;
    close(fd);
    return rc;
}

/* 1 when this process's namespace of kind (a name under /proc/self/ns) is the one at path. */
static int
same_ns(const char *kind, const char *path)
{
    char self[64];
    struct stat a, b;

    snprintf(self, sizeof(self), "/proc/self/ns/%s", kind);
    return stat(self, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
           a.st_dev == b.st_dev;
}

/* The CPU a recording must sample after the unshares (host-contract-ns-user's HC_RECORD_FRAME):
 * the library started again in the new user namespace. */
static __attribute__((noinline)) void
burn_after_unshare(void)
{
    host_burn_us(300000);
    __asm__ volatile("" ::: "memory");
}

static int
user_mode(void)
{
    uid_t uid = getuid();
    gid_t gid = getgid();
    char map[64];
    long rc;

    host_burn_us(500000);
    rc = unshare(CLONE_NEWUSER);

    if (rc != 0 && (errno == EPERM || errno == ENOSPC || errno == ENOSYS)) {
        printf("SKIPPED: no user namespace here (%s)\n", strerror(errno));
        return 0;
    }
    result("unshare(CLONE_NEWUSER)", rc);
    snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)uid);
    printf("uid_map: %d\n", write_file("/proc/self/uid_map", map));
    printf("setgroups deny: %d\n", write_file("/proc/self/setgroups", "deny\n"));
    snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)gid);
    printf("gid_map: %d\n", write_file("/proc/self/gid_map", map));
    printf("getuid: %u getgid: %u\n", (unsigned)getuid(), (unsigned)getgid());
    result("syscall(SYS_unshare, CLONE_NEWUSER)", syscall(SYS_unshare, CLONE_NEWUSER));
    printf("nested getuid: %u\n", (unsigned)getuid());
    burn_after_unshare();
    printf("burned\n");
    return 0;
}

/* A child in a mount namespace of its own until told to go (its pipe closed); 0 or -1. */
struct child {
    pid_t pid;
    int go;
};

static int
child_start(struct child *c)
{
    int ready[2], go[2];
    char b = 0;

    if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0) {
        return -1;
    }
    c->pid = fork();
    if (c->pid == 0) {
        close(go[1]);
        b = unshare(CLONE_NEWNS) == 0 ? 'y' : 'n';
        (void)write(ready[1], &b, 1);
        (void)read(go[0], &b, 1);
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    c->go = go[1];
    if (c->pid < 0 || read(ready[0], &b, 1) != 1) {
        b = 'n';
    }
    close(ready[0]);
    return b == 'y' ? 0 : -1;
}

static void
child_end(struct child *c)
{
    int status;

    close(c->go);
    if (c->pid > 0) {
        waitpid(c->pid, &status, 0);
    }
}

/* The setns() calls into c's mount namespace: each one's result, and whether it took effect. */
static void
setns_calls(const struct child *c)
{
    char path[64];
    int fd, pidfd;

    snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)c->pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    printf("mount ns open: %s\n", fd >= 0 ? "ok" : strerror(errno));
    result("setns(nsfd, 0)", setns(fd, 0));
    printf("in the child's mount ns: %d\n", same_ns("mnt", path));
    result("syscall(SYS_setns, nsfd, CLONE_NEWNS)", syscall(SYS_setns, fd, CLONE_NEWNS));
    close(fd);
    pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
    if (pidfd >= 0) {
        result("setns(pidfd, CLONE_NEWNS)", setns(pidfd, CLONE_NEWNS));
        close(pidfd);
    } else {
        printf("pidfd_open: %s\n", strerror(errno)); /* Linux before 5.3 */
    }
    printf("in the child's mount ns: %d\n", same_ns("mnt", path));
}

static int
mount_mode(void)
{
    struct child c;

    if (child_start(&c) != 0) {
        printf("SKIPPED: no mount namespace here (no privilege)\n");
        child_end(&c);
        return 0;
    }
    setns_calls(&c);
    child_end(&c);
    return 0;
}

static void *
waiter(void *arg)
{
    char b;

    (void)read(*(int *)arg, &b, 1);
    return NULL;
}

static int
threads_mode(void)
{
    struct child c;
    pthread_t th;
    int p[2];

    if (pipe2(p, O_CLOEXEC) != 0 || pthread_create(&th, NULL, waiter, &p[0]) != 0) {
        return 1;
    }
    result("unshare(CLONE_NEWUSER) beside a thread", unshare(CLONE_NEWUSER));
    result("syscall(SYS_unshare, CLONE_NEWUSER) beside a thread",
           syscall(SYS_unshare, CLONE_NEWUSER));
    if (child_start(&c) == 0) {
        setns_calls(&c);
    } else {
        printf("SKIPPED: no mount namespace here (no privilege)\n");
    }
    child_end(&c);
    close(p[1]);
    pthread_join(th, NULL);
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(void);
    } modes[] = { { "user", user_mode }, { "mount", mount_mode }, { "threads", threads_mode } };

    setvbuf(stdout, NULL, _IOLBF, 0);
    host_wait_go();
    for (size_t i = 0; argc > 1 && i < sizeof(modes) / sizeof(modes[0]); i++) {
        if (strcmp(argv[1], modes[i].name) == 0) {
            return modes[i].run();
        }
    }
    fprintf(stderr, "usage: host-ns user|mount|threads\n");
    return 2;
}
