/* py_reduce.c: reductions from Python, in C (the engine is include/cufunc/reduce.h): the reduce
 * engines' parts of the call pipeline (py_call.h).
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
 * Placement is the pipeline's, as for a ufunc call: any device operand gives device results and
 * no waiting; host operands are copied over and the result comes back as NumPy (a NumPy scalar
 * for a 0-d result). */
#include "py_reduce.h"

#include <string.h>

#include "cufunc/reduce.h"
#include "diagnostics.h"
#include "py_args.h"
#include "py_call.h"
#include "py_capture.h"
#include "py_override.h"
#include "py_ufunc.h"

/* ---- arguments ------------------------------------------------------------------------------ */

/* The operand of a reduction, classified by the call's own rule (cf_py_arg_classify: device
 * arrays, __cuda_array_interface__ and __dlpack__ objects as device views, anything else through
 * numpy.asarray); a scalar is reduced as the 0-d array NumPy makes of it (strong: reduce's operand
 * is an array, np.add.reduce(2.0) is float64). `a` is cleared by the caller in every case. */
static int red_classify(PyObject *obj, cf_py_arg *a, const char *argname)
{
    if (cf_py_arg_classify(obj, a, argname) < 0)
        return -1;
    if (a->kind != CF_PY_ARG_SCALAR)
        return 0;
    /* a 0-d array is kept as it is; a Python or NumPy scalar becomes one */
    PyObject *arr = a->keep ? a->keep : PyArray_FROM_O(obj);
    a->keep = NULL;
    if (arr == NULL)
        return -1;
    a->keep = arr;
    if (cf_py_dtype_from_descr(PyArray_DESCR((PyArrayObject *)arr), &a->dtype, argname) < 0)
        return -1; /* e.g. a Python int beyond 64 bits: an object array */
    a->weak = a->pyscalar = 0;
    cf_py_arg_host_view(a, (PyArrayObject *)arr);
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
    if (cf_py_loop_options(options, opts, &nopts, &seq, "reducer loop") < 0)
        return -1;
    if (options == NULL || options == Py_None) {
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

/* cuda.reduce's state of one call, beside the pipeline's. */
typedef struct {
    PyObject *call_arr, *size, *res, *init; /* the call's arguments (borrowed) */
    int loop;
    cf_dtype dt;
    PyArray_Descr *descr;     /* owned */
    PyObject *init_scalar;    /* owned */
    unsigned char init_bytes[16];
} rc_state;

#define RC_STATE(c) ((rc_state *)(c)->state)

/* size=: only the first `size` elements of a 1-d array are reduced (and uploaded). */
static int rc_size(cf_py_call *c, PyObject *size)
{
    cf_py_arg *a = &c->in[0];
    Py_ssize_t n = PyNumber_AsSsize_t(size, PyExc_OverflowError);
    if (n == -1 && PyErr_Occurred())
        return -1;
    if (a->view.ndim != 1) {
        PyErr_Format(PyExc_TypeError, "reduce: size= needs a 1-d array, not a %d-d one",
                     a->view.ndim);
        return -1;
    }
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "reduce: size must not be negative (got %zd)", n);
        return -1;
    }
    if (n > a->view.shape[0]) {
        PyErr_Format(PyExc_ValueError, "reduce: size %zd is larger than the array's length "
                     "%lld", n, (long long)a->view.shape[0]);
        return -1;
    }
    a->view.shape[0] = n;
    if (a->kind == CF_PY_ARG_HOST) { /* upload only the part reduced */
        PyObject *part = PySequence_GetSlice(a->keep, 0, n);
        if (part == NULL)
            return -1;
        Py_SETREF(a->keep, part);
    }
    return 0;
}

/* res=: a device array of the array's dtype with room for the result. */
static int rc_res(cf_py_call *c, PyObject *res)
{
    cf_py_arg *r = &c->out[0];
    cf_dtype dt = RC_STATE(c)->dt;
    if (cf_py_refuse_immutable(c, res, "res") < 0)
        return -1;
    if (!CfPyDeviceArray_Check(res) && !cf_py_is_device_object(res)) {
        PyErr_Format(PyExc_TypeError, "reduce: res must be a device array (a cufunc "
                     "DeviceArray or an object with __cuda_array_interface__), not %.200s",
                     Py_TYPE(res)->tp_name);
        return -1;
    }
    /* ordered on the device, as every call's operands (a host wait would break a capture) */
    if (cf_py_device_view(res, &r->view, &r->keep, CF_PY_VIEW_ORDER, "res") < 0)
        return -1;
    r->kind = CF_PY_ARG_DEVICE;
    r->dtype = r->view.dtype;
    c->outs[0] = res;
    c->any_device = 1;
    if (r->view.dtype != dt) {
        PyErr_Format(PyExc_TypeError, "reduce: res has dtype %s, but the reduction of a %s "
                     "array gives %s", cf_dtype_name(r->view.dtype), cf_dtype_name(dt),
                     cf_dtype_name(dt));
        return -1;
    }
    if (cf_array_size(&r->view) < 1) {
        PyErr_SetString(PyExc_ValueError, "reduce: res has no element to hold the result");
        return -1;
    }
    return 0;
}

static int rc_prepare(cf_py_call *c)
{
    CfPyReducer *self = (CfPyReducer *)c->self;
    rc_state *S = RC_STATE(c);
    cf_py_arg_reset(&c->out[0], NULL);
    c->out[0].kind = CF_PY_ARG_NONE; /* no res */
    c->nout_done = 1;
    c->nin_done = 1;
    if (red_classify(S->call_arr, &c->in[0], "arr") < 0)
        return -1;
    c->any_device = c->in[0].kind == CF_PY_ARG_DEVICE;
    if (S->size != Py_None && rc_size(c, S->size) < 0)
        return -1;
    S->dt = c->in[0].view.dtype;
    if ((S->descr = cf_py_descr_from_dtype(S->dt)) == NULL)
        return -1;
    /* init becomes the array's type, as Numba does (arr.dtype.type(init)); the default 0 is
     * all-zero bytes in every dtype, so no scalar is made for it per call (~0.3 us) */
    memset(S->init_bytes, 0, sizeof S->init_bytes);
    if (S->init != NULL) {
        S->init_scalar = PyObject_CallOneArg((PyObject *)S->descr->typeobj, S->init);
        if (S->init_scalar == NULL)
            return -1;
        if (!PyArray_IsScalar(S->init_scalar, Generic)) {
            PyErr_SetString(PyExc_TypeError,
                            "reduce: init could not be converted to the array's dtype");
            return -1;
        }
        PyArray_ScalarAsCtype(S->init_scalar, S->init_bytes);
    }
    if (S->res != Py_None && rc_res(c, S->res) < 0)
        return -1;
    if (reducer_loop(self, S->dt, &S->loop) < 0)
        return -1;
    if (cf_array_size(&c->in[0].view) == 0 && S->res == Py_None) {
        /* Numba's answer, with no work on the device */
        c->result = S->init_scalar ? Py_NewRef(S->init_scalar)
                                   : PyArray_Scalar(S->init_bytes, S->descr, NULL);
        return c->result ? 0 : -1;
    }
    return 0;
}

/* The value into res=, or (none given) into a 16-byte pool temporary and back with one
 * synchronous copy: the launch gives the result itself. */
static int rc_launch(cf_py_call *c)
{
    CfPyReducer *self = (CfPyReducer *)c->self;
    rc_state *S = RC_STATE(c);
    const cf_array *a = &c->in[0].view;
    cf_stream *s = c->pl.s;
    cf_status st = CF_OK;
    if (S->res != Py_None) {
        uint64_t dst = c->out[0].view.data;
        Py_BEGIN_ALLOW_THREADS
        st = cf_reduce_all(self->r, S->loop, s, a, dst, S->dt, S->init_bytes);
        Py_END_ALLOW_THREADS
        if (st != CF_OK)
            return cf_py_fail(st, c->name);
        c->result = Py_NewRef(Py_None);
        return 0;
    }
    if (c->pl.capturing) /* the scalar would need a host wait */
        return cf_py_capture_refuse(c->name, "a reduction returning a host scalar",
                                    "pass res=, a one-element device array that receives the "
                                    "result on the device");
    unsigned char host[16] = {0};
    uint64_t tmp = 0;
    Py_BEGIN_ALLOW_THREADS
    st = cf_mem_alloc(s, 16, &tmp);
    if (st == CF_OK)
        st = cf_reduce_all(self->r, S->loop, s, a, tmp, S->dt, S->init_bytes);
    if (st == CF_OK)
        st = cf_memcpy_dtoh(s, host, tmp, cf_dtype_size(S->dt), 1);
    if (tmp) {
        cf_status fst = cf_mem_free(s, tmp);
        if (st == CF_OK)
            st = fst;
    }
    Py_END_ALLOW_THREADS
    if (st != CF_OK)
        return cf_py_fail(st, c->name);
    c->result = PyArray_Scalar(host, S->descr, NULL);
    return c->result ? 0 : -1;
}

static const cf_py_engine RC_ENGINE = {
    .prepare = rc_prepare,
    .in_place_ok = 0, /* res inside arr: reduce a copy (a reduction reads elements after others
                       * are written) */
    .launch = rc_launch,
};

/* reducer(arr, size=None, res=None, init=0, stream=0) */
static PyObject *reducer_call(CfPyReducer *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"arr", "size", "res", "init", "stream", NULL};
    static const char *const IN_NAMES[] = {"arr"}, *const OUT_NAMES[] = {"res"};
    rc_state S = {.size = Py_None, .res = Py_None};
    PyObject *stream = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOOO:reduce", kw, &S.call_arr, &S.size,
                                     &S.res, &S.init, &stream))
        return NULL;
    PyObject *r;
    int ov = cf_py_override_dask((PyObject *)self, CF_PY_HOOK_dask_reduce_all, S.call_arr, args,
                                 kwargs, &r);
    if (ov != 0) /* a dask array: a lazy reduction (cufunc/_dask.py) */
        return ov > 0 ? r : NULL;
    const char *name = PyUnicode_AsUTF8(self->name);
    if (name == NULL)
        return NULL;
    cf_py_call c;
    cf_py_call_init(&c, &RC_ENGINE, self, &S, name, NULL, 1, 1, NULL, stream);
    c.in_names = IN_NAMES;
    c.out_names = OUT_NAMES;
    PyObject *result = cf_py_call_run(&c);
    Py_XDECREF(S.init_scalar);
    Py_XDECREF(S.descr);
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
     "add_loop($self, dtype, source, fn_name, options=None, captures=None, /)\n"
     "--\n"
     "\n"
     "Add the loop of one dtype, written in CUDA C (what ``cuda.reduce`` does).\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "dtype : dtype_like\n"
     "    The type of the arrays it reduces.\n"
     "source : str\n"
     "    CUDA C source defining ``fn_name(dtype, dtype) -> dtype``.\n"
     "fn_name : str\n"
     "    The function's name in ``source``.\n"
     "options : sequence of str, optional\n"
     "    NVRTC options.\n"
     "captures : sequence of tuple, optional\n"
     "    ``(symbol, device array, label)`` for each device array the source captures.\n"},
    {NULL},
};

static PyGetSetDef reducer_getset[] = {
    {"__name__", (getter)reducer_get_name, NULL, "the reduction's name", NULL},
    {"compiler", (getter)reducer_get_compiler, NULL,
     "The loop compiler, or None.", NULL},
    {"kernel_count", (getter)reducer_get_kernel_count, NULL,
     "The number of kernels specialised so far.", NULL},
    {"types", (getter)reducer_get_types, NULL,
     "The dtypes with a loop.", NULL},
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
     * would: lazy), not in an earlier loop the type casts into */
    int dynamic = uf->compiler != NULL && uf->compiler != Py_None;
    cf_loops_query q = {CF_LOOPS_NUMPY, 2, 1, in, NULL, dynamic, -1, CF_CAST_SAFE};
    cf_status st = cf_ufunc_resolve_query(uf->uf, &q, &loop);
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
        q.lazy = 0;
        st = cf_ufunc_resolve_query(uf->uf, &q, &loop);
    }
    if (st != CF_OK)
        return cf_py_fail(st == CF_ERR_TYPE ? st : st, NULL);
    cf_ufunc_loop_types(uf->uf, loop, t);
    if (!exact && t[0] == t[1] && t[1] != t[2] && t[2] != want && !dynamic &&
        uf->accumulator == CF_ACC_LOGICAL) {
        /* NumPy's logical ufuncs reduce any type in their bool loop (its logical promoter), the
         * elements cast to bool as they are loaded; comparisons refuse, as NumPy does */
        cf_dtype in2[2] = {t[2], t[2]};
        cf_loops_query q2 = {CF_LOOPS_NUMPY, 2, 1, in2, NULL, 0, -1, CF_CAST_SAFE};
        int loop2 = cf_ufunc_find(uf->uf, &q2);
        if (loop2 >= 0) {
            cf_dtype t2[3];
            cf_ufunc_loop_types(uf->uf, loop2, t2);
            if (t2[0] == t[2] && t2[1] == t[2] && t2[2] == t[2]) {
                loop = loop2;
                memcpy(t, t2, sizeof t);
            }
        }
    }
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

/* The accumulator and loop of a reduce or accumulate call: dtype= when given (then exactly that
 * type), else out='s dtype, else the ufunc's default for the input's dtype `in`. */
static int method_loop(CfPyUFunc *uf, PyObject *dtype, const cf_py_call *c, cf_dtype in,
                       const char *method, cf_reducer **red, int *rloop, cf_dtype *acc)
{
    cf_dtype want;
    int exact = 0;
    if (dtype != Py_None) {
        if (cf_py_dtype_from_object(dtype, &want, NULL, "dtype") < 0)
            return -1;
        exact = 1;
    } else if (c->outs[0] != NULL) {
        want = c->out[0].view.dtype;
    } else {
        want = cf_loops_reduce_dtype(uf->accumulator, in);
    }
    return ufunc_reduce_loop(uf, want, exact, method, red, rloop, acc);
}

static int is_number(PyObject *v)
{
    return PyLong_Check(v) || PyFloat_Check(v) || PyComplex_Check(v) ||
           PyArray_IsScalar(v, Generic);
}

/* UFunc.reduce / accumulate's state of one call, beside the pipeline's. */
typedef struct {
    const char *method;    /* "reduce", "accumulate" */
    PyObject *array, *axis, *dtype, *out, *initial, *where; /* the call's arguments (borrowed) */
    int keepdims;
    cf_reducer *red;
    int rloop;
    cf_dtype acc;
    unsigned char reduced[CF_MAX_DIMS]; /* reduce: the reduced axes */
    int ax;                             /* accumulate: the axis */
    int rndim;
    int64_t rshape[CF_MAX_DIMS];        /* the result's shape */
    unsigned char init[16];
    int has_init;
} rd_state;

#define RD_STATE(c) ((rd_state *)(c)->state)

/* The array, the axes, out= (None, an array, or a 1-tuple holding one) and the loop: what reduce
 * and accumulate share. */
static int rd_classify(cf_py_call *c)
{
    rd_state *S = RD_STATE(c);
    const int scan = S->method[0] == 'a';
    cf_py_arg_reset(&c->out[0], NULL);
    c->out[0].kind = CF_PY_ARG_NONE; /* not given */
    c->nin_done = c->nout_done = 1;
    if (red_classify(S->array, &c->in[0], "array") < 0)
        return -1;
    const int ndim = c->in[0].view.ndim;
    c->any_device = c->in[0].kind == CF_PY_ARG_DEVICE;
    if (scan) {
        if (ndim == 0) {
            PyErr_SetString(PyExc_TypeError, "cannot accumulate on a scalar");
            return -1;
        }
        S->ax = 0;
        if (S->axis != NULL) {
            if (S->axis == Py_None || (PyTuple_Check(S->axis) && PyTuple_GET_SIZE(S->axis) != 1)) {
                PyErr_SetString(PyExc_ValueError, "accumulate does not allow multiple axes");
                return -1;
            }
            if (parse_axes(S->axis, ndim, S->reduced) < 0)
                return -1;
            for (int k = 0; k < ndim; k++)
                if (S->reduced[k])
                    S->ax = k;
        }
    } else {
        PyObject *zero = S->axis == NULL ? PyLong_FromLong(0) : NULL;
        int nred = S->axis || zero ? parse_axes(S->axis ? S->axis : zero, ndim, S->reduced) : -1;
        Py_XDECREF(zero);
        if (nred < 0)
            return -1;
    }
    PyObject *out = S->out;
    if (PyTuple_Check(out)) {
        if (PyTuple_GET_SIZE(out) != 1) {
            PyErr_SetString(PyExc_ValueError, "The 'out' tuple must have exactly one entry");
            return -1;
        }
        out = PyTuple_GET_ITEM(out, 0);
    }
    if (out != Py_None) {
        c->outs[0] = out;
        if (cf_py_call_classify_out(c, 0, "out", S->method) < 0)
            return -1;
    }
    c->host_result = !c->any_device;
    c->scalar_results = 1;
    return method_loop((CfPyUFunc *)c->self, S->dtype, c, c->in[0].view.dtype, S->method,
                       &S->red, &S->rloop, &S->acc);
}

/* The initial value (initial=, else the identity; initial=None means none) and where=. */
static int rd_initial_where(cf_py_call *c)
{
    CfPyUFunc *self = (CfPyUFunc *)c->self;
    rd_state *S = RD_STATE(c);
    S->has_init = 0;
    PyObject *iv = S->initial ? S->initial : self->identity;
    if (iv != NULL && iv != Py_None && (S->initial != NULL || is_number(iv))) {
        if (value_bytes(iv, S->acc, S->init) < 0)
            return -1;
        S->has_init = 1;
    }
    if (S->where == Py_True)
        return 0;
    if (!S->has_init) {
        PyErr_Format(PyExc_ValueError, "reduction operation '%s' does not have an identity, "
                     "so to use a where mask one has to specify 'initial'", c->name);
        return -1;
    }
    c->have_where = 1;
    if (red_classify(S->where, &c->where, "where") < 0)
        return -1;
    c->any_device |= c->where.kind == CF_PY_ARG_DEVICE;
    c->host_result = !c->any_device;
    if (c->where.view.dtype != CF_BOOL) {
        PyErr_Format(PyExc_TypeError, "Cannot cast array data from dtype('%s') to "
                     "dtype('bool') according to the rule 'safe'", cf_dtype_name(c->where.view.dtype));
        return -1;
    }
    return 0;
}

/* Steps 1-3 of UFunc.reduce. */
static int rd_prepare(cf_py_call *c)
{
    rd_state *S = RD_STATE(c);
    if (rd_classify(c) < 0 || rd_initial_where(c) < 0)
        return -1;
    const cf_array *a = &c->in[0].view;
    const cf_array *o = &c->out[0].view;
    int64_t n_out = 1, n_red = 1;
    S->rndim = 0;
    for (int k = 0; k < a->ndim; k++) {
        int64_t e = S->reduced[k] ? 1 : a->shape[k];
        if (S->reduced[k])
            n_red *= a->shape[k];
        else
            n_out *= a->shape[k];
        if (!S->reduced[k] || S->keepdims)
            S->rshape[S->rndim++] = e;
    }
    if (n_red == 0 && n_out > 0 && !S->has_init) {
        PyErr_Format(PyExc_ValueError, "zero-size array to reduction operation %s which has no "
                     "identity", c->name);
        return -1;
    }
    if (c->outs[0] != NULL) {
        if (o->ndim != S->rndim) {
            PyErr_Format(PyExc_ValueError, "output parameter for reduction operation %s has the "
                         "wrong number of dimensions: Found %d but expected %d%s", c->name,
                         o->ndim, S->rndim, S->keepdims ? " (must match the operand's when "
                         "keepdims=True)" : "");
            return -1;
        }
        if (!shapes_equal(o->ndim, o->shape, S->rndim, S->rshape)) {
            PyObject *f = cf_py_tuple_from_int64(o->ndim, o->shape);
            PyObject *e = cf_py_tuple_from_int64(S->rndim, S->rshape);
            if (f && e)
                PyErr_Format(PyExc_ValueError, "output parameter for reduction operation %s has "
                             "the wrong shape: Found %R but expected %R", c->name, f, e);
            Py_XDECREF(f);
            Py_XDECREF(e);
            return -1;
        }
    }
    if (c->host_out && c->any_device) {
        PyErr_Format(PyExc_TypeError, "reduce of ufunc '%s': out= is a host (NumPy) array but an "
                     "input is on the device; pass a device array as out=", c->name);
        return -1;
    }
    return 0;
}

/* out= of accumulate or reduceat: NumPy's shape error, and on the device when `inputs` are ("the
 * input is", "an input is"). */
static int check_method_out(cf_py_call *c, const char *method, int ndim, const int64_t *shape,
                            const char *inputs)
{
    const cf_array *o = &c->out[0].view;
    if (c->outs[0] != NULL && !shapes_equal(o->ndim, o->shape, ndim, shape)) {
        PyObject *f = cf_py_tuple_from_int64(o->ndim, o->shape);
        PyObject *e = cf_py_tuple_from_int64(ndim, shape);
        if (f && e)
            PyErr_Format(PyExc_ValueError, "output parameter for %s of %s has the wrong shape: "
                         "Found %R but expected %R", method, c->name, f, e);
        Py_XDECREF(f);
        Py_XDECREF(e);
        return -1;
    }
    if (c->host_out && c->any_device) {
        PyErr_Format(PyExc_TypeError, "%s of ufunc '%s': out= is a host (NumPy) array but %s on "
                     "the device; pass a device array as out=", method, c->name, inputs);
        return -1;
    }
    return 0;
}

/* Steps 1-3 of UFunc.accumulate. */
static int ac_prepare(cf_py_call *c)
{
    rd_state *S = RD_STATE(c);
    if (rd_classify(c) < 0)
        return -1;
    const cf_array *a = &c->in[0].view;
    S->rndim = a->ndim;
    memcpy(S->rshape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
    return check_method_out(c, "accumulate", a->ndim, a->shape, "the input is");
}

/* The result in the accumulator type, or a host out='s (its values come back as they are). */
static PyObject *rd_alloc_out(cf_py_call *c, int o)
{
    rd_state *S = RD_STATE(c);
    cf_dtype dt = c->out[0].kind == CF_PY_ARG_HOST ? c->out[0].view.dtype : S->acc;
    return cf_py_devicearray_alloc(S->rndim, S->rshape, dt, 'C', c->pl.device, c->pl.for_arrays);
}

static int rd_out_shape(cf_py_call *c, int o, cf_dtype *dt, int *ndim, int64_t *shape)
{
    const rd_state *S = RD_STATE(c);
    *dt = S->acc;
    *ndim = S->rndim;
    memcpy(shape, S->rshape, sizeof(int64_t) * (size_t)S->rndim);
    return 0;
}

static int rd_launch(cf_py_call *c)
{
    rd_state *S = RD_STATE(c);
    const cf_array *ov = &c->out[0].view;
    const int ndim = c->in[0].view.ndim;
    /* out in the keepdims shape: extent 1, stride 0 on the reduced axes */
    cf_array kv;
    cf_py_view_copy(&kv, ov);
    kv.ndim = ndim;
    for (int k = 0, j = 0; k < ndim; k++) {
        if (S->reduced[k] && !S->keepdims) {
            kv.shape[k] = 1;
            kv.strides[k] = 0;
        } else {
            kv.shape[k] = ov->shape[j];
            kv.strides[k] = ov->strides[j];
            j++;
        }
    }
    cf_status st;
    const cf_array *w = c->have_where ? &c->where.view : NULL;
    Py_BEGIN_ALLOW_THREADS
    st = cf_reduce_launch(S->red, S->rloop, c->pl.s, &c->in[0].view, S->reduced, &kv, w,
                          S->has_init ? S->init : NULL);
    Py_END_ALLOW_THREADS
    return st == CF_OK ? 0 : cf_py_fail(st, c->name);
}

static int ac_launch(cf_py_call *c)
{
    rd_state *S = RD_STATE(c);
    cf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cf_scan_launch(S->red, S->rloop, c->pl.s, &c->in[0].view, S->ax, &c->out[0].view);
    Py_END_ALLOW_THREADS
    return st == CF_OK ? 0 : cf_py_fail(st, c->name);
}

/* An output that shares memory with the array (out= a row or column of it) or the mask: reduce
 * copies of them, as NumPy defines the call (blocks read elements that others have already
 * written, and a split reduction writes partials in any order). */
static const cf_py_engine RD_ENGINE = {
    .prepare = rd_prepare,
    .alloc_out = rd_alloc_out,
    .out_shape = rd_out_shape,
    .in_place_ok = 0,
    .launch = rd_launch,
};

/* An output that shares memory with the array: scan a copy, as NumPy defines the call, unless it
 * is the very same view (out=array): a scan loads each tile whole before it stores it and reads no
 * other tile's elements, and a column scan reads each element before it writes it. */
static const cf_py_engine AC_ENGINE = {
    .prepare = ac_prepare,
    .alloc_out = rd_alloc_out,
    .out_shape = rd_out_shape,
    .in_place_ok = 1,
    .launch = ac_launch,
};

static PyObject *rd_run(CfPyUFunc *self, const cf_py_engine *engine, rd_state *S,
                        PyObject *stream)
{
    static const char *const IN_NAMES[] = {"array"}, *const OUT_NAMES[] = {"out"};
    const char *name = PyUnicode_AsUTF8(self->name);
    if (name == NULL)
        return NULL;
    cf_py_call c;
    cf_py_call_init(&c, engine, self, S, name, NULL, 1, 1, NULL, stream);
    c.in_names = IN_NAMES;
    c.out_names = OUT_NAMES;
    return cf_py_call_run(&c);
}

/* NumPy's refusal of reduce, accumulate and reduceat on a ufunc that is not binary with one
 * output. */
static int check_binary(const CfPyUFunc *self, const char *method)
{
    if (self->nin != 2) {
        PyErr_Format(PyExc_ValueError, "%s only supported for binary functions", method);
        return -1;
    }
    if (self->nout != 1) {
        PyErr_Format(PyExc_ValueError, "%s only supported for functions returning a single value",
                     method);
        return -1;
    }
    return 0;
}

PyObject *cf_py_ufunc_reduce(PyObject *selfobj, PyObject *args, PyObject *kwargs)
{
    CfPyUFunc *self = (CfPyUFunc *)selfobj;
    static char *kw[] = {"array", "axis", "dtype", "out", "keepdims", "initial", "where", "stream",
                         NULL};
    rd_state S = {.method = "reduce", .dtype = Py_None, .out = Py_None, .where = Py_True};
    PyObject *stream = NULL;
    if (check_binary(self, "reduce") < 0)
        return NULL;
    PyObject *r;
    int ov = cf_py_override_tp(selfobj, "reduce", 1, args, kwargs, &r);
    if (ov != 0) /* NEP 13 (py_override.h) */
        return ov > 0 ? r : NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOOpOOO:reduce", kw, &S.array, &S.axis,
                                     &S.dtype, &S.out, &S.keepdims, &S.initial, &S.where, &stream))
        return NULL;
    return rd_run(self, &RD_ENGINE, &S, stream);
}

PyObject *cf_py_ufunc_accumulate(PyObject *selfobj, PyObject *args, PyObject *kwargs)
{
    CfPyUFunc *self = (CfPyUFunc *)selfobj;
    static char *kw[] = {"array", "axis", "dtype", "out", "stream", NULL};
    rd_state S = {.method = "accumulate", .dtype = Py_None, .out = Py_None, .where = Py_True};
    PyObject *stream = NULL;
    if (check_binary(self, "accumulate") < 0)
        return NULL;
    PyObject *r;
    int ov = cf_py_override_tp(selfobj, "accumulate", 1, args, kwargs, &r);
    if (ov != 0) /* NEP 13 (py_override.h) */
        return ov > 0 ? r : NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOOO:accumulate", kw, &S.array, &S.axis,
                                     &S.dtype, &S.out, &stream))
        return NULL;
    return rd_run(self, &AC_ENGINE, &S, stream);
}

/* ---- UFunc.reduceat ------------------------------------------------------------------------- */

/* reduceat's state: reduce's (the result's shape, the loop, `ax`), and the indices. */
typedef struct {
    rd_state r;
    PyObject *indices;     /* the call's argument (borrowed) */
    int device_indices;    /* given on the device: checked there, at launch */
} rat_state;

/* NumPy's words for an index outside the axis. */
static int rat_index_error(const cf_py_call *c, long long value, long long n)
{
    PyErr_Format(PyExc_IndexError, "index %lld out-of-bounds in %s.reduceat [0, %lld)", value,
                 c->name, n);
    return -1;
}

/* The indices into c->in[1]: a device array as it is (an integer or bool dtype NumPy casts to
 * intp safely, 1-d), anything else as NumPy converts it (intp, 1-d, its errors) and checked here. */
static int rat_indices(cf_py_call *c, int64_t n)
{
    rat_state *S = (rat_state *)c->state;
    cf_py_arg *a = &c->in[1];
    cf_py_arg_reset(a, S->indices);
    c->nin_done = 2;
    PyObject *obj = S->indices;
    int device_like = Py_TYPE(obj) == &CfPyDeviceArray_Type ||
                      PyObject_HasAttrString(obj, "__cuda_array_interface__");
    if (device_like) {
        if (cf_py_arg_classify(obj, a, "indices") < 0)
            return -1;
        if (a->kind == CF_PY_ARG_DEVICE) {
            char k = cf_dtype_kind(a->view.dtype);
            if ((k != 'i' && k != 'u' && a->view.dtype != CF_BOOL) || a->view.dtype == CF_UINT64) {
                PyErr_Format(PyExc_TypeError, "Cannot cast array data from dtype('%s') to "
                             "dtype('int64') according to the rule 'safe'",
                             cf_dtype_name(a->view.dtype));
                return -1;
            }
            if (a->view.ndim != 1) {
                PyErr_SetString(PyExc_ValueError, "reduceat: indices must be 1-dimensional");
                return -1;
            }
            S->device_indices = 1;
            c->any_device = 1;
            return 0;
        }
        cf_py_arg_clear(a);
        cf_py_arg_reset(a, obj);
    }
    PyArray_Descr *d = PyArray_DescrFromType(NPY_INTP);
    PyObject *arr = PyArray_FromAny(obj, d, 1, 1, NPY_ARRAY_CARRAY, NULL); /* steals d */
    if (arr == NULL)
        return -1;
    a->keep = arr;
    a->dtype = CF_INT64;
    cf_py_arg_host_view(a, (PyArrayObject *)arr);
    const npy_intp *v = (const npy_intp *)PyArray_DATA((PyArrayObject *)arr);
    for (npy_intp i = 0; i < PyArray_DIM((PyArrayObject *)arr, 0); i++)
        if (v[i] < 0 || v[i] >= n)
            return rat_index_error(c, (long long)v[i], (long long)n);
    c->any_host = 1;
    return 0;
}

/* Steps 1-3 of UFunc.reduceat. */
static int rat_prepare(cf_py_call *c)
{
    rat_state *S = (rat_state *)c->state;
    rd_state *R = &S->r;
    cf_py_arg_reset(&c->out[0], NULL);
    c->out[0].kind = CF_PY_ARG_NONE;
    c->nin_done = c->nout_done = 1;
    if (red_classify(R->array, &c->in[0], "array") < 0)
        return -1;
    const cf_array *a = &c->in[0].view;
    if (a->ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "cannot reduceat on a scalar");
        return -1;
    }
    c->any_device = c->in[0].kind == CF_PY_ARG_DEVICE;
    if (R->axis == Py_None || (PyTuple_Check(R->axis) && PyTuple_GET_SIZE(R->axis) != 1)) {
        PyErr_SetString(PyExc_ValueError, "reduceat does not allow multiple axes");
        return -1;
    }
    if (parse_axes(R->axis, a->ndim, R->reduced) < 0)
        return -1;
    for (int k = 0; k < a->ndim; k++)
        if (R->reduced[k])
            R->ax = k;
    if (rat_indices(c, a->shape[R->ax]) < 0)
        return -1;
    PyObject *out = R->out;
    if (PyTuple_Check(out)) {
        if (PyTuple_GET_SIZE(out) != 1) {
            PyErr_SetString(PyExc_ValueError, "The 'out' tuple must have exactly one entry");
            return -1;
        }
        out = PyTuple_GET_ITEM(out, 0);
    }
    if (out != Py_None) {
        c->outs[0] = out;
        if (cf_py_call_classify_out(c, 0, "out", "reduceat") < 0)
            return -1;
    }
    c->host_result = !c->any_device;
    c->scalar_results = 0;
    R->rndim = a->ndim;
    memcpy(R->rshape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
    R->rshape[R->ax] = c->in[1].view.shape[0];
    if (check_method_out(c, "reduceat", R->rndim, R->rshape, "an input is") < 0)
        return -1;
    return method_loop((CfPyUFunc *)c->self, R->dtype, c, a->dtype, "reduceat", &R->red,
                       &R->rloop, &R->acc);
}

static int rat_launch(cf_py_call *c)
{
    rat_state *S = (rat_state *)c->state;
    rd_state *R = &S->r;
    cf_status st = CF_OK;
    int64_t n = c->in[0].view.shape[R->ax], bad = -1, value = 0;
    if (S->device_indices && c->pl.capturing) /* the check would need a host wait */
        return cf_py_capture_refuse(c->name, "reduceat with device indices (their bounds check "
                                    "waits for the device)", "call it before or after the "
                                    "capture");
    Py_BEGIN_ALLOW_THREADS
    if (S->device_indices)
        /* checked on the device, the reduction queued behind the check (it writes nothing when
         * an index lies outside); the wait is for the check alone */
        st = cf_reduceat_launch_checked(R->red, R->rloop, c->pl.s, &c->in[0].view, R->ax,
                                        &c->in[1].view, &c->out[0].view, &bad, &value);
    else
        st = cf_reduceat_launch(R->red, R->rloop, c->pl.s, &c->in[0].view, R->ax,
                                &c->in[1].view, &c->out[0].view);
    Py_END_ALLOW_THREADS
    if (st != CF_OK)
        return cf_py_fail(st, c->name);
    if (bad >= 0)
        return rat_index_error(c, (long long)value, (long long)n);
    return 0;
}

/* Outputs sharing memory with the array or the indices: computed from copies (NumPy's meaning). */
static const cf_py_engine RAT_ENGINE = {
    .prepare = rat_prepare,
    .alloc_out = rd_alloc_out,
    .out_shape = rd_out_shape,
    .in_place_ok = 0,
    .launch = rat_launch,
};

PyObject *cf_py_ufunc_reduceat(PyObject *selfobj, PyObject *args, PyObject *kwargs)
{
    CfPyUFunc *self = (CfPyUFunc *)selfobj;
    static char *kw[] = {"array", "indices", "axis", "dtype", "out", "stream", NULL};
    static const char *const IN_NAMES[] = {"array", "indices"}, *const OUT_NAMES[] = {"out"};
    rat_state S = {.r = {.method = "reduceat", .dtype = Py_None, .out = Py_None,
                         .where = Py_True}};
    PyObject *stream = NULL;
    if (check_binary(self, "reduceat") < 0)
        return NULL;
    PyObject *r;
    int ov = cf_py_override_tp(selfobj, "reduceat", 2, args, kwargs, &r);
    if (ov != 0) /* NEP 13 (py_override.h) */
        return ov > 0 ? r : NULL;
    S.r.axis = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OOOO:reduceat", kw, &S.r.array, &S.indices,
                                     &S.r.axis, &S.r.dtype, &S.r.out, &stream))
        return NULL;
    PyObject *zero = NULL;
    if (S.r.axis == NULL)
        S.r.axis = zero = PyLong_FromLong(0);
    if (S.r.axis == NULL)
        return NULL;
    const char *name = PyUnicode_AsUTF8(self->name);
    if (name == NULL) {
        Py_XDECREF(zero);
        return NULL;
    }
    cf_py_call c;
    cf_py_call_init(&c, &RAT_ENGINE, self, &S, name, NULL, 2, 1, NULL, stream);
    c.in_names = IN_NAMES;
    c.out_names = OUT_NAMES;
    PyObject *res = cf_py_call_run(&c);
    Py_XDECREF(zero);
    return res;
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
