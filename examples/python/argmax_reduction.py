"""A custom reduction: the index of the largest value (np.argmax), in one pass over the GPU.

A reduction combines one kind of value, so each element becomes one uint64 key that orders as
(value, earliest index): the float32's bits made orderable in the high half, the complement of
the index in the low half. The largest key holds the largest value and, among equal values, the
first index, as np.argmax gives. The key is made by a ufunc and reduced two ways: cuda.reduce
(Numba's) and the ufunc.reduce of a two-argument ufunc.

    python argmax_reduction.py
"""
import numpy as np

from cufunc import cuda, vectorize

LOW = 0xFFFFFFFF


@vectorize(["uint64(uint32, int64)"])
def argmax_key(bits, index):
    # IEEE floats order as their bits once negatives are flipped: negative -> ~bits, else set the
    # sign bit
    if bits >= 0x80000000:
        order = bits ^ LOW
    else:
        order = bits | 0x80000000
    return (np.uint64(order) << 32) | np.uint64(LOW - index)


@vectorize(["uint64(uint64, uint64)"], identity=0)
def larger(a, b):
    return a if a > b else b


@cuda.reduce
def larger_reduce(a, b):
    return max(a, b)


KERNELS = ["argmax_key", "larger"]
NEEDS = []


def argmax(d_values):
    """np.argmax of a 1-d float32 device array, on the GPU."""
    index = cuda.to_device(np.arange(d_values.shape[0], dtype=np.int64))
    keys = argmax_key(d_values.view(np.uint32), index)
    best = int(larger_reduce(keys))
    return LOW - (best & LOW)


def main(n=(1 << 22) + 3):
    rng = np.random.default_rng(2)
    values = rng.standard_normal(n).astype(np.float32)
    values[12345] = values[777777] = 9.5                # a tie: the first one wins
    d = cuda.to_device(values)
    got = argmax(d)
    assert got == np.argmax(values) == 12345, (got, np.argmax(values))

    # the same with ufunc.reduce, over the rows of a 2-d array
    rows = rng.standard_normal((64, 1000)).astype(np.float32)
    index = np.broadcast_to(np.arange(1000, dtype=np.int64), rows.shape)
    keys = argmax_key(cuda.to_device(rows).view(np.uint32), index)
    best = larger.reduce(keys, axis=1).copy_to_host()
    assert np.array_equal(LOW - (best & LOW), np.argmax(rows, axis=1))

    negative = -np.abs(values)                         # all negative: the flipped order
    assert argmax(cuda.to_device(negative)) == np.argmax(negative)
    print("argmax of %d float32 values: %d (value %.2f)" % (n, got, values[got]))
    print("OK")


if __name__ == "__main__":
    main()
