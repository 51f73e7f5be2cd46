/* py_ipc.h: CUDA IPC of DeviceArrays (py_ipc.c) */
#ifndef CF_PY_IPC_H
#define CF_PY_IPC_H

#include "py_devicearray.h"

/* devicearray_ipc_export, ipc_open */
extern PyMethodDef cf_py_ipc_methods[];

#endif
