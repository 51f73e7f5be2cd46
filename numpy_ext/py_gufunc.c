/* py_gufunc.c: the GUFunc type, the call path of @guvectorize gufuncs, in C: the gufunc engine's
 * part of the call pipeline (py_call.h).
 *
 * A call reads its arguments, applies axes= / axis= (moving each operand's core axes last), resolves
 * the loop (cached per input dtypes; a gufunc made without type signatures asks its Python
 * `compiler` for a loop on each new combination), binds the core dimensions and broadcasts the loop
 * dimensions (include/cufunc/gufunc.h, NumPy's rules and messages); the pipeline then moves host
 * inputs to the device (in the loop's dtype where the body sees an array), allocates outputs from
 * the stream-ordered pool, launches and delivers. No Python code runs per call once the loop
 * exists.
 *
 * Placement, as in vectorize: when any input or output is on the device, results are DeviceArrays
 * and nothing waits for the kernel; when all are host arrays (or scalars), inputs are copied over,
 * the kernel runs, and results come back as NumPy arrays (a NumPy scalar for a 0-d result).
 * Host outputs given with out= are filled in place (their contents are uploaded first: the body may
 * read them, as it may in NumPy). */
#include "py_gufunc.h"
#include "diagnostics.h"
#include "py_args.h"
#include "py_capture.h"
#include "py_override.h"

#include <string.h>

/* ---- loop resolution -------------------------------------------------------------------------- */

static int add_loop_from(CfPyFuncHead *head, PyObject *spec);

/* The loop for these inputs; a dynamic gufunc compiles one through its compiler when nothing
 * matches. out_dt[o] is a given output's dtype, or -1. */
static int resolve(CfPyGUFunc *self, const cf_py_arg *args, const int *out_dt, int *loop)
{
    CfPyFuncHead *head = (CfPyFuncHead *)self;
    unsigned char key[2 * GU_PY_MAX_ARGS];
    cf_dtype in[GU_PY_MAX_ARGS];
    unsigned char weak[GU_PY_MAX_ARGS];
    cf_py_cache_key(args, self->nin, key, in, weak);
    size_t klen = 2 * (size_t)self->nin;
    if ((*loop = cf_py_cache_find(head, key, klen)) >= 0)
        return 0;
    int dynamic = cf_py_func_dynamic(head);
    if (self->numba && dynamic)
        memset(weak, 0, sizeof weak); /* Numba types a scalar by its own dtype (np.asarray's) */
    /* the one rule (cufunc/loops.h); a dynamic gufunc compiles a loop for new input dtypes
     * rather than casting to an older loop's (lazy: exact matches only; weak scalars match by
     * kind, as NEP 50 has them) */
    cf_loops_query q = {self->numba ? CF_LOOPS_NUMBA_GUFUNC : CF_LOOPS_NUMPY, self->nin,
                        self->nout, in, weak, dynamic, -1, CF_CAST_SAFE};
    cf_status st = cf_gufunc_resolve_query(self->gu, &q, loop);
    if (st != CF_OK && dynamic) {
        cf_dtype outs[GU_PY_MAX_ARGS];
        for (int o = 0; o < self->nout; o++)
            outs[o] = (cf_dtype)out_dt[o];
        PyObject *it = cf_py_type_objects(self->nin, in, weak);
        PyObject *ot = it ? cf_py_type_objects(self->nout, outs, NULL) : NULL;
        if (cf_py_func_compile(head, it, ot, add_loop_from) < 0)
            return -1;
        q.lazy = 0;
        st = cf_gufunc_resolve_query(self->gu, &q, loop);
    }
    if (st != CF_OK)
        return cf_py_fail(st, NULL);
    cf_py_cache_add(head, key, klen, *loop);
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

/* The gufunc engine's state of one call, beside the pipeline's (cf_py_call): what it derives before
 * it launches, shared by the call and kernel_source. */
typedef struct {
    const gu_call *call;
    int loop;
    cf_dtype types[2 * GU_PY_MAX_ARGS];
    int arg_ndim[2 * GU_PY_MAX_ARGS];
    int perm[2 * GU_PY_MAX_ARGS][CF_MAX_DIMS]; /* outputs: axes= permutation, or identity */
    int has_perm[2 * GU_PY_MAX_ARGS];
    unsigned char has_out[GU_PY_MAX_ARGS];
    cf_gufunc_shapes sh;
} gu_state;

#define GU_STATE(c) ((gu_state *)(c)->state)

/* Step 1: inputs and outputs (out_dt[o]: a given output's dtype, or -1). */
static int gu_classify(cf_py_call *c, int *out_dt)
{
    const gu_call *g = GU_STATE(c)->call;
    const int nin = c->nin, nout = c->nout;
    if (cf_py_call_classify_inputs(c, g->inputs) < 0)
        return -1;
    for (int o = 0; o < nout; o++, c->nout_done++) {
        cf_py_arg_reset(&c->out[o], NULL);
        c->out[o].kind = CF_PY_ARG_NONE; /* not given: allocated by the call */
        out_dt[o] = -1;
        if (c->outs[o] == NULL)
            continue;
        char argname[48];
        snprintf(argname, sizeof argname, "out %d (argument %d)", o, nin + o + 1);
        GU_STATE(c)->has_out[o] = 1;
        if (cf_py_call_classify_out(c, o, argname, NULL) < 0)
            return -1;
        out_dt[o] = (int)c->out[o].dtype;
    }
    /* Two outputs in the same memory: which value lands where would depend on the order the body
     * writes them, and with core dimensions on the order of the threads. Refused rather than
     * left to chance (the bounds test is conservative: interleaved strided views are refused
     * too, as the check cannot tell them apart cheaply). */
    for (int o = 0; o < nout; o++)
        for (int p = o + 1; p < nout; p++)
            if (c->outs[o] && c->outs[p] &&
                cf_array_may_overlap(&c->out[o].view, &c->out[p].view)) {
                PyErr_Format(PyExc_ValueError, "gufunc '%s': outputs %d and %d (arguments %d and "
                             "%d) may share memory; the result would depend on the order they are "
                             "written: pass outputs that do not overlap", c->name, o, p,
                             nin + o + 1, nin + p + 1);
                return -1;
            }
    /* a host out= beside device operands: computed on the device, then copied into it (as Numba
     * does; cf_py_call_deliver) */
    return 0;
}

/* axes= / axis=: move each operand's core axes last. */
static int gu_apply_axes(cf_py_call *c)
{
    CfPyGUFunc *self = (CfPyGUFunc *)c->self;
    gu_state *S = GU_STATE(c);
    const cf_layout *L = cf_gufunc_layout(self->gu);
    const int nin = c->nin, nops = nin + c->nout;
    int axes[2 * GU_PY_MAX_ARGS][CF_GUFUNC_MAX_CORE_NDIM], counts[2 * GU_PY_MAX_ARGS];
    if (parse_axes(self, S->call, axes, counts) < 0)
        return -1;
    for (int i = 0; i < nops; i++) {
        S->has_perm[i] = 0;
        if (counts[i] < 0)
            continue;
        cf_py_arg *a = i < nin ? &c->in[i] : &c->out[i - nin];
        if (i >= nin && !S->has_out[i - nin]) {
            S->has_perm[i] = 1; /* applied to the allocated output once its shape is known */
            c->no_lib_results = 1;
            memcpy(S->perm[i], axes[i], sizeof axes[i]);
            S->perm[i][CF_MAX_DIMS - 1] = counts[i];
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
    return 0;
}

/* Numba's habit for NumPy scalars: when no loop takes the inputs as given, a strong
 * NumPy scalar input (np.int64(2)) matches the first loop whose type for it casts safely *to*
 * the scalar's type (Numba's np.can_cast(loop type, given type) test, so a wider scalar matches a
 * narrower loop) and is converted as Numba converts it, with NumPy's astype (C casting). Other
 * inputs must match as usual: a device array of the wrong type stays an error. 1 when scalars
 * were converted (resolve again), 0 when no loop matches this way, -1 on error. */
static int numba_scalar_cast(CfPyGUFunc *self, cf_py_call *c)
{
    cf_dtype in[GU_PY_MAX_ARGS];
    unsigned char flag[GU_PY_MAX_ARGS];
    for (int i = 0; i < c->nin; i++) {
        const cf_py_arg *a = &c->in[i];
        in[i] = a->dtype;
        flag[i] = a->weak ? CF_LOOPS_WEAK
                          : a->kind == CF_PY_ARG_SCALAR ? CF_LOOPS_SCALAR : CF_LOOPS_STRONG;
    }
    cf_loops_query q = {CF_LOOPS_SCALAR_CAST, c->nin, c->nout, in, flag, 0, -1, CF_CAST_SAFE};
    int L = cf_gufunc_find(self->gu, &q);
    if (L >= 0) {
        cf_dtype t[2 * GU_PY_MAX_ARGS];
        if (cf_gufunc_loop_types(self->gu, L, t, NULL) != CF_OK)
            return 0;
        for (int i = 0; i < c->nin; i++) {
            cf_py_arg *a = &c->in[i];
            if (a->kind != CF_PY_ARG_SCALAR || a->weak || a->dtype == t[i])
                continue;
            PyArray_Descr *d = cf_py_descr_from_dtype(t[i]);
            PyObject *arr = d ? PyArray_FROM_O(a->value) : NULL, *cast = NULL, *v = NULL;
            if (arr != NULL) {
                Py_INCREF(d);
                cast = PyArray_CastToType((PyArrayObject *)arr, d, 0);
            }
            if (cast != NULL)
                v = PyArray_Return((PyArrayObject *)cast); /* steals cast: a NumPy scalar */
            Py_XDECREF(arr);
            Py_XDECREF(d);
            if (v == NULL)
                return -1;
            Py_XSETREF(a->keep, v);
            a->value = v;
            a->pyscalar = 0; /* a NumPy scalar of the loop's type now */
            a->dtype = t[i];
        }
        return 1;
    }
    return 0;
}

/* Numba's gufunc schedule (numba-cuda's GUFuncEngine.schedule): the loop dimensions are the outer
 * shape of the first input with the most iterations, and inputs whose outer shape is (1,) are
 * "pinned" to every iteration. NumPy's broadcasting agrees except when that outer shape is ():
 * then NumPy's loop shape is (1,), Numba's (), so a '()' argument given as a one-element array
 * beside a core-shaped one, `(n),()->(n)` with shapes (4,), (1,), makes an (n,) result. Those
 * inputs lose their leading 1 here, before cf_gufunc_bind. */
static int numba_schedule(CfPyGUFunc *self, cf_py_call *c)
{
    const cf_layout *L = cf_gufunc_layout(self->gu);
    int64_t best = -1;
    int first = -1;
    for (int i = 0; i < c->nin; i++) {
        const cf_py_arg *a = &c->in[i];
        int outer = a->kind == CF_PY_ARG_SCALAR ? 0 : a->view.ndim - L->ndims[i];
        int64_t n = 1;
        for (int k = 0; k < outer; k++)
            n *= a->view.shape[k];
        if (outer >= 0 && n > best) {
            best = n;
            first = i;
        }
    }
    if (first < 0 || c->in[first].kind != CF_PY_ARG_SCALAR &&
                         c->in[first].view.ndim != L->ndims[first])
        return 0; /* the loop dimensions are not (): NumPy's broadcasting gives Numba's shape */
    for (int i = 0; i < c->nin; i++) {
        cf_py_arg *a = &c->in[i];
        if (a->kind == CF_PY_ARG_SCALAR || a->view.ndim != L->ndims[i] + 1 || a->view.shape[0] != 1)
            continue;
        if (a->kind == CF_PY_ARG_HOST) {
            npy_intp dims[CF_MAX_DIMS];
            for (int k = 1; k < a->view.ndim; k++)
                dims[k - 1] = (npy_intp)a->view.shape[k];
            PyArray_Dims pd = {dims, a->view.ndim - 1};
            PyObject *v = PyArray_Newshape((PyArrayObject *)a->keep, &pd, NPY_ANYORDER);
            if (v == NULL)
                return -1;
            Py_SETREF(a->keep, v);
            cf_py_arg_host_view(a, (PyArrayObject *)v);
        } else {
            memmove(a->view.shape, a->view.shape + 1, sizeof(int64_t) * (size_t)(a->view.ndim - 1));
            memmove(a->view.strides, a->view.strides + 1,
                    sizeof(int64_t) * (size_t)(a->view.ndim - 1));
            a->view.ndim--;
        }
    }
    return 0;
}

/* Steps 1-3: classify, axes, loop, casting checks, shapes (cf_gufunc_bind). Needs no GPU for host
 * and scalar arguments. Results are DeviceArrays when anything is on the device. */
static int gu_prepare(cf_py_call *c)
{
    CfPyGUFunc *self = (CfPyGUFunc *)c->self;
    gu_state *S = GU_STATE(c);
    const int nin = c->nin, nout = c->nout, nops = nin + nout;
    int out_dt[GU_PY_MAX_ARGS];
    memset(S->has_out, 0, sizeof S->has_out);
    c->numba = self->numba;
    if (gu_classify(c, out_dt) < 0 || gu_apply_axes(c) < 0)
        return -1;
    if (c->numba && numba_schedule(self, c) < 0)
        return -1;
    c->host_result = !c->any_device;
    /* a 0-d result comes back as a NumPy scalar, as from NumPy's gufuncs (Numba: a 0-d array) */
    c->scalar_results = !c->numba;

    /* the loop; casting of inputs and given outputs */
    cf_casting casting;
    if (cf_py_parse_casting(S->call->casting, &casting) < 0)
        return -1;
    if (resolve(self, c->in, out_dt, &S->loop) < 0) {
        PyObject *et, *ev, *tb;
        int r;
        if (self->numba || !PyErr_ExceptionMatches(PyExc_TypeError))
            return -1; /* Numba's rule already converts scalars (cf_gufunc_resolve_rule) */
        PyErr_Fetch(&et, &ev, &tb);
        r = numba_scalar_cast(self, c);
        if (r <= 0) {
            if (r == 0)
                PyErr_Restore(et, ev, tb);
            else {
                Py_XDECREF(et);
                Py_XDECREF(ev);
                Py_XDECREF(tb);
            }
            return -1;
        }
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
        if (resolve(self, c->in, out_dt, &S->loop) < 0)
            return -1;
    }
    cf_gufunc_loop_types(self->gu, S->loop, S->types, S->arg_ndim);
    /* Numba converts the inputs to the loop's types whatever they are (astype) */
    for (int i = 0; i < nin && !c->numba; i++)
        if (!c->in[i].weak && !cf_can_cast(c->in[i].dtype, S->types[i], casting)) {
            PyErr_Format(PyExc_TypeError, "Cannot cast gufunc '%s' input %d from dtype('%s') to "
                         "dtype('%s') with casting rule '%s'", c->name, i,
                         cf_dtype_name(c->in[i].dtype), cf_dtype_name(S->types[i]),
                         cf_casting_name(casting));
            return -1;
        }
    for (int o = 0; o < nout; o++)
        if (S->has_out[o] && !cf_can_cast(S->types[nin + o], c->out[o].dtype, casting)) {
            PyErr_Format(PyExc_TypeError, "Cannot cast gufunc '%s' output from dtype('%s') to "
                         "dtype('%s') with casting rule '%s'", c->name,
                         cf_dtype_name(S->types[nin + o]), cf_dtype_name(c->out[o].dtype),
                         cf_casting_name(casting));
            return -1;
        }

    /* shapes */
    cf_operand ops[2 * GU_PY_MAX_ARGS];
    memset(ops, 0, sizeof(cf_operand) * (size_t)nops);
    for (int i = 0; i < nin; i++) {
        ops[i].is_scalar = c->in[i].kind == CF_PY_ARG_SCALAR;
        ops[i].array = c->in[i].view;
    }
    for (int o = 0; o < nout; o++)
        ops[nin + o].array = c->out[o].view;
    cf_status st = cf_gufunc_bind(self->gu, ops, S->has_out, &S->sh);
    return st == CF_OK ? 0 : cf_py_fail(st, NULL);
}

/* Host arrays travel in the loop's dtype when the body sees them as arrays. */
static cf_dtype gu_move_as(const cf_py_call *c, int i)
{
    const gu_state *S = GU_STATE(c);
    return S->arg_ndim[i] ? S->types[i] : c->in[i].dtype;
}

/* A new output in the loop's dtype; for a host out= it starts from its values (the body may read
 * out=). */
static PyObject *gu_alloc_out(cf_py_call *c, int o)
{
    CfPyGUFunc *self = (CfPyGUFunc *)c->self;
    gu_state *S = GU_STATE(c);
    int i = c->nin + o, nd;
    int64_t shape[CF_MAX_DIMS];
    cf_status st = cf_gufunc_operand_shape(self->gu, &S->sh, i, &nd, shape);
    if (st != CF_OK)
        return cf_py_raise(st, NULL);
    PyObject *dev = cf_py_devicearray_alloc(nd, shape, S->types[i], 'C', c->pl.device,
                                            c->pl.for_arrays);
    if (dev != NULL && c->out[o].kind == CF_PY_ARG_HOST &&
        cf_py_call_upload_out(c, o, dev, S->types[i]) < 0)
        Py_CLEAR(dev);
    return dev;
}

static int gu_out_shape(cf_py_call *c, int o, cf_dtype *dt, int *ndim, int64_t *shape)
{
    CfPyGUFunc *self = (CfPyGUFunc *)c->self;
    gu_state *S = GU_STATE(c);
    *dt = S->types[c->nin + o];
    cf_status st = cf_gufunc_operand_shape(self->gu, &S->sh, c->nin + o, ndim, shape);
    return st == CF_OK ? 0 : cf_py_fail(st, NULL);
}

/* Inputs that share memory with an output: cf_gufunc_launch copies them first (on the GPU,
 * stream-ordered), as NumPy defines the call (so the pipeline's overlap step is off). */
static int gu_launch(cf_py_call *c)
{
    CfPyGUFunc *self = (CfPyGUFunc *)c->self;
    gu_state *S = GU_STATE(c);
    const int nin = c->nin, nout = c->nout, nops = nin + nout;
    cf_operand ops[2 * GU_PY_MAX_ARGS];
    unsigned fresh = 0;
    memset(ops, 0, sizeof(cf_operand) * (size_t)nops);
    for (int i = 0; i < nin; i++) {
        if (c->in[i].kind == CF_PY_ARG_SCALAR) {
            if (cf_py_arg_scalar(&c->in[i], S->types[i], &ops[i], c->name, i) < 0)
                return -1;
        } else {
            ops[i].array = c->in[i].view;
        }
    }
    for (int o = 0; o < nout; o++) {
        ops[nin + o].array = c->out[o].view;
        if (!S->has_out[o])
            fresh |= 1u << o;
    }
    cf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cf_gufunc_launch(self->gu, S->loop, c->pl.s, ops, &S->sh, fresh);
    Py_END_ALLOW_THREADS
    return st == CF_OK ? 0 : cf_py_fail(st, c->name);
}

/* Fresh result o as the caller sees it: core axes where axes= put them (a DeviceArray view, or the
 * NumPy array transposed). */
static PyObject *gu_present(cf_py_call *c, int o, PyObject *value, int host)
{
    gu_state *S = GU_STATE(c);
    int i = c->nin + o;
    if (!S->has_perm[i])
        return value;
    CfPyDeviceArray *d = (CfPyDeviceArray *)c->res[o];
    int perm[CF_MAX_DIMS], inv[CF_MAX_DIMS];
    int ncore = S->perm[i][CF_MAX_DIMS - 1];
    cf_status st = cf_gufunc_axes_perm(i, d->view.ndim, ncore, S->perm[i], ncore, perm);
    if (st != CF_OK) {
        if (host)
            return value; /* as before: the host copy stays as it is */
        Py_DECREF(value);
        axes_error(st);
        return NULL;
    }
    for (int k = 0; k < d->view.ndim; k++)
        inv[perm[k]] = k;
    if (host) {
        npy_intp pv[CF_MAX_DIMS];
        for (int k = 0; k < d->view.ndim; k++)
            pv[k] = inv[k];
        PyArray_Dims pd = {pv, d->view.ndim};
        PyObject *t = PyArray_Transpose((PyArrayObject *)value, &pd);
        Py_DECREF(value);
        return t;
    }
    cf_array v = d->view;
    permute_view(&v, inv);
    Py_DECREF(value);
    return cf_py_devicearray_wrap(&v, d->base, d->stream, d->readonly);
}

static const cf_py_engine GU_ENGINE = {
    .prepare = gu_prepare,
    .move_as = gu_move_as,
    .alloc_out = gu_alloc_out,
    .out_shape = gu_out_shape,
    .in_place_ok = -1,
    .launch = gu_launch,
    .present = gu_present,
};

/* The call pipeline made ready for arguments of a call (parsed, the engine's state pointing at
 * them): what a call, resolve and kernel_source share. */
static int call_begin(CfPyGUFunc *self, PyObject *args, PyObject *kwargs, gu_call *g, gu_state *S,
                      cf_py_call *c)
{
    if (parse_call(self, args, kwargs, g) < 0)
        return -1;
    const char *name = PyUnicode_AsUTF8(self->name);
    if (name == NULL)
        return -1;
    S->call = g;
    cf_py_call_init(c, &GU_ENGINE, self, S, name, "gufunc", self->nin, self->nout, g->outs,
                    g->stream);
    return 0;
}

static PyObject *gufunc_call(CfPyGUFunc *self, PyObject *args, PyObject *kwargs)
{
    PyObject *r;
    int ov = cf_py_override_tp((PyObject *)self, "__call__", self->nin, args, kwargs, &r);
    if (ov != 0) /* NEP 13 (py_override.h) */
        return ov > 0 ? r : NULL;
    gu_call g;
    cf_py_call c;
    gu_state S;
    if (call_begin(self, args, kwargs, &g, &S, &c) < 0)
        return NULL;
    return cf_py_call_run(&c);
}

/* The generated kernel source of a call with these arguments (host arrays described as fresh
 * contiguous device copies would be); for inspection. No GPU needed for host and scalar inputs. */
static PyObject *gufunc_kernel_source(CfPyGUFunc *self, PyObject *args, PyObject *kwargs)
{
    gu_call g;
    cf_py_call c;
    gu_state S;
    if (call_begin(self, args, kwargs, &g, &S, &c) < 0)
        return NULL;
    const int nin = self->nin, nout = self->nout, nops = nin + nout;
    const char *name = c.name;
    PyObject *r = NULL;
    if (gu_prepare(&c) < 0)
        goto done;
    cf_operand ops[2 * GU_PY_MAX_ARGS];
    memset(ops, 0, sizeof(cf_operand) * (size_t)nops);
    uint64_t next = 0x10000000;
    for (int i = 0; i < nops; i++) {
        cf_py_arg *a = i < nin ? &c.in[i] : &c.out[i - nin];
        if (i < nin && a->kind == CF_PY_ARG_SCALAR) {
            if (cf_py_arg_scalar(a, S.types[i], &ops[i], name, i) < 0)
                goto done;
            continue;
        }
        if (i >= nin && !S.has_out[i - nin]) {
            int nd;
            int64_t shape[CF_MAX_DIMS];
            cf_status st = cf_gufunc_operand_shape(self->gu, &S.sh, i, &nd, shape);
            if (st != CF_OK) {
                cf_py_fail(st, NULL);
                goto done;
            }
            cf_array_init_contiguous(&ops[i].array, next, S.types[i], nd, shape, 'C', 0);
        } else if (a->kind == CF_PY_ARG_DEVICE) {
            ops[i].array = a->view;
            ops[i].array.device = 0;
            if (S.arg_ndim[i] && a->dtype != S.types[i]) /* launched through a converted copy */
                cf_array_init_contiguous(&ops[i].array, next, S.types[i], a->view.ndim,
                                         a->view.shape, 'C', 0);
        } else if (i < nin) {
            cf_array_init_contiguous(&ops[i].array, next, S.arg_ndim[i] ? S.types[i] : a->dtype,
                                     a->view.ndim, a->view.shape, 'C', 0);
        } else { /* a host out=: launched through a device copy in the loop's dtype */
            cf_array_init_contiguous(&ops[i].array, next, S.types[i], a->view.ndim,
                                     a->view.shape, 'C', 0);
        }
        next += ((uint64_t)cf_array_nbytes(&ops[i].array) + 0xffff) & ~(uint64_t)0xffff;
        next += 0x10000;
    }
    unsigned fresh = 0;
    for (int o = 0; o < nout; o++)
        if (!S.has_out[o])
            fresh |= 1u << o;
    char *src = NULL;
    cf_status st = cf_gufunc_kernel_source(self->gu, S.loop, ops, &S.sh, fresh, &src);
    if (st != CF_OK) {
        cf_py_fail(st, NULL);
        goto done;
    }
    r = PyUnicode_FromString(src);
    cf_free_buffer(src);
done:
    cf_py_call_clear(&c);
    return r;
}

/* The loop a call with these arguments takes: its types, inputs then outputs, as np.dtypes (the
 * call's own steps 1-3; no GPU for host and scalar arguments). */
static PyObject *gufunc_resolve_types(CfPyGUFunc *self, PyObject *args, PyObject *kwargs)
{
    gu_call g;
    cf_py_call c;
    gu_state S;
    if (call_begin(self, args, kwargs, &g, &S, &c) < 0)
        return NULL;
    PyObject *r = NULL;
    if (gu_prepare(&c) == 0) {
        r = PyTuple_New(self->nin + self->nout);
        for (int i = 0; r && i < self->nin + self->nout; i++) {
            PyObject *d = (PyObject *)cf_py_descr_from_dtype(S.types[i]);
            if (d == NULL)
                Py_CLEAR(r);
            else
                PyTuple_SET_ITEM(r, i, d);
        }
    }
    cf_py_call_clear(&c);
    return r;
}

/* ---- construction and loops ------------------------------------------------------------------- */

/* spec = (types, arg_ndim, source, fn_name[, options[, captures]]); captures: the loop's captured
 * device arrays (py_capture.h) */
static int add_loop_from(CfPyFuncHead *head, PyObject *spec)
{
    CfPyGUFunc *self = (CfPyGUFunc *)head;
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
    PyObject *optseq = NULL, *descrs = NULL;
    int rc = -1;
    if (nseq == NULL)
        goto done;
    if (PySequence_Fast_GET_SIZE(tseq) != nargs || PySequence_Fast_GET_SIZE(nseq) != nargs) {
        PyErr_Format(PyExc_ValueError, "add_loop: %d types and argument ranks expected (%d inputs, "
                     "%d outputs)", nargs, self->nin, self->nout);
        goto done;
    }
    cf_dtype dts[2 * GU_PY_MAX_ARGS];
    int nd[2 * GU_PY_MAX_ARGS];
    if (cf_py_loop_types(tseq, nargs, dts, &descrs) < 0)
        goto done;
    for (int i = 0; i < nargs; i++) {
        nd[i] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(nseq, i));
        if (nd[i] == -1 && PyErr_Occurred())
            goto done;
    }
    const char *opts[64];
    int nopts = 0;
    if (cf_py_loop_options(options, opts, &nopts, &optseq, "add_loop") < 0)
        goto done;
    const char *src = PyUnicode_AsUTF8(source), *fn = PyUnicode_AsUTF8(fn_name);
    if (src == NULL || fn == NULL)
        goto done;
    if (cf_py_captures_read(captures, &cap, "add_loop") < 0)
        goto done;
    /* The entry keeps the captured arrays alive as long as the gufunc (its kernels read them);
     * it is in the list before the loop exists, so that no kernel can outlive them. */
    PyObject *ndt = PySequence_Tuple(nseq);
    PyObject *cap_items = cap.items ? Py_NewRef(cap.items) : PyTuple_New(0);
    PyObject *entry = ndt && cap_items ? PyTuple_Pack(5, descrs, ndt, source, fn_name, cap_items)
                                       : NULL;
    Py_XDECREF(ndt);
    Py_XDECREF(cap_items);
    if (cf_py_loop_append(head, entry) < 0)
        goto done;
    cf_status st = cf_gufunc_add_loop_globals(self->gu, dts, nd, src, fn, opts, nopts,
                                              cap.globals, cap.n, NULL);
    if (st != CF_OK) {
        cf_py_loop_pop(head);
        cf_py_fail(st, "add_loop");
        goto done;
    }
    cf_py_func_loops_changed(head); /* a new loop can change resolutions */
    rc = 0;
done:
    cf_py_captures_clear(&cap);
    Py_XDECREF(tseq);
    Py_XDECREF(nseq);
    Py_XDECREF(optseq);
    Py_XDECREF(descrs);
    return rc;
}

static PyObject *gufunc_add_loop(CfPyGUFunc *self, PyObject *args)
{
    if (add_loop_from((CfPyFuncHead *)self, args) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *gufunc_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"name", "signature", "doc", "compiler", "rules", NULL};
    PyObject *name, *sigobj, *doc = Py_None, *compiler = Py_None, *rules = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UO|OO$O:GUFunc", kw, &name, &sigobj, &doc,
                                     &compiler, &rules))
        return NULL;
    int numba = cf_py_parse_rules(rules, "GUFunc");
    if (numba < 0)
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
    if (cf_py_func_head_init((CfPyFuncHead *)self, cf_gufunc_nin(self->gu),
                             cf_gufunc_nout(self->gu), name, doc, compiler) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->numba = numba;
    return (PyObject *)self;
}

static void gufunc_dealloc(CfPyGUFunc *self)
{
    cf_py_func_dealloc_head((PyObject *)self);
    cf_gufunc_free(self->gu);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *gufunc_repr(CfPyGUFunc *self)
{
    return PyUnicode_FromFormat("<cufunc.GUFunc '%U' %s (%d loops)>", self->name,
                                cf_gufunc_signature(self->gu), cf_gufunc_nloops(self->gu));
}

/* ---- attributes (the shared ones are cf_py_func_get_*) ---------------------------------------- */

static PyObject *get_ntypes(CfPyGUFunc *self, void *c) { return PyLong_FromLong(cf_gufunc_nloops(self->gu)); }
static PyObject *get_identity(CfPyGUFunc *self, void *c) { Py_RETURN_NONE; }
static PyObject *get_signature(CfPyGUFunc *self, void *c)
{
    return PyUnicode_FromString(cf_gufunc_signature(self->gu));
}
static PyObject *get_kernel_count(CfPyGUFunc *self, void *c)
{
    return PyLong_FromLong(cf_gufunc_kernel_count(self->gu));
}

static void loop_types(const CfPyFuncHead *f, int loop, cf_dtype *t)
{
    cf_gufunc_loop_types(((const CfPyGUFunc *)f)->gu, loop, t, NULL);
}

/* NumPy's spelling: 'ff->f', one character code per type. */
static PyObject *get_types(CfPyGUFunc *self, void *c)
{
    return cf_py_func_types((CfPyFuncHead *)self, cf_gufunc_nloops(self->gu), loop_types);
}

static PyMethodDef gufunc_methods[] = {
    {"add_loop", (PyCFunction)gufunc_add_loop, METH_VARARGS,
     "add_loop($self, types, arg_ndim, source, fn_name, options=(), captures=(), /)\n"
     "--\n"
     "\n"
     "Add a loop written in CUDA C (what ``guvectorize`` does for each signature).\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "types : sequence of dtype_like\n"
     "    The inputs' then the outputs' types.\n"
     "arg_ndim : sequence of int\n"
     "    For each operand, 0 to pass it by value, k to pass it as ``cf_array_ref<T, k>``.\n"
     "source : str\n"
     "    CUDA C source defining the ``__device__`` function.\n"
     "fn_name : str\n"
     "    The function's name in ``source``.\n"
     "options : sequence of str, optional\n"
     "    NVRTC options.\n"
     "captures : sequence of tuple, optional\n"
     "    ``(symbol, device array, label)`` for each device array the source captures.\n"},
    {"kernel_source", (PyCFunction)(void (*)(void))gufunc_kernel_source,
     METH_VARARGS | METH_KEYWORDS,
     "kernel_source($self, /, *args, **kwargs)\n"
     "--\n"
     "\n"
     "Give the CUDA C of the kernel a call with these arguments launches.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "*args : array_like\n"
     "    The operands of the call.\n"
     "**kwargs\n"
     "    The keywords of the call (``out``, ``axes``, ``dtype``, ...).\n"
     "\n"
     "Returns\n"
     "-------\n"
     "str\n"
     "    The kernel's source.\n"},
    {"resolve", (PyCFunction)(void (*)(void))gufunc_resolve_types, METH_VARARGS | METH_KEYWORDS,
     "resolve($self, /, *args, **kwargs)\n"
     "--\n"
     "\n"
     "Give the types of the loop a call with these arguments takes, under the gufunc's rules.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "*args : array_like\n"
     "    The operands of the call.\n"
     "**kwargs\n"
     "    The keywords of the call (``out``, ``axes``, ``dtype``, ...).\n"
     "\n"
     "Returns\n"
     "-------\n"
     "tuple of numpy.dtype\n"
     "    The inputs' then the outputs' types.\n"},
    {NULL},
};

static PyGetSetDef gufunc_getset[] = {
    CF_PY_FUNC_GETSET("gufunc"),
    {"ntypes", (getter)get_ntypes, NULL,
     "The number of loops.", NULL},
    {"types", (getter)get_types, NULL,
     "The loops, as NumPy spells them ('ff->f').", NULL},
    {"signature", (getter)get_signature, NULL,
     "The layout, as '(m,n),(n,p)->(m,p)'.", NULL},
    {"identity", (getter)get_identity, NULL,
     "None: a gufunc has no identity (as NumPy's).", NULL},
    {"loops", (getter)cf_py_func_get_loops, NULL,
     "The (types, arg_ndim, source, fn_name, captures) of each loop.", NULL},
    {"kernel_count", (getter)get_kernel_count, NULL,
     "The number of kernels specialised so far.", NULL},
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
    .tp_traverse = (traverseproc)cf_py_func_traverse,
    .tp_clear = (inquiry)cf_py_func_clear,
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
