/* SPDX-License-Identifier: MIT */
/*
 * cli/collect.c - `pipeprof collect`: records a trace from a process that serves the .NET
 * diagnostic protocol (a real runtime or a pipeprof host) exactly as dotnet-trace does:
 * CollectTracing2 on one connection (which becomes the stream), ResumeRuntime on a second,
 * StopTracing on a third at Ctrl-C or when the duration ends, then the stream is copied to its
 * end. With --diagnostic-port it listens and takes advertised connections (reverse mode), and can
 * start the target itself after `--`. Context: the CLI's single thread; SIGINT/SIGTERM only set
 * a flag. The progress line is written only when stderr is a terminal.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/diag.h"
#include "cli/output.h"
#include "ipc/ipc.h"

/*
 * dotnet-trace's default (the dotnet-common and dotnet-sampled-thread-time profiles), plus
 * pipeprof's own provider (thread names, modules, lost samples), which a .NET runtime ignores.
 */
#define PP_COLLECT_DEFAULT_PROVIDERS                                                      \
    "Microsoft-Windows-DotNETRuntime:0x100003801D:4,Microsoft-DotNETCore-SampleProfiler:" \
    "0xF00000000000:4,pipeprof:0:4"
#define PP_COLLECT_STOP_WAIT_MS 30000 /* for the stop connection and for the stream's end */

static volatile sig_atomic_t pp_collect_interrupted;

static void
pp_collect_on_signal(int sig)
{
    (void)sig;
    pp_collect_interrupted = 1;
}

struct pp_collect {
    int pid;
    const char *port; /* --diagnostic-port: we listen, the target connects */
    int listen_fd;
    struct ipc_sockfile port_file; /* the file of our listening socket */
    uint64_t ad_pid;               /* reverse mode: the pid whose advertises we take */
    char sock[4096];               /* -p: the target's socket */
    double duration;               /* 0: until Ctrl-C */
    int child;                     /* pid of the command after `--`, or 0 */
    int other_users;               /* --allow-other-user: --socket may be another user's */
    long sock_pid;                 /* --socket: the process that served the first connection */
};

/* The end of a refusal of --socket's file or server for its user. */
#define PP_COLLECT_NOT_OURS "not you (uid %ld) or root; --allow-other-user connects anyway\n"

/*
 * --socket PATH: a socket file (followed when a link: the path is the user's own choice) that
 * the caller's uid or root owns, unless --allow-other-user; its server is checked at connect
 * (pp_collect_check_peer). Said on stderr. Returns 0, -EPERM or another negative errno.
 */
static int
pp_collect_check_socket_file(const struct pp_collect *c)
{
    struct stat st;

    if (stat(c->sock, &st) != 0) {
        int err = -errno;

        fprintf(stderr, "pipeprof collect: %s: %s\n", c->sock, strerror(-err));
        return err;
    }
    if (!S_ISSOCK(st.st_mode)) {
        fprintf(stderr, "pipeprof collect: %s is not a socket\n", c->sock);
        return -ENOTSOCK;
    }
    if (st.st_uid != geteuid() && st.st_uid != 0 && !c->other_users) {
        fprintf(stderr,
                "pipeprof collect: refusing %s: it belongs to uid %ld, " PP_COLLECT_NOT_OURS,
                c->sock, (long)st.st_uid, (long)geteuid());
        return -EPERM;
    }
    return 0;
}

/*
 * Whom a connection reaches: with -p, the listening process must be the target itself (a
 * socket of the right name can be planted by anyone who may write the directory); with --socket
 * its server must be ours (our uid, or root: --allow-other-user lifts that), and the same process
 * every time; in reverse mode the connecting process must be ours or the child we started. The
 * refusal is said on stderr. Returns 0 or -EPERM.
 */
static int
pp_collect_check_peer(struct pp_collect *c, int fd)
{
    struct ipc_peer peer;

    if (ipc_client_peer(fd, &peer) < 0) {
        fprintf(stderr, "pipeprof collect: cannot tell who serves the connection\n");
        return -EPERM;
    }
    if (c->port == NULL && c->pid == 0 && c->sock_pid < 0) {
        /* --socket: the first connection names its server, which must be ours; the later
         * ones (ResumeRuntime, StopTracing) must reach the same process */
        if (peer.uid != (long)geteuid() && peer.uid != 0 && !c->other_users) {
            fprintf(stderr,
                    "pipeprof collect: refusing %s: it is served by process %ld of uid "
                    "%ld, " PP_COLLECT_NOT_OURS,
                    c->sock, peer.pid, peer.uid, (long)geteuid());
            return -EPERM;
        }
        c->sock_pid = peer.pid;
        fprintf(stderr, "Process        : %ld (uid %ld), serving %s\n", peer.pid, peer.uid,
                c->sock);
    } else if (c->port == NULL && c->pid == 0 && peer.pid != c->sock_pid) {
        fprintf(stderr,
                "pipeprof collect: refusing %s: it is served by process %ld of uid %ld now, not "
                "by process %ld\n",
                c->sock, peer.pid, peer.uid, c->sock_pid);
        return -EPERM;
    }
    if (c->port == NULL && c->pid > 0 && peer.pid != c->pid) {
        fprintf(stderr,
                "pipeprof collect: refusing %s: it is served by process %ld of uid %ld, not by "
                "process %d\n",
                c->sock, peer.pid, peer.uid, c->pid);
        return -EPERM;
    }
    if (c->port != NULL && peer.uid != (long)geteuid() && peer.uid != 0 &&
        !(c->child > 0 && peer.pid == c->child)) {
        fprintf(stderr,
                "pipeprof collect: refused a connection on %s from process %ld of uid %ld (not "
                "ours)\n",
                c->port, peer.pid, peer.uid);
        return -EPERM;
    }
    return 0;
}

/* A fresh connection to the target: connect (-p) or the next advertised one (reverse mode). */
static int
pp_collect_open(struct pp_collect *c, int timeout_ms, int *fd)
{
    uint8_t cookie[16];
    uint64_t pid;
    int err;

    if (c->port == NULL) {
        int tries;

        /* A server binds its socket (the file appears) a moment before it listens: a client that
         * finds a process just started may be refused in between (seen once in CI, 1000 Hz
         * torture host on a loaded machine). Refusals are retried for up to a second. */
        for (tries = 0;; tries++) {
            err = ipc_client_connect(c->sock, fd);
            if (err != -ECONNREFUSED || tries == 50) {
                break;
            }
            usleep(20000);
        }
        if (err == 0 && pp_collect_check_peer(c, *fd) < 0) {
            close(*fd);
            *fd = -1;
            err = -EPERM;
        }
        return err;
    }
    for (;;) {
        err = ipc_client_accept_advertise(c->listen_fd, timeout_ms, c->ad_pid, fd, cookie, &pid);
        if (err < 0 || pp_collect_check_peer(c, *fd) == 0) {
            break;
        }
        close(*fd); /* an outsider: keep waiting for the target */
        *fd = -1;
    }
    if (err == 0 && c->ad_pid == 0) {
        c->ad_pid = pid; /* later connections must come from the same process */
    }
    return err;
}

/* Sends one request and reads its response. Returns 0 (OK), a positive HRESULT, or -errno. */

static void
pp_collect_usage(FILE *out)
{
    fprintf(out,
            "usage: pipeprof collect (-p PID | --socket PATH [--allow-other-user] |\n"
            "                         --diagnostic-port PATH) [--providers SPEC]\n"
            "                        [--duration SECONDS] [-o FILE] [-- COMMAND [ARGS...]]\n\n"
            "Records a .nettrace from a process serving the .NET diagnostic protocol.\n"
            "  -p, --process-id PID      the target (its socket is found in $TMPDIR or /tmp)\n"
            "  --socket PATH             the target's listening socket itself (in a .NET host,\n"
            "                            the agent's own: PIPEPROF_DIAGNOSTIC_PORT); it must be\n"
            "                            yours or root's, and be served by a process of yours\n"
            "                            or root's, which is printed\n"
            "  --allow-other-user        with --socket: connect to another user's socket too\n"
            "                            (root recording a daemon's socket, say)\n"
            "  --diagnostic-port PATH    listen on PATH; the target connects "
            "(DOTNET_DiagnosticPorts=PATH)\n"
            "  --providers SPEC          Provider[:keywords[:level[:key=value;...]]],... "
            "(default:\n"
            "                            %s)\n"
            "  --duration SECONDS        stop after this long (default: at Ctrl-C)\n"
            "  -o, --output FILE         default trace.nettrace\n"
            "  -- COMMAND                with --diagnostic-port: start COMMAND with "
            "DOTNET_DiagnosticPorts set\n"
            "  -h, --help                this text\n"
            "\n"
            "Works against pipeprof agents and real .NET processes alike, as dotnet-trace does:\n"
            "CollectTracing2 (rundown on), ResumeRuntime, then StopTracing at the end of the\n"
            "duration or at Ctrl-C; the target then writes rundown (function names) and ends\n"
            "the stream. On a terminal a progress line shows the time and the megabytes\n"
            "received. Session filter data chooses pipeprof's mode and rate, for example\n"
            "  --providers 'Microsoft-DotNETCore-SampleProfiler:0:4:mode=wall;hz=250'\n"
            "To run a program under the agent from its start, `pipeprof record` is simpler.\n"
            "Exit status: 0 when the trace is complete, 1 on failure, 2 on a usage error.\n",
            PP_COLLECT_DEFAULT_PROVIDERS);
}

/* The dispositions collect replaces while it runs, which CMD gets back (as `record` gives them):
 * CMD started with SIGPIPE ignored (a pipeline's writer got EPIPE and said "write error: Broken
 * pipe" where bare it dies quietly of SIGPIPE: `sort | head` in a bash script) and with SIGINT
 * and SIGTERM at SIG_DFL where the caller ignored them (a background job's SIGINT). */
struct pp_collect_sigs {
    struct sigaction old_int, old_term, old_pipe;
};

static int
pp_collect_spawn(const char *port, char **cmd, const struct pp_collect_sigs *old, int *child)
{
    int pid = fork();

    if (pid < 0) {
        return -errno;
    }
    if (pid == 0) {
        char self[32];

        sigaction(SIGINT, &old->old_int, NULL);
        sigaction(SIGTERM, &old->old_term, NULL);
        sigaction(SIGPIPE, &old->old_pipe, NULL);

        /* Only CMD itself answers the port: its exec'd children, which inherit the
         * environment, would each wait on it for a resume (a pipeprof agent honours this). */
        snprintf(self, sizeof(self), "%ld", (long)getpid());
        setenv("PIPEPROF_TARGET_PID", self, 1);
        setenv("DOTNET_DiagnosticPorts", port, 1);
        execvp(cmd[0], cmd);
        fprintf(stderr, "pipeprof collect: cannot run %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    *child = pid;
    return 0;
}

/* Copies what the stream has (waiting up to 100 ms) to out; sets *eof at its end. */
static int
pp_collect_copy(int stream, int out, uint64_t *bytes, int *eof)
{
    static uint8_t buf[1 << 16];
    struct pollfd pfd = { stream, POLLIN, 0 };
    ssize_t n;
    int r;

    r = poll(&pfd, 1, 100);
    if (r <= 0) {
        return 0;
    }
    n = read(stream, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) {
        return 0;
    }
    if (n <= 0) {
        *eof = 1;
        return 0;
    }
    if (write(out, buf, (size_t)n) != n) {
        return -errno;
    }
    *bytes += (uint64_t)n;
    return 0;
}

int
pp_cmd_collect(int argc, char **argv)
{
    struct pp_collect c = { 0, NULL, -1, { 0, 0 }, 0, "", 0, 0, 0, -1 };
    struct ipc_peer impostor;
    const char *providers = PP_COLLECT_DEFAULT_PROVIDERS, *output = "trace.nettrace", *why;
    struct ipc_collect req;
    struct ipc_response r;
    static uint8_t buf[IPC_MAX_MESSAGE + 1];
    uint8_t msg[28];
    char **cmd = NULL;
    int stream = -1, fd = -1, out = -1, eof = 0, tty = isatty(2), rc = 1, err, i, n;
    uint64_t bytes = 0, start, last_progress = 0, session;
    struct sigaction sa;
    struct pp_collect_sigs old_sigs;
    struct pp_output o = { .fd = -1 };
    char why_out[PATH_MAX + 64];

    memset(&req, 0, sizeof(req));
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            cmd = argv + i + 1;
            break;
        } else if ((strcmp(argv[i], "-p") == 0 || strcmp(argv[i], "--process-id") == 0) &&
                   i + 1 < argc) {
            c.pid = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--diagnostic-port") == 0 && i + 1 < argc) {
            c.port = argv[++i];
        } else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
            if (snprintf(c.sock, sizeof(c.sock), "%s", argv[++i]) >= (int)sizeof(c.sock)) {
                fprintf(stderr, "pipeprof collect: --socket path too long\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--allow-other-user") == 0) {
            c.other_users = 1;
        } else if (strcmp(argv[i], "--providers") == 0 && i + 1 < argc) {
            providers = argv[++i];
        } else if (strcmp(argv[i], "--duration") == 0 && i + 1 < argc) {
            c.duration = atof(argv[++i]);
        } else if ((strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) &&
                   i + 1 < argc) {
            output = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            pp_collect_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "pipeprof collect: unexpected argument '%s'\n", argv[i]);
            pp_collect_usage(stderr);
            return 2;
        }
    }
    if ((c.pid > 0) + (c.port != NULL) + (c.sock[0] != '\0') != 1 ||
        (c.other_users && c.sock[0] == '\0') || (cmd != NULL && (c.port == NULL || !cmd[0]))) {
        pp_collect_usage(stderr);
        return 2;
    }
    err = pp_diag_collect_init(&req, providers, &why);
    if (err < 0) {
        fprintf(stderr, "pipeprof collect: bad --providers: %s\n", why ? why : strerror(-err));
        ipc_collect_fini(&req);
        return 2;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = pp_collect_on_signal; /* no SA_RESTART: poll and accept return EINTR */
    sigaction(SIGINT, &sa, &old_sigs.old_int);
    sigaction(SIGTERM, &sa, &old_sigs.old_term);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, &old_sigs.old_pipe);

    if (c.port != NULL) {
        err = ipc_client_listen(c.port, &c.listen_fd, &c.port_file);
        if (err < 0) {
            fprintf(stderr, "pipeprof collect: cannot listen on %s: %s\n", c.port,
                    ipc_sockfile_refusal(err));
            goto out;
        }
        if (cmd != NULL) {
            err = pp_collect_spawn(c.port, cmd, &old_sigs, &c.child);
            if (err < 0) {
                fprintf(stderr, "pipeprof collect: cannot start %s: %s\n", cmd[0], strerror(-err));
                goto out;
            }
            c.ad_pid = (uint64_t)c.child;
        } else {
            fprintf(stderr,
                    "Waiting for connection on %s\nStart an application with "
                    "DOTNET_DiagnosticPorts=%s\n",
                    c.port, c.port);
        }
    } else if (c.pid == 0 && pp_collect_check_socket_file(&c) < 0) {
        goto out;
    } else if (c.pid > 0) {
        err = ipc_client_find_socket(c.pid, c.sock, sizeof(c.sock), &impostor);
        if (err == -EPERM) {
            fprintf(stderr,
                    "pipeprof collect: refusing %s: it belongs to uid %ld, not to the user of "
                    "process %d\n",
                    c.sock, impostor.uid, c.pid);
            goto out;
        }
        if (err < 0) {
            fprintf(stderr, "pipeprof collect: process %d serves no diagnostic port\n", c.pid);
            goto out;
        }
    }

    /* Connection A: CollectTracing2; it becomes the stream. */
    err = pp_collect_open(&c, c.child ? 10000 : -1, &stream);
    if (err < 0) {
        if (err != -EPERM) { /* a refused peer was named already */
            fprintf(stderr, "pipeprof collect: cannot connect: %s\n", strerror(-err));
        }
        goto out;
    }
    n = ipc_collect_encode(&req, buf, sizeof(buf));
    err = n < 0 ? n : pp_diag_request(stream, buf, (size_t)n, &r, buf, sizeof(buf), 30000);
    if (err != 0) {
        fprintf(stderr, "pipeprof collect: CollectTracing failed: %s\n",
                err > 0 ? pp_diag_hr_name(r.hresult) : strerror(-err));
        goto out;
    }
    session = r.value;
    /* Connection B: ResumeRuntime (OK or UNKNOWN_COMMAND are both fine, as for dotnet-trace). */
    ipc_header_encode(msg, IPC_HEADER_SIZE, IPC_SET_PROCESS, IPC_PROC_RESUME_RUNTIME);
    err = pp_collect_open(&c, 30000, &fd);
    if (err == 0) {
        err = pp_diag_request(fd, msg, IPC_HEADER_SIZE, &r, buf, sizeof(buf), 30000);
        close(fd);
        fd = -1;
    }
    if (err < 0 || (err > 0 && r.hresult != IPC_HR_UNKNOWN_COMMAND)) {
        fprintf(stderr, "pipeprof collect: ResumeRuntime failed\n");
        goto out;
    }
    /* written beside and renamed into place: an earlier trace there stays whole until then */
    if (pp_output_open(&o, output, NULL, 0, why_out, sizeof(why_out)) != 0) {
        fprintf(stderr, "pipeprof collect: %s\n", why_out);
        goto out;
    }
    out = o.fd;
    fprintf(stderr, "Output File    : %s\n", output);
    start = ipc_client_ms();
    while (!eof && !pp_collect_interrupted &&
           (c.duration <= 0 || ipc_client_ms() - start < (uint64_t)(c.duration * 1000))) {
        if (pp_collect_copy(stream, out, &bytes, &eof) < 0) {
            fprintf(stderr, "pipeprof collect: write failed\n");
            goto out;
        }
        if (tty && ipc_client_ms() - last_progress >= 500) {
            uint64_t s = (ipc_client_ms() - start) / 1000;

            last_progress = ipc_client_ms();
            fprintf(stderr, "\r[%02llu:%02llu:%02llu] Recording trace %.2f MB   ",
                    (unsigned long long)(s / 3600), (unsigned long long)(s / 60 % 60),
                    (unsigned long long)(s % 60), (double)bytes / 1e6);
        }
    }
    if (tty) {
        fprintf(stderr, "\n");
    }
    if (!eof) {
        /* Connection C: StopTracing. The target writes rundown and the end of the stream and
         * closes it before it answers, so the stream is drained first (else both wait). */
        ipc_stop_encode(msg, session);
        pp_collect_interrupted = 0;
        err = pp_collect_open(&c, PP_COLLECT_STOP_WAIT_MS, &fd);
        if (err == 0) {
            err = ipc_client_send(fd, msg, sizeof(msg));
        }
        if (err < 0) {
            fprintf(stderr, "pipeprof collect: cannot send StopTracing: %s\n", strerror(-err));
            goto out;
        }
        start = ipc_client_ms();
        while (!eof && ipc_client_ms() - start < PP_COLLECT_STOP_WAIT_MS) {
            if (pp_collect_copy(stream, out, &bytes, &eof) < 0) {
                goto out;
            }
        }
        if (!eof) {
            fprintf(stderr, "pipeprof collect: the stream did not end; trace truncated\n");
            goto out;
        }
        n = ipc_client_read_response(fd, buf, sizeof(buf), PP_COLLECT_STOP_WAIT_MS);
        if (n < 0 || ipc_response_decode(buf, (size_t)n, &r) < 0 || r.status != IPC_RESPONSE_OK) {
            fprintf(stderr, "pipeprof collect: StopTracing was not acknowledged\n");
        }
    }
    out = -1;
    if (pp_output_commit(&o, why_out, sizeof(why_out)) != 0) {
        fprintf(stderr, "pipeprof collect: %s\n", why_out);
        goto out;
    }
    fprintf(stderr, "Trace completed: %s (%llu bytes)\n", output, (unsigned long long)bytes);
    rc = 0;
out:
    if (fd >= 0) {
        close(fd);
    }
    if (stream >= 0) {
        close(stream);
    }
    if (out >= 0 && bytes > 0) {
        /* what arrived is kept, also after a failure (said above) */
        if (pp_output_commit(&o, why_out, sizeof(why_out)) != 0) {
            fprintf(stderr, "pipeprof collect: %s\n", why_out);
            rc = 1;
        }
    }
    pp_output_abort(&o);
    if (c.listen_fd >= 0) {
        close(c.listen_fd);
        ipc_sockfile_remove(c.port, &c.port_file);
    }
    if (c.child > 0) {
        char killed[64];
        int status;

        if (waitpid(c.child, &status, 0) == c.child && WIFSIGNALED(status)) {
            /* Which signal, as record says it: a stream cut short is otherwise unexplained. */
            fprintf(stderr, "pipeprof collect: %s was %s\n", cmd[0],
                    pp_diag_killed_text(status, killed, sizeof(killed)));
        }
    }
    ipc_collect_fini(&req);
    return rc;
}
