/* py_override.c: NEP 13 dispatch for cufunc's UFunc and GUFunc (see py_override.h).
 *
 * What NumPy does (numpy/_core/src/umath/override.c), and so what this does:
 *   1. the operands are the inputs, the outputs (positional or out=) and the where= mask;
 *   2. of each type once, those whose __array_ufunc__ is not ndarray's are the overrides, a
 *      subclass before its superclass, otherwise left to right; __array_ufunc__ = None is a
 *      TypeError at once;
 *   3. the arguments are normalised: outputs as a tuple in out= (left out when all None),
 *      reduce-like positional options as keywords;
 *   4. each override in turn: type(arg).__array_ufunc__(arg, ufunc, method, *inputs, **kwargs);
 *      the first answer that is not NotImplemented is the result; when all are, TypeError with
 *      NumPy's own message (numpy's array_ufunc_errmsg_formatter).
 * The cost when nothing overrides is one pointer test per operand against the common types
 * (cf_py_override_plain); other types are remembered once found plain (a small cache keyed by the
 * type and its version tag, which changes when the type's attributes change). */
#include "py_override.h"

/* ---- method layouts --------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int in_fixed;          /* inputs among the positional: -1 the function's nin, 0 all, else k */
    int out_pos;           /* the position of out among them; -1 none; -2 all after the inputs */
    const char *const *kw; /* names of positional options (reduce-like), NULL at input slots */
    int nkw;
} method_layout;

/* NumPy's positional options, then cufunc's own stream= */
static const char *const REDUCE_KW[] = {NULL, "axis", "dtype", "out", "keepdims", "initial",
                                        "where", "stream"};
static const char *const ACCUMULATE_KW[] = {NULL, "axis", "dtype", "out", "stream"};
static const char *const REDUCEAT_KW[] = {NULL, NULL, "axis", "dtype", "out", "stream"};

static const method_layout LAYOUTS[] = {
    {"__call__", -1, -2, NULL, 0},
    {"outer", -1, -2, NULL, 0},
    {"reduce", 1, 3, REDUCE_KW, 8},
    {"accumulate", 1, 3, ACCUMULATE_KW, 5},
    {"reduceat", 2, 4, REDUCEAT_KW, 6},
    {"at", 0, -1, NULL, 0},
};
static const method_layout OTHER_LAYOUT = {NULL, 0, -1, NULL, 0};

static const method_layout *layout_of(const char *method)
{
    for (size_t i = 0; i < sizeof LAYOUTS / sizeof LAYOUTS[0]; i++)
        if (strcmp(LAYOUTS[i].name, method) == 0)
            return &LAYOUTS[i];
    return &OTHER_LAYOUT;
}

/* ---- which objects override ------------------------------------------------------------------ */

#define PLAIN_CACHE 8
static struct {
    PyTypeObject *type;
    unsigned int tag;
} plain_cache[PLAIN_CACHE];
static int plain_next;

static int plain_cached(PyTypeObject *t)
{
    if (!PyType_HasFeature(t, Py_TPFLAGS_VALID_VERSION_TAG))
        return 0;
    for (int i = 0; i < PLAIN_CACHE; i++)
        if (plain_cache[i].type == t && plain_cache[i].tag == t->tp_version_tag)
            return 1;
    return 0;
}

static void plain_remember(PyTypeObject *t)
{
    if (!PyType_HasFeature(t, Py_TPFLAGS_VALID_VERSION_TAG))
        return;
    int i = plain_next++ % PLAIN_CACHE;
    plain_cache[i].type = t;
    plain_cache[i].tag = t->tp_version_tag;
}

/* A type attribute, or NULL (no error) when missing. New reference. */
static PyObject *type_attr(PyTypeObject *t, PyObject *name)
{
    PyObject *v = PyObject_GetAttr((PyObject *)t, name);
    if (v == NULL && PyErr_ExceptionMatches(PyExc_AttributeError))
        PyErr_Clear();
    return v;
}

static PyObject *str_array_ufunc, *str_cai;

/* Python types that never override (NumPy's _is_basic_python_type). */
static int basic_type(PyObject *o)
{
    return PyList_CheckExact(o) || PyTuple_CheckExact(o) || PyDict_CheckExact(o) ||
           PyUnicode_CheckExact(o) || PyBytes_CheckExact(o) || PySlice_Check(o) ||
           o == Py_Ellipsis || o == Py_NotImplemented || PyAnySet_CheckExact(o);
}

/* dask.array.Array when dask.array is imported (new reference), else NULL. */
static PyObject *dask_array_type(void)
{
    PyObject *name = PyUnicode_FromString("dask.array.core");
    PyObject *mod = name ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    if (mod == NULL)
        return NULL;
    PyObject *t = PyObject_GetAttrString(mod, "Array");
    Py_DECREF(mod);
    if (t == NULL || !PyType_Check(t)) {
        PyErr_Clear();
        Py_XDECREF(t);
        return NULL;
    }
    return t;
}

/* The __array_ufunc__ that overrides for `o` (new reference), or NULL: none (0) or an error (-1)
 * in *err. */
static PyObject *override_of(PyObject *o, int *err)
{
    *err = 0;
    PyTypeObject *t = Py_TYPE(o);
    if (cf_py_override_plain(o) || basic_type(o) || plain_cached(t))
        return NULL;
    PyObject *m = type_attr(t, str_array_ufunc);
    if (m == NULL) {
        if (PyErr_Occurred())
            *err = -1;
        else
            plain_remember(t);
        return NULL;
    }
    if (m == Py_None) {
        Py_DECREF(m);
        PyErr_Format(PyExc_TypeError, "operand '%.200s' does not support ufuncs "
                     "(__array_ufunc__=None)", t->tp_name);
        *err = -1;
        return NULL;
    }
    /* ndarray's and DeviceArray's own, and device arrays cufunc computes on itself */
    PyObject *nd = type_attr(&PyArray_Type, str_array_ufunc);
    PyObject *da = type_attr(&CfPyDeviceArray_Type, str_array_ufunc);
    PyObject *cai = type_attr(t, str_cai);
    int plain = m == nd || (da != NULL && m == da) || cai != NULL;
    Py_XDECREF(nd);
    Py_XDECREF(da);
    Py_XDECREF(cai);
    if (PyErr_Occurred()) {
        Py_DECREF(m);
        *err = -1;
        return NULL;
    }
    if (plain) {
        Py_DECREF(m);
        plain_remember(t);
        return NULL;
    }
    /* dask's own treats a foreign ufunc by its name: cufunc's stand-in serves dask arrays */
    PyObject *dask = dask_array_type();
    if (dask != NULL && PyType_IsSubtype(t, (PyTypeObject *)dask)) {
        PyObject *f = cf_py_hook(CF_PY_HOOK_dask_array_ufunc);
        Py_DECREF(m);
        m = Py_XNewRef(f);
        if (m == NULL)
            *err = -1;
    }
    Py_XDECREF(dask);
    return m;
}

#define MAX_OPS 66 /* inputs, outputs and the mask */

typedef struct {
    int n;
    PyObject *obj[MAX_OPS];  /* borrowed */
    PyObject *meth[MAX_OPS]; /* owned */
} overrides;

/* Step 2: the overrides among ops[0..n), in NumPy's order. 0 or -1. */
static int collect(PyObject *const *ops, int n, overrides *ov)
{
    ov->n = 0;
    for (int i = 0; i < n; i++) {
        PyObject *o = ops[i];
        int seen = 0, err;
        for (int j = 0; j < ov->n && !seen; j++)
            seen = Py_TYPE(ov->obj[j]) == Py_TYPE(o);
        if (seen)
            continue;
        PyObject *m = override_of(o, &err);
        if (err < 0)
            return -1;
        if (m == NULL)
            continue;
        /* a subclass goes before the first of its superclasses */
        int at = ov->n;
        for (int j = 0; j < ov->n; j++)
            if (PyObject_TypeCheck(o, Py_TYPE(ov->obj[j]))) {
                at = j;
                break;
            }
        memmove(&ov->obj[at + 1], &ov->obj[at], sizeof(PyObject *) * (size_t)(ov->n - at));
        memmove(&ov->meth[at + 1], &ov->meth[at], sizeof(PyObject *) * (size_t)(ov->n - at));
        ov->obj[at] = o;
        ov->meth[at] = m;
        ov->n++;
    }
    return 0;
}

/* ---- normalising the arguments ---------------------------------------------------------------- */

typedef struct {
    PyObject *inputs; /* owned tuple */
    PyObject *out;    /* owned tuple, or NULL */
    PyObject *kwargs; /* owned dict (out= normalised in it) */
} normal_args;

/* MALFORMED: a call the entry's own parser refuses (too many arguments, one given twice): no
 * hand-over, the entry reports it in its words. */
#define MALFORMED 2

static int set_kw(PyObject *kw, const char *name, PyObject *value)
{
    PyObject *key = PyUnicode_InternFromString(name);
    if (key == NULL)
        return -1;
    int has = PyDict_Contains(kw, key);
    if (has != 0) {
        Py_DECREF(key);
        return has > 0 ? MALFORMED : -1;
    }
    int rc = PyDict_SetItem(kw, key, value);
    Py_DECREF(key);
    return rc;
}

/* Step 3: `kw` (owned, the keywords as given) is taken over by `na`. 0, MALFORMED or -1. */
static int normalize(const method_layout *L, int nin, PyObject *const *pos,
                     Py_ssize_t npos, PyObject *kw, normal_args *na)
{
    na->inputs = na->out = NULL;
    na->kwargs = kw;
    Py_ssize_t ni = L->in_fixed < 0 ? nin : L->in_fixed == 0 ? npos : L->in_fixed;
    if (ni > npos)
        ni = npos;
    PyObject *pos_out = NULL; /* borrowed */
    Py_ssize_t npos_out = 0;
    if (L->out_pos == -2 && npos > ni) {
        npos_out = npos - ni;
    } else if (L->kw != NULL) {
        if (npos > L->nkw)
            return MALFORMED;
        for (Py_ssize_t k = ni; k < npos; k++) {
            int rc = k == L->out_pos ? 0 : set_kw(kw, L->kw[k], pos[k]);
            if (k == L->out_pos)
                pos_out = pos[k];
            if (rc != 0)
                return rc;
        }
    }
    if ((na->inputs = PyTuple_New(ni)) == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < ni; i++)
        PyTuple_SET_ITEM(na->inputs, i, Py_NewRef(pos[i]));

    PyObject *kw_out = PyDict_GetItemString(kw, "out"); /* borrowed */
    if ((npos_out || pos_out) && kw_out)
        return MALFORMED;
    if (npos_out) {
        na->out = PyTuple_New(npos_out);
        for (Py_ssize_t o = 0; na->out && o < npos_out; o++)
            PyTuple_SET_ITEM(na->out, o, Py_NewRef(pos[ni + o]));
    } else if (pos_out || kw_out) {
        PyObject *v = pos_out ? pos_out : kw_out;
        na->out = PyTuple_Check(v) ? Py_NewRef(v) : PyTuple_Pack(1, v);
    }
    if ((npos_out || pos_out || kw_out) && na->out == NULL)
        return -1;
    if (kw_out && PyDict_DelItemString(kw, "out") < 0)
        return -1;
    if (na->out) {
        int all_none = 1;
        for (Py_ssize_t o = 0; o < PyTuple_GET_SIZE(na->out); o++)
            all_none = all_none && PyTuple_GET_ITEM(na->out, o) == Py_None;
        if (all_none)
            Py_CLEAR(na->out); /* NumPy passes no out= then */
        else if (PyDict_SetItemString(kw, "out", na->out) < 0)
            return -1;
    }
    return 0;
}

static void normal_clear(normal_args *na)
{
    Py_CLEAR(na->inputs);
    Py_CLEAR(na->out);
    Py_CLEAR(na->kwargs);
}

/* ---- the hand-over ---------------------------------------------------------------------------- */

/* NumPy's message when every override answered NotImplemented. */
static void raise_all_declined(PyObject *call_args, PyObject *kwargs)
{
    PyObject *mod = PyImport_ImportModule("numpy._core._internal");
    if (mod == NULL) {
        PyErr_Clear();
        mod = PyImport_ImportModule("numpy.core._internal");
    }
    PyObject *fmt = mod ? PyObject_GetAttrString(mod, "array_ufunc_errmsg_formatter") : NULL;
    Py_XDECREF(mod);
    PyObject *msg = fmt ? PyObject_Call(fmt, call_args, kwargs) : NULL;
    Py_XDECREF(fmt);
    if (msg != NULL) {
        PyErr_SetObject(PyExc_TypeError, msg);
        Py_DECREF(msg);
    }
}

/* Steps 2-4 with the arguments normalised (na's references are the caller's). */
static int dispatch(PyObject *func, const char *method, normal_args *na, PyObject *where,
                    PyObject **result)
{
    PyObject *ops[MAX_OPS];
    int n = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(na->inputs) && n < MAX_OPS - 1; i++)
        ops[n++] = PyTuple_GET_ITEM(na->inputs, i);
    for (Py_ssize_t o = 0; na->out && o < PyTuple_GET_SIZE(na->out) && n < MAX_OPS - 1; o++)
        ops[n++] = PyTuple_GET_ITEM(na->out, o);
    if (where != NULL)
        ops[n++] = where;
    overrides ov;
    if (collect(ops, n, &ov) < 0)
        return -1;
    if (ov.n == 0)
        return 0;
    int rc = -1;
    Py_ssize_t ni = PyTuple_GET_SIZE(na->inputs);
    /* (arg, func, method, *inputs): slot 0 is each override's own argument in turn */
    PyObject *call_args = PyTuple_New(3 + ni);
    PyObject *mname = PyUnicode_InternFromString(method);
    if (call_args == NULL || mname == NULL)
        goto done;
    PyTuple_SET_ITEM(call_args, 0, Py_NewRef(Py_None));
    PyTuple_SET_ITEM(call_args, 1, Py_NewRef(func));
    PyTuple_SET_ITEM(call_args, 2, Py_NewRef(mname));
    for (Py_ssize_t i = 0; i < ni; i++)
        PyTuple_SET_ITEM(call_args, 3 + i, Py_NewRef(PyTuple_GET_ITEM(na->inputs, i)));
    for (int j = 0; j < ov.n; j++) {
        PyObject *old = PyTuple_GET_ITEM(call_args, 0);
        PyTuple_SET_ITEM(call_args, 0, Py_NewRef(ov.obj[j]));
        Py_DECREF(old);
        PyObject *r = PyObject_Call(ov.meth[j], call_args, na->kwargs);
        if (r == NULL)
            goto done;
        if (r != Py_NotImplemented) {
            *result = r;
            rc = 1;
            goto done;
        }
        Py_DECREF(r);
    }
    raise_all_declined(call_args, na->kwargs);
done:
    for (int j = 0; j < ov.n; j++)
        Py_DECREF(ov.meth[j]);
    Py_XDECREF(call_args);
    Py_XDECREF(mname);
    return rc;
}

static int init_strings(void)
{
    if (str_array_ufunc == NULL &&
        (str_array_ufunc = PyUnicode_InternFromString("__array_ufunc__")) == NULL)
        return -1;
    if (str_cai == NULL && (str_cai = PyUnicode_InternFromString("__cuda_array_interface__")) ==
                               NULL)
        return -1;
    return 0;
}

/* Whether a keyword names an operand (out=, where=): the only keywords NumPy checks. */
static int operand_keyword(PyObject *name)
{
    return PyUnicode_CompareWithASCIIString(name, "out") == 0 ||
           PyUnicode_CompareWithASCIIString(name, "where") == 0;
}

/* The fast check: whether every operand is of a type known not to override. out=(tuple) is
 * looked into. Cheap: pointer comparisons, and a name test for keywords of other values. */
static int maybe_overridden(PyObject *const *pos, Py_ssize_t npos, PyObject *const *kwv,
                            PyObject *kwnames, Py_ssize_t nkw, PyObject *kwdict)
{
    for (Py_ssize_t i = 0; i < npos; i++)
        if (!cf_py_override_plain(pos[i]))
            return 1;
    Py_ssize_t it = 0;
    PyObject *k, *v;
    for (Py_ssize_t i = 0; kwdict ? PyDict_Next(kwdict, &it, &k, &v) : i < nkw; i++) {
        if (!kwdict) {
            k = PyTuple_GET_ITEM(kwnames, i);
            v = kwv[i];
        }
        if (cf_py_override_plain(v) || !operand_keyword(k))
            continue;
        if (!PyTuple_CheckExact(v))
            return 1;
        for (Py_ssize_t o = 0; o < PyTuple_GET_SIZE(v); o++)
            if (!cf_py_override_plain(PyTuple_GET_ITEM(v, o)))
                return 1;
    }
    return 0;
}

static int override_common(PyObject *func, const char *method, int nin, PyObject *const *pos,
                           Py_ssize_t npos, PyObject *kw, PyObject **result)
{
    normal_args na;
    *result = NULL;
    if (init_strings() < 0) {
        Py_DECREF(kw);
        return -1;
    }
    int rc = normalize(layout_of(method), nin, pos, npos, kw, &na);
    if (rc == 0)
        rc = dispatch(func, method, &na, PyDict_GetItemString(na.kwargs, "where"), result);
    normal_clear(&na);
    return rc == MALFORMED ? 0 : rc;
}

int cf_py_override_vc(PyObject *func, const char *method, int nin, PyObject *const *args,
                      Py_ssize_t nargs, PyObject *kwnames, PyObject **result)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (!maybe_overridden(args, nargs, args + nargs, kwnames, nkw, NULL))
        return 0;
    PyObject *kw = PyDict_New();
    for (Py_ssize_t i = 0; kw && i < nkw; i++)
        if (PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0)
            Py_CLEAR(kw);
    if (kw == NULL)
        return -1;
    return override_common(func, method, nin, args, nargs, kw, result);
}

int cf_py_override_tp(PyObject *func, const char *method, int nin, PyObject *args,
                      PyObject *kwargs, PyObject **result)
{
    PyObject *const *pos = &PyTuple_GET_ITEM(args, 0);
    Py_ssize_t npos = PyTuple_GET_SIZE(args);
    if (!maybe_overridden(pos, npos, NULL, NULL, 0, kwargs && PyDict_GET_SIZE(kwargs) ? kwargs
                                                                                      : NULL))
        return 0;
    PyObject *kw = kwargs ? PyDict_Copy(kwargs) : PyDict_New();
    if (kw == NULL)
        return -1;
    return override_common(func, method, nin, pos, npos, kw, result);
}

int cf_py_override_dask(PyObject *func, cf_py_hook_id handler, PyObject *first, PyObject *args,
                        PyObject *kwargs, PyObject **result)
{
    *result = NULL;
    if (cf_py_override_plain(first) || basic_type(first))
        return 0;
    PyObject *dask = dask_array_type();
    int is = dask != NULL && PyObject_TypeCheck(first, (PyTypeObject *)dask);
    Py_XDECREF(dask);
    if (!is)
        return 0;
    PyObject *f = Py_XNewRef(cf_py_hook(handler));
    PyObject *full = f ? PyTuple_New(PyTuple_GET_SIZE(args) + 1) : NULL;
    if (full != NULL) {
        PyTuple_SET_ITEM(full, 0, Py_NewRef(func));
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++)
            PyTuple_SET_ITEM(full, i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
        *result = PyObject_Call(f, full, kwargs);
    }
    Py_XDECREF(full);
    Py_XDECREF(f);
    return *result ? 1 : -1;
}
