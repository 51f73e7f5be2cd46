/* _coremodule.c: the module cufunc._core: its init (every file's types and functions registered),
 * the status codes and a few module functions (test control, knobs, dtype facts). The top of the
 * binding: it calls every file, none calls it; the helpers every file uses are py_common.c's. The
 * init imports nothing of the package: the package registers what the binding calls in it
 * (py_hooks.c) once the module exists. */
#include "py_common.h"
#include "py_call.h"
#include "py_capturing.h"
#include "py_compile.h"
#include "py_copy.h"
#include "py_device.h"
#include "py_devicearray.h"
#include "py_devicearray_type.h"
#include "py_dlpack.h"
#include "py_foreign.h"
#include "py_graph.h"
#include "py_gufunc.h"
#include "py_hooks.h"
#include "py_interop.h"
#include "py_ipc.h"
#include "py_loops.h"
#include "py_memory.h"
#include "py_reduce.h"
#include "py_signature.h"
#include "py_stream.h"
#include "py_twins.h"
#include "py_ufunc.h"
#include "testing.h"

#include <string.h>

/* ---- module-level functions defined here ----------------------------------------------------- */

static PyObject *py_status_name(PyObject *self, PyObject *arg)
{
    int st = PyLong_AsLong(arg);
    if (st == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(cf_status_name(st));
}

/* Raise the exception a status maps to with a given message: lets the tests check the mapping. */
static PyObject *py_raise_status(PyObject *self, PyObject *args)
{
    int st;
    const char *msg;
    PyObject *cls;
    if (!PyArg_ParseTuple(args, "is:_raise_status", &st, &msg))
        return NULL;
    if ((cls = cf_py_exception_for(st)) != NULL)
        PyErr_SetString(cls, msg);
    return NULL;
}

static PyObject *py_test_fail_alloc_after(PyObject *self, PyObject *args)
{
    long long n;
    int sticky = 0;
    if (!PyArg_ParseTuple(args, "L|p:_test_fail_alloc_after", &n, &sticky))
        return NULL;
    cf_test_fail_alloc_after((int64_t)n, sticky);
    Py_RETURN_NONE;
}

static PyObject *py_test_alloc_outstanding(PyObject *self, PyObject *unused)
{
    return PyLong_FromLongLong((long long)cf_test_alloc_outstanding());
}

/* The one entry for test hooks that are not allocation faults: a hook's name and its value. */
static PyObject *py_test_control(PyObject *self, PyObject *args)
{
    const char *name;
    PyObject *value;
    if (!PyArg_ParseTuple(args, "sO:_test_control", &name, &value))
        return NULL;
    if (strcmp(name, "cache_write_pause") == 0) {
        const char *marker = NULL;
        if (value != Py_None && !(marker = PyUnicode_AsUTF8(value)))
            return NULL;
        cf_cache_test_pause_writes(marker);
        Py_RETURN_NONE;
    }
    return PyErr_Format(PyExc_ValueError, "_test_control: no test hook named '%s' (there is "
                        "'cache_write_pause')", name);
}

/* Every CUFUNC_* variable (cf_knob_info): a list of dicts, for `python -m cufunc` and the docs. */
static PyObject *py_knobs(PyObject *self, PyObject *unused)
{
    int n = cf_knob_count();
    PyObject *out = PyList_New(n);
    if (!out)
        return NULL;
    for (int i = 0; i < n; i++) {
        cf_knob_desc d;
        if (cf_knob_info(i, &d) != CF_OK) {
            Py_DECREF(out);
            return cf_py_raise(cf_last_status(), "knobs");
        }
        PyObject *row;
        if (d.is_text)
            row = Py_BuildValue("{s:s,s:s,s:z,s:s}", "name", d.name, "kind", "text", "text",
                                d.text, "doc", d.doc);
        else
            row = Py_BuildValue("{s:s,s:s,s:z,s:l,s:l,s:l,s:l,s:s}", "name", d.name, "kind",
                                d.rule == 1 ? "power of two" : d.rule == 2 ? "multiple of 32"
                                                                           : "int",
                                "text", d.text, "value", d.value, "default",
                                d.default_value, "lowest", d.lowest, "highest", d.highest, "doc",
                                d.doc);
        if (!row) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, row);
    }
    return out;
}

static PyObject *py_dtype_info(PyObject *self, PyObject *arg)
{
    cf_dtype dt;
    char ts[8];
    if (cf_py_dtype_from_object(arg, &dt, NULL, "dtype") < 0)
        return NULL;
    cf_dtype_typestr(dt, ts);
    return Py_BuildValue("{s:i,s:s,s:s,s:n,s:s}", "code", (int)dt, "name", cf_dtype_name(dt),
                         "ctype", cf_dtype_ctype(dt), "itemsize", (Py_ssize_t)cf_dtype_size(dt),
                         "typestr", ts);
}

static PyMethodDef core_methods[] = {
    {"status_name", py_status_name, METH_O, "status_name(code) -> the C name of a cf_status."},
    {"_raise_status", py_raise_status, METH_VARARGS,
     "_raise_status(code, message): raise the exception a cf_status maps to (for tests)."},
    {"_test_fail_alloc_after", py_test_fail_alloc_after, METH_VARARGS,
     "_test_fail_alloc_after(n, sticky=False): make the n-th host allocation of the C core fail "
     "(0 turns it off). For tests only."},
    {"_test_alloc_outstanding", py_test_alloc_outstanding, METH_NOARGS,
     "Host allocations of the C core not yet freed (for leak tests)."},
    {"_test_control", py_test_control, METH_VARARGS,
     "_test_control(name, value): set a test hook of the C core ('cache_write_pause': a path, or "
     "None). For tests only."},
    {"knobs", py_knobs, METH_NOARGS,
     "knobs() -> [dict]: every CUFUNC_* environment variable cufunc reads: name, kind ('int', 'power of two', "
     "'multiple of 32' or 'text'), the text as set (or None), and for integers the value in effect, the default and "
     "the bounds; doc says what it changes."},
    {"dtype_info", py_dtype_info, METH_O,
     "dtype_info(dtype) -> dict(code, name, ctype, itemsize, typestr) of a supported dtype."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    "cufunc._core",
    "The C core of cufunc: devices, streams, device arrays, compilation and kernels.",
    -1,
    core_methods,
};

static int add_status_codes(PyObject *m)
{
    static const struct { const char *name; int value; } codes[] = {
        {"CF_OK", CF_OK}, {"CF_ERR_INVALID", CF_ERR_INVALID}, {"CF_ERR_TYPE", CF_ERR_TYPE},
        {"CF_ERR_NOMEM", CF_ERR_NOMEM}, {"CF_ERR_DEVICE_NOMEM", CF_ERR_DEVICE_NOMEM},
        {"CF_ERR_NO_DRIVER", CF_ERR_NO_DRIVER}, {"CF_ERR_NO_DEVICE", CF_ERR_NO_DEVICE},
        {"CF_ERR_NO_NVRTC", CF_ERR_NO_NVRTC}, {"CF_ERR_COMPILE", CF_ERR_COMPILE},
        {"CF_ERR_CUDA", CF_ERR_CUDA}, {"CF_ERR_FORK", CF_ERR_FORK}, {"CF_ERR_IO", CF_ERR_IO},
        {"CF_ERR_UNSUPPORTED", CF_ERR_UNSUPPORTED}, {"CF_ERR_RANGE", CF_ERR_RANGE},
        {"CF_ERR_ASSERT", CF_ERR_ASSERT},
    };
    size_t i;
    for (i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (PyModule_AddIntConstant(m, codes[i].name, codes[i].value) < 0)
            return -1;
    if (PyModule_AddIntConstant(m, "MAX_DIMS", CF_MAX_DIMS) < 0 ||
        PyModule_AddStringConstant(m, "__version__", CUFUNC_VERSION_STRING) < 0)
        return -1;
    return 0;
}

/* The parts of the module: each C file contributes functions and/or an init that readies and adds
 * its types. Adding a subsystem is one line here (and its header in include/). Order matters
 * where one init completes another's type: streams before graphs (Stream's capture methods), the
 * DeviceArray type after everything that contributes to it. */
static const struct {
    PyMethodDef *methods;
    int (*init)(PyObject *m);
} parts[] = {
    {cf_py_hooks_methods, NULL},
    {cf_py_device_methods, cf_py_device_init_module},
    {cf_py_stream_methods, cf_py_stream_init_module},
    {cf_py_capturing_methods, NULL},
    {NULL, cf_py_graph_init_module},
    {cf_py_memory_methods, cf_py_memory_init_module},
    {cf_py_devicearray_methods, NULL},
    {cf_py_copy_methods, NULL},
    {cf_py_foreign_methods, NULL},
    {cf_py_ipc_methods, NULL},
    {cf_py_dlpack_methods, NULL},
    {NULL, cf_py_devicearray_type_init_module},
    {cf_py_compile_methods, cf_py_compile_init_module},
    {cf_py_ufunc_methods, cf_py_ufunc_init_module},
    {cf_py_signature_methods, NULL},
    {cf_py_reduce_methods, cf_py_reduce_init_module},
    {cf_py_gufunc_methods, cf_py_gufunc_init_module},
    {cf_py_call_methods, NULL},
    {cf_py_interop_methods, NULL},
    {cf_py_at_methods, NULL},
    {cf_py_loops_methods, NULL},
};

PyMODINIT_FUNC PyInit__core(void)
{
    PyObject *m;
    size_t i;
    if (cf_py_import_numpy() < 0)
        return NULL;
    m = PyModule_Create(&core_module);
    if (m == NULL)
        return NULL;
    if (add_status_codes(m) < 0)
        goto fail;
    for (i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (parts[i].methods != NULL && PyModule_AddFunctions(m, parts[i].methods) < 0)
            goto fail;
        if (parts[i].init != NULL && parts[i].init(m) < 0)
            goto fail;
    }
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
