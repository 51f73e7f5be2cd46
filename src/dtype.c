/* dtype.c: the table of element types (one row per cf_dtype, in enum order) and the casting
 * rules between them: the one home of NumPy's can_cast and of the kind order, for every engine
 * (ufunc.c, gufunc.c, reduce.c, loopfn.c's loop search) and for numpy_ext (weak scalars). */
#include <string.h>

#include "cufunc/dtype.h"
#include "error.h"

typedef struct dtype_info {
    const char *name;   /* NumPy's name */
    const char *abbrev; /* NumPy's sized code, as in typestrs without the byte order */
    const char *ctype;  /* type name in generated CUDA C (templates/cufunc/runtime.cuh) */
    char kind;
    size_t size;
} dtype_info;

static const dtype_info table[CF_NDTYPES] = {
    [CF_BOOL] = {"bool", "b1", "cf_bool", 'b', 1},
    [CF_INT8] = {"int8", "i1", "cf_int8", 'i', 1},
    [CF_INT16] = {"int16", "i2", "cf_int16", 'i', 2},
    [CF_INT32] = {"int32", "i4", "cf_int32", 'i', 4},
    [CF_INT64] = {"int64", "i8", "cf_int64", 'i', 8},
    [CF_UINT8] = {"uint8", "u1", "cf_uint8", 'u', 1},
    [CF_UINT16] = {"uint16", "u2", "cf_uint16", 'u', 2},
    [CF_UINT32] = {"uint32", "u4", "cf_uint32", 'u', 4},
    [CF_UINT64] = {"uint64", "u8", "cf_uint64", 'u', 8},
    [CF_FLOAT16] = {"float16", "f2", "cf_float16", 'f', 2},
    [CF_FLOAT32] = {"float32", "f4", "cf_float32", 'f', 4},
    [CF_FLOAT64] = {"float64", "f8", "cf_float64", 'f', 8},
    [CF_COMPLEX64] = {"complex64", "c8", "cf_complex64", 'c', 8},
    [CF_COMPLEX128] = {"complex128", "c16", "cf_complex128", 'c', 16},
    [CF_BFLOAT16] = {"bfloat16", "bf16", "cf_bfloat16", 'f', 2},
};

size_t cf_dtype_size(cf_dtype dt) { return cf_dtype_valid(dt) ? table[dt].size : 0; }
const char *cf_dtype_name(cf_dtype dt) { return cf_dtype_valid(dt) ? table[dt].name : "invalid"; }
const char *cf_dtype_ctype(cf_dtype dt) { return cf_dtype_valid(dt) ? table[dt].ctype : NULL; }
char cf_dtype_kind(cf_dtype dt) { return cf_dtype_valid(dt) ? table[dt].kind : '?'; }

cf_status cf_dtype_from_name(const char *name, cf_dtype *out)
{
    if (!name || !out)
        return cf_error_set(CF_ERR_INVALID, "cf_dtype_from_name: NULL argument");
    /* NumPy's single-character codes for the fixed-size types on LP64 platforms. */
    static const struct {
        const char *code;
        cf_dtype dt;
    } codes[] = {{"?", CF_BOOL},     {"bool_", CF_BOOL},     {"b", CF_INT8},       {"h", CF_INT16},
                 {"i", CF_INT32},    {"l", CF_INT64},        {"q", CF_INT64},      {"B", CF_UINT8},
                 {"H", CF_UINT16},   {"I", CF_UINT32},       {"L", CF_UINT64},     {"Q", CF_UINT64},
                 {"e", CF_FLOAT16},  {"f", CF_FLOAT32},      {"d", CF_FLOAT64},    {"F", CF_COMPLEX64},
                 {"D", CF_COMPLEX128}, {"half", CF_FLOAT16}, {"single", CF_FLOAT32},
                 {"double", CF_FLOAT64}, {"intp", CF_INT64}, {"uintp", CF_UINT64}};
    for (int i = 0; i < CF_NDTYPES; i++)
        if (strcmp(name, table[i].name) == 0 || strcmp(name, table[i].abbrev) == 0) {
            *out = (cf_dtype)i;
            return CF_OK;
        }
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (strcmp(name, codes[i].code) == 0) {
            *out = codes[i].dt;
            return CF_OK;
        }
    return cf_error_set(CF_ERR_TYPE, "unsupported dtype '%s': cufunc supports bool, int8..int64, "
                        "uint8..uint64, float16, bfloat16, float32, float64, complex64, complex128",
                        name);
}

cf_status cf_dtype_from_typestr(const char *typestr, cf_dtype *out)
{
    if (!typestr || !out)
        return cf_error_set(CF_ERR_INVALID, "cf_dtype_from_typestr: NULL argument");
    char order = typestr[0];
    if (order != '<' && order != '|' && order != '=')
        return cf_error_set(CF_ERR_TYPE, "unsupported typestr '%s': only little-endian data is "
                            "supported", typestr);
    for (int i = 0; i < CF_NDTYPES; i++)
        if (i != CF_BFLOAT16 && strcmp(typestr + 1, table[i].abbrev) == 0) {
            *out = (cf_dtype)i;
            return CF_OK;
        }
    return cf_error_set(CF_ERR_TYPE, "unsupported typestr '%s': cufunc supports bool, integers, "
                        "float16/32/64 and complex64/128", typestr);
}

void cf_dtype_typestr(cf_dtype dt, char buf[8])
{
    if (!cf_dtype_valid(dt)) {
        buf[0] = '\0';
        return;
    }
    buf[0] = table[dt].size == 1 ? '|' : '<';
    strcpy(buf + 1, dt == CF_BFLOAT16 ? "V2" : table[dt].abbrev);
}

/* ---- casting ------------------------------------------------------------------------------- */

int cf_can_cast_safe(cf_dtype from, cf_dtype to)
{
    if (!cf_dtype_valid(from) || !cf_dtype_valid(to))
        return 0;
    if (from == to || from == CF_BOOL)
        return 1;
    if (to == CF_BFLOAT16) /* ml_dtypes: only bool, int8 and uint8 reach bfloat16 safely */
        return from == CF_INT8 || from == CF_UINT8;
    if (from == CF_BFLOAT16)
        return to == CF_FLOAT32 || to == CF_FLOAT64 || to == CF_COMPLEX64 || to == CF_COMPLEX128;
    char kf = cf_dtype_kind(from), kt = cf_dtype_kind(to);
    size_t sf = cf_dtype_size(from), st = cf_dtype_size(to);
    switch (kf) {
    case 'i':
        if (kt == 'i')
            return st >= sf;
        if (kt == 'f') /* int8 -> f2, int16 -> f4, int32/int64 -> f8 */
            return sf == 8 ? st == 8 : st > sf;
        if (kt == 'c')
            return sf == 8 ? st == 16 : st > 2 * sf;
        return 0;
    case 'u':
        if (kt == 'u')
            return st >= sf;
        if (kt == 'i')
            return st > sf;
        if (kt == 'f')
            return sf == 8 ? st == 8 : st > sf;
        if (kt == 'c')
            return sf == 8 ? st == 16 : st > 2 * sf;
        return 0;
    case 'f':
        if (kt == 'f')
            return st >= sf;
        if (kt == 'c')
            return st >= 2 * sf;
        return 0;
    case 'c':
        return kt == 'c' && st >= sf;
    default:
        return 0;
    }
}

int cf_dtype_kind_order(cf_dtype t)
{
    switch (cf_dtype_kind(t)) {
    case 'b': return 0;
    case 'u': return 1;
    case 'i': return 2;
    case 'f': return 3;
    case 'c': return 4;
    default: return -1;
    }
}

int cf_dtype_nep50_kind(cf_dtype t)
{
    /* NEP 50: signed and unsigned integers are one kind for a Python int */
    int k = cf_dtype_kind_order(t);
    return k >= 2 ? k - 1 : k;
}

int cf_weak_reaches(cf_dtype weak, cf_dtype to)
{
    if (!cf_dtype_valid(weak) || !cf_dtype_valid(to) || to == CF_BOOL)
        return 0;
    return cf_dtype_nep50_kind(to) >= cf_dtype_nep50_kind(weak);
}

int cf_can_cast(cf_dtype from, cf_dtype to, cf_casting rule)
{
    if (!cf_dtype_valid(from) || !cf_dtype_valid(to))
        return 0;
    if (from == to)
        return 1;
    switch (rule) {
    case CF_CAST_NO:
    case CF_CAST_EQUIV:
        return 0;
    case CF_CAST_SAFE:
        return cf_can_cast_safe(from, to);
    case CF_CAST_SAME_KIND: /* ml_dtypes: every type reaches bfloat16 (complex too), bfloat16 only
                             * what it reaches safely (not float16) */
        if (to == CF_BFLOAT16 || from == CF_BFLOAT16)
            return to == CF_BFLOAT16 || cf_can_cast_safe(from, to);
        return cf_can_cast_safe(from, to) || cf_dtype_kind_order(from) <= cf_dtype_kind_order(to);
    case CF_CAST_UNSAFE:
        return 1;
    default:
        return 0;
    }
}

const char *cf_casting_name(cf_casting rule)
{
    static const char *const names[] = {"no", "equiv", "safe", "same_kind", "unsafe"};
    return (unsigned)rule <= CF_CAST_UNSAFE ? names[rule] : "?";
}
