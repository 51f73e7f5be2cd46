/* loopfn.h: the CUDA C of one loop of an engine (ufunc.c, gufunc.c, reduce.c): the source that
 * defines the __device__ function, its name, the NVRTC options it is compiled with, and the
 * module globals its kernels' modules get at load (cf_module_load_globals: a captured device
 * array's descriptor, kept out of the source so that the compiled kernel stays cacheable). */
#ifndef CF_LOOPFN_H
#define CF_LOOPFN_H

#include <pthread.h>
#include <stddef.h>

#include "cufunc/compile.h"
#include "cufunc/dtype.h"
#include "cufunc/loops.h"
#include "cufunc/status.h"

typedef struct cf_loop_fn {
    char *source;
    char *fn_name;
    char **options;
    int noptions;
    cf_module_global *globals; /* owned: each name, label and value is a copy */
    int nglobals;
} cf_loop_fn;

/* Copy the strings and the globals (names, labels, values) into `f`, which owns them afterwards
 * (free with cf_loop_fn_clear). `globals` may be NULL when nglobals is 0. On failure
 * (CF_ERR_NOMEM, or CF_ERR_INVALID for a NULL string, a global without a name or a value, two
 * globals of one name) `f` holds nothing. */
cf_status cf_loop_fn_init(cf_loop_fn *f, const char *source, const char *fn_name,
                          const char *const *options, int noptions,
                          const cf_module_global *globals, int nglobals);
/* Free what `f` holds and zero it; no-op on a zeroed one. */
void cf_loop_fn_clear(cf_loop_fn *f);
/* Compile `kernel_source` (a kernel of this loop) with the loop's options for compute capability
 * cc_major.cc_minor through the kernel cache, exactly as cf_loop_fn_load would before loading it
 * (same source, options and arch: the same cache entry), and discard the image: how the engines
 * compile ahead of time and check a loop without a GPU. On failure the message is prefixed with
 * `what` (the engine, its name and the loop's types). *from as cf_cache_get_image's (may be NULL). */
cf_status cf_loop_fn_compile(const cf_loop_fn *f, const char *kernel_source, int cc_major,
                             int cc_minor, const char *what, int *from);
/* The architecture a loop check compiles for: device 0's when a GPU is usable (the check then
 * fills the cache with an entry a launch will use), else compute capability 7.5, which every
 * NVRTC from CUDA 11 to 13 targets. Never fails. */
void cf_loop_check_arch(int *cc_major, int *cc_minor);
/* "(float32, float32) -> float32", for messages; `buf` holds `cap` bytes. */
const char *cf_loop_types_text(const cf_dtype *types, int nin, int nout, char *buf, size_t cap);

/* Load `kernel_source` (a kernel of this loop: it includes the loop's source) on `device` with the
 * loop's options and globals: the one way the engines load a loop's kernels. */
cf_status cf_loop_fn_load(const cf_loop_fn *f, int device, const char *kernel_source,
                          cf_module **out);

/* Loop selection: cufunc/loops.h (cf_loops_find, cf_loops_no_match, cf_loops_nep50), defined in
 * loopfn.c. */

/* Adding a loop, shared by the ufunc and gufunc engines. cf_loops_check_types: each of the nargs
 * types a valid dtype (CF_ERR_TYPE) other than float16 (CF_ERR_UNSUPPORTED). cf_loops_check_new:
 * no existing loop has these nin input types (CF_ERR_INVALID, "<what> '<name>' already has a loop
 * for these input types"). cf_loops_append: copies `loop` (`size` bytes) to the end of the
 * engine's growable array (`array_field` is the address of its pointer field, e.g. &u->loops,
 * read and written with memcpy so that any element type fits; *n used, *cap allocated, doubling
 * from 4), under `lock` so that the array never moves under a thread holding it; *index (may be
 * NULL) is its index. CF_ERR_NOMEM leaves the array as it was: the caller still owns what `loop`
 * holds. */
cf_status cf_loops_check_types(const cf_dtype *types, int nargs);
cf_status cf_loops_check_new(const char *what, const char *name, const cf_dtype *first,
                             size_t stride, int nloops, int nin, const cf_dtype *types);
cf_status cf_loops_append(void *array_field, int *n, int *cap, size_t size, const void *loop,
                          pthread_mutex_t *lock, int *index);

#endif
