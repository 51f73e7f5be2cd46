/* py_gufunc.c: the GUFunc type, the call path of @guvectorize gufuncs, in C.
 *
 * A call reads its arguments, applies axes= / axis= (moving each operand's core axes last), resolves
 * the loop (cached per input dtypes; a gufunc made without type signatures asks its Python
 * `compiler` for a loop on each new combination), binds the core dimensions and broadcasts the loop
 * dimensions (include/cufunc/gufunc.h, NumPy's rules and messages), moves host inputs to the device,
 * allocates outputs from the stream-ordered pool and launches. No Python code runs per call once the
 * loop exists.
 *
 * Placement, as in vectorize: when any input or output is on the device, results are DeviceArrays
 * and nothing waits for the kernel; when all are host arrays (or scalars), inputs are copied over,
 * the kernel runs, and results come back as NumPy arrays (a NumPy scalar for a 0-d result).
 * Host outputs given with out= are filled in place (their contents are uploaded first: the body may
 * read them, as it may in NumPy). */
#include "py_gufunc.h"
#include "py_args.h"
#include "py_capture.h"

#include <string.h>


/* ---- arguments ------------------------------------------------------------------------------ */

/* ---- loop resolution -------------------------------------------------------------------------- */

static int add_loop_from(CfPyGUFunc *self, PyObject *spec);

static PyObject *type_objects(int n, const cf_dtype *dts, const unsigned char *weak)
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

/* The loop for these inputs; a dynamic gufunc compiles one through its compiler when nothing
 * matches. out_dt[o] is a given output's dtype, or -1. */
static int resolve(CfPyGUFunc *self, const cf_py_arg *args, const int *out_dt, int *loop)
{
    unsigned char key[2 * GU_PY_MAX_ARGS];
    cf_dtype in[GU_PY_MAX_ARGS];
    unsigned char weak[GU_PY_MAX_ARGS];
    for (int i = 0; i < self->nin; i++) {
        in[i] = args[i].dtype;
        weak[i] = (unsigned char)args[i].weak;
        key[2 * i] = (unsigned char)in[i];
        key[2 * i + 1] = weak[i];
    }
    size_t klen = 2 * (size_t)self->nin;
    for (int c = 0; c < GU_PY_CACHE; c++)
        if (self->cache[c].valid && memcmp(self->cache[c].key, key, klen) == 0) {
            *loop = self->cache[c].loop;
            return 0;
        }
    cf_status st = cf_gufunc_resolve(self->gu, in, weak, loop);
    int dynamic = self->compiler != NULL && self->compiler != Py_None;
    if (st == CF_OK && dynamic) {
        /* a dynamic gufunc compiles a loop for new input dtypes rather than casting to an older
         * loop's (weak scalars match by kind, as NEP 50 has them) */
        cf_dtype t[GU_PY_MAX_ARGS];
        cf_gufunc_loop_types(self->gu, *loop, t, NULL);
        for (int i = 0; i < self->nin && st == CF_OK; i++)
            if (!weak[i] && t[i] != in[i])
                st = CF_ERR_TYPE;
    }
    if (st != CF_OK && dynamic) {
        cf_dtype outs[GU_PY_MAX_ARGS];
        for (int o = 0; o < self->nout; o++)
            outs[o] = (cf_dtype)out_dt[o];
        PyObject *it = type_objects(self->nin, in, weak);
        PyObject *ot = it ? type_objects(self->nout, outs, NULL) : NULL;
        PyObject *spec = ot ? PyObject_CallFunctionObjArgs(self->compiler, it, ot, NULL) : NULL;
        Py_XDECREF(it);
        Py_XDECREF(ot);
        if (spec == NULL)
            return -1;
        int r = spec == Py_None ? 0 : add_loop_from(self, spec);
        Py_DECREF(spec);
        if (r < 0)
            return -1;
        st = cf_gufunc_resolve(self->gu, in, weak, loop);
    }
    if (st != CF_OK)
        return cf_py_fail(st, NULL);
    int c = self->cache_next++ % GU_PY_CACHE;
    memcpy(self->cache[c].key, key, klen);
    self->cache[c].loop = *loop;
    self->cache[c].valid = 1;
    return 0;
}

/* ---- the call --------------------------------------------------------------------------------- */

typedef struct {
    PyObject *inputs[GU_PY_MAX_ARGS];
    PyObject *outs[GU_PY_MAX_ARGS];   /* NULL where not given */
    PyObject *axes, *axis;
    PyObject *casting;
    PyObject *stream;
} gu_call;

static int given(PyObject *o) { return o != NULL && o != Py_None; }

static int parse_call(CfPyGUFunc *self, PyObject *args, PyObject *kwargs, gu_call *c)
{
    const char *name = PyUnicode_AsUTF8(self->name);
    if (name == NULL)
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    memset(c, 0, sizeof *c);
    if (cf_py_call_positional(&PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), self->nin,
                              self->nout, "", name, c->inputs, c->outs) < 0)
        return -1;
    if (kwargs == NULL)
        return 0;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
        const char *k = PyUnicode_AsUTF8(key);
        if (k == NULL)
            return -1;
        if (strcmp(k, "out") == 0) {
            if (cf_py_call_out(value, n, self->nin, self->nout, "gufunc", name, c->outs) < 0)
                return -1;
        } else if (strcmp(k, "axes") == 0) {
            c->axes = value;
        } else if (strcmp(k, "axis") == 0) {
            c->axis = value;
        } else if (strcmp(k, "casting") == 0) {
            c->casting = value;
        } else if (strcmp(k, "stream") == 0) {
            c->stream = value;
        } else if (strcmp(k, "order") == 0 || strcmp(k, "subok") == 0) {
            /* accepted for NumPy compatibility: outputs are C-ordered; subclasses are not kept */
        } else {
            PyErr_Format(PyExc_TypeError, "'%s' is an invalid keyword to gufunc '%s'", k, name);
            return -1;
        }
    }
    if (c->axes && c->axis) {
        PyErr_SetString(PyExc_TypeError, "cannot specify both 'axis' and 'axes'");
        return -1;
    }
    return 0;
}

/* axes= / axis= -> per operand the list of core axes (counts[op] = -1: none given, keep last). */
static int parse_axes(CfPyGUFunc *self, const gu_call *c, int axes[][CF_GUFUNC_MAX_CORE_NDIM],
                      int *counts)
{
    const cf_layout *L = cf_gufunc_layout(self->gu);
    int nops = self->nin + self->nout;
    for (int i = 0; i < nops; i++)
        counts[i] = -1;
    const char *name = PyUnicode_AsUTF8(self->name);
    if (c->axis && c->axis != Py_None) {
        /* one shared core dimension in every operand that has one */
        int shared = -1;
        for (int i = 0; i < nops; i++) {
            if (L->ndims[i] == 0)
                continue;
            if (L->ndims[i] != 1 || (shared >= 0 && L->dim[i][0] != shared)) {
                PyErr_Format(PyExc_TypeError, "%s: axis can only be used with a single shared core "
                             "dimension, not with the signature %s", name,
                             cf_gufunc_signature(self->gu));
                return -1;
            }
            shared = L->dim[i][0];
        }
        long ax = PyLong_AsLong(c->axis);
        if (ax == -1 && PyErr_Occurred())
            return -1;
        for (int i = 0; i < nops; i++) {
            counts[i] = L->ndims[i];
            if (L->ndims[i])
                axes[i][0] = (int)ax;
        }
        return 0;
    }
    if (c->axes == NULL || c->axes == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(c->axes, "axes must be a list of tuples of ints");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int outs_scalar = 1;
    for (int o = 0; o < self->nout; o++)
        outs_scalar &= L->ndims[self->nin + o] == 0;
    if (n != nops && !(n == self->nin && outs_scalar)) {
        PyErr_Format(PyExc_ValueError, "The length of the axes list (%zd) must be the number of "
                     "operands (%d)%s", n, nops, outs_scalar ? " or of inputs" : "");
        Py_DECREF(seq);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (PyLong_Check(item)) {
            if (L->ndims[i] != 1) {
                PyErr_Format(PyExc_TypeError, "axes item %zd should be a tuple with a number of "
                             "entries equal to the number of core dimensions (%d)", i,
                             L->ndims[i]);
                Py_DECREF(seq);
                return -1;
            }
            axes[i][0] = (int)PyLong_AsLong(item);
            counts[i] = 1;
            continue;
        }
        if (!PyTuple_Check(item)) {
            PyErr_Format(PyExc_TypeError, "axes item %zd should be a tuple", i);
            Py_DECREF(seq);
            return -1;
        }
        Py_ssize_t m = PyTuple_GET_SIZE(item);
        if (m != L->ndims[i]) {
            PyErr_Format(PyExc_ValueError, "axes item %zd should be a tuple with a number of entries "
                         "equal to the number of core dimensions (%d)", i, L->ndims[i]);
            Py_DECREF(seq);
            return -1;
        }
        for (Py_ssize_t k = 0; k < m; k++) {
            long v = PyLong_AsLong(PyTuple_GET_ITEM(item, k));
            if (v == -1 && PyErr_Occurred()) {
                Py_DECREF(seq);
                return -1;
            }
            axes[i][k] = (int)v;
        }
        counts[i] = (int)m;
    }
    Py_DECREF(seq);
    if (PyErr_Occurred())
        return -1;
    return 0;
}

/* Raise the NumPy-style exception for a cf_gufunc_axes_perm failure (AxisError for out of
 * bounds, as NumPy). */
static int axes_error(cf_status st)
{
    if (st == CF_ERR_RANGE) {
        PyObject *np_exc = PyImport_ImportModule("numpy.exceptions");
        PyObject *axis_error = np_exc ? PyObject_GetAttrString(np_exc, "AxisError") : NULL;
        Py_XDECREF(np_exc);
        if (axis_error == NULL) {
            PyErr_Clear();
            return cf_py_fail(st, NULL);
        }
        PyObject *msg = PyUnicode_FromString(cf_last_error());
        if (msg != NULL) {
            PyErr_SetObject(axis_error, msg);
            Py_DECREF(msg);
        }
        Py_DECREF(axis_error);
        return -1;
    }
    return cf_py_fail(st, NULL);
}

static void permute_view(cf_array *v, const int *perm)
{
    cf_array o = *v;
    for (int k = 0; k < v->ndim; k++) {
        v->shape[k] = o.shape[perm[k]];
        v->strides[k] = o.strides[perm[k]];
    }
}

/* Everything a call derives before it launches, shared by the call and kernel_source. */
typedef struct {
    cf_py_arg in[GU_PY_MAX_ARGS], out[GU_PY_MAX_ARGS];
    int nin_done, nout_done;
    int loop;
    cf_dtype types[GU_PY_MAX_ARGS];
    int arg_ndim[GU_PY_MAX_ARGS];
    int perm[GU_PY_MAX_ARGS][CF_MAX_DIMS];   /* outputs: axes= permutation, or identity */
    int has_perm[GU_PY_MAX_ARGS];
    unsigned char has_out[GU_PY_MAX_ARGS];
    int any_device, any_host, host_out_mode;
    cf_gufunc_shapes sh;
} gu_prep;

static void prep_clear(gu_prep *P)
{
    for (int i = 0; i < P->nin_done; i++)
        cf_py_arg_clear(&P->in[i]);
    for (int o = 0; o < P->nout_done; o++)
        cf_py_arg_clear(&P->out[o]);
}

/* Steps 1-3 of a call: classify, axes, loop, casting checks, shapes. Needs no GPU for host and
 * scalar arguments. */
static int prepare(CfPyGUFunc *self, const gu_call *c, gu_prep *P)
{
    const int nin = self->nin, nout = self->nout, nops = nin + nout;
    const char *name = PyUnicode_AsUTF8(self->name);
    const cf_layout *L = cf_gufunc_layout(self->gu);
    if (name == NULL)
        return -1;
    for (int i = 0; i < nin; i++, P->nin_done++) {
        char argname[32];
        snprintf(argname, sizeof argname, "argument %d", i + 1);
        if (cf_py_arg_classify(c->inputs[i], &P->in[i], argname) < 0)
            return -1;
    }
    for (int i = 0; i < nin; i++) {
        P->any_device |= P->in[i].kind == CF_PY_ARG_DEVICE;
        P->any_host |= P->in[i].kind == CF_PY_ARG_HOST;
    }
    cf_py_args_nep50(P->in, nin);
    int out_dt[GU_PY_MAX_ARGS];
    for (int o = 0; o < nout; o++, P->nout_done++) {
        cf_py_arg *a = &P->out[o];
        cf_py_arg_reset(a, NULL);
        a->kind = -1; /* not given: allocated by the call */
        out_dt[o] = -1;
        if (!given(c->outs[o]))
            continue;
        char argname[48];
        snprintf(argname, sizeof argname, "out %d (argument %d)", o, nin + o + 1);
        P->has_out[o] = 1;
        if (CfPyDeviceArray_Check(c->outs[o]) || cf_py_is_device_object(c->outs[o])) {
            if (cf_py_device_view(c->outs[o], &a->view, &a->keep, 1, argname) < 0)
                return -1;
            a->kind = CF_PY_ARG_DEVICE;
            a->dtype = a->view.dtype;
            P->any_device = 1;
        } else if (PyArray_Check(c->outs[o])) {
            PyArrayObject *h = (PyArrayObject *)c->outs[o];
            if (cf_py_dtype_from_descr(PyArray_DESCR(h), &a->dtype, argname) < 0)
                return -1;
            if (!PyArray_ISWRITEABLE(h)) {
                PyErr_Format(PyExc_ValueError, "output array %d is read-only", o);
                return -1;
            }
            a->keep = Py_NewRef(c->outs[o]);
            cf_py_arg_host_view(a, h);
            P->host_out_mode = 1;
        } else {
            PyErr_Format(PyExc_TypeError, "return arrays must be of ArrayType (a NumPy array or a "
                         "device array), not %.200s", Py_TYPE(c->outs[o])->tp_name);
            return -1;
        }
        out_dt[o] = (int)a->dtype;
    }
    /* Two outputs in the same memory: which value lands where would depend on the order the body
     * writes them, and with core dimensions on the order of the threads. Refused rather than
     * left to chance (the bounds test is conservative: interleaved strided views are refused
     * too, as the check cannot tell them apart cheaply). */
    for (int o = 0; o < nout; o++)
        for (int p = o + 1; p < nout; p++)
            if (P->has_out[o] && P->has_out[p] &&
                cf_array_may_overlap(&P->out[o].view, &P->out[p].view)) {
                PyErr_Format(PyExc_ValueError, "gufunc '%s': outputs %d and %d (arguments %d and "
                             "%d) may share memory; the result would depend on the order they are "
                             "written: pass outputs that do not overlap", name, o, p,
                             nin + o + 1, nin + p + 1);
                return -1;
            }
    if (P->host_out_mode && P->any_device) {
        PyErr_Format(PyExc_TypeError, "gufunc '%s': out= is a host (NumPy) array but an input or "
                     "output is on the device; pass device arrays as out=, or copy to the host",
                     name);
        return -1;
    }

    /* axes= / axis=: move each operand's core axes last */
    int axes[GU_PY_MAX_ARGS][CF_GUFUNC_MAX_CORE_NDIM], counts[GU_PY_MAX_ARGS];
    if (parse_axes(self, c, axes, counts) < 0)
        return -1;
    for (int i = 0; i < nops; i++) {
        P->has_perm[i] = 0;
        if (counts[i] < 0)
            continue;
        cf_py_arg *a = i < nin ? &P->in[i] : &P->out[i - nin];
        int is_out = i >= nin;
        if (is_out && !P->has_out[i - nin]) {
            P->has_perm[i] = 1; /* applied to the allocated output once its shape is known */
            memcpy(P->perm[i], axes[i], sizeof axes[i]);
            P->perm[i][CF_MAX_DIMS - 1] = counts[i];
            continue;
        }
        if (a->kind == CF_PY_ARG_SCALAR) {
            if (counts[i] != 0) {
                PyErr_Format(PyExc_ValueError, "axes item %d: argument %d is a scalar, which has "
                             "no axes", i, i + 1);
                return -1;
            }
            continue;
        }
        int perm[CF_MAX_DIMS];
        cf_status st = cf_gufunc_axes_perm(i, a->view.ndim, L->ndims[i], axes[i], counts[i], perm);
        if (st != CF_OK)
            return axes_error(st);
        if (a->kind == CF_PY_ARG_HOST) {
            PyArray_Dims pd = {NULL, a->view.ndim};
            npy_intp pv[CF_MAX_DIMS];
            for (int k = 0; k < a->view.ndim; k++)
                pv[k] = perm[k];
            pd.ptr = pv;
            PyObject *t = PyArray_Transpose((PyArrayObject *)a->keep, &pd);
            if (t == NULL)
                return -1;
            Py_SETREF(a->keep, t);
            cf_py_arg_host_view(a, (PyArrayObject *)t);
        } else {
            permute_view(&a->view, perm);
        }
    }

    /* the loop; casting of inputs and given outputs */
    cf_casting casting;
    if (cf_py_parse_casting(c->casting, &casting) < 0)
        return -1;
    if (resolve(self, P->in, out_dt, &P->loop) < 0)
        return -1;
    cf_gufunc_loop_types(self->gu, P->loop, P->types, P->arg_ndim);
    for (int i = 0; i < nin; i++)
        if (!P->in[i].weak && !cf_can_cast(P->in[i].dtype, P->types[i], casting)) {
            PyErr_Format(PyExc_TypeError, "Cannot cast gufunc '%s' input %d from dtype('%s') to "
                         "dtype('%s') with casting rule '%s'", name, i, cf_dtype_name(P->in[i].dtype),
                         cf_dtype_name(P->types[i]), cf_casting_name(casting));
            return -1;
        }
    for (int o = 0; o < nout; o++)
        if (P->has_out[o] && !cf_can_cast(P->types[nin + o], P->out[o].dtype, casting)) {
            PyErr_Format(PyExc_TypeError, "Cannot cast gufunc '%s' output from dtype('%s') to "
                         "dtype('%s') with casting rule '%s'", name, cf_dtype_name(P->types[nin + o]),
                         cf_dtype_name(P->out[o].dtype), cf_casting_name(casting));
            return -1;
        }

    /* shapes */
    cf_operand ops[GU_PY_MAX_ARGS];
    memset(ops, 0, sizeof(cf_operand) * (size_t)nops);
    for (int i = 0; i < nin; i++) {
        ops[i].is_scalar = P->in[i].kind == CF_PY_ARG_SCALAR;
        ops[i].array = P->in[i].view;
    }
    for (int o = 0; o < nout; o++)
        ops[nin + o].array = P->out[o].view;
    cf_status st = cf_gufunc_bind(self->gu, ops, P->has_out, &P->sh);
    if (st != CF_OK)
        return cf_py_fail(st, NULL);
    return 0;
}

/* The allocated output `o` as the caller sees it: core axes where axes= put them. */
static PyObject *visible_output(gu_prep *P, int i, PyObject *dev)
{
    if (!P->has_perm[i])
        return Py_NewRef(dev);
    CfPyDeviceArray *d = (CfPyDeviceArray *)dev;
    int perm[CF_MAX_DIMS], inv[CF_MAX_DIMS];
    int ncore = P->perm[i][CF_MAX_DIMS - 1];
    cf_status st = cf_gufunc_axes_perm(i, d->view.ndim, ncore, P->perm[i], ncore, perm);
    if (st != CF_OK) {
        axes_error(st);
        return NULL;
    }
    for (int k = 0; k < d->view.ndim; k++)
        inv[perm[k]] = k;
    cf_array v = d->view;
    permute_view(&v, inv);
    return cf_py_devicearray_wrap(&v, d->base, d->stream, d->readonly);
}

static PyObject *gufunc_apply(CfPyGUFunc *self, const gu_call *c)
{
    const int nin = self->nin, nout = self->nout, nops = nin + nout;
    const char *name = PyUnicode_AsUTF8(self->name);
    gu_prep *P = PyMem_Calloc(1, sizeof *P);
    PyObject *result = NULL, *resolved_stream = NULL;
    PyObject *out_objs[GU_PY_MAX_ARGS] = {0};
    if (P == NULL)
        return PyErr_NoMemory();
    if (prepare(self, c, P) < 0)
        goto done;
    int any_device = P->any_device;

    /* the device and the stream; host inputs move over */
    int device = -1;
    for (int i = 0; i < nin && device < 0; i++)
        if (P->in[i].kind == CF_PY_ARG_DEVICE)
            device = P->in[i].view.device;
    for (int o = 0; o < nout && device < 0; o++)
        if (P->out[o].kind == CF_PY_ARG_DEVICE)
            device = P->out[o].view.device;
    if (cf_py_cuda_init(name) < 0)
        goto done;
    if (device < 0) {
        if (given(c->stream) && cf_py_stream_device(c->stream, &device, "stream") < 0)
            goto done;
        if (device < 0 && cf_py_current_device(&device, name) < 0)
            goto done;
    }
    resolved_stream = cf_py_stream_resolve(c->stream ? c->stream : Py_None, device, "stream");
    if (resolved_stream == NULL)
        goto done;
    cf_stream *s;
    if (cf_py_stream_get(resolved_stream, device, &s) < 0)
        goto done;
    PyObject *stream_for_arrays = resolved_stream == Py_None ? NULL : resolved_stream;
    for (int i = 0; i < nin; i++) {
        cf_py_arg *a = &P->in[i];
        if (a->kind == CF_PY_ARG_DEVICE && a->view.device != device) {
            PyErr_Format(PyExc_ValueError, "gufunc '%s': argument %d is on device %d, but the call "
                         "runs on device %d", name, i + 1, a->view.device, device);
            goto done;
        }
        /* host arrays travel in the loop's dtype when the body sees them as arrays */
        if (a->kind == CF_PY_ARG_HOST &&
            cf_py_arg_upload(a, P->arg_ndim[i] ? P->types[i] : a->dtype, device, stream_for_arrays, s) < 0)
            goto done;
    }

    /* outputs: given device arrays (core axes moved last), or new ones in the loop's dtype */
    unsigned fresh = 0;
    cf_operand ops[GU_PY_MAX_ARGS];
    memset(ops, 0, sizeof(cf_operand) * (size_t)nops);
    for (int o = 0; o < nout; o++) {
        int i = nin + o;
        cf_py_arg *a = &P->out[o];
        if (a->kind == CF_PY_ARG_DEVICE) {
            if (a->view.device != device) {
                PyErr_Format(PyExc_ValueError, "gufunc '%s': out %d is on device %d, but the call "
                             "runs on device %d", name, o, a->view.device, device);
                goto done;
            }
            ops[i].array = a->view;
            continue;
        }
        int nd;
        int64_t shape[CF_MAX_DIMS];
        cf_status st = cf_gufunc_operand_shape(self->gu, &P->sh, i, &nd, shape);
        if (st != CF_OK) {
            cf_py_fail(st, NULL);
            goto done;
        }
        out_objs[o] = cf_py_devicearray_alloc(nd, shape, P->types[i], 'C', device,
                                              stream_for_arrays);
        if (out_objs[o] == NULL)
            goto done;
        ops[i].array = ((CfPyDeviceArray *)out_objs[o])->view;
        if (a->kind == CF_PY_ARG_HOST) {
            /* the body may read out=: start from its values, in the loop's dtype */
            PyArray_Descr *d = cf_py_descr_from_dtype(P->types[i]);
            PyObject *h = d ? PyArray_FromAny(a->keep, d, 0, 0, NPY_ARRAY_C_CONTIGUOUS |
                                              NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST, NULL) : NULL;
            if (h == NULL)
                goto done;
            Py_BEGIN_ALLOW_THREADS
            st = cf_memcpy_htod(s, ops[i].array.data, PyArray_DATA((PyArrayObject *)h),
                                (size_t)PyArray_NBYTES((PyArrayObject *)h), 0);
            Py_END_ALLOW_THREADS
            Py_DECREF(h);
            if (st != CF_OK) {
                cf_py_fail(st, "copying out= to the device");
                goto done;
            }
        } else {
            fresh |= 1u << o;
        }
    }
    if (cf_py_args_order(P->in, nin, P->out, nout, NULL, device, resolved_stream, s) < 0)
        goto done; /* after the producers of the device operands (py_args.h) */
    /* inputs that share memory with an output: cf_gufunc_launch copies them first (on the GPU,
     * stream-ordered), as NumPy defines the call */
    for (int i = 0; i < nin; i++) {
        if (P->in[i].kind == CF_PY_ARG_SCALAR) {
            if (cf_py_arg_scalar(&P->in[i], P->types[i], &ops[i], name, i) < 0)
                goto done;
        } else {
            ops[i].array = P->in[i].view;
        }
    }
    cf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cf_gufunc_launch(self->gu, P->loop, s, ops, &P->sh, fresh);
    Py_END_ALLOW_THREADS
    if (st != CF_OK) {
        cf_py_fail(st, name);
        goto done;
    }

    /* results */
    PyObject *res[GU_PY_MAX_ARGS] = {0};
    int all_scalar = !any_device && !P->any_host && !P->host_out_mode;
    for (int o = 0; o < nout; o++) {
        int i = nin + o;
        PyObject *r = NULL;
        if (P->has_out[o] && P->out[o].kind == CF_PY_ARG_DEVICE) {
            r = Py_NewRef(c->outs[o]);
        } else if (any_device) {
            r = visible_output(P, i, out_objs[o]);
        } else {
            PyObject *h = PyObject_CallMethod(out_objs[o], "copy_to_host", NULL);
            if (h != NULL && P->has_out[o]) {
                /* into the given host array (NumPy casts to its dtype) */
                int rc = PyArray_CopyInto((PyArrayObject *)P->out[o].keep, (PyArrayObject *)h);
                Py_DECREF(h);
                h = rc < 0 ? NULL : Py_NewRef(c->outs[o]);
            } else if (h != NULL && P->has_perm[i]) {
                CfPyDeviceArray *d = (CfPyDeviceArray *)out_objs[o];
                int perm[CF_MAX_DIMS];
                npy_intp inv[CF_MAX_DIMS];
                int ncore = P->perm[i][CF_MAX_DIMS - 1];
                if (cf_gufunc_axes_perm(i, d->view.ndim, ncore, P->perm[i], ncore, perm) == CF_OK) {
                    for (int k = 0; k < d->view.ndim; k++)
                        inv[perm[k]] = k;
                    PyArray_Dims pd = {inv, d->view.ndim};
                    Py_SETREF(h, PyArray_Transpose((PyArrayObject *)h, &pd));
                }
            }
            /* a 0-d result comes back as a NumPy scalar, as from NumPy's gufuncs */
            if (h != NULL && (all_scalar || (!P->has_out[o] && PyArray_Check(h) &&
                                             PyArray_NDIM((PyArrayObject *)h) == 0)))
                h = PyArray_Return((PyArrayObject *)h);
            r = h;
        }
        if (r == NULL) {
            for (int j = 0; j < o; j++)
                Py_XDECREF(res[j]);
            goto done;
        }
        res[o] = r;
    }
    if (nout == 1) {
        result = res[0];
    } else {
        result = PyTuple_New(nout);
        for (int o = 0; o < nout; o++) {
            if (result)
                PyTuple_SET_ITEM(result, o, res[o]);
            else
                Py_DECREF(res[o]);
        }
    }
done:
    prep_clear(P);
    PyMem_Free(P);
    for (int o = 0; o < nout; o++)
        Py_XDECREF(out_objs[o]);
    Py_XDECREF(resolved_stream);
    return result;
}

static PyObject *gufunc_call(CfPyGUFunc *self, PyObject *args, PyObject *kwargs)
{
    gu_call c;
    if (parse_call(self, args, kwargs, &c) < 0)
        return NULL;
    return gufunc_apply(self, &c);
}

/* The generated kernel source of a call with these arguments (host arrays described as fresh
 * contiguous device copies would be); for inspection. No GPU needed for host and scalar inputs. */
static PyObject *gufunc_kernel_source(CfPyGUFunc *self, PyObject *args, PyObject *kwargs)
{
    gu_call c;
    if (parse_call(self, args, kwargs, &c) < 0)
        return NULL;
    const int nin = self->nin, nout = self->nout, nops = nin + nout;
    const char *name = PyUnicode_AsUTF8(self->name);
    gu_prep *P = PyMem_Calloc(1, sizeof *P);
    PyObject *r = NULL;
    if (P == NULL)
        return PyErr_NoMemory();
    if (prepare(self, &c, P) < 0)
        goto done;
    cf_operand ops[GU_PY_MAX_ARGS];
    memset(ops, 0, sizeof(cf_operand) * (size_t)nops);
    uint64_t next = 0x10000000;
    for (int i = 0; i < nops; i++) {
        cf_py_arg *a = i < nin ? &P->in[i] : &P->out[i - nin];
        if (i < nin && a->kind == CF_PY_ARG_SCALAR) {
            if (cf_py_arg_scalar(a, P->types[i], &ops[i], name, i) < 0)
                goto done;
            continue;
        }
        if (i >= nin && !P->has_out[i - nin]) {
            int nd;
            int64_t shape[CF_MAX_DIMS];
            cf_status st = cf_gufunc_operand_shape(self->gu, &P->sh, i, &nd, shape);
            if (st != CF_OK) {
                cf_py_fail(st, NULL);
                goto done;
            }
            cf_array_init_contiguous(&ops[i].array, next, P->types[i], nd, shape, 'C', 0);
        } else if (a->kind == CF_PY_ARG_DEVICE) {
            ops[i].array = a->view;
            ops[i].array.device = 0;
            if (P->arg_ndim[i] && a->dtype != P->types[i]) /* launched through a converted copy */
                cf_array_init_contiguous(&ops[i].array, next, P->types[i], a->view.ndim,
                                         a->view.shape, 'C', 0);
        } else if (i < nin) {
            cf_array_init_contiguous(&ops[i].array, next, P->arg_ndim[i] ? P->types[i] : a->dtype,
                                     a->view.ndim, a->view.shape, 'C', 0);
        } else { /* a host out=: launched through a device copy in the loop's dtype */
            cf_array_init_contiguous(&ops[i].array, next, P->types[i], a->view.ndim,
                                     a->view.shape, 'C', 0);
        }
        next += ((uint64_t)cf_array_nbytes(&ops[i].array) + 0xffff) & ~(uint64_t)0xffff;
        next += 0x10000;
    }
    unsigned fresh = 0;
    for (int o = 0; o < nout; o++)
        if (!P->has_out[o])
            fresh |= 1u << o;
    char *src = NULL;
    cf_status st = cf_gufunc_kernel_source(self->gu, P->loop, ops, &P->sh, fresh, &src);
    if (st != CF_OK) {
        cf_py_fail(st, NULL);
        goto done;
    }
    r = PyUnicode_FromString(src);
    cf_free_buffer(src);
done:
    prep_clear(P);
    PyMem_Free(P);
    return r;
}

/* ---- construction and loops ------------------------------------------------------------------- */

/* spec = (types, arg_ndim, source, fn_name[, options[, captures]]); captures: the loop's captured
 * device arrays (py_capture.h) */
static int add_loop_from(CfPyGUFunc *self, PyObject *spec)
{
    PyObject *types, *ndims, *source, *fn_name, *options = NULL, *captures = NULL;
    if (!PyTuple_Check(spec)) {
        PyErr_SetString(PyExc_TypeError, "add_loop: a loop is (types, arg_ndim, source, fn_name"
                        "[, options[, captures]])");
        return -1;
    }
    if (!PyArg_ParseTuple(spec, "OOUU|OO:add_loop", &types, &ndims, &source, &fn_name, &options,
                          &captures))
        return -1;
    cf_py_captures cap = {0};
    int nargs = self->nin + self->nout;
    PyObject *tseq = PySequence_Fast(types, "add_loop: types must be a sequence of dtypes");
    PyObject *nseq = tseq ? PySequence_Fast(ndims, "add_loop: arg_ndim must be a sequence of "
                                            "ints") : NULL;
    PyObject *optseq = NULL, *descrs = NULL, *entry = NULL;
    int rc = -1;
    if (nseq == NULL)
        goto done;
    if (PySequence_Fast_GET_SIZE(tseq) != nargs || PySequence_Fast_GET_SIZE(nseq) != nargs) {
        PyErr_Format(PyExc_ValueError, "add_loop: %d types and argument ranks expected (%d inputs, "
                     "%d outputs)", nargs, self->nin, self->nout);
        goto done;
    }
    cf_dtype dts[GU_PY_MAX_ARGS];
    int nd[GU_PY_MAX_ARGS];
    descrs = PyTuple_New(nargs);
    if (descrs == NULL)
        goto done;
    for (int i = 0; i < nargs; i++) {
        PyArray_Descr *d = NULL;
        if (cf_py_dtype_from_object(PySequence_Fast_GET_ITEM(tseq, i), &dts[i], &d, "types") < 0)
            goto done;
        PyTuple_SET_ITEM(descrs, i, (PyObject *)d);
        nd[i] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(nseq, i));
        if (nd[i] == -1 && PyErr_Occurred())
            goto done;
    }
    const char *opts[64];
    int nopts = 0;
    if (options != NULL && options != Py_None) {
        optseq = PySequence_Fast(options, "add_loop: options must be a sequence of str");
        if (optseq == NULL)
            goto done;
        if (PySequence_Fast_GET_SIZE(optseq) > 64) {
            PyErr_SetString(PyExc_ValueError, "add_loop: at most 64 options");
            goto done;
        }
        nopts = (int)PySequence_Fast_GET_SIZE(optseq);
        for (int i = 0; i < nopts; i++)
            if ((opts[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(optseq, i))) == NULL)
                goto done;
    }
    const char *src = PyUnicode_AsUTF8(source), *fn = PyUnicode_AsUTF8(fn_name);
    if (src == NULL || fn == NULL)
        goto done;
    if (cf_py_captures_read(captures, &cap, "add_loop") < 0)
        goto done;
    /* The entry keeps the captured arrays alive as long as the gufunc (its kernels read them);
     * it is in the list before the loop exists, so that no kernel can outlive them. */
    PyObject *ndt = PySequence_Tuple(nseq);
    PyObject *cap_items = cap.items ? Py_NewRef(cap.items) : PyTuple_New(0);
    entry = ndt && cap_items ? PyTuple_Pack(5, descrs, ndt, source, fn_name, cap_items) : NULL;
    Py_XDECREF(ndt);
    Py_XDECREF(cap_items);
    if (entry == NULL || PyList_Append(self->loops, entry) < 0)
        goto done;
    cf_status st = cf_gufunc_add_loop_globals(self->gu, dts, nd, src, fn, opts, nopts,
                                              cap.globals, cap.n, NULL);
    if (st != CF_OK) {
        Py_ssize_t n = PyList_GET_SIZE(self->loops);
        PyList_SetSlice(self->loops, n - 1, n, NULL);
        cf_py_fail(st, "add_loop");
        goto done;
    }
    memset(self->cache, 0, sizeof self->cache); /* a new loop can change resolutions */
    rc = 0;
done:
    cf_py_captures_clear(&cap);
    Py_XDECREF(tseq);
    Py_XDECREF(nseq);
    Py_XDECREF(optseq);
    Py_XDECREF(descrs);
    Py_XDECREF(entry);
    return rc;
}

static PyObject *gufunc_add_loop(CfPyGUFunc *self, PyObject *args)
{
    if (add_loop_from(self, args) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *gufunc_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"name", "signature", "doc", "compiler", NULL};
    PyObject *name, *sigobj, *doc = Py_None, *compiler = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UO|OO:GUFunc", kw, &name, &sigobj, &doc,
                                     &compiler))
        return NULL;
    cf_layout check; /* a bad layout raises SignatureError, as guvectorize's does */
    if (cf_py_parse_layout_text(sigobj, &check) < 0)
        return NULL;
    const char *signature = PyUnicode_AsUTF8(sigobj);
    if (signature == NULL)
        return NULL;
    if (compiler != Py_None && !PyCallable_Check(compiler)) {
        PyErr_SetString(PyExc_TypeError, "GUFunc: compiler must be callable or None");
        return NULL;
    }
    const char *cname = PyUnicode_AsUTF8(name);
    if (cname == NULL)
        return NULL;
    CfPyGUFunc *self = (CfPyGUFunc *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    cf_status st = cf_gufunc_create(cname, signature, &self->gu);
    if (st != CF_OK) {
        Py_DECREF(self);
        return cf_py_raise(st, NULL);
    }
    self->nin = cf_gufunc_nin(self->gu);
    self->nout = cf_gufunc_nout(self->gu);
    self->name = Py_NewRef(name);
    self->doc = Py_NewRef(doc);
    self->compiler = Py_NewRef(compiler);
    self->loops = PyList_New(0);
    if (self->loops == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int gufunc_traverse(CfPyGUFunc *self, visitproc visit, void *arg)
{
    Py_VISIT(self->compiler);
    Py_VISIT(self->loops);
    Py_VISIT(self->dict);
    return 0;
}

static int gufunc_clear(CfPyGUFunc *self)
{
    Py_CLEAR(self->compiler);
    Py_CLEAR(self->loops);
    Py_CLEAR(self->dict);
    return 0;
}

static void gufunc_dealloc(CfPyGUFunc *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist)
        PyObject_ClearWeakRefs((PyObject *)self);
    gufunc_clear(self);
    Py_CLEAR(self->name);
    Py_CLEAR(self->doc);
    cf_gufunc_free(self->gu);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *gufunc_repr(CfPyGUFunc *self)
{
    return PyUnicode_FromFormat("<cufunc.GUFunc '%U' %s (%d loops)>", self->name,
                                cf_gufunc_signature(self->gu), cf_gufunc_nloops(self->gu));
}

static PyObject *get_nin(CfPyGUFunc *self, void *c) { return PyLong_FromLong(self->nin); }
static PyObject *get_nout(CfPyGUFunc *self, void *c) { return PyLong_FromLong(self->nout); }
static PyObject *get_nargs(CfPyGUFunc *self, void *c) { return PyLong_FromLong(self->nin + self->nout); }
static PyObject *get_ntypes(CfPyGUFunc *self, void *c) { return PyLong_FromLong(cf_gufunc_nloops(self->gu)); }
static PyObject *get_name(CfPyGUFunc *self, void *c) { return Py_NewRef(self->name); }
static PyObject *get_doc(CfPyGUFunc *self, void *c) { return Py_NewRef(self->doc); }
static PyObject *get_loops(CfPyGUFunc *self, void *c) { return PyList_AsTuple(self->loops); }
static PyObject *get_compiler(CfPyGUFunc *self, void *c) { return Py_NewRef(self->compiler); }
static PyObject *get_signature(CfPyGUFunc *self, void *c)
{
    return PyUnicode_FromString(cf_gufunc_signature(self->gu));
}
static PyObject *get_kernel_count(CfPyGUFunc *self, void *c)
{
    return PyLong_FromLong(cf_gufunc_kernel_count(self->gu));
}

static int set_doc(CfPyGUFunc *self, PyObject *value, void *c)
{
    Py_XSETREF(self->doc, Py_NewRef(value ? value : Py_None));
    return 0;
}

/* NumPy's spelling: 'ff->f', one character code per type. */
static PyObject *get_types(CfPyGUFunc *self, void *c)
{
    int nl = cf_gufunc_nloops(self->gu), nargs = self->nin + self->nout;
    PyObject *list = PyList_New(nl);
    for (int l = 0; list && l < nl; l++) {
        cf_dtype t[GU_PY_MAX_ARGS];
        char buf[2 * GU_PY_MAX_ARGS + 4];
        int n = 0;
        cf_gufunc_loop_types(self->gu, l, t, NULL);
        for (int i = 0; i < nargs; i++) {
            if (i == self->nin) {
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

static PyMethodDef gufunc_methods[] = {
    {"add_loop", (PyCFunction)gufunc_add_loop, METH_VARARGS,
     "add_loop(types, arg_ndim, source, fn_name, options=(), captures=()): add a loop from CUDA C "
     "(used by guvectorize). arg_ndim[i]: 0 = operand i passed by value, k = as "
     "cf_array_ref<T, k>; captures: (symbol, device array, label) for each captured device "
     "array."},
    {"kernel_source", (PyCFunction)(void (*)(void))gufunc_kernel_source,
     METH_VARARGS | METH_KEYWORDS,
     "kernel_source(*args, **kwargs): the CUDA C of the kernel a call with these arguments "
     "launches."},
    {NULL},
};

static PyGetSetDef gufunc_getset[] = {
    {"nin", (getter)get_nin, NULL, "number of inputs", NULL},
    {"nout", (getter)get_nout, NULL, "number of outputs", NULL},
    {"nargs", (getter)get_nargs, NULL, "number of arguments (nin + nout)", NULL},
    {"ntypes", (getter)get_ntypes, NULL, "number of loops", NULL},
    {"types", (getter)get_types, NULL, "the loops, as NumPy spells them ('ff->f')", NULL},
    {"signature", (getter)get_signature, NULL, "the layout, '(m,n),(n,p)->(m,p)'", NULL},
    {"__name__", (getter)get_name, NULL, "the gufunc's name", NULL},
    {"__doc__", (getter)get_doc, (setter)set_doc, "the gufunc's docstring", NULL},
    {"loops", (getter)get_loops, NULL, "(types, arg_ndim, source, fn_name, captures) of each loop",
     NULL},
    {"compiler", (getter)get_compiler, NULL, "the loop compiler of a dynamic gufunc, or None", NULL},
    {"kernel_count", (getter)get_kernel_count, NULL, "kernels specialised so far", NULL},
    {NULL},
};

PyTypeObject CfPyGUFunc_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cufunc._core.GUFunc",
    .tp_basicsize = sizeof(CfPyGUFunc),
    .tp_dealloc = (destructor)gufunc_dealloc,
    .tp_repr = (reprfunc)gufunc_repr,
    .tp_call = (ternaryfunc)gufunc_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A GPU generalized ufunc: call it like a NumPy gufunc on NumPy arrays, device arrays "
              "or scalars.",
    .tp_traverse = (traverseproc)gufunc_traverse,
    .tp_clear = (inquiry)gufunc_clear,
    .tp_weaklistoffset = offsetof(CfPyGUFunc, weakreflist),
    .tp_dictoffset = offsetof(CfPyGUFunc, dict),
    .tp_methods = gufunc_methods,
    .tp_getset = gufunc_getset,
    .tp_new = gufunc_new,
};

/* parse_layout(signature) -> (inputs, outputs): each a list of tuples of dimension names (fixed
 * sizes as ints); the C parser, for the Python side's checks of type lists against layouts. */
static PyObject *py_parse_layout(PyObject *m, PyObject *arg)
{
    cf_layout L;
    if (cf_py_parse_layout_text(arg, &L) < 0)
        return NULL;
    PyObject *ins = PyList_New(L.nin), *outs = PyList_New(L.nout);
    for (int op = 0; ins && outs && op < L.nin + L.nout; op++) {
        PyObject *t = PyTuple_New(L.ndims[op]);
        for (int k = 0; t && k < L.ndims[op]; k++) {
            int d = L.dim[op][k];
            PyObject *v = L.fixed[d] >= 0 ? PyLong_FromLongLong((long long)L.fixed[d])
                                          : PyUnicode_FromString(L.names[d]);
            if (v == NULL)
                Py_CLEAR(t);
            else
                PyTuple_SET_ITEM(t, k, v);
        }
        if (t == NULL) {
            Py_CLEAR(ins);
            break;
        }
        PyList_SET_ITEM(op < L.nin ? ins : outs, op < L.nin ? op : op - L.nin, t);
    }
    if (ins == NULL || outs == NULL) {
        Py_XDECREF(ins);
        Py_XDECREF(outs);
        return NULL;
    }
    PyObject *r = PyTuple_Pack(2, ins, outs);
    Py_DECREF(ins);
    Py_DECREF(outs);
    return r;
}

PyMethodDef cf_py_gufunc_methods[] = {
    {"parse_layout", py_parse_layout, METH_O,
     "parse_layout('(m,n),(n,p)->(m,p)') -> (inputs, outputs): tuples of dimension names (ints for "
     "fixed sizes) per argument; SignatureError pointing at the error."},
    {NULL},
};

int cf_py_gufunc_init_module(PyObject *m)
{
    if (PyType_Ready(&CfPyGUFunc_Type) < 0)
        return -1;
    Py_INCREF(&CfPyGUFunc_Type);
    if (PyModule_AddObject(m, "GUFunc", (PyObject *)&CfPyGUFunc_Type) < 0) {
        Py_DECREF(&CfPyGUFunc_Type);
        return -1;
    }
    return 0;
}
