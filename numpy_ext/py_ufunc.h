/* py_ufunc.h: the UFunc type (py_ufunc.c), shared with the files that add methods to it (the
 * reductions, py_reduce.c). */
#ifndef CF_PY_UFUNC_H
#define CF_PY_UFUNC_H

#include "py_common.h"

#define UF_MAX_ARGS 32
#define UF_CACHE 8

typedef struct {
    PyObject_HEAD
    cf_ufunc *uf;
    int nin, nout;
    PyObject *name;       /* str */
    PyObject *doc;        /* str or None */
    PyObject *identity;   /* any object, or None */
    PyObject *compiler;   /* callable(in_types) -> (types, source, fn_name, options), or None */
    PyObject *loops;      /* list of (types tuple of np.dtype, source, fn_name, options) */
    PyObject *dict;
    PyObject *weakreflist;
    vectorcallfunc vectorcall; /* calls skip the args tuple and kwargs dict (PEP 590) */
    /* Last resolutions: input dtypes, weak flags and requested out dtype -> loop. */
    struct {
        int valid;
        unsigned char key[2 * UF_MAX_ARGS + 1];
        int loop;
    } cache[UF_CACHE];
    int cache_next;
    /* The last call the fast path launched (ufunc_fast): the serials of its DeviceArrays and what
     * the launch did. A call on the same DeviceArrays repeats that launch. nops 0: none. */
    struct {
        int nops;
        uint64_t serial[2 * UF_MAX_ARGS];
        cf_ufunc_record rec;
    } last;
} CfPyUFunc;

extern PyTypeObject CfPyUFunc_Type;
#define CfPyUFunc_Check(o) PyObject_TypeCheck((o), &CfPyUFunc_Type)

int cf_py_ufunc_init_module(PyObject *m);
extern PyMethodDef cf_py_ufunc_methods[];

#endif
