# Two-flavour atmospheric neutrino oscillation weights: a device function (made by PISA's myjit,
# cuda.jit(f, device=True)) using NumPy's scalar math (np.arcsin, np.sin, np.arccos, np.cos,
# np.sqrt) on the Earth's geometry, called from a gufunc '(d),(),(),(),(),()->()' with an f-string
# signature, float64 and int64 scalars, an if/elif/else on the flavour with an `assert` in the
# last branch, and an output that is scaled in place (out[0] *= ...), passed as out= on the device.
# After: icecube/pisa, pisa/stages/osc/two_nu_osc.py (calc_probs, apply_probs_vectorized, and
# the stage's calls with FTYPE/ITYPE scalars) and pisa/utils/numba_tools.py (myjit).
# License: Apache-2.0 (PISA). Written anew for this corpus with the file's signature, bodies and
# calls; the events are synthetic.
import numpy as np
from numba import cuda, guvectorize

from _corpus_data import scaled

SOURCE = "icecube/pisa: pisa/stages/osc/two_nu_osc.py"
LICENSE = "Apache-2.0"
DOMAIN = "physics (neutrino oscillations)"
TOLERANCE = {"*": {"ulp": 4, "reason": "arcsin/arccos/sin/cos of two math libraries; FMA "
                                       "contraction in the path length"}}

FTYPE = np.float64
ITYPE = np.int64
TARGET = 'cuda'


def myjit(f):
    return cuda.jit(f, device=True)


@myjit
def calc_probs(t23, dm31, true_energy, true_coszen):
    L1 = 19.
    R = 6378.2 + L1
    phi = np.arcsin((1-L1/R)*np.sin(np.arccos(true_coszen)))
    psi = np.arccos(true_coszen) - phi
    propdist = np.sqrt((R-L1)**2 + R**2 - (2*(R-L1)*R*np.cos(psi)))
    return t23*np.sin(1.267*dm31*propdist/true_energy)**2


FX = 'f8'
IX = 'i8'
signature = f'({FX}[:], {FX}, {FX}, {FX}, {FX}, {IX}, {FX}[:])'


@guvectorize([signature], '(d),(),(),(),(),()->()', target=TARGET)
def apply_probs_vectorized(flux, t23, dm31, true_energy, true_coszen, nuflav, out):
    if nuflav == 1:
        out[0] *= flux[1] * (1.0-calc_probs(t23, dm31, true_energy, true_coszen))
    elif nuflav == 3:
        out[0] *= flux[1] * calc_probs(t23, dm31, true_energy, true_coszen)
    else:
        assert nuflav == 0
        out[0] *= flux[0]


def setup():
    rng = np.random.default_rng(130)
    n = scaled(2_000_000)
    return {
        "nu_flux": rng.uniform(0.5, 2.0, (n, 2)),
        "true_energy": 10 ** rng.uniform(0.0, 2.0, n),
        "true_coszen": rng.uniform(-1.0, 1.0, n),
        "weights": rng.uniform(0.5, 1.5, n),
    }


def run(d):
    theta = np.sin(2 * np.deg2rad(45.0)) ** 2
    deltam31 = 2.5e-3
    flux = cuda.to_device(d["nu_flux"])
    energy = cuda.to_device(d["true_energy"])
    coszen = cuda.to_device(d["true_coszen"])
    results = {}
    for name, flav in (("numu", 1), ("nutau", 3), ("nue", 0)):
        weights = cuda.to_device(d["weights"])
        apply_probs_vectorized(flux, FTYPE(theta), FTYPE(deltam31), energy, coszen, ITYPE(flav),
                               out=weights)
        results[name] = weights.copy_to_host()
    return results
