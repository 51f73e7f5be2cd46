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

/* Serialises nvrtcCompileProgram and protects the caller's locale (older NVRTC calls setlocale). */
nvrtcResult cf_nvrtc_compile_locked(nvrtcProgram prog, int nopts, const char *const *opts);

#endif
