/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/start.c - a host that looks at errno before any call of its own: in a constructor
 * of its own (run after the preloaded library's) and at main()'s start. The loader leaves it 0;
 * a library whose constructor made calls that failed (a missing file, a socket name in use)
 * must not hand its errno on. Then it burns a little CPU, so the recordings hold samples.
 */
#include <errno.h>
#include <stdio.h>

#include "hosts.h"

static int errno_in_constructor = -1;

__attribute__((constructor)) static void
host_start_constructor(void)
{
    errno_in_constructor = errno;
}

int
main(void)
{
    int errno_in_main = errno;

    printf("errno in the host's constructor: %d\n", errno_in_constructor);
    printf("errno at main: %d\n", errno_in_main);
    host_wait_go();
    host_burn_us(200000);
    printf("done\n");
    return 0;
}
