/* cufunc/array.h: a strided view of device (or host) memory. Pure data; no GPU needed; nothing
 * here allocates or owns memory. */
#ifndef CUFUNC_ARRAY_H
#define CUFUNC_ARRAY_H

#include <stdint.h>
#include "cufunc/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* As NumPy 2's NPY_MAXDIMS. */
#define CF_MAX_DIMS 64

/* A view: `data` is the address of element (0, ..., 0); strides are in bytes and may be zero or
 * negative. The view does not own memory. `device` is the ordinal of the device the memory lives on
 * (-1 for host memory). */
typedef struct cf_array {
    uint64_t data;
    cf_dtype dtype;
    int ndim;
    int device;
    int64_t shape[CF_MAX_DIMS];
    int64_t strides[CF_MAX_DIMS];
} cf_array;

/* Fill `out` as a contiguous view of `shape` in order 'C' or 'F'. Checks ndim, negative extents and
 * overflow of the byte size (CF_ERR_INVALID / CF_ERR_RANGE). `data` may be 0. */
CF_API cf_status cf_array_init_contiguous(cf_array *out, uint64_t data, cf_dtype dtype, int ndim,
                                          const int64_t *shape, char order, int device);
/* Number of elements (product of the shape; 1 for ndim 0). */
CF_API int64_t cf_array_size(const cf_array *a);
/* size * itemsize. */
CF_API int64_t cf_array_nbytes(const cf_array *a);
/* NumPy's flags: extents of 1 and empty arrays do not break contiguity. */
CF_API int cf_array_is_c_contiguous(const cf_array *a);
CF_API int cf_array_is_f_contiguous(const cf_array *a);
/* The byte range [*lo, *hi) relative to data that the view touches; (0, 0) for an empty view. */
CF_API void cf_array_byte_bounds(const cf_array *a, int64_t *lo, int64_t *hi);
/* Whether two views may share memory (byte ranges intersect); same device only. A bounds test, as
 * NumPy's first one (solve_may_share_memory with max_work=1): exact for contiguous views,
 * conservative for strided ones (a[::2] and a[1::2] "may" overlap). Empty views never overlap. */
CF_API int cf_array_may_overlap(const cf_array *a, const cf_array *b);
/* Whether two views are the same elements in the same order: same device, address, dtype and
 * shape, and the same strides on every axis of extent > 1 (NumPy's rule: an extent-1 axis's
 * stride does not matter). */
CF_API int cf_array_same_view(const cf_array *a, const cf_array *b);
/* NumPy's rule for operands that share memory: a call behaves as if every input were copied
 * before any output is written. Whether `in` must be copied before a kernel that reads it writes
 * `out`: yes when they may overlap (cf_array_may_overlap), except when `in_place_ok` and they are
 * the same view with no element repeated (no zero stride on an axis of extent > 1).
 * `in_place_ok` is the caller's knowledge of its kernel: every read of an element of `in` comes
 * before the write of the element of `out` at the same index, and no other element of `in` is
 * read after that write (element-wise ufuncs; scans, whose tiles are loaded whole before they are
 * stored). It is not so for a gufunc with core dimensions (a body that reverses its row writes
 * out[0] before it reads x[n-1]) nor for a reduction. The one check every engine uses. */
CF_API int cf_array_needs_copy(const cf_array *in, const cf_array *out, int in_place_ok);
/* Whether the view has exactly the shape (ndim, shape). */
CF_API int cf_array_has_shape(const cf_array *a, int ndim, const int64_t *shape);

#ifdef __cplusplus
}
#endif
#endif
