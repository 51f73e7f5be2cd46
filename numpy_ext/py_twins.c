/* py_twins.c: DeviceArray's number slots, rich comparison and __array_ufunc__. Each forwards to a
 * Python function of cufunc._twins (its `_hooks` tuple, a hook the package registers), which calls
 * the GPU twin of the NumPy ufunc with NumPy's casting and NEP 50 scalars. The logic lives in Python
 * because it is NumPy's type resolution (ufunc.resolve_dtypes) and the twins are made there; the
 * C side only has to exist because a static type's slots cannot be set from Python. */
#include "py_twins.h"
#include "py_devicearray.h"
#include "py_hooks.h"

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

/* The twins' hooks (py_hooks.h), borrowed: twins_hooks, the tuple of functions in the order of
 * the enum above; NULL with an exception when missing or of another shape. */
static PyObject *hooks(void)
{
    PyObject *h = cf_py_hook(CF_PY_HOOK_twins_hooks);
    if (h != NULL && (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) != TW_COUNT)) {
        PyErr_SetString(PyExc_RuntimeError, "cufunc._twins._hooks does not match py_twins.c");
        return NULL;
    }
    return h;
}

static PyObject *hook(int i)
{
    PyObject *h = hooks();
    return h ? PyTuple_GET_ITEM(h, i) : NULL;
}

/* ---- the short-cut for calls seen before ------------------------------------------------------
 * The Python hooks resolve a call on DeviceArrays once per (ufunc, input dtypes) and remember the
 * twin in _twins._FAST (key: (ufunc, dtype, ...), value: (twin, extra keywords)). A repeated call
 * with no extra keywords is looked up and made from here, without the Python frames between (they
 * cost as much as the call itself). Anything else goes to the hooks, which stay the one place
 * where a call is resolved. _FAST is the hook twins_fast, _twins._hook_ufuncs (the ufunc of each
 * hook, or None) the hook twins_hook_ufuncs. */
static PyObject *fast_table(void)
{
    PyObject *t = cf_py_hook(CF_PY_HOOK_twins_fast);
    if (t != NULL && !PyDict_CheckExact(t)) {
        PyErr_SetString(PyExc_RuntimeError, "cufunc._twins._FAST does not match py_twins.c");
        return NULL;
    }
    return t;
}

/* The ufunc of hook i (borrowed; None for hooks of no ufunc). NULL: error. */
static PyObject *hook_ufunc(int i)
{
    PyObject *u = cf_py_hook(CF_PY_HOOK_twins_hook_ufuncs);
    if (u != NULL && (!PyTuple_Check(u) || PyTuple_GET_SIZE(u) != TW_COUNT)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cufunc._twins._hook_ufuncs does not match py_twins.c");
        return NULL;
    }
    return u ? PyTuple_GET_ITEM(u, i) : NULL;
}

/* The twin a call of `ufunc` on these n operands was resolved to (borrowed), when every operand is
 * a DeviceArray (exactly) and the resolution needs no extra keyword; NULL otherwise (no error
 * unless one is set). */
static PyObject *fast_twin(PyObject *table, PyObject *ufunc, PyObject *const *ops,
                           Py_ssize_t n)
{
    if (n < 1 || n > 3 || ufunc == Py_None)
        return NULL;
    PyObject *key = PyTuple_New(n + 1);
    if (key == NULL)
        return NULL;
    Py_INCREF(ufunc);
    PyTuple_SET_ITEM(key, 0, ufunc);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!Py_IS_TYPE(ops[i], &CfPyDeviceArray_Type)) {
            Py_DECREF(key);
            return NULL;
        }
        PyObject *d = (PyObject *)((CfPyDeviceArray *)ops[i])->descr;
        Py_INCREF(d);
        PyTuple_SET_ITEM(key, i + 1, d);
    }
    PyObject *ent = PyDict_GetItemWithError(table, key);
    Py_DECREF(key);
    if (ent == NULL || !PyTuple_Check(ent) || PyTuple_GET_SIZE(ent) != 2)
        return NULL;
    PyObject *extra = PyTuple_GET_ITEM(ent, 1);
    if (!PyDict_Check(extra) || PyDict_GET_SIZE(extra) != 0)
        return NULL;
    return PyTuple_GET_ITEM(ent, 0);
}

/* Operator i on DeviceArrays: the twin directly when the call was seen before, else the hook. */
static PyObject *call_fast(int i, PyObject *const *ops, Py_ssize_t n)
{
    PyObject *table = fast_table(), *ufunc = table ? hook_ufunc(i) : NULL;
    if (ufunc == NULL)
        return NULL;
    PyObject *tw = fast_twin(table, ufunc, ops, n);
    if (tw != NULL)
        return PyObject_Vectorcall(tw, ops, (size_t)n, NULL);
    if (PyErr_Occurred())
        return NULL;
    PyObject *f = hook(i);
    return f ? PyObject_Vectorcall(f, ops, (size_t)n, NULL) : NULL;
}

static PyObject *call1(int i, PyObject *a)
{
    return call_fast(i, &a, 1);
}

static PyObject *call2(int i, PyObject *a, PyObject *b)
{
    PyObject *args[2] = {a, b};
    return call_fast(i, args, 2);
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
    PyObject *table = fast_table();
    if (table == NULL)
        return NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, n = nargs + nkw;
    /* np.f(d, ...) and np.f(d, ..., out=o) seen before: straight to the twin (the short-cut of
     * _twins.array_ufunc, without its frame) */
    static PyObject *str_call, *str_out;
    if (str_call == NULL && ((str_call = PyUnicode_InternFromString("__call__")) == NULL ||
                             (str_out = PyUnicode_InternFromString("out")) == NULL))
        return NULL;
    if (nargs >= 3 && PyUnicode_Check(args[1]) &&
        (args[1] == str_call || PyUnicode_Compare(args[1], str_call) == 0) &&
        (nkw == 0 || (nkw == 1 && PyTuple_GET_ITEM(kwnames, 0) == str_out))) {
        PyObject *out = nkw ? args[nargs] : NULL;
        if (out == NULL || (PyTuple_CheckExact(out) && PyTuple_GET_SIZE(out) == 1 &&
                            Py_IS_TYPE(PyTuple_GET_ITEM(out, 0), &CfPyDeviceArray_Type))) {
            PyObject *tw = fast_twin(table, args[0], args + 2, nargs - 2);
            if (tw != NULL) {
                PyObject *ops[4];
                Py_ssize_t k = nargs - 2;
                for (Py_ssize_t i = 0; i < k; i++)
                    ops[i] = args[2 + i];
                if (out == NULL)
                    return PyObject_Vectorcall(tw, ops, (size_t)k, NULL);
                ops[k] = PyTuple_GET_ITEM(out, 0);
                static PyObject *kw_out;
                if (kw_out == NULL && (kw_out = PyTuple_Pack(1, str_out)) == NULL)
                    return NULL;
                return PyObject_Vectorcall(tw, ops, (size_t)k, kw_out);
            }
            if (PyErr_Occurred())
                return NULL;
        }
    }
    PyObject *f = hook(TW_ARRAY_UFUNC);
    if (f == NULL)
        return NULL;
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
