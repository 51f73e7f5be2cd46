/* Unit tests of the signature parsers (type signatures, gufunc layouts). */
#include "check.h"

static void test_type_signatures(void)
{
    cf_type_signature s;
    CHECK_OK(cf_parse_type_signature("float32(float32, float32)", &s));
    CHECK(s.has_return && s.nreturn == 1 && s.ret[0].dtype == CF_FLOAT32 && s.ret[0].ndim == 0);
    CHECK(s.nargs == 2 && s.args[0].dtype == CF_FLOAT32 && s.args[1].dtype == CF_FLOAT32);
    CHECK_OK(cf_parse_type_signature("  f8 ( i4 ,u1,c8, c16 ,b1, bool) ", &s));
    CHECK(s.ret[0].dtype == CF_FLOAT64 && s.nargs == 6);
    CHECK(s.args[0].dtype == CF_INT32 && s.args[1].dtype == CF_UINT8 && s.args[2].dtype == CF_COMPLEX64);
    CHECK(s.args[3].dtype == CF_COMPLEX128 && s.args[4].dtype == CF_BOOL && s.args[5].dtype == CF_BOOL);
    CHECK_OK(cf_parse_type_signature("int64(int64,)", &s));
    CHECK(s.nargs == 1 && s.args[0].dtype == CF_INT64);
    CHECK_OK(cf_parse_type_signature("void(float32[:], float32[:, ::1], np.float64[::1, :], int32)", &s));
    CHECK(!s.has_return && s.explicit_void && s.nargs == 4);
    CHECK(s.args[0].ndim == 1 && s.args[0].layout == 'A');
    CHECK(s.args[1].ndim == 2 && s.args[1].layout == 'C');
    CHECK(s.args[2].ndim == 2 && s.args[2].layout == 'F' && s.args[2].dtype == CF_FLOAT64);
    CHECK(s.args[3].ndim == 0);
    CHECK_OK(cf_parse_type_signature("(f4, f4)", &s));
    CHECK(!s.has_return && !s.explicit_void && s.nargs == 2);
    CHECK_OK(cf_parse_type_signature("Tuple(f4, i8)(f4)", &s));
    CHECK(s.nreturn == 2 && s.ret[0].dtype == CF_FLOAT32 && s.ret[1].dtype == CF_INT64);
    CHECK_OK(cf_parse_type_signature("UniTuple(float64, 3)(float64, float64)", &s));
    CHECK(s.nreturn == 3 && s.ret[2].dtype == CF_FLOAT64 && s.nargs == 2);
    CHECK_OK(cf_parse_type_signature("float32()", &s));
    CHECK(s.nargs == 0);
}

static void test_type_signature_errors(void)
{
    cf_type_signature s;
    CHECK_STATUS(cf_parse_type_signature("float32(float32, ", &s), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "invalid type signature: expected a type name at position 17");
    CHECK_CONTAINS(cf_last_error(), "\n    float32(float32, \n                     ^");
    CHECK_STATUS(cf_parse_type_signature("float33(float32)", &s), CF_ERR_TYPE);
    CHECK_CONTAINS(cf_last_error(), "unknown type name 'float33'");
    CHECK_STATUS(cf_parse_type_signature("f4(void)", &s), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "void is not an argument type at position 3");
    CHECK_STATUS(cf_parse_type_signature("(f4) -> f4", &s), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "use 'ret(args)'");
    CHECK_STATUS(cf_parse_type_signature("f4(f4) junk", &s), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "unexpected text");
    CHECK_STATUS(cf_parse_type_signature("f4(f4[:, ::1, :])", &s), CF_ERR_INVALID);
    CHECK_STATUS(cf_parse_type_signature("f4(f4[x])", &s), CF_ERR_INVALID);
    CHECK_STATUS(cf_parse_type_signature("UniTuple(f4, 0)(f4)", &s), CF_ERR_INVALID);
    CHECK_STATUS(cf_parse_type_signature("f4 f4", &s), CF_ERR_INVALID);
    CHECK_STATUS(cf_parse_type_signature("", &s), CF_ERR_INVALID);
    CHECK_STATUS(cf_parse_type_signature(NULL, &s), CF_ERR_INVALID);
    CHECK_STATUS(cf_parse_type_signature("object(f4)", &s), CF_ERR_TYPE);
}

static void test_layouts(void)
{
    cf_layout L;
    CHECK_OK(cf_parse_layout("(m,n),(n,p)->(m,p)", &L));
    CHECK(L.nin == 2 && L.nout == 1 && L.nnames == 3);
    CHECK(L.ndims[0] == 2 && L.ndims[1] == 2 && L.ndims[2] == 2);
    CHECK(L.dim[0][0] == 0 && L.dim[0][1] == 1 && L.dim[1][0] == 1 && L.dim[1][1] == 2);
    CHECK(L.dim[2][0] == 0 && L.dim[2][1] == 2);
    CHECK(strcmp(L.names[2], "p") == 0 && L.fixed[2] == -1 && L.in_inputs[2]);
    CHECK_OK(cf_parse_layout(" ( n ) -> ( ) ", &L));
    CHECK(L.nin == 1 && L.nout == 1 && L.ndims[0] == 1 && L.ndims[1] == 0);
    CHECK_OK(cf_parse_layout("(3)->()", &L));
    CHECK(L.fixed[0] == 3);
    CHECK_OK(cf_parse_layout("(),()->()", &L));
    CHECK(L.nin == 2 && L.nout == 1 && L.nnames == 0);
    CHECK_OK(cf_parse_layout("(m,n)->(m),(n),(k)", &L));
    CHECK(L.nin == 1 && L.nout == 3 && !L.in_inputs[2] && L.in_inputs[0]);
}

static void test_layout_errors(void)
{
    cf_layout L;
    CHECK_STATUS(cf_parse_layout("(m,n),(n,p)>(m,p)", &L), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "invalid gufunc signature: expected ',' or '->' at position 11");
    CHECK_CONTAINS(cf_last_error(), "\n    (m,n),(n,p)>(m,p)\n               ^");
    CHECK_STATUS(cf_parse_layout("(m,n->(m)", &L), CF_ERR_INVALID);
    CHECK_STATUS(cf_parse_layout("(m)->(m", &L), CF_ERR_INVALID);
    CHECK_STATUS(cf_parse_layout("(m?)->(m)", &L), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "not supported");
    CHECK_STATUS(cf_parse_layout("(m)->(m) x", &L), CF_ERR_INVALID);
    CHECK_STATUS(cf_parse_layout("->()", &L), CF_ERR_INVALID);
    CHECK_STATUS(cf_parse_layout("", &L), CF_ERR_INVALID);
}


/* The text itself. An embedded NUL ends a C string, so the _n entry points (the length
 * given) must refuse it where it is rather than parse the part before it. */
static void test_embedded_nul(void)
{
    static const char sig[] = "f4(f4,f4)\0junk";
    cf_type_signature s;
    CHECK_STATUS(cf_parse_type_signature_n(sig, sizeof sig - 1, &s), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "embedded NUL character at position 9");
    CHECK_CONTAINS(cf_last_error(), "\n    f4(f4,f4)?junk\n             ^");
    CHECK_OK(cf_parse_type_signature_n(sig, 9, &s)); /* the length excludes the NUL: fine */
    CHECK(s.nargs == 2);
    static const char lay[] = "(n)->(n)\0junk";
    cf_layout L;
    CHECK_STATUS(cf_parse_layout_n(lay, sizeof lay - 1, &L), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "gufunc signature: embedded NUL character at position 8");
    CHECK_OK(cf_parse_layout_n(lay, 8, &L));
    /* positions count characters, not bytes: the NUL follows 6 characters, 7 bytes */
    static const char u[] = "f4(\xc3\xbc)\0";
    CHECK_STATUS(cf_parse_type_signature_n(u, sizeof u - 1, &s), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "embedded NUL character at position 5");
}

/* Text that is not UTF-8 (a lone surrogate, as Python's 'surrogatepass' encodes it, or a stray
 * byte) is refused at its position, and the message itself stays valid UTF-8. */
static void test_not_utf8(void)
{
    cf_type_signature s;
    CHECK_STATUS(cf_parse_type_signature("f4(f4, \xed\xb2\x80)", &s), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "lone surrogate");
    CHECK_CONTAINS(cf_last_error(), "at position 7");
    CHECK_CONTAINS(cf_last_error(), "\n    f4(f4, ?)\n           ^");
    CHECK_STATUS(cf_parse_type_signature("f4(\xff)", &s), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "not valid UTF-8 at position 3");
    cf_layout L;
    CHECK_STATUS(cf_parse_layout("(n)->(\xc3)", &L), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "not valid UTF-8 at position 6");
}

/* Dimension names have a limit (cf_layout stores them in 32 bytes): say so, at the name. */
static void test_long_dimension_names(void)
{
    cf_layout L;
    char text[128];
    snprintf(text, sizeof text, "(n,%s)->()", "abcdefghijklmnopqrstuvwxyz01234"); /* 31 */
    CHECK_OK(cf_parse_layout(text, &L));
    CHECK(L.nnames == 2 && strlen(L.names[1]) == 31);
    snprintf(text, sizeof text, "(n,%s)->()", "abcdefghijklmnopqrstuvwxyz012345"); /* 32 */
    CHECK_STATUS(cf_parse_layout(text, &L), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "longer than 31 characters at position 3");
    CHECK_CONTAINS(cf_last_error(), "\n       ^");
    /* a fixed size with many leading zeros is one number, not a name cut at 31 digits */
    CHECK_OK(cf_parse_layout("(000000000000000000000000000000000000003)->()", &L));
    CHECK(L.fixed[0] == 3);
    CHECK_STATUS(cf_parse_layout("(n, 99999999999999999999999)->()", &L), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "fixed dimension too large at position 4");
    /* a dotted name is refused where it starts */
    CHECK_STATUS(cf_parse_layout("(m,n)->(...", &L), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "at position 8");
    CHECK_STATUS(cf_parse_layout("(a.b)->()", &L), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "at position 1");
    cf_type_signature s;
    CHECK_STATUS(cf_parse_type_signature("UniTuple(f4, 333)(f4)", &s), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "UniTuple needs a count from 1 to 32 at position 13");
}

/* The column of the caret under the excerpt's character at error position pos: the excerpt
 * line and the caret line are the last two lines of the message. */
static int caret_ok(const char *msg, char expect)
{
    const char *caret_line = strrchr(msg, '\n');
    if (!caret_line)
        return 0;
    const char *line_end = caret_line;
    const char *line = line_end - 1;
    while (line > msg && line[-1] != '\n')
        line--;
    const char *caret = strchr(caret_line, '^');
    if (!caret || strchr(caret + 1, '^'))
        return 0;
    size_t col = (size_t)(caret - (caret_line + 1));
    return col < (size_t)(line_end - line) && line[col] == expect;
}

/* A huge text is not repeated whole: an excerpt around the error, the caret under the right
 * character. */
static void test_huge_text_excerpt(void)
{
    enum { N = 1 << 20 };
    char *big = malloc(N + 16);
    CHECK(big != NULL);
    if (!big)
        return;
    /* "f4(f4,f4,...,f4,X" with X at the end */
    memcpy(big, "f4(", 3);
    size_t n = 3;
    while (n + 6 < N) {
        memcpy(big + n, "f4,", 3);
        n += 3;
    }
    size_t bad = n;
    memcpy(big + n, "X)", 3);
    cf_type_signature s;
    CHECK_STATUS(cf_parse_type_signature(big, &s), CF_ERR_INVALID); /* too many types */
    CHECK(strlen(cf_last_error()) < 400);
    CHECK_CONTAINS(cf_last_error(), "...");
    CHECK(caret_ok(cf_last_error(), 'f'));
    /* the same with the error far in: at the X */
    memcpy(big, "(", 1);
    for (size_t i = 1; i < bad; i++)
        big[i] = ' ';
    CHECK_STATUS(cf_parse_type_signature(big, &s), CF_ERR_TYPE);
    char want[64];
    snprintf(want, sizeof want, "at position %zu:", bad);
    CHECK_CONTAINS(cf_last_error(), want);
    CHECK(strlen(cf_last_error()) < 400);
    CHECK(caret_ok(cf_last_error(), 'X'));
    /* near the start: no leading "..." */
    memcpy(big, "f4(Y", 4);
    CHECK_STATUS(cf_parse_type_signature(big, &s), CF_ERR_TYPE);
    CHECK(strlen(cf_last_error()) < 400);
    CHECK_CONTAINS(cf_last_error(), "\n    f4(Y");
    CHECK(caret_ok(cf_last_error(), 'Y'));
    free(big);
    cf_layout L;
    char lay[300];
    memset(lay, ' ', sizeof lay);
    memcpy(lay, "(n)->(", 6);
    memcpy(lay + 250, "!)", 3);
    CHECK_STATUS(cf_parse_layout(lay, &L), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "at position 250");
    CHECK(caret_ok(cf_last_error(), '!'));
    /* control characters are shown as '?' (a newline would break the caret's line up) */
    CHECK_STATUS(cf_parse_layout("(n)->\n(n)\x01", &L), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "\n    (n)-> (n)?\n             ^");
}

int main(void)
{
    RUN(test_type_signatures);
    RUN(test_type_signature_errors);
    RUN(test_layouts);
    RUN(test_layout_errors);
    RUN(test_embedded_nul);
    RUN(test_not_utf8);
    RUN(test_long_dimension_names);
    RUN(test_huge_text_excerpt);
    return SUMMARY();
}
