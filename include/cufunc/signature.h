/* cufunc/signature.h: parsing the two kinds of signature users write. Pure C, no GPU.
 *
 * Type signatures, as Numba spells them:  "float32(float32, float32)", "f4(f4, f4)",
 *   "void(float32[:], float32[:, ::1])", "int64(int64,)", "Tuple(f4, i8)(f4)",
 *   "UniTuple(f8, 2)(f8)", or just the argument list "(f4, f4)".
 * Layout signatures of generalized ufuncs, as NumPy spells them: "(m,n),(n,p)->(m,p)", "(n)->()",
 *   "(3)->()" (a fixed size), "(),()->()", "(m,n)->(m),(n)" (several outputs); spaces anywhere.
 * Errors are CF_ERR_INVALID (CF_ERR_TYPE for an unknown type name) with a message that quotes the
 * text and puts a caret under the place where parsing stopped: "at position N" counts characters
 * (UTF-8 code points) from 0, a long text is cut to an excerpt around that place, and control
 * characters are shown as '?'. The text must be UTF-8 without NULs: the _n entry points take its
 * length, so that an embedded NUL is refused at its position rather than ending the text there.
 * Results are written into the caller's struct (nothing to free).
 */
#ifndef CUFUNC_SIGNATURE_H
#define CUFUNC_SIGNATURE_H

#include <stddef.h>
#include <stdint.h>
#include "cufunc/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CF_SIG_MAX_ARGS 32
#define CF_SIG_MAX_CORE_DIMS 32
#define CF_SIG_MAX_NAMES 64
#define CF_SIG_MAX_NAME_LEN 31  /* of a dimension name: cf_layout.names holds 32 bytes */

typedef struct cf_sig_type {
    cf_dtype dtype;
    int ndim;        /* 0 for a scalar */
    char layout;     /* arrays: 'A' (any strides), 'C' (last axis ::1), 'F' (first axis ::1) */
} cf_sig_type;

typedef struct cf_type_signature {
    int has_return;  /* 0: void or not written; 1: a return type (nreturn of them) */
    int explicit_void;
    int nreturn;     /* 1, or the size of a Tuple/UniTuple return */
    cf_sig_type ret[CF_SIG_MAX_ARGS];
    int nargs;
    cf_sig_type args[CF_SIG_MAX_ARGS];
} cf_type_signature;

CF_API cf_status cf_parse_type_signature(const char *text, cf_type_signature *out);
/* text: len bytes, not necessarily NUL-terminated. */
CF_API cf_status cf_parse_type_signature_n(const char *text, size_t len, cf_type_signature *out);

typedef struct cf_layout {
    int nin, nout;
    int ndims[CF_SIG_MAX_ARGS];                        /* core dims of each operand */
    int dim[CF_SIG_MAX_ARGS][CF_SIG_MAX_CORE_DIMS];    /* index into names[] */
    int nnames;
    char names[CF_SIG_MAX_NAMES][CF_SIG_MAX_NAME_LEN + 1];                  /* dimension names in order of appearance */
    int64_t fixed[CF_SIG_MAX_NAMES];                   /* a fixed size ("3"), or -1 */
    unsigned char in_inputs[CF_SIG_MAX_NAMES];         /* the name appears in some input */
} cf_layout;

CF_API cf_status cf_parse_layout(const char *text, cf_layout *out);
CF_API cf_status cf_parse_layout_n(const char *text, size_t len, cf_layout *out);

#ifdef __cplusplus
}
#endif
#endif
