"""``numba.core.errors`` as cufunc.numba spells it: the exceptions and warnings Numba programs
name (in ``except`` clauses and warning filters). Translation errors are cufunc's TypingError
and UnsupportedError; Numba's warnings are classes here that cufunc never issues, so filters on
them keep working."""
from ..errors import (  # noqa: F401 - re-exported
    CompileError, CudaAPIError, CudaSupportError, TypingError, UnsupportedError)

__all__ = ["NumbaError", "TypingError", "UnsupportedError", "CompileError", "CudaAPIError",
           "CudaSupportError", "NumbaWarning", "NumbaPerformanceWarning",
           "NumbaDeprecationWarning", "NumbaPendingDeprecationWarning", "NumbaExperimentalFeatureWarning",
           "NumbaInvalidConfigWarning", "NumbaPedanticWarning", "NumbaTypeSafetyWarning",
           "NumbaValueError", "NumbaTypeError", "NumbaNotImplementedError", "NumbaIndexError"]

# Numba's base of its compile errors: in cufunc they have no common base of their own, so this
# is the tuple of them, which is what an ``except NumbaError:`` clause needs.
NumbaError = (TypingError, UnsupportedError, CompileError)


class NumbaWarning(Warning):
    """Base of Numba's warnings."""


class NumbaPerformanceWarning(NumbaWarning):
    """Numba's warning about slow launches (small grids, host arrays); cufunc issues none."""


class NumbaDeprecationWarning(NumbaWarning, DeprecationWarning):
    """Numba's deprecation warnings."""


class NumbaPendingDeprecationWarning(NumbaWarning, PendingDeprecationWarning):
    """Numba's pending deprecation warnings."""


class NumbaExperimentalFeatureWarning(NumbaWarning):
    """Numba's warning about experimental features."""


class NumbaInvalidConfigWarning(NumbaWarning):
    """Numba's warning about its configuration."""


class NumbaPedanticWarning(NumbaWarning):
    """Numba's pedantic warnings."""


class NumbaTypeSafetyWarning(NumbaWarning):
    """Numba's warning about unsafe casts."""


NumbaValueError = ValueError
NumbaTypeError = TypeError
NumbaNotImplementedError = NotImplementedError
NumbaIndexError = IndexError
