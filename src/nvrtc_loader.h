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
 * depends on (CUFUNC_NVRTC_PATH, CUDA_HOME, CUDA_PATH, LD_LIBRARY_PATH, the folders of
 * cf_nvrtc_add_search_dir in order, and the identity - device, inode, size, mtime, ctime - of every
 * folder the search looks in, of /etc/ld.so.cache and /etc/ld.so.preload, and of the library found
 * and its folder). A later process whose fingerprint and stats all match, and that has no libnvrtc
 * mapped already (LD_PRELOAD's one effect on the search; see nvrtc.c), takes the facts from the
 * stamp without loading NVRTC; any difference, a missing, corrupt or foreign stamp, loads NVRTC as
 * before and rewrites the stamp. A stamp is written only when the library and its folder were last
 * changed well before the load began (ctime cannot be set by users), so a library replaced while it
 * was being loaded never gets its predecessor's version recorded.
 *
 * This file makes and checks the stamp's text; reading and writing the file, and keeping the facts
 * a stamp gave, are the cache's (cache.h: cf_cache_nvrtc_facts, cf_cache_stamp_check). */

#define CF_NVRTC_MAX_ARCHS 128
#define CF_NVRTC_STAMP_NAME "nvrtc-stamp-v1"
#define CF_NVRTC_STAMP_MAX 8192 /* bytes; a larger file is not a stamp */

typedef struct cf_nvrtc_facts {
    int major, minor;
    int has_cubin; /* nvrtcGetCUBIN exists (NVRTC 11.1 and later) */
    int n_archs;   /* 0: this NVRTC cannot list its archs (older than 11.2) */
    int archs[CF_NVRTC_MAX_ARCHS]; /* ascending sm numbers: 75, 80, ..., 121 */
} cf_nvrtc_facts;

/* The facts of the loaded library, loading NVRTC now if needed (CF_ERR_NO_NVRTC when it cannot). */
cf_status cf_nvrtc_loaded_facts(cf_nvrtc_facts *out);

/* The text of a stamp for the library this process loaded, into buf (cap bytes, at least
 * CF_NVRTC_STAMP_MAX + 1); returns its length, or 0 when there is to be no stamp (not loaded, the
 * search could not be fingerprinted, a libnvrtc was in the process before the search, the library
 * or its folder changed too recently to be sure it is the one loaded). */
size_t cf_nvrtc_stamp_text(char *buf, size_t cap);

/* Check a stamp's text (n bytes in text, which must have room for n + 1; it is changed) against
 * this process, without loading NVRTC: 0 and the recorded facts (`out` may be NULL), or -1 with
 * the reason in `why`. */
int cf_nvrtc_stamp_verify(char *text, size_t n, cf_nvrtc_facts *out, char *why, size_t why_cap);

/* The newest sm number in `f` that is <= want (0: none); `want` itself when f lists no archs. */
int cf_nvrtc_best_arch(const cf_nvrtc_facts *f, int want);

/* Serialises nvrtcCompileProgram and protects the caller's locale (older NVRTC calls setlocale). */
nvrtcResult cf_nvrtc_compile_locked(nvrtcProgram prog, int nopts, const char *const *opts);

#endif
