/* py_capture.h: device arrays captured by a loop (a vectorize, guvectorize or cuda.reduce body
 * that reads a global device array), as the add_loop entry points of UFunc, GUFunc and Reducer
 * take them: one reading shared by py_ufunc.c, py_gufunc.c and py_reduce.c.
 *
 * Python form: a sequence of (symbol, array) or (symbol, array, label): `symbol` names the
 * `extern "C"` cf_array_ref<T, ND> variable the loop's source declares, `array` is a DeviceArray
 * or any __cuda_array_interface__ object, `label` is what error messages call it. C form: one
 * cf_module_global (compile.h) per capture, its value the array's cf_array_ref (cf_array_ref_pack)
 * and its device the array's, which the engines write into each kernel module of the loop when
 * they load it. */
#ifndef CF_PY_CAPTURE_H
#define CF_PY_CAPTURE_H

#include "py_common.h"

typedef struct {
    int n;
    cf_module_global *globals; /* n entries; names and labels point into `items` */
    unsigned char *values;     /* n * CF_ARRAY_REF_MAX_BYTES: the globals' bytes */
    PyObject *items;           /* a tuple of (symbol, array, label) tuples: whoever keeps the loop
                                * keeps this, and with it the arrays the kernels read */
} cf_py_captures;

/* Read `seq` (NULL or None: no captures) into `c`. TypeError / ValueError naming `what` and the
 * capture for a malformed entry or an object that is no device array, checked before the GPU is
 * needed (it is, to find a foreign array's device). On failure `c` holds nothing. */
int cf_py_captures_read(PyObject *seq, cf_py_captures *c, const char *what);
/* Release what `c` holds (no-op on a zeroed one). */
void cf_py_captures_clear(cf_py_captures *c);

#endif
