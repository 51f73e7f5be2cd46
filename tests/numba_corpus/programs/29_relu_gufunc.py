# A ReLU written once and compiled for the cpu and cuda targets as a gufunc '(n)->(n)' with a
# conditional expression against the float literal 0.0 over float32 rows.
# After: a public GitHub design note found by the code index (relu_gufunc / relu_gufunc_cuda,
# "universal source + target switching"; the index does not name the repository).
# License: unknown. Written anew for this corpus with the note's signature, layout and body.
import numpy as np
from numba import guvectorize

from _corpus_data import scaled

SOURCE = "public GitHub design note (code index file 63297702063, repository not named)"
LICENSE = "unknown"
DOMAIN = "machine learning (activation)"

_target = 'cuda'


@guvectorize(['void(float32[:], float32[:])'], '(n)->(n)', target=_target)
def relu_gufunc(x, out):
    for i in range(x.shape[0]):
        out[i] = x[i] if x[i] > 0.0 else 0.0


def setup():
    rng = np.random.default_rng(129)
    return {"activations": rng.standard_normal((scaled(4096, 4), 1024)).astype(np.float32)}


def run(d):
    return {"relu": relu_gufunc(d["activations"])}
