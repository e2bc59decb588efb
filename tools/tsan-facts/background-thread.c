/* SPDX-License-Identifier: MIT */
/* tools/tsan-facts/background-thread.c - built plain and with TSan by run.sh. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
/* How many threads /proc/self/task lists once the program started one thread of its own. */
static void *
idle(void *a)
{
    (void)a;
    sleep(2);
    return NULL;
}
int
main(void)
{
    pthread_t th;
    int n = 0;
    DIR *d;
    pthread_create(&th, NULL, idle, NULL);
    usleep(200000);
    d = opendir("/proc/self/task");
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    printf("threads: %d (one started)\n", n - 2);
    pthread_join(th, NULL);
    return 0;
}
