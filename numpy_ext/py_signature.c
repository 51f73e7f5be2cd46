/* py_signature.c: the C type-signature parser (include/cufunc/signature.h) from Python:
 *   parse_type_signature('Tuple(f4, i8)(f4[:, ::1])') ->
 *       (returns, args) with returns None (no return type written), [] (void) or a list, and each
 *       type a tuple (numpy dtype, ndim, layout) with layout 'A', 'C' or 'F' ('A' for scalars).
 * (parse_layout, for gufunc layouts, lives with the GUFunc type in py_gufunc.c.)
 * Errors are ValueError (TypeError for an unknown type name) with a caret under the place. */
#include "py_common.h"

static PyObject *type_tuple(const cf_sig_type *t)
{
    PyArray_Descr *d = cf_py_descr_from_dtype(t->dtype);
    if (d == NULL)
        return NULL;
    char layout[2] = {t->layout ? t->layout : 'A', 0};
    return Py_BuildValue("(Nis)", (PyObject *)d, t->ndim, layout);
}

static PyObject *type_list(const cf_sig_type *ts, int n)
{
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        PyObject *t = type_tuple(&ts[i]);
        if (t == NULL) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, t);
    }
    return l;
}

static PyObject *py_parse_type_signature(PyObject *m, PyObject *arg)
{
    const char *text = PyUnicode_AsUTF8(arg);
    if (text == NULL)
        return NULL;
    cf_type_signature sig;
    cf_status st = cf_parse_type_signature(text, &sig);
    if (st != CF_OK)
        return cf_py_raise(st, NULL);
    PyObject *ret;
    if (sig.has_return)
        ret = type_list(sig.ret, sig.nreturn);
    else if (sig.explicit_void)
        ret = PyList_New(0);
    else
        ret = Py_NewRef(Py_None);
    if (ret == NULL)
        return NULL;
    PyObject *args = type_list(sig.args, sig.nargs);
    if (args == NULL) {
        Py_DECREF(ret);
        return NULL;
    }
    return Py_BuildValue("(NN)", ret, args);
}

PyMethodDef cf_py_signature_methods[] = {
    {"parse_type_signature", py_parse_type_signature, METH_O,
     "parse_type_signature(text) -> (returns, args); see numpy_ext/py_signature.c."},
    {NULL},
};

int cf_py_signature_init_module(PyObject *m) { return 0; }
