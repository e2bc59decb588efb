/* SPDX-License-Identifier: MIT */
/*
 * tests/tools/tid-churn.c - creates and joins threads for SECONDS seconds, one at a time, so that
 * the kernel's pid space (thread ids come from it) wraps and pids are reused within a recording:
 * cli-record-commands' `many-reused` case. Prints the threads it made. Not profiled itself.
 *
 *   tid-churn SECONDS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *
tid_churn_nothing(void *arg)
{
    return arg;
}

int
main(int argc, char **argv)
{
    time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 10);
    unsigned long made = 0;
    pthread_t th;
    int i;

    while (time(NULL) < end) {
        for (i = 0; i < 1000; i++) {
            if (pthread_create(&th, NULL, tid_churn_nothing, NULL) != 0) {
                break;
            }
            pthread_join(th, NULL);
            made++;
        }
    }
    printf("%lu\n", made);
    return 0;
}
