"""The seeds' memory-management and stream examples, run with only the import line changed.

Each example below is the Numba program a reader of the seed would run: `from numba import cuda`,
`import numpy as np`, then the seed's lines verbatim (seed 000, "Memory Management" and "Streams
and Async Operations"). The test replaces the one import line and nothing else (asserted), runs
the program, and checks the result the seed documents.

The seed's snippets use names they do not define (`numpy_array`, `stream`, `my_kernel`,
`run_many_kernels`, ...); each test defines them first, as any reader must. The seeds' kernels
(`my_kernel[blocks, threads, stream](d_data, d_out)`) are cuda.jit kernels, which cufunc does not
make (README, "Not supported"): they are defined here as a launch of a cufunc ufunc with the same
effect (out = 2 * data on the given stream), so that the memory and stream code around them runs
as written. Seed 001 (Numba's "Memory management" page) shows its API through autofunction entries
and its only code examples are shared-memory kernels; its memory API is tested in
test_memory_api.py.
"""

import numpy as np
import pytest

from cufunc import vectorize

NUMBA_IMPORT = "from numba import cuda"
CUFUNC_IMPORT = "from cufunc import cuda"

N = 1 << 22  # large enough that a copy or kernel still running would be seen


@vectorize(["float32(float32)", "float64(float64)"])
def _twice(x):
    return x * 2.0


class _Kernel:
    """kernel[blocks, threads, stream](data, out): out = 2 * data, on the stream."""

    def __getitem__(self, config):
        stream = config[2] if len(config) > 2 else 0

        def launch(d_in, d_out):
            _twice(d_in, out=d_out, stream=stream)
        return launch


def run_seed(program, names):
    """Run a Numba program with the import line changed to cufunc's; returns its namespace."""
    assert program.count(NUMBA_IMPORT) == 1
    converted = program.replace(NUMBA_IMPORT, CUFUNC_IMPORT)
    # the only change is the import line
    diff = [(a, b) for a, b in zip(program.splitlines(), converted.splitlines()) if a != b]
    assert diff == [(NUMBA_IMPORT, CUFUNC_IMPORT)]
    ns = dict(names)
    exec(compile(converted, "<seed example>", "exec"), ns)
    return ns


# seed 000, "Memory Management" / "Data Transfer"
DATA_TRANSFER = '''\
from numba import cuda
import numpy as np
# Host → Device
d_array = cuda.to_device(numpy_array)                    # Synchronous copy
d_array = cuda.to_device(numpy_array, stream=stream)     # Async copy

# Allocate on device (no copy)
d_array = cuda.device_array(shape=(1000,), dtype=np.float32)
d_array = cuda.device_array_like(numpy_array)

# Device → Host
host_array = d_array.copy_to_host()                      # New array
d_array.copy_to_host(existing_array)                     # Into pre-allocated
d_array.copy_to_host(stream=stream)                      # Async
'''

# seed 000, "Pinned Memory for Fast Transfers"
PINNED = '''\
from numba import cuda
import numpy as np
# Allocate pinned host memory (page-locked — faster PCI-e transfers)
with cuda.pinned(host_array):
    d_array = cuda.to_device(host_array, stream=stream)
    # Transfer is faster because the OS can't page this memory out

# Or allocate directly
pinned = cuda.pinned_array(shape=(1000,), dtype=np.float32)
'''

# seed 000, "Deallocation Control"
DEFER = '''\
from numba import cuda
import numpy as np
with cuda.defer_cleanup():
    # All GPU deallocation deferred here — avoids implicit synchronization
    # Use this in performance-critical sections
    run_many_kernels()
# Cleanup happens here
'''

# seed 000, "Streams"
STREAMS = '''\
from numba import cuda
import numpy as np
stream = cuda.stream()

# Async transfer → kernel → transfer back
d_data = cuda.to_device(host_data, stream=stream)
my_kernel[blocks, threads, stream](d_data, d_out)
result = d_out.copy_to_host(stream=stream)
stream.synchronize()  # Wait for everything on this stream
'''

# seed 000, "Streams": the auto-synchronising context manager
AUTO_SYNC = '''\
from numba import cuda
import numpy as np
stream = cuda.stream()
# Context manager that auto-synchronizes
with stream.auto_synchronize():
    d_data = cuda.to_device(host_data, stream=stream)
    my_kernel[blocks, threads, stream](d_data, d_out)
    result = d_out.copy_to_host(stream=stream)
# Synchronizes here automatically
'''

# seed 000, "Pipeline Pattern (overlap transfer and compute)"
PIPELINE = '''\
from numba import cuda
import numpy as np
stream1 = cuda.stream()
stream2 = cuda.stream()

# Chunk 1: transfer on stream1
d_chunk1 = cuda.to_device(data[:half], stream=stream1)
# Chunk 2: transfer on stream2 (overlaps with stream1 transfer)
d_chunk2 = cuda.to_device(data[half:], stream=stream2)

# Process chunk1 on stream1
kernel[blocks, threads, stream1](d_chunk1, d_out1)
# Process chunk2 on stream2 (overlaps with stream1 compute)
kernel[blocks, threads, stream2](d_chunk2, d_out2)

cuda.synchronize()  # Wait for all streams
'''


def test_examples_differ_from_numba_only_in_the_import():
    # no GPU needed: the conversion itself
    for program in (DATA_TRANSFER, PINNED, DEFER, STREAMS, AUTO_SYNC, PIPELINE):
        converted = program.replace(NUMBA_IMPORT, CUFUNC_IMPORT)
        assert "numba" not in converted
        assert len(converted.splitlines()) == len(program.splitlines())


@pytest.mark.gpu
def test_seed_data_transfer():
    from cufunc import cuda
    numpy_array = np.random.default_rng(0).random(N).astype(np.float32)
    existing_array = np.zeros_like(numpy_array)
    stream = cuda.stream()
    ns = run_seed(DATA_TRANSFER, dict(numpy_array=numpy_array, existing_array=existing_array,
                                      stream=stream))
    d_array = ns["d_array"]
    # device_array_like: same shape and dtype, on the device
    assert d_array.shape == numpy_array.shape and d_array.dtype == numpy_array.dtype
    assert ns["host_array"].shape == numpy_array.shape
    # copy_to_host(existing_array) fills the given array (values: whatever device_array_like
    # holds, the same as the new array got)
    np.testing.assert_array_equal(existing_array, ns["host_array"])
    stream.synchronize()
    # the two to_device copies gave the data; check one explicitly
    np.testing.assert_array_equal(cuda.to_device(numpy_array, stream=stream)
                                  .copy_to_host(stream=stream), numpy_array)


@pytest.mark.gpu
def test_seed_pinned_memory():
    from cufunc import _core, cuda
    host_array = np.random.default_rng(1).random(N).astype(np.float32)
    stream = cuda.stream()
    seen = {}
    ns = run_seed(PINNED, dict(host_array=host_array, stream=stream))
    stream.synchronize()
    np.testing.assert_array_equal(ns["d_array"].copy_to_host(), host_array)
    pinned = ns["pinned"]
    assert pinned.shape == (1000,) and pinned.dtype == np.float32
    assert _core.host_is_pinned(pinned)
    # the block unpinned the array on exit
    assert not _core.host_is_pinned(host_array)
    # and it was pinned inside the block
    with cuda.pinned(host_array):
        seen["inside"] = _core.host_is_pinned(host_array)
    assert seen["inside"]


@pytest.mark.gpu
def test_seed_defer_cleanup():
    from cufunc import _core, cuda
    held = {}
    x = np.ones(N, np.float32)

    def run_many_kernels():
        before = _core.mem_outstanding()
        for _ in range(5):
            d = cuda.to_device(x)
            _twice(d)        # a result dies at once: its memory is held
            del d
        held["during"] = _core.mem_outstanding() - before
        held["count"] = _core.defer_cleanup_count()

    start = _core.mem_outstanding()
    run_seed(DEFER, dict(run_many_kernels=run_many_kernels))
    assert held["during"] >= 10 * x.nbytes          # 5 inputs and 5 results still allocated
    assert held["count"][0] == 1 and held["count"][1] >= 10
    assert _core.mem_outstanding() == start          # "Cleanup happens here"
    assert _core.defer_cleanup_count() == (0, 0)


def _stream_names():
    from cufunc import cuda
    host_data = np.random.default_rng(2).random(N).astype(np.float32)
    return dict(host_data=host_data, d_out=cuda.device_array_like(host_data), my_kernel=_Kernel(),
                blocks=N // 256, threads=256)


@pytest.mark.gpu
@pytest.mark.parametrize("program", [STREAMS, AUTO_SYNC], ids=["synchronize", "auto_synchronize"])
def test_seed_streams(program):
    names = _stream_names()
    ns = run_seed(program, names)
    np.testing.assert_array_equal(ns["result"], names["host_data"] * 2)


@pytest.mark.gpu
def test_seed_pipeline():
    from cufunc import cuda
    data = np.random.default_rng(3).random(N).astype(np.float32)
    half = N // 2
    names = dict(data=data, half=half, kernel=_Kernel(), blocks=half // 256, threads=256,
                 d_out1=cuda.device_array(half, np.float32),
                 d_out2=cuda.device_array(N - half, np.float32))
    ns = run_seed(PIPELINE, names)
    # after cuda.synchronize() both halves are done: read them on the host with no stream
    np.testing.assert_array_equal(names["d_out1"].copy_to_host(), data[:half] * 2)
    np.testing.assert_array_equal(names["d_out2"].copy_to_host(), data[half:] * 2)
    assert ns["d_chunk1"].shape == (half,)
