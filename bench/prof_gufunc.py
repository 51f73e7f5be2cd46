"""The gufunc kernels of bench_guvectorize.py's 4x4 matmul and cross product, launched a few
times for a profiler, and their generated sources written to /tmp/gu_src.txt. Usage:
ncu --kernel-name regex:cf_gu --launch-count 2 --section SpeedOfLight --section
MemoryWorkloadAnalysis --section Occupancy python3 bench/prof_gufunc.py
"""
import numpy as np, sys
sys.path.insert(0, "bench")
from bench_guvectorize import matmul, cross
from cufunc import cuda
B = 1 << 20
rng = np.random.default_rng(0)
da, db = cuda.to_device(rng.random((B, 4, 4), dtype=np.float32)), cuda.to_device(rng.random((B, 4, 4), dtype=np.float32))
dc = cuda.device_array((B, 4, 4), np.float32)
R = 1 << 24
dx, dy = cuda.to_device(rng.random((R, 3), dtype=np.float32)), cuda.to_device(rng.random((R, 3), dtype=np.float32))
dz = cuda.device_array((R, 3), np.float32)
for _ in range(3):
    matmul(da, db, out=dc); cross(dx, dy, out=dz)
cuda.synchronize()
open("/tmp/gu_src.txt","w").write(matmul.inspect_cuda(da, db, out=dc) + "\n\n=====\n" + cross.inspect_cuda(dx, dy, out=dz))
