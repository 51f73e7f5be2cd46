"""The one-element call with results in the caller's array type.

hypot on one-element float32 arrays, no out= (each call makes its result), timed as
bench_call_overhead.py does (queued: batches of 5000 calls then a sync; CPU alone: 256 calls before
any wait):
  * cufunc on cufunc DeviceArrays (a DeviceArray back): the reference;
  * cufunc on CuPy arrays (a CuPy array back) beside cp.hypot;
  * cufunc on torch tensors (a torch tensor back) beside torch.hypot;
  * the same two with cufunc.using_output_type("cufunc") (DeviceArrays back): the part of the
    cost that is the wrapping into the caller's type, and the part that is reading the inputs;
  * out= given in the caller's type (torch, CuPy), beside the library's own call with out=;
  * fresh results allocated by CuPy itself (the default) or, switched off, cufunc DeviceArrays
    wrapped into its type (what the other engines do); for torch the reverse (PyTorch's
    allocator is off by default: it was no faster);
  * with PyTorch's DLPack C exchange API (PyTorch >= 2.10, used by default) turned off: the
    attribute reads older PyTorch versions get.
The target: a call on CuPy arrays and on torch tensors within 1.3x of the call on
DeviceArrays. The last column is each line's time over the DeviceArray call's.

Usage: python3 bench/bench_interop.py
"""
import math

import numpy as np

from benchlib import timeit, peers, cpu_alone

import cufunc
from cufunc import _core, cuda, vectorize


@vectorize(["float32(float32, float32)"])
def hyp(x, y):
    return math.sqrt(x * x + y * y)


def as_cufunc(fn):
    def call():
        with cufunc.using_output_type("cufunc"):
            return fn()
    return call


def main():
    P = peers()
    a1, b1 = (cuda.to_device(np.ones(1, np.float32)) for _ in range(2))
    o1 = cuda.device_array(1, np.float32)
    cases = [("cufunc(DeviceArray) -> DeviceArray", lambda: hyp(a1, b1), cuda.synchronize, "-"),
             ("cufunc(DeviceArray, out=) (fast path)", lambda: hyp(a1, b1, out=o1),
              cuda.synchronize, "-")]
    if "cupy" in P:
        cp = P["cupy"]
        ca1, cb1 = (cp.ones(1, cp.float32) for _ in range(2))
        r = hyp(ca1, cb1)
        assert isinstance(r, cp.ndarray), type(r)
        sync = cp.cuda.runtime.deviceSynchronize
        co1 = cp.empty(1, cp.float32)
        cases += [("cufunc(cupy) -> cupy", lambda: hyp(ca1, cb1), sync, "cupy"),
                  ("cufunc(cupy) -> cupy, result wrapped (CuPy allocation off)",
                   lambda: hyp(ca1, cb1), sync, "cupy", {"flag": False}),
                  ("cufunc(cupy, out=cupy)", lambda: hyp(ca1, cb1, out=co1), sync, "cupy"),
                  ("cp.hypot(cupy, out=cupy)", lambda: cp.hypot(ca1, cb1, out=co1), sync, "cupy"),
                  ("cufunc(cupy) -> DeviceArray (output type 'cufunc')",
                   as_cufunc(lambda: hyp(ca1, cb1)), sync, "cupy"),
                  ("cp.hypot(cupy)", lambda: cp.hypot(ca1, cb1), sync, "cupy")]
    else:
        print("CuPy: not available here")
    if "torch" in P:
        torch = P["torch"]
        ta1, tb1 = (torch.ones(1, device="cuda") for _ in range(2))
        r = hyp(ta1, tb1)
        assert isinstance(r, torch.Tensor) and r.device == ta1.device, type(r)
        sync = torch.cuda.synchronize
        to1 = torch.empty(1, device="cuda")
        cases += [("cufunc(torch) -> torch", lambda: hyp(ta1, tb1), sync, "torch"),
                  ("cufunc(torch) -> DeviceArray (output type 'cufunc')",
                   as_cufunc(lambda: hyp(ta1, tb1)), sync, "torch"),
                  ("cufunc(torch, out=torch)", lambda: hyp(ta1, tb1, out=to1), sync, "torch"),
                  ("torch.hypot(torch)", lambda: torch.hypot(ta1, tb1), sync, "torch"),
                  ("torch.hypot(torch, out=torch)", lambda: torch.hypot(ta1, tb1, out=to1), sync,
                   "torch")]
        if _core._interop_c_api():  # the same calls with PyTorch's attributes read one by one
            cases += [("cufunc(torch) -> torch, result allocated by PyTorch (switched on)",
                       lambda: hyp(ta1, tb1), sync, "torch", {"torch": True}),
                      ("cufunc(torch) -> torch, attribute reads (DLPack C API off)",
                       lambda: hyp(ta1, tb1), sync, "torch", {"c_api": False}),
                      ("cufunc(torch, out=torch), attribute reads (DLPack C API off)",
                       lambda: hyp(ta1, tb1, out=to1), sync, "torch",
                       {"c_api": False})]
        else:
            print("this PyTorch has no DLPack C exchange API: the attribute reads only")
    else:
        print("PyTorch: not available here")
    loop = 1e6 * timeit(lambda: None, lambda: None, 7, 5000)
    print("one-element hypot, no out= (result in the caller's type), microseconds per call")
    print("| call | queued (5000 calls, then sync) | CPU alone (256 calls) | queued / DeviceArray |")
    print("|---|---|---|---|")
    print("| (empty lambda in the same loop) | %.3f | - | - |" % loop)
    ref = None
    for name, fn, sync, _, *modes in cases:
        # a row's switches (_core._lib_results: flag, torch; _core._interop_c_api: c_api), set
        # around its timing
        m = dict(modes[0]) if modes else {}
        lib_had = _core._lib_results()
        _core._lib_results(m.get("flag", lib_had[0]), torch=m.get("torch", lib_had[1]))
        api_had = _core._interop_c_api(m.get("c_api", _core._interop_c_api()))
        q = 1e6 * timeit(fn, sync, 7, 5000)
        c = cpu_alone(fn, sync)
        _core._lib_results(*lib_had)
        _core._interop_c_api(api_had)
        ref = q if ref is None else ref
        print("| %s | %.2f | %.2f | %.2fx |" % (name, q, c, q / ref))


if __name__ == "__main__":
    main()
