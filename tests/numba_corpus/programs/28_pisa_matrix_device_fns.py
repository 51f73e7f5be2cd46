# Device functions that take and fill arrays (matrix product, matrix-vector product, clearing and
# copying a matrix, conjugate transpose of a complex matrix), compiled with cuda.jit(f,
# device=True) through a helper decorator, called from gufuncs that hand them their core arrays.
# After: icecube/pisa, pisa/utils/numba_tools.py (myjit, matrix_dot_matrix, matrix_dot_vector,
# clear_matrix, copy_matrix, conjugate_transpose: device functions of its oscillation gufuncs).
# The gufuncs that call them are written for this corpus in PISA's style (signature strings
# without a return type, target from a module variable). License: Apache-2.0 (PISA).
import numpy as np
from numba import cuda, guvectorize

from _corpus_data import scaled

SOURCE = "icecube/pisa: pisa/utils/numba_tools.py"
LICENSE = "Apache-2.0"
DOMAIN = "physics (neutrino oscillation analysis)"
TOLERANCE = {"*": {"ulp": 4, "reason": "FMA contraction of the accumulations C[i,j] += A*B"}}

TARGET = 'cuda'


def myjit(f):
    return cuda.jit(f, device=True)


@myjit
def conjugate_transpose(A, B):
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            B[i, j] = A[j, i].conjugate()


@myjit
def matrix_dot_matrix(A, B, C):
    for j in range(B.shape[1]):
        for i in range(A.shape[0]):
            C[i, j] = 0.
            for n in range(C.shape[0]):
                C[i, j] += A[i, n] * B[n, j]


@myjit
def matrix_dot_vector(A, v, w):
    for i in range(A.shape[0]):
        w[i] = 0.
        for j in range(A.shape[1]):
            w[i] += A[i, j] * v[j]


@myjit
def clear_matrix(A):
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            A[i, j] = 0.


@myjit
def copy_matrix(A, B):
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            B[i, j] = A[i, j]


@guvectorize(['(f8[:,:], f8[:,:], f8[:,:])'], '(n,n),(n,n)->(n,n)', target=TARGET)
def matrix_product(A, B, C):
    matrix_dot_matrix(A, B, C)


@guvectorize(['(f8[:,:], f8[:], f8[:])'], '(n,n),(n)->(n)', target=TARGET)
def apply_matrix(A, v, w):
    matrix_dot_vector(A, v, w)


@guvectorize(['(c16[:,:], c16[:,:])'], '(n,n)->(n,n)', target=TARGET)
def hermitian_conjugate(A, B):
    clear_matrix(B)
    conjugate_transpose(A, B)


@guvectorize(['(f8[:,:], f8[:,:])'], '(n,n)->(n,n)', target=TARGET)
def duplicate(A, B):
    copy_matrix(A, B)


def setup():
    rng = np.random.default_rng(128)
    m = scaled(200_000)
    return {"A": rng.standard_normal((m, 3, 3)), "B": rng.standard_normal((m, 3, 3)),
            "v": rng.standard_normal((m, 3)),
            "U": rng.standard_normal((m, 3, 3)) + 1j * rng.standard_normal((m, 3, 3))}


def run(d):
    return {"product": matrix_product(d["A"], d["B"]),
            "applied": apply_matrix(d["A"], d["v"]),
            "conjugated": hermitian_conjugate(d["U"]),
            "copied": duplicate(d["A"])}
