"""cufunc's functions on CuPy arrays and PyTorch tensors: no copies, results in the caller's type,
ordered on the caller's stream.

    python cupy_torch_interop.py
"""
import math

from cufunc import guvectorize, vectorize


@vectorize(["float32(float32, float32)", "float64(float64, float64)"])
def hypot(x, y):
    return math.sqrt(x * x + y * y)


@guvectorize(["void(float32[:], float32[:])"], "(n)->()")
def norm(x, res):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i] * x[i]
    res[0] = math.sqrt(acc)


KERNELS = ["hypot", "norm"]
NEEDS = ["cupy", "torch"]


def with_cupy():
    import cupy as cp
    x = cp.random.rand(1 << 20, dtype=cp.float32)
    y = cp.random.rand(1 << 20, dtype=cp.float32)
    r = hypot(x, y)                                    # a CuPy array, from CuPy's memory pool
    assert isinstance(r, cp.ndarray) and r.dtype == cp.float32
    assert cp.allclose(r, cp.hypot(x, y))
    out = cp.empty_like(x)
    assert hypot(x, y, out=out) is out                 # out= is used as given
    m = cp.random.rand(1000, 64, dtype=cp.float32)
    assert cp.allclose(norm(m), cp.linalg.norm(m, axis=1), rtol=1e-5)
    assert math.isclose(float(hypot.reduce(x[:100])), float(cp.sqrt((x[:100] ** 2).sum())),
                        rel_tol=1e-4)
    print("CuPy:", type(r).__name__, r.shape)


def with_torch():
    import torch
    t = torch.rand(1 << 20, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = torch.sin(hypot(t, t))                     # ordered on s: no synchronisation
    s.synchronize()
    assert isinstance(y, torch.Tensor) and y.device == t.device
    assert torch.allclose(y, torch.sin(torch.hypot(t, t)), atol=1e-6)
    m = torch.rand(1000, 64, device="cuda")
    assert torch.allclose(norm(m), torch.linalg.vector_norm(m, dim=1), rtol=1e-5)
    print("PyTorch:", type(y).__name__, tuple(y.shape), y.device)


def main():
    with_cupy()
    with_torch()
    print("OK")


if __name__ == "__main__":
    main()
