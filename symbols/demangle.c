/* SPDX-License-Identifier: MIT */
/*
 * symbols/demangle.c - symbol demangling for the symbolizers: C++ through the process's own
 * __cxa_demangle (found at runtime with dlsym, so the agent never links libstdc++), Rust
 * legacy (_ZN...17h<hash>E, printed without the hash) and Rust v0 (_R...; paths, generic
 * arguments, common types and integer constants; punycode identifiers, fn pointers and dyn
 * types are left raw). Context: the agent's drain or IPC thread, the CLI's; allocates. Names are
 * hostile input: every parse is bounded and a malformed name yields NULL, never a crash. Not
 * signal-safe.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/internal.h"
#include "symbols/symbols.h"

#define SYM_DEMANGLE_MAX   4096 /* longer results are abandoned (raw name kept) */
#define SYM_DEMANGLE_DEPTH 64   /* v0 recursion limit */

typedef char *(*sym_cxa_demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

/* A bounded output string; bad is sticky. */
struct sym_dm_out {
    char buf[SYM_DEMANGLE_MAX];
    size_t len;
    bool bad;
};

static void
sym_dm_put(struct sym_dm_out *o, const char *s, size_t n)
{
    if (o->bad || n >= sizeof(o->buf) - o->len) {
        o->bad = true;
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

static void
sym_dm_puts(struct sym_dm_out *o, const char *s)
{
    sym_dm_put(o, s, strlen(s));
}

static void
sym_dm_put_utf8(struct sym_dm_out *o, unsigned long cp)
{
    char b[4];

    if (cp < 0x80) {
        b[0] = (char)cp;
        sym_dm_put(o, b, 1);
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3f));
        sym_dm_put(o, b, 2);
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        sym_dm_put(o, b, 3);
    } else if (cp < 0x110000) {
        b[0] = (char)(0xf0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        sym_dm_put(o, b, 4);
    } else {
        o->bad = true;
    }
}

static bool
sym_dm_is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* --- Rust legacy: _ZN <len><ident>... 17h<16 hex> E --- */

/* Writes one legacy identifier with its $..$ escapes and ".." -> "::" undone. */
static void
sym_dm_legacy_ident(struct sym_dm_out *o, const char *s, size_t n)
{
    static const struct {
        const char *esc, *out;
    } table[] = { { "$SP$", "@" }, { "$BP$", "*" }, { "$RF$", "&" }, { "$LT$", "<" },
                  { "$GT$", ">" }, { "$LP$", "(" }, { "$RP$", ")" }, { "$C$", "," } };
    size_t i = 0;

    if (n >= 2 && s[0] == '_' && s[1] == '$') {
        i = 1; /* an identifier cannot start with '$': rustc prefixes an underscore */
    }
    while (i < n && !o->bad) {
        if (s[i] == '.' && i + 1 < n && s[i + 1] == '.') {
            sym_dm_puts(o, "::");
            i += 2;
        } else if (s[i] == '$') {
            bool done = false;

            for (size_t k = 0; k < PP_ARRAY_SIZE(table) && !done; k++) {
                size_t el = strlen(table[k].esc);

                if (el <= n - i && memcmp(s + i, table[k].esc, el) == 0) {
                    sym_dm_puts(o, table[k].out);
                    i += el;
                    done = true;
                }
            }
            if (!done && i + 1 < n && s[i + 1] == 'u') {
                unsigned long cp = 0;
                size_t j = i + 2;

                while (j < n && sym_dm_is_hex(s[j]) && j - i < 10) {
                    cp = cp * 16 + (unsigned long)(s[j] <= '9' ? s[j] - '0' : s[j] - 'a' + 10);
                    j++;
                }
                if (j < n && s[j] == '$' && j > i + 2) {
                    sym_dm_put_utf8(o, cp);
                    i = j + 1;
                    done = true;
                }
            }
            if (!done) {
                o->bad = true;
            }
        } else {
            sym_dm_put(o, s + i, 1);
            i++;
        }
    }
}

/*
 * Returns 1 and the demangled path when raw is a Rust legacy symbol (it ends with the hash),
 * -1 when it is one but an identifier is malformed, 0 when it is not one.
 */
static int
sym_dm_rust_legacy(const char *raw, struct sym_dm_out *o)
{
    const char *p = raw + 3;
    const char *comp[64];
    size_t lens[64];
    size_t n = 0;

    if (strncmp(raw, "_ZN", 3) != 0) {
        return 0;
    }
    while (*p != 'E') {
        size_t len = 0;

        if (*p < '0' || *p > '9' || n == PP_ARRAY_SIZE(comp)) {
            return 0;
        }
        while (*p >= '0' && *p <= '9') {
            len = len * 10 + (size_t)(*p++ - '0');
            if (len > SYM_DEMANGLE_MAX) {
                return 0;
            }
        }
        if (strnlen(p, len) < len) {
            return 0;
        }
        comp[n] = p;
        lens[n++] = len;
        p += len;
    }
    /* The last component is the hash: "h" and 16 hex digits. */
    if (n < 2 || lens[n - 1] != 17 || comp[n - 1][0] != 'h') {
        return 0;
    }
    for (size_t i = 1; i < 17; i++) {
        if (!sym_dm_is_hex(comp[n - 1][i])) {
            return 0;
        }
    }
    for (size_t i = 0; i + 1 < n; i++) {
        if (i > 0) {
            sym_dm_puts(o, "::");
        }
        sym_dm_legacy_ident(o, comp[i], lens[i]);
    }
    return o->bad ? -1 : 1;
}

/* --- Rust v0: _R ... --- */

struct sym_dm_v0 {
    const char *s; /* after "_R" */
    size_t len;
    size_t pos;
    unsigned depth;
    bool bad;
    struct sym_dm_out *o;
};

static char
sym_v0_peek(const struct sym_dm_v0 *p)
{
    return p->pos < p->len ? p->s[p->pos] : '\0';
}

static bool
sym_v0_eat(struct sym_dm_v0 *p, char c)
{
    if (sym_v0_peek(p) == c) {
        p->pos++;
        return true;
    }
    return false;
}

/* Output of the v0 printer; p->o == NULL mutes it (impl paths are parsed but not printed). */
static void
sym_v0_put(struct sym_dm_v0 *p, const char *s, size_t n)
{
    if (p->o != NULL) {
        sym_dm_put(p->o, s, n);
    }
}

static void
sym_v0_puts(struct sym_dm_v0 *p, const char *s)
{
    sym_v0_put(p, s, strlen(s));
}

/* base-62-number: "_" is 0, else digits then "_" is value + 1. */
static uint64_t
sym_v0_base62(struct sym_dm_v0 *p)
{
    uint64_t v = 0;

    if (sym_v0_eat(p, '_')) {
        return 0;
    }
    for (;;) {
        char c = sym_v0_peek(p);
        unsigned d;

        if (c == '_') {
            p->pos++;
            return v + 1;
        }
        if (c >= '0' && c <= '9') {
            d = (unsigned)(c - '0');
        } else if (c >= 'a' && c <= 'z') {
            d = 10u + (unsigned)(c - 'a');
        } else if (c >= 'A' && c <= 'Z') {
            d = 36u + (unsigned)(c - 'A');
        } else {
            p->bad = true;
            return 0;
        }
        if (v > (UINT64_MAX - d) / 62) {
            p->bad = true;
            return 0;
        }
        v = v * 62 + d;
        p->pos++;
    }
}

static uint64_t
sym_v0_disambiguator(struct sym_dm_v0 *p)
{
    return sym_v0_eat(p, 's') ? sym_v0_base62(p) + 1 : 0;
}

/* undisambiguated-identifier; punycode ("u" prefix) is not supported. */
static void
sym_v0_ident(struct sym_dm_v0 *p, const char **name, size_t *nlen)
{
    size_t len = 0;

    *name = "";
    *nlen = 0;
    if (sym_v0_peek(p) == 'u') {
        p->bad = true;
        return;
    }
    if (sym_v0_peek(p) < '0' || sym_v0_peek(p) > '9') {
        p->bad = true;
        return;
    }
    while (sym_v0_peek(p) >= '0' && sym_v0_peek(p) <= '9') {
        len = len * 10 + (size_t)(p->s[p->pos++] - '0');
        if (len > p->len) {
            p->bad = true;
            return;
        }
    }
    (void)sym_v0_eat(p, '_');
    if (len > p->len - p->pos) {
        p->bad = true;
        return;
    }
    *name = p->s + p->pos;
    *nlen = len;
    p->pos += len;
}

static void sym_v0_path(struct sym_dm_v0 *p, bool in_value);
static void sym_v0_type(struct sym_dm_v0 *p);

/* Runs fn at a backref target and comes back. */
static void
sym_v0_backref(struct sym_dm_v0 *p, void (*fn)(struct sym_dm_v0 *, bool), bool arg,
               void (*tfn)(struct sym_dm_v0 *))
{
    size_t start = p->pos - 1;
    uint64_t target = sym_v0_base62(p);
    size_t saved;

    if (p->bad || target >= start) {
        p->bad = true; /* backrefs point strictly backwards */
        return;
    }
    saved = p->pos;
    p->pos = (size_t)target;
    if (fn != NULL) {
        fn(p, arg);
    } else {
        tfn(p);
    }
    p->pos = saved;
}

static const char *
sym_v0_basic(char c)
{
    switch (c) {
    case 'a':
        return "i8";
    case 'b':
        return "bool";
    case 'c':
        return "char";
    case 'd':
        return "f64";
    case 'e':
        return "str";
    case 'f':
        return "f32";
    case 'h':
        return "u8";
    case 'i':
        return "isize";
    case 'j':
        return "usize";
    case 'l':
        return "i32";
    case 'm':
        return "u32";
    case 'n':
        return "i128";
    case 'o':
        return "u128";
    case 's':
        return "i16";
    case 't':
        return "u16";
    case 'u':
        return "()";
    case 'v':
        return "...";
    case 'x':
        return "i64";
    case 'y':
        return "u64";
    case 'z':
        return "!";
    case 'p':
        return "_";
    default:
        return NULL;
    }
}

/* const: a basic-typed integer/bool/char, "p" (placeholder) or a backref. */
static void
sym_v0_const(struct sym_dm_v0 *p)
{
    char t = sym_v0_peek(p);
    bool neg;
    uint64_t v = 0;

    if (sym_v0_eat(p, 'p')) {
        sym_v0_puts(p, "_");
        return;
    }
    if (sym_v0_eat(p, 'B')) {
        sym_v0_backref(p, NULL, false, sym_v0_const);
        return;
    }
    if (sym_v0_basic(t) == NULL || t == 'e' || t == 'u' || t == 'v' || t == 'z' || t == 'p') {
        p->bad = true;
        return;
    }
    p->pos++;
    neg = sym_v0_eat(p, 'n');
    while (sym_v0_peek(p) != '_') {
        char c = sym_v0_peek(p);

        if (!sym_dm_is_hex(c) || v >> 60) {
            p->bad = true;
            return;
        }
        v = v * 16 + (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
        p->pos++;
    }
    p->pos++;
    if (t == 'b') {
        sym_v0_puts(p, v ? "true" : "false");
    } else {
        char digits[24];
        size_t n = 0;

        if (neg) {
            sym_v0_puts(p, "-");
        }
        do {
            digits[n++] = (char)('0' + v % 10);
            v /= 10;
        } while (v != 0);
        while (n > 0) {
            sym_v0_put(p, &digits[--n], 1);
        }
    }
}

static void
sym_v0_generic_args(struct sym_dm_v0 *p)
{
    bool first = true;

    sym_v0_puts(p, "<");
    while (!p->bad && !sym_v0_eat(p, 'E')) {
        if (p->pos >= p->len) {
            p->bad = true;
            return;
        }
        if (!first) {
            sym_v0_puts(p, ", ");
        }
        first = false;
        if (sym_v0_eat(p, 'L')) {
            (void)sym_v0_base62(p);
            sym_v0_puts(p, "'_");
        } else if (sym_v0_eat(p, 'K')) {
            sym_v0_const(p);
        } else {
            sym_v0_type(p);
        }
    }
    sym_v0_puts(p, ">");
}

static void
sym_v0_type(struct sym_dm_v0 *p)
{
    char c = sym_v0_peek(p);
    const char *basic = sym_v0_basic(c);

    if (++p->depth > SYM_DEMANGLE_DEPTH) {
        p->bad = true;
        return;
    }
    if (basic != NULL) {
        p->pos++;
        sym_v0_puts(p, basic);
    } else if (sym_v0_eat(p, 'R') || sym_v0_eat(p, 'Q')) {
        sym_v0_puts(p, c == 'R' ? "&" : "&mut ");
        if (sym_v0_eat(p, 'L')) {
            (void)sym_v0_base62(p);
        }
        sym_v0_type(p);
    } else if (sym_v0_eat(p, 'P') || sym_v0_eat(p, 'O')) {
        sym_v0_puts(p, c == 'P' ? "*const " : "*mut ");
        sym_v0_type(p);
    } else if (sym_v0_eat(p, 'A') || sym_v0_eat(p, 'S')) {
        sym_v0_puts(p, "[");
        sym_v0_type(p);
        if (c == 'A') {
            sym_v0_puts(p, "; ");
            sym_v0_const(p);
        }
        sym_v0_puts(p, "]");
    } else if (sym_v0_eat(p, 'T')) {
        size_t n = 0;

        sym_v0_puts(p, "(");
        while (!p->bad && !sym_v0_eat(p, 'E')) {
            if (p->pos >= p->len) {
                p->bad = true;
                break;
            }
            if (n++ > 0) {
                sym_v0_puts(p, ", ");
            }
            sym_v0_type(p);
        }
        sym_v0_puts(p, n == 1 ? ",)" : ")");
    } else if (sym_v0_eat(p, 'B')) {
        sym_v0_backref(p, NULL, false, sym_v0_type);
    } else if (c == 'C' || c == 'M' || c == 'X' || c == 'Y' || c == 'N' || c == 'I') {
        sym_v0_path(p, false);
    } else {
        p->bad = true; /* fn pointers (F) and dyn (D) are not supported */
    }
    p->depth--;
}

static void
sym_v0_path(struct sym_dm_v0 *p, bool in_value)
{
    const char *name;
    size_t nlen;
    char c = sym_v0_peek(p);

    if (++p->depth > SYM_DEMANGLE_DEPTH || p->bad) {
        p->bad = true;
        return;
    }
    p->pos++;
    switch (c) {
    case 'C': /* crate root */
        (void)sym_v0_disambiguator(p);
        sym_v0_ident(p, &name, &nlen);
        sym_v0_put(p, name, nlen);
        break;
    case 'M': /* <T> inherent impl */
        (void)sym_v0_disambiguator(p);
        {
            struct sym_dm_out *saved = p->o;

            p->o = NULL; /* the impl path is not printed */
            sym_v0_path(p, false);
            p->o = saved;
        }
        sym_v0_puts(p, "<");
        sym_v0_type(p);
        sym_v0_puts(p, ">");
        break;
    case 'X': /* <T as Trait> impl */
    case 'Y': /* <T as Trait> */
        if (c == 'X') {
            struct sym_dm_out *saved = p->o;

            (void)sym_v0_disambiguator(p);
            p->o = NULL;
            sym_v0_path(p, false);
            p->o = saved;
        }
        sym_v0_puts(p, "<");
        sym_v0_type(p);
        sym_v0_puts(p, " as ");
        sym_v0_path(p, false);
        sym_v0_puts(p, ">");
        break;
    case 'N': { /* nested: namespace letter, parent path, identifier */
        char ns = sym_v0_peek(p);
        uint64_t dis;

        if (!((ns >= 'a' && ns <= 'z') || (ns >= 'A' && ns <= 'Z'))) {
            p->bad = true;
            break;
        }
        p->pos++;
        sym_v0_path(p, in_value);
        dis = sym_v0_disambiguator(p);
        sym_v0_ident(p, &name, &nlen);
        sym_v0_puts(p, "::");
        if (ns == 'C') {
            char num[24];
            size_t n = 0;

            sym_v0_puts(p, "{closure");
            if (nlen > 0) {
                sym_v0_puts(p, ":");
                sym_v0_put(p, name, nlen);
            }
            sym_v0_puts(p, "#");
            do {
                num[n++] = (char)('0' + dis % 10);
                dis /= 10;
            } while (dis != 0);
            while (n > 0) {
                sym_v0_put(p, &num[--n], 1);
            }
            sym_v0_puts(p, "}");
        } else if (ns == 'S') {
            sym_v0_puts(p, "{shim:");
            sym_v0_put(p, name, nlen);
            sym_v0_puts(p, "}");
        } else {
            sym_v0_put(p, name, nlen);
        }
        break;
    }
    case 'I': /* generic arguments */
        sym_v0_path(p, in_value);
        if (in_value) {
            sym_v0_puts(p, "::");
        }
        sym_v0_generic_args(p);
        break;
    case 'B':
        sym_v0_backref(p, sym_v0_path, in_value, NULL);
        break;
    default:
        p->bad = true;
    }
    p->depth--;
}

static bool
sym_dm_rust_v0(const char *raw, struct sym_dm_out *o)
{
    struct sym_dm_v0 p = { 0 };

    if (strncmp(raw, "_R", 2) != 0) {
        return false;
    }
    p.s = raw + 2;
    p.len = strlen(p.s);
    p.o = o;
    if (sym_v0_peek(&p) >= '0' && sym_v0_peek(&p) <= '9') {
        p.bad = true; /* encoding versions other than 0 */
    }
    sym_v0_path(&p, true);
    /* An instantiating crate (a path) may follow; it is not printed. Then "." suffixes. */
    if (!p.bad && p.pos < p.len && p.s[p.pos] != '.') {
        p.o = NULL;
        sym_v0_path(&p, false);
        p.o = o;
    }
    return !p.bad && !o->bad && (p.pos == p.len || p.s[p.pos] == '.');
}

/* --- C++ --- */

static _Atomic(sym_cxa_demangle_fn) sym_demangle_cxa;

/*
 * Finds __cxa_demangle in the process: in the global scope, or in a libstdc++ that was loaded
 * RTLD_LOCAL (asked with RTLD_NOLOAD: a profiler must not change the host's set of libraries; the
 * CLI's loader drops it, cli/names.c). A found handle is kept, which pins that libstdc++ in
 * memory while the caller runs.
 */
static sym_cxa_demangle_fn
sym_demangle_cxa_get(void)
{
    sym_cxa_demangle_fn fn = atomic_load_explicit(&sym_demangle_cxa, memory_order_acquire);
    const struct sym_loader *l = sym_loader_get();
    void *h;

    if (fn != NULL) {
        return fn;
    }
    *(void **)&fn = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (fn == NULL && l != NULL && l->open != NULL) {
        h = l->open("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
        if (h != NULL) {
            *(void **)&fn = dlsym(h, "__cxa_demangle");
            if (fn == NULL && l->close != NULL) {
                l->close(h);
            }
        }
    }
    if (fn != NULL) {
        atomic_store_explicit(&sym_demangle_cxa, fn, memory_order_release);
    }
    return fn;
}

char *
sym_demangle(const char *raw, int cxx)
{
    struct sym_dm_out *o;
    char *res = NULL;
    int legacy;

    if (raw == NULL || raw[0] != '_' || (raw[1] != 'Z' && raw[1] != 'R')) {
        return NULL;
    }
    o = malloc(sizeof(*o));
    if (o == NULL) {
        return NULL;
    }
    o->len = 0;
    o->bad = false;
    o->buf[0] = '\0';
    if (raw[1] == 'R') {
        if (sym_dm_rust_v0(raw, o)) {
            res = strdup(o->buf);
        }
    } else if ((legacy = sym_dm_rust_legacy(raw, o)) != 0) {
        res = legacy > 0 ? strdup(o->buf) : NULL;
    } else if (cxx) {
        sym_cxa_demangle_fn fn = sym_demangle_cxa_get();
        int status = -1;

        if (fn != NULL) {
            res = fn(raw, NULL, NULL, &status);
            if (status != 0) {
                free(res);
                res = NULL;
            }
        }
    }
    free(o);
    return res;
}
