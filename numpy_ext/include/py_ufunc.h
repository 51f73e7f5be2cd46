/* py_ufunc.h: the UFunc type (py_ufunc.c), shared with the files that add methods to it (the
 * reductions, py_reduce.c). */
#ifndef CF_PY_UFUNC_H
#define CF_PY_UFUNC_H

#include "py_call.h"

#define UF_MAX_ARGS CF_PY_MAX_ARGS

typedef struct {
    CF_PY_FUNC_HEAD       /* nin, nout, name, doc, compiler, loops, the resolution cache (py_call.h);
                           * loops: (types tuple of np.dtype, source, fn_name, options, captures) */
    cf_ufunc *uf;
    PyObject *identity;   /* any object, or None */
    cf_accumulator accumulator; /* how reduce/accumulate choose their accumulator (loops.h) */
    vectorcallfunc vectorcall; /* calls skip the args tuple and kwargs dict (PEP 590) */
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
