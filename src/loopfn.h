/* loopfn.h: the CUDA C of one loop of an engine (ufunc.c, gufunc.c, reduce.c): the source that
 * defines the __device__ function, its name, and the NVRTC options it is compiled with. */
#ifndef CF_LOOPFN_H
#define CF_LOOPFN_H

#include "cufunc/status.h"

typedef struct cf_loop_fn {
    char *source;
    char *fn_name;
    char **options;
    int noptions;
} cf_loop_fn;

/* Copy the strings into `f`, which owns them afterwards (free with cf_loop_fn_clear). On failure
 * (CF_ERR_NOMEM, or CF_ERR_INVALID for a NULL string) `f` holds nothing. */
cf_status cf_loop_fn_init(cf_loop_fn *f, const char *source, const char *fn_name,
                          const char *const *options, int noptions);
/* Free what `f` holds and zero it; no-op on a zeroed one. */
void cf_loop_fn_clear(cf_loop_fn *f);

#endif
