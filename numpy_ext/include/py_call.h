/* py_call.h: the one call pipeline of cufunc._core (py_call.c). Every kernel call from Python goes
 * through it: a ufunc call and its outer (py_ufunc.c), a gufunc call (py_gufunc.c), UFunc.reduce,
 * UFunc.accumulate and cuda.reduce (py_reduce.c). Its steps, in order (cf_py_call_run):
 *
 *   1. classify  the operands: host array, cufunc or foreign device array, scalar (engine hook
 *                `prepare`, with cf_py_arg_classify and cf_py_call_classify_out)
 *   2. resolve   the loop; casting checks; scalars as kernel parameters      (hook `prepare`)
 *   3. plan      broadcast, bind core dimensions, reduced axes               (hook `prepare`)
 *      -- everything above needs no GPU; bad input is reported as such without one --
 *   4. place     the device (of the device operands, else the stream's, else the current one)
 *                and the stream; device operands on another device are refused
 *   5. move      host inputs to the device; or hand the whole call to a placement strategy for
 *                large host arrays (hook `host_strategy`: the chunked host pipeline)
 *   6. outputs   given device arrays as they are; the rest allocated (hook `alloc_out`)
 *   7. order     after the work that produced the device operands (cf_py_args_order)
 *   8. overlap   inputs that share memory with an output are copied first (cf_array_needs_copy)
 *   9. launch    (hook `launch`)
 *  10. deliver   the return value, in one place (cf_py_call_deliver)
 *
 * The ufunc fast path (py_ufunc.c: ufunc_fast and the replay of CfPyUFunc.last) is a short-cut
 * taken before step 1 for repeated calls on DeviceArrays with outputs given; it returns its
 * results through cf_py_pack_results, as the pipeline does. */
#ifndef CF_PY_CALL_H
#define CF_PY_CALL_H

#include "py_args.h"
#include "py_capturing.h"
#include "py_devicearray.h"
#include "py_foreign.h"
#include "py_interop.h"
#include "py_stream.h"

/* The most inputs, and the most outputs, of one call. */
#define CF_PY_MAX_ARGS 32

/* "argument 3", "out 1": names for messages, made once (formatting them on every call showed up
 * as a quarter of the per-call time of small calls). */
const char *cf_py_arg_name(int i);
const char *cf_py_out_name(int o);

/* ---- step 4: the device and the stream ------------------------------------------------------ */

typedef struct {
    int device;
    PyObject *resolved;   /* owned: a Stream, or None for the legacy default stream */
    PyObject *for_arrays; /* borrowed: `resolved`, or NULL for None (what DeviceArrays record) */
    cf_stream *s;         /* borrowed: the stream work is queued on */
    int capturing;        /* s captures a CUDA graph (py_graph.c): nothing may synchronise */
} cf_py_place;

/* Resolve the call's device and stream: `device` is the device of its device operands, or -1 for
 * the stream's own device, else the current device. `stream` is the stream= argument (NULL: not
 * given). The stream argument is checked before the GPU is touched. */
int cf_py_place_resolve(cf_py_place *pl, int device, PyObject *stream, const char *what);
void cf_py_place_clear(cf_py_place *pl);

/* ---- the call's state ----------------------------------------------------------------------- */

typedef struct cf_py_call cf_py_call;

/* What an engine supplies: only what differs between them. */
typedef struct {
    /* Steps 1-3 (no GPU): classify the operands into c->in/out/where and set c->any_device,
     * any_host, host_out, host_result; resolve the loop, check casts, plan. May finish the call
     * by setting c->result (an early answer, such as cuda.reduce of an empty array). */
    int (*prepare)(cf_py_call *c);
    /* Optional, step 5, on calls with no device operand: a placement strategy that takes the
     * whole call. 1: done (c->result set), 0: not taken (the pipeline moves inputs as usual), -1:
     * an exception. */
    int (*host_strategy)(cf_py_call *c);
    /* Optional: the dtype host input i moves over in (NULL: its own). */
    cf_dtype (*move_as)(const cf_py_call *c, int i);
    /* Step 6: a new device array for output o, which is not given on the device (new reference;
     * it may also fill it, e.g. from a host out=). NULL hook: such outputs are left to the
     * launch (cuda.reduce's one-element result). */
    PyObject *(*alloc_out)(cf_py_call *c, int o);
    /* Optional: the dtype and shape of fresh output o as alloc_out would make it. With it, a
     * call on host operands whose outputs are all empty answers with empty NumPy arrays and
     * never touches the GPU (cf_py_call_run): Dask infers a function's result type by calling
     * it on zero-size arrays, also on machines without a GPU. 0 or -1. */
    int (*out_shape)(cf_py_call *c, int o, cf_dtype *dt, int *ndim, int64_t *shape);
    /* Step 8: 1 or 0 is cf_array_needs_copy's in_place_ok (whether the same view is safe in
     * place); -1: the engine copies overlapping inputs itself (the gufunc engine, on the GPU). */
    int in_place_ok;
    /* Step 6: 1 when fresh outputs may come from the caller's array library instead of
     * alloc_out (cf_py_lib_alloc_*: out_shape gives their dtype and shape, C-contiguous, nothing
     * written before the launch): the element-wise engine. */
    int lib_results;
    /* Step 9. May set c->result itself (then step 10 is skipped). */
    int (*launch)(cf_py_call *c);
    /* Optional, step 10: the caller's view of fresh result o (a DeviceArray when !host, else the
     * NumPy array copied back); takes over the reference to `value`. The gufunc undoes axes=. */
    PyObject *(*present)(cf_py_call *c, int o, PyObject *value, int host);
} cf_py_engine;

struct cf_py_call {
    const cf_py_engine *engine;
    void *self;           /* the called object (CfPyUFunc, CfPyGUFunc, CfPyReducer) */
    void *state;          /* the engine's own state (its loop, plan, kernel operands) */
    const char *name;     /* the function's name */
    const char *kind;     /* "ufunc", "gufunc": messages say "ufunc 'add': ..."; NULL: "add: ..." */
    int nin, nout;
    const char *const *in_names;  /* operand names in device messages (NULL: "argument 1"...) */
    const char *const *out_names; /* (NULL: "out 0"...) */
    PyObject *stream;     /* the stream= argument, or NULL */
    PyObject *outs[CF_PY_MAX_ARGS]; /* the caller's outputs (borrowed), NULL where not given */
    cf_py_arg in[CF_PY_MAX_ARGS], out[CF_PY_MAX_ARGS], where;
    int nin_done, nout_done;      /* in[]/out[] entries to clear */
    int have_where;       /* 0: no mask; 1: the array `where`; 2: where=False, nothing is written */
    int any_device, any_host, host_out; /* where the operands are (set by prepare) */
    int host_result;      /* results are copied back to NumPy (set by prepare) */
    int scalar_results;   /* fresh 0-d host results come back as NumPy scalars (set by prepare) */
    int numba;            /* the called function's Numba call rules (set by prepare, before
                           * classifying: cf_py_call_classify_inputs reads it) */
    int reshaped;         /* outer: the in[] views have extent-1 axes their host arrays lack */
    int no_lib_results;   /* results must be DeviceArrays (present rewraps them: gufunc axes=) */
    cf_py_place pl;
    PyObject *res[CF_PY_MAX_ARGS]; /* owned: the device arrays of outputs not given on the device */
    /* fresh outputs the caller's library allocated (res[o] is its array, delivered as it is) */
    cf_py_lib_alloc lib;
    unsigned char lib_out[CF_PY_MAX_ARGS];
    /* the wrapper of fresh device results (cf_py_result_wrapper; borrowed, NULL: DeviceArrays),
     * looked up once a call: the outputs step and the deliver step both need it */
    PyObject *wrapper;
    int wrapper_known;
    PyObject *result;     /* owned: the return value, once known */
};

/* Start a call: only the header fields and the per-output slots are set (a call is large and most
 * of it is written before it is read). `outs` may be NULL; None outputs count as not given. */
void cf_py_call_init(cf_py_call *c, const cf_py_engine *engine, void *self, void *state,
                     const char *name, const char *kind, int nin, int nout,
                     PyObject *const *outs, PyObject *stream);
/* Run steps 1-10; returns the result (new reference) or NULL with an exception. Clears `c`. */
PyObject *cf_py_call_run(cf_py_call *c);
/* Release what the call holds (run does it; for callers of `prepare` alone). */
void cf_py_call_clear(cf_py_call *c);

/* Step 1 helper: classify the c->nin inputs into c->in (counting them in nin_done, for the
 * cleanup), note whether any is on the device or the host, and apply the NEP 50 rule (Numba's
 * scalar rule when c->numba: cf_py_args_numba). */
int cf_py_call_classify_inputs(cf_py_call *c, PyObject *const *inputs);
/* Step 1 helper: classify given output o (c->outs[o] != NULL) into c->out[o]: a device view
 * (any_device), or a writable NumPy array (host_out; kept in out[o].keep). `argname` names it in
 * errors; `method` is NULL for (g)ufunc calls, else "reduce"/"accumulate" for their wording. */
int cf_py_call_classify_out(cf_py_call *c, int o, const char *argname, const char *method);

/* Step 1 helper: a TypeError for an output (out=, res=) that cannot be written, a JAX array (JAX
 * arrays are immutable; writing through their interface would change one behind JAX's back);
 * `argname` names it. 0 or -1. */
int cf_py_refuse_immutable(const cf_py_call *c, PyObject *obj, const char *argname);

/* Step 6 helper: fill device array `dev` from host out= o, converted to `dt` (a body or a mask
 * may leave elements as they are). */
int cf_py_call_upload_out(cf_py_call *c, int o, PyObject *dev, cf_dtype dt);

/* Step 10: the return value (c->outs given on the device as they are; the rest as DeviceArrays,
 * or copied back to NumPy when c->host_result: into given host outs, or new arrays, 0-d ones as
 * scalars when c->scalar_results; a tuple for several outputs). The one place results are
 * made. Fresh device results come back in the caller's array type: the first input of a foreign
 * device array type (CuPy, PyTorch, JAX, Numba) decides, through a wrapper cached per type
 * (cufunc/_interop.py has the rule and the wrappers); out= always wins. */
PyObject *cf_py_call_deliver(cf_py_call *c);

/* The module functions of py_call.c: _result_wrapper (the deliver step's choice of the caller's
 * array type, for tests). */
extern PyMethodDef cf_py_call_methods[];

/* One result as it is, several as a tuple (new references): the results of the fast path and of
 * the host pipeline, which are already what the caller gets. */
static inline PyObject *cf_py_pack_results(PyObject *const *objs, int n)
{
    if (n == 1)
        return Py_NewRef(objs[0]);
    PyObject *result = PyTuple_New(n);
    for (int o = 0; result && o < n; o++)
        PyTuple_SET_ITEM(result, o, Py_NewRef(objs[o]));
    return result;
}

/* ---- the engines' shared type lifecycle ------------------------------------------------------ */

/* The fields a UFunc and a GUFunc share, first in both structs (CF_PY_FUNC_HEAD, as PyObject_HEAD
 * is shared): their lifecycle, loop list, resolution cache and Python compiler are handled once,
 * here. */
#define CF_PY_LOOP_CACHE 8
#define CF_PY_FUNC_HEAD                                                                           \
    PyObject_HEAD                                                                                 \
    int nin, nout;                                                                                \
    PyObject *name;       /* str */                                                               \
    PyObject *doc;        /* str or None */                                                       \
    PyObject *compiler;   /* callable, or None: compiles a loop for new input types */            \
    PyObject *loops;      /* list of the added loops' entries, in loop order */                   \
    PyObject *dict;                                                                               \
    PyObject *weakreflist;                                                                        \
    /* last resolutions: input dtypes, weak flags (a ufunc: and dtype= + 1) -> loop */           \
    struct {                                                                                      \
        int valid;                                                                                \
        unsigned char key[2 * CF_PY_MAX_ARGS + 1];                                                \
        int loop;                                                                                 \
    } cache[CF_PY_LOOP_CACHE];                                                                    \
    int cache_next;                                                                               \
    /* Numba's call rules (cufunc.numba, set at construction: rules="numba"): the loop choice and \
     * the conversion of scalars of numba-cuda's ufunc mechanism (cf_loop_rule, cufunc/ufunc.h) */\
    int numba;
typedef struct {
    CF_PY_FUNC_HEAD
} CfPyFuncHead;

/* The loop of an earlier resolution with this key (klen bytes), or -1. */
static inline int cf_py_cache_find(const CfPyFuncHead *f, const unsigned char *key, size_t klen)
{
    for (int c = 0; c < CF_PY_LOOP_CACHE; c++)
        if (f->cache[c].valid && memcmp(f->cache[c].key, key, klen) == 0)
            return f->cache[c].loop;
    return -1;
}
void cf_py_cache_add(CfPyFuncHead *f, const unsigned char *key, size_t klen, int loop);
/* The resolution key of n inputs: dtype and weak flag of each (2 * n bytes). */
void cf_py_cache_key(const cf_py_arg *args, int n, unsigned char *key, cf_dtype *in,
                     unsigned char *weak);
/* Whether the function compiles loops on demand. */
static inline int cf_py_func_dynamic(const CfPyFuncHead *f)
{
    return f->compiler != NULL && f->compiler != Py_None;
}
/* The argument types for the compiler: np.dtype, the Python type int/float/complex of a weak
 * scalar (weak may be NULL), None for a negative dtype. New tuple. */
PyObject *cf_py_type_objects(int n, const cf_dtype *dts, const unsigned char *weak);
/* Ask the compiler for a loop: compiler(in_types, out) and, unless it answers None, add_loop(spec)
 * through `add`. 0 or -1. */
int cf_py_func_compile(CfPyFuncHead *f, PyObject *in_types, PyObject *out,
                       int (*add)(CfPyFuncHead *, PyObject *));

/* A loop spec's options (None or a sequence of at most 64 str) as C strings pointing into *seq
 * (a new reference the caller releases after use; NULL for None). `what` names it in errors. */
int cf_py_loop_options(PyObject *options, const char **opts, int *nopts, PyObject **seq,
                       const char *what);
/* The types of loop spec (a sequence of n dtype-likes) as cf_dtypes and a tuple of np.dtypes. */
int cf_py_loop_types(PyObject *types, int n, cf_dtype *dts, PyObject **descrs);
/* Append `entry` (stolen) to f->loops, then run add(); on failure the entry is taken out again:
 * the entry keeps captured arrays alive, so it is in the list before any kernel can read them. */
int cf_py_loop_append(CfPyFuncHead *f, PyObject *entry);
void cf_py_loop_pop(CfPyFuncHead *f);
/* After a loop is added: earlier resolutions may change. */
static inline void cf_py_func_loops_changed(CfPyFuncHead *f)
{
    memset(f->cache, 0, sizeof f->cache);
}

/* Type slots: set the head (name, doc, compiler, a new loop list); traverse, clear, the part of
 * dealloc before the engine's own free, and the getters of nin/nout/nargs/name/doc/loops/compiler;
 * NumPy's 'ff->f' spelling of loops from their types. */
int cf_py_func_head_init(CfPyFuncHead *f, int nin, int nout, PyObject *name, PyObject *doc,
                         PyObject *compiler);
/* The constructors' rules= argument: "numpy" (or NULL/None) 0, "numba" 1; -1 with TypeError. */
int cf_py_parse_rules(PyObject *rules, const char *what);
PyObject *cf_py_func_get_rules(PyObject *self, void *c);
int cf_py_func_traverse(PyObject *self, visitproc visit, void *arg);
int cf_py_func_clear(PyObject *self);
void cf_py_func_dealloc_head(PyObject *self);
/* The types of every loop as NumPy spells them: ['ff->f', ...]; loop_types gives loop l's. */
PyObject *cf_py_func_types(const CfPyFuncHead *f, int nloops,
                           void (*loop_types)(const CfPyFuncHead *f, int loop, cf_dtype *t));
PyObject *cf_py_func_get_nin(PyObject *self, void *c);
PyObject *cf_py_func_get_nout(PyObject *self, void *c);
PyObject *cf_py_func_get_nargs(PyObject *self, void *c);
PyObject *cf_py_func_get_name(PyObject *self, void *c);
PyObject *cf_py_func_get_doc(PyObject *self, void *c);
int cf_py_func_set_doc(PyObject *self, PyObject *value, void *c);
PyObject *cf_py_func_get_loops(PyObject *self, void *c);
PyObject *cf_py_func_get_compiler(PyObject *self, void *c);
/* The PyGetSetDef entries of those, for the type's table; `what` is "ufunc" or "gufunc". */
#define CF_PY_FUNC_GETSET(what)                                                                   \
    {"nin", cf_py_func_get_nin, NULL, "The number of inputs.", NULL},                                  \
    {"nout", cf_py_func_get_nout, NULL, "The number of outputs.", NULL},                               \
    {"nargs", cf_py_func_get_nargs, NULL, "The number of arguments (nin + nout).", NULL},              \
    {"__name__", cf_py_func_get_name, NULL, "the " what "'s name", NULL},                         \
    {"__doc__", cf_py_func_get_doc, cf_py_func_set_doc, "the " what "'s docstring", NULL},        \
    {"compiler", cf_py_func_get_compiler, NULL, "The loop compiler of a dynamic " what ", or None.",\
     NULL},                                                                                       \
    {"rules", cf_py_func_get_rules, NULL, "The call rules: 'numpy', or 'numba' (cufunc.numba).",    \
     NULL}

#endif
