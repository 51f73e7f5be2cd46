/* cufunc/ufunc.h: element-wise GPU functions (the engine behind @vectorize).
 *
 * A cf_ufunc is a named set of loops. A loop is a CUDA C `__device__` function (made by the kernel
 * language from the user's Python) with fixed argument and return types. A call picks a loop for
 * the operands' dtypes, plans the iteration (plan.h), and launches a kernel specialised on the key
 * {loop, each operand's dtype and kind (contiguous array, strided array, scalar), coalesced ndim,
 * index width, vector width, where-mask}. Kernels are generated once per key and device and kept
 * in the ufunc (and on disk through the compile cache). Operand dtypes may differ from the loop's
 * types: values are converted as they are loaded and stored, inside the kernel, with no temporary.
 */
#ifndef CUFUNC_UFUNC_H
#define CUFUNC_UFUNC_H

#include <stdint.h>
#include "cufunc/array.h"
#include "cufunc/compile.h"
#include "cufunc/plan.h"
#include "cufunc/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cf_ufunc cf_ufunc;

/* A new ufunc with nin inputs and nout outputs (1 <= nin, 1 <= nout, nin + nout <= 32). `name` is
 * copied. Free with cf_ufunc_free (no-op on NULL). */
CF_API cf_status cf_ufunc_create(const char *name, int nin, int nout, cf_ufunc **out);
CF_API void cf_ufunc_free(cf_ufunc *u);

/* Add a loop. `types` holds nin input types then nout output types. `source` is CUDA C defining the
 * `__device__` function `fn_name` (it may #include "cufunc/runtime.cuh"); with nout == 1 it returns
 * the output; with nout > 1 it returns a struct whose fields f0, f1, ... are the outputs. `options`
 * are extra NVRTC options (e.g. --fmad=false). Everything is copied. The new loop's index is
 * written to *index (may be NULL). A loop with the same input types as an earlier one is an error. */
CF_API cf_status cf_ufunc_add_loop(cf_ufunc *u, const cf_dtype *types, const char *source,
                                   const char *fn_name, const char *const *options, int noptions,
                                   int *index);
/* cf_ufunc_add_loop with module globals (compile.h): every kernel module of the loop gets them when
 * it is loaded (cf_module_load_globals), e.g. the descriptors of device arrays the device
 * function reads (captured from Python globals), declared in `source` and left out of its text so
 * that its kernels stay cacheable on disk. They are copied (names, labels, values); a launch on
 * another device than a global's is CF_ERR_INVALID naming its label. The caller keeps the memory
 * a global points to alive as long as the ufunc. `globals` may be NULL when nglobals is 0. The
 * same parameters in cf_gufunc_add_loop_globals and cf_reducer_add_loop_globals. */
CF_API cf_status cf_ufunc_add_loop_globals(cf_ufunc *u, const cf_dtype *types, const char *source,
                                           const char *fn_name, const char *const *options,
                                           int noptions, const cf_module_global *globals,
                                           int nglobals, int *index);
CF_API int cf_ufunc_nin(const cf_ufunc *u);
CF_API int cf_ufunc_nout(const cf_ufunc *u);
CF_API int cf_ufunc_nloops(const cf_ufunc *u);
/* The nin + nout types of a loop. */
CF_API cf_status cf_ufunc_loop_types(const cf_ufunc *u, int loop, cf_dtype *types);

/* NumPy's can_cast(from, to, 'safe'). */
CF_API int cf_can_cast_safe(cf_dtype from, cf_dtype to);

/* NumPy's casting rules, in NumPy's order. */
typedef enum cf_casting {
    CF_CAST_NO, CF_CAST_EQUIV, CF_CAST_SAFE, CF_CAST_SAME_KIND, CF_CAST_UNSAFE
} cf_casting;
/* NumPy's can_cast(from, to, rule) for the dtypes cufunc supports (native byte order). */
CF_API int cf_can_cast(cf_dtype from, cf_dtype to, cf_casting rule);
/* "no", "equiv", "safe", "same_kind", "unsafe"; "?" for an invalid rule. */
CF_API const char *cf_casting_name(cf_casting rule);

/* Pick a loop for these input dtypes: an exact match first, then the first loop (in the order they
 * were added) every input reaches by safe casting. weak[i] (may be NULL) marks a Python scalar
 * (NEP 50): it matches any loop type of its kind or a higher one (bool < int < float < complex),
 * the caller having checked the value fits. CF_ERR_TYPE when nothing matches, with a message
 * listing the input dtypes and the loops. */
CF_API cf_status cf_ufunc_resolve(const cf_ufunc *u, const cf_dtype *in_types,
                                  const unsigned char *weak, int *loop);
/* Only the first pass of cf_ufunc_resolve: a loop taking exactly these input dtypes (weak scalars
 * matching by kind). Ufuncs that compile loops on demand use this, so that new input types get a
 * loop of their own rather than a cast into an earlier one. CF_ERR_TYPE when there is none. */
CF_API cf_status cf_ufunc_find_exact(const cf_ufunc *u, const cf_dtype *in_types,
                                     const unsigned char *weak, int *loop);

/* One operand of a launch: an array view on the launch's device, or a scalar passed by value. */
typedef struct cf_operand {
    int is_scalar;
    cf_array array;              /* when !is_scalar */
    cf_dtype scalar_dtype;       /* when is_scalar */
    unsigned char scalar[16];    /* the value in scalar_dtype's representation */
} cf_operand;

/* Launch `loop` on stream `s` over the loop shape (ndim, shape): nin input operands then nout
 * output arrays, each broadcastable to the shape (outputs must have exactly that shape), and an
 * optional bool mask `where` (NULL for none) broadcastable to it: outputs are written only where
 * it is true. Operand dtypes may differ from the loop's types (converted in the kernel). Outputs
 * must not overlap inputs unless they are the same view (the caller copies otherwise, as NumPy).
 * Returns without waiting for the kernel. */
CF_API cf_status cf_ufunc_launch(cf_ufunc *u, int loop, cf_stream *s, const cf_operand *ops,
                                 const cf_array *where, int ndim, const int64_t *shape);

/* The CUDA C source of the kernel a launch with these arguments would use (for inspection and
 * tests; needs no GPU: the device's properties are not involved in the source). The caller frees
 * *source with cf_free_buffer. */
CF_API cf_status cf_ufunc_kernel_source(cf_ufunc *u, int loop, const cf_operand *ops,
                                        const cf_array *where, int ndim, const int64_t *shape,
                                        char **source);

/* Kernels compiled so far by this ufunc, over all devices (for tests of the specialisation). */
CF_API int cf_ufunc_kernel_count(const cf_ufunc *u);

#ifdef __cplusplus
}
#endif
#endif
