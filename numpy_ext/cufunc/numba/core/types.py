"""``numba.core.types``: cufunc.numba.types under Numba's module path."""
from ..types import *  # noqa: F401,F403
from ..types import __all__  # noqa: F401
