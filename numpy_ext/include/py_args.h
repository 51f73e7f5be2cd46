/* py_args.h: the arguments of ufunc and gufunc calls (py_ufunc.c, py_gufunc.c): what each one is
 * (a device array, a host array, a scalar), NEP 50 weak Python scalars as kernel parameters,
 * host arrays moved to the device, inputs copied when they overlap an output. */
#ifndef CF_PY_ARGS_H
#define CF_PY_ARGS_H

#include "py_common.h"
#include "py_foreign.h"
#include "py_stream.h"

/* NONE: an output the caller did not give */
enum { CF_PY_ARG_NONE = -1, CF_PY_ARG_DEVICE = 0, CF_PY_ARG_HOST = 1, CF_PY_ARG_SCALAR = 2 };

typedef struct {
    int kind;              /* CF_PY_ARG_* */
    cf_array view;         /* device: the view; host: shape/strides/dtype of the ndarray */
    PyObject *keep;        /* keeps the memory alive: the device owner, or the host ndarray */
    cf_dtype dtype;
    int weak;              /* a Python int/float/complex (NEP 50) */
    int pyscalar;          /* a Python int/float/complex, weak or made strong by cf_py_args_nep50:
                            * its value converts to the loop's type directly, as NumPy converts it
                            * (2**63 + 2.0 is float64, never an int64 on the way) */
    PyObject *value;       /* scalars: the object (borrowed from the call, or `keep`) */
} cf_py_arg;

/* Start an argument for `obj` without clearing its (large) view. */
void cf_py_arg_reset(cf_py_arg *a, PyObject *obj);
/* Release what the argument holds. */
void cf_py_arg_clear(cf_py_arg *a);
/* What `obj` is: a DeviceArray or __cuda_array_interface__ object (a device view), a NumPy or
 * Python scalar (NumPy scalars and 0-d arrays strong, Python int/float/complex weak, bool strong),
 * a __dlpack__ object (imported as a device view), or anything np.asarray takes (a host array).
 * Needs no GPU except for foreign device objects. `argname` names it in errors. */
int cf_py_arg_classify(PyObject *obj, cf_py_arg *a, const char *argname);
/* Make `a` the host view of ndarray `arr` (kind CF_PY_ARG_HOST; `keep` is left as it is). */
void cf_py_arg_host_view(cf_py_arg *a, PyArrayObject *arr);
/* The kernel parameter of scalar argument `a` for loop type `t`: a Python scalar converted to `t`
 * (a Python int that does not fit an integer `t` is NumPy's OverflowError), a strong one as its
 * own dtype. `fname` and `pos` name the call in errors. */
int cf_py_arg_scalar(const cf_py_arg *a, cf_dtype t, cf_operand *op, const char *fname, int pos);
/* Move a host argument to a new C-contiguous device array of dtype `as` (converted on the host
 * when it differs), on `stream` / `s`; the argument becomes that device view. */
int cf_py_arg_upload(cf_py_arg *a, cf_dtype as, int device, PyObject *stream, cf_stream *s);
/* Replace a device argument by a contiguous copy of it (an input that shares memory with an
 * output is copied first, as NumPy does: cf_array_needs_copy in cufunc/array.h decides). */
int cf_py_arg_copy(cf_py_arg *a, int device, PyObject *stream);
/* Order a call on stream `s` (of resolved stream `resolved`, on `device`) after the work that
 * produced its device operands: each device input, `extra` (a read operand such as where=; may be
 * NULL), and each device output (which is written, so later work waits for this call). Call it
 * once the stream is resolved and the operands' devices are checked, before anything is queued
 * that reads them (an overlap copy included). No driver call when every operand was last written
 * on `resolved`, or on a stream CUDA orders with it. */
int cf_py_args_order(cf_py_arg *in, int nin, cf_py_arg *out, int nout, const cf_py_arg *extra,
                     int device, PyObject *resolved, cf_stream *s);
/* The same for the ufunc fast path: DeviceArrays, nin inputs then outputs up to n, on the legacy
 * default stream `s` of their device. */
int cf_py_arrays_order(const CfPyDeviceArray *const *arr, int nin, int n, cf_stream *s);
/* Before the host pipeline reads host inputs with the CPU: wait for the work queued so far on the
 * legacy default stream of `device` and, through it, on every blocking stream (an asynchronous
 * copy_to_host into pinned memory on a cuda.stream() may still be writing an input). */
int cf_py_host_inputs_ready(int device);

/* The n positional arguments of a (g)ufunc call (a tuple's items or a vectorcall's array): nin
 * inputs, then up to nout outputs (the rest of outs[] is left as it is). TypeError with NumPy's
 * wording otherwise; `prefix` is put before the name in it ("outer of "). */
int cf_py_call_positional(PyObject *const *args, Py_ssize_t n, int nin, int nout, const char *prefix,
                          const char *name, PyObject **inputs, PyObject **outs);
/* The out= keyword: one array (nout == 1) or a tuple of nout; `npos` positional arguments were
 * given (outputs among them are an error with out=). `what` is "ufunc" or "gufunc". */
int cf_py_call_out(PyObject *value, Py_ssize_t npos, int nin, int nout, const char *what,
                   const char *name, PyObject **outs);

/* ---- NEP 50 ---- */

/* NumPy's rule for which of a call's n inputs stay weak (cf_py_arg_classify makes every Python
 * int/float/complex weak): with no typed input, Python scalars are their default types (int64,
 * float64, complex128; np.add(2.0, 3.0) is float64); beside typed inputs of a lower kind as well
 * (an int8 array + 2.0 is float64), except a complex beside floats. The rest stay weak: they take
 * the typed inputs' precision (a float32 array + 2.0 is float32). Call it after classifying the
 * inputs and before resolving the loop, in every engine. */
void cf_py_args_nep50(cf_py_arg *in, int n);

/* Numba's rule instead (cufunc.numba's functions, numba-cuda's ufunc mechanism): every Python
 * scalar and NumPy number scalar is a scalar, marked weak (the loop search's "scalar" flag under
 * CF_LOOP_RULE_NUMBA), with its own dtype (int64, float64, complex128, bool; a NumPy scalar's);
 * its value is converted to the loop's type as Numba converts it (np.array([v], dtype)). 0-d
 * arrays and np.bool_ are arrays to Numba: strong. */
void cf_py_args_numba(cf_py_arg *in, int n);

#endif
