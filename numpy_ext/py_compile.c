/* py_compile.c: NVRTC, the template bundle and the kernel cache from Python, compile_source, and
 * RawKernel (CUDA C source + entry name -> a launchable kernel, like cupy.RawKernel). */
#include "py_compile.h"
#include "diagnostics.h"
#include "py_foreign.h"
#include "py_stream.h"

#include <string.h>

/* ---- options and arch arguments -------------------------------------------------------------- */

/* A sequence of str -> a C array of pointers into it; `*keep` holds the strings alive. */
static int parse_options(PyObject *obj, PyObject **keep, const char ***opts, int *n,
                         const char *argname)
{
    Py_ssize_t i, len;
    *keep = NULL;
    *opts = NULL;
    *n = 0;
    if (obj == NULL || obj == Py_None)
        return 0;
    if (PyUnicode_Check(obj) || PyBytes_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a sequence of str options, got a single %.50s",
                     argname, Py_TYPE(obj)->tp_name);
        return -1;
    }
    *keep = PySequence_Fast(obj, "options must be a sequence of str");
    if (*keep == NULL) {
        PyErr_Format(PyExc_TypeError, "%s: expected a sequence of str, got %.200s", argname,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    len = PySequence_Fast_GET_SIZE(*keep);
    if (len == 0)
        return 0;
    *opts = PyMem_Malloc(sizeof(char *) * (size_t)len);
    if (*opts == NULL) {
        Py_CLEAR(*keep);
        PyErr_NoMemory();
        return -1;
    }
    for (i = 0; i < len; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(*keep, i);
        if (!PyUnicode_Check(it)) {
            PyErr_Format(PyExc_TypeError, "%s: option %zd is %.200s, not str", argname, i,
                         Py_TYPE(it)->tp_name);
            goto fail;
        }
        (*opts)[i] = PyUnicode_AsUTF8(it);
        if ((*opts)[i] == NULL)
            goto fail;
    }
    *n = (int)len;
    return 0;
fail:
    PyMem_Free(*opts);
    *opts = NULL;
    Py_CLEAR(*keep);
    return -1;
}

/* arch=(major, minor); None: the current device's, or (9, 0) without a usable GPU. */
static int parse_arch(PyObject *obj, int *major, int *minor, const char *argname)
{
    if (obj == NULL || obj == Py_None) {
        int device;
        cf_device_props p;
        if (cf_is_available() && cf_device_get(&device) == CF_OK &&
            cf_device_props_get(device, &p) == CF_OK) {
            *major = p.cc_major;
            *minor = p.cc_minor;
        } else {
            *major = 9;
            *minor = 0;
        }
        return 0;
    }
    if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 2 ||
        !PyLong_Check(PyTuple_GET_ITEM(obj, 0)) || !PyLong_Check(PyTuple_GET_ITEM(obj, 1))) {
        PyErr_Format(PyExc_TypeError, "%s: expected a (major, minor) tuple of ints, got %R",
                     argname, obj);
        return -1;
    }
    *major = (int)PyLong_AsLong(PyTuple_GET_ITEM(obj, 0));
    *minor = (int)PyLong_AsLong(PyTuple_GET_ITEM(obj, 1));
    if (PyErr_Occurred())
        return -1;
    if (*major < 1 || *major > 99 || *minor < 0 || *minor > 9) {
        PyErr_Format(PyExc_ValueError, "%s: %R is not a compute capability", argname, obj);
        return -1;
    }
    return 0;
}

static int check_source(PyObject *source, const char **out, const char *argname)
{
    Py_ssize_t len;
    if (!PyUnicode_Check(source)) {
        PyErr_Format(PyExc_TypeError, "%s: expected str, got %.200s", argname,
                     Py_TYPE(source)->tp_name);
        return -1;
    }
    *out = PyUnicode_AsUTF8AndSize(source, &len);
    if (*out == NULL)
        return -1;
    if ((Py_ssize_t)strlen(*out) != len) {
        PyErr_Format(PyExc_ValueError, "%s: the source contains a NUL character", argname);
        return -1;
    }
    return 0;
}

/* ---- NVRTC and templates --------------------------------------------------------------------- */

static PyObject *py_nvrtc_init(PyObject *self, PyObject *unused)
{
    cf_status st = cf_nvrtc_init();
    if (st != CF_OK)
        return cf_py_raise(st, NULL);
    Py_RETURN_NONE;
}

static PyObject *py_nvrtc_version(PyObject *self, PyObject *unused)
{
    int major = 0, minor = 0;
    cf_status st = cf_nvrtc_version(&major, &minor);
    if (st != CF_OK)
        return cf_py_raise(st, NULL);
    return Py_BuildValue("(ii)", major, minor);
}

static PyObject *py_nvrtc_path(PyObject *self, PyObject *unused)
{
    const char *p = cf_nvrtc_path();
    return PyUnicode_DecodeFSDefault(p ? p : "");
}

static PyObject *py_nvrtc_add_search_dir(PyObject *self, PyObject *arg)
{
    PyObject *bytes;
    cf_status st;
    if (!PyUnicode_FSConverter(arg, &bytes))
        return NULL;
    st = cf_nvrtc_add_search_dir(PyBytes_AS_STRING(bytes));
    Py_DECREF(bytes);
    if (st != CF_OK)
        return cf_py_raise(st, "nvrtc_add_search_dir");
    Py_RETURN_NONE;
}

static PyObject *py_nvrtc_supports_arch(PyObject *self, PyObject *arg)
{
    int major, minor, supported = 0;
    cf_status st;
    if (parse_arch(arg, &major, &minor, "nvrtc_supports_arch: arch") < 0)
        return NULL;
    st = cf_nvrtc_supports_arch(major, minor, &supported);
    if (st != CF_OK)
        return cf_py_raise(st, "nvrtc_supports_arch");
    return PyLong_FromLong(supported);
}

static PyObject *py_template_names(PyObject *self, PyObject *unused)
{
    int i, n = cf_templates_count();
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *s = PyUnicode_FromString(cf_templates_name(i));
        if (s == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, s);
    }
    return list;
}

static PyObject *py_template_source(PyObject *self, PyObject *arg)
{
    const char *name, *src;
    size_t len = 0;
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "template_source: expected a str name, got %.200s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    name = PyUnicode_AsUTF8(arg);
    if (name == NULL)
        return NULL;
    src = cf_templates_find(name, &len);
    if (src == NULL) {
        PyErr_Format(PyExc_KeyError, "no embedded template named %R", arg);
        return NULL;
    }
    return PyUnicode_DecodeUTF8(src, (Py_ssize_t)len, "strict");
}

static PyObject *py_templates_hash(PyObject *self, PyObject *unused)
{
    return PyUnicode_FromString(cf_templates_hash());
}

/* ---- the cache ------------------------------------------------------------------------------- */

static PyObject *py_cache_dir(PyObject *self, PyObject *unused)
{
    const char *d = cf_cache_dir();
    return PyUnicode_DecodeFSDefault(d ? d : "");
}

static PyObject *py_cache_reconfigure(PyObject *self, PyObject *unused)
{
    cf_status st = cf_cache_reconfigure();
    if (st != CF_OK)
        return cf_py_raise(st, "cache_reconfigure");
    Py_RETURN_NONE;
}

static PyObject *py_cache_stats(PyObject *self, PyObject *unused)
{
    cf_cache_stats s;
    memset(&s, 0, sizeof s);
    cf_cache_get_stats(&s);
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L}", "compiles", (long long)s.compiles,
                         "memory_hits", (long long)s.memory_hits, "disk_hits",
                         (long long)s.disk_hits, "disk_writes", (long long)s.disk_writes,
                         "corrupt_entries", (long long)s.corrupt_entries);
}

static PyObject *py_cache_key(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"source", "options", "arch", NULL};
    PyObject *source, *options = Py_None, *arch = Py_None, *keep = NULL;
    const char *src, **opts = NULL;
    int n, major, minor;
    char key[65];
    cf_status st;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:cache_key", kwlist, &source, &options,
                                     &arch))
        return NULL;
    if (check_source(source, &src, "cache_key: source") < 0 ||
        parse_arch(arch, &major, &minor, "cache_key: arch") < 0 ||
        parse_options(options, &keep, &opts, &n, "cache_key: options") < 0)
        return NULL;
    st = cf_cache_key(src, opts, n, major, minor, key);
    PyMem_Free(opts);
    Py_XDECREF(keep);
    if (st != CF_OK)
        return cf_py_raise(st, "cache_key");
    return PyUnicode_FromString(key);
}

/* compile_source(source, options=(), arch=None) -> (image bytes, is_ptx); cache=True goes through
 * the kernel cache (and returns where the image came from as a third item). */
static PyObject *py_compile_source(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"source", "options", "arch", "cache", NULL};
    PyObject *source, *options = Py_None, *arch = Py_None, *keep = NULL, *r;
    const char *src, **opts = NULL;
    int n, major, minor, is_ptx = 0, from = 0, cache = 0;
    void *image = NULL;
    size_t size = 0;
    cf_status st;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOp:compile_source", kwlist, &source,
                                     &options, &arch, &cache))
        return NULL;
    if (check_source(source, &src, "compile_source: source") < 0 ||
        parse_options(options, &keep, &opts, &n, "compile_source: options") < 0)
        return NULL;
    if (parse_arch(arch, &major, &minor, "compile_source: arch") < 0) {
        PyMem_Free(opts);
        Py_XDECREF(keep);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    if (cache)
        st = cf_cache_get_image(src, opts, n, major, minor, &image, &size, &is_ptx, &from);
    else
        st = cf_compile_source(src, opts, n, major, minor, &image, &size, &is_ptx);
    Py_END_ALLOW_THREADS
    PyMem_Free(opts);
    Py_XDECREF(keep);
    if (st != CF_OK)
        return cf_py_raise(st, NULL);
    if (cache)
        r = Py_BuildValue("(y#Oi)", (const char *)image, (Py_ssize_t)size,
                          is_ptx ? Py_True : Py_False, from);
    else
        r = Py_BuildValue("(y#O)", (const char *)image, (Py_ssize_t)size,
                          is_ptx ? Py_True : Py_False);
    cf_free_buffer(image);
    return r;
}

/* ---- RawKernel ------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *source;   /* str */
    PyObject *name;     /* str */
    PyObject *options;  /* tuple of str */
    cf_function **funcs; /* per device ordinal, loaded on first use there (owned by the cache) */
    int nfuncs;
} RawKernel;

static void rk_dealloc(RawKernel *self)
{
    Py_XDECREF(self->source);
    Py_XDECREF(self->name);
    Py_XDECREF(self->options);
    PyMem_Free(self->funcs);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *rk_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"source", "name", "options", NULL};
    PyObject *source, *name, *options = Py_None, *keep = NULL, *opt_tuple;
    const char *src, **opts = NULL;
    int n;
    RawKernel *self;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O:RawKernel", kwlist, &source, &name,
                                     &options))
        return NULL;
    if (check_source(source, &src, "RawKernel: source") < 0)
        return NULL;
    if (!PyUnicode_Check(name) || PyUnicode_GetLength(name) == 0) {
        PyErr_Format(PyExc_TypeError, "RawKernel: name must be a non-empty str, got %R", name);
        return NULL;
    }
    if (parse_options(options, &keep, &opts, &n, "RawKernel: options") < 0)
        return NULL;
    PyMem_Free(opts);
    opt_tuple = keep ? PySequence_Tuple(keep) : PyTuple_New(0);
    Py_XDECREF(keep);
    if (opt_tuple == NULL)
        return NULL;
    self = (RawKernel *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(opt_tuple);
        return NULL;
    }
    Py_INCREF(source);
    Py_INCREF(name);
    self->source = source;
    self->name = name;
    self->options = opt_tuple;
    self->funcs = NULL;
    self->nfuncs = 0;
    return (PyObject *)self;
}

/* The kernel loaded on `device` (compiled through the cache on first use there). */
static int rk_function(RawKernel *self, int device, cf_function **out)
{
    const char *src, *name, **opts = NULL;
    PyObject *keep = NULL;
    int n;
    cf_module *m = NULL;
    cf_status st;
    if (device < self->nfuncs && self->funcs[device] != NULL) {
        *out = self->funcs[device];
        return 0;
    }
    if (device >= self->nfuncs) {
        cf_function **grown = PyMem_Realloc(self->funcs, sizeof(*grown) * (size_t)(device + 1));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memset(grown + self->nfuncs, 0, sizeof(*grown) * (size_t)(device + 1 - self->nfuncs));
        self->funcs = grown;
        self->nfuncs = device + 1;
    }
    src = PyUnicode_AsUTF8(self->source);
    name = PyUnicode_AsUTF8(self->name);
    if (src == NULL || name == NULL ||
        parse_options(self->options, &keep, &opts, &n, "RawKernel: options") < 0)
        return -1;
    Py_BEGIN_ALLOW_THREADS
    st = cf_module_load(device, src, opts, n, &m);
    if (st == CF_OK)
        st = cf_module_function(m, name, out);
    Py_END_ALLOW_THREADS
    PyMem_Free(opts);
    Py_XDECREF(keep);
    if (st != CF_OK)
        return cf_py_fail(st, NULL);
    self->funcs[device] = *out;
    return 0;
}

static int parse_dim3(PyObject *obj, unsigned out[3], const char *argname)
{
    Py_ssize_t n, i;
    PyObject *seq;
    out[0] = out[1] = out[2] = 1;
    if (PyLong_Check(obj) && !PyBool_Check(obj)) {
        long v = PyLong_AsLong(obj);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (v < 1 || v > (long)UINT32_MAX) {
            PyErr_Format(PyExc_ValueError, "%s: %ld is not a positive 32-bit extent", argname, v);
            return -1;
        }
        out[0] = (unsigned)v;
        return 0;
    }
    if (!PyTuple_Check(obj) && !PyList_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an int or a tuple of 1 to 3 ints, got %.200s",
                     argname, Py_TYPE(obj)->tp_name);
        return -1;
    }
    seq = PySequence_Fast(obj, argname);
    if (seq == NULL)
        return -1;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > 3) {
        PyErr_Format(PyExc_ValueError, "%s: expected 1 to 3 extents, got %zd", argname, n);
        Py_DECREF(seq);
        return -1;
    }
    for (i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        long v;
        if (!PyLong_Check(it) || PyBool_Check(it)) {
            PyErr_Format(PyExc_TypeError, "%s: extent %zd is not an int", argname, i);
            Py_DECREF(seq);
            return -1;
        }
        v = PyLong_AsLong(it);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (v < 1 || v > (long)UINT32_MAX) {
            PyErr_Format(PyExc_ValueError, "%s: extent %ld is not a positive 32-bit int", argname,
                         v);
            Py_DECREF(seq);
            return -1;
        }
        out[i] = (unsigned)v;
    }
    Py_DECREF(seq);
    return 0;
}

/* One kernel argument's bytes: 16 covers complex128. */
typedef union {
    unsigned char bytes[16];
    int64_t i64;
    uint64_t u64;
    double f64;
    double c128[2];
} arg_slot;

/* Convert one argument without touching the GPU. `*deferred` is set for objects with
 * __cuda_array_interface__, whose pointer and device are read later (after cf_init). */
static int convert_arg(PyObject *a, arg_slot *slot, int *device, int *deferred, Py_ssize_t i)
{
    *device = -1;
    *deferred = 0;
    memset(slot, 0, sizeof *slot);
    if (CfPyDeviceArray_Check(a)) {
        slot->u64 = ((CfPyDeviceArray *)a)->view.data;
        *device = ((CfPyDeviceArray *)a)->view.device;
        return 0;
    }
    if (PyBool_Check(a)) {
        slot->bytes[0] = (a == Py_True);
        return 0;
    }
    if (PyArray_IsScalar(a, Generic)) {
        PyArray_Descr *d = PyArray_DescrFromScalar(a);
        cf_dtype dt;
        char argname[32];
        int r;
        if (d == NULL)
            return -1;
        snprintf(argname, sizeof argname, "args[%zd]", i);
        r = cf_py_dtype_from_descr(d, &dt, argname);
        Py_DECREF(d);
        if (r < 0)
            return -1;
        PyArray_ScalarAsCtype(a, slot->bytes);
        return 0;
    }
    if (PyLong_Check(a)) {
        int overflow = 0;
        slot->i64 = PyLong_AsLongLongAndOverflow(a, &overflow);
        if (slot->i64 == -1 && PyErr_Occurred())
            return -1;
        if (overflow) {
            PyErr_Format(PyExc_OverflowError,
                         "args[%zd]: %R does not fit in int64 (pass a NumPy scalar such as "
                         "np.uint64(x) for other types)",
                         i, a);
            return -1;
        }
        return 0;
    }
    if (PyFloat_Check(a)) {
        slot->f64 = PyFloat_AS_DOUBLE(a);
        return 0;
    }
    if (PyComplex_Check(a)) {
        slot->c128[0] = PyComplex_RealAsDouble(a);
        slot->c128[1] = PyComplex_ImagAsDouble(a);
        return 0;
    }
    if (PyArray_Check(a)) {
        PyErr_Format(PyExc_TypeError,
                     "args[%zd]: a host NumPy array cannot be passed to a kernel; copy it with "
                     "cuda.to_device() first",
                     i);
        return -1;
    }
    if (cf_py_is_device_object(a)) {
        *deferred = 1;
        return 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "args[%zd]: %.200s is not a kernel argument (device arrays, NumPy scalars, "
                 "int, float, complex and bool are)",
                 i, Py_TYPE(a)->tp_name);
    return -1;
}

static PyObject *rk_call(RawKernel *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"grid", "block", "args", "shared_mem", "stream", NULL};
    PyObject *grid_obj, *block_obj, *kargs, *stream = NULL, *seq = NULL, *resolved = NULL;
    PyObject *keep_list = NULL;
    unsigned grid[3], block[3];
    long long shared = 0;
    Py_ssize_t n = 0, i;
    arg_slot *slots = NULL;
    void **argv = NULL;
    int *argdev = NULL, device;
    cf_function *f;
    cf_stream *s;
    cf_status st;
    PyObject *result = NULL;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|LO:RawKernel.__call__", kwlist, &grid_obj,
                                     &block_obj, &kargs, &shared, &stream))
        return NULL;
    if (parse_dim3(grid_obj, grid, "RawKernel: grid") < 0 ||
        parse_dim3(block_obj, block, "RawKernel: block") < 0 ||
        cf_py_stream_check(stream, "RawKernel: stream") < 0)
        return NULL;
    if (shared < 0 || shared > (long long)UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "RawKernel: shared_mem %lld is not a byte count", shared);
        return NULL;
    }
    if (!PyTuple_Check(kargs) && !PyList_Check(kargs)) {
        PyErr_Format(PyExc_TypeError, "RawKernel: args must be a tuple or list, got %.200s",
                     Py_TYPE(kargs)->tp_name);
        return NULL;
    }
    seq = PySequence_Fast(kargs, "args");
    if (seq == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    slots = PyMem_Calloc((size_t)(n ? n : 1), sizeof *slots);
    argv = PyMem_Calloc((size_t)(n ? n : 1), sizeof *argv);
    argdev = PyMem_Calloc((size_t)(n ? n : 1), sizeof *argdev);
    keep_list = PyList_New(0);
    if (slots == NULL || argv == NULL || argdev == NULL || keep_list == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* Pure conversions first, so bad arguments are reported without a GPU. argdev[i]: the device
     * of a DeviceArray argument, -1 for scalars, -2 for a CAI object read after cf_init. */
    for (i = 0; i < n; i++) {
        int is_cai;
        if (convert_arg(PySequence_Fast_GET_ITEM(seq, i), &slots[i], &argdev[i], &is_cai, i) < 0)
            goto done;
        argv[i] = &slots[i];
        if (is_cai)
            argdev[i] = -2;
    }
    if (cf_py_stream_device(stream, &device, "RawKernel") < 0)
        goto done;
    for (i = 0; i < n; i++) {
        int arg_device = argdev[i];
        if (arg_device == -1)
            continue;
        if (arg_device == -2) {
            cf_array v;
            PyObject *keep;
            char argname[32];
            snprintf(argname, sizeof argname, "args[%zd]", i);
            if (cf_py_device_view(PySequence_Fast_GET_ITEM(seq, i), &v, &keep, 1, argname) < 0)
                goto done;
            if (PyList_Append(keep_list, keep) < 0) {
                Py_DECREF(keep);
                goto done;
            }
            Py_DECREF(keep);
            slots[i].u64 = v.data;
            arg_device = v.device;
        }
        if (arg_device != device) {
            PyErr_Format(PyExc_ValueError,
                         "args[%zd]: the array lives on device %d but the kernel runs on device %d",
                         i, arg_device, device);
            goto done;
        }
    }
    resolved = cf_py_stream_resolve(stream, device, "RawKernel: stream");
    if (resolved == NULL || cf_py_stream_get(resolved, device, &s) < 0 ||
        rk_function(self, device, &f) < 0)
        goto done;
    st = cf_launch(f, grid, block, (unsigned)shared, s, argv);
    if (st != CF_OK) {
        cf_py_raise(st, "RawKernel launch");
        goto done;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    Py_XDECREF(resolved);
    Py_XDECREF(keep_list);
    Py_XDECREF(seq);
    PyMem_Free(slots);
    PyMem_Free(argv);
    PyMem_Free(argdev);
    return result;
}

static PyObject *rk_compile(RawKernel *self, PyObject *args)
{
    PyObject *dev = Py_None;
    int device;
    cf_function *f;
    if (!PyArg_ParseTuple(args, "|O:compile", &dev))
        return NULL;
    if (dev == Py_None) {
        if (cf_py_current_device(&device, "RawKernel.compile") < 0)
            return NULL;
    } else {
        long v = PyLong_AsLong(dev);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (v < 0 || v > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "RawKernel.compile: bad device %ld", v);
            return NULL;
        }
        device = (int)v;
        if (cf_py_cuda_init("RawKernel.compile") < 0)
            return NULL;
    }
    if (rk_function(self, device, &f) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *rk_get_attributes(RawKernel *self, void *closure)
{
    int device;
    cf_function *f;
    cf_function_attrs a;
    cf_status st;
    if (cf_py_current_device(&device, "RawKernel.attributes") < 0 || rk_function(self, device, &f) < 0)
        return NULL;
    st = cf_function_attrs_get(f, &a);
    if (st != CF_OK)
        return cf_py_raise(st, "RawKernel.attributes");
    return Py_BuildValue("{s:i,s:i,s:i,s:i}", "max_threads_per_block", a.max_threads_per_block,
                         "num_regs", a.num_regs, "shared_size_bytes", a.shared_bytes,
                         "local_size_bytes", a.local_bytes);
}

static PyObject *rk_get(RawKernel *self, void *closure)
{
    PyObject *r = *(PyObject **)((char *)self + (size_t)closure);
    Py_INCREF(r);
    return r;
}

static PyObject *rk_repr(RawKernel *self)
{
    return PyUnicode_FromFormat("<cufunc RawKernel %R>", self->name);
}

static PyMethodDef rk_methods[] = {
    {"compile", (PyCFunction)rk_compile, METH_VARARGS,
     "compile($self, device=None, /)\n"
     "--\n"
     "\n"
     "Compile and load the kernel now on a device.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "device : int, optional\n"
     "    The device's ordinal; the current device when not given.\n"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef rk_getset[] = {
    {"source", (getter)rk_get, NULL,
     "The CUDA C source.", (void *)offsetof(RawKernel, source)},
    {"name", (getter)rk_get, NULL,
     "The name of the ``__global__`` function.", (void *)offsetof(RawKernel, name)},
    {"options", (getter)rk_get, NULL,
     "The NVRTC options, a tuple of str.", (void *)offsetof(RawKernel, options)},
    {"attributes", (getter)rk_get_attributes, NULL,
     "Registers, shared and local memory, max threads per block on the current device.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RawKernel_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cufunc._core.RawKernel",
    .tp_basicsize = sizeof(RawKernel),
    .tp_dealloc = (destructor)rk_dealloc,
    .tp_repr = (reprfunc)rk_repr,
    .tp_call = (ternaryfunc)rk_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc =
        "RawKernel(source, name, options=())\n"
        "--\n"
        "\n"
        "An ``extern \"C\" __global__`` function of CUDA C, compiled with NVRTC on first use.\n"
        "\n"
        "It is compiled once per device, through the kernel cache. ``kernel(grid, block, args,\n"
        "shared_mem=0, stream=None)`` launches it asynchronously; ``args`` are device arrays (passed as\n"
        "pointers), NumPy scalars (their exact type), int (int64), float (float64), complex (complex128)\n"
        "and bool.\n"
        "\n"
        "Parameters\n"
        "----------\n"
        "source : str\n"
        "    The CUDA C source.\n"
        "name : str\n"
        "    The name of the ``__global__`` function.\n"
        "options : sequence of str, optional\n"
        "    NVRTC options.\n",
    .tp_methods = rk_methods,
    .tp_getset = rk_getset,
    .tp_new = rk_new,
};

PyMethodDef cf_py_compile_methods[] = {
    {"nvrtc_init", py_nvrtc_init, METH_NOARGS, "nvrtc_init(): load NVRTC now (CudaSupportError if it cannot be)."},
    {"nvrtc_version", py_nvrtc_version, METH_NOARGS, "nvrtc_version() -> (major, minor)."},
    {"nvrtc_path", py_nvrtc_path, METH_NOARGS,
     "nvrtc_path() -> where libnvrtc was loaded from ('' if not loaded)."},
    {"nvrtc_add_search_dir", py_nvrtc_add_search_dir, METH_O,
     "nvrtc_add_search_dir(dir): search this folder last for libnvrtc (before its first load)."},
    {"nvrtc_supports_arch", py_nvrtc_supports_arch, METH_O,
     "nvrtc_supports_arch((major, minor)) -> the newest SASS arch (e.g. 90) NVRTC can emit that "
     "is <= the given one."},
    {"template_names", py_template_names, METH_NOARGS,
     "template_names() -> the include names of the embedded templates."},
    {"template_source", py_template_source, METH_O,
     "template_source(name) -> the source of an embedded template."},
    {"templates_hash", py_templates_hash, METH_NOARGS,
     "templates_hash() -> hex SHA-256 of the embedded template bundle."},
    {"cache_dir", py_cache_dir, METH_NOARGS,
     "cache_dir() -> the kernel cache folder ('' when the disk cache is off)."},
    {"cache_reconfigure", py_cache_reconfigure, METH_NOARGS,
     "cache_reconfigure(): re-read CUFUNC_CACHE_DIR, CUFUNC_CACHE, CUFUNC_DEBUG."},
    {"cache_stats", py_cache_stats, METH_NOARGS, "cache_stats() -> dict of cache counters."},
    {"cache_key", (PyCFunction)(void (*)(void))py_cache_key, METH_VARARGS | METH_KEYWORDS,
     "cache_key(source, options=(), arch=None) -> the hex cache key of a compilation."},
    {"compile_source", (PyCFunction)(void (*)(void))py_compile_source,
     METH_VARARGS | METH_KEYWORDS,
     "compile_source($module, /, source, options=(), arch=None, cache=False)\n"
     "--\n"
     "\n"
     "Compile CUDA C source with NVRTC, without a GPU.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "source : str\n"
     "    The CUDA C source.\n"
     "options : sequence of str, optional\n"
     "    NVRTC options.\n"
     "arch : tuple of int, optional\n"
     "    The compute capability ``(major, minor)``; the current device's, or (9, 0) without a GPU,\n"
     "    when not given.\n"
     "cache : bool, optional\n"
     "    Use the kernel cache.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "tuple\n"
     "    ``(image, is_ptx)``: CUBIN, or PTX when NVRTC does not know the arch; with ``cache=True``\n"
     "    a third item says where the image came from (0 compiled, 1 memory, 2 disk).\n"},
    {NULL, NULL, 0, NULL},
};

int cf_py_compile_init_module(PyObject *m)
{
    if (PyType_Ready(&RawKernel_Type) < 0)
        return -1;
    Py_INCREF(&RawKernel_Type);
    if (PyModule_AddObject(m, "RawKernel", (PyObject *)&RawKernel_Type) < 0) {
        Py_DECREF(&RawKernel_Type);
        return -1;
    }
    return 0;
}
