/* py_signature.h: gufunc layouts (py_signature.c) */
#ifndef CF_PY_SIGNATURE_H
#define CF_PY_SIGNATURE_H

#include "py_common.h"

/* Parse a gufunc layout given as a str into *L; -1 with cufunc.errors.SignatureError set. */
int cf_py_parse_layout_text(PyObject *arg, cf_layout *L);
extern PyMethodDef cf_py_signature_methods[];

#endif
