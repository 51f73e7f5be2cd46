"""Generated kernel bodies for the differential tests of ``typing="numba"`` against Numba.

``bodies(n, seed)`` writes n functions of two arguments (each a small program: literal
initialisers, assignments, augmented assignments, if/else, for over range(), several returns)
with argument types drawn from bool, the integers and the floats, and, for one in five, a declared
float return type (otherwise the return type is inferred: Numba's unification of all returns).
The programs use the constructs whose typing differs between NumPy and Numba: literals mixed
with small integers and float32, integer widening, true and floor division, ``**`` with literal
exponents, abs/min/max/round/int/float, math functions, comparisons and and/or.

Inputs are finite and moderate (no NaN or infinity; integers of 32 and 64 bits below 2**12),
so that no conversion of a float to an integer is out of range and no signed 64-bit product
overflows: there C, LLVM and CUDA leave the result undefined (Numba's LLVM code may assume a
signed overflow away), and neither side can be compared.

``numba_reference(module_path, specs, target)`` compiles every body with Numba (njit on the CPU,
the NumPy error model of its vectorize; or numba-cuda device functions) and returns, per body,
Numba's return type and results, or the reason Numba refused the body.
"""

import os

import numpy as np

ARG_TYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float32", "float64"]
INT_LITS = ["0", "1", "2", "3", "5", "7", "10", "100", "255", "-1", "-3"]
FLOAT_LITS = ["0.", "0.5", "1.5", "2.0", "-2.25", "3.0", "0.1", "1e-3", "100.0"]


class _Gen:
    def __init__(self, rng):
        self.r = rng

    def pick(self, seq):
        return seq[int(self.r.integers(len(seq)))]

    def lit(self):
        k = self.r.random()
        if k < 0.5:
            return self.pick(INT_LITS)
        if k < 0.95:
            return self.pick(FLOAT_LITS)
        return self.pick(["True", "False"])

    def leaf(self, names):
        k = self.r.random()
        if k < 0.6:
            return self.pick(names)
        return self.lit()

    def expr(self, names, depth):
        if depth <= 0 or self.r.random() < 0.25:
            return self.leaf(names)
        k = self.r.random()
        a = self.expr(names, depth - 1)
        b = self.expr(names, depth - 1)
        if k < 0.45:
            op = self.pick(["+", "-", "*", "+", "-", "*", "/", "//", "%"])
            return "(%s %s %s)" % (a, op, b)
        if k < 0.52:
            # (of an expression of the arguments: Numba folds a constant power with Python's
            # meaning, (-0.25) ** 0.5 is complex)
            return "(%s ** %s)" % (self.rooted(names, depth - 1),
                                   self.pick(["0", "1", "2", "2.0", "0.5"]))
        if k < 0.56:
            return "(%s %s %s)" % (a, self.pick(["&", "|", "^"]), b)
        if k < 0.58:
            return "(%s %s %s)" % (a, self.pick(["<<", ">>"]), self.pick(["1", "2", "3"]))
        if k < 0.64:
            return "(%s if %s else %s)" % (a, self.cond(names, depth - 1), b)
        if k < 0.68:
            # the first operand depends on an argument: Numba prunes the branch of a constant
            return "(%s %s %s)" % (self.rooted(names, depth - 1), self.pick(["and", "or"]), b)
        if k < 0.72:
            return "(-%s)" % a
        if k < 0.76:
            return "abs(%s)" % a
        if k < 0.82:
            return "%s(%s, %s)" % (self.pick(["min", "max"]), a, b)
        if k < 0.85:
            return "max(%s, %s, %s)" % (a, b, self.leaf(names))
        # conversions of the arguments themselves (their values are moderate)
        p = self.pick(names[:2])
        if k < 0.88:
            return "%s(%s)" % (self.pick(["round", "math.floor", "math.ceil", "int"]), p)
        if k < 0.91:
            return "float(%s)" % a
        if k < 0.95:
            # (of expressions of the arguments: a constant call is folded at compile time,
            # by CPython's libm for cufunc and by LLVM for Numba)
            x = self.rooted(names, depth - 1)
            return "math.%s(%s)" % (self.pick(["sqrt", "exp", "log1p", "sin", "atan"]),
                                    "abs(%s)" % x if self.r.random() < 0.7 else p)
        # (not copysign: the sign of a wrapped signed product is what LLVM may assume away,
        # as a signed overflow is undefined for Numba's integer arithmetic)
        return "math.%s(%s, %s)" % (self.pick(["atan2", "hypot"]), self.rooted(names, depth - 1),
                                    b)

    def rooted(self, names, depth):
        """An expression that depends on an argument (never a constant)."""
        a = self.pick(names[:2])
        if self.r.random() < 0.5:
            a = "(%s %s %s)" % (a, self.pick(["+", "-", "*"]), self.expr(names, max(depth, 0)))
        return a

    def cond(self, names, depth):
        # The left operand always depends on an argument: Numba prunes a branch whose
        # condition compares two constants (a literal or a variable assigned once), cufunc
        # only literal conditions (docs/typing.md).
        a = self.rooted(names, min(depth, 1))
        b = self.expr(names, min(depth, 1))
        c = "%s %s %s" % (a, self.pick(["<", "<=", ">", ">=", "==", "!="]), b)
        k = self.r.random()
        if k < 0.15:
            return "not (%s)" % c
        if k < 0.3:
            return "(%s) and (%s > %s)" % (c, self.pick(names[:2]), self.lit())
        return c

    def body(self):
        names = ["a", "b"]
        lines = []
        ind = "    "
        acc = "v0"
        # A float64 accumulator: every type it is given unifies to float64, so its one type
        # is also the type of each of Numba's versions of it (Numba types each assignment on
        # its own, cufunc a variable once: docs/typing.md)
        lines.append("%s%s = %s" % (ind, acc, self.pick(["0.", "0.5", "1.5"])))
        names = names + [acc]
        for _ in range(int(self.r.integers(1, 5))):
            k = self.r.random()
            # The accumulator changes only by augmented assignments and in branches and loops
            # (where Numba unifies the versions of a variable, as cufunc does for the whole
            # function); a plain reassignment would start a new Numba version of its own type.
            if k < 0.5:
                lines.append("%s%s %s= %s" % (ind, acc, self.pick(["+", "-", "*"]),
                                              self.expr(names, 2)))
            elif k < 0.6 and "v1" not in names:
                lines.append("%sv1 = %s" % (ind, self.rooted(names, 1)))
                names = names + ["v1"]
            elif k < 0.78:
                lines.append("%sif %s:" % (ind, self.cond(names, 2)))
                lines.append("%s    %s = %s" % (ind, acc, self.expr(names, 2)))
                if self.r.random() < 0.5:
                    # (not a plain assignment in both branches: the float64 initial value
                    # must reach the merge, or Numba's merged version has the branches' type)
                    lines.append("%selse:" % ind)
                    lines.append("%s    %s += %s" % (ind, acc, self.expr(names, 2)))
            elif k < 0.9:
                lines.append("%sfor i in range(%s):" % (ind, self.pick(["3", "4", "2"])))
                lines.append("%s    %s += %s" % (ind, acc, self.expr(names + ["i"], 1)))
            else:
                lines.append("%sif %s:" % (ind, self.cond(names, 1)))
                lines.append("%s    return %s" % (ind, self.expr(names, 2)))
        lines.append("%sreturn %s" % (ind, self.expr(names, 2)))
        return lines


def bodies(n, seed):
    """[(name, source lines, [arg type names], return type name or None)] of n bodies."""
    g = _Gen(np.random.default_rng(seed))
    out = []
    for k in range(n):
        argt = [g.pick(ARG_TYPES), g.pick(ARG_TYPES)]
        ret = g.pick(["float32", "float64"]) if g.r.random() < 0.2 else None
        name = "nb%d" % k
        out.append((name, ["def %s(a, b):" % name] + g.body(), argt, ret))
    return out


def write_module(specs, path):
    with open(path, "w") as f:
        f.write("import math\n\n\n")
        for name, lines, argt, ret in specs:
            f.write("\n".join(lines) + "\n\n\n")


def inputs(argt, n, seed):
    """n input values per argument (NumPy arrays of the argument dtypes), finite, moderate."""
    rng = np.random.default_rng(seed)
    cols = []
    for t in argt:
        dt = np.dtype(t)
        if dt.kind == "b":
            v = rng.integers(0, 2, n).astype(bool)
        elif dt.kind in "iu":
            info = np.iinfo(dt)
            # 8- and 16-bit integers over their whole range (Numba widens them to int64 first);
            # wider ones small enough that no product of a body's terms overflows int64: a
            # signed overflow is undefined for Numba's LLVM code, which may assume it away
            bound = 2 ** 12 if dt.itemsize >= 4 else 2 ** 16
            lo, hi = max(int(info.min), -bound), min(int(info.max), bound)
            edges = [0, 1, 2, 3, -1, -2, 7, 100, -100]
            if dt.itemsize <= 2:
                edges += [int(info.max), int(info.min)]
            edges = [e for e in edges if info.min <= e <= info.max]
            v = edges + [int(x) for x in rng.integers(lo, hi, n, endpoint=True)]
            v = np.array(v[:n], dtype=dt)
        else:
            edges = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 3.0, 1e-3, -7.25]
            v = list(edges) + list(rng.uniform(-100, 100, n))
            v = np.array(v[:n], dtype=dt)
        rng.shuffle(v)
        cols.append(v)
    return cols


def import_numba():
    """numba, or None when it cannot be imported. numba-cuda 0.30 still reads np.row_stack,
    which NumPy 2.4 removed: give it the alias first."""
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    try:
        import numba
    except Exception:
        return None
    return numba


def _nb_type(numba, name):
    return numba.types.boolean if name == "bool" else getattr(numba.types, name)


def _reference_chunk(args):
    """Compile and run a chunk of bodies with Numba on the CPU (runs in a worker process)."""
    import importlib.util
    import warnings
    numba = import_numba()
    path, modname, chunk, n_inputs = args
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = []
    for name, argt, ret, seed in chunk:
        sig = tuple(_nb_type(numba, t) for t in argt)
        if ret is not None:
            sig = _nb_type(numba, ret)(*sig)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                d = numba.njit(sig, error_model="numpy")(getattr(mod, name))
        except Exception as e:    # Numba refuses the body (a typing error)
            out.append((name, None, "%s: %s" % (type(e).__name__, str(e).splitlines()[0])))
            continue
        # a body returning a constant has a Literal type; its value has the literal's type
        rt = str(numba.types.unliteral(d.nopython_signatures[0].return_type))
        ins = inputs(argt, n_inputs, seed)
        vals = []
        for i in range(n_inputs):
            try:
                vals.append(d(*[c[i] for c in ins]))
            except Exception:   # raised on the CPU (0 ** -1); not compared
                vals.append(None)
        out.append((name, rt, vals))
    return out


def numba_reference(path, modname, specs, n_inputs, workers=2):
    """{name: (Numba's return type name, [value or None per input]) or (None, reason)}."""
    import multiprocessing
    jobs = [(name, argt, ret, _seed(name)) for name, lines, argt, ret in specs]
    nchunk = max(1, min(workers * 4, len(jobs)))
    chunks = [(path, modname, jobs[k::nchunk], n_inputs) for k in range(nchunk)]
    res = {}
    if workers > 1:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(workers) as pool:
            parts = pool.map(_reference_chunk, chunks)
    else:
        parts = [_reference_chunk(c) for c in chunks]
    for part in parts:
        for name, rt, vals in part:
            res[name] = (rt, vals)
    return res


def _seed(name):
    return int(name[2:]) * 7919 + 13


def workers():
    return max(1, min(2, os.cpu_count() or 1))


def host_results(cases, lang):
    """Translate (each case with its own typing), build all with g++ in one library and run:
    {id(case): (return type name, results)}; a case that fails has .error set instead."""
    import ctypes
    import lang_harness as H
    H.translate_all(lang, cases)
    live = [c for c in cases if c.error is None]
    live, lib = H._compile_batch(live, H._host_program, H._gpp, r"\.cpp:(\d+):\d+: error", "g++")
    out = {}
    if lib is None:
        return out
    for k, c in enumerate(live):
        r = c.result
        n = len(c.inputs[0])
        ins = [np.ascontiguousarray(np.asarray(x).astype(H._np_dtype(t)))
               for x, t in zip(c.inputs, r.arg_types)]
        rdt = H._np_dtype(r.return_type)
        res = np.zeros(n, dtype=rdt)
        fn = getattr(lib, "cfentry%d" % k)
        fn.restype = None
        fn(*[x.ctypes.data_as(ctypes.c_void_p) for x in ins],
           res.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(n))
        out[id(c)] = (rdt.name, res)
    return out
