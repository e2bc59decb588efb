/* SPDX-License-Identifier: MIT */
/*
 * ipc/ports.c - where the diagnostic server lives: the DOTNET_DiagnosticPorts syntax
 * (ipc-protocol.md 9.1), the runtime's default socket name and its disambiguation key (2.1).
 * Parsing is pure; the two path helpers read /proc and the environment only. Context: any
 * thread. Must not start anything: the server (server.c) acts on what is parsed here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>
#include <unistd.h>

#include "ipc/ipc.h"

void
ipc_port_list_fini(struct ipc_port_list *l)
{
    size_t i;

    for (i = 0; l->ports != NULL && i < l->count; i++) {
        free(l->ports[i].path);
    }
    free(l->ports);
    l->ports = NULL;
    l->count = 0;
}

/* Strips spaces around [*s, *e). */
static void
ipc_ports_trim(const char **s, const char **e)
{
    while (*s < *e && (**s == ' ' || **s == '\t')) {
        (*s)++;
    }
    while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t')) {
        (*e)--;
    }
}

static int
ipc_ports_tag_is(const char *s, size_t n, const char *tag)
{
    return strlen(tag) == n && strncasecmp(s, tag, n) == 0;
}

/* Parses one port config "path[,tag...]" of [s, e) and appends it unless its address is empty. */
static int
ipc_ports_parse_one(const char *s, const char *e, struct ipc_port_list *out)
{
    const char *addr_s = s, *addr_e, *p;
    int have_type = 0, have_suspend = 0;
    struct ipc_port_config cfg = { NULL, IPC_PORT_CONNECT, 1 };
    struct ipc_port_config *grown;

    for (addr_e = s; addr_e < e && *addr_e != ','; addr_e++) {
    }
    /* Tags left to right; the leftmost of a kind wins (the runtime applies them right to left). */
    for (p = addr_e; p < e;) {
        const char *ts = p + 1, *te = ts;

        while (te < e && *te != ',') {
            te++;
        }
        p = te;
        ipc_ports_trim(&ts, &te);
        if (ipc_ports_tag_is(ts, (size_t)(te - ts), "connect") && !have_type) {
            cfg.type = IPC_PORT_CONNECT;
            have_type = 1;
        } else if (ipc_ports_tag_is(ts, (size_t)(te - ts), "listen") && !have_type) {
            cfg.type = IPC_PORT_LISTEN;
            have_type = 1;
        } else if (ipc_ports_tag_is(ts, (size_t)(te - ts), "suspend") && !have_suspend) {
            cfg.suspend = 1;
            have_suspend = 1;
        } else if (ipc_ports_tag_is(ts, (size_t)(te - ts), "nosuspend") && !have_suspend) {
            cfg.suspend = 0;
            have_suspend = 1;
        }
    }
    ipc_ports_trim(&addr_s, &addr_e);
    if (addr_e == addr_s) {
        return 0;
    }
    cfg.path = strndup(addr_s, (size_t)(addr_e - addr_s));
    if (cfg.path == NULL) {
        return -ENOMEM;
    }
    grown = realloc(out->ports, (out->count + 1) * sizeof(*grown));
    if (grown == NULL) {
        free(cfg.path);
        return -ENOMEM;
    }
    out->ports = grown;
    out->ports[out->count++] = cfg;
    return 0;
}

int
ipc_ports_parse(const char *value, struct ipc_port_list *out)
{
    const char *s = value;
    int err;

    out->ports = NULL;
    out->count = 0;
    if (value == NULL) {
        return 0;
    }
    while (*s != '\0') {
        const char *e = strchr(s, ';');

        if (e == NULL) {
            e = s + strlen(s);
        }
        if (e > s) {
            err = ipc_ports_parse_one(s, e, out);
            if (err < 0) {
                return err;
            }
        }
        s = *e == ';' ? e + 1 : e;
    }
    return 0;
}

const char *
ipc_process_stat(int pid, char *buf, size_t cap)
{
    char path[64];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    n = read(fd, buf, cap - 1);
    close(fd);
    if (n <= 0) {
        return NULL;
    }
    buf[n] = '\0';
    /* comm may hold spaces and ')': fields are counted from the last ')'. */
    return strrchr(buf, ')');
}

/* This process's key, read once: the default socket's name, the upstream's and a session's
 * process info each asked /proc for it at every process's start. A fork()ed child has another
 * pid and reads its own; the key is stored before the pid that says whose it is. */
static _Atomic uint64_t ipc_own_key;
static _Atomic int ipc_own_key_pid;

uint64_t
ipc_process_start_key(int pid)
{
    char buf[1024];
    unsigned long long v = 0;
    const char *p;
    int field, own = pid == (int)getpid();

    if (own && atomic_load_explicit(&ipc_own_key_pid, memory_order_acquire) == pid) {
        return atomic_load_explicit(&ipc_own_key, memory_order_relaxed);
    }
    p = ipc_process_stat(pid, buf, sizeof(buf));
    if (p == NULL) {
        return 0;
    }
    /* After ')': field 3 (state) ... field 22 (starttime) is the 20th. */
    for (field = 2; field < 22 && *p != '\0'; p++) {
        if (*p == ' ') {
            field++;
        }
    }
    if (field != 22 || sscanf(p, "%llu", &v) != 1) {
        return 0;
    }
    if (own) {
        atomic_store_explicit(&ipc_own_key, v, memory_order_relaxed);
        atomic_store_explicit(&ipc_own_key_pid, pid, memory_order_release);
    }
    return v;
}

int
ipc_default_socket_path(char *out, size_t cap, uint64_t key_override)
{
    const char *tmp = getenv("TMPDIR");
    uint64_t key = key_override != 0 ? key_override : ipc_process_start_key(getpid());
    size_t sun_cap = sizeof(((struct sockaddr_un *)NULL)->sun_path);
    int n;

    if (tmp == NULL || tmp[0] == '\0') {
        tmp = "/tmp/";
    }
    n = snprintf(out, cap, "%s%sdotnet-diagnostic-%d-%llu-socket", tmp,
                 tmp[strlen(tmp) - 1] == '/' ? "" : "/", (int)getpid(), (unsigned long long)key);
    if (n < 0 || (size_t)n >= cap || (size_t)n >= sun_cap) {
        return -ENAMETOOLONG;
    }
    return 0;
}
