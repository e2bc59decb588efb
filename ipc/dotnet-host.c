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

/* The ELF image up to which the apphost test below reads it whole for "libhostfxr.so": an
 * apphost is tens of KB (78 KB for .NET 10). A larger image is read only for the runtime's
 * export DotNetRuntimeInfo in its dynamic strings: a single-file app's host (the runtime linked
 * in, about 12 MB of ELF image before its bundle) exports it, for the debuggers. Reading every
 * image up to 64 MB took 10 ms of CPU and 500 page faults in each start of gcc's cc1 (33 MB),
 * preloaded or recorded (docs/performance.md). */
#define IPC_HOST_SCAN_MAX (2u << 20)

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

/* The file range [off, off + size) of the image's virtual range [vaddr, vaddr + size), through
 * its PT_LOAD headers; 0 when no segment holds it in the file. */
static size_t
ipc_elf_file_offset(const unsigned char *p, size_t size, uint64_t vaddr, uint64_t len)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(const void *)p;
    size_t i;

    for (i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(const void *)(p + eh->e_phoff) + i;

        if (ph->p_type == PT_LOAD && vaddr >= ph->p_vaddr && len <= ph->p_filesz &&
            vaddr - ph->p_vaddr <= ph->p_filesz - len && ph->p_offset <= size &&
            ph->p_filesz <= size - ph->p_offset) {
            return (size_t)(ph->p_offset + (vaddr - ph->p_vaddr));
        }
    }
    return 0;
}

/* Whether the image's dynamic string table (PT_DYNAMIC's DT_STRTAB, DT_STRSZ) names name: a
 * few KB of the file, where a whole image may be tens of MB. p is a 64-bit ELF image (checked by
 * ipc_elf_image_end()) of size bytes. */
static int
ipc_elf_dynstr_has(const unsigned char *p, size_t size, const char *name)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(const void *)p;
    uint64_t strtab = 0, strsz = 0;
    size_t i, off;

    for (i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(const void *)(p + eh->e_phoff) + i;
        const Elf64_Dyn *d;
        size_t j;

        if (ph->p_type != PT_DYNAMIC || ph->p_offset > size || ph->p_filesz > size - ph->p_offset) {
            continue;
        }
        d = (const Elf64_Dyn *)(const void *)(p + ph->p_offset);
        for (j = 0; j < ph->p_filesz / sizeof(*d) && d[j].d_tag != DT_NULL; j++) {
            if (d[j].d_tag == DT_STRTAB) {
                strtab = d[j].d_un.d_ptr;
            } else if (d[j].d_tag == DT_STRSZ) {
                strsz = d[j].d_un.d_val;
            }
        }
    }
    if (strtab == 0 || strsz == 0 || strsz > size) {
        return 0;
    }
    off = ipc_elf_file_offset(p, size, strtab, strsz);
    return off != 0 && memmem(p + off, (size_t)strsz, name, strlen(name) + 1) != NULL;
}

/* /proc/self/exe's target, read once per image: the .NET host test and the server's process
 * information both need it at every start (an exec'd image starts with it unread again). */
static char ipc_exe_path[4096];
static int ipc_exe_read; /* 1 once ipc_exe_path holds it (release/acquire) */

const char *
ipc_self_exe(void)
{
    ssize_t n;

    if (!__atomic_load_n(&ipc_exe_read, __ATOMIC_ACQUIRE)) {
        n = readlink("/proc/self/exe", ipc_exe_path, sizeof(ipc_exe_path) - 1);
        ipc_exe_path[n > 0 ? n : 0] = '\0';
        __atomic_store_n(&ipc_exe_read, 1, __ATOMIC_RELEASE);
    }
    return ipc_exe_path;
}

int
ipc_dotnet_host_image(const void *file, size_t size)
{
    size_t len = ipc_elf_image_end(file, size);

    if (len > 0 && len <= IPC_HOST_SCAN_MAX) { /* an apphost */
        return memmem(file, len, "libhostfxr.so", 13) != NULL;
    }
    return len > 0 && ipc_elf_dynstr_has(file, len, "DotNetRuntimeInfo"); /* single-file */
}

/*
 * A .NET host runs its own diagnostic server under the very name we would use. At constructor
 * time libcoreclr.so is not loaded yet, so look at the executable: `dotnet` itself, or an
 * apphost (which names libhostfxr.so in its ELF image, of at most IPC_HOST_SCAN_MAX), or a
 * single-file app's host (a larger image, before the bundle appended to it, that exports
 * DotNetRuntimeInfo). A runtime this misses is still found when it binds its socket
 * (ipc_redirect_path()), only later.
 */
int
ipc_dotnet_host_detect(void)
{
    const char *forced = getenv("PIPEPROF_DOTNET_HOST");
    const char *exe, *base;
    struct stat st;
    void *map;
    int fd, found = 0;

    if (forced != NULL && forced[0] != '\0') {
        return strcmp(forced, "0") != 0;
    }
    exe = ipc_self_exe();
    if (exe[0] == '\0') {
        return 0;
    }
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
            found = ipc_dotnet_host_image(map, (size_t)st.st_size);
            munmap(map, (size_t)st.st_size);
        }
    }
    close(fd);
    return found;
}
