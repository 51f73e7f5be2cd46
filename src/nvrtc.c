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
 */
#define _GNU_SOURCE 1 /* dladdr, uselocale */
#include "nvrtc_loader.h"

#include <dlfcn.h>
#include <limits.h>
#include <locale.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "cufunc/compile.h"
#include "error.h"

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
static int version_major, version_minor;
static int archs[128]; /* sm numbers NVRTC can emit SASS for, ascending (75, 80, ..., 121) */
static int n_archs;     /* 0: this NVRTC cannot say (older than 11.2) */

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
static cf_status run_search(search *s, char *msg, size_t msg_cap)
{
    pthread_mutex_lock(&dirs_lock);
    search_started = 1;
    pthread_mutex_unlock(&dirs_lock);

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

static void load_nvrtc(void)
{
    static char tried_buf[4096], annotated_buf[8192];
    static search s; /* static: PATH_MAX buffers do not belong on a caller's small stack */
    memset(&s, 0, sizeof s);
    s.tried = (textbuf){tried_buf, sizeof tried_buf, 0};
    s.annotated = (textbuf){annotated_buf, sizeof annotated_buf, 0};
    tried_buf[0] = annotated_buf[0] = '\0';
    load_status = run_search(&s, load_message, sizeof load_message);
    if (load_status != CF_OK)
        return;
    cf_nvrtc = s.table;
    snprintf(loaded_path, sizeof loaded_path, "%s", s.path);
    nvrtcResult r = cf_nvrtc.nvrtcVersion(&version_major, &version_minor);
    if (r != NVRTC_SUCCESS) {
        load_status = CF_ERR_NO_NVRTC;
        snprintf(load_message, sizeof load_message,
                 "NVRTC at %s was found but failed to load: nvrtcVersion failed (%d)", loaded_path,
                 (int)r);
        return;
    }
    if (cf_nvrtc.nvrtcGetNumSupportedArchs && cf_nvrtc.nvrtcGetSupportedArchs) {
        int n = 0;
        if (cf_nvrtc.nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 &&
            n <= (int)(sizeof archs / sizeof archs[0]) &&
            cf_nvrtc.nvrtcGetSupportedArchs(archs) == NVRTC_SUCCESS)
            n_archs = n;
    }
}

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
    *major = version_major;
    *minor = version_minor;
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

cf_status cf_nvrtc_supports_arch(int cc_major, int cc_minor, int *supported)
{
    if (!supported)
        return cf_error_set(CF_ERR_INVALID, "cf_nvrtc_supports_arch: supported is NULL");
    if (cc_major <= 0 || cc_minor < 0 || cc_minor > 9)
        return cf_error_set(CF_ERR_INVALID, "cf_nvrtc_supports_arch: bad compute capability %d.%d",
                            cc_major, cc_minor);
    cf_status st = cf_nvrtc_load();
    if (st)
        return st;
    int want = cc_major * 10 + cc_minor;
    if (n_archs == 0) {
        /* NVRTC older than 11.2 cannot list its archs; let it judge the asked one itself. */
        *supported = want;
        return CF_OK;
    }
    int best = 0;
    for (int i = 0; i < n_archs; i++)
        if (archs[i] <= want && archs[i] > best)
            best = archs[i];
    *supported = best;
    return CF_OK;
}
