/* ufunc.c: the element-wise engine (include/cufunc/ufunc.h): loops, loop resolution, kernel
 * specialisation and generation, launch.
 *
 * Kernels are compiled per specialisation key through the cache (compile.h). A key's source is
 * short: the loop's function, the key as macros (operand list, shape parameters, the body of one
 * element) and the header of its shape, templates/cufunc/ew_{flat,rowvec,tile,strided}.cuh,
 * which holds the kernel (elementwise.cuh: the macros). Four shapes of kernel, the first whose
 * preconditions hold being chosen:
 *   - flat: every array operand is visited at consecutive addresses (one coalesced axis, or one
 *     element) and the loop is under 2^31 elements. Flat 32-bit index, VEC-wide aligned vector
 *     loads and stores, UNROLL independent vectors per thread per iteration, grid-stride loop.
 *     Its parameters are small (cf_ew_flat_operand): this is the kernel of small calls too.
 *   - row-vector: on the innermost coalesced axis every array operand has stride itemsize (read
 *     and written VEC elements at a time, aligned) or, for inputs, stride 0 (one scalar load per
 *     VEC elements: the broadcast case); the inner extent is a multiple of VEC. One offset
 *     computation (fast divisions) per VEC elements, UNROLL vectors per thread.
 *   - tile: 2 or more coalesced axes, both of the last two at least a tile long, outputs with
 *     stride itemsize on the innermost one, and some input whose stride is +-itemsize on the
 *     next-to-innermost axis instead (a transposed operand); the others read in place. 32x32
 *     tiles: transposed inputs are read coalesced along their own fast axis into padded shared
 *     memory, the body runs in the outputs' order; axes outside the last two iterate over tiles.
 *   - strided: anything else, ND coalesced axes (1..CF_EW_MAX_NDIM); each element's offsets come
 *     from its linear index through multiply-high divisions by the extents (32-bit when the plan
 *     allows), never a 64-bit division.
 * Scalars travel in the kernel parameters; an input array whose every stride is 0 after
 * broadcasting (a 0-d array, say) is "uniform": loaded once per thread, outside the loop.
 *
 * Tuning knobs: the ten CUFUNC_EW_* variables, listed and read in one place (env.h,
 * cf_ew_knobs_get).
 * Block size, unroll and tile rows are part of the generated source and of the specialisation.
 *
 * The launch path is kept short for small calls: the plan is made on the stack over pointers to
 * the operands (cf_plan_small_make, plan.h: no copy of cf_array views, no heap allocation) unless
 * the loop has more than CF_PLAN_SMALL_AXES axes of extent above 1, the kernel table (ktable.c) is
 * keyed by a zero-filled binary struct (hashed 8 bytes at a time, compared with memcmp) and looked
 * up under one lock, and device properties are read only when a kernel is first entered. A repeat of a thread's previous launch (same
 * ufunc, loop, stream, shapes, pointers, layouts and scalar values) skips all of that: see
 * "repeat launches" below.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cufunc/compile.h"
#include "cufunc/kernel_args.h"
#include "cufunc/ufunc.h"
#include "diagnostics.h"
#include "env.h"
#include "error.h"
#include "fastdiv.h"
#include "ktable.h"
#include "loopfn.h"
#include "plan.h"
#include "strbuf.h"
#include "util.h"

#define UF_MAX_ARGS 32
#define UF_NOPS (UF_MAX_ARGS + 1)       /* operands of a launch: arguments and the mask */
#define UF_KEY_OPS 40                   /* UF_NOPS rounded up to 8 bytes, for the key struct */
#define UF_TILE CF_EW_TILE              /* tile kernel: a tile is UF_TILE x UF_TILE elements */
#define UF_TILE_SMEM_MAX 32768          /* shared bytes of staged tiles, at most */

typedef struct uf_loop {
    cf_dtype types[UF_MAX_ARGS];
    cf_loop_fn fn;         /* source, function name, NVRTC options */
} uf_loop;

/* Kernel shapes. */
enum { SH_FLAT = 1, SH_STRIDED, SH_ROWVEC, SH_TILE };

/* The specialisation of a kernel, and the key of the kernel table: zero-filled before it is
 * written (prepare), so that two specs are equal exactly when their bytes are. */
typedef struct uf_spec {
    int32_t device;       /* set by the launch (-1 never reaches the table) */
    int32_t loop;
    uint8_t shape;        /* SH_* */
    uint8_t nops;         /* nin + nout (+1 with where) */
    uint8_t has_where;
    uint8_t ndim;         /* strided, row-vector, tile: coalesced axes */
    uint8_t index32;
    uint8_t vec;          /* flat, row-vector: elements per vector access */
    uint8_t unroll;       /* flat, row-vector: vectors per thread per iteration */
    uint8_t tile_rows;    /* tile: blockDim.y */
    uint16_t block;       /* threads per block */
    uint8_t tile_preload; /* tile: in-place inputs loaded into registers before the barrier */
    uint8_t tile_pipeline; /* tile: resident blocks loop over tiles, fetching the next early */
    uint32_t pad32;
    char kind[UF_KEY_OPS];
    uint8_t dtype[UF_KEY_OPS];
} uf_spec;
_Static_assert(sizeof(uf_spec) % 8 == 0, "uf_spec is hashed in 8-byte words");
_Static_assert(CF_NDTYPES < 256, "dtypes fit a byte of the key");
_Static_assert(CF_PLAN_SMALL_OPS >= UF_NOPS, "a small plan holds every operand of a launch");

struct cf_ufunc {
    uint64_t serial; /* unique for the process's lifetime: names the ufunc in repeat records */
    char *name;
    int nin, nout;
    uf_loop *loops;
    int nloops, loops_cap;
    pthread_mutex_t lock;
    cf_ktable table; /* compiled kernels by uf_spec (aux: the grid cap, resident blocks on the
                        whole device; 0 for no cap) */
};


/* ---- ufunc objects ----------------------------------------------------------------------- */

cf_status cf_ufunc_create(const char *name, int nin, int nout, cf_ufunc **out)
{
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_create: out is NULL");
    *out = NULL;
    if (nin < 1 || nout < 1 || nin + nout > UF_MAX_ARGS)
        return cf_error_set(CF_ERR_INVALID, "a ufunc needs 1 or more inputs and outputs, %d in "
                            "all at most (got %d inputs, %d outputs)", UF_MAX_ARGS, nin, nout);
    cf_ufunc *u = cf_calloc(1, sizeof *u);
    if (!u)
        return CF_ERR_NOMEM;
    u->name = cf_strdup(name ? name : "ufunc");
    if (!u->name)
        goto fail;
    u->nin = nin;
    u->nout = nout;
    static _Atomic uint64_t serials;
    u->serial = atomic_fetch_add(&serials, 1) + 1;
    pthread_mutex_init(&u->lock, NULL);
    cf_ktable_init(&u->table);
    *out = u;
    return CF_OK;
fail:
    cf_free(u);
    return CF_ERR_NOMEM;
}

static void loop_clear(uf_loop *l)
{
    cf_loop_fn_clear(&l->fn);
}

void cf_ufunc_free(cf_ufunc *u)
{
    if (!u)
        return;
    for (int i = 0; i < u->nloops; i++)
        loop_clear(&u->loops[i]);
    cf_free(u->loops);
    cf_ktable_clear(&u->table);
    pthread_mutex_destroy(&u->lock);
    cf_free(u->name);
    cf_free(u);
}

int cf_ufunc_nin(const cf_ufunc *u) { return u ? u->nin : 0; }
int cf_ufunc_nout(const cf_ufunc *u) { return u ? u->nout : 0; }
int cf_ufunc_nloops(const cf_ufunc *u) { return u ? u->nloops : 0; }

int cf_ufunc_kernel_count(const cf_ufunc *u)
{
    if (!u)
        return 0;
    pthread_mutex_lock((pthread_mutex_t *)&u->lock);
    int n = (int)cf_ktable_count(&u->table);
    pthread_mutex_unlock((pthread_mutex_t *)&u->lock);
    return n;
}

cf_status cf_ufunc_loop_types(const cf_ufunc *u, int loop, cf_dtype *types)
{
    if (!u || !types || loop < 0 || loop >= u->nloops)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_loop_types: bad arguments");
    memcpy(types, u->loops[loop].types, (size_t)(u->nin + u->nout) * sizeof(cf_dtype));
    return CF_OK;
}

cf_status cf_ufunc_add_loop(cf_ufunc *u, const cf_dtype *types, const char *source,
                            const char *fn_name, const char *const *options, int noptions,
                            int *index)
{
    return cf_ufunc_add_loop_globals(u, types, source, fn_name, options, noptions, NULL, 0, index);
}

cf_status cf_ufunc_add_loop_globals(cf_ufunc *u, const cf_dtype *types, const char *source,
                                    const char *fn_name, const char *const *options,
                                    int noptions, const cf_module_global *globals, int nglobals,
                                    int *index)
{
    if (!u || !types || !source || !fn_name || noptions < 0 || (noptions && !options))
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_add_loop: NULL argument");
    int nargs = u->nin + u->nout;
    cf_status st = cf_loops_check_types(types, nargs);
    if (!st)
        st = cf_loops_check_new("ufunc", u->name, u->nloops ? u->loops[0].types : NULL,
                                sizeof(uf_loop), u->nloops, u->nin, types);
    if (st)
        return st;
    uf_loop l;
    memset(&l, 0, sizeof l);
    memcpy(l.types, types, (size_t)nargs * sizeof(cf_dtype));
    st = cf_loop_fn_init(&l.fn, source, fn_name, options, noptions, globals, nglobals);
    if (!st)
        st = cf_loops_append(&u->loops, &u->nloops, &u->loops_cap, sizeof l, &l, &u->lock,
                             index);
    if (st)
        loop_clear(&l);
    return st;
}

/* ---- loop resolution (casting rules: dtype.c) ---------------------------------------------------------- */

int cf_ufunc_find(const cf_ufunc *u, const cf_loops_query *q)
{
    if (!u || !q || !u->nloops)
        return CF_LOOPS_NONE;
    cf_loops_query k = *q;
    k.nin = u->nin;
    k.nout = u->nout;
    return cf_loops_find(u->loops[0].types, sizeof u->loops[0], u->nloops, &k);
}

cf_status cf_ufunc_resolve_query(const cf_ufunc *u, const cf_loops_query *q, int *loop)
{
    if (!u || !q || !q->in || !loop)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_resolve: NULL argument");
    if ((*loop = cf_ufunc_find(u, q)) >= 0)
        return CF_OK;
    if (*loop == CF_LOOPS_AMBIGUOUS)
        return cf_error_set(CF_ERR_TYPE, "ufunc '%s': failed to resolve the loop: several loops "
                            "match the untyped scalars (Numba's rule); pass them as NumPy "
                            "scalars of the wanted type", u->name);
    if (q->lazy && q->out_dtype < 0)
        return cf_error_set(CF_ERR_TYPE, "no loop for exactly these types");
    cf_loops_query k = *q;
    k.nin = u->nin;
    k.nout = u->nout;
    return cf_loops_no_match(u->nloops ? u->loops[0].types : NULL, sizeof(uf_loop), u->nloops,
                             &k, "ufunc", u->name);
}

cf_status cf_ufunc_find_exact(const cf_ufunc *u, const cf_dtype *in, const unsigned char *weak,
                              int *loop)
{
    cf_loops_query q = {CF_LOOPS_NUMPY, 0, 0, in, weak, 1, -1, CF_CAST_SAFE};
    return cf_ufunc_resolve_query(u, &q, loop);
}

cf_status cf_ufunc_resolve_rule(const cf_ufunc *u, const cf_dtype *in, const unsigned char *weak,
                                cf_loop_rule rule, int *loop)
{
    cf_loops_query q = {rule == CF_LOOP_RULE_NUMBA ? CF_LOOPS_NUMBA_UFUNC : CF_LOOPS_NUMPY, 0, 0,
                        in, weak, 0, -1, CF_CAST_SAFE};
    return cf_ufunc_resolve_query(u, &q, loop);
}

cf_status cf_ufunc_resolve(const cf_ufunc *u, const cf_dtype *in, const unsigned char *weak,
                           int *loop)
{
    return cf_ufunc_resolve_rule(u, in, weak, CF_LOOP_RULE_NUMPY, loop);
}

/* ---- specialisation ---------------------------------------------------------------------- */

/* Operand kinds in a key: scalar, uniform array (all strides 0), contiguous (flat: the array;
 * row-vector: its rows; read or written VEC elements at a time), strided (strided kernel: through
 * offsets; tile kernel: read or written in place), broadcast row (row-vector: innermost stride 0,
 * one scalar load per vector), transposed (tile: staged through shared memory). */
enum { K_SCALAR = 'S', K_UNIFORM = 'U', K_CONTIG = 'C', K_STRIDED = 'X', K_BCAST = 'B',
       K_TRANS = 'T' };

/* How the body reads operands: from loaded vectors (flat, row-vector), from memory at off[i]
 * (strided kernel, flat tail), or in a tile (staged operands from shared memory, the others from
 * memory at off[i]). */
enum { M_VEC, M_MEM, M_TILE };

static int is_loaded(const uf_spec *sp, int i, int nin, int w) { return i < nin || i == w; }

/* The stored value of loaded array operand i, in its own dtype. */
static void gen_stored_value(cf_strbuf *b, const uf_spec *sp, int i, int mode)
{
    const char *st = cf_dtype_ctype((cf_dtype)sp->dtype[i]);
    if (mode == M_VEC && sp->kind[i] == K_CONTIG)
        cf_strbuf_printf(b, "in%d[u].v[e]", i);
    else if (mode == M_VEC && sp->kind[i] == K_BCAST)
        cf_strbuf_printf(b, "b%d[u]", i);
    else if (mode == M_TILE && sp->kind[i] == K_TRANS)
        cf_strbuf_printf(b, "sm%d[tx * %d + ly]", i, UF_TILE + 1);
    else if (mode == M_TILE && sp->tile_preload)
        cf_strbuf_printf(b, "pre%d[j]", i); /* only inputs are read: outputs are written */
    else
        cf_strbuf_printf(b, "*(const %s *)(p.op[%d].ptr + off[%d])", st, i, i);
}

/* The C expression of input i's value in its loop type. Scalars and uniform inputs were
 * converted once into v<i>. */
static void gen_input_value(cf_strbuf *b, const uf_spec *sp, const uf_loop *l, int i, int mode)
{
    if (sp->kind[i] == K_SCALAR || sp->kind[i] == K_UNIFORM) {
        cf_strbuf_printf(b, "v%d", i);
        return;
    }
    int same = l->types[i] == (cf_dtype)sp->dtype[i];
    if (!same)
        cf_strbuf_printf(b, "cf_cast<%s>(", cf_dtype_ctype(l->types[i]));
    gen_stored_value(b, sp, i, mode);
    if (!same)
        cf_strbuf_printf(b, ")");
}

/* `const auto r = fn(inputs...);` then the stores of r (one output) or r.f0, r.f1, ... */
static void gen_compute(cf_strbuf *b, const uf_spec *sp, const uf_loop *l, int nin, int nout, int mode,
                        const char *ind)
{
    cf_strbuf_printf(b, "%sconst auto r = %s(", ind, l->fn.fn_name);
    for (int i = 0; i < nin; i++) {
        if (i)
            cf_strbuf_printf(b, ", ");
        gen_input_value(b, sp, l, i, mode);
    }
    cf_strbuf_printf(b, ");\n");
    for (int o = 0; o < nout; o++) {
        int i = nin + o;
        const char *st = cf_dtype_ctype((cf_dtype)sp->dtype[i]);
        char field[16] = "";
        if (nout > 1)
            snprintf(field, sizeof field, ".f%d", o);
        if (mode == M_VEC)
            cf_strbuf_printf(b, "%sout%d[u].v[e] = ", ind, i);
        else
            cf_strbuf_printf(b, "%s*(%s *)(p.op[%d].ptr + off[%d]) = ", ind, st, i, i);
        if (l->types[i] == (cf_dtype)sp->dtype[i])
            cf_strbuf_printf(b, "r%s;\n", field);
        else
            cf_strbuf_printf(b, "cf_cast<%s>(r%s);\n", st, field);
    }
}

/* The where-mask test, opening a block, or nothing. */
static void gen_where_open(cf_strbuf *b, const uf_spec *sp, int w, int mode, const char *ind)
{
    if (!sp->has_where)
        return;
    if (sp->kind[w] == K_UNIFORM) {
        cf_strbuf_printf(b, "%sif (v%d) {\n", ind, w);
        return;
    }
    cf_strbuf_printf(b, "%sif (", ind);
    gen_stored_value(b, sp, w, mode);
    cf_strbuf_printf(b, ") {\n");
}

static void gen_where_close(cf_strbuf *b, const uf_spec *sp, const char *ind)
{
    if (sp->has_where)
        cf_strbuf_printf(b, "%s}\n", ind);
}

/* The body of one element (mask test, call, stores) at indentation `ind`. */
static void gen_body(cf_strbuf *b, const uf_spec *sp, const uf_loop *l, int nin, int nout, int w,
                     int mode, const char *ind)
{
    char inner[64];
    snprintf(inner, sizeof inner, "%s%s", ind, sp->has_where ? "    " : "");
    gen_where_open(b, sp, w, mode, ind);
    gen_compute(b, sp, l, nin, nout, mode, inner);
    gen_where_close(b, sp, ind);
}

/* One body as a one-line macro `#define NAME ...` (the body's lines joined). */
static void gen_body_macro(cf_strbuf *b, const char *name, const uf_spec *sp, const uf_loop *l,
                           int nin, int nout, int w, int mode)
{
    cf_strbuf t = {0};
    gen_body(&t, sp, l, nin, nout, w, mode, " ");
    if (t.failed) {
        b->failed = 1;
        cf_free(t.s);
        return;
    }
    for (size_t k = 0; k < t.len; k++)
        if (t.s[k] == '\n')
            t.s[k] = ' ';
    cf_strbuf_printf(b, "#define %s%s\n", name, t.s ? t.s : "");
    cf_free(t.s);
}

/* The kernel source of a key: the loop's function, then the key as macros (its operand list
 * CF_EW_OPS, the shape's parameters, the body of one element) and the header of its shape, which
 * is the kernel (elementwise.cuh describes the operand list; ew_flat.cuh, ew_strided.cuh,
 * ew_rowvec.cuh, ew_tile.cuh the kernels). */
static cf_status generate(const cf_ufunc *u, const uf_loop *l, const uf_spec *sp, char **out)
{
    int nin = u->nin, nout = u->nout, w = sp->has_where ? nin + nout : -1;
    cf_strbuf b = {0};
    /* the runtime header first, so that a loop's source may use cf_float32, cf_cast, ... without
     * including it (its include guard makes a source's own #include harmless) */
    cf_strbuf_printf(&b, "#include \"cufunc/runtime.cuh\"\n%s\n#include \"cufunc/elementwise.cuh\"\n\n",
                     l->fn.source);
    cf_strbuf_printf(&b, "#define CF_EW_BLOCK %d\n#define CF_EW_NOPS %d\n#define CF_EW_OPS(F, sfx, pfx)",
                     (int)sp->block, sp->nops);
    /* index, kind, role (loaded, output, output loaded under a mask), stored and loop types, size */
    for (int i = 0; i < sp->nops; i++) {
        char role = is_loaded(sp, i, nin, w) ? 'L' : sp->has_where ? 'W' : 'O';
        cf_strbuf_printf(&b, " \\\n    F(sfx, pfx, %d, %c, %c, %s, %s, %d)", i, sp->kind[i], role,
                         cf_dtype_ctype((cf_dtype)sp->dtype[i]),
                         i == w ? "cf_bool" : cf_dtype_ctype(l->types[i]),
                         (int)cf_dtype_size((cf_dtype)sp->dtype[i]));
    }
    cf_strbuf_printf(&b, "\n");
    if (sp->shape != SH_FLAT)
        cf_strbuf_printf(&b, "#define CF_EW_ND %d\n#define CF_EW_I %s\n#define CF_EW_O %s\n",
                         sp->ndim, sp->index32 ? "unsigned" : "unsigned long long",
                         sp->index32 ? "int" : "long long");
    const char *hdr = "ew_strided";
    switch (sp->shape) {
    case SH_FLAT:
    case SH_ROWVEC:
        cf_strbuf_printf(&b, "#define CF_EW_V %d\n#define CF_EW_U %d\n", sp->vec, sp->unroll);
        gen_body_macro(&b, "CF_EW_BODY_VEC", sp, l, nin, nout, w, M_VEC);
        if (sp->shape == SH_FLAT && sp->vec > 1)
            gen_body_macro(&b, "CF_EW_BODY_MEM", sp, l, nin, nout, w, M_MEM);
        hdr = sp->shape == SH_FLAT ? "ew_flat" : "ew_rowvec";
        break;
    case SH_TILE:
        cf_strbuf_printf(&b, "#define CF_EW_TR %d\n#define CF_EW_TILE_PRELOAD %d\n"
                         "#define CF_EW_TILE_PIPELINE %d\n", sp->tile_rows, !!sp->tile_preload,
                         !!sp->tile_pipeline);
        gen_body_macro(&b, "CF_EW_BODY_TILE", sp, l, nin, nout, w, M_TILE);
        hdr = "ew_tile";
        break;
    default:
        gen_body_macro(&b, "CF_EW_BODY_MEM", sp, l, nin, nout, w, M_MEM);
        break;
    }
    cf_strbuf_printf(&b, "#include \"cufunc/%s.cuh\"\n", hdr);
    if (b.failed) {
        cf_free(b.s);
        return CF_ERR_NOMEM;
    }
    *out = b.s;
    return CF_OK;
}

/* ---- planning a launch ------------------------------------------------------------------- */

/* Everything a launch derives from its operands: the plan, which plan operand each launch operand
 * is (-1 for scalars), the views (not copied), and the specialisation. */
typedef struct uf_launch {
    cf_plan_small plan;
    int plan_of[UF_NOPS];
    const cf_array *array[UF_NOPS];
    uf_spec spec;
} uf_launch;

/* Row-vector preconditions (see the top of the file); on success the kinds and VEC are set. */
static int choose_rowvec(uf_launch *L, int nin, int w)
{
    const cf_plan_small *pl = &L->plan;
    uf_spec *sp = &L->spec;
    const int nd = pl->ndim;
    if (nd < 1)
        return 0;
    char kind[UF_NOPS];
    int maxsize = 0;
    for (int i = 0; i < sp->nops; i++) {
        kind[i] = sp->kind[i];
        int j = L->plan_of[i];
        if (j < 0 || sp->kind[i] == K_UNIFORM)
            continue;
        int64_t item = (int64_t)cf_dtype_size((cf_dtype)sp->dtype[i]);
        int64_t s = pl->strides[j][nd - 1];
        if (s == item) {
            kind[i] = K_CONTIG;
            if (item > maxsize)
                maxsize = (int)item;
        } else if (s == 0 && is_loaded(sp, i, nin, w)) {
            kind[i] = K_BCAST;
        } else {
            return 0;
        }
    }
    if (maxsize == 0)
        return 0;
    for (int vec = 16 / maxsize; vec >= 2; vec /= 2) {
        if (pl->shape[nd - 1] % vec)
            continue;
        int ok = 1;
        for (int i = 0; i < sp->nops && ok; i++) {
            if (kind[i] != K_CONTIG)
                continue;
            int64_t bytes = vec * (int64_t)cf_dtype_size((cf_dtype)sp->dtype[i]);
            ok = L->array[i]->data % (uint64_t)bytes == 0;
            for (int k = 0; k < nd - 1 && ok; k++)
                ok = cf_abs64(pl->strides[L->plan_of[i]][k]) % bytes == 0;
        }
        if (ok) {
            memcpy(sp->kind, kind, (size_t)sp->nops);
            sp->vec = (uint8_t)vec;
            return 1;
        }
    }
    return 0;
}

/* Tile preconditions (see the top of the file); on success the kinds are set. */
static int choose_tile(uf_launch *L, int nin, int w)
{
    const cf_plan_small *pl = &L->plan;
    uf_spec *sp = &L->spec;
    const int nd = pl->ndim;
    /* both tile axes at least a tile long: otherwise most threads of a tile would idle */
    if (nd < 2 || pl->shape[nd - 1] < UF_TILE || pl->shape[nd - 2] < UF_TILE)
        return 0;
    char kind[UF_NOPS];
    int staged = 0;
    int64_t smem = 0;
    for (int i = 0; i < sp->nops; i++) {
        kind[i] = sp->kind[i];
        int j = L->plan_of[i];
        if (j < 0 || sp->kind[i] == K_UNIFORM)
            continue;
        int64_t item = (int64_t)cf_dtype_size((cf_dtype)sp->dtype[i]);
        int64_t s_col = pl->strides[j][nd - 1], s_row = pl->strides[j][nd - 2];
        if (!is_loaded(sp, i, nin, w)) {
            if (s_col != item)
                return 0;
            kind[i] = K_STRIDED;
        } else if (s_col == item || s_col == 0) {
            kind[i] = K_STRIDED;
        } else if (s_row == item || s_row == -item) {
            kind[i] = K_TRANS; /* consecutive threads read consecutive addresses, either way */
            staged++;
            smem += (int64_t)UF_TILE * (UF_TILE + 1) * item;
        } else {
            return 0;
        }
    }
    if (!staged || smem > UF_TILE_SMEM_MAX)
        return 0;
    memcpy(sp->kind, kind, (size_t)sp->nops);
    return 1;
}

static cf_status prepare(const cf_ufunc *u, int loop, const cf_operand *ops, const cf_array *where,
                         int ndim, const int64_t *shape, uf_launch *L)
{
    if (!u || !ops || loop < 0 || loop >= u->nloops)
        return cf_error_set(CF_ERR_INVALID, "ufunc launch: bad ufunc, loop or operands");
    if (ndim < 0 || ndim > CF_MAX_DIMS || (ndim && !shape))
        return cf_error_set(CF_ERR_INVALID, "ufunc launch: bad loop shape (ndim %d)", ndim);
    const cf_ew_knobs *knobs = cf_ew_knobs_get();
    int nin = u->nin, nout = u->nout, nops = nin + nout + (where ? 1 : 0);
    int w = where ? nin + nout : -1;
    uf_spec *sp = &L->spec;
    memset(sp, 0, sizeof *sp);
    sp->loop = loop;
    sp->nops = (uint8_t)nops;
    sp->has_where = where != NULL;

    /* Plan order: outputs first (their memory order decides the axis order), inputs, mask. */
    const cf_array *plan_ops[UF_NOPS];
    int np = 0;
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < nops; i++) {
            int is_out = i >= nin && i < nin + nout, is_where = i == w;
            if ((pass == 0) != is_out || (pass == 2) != is_where)
                continue;
            const cf_array *a = is_where ? where : ops[i].is_scalar ? NULL : &ops[i].array;
            L->array[i] = a;
            L->plan_of[i] = -1;
            if (!a) {
                if (is_out)
                    return cf_error_set(CF_ERR_INVALID, "output %d must be an array", i - nin);
                if (!cf_dtype_valid(ops[i].scalar_dtype))
                    return cf_error_set(CF_ERR_TYPE, "input %d: invalid scalar dtype", i);
                sp->kind[i] = K_SCALAR;
                sp->dtype[i] = (uint8_t)ops[i].scalar_dtype;
                continue;
            }
            if (!cf_dtype_valid(a->dtype))
                return cf_error_set(CF_ERR_TYPE, "operand %d: invalid dtype", i);
            if (is_where && a->dtype != CF_BOOL)
                return cf_error_set(CF_ERR_TYPE, "where= must be a bool array, not %s",
                                    cf_dtype_name(a->dtype));
            if (is_out && !cf_array_has_shape(a, ndim, shape))
                return cf_error_set(CF_ERR_INVALID, "output %d does not have the loop's shape",
                                    i - nin);
            sp->dtype[i] = (uint8_t)a->dtype;
            L->plan_of[i] = np;
            plan_ops[np++] = a;
        }
    cf_status st = cf_plan_small_make(&L->plan, np, plan_ops, ndim, shape);
    const cf_plan_small *pl = &L->plan;
    if (st && st != CF_ERR_UNSUPPORTED) /* unsupported: more axes than a small plan holds */
        return st;
    if (st || pl->ndim > CF_EW_MAX_NDIM)
        return cf_error_set(CF_ERR_UNSUPPORTED, "the operands' layouts leave %d axes that cannot "
                            "be merged; element-wise kernels handle at most %d (make an operand "
                            "contiguous first)", pl->ndim, CF_EW_MAX_NDIM);

    /* Kinds and the kernel shape. */
    int flat = pl->index32, maxsize = 1;
    for (int i = 0; i < nops; i++) {
        int j = L->plan_of[i];
        if (j < 0)
            continue;
        int all_zero = pl->ndim > 0;
        for (int k = 0; k < pl->ndim; k++)
            all_zero &= pl->strides[j][k] == 0;
        if (all_zero && !is_loaded(sp, i, nin, w))
            return cf_error_set(CF_ERR_INVALID, "output %d has a zero stride: its elements "
                                "overlap", i - nin);
        sp->kind[i] = all_zero ? K_UNIFORM : pl->contiguous[j] ? K_CONTIG : K_STRIDED;
        if (sp->kind[i] == K_STRIDED)
            flat = 0;
        if (sp->kind[i] == K_CONTIG && (int)cf_dtype_size((cf_dtype)sp->dtype[i]) > maxsize)
            maxsize = (int)cf_dtype_size((cf_dtype)sp->dtype[i]);
    }
    sp->index32 = (uint8_t)pl->index32;
    sp->block = (uint16_t)knobs->block;
    sp->unroll = (uint8_t)knobs->unroll;
    if (flat) {
        sp->shape = SH_FLAT;
        int vec = 16 / maxsize;
        for (int i = 0; i < nops && vec > 1; i++)
            if (sp->kind[i] == K_CONTIG &&
                L->array[i]->data % ((uint64_t)vec * cf_dtype_size((cf_dtype)sp->dtype[i])) != 0)
                vec = 1;
        sp->vec = (uint8_t)(vec < 1 ? 1 : vec);
        return CF_OK;
    }
    sp->ndim = (uint8_t)pl->ndim;
    if (choose_rowvec(L, nin, w)) {
        sp->shape = SH_ROWVEC;
        return CF_OK;
    }
    if (choose_tile(L, nin, w)) {
        sp->shape = SH_TILE;
        sp->unroll = 1;
        sp->tile_rows = (uint8_t)knobs->tile_rows;
        sp->tile_preload = (uint8_t)knobs->tile_preload;
        sp->tile_pipeline = (uint8_t)knobs->tile_pipeline;
        if (sp->tile_pipeline)
            sp->tile_preload = 1; /* its loads all go before the barrier */
        sp->block = (uint16_t)(UF_TILE * knobs->tile_rows);
        return CF_OK;
    }
    /* the strided kernel walks at least one axis, also when the plan merged all of them
     * (a contiguous plan over more than 2^31 elements) */
    sp->shape = SH_STRIDED;
    sp->ndim = (uint8_t)(pl->ndim > 0 ? pl->ndim : 1);
    sp->vec = 1;
    sp->unroll = 1;
    for (int i = 0; i < nops; i++)
        if (sp->kind[i] == K_CONTIG)
            sp->kind[i] = K_STRIDED;
    return CF_OK;
}

cf_status cf_ufunc_kernel_source(cf_ufunc *u, int loop, const cf_operand *ops,
                                 const cf_array *where, int ndim, const int64_t *shape,
                                 char **source)
{
    if (!source)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_kernel_source: source is NULL");
    *source = NULL;
    uf_launch *L = cf_malloc(sizeof *L);
    if (!L)
        return CF_ERR_NOMEM;
    cf_status st = prepare(u, loop, ops, where, ndim, shape, L);
    if (!st)
        st = generate(u, &u->loops[L->spec.loop], &L->spec, source);
    cf_free(L);
    return st;
}

/* ---- the kernel table --------------------------------------------------------------------- */

typedef struct uf_build {
    cf_ufunc *u;
    const uf_spec *sp;
} uf_build;

/* cf_kbuild_fn of the element-wise engine: generate, compile (through the compile cache), load,
 * and the grid cap (aux: resident blocks on the whole device; 0 for no cap). Runs without the
 * ufunc's lock; the loop is copied under it (add_loop may grow the array meanwhile). */
static cf_status build_kernel(void *ctx, cf_function **fn, int64_t *aux)
{
    const uf_build *c = ctx;
    const uf_spec *sp = c->sp;
    pthread_mutex_lock(&c->u->lock);
    uf_loop l = c->u->loops[sp->loop];
    pthread_mutex_unlock(&c->u->lock);
    char *src = NULL;
    cf_module *m = NULL;
    cf_device_props props;
    int per_sm = 0;
    cf_status st = generate(c->u, &l, sp, &src);
    if (!st)
        st = cf_loop_fn_load(&l.fn, sp->device, src, &m);
    if (!st)
        st = cf_module_function(m, "cf_ew", fn);
    if (!st)
        st = cf_function_max_active_blocks(*fn, sp->block, 0, &per_sm);
    if (!st)
        st = cf_device_props_get(sp->device, &props);
    if (!st) {
        const cf_ew_knobs *knobs = cf_ew_knobs_get();
        int cap = sp->shape == SH_TILE     ? knobs->tile_blocks_per_sm
                  : sp->shape == SH_ROWVEC ? knobs->row_blocks_per_sm
                                           : knobs->blocks_per_sm;
        if (sp->shape == SH_TILE && sp->tile_pipeline && cap == 0)
            cap = per_sm > 0 ? per_sm : 1; /* the blocks that fit, each looping over tiles */
        if (per_sm < 1)
            per_sm = 1;
        if (cap > 0 && per_sm > cap)
            per_sm = cap;
        /* no cap: one pass over the data (grid-stride loops run once) */
        *aux = cap > 0 ? (int64_t)props.multiprocessor_count * per_sm : 0;
    }
    cf_free(src);
    return st;
}

/* The kernel for a spec (its device set): from the kernel cache, else built once (ktable.h). */
static cf_status get_kernel(cf_ufunc *u, const uf_spec *sp, int only_ready, cf_kentry *out)
{
    uf_build c = {u, sp};
    return cf_ktable_get(&u->table, &u->lock, sp, sizeof *sp, only_ready, build_kernel, &c, out);
}

/* ---- launch ------------------------------------------------------------------------------- */

/* The header and operand records of the strided, row-vector and tile kernels; returns the items
 * the grid covers (elements, vectors or tiles). */
static int64_t pack_strided(const uf_launch *L, const cf_operand *ops, cf_ew_header *h,
                            cf_ew_operand *op)
{
    const cf_plan_small *pl = &L->plan;
    const uf_spec *sp = &L->spec;
    const int nd = sp->ndim;
    int64_t items = pl->size;
    h->ndim = nd;
    if (pl->ndim == 0) { /* strided kernel over one merged axis */
        h->shape[0] = pl->size;
        cf_fastdiv_init(&h->div[0], (uint64_t)pl->size, sp->index32);
    } else {
        for (int k = 0; k < nd; k++)
            h->shape[k] = pl->shape[k];
        if (sp->shape == SH_ROWVEC) {
            h->shape[nd - 1] /= sp->vec;
            items = pl->size / sp->vec;
        }
        for (int k = 0; k < nd; k++)
            cf_fastdiv_init(&h->div[k], (uint64_t)h->shape[k], sp->index32);
        if (sp->shape == SH_TILE) {
            int64_t tr = (pl->shape[nd - 2] + UF_TILE - 1) / UF_TILE;
            int64_t tc = (pl->shape[nd - 1] + UF_TILE - 1) / UF_TILE;
            cf_fastdiv_init(&h->div[nd - 2], (uint64_t)tr, sp->index32);
            cf_fastdiv_init(&h->div[nd - 1], (uint64_t)tc, sp->index32);
            items = tr * tc;
            for (int k = 0; k < nd - 2; k++)
                items *= pl->shape[k];
        }
    }
    h->n = items;
    for (int i = 0; i < sp->nops; i++) {
        int j = L->plan_of[i];
        if (j < 0) {
            memcpy(op[i].scalar, ops[i].scalar, sizeof op[i].scalar);
            continue;
        }
        op[i].ptr = L->array[i]->data;
        if (pl->ndim == 0) {
            op[i].strides[0] = (int64_t)cf_dtype_size((cf_dtype)sp->dtype[i]);
            continue;
        }
        for (int k = 0; k < nd; k++)
            op[i].strides[k] = pl->strides[j][k];
        if (sp->shape == SH_ROWVEC && sp->kind[i] == K_CONTIG)
            op[i].strides[nd - 1] *= sp->vec;
    }
    return items;
}

/* The parameter block of a launch: a header, then one operand record per operand. */
typedef union uf_params {
    unsigned char bytes[CF_EW_HEADER_BYTES + UF_NOPS * CF_EW_OPERAND_BYTES];
    uint64_t align;
} uf_params;

/* The parameters, grid and block of a prepared launch whose kernel has this grid cap; returns
 * the parameter bytes (the kernel's parameter size). */
static size_t pack_launch(const uf_launch *L, const cf_operand *ops, int64_t max_resident,
                          uf_params *params, unsigned grid[3], unsigned block[3])
{
    const cf_plan_small *pl = &L->plan;
    const uf_spec *sp = &L->spec;
    int64_t items;
    size_t nbytes;
    if (sp->shape == SH_FLAT) {
        nbytes = CF_EW_FLAT_HEADER_BYTES + (size_t)sp->nops * CF_EW_FLAT_OPERAND_BYTES;
        memset(params->bytes, 0, nbytes);
        int64_t n = pl->size;
        memcpy(params->bytes, &n, sizeof n);
        cf_ew_flat_operand *op = (cf_ew_flat_operand *)(params->bytes + CF_EW_FLAT_HEADER_BYTES);
        for (int i = 0; i < sp->nops; i++) {
            if (L->plan_of[i] < 0)
                memcpy(op[i].scalar, ops[i].scalar, sizeof op[i].scalar);
            else
                op[i].ptr = L->array[i]->data;
        }
        items = (pl->size / sp->vec + sp->unroll - 1) / sp->unroll;
    } else {
        nbytes = CF_EW_HEADER_BYTES + (size_t)sp->nops * CF_EW_OPERAND_BYTES;
        memset(params->bytes, 0, nbytes);
        items = pack_strided(L, ops, (cf_ew_header *)params->bytes,
                             (cf_ew_operand *)(params->bytes + CF_EW_HEADER_BYTES));
        if (sp->shape == SH_ROWVEC)
            items = (items + sp->unroll - 1) / sp->unroll;
    }
    if (items < 1)
        items = 1;
    block[0] = sp->block;
    block[1] = block[2] = 1;
    int64_t per_block = sp->block;
    if (sp->shape == SH_TILE) {
        block[0] = UF_TILE;
        block[1] = sp->tile_rows;
        per_block = 1; /* one tile per block per iteration */
    }
    grid[0] = cf_plan_grid(items, per_block, max_resident);
    grid[1] = grid[2] = 1;
    if (sp->index32 && sp->shape != SH_TILE) {
        /* 32-bit grid-stride loops: base + unroll * gridDim.x * blockDim.x stays below 2^32 */
        uint64_t cap = ((uint64_t)1 << 31) / ((uint64_t)sp->block * sp->unroll);
        if (grid[0] > cap)
            grid[0] = (unsigned)cap;
    }
    return nbytes;
}

/* ---- repeat launches --------------------------------------------------------------------------
 * A loop of small calls (the same arrays, or arrays of one layout at the same addresses) would
 * plan, look up and pack the same launch every time, which costs a tenth of the launch itself.
 * Each thread keeps its last launch: the inputs it was derived from (the key) and what they gave
 * (the function, grid, block and parameter bytes). A launch whose key is byte-for-byte the same
 * reuses them. Only launches without where=, of at most UF_REPEAT_OPS operands and
 * UF_REPEAT_DIMS axes (loop and operands), whose parameters fit the record, are kept. The ufunc is
 * named by its serial number, never reused, so a record outliving its ufunc (whose kernels it
 * names) can never match again. */
#define UF_REPEAT_DIMS 4
#define UF_REPEAT_OPS 8

typedef struct uf_repeat_op {
    uint64_t value[2]; /* an array's address, or a scalar's bytes */
    int32_t dtype, ndim; /* ndim -1: a scalar */
    int32_t device, pad;
    int64_t shape[UF_REPEAT_DIMS], strides[UF_REPEAT_DIMS];
} uf_repeat_op;

typedef struct uf_repeat_key {
    uint64_t serial;
    const cf_stream *s;
    int32_t device, loop, ndim, nops;
    int64_t shape[UF_REPEAT_DIMS];
    uf_repeat_op op[UF_REPEAT_OPS];
} uf_repeat_key;

typedef struct uf_repeat {
    uf_repeat_key key; /* serial 0: empty */
    size_t key_bytes;
    cf_ufunc_record rec;
} uf_repeat;

static _Thread_local uf_repeat last_launch;

/* The key of a launch into *k (zero-filled where unused); its length in bytes, or 0 when the
 * launch is not one to keep. */
static size_t repeat_key(const cf_ufunc *u, int loop, const cf_stream *s, const cf_operand *ops,
                         const cf_array *where, int ndim, const int64_t *shape, uf_repeat_key *k)
{
    const int nops = u->nin + u->nout;
    if (where || nops > UF_REPEAT_OPS || ndim < 0 || ndim > UF_REPEAT_DIMS)
        return 0;
    size_t bytes = offsetof(uf_repeat_key, op) + (size_t)nops * sizeof(uf_repeat_op);
    memset(k, 0, bytes);
    k->serial = u->serial;
    k->s = s;
    k->device = cf_stream_device(s);
    k->loop = loop;
    k->ndim = ndim;
    k->nops = nops;
    for (int d = 0; d < ndim; d++)
        k->shape[d] = shape[d];
    for (int i = 0; i < nops; i++) {
        uf_repeat_op *o = &k->op[i];
        if (ops[i].is_scalar) {
            memcpy(o->value, ops[i].scalar, sizeof o->value);
            o->dtype = (int32_t)ops[i].scalar_dtype;
            o->ndim = -1;
            continue;
        }
        const cf_array *a = &ops[i].array;
        if (a->ndim < 0 || a->ndim > UF_REPEAT_DIMS)
            return 0;
        o->value[0] = a->data;
        o->dtype = (int32_t)a->dtype;
        o->ndim = a->ndim;
        o->device = a->device;
        for (int d = 0; d < a->ndim; d++) {
            o->shape[d] = a->shape[d];
            o->strides[d] = a->strides[d];
        }
    }
    return bytes;
}

/* A record's header and the parameter bytes it uses. */
static void record_copy(cf_ufunc_record *dst, const cf_ufunc_record *src)
{
    memcpy(dst, src, offsetof(cf_ufunc_record, params));
    memcpy(dst->params.bytes, src->params.bytes, src->param_bytes);
}

static cf_status launch(cf_ufunc *u, int loop, cf_stream *s, const cf_operand *ops,
                        const cf_array *where, int ndim, const int64_t *shape, int only_ready,
                        int *launched, cf_ufunc_record *record)
{
    *launched = 0;
    if (record)
        record->fn = NULL;
    if (!s)
        return cf_error_set(CF_ERR_INVALID, "ufunc launch: stream is NULL");
    if (!u || !ops)
        return cf_error_set(CF_ERR_INVALID, "ufunc launch: bad ufunc, loop or operands");
    uf_repeat_key key;
    size_t key_bytes = repeat_key(u, loop, s, ops, where, ndim, shape, &key);
    uf_repeat *r = &last_launch;
    if (key_bytes && key_bytes == r->key_bytes && memcmp(&key, &r->key, key_bytes) == 0) {
        cf_status st = cf_ufunc_replay(&r->rec, s);
        *launched = st == CF_OK;
        if (st == CF_OK && record)
            record_copy(record, &r->rec);
        return st;
    }
    uf_launch L;
    cf_status st = prepare(u, loop, ops, where, ndim, shape, &L);
    if (st)
        return st;
    const cf_plan_small *pl = &L.plan;
    uf_spec *sp = &L.spec;
    if (pl->size == 0) {
        *launched = 1; /* nothing to do, done */
        return CF_OK;
    }
    int device = cf_stream_device(s);
    if (device < 0)
        return cf_error_set(CF_ERR_INVALID, "ufunc launch: s is not a live stream");
    for (int i = 0; i < sp->nops; i++)
        if (L.array[i] && L.array[i]->device != device)
            return cf_error_set(CF_ERR_INVALID, "operand %d is on device %d, the launch on "
                                "device %d", i, L.array[i]->device, device);
    sp->device = device;
    cf_kentry k;
    st = get_kernel(u, sp, only_ready, &k);
    if (st || !k.fn)
        return st;

    uf_params params;
    unsigned grid[3], block[3];
    size_t nbytes = pack_launch(&L, ops, k.aux, &params, grid, block);
    void *args[1] = {params.bytes};
    /* large launches overlap the previous kernel's tail (every cf_ew kernel waits for it before
     * touching memory); small ones keep the cheaper plain launch */
    const cf_ew_knobs *knobs = cf_ew_knobs_get();
    int overlap = knobs->pdl && pl->size >= knobs->pdl_min;
    st = cf_launch_ex(k.fn, grid, block, 0, s, args, overlap);
    *launched = st == CF_OK;
    if (st != CF_OK || nbytes > CF_UFUNC_RECORD_PARAM_BYTES || (!key_bytes && !record))
        return st;
    cf_ufunc_record *rec = key_bytes ? &r->rec : record;
    rec->fn = k.fn;
    rec->overlap = overlap;
    memcpy(rec->grid, grid, sizeof grid);
    memcpy(rec->block, block, sizeof block);
    rec->param_bytes = nbytes;
    memcpy(rec->params.bytes, params.bytes, nbytes);
    if (key_bytes) {
        memcpy(&r->key, &key, key_bytes);
        r->key_bytes = key_bytes;
        if (record)
            record_copy(record, rec);
    }
    return st;
}

cf_status cf_ufunc_launch(cf_ufunc *u, int loop, cf_stream *s, const cf_operand *ops,
                          const cf_array *where, int ndim, const int64_t *shape)
{
    int launched;
    return launch(u, loop, s, ops, where, ndim, shape, 0, &launched, NULL);
}

cf_status cf_ufunc_launch_if_ready(cf_ufunc *u, int loop, cf_stream *s, const cf_operand *ops,
                                   const cf_array *where, int ndim, const int64_t *shape,
                                   int *launched, cf_ufunc_record *record)
{
    int dummy;
    return launch(u, loop, s, ops, where, ndim, shape, 1, launched ? launched : &dummy, record);
}

cf_status cf_ufunc_replay(const cf_ufunc_record *record, cf_stream *s)
{
    if (!record || !record->fn)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_replay: the record is empty");
    void *args[1] = {(void *)record->params.bytes};
    return cf_launch_ex(record->fn, record->grid, record->block, 0, s, args, record->overlap);
}

/* ---- conveniences for C programs (ufunc.h) ------------------------------------------------- */

/* "ufunc 'name' loop 2 (float32, float32) -> float32: " */
static const char *loop_what(const cf_ufunc *u, int loop, char *buf, size_t cap)
{
    char types[512];
    cf_loop_types_text(u->loops[loop].types, u->nin, u->nout, types, sizeof types);
    snprintf(buf, cap, "ufunc '%s' loop %d %s", u->name, loop, types);
    return buf;
}

cf_status cf_ufunc_compile(cf_ufunc *u, int loop, const cf_operand *ops, const cf_array *where,
                           int ndim, const int64_t *shape, int cc_major, int cc_minor, int *from)
{
    if (cc_major < 1 || cc_minor < 0)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_compile: compute capability %d.%d",
                            cc_major, cc_minor);
    uf_launch *L = cf_malloc(sizeof *L);
    if (!L)
        return CF_ERR_NOMEM;
    char *src = NULL, what[640];
    cf_status st = prepare(u, loop, ops, where, ndim, shape, L);
    if (!st)
        st = generate(u, &u->loops[L->spec.loop], &L->spec, &src);
    if (!st)
        st = cf_loop_fn_compile(&u->loops[loop].fn, src, cc_major, cc_minor,
                                loop_what(u, loop, what, sizeof what), from);
    cf_free(src);
    cf_free(L);
    return st;
}

/* Contiguous 1-D operands of n elements of `types` (NULL: the loop's), with addresses aligned as
 * cf_mem_alloc's (the alignment decides the vector width, as it would at a launch). */
static cf_status contiguous_ops(const cf_ufunc *u, int loop, const cf_dtype *types, int64_t n,
                                int device, const uint64_t *data, cf_operand *ops)
{
    if (!u || loop < 0 || loop >= u->nloops)
        return cf_error_set(CF_ERR_INVALID, "ufunc: bad ufunc or loop %d", loop);
    for (int i = 0; i < u->nin + u->nout; i++) {
        memset(&ops[i], 0, sizeof ops[i]);
        cf_dtype t = types ? types[i] : u->loops[loop].types[i];
        uint64_t addr = data ? data[i] : ((uint64_t)(i + 1) << 32);
        cf_status st = cf_array_init_contiguous(&ops[i].array, addr, t, 1, &n, 'C', device);
        if (st)
            return cf_error_prefix("operand %d", i);
    }
    return CF_OK;
}

cf_status cf_ufunc_compile_contiguous(cf_ufunc *u, int loop, const cf_dtype *types, int64_t n,
                                      int cc_major, int cc_minor, int *from)
{
    cf_operand ops[UF_MAX_ARGS];
    cf_status st = contiguous_ops(u, loop, types, n, 0, NULL, ops);
    if (st)
        return st;
    return cf_ufunc_compile(u, loop, ops, NULL, 1, &n, cc_major, cc_minor, from);
}

cf_status cf_ufunc_check(cf_ufunc *u, int loop)
{
    if (!u || loop < -1 || loop >= u->nloops)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_check: bad ufunc or loop %d", loop);
    int major, minor;
    cf_loop_check_arch(&major, &minor);
    for (int l = loop < 0 ? 0 : loop; l < (loop < 0 ? u->nloops : loop + 1); l++) {
        cf_status st = cf_ufunc_compile_contiguous(u, l, NULL, 1 << 20, major, minor, NULL);
        if (st)
            return st;
    }
    return CF_OK;
}

/* The loop for these input dtypes, as a call would pick it. */
static cf_status resolve_types(const cf_ufunc *u, const cf_dtype *types, int *loop)
{
    if (!u || !types)
        return cf_error_set(CF_ERR_INVALID, "ufunc call: NULL ufunc or types");
    return cf_ufunc_resolve(u, types, NULL, loop);
}

cf_status cf_ufunc_call(cf_ufunc *u, cf_stream *s, int64_t n, const cf_dtype *types,
                        const uint64_t *args)
{
    int loop = -1;
    cf_status st = resolve_types(u, types, &loop);
    if (st)
        return st;
    if (!s || !args)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_call: NULL stream or args");
    cf_operand ops[UF_MAX_ARGS];
    if ((st = contiguous_ops(u, loop, types, n, cf_stream_device(s), args, ops)))
        return st;
    return cf_ufunc_launch(u, loop, s, ops, NULL, 1, &n);
}

/* Argument names of cf_ufunc_from_expr: x, y, z, w, then x4, x5, ... */
static void arg_name(int i, char buf[16])
{
    static const char *const first[] = {"x", "y", "z", "w"};
    if (i < 4)
        snprintf(buf, 16, "%s", first[i]);
    else
        snprintf(buf, 16, "x%d", i);
}

cf_status cf_ufunc_from_expr(const char *name, const char *expr, int nin, const cf_dtype *types,
                             int nloops, cf_ufunc **out)
{
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_from_expr: out is NULL");
    *out = NULL;
    if (!expr || !*expr || !types || nloops < 1)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_from_expr: needs an expression and at least "
                            "one loop's types");
    cf_ufunc *u = NULL;
    cf_status st = cf_ufunc_create(name, nin, 1, &u);
    for (int l = 0; !st && l < nloops; l++) {
        const cf_dtype *t = types + (size_t)l * (size_t)(nin + 1);
        for (int i = 0; i <= nin; i++)
            if (!cf_dtype_valid(t[i]))
                st = cf_error_set(CF_ERR_TYPE, "cf_ufunc_from_expr: loop %d, type %d is not a "
                                  "valid dtype", l, i);
        if (st)
            break;
        /* __forceinline__: the body is the expression; the result is converted to the output
         * type as NumPy would store it (cf_cast) */
        cf_strbuf b = {0};
        char fn[32], arg[16];
        snprintf(fn, sizeof fn, "cf_expr_%d", l);
        cf_strbuf_printf(&b, "__device__ __forceinline__ %s %s(", cf_dtype_ctype(t[nin]), fn);
        for (int i = 0; i < nin; i++) {
            arg_name(i, arg);
            cf_strbuf_printf(&b, "%s%s %s", i ? ", " : "", cf_dtype_ctype(t[i]), arg);
        }
        cf_strbuf_printf(&b, ")\n{\n    return cf_cast<%s>(\n%s\n    );\n}\n",
                         cf_dtype_ctype(t[nin]), expr);
        if (b.failed)
            st = CF_ERR_NOMEM;
        int index = -1;
        if (!st)
            st = cf_ufunc_add_loop(u, t, b.s, fn, NULL, 0, &index);
        cf_free(b.s);
        if (!st)
            st = cf_ufunc_check(u, index);
    }
    if (st) {
        cf_ufunc_free(u);
        return st;
    }
    *out = u;
    return CF_OK;
}
