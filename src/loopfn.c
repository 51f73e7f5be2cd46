/* loopfn.c: see loopfn.h. */
#include "loopfn.h"

#include "cufunc/ufunc.h" /* cf_can_cast_safe */

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

static int kind_rank(cf_dtype t)
{
    switch (cf_dtype_kind(t)) {
    case 'b': return 0;
    case 'i': case 'u': return 1;
    case 'f': return 2;
    default: return 3;
    }
}

static const cf_dtype *row(const cf_dtype *types, size_t stride, int l)
{
    return (const cf_dtype *)((const char *)types + (size_t)l * stride);
}

int cf_loops_find(const cf_dtype *types, size_t stride, int nloops, int nin, const cf_dtype *in,
                  const unsigned char *weak, int passes)
{
    for (int pass = 0; pass < passes; pass++)
        for (int l = 0; l < nloops; l++) {
            const cf_dtype *t = row(types, stride, l);
            int ok = 1;
            for (int i = 0; i < nin && ok; i++) {
                if (weak && weak[i])
                    ok = t[i] != CF_BOOL && kind_rank(t[i]) >= kind_rank(in[i]);
                else
                    ok = pass == 0 ? in[i] == t[i] : cf_can_cast_safe(in[i], t[i]);
            }
            if (ok)
                return l;
        }
    return -1;
}

cf_status cf_loops_no_match(const char *what, const char *name, const cf_dtype *types,
                            size_t stride, int nloops, int nin, int nout, const cf_dtype *in,
                            const unsigned char *weak)
{
    cf_strbuf m = {0};
    cf_strbuf_printf(&m, "%s '%s' not supported for the input types (", what, name);
    for (int i = 0; i < nin; i++)
        cf_strbuf_printf(&m, "%s%s%s", i ? ", " : "", weak && weak[i] ? "Python " : "",
                         cf_dtype_name(in[i]));
    cf_strbuf_printf(&m, "), and the inputs could not be safely coerced to any supported types "
                         "according to the casting rule 'safe'; its loops are:");
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
