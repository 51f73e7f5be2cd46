/* gufunc.c: the generalized-ufunc engine (include/cufunc/gufunc.h): loops, shape binding, launch
 * planning, kernel sources and launch.
 *
 * The kernel is templates/cufunc/gu_kernel.cuh; the source of a specialisation key defines the key
 * as macros (each operand's kind, types and core ndim, each staged operand's shared layout, the
 * launch's constants) and includes it (generate). Two shapes of kernel:
 *   - direct: one thread per loop iteration in a grid-stride loop; each thread builds its
 *     operands' core views (cf_array_ref) from the operand's base pointer, its loop offsets and the
 *     core strides, and calls the body.
 *   - staged: the block takes a tile of `tile` consecutive iterations; operands whose cores are
 *     small and C-contiguous are copied between global memory and shared memory by the whole block
 *     (consecutive threads on consecutive bytes: coalesced), and each thread runs the body on views
 *     of its rows in shared memory. A thread reading its own 4 KiB row directly would touch a new
 *     cache line per warp lane per step; staged, the global traffic is the same as a copy's. Shared
 *     rows are padded to an odd number of words so that the threads of a warp, each at the same
 *     index of its own row, hit distinct banks. Staged kernels are specialised on the core sizes
 *     (the shared layout is static), so the body's loops over them have constant trip counts.
 *     A tile whose rows are one contiguous block of an operand (C-contiguous batches) is copied
 *     flat (no per-iteration base offsets, 16-byte units whatever the core size, cp.async): this
 *     is what stages cores under a sector (3-vectors), see stage_operand.
 * The body is the user's sequential Python: nothing about its meaning changes, only where its
 * array reads land.
 *
 * Array operands seen by the body as cf_array_ref must have the loop's dtype; cf_gufunc_launch
 * converts others through temporaries with an identity ufunc (the element-wise engine converts as it
 * loads). Scalars and core-less inputs passed by value are converted inside the kernel. Inputs that
 * share memory with an output go through such a temporary too (NumPy's rule, array.h).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cufunc/compile.h"
#include "cufunc/gufunc.cuh"
#include "cufunc/gufunc.h"
#include "diagnostics.h"
#include "env.h"
#include "error.h"
#include "util.h"
#include "fastdiv.h"
#include "ktable.h"
#include "loopfn.h"
#include "strbuf.h"

#define GU_MAX_ARGS CF_SIG_MAX_ARGS
#define GU_BLOCK 128          /* threads per block of direct kernels */
#define GU_MAX_TILE 256       /* iterations per block tile of staged kernels */
#define GU_MIN_STAGE_ROW 32   /* smaller cores are staged only as flat tiles (see plan_staging) */
#define GU_MAX_FLAT_ROW 512   /* 16-byte-multiple cores up to this size go flat (tiles >= 32) */
#define GU_MAX_FLAT_TILE 1024 /* iterations per tile when every staged core is flat */
#define GU_FLAT_BUDGET 32768  /* ... of cores under 32 bytes: >= 6 blocks per SM on Hopper */
#define GU_FLAT_THREADS 256   /* their block: a thread runs tile / 256 iterations */
#define GU_MAX_REG_ROW 64     /* out= cores of flat outputs up to this size: read per thread */
#define GU_MIN_FLAT_TILES 1024 /* tiles over 128 iterations only when the loop makes this many */

_Static_assert(CF_GU_LOOP_NDIM == CF_GUFUNC_MAX_LOOP_NDIM, "loop ndim of the kernel parameters");
_Static_assert(CF_GU_CORE_NDIM == CF_GUFUNC_MAX_CORE_NDIM, "core ndim of the kernel parameters");

typedef struct gu_loop {
    cf_dtype types[GU_MAX_ARGS];
    int arg_ndim[GU_MAX_ARGS];
    cf_loop_fn fn;         /* source, function name, NVRTC options */
} gu_loop;

struct cf_gufunc {
    char *name;
    char *signature;
    cf_layout layout;
    int nin, nout;
    gu_loop *loops;
    int nloops, loops_cap;
    pthread_mutex_t lock;
    cf_ktable table;        /* compiled kernels by specialisation key */
    cf_ufunc *cast;                 /* identity loops that convert dtypes (made on first need) */
    int cast_loop[CF_NDTYPES];      /* the cast ufunc's loop producing each dtype, or -1 */
};



/* ---- gufunc objects ----------------------------------------------------------------------- */

static char *format_signature(const cf_layout *L)
{
    cf_strbuf b = {0};
    for (int op = 0; op < L->nin + L->nout; op++) {
        cf_strbuf_printf(&b, "%s(", op == 0 ? "" : op == L->nin ? "->" : ",");
        for (int k = 0; k < L->ndims[op]; k++)
            cf_strbuf_printf(&b, "%s%s", k ? "," : "", L->names[L->dim[op][k]]);
        cf_strbuf_printf(&b, ")");
    }
    if (b.failed) {
        cf_free(b.s);
        return NULL;
    }
    return b.s;
}

cf_status cf_gufunc_create(const char *name, const char *layout, cf_gufunc **out)
{
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_gufunc_create: out is NULL");
    *out = NULL;
    if (!layout)
        return cf_error_set(CF_ERR_INVALID, "cf_gufunc_create: the layout is NULL");
    cf_gufunc *g = cf_calloc(1, sizeof *g);
    if (!g)
        return CF_ERR_NOMEM;
    cf_status st = cf_parse_layout(layout, &g->layout);
    if (st) {
        cf_free(g);
        return st;
    }
    if (g->layout.nin + g->layout.nout > GU_MAX_ARGS) {
        cf_free(g);
        return cf_error_set(CF_ERR_INVALID, "a gufunc takes at most %d arguments", GU_MAX_ARGS);
    }
    g->nin = g->layout.nin;
    g->nout = g->layout.nout;
    g->name = cf_strdup(name ? name : "gufunc");
    g->signature = format_signature(&g->layout);
    if (!g->name || !g->signature)
        goto fail;
    for (int t = 0; t < CF_NDTYPES; t++)
        g->cast_loop[t] = -1;
    pthread_mutex_init(&g->lock, NULL);
    cf_ktable_init(&g->table);
    *out = g;
    return CF_OK;
fail:
    cf_free(g->name);
    cf_free(g->signature);
    cf_free(g);
    return CF_ERR_NOMEM;
}

static void loop_clear(gu_loop *l)
{
    cf_loop_fn_clear(&l->fn);
}

void cf_gufunc_free(cf_gufunc *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->nloops; i++)
        loop_clear(&g->loops[i]);
    cf_free(g->loops);
    cf_ktable_clear(&g->table);
    cf_ufunc_free(g->cast);
    pthread_mutex_destroy(&g->lock);
    cf_free(g->name);
    cf_free(g->signature);
    cf_free(g);
}

int cf_gufunc_nin(const cf_gufunc *g) { return g ? g->nin : 0; }
int cf_gufunc_nout(const cf_gufunc *g) { return g ? g->nout : 0; }
int cf_gufunc_nloops(const cf_gufunc *g) { return g ? g->nloops : 0; }
const char *cf_gufunc_name(const cf_gufunc *g) { return g ? g->name : ""; }
const char *cf_gufunc_signature(const cf_gufunc *g) { return g ? g->signature : ""; }
const cf_layout *cf_gufunc_layout(const cf_gufunc *g) { return g ? &g->layout : NULL; }

int cf_gufunc_kernel_count(const cf_gufunc *g)
{
    if (!g)
        return 0;
    pthread_mutex_lock((pthread_mutex_t *)&g->lock);
    int n = (int)cf_ktable_count(&g->table);
    pthread_mutex_unlock((pthread_mutex_t *)&g->lock);
    return n;
}

cf_status cf_gufunc_loop_types(const cf_gufunc *g, int loop, cf_dtype *types, int *arg_ndim)
{
    if (!g || loop < 0 || loop >= g->nloops)
        return cf_error_set(CF_ERR_INVALID, "cf_gufunc_loop_types: bad gufunc or loop");
    int n = g->nin + g->nout;
    if (types)
        memcpy(types, g->loops[loop].types, (size_t)n * sizeof(cf_dtype));
    if (arg_ndim)
        memcpy(arg_ndim, g->loops[loop].arg_ndim, (size_t)n * sizeof(int));
    return CF_OK;
}

cf_status cf_gufunc_add_loop(cf_gufunc *g, const cf_dtype *types, const int *arg_ndim,
                             const char *source, const char *fn_name, const char *const *options,
                             int noptions, int *index)
{
    return cf_gufunc_add_loop_globals(g, types, arg_ndim, source, fn_name, options, noptions,
                                      NULL, 0, index);
}

cf_status cf_gufunc_add_loop_globals(cf_gufunc *g, const cf_dtype *types, const int *arg_ndim,
                                     const char *source, const char *fn_name,
                                     const char *const *options, int noptions,
                                     const cf_module_global *globals, int nglobals, int *index)
{
    if (!g || !types || !arg_ndim || !source || !fn_name || noptions < 0 || (noptions && !options))
        return cf_error_set(CF_ERR_INVALID, "cf_gufunc_add_loop: NULL argument");
    int nargs = g->nin + g->nout;
    cf_status st = cf_loops_check_types(types, nargs);
    if (st)
        return st;
    for (int i = 0; i < nargs; i++) {
        int c = g->layout.ndims[i], k = arg_ndim[i];
        int is_out = i >= g->nin;
        if (k == 0 && c == 0 && !is_out)
            continue;
        if (k == 0 && c == 0)
            return cf_error_set(CF_ERR_TYPE, "gufunc '%s': argument %d is an output, which the "
                                "body can only write as an array (declare it %s[:] and write "
                                "out[0])", g->name, i + 1, cf_dtype_name(types[i]));
        if (k == c || (c == 0 && k == 1)) {
            if (c > CF_GUFUNC_MAX_CORE_NDIM)
                return cf_error_set(CF_ERR_UNSUPPORTED, "gufunc '%s': argument %d has %d core "
                                    "dimensions; kernels handle at most %d", g->name, i + 1, c,
                                    CF_GUFUNC_MAX_CORE_NDIM);
            continue;
        }
        if (k == 0)
            return cf_error_set(CF_ERR_TYPE, "gufunc '%s': argument %d is declared a scalar but "
                                "has %d core dimension%s in the layout %s", g->name, i + 1, c,
                                c == 1 ? "" : "s", g->signature);
        return cf_error_set(CF_ERR_TYPE, "gufunc '%s': argument %d is declared a %d-d array but "
                            "has %d core dimension%s in the layout %s", g->name, i + 1, k, c,
                            c == 1 ? "" : "s", g->signature);
    }
    st = cf_loops_check_new("gufunc", g->name, g->nloops ? g->loops[0].types : NULL,
                            sizeof(gu_loop), g->nloops, g->nin, types);
    if (st)
        return st;
    gu_loop l;
    memset(&l, 0, sizeof l);
    memcpy(l.types, types, (size_t)nargs * sizeof(cf_dtype));
    memcpy(l.arg_ndim, arg_ndim, (size_t)nargs * sizeof(int));
    st = cf_loop_fn_init(&l.fn, source, fn_name, options, noptions, globals, nglobals);
    if (!st)
        st = cf_loops_append(&g->loops, &g->nloops, &g->loops_cap, sizeof l, &l, &g->lock,
                             index);
    if (st)
        loop_clear(&l);
    return st;
}

/* ---- loop resolution ---------------------------------------------------------------------- */


int cf_gufunc_find(const cf_gufunc *g, const cf_loops_query *q)
{
    if (!g || !q || !g->nloops)
        return CF_LOOPS_NONE;
    cf_loops_query k = *q;
    k.nin = g->nin;
    k.nout = g->nout;
    return cf_loops_find(g->loops[0].types, sizeof g->loops[0], g->nloops, &k);
}

cf_status cf_gufunc_resolve_query(const cf_gufunc *g, const cf_loops_query *q, int *loop)
{
    if (!g || !q || !q->in || !loop)
        return cf_error_set(CF_ERR_INVALID, "cf_gufunc_resolve: NULL argument");
    for (int i = 0; i < g->nin; i++)
        if (!cf_dtype_valid(q->in[i]))
            return cf_error_set(CF_ERR_TYPE, "cf_gufunc_resolve: input %d has an invalid dtype",
                                i + 1);
    if ((*loop = cf_gufunc_find(g, q)) >= 0)
        return CF_OK;
    cf_loops_query k = *q;
    k.nin = g->nin;
    k.nout = g->nout;
    return cf_loops_no_match(g->nloops ? g->loops[0].types : NULL, sizeof(gu_loop), g->nloops,
                             &k, "gufunc", g->name);
}

cf_status cf_gufunc_resolve_rule(const cf_gufunc *g, const cf_dtype *in,
                                 const unsigned char *weak, cf_loop_rule rule, int *loop)
{
    cf_loops_query q = {rule == CF_LOOP_RULE_NUMBA ? CF_LOOPS_NUMBA_GUFUNC : CF_LOOPS_NUMPY, 0, 0,
                        in, weak, 0, -1, CF_CAST_SAFE};
    return cf_gufunc_resolve_query(g, &q, loop);
}

cf_status cf_gufunc_resolve(const cf_gufunc *g, const cf_dtype *in, const unsigned char *weak,
                            int *loop)
{
    return cf_gufunc_resolve_rule(g, in, weak, CF_LOOP_RULE_NUMPY, loop);
}

/* ---- shapes ------------------------------------------------------------------------------- */

/* "input argument 2", "output argument 3": arguments count from 1, outputs after the inputs, as
 * the Python function takes them. */
static const char *arg_role(const cf_gufunc *g, int op) { return op < g->nin ? "input" : "output"; }

cf_status cf_gufunc_bind(const cf_gufunc *g, const cf_operand *ops, const unsigned char *has_out,
                         cf_gufunc_shapes *sh)
{
    if (!g || !ops || !sh)
        return cf_error_set(CF_ERR_INVALID, "cf_gufunc_bind: NULL argument");
    const cf_layout *L = &g->layout;
    int who[CF_SIG_MAX_NAMES];
    for (int d = 0; d < L->nnames; d++) {
        sh->dim_size[d] = -1;
        who[d] = -1;
    }
    int nshapes = 0, ndims[GU_MAX_ARGS], nops = g->nin + g->nout;
    const int64_t *shapes[GU_MAX_ARGS];
    for (int op = 0; op < nops; op++) {
        int is_out = op >= g->nin;
        if (is_out && !(has_out && has_out[op - g->nin]))
            continue;
        if (is_out && ops[op].is_scalar)
            return cf_error_set(CF_ERR_INVALID, "%s: output argument %d must be an array",
                                g->name, op + 1);
        const cf_array *a = ops[op].is_scalar ? NULL : &ops[op].array;
        int nd = a ? a->ndim : 0, c = L->ndims[op];
        if (nd < 0 || nd > CF_MAX_DIMS)
            return cf_error_set(CF_ERR_INVALID, "%s: argument %d has a bad ndim %d", g->name,
                                op + 1, nd);
        if (nd < c)
            return cf_error_set(CF_ERR_INVALID, "%s: %s argument %d does not have enough "
                                "dimensions (has %d, gufunc core with signature %s requires %d)",
                                g->name, arg_role(g, op), op + 1, nd, g->signature, c);
        for (int k = 0; k < c; k++) {
            int d = L->dim[op][k];
            int64_t size = a->shape[nd - c + k];
            if (L->fixed[d] >= 0 && size != L->fixed[d])
                return cf_error_set(CF_ERR_INVALID, "%s: %s argument %d has a mismatch in its "
                                    "core dimension %d ('%s'), with gufunc signature %s (size "
                                    "%lld is different from the fixed size %lld)", g->name,
                                    arg_role(g, op), op + 1, k, L->names[d], g->signature,
                                    (long long)size, (long long)L->fixed[d]);
            if (sh->dim_size[d] >= 0 && size != sh->dim_size[d])
                return cf_error_set(CF_ERR_INVALID, "%s: %s argument %d has a mismatch in its "
                                    "core dimension %d ('%s'), with gufunc signature %s (size "
                                    "%lld is different from %lld, the size in argument %d)",
                                    g->name, arg_role(g, op), op + 1, k, L->names[d],
                                    g->signature, (long long)size,
                                    (long long)sh->dim_size[d], who[d] + 1);
            if (sh->dim_size[d] < 0) {
                sh->dim_size[d] = size;
                who[d] = op;
            }
        }
        ndims[nshapes] = nd - c;
        shapes[nshapes++] = a ? a->shape : NULL;
    }
    for (int o = 0; o < g->nout; o++) {
        int op = g->nin + o;
        if (has_out && has_out[o])
            continue;
        for (int k = 0; k < L->ndims[op]; k++) {
            int d = L->dim[op][k];
            if (sh->dim_size[d] >= 0)
                continue;
            if (L->fixed[d] >= 0) {
                sh->dim_size[d] = L->fixed[d];
                continue;
            }
            return cf_error_set(CF_ERR_INVALID, "%s: output argument %d has core dimension %d "
                                "('%s') unspecified, with gufunc signature %s: no input defines "
                                "it; pass out= to give its size", g->name, op + 1, k, L->names[d],
                                g->signature);
        }
    }
    cf_status st = cf_broadcast_shapes(nshapes, ndims, shapes, &sh->loop_ndim, sh->loop_shape);
    if (st) {
        char why[2048];
        snprintf(why, sizeof why, "%s", cf_last_error());
        return cf_error_set(CF_ERR_INVALID, "%s: the loop dimensions of the arguments (all but "
                            "their core dimensions, signature %s) could not be broadcast: %s",
                            g->name, g->signature, why);
    }
    for (int o = 0; o < g->nout; o++) {
        int op = g->nin + o;
        if (!(has_out && has_out[o]))
            continue;
        const cf_array *a = &ops[op].array;
        int nl = a->ndim - L->ndims[op], same = nl == sh->loop_ndim;
        for (int k = 0; same && k < nl; k++)
            same = a->shape[k] == sh->loop_shape[k];
        if (!same) {
            char have[512], want[512];
            cf_format_shape(have, sizeof have, nl, a->shape);
            cf_format_shape(want, sizeof want, sh->loop_ndim, sh->loop_shape);
            return cf_error_set(CF_ERR_INVALID, "%s: output argument %d has loop dimensions %s, "
                                "which do not match the broadcast loop dimensions %s of the "
                                "inputs (signature %s)", g->name, op + 1, have, want,
                                g->signature);
        }
    }
    return CF_OK;
}

cf_status cf_gufunc_operand_shape(const cf_gufunc *g, const cf_gufunc_shapes *sh, int op,
                                  int *ndim, int64_t *shape)
{
    if (!g || !sh || !ndim || !shape || op < 0 || op >= g->nin + g->nout)
        return cf_error_set(CF_ERR_INVALID, "cf_gufunc_operand_shape: bad arguments");
    int c = g->layout.ndims[op];
    if (sh->loop_ndim < 0 || sh->loop_ndim + c > CF_MAX_DIMS)
        return cf_error_set(CF_ERR_INVALID, "%s: argument %d would have %d dimensions (at most "
                            "%d)", g->name, op + 1, sh->loop_ndim + c, CF_MAX_DIMS);
    for (int k = 0; k < sh->loop_ndim; k++)
        shape[k] = sh->loop_shape[k];
    for (int k = 0; k < c; k++) {
        int64_t s = sh->dim_size[g->layout.dim[op][k]];
        if (s < 0)
            return cf_error_set(CF_ERR_INVALID, "%s: core dimension '%s' of argument %d is not "
                                "bound", g->name, g->layout.names[g->layout.dim[op][k]], op + 1);
        shape[sh->loop_ndim + k] = s;
    }
    *ndim = sh->loop_ndim + c;
    return CF_OK;
}

cf_status cf_gufunc_axes_perm(int arg, int ndim, int ncore, const int *axes, int naxes, int *perm)
{
    if (!perm || ndim < 0 || ndim > CF_MAX_DIMS || ncore < 0 || naxes < 0 || (naxes && !axes))
        return cf_error_set(CF_ERR_INVALID, "cf_gufunc_axes_perm: bad arguments");
    if (naxes != ncore)
        return cf_error_set(CF_ERR_INVALID, "axes item %d should be a tuple with %d element%s, "
                            "one per core dimension, not %d", arg, ncore, ncore == 1 ? "" : "s",
                            naxes);
    if (ncore > ndim)
        return cf_error_set(CF_ERR_INVALID, "axes item %d: argument %d has %d dimension%s, fewer "
                            "than its %d core dimensions", arg, arg, ndim, ndim == 1 ? "" : "s",
                            ncore);
    unsigned char used[CF_MAX_DIMS] = {0};
    int core[CF_MAX_DIMS];
    for (int k = 0; k < naxes; k++) {
        int a = axes[k];
        if (a < -ndim || a >= ndim)
            return cf_error_set(CF_ERR_RANGE, "axes item %d: axis %d is out of bounds for array "
                                "of dimension %d", arg, a, ndim);
        if (a < 0)
            a += ndim;
        if (used[a])
            return cf_error_set(CF_ERR_INVALID, "axes item %d has value %d repeated", arg, axes[k]);
        used[a] = 1;
        core[k] = a;
    }
    int n = 0;
    for (int k = 0; k < ndim; k++)
        if (!used[k])
            perm[n++] = k;
    for (int k = 0; k < naxes; k++)
        perm[n++] = core[k];
    return CF_OK;
}

/* ---- planning ----------------------------------------------------------------------------- */

static int is_c_compact(int c, const int64_t *shape, const int64_t *strides, int64_t item)
{
    int64_t acc = item;
    for (int k = c - 1; k >= 0; k--) {
        if (shape[k] != 1 && strides[k] != acc)
            return 0;
        acc *= shape[k];
    }
    return 1;
}

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* Element (or, for complex, component) size: the unit an element copy moves in one access and
 * the alignment the body's loads assume. */
static int copy_unit(cf_dtype t)
{
    int s = (int)cf_dtype_size(t);
    return cf_dtype_kind(t) == 'c' ? s / 2 : s;
}

/* Shared memory the staged operands need for a tile of `tile` iterations; writes the offsets:
 * the cores shared by the whole tile ('U') first, then a region of `tile` rows per staged operand
 * ('G'), then the per-iteration base offsets of each 'G' operand that is not flat. */
static int64_t layout_smem(cf_gufunc_plan *p, int tile, int64_t *base_off)
{
    int64_t off = 0, osize = p->index32 ? 4 : 8;
    for (int i = 0; i < p->nops; i++)
        if (p->kind[i] == 'U') {
            p->smem_offset[i] = off;
            off += round_up(p->row_bytes[i], 16);
        }
    for (int i = 0; i < p->nops; i++)
        if (p->kind[i] == 'G') {
            p->smem_offset[i] = off;
            off += round_up(p->pitch[i] * tile, 16);
        }
    for (int i = 0; i < p->nops; i++)
        if (p->kind[i] == 'G' && !p->flat[i]) {
            if (base_off)
                base_off[i] = off;
            off += round_up(osize * tile, 16);
        }
    return off;
}

/* Rows of a tile of at most 8 iterations are all read by lanes of one warp phase (8 lanes of 16
 * bytes), so a pitch of an odd number of 16-byte units keeps them on distinct banks just as an odd
 * number of words does, and keeps every row 16-byte aligned: the copy stores whole 16-byte units
 * (an odd word pitch splits each into four 4-byte stores that conflict 4 ways) and the compiler can
 * merge the body's consecutive reads of its row into 16-byte loads. Large rows (4 KiB: a row sum)
 * get small tiles, so this is the case that matters; nothing changes if the budget would break. */
static void widen_pitches(cf_gufunc_plan *p, int tile)
{
    if (tile > 8)
        return;
    int64_t keep[CF_SIG_MAX_ARGS];
    for (int i = 0; i < p->nops; i++) {
        keep[i] = p->pitch[i];
        if (p->kind[i] != 'G' || p->copy_width[i] != 16)
            continue;
        int64_t pitch = round_up(p->row_bytes[i], 16);
        if ((pitch / 16) % 2 == 0)
            pitch += 16;
        p->pitch[i] = pitch;
    }
    if (layout_smem(p, tile, NULL) > CF_GUFUNC_STAGE_BUDGET)
        for (int i = 0; i < p->nops; i++)
            p->pitch[i] = keep[i];
}

/* $CUFUNC_GU_SMALL=0 (read at the first plan) or cf_gufunc_set_small_staging(0): plan without
 * flat tiles, as before they existed (A/B timings, tests). */
static atomic_int small_staging = -1;

static int small_staging_on(void)
{
    int s = atomic_load_explicit(&small_staging, memory_order_relaxed);
    if (s < 0) {
        s = cf_knob(CF_KNOB_GU_SMALL) != 0;
        atomic_store_explicit(&small_staging, s, memory_order_relaxed);
    }
    return s;
}

int cf_gufunc_set_small_staging(int on)
{
    int old = small_staging_on();
    atomic_store_explicit(&small_staging, on ? 1 : 0, memory_order_relaxed);
    return old;
}

/* Whether iteration t of operand i's loop is at t * row bytes from its base: the loop strides are
 * C-contiguous over the loop shape with rows packed. A tile of consecutive iterations is then one
 * contiguous block, copied flat with vector units whatever the row size. */
static int loop_packed(const cf_gufunc_plan *p, int i, int64_t row)
{
    int64_t acc = row;
    for (int k = p->loop_ndim - 1; k >= 0; k--) {
        if (p->loop_shape[k] != 1 && p->loop_strides[i][k] != acc)
            return 0;
        acc *= p->loop_shape[k];
    }
    return 1;
}

/* Operand i (array, compact core of `row` bytes, not aliased) as a staged 'G' or 'U' operand:
 * returns 0 when it stays in place. Flat ('G' with flat[i]): rows under 32 bytes, whose per-thread
 * reads in place cost a transaction per element (12-byte strides: 3 partial sectors per warp
 * access), and 16-byte-multiple rows up to GU_MAX_FLAT_ROW; both only when the tile is a contiguous
 * block. Rows under 32 bytes that are not 16-byte multiples are packed (pitch = row: 16-byte
 * cp.async units; an odd word count, as for 3-vectors, keeps the body's element reads free of bank
 * conflicts, an even one costs 2 ways). Others keep the odd-unit pitch of all staged rows: the body
 * reads elements (a 4x4 matmul's columns of B: 48 of its 64 loads stay scalar), and a pitch of odd
 * 16-byte units would put 4 lanes on each bank; their copies then go in element units (cp.async
 * of 4 bytes, 128 bytes per warp access: still coalesced). */
static int stage_operand(const cf_operand *ops, cf_gufunc_plan *p, int i, int64_t row,
                         int uniform)
{
    const cf_array *a = &ops[i].array;
    int unit = copy_unit(a->dtype), A = unit > 4 ? unit : 4;
    int flat = !uniform && small_staging_on() && loop_packed(p, i, row) &&
               (row < GU_MIN_STAGE_ROW || (row % 16 == 0 && row <= GU_MAX_FLAT_ROW));
    if (!flat && row < GU_MIN_STAGE_ROW)
        return 0;
    int64_t pitch = round_up(row, A);
    if ((pitch / A) % 2 == 0)
        pitch += A;
    if (flat && row < GU_MIN_STAGE_ROW && row % 16 != 0)
        pitch = row;
    int vec = row % 16 == 0 && a->data % 16 == 0;
    for (int k = 0; k < p->loop_ndim && vec; k++)
        vec = p->loop_strides[i][k] % 16 == 0;
    p->kind[i] = uniform ? 'U' : 'G';
    p->flat[i] = (unsigned char)flat;
    p->row_bytes[i] = row;
    p->pitch[i] = uniform ? round_up(row, 16) : pitch;
    p->copy_width[i] = vec ? 16 : unit; /* flat: set with the tile (flat_widths) */
    p->load_output[i] = 0;
    return 1;
}

/* The copy unit of flat operands, once the tile is known: 16 (or 8) bytes when the base and every
 * tile's start (tile * row) are so aligned, else the element unit; the last tile's odd end goes in
 * element units. */
static void flat_widths(const cf_operand *ops, cf_gufunc_plan *p)
{
    for (int i = 0; i < p->nops; i++) {
        if (p->kind[i] != 'G' || !p->flat[i])
            continue;
        int unit = copy_unit(ops[i].array.dtype), w = unit;
        int64_t span = p->row_bytes[i] * p->tile;
        for (int c = 16; c > unit && w == unit; c /= 2)
            if (ops[i].array.data % (uint64_t)c == 0 && span % c == 0 &&
                (p->pitch[i] == p->row_bytes[i] ||
                 (p->row_bytes[i] % c == 0 && p->pitch[i] % c == 0)))
                w = c;
        p->copy_width[i] = w;
    }
}

/* The tile: the largest power of two that fits the budget; while none of at least
 * CF_GUFUNC_MIN_TILE fits, the largest staged operand goes back to direct access. Plans whose 'G'
 * operands are all flat take up to GU_MAX_FLAT_TILE iterations (no base-offset tables; a thread
 * runs several iterations), in GU_FLAT_BUDGET when the cores are under a sector, so that small
 * cores still move kilobytes per tile. */
static void choose_tile(const cf_operand *ops, cf_gufunc_plan *p)
{
    for (;;) {
        int any = 0, any_g = 0, all_flat = 1, all_small = 1, tile = 0;
        for (int i = 0; i < p->nops; i++) {
            any |= p->kind[i] == 'G' || p->kind[i] == 'U';
            if (p->kind[i] == 'G') {
                any_g = 1;
                all_flat &= p->flat[i];
                all_small &= p->row_bytes[i] < GU_MIN_STAGE_ROW;
            }
        }
        all_flat &= any_g;
        if (!any)
            return;
        int max_tile = all_flat ? GU_MAX_FLAT_TILE : GU_MAX_TILE;
        /* cores under a sector: 32 KiB (>= 6 blocks per SM; 512 3-vectors of 3 operands are
         * 18 KiB); larger cores keep the budget they had */
        int64_t budget = all_flat && all_small ? GU_FLAT_BUDGET : CF_GUFUNC_STAGE_BUDGET;
        for (int t = max_tile; t >= CF_GUFUNC_MIN_TILE && !tile; t /= 2)
            if (layout_smem(p, t, NULL) <= budget)
                tile = t;
        if (tile) {
            /* no point in a tile much larger than the loop; large flat tiles only while the
             * loop still makes GU_MIN_FLAT_TILES of them (every multiprocessor busy) */
            while (tile > CF_GUFUNC_MIN_TILE && tile / 2 >= p->n)
                tile /= 2;
            while (all_flat && tile > GU_BLOCK && p->n / tile < GU_MIN_FLAT_TILES)
                tile /= 2;
            p->tile = tile;
            widen_pitches(p, tile);
            p->smem_bytes = layout_smem(p, tile, NULL);
            /* at least 128 threads, whatever the tile: the copies need them in flight */
            p->block_threads = tile < GU_BLOCK ? GU_BLOCK : tile;
            if (all_flat && tile > GU_FLAT_THREADS)
                p->block_threads = GU_FLAT_THREADS;
            p->staged = 1;
            flat_widths(ops, p);
            return;
        }
        int worst = -1;
        for (int i = 0; i < p->nops; i++)
            if ((p->kind[i] == 'G' || p->kind[i] == 'U') &&
                (worst < 0 || p->row_bytes[i] > p->row_bytes[worst]))
                worst = i;
        p->kind[worst] = 'A';
        p->flat[worst] = 0;
    }
}

/* Choose which operands to stage and the tile size. */
static void plan_staging(const cf_gufunc *g, const cf_operand *ops, cf_gufunc_plan *p)
{
    p->staged = 0;
    p->tile = 0;
    p->block_threads = GU_BLOCK;
    p->smem_bytes = 0;
    if (p->n <= 1 || p->loop_ndim == 0)
        return;
    int nops = p->nops;
    for (int i = 0; i < nops; i++) {
        if (p->kind[i] != 'A' || g->layout.ndims[i] == 0)
            continue;
        const cf_array *a = &ops[i].array;
        int c = p->core_ndim[i];
        int64_t item = (int64_t)cf_dtype_size(a->dtype), elems = 1;
        for (int k = 0; k < c; k++)
            elems *= p->core_shape[i][k];
        int64_t row = elems * item;
        if (elems < 2 || row * CF_GUFUNC_MIN_TILE > CF_GUFUNC_STAGE_BUDGET ||
            !is_c_compact(c, p->core_shape[i], p->core_strides[i], item))
            continue;
        /* an output sharing memory with another operand is read and written in place */
        int overlaps = 0;
        for (int j = 0; j < nops && !overlaps; j++)
            if (j != i && !ops[j].is_scalar && (i >= g->nin || j >= g->nin))
                overlaps = cf_array_may_overlap(a, &ops[j].array);
        if (overlaps)
            continue;
        int uniform = 1;
        for (int k = 0; k < p->loop_ndim; k++)
            uniform &= p->loop_strides[i][k] == 0;
        if (uniform && i >= g->nin)
            continue; /* an output every iteration writes: left to the caller's checks */
        stage_operand(ops, p, i, row, uniform);
    }
    choose_tile(ops, p);
}

/* Operand i of a launch: its kind ('S', 'R', 'V' or 'A'; staging comes later), its core view, and
 * for an array the loop part of its view (*loop_view, *is_array = 1), after the checks of its
 * dimensions and dtype against the bound shapes and the loop. */
static cf_status plan_operand(const cf_gufunc *g, const gu_loop *l, const cf_operand *ops, int i,
                              const cf_gufunc_shapes *sh, cf_gufunc_plan *p, cf_array *loop_view,
                              int *is_array)
{
    const cf_layout *L = &g->layout;
    int is_out = i >= g->nin, c = L->ndims[i];
    if (ops[i].is_scalar) {
        if (is_out)
            return cf_error_set(CF_ERR_INVALID, "%s: output argument %d must be an array",
                                g->name, i + 1);
        if (c != 0)
            return cf_error_set(CF_ERR_INVALID, "%s: input argument %d does not have enough "
                                "dimensions (has 0, gufunc core with signature %s requires %d)",
                                g->name, i + 1, g->signature, c);
        if (!cf_dtype_valid(ops[i].scalar_dtype))
            return cf_error_set(CF_ERR_TYPE, "%s: argument %d has an unsupported scalar dtype",
                                g->name, i + 1);
        p->kind[i] = l->arg_ndim[i] == 0 ? 'S' : 'R';
        p->core_ndim[i] = l->arg_ndim[i] == 0 ? 0 : 1;
        p->core_shape[i][0] = 1;
        p->core_strides[i][0] = (int64_t)cf_dtype_size(l->types[i]);
        return CF_OK;
    }
    const cf_array *a = &ops[i].array;
    if (!cf_dtype_valid(a->dtype))
        return cf_error_set(CF_ERR_UNSUPPORTED, "%s: argument %d has dtype %s, which gufuncs do "
                            "not support", g->name, i + 1, cf_dtype_name(a->dtype));
    int nl = a->ndim - c;
    if (nl < 0 || nl > sh->loop_ndim || (is_out && nl != sh->loop_ndim))
        return cf_error_set(CF_ERR_INVALID, "%s: argument %d has %d dimensions, which do not "
                            "fit %d loop and %d core dimensions", g->name, i + 1, a->ndim,
                            sh->loop_ndim, c);
    for (int k = 0; k < c; k++)
        if (a->shape[nl + k] != sh->dim_size[L->dim[i][k]])
            return cf_error_set(CF_ERR_INVALID, "%s: argument %d: core dimension %d has size "
                                "%lld, bound to %lld", g->name, i + 1, k,
                                (long long)a->shape[nl + k],
                                (long long)sh->dim_size[L->dim[i][k]]);
    if (is_out)
        for (int k = 0; k < nl; k++)
            if (a->shape[k] != sh->loop_shape[k])
                return cf_error_set(CF_ERR_INVALID, "%s: output argument %d does not have the "
                                    "loop's shape", g->name, i + 1);
    if (l->arg_ndim[i] == 0) {
        p->kind[i] = 'V';
    } else {
        if (a->dtype != l->types[i])
            return cf_error_set(CF_ERR_TYPE, "%s: argument %d has dtype %s but the loop takes "
                                "%s arrays", g->name, i + 1, cf_dtype_name(a->dtype),
                                cf_dtype_name(l->types[i]));
        p->kind[i] = 'A';
        if (c == 0) {
            p->core_ndim[i] = 1;
            p->core_shape[i][0] = 1;
            p->core_strides[i][0] = (int64_t)cf_dtype_size(a->dtype);
        } else {
            p->core_ndim[i] = c;
            for (int k = 0; k < c; k++) {
                p->core_shape[i][k] = a->shape[nl + k];
                p->core_strides[i][k] = a->strides[nl + k];
            }
        }
    }
    loop_view->data = a->data;
    loop_view->dtype = a->dtype;
    loop_view->ndim = nl;
    loop_view->device = a->device;
    for (int k = 0; k < nl; k++) {
        loop_view->shape[k] = a->shape[k];
        loop_view->strides[k] = a->strides[k];
    }
    *is_array = 1;
    return CF_OK;
}

cf_status cf_gufunc_plan_launch(const cf_gufunc *g, int loop, const cf_operand *ops,
                                const cf_gufunc_shapes *sh, unsigned fresh_outputs,
                                cf_gufunc_plan *p)
{
    if (!g || !ops || !sh || !p || loop < 0 || loop >= g->nloops)
        return cf_error_set(CF_ERR_INVALID, "cf_gufunc_plan_launch: bad gufunc, loop or operands");
    if (sh->loop_ndim < 0 || sh->loop_ndim > CF_MAX_DIMS)
        return cf_error_set(CF_ERR_INVALID, "cf_gufunc_plan_launch: bad loop ndim %d",
                            sh->loop_ndim);
    const gu_loop *l = &g->loops[loop];
    int nops = g->nin + g->nout;
    memset(p, 0, sizeof *p);
    p->nops = nops;
    p->n = 1;
    for (int k = 0; k < sh->loop_ndim; k++) {
        if (sh->loop_shape[k] < 0)
            return cf_error_set(CF_ERR_INVALID, "negative loop extent %lld",
                                (long long)sh->loop_shape[k]);
        p->n *= sh->loop_shape[k];
    }

    /* Operands: kinds, core views, and the loop part of each array for the loop planner. */
    cf_array *loop_views = cf_malloc((size_t)nops * sizeof *loop_views);
    cf_plan *pl = cf_malloc(sizeof *pl);
    int plan_of[GU_MAX_ARGS], np = 0;
    cf_status st = CF_OK;
    if (!loop_views || !pl) {
        st = CF_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < nops; i++) {
        plan_of[i] = -1;
        int is_array = 0;
        st = plan_operand(g, l, ops, i, sh, p, &loop_views[np], &is_array);
        if (st)
            goto done;
        if (is_array)
            plan_of[i] = np++;
    }
    st = cf_plan_elementwise(pl, np, loop_views, sh->loop_ndim, sh->loop_shape);
    if (st)
        goto done;
    if (pl->ndim > CF_GUFUNC_MAX_LOOP_NDIM) {
        st = cf_error_set(CF_ERR_UNSUPPORTED, "%s: the operands' layouts leave %d loop axes that "
                          "cannot be merged; gufunc kernels handle at most %d (make an operand "
                          "contiguous first)", g->name, pl->ndim, CF_GUFUNC_MAX_LOOP_NDIM);
        goto done;
    }
    p->loop_ndim = p->n > 1 ? pl->ndim : 0;
    for (int k = 0; k < p->loop_ndim; k++)
        p->loop_shape[k] = pl->shape[k];
    p->index32 = p->n < ((int64_t)1 << 31);
    for (int i = 0; i < nops; i++) {
        int j = plan_of[i];
        if (j < 0)
            continue;
        int64_t reach = (int64_t)cf_dtype_size(ops[i].array.dtype);
        int all_zero = p->loop_ndim > 0;
        for (int k = 0; k < p->loop_ndim; k++) {
            p->loop_strides[i][k] = pl->strides[j][k];
            reach += (p->loop_shape[k] - 1) * cf_abs64(pl->strides[j][k]);
            all_zero &= pl->strides[j][k] == 0;
        }
        for (int k = 0; k < p->core_ndim[i]; k++)
            if (p->core_shape[i][k] > 0)
                reach += (p->core_shape[i][k] - 1) * cf_abs64(p->core_strides[i][k]);
        if (reach >= ((int64_t)1 << 31))
            p->index32 = 0;
        if (i >= g->nin && all_zero) {
            st = cf_error_set(CF_ERR_INVALID, "%s: output argument %d has a zero stride over the "
                              "loop: its iterations would overlap", g->name, i + 1);
            goto done;
        }
    }
    plan_staging(g, ops, p);
    /* an out= core is read in first (the body may read it, or write only part of it): by each
     * thread into an array of its own when at most GU_MAX_REG_ROW bytes of a flat tile (2: the
     * array lives in registers and the compiler drops the reads when the body overwrites every
     * element first, as a matmul or a cross product does), else by the tile's copy (1) */
    for (int o = 0; o < g->nout; o++) {
        int i = g->nin + o;
        if (p->kind[i] == 'G' && !(fresh_outputs & (1u << o)))
            p->load_output[i] = p->flat[i] && p->row_bytes[i] <= GU_MAX_REG_ROW ? 2 : 1;
    }
done:
    cf_free(loop_views);
    cf_free(pl);
    return st;
}

/* ---- kernel generation -------------------------------------------------------------------- */

/* The dtype a scalar operand ('S', 'R') or a by-value element ('V') has in memory. */
static cf_dtype operand_dtype(const cf_operand *op)
{
    return op->is_scalar ? op->scalar_dtype : op->array.dtype;
}

/* What a kernel's source depends on, written once from a launch plan (make_spec): its bytes are
 * the kernel table's key (zero-filled, so that padding and unused operands compare equal; the
 * key's length stops after the last operand) and generate() writes its macros from it. */
typedef struct gu_spec_op {
    char kind;                 /* the plan's kind: 'S', 'R', 'V', 'A', 'G', 'U' */
    unsigned char load;        /* staged: how the core is read in (inputs 1; outputs 0/1/2) */
    unsigned char flat;        /* staged 'G': the tile is one contiguous block */
    int32_t core_ndim;
    int32_t copy_width;        /* staged */
    int32_t mem_dtype;         /* 'S', 'R', 'V': the dtype in memory; others -1 (the loop's) */
    int64_t row_bytes, pitch, smem_offset, base_off; /* staged */
    int64_t core_shape[CF_GUFUNC_MAX_CORE_NDIM];     /* staged */
} gu_spec_op;

typedef struct gu_spec {
    int32_t device, loop, nops, nd, index32, staged, tile, block_threads;
    int64_t smem_bytes;        /* staged */
    gu_spec_op op[GU_MAX_ARGS];
} gu_spec;

/* The bytes of a spec that key it (through its last operand). */
static size_t spec_len(const gu_spec *k)
{
    return offsetof(gu_spec, op) + (size_t)k->nops * sizeof(gu_spec_op);
}

static void make_spec(const cf_gufunc *g, int loop, const cf_gufunc_plan *p,
                      const cf_dtype *mem_dtype, int device, gu_spec *k)
{
    memset(k, 0, sizeof *k);
    k->device = device;
    k->loop = loop;
    k->nops = p->nops;
    k->nd = p->loop_ndim > 0 ? p->loop_ndim : 1;
    k->index32 = p->index32;
    k->staged = p->staged;
    k->tile = p->staged ? p->tile : 0;
    k->block_threads = p->block_threads;
    int64_t base_off[GU_MAX_ARGS] = {0};
    if (p->staged) {
        cf_gufunc_plan q = *p;
        layout_smem(&q, p->tile, base_off);
        k->smem_bytes = p->smem_bytes;
    }
    for (int i = 0; i < p->nops; i++) {
        gu_spec_op *o = &k->op[i];
        char kind = p->kind[i];
        int by_value = kind == 'S' || kind == 'R' || kind == 'V';
        o->kind = kind;
        o->core_ndim = p->core_ndim[i];
        o->mem_dtype = by_value ? (int32_t)mem_dtype[i] : -1;
        if (p->staged && (kind == 'G' || kind == 'U')) {
            o->load = kind != 'G' ? 0 : i < g->nin ? 1 : p->load_output[i];
            o->flat = kind == 'G' && p->flat[i];
            o->copy_width = p->copy_width[i];
            o->row_bytes = p->row_bytes[i];
            o->pitch = p->pitch[i];
            o->smem_offset = p->smem_offset[i];
            o->base_off = base_off[i];
            for (int d = 0; d < p->core_ndim[i]; d++)
                o->core_shape[d] = p->core_shape[i][d];
        }
    }
}

/* The kernel source of a spec: the loop's function, then the spec as macros and the kernel header
 * gu_kernel.cuh, which describes them: the operand list CF_GU_OPS (index, kind, role, core ndim,
 * loop and memory types, whether a by-value element converts), the layout of each staged operand
 * (CF_GU_STAGE_<i>) and the launch's constants. */
static cf_status generate(const cf_gufunc *g, const gu_loop *l, const gu_spec *k, char **out)
{
    cf_strbuf b = {0};
    /* the runtime header first: a loop's source may use it without including it */
    cf_strbuf_printf(&b, "#include \"cufunc/runtime.cuh\"\n%s\n\n", l->fn.source);
    cf_strbuf_printf(&b, "#define CF_GU_FN %s\n#define CF_GU_BLOCK %d\n#define CF_GU_NOPS %d\n"
                     "#define CF_GU_ND %d\n#define CF_GU_I %s\n#define CF_GU_O %s\n"
                     "#define CF_GU_TILE %d\n",
                     l->fn.fn_name, k->block_threads, k->nops, k->nd,
                     k->index32 ? "unsigned" : "unsigned long long",
                     k->index32 ? "int" : "long long", k->tile);
    if (k->staged) {
        cf_strbuf_printf(&b, "#define CF_GU_SMEM %lld\n", (long long)k->smem_bytes);
        for (int i = 0; i < k->nops; i++) {
            const gu_spec_op *o = &k->op[i];
            if (o->kind != 'G' && o->kind != 'U')
                continue;
            cf_strbuf_printf(&b, "#define CF_GU_STAGE_%d %lld, %lld, %lld, %d, %d, %lld, %d, (",
                             i, (long long)o->row_bytes, (long long)o->pitch,
                             (long long)o->smem_offset, (int)o->copy_width, (int)o->load,
                             (long long)o->base_off, (int)o->flat);
            for (int d = 0; d < o->core_ndim; d++)
                cf_strbuf_printf(&b, "%s%lld", d ? ", " : "", (long long)o->core_shape[d]);
            cf_strbuf_printf(&b, ")\n");
        }
    }
    cf_strbuf_printf(&b, "#define CF_GU_OPS(F)");
    for (int i = 0; i < k->nops; i++) {
        const gu_spec_op *o = &k->op[i];
        cf_dtype mem = o->mem_dtype >= 0 ? (cf_dtype)o->mem_dtype : l->types[i];
        cf_strbuf_printf(&b, " \\\n    F(%d, %c, %c, %d, %s, %s, %d)", i, o->kind,
                         i < g->nin ? 'I' : 'O', (int)o->core_ndim, cf_dtype_ctype(l->types[i]),
                         cf_dtype_ctype(mem), o->kind == 'V' && mem != l->types[i]);
    }
    cf_strbuf_printf(&b, "\n#include \"cufunc/gu_kernel.cuh\"\n");
    if (b.failed) {
        cf_free(b.s);
        return CF_ERR_NOMEM;
    }
    *out = b.s;
    return CF_OK;
}

cf_status cf_gufunc_kernel_source(cf_gufunc *g, int loop, const cf_operand *ops,
                                  const cf_gufunc_shapes *sh, unsigned fresh_outputs,
                                  char **source)
{
    if (!source)
        return cf_error_set(CF_ERR_INVALID, "cf_gufunc_kernel_source: source is NULL");
    cf_gufunc_plan *p = cf_malloc(sizeof *p);
    if (!p)
        return CF_ERR_NOMEM;
    cf_status st = cf_gufunc_plan_launch(g, loop, ops, sh, fresh_outputs, p);
    if (!st) {
        cf_dtype mem[GU_MAX_ARGS];
        for (int i = 0; i < p->nops; i++)
            mem[i] = operand_dtype(&ops[i]);
        gu_spec *k = cf_malloc(sizeof *k);
        if (!k)
            st = CF_ERR_NOMEM;
        else {
            make_spec(g, loop, p, mem, 0, k);
            st = generate(g, &g->loops[loop], k, source);
            cf_free(k);
        }
    }
    cf_free(p);
    return st;
}

/* ---- the kernel table --------------------------------------------------------------------- */

typedef struct gu_build {
    cf_gufunc *g;
    const gu_spec *k;
} gu_build;

/* cf_kbuild_fn of the gufunc engine (aux: resident blocks on the whole device). Runs without the
 * gufunc's lock; the loop is copied under it (add_loop may grow the array meanwhile). */
static cf_status build_kernel(void *ctx, cf_function **fn, int64_t *aux)
{
    const gu_build *c = ctx;
    pthread_mutex_lock(&c->g->lock);
    gu_loop l = c->g->loops[c->k->loop];
    pthread_mutex_unlock(&c->g->lock);
    char *src = NULL;
    cf_module *m = NULL;
    cf_device_props props;
    int per_sm = 0;
    cf_status st = generate(c->g, &l, c->k, &src);
    if (!st)
        st = cf_loop_fn_load(&l.fn, c->k->device, src, &m);
    if (!st)
        st = cf_module_function(m, "cf_gu", fn);
    if (!st)
        st = cf_function_max_active_blocks(*fn, c->k->block_threads, 0, &per_sm);
    if (!st)
        st = cf_device_props_get(c->k->device, &props);
    if (!st)
        *aux = (int64_t)props.multiprocessor_count * (per_sm > 0 ? per_sm : 1);
    cf_free(src);
    return st;
}

/* The kernel of a plan: from the kernel cache (keyed by the spec's bytes), else built once
 * (ktable.h). */
static cf_status get_kernel(cf_gufunc *g, int loop, const cf_gufunc_plan *p,
                            const cf_dtype *mem_dtype, int device, cf_kentry *out)
{
    gu_spec k; /* about 3 KiB; only spec_len(&k) bytes are hashed and compared */
    make_spec(g, loop, p, mem_dtype, device, &k);
    gu_build c = {g, &k};
    return cf_ktable_get(&g->table, &g->lock, &k, spec_len(&k), 0, build_kernel, &c, out);
}

/* ---- launch ------------------------------------------------------------------------------- */

/* The identity loop of the cast ufunc that produces dtype t (made on first need). */
static cf_status cast_loop(cf_gufunc *g, cf_dtype t, int *loop)
{
    cf_status st = CF_OK;
    pthread_mutex_lock(&g->lock);
    if (!g->cast)
        st = cf_ufunc_create("gufunc_cast", 1, 1, &g->cast);
    if (!st && g->cast_loop[t] < 0) {
        char src[256], name[64];
        snprintf(name, sizeof name, "cf_gu_identity_%s", cf_dtype_name(t));
        snprintf(src, sizeof src, "#include \"cufunc/runtime.cuh\"\n"
                 "__device__ inline %s %s(%s x) { return x; }\n", cf_dtype_ctype(t), name,
                 cf_dtype_ctype(t));
        cf_dtype types[2] = {t, t};
        int idx;
        st = cf_ufunc_add_loop(g->cast, types, src, name, NULL, 0, &idx);
        if (!st)
            g->cast_loop[t] = idx;
    }
    if (!st)
        *loop = g->cast_loop[t];
    pthread_mutex_unlock(&g->lock);
    return st;
}

/* dst[...] = src[...] converted, both of shape src->shape. */
static cf_status cast_copy(cf_gufunc *g, cf_stream *s, const cf_array *src, const cf_array *dst)
{
    int loop;
    cf_status st = cast_loop(g, dst->dtype, &loop);
    if (st)
        return st;
    cf_operand ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].array = *src;
    ops[1].array = *dst;
    return cf_ufunc_launch(g->cast, loop, s, ops, NULL, src->ndim, src->shape);
}

/* A C-ordered temporary of dtype `t` and a's shape from the stream-ordered pool (its memory in
 * *mem, freed by the caller on the stream), holding a's values converted when `load`. */
static cf_status temp_like(cf_gufunc *g, cf_stream *s, const cf_array *a, cf_dtype t, int load,
                           uint64_t *mem, cf_array *out)
{
    cf_array v;
    cf_status st = cf_array_init_contiguous(&v, 0, t, a->ndim, a->shape, 'C', cf_stream_device(s));
    if (!st)
        st = cf_mem_alloc(s, (size_t)cf_array_nbytes(&v), mem);
    if (st)
        return st;
    v.data = *mem;
    if (load && (st = cast_copy(g, s, a, &v)))
        return st;
    *out = v;
    return CF_OK;
}

/* Whether input i must be copied before the kernel writes the outputs in `use` (array.h's rule).
 * An iteration reads its input elements and writes its output elements in any order the body
 * likes (a row reversal writes out[0] before it reads x[n-1]), so sharing memory is safe only
 * between operands without core dimensions that are the same view: their iteration reads and
 * writes one element, as an element-wise ufunc does. */
static int input_needs_copy(const cf_gufunc *g, const cf_operand *use, int i)
{
    if (use[i].is_scalar)
        return 0;
    for (int o = g->nin; o < g->nin + g->nout; o++)
        if (!use[o].is_scalar &&
            cf_array_needs_copy(&use[i].array, &use[o].array,
                                g->layout.ndims[i] == 0 && g->layout.ndims[o] == 0))
            return 1;
    return 0;
}

cf_status cf_gufunc_launch(cf_gufunc *g, int loop, cf_stream *s, const cf_operand *ops,
                           const cf_gufunc_shapes *sh, unsigned fresh_outputs)
{
    if (!g || !s || !ops || !sh || loop < 0 || loop >= g->nloops)
        return cf_error_set(CF_ERR_INVALID, "cf_gufunc_launch: bad gufunc, loop, stream or "
                            "operands");
    int nops = g->nin + g->nout, device = cf_stream_device(s);
    const gu_loop *l = &g->loops[loop];
    cf_operand *use = cf_malloc((size_t)nops * sizeof *use);
    cf_gufunc_plan *p = cf_malloc(sizeof *p);
    uint64_t temp[GU_MAX_ARGS] = {0};
    cf_status st = CF_OK;
    if (!use || !p) {
        st = CF_ERR_NOMEM;
        goto done;
    }
    memcpy(use, ops, (size_t)nops * sizeof *use);
    for (int i = 0; i < nops; i++)
        if (!ops[i].is_scalar && ops[i].array.device != device) {
            st = cf_error_set(CF_ERR_INVALID, "%s: argument %d is on device %d, the launch on "
                              "device %d", g->name, i + 1, ops[i].array.device, device);
            goto done;
        }
    /* Arrays the body sees as views must have the loop's dtype: convert through temporaries. */
    for (int i = 0; i < nops; i++) {
        if (ops[i].is_scalar || l->arg_ndim[i] == 0 || ops[i].array.dtype == l->types[i])
            continue;
        const cf_array *a = &ops[i].array;
        if (!cf_dtype_valid(a->dtype)) {
            st = cf_error_set(CF_ERR_UNSUPPORTED, "%s: argument %d has dtype %s, which gufuncs "
                              "do not support", g->name, i + 1, cf_dtype_name(a->dtype));
            goto done;
        }
        int load = i < g->nin || !(fresh_outputs & (1u << (i - g->nin)));
        if ((st = temp_like(g, s, a, l->types[i], load, &temp[i], &use[i].array)))
            goto done;
    }
    /* Inputs that share memory with an output (after the conversions: a converted operand is a
     * new temporary) are copied first, in the loop's dtype (a core-less input taken by value is
     * converted by the copy instead of the kernel: the same cf_cast), as NumPy defines the call. */
    for (int i = 0; i < g->nin; i++)
        if (!temp[i] && input_needs_copy(g, use, i) &&
            (st = temp_like(g, s, &ops[i].array, l->types[i], 1, &temp[i], &use[i].array)))
            goto done;
    st = cf_gufunc_plan_launch(g, loop, use, sh, fresh_outputs, p);
    if (st || p->n == 0)
        goto done;
    cf_dtype mem[GU_MAX_ARGS] = {CF_BOOL};
    for (int i = 0; i < nops; i++)
        mem[i] = operand_dtype(&use[i]);
    cf_kentry k;
    st = get_kernel(g, loop, p, mem, device, &k);
    if (st)
        goto done;

    union {
        unsigned char bytes[CF_GU_HEADER_BYTES + GU_MAX_ARGS * CF_GU_OPERAND_BYTES];
        uint64_t align;
    } params;
    size_t nbytes = CF_GU_HEADER_BYTES + (size_t)nops * CF_GU_OPERAND_BYTES;
    if (nbytes > 4096) {
        st = cf_error_set(CF_ERR_UNSUPPORTED, "%s: %d arguments need %zu bytes of kernel "
                          "parameters, over the 4096 a launch takes", g->name, nops, nbytes);
        goto done;
    }
    memset(params.bytes, 0, nbytes);
    cf_gu_header *h = (cf_gu_header *)params.bytes;
    cf_gu_operand *op = (cf_gu_operand *)(params.bytes + CF_GU_HEADER_BYTES);
    h->n = p->n;
    h->ndim = p->loop_ndim > 0 ? p->loop_ndim : 1;
    if (p->loop_ndim == 0) {
        h->shape[0] = p->n;
        cf_fastdiv_init(&h->div[0], (uint64_t)(p->n > 0 ? p->n : 1), p->index32);
    }
    for (int d = 0; d < p->loop_ndim; d++) {
        h->shape[d] = p->loop_shape[d];
        cf_fastdiv_init(&h->div[d], (uint64_t)p->loop_shape[d], p->index32);
    }
    for (int i = 0; i < nops; i++) {
        if (use[i].is_scalar) {
            memcpy(op[i].scalar, use[i].scalar, sizeof op[i].scalar);
            continue;
        }
        op[i].ptr = use[i].array.data;
        for (int d = 0; d < p->loop_ndim; d++)
            op[i].loop_strides[d] = p->loop_strides[i][d];
        for (int d = 0; d < p->core_ndim[i]; d++) {
            op[i].core_shape[d] = p->core_shape[i][d];
            op[i].core_strides[d] = p->core_strides[i][d];
        }
    }
    int64_t items = p->staged ? (p->n + p->tile - 1) / p->tile : p->n;
    unsigned grid[3] = {cf_plan_grid(items, p->staged ? 1 : p->block_threads, k.aux), 1, 1};
    unsigned block[3] = {(unsigned)p->block_threads, 1, 1};
    void *args[1] = {params.bytes};
    st = cf_launch(k.fn, grid, block, 0, s, args);
    for (int o = 0; !st && o < g->nout; o++)
        if (temp[g->nin + o])
            st = cast_copy(g, s, &use[g->nin + o].array, &ops[g->nin + o].array);
done:
    for (int i = 0; i < nops; i++)
        if (temp[i]) {
            cf_status fs = cf_mem_free(s, temp[i]);
            if (!st)
                st = fs;
        }
    cf_free(use);
    cf_free(p);
    return st;
}

/* ---- conveniences for C programs (gufunc.h) ------------------------------------------------ */

/* Compile loop `l` for a made-up call: every operand a C-contiguous array of the loop's dtype,
 * 1024 loop iterations, each core dimension its fixed size or 4. Nothing is read from the made-up
 * addresses; the kernel holds the loop's function called with its argument types. */
static cf_status check_one(cf_gufunc *g, int l, int major, int minor)
{
    int nops = g->nin + g->nout;
    cf_operand *ops = cf_calloc((size_t)nops, sizeof *ops);
    cf_gufunc_shapes *sh = cf_malloc(sizeof *sh);
    char *src = NULL, what[640], types[512];
    cf_status st = ops && sh ? CF_OK : CF_ERR_NOMEM;
    for (int i = 0; !st && i < nops; i++) {
        int64_t shape[1 + CF_SIG_MAX_CORE_DIMS];
        int nd = 0;
        shape[nd++] = 1024;
        for (int k = 0; k < g->layout.ndims[i]; k++) {
            int64_t f = g->layout.fixed[g->layout.dim[i][k]];
            shape[nd++] = f >= 0 ? f : 4;
        }
        st = cf_array_init_contiguous(&ops[i].array, (uint64_t)(i + 1) << 32, g->loops[l].types[i],
                                      nd, shape, 'C', 0);
    }
    unsigned char has_out[CF_SIG_MAX_ARGS];
    memset(has_out, 1, sizeof has_out);
    if (!st)
        st = cf_gufunc_bind(g, ops, has_out, sh);
    if (!st)
        st = cf_gufunc_kernel_source(g, l, ops, sh, (1u << g->nout) - 1u, &src);
    cf_loop_types_text(g->loops[l].types, g->nin, g->nout, types, sizeof types);
    snprintf(what, sizeof what, "gufunc '%s' %s loop %d %s", g->name, g->signature, l, types);
    if (!st)
        st = cf_loop_fn_compile(&g->loops[l].fn, src, major, minor, what, NULL);
    cf_free(src);
    cf_free(sh);
    cf_free(ops);
    return st;
}

cf_status cf_gufunc_check(cf_gufunc *g, int loop)
{
    if (!g || loop < -1 || loop >= g->nloops)
        return cf_error_set(CF_ERR_INVALID, "cf_gufunc_check: bad gufunc or loop %d", loop);
    int major, minor;
    cf_loop_check_arch(&major, &minor);
    for (int l = loop < 0 ? 0 : loop; l < (loop < 0 ? g->nloops : loop + 1); l++) {
        cf_status st = check_one(g, l, major, minor);
        if (st)
            return st;
    }
    return CF_OK;
}
