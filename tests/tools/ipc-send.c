/* SPDX-License-Identifier: MIT */
/*
 * tests/tools/ipc-send.c - sends raw bytes to a diagnostic socket and prints what came back in a
 * form that does not depend on the process (so a real runtime and pipeprof can be compared):
 *   ipc-send (--pid PID | --path SOCKET) [--hex HEX] [--cmd SET ID] [--shut] [--silent-ms N]
 *            [--decode none|pi1|pi2|pi3|env|u64|stream] [--timeout MS] [--collect]
 *            [--hold-ms N] [--churn N]
 * --collect sends dotnet-trace's default CollectTracing2; --hold-ms keeps the connection open
 * (without reading) for N ms after the response: a client that never reads. --churn N opens
 * and closes N connections (half of them after 2 bytes, half after a half-close) and prints
 * "churned N".
 * Output: one line, e.g. "ok size=24 i32=0", "error hresult=0x80131385", "eof", "timeout",
 * or for --decode the layout ("pi3 v=1 pid=match cookie=nonzero os=Linux ...").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/ipc.h"

static int
send_hex(int fd, const char *hex)
{
    uint8_t buf[70000];
    size_t n = 0;

    while (hex[0] != '\0' && hex[1] != '\0' && n < sizeof(buf)) {
        unsigned v;

        if (hex[0] == ' ' || hex[0] == ':') {
            hex++;
            continue;
        }
        if (sscanf(hex, "%2x", &v) != 1) {
            return -EINVAL;
        }
        buf[n++] = (uint8_t)v;
        hex += 2;
    }
    return ipc_client_send(fd, buf, n);
}

static const char *
nonempty(const char *s)
{
    return s != NULL && s[0] != '\0' ? "nonempty" : "empty";
}

int
main(int argc, char **argv)
{
    const char *path = NULL, *hex = NULL, *decode = "none";
    int pid = 0, set = -1, id = -1, shut = 0, timeout = 5000, silent_ms = 0, fd, n, i;
    int collect = 0, hold_ms = 0, churn = 0;
    static uint8_t resp[IPC_MAX_MESSAGE + 1];
    char found[4096];
    struct ipc_response r;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--pid") == 0 && i + 1 < argc) {
            pid = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--path") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strcmp(argv[i], "--hex") == 0 && i + 1 < argc) {
            hex = argv[++i];
        } else if (strcmp(argv[i], "--cmd") == 0 && i + 2 < argc) {
            set = (int)strtol(argv[i + 1], NULL, 0);
            id = (int)strtol(argv[i + 2], NULL, 0);
            i += 2;
        } else if (strcmp(argv[i], "--collect") == 0) {
            collect = 1;
        } else if (strcmp(argv[i], "--churn") == 0 && i + 1 < argc) {
            churn = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--hold-ms") == 0 && i + 1 < argc) {
            hold_ms = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--shut") == 0) {
            shut = 1;
        } else if (strcmp(argv[i], "--decode") == 0 && i + 1 < argc) {
            decode = argv[++i];
        } else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
            timeout = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--silent-ms") == 0 && i + 1 < argc) {
            silent_ms = atoi(argv[++i]);
        } else {
            fprintf(stderr, "ipc-send: bad argument %s\n", argv[i]);
            return 2;
        }
    }
    if (path == NULL && pid > 0) {
        struct ipc_peer impostor;

        if (ipc_client_find_socket(pid, found, sizeof(found), &impostor) < 0) {
            printf("nosocket\n");
            return 1;
        }
        path = found;
    }
    for (i = 0; path != NULL && i < churn; i++) {
        if (ipc_client_connect(path, &fd) < 0) {
            printf("noconnect at %d\n", i);
            return 1;
        }
        if (i % 2 == 0) {
            if (ipc_client_send(fd, "DO", 2) < 0) {
                printf("sendfail at %d\n", i);
                return 1;
            }
        } else {
            shutdown(fd, SHUT_WR);
        }
        close(fd);
    }
    if (churn > 0) {
        printf("churned %d\n", churn);
        return 0;
    }
    if (path == NULL || ipc_client_connect(path, &fd) < 0) {
        printf("noconnect\n");
        return 1;
    }
    if (silent_ms > 0) {
        usleep((useconds_t)silent_ms * 1000);
    }
    if (set >= 0) {
        uint8_t h[IPC_HEADER_SIZE];

        ipc_header_encode(h, IPC_HEADER_SIZE, (uint8_t)set, (uint8_t)id);
        if (ipc_client_send(fd, h, sizeof(h)) < 0) {
            printf("sendfail\n");
            return 1;
        }
    }
    if (collect) {
        struct ipc_collect c;
        const char *why;
        static uint8_t m[4096];

        memset(&c, 0, sizeof(c));
        c.command_id = IPC_EP_COLLECT_TRACING2;
        c.buffer_mb = 256;
        c.format = 1;
        c.request_rundown = 1;
        if (ipc_providers_parse("Microsoft-Windows-DotNETRuntime:0x100003801D:4,"
                                "Microsoft-DotNETCore-SampleProfiler:0xF00000000000:4",
                                &c, &why) < 0 ||
            (n = ipc_collect_encode(&c, m, sizeof(m))) < 0 ||
            ipc_client_send(fd, m, (size_t)n) < 0) {
            printf("sendfail\n");
            ipc_collect_fini(&c);
            return 1;
        }
        ipc_collect_fini(&c);
    }
    if (hex != NULL && send_hex(fd, hex) < 0) {
        printf("sendfail\n");
        return 1;
    }
    if (shut) {
        shutdown(fd, SHUT_WR);
    }
    n = ipc_client_read_response(fd, resp, sizeof(resp), timeout);
    if (n == -ENODATA) {
        printf("eof\n");
        return 0;
    }
    if (n == -ETIMEDOUT) {
        printf("timeout\n");
        return 0;
    }
    if (n < 0 || ipc_response_decode(resp, (size_t)n, &r) < 0) {
        printf("badresponse %d\n", n);
        return 0;
    }
    if (r.status == IPC_RESPONSE_ERROR) {
        printf("error size=%u hresult=0x%08x\n", r.header.size, r.hresult);
        return 0;
    }

    if (r.status != IPC_RESPONSE_OK) {
        printf("status=0x%02x size=%u\n", r.status, r.header.size);
        return 0;
    }
    if (strncmp(decode, "pi", 2) == 0) {
        struct ipc_process_info pi;
        static const uint8_t zero[16];
        int v = decode[2] - '0';

        if (ipc_process_info_decode(r.payload, r.payload_len, v, &pi) < 0) {
            printf("pi%d undecodable\n", v);
            return 0;
        }
        printf("pi%d pid=%s cookie=%s cmd=%s os=%s arch=%s", v,
               pid == 0 || pi.pid == (uint64_t)pid ? "match" : "mismatch",
               memcmp(pi.cookie, zero, 16) ? "nonzero" : "zero", nonempty(pi.command_line), pi.os,
               pi.arch);
        if (v >= 2) {
            printf(" entry=%s version=%s", nonempty(pi.entrypoint_assembly),
                   nonempty(pi.product_version));
        }
        if (v >= 3) {
            printf(" rid=%s", pi.runtime_id ? pi.runtime_id : "(none)");
        }
        printf("\n");
        ipc_process_info_fini(&pi);
    } else if (strcmp(decode, "env") == 0) {
        uint32_t expect = r.payload_len >= 4
                                  ? (uint32_t)r.payload[0] | r.payload[1] << 8 |
                                            r.payload[2] << 16 | (uint32_t)r.payload[3] << 24
                                  : 0;
        size_t total = 0;
        uint8_t buf[65536];
        ssize_t k;

        while ((k = read(fd, buf, sizeof(buf))) > 0) {
            total += (size_t)k;
        }
        printf("env size=%u bytes=%s\n", r.header.size, total == expect ? "match" : "mismatch");
    } else if (strcmp(decode, "stream") == 0) {
        uint8_t magic[8];
        size_t got = 0;
        ssize_t k;

        while (got < 8 && (k = read(fd, magic + got, 8 - got)) > 0) {
            got += (size_t)k;
        }
        printf("ok size=%u session=%s stream=%s\n", r.header.size,
               r.value != 0 ? "nonzero" : "zero",
               got == 8 && memcmp(magic, "Nettrace", 8) == 0 ? "nettrace" : "other");
    } else if (r.payload_len == 8) {
        printf("ok size=%u u64=%s\n", r.header.size, r.value != 0 ? "nonzero" : "zero");
    } else if (r.payload_len == 4) {
        printf("ok size=%u i32=%u\n", r.header.size, r.hresult);
    } else {
        printf("ok size=%u\n", r.header.size);
    }
    if (hold_ms > 0) {
        fflush(stdout);
        usleep((useconds_t)hold_ms * 1000);
    }
    close(fd);
    return 0;
}
