/* py_ufunc.c: the UFunc type, the call path of @vectorize ufuncs, in C.
 *
 * A call reads its arguments, resolves the loop (cached per input dtypes), moves host inputs to the
 * device, broadcasts, allocates outputs from the stream-ordered pool, and launches through the
 * element-wise engine (include/cufunc/ufunc.h). No Python code runs per call once the loop exists;
 * a ufunc made without signatures calls its Python `compiler` once per new combination of input
 * types, to translate and add a loop.
 *
 * Placement, as Numba and CuPy users expect: when any input or output is on the device, results are
 * DeviceArrays and nothing waits for the kernel; when all are host arrays, inputs are copied over,
 * the kernel runs, and results come back as NumPy arrays (large calls stream through overlapped
 * chunks, src/hostpipe.c); a call on scalars alone returns a NumPy scalar, as NumPy does.
 *
 * Python scalars are NEP 50 "weak": a Python float with a float32 array runs the float32 loop. They
 * travel as kernel parameters, never as arrays. */
#include "py_ufunc.h"
#include "py_args.h"
#include "py_capture.h"
#include "py_reduce.h"

#include <string.h>

/* ---- dtypes and casting ----------------------------------------------------------------------- */

static int kind_order(cf_dtype t)
{
    switch (cf_dtype_kind(t)) {
    case 'b': return 0;
    case 'u': return 1;
    case 'i': return 2;
    case 'f': return 3;
    default: return 4;
    }
}


/* A NEP 50 weak Python scalar (int, float, complex) reaches a loop type of its kind or a higher
 * one; signed and unsigned integers count as one kind. */
static int weak_ok(cf_dtype weak, cf_dtype t)
{
    int rw = kind_order(weak), rt = kind_order(t);
    if (rw == 2)
        rw = 1;
    if (rt == 2)
        rt = 1;
    return t != CF_BOOL && rt >= rw;
}



static PyObject *descr_obj(cf_dtype dt) { return (PyObject *)cf_py_descr_from_dtype(dt); }

/* ---- arguments ------------------------------------------------------------------------------ */

/* "argument 3", "out 1": names for error messages, made once (formatting them on every call
 * showed up as a quarter of the per-call time). */
static char ARG_NAMES[UF_MAX_ARGS + 1][16], OUT_NAMES[UF_MAX_ARGS][16];

static void init_arg_names(void)
{
    for (int i = 0; i <= UF_MAX_ARGS; i++)
        snprintf(ARG_NAMES[i], sizeof ARG_NAMES[i], "argument %d", i + 1);
    for (int i = 0; i < UF_MAX_ARGS; i++)
        snprintf(OUT_NAMES[i], sizeof OUT_NAMES[i], "out %d", i);
}

/* ---- loop resolution -------------------------------------------------------------------------- */

static int add_loop_from(CfPyUFunc *self, PyObject *spec);

/* The loop of an earlier resolution with this key (input dtypes and weak flags interleaved, then
 * the requested output dtype + 1: 2 * nin + 1 bytes), or -1. */
static int cached_loop(const CfPyUFunc *self, const unsigned char *key)
{
    size_t klen = 2 * (size_t)self->nin + 1;
    for (int c = 0; c < UF_CACHE; c++)
        if (self->cache[c].valid && memcmp(self->cache[c].key, key, klen) == 0)
            return self->cache[c].loop;
    return -1;
}

/* The loop for these inputs (and output dtype, or -1). Cached; compiles a new loop through the
 * Python compiler when the ufunc has one and nothing matches. */
static int resolve(CfPyUFunc *self, const cf_py_arg *args, int out_dtype, cf_casting casting,
                   int *loop)
{
    unsigned char key[2 * UF_MAX_ARGS + 1];
    cf_dtype in[UF_MAX_ARGS];
    unsigned char weak[UF_MAX_ARGS];
    for (int i = 0; i < self->nin; i++) {
        in[i] = args[i].dtype;
        weak[i] = (unsigned char)args[i].weak;
        key[2 * i] = (unsigned char)in[i];
        key[2 * i + 1] = weak[i];
    }
    key[2 * self->nin] = (unsigned char)(out_dtype + 1);
    size_t klen = 2 * (size_t)self->nin + 1;
    if ((*loop = cached_loop(self, key)) >= 0)
        return 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        int found = -1;
        if (out_dtype < 0) {
            /* a ufunc that compiles on demand gets a loop of its own for new input types, as
             * its body means for them, rather than a cast into an earlier loop */
            int dynamic = self->compiler != NULL && self->compiler != Py_None;
            cf_status rs = dynamic ? cf_ufunc_find_exact(self->uf, in, weak, &found)
                                   : cf_ufunc_resolve(self->uf, in, weak, &found);
            if (rs != CF_OK)
                found = -1;
        } else {
            /* dtype=: a loop whose outputs have that dtype and whose inputs are reachable under
             * the casting rule (NumPy's signature=(None, ..., dtype)) */
            cf_dtype types[UF_MAX_ARGS];
            for (int l = 0; l < cf_ufunc_nloops(self->uf) && found < 0; l++) {
                cf_ufunc_loop_types(self->uf, l, types);
                int ok = 1;
                for (int o = 0; o < self->nout && ok; o++)
                    ok = types[self->nin + o] == (cf_dtype)out_dtype;
                for (int i = 0; i < self->nin && ok; i++)
                    ok = weak[i] ? weak_ok(in[i], types[i]) : cf_can_cast(in[i], types[i], casting);
                if (ok)
                    found = l;
            }
        }
        if (found >= 0) {
            int c = self->cache_next++ % UF_CACHE;
            memcpy(self->cache[c].key, key, klen);
            self->cache[c].loop = found;
            self->cache[c].valid = 1;
            *loop = found;
            return 0;
        }
        if (attempt == 1 || self->compiler == Py_None || self->compiler == NULL)
            break;
        /* Ask the Python side for a loop: it gets the input types (np.dtype, or the Python type
         * int/float/complex for weak scalars) and the requested output dtype or None. */
        PyObject *types = PyTuple_New(self->nin);
        if (types == NULL)
            return -1;
        for (int i = 0; i < self->nin; i++) {
            PyObject *t;
            if (weak[i]) {
                t = (PyObject *)(in[i] == CF_INT64 ? &PyLong_Type : in[i] == CF_FLOAT64 ?
                                 &PyFloat_Type : &PyComplex_Type);
                Py_INCREF(t);
            } else {
                t = descr_obj(in[i]);
                if (t == NULL) {
                    Py_DECREF(types);
                    return -1;
                }
            }
            PyTuple_SET_ITEM(types, i, t);
        }
        PyObject *od = out_dtype >= 0 ? descr_obj((cf_dtype)out_dtype) : (Py_INCREF(Py_None), Py_None);
        PyObject *spec = od ? PyObject_CallFunctionObjArgs(self->compiler, types, od, NULL) : NULL;
        Py_DECREF(types);
        Py_XDECREF(od);
        if (spec == NULL)
            return -1;
        int r = spec == Py_None ? 0 : add_loop_from(self, spec);
        Py_DECREF(spec);
        if (r < 0)
            return -1;
    }
    cf_status st = cf_ufunc_resolve(self->uf, in, weak, loop);
    if (st == CF_OK && out_dtype >= 0) {
        PyErr_Format(PyExc_TypeError, "ufunc '%U' has no loop producing %s for these inputs",
                     self->name, cf_dtype_name((cf_dtype)out_dtype));
        return -1;
    }
    return cf_py_fail(st == CF_OK ? CF_ERR_TYPE : st, NULL);
}

/* ---- the call --------------------------------------------------------------------------------- */

typedef struct {
    PyObject *inputs[UF_MAX_ARGS];
    PyObject *outs[UF_MAX_ARGS];   /* NULL where not given */
    PyObject *where;               /* NULL for True */
    PyObject *dtype;               /* NULL for None */
    PyObject *casting;
    PyObject *stream;
    int outer;
} uf_call;

static int is_true_where(PyObject *w)
{
    return w == NULL || w == Py_True;
}

/* NumPy's spelling of a shape in messages: (2,3), (4,), (). */
static void shape_str(int ndim, const int64_t *shape, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int k = 0; k < ndim && n < cap; k++)
        n += (size_t)snprintf(buf + n, cap - n, k ? ",%lld" : "%lld", (long long)shape[k]);
    if (n < cap)
        snprintf(buf + n, cap - n, ndim == 1 ? ",)" : ")");
}

/* ---- host arrays, pipelined (src/hostpipe.c) ------------------------------------------------ */

/* The pipeline refuses a host output that overlaps an input, the mask or another output other
 * than as the same view, or itself (a zero stride), because NumPy's answer needs a copy first;
 * the whole-array path does that. Given outputs' views are filled in here. */
static int hostpipe_overlaps(CfPyUFunc *self, uf_call *c, cf_py_arg *in, cf_py_arg *out,
                             const cf_py_arg *where)
{
    const int nin = self->nin, nout = self->nout;
    for (int o = 0; o < nout; o++) {
        if (c->outs[o] == NULL || c->outs[o] == Py_None)
            continue;
        cf_py_arg_host_view(&out[o], (PyArrayObject *)c->outs[o]);
        const cf_array *v = &out[o].view;
        for (int k = 0; k < v->ndim; k++)
            if (v->shape[k] > 1 && v->strides[k] == 0)
                return 1;
        for (int i = 0; i < nin; i++)
            if (in[i].kind == CF_PY_ARG_HOST && cf_array_needs_copy(&in[i].view, v, 1))
                return 1;
        if (where && cf_array_needs_copy(&where->view, v, 1))
            return 1;
        for (int p = 0; p < o; p++)
            if (c->outs[p] && c->outs[p] != Py_None && cf_array_may_overlap(v, &out[p].view))
                return 1;
    }
    return 0;
}

/* A call whose arrays are all on the host, large enough to gain from chunks: the NumPy results
 * (C order, in the loop's output dtypes, as the whole-array path gives) are allocated here and the
 * pipeline fills them, and given out= arrays in place, with the GIL released. Returns 1 with
 * *result set, 0 when the call is not one for the pipeline (the caller goes on with the
 * whole-array path), -1 with an exception. */
static int ufunc_apply_hostpipe(CfPyUFunc *self, uf_call *c, cf_py_arg *in, cf_py_arg *out,
                                const cf_py_arg *where, cf_operand *ops, const cf_dtype *types,
                                int loop, int ndim, const int64_t *shape, const char *ufname,
                                PyObject **result)
{
    const int nin = self->nin, nout = self->nout;
    int64_t size = 1;
    for (int k = 0; k < ndim; k++)
        size *= shape[k];
    size_t bytes = where ? (size_t)PyArray_NBYTES((PyArrayObject *)where->keep) : 0;
    for (int i = 0; i < nin; i++)
        if (in[i].kind == CF_PY_ARG_HOST)
            bytes += (size_t)PyArray_NBYTES((PyArrayObject *)in[i].keep);
    for (int o = 0; o < nout; o++) {
        int given = c->outs[o] != NULL && c->outs[o] != Py_None;
        bytes += (size_t)size * cf_dtype_size(given ? out[o].dtype : types[nin + o]);
    }
    if (!cf_hostpipe_wanted(bytes) || hostpipe_overlaps(self, c, in, out, where))
        return 0;

    int device = -1, r = -1;
    PyObject *resolved = NULL, *res[UF_MAX_ARGS] = {0};
    cf_stream *s;
    if (cf_py_cuda_init(ufname) < 0)
        return -1;
    if (c->stream && c->stream != Py_None && cf_py_stream_device(c->stream, &device, "stream") < 0)
        return -1;
    if (device < 0 && cf_py_current_device(&device, ufname) < 0)
        return -1;
    if (c->stream && cf_py_stream_check(c->stream, "stream") < 0)
        return -1;
    resolved = cf_py_stream_resolve(c->stream ? c->stream : Py_None, device, "stream");
    if (resolved == NULL || cf_py_stream_get(resolved, device, &s) < 0 ||
        cf_py_host_inputs_ready(device) < 0) /* the CPU reads them (py_args.h) */
        goto done;

    for (int i = 0; i < nin; i++)
        if (in[i].kind == CF_PY_ARG_HOST) {
            ops[i].is_scalar = 0;
            cf_py_view_copy(&ops[i].array, &in[i].view);
        }
    for (int o = 0; o < nout; o++) {
        if (c->outs[o] != NULL && c->outs[o] != Py_None) {
            res[o] = Py_NewRef(c->outs[o]);
        } else {
            npy_intp dims[CF_MAX_DIMS];
            for (int k = 0; k < ndim; k++)
                dims[k] = (npy_intp)shape[k];
            PyArray_Descr *d = cf_py_descr_from_dtype(types[nin + o]);
            res[o] = d ? PyArray_Empty(ndim, dims, d, 0) : NULL; /* steals d */
            if (res[o] == NULL)
                goto done;
        }
        /* out[o] is left as it is: the whole-array path may still run (see below) */
        PyArrayObject *h = (PyArrayObject *)res[o];
        cf_array *v = &ops[nin + o].array;
        ops[nin + o].is_scalar = 0;
        v->data = (uint64_t)(uintptr_t)PyArray_DATA(h);
        v->dtype = res[o] == c->outs[o] ? out[o].dtype : types[nin + o];
        v->ndim = PyArray_NDIM(h);
        v->device = -1;
        for (int k = 0; k < v->ndim; k++) {
            v->shape[k] = PyArray_DIM(h, k);
            v->strides[k] = PyArray_STRIDE(h, k);
        }
    }
    cf_array wv;
    if (where)
        cf_py_view_copy(&wv, &where->view);
    cf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cf_ufunc_launch_host(self->uf, loop, s, ops, where ? &wv : NULL, ndim, shape, NULL);
    Py_END_ALLOW_THREADS
    if (st == CF_ERR_UNSUPPORTED) {
        /* refused before anything was written (layouts or dtypes the chunk kernels do not take):
         * the whole-array path uploads contiguous copies, or reports the error itself */
        r = 0;
        goto done;
    }
    if (st != CF_OK) {
        cf_py_fail(st, ufname);
        goto done;
    }
    if (nout == 1) {
        *result = res[0];
        res[0] = NULL;
    } else {
        *result = PyTuple_New(nout);
        if (*result == NULL)
            goto done;
        for (int o = 0; o < nout; o++) {
            PyTuple_SET_ITEM(*result, o, res[o]);
            res[o] = NULL;
        }
    }
    r = 1;
done:
    for (int o = 0; o < nout; o++)
        Py_XDECREF(res[o]);
    Py_XDECREF(resolved);
    return r;
}

static PyObject *ufunc_apply(CfPyUFunc *self, uf_call *c)
{
    const int nin = self->nin, nout = self->nout;
    const char *ufname = PyUnicode_AsUTF8(self->name);
    cf_py_arg in[UF_MAX_ARGS], out[UF_MAX_ARGS], where;
    int nclassified = 0, nout_classified = 0, have_where = 0;
    PyObject *result = NULL, *resolved_stream = NULL;
    PyObject *out_objs[UF_MAX_ARGS] = {0};  /* the DeviceArrays the kernel writes */
    int host_out_mode = 0;
    cf_py_arg_reset(&where, NULL);
    if (ufname == NULL)
        return NULL;

    /* 1. Classify every argument (no GPU needed, except to read foreign device pointers). */
    for (int i = 0; i < nin; i++, nclassified++)
        if (cf_py_arg_classify(c->inputs[i], &in[i], ARG_NAMES[i]) < 0)
            goto done;
    int any_device = 0, any_host = 0;
    for (int i = 0; i < nin; i++) {
        any_device |= in[i].kind == CF_PY_ARG_DEVICE;
        any_host |= in[i].kind == CF_PY_ARG_HOST;
    }
    cf_py_args_nep50(in, nin);
    for (int o = 0; o < nout; o++, nout_classified++) {
        cf_py_arg_reset(&out[o], NULL);
        if (c->outs[o] == NULL || c->outs[o] == Py_None)
            continue;
        if (CfPyDeviceArray_Check(c->outs[o]) || cf_py_is_device_object(c->outs[o])) {
            if (cf_py_device_view(c->outs[o], &out[o].view, &out[o].keep, 1, OUT_NAMES[o]) < 0)
                goto done;
            out[o].kind = CF_PY_ARG_DEVICE;
            out[o].dtype = out[o].view.dtype;
            any_device = 1;
        } else if (PyArray_Check(c->outs[o])) {
            PyArrayObject *h = (PyArrayObject *)c->outs[o];
            if (cf_py_dtype_from_descr(PyArray_DESCR(h), &out[o].dtype, OUT_NAMES[o]) < 0)
                goto done;
            if (!PyArray_ISWRITEABLE(h)) {
                PyErr_Format(PyExc_ValueError, "output array %d is read-only", o);
                goto done;
            }
            out[o].kind = CF_PY_ARG_HOST;
            out[o].view.ndim = PyArray_NDIM(h);
            for (int k = 0; k < out[o].view.ndim; k++)
                out[o].view.shape[k] = PyArray_DIM(h, k);
            host_out_mode = 1;
        } else {
            PyErr_Format(PyExc_TypeError, "return arrays must be of ArrayType (a NumPy array or a "
                         "device array), not %.200s", Py_TYPE(c->outs[o])->tp_name);
            goto done;
        }
    }
    if (host_out_mode && any_device) {
        PyErr_Format(PyExc_TypeError, "ufunc '%s': out= is a host (NumPy) array but an input is "
                     "on the device; pass a device array as out=, or copy the input to the host",
                     ufname);
        goto done;
    }
    for (int o = 0; o < nout; o++)
        if (out[o].kind == CF_PY_ARG_DEVICE && host_out_mode) {
            PyErr_Format(PyExc_TypeError, "ufunc '%s': outputs must be all on the host or all on "
                         "the device", ufname);
            goto done;
        }
    if (!is_true_where(c->where)) {
        /* where=False (or a false scalar): nothing is written; outputs are still allocated */
        if (cf_py_arg_classify(c->where, &where, ARG_NAMES[nin]) < 0)
            goto done;
        have_where = 1;
        if (where.kind == CF_PY_ARG_SCALAR) {
            int truth = PyObject_IsTrue(where.value);
            if (truth < 0)
                goto done;
            cf_py_arg_clear(&where);
            have_where = truth ? 0 : 2; /* 2: nothing is written at all */
        } else if (where.dtype != CF_BOOL) {
            PyErr_Format(PyExc_TypeError, "where= must be a boolean array, not %s",
                         cf_dtype_name(where.dtype));
            goto done;
        } else if (where.kind == CF_PY_ARG_DEVICE) {
            any_device = 1;
        }
    }

    /* 2. The loop. */
    cf_casting casting;
    int out_dtype = -1, loop = -1;
    if (cf_py_parse_casting(c->casting, &casting) < 0)
        goto done;
    if (c->dtype != NULL && c->dtype != Py_None) {
        cf_dtype d;
        if (cf_py_dtype_from_object(c->dtype, &d, NULL, "dtype") < 0)
            goto done;
        out_dtype = (int)d;
    }
    if (resolve(self, in, out_dtype, casting, &loop) < 0)
        goto done;
    cf_dtype types[UF_MAX_ARGS];
    cf_ufunc_loop_types(self->uf, loop, types);
    for (int o = 0; o < nout; o++)
        if (c->outs[o] && c->outs[o] != Py_None && !cf_can_cast(types[nin + o], out[o].dtype, casting)) {
            PyErr_Format(PyExc_TypeError, "Cannot cast ufunc '%s' output from dtype('%s') to "
                         "dtype('%s') with casting rule '%s'", ufname, cf_dtype_name(types[nin + o]),
                         cf_dtype_name(out[o].dtype), cf_casting_name(casting));
            goto done;
        }
    for (int i = 0; i < nin; i++)
        if (!in[i].weak && !cf_can_cast(in[i].dtype, types[i], casting)) {
            PyErr_Format(PyExc_TypeError, "Cannot cast ufunc '%s' input %d from dtype('%s') to "
                         "dtype('%s') with casting rule '%s'", ufname, i, cf_dtype_name(in[i].dtype),
                         cf_dtype_name(types[i]), cf_casting_name(casting));
            goto done;
        }

    /* Scalars become kernel parameters now: a Python int that does not fit the loop's integer
     * type is an OverflowError (NEP 50), reported before anything touches the GPU. */
    cf_operand ops[2 * UF_MAX_ARGS];
    for (int i = 0; i < nin; i++)
        if (in[i].kind == CF_PY_ARG_SCALAR && cf_py_arg_scalar(&in[i], types[i], &ops[i], ufname, i) < 0)
            goto done;

    /* 3. Shapes: inputs (after outer's reshaping) and outputs broadcast together. */
    if (c->outer) {
        int n0 = in[0].kind == CF_PY_ARG_SCALAR ? 0 : in[0].view.ndim;
        int n1 = in[1].kind == CF_PY_ARG_SCALAR ? 0 : in[1].view.ndim;
        if (n0 + n1 > CF_MAX_DIMS) {
            PyErr_SetString(PyExc_ValueError, "outer: too many dimensions");
            goto done;
        }
        /* a[..., None, None] and b[None, None, ...] as views: extent-1 axes */
        if (in[0].kind != CF_PY_ARG_SCALAR)
            for (int k = 0; k < n1; k++) {
                in[0].view.shape[n0 + k] = 1;
                in[0].view.strides[n0 + k] = 0;
            }
        if (in[1].kind != CF_PY_ARG_SCALAR) {
            memmove(in[1].view.shape + n0, in[1].view.shape, sizeof(int64_t) * (size_t)n1);
            memmove(in[1].view.strides + n0, in[1].view.strides, sizeof(int64_t) * (size_t)n1);
            for (int k = 0; k < n0; k++) {
                in[1].view.shape[k] = 1;
                in[1].view.strides[k] = 0;
            }
            in[1].view.ndim = n0 + n1;
        }
        if (in[0].kind != CF_PY_ARG_SCALAR)
            in[0].view.ndim = n0 + n1;
    }
    int nshapes = 0, ndims[2 * UF_MAX_ARGS + 1];
    const int64_t *shapes[2 * UF_MAX_ARGS + 1];
    for (int i = 0; i < nin; i++)
        if (in[i].kind != CF_PY_ARG_SCALAR) {
            ndims[nshapes] = in[i].view.ndim;
            shapes[nshapes++] = in[i].view.shape;
        }
    for (int o = 0; o < nout; o++)
        if (c->outs[o] && c->outs[o] != Py_None) {
            ndims[nshapes] = out[o].view.ndim;
            shapes[nshapes++] = out[o].view.shape;
        }
    if (have_where == 1) {
        ndims[nshapes] = where.view.ndim;
        shapes[nshapes++] = where.view.shape;
    }
    int ndim;
    int64_t shape[CF_MAX_DIMS];
    cf_status st = cf_broadcast_shapes(nshapes, ndims, shapes, &ndim, shape);
    if (st != CF_OK) {
        cf_py_fail(st, NULL);
        goto done;
    }
    for (int o = 0; o < nout; o++) {
        if (!c->outs[o] || c->outs[o] == Py_None)
            continue;
        int same = out[o].view.ndim == ndim;
        for (int k = 0; same && k < ndim; k++)
            same = out[o].view.shape[k] == shape[k];
        if (!same) {
            char os[512], bs[512];
            shape_str(out[o].view.ndim, out[o].view.shape, os, sizeof os);
            shape_str(ndim, shape, bs, sizeof bs);
            PyErr_Format(PyExc_ValueError, "non-broadcastable output operand with shape %s "
                         "doesn't match the broadcast shape %s", os, bs);
            goto done;
        }
    }

    /* Host arrays only, and large: streamed through overlapped chunks (src/hostpipe.c). */
    if (!any_device && (any_host || host_out_mode) && have_where != 2) {
        int r = ufunc_apply_hostpipe(self, c, in, out, have_where == 1 ? &where : NULL, ops, types,
                                     loop, ndim, shape, ufname, &result);
        if (r != 0)
            goto done; /* the result, or an exception */
    }

    /* 4. The device and the stream; host inputs move over. */
    int device = -1;
    for (int i = 0; i < nin && device < 0; i++)
        if (in[i].kind == CF_PY_ARG_DEVICE)
            device = in[i].view.device;
    for (int o = 0; o < nout && device < 0; o++)
        if (out[o].kind == CF_PY_ARG_DEVICE)
            device = out[o].view.device;
    if (device < 0 && have_where == 1 && where.kind == CF_PY_ARG_DEVICE)
        device = where.view.device;
    if (cf_py_cuda_init(ufname) < 0)
        goto done;
    if (device < 0) {
        if (c->stream && c->stream != Py_None && cf_py_stream_device(c->stream, &device, "stream") < 0)
            goto done;
        if (device < 0 && cf_py_current_device(&device, ufname) < 0)
            goto done;
    }
    if (c->stream && cf_py_stream_check(c->stream, "stream") < 0)
        goto done;
    resolved_stream = cf_py_stream_resolve(c->stream ? c->stream : Py_None, device, "stream");
    if (resolved_stream == NULL)
        goto done;
    cf_stream *s;
    if (cf_py_stream_get(resolved_stream, device, &s) < 0)
        goto done;
    PyObject *stream_for_arrays = resolved_stream == Py_None ? NULL : resolved_stream;
    for (int i = 0; i < nin; i++) {
        if (in[i].kind == CF_PY_ARG_DEVICE && in[i].view.device != device) {
            PyErr_Format(PyExc_ValueError, "ufunc '%s': argument %d is on device %d, but the call "
                         "runs on device %d", ufname, i + 1, in[i].view.device, device);
            goto done;
        }
        if (in[i].kind == CF_PY_ARG_HOST) {
            /* upload keeps the shape the outer reshaping gave: reapply it to the copy */
            cf_array shaped = in[i].view;
            if (cf_py_arg_upload(&in[i], in[i].dtype, device, stream_for_arrays, s) < 0)
                goto done;
            if (c->outer) {
                uint64_t data = in[i].view.data;
                int64_t item = (int64_t)cf_dtype_size(in[i].dtype), stride = item;
                in[i].view = shaped;
                in[i].view.data = data;
                in[i].view.device = device;
                for (int k = shaped.ndim - 1; k >= 0; k--) {
                    in[i].view.strides[k] = shaped.shape[k] == 1 ? 0 : stride;
                    stride *= shaped.shape[k] > 0 ? shaped.shape[k] : 1;
                }
            }
        }
    }
    if (have_where == 1 && where.kind == CF_PY_ARG_HOST &&
        cf_py_arg_upload(&where, where.dtype, device, stream_for_arrays, s) < 0)
        goto done;

    /* 5. Outputs: given device arrays, or new ones. */
    for (int o = 0; o < nout; o++) {
        cf_dtype odt = types[nin + o];
        if (out[o].kind == CF_PY_ARG_DEVICE && c->outs[o] && c->outs[o] != Py_None) {
            if (out[o].view.device != device) {
                PyErr_Format(PyExc_ValueError, "ufunc '%s': out %d is on device %d, but the call "
                             "runs on device %d", ufname, o, out[o].view.device, device);
                goto done;
            }
            /* a given DeviceArray is used as it is; a foreign (CAI) output gets a view object */
            out_objs[o] = CfPyDeviceArray_Check(c->outs[o])
                              ? Py_NewRef(c->outs[o])
                              : cf_py_devicearray_wrap(&out[o].view, out[o].keep, stream_for_arrays, 0);
        } else {
            if (out[o].kind == CF_PY_ARG_HOST)
                odt = out[o].dtype; /* the kernel converts; the bytes then move as they are */
            out_objs[o] = cf_py_devicearray_alloc(ndim, shape, odt, 'C', device, stream_for_arrays);
        }
        if (out_objs[o] == NULL)
            goto done;
        if (out[o].kind != CF_PY_ARG_DEVICE || !c->outs[o] || c->outs[o] == Py_None) {
            out[o].view = ((CfPyDeviceArray *)out_objs[o])->view;
            out[o].dtype = odt;
        }
        if (out[o].kind == CF_PY_ARG_HOST && have_where) {
            /* where= leaves masked elements as they are: start from the host out's values */
            PyObject *r = PyObject_CallMethod(out_objs[o], "copy_to_device", "O", c->outs[o]);
            if (r == NULL)
                goto done;
            Py_DECREF(r);
        }
    }
    if (cf_py_args_order(in, nin, out, nout, have_where == 1 ? &where : NULL, device, resolved_stream, s) < 0)
        goto done; /* after the producers of the device operands (py_args.h) */
    /* An input (or the where= mask) sharing memory with an output other than as the same view is
     * copied first: NumPy defines the call as if inputs were copied before outputs are written. An
     * element-wise kernel reads each element before it writes the same index, so the same view is
     * safe in place (cf_array_needs_copy). */
    for (int o = 0; o < nout; o++) {
        for (int i = 0; i < nin; i++)
            if (in[i].kind == CF_PY_ARG_DEVICE && cf_array_needs_copy(&in[i].view, &out[o].view, 1) &&
                cf_py_arg_copy(&in[i], device, stream_for_arrays) < 0)
                goto done;
        if (have_where == 1 && where.kind == CF_PY_ARG_DEVICE &&
            cf_array_needs_copy(&where.view, &out[o].view, 1) &&
            cf_py_arg_copy(&where, device, stream_for_arrays) < 0)
            goto done;
    }

    /* 6. Launch. */
    if (have_where != 2) {
        for (int i = 0; i < nin; i++)
            if (in[i].kind != CF_PY_ARG_SCALAR) {
                ops[i].is_scalar = 0;
                cf_py_view_copy(&ops[i].array, &in[i].view);
            }
        for (int o = 0; o < nout; o++) {
            ops[nin + o].is_scalar = 0;
            cf_py_view_copy(&ops[nin + o].array, &out[o].view);
        }
        /* a ready kernel is launched holding the GIL (a few microseconds, as CuPy and PyTorch
         * launch); the GIL is let go only around a launch that compiles its kernel first */
        int launched = 0;
        const cf_array *wv = have_where == 1 ? &where.view : NULL;
        st = cf_ufunc_launch_if_ready(self->uf, loop, s, ops, wv, ndim, shape, &launched, NULL);
        if (st == CF_OK && !launched) {
            Py_BEGIN_ALLOW_THREADS
            st = cf_ufunc_launch(self->uf, loop, s, ops, wv, ndim, shape);
            Py_END_ALLOW_THREADS
        }
        if (st != CF_OK) {
            cf_py_fail(st, ufname);
            goto done;
        }
    }

    /* 7. Results. */
    int all_scalar = !any_device && !any_host && !host_out_mode && (have_where != 1 || where.kind == CF_PY_ARG_SCALAR);
    if (any_device || (!host_out_mode && !any_host && !all_scalar)) {
        /* device results (or given device outs) */
        if (nout == 1) {
            result = (c->outs[0] && c->outs[0] != Py_None) ? (Py_INCREF(c->outs[0]), c->outs[0])
                                                          : (Py_INCREF(out_objs[0]), out_objs[0]);
        } else {
            result = PyTuple_New(nout);
            for (int o = 0; result && o < nout; o++) {
                PyObject *r = (c->outs[o] && c->outs[o] != Py_None) ? c->outs[o] : out_objs[o];
                Py_INCREF(r);
                PyTuple_SET_ITEM(result, o, r);
            }
        }
        goto done;
    }
    /* host results: copy back (into given host outs, or new NumPy arrays) */
    PyObject *hosts[UF_MAX_ARGS] = {0};
    for (int o = 0; o < nout; o++) {
        PyObject *h;
        if (c->outs[o] && c->outs[o] != Py_None) {
            h = PyObject_CallMethod(out_objs[o], "copy_to_host", NULL);
            if (h != NULL && PyArray_CopyInto((PyArrayObject *)c->outs[o], (PyArrayObject *)h) < 0)
                Py_CLEAR(h);
            if (h != NULL) {
                Py_SETREF(h, c->outs[o]);
                Py_INCREF(h);
            }
        } else {
            h = PyObject_CallMethod(out_objs[o], "copy_to_host", NULL);
            if (h != NULL && all_scalar) {
                /* NumPy returns a scalar when every input was a scalar */
                PyObject *sc = PyArray_Return((PyArrayObject *)h);
                h = sc;
            }
        }
        if (h == NULL) {
            for (int j = 0; j < o; j++)
                Py_XDECREF(hosts[j]);
            goto done;
        }
        hosts[o] = h;
    }
    if (nout == 1) {
        result = hosts[0];
    } else {
        result = PyTuple_New(nout);
        for (int o = 0; o < nout; o++) {
            if (result)
                PyTuple_SET_ITEM(result, o, hosts[o]);
            else
                Py_DECREF(hosts[o]);
        }
    }
done:
    for (int i = 0; i < nclassified; i++)
        cf_py_arg_clear(&in[i]);
    for (int o = 0; o < nout_classified; o++)
        cf_py_arg_clear(&out[o]);
    for (int o = 0; o < nout; o++)
        Py_XDECREF(out_objs[o]);
    cf_py_arg_clear(&where);
    Py_XDECREF(resolved_stream);
    return result;
}

/* Read a call's arguments into `c`: n positional ones in args[0..n), then the values of the
 * keywords named in kwnames (may be NULL), as a vectorcall passes them. */
static int parse_call(CfPyUFunc *self, PyObject *const *args, Py_ssize_t n, PyObject *kwnames,
                      uf_call *c, int outer)
{
    const char *name = PyUnicode_AsUTF8(self->name);
    memset(c, 0, sizeof *c);
    c->outer = outer;
    if (cf_py_call_positional(args, n, self->nin, self->nout, outer ? "outer of " : "", name,
                              c->inputs, c->outs) < 0)
        return -1;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *value = args[n + i];
        const char *k = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
        if (k == NULL)
            return -1;
        if (strcmp(k, "out") == 0) {
            if (cf_py_call_out(value, n, self->nin, self->nout, "ufunc", name, c->outs) < 0)
                return -1;
        } else if (strcmp(k, "where") == 0) {
            c->where = value;
        } else if (strcmp(k, "dtype") == 0) {
            c->dtype = value;
        } else if (strcmp(k, "casting") == 0) {
            c->casting = value;
        } else if (strcmp(k, "stream") == 0) {
            c->stream = value;
        } else if (strcmp(k, "order") == 0 || strcmp(k, "subok") == 0) {
            /* accepted for NumPy compatibility: outputs are C-ordered; subclasses are not kept */
        } else {
            PyErr_Format(PyExc_TypeError, "'%s' is an invalid keyword to ufunc '%s'", k, name);
            return -1;
        }
    }
    return 0;
}

/* ---- the fast path ------------------------------------------------------------------------------
 * The commonest call in a loop of small launches: DeviceArrays of one shape on one device, the
 * outputs given (positionally or as out=, and no other keyword), input dtypes seen before. It does
 * what ufunc_apply does for such a call with fewer steps and a far smaller footprint, which is
 * most of a small call's cost beside the launch itself (bench/bench_call_overhead.py). Anything
 * else, or any doubt (a broadcast, a read-only or overlapping output, a cast the rule refuses, a
 * new dtype combination), returns NULL with *handled == 0: ufunc_apply then takes the call and
 * gives its errors.
 *
 * A call on the very DeviceArrays of the last call it launched (known by their serials: a
 * DeviceArray never changes) repeats that launch from its record, skipping even the checks: they
 * have the same answers (the ufunc's loops are fixed until add_loop, which clears the record). */
static PyObject *fast_result(PyObject *const *outs, int nout)
{
    if (nout == 1)
        return Py_NewRef(outs[0]);
    PyObject *result = PyTuple_New(nout);
    for (int o = 0; result && o < nout; o++)
        PyTuple_SET_ITEM(result, o, Py_NewRef(outs[o]));
    return result;
}

static PyObject *ufunc_fast(CfPyUFunc *self, PyObject *const *args, Py_ssize_t n,
                            PyObject *kwnames, int *handled)
{
    static PyObject *out_str;
    const int nin = self->nin, nout = self->nout, nops = nin + nout;
    PyObject *outs[UF_MAX_ARGS];
    const CfPyDeviceArray *arr[2 * UF_MAX_ARGS];
    arr[0] = NULL; /* set below: nin >= 1 (this tells the compiler) */
    *handled = 0;
    if (nin < 1)
        return NULL;
    if (out_str == NULL && (out_str = PyUnicode_InternFromString("out")) == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (kwnames == NULL && n == nops) {
        for (int o = 0; o < nout; o++)
            outs[o] = args[nin + o];
    } else if (kwnames != NULL && n == nin && PyTuple_GET_SIZE(kwnames) == 1 &&
               PyTuple_GET_ITEM(kwnames, 0) == out_str) { /* keyword names are interned */
        PyObject *v = args[nin];
        if (PyTuple_CheckExact(v) && PyTuple_GET_SIZE(v) == nout) {
            for (int o = 0; o < nout; o++)
                outs[o] = PyTuple_GET_ITEM(v, o);
        } else if (nout == 1) {
            outs[0] = v;
        } else {
            return NULL;
        }
    } else {
        return NULL;
    }
    int same = self->last.nops == nops;
    for (int i = 0; i < nops; i++) {
        PyObject *a = i < nin ? args[i] : outs[i - nin];
        if (!CfPyDeviceArray_Check(a))
            return NULL;
        arr[i] = (const CfPyDeviceArray *)a;
        same = same && arr[i]->serial == self->last.serial[i];
    }
    cf_stream *s;
    if (same) {
        *handled = 1;
        if (cf_py_stream_get(Py_None, arr[0]->view.device, &s) < 0 ||
            cf_py_arrays_order(arr, nin, nops, s) < 0)
            return NULL;
        cf_status st = cf_ufunc_replay(&self->last.rec, s);
        if (st != CF_OK) {
            cf_py_fail(st, PyUnicode_AsUTF8(self->name));
            return NULL;
        }
        return fast_result(outs, nout);
    }

    const cf_array *v0 = &arr[0]->view;
    unsigned char key[2 * UF_MAX_ARGS + 1];
    for (int i = 0; i < nops; i++) {
        const cf_array *v = &arr[i]->view;
        if (v->device != v0->device || !cf_array_has_shape(v, v0->ndim, v0->shape) ||
            (i >= nin && arr[i]->readonly))
            return NULL;
        if (i < nin) {
            key[2 * i] = (unsigned char)v->dtype;
            key[2 * i + 1] = 0; /* arrays are strong */
        }
    }
    key[2 * nin] = 0; /* no dtype= */
    int loop = cached_loop(self, key);
    if (loop < 0)
        return NULL;
    cf_dtype types[UF_MAX_ARGS];
    cf_ufunc_loop_types(self->uf, loop, types);
    for (int i = 0; i < nops; i++) {
        cf_dtype have = arr[i]->view.dtype;
        if (i < nin ? !cf_can_cast(have, types[i], CF_CAST_SAME_KIND)
                    : !cf_can_cast(types[i], have, CF_CAST_SAME_KIND))
            return NULL;
    }
    for (int i = 0; i < nin; i++)
        for (int o = nin; o < nops; o++)
            if (cf_array_needs_copy(&arr[i]->view, &arr[o]->view, 1))
                return NULL; /* ufunc_apply copies the input first */

    *handled = 1;
    if (cf_py_stream_get(Py_None, v0->device, &s) < 0 || cf_py_arrays_order(arr, nin, nops, s) < 0)
        return NULL;
    cf_operand ops[2 * UF_MAX_ARGS];
    for (int i = 0; i < nops; i++) {
        ops[i].is_scalar = 0;
        cf_py_view_copy(&ops[i].array, &arr[i]->view);
    }
    int launched = 0;
    self->last.nops = 0;
    cf_status st = cf_ufunc_launch_if_ready(self->uf, loop, s, ops, NULL, v0->ndim, v0->shape,
                                            &launched, &self->last.rec);
    if (st == CF_OK && launched && self->last.rec.fn) {
        int i = 0;
        while (i < nops && (self->last.serial[i] = arr[i]->serial) != 0)
            i++;
        if (i == nops) /* every operand has a serial */
            self->last.nops = nops;
    }
    if (st == CF_OK && !launched) {
        Py_BEGIN_ALLOW_THREADS
        st = cf_ufunc_launch(self->uf, loop, s, ops, NULL, v0->ndim, v0->shape);
        Py_END_ALLOW_THREADS
    }
    if (st != CF_OK) {
        cf_py_fail(st, PyUnicode_AsUTF8(self->name));
        return NULL;
    }
    return fast_result(outs, nout);
}

static PyObject *ufunc_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames)
{
    int handled;
    PyObject *r = ufunc_fast((CfPyUFunc *)self, args, PyVectorcall_NARGS(nargsf), kwnames, &handled);
    if (handled)
        return r;
    uf_call c;
    if (parse_call((CfPyUFunc *)self, args, PyVectorcall_NARGS(nargsf), kwnames, &c, 0) < 0)
        return NULL;
    return ufunc_apply((CfPyUFunc *)self, &c);
}

static PyObject *ufunc_outer(CfPyUFunc *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    if (self->nin != 2) {
        PyErr_SetString(PyExc_ValueError, "outer product only supported for binary functions");
        return NULL;
    }
    uf_call c;
    if (parse_call(self, args, nargs, kwnames, &c, 1) < 0)
        return NULL;
    return ufunc_apply(self, &c);
}

/* ---- construction and loops ------------------------------------------------------------------- */

/* spec = (types, source, fn_name[, options[, captures]]): types a sequence of nin + nout
 * dtype-likes, captures the loop's captured device arrays (py_capture.h). */
static int add_loop_from(CfPyUFunc *self, PyObject *spec)
{
    PyObject *types, *source, *fn_name, *options = NULL, *captures = NULL;
    if (!PyArg_ParseTuple(spec, "OUU|OO:add_loop", &types, &source, &fn_name, &options, &captures))
        return -1;
    PyObject *seq = PySequence_Fast(types, "add_loop: types must be a sequence of dtypes");
    if (seq == NULL)
        return -1;
    int nargs = self->nin + self->nout;
    if (PySequence_Fast_GET_SIZE(seq) != nargs) {
        PyErr_Format(PyExc_ValueError, "add_loop: %d types expected (%d inputs, %d outputs), got "
                     "%zd", nargs, self->nin, self->nout, PySequence_Fast_GET_SIZE(seq));
        Py_DECREF(seq);
        return -1;
    }
    cf_dtype dts[UF_MAX_ARGS];
    PyObject *descrs = PyTuple_New(nargs);
    if (descrs == NULL) {
        Py_DECREF(seq);
        return -1;
    }
    for (int i = 0; i < nargs; i++) {
        PyArray_Descr *d = NULL;
        if (cf_py_dtype_from_object(PySequence_Fast_GET_ITEM(seq, i), &dts[i], &d, "types") < 0) {
            Py_DECREF(seq);
            Py_DECREF(descrs);
            return -1;
        }
        PyTuple_SET_ITEM(descrs, i, (PyObject *)d);
    }
    Py_DECREF(seq);
    const char *opts[64];
    int nopts = 0;
    PyObject *optseq = NULL;
    if (options != NULL && options != Py_None) {
        optseq = PySequence_Fast(options, "add_loop: options must be a sequence of str");
        if (optseq == NULL || PySequence_Fast_GET_SIZE(optseq) > 64) {
            if (optseq)
                PyErr_SetString(PyExc_ValueError, "add_loop: at most 64 options");
            Py_XDECREF(optseq);
            Py_DECREF(descrs);
            return -1;
        }
        nopts = (int)PySequence_Fast_GET_SIZE(optseq);
        for (int i = 0; i < nopts; i++) {
            opts[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(optseq, i));
            if (opts[i] == NULL) {
                Py_DECREF(optseq);
                Py_DECREF(descrs);
                return -1;
            }
        }
    }
    cf_py_captures cap;
    if (cf_py_captures_read(captures, &cap, "add_loop") < 0) {
        Py_XDECREF(optseq);
        Py_DECREF(descrs);
        return -1;
    }
    PyObject *opt_tuple = optseq ? PySequence_Tuple(optseq) : PyTuple_New(0);
    PyObject *cap_items = cap.items ? Py_NewRef(cap.items) : PyTuple_New(0);
    /* The entry keeps the captured arrays alive as long as the ufunc (its kernels read them); it
     * is in the list before the loop exists, so that no kernel can outlive them. */
    PyObject *entry = opt_tuple && cap_items ? PyTuple_Pack(5, descrs, source, fn_name, opt_tuple,
                                                            cap_items)
                                             : NULL;
    Py_XDECREF(opt_tuple);
    Py_XDECREF(cap_items);
    Py_DECREF(descrs);
    if (entry == NULL || PyList_Append(self->loops, entry) < 0) {
        Py_XDECREF(entry);
        Py_XDECREF(optseq);
        cf_py_captures_clear(&cap);
        return -1;
    }
    Py_DECREF(entry);
    cf_status st = cf_ufunc_add_loop_globals(self->uf, dts, PyUnicode_AsUTF8(source),
                                             PyUnicode_AsUTF8(fn_name), opts, nopts, cap.globals,
                                             cap.n, NULL);
    Py_XDECREF(optseq); /* after the call: opts point into its items */
    cf_py_captures_clear(&cap);
    if (st != CF_OK) {
        Py_ssize_t n = PyList_GET_SIZE(self->loops);
        PyList_SetSlice(self->loops, n - 1, n, NULL);
        return cf_py_fail(st, "add_loop");
    }
    memset(self->cache, 0, sizeof self->cache); /* a new loop can change resolutions */
    self->last.nops = 0;
    return 0;
}

static PyObject *ufunc_add_loop(CfPyUFunc *self, PyObject *args)
{
    if (add_loop_from(self, args) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *ufunc_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"name", "nin", "nout", "identity", "doc", "compiler", NULL};
    PyObject *name, *identity = Py_None, *doc = Py_None, *compiler = Py_None;
    int nin, nout;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Uii|OOO:UFunc", kw, &name, &nin, &nout,
                                     &identity, &doc, &compiler))
        return NULL;
    if (compiler != Py_None && !PyCallable_Check(compiler)) {
        PyErr_SetString(PyExc_TypeError, "UFunc: compiler must be callable or None");
        return NULL;
    }
    CfPyUFunc *self = (CfPyUFunc *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    cf_status st = cf_ufunc_create(PyUnicode_AsUTF8(name), nin, nout, &self->uf);
    if (st != CF_OK) {
        Py_DECREF(self);
        return cf_py_raise(st, "UFunc");
    }
    self->nin = nin;
    self->nout = nout;
    self->vectorcall = ufunc_vectorcall;
    Py_INCREF(name);
    self->name = name;
    Py_INCREF(doc);
    self->doc = doc;
    Py_INCREF(identity);
    self->identity = identity;
    Py_INCREF(compiler);
    self->compiler = compiler;
    self->loops = PyList_New(0);
    if (self->loops == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int ufunc_traverse(CfPyUFunc *self, visitproc visit, void *arg)
{
    Py_VISIT(self->compiler);
    Py_VISIT(self->identity);
    Py_VISIT(self->loops);
    Py_VISIT(self->dict);
    return 0;
}

static int ufunc_clear(CfPyUFunc *self)
{
    Py_CLEAR(self->compiler);
    Py_CLEAR(self->identity);
    Py_CLEAR(self->loops);
    Py_CLEAR(self->dict);
    return 0;
}

static void ufunc_dealloc(CfPyUFunc *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist)
        PyObject_ClearWeakRefs((PyObject *)self);
    ufunc_clear(self);
    Py_CLEAR(self->name);
    Py_CLEAR(self->doc);
    cf_ufunc_free(self->uf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *ufunc_repr(CfPyUFunc *self)
{
    return PyUnicode_FromFormat("<cufunc.UFunc '%U' (%d in, %d out, %d loops)>", self->name,
                                self->nin, self->nout, cf_ufunc_nloops(self->uf));
}

/* ---- attributes ------------------------------------------------------------------------------- */

static PyObject *get_nin(CfPyUFunc *self, void *c) { return PyLong_FromLong(self->nin); }
static PyObject *get_nout(CfPyUFunc *self, void *c) { return PyLong_FromLong(self->nout); }
static PyObject *get_nargs(CfPyUFunc *self, void *c) { return PyLong_FromLong(self->nin + self->nout); }
static PyObject *get_ntypes(CfPyUFunc *self, void *c) { return PyLong_FromLong(cf_ufunc_nloops(self->uf)); }
static PyObject *get_name(CfPyUFunc *self, void *c) { return Py_NewRef(self->name); }
static PyObject *get_identity(CfPyUFunc *self, void *c) { return Py_NewRef(self->identity); }
static PyObject *get_doc(CfPyUFunc *self, void *c) { return Py_NewRef(self->doc); }
static PyObject *get_loops(CfPyUFunc *self, void *c) { return PyList_AsTuple(self->loops); }
static PyObject *get_compiler(CfPyUFunc *self, void *c) { return Py_NewRef(self->compiler); }
static PyObject *get_kernel_count(CfPyUFunc *self, void *c)
{
    return PyLong_FromLong(cf_ufunc_kernel_count(self->uf));
}

static int set_doc(CfPyUFunc *self, PyObject *value, void *c)
{
    Py_XSETREF(self->doc, Py_NewRef(value ? value : Py_None));
    return 0;
}

/* NumPy's spelling: 'ff->f', one character code per type. */
static PyObject *get_types(CfPyUFunc *self, void *c)
{
    int nl = cf_ufunc_nloops(self->uf), nargs = self->nin + self->nout;
    PyObject *list = PyList_New(nl);
    for (int l = 0; list && l < nl; l++) {
        cf_dtype t[UF_MAX_ARGS];
        char buf[2 * UF_MAX_ARGS + 4];
        int n = 0;
        cf_ufunc_loop_types(self->uf, l, t);
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

/* The generated kernel source of a call with these arguments (host arrays are described as if on
 * the device, contiguous); for inspection. No GPU needed when the inputs are host objects. */
static PyObject *ufunc_kernel_source(CfPyUFunc *self, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames)
{
    uf_call c;
    if (parse_call(self, args, nargs, kwnames, &c, 0) < 0)
        return NULL;
    cf_py_arg in[UF_MAX_ARGS];
    int n = 0, loop;
    PyObject *r = NULL;
    for (; n < self->nin; n++)
        if (cf_py_arg_classify(c.inputs[n], &in[n], ARG_NAMES[n]) < 0)
            goto done;
    cf_py_args_nep50(in, n); /* as the call does */
    if (resolve(self, in, -1, CF_CAST_SAME_KIND, &loop) < 0)
        goto done;
    cf_dtype types[UF_MAX_ARGS];
    cf_ufunc_loop_types(self->uf, loop, types);
    int ndims[UF_MAX_ARGS], ns = 0, ndim;
    const int64_t *shapes[UF_MAX_ARGS];
    int64_t shape[CF_MAX_DIMS];
    for (int i = 0; i < self->nin; i++)
        if (in[i].kind != CF_PY_ARG_SCALAR) {
            if (in[i].kind == CF_PY_ARG_HOST) { /* as a fresh contiguous device copy would be */
                cf_array v;
                cf_array_init_contiguous(&v, 0x1000000, in[i].dtype, in[i].view.ndim,
                                         in[i].view.shape, 'C', 0);
                in[i].view = v;
            }
            ndims[ns] = in[i].view.ndim;
            shapes[ns++] = in[i].view.shape;
        }
    cf_status st = cf_broadcast_shapes(ns, ndims, shapes, &ndim, shape);
    if (st != CF_OK) {
        cf_py_fail(st, NULL);
        goto done;
    }
    cf_operand ops[2 * UF_MAX_ARGS];
    for (int i = 0; i < self->nin; i++) {
        if (in[i].kind == CF_PY_ARG_SCALAR) {
            if (cf_py_arg_scalar(&in[i], types[i], &ops[i], PyUnicode_AsUTF8(self->name), i) < 0)
                goto done;
        } else {
            ops[i].is_scalar = 0;
            cf_py_view_copy(&ops[i].array, &in[i].view);
        }
    }
    for (int o = 0; o < self->nout; o++) {
        ops[self->nin + o].is_scalar = 0;
        cf_array_init_contiguous(&ops[self->nin + o].array, 0x2000000, types[self->nin + o], ndim,
                                 shape, 'C', in[0].kind == CF_PY_ARG_DEVICE ? in[0].view.device : 0);
        for (int i = 0; i < self->nin; i++)
            if (in[i].kind != CF_PY_ARG_SCALAR)
                in[i].view.device = ops[self->nin + o].array.device;
    }
    char *src = NULL;
    st = cf_ufunc_kernel_source(self->uf, loop, ops, NULL, ndim, shape, &src);
    if (st != CF_OK) {
        cf_py_fail(st, NULL);
        goto done;
    }
    r = PyUnicode_FromString(src);
    cf_free_buffer(src);
done:
    for (int i = 0; i < n; i++)
        cf_py_arg_clear(&in[i]);
    return r;
}

static PyMethodDef ufunc_methods[] = {
    {"reduce", (PyCFunction)(void (*)(void))cf_py_ufunc_reduce, METH_VARARGS | METH_KEYWORDS,
     "reduce(array, axis=0, dtype=None, out=None, keepdims=False, initial=<no value>, where=True, "
     "stream=0): reduce array's dimension(s) by applying the ufunc along them (binary ufuncs)."},
    {"accumulate", (PyCFunction)(void (*)(void))cf_py_ufunc_accumulate, METH_VARARGS | METH_KEYWORDS,
     "accumulate(array, axis=0, dtype=None, out=None, stream=0): the inclusive scan along an axis."},
    {"outer", (PyCFunction)(void (*)(void))ufunc_outer, METH_FASTCALL | METH_KEYWORDS,
     "outer(A, B, /, **kwargs): apply the ufunc to all pairs (a, b) with a in A and b in B."},
    {"add_loop", (PyCFunction)ufunc_add_loop, METH_VARARGS,
     "add_loop(types, source, fn_name, options=(), captures=()): add a loop from CUDA C (used by "
     "vectorize); captures: (symbol, device array, label) for each captured device array."},
    {"kernel_source", (PyCFunction)(void (*)(void))ufunc_kernel_source, METH_FASTCALL | METH_KEYWORDS,
     "kernel_source(*inputs): the CUDA C of the kernel a call with these inputs launches."},
    {NULL},
};

static PyGetSetDef ufunc_getset[] = {
    {"nin", (getter)get_nin, NULL, "number of inputs", NULL},
    {"nout", (getter)get_nout, NULL, "number of outputs", NULL},
    {"nargs", (getter)get_nargs, NULL, "number of arguments (nin + nout)", NULL},
    {"ntypes", (getter)get_ntypes, NULL, "number of loops", NULL},
    {"types", (getter)get_types, NULL, "the loops, as NumPy spells them ('ff->f')", NULL},
    {"identity", (getter)get_identity, NULL, "the identity for reductions, or None", NULL},
    {"__name__", (getter)get_name, NULL, "the ufunc's name", NULL},
    {"__doc__", (getter)get_doc, (setter)set_doc, "the ufunc's docstring", NULL},
    {"loops", (getter)get_loops, NULL, "(types, source, fn_name, options, captures) of each loop",
     NULL},
    {"compiler", (getter)get_compiler, NULL, "the loop compiler of a dynamic ufunc, or None", NULL},
    {"kernel_count", (getter)get_kernel_count, NULL, "kernels specialised so far", NULL},
    {NULL},
};

PyTypeObject CfPyUFunc_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cufunc._core.UFunc",
    .tp_basicsize = sizeof(CfPyUFunc),
    .tp_dealloc = (destructor)ufunc_dealloc,
    .tp_repr = (reprfunc)ufunc_repr,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(CfPyUFunc, vectorcall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A GPU ufunc: call it like a NumPy ufunc on NumPy arrays, device arrays or scalars.",
    .tp_traverse = (traverseproc)ufunc_traverse,
    .tp_clear = (inquiry)ufunc_clear,
    .tp_weaklistoffset = offsetof(CfPyUFunc, weakreflist),
    .tp_dictoffset = offsetof(CfPyUFunc, dict),
    .tp_methods = ufunc_methods,
    .tp_getset = ufunc_getset,
    .tp_new = ufunc_new,
};

/* numpy.can_cast for two dtype-likes and a casting rule, as the engine decides it (for tests). */
static PyObject *py_can_cast(PyObject *m, PyObject *args)
{
    PyObject *a, *b, *rule = NULL;
    cf_dtype fa, fb;
    cf_casting casting;
    if (!PyArg_ParseTuple(args, "OO|O:can_cast", &a, &b, &rule))
        return NULL;
    if (cf_py_dtype_from_object(a, &fa, NULL, "from_") < 0 ||
        cf_py_dtype_from_object(b, &fb, NULL, "to") < 0 || cf_py_parse_casting(rule, &casting) < 0)
        return NULL;
    return PyBool_FromLong(cf_can_cast(fa, fb, rule ? casting : CF_CAST_SAFE));
}

/* The last pipelined host-array call (for tests and benchmarks). */
static PyObject *py_hostpipe_last(PyObject *m, PyObject *unused)
{
    cf_hostpipe_info i;
    cf_hostpipe_last(&i);
    return Py_BuildValue("{s:L,s:L,s:i,s:i,s:L,s:i,s:i,s:n}", "calls", (long long)i.calls,
                         "chunks", (long long)i.chunks, "streams", i.streams, "split_axis",
                         i.split_axis, "rows", (long long)i.rows, "streamed", i.streamed,
                         "resident", i.resident, "chunk_bytes", (Py_ssize_t)i.chunk_bytes);
}

/* Read or change the pipeline's settings; returns them after the change. */
static PyObject *py_hostpipe_config(PyObject *m, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"chunk_kb", "streams", "min_kb", "reset", NULL};
    PyObject *chunk = Py_None, *streams = Py_None, *min_kb = Py_None;
    int reset = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOOp:_hostpipe_config", kw, &chunk, &streams,
                                     &min_kb, &reset))
        return NULL;
    cf_hostpipe_config c;
    cf_status st = CF_OK;
    if (reset) {
        st = cf_hostpipe_configure(NULL);
    } else if (chunk != Py_None || streams != Py_None || min_kb != Py_None) {
        cf_hostpipe_get_config(&c);
        long long v;
        if (chunk != Py_None) {
            if ((v = PyLong_AsLongLong(chunk)) == -1 && PyErr_Occurred())
                return NULL;
            if (v < 0) {
                PyErr_SetString(PyExc_ValueError, "_hostpipe_config: chunk_kb must be >= 0");
                return NULL;
            }
            c.chunk_bytes = (size_t)v << 10;
        }
        if (streams != Py_None) {
            if ((v = PyLong_AsLongLong(streams)) == -1 && PyErr_Occurred())
                return NULL;
            c.streams = v < 0 || v > 1000 ? -1 : (int)v;
        }
        if (min_kb != Py_None) {
            if ((v = PyLong_AsLongLong(min_kb)) == -1 && PyErr_Occurred())
                return NULL;
            if (v < 0) {
                PyErr_SetString(PyExc_ValueError, "_hostpipe_config: min_kb must be >= 0");
                return NULL;
            }
            c.min_bytes = (size_t)v << 10;
        }
        st = cf_hostpipe_configure(&c);
    }
    if (st != CF_OK)
        return cf_py_raise(st, NULL);
    cf_hostpipe_get_config(&c);
    return Py_BuildValue("{s:n,s:i,s:n}", "chunk_kb", (Py_ssize_t)(c.chunk_bytes >> 10), "streams",
                         c.streams, "min_kb", (Py_ssize_t)(c.min_bytes >> 10));
}

/* Tests: make pipelined calls fail just before launching chunk `chunk` (-1: off). */
static PyObject *py_hostpipe_fail_at(PyObject *m, PyObject *arg)
{
    long long chunk = PyLong_AsLongLong(arg);
    if (chunk == -1 && PyErr_Occurred())
        return NULL;
    cf_hostpipe_test_fail_at(chunk);
    Py_RETURN_NONE;
}

PyMethodDef cf_py_ufunc_methods[] = {
    {"can_cast", py_can_cast, METH_VARARGS, "cf_can_cast(from_, to, casting='safe')"},
    {"_hostpipe_last", py_hostpipe_last, METH_NOARGS,
     "What the last pipelined host-array ufunc call did: dict(calls, chunks, streams, split_axis, "
     "rows, streamed, resident, chunk_bytes)."},
    {"_hostpipe_config", (PyCFunction)(void (*)(void))py_hostpipe_config,
     METH_VARARGS | METH_KEYWORDS,
     "_hostpipe_config(chunk_kb=None, streams=None, min_kb=None, reset=False): the host-array "
     "pipeline's settings after applying the given ones (chunk_kb 0: automatic; reset: re-read "
     "CUFUNC_HOSTPIPE_* from the environment)."},
    {"_hostpipe_fail_at", py_hostpipe_fail_at, METH_O,
     "Tests: pipelined calls fail before launching chunk n (-1: never)."},
    {NULL},
};

int cf_py_ufunc_init_module(PyObject *m)
{
    init_arg_names();
    if (PyType_Ready(&CfPyUFunc_Type) < 0)
        return -1;
    Py_INCREF(&CfPyUFunc_Type);
    if (PyModule_AddObject(m, "UFunc", (PyObject *)&CfPyUFunc_Type) < 0) {
        Py_DECREF(&CfPyUFunc_Type);
        return -1;
    }
    return 0;
}
