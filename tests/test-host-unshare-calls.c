/* The host's side of test-host-unshare: a shared object of its own, so that its calls come from
 * code that is not the library's (fds.c trusts the program host/ is linked into). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/test-host-unshare.h"

int
hu_unshare(int way)
{
    switch (way) {
    case HU_CLOSE_RANGE:
        return close_range(~0U, ~0U, CLOSE_RANGE_UNSHARE) == 0 ? 0 : -errno;
    case HU_UNSHARE:
        return unshare(CLONE_FILES) == 0 ? 0 : -errno;
    default:
        return syscall(SYS_unshare, (long)CLONE_FILES) == 0 ? 0 : -errno;
    }
}

int
hu_getfd(int fd)
{
    return fcntl(fd, F_GETFD) >= 0 ? 0 : -errno;
}

int
hu_close(int fd)
{
    return close(fd) == 0 ? 0 : -errno;
}

int
hu_dup2(int oldfd, int newfd)
{
    return dup2(oldfd, newfd) >= 0 ? 0 : -errno;
}

int
hu_fstat(int fd)
{
    struct stat st;

    return fstatat(fd, "", &st, AT_EMPTY_PATH) == 0 ? 0 : -errno;
}

int
hu_read(int fd)
{
    char c;

    return read(fd, &c, 1) >= 0 ? 0 : -errno;
}

int
hu_write(int fd)
{
    return write(fd, "x", 1) >= 0 ? 0 : -errno;
}
