/* SPDX-License-Identifier: MIT */
/*
 * tests/test-agent-symbols.c - the module list (executable, libc, build-ids, dlopen/dlclose),
 * the symbolizer (.symtab, .dynsym fallback, .gnu_debuglink and build-id debug files, missing
 * sizes; libc checked against dladdr1) and the demangler (C++, Rust legacy and v0 vectors).
 * Fixture libraries are built by tests/agent-symbols.cmake into PP_AGENT_FIXTURE_DIR.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gelf.h>
#include <libelf.h>

#include "agent/symbols-internal.h"
#include "host/host.h"
#include "tests/test.h"

/* A function of the test binary itself, found through its .symtab. */
__attribute__((noinline, used)) int symbols_known_function(int x);

static volatile int symbols_sink;

__attribute__((noinline, used)) int
symbols_known_function(int x)
{
    for (int i = 0; i < x; i++) {
        symbols_sink += i;
    }
    return symbols_sink;
}

static const char *
fixture(const char *name)
{
    static char path[PATH_MAX];

    snprintf(path, sizeof(path), "%s/%s", PP_AGENT_FIXTURE_DIR, name);
    return path;
}

static void *
fixture_open(const char *name)
{
    void *h = dlopen(fixture(name), RTLD_NOW | RTLD_LOCAL);

    if (h == NULL) {
        test_fail(__FILE__, __LINE__, "dlopen %s: %s", name, dlerror());
    }
    return h;
}

static uint64_t
fixture_sym(void *h, const char *name)
{
    void *p = dlsym(h, name);

    if (p == NULL) {
        test_fail(__FILE__, __LINE__, "dlsym %s: %s", name, dlerror());
    }
    return (uint64_t)(uintptr_t)p;
}

/* Reads NT_GNU_BUILD_ID from the file on disk (an oracle independent of modules.c). */
static size_t
file_build_id(const char *path, uint8_t *out, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    Elf *elf;

    /* This program plays the library (its opens are the library's fds): its libelf is the
     * library's too, as agent/symtab.c trusts it, or elf_begin's fcntl(F_GETFD) of the fd fails
     * (host/fds.c) */
    host_fds_trust((const void *)elf_begin);
    Elf_Scn *scn = NULL;
    size_t len = 0;

    ASSERT_TRUE(fd >= 0);
    ASSERT_TRUE(elf_version(EV_CURRENT) != EV_NONE);
    elf = elf_begin(fd, ELF_C_READ, NULL);
    ASSERT_TRUE(elf != NULL);
    while (len == 0 && (scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        Elf_Data *data;
        GElf_Nhdr nh;
        size_t off = 0, name_off, desc_off;

        if (gelf_getshdr(scn, &sh) == NULL || sh.sh_type != SHT_NOTE) {
            continue;
        }
        data = elf_getdata(scn, NULL);
        while (data != NULL && (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                memcmp((char *)data->d_buf + name_off, "GNU", 4) == 0 && nh.n_descsz <= cap) {
                memcpy(out, (char *)data->d_buf + desc_off, nh.n_descsz);
                len = nh.n_descsz;
                break;
            }
        }
    }
    elf_end(elf);
    close(fd);
    return len;
}

struct collect {
    char exe[PATH_MAX];
    int saw_exe, saw_libc, saw_fixture;
    const char *fixture_path;
    size_t n;
};

static int
collect_cb(const struct ag_module_info *m, void *ctx)
{
    struct collect *c = ctx;
    uint8_t bid[AG_BUILD_ID_MAX];
    size_t len;

    c->n++;
    if (m->path[0] != '/') {
        return 0; /* the vdso */
    }
    ASSERT_TRUE(m->text_start >= m->start && m->text_end <= m->end && m->text_start < m->text_end);
    if (strcmp(m->path, c->exe) == 0) {
        c->saw_exe = 1;
    }
    if (strstr(m->path, "/libc.so") != NULL) {
        c->saw_libc = 1;
    }
    if (c->fixture_path != NULL && strcmp(m->path, c->fixture_path) == 0) {
        c->saw_fixture = 1;
    }
    if (strcmp(m->path, c->exe) == 0 || strstr(m->path, "/libc.so") != NULL) {
        len = file_build_id(m->path, bid, sizeof(bid));
        ASSERT_TRUE(len > 0);
        ASSERT_EQ(m->build_id_len, len);
        ASSERT_MEM_EQ(m->build_id, bid, len);
        ASSERT_TRUE(m->cfi_rows > 0);
    }
    return 0;
}

static void
collect_modules(struct collect *c, const char *fixture_path)
{
    ssize_t n;

    memset(c, 0, sizeof(*c));
    n = readlink("/proc/self/exe", c->exe, sizeof(c->exe) - 1);
    ASSERT_TRUE(n > 0);
    c->exe[n] = '\0';
    c->fixture_path = fixture_path;
    ASSERT_OK(ag_module_foreach(collect_cb, c));
}

TEST(modules_list_executable_and_libc_with_build_ids)
{
    struct collect c;
    struct ag_module_info info;

    ASSERT_TRUE(ag_modules_refresh() >= 0);
    collect_modules(&c, NULL);
    ASSERT_TRUE(c.saw_exe);
    ASSERT_TRUE(c.saw_libc);
    ASSERT_TRUE(c.n >= 3);
    ASSERT_OK(ag_module_find((uint64_t)(uintptr_t)&symbols_known_function, &info));
    ASSERT_STR_EQ(info.path, c.exe);
    ASSERT_OK(ag_module_find(
            (uint64_t)(uintptr_t)dlsym(dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD), "qsort"),
            &info));
    ASSERT_TRUE(strstr(info.path, "/libc.so") != NULL);
    ASSERT_EQ(ag_module_find(8, &info), -ENOENT);
    ag_modules_fini();
}

TEST(modules_dlopen_adds_and_dlclose_removes)
{
    char path[PATH_MAX];
    struct collect c;
    struct ag_module_info info;
    uint64_t pc;
    void *h;

    snprintf(path, sizeof(path), "%s", fixture("libagent-symfix.so"));
    ASSERT_TRUE(ag_modules_refresh() >= 0);
    ASSERT_EQ(ag_modules_refresh(), 0); /* nothing changed in between */
    collect_modules(&c, path);
    ASSERT_EQ(c.saw_fixture, 0);

    h = fixture_open("libagent-symfix.so");
    ASSERT_EQ(ag_modules_refresh(), 1);
    collect_modules(&c, path);
    ASSERT_EQ(c.saw_fixture, 1);
    pc = fixture_sym(h, "symfix_public");
    ASSERT_OK(ag_module_find(pc, &info));
    ASSERT_STR_EQ(info.path, path);
    ASSERT_TRUE(info.build_id_len > 0);
    ASSERT_TRUE(info.cfi_rows > 0);

    ASSERT_OK(dlclose(h));
    ASSERT_EQ(ag_modules_refresh(), 1);
    collect_modules(&c, path);
    ASSERT_EQ(c.saw_fixture, 0);
    ASSERT_EQ(ag_module_find(pc, &info), -ENOENT);
    ag_modules_fini();
}

static int
gone_cb(const struct ag_module_gone *g, void *ctx)
{
    struct ag_module_gone *last = ctx;

    *last = *g;
    return 0;
}

static uint64_t
now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/*
 * A library unloaded and another loaded at its address (samples/modreuse: the same code, so the
 * same function offsets): a pc there is named by the library mapped at the time asked. Before,
 * every lookup named it by the live one.
 */
TEST(symbolize_at_names_a_reused_address_by_the_library_of_its_time)
{
    struct ag_module_gone gone = { 0 };
    struct ag_symbol s;
    uint64_t pa, pb, t_a, t_gone;
    void *ha, *hb;

    ASSERT_TRUE(ag_modules_refresh() >= 0);
    ha = dlopen(PP_MODREUSE_DIR "/libpp-modreuse-a.so", RTLD_NOW | RTLD_LOCAL);
    ASSERT_TRUE(ha != NULL);
    pa = fixture_sym(ha, "pp_modreuse_a_burn");
    ASSERT_EQ(ag_modules_refresh(), 1);
    t_a = now_ns();
    ASSERT_OK(ag_symbolize_at(pa + 3, t_a, &s));
    ASSERT_STR_EQ(s.name, "pp_modreuse_a_burn");
    ASSERT_OK(dlclose(ha));
    t_gone = now_ns();
    hb = dlopen(PP_MODREUSE_DIR "/libpp-modreuse-b.so", RTLD_NOW | RTLD_LOCAL);
    ASSERT_TRUE(hb != NULL);
    pb = fixture_sym(hb, "pp_modreuse_b_burn");
    ASSERT_TRUE(ag_modules_refresh() >= 0);
    ASSERT_OK(ag_module_gone_foreach(0, gone_cb, &gone));
    ASSERT_TRUE(gone.seq > 0 && strstr(gone.path, "libpp-modreuse-a.so") != NULL);
    ASSERT_TRUE(gone.gone_ns > t_a && gone.gone_ns <= t_gone); /* dated by the dlclose itself */
    if (pb != pa) {
        fprintf(stderr, "SKIP (loud): libpp-modreuse-b.so was not loaded where liba was\n");
    } else {
        ASSERT_OK(ag_symbolize_at(pa + 3, t_a, &s));
        ASSERT_STR_EQ(s.name, "pp_modreuse_a_burn");
        ASSERT_TRUE(strstr(s.module_path, "libpp-modreuse-a.so") != NULL);
        ASSERT_OK(ag_symbolize_at(pa + 3, now_ns(), &s));
        ASSERT_STR_EQ(s.name, "pp_modreuse_b_burn");
        ASSERT_OK(ag_symbolize(pa + 3, &s));
        ASSERT_STR_EQ(s.name, "pp_modreuse_b_burn");
    }
    ASSERT_OK(dlclose(hb));
    ag_modules_fini();
}

/* Copies the file at from to to (a new inode). */
static void
copy_file(const char *from, const char *to)
{
    char buf[8192];
    size_t n;
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");

    ASSERT_TRUE(in != NULL && out != NULL);
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
        ASSERT_EQ(fwrite(buf, 1, n, out), n);
    }
    fclose(in);
    ASSERT_OK(fclose(out));
}

/* The identity ag_modules_identify() gave the module of pc. */
static struct ag_file_ident
identity_of(uint64_t pc)
{
    struct ag_module_info info;

    ASSERT_OK(ag_module_find(pc, &info));
    return info.file;
}

/* dlopens a fresh copy of libpp-modreuse-a.so at path, the module list scanned before and after
 * (it adds the copy); returns its pp_modreuse_a_burn. */
static uint64_t
load_liba_copy(const char *path, void **h)
{
    ASSERT_TRUE(ag_modules_refresh() >= 0);
    copy_file(PP_MODREUSE_DIR "/libpp-modreuse-a.so", path);
    *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ASSERT_TRUE(*h != NULL);
    ASSERT_EQ(ag_modules_refresh(), 1);
    return fixture_sym(*h, "pp_modreuse_a_burn");
}

/*
 * The file a module was loaded from: identified by the inode mapped (/proc/self/maps), and the
 * only one its symbols are read from. lib.so is libpp-modreuse-a.so's copy, other.so
 * libpp-modreuse-b.so's (the same code at the same offsets, pp_modreuse_b_burn, another
 * build-id) put over it by rename, as an upgrade does. Before (fileident) the agent read the file
 * at the path whatever it was, and named liba's function pp_modreuse_b_burn.
 */
TEST(identify_names_only_from_the_file_mapped)
{
    char dir[] = "/tmp/pp-test-ident-XXXXXX", lib[PATH_MAX], other[PATH_MAX];
    struct ag_file_ident id;
    struct ag_symbol s;
    struct stat sb;
    uint64_t pa;
    void *h;
    int rc;

    ASSERT_TRUE(mkdtemp(dir) != NULL);
    snprintf(lib, sizeof(lib), "%s/lib.so", dir);
    snprintf(other, sizeof(other), "%s/other.so", dir);

    /* 1. Unchanged: identified, and named. */
    pa = load_liba_copy(lib, &h);
    ASSERT_EQ(identity_of(pa).state, AG_FILE_UNKNOWN); /* not before it is asked */
    ASSERT_OK(ag_modules_identify());
    id = identity_of(pa);
    ASSERT_OK(stat(lib, &sb));
    ASSERT_EQ(id.state, AG_FILE_LOADED);
    ASSERT_U64_EQ(id.ino, (uint64_t)sb.st_ino);
    ASSERT_U64_EQ(id.dev, (uint64_t)sb.st_dev);
    ASSERT_U64_EQ(id.size, (uint64_t)sb.st_size);
    ASSERT_OK(ag_symbolize(pa + 3, &s));
    ASSERT_STR_EQ(s.name, "pp_modreuse_a_burn");
    ASSERT_OK(dlclose(h));
    ag_modules_fini();

    /* 2. Replaced after it was identified, before its first name: named by offset. */
    pa = load_liba_copy(lib, &h);
    ASSERT_OK(ag_modules_identify());
    ASSERT_EQ(identity_of(pa).state, AG_FILE_LOADED);
    copy_file(PP_MODREUSE_DIR "/libpp-modreuse-b.so", other);
    ASSERT_OK(rename(other, lib));
    rc = ag_symbolize(pa + 3, &s);
    ASSERT_EQ(rc, -ESRCH); /* module and offset: the file is another build */
    ASSERT_TRUE(s.name == NULL);
    ASSERT_TRUE(strstr(s.module_path, "/lib.so") != NULL);
    ASSERT_OK(dlclose(h));
    ag_modules_fini();

    /* 3. Replaced before it was identified: the path names another inode than the one mapped. */
    pa = load_liba_copy(other, &h);
    ASSERT_OK(stat(other, &sb));
    ASSERT_OK(rename(lib, other)); /* libb's copy over it */
    ASSERT_OK(ag_modules_identify());
    id = identity_of(pa);
    ASSERT_EQ(id.state, AG_FILE_OTHER);
    ASSERT_U64_EQ(id.ino, (uint64_t)sb.st_ino); /* the mapped one's */
    rc = ag_symbolize(pa + 3, &s);
    ASSERT_EQ(rc, -ESRCH);
    ASSERT_TRUE(s.name == NULL);
    ASSERT_OK(dlclose(h));
    ag_modules_fini();
    unlink(other);
    rmdir(dir);
}

/*
 * A stripped library's function without a symbol is named by its start from the unwind tables,
 * also once the library is unloaded: read from its file then. Before, a gone one's pcs had no
 * function (start 0: one row per address, lib.so!0x11ba0).
 */
TEST(symbolize_gone_stripped_library_function_from_its_file)
{
    struct ag_symbol live, gone;
    uint64_t fn;
    void *h;
    int rc;

    h = fixture_open("libagent-symfix-stripped.so");
    fn = (uint64_t)(uintptr_t)((void *(*)(void))(uintptr_t)fixture_sym(h, "symfix_hidden_addr"))();
    ASSERT_TRUE(ag_modules_refresh() >= 0);
    rc = ag_symbolize(fn + 2, &live);
    ASSERT_EQ(rc, -ESRCH); /* no symbol: the unwind tables give the function */
    ASSERT_EQ(live.start, fn);
    ASSERT_TRUE(live.size > 2);
    ASSERT_OK(dlclose(h));
    ASSERT_TRUE(ag_modules_refresh() >= 0);
    ASSERT_EQ(ag_module_find(fn, &(struct ag_module_info){ 0 }), -ENOENT); /* gone */
    rc = ag_symbolize(fn + 2, &gone);
    ASSERT_EQ(rc, -ESRCH);
    ASSERT_TRUE(strstr(gone.module_path, "libagent-symfix-stripped.so") != NULL);
    ASSERT_EQ(gone.start, live.start);
    ASSERT_EQ(gone.size, live.size);
    ag_modules_fini();
}

TEST(symbolize_function_of_test_binary)
{
    uint64_t fn = (uint64_t)(uintptr_t)&symbols_known_function;
    struct ag_symbol s;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

    ASSERT_TRUE(n > 0);
    exe[n] = '\0';
    ASSERT_OK(ag_symbolize(fn + 3, &s));
    ASSERT_STR_EQ(s.name, "symbols_known_function");
    ASSERT_U64_EQ(s.start, fn);
    ASSERT_U64_EQ(s.offset, 3);
    ASSERT_TRUE(s.size > 3);
    ASSERT_STR_EQ(s.module_path, exe);
    ASSERT_EQ(ag_symbolize(8, &s), -ENOENT);
    ag_modules_fini();
}

/* The [kernel] markers' bytes are the agent's (here the test binary's), but they name kernel
 * time: they stand in a module of their own, never in the one that holds them. */
TEST(symbolize_kernel_markers_in_their_own_module)
{
    static const struct {
        uint64_t (*pc)(void);
        const char *name;
    } markers[] = { { ag_kernel_pc, "[kernel]" },
                    { ag_kernel_unplaced_pc, "[kernel, not placed]" } };
    struct ag_symbol s;

    for (size_t i = 0; i < sizeof(markers) / sizeof(markers[0]); i++) {
        uint64_t pc = markers[i].pc();

        ASSERT_OK(ag_symbolize(pc, &s));
        ASSERT_STR_EQ(s.name, markers[i].name);
        ASSERT_STR_EQ(s.module_path, "[kernel]");
        ASSERT_U64_EQ(s.module_id, AG_KERNEL_MODULE_ID);
        ASSERT_U64_EQ(s.module_base, pc);
        ASSERT_U64_EQ(s.start, pc);
    }
    /* CPU no sample saw: no code of the agent's either, and no known one */
    ASSERT_OK(ag_symbolize(ag_not_sampled_pc(), &s));
    ASSERT_STR_EQ(s.name, "[not sampled]");
    ASSERT_STR_EQ(s.module_path, "[unknown]");
    ASSERT_U64_EQ(s.module_id, AG_UNKNOWN_MODULE_ID);
    ASSERT_U64_EQ(s.start, ag_not_sampled_pc());
    /* The root of a stack cut where an unwind table was pending (stored + 1, as a return
     * address, so that consumers look it up here) */
    ASSERT_OK(ag_symbolize(ag_tables_pending_pc(), &s));
    ASSERT_STR_EQ(s.name, "[unwind tables not ready]");
    ASSERT_STR_EQ(s.module_path, "[unknown]");
    ASSERT_U64_EQ(s.module_id, AG_UNKNOWN_MODULE_ID);
    ASSERT_U64_EQ(s.start, ag_tables_pending_pc());
    ag_modules_fini();
}

/* libc functions: dladdr1 (the loader's own view of .dynsym) is the oracle. */
TEST(symbolize_libc_matches_dladdr)
{
    static const char *const names[] = { "qsort", "getpid", "strtol", "fopen", "pthread_create" };
    /* libc's own definitions: RTLD_DEFAULT would find sanitizer interceptors first. */
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);

    ASSERT_TRUE(libc != NULL);
    for (size_t i = 0; i < PP_ARRAY_SIZE(names); i++) {
        void *fn = dlsym(libc, names[i]);
        const ElfW(Sym) *sym = NULL;
        struct ag_symbol s;
        Dl_info dli;
        uint64_t pc;

        ASSERT_TRUE(fn != NULL);
        ASSERT_TRUE(dladdr1(fn, &dli, (void **)&sym, RTLD_DL_SYMENT) != 0);
        ASSERT_TRUE(sym != NULL && dli.dli_saddr == fn);
        pc = (uint64_t)(uintptr_t)fn + (sym->st_size > 8 ? 5 : 0);
        ASSERT_OK(ag_symbolize(pc, &s));
        ASSERT_U64_EQ(s.start, (uint64_t)(uintptr_t)dli.dli_saddr);
        ASSERT_U64_EQ(s.offset, pc - s.start);
        if (sym->st_size != 0) {
            ASSERT_U64_EQ(s.size, sym->st_size);
        }
        /* The name may be another alias of the same address (getpid vs __getpid). */
        if (strcmp(s.name, dli.dli_sname) != 0) {
            void *alias = dlsym(libc, s.name);

            if (alias != fn) {
                test_fail(__FILE__, __LINE__, "%s resolved to %s (dladdr says %s)", names[i],
                          s.name, dli.dli_sname);
            }
        }
        ASSERT_TRUE(strstr(s.module_path, "/libc.so") != NULL);
    }
    dlclose(libc);
    ag_modules_fini();
}

/* Checks the fixture's symbols; hidden_name is NULL when symfix_hidden must stay unnamed. */
static void
check_fixture(void *h, const char *hidden_name)
{
    uint64_t pub = fixture_sym(h, "symfix_public");
    uint64_t nosize = fixture_sym(h, "symfix_nosize");
    uint64_t after = fixture_sym(h, "symfix_after_nosize");
    void *(*hidden_addr)(void) = (void *(*)(void))(uintptr_t)fixture_sym(h, "symfix_hidden_addr");
    uint64_t hidden = (uint64_t)(uintptr_t)hidden_addr();
    struct ag_symbol s;

    ASSERT_OK(ag_symbolize(pub + 1, &s));
    ASSERT_STR_EQ(s.name, "symfix_public");
    ASSERT_U64_EQ(s.start, pub);

    /* No ELF size: it runs up to the next symbol. */
    ASSERT_OK(ag_symbolize(nosize + 2, &s));
    ASSERT_STR_EQ(s.name, "symfix_nosize");
    ASSERT_U64_EQ(s.start, nosize);
    ASSERT_U64_EQ(s.size, after - nosize);
    ASSERT_U64_EQ(s.offset, 2);
    ASSERT_OK(ag_symbolize(after, &s));
    ASSERT_STR_EQ(s.name, "symfix_after_nosize");
    ASSERT_U64_EQ(s.size, 1);

    if (hidden_name != NULL) {
        ASSERT_OK(ag_symbolize(hidden + 1, &s));
        ASSERT_STR_EQ(s.name, hidden_name);
        ASSERT_U64_EQ(s.start, hidden);
    } else {
        ASSERT_EQ(ag_symbolize(hidden + 1, &s), -ESRCH);
        ASSERT_TRUE(s.module_path != NULL && strstr(s.module_path, "symfix") != NULL);
        /* Unnamed, but its function is known from the .eh_frame_hdr: one row per function. */
        ASSERT_U64_EQ(s.start, hidden);
        ASSERT_U64_EQ(s.offset, 1);
        ASSERT_TRUE(s.size > 1);
    }
}

TEST(symbolize_unstripped_library_symtab)
{
    void *h = fixture_open("libagent-symfix.so");

    check_fixture(h, "symfix_hidden");
    ag_modules_fini();
}

TEST(symbolize_stripped_library_falls_back_to_dynsym)
{
    void *h = fixture_open("libagent-symfix-stripped.so");

    check_fixture(h, NULL);
    ag_modules_fini();
}

TEST(symbolize_debuglink_debug_file)
{
    void *h = fixture_open("libagent-symfix-dl.so");

    check_fixture(h, "symfix_hidden");
    ag_modules_fini();
}

TEST(symbolize_build_id_debug_file)
{
    char root[] = "/tmp/pp-agent-debug-XXXXXX";
    char dir[PATH_MAX + 64], link[PATH_MAX + 128];
    struct ag_module_info info;
    void *h = fixture_open("libagent-symfix-bid.so");
    int off;

    ASSERT_TRUE(mkdtemp(root) != NULL);
    ASSERT_OK(ag_module_find(fixture_sym(h, "symfix_public"), &info));
    ASSERT_TRUE(info.build_id_len >= 2);
    snprintf(dir, sizeof(dir), "%s/.build-id", root);
    ASSERT_OK(mkdir(dir, 0700));
    snprintf(dir, sizeof(dir), "%s/.build-id/%02x", root, info.build_id[0]);
    ASSERT_OK(mkdir(dir, 0700));
    off = snprintf(link, sizeof(link), "%s/", dir);
    for (size_t i = 1; i < info.build_id_len; i++) {
        off += snprintf(link + off, sizeof(link) - (size_t)off, "%02x", info.build_id[i]);
    }
    snprintf(link + off, sizeof(link) - (size_t)off, ".debug");
    ASSERT_OK(symlink(fixture("libagent-symfix-bid.debug"), link));

    sym_set_debug_root(root);
    check_fixture(h, "symfix_hidden");

    unlink(link);
    rmdir(dir);
    snprintf(dir, sizeof(dir), "%s/.build-id", root);
    rmdir(dir);
    rmdir(root);
    ag_modules_fini();
}

TEST(symbolize_cxx_function_demangled)
{
    uint64_t fn;
    struct ag_symbol s;
    void *h;

    if (!PP_AGENT_HAVE_CXX) {
        test_skip("no g++ at configure time: C++ fixture not built");
    }
    h = fixture_open("libagent-symfix-cpp.so");
    fn = (uint64_t)(uintptr_t)((void *(*)(void))(uintptr_t)fixture_sym(h,
                                                                       "symfix_cpp_frob_addr"))();
    ASSERT_OK(ag_symbolize(fn + 1, &s));
    ASSERT_STR_EQ(s.raw_name, "_ZN2ns6Widget4frobEi");
    ASSERT_STR_EQ(s.name, "ns::Widget::frob(int)");
    ag_modules_fini();
}

static void
check_demangle(const char *raw, const char *want)
{
    char *got;

    ag_symtab_prepare(); /* the agent's loader, as ag_symbolize() sets it before a name */
    got = sym_demangle(raw, 1);

    if (want == NULL) {
        if (got != NULL) {
            test_fail(__FILE__, __LINE__, "%s demangled to \"%s\", expected raw", raw, got);
        }
        return;
    }
    if (got == NULL || strcmp(got, want) != 0) {
        test_fail(__FILE__, __LINE__, "%s: \"%s\" != \"%s\"", raw, got ? got : "(null)", want);
    }
    free(got);
}

TEST(demangle_rust_legacy)
{
    check_demangle("_ZN3foo3bar17h05af221e174051e9E", "foo::bar");
    check_demangle("_ZN4core3ptr13drop_in_place17hd93b6a5c9a0a4f0bE", "core::ptr::drop_in_place");
    check_demangle("_ZN71_$LT$Test$u20$$u2b$$u20$$u27$static$u20$as$u20$foo..Bar$LT$Test$GT$$GT$"
                   "3bar17h930b740aa94f1d3aE",
                   "<Test + 'static as foo::Bar<Test>>::bar");
    check_demangle("_ZN15$RF$$BP$$C$$SP$17h0123456789abcdefE", "&*,@");
    check_demangle("_ZN3foo17h05af221e174051e9E.llvm.1234", "foo");
    /* Malformed: truncated length, unknown escape. */
    check_demangle("_ZN3fo", NULL);
    check_demangle("_ZN5$zz$a17h05af221e174051e9E", NULL);
}

TEST(demangle_rust_v0)
{
    check_demangle("_RNvCs1234_7mycrate3foo", "mycrate::foo");
    check_demangle("_RNvNtCs1234_7mycrate3bar3foo", "mycrate::bar::foo");
    check_demangle("_RINvNtC3std3mem8align_ofjE", "std::mem::align_of::<usize>");
    check_demangle("_RINvCs1234_7mycrate3fooTRhmEE", "mycrate::foo::<(&u8, u32)>");
    check_demangle("_RNvMNtCs1234_7mycrate3fooNtB2_3Bar3baz", "<mycrate::foo::Bar>::baz");
    check_demangle("_RNCNvCs1234_7mycrate3foo0", "mycrate::foo::{closure#0}");
    check_demangle("_RINvC7mycrate3fooKj2a_E", "mycrate::foo::<42>");
    /* Malformed: unknown path tag, backref forwards, truncated. */
    check_demangle("_RZ", NULL);
    check_demangle("_RNvB9_3foo", NULL);
    check_demangle("_RNvCs1234_7mycrate3fo", NULL);
    check_demangle("not_mangled", NULL);
}

TEST(demangle_cxx_vectors)
{
    void *h;

    if (!PP_AGENT_HAVE_CXX) {
        test_skip("no g++ at configure time: no libstdc++ to provide __cxa_demangle");
    }
    /* Without libstdc++ in the process the name stays raw; the fixture brings it in. */
    h = fixture_open("libagent-symfix-cpp.so");
    check_demangle("_ZN2ns6Widget4frobEi", "ns::Widget::frob(int)");
    check_demangle("_ZNSt6vectorIiSaIiEE9push_backERKi",
                   "std::vector<int, std::allocator<int> >::push_back(int const&)");
    check_demangle("_Z3fooPKcz", "foo(char const*, ...)");
    check_demangle("_Zgarbage", NULL);
    (void)h;
}

struct churn {
    _Atomic int stop;
    _Atomic int rounds;
};

static void *
churn_thread(void *arg)
{
    struct churn *c = arg;

    while (!atomic_load(&c->stop)) {
        void *h = dlopen(fixture("libagent-symfix.so"), RTLD_NOW | RTLD_LOCAL);

        if (h == NULL || ag_modules_refresh() < 0 || dlclose(h) != 0 || ag_modules_refresh() < 0) {
            break;
        }
        c->rounds++;
    }
    return NULL;
}

/*
 * Signal-side lookups while another thread dlopens, dlcloses and republishes: libc is found in
 * every snapshot, and rows of snapshots/tables that were replaced stay readable (ASan would
 * report a use after free).
 */
TEST(modules_snapshot_lookups_during_dlopen_churn)
{
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    uint64_t pc = (uint64_t)(uintptr_t)dlsym(libc, "qsort");
    struct churn c = { 0, 0 };
    pthread_t th;
    size_t lookups = 0;

    ASSERT_TRUE(ag_modules_refresh() >= 0);
    ASSERT_OK(pthread_create(&th, NULL, churn_thread, &c));
    while (c.rounds < 50 && lookups < 50u * 1000 * 1000) {
        const struct ag_module_span *span = ag_sig_module_find(pc);
        const struct ag_module_snapshot *snap = atomic_load(&ag_sig_modules);

        ASSERT_TRUE(span != NULL && span->cfi != NULL);
        ASSERT_TRUE(ag_sig_cfi_row_find(span->cfi, pc - span->cfi->base) != NULL);
        for (size_t i = 0; i < snap->n; i++) {
            if (snap->spans[i].cfi != NULL && snap->spans[i].cfi->n > 0) {
                lookups += snap->spans[i].cfi->rows[snap->spans[i].cfi->n - 1].addr != 0;
            }
        }
    }
    atomic_store(&c.stop, 1);
    ASSERT_OK(pthread_join(th, NULL));
    ASSERT_TRUE(c.rounds >= 50);
    dlclose(libc);
    ag_modules_fini();
}

/* The vdso has no file: its symbols come from the mapped image. */
TEST(symbolize_vdso_from_memory)
{
    void *fn = dlsym(RTLD_DEFAULT, "__vdso_clock_gettime");
    void *vdso = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
    struct ag_symbol s;

    if (vdso != NULL) {
        fn = dlsym(vdso, "__vdso_clock_gettime");
    }
    if (fn == NULL) {
        test_skip("no vdso with __vdso_clock_gettime in this process");
    }
    ASSERT_OK(ag_symbolize((uint64_t)(uintptr_t)fn, &s));
    ASSERT_TRUE(strstr(s.name, "clock_gettime") != NULL);
    ASSERT_U64_EQ(s.start, (uint64_t)(uintptr_t)fn);
    ASSERT_TRUE(s.module_path[0] != '/');
    ag_modules_fini();
}

static const struct test_case cases[] = {
    TEST_CASE(modules_list_executable_and_libc_with_build_ids),
    TEST_CASE(modules_dlopen_adds_and_dlclose_removes),
    TEST_CASE(symbolize_at_names_a_reused_address_by_the_library_of_its_time),
    TEST_CASE(symbolize_gone_stripped_library_function_from_its_file),
    TEST_CASE(identify_names_only_from_the_file_mapped),
    TEST_CASE(modules_snapshot_lookups_during_dlopen_churn),
    TEST_CASE(symbolize_function_of_test_binary),
    TEST_CASE(symbolize_kernel_markers_in_their_own_module),
    TEST_CASE(symbolize_libc_matches_dladdr),
    TEST_CASE(symbolize_unstripped_library_symtab),
    TEST_CASE(symbolize_stripped_library_falls_back_to_dynsym),
    TEST_CASE(symbolize_debuglink_debug_file),
    TEST_CASE(symbolize_build_id_debug_file),
    TEST_CASE(symbolize_cxx_function_demangled),
    TEST_CASE(symbolize_vdso_from_memory),
    TEST_CASE(demangle_rust_legacy),
    TEST_CASE(demangle_rust_v0),
    TEST_CASE(demangle_cxx_vectors),
};
TEST_MAIN(cases)
