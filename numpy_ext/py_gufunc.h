/* py_gufunc.h: the GUFunc type (py_gufunc.c): the call path of @guvectorize gufuncs, in C. */
#ifndef CF_PY_GUFUNC_H
#define CF_PY_GUFUNC_H

#include "py_common.h"
#include "cufunc/gufunc.h"

#define GU_PY_MAX_ARGS 32
#define GU_PY_CACHE 8

typedef struct {
    PyObject_HEAD
    cf_gufunc *gu;
    int nin, nout;
    PyObject *name;       /* str */
    PyObject *doc;        /* str or None */
    PyObject *compiler;   /* callable(in_types, out_types) -> loop spec or None, or None */
    PyObject *loops;      /* list of (types tuple of np.dtype, arg_ndim tuple, source, fn_name) */
    PyObject *dict;
    PyObject *weakreflist;
    /* Last resolutions: input dtypes and weak flags -> loop. */
    struct {
        int valid;
        unsigned char key[2 * GU_PY_MAX_ARGS];
        int loop;
    } cache[GU_PY_CACHE];
    int cache_next;
} CfPyGUFunc;

extern PyTypeObject CfPyGUFunc_Type;
#define CfPyGUFunc_Check(o) PyObject_TypeCheck((o), &CfPyGUFunc_Type)

int cf_py_gufunc_init_module(PyObject *m);
extern PyMethodDef cf_py_gufunc_methods[];

#endif
