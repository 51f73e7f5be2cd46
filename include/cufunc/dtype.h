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
    CF_BFLOAT16, /* appended (the order is ABI): ml_dtypes' / DLPack's bfloat16, kind 'f' */
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
/* Write the little-endian typestr ("<f4", "|b1") into buf (at least 8 bytes). bfloat16 has no
 * typestr of its own: "<V2", as NumPy writes ml_dtypes' bfloat16 (never parsed back as it). */
CF_API void cf_dtype_typestr(cf_dtype dt, char buf[8]);

/* Whether dt is one of the dtypes above. */
static inline int cf_dtype_valid(cf_dtype dt) { return (unsigned)dt < (unsigned)CF_NDTYPES; }

/* ---- casting rules (NumPy's, for the dtypes cufunc supports, native byte order) ---- */

/* NumPy's can_cast(from, to, 'safe'); with bfloat16, ml_dtypes' rules (bool, int8 and uint8 reach
 * it safely; it reaches float32, float64 and the complex types; float16 neither way). */
CF_API int cf_can_cast_safe(cf_dtype from, cf_dtype to);

/* NumPy's casting rules, in NumPy's order. */
typedef enum cf_casting {
    CF_CAST_NO, CF_CAST_EQUIV, CF_CAST_SAFE, CF_CAST_SAME_KIND, CF_CAST_UNSAFE
} cf_casting;
/* NumPy's can_cast(from, to, rule) for the dtypes cufunc supports (native byte order). */
CF_API int cf_can_cast(cf_dtype from, cf_dtype to, cf_casting rule);
/* "no", "equiv", "safe", "same_kind", "unsafe"; "?" for an invalid rule. */
CF_API const char *cf_casting_name(cf_casting rule);
/* NumPy's kind order of same_kind casts: bool 0 < unsigned 1 < signed 2 < float 3 < complex 4;
 * -1 for an invalid dtype. The one definition of the order of dtype kinds: every other order
 * (cf_dtype_nep50_kind, the loop search of cufunc/loops.h, the Python package through it) is
 * derived from this one. */
CF_API int cf_dtype_kind_order(cf_dtype dt);
/* The kind order of NEP 50, where signed and unsigned integers are one kind: bool 0 < integer 1
 * < float 2 < complex 3; -1 for an invalid dtype. */
CF_API int cf_dtype_nep50_kind(cf_dtype dt);
/* NEP 50: whether a weak Python scalar, classified as `weak` (bool, int64, float64 or
 * complex128: only its kind counts), reaches a loop type `to`: a type of its kind or a higher
 * one, never bool; signed and unsigned integers count as one kind. The caller checks that the
 * value fits. */
CF_API int cf_weak_reaches(cf_dtype weak, cf_dtype to);

#ifdef __cplusplus
}
#endif
#endif
