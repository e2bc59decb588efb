/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/uvhost.c - a host that runs libuv itself, linked against the system's libuv.so.1,
 * the very object libpipeprof.so links (docs/architecture.md, the host contract: libuv's code is
 * the library's only where the library calls it). It prints every fd number it gets and every
 * result, which must be bare's:
 *
 *   uvhost all   uv_fs_open (sync) before any loop; a loop of its own, its files, a pipe pair, a
 *                named pipe's server and client, TCP (a listener, a client, the accepted
 *                connection), UDP, a timer, a signal (SIGUSR1 sent to itself: libuv's global
 *                signal lock, a pipe shared with the library's loop), an asynchronous uv_fs_open
 *                on libuv's threadpool (its threads are the host's), uv_spawn of a child; the
 *                same loop's parts again on a second thread created by uv_thread_create; fork()
 *                and a loop in the child; the counts of open numbers in 3..1023
 *                (fcntl(F_GETFD), 3..255 in the child) before and after everything is closed.
 *
 * libuv's global signal lock is a pipe, made once per process by the first uv_loop_init: where
 * the host's libuv is the library's, the library's loop made it first (its two fds the
 * library's, high), and the host's first loop makes two fds fewer than bare (documented). So the
 * numbers after the host's first loop are printed as offsets from a base, the number an open
 * got just after that loop (and the counts of open numbers as differences from the count then);
 * the numbers before it are printed as they are.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "hosts.h"

/* What an open got just after the host's first loop, and the count of open numbers then. */
static int base, base_count;

/* fd as an offset from base ("b+N"), an error or a number below base as it is. */
static const char *
rel(char *buf, int fd)
{
    snprintf(buf, 16, fd < base ? "%d" : "b%+d", fd < base ? fd : fd - base);
    return buf;
}

/* 1 in the fork()ed child: the parent's library fds are inherited copies the child may close,
 * open to its probes (host/fds.c, host_fds_forked_child), high: its counts end at 255. */
static int in_child;

/* The numbers in 3..1023 that are open, as the host sees them, less those at base. */
static int
open_count(void)
{
    int n = 0;

    for (int fd = 3; fd < (in_child ? 256 : 1024); fd++) {
        n += fcntl(fd, F_GETFD) != -1;
    }
    return n - base_count;
}

/* Runs loop without blocking while cond holds, at most about 5 s: a wait that never ends shows as
 * a wrong line, not a hang (UV_RUN_ONCE blocks for good where nothing is left to come). */
#define RUN_WHILE(loop, cond)                           \
    for (int run_ = 0; run_ < 5000 && (cond); run_++) { \
        uv_run((loop), UV_RUN_NOWAIT);                  \
        if (cond) {                                     \
            uv_sleep(1);                                \
        }                                               \
    }

static int
fs_open(uv_loop_t *loop, const char *path, int flags)
{
    uv_fs_t req;
    int fd = uv_fs_open(loop, &req, path, flags, 0600, NULL);

    uv_fs_req_cleanup(&req);
    return fd;
}

static int
fs_close(uv_loop_t *loop, int fd)
{
    uv_fs_t req;
    int rc = uv_fs_close(loop, &req, fd, NULL);

    uv_fs_req_cleanup(&req);
    return rc;
}

static int
fileno_of(const void *h)
{
    uv_os_fd_t fd;
    int rc = uv_fileno((const uv_handle_t *)h, &fd);

    return rc < 0 ? rc : fd;
}

static void
on_close(uv_handle_t *h)
{
    (void)h;
}

struct tcp_part {
    uv_tcp_t server, client, accepted;
    uv_connect_t conn;
    int connected, accepted_fd;
};

static void
on_connection(uv_stream_t *server, int status)
{
    struct tcp_part *t = server->data;

    if (status == 0 && uv_tcp_init(server->loop, &t->accepted) == 0) {
        t->accepted_fd =
                uv_accept(server, (uv_stream_t *)&t->accepted) == 0 ? fileno_of(&t->accepted) : -1;
    }
}

static void
on_connect(uv_connect_t *req, int status)
{
    struct tcp_part *t = req->data;

    t->connected = status == 0 ? 1 : status;
}

static void
on_timer(uv_timer_t *timer)
{
    ++*(int *)timer->data;
}

static void
on_signal(uv_signal_t *sig, int signum)
{
    *(int *)sig->data = signum;
    uv_signal_stop(sig);
}

static void
on_exit_cb(uv_process_t *p, int64_t status, int term)
{
    *(int64_t *)p->data = status * 1000 + term;
}

struct async_open {
    uv_fs_t req;
    int fd;
};

static void
on_fs_open(uv_fs_t *req)
{
    ((struct async_open *)req->data)->fd = (int)req->result;
}

/* The parts on one loop of the calling thread's; who names the thread. */
static void
loop_parts(const char *who, int with_process)
{
    char line[512], b1[16], b2[16];
    uv_loop_t loop;
    uv_pipe_t server, client, accepted;
    struct tcp_part t = { 0 };
    uv_udp_t udp;
    uv_timer_t timer;
    uv_signal_t sig;
    uv_process_t proc;
    struct sockaddr_in addr;
    uv_file pipefds[2] = { -1, -1 };
    int fired = 0, signum = 0, rc, fd, pipe_rc;
    int64_t exit_status = -1;
    struct async_open ao = { .fd = -1 };

    rc = uv_loop_init(&loop);
    fd = fs_open(&loop, "/dev/null", O_RDONLY);
    printf("%s: loop_init %d, then open /dev/null %s\n", who, rc, rel(b1, fd));
    pipe_rc = uv_pipe(pipefds, 0, 0);
    printf("%s: uv_pipe %d [%s %s]\n", who, pipe_rc, rel(b1, pipefds[0]), rel(b2, pipefds[1]));

    /* a named pipe: its server's fd, a client's, the accepted one */
    char path[128];
    snprintf(path, sizeof(path), "/tmp/pp-uvhost-%ld-%s.sock", (long)getpid(), who);
    unlink(path);
    uv_pipe_init(&loop, &server, 0);
    uv_pipe_init(&loop, &client, 0);
    uv_pipe_init(&loop, &accepted, 0);
    rc = uv_pipe_bind(&server, path);
    printf("%s: pipe bind %d fd %s\n", who, rc, rel(b1, fileno_of(&server)));
    rc = uv_listen((uv_stream_t *)&server, 4, NULL);
    printf("%s: pipe listen %d\n", who, rc);

    /* TCP on the loopback */
    uv_ip4_addr("127.0.0.1", 0, &addr);
    uv_tcp_init(&loop, &t.server);
    uv_tcp_init(&loop, &t.client);
    t.server.data = &t;
    t.conn.data = &t;
    t.accepted_fd = -2;
    rc = uv_tcp_bind(&t.server, (const struct sockaddr *)&addr, 0);
    printf("%s: tcp bind %d fd %s\n", who, rc, rel(b1, fileno_of(&t.server)));
    rc = uv_listen((uv_stream_t *)&t.server, 4, on_connection);
    printf("%s: tcp listen %d\n", who, rc);
    {
        struct sockaddr_storage name;
        int len = sizeof(name);

        uv_tcp_getsockname(&t.server, (struct sockaddr *)&name, &len);
        rc = uv_tcp_connect(&t.conn, &t.client, (const struct sockaddr *)&name, on_connect);
    }
    printf("%s: tcp connect %d fd %s\n", who, rc, rel(b1, fileno_of(&t.client)));
    RUN_WHILE(&loop, t.connected == 0 || t.accepted_fd == -2);
    printf("%s: tcp connected %d accepted fd %s\n", who, t.connected, rel(b1, t.accepted_fd));

    /* UDP */
    uv_udp_init(&loop, &udp);
    rc = uv_udp_bind(&udp, (const struct sockaddr *)&addr, 0);
    printf("%s: udp bind %d fd %s\n", who, rc, rel(b1, fileno_of(&udp)));

    /* a timer */
    uv_timer_init(&loop, &timer);
    timer.data = &fired;
    uv_timer_start(&timer, on_timer, 1, 0);
    RUN_WHILE(&loop, fired == 0);
    printf("%s: timer fired %d\n", who, fired);

    /* a signal to itself: libuv's handler takes its global lock (a pipe), then writes to the
     * loop's signal pipe */
    uv_signal_init(&loop, &sig);
    sig.data = &signum;
    rc = uv_signal_start(&sig, on_signal, SIGUSR1);
    printf("%s: signal start %d\n", who, rc);
    rc = uv_kill(getpid(), SIGUSR1);
    RUN_WHILE(&loop, signum == 0);
    printf("%s: kill %d, signal received %d\n", who, rc, signum);

    /* an open on libuv's threadpool: its threads are the host's */
    ao.req.data = &ao;
    rc = uv_fs_open(&loop, &ao.req, "/dev/zero", O_RDONLY, 0, on_fs_open);
    RUN_WHILE(&loop, rc == 0 && ao.fd == -1);
    uv_fs_req_cleanup(&ao.req);
    printf("%s: async open %d fd %s\n", who, rc, rel(b1, ao.fd));

    if (with_process) {
        uv_process_options_t opts;
        char *args[] = { "/bin/sh", "-c", "exit 3", NULL };

        memset(&opts, 0, sizeof(opts));
        opts.file = args[0];
        opts.args = args;
        opts.exit_cb = on_exit_cb;
        proc.data = &exit_status;
        rc = uv_spawn(&loop, &proc, &opts);
        RUN_WHILE(&loop, rc == 0 && exit_status == -1);
        printf("%s: spawn %d, exit %lld\n", who, rc, (long long)exit_status);
        uv_close((uv_handle_t *)&proc, on_close);
    }

    fd = fs_open(&loop, "/dev/null", O_RDONLY);
    printf("%s: open /dev/null %s; open numbers %d\n", who, rel(b1, fd), open_count());
    printf("%s: closes %d %d %d %d\n", who, fs_close(&loop, fd), fs_close(&loop, ao.fd),
           pipe_rc == 0 ? fs_close(&loop, pipefds[0]) : pipe_rc,
           pipe_rc == 0 ? fs_close(&loop, pipefds[1]) : pipe_rc);
    uv_close((uv_handle_t *)&server, on_close);
    uv_close((uv_handle_t *)&client, on_close);
    uv_close((uv_handle_t *)&accepted, on_close);
    uv_close((uv_handle_t *)&t.server, on_close);
    uv_close((uv_handle_t *)&t.client, on_close);
    if (t.accepted_fd >= 0) {
        uv_close((uv_handle_t *)&t.accepted, on_close);
    }
    uv_close((uv_handle_t *)&udp, on_close);
    uv_close((uv_handle_t *)&timer, on_close);
    uv_close((uv_handle_t *)&sig, on_close);
    uv_run(&loop, UV_RUN_DEFAULT);
    unlink(path);
    rc = uv_loop_close(&loop);
    fd = fs_open(NULL, "/dev/null", O_RDONLY);
    snprintf(line, sizeof(line), "%s: loop_close %d, then open /dev/null %s; open numbers %d", who,
             rc, rel(b1, fd), open_count());
    fs_close(NULL, fd);
    printf("%s\n", line);
}

static void
thread_main(void *arg)
{
    (void)arg;
    loop_parts("thread", 0);
}

int
main(int argc, char **argv)
{
    uv_loop_t first;
    uv_thread_t th;
    pid_t child;
    char line[16];
    int a, b, rc, st = 0;

    if (argc != 2 || strcmp(argv[1], "all") != 0) {
        fprintf(stderr, "usage: %s all\n", argv[0]);
        return 2;
    }
    host_wait_go();
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* numbers inherited from the caller (a shell's) would fall in different places bare and
     * preloaded, where the lock pipe is not the host's (above) */
    for (a = 3; a < 64; a++) {
        close(a);
    }
    a = fs_open(NULL, "/dev/null", O_RDONLY);
    b = fs_open(NULL, "/dev/zero", O_RDONLY);
    printf("uv_fs_open (no loop) %d %d, close %d\n", a, b, fs_close(NULL, a));
    rc = uv_loop_init(&first);
    base = fs_open(NULL, "/dev/null", O_RDONLY);
    a = fs_close(NULL, base);
    base_count = open_count();
    printf("first loop_init %d, its epoll fd %d; close %d\n", rc, uv_backend_fd(&first), a);
    loop_parts("main", 1);
    rc = uv_thread_create(&th, thread_main, NULL);
    printf("thread create %d, join %d\n", rc, rc == 0 ? uv_thread_join(&th) : rc);

    child = fork();
    if (child == 0) {
        in_child = 1;
        loop_parts("child", 0);
        fflush(stdout);
        _exit(0);
    }
    printf("fork %s, wait %d status %d\n", child > 0 ? "ok" : "failed",
           child > 0 ? (int)waitpid(child, &st, 0) - child : -1, st);
    rc = uv_loop_close(&first);
    a = fs_open(NULL, "/dev/null", O_RDONLY);
    printf("first loop_close %d, open /dev/null %s; open numbers %d; close %d\n", rc, rel(line, a),
           open_count(), fs_close(NULL, b));
    return 0;
}
