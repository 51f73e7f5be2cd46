/* nvrtc_loader.h: NVRTC, loaded with dlopen at first use (see include/cufunc/compile.h for the search
 * order). Entry points come from one X-macro list, as in driver.h. */
#ifndef CF_NVRTC_LOADER_H
#define CF_NVRTC_LOADER_H

#include <nvrtc.h>

#include "cufunc/status.h"

/* X(name, required): optional functions (0) may be NULL on older NVRTC. */
#define CF_NVRTC_FUNCS(X)                                                                          \
    X(nvrtcGetErrorString, 1)                                                                      \
    X(nvrtcVersion, 1)                                                                             \
    X(nvrtcGetNumSupportedArchs, 0)                                                                \
    X(nvrtcGetSupportedArchs, 0)                                                                   \
    X(nvrtcCreateProgram, 1)                                                                       \
    X(nvrtcDestroyProgram, 1)                                                                      \
    X(nvrtcCompileProgram, 1)                                                                      \
    X(nvrtcGetPTXSize, 1)                                                                          \
    X(nvrtcGetPTX, 1)                                                                              \
    X(nvrtcGetCUBINSize, 0)                                                                        \
    X(nvrtcGetCUBIN, 0)                                                                            \
    X(nvrtcGetProgramLogSize, 1)                                                                   \
    X(nvrtcGetProgramLog, 1)

#define CF_NVRTC_FIELD(name, required) __typeof__(&name) name;
typedef struct cf_nvrtc_table {
    CF_NVRTC_FUNCS(CF_NVRTC_FIELD)
} cf_nvrtc_table;
#undef CF_NVRTC_FIELD

/* Filled by cf_nvrtc_load(); read-only afterwards. */
extern cf_nvrtc_table cf_nvrtc;

/* Load NVRTC once per process (sticky outcome). Same as the public cf_nvrtc_init(). */
cf_status cf_nvrtc_load(void);

/* Try to load NVRTC from the candidates the search order gives for this environment, without
 * touching the process-wide table: for tests of the search. Writes every path tried (one per line)
 * into `tried` (may be NULL). Returns CF_OK and the path used, or CF_ERR_NO_NVRTC. */
cf_status cf_nvrtc_probe(char *path_out, size_t path_cap, char *tried, size_t tried_cap);

/* 1 once this process has loaded libnvrtc (cf_nvrtc_probe's trial loads do not count). */
int cf_nvrtc_is_loaded(void);

/* ---- the facts the kernel cache needs, and the stamp that keeps them across processes --------
 *
 * The cache key holds NVRTC's version and the CUBIN-or-PTX choice needs its arch list; loading
 * libnvrtc for them costs milliseconds (hundreds when the disk is cold) in a process whose kernels
 * are all on disk already. So the first process that loads NVRTC records them in a stamp file in
 * the cache folder, <cache>/nvrtc-stamp-v1, together with a fingerprint of everything the search
 * depends on (CUFUNC_NVRTC_PATH, CUDA_HOME, CUDA_PATH, LD_LIBRARY_PATH, LD_PRELOAD, the folders of
 * cf_nvrtc_add_search_dir in order, and the identity - device, inode, size, mtime, ctime - of every
 * folder the search looks in, of /etc/ld.so.cache, and of the library found and its folder). A
 * later process whose fingerprint and stats all match takes the facts from the stamp without
 * loading NVRTC; any difference, a missing, corrupt or foreign stamp, loads NVRTC as before and
 * rewrites the stamp. A stamp is written only when the library and its folder were last changed
 * well before the load began (ctime cannot be set by users), so a library replaced while it was
 * being loaded never gets its predecessor's version recorded. */

#define CF_NVRTC_MAX_ARCHS 128
#define CF_NVRTC_STAMP_NAME "nvrtc-stamp-v1"

typedef struct cf_nvrtc_facts {
    int major, minor;
    int has_cubin; /* nvrtcGetCUBIN exists (NVRTC 11.1 and later) */
    int n_archs;   /* 0: this NVRTC cannot list its archs (older than 11.2) */
    int archs[CF_NVRTC_MAX_ARCHS]; /* ascending sm numbers: 75, 80, ..., 121 */
} cf_nvrtc_facts;

/* The facts of the NVRTC this process uses: of the loaded library once it is loaded; before that,
 * from a valid stamp in the cache folder when there is one (*from_stamp = 1, NVRTC stays
 * unloaded), else by loading NVRTC now (and writing the stamp when the disk cache is on).
 * `from_stamp` may be NULL. CF_ERR_NO_NVRTC when it has to load and cannot. */
cf_status cf_nvrtc_facts_get(cf_nvrtc_facts *out, int *from_stamp);

/* Forget facts taken from a stamp (cf_cache_reconfigure: the folder or the environment may have
 * changed); the next cf_nvrtc_facts_get checks again. A loaded library's facts stay. */
void cf_nvrtc_facts_forget(void);

/* Check the stamp in `dir` against this process's environment, without loading NVRTC: CF_OK and
 * the recorded facts when it is valid; CF_ERR_IO when it is missing or unreadable; CF_ERR_INVALID
 * with the reason (corrupt, another search, the library changed) otherwise. For tests and
 * diagnostics; `out` may be NULL. */
cf_status cf_nvrtc_stamp_check(const char *dir, cf_nvrtc_facts *out);

/* The newest sm number in `f` that is <= want (0: none); `want` itself when f lists no archs. */
int cf_nvrtc_best_arch(const cf_nvrtc_facts *f, int want);

/* Serialises nvrtcCompileProgram and protects the caller's locale (older NVRTC calls setlocale). */
nvrtcResult cf_nvrtc_compile_locked(nvrtcProgram prog, int nopts, const char *const *opts);

#endif
