"""What several GPU test files share: the reader of a result's values on the host, and the small
test kernels they launch (a slow identity to keep a stream busy, an add ufunc with an identity, a
row-sum gufunc, a sum reducer)."""
import numpy as np

from cufunc import cuda, vectorize
from cufunc.guvectorize import guvectorize


def host(r):
    """The values of a result, as a NumPy array: a DeviceArray, CuPy array, torch tensor or
    anything NumPy reads (calls on torch tensors and CuPy arrays return their own type)."""
    root = type(r).__module__.partition(".")[0]
    if root == "torch":
        return r.cpu().numpy()  # on torch's current stream, which the result's export ordered
    if root == "cupy":
        return r.get()
    return r.copy_to_host() if hasattr(r, "copy_to_host") else np.asarray(r)


def slow_identity(x, n):
    """x, after n dependent additions (exact for |x| + n < 2**53; --fmad=false keeps the loop)."""
    y = x
    for i in range(n):
        y = y + 1.0
    return y - n


slow = vectorize(["float64(float64, int64)"])(slow_identity)


def plus(a, b):
    return a + b


add = vectorize(["float64(float64, float64)", "float32(float32, float32)"], identity=0)(plus)


@guvectorize(["void(float64[:], float64[:])"], "(n)->()")
def rowsum(x, out):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    out[0] = s


@cuda.reduce
def sum_reduce(a, b):
    return a + b
