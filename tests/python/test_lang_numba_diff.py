"""Differential test of ``typing="numba"`` against Numba's CPU target.

Numba's CPU target shares its type inference with numba-cuda: the same body gets the same types
on both. numba_bodies.py generates the bodies (literals mixed with small integers and float32,
integer widening, divisions, powers, builtins, math, returns to unify); each is compiled by
Numba (njit with the signature, the NumPy error model of Numba's vectorize) in worker processes,
and translated by cufunc with typing="numba", built on the host with g++ (lang_harness) and run
on the same inputs. The return types must be the same, and every result identical bit for bit
(a result Numba raises for on the CPU, 0 ** -1, is not compared). A body Numba refuses is not
compared; at least MIN_COMPARED bodies are.
"""

import importlib.util
import sys

import numpy as np
import pytest

import lang_harness as H
import numba_bodies as NB

numba = NB.import_numba()
if numba is None:
    pytest.skip("numba cannot be imported (pip install '.[test]' installs it)",
                allow_module_level=True)

# Two generated bodies get answers from Numba 0.68 that depend on the environment: on Python 3.11
# with NumPy 2.4 Numba agrees with cufunc.numba, on Python 3.13 with NumPy 2.1.3 (and on the GPU
# machine's Python 3.12 with NumPy 2.5) it types math.atan2 of (int8, float32) in float32 (nb1796)
# and a conditional of an int literal and a uint64 as int64 (nb2037). Which answer is Numba's is
# not settled, so they are left out of the comparison (and named here) rather than fitted.
ENV_DEPENDENT = {"nb1796", "nb2037"}

N_BODIES = 2800   # about 1 in 4 is refused by Numba (a float operand of a bitwise operator)
MIN_COMPARED = 2000
N_INPUTS = 24
SEED = 2026


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, str(path))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_numba_typing_differential_cpu(tmp_path):
    lang, _ = H.import_cufunc()
    specs = NB.bodies(N_BODIES, SEED)
    path = tmp_path / "nb_generated_bodies.py"
    NB.write_module(specs, str(path))
    mod = _load(path, "nb_generated_bodies")
    ref = NB.numba_reference(str(path), "nb_generated_bodies", specs, N_INPUTS, NB.workers())
    cases, refused = [], []
    for name, lines, argt, ret in specs:
        rt, vals = ref[name]
        if rt is None:
            refused.append((name, vals))
            continue
        if name in ENV_DEPENDENT:
            continue
        c = H.Case(getattr(mod, name), argt, ret, inputs=NB.inputs(argt, N_INPUTS, NB._seed(name)),
                   typing="numba", label=name)
        c.numba = (rt, vals)
        c.lines = lines
        cases.append(c)
    out = NB.host_results(cases, lang)
    problems = []
    compared = 0
    for c in cases:
        src = "\n".join(c.lines)
        if c.error is not None:
            problems.append("%s: cufunc failed where Numba compiles:\n%s\n%s"
                            % (c.label, src, c.error[:600]))
            continue
        rt, vals = c.numba
        mine_t, mine = out[id(c)]
        if mine_t != rt:
            problems.append("%s(%s): return type %s, Numba %s\n%s"
                            % (c.label, ", ".join(c.argtypes), mine_t, rt, src))
            continue
        compared += 1
        for i, v in enumerate(vals):
            if v is None:
                continue
            exp = np.array(v, dtype=rt)
            if not H.exact_equal(exp[None], mine[i:i + 1])[0]:
                args = ", ".join("%s(%r)" % (t, x[i]) for t, x in zip(c.argtypes, c.inputs))
                problems.append("%s(%s): cufunc %r, Numba %r\n%s"
                                % (c.label, args, mine[i], exp[()], src))
                break
    msg = "\n\n".join(problems[:8])
    assert not problems, "%d of %d bodies disagree with Numba:\n%s" % (
        len(problems), len(cases), msg)
    assert compared >= MIN_COMPARED, (
        "only %d bodies compared (%d refused by Numba, e.g. %s)"
        % (compared, len(refused), refused[:3]))
