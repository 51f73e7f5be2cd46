/* py_reduce.c: reductions from Python, in C (the engine is include/cufunc/reduce.h).
 *
 *   - cufunc._core.Reducer: the type behind cuda.reduce / cuda.Reduce (cufunc/reduction.py
 *     subclasses it). Its Python `compiler` translates the user's binary function for a dtype
 *     once; every call after that is C: arguments, the device view, one kernel launch, and for a
 *     host result one 1-element copy back.
 *   - UFunc.reduce and UFunc.accumulate (cf_py_ufunc_reduce / cf_py_ufunc_accumulate, installed in
 *     the UFunc type's method table by py_ufunc.c): NumPy's arguments and meaning. The ufunc's
 *     loop for the accumulator type supplies the device function; each ufunc keeps its reducer
 *     (compiled kernels) in its instance dict.
 *
 * Placement as the ufunc call does it: any device operand gives device results and no waiting;
 * host operands are copied over and the result comes back as NumPy (a NumPy scalar for a 0-d
 * result). */
#include "py_reduce.h"

#include <string.h>

#include "cufunc/reduce.h"
#include "py_args.h"
#include "py_capture.h"
#include "py_ufunc.h"

/* ---- arguments ------------------------------------------------------------------------------ */

enum { R_DEVICE = 0, R_HOST = 1 };

typedef struct {
    int kind;
    cf_array view;  /* device view; for host arrays the host layout (data = host pointer) */
    PyObject *keep; /* the device owner, or the host ndarray */
} red_arg;

static void arg_clear(red_arg *a) { Py_CLEAR(a->keep); }

/* What a ufunc call takes, classified by the call's own rule (cf_py_arg_classify: device arrays,
 * __cuda_array_interface__ and __dlpack__ objects as device views, anything else through
 * numpy.asarray); a scalar is reduced as the 0-d array NumPy makes of it (strong: reduce's operand
 * is an array, np.add.reduce(2.0) is float64). */
static int arg_classify(PyObject *obj, red_arg *a, const char *argname)
{
    memset(a, 0, sizeof *a);
    cf_py_arg c;
    if (cf_py_arg_classify(obj, &c, argname) < 0) {
        cf_py_arg_clear(&c);
        return -1;
    }
    if (c.kind == CF_PY_ARG_SCALAR) {
        /* a 0-d array is kept as it is; a Python or NumPy scalar becomes one */
        PyObject *arr = c.keep ? c.keep : PyArray_FROM_O(obj);
        c.keep = NULL;
        if (arr == NULL)
            return -1;
        if (cf_py_dtype_from_descr(PyArray_DESCR((PyArrayObject *)arr), &c.dtype, argname) < 0) {
            Py_DECREF(arr); /* e.g. a Python int beyond 64 bits: an object array */
            return -1;
        }
        c.keep = arr;
        cf_py_arg_host_view(&c, (PyArrayObject *)arr);
    }
    a->kind = c.kind == CF_PY_ARG_DEVICE ? R_DEVICE : R_HOST;
    a->view = c.view;
    a->keep = c.keep; /* the reference moves over */
    return 0;
}

/* Copy a host argument to a new C-contiguous device array; its view becomes the device view. */
static int arg_upload(red_arg *a, int device, PyObject *stream, cf_stream *s)
{
    PyArrayObject *c = (PyArrayObject *)PyArray_FromAny(a->keep, NULL, 0, 0,
                                                        NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED,
                                                        NULL);
    if (c == NULL)
        return -1;
    PyObject *dev = cf_py_devicearray_alloc(a->view.ndim, a->view.shape, a->view.dtype, 'C',
                                            device, stream);
    if (dev == NULL) {
        Py_DECREF(c);
        return -1;
    }
    cf_status st = CF_OK;
    uint64_t dst = ((CfPyDeviceArray *)dev)->view.data;
    size_t n = (size_t)PyArray_NBYTES(c);
    Py_BEGIN_ALLOW_THREADS
    st = cf_memcpy_htod(s, dst, PyArray_DATA(c), n, 0);
    Py_END_ALLOW_THREADS
    Py_DECREF(c);
    if (st != CF_OK) {
        Py_DECREF(dev);
        return cf_py_fail(st, "copying an input to the device");
    }
    a->view = ((CfPyDeviceArray *)dev)->view;
    Py_SETREF(a->keep, dev);
    a->kind = R_DEVICE;
    return 0;
}

/* The bytes of `value` converted to dtype dt as NumPy's astype does (bytes: 16). */
static int value_bytes(PyObject *value, cf_dtype dt, unsigned char *bytes)
{
    PyArray_Descr *d = cf_py_descr_from_dtype(dt);
    if (d == NULL)
        return -1;
    /* PyArray_FromAny steals the reference to d */
    PyObject *arr = PyArray_FromAny(value, d, 0, 0, NPY_ARRAY_CARRAY | NPY_ARRAY_FORCECAST, NULL);
    if (arr == NULL)
        return -1;
    if (PyArray_SIZE((PyArrayObject *)arr) != 1) {
        Py_DECREF(arr);
        PyErr_SetString(PyExc_ValueError, "the initial value must be a scalar");
        return -1;
    }
    memset(bytes, 0, 16);
    memcpy(bytes, PyArray_DATA((PyArrayObject *)arr), cf_dtype_size(dt));
    Py_DECREF(arr);
    return 0;
}

static int shapes_equal(int n1, const int64_t *s1, int n2, const int64_t *s2)
{
    if (n1 != n2)
        return 0;
    for (int k = 0; k < n1; k++)
        if (s1[k] != s2[k])
            return 0;
    return 1;
}

/* The device a call runs on, its stream, and uploads of host arguments. */
typedef struct {
    int device;
    PyObject *resolved; /* a Stream or None (owned) */
    PyObject *for_arrays; /* borrowed: NULL for the default stream */
    cf_stream *s;
} red_place;

static int place(red_place *pl, int device, PyObject *stream, const char *what)
{
    pl->resolved = NULL;
    if (stream && cf_py_stream_check(stream, "stream") < 0)
        return -1;
    if (cf_py_cuda_init(what) < 0)
        return -1;
    if (device < 0) {
        if (stream && stream != Py_None && cf_py_stream_device(stream, &device, "stream") < 0)
            return -1;
        if (device < 0 && cf_py_current_device(&device, what) < 0)
            return -1;
    }
    pl->device = device;
    pl->resolved = cf_py_stream_resolve(stream ? stream : Py_None, device, "stream");
    if (pl->resolved == NULL)
        return -1;
    if (cf_py_stream_get(pl->resolved, device, &pl->s) < 0)
        return -1;
    pl->for_arrays = pl->resolved == Py_None ? NULL : pl->resolved;
    return 0;
}

/* Replace a device argument by a C-contiguous copy of it, ordered on the call's stream: an operand
 * that shares memory with the output (cf_array_needs_copy), which NumPy defines as if it were
 * copied before the output is written. The element-wise call's copy does the work. */
static int arg_copy(red_arg *a, const red_place *pl)
{
    cf_py_arg t;
    t.kind = CF_PY_ARG_DEVICE;
    cf_py_view_copy(&t.view, &a->view);
    t.dtype = a->view.dtype;
    t.weak = 0;
    t.value = NULL;
    t.keep = a->keep; /* the reference moves over and back: the copy replaces it on success */
    a->keep = NULL;
    int r = cf_py_arg_copy(&t, pl->device, pl->for_arrays);
    a->keep = t.keep;
    if (r == 0)
        cf_py_view_copy(&a->view, &t.view);
    return r;
}

/* A device operand must be on the call's device; the call is then ordered after the work that
 * produced it (and, for an operand it `writes`, later work after the call: py_common.h). */
static int same_device(const red_arg *a, const red_place *pl, int writes, const char *what,
                       const char *argname)
{
    if (a->kind == R_DEVICE && a->view.device != pl->device) {
        PyErr_Format(PyExc_ValueError, "%s: %s is on device %d, but the call runs on device %d",
                     what, argname, a->view.device, pl->device);
        return -1;
    }
    if (a->kind == R_DEVICE && a->keep != NULL)
        return cf_py_order_operand(a->keep, pl->device, pl->resolved, pl->s, writes);
    return 0;
}

/* ---- the Reducer type (cuda.reduce) --------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    cf_reducer *r;
    PyObject *name;     /* str */
    PyObject *compiler; /* callable(np.dtype) -> (source, fn_name, options[, captures]), or None */
    PyObject *captures; /* list: the captured device arrays of its loops, kept alive (or NULL) */
    PyObject *dict;
    PyObject *weakreflist;
} CfPyReducer;

static PyTypeObject CfPyReducer_Type;

/* spec = (source, fn_name[, options[, captures]]) for accumulator type dt (captures: the loop's
 * captured device arrays, py_capture.h). The capture items are appended to the list *keep (made
 * when NULL), whose owner keeps the arrays alive; keep is NULL when the caller keeps them. */
static int reducer_add_spec(cf_reducer *r, cf_dtype dt, PyObject *spec, int *loop,
                            PyObject **keep)
{
    PyObject *source, *fn_name, *options = NULL, *captures = NULL;
    if (!PyTuple_Check(spec) ||
        !PyArg_ParseTuple(spec, "UU|OO:reducer loop", &source, &fn_name, &options, &captures))
        return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_TypeError, "a reducer loop is "
                                                       "(source, fn_name, options[, captures])"),
                                        -1);
    const char *opts[64];
    int nopts = 0;
    PyObject *seq = NULL;
    if (options != NULL && options != Py_None) {
        seq = PySequence_Fast(options, "reducer loop: options must be a sequence of str");
        if (seq == NULL)
            return -1;
        if (PySequence_Fast_GET_SIZE(seq) > 64) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_ValueError, "reducer loop: at most 64 options");
            return -1;
        }
        nopts = (int)PySequence_Fast_GET_SIZE(seq);
        for (int i = 0; i < nopts; i++)
            if ((opts[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i))) == NULL) {
                Py_DECREF(seq);
                return -1;
            }
    } else {
        opts[0] = "--fmad=false"; /* the kernel language's default: no contraction into FMAs */
        nopts = 1;
    }
    const char *src = PyUnicode_AsUTF8(source), *fn = PyUnicode_AsUTF8(fn_name);
    cf_py_captures cap;
    if (src == NULL || fn == NULL || cf_py_captures_read(captures, &cap, "reduce") < 0) {
        Py_XDECREF(seq);
        return -1;
    }
    /* kept before the loop exists, so that no kernel can outlive the arrays it reads */
    int kept = 0;
    if (keep && cap.n > 0) {
        if ((*keep == NULL && (*keep = PyList_New(0)) == NULL) ||
            PyList_Append(*keep, cap.items) < 0) {
            cf_py_captures_clear(&cap);
            Py_XDECREF(seq);
            return -1;
        }
        kept = 1;
    }
    cf_status st = cf_reducer_add_loop_globals(r, dt, src, fn, opts, nopts, cap.globals, cap.n,
                                               loop);
    Py_XDECREF(seq);
    cf_py_captures_clear(&cap);
    if (st != CF_OK) {
        if (kept)
            PyList_SetSlice(*keep, PyList_GET_SIZE(*keep) - 1, PyList_GET_SIZE(*keep), NULL);
        return cf_py_fail(st, "reduce");
    }
    return 0;
}

static int reducer_loop(CfPyReducer *self, cf_dtype dt, int *loop)
{
    *loop = cf_reducer_find_loop(self->r, dt);
    if (*loop >= 0)
        return 0;
    if (self->compiler == NULL || self->compiler == Py_None) {
        PyErr_Format(PyExc_TypeError, "reduce '%U' has no loop for %s", self->name,
                     cf_dtype_name(dt));
        return -1;
    }
    PyObject *descr = (PyObject *)cf_py_descr_from_dtype(dt);
    if (descr == NULL)
        return -1;
    PyObject *spec = PyObject_CallOneArg(self->compiler, descr);
    Py_DECREF(descr);
    if (spec == NULL)
        return -1;
    int r = reducer_add_spec(self->r, dt, spec, loop, &self->captures);
    Py_DECREF(spec);
    return r;
}

static PyObject *reducer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"name", "compiler", NULL};
    PyObject *name, *compiler = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U|O:Reducer", kw, &name, &compiler))
        return NULL;
    if (compiler != Py_None && !PyCallable_Check(compiler)) {
        PyErr_SetString(PyExc_TypeError, "Reducer: compiler must be callable or None");
        return NULL;
    }
    const char *cname = PyUnicode_AsUTF8(name);
    if (cname == NULL)
        return NULL;
    CfPyReducer *self = (CfPyReducer *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    cf_status st = cf_reducer_create(cname, &self->r);
    if (st != CF_OK) {
        Py_DECREF(self);
        return cf_py_raise(st, "Reducer");
    }
    self->name = Py_NewRef(name);
    self->compiler = Py_NewRef(compiler);
    return (PyObject *)self;
}

static int reducer_traverse(CfPyReducer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->compiler);
    Py_VISIT(self->captures);
    Py_VISIT(self->dict);
    return 0;
}

static int reducer_clear(CfPyReducer *self)
{
    Py_CLEAR(self->compiler);
    Py_CLEAR(self->captures);
    Py_CLEAR(self->dict);
    return 0;
}

static void reducer_dealloc(CfPyReducer *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist)
        PyObject_ClearWeakRefs((PyObject *)self);
    reducer_clear(self);
    Py_CLEAR(self->name);
    cf_reducer_free(self->r);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* reducer(arr, size=None, res=None, init=0, stream=0) */
static PyObject *reducer_call(CfPyReducer *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"arr", "size", "res", "init", "stream", NULL};
    PyObject *arr, *size = Py_None, *res = Py_None, *init = NULL, *stream = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOOO:reduce", kw, &arr, &size, &res, &init,
                                     &stream))
        return NULL;
    const char *name = PyUnicode_AsUTF8(self->name);
    if (name == NULL)
        return NULL;
    red_arg a, r;
    memset(&a, 0, sizeof a);
    memset(&r, 0, sizeof r);
    r.kind = -1; /* no res */
    red_place pl = {0};
    PyObject *result = NULL, *init_scalar = NULL;
    PyArray_Descr *descr = NULL;
    if (arg_classify(arr, &a, "arr") < 0)
        goto done;
    if (size != Py_None) {
        Py_ssize_t n = PyNumber_AsSsize_t(size, PyExc_OverflowError);
        if (n == -1 && PyErr_Occurred())
            goto done;
        if (a.view.ndim != 1) {
            PyErr_Format(PyExc_TypeError, "reduce: size= needs a 1-d array, not a %d-d one",
                         a.view.ndim);
            goto done;
        }
        if (n < 0) {
            PyErr_Format(PyExc_ValueError, "reduce: size must not be negative (got %zd)", n);
            goto done;
        }
        if (n > a.view.shape[0]) {
            PyErr_Format(PyExc_ValueError, "reduce: size %zd is larger than the array's length "
                         "%lld", n, (long long)a.view.shape[0]);
            goto done;
        }
        a.view.shape[0] = n;
        if (a.kind == R_HOST) { /* upload only the part reduced */
            PyObject *part = PySequence_GetSlice(a.keep, 0, n);
            if (part == NULL)
                goto done;
            Py_SETREF(a.keep, part);
        }
    }
    const cf_dtype dt = a.view.dtype;
    if ((descr = cf_py_descr_from_dtype(dt)) == NULL)
        goto done;
    /* init becomes the array's type, as Numba does (arr.dtype.type(init)) */
    if (init != NULL) {
        init_scalar = PyObject_CallOneArg((PyObject *)descr->typeobj, init);
    } else {
        PyObject *zero = PyLong_FromLong(0);
        init_scalar = zero ? PyObject_CallOneArg((PyObject *)descr->typeobj, zero) : NULL;
        Py_XDECREF(zero);
    }
    if (init_scalar == NULL)
        goto done;
    unsigned char init_bytes[16] = {0};
    if (!PyArray_IsScalar(init_scalar, Generic)) {
        PyErr_SetString(PyExc_TypeError, "reduce: init could not be converted to the array's dtype");
        goto done;
    }
    PyArray_ScalarAsCtype(init_scalar, init_bytes);
    if (res != Py_None) {
        if (!CfPyDeviceArray_Check(res) && !cf_py_is_device_object(res)) {
            PyErr_Format(PyExc_TypeError, "reduce: res must be a device array (a cufunc "
                         "DeviceArray or an object with __cuda_array_interface__), not %.200s",
                         Py_TYPE(res)->tp_name);
            goto done;
        }
        if (cf_py_device_view(res, &r.view, &r.keep, 1, "res") < 0)
            goto done;
        r.kind = R_DEVICE;
        if (r.view.dtype != dt) {
            PyErr_Format(PyExc_TypeError, "reduce: res has dtype %s, but the reduction of a %s "
                         "array gives %s", cf_dtype_name(r.view.dtype), cf_dtype_name(dt),
                         cf_dtype_name(dt));
            goto done;
        }
        if (cf_array_size(&r.view) < 1) {
            PyErr_SetString(PyExc_ValueError, "reduce: res has no element to hold the result");
            goto done;
        }
    }
    int loop;
    if (reducer_loop(self, dt, &loop) < 0)
        goto done;
    if (cf_array_size(&a.view) == 0 && res == Py_None) {
        result = Py_NewRef(init_scalar); /* Numba's answer, with no work on the device */
        goto done;
    }
    int device = a.kind == R_DEVICE ? a.view.device : r.kind == R_DEVICE ? r.view.device : -1;
    if (place(&pl, device, stream, name) < 0 || same_device(&r, &pl, 1, name, "res") < 0 ||
        same_device(&a, &pl, 0, name, "arr") < 0)
        goto done;
    if (a.kind == R_HOST && arg_upload(&a, pl.device, pl.for_arrays, pl.s) < 0)
        goto done;
    /* res inside arr: reduce a copy (a reduction reads elements after others are written) */
    if (r.kind == R_DEVICE && cf_array_needs_copy(&a.view, &r.view, 0) && arg_copy(&a, &pl) < 0)
        goto done;
    cf_status st = CF_OK;
    if (res != Py_None) {
        Py_BEGIN_ALLOW_THREADS
        st = cf_reduce_all(self->r, loop, pl.s, &a.view, r.view.data, dt, init_bytes);
        Py_END_ALLOW_THREADS
        if (st != CF_OK) {
            cf_py_fail(st, name);
            goto done;
        }
        result = Py_NewRef(Py_None);
        goto done;
    }
    unsigned char host[16] = {0};
    uint64_t tmp = 0;
    Py_BEGIN_ALLOW_THREADS
    st = cf_mem_alloc(pl.s, 16, &tmp);
    if (st == CF_OK)
        st = cf_reduce_all(self->r, loop, pl.s, &a.view, tmp, dt, init_bytes);
    if (st == CF_OK)
        st = cf_memcpy_dtoh(pl.s, host, tmp, cf_dtype_size(dt), 1);
    if (tmp) {
        cf_status fst = cf_mem_free(pl.s, tmp);
        if (st == CF_OK)
            st = fst;
    }
    Py_END_ALLOW_THREADS
    if (st != CF_OK) {
        cf_py_fail(st, name);
        goto done;
    }
    result = PyArray_Scalar(host, descr, NULL);
done:
    arg_clear(&a);
    arg_clear(&r);
    Py_XDECREF(pl.resolved);
    Py_XDECREF(init_scalar);
    Py_XDECREF(descr);
    return result;
}

static PyObject *reducer_add_loop(CfPyReducer *self, PyObject *args)
{
    PyObject *dtype, *source, *fn_name, *options = Py_None, *captures = Py_None;
    if (!PyArg_ParseTuple(args, "OUU|OO:add_loop", &dtype, &source, &fn_name, &options, &captures))
        return NULL;
    cf_dtype dt;
    if (cf_py_dtype_from_object(dtype, &dt, NULL, "dtype") < 0)
        return NULL;
    PyObject *spec = PyTuple_Pack(4, source, fn_name, options, captures);
    if (spec == NULL)
        return NULL;
    int loop;
    int r = reducer_add_spec(self->r, dt, spec, &loop, &self->captures);
    Py_DECREF(spec);
    if (r < 0)
        return NULL;
    return PyLong_FromLong(loop);
}

static PyObject *reducer_repr(CfPyReducer *self)
{
    return PyUnicode_FromFormat("<cufunc.Reduce '%U' (%d loops)>", self->name,
                                cf_reducer_nloops(self->r));
}

static PyObject *reducer_get_name(CfPyReducer *self, void *c) { return Py_NewRef(self->name); }
static PyObject *reducer_get_compiler(CfPyReducer *self, void *c) { return Py_NewRef(self->compiler); }
static PyObject *reducer_get_kernel_count(CfPyReducer *self, void *c)
{
    return PyLong_FromLong(cf_reducer_kernel_count(self->r));
}
static PyObject *reducer_get_types(CfPyReducer *self, void *c)
{
    int n = cf_reducer_nloops(self->r);
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *d = (PyObject *)cf_py_descr_from_dtype(cf_reducer_loop_type(self->r, i));
        if (d == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, d);
    }
    return t;
}

static PyMethodDef reducer_methods[] = {
    {"add_loop", (PyCFunction)reducer_add_loop, METH_VARARGS,
     "add_loop(dtype, source, fn_name, options=None, captures=None): the CUDA C device function "
     "fn_name(dtype, dtype) -> dtype that reduces arrays of that dtype; captures: (symbol, "
     "device array, label) for each captured device array."},
    {NULL},
};

static PyGetSetDef reducer_getset[] = {
    {"__name__", (getter)reducer_get_name, NULL, "the reduction's name", NULL},
    {"compiler", (getter)reducer_get_compiler, NULL, "the loop compiler, or None", NULL},
    {"kernel_count", (getter)reducer_get_kernel_count, NULL, "kernels specialised so far", NULL},
    {"types", (getter)reducer_get_types, NULL, "the dtypes with a loop", NULL},
    {NULL},
};

static PyTypeObject CfPyReducer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cufunc._core.Reducer",
    .tp_basicsize = sizeof(CfPyReducer),
    .tp_dealloc = (destructor)reducer_dealloc,
    .tp_repr = (reprfunc)reducer_repr,
    .tp_call = (ternaryfunc)reducer_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Reducer(name, compiler): a GPU reduction with a binary function; call it as "
              "r(arr, size=None, res=None, init=0, stream=0).",
    .tp_traverse = (traverseproc)reducer_traverse,
    .tp_clear = (inquiry)reducer_clear,
    .tp_weaklistoffset = offsetof(CfPyReducer, weakreflist),
    .tp_dictoffset = offsetof(CfPyReducer, dict),
    .tp_methods = reducer_methods,
    .tp_getset = reducer_getset,
    .tp_new = reducer_new,
};

/* ---- UFunc.reduce / UFunc.accumulate -------------------------------------------------------- */

static void capsule_free_reducer(PyObject *cap)
{
    cf_reducer_free(PyCapsule_GetPointer(cap, "cufunc.reducer"));
}

/* The ufunc's reducer, kept in its instance dict (created on first use). Borrowed pointer, alive
 * as long as the ufunc. */
static cf_reducer *ufunc_reducer(CfPyUFunc *uf)
{
    PyObject *dict = PyObject_GenericGetDict((PyObject *)uf, NULL);
    if (dict == NULL)
        return NULL;
    PyObject *cap = PyDict_GetItemString(dict, "_cf_reducer");
    cf_reducer *r = NULL;
    if (cap != NULL) {
        r = PyCapsule_GetPointer(cap, "cufunc.reducer");
    } else {
        const char *name = PyUnicode_AsUTF8(uf->name);
        cf_status st = name ? cf_reducer_create(name, &r) : CF_ERR_INVALID;
        if (st != CF_OK) {
            if (!PyErr_Occurred())
                cf_py_fail(st, "reduce");
            r = NULL;
        } else {
            cap = PyCapsule_New(r, "cufunc.reducer", capsule_free_reducer);
            if (cap == NULL) {
                cf_reducer_free(r);
                r = NULL;
            } else {
                if (PyDict_SetItemString(dict, "_cf_reducer", cap) < 0)
                    r = NULL;
                Py_DECREF(cap);
            }
        }
    }
    Py_DECREF(dict);
    return r;
}

/* The loop a reduction of `want` elements uses: the ufunc's loop for inputs (want, want), which
 * must take and give one type (the accumulator); a signature-less ufunc compiles it first.
 * `exact`: dtype= was given, so the accumulator must be `want` itself. */
static int ufunc_reduce_loop(CfPyUFunc *uf, cf_dtype want, int exact, const char *method,
                             cf_reducer **red, int *rloop, cf_dtype *acc)
{
    const char *name = PyUnicode_AsUTF8(uf->name);
    cf_dtype in[2] = {want, want}, t[3];
    int loop = -1;
    /* a ufunc that compiles on demand reduces in a loop of the array's own type (as its call
     * would), not in an earlier loop the type casts into */
    int dynamic = uf->compiler != NULL && uf->compiler != Py_None;
    cf_status st = dynamic ? cf_ufunc_find_exact(uf->uf, in, NULL, &loop)
                           : cf_ufunc_resolve(uf->uf, in, NULL, &loop);
    if (st == CF_OK && exact) {
        cf_ufunc_loop_types(uf->uf, loop, t);
        if (t[2] != want)
            st = CF_ERR_TYPE;
    }
    if (st != CF_OK && uf->compiler != NULL && uf->compiler != Py_None) {
        PyObject *d = (PyObject *)cf_py_descr_from_dtype(want);
        if (d == NULL)
            return -1;
        PyObject *types = PyTuple_Pack(2, d, d);
        PyObject *spec = types ? PyObject_CallFunctionObjArgs(uf->compiler, types,
                                                              exact ? d : Py_None, NULL)
                               : NULL;
        Py_XDECREF(types);
        Py_DECREF(d);
        if (spec == NULL)
            return -1;
        if (spec != Py_None) {
            PyObject *add = PyObject_GetAttrString((PyObject *)uf, "add_loop");
            PyObject *argt = add ? PySequence_Tuple(spec) : NULL;
            PyObject *ok = argt ? PyObject_Call(add, argt, NULL) : NULL;
            Py_XDECREF(add);
            Py_XDECREF(argt);
            if (ok == NULL) {
                Py_DECREF(spec);
                return -1;
            }
            Py_DECREF(ok);
        }
        Py_DECREF(spec);
        st = cf_ufunc_resolve(uf->uf, in, NULL, &loop);
    }
    if (st != CF_OK)
        return cf_py_fail(st == CF_ERR_TYPE ? st : st, NULL);
    cf_ufunc_loop_types(uf->uf, loop, t);
    if (t[0] != t[1] || t[1] != t[2]) {
        PyErr_Format(PyExc_TypeError, "%s of ufunc '%s' needs a loop whose two inputs and output "
                     "have one type; for %s the ufunc has (%s, %s) -> %s", method, name,
                     cf_dtype_name(want), cf_dtype_name(t[0]), cf_dtype_name(t[1]),
                     cf_dtype_name(t[2]));
        return -1;
    }
    if (exact && t[2] != want) {
        PyErr_Format(PyExc_TypeError, "No loop matching the specified signature and casting was "
                     "found for ufunc %s (dtype=%s)", name, cf_dtype_name(want));
        return -1;
    }
    *acc = t[2];
    if ((*red = ufunc_reducer(uf)) == NULL)
        return -1;
    *rloop = cf_reducer_find_loop(*red, *acc);
    if (*rloop >= 0)
        return 0;
    /* the ufunc's loops list holds (types, source, fn_name[, options]) in loop order */
    if (uf->loops == NULL || !PyList_Check(uf->loops) || loop >= PyList_GET_SIZE(uf->loops)) {
        PyErr_Format(PyExc_RuntimeError, "ufunc '%s': loop %d has no source", name, loop);
        return -1;
    }
    PyObject *entry = PyList_GET_ITEM(uf->loops, loop);
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) < 3) {
        PyErr_Format(PyExc_RuntimeError, "ufunc '%s': loop %d has no source", name, loop);
        return -1;
    }
    /* the entry's captures (5th item) stay alive in the entry, as long as the ufunc */
    Py_ssize_t nitems = PyTuple_GET_SIZE(entry) > 5 ? 5 : PyTuple_GET_SIZE(entry);
    PyObject *spec = PyTuple_GetSlice(entry, 1, nitems);
    if (spec == NULL)
        return -1;
    int r = reducer_add_spec(*red, *acc, spec, rloop, NULL);
    Py_DECREF(spec);
    return r;
}

/* NumPy's default accumulator of add and multiply: small integers and bool widen to 64 bits. */
static cf_dtype default_acc(CfPyUFunc *uf, cf_dtype dt)
{
    const char *name = PyUnicode_AsUTF8(uf->name);
    if (name == NULL) {
        PyErr_Clear();
        return dt;
    }
    if (strcmp(name, "add") != 0 && strcmp(name, "multiply") != 0)
        return dt;
    char k = cf_dtype_kind(dt);
    if (dt == CF_BOOL || (k == 'i' && cf_dtype_size(dt) < 8))
        return CF_INT64;
    if (k == 'u' && cf_dtype_size(dt) < 8)
        return CF_UINT64;
    return dt;
}

static int raise_axis_error(long long axis, int ndim)
{
    PyObject *mod = PyImport_ImportModule("numpy.exceptions");
    PyObject *cls = mod ? PyObject_GetAttrString(mod, "AxisError") : NULL;
    Py_XDECREF(mod);
    if (cls == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "axis %lld is out of bounds for array of dimension %d",
                     axis, ndim);
        return -1;
    }
    PyObject *exc = PyObject_CallFunction(cls, "Li", axis, ndim);
    Py_DECREF(cls);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return -1;
}

/* axis (None, an int, a tuple of ints) -> reduced[k]; returns the number of reduced axes, or -1.
 * A 0-d array accepts 0 and -1 (as NumPy does) and reduces no axis. */
static int parse_axes(PyObject *axis, int ndim, unsigned char *reduced)
{
    memset(reduced, 0, CF_MAX_DIMS);
    if (axis == Py_None) {
        memset(reduced, 1, (size_t)ndim);
        return ndim;
    }
    PyObject *seq = PyTuple_Check(axis) ? Py_NewRef(axis) : PyTuple_Pack(1, axis);
    if (seq == NULL)
        return -1;
    int count = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq); i++) {
        PyObject *idx = PyNumber_Index(PyTuple_GET_ITEM(seq, i));
        if (idx == NULL) {
            Py_DECREF(seq);
            return -1;
        }
        long long v = PyLong_AsLongLong(idx);
        Py_DECREF(idx);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (ndim == 0 && (v == 0 || v == -1))
            continue;
        if (v < -ndim || v >= ndim) {
            Py_DECREF(seq);
            return raise_axis_error(v, ndim);
        }
        int k = (int)(v < 0 ? v + ndim : v);
        if (reduced[k]) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_ValueError, "duplicate value in 'axis'");
            return -1;
        }
        reduced[k] = 1;
        count++;
    }
    Py_DECREF(seq);
    return count;
}

/* An `out=` argument: None, an array, or a 1-tuple holding one. */
static int parse_out(PyObject *out, red_arg *o, const char *method)
{
    memset(o, 0, sizeof *o);
    o->kind = -1;
    if (PyTuple_Check(out)) {
        if (PyTuple_GET_SIZE(out) != 1) {
            PyErr_SetString(PyExc_ValueError, "The 'out' tuple must have exactly one entry");
            return -1;
        }
        out = PyTuple_GET_ITEM(out, 0);
    }
    if (out == Py_None)
        return 0;
    if (CfPyDeviceArray_Check(out) || cf_py_is_device_object(out)) {
        if (cf_py_device_view(out, &o->view, &o->keep, 1, "out") < 0)
            return -1;
        o->kind = R_DEVICE;
        return 0;
    }
    if (!PyArray_Check(out)) {
        PyErr_Format(PyExc_TypeError, "%s: out must be an array (a NumPy array or a device "
                     "array), not %.200s", method, Py_TYPE(out)->tp_name);
        return -1;
    }
    if (!PyArray_ISWRITEABLE((PyArrayObject *)out)) {
        PyErr_SetString(PyExc_ValueError, "output array is read-only");
        return -1;
    }
    if (arg_classify(out, o, "out") < 0)
        return -1;
    return 0;
}

/* The accumulator and loop of a reduce or accumulate call: dtype= when given (then exactly that
 * type), else out='s dtype, else the ufunc's default for the input's dtype `in`. */
static int method_loop(CfPyUFunc *uf, PyObject *dtype, const red_arg *o, cf_dtype in,
                       const char *method, cf_reducer **red, int *rloop, cf_dtype *acc)
{
    cf_dtype want;
    int exact = 0;
    if (dtype != Py_None) {
        if (cf_py_dtype_from_object(dtype, &want, NULL, "dtype") < 0)
            return -1;
        exact = 1;
    } else if (o->kind >= 0) {
        want = o->view.dtype;
    } else {
        want = default_acc(uf, in);
    }
    return ufunc_reduce_loop(uf, want, exact, method, red, rloop, acc);
}

/* The result for the caller: the given out, a device array, or (all host) a NumPy value. */
static PyObject *deliver(PyObject *dev_result, PyObject *out_obj, int host, int scalar)
{
    if (!host)
        return Py_NewRef(out_obj ? out_obj : dev_result);
    PyObject *h = PyObject_CallMethod(dev_result, "copy_to_host", NULL);
    if (h == NULL)
        return NULL;
    if (out_obj) {
        int r = PyArray_CopyInto((PyArrayObject *)out_obj, (PyArrayObject *)h);
        Py_DECREF(h);
        return r < 0 ? NULL : Py_NewRef(out_obj);
    }
    return scalar ? PyArray_Return((PyArrayObject *)h) : h;
}

static PyObject *unwrap_out(PyObject *out)
{
    if (out && PyTuple_Check(out) && PyTuple_GET_SIZE(out) == 1)
        return PyTuple_GET_ITEM(out, 0);
    return out == Py_None ? NULL : out;
}

static int is_number(PyObject *v)
{
    return PyLong_Check(v) || PyFloat_Check(v) || PyComplex_Check(v) ||
           PyArray_IsScalar(v, Generic);
}

PyObject *cf_py_ufunc_reduce(PyObject *selfobj, PyObject *args, PyObject *kwargs)
{
    CfPyUFunc *self = (CfPyUFunc *)selfobj;
    static char *kw[] = {"array", "axis", "dtype", "out", "keepdims", "initial", "where", "stream",
                         NULL};
    PyObject *array, *axis = NULL, *dtype = Py_None, *out = Py_None, *initial = NULL,
                     *where = Py_True, *stream = NULL;
    int keepdims = 0;
    if (self->nin != 2) {
        PyErr_SetString(PyExc_ValueError, "reduce only supported for binary functions");
        return NULL;
    }
    if (self->nout != 1) {
        PyErr_SetString(PyExc_ValueError, "reduce only supported for functions returning a "
                        "single value");
        return NULL;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOOpOOO:reduce", kw, &array, &axis, &dtype,
                                     &out, &keepdims, &initial, &where, &stream))
        return NULL;
    const char *name = PyUnicode_AsUTF8(self->name);
    if (name == NULL)
        return NULL;
    red_arg a, o, w;
    memset(&a, 0, sizeof a);
    memset(&o, 0, sizeof o);
    memset(&w, 0, sizeof w);
    o.kind = w.kind = -1; /* not given */
    red_place pl = {0};
    PyObject *result = NULL, *dev_out = NULL, *zero = NULL;
    int have_where = where != Py_True;

    if (arg_classify(array, &a, "array") < 0)
        goto done;
    const int ndim = a.view.ndim;
    unsigned char reduced[CF_MAX_DIMS];
    if (axis == NULL)
        axis = zero = PyLong_FromLong(0);
    int nred = axis ? parse_axes(axis, ndim, reduced) : -1;
    if (nred < 0)
        goto done;
    if (parse_out(out, &o, "reduce") < 0)
        goto done;

    /* the accumulator type and the loop */
    cf_reducer *red;
    int rloop;
    cf_dtype acc;
    if (method_loop(self, dtype, &o, a.view.dtype, "reduce", &red, &rloop, &acc) < 0)
        goto done;

    /* the initial value: initial=, else the identity; initial=None means none */
    unsigned char init[16];
    int has_init = 0;
    PyObject *iv = initial ? initial : self->identity;
    if (iv != NULL && iv != Py_None && (initial != NULL || is_number(iv))) {
        if (value_bytes(iv, acc, init) < 0)
            goto done;
        has_init = 1;
    }
    if (have_where) {
        if (!has_init) {
            PyErr_Format(PyExc_ValueError, "reduction operation '%s' does not have an identity, "
                         "so to use a where mask one has to specify 'initial'", name);
            goto done;
        }
        if (arg_classify(where, &w, "where") < 0)
            goto done;
        if (w.view.dtype != CF_BOOL) {
            PyErr_Format(PyExc_TypeError, "Cannot cast array data from dtype('%s') to "
                         "dtype('bool') according to the rule 'safe'", cf_dtype_name(w.view.dtype));
            goto done;
        }
    }

    /* shapes */
    int64_t kshape[CF_MAX_DIMS], rshape[CF_MAX_DIMS], n_out = 1, n_red = 1;
    int rndim = 0;
    for (int k = 0; k < ndim; k++) {
        kshape[k] = reduced[k] ? 1 : a.view.shape[k];
        if (reduced[k])
            n_red *= a.view.shape[k];
        else
            n_out *= a.view.shape[k];
        if (!reduced[k] || keepdims)
            rshape[rndim++] = kshape[k];
    }
    if (n_red == 0 && n_out > 0 && !has_init) {
        PyErr_Format(PyExc_ValueError, "zero-size array to reduction operation %s which has no "
                     "identity", name);
        goto done;
    }
    if (o.kind >= 0) {
        if (o.view.ndim != rndim) {
            PyErr_Format(PyExc_ValueError, "output parameter for reduction operation %s has the "
                         "wrong number of dimensions: Found %d but expected %d%s", name,
                         o.view.ndim, rndim, keepdims ? " (must match the operand's when "
                         "keepdims=True)" : "");
            goto done;
        }
        if (!shapes_equal(o.view.ndim, o.view.shape, rndim, rshape)) {
            PyObject *f = cf_py_tuple_from_int64(o.view.ndim, o.view.shape);
            PyObject *e = cf_py_tuple_from_int64(rndim, rshape);
            if (f && e)
                PyErr_Format(PyExc_ValueError, "output parameter for reduction operation %s has "
                             "the wrong shape: Found %R but expected %R", name, f, e);
            Py_XDECREF(f);
            Py_XDECREF(e);
            goto done;
        }
    }
    int any_device = a.kind == R_DEVICE || o.kind == R_DEVICE || w.kind == R_DEVICE;
    int host_result = !any_device;
    if (o.kind == R_HOST && any_device) {
        PyErr_Format(PyExc_TypeError, "reduce of ufunc '%s': out= is a host (NumPy) array but an "
                     "input is on the device; pass a device array as out=", name);
        goto done;
    }

    /* the device, uploads, the output */
    int device = a.kind == R_DEVICE ? a.view.device : o.kind == R_DEVICE ? o.view.device :
                 w.kind == R_DEVICE ? w.view.device : -1;
    if (place(&pl, device, stream, name) < 0 || same_device(&a, &pl, 0, name, "array") < 0 ||
        same_device(&o, &pl, 1, name, "out") < 0 || same_device(&w, &pl, 0, name, "where") < 0)
        goto done;
    if (a.kind == R_HOST && arg_upload(&a, pl.device, pl.for_arrays, pl.s) < 0)
        goto done;
    if (have_where && w.kind == R_HOST && arg_upload(&w, pl.device, pl.for_arrays, pl.s) < 0)
        goto done;
    cf_array ov;
    if (o.kind == R_DEVICE) {
        ov = o.view;
    } else {
        dev_out = cf_py_devicearray_alloc(rndim, rshape, o.kind == R_HOST ? o.view.dtype : acc,
                                          'C', pl.device, pl.for_arrays);
        if (dev_out == NULL)
            goto done;
        ov = ((CfPyDeviceArray *)dev_out)->view;
    }
    /* An output that shares memory with the array (out= a row or column of it) or the mask:
     * reduce copies of them, as NumPy defines the call (blocks read elements that others have
     * already written, and a split reduction writes partials in any order). */
    if (cf_array_needs_copy(&a.view, &ov, 0) && arg_copy(&a, &pl) < 0)
        goto done;
    if (have_where && cf_array_needs_copy(&w.view, &ov, 0) && arg_copy(&w, &pl) < 0)
        goto done;
    /* out in the keepdims shape: extent 1, stride 0 on the reduced axes */
    cf_array kv = ov;
    kv.ndim = ndim;
    for (int k = 0, j = 0; k < ndim; k++) {
        if (reduced[k] && !keepdims) {
            kv.shape[k] = 1;
            kv.strides[k] = 0;
        } else {
            kv.shape[k] = ov.shape[j];
            kv.strides[k] = ov.strides[j];
            j++;
        }
    }
    cf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cf_reduce_launch(red, rloop, pl.s, &a.view, reduced, &kv, have_where ? &w.view : NULL,
                          has_init ? init : NULL);
    Py_END_ALLOW_THREADS
    if (st != CF_OK) {
        cf_py_fail(st, name);
        goto done;
    }
    result = deliver(dev_out, unwrap_out(out), host_result, rndim == 0);
done:
    arg_clear(&a);
    arg_clear(&o);
    arg_clear(&w);
    Py_XDECREF(pl.resolved);
    Py_XDECREF(dev_out);
    Py_XDECREF(zero);
    return result;
}

PyObject *cf_py_ufunc_accumulate(PyObject *selfobj, PyObject *args, PyObject *kwargs)
{
    CfPyUFunc *self = (CfPyUFunc *)selfobj;
    static char *kw[] = {"array", "axis", "dtype", "out", "stream", NULL};
    PyObject *array, *axis = NULL, *dtype = Py_None, *out = Py_None, *stream = NULL;
    if (self->nin != 2) {
        PyErr_SetString(PyExc_ValueError, "accumulate only supported for binary functions");
        return NULL;
    }
    if (self->nout != 1) {
        PyErr_SetString(PyExc_ValueError, "accumulate only supported for functions returning a "
                        "single value");
        return NULL;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOOO:accumulate", kw, &array, &axis, &dtype,
                                     &out, &stream))
        return NULL;
    const char *name = PyUnicode_AsUTF8(self->name);
    if (name == NULL)
        return NULL;
    red_arg a, o;
    memset(&a, 0, sizeof a);
    memset(&o, 0, sizeof o);
    o.kind = -1; /* not given */
    red_place pl = {0};
    PyObject *result = NULL, *dev_out = NULL;
    if (arg_classify(array, &a, "array") < 0)
        goto done;
    const int ndim = a.view.ndim;
    if (ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "cannot accumulate on a scalar");
        goto done;
    }
    int ax = 0;
    if (axis != NULL) {
        if (axis == Py_None || (PyTuple_Check(axis) && PyTuple_GET_SIZE(axis) != 1)) {
            PyErr_SetString(PyExc_ValueError, "accumulate does not allow multiple axes");
            goto done;
        }
        unsigned char reduced[CF_MAX_DIMS];
        if (parse_axes(axis, ndim, reduced) < 0)
            goto done;
        for (int k = 0; k < ndim; k++)
            if (reduced[k])
                ax = k;
    }
    if (parse_out(out, &o, "accumulate") < 0)
        goto done;
    cf_reducer *red;
    int rloop;
    cf_dtype acc;
    if (method_loop(self, dtype, &o, a.view.dtype, "accumulate", &red, &rloop, &acc) < 0)
        goto done;
    if (o.kind >= 0 && !shapes_equal(o.view.ndim, o.view.shape, ndim, a.view.shape)) {
        PyObject *f = cf_py_tuple_from_int64(o.view.ndim, o.view.shape);
        PyObject *e = cf_py_tuple_from_int64(ndim, a.view.shape);
        if (f && e)
            PyErr_Format(PyExc_ValueError, "output parameter for accumulate of %s has the wrong "
                         "shape: Found %R but expected %R", name, f, e);
        Py_XDECREF(f);
        Py_XDECREF(e);
        goto done;
    }
    int any_device = a.kind == R_DEVICE || o.kind == R_DEVICE;
    if (o.kind == R_HOST && any_device) {
        PyErr_Format(PyExc_TypeError, "accumulate of ufunc '%s': out= is a host (NumPy) array but "
                     "the input is on the device; pass a device array as out=", name);
        goto done;
    }
    int device = a.kind == R_DEVICE ? a.view.device : o.kind == R_DEVICE ? o.view.device : -1;
    if (place(&pl, device, stream, name) < 0 || same_device(&a, &pl, 0, name, "array") < 0 ||
        same_device(&o, &pl, 1, name, "out") < 0)
        goto done;
    if (a.kind == R_HOST && arg_upload(&a, pl.device, pl.for_arrays, pl.s) < 0)
        goto done;
    cf_array ov;
    if (o.kind == R_DEVICE) {
        ov = o.view;
    } else {
        dev_out = cf_py_devicearray_alloc(ndim, a.view.shape, o.kind == R_HOST ? o.view.dtype : acc,
                                          'C', pl.device, pl.for_arrays);
        if (dev_out == NULL)
            goto done;
        ov = ((CfPyDeviceArray *)dev_out)->view;
    }
    /* An output that shares memory with the array: scan a copy, as NumPy defines the call, unless
     * it is the very same view (out=array): a scan loads each tile whole before it stores it and
     * reads no other tile's elements, and a column scan reads each element before it writes it. */
    if (cf_array_needs_copy(&a.view, &ov, 1) && arg_copy(&a, &pl) < 0)
        goto done;
    cf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cf_scan_launch(red, rloop, pl.s, &a.view, ax, &ov);
    Py_END_ALLOW_THREADS
    if (st != CF_OK) {
        cf_py_fail(st, name);
        goto done;
    }
    result = deliver(dev_out, unwrap_out(out), !any_device, 0);
done:
    arg_clear(&a);
    arg_clear(&o);
    Py_XDECREF(pl.resolved);
    Py_XDECREF(dev_out);
    return result;
}

/* ---- module --------------------------------------------------------------------------------- */

PyMethodDef cf_py_reduce_methods[] = {
    {NULL},
};

int cf_py_reduce_init_module(PyObject *m)
{
    if (PyType_Ready(&CfPyReducer_Type) < 0)
        return -1;
    Py_INCREF(&CfPyReducer_Type);
    if (PyModule_AddObject(m, "Reducer", (PyObject *)&CfPyReducer_Type) < 0) {
        Py_DECREF(&CfPyReducer_Type);
        return -1;
    }
    return 0;
}
