"""``numba.core`` as cufunc.numba spells it: ``errors`` and ``types`` (what Numba programs import
from it)."""
from .. import errors, types  # noqa: F401

__all__ = ["errors", "types"]
