"""Compare the element-wise, gufunc and reduce kernels of two cufunc builds: SASS and NVRTC time.

Needs NVRTC and cuobjdump, not a GPU. Each build is a cufunc._core shared object (the installed
one, or a copy of an older build); its public C API is called through ctypes, so any operand
layout can be described (device pointers are made up: nothing is launched or allocated). For a
fixed set of keys (loop + operand views) it writes the kernel source the build generates,
compiles it for sm_90 with that build's own template bundle (the median of --reps compiles is the
NVRTC time of a first compile: the calling thread's CPU time, which the load of a shared machine
disturbs far less than wall time; NVRTC compiles on the calling thread), dumps the SASS with cuobjdump and counts instructions, and the
global/shared memory instructions by opcode and width.

    python tools/kernel_compare.py dump LIB OUTDIR [--reps N]
    python tools/kernel_compare.py compare OLD_LIB NEW_LIB [--reps N] [--keep DIR]
    python tools/kernel_compare.py cubins OLD_LIB NEW_LIB [--reps N] [--keep DIR] [--families gu,ew,red]

`compare` runs `dump` for each build in a subprocess (each also under CUFUNC_EW_TILE_PIPELINE=0
for the one-tile-per-block kernel) and prints a table: per key, old/new instruction counts,
whether the memory instructions are the same multiset, the NVRTC medians and the source sizes.
Exit status 1 when some key's memory instructions or instruction count differ.

`cubins` needs no cuobjdump: per key it byte-compares the two builds' CUBINs and prints the NVRTC
medians of the two sources, compiled alternately (exit status 1 when some CUBIN differs).
"""
import argparse
import collections
import ctypes as C
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

MAX_DIMS = 64
BOOL, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, F16, F32, F64, C8, C16 = range(14)
# cuobjdump needs nvdisasm beside it or on PATH (pip: nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm)
CUOBJDUMP = os.environ.get("CUOBJDUMP", "/usr/local/cuda/bin/cuobjdump")


class Array(C.Structure):
    _fields_ = [("data", C.c_uint64), ("dtype", C.c_int), ("ndim", C.c_int), ("device", C.c_int),
                ("shape", C.c_int64 * MAX_DIMS), ("strides", C.c_int64 * MAX_DIMS)]


class Operand(C.Structure):
    _fields_ = [("is_scalar", C.c_int), ("array", Array), ("scalar_dtype", C.c_int),
                ("scalar", C.c_ubyte * 16)]


class GuShapes(C.Structure):
    _fields_ = [("loop_ndim", C.c_int), ("loop_shape", C.c_int64 * MAX_DIMS),
                ("dim_size", C.c_int64 * 64)]


SIZE = {BOOL: 1, INT16: 2, INT32: 4, F32: 4, F64: 8, C16: 16}
CT = {BOOL: "cf_bool", INT32: "cf_int32", F32: "cf_float32", F64: "cf_float64"}


_next = [0x7f0000000000]


def arr(dtype, shape, strides=None):
    """A view at a fresh made-up address (no two overlap); strides in elements (None: C order)."""
    data = _next[0]
    _next[0] += 1 << 40
    a = Operand()
    a.is_scalar = 0
    a.array.data = data
    a.array.dtype = dtype
    a.array.ndim = len(shape)
    if strides is None:
        strides, acc = [], 1
        for n in reversed(shape):
            strides.insert(0, acc)
            acc *= n
    for k, (n, s) in enumerate(zip(shape, strides)):
        a.array.shape[k] = n
        a.array.strides[k] = s * SIZE[dtype]
    return a


def scalar(dtype, raw=b"\0\0\0\x40"):
    s = Operand()
    s.is_scalar = 1
    s.scalar_dtype = dtype
    for i, b in enumerate(raw):
        s.scalar[i] = b
    return s


HYPOT = ("cf_hyp", """
__device__ inline cf_float32 cf_hyp(cf_float32 a, cf_float32 b)
{
    return cf_hypot(a, b);
}
""")
DIVMOD = ("cf_dm", """
struct cf_dm_r { cf_float32 f0; cf_float32 f1; };
__device__ inline cf_dm_r cf_dm(cf_float32 a, cf_float32 b)
{
    cf_dm_r r;
    r.f0 = a / b;
    r.f1 = a - b * r.f0;
    return r;
}
""")
ROWSUM = ("cf_rowsum", """
__device__ inline void cf_rowsum(cf_array_ref<cf_float32, 1> a, cf_array_ref<cf_float32, 1> out)
{
    cf_float32 s{};
    const long long n = a.shape[0];
    for (long long i = 0; i < n; ++i)
        s = s + *(cf_float32 *)(a.data + i * a.strides[0]);
    *(cf_float32 *)(out.data) = s;
}
""")
MATMUL = ("cf_mm", """
__device__ inline void cf_mm(cf_array_ref<cf_float32, 2> a, cf_array_ref<cf_float32, 2> b,
                             cf_array_ref<cf_float32, 2> c)
{
    for (long long i = 0; i < a.shape[0]; ++i)
        for (long long j = 0; j < b.shape[1]; ++j) {
            cf_float32 s{};
            for (long long k = 0; k < a.shape[1]; ++k)
                s = s + *(cf_float32 *)(a.data + i * a.strides[0] + k * a.strides[1]) *
                        *(cf_float32 *)(b.data + k * b.strides[0] + j * b.strides[1]);
            *(cf_float32 *)(c.data + i * c.strides[0] + j * c.strides[1]) = s;
        }
}
""")
# (),(),(n)->(n): a scalar core-less input, a by-value element, a core array
AXPY = ("cf_axpy", """
__device__ inline void cf_axpy(cf_float32 a, cf_float32 b, cf_array_ref<cf_float32, 1> x,
                               cf_array_ref<cf_float32, 1> y)
{
    for (long long i = 0; i < x.shape[0]; ++i)
        *(cf_float32 *)(y.data + i * y.strides[0]) =
            a * *(cf_float32 *)(x.data + i * x.strides[0]) + b;
}
""")

CMATMUL = ("cf_cmm", """
__device__ inline void cf_cmm(cf_array_ref<cf_complex128, 2> a, cf_array_ref<cf_complex128, 2> b,
                              cf_array_ref<cf_complex128, 2> c)
{
    for (long long i = 0; i < a.shape[0]; ++i)
        for (long long j = 0; j < b.shape[1]; ++j) {
            cf_complex128 s{};
            for (long long k = 0; k < a.shape[1]; ++k)
                s = s + *(cf_complex128 *)(a.data + i * a.strides[0] + k * a.strides[1]) *
                        *(cf_complex128 *)(b.data + k * b.strides[0] + j * b.strides[1]);
            *(cf_complex128 *)(c.data + i * c.strides[0] + j * c.strides[1]) = s;
        }
}
""")
MINMAX = ("cf_minmax", """
__device__ inline void cf_minmax(cf_array_ref<cf_float64, 1> a, cf_array_ref<cf_float64, 1> lo,
                                 cf_array_ref<cf_float64, 1> hi)
{
    cf_float64 l = *(cf_float64 *)a.data, h = l;
    for (long long i = 1; i < a.shape[0]; ++i) {
        cf_float64 x = *(cf_float64 *)(a.data + i * a.strides[0]);
        l = x < l ? x : l;
        h = x > h ? x : h;
    }
    *(cf_float64 *)lo.data = l;
    *(cf_float64 *)hi.data = h;
}
""")
SUM3 = ("cf_sum3", """
__device__ inline void cf_sum3(cf_array_ref<cf_float32, 3> a, cf_array_ref<cf_float32, 1> out)
{
    cf_float32 s{};
    for (long long i = 0; i < a.shape[0]; ++i)
        for (long long j = 0; j < a.shape[1]; ++j)
            for (long long k = 0; k < a.shape[2]; ++k)
                s = s + *(cf_float32 *)(a.data + i * a.strides[0] + j * a.strides[1] +
                                        k * a.strides[2]);
    *(cf_float32 *)out.data = s;
}
""")
SCALE_ARR = ("cf_scale_arr", """
__device__ inline void cf_scale_arr(cf_array_ref<cf_float64, 1> x, cf_array_ref<cf_float64, 1> a,
                                    cf_array_ref<cf_float64, 1> y)
{
    for (long long i = 0; i < x.shape[0]; i++)
        *(cf_float64 *)(y.data + i * y.strides[0]) =
            *(cf_float64 *)(x.data + i * x.strides[0]) * *(cf_float64 *)a.data;
}
""")
CUMSUM16 = ("cf_cumsum16", """
__device__ inline void cf_cumsum16(cf_array_ref<cf_int16, 1> x, cf_int16 k, cf_array_ref<cf_int16, 1> y)
{
    cf_int16 s = k;
    for (long long i = 0; i < x.shape[0]; i++) {
        s = (cf_int16)(s + *(cf_int16 *)(x.data + i * x.strides[0]));
        *(cf_int16 *)(y.data + i * y.strides[0]) = s;
    }
}
""")
ANYB = ("cf_anyb", """
__device__ inline void cf_anyb(cf_array_ref<cf_bool, 1> x, cf_int32 k, cf_array_ref<cf_bool, 1> y)
{
    bool r = false;
    for (long long i = 0; i < x.shape[0] && i < k; i++)
        r = r || *(cf_bool *)(x.data + i * x.strides[0]);
    *(cf_bool *)y.data = r;
}
""")

ADD = ("cf_add", """
__device__ inline cf_float32 cf_add(cf_float32 a, cf_float32 b)
{
    return a + b;
}
""")

N2 = 4096


def ew_keys():
    """(name, (fn, src), types, nout, operands, where, loop shape)"""
    f = [F32, F32, F32]
    big = 1 << 20
    return [
        ("ew flat hypot 2^20", HYPOT, f, 1, [arr(F32, [big]), arr(F32, [big]), arr(F32, [big])],
         None, [big]),
        ("ew one element", HYPOT, f, 1, [arr(F32, [1]), arr(F32, [1]), arr(F32, [1])], None, [1]),
        ("ew flat scalar+cast", HYPOT, f, 1,
         [arr(INT32, [big]), scalar(F32), arr(F64, [big])], None, [big]),
        ("ew flat where", HYPOT, f, 1,
         [arr(F32, [big]), arr(F32, [big]), arr(F32, [big]), arr(BOOL, [big])], "w", [big]),
        ("ew flat divmod 2 outs", DIVMOD, [F32] * 4, 2, [arr(F32, [big]) for _ in range(4)], None, [big]),
        ("ew strided 1-D", HYPOT, f, 1,
         [arr(F32, [big], [2]), arr(F32, [big]), arr(F32, [big])], None, [big]),
        ("ew strided 3-D", HYPOT, f, 1,
         [arr(F32, [64, 64, 63], [64 * 64 * 2, 64 * 2, 2]), arr(F32, [64, 64, 63]),
          arr(F32, [64, 64, 63])], None, [64, 64, 63]),
        ("ew strided 64-bit", HYPOT, f, 1,
         [arr(F32, [(1 << 31) + 8], [2]), arr(F32, [(1 << 31) + 8]),
          arr(F32, [(1 << 31) + 8])], None, [(1 << 31) + 8]),
        ("ew broadcast rowvec", HYPOT, f, 1,
         [arr(F32, [N2, 1]), arr(F32, [1, N2]), arr(F32, [N2, N2])], None, [N2, N2]),
        ("ew rowvec sliced rows", HYPOT, f, 1,
         [arr(F32, [1024, 1024], [2048, 1]), arr(F32, [1024, 1024]), arr(F32, [1024, 1024])],
         None, [1024, 1024]),
        ("ew transposed tile", HYPOT, f, 1,
         [arr(F32, [N2, N2]), arr(F32, [N2, N2], [1, N2]), arr(F32, [N2, N2])], None, [N2, N2]),
        ("ew transposed tile where", HYPOT, f, 1,
         [arr(F32, [N2, N2]), arr(F32, [N2, N2], [1, N2]), arr(F32, [N2, N2]),
          arr(BOOL, [N2, N2])], "w", [N2, N2]),
    ]


def gu_keys():
    """(name, (fn, src), layout, types, arg_ndim, operands[, fresh_outputs])"""
    big = 1 << 26
    t4 = [arr(F32, [64, 32, 4, 4]) for _ in range(3)]
    t4[0].array.strides[0], t4[0].array.strides[1] = 64, 64 * 64  # loop axes that do not merge
    mis = arr(F32, [4096, 1024])
    mis.array.data += 4                                            # element copies, not 16 bytes
    return [
        ("gu row-sum (n)->() 4096x1024", ROWSUM, "(n)->()", [F32, F32], [1, 1],
         [arr(F32, [4096, 1024]), arr(F32, [4096])]),
        ("gu row-sum strided rows", ROWSUM, "(n)->()", [F32, F32], [1, 1],
         [arr(F32, [4096, 1024], [1, 4096]), arr(F32, [4096])]),
        ("gu matmul 4x4 x 2^20", MATMUL, "(m,n),(n,p)->(m,p)", [F32] * 3, [2, 2, 2],
         [arr(F32, [1 << 20, 4, 4]), arr(F32, [1 << 20, 4, 4]), arr(F32, [1 << 20, 4, 4])]),
        ("gu matmul 4x4 one shared", MATMUL, "(m,n),(n,p)->(m,p)", [F32] * 3, [2, 2, 2],
         [arr(F32, [1 << 20, 4, 4]), arr(F32, [4, 4]), arr(F32, [1 << 20, 4, 4])]),
        ("gu scalar core dims", AXPY, "(),(),(n)->(n)", [F32] * 4, [0, 0, 1, 1],
         [scalar(F32), arr(F64, [1000]), arr(F32, [1000, 64]), arr(F32, [1000, 64])]),
        ("gu unstaged 3-D loop", AXPY, "(),(),(n)->(n)", [F32] * 4, [0, 0, 1, 1],
         [scalar(F32), arr(F32, [8, 9, 10]), arr(F32, [8, 9, 10, 3], [9 * 10 * 8, 80, 8, 2]),
          arr(F32, [8, 9, 10, 3])]),
        # the keys below: tools/kernel_compare.py cubins (gufunc kernels from templates/)
        ("gu matmul 4x4 fresh outputs", MATMUL, "(m,n),(n,p)->(m,p)", [F32] * 3, [2, 2, 2],
         [arr(F32, [1 << 20, 4, 4]), arr(F32, [1 << 20, 4, 4]), arr(F32, [1 << 20, 4, 4])], 1),
        ("gu matmul 4x4 64-bit offsets", MATMUL, "(m,n),(n,p)->(m,p)", [F32] * 3, [2, 2, 2],
         [arr(F32, [big, 4, 4]), arr(F32, [4, 4]), arr(F32, [big, 4, 4])], 1),
        ("gu matmul 2-D loop unmerged", MATMUL, "(m,n),(n,p)->(m,p)", [F32] * 3, [2, 2, 2], t4, 1),
        ("gu matmul complex128", CMATMUL, "(m,n),(n,p)->(m,p)", [C16] * 3, [2, 2, 2],
         [arr(C16, [1 << 16, 4, 4]), arr(C16, [1 << 16, 4, 4]), arr(C16, [1 << 16, 4, 4])], 1),
        ("gu row-sum misaligned rows", ROWSUM, "(n)->()", [F32, F32], [1, 1],
         [mis, arr(F32, [4096])], 1),
        ("gu minmax two outputs", MINMAX, "(n)->(),()", [F64] * 3, [1, 1, 1],
         [arr(F64, [4096, 64]), arr(F64, [4096]), arr(F64, [4096])], 1),
        ("gu matmul F-order cores, in place", MATMUL, "(m,n),(n,p)->(m,p)", [F32] * 3, [2, 2, 2],
         [arr(F32, [1 << 16, 4, 4], [1, 1 << 16, 4 << 16]), arr(F32, [4, 4]),
          arr(F32, [1 << 16, 4, 4], [1, 1 << 16, 4 << 16])], 1),
        ("gu 3-D core strided, in place", SUM3, "(a,b,c)->()", [F32, F32], [3, 1],
         [arr(F32, [1024, 4, 4, 8], [512, 128, 32, 2]), arr(F32, [1024])], 1),
        ("gu 3-D core sum", SUM3, "(a,b,c)->()", [F32, F32], [3, 1],
         [arr(F32, [1024, 4, 4, 8]), arr(F32, [1024])], 1),
        ("gu scalar as array, int32 scalar", SCALE_ARR, "(n),()->(n)", [F64] * 3, [1, 1, 1],
         [arr(F64, [100, 16]), scalar(INT32), arr(F64, [100, 16])], 1),
        ("gu scalar by value cast, int16 loop", CUMSUM16, "(n),()->(n)", [INT16] * 3, [1, 0, 1],
         [arr(INT16, [1000, 8]), scalar(INT32), arr(INT16, [1000, 8])], 1),
        ("gu by-value bool element", ANYB, "(n),()->()", [BOOL, INT32, BOOL], [1, 0, 1],
         [arr(BOOL, [5000, 40]), arr(F32, [5000]), arr(BOOL, [5000])], 1),
    ]


def red_keys():
    """(name, (fn, src), input, reduced axes flags or None, scan axis, output (keepdims))"""
    return [
        ("red all strided 3-D", ADD, arr(F32, [64, 64, 63], [64 * 64 * 2, 64 * 2, 2]), [1, 1, 1],
         -1, arr(F32, [1, 1, 1])),
        ("red rows of a transposed 2-D", ADD, arr(F32, [4096, 1024], [1, 4096]), [0, 1], -1,
         arr(F32, [4096, 1])),
        ("red cols 3-D", ADD, arr(F32, [8, 1024, 512]), [0, 1, 0], -1,
         arr(F32, [8, 1, 512])),
        ("scan rows strided", ADD, arr(F32, [256, 1000], [2000, 2]), None, 1,
         arr(F32, [256, 1000])),
        ("scan cols 3-D", ADD, arr(F32, [4, 1000, 256]), None, 1, arr(F32, [4, 1000, 256])),
    ]


def load(lib):
    L = C.CDLL(lib, mode=C.RTLD_LOCAL)
    L.cf_last_error.restype = C.c_char_p
    return L


def check(L, st, what):
    if st:
        raise RuntimeError(f"{what}: status {st}: {L.cf_last_error().decode()}")


def ew_source(L, key):
    name, (fn, src), types, nout, ops, where, shape = key
    nin = len(types) - nout
    u = C.c_void_p()
    check(L, L.cf_ufunc_create(b"k", nin, nout, C.byref(u)), name)
    idx = C.c_int()
    check(L, L.cf_ufunc_add_loop(u, (C.c_int * len(types))(*types), src.encode(), fn.encode(),
                                 None, 0, C.byref(idx)), name)
    opv = (Operand * (nin + nout))(*ops[:nin + nout])
    wh = C.byref(ops[-1].array) if where else None
    out = C.c_char_p()
    check(L, L.cf_ufunc_kernel_source(u, 0, opv, wh, len(shape), (C.c_int64 * len(shape))(*shape),
                                      C.byref(out)), name)
    s = C.string_at(out).decode()
    L.cf_free_buffer(out)
    L.cf_ufunc_free(u)
    return s


def gu_source(L, key):
    name, (fn, src), layout, types, arg_ndim, ops = key[:6]
    fresh = key[6] if len(key) > 6 else 0
    g = C.c_void_p()
    check(L, L.cf_gufunc_create(b"g", layout.encode(), C.byref(g)), name)
    idx = C.c_int()
    n = len(types)
    check(L, L.cf_gufunc_add_loop(g, (C.c_int * n)(*types), (C.c_int * n)(*arg_ndim),
                                  src.encode(), fn.encode(), None, 0, C.byref(idx)), name)
    opv = (Operand * n)(*ops)
    nout = L.cf_gufunc_nout(g)
    has_out = (C.c_ubyte * nout)(*([1] * nout))
    sh = GuShapes()
    check(L, L.cf_gufunc_bind(g, opv, has_out, C.byref(sh)), name)
    out = C.c_char_p()
    check(L, L.cf_gufunc_kernel_source(g, 0, opv, C.byref(sh), fresh, C.byref(out)), name)
    s = C.string_at(out).decode()
    L.cf_free_buffer(out)
    L.cf_gufunc_free(g)
    return s


def red_source(L, key):
    name, (fn, src), inp, reduced, axis, out = key
    r = C.c_void_p()
    check(L, L.cf_reducer_create(b"r", C.byref(r)), name)
    idx = C.c_int()
    check(L, L.cf_reducer_add_loop(r, F32, src.encode(), fn.encode(), None, 0, C.byref(idx)), name)
    red = (C.c_ubyte * len(reduced))(*reduced) if reduced else None
    res = C.c_char_p()
    check(L, L.cf_reduce_kernel_source(r, 0, C.byref(inp.array), red, axis, C.byref(out.array),
                                       None, C.byref(res)), name)
    s = C.string_at(res).decode()
    L.cf_free_buffer(res)
    L.cf_reducer_free(r)
    return s


def compile_cubin(L, src, reps):
    image, size, is_ptx = C.c_void_p(), C.c_size_t(), C.c_int()
    times = []
    for _ in range(reps):
        t = time.thread_time()
        check(L, L.cf_compile_source(src.encode(), None, 0, 9, 0, C.byref(image), C.byref(size),
                                     C.byref(is_ptx)), "compile")
        times.append(time.thread_time() - t)
        data = C.string_at(image, size.value)
        L.cf_free_buffer(image)
    assert not is_ptx.value, "expected a cubin for sm_90"
    return data, times


INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)[^;]*;")
MEMOP = re.compile(r"^(LDG|STG|LDS|STS|LD|ST|LDGSTS|ATOMG|ATOMS|RED|LDL|STL)(\.|$)")


def sass_stats(cubin_path):
    text = subprocess.run([CUOBJDUMP, "--dump-sass", cubin_path], check=True,
                          capture_output=True, text=True).stdout
    ops = INSN.findall(text)
    mem = collections.Counter(o for o in ops if MEMOP.match(o))
    return {"insns": sum(1 for o in ops if o != "NOP"), "total": len(ops), "mem": dict(mem),
            "bra": sum(1 for o in ops if o.startswith("BRA")),
            "bar": sum(1 for o in ops if o.startswith("BAR"))}


def dump(lib, outdir, reps):
    L = load(lib)
    out = pathlib.Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    tag = "-nopipe" if os.environ.get("CUFUNC_EW_TILE_PIPELINE") == "0" else ""
    jobs = [(k[0] + tag, ew_source, k) for k in ew_keys() if not tag or "tile" in k[0]]
    if not tag:
        jobs += [(k[0], gu_source, k) for k in gu_keys()]
        jobs += [(k[0], red_source, k) for k in red_keys()]
    res = {}
    for name, gen, key in jobs:
        src = gen(L, key)
        cubin, times = compile_cubin(L, src, reps)
        stem = re.sub(r"\W+", "_", name)
        (out / f"{stem}.cu").write_text(src)
        (out / f"{stem}.cubin").write_bytes(cubin)
        st = sass_stats(str(out / f"{stem}.cubin"))
        st.update(name=name, src_bytes=len(src), nvrtc_ms=[1e3 * t for t in times])
        res[name] = st
        print(f"{name}: {st['insns']} insns, {statistics.median(times) * 1e3:.1f} ms",
              file=sys.stderr)
    with open(out / f"stats{tag}.json", "w") as f:
        json.dump(res, f, indent=1)


def run_dump(lib, outdir, reps):
    for env in ({}, {"CUFUNC_EW_TILE_PIPELINE": "0"}):
        subprocess.run([sys.executable, __file__, "dump", lib, outdir, "--reps", str(reps)],
                       check=True, env={**os.environ, **env})
    res = {}
    for f in sorted(pathlib.Path(outdir).glob("stats*.json")):
        res.update(json.loads(f.read_text()))
    return res


def timing(old, new, base, reps):
    """NVRTC medians of each key's old and new source, compiled alternately in one process (the
    machine's load drifts: alternating keeps the comparison fair)."""
    la, lb = load(old), load(new)
    res = {}
    for f in sorted((base / "old").glob("*.cu")):
        sa, sb = f.read_text(), (base / "new" / f.name).read_text()
        ta, tb = [], []
        for _ in range(reps):
            ta += compile_cubin(la, sa, 1)[1]
            tb += compile_cubin(lb, sb, 1)[1]
        res[f.stem] = (1e3 * statistics.median(ta), 1e3 * statistics.median(tb))
    (base / "timing.json").write_text(json.dumps(res, indent=1))


def cubins(old, new, reps, keep, families):
    """Byte-compare the CUBIN each build makes of each key (its own source, its own template
    bundle), and time the two sources' NVRTC compiles alternately (median of reps each). Needs
    NVRTC only: no GPU, no cuobjdump. Exit status 1 when some key's CUBINs differ."""
    la, lb = load(old), load(new)
    keys = []
    if "gu" in families:
        keys += [(k[0], gu_source, k) for k in gu_keys()]
    if "ew" in families:
        keys += [(k[0], ew_source, k) for k in ew_keys()]
    if "red" in families:
        keys += [(k[0], red_source, k) for k in red_keys()]
    base = pathlib.Path(keep) if keep else None
    print("| key | CUBIN old = new | NVRTC ms old / new (median of %d) | source bytes old / new |" % reps)
    print("|---|---|---|---|")
    differ, mo, mn = 0, [], []
    for name, gen, key in keys:
        sa, sb = gen(la, key), gen(lb, key)
        ca, ta = compile_cubin(la, sa, 1)
        cb, tb = compile_cubin(lb, sb, 1)
        for _ in range(reps - 1):
            ta += compile_cubin(la, sa, 1)[1]
            tb += compile_cubin(lb, sb, 1)[1]
        same = ca == cb
        differ += not same
        to, tn = 1e3 * statistics.median(ta), 1e3 * statistics.median(tb)
        mo.append(to)
        mn.append(tn)
        if base:
            stem = re.sub(r"\W+", "_", name)
            for tag, src, cub in (("old", sa, ca), ("new", sb, cb)):
                (base / tag).mkdir(parents=True, exist_ok=True)
                (base / tag / f"{stem}.cu").write_text(src)
                (base / tag / f"{stem}.cubin").write_bytes(cub)
        print(f"| {name} | {'yes' if same else '**no**'} ({len(ca)} / {len(cb)} bytes) | "
              f"{to:.1f} / {tn:.1f} | {len(sa)} / {len(sb)} |", flush=True)
    print(f"\n{len(keys) - differ} of {len(keys)} CUBINs identical; NVRTC median over keys: old "
          f"{statistics.median(mo):.1f} ms, new {statistics.median(mn):.1f} ms; sum old "
          f"{sum(mo):.0f} ms, new {sum(mn):.0f} ms")
    return 1 if differ else 0


def memstr(m):
    return " ".join(f"{k}x{v}" for k, v in sorted(m.items()))


def compare(old, new, reps, keep):
    base = pathlib.Path(keep or tempfile.mkdtemp(prefix="kernel_compare_"))
    a = run_dump(old, str(base / "old"), 1)
    b = run_dump(new, str(base / "new"), 1)
    subprocess.run([sys.executable, __file__, "timing", old, new, str(base), "--reps", str(reps)],
                   check=True)
    times = json.loads((base / "timing.json").read_text())
    bad = 0
    print("| key | SASS insns old/new | memory instructions (old = new?) | NVRTC ms old/new (median) "
          "| source bytes old/new |")
    print("|---|---|---|---|---|")
    mo, mn = [], []
    for name in a:
        x, y = a[name], b[name]
        same_mem = x["mem"] == y["mem"]
        same = same_mem and x["insns"] == y["insns"]
        bad += not same
        to, tn = times[re.sub(r"\W+", "_", name)]
        mo.append(to)
        mn.append(tn)
        mem = memstr(x["mem"]) + ("" if same_mem else "  ->  " + memstr(y["mem"]))
        print(f"| {name} | {x['insns']} / {y['insns']}{'' if same else ' **differs**'} | "
              f"{mem} {'(same)' if same_mem else '**differs**'} | {to:.1f} / {tn:.1f} | "
              f"{x['src_bytes']} / {y['src_bytes']} |")
    print(f"\nNVRTC median over keys: old {statistics.median(mo):.1f} ms, new "
          f"{statistics.median(mn):.1f} ms; sum old {sum(mo):.0f} ms, new {sum(mn):.0f} ms")
    print(f"sources, SASS dumps: {base}")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("lib")
    d.add_argument("outdir")
    d.add_argument("--reps", type=int, default=5)
    c = sub.add_parser("compare")
    c.add_argument("old")
    c.add_argument("new")
    c.add_argument("--reps", type=int, default=7)
    c.add_argument("--keep")
    b = sub.add_parser("cubins")
    b.add_argument("old")
    b.add_argument("new")
    b.add_argument("--reps", type=int, default=7)
    b.add_argument("--keep")
    b.add_argument("--families", default="gu", help="comma-separated: gu, ew, red")
    t = sub.add_parser("timing")
    t.add_argument("old")
    t.add_argument("new")
    t.add_argument("base")
    t.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    if args.cmd == "timing":
        timing(args.old, args.new, pathlib.Path(args.base), args.reps)
        return 0
    if args.cmd == "cubins":
        return cubins(args.old, args.new, args.reps, args.keep, args.families.split(","))
    if args.cmd == "dump":
        dump(args.lib, args.outdir, args.reps)
        return 0
    return compare(args.old, args.new, args.reps, args.keep)


if __name__ == "__main__":
    sys.exit(main())
