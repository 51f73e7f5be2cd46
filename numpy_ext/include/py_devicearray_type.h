/* py_devicearray_type.h: the DeviceArray type completed and readied (py_devicearray_type.c) */
#ifndef CF_PY_DEVICEARRAY_TYPE_H
#define CF_PY_DEVICEARRAY_TYPE_H

#include "py_common.h"

int cf_py_devicearray_type_init_module(PyObject *m);

#endif
