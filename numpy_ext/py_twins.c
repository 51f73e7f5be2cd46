/* py_twins.c: DeviceArray's number slots, rich comparison and __array_ufunc__. Each forwards to a
 * Python function of cufunc._twins (its `_hooks` tuple, read once on first use), which calls the
 * GPU twin of the NumPy ufunc with NumPy's casting and NEP 50 scalars. The logic lives in Python
 * because it is NumPy's type resolution (ufunc.resolve_dtypes) and the twins are made there; the
 * C side only has to exist because a static type's slots cannot be set from Python. */
#include "py_twins.h"

enum {
    TW_ARRAY_UFUNC = 0,
    TW_ADD, TW_SUB, TW_MUL, TW_TRUEDIV, TW_FLOORDIV, TW_MOD, TW_POW, TW_LSHIFT, TW_RSHIFT,
    TW_AND, TW_OR, TW_XOR,
    TW_IADD, TW_ISUB, TW_IMUL, TW_ITRUEDIV, TW_IFLOORDIV, TW_IMOD, TW_IPOW, TW_ILSHIFT,
    TW_IRSHIFT, TW_IAND, TW_IOR, TW_IXOR,
    TW_NEG, TW_POS, TW_ABS, TW_INVERT,
    TW_LT, /* then LE, EQ, NE, GT, GE: Py_LT..Py_GE added to TW_LT */
    TW_BOOL = TW_LT + 6,
    TW_COUNT
};

static PyObject *hooks; /* the tuple cufunc._twins._hooks; a strong reference kept for good */

static PyObject *hook(int i)
{
    if (hooks == NULL) {
        PyObject *m = PyImport_ImportModule("cufunc._twins");
        if (m == NULL)
            return NULL;
        PyObject *h = PyObject_GetAttrString(m, "_hooks");
        Py_DECREF(m);
        if (h == NULL)
            return NULL;
        if (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) != TW_COUNT) {
            Py_DECREF(h);
            PyErr_SetString(PyExc_RuntimeError, "cufunc._twins._hooks does not match py_twins.c");
            return NULL;
        }
        hooks = h;
    }
    return PyTuple_GET_ITEM(hooks, i);
}

static PyObject *call1(int i, PyObject *a)
{
    PyObject *f = hook(i);
    return f ? PyObject_Vectorcall(f, &a, 1, NULL) : NULL;
}

static PyObject *call2(int i, PyObject *a, PyObject *b)
{
    PyObject *f = hook(i), *args[2] = {a, b};
    return f ? PyObject_Vectorcall(f, args, 2, NULL) : NULL;
}

static PyObject *call3(int i, PyObject *a, PyObject *b, PyObject *c)
{
    PyObject *f = hook(i), *args[3] = {a, b, c};
    return f ? PyObject_Vectorcall(f, args, 3, NULL) : NULL;
}

#define TW_BIN(fn, idx) static PyObject *fn(PyObject *a, PyObject *b) { return call2(idx, a, b); }
TW_BIN(tw_add, TW_ADD)
TW_BIN(tw_sub, TW_SUB)
TW_BIN(tw_mul, TW_MUL)
TW_BIN(tw_truediv, TW_TRUEDIV)
TW_BIN(tw_floordiv, TW_FLOORDIV)
TW_BIN(tw_mod, TW_MOD)
TW_BIN(tw_lshift, TW_LSHIFT)
TW_BIN(tw_rshift, TW_RSHIFT)
TW_BIN(tw_and, TW_AND)
TW_BIN(tw_or, TW_OR)
TW_BIN(tw_xor, TW_XOR)
TW_BIN(tw_iadd, TW_IADD)
TW_BIN(tw_isub, TW_ISUB)
TW_BIN(tw_imul, TW_IMUL)
TW_BIN(tw_itruediv, TW_ITRUEDIV)
TW_BIN(tw_ifloordiv, TW_IFLOORDIV)
TW_BIN(tw_imod, TW_IMOD)
TW_BIN(tw_ilshift, TW_ILSHIFT)
TW_BIN(tw_irshift, TW_IRSHIFT)
TW_BIN(tw_iand, TW_IAND)
TW_BIN(tw_ior, TW_IOR)
TW_BIN(tw_ixor, TW_IXOR)
#undef TW_BIN

static PyObject *tw_pow(PyObject *a, PyObject *b, PyObject *m) { return call3(TW_POW, a, b, m); }
static PyObject *tw_ipow(PyObject *a, PyObject *b, PyObject *m) { return call3(TW_IPOW, a, b, m); }
static PyObject *tw_neg(PyObject *a) { return call1(TW_NEG, a); }
static PyObject *tw_pos(PyObject *a) { return call1(TW_POS, a); }
static PyObject *tw_abs(PyObject *a) { return call1(TW_ABS, a); }
static PyObject *tw_invert(PyObject *a) { return call1(TW_INVERT, a); }

/* bool(d): NumPy's rule (the one element's truth; ValueError for more or none), since == is
 * element-wise now and `d in list` must not answer from the length */
static int tw_bool(PyObject *a)
{
    PyObject *r = call1(TW_BOOL, a);
    if (r == NULL)
        return -1;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    return t;
}

PyNumberMethods cf_py_twins_as_number = {
    .nb_add = tw_add, .nb_subtract = tw_sub, .nb_multiply = tw_mul,
    .nb_true_divide = tw_truediv, .nb_floor_divide = tw_floordiv, .nb_remainder = tw_mod,
    .nb_power = tw_pow, .nb_lshift = tw_lshift, .nb_rshift = tw_rshift, .nb_and = tw_and,
    .nb_or = tw_or, .nb_xor = tw_xor,
    .nb_inplace_add = tw_iadd, .nb_inplace_subtract = tw_isub, .nb_inplace_multiply = tw_imul,
    .nb_inplace_true_divide = tw_itruediv, .nb_inplace_floor_divide = tw_ifloordiv,
    .nb_inplace_remainder = tw_imod, .nb_inplace_power = tw_ipow,
    .nb_inplace_lshift = tw_ilshift, .nb_inplace_rshift = tw_irshift,
    .nb_inplace_and = tw_iand, .nb_inplace_or = tw_ior, .nb_inplace_xor = tw_ixor,
    .nb_negative = tw_neg, .nb_positive = tw_pos, .nb_absolute = tw_abs, .nb_invert = tw_invert,
    .nb_bool = tw_bool,
};

PyObject *cf_py_twins_richcompare(PyObject *a, PyObject *b, int op)
{
    if (op < Py_LT || op > Py_GE)
        Py_RETURN_NOTIMPLEMENTED;
    return call2(TW_LT + op, a, b);
}

/* __array_ufunc__(self, ufunc, method, *inputs, **kwargs) -> _twins.array_ufunc(self, ...) */
PyObject *cf_py_twins_array_ufunc(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    PyObject *f = hook(TW_ARRAY_UFUNC);
    if (f == NULL)
        return NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, n = nargs + nkw;
    PyObject *small[16], **all = small;
    if (n + 1 > 16 && (all = PyMem_Malloc(sizeof(PyObject *) * (size_t)(n + 1))) == NULL)
        return PyErr_NoMemory();
    all[0] = self;
    for (Py_ssize_t i = 0; i < n; i++)
        all[i + 1] = args[i];
    PyObject *r = PyObject_Vectorcall(f, all, (size_t)(nargs + 1), kwnames);
    if (all != small)
        PyMem_Free(all);
    return r;
}
