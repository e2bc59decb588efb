/* SPDX-License-Identifier: MIT */
/*
 * tests/tools/ipc-impostor.c - what another local user can do to a diagnostic client: answer
 * as if it were the target.
 *   ipc-impostor listen PATH SECONDS      listen at PATH; answer every request OK (session 1)
 *                                         and close: a client that trusts it records a "trace"
 *   ipc-impostor busy PATH SECONDS        the same, answering every request BUSY, as a server
 *                                         above its connection cap does (what the client says)
 *   ipc-impostor advertise PATH PID N     connect to PATH N times, advertise PID, answer OK
 * Prints "served N" (requests answered) at the end, also at SIGTERM. Never used outside the
 * tests.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ipc/ipc.h"

static int impostor_busy; /* answer BUSY instead of OK */

/* Reads one request and answers OK with session 1 (or BUSY); returns 1 when a request was
 * answered. */
static int
impostor_answer(int fd)
{
    uint8_t buf[IPC_MAX_MESSAGE + 1], ok[28];
    int n = ipc_client_read_response(fd, buf, sizeof(buf), 3000);

    if (n < IPC_HEADER_SIZE) {
        return 0;
    }
    if (impostor_busy) {
        return ipc_client_send(fd, ok, ipc_error_encode(ok, IPC_HR_BUSY)) == 0;
    }
    ipc_ok_u64_encode(ok, 1);
    return ipc_client_send(fd, ok, sizeof(ok)) == 0;
}

static void
impostor_on_term(int sig)
{
    (void)sig; /* poll returns EINTR: the listener prints what it served and ends */
}

int
main(int argc, char **argv)
{
    struct sockaddr_un a;
    int served = 0, i;

    if (argc < 4) {
        fprintf(stderr, "usage: ipc-impostor listen|busy PATH SECONDS | advertise PATH PID N\n");
        return 2;
    }
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", argv[2]);
    impostor_busy = strcmp(argv[1], "busy") == 0;
    if (strcmp(argv[1], "listen") == 0 || impostor_busy) {
        int l = socket(AF_UNIX, SOCK_STREAM, 0), ms = atoi(argv[3]) * 1000;
        struct sigaction sa;

        if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 16) < 0) {
            perror("ipc-impostor: listen");
            return 1;
        }
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = impostor_on_term; /* no SA_RESTART */
        sigaction(SIGTERM, &sa, NULL);
        printf("listening\n");
        fflush(stdout);
        for (;;) {
            struct pollfd p = { l, POLLIN, 0 };
            int c;

            if (poll(&p, 1, ms) <= 0) {
                break;
            }
            c = accept(l, NULL, NULL);
            if (c >= 0) {
                served += impostor_answer(c);
                close(c);
            }
        }
        unlink(argv[2]);
    } else if (strcmp(argv[1], "advertise") == 0 && argc >= 5) {
        uint8_t ad[IPC_ADVERTISE_SIZE], cookie[16];

        memset(cookie, 0x42, sizeof(cookie));
        ipc_advertise_encode(ad, cookie, strtoull(argv[3], NULL, 10));
        for (i = 0; i < atoi(argv[4]); i++) {
            int c = socket(AF_UNIX, SOCK_STREAM, 0);

            if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0 ||
                ipc_client_send(c, ad, sizeof(ad)) < 0) {
                if (c >= 0) {
                    close(c);
                }
                usleep(100000);
                continue;
            }
            served += impostor_answer(c);
            close(c);
        }
    } else {
        return 2;
    }
    printf("served %d\n", served);
    return 0;
}
