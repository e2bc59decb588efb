/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz-ipc-codec.c - libFuzzer target for ipc/protocol.c and ipc/ports.c. The input
 * is a whole request (header + payload, as a client would send it); every decoder runs on it,
 * and whatever decodes must re-encode and decode to the same thing. Corpus:
 * tests/fuzz/corpus/fuzz-ipc-codec/ (replayed by ctest).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/ipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
fuzz_collect_roundtrip(uint8_t id, const struct ipc_collect *c)
{
    static uint8_t m[IPC_MAX_MESSAGE + 1];
    struct ipc_collect again;
    uint32_t i;
    int n;

    n = ipc_collect_encode(c, m, sizeof(m));
    if (n < 0) {
        return; /* UTF-16 -> UTF-8 -> UTF-16 may grow (U+FFFD), past 64 KB */
    }
    if (ipc_collect_decode(id, m + IPC_HEADER_SIZE, (size_t)n - IPC_HEADER_SIZE, &again) != 0) {
        abort();
    }
    if (again.provider_count != c->provider_count || again.buffer_mb != c->buffer_mb ||
        again.rundown_keyword != c->rundown_keyword) {
        abort();
    }
    for (i = 0; i < c->provider_count; i++) {
        if (strcmp(again.providers[i].name, c->providers[i].name) != 0 ||
            again.providers[i].keywords != c->providers[i].keywords ||
            again.providers[i].event_id_count != c->providers[i].event_id_count) {
            abort();
        }
    }
    ipc_collect_fini(&again);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ipc_header h;
    struct ipc_collect c;
    struct ipc_process_info pi;
    struct ipc_response r;
    struct ipc_port_list ports;
    const uint8_t *payload = size > IPC_HEADER_SIZE ? data + IPC_HEADER_SIZE : data;
    size_t plen = size > IPC_HEADER_SIZE ? size - IPC_HEADER_SIZE : 0;
    uint8_t cookie[16];
    uint64_t v;
    size_t pos = 0;
    char *s, *text;
    const char *why;
    uint8_t id;
    int ver, rc;

    rc = ipc_header_decode(data, size, &h);
    rc |= ipc_response_decode(data, size, &r);
    for (id = IPC_EP_COLLECT_TRACING; id <= IPC_EP_COLLECT_TRACING6; id++) {
        if (ipc_collect_decode(id, payload, plen, &c) == 0) {
            fuzz_collect_roundtrip(id, &c);
        }
        ipc_collect_fini(&c);
    }
    rc |= ipc_stop_decode(payload, plen, &v);
    for (ver = 1; ver <= 3; ver++) {
        if (ipc_process_info_decode(payload, plen, ver, &pi) == 0) {
            ipc_process_info_fini(&pi);
        }
    }
    while (ipc_string_decode(data, size, &pos, &s) == 0 && s != NULL) {
        free(s);
    }
    rc |= ipc_advertise_decode(data, size, cookie, &v);
    text = malloc(size + 1);
    if (text != NULL) {
        memcpy(text, data, size);
        text[size] = '\0';
        if (ipc_ports_parse(text, &ports) == 0 && ports.count > 0 && ports.ports[0].path[0] == 0) {
            abort(); /* an empty address is never kept */
        }
        ipc_port_list_fini(&ports);
        memset(&c, 0, sizeof(c));
        rc |= ipc_providers_parse(text, &c, &why);
        ipc_collect_fini(&c);
        free(text);
    }
    (void)rc; /* only crashes and aborts matter here */
    return 0;
}
