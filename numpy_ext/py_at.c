/* py_at.c: the binding of the ufunc.at engine (include/cufunc/at.h) for cufunc/_at.py, which
 * picks the loop, normalises the indices and values and calls these:
 *   _at_engine(source, fn_name, options) -> an engine (capsule) for one loop
 *   _at_source(engine, call) -> the kernel's CUDA C (no GPU)
 *   _at_launch(engine, call, device) -> None, on the legacy default stream, waiting for it
 *   _at_pick_mode(op, same_types, dtype) -> cf_at_pick_mode
 * call = (nin, (t0, t1, t2), a, a_type, extent, inner, a_index, a_inner, index, index_type,
 *         nindex, b, b_type, b_index, b_inner, mode): dtypes by name, addresses as ints. */
#include "py_common.h"
#include "py_call.h"
#include "py_twins.h"
#include "cufunc/at.h"

#define AT_CAPSULE "cufunc._at_engine"

static void engine_free(PyObject *cap)
{
    cf_at_destroy((cf_at *)PyCapsule_GetPointer(cap, AT_CAPSULE));
}

static PyObject *py_at_engine(PyObject *self, PyObject *args)
{
    const char *source, *fn_name;
    PyObject *options, *seq = NULL;
    const char *opts[64];
    int nopts = 0;
    cf_at *at = NULL;
    if (!PyArg_ParseTuple(args, "ssO:_at_engine", &source, &fn_name, &options))
        return NULL;
    if (cf_py_loop_options(options, opts, &nopts, &seq, "_at_engine") < 0)
        return NULL;
    cf_status st = cf_at_create(source, fn_name, opts, nopts, NULL, 0, &at);
    Py_XDECREF(seq);
    if (st) {
        cf_py_fail(st, NULL);
        return NULL;
    }
    PyObject *cap = PyCapsule_New(at, AT_CAPSULE, engine_free);
    if (cap == NULL)
        cf_at_destroy(at);
    return cap;
}

static int dtype_arg(const char *name, cf_dtype *out)
{
    if (cf_dtype_from_name(name, out) != CF_OK) {
        PyErr_Format(PyExc_TypeError, "ufunc.at: unsupported dtype %s", name);
        return -1;
    }
    return 0;
}

static int parse_call(PyObject *engine, PyObject *call, cf_at **at, cf_at_call *c)
{
    const char *t0, *t1, *t2, *at_, *it, *bt;
    unsigned long long a, index, b;
    long long extent, inner, a_index, a_inner, nindex, b_index, b_inner;
    int mode;
    if ((*at = PyCapsule_GetPointer(engine, AT_CAPSULE)) == NULL)
        return -1;
    memset(c, 0, sizeof *c);
    if (!PyArg_ParseTuple(call, "i(sss)KsLLLLKsLKsLLi:ufunc.at call", &c->nin, &t0, &t1, &t2, &a,
                          &at_, &extent, &inner, &a_index, &a_inner, &index, &it, &nindex, &b,
                          &bt, &b_index, &b_inner, &mode))
        return -1;
    if (dtype_arg(t0, &c->types[0]) < 0 || dtype_arg(t1, &c->types[1]) < 0 ||
        dtype_arg(t2, &c->types[2]) < 0 || dtype_arg(at_, &c->a_type) < 0 ||
        dtype_arg(it, &c->index_type) < 0 || dtype_arg(bt, &c->b_type) < 0)
        return -1;
    c->a = a;
    c->extent = extent;
    c->inner = inner;
    c->a_index = a_index;
    c->a_inner = a_inner;
    c->index = index;
    c->nindex = nindex;
    c->b = b;
    c->b_index = b_index;
    c->b_inner = b_inner;
    c->mode = (cf_at_mode)mode;
    return 0;
}

static PyObject *py_at_source(PyObject *self, PyObject *args)
{
    PyObject *engine, *call;
    cf_at *at;
    cf_at_call c;
    char *src = NULL;
    if (!PyArg_ParseTuple(args, "OO:_at_source", &engine, &call) ||
        parse_call(engine, call, &at, &c) < 0)
        return NULL;
    cf_status st = cf_at_kernel_source(at, &c, &src);
    if (st) {
        cf_py_fail(st, NULL);
        return NULL;
    }
    PyObject *r = PyUnicode_FromString(src);
    cf_free_buffer(src);
    return r;
}

static PyObject *py_at_launch(PyObject *self, PyObject *args)
{
    PyObject *engine, *call;
    int device;
    cf_at *at;
    cf_at_call c;
    cf_stream *s;
    if (!PyArg_ParseTuple(args, "OOi:_at_launch", &engine, &call, &device) ||
        parse_call(engine, call, &at, &c) < 0)
        return NULL;
    /* the legacy default stream, or the Stream this thread captures a CUDA graph on */
    PyObject *own = cf_py_capture_own();
    if (own != NULL && ((CfPyStream *)own)->device != device)
        own = NULL;
    if (cf_py_cuda_init("ufunc.at") < 0 || cf_py_stream_get(own, device, &s) < 0)
        return NULL;
    cf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cf_at_launch(at, &c, s, device);
    cf_context_restore(); /* the thread's current device as the caller left it (runtime.h) */
    Py_END_ALLOW_THREADS
    if (st) {
        cf_py_fail(st, NULL);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *py_at_pick_mode(PyObject *self, PyObject *args)
{
    int op, same;
    const char *name;
    cf_dtype t;
    if (!PyArg_ParseTuple(args, "iis:_at_pick_mode", &op, &same, &name) || dtype_arg(name, &t) < 0)
        return NULL;
    return PyLong_FromLong((long)cf_at_pick_mode((cf_at_op)op, same, t));
}

PyMethodDef cf_py_at_methods[] = {
    {"_at_engine", py_at_engine, METH_VARARGS, "_at_engine(source, fn_name, options): ufunc.at "
     "engine of one loop."},
    {"_at_source", py_at_source, METH_VARARGS, "_at_source(engine, call): the kernel's CUDA C."},
    {"_at_launch", py_at_launch, METH_VARARGS, "_at_launch(engine, call, device): run ufunc.at."},
    {"_at_pick_mode", py_at_pick_mode, METH_VARARGS, "_at_pick_mode(op, same_types, dtype)."},
    {NULL, NULL, 0, NULL},
};
