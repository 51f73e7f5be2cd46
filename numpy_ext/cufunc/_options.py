"""The keyword options of cufunc's decorators (vectorize, guvectorize, cuda.jit, cuda.Reduce),
checked the same way everywhere: an option a decorator does not know is an error that names every
such option, never silently dropped (a typo such as ``fastmaht=True`` would otherwise go unseen).

Numba's ``nopython`` is treated as Numba treats it for its CUDA target: cufunc always compiles
without Python objects, so ``nopython=True`` is accepted with a warning that it is redundant, and
``nopython=False`` (or ``forceobj=True``), which asks for object mode, is a TypeError.
"""
import warnings

from .errors import RedundantOptionWarning

__all__ = ["check", "check_typing", "translate_options", "call_rules", "compile_options",
           "TYPINGS"]


def check(where, options, named=(), accepted=(), stacklevel=3):
    """Check the options a decorator did not take as named parameters.

    where: the decorator's name for messages ('vectorize'). options: the leftover keywords.
    named: the options it takes as parameters (only listed in the message). accepted: the names
    it accepts and ignores, documented as such where it is defined. stacklevel: of the warning,
    counted from here (3: the line that called the decorator, which called this).
    """
    unknown = sorted(k for k in options if k not in accepted and k not in ("nopython", "forceobj"))
    if unknown:
        supported = sorted(set(named) | set(accepted) | {"nopython"})
        raise TypeError("%s: unsupported option%s %s (supported: %s)" % (
            where, "s" if len(unknown) > 1 else "", ", ".join(repr(k) for k in unknown),
            ", ".join(supported)))
    if "nopython" in options and not options["nopython"]:
        raise TypeError("%s: nopython=False is not supported: cufunc compiles every function "
                        "without Python objects (there is no object mode); leave nopython out"
                        % where)
    if options.get("forceobj"):
        raise TypeError("%s: forceobj=True is not supported: cufunc has no object mode" % where)
    if "nopython" in options:
        warnings.warn("%s: nopython=True is redundant: cufunc always compiles without Python "
                      "objects" % where, RedundantOptionWarning, stacklevel=stacklevel)


TYPINGS = ("numpy", "numba")


def check_typing(where, typing):
    """The decorators' typing= keyword: "numpy" (the kernel language's NumPy 2 meaning,
    docs/language.md) or "numba" (Numba's typing rules and its call rules: what cufunc.numba makes).
    Returns it; ValueError otherwise."""
    if typing not in TYPINGS:
        raise ValueError("%s: typing must be 'numpy' or 'numba', not %r" % (where, typing))
    return typing


def translate_options(typing):
    """The keywords that carry a typing policy to cufunc.lang.translate. NumPy's typing is
    translate's default, so it is not spelled out: a "numpy" translation is the call it always
    was."""
    return {} if typing == "numpy" else {"typing": typing}


def call_rules(typing):
    """The rules= of the UFunc/GUFunc a decorator makes: Numba's typing comes with Numba's call
    rules (its loop choice and scalar conversion, numba-cuda's ufunc mechanism)."""
    return "numba" if typing == "numba" else "numpy"


def compile_options(fastmath, typing="numpy"):
    """NVRTC's options for a loop's kernel (docs/typing.md, "Fused multiply-add on the GPU").

    fastmath: ``--use_fast_math``. Otherwise NumPy's typing keeps every operation rounded as
    written (``--fmad=false``: a * b + c is never contracted into a fused multiply-add), and
    Numba's typing compiles as numba-cuda does, with NVRTC's defaults, which are NVVM's: a * b + c
    may be contracted, division and square root exact, no flush to zero; the same optimizer then
    makes the same choices for the same arithmetic, so results are numba-cuda's.
    """
    if fastmath:
        return ("--use_fast_math",)
    return () if typing == "numba" else ("--fmad=false",)
