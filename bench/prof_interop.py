"""Where the time of a one-element call on foreign arrays and through the twins goes:
each piece timed alone (the libraries' own interface reads and wrappers, cufunc's readers), beside
the whole calls. Microseconds, best of 5 x 3000 calls (queued; the GPU work is one element).
Needs torch and cupy. Usage: python3 bench/prof_interop.py
"""
import math
import time
import numpy as np
import cufunc
from cufunc import cuda, vectorize

def t(fn, n=3000):
    for _ in range(200): fn()
    best = 1e9
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n): fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e6

@vectorize(["float32(float32, float32)"])
def hyp(x, y):
    return math.sqrt(x * x + y * y)

d1, d2 = cuda.to_device(np.ones(1, np.float32)), cuda.to_device(np.ones(1, np.float32))
print("hyp(DeviceArray) us %.2f" % t(lambda: hyp(d1, d2)))
import torch
ta, tb = torch.ones(1, device="cuda"), torch.ones(1, device="cuda")
hyp(ta, tb)
print("hyp(torch) us %.2f" % t(lambda: hyp(ta, tb)))
with cufunc.using_output_type("cufunc"):
    print("hyp(torch)->DA us %.2f" % t(lambda: hyp(ta, tb)))
print("torch.hypot us %.2f" % t(lambda: torch.hypot(ta, tb)))
print("t.__cuda_array_interface__ us %.2f" % t(lambda: ta.__cuda_array_interface__))
print("t.__dlpack__(stream=1) us %.2f" % t(lambda: ta.__dlpack__(stream=1)))
print("t metadata (data_ptr, shape, stride, dtype, get_device) us %.2f" % t(lambda: (ta.data_ptr(), ta.shape, ta.stride(), ta.dtype, ta.get_device())))
raw = torch._C._cuda_getCurrentRawStream
print("raw stream us %.2f" % t(lambda: raw(0)))
r = hyp(d1, d2)
take = torch._C._from_dlpack
print("torch wrap of DA us %.2f" % t(lambda: take(r.__dlpack__(stream=raw(0) or 1))))
print("cuda.as_cuda_array(t) us %.2f" % t(lambda: cuda.as_cuda_array(ta)))
import cupy as cp
ca, cb = cp.ones(1, cp.float32), cp.ones(1, cp.float32)
hyp(ca, cb)
print("hyp(cupy) us %.2f" % t(lambda: hyp(ca, cb)))
with cufunc.using_output_type("cufunc"):
    print("hyp(cupy)->DA us %.2f" % t(lambda: hyp(ca, cb)))
print("cp.hypot us %.2f" % t(lambda: cp.hypot(ca, cb)))
print("c.__cuda_array_interface__ us %.2f" % t(lambda: ca.__cuda_array_interface__))
print("cp.from_dlpack(DA) us %.2f" % t(lambda: cp.from_dlpack(r)))
# twins
o = cuda.device_array(1, np.float32)
print("np.sin(d) us %.2f   np.sin(d,out=o) %.2f   d+d %.2f   np.add(d,d,out=o) %.2f" % (
    t(lambda: np.sin(d1)), t(lambda: np.sin(d1, out=o)), t(lambda: d1 + d2), t(lambda: np.add(d1, d2, out=o))))
print("hyp(d,d,out=o) %.2f" % t(lambda: hyp(d1, d2, out=o)))
cuda.synchronize()

class Fake:
    def __init__(self, d):
        self.__cuda_array_interface__ = dict(d.__cuda_array_interface__)
        self.__cuda_array_interface__["stream"] = None
f1 = Fake(d1)
print("as_cuda_array(DeviceArray) us %.2f" % t(lambda: cuda.as_cuda_array(d1)))
print("as_cuda_array(static CAI obj) us %.2f" % t(lambda: cuda.as_cuda_array(f1)))
print("as_cuda_array(cupy) us %.2f" % t(lambda: cuda.as_cuda_array(ca)))
print("hyp(static CAI objs)->DA us %.2f" % t(lambda: hyp(f1, f1)))
print("cp.asarray(DA) us %.2f" % t(lambda: cp.asarray(r)))
def via_unowned(d):
    mem = cp.cuda.UnownedMemory(d.ptr, d.nbytes, d, 0)
    return cp.ndarray(d.shape, d.dtype, cp.cuda.MemoryPointer(mem, 0), d.strides)
print("cp.ndarray(UnownedMemory) us %.2f" % t(lambda: via_unowned(r)))
print("cp.cuda.get_current_stream().ptr us %.2f" % t(lambda: cp.cuda.get_current_stream().ptr))
print("r.__dlpack__() us %.2f" % t(lambda: r.__dlpack__(stream=1)))
from cufunc import _interop, _core
rd = _interop.interface_for(torch.Tensor)
print("torch reader(t) as a dict us %.2f" % t(lambda: rd(ta)))
print("torch C reader alone (_core._foreign_interface(t, 2), stream query included) us %.2f"
      % t(lambda: _core._foreign_interface(ta, 2)))
print("cupy C reader alone (_core._foreign_interface(c, 2), stream query included) us %.2f"
      % t(lambda: _core._foreign_interface(ca, 2)))
print("_core._as_torch(DA) us %.2f   _core._as_cupy(DA) us %.2f" % (
    t(lambda: _core._as_torch(r)), t(lambda: _core._as_cupy(r))))
print("cupy.ndarray.__cuda_array_interface__ (version 3) us %.2f" % t(lambda: ca.__cuda_array_interface__))
print("allocate in the caller's library instead: cupy.empty((1,)) us %.2f   torch.empty((1,), "
      "device='cuda') us %.2f" % (t(lambda: cp.empty((1,), cp.float32)),
                                   t(lambda: torch.empty((1,), device="cuda"))))
print("as_cuda_array(torch) us %.2f (reader + device, no pointer query)" % t(lambda: cuda.as_cuda_array(ta)))
print("hyp(torch) again us %.2f" % t(lambda: hyp(ta, tb)))
tws = cufunc._twins.twin(np.sin); twa = cufunc._twins.twin(np.add)
print("twin sin(d) direct us %.2f  out= %.2f ; twin add(d,d) direct %.2f out= %.2f" % (
    t(lambda: tws(d1)), t(lambda: tws(d1, out=o)), t(lambda: twa(d1, d2)), t(lambda: twa(d1, d2, out=o))))
@vectorize(["float32(float32)"])
def sin1(x):
    return math.sin(x)
print("vectorize sin1(d) us %.2f out= %.2f" % (t(lambda: sin1(d1)), t(lambda: sin1(d1, out=o))))
print("ntypes sin twin", tws.ntypes, "add twin", twa.ntypes)
