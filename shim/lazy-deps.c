/* SPDX-License-Identifier: MIT */
/*
 * shim/lazy-deps.c - the names libpipeprof.so takes from cJSON, zlib and http-parser, defined
 * here as stubs that open the library with dlopen at the first call of any of its names and call
 * through. Only the HTTP endpoints call them (http/, and profile/'s JSON strings and pprof
 * writer under them); linked as before, every process the library is preloaded into mapped,
 * relocated and unmapped all three at its start, each short child under `pipeprof record` too
 * (docs/performance.md, start-up). The CLI and the tests link the libraries themselves; these
 * stubs are libpipeprof.so's alone (shim/CMakeLists.txt), and its version script keeps them local.
 *
 * A library that cannot be opened (not installed on the host) is one line on stderr, once, and
 * each stub then returns its library's own failure (NULL, Z_STREAM_ERROR, a parse error), so the
 * HTTP endpoints answer with an error and the host runs on. Context: any thread but a signal
 * handler (dlopen takes the loader's lock); the first call loads under a lock.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <zlib.h>
#ifdef PP_HAVE_HTTP
#include <http_parser.h>
#endif

#include "host/host.h"

/* One library opened on demand: its soname (the runtime package's, as the link named it before),
 * what is lost without it (for the stderr line) and the names it must define, in the order of its
 * enum below. fns[i] is filled by the one load; NULL everywhere when the load failed. */
struct shim_lazy_lib {
    const char *soname;
    const char *lost;
    const char *const *names;
    size_t count;
    void **fns;
    int tried; /* set (release) once fns is final */
};

static void
shim_lazy_open(struct shim_lazy_lib *lib)
{
    void *h;
    size_t i;

    host_fds_hold(); /* the loader's opens are at low numbers no interposer sees (host/fds.c) */
    h = host_loader_open(lib->soname, RTLD_NOW | RTLD_LOCAL);
    host_fds_release();

    if (h == NULL) {
        fprintf(stderr, "pipeprof: %s not loaded (%s): %s\n", lib->soname, dlerror(), lib->lost);
        return;
    }
    for (i = 0; i < lib->count; i++) {
        lib->fns[i] = dlsym(h, lib->names[i]);
        if (lib->fns[i] == NULL) {
            fprintf(stderr, "pipeprof: %s has no %s: %s\n", lib->soname, lib->names[i], lib->lost);
            memset(lib->fns, 0, lib->count * sizeof(lib->fns[0]));
            host_loader_close(h);
            return;
        }
    }
}

static pthread_mutex_t shim_lazy_lock = PTHREAD_MUTEX_INITIALIZER; /* one load at a time */

/* The function name lib->names[i] of the loaded library, or NULL if it could not be loaded. */
static void *
shim_lazy_fn(struct shim_lazy_lib *lib, size_t i)
{
    if (!__atomic_load_n(&lib->tried, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&shim_lazy_lock);
        if (!lib->tried) {
            shim_lazy_open(lib);
            __atomic_store_n(&lib->tried, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&shim_lazy_lock);
    }
    return lib->fns[i];
}

/* Stores lib's function i into *fn (a function pointer, as POSIX's dlsym allows); 0 or -1. */
#define SHIM_LAZY(fn, lib, i) ((*(void **)&(fn) = shim_lazy_fn(&(lib), (i))) != NULL ? 0 : -1)

/* cJSON: http/route.c's request bodies and error replies, profile/write.c's JSON strings. */
enum {
    CJ_PARSE,
    CJ_IS_OBJECT,
    CJ_IS_NUMBER,
    CJ_IS_STRING,
    CJ_DELETE,
    CJ_CREATE_OBJECT,
    CJ_CREATE_STRING,
    CJ_ADD_STRING,
    CJ_PRINT,
    CJ_FREE,
    CJ_COUNT
};
static const char *const shim_cjson_names[CJ_COUNT] = {
    [CJ_PARSE] = "cJSON_ParseWithLengthOpts",
    [CJ_IS_OBJECT] = "cJSON_IsObject",
    [CJ_IS_NUMBER] = "cJSON_IsNumber",
    [CJ_IS_STRING] = "cJSON_IsString",
    [CJ_DELETE] = "cJSON_Delete",
    [CJ_CREATE_OBJECT] = "cJSON_CreateObject",
    [CJ_CREATE_STRING] = "cJSON_CreateString",
    [CJ_ADD_STRING] = "cJSON_AddStringToObject",
    [CJ_PRINT] = "cJSON_PrintUnformatted",
    [CJ_FREE] = "cJSON_free",
};
static void *shim_cjson_fns[CJ_COUNT];
static struct shim_lazy_lib shim_cjson = {
    "libcjson.so.1",  "the HTTP endpoints refuse JSON bodies and answer errors without one",
    shim_cjson_names, CJ_COUNT,
    shim_cjson_fns,   0,
};

cJSON *
cJSON_ParseWithLengthOpts(const char *value, size_t len, const char **end, cJSON_bool nul)
{
    cJSON *(*fn)(const char *, size_t, const char **, cJSON_bool);

    return SHIM_LAZY(fn, shim_cjson, CJ_PARSE) == 0 ? fn(value, len, end, nul) : NULL;
}

/* The three type tests share one shape: false without the library. */
static cJSON_bool
shim_cjson_is(size_t i, const cJSON *item)
{
    cJSON_bool (*fn)(const cJSON *);

    return SHIM_LAZY(fn, shim_cjson, i) == 0 ? fn(item) : 0;
}

cJSON_bool
cJSON_IsObject(const cJSON *const item)
{
    return shim_cjson_is(CJ_IS_OBJECT, item);
}

cJSON_bool
cJSON_IsNumber(const cJSON *const item)
{
    return shim_cjson_is(CJ_IS_NUMBER, item);
}

cJSON_bool
cJSON_IsString(const cJSON *const item)
{
    return shim_cjson_is(CJ_IS_STRING, item);
}

void
cJSON_Delete(cJSON *item)
{
    void (*fn)(cJSON *);

    if (SHIM_LAZY(fn, shim_cjson, CJ_DELETE) == 0) {
        fn(item);
    }
}

cJSON *
cJSON_CreateObject(void)
{
    cJSON *(*fn)(void);

    return SHIM_LAZY(fn, shim_cjson, CJ_CREATE_OBJECT) == 0 ? fn() : NULL;
}

cJSON *
cJSON_CreateString(const char *string)
{
    cJSON *(*fn)(const char *);

    return SHIM_LAZY(fn, shim_cjson, CJ_CREATE_STRING) == 0 ? fn(string) : NULL;
}

cJSON *
cJSON_AddStringToObject(cJSON *const object, const char *const name, const char *const string)
{
    cJSON *(*fn)(cJSON *, const char *, const char *);

    return SHIM_LAZY(fn, shim_cjson, CJ_ADD_STRING) == 0 ? fn(object, name, string) : NULL;
}

char *
cJSON_PrintUnformatted(const cJSON *item)
{
    char *(*fn)(const cJSON *);

    return SHIM_LAZY(fn, shim_cjson, CJ_PRINT) == 0 ? fn(item) : NULL;
}

void
cJSON_free(void *object)
{
    void (*fn)(void *);

    if (SHIM_LAZY(fn, shim_cjson, CJ_FREE) == 0) {
        fn(object);
    }
}

/* zlib: profile/fmt-pprof.c's gzip around a pprof profile (/debug/pprof/profile). */
enum { Z_INIT2, Z_DEFLATE, Z_END, Z_COUNT };
static const char *const shim_zlib_names[Z_COUNT] = {
    [Z_INIT2] = "deflateInit2_",
    [Z_DEFLATE] = "deflate",
    [Z_END] = "deflateEnd",
};
static void *shim_zlib_fns[Z_COUNT];
static struct shim_lazy_lib shim_zlib = {
    "libz.so.1", "pprof profiles are not written", shim_zlib_names, Z_COUNT, shim_zlib_fns, 0,
};

int
deflateInit2_(z_streamp strm, int level, int method, int window_bits, int mem_level, int strategy,
              const char *version, int stream_size)
{
    int (*fn)(z_streamp, int, int, int, int, int, const char *, int);

    return SHIM_LAZY(fn, shim_zlib, Z_INIT2) == 0
                   ? fn(strm, level, method, window_bits, mem_level, strategy, version, stream_size)
                   : Z_VERSION_ERROR;
}

/* deflate and deflateEnd share one shape: Z_STREAM_ERROR without the library. */
int
deflate(z_streamp strm, int flush)
{
    int (*fn)(z_streamp, int);

    return SHIM_LAZY(fn, shim_zlib, Z_DEFLATE) == 0 ? fn(strm, flush) : Z_STREAM_ERROR;
}

int
deflateEnd(z_streamp strm)
{
    int (*fn)(z_streamp);

    return SHIM_LAZY(fn, shim_zlib, Z_END) == 0 ? fn(strm) : Z_STREAM_ERROR;
}

#ifdef PP_HAVE_HTTP
/* http-parser: http/request.c's requests and http/route.c's URLs. */
enum {
    HP_INIT,
    HP_SETTINGS_INIT,
    HP_EXECUTE,
    HP_PAUSE,
    HP_URL_INIT,
    HP_PARSE_URL,
    HP_ERRNO_DESCRIPTION,
    HP_METHOD_STR,
    HP_COUNT
};
static const char *const shim_http_parser_names[HP_COUNT] = {
    [HP_INIT] = "http_parser_init",
    [HP_SETTINGS_INIT] = "http_parser_settings_init",
    [HP_EXECUTE] = "http_parser_execute",
    [HP_PAUSE] = "http_parser_pause",
    [HP_URL_INIT] = "http_parser_url_init",
    [HP_PARSE_URL] = "http_parser_parse_url",
    [HP_ERRNO_DESCRIPTION] = "http_errno_description",
    [HP_METHOD_STR] = "http_method_str",
};
static void *shim_http_parser_fns[HP_COUNT];
/* The soname of the http-parser the headers are from (Debian's libhttp-parser2.9). */
#define SHIM_STR(x)  #x
#define SHIM_XSTR(x) SHIM_STR(x)
static struct shim_lazy_lib shim_http_parser = {
    "libhttp_parser.so." SHIM_XSTR(HTTP_PARSER_VERSION_MAJOR) "." SHIM_XSTR(
            HTTP_PARSER_VERSION_MINOR),
    "the HTTP endpoints refuse every request",
    shim_http_parser_names,
    HP_COUNT,
    shim_http_parser_fns,
    0,
};

/* Without the library a parser is zeroed and in error, so that http_parser_execute's caller
 * sees a parse error (HPE_UNKNOWN) and answers 400. */
void
http_parser_init(http_parser *parser, enum http_parser_type type)
{
    void (*fn)(http_parser *, enum http_parser_type);

    if (SHIM_LAZY(fn, shim_http_parser, HP_INIT) == 0) {
        fn(parser, type);
        return;
    }
    memset(parser, 0, sizeof(*parser));
    parser->http_errno = HPE_UNKNOWN;
}

void
http_parser_settings_init(http_parser_settings *settings)
{
    void (*fn)(http_parser_settings *);

    if (SHIM_LAZY(fn, shim_http_parser, HP_SETTINGS_INIT) == 0) {
        fn(settings);
        return;
    }
    memset(settings, 0, sizeof(*settings));
}

size_t
http_parser_execute(http_parser *parser, const http_parser_settings *settings, const char *data,
                    size_t len)
{
    size_t (*fn)(http_parser *, const http_parser_settings *, const char *, size_t);

    if (SHIM_LAZY(fn, shim_http_parser, HP_EXECUTE) == 0) {
        return fn(parser, settings, data, len);
    }
    parser->http_errno = HPE_UNKNOWN;
    return 0;
}

void
http_parser_pause(http_parser *parser, int paused)
{
    void (*fn)(http_parser *, int);

    if (SHIM_LAZY(fn, shim_http_parser, HP_PAUSE) == 0) {
        fn(parser, paused);
    }
}

void
http_parser_url_init(struct http_parser_url *u)
{
    void (*fn)(struct http_parser_url *);

    if (SHIM_LAZY(fn, shim_http_parser, HP_URL_INIT) == 0) {
        fn(u);
        return;
    }
    memset(u, 0, sizeof(*u));
}

int
http_parser_parse_url(const char *buf, size_t buflen, int is_connect, struct http_parser_url *u)
{
    int (*fn)(const char *, size_t, int, struct http_parser_url *);

    return SHIM_LAZY(fn, shim_http_parser, HP_PARSE_URL) == 0 ? fn(buf, buflen, is_connect, u) : 1;
}

const char *
http_errno_description(enum http_errno err)
{
    const char *(*fn)(enum http_errno);

    return SHIM_LAZY(fn, shim_http_parser, HP_ERRNO_DESCRIPTION) == 0 ? fn(err)
                                                                      : "http-parser not loaded";
}

const char *
http_method_str(enum http_method m)
{
    const char *(*fn)(enum http_method);

    return SHIM_LAZY(fn, shim_http_parser, HP_METHOD_STR) == 0 ? fn(m) : "<unknown>";
}
#endif
