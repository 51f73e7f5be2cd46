"""``python -m cufunc``: print the environment, then show that the toolchain works.

With a GPU: compile a saxpy kernel with NVRTC, run it on a few million floats, copy the result back
and check it against NumPy. Without one: say so, and still compile the kernel for sm_90 to show
NVRTC works. Exit status 0 on success; 1 when the C extension or NVRTC is missing or the result is
wrong.
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
    print("OK" if ok else "FAILED: the result differs from NumPy's", file=out)
    return 0 if ok else 1


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
    print("OK (toolchain only; no kernel was run)", file=out)
    return 0


def main(out=sys.stdout):
    env = _env.environment()
    for line in _env.format_environment(env):
        print(line, file=out)
    core = _env.core
    if core is None:
        print("cufunc's C extension is not built; build it with "
              "`python setup.py build_ext --inplace` or install with pip", file=out)
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
