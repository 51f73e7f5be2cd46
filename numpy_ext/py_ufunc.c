/* py_ufunc.c: the UFunc type, the call path of @vectorize ufuncs, in C: the element-wise engine's
 * part of the call pipeline (py_call.h) and the fast path in front of it.
 *
 * A call reads its arguments, resolves the loop (cached per input dtypes), broadcasts, and hands the
 * rest to the pipeline: device and stream, host inputs moved over, outputs allocated from the
 * stream-ordered pool, the launch through the element-wise engine (include/cufunc/ufunc.h), the
 * results. No Python code runs per call once the loop exists; a ufunc made without signatures
 * calls its Python `compiler` once per new combination of input types, to translate and add a
 * loop.
 *
 * Placement, as Numba and CuPy users expect: when any input or output is on the device, results are
 * DeviceArrays and nothing waits for the kernel; when all are host arrays, inputs are copied over,
 * the kernel runs, and results come back as NumPy arrays (large calls stream through overlapped
 * chunks, src/hostpipe.c: the pipeline's host strategy); a call on scalars alone returns a NumPy
 * scalar, as NumPy does.
 *
 * Python scalars are NEP 50 "weak": a Python float with a float32 array runs the float32 loop. They
 * travel as kernel parameters, never as arrays. */
#include "py_ufunc.h"
#include "diagnostics.h"
#include "py_args.h"
#include "py_capture.h"
#include "py_override.h"
#include "py_reduce.h"
#include "testing.h"

#include <string.h>

static PyObject *descr_obj(cf_dtype dt) { return (PyObject *)cf_py_descr_from_dtype(dt); }

/* ---- loop resolution -------------------------------------------------------------------------- */

static int add_loop_from(CfPyFuncHead *head, PyObject *spec);

/* The loop of an earlier resolution with this key (input dtypes and weak flags interleaved, then
 * the requested output dtype + 1: 2 * nin + 1 bytes), or -1. */
static inline int cached_loop(const CfPyUFunc *self, const unsigned char *key)
{
    return cf_py_cache_find((const CfPyFuncHead *)self, key, 2 * (size_t)self->nin + 1);
}

/* The loop for these inputs (and output dtype, or -1). Cached; compiles a new loop through the
 * Python compiler when the ufunc has one and nothing matches. */
static int resolve(CfPyUFunc *self, const cf_py_arg *args, int out_dtype, cf_casting casting,
                   int *loop)
{
    CfPyFuncHead *head = (CfPyFuncHead *)self;
    unsigned char key[2 * UF_MAX_ARGS + 1];
    cf_dtype in[UF_MAX_ARGS];
    unsigned char weak[UF_MAX_ARGS];
    cf_py_cache_key(args, self->nin, key, in, weak);
    key[2 * self->nin] = (unsigned char)(out_dtype + 1);
    size_t klen = 2 * (size_t)self->nin + 1;
    if ((*loop = cached_loop(self, key)) >= 0)
        return 0;
    int dynamic = cf_py_func_dynamic(head);
    cf_loop_rule rule = self->numba ? CF_LOOP_RULE_NUMBA : CF_LOOP_RULE_NUMPY;
    if (self->numba && dynamic)
        memset(weak, 0, sizeof weak); /* Numba types a scalar by its own dtype (np.asarray's) */
    /* the one rule (cufunc/loops.h): a ufunc that compiles on demand gets a loop of its own for
     * new input types, as its body means for them, rather than a cast into an earlier loop
     * (lazy: exact matches only, and a miss means "compile"); dtype= picks by the outputs */
    cf_loops_query q = {self->numba && !dynamic ? CF_LOOPS_NUMBA_UFUNC : CF_LOOPS_NUMPY,
                        self->nin, self->nout, in, weak, dynamic, out_dtype, casting};
    for (int attempt = 0; attempt < 2; attempt++) {
        int found = cf_ufunc_find(self->uf, &q);
        if (found >= 0) {
            cf_py_cache_add(head, key, klen, found);
            *loop = found;
            return 0;
        }
        if (attempt == 1 || !dynamic)
            break;
        /* Ask the Python side for a loop: it gets the input types (np.dtype, or the Python type
         * int/float/complex for weak scalars) and the requested output dtype or None. */
        PyObject *od = out_dtype >= 0 ? descr_obj((cf_dtype)out_dtype) : Py_NewRef(Py_None);
        if (cf_py_func_compile(head, cf_py_type_objects(self->nin, in, weak), od,
                               add_loop_from) < 0)
            return -1;
    }
    cf_status st = cf_ufunc_resolve_rule(self->uf, in, weak, rule, loop);
    if (st == CF_OK && out_dtype >= 0) {
        PyErr_Format(PyExc_TypeError, "ufunc '%U' has no loop producing %s for these inputs",
                     self->name, cf_dtype_name((cf_dtype)out_dtype));
        return -1;
    }
    if (st == CF_OK) { /* the compiler's loop does not take these types exactly */
        PyErr_SetString(PyExc_TypeError, "no loop for exactly these types");
        return -1;
    }
    return cf_py_fail(st, NULL);
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

/* The element-wise engine's state of one call, beside the pipeline's (cf_py_call). */
typedef struct {
    const uf_call *call;
    int loop;
    cf_dtype types[2 * UF_MAX_ARGS];
    int ndim;
    int64_t shape[CF_MAX_DIMS];
    cf_operand ops[2 * UF_MAX_ARGS]; /* scalars filled by prepare, arrays by the launch */
} uf_state;

#define UF_STATE(c) ((uf_state *)(c)->state)

/* NumPy's spelling of a shape in messages: (2,3), (4,), (). */
static void shape_str(int ndim, const int64_t *shape, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int k = 0; k < ndim && n < cap; k++)
        n += (size_t)snprintf(buf + n, cap - n, k ? ",%lld" : "%lld", (long long)shape[k]);
    if (n < cap)
        snprintf(buf + n, cap - n, ndim == 1 ? ",)" : ")");
}

/* Step 1: the inputs, the outputs, where=. */
static int uf_classify(cf_py_call *c)
{
    const uf_call *u = UF_STATE(c)->call;
    const int nin = c->nin, nout = c->nout;
    if (cf_py_call_classify_inputs(c, u->inputs) < 0)
        return -1;
    for (int o = 0; o < nout; o++, c->nout_done++) {
        cf_py_arg_reset(&c->out[o], NULL);
        c->out[o].kind = CF_PY_ARG_NONE;
        if (c->outs[o] != NULL && cf_py_call_classify_out(c, o, cf_py_out_name(o), NULL) < 0)
            return -1;
    }
    /* a host out= beside device inputs: computed on the device, then copied into it (as Numba
     * does; cf_py_call_deliver) */
    if (u->where == NULL || u->where == Py_True)
        return 0;
    /* where=False (or a false scalar): nothing is written; outputs are still allocated */
    if (cf_py_arg_classify(u->where, &c->where, cf_py_arg_name(nin)) < 0)
        return -1;
    c->have_where = 1;
    if (c->where.kind == CF_PY_ARG_SCALAR) {
        int truth = PyObject_IsTrue(c->where.value);
        if (truth < 0)
            return -1;
        cf_py_arg_clear(&c->where);
        c->have_where = truth ? 0 : 2; /* 2: nothing is written at all */
    } else if (c->where.dtype != CF_BOOL) {
        PyErr_Format(PyExc_TypeError, "where= must be a boolean array, not %s",
                     cf_dtype_name(c->where.dtype));
        return -1;
    } else if (c->where.kind == CF_PY_ARG_DEVICE) {
        c->any_device = 1;
    }
    return 0;
}

/* Step 2: the loop, the casts it needs, scalars as kernel parameters. */
static int uf_resolve(cf_py_call *c)
{
    CfPyUFunc *self = (CfPyUFunc *)c->self;
    uf_state *S = UF_STATE(c);
    const uf_call *u = S->call;
    const int nin = c->nin, nout = c->nout;
    cf_casting casting;
    int out_dtype = -1;
    if (cf_py_parse_casting(u->casting, &casting) < 0)
        return -1;
    if (u->dtype != NULL && u->dtype != Py_None) {
        cf_dtype d;
        if (cf_py_dtype_from_object(u->dtype, &d, NULL, "dtype") < 0)
            return -1;
        out_dtype = (int)d;
    }
    if (resolve(self, c->in, out_dtype, casting, &S->loop) < 0)
        return -1;
    cf_ufunc_loop_types(self->uf, S->loop, S->types);
    for (int o = 0; o < nout; o++)
        if (c->outs[o] && !cf_can_cast(S->types[nin + o], c->out[o].dtype, casting)) {
            PyErr_Format(PyExc_TypeError, "Cannot cast ufunc '%s' output from dtype('%s') to "
                         "dtype('%s') with casting rule '%s'", c->name,
                         cf_dtype_name(S->types[nin + o]), cf_dtype_name(c->out[o].dtype),
                         cf_casting_name(casting));
            return -1;
        }
    for (int i = 0; i < nin; i++)
        if (!c->in[i].weak && !cf_can_cast(c->in[i].dtype, S->types[i], casting)) {
            PyErr_Format(PyExc_TypeError, "Cannot cast ufunc '%s' input %d from dtype('%s') to "
                         "dtype('%s') with casting rule '%s'", c->name, i,
                         cf_dtype_name(c->in[i].dtype), cf_dtype_name(S->types[i]),
                         cf_casting_name(casting));
            return -1;
        }
    /* Scalars become kernel parameters now: a Python int that does not fit the loop's integer
     * type is an OverflowError (NEP 50), reported before anything touches the GPU. */
    for (int i = 0; i < nin; i++)
        if (c->in[i].kind == CF_PY_ARG_SCALAR &&
            cf_py_arg_scalar(&c->in[i], S->types[i], &S->ops[i], c->name, i) < 0)
            return -1;
    return 0;
}

/* outer: a[..., None, None] and b[None, None, ...] as views (extent-1 axes, stride 0). */
static int uf_outer_views(cf_py_call *c)
{
    cf_py_arg *a = &c->in[0], *b = &c->in[1];
    int n0 = a->kind == CF_PY_ARG_SCALAR ? 0 : a->view.ndim;
    int n1 = b->kind == CF_PY_ARG_SCALAR ? 0 : b->view.ndim;
    if (n0 + n1 > CF_MAX_DIMS) {
        PyErr_SetString(PyExc_ValueError, "outer: too many dimensions");
        return -1;
    }
    if (a->kind != CF_PY_ARG_SCALAR)
        for (int k = 0; k < n1; k++) {
            a->view.shape[n0 + k] = 1;
            a->view.strides[n0 + k] = 0;
        }
    if (b->kind != CF_PY_ARG_SCALAR) {
        memmove(b->view.shape + n0, b->view.shape, sizeof(int64_t) * (size_t)n1);
        memmove(b->view.strides + n0, b->view.strides, sizeof(int64_t) * (size_t)n1);
        for (int k = 0; k < n0; k++) {
            b->view.shape[k] = 1;
            b->view.strides[k] = 0;
        }
        b->view.ndim = n0 + n1;
    }
    if (a->kind != CF_PY_ARG_SCALAR)
        a->view.ndim = n0 + n1;
    c->reshaped = 1; /* uploads keep these shapes (py_call.c) */
    return 0;
}

/* Step 3: inputs (after outer's reshaping), outputs and the mask broadcast together. */
static int uf_plan(cf_py_call *c)
{
    uf_state *S = UF_STATE(c);
    const int nin = c->nin, nout = c->nout;
    if (S->call->outer && uf_outer_views(c) < 0)
        return -1;
    int nshapes = 0, ndims[2 * UF_MAX_ARGS + 1];
    const int64_t *shapes[2 * UF_MAX_ARGS + 1];
    for (int i = 0; i < nin; i++)
        if (c->in[i].kind != CF_PY_ARG_SCALAR) {
            ndims[nshapes] = c->in[i].view.ndim;
            shapes[nshapes++] = c->in[i].view.shape;
        }
    for (int o = 0; o < nout; o++)
        if (c->outs[o]) {
            ndims[nshapes] = c->out[o].view.ndim;
            shapes[nshapes++] = c->out[o].view.shape;
        }
    if (c->have_where == 1) {
        ndims[nshapes] = c->where.view.ndim;
        shapes[nshapes++] = c->where.view.shape;
    }
    /* Numba makes each scalar a one-element array: a call on scalars alone gives shape (1,) */
    static const int64_t one[1] = {1};
    int all_scalar = 1;
    for (int i = 0; i < nin; i++)
        all_scalar &= c->in[i].kind == CF_PY_ARG_SCALAR;
    if (c->numba && all_scalar) {
        ndims[nshapes] = 1;
        shapes[nshapes++] = one;
    }
    cf_status st = cf_broadcast_shapes(nshapes, ndims, shapes, &S->ndim, S->shape);
    if (st != CF_OK)
        return cf_py_fail(st, NULL);
    for (int o = 0; o < nout; o++) {
        if (!c->outs[o] || cf_array_has_shape(&c->out[o].view, S->ndim, S->shape))
            continue;
        char os[512], bs[512];
        shape_str(c->out[o].view.ndim, c->out[o].view.shape, os, sizeof os);
        shape_str(S->ndim, S->shape, bs, sizeof bs);
        PyErr_Format(PyExc_ValueError, "non-broadcastable output operand with shape %s "
                     "doesn't match the broadcast shape %s", os, bs);
        return -1;
    }
    return 0;
}

/* Steps 1-3; then where the results go: device results (DeviceArrays, or the given device outs)
 * when anything is on the device, or (a host where= mask with scalar inputs) nothing on the host;
 * else copied back, a NumPy scalar when every input was a scalar, as NumPy does. */
static int uf_prepare(cf_py_call *c)
{
    c->numba = ((CfPyUFunc *)c->self)->numba;
    if (uf_classify(c) < 0 || uf_resolve(c) < 0 || uf_plan(c) < 0)
        return -1;
    int all_scalar = !c->any_device && !c->any_host && !c->host_out &&
                     (c->have_where != 1 || c->where.kind == CF_PY_ARG_SCALAR);
    c->host_result = !(c->any_device || (!c->host_out && !c->any_host && !all_scalar));
    c->scalar_results = all_scalar && !c->numba;
    return 0;
}

/* ---- host arrays, pipelined (src/hostpipe.c): the pipeline's host strategy -------------------- */

/* The pipeline refuses a host output that overlaps an input, the mask or another output other
 * than as the same view, or itself (a zero stride), because NumPy's answer needs a copy first;
 * the whole-array path does that. */
static int hostpipe_overlaps(const cf_py_call *c)
{
    const cf_py_arg *where = c->have_where == 1 ? &c->where : NULL;
    for (int o = 0; o < c->nout; o++) {
        if (c->outs[o] == NULL)
            continue;
        const cf_array *v = &c->out[o].view;
        for (int k = 0; k < v->ndim; k++)
            if (v->shape[k] > 1 && v->strides[k] == 0)
                return 1;
        for (int i = 0; i < c->nin; i++)
            if (c->in[i].kind == CF_PY_ARG_HOST && cf_array_needs_copy(&c->in[i].view, v, 1))
                return 1;
        if (where && cf_array_needs_copy(&where->view, v, 1))
            return 1;
        for (int p = 0; p < o; p++)
            if (c->outs[p] && cf_array_may_overlap(v, &c->out[p].view))
                return 1;
    }
    return 0;
}

/* Whether the call is one for the pipeline: host arrays only, moving enough bytes. */
static int hostpipe_wanted(const cf_py_call *c)
{
    const uf_state *S = UF_STATE(c);
    if (!(c->any_host || c->host_out) || c->have_where == 2)
        return 0;
    int64_t size = 1;
    for (int k = 0; k < S->ndim; k++)
        size *= S->shape[k];
    size_t bytes = c->have_where == 1 ? (size_t)PyArray_NBYTES((PyArrayObject *)c->where.keep) : 0;
    for (int i = 0; i < c->nin; i++)
        if (c->in[i].kind == CF_PY_ARG_HOST)
            bytes += (size_t)PyArray_NBYTES((PyArrayObject *)c->in[i].keep);
    for (int o = 0; o < c->nout; o++)
        bytes += (size_t)size * cf_dtype_size(c->outs[o] ? c->out[o].dtype : S->types[c->nin + o]);
    return cf_hostpipe_wanted(bytes) && !hostpipe_overlaps(c);
}

static void pinned_result_free(PyObject *capsule)
{
    cf_hostpipe_result_free(PyCapsule_GetPointer(capsule, "cufunc.pinned_result"));
}

/* A new C-order NumPy array in a cached page-locked block (CUFUNC_HOST_RESULT_PINNED_MIN), owned
 * by a capsule that gives the block back: the pipeline's device-to-host copies then land in it
 * directly. *out is left NULL with no exception when no block can be had (ordinary memory then).
 * Steals d. 0, or -1 with an exception. */
static int pinned_result(int ndim, npy_intp *dims, PyArray_Descr *d, size_t nbytes,
                         PyObject **out)
{
    void *ptr = NULL;
    *out = NULL;
    if (cf_hostpipe_result_alloc(nbytes, &ptr) != CF_OK) {
        Py_DECREF(d);
        return 0;
    }
    PyObject *cap = PyCapsule_New(ptr, "cufunc.pinned_result", pinned_result_free);
    if (cap == NULL) {
        cf_hostpipe_result_free(ptr);
        Py_DECREF(d);
        return -1;
    }
    PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, d, ndim, dims, NULL, ptr,
                                         NPY_ARRAY_CARRAY, NULL); /* steals d */
    if (arr == NULL) {
        Py_DECREF(cap);
        return -1;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)arr, cap) < 0) { /* steals cap */
        Py_DECREF(arr);
        return -1;
    }
    *out = arr;
    return 0;
}

/* The whole call in chunks: the NumPy results (C order, in the loop's output dtypes, as the
 * whole-array path gives) are allocated here and the pipeline fills them, and given out= arrays in
 * place, with the GIL released. 1 with c->result set; 0 when the call is not one for the pipeline
 * (the pipeline goes on moving whole arrays); -1 with an exception. */
static int uf_host_strategy(cf_py_call *c)
{
    CfPyUFunc *self = (CfPyUFunc *)c->self;
    uf_state *S = UF_STATE(c);
    const int nin = c->nin, nout = c->nout;
    PyObject *res[UF_MAX_ARGS] = {0};
    int r = -1;
    if (!hostpipe_wanted(c))
        return 0;
    if (cf_py_host_inputs_ready(c->pl.device) < 0) /* the CPU reads them (py_args.h) */
        return -1;
    int64_t size = 1;
    for (int k = 0; k < S->ndim; k++)
        size *= S->shape[k];
    for (int i = 0; i < nin; i++)
        if (c->in[i].kind == CF_PY_ARG_HOST) {
            S->ops[i].is_scalar = 0;
            cf_py_view_copy(&S->ops[i].array, &c->in[i].view);
        }
    for (int o = 0; o < nout; o++) {
        if (c->outs[o] != NULL) {
            res[o] = Py_NewRef(c->outs[o]);
        } else {
            npy_intp dims[CF_MAX_DIMS];
            for (int k = 0; k < S->ndim; k++)
                dims[k] = (npy_intp)S->shape[k];
            PyArray_Descr *d = cf_py_descr_from_dtype(S->types[nin + o]);
            size_t nbytes = (size_t)size * cf_dtype_size(S->types[nin + o]);
            if (d && cf_hostpipe_result_wanted(nbytes)) {
                if (pinned_result(S->ndim, dims, d, nbytes, &res[o]) < 0) /* steals d */
                    goto done;
                d = res[o] ? NULL : cf_py_descr_from_dtype(S->types[nin + o]);
            }
            if (res[o] == NULL)
                res[o] = d ? PyArray_Empty(S->ndim, dims, d, 0) : NULL; /* steals d */
            if (res[o] == NULL)
                goto done;
        }
        /* out[o] is left as it is: the whole-array path may still run (see below) */
        cf_py_arg h;
        h.dtype = c->outs[o] ? c->out[o].dtype : S->types[nin + o];
        cf_py_arg_host_view(&h, (PyArrayObject *)res[o]);
        S->ops[nin + o].is_scalar = 0;
        cf_py_view_copy(&S->ops[nin + o].array, &h.view);
    }
    cf_array wv;
    if (c->have_where == 1)
        cf_py_view_copy(&wv, &c->where.view);
    cf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cf_ufunc_launch_host(self->uf, S->loop, c->pl.s, S->ops, c->have_where == 1 ? &wv : NULL,
                              S->ndim, S->shape, NULL);
    Py_END_ALLOW_THREADS
    if (st == CF_ERR_UNSUPPORTED) {
        /* refused before anything was written (layouts or dtypes the chunk kernels do not take):
         * the whole-array path uploads contiguous copies, or reports the error itself */
        r = 0;
        goto done;
    }
    if (st != CF_OK) {
        cf_py_fail(st, c->name);
        goto done;
    }
    c->result = cf_py_pack_results(res, nout);
    r = c->result ? 1 : -1;
done:
    for (int o = 0; o < nout; o++)
        Py_XDECREF(res[o]);
    return r;
}

/* ---- steps 6 and 9 ---------------------------------------------------------------------------- */

/* A new output in the loop's dtype, or a host out='s (the kernel converts; the bytes then move
 * back as they are). */
static PyObject *uf_alloc_out(cf_py_call *c, int o)
{
    const uf_state *S = UF_STATE(c);
    cf_dtype odt = c->out[o].kind == CF_PY_ARG_HOST ? c->out[o].dtype : S->types[c->nin + o];
    PyObject *dev = cf_py_devicearray_alloc(S->ndim, S->shape, odt, 'C', c->pl.device,
                                            c->pl.for_arrays);
    if (dev != NULL && c->out[o].kind == CF_PY_ARG_HOST && c->have_where) {
        /* where= leaves masked elements as they are: start from the host out's values */
        PyObject *r = PyObject_CallMethod(dev, "copy_to_device", "O", c->outs[o]);
        if (r == NULL)
            Py_CLEAR(dev);
        Py_XDECREF(r);
    }
    return dev;
}

static int uf_out_shape(cf_py_call *c, int o, cf_dtype *dt, int *ndim, int64_t *shape)
{
    const uf_state *S = UF_STATE(c);
    *dt = S->types[c->nin + o];
    *ndim = S->ndim;
    memcpy(shape, S->shape, sizeof(int64_t) * (size_t)S->ndim);
    return 0;
}

static int uf_launch(cf_py_call *c)
{
    CfPyUFunc *self = (CfPyUFunc *)c->self;
    uf_state *S = UF_STATE(c);
    const int nin = c->nin, nout = c->nout;
    if (c->have_where == 2)
        return 0;
    for (int i = 0; i < nin; i++)
        if (c->in[i].kind != CF_PY_ARG_SCALAR) {
            S->ops[i].is_scalar = 0;
            cf_py_view_copy(&S->ops[i].array, &c->in[i].view);
        }
    for (int o = 0; o < nout; o++) {
        S->ops[nin + o].is_scalar = 0;
        cf_py_view_copy(&S->ops[nin + o].array, &c->out[o].view);
    }
    /* a ready kernel is launched holding the GIL (a few microseconds, as CuPy and PyTorch
     * launch); the GIL is let go only around a launch that compiles its kernel first */
    int launched = 0;
    const cf_array *wv = c->have_where == 1 ? &c->where.view : NULL;
    cf_status st = cf_ufunc_launch_if_ready(self->uf, S->loop, c->pl.s, S->ops, wv, S->ndim,
                                            S->shape, &launched, NULL);
    if (st == CF_OK && !launched) {
        Py_BEGIN_ALLOW_THREADS
        st = cf_ufunc_launch(self->uf, S->loop, c->pl.s, S->ops, wv, S->ndim, S->shape);
        Py_END_ALLOW_THREADS
    }
    return st == CF_OK ? 0 : cf_py_fail(st, c->name);
}

static const cf_py_engine UF_ENGINE = {
    .prepare = uf_prepare,
    .host_strategy = uf_host_strategy,
    .alloc_out = uf_alloc_out,
    .out_shape = uf_out_shape,
    .lib_results = 1,
    .in_place_ok = 1,
    .launch = uf_launch,
};

static PyObject *ufunc_apply(CfPyUFunc *self, uf_call *u)
{
    const char *ufname = PyUnicode_AsUTF8(self->name);
    if (ufname == NULL)
        return NULL;
    cf_py_call c;
    uf_state S;
    S.call = u;
    cf_py_call_init(&c, &UF_ENGINE, self, &S, ufname, "ufunc", self->nin, self->nout, u->outs,
                    u->stream);
    return cf_py_call_run(&c);
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

/* ---- the fast path: the short-cut at the top of the call pipeline --------------------------------
 * The commonest call in a loop of small launches: DeviceArrays of one shape on one device, the
 * outputs given (positionally or as out=, and no other keyword), input dtypes seen before. It does
 * what the pipeline (ufunc_apply) does for such a call with fewer steps and a far smaller
 * footprint, which is most of a small call's cost beside the launch itself
 * (bench/bench_call_overhead.py). Anything else, or any doubt (a broadcast, a read-only or
 * overlapping output, a cast the rule refuses, a new dtype combination), returns NULL with
 * *handled == 0: the pipeline then takes the call and gives its errors. Its steps are the
 * pipeline's, cut short: place (the legacy default stream of the arrays' device), order
 * (cf_py_arrays_order), launch, deliver (cf_py_pack_results: the given outputs).
 *
 * A call on the very DeviceArrays of the last call it launched (known by their serials: a
 * DeviceArray never changes) repeats that launch from its record, skipping even the checks: they
 * have the same answers (the ufunc's loops are fixed until add_loop, which clears the record). */
static PyObject *ufunc_fast(CfPyUFunc *self, PyObject *const *args, Py_ssize_t n,
                            PyObject *kwnames, int *handled)
{
    static PyObject *out_str;
    const int nin = self->nin, nout = self->nout, nops = nin + nout;
    PyObject *outs[UF_MAX_ARGS];
    const CfPyDeviceArray *arr[2 * UF_MAX_ARGS];
    arr[0] = NULL; /* set below: nin >= 1 (this tells the compiler) */
    *handled = 0;
    if (nin < 1 || (cf_py_capture_gate && cf_py_capture_own() != NULL)) /* captured: pipeline */
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
        return cf_py_pack_results(outs, nout);
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
    return cf_py_pack_results(outs, nout);
}

static PyObject *ufunc_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames)
{
    int handled;
    PyObject *r;
    /* NEP 13 first (py_override.h): a pointer test per operand when nothing overrides */
    int ov = cf_py_override_vc(self, "__call__", ((CfPyUFunc *)self)->nin, args,
                               PyVectorcall_NARGS(nargsf), kwnames, &r);
    if (ov != 0)
        return ov > 0 ? r : NULL;
    r = ufunc_fast((CfPyUFunc *)self, args, PyVectorcall_NARGS(nargsf), kwnames, &handled);
    if (handled) {
        cf_context_restore(); /* as the pipeline does (runtime.h): a flag test on one device */
        return r;
    }
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
    PyObject *r;
    int ov = cf_py_override_vc((PyObject *)self, "outer", 2, args, nargs, kwnames, &r);
    if (ov != 0)
        return ov > 0 ? r : NULL;
    uf_call c;
    if (parse_call(self, args, nargs, kwnames, &c, 1) < 0)
        return NULL;
    return ufunc_apply(self, &c);
}

/* ---- construction and loops ------------------------------------------------------------------- */

/* spec = (types, source, fn_name[, options[, captures]]): types a sequence of nin + nout
 * dtype-likes, captures the loop's captured device arrays (py_capture.h). */
static int add_loop_from(CfPyFuncHead *head, PyObject *spec)
{
    CfPyUFunc *self = (CfPyUFunc *)head;
    PyObject *types, *source, *fn_name, *options = NULL, *captures = NULL;
    if (!PyArg_ParseTuple(spec, "OUU|OO:add_loop", &types, &source, &fn_name, &options, &captures))
        return -1;
    int nargs = self->nin + self->nout, rc = -1;
    cf_dtype dts[2 * UF_MAX_ARGS];
    const char *opts[64];
    int nopts = 0;
    cf_py_captures cap = {0};
    PyObject *descrs = NULL, *optseq = NULL;
    PyObject *seq = PySequence_Fast(types, "add_loop: types must be a sequence of dtypes");
    if (seq == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(seq) != nargs) {
        PyErr_Format(PyExc_ValueError, "add_loop: %d types expected (%d inputs, %d outputs), got "
                     "%zd", nargs, self->nin, self->nout, PySequence_Fast_GET_SIZE(seq));
        goto done;
    }
    if (cf_py_loop_types(seq, nargs, dts, &descrs) < 0 ||
        cf_py_loop_options(options, opts, &nopts, &optseq, "add_loop") < 0 ||
        cf_py_captures_read(captures, &cap, "add_loop") < 0)
        goto done;
    PyObject *opt_tuple = optseq ? PySequence_Tuple(optseq) : PyTuple_New(0);
    PyObject *cap_items = cap.items ? Py_NewRef(cap.items) : PyTuple_New(0);
    /* The entry keeps the captured arrays alive as long as the ufunc (its kernels read them); it
     * is in the list before the loop exists, so that no kernel can outlive them. */
    PyObject *entry = opt_tuple && cap_items ? PyTuple_Pack(5, descrs, source, fn_name, opt_tuple,
                                                            cap_items)
                                             : NULL;
    Py_XDECREF(opt_tuple);
    Py_XDECREF(cap_items);
    if (cf_py_loop_append(head, entry) < 0)
        goto done;
    cf_status st = cf_ufunc_add_loop_globals(self->uf, dts, PyUnicode_AsUTF8(source),
                                             PyUnicode_AsUTF8(fn_name), opts, nopts, cap.globals,
                                             cap.n, NULL);
    if (st != CF_OK) {
        cf_py_loop_pop(head);
        cf_py_fail(st, "add_loop");
        goto done;
    }
    cf_py_func_loops_changed(head); /* a new loop can change resolutions */
    self->last.nops = 0;
    rc = 0;
done:
    Py_XDECREF(optseq); /* after the call: opts point into its items */
    cf_py_captures_clear(&cap);
    Py_XDECREF(descrs);
    Py_DECREF(seq);
    return rc;
}

static PyObject *ufunc_add_loop(CfPyUFunc *self, PyObject *args)
{
    if (add_loop_from((CfPyFuncHead *)self, args) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* The accumulator rules' names (cf_accumulator's order). */
static const char *const ACC_NAMES[] = {"loop", "widen", "logical"};

/* accumulator= / UFunc.accumulator: "loop" (NULL or None too), "widen", "logical". */
static int parse_accumulator(PyObject *v, cf_accumulator *out)
{
    *out = CF_ACC_LOOP;
    if (v == NULL || v == Py_None)
        return 0;
    const char *s = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
    for (int i = 0; s != NULL && i < 3; i++)
        if (strcmp(s, ACC_NAMES[i]) == 0) {
            *out = (cf_accumulator)i;
            return 0;
        }
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "accumulator must be 'loop', 'widen' or 'logical', not %R",
                     v);
    return -1;
}

static PyObject *ufunc_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"name", "nin", "nout", "identity", "doc", "compiler", "rules",
                         "accumulator", NULL};
    PyObject *name, *identity = Py_None, *doc = Py_None, *compiler = Py_None, *rules = NULL,
             *accumulator = NULL;
    int nin, nout;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Uii|OOO$OO:UFunc", kw, &name, &nin, &nout,
                                     &identity, &doc, &compiler, &rules, &accumulator))
        return NULL;
    int numba = cf_py_parse_rules(rules, "UFunc");
    if (numba < 0)
        return NULL;
    cf_accumulator acc;
    if (parse_accumulator(accumulator, &acc) < 0)
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
    self->vectorcall = ufunc_vectorcall;
    self->identity = Py_NewRef(identity);
    if (cf_py_func_head_init((CfPyFuncHead *)self, nin, nout, name, doc, compiler) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->numba = numba;
    self->accumulator = acc;
    return (PyObject *)self;
}

static int ufunc_traverse(CfPyUFunc *self, visitproc visit, void *arg)
{
    Py_VISIT(self->identity);
    return cf_py_func_traverse((PyObject *)self, visit, arg);
}

static int ufunc_clear(CfPyUFunc *self)
{
    Py_CLEAR(self->identity);
    return cf_py_func_clear((PyObject *)self);
}

static void ufunc_dealloc(CfPyUFunc *self)
{
    cf_py_func_dealloc_head((PyObject *)self);
    cf_ufunc_free(self->uf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *ufunc_repr(CfPyUFunc *self)
{
    return PyUnicode_FromFormat("<cufunc.UFunc '%U' (%d in, %d out, %d loops)>", self->name,
                                self->nin, self->nout, cf_ufunc_nloops(self->uf));
}

/* ---- attributes (the shared ones are cf_py_func_get_*) ---------------------------------------- */

static PyObject *get_ntypes(CfPyUFunc *self, void *c) { return PyLong_FromLong(cf_ufunc_nloops(self->uf)); }
static PyObject *get_identity(CfPyUFunc *self, void *c) { return Py_NewRef(self->identity); }
static PyObject *get_accumulator(CfPyUFunc *self, void *c)
{
    return PyUnicode_FromString(ACC_NAMES[self->accumulator]);
}
static int set_accumulator(CfPyUFunc *self, PyObject *v, void *c)
{
    cf_accumulator acc;
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete accumulator");
        return -1;
    }
    if (parse_accumulator(v, &acc) < 0)
        return -1;
    self->accumulator = acc;
    return 0;
}
static PyObject *get_signature(CfPyUFunc *self, void *c) { Py_RETURN_NONE; }
static PyObject *get_kernel_count(CfPyUFunc *self, void *c)
{
    return PyLong_FromLong(cf_ufunc_kernel_count(self->uf));
}

static void loop_types(const CfPyFuncHead *f, int loop, cf_dtype *t)
{
    cf_ufunc_loop_types(((const CfPyUFunc *)f)->uf, loop, t);
}

/* NumPy's spelling: 'ff->f', one character code per type. */
static PyObject *get_types(CfPyUFunc *self, void *c)
{
    return cf_py_func_types((CfPyFuncHead *)self, cf_ufunc_nloops(self->uf), loop_types);
}

/* The generated kernel source of a call with these arguments (host arrays are described as if on
 * the device, contiguous); for inspection. No GPU needed when the inputs are host objects. */
/* The inputs of a call (classified into in[], *n of them) and the loop it takes, as the call
 * resolves them (no GPU for host objects). 0 or -1; in[0..*n) to clear either way. */
static int resolve_call(CfPyUFunc *self, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames, cf_py_arg *in, int *n, int *loop)
{
    uf_call c;
    *n = 0;
    if (parse_call(self, args, nargs, kwnames, &c, 0) < 0)
        return -1;
    for (; *n < self->nin; (*n)++)
        if (cf_py_arg_classify(c.inputs[*n], &in[*n], cf_py_arg_name(*n)) < 0)
            return -1;
    if (self->numba)
        cf_py_args_numba(in, *n);
    else
        cf_py_args_nep50(in, *n);
    return resolve(self, in, -1, CF_CAST_SAME_KIND, loop);
}

/* The loop a call with these inputs takes: its types, inputs then outputs, as np.dtypes. */
static PyObject *ufunc_resolve(CfPyUFunc *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    cf_py_arg in[UF_MAX_ARGS];
    int n, loop;
    PyObject *r = NULL;
    if (resolve_call(self, args, nargs, kwnames, in, &n, &loop) == 0) {
        cf_dtype types[2 * UF_MAX_ARGS];
        cf_ufunc_loop_types(self->uf, loop, types);
        r = PyTuple_New(self->nin + self->nout);
        for (int i = 0; r && i < self->nin + self->nout; i++) {
            PyObject *d = descr_obj(types[i]);
            if (d == NULL)
                Py_CLEAR(r);
            else
                PyTuple_SET_ITEM(r, i, d);
        }
    }
    for (int i = 0; i < n; i++)
        cf_py_arg_clear(&in[i]);
    return r;
}

static PyObject *ufunc_kernel_source(CfPyUFunc *self, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames)
{
    cf_py_arg in[UF_MAX_ARGS];
    int n = 0, loop;
    PyObject *r = NULL;
    if (resolve_call(self, args, nargs, kwnames, in, &n, &loop) < 0)
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
     "reduce($self, /, array, axis=0, dtype=None, out=None, keepdims=False, initial=..., where=True, stream=0)\n"
     "--\n"
     "\n"
     "Reduce an array's axes by applying the ufunc along them (a binary ufunc).\n"
     "\n"
     "NumPy's ``ufunc.reduce``, on the GPU.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "array : array_like\n"
     "    A NumPy array, a device array or an array of another GPU library.\n"
     "axis : None or int or tuple of int, optional\n"
     "    The axes to reduce; None reduces all of them.\n"
     "dtype : dtype_like, optional\n"
     "    The type the reduction is computed in.\n"
     "out : array, optional\n"
     "    Where the result is written.\n"
     "keepdims : bool, optional\n"
     "    Keep the reduced axes with extent 1.\n"
     "initial : scalar, optional\n"
     "    The value the reduction starts from; the ufunc's identity when not given.\n"
     "where : array_like of bool, optional\n"
     "    Which elements take part (needs ``initial`` or an identity).\n"
     CF_PY_DOC_STREAM("work")
     "\n"
     "Returns\n"
     "-------\n"
     "array or scalar\n"
     "    The reduction, in the caller's array type.\n"},
    {"accumulate", (PyCFunction)(void (*)(void))cf_py_ufunc_accumulate, METH_VARARGS | METH_KEYWORDS,
     "accumulate($self, /, array, axis=0, dtype=None, out=None, stream=0)\n"
     "--\n"
     "\n"
     "Accumulate the ufunc along an axis (the inclusive scan).\n"
     "\n"
     "NumPy's ``ufunc.accumulate``, on the GPU.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "array : array_like\n"
     "    A NumPy array, a device array or an array of another GPU library.\n"
     "axis : int, optional\n"
     "    The axis.\n"
     "dtype : dtype_like, optional\n"
     "    The type the scan is computed in.\n"
     "out : array, optional\n"
     "    Where the result is written.\n"
     CF_PY_DOC_STREAM("work")
     "\n"
     "Returns\n"
     "-------\n"
     "array\n"
     "    The running results, of the shape of ``array``.\n"},
    {"reduceat", (PyCFunction)(void (*)(void))cf_py_ufunc_reduceat, METH_VARARGS | METH_KEYWORDS,
     "reduceat($self, /, array, indices, axis=0, dtype=None, out=None, stream=0)\n"
     "--\n"
     "\n"
     "Reduce the segments ``[indices[i], indices[i+1])`` of an axis.\n"
     "\n"
     "NumPy's ``ufunc.reduceat``, with its meaning for empty and reversed segments.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "array : array_like\n"
     "    A NumPy array, a device array or an array of another GPU library.\n"
     "indices : array_like of int\n"
     "    The first index of each segment.\n"
     "axis : int, optional\n"
     "    The axis.\n"
     "dtype : dtype_like, optional\n"
     "    The type the reductions are computed in.\n"
     "out : array, optional\n"
     "    Where the result is written.\n"
     CF_PY_DOC_STREAM("work")
     "\n"
     "Returns\n"
     "-------\n"
     "array\n"
     "    One reduction per index, along ``axis``.\n"},
    {"outer", (PyCFunction)(void (*)(void))ufunc_outer, METH_FASTCALL | METH_KEYWORDS,
     "outer($self, A, B, /, **kwargs)\n"
     "--\n"
     "\n"
     "Apply the ufunc to all pairs ``(a, b)`` with ``a`` in A and ``b`` in B.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "A, B : array_like\n"
     "    The operands; the result's shape is ``A.shape + B.shape``.\n"
     "**kwargs\n"
     "    The keywords of a call (``out``, ``dtype``, ``stream``, ...).\n"
     "\n"
     "Returns\n"
     "-------\n"
     "array\n"
     "    The result, in the caller's array type.\n"},
    {"add_loop", (PyCFunction)ufunc_add_loop, METH_VARARGS,
     "add_loop($self, types, source, fn_name, options=(), captures=(), /)\n"
     "--\n"
     "\n"
     "Add a loop written in CUDA C (what ``vectorize`` does for each signature).\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "types : sequence of dtype_like\n"
     "    The inputs' then the outputs' types.\n"
     "source : str\n"
     "    CUDA C source defining the ``__device__`` function.\n"
     "fn_name : str\n"
     "    The function's name in ``source``.\n"
     "options : sequence of str, optional\n"
     "    NVRTC options.\n"
     "captures : sequence of tuple, optional\n"
     "    ``(symbol, device array, label)`` for each device array the source captures.\n"},
    {"kernel_source", (PyCFunction)(void (*)(void))ufunc_kernel_source, METH_FASTCALL | METH_KEYWORDS,
     "kernel_source($self, /, *inputs, **kwargs)\n"
     "--\n"
     "\n"
     "Give the CUDA C of the kernel a call with these inputs launches.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     CF_PY_DOC_CALL_ARGS
     "\n"
     "Returns\n"
     "-------\n"
     "str\n"
     "    The kernel's source.\n"},
    {"resolve", (PyCFunction)(void (*)(void))ufunc_resolve, METH_FASTCALL | METH_KEYWORDS,
     "resolve($self, /, *inputs, **kwargs)\n"
     "--\n"
     "\n"
     "Give the types of the loop a call with these inputs takes, under the ufunc's rules.\n"
     "\n"
     "The rules are NumPy's, or Numba's for a ufunc of ``cufunc.numba``. No GPU is needed for\n"
     "host inputs.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     CF_PY_DOC_CALL_ARGS
     "\n"
     "Returns\n"
     "-------\n"
     "tuple of numpy.dtype\n"
     "    The inputs' then the outputs' types.\n"},
    {NULL},
};

static PyGetSetDef ufunc_getset[] = {
    CF_PY_FUNC_GETSET("ufunc"),
    {"ntypes", (getter)get_ntypes, NULL,
     "The number of loops.", NULL},
    {"types", (getter)get_types, NULL,
     "The loops, as NumPy spells them ('ff->f').", NULL},
    {"identity", (getter)get_identity, NULL,
     "The identity of reductions, or None.", NULL},
    {"accumulator", (getter)get_accumulator, (setter)set_accumulator,
     "How reduce and accumulate choose their accumulator without ``dtype=``: 'loop' (the "
     "(T, T) loop's type), 'widen' (NumPy's add and multiply: bool and integers narrower than "
     "64 bits accumulate in int64/uint64) or 'logical' (NumPy's logical_and/or/xor: any type "
     "reduces in the bool loop).", NULL},
    {"signature", (getter)get_signature, NULL,
     "None: an element-wise ufunc has no core dimensions (NumPy's spelling).", NULL},
    {"loops", (getter)cf_py_func_get_loops, NULL,
     "The (types, source, fn_name, options, captures) of each loop.", NULL},
    {"kernel_count", (getter)get_kernel_count, NULL,
     "The number of kernels specialised so far.", NULL},
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
    int64_t ns[CF_HOSTPIPE_PHASES];
    cf_hostpipe_test_phases(ns);
    /* where the time went, microseconds (src/testing.h) */
    PyObject *ph = Py_BuildValue("{s:d,s:d,s:d,s:d,s:d,s:d,s:d}", "plan", ns[0] * 1e-3, "setup",
                                 ns[1] * 1e-3, "issue", ns[2] * 1e-3, "wait", ns[3] * 1e-3,
                                 "unpack", ns[4] * 1e-3, "finish", ns[5] * 1e-3, "total",
                                 ns[6] * 1e-3);
    if (ph == NULL)
        return NULL;
    return Py_BuildValue("{s:L,s:L,s:i,s:i,s:L,s:i,s:i,s:n,s:i,s:i,s:i,s:N}", "calls",
                         (long long)i.calls, "chunks", (long long)i.chunks, "streams", i.streams,
                         "split_axis", i.split_axis, "rows", (long long)i.rows, "streamed",
                         i.streamed, "resident", i.resident, "chunk_bytes",
                         (Py_ssize_t)i.chunk_bytes, "direct", i.direct, "registered",
                         i.registered, "register_failed", i.register_failed, "phases_us", ph);
}

/* Read or change the pipeline's settings; returns them after the change. */
static PyObject *py_hostpipe_config(PyObject *m, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"chunk_kb", "streams", "min_kb", "reset", "threads", "register_min",
                         "result_pinned_min", NULL};
    PyObject *chunk = Py_None, *streams = Py_None, *min_kb = Py_None, *threads = Py_None,
             *register_min = Py_None, *result_min = Py_None;
    int reset = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOOpOOO:_hostpipe_config", kw, &chunk,
                                     &streams, &min_kb, &reset, &threads, &register_min,
                                     &result_min))
        return NULL;
    cf_hostpipe_config c;
    cf_status st = CF_OK;
    if (reset) {
        st = cf_hostpipe_configure(NULL);
    } else if (chunk != Py_None || streams != Py_None || min_kb != Py_None ||
               threads != Py_None || register_min != Py_None || result_min != Py_None) {
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
        if (threads != Py_None) {
            if ((v = PyLong_AsLongLong(threads)) == -1 && PyErr_Occurred())
                return NULL;
            c.threads = v < 0 || v > 1000 ? -1 : (int)v; /* out of range: refused below */
        }
        if (register_min != Py_None) {
            if ((v = PyLong_AsLongLong(register_min)) == -1 && PyErr_Occurred())
                return NULL;
            if (v < 0) {
                PyErr_SetString(PyExc_ValueError, "_hostpipe_config: register_min must be >= 0");
                return NULL;
            }
            c.register_min = (size_t)v;
        }
        if (result_min != Py_None) {
            if ((v = PyLong_AsLongLong(result_min)) == -1 && PyErr_Occurred())
                return NULL;
            if (v < 0) {
                PyErr_SetString(PyExc_ValueError,
                                "_hostpipe_config: result_pinned_min must be >= 0");
                return NULL;
            }
            c.result_pinned_min = (size_t)v;
        }
        st = cf_hostpipe_configure(&c);
    }
    if (st != CF_OK)
        return cf_py_raise(st, NULL);
    cf_hostpipe_get_config(&c);
    return Py_BuildValue("{s:n,s:i,s:n,s:i,s:n,s:n}", "chunk_kb",
                         (Py_ssize_t)(c.chunk_bytes >> 10), "streams", c.streams, "min_kb",
                         (Py_ssize_t)(c.min_bytes >> 10), "threads", c.threads, "register_min",
                         (Py_ssize_t)c.register_min, "result_pinned_min",
                         (Py_ssize_t)c.result_pinned_min);
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

/* Tests: registrations of user memory by the pipeline fail (1: as out of memory, 2: as already
 * registered; 0: off). */
/* Tests: page-locked result blocks handed out and cached, in bytes. */
static PyObject *py_hostpipe_result_stats(PyObject *m, PyObject *unused)
{
    size_t out = 0, cached = 0;
    cf_hostpipe_result_stats(&out, &cached);
    return Py_BuildValue("{s:n,s:n}", "outstanding", (Py_ssize_t)out, "cached",
                         (Py_ssize_t)cached);
}

static PyObject *py_hostpipe_register_fault(PyObject *m, PyObject *arg)
{
    long mode = PyLong_AsLong(arg);
    if (mode == -1 && PyErr_Occurred())
        return NULL;
    cf_hostpipe_test_register_fault((int)mode);
    Py_RETURN_NONE;
}

PyMethodDef cf_py_ufunc_methods[] = {
    {"can_cast", py_can_cast, METH_VARARGS, "cf_can_cast(from_, to, casting='safe')"},
    {"_hostpipe_last", py_hostpipe_last, METH_NOARGS,
     "What the last pipelined host-array ufunc call did: dict(calls, chunks, streams, split_axis, "
     "rows, streamed, resident, chunk_bytes, direct, registered, register_failed)."},
    {"_hostpipe_config", (PyCFunction)(void (*)(void))py_hostpipe_config,
     METH_VARARGS | METH_KEYWORDS,
     "_hostpipe_config(chunk_kb=None, streams=None, min_kb=None, reset=False, threads=None, "
     "register_min=None, result_pinned_min=None): the host-array pipeline's settings after "
     "applying the given ones (chunk_kb 0: automatic; threads 0: automatic; register_min and "
     "result_pinned_min bytes, 0: off; reset: re-read "
     "CUFUNC_HOSTPIPE_* and CUFUNC_HOST_* from the environment)."},
    {"_hostpipe_fail_at", py_hostpipe_fail_at, METH_O,
     "Tests: pipelined calls fail before launching chunk n (-1: never)."},
    {"_hostpipe_result_stats", py_hostpipe_result_stats, METH_NOARGS,
     "Tests: bytes of page-locked result blocks handed out and cached (dict)."},
    {"_hostpipe_register_fault", py_hostpipe_register_fault, METH_O,
     "Tests: the pipeline's registrations of user memory fail (1: out of memory, 2: already "
     "registered, 0: off)."},
    {NULL},
};

int cf_py_ufunc_init_module(PyObject *m)
{
    if (PyType_Ready(&CfPyUFunc_Type) < 0)
        return -1;
    Py_INCREF(&CfPyUFunc_Type);
    if (PyModule_AddObject(m, "UFunc", (PyObject *)&CfPyUFunc_Type) < 0) {
        Py_DECREF(&CfPyUFunc_Type);
        return -1;
    }
    return 0;
}
