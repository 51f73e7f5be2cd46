"""The CPU side of reading foreign operands and wrapping results, measurable without a
GPU: each route timed alone on CPU tensors and on CuPy arrays over fake addresses (no GPU work;
CuPy's interface at version 2 so that it makes no stream query, which needs a device).
Microseconds, best of 5 x 20000 calls. Needs torch and/or cupy installed (a CUDA wheel runs on
a machine without a GPU for this). Usage: python3 bench/prof_interop_cpu.py
"""
import time

import numpy as np

from cufunc import _core


def t(fn, n=20000):
    for _ in range(500):
        fn()
    best = 1e9
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e6


def row(name, us):
    print("| %s | %.3f |" % (name, us))


def old_torch_reader(torch):
    """The Python reader of 2026-11-25 (_interop._torch_interface), the CUDA test left out and a
    constant stream: what a tensor cost before this change."""
    names = {"float32": "<f4"}
    typestr = {getattr(torch, k): (v, int(v[2:])) for k, v in names.items()}
    strided = torch.strided

    def interface(t):
        ts = typestr.get(t.dtype)
        if ts is None or t.requires_grad or t.layout is not strided or t.is_conj() or t.is_neg():
            return None
        n = ts[1]
        return {"shape": tuple(t.shape), "typestr": ts[0],
                "data": (t.data_ptr() if t.numel() else 0, False),
                "strides": tuple([x * n for x in t.stride()]), "version": 3,
                "stream": 0 or 1}
    return interface


def main():
    print("| route (CPU side, one operand or one result) | us |")
    print("|---|---|")
    row("(empty lambda)", t(lambda: None))
    d = {"shape": (1,), "typestr": "<f4", "data": (1 << 20, False), "version": 3, "strides": None}
    Fake = type("Fake", (), {"__cuda_array_interface__": d})
    f = Fake()
    row("static CAI object: obj.__cuda_array_interface__ (the dict exists)",
        t(lambda: f.__cuda_array_interface__))
    row("a call to _core._foreign_interface(obj, 2) on it (no reader: False at once)",
        t(lambda: _core._foreign_interface(f, 2)))
    try:
        import torch
    except ImportError:
        torch = None
        print("PyTorch: not installed")
    if torch is not None:
        x = torch.ones(1)
        old = old_torch_reader(torch)
        row("torch: the former Python reader (dict built)", t(lambda: old(x)))
        row("torch: C reader alone, _core._foreign_interface(t, 2) (no dict)",
            t(lambda: _core._foreign_interface(x, 2)))
        row("torch: t.__dlpack__() (the capsule route's producer side, no stream)",
            t(lambda: x.__dlpack__()))
        row("torch: attribute reads alone (dtype, is_cuda, requires_grad, layout, is_conj, "
            "is_neg, shape, stride(), data_ptr(), get_device())",
            t(lambda: (x.dtype, x.is_cuda, x.requires_grad, x.layout, x.is_conj(), x.is_neg(),
                       x.shape, x.stride(), x.data_ptr(), x.get_device())))
        cap = np.ones(1, np.float32)
        row("torch._C._from_dlpack(numpy capsule) (the result route, CPU)",
            t(lambda: torch._C._from_dlpack(cap.__dlpack__())))
        row("torch.empty((1,), dtype=float32) (allocate-then-launch route, CPU allocator)",
            t(lambda: torch.empty((1,), dtype=torch.float32)))
    try:
        import cupy
    except ImportError:
        cupy = None
        print("CuPy: not installed")
    if cupy is not None:
        cupy._util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 2  # no stream query (needs a device)
        mem = cupy.cuda.UnownedMemory(1 << 20, 4, None, 0)
        a = cupy.ndarray((1,), np.float32, cupy.cuda.MemoryPointer(mem, 0))
        row("cupy: a.__cuda_array_interface__ (version 2: no stream query)",
            t(lambda: a.__cuda_array_interface__))
        row("cupy: C reader alone, _core._foreign_interface(a, 2) (no dict)",
            t(lambda: _core._foreign_interface(a, 2)))
        row("cupy: attribute reads alone (dtype, shape, _c_contiguous, data.ptr)",
            t(lambda: (a.dtype, a.shape, a._c_contiguous, a.data.ptr)))

        def via_unowned():
            m = cupy.cuda.UnownedMemory(1 << 20, 4, f, 0)
            return cupy.ndarray((1,), a.dtype, cupy.cuda.MemoryPointer(m, 0))
        row("cupy: ndarray over UnownedMemory (the result route, no stream wait)", t(via_unowned))
        row("cupy: ndarray over UnownedMemory, strides given (the 2026-11-25 call)",
            t(lambda: cupy.ndarray((1,), a.dtype, cupy.cuda.MemoryPointer(
                cupy.cuda.UnownedMemory(1 << 20, 4, f, 0), 0), (4,))))
        cupy._util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 3


if __name__ == "__main__":
    main()
