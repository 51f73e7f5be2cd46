/* py_hooks.c: the one place where the binding keeps the objects of its Python package that it
 * calls: the exception classes of cufunc.errors and functions written in Python (DeviceArray's
 * Python methods, the foreign-array type rules, NumPy's operators through the twins, dask
 * arrays). The package registers them when it is imported; the binding asks for them by a
 * number (cf_py_hook) and never imports a module of the package by name, so the package's import
 * graph (tools/check_cycles.py --python) is all there is, and the package decides what is loaded
 * when: a lazy hook is a loader, a function of no arguments called on first need (so cufunc._dask,
 * which imports dask, is loaded only once a dask array reaches a cufunc function). The bottom of
 * the binding: it calls no other file of numpy_ext. */
#include "py_hooks.h"

static const char *const hook_names[CF_PY_HOOK_COUNT] = {
#define CF_PY_HOOK_NAME(name) #name,
    CF_PY_HOOKS(CF_PY_HOOK_NAME)
#undef CF_PY_HOOK_NAME
};

/* Per hook, strong references: its object, or (a lazy hook not needed yet) its loader. */
static PyObject *objects[CF_PY_HOOK_COUNT];
static PyObject *loaders[CF_PY_HOOK_COUNT];
/* Objects a later registration replaced: kept until exit, since callers hold hooks borrowed
 * (a re-import of the package registers its new objects). */
static PyObject *replaced;

/* A lazy hook's first use: its loader called, its answer kept. */
static PyObject *load(cf_py_hook_id id)
{
    PyObject *loader = loaders[id];
    if (loader == NULL)
        return PyErr_Format(PyExc_RuntimeError,
                            "cufunc._core: the hook '%s' is not registered (the package cufunc "
                            "registers the objects its extension calls when it is imported: "
                            "import cufunc, not the extension alone)",
                            hook_names[id]);
    Py_INCREF(loader);
    PyObject *obj = PyObject_CallNoArgs(loader);
    Py_DECREF(loader);
    if (obj == NULL)
        return NULL;
    if (objects[id] != NULL) { /* loaded meanwhile: the loader's import let another thread run */
        Py_DECREF(obj);
        return objects[id];
    }
    objects[id] = obj;
    Py_CLEAR(loaders[id]);
    return obj;
}

PyObject *cf_py_hook(cf_py_hook_id id)
{
    PyObject *obj = objects[id];
    return obj != NULL ? obj : load(id);
}

static int hook_id(PyObject *key, const char *fn)
{
    const char *name = PyUnicode_AsUTF8(key);
    if (name == NULL)
        return -1;
    for (int i = 0; i < CF_PY_HOOK_COUNT; i++)
        if (strcmp(name, hook_names[i]) == 0)
            return i;
    PyErr_Format(PyExc_TypeError, "%s: no hook named '%s' (py_hooks.h lists them)", fn, name);
    return -1;
}

/* Every keyword checked before any is stored: a bad call changes nothing. */
static PyObject *register_all(PyObject *args, PyObject *kwargs, int lazy)
{
    const char *fn = lazy ? "_register_lazy_hooks" : "_register_hooks";
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    if (PyTuple_GET_SIZE(args) != 0)
        return PyErr_Format(PyExc_TypeError, "%s: the hooks are keyword arguments", fn);
    if (kwargs == NULL)
        Py_RETURN_NONE;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
        if (hook_id(key, fn) < 0)
            return NULL;
        if (lazy && !PyCallable_Check(value))
            return PyErr_Format(PyExc_TypeError, "%s: the loader of '%U' is not callable", fn,
                                key);
    }
    if (replaced == NULL && (replaced = PyList_New(0)) == NULL)
        return NULL;
    pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
        int id = hook_id(key, fn);
        if (objects[id] != NULL && PyList_Append(replaced, objects[id]) < 0)
            return NULL;
        Py_CLEAR(objects[id]);
        Py_CLEAR(loaders[id]);
        if (lazy)
            loaders[id] = Py_NewRef(value);
        else
            objects[id] = Py_NewRef(value);
    }
    Py_RETURN_NONE;
}

static PyObject *py_register_hooks(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return register_all(args, kwargs, 0);
}

static PyObject *py_register_lazy_hooks(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return register_all(args, kwargs, 1);
}

PyMethodDef cf_py_hooks_methods[] = {
    {"_register_hooks", (PyCFunction)(void (*)(void))py_register_hooks,
     METH_VARARGS | METH_KEYWORDS,
     "_register_hooks($module, /, **hooks)\n"
     "--\n"
     "\n"
     "Register objects of the package the extension calls, by hook name (numpy_ext/include/"
     "py_hooks.h lists them); a hook registered again is replaced. The package does this when "
     "imported."},
    {"_register_lazy_hooks", (PyCFunction)(void (*)(void))py_register_lazy_hooks,
     METH_VARARGS | METH_KEYWORDS,
     "_register_lazy_hooks($module, /, **loaders)\n"
     "--\n"
     "\n"
     "Register hooks by their loaders: functions of no arguments that return the hook's object, "
     "called the first time the extension needs it (modules loaded only when used)."},
    {NULL, NULL, 0, NULL},
};
