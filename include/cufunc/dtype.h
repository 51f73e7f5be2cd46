/* cufunc/dtype.h: the element types cufunc moves and computes with. No GPU needed; every string
 * returned belongs to cufunc (static). */
#ifndef CUFUNC_DTYPE_H
#define CUFUNC_DTYPE_H

#include <stddef.h>
#include "cufunc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The order is part of the ABI (kernel keys and the Python side store these numbers). */
typedef enum cf_dtype {
    CF_BOOL = 0,
    CF_INT8, CF_INT16, CF_INT32, CF_INT64,
    CF_UINT8, CF_UINT16, CF_UINT32, CF_UINT64,
    CF_FLOAT16, CF_FLOAT32, CF_FLOAT64,
    CF_COMPLEX64, CF_COMPLEX128,
    CF_NDTYPES
} cf_dtype;

/* Bytes per element; 0 for an invalid dtype. */
CF_API size_t cf_dtype_size(cf_dtype dt);
/* NumPy's name ("float32"); "invalid" for an invalid dtype. */
CF_API const char *cf_dtype_name(cf_dtype dt);
/* The C type name used in generated CUDA C ("float", "cf_complex64"); NULL if invalid. */
CF_API const char *cf_dtype_ctype(cf_dtype dt);
/* The one-character kind of __array_interface__ typestrs: 'b', 'i', 'u', 'f', 'c'. */
CF_API char cf_dtype_kind(cf_dtype dt);
/* Parse a NumPy name or abbreviation ("float32", "f4", "int64", "i8", "bool", "?", "complex64",
 * "c8"). CF_ERR_TYPE if unknown. */
CF_API cf_status cf_dtype_from_name(const char *name, cf_dtype *out);
/* Parse an array-interface typestr ("<f4", "|b1", "<c16"); big-endian is CF_ERR_TYPE. */
CF_API cf_status cf_dtype_from_typestr(const char *typestr, cf_dtype *out);
/* Write the little-endian typestr ("<f4", "|b1") into buf (at least 8 bytes). */
CF_API void cf_dtype_typestr(cf_dtype dt, char buf[8]);

#ifdef __cplusplus
}
#endif
#endif
