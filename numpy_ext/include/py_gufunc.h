/* py_gufunc.h: the GUFunc type (py_gufunc.c): the call path of @guvectorize gufuncs, in C. */
#ifndef CF_PY_GUFUNC_H
#define CF_PY_GUFUNC_H

#include "py_call.h"
#include "py_signature.h"
#include "cufunc/gufunc.h"

#define GU_PY_MAX_ARGS CF_PY_MAX_ARGS

typedef struct {
    CF_PY_FUNC_HEAD       /* nin, nout, name, doc, compiler, loops, the resolution cache (py_call.h);
                           * loops: (types tuple of np.dtype, arg_ndim tuple, source, fn_name,
                           * captures) */
    cf_gufunc *gu;
} CfPyGUFunc;

extern PyTypeObject CfPyGUFunc_Type;
#define CfPyGUFunc_Check(o) PyObject_TypeCheck((o), &CfPyGUFunc_Type)

int cf_py_gufunc_init_module(PyObject *m);
extern PyMethodDef cf_py_gufunc_methods[];

#endif
