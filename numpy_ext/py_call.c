/* py_call.c: the one call pipeline (see py_call.h for its steps) and the lifecycle the UFunc and
 * GUFunc types share. */
#include "py_call.h"

#include <time.h>
#include "py_interop.h"

/* ---- names ---------------------------------------------------------------------------------- */

static char ARG_NAMES[CF_PY_MAX_ARGS + 1][16], OUT_NAMES[CF_PY_MAX_ARGS][16];

const char *cf_py_arg_name(int i)
{
    if (ARG_NAMES[0][0] == '\0')
        for (int k = 0; k <= CF_PY_MAX_ARGS; k++) {
            snprintf(ARG_NAMES[k], sizeof ARG_NAMES[k], "argument %d", k + 1);
            if (k < CF_PY_MAX_ARGS)
                snprintf(OUT_NAMES[k], sizeof OUT_NAMES[k], "out %d", k);
        }
    return ARG_NAMES[i];
}

const char *cf_py_out_name(int o)
{
    cf_py_arg_name(0); /* makes both tables */
    return OUT_NAMES[o];
}

/* ---- step 4: place -------------------------------------------------------------------------- */

/* ---- per-step timing (diagnostics: _core._call_steps) --------------------------------------------
 * Off by default: one flag test per step. On, each step's wall time is summed over the calls (the
 * GIL serialises them), so that a benchmark can say where a call's microseconds go. */

enum { ST_CLASSIFY, ST_PREPARE, ST_PLACE, ST_OUTPUTS, ST_ORDER, ST_LAUNCH, ST_DELIVER, ST_END,
       ST_N };
static const char *const STEP_NAMES[ST_N] = {"classify", "prepare", "place", "outputs",
                                             "order", "launch", "deliver", "end"};
static struct {
    int on;
    uint64_t last, sum[ST_N], calls;
} steps;

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void step_mark(int step)
{
    if (!steps.on)
        return;
    uint64_t t = now_ns();
    steps.sum[step] += t - steps.last;
    steps.last = t;
}

/* _call_steps(on=None, reset=False) -> {step: mean microseconds per call, "calls": n}. */
static PyObject *call_steps(PyObject *mod, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"on", "reset", NULL};
    PyObject *on = Py_None;
    int reset = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Op:_call_steps", kwlist, &on, &reset))
        return NULL;
    PyObject *d = PyDict_New();
    for (int k = 0; d && k < ST_N; k++) {
        PyObject *v = PyFloat_FromDouble(steps.calls ? steps.sum[k] / 1e3 / (double)steps.calls
                                                     : 0.0);
        if (v == NULL || PyDict_SetItemString(d, STEP_NAMES[k], v) < 0)
            Py_CLEAR(d);
        Py_XDECREF(v);
    }
    PyObject *n = d ? PyLong_FromUnsignedLongLong(steps.calls) : NULL;
    if (n == NULL || PyDict_SetItemString(d, "calls", n) < 0)
        Py_CLEAR(d);
    Py_XDECREF(n);
    if (d && on != Py_None) {
        int v = PyObject_IsTrue(on);
        if (v < 0)
            Py_CLEAR(d);
        else
            steps.on = v;
    }
    if (d && reset) {
        memset(steps.sum, 0, sizeof steps.sum);
        steps.calls = 0;
    }
    return d;
}

static int place_resolve(cf_py_place *pl, int device, PyObject *stream, const char *what);

int cf_py_place_resolve(cf_py_place *pl, int device, PyObject *stream, const char *what)
{
    pl->resolved = NULL;
    pl->capturing = 0;
    if (stream && cf_py_stream_check(stream, "stream") < 0)
        return -1;
    if (cf_py_cuda_init(what) < 0)
        return -1;
    PyObject *capture = NULL; /* the stream a call without stream= is captured on */
    if ((stream == NULL || stream == Py_None) && cf_py_capture_pending()) {
        if ((capture = cf_py_capture_default(device)) == NULL)
            return -1;
        stream = capture;
    }
    int r = place_resolve(pl, device, stream, what);
    Py_XDECREF(capture);
    return r;
}

/* cf_py_place_resolve once the stream is known. */
static int place_resolve(cf_py_place *pl, int device, PyObject *stream, const char *what)
{
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
    if (cf_py_capture_stream_status(pl->resolved, pl->s, &pl->capturing) < 0)
        return -1;
    if (pl->capturing)
        cf_py_capture_call_enter(pl->s);
    return 0;
}

void cf_py_place_clear(cf_py_place *pl)
{
    Py_CLEAR(pl->resolved);
    if (pl->capturing)
        cf_py_capture_call_leave();
    pl->capturing = 0;
}

/* A device operand must be on the call's device. */
static int check_device(const cf_py_call *c, const cf_py_arg *a, const char *argname)
{
    if (a->kind != CF_PY_ARG_DEVICE || a->view.device == c->pl.device)
        return 0;
    if (c->kind)
        PyErr_Format(PyExc_ValueError, "%s '%s': %s is on device %d, but the call runs on device "
                     "%d", c->kind, c->name, argname, a->view.device, c->pl.device);
    else
        PyErr_Format(PyExc_ValueError, "%s: %s is on device %d, but the call runs on device %d",
                     c->name, argname, a->view.device, c->pl.device);
    return -1;
}

/* The device of the call's device operands (inputs, then outputs, then the mask), or -1. */
static int operand_device(const cf_py_call *c)
{
    for (int i = 0; i < c->nin; i++)
        if (c->in[i].kind == CF_PY_ARG_DEVICE)
            return c->in[i].view.device;
    for (int o = 0; o < c->nout; o++)
        if (c->outs[o] != NULL && c->out[o].kind == CF_PY_ARG_DEVICE)
            return c->out[o].view.device;
    if (c->have_where == 1 && c->where.kind == CF_PY_ARG_DEVICE)
        return c->where.view.device;
    return -1;
}

static int place(cf_py_call *c)
{
    if (cf_py_place_resolve(&c->pl, operand_device(c), c->stream, c->name) < 0)
        return -1;
    for (int i = 0; i < c->nin; i++)
        if (check_device(c, &c->in[i], c->in_names ? c->in_names[i] : cf_py_arg_name(i)) < 0)
            return -1;
    for (int o = 0; o < c->nout; o++)
        if (c->outs[o] != NULL &&
            check_device(c, &c->out[o], c->out_names ? c->out_names[o] : cf_py_out_name(o)) < 0)
            return -1;
    if (c->have_where == 1 && check_device(c, &c->where, "where") < 0)
        return -1;
    /* host operands or results copy and synchronise: refused inside a capture, and while a
     * capture runs that the legacy default stream's copies would break */
    if ((c->any_host || c->host_out || c->host_result) &&
        cf_py_capture_check_host(c->name, c->pl.capturing, c->pl.device) < 0)
        return -1;
    return 0;
}

/* ---- step 5: host inputs move over ---------------------------------------------------------- */

/* An uploaded input whose view was reshaped before (outer's extent-1 axes) keeps that shape: the
 * copy is contiguous in the host array's order, so only the strides change. */
static void reshape_upload(cf_py_arg *a, const cf_array *shaped)
{
    uint64_t data = a->view.data;
    int device = a->view.device;
    int64_t stride = (int64_t)cf_dtype_size(a->dtype);
    a->view = *shaped;
    a->view.data = data;
    a->view.device = device;
    for (int k = shaped->ndim - 1; k >= 0; k--) {
        a->view.strides[k] = shaped->shape[k] == 1 ? 0 : stride;
        stride *= shaped->shape[k] > 0 ? shaped->shape[k] : 1;
    }
}

static int move_host_inputs(cf_py_call *c)
{
    const cf_py_engine *e = c->engine;
    for (int i = 0; i < c->nin; i++) {
        cf_py_arg *a = &c->in[i];
        if (a->kind != CF_PY_ARG_HOST)
            continue;
        cf_array shaped;
        if (c->reshaped)
            shaped = a->view;
        cf_dtype as = e->move_as ? e->move_as(c, i) : a->dtype;
        if (cf_py_arg_upload(a, as, c->pl.device, c->pl.for_arrays, c->pl.s) < 0)
            return -1;
        if (c->reshaped)
            reshape_upload(a, &shaped);
    }
    if (c->have_where == 1 && c->where.kind == CF_PY_ARG_HOST &&
        cf_py_arg_upload(&c->where, c->where.dtype, c->pl.device, c->pl.for_arrays, c->pl.s) < 0)
        return -1;
    return 0;
}

/* ---- the caller's array type: py_interop.c (the rule and the wrappers: cufunc/_interop.py) ---- */

/* Whether arrays of type tp are immutable (JAX's): out= with one is refused, since writing
 * through its interface would change an array JAX assumes never changes. -1: error. */
static int immutable_type(PyTypeObject *tp)
{
    PyObject *mod = PyObject_GetAttrString((PyObject *)tp, "__module__");
    if (mod == NULL) {
        PyErr_Clear();
        return 0;
    }
    const char *m = PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : "";
    int r = m == NULL ? -1 : (strncmp(m, "jax", 3) == 0 &&
                              (m[3] == '\0' || m[3] == '.' || strncmp(m, "jaxlib", 6) == 0));
    Py_DECREF(mod);
    return r;
}

int cf_py_refuse_immutable(const cf_py_call *c, PyObject *obj, const char *argname)
{
    if (CfPyDeviceArray_Check(obj) || PyArray_Check(obj))
        return 0;
    int imm = immutable_type(Py_TYPE(obj));
    if (imm > 0)
        PyErr_Format(PyExc_TypeError, "%s%s%s%s: %s cannot be a JAX array (%.200s): JAX arrays "
                     "are immutable (call without it: results of calls on JAX arrays come back "
                     "as new JAX arrays)", c->kind ? c->kind : "", c->kind ? " '" : "", c->name,
                     c->kind ? "'" : "", argname, Py_TYPE(obj)->tp_name);
    return imm != 0 ? -1 : 0;
}

static PyObject *call_result_wrapper(PyObject *mod, PyObject *inputs)
{
    PyObject *seq = PySequence_Fast(inputs, "_result_wrapper: inputs must be a sequence");
    if (seq == NULL)
        return NULL;
    PyObject *w = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int r = cf_py_result_wrapper(PySequence_Fast_ITEMS(seq),
                                 n > CF_PY_MAX_ARGS ? CF_PY_MAX_ARGS : (int)n, &w);
    Py_DECREF(seq);
    return r < 0 ? NULL : Py_NewRef(w ? w : Py_None);
}

PyMethodDef cf_py_call_methods[] = {
    {"_call_steps", (PyCFunction)(void (*)(void))call_steps, METH_VARARGS | METH_KEYWORDS,
     "_call_steps(on=None, reset=False) -> the mean microseconds per call of each step of the "
     "call pipeline since the last reset (on=True starts timing them; diagnostics)."},
    {"_result_wrapper", (PyCFunction)call_result_wrapper, METH_O,
     "_result_wrapper(inputs) -> the callable that wraps the fresh results of a call on these "
     "inputs (None: cufunc DeviceArrays); the rule of the deliver step, for tests."},
    {NULL, NULL, 0, NULL},
};

/* ---- step 1: inputs ------------------------------------------------------------------------- */

int cf_py_call_classify_inputs(cf_py_call *c, PyObject *const *inputs)
{
    for (int i = 0; i < c->nin; i++, c->nin_done++)
        if (cf_py_arg_classify(inputs[i], &c->in[i], cf_py_arg_name(i)) < 0)
            return -1;
    for (int i = 0; i < c->nin; i++) {
        c->any_device |= c->in[i].kind == CF_PY_ARG_DEVICE;
        c->any_host |= c->in[i].kind == CF_PY_ARG_HOST;
    }
    if (c->numba)
        cf_py_args_numba(c->in, c->nin);
    else
        cf_py_args_nep50(c->in, c->nin);
    step_mark(ST_CLASSIFY);
    return 0;
}

/* ---- step 6: outputs ------------------------------------------------------------------------ */

int cf_py_call_classify_out(cf_py_call *c, int o, const char *argname, const char *method)
{
    cf_py_arg *a = &c->out[o];
    PyObject *obj = c->outs[o];
    if (cf_py_refuse_immutable(c, obj, method ? "out" : argname) < 0)
        return -1;
    /* a device array, read once as the inputs are (torch tensors and CuPy arrays by
     * cf_py_foreign_read, no interface built); plain NumPy arrays skip the lookup */
    int dev = PyArray_CheckExact(obj) ? 1
                                      : cf_py_device_view(obj, &a->view, &a->keep,
                                                          CF_PY_VIEW_ORDER | CF_PY_VIEW_OPTIONAL,
                                                          argname);
    if (dev < 0)
        return -1;
    if (dev == 0) {
        a->kind = CF_PY_ARG_DEVICE;
        a->dtype = a->view.dtype;
        c->any_device = 1;
        return 0;
    }
    if (!PyArray_Check(obj)) {
        if (method)
            PyErr_Format(PyExc_TypeError, "%s: out must be an array (a NumPy array or a device "
                         "array), not %.200s", method, Py_TYPE(obj)->tp_name);
        else
            PyErr_Format(PyExc_TypeError, "return arrays must be of ArrayType (a NumPy array or a "
                         "device array), not %.200s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyArrayObject *h = (PyArrayObject *)obj;
    if (cf_py_dtype_from_descr(PyArray_DESCR(h), &a->dtype, argname) < 0)
        return -1;
    if (!PyArray_ISWRITEABLE(h)) {
        if (method)
            PyErr_SetString(PyExc_ValueError, "output array is read-only");
        else
            PyErr_Format(PyExc_ValueError, "output array %d is read-only", o);
        return -1;
    }
    a->keep = Py_NewRef(obj);
    cf_py_arg_host_view(a, h);
    c->host_out = 1;
    return 0;
}

int cf_py_call_upload_out(cf_py_call *c, int o, PyObject *dev, cf_dtype dt)
{
    PyArray_Descr *d = cf_py_descr_from_dtype(dt);
    PyObject *h = d ? PyArray_FromAny(c->out[o].keep, d, 0, 0, NPY_ARRAY_C_CONTIGUOUS |
                                      NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST, NULL) : NULL;
    if (h == NULL)
        return -1;
    cf_status st;
    uint64_t dst = ((CfPyDeviceArray *)dev)->view.data;
    Py_BEGIN_ALLOW_THREADS
    st = cf_memcpy_htod(c->pl.s, dst, PyArray_DATA((PyArrayObject *)h),
                        (size_t)PyArray_NBYTES((PyArrayObject *)h), 0);
    Py_END_ALLOW_THREADS
    Py_DECREF(h);
    return st == CF_OK ? 0 : cf_py_fail(st, "copying out= to the device");
}

/* The wrapper of the call's fresh device results (the inputs' type rule), looked up once. */
static int call_wrapper(cf_py_call *c, PyObject **wrapper)
{
    if (!c->wrapper_known) {
        PyObject *inputs[CF_PY_MAX_ARGS];
        for (int i = 0; i < c->nin; i++)
            inputs[i] = c->in[i].value;
        if (cf_py_result_wrapper(inputs, c->nin, &c->wrapper) < 0)
            return -1;
        c->wrapper_known = 1;
    }
    *wrapper = c->wrapper;
    return 0;
}

/* Whether the caller's array library makes this call's fresh results (cf_py_lib_alloc_begin):
 * the engine allows it, they stay on the device, and the inputs' type rule names a library that
 * allocates (PyTorch with its DLPack C exchange API, CuPy). 1, 0, -1. */
static int lib_results_begin(cf_py_call *c)
{
    int fresh = 0;
    for (int o = 0; o < c->nout; o++)
        fresh |= c->outs[o] == NULL;
    /* captured on a foreign library's stream, every engine's results come from that library
     * (PyTorch's graph pool keeps their addresses for the replays; memory allocated in the
     * graph itself would have to be freed before the library's next replay) */
    int lib = c->engine->lib_results ||
              (c->pl.capturing && c->engine->out_shape != NULL && !c->no_lib_results);
    if (!lib || c->host_result || !fresh)
        return 0;
    PyObject *wrapper;
    if (call_wrapper(c, &wrapper) < 0)
        return -1;
    c->lib.capturing = c->pl.capturing; /* PyTorch's allocator then: its graph pool */
    return cf_py_lib_alloc_begin(wrapper, c->pl.device, c->pl.s,
                                 cf_py_stream_protocol_handle(c->pl.resolved), &c->lib);
}

/* Fresh output o from the caller's library: its array in res[o], the kernel's view of it. 1: the
 * library could not make it on the call's device (alloc_out does), 0, -1. */
static int lib_result(cf_py_call *c, int o)
{
    cf_py_arg *a = &c->out[o];
    cf_dtype dt;
    int nd;
    int64_t shape[CF_MAX_DIMS];
    uint64_t data;
    if (c->engine->out_shape(c, o, &dt, &nd, shape) < 0)
        return -1;
    if ((c->res[o] = cf_py_lib_alloc_one(&c->lib, nd, shape, dt, c->pl.device, &data)) == NULL)
        return PyErr_Occurred() ? -1 : 1;
    if (cf_array_init_contiguous(&a->view, data, dt, nd, shape, 'C', c->pl.device) != CF_OK)
        return cf_py_fail(cf_last_status(), "a result made by the caller's library");
    a->dtype = dt;
    c->lib_out[o] = 1;
    return 0;
}

static int make_outputs(cf_py_call *c)
{
    if (c->engine->alloc_out == NULL)
        return 0;
    int lib = lib_results_begin(c);
    if (lib < 0)
        return -1;
    for (int o = 0; o < c->nout; o++) {
        cf_py_arg *a = &c->out[o];
        if (c->outs[o] != NULL && a->kind == CF_PY_ARG_DEVICE)
            continue; /* given on the device: written in place */
        int r = lib && c->outs[o] == NULL ? lib_result(c, o) : 1;
        if (r < 0)
            return -1;
        if (r == 0)
            continue;
        if ((c->res[o] = c->engine->alloc_out(c, o)) == NULL)
            return -1;
        /* the kernel writes the new array; a host out= gets its values at delivery */
        const CfPyDeviceArray *d = (const CfPyDeviceArray *)c->res[o];
        cf_py_view_copy(&a->view, &d->view);
        a->dtype = d->view.dtype;
    }
    return 0;
}

/* ---- step 8: overlap ------------------------------------------------------------------------ */

/* An input (or the mask) sharing memory with an output is copied first: NumPy defines a call as
 * if inputs were copied before outputs are written. Whether the very same view is safe in place
 * is the engine's answer (an element-wise kernel reads each element before it writes it). */
static int copy_overlapping(cf_py_call *c)
{
    int ok = c->engine->in_place_ok;
    if (ok < 0)
        return 0;
    for (int o = 0; o < c->nout; o++) {
        const cf_py_arg *out = &c->out[o];
        if (!(c->outs[o] != NULL && out->kind == CF_PY_ARG_DEVICE) && c->res[o] == NULL)
            continue; /* no device memory written (cuda.reduce without res=) */
        for (int i = 0; i < c->nin; i++)
            if (c->in[i].kind == CF_PY_ARG_DEVICE &&
                cf_array_needs_copy(&c->in[i].view, &out->view, ok) &&
                cf_py_arg_copy(&c->in[i], c->pl.device, c->pl.for_arrays) < 0)
                return -1;
        if (c->have_where == 1 && c->where.kind == CF_PY_ARG_DEVICE &&
            cf_array_needs_copy(&c->where.view, &out->view, ok) &&
            cf_py_arg_copy(&c->where, c->pl.device, c->pl.for_arrays) < 0)
            return -1;
    }
    return 0;
}

/* ---- step 10: deliver ----------------------------------------------------------------------- */

/* A given host out= o filled from the device result res[o] (NumPy casts to its dtype); returns the
 * out= object. out[o].keep is the array, or the gufunc's view of it with its core axes last, as
 * the result has them. The copy waits for the launch (copy_to_host synchronises). */
static PyObject *copy_into_host_out(cf_py_call *c, int o)
{
    PyObject *h = PyObject_CallMethod(c->res[o], "copy_to_host", NULL);
    if (h == NULL)
        return NULL;
    PyObject *into = c->out[o].keep ? c->out[o].keep : c->outs[o];
    int rc = PyArray_CopyInto((PyArrayObject *)into, (PyArrayObject *)h);
    Py_DECREF(h);
    return rc < 0 ? NULL : Py_NewRef(c->outs[o]);
}

/* Result o as the caller gets it (new reference). `wrapper` (may be NULL) turns a fresh device
 * result into the caller's array type. */
static PyObject *deliver_one(cf_py_call *c, int o, PyObject *wrapper)
{
    const cf_py_engine *e = c->engine;
    if (c->outs[o] != NULL && c->out[o].kind == CF_PY_ARG_DEVICE)
        return Py_NewRef(c->outs[o]); /* out= wins: the object given, whatever the inputs */
    if (!c->host_result && c->outs[o] != NULL && c->out[o].kind == CF_PY_ARG_HOST && c->res[o])
        return copy_into_host_out(c, o); /* device inputs, a NumPy out=: Numba's behaviour */
    if (!c->host_result) {
        if (c->outs[o] != NULL) /* a given device output that was not a device view: none */
            return Py_NewRef(c->outs[o]);
        if (c->lib_out[o]) /* made by the caller's library: its own array already */
            return Py_NewRef(c->res[o]);
        PyObject *r = Py_NewRef(c->res[o]);
        if (e->present && (r = e->present(c, o, r, 0)) == NULL)
            return NULL;
        if (wrapper == NULL)
            return r;
        /* zero-copy through DLPack (the consumer's stream handshake) or the CAI: the foreign
         * array holds the DeviceArray, which holds the memory */
        PyObject *w = PyObject_CallOneArg(wrapper, r);
        Py_DECREF(r);
        return w;
    }
    if (c->outs[o] != NULL)
        return copy_into_host_out(c, o);
    PyObject *h = PyObject_CallMethod(c->res[o], "copy_to_host", NULL);
    if (h == NULL)
        return NULL;
    if (e->present && (h = e->present(c, o, h, 1)) == NULL)
        return NULL;
    /* a 0-d result comes back as a NumPy scalar, as from NumPy */
    if (c->scalar_results && PyArray_Check(h) && PyArray_NDIM((PyArrayObject *)h) == 0)
        return PyArray_Return((PyArrayObject *)h);
    return h;
}

PyObject *cf_py_call_deliver(cf_py_call *c)
{
    PyObject *res[CF_PY_MAX_ARGS], *wrapper = NULL;
    /* results of the caller's library: its current stream waits for the launch */
    if (cf_py_lib_alloc_end(&c->lib, c->pl.device, c->pl.s,
                            cf_py_stream_protocol_handle(c->pl.resolved)) < 0)
        return NULL;
    if (!c->host_result) {
        /* fresh device results come back in the caller's array type (cufunc/_interop.py) */
        int fresh = 0;
        for (int o = 0; o < c->nout; o++)
            fresh |= c->res[o] != NULL && c->outs[o] == NULL && !c->lib_out[o];
        if (fresh && call_wrapper(c, &wrapper) < 0)
            return NULL;
    }
    for (int o = 0; o < c->nout; o++)
        if ((res[o] = deliver_one(c, o, wrapper)) == NULL) {
            for (int j = 0; j < o; j++)
                Py_DECREF(res[j]);
            return NULL;
        }
    if (c->nout == 1)
        return res[0];
    PyObject *t = PyTuple_New(c->nout);
    for (int o = 0; o < c->nout; o++) {
        if (t)
            PyTuple_SET_ITEM(t, o, res[o]);
        else
            Py_DECREF(res[o]);
    }
    return t;
}

/* ---- the pipeline --------------------------------------------------------------------------- */

void cf_py_call_init(cf_py_call *c, const cf_py_engine *engine, void *self, void *state,
                     const char *name, const char *kind, int nin, int nout,
                     PyObject *const *outs, PyObject *stream)
{
    c->engine = engine;
    c->self = self;
    c->state = state;
    c->name = name;
    c->kind = kind;
    c->nin = nin;
    c->nout = nout;
    c->in_names = c->out_names = NULL;
    c->stream = stream;
    for (int o = 0; o < nout; o++) {
        c->outs[o] = outs && outs[o] != Py_None ? outs[o] : NULL;
        c->res[o] = NULL;
        c->lib_out[o] = 0;
    }
    c->lib.kind = 0;
    c->wrapper = NULL;
    c->wrapper_known = 0;
    c->nin_done = c->nout_done = 0;
    cf_py_arg_reset(&c->where, NULL);
    c->have_where = 0;
    c->any_device = c->any_host = c->host_out = 0;
    c->host_result = c->scalar_results = 0;
    c->numba = 0;
    c->reshaped = 0;
    c->no_lib_results = 0;
    c->pl.resolved = NULL;
    c->pl.capturing = 0;
    c->result = NULL;
    cf_py_capture_call_begin();
}

void cf_py_call_clear(cf_py_call *c)
{
    for (int i = 0; i < c->nin_done; i++)
        cf_py_arg_clear(&c->in[i]);
    for (int o = 0; o < c->nout_done; o++)
        cf_py_arg_clear(&c->out[o]);
    c->nin_done = c->nout_done = 0;
    cf_py_arg_clear(&c->where);
    for (int o = 0; o < c->nout; o++)
        Py_CLEAR(c->res[o]);
    cf_py_place_clear(&c->pl);
}

/* A call on host operands that writes no element needs no GPU: its results are empty NumPy
 * arrays of the resolved types (engine hook out_shape); given outputs come back as they are.
 * Sets c->result when taken. 0 or -1. */
static int empty_host_call(cf_py_call *c)
{
    const cf_py_engine *e = c->engine;
    cf_dtype dts[CF_PY_MAX_ARGS];
    int nds[CF_PY_MAX_ARGS];
    int64_t shapes[CF_PY_MAX_ARGS][CF_MAX_DIMS];
    if (e->out_shape == NULL || c->any_device || !c->host_result)
        return 0;
    for (int o = 0; o < c->nout; o++) {
        if (c->outs[o] != NULL) {
            if (!PyArray_Check(c->outs[o]) || PyArray_SIZE((PyArrayObject *)c->outs[o]) != 0)
                return 0;
            continue;
        }
        if (e->out_shape(c, o, &dts[o], &nds[o], shapes[o]) < 0)
            return -1;
        int64_t n = 1;
        for (int k = 0; k < nds[o]; k++)
            n *= shapes[o][k];
        if (n != 0)
            return 0;
    }
    if (c->stream && cf_py_stream_check(c->stream, "stream") < 0)
        return -1; /* as place() would have said */
    PyObject *res[CF_PY_MAX_ARGS];
    for (int o = 0; o < c->nout; o++) {
        PyObject *h;
        if (c->outs[o] != NULL) {
            h = Py_NewRef(c->outs[o]);
        } else {
            npy_intp dims[CF_MAX_DIMS];
            for (int k = 0; k < nds[o]; k++)
                dims[k] = (npy_intp)shapes[o][k];
            PyArray_Descr *d = cf_py_descr_from_dtype(dts[o]); /* stolen by PyArray_Empty */
            h = d ? PyArray_Empty(nds[o], dims, d, 0) : NULL;
            if (h && e->present)
                h = e->present(c, o, h, 1);
        }
        if (h == NULL) {
            for (int j = 0; j < o; j++)
                Py_DECREF(res[j]);
            return -1;
        }
        res[o] = h;
    }
    c->result = cf_py_pack_results(res, c->nout);
    for (int o = 0; o < c->nout; o++)
        Py_DECREF(res[o]);
    return c->result ? 0 : -1;
}

PyObject *cf_py_call_run(cf_py_call *c)
{
    const cf_py_engine *e = c->engine;
    PyObject *result = NULL;
    if (steps.on)
        steps.last = now_ns();
    if (e->prepare(c) < 0) /* steps 1-3 */
        goto done;
    if (c->result == NULL && empty_host_call(c) < 0)
        goto done;
    step_mark(ST_PREPARE);
    if (c->result == NULL) {
        if (place(c) < 0) /* 4 */
            goto done;
        step_mark(ST_PLACE);
        int taken = 0;
        if (e->host_strategy && !c->any_device && (taken = e->host_strategy(c)) < 0)
            goto done; /* 5: the whole call on the host pipeline */
        if (!taken) {
            if (move_host_inputs(c) < 0 || make_outputs(c) < 0) /* 5, 6 */
                goto done;
            step_mark(ST_OUTPUTS);
            if (cf_py_args_order(c->in, c->nin, c->out, c->nout,
                                 c->have_where == 1 ? &c->where : NULL, c->pl.device,
                                 c->pl.resolved, c->pl.s) < 0) /* 7 (py_args.h) */
                goto done;
            step_mark(ST_ORDER);
            if (copy_overlapping(c) < 0 || e->launch(c) < 0) /* 8, 9 */
                goto done;
            step_mark(ST_LAUNCH);
        }
    }
    result = c->result ? c->result : cf_py_call_deliver(c); /* 10 */
    c->result = NULL;
    step_mark(ST_DELIVER);
done:
    Py_CLEAR(c->result);
    cf_py_call_clear(c);
    cf_context_restore(); /* the thread's current device as the caller left it (runtime.h) */
    step_mark(ST_END);
    steps.calls += steps.on;
    return result;
}

/* ---- the shared lifecycle of UFunc and GUFunc ----------------------------------------------- */

void cf_py_cache_add(CfPyFuncHead *f, const unsigned char *key, size_t klen, int loop)
{
    int c = f->cache_next++ % CF_PY_LOOP_CACHE;
    memcpy(f->cache[c].key, key, klen);
    f->cache[c].loop = loop;
    f->cache[c].valid = 1;
}

void cf_py_cache_key(const cf_py_arg *args, int n, unsigned char *key, cf_dtype *in,
                     unsigned char *weak)
{
    for (int i = 0; i < n; i++) {
        in[i] = args[i].dtype;
        weak[i] = (unsigned char)args[i].weak;
        key[2 * i] = (unsigned char)in[i];
        key[2 * i + 1] = weak[i];
    }
}

PyObject *cf_py_type_objects(int n, const cf_dtype *dts, const unsigned char *weak)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *o;
        if (weak && weak[i]) {
            o = (PyObject *)(dts[i] == CF_INT64 ? &PyLong_Type : dts[i] == CF_FLOAT64 ?
                             &PyFloat_Type : &PyComplex_Type);
            Py_INCREF(o);
        } else if ((int)dts[i] < 0) {
            o = Py_NewRef(Py_None);
        } else {
            o = (PyObject *)cf_py_descr_from_dtype(dts[i]);
        }
        if (o == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, o);
    }
    return t;
}

int cf_py_func_compile(CfPyFuncHead *f, PyObject *in_types, PyObject *out,
                       int (*add)(CfPyFuncHead *, PyObject *))
{
    PyObject *spec = in_types && out ? PyObject_CallFunctionObjArgs(f->compiler, in_types, out,
                                                                    NULL)
                                     : NULL;
    Py_XDECREF(in_types);
    Py_XDECREF(out);
    if (spec == NULL)
        return -1;
    int r = spec == Py_None ? 0 : add(f, spec);
    Py_DECREF(spec);
    return r;
}

int cf_py_loop_options(PyObject *options, const char **opts, int *nopts, PyObject **seq,
                       const char *what)
{
    *nopts = 0;
    *seq = NULL;
    if (options == NULL || options == Py_None)
        return 0;
    char msg[96];
    snprintf(msg, sizeof msg, "%s: options must be a sequence of str", what);
    if ((*seq = PySequence_Fast(options, msg)) == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(*seq) > 64) {
        PyErr_Format(PyExc_ValueError, "%s: at most 64 options", what);
        Py_CLEAR(*seq);
        return -1;
    }
    *nopts = (int)PySequence_Fast_GET_SIZE(*seq);
    for (int i = 0; i < *nopts; i++)
        if ((opts[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(*seq, i))) == NULL) {
            Py_CLEAR(*seq);
            return -1;
        }
    return 0;
}

int cf_py_loop_types(PyObject *types, int n, cf_dtype *dts, PyObject **descrs)
{
    *descrs = PyTuple_New(n);
    if (*descrs == NULL)
        return -1;
    for (int i = 0; i < n; i++) {
        PyArray_Descr *d = NULL;
        if (cf_py_dtype_from_object(PySequence_Fast_GET_ITEM(types, i), &dts[i], &d, "types") < 0) {
            Py_CLEAR(*descrs);
            return -1;
        }
        PyTuple_SET_ITEM(*descrs, i, (PyObject *)d);
    }
    return 0;
}

int cf_py_loop_append(CfPyFuncHead *f, PyObject *entry)
{
    if (entry == NULL)
        return -1;
    int r = PyList_Append(f->loops, entry);
    Py_DECREF(entry);
    return r;
}

void cf_py_loop_pop(CfPyFuncHead *f)
{
    Py_ssize_t n = PyList_GET_SIZE(f->loops);
    PyList_SetSlice(f->loops, n - 1, n, NULL);
}

int cf_py_func_head_init(CfPyFuncHead *f, int nin, int nout, PyObject *name, PyObject *doc,
                         PyObject *compiler)
{
    f->nin = nin;
    f->nout = nout;
    f->name = Py_NewRef(name);
    f->doc = Py_NewRef(doc);
    f->compiler = Py_NewRef(compiler);
    f->loops = PyList_New(0);
    f->numba = 0;
    return f->loops ? 0 : -1;
}

int cf_py_parse_rules(PyObject *rules, const char *what)
{
    if (rules == NULL || rules == Py_None)
        return 0;
    if (PyUnicode_Check(rules)) {
        if (PyUnicode_CompareWithASCIIString(rules, "numpy") == 0)
            return 0;
        if (PyUnicode_CompareWithASCIIString(rules, "numba") == 0)
            return 1;
    }
    PyErr_Format(PyExc_ValueError, "%s: rules must be 'numpy' or 'numba', not %R", what, rules);
    return -1;
}

PyObject *cf_py_func_get_rules(PyObject *self, void *c)
{
    return PyUnicode_FromString(((CfPyFuncHead *)self)->numba ? "numba" : "numpy");
}

int cf_py_func_traverse(PyObject *self, visitproc visit, void *arg)
{
    CfPyFuncHead *f = (CfPyFuncHead *)self;
    Py_VISIT(f->compiler);
    Py_VISIT(f->loops);
    Py_VISIT(f->dict);
    return 0;
}

int cf_py_func_clear(PyObject *self)
{
    CfPyFuncHead *f = (CfPyFuncHead *)self;
    Py_CLEAR(f->compiler);
    Py_CLEAR(f->loops);
    Py_CLEAR(f->dict);
    return 0;
}

void cf_py_func_dealloc_head(PyObject *self)
{
    CfPyFuncHead *f = (CfPyFuncHead *)self;
    PyObject_GC_UnTrack(self);
    if (f->weakreflist)
        PyObject_ClearWeakRefs(self);
    Py_TYPE(self)->tp_clear(self);
    Py_CLEAR(f->name);
    Py_CLEAR(f->doc);
}

PyObject *cf_py_func_types(const CfPyFuncHead *f, int nloops,
                           void (*loop_types)(const CfPyFuncHead *f, int loop, cf_dtype *t))
{
    int nargs = f->nin + f->nout;
    PyObject *list = PyList_New(nloops);
    for (int l = 0; list && l < nloops; l++) {
        cf_dtype t[2 * CF_PY_MAX_ARGS];
        char buf[2 * CF_PY_MAX_ARGS + 4];
        int n = 0;
        loop_types(f, l, t);
        for (int i = 0; i < nargs; i++) {
            if (i == f->nin) {
                buf[n++] = '-';
                buf[n++] = '>';
            }
            PyArray_Descr *d = cf_py_descr_from_dtype(t[i]);
            if (d == NULL) {
                Py_CLEAR(list);
                return NULL;
            }
            buf[n++] = d->type;
            Py_DECREF(d);
        }
        buf[n] = '\0';
        PyObject *s = PyUnicode_FromString(buf);
        if (s == NULL) {
            Py_CLEAR(list);
            return NULL;
        }
        PyList_SET_ITEM(list, l, s);
    }
    return list;
}

#define HEAD(o) ((CfPyFuncHead *)(o))
PyObject *cf_py_func_get_nin(PyObject *self, void *c) { return PyLong_FromLong(HEAD(self)->nin); }
PyObject *cf_py_func_get_nout(PyObject *self, void *c) { return PyLong_FromLong(HEAD(self)->nout); }
PyObject *cf_py_func_get_nargs(PyObject *self, void *c)
{
    return PyLong_FromLong(HEAD(self)->nin + HEAD(self)->nout);
}
PyObject *cf_py_func_get_name(PyObject *self, void *c) { return Py_NewRef(HEAD(self)->name); }
PyObject *cf_py_func_get_doc(PyObject *self, void *c) { return Py_NewRef(HEAD(self)->doc); }
int cf_py_func_set_doc(PyObject *self, PyObject *value, void *c)
{
    Py_XSETREF(HEAD(self)->doc, Py_NewRef(value ? value : Py_None));
    return 0;
}
PyObject *cf_py_func_get_loops(PyObject *self, void *c) { return PyList_AsTuple(HEAD(self)->loops); }
PyObject *cf_py_func_get_compiler(PyObject *self, void *c)
{
    return Py_NewRef(HEAD(self)->compiler);
}
