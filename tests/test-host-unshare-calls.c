/* The host's side of test-host-unshare: a shared object of its own, so that its calls come from
 * code that is not the library's (fds.c trusts the program host/ is linked into). */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "tests/test-host-unshare.h"

int
hu_unshare(void)
{
    return close_range(~0U, ~0U, CLOSE_RANGE_UNSHARE) == 0 ? 0 : -errno;
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
