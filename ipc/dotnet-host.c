/* SPDX-License-Identifier: MIT */
/*
 * ipc/dotnet-host.c - whether this process is a .NET host, whose runtime will start a diagnostic
 * server of its own (struct ipc_server_options' dotnet_host; docs/dotnet-hosts.md). Reads the
 * environment, /proc/self/exe and the executable's ELF image only. Context: the shim's
 * constructor, before the host's main().
 */
#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipc/ipc.h"

/* How much of an executable the apphost test below reads: an apphost is tens of KB, a
 * single-file app's host (the runtime linked in) about 12 MB of ELF image before its bundle. */
#define IPC_HOST_SCAN_MAX (64u << 20)

/* The end of the ELF image in a file (its last PT_LOAD byte): what follows is appended data,
 * such as a single-file app's bundle of assemblies. 0 when this is not a 64-bit ELF file. */
static size_t
ipc_elf_image_end(const unsigned char *p, size_t size)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(const void *)p;
    size_t end = 0, i;

    if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_phentsize != sizeof(Elf64_Phdr) ||
        eh->e_phoff > size || (size - eh->e_phoff) / sizeof(Elf64_Phdr) < eh->e_phnum) {
        return 0;
    }
    for (i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(const void *)(p + eh->e_phoff) + i;

        if (ph->p_type == PT_LOAD && ph->p_offset <= size && ph->p_filesz <= size - ph->p_offset &&
            ph->p_offset + ph->p_filesz > end) {
            end = ph->p_offset + ph->p_filesz;
        }
    }
    return end;
}

/*
 * A .NET host runs its own diagnostic server under the very name we would use. At constructor
 * time libcoreclr.so is not loaded yet, so look at the executable: `dotnet` itself, or an
 * apphost (which names libhostfxr.so in its ELF image; a single-file app's host too, before the
 * bundle appended to it). A runtime this misses is still found when it binds its socket
 * (ipc_redirect_path()), only later.
 */
int
ipc_dotnet_host_detect(void)
{
    const char *forced = getenv("PIPEPROF_DOTNET_HOST");
    char exe[4096];
    const char *base;
    struct stat st;
    void *map;
    size_t len;
    ssize_t n;
    int fd, found = 0;

    if (forced != NULL && forced[0] != '\0') {
        return strcmp(forced, "0") != 0;
    }
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        return 0;
    }
    exe[n] = '\0';
    base = strrchr(exe, '/');
    base = base != NULL ? base + 1 : exe;
    if (strcmp(base, "dotnet") == 0) {
        return 1;
    }
    fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            len = ipc_elf_image_end(map, (size_t)st.st_size);
            if (len > 0 && len <= IPC_HOST_SCAN_MAX) { /* a large program is not a host */
                found = memmem(map, len, "libhostfxr.so", 13) != NULL;
            }
            munmap(map, (size_t)st.st_size);
        }
    }
    close(fd);
    return found;
}
