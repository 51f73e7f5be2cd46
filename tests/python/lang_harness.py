"""Differential-testing harness for the kernel language and the runtime header.

Two halves:

* Host-side building blocks shared by test_runtime_header.py and the language tests: edge and
  random values per NumPy type, exact (bitwise, NaN == NaN, signed zeros) and ulp comparisons,
  a cached g++ build of C++ sources into a shared library, an NVRTC compile check.
* ``run_cases``: translate many Python functions with ``cufunc.lang.translate``, wrap each
  generated ``__device__`` function in an ``extern "C"`` host entry, compile ALL of them into one
  shared library with g++ (one g++ run per batch, not per function), call them through ctypes over
  input vectors and compare with CPython running the original function on NumPy scalars; then
  compile the same sources with NVRTC (sm_90) in one program to check they compile for the GPU.

The host build treats ``__device__``/``__host__`` as empty (the runtime header does that when it is
not compiled by a CUDA compiler), so the generated code runs on the CPU with glibc's libm.
"""

import ctypes
import hashlib
import importlib
import os
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TEMPLATES = os.path.join(ROOT, "templates")
RUNTIME = os.path.join(TEMPLATES, "cufunc", "runtime.cuh")
CXX = os.environ.get("CXX", "g++")
CXXFLAGS = ["-std=c++17", "-O1", "-ffp-contract=off", "-fno-fast-math", "-fPIC", "-shared", "-w"]
NVRTC_ARCH = "sm_90"

# ---------------------------------------------------------------------------------------------


def import_cufunc():
    """Return (cufunc.lang, cufunc.types): the installed package (its C extension is built)."""
    import cufunc.lang
    import cufunc.types
    return cufunc.lang, cufunc.types


# ---------------------------------------------------------------------------------------------
# types and values

CNAME = {
    "bool": "cf_bool", "int8": "cf_int8", "int16": "cf_int16", "int32": "cf_int32",
    "int64": "cf_int64", "uint8": "cf_uint8", "uint16": "cf_uint16", "uint32": "cf_uint32",
    "uint64": "cf_uint64", "float32": "cf_float32", "float64": "cf_float64",
    "complex64": "cf_complex64", "complex128": "cf_complex128",
}
INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_TYPES = ["float32", "float64"]
COMPLEX_TYPES = ["complex64", "complex128"]
ALL_TYPES = ["bool"] + INT_TYPES + FLOAT_TYPES + COMPLEX_TYPES


def float_edges(dt):
    dt = np.dtype(dt)
    fi = np.finfo(dt)
    tiny, dmin, big = float(fi.tiny), float(fi.smallest_subnormal), float(fi.max)
    v = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, -3.0, 2.0, -7.5, 7.0,
         0.1, -0.1, np.pi, -np.pi, 100.0, -100.5, 1e10, -1e10, 2.0**31, -2.0**31, 2.0**63,
         -2.0**63, 2.0**64, 4294967295.5, 1e19, tiny, -tiny, dmin, -dmin, 3 * dmin, tiny / 3,
         big, -big, big / 2, -big / 2, float(np.sqrt(big)), np.nan, np.inf, -np.inf,
         float(np.log(big)), -float(np.log(big)), 1 - float(fi.eps), 1 + float(fi.eps)]
    return np.array(v, dtype=dt)


def int_edges(dt):
    ii = np.iinfo(dt)
    bits = ii.bits
    v = [0, 1, 2, 3, 7, bits - 1, bits, bits + 1, ii.max, ii.max - 1, ii.max // 2, 100]
    if ii.min < 0:
        v += [-1, -2, -3, -7, -bits, ii.min, ii.min + 1, ii.min // 2, -100]
    return np.array(list(dict.fromkeys(x for x in v if ii.min <= x <= ii.max)), dtype=dt)


def edges(dt):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return np.array([False, True])
    if dt.kind in "iu":
        return int_edges(dt)
    if dt.kind == "f":
        return float_edges(dt)
    fe = float_edges(np.float32 if dt == np.complex64 else np.float64)
    sel = fe[[0, 1, 2, 3, 4, 6, 11, 16, 30, 36, 38, 41, 42, 43]]
    re_, im_ = np.meshgrid(sel, sel)
    return _mk_complex(re_.ravel(), im_.ravel(), dt)


def _mk_complex(re_, im_, dt):
    out = np.empty(len(re_), dtype=dt)
    out.real = re_
    out.imag = im_  # assigning keeps signed zeros and NaNs, unlike re + 1j*im
    return out


def random_values(dt, n, rng, lo=None, hi=None):
    """Random values of a type: uniform over the whole range for integers (or [lo, hi]),
    log-uniform magnitudes with random signs for floats (plus some small integers)."""
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        ii = np.iinfo(dt)
        lo = ii.min if lo is None else lo
        hi = ii.max if hi is None else hi
        return rng.integers(lo, hi, n, dtype=dt, endpoint=True)
    if dt.kind == "f":
        fi = np.finfo(dt)
        e_lo = np.log2(float(fi.tiny)) if lo is None else lo
        e_hi = np.log2(float(fi.max)) - 1 if hi is None else hi
        mag = np.exp2(rng.uniform(e_lo, e_hi, n))
        v = mag * rng.choice([-1.0, 1.0], n)
        k = n // 8
        v[:k] = rng.integers(-20, 21, k)
        v[k:2 * k] = rng.uniform(-4, 4, k)
        return v.astype(dt)
    ft = np.float32 if dt == np.complex64 else np.float64
    return _mk_complex(random_values(ft, n, rng, lo, hi), random_values(ft, n, rng, lo, hi), dt)


def values_for(dt, n_random, rng, lo=None, hi=None):
    return np.concatenate([edges(dt), random_values(dt, n_random, rng, lo, hi)])


def pairs(dta, dtb, n_random, rng):
    """Every pair of edge values plus random pairs."""
    ea, eb = edges(dta), edges(dtb)
    a = np.repeat(ea, len(eb))
    b = np.tile(eb, len(ea))
    return (np.concatenate([a, random_values(dta, n_random, rng)]),
            np.concatenate([b, random_values(dtb, n_random, rng)]))


# ---------------------------------------------------------------------------------------------
# comparisons

def _real_exact(e, a):
    if e.dtype.kind == "f":
        both_nan = np.isnan(e) & np.isnan(a)
        ui = np.dtype("u%d" % e.dtype.itemsize)
        return both_nan | (e.view(ui) == a.view(ui))
    return e == a


def exact_equal(expected, actual):
    """Elementwise: identical values; floats bitwise (so signed zeros count), any NaN == NaN."""
    e, a = np.asarray(expected), np.asarray(actual)
    assert e.dtype == a.dtype, (e.dtype, a.dtype)
    if e.dtype.kind == "c":
        return _real_exact(e.real.copy(), a.real.copy()) & _real_exact(e.imag.copy(), a.imag.copy())
    return _real_exact(e, a)


def _ordered(x):
    """Floats mapped to integers whose difference counts ulps (-0 and +0 both map to 0)."""
    bits = x.dtype.itemsize * 8
    i = x.view(np.dtype("i%d" % x.dtype.itemsize)).astype(object if bits == 64 else np.int64)
    if bits == 64:
        return np.array([v if v >= 0 else -(v & 0x7FFFFFFFFFFFFFFF) for v in i], dtype=object)
    return np.where(i >= 0, i, -(i & 0x7FFFFFFF))


def ulp_distance(expected, actual):
    """Elementwise ulp distance of real floats; 0 for NaN vs NaN and equal infinities, a huge
    number when exactly one is NaN."""
    e = np.asarray(expected)
    a = np.asarray(actual)
    assert e.dtype == a.dtype and e.dtype.kind == "f"
    d = np.abs(_ordered(e) - _ordered(a)).astype(float)
    ne, na = np.isnan(e), np.isnan(a)
    d[ne & na] = 0
    d[ne ^ na] = np.inf
    return d


def complex_error_ulps(expected, actual):
    """Componentwise error in ulps of the larger component's magnitude of the expected value (the
    usual measure for complex functions, where a small component may carry no relative accuracy).
    Non-finite expected components must match in NaN-ness and (for infinities) value."""
    e = np.asarray(expected)
    a = np.asarray(actual)
    ft = e.real.dtype
    with np.errstate(all="ignore"):
        fin_re = np.where(np.isfinite(e.real), np.abs(e.real), 0)
        fin_im = np.where(np.isfinite(e.imag), np.abs(e.imag), 0)
        mag = np.maximum(fin_re, fin_im)  # an infinite component does not scale the other's error
        unit = np.spacing(mag.astype(ft)).astype(np.float64)
        unit = np.maximum(unit, float(np.finfo(ft).smallest_subnormal))
        out = np.zeros(len(e))
        for comp in ("real", "imag"):
            ec = getattr(e, comp).astype(np.float64)
            ac = getattr(a, comp).astype(np.float64)
            fin = np.isfinite(ec) & np.isfinite(ac)
            err = np.where(fin, np.abs(ec - ac) / unit, 0.0)
            bad = ~fin & ~((np.isnan(ec) & np.isnan(ac)) | (ec == ac))
            out = np.maximum(out, np.where(bad, np.inf, err))
    return out


def to_type(value, dt):
    """A reference result converted to a declared type the way NumPy's astype does (no
    exception for out-of-range values: the same wrap/indefinite rules as the runtime header)."""
    dt = np.dtype(dt)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if isinstance(value, bool) or isinstance(value, np.bool_):
            return np.array(bool(value)).astype(dt)[()]
        if isinstance(value, int):
            if -(1 << 63) <= value < (1 << 64):
                src = np.array(value, dtype=np.int64 if value < (1 << 63) else np.uint64)
            else:  # beyond 64 bits: Python would not give a machine integer; keep the low bits
                src = np.array(value & ((1 << 64) - 1), dtype=np.uint64)
            return src.astype(dt)[()]
        return np.asarray(value).astype(dt)[()]


# ---------------------------------------------------------------------------------------------
# building

def _cache_dir():
    d = os.environ.get("CUFUNC_TEST_TMP") or os.path.join(tempfile.gettempdir(), "cufunc-lang-tests")
    os.makedirs(d, exist_ok=True)
    return d


def runtime_hash():
    h = hashlib.sha256()
    for name in sorted(os.listdir(os.path.join(TEMPLATES, "cufunc"))):
        if name.startswith("runtime"):
            with open(os.path.join(TEMPLATES, "cufunc", name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()


class BuildError(Exception):
    def __init__(self, message, log):
        super().__init__(message + "\n" + log[-6000:])
        self.log = log


def build_shared(source, tag="shim"):
    """Compile a C++ source into a shared library with g++ (cached by source, runtime header and
    flags) and load it. Raises BuildError with the compiler log."""
    key = hashlib.sha256((source + runtime_hash() + " ".join(CXXFLAGS)).encode()).hexdigest()[:24]
    so = os.path.join(_cache_dir(), "%s-%s.so" % (tag, key))
    if not os.path.exists(so):
        # per-process names: pytest -n workers build the same library at once, and a source
        # file rewritten under another worker's g++ gave a library missing functions
        cpp = so[:-3] + ".%d.cpp" % os.getpid()
        with open(cpp, "w") as f:
            f.write(source)
        tmp = so + ".%d.tmp" % os.getpid()
        p = subprocess.run([CXX] + CXXFLAGS + ["-I", TEMPLATES, cpp, "-o", tmp],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise BuildError("g++ failed on %s" % cpp, p.stderr)
        os.replace(tmp, so)
    return ctypes.CDLL(so)


_NVRTC = None


def _nvrtc_lib():
    global _NVRTC
    if _NVRTC is None:
        cands = []
        for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
            if base:
                cands += [os.path.join(base, "lib64", n) for n in ("libnvrtc.so.13", "libnvrtc.so")]
        cands += ["libnvrtc.so.13", "libnvrtc.so"]
        for c in cands:
            try:
                _NVRTC = ctypes.CDLL(c)
                break
            except OSError:
                continue
        else:
            _NVRTC = False
    return _NVRTC or None


def nvrtc_available():
    return _core_compile() is not None or _nvrtc_lib() is not None


def _core_compile():
    core = sys.modules.get("cufunc._core")
    if core is None:
        try:
            core = importlib.import_module("cufunc._core")
        except Exception:
            return None
    return getattr(core, "compile_source", None)


def _runtime_headers():
    d = os.path.join(TEMPLATES, "cufunc")
    out = {}
    for name in sorted(os.listdir(d)):
        if name.endswith(".cuh"):
            with open(os.path.join(d, name)) as f:
                out["cufunc/" + name] = f.read()
    return out


def nvrtc_compile(source, options=("-std=c++17",), arch=NVRTC_ARCH, use_core=True):
    """Compile with NVRTC for ``arch`` ('sm_90'): returns (ok, log). Uses
    cufunc._core.compile_source when the extension provides it and ``use_core`` (the product's own
    path, with the templates embedded when the extension was built), else NVRTC through ctypes
    with the runtime headers read from templates/ now."""
    core_compile = _core_compile() if use_core else None
    if core_compile is not None:
        m = re.match(r"sm_(\d+)(\d)$", arch)
        try:
            core_compile(source, list(options), (int(m.group(1)), int(m.group(2))))
            return True, ""
        except Exception as exc:  # CompileError carries the log
            return False, str(exc)
    lib = _nvrtc_lib()
    if lib is None:
        raise RuntimeError("libnvrtc not found")
    hdrs = _runtime_headers()
    names = list(hdrs)
    prog = ctypes.c_void_p()
    H = (ctypes.c_char_p * len(names))(*[hdrs[n].encode() for n in names])
    N = (ctypes.c_char_p * len(names))(*[n.encode() for n in names])
    r = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"cufunc_test.cu", len(names), H, N)
    if r != 0:
        return False, "nvrtcCreateProgram failed: %d" % r
    opts = list(options) + ["-arch=%s" % arch]
    O = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    r = lib.nvrtcCompileProgram(prog, len(opts), O)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(max(n.value, 1))
    lib.nvrtcGetProgramLog(prog, buf)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return r == 0, buf.value.decode(errors="replace")


# ---------------------------------------------------------------------------------------------
# differential cases

class Case:
    """One function and signature to test.

    ``inputs``: one array per argument (NumPy arrays of the argument dtypes, same length).
    ``check``: 'exact', or a number of ulps (real results), or ('cplx', k) for complex results.
    ``ref``: optional replacement for the Python function as reference (for the departures that
    docs/language.md lists, e.g. negative integer powers); called with the NumPy scalar arguments.
    ``fallback``: optional reference used only where the Python function raises (math domain
    errors: the kernel gives NumPy's NaN/inf instead)."""

    def __init__(self, func, argtypes, return_type=None, inputs=None, check="exact", ref=None,
                 fallback=None, label=None, precision=None, typing="numpy"):
        self.func = func
        self.typing = typing   # the translator's typing policy ("numpy" or "numba")
        self.argtypes = list(argtypes)
        self.return_type = return_type
        self.inputs = inputs
        self.check = check
        self.ref = ref
        self.fallback = fallback
        self.label = label or getattr(func, "__name__", "f")
        # compare in this dtype (e.g. float32 for math.sin of a float32: docs/language.md has it use
        # sinf, while CPython's math gives a double; the ulp bound is meant in float32 ulps)
        self.precision = precision
        self.result = None  # the translation
        self.error = None   # a failure message

    def __repr__(self):
        return "<Case %s(%s)>" % (self.label, ", ".join(str(t) for t in self.argtypes))


def _tname(t):
    return t.name if hasattr(t, "name") else str(t)


def _np_dtype(t):
    if hasattr(t, "dtype"):
        return np.dtype(t.dtype)
    return np.dtype(str(t))


def _cname(t):
    c = getattr(t, "cname", None)
    return c if c else CNAME[np.dtype(_np_dtype(t)).name]


def reference(case, i):
    args = [np.asarray(inp[i]).astype(_np_dtype(t))[()] for inp, t in zip(case.inputs, case.argtypes)]
    fn = case.ref or case.func
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args)
        except (ValueError, OverflowError, ZeroDivisionError):
            if case.fallback is None:
                raise
            return case.fallback(*args)


def _strip_include(src):
    return re.sub(r'^\s*#\s*include\s+"cufunc/runtime\.cuh"\s*$', "", src, flags=re.M)


def translate_all(lang, cases):
    """Translate each case; record failures on the case."""
    for c in cases:
        try:
            c.result = lang.translate(c.func, c.argtypes, c.return_type, typing=c.typing)
            if not c.result.source.lstrip().startswith('#include "cufunc/runtime.cuh"'):
                c.error = "generated source does not start with #include \"cufunc/runtime.cuh\""
        except Exception as exc:
            c.error = "translate raised %s: %s" % (type(exc).__name__, exc)


def _program(cases, header, entry, element):
    """One source of every case's generated code, each followed by its entry point: entry % (k,
    parameters, result type, function, arguments), each argument element % j. Returns the source
    and each case's line span (to blame a compiler's errors on their case)."""
    parts = [header]
    spans = []
    for k, c in enumerate(cases):
        r = c.result
        start = sum(p.count("\n") for p in parts) + 1
        args = r.arg_types
        params = ", ".join("const %s *a%d" % (_cname(t), j) for j, t in enumerate(args))
        call = ", ".join(element % j for j in range(len(args)))
        # generated sources are made to be concatenated (include-guarded definitions, names
        # unique per function and signature), as the product bundles them into one unit
        parts.append("%s\n" % _strip_include(r.source))
        parts.append(entry % (k, params, ", " if params else "", _cname(r.return_type), r.name,
                              call))
        end = sum(p.count("\n") for p in parts) + 1
        spans.append((start, end))
    return "".join(parts), spans


def _host_program(cases):
    """The cases for the host compiler: cfentryK(a0, ..., out, n) loops over n elements."""
    return _program(cases, '#include "cufunc/runtime.cuh"\n#include <cstring>\n',
                    'extern "C" void cfentry%d(%s%s%s *out, long n) {\n'
                    "  for (long i = 0; i < n; i++) out[i] = %s(%s);\n}\n", "a%d[i]")


def _device_program(cases):
    """The cases for NVRTC: kernel cfkernelK(a0, ..., out), one element per thread."""
    return _program(cases, '#include "cufunc/runtime.cuh"\n',
                    'extern "C" __global__ void cfkernel%d(%s%s%s *out) {\n'
                    "  out[threadIdx.x] = %s(%s);\n}\n", "a%d[threadIdx.x]")


def _blame(log, spans, file_pat):
    bad = set()
    for m in re.finditer(file_pat, log):
        line = int(m.group(1))
        for k, (s, e) in enumerate(spans):
            if s <= line < e:
                bad.add(k)
    return bad


def _compile_batch(cases, builder, compiler, file_pat, what):
    """Compile cases in one program; cases whose lines the compiler blames are marked failed and
    the rest recompiled. Returns what ``compiler`` returns for the surviving cases."""
    live = list(cases)
    for _ in range(8):
        if not live:
            return live, None
        src, spans = builder(live)
        ok, out, log = compiler(src)
        if ok:
            return live, out
        bad = _blame(log, spans, file_pat)
        if not bad:  # cannot attribute: blame every case (the runtime header is then suspect)
            for c in live:
                c.error = "%s failed for the whole batch:\n%s" % (what, log[-3000:])
            return [], None
        for k in sorted(bad):
            c = live[k]
            c.error = "%s rejected the generated code:\n%s\n--- log ---\n%s" % (
                what, c.result.source, _case_log(log, spans[k], file_pat))
        live = [c for k, c in enumerate(live) if k not in bad]
    return live, None


def _case_log(log, span, file_pat):
    keep = []
    for line in log.splitlines():
        m = re.search(file_pat, line)
        if m and span[0] <= int(m.group(1)) < span[1]:
            keep.append(line)
    return "\n".join(keep[:20]) or log[-2000:]


def _gpp(src):
    try:
        return True, build_shared(src, "lang"), ""
    except BuildError as exc:
        return False, None, exc.log


def _nvrtc(src):
    ok, log = nvrtc_compile(src, ("-std=c++17", "--fmad=false"))
    return ok, None, log


def check_values(case, expected, actual):
    """Indices where actual disagrees with expected beyond the case's tolerance, and the errors."""
    if case.check == "exact":
        bad = ~exact_equal(expected, actual)
        return np.nonzero(bad)[0], None
    if isinstance(case.check, tuple) and case.check[0] == "cplx":
        err = complex_error_ulps(expected, actual)
        return np.nonzero(err > case.check[1])[0], err
    if expected.dtype.kind == "c":
        err = complex_error_ulps(expected, actual)
    elif expected.dtype.kind == "f":
        err = ulp_distance(expected, actual)
    else:
        err = (expected != actual).astype(float) * np.inf
    return np.nonzero(err > case.check)[0], err


def run_cases(cases, lang=None, nvrtc=True, max_report=5):
    """Translate, build, run and compare every case. Returns a list of failure messages (empty
    when everything agrees). Each case's ``error`` is set on failure."""
    if lang is None:
        lang, _ = import_cufunc()
    if lang is None:
        for c in cases:
            c.error = "cufunc.lang.translate is not available"
        return ["cufunc.lang.translate is not available (%d cases not run)" % len(cases)]
    translate_all(lang, cases)
    live = [c for c in cases if c.error is None]
    live, lib = _compile_batch(live, _host_program, _gpp, r"\.cpp:(\d+):\d+: error", "g++")
    index = {id(c): k for k, c in enumerate(live)}
    if lib is not None:
        for c in live:
            _run_one(c, lib, index[id(c)], max_report)
    if nvrtc and nvrtc_available():
        dev = [c for c in cases if c.result is not None and c.error is None]
        _compile_batch(dev, _device_program, _nvrtc, r"(?:cufunc_test|cufunc_kernel)\.cu\((\d+)\): error", "NVRTC")
    return ["%r: %s" % (c, c.error) for c in cases if c.error]


def _run_one(case, lib, k, max_report):
    r = case.result
    n = len(case.inputs[0]) if case.inputs else 1
    ins = [np.ascontiguousarray(np.asarray(inp).astype(_np_dtype(t)))
           for inp, t in zip(case.inputs, r.arg_types)]
    rdt = _np_dtype(r.return_type)
    out = np.zeros(n, dtype=rdt)
    fn = getattr(lib, "cfentry%d" % k)
    fn.restype = None
    fn(*[x.ctypes.data_as(ctypes.c_void_p) for x in ins], out.ctypes.data_as(ctypes.c_void_p),
       ctypes.c_long(n))
    if case.return_type is not None and _np_dtype(case.return_type) != rdt:
        case.error = "return type %s, declared %s" % (_tname(r.return_type), _tname(case.return_type))
        return
    expected = np.empty(n, dtype=rdt)
    for i in range(n):
        try:
            expected[i] = to_type(reference(case, i), rdt)
        except Exception as exc:
            case.error = "reference raised %s: %s for inputs %s" % (
                type(exc).__name__, exc, _fmt_inputs(case, i))
            return
    if case.precision is not None:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = expected.astype(case.precision)
            out = out.astype(case.precision)
    bad, err = check_values(case, expected, out)
    if len(bad):
        lines = []
        for i in bad[:max_report]:
            lines.append("  f(%s): expected %r, got %r%s" % (
                _fmt_inputs(case, i), expected[i], out[i],
                "" if err is None else " (error %.3g ulp, bound %s)" % (err[i], case.check)))
        case.error = "%d of %d results differ:\n%s\n--- generated ---\n%s" % (
            len(bad), n, "\n".join(lines), r.source)


def _fmt_inputs(case, i):
    return ", ".join("%s(%r)" % (_tname(t), inp[i]) for inp, t in zip(case.inputs, case.argtypes))
