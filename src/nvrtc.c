/* nvrtc.c: libnvrtc loaded with dlopen at first use, its entry points from the X-macro list in
 * nvrtc_loader.h.
 *
 * Search order (first that loads wins):
 *   1. $CUFUNC_NVRTC_PATH, a file or a folder. When set it is the only place looked in: a user who
 *      names a library wants that one, and silently taking another would hide a typo.
 *   2. $CUDA_HOME, then $CUDA_PATH: lib64/ and lib/, versioned names first.
 *   3. The system loader (LD_LIBRARY_PATH, ld.so.cache): libnvrtc.so.13, .12, .11, libnvrtc.so.
 *   4. Folders added with cf_nvrtc_add_search_dir (the Python front adds the nvidia-cuda-nvrtc
 *      wheel's lib folder).
 * A candidate that does not exist is "not found"; one that exists but dlopen rejects (wrong
 * architecture, missing dependency, not a library) or that lacks a required entry point is "failed
 * to load", and the two give different messages. Loading uses no cf_malloc, so an injected
 * allocation failure can never make the sticky outcome a failure.
 *
 * The stamp (see nvrtc_loader.h) lets the kernel cache know NVRTC's version without loading it.
 * This file makes and checks the stamp's text; the file holding it is cache.c's, as every file of
 * the cache folder is (so nvrtc.c calls nothing of the cache). Its checks err on the side of
 * loading: a stamp is trusted only when every input of the search
 * is as it was when the stamp was written, and the library file and its folder are the very same
 * inodes, unchanged since (size, mtime and ctime). What the fingerprint cannot see: libraries
 * found through the RPATH/RUNPATH of the program calling dlopen, which cufunc's own builds do not
 * set for NVRTC.
 */
#define _GNU_SOURCE 1 /* dladdr, uselocale */
#include "nvrtc_loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <limits.h>
#include <locale.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "cufunc/compile.h"
#include "error.h"
#include "hash.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

cf_nvrtc_table cf_nvrtc;

static const char *const LIB_NAMES[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11",
                                        "libnvrtc.so"};
#define N_LIB_NAMES (sizeof LIB_NAMES / sizeof LIB_NAMES[0])

#define MAX_EXTRA_DIRS 16
static pthread_mutex_t dirs_lock = PTHREAD_MUTEX_INITIALIZER;
static char *extra_dirs[MAX_EXTRA_DIRS]; /* cf_strdup'd, kept for the life of the process */
static int n_extra_dirs;
static int search_started; /* under dirs_lock: later cf_nvrtc_add_search_dir calls are ignored */

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static cf_status load_status;
static char load_message[12288];
static char loaded_path[PATH_MAX];
static cf_nvrtc_facts loaded_facts; /* of the loaded library; read after load_once */
static int is_loaded;                /* atomic: set once the library is loaded */

/* What the stamp of this load records about the search, taken before the search began: the
 * fingerprint of its inputs, and when it began (realtime ns). fp_ok = 0: in doubt, no stamp. */
static char load_fp[65];
static int load_fp_ok;
static int nvrtc_before_load; /* a libnvrtc was mapped before the search: no stamp (see below) */
static int64_t load_started_ns;

/* ---- the search ------------------------------------------------------------------------------ */

/* Text is appended with truncation; a message cut at 12 KB still says what matters first. */
typedef struct textbuf {
    char *buf;
    size_t cap, len;
} textbuf;

static void tb_printf(textbuf *t, const char *fmt, ...)
{
    if (!t->buf || t->cap == 0 || t->len + 1 >= t->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    t->len += (size_t)n;
    if (t->len >= t->cap)
        t->len = t->cap - 1;
}

typedef struct search {
    textbuf tried;     /* plain paths, one per line (cf_nvrtc_probe's `tried`) */
    textbuf annotated; /* "  path (why it was not used)" lines, for the error message */
    char first_failure[2048]; /* "path: dlerror" of the first candidate that existed but failed */
    void *handle;
    cf_nvrtc_table table;
    char path[PATH_MAX];
} search;

static void note_failure(search *s, const char *path, const char *why)
{
    tb_printf(&s->annotated, "  %s (found but failed to load: %s)\n", path, why);
    if (!s->first_failure[0])
        snprintf(s->first_failure, sizeof s->first_failure, "%s: %s", path, why);
}

/* Try one candidate: an absolute path, or a bare soname for the system loader. Returns 1 when it
 * loaded and has every required entry point (s->handle, s->table, s->path are then set). */
static int try_candidate(search *s, const char *path, int bare)
{
    tb_printf(&s->tried, "%s\n", path);
    if (!bare && access(path, F_OK) != 0) {
        tb_printf(&s->annotated, "  %s (not found)\n", path);
        return 0;
    }
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *err = dlerror();
        if (!err)
            err = "unknown dlopen error";
        /* The loader's "not found" for a bare name starts with that name; an error naming another
         * file (a missing dependency) means ours was found but cannot load. */
        size_t n = strlen(path);
        if (bare && strncmp(err, path, n) == 0 && strstr(err, "cannot open shared object file")) {
            tb_printf(&s->annotated, "  %s (system loader: not found)\n", path);
            return 0;
        }
        note_failure(s, path, err);
        return 0;
    }
    cf_nvrtc_table t;
    memset(&t, 0, sizeof t);
    const char *missing = NULL;
#define CF_NVRTC_RESOLVE(name, required)                                                           \
    t.name = (__typeof__(t.name))dlsym(h, #name);                                                  \
    if (!t.name && (required) && !missing)                                                         \
        missing = #name;
    CF_NVRTC_FUNCS(CF_NVRTC_RESOLVE)
#undef CF_NVRTC_RESOLVE
    if (missing) {
        char why[256];
        snprintf(why, sizeof why, "it lacks %s; not a usable NVRTC", missing);
        note_failure(s, path, why);
        dlclose(h);
        return 0;
    }
    Dl_info info;
    if (dladdr((void *)t.nvrtcVersion, &info) && info.dli_fname && info.dli_fname[0] == '/')
        snprintf(s->path, sizeof s->path, "%s", info.dli_fname);
    else
        snprintf(s->path, sizeof s->path, "%s", path);
    s->handle = h;
    s->table = t;
    return 1;
}

static int try_folder(search *s, const char *dir)
{
    char path[PATH_MAX];
    for (size_t i = 0; i < N_LIB_NAMES; i++) {
        int n = snprintf(path, sizeof path, "%s/%s", dir, LIB_NAMES[i]);
        if (n > 0 && (size_t)n < sizeof path && try_candidate(s, path, 0))
            return 1;
    }
    return 0;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Run the whole search; returns CF_OK with s->handle set, or CF_ERR_NO_NVRTC with the message in
 * msg (msg_cap bytes). */
/* The list of extra folders is fixed from the first search, or the first stamp check, on: the
 * search that loads then looks where the stamp's fingerprint says it does. Returns their count. */
static int freeze_search_dirs(void)
{
    pthread_mutex_lock(&dirs_lock);
    search_started = 1;
    int n = n_extra_dirs;
    pthread_mutex_unlock(&dirs_lock);
    return n;
}

static cf_status run_search(search *s, char *msg, size_t msg_cap)
{
    freeze_search_dirs();

    const char *env = getenv("CUFUNC_NVRTC_PATH");
    int env_set = env && *env;
    if (env_set) {
        if (is_dir(env) ? try_folder(s, env) : try_candidate(s, env, 0))
            return CF_OK;
    } else {
        const char *roots[2] = {getenv("CUDA_HOME"), getenv("CUDA_PATH")};
        char dir[PATH_MAX];
        for (int r = 0; r < 2; r++) {
            if (!roots[r] || !*roots[r])
                continue;
            snprintf(dir, sizeof dir, "%s/lib64", roots[r]);
            if (try_folder(s, dir))
                return CF_OK;
            snprintf(dir, sizeof dir, "%s/lib", roots[r]);
            if (try_folder(s, dir))
                return CF_OK;
        }
        for (size_t i = 0; i < N_LIB_NAMES; i++)
            if (try_candidate(s, LIB_NAMES[i], 1))
                return CF_OK;
        /* The extra folders are read under the lock; none is added once search_started is set. */
        pthread_mutex_lock(&dirs_lock);
        int n = n_extra_dirs;
        pthread_mutex_unlock(&dirs_lock);
        for (int i = 0; i < n; i++)
            if (try_folder(s, extra_dirs[i]))
                return CF_OK;
    }

    const char *listed = s->annotated.len ? s->annotated.buf : "  (nowhere)\n";
    const char *hint = env_set ? "CUFUNC_NVRTC_PATH is set, so only it was searched; point it at "
                                 "libnvrtc.so.* or the folder that holds it, or unset it"
                               : "install the CUDA toolkit (and set CUDA_HOME to it), or "
                                 "`pip install nvidia-cuda-nvrtc`, or set CUFUNC_NVRTC_PATH to "
                                 "libnvrtc.so.* or the folder that holds it";
    if (s->first_failure[0])
        snprintf(msg, msg_cap,
                 "NVRTC was found but failed to load: %s\nEvery place looked in:\n%sTo fix: %s",
                 s->first_failure, listed, hint);
    else
        snprintf(msg, msg_cap, "NVRTC (libnvrtc) not found. Looked in:\n%sTo fix: %s", listed,
                 hint);
    return CF_ERR_NO_NVRTC;
}

static int search_fingerprint(char hex[65]);
static int nvrtc_already_mapped(void);
static int64_t realtime_ns(void);

static void load_nvrtc(void)
{
    static char tried_buf[4096], annotated_buf[8192];
    static search s; /* static: PATH_MAX buffers do not belong on a caller's small stack */
    /* Before the search: a change made while it runs then shows in the next check. */
    load_started_ns = realtime_ns();
    nvrtc_before_load = nvrtc_already_mapped();
    load_fp_ok = !nvrtc_before_load && search_fingerprint(load_fp) == 0;
    memset(&s, 0, sizeof s);
    s.tried = (textbuf){tried_buf, sizeof tried_buf, 0};
    s.annotated = (textbuf){annotated_buf, sizeof annotated_buf, 0};
    tried_buf[0] = annotated_buf[0] = '\0';
    load_status = run_search(&s, load_message, sizeof load_message);
    if (load_status != CF_OK)
        return;
    cf_nvrtc = s.table;
    snprintf(loaded_path, sizeof loaded_path, "%s", s.path);
    cf_nvrtc_facts *f = &loaded_facts;
    nvrtcResult r = cf_nvrtc.nvrtcVersion(&f->major, &f->minor);
    if (r != NVRTC_SUCCESS) {
        load_status = CF_ERR_NO_NVRTC;
        snprintf(load_message, sizeof load_message,
                 "NVRTC at %s was found but failed to load: nvrtcVersion failed (%d)", loaded_path,
                 (int)r);
        return;
    }
    f->has_cubin = cf_nvrtc.nvrtcGetCUBIN && cf_nvrtc.nvrtcGetCUBINSize;
    if (cf_nvrtc.nvrtcGetNumSupportedArchs && cf_nvrtc.nvrtcGetSupportedArchs) {
        int n = 0;
        if (cf_nvrtc.nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 &&
            n <= CF_NVRTC_MAX_ARCHS && cf_nvrtc.nvrtcGetSupportedArchs(f->archs) == NVRTC_SUCCESS)
            f->n_archs = n;
    }
    __atomic_store_n(&is_loaded, 1, __ATOMIC_RELEASE);
}

int cf_nvrtc_is_loaded(void) { return __atomic_load_n(&is_loaded, __ATOMIC_ACQUIRE); }

cf_status cf_nvrtc_load(void)
{
    pthread_once(&load_once, load_nvrtc);
    if (load_status != CF_OK)
        return cf_error_set(load_status, "%s", load_message);
    return CF_OK;
}

cf_status cf_nvrtc_probe(char *path_out, size_t path_cap, char *tried, size_t tried_cap)
{
    search *s = calloc(1, sizeof *s); /* not cf_malloc: the probe is a test of the search only */
    char *annotated = malloc(8192);
    char *msg = malloc(12288);
    if (!s || !annotated || !msg) {
        free(s);
        free(annotated);
        free(msg);
        return cf_error_set(CF_ERR_NOMEM, "cf_nvrtc_probe: out of host memory");
    }
    annotated[0] = '\0';
    if (tried && tried_cap)
        tried[0] = '\0';
    s->tried = (textbuf){tried, tried ? tried_cap : 0, 0};
    s->annotated = (textbuf){annotated, 8192, 0};
    cf_status st = run_search(s, msg, 12288);
    if (st == CF_OK) {
        if (path_out && path_cap)
            snprintf(path_out, path_cap, "%s", s->path);
        /* The process-wide table may hold the same library; dlclose only drops our reference. */
        dlclose(s->handle);
    } else {
        if (path_out && path_cap)
            path_out[0] = '\0';
        cf_error_set(st, "%s", msg);
    }
    free(s);
    free(annotated);
    free(msg);
    return st;
}

/* ---- compiling under the lock ---------------------------------------------------------------- */

static pthread_mutex_t compile_lock = PTHREAD_MUTEX_INITIALIZER;

/* A fork() while another thread compiles would leave the child's copy of the lock held forever
 * (multiprocessing with the fork start method); holding it across fork keeps it consistent. */
static void compile_lock_acquire(void) { pthread_mutex_lock(&compile_lock); }
static void compile_lock_release(void) { pthread_mutex_unlock(&compile_lock); }
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void)
{
    pthread_atfork(compile_lock_acquire, compile_lock_release, compile_lock_release);
}

/* Older NVRTC calls setlocale() during compilation and leaves the process (and with uselocale, the
 * thread) in another locale, which breaks number formatting in the host program (Python's, NumPy's).
 * Both are saved and restored around the call; the lock also keeps two compilations from racing on
 * that process-wide state. */
nvrtcResult cf_nvrtc_compile_locked(nvrtcProgram prog, int nopts, const char *const *opts)
{
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&compile_lock);
    char saved[1024];
    int have_saved = 0;
    const char *cur = setlocale(LC_ALL, NULL);
    if (cur && strlen(cur) < sizeof saved) {
        memcpy(saved, cur, strlen(cur) + 1);
        have_saved = 1;
    }
    locale_t thread_locale = uselocale((locale_t)0);

    nvrtcResult r = cf_nvrtc.nvrtcCompileProgram(prog, nopts, opts);

    if (uselocale((locale_t)0) != thread_locale)
        uselocale(thread_locale);
    if (have_saved) {
        const char *now = setlocale(LC_ALL, NULL);
        if (!now || strcmp(now, saved) != 0)
            setlocale(LC_ALL, saved);
    }
    pthread_mutex_unlock(&compile_lock);
    return r;
}

/* ---- the public functions -------------------------------------------------------------------- */

cf_status cf_nvrtc_init(void) { return cf_nvrtc_load(); }

cf_status cf_nvrtc_version(int *major, int *minor)
{
    if (!major || !minor)
        return cf_error_set(CF_ERR_INVALID, "cf_nvrtc_version: major and minor must not be NULL");
    cf_status st = cf_nvrtc_load();
    if (st)
        return st;
    *major = loaded_facts.major;
    *minor = loaded_facts.minor;
    return CF_OK;
}

const char *cf_nvrtc_path(void) { return loaded_path; }

cf_status cf_nvrtc_add_search_dir(const char *dir)
{
    if (!dir || !*dir)
        return cf_error_set(CF_ERR_INVALID, "cf_nvrtc_add_search_dir: dir is NULL or empty");
    cf_status st = CF_OK;
    pthread_mutex_lock(&dirs_lock);
    if (search_started)
        goto done; /* documented: no effect once NVRTC has been searched for */
    for (int i = 0; i < n_extra_dirs; i++)
        if (strcmp(extra_dirs[i], dir) == 0)
            goto done;
    if (n_extra_dirs == MAX_EXTRA_DIRS) {
        st = cf_error_set(CF_ERR_RANGE, "cf_nvrtc_add_search_dir: at most %d folders",
                          MAX_EXTRA_DIRS);
        goto done;
    }
    char *copy = cf_strdup(dir);
    if (!copy) {
        st = CF_ERR_NOMEM;
        goto done;
    }
    extra_dirs[n_extra_dirs++] = copy;
done:
    pthread_mutex_unlock(&dirs_lock);
    return st;
}

int cf_nvrtc_best_arch(const cf_nvrtc_facts *f, int want)
{
    if (f->n_archs == 0)
        return want; /* NVRTC older than 11.2 cannot list its archs; let it judge the asked one */
    int best = 0;
    for (int i = 0; i < f->n_archs; i++)
        if (f->archs[i] <= want && f->archs[i] > best)
            best = f->archs[i];
    return best;
}

/* ---- the stamp (see nvrtc_loader.h) ---------------------------------------------------------- */

#define NS_PER_S 1000000000LL
/* A library or folder changed this recently before the load began is "in doubt": no stamp. Wide
 * enough for coarse file-system timestamps and a file server's clock a little off ours. */
#define STAMP_QUIET_NS (2 * NS_PER_S)

static int64_t ts_ns(struct timespec t) { return (int64_t)t.tv_sec * NS_PER_S + t.tv_nsec; }

static int64_t realtime_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return ts_ns(t);
}

/* A file's identity and last changes as text: equal text, the same file, unchanged. ctime is in
 * because no user can set it: a file put back with its old mtime still shows. */
static void stat_id(const struct stat *st, char *out, size_t cap)
{
    snprintf(out, cap, "%llu %llu %llo %lld %lld %lld", (unsigned long long)st->st_dev,
             (unsigned long long)st->st_ino, (unsigned long long)st->st_mode,
             (long long)st->st_size, (long long)ts_ns(st->st_mtim), (long long)ts_ns(st->st_ctim));
}

static void fp_str(cf_sha256 *h, const char *s) { cf_sha256_field(h, s, strlen(s)); }

static void fp_env(cf_sha256 *h, const char *name)
{
    const char *v = getenv(name);
    fp_str(h, name);
    fp_str(h, v ? "=" : "unset");
    fp_str(h, v ? v : "");
}

/* A folder (or file) the search looks in: its identity, or why it is not there. A folder's mtime
 * and ctime change whenever a file in it is added, removed or renamed. */
static void fp_path(cf_sha256 *h, const char *path)
{
    struct stat st;
    char id[160];
    if (stat(path, &st) == 0)
        stat_id(&st, id, sizeof id);
    else
        snprintf(id, sizeof id, "absent %d", errno);
    fp_str(h, path);
    fp_str(h, id);
}

/* Where the system loader looks for a bare soname besides LD_LIBRARY_PATH: its cache and its
 * default folders (multiarch and not). */
static const char *const SYSTEM_PLACES[] = {
    "/etc/ld.so.cache", "/etc/ld.so.preload", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib",
    "/usr/lib"};

/* SHA-256 (hex) of every input of the search: the variables it reads and the identity of every
 * folder it looks in. Returns 0, or -1 when the search cannot be fingerprinted (no stamp then). */
static int search_fingerprint(char hex[65])
{
    cf_sha256 h;
    cf_sha256_init(&h);
    fp_str(&h, "cufunc-nvrtc-search 1");
    /* Not LD_PRELOAD: see nvrtc_already_mapped. */
    static const char *const VARS[] = {"CUFUNC_NVRTC_PATH", "CUDA_HOME", "CUDA_PATH",
                                       "LD_LIBRARY_PATH"};
    for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++)
        fp_env(&h, VARS[i]);
    int n = freeze_search_dirs();
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "extra %d", n);
    fp_str(&h, buf);
    for (int i = 0; i < n; i++) /* fixed once frozen: read without the lock, as run_search does */
        fp_path(&h, extra_dirs[i]);

    const char *env = getenv("CUFUNC_NVRTC_PATH");
    if (env && *env) {
        fp_path(&h, env); /* the only place searched */
    } else {
        const char *roots[2] = {getenv("CUDA_HOME"), getenv("CUDA_PATH")};
        for (int r = 0; r < 2; r++) {
            if (!roots[r] || !*roots[r])
                continue;
            static const char *const SUBS[2] = {"lib64", "lib"};
            for (int j = 0; j < 2; j++) {
                int len = snprintf(buf, sizeof buf, "%s/%s", roots[r], SUBS[j]);
                if (len < 0 || (size_t)len >= sizeof buf)
                    return -1;
                fp_path(&h, buf);
            }
        }
        const char *llp = getenv("LD_LIBRARY_PATH");
        if (llp) {
            /* $ORIGIN, $LIB, $PLATFORM: the loader's expansions are not ours to redo. */
            if (strchr(llp, '$'))
                return -1;
            const char *p = llp;
            for (;;) {
                size_t len = strcspn(p, ":;");
                if (len >= sizeof buf)
                    return -1;
                if (len == 0) { /* an empty entry is the current folder */
                    buf[0] = '.';
                    buf[1] = '\0';
                } else {
                    memcpy(buf, p, len);
                    buf[len] = '\0';
                }
                fp_path(&h, buf);
                if (!p[len])
                    break;
                p += len + 1;
            }
        }
        for (size_t i = 0; i < sizeof SYSTEM_PLACES / sizeof SYSTEM_PLACES[0]; i++)
            fp_path(&h, SYSTEM_PLACES[i]);
    }
    unsigned char d[32];
    cf_sha256_final(&h, d);
    cf_hex_encode(d, 32, hex);
    return 0;
}

/* LD_PRELOAD is not in the fingerprint, and an NVRTC already in the process is checked instead.
 * What LD_PRELOAD can change about the search is one thing: a libnvrtc it puts in the process
 * (named in it, or a dependency of a library named in it) is what dlopen of a bare soname then
 * returns. That is seen exactly by looking at the objects mapped in this process, which also
 * catches a libnvrtc loaded before cufunc by anything else (PyTorch, CuPy) and one that
 * /etc/ld.so.preload brings. The variable's text says nothing more about NVRTC: tools that preload
 * their own libraries (valgrind, sanitizer runtimes, jemalloc, profilers) change it without
 * changing which NVRTC is found, and with it in the fingerprint the stamp never matched under them
 * and was rewritten back and forth between a tool's runs and plain ones. */
static int mapped_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *name = info->dlpi_name, *slash = name ? strrchr(name, '/') : NULL;
    const char *base = slash ? slash + 1 : name;
    if (base && strncmp(base, "libnvrtc.so", 11) == 0) {
        *(int *)data = 1;
        return 1;
    }
    return 0;
}

/* 1 when a libnvrtc is mapped in this process (before cufunc loads one: a stamp is never trusted,
 * nor written, then). */
static int nvrtc_already_mapped(void)
{
    int found = 0;
    dl_iterate_phdr(mapped_cb, &found);
    return found;
}

/* Scratch space of a stamp check or write, under stamp_lock: static, as PATH_MAX buffers do not
 * belong on a caller's (perhaps small) thread stack, and a best-effort shortcut should not spend
 * allocations (nor hide an injected allocation failure from the tests). */
static struct stamp_work {
    char file[PATH_MAX], real[PATH_MAX], parent[PATH_MAX];
    char fp[65];
} stamp_work;

/* Held only while a stamp's text is made or checked (no I/O but stat); a fork() during that time
 * would leave the child's copy locked by a thread it does not have. */
static pthread_mutex_t stamp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t stamp_atfork_once = PTHREAD_ONCE_INIT;
static void stamp_lock_reinit(void) { pthread_mutex_init(&stamp_lock, NULL); }
static void stamp_register_atfork(void) { pthread_atfork(NULL, NULL, stamp_lock_reinit); }

static void lock_stamp(void)
{
    pthread_once(&stamp_atfork_once, stamp_register_atfork);
    pthread_mutex_lock(&stamp_lock);
}

/* The folder holding `path` into `out`; 0 when `path` is not absolute. */
static int parent_of(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (path[0] != '/' || !slash)
        return 0;
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= cap)
        return 0;
    memcpy(out, path, n);
    out[n] = '\0';
    return 1;
}

/* The body of a stamp and its "sum" line; returns its length, or 0 when it does not fit. */
static size_t stamp_format(char *buf, size_t cap, const char *fp, const char *path,
                           const char *real, const char *file_id, const char *dir_id,
                           const cf_nvrtc_facts *f)
{
    int n = snprintf(buf, cap, "cufunc-nvrtc-stamp 1\nsearch %s\npath %s\nreal %s\nfile %s\n"
                               "dir %s\nnvrtc %d %d %d %d",
                     fp, path, real, file_id, dir_id, f->major, f->minor, f->has_cubin, f->n_archs);
    if (n < 0 || (size_t)n >= cap)
        return 0;
    size_t len = (size_t)n;
    for (int i = 0; i < f->n_archs; i++) {
        n = snprintf(buf + len, cap - len, " %d", f->archs[i]);
        if (n < 0 || (size_t)n >= cap - len)
            return 0;
        len += (size_t)n;
    }
    if (len + 1 + 4 + 64 + 1 >= cap)
        return 0;
    buf[len++] = '\n';
    char sum[65];
    cf_sha256_hex(buf, len, sum);
    len += (size_t)snprintf(buf + len, cap - len, "sum %s\n", sum);
    return len;
}

/* The rest of the next line when it is "<tag> <rest>"; NULL otherwise. Cuts the line. */
static char *take_line(char **p, const char *tag)
{
    char *line = *p, *nl = strchr(line, '\n');
    if (!nl)
        return NULL;
    *nl = '\0';
    *p = nl + 1;
    size_t t = strlen(tag);
    if (strncmp(line, tag, t) != 0 || line[t] != ' ')
        return NULL;
    return line + t + 1;
}

/* " <int in [lo, hi]>" at *p. */
static int take_int(const char **p, long lo, long hi, int *out)
{
    const char *s = *p;
    if (*s != ' ' || s[1] < '0' || s[1] > '9')
        return 0;
    char *end;
    errno = 0;
    long v = strtol(s + 1, &end, 10);
    if (errno || v < lo || v > hi)
        return 0;
    *out = (int)v;
    *p = end;
    return 1;
}

#define WHY(...) (snprintf(why, why_cap, __VA_ARGS__), -1)

static int stamp_verify_locked(char *text, size_t n, cf_nvrtc_facts *out, char *why,
                               size_t why_cap);

int cf_nvrtc_stamp_verify(char *text, size_t n, cf_nvrtc_facts *out, char *why, size_t why_cap)
{
    lock_stamp();
    int r = stamp_verify_locked(text, n, out, why, why_cap);
    pthread_mutex_unlock(&stamp_lock);
    return r;
}

static int stamp_verify_locked(char *text, size_t n, cf_nvrtc_facts *out, char *why,
                               size_t why_cap)
{
    struct stamp_work *w = &stamp_work;
    char id[160];
    struct stat st;
    if (n > CF_NVRTC_STAMP_MAX)
        return WHY("larger than %d bytes", CF_NVRTC_STAMP_MAX);
    text[n] = '\0';
    if (strlen(text) != n)
        return WHY("holds a NUL byte");
    /* The last line is "sum <SHA-256 of everything before it>". */
    const size_t sum_line = 4 + 64 + 1;
    if (n <= sum_line || text[n - 1] != '\n' || text[n - sum_line - 1] != '\n' ||
        memcmp(text + n - sum_line, "sum ", 4) != 0)
        return WHY("truncated (no sum line at its end)");
    size_t body = n - sum_line;
    char sum[65];
    cf_sha256_hex(text, body, sum);
    if (memcmp(sum, text + body + 4, 64) != 0)
        return WHY("corrupt (checksum mismatch)");
    text[body] = '\0';
    char *p = text, *v;
    if (!(v = take_line(&p, "cufunc-nvrtc-stamp")) || strcmp(v, "1") != 0)
        return WHY("not a stamp of this format");
    if (!(v = take_line(&p, "search")))
        return WHY("no search line");
    /* Before cufunc's own load: any libnvrtc mapped; after it: one that was there before it. */
    if (cf_nvrtc_is_loaded() ? nvrtc_before_load : nvrtc_already_mapped())
        return WHY("an NVRTC was in this process before cufunc looked for one (LD_PRELOAD or "
                   "another library loaded it): the search may not find the stamp's");
    if (search_fingerprint(w->fp) != 0)
        return WHY("this search cannot be fingerprinted (LD_LIBRARY_PATH uses $ expansions)");
    if (strcmp(v, w->fp) != 0)
        return WHY("the search's inputs changed (environment or folders searched)");
    char *lib = take_line(&p, "path"), *real = take_line(&p, "real");
    char *file_id = take_line(&p, "file"), *dir_id = take_line(&p, "dir");
    char *facts = take_line(&p, "nvrtc");
    if (!lib || !real || !file_id || !dir_id || !facts || *p)
        return WHY("malformed");
    /* The file itself (real) and the name the loader opened (path, perhaps a symbolic link) must
     * both be that same unchanged file; the folder holding the name, unchanged too. */
    if (stat(real, &st) != 0)
        return WHY("the library %s is gone", real);
    stat_id(&st, id, sizeof id);
    if (strcmp(id, file_id) != 0)
        return WHY("the library %s changed", real);
    if (stat(lib, &st) != 0 || (stat_id(&st, id, sizeof id), strcmp(id, file_id) != 0))
        return WHY("%s no longer names the library %s", lib, real);
    if (!parent_of(lib, w->parent, sizeof w->parent) || stat(w->parent, &st) != 0 ||
        (stat_id(&st, id, sizeof id), strcmp(id, dir_id) != 0))
        return WHY("the folder of %s changed", lib);
    cf_nvrtc_facts f;
    memset(&f, 0, sizeof f);
    const char *q = facts - 1; /* take_int wants the separating space */
    int ok = take_int(&q, 1, 999, &f.major) && take_int(&q, 0, 999, &f.minor) &&
             take_int(&q, 0, 1, &f.has_cubin) && take_int(&q, 0, CF_NVRTC_MAX_ARCHS, &f.n_archs);
    for (int i = 0; ok && i < f.n_archs; i++)
        ok = take_int(&q, 10, 9999, &f.archs[i]) && (i == 0 || f.archs[i] > f.archs[i - 1]);
    if (!ok || *q)
        return WHY("malformed nvrtc line");
    if (out)
        *out = f;
    return 0;
}

#undef WHY

size_t cf_nvrtc_stamp_text(char *buf, size_t cap)
{
    if (!buf || !load_fp_ok || !cf_nvrtc_is_loaded())
        return 0;
    lock_stamp();
    struct stamp_work *w = &stamp_work;
    size_t n = 0;
    struct stat fs, ls, ds;
    char file_id[160], link_id[160], dir_id[160];
    if (!realpath(loaded_path, w->real) || stat(w->real, &fs) != 0 || stat(loaded_path, &ls) != 0 ||
        !parent_of(loaded_path, w->parent, sizeof w->parent) || stat(w->parent, &ds) != 0)
        goto done;
    stat_id(&fs, file_id, sizeof file_id);
    stat_id(&ls, link_id, sizeof link_id);
    stat_id(&ds, dir_id, sizeof dir_id);
    if (strcmp(file_id, link_id) != 0)
        goto done;
    /* Replaced, rewritten or relinked since shortly before the load began: what is there now may
     * not be what was loaded. ctime catches all of these, whatever the mtime says. */
    int64_t quiet = load_started_ns - STAMP_QUIET_NS;
    if (ts_ns(fs.st_ctim) >= quiet || ts_ns(fs.st_mtim) >= quiet || ts_ns(ds.st_ctim) >= quiet ||
        ts_ns(ds.st_mtim) >= quiet)
        goto done;
    if (strchr(loaded_path, '\n') || strchr(w->real, '\n'))
        goto done;
    n = stamp_format(buf, cap, load_fp, loaded_path, w->real, file_id, dir_id, &loaded_facts);
    if (n > CF_NVRTC_STAMP_MAX)
        n = 0;
done:
    pthread_mutex_unlock(&stamp_lock);
    return n;
}

cf_status cf_nvrtc_loaded_facts(cf_nvrtc_facts *out)
{
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_nvrtc_loaded_facts: out is NULL");
    cf_status st = cf_nvrtc_load();
    if (st)
        return st;
    *out = loaded_facts;
    return CF_OK;
}
