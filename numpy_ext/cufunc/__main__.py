"""``python -m cufunc``: print the environment, then show that the toolchain works.

With a GPU: compile a saxpy kernel with NVRTC, run it on a few million floats, copy the result back
and check it against NumPy; then a @vectorize ufunc on NumPy and device arrays, a cuda.reduce and
a ufunc.reduce over an axis, each checked against NumPy. Without one: say so, and still compile the
kernels for sm_90 to show NVRTC and the kernel language work. Exit status 0 on success; 1 when the
C extension or NVRTC is missing or a result is wrong.
"""

import sys
import time

import numpy as np

from . import _env

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float *__restrict__ x,
                                 const float *__restrict__ y, float *__restrict__ out,
                                 long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = a * x[i] + y[i];
}
"""

N = 1 << 22  # 4 Mi elements, 16 MiB per array


def rel_diff(x, y):
    """The ufunc body of the demo: plain Python, translated to CUDA C."""
    return 2.0 * (x - y) / (abs(x) + abs(y) + 1.0)


def vectorize_demo(out):
    """A vectorize ufunc, cuda.reduce and ufunc.reduce on the GPU, checked against NumPy."""
    from . import cuda, vectorize

    f = vectorize(["float32(float32, float32)", "float64(float64, float64)"])(rel_diff)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((1000, 777)).astype(np.float32)
    b = rng.standard_normal((1000, 777)).astype(np.float32)
    want = (np.float32(2.0) * (a - b)) / (np.abs(a) + np.abs(b) + np.float32(1.0))
    got_host = f(a, b)                                    # NumPy arrays in and out
    da, db = cuda.to_device(a), cuda.to_device(b)
    got_dev = f(da, db[:, ::-1]).copy_to_host()          # device arrays, a reversed view
    want_rev = (np.float32(2.0) * (a - b[:, ::-1])) / (np.abs(a) + np.abs(b[:, ::-1]) + np.float32(1.0))
    ok = np.array_equal(got_host, want) and np.array_equal(got_dev, want_rev)
    print("vectorize rel_diff on (1000, 777) float32, host and device arrays: %s"
          % ("matches NumPy exactly" if ok else "DIFFERS from NumPy"), file=out)

    total = cuda.reduce(lambda x, y: x + y)
    ints = rng.integers(-1000, 1000, 1 << 20)
    s_gpu = total(cuda.to_device(ints))
    ok_reduce = s_gpu == ints.sum()
    print("cuda.reduce(lambda x, y: x + y) over 2^20 int64: %d (NumPy %d)" % (s_gpu, ints.sum()),
          file=out)
    add = vectorize(["float64(float64, float64)"], identity=0)(lambda x, y: x + y)
    m = rng.standard_normal((300, 400))
    col = add.reduce(cuda.to_device(m), axis=0).copy_to_host()
    ok_axis = np.allclose(col, m.sum(axis=0), rtol=1e-12, atol=1e-12)
    print("ufunc.reduce(axis=0) of a (300, 400) float64 array: %s"
          % ("matches NumPy" if ok_axis else "DIFFERS from NumPy"), file=out)
    return 0 if ok and ok_reduce and ok_axis else 1


def run_gpu(core, out):
    from . import cuda

    device = cuda.get_current_device()
    rng = np.random.default_rng(0)
    x = rng.random(N, dtype=np.float32)
    y = rng.random(N, dtype=np.float32)
    a = np.float32(2.5)

    t0 = time.perf_counter()
    kernel = cuda.RawKernel(SAXPY, "saxpy")
    kernel.compile()
    t_compile = time.perf_counter() - t0

    dx, dy = cuda.to_device(x), cuda.to_device(y)
    dout = cuda.device_array_like(dx)
    block = 256
    grid = min((N + block - 1) // block, device.MULTIPROCESSOR_COUNT * 8)
    kernel(grid, block, (a, dx, dy, dout, np.int64(N)))  # warm-up
    cuda.synchronize()
    t0 = time.perf_counter()
    kernel(grid, block, (a, dx, dy, dout, np.int64(N)))
    cuda.synchronize()
    t_kernel = time.perf_counter() - t0
    result = dout.copy_to_host()

    expected = a * x + y
    err = float(np.max(np.abs(result.astype(np.float64) - expected.astype(np.float64))))
    # The GPU may fuse a*x+y into one FMA (one rounding instead of two): within 1 ulp of 3.5.
    ok = err <= 4.8e-7
    gbps = 3 * 4 * N / t_kernel / 1e9
    print("saxpy on %s: %d float32 values, compile %.1f ms, kernel %.3f ms (%.0f GB/s), "
          "max abs error %.2e" % (device.name, N, t_compile * 1e3, t_kernel * 1e3, gbps, err),
          file=out)
    status = vectorize_demo(out) if ok else 1
    print("OK" if ok and status == 0 else "FAILED: a result differs from NumPy's", file=out)
    return 0 if ok and status == 0 else 1


def run_without_gpu(core, reason, out):
    print("no CUDA GPU found: %s" % reason, file=out)
    try:
        t0 = time.perf_counter()
        image, is_ptx = core.compile_source(SAXPY, arch=(9, 0))
        dt = time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 - reported as the demo's outcome
        print("NVRTC cannot compile either: %s: %s" % (type(exc).__name__, exc), file=out)
        return 1
    print("NVRTC compiled the saxpy kernel for sm_90 without a GPU: %s of %d bytes in %.1f ms"
          % ("PTX" if is_ptx else "CUBIN", len(image), dt * 1e3), file=out)
    try:
        from . import vectorize
        f = vectorize(["float32(float32, float32)"])(rel_diff)
        x = np.ones(1024, np.float32)
        src = f.kernel_source(x, x)                 # the kernel a call on these would launch
        t0 = time.perf_counter()
        image, is_ptx = core.compile_source(src, ("--fmad=false",), (9, 0))
        dt = time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 - reported as the demo's outcome
        print("the kernel language or its kernel failed: %s: %s" % (type(exc).__name__, exc),
              file=out)
        return 1
    print("vectorize translated rel_diff to CUDA C and NVRTC compiled its kernel: %d bytes in "
          "%.1f ms" % (len(image), dt * 1e3), file=out)
    print("OK (toolchain only; no kernel was run)", file=out)
    return 0


def main(out=sys.stdout, argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--knobs" in argv:
        if _env.core is None:
            print("cufunc's C extension is not loaded: %s" % _env.core_error, file=out)
            return 1
        print("Every CUFUNC_* environment variable cufunc reads, with the value in effect:",
              file=out)
        for line in _env.format_knobs(_env.core.knobs()):
            print(line, file=out)
        return 0
    env = _env.environment()
    for line in _env.format_environment(env):
        print(line, file=out)
    core = _env.core
    if core is None:
        print(_env.core_error, file=out)
        return 1
    if env["nvrtc"] is None:
        print("NVRTC is missing, so cufunc cannot compile kernels: %s" % env["nvrtc_error"],
              file=out)
        return 1
    if env["driver"] is None or not env["devices"]:
        return run_without_gpu(core, env["driver_error"] or "the driver reports no device", out)
    return run_gpu(core, out)


if __name__ == "__main__":
    sys.exit(main())
