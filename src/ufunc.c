/* ufunc.c: the element-wise engine (include/cufunc/ufunc.h): loops, loop resolution, kernel
 * specialisation and generation, launch.
 *
 * Kernels are generated as CUDA C text per specialisation key and compiled through the cache
 * (compile.h). Two shapes of kernel:
 *   - contiguous: every array operand is visited at consecutive addresses (one coalesced axis, or
 *     one element). Flat 32-bit index, VEC-wide aligned vector loads and stores, UNROLL independent
 *     vectors per thread per iteration, grid-stride loop over a grid sized to the device.
 *   - strided: ND coalesced axes (1..CF_EW_MAX_NDIM); each element's offsets come from its linear
 *     index through multiply-high divisions by the extents (32-bit when the plan allows), never a
 *     64-bit division.
 * Scalars travel in the kernel parameters; an input array whose every stride is 0 after
 * broadcasting (a 0-d array, say) is "uniform": loaded once per thread, outside the loop.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cufunc/compile.h"
#include "cufunc/kernel_args.h"
#include "cufunc/ufunc.h"
#include "error.h"
#include "hash.h"

#define UF_MAX_ARGS 32
#define UF_BLOCK 256
#define UF_UNROLL 2

typedef struct uf_loop {
    cf_dtype types[UF_MAX_ARGS];
    char *source;
    char *fn_name;
    char **options;
    int noptions;
} uf_loop;

typedef struct uf_kernel {
    char *key; /* NULL: empty slot */
    cf_function *fn;
    int64_t max_resident; /* blocks resident on the whole device at once */
} uf_kernel;

struct cf_ufunc {
    char *name;
    int nin, nout;
    uf_loop *loops;
    int nloops, loops_cap;
    pthread_mutex_t lock;
    uf_kernel *table;
    size_t table_cap, table_count;
};

/* ---- a growable string -------------------------------------------------------------------- */

typedef struct sbuf {
    char *s;
    size_t len, cap;
    int failed;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->s && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *s = cf_realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

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
    pthread_mutex_init(&u->lock, NULL);
    *out = u;
    return CF_OK;
fail:
    cf_free(u);
    return CF_ERR_NOMEM;
}

static void loop_clear(uf_loop *l)
{
    cf_free(l->source);
    cf_free(l->fn_name);
    for (int i = 0; i < l->noptions; i++)
        cf_free(l->options[i]);
    cf_free(l->options);
}

void cf_ufunc_free(cf_ufunc *u)
{
    if (!u)
        return;
    for (int i = 0; i < u->nloops; i++)
        loop_clear(&u->loops[i]);
    cf_free(u->loops);
    for (size_t i = 0; i < u->table_cap; i++)
        cf_free(u->table[i].key);
    cf_free(u->table);
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
    int n = (int)u->table_count;
    pthread_mutex_unlock((pthread_mutex_t *)&u->lock);
    return n;
}

static int valid_dtype(cf_dtype t) { return (unsigned)t < (unsigned)CF_NDTYPES; }

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
    if (!u || !types || !source || !fn_name || noptions < 0 || (noptions && !options))
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_add_loop: NULL argument");
    int nargs = u->nin + u->nout;
    for (int i = 0; i < nargs; i++) {
        if (!valid_dtype(types[i]))
            return cf_error_set(CF_ERR_TYPE, "loop type %d is not a valid dtype", i);
        if (types[i] == CF_FLOAT16)
            return cf_error_set(CF_ERR_UNSUPPORTED, "float16 loops are not supported yet");
    }
    for (int l = 0; l < u->nloops; l++)
        if (memcmp(u->loops[l].types, types, (size_t)u->nin * sizeof(cf_dtype)) == 0)
            return cf_error_set(CF_ERR_INVALID, "ufunc '%s' already has a loop for these input "
                                "types", u->name);
    if (u->nloops == u->loops_cap) {
        int cap = u->loops_cap ? 2 * u->loops_cap : 4;
        uf_loop *grown = cf_realloc(u->loops, (size_t)cap * sizeof *grown);
        if (!grown)
            return CF_ERR_NOMEM;
        u->loops = grown;
        u->loops_cap = cap;
    }
    uf_loop l;
    memset(&l, 0, sizeof l);
    memcpy(l.types, types, (size_t)nargs * sizeof(cf_dtype));
    l.source = cf_strdup(source);
    l.fn_name = cf_strdup(fn_name);
    if (!l.source || !l.fn_name)
        goto fail;
    if (noptions) {
        l.options = cf_calloc((size_t)noptions, sizeof(char *));
        if (!l.options)
            goto fail;
        for (int i = 0; i < noptions; i++) {
            if (!options[i] || !(l.options[i] = cf_strdup(options[i])))
                goto fail;
            l.noptions = i + 1;
        }
    }
    pthread_mutex_lock(&u->lock);
    u->loops[u->nloops] = l;
    int idx = u->nloops++;
    pthread_mutex_unlock(&u->lock);
    if (index)
        *index = idx;
    return CF_OK;
fail:
    loop_clear(&l);
    return cf_last_status() ? cf_last_status() : cf_error_set(CF_ERR_INVALID, "bad option");
}

/* ---- casting and loop resolution ---------------------------------------------------------- */

static int kind_rank(cf_dtype t)
{
    switch (cf_dtype_kind(t)) {
    case 'b': return 0;
    case 'i': case 'u': return 1;
    case 'f': return 2;
    default: return 3;
    }
}

int cf_can_cast_safe(cf_dtype from, cf_dtype to)
{
    if (!valid_dtype(from) || !valid_dtype(to))
        return 0;
    if (from == to || from == CF_BOOL)
        return 1;
    char kf = cf_dtype_kind(from), kt = cf_dtype_kind(to);
    size_t sf = cf_dtype_size(from), st = cf_dtype_size(to);
    switch (kf) {
    case 'i':
        if (kt == 'i')
            return st >= sf;
        if (kt == 'f') /* int8 -> f2, int16 -> f4, int32/int64 -> f8 */
            return sf == 8 ? st == 8 : st > sf;
        if (kt == 'c')
            return sf == 8 ? st == 16 : st > 2 * sf;
        return 0;
    case 'u':
        if (kt == 'u')
            return st >= sf;
        if (kt == 'i')
            return st > sf;
        if (kt == 'f')
            return sf == 8 ? st == 8 : st > sf;
        if (kt == 'c')
            return sf == 8 ? st == 16 : st > 2 * sf;
        return 0;
    case 'f':
        if (kt == 'f')
            return st >= sf;
        if (kt == 'c')
            return st >= 2 * sf;
        return 0;
    case 'c':
        return kt == 'c' && st >= sf;
    default:
        return 0;
    }
}

static int weak_matches(cf_dtype weak, cf_dtype loop_type)
{
    return loop_type != CF_BOOL && kind_rank(loop_type) >= kind_rank(weak);
}

/* The first loop the inputs reach: pass 0 exact, pass 1 by safe casting. -1 if none. */
static int find_loop(const cf_ufunc *u, const cf_dtype *in, const unsigned char *weak, int passes)
{
    for (int pass = 0; pass < passes; pass++)
        for (int l = 0; l < u->nloops; l++) {
            const cf_dtype *t = u->loops[l].types;
            int ok = 1;
            for (int i = 0; i < u->nin && ok; i++) {
                if (weak && weak[i])
                    ok = weak_matches(in[i], t[i]);
                else
                    ok = pass == 0 ? in[i] == t[i] : cf_can_cast_safe(in[i], t[i]);
            }
            if (ok)
                return l;
        }
    return -1;
}

cf_status cf_ufunc_find_exact(const cf_ufunc *u, const cf_dtype *in, const unsigned char *weak,
                              int *loop)
{
    if (!u || !in || !loop)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_find_exact: NULL argument");
    *loop = find_loop(u, in, weak, 1);
    return *loop >= 0 ? CF_OK : cf_error_set(CF_ERR_TYPE, "no loop for exactly these types");
}

cf_status cf_ufunc_resolve(const cf_ufunc *u, const cf_dtype *in, const unsigned char *weak,
                           int *loop)
{
    if (!u || !in || !loop)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_resolve: NULL argument");
    if ((*loop = find_loop(u, in, weak, 2)) >= 0)
        return CF_OK;
    sbuf m = {0};
    sb_printf(&m, "ufunc '%s' not supported for the input types (", u->name);
    for (int i = 0; i < u->nin; i++)
        sb_printf(&m, "%s%s%s", i ? ", " : "", weak && weak[i] ? "Python " : "",
                  cf_dtype_name(in[i]));
    sb_printf(&m, "), and the inputs could not be safely coerced to any supported types according "
                  "to the casting rule 'safe'; its loops are:");
    for (int l = 0; l < u->nloops; l++) {
        sb_printf(&m, " (");
        for (int i = 0; i < u->nin + u->nout; i++)
            sb_printf(&m, "%s%s", i == 0 ? "" : i == u->nin ? ") -> (" : ", ",
                      cf_dtype_name(u->loops[l].types[i]));
        sb_printf(&m, ")");
    }
    if (u->nloops == 0)
        sb_printf(&m, " none");
    cf_status st = cf_error_set(CF_ERR_TYPE, "%s", m.failed ? "ufunc: no matching loop" : m.s);
    cf_free(m.s);
    return st;
}

/* ---- specialisation ---------------------------------------------------------------------- */

/* Operand kinds in a key: scalar, uniform array (all strides 0), contiguous array, strided. */
enum { K_SCALAR = 'S', K_UNIFORM = 'U', K_CONTIG = 'C', K_STRIDED = 'X' };

typedef struct uf_spec {
    int loop;
    int nops;             /* nin + nout (+1 with where) */
    int has_where;
    int contiguous;       /* the contiguous kernel shape */
    int ndim;             /* strided: coalesced axes */
    int index32;
    int vec;              /* contiguous: elements per vector access */
    char kind[UF_MAX_ARGS + 1];
    cf_dtype dtype[UF_MAX_ARGS + 1];
} uf_spec;

static void spec_key(const uf_spec *sp, int device, char *key, size_t cap)
{
    size_t len = (size_t)snprintf(key, cap, "d%d l%d %s nd%d i%d v%d w%d:", device, sp->loop,
                                  sp->contiguous ? "C" : "X", sp->ndim, sp->index32, sp->vec,
                                  sp->has_where);
    for (int i = 0; i < sp->nops && len + 4 < cap; i++)
        len += (size_t)snprintf(key + len, cap - len, "%c%d", sp->kind[i], (int)sp->dtype[i]);
}

/* The C expression of input i's value in its loop type: from the loaded vector (contiguous kernel,
 * element `e` of vector `u`) or from memory at off[i] (strided kernel and tails). Scalars and
 * uniform inputs were converted once into v<i>. */
static void gen_input_value(sbuf *b, const uf_spec *sp, const uf_loop *l, int i, int from_vector)
{
    if (sp->kind[i] == K_SCALAR || sp->kind[i] == K_UNIFORM) {
        sb_printf(b, "v%d", i);
        return;
    }
    const char *lt = cf_dtype_ctype(l->types[i]), *st = cf_dtype_ctype(sp->dtype[i]);
    int same = l->types[i] == sp->dtype[i];
    if (!same)
        sb_printf(b, "cf_cast<%s>(", lt);
    if (from_vector)
        sb_printf(b, "in%d[u].v[e]", i);
    else
        sb_printf(b, "*(const %s *)(p.op[%d].ptr + off[%d])", st, i, i);
    if (!same)
        sb_printf(b, ")");
}

/* `const auto r = fn(inputs...);` then the stores of r (one output) or r.f0, r.f1, ... */
static void gen_compute(sbuf *b, const uf_spec *sp, const uf_loop *l, int nin, int nout,
                        int from_vector, const char *ind)
{
    sb_printf(b, "%sconst auto r = %s(", ind, l->fn_name);
    for (int i = 0; i < nin; i++) {
        if (i)
            sb_printf(b, ", ");
        gen_input_value(b, sp, l, i, from_vector);
    }
    sb_printf(b, ");\n");
    for (int o = 0; o < nout; o++) {
        int i = nin + o;
        const char *st = cf_dtype_ctype(sp->dtype[i]);
        char field[16] = "";
        if (nout > 1)
            snprintf(field, sizeof field, ".f%d", o);
        if (from_vector)
            sb_printf(b, "%sout%d[u].v[e] = ", ind, i);
        else
            sb_printf(b, "%s*(%s *)(p.op[%d].ptr + off[%d]) = ", ind, st, i, i);
        if (l->types[i] == sp->dtype[i])
            sb_printf(b, "r%s;\n", field);
        else
            sb_printf(b, "cf_cast<%s>(r%s);\n", st, field);
    }
}

/* The where-mask test, opening a block, or nothing. */
static void gen_where_open(sbuf *b, const uf_spec *sp, int w, int from_vector, const char *ind)
{
    if (!sp->has_where)
        return;
    if (sp->kind[w] == K_UNIFORM)
        sb_printf(b, "%sif (v%d) {\n", ind, w);
    else if (from_vector)
        sb_printf(b, "%sif (in%d[u].v[e]) {\n", ind, w);
    else
        sb_printf(b, "%sif (*(const cf_bool *)(p.op[%d].ptr + off[%d])) {\n", ind, w, w);
}

static void gen_where_close(sbuf *b, const uf_spec *sp, const char *ind)
{
    if (sp->has_where)
        sb_printf(b, "%s}\n", ind);
}

static int is_loaded(const uf_spec *sp, int i, int nin, int w) { return i < nin || i == w; }

static cf_status generate(const cf_ufunc *u, const uf_spec *sp, char **out)
{
    const uf_loop *l = &u->loops[sp->loop];
    int nin = u->nin, nout = u->nout, w = sp->has_where ? nin + nout : -1;
    sbuf b = {0};
    sb_printf(&b, "%s\n#include \"cufunc/elementwise.cuh\"\n\n"
                  "struct cf_params { cf_ew_header h; cf_ew_operand op[%d]; };\n\n"
                  "extern \"C\" __global__ void __launch_bounds__(%d)\n"
                  "cf_ew(const __grid_constant__ cf_params p)\n{\n",
              l->source, sp->nops, UF_BLOCK);
    /* scalars and uniform inputs (and a uniform mask): converted once, before the loop */
    for (int i = 0; i < sp->nops; i++) {
        if (!is_loaded(sp, i, nin, w) || (sp->kind[i] != K_SCALAR && sp->kind[i] != K_UNIFORM))
            continue;
        const char *lt = i == w ? "cf_bool" : cf_dtype_ctype(l->types[i]);
        const char *st = cf_dtype_ctype(sp->dtype[i]);
        sb_printf(&b, "    const %s v%d = cf_cast<%s>(*(const %s *)p.op[%d].%s);\n", lt, i, lt,
                  st, i, sp->kind[i] == K_SCALAR ? "scalar" : "ptr");
    }
    if (sp->contiguous) {
        const int V = sp->vec, U = UF_UNROLL;
        sb_printf(&b, "    const unsigned n = (unsigned)p.h.n;\n"
                      "    const unsigned nvec = n / %d;\n"
                      "    const unsigned step = gridDim.x * blockDim.x;\n"
                      "    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;\n", V);
        for (int i = 0; i < sp->nops; i++)
            if (sp->kind[i] == K_CONTIG)
                sb_printf(&b, "    %scf_vec<%s, %d> *__restrict__ p%d = (%scf_vec<%s, %d> *)p.op[%d].ptr;\n",
                          is_loaded(sp, i, nin, w) ? "const " : "", cf_dtype_ctype(sp->dtype[i]), V,
                          i, is_loaded(sp, i, nin, w) ? "const " : "", cf_dtype_ctype(sp->dtype[i]),
                          V, i);
        sb_printf(&b, "    for (unsigned base = t; base < nvec; base += %d * step) {\n", U);
        for (int i = 0; i < sp->nops; i++)
            if (sp->kind[i] == K_CONTIG)
                sb_printf(&b, "        cf_vec<%s, %d> %s%d[%d];\n", cf_dtype_ctype(sp->dtype[i]), V,
                          is_loaded(sp, i, nin, w) ? "in" : "out", i, U);
        /* loads first: U independent vectors in flight per operand */
        sb_printf(&b, "#pragma unroll\n        for (int u = 0; u < %d; u++) {\n"
                      "            const unsigned k = base + u * step;\n"
                      "            if (k < nvec) {\n", U);
        for (int i = 0; i < sp->nops; i++)
            if (sp->kind[i] == K_CONTIG && (is_loaded(sp, i, nin, w) || sp->has_where))
                sb_printf(&b, "                %s%d[u] = p%d[k];\n",
                          is_loaded(sp, i, nin, w) ? "in" : "out", i, i);
        sb_printf(&b, "            }\n        }\n"
                      "#pragma unroll\n        for (int u = 0; u < %d; u++) {\n"
                      "#pragma unroll\n            for (int e = 0; e < %d; e++) {\n", U, V);
        gen_where_open(&b, sp, w, 1, "                ");
        gen_compute(&b, sp, l, nin, nout, 1, sp->has_where ? "                    " :
                    "                ");
        gen_where_close(&b, sp, "                ");
        sb_printf(&b, "            }\n        }\n"
                      "#pragma unroll\n        for (int u = 0; u < %d; u++) {\n"
                      "            const unsigned k = base + u * step;\n"
                      "            if (k < nvec) {\n", U);
        for (int i = nin; i < nin + nout; i++)
            sb_printf(&b, "                p%d[k] = out%d[u];\n", i, i);
        sb_printf(&b, "            }\n        }\n    }\n");
        if (V > 1) {
            /* the last n % V elements, one per thread, through byte offsets */
            sb_printf(&b, "    const unsigned k = nvec * %d + t;\n    if (k < n) {\n"
                          "        long long off[%d];\n", V, sp->nops);
            for (int i = 0; i < sp->nops; i++) {
                if (sp->kind[i] == K_CONTIG)
                    sb_printf(&b, "        off[%d] = (long long)k * %d;\n", i,
                              (int)cf_dtype_size(sp->dtype[i]));
                else
                    sb_printf(&b, "        off[%d] = 0;\n", i);
            }
            gen_where_open(&b, sp, w, 0, "        ");
            gen_compute(&b, sp, l, nin, nout, 0, sp->has_where ? "            " : "        ");
            gen_where_close(&b, sp, "        ");
            sb_printf(&b, "    }\n");
        }
    } else {
        const char *I = sp->index32 ? "unsigned" : "unsigned long long";
        const char *O = sp->index32 ? "int" : "long long";
        sb_printf(&b, "    const %s n = (%s)p.h.n;\n"
                      "    const %s step = (%s)gridDim.x * blockDim.x;\n"
                      "    for (%s i = (%s)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {\n"
                      "        %s off[%d];\n"
                      "        cf_offsets<%d, %d, %s, %s>(i, p.h, p.op, off);\n",
                  I, I, I, I, I, I, O, sp->nops, sp->ndim, sp->nops, I, O);
        gen_where_open(&b, sp, w, 0, "        ");
        gen_compute(&b, sp, l, nin, nout, 0, sp->has_where ? "            " : "        ");
        gen_where_close(&b, sp, "        ");
        sb_printf(&b, "    }\n");
    }
    sb_printf(&b, "}\n");
    if (b.failed) {
        cf_free(b.s);
        return CF_ERR_NOMEM;
    }
    *out = b.s;
    return CF_OK;
}

/* ---- planning a launch ------------------------------------------------------------------- */

/* Everything a launch derives from its operands: the plan, which plan operand each launch operand
 * is (-1 for scalars), and the specialisation. */
typedef struct uf_launch {
    cf_plan plan;
    int plan_of[UF_MAX_ARGS + 1];
    const cf_array *array[UF_MAX_ARGS + 1];
    uf_spec spec;
} uf_launch;

static cf_status prepare(const cf_ufunc *u, int loop, const cf_operand *ops, const cf_array *where,
                         int ndim, const int64_t *shape, uf_launch *L)
{
    if (!u || !ops || loop < 0 || loop >= u->nloops)
        return cf_error_set(CF_ERR_INVALID, "ufunc launch: bad ufunc, loop or operands");
    if (ndim < 0 || ndim > CF_MAX_DIMS || (ndim && !shape))
        return cf_error_set(CF_ERR_INVALID, "ufunc launch: bad loop shape (ndim %d)", ndim);
    int nin = u->nin, nout = u->nout, nops = nin + nout + (where ? 1 : 0);
    uf_spec *sp = &L->spec;
    memset(sp, 0, sizeof *sp);
    sp->loop = loop;
    sp->nops = nops;
    sp->has_where = where != NULL;

    /* Plan order: outputs first (their memory order decides the axis order), inputs, mask. */
    cf_array plan_ops[UF_MAX_ARGS + 1];
    int np = 0;
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < nops; i++) {
            int is_out = i >= nin && i < nin + nout, is_where = i == nin + nout;
            if ((pass == 0) != is_out || (pass == 2) != is_where)
                continue;
            const cf_array *a = is_where ? where : ops[i].is_scalar ? NULL : &ops[i].array;
            L->array[i] = a;
            L->plan_of[i] = -1;
            if (!a) {
                if (is_out)
                    return cf_error_set(CF_ERR_INVALID, "output %d must be an array", i - nin);
                if (!valid_dtype(ops[i].scalar_dtype))
                    return cf_error_set(CF_ERR_TYPE, "input %d: invalid scalar dtype", i);
                sp->kind[i] = K_SCALAR;
                sp->dtype[i] = ops[i].scalar_dtype;
                continue;
            }
            if (!valid_dtype(a->dtype))
                return cf_error_set(CF_ERR_TYPE, "operand %d: invalid dtype", i);
            if (a->dtype == CF_FLOAT16)
                return cf_error_set(CF_ERR_UNSUPPORTED, "operand %d is float16, which ufuncs do "
                                    "not support yet", i);
            if (is_where && a->dtype != CF_BOOL)
                return cf_error_set(CF_ERR_TYPE, "where= must be a bool array, not %s",
                                    cf_dtype_name(a->dtype));
            if (is_out) {
                int same = a->ndim == ndim;
                for (int k = 0; same && k < ndim; k++)
                    same = a->shape[k] == shape[k];
                if (!same)
                    return cf_error_set(CF_ERR_INVALID, "output %d does not have the loop's shape",
                                        i - nin);
            }
            sp->dtype[i] = a->dtype;
            L->plan_of[i] = np;
            plan_ops[np++] = *a;
        }
    cf_status st = cf_plan_elementwise(&L->plan, np, plan_ops, ndim, shape);
    if (st)
        return st;
    const cf_plan *pl = &L->plan;
    if (pl->ndim > CF_EW_MAX_NDIM)
        return cf_error_set(CF_ERR_UNSUPPORTED, "the operands' layouts leave %d axes that cannot "
                            "be merged; element-wise kernels handle at most %d (make an operand "
                            "contiguous first)", pl->ndim, CF_EW_MAX_NDIM);

    /* Kinds and the kernel shape. */
    int contiguous = pl->index32, maxsize = 1;
    for (int i = 0; i < nops; i++) {
        int j = L->plan_of[i];
        if (j < 0)
            continue;
        int all_zero = pl->ndim > 0;
        for (int k = 0; k < pl->ndim; k++)
            all_zero &= pl->strides[j][k] == 0;
        int loaded = i < nin || i == nin + nout;
        if (all_zero && !loaded)
            return cf_error_set(CF_ERR_INVALID, "output %d has a zero stride: its elements "
                                "overlap", i - nin);
        sp->kind[i] = all_zero ? K_UNIFORM : pl->contiguous[j] ? K_CONTIG : K_STRIDED;
        if (sp->kind[i] == K_STRIDED)
            contiguous = 0;
        if (sp->kind[i] == K_CONTIG && (int)cf_dtype_size(sp->dtype[i]) > maxsize)
            maxsize = (int)cf_dtype_size(sp->dtype[i]);
    }
    sp->contiguous = contiguous;
    sp->index32 = pl->index32;
    if (contiguous) {
        sp->ndim = 0;
        int vec = 16 / maxsize;
        for (int i = 0; i < nops && vec > 1; i++)
            if (sp->kind[i] == K_CONTIG &&
                L->array[i]->data % ((uint64_t)vec * cf_dtype_size(sp->dtype[i])) != 0)
                vec = 1;
        sp->vec = vec < 1 ? 1 : vec;
    } else {
        /* the strided kernel walks at least one axis, also when the plan merged all of them
         * (a contiguous plan over more than 2^31 elements) */
        sp->ndim = pl->ndim > 0 ? pl->ndim : 1;
        sp->vec = 1;
        for (int i = 0; i < nops; i++)
            if (sp->kind[i] == K_CONTIG)
                sp->kind[i] = K_STRIDED;
    }
    return CF_OK;
}

cf_status cf_ufunc_kernel_source(cf_ufunc *u, int loop, const cf_operand *ops,
                                 const cf_array *where, int ndim, const int64_t *shape,
                                 char **source)
{
    if (!source)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_kernel_source: source is NULL");
    uf_launch *L = cf_malloc(sizeof *L);
    if (!L)
        return CF_ERR_NOMEM;
    cf_status st = prepare(u, loop, ops, where, ndim, shape, L);
    if (!st)
        st = generate(u, &L->spec, source);
    cf_free(L);
    return st;
}

/* ---- the kernel table --------------------------------------------------------------------- */

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static uf_kernel *table_find(cf_ufunc *u, const char *key)
{
    if (!u->table_cap)
        return NULL;
    size_t mask = u->table_cap - 1;
    for (size_t i = fnv1a(key) & mask;; i = (i + 1) & mask) {
        if (!u->table[i].key)
            return NULL;
        if (strcmp(u->table[i].key, key) == 0)
            return &u->table[i];
    }
}

static cf_status table_insert(cf_ufunc *u, const char *key, cf_function *fn, int64_t max_resident)
{
    if ((u->table_count + 1) * 2 > u->table_cap) {
        size_t cap = u->table_cap ? 2 * u->table_cap : 16;
        uf_kernel *t = cf_calloc(cap, sizeof *t);
        if (!t)
            return CF_ERR_NOMEM;
        for (size_t i = 0; i < u->table_cap; i++)
            if (u->table[i].key) {
                size_t j = fnv1a(u->table[i].key) & (cap - 1);
                while (t[j].key)
                    j = (j + 1) & (cap - 1);
                t[j] = u->table[i];
            }
        cf_free(u->table);
        u->table = t;
        u->table_cap = cap;
    }
    char *k = cf_strdup(key);
    if (!k)
        return CF_ERR_NOMEM;
    size_t j = fnv1a(key) & (u->table_cap - 1);
    while (u->table[j].key)
        j = (j + 1) & (u->table_cap - 1);
    u->table[j].key = k;
    u->table[j].fn = fn;
    u->table[j].max_resident = max_resident;
    u->table_count++;
    return CF_OK;
}

/* The kernel for a spec on a device: from the table, else generated, compiled (through the
 * compile cache) and entered. */
static cf_status get_kernel(cf_ufunc *u, const uf_spec *sp, int device, uf_kernel *out)
{
    char key[512];
    spec_key(sp, device, key, sizeof key);
    pthread_mutex_lock(&u->lock);
    uf_kernel *k = table_find(u, key);
    if (k) {
        *out = *k;
        pthread_mutex_unlock(&u->lock);
        return CF_OK;
    }
    char *src = NULL;
    cf_module *m = NULL;
    cf_function *fn = NULL;
    cf_function_attrs attrs;
    cf_device_props props;
    int per_sm = 0;
    const uf_loop *l = &u->loops[sp->loop];
    cf_status st = generate(u, sp, &src);
    if (!st)
        st = cf_module_load(device, src, (const char *const *)l->options, l->noptions, &m);
    if (!st)
        st = cf_module_function(m, "cf_ew", &fn);
    if (!st)
        st = cf_function_attrs_get(fn, &attrs);
    if (!st)
        st = cf_function_max_active_blocks(fn, UF_BLOCK, 0, &per_sm);
    if (!st)
        st = cf_device_props_get(device, &props);
    if (!st) {
        int64_t resident = (int64_t)props.multiprocessor_count * (per_sm > 0 ? per_sm : 1);
        st = table_insert(u, key, fn, resident);
        if (!st)
            *out = *table_find(u, key);
    }
    pthread_mutex_unlock(&u->lock);
    cf_free(src);
    return st;
}

/* ---- launch ------------------------------------------------------------------------------- */

static void fastdiv_init(cf_ew_fastdiv *d, uint64_t divisor, int index32)
{
    unsigned shift = 0;
    while (shift < 63 && ((uint64_t)1 << shift) < divisor)
        shift++;
    d->divisor = divisor;
    d->shift = shift;
    if (index32)
        d->magic = (uint64_t)(((((uint64_t)1 << 32) * (((uint64_t)1 << shift) - divisor)) /
                               divisor) + 1);
    else
        d->magic = (uint64_t)((((unsigned __int128)1 << 64) *
                               (((unsigned __int128)1 << shift) - divisor)) / divisor + 1);
}

cf_status cf_ufunc_launch(cf_ufunc *u, int loop, cf_stream *s, const cf_operand *ops,
                          const cf_array *where, int ndim, const int64_t *shape)
{
    if (!s)
        return cf_error_set(CF_ERR_INVALID, "ufunc launch: stream is NULL");
    uf_launch *L = cf_malloc(sizeof *L);
    if (!L)
        return CF_ERR_NOMEM;
    cf_status st = prepare(u, loop, ops, where, ndim, shape, L);
    if (st)
        goto done;
    const cf_plan *pl = &L->plan;
    const uf_spec *sp = &L->spec;
    if (pl->size == 0)
        goto done;
    int device = cf_stream_device(s);
    for (int i = 0; i < sp->nops; i++)
        if (L->array[i] && L->array[i]->device != device) {
            st = cf_error_set(CF_ERR_INVALID, "operand %d is on device %d, the launch on device %d",
                              i, L->array[i]->device, device);
            goto done;
        }
    uf_kernel k;
    st = get_kernel(u, sp, device, &k);
    if (st)
        goto done;

    /* The parameter block: header, then one operand record per operand. */
    union {
        unsigned char bytes[CF_EW_HEADER_BYTES + (UF_MAX_ARGS + 1) * CF_EW_OPERAND_BYTES];
        uint64_t align;
    } params;
    size_t nbytes = CF_EW_HEADER_BYTES + (size_t)sp->nops * CF_EW_OPERAND_BYTES;
    memset(params.bytes, 0, nbytes);
    cf_ew_header *h = (cf_ew_header *)params.bytes;
    cf_ew_operand *op = (cf_ew_operand *)(params.bytes + CF_EW_HEADER_BYTES);
    h->n = pl->size;
    h->ndim = sp->contiguous ? 0 : sp->ndim;
    if (!sp->contiguous) {
        for (int k2 = 0; k2 < sp->ndim; k2++) {
            int64_t extent = pl->ndim ? pl->shape[k2] : pl->size;
            h->shape[k2] = extent;
            fastdiv_init(&h->div[k2], (uint64_t)extent, sp->index32);
        }
    }
    for (int i = 0; i < sp->nops; i++) {
        int j = L->plan_of[i];
        if (j < 0) {
            memcpy(op[i].scalar, ops[i].scalar, sizeof op[i].scalar);
            continue;
        }
        op[i].ptr = L->array[i]->data;
        if (!sp->contiguous) {
            if (pl->ndim)
                for (int k2 = 0; k2 < pl->ndim; k2++)
                    op[i].strides[k2] = pl->strides[j][k2];
            else
                op[i].strides[0] = (int64_t)cf_dtype_size(sp->dtype[i]);
        }
    }
    int64_t items = sp->contiguous ? (pl->size / sp->vec + UF_UNROLL - 1) / UF_UNROLL : pl->size;
    if (items < 1)
        items = 1;
    unsigned grid[3] = {cf_plan_grid(items, UF_BLOCK, k.max_resident), 1, 1};
    unsigned block[3] = {UF_BLOCK, 1, 1};
    void *args[1] = {params.bytes};
    st = cf_launch(k.fn, grid, block, 0, s, args);
done:
    cf_free(L);
    return st;
}
