#ifndef PP_TEST_HOST_UNSHARE_H
#define PP_TEST_HOST_UNSHARE_H

/* The host's calls of test-host-unshare (test-host-unshare-calls.c): 0 or -errno each. */
#define HU_EXPORT __attribute__((visibility("default")))
/* the ways a host thread gets a private fd table */
enum { HU_CLOSE_RANGE, HU_UNSHARE, HU_SYSCALL_UNSHARE };
HU_EXPORT int hu_unshare(int way);
HU_EXPORT int hu_getfd(int fd);
HU_EXPORT int hu_close(int fd);
HU_EXPORT int hu_dup2(int oldfd, int newfd);
/* data calls: fstatat of the fd itself (libc's fstat is not interposed: host/fds.c's header),
 * a 1-byte read and a 1-byte write */
HU_EXPORT int hu_fstat(int fd);
HU_EXPORT int hu_read(int fd);
HU_EXPORT int hu_write(int fd);

#endif
