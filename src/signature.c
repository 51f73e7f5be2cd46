/* signature.c: recursive-descent parsers for type signatures and gufunc layouts
 * (include/cufunc/signature.h). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cufunc/array.h"
#include "cufunc/signature.h"
#include "error.h"

typedef struct parser {
    const char *text;
    const char *p;
    const char *what; /* "type signature" or "gufunc signature" */
} parser;

static void skip_ws(parser *ps)
{
    while (*ps->p && isspace((unsigned char)*ps->p))
        ps->p++;
}

static cf_status fail(parser *ps, cf_status st, const char *why)
{
    int col = (int)(ps->p - ps->text);
    return cf_error_set(st, "invalid %s: %s at position %d:\n    %s\n    %*s^", ps->what, why, col,
                        ps->text, col, "");
}

static int accept(parser *ps, char c)
{
    skip_ws(ps);
    if (*ps->p == c) {
        ps->p++;
        return 1;
    }
    return 0;
}

static int accept_word(parser *ps, const char *w)
{
    skip_ws(ps);
    size_t n = strlen(w);
    if (strncmp(ps->p, w, n) == 0 && !isalnum((unsigned char)ps->p[n]) && ps->p[n] != '_') {
        ps->p += n;
        return 1;
    }
    return 0;
}

/* An identifier (letters, digits, '_', '.'): "float32", "np.float32", "f4". */
static int ident(parser *ps, char *buf, size_t cap)
{
    skip_ws(ps);
    size_t n = 0;
    while ((isalnum((unsigned char)ps->p[n]) || ps->p[n] == '_' || ps->p[n] == '.') && n + 1 < cap)
        n++;
    if (!n || isdigit((unsigned char)ps->p[0]))
        return 0;
    memcpy(buf, ps->p, n);
    buf[n] = '\0';
    ps->p += n;
    return 1;
}

static cf_status scalar_type(parser *ps, cf_dtype *dt)
{
    const char *at = ps->p;
    char name[64];
    if (!ident(ps, name, sizeof name))
        return fail(ps, CF_ERR_INVALID, "expected a type name");
    const char *n = name;
    if (strncmp(n, "np.", 3) == 0)
        n += 3;
    else if (strncmp(n, "numpy.", 6) == 0)
        n += 6;
    /* Numba's and NumPy's spellings beyond cf_dtype_from_name's */
    static const struct { const char *alias; cf_dtype dt; } aliases[] = {
        {"boolean", CF_BOOL}, {"bool_", CF_BOOL}, {"b1", CF_BOOL}, {"byte", CF_INT8},
        {"float", CF_FLOAT64}, {"int", CF_INT64}, {"complex", CF_COMPLEX128},
        {"float_", CF_FLOAT64}, {"int_", CF_INT64}, {"complex_", CF_COMPLEX128},
    };
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(n, aliases[i].alias) == 0) {
            *dt = aliases[i].dt;
            return CF_OK;
        }
    if (cf_dtype_from_name(n, dt) == CF_OK)
        return CF_OK;
    ps->p = at;
    skip_ws(ps);
    char why[160];
    snprintf(why, sizeof why, "unknown type name '%s'", name);
    return fail(ps, CF_ERR_TYPE, why);
}

/* type := scalar ( '[' (':' | '::1') (',' (':' | '::1'))* ']' )? */
static cf_status sig_type(parser *ps, cf_sig_type *t)
{
    const char *at = ps->p;
    if (accept_word(ps, "void") || accept_word(ps, "none")) {
        ps->p = at;
        skip_ws(ps);
        return fail(ps, CF_ERR_INVALID, "void is not an argument type");
    }
    cf_status st = scalar_type(ps, &t->dtype);
    if (st)
        return st;
    t->ndim = 0;
    t->layout = 'A';
    if (!accept(ps, '['))
        return CF_OK;
    int contig_at = -1;
    for (;;) {
        if (t->ndim == CF_MAX_DIMS)
            return fail(ps, CF_ERR_INVALID, "too many dimensions");
        skip_ws(ps);
        if (strncmp(ps->p, "::1", 3) == 0) {
            if (contig_at >= 0)
                return fail(ps, CF_ERR_INVALID, "only one axis can be marked ::1");
            contig_at = t->ndim;
            ps->p += 3;
        } else if (!accept(ps, ':')) {
            return fail(ps, CF_ERR_INVALID, "expected ':' or '::1' in an array type");
        }
        t->ndim++;
        if (accept(ps, ']'))
            break;
        if (!accept(ps, ','))
            return fail(ps, CF_ERR_INVALID, "expected ',' or ']'");
    }
    if (contig_at >= 0) {
        if (contig_at == t->ndim - 1)
            t->layout = 'C';
        else if (contig_at == 0)
            t->layout = 'F';
        else
            return fail(ps, CF_ERR_INVALID, "::1 must mark the first or the last axis");
    }
    return CF_OK;
}

/* '(' [type (',' type)* [',']] ')' */
static cf_status type_list(parser *ps, cf_sig_type *items, int *n, int max)
{
    *n = 0;
    if (!accept(ps, '('))
        return fail(ps, CF_ERR_INVALID, "expected '('");
    if (accept(ps, ')'))
        return CF_OK;
    for (;;) {
        if (*n == max)
            return fail(ps, CF_ERR_INVALID, "too many types");
        cf_status st = sig_type(ps, &items[(*n)++]);
        if (st)
            return st;
        if (accept(ps, ')'))
            return CF_OK;
        if (!accept(ps, ','))
            return fail(ps, CF_ERR_INVALID, "expected ',' or ')'");
        if (accept(ps, ')'))
            return CF_OK; /* a trailing comma, as in "int64(int64,)" */
    }
}

cf_status cf_parse_type_signature(const char *text, cf_type_signature *out)
{
    if (!text || !out)
        return cf_error_set(CF_ERR_INVALID, "cf_parse_type_signature: NULL argument");
    memset(out, 0, sizeof *out);
    parser ps = {text, text, "type signature"};
    cf_status st;
    skip_ws(&ps);
    if (*ps.p == '(') {
        /* just the arguments */
    } else if (accept_word(&ps, "void") || accept_word(&ps, "none")) {
        out->explicit_void = 1;
    } else if (accept_word(&ps, "UniTuple")) {
        cf_sig_type t;
        if (!accept(&ps, '('))
            return fail(&ps, CF_ERR_INVALID, "expected '(' after UniTuple");
        if ((st = sig_type(&ps, &t)))
            return st;
        if (!accept(&ps, ','))
            return fail(&ps, CF_ERR_INVALID, "expected ', count' in UniTuple(type, count)");
        skip_ws(&ps);
        int count = 0;
        while (isdigit((unsigned char)*ps.p) && count <= CF_SIG_MAX_ARGS)
            count = count * 10 + (*ps.p++ - '0');
        if (count < 1 || count > CF_SIG_MAX_ARGS)
            return fail(&ps, CF_ERR_INVALID, "UniTuple needs a count from 1 to 32");
        if (!accept(&ps, ')'))
            return fail(&ps, CF_ERR_INVALID, "expected ')'");
        out->has_return = 1;
        out->nreturn = count;
        for (int i = 0; i < count; i++)
            out->ret[i] = t;
    } else if (accept_word(&ps, "Tuple")) {
        if ((st = type_list(&ps, out->ret, &out->nreturn, CF_SIG_MAX_ARGS)))
            return st;
        if (out->nreturn == 0)
            return fail(&ps, CF_ERR_INVALID, "an empty Tuple cannot be a return type");
        out->has_return = 1;
    } else {
        if ((st = sig_type(&ps, &out->ret[0])))
            return st;
        out->has_return = 1;
        out->nreturn = 1;
    }
    if ((st = type_list(&ps, out->args, &out->nargs, CF_SIG_MAX_ARGS)))
        return st;
    skip_ws(&ps);
    if (strncmp(ps.p, "->", 2) == 0)
        return fail(&ps, CF_ERR_INVALID, "use 'ret(args)' rather than '(args) -> ret'");
    if (*ps.p)
        return fail(&ps, CF_ERR_INVALID, "unexpected text after the signature");
    return CF_OK;
}

/* ---- gufunc layouts ------------------------------------------------------------------------ */

static cf_status core_dims(parser *ps, cf_layout *L, int op, int is_input)
{
    if (!accept(ps, '('))
        return fail(ps, CF_ERR_INVALID, "expected '('");
    L->ndims[op] = 0;
    if (accept(ps, ')'))
        return CF_OK;
    for (;;) {
        if (L->ndims[op] == CF_SIG_MAX_CORE_DIMS)
            return fail(ps, CF_ERR_INVALID, "too many core dimensions");
        skip_ws(ps);
        char name[32];
        int64_t fixed = -1;
        if (isdigit((unsigned char)*ps->p)) {
            fixed = 0;
            size_t n = 0;
            while (isdigit((unsigned char)*ps->p) && n + 1 < sizeof name) {
                fixed = fixed * 10 + (*ps->p - '0');
                name[n++] = *ps->p++;
                if (fixed > ((int64_t)1 << 40))
                    return fail(ps, CF_ERR_INVALID, "fixed dimension too large");
            }
            name[n] = '\0';
        } else if (!ident(ps, name, sizeof name) || strchr(name, '.')) {
            return fail(ps, CF_ERR_INVALID, "expected a dimension name or size");
        }
        skip_ws(ps);
        if (*ps->p == '?' || *ps->p == '|')
            return fail(ps, CF_ERR_INVALID, "flexible ('?') and broadcastable ('|1') core "
                        "dimensions are not supported");
        int idx = -1;
        for (int i = 0; i < L->nnames; i++)
            if (strcmp(L->names[i], name) == 0)
                idx = i;
        if (idx < 0) {
            if (L->nnames == CF_SIG_MAX_NAMES)
                return fail(ps, CF_ERR_INVALID, "too many dimension names");
            idx = L->nnames++;
            strcpy(L->names[idx], name);
            L->fixed[idx] = fixed;
        }
        if (is_input)
            L->in_inputs[idx] = 1;
        L->dim[op][L->ndims[op]++] = idx;
        if (accept(ps, ')'))
            return CF_OK;
        if (!accept(ps, ','))
            return fail(ps, CF_ERR_INVALID, "expected ',' or ')'");
    }
}

cf_status cf_parse_layout(const char *text, cf_layout *out)
{
    if (!text || !out)
        return cf_error_set(CF_ERR_INVALID, "cf_parse_layout: NULL argument");
    memset(out, 0, sizeof *out);
    parser ps = {text, text, "gufunc signature"};
    cf_status st;
    int op = 0;
    for (;;) {
        if (op == CF_SIG_MAX_ARGS)
            return fail(&ps, CF_ERR_INVALID, "too many operands");
        if ((st = core_dims(&ps, out, op++, 1)))
            return st;
        if (!accept(&ps, ','))
            break;
    }
    out->nin = op;
    skip_ws(&ps);
    if (strncmp(ps.p, "->", 2) != 0)
        return fail(&ps, CF_ERR_INVALID, "expected ',' or '->'");
    ps.p += 2;
    for (;;) {
        if (op == CF_SIG_MAX_ARGS)
            return fail(&ps, CF_ERR_INVALID, "too many operands");
        if ((st = core_dims(&ps, out, op++, 0)))
            return st;
        if (!accept(&ps, ','))
            break;
    }
    out->nout = op - out->nin;
    skip_ws(&ps);
    if (*ps.p)
        return fail(&ps, CF_ERR_INVALID, "unexpected text after the signature");
    return CF_OK;
}
