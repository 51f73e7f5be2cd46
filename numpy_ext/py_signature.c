/* py_signature.c: the C type-signature parser (include/cufunc/signature.h) from Python:
 *   parse_type_signature('Tuple(f4, i8)(f4[:, ::1])') ->
 *       (returns, args) with returns None (no return type written), [] (void) or a list, and each
 *       type a tuple (numpy dtype, ndim, layout) with layout 'A', 'C' or 'F' ('A' for scalars).
 * (parse_layout, for gufunc layouts, lives with the GUFunc type in py_gufunc.c, and reads its text
 * through cf_py_parse_layout_text here.)
 * Errors are cufunc.errors.SignatureError (a ValueError and a TypeError) with the position and a
 * caret under the place, for every fault of the text: syntax, unknown type names, an embedded NUL,
 * a lone surrogate. */
#include "py_signature.h"
#include "py_hooks.h"

/* The UTF-8 bytes of a signature string. Lone surrogates pass through ('surrogatepass') so that
 * the C parser reports them at their position like any other bad character, and the length goes
 * along so that it reports an embedded NUL rather than stopping there. */
static PyObject *signature_bytes(PyObject *arg, const char *what)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "a %s must be a string, not %.200s", what,
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    return PyUnicode_AsEncodedString(arg, "utf-8", "surrogatepass");
}

/* Raise the parser's error: SignatureError for a fault of the text, else the usual mapping. */
static void raise_parse_error(cf_status st)
{
    if (st == CF_ERR_INVALID || st == CF_ERR_TYPE) {
        PyObject *signature_error = cf_py_hook(CF_PY_HOOK_SignatureError);
        if (signature_error != NULL)
            PyErr_SetString(signature_error, cf_last_error());
    } else {
        cf_py_raise(st, NULL);
    }
}

int cf_py_parse_layout_text(PyObject *arg, cf_layout *L)
{
    PyObject *b = signature_bytes(arg, "gufunc signature");
    if (b == NULL)
        return -1;
    cf_status st = cf_parse_layout_n(PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b), L);
    Py_DECREF(b);
    if (st != CF_OK) {
        raise_parse_error(st);
        return -1;
    }
    return 0;
}

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
    PyObject *b = signature_bytes(arg, "type signature");
    if (b == NULL)
        return NULL;
    cf_type_signature sig;
    cf_status st = cf_parse_type_signature_n(PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b),
                                             &sig);
    Py_DECREF(b);
    if (st != CF_OK) {
        raise_parse_error(st);
        return NULL;
    }
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
