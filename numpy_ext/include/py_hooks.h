/* py_hooks.h: the objects of the Python package cufunc that the binding calls (py_hooks.c). The
 * package registers them when it is imported (_core._register_hooks, _register_lazy_hooks); the
 * binding never imports a module of the package by name. */
#ifndef CF_PY_HOOKS_H
#define CF_PY_HOOKS_H

#include "py_common.h"

/* Every hook, by the keyword the package registers it under:
 *   the classes of cufunc.errors the binding raises (registered by cufunc/_env.py right after
 *   it imports _core, before any other call of the extension);
 *   the methods of DeviceArray written in Python (cufunc/_devarray.py);
 *   the type rules of foreign arrays (cufunc/_interop.py: wrapper_for, reader_for, the output
 *   type setting: its ContextVar and the one-element list of the process-wide code);
 *   NumPy's operators on DeviceArrays (cufunc/_twins.py: the tuple _hooks in py_twins.c's order,
 *   the dict _FAST of calls resolved before, _hook_ufuncs: the ufunc of each hook);
 *   dask arrays (cufunc/_dask.py: array_ufunc, reduce_all).
 * cufunc/__init__.py registers all but the classes; those of _devarray, _twins and _dask lazily
 * (a function that imports the module, called on first need: _dask imports dask). */
#define CF_PY_HOOKS(X)                                                                             \
    X(CudaSupportError)                                                                            \
    X(CudaAPIError)                                                                                \
    X(CompileError)                                                                                \
    X(DeviceAssertionError)                                                                        \
    X(GraphCaptureError)                                                                           \
    X(SignatureError)                                                                              \
    X(devarray_view)                                                                               \
    X(devarray_split)                                                                              \
    X(devarray_squeeze)                                                                            \
    X(devarray_get_ipc_handle)                                                                     \
    X(interop_wrapper_for)                                                                         \
    X(interop_reader_for)                                                                          \
    X(interop_output_type)                                                                         \
    X(interop_global_output_type)                                                                  \
    X(twins_hooks)                                                                                 \
    X(twins_fast)                                                                                  \
    X(twins_hook_ufuncs)                                                                           \
    X(dask_array_ufunc)                                                                            \
    X(dask_reduce_all)

typedef enum {
#define CF_PY_HOOK_ID(name) CF_PY_HOOK_##name,
    CF_PY_HOOKS(CF_PY_HOOK_ID)
#undef CF_PY_HOOK_ID
    CF_PY_HOOK_COUNT
} cf_py_hook_id;

/* The object registered for hook `id` (borrowed: the registry keeps it, and every object it ever
 * held, until exit). A lazy hook's loader is called the first time. NULL with RuntimeError naming
 * the hook when the package registered none (the extension loaded without its package), or with
 * the loader's exception. */
PyObject *cf_py_hook(cf_py_hook_id id);

/* _register_hooks, _register_lazy_hooks */
extern PyMethodDef cf_py_hooks_methods[];

#endif
