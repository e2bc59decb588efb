#ifndef PP_TEST_HOST_UNSHARE_H
#define PP_TEST_HOST_UNSHARE_H

/* The host's calls of test-host-unshare (test-host-unshare-calls.c): 0 or -errno each. */
#define HU_EXPORT __attribute__((visibility("default")))
HU_EXPORT int hu_unshare(void);
HU_EXPORT int hu_getfd(int fd);
HU_EXPORT int hu_close(int fd);
HU_EXPORT int hu_dup2(int oldfd, int newfd);

#endif
