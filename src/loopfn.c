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

/* Whether input i (dtype `in`, weak/scalar flag `w`) takes loop type `t` in pass `pass` of rule
 * `mode` (loopfn.h). */
static int input_takes(int mode, int pass, cf_dtype in, int w, cf_dtype t)
{
    switch (mode) {
    case CF_LOOPS_NUMBA_UFUNC:
        return in == t || (pass == 1 && w);
    case CF_LOOPS_NUMBA_GUFUNC:
        return in == t || (pass == 1 && cf_can_cast_safe(t, in));
    default:
        if (w)
            return cf_weak_reaches(in, t);
        return pass == 0 ? in == t : cf_can_cast_safe(in, t);
    }
}

int cf_loops_find(const cf_dtype *types, size_t stride, int nloops, int nin, const cf_dtype *in,
                  const unsigned char *weak, int passes, int mode)
{
    for (int pass = 0; pass < passes; pass++) {
        int found = -1;
        for (int l = 0; l < nloops; l++) {
            const cf_dtype *t = row(types, stride, l);
            int ok = 1;
            for (int i = 0; i < nin && ok; i++)
                ok = input_takes(mode, pass, in[i], weak && weak[i], t[i]);
            if (!ok)
                continue;
            /* Numba's ufunc rule: loops that differ only in the scalars' types are ambiguous */
            if (mode != CF_LOOPS_NUMBA_UFUNC || pass == 0)
                return l;
            if (found >= 0)
                return -2;
            found = l;
        }
        if (found >= 0)
            return found;
    }
    return -1;
}

cf_status cf_loops_no_match(int mode, const char *what, const char *name, const cf_dtype *types,
                            size_t stride, int nloops, int nin, int nout, const cf_dtype *in,
                            const unsigned char *weak)
{
    cf_strbuf m = {0};
    const int numba = mode != CF_LOOPS_NUMPY;
    cf_strbuf_printf(&m, "%s '%s' not supported for the input types (", what, name);
    for (int i = 0; i < nin; i++)
        cf_strbuf_printf(&m, "%s%s%s", i ? ", " : "",
                         weak && weak[i] ? (numba ? "scalar " : "Python ") : "",
                         cf_dtype_name(in[i]));
    if (mode == CF_LOOPS_NUMBA_UFUNC)
        cf_strbuf_printf(&m, "): under Numba's rules array inputs must have a loop's types "
                             "exactly (casting='no'; scalars are converted); its loops are:");
    else if (mode == CF_LOOPS_NUMBA_GUFUNC)
        cf_strbuf_printf(&m, "): under Numba's rules an input matches a loop whose type casts "
                             "safely to the input's type; its loops are:");
    else
        cf_strbuf_printf(&m, "), and the inputs could not be safely coerced to any supported "
                             "types according to the casting rule 'safe'; its loops are:");
    for (int l = 0; l < nloops; l++) {
        const cf_dtype *t = row(types, stride, l);
        cf_strbuf_printf(&m, " (");
        for (int i = 0; i < nin + nout; i++)
            cf_strbuf_printf(&m, "%s%s", i == 0 ? "" : i == nin ? ") -> (" : ", ",
                             cf_dtype_name(t[i]));
        cf_strbuf_printf(&m, ")");
    }
    if (nloops == 0)
        cf_strbuf_printf(&m, " none");
    cf_status st = cf_error_set(CF_ERR_TYPE, "%s", m.failed ? "no matching loop" : m.s);
    cf_free(m.s);
    return st;
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
