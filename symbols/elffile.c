/* SPDX-License-Identifier: MIT */
/*
 * symbols/elffile.c - what an ELF file on disk is (its build-id and load span, to compare with
 * what a process loaded) and the function an address lies in by the file's unwind tables (a
 * stripped library's function without a symbol). Raw reads of the machine's own ELF class through
 * one read-only mapping, no libelf: the agent reads a gone module's tables here, and the CLI the
 * files of a killed process's modules (cli/names.c). Context: not signal-safe; any thread.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/symbols.h"

#if __ELF_NATIVE_CLASS == 64
#define SYM_ELFCLASS ELFCLASS64
#else
#define SYM_ELFCLASS ELFCLASS32
#endif

/* A file mapped read-only whole. */
struct sym_map {
    const uint8_t *p;
    size_t size;
};

static int
sym_map_open(const char *path, struct sym_map *m)
{
    struct stat st;
    /* O_NONBLOCK: the path comes from a trace, which anyone may write; a FIFO there held the
     * open until a writer came (pipeprof report hung on it). Refused below as no regular file. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), err = 0;

    m->p = MAP_FAILED;
    m->size = 0;
    if (fd < 0) {
        return -errno;
    }
    if (fstat(fd, &st) != 0) {
        err = -errno;
    } else if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
        err = -EBADMSG;
    } else {
        m->size = (size_t)st.st_size;
        m->p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        err = m->p == MAP_FAILED ? -errno : 0;
    }
    close(fd);
    return err;
}

static void
sym_map_close(struct sym_map *m)
{
    if (m->p != MAP_FAILED) {
        munmap((void *)(uintptr_t)m->p, m->size);
    }
    m->p = MAP_FAILED;
}

/* The ELF header of m when it is one of the machine's class with program headers inside. */
static const ElfW(Ehdr) * sym_map_ehdr(const struct sym_map *m)
{
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)(const void *)m->p;

    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != SYM_ELFCLASS ||
        eh->e_phentsize != sizeof(ElfW(Phdr)) || eh->e_phoff > m->size ||
        (m->size - eh->e_phoff) / sizeof(ElfW(Phdr)) < eh->e_phnum) {
        return NULL;
    }
    return eh;
}

/* Copies the NT_GNU_BUILD_ID of the notes at [p, p + left) into out. */
static void
sym_notes_build_id(const uint8_t *p, size_t left, struct sym_file_id *out)
{
    while (left >= sizeof(ElfW(Nhdr))) {
        ElfW(Nhdr) nh;
        size_t namesz, descsz, total;

        memcpy(&nh, p, sizeof(nh));
        namesz = (nh.n_namesz + 3u) & ~(size_t)3;
        descsz = (nh.n_descsz + 3u) & ~(size_t)3;
        total = sizeof(nh) + namesz + descsz;
        if (nh.n_namesz > left || nh.n_descsz > left || total > left) {
            return; /* corrupt note: no build-id */
        }
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
            memcmp(p + sizeof(nh), "GNU", 4) == 0 && nh.n_descsz <= SYM_BUILD_ID_MAX) {
            memcpy(out->build_id, p + sizeof(nh) + namesz, nh.n_descsz);
            out->build_id_len = nh.n_descsz;
            return;
        }
        p += total;
        left -= total;
    }
}

static int
sym_map_id(const struct sym_map *m, struct sym_file_id *out)
{
    const ElfW(Ehdr) *eh = sym_map_ehdr(m);

    memset(out, 0, sizeof(*out));
    if (eh == NULL) {
        return -EBADMSG;
    }
    out->load_lo = UINT64_MAX;
    for (size_t i = 0; i < eh->e_phnum; i++) {
        ElfW(Phdr) ph;

        memcpy(&ph, m->p + eh->e_phoff + i * sizeof(ph), sizeof(ph));
        if (ph.p_type == PT_LOAD) {
            if (ph.p_vaddr < out->load_lo) {
                out->load_lo = ph.p_vaddr;
            }
            if (ph.p_vaddr + ph.p_memsz > out->load_hi) {
                out->load_hi = ph.p_vaddr + ph.p_memsz;
            }
        } else if (ph.p_type == PT_GNU_EH_FRAME) {
            out->eh_frame_hdr = ph.p_vaddr;
        } else if (ph.p_type == PT_NOTE && out->build_id_len == 0 && ph.p_offset <= m->size &&
                   m->size - ph.p_offset >= ph.p_filesz) {
            sym_notes_build_id(m->p + ph.p_offset, ph.p_filesz, out);
        }
    }
    if (out->load_lo == UINT64_MAX) {
        return -EBADMSG; /* nothing to load: not an object a process maps */
    }
    return 0;
}

int
sym_image_id_read(const void *image, struct sym_file_id *out)
{
    const ElfW(Ehdr) *eh = image;
    const uint8_t *p = image;

    memset(out, 0, sizeof(*out));
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != SYM_ELFCLASS ||
        eh->e_phentsize != sizeof(ElfW(Phdr))) {
        return -EBADMSG;
    }
    out->load_lo = UINT64_MAX;
    for (size_t i = 0; i < eh->e_phnum; i++) { /* the load span first: notes are read from it */
        ElfW(Phdr) ph;

        memcpy(&ph, p + eh->e_phoff + i * sizeof(ph), sizeof(ph));
        if (ph.p_type == PT_LOAD) {
            out->load_lo = ph.p_vaddr < out->load_lo ? ph.p_vaddr : out->load_lo;
            out->load_hi =
                    ph.p_vaddr + ph.p_memsz > out->load_hi ? ph.p_vaddr + ph.p_memsz : out->load_hi;
        }
    }
    if (out->load_lo == UINT64_MAX) {
        return -EBADMSG;
    }
    for (size_t i = 0; i < eh->e_phnum; i++) {
        ElfW(Phdr) ph;

        memcpy(&ph, p + eh->e_phoff + i * sizeof(ph), sizeof(ph));
        if (ph.p_type == PT_GNU_EH_FRAME) {
            out->eh_frame_hdr = ph.p_vaddr;
        } else if (ph.p_type == PT_NOTE && out->build_id_len == 0 && ph.p_vaddr >= out->load_lo &&
                   ph.p_vaddr + ph.p_memsz <= out->load_hi) {
            sym_notes_build_id(p + (ph.p_vaddr - out->load_lo), ph.p_memsz, out);
        }
    }
    return 0;
}

int
sym_file_id_read(const char *path, struct sym_file_id *out)
{
    struct sym_map m;
    int err = sym_map_open(path, &m);

    memset(out, 0, sizeof(*out));
    if (err == 0) {
        err = sym_map_id(&m, out);
    }
    sym_map_close(&m);
    return err;
}

/*
 * The function that pc lies in, from the unwind tables of a module without a symbol for it (a
 * stripped library): the .eh_frame_hdr search table sorts every FDE by its function's start, and
 * the FDE gives the length. Only the encodings every x86_64 and arm64 toolchain writes are read
 * (version 1, a udata4 count, a datarel sdata4 table, FDEs with 32-bit length and pcrel sdata4
 * addresses). Without it a stripped library's hot function was one row per instruction address.
 * h is the table's bytes, at address h_addr (a mapped image's runtime address, or the ELF virtual
 * address of a file's), pc in the same space; every read stays within [lo, hi) (the mapped image,
 * or the segment of the file read). 0 with [*start, *end), or -ENOENT.
 */
int
sym_fde_range(const uint8_t *h, uint64_t h_addr, const uint8_t *lo, const uint8_t *hi, uint64_t pc,
              uint64_t *start, uint64_t *end)
{
    uint32_t count, fde_len;
    int32_t loc, fde_off, range;
    const uint8_t *fde;
    size_t first = 0, last;

    if (h < lo || hi - h < 12 || h[0] != 1 || h[2] != 0x03 || h[3] != 0x3b ||
        ((h[1] & 0x0f) != 0x0b && (h[1] & 0x0f) != 0x03)) {
        return -ENOENT;
    }
    memcpy(&count, h + 8, sizeof(count));
    if ((size_t)(hi - h - 12) / 8 < count) {
        return -ENOENT; /* the table runs past what can be read */
    }
    last = count;
    while (first < last) { /* the first entry whose start is above pc */
        size_t mid = first + (last - first) / 2;

        memcpy(&loc, h + 12 + 8 * mid, sizeof(loc));
        if (h_addr + (uint64_t)(int64_t)loc <= pc) {
            first = mid + 1;
        } else {
            last = mid;
        }
    }
    if (first == 0) {
        return -ENOENT;
    }
    memcpy(&loc, h + 12 + 8 * (first - 1), sizeof(loc));
    memcpy(&fde_off, h + 12 + 8 * (first - 1) + 4, sizeof(fde_off));
    if ((fde_off < 0 && (size_t)(h - lo) < (size_t) - (int64_t)fde_off) ||
        (fde_off >= 0 && (size_t)(hi - h) < (size_t)fde_off + 16u)) {
        return -ENOENT;
    }
    fde = h + fde_off;
    if (hi - fde < 16) {
        return -ENOENT;
    }
    memcpy(&fde_len, fde, sizeof(fde_len));
    if (fde_len == 0xffffffffu || fde_len < 12) {
        return -ENOENT;
    }
    memcpy(&range, fde + 12, sizeof(range)); /* length, CIE pointer, pc_begin, pc_range */
    *start = h_addr + (uint64_t)(int64_t)loc;
    *end = *start + (uint64_t)(uint32_t)range;
    return pc < *end ? 0 : -ENOENT;
}

int
sym_fde_range_file(const char *path, const uint8_t *want, size_t want_len, uint64_t addr,
                   uint64_t *start, uint64_t *end)
{
    struct sym_file_id id;
    const ElfW(Ehdr) * eh;
    struct sym_map m;
    int err = -ENOENT;

    if (sym_map_open(path, &m) != 0) {
        return -ENOENT;
    }
    eh = sym_map_ehdr(&m);
    if (eh == NULL || sym_map_id(&m, &id) != 0 || id.eh_frame_hdr == 0 ||
        (want_len > 0 &&
         (id.build_id_len != want_len || memcmp(id.build_id, want, want_len) != 0))) {
        goto out;
    }
    /* The loadable segment that holds .eh_frame_hdr (and, as every linker lays them out, its
     * .eh_frame), read from the file's bytes in ELF virtual addresses. */
    for (size_t i = 0; i < eh->e_phnum; i++) {
        ElfW(Phdr) ph;

        memcpy(&ph, m.p + eh->e_phoff + i * sizeof(ph), sizeof(ph));
        if (ph.p_type == PT_LOAD && id.eh_frame_hdr >= ph.p_vaddr &&
            id.eh_frame_hdr - ph.p_vaddr < ph.p_filesz && ph.p_offset <= m.size &&
            m.size - ph.p_offset >= ph.p_filesz) {
            const uint8_t *seg = m.p + ph.p_offset;

            err = sym_fde_range(seg + (id.eh_frame_hdr - ph.p_vaddr), id.eh_frame_hdr, seg,
                                seg + ph.p_filesz, addr, start, end);
            break;
        }
    }
out:
    sym_map_close(&m);
    return err;
}
