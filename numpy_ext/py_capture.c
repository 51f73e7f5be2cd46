/* py_capture.c: see py_capture.h. */
#include "py_capture.h"
#include "py_foreign.h"

void cf_py_captures_clear(cf_py_captures *c)
{
    PyMem_Free(c->globals);
    PyMem_Free(c->values);
    Py_CLEAR(c->items);
    memset(c, 0, sizeof *c);
}

/* Entry i as (symbol, array, label), checked without the GPU; a new reference. */
static PyObject *normalise(PyObject *entry, Py_ssize_t i, const char *what)
{
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) < 2 || PyTuple_GET_SIZE(entry) > 3) {
        PyErr_Format(PyExc_TypeError, "%s: capture %zd must be a tuple (symbol, array[, label]), "
                     "not %.200R", what, i, entry);
        return NULL;
    }
    PyObject *symbol = PyTuple_GET_ITEM(entry, 0), *array = PyTuple_GET_ITEM(entry, 1);
    PyObject *label = PyTuple_GET_SIZE(entry) == 3 ? PyTuple_GET_ITEM(entry, 2) : symbol;
    if (!PyUnicode_Check(symbol) || PyUnicode_GET_LENGTH(symbol) == 0 || !PyUnicode_Check(label)) {
        PyErr_Format(PyExc_TypeError, "%s: capture %zd: the symbol and the label must be "
                     "non-empty str", what, i);
        return NULL;
    }
    if (!cf_py_is_device_object(array)) {
        PyErr_Format(PyExc_TypeError, "%s: %U must be a device array (a cufunc DeviceArray or an "
                     "object with __cuda_array_interface__), not %.200s", what, label,
                     Py_TYPE(array)->tp_name);
        return NULL;
    }
    return PyTuple_Pack(3, symbol, array, label);
}

int cf_py_captures_read(PyObject *seq, cf_py_captures *c, const char *what)
{
    memset(c, 0, sizeof *c);
    if (seq == NULL || seq == Py_None)
        return 0;
    PyObject *fast = PySequence_Fast(seq, "captures must be a sequence of (symbol, array, label)");
    if (fast == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > 4096) {
        PyErr_Format(PyExc_ValueError, "%s: %zd captures is too many", what, n);
        goto fail;
    }
    if ((c->items = PyTuple_New(n)) == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = normalise(PySequence_Fast_GET_ITEM(fast, i), i, what);
        if (t == NULL)
            goto fail;
        PyTuple_SET_ITEM(c->items, i, t);
    }
    Py_CLEAR(fast);
    if (n == 0)
        return 0;
    c->globals = PyMem_Calloc((size_t)n, sizeof *c->globals);
    c->values = PyMem_Calloc((size_t)n, CF_ARRAY_REF_MAX_BYTES);
    if (c->globals == NULL || c->values == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(c->items, i);
        const char *symbol = PyUnicode_AsUTF8(PyTuple_GET_ITEM(t, 0));
        const char *label = PyUnicode_AsUTF8(PyTuple_GET_ITEM(t, 2));
        if (symbol == NULL || label == NULL)
            goto fail;
        cf_array view;
        PyObject *keep = NULL;
        /* sync: the producer's stream (CAI v3) is waited for once, as any consumer does */
        if (cf_py_device_view(PyTuple_GET_ITEM(t, 1), &view, &keep, 1, label) < 0)
            goto fail;
        cf_py_devicearray_mark_exposed(PyTuple_GET_ITEM(t, 1)); /* the kernel keeps the address */
        Py_DECREF(keep); /* the array itself is kept by `items` */
        unsigned char *value = c->values + (size_t)i * CF_ARRAY_REF_MAX_BYTES;
        cf_module_global *g = &c->globals[i];
        cf_status st = cf_array_ref_pack(&view, value, CF_ARRAY_REF_MAX_BYTES, &g->size);
        if (st != CF_OK) {
            cf_py_fail(st, what);
            goto fail;
        }
        g->name = symbol;
        g->label = label;
        g->bytes = value;
        g->device = view.device;
        c->n = (int)i + 1;
    }
    return 0;
fail:
    Py_XDECREF(fast);
    cf_py_captures_clear(c);
    return -1;
}
