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

int main(void)
{
    RUN(test_type_signatures);
    RUN(test_type_signature_errors);
    RUN(test_layouts);
    RUN(test_layout_errors);
    return SUMMARY();
}
