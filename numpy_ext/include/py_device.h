/* py_device.h: devices, contexts and pinned host memory (py_device.c) */
#ifndef CF_PY_DEVICE_H
#define CF_PY_DEVICE_H

#include "py_common.h"

int cf_py_device_init_module(PyObject *m);
extern PyMethodDef cf_py_device_methods[];

#endif
