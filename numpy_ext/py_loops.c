/* py_loops.c: the loop resolver of the core (cufunc/loops.h: cf_loops_find, cf_loops_nep50,
 * cf_loops_no_match) for Python code that must know the loop a call would take without making
 * the call (cufunc/_loops.py: the kernel language's ufunc calls, the GPU twins, ufunc.at). The
 * Python package keeps no rule of its own.
 *   _loops_find(loops, nin, in_dtypes, weak=None, lazy=False, rule="numpy") -> int
 *   _loops_nep50(in_dtypes, weak) -> tuple of bool
 *   _loops_no_match(what, name, loops, nin, nout, in_dtypes, weak=None, rule="numpy") -> str
 * loops: a sequence of dtype tuples (inputs, then outputs); dtypes as anything np.dtype takes
 * (a NumPy dtype cufunc does not support makes its loop one no input takes);
 * weak[k]: 0 typed, 1 weak (a Python scalar; under Numba's rules any scalar), 2 a strong NumPy
 * scalar (rule "scalar-cast"); rule: "numpy", "numba-ufunc", "numba-gufunc", "scalar-cast". */
#include "py_loops.h"
#include "py_call.h"

#include <string.h>

static const char *const RULE_NAMES[] = {"numpy", "numba-ufunc", "numba-gufunc", "scalar-cast"};

static int parse_rule(const char *rule, cf_loops_mode *mode)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(rule, RULE_NAMES[i]) == 0) {
            *mode = (cf_loops_mode)i;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "rule must be one of ('numpy', 'numba-ufunc', 'numba-gufunc', "
                 "'scalar-cast'), not '%s'", rule);
    return -1;
}

/* n dtypes from a sequence into out[]. */
static int dtypes_from(PyObject *seq, int n, cf_dtype *out, const char *what)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(fast) < n) {
        PyErr_Format(PyExc_ValueError, "%s: %d dtypes needed", what, n);
        Py_DECREF(fast);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (cf_py_dtype_from_object(PySequence_Fast_GET_ITEM(fast, i), &out[i], NULL, what) < 0) {
            Py_DECREF(fast);
            return -1;
        }
    Py_DECREF(fast);
    return 0;
}

/* weak flags (None: all 0) into out[]. */
static int flags_from(PyObject *seq, int n, unsigned char *out)
{
    memset(out, 0, (size_t)n);
    if (seq == NULL || seq == Py_None)
        return 0;
    PyObject *fast = PySequence_Fast(seq, "weak must be a sequence");
    if (fast == NULL)
        return -1;
    for (int i = 0; i < n && i < PySequence_Fast_GET_SIZE(fast); i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        out[i] = (unsigned char)(v < 0 ? 0 : v > 2 ? 2 : v);
    }
    Py_DECREF(fast);
    return 0;
}

/* The loop table: nloops rows of nargs dtypes (owned by the caller: PyMem_Free). */
static cf_dtype *table_from(PyObject *loops, int nargs, int *nloops)
{
    PyObject *fast = PySequence_Fast(loops, "loops must be a sequence of dtype tuples");
    if (fast == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    cf_dtype *t = PyMem_Malloc(sizeof(cf_dtype) * (size_t)(n * nargs + 1));
    if (t == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t l = 0; l < n; l++) {
        PyObject *row = PySequence_Fast(PySequence_Fast_GET_ITEM(fast, l), "a loop");
        int ok = row != NULL && PySequence_Fast_GET_SIZE(row) >= nargs;
        if (row != NULL && !ok)
            PyErr_Format(PyExc_ValueError, "a loop: %d dtypes needed", nargs);
        for (int i = 0; ok && i < nargs; i++) {
            PyObject *o = PySequence_Fast_GET_ITEM(row, i);
            cf_dtype *d = &t[l * nargs + i];
            if (cf_py_dtype_from_object(o, d, NULL, "a loop") == 0)
                continue;
            /* a NumPy dtype cufunc has no loops for (NumPy's own tables: longdouble, object):
             * a type no input reaches, so the row never matches */
            PyArray_Descr *descr = NULL;
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            if (PyArray_DescrConverter(o, &descr) == NPY_SUCCEED) {
                Py_XDECREF(descr);
                Py_XDECREF(et);
                Py_XDECREF(ev);
                Py_XDECREF(tb);
                *d = (cf_dtype)-1;
            } else {
                PyErr_Clear();
                PyErr_Restore(et, ev, tb);
                ok = 0;
            }
        }
        Py_XDECREF(row);
        if (!ok) {
            PyMem_Free(t);
            Py_DECREF(fast);
            return NULL;
        }
    }
    Py_DECREF(fast);
    *nloops = (int)n;
    return t;
}

/* The query's parts shared by _loops_find and _loops_no_match. */
static int query_from(PyObject *in_dtypes, PyObject *weak, int nin, int nout, const char *rule,
                      cf_dtype *in, unsigned char *flags, cf_loops_query *q)
{
    if (nin < 0 || nout < 0 || nin + nout > CF_PY_MAX_ARGS) {
        PyErr_Format(PyExc_ValueError, "at most %d arguments", CF_PY_MAX_ARGS);
        return -1;
    }
    memset(q, 0, sizeof *q);
    if (parse_rule(rule, &q->mode) < 0 || dtypes_from(in_dtypes, nin, in, "in_dtypes") < 0 ||
        flags_from(weak, nin, flags) < 0)
        return -1;
    q->nin = nin;
    q->nout = nout;
    q->in = in;
    q->weak = flags;
    q->out_dtype = -1;
    q->casting = CF_CAST_SAFE;
    return 0;
}

static PyObject *py_loops_find(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"loops", "nin", "in_dtypes", "weak", "lazy", "rule", NULL};
    PyObject *loops, *in_dtypes, *weak = Py_None;
    int nin, lazy = 0, nloops = 0;
    const char *rule = "numpy";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OiO|Ops:_loops_find", kw, &loops, &nin,
                                     &in_dtypes, &weak, &lazy, &rule))
        return NULL;
    cf_dtype in[CF_PY_MAX_ARGS];
    unsigned char flags[CF_PY_MAX_ARGS];
    cf_loops_query q;
    if (query_from(in_dtypes, weak, nin, 0, rule, in, flags, &q) < 0)
        return NULL;
    q.lazy = lazy;
    /* the outputs are not read: each row is its inputs (the caller's tuples may be longer) */
    cf_dtype *t = table_from(loops, nin, &nloops);
    if (t == NULL)
        return NULL;
    int found = cf_loops_find(t, sizeof(cf_dtype) * (size_t)nin, nloops, &q);
    PyMem_Free(t);
    return PyLong_FromLong(found);
}

static PyObject *py_loops_nep50(PyObject *self, PyObject *args)
{
    PyObject *in_dtypes, *weak;
    if (!PyArg_ParseTuple(args, "OO:_loops_nep50", &in_dtypes, &weak))
        return NULL;
    Py_ssize_t n = PySequence_Size(in_dtypes);
    if (n < 0)
        return NULL;
    if (n > CF_PY_MAX_ARGS) {
        PyErr_Format(PyExc_ValueError, "at most %d inputs", CF_PY_MAX_ARGS);
        return NULL;
    }
    cf_dtype in[CF_PY_MAX_ARGS];
    unsigned char flags[CF_PY_MAX_ARGS];
    if (dtypes_from(in_dtypes, (int)n, in, "in_dtypes") < 0 || flags_from(weak, (int)n, flags) < 0)
        return NULL;
    cf_loops_nep50((int)n, in, flags);
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++)
        PyTuple_SET_ITEM(out, i, PyBool_FromLong(flags[i]));
    return out;
}

static PyObject *py_loops_no_match(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"what", "name", "loops", "nin", "nout", "in_dtypes", "weak", "rule",
                         NULL};
    const char *what, *name, *rule = "numpy";
    PyObject *loops, *in_dtypes, *weak = Py_None;
    int nin, nout, nloops = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ssOiiO|Os:_loops_no_match", kw, &what, &name,
                                     &loops, &nin, &nout, &in_dtypes, &weak, &rule))
        return NULL;
    cf_dtype in[CF_PY_MAX_ARGS];
    unsigned char flags[CF_PY_MAX_ARGS];
    cf_loops_query q;
    if (query_from(in_dtypes, weak, nin, nout, rule, in, flags, &q) < 0)
        return NULL;
    cf_dtype *t = table_from(loops, nin + nout, &nloops);
    if (t == NULL)
        return NULL;
    cf_loops_no_match(t, sizeof(cf_dtype) * (size_t)(nin + nout), nloops, &q, what, name);
    PyMem_Free(t);
    const char *msg = cf_last_error();
    PyObject *text = PyUnicode_FromString(msg ? msg : "");
    cf_clear_error();
    return text;
}

PyMethodDef cf_py_loops_methods[] = {
    {"_loops_find", (PyCFunction)(void (*)(void))py_loops_find, METH_VARARGS | METH_KEYWORDS,
     "_loops_find(loops, nin, in_dtypes, weak=None, lazy=False, rule='numpy'): the index of the "
     "loop a call with these inputs takes (cf_loops_find), -1 if none, -2 if ambiguous"},
    {"_loops_nep50", py_loops_nep50, METH_VARARGS,
     "_loops_nep50(in_dtypes, weak): which Python scalars stay weak (NEP 50, cf_loops_nep50)"},
    {"_loops_no_match", (PyCFunction)(void (*)(void))py_loops_no_match,
     METH_VARARGS | METH_KEYWORDS,
     "_loops_no_match(what, name, loops, nin, nout, in_dtypes, weak=None, rule='numpy'): the "
     "message of a call no loop takes (cf_loops_no_match)"},
    {NULL},
};
