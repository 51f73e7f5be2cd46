/* signature.c: recursive-descent parsers for type signatures and gufunc layouts
 * (include/cufunc/signature.h).
 *
 * Character classes are ASCII and spelled out here rather than <ctype.h>'s: those follow the
 * process's locale (Python sets LC_CTYPE from the environment), and under a Latin-1 locale
 * isalnum(0xE9) is true, which would let one byte of a UTF-8 character into a name. */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "cufunc/array.h"
#include "cufunc/signature.h"
#include "error.h"

typedef struct parser {
    const char *text; /* NUL-terminated copy of the user's text, valid UTF-8 (check_text) */
    size_t len;
    const char *p;
    const char *what; /* "type signature" or "gufunc signature" */
} parser;

static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_word(char c) { return is_alpha(c) || is_digit(c) || c == '_'; }

static void skip_ws(parser *ps)
{
    while (is_space(*ps->p))
        ps->p++;
}

/* ---- the text, and the excerpt of it that messages show -------------------------------------- */

/* The character at s (n > 0 bytes left): its length in bytes, and whether it is valid UTF-8
 * (shortest form, no surrogate, at most U+10FFFF). A bad lead byte, or a lead byte without its
 * continuation bytes, is one invalid character of one byte; a complete 3-byte surrogate (as
 * Python's 'surrogatepass' encodes a lone surrogate) is one invalid character of three. */
static size_t utf8_char(const unsigned char *s, size_t n, int *valid, unsigned *cp)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
               : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
    *valid = 0;
    *cp = c;
    if (len == 0 || len > n)
        return 1;
    unsigned v = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 1;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)))
        return 1; /* overlong or beyond Unicode */
    *cp = v;
    *valid = !(v >= 0xD800 && v <= 0xDFFF);
    return len;
}

/* Characters shown before and after the error's place; a longer text is cut, marked "...". */
#define EXCERPT_BEFORE 40
#define EXCERPT_AFTER 30
#define EXCERPT_CAP (3 + 4 * (EXCERPT_BEFORE + EXCERPT_AFTER + 1) + 3 + 1)

/* Into buf (EXCERPT_CAP bytes): the excerpt of ps->text around byte offset `at`, one line of valid
 * UTF-8 (whitespace shown as ' '; control and line-breaking characters and invalid bytes as '?').
 * *pos: `at` counted in characters; *col: the caret's column under the excerpt. */
static void excerpt(const parser *ps, size_t at, char *buf, size_t *pos, size_t *col)
{
    const unsigned char *t = (const unsigned char *)ps->text;
    size_t nchars = 0, i = 0;
    int valid;
    unsigned cp;
    *pos = (size_t)-1;
    for (i = 0; i < ps->len; nchars++) {
        if (i >= at && *pos == (size_t)-1)
            *pos = nchars;
        i += utf8_char(t + i, ps->len - i, &valid, &cp);
    }
    if (*pos == (size_t)-1)
        *pos = nchars; /* at the end of the text */
    size_t first = *pos > EXCERPT_BEFORE ? *pos - EXCERPT_BEFORE : 0;
    size_t last = *pos + EXCERPT_AFTER < nchars ? *pos + EXCERPT_AFTER : nchars;
    size_t n = 0, k = 0;
    if (first > 0) {
        memcpy(buf, "...", 3);
        n = 3;
    }
    *col = n + (*pos - first);
    for (i = 0; i < ps->len && k < last; k++) {
        size_t clen = utf8_char(t + i, ps->len - i, &valid, &cp);
        if (k >= first) {
            if (valid && cp < 0x80 && is_space((char)cp))
                buf[n++] = ' ';
            else if (!valid || cp < 0x20 || (cp >= 0x7F && cp < 0xA0) || cp == 0x2028 ||
                     cp == 0x2029)
                buf[n++] = '?';
            else {
                memcpy(buf + n, t + i, clen);
                n += clen;
            }
        }
        i += clen;
    }
    if (last < nchars) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
}

static cf_status fail_at(parser *ps, const char *where, cf_status st, const char *why)
{
    char buf[EXCERPT_CAP];
    size_t pos, col;
    excerpt(ps, (size_t)(where - ps->text), buf, &pos, &col);
    return cf_error_set(st, "invalid %s: %s at position %zu:\n    %s\n    %*s^", ps->what, why, pos,
                        buf, (int)col, "");
}

static cf_status fail(parser *ps, cf_status st, const char *why)
{
    return fail_at(ps, ps->p, st, why);
}

/* Refuse a text that is not one line of UTF-8 characters: a NUL inside it (a C caller's string
 * would end there: "f4(f4)\0junk" must not pass as "f4(f4)"), invalid bytes, lone surrogates. */
static cf_status check_text(parser *ps)
{
    const unsigned char *t = (const unsigned char *)ps->text;
    for (size_t i = 0; i < ps->len;) {
        int valid;
        unsigned cp;
        size_t clen = utf8_char(t + i, ps->len - i, &valid, &cp);
        if (valid && cp == 0)
            return fail_at(ps, ps->text + i, CF_ERR_INVALID, "embedded NUL character");
        if (!valid && cp >= 0xD800 && cp <= 0xDFFF) {
            char why[64];
            snprintf(why, sizeof why, "lone surrogate U+%04X (not a character)", cp);
            return fail_at(ps, ps->text + i, CF_ERR_INVALID, why);
        }
        if (!valid)
            return fail_at(ps, ps->text + i, CF_ERR_INVALID, "not valid UTF-8");
        i += clen;
    }
    return CF_OK;
}

/* Set up ps over a NUL-terminated copy of text (len bytes; the _n entry points' text need not be
 * terminated) and check it. *copy: to cf_free, also on failure. */
static cf_status begin(parser *ps, const char *text, size_t len, const char *what, char **copy)
{
    *copy = NULL;
    if (len > ((size_t)1 << 40))
        return cf_error_set(CF_ERR_INVALID, "invalid %s: %zu bytes long", what, len);
    *copy = cf_malloc(len + 1);
    if (!*copy)
        return CF_ERR_NOMEM;
    memcpy(*copy, text, len);
    (*copy)[len] = '\0';
    ps->text = ps->p = *copy;
    ps->len = len;
    ps->what = what;
    return check_text(ps);
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
    if (strncmp(ps->p, w, n) == 0 && !is_word(ps->p[n])) {
        ps->p += n;
        return 1;
    }
    return 0;
}

/* An identifier (letters, digits, '_', '.'; not starting with a digit): "float32", "np.float32".
 * Returns its whole length (0 if there is none) and consumes it; buf gets at most cap - 1 bytes
 * of it, so a length >= cap means it did not fit. */
static size_t ident(parser *ps, char *buf, size_t cap)
{
    skip_ws(ps);
    size_t n = 0;
    while (is_word(ps->p[n]) || ps->p[n] == '.')
        n++;
    if (!n || is_digit(ps->p[0]))
        return 0;
    size_t keep = n < cap ? n : cap - 1;
    memcpy(buf, ps->p, keep);
    buf[keep] = '\0';
    ps->p += n;
    return n;
}

static cf_status scalar_type(parser *ps, cf_dtype *dt)
{
    skip_ws(ps);
    const char *at = ps->p;
    char name[64];
    size_t len = ident(ps, name, sizeof name);
    if (!len)
        return fail(ps, CF_ERR_INVALID, "expected a type name");
    const char *n = name;
    if (len < sizeof name) {
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
    }
    char why[160];
    snprintf(why, sizeof why, "unknown type name '%s%s'", name, len < sizeof name ? "" : "...");
    return fail_at(ps, at, CF_ERR_TYPE, why);
}

/* type := scalar ( '[' (':' | '::1') (',' (':' | '::1'))* ']' )? */
static cf_status sig_type(parser *ps, cf_sig_type *t)
{
    skip_ws(ps);
    const char *at = ps->p;
    if (accept_word(ps, "void") || accept_word(ps, "none"))
        return fail_at(ps, at, CF_ERR_INVALID, "void is not an argument type");
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
        skip_ws(ps);
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

/* UniTuple(type, count), after the word UniTuple */
static cf_status unituple(parser *ps, cf_type_signature *out)
{
    cf_sig_type t;
    cf_status st;
    if (!accept(ps, '('))
        return fail(ps, CF_ERR_INVALID, "expected '(' after UniTuple");
    if ((st = sig_type(ps, &t)))
        return st;
    if (!accept(ps, ','))
        return fail(ps, CF_ERR_INVALID, "expected ', count' in UniTuple(type, count)");
    skip_ws(ps);
    const char *at = ps->p;
    int count = 0;
    while (is_digit(*ps->p)) {
        if (count <= CF_SIG_MAX_ARGS) /* stays small; the digits are consumed regardless */
            count = count * 10 + (*ps->p - '0');
        ps->p++;
    }
    if (count < 1 || count > CF_SIG_MAX_ARGS)
        return fail_at(ps, at, CF_ERR_INVALID, "UniTuple needs a count from 1 to 32");
    if (!accept(ps, ')'))
        return fail(ps, CF_ERR_INVALID, "expected ')'");
    out->has_return = 1;
    out->nreturn = count;
    for (int i = 0; i < count; i++)
        out->ret[i] = t;
    return CF_OK;
}

static cf_status type_signature(parser *ps, cf_type_signature *out)
{
    cf_status st;
    skip_ws(ps);
    if (*ps->p == '(') {
        /* just the arguments */
    } else if (accept_word(ps, "void") || accept_word(ps, "none")) {
        out->explicit_void = 1;
    } else if (accept_word(ps, "UniTuple")) {
        if ((st = unituple(ps, out)))
            return st;
    } else if (accept_word(ps, "Tuple")) {
        if ((st = type_list(ps, out->ret, &out->nreturn, CF_SIG_MAX_ARGS)))
            return st;
        if (out->nreturn == 0)
            return fail(ps, CF_ERR_INVALID, "an empty Tuple cannot be a return type");
        out->has_return = 1;
    } else {
        if ((st = sig_type(ps, &out->ret[0])))
            return st;
        out->has_return = 1;
        out->nreturn = 1;
    }
    if ((st = type_list(ps, out->args, &out->nargs, CF_SIG_MAX_ARGS)))
        return st;
    skip_ws(ps);
    if (strncmp(ps->p, "->", 2) == 0)
        return fail(ps, CF_ERR_INVALID, "use 'ret(args)' rather than '(args) -> ret'");
    if (*ps->p)
        return fail(ps, CF_ERR_INVALID, "unexpected text after the signature");
    return CF_OK;
}

cf_status cf_parse_type_signature_n(const char *text, size_t len, cf_type_signature *out)
{
    if (!text || !out)
        return cf_error_set(CF_ERR_INVALID, "cf_parse_type_signature: NULL argument");
    memset(out, 0, sizeof *out);
    parser ps;
    char *copy = NULL;
    cf_status st = begin(&ps, text, len, "type signature", &copy);
    if (st == CF_OK)
        st = type_signature(&ps, out);
    cf_free(copy);
    return st;
}

cf_status cf_parse_type_signature(const char *text, cf_type_signature *out)
{
    return cf_parse_type_signature_n(text, text ? strlen(text) : 0, out);
}

/* ---- gufunc layouts ------------------------------------------------------------------------ */

/* A fixed size ("3", "0007"): its value, and its canonical spelling ("7") as the name. */
static cf_status fixed_size(parser *ps, char *name, size_t cap, int64_t *value)
{
    const char *at = ps->p;
    int64_t v = 0;
    int too_large = 0;
    for (; is_digit(*ps->p); ps->p++) {
        if (!too_large)
            v = v * 10 + (*ps->p - '0');
        too_large |= v > ((int64_t)1 << 40);
    }
    if (too_large)
        return fail_at(ps, at, CF_ERR_INVALID, "fixed dimension too large");
    snprintf(name, cap, "%lld", (long long)v);
    *value = v;
    return CF_OK;
}

/* One dimension of an operand: a name or a fixed size, recorded in L's names. *idx: its index. */
static cf_status core_dim(parser *ps, cf_layout *L, int *idx)
{
    char name[CF_SIG_MAX_NAME_LEN + 1];
    int64_t fixed = -1;
    skip_ws(ps);
    const char *at = ps->p;
    if (is_digit(*ps->p)) {
        cf_status st = fixed_size(ps, name, sizeof name, &fixed);
        if (st)
            return st;
    } else {
        size_t len = ident(ps, name, sizeof name);
        if (!len || strchr(name, '.') || memchr(at, '.', len))
            return fail_at(ps, at, CF_ERR_INVALID, "expected a dimension name or size");
        if (len > CF_SIG_MAX_NAME_LEN) {
            char why[128];
            snprintf(why, sizeof why, "dimension name '%.12s...' is longer than %d characters",
                     name, CF_SIG_MAX_NAME_LEN);
            return fail_at(ps, at, CF_ERR_INVALID, why);
        }
    }
    skip_ws(ps);
    if (*ps->p == '?' || *ps->p == '|')
        return fail(ps, CF_ERR_INVALID, "flexible ('?') and broadcastable ('|1') core "
                    "dimensions are not supported");
    *idx = -1;
    for (int i = 0; i < L->nnames; i++)
        if (strcmp(L->names[i], name) == 0)
            *idx = i;
    if (*idx < 0) {
        if (L->nnames == CF_SIG_MAX_NAMES)
            return fail_at(ps, at, CF_ERR_INVALID, "too many dimension names");
        *idx = L->nnames++;
        strcpy(L->names[*idx], name);
        L->fixed[*idx] = fixed;
    }
    return CF_OK;
}

static cf_status core_dims(parser *ps, cf_layout *L, int op, int is_input)
{
    if (!accept(ps, '('))
        return fail(ps, CF_ERR_INVALID, "expected '('");
    L->ndims[op] = 0;
    if (accept(ps, ')'))
        return CF_OK;
    for (;;) {
        skip_ws(ps);
        if (L->ndims[op] == CF_SIG_MAX_CORE_DIMS)
            return fail(ps, CF_ERR_INVALID, "too many core dimensions");
        int idx;
        cf_status st = core_dim(ps, L, &idx);
        if (st)
            return st;
        if (is_input)
            L->in_inputs[idx] = 1;
        L->dim[op][L->ndims[op]++] = idx;
        if (accept(ps, ')'))
            return CF_OK;
        if (!accept(ps, ','))
            return fail(ps, CF_ERR_INVALID, "expected ',' or ')'");
    }
}

/* operands := core_dims (',' core_dims)*; *op counts the operands so far */
static cf_status operands(parser *ps, cf_layout *L, int *op, int is_input)
{
    for (;;) {
        skip_ws(ps);
        if (*op == CF_SIG_MAX_ARGS)
            return fail(ps, CF_ERR_INVALID, "too many operands");
        cf_status st = core_dims(ps, L, (*op)++, is_input);
        if (st)
            return st;
        if (!accept(ps, ','))
            return CF_OK;
    }
}

static cf_status layout(parser *ps, cf_layout *out)
{
    int op = 0;
    cf_status st = operands(ps, out, &op, 1);
    if (st)
        return st;
    out->nin = op;
    skip_ws(ps);
    if (strncmp(ps->p, "->", 2) != 0)
        return fail(ps, CF_ERR_INVALID, "expected ',' or '->'");
    ps->p += 2;
    if ((st = operands(ps, out, &op, 0)))
        return st;
    out->nout = op - out->nin;
    skip_ws(ps);
    if (*ps->p)
        return fail(ps, CF_ERR_INVALID, "unexpected text after the signature");
    return CF_OK;
}

cf_status cf_parse_layout_n(const char *text, size_t len, cf_layout *out)
{
    if (!text || !out)
        return cf_error_set(CF_ERR_INVALID, "cf_parse_layout: NULL argument");
    memset(out, 0, sizeof *out);
    parser ps;
    char *copy = NULL;
    cf_status st = begin(&ps, text, len, "gufunc signature", &copy);
    if (st == CF_OK)
        st = layout(&ps, out);
    cf_free(copy);
    return st;
}

cf_status cf_parse_layout(const char *text, cf_layout *out)
{
    return cf_parse_layout_n(text, text ? strlen(text) : 0, out);
}
