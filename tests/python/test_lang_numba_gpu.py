"""GPU differential of ``typing="numba"`` against numba-cuda.

The bodies of numba_bodies.py (1,000 of them) run on the GPU twice: compiled by numba-cuda
(each body a device function with the body's signature, called from one kernel per batch of
bodies, which is how numba-cuda's vectorize calls a ufunc body too) and translated by cufunc with
typing="numba" (all bodies in one CUDA program, compiled with the options cufunc.numba compiles
with, _options.compile_options). Numba's CPU target gives the expected return types.

The contraction rule (docs/typing.md): cufunc.numba compiles as numba-cuda does, with NVVM's
defaults, so that a * b + c may be contracted into a fused multiply-add by the same optimizer.
Every body must agree with numba-cuda bit for bit, except where numba-cuda's PTX for it holds an
fma instruction (the optimizer's choice of what to fuse, which may differ between the two
translations of one body), and where numba-cuda itself departs from Numba's CPU target (a float
division or modulo by zero) and cufunc gives Numba's CPU answer; both are counted and printed.

A smaller set of bodies also runs through cufunc.vectorize itself, with typing="numba".
"""

import importlib.util
import inspect
import os
import re
import sys

import numpy as np
import pytest

import lang_harness as H
import numba_bodies as NB

pytestmark = pytest.mark.gpu

# Numba's CPU target refuses about a quarter of the generated bodies and numba-cuda a few more
# (only bodies both accept are compared): 1,700 generated leave over 1,000 to compare.
N_BODIES = 1700
N_COMPARED = 1000
N_INPUTS = 64
BATCH = 50
SEED = 7001
N_VECTORIZE = 25


def _numba_cuda():
    numba = NB.import_numba()
    try:
        from numba import cuda
    except Exception as e:   # pragma: no cover - the GPU machine has both
        pytest.skip("numba-cuda is not installed: %s" % e)
    if not cuda.is_available():
        pytest.skip("numba-cuda sees no GPU")
    return numba, cuda


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, str(path))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    specs = NB.bodies(N_BODIES, SEED)
    path = tmp_path_factory.mktemp("nbgpu") / "nb_gpu_bodies.py"
    NB.write_module(specs, str(path))
    mod = _load(path, "nb_gpu_bodies")
    ref = NB.numba_reference(str(path), "nb_gpu_bodies", specs, N_INPUTS,
                             max(1, min(8, os.cpu_count() or 1)))
    live = [s for s in specs if ref[s[0]][0] is not None]
    return specs, mod, ref, live


def _nb_sig(numba, argt, ret):
    ts = tuple(numba.types.boolean if t == "bool" else getattr(numba.types, t) for t in argt)
    r = numba.types.boolean if ret == "bool" else getattr(numba.types, ret)
    return r(*ts)


def _numba_cuda_results(numba, cuda, mod, live, ref):
    """{name: results} of numba-cuda, one kernel per BATCH bodies; bodies numba-cuda's target
    refuses although Numba's CPU target types them (min/max of a bool and a float) are left
    out."""
    out = {}
    accepted = []
    for name, lines, argt, ret in live:
        try:
            dev = cuda.jit(_nb_sig(numba, argt, ref[name][0]), device=True)(getattr(mod, name))
        except numba.core.errors.TypingError:
            continue
        accepted.append((name, lines, argt, ret, dev))
    for start in range(0, len(accepted), BATCH):
        chunk = [c[:4] for c in accepted[start:start + BATCH]]
        devs = {"d_" + c[0]: c[4] for c in accepted[start:start + BATCH]}
        params, body = [], []
        for name, lines, argt, ret in chunk:
            params += ["A_" + name, "B_" + name, "O_" + name]
            body.append("        O_%s[i] = d_%s(A_%s[i], B_%s[i])" % (name, name, name, name))
        src = ("def kern(%s):\n    i = cuda.grid(1)\n    if i < O_%s.shape[0]:\n%s\n"
               % (", ".join(params), chunk[0][0], "\n".join(body)))
        g = dict(devs, cuda=cuda)
        exec(compile(src, "<numba-cuda batch>", "exec"), g)
        kern = cuda.jit(g["kern"])
        args, outs = [], {}
        for name, lines, argt, ret in chunk:
            a, b = NB.inputs(argt, N_INPUTS, NB._seed(name))
            o = cuda.device_array(N_INPUTS, dtype=np.dtype(ref[name][0]))
            args += [cuda.to_device(a), cuda.to_device(b), o]
            outs[name] = o
        kern[(N_INPUTS + 63) // 64, 64](*args)
        cuda.synchronize()
        for name, o in outs.items():
            out[name] = o.copy_to_host()
    return out


def _cufunc_results(lang, mod, live):
    """{name: (return type name, results)} of cufunc (typing="numba") on the GPU: one CUDA
    program for all bodies, compiled as cufunc.numba compiles, run through CuPy's raw kernels."""
    cp = pytest.importorskip("cupy", reason="CuPy runs the batched raw kernel")
    parts = ['#include "cufunc/runtime.cuh"\n']
    results = {}
    for k, (name, lines, argt, ret) in enumerate(live):
        r = lang.translate(getattr(mod, name), argt, ret, typing="numba")
        results[name] = r
        parts.append(re.sub(r'^\s*#\s*include\s+"cufunc/runtime\.cuh"\s*$', "", r.source,
                            flags=re.M))
        parts.append('extern "C" __global__ void cfk%d(const %s *a, const %s *b, %s *o, int n)'
                     " { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = "
                     "%s(a[i], b[i]); }\n"
                     % (k, H._cname(r.arg_types[0]), H._cname(r.arg_types[1]),
                        H._cname(r.return_type), r.name))
    from cufunc import _options
    mod_cu = cp.RawModule(code="".join(parts), options=(
        "-std=c++17", *_options.compile_options(False, "numba"), "-I" + H.TEMPLATES))
    out = {}
    for k, (name, lines, argt, ret) in enumerate(live):
        r = results[name]
        a, b = NB.inputs(argt, N_INPUTS, NB._seed(name))
        o = cp.zeros(N_INPUTS, dtype=H._np_dtype(r.return_type))
        mod_cu.get_function("cfk%d" % k)(((N_INPUTS + 63) // 64,), (64,),
                                         (cp.asarray(a), cp.asarray(b), o, np.int32(N_INPUTS)))
        out[name] = (H._np_dtype(r.return_type).name, cp.asnumpy(o))
    return out


def _has_fma(numba, cuda, fn, argt, rt):
    ptx, _ = cuda.compile_ptx_for_current_device(fn, _nb_sig(numba, argt, rt), device=True)
    return "fma.rn" in ptx


def test_numba_typing_differential_gpu(gpu, generated):
    numba, cuda = _numba_cuda()
    lang, _ = H.import_cufunc()
    specs, mod, ref, live = generated
    assert len(live) >= N_COMPARED, "Numba refused too many generated bodies: %d live" % len(live)
    nbc = _numba_cuda_results(numba, cuda, mod, live, ref)
    cf = _cufunc_results(lang, mod, live)
    problems, fused, exact, departs = [], 0, 0, 0
    compared = [s for s in live if s[0] in nbc]
    assert len(compared) >= N_COMPARED, "%d bodies both Numba targets accept" % len(compared)
    for name, lines, argt, ret in compared:
        rt, cpu_vals = ref[name]
        mine_t, mine = cf[name]
        src = "\n".join(lines)
        if mine_t != rt:
            problems.append("%s: return type %s, Numba %s\n%s" % (name, mine_t, rt, src))
            continue
        theirs = nbc[name]
        same = H.exact_equal(theirs, mine)
        if same.all():
            exact += 1
            continue
        if _has_fma(numba, cuda, getattr(mod, name), argt, rt):
            fused += 1
            continue
        # numba-cuda departing from Numba's CPU target (a float division or modulo by zero):
        # cufunc.numba gives Numba's CPU answer, element by element
        cpu = np.array([0 if v is None else v for v in cpu_vals], dtype=rt)
        known = np.array([v is not None for v in cpu_vals])
        theirs_cpu = H.exact_equal(cpu, theirs)
        mine_cpu = H.exact_equal(cpu, mine)
        if (known & mine_cpu & ~theirs_cpu)[~same].all():
            departs += 1
            continue
        i = int(np.nonzero(~same)[0][0])
        a, b = NB.inputs(argt, N_INPUTS, NB._seed(name))
        problems.append("%s(%s(%r), %s(%r)): cufunc %r, numba-cuda %r, Numba CPU %r\n%s"
                        % (name, argt[0], a[i], argt[1], b[i], mine[i], theirs[i],
                           cpu_vals[i], src))
    print("numba-cuda differential: %d bodies, %d identical, %d differ only where NVVM "
          "fused a multiply-add, %d only where numba-cuda departs from Numba's CPU answer "
          "(cufunc gives Numba's)" % (len(compared), exact, fused, departs))
    assert not problems, "%d bodies disagree with numba-cuda:\n%s" % (
        len(problems), "\n\n".join(problems[:6]))
    assert exact + fused + departs >= N_COMPARED
    assert departs <= 0.02 * len(compared), "numba-cuda departs from Numba in %d bodies" % departs


def _cufunc_numba_vectorize(monkeypatch):
    """cufunc.vectorize with typing="numba": its own keyword where it has one, else the engine's
    translation step given the typing."""
    import functools
    import cufunc
    import cufunc.vectorize as V
    if "typing" in inspect.signature(cufunc.vectorize).parameters:
        return functools.partial(cufunc.vectorize, typing="numba")
    monkeypatch.setattr(V, "_translate", functools.partial(V._translate, typing="numba"))
    return cufunc.vectorize


def test_numba_typing_through_vectorize(gpu, generated, monkeypatch):
    numba, cuda = _numba_cuda()
    specs, mod, ref, live = generated
    vec = _cufunc_numba_vectorize(monkeypatch)
    problems, compared = [], 0
    chosen = [s for s in live if "bool" not in s[2] and ref[s[0]][0] != "bool"]
    for name, lines, argt, ret in chosen[:N_VECTORIZE]:
        rt, cpu_vals = ref[name]
        sig = "%s(%s, %s)" % (rt, argt[0], argt[1])
        try:
            # numba-cuda's target refuses some bodies its CPU target types (min/max of mixed
            # types): only what both Numba targets accept is compared
            nb = numba.vectorize([sig], target="cuda")(getattr(mod, name))
        except numba.core.errors.TypingError:
            continue
        uf = vec([sig])(getattr(mod, name))
        a, b = NB.inputs(argt, N_INPUTS, NB._seed(name))
        got = np.asarray(uf(a, b))
        want = nb(a, b)
        compared += 1
        if got.dtype != want.dtype or not H.exact_equal(want, got).all():
            if not _has_fma(numba, cuda, getattr(mod, name), argt, rt):
                problems.append("%s: cufunc %r, numba-cuda %r\n%s"
                                % (name, got[:4], want[:4], "\n".join(lines)))
    assert compared >= N_VECTORIZE // 2, "numba-cuda refused most bodies: %d compared" % compared
    assert not problems, "\n\n".join(problems[:5])
