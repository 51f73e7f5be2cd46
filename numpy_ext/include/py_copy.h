/* py_copy.h: the bytes of DeviceArrays moved (py_copy.c): copies between host and device,
 * indexing */
#ifndef CF_PY_COPY_H
#define CF_PY_COPY_H

#include "py_devicearray.h"

/* copy_to_host, copy_to_device, __array__; the mapping and sequence protocols (indexing): joined
 * to the type by py_devicearray_type.c. */
extern PyMethodDef cf_py_copy_array_methods[];
extern PyMappingMethods cf_py_devicearray_as_mapping;
extern PySequenceMethods cf_py_devicearray_as_sequence;
/* device_array, device_array_like, to_device */
extern PyMethodDef cf_py_copy_methods[];

#endif
