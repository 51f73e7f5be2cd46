/* at.c: the engine of ufunc.at (include/cufunc/at.h). Stands on its own: one loop's device
 * function (cf_loop_fn), a kernel table keyed by the specialisation, kernels instantiated from
 * templates/cufunc/at.cuh exactly as reduce.c instantiates reduce.cuh. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "context.h"
#include "driver.h"
#include "cufunc/at.cuh"
#include "cufunc/at.h"
#include "error.h"
#include "ktable.h"
#include "loopfn.h"
#include "strbuf.h"

struct cf_at {
    cf_loop_fn fn;
    pthread_mutex_t lock;
    cf_ktable table;
};

#define AT_BLOCK 256

cf_status cf_at_create(const char *source, const char *fn_name, const char *const *options,
                       int noptions, const cf_module_global *globals, int nglobals, cf_at **out)
{
    if (out == NULL)
        return cf_error_set(CF_ERR_INVALID, "cf_at_create: NULL argument");
    *out = NULL;
    cf_at *at = cf_calloc(1, sizeof *at);
    if (at == NULL)
        return cf_error_set(CF_ERR_NOMEM, "cf_at_create: out of memory");
    cf_status st = cf_loop_fn_init(&at->fn, source, fn_name, options, noptions, globals, nglobals);
    if (st) {
        cf_free(at);
        return st;
    }
    pthread_mutex_init(&at->lock, NULL);
    cf_ktable_init(&at->table);
    *out = at;
    return CF_OK;
}

void cf_at_destroy(cf_at *at)
{
    if (at == NULL)
        return;
    cf_loop_fn_clear(&at->fn);
    cf_ktable_clear(&at->table);
    pthread_mutex_destroy(&at->lock);
    cf_free(at);
}

cf_at_mode cf_at_pick_mode(cf_at_op op, int same_types, cf_dtype t)
{
    size_t size = cf_dtype_size(t);
    int i32_64 = t == CF_INT32 || t == CF_INT64 || t == CF_UINT32 || t == CF_UINT64;
    if (same_types && op == CF_AT_OP_ADD && (i32_64 || t == CF_FLOAT32 || t == CF_FLOAT64))
        return CF_AT_ADD;
    if (same_types && op == CF_AT_OP_MIN && i32_64)
        return CF_AT_MIN;
    if (same_types && op == CF_AT_OP_MAX && i32_64)
        return CF_AT_MAX;
    if (size == 4 || size == 8)
        return CF_AT_CAS;
    return size < 4 ? CF_AT_CAS_WORD : CF_AT_SERIAL;
}

static int at_type_ok(cf_dtype t)
{
    return cf_dtype_valid(t) && t != CF_FLOAT16 && t != CF_BFLOAT16;
}

static cf_status check_call(const cf_at_call *c)
{
    if (c->nin != 1 && c->nin != 2)
        return cf_error_set(CF_ERR_INVALID, "ufunc.at: the function must take 1 or 2 inputs");
    if (c->index_type != CF_INT32 && c->index_type != CF_INT64)
        return cf_error_set(CF_ERR_TYPE, "ufunc.at: indices must be int32 or int64");
    /* 2-byte floats: no atomics or CAS loops written for them yet */
    for (int k = 0; k <= c->nin; k++)
        if (!at_type_ok(c->types[k]))
            return cf_error_set(CF_ERR_UNSUPPORTED, "ufunc.at: float16 and bfloat16 are not supported");
    if (!at_type_ok(c->a_type) || (c->nin == 2 && !at_type_ok(c->b_type)))
        return cf_error_set(CF_ERR_UNSUPPORTED, "ufunc.at: float16 and bfloat16 are not supported");
    size_t size = cf_dtype_size(c->a_type);
    int ok;
    switch (c->mode) {
    case CF_AT_CAS: ok = size == 4 || size == 8; break;
    case CF_AT_CAS_WORD: ok = size < 4; break;
    case CF_AT_SERIAL: ok = 1; break;
    default: ok = cf_at_pick_mode(c->mode == CF_AT_ADD ? CF_AT_OP_ADD : c->mode == CF_AT_MIN
                                  ? CF_AT_OP_MIN : CF_AT_OP_MAX, 1, c->a_type) == c->mode;
    }
    if (!ok)
        return cf_error_set(CF_ERR_INVALID, "ufunc.at: mode %d cannot update %s", (int)c->mode,
                            cf_dtype_name(c->a_type));
    if (c->extent < 0 || c->inner < 1 || c->nindex < 0)
        return cf_error_set(CF_ERR_INVALID, "ufunc.at: bad extents");
    return CF_OK;
}

/* The kernel table's key: what the kernel's source depends on (cf_at_kernel_source), a
 * zero-filled binary struct. */
typedef struct at_key {
    int32_t device, nin, types[3], a_type, b_type, index_type, mode;
} at_key;

static void spec_key(const cf_at_call *c, int device, at_key *k)
{
    memset(k, 0, sizeof *k);
    k->device = device;
    k->nin = c->nin;
    for (int i = 0; i < 3; i++)
        k->types[i] = (int32_t)c->types[i];
    k->a_type = (int32_t)c->a_type;
    k->b_type = c->nin == 2 ? (int32_t)c->b_type : -1;
    k->index_type = (int32_t)c->index_type;
    k->mode = (int32_t)c->mode;
}

cf_status cf_at_kernel_source(const cf_at *at, const cf_at_call *c, char **out)
{
    if (at == NULL || c == NULL || out == NULL)
        return cf_error_set(CF_ERR_INVALID, "cf_at_kernel_source: NULL argument");
    cf_status st = check_call(c);
    if (st)
        return st;
    const char *T = cf_dtype_ctype(c->a_type), *T0 = cf_dtype_ctype(c->types[0]);
    const char *B = c->nin == 2 ? cf_dtype_ctype(c->types[1]) : T;
    const char *BS = c->nin == 2 ? cf_dtype_ctype(c->b_type) : T;
    const char *I = c->index_type == CF_INT32 ? "int" : "long long";
    cf_strbuf b = {0};
    /* the runtime header first: a loop's source may use it without including it */
    cf_strbuf_printf(&b, "#include \"cufunc/runtime.cuh\"\n%s\n#include \"cufunc/at.cuh\"\n\n"
                     "struct cf_at_op {\n    typedef %s T;\n    typedef %s B;\n"
                     "    static __device__ __forceinline__ T apply(T cur, B v) {\n",
                     at->fn.source, T, B);
    if (c->nin == 2)
        cf_strbuf_printf(&b, "        return cf_cast<T>(%s(cf_cast<%s>(cur), v));\n",
                         at->fn.fn_name, T0);
    else
        cf_strbuf_printf(&b, "        (void)v;\n        return cf_cast<T>(%s(cf_cast<%s>(cur)));\n",
                         at->fn.fn_name, T0);
    cf_strbuf_printf(&b, "    }\n};\n\nextern \"C\" __global__ void __launch_bounds__(%d)\n"
                     "cf_at(const __grid_constant__ cf_at_params p)\n{\n"
                     "    cf_at_run<cf_at_op, %s, %s, %d>(p);\n}\n", AT_BLOCK, BS, I, (int)c->mode);
    if (b.failed) {
        cf_free(b.s);
        return cf_error_set(CF_ERR_NOMEM, "ufunc.at: out of memory generating a kernel");
    }
    *out = b.s;
    return CF_OK;
}

typedef struct at_build {
    cf_at *at;
    const cf_at_call *c;
    int device;
} at_build;

/* cf_kbuild_fn of the ufunc.at engine; runs without its lock (the engine's function is fixed at
 * creation). */
static cf_status build_kernel(void *ctx, cf_function **fn, int64_t *aux)
{
    const at_build *b = ctx;
    char *src = NULL;
    cf_module *m = NULL;
    cf_status st = cf_at_kernel_source(b->at, b->c, &src);
    if (!st)
        st = cf_loop_fn_load(&b->at->fn, b->device, src, &m);
    if (!st)
        st = cf_module_function(m, "cf_at", fn);
    *aux = 0;
    cf_free(src);
    return st;
}

/* The kernel of a call: from the kernel cache, else built once (ktable.h). */
static cf_status get_kernel(cf_at *at, const cf_at_call *c, int device, cf_function **out)
{
    at_key key;
    spec_key(c, device, &key);
    at_build b = {at, c, device};
    cf_kentry e;
    cf_status st = cf_ktable_get(&at->table, &at->lock, &key, sizeof key, 0, build_kernel, &b, &e);
    if (!st)
        *out = e.fn;
    return st;
}

cf_status cf_at_launch(cf_at *at, const cf_at_call *c, cf_stream *s, int device)
{
    if (at == NULL || c == NULL || s == NULL)
        return cf_error_set(CF_ERR_INVALID, "cf_at_launch: NULL argument");
    cf_status st = check_call(c);
    if (st || c->nindex == 0)
        return st;
    cf_function *fn = NULL;
    if ((st = get_kernel(at, c, device, &fn)))
        return st;
    /* Captured into a CUDA graph, the launch cannot read its error flag back (no host
     * synchronisation in a capture): the flag lives in the graph (allocation, memset, free
     * nodes), bad device indices are skipped by the kernel and go unreported. */
    int capture = CF_CAPTURE_NONE;
    if (cf_stream_handle(s) > 1 && (st = cf_stream_capture_status(s, &capture)))
        return st; /* the legacy default stream never captures */
    capture = capture == CF_CAPTURE_ACTIVE || capture == CF_CAPTURE_INVALIDATED;
    uint64_t bad = 0;
    unsigned long long flags[2] = {0, 0};
    if ((st = cf_mem_alloc(s, sizeof flags, &bad)))
        return st;
    cf_at_params p;
    memset(&p, 0, sizeof p);
    p.a = c->a;
    p.index = c->index;
    p.b = c->nin == 2 ? c->b : c->a;
    p.bad = bad;
    p.nindex = c->nindex;
    p.inner = c->inner;
    p.extent = c->extent;
    p.a_index = c->a_index;
    p.a_inner = c->a_inner;
    p.b_index = c->nin == 2 ? c->b_index : 0;
    p.b_inner = c->nin == 2 ? c->b_inner : 0;
    int64_t n = c->nindex * c->inner, blocks = (n + AT_BLOCK - 1) / AT_BLOCK;
    if (c->mode == CF_AT_SERIAL || blocks < 1)
        blocks = 1;
    if (blocks > 65536)
        blocks = 65536; /* grid-stride beyond */
    unsigned grid[3] = {(unsigned)blocks, 1, 1}, block[3] = {AT_BLOCK, 1, 1};
    void *args[1] = {&p};
    st = capture ? cf_cu_check(cf_drv.cuMemsetD8Async(bad, 0, sizeof flags, cf_stream_cu(s)),
                               "cuMemsetD8Async")
                 : cf_memset8(s, bad, 0, sizeof flags);
    if (!st)
        st = cf_launch(fn, grid, block, 0, s, args);
    if (!st && !capture)
        st = cf_memcpy_dtoh(s, flags, bad, sizeof flags, 1);
    cf_status fst = cf_mem_free(s, bad);
    if (st)
        return st;
    if (fst)
        return fst;
    if (flags[0])
        return cf_error_set(CF_ERR_RANGE, "index %lld is out of bounds for axis 0 with size %lld",
                            (long long)flags[1], (long long)c->extent);
    return CF_OK;
}
