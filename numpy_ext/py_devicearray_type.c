/* py_devicearray_type.c: the DeviceArray type completed at module init. py_devicearray.c defines
 * the type and its own methods and attributes; the files above it contribute theirs: copies and
 * indexing (py_copy.c: methods, the mapping and sequence protocols), DLPack (py_dlpack.c),
 * NumPy's operators and __array_ufunc__ through the GPU twins (py_twins.c), and the methods
 * written in Python (cufunc/_devarray.py: view, split, squeeze, get_ipc_handle; hooks the package
 * registers), joined here into one method table before the type is readied. */
#include "py_devicearray_type.h"
#include "py_copy.h"
#include "py_devicearray.h"
#include "py_dlpack.h"
#include "py_hooks.h"
#include "py_twins.h"

#include <string.h>

/* Methods written in Python (cufunc/_devarray.py, over devicearray_view and the IPC helpers):
 * hooks the package registers (py_hooks.h). */
static PyObject *call_py_method(cf_py_hook_id hook, PyObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *fn = cf_py_hook(hook), *full, *r;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (fn == NULL)
        return NULL;
    Py_INCREF(fn);
    full = PyTuple_New(n + 1);
    if (full == NULL) {
        Py_DECREF(fn);
        return NULL;
    }
    PyTuple_SET_ITEM(full, 0, Py_NewRef(self));
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(full, i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    r = PyObject_Call(fn, full, kwargs);
    Py_DECREF(full);
    Py_DECREF(fn);
    return r;
}

#define CF_DA_PY_METHOD(name)                                                                      \
    static PyObject *da_py_##name(PyObject *self, PyObject *args, PyObject *kwargs)                \
    {                                                                                              \
        return call_py_method(CF_PY_HOOK_devarray_##name, self, args, kwargs);                     \
    }
CF_DA_PY_METHOD(view)
CF_DA_PY_METHOD(split)
CF_DA_PY_METHOD(squeeze)
CF_DA_PY_METHOD(get_ipc_handle)
#undef CF_DA_PY_METHOD

static PyMethodDef python_methods[] = {
    {"view", (PyCFunction)(void (*)(void))da_py_view, METH_VARARGS | METH_KEYWORDS,
     "view($self, /, dtype)\n"
     "--\n"
     "\n"
     "Give a view of the same memory as another dtype, without a copy.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "dtype : dtype_like\n"
     "    The new dtype; the last axis is rescaled as Numba does.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "DeviceNDArray\n"
     "    The view.\n"},
    {"split", (PyCFunction)(void (*)(void))da_py_split, METH_VARARGS | METH_KEYWORDS,
     "split($self, /, section, stream=0)\n"
     "--\n"
     "\n"
     "Split a 1-d array into views of ``section`` elements.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "section : int\n"
     "    The number of elements of each view (the last may be shorter).\n"
     "stream : Stream or int, optional\n"
     "    The stream of the views.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "iterator of DeviceNDArray\n"
     "    The views, in order.\n"},
    {"squeeze", (PyCFunction)(void (*)(void))da_py_squeeze, METH_VARARGS | METH_KEYWORDS,
     "squeeze($self, /, axis=None, stream=0)\n"
     "--\n"
     "\n"
     "Give a view without the axes of extent 1.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "axis : int or tuple of int, optional\n"
     "    The axes to remove (each must have extent 1); all of extent 1 when not given.\n"
     "stream : Stream or int, optional\n"
     "    The stream of the view.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "DeviceNDArray\n"
     "    The view.\n"},
    {"get_ipc_handle", (PyCFunction)(void (*)(void))da_py_get_ipc_handle,
     METH_VARARGS | METH_KEYWORDS,
     "get_ipc_handle($self, /)\n"
     "--\n"
     "\n"
     "Export the array's memory for another process (CUDA IPC).\n"
     "\n"
     "Returns\n"
     "-------\n"
     "IpcArrayHandle\n"
     "    A picklable handle; another process opens it to use this memory.\n"},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef twins_methods[] = {
    CF_PY_TWINS_METHODS,
    {NULL, NULL, 0, NULL},
};

static size_t table_len(const PyMethodDef *t)
{
    size_t n = 0;
    while (t[n].ml_name != NULL)
        n++;
    return n;
}

int cf_py_devicearray_type_init_module(PyObject *m)
{
    const PyMethodDef *parts[] = {cf_py_devicearray_array_methods, cf_py_copy_array_methods,
                                  cf_py_dlpack_array_methods, twins_methods, python_methods};
    static PyMethodDef *methods; /* lives as long as the type: the process */
    size_t n = 0, k = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        n += table_len(parts[i]);
    if (methods == NULL) {
        methods = PyMem_Calloc(n + 1, sizeof(PyMethodDef));
        if (methods == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
            size_t len = table_len(parts[i]);
            memcpy(methods + k, parts[i], len * sizeof(PyMethodDef));
            k += len;
        }
    }
    CfPyDeviceArray_Type.tp_methods = methods;
    CfPyDeviceArray_Type.tp_as_mapping = &cf_py_devicearray_as_mapping;
    CfPyDeviceArray_Type.tp_as_sequence = &cf_py_devicearray_as_sequence;
    /* operators and comparisons through the GPU twins of NumPy's ufuncs; == stays element-wise */
    CfPyDeviceArray_Type.tp_as_number = &cf_py_twins_as_number;
    CfPyDeviceArray_Type.tp_richcompare = cf_py_twins_richcompare;
    if (PyType_Ready(&CfPyDeviceArray_Type) < 0)
        return -1;
    Py_INCREF(&CfPyDeviceArray_Type);
    if (PyModule_AddObject(m, "DeviceArray", (PyObject *)&CfPyDeviceArray_Type) < 0) {
        Py_DECREF(&CfPyDeviceArray_Type);
        return -1;
    }
    return 0;
}
