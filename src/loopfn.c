/* loopfn.c: see loopfn.h. */
#include "loopfn.h"

#include "cufunc/runtime.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "error.h"
#include "strbuf.h"

void cf_loop_fn_clear(cf_loop_fn *f)
{
    cf_free(f->source);
    cf_free(f->fn_name);
    for (int i = 0; i < f->noptions; i++)
        cf_free(f->options[i]);
    cf_free(f->options);
    for (int i = 0; i < f->nglobals; i++) {
        /* the copies made by copy_globals, owned here whatever the public struct's const says */
        cf_free((char *)f->globals[i].name);
        cf_free((char *)f->globals[i].label);
        cf_free((void *)f->globals[i].bytes);
    }
    cf_free(f->globals);
    memset(f, 0, sizeof *f);
}

/* Copy `globals` into f->globals (f->nglobals counts the complete copies, for cleanup). */
static cf_status copy_globals(cf_loop_fn *f, const cf_module_global *globals, int nglobals)
{
    if (nglobals < 0 || (nglobals && !globals))
        return cf_error_set(CF_ERR_INVALID, "a loop's globals: %d at %p", nglobals,
                            (const void *)globals);
    for (int i = 0; i < nglobals; i++) {
        const cf_module_global *g = &globals[i];
        if (!g->name || !*g->name || !g->bytes || g->size == 0 || g->device < -1)
            return cf_error_set(CF_ERR_INVALID, "a loop's global %d needs a name, a value and a "
                                "device (-1 for any)", i);
        for (int j = 0; j < i; j++)
            if (strcmp(globals[j].name, g->name) == 0)
                return cf_error_set(CF_ERR_INVALID, "a loop has two globals named '%s'",
                                    g->name);
    }
    if (!nglobals)
        return CF_OK;
    if (!(f->globals = cf_calloc((size_t)nglobals, sizeof *f->globals)))
        return CF_ERR_NOMEM;
    for (int i = 0; i < nglobals; i++) {
        const cf_module_global *g = &globals[i];
        cf_module_global *c = &f->globals[i];
        char *name = cf_strdup(g->name);
        char *label = g->label ? cf_strdup(g->label) : NULL;
        void *bytes = cf_malloc(g->size);
        if (!name || (g->label && !label) || !bytes) {
            cf_free(name);
            cf_free(label);
            cf_free(bytes);
            return CF_ERR_NOMEM;
        }
        memcpy(bytes, g->bytes, g->size);
        c->name = name;
        c->label = label;
        c->bytes = bytes;
        c->size = g->size;
        c->device = g->device;
        f->nglobals = i + 1;
    }
    return CF_OK;
}

cf_status cf_loop_fn_compile(const cf_loop_fn *f, const char *kernel_source, int cc_major,
                             int cc_minor, const char *what, int *from)
{
    void *image = NULL;
    size_t size = 0;
    int is_ptx = 0;
    cf_status st = cf_cache_get_image(kernel_source, (const char *const *)f->options, f->noptions,
                                      cc_major, cc_minor, &image, &size, &is_ptx, from);
    cf_free_buffer(image);
    if (st)
        cf_error_prefix("%s", what);
    return st;
}

void cf_loop_check_arch(int *cc_major, int *cc_minor)
{
    cf_device_props props;
    *cc_major = 7;
    *cc_minor = 5;
    if (cf_is_available() && cf_device_props_get(0, &props) == CF_OK) {
        *cc_major = props.cc_major;
        *cc_minor = props.cc_minor;
    }
}

const char *cf_loop_types_text(const cf_dtype *types, int nin, int nout, char *buf, size_t cap)
{
    cf_strbuf b = {0};
    for (int i = 0; i < nin; i++)
        cf_strbuf_printf(&b, "%s%s", i ? ", " : "(", cf_dtype_name(types[i]));
    cf_strbuf_printf(&b, ") -> %s", nout > 1 ? "(" : "");
    for (int i = 0; i < nout; i++)
        cf_strbuf_printf(&b, "%s%s", i ? ", " : "", cf_dtype_name(types[nin + i]));
    cf_strbuf_printf(&b, "%s", nout > 1 ? ")" : "");
    snprintf(buf, cap, "%s", b.failed || !b.s ? "?" : b.s);
    cf_free(b.s);
    return buf;
}

/* Whether `name` (its last component after "::") occurs in `source` as a whole identifier. A
 * cheap check made when a loop is added, so that a misspelt function name fails at once with a
 * clear message rather than as an NVRTC error at the first launch. Names written only through
 * macros escape it; NVRTC still catches those at the check or the first launch. */
static int mentions_identifier(const char *source, const char *name)
{
    const char *colon = strstr(name, "::");
    while (colon) {
        name = colon + 2;
        colon = strstr(name, "::");
    }
    size_t n = strlen(name);
    if (n == 0)
        return 0;
    for (const char *p = strstr(source, name); p; p = strstr(p + 1, name)) {
        int before = p > source && (isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int after = isalnum((unsigned char)p[n]) || p[n] == '_';
        if (!before && !after)
            return 1;
    }
    return 0;
}

cf_status cf_loop_fn_load(const cf_loop_fn *f, int device, const char *kernel_source,
                          cf_module **out)
{
    return cf_module_load_globals(device, kernel_source, (const char *const *)f->options,
                                  f->noptions, f->globals, f->nglobals, out);
}

cf_status cf_loop_fn_init(cf_loop_fn *f, const char *source, const char *fn_name,
                          const char *const *options, int noptions,
                          const cf_module_global *globals, int nglobals)
{
    memset(f, 0, sizeof *f);
    if (!source || !fn_name || noptions < 0 || (noptions && !options))
        return cf_error_set(CF_ERR_INVALID, "a loop needs its source, its function name and "
                            "valid options");
    if (!mentions_identifier(source, fn_name))
        return cf_error_set(CF_ERR_INVALID, "the loop's source does not define '%s' (no such "
                            "identifier in it): fn_name must name the __device__ function the "
                            "source defines", fn_name);
    cf_status st = copy_globals(f, globals, nglobals);
    if (st) {
        cf_loop_fn_clear(f);
        return st;
    }
    if (!(f->source = cf_strdup(source)) || !(f->fn_name = cf_strdup(fn_name)))
        goto nomem;
    if (noptions) {
        if (!(f->options = cf_calloc((size_t)noptions, sizeof(char *))))
            goto nomem;
        for (int i = 0; i < noptions; i++) {
            if (!options[i]) {
                cf_loop_fn_clear(f);
                return cf_error_set(CF_ERR_INVALID, "loop option %d is NULL", i);
            }
            if (!(f->options[i] = cf_strdup(options[i])))
                goto nomem;
            f->noptions = i + 1;
        }
    }
    return CF_OK;
nomem:
    cf_loop_fn_clear(f);
    return CF_ERR_NOMEM;
}

static const cf_dtype *row(const cf_dtype *types, size_t stride, int l)
{
    return (const cf_dtype *)((const char *)types + (size_t)l * stride);
}

/* Whether input i (dtype `in`, flag `w`: CF_LOOPS_*) takes loop type `t` in pass `pass` of rule
 * `mode` (cufunc/loops.h). */
static int input_takes(cf_loops_mode mode, int pass, cf_dtype in, int w, cf_dtype t)
{
    switch (mode) {
    case CF_LOOPS_NUMBA_UFUNC:
        return in == t || (pass == 1 && w);
    case CF_LOOPS_NUMBA_GUFUNC:
        return in == t || (pass == 1 && cf_can_cast_safe(t, in));
    case CF_LOOPS_SCALAR_CAST:
        if (w == CF_LOOPS_SCALAR)
            return cf_can_cast_safe(t, in);
        return w || cf_can_cast_safe(in, t);
    default:
        if (w)
            return cf_weak_reaches(in, t);
        return pass == 0 ? in == t : cf_can_cast_safe(in, t);
    }
}

/* dtype=: the first loop whose outputs have that dtype and whose inputs are reachable under the
 * casting rule, weak ones by kind. */
static int find_for_dtype(const cf_dtype *types, size_t stride, int nloops,
                          const cf_loops_query *q)
{
    for (int l = 0; l < nloops; l++) {
        const cf_dtype *t = row(types, stride, l);
        int ok = 1;
        for (int o = 0; o < q->nout && ok; o++)
            ok = t[q->nin + o] == (cf_dtype)q->out_dtype;
        for (int i = 0; i < q->nin && ok; i++)
            ok = q->weak && q->weak[i] ? cf_weak_reaches(q->in[i], t[i])
                                       : cf_can_cast(q->in[i], t[i], q->casting);
        if (ok)
            return l;
    }
    return CF_LOOPS_NONE;
}

int cf_loops_find(const cf_dtype *types, size_t stride, int nloops, const cf_loops_query *q)
{
    if (!q || !q->in || nloops <= 0 || !types)
        return CF_LOOPS_NONE;
    if (q->out_dtype >= 0)
        return find_for_dtype(types, stride, nloops, q);
    int passes = q->lazy ? 1 : 2;
    if (q->mode == CF_LOOPS_SCALAR_CAST) {
        int any_scalar = 0;
        for (int i = 0; i < q->nin; i++)
            any_scalar |= q->weak && q->weak[i] == CF_LOOPS_SCALAR;
        if (!any_scalar)
            return CF_LOOPS_NONE;
        passes = 1;
    }
    for (int pass = 0; pass < passes; pass++) {
        int found = CF_LOOPS_NONE;
        for (int l = 0; l < nloops; l++) {
            const cf_dtype *t = row(types, stride, l);
            int ok = 1;
            for (int i = 0; i < q->nin && ok; i++)
                ok = input_takes(q->mode, pass, q->in[i], q->weak ? q->weak[i] : 0, t[i]);
            if (!ok)
                continue;
            /* Numba's ufunc rule: loops that differ only in the scalars' types are ambiguous */
            if (q->mode != CF_LOOPS_NUMBA_UFUNC || pass == 0)
                return l;
            if (found >= 0)
                return CF_LOOPS_AMBIGUOUS;
            found = l;
        }
        if (found >= 0)
            return found;
    }
    return CF_LOOPS_NONE;
}

cf_status cf_loops_no_match(const cf_dtype *types, size_t stride, int nloops,
                            const cf_loops_query *q, const char *what, const char *name)
{
    cf_strbuf m = {0};
    const int numba = q->mode == CF_LOOPS_NUMBA_UFUNC || q->mode == CF_LOOPS_NUMBA_GUFUNC;
    cf_strbuf_printf(&m, "%s '%s' not supported for the input types (", what, name);
    for (int i = 0; i < q->nin; i++)
        cf_strbuf_printf(&m, "%s%s%s", i ? ", " : "",
                         q->weak && q->weak[i] ? (numba ? "scalar " : "Python ") : "",
                         cf_dtype_name(q->in[i]));
    if (q->mode == CF_LOOPS_NUMBA_UFUNC)
        cf_strbuf_printf(&m, "): under Numba's rules array inputs must have a loop's types "
                             "exactly (casting='no'; scalars are converted); its loops are:");
    else if (q->mode == CF_LOOPS_NUMBA_GUFUNC)
        cf_strbuf_printf(&m, "): under Numba's rules an input matches a loop whose type casts "
                             "safely to the input's type; its loops are:");
    else
        cf_strbuf_printf(&m, "), and the inputs could not be safely coerced to any supported "
                             "types according to the casting rule 'safe'; its loops are:");
    for (int l = 0; l < nloops; l++) {
        const cf_dtype *t = row(types, stride, l);
        cf_strbuf_printf(&m, " (");
        for (int i = 0; i < q->nin + q->nout; i++)
            cf_strbuf_printf(&m, "%s%s", i == 0 ? "" : i == q->nin ? ") -> (" : ", ",
                             cf_dtype_name(t[i]));
        cf_strbuf_printf(&m, ")");
    }
    if (nloops <= 0)
        cf_strbuf_printf(&m, " none");
    cf_status st = cf_error_set(CF_ERR_TYPE, "%s", m.failed ? "no matching loop" : m.s);
    cf_free(m.s);
    return st;
}

void cf_loops_nep50(int n, const cf_dtype *in, unsigned char *weak)
{
    int strong_kind = -1; /* the highest kind among the typed inputs; -1 when there is none */
    for (int i = 0; i < n; i++)
        if (!weak[i] && cf_dtype_nep50_kind(in[i]) > strong_kind)
            strong_kind = cf_dtype_nep50_kind(in[i]);
    for (int i = 0; i < n; i++) {
        if (!weak[i])
            continue;
        weak[i] = 1;
        int k = cf_dtype_nep50_kind(in[i]);
        /* Alone, a Python scalar is its default type (np.hypot(3.0, 4.0) is float64). Beside
         * typed operands of a lower kind it is its default type too (an int8 array + 2.0 is
         * float64, np.True_ + 2 is int64), except a complex beside floats, which takes their
         * precision (a float32 array + 2j is complex64): it stays weak there, and the loop
         * search finds the first complex loop the floats reach. */
        if (strong_kind < 0 || (k > strong_kind && !(k == 3 && strong_kind == 2)))
            weak[i] = 0; /* its dtype is already int64, float64 or complex128 */
    }
}

cf_dtype cf_loops_reduce_dtype(cf_accumulator rule, cf_dtype t)
{
    if (rule != CF_ACC_WIDEN)
        return t;
    char k = cf_dtype_kind(t);
    if (t == CF_BOOL || (k == 'i' && cf_dtype_size(t) < 8))
        return CF_INT64;
    if (k == 'u' && cf_dtype_size(t) < 8)
        return CF_UINT64;
    return t;
}

cf_status cf_loops_check_types(const cf_dtype *types, int nargs)
{
    for (int i = 0; i < nargs; i++) {
        if (!cf_dtype_valid(types[i]))
            return cf_error_set(CF_ERR_TYPE, "loop type %d is not a valid dtype", i + 1);
    }
    return CF_OK;
}

cf_status cf_loops_check_new(const char *what, const char *name, const cf_dtype *first,
                             size_t stride, int nloops, int nin, const cf_dtype *types)
{
    for (int l = 0; l < nloops; l++)
        if (memcmp(row(first, stride, l), types, (size_t)nin * sizeof(cf_dtype)) == 0)
            return cf_error_set(CF_ERR_INVALID, "%s '%s' already has a loop for these input "
                                "types", what, name);
    return CF_OK;
}

cf_status cf_loops_append(void *array_field, int *n, int *cap, size_t size, const void *loop,
                          pthread_mutex_t *lock, int *index)
{
    pthread_mutex_lock(lock);
    void *items;
    memcpy(&items, array_field, sizeof items);
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 4;
        void *grown = cf_realloc(items, (size_t)c * size);
        if (!grown) {
            pthread_mutex_unlock(lock);
            return CF_ERR_NOMEM;
        }
        items = grown;
        memcpy(array_field, &items, sizeof items);
        *cap = c;
    }
    memcpy((char *)items + (size_t)*n * size, loop, size);
    int idx = (*n)++;
    pthread_mutex_unlock(lock);
    if (index)
        *index = idx;
    return CF_OK;
}
